//! The replay's answers, checked against the outcomes the log recorded (the hash of step 6) on a
//! thread of their own. Hashing an answer under its event's salt needs nothing of the replayed
//! tree, and a listing of a large directory costs as much to hash as several calls cost to
//! answer again, so the replay hands each answer over and goes on.
//!
//! The checker stops at the first answer that differs and says so; the verifier then verifies
//! the log again with each answer checked in turn (see [`super::verify_store_with`]), so the
//! violation it reports, and the report around it, are those of one thread doing every check
//! in seq order.

use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};

use super::Stop;
use crate::model::event::{Event, Outcome, Salt};
use crate::model::tool::Answer;

/// At most this many answers are handed over at once.
const BATCH: usize = 256;

/// A batch is handed over once its answers' text reaches this many bytes, so listings do not
/// pile up in memory.
const BATCH_BYTES: usize = 1 << 20;

/// How many batches may wait for the checker.
const DEPTH: usize = 8;

/// An answer the replay gave, with the outcome its event recorded.
pub(super) struct Claim {
    salt: Option<Salt>,
    recorded: Outcome,
    is_error: bool,
    text: String,
}

impl Claim {
    /// Whether the answer gives the recorded outcome (its error flag and the hash of its text).
    fn holds(&self) -> bool {
        Outcome::under(self.salt.as_ref(), self.is_error, &self.text) == self.recorded
    }
}

/// The replay's side: answers gathered into batches for the checker.
pub(super) struct Claims<'a> {
    tx: Sender<Vec<Claim>>,
    batch: Vec<Claim>,
    bytes: usize,
    differs: &'a AtomicBool,
}

impl<'a> Claims<'a> {
    /// The replay's side, and the checker's ([`check_claims`]), which sets `differs` when an
    /// answer differs from its record.
    pub(super) fn new(differs: &'a AtomicBool) -> (Claims<'a>, Receiver<Vec<Claim>>) {
        let (tx, rx) = crossbeam_channel::bounded(DEPTH);
        let claims = Claims {
            tx,
            batch: Vec::with_capacity(BATCH),
            bytes: 0,
            differs,
        };
        (claims, rx)
    }

    /// Hands over `answer`, which the replay gave `event`. [`Stop::Differs`] once the checker
    /// found an earlier answer different from its record.
    pub(super) fn push(&mut self, event: &Event, answer: Answer) -> Result<(), Stop> {
        self.bytes += answer.text.len();
        self.batch.push(Claim {
            salt: event.salt,
            recorded: event.header.outcome,
            is_error: answer.is_error,
            text: answer.text,
        });
        if self.batch.len() == BATCH || self.bytes >= BATCH_BYTES {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), Stop> {
        if self.differs.load(Ordering::Relaxed) {
            return Err(Stop::Differs);
        }
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.bytes = 0;
        // The checker hangs up only when it found an answer that differs.
        self.tx.send(full).map_err(|_| Stop::Differs)
    }

    /// Hands over the answers not sent yet; the checker ends when it has checked them.
    pub(super) fn finish(mut self) -> Result<(), Stop> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.send()
    }
}

/// The checker: checks every answer handed over, in order, until the replay hangs up (`false`)
/// or one differs from its record (`true`, and `differs` set).
pub(super) fn check_claims(rx: Receiver<Vec<Claim>>, differs: &AtomicBool) -> bool {
    for batch in rx {
        if !batch.iter().all(Claim::holds) {
            differs.store(true, Ordering::Relaxed);
            return true;
        }
    }
    false
}
