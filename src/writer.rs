//! The single writer: one thread owns the sequence, the chain and every write.
//!
//! Clients send jobs over a crossbeam channel and wait on a reply channel. The writer takes what is
//! queued (up to [`MAX_BATCH`] calls), answers each call in order against the index plus the
//! uncommitted changes, writes the events, the head and the index changes in one sled transaction,
//! makes the whole batch durable once (group commit), and only then replies.
//!
//! A batch of reads and rejected calls only (nothing in it changes the tree) is answered at once:
//! its events keep their seqs and are written with the next commit, or as soon as the writer has
//! been idle for [`DEFER_IDLE`], and become durable with the next commit that changes the tree.
//!
//! Multi-key reads of the index (listing records, the head, `verify`) also run on this thread,
//! between batches and after the deferred events are written, so they never see a batch
//! half-applied.
//!
//! A call whose tool_use id this agent already used is answered with the recorded text and
//! writes nothing: retries are idempotent, across restarts too, since the record is in the index.
//!
//! **Invariant:** after a failed commit or sync the writer is poisoned: it refuses
//! every later call with [`Error::Poisoned`] rather than risk forking the chain. Reopening recovers.

use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::error::{Error, Result};
use crate::event::{Body, Event, EventHash, Frame, Header, Outcome, Seq};
use crate::kv::{Overlay, Pending};
use crate::log::{Durability, Store};
use crate::projection::Projection;
use crate::verify::{Report, verify_store};

/// Most calls committed together.
pub const MAX_BATCH: usize = 1024;

/// What the writer returns for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The seq of the call's event.
    pub seq: Seq,
    /// The result text.
    pub text: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Whether this is the recorded answer to an earlier call with the same tool_use id (no new
    /// event was written).
    pub retried: bool,
}

/// One call to record.
pub(crate) struct Call {
    pub agent: String,
    pub tool_use_id: Option<String>,
    pub body: Body,
    pub reply: Sender<Result<Receipt>>,
}

/// A read of the store that must see one committed state, not a batch half-applied.
pub(crate) type Read = Box<dyn FnOnce(&Store) + Send>;

/// Work for the writer.
pub(crate) enum Job {
    Call(Call),
    Verify(Sender<Result<Report>>),
    Read(Read),
}

/// Starts the writer thread for `store`.
pub(crate) fn spawn(store: Store, durability: Durability) -> Result<(Sender<Job>, JoinHandle<()>)> {
    let head = store.head()?;
    let (tx, rx) = crossbeam_channel::unbounded();
    let writer = Writer {
        store,
        durability,
        head_seq: head.seq,
        head_hash: head.hash,
        poisoned: None,
        deferred: Deferred::default(),
    };
    let handle = std::thread::Builder::new()
        .name("mnemo-writer".into())
        .spawn(move || writer.run(&rx))
        .map_err(|e| Error::io("mnemo-writer thread", e))?;
    Ok((tx, handle))
}

struct Writer {
    store: Store,
    durability: Durability,
    head_seq: Seq,
    head_hash: EventHash,
    poisoned: Option<String>,
    deferred: Deferred,
}

/// Events of reads and rejected calls that were answered but not yet written, with their index
/// changes (the applied seq, retry records). They are written with the next commit, or when the
/// writer has been idle for [`DEFER_IDLE`].
#[derive(Default)]
struct Deferred {
    frames: Vec<Frame>,
    index: Pending,
}

