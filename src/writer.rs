//! The writer: one lock owns the sequence and the chain; syncs are shared (group commit).
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
//! [`INDEX_MAX_EVENTS`] events, [`INDEX_MAX_KEYS`] keys or [`INDEX_MAX_BYTES`] bytes are held, or
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
//! the index's retry record decides its answer (see [`crate::projection`]): a retried change runs
//! nothing and repeats the recorded text, across restarts too, since the record is in the index.
//!
//! A call is framed before anything changes, so one too large to record is refused with nothing
//! changed; it is answered against a savepoint of the index changes held, so a failure while
//! answering leaves them as they were.
//!
//! **Invariant:** after a storage failure (a failed read, append, index write or sync) the writer
//! is poisoned: it refuses every later call with [`Error::Poisoned`] rather than risk forking the
//! chain. Before it refuses, it appends the events it has already answered, unless the failure was
//! that very append. No input poisons it: what a model sends gets an error result at worst.
//! Reopening recovers.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::error::{Error, Result};
use crate::event::{Body, Event, Frame, Header, Outcome, Seq, chain_hash};
use crate::failpoint::Failpoint;
use crate::kv::{Overlay, Pending};
use crate::log::{Durability, Head, Store};
use crate::projection::{Projection, RetryKind, Traced};
use crate::tool::Semantics;
use crate::tool::request::{failed_digest, logs_failure_as_digest};

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
}

/// One call to record.
pub(crate) struct Call {
    pub agent: String,
    pub tool_use_id: Option<String>,
    pub body: Body,
}

/// Most deferred events held before they are written anyway.
pub const MAX_DEFERRED: usize = 1024;

/// How long the writer must be idle before deferred events are written.
pub const DEFER_IDLE: Duration = Duration::from_millis(1);

/// How long the writer must be idle before the index changes it holds are written.
pub const INDEX_IDLE: Duration = Duration::from_millis(20);

/// Most events whose index changes are held in memory (bounds the replay after a crash).
pub const INDEX_MAX_EVENTS: u64 = 4096;

/// Most index keys held in memory before they are written.
pub const INDEX_MAX_KEYS: usize = 8 * 1024;

/// Most bytes of index keys and values held in memory before they are written.
pub const INDEX_MAX_BYTES: usize = 8 * 1024 * 1024;

/// How many times over the limits the index changes held may grow while the background thread
/// writes a batch, before calls wait for it.
pub const INDEX_OVERFLOW: usize = 4;

/// What [`Chain::run`] did with one call.
struct Ran {
    receipt: Receipt,
    /// The seq that must be durable before the answer is given.
    depends_on: Seq,
    /// Whether the call changed the tree (and so wrote a new event that needs a sync).
    changed: bool,
}

/// The sequence, the chain and the store, behind the writer lock.
struct Chain {
    store: Store,
    /// The last event chained, written or deferred.
    head: Head,
    /// The last event written to sled.
    written: Head,
    /// The last event that changed the tree (what a read's answer may depend on).
    last_change: Seq,
    poisoned: Option<String>,
    /// Events answered but not written yet: changes until the sync their callers wait for writes
    /// them, reads and rejected calls until the next write.
    deferred: Vec<Frame>,
    /// Index changes not handed off yet (see the module docs), and the last event whose changes
    /// were handed off before them.
    pending: Pending,
    handed: Seq,
    /// The batch of index changes the background thread is writing: calls read it until it is
    /// in the tree.
    writing: Option<Arc<Pending>>,
    /// When the last call was answered.
    called_at: Instant,
}

/// How far the log is durable, and whether a sync is running.
struct Durable {
    seq: Seq,
    syncing: bool,
    /// Why a sync failed; once set, every wait fails.
    failed: Option<String>,
}

/// The writer shared by every clone of a client.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    /// The background thread (see [`Shared::background`]).
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    chain: Mutex<Chain>,
    /// Signalled when the background thread has written a batch of index changes.
    index_written: Condvar,
    /// Wakes the background thread; `stop` ends it.
    wake: Sender<()>,
    stop: AtomicBool,
    durable: Mutex<Durable>,
    synced: Condvar,
    durability: Durability,
    /// Threads inside [`Writer::call`] now, and the most at once since the last sync started.
    callers: AtomicUsize,
    peak: AtomicUsize,
    /// How long the last sync took, in nanoseconds (bounds how long the next one gathers).
    last_sync_ns: AtomicU64,
    /// Whether a sync is waiting for calls to be queued, and the signal that one was.
    gathering: AtomicBool,
    queued: Condvar,
}

