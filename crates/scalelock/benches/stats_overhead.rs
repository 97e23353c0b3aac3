//! What lock statistics and lockdep cost on an uncontended path, side by
//! side in one process.
//!
//! The contenders, each one thread taking and releasing a lock in a loop:
//! - `bare`: a minimal test-and-set lock with no hook calls;
//! - `hooked`: the same lock calling the hook API (`hook::start`,
//!   `acquired`, `release`) as the crate's locks do. In a build without the
//!   features the hooks compile to nothing, so `hooked / bare` shows that
//!   "off" costs nothing. In a build with them it runs three ways: both
//!   switched off at run time (`hooked-off`: the one Relaxed flag load),
//!   statistics on (`hooked-stats`, hold times sampled 1 in
//!   `stats::DEFAULT_HOLD_SAMPLE`), lockdep on (`hooked-lockdep`);
//! - `seqlock-write` / `seqlock-read`: the real SeqLock paths, the same ways;
//! - `qspinlock`, `qrwlock-read` / `qrwlock-write`, `percpu-read` /
//!   `percpu-write`: the queued locks' lock/unlock (read or write) through
//!   their `lock_api` guards, the same ways.
//!
//! Every round runs every contender in alternating order; the report gives
//! per contender the median ns/op and the median of its per-round ratio to
//! its baseline (`bare` for the hooked lock, the switched-off run of the
//! same path for the real locks). Run both builds, quietly:
//! ```text
//! cargo bench -p scalelock --bench stats_overhead
//! cargo bench -p scalelock --bench stats_overhead --features stats,lockdep
//! ```
//! (env `ROUNDS`, `RUNTIME_MS` override the defaults; `HOLD_SAMPLE` sets
//! the hold-time sampling rate, `stats::set_hold_sample`.) Comparing the
//! SeqLock lines of the two builds compares two processes: re-run both a
//! few times before trusting a difference.

use std::hint::black_box;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use scalelock::hook::{self, Held};
use scalelock::{
    Access, ClassRef, LockClass, LockKind, PerCpuRwLock, QRwLock, QSpinLock, RawPerCpuRwLock,
    RawQRwLock, RawQSpinLock, SeqLock,
};

mod common;
use common::{alternating, env_u64, median};

static BENCH: LockClass = LockClass::new("stats-overhead");

/// A test-and-set lock, optionally calling the hooks.
struct TasLock {
    locked: AtomicU8,
    class: ClassRef,
}

