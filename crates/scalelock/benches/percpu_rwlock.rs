//! Side-by-side benchmark of `PerCpuRwLock` against parking_lot's RwLock,
//! std's RwLock, crossbeam's ShardedLock and scalelock's QRwLock.
//!
//! Three sections:
//! 1. **Throughput**: read shares 50/90/95/99/99.9/100% at 1, 2 and 16
//!    threads. Every round runs each lock once per case, in alternating
//!    order, for `RUNTIME_MS`; the table gives the median over rounds of
//!    throughput, of the ratio to parking_lot and of the ratio to the better
//!    of QRwLock and crossbeam's ShardedLock, each *within the same round*.
//!    A read sums the 4 protected words; a write bumps them (99%: every
//!    100th op per thread, staggered between threads). `percpu` uses the
//!    default table; `percpu-xen` (with `LOCKS=...,percpu-xen`) a table
//!    without inhibition (every write that follows reads revokes the bias).
//! 2. **Write lock+unlock, no readers**, one thread, ns/op, median of rounds;
//!    `percpu` after its first revocation (bias off), `percpu-xen` revoking
//!    on every write (membarrier + scan of the slot indices handed out),
//!    `percpu-xen-sym` the same in the symmetric mode (a table forced
//!    there: full fence + scan).
//! 3. **Primitives** behind the slot choice, ns/op: the per-thread slot
//!    read (lock+unlock) against what a per-CPU slot costs in user space
//!    (`sched_getcpu` + `cmpxchg` claim + release store).
//!
//! Run: `cargo bench -p scalelock --bench percpu_rwlock` (env `ROUNDS`,
//! `RUNTIME_MS`, `THREADS=1,2,16`, `READS=50,90,95,99,99.9,100` (percent),
//! `LOCKS=percpu,sharded,qrwlock,std-rwlock,percpu-xen` override;
//! `SECTIONS=throughput,writes,primitives`; `ORDER=random` draws each op's
//! kind at random, as locktest does, instead of staggering the writes).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use scalelock::{PerCpuRwLock, PerCpuRwLockExt, ReaderTable};

mod common;
use common::{alternating, env_or, env_u64, list, median, timed, write_period};

type Data = [u64; 4];

static XEN: ReaderTable = ReaderTable::with_inhibition(0);

/// Xen's policy in the symmetric mode: every write revokes with a plain
/// full fence (one in `pc_sym_probe` tries the biased mode, and goes back).
static XEN_SYM: ReaderTable = ReaderTable::with_inhibition(0);

trait BenchRw: Send + Sync + 'static {
    fn new() -> Self;
    /// `#[inline(always)]` in every implementation: the read belongs in the
    /// loop, as a read section in a user's function does, whatever size
    /// the inliner gives up at (it left PerCpuRwLock's, the largest, out).
    fn read(&self) -> u64;
    fn write(&self);
}

macro_rules! lock_api_rw {
    ($ty:ty) => {
        impl BenchRw for $ty {
            fn new() -> Self {
                <$ty>::new([0; 4])
            }
            #[inline(always)]
            fn read(&self) -> u64 {
                self.read().iter().sum()
            }
            #[inline]
            fn write(&self) {
                let mut g = self.write();
                for w in g.iter_mut() {
                    *w += 1;
                }
            }
        }
    };
}

lock_api_rw!(parking_lot::RwLock<Data>);
lock_api_rw!(scalelock::QRwLock<Data>);
lock_api_rw!(PerCpuRwLock<Data>);

/// `PerCpuRwLock` on a table without bias inhibition (Xen's policy);
/// `SYM`: on a table of its own forced to the symmetric mode (test
/// support), to time a symmetric revocation.
struct Xen<const SYM: bool>(PerCpuRwLock<Data>);

impl<const SYM: bool> BenchRw for Xen<SYM> {
    fn new() -> Self {
        let table = if SYM {
            XEN_SYM.force_symmetric();
            &XEN_SYM
        } else {
            &XEN
        };
        Xen(PerCpuRwLock::with_table(table, [0; 4]))
    }
    #[inline(always)]
    fn read(&self) -> u64 {
        self.0.read().iter().sum()
    }
    #[inline]
    fn write(&self) {
        let mut g = self.0.write();
        for w in g.iter_mut() {
            *w += 1;
        }
    }
}

