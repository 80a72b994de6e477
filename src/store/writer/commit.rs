//! Group commit: a caller waits until the log is durable up to what its answer depends on; the
//! first waiter that finds no sync running starts one, which covers every event queued by then,
//! so concurrent callers share flushes and `fsync`s.
//!
//! Its state is the durability lock ([`Commit`]): how far the log is durable and whether a sync
//! runs, the signal that one ended, and the counts that size the next sync's gathering.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Shared, lock_failed};
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::store::log::{Durability, Head};

/// How far the log is durable, and whether a sync is running.
pub(super) struct Durable {
    pub(super) seq: Seq,
    syncing: bool,
}

impl Durable {
    /// A log durable up to `seq`, with no sync running.
    pub(super) fn new(seq: Seq) -> Durable {
        Durable {
            seq,
            syncing: false,
        }
    }
}

/// The durability lock and what waits on it, with the counts that size a sync's gathering.
pub(super) struct Commit {
    /// How far the log is durable, and whether a sync is running.
    pub(super) durable: Mutex<Durable>,
    /// Signalled when a sync ends.
    synced: Condvar,
    /// Threads inside [`Writer::call`](super::Writer::call) now, and the most at once since the
    /// last sync started.
    callers: AtomicUsize,
    peak: AtomicUsize,
    /// How long the last sync took, in nanoseconds (bounds how long the next one gathers).
    last_sync_ns: AtomicU64,
    /// How many syncs have started.
    pub(super) syncs: AtomicU64,
}

impl Commit {
    /// The state of a log durable up to `seq`, with no sync running and no caller.
    pub(super) fn new(seq: Seq) -> Commit {
        Commit {
            durable: Mutex::new(Durable::new(seq)),
            synced: Condvar::new(),
            callers: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            last_sync_ns: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }
}

/// Counts a thread in [`Writer::call`](super::Writer::call) for as long as it is there.
pub(super) struct Caller<'a>(&'a Commit);

impl<'a> Caller<'a> {
    /// Counts one more caller of `commit`.
    pub(super) fn enter(commit: &'a Commit) -> Caller<'a> {
        let now = commit.callers.fetch_add(1, Ordering::Relaxed) + 1;
        commit.peak.fetch_max(now, Ordering::Relaxed);
        Caller(commit)
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        self.0.callers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The longest a sync waits for concurrent callers to queue their calls before it starts.
pub(super) const GATHER_MAX: Duration = Duration::from_micros(500);

impl Shared {
    /// Once the writer has nothing left to write: makes the events appended since the last sync
    /// (reads and rejected calls, which no caller waits for) durable and records the head, so
    /// the recorded head covers them too and a log cut after them shows. At most once per idle
    /// spell, after the index changes are written ([`INDEX_IDLE`]); nothing in buffered mode.
    pub(super) fn settle(&self) {
        let written = match self.lock.try_lock() {
            Some(chain) if chain.poisoned.get().is_none() => chain.written.seq,
            _ => return,
        };
        let behind = self.commit.durable.lock().is_ok_and(|d| d.seq < written);
        if behind {
            // A failure poisons the writer, as for a caller's sync; the next call reports it.
            let _ = self.wait_durable(written);
        }
    }

    /// Makes an admin change durable with an `fsync` whatever the mode, before it is
    /// acknowledged: a grant, a revoke or a token undone by a crash would change who may do
    /// what behind the operator's back (a revoked token would work again). In `fsync` mode the
    /// wait for the change already did it. A failure poisons the writer, as a failed sync does.
    pub(super) fn fsync_admin(&self) -> Result<()> {
        if matches!(self.durability, Durability::Fsync | Durability::Replicated) {
            return Ok(());
        }
        let store = {
            let mut chain = self.lock.lock()?;
            chain.append_deferred()?;
            chain.store.clone()
        };
        let synced = store.sync(Durability::Fsync);
        if let Err(e) = &synced {
            if let Some(mut chain) = self.lock.try_lock() {
                chain.poison(e.to_string());
            }
        }
        synced
    }

    /// Returns once the log is durable up to `seq` (at once in buffered mode), starting a sync if
    /// none is running.
    pub(super) fn wait_durable(&self, seq: Seq) -> Result<()> {
        if self.durability == Durability::Buffered {
            return Ok(());
        }
        let commit = &self.commit;
        let mut durable = commit.durable.lock().map_err(lock_failed)?;
        loop {
            if let Some(cause) = self.poisoned.get() {
                return Err(Error::Poisoned {
                    cause: cause.clone(),
                });
            }
            if durable.seq >= seq {
                return Ok(());
            }
            if durable.syncing {
                durable = commit.synced.wait(durable).map_err(lock_failed)?;
                continue;
            }
            durable.syncing = true;
            drop(durable);
            let outcome = self.sync();
            durable = commit.durable.lock().map_err(lock_failed)?;
            durable.syncing = false;
            match outcome {
                Ok(head) => durable.seq = durable.seq.max(head.seq),
                Err(e) => {
                    // `sync` poisoned the writer: every waiter now sees it.
                    let _ = self.poisoned.set(e.to_string());
                    commit.synced.notify_all();
                    return Err(e);
                }
            }
            commit.synced.notify_all();
        }
    }

    /// Hands the events after the last one replicated, up to `seq`, to where the writer
    /// replicates to (nothing without one), waiting until they are durable there under
    /// [`Durability::Replicated`]. Only the thread that syncs calls it, so the durable seq it
    /// starts after is what the last sync replicated.
    pub(super) fn replicate_upto(&self, store: &crate::store::log::Store, seq: Seq) -> Result<()> {
        let Some(replicate) = &self.replicate else {
            return Ok(());
        };
        let after = self.commit.durable.lock().map_err(lock_failed)?.seq;
        if seq <= after {
            return Ok(());
        }
        let records = store
            .records_through(Seq(after.0 + 1), seq)
            .collect::<Result<Vec<_>>>()?;
        replicate.replicate(&records, self.durability == Durability::Replicated)
    }

    /// Writes what is queued, makes the log durable up to there and records that head.
    ///
    /// When several callers were at work since the last sync started, it first gives them a
    /// moment to queue their next calls — until as many calls are queued as there were callers,
    /// for at most half the last sync's time and [`GATHER_MAX`] — so that one sync covers them
    /// all, rather than callers splitting into two groups that alternate half-full syncs.
    fn sync(&self) -> Result<Head> {
        let commit = &self.commit;
        commit.syncs.fetch_add(1, Ordering::Relaxed);
        let want = commit
            .peak
            .swap(commit.callers.load(Ordering::Relaxed), Ordering::Relaxed);
        let window = Duration::from_nanos(commit.last_sync_ns.load(Ordering::Relaxed) / 2);
        let deadline = Instant::now() + window.min(GATHER_MAX);
        let (store, head) = {
            let mut chain = self.lock.lock()?;
            if want > 1 {
                chain = self.lock.gather(chain, want, deadline)?;
            }
            if chain.write_deferred()? {
                self.wakeup.send();
            }
            (chain.store.clone(), chain.written)
        };
        let started = Instant::now();
        let synced = store
            .sync(self.durability)
            .and_then(|()| store.record_head(head))
            .and_then(|()| self.replicate_upto(&store, head.seq));
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        commit.last_sync_ns.store(took, Ordering::Relaxed);
        if let Err(e) = &synced {
            if let Some(mut chain) = self.lock.try_lock() {
                chain.poison(e.to_string());
            }
        }
        synced.map(|()| head)
    }
}
