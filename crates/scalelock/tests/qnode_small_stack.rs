//! A thread with a small stack can be the one that grows the queue-node
//! table: a new 256-node segment (32 KiB) is allocated on the heap, never
//! built on the caller's stack first. Its own test binary: it needs a fresh
//! node table to know where the next segment starts.
#![cfg(all(not(loom), not(miri)))]

#[test]
fn small_stack_thread_allocates_a_node_segment() {
    // Indices start at 1 and segments hold 256: take the rest of segment 0
    // so that the next index opens segment 1.
    assert_eq!(scalelock::__test::hog_queue_nodes(255), 255);
    let t = std::thread::Builder::new()
        // Far less than a segment; the minimum the platform allows.
        .stack_size(16 * 1024)
        .spawn(|| scalelock::__test::hog_queue_nodes(1))
        .unwrap();
    assert_eq!(t.join().unwrap(), 1);
}
