//! `StdPlatform`: futex sleeping (rustix), membarrier fences, one queue node
//! per thread.

use std::sync::OnceLock;
use std::time::Instant;

use super::{Platform, TimedPlatform};
use crate::qnode::{NodeIndex, QNode};
use crate::sync::atomic::AtomicU32;

#[path = "std_fence.rs"]
mod fence;
#[path = "std_nodes.rs"]
mod nodes;

pub use self::fence::asymmetric_fences_active;
#[doc(hidden)]
pub use self::nodes::{hog_queue_nodes, queue_node_of_this_thread};

/// The default platform with `std` (see the module docs of `platform`).
#[derive(Debug, Clone, Copy, Default)]
pub struct StdPlatform;

// SAFETY: futex wait/wake have exactly the contract `Platform` asks for
// (Linux re-checks the word under the futex bucket lock); off Linux, `wait`
// yields and returns, which is a permitted spurious return. Under Miri too:
// rustix passes the futex address to the variadic `syscall` as a pointer to
// an atomic, which Miri rejects, and sleeping protocols are loom's job. The fence pair is
// argued in `std_fence.rs`; the node table in `std_nodes.rs`.
unsafe impl Platform for StdPlatform {
    #[inline]
    fn relax() {
        core::hint::spin_loop();
    }

    #[inline]
    fn yield_now() {
        std::thread::yield_now();
    }

    #[inline]
    fn sleep_ns(ns: u64) {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }

    #[inline]
    fn now_ns() -> u64 {
        base().elapsed().as_nanos() as u64
    }

    #[inline]
    fn wait(word: &AtomicU32, expected: u32) {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            use rustix::thread::futex;
            // EAGAIN (value changed) and EINTR are the spurious returns the
            // contract allows; the caller re-checks its condition.
            let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        {
            let _ = (word, expected);
            std::thread::yield_now();
        }
    }

    #[inline]
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            use rustix::thread::futex;
            let timeout = futex::Timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as _,
                tv_nsec: (timeout_ns % 1_000_000_000) as _,
            };
            // Timeouts, EAGAIN and EINTR are all returns the caller expects.
            let _ = futex::wait(word, futex::Flags::PRIVATE, expected, Some(&timeout));
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        {
            let _ = (word, expected, timeout_ns);
            std::thread::yield_now();
        }
    }

    #[inline]
    fn with_local<R>(f: impl FnOnce(&super::LocalState) -> R) -> Option<R> {
        LOCAL.try_with(|l| f(l)).ok()
    }

    #[inline]
    fn wake_one(word: &AtomicU32) {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            use rustix::thread::futex;
            let _ = futex::wake(word, futex::Flags::PRIVATE, 1);
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        let _ = word;
    }

    #[inline]
    fn wake_all(word: &AtomicU32) {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            use rustix::thread::futex;
            let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        let _ = word;
    }

    #[inline]
    fn light_fence() {
        fence::light();
    }

    #[inline]
    fn heavy_fence() {
        fence::heavy();
    }

    #[inline]
    fn asymmetric_fences() -> bool {
        fence::asymmetric_fences_active()
    }

    #[inline]
    fn light_fence_asymmetric() {
        fence::light_asymmetric();
    }

    #[inline]
    fn queue_node() -> Option<NodeIndex> {
        nodes::current()
    }

    #[inline]
    fn queue_node_returned(index: NodeIndex) {
        nodes::returned(index);
    }

    #[inline]
    fn node(index: NodeIndex) -> &'static QNode {
        nodes::get(index)
    }

    #[inline]
    fn cpu_id() -> usize {
        #[cfg(target_os = "linux")]
        {
            rustix::thread::sched_getcpu()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }

    fn cpu_count() -> usize {
        static COUNT: OnceLock<usize> = OnceLock::new();
        *COUNT.get_or_init(possible_cpus)
    }

    #[inline]
    fn reader_slot() -> Option<usize> {
        crate::reader_table::thread_slot::current()
    }

    #[inline]
    fn reader_slot_assigned() -> Option<usize> {
        crate::reader_table::thread_slot::assigned()
    }

    #[inline]
    fn reader_slot_inline() -> usize {
        // Set by `reader_table::thread_slot` as it hands out and takes back
        // the index. `with`, not `try_with`: `LOCAL` has no destructor, so
        // it is there for the thread's whole life.
        LOCAL.with(|l| l.slot_inline.get())
    }

    #[inline]
    fn reader_slot_bound() -> usize {
        crate::reader_table::thread_slot::bound()
    }

    #[inline]
    fn reader_slots_in_use(f: impl FnMut(usize)) {
        crate::reader_table::thread_slot::in_use(f)
    }
}

