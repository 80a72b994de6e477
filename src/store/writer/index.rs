//! The background index: the index changes every call makes are held in memory (where calls
//! read them through an overlay) and handed, in batches, to the background thread, which writes
//! each in one sled transaction without the writer lock; calls wait for it only when it falls
//! far behind.
//!
//! Its state beside the writer lock is the background thread's [`Wakeup`]: the signal that wakes
//! it and the flag that ends it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::Sender;

use super::Shared;
use super::chain::{Chain, DEFER_IDLE};
use crate::error::{Error, Result};
use crate::store::kv::Pending;
use crate::store::log::Store;

/// How long the writer must be idle before the index changes it holds are written.
pub const INDEX_IDLE: Duration = Duration::from_millis(20);

/// The index changes of this many events make a batch, handed to the background thread as soon
/// as it is free. Bounds the replay after a crash, together with [`INDEX_OVERFLOW`].
pub const INDEX_BATCH_EVENTS: u64 = 4096;

/// This many index keys held make a batch.
pub const INDEX_BATCH_KEYS: usize = 8 * 1024;

/// This many bytes of index keys and values held make a batch.
pub const INDEX_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// While the background thread writes a batch, the changes held may grow to this many batches'
/// worth before calls wait for it. So at most about `2 * INDEX_OVERFLOW` batches' worth is in
/// memory at once (the batch being written, handed when it was at most that large, and the
/// changes held since), and a crash replays at most as many events.
pub const INDEX_OVERFLOW: usize = 4;

/// How the writer reaches the background thread: a wake-up, and the flag that ends it.
pub(super) struct Wakeup {
    /// Wakes the background thread.
    sender: Sender<()>,
    /// Set when the writer closes: the thread ends at its next wake-up.
    stop: AtomicBool,
}

impl Wakeup {
    /// The wake-up of a thread that receives what `sender` sends.
    pub(super) fn new(sender: Sender<()>) -> Wakeup {
        Wakeup {
            sender,
            stop: AtomicBool::new(false),
        }
    }

    /// Wakes the background thread (a thread already gone is not an error).
    pub(super) fn send(&self) {
        let _ = self.sender.send(());
    }

    /// Ends the background thread: it stops at the wake-up this sends.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.send();
    }

    /// Whether the writer closed.
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// What the background thread does next.
enum Background {
    /// Write this batch of index changes.
    Write(Arc<Pending>),
    /// Look again after this long, or when woken.
    Wait(Duration),
    /// Sleep until woken.
    Sleep,
}

impl Shared {
    /// The background thread's work: writes the batches of index changes handed to it, and what
    /// an idle writer leaves (deferred events after [`DEFER_IDLE`], index changes after
    /// [`INDEX_IDLE`]). Returns how long to wait before looking again, `None` to sleep until woken.
    pub(super) fn background(&self, store: &Store) -> Option<Duration> {
        loop {
            let next = match self.lock.try_lock() {
                Some(mut chain) => chain.background_work(),
                None => return None,
            };
            let batch = match next {
                Background::Write(batch) => batch,
                Background::Wait(wait) => return Some(wait),
                Background::Sleep => {
                    self.settle();
                    return None;
                }
            };
            // A panic here would leave the batch marked as being written and every wait for it
            // hanging: it poisons the writer instead.
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                store.write_index(&batch)
            }))
            .unwrap_or_else(|_| {
                Err(Error::Poisoned {
                    cause: "writing a batch of index changes panicked".into(),
                })
            });
            if let Some(mut chain) = self.lock.try_lock() {
                match written {
                    // A poisoned writer dropped the batch: nothing is left to clear.
                    Ok(()) if chain.poisoned.get().is_none() => chain.writing = None,
                    Ok(()) => {}
                    Err(e) => chain.poison(e.to_string()),
                }
            }
            self.lock.index_written();
        }
    }
}

