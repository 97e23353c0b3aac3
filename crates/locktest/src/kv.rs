//! The `kv` workload (`locktest bench --workload kv`): threads run a
//! key-value mix against one `HashMap<u64, u64>` behind the lock, after
//! bustle's `read_heavy` mix (Jon Gjengset's concurrent-map benchmark):
//! 94% lookups, 2% inserts, 3% updates, 1% removes.
//!
//! `--read-pct` sets the lookup share (default 94); the rest is split
//! among inserts, updates and removes by `--kv-writes` weights (default
//! `2:3:1`, bustle's). Lookups take the read lock, the rest the write lock.
//!
//! The map has [`KEYS`] possible keys (spread over `u64` by a mixing
//! function) and starts with [`PREFILL`] of them, so lookups mostly hit;
//! inserts and removes keep the fill near `insert / (insert + remove)` of
//! the keys (2/3 with the default weights). Each thread picks keys
//! uniformly at random, so every thread touches the whole map, as a shared
//! cache's users do. The run reports the share of lookups that hit.

use std::collections::HashMap;
use std::fmt;
use std::hint::black_box;

use crossbeam_utils::CachePadded;

use crate::harness::{self, Quiet, Spec};
use crate::lockable::{LockRole, Lockable};
use crate::pct::Pct;
use crate::rng::{MILLION, Rng};
use crate::stats::Stats;

/// The protected map.
pub type Map = HashMap<u64, u64>;

/// Distinct keys the threads draw from.
pub const KEYS: u32 = 1 << 16;
/// Keys in the map when the run starts: three quarters.
pub const PREFILL: u32 = KEYS / 4 * 3;

/// How the non-lookup share splits: insert, update, remove weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvMix {
    /// Weight of inserts.
    pub insert: u32,
    /// Weight of updates (lookup and change a value in place).
    pub update: u32,
    /// Weight of removes.
    pub remove: u32,
}

impl KvMix {
    /// bustle's `read_heavy`: 2% insert, 3% update, 1% remove.
    pub const READ_HEAVY: KvMix = KvMix {
        insert: 2,
        update: 3,
        remove: 1,
    };
    /// bustle's `read_heavy` lookup share.
    pub const DEFAULT_READ: Pct = Pct::whole(94);

    /// Parses `INSERT:UPDATE:REMOVE` weights (`2:3:1`).
    pub fn parse(s: &str) -> Result<KvMix, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let nums: Option<Vec<u32>> = parts.iter().map(|p| p.trim().parse().ok()).collect();
        match nums.as_deref() {
            Some(&[insert, update, remove])
                if insert.max(update).max(remove) <= 1000 && insert + update + remove > 0 =>
            {
                Ok(KvMix {
                    insert,
                    update,
                    remove,
                })
            }
            _ => Err(format!(
                "'{s}' is not INSERT:UPDATE:REMOVE weights (three whole numbers up to 1000, \
                 not all 0, e.g. 2:3:1)"
            )),
        }
    }

    /// The shares of lookups, inserts, updates and removes at lookup share
    /// `read` (they add up to 100%).
    pub fn shares(self, read: Pct) -> [Pct; 4] {
        let writes = u64::from(MILLION - read.ppm());
        let sum = u64::from(self.insert + self.update + self.remove);
        let w = [self.insert, self.update, self.remove].map(u64::from);
        let mut s = w.map(|x| writes * x / sum);
        // The rounding remainder goes to the last kind with a weight, so a
        // weight of 0 gets no share.
        let last = (0..3).rev().find(|&i| w[i] > 0).unwrap_or(2);
        s[last] += writes - s.iter().sum::<u64>();
        [u64::from(read.ppm()), s[0], s[1], s[2]].map(|x| Pct::from_ppm(x as u32))
    }

    /// `94/2/3/1`: the four shares at `read`, in percent.
    pub fn describe(self, read: Pct) -> String {
        let s = self.shares(read);
        format!("{}/{}/{}/{}", s[0], s[1], s[2], s[3])
    }
}

/// `2:3:1`.
impl fmt::Display for KvMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.insert, self.update, self.remove)
    }
}