/// The instant `now_ns` counts from: the first reading in the process.
#[inline]
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Timed acquisitions take `std::time::Instant`, as parking_lot's do.
impl TimedPlatform for StdPlatform {
    type Instant = Instant;

    #[inline]
    fn deadline_ns(deadline: &Instant) -> u64 {
        // Instants before the base (possible: the caller may have read the
        // clock first) are in the past: 0.
        u64::try_from(deadline.saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX)
    }

    #[inline]
    fn instant_after(timeout: std::time::Duration) -> Option<Instant> {
        Instant::now().checked_add(timeout)
    }
}

std::thread_local! {
    /// The thread's waiting-layer state (`Platform::with_local`).
    static LOCAL: super::LocalState = const { super::LocalState::new() };
}

/// Number of possible CPU ids: the kernel's `possible` mask bounds every id
/// `sched_getcpu` can return, even for CPUs hot-plugged later.
fn possible_cpus() -> usize {
    let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| {
            // "0-127" or "0" or "0-3,8-11": the highest id + 1.
            s.trim()
                .split([',', '-'])
                .filter_map(|n| n.parse::<usize>().ok())
                .max()
                .map(|m| m + 1)
        });
    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Without sysfs, `available_parallelism` alone counts CPUs (the
    // affinity mask's, capped by the cgroup quota), not ids: a process
    // allowed CPUs 64-127 would get 64. The mask's highest id bounds the
    // ids it runs on (one more than the ids we can see if it is widened
    // later: sysfs is the real bound).
    #[cfg(target_os = "linux")]
    let parallelism = {
        use rustix::thread::{CpuSet, sched_getaffinity};
        let highest = sched_getaffinity(None)
            .ok()
            .and_then(|set| (0..CpuSet::MAX_CPU).rev().find(|&c| set.is_set(c)));
        highest.map_or(parallelism, |c| parallelism.max(c + 1))
    };
    from_sysfs.unwrap_or(parallelism).max(parallelism)
}

/// Runs the ignored unit test `name` (its full path) alone in a child
/// process of this test binary, for tests that need a fresh process (what
/// happens before `main`, a fork beside other threads), and asserts it
/// passed.
#[cfg(test)]
fn run_ignored_test_in_child(name: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {stdout}"
    );
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;
    use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

    /// `cpu_count` bounds `cpu_id` (the trait's contract) on every CPU the
    /// process may run on: a thread pinned to each in turn reads its id.
    /// (Where `/sys/devices/system/cpu/possible` cannot be read, e.g. a
    /// sandbox that masks sysfs, the count fell back to
    /// `available_parallelism`, which counts the CPUs of the affinity mask
    /// and the cgroup quota, not their ids: a process allowed CPUs 64-127
    /// got a count of 64 and ids up to 127.)
    #[test]
    fn cpu_id_is_below_cpu_count_on_every_allowed_cpu() {
        std::thread::spawn(|| {
            let allowed = sched_getaffinity(None).unwrap();
            let count = StdPlatform::cpu_count();
            for cpu in (0..CpuSet::MAX_CPU).filter(|&c| allowed.is_set(c)) {
                let mut one = CpuSet::new();
                one.set(cpu);
                sched_setaffinity(None, &one).unwrap();
                let id = StdPlatform::cpu_id();
                assert!(
                    id < count,
                    "cpu_id() {id} on CPU {cpu}, cpu_count() {count}"
                );
            }
        })
        .join()
        .unwrap();
    }

    /// The same check in a sandbox without `/sys/devices/system/cpu/possible`
    /// (a private mount namespace masks it with an empty file) and allowed
    /// only the highest CPU: the count must still bound the id. Needs root
    /// and `unshare`, `mount`, `taskset`; skipped (passes) without them.
    #[test]
    fn cpu_id_is_below_cpu_count_without_sysfs() {
        let allowed = sched_getaffinity(None).unwrap();
        let Some(last) = (0..CpuSet::MAX_CPU).rev().find(|&c| allowed.is_set(c)) else {
            return;
        };
        if last == 0 || !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root and a CPU other than 0");
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "mount --bind /dev/null /sys/devices/system/cpu/possible && exec taskset -c {last} \
             '{}' --exact platform::std_impl::tests::cpu_id_is_below_cpu_count_on_every_allowed_cpu \
             --test-threads=1",
            exe.display()
        );
        let Ok(out) = std::process::Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .output()
        else {
            eprintln!("skipped: no unshare");
            return;
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stdout.contains("running 1 test") {
            eprintln!("skipped: the sandbox did not start: {stderr}");
            return;
        }
        assert!(out.status.success(), "{stdout}{stderr}");
    }
}
