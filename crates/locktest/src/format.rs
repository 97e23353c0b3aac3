//! The seed's output format, byte for byte:
//!
//! ```text
//! Running locktest with qspinlock [runtime = 10s, load = 1]
//! Threads = 160, Min/Mean/Max = 77,665/90,153/106,895
//! Threads = 160, Total Rate = 1,441,759 op/s; Percpu Rate = 9,011 op/s
//! ```
//!
//! Reader-writer locks add `r% = 50%, ` before `load` (fractions print as
//! given: `r% = 99.9%`). The key-value workload names itself and its mix
//! instead of a load: `[runtime = 0.5s, workload = kv, r% = 94%, mix =
//! 94/2/3/1]`. Rates are always op/s.

use crate::lockable::Kind;
use crate::pct::Pct;

/// `1234567` -> `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Seconds as the seed prints them: `10s`, `0.5s`, `0.05s`.
pub fn runtime(secs: f64) -> String {
    format!("{secs}s")
}

/// `Running locktest with NAME [runtime = 1s, (r% = 50%, )load = 1]`; a
/// run without work units (a scenario's) has no `load`.
pub fn header(
    lock: &str,
    kind: Kind,
    runtime_s: f64,
    read_pct: Option<Pct>,
    load: Option<u32>,
) -> String {
    let mut params = format!("runtime = {}", runtime(runtime_s));
    if let (Kind::RwLock, Some(r)) = (kind, read_pct) {
        params.push_str(&format!(", r% = {r}%"));
    }
    if let Some(load) = load {
        params.push_str(&format!(", load = {load}"));
    }
    format!("Running locktest with {lock} [{params}]")
}

/// `Running locktest with NAME [runtime = 1s, workload = kv, r% = 94%, mix
/// = 94/2/3/1]`: the key-value workload, whose mix applies to both kinds.
pub fn kv_header(lock: &str, runtime_s: f64, read_pct: Pct, mix: &str) -> String {
    format!(
        "Running locktest with {lock} [runtime = {}, workload = kv, r% = {read_pct}%, mix = {mix}]",
        runtime(runtime_s)
    )
}

/// `Threads = N, Min/Mean/Max = a/b/c`.
pub fn min_mean_max(threads: usize, min: u64, mean: u64, max: u64) -> String {
    format!(
        "Threads = {threads}, Min/Mean/Max = {}/{}/{}",
        thousands(min),
        thousands(mean),
        thousands(max)
    )
}

/// `Threads = N, Total Rate = x op/s; Percpu Rate = y op/s`.
pub fn rates(threads: usize, total_rate: u64, percpu_rate: u64) -> String {
    format!(
        "Threads = {threads}, Total Rate = {} op/s; Percpu Rate = {} op/s",
        thousands(total_rate),
        thousands(percpu_rate)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(47879), "47,879");
        assert_eq!(thousands(1441759), "1,441,759");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn seed_lines() {
        assert_eq!(
            header("rwlock", Kind::RwLock, 10.0, Some(Pct::whole(50)), Some(1)),
            "Running locktest with rwlock [runtime = 10s, r% = 50%, load = 1]"
        );
        assert_eq!(
            header("spinlock", Kind::Mutex, 10.0, None, Some(1)),
            "Running locktest with spinlock [runtime = 10s, load = 1]"
        );
        assert_eq!(
            header("qspinlock", Kind::Mutex, 0.5, Some(Pct::whole(50)), Some(1)),
            "Running locktest with qspinlock [runtime = 0.5s, load = 1]"
        );
        assert_eq!(
            header(
                "qrwlock",
                Kind::RwLock,
                0.5,
                Pct::parse("99.9").ok(),
                Some(1)
            ),
            "Running locktest with qrwlock [runtime = 0.5s, r% = 99.9%, load = 1]"
        );
        assert_eq!(
            kv_header("qrwlock", 0.5, Pct::whole(94), "94/2/3/1"),
            "Running locktest with qrwlock [runtime = 0.5s, workload = kv, r% = 94%, mix = 94/2/3/1]"
        );
        assert_eq!(
            min_mean_max(160, 47879, 53807, 63689),
            "Threads = 160, Min/Mean/Max = 47,879/53,807/63,689"
        );
        assert_eq!(
            rates(160, 860192, 5376),
            "Threads = 160, Total Rate = 860,192 op/s; Percpu Rate = 5,376 op/s"
        );
    }
}
