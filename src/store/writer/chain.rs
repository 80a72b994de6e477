//! The sequence and the chain: each call answered against the index and the changes held,
//! given the next seq, chained to the last event and kept until it is written; and the poisoning
//! that stops every later call after a storage failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Call, Poison, Receipt};
use crate::error::{Error, Result};
use crate::model::credential::OPERATOR;
use crate::model::event::{Body, Event, EventHash, Frame, Header, Outcome, Salt, Seq, chain_hash};
use crate::model::paths::MemPath;
use crate::model::policy::Access;
use crate::model::tool::Semantics;
use crate::model::tool::Tree;
use crate::model::tool::api::ApiWrite;
use crate::model::tool::request::{failed_digest, logs_failure_as_digest};
use crate::store::failpoint::Failpoint;
use crate::store::kv::{Overlay, Pending};
use crate::store::log::{Head, Store};
use crate::store::projection::{Caller, Projection, RetryKind, Traced};

/// Most deferred events held before they are written anyway.
pub const MAX_DEFERRED: usize = 1024;

/// How long the writer must be idle before deferred events are written.
pub const DEFER_IDLE: Duration = Duration::from_millis(1);

/// What [`Chain::run`] did with one call.
pub(super) struct Ran {
    pub(super) receipt: Receipt,
    /// The seq that must be durable before the answer is given.
    pub(super) depends_on: Seq,
    /// Whether the call changed the tree (and so wrote a new event that needs a sync).
    pub(super) changed: bool,
}

/// The sequence, the chain and the store, behind the writer lock.
pub(super) struct Chain {
    pub(super) store: Store,
    /// The last event chained, written or deferred.
    pub(super) head: Head,
    /// The last event written to sled.
    pub(super) written: Head,
    /// The last event that changed the tree (what a read's answer may depend on).
    pub(super) last_change: Seq,
    /// Why the writer is poisoned (shared with [`super::Shared`]).
    pub(super) poisoned: Poison,
    /// Events answered but not written yet: changes until the sync their callers wait for writes
    /// them, reads and rejected calls until the next write.
    pub(super) deferred: Vec<Frame>,
    /// Index changes not handed off yet (see the module docs), and the last event whose changes
    /// were handed off before them.
    pub(super) pending: Pending,
    pub(super) handed: Seq,
    /// The batch of index changes the background thread is writing: calls read it until it is
    /// in the tree.
    pub(super) writing: Option<Arc<Pending>>,
    /// When the last call was answered.
    pub(super) called_at: Instant,
}

impl Chain {
    /// The chain of a writer over `store`, whose last event is `head`.
    pub(super) fn new(store: Store, head: Head, poisoned: Poison) -> Chain {
        Chain {
            store,
            head,
            written: head,
            last_change: head.seq,
            poisoned,
            deferred: Vec::new(),
            pending: Pending::default(),
            handed: head.seq,
            writing: None,
            called_at: Instant::now(),
        }
    }

    /// Poisons the writer after a storage failure that was not a failed append: first appends
    /// the events already answered (no sync: they become durable as far as sled gets them out),
    /// so the log keeps every call that got an answer. If that append fails too, they are lost
    /// as in a crash.
    pub(super) fn poison(&mut self, cause: String) {
        if self.poisoned.get().is_none() && !self.deferred.is_empty() {
            let frames = std::mem::take(&mut self.deferred);
            if let Ok(head) = self.store.append(&frames) {
                self.written = head;
            }
        }
        self.poison_dropping(cause);
    }

    /// Poisons the writer, dropping what is not written yet (after a failed append).
    fn poison_dropping(&mut self, cause: String) {
        // The first cause is kept: later failures follow from it.
        let _ = self.poisoned.set(cause);
        self.deferred.clear();
        self.pending = Pending::default();
        self.writing = None;
    }

