//! The writer: one lock owns the sequence and the chain; syncs are shared (group commit).
//!
//! Split by concern: [`chain`] answers, sequences and chains calls and keeps the events not yet
//! written; [`commit`] makes them durable, one sync for many callers; [`index`] holds the index
//! changes in memory and hands them in batches to the background thread. This module wires the
//! three together behind [`Writer`].
//!
//! The state they share is grouped by what guards it: the writer lock ([`lock::WriterLock`]:
//! the chain, and the signals that wait on it), the durability lock ([`commit::Commit`]: how far
//! the log is durable, the signal that a sync ended, the counts that size a sync), the
//! background thread's wake-up ([`index::Wakeup`]), and the one poison cell both locks read.
//!
//! A call runs on the caller's own thread, with no hand-off to another thread. Under the writer
//! lock it is answered against the index plus the changes not yet written, and its event is
//! chained and queued with its index changes. The caller then releases the lock and waits until
//! the log is durable up to what its answer depends on: its own event if it changed the tree,
//! else the last change the answer saw (so no answer shows a write a crash could undo).
//!
//! The waiting caller that finds no sync running starts one: under the lock it appends the queued
//! events and the head ([`Store::append`]), then releases the lock and flushes and `fsync`s
//! ([`Store::sync`]) while other callers go on answering and queueing. Calls queued during a sync
//! are written and made durable by the next one, so N concurrent agents share flushes and
//! fsyncs, and a lone agent pays one of each per change.
//!
//! The index changes stay in memory, where every call reads them through an overlay. Once
//! [`INDEX_BATCH_EVENTS`] events, [`INDEX_BATCH_KEYS`] keys or [`INDEX_BATCH_BYTES`] bytes are held, or
//! the writer has been idle for [`INDEX_IDLE`], they are handed as one batch to a background
//! thread, which writes it in one sled transaction without holding the writer lock; calls go on
//! reading the batch until it is written, and wait for it if [`INDEX_OVERFLOW`] times the limits
//! pile up meanwhile. Multi-key reads and closing write what is held first.
//! Durability comes from the log alone: after a crash, opening the store replays the events the
//! stored index lacks. (A sled transaction costs a device write of its own, so writing the index
//! with every commit would cost each durable call a second one.)
//!
//! Reads and rejected calls change nothing and start no sync: their events stay queued until the
//! next sync, until [`MAX_DEFERRED`] are queued, or until the writer has been idle for
//! [`DEFER_IDLE`] (the background thread writes them then, without a flush). In `buffered` mode
//! changes are written at once and left to sled's background flusher.
//!
//! Multi-key reads of the index (listing records, the head, `verify`) write the queue and the
//! index first and run under the writer lock, so they see every answered call and none
//! half-applied.
//!
//! A call whose tool_use id this agent already used is a retry: it is logged like any call, and
//! the index's retry record decides its answer (see [`crate::store::projection`]): a retried change runs
//! nothing and repeats the recorded text, across restarts too, since the record is in the index.
//!
//! A call is framed before anything changes, so one too large to record is refused with nothing
//! changed; it is answered against a savepoint of the index changes held, so a failure while
//! answering leaves them as they were.
//!
//! **Invariant:** after a storage failure (a failed read, append, index write or sync) the writer
//! is poisoned: it refuses every later call with [`Error::Poisoned`] rather than risk forking the
//! chain. Before it refuses, it appends the events it has already answered, unless the failure was
//! that very append. No input poisons it: what a model sends gets an error result at worst. Nor
//! does stored content found damaged while a call is answered ([`Error::Corrupt`],
//! [`Error::UnsafeFile`]: an index chunk or the value file changed outside Mnemo): that call fails,
//! naming the damage, with nothing appended or applied, and calls that read other files go on;
//! `verify` names the damage.

mod chain;
mod commit;
mod index;
mod lock;

use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::RecvTimeoutError;

use crate::error::{Error, Result};
use crate::model::event::{Body, Seq};
use crate::store::kv::Overlay;
use crate::store::log::{Durability, Store};
use crate::store::projection::Projection;

#[cfg(feature = "testing")]
pub use chain::DEFER_IDLE;
pub use chain::MAX_DEFERRED;
use chain::{Chain, Ran};
use commit::{Caller, Commit};
use index::Wakeup;
#[cfg(feature = "testing")]
pub use index::{
    INDEX_BATCH_BYTES, INDEX_BATCH_EVENTS, INDEX_BATCH_KEYS, INDEX_IDLE, INDEX_OVERFLOW,
};
use lock::WriterLock;