impl Chain {
    /// Appends the deferred events and the head (no flush), then hands the index changes to the
    /// background thread if more are held than the limits allow and it is free; returns whether
    /// it did (the caller wakes the thread). A failure poisons the writer.
    pub(super) fn write_deferred(&mut self) -> Result<bool> {
        self.append_deferred()?;
        if self.writing.is_none() && self.index_due() {
            self.hand_off()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether more index changes are held than the limits allow.
    fn index_due(&self) -> bool {
        self.index_exceeds(1)
    }

    /// Whether the index changes held exceed the limits [`INDEX_OVERFLOW`] times over.
    pub(super) fn index_overflows(&self) -> bool {
        self.index_exceeds(INDEX_OVERFLOW)
    }

    fn index_exceeds(&self, times: usize) -> bool {
        self.head.seq.0 - self.handed.0 >= INDEX_BATCH_EVENTS * times as u64
            || self.pending.len() >= INDEX_BATCH_KEYS * times
            || self.pending.bytes() >= INDEX_BATCH_BYTES * times
    }

    /// Makes the index changes held the batch the background thread writes next (after the events
    /// they derive from are appended: the index never runs ahead of the log).
    fn hand_off(&mut self) -> Result<()> {
        self.append_deferred()?;
        let batch = std::mem::take(&mut self.pending);
        self.writing = Some(Arc::new(batch));
        self.handed = self.written.seq;
        Ok(())
    }

    /// What the background thread does next (see [`Shared::background`]).
    fn background_work(&mut self) -> Background {
        if self.poisoned.get().is_some() {
            return Background::Sleep;
        }
        let idle = self.called_at.elapsed();
        if self.writing.is_none() {
            if !self.deferred.is_empty() && idle >= DEFER_IDLE && self.append_deferred().is_err() {
                return Background::Sleep;
            }
            let due = self.index_due() || (!self.pending.is_empty() && idle >= INDEX_IDLE);
            if due && self.hand_off().is_err() {
                return Background::Sleep;
            }
        }
        if let Some(batch) = &self.writing {
            return Background::Write(Arc::clone(batch));
        }
        if !self.deferred.is_empty() {
            return Background::Wait(DEFER_IDLE.saturating_sub(idle));
        }
        if !self.pending.is_empty() {
            return Background::Wait(INDEX_IDLE.saturating_sub(idle));
        }
        Background::Sleep
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::testing::{self, create, view};
    use super::*;
    use crate::model::event::Seq;

    #[test]
    fn index_changes_become_a_batch_at_the_limits_and_overflow_at_four_batches() {
        let (_dir, _store, mut chain) = testing::chain();
        chain.run(create("/memories/a.md", "a")).expect("create");
        assert!(!chain.pending.is_empty() && !chain.index_due());
        // Views change no index key but count as events the index has not caught up with.
        for _ in 1..INDEX_BATCH_EVENTS {
            chain.run(view("/memories/a.md")).expect("view");
        }
        assert!(chain.index_due() && !chain.index_overflows());
        assert!(chain.write_deferred().expect("write"), "handed off");
        assert_eq!(chain.handed, Seq(INDEX_BATCH_EVENTS));
        assert!(chain.pending.is_empty() && chain.writing.is_some());
        // While that batch is written, the held changes may grow to INDEX_OVERFLOW batches.
        for _ in 0..INDEX_BATCH_EVENTS * INDEX_OVERFLOW as u64 - 1 {
            chain.run(view("/memories/a.md")).expect("view");
        }
        assert!(!chain.index_overflows());
        chain.run(view("/memories/a.md")).expect("view");
        assert!(chain.index_overflows());
        assert!(
            !chain.write_deferred().expect("write"),
            "one batch at a time"
        );
    }

    #[test]
    fn an_idle_writer_leaves_its_deferred_events_and_index_changes_to_the_background() {
        let (_dir, store, mut chain) = testing::chain();
        chain.run(create("/memories/a.md", "a")).expect("create");
        chain.run(view("/memories")).expect("view");
        // Called a moment from now, however slowly a loaded machine ran the lines above: not
        // idle yet.
        chain.called_at = Instant::now() + std::time::Duration::from_secs(60);
        assert!(matches!(chain.background_work(), Background::Wait(_)));
        assert_eq!(store.head().expect("head").seq, Seq(0), "not idle yet");
        chain.called_at = Instant::now() - INDEX_IDLE;
        match chain.background_work() {
            Background::Write(batch) => assert!(!batch.is_empty()),
            _ => panic!("expected the index batch to write"),
        }
        assert_eq!(
            store.head().expect("head").seq,
            Seq(2),
            "deferred events appended"
        );
        chain.writing = None;
        assert!(matches!(chain.background_work(), Background::Sleep));
        chain.poison("stop".into());
        assert!(chain.check_poisoned().is_err());
        assert!(matches!(chain.background_work(), Background::Sleep));
    }
}
