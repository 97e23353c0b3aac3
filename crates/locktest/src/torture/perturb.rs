//! What the torture does to its threads from outside, after locktorture's
//! `stutter` and `shuffle_interval`:
//!
//! - [`Stutter`]: all threads run for a while, then all wait (asleep on a
//!   condition variable) for as long, then all wake at once: locks see
//!   their waiters leave and a thundering herd come back, over and over.
//! - [`Shuffle`]: every few milliseconds each thread is pinned to another
//!   CPU (`sched_setaffinity`), one CPU left idle in turn, so lock holders
//!   and waiters migrate mid-operation and pile up on fewer CPUs.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use rustix::thread::{CpuSet, Pid, gettid, sched_getaffinity, sched_setaffinity};

/// Run/pause cycles of all threads.
#[derive(Default)]
pub struct Stutter {
    /// Fast check for the workers; `paused` under the mutex is the truth.
    hint: AtomicBool,
    paused: Mutex<bool>,
    wake: Condvar,
}

impl Stutter {
    /// A worker's check between operations (holding no lock): sleeps while
    /// the threads are paused.
    #[inline]
    pub fn wait(&self) {
        // Relaxed: a hint; the mutex orders the real state.
        if !self.hint.load(Ordering::Relaxed) {
            return;
        }
        let mut paused = self.paused.lock().unwrap_or_else(PoisonError::into_inner);
        while *paused {
            paused = self
                .wake
                .wait(paused)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Pauses every worker at its next check.
    pub fn pause(&self) {
        *self.paused.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.hint.store(true, Ordering::Relaxed);
    }

    /// Wakes every paused worker.
    pub fn resume(&self) {
        *self.paused.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.hint.store(false, Ordering::Relaxed);
        self.wake.notify_all();
    }
}

/// Re-pins threads to CPUs. Shared by the workers (who register) and the
/// main thread (who shuffles).
pub struct Shuffle {
    /// Each worker's kernel thread id, 0 until it registers.
    tids: Vec<AtomicI32>,
    /// The CPUs the process may use.
    cpus: Vec<usize>,
    /// Shuffles done (picks the idle CPU and each thread's CPU).
    round: AtomicUsize,
}

impl Shuffle {
    /// For `threads` workers, over the CPUs this thread may use.
    pub fn new(threads: usize) -> Result<Self, String> {
        let set = sched_getaffinity(None).map_err(|e| format!("sched_getaffinity: {e}"))?;
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
        if cpus.is_empty() {
            return Err("sched_getaffinity: no CPU allowed".into());
        }
        Ok(Shuffle {
            tids: (0..threads).map(|_| AtomicI32::new(0)).collect(),
            cpus,
            round: AtomicUsize::new(0),
        })
    }

    /// A worker says which kernel thread it is (call from the worker).
    pub fn register(&self, index: usize) {
        // Relaxed: read by the main thread's next shuffle; a late read only
        // skips this thread once.
        self.tids[index].store(gettid().as_raw_pid(), Ordering::Relaxed);
    }

    /// Pins every registered thread to one CPU, leaving one CPU idle in
    /// turn when there are two or more. A thread that has exited is skipped.
    pub fn shuffle(&self) -> Result<(), String> {
        // Relaxed: only the main thread shuffles; this is its own counter.
        let round = self.round.fetch_add(1, Ordering::Relaxed);
        let idle = (self.cpus.len() > 1).then(|| self.cpus[round % self.cpus.len()]);
        let usable: Vec<usize> = self
            .cpus
            .iter()
            .copied()
            .filter(|&c| Some(c) != idle)
            .collect();
        for (i, tid) in self.tids.iter().enumerate() {
            let mut set = CpuSet::new();
            set.set(usable[spread(i, round) % usable.len()]);
            self.pin(tid, &set)?;
        }
        Ok(())
    }

    /// Lets every thread run anywhere again.
    pub fn restore(&self) -> Result<(), String> {
        let mut set = CpuSet::new();
        for &c in &self.cpus {
            set.set(c);
        }
        for tid in &self.tids {
            self.pin(tid, &set)?;
        }
        Ok(())
    }

    fn pin(&self, tid: &AtomicI32, set: &CpuSet) -> Result<(), String> {
        let Some(pid) = Pid::from_raw(tid.load(Ordering::Relaxed)) else {
            return Ok(());
        };
        match sched_setaffinity(Some(pid), set) {
            // ESRCH: the thread is gone (it finished); nothing to move.
            Err(e) if e == rustix::io::Errno::SRCH => Ok(()),
            r => r.map_err(|e| format!("sched_setaffinity: {e}")),
        }
    }
}

/// A well-mixed number from a thread index and a round (splitmix64's
/// finalizer), so each round places the threads differently.
fn spread(i: usize, round: usize) -> usize {
    let mut z = (i as u64) << 32 ^ round as u64;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as usize
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn stutter_holds_workers_until_resumed() {
        let s = Stutter::default();
        s.pause();
        let resumed = AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                s.wait();
                assert!(resumed.load(Ordering::SeqCst));
            });
            std::thread::sleep(Duration::from_millis(20));
            resumed.store(true, Ordering::SeqCst);
            s.resume();
        });
        s.wait();
    }

    #[test]
    fn shuffle_pins_a_thread_to_one_allowed_cpu() {
        let sh = Shuffle::new(1).unwrap();
        sh.register(0);
        sh.shuffle().unwrap();
        let now = sched_getaffinity(None).unwrap();
        assert_eq!(now.count(), 1);
        assert!(sh.cpus.iter().any(|&c| now.is_set(c)));
        sh.restore().unwrap();
        assert_eq!(
            sched_getaffinity(None).unwrap().count() as usize,
            sh.cpus.len()
        );
    }
}
