//! The hooks' run-time switch patched into the code: a lock's fast path
//! tests a constant in its own instruction stream instead of loading the
//! switch from memory.
//!
//! The idea is Linux's static keys (`static_branch_unlikely`,
//! `arch/x86/kernel/jump_label.c`), which rewrite a `jmp` into a `nop`.
//! Done from user space, where nothing stops the other threads while the
//! code changes, and from Rust, where a jump site is an `asm goto` that
//! costs the switched-on path registers and hoisting in the tight loops we
//! measured, we patch an immediate operand instead: the site is
//! `mov $imm32, %reg`, and only the low byte of the immediate changes
//! (1 = "the hooks may be on, load the switch", 0 = "off"). The compiler
//! sees an ordinary register result, so both paths compile as before; the
//! switched-off path keeps a register test and a branch, without the load.
//!
//! # The site
//! Every inlined [`may_be_on`] emits one `mov` and records the address of
//! its immediate's low byte in the `scalelock_switch_sites` section (the
//! linker brackets the section with `__start_`/`__stop_` symbols). Sites are
//! assembled as 1: unpatched code is correct whatever the switch says,
//! because the path a 1 leads to loads the switch itself
//! ([`super::any_active`]); a site only ever saves that load. The first
//! such load that finds the switch off ([`settle`]) and every switch
//! change afterwards rewrite all sites to match the switch.
//!
//! # Patching code other threads run
//! The rewrite is one byte store, atomic on x86 at any address, so a CPU
//! fetching the instruction sees the old or the new immediate, never a
//! mix. x86 keeps instruction fetch coherent with stores; a thread may run
//! the old immediate a little longer, which is harmless: a 1 leads to the
//! load of the switch, and a 0 just after the switch went on only starts
//! the counting a little later (as a late Relaxed load would). A
//! [`Held`](super::Held) token records whether an acquisition was hooked,
//! so its release matches it whatever the sites say by then. (HotSpot
//! patches x86 code under running threads on the same grounds: aligned
//! stores of whole operands.)
//!
//! The page is made writable (`mprotect` to read-write-execute) around the
//! store and restored to read-execute. Where that is refused (an SELinux
//! `execmem` denial, PaX), or a site does not hold the `mov` the table
//! names, patching stops for good and every site keeps (or gets back) its
//! 1: the hooks then load the switch, as without this module, and count
//! correctly. The environment variable `SCALELOCK_NO_CODE_PATCHING=1`
//! asks for that from the start. [`patched`] tells which.
//!
//! Two semver-incompatible copies of this crate in one program share the
//! section; each entry names its copy's switch, and each copy patches only
//! its own sites.

use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::vec::Vec;

use super::active;

/// Whether the switch may be on: `false` once the sites are patched for the
/// switch being off; `true` otherwise (then load the switch).
#[inline(always)]
pub(crate) fn may_be_on() -> bool {
    let may: u32;
    // SAFETY: loads an immediate into a register; the section entry is
    // data no code runs. Not `pure`: the compiler must not hoist the `mov`
    // out of a loop, or a running loop would never see a rewrite.
    unsafe {
        asm!(
            // `mov $imm32, %r32` (b8+r, or 41 b8+r for r8d-r15d): the
            // immediate is the instruction's last 4 bytes.
            "movl $1, {may:e}",
            "2:",
            ".pushsection scalelock_switch_sites, \"aR\"",
            ".balign 4",
            // The immediate's low byte and the switch, each relative to
            // its field.
            ".long 2b - 4 - .",
            ".long {flag} - .",
            ".popsection",
            may = out(reg) may,
            flag = sym active::ACTIVE,
            options(att_syntax, nomem, nostack, preserves_flags),
        );
    }
    may != 0
}

/// One entry of the section, as [`may_be_on`] writes it.
#[repr(C)]
struct Site {
    imm: i32,
    flag: i32,
}

impl Site {
    /// The address a field's offset points to.
    fn resolve(field: &i32) -> usize {
        (field as *const i32 as usize).wrapping_add(*field as isize as usize)
    }
}

/// The section's entries. The sentinel entry here (all zeroes, skipped)
/// makes the section, and so its bracketing symbols, exist in every
/// program that can patch, even one whose locks emit no site.
fn sites() -> &'static [Site] {
    let (start, stop): (*const Site, *const Site);
    // SAFETY: two address computations; the entry pushed is data.
    unsafe {
        asm!(
            ".pushsection scalelock_switch_sites, \"aR\"",
            ".balign 4",
            ".long 0, 0",
            ".popsection",
            // Hidden: this program's (or shared object's) own table,
            // addressable PC-relative in a shared object too.
            ".hidden __start_scalelock_switch_sites",
            ".hidden __stop_scalelock_switch_sites",
            "leaq __start_scalelock_switch_sites(%rip), {start}",
            "leaq __stop_scalelock_switch_sites(%rip), {stop}",
            start = out(reg) start,
            stop = out(reg) stop,
            options(att_syntax, nostack, nomem, preserves_flags),
        );
    }
    let len = (stop as usize - start as usize) / core::mem::size_of::<Site>();
    // SAFETY: the linker's bracketing symbols delimit an array of `Site`s
    // (every contribution is 4-aligned, 8 bytes per entry, no padding
    // between them), read-only for the whole run.
    unsafe { core::slice::from_raw_parts(start, len) }
}

