//! A held store's events going to its write-ahead log in the bucket, from the node's copy.
//!
//! Under `--durability replicated` (the fleet's default) each sync's events are committed before
//! the calls they answer are acknowledged. Under `fsync` and `flush` a call is answered once its
//! events are on the node's disk, and they are queued here and committed by a thread of their
//! own, every event queued while one commit is in flight going in the next (so a node's death
//! loses the writes since the last commit, as a standalone store loses those since its last
//! shipment). Either way, the first commit that fails (a name taken: the store was taken over)
//! fails every later hand-over, which poisons the store's writer.
//!
//! Before this node takes the store again, hands it over or records where its copy stands, the
//! queue is emptied ([`Shipping::finish`]), so an epoch's marker never fences events this node
//! acknowledged and still had to ship. The same thread packs the log ([`super::pack`]) when
//! enough objects are past its last pack.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::copy;
use super::wal::{Holder, Position, Records};
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::store::writer::Replicate;

/// How many bytes of records wait to be shipped before a hand-over waits for room: a bucket
/// slower than the writes holds the writer back rather than grow the queue without bound.
const QUEUED_MAX: usize = 64 << 20;

/// A store's writes going to its log in the bucket.
pub struct Shipping {
    state: Arc<State>,
}

/// What the shipping thread and the store's writer share.
struct State {
    holder: Mutex<Holder>,
    /// The node's copy of the store.
    copy: PathBuf,
    /// Where the log stood when the store was taken (before the take's marker).
    taken_at: Position,
    queue: Mutex<Queue>,
    /// Signalled when the queue changes: records came, a commit ended, or shipping stopped.
    moved: Condvar,
    /// Set once a commit failed: the store's writer is poisoned, and the node takes the store
    /// again rather than serve it so.
    failed: AtomicBool,
}

/// The records waiting to be shipped in the background.
#[derive(Default)]
struct Queue {
    records: Records,
    bytes: usize,
    /// Whether the shipping thread is at work (it ends when the queue is empty).
    shipping: bool,
    /// Whether enough objects are past the log's last pack for the thread to pack them.
    pack_due: bool,
    /// Whether the thread is committing a batch it took from the queue.
    committing: bool,
    /// Why the last commit failed, once one did.
    error: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shipping {
    /// Ships to the log `holder` commits to, from the copy at `copy`, which holds the log up to
    /// `taken_at` (where the log stood when the store was taken) and from then on every commit;
    /// it is recorded so at once.
    pub fn new(holder: Holder, copy: &Path, taken_at: Position) -> Shipping {
        let state = State {
            holder: Mutex::new(holder),
            copy: copy.to_path_buf(),
            taken_at,
            queue: Mutex::new(Queue::default()),
            moved: Condvar::new(),
            failed: AtomicBool::new(false),
        };
        state.record();
        Shipping {
            state: Arc::new(state),
        }
    }

    /// Whether a commit failed (the store was taken over, or the bucket refused it).
    pub fn failed(&self) -> bool {
        self.state.failed.load(Ordering::SeqCst)
    }

    /// The last event this holder committed (or the log's last when it took the store).
    pub fn head_seq(&self) -> crate::model::event::Seq {
        lock(&self.state.holder).position().seq
    }

    /// Whether the log in the bucket still holds this holder's last commit (one read), or it
    /// committed nothing since it took the store: false when someone removed it from the bucket,
    /// which a hand-over must not go on past (the next holder would go on without it).
    pub fn last_commit_kept(&self) -> Result<bool> {
        let holder = lock(&self.state.holder);
        let after = holder.position();
        if after.seq <= self.state.taken_at.seq {
            return Ok(true);
        }
        holder.wal().holds(&after)
    }

    /// Returns once every record queued is committed, or a commit failed (its error): what this
    /// node acknowledged is then in the log, unless the store was taken from it.
    pub fn finish(&self) -> Result<()> {
        let queue = self.state.wait_while(|q| q.shipping);
        match &queue.error {
            Some(why) => Err(Error::Poisoned { cause: why.clone() }),
            None => Ok(()),
        }
    }
}

impl State {
    /// The queue once `busy` no longer holds of it.
    fn wait_while(&self, busy: impl Fn(&Queue) -> bool) -> MutexGuard<'_, Queue> {
        let mut queue = lock(&self.queue);
        while busy(&queue) {
            queue = self
                .moved
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
        queue
    }

    /// The last position of the log the copy is known to hold: after the last commit that
    /// shipped events (the take's marker, holding none, is no position a later take can check
    /// the copy against), else where the log stood when the store was taken.
    fn position(&self) -> Position {
        let after = lock(&self.holder).position();
        match after.seq > self.taken_at.seq {
            true => after,
            false => self.taken_at,
        }
    }