/// Key number `i` spread over `u64` (splitmix64's finalizer: a bijection,
/// so distinct numbers stay distinct keys).
fn key(i: u32) -> u64 {
    let mut z = u64::from(i).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The map the run starts from: [`PREFILL`] keys, room for all [`KEYS`].
fn prefilled() -> Map {
    let mut map = HashMap::with_capacity(KEYS as usize);
    map.extend((0..PREFILL).map(|i| (key(i), u64::from(i))));
    map
}

/// One run of the mix with lock type `L` playing `role`: the statistics
/// and the share of lookups that hit (`None` when no lookup ran, at
/// `--read-pct 0`).
pub fn run<L: Lockable<Map>>(
    spec: &Spec,
    role: &'static LockRole,
    read: Pct,
    mix: KvMix,
) -> Result<(Stats, Option<f64>), String> {
    // A line of its own, as in `bench`'s lock workload.
    let lock = CachePadded::new(L::with_role(prefilled(), role));
    let [r, i, u, _] = mix.shares(read).map(Pct::ppm);
    let (to_insert, to_update) = (r + i, r + i + u);
    let run = harness::run(spec, &mut Quiet(|| lock.state()), |w| {
        let mut rng = Rng::new(w.index as u64);
        let (mut ops, mut lookups, mut hits) = (0u64, 0u64, 0u64);
        // An operation counts if it ended before the stop (see `bench`).
        loop {
            let k = key(rng.below(KEYS));
            let roll = rng.below(MILLION);
            if roll < r {
                let hit = lock.with_read(|m| m.get(&k).copied());
                lookups += 1;
                hits += u64::from(black_box(hit).is_some());
            } else if roll < to_insert {
                lock.with_write(|m| m.insert(k, ops));
            } else if roll < to_update {
                lock.with_write(|m| m.get_mut(&k).map(|v| *v = v.wrapping_add(1)));
            } else {
                lock.with_write(|m| m.remove(&k));
            }
            if w.stopped() {
                break;
            }
            ops += 1;
        }
        (ops, (lookups, hits))
    })?;
    let (lookups, hits) = run.found.iter().fold((0, 0), |a, f| (a.0 + f.0, a.1 + f.1));
    let hit_rate = (lookups > 0).then(|| hits as f64 / lookups as f64);
    Ok((run.stats(), hit_rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_add_up_and_print() {
        let m = KvMix::READ_HEAVY;
        assert_eq!(m.describe(KvMix::DEFAULT_READ), "94/2/3/1");
        let shares = m.shares(Pct::parse("99.9").unwrap());
        assert_eq!(shares.iter().map(|s| s.ppm()).sum::<u32>(), MILLION);
        assert_eq!(
            m.describe(Pct::parse("99.9").unwrap()),
            "99.9/0.0333/0.05/0.0167"
        );
        assert_eq!(KvMix::parse("2:3:1"), Ok(m));
        assert_eq!(
            KvMix::parse("0:1:0").unwrap().describe(Pct::whole(50)),
            "50/0/50/0"
        );
        for bad in ["", "2:3", "2:3:1:4", "0:0:0", "a:b:c", "-1:2:3", "2000:1:1"] {
            assert!(KvMix::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_zero_weight_gets_no_share() {
        // 1:2:0 means no removes; the rounding remainder must not become one.
        let m = KvMix::parse("1:2:0").unwrap();
        for r in [
            Pct::whole(99),
            Pct::whole(0),
            Pct::parse("99.9999").unwrap(),
        ] {
            assert_eq!(m.shares(r)[3].ppm(), 0, "{}", m.describe(r));
        }
    }

    static TEST: LockRole = LockRole::new("kv-test");

    #[test]
    fn keys_are_distinct_and_lookups_mostly_hit() {
        let mut seen: Vec<u64> = (0..KEYS).map(key).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), KEYS as usize);

        let spec = Spec::new("kv-test", 2, std::time::Duration::from_millis(30));
        let (stats, hits) =
            run::<parking_lot::RwLock<Map>>(&spec, &TEST, KvMix::DEFAULT_READ, KvMix::READ_HEAVY)
                .unwrap();
        assert!(stats.total > 0);
        let hits = hits.unwrap();
        assert!((0.6..0.9).contains(&hits), "hit rate {hits}");
        // All reads: the fill stays at the prefill.
        let (_, hits) =
            run::<parking_lot::RwLock<Map>>(&spec, &TEST, Pct::whole(100), KvMix::READ_HEAVY)
                .unwrap();
        let hits = hits.unwrap();
        assert!((hits - 0.75).abs() < 0.02, "hit rate {hits}");
    }

    /// At `--read-pct 0` no lookup runs: the JSON's `hit_rate` ("the share
    /// of lookups that found their key") said 0, every lookup missed.
    #[test]
    fn a_run_without_lookups_has_no_hit_rate() {
        let spec = Spec::new("kv-test", 1, std::time::Duration::from_millis(10));
        let (stats, hits) =
            run::<parking_lot::RwLock<Map>>(&spec, &TEST, Pct::whole(0), KvMix::READ_HEAVY)
                .unwrap();
        assert!(stats.total > 0);
        assert_eq!(hits, None);
    }
}