/// What the writer returns for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The seq of the call's event.
    pub seq: Seq,
    /// The result text.
    pub text: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Whether the text is the one recorded for an earlier call with the same tool_use id: a
    /// retried change, which ran nothing (its own event names the same id).
    pub retried: bool,
    /// When the call reused the tool_use id of a kept retry record: the seq of that earlier call.
    pub retry_of: Option<Seq>,
    /// Why a write of the memory-stores API failed, typed (the text starts with its error
    /// type's name): set for a call this process answered, `None` for any other.
    pub failure: Option<crate::model::tool::api::ApiFailure>,
}

impl Receipt {
    /// The message of a failed API write, without its error type's name.
    pub fn failure_message(&self) -> Option<&str> {
        let kind = self.failure?;
        self.text
            .strip_prefix(kind.error_type())
            .and_then(|rest| rest.strip_prefix(": "))
    }
}

/// One call to record.
pub(crate) struct Call {
    pub agent: String,
    pub tool_use_id: Option<String>,
    pub body: Body,
}

/// Where a store's events go beyond its own files: a fleet node's write-ahead log in object
/// storage. Each sync hands it the events made durable on disk since the last one, in seq order;
/// an error poisons the writer (a node that lost its store is fenced: nothing more is
/// acknowledged). Under [`Durability::Replicated`] a call is answered only once they are there;
/// under `fsync` and `flush` once they are on disk, and they are shipped behind the answers.
pub trait Replicate: Send + Sync {
    /// Hands over `records` (each event's seq and stored record, right after the last ones
    /// handed over): with `wait`, returns once they are durable where the writer replicates to;
    /// else once they are on their way there (an error then is an earlier shipment's failure).
    fn replicate(&self, records: &[(Seq, Vec<u8>)], wait: bool) -> Result<()>;
}

/// A [`Replicate`] as a client's options hold it.
#[derive(Clone)]
pub(crate) struct Replicator(pub(crate) Arc<dyn Replicate>);

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Replicator")
    }
}

/// Why the writer is poisoned, once it is: set by the first storage failure and never cleared
/// (a reopen starts a new writer). One cell that the chain and the durability wait both read.
type Poison = Arc<OnceLock<String>>;

/// The writer shared by every clone of a client.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    /// The background thread (see [`Shared::background`]).
    thread: Option<JoinHandle<()>>,
}

/// What every clone of a client and the background thread share, grouped by what guards it.
struct Shared {
    /// The writer lock: the chain, and the signals that wait on it.
    lock: WriterLock,
    /// The durability lock: how far the log is durable, and the signal that a sync ended.
    commit: Commit,
    /// Why the writer is poisoned (the chain holds the same cell).
    poisoned: Poison,
    /// Wakes the background thread, or ends it.
    wakeup: Wakeup,
    durability: Durability,
    /// Where events go beyond the store's files (before a call is answered, under
    /// [`Durability::Replicated`]).
    replicate: Option<Arc<dyn Replicate>>,
}

fn lock_failed<T>(_: T) -> Error {
    Error::Poisoned {
        cause: "a thread panicked while it held the writer".into(),
    }
}