/// How long the writer waits for more work before it writes deferred events.
pub const DEFER_IDLE: Duration = Duration::from_millis(1);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Writer {
    fn run(mut self, rx: &Receiver<Job>) {
        let mut calls = Vec::new();
        loop {
            let first = if self.deferred.frames.is_empty() {
                match rx.recv() {
                    Ok(job) => job,
                    Err(_) => break,
                }
            } else {
                match rx.recv_timeout(DEFER_IDLE) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) => {
                        self.write_deferred();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            let mut next = Some(first);
            while let Some(job) = next.take() {
                match job {
                    Job::Call(call) => calls.push(call),
                    Job::Verify(reply) => {
                        self.commit(std::mem::take(&mut calls));
                        self.write_deferred();
                        let _ = reply.send(verify_store(&self.store));
                    }
                    Job::Read(read) => {
                        self.commit(std::mem::take(&mut calls));
                        self.write_deferred();
                        read(&self.store);
                    }
                }
                if calls.len() < MAX_BATCH {
                    next = rx.try_recv().ok();
                }
            }
            self.commit(std::mem::take(&mut calls));
        }
        self.write_deferred();
    }

    fn poison(&mut self, cause: String) {
        self.poisoned = Some(cause);
        self.deferred = Deferred::default();
    }

    /// Writes the deferred events (no fsync: they are reads and rejected calls).
    fn write_deferred(&mut self) {
        if self.deferred.frames.is_empty() || self.poisoned.is_some() {
            return;
        }
        let Deferred { frames, index } = std::mem::take(&mut self.deferred);
        let overlay = Overlay::resume(self.store.index_tree(), index);
        if let Err(e) = self.store.commit(&frames, overlay) {
            self.poison(e.to_string());
        }
    }

    fn commit(&mut self, calls: Vec<Call>) {
        if calls.is_empty() {
            return;
        }
        if let Some(cause) = &self.poisoned {
            for call in calls {
                let _ = call.reply.send(Err(Error::Poisoned {
                    cause: cause.clone(),
                }));
            }
            return;
        }
        match self.write(&calls) {
            Ok(receipts) => {
                for (call, receipt) in calls.into_iter().zip(receipts) {
                    let _ = call.reply.send(Ok(receipt));
                }
            }
            Err(e) => {
                let cause = e.to_string();
                self.poison(cause.clone());
                let mut error = Some(e);
                for call in calls {
                    let err = error.take().unwrap_or_else(|| Error::Poisoned {
                        cause: cause.clone(),
                    });
                    let _ = call.reply.send(Err(err));
                }
            }
        }
    }

    /// Answers one batch against the index and the deferred changes; then either defers it (reads
    /// and rejected calls only) or commits it with everything deferred and makes it durable.
    /// Any failure poisons the writer: the deferred events may already have been answered.
    fn write(&mut self, calls: &[Call]) -> Result<Vec<Receipt>> {
        let Deferred { mut frames, index } = std::mem::take(&mut self.deferred);
        let mut projection = Projection::new(Overlay::resume(self.store.index_tree(), index));
        let mut receipts = Vec::with_capacity(calls.len());
        let mut prev = self.head_hash;
        let mut seq = self.head_seq;
        let mut mutated = false;
        let time_ms = now_ms();
        for call in calls {
            if let Some(id) = &call.tool_use_id {
                if let Some(recorded) = projection.recorded(&call.agent, id)? {
                    receipts.push(Receipt {
                        seq: recorded.seq,
                        text: recorded.text,
                        is_error: recorded.is_error,
                        retried: true,
                    });
                    continue;
                }
            }
            seq = Seq(seq.0 + 1);
            let answer =
                projection.run_call(&call.agent, call.tool_use_id.as_deref(), &call.body, seq)?;
            mutated |= answer.change.is_some();
            let event = Event {
                seq,
                prev_hash: prev,
                header: Header {
                    time_ms,
                    agent: call.agent.clone(),
                    tool_use_id: call.tool_use_id.clone(),
                    outcome: Outcome::of(answer.is_error, &answer.text),
                },
                body: call.body.clone(),
            };
            let frame = event.to_frame();
            if u32::try_from(frame.header.len()).is_err()
                || u32::try_from(frame.payload.len()).is_err()
            {
                return Err(Error::InvalidArgument(format!(
                    "call {seq} is too large to record (its event would exceed 4 GiB); send smaller inputs"
                )));
            }
            prev = frame.hash;
            frames.push(frame);
            receipts.push(Receipt {
                seq,
                text: answer.text,
                is_error: answer.is_error,
                retried: false,
            });
        }
        self.head_seq = seq;
        self.head_hash = prev;
        if !mutated && frames.len() < MAX_BATCH {
            self.deferred = Deferred {
                frames,
                index: projection.into_inner().into_pending(),
            };
            return Ok(receipts);
        }
        let head = self.store.commit(&frames, projection.into_inner())?;
        if mutated {
            self.store.sync(self.durability)?;
            if self.durability != Durability::Buffered {
                self.store.record_head(head)?;
            }
        }
        Ok(receipts)
    }
}