    pub(super) fn check_poisoned(&self) -> Result<()> {
        match self.poisoned.get() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Points an API update or delete at the path its memory has now. The server looks the
    /// memory up by its identity before it calls, and a memory-tool rename may move it (or a
    /// directory above it) in between: looked up again here, under the writer lock, a live
    /// memory is always found, and the event records the path the write was answered at, so
    /// its replay is the same. Left as sent: a retry (answered from its record, which matches
    /// its input as first sent), a memory that no longer lives, and one that moved where its
    /// agent may not read (which is not there for it, as for the server's lookup).
    fn relocate(
        &mut self,
        agent: &str,
        tool_use_id: Option<&str>,
        write: &mut ApiWrite,
    ) -> Result<()> {
        let (ApiWrite::Update { memory, path, .. } | ApiWrite::Delete { memory, path, .. }) = write
        else {
            return Ok(());
        };
        let Ok(sent) = MemPath::absolute_under(path, Semantics::CURRENT) else {
            return Ok(());
        };
        let pending = std::mem::take(&mut self.pending);
        let projection = Projection::new(Overlay::resume(
            self.store.index_tree(),
            self.writing.as_deref(),
            pending,
        ));
        let found = (|| -> Result<Option<MemPath>> {
            if projection.created(&sent)? == Some(*memory) {
                return Ok(None);
            }
            if let Some(id) = tool_use_id {
                if projection.recorded(agent, id)?.is_some() {
                    return Ok(None);
                }
            }
            let Some(entry) = projection
                .file_entries_under(&sent.ancestor(1))?
                .into_iter()
                .find(|entry| entry.created == Seq(*memory))
            else {
                return Ok(None);
            };
            let readable = agent == OPERATOR
                || projection
                    .policy()?
                    .allows(agent, &entry.path, Access::Read);
            Ok(readable.then_some(entry.path))
        })();
        self.pending = projection.into_inner().into_pending();
        if let Some(now) = found? {
            *path = now.to_string();
        }
        Ok(())
    }

    /// Whether nothing is left for the background thread to write.
    pub(super) fn is_quiet(&self) -> bool {
        self.deferred.is_empty() && self.pending.is_empty()
    }

    /// Appends the deferred events and the head (no flush). A failure poisons the writer.
    pub(super) fn append_deferred(&mut self) -> Result<()> {
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

    /// Answers `call` against the index and the deferred changes and defers its event.
    ///
    /// The event is framed first: its size follows from the input alone, so a call too large to
    /// record is refused before anything changes. The answer runs on a savepoint of the index
    /// changes held, so on any error they are left as they were; the caller poisons the writer for
    /// a storage failure.
    pub(super) fn run(&mut self, call: Call) -> Result<Ran> {
        let Call {
            agent,
            tool_use_id,
            body,
        } = call;
        let seq = Seq(self.head.seq.0 + 1);
        let salt = Salt::random()?;
        let mut event = Event {
            seq,
            prev_hash: self.head.hash,
            header: Header {
                time_ms: crate::model::time::now_ms(),
                agent,
                tool_use_id,
                // A placeholder of the same size: the outcome is fixed-width.
                outcome: Outcome::of(false, ""),
                semantics: Semantics::CURRENT,
            },
            body,
            salt: Some(salt),
        };
        if let Body::Api(write) = &mut event.body {
            self.relocate(
                &event.header.agent,
                event.header.tool_use_id.as_deref(),
                write,
            )?;
        }
        // A refused input logged as a digest keeps no hash of the whole input under semantics 4:
        // the store never held what lay past its kept start, and such a hash let whoever reads
        // the log or a replica confirm a guess at it (a short secret in a long line).
        if !event.header.semantics.digest_keeps_input_hash() {
            if let Body::RejectedDigest(digest) = &mut event.body {
                if !matches!(digest.refusal, crate::model::event::Refusal::Failed { .. }) {
                    digest.input.hash = EventHash::ZERO;
                }
            }
        }
        let mut frame = event.to_frame();
        if u32::try_from(frame.header.len()).is_err() || u32::try_from(frame.payload.len()).is_err()
        {
            return Err(Error::InvalidArgument(
                "this call is too large to record (its event would exceed 4 GiB), so it was not run and nothing was recorded; send smaller inputs".into(),
            ));
        }
        // A payload bound for a value file found cut short or removed fails this call alone,
        // before anything is answered (its append would be refused and stop the store).
        if crate::store::disk::goes_to_value_file(&frame) {
            self.store.check_values_appendable()?;
        }
        // Retries are matched by the plain hash of the input; the chain holds its salted
        // commitment.
        let input = EventHash::of(&frame.payload);
        let mut pending = std::mem::take(&mut self.pending);
        pending.savepoint();
        let writing = self.writing.as_deref();
        let mut projection =
            Projection::new(Overlay::resume(self.store.index_tree(), writing, pending)).journaled();
        let traced =
            projection.run_traced(Caller::of(&event.header), &event.body, Some(input), seq);
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
                let digest = failed_digest(call, frame.payload.len(), input, &answer.text);
                event.body = Body::RejectedDigest(digest);
                frame = event.to_frame();
            }
        }
        let changed = answer.change.is_some();
        event.header.outcome = event.outcome_of(answer.is_error, &answer.text);
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
            failure: answer.failure,
        };
        Ok(Ran {
            receipt,
            depends_on: self.last_change,
            changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{self, create, view};
    use super::*;

    #[test]
    fn calls_get_dense_seqs_chained_to_the_last_event_and_wait_until_written() {
        let (_dir, store, mut chain) = testing::chain();
        let made = chain.run(create("/memories/a.md", "a")).expect("create");
        let read = chain.run(view("/memories/a.md")).expect("view");
        assert_eq!((made.receipt.seq, read.receipt.seq), (Seq(1), Seq(2)));
        assert!(made.changed && !read.changed);
        // The view's answer depends on the create it saw, not on its own event.
        assert_eq!((made.depends_on, read.depends_on), (Seq(1), Seq(1)));
        assert_eq!(chain.deferred.len(), 2);
        assert_eq!(chain.deferred[1].prev_hash, chain.deferred[0].hash);
        assert_eq!(
            chain.written.seq,
            Seq(0),
            "nothing is written before the sync"
        );
        assert_eq!(store.head().expect("head").seq, Seq(0));
        chain.append_deferred().expect("append");
        assert_eq!(chain.written, chain.head);
        assert_eq!(store.head().expect("head"), chain.head);
        assert!(chain.deferred.is_empty());
    }

    #[test]
    fn poisoning_appends_what_was_answered_keeps_the_first_cause_and_refuses_the_rest() {
        let (_dir, store, mut chain) = testing::chain();
        chain.run(view("/memories")).expect("a listing");
        chain.poison("the first failure".into());
        assert_eq!(
            store.head().expect("head").seq,
            Seq(1),
            "the answered listing is in the log"
        );
        chain.poison("a later failure".into());
        match chain.check_poisoned() {
            Err(Error::Poisoned { cause }) => assert_eq!(cause, "the first failure"),
            other => panic!("expected poisoned, got {other:?}"),
        }
        assert!(chain.is_quiet(), "nothing is left to write");
        // A failed append drops what it could not write.
        let (_dir, store, mut chain) = testing::chain();
        chain.run(view("/memories")).expect("a listing");
        chain.poison_dropping("the append failed".into());
        assert_eq!(store.head().expect("head").seq, Seq(0));
        assert!(chain.is_quiet());
    }
}
