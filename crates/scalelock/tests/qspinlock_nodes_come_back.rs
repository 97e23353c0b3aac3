//! A thread that found the queue-node table full waits unqueued only until
//! an exited thread gives a node back: then it queues again (FIFO). Its own
//! test binary: hogging the node table is process-wide.
#![cfg(all(not(loom), not(miri)))]

use std::sync::mpsc;
use std::thread;

use scalelock::__test::{hog_queue_nodes, queue_node_of_this_thread};

#[test]
fn a_thread_that_found_the_table_full_gets_a_node_given_back() {
    // A thread holds a node until told to exit.
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let (has_tx, has_rx) = mpsc::channel();
    let holder = thread::spawn(move || {
        has_tx.send(queue_node_of_this_thread()).unwrap();
        exit_rx.recv().unwrap();
    });
    let held = has_rx.recv().unwrap().expect("a node for the holder");
    // Every other node is taken.
    let taken = hog_queue_nodes(usize::MAX);
    assert!(taken > 60_000, "took only {taken} nodes");
    // A thread asks, finds none, and asks again after the holder exited.
    let (ask_tx, ask_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel();
    let asker = thread::spawn(move || {
        got_tx.send(queue_node_of_this_thread()).unwrap();
        ask_rx.recv().unwrap();
        got_tx.send(queue_node_of_this_thread()).unwrap();
        // Still its own afterwards.
        got_tx.send(queue_node_of_this_thread()).unwrap();
    });
    assert_eq!(got_rx.recv().unwrap(), None, "the table is full");
    exit_tx.send(()).unwrap();
    holder.join().unwrap();
    ask_tx.send(()).unwrap();
    assert_eq!(
        got_rx.recv().unwrap(),
        Some(held),
        "the node the holder gave back"
    );
    assert_eq!(got_rx.recv().unwrap(), Some(held));
    asker.join().unwrap();
}