/// The longest a sync waits for concurrent callers to queue their calls before it starts.
pub const GATHER_MAX: Duration = Duration::from_micros(500);

/// Counts a thread in [`Writer::call`] for as long as it is there.
struct Caller<'a>(&'a Shared);

impl<'a> Caller<'a> {
    fn enter(shared: &'a Shared) -> Caller<'a> {
        let now = shared.callers.fetch_add(1, Ordering::Relaxed) + 1;
        shared.peak.fetch_max(now, Ordering::Relaxed);
        Caller(shared)
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        self.0.callers.fetch_sub(1, Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn lock_failed<T>(_: T) -> Error {
    Error::Poisoned {
        cause: "a thread panicked while it held the writer".into(),
    }
}

impl Writer {
    /// A writer for `store`, whose log is durable up to its head (it was synced when it opened).
    pub(crate) fn new(store: Store, durability: Durability) -> Result<Writer> {
        let head = store.head()?;
        let (wake, woken) = crossbeam_channel::unbounded::<()>();
        let shared = Arc::new(Shared {
            chain: Mutex::new(Chain {
                store: store.clone(),
                head,
                written: head,
                last_change: head.seq,
                poisoned: None,
                deferred: Vec::new(),
                pending: Pending::default(),
                handed: head.seq,
                writing: None,
                called_at: Instant::now(),
            }),
            index_written: Condvar::new(),
            wake,
            stop: AtomicBool::new(false),
            durable: Mutex::new(Durable {
                seq: head.seq,
                syncing: false,
                failed: None,
            }),
            synced: Condvar::new(),
            durability,
            callers: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            last_sync_ns: AtomicU64::new(0),
            gathering: AtomicBool::new(false),
            queued: Condvar::new(),
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
                        || background.stop.load(Ordering::Acquire)
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

    /// Records one call and returns its answer once what the answer depends on is durable.
    pub(crate) fn call(&self, call: Call) -> Result<Receipt> {
        let _caller = Caller::enter(&self.shared);
        let (receipt, depends_on, wake_background) = {
            let chain = self.shared.chain()?;
            let mut chain = self.shared.make_room(chain)?;
            chain.check_poisoned()?;
            let was_quiet = chain.is_quiet();
            let Ran {
                receipt,
                depends_on,
                changed,
            } = match chain.run(call) {
                Ok(ran) => ran,
                // A call too large to record (or a change the checks let through by mistake)
                // changed nothing: only that call fails. Anything else is a storage failure.
                Err(e @ Error::InvalidArgument(_)) => return Err(e),
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
                let _ = self.shared.wake.send(());
            }
            // The background thread writes what is left once the writer goes quiet.
            let wake = was_quiet && !chain.is_quiet();
            if self.shared.gathering.load(Ordering::Relaxed) {
                self.shared.queued.notify_one();
            }
            (receipt, depends_on, wake)
        };
        if wake_background {
            let _ = self.shared.wake.send(());
        }
        self.shared.wait_durable(depends_on)?;
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
        let mut chain = self.shared.chain()?;
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
    /// sees every event answered so far and no call half-applied.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        let chain = self.shared.write_index()?;
        read(&chain.store)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Everything answered goes to sled, is made durable (flushed at least, also in buffered
        // mode) and its head recorded, so a log cut after a clean close shows as cut.
        if let Ok(chain) = self.shared.write_index() {
            let (store, head) = (chain.store.clone(), chain.written);
            drop(chain);
            let mode = match self.shared.durability {
                Durability::Fsync => Durability::Fsync,
                Durability::Flush | Durability::Buffered => Durability::Flush,
            };
            if head.seq > Seq(0) && store.sync(mode).is_ok() {
                let _ = store.record_head(head);
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.wake.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
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
    fn chain(&self) -> Result<MutexGuard<'_, Chain>> {
        self.chain.lock().map_err(lock_failed)
    }

    /// Waits for the background thread's write while the index changes held have outgrown the
    /// limits [`INDEX_OVERFLOW`] times over: calls that outpace sled then wait for it, and the
    /// memory the changes take stays bounded.
    fn make_room<'a>(&'a self, mut chain: MutexGuard<'a, Chain>) -> Result<MutexGuard<'a, Chain>> {
        while chain.writing.is_some() && chain.poisoned.is_none() && chain.index_overflows() {
            chain = self.index_written.wait(chain).map_err(lock_failed)?;
        }
        Ok(chain)
    }

    /// Writes every deferred event and index change, waiting for a batch the background thread
    /// is writing first; returns the writer lock, under which the stored index is up to date.
    fn write_index(&self) -> Result<MutexGuard<'_, Chain>> {
        let mut chain = self.chain()?;
        while chain.writing.is_some() && chain.poisoned.is_none() {
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

    /// The background thread's work: writes the batches of index changes handed to it, and what
    /// an idle writer leaves (deferred events after [`DEFER_IDLE`], index changes after
    /// [`INDEX_IDLE`]). Returns how long to wait before looking again, `None` to sleep until woken.
    fn background(&self, store: &Store) -> Option<Duration> {
        loop {
            let next = match self.chain.lock() {
                Ok(mut chain) => chain.background_work(),
                Err(_) => return None,
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
            if let Ok(mut chain) = self.chain.lock() {
                match written {
                    // A poisoned writer dropped the batch: nothing is left to clear.
                    Ok(()) if chain.poisoned.is_none() => chain.writing = None,
                    Ok(()) => {}
                    Err(e) => chain.poison(e.to_string()),
                }
            }
            self.index_written.notify_all();
        }
    }

    /// Once the writer has nothing left to write: makes the events appended since the last sync
    /// (reads and rejected calls, which no caller waits for) durable and records the head, so
    /// the recorded head covers them too and a log cut after them shows. At most once per idle
    /// spell, after the index changes are written ([`INDEX_IDLE`]); nothing in buffered mode.
    fn settle(&self) {
        let written = match self.chain.lock() {
            Ok(chain) if chain.poisoned.is_none() => chain.written.seq,
            _ => return,
        };
        let behind = self.durable.lock().is_ok_and(|d| d.seq < written);
        if behind {
            // A failure poisons the writer, as for a caller's sync; the next call reports it.
            let _ = self.wait_durable(written);
        }
    }

    /// Returns once the log is durable up to `seq` (at once in buffered mode), starting a sync if
    /// none is running.
    fn wait_durable(&self, seq: Seq) -> Result<()> {
        if self.durability == Durability::Buffered {
            return Ok(());
        }
        let mut durable = self.durable.lock().map_err(lock_failed)?;
        loop {
            if let Some(cause) = &durable.failed {
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
                    durable.failed = Some(e.to_string());
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

impl Chain {
    /// Poisons the writer after a storage failure that was not a failed append: first appends
    /// the events already answered (no sync: they become durable as far as sled gets them out),
    /// so the log keeps every call that got an answer. If that append fails too, they are lost
    /// as in a crash.
    fn poison(&mut self, cause: String) {
        if self.poisoned.is_none() && !self.deferred.is_empty() {
            let frames = std::mem::take(&mut self.deferred);
            if let Ok(head) = self.store.append(&frames) {
                self.written = head;
            }
        }
        self.poison_dropping(cause);
    }

    /// Poisons the writer, dropping what is not written yet (after a failed append).
    fn poison_dropping(&mut self, cause: String) {
        self.poisoned = Some(cause);
        self.deferred.clear();
        self.pending = Pending::default();
        self.writing = None;
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether nothing is left for the background thread to write.
    fn is_quiet(&self) -> bool {
        self.deferred.is_empty() && self.pending.is_empty()
    }

    /// Appends the deferred events and the head (no flush). A failure poisons the writer.
    fn append_deferred(&mut self) -> Result<()> {
        self.check_poisoned()?;
        if self.deferred.is_empty() {
            return Ok(());
        }
        let frames = std::mem::take(&mut self.deferred);
        match self.store.append(&frames) {
            Ok(head) => {
                self.written = head;
                Ok(())
            }
            Err(e) => {
                self.poison_dropping(e.to_string());
                Err(e)
            }
        }
    }

    /// Appends the deferred events and the head (no flush), then hands the index changes to the
    /// background thread if more are held than the limits allow and it is free; returns whether
    /// it did (the caller wakes the thread). A failure poisons the writer.
    fn write_deferred(&mut self) -> Result<bool> {
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
    fn index_overflows(&self) -> bool {
        self.index_exceeds(INDEX_OVERFLOW)
    }

    fn index_exceeds(&self, times: usize) -> bool {
        self.head.seq.0 - self.handed.0 >= INDEX_MAX_EVENTS * times as u64
            || self.pending.len() >= INDEX_MAX_KEYS * times
            || self.pending.bytes() >= INDEX_MAX_BYTES * times
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
        if self.poisoned.is_some() {
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

    /// Answers `call` against the index and the deferred changes and defers its event.
    ///
    /// The event is framed first: its size follows from the input alone, so a call too large to
    /// record is refused before anything changes. The answer runs on a savepoint of the index
    /// changes held, so on any error they are left as they were; the caller poisons the writer for
    /// a storage failure.
    fn run(&mut self, call: Call) -> Result<Ran> {
        let Call {
            agent,
            tool_use_id,
            body,
        } = call;
        let seq = Seq(self.head.seq.0 + 1);
        let mut event = Event {
            seq,
            prev_hash: self.head.hash,
            header: Header {
                time_ms: now_ms(),
                agent,
                tool_use_id,
                // A placeholder of the same size: the outcome is fixed-width.
                outcome: Outcome::of(false, ""),
                semantics: Semantics::CURRENT,
            },
            body,
        };
        let mut frame = event.to_frame();
        if u32::try_from(frame.header.len()).is_err() || u32::try_from(frame.payload.len()).is_err()
        {
            return Err(Error::InvalidArgument(
                "this call is too large to record (its event would exceed 4 GiB), so it was not run and nothing was recorded; send smaller inputs".into(),
            ));
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.savepoint();
        let writing = self.writing.as_deref();
        let mut projection =
            Projection::new(Overlay::resume(self.store.index_tree(), writing, pending));
        let traced = projection.run_traced(
            &event.header.agent,
            event.header.tool_use_id.as_deref(),
            &event.body,
            event.header.semantics,
            Some(frame.payload_hash),
            seq,
        );
        let mut pending = projection.into_inner().into_pending();
        let traced = traced.and_then(|traced| {
            self.store
                .failpoints()
                .check(Failpoint::Answer)
                .map(|()| traced)
        });
        let traced = match traced {
            Ok(traced) => {
                pending.release();
                self.pending = pending;
                traced
            }
            Err(e) => {
                pending.rollback();
                self.pending = pending;
                return Err(e);
            }
        };
        let Traced { answer, retry } = traced;
        // A large call that failed is logged as its digest, not whole. Its retry record was kept
        // under the `Tool` body's hash, which the digest keeps. A retry refused for lost access
        // stays whole: its replay reads the paths of the body.
        if let Body::Tool(call) = &event.body {
            let access_lost = retry
                .as_ref()
                .is_some_and(|r| r.kind == RetryKind::AccessLost);
            if answer.is_error && !access_lost && logs_failure_as_digest(frame.payload.len()) {
                let digest =
                    failed_digest(call, frame.payload.len(), frame.payload_hash, &answer.text);
                event.body = Body::RejectedDigest(digest);
                frame = event.to_frame();
            }
        }
        let changed = answer.change.is_some();
        event.header.outcome = Outcome::of(answer.is_error, &answer.text);
        frame.header = event.header_bytes();
        frame.hash = chain_hash(seq, &frame.prev_hash, &frame.header, &frame.payload_hash);
        self.head = Head {
            seq,
            hash: frame.hash,
        };
        self.deferred.push(frame);
        if changed {
            self.last_change = seq;
        }
        // A retried change depends on the original, which `last_change` covers: it changed the
        // tree at or before it.
        let receipt = Receipt {
            seq,
            text: answer.text,
            is_error: answer.is_error,
            retried: retry.is_some_and(|r| r.kind == RetryKind::Repeated),
            retry_of: retry.map(|r| r.of),
        };
        Ok(Ran {
            receipt,
            depends_on: self.last_change,
            changed,
        })
    }
}