impl BenchRw for std::sync::RwLock<Data> {
    fn new() -> Self {
        std::sync::RwLock::new([0; 4])
    }
    #[inline(always)]
    fn read(&self) -> u64 {
        self.read().unwrap().iter().sum()
    }
    #[inline]
    fn write(&self) {
        let mut g = self.write().unwrap();
        for w in g.iter_mut() {
            *w += 1;
        }
    }
}

impl BenchRw for crossbeam_utils::sync::ShardedLock<Data> {
    fn new() -> Self {
        crossbeam_utils::sync::ShardedLock::new([0; 4])
    }
    #[inline(always)]
    fn read(&self) -> u64 {
        self.read().unwrap().iter().sum()
    }
    #[inline]
    fn write(&self) {
        let mut g = self.write().unwrap();
        for w in g.iter_mut() {
            *w += 1;
        }
    }
}

/// Runs `threads` threads for `runtime`, each writing every `write_every`-th
/// op (0: never); returns total Mops/s.
fn run<L: BenchRw>(threads: usize, write_every: u64, runtime: Duration) -> f64 {
    // A line of its own (see the qspinlock bench).
    let lock = Arc::new(CachePadded::new(L::new()));
    let counts = timed(threads, runtime, lock, move |t, lock, stop| {
        // Stagger the writers so 1% means 1% of the mix, not bursts;
        // a countdown, not a division per op.
        let mut countdown: u64 = if write_every == 0 {
            u64::MAX
        } else {
            1 + (t as u64 * 37) % write_every
        };
        let mut ops = 0u64;
        let mut sink = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..64 {
                countdown -= 1;
                if countdown == 0 {
                    countdown = write_every;
                    lock.write();
                } else {
                    sink = sink.wrapping_add(lock.read());
                }
            }
            ops += 64;
        }
        black_box(sink);
        ops
    });
    counts.mops()
}

/// `run` with the writes drawn at random (`ORDER=random`): each op is a
/// write with probability `1 / write_every`, decided by a xorshift draw,
/// as locktest and bustle do. Unlike the staggered countdown, the branch
/// between read and write is unpredictable and the reads between two
/// writes vary (geometrically), which a lock's adaptive policy sees.
fn run_random<L: BenchRw>(threads: usize, write_every: u64, runtime: Duration) -> f64 {
    let threshold = u64::MAX.checked_div(write_every).unwrap_or(0);
    // A line of its own (see the qspinlock bench).
    let lock = Arc::new(CachePadded::new(L::new()));
    let counts = timed(threads, runtime, lock, move |t, lock, stop| {
        let mut rng = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut ops = 0u64;
        let mut sink = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng < threshold {
                    lock.write();
                } else {
                    sink = sink.wrapping_add(lock.read());
                }
            }
            ops += 64;
        }
        black_box(sink);
        ops
    });
    counts.mops()
}

/// ns per write lock+unlock, one thread, no readers.
fn write_cost<L: BenchRw>(runtime: Duration) -> f64 {
    let lock = L::new();
    black_box(lock.read()); // give a per-CPU lock its id and bias
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < runtime {
        for _ in 0..256 {
            lock.write();
        }
        n += 256;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// `write_cost` while another thread keeps a CPU busy reading a different
/// lock of the same table: the membarrier must now interrupt that CPU, and
/// the writer scans that thread's slot (it never names our lock).
fn write_cost_busy<L: BenchRw>(runtime: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        thread::spawn(move || {
            let other = L::new();
            let mut sink = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sink = sink.wrapping_add(other.read());
            }
            black_box(sink);
        })
    };
    thread::sleep(Duration::from_millis(5));
    let ns = write_cost::<L>(runtime);
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    ns
}

type Runner = fn(usize, u64, Duration) -> f64;
type WriteRunner = fn(Duration) -> f64;

