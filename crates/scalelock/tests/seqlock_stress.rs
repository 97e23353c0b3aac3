//! Stress tests for `SeqLock`: torn-read detection with multi-word values
//! (every word of a written value is equal, and readers check that) at 2 to
//! 16 threads, with odd sizes that use the byte tail, plus monotonicity.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use scalelock::{NoUninit, SeqLock};

const ITERS: usize = if cfg!(miri) { 50 } else { 50_000 };

fn torn_check<const N: usize>(writers: usize, readers: usize)
where
    [u64; N]: NoUninit,
{
    let s: Arc<SeqLock<[u64; N]>> = Arc::new(SeqLock::new([0; N]));
    let stop = Arc::new(AtomicBool::new(false));
    let rs: Vec<_> = (0..readers)
        .map(|_| {
            let (s, stop) = (s.clone(), stop.clone());
            thread::spawn(move || {
                let (mut last, mut reads) = (0, 0u64);
                while !stop.load(Ordering::Relaxed) || reads == 0 {
                    let v = s.read();
                    assert!(v.iter().all(|&x| x == v[0]), "torn read: {v:?}");
                    assert!(v[0] >= last, "value went backwards");
                    last = v[0];
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let ws: Vec<_> = (0..writers)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                for _ in 0..ITERS / writers {
                    s.update(|v| *v = [v[0] + 1; N]);
                }
            })
        })
        .collect();
    for w in ws {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in rs {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(s.read(), [(ITERS / writers * writers) as u64; N]);
}

#[test]
fn torn_1_writer_1_reader() {
    torn_check::<4>(1, 1);
}

#[test]
fn torn_2_writers_2_readers() {
    torn_check::<8>(2, 2);
}

#[test]
fn torn_2_writers_14_readers() {
    torn_check::<3>(2, if cfg!(miri) { 3 } else { 14 });
}

/// 13 bytes: one word and a five-byte tail, all equal per write.
#[test]
fn torn_byte_tail() {
    let s: Arc<SeqLock<[u8; 13]>> = Arc::new(SeqLock::new([0; 13]));
    let stop = Arc::new(AtomicBool::new(false));
    let r = {
        let (s, stop) = (s.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let v = s.read();
                assert!(v.iter().all(|&x| x == v[0]), "torn read: {v:?}");
            }
        })
    };
    for i in 0..ITERS {
        s.write([i as u8; 13]);
    }
    stop.store(true, Ordering::Relaxed);
    r.join().unwrap();
}

/// A user struct with the `NoUninit` contract (repr(C), no gaps).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Sample {
    t: u64,
    a: u32,
    b: u32,
}
// SAFETY: repr(C), 8 + 4 + 4 bytes, no padding, no pointers.
unsafe impl NoUninit for Sample {}

#[test]
fn user_struct() {
    let s = Arc::new(SeqLock::<Sample>::new(Sample { t: 0, a: 0, b: 0 }));
    let r = {
        let s = s.clone();
        thread::spawn(move || {
            for _ in 0..ITERS / 10 {
                let v = s.read();
                assert_eq!(v.a as u64, v.t);
                assert_eq!(v.b as u64, v.t * 2);
            }
        })
    };
    for t in 1..=(ITERS / 10) as u64 {
        s.write(Sample {
            t,
            a: t as u32,
            b: (t * 2) as u32,
        });
    }
    r.join().unwrap();
}