impl TasLock {
    /// Spins until the lock is taken (contended path of both variants).
    #[cold]
    fn spin(&self) {
        while self
            .locked
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    #[inline]
    fn try_take(&self) -> bool {
        self.locked
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn lock_bare(&self) {
        if !self.try_take() {
            self.spin();
        }
    }

    #[inline]
    fn unlock_bare(&self) {
        self.locked.store(0, Ordering::Release);
    }

    /// `lock_bare` with the hooks a lock of this crate calls, as it calls
    /// them: the switch tested first.
    #[inline]
    fn lock_hooked(&self) -> Held {
        if !hook::any_active() {
            self.lock_bare();
            return Held::NONE;
        }
        let addr = self as *const Self as usize;
        let mut p = hook::start(self.class, LockKind::Other, addr, Access::Write);
        if !self.try_take() {
            p.contended();
            self.spin();
        }
        p.acquired()
    }

    #[inline]
    fn unlock_hooked(&self, held: Held) {
        self.unlock_bare();
        held.release(self as *const Self as usize);
    }
}

/// `n` lock/unlock pairs of each kind; each loop in a function of its own
/// so that the paths are compiled alike.
#[inline(never)]
fn loop_bare(tas: &TasLock, n: u64) {
    for _ in 0..n {
        tas.lock_bare();
        black_box(tas);
        tas.unlock_bare();
    }
}

#[inline(never)]
fn loop_hooked(tas: &TasLock, n: u64) {
    for _ in 0..n {
        let held = tas.lock_hooked();
        black_box(tas);
        tas.unlock_hooked(held);
    }
}

#[inline(never)]
fn loop_seq_write(seq: &SeqLock<u64>, n: u64) {
    for i in 0..n {
        seq.write(black_box(i));
    }
}

#[inline(never)]
fn loop_seq_read(seq: &SeqLock<u64>, n: u64) {
    for _ in 0..n {
        black_box(seq.read());
    }
}

#[inline(never)]
fn loop_qspin(l: &QSpinLock<u64>, n: u64) {
    for _ in 0..n {
        *l.lock() += 1;
    }
}

#[inline(never)]
fn loop_qrw_read(l: &QRwLock<u64>, n: u64) {
    for _ in 0..n {
        black_box(*l.read());
    }
}

#[inline(never)]
fn loop_qrw_write(l: &QRwLock<u64>, n: u64) {
    for _ in 0..n {
        *l.write() += 1;
    }
}

#[inline(never)]
fn loop_percpu_read(l: &PerCpuRwLock<u64>, n: u64) {
    for _ in 0..n {
        black_box(*l.read());
    }
}

#[inline(never)]
fn loop_percpu_write(l: &PerCpuRwLock<u64>, n: u64) {
    for _ in 0..n {
        *l.write() += 1;
    }
}

/// What a contender measures.
#[derive(Clone, Copy)]
enum Path {
    Bare,
    Hooked,
    SeqWrite,
    SeqRead,
    QSpin,
    QRwRead,
    QRwWrite,
    PerCpuRead,
    PerCpuWrite,
}

/// The real locks' paths after the SeqLock's, each compared with itself
/// switched off: (name, path).
const LOCK_PATHS: [(&str, Path); 5] = [
    ("qspinlock", Path::QSpin),
    ("qrwlock-read", Path::QRwRead),
    ("qrwlock-write", Path::QRwWrite),
    ("percpu-read", Path::PerCpuRead),
    ("percpu-write", Path::PerCpuWrite),
];

/// Which hooks are switched on while it runs.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    #[allow(dead_code)] // only in builds with the features
    Stats,
    #[allow(dead_code)]
    Lockdep,
}

struct Contender {
    name: String,
    path: Path,
    mode: Mode,
    /// Index of the contender it is compared with.
    baseline: usize,
}

fn contenders() -> Vec<Contender> {
    let c = |name: &str, path, mode, baseline| Contender {
        name: name.to_string(),
        path,
        mode,
        baseline,
    };
    let mut v = vec![c("bare", Path::Bare, Mode::Off, 0)];
    if cfg!(any(feature = "stats", feature = "lockdep")) {
        v.push(c("hooked-off", Path::Hooked, Mode::Off, 0));
        if cfg!(feature = "stats") {
            v.push(c("hooked-stats", Path::Hooked, Mode::Stats, 0));
        }
        if cfg!(feature = "lockdep") {
            v.push(c("hooked-lockdep", Path::Hooked, Mode::Lockdep, 0));
        }
        let w = v.len();
        v.push(c("seqlock-write-off", Path::SeqWrite, Mode::Off, w));
        if cfg!(feature = "stats") {
            v.push(c("seqlock-write-stats", Path::SeqWrite, Mode::Stats, w));
        }
        if cfg!(feature = "lockdep") {
            v.push(c("seqlock-write-lockdep", Path::SeqWrite, Mode::Lockdep, w));
        }
        let r = v.len();
        v.push(c("seqlock-read-off", Path::SeqRead, Mode::Off, r));
        if cfg!(feature = "stats") {
            v.push(c("seqlock-read-stats", Path::SeqRead, Mode::Stats, r));
        }
        for (name, path) in LOCK_PATHS {
            let b = v.len();
            v.push(c(&format!("{name}-off"), path, Mode::Off, b));
            if cfg!(feature = "stats") {
                v.push(c(&format!("{name}-stats"), path, Mode::Stats, b));
            }
            if cfg!(feature = "lockdep") {
                v.push(c(&format!("{name}-lockdep"), path, Mode::Lockdep, b));
            }
        }
    } else {
        v.push(c("hooked (features off)", Path::Hooked, Mode::Off, 0));
        let w = v.len();
        v.push(c(
            "seqlock-write (features off)",
            Path::SeqWrite,
            Mode::Off,
            w,
        ));
        let r = v.len();
        v.push(c(
            "seqlock-read (features off)",
            Path::SeqRead,
            Mode::Off,
            r,
        ));
        for (name, path) in LOCK_PATHS {
            let b = v.len();
            v.push(c(&format!("{name} (features off)"), path, Mode::Off, b));
        }
    }
    v
}

fn switch(mode: Mode) {
    #[cfg(feature = "stats")]
    if mode == Mode::Stats {
        scalelock::stats::enable();
    } else {
        scalelock::stats::disable();
    }
    #[cfg(feature = "lockdep")]
    scalelock::lockdep::set_enabled(mode == Mode::Lockdep);
    let _ = mode;
}

/// Runs `path` for `runtime`; ns per operation.
fn run(path: Path, runtime: Duration) -> f64 {
    let start = Instant::now();
    let ops = run_batches(path, |ops| start.elapsed() < runtime || ops == 0);
    start.elapsed().as_nanos() as f64 / ops as f64
}

/// Runs `path` in batches of `BATCH` operations while `more(ops so far)`;
/// returns the operations run.
fn run_batches(path: Path, mut more: impl FnMut(u64) -> bool) -> u64 {
    const BATCH: u64 = 4096;
    let tas = TasLock {
        locked: AtomicU8::new(0),
        class: ClassRef::of(&BENCH),
    };
    let seq: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&BENCH));
    let class = ClassRef::of(&BENCH);
    let qspin = QSpinLock::from_raw(RawQSpinLock::with_class(class), 0);
    let qrw = QRwLock::from_raw(RawQRwLock::with_class(class), 0);
    let percpu = PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(class), 0);
    let mut ops = 0u64;
    while more(ops) {
        match path {
            Path::Bare => loop_bare(&tas, BATCH),
            Path::Hooked => loop_hooked(&tas, BATCH),
            Path::SeqWrite => loop_seq_write(&seq, BATCH),
            Path::SeqRead => loop_seq_read(&seq, BATCH),
            Path::QSpin => loop_qspin(&qspin, BATCH),
            Path::QRwRead => loop_qrw_read(&qrw, BATCH),
            Path::QRwWrite => loop_qrw_write(&qrw, BATCH),
            Path::PerCpuRead => loop_percpu_read(&percpu, BATCH),
            Path::PerCpuWrite => loop_percpu_write(&percpu, BATCH),
        }
        ops += BATCH;
    }
    ops
}