/// ns/op of `f`, best of 5 short runs.
fn ns_per_op(mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let n = 2_000_000u64;
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn primitives() {
    println!("\n## Primitives (1 thread, ns/op, best of 5)\n");
    println!("| operation | ns/op |");
    println!("| --- | --- |");
    let pc = PerCpuRwLock::new(1u64);
    black_box(*pc.read());
    let t = ns_per_op(|| {
        black_box(*pc.read());
    });
    println!(
        "| PerCpuRwLock read lock+unlock (per-thread slot: store, compiler fence, loads) | {t:.2} |"
    );
    let pl = parking_lot::RwLock::new(1u64);
    let t = ns_per_op(|| {
        black_box(*pl.read());
    });
    println!("| parking_lot RwLock read lock+unlock (2 atomic RMWs) | {t:.2} |");
    let q = scalelock::QRwLock::new(1u64);
    let t = ns_per_op(|| {
        black_box(*q.read());
    });
    println!("| QRwLock read lock+unlock (2 atomic RMWs) | {t:.2} |");
    // A write every 64 ops: the lock's own policy decides how often the
    // bias is off (revocation, inhibition window).
    let mixed = |read: &dyn Fn(), write: &dyn Fn()| {
        let mut n = 0u32;
        ns_per_op(|| {
            n = n.wrapping_add(1);
            if n.is_multiple_of(64) {
                write()
            } else {
                read()
            }
        })
    };
    let pc2 = PerCpuRwLock::new(1u64);
    let t_pc = mixed(
        &|| {
            black_box(*pc2.read());
        },
        &|| *pc2.write() += 1,
    );
    let t_q = mixed(
        &|| {
            black_box(*q.read());
        },
        &|| *q.write() += 1,
    );
    println!("| PerCpuRwLock: 63 reads + 1 write, per op | {t_pc:.2} |");
    println!("| QRwLock, the same mix, per op | {t_q:.2} |");
    #[cfg(target_os = "linux")]
    {
        let t = ns_per_op(|| {
            black_box(rustix::thread::sched_getcpu());
        });
        println!("| sched_getcpu (vDSO) | {t:.2} |");
        let slots: Vec<CachePadded<AtomicU64>> = (0..256)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect();
        let t = ns_per_op(|| {
            let slot = &slots[rustix::thread::sched_getcpu() % 256];
            if slot
                .compare_exchange(0, 42, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                black_box(());
                slot.store(0, Ordering::Release);
            }
        });
        println!("| per-CPU slot: sched_getcpu + cmpxchg claim + release store | {t:.2} |");
    }
    let slot = CachePadded::new(AtomicU64::new(0));
    let t = ns_per_op(|| {
        if slot
            .compare_exchange(0, 42, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            black_box(());
            slot.store(0, Ordering::Release);
        }
    });
    println!("| cmpxchg claim + release store alone (local line) | {t:.2} |");
    println!(
        "\nasymmetric fences (membarrier) active: {}",
        scalelock::platform::asymmetric_fences_active()
    );
}

/// A comma-separated list of read shares (`READS`), fractions allowed.
fn read_shares() -> Vec<f64> {
    env_or("READS", "50,90,95,99,99.9,100")
        .split(',')
        .map(|r| {
            r.trim()
                .parse()
                .expect("READS must be comma-separated numbers")
        })
        .collect()
}

fn main() {
    let rounds = env_u64("ROUNDS", 5) as usize;
    let runtime = Duration::from_millis(env_u64("RUNTIME_MS", 200));
    let threads = list("THREADS", "1,2,16");
    let sections = env_or("SECTIONS", "throughput,writes,primitives");
    let random = match env_or("ORDER", "staggered").as_str() {
        "staggered" => false,
        "random" => true,
        o => panic!("ORDER must be staggered or random, not {o}"),
    };
    macro_rules! runner {
        ($ty:ty) => {
            if random {
                run_random::<$ty> as Runner
            } else {
                run::<$ty>
            }
        };
    }
    let all: Vec<(&str, Runner)> = vec![
        ("pl-rwlock", runner!(parking_lot::RwLock<Data>)),
        ("percpu", runner!(PerCpuRwLock<Data>)),
        ("sharded", runner!(crossbeam_utils::sync::ShardedLock<Data>)),
        ("qrwlock", runner!(scalelock::QRwLock<Data>)),
        ("std-rwlock", runner!(std::sync::RwLock<Data>)),
        ("percpu-xen", runner!(Xen<false>)),
    ];
    // pl-rwlock, sharded and qrwlock (the baselines) always run.
    let wanted = env_or("LOCKS", "percpu,sharded,qrwlock");
    // A name not in the list (locktest's `percpu-rwlock`) ran a table
    // without the lock, silently.
    for w in wanted.split(',') {
        let known: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        assert!(
            known.contains(&w),
            "LOCKS: no lock named {w:?} (known: {known:?})"
        );
    }
    let locks: Vec<(&str, Runner)> = all
        .into_iter()
        .filter(|(n, _)| {
            ["pl-rwlock", "sharded", "qrwlock"].contains(n) || wanted.split(',').any(|w| w == *n)
        })
        .collect();
    let idx = |name: &str| locks.iter().position(|(n, _)| *n == name).unwrap();
    let (pl, sharded, qrw) = (idx("pl-rwlock"), idx("sharded"), idx("qrwlock"));
    println!(
        "# {rounds} rounds x {} ms, median over rounds; ratios are taken within each round; writes {}",
        runtime.as_millis(),
        if random {
            "at random (ORDER=random)"
        } else {
            "staggered (every n-th op)"
        }
    );
    if sections.contains("throughput") {
        // Refuse a share that cannot be run before any run, not after.
        for r in read_shares() {
            write_period(r);
        }
        println!("\n## Throughput\n");
        println!("| threads | reads | lock | Mops/s | x pl-rwlock | x best of qrwlock, sharded |");
        println!("| --- | --- | --- | --- | --- | --- |");
        for &t in &threads {
            for r in read_shares() {
                let every = write_period(r);
                let samples = alternating(rounds, locks.len(), |i| {
                    (locks[i].1)(t as usize, every, runtime)
                });
                let ratio = |i: usize, base: &dyn Fn(usize) -> f64| -> f64 {
                    median(
                        &(0..rounds)
                            .map(|k| samples[i][k] / base(k))
                            .collect::<Vec<_>>(),
                    )
                };
                for (i, (name, _)) in locks.iter().enumerate() {
                    println!(
                        "| {t} | {r}% | {name} | {:.1} | {:.2} | {:.2} |",
                        median(&samples[i]),
                        ratio(i, &|k| samples[pl][k]),
                        ratio(i, &|k| samples[sharded][k].max(samples[qrw][k]))
                    );
                }
            }
        }
    }
    if !sections.contains("writes") {
        if sections.contains("primitives") {
            primitives();
        }
        return;
    }
    println!("\n## Write lock+unlock, no readers (1 thread, ns/op)\n");
    println!("| lock | ns/op |");
    println!("| --- | --- |");
    let writers: Vec<(&str, WriteRunner)> = vec![
        ("pl-rwlock", write_cost::<parking_lot::RwLock<Data>>),
        (
            "percpu (default: bias off after 1st write)",
            write_cost::<PerCpuRwLock<Data>>,
        ),
        ("percpu-xen (revokes every write)", write_cost::<Xen<false>>),
        (
            "percpu-xen-sym (revokes every write, symmetric)",
            write_cost::<Xen<true>>,
        ),
        (
            "percpu-xen, 1 busy thread reading another lock",
            write_cost_busy::<Xen<false>>,
        ),
        (
            "sharded",
            write_cost::<crossbeam_utils::sync::ShardedLock<Data>>,
        ),
        ("qrwlock", write_cost::<scalelock::QRwLock<Data>>),
        ("std-rwlock", write_cost::<std::sync::RwLock<Data>>),
    ];
    let short = runtime / 2;
    // Alternating, as the throughput section: a slow spell of the machine
    // then hits every lock's rounds, not one lock's whole set.
    let samples = alternating(rounds, writers.len(), |i| (writers[i].1)(short));
    for ((name, _), v) in writers.iter().zip(&samples) {
        println!("| {name} | {:.1} |", median(v));
    }
    if sections.contains("primitives") {
        primitives();
    }
}
