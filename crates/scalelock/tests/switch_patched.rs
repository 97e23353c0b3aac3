//! The hooks' switch patched into the code (x86-64 Linux): the sites are
//! patched once a lock found the hooks off, the counting follows the switch
//! through every rewrite (the seqlock and PerCpuRwLock reads' sites are
//! folded into their fast paths' tests, the qspinlock's is a `mov`; a
//! PerCpuRwLock read counts whether its lock has an id or not), and readers running through the sites while
//! another thread rewrites them keep working and are counted only while
//! the switch is on. Then the same in a child process with patching
//! refused (`SCALELOCK_NO_CODE_PATCHING=1`): the hooks load the switch and
//! count the same.
//! One test in this process: the switch and the code are process-wide
//! (the other, a sandbox set up after the first patch, runs in a child).
//! Run: `cargo test -p scalelock --release --features stats --test switch_patched`
#![cfg(feature = "stats")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use scalelock::stats;
use scalelock::{
    ClassRef, LockClass, PerCpuRwLock, QSpinLock, RawPerCpuRwLock, RawQSpinLock, SeqLock,
};

static C: LockClass = LockClass::new("patched-seqlock");
static S: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&C));
static M: LockClass = LockClass::new("patched-qspinlock");
static P: LockClass = LockClass::new("patched-percpu");

fn counts() -> (u64, u64) {
    let snap = stats::snapshot();
    let reads = snap
        .class("patched-seqlock")
        .map_or(0, |c| c.read.acquisitions);
    let locks = snap
        .class("patched-qspinlock")
        .map_or(0, |c| c.write.acquisitions);
    (reads, locks)
}

/// Reads of the PerCpuRwLocks, and how many took the slot (fast).
fn percpu_counts() -> (u64, u64) {
    stats::snapshot()
        .class("patched-percpu")
        .map_or((0, 0), |c| (c.read.acquisitions, c.events.fast_reads))
}

fn percpu() -> PerCpuRwLock<u64> {
    PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&P)), 0)
}

const NO_PATCHING: &str = "SCALELOCK_NO_CODE_PATCHING";