/// The immediates (their low bytes' addresses) of this copy of the crate's
/// sites: the entries that name our switch, past the sentinels.
fn our_sites() -> impl Iterator<Item = usize> {
    let flag = &active::ACTIVE as *const _ as usize;
    sites()
        .iter()
        .filter(move |s| s.imm != 0 && Site::resolve(&s.flag) == flag)
        .map(|s| Site::resolve(&s.imm))
}

/// Sites not yet patched (all 1).
const UNSETTLED: u8 = 0;
/// Sites follow the switch.
const PATCHING: u8 = 1;
/// Patching failed: sites are all 1 for good.
const FAILED: u8 = 2;

/// [`UNSETTLED`], [`PATCHING`] or [`FAILED`]; written under [`PATCH`].
static STATE: AtomicU8 = AtomicU8::new(UNSETTLED);

/// Serializes patching, and what the sites say now.
static PATCH: Mutex<u8> = Mutex::new(1);

/// Whether the sites follow the switch (else they all say 1 and the hooks
/// test the switch with a load).
pub(crate) fn patched() -> bool {
    STATE.load(Ordering::Relaxed) == PATCHING
}

/// Called where a site's 1 led to a load that found the switch off: the
/// first time, patches the sites to 0. One load otherwise.
#[inline(always)]
pub(crate) fn settle() {
    if STATE.load(Ordering::Relaxed) == UNSETTLED {
        settle_slow();
    }
}

#[cold]
#[inline(never)]
fn settle_slow() {
    follow_switch();
}

/// The environment variable that keeps the code unpatched (any value but
/// empty or `0`), for systems where even a brief writable code page is
/// unwelcome, or a debugger or binary instrumentation that should see the
/// code as built.
const NO_PATCHING_ENV: &str = "SCALELOCK_NO_CODE_PATCHING";

/// Whether [`NO_PATCHING_ENV`] asks not to patch.
fn patching_refused() -> bool {
    std::env::var_os(NO_PATCHING_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Makes the sites say what the switch says (called after every change
/// of it, and by [`settle`]).
pub(crate) fn follow_switch() {
    let mut now = PATCH.lock().unwrap_or_else(|e| e.into_inner());
    if STATE.load(Ordering::Relaxed) == FAILED {
        return;
    }
    if STATE.load(Ordering::Relaxed) == UNSETTLED && patching_refused() {
        STATE.store(FAILED, Ordering::Relaxed);
        return;
    }
    // Read under the lock: of two racing switch changes, the later
    // patcher sees the later value.
    let want = u8::from(active::load() != 0);
    if STATE.load(Ordering::Relaxed) == PATCHING && *now == want {
        return;
    }
    if write_sites(want).is_ok() {
        *now = want;
        STATE.store(PATCHING, Ordering::Relaxed);
    } else {
        // Put every site back to 1 (a failure after some were patched:
        // one left at 0 would never count again), then stop patching for
        // good.
        write_sites_back();
        *now = 1;
        STATE.store(FAILED, Ordering::Relaxed);
    }
}

/// x86-64's base page size: the granularity of `mprotect` and of how code
/// is mapped (fixed by the architecture; asking the auxiliary vector would
/// add a failure mode, e.g. under valgrind).
const PAGE: usize = 4096;

/// Whether `code` (the opcode byte before the immediate's low byte, and
/// the 4 immediate bytes) is the `mov $0, %r32` or `mov $1, %r32` a site
/// is assembled as (any REX prefix sits before the opcode, unchecked). An
/// `int3` (0xcc) in place of the opcode is a debugger's breakpoint on the
/// `mov`: the debugger puts the opcode back, so the immediate is still ours.
fn is_site(code: [u8; 5]) -> bool {
    let [op, imm @ ..] = code;
    ((0xb8..=0xbf).contains(&op) || op == 0xcc) && imm[0] <= 1 && imm[1..] == [0, 0, 0]
}

/// Rewrites the immediate of every site of this copy of the crate to
/// `value` (0 or 1); an error if a page could not be made writable or a
/// site is not the `mov` it should be.
fn write_sites(value: u8) -> Result<(), ()> {
    let mut imms: Vec<usize> = our_sites().collect();
    // Page by page: one `mprotect` pair per page.
    imms.sort_unstable();
    let mut open_page: Option<usize> = None;
    let result = (|| {
        for &imm in &imms {
            let page = imm & !(PAGE - 1);
            if open_page != Some(page) {
                if let Some(q) = open_page.take() {
                    protect(q, false)?;
                }
                protect(page, true)?;
                open_page = Some(page);
            }
            // SAFETY: the opcode and immediate of a site: 5 bytes of this
            // program's code, mapped and readable.
            let code = unsafe { read_code(imm - 1) };
            if !is_site(code) {
                return Err(());
            }
            if code[1] != value {
                // SAFETY: a byte of a code page made writable above.
                unsafe { store_code_byte(imm, value) };
            }
        }
        Ok(())
    })();
    if let Some(q) = open_page {
        protect(q, false)?;
    }
    result
}

/// After a failure: every site of ours that still holds its `mov` back to
/// 1, going on past any that fail (the pages that could be made writable
/// before can be again).
fn write_sites_back() {
    for imm in our_sites() {
        // SAFETY: as in `write_sites`.
        let code = unsafe { read_code(imm - 1) };
        if is_site(code) && code[1] != 1 && protect(imm & !(PAGE - 1), true).is_ok() {
            // SAFETY: a byte of a site's immediate, writable now.
            unsafe { store_code_byte(imm, 1) };
            let _ = protect(imm & !(PAGE - 1), false);
        }
    }
}

/// The 5 code bytes at `at`, read with plain loads in assembly: a
/// sanitizer (ThreadSanitizer) has no shadow memory for code and must not
/// see the access.
///
/// # Safety
/// `at..at + 5` is mapped and readable.
unsafe fn read_code(at: usize) -> [u8; 5] {
    let mut code = [0u8; 5];
    for (i, byte) in code.iter_mut().enumerate() {
        // SAFETY: a load from a readable byte (the caller's contract).
        unsafe {
            asm!(
                "movb ({at}), {b}",
                at = in(reg) at + i,
                b = out(reg_byte) *byte,
                options(att_syntax, nostack, readonly, preserves_flags),
            );
        }
    }
    code
}

/// Stores `value` to the code byte at `at`: one byte store, atomic on x86
/// (see the module docs), in assembly for the reason given at
/// [`read_code`].
///
/// # Safety
/// `at` is a writable byte of a site's immediate.
unsafe fn store_code_byte(at: usize, value: u8) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "movb {v}, ({at})",
            at = in(reg) at,
            v = in(reg_byte) value,
            options(att_syntax, nostack, preserves_flags),
        );
    }
}

