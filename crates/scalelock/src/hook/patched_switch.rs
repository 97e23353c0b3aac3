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
//! its immediate's low byte in the `scalelock_switch_sites64` section (the
//! linker brackets the section with `__start_`/`__stop_` symbols). Sites are
//! assembled as 1: unpatched code is correct whatever the switch says,
//! because the path a 1 leads to loads the switch itself
//! ([`super::any_active`]); a site only ever saves that load. The first
//! such load that finds the switch off ([`settle`]) and every switch
//! change afterwards rewrite all sites to match the switch.
//!
//! A second kind of site serves a fast path that already tests some of a
//! word's low bits: the seqlock read's odd sequence, the PerCpuRwLock
//! read's mode (`FAST` and `SYM`, tested on the state with `FAST`
//! flipped). [`masked_or_may_be_on`] is that test, `testq $imm32, %reg`
//! and a jump, with the switch folded into the mask (the immediate's high
//! byte: 0x80 = may be on, 0 = off; the word has its top bit set whenever
//! the caller's path must not run with the hooks on, so 0x80 sends it to
//! the caller's second look), in the `scalelock_mask_sites64` section. There
//! the jump replaces the one the path has anyway, so it costs no
//! instruction.
//!
//! # Patching code other threads run
//! The rewrite is one byte store, atomic on x86 at any address, so a CPU
//! fetching the instruction sees the old or the new immediate, never a
//! mix. x86 keeps instruction fetch coherent with stores; a thread may run
//! the old immediate a little longer, which is harmless: a 1 (0x80) leads
//! to the load of the switch, and a 0 just after the switch went on only starts
//! the counting a little later (as a late Relaxed load would). A
//! [`Held`](super::Held) token records whether an acquisition was hooked,
//! so its release matches it whatever the sites say by then. (HotSpot
//! patches x86 code under running threads on the same grounds: aligned
//! stores of whole operands.)
//!
//! The page is made writable (`mprotect` to read-write-execute) around the
//! store and restored to read-execute. Where that is refused (an SELinux
//! `execmem` denial, PaX), or a site does not hold the instruction the
//! table names, patching stops for good and every site keeps (or gets back) its
//! 1: the hooks then load the switch, as without this module, and count
//! correctly. (A site patched to 0 on a page that can no longer be made
//! writable, a sandbox set up since, gets its 1 back through
//! `/proc/self/mem`; a kernel that refuses that too leaves it saying
//! "off".) The environment variable `SCALELOCK_NO_CODE_PATCHING=1`
//! asks for that from the start. [`patched`] tells which.
//!
//! Two semver-incompatible copies of this crate in one program share the
//! section; each entry names its copy's switch, and each copy patches only
//! its own sites. Their sites can share a code page (a function that
//! inlines locks of both copies), and a copy that made a page read-execute
//! again under another's store would crash it: every copy takes one lock
//! around its changes of protection, [`CodePages`], a symbol that the
//! linker makes one for all the copies in the program (or shared object).
//! A copy from before that lock does not take it.

use core::arch::asm;
use core::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::Mutex;
use std::vec::Vec;

use super::active;

/// The two site sections' names (macros: `asm!` takes only literals), one
/// for the sites' entries and the reader of the tables.
/// (`64`: their entries are two absolute addresses; a copy of the crate
/// whose entries were two 32-bit offsets named them without it, and the
/// two layouts must not share a section.)
macro_rules! mov_sites {
    () => {
        "scalelock_switch_sites64"
    };
}
macro_rules! mask_sites {
    () => {
        "scalelock_mask_sites64"
    };
}

/// A site's entry in `$section`, in the `asm!` of the instruction it
/// names, right after the label `2:` that ends it: the address of the
/// patched byte (`$back` bytes before the label) and of the switch
/// (operand `flag`) ([`Site`]). Absolute addresses in a writable section:
/// the switch is an exported symbol wherever the crate is linked into a
/// Rust `dylib`, and a PC-relative reference to it from data cannot be
/// linked into a shared object (`R_X86_64_PC32 cannot be used against
/// symbol`); an absolute one is a dynamic relocation like any pointer.
macro_rules! site_entry {
    ($section:expr, $back:literal) => {
        concat!(
            ".pushsection ",
            $section,
            ", \"awR\"\n",
            ".balign 8\n",
            ".quad 2b - ",
            $back,
            "\n",
            ".quad {flag}\n",
            ".popsection"
        )
    };
}

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
            // The immediate's low byte.
            site_entry!(mov_sites!(), "4"),
            may = out(reg) may,
            flag = sym active::ACTIVE,
            options(att_syntax, nomem, nostack, preserves_flags),
        );
    }
    may != 0
}

