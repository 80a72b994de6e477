//! Group commit: a caller waits until the log is durable up to what its answer depends on; the
//! first waiter that finds no sync running starts one, which covers every event queued by then,
//! so concurrent callers share flushes and `fsync`s.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Shared, lock_failed};
use crate::error::{Error, Result};
use crate::event::Seq;
use crate::log::{Durability, Head};

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

/// The longest a sync waits for concurrent callers to queue their calls before it starts.
pub(super) const GATHER_MAX: Duration = Duration::from_micros(500);

impl Shared {
    /// Once the writer has nothing left to write: makes the events appended since the last sync
    /// (reads and rejected calls, which no caller waits for) durable and records the head, so
    /// the recorded head covers them too and a log cut after them shows. At most once per idle
    /// spell, after the index changes are written ([`INDEX_IDLE`]); nothing in buffered mode.
    pub(super) fn settle(&self) {
        let written = match self.chain.lock() {
            Ok(chain) if chain.poisoned.get().is_none() => chain.written.seq,
            _ => return,
        };
        let behind = self.durable.lock().is_ok_and(|d| d.seq < written);
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
        if self.durability == Durability::Fsync {
            return Ok(());
        }
        let store = {
            let mut chain = self.chain()?;
            chain.append_deferred()?;
            chain.store.clone()
        };
        let synced = store.sync(Durability::Fsync);
        if let Err(e) = &synced {
            if let Ok(mut chain) = self.chain.lock() {
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
        let mut durable = self.durable.lock().map_err(lock_failed)?;
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
                durable = self.synced.wait(durable).map_err(lock_failed)?;
                continue;
            }
            durable.syncing = true;
            drop(durable);
            let outcome = self.sync();
            durable = self.durable.lock().map_err(lock_failed)?;
            durable.syncing = false;
            match outcome {
                Ok(head) => durable.seq = durable.seq.max(head.seq),
                Err(e) => {
                    // `sync` poisoned the writer: every waiter now sees it.
                    let _ = self.poisoned.set(e.to_string());
                    self.synced.notify_all();
                    return Err(e);
                }
            }
            self.synced.notify_all();
        }
    }

    /// Writes what is queued, makes the log durable up to there and records that head.
    ///
    /// When several callers were at work since the last sync started, it first gives them a
    /// moment to queue their next calls — until as many calls are queued as there were callers,
    /// for at most half the last sync's time and [`GATHER_MAX`] — so that one sync covers them
    /// all, rather than callers splitting into two groups that alternate half-full syncs.
    fn sync(&self) -> Result<Head> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let want = self
            .peak
            .swap(self.callers.load(Ordering::Relaxed), Ordering::Relaxed);
        let window = Duration::from_nanos(self.last_sync_ns.load(Ordering::Relaxed) / 2);
        let deadline = Instant::now() + window.min(GATHER_MAX);
        let (store, head) = {
            let mut chain = self.chain()?;
            if want > 1 {
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
            }
            if chain.write_deferred()? {
                let _ = self.wake.send(());
            }
            (chain.store.clone(), chain.written)
        };
        let started = Instant::now();
        let synced = store
            .sync(self.durability)
            .and_then(|()| store.record_head(head));
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_sync_ns.store(took, Ordering::Relaxed);
        if let Err(e) = &synced {
            if let Ok(mut chain) = self.chain.lock() {
                chain.poison(e.to_string());
            }
        }
        synced.map(|()| head)
    }
}