/// Makes the code page at `page` writable (and still executable), or back
/// to read-execute.
fn protect(page: usize, writable: bool) -> Result<(), ()> {
    use rustix::mm::{MprotectFlags, mprotect};
    let mut flags = MprotectFlags::READ | MprotectFlags::EXEC;
    if writable {
        flags |= MprotectFlags::WRITE;
    }
    // SAFETY: `page` is a page of this program's code (it holds a site);
    // changing its protection never unmaps it, and it stays executable
    // throughout, so threads running in it carry on.
    unsafe { mprotect(page as *mut _, PAGE, flags) }.map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_is_a_mov_of_0_or_1_to_a_32_bit_register() {
        assert!(is_site([0xb8, 1, 0, 0, 0])); // movl $1, %eax
        assert!(is_site([0xbf, 0, 0, 0, 0])); // movl $0, %edi (or %r15d)
        assert!(!is_site([0xb8, 2, 0, 0, 0]));
        assert!(!is_site([0xb8, 1, 0, 1, 0]));
        assert!(!is_site([0xe9, 1, 0, 0, 0])); // a jmp
        assert!(!is_site([0xb7, 0, 0, 0, 0]));
        assert!(is_site([0xcc, 0, 0, 0, 0])); // a breakpoint on the mov
    }

    #[test]
    fn every_site_of_this_binary_holds_its_mov_and_the_switch_s_value() {
        // The test binary's own sites (its locks inline `any_active`).
        let on = any_active_somewhere();
        // Under the patching lock: no other test rewrites sites meanwhile.
        let _patching = PATCH.lock().unwrap_or_else(|e| e.into_inner());
        let mut ours = 0;
        for imm in our_sites() {
            ours += 1;
            // SAFETY: the entry names a site's opcode and immediate.
            let code = unsafe { read_code(imm - 1) };
            assert!(is_site(code), "site {imm:#x}: {code:02x?}");
            // Unit tests switch nothing: with the sites patched, they say
            // what the switch says (1 for lockdep, which starts on).
            if patched() {
                assert_eq!(code[1], u8::from(on), "site {imm:#x}");
            }
        }
        assert!(ours > 0);
    }

    #[test]
    fn putting_the_sites_back_leaves_every_one_at_1() {
        any_active_somewhere();
        {
            // Under the patching lock, as a failed patcher would.
            let mut now = PATCH.lock().unwrap_or_else(|e| e.into_inner());
            write_sites_back();
            for imm in our_sites() {
                // SAFETY: the entry names a site's opcode and immediate.
                assert_eq!(unsafe { read_code(imm - 1) }[1], 1, "site {imm:#x}");
            }
            *now = 1;
        }
        // And back to what the switch says.
        follow_switch();
    }

    #[inline(never)]
    fn any_active_somewhere() -> bool {
        crate::hook::any_active()
    }
}