/// Whether `word & LOW` is not 0, or the switch may be on: one `test` of
/// `word` against a mask patched into it, for a fast path that tests
/// those bits anyway (a seqlock's odd sequence, a PerCpuRwLock's mode),
/// so that the hooks' test costs it no instruction at all. The site is
/// assembled as `testq $(0x80000000 | LOW), %r64`, whose immediate,
/// sign-extended, tests `LOW` and bits 31-63, so a word with its top bit
/// set ([`MASK_SITE_BIT`]) makes the test true whatever its low bits say;
/// patched for "off", the immediate's high byte is 0 and the mask is
/// `LOW`, the plain test. A `true` tells the caller to look again:
/// [`super::any_active`] (which loads the switch where the sites are
/// unpatched), then the low bits. `LOW` is one of [`MASK_SITE_LOWS`].
#[inline(always)]
pub(crate) fn masked_or_may_be_on<const LOW: u8>(word: usize) -> bool {
    const { assert!(MASK_SITE_LOWS[0] == LOW || MASK_SITE_LOWS[1] == LOW) };
    // SAFETY: a test of a register and a branch to the label; the section
    // entry is data no code runs. The label block only returns.
    unsafe {
        asm!(
            // `testq $imm32, %r64` (REX.W a9 for %rax, else REX.W f7 /0):
            // the immediate is the instruction's last 4 bytes, its high
            // byte the last. Written as the signed value the immediate
            // extends to, the only form the assembler takes.
            "testq ${imm}, {word}",
            "2:",
            // The immediate's high byte.
            site_entry!(mask_sites!(), "1"),
            "jnz {look_again}",
            word = in(reg) word,
            imm = const (0x8000_0000u32 | LOW as u32) as i32,
            flag = sym active::ACTIVE,
            look_again = label { return true; },
            options(att_syntax, nomem, nostack),
        );
    }
    false
}

/// The low bits a [`masked_or_may_be_on`] site may test: the seqlock's odd
/// bit, and the PerCpuRwLock state's `FAST | SYM`.
pub(crate) const MASK_SITE_LOWS: [u8; 2] = [1, 3];

/// The top bit [`masked_or_may_be_on`] needs set in its word.
pub(crate) const MASK_SITE_BIT: usize = 1 << (usize::BITS - 1);

/// One entry of a site section, as [`may_be_on`] and
/// [`masked_or_may_be_on`] write them: the patched byte's address and the
/// switch's.
#[repr(C)]
struct Site {
    imm: u64,
    flag: u64,
}

/// The two kinds of site, each in a section of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// [`may_be_on`]'s `movl $imm32, %r32`; the byte patched is the
    /// immediate's low one: 1 = may be on, 0 = off.
    Mov,
    /// [`masked_or_may_be_on`]'s `testq $imm32, %r64`; the byte patched is
    /// the immediate's high one: 0x80 = may be on, 0 = off.
    Mask,
}

impl Kind {
    /// The byte a site of this kind holds when the hooks may be on
    /// (`true`, as assembled) or are off.
    fn byte(self, may_be_on: bool) -> u8 {
        match (self, may_be_on) {
            (Kind::Mov, on) => u8::from(on),
            (Kind::Mask, true) => 0x80,
            (Kind::Mask, false) => 0,
        }
    }

    /// The patched byte of the site at `at` (that byte's address), if the
    /// code there is the instruction this kind of site is assembled as,
    /// holding one of its two bytes.
    ///
    /// # Safety
    /// `at` is a site's patched byte: for [`Kind::Mov`] the byte before it
    /// and the 3 after it, for [`Kind::Mask`] the 5 before it, are mapped
    /// and readable.
    unsafe fn current(self, at: usize) -> Option<u8> {
        match self {
            Kind::Mov => {
                // SAFETY: the opcode and the immediate (the caller's contract).
                let code: [u8; 5] = unsafe { read_code(at - 1) };
                is_mov_site(code).then_some(code[1])
            }
            Kind::Mask => {
                // SAFETY: the opcode (and ModRM) and the immediate, which
                // ends at `at` (the caller's contract).
                let code: [u8; 6] = unsafe { read_code(at - 5) };
                is_mask_site(code).then_some(code[5])
            }
        }
    }
}

