//! What lock classes cost in bytes: nothing without the `stats` and
//! `lockdep` features, a 16-byte `ClassRef` per classed lock with them.
//! Runs in every build (`cargo test` and the feature builds alike).

use std::mem::size_of;

use scalelock::hook::{Held, Pending};
use scalelock::{
    ClassRef, QRwLock, QSpinLock, RawPerCpuRwLock, RawQRwLock, RawQSpinLock, RefreshOnce, SeqLock,
    SeqLockWriteGuard,
};

const INSTRUMENTED: bool = cfg!(any(feature = "stats", feature = "lockdep"));

#[test]
fn sizes() {
    // RefreshOnce is three 128-byte lines either way, the third holding
    // the value's SeqLock; a value that outgrows that line takes more.
    assert_eq!(size_of::<RefreshOnce<u64>>(), 384);
    // The SeqLock's sequence and writer lock: 16 bytes, 32 with a class.
    let seqlock_words = if INSTRUMENTED { 32 } else { 16 };
    assert_eq!(size_of::<SeqLock<[u64; 12]>>(), seqlock_words + 96);
    assert_eq!(size_of::<RefreshOnce<[u64; 12]>>(), 384);
    if INSTRUMENTED {
        assert_eq!(size_of::<RefreshOnce<[u64; 13]>>(), 512);
    } else {
        assert_eq!(size_of::<RefreshOnce<[u64; 14]>>(), 384);
        assert_eq!(size_of::<RefreshOnce<[u64; 15]>>(), 512);
    }
    assert_eq!(
        size_of::<RefreshOnce<[u64; 32]>>(),
        256 + size_of::<SeqLock<[u64; 32]>>().next_multiple_of(128)
    );

    let class = size_of::<ClassRef>();
    if INSTRUMENTED {
        assert_eq!(class, 16);
        // The 4-byte word, then the class (8-aligned).
        assert_eq!(size_of::<RawQSpinLock>(), 24);
        assert_eq!(size_of::<QSpinLock<()>>(), 24);
        // The count word and the queue lock's core, then the class.
        assert_eq!(size_of::<RawQRwLock>(), 24);
        assert_eq!(size_of::<QRwLock<()>>(), 24);
        // The underlying lock's core and the state word, then the class.
        assert_eq!(size_of::<RawPerCpuRwLock>(), 32);
        assert_eq!(size_of::<SeqLock<u64>>(), 24 + 16);
        assert!(size_of::<Held>() <= 16);
    } else {
        assert_eq!(class, 0);
        assert_eq!(size_of::<RawQSpinLock>(), 4);
        assert_eq!(size_of::<QSpinLock<()>>(), 4);
        assert_eq!(size_of::<scalelock::QSpinLockGuard<'static, ()>>(), 8);
        assert_eq!(size_of::<RawQRwLock>(), 8);
        assert_eq!(size_of::<QRwLock<()>>(), 8);
        assert_eq!(size_of::<scalelock::QRwLockReadGuard<'static, ()>>(), 8);
        assert_eq!(size_of::<RawPerCpuRwLock>(), 16);
        assert_eq!(size_of::<scalelock::PerCpuReadToken>(), 8);
        assert_eq!(size_of::<scalelock::PerCpuWriteToken>(), 8);
        assert_eq!(size_of::<Held>(), 0);
        assert_eq!(size_of::<Pending>(), 0);
        // sequence + writer lock (+ padding) + value: as before classes.
        assert_eq!(size_of::<SeqLock<u64>>(), 24);
        assert_eq!(size_of::<SeqLockWriteGuard<'static, u64>>(), 8);
    }
}