#[test]
fn the_sites_follow_the_switch() {
    // As the crate reads it: any value but empty or `0` refuses.
    let refused = std::env::var_os(NO_PATCHING).is_some_and(|v| !v.is_empty() && v != "0");
    follow_the_switch(
        !refused
            && cfg!(all(
                target_arch = "x86_64",
                target_os = "linux",
                target_pointer_width = "64"
            )),
    );
    if refused {
        return;
    }
    // Again in a child process, this test alone, with patching refused.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_sites_follow_the_switch", "--nocapture"])
        .env(NO_PATCHING, "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    let err = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "child failed:\n{out}\n{err}");
    assert!(out.contains("1 passed"), "child ran no test:\n{out}");
}

fn follow_the_switch(expect_patching: bool) {
    // Lockdep starts on when compiled in: the switch is off once it is not.
    #[cfg(feature = "lockdep")]
    scalelock::lockdep::set_enabled(false);
    let m = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&M)), 0u64);
    assert!(!stats::is_enabled());
    // The first hooked read finds the switch off and patches the sites.
    assert_eq!(S.read(), 0);
    assert_eq!(scalelock::hook::switch_is_patched(), expect_patching);
    *m.lock() += 1;
    assert_eq!(counts(), (0, 0));
    // A PerCpuRwLock read with the hooks off: the lock gets its id and
    // goes biased.
    let p = percpu();
    assert_eq!(*p.read(), 0);
    // SAFETY: only reads the state for its Debug output.
    assert!(format!("{:?}", unsafe { p.raw() }).contains("biased"));
    assert_eq!(percpu_counts(), (0, 0));

    // Every rewrite: counted exactly while on, not at all while off.
    for round in 1..=20u64 {
        stats::enable();
        // A lock without an id yet, read first while on.
        let fresh = percpu();
        for _ in 0..round {
            S.read();
            *m.lock() += 1;
            assert_eq!(*p.read(), 0);
        }
        assert_eq!(*fresh.read(), 0);
        stats::disable();
        for _ in 0..7 {
            S.read();
            *m.lock() += 1;
            assert_eq!(*p.read(), 0);
            assert_eq!(*fresh.read(), 0);
        }
        let want: u64 = (1..=round).sum();
        assert_eq!(counts(), (want, want), "after round {round}");
        // Every read while on took its slot and was counted: `p`'s biased
        // reads, and `fresh`'s first, whose slow path gave it its id and
        // then read the slot.
        assert_eq!(
            percpu_counts(),
            (want + round, want + round),
            "after round {round}"
        );
    }
    assert_eq!(scalelock::hook::switch_is_patched(), expect_patching);

    // Readers and lockers run through the sites while this thread rewrites
    // them: nothing breaks, the data stays consistent, and what was counted
    // lies between the operations done while surely on and all of them.
    stats::reset();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let m = Arc::new(m);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, done, m) = (stop.clone(), done.clone(), m.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    S.read();
                    *m.lock() += 1;
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for _ in 0..2000 {
        stats::enable();
        std::hint::spin_loop();
        stats::disable();
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let all = done.load(Ordering::Relaxed);
    let (reads, locks) = counts();
    assert!(reads <= all && locks <= all, "{reads} {locks} of {all}");
    assert_eq!(*m.lock(), 1 + 20 * 7 + (1..=20u64).sum::<u64>() + all);

    // Switched off, all sites are the no-op again: nothing more counted.
    let before = counts();
    for _ in 0..100 {
        S.read();
        *m.lock() += 1;
    }
    assert_eq!(counts(), before);
}

/// A program that sandboxes itself after the sites were patched off:
/// `prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)` (Linux 6.3; a seccomp
/// filter refusing writable-and-executable `mprotect` does the same), so
/// that code pages can no longer be made writable. Switching on then
/// fails to patch, and the sites must still end up saying "may be on":
/// the acquisitions made while on are counted. In a child process (the
/// switch, the code and the prctl are process-wide; the prctl cannot be
/// undone).
#[test]
fn a_sandbox_after_the_patch_loses_no_acquisition() {
    const CHILD: &str = "SCALELOCK_TEST_MDWE_CHILD";
    const NAME: &str = "a_sandbox_after_the_patch_loses_no_acquisition";
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return;
    }
    if std::env::var_os(CHILD).is_none() {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture"])
            .env(CHILD, "1")
            .env_remove(NO_PATCHING)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&child.stdout);
        let err = String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "child failed:\n{out}\n{err}");
        assert!(out.contains("1 passed"), "child ran no test:\n{out}");
        return;
    }
    #[cfg(feature = "lockdep")]
    scalelock::lockdep::set_enabled(false);
    static K: LockClass = LockClass::new("patched-sandboxed");
    let m = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&K)), 0u64);
    *m.lock() += 1;
    if !scalelock::hook::switch_is_patched() {
        return; // patching refused here already
    }
    // PR_SET_MDWE (65), PR_MDWE_REFUSE_EXEC_GAIN (1).
    let ret: isize;
    // SAFETY: a raw prctl(2) with integer arguments.
    unsafe {
        core::arch::asm!("syscall", inlateout("rax") 157isize => ret,
            in("rdi") 65usize, in("rsi") 1usize, in("rdx") 0usize, in("r10") 0usize,
            in("r8") 0usize, lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    if ret != 0 {
        println!("PR_SET_MDWE refused ({ret}): kernel before 6.3");
        return;
    }
    stats::enable();
    for _ in 0..10 {
        *m.lock() += 1;
    }
    stats::disable();
    let counted = stats::snapshot()
        .class("patched-sandboxed")
        .map_or(0, |c| c.write.acquisitions);
    assert_eq!(
        counted,
        10,
        "switch_is_patched: {}",
        scalelock::hook::switch_is_patched()
    );
}