/// The entries of section `$name` (see [`sites`]).
macro_rules! section {
    ($name:expr) => {{
        let (start, stop): (*const Site, *const Site);
        // SAFETY: two address computations; the entry pushed is data.
        unsafe {
            asm!(
                concat!(".pushsection ", $name, ", \"awR\""),
                ".balign 8",
                ".quad 0, 0",
                ".popsection",
                // Hidden: this program's (or shared object's) own table,
                // addressable PC-relative in a shared object too.
                concat!(".hidden __start_", $name),
                concat!(".hidden __stop_", $name),
                concat!("leaq __start_", $name, "(%rip), {start}"),
                concat!("leaq __stop_", $name, "(%rip), {stop}"),
                start = out(reg) start,
                stop = out(reg) stop,
                options(att_syntax, nostack, nomem, preserves_flags),
            );
        }
        let len = (stop as usize - start as usize) / core::mem::size_of::<Site>();
        // SAFETY: the linker's bracketing symbols delimit an array of
        // `Site`s (every contribution is 8-aligned, 16 bytes per entry, no
        // padding between them), written only by the dynamic linker's
        // relocations, before any of this code runs.
        unsafe { core::slice::from_raw_parts(start, len) }
    }};
}

/// A section's entries. The sentinel entry pushed here (all zeroes,
/// skipped) makes the section, and so its bracketing symbols, exist in
/// every program that can patch, even one whose locks emit no site.
fn sites(kind: Kind) -> &'static [Site] {
    match kind {
        Kind::Mov => section!(mov_sites!()),
        Kind::Mask => section!(mask_sites!()),
    }
}

