//! Loom model of the seqlock: a reader racing a writer never returns a
//! torn value, and the data accesses are race-free atomics. (Checked: with
//! the reader's `fence(Acquire)` removed, loom finds a torn, validated read.)
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_seqlock`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;

use scalelock::SeqLock;

/// Two words (one chunk each on 64-bit: `[u64; 2]`), always written equal.
#[test]
fn reader_never_sees_a_torn_value() {
    loom::model(|| {
        let s: Arc<SeqLock<[u64; 2]>> = Arc::new(SeqLock::new([0, 0]));
        let w = {
            let s = s.clone();
            thread::spawn(move || {
                s.write([1, 1]);
                s.write([2, 2]);
            })
        };
        if let Some(v) = s.try_read() {
            assert_eq!(v[0], v[1], "torn read {v:?}");
        }
        let v = s.read();
        assert_eq!(v[0], v[1], "torn read {v:?}");
        w.join().unwrap();
        assert_eq!(s.read(), [2, 2]);
    });
}

/// Two writers serialise on the writer lock; `update` sees the other's value.
#[test]
fn writers_serialise() {
    loom::model(|| {
        let s: Arc<SeqLock<[u64; 2]>> = Arc::new(SeqLock::new([0, 0]));
        let w = {
            let s = s.clone();
            thread::spawn(move || s.update(|v| *v = [v[0] + 1, v[1] + 1]))
        };
        s.update(|v| *v = [v[0] + 1, v[1] + 1]);
        w.join().unwrap();
        assert_eq!(s.read(), [2, 2]);
    });
}