    /// Records beside the copy where it stands in the log, so a later take by this node reads
    /// only what came after (and ships what the copy holds past it, if the log lacks it).
    fn record(&self) {
        copy::record(&self.copy, &self.position());
    }

    /// Commits `records` now, marking the shipping failed if the commit does, and records the
    /// copy's new position; asks the thread to pack the log when enough objects are past its
    /// last pack.
    fn commit(self: &Arc<Self>, records: &[(Seq, Vec<u8>)]) -> Result<()> {
        let (committed, pack_due) = {
            let mut holder = lock(&self.holder);
            let committed = holder.commit(records);
            (committed, holder.pack_due().is_some())
        };
        match &committed {
            Ok(()) => self.record(),
            Err(_) => self.failed.store(true, Ordering::SeqCst),
        }
        if committed.is_ok() && pack_due {
            let mut queue = lock(&self.queue);
            if !queue.pack_due {
                queue.pack_due = true;
                // Without a thread the log is packed at a later commit.
                if self.start(&mut queue).is_err() {
                    queue.pack_due = false;
                }
            }
        }
        committed
    }

    /// Starts the shipping thread unless it runs.
    fn start(self: &Arc<Self>, queue: &mut Queue) -> std::io::Result<()> {
        if queue.shipping {
            return Ok(());
        }
        let state = Arc::clone(self);
        std::thread::Builder::new()
            .name("mnemo-fleet-ship".into())
            .spawn(move || state.ship())?;
        queue.shipping = true;
        Ok(())
    }

    /// Packs the log's objects past its last pack ([`super::wal::Wal::pack`]), if that is still
    /// due. A failure is told and changes nothing: the next commit asks again.
    fn pack(&self) {
        let (wal, upto) = {
            let holder = lock(&self.holder);
            match holder.pack_due() {
                Some(upto) => (holder.wal().clone(), upto),
                None => return,
            }
        };
        match wal.pack(upto, super::pack::PACK_OBJECTS) {
            Ok(from) => lock(&self.holder).packed(from),
            Err(e) => eprintln!(
                "mnemo serve: the log of the store {} could not be packed ({e}); tried again after its next commit",
                wal.store()
            ),
        }
    }

    /// The shipping thread: commits what is queued, all of it at a time, and packs the log when
    /// that is due, until nothing is left to do.
    fn ship(self: &Arc<Self>) {
        loop {
            let batch = {
                let mut queue = lock(&self.queue);
                if queue.records.is_empty() {
                    if queue.pack_due {
                        queue.pack_due = false;
                        drop(queue);
                        self.pack();
                        continue;
                    }
                    queue.shipping = false;
                    self.moved.notify_all();
                    return;
                }
                queue.bytes = 0;
                queue.committing = true;
                std::mem::take(&mut queue.records)
            };
            // Room is free for the writer while this batch is committed.
            self.moved.notify_all();
            let committed = self.commit(&batch);
            lock(&self.queue).committing = false;
            self.moved.notify_all();
            if let Err(e) = committed {
                let mut queue = lock(&self.queue);
                queue.error = Some(format!(
                    "events acknowledged on this node's disk could not be shipped to the fleet's log: {e}"
                ));
                queue.records.clear();
                queue.bytes = 0;
                queue.shipping = false;
                self.moved.notify_all();
                return;
            }
        }
    }
}

impl Replicate for Shipping {
    fn replicate(&self, records: &[(Seq, Vec<u8>)], wait: bool) -> Result<()> {
        if wait {
            // Anything queued before goes first (nothing is, unless the mode changed); a pack
            // job the thread may be running is not waited for.
            let queue = self
                .state
                .wait_while(|q| !q.records.is_empty() || q.committing);
            if let Some(why) = &queue.error {
                return Err(Error::Poisoned { cause: why.clone() });
            }
            drop(queue);
            return self.state.commit(records);
        }
        let mut queue = self
            .state
            .wait_while(|q| q.error.is_none() && q.bytes >= QUEUED_MAX);
        if let Some(why) = &queue.error {
            return Err(Error::Poisoned { cause: why.clone() });
        }
        queue.bytes += records.iter().map(|(_, r)| r.len()).sum::<usize>();
        queue.records.extend(records.iter().cloned());
        if let Err(e) = self.state.start(&mut queue) {
            let why = format!("no thread to ship the store's events to the fleet's log: {e}");
            queue.error = Some(why.clone());
            self.state.failed.store(true, Ordering::SeqCst);
            return Err(Error::Poisoned { cause: why });
        }
        Ok(())
    }
}

impl Drop for Shipping {
    /// The store closed (its writer handed over its last events): once they are shipped, the
    /// copy holds the log up to here, which the next take of the store by this node starts from.
    /// (After a failed commit the copy still holds the log up to the last commit made.)
    fn drop(&mut self) {
        let _ = self.finish();
        self.state.record();
    }
}