/// The patched bytes' addresses of this copy of the crate's sites, of
/// both kinds: the entries that name our switch, past the sentinels.
fn our_sites() -> impl Iterator<Item = (Kind, usize)> {
    let flag = &active::ACTIVE as *const _ as usize;
    [Kind::Mov, Kind::Mask].into_iter().flat_map(move |kind| {
        sites(kind)
            .iter()
            .filter(move |s| s.imm != 0 && s.flag == flag as u64)
            .map(move |s| (kind, s.imm as usize))
    })
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
    // Without waiting: a thread that is patching (another, or this one,
    // whose patching allocates, and an allocator built on a lock of this
    // crate comes back here) makes the sites follow the switch anyway,
    // and the caller has already loaded the switch. Waiting here deadlocked
    // such an allocator at the first patch, on its own thread.
    match PATCH.try_lock() {
        Ok(now) => follow_switch_locked(now),
        Err(std::sync::TryLockError::Poisoned(e)) => follow_switch_locked(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => {}
    }
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
    follow_switch_locked(PATCH.lock().unwrap_or_else(|e| e.into_inner()));
}

/// [`follow_switch`], holding [`PATCH`] (`now`: what the sites say).
fn follow_switch_locked(mut now: std::sync::MutexGuard<'_, u8>) {
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
    if write_sites(want == 1).is_ok() {
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
/// the 4 immediate bytes) is the `mov $0, %r32` or `mov $1, %r32` a
/// [`Kind::Mov`] site is assembled as (any REX prefix sits before the
/// opcode, unchecked). An `int3` (0xcc) in place of the opcode is a
/// debugger's breakpoint on the `mov`: the debugger puts the opcode back,
/// so the immediate is still ours.
fn is_mov_site(code: [u8; 5]) -> bool {
    let [op, imm @ ..] = code;
    ((0xb8..=0xbf).contains(&op) || op == 0xcc) && imm[0] <= 1 && imm[1..] == [0, 0, 0]
}

/// Whether `code` (the 2 bytes before the immediate, and the 4 immediate
/// bytes) is the `testq $(0x80000000 | LOW), %r64` or `testq $LOW, %r64`
/// a [`Kind::Mask`] site is assembled as, `LOW` one of
/// [`MASK_SITE_LOWS`]: `REX.W a9 imm32` (for `%rax`) or `REX.W f7 /0
/// imm32` with a register operand (ModRM `11 000 rrr`). The REX prefix,
/// where a debugger's breakpoint would go, is not checked.
fn is_mask_site(code: [u8; 6]) -> bool {
    let [b0, b1, imm @ ..] = code;
    (b1 == 0xa9 || (b0 == 0xf7 && b1 & 0xf8 == 0xc0))
        && MASK_SITE_LOWS.contains(&imm[0])
        && imm[1..3] == [0, 0]
        && (imm[3] == 0 || imm[3] == 0x80)
}

// The word of [`CodePages`]: a common symbol, which the linker makes one
// word for every copy of this crate in the program (or shared object:
// hidden, as the site tables are), so that they all lock the same word.
// (A definition in a COMDAT group fails under fat LTO, which assembles
// the copies' `global_asm!` as one file: a label defined twice.)
core::arch::global_asm!(
    ".hidden scalelock_code_pages",
    ".comm scalelock_code_pages, 4, 4",
);

unsafe extern "C" {
    /// See the `global_asm!` above (zero at start, as all `.bss`); only
    /// ever used as an atomic.
    static scalelock_code_pages: AtomicU32;
}

/// Held while code pages are writable: the lock that every copy of this
/// crate in the program shares (see the module docs), taken by spinning
/// (it is held only for a few `mprotect` calls and byte stores, never
/// while allocating). One copy's `PATCH` serializes its own patchers.
struct CodePages(&'static AtomicU32);

impl CodePages {
    fn lock() -> Self {
        // SAFETY: a 4-byte, 4-aligned word of static memory that only
        // atomics touch (`AtomicU32` has `u32`'s layout).
        let word = unsafe { &scalelock_code_pages };
        while word
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        CodePages(word)
    }
}

impl Drop for CodePages {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Rewrites every site of this copy of the crate to say "may be on"
/// (`on`) or "off"; an error if a page could not be made writable or a
/// site is not the instruction it should be.
fn write_sites(on: bool) -> Result<(), ()> {
    let mut bytes: Vec<(usize, Kind)> = our_sites().map(|(kind, at)| (at, kind)).collect();
    // Page by page: one `mprotect` pair per page.
    bytes.sort_unstable_by_key(|&(at, _)| at);
    // No other copy changes a page's protection until ours is back.
    let _pages = CodePages::lock();
    let mut open_page: Option<usize> = None;
    let result = (|| {
        for &(at, kind) in &bytes {
            let page = at & !(PAGE - 1);
            if open_page != Some(page) {
                if let Some(q) = open_page.take() {
                    protect(q, false)?;
                }
                protect(page, true)?;
                open_page = Some(page);
            }
            // SAFETY: a site's patched byte and the instruction bytes
            // before it: this program's code, mapped and readable.
            let now = unsafe { kind.current(at) }.ok_or(())?;
            let want = kind.byte(on);
            if now != want {
                // SAFETY: a byte of a code page made writable above.
                unsafe { store_code_byte(at, want) };
            }
        }
        Ok(())
    })();
    if let Some(q) = open_page {
        protect(q, false)?;
    }
    result
}

/// After a failure: every site of ours that still holds its instruction
/// back to "may be on", going on past any that fail. A page that can no
/// longer be made writable (a sandbox set up since the sites were patched
/// off: `PR_SET_MDWE`, a seccomp filter on `mprotect`) gets the byte
/// through `/proc/self/mem`, as a debugger writes a breakpoint (the kernel
/// copies the one byte: a thread running the site sees the old or the new
/// instruction); left at "off", such a site would never count again.
fn write_sites_back() {
    // Opened before the lock: nothing allocates under it (the short path
    // is made a C string on the stack).
    // The calling thread's view (`/proc/self` is the main thread's, whose
    // memory is gone once it exited while other threads run on).
    let open = |path| std::fs::OpenOptions::new().write(true).open(path).ok();
    let mem = open("/proc/thread-self/mem").or_else(|| open("/proc/self/mem"));
    // As in `write_sites`.
    let _pages = CodePages::lock();
    for (kind, at) in our_sites() {
        // SAFETY: as in `write_sites`.
        let now = unsafe { kind.current(at) };
        let want = kind.byte(true);
        if now.is_none_or(|b| b == want) {
            continue;
        }
        let page = at & !(PAGE - 1);
        if protect(page, true).is_ok() {
            // SAFETY: a site's patched byte, writable now.
            unsafe { store_code_byte(at, want) };
            let _ = protect(page, false);
        } else if let Some(mem) = &mem {
            use std::os::unix::fs::FileExt;
            let _ = mem.write_at(&[want], at as u64);
        }
    }
}

/// The `N` code bytes at `at`, read with plain loads in assembly: a
/// sanitizer (ThreadSanitizer) has no shadow memory for code and must not
/// see the access.
///
/// # Safety
/// `at..at + N` is mapped and readable.
unsafe fn read_code<const N: usize>(at: usize) -> [u8; N] {
    let mut code = [0u8; N];
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
    fn a_mov_site_is_a_mov_of_0_or_1_to_a_32_bit_register() {
        assert!(is_mov_site([0xb8, 1, 0, 0, 0])); // movl $1, %eax
        assert!(is_mov_site([0xbf, 0, 0, 0, 0])); // movl $0, %edi (or %r15d)
        assert!(!is_mov_site([0xb8, 2, 0, 0, 0]));
        assert!(!is_mov_site([0xb8, 1, 0, 1, 0]));
        assert!(!is_mov_site([0xe9, 1, 0, 0, 0])); // a jmp
        assert!(!is_mov_site([0xb7, 0, 0, 0, 0]));
        assert!(is_mov_site([0xcc, 0, 0, 0, 0])); // a breakpoint on the mov
    }

    #[test]
    fn a_mask_site_is_a_test_of_a_64_bit_register_against_its_two_masks() {
        assert!(is_mask_site([0x48, 0xa9, 1, 0, 0, 0x80])); // testq $0x80000001, %rax
        assert!(is_mask_site([0x48, 0xa9, 1, 0, 0, 0])); // testq $1, %rax
        assert!(is_mask_site([0xf7, 0xc1, 1, 0, 0, 0x80])); // testq $0x80000001, %rcx (or %r9)
        assert!(is_mask_site([0xf7, 0xc7, 1, 0, 0, 0])); // testq $1, %rdi (or %r15)
        assert!(!is_mask_site([0xf7, 0x41, 1, 0, 0, 0x80])); // a memory operand
        assert!(!is_mask_site([0xf7, 0xc8, 1, 0, 0, 0x80])); // f7 /1
        assert!(is_mask_site([0x48, 0xa9, 3, 0, 0, 0x80])); // testq $0x80000003, %rax
        assert!(is_mask_site([0xf7, 0xc3, 3, 0, 0, 0])); // testq $3, %rbx (or %r11)
        assert!(!is_mask_site([0x48, 0xa9, 2, 0, 0, 0x80]));
        assert!(!is_mask_site([0x48, 0xa9, 1, 1, 0, 0x80]));
        assert!(!is_mask_site([0x48, 0xa9, 1, 0, 0, 0x81]));
        assert!(!is_mask_site([0x48, 0xa8, 1, 0, 0, 0x80])); // testb $imm8, %al
    }

    #[test]
    fn each_kind_says_may_be_on_as_assembled() {
        assert_eq!(Kind::Mov.byte(true), 1);
        assert_eq!(Kind::Mov.byte(false), 0);
        assert_eq!(Kind::Mask.byte(true), 0x80);
        assert_eq!(Kind::Mask.byte(false), 0);
    }

    #[test]
    fn every_site_of_this_binary_holds_its_instruction_and_the_switch_s_value() {
        // The test binary's own sites (its locks inline `any_active`, and
        // the seqlock and PerCpuRwLock reads `masked_or_may_be_on`).
        let on = any_active_somewhere();
        // Under the patching lock: no other test rewrites sites meanwhile.
        let _patching = PATCH.lock().unwrap_or_else(|e| e.into_inner());
        let mut ours = [0; 2];
        for (kind, at) in our_sites() {
            ours[kind as usize] += 1;
            // SAFETY: the entry names a site's patched byte.
            let now = unsafe { kind.current(at) };
            assert!(now.is_some(), "{kind:?} site {at:#x}");
            // Unit tests switch nothing: with the sites patched, they say
            // what the switch says (on for lockdep, which starts on).
            if patched() {
                assert_eq!(now, Some(kind.byte(on)), "{kind:?} site {at:#x}");
            }
        }
        assert!(
            ours[Kind::Mov as usize] > 0 && ours[Kind::Mask as usize] > 0,
            "{ours:?}"
        );
    }

    #[test]
    fn putting_the_sites_back_leaves_every_one_saying_may_be_on() {
        any_active_somewhere();
        {
            // Under the patching lock, as a failed patcher would.
            let mut now = PATCH.lock().unwrap_or_else(|e| e.into_inner());
            write_sites_back();
            for (kind, at) in our_sites() {
                // SAFETY: the entry names a site's patched byte.
                let b = unsafe { kind.current(at) };
                assert_eq!(b, Some(kind.byte(true)), "{kind:?} site {at:#x}");
            }
            // A mask site then sends every word to the caller's second
            // look.
            assert!(masked_somewhere::<1>(MASK_SITE_BIT));
            assert!(masked_somewhere::<3>(MASK_SITE_BIT));
            *now = 1;
        }
        // And back to what the switch says.
        follow_switch();
    }

    #[test]
    fn a_mask_site_patched_off_tests_its_low_bits_alone() {
        any_active_somewhere();
        // Under the patching lock: what the sites say stays as `now` says.
        let now = PATCH.lock().unwrap_or_else(|e| e.into_inner());
        if !patched() || *now == 1 {
            // The hooks are on (lockdep starts on), or patching is refused
            // here: the site says "may be on", every word looks again.
            assert!(masked_somewhere::<1>(MASK_SITE_BIT));
            assert!(masked_somewhere::<3>(MASK_SITE_BIT));
            return;
        }
        assert!(!masked_somewhere::<1>(MASK_SITE_BIT));
        assert!(!masked_somewhere::<1>(MASK_SITE_BIT | 6));
        assert!(masked_somewhere::<1>(MASK_SITE_BIT | 1));
        assert!(masked_somewhere::<1>(1));
        // The two-bit mask (a PerCpuRwLock's mode): bits 0 and 1 only.
        assert!(!masked_somewhere::<3>(MASK_SITE_BIT | 4));
        assert!(masked_somewhere::<3>(MASK_SITE_BIT | 2));
        assert!(masked_somewhere::<3>(MASK_SITE_BIT | 1));
        assert!(!masked_somewhere::<3>(4));
    }

    /// Another copy of this crate in the program (see the module docs)
    /// patches its sites, some on the same code pages as ours (a function
    /// that inlines locks of both copies), while ours are rewritten: no
    /// store may find its page made read-execute again by the other
    /// copy's patcher. In a child process, where the switch may go off
    /// and on freely: the other copy is a thread that rewrites sites
    /// without this copy's `PATCH` (it has its own); ours to "may be on",
    /// which is always correct.
    #[test]
    fn another_copy_patching_the_same_pages_meanwhile() {
        const CHILD: &str = "SCALELOCK_TEST_OTHER_COPY_CHILD";
        const NAME: &str =
            "hook::patched_switch::tests::another_copy_patching_the_same_pages_meanwhile";
        if std::env::var_os(CHILD).is_none() {
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&child.stdout);
            let err = String::from_utf8_lossy(&child.stderr);
            assert!(
                child.status.success(),
                "child failed ({}):\n{out}\n{err}",
                child.status
            );
            assert!(out.contains("1 passed"), "child ran no test:\n{out}");
            return;
        }
        // The switch off (lockdep starts on), found off: the sites patched.
        active::set(active::LOCKDEP, false);
        any_active_somewhere();
        if !patched() {
            return; // patching refused here: no page is ever made writable
        }
        let stop = std::sync::Arc::new(core::sync::atomic::AtomicBool::new(false));
        let other = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rewrites = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    assert!(write_sites(true).is_ok());
                    rewrites += 1;
                }
                rewrites
            })
        };
        let start = std::time::Instant::now();
        let mut switches = 0;
        while switches < 20_000 && start.elapsed() < std::time::Duration::from_secs(1) {
            active::set(active::STATS, switches % 2 == 0);
            switches += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let rewrites = other.join().unwrap();
        assert!(rewrites > 0 && switches > 0, "{rewrites} {switches}");
        assert!(patched(), "patching went on");
    }

    #[inline(never)]
    fn any_active_somewhere() -> bool {
        crate::hook::any_active()
    }

    #[inline(never)]
    fn masked_somewhere<const LOW: u8>(word: usize) -> bool {
        masked_or_may_be_on::<LOW>(core::hint::black_box(word))
    }
}
