//! The `serde` feature (lock_api's, passed through): a lock serializes as
//! its data and deserializes into a new, unlocked lock, for every lock type
//! of lock_api we provide, alone or inside a derived struct.
//! Run: `cargo test -p scalelock --features serde --test features_serde`
#![cfg(all(feature = "serde", not(any(loom, shuttle))))]

use std::cell::RefCell;
use std::collections::BTreeMap;

use scalelock::{PerCpuRwLock, QRwLock, QSpinLock, ReentrantMutex};
use serde::{Deserialize, Serialize};

#[test]
fn mutex_round_trip() {
    let m = QSpinLock::new(vec![1u32, 2, 3]);
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(json, "[1,2,3]");
    let back: QSpinLock<Vec<u32>> = serde_json::from_str(&json).unwrap();
    assert!(!back.is_locked());
    assert_eq!(*back.lock(), [1, 2, 3]);
    // Serializing released the lock it took.
    assert!(m.try_lock().is_some());
}

#[test]
fn rwlocks_round_trip() {
    let map: BTreeMap<String, u64> = [("a".into(), 1), ("b".into(), 2)].into();
    let q = QRwLock::new(map.clone());
    let p = PerCpuRwLock::new(map.clone());
    let (jq, jp) = (
        serde_json::to_string(&q).unwrap(),
        serde_json::to_string(&p).unwrap(),
    );
    assert_eq!(jq, r#"{"a":1,"b":2}"#);
    assert_eq!(jp, jq);
    // Serializing takes a read: it works while this thread reads too
    // (PerCpuRwLock's reads are recursive; a recursive QRwLock read could
    // deadlock against a queued writer, and lockdep would say so).
    let r = p.read();
    assert_eq!(serde_json::to_string(&p).unwrap(), jp);
    drop(r);
    let q2: QRwLock<BTreeMap<String, u64>> = serde_json::from_str(&jq).unwrap();
    let p2: PerCpuRwLock<BTreeMap<String, u64>> = serde_json::from_str(&jp).unwrap();
    assert!(!q2.is_locked() && !p2.is_locked());
    assert_eq!(*q2.read(), map);
    assert_eq!(*p2.read(), map);
    q2.write().insert("c".into(), 3);
    p2.write().insert("c".into(), 3);
    assert!(q.try_write().is_some() && p.try_write().is_some());
}

/// parking_lot's `remutex::tests::test_serde`, with serde_json for postcard.
#[test]
fn test_serde() {
    let contents: Vec<u8> = vec![0, 1, 2];
    let mutex = ReentrantMutex::new(contents.clone());

    let serialized = serde_json::to_vec(&mutex).unwrap();
    let deserialized: ReentrantMutex<Vec<u8>> = serde_json::from_slice(&serialized).unwrap();

    assert_eq!(*(mutex.lock()), *(deserialized.lock()));
    assert_eq!(contents, *(deserialized.lock()));
}

#[test]
fn reentrant_mutex_serializes_while_its_owner_holds_it() {
    // The owner's serialize is a nested lock, not a deadlock.
    let m = ReentrantMutex::new(RefCell::new(vec![7u8]));
    let g = m.lock();
    g.borrow_mut().push(8);
    assert_eq!(serde_json::to_string(&m).unwrap(), "[7,8]");
    drop(g);
}

#[derive(Serialize, Deserialize)]
struct Server {
    name: String,
    hits: QSpinLock<u64>,
    routes: QRwLock<Vec<String>>,
    config: PerCpuRwLock<BTreeMap<String, String>>,
}

#[test]
fn derived_struct_with_locks_round_trip() {
    let s = Server {
        name: "edge".into(),
        hits: QSpinLock::new(41),
        routes: QRwLock::new(vec!["/".into()]),
        config: PerCpuRwLock::new([("tls".into(), "on".into())].into()),
    };
    *s.hits.lock() += 1;
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(
        json,
        r#"{"name":"edge","hits":42,"routes":["/"],"config":{"tls":"on"}}"#
    );
    let back: Server = serde_json::from_str(&json).unwrap();
    assert_eq!(back.name, "edge");
    assert_eq!(*back.hits.lock(), 42);
    assert_eq!(*back.routes.read(), ["/"]);
    assert_eq!(back.config.read()["tls"], "on");
    // Malformed data is an error, not a lock in a half state.
    assert!(serde_json::from_str::<QSpinLock<u64>>("\"x\"").is_err());
}
