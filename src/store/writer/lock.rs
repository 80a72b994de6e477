//! The writer lock: the [`Chain`] it guards, and the signals that wait on it (a batch of index
//! changes written; a call queued while a sync gathers them). Whoever holds it may answer,
//! sequence and queue calls, append the queue, and hand index changes to the background thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::chain::Chain;
use super::lock_failed;
use crate::error::Result;

/// The writer lock and the condition variables that wait on it.
pub(super) struct WriterLock {
    /// The sequence, the chain and the store.
    chain: Mutex<Chain>,
    /// Signalled when the background thread has written a batch of index changes.
    index_written: Condvar,
    /// Whether a sync is waiting for calls to be queued, and the signal that one was.
    gathering: AtomicBool,
    queued: Condvar,
}

impl WriterLock {
    /// The lock over `chain`, with no one waiting.
    pub(super) fn new(chain: Chain) -> WriterLock {
        WriterLock {
            chain: Mutex::new(chain),
            index_written: Condvar::new(),
            gathering: AtomicBool::new(false),
            queued: Condvar::new(),
        }
    }

    /// Takes the lock; a thread that panicked while holding it poisons the writer.
    pub(super) fn lock(&self) -> Result<MutexGuard<'_, Chain>> {
        self.chain.lock().map_err(lock_failed)
    }

    /// Takes the lock unless a thread panicked while holding it: for the paths that give up
    /// quietly then (the background thread, poisoning after a failure).
    pub(super) fn try_lock(&self) -> Option<MutexGuard<'_, Chain>> {
        self.chain.lock().ok()
    }

    /// Waits for the background thread's write while the index changes held have outgrown the
    /// limits [`INDEX_OVERFLOW`](super::index::INDEX_OVERFLOW) times over: calls that outpace
    /// sled then wait for it, and the memory the changes take stays bounded.
    pub(super) fn make_room<'a>(
        &'a self,
        mut chain: MutexGuard<'a, Chain>,
    ) -> Result<MutexGuard<'a, Chain>> {
        while chain.writing.is_some() && chain.poisoned.get().is_none() && chain.index_overflows() {
            chain = self.index_written.wait(chain).map_err(lock_failed)?;
        }
        Ok(chain)
    }

    /// Writes every deferred event and index change, waiting for a batch the background thread
    /// is writing first; returns the writer lock, under which the stored index is up to date.
    pub(super) fn write_index(&self) -> Result<MutexGuard<'_, Chain>> {
        let mut chain = self.lock()?;
        while chain.writing.is_some() && chain.poisoned.get().is_none() {
            chain = self.index_written.wait(chain).map_err(lock_failed)?;
        }
        chain.append_deferred()?;
        if !chain.pending.is_empty() {
            let pending = std::mem::take(&mut chain.pending);
            if let Err(e) = chain.store.write_index(&pending) {
                chain.poison(e.to_string());
                return Err(e);
            }
            chain.handed = chain.written.seq;
        }
        Ok(chain)
    }

    /// Wakes every call waiting for the batch of index changes being written.
    pub(super) fn index_written(&self) {
        self.index_written.notify_all();
    }

    /// Tells a sync gathering calls that one more was queued.
    pub(super) fn queued(&self) {
        if self.gathering.load(Ordering::Relaxed) {
            self.queued.notify_one();
        }
    }

    /// Holding `chain`, waits until `want` events are queued or `deadline` passes, letting
    /// callers queue their calls meanwhile; returns the lock.
    pub(super) fn gather<'a>(
        &'a self,
        mut chain: MutexGuard<'a, Chain>,
        want: usize,
        deadline: Instant,
    ) -> Result<MutexGuard<'a, Chain>> {
        self.gathering.store(true, Ordering::Relaxed);
        while chain.deferred.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            chain = self
                .queued
                .wait_timeout(chain, left)
                .map_err(lock_failed)?
                .0;
        }
        self.gathering.store(false, Ordering::Relaxed);
        Ok(chain)
    }
}