/// `COUNT_PATH=NAME` (a contender's name without its suffix: `qspinlock`,
/// `percpu-read`, ...): runs only that path, with the hooks switched off
/// (or, `COUNT_MODE=stats` in a `stats` build, statistics on),
/// for `COUNT_OPS` operations (default 1,000,000) and no clock, for an
/// instruction count under valgrind (`scripts/hooks_off_instructions.sh`),
/// which no code layout moves as it moves a time.
fn count_path(name: &str) {
    let path = match name {
        "bare" => Path::Bare,
        "hooked" => Path::Hooked,
        "seqlock-write" => Path::SeqWrite,
        "seqlock-read" => Path::SeqRead,
        _ => match LOCK_PATHS.iter().find(|(n, _)| *n == name) {
            Some(&(_, path)) => path,
            None => panic!("COUNT_PATH: no path named {name:?}"),
        },
    };
    let target = env_u64("COUNT_OPS", 1_000_000);
    let (mode, how) = match std::env::var("COUNT_MODE").as_deref() {
        Ok("stats") if cfg!(feature = "stats") => (Mode::Stats, "statistics switched on"),
        Ok("off") | Err(_) => (Mode::Off, "hooks switched off"),
        Ok(other) => panic!("COUNT_MODE: {other:?} is not off or stats (in a stats build)"),
    };
    switch(mode);
    let ops = run_batches(path, |ops| ops < target);
    println!("{name}: {ops} operations, {how}");
}

/// The hold-time sampling rate in effect; none without `stats` (it printed
/// "1 in 64" there, neither the default, 257, nor anything in effect).
fn hold_sample() -> String {
    #[cfg(feature = "stats")]
    return format!("1 in {}", scalelock::stats::hold_sample());
    #[cfg(not(feature = "stats"))]
    "none (no stats feature)".to_string()
}

fn main() {
    if let Ok(name) = std::env::var("COUNT_PATH") {
        count_path(&name);
        return;
    }
    let rounds = env_u64("ROUNDS", 7) as usize;
    let runtime = Duration::from_millis(env_u64("RUNTIME_MS", 200));
    let list = contenders();
    #[cfg(feature = "stats")]
    scalelock::stats::set_hold_sample(env_u64(
        "HOLD_SAMPLE",
        u64::from(scalelock::stats::DEFAULT_HOLD_SAMPLE),
    ) as u32);
    println!(
        "stats_overhead: 1 thread, uncontended, {rounds} rounds x {} ms, features: stats={} lockdep={}, hold sample {}",
        runtime.as_millis(),
        cfg!(feature = "stats"),
        cfg!(feature = "lockdep"),
        hold_sample(),
    );
    let samples = alternating(rounds, list.len(), |i| {
        switch(list[i].mode);
        run(list[i].path, runtime)
    });
    switch(Mode::Off);
    println!(
        "{:<30} {:>10} {:>22}",
        "contender", "ns/op", "ratio to baseline"
    );
    for (i, c) in list.iter().enumerate() {
        let ratios: Vec<f64> = samples[i]
            .iter()
            .zip(&samples[c.baseline])
            .map(|(a, b)| a / b)
            .collect();
        println!(
            "{:<30} {:>10.2} {:>14.3} ({})",
            c.name,
            median(&samples[i]),
            median(&ratios),
            list[c.baseline].name
        );
    }
}