impl Writer {
    /// A writer for `store`, whose log is durable up to its head (it was synced when it opened).
    /// With `replicate`, every event up to the head must already be where it replicates to;
    /// [`Durability::Replicated`] needs one, and [`Durability::Buffered`] (which makes nothing
    /// durable before an answer, so never syncs) takes none.
    pub(crate) fn new(
        store: Store,
        durability: Durability,
        replicate: Option<Replicator>,
    ) -> Result<Writer> {
        let replicate = replicate.map(|r| r.0);
        match (durability, replicate.is_some()) {
            (Durability::Replicated, false) => {
                return Err(Error::InvalidArgument(
                    "durability replicated is a fleet node's (a write is acknowledged once it is in the fleet's object storage): serve the store with `mnemo serve --fleet URL`, or use fsync".into(),
                ));
            }
            (Durability::Buffered, true) => {
                return Err(Error::InvalidArgument(
                    "durability buffered is not one a fleet node writes with (it acknowledges before anything is durable, so nothing would be shipped while calls keep coming): use replicated (the fleet's default), fsync or flush".into(),
                ));
            }
            _ => {}
        }
        let head = store.head()?;
        let (wake, woken) = crossbeam_channel::unbounded::<()>();
        let poisoned = Poison::default();
        let shared = Arc::new(Shared {
            lock: WriterLock::new(Chain::new(store.clone(), head, Arc::clone(&poisoned))),
            commit: Commit::new(head.seq),
            poisoned,
            wakeup: Wakeup::new(wake),
            durability,
            replicate,
        });
        let background = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("mnemo-background".into())
            .spawn(move || {
                let mut wait = None;
                loop {
                    let woke = match wait {
                        None => woken.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        Some(d) => woken.recv_timeout(d),
                    };
                    if matches!(woke, Err(RecvTimeoutError::Disconnected))
                        || background.wakeup.stopped()
                    {
                        return;
                    }
                    wait = background.background(&store);
                }
            })
            .map_err(|e| Error::io("mnemo-background thread", e))?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    /// The storage failure that poisoned the writer, if one did: every later call is refused.
    pub(crate) fn stopped_by(&self) -> Option<String> {
        self.shared.poisoned.get().cloned()
    }

    /// Refuses, with [`Error::Poisoned`], once a storage failure stopped the writer: for a read
    /// through [`Writer::peek`] that must not show what a stopped store may never have made
    /// durable (the settings an operator lists).
    pub(crate) fn refuse_if_stopped(&self) -> Result<()> {
        match self.stopped_by() {
            Some(cause) => Err(Error::Poisoned { cause }),
            None => Ok(()),
        }
    }

    /// Records one call and returns its answer once what the answer depends on is durable.
    pub(crate) fn call(&self, call: Call) -> Result<Receipt> {
        let _caller = Caller::enter(&self.shared.commit);
        let admin = matches!(call.body, Body::Admin(_));
        let (receipt, depends_on, wake_background, admin_change) = {
            let chain = self.shared.lock.lock()?;
            let mut chain = self.shared.lock.make_room(chain)?;
            chain.check_poisoned()?;
            let was_quiet = chain.is_quiet();
            let Ran {
                receipt,
                depends_on,
                changed,
            } = match chain.run(call) {
                Ok(ran) => ran,
                // A call too large to record (or a change the checks let through by mistake)
                // changed nothing: only that call fails. So does one whose answer read stored
                // bytes found damaged (a chunk or value file changed outside Mnemo): nothing was
                // appended or applied, the log is sound, and the other files still answer.
                // Anything else is a storage failure.
                Err(
                    e @ (Error::InvalidArgument(_)
                    | Error::Corrupt { .. }
                    | Error::UnsafeFile { .. }),
                ) => {
                    return Err(e);
                }
                Err(e) => {
                    chain.poison(e.to_string());
                    return Err(e);
                }
            };
            chain.called_at = Instant::now();
            // Buffered writes go to sled at once (its flusher makes them durable); in the other
            // modes the sync that covers them writes them.
            let write_now = (changed && self.shared.durability == Durability::Buffered)
                || chain.deferred.len() >= MAX_DEFERRED;
            if write_now && chain.write_deferred()? {
                self.shared.wakeup.send();
            }
            // The background thread writes what is left once the writer goes quiet.
            let wake = was_quiet && !chain.is_quiet();
            self.shared.lock.queued();
            (receipt, depends_on, wake, admin && changed)
        };
        if wake_background {
            self.shared.wakeup.send();
        }
        self.shared.wait_durable(depends_on)?;
        if admin_change {
            self.shared.fsync_admin()?;
        }
        Ok(receipt)
    }

    /// Runs `read` on the index as every call answered so far left it — the stored index under
    /// the changes held in memory — under the writer lock, writing nothing: for point reads on
    /// a hot path (a server checks each request's token this way), which should not cost a write
    /// of the index.
    pub(crate) fn peek<T>(
        &self,
        read: impl FnOnce(&Projection<Overlay<'_>>) -> Result<T>,
    ) -> Result<T> {
        let mut chain = self.shared.lock.lock()?;
        let chain = &mut *chain;
        let pending = std::mem::take(&mut chain.pending);
        let projection = Projection::new(Overlay::resume(
            chain.store.index_tree(),
            chain.writing.as_deref(),
            pending,
        ));
        let result = read(&projection);
        chain.pending = projection.into_inner().into_pending();
        result
    }

    /// Runs `read` under the writer lock, after writing the deferred events and the index, so it
    /// sees every event answered so far and no call half-applied; returns once the last change
    /// it could see is durable, as a call's answer does, so no read shows a write a crash could
    /// undo (or whose sync failed).
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        let chain = self.shared.lock.write_index()?;
        let seen = chain.last_change;
        let result = read(&chain.store);
        drop(chain);
        self.shared.wait_durable(seen)?;
        result
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Everything answered goes to sled, is made durable (flushed at least, also in buffered
        // mode) and its head recorded, so a log cut after a clean close shows as cut.
        if let Ok(chain) = self.shared.lock.write_index() {
            let (store, head) = (chain.store.clone(), chain.written);
            drop(chain);
            let mode = match self.shared.durability {
                Durability::Fsync | Durability::Replicated => Durability::Fsync,
                Durability::Flush | Durability::Buffered => Durability::Flush,
            };
            if head.seq > Seq(0) && store.sync(mode).is_ok() {
                let _ = store.record_head(head);
                // Reads and rejected calls no caller waited for go where the log replicates
                // to as well, unless the writer is poisoned (a fenced node writes nothing).
                if self.shared.poisoned.get().is_none() {
                    let _ = self.shared.replicate_upto(&store, head.seq);
                }
            }
        }
        self.shared.wakeup.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the tests of the writer's parts share: a store in a temporary directory, and calls.
#[cfg(test)]
mod testing {
    use super::Call;
    use crate::model::event::{Body, ToolCall};
    use crate::model::tool::{Command, Limits, Profile};
    use crate::store::log::Store;

    /// A new store, and the directory that holds it (dropped with it).
    pub(super) fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("db")).expect("a new store");
        (dir, store)
    }

    /// A chain over a new store, with the store and its directory.
    pub(super) fn chain() -> (tempfile::TempDir, Store, super::Chain) {
        let (dir, store) = store();
        let head = store.head().expect("head");
        let chain = super::Chain::new(store.clone(), head, super::Poison::default());
        (dir, store, chain)
    }

    /// One call of `command` by agent `a`.
    pub(super) fn call(command: Command) -> Call {
        Call {
            agent: "a".into(),
            tool_use_id: None,
            body: Body::Tool(ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command,
            }),
        }
    }

    pub(super) fn view(path: &str) -> Call {
        call(Command::View {
            path: path.into(),
            view_range: None,
        })
    }

    pub(super) fn create(path: &str, text: &str) -> Call {
        call(Command::Create {
            path: path.into(),
            file_text: text.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{create, store, view};
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::store::failpoint::Failpoint;

    #[test]
    fn concurrent_callers_share_syncs_and_every_answer_is_durable_when_given() {
        let (_dir, store) = store();
        let writer = Writer::new(store.clone(), Durability::Fsync, None).expect("writer");
        let (threads, each) = (8, 12);
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (writer, start) = (&writer, &start);
                scope.spawn(move || {
                    start.wait();
                    for i in 0..each {
                        let path = format!("/memories/{t}/{i}.md");
                        let receipt = writer.call(create(&path, "x")).expect("call");
                        assert!(!receipt.is_error, "{}", receipt.text);
                        // Durable when answered: the sync that covers it has run.
                        let durable = writer.shared.commit.durable.lock().expect("lock").seq;
                        assert!(durable >= receipt.seq, "{durable:?} < {:?}", receipt.seq);
                    }
                });
            }
        });
        let calls = (threads * each) as u64;
        let syncs = writer.shared.commit.syncs.load(Ordering::Relaxed);
        assert!(
            syncs >= 1 && syncs < calls,
            "{syncs} syncs for {calls} calls"
        );
        assert_eq!(store.head().expect("head").seq, Seq(calls));
    }

    #[test]
    fn an_admin_change_is_fsynced_before_it_is_acknowledged_in_every_mode() {
        for durability in [Durability::Buffered, Durability::Flush] {
            let (_dir, store) = store();
            let writer = Writer::new(store.clone(), durability, None).expect("writer");
            // A memory-tool change in these modes makes no fsync: an armed one stays armed.
            store.failpoints().arm(Failpoint::Fsync);
            let made = writer
                .call(create("/memories/a.md", "a"))
                .expect("a create");
            assert!(!made.is_error, "{}", made.text);
            let grant = Call {
                agent: "operator".into(),
                tool_use_id: None,
                body: Body::Admin(crate::model::policy::AdminCommand::Grant {
                    agent: "planner".into(),
                    prefix: "/memories".into(),
                    access: crate::model::policy::Access::Read,
                }),
            };
            let failed = writer.call(grant).expect_err("the grant's fsync fails");
            assert!(
                failed.to_string().contains("Fsync"),
                "{durability:?}: {failed}"
            );
            assert!(writer.shared.poisoned.get().is_some(), "{durability:?}");
        }
    }

    #[test]
    fn a_failed_sync_poisons_once_and_every_later_call_names_the_first_cause() {
        let (_dir, store) = store();
        let writer = Writer::new(store.clone(), Durability::Fsync, None).expect("writer");
        writer
            .call(create("/memories/a.md", "a"))
            .expect("a first call");
        store.failpoints().arm(Failpoint::Sync);
        let failed = writer
            .call(create("/memories/b.md", "b"))
            .expect_err("the failed sync");
        assert!(failed.to_string().contains("Sync"), "{failed}");
        for later in [view("/memories"), create("/memories/c.md", "c")] {
            match writer.call(later) {
                Err(Error::Poisoned { cause }) => assert!(cause.contains("Sync"), "{cause}"),
                other => panic!("expected the writer poisoned, got {other:?}"),
            }
        }
        let cause = writer.shared.poisoned.get().expect("poisoned");
        assert!(cause.contains("failpoint Sync"), "{cause}");
        // The chain and the durability wait read the one cell.
        let chain = writer.shared.lock.lock().expect("lock");
        assert!(Arc::ptr_eq(&chain.poisoned, &writer.shared.poisoned));
    }
}
