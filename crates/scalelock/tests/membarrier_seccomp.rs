//! A program that sandboxes itself after it started, with a seccomp
//! filter that refuses `membarrier` (allowlists commonly answer `EPERM` to
//! what they do not list). The process registered for `membarrier` before
//! `main`, and the locks' light fences rely on it: the first heavy fence
//! then aborts, saying why and what to do (it aborted silently); with
//! `SCALELOCK_NO_MEMBARRIER=1` the process never registers and runs on.
#![cfg(all(
    feature = "std",
    target_os = "linux",
    target_arch = "x86_64",
    not(any(loom, shuttle, miri))
))]

use scalelock::PerCpuRwLock;

const NR_MEMBARRIER: u32 = 324;

unsafe fn syscall5(nr: usize, a: usize, b: usize, c: usize, d: usize, e: usize) -> isize {
    let ret: isize;
    // SAFETY: a raw Linux syscall; the caller passes valid arguments.
    unsafe {
        core::arch::asm!("syscall", inlateout("rax") nr as isize => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d, in("r8") e,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret
}

#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// A BPF statement (`ld`, `ret`).
const fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `jeq #k, jt, jf`.
const fn jeq(k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter {
        code: 0x15,
        jt,
        jf,
        k,
    }
}

/// `ld [offset]` of the seccomp data.
const fn ld(offset: u32) -> SockFilter {
    stmt(0x20, offset)
}

/// `ret ERRNO(EPERM)`.
const DENY: SockFilter = stmt(0x06, 0x0005_0000 | 1);
/// `ret ALLOW`.
const ALLOW: SockFilter = stmt(0x06, 0x7fff_0000);

/// Installs `prog` as this thread's seccomp filter (after no_new_privs):
/// raw syscalls and no allocation, so it may run between fork and exec.
/// Returns both `prctl`s' results.
fn install(prog: &[SockFilter]) -> (isize, isize) {
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) and prctl(PR_SET_SECCOMP,
    // SECCOMP_MODE_FILTER, &fprog) with a valid program.
    unsafe {
        (
            syscall5(157, 38, 1, 0, 0, 0),
            syscall5(157, 22, 2, &fprog as *const _ as usize, 0, 0),
        )
    }
}

/// `membarrier` fails with EPERM from here on; everything else is allowed.
fn deny_membarrier() {
    // The syscall number; membarrier: deny.
    let prog = [ld(0), jeq(NR_MEMBARRIER, 0, 1), DENY, ALLOW];
    assert_eq!(install(&prog), (0, 0));
}

/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` fails with EPERM from
/// here on; everything else, the query and the registration included, is
/// allowed (a filter that sorts `membarrier` by its command).
fn deny_the_expedited_barrier() {
    let prog = [
        // The syscall number: not membarrier, allow.
        ld(0),
        jeq(NR_MEMBARRIER, 0, 3),
        // The low half of the first argument, the command: 8,
        // MEMBARRIER_CMD_PRIVATE_EXPEDITED, deny.
        ld(16),
        jeq(8, 0, 1),
        DENY,
        ALLOW,
    ];
    // Between fork and exec: no assertion (it would allocate to panic); a
    // filter that failed to install shows as the child's barrier working.
    let _ = install(&prog);
}

/// Run in a child process, started under `deny_the_expedited_barrier`, by
/// `a_sandbox_from_the_start_that_refuses_the_barrier_falls_back`.
#[test]
#[ignore = "run in a child process"]
fn child_started_in_a_sandbox_writes() {
    let lock = PerCpuRwLock::new(0u32);
    for i in 0..100 {
        drop(lock.read());
        *lock.write() = i;
    }
    println!(
        "child done, asymmetric fences: {}",
        scalelock::platform::asymmetric_fences_active()
    );
}

/// A process started under a seccomp filter that lets it query and
/// register for `membarrier` but refuses the barrier itself: the process
/// decides its fences under that filter (before `main`), so it can still
/// fall back to full fences on both sides, and runs on (it registered,
/// took the fences for asymmetric, and aborted at its first heavy fence).
#[test]
fn a_sandbox_from_the_start_that_refuses_the_barrier_falls_back() {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "child_started_in_a_sandbox_writes",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("SCALELOCK_NO_MEMBARRIER");
    // SAFETY: the hook makes raw syscalls only (async-signal-safe).
    unsafe {
        child.pre_exec(|| {
            deny_the_expedited_barrier();
            Ok(())
        });
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child done, asymmetric fences: false"),
        "child: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run in a child process by the tests below.
#[test]
#[ignore = "run in a child process"]
fn child_sandboxes_itself_then_writes() {
    deny_membarrier();
    let lock = PerCpuRwLock::new(0u32);
    for i in 0..100 {
        drop(lock.read());
        *lock.write() = i;
    }
    println!(
        "child done, asymmetric fences: {}",
        scalelock::platform::asymmetric_fences_active()
    );
}

fn run_child(no_membarrier: bool) -> std::process::Output {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args([
        "--exact",
        "child_sandboxes_itself_then_writes",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    if no_membarrier {
        child.env("SCALELOCK_NO_MEMBARRIER", "1");
    } else {
        child.env_remove("SCALELOCK_NO_MEMBARRIER");
    }
    child.output().unwrap()
}

#[test]
fn a_later_sandbox_without_membarrier_aborts_saying_why() {
    if !scalelock::platform::asymmetric_fences_active() {
        return; // no membarrier on this machine: nothing registered
    }
    let out = run_child(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child ran on without its fences");
    assert!(
        stderr.contains("membarrier") && stderr.contains("SCALELOCK_NO_MEMBARRIER=1"),
        "the abort did not say why: {:?}\n{stderr}",
        out.status
    );
}

#[test]
fn with_scalelock_no_membarrier_a_later_sandbox_runs_on() {
    let out = run_child(true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child done, asymmetric fences: false"),
        "child: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
