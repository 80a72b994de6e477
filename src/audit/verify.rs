//! The verifier: replays the log from seq 1 and proves the chain, the index and every answer.
//!
//! Checks, in order, for each stored record (stopping at the first violation, which it names):
//!
//! 1. keys are dense from 1 ([`ViolationKind::Missing`]);
//! 2. the record decodes and the seq inside it equals its key ([`ViolationKind::Undecodable`],
//!    [`ViolationKind::SeqMismatch`]);
//! 3. `prev_hash` equals the previous event's hash ([`ViolationKind::BrokenLink`]);
//! 4. `blake3(payload)` equals the stored payload hash ([`ViolationKind::PayloadHash`]);
//! 5. the chain hash recomputes to the stored hash ([`ViolationKind::Hash`]);
//! 6. re-answering the command against the replayed tree, under the semantics version the event
//!    records, reproduces the recorded outcome — the exact result text's hash and the error flag
//!    ([`ViolationKind::Outcome`]); for a retry (a
//!    tool_use id the agent used before, whose record the replay keeps) the answer the retry rule
//!    gives from the replayed record, the policy and the tree ([`ViolationKind::DuplicateCall`]
//!    when it differs, naming the original's seq);
//! 7. at the index's applied seq, the replayed index equals the stored one byte for byte
//!    ([`ViolationKind::Index`]);
//!
//! and at the end, that `meta.head` names an event of the log with that event's hash, and that the
//! log still holds the head the store recorded outside sled after its last durable commit
//! ([`ViolationKind::Head`]). Events past `meta.head` are what a crash leaves when it cuts a commit
//! short (the head is written after the events it names): they are checked like every other
//! event, reported in [`Report::meta_head`], and not a violation.
//!
//! Steps 1-5 are the chain rules of [`crate::model::chain`] (each [`Rule`] reported as its
//! [`ViolationKind`]), checked on a thread of their own, which also decodes each record; the
//! replay engine's loop ([`Replay::drive`]) re-answers every event against an in-memory tree,
//! and steps 6-7 and the head and checkpoint checks are what this module adds to it. The hash
//! of step 6 (each answer's text under its event's salt) is taken on a third thread
//! ([`claims`]); when an answer differs, the log is verified again with every check in seq
//! order on the replay's thread, so that the violation named first is the first there is.
//!
//! A restore verifies the log it appends in the same pass, reading the records from memory as
//! they are appended ([`verify_appended`]): its replay writes the whole index, which the store
//! then takes, so the log is replayed once.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::model::chain::{Break, Chain, Rule};
use crate::model::event::{Body, Event, EventHash, FrameRef, Seq};
use crate::model::policy::AdminCommand;
use crate::model::protocol::{Checkpoint, Erased, Finding, VerifyReport};
use crate::store::kv::{IndexTrees, MemKv};
use crate::store::log::{Head, Store};
use crate::store::projection::{INDEX_LAYOUT, Projection, RENAMES_UNSTAMPED, Traced};
use crate::store::replay::{Replay, Step};

mod claims;

use claims::{Claims, check_claims};

/// Which invariant broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ViolationKind {
    /// A seq is missing: the keys are not dense from 1.
    Missing,
    /// A record could not be decoded.
    Undecodable,
    /// The seq inside a record differs from its key.
    SeqMismatch,
    /// `prev_hash` is not the previous event's hash.
    BrokenLink,
    /// The payload does not hash to the stored payload hash.
    PayloadHash,
    /// The chain hash does not recompute.
    Hash,
    /// Re-answering the command gives a different result.
    Outcome,
    /// The stored index differs from the replayed one.
    Index,
    /// `meta.head` does not name the last event.
    Head,
    /// The log no longer holds the event an exported checkpoint names.
    Checkpoint,
    /// A retry (a tool_use id the agent used before) was not answered as the retry rule says: it
    /// ran again, or repeated a record it had no right to.
    DuplicateCall,
    /// An erased record that no later redaction names, or a redaction that names an event that
    /// is not erased (or that another redaction named already).
    Redaction,
    /// A record of a newer format than the store's format marker (`meta.format`) says the log
    /// holds: the marker was lowered, so an older build would open a store it cannot read.
    Format,
    /// The copy of a memory store's label beside its log is not the label its chain holds.
    Label,
}

impl ViolationKind {
    /// Every kind, in declaration order.
    pub const ALL: [ViolationKind; 14] = [
        ViolationKind::Missing,
        ViolationKind::Undecodable,
        ViolationKind::SeqMismatch,
        ViolationKind::BrokenLink,
        ViolationKind::PayloadHash,
        ViolationKind::Hash,
        ViolationKind::Outcome,
        ViolationKind::Index,
        ViolationKind::Head,
        ViolationKind::Checkpoint,
        ViolationKind::DuplicateCall,
        ViolationKind::Redaction,
        ViolationKind::Format,
        ViolationKind::Label,
    ];

    /// A short stable name (used in `--json` output).
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Missing => "missing",
            ViolationKind::Undecodable => "undecodable",
            ViolationKind::SeqMismatch => "seq-mismatch",
            ViolationKind::BrokenLink => "broken-link",
            ViolationKind::PayloadHash => "payload-hash",
            ViolationKind::Hash => "hash",
            ViolationKind::Outcome => "outcome",
            ViolationKind::Index => "index",
            ViolationKind::Head => "head",
            ViolationKind::Checkpoint => "checkpoint",
            ViolationKind::DuplicateCall => "duplicate-call",
            ViolationKind::Redaction => "redaction",
            ViolationKind::Format => "format",
            ViolationKind::Label => "label",
        }
    }
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The first seq at which it shows.
    pub seq: Seq,
    /// What broke.
    pub kind: ViolationKind,
    /// Expected and found values, in words.
    pub detail: String,
}

/// What `verify` found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Report {
    /// Events checked.
    pub events: u64,
    /// Bytes of stored records checked.
    pub bytes: u64,
    /// The log's last event (its seq and hash): the checkpoint to keep.
    pub head: Head,
    /// The head as recorded in `meta`: behind [`Report::head`] when a crash cut a commit short
    /// (the next open for writing moves it).
    pub meta_head: Head,
    /// The index's applied seq.
    pub index_applied: Seq,
    /// The highest seq the log holds a record for: what there was to check ([`Report::events`]
    /// is less when verification stopped at a violation).
    pub log_last: Seq,
    /// The head the store recorded outside sled at its last commit or close (`mnemo-head`), if
    /// it has one: the log must hold at least that.
    pub recorded: Option<Head>,
    /// Whether the store was verified as it rests (a copy no writer holds) with events in its
    /// log and no head record: see [`Report::notes`]. (A store a server holds open records its
    /// head only after its next durable commit, idle moment or close.)
    pub head_record_missing: bool,
    /// Broken invariants; empty means intact. Verification stops at the first; past a payload
    /// the value file lost it checks the chain alone, and names every other lost payload and
    /// the first break after it.
    pub violations: Vec<Violation>,
    /// The events a redaction erased, each with the seq of the redaction that names it: their
    /// chain hashes verified, their answers could not be re-derived, and they are no violation.
    pub redacted: Vec<(Seq, Seq)>,
    /// Wall time spent.
    pub elapsed: Duration,
}

impl Report {
    /// The report on a store whose log sled refuses to open because its bytes are damaged
    /// (`why`): no event can be read, so the first unreadable seq is 1. A finding about the log
    /// (exit 1), not a failure to run.
    pub fn unreadable(why: impl Into<String>) -> Report {
        Report {
            events: 0,
            bytes: 0,
            head: Head::EMPTY,
            meta_head: Head::EMPTY,
            index_applied: Seq(0),
            log_last: Seq(0),
            recorded: None,
            head_record_missing: false,
            violations: vec![violation(
                Seq(1),
                ViolationKind::Undecodable,
                format!(
                    "the log cannot be read: sled found its bytes damaged ({}); restore the store from a replica or a backup",
                    why.into()
                ),
            )],
            redacted: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    /// Whether `error`, met opening or reading a store to verify it, is damage to its log (a
    /// finding, [`Report::unreadable`]) rather than a failure to run.
    pub fn is_damage(error: &Error) -> bool {
        matches!(error, Error::Storage(e) if e.is_damage())
    }

    /// What an auditor must know of an intact report: a log with events but no head record
    /// (`mnemo-head`), which every commit and close writes, so a cut of the log's tail could not
    /// be seen (only a kept checkpoint, `--expect`, can then prove the log whole).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.head_record_missing && self.is_intact() {
            notes.push(format!(
                "the store's head record (mnemo-head) is missing, though the log holds {} events: it was deleted, or the store was killed before its first commit finished, so events cut from the log's tail would not be seen; prove the log whole with `mnemo verify --expect` and a checkpoint you kept",
                self.head.seq
            ));
        }
        notes
    }

    /// No violation found.
    pub fn is_intact(&self) -> bool {
        self.violations.is_empty()
    }

    /// The log holds no event (and nothing claims it should).
    pub fn is_empty(&self) -> bool {
        self.events == 0 && self.is_intact()
    }

    /// `intact`, `empty` (no events, nothing claims otherwise) or `violation`.
    pub fn status(&self) -> &'static str {
        if !self.is_intact() {
            "violation"
        } else if self.events == 0 {
            "empty"
        } else {
            "intact"
        }
    }

    /// Events verified per second.
    pub fn events_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        // NOTE: precision loss above 2^53 events is irrelevant for a rate.
        #[expect(clippy::cast_precision_loss)]
        let events = self.events as f64;
        events / secs
    }

    /// Megabytes (10^6 bytes) of records verified per second.
    pub fn mb_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss)]
        let bytes = self.bytes as f64;
        bytes / 1e6 / secs
    }

    /// The checkpoint to keep (`SEQ:HASH` of the last event), only for an intact log: a log with
    /// a violation has none worth keeping.
    pub fn checkpoint(&self) -> Option<String> {
        (self.is_intact() && !self.is_empty()).then(|| self.head.to_string())
    }

    /// The report as `mnemo verify --json` prints it, for the store at `store`.
    pub fn to_protocol(&self, store: &std::path::Path) -> VerifyReport {
        VerifyReport {
            bytes: self.bytes,
            checkpoint: self.checkpoint(),
            elapsed_ms: self.elapsed.as_secs_f64() * 1e3,
            events: self.events,
            events_per_sec: self.events_per_sec(),
            head: Checkpoint {
                hash: self.head.hash.to_hex(),
                seq: self.head.seq.0,
            },
            index_applied: self.index_applied.0,
            log_last: self.log_last.0,
            mb_per_sec: self.mb_per_sec(),
            meta_head: self.meta_head.seq.0,
            meta_head_hash: self.meta_head.hash.to_hex(),
            notes: self.notes(),
            recorded_head: self.recorded.map(|h| h.seq.0),
            recorded_head_hash: self.recorded.map(|h| h.hash.to_hex()),
            redacted: self
                .redacted
                .iter()
                .map(|(seq, by)| Erased {
                    by: by.0,
                    seq: seq.0,
                })
                .collect(),
            status: self.status().to_string(),
            store: store.display().to_string(),
            violations: self
                .violations
                .iter()
                .map(|v| Finding {
                    detail: v.detail.clone(),
                    kind: v.kind.name().to_string(),
                    seq: v.seq.0,
                })
                .collect(),
        }
    }

    /// The report `sent` describes (a server's); `None` when one of its hashes or names is
    /// not one.
    pub fn from_protocol(sent: &VerifyReport) -> Option<Report> {
        let head = |seq: u64, hash: &str| -> Option<Head> {
            Some(Head {
                seq: Seq(seq),
                hash: EventHash::from_hex(hash)?,
            })
        };
        let violations = sent
            .violations
            .iter()
            .map(|v| {
                Some(Violation {
                    seq: Seq(v.seq),
                    kind: ViolationKind::ALL
                        .into_iter()
                        .find(|kind| kind.name() == v.kind)?,
                    detail: v.detail.clone(),
                })
            })
            .collect::<Option<Vec<Violation>>>()?;
        let recorded = match (sent.recorded_head, &sent.recorded_head_hash) {
            (Some(seq), Some(hash)) => Some(head(seq, hash)?),
            _ => None,
        };
        Some(Report {
            events: sent.events,
            bytes: sent.bytes,
            head: head(sent.head.seq, &sent.head.hash)?,
            meta_head: head(sent.meta_head, &sent.meta_head_hash)?,
            index_applied: Seq(sent.index_applied),
            log_last: Seq(sent.log_last),
            recorded,
            head_record_missing: !sent.notes.is_empty(),
            violations,
            redacted: sent
                .redacted
                .iter()
                .map(|erased| (Seq(erased.seq), Seq(erased.by)))
                .collect(),
            elapsed: Duration::try_from_secs_f64(sent.elapsed_ms / 1e3).ok()?,
        })
    }
}

/// The first of the erased records `pending` (met before event `at`) that no redaction after
/// `at` names; read only when an answer after them does not re-derive.
fn unnamed(store: &Store, pending: &std::collections::BTreeSet<Seq>, at: Seq) -> Option<Seq> {
    if pending.is_empty() {
        return None;
    }
    let mut left = pending.clone();
    for item in store.records(Seq(at.0 + 1)) {
        let Ok(event) = item.and_then(|(_, record)| Event::decode(&record)) else {
            break;
        };
        if let Body::Admin(AdminCommand::Redact { seqs, .. }) = &event.body {
            for seq in seqs {
                left.remove(&Seq(*seq));
            }
        }
    }
    left.first().copied()
}

/// The first of the kept effects `pending` (met before event `at`, by seq, each with its
/// digest) whose redaction after `at` does not commit to it, and that redaction; read only when
/// an answer after them does not re-derive.
fn uncommitted(
    store: &Store,
    pending: &std::collections::BTreeMap<Seq, EventHash>,
    at: Seq,
) -> Option<(Seq, Seq)> {
    if pending.is_empty() {
        return None;
    }
    let mut left = pending.clone();
    for item in store.records(Seq(at.0 + 1)) {
        let Ok((seq, record)) = item else { break };
        let Ok(event) = Event::decode(&record) else {
            break;
        };
        if let Body::Admin(AdminCommand::Redact { seqs, kept, .. }) = &event.body {
            for named in seqs {
                if let Some(digest) = left.remove(&Seq(*named)) {
                    if !kept.contains(&(*named, digest)) {
                        return Some((Seq(*named), seq));
                    }
                }
            }
        }
    }
    None
}

fn violation(seq: Seq, kind: ViolationKind, detail: String) -> Violation {
    Violation { seq, kind, detail }
}

/// How often [`VerifyOptions::progress`] is called, in events.
pub const PROGRESS_EVERY: u64 = 10_000;

/// What to check beyond the store itself, and how to report progress.
#[derive(Default)]
pub struct VerifyOptions<'a> {
    /// A checkpoint exported earlier (`SEQ:HASH`): the log must still hold exactly that event at
    /// that seq. A local chain cannot tell a consistent rewrite of the whole log from the real
    /// one; a checkpoint kept elsewhere can.
    pub expect: Option<Head>,
    /// Called as `progress(checked, head_seq)` every [`PROGRESS_EVERY`] events.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
}

/// Verifies an open store (callers make sure no write runs meanwhile).
pub fn verify_store(store: &Store) -> Result<Report> {
    verify_store_with(store, VerifyOptions::default())
}

/// `verify_store` with a checkpoint to prove and a progress callback.
///
/// The replay's answers are checked against their recorded outcomes on a thread of their own
/// ([`Claims`]). When one differs, the pass stops and the log is verified again with each answer
/// checked as it is given, so that the first violation in seq order is the one reported, with
/// the report as it stood before it (a store that verifies intact is read once).
pub fn verify_store_with(store: &Store, mut options: VerifyOptions<'_>) -> Result<Report> {
    let start = Instant::now();
    let mut shown = 0;
    let report = match verify_pass(store, Source::Store, &mut options, &mut shown, true, start)? {
        Some(report) => report,
        None => verify_pass(store, Source::Store, &mut options, &mut shown, false, start)?
            .ok_or_else(|| Error::corrupt("verify stopped twice without naming a violation"))?,
    };
    past_lost_payload(store, report)
}

/// A report whose first violation is a payload the value file lost (its bytes damaged, cut off
/// or gone) goes on past it with what the chain alone shows: no answer after it can be
/// re-derived, but every record's header still joins the chain, so the report names every other
/// payload lost and the first record that breaks the chain, if one does, and says how far it
/// links. A payload changed in sled, or any other first violation, ends the report as before.
fn past_lost_payload(store: &Store, mut report: Report) -> Result<Report> {
    let Some(first) = report.violations.first() else {
        return Ok(report);
    };
    let seq = first.seq;
    if first.kind != ViolationKind::PayloadHash || report.head.seq.0.checked_add(1) != Some(seq.0) {
        return Ok(report);
    }
    // The walk starts at the violation's record: one changed in sled breaks it there at once.
    let past = store.chain_past(report.head)?;
    if past.lost.first().map(|(lost, _)| *lost) != Some(seq) {
        return Ok(report);
    }
    let others: Vec<(Seq, Error)> = past.lost.into_iter().filter(|(s, _)| *s != seq).collect();
    let mut said = match &past.broken {
        None => format!(
            "its records link through event {}, the last the log holds",
            past.end
        ),
        Some(broke) => format!(
            "its records link through event {}, and event {} breaks the chain (below)",
            past.end, broke.seq
        ),
    };
    match others.as_slice() {
        [] => {}
        [(one, _)] => said.push_str(&format!("; the payload of event {one} is lost too (below)")),
        many => {
            let seqs: Vec<String> = many.iter().map(|(s, _)| s.to_string()).collect();
            said.push_str(&format!(
                "; the payloads of events {} are lost too (below)",
                seqs.join(", ")
            ));
        }
    }
    report.violations[0].detail.push_str(&format!(
        ". Past it verify checked the chain alone, since no answer after it can be re-derived: {said}"
    ));
    for (seq, why) in others {
        let detail = match why {
            Error::ChainBroken { what, .. } => what,
            other => other.to_string(),
        };
        report
            .violations
            .push(violation(seq, ViolationKind::PayloadHash, detail));
    }
    report.violations.extend(past.broken.map(Violation::from));
    Ok(report)
}

/// Records handed to [`verify_appended`] at a time: a run of consecutive records, in seq order.
pub(crate) type Appended = Vec<(Seq, Vec<u8>)>;

/// Verifies the log of a store being made from it (a restore) while its records are appended,
/// and derives its index in the same pass: `records` hands over each record as it is appended
/// (the bytes the store is given, in seq order, from event 1), and the pass reads them from
/// there rather than from the store, on the threads [`verify_store`] uses. Its replay writes the
/// whole index, version journal included, rather than comparing it with the store's, which must
/// have applied nothing: once every record is appended the caller writes the index returned
/// ([`Store::write_new_index`]), which is then, byte for byte, what a replay of the log derives.
///
/// `None` when the pass found anything to report (a violation, or an answer that differs from
/// its record): the caller then verifies the store whole once it is made, which names the first
/// violation as `verify` does. Records that stop short (the sender dropped) end the pass there.
#[cfg_attr(
    not(feature = "replicate"),
    expect(
        dead_code,
        reason = "only a restore from a replica verifies what it appends"
    )
)]
pub(crate) fn verify_appended(
    store: &Store,
    records: crossbeam_channel::Receiver<Appended>,
) -> Result<Option<(Report, MemKv)>> {
    if store.index().applied()? != Seq(0) {
        return Err(Error::corrupt(
            "a log is verified as it is appended only into a store whose index has applied nothing",
        ));
    }
    let mut index = None;
    let passed = verify_pass(
        store,
        Source::Appended(records, &mut index),
        &mut VerifyOptions::default(),
        &mut 0,
        true,
        Instant::now(),
    )?;
    Ok(match (passed, index) {
        (Some(mut report), Some(index)) if report.is_intact() => {
            report.log_last = report.head.seq;
            Some((report, index))
        }
        _ => None,
    })
}

/// Where a pass reads the log.
enum Source<'a> {
    /// From the store.
    Store,
    /// From the records handed over as they are appended to a store being made
    /// ([`verify_appended`]); the pass's replay writes the whole index, left in the option when
    /// the pass ends with no violation.
    Appended(crossbeam_channel::Receiver<Appended>, &'a mut Option<MemKv>),
}

/// One pass of the verifier over the whole log, read from `source`. With `claims`, the answers
/// are checked on a thread of their own and `None` says one differs from its record; without,
/// each is checked as it is given and the pass always ends in a report. `shown` is how many
/// events progress was reported for: a second pass reports none before it passes them.
fn verify_pass(
    store: &Store,
    source: Source<'_>,
    options: &mut VerifyOptions<'_>,
    shown: &mut u64,
    claims: bool,
    start: Instant,
) -> Result<Option<Report>> {
    let mut report = Report {
        events: 0,
        bytes: 0,
        head: Head::EMPTY,
        meta_head: Head::EMPTY,
        index_applied: Seq(0),
        // A malformed key is named by the walk below; here it only leaves the count unknown.
        // The last record's value is read with its key: one sled cannot read (a damaged blob)
        // leaves the head's seq, so the violation is named at its seq, not past the log's end.
        log_last: store
            .last_seq()
            .or_else(|_| store.head().map(|head| head.seq))
            .unwrap_or(Seq(0)),
        recorded: store.recorded_head().ok().flatten(),
        head_record_missing: false,
        violations: Vec::new(),
        redacted: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let finish = |mut r: Report, v: Option<Violation>| {
        r.violations.extend(v);
        r.elapsed = start.elapsed();
        Ok(Some(r))
    };
    report.meta_head = match store.head() {
        Ok(h) => h,
        Err(e) => {
            let v = violation(Seq(0), ViolationKind::Head, format!("meta.head: {e}"));
            return finish(report, Some(v));
        }
    };
    let stored_index = store.index();
    report.index_applied = match stored_index.applied() {
        Ok(seq) => seq,
        Err(e) => {
            let v = violation(
                Seq(0),
                ViolationKind::Index,
                format!("index applied seq: {e}"),
            );
            return finish(report, Some(v));
        }
    };
    let layout = match stored_index.layout() {
        Ok(layout) if layout < RENAMES_UNSTAMPED => {
            let v = violation(
                Seq(0),
                ViolationKind::Index,
                format!(
                    "the index was written by an older Mnemo (layout {layout}, this build writes {INDEX_LAYOUT}); open the store once with a client (for example `mnemo tool --db PATH < /dev/null`) to rebuild it from the log, then verify again"
                ),
            );
            return finish(report, Some(v));
        }
        Ok(layout) => layout.min(INDEX_LAYOUT),
        Err(e) => {
            let v = violation(Seq(0), ViolationKind::Index, format!("index layout: {e}"));
            return finish(report, Some(v));
        }
    };
    let (appended, mut index_out) = match source {
        Source::Store => (None, None),
        Source::Appended(records, index) => (Some(records), Some(index)),
    };
    // An index of the layout before this one is re-derived in its own layout: it holds the same
    // tree, and a client that opens the store rebuilds it in this build's. Reading what is
    // appended, the replay writes the journal into its tree: the whole index.
    let mut replay = Replay::in_memory_with_listings().in_layout(layout);
    replay = match appended {
        Some(_) => replay.journaled(),
        None => replay.journal_held(),
    };
    // The version journal's entries checked against the stored index, event by event, and the
    // first that differed: named when the index is compared (at its applied seq), as a
    // difference the whole index's comparison finds, so that a broken link before that seq is
    // the violation reported.
    let mut journal_checked = 0u64;
    let mut journal_differs: Option<Violation> = None;
    let mut expected = Seq(1);
    if report.index_applied == Seq(0) {
        if let Some(v) = compare_index(replay.tree(), &stored_index, Seq(0), 0)? {
            return finish(report, Some(v));
        }
    }
    // The chain checks (steps 1-5) run on a thread of their own, ahead of the replay (steps 6-7)
    // on this one; it stops at its first violation, after handing over every record before it,
    // so the first violation in seq order is the one reported, as if one thread did both.
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(PIPELINE_DEPTH);
    // Erased records not yet named by a redaction.
    let mut erased = std::collections::BTreeSet::new();
    // The digest of what each erased record met (and not yet named by a redaction) keeps.
    let mut kept_digests = std::collections::BTreeMap::new();
    let broke = AtomicBool::new(false);
    let (outcome, differs) = std::thread::scope(|scope| {
        scope.spawn(move || match appended {
            // What is appended was given its format marker by the append itself.
            Some(records) => read_chain(
                records.into_iter().flatten().map(Ok::<_, Error>),
                u8::MAX,
                &tx,
            ),
            None => read_chain(store.records(Seq(0)), store.format_marker(), &tx),
        });
        let (mut claims, checker) = if claims {
            let (claims, rx) = Claims::new(&broke);
            let checker = scope.spawn(|| check_claims(rx, &broke));
            (Some(claims), Some(checker))
        } else {
            (None, None)
        };
        let outcome = replay.drive(Handed::new(rx), |tree, checked, traced| {
            let seq = checked.event.seq;
            match &checked.event.body {
                Body::Erased(record) => {
                    erased.insert(seq);
                    if let Some(kept) = &record.kept {
                        kept_digests.insert(seq, crate::model::event::kept_digest(kept));
                    }
                }
                body => {
                    let answered = match (claims.as_mut(), traced) {
                        (Some(claims), Ok(traced)) => claims.push(&checked.event, traced.answer),
                        (_, traced) => check_outcome(&checked.event, traced),
                    };
                    if let Err(stop) = answered {
                        // A kept effect its redaction does not commit to is the cause.
                        if let (Some((first, by)), Stop::Violation(v)) =
                            (uncommitted(store, &kept_digests, seq), &stop)
                        {
                            return Err(Stop::Violation(violation(
                                first,
                                ViolationKind::Redaction,
                                format!(
                                    "event {first} keeps what it did to the tree, but redaction {by}, which erased it, does not commit to what it keeps: it was changed outside Mnemo, and event {seq}'s answer depends on it ({})",
                                    v.detail
                                ),
                            )));
                        }
                        // A payload erased that no later redaction names is the cause.
                        return Err(match (unnamed(store, &erased, seq), stop) {
                            (Some(first), Stop::Violation(v)) => Stop::Violation(violation(
                                first,
                                ViolationKind::Redaction,
                                format!(
                                    "event {first} is erased but no redaction names it, and event {seq}'s answer depends on what it held ({})",
                                    v.detail
                                ),
                            )),
                            (_, stop) => stop,
                        });
                    }
                    if let Body::Admin(AdminCommand::Redact { seqs, kept, .. }) = body {
                        for named in seqs {
                            if let Some(digest) = kept_digests.remove(&Seq(*named)) {
                                if !kept.contains(&(*named, digest)) {
                                    return Err(Stop::Violation(violation(
                                        Seq(*named),
                                        ViolationKind::Redaction,
                                        format!(
                                            "event {named} keeps what it did to the tree, but redaction {seq}, which erased it, does not commit to what it keeps: it was changed outside Mnemo"
                                        ),
                                    )));
                                }
                            }
                            if !erased.remove(&Seq(*named)) {
                                return Err(Stop::Violation(violation(
                                    seq,
                                    ViolationKind::Redaction,
                                    format!(
                                        "redaction {seq} names event {named}, which is not an erased record before it (or another redaction named it already)"
                                    ),
                                )));
                            }
                            report.redacted.push((Seq(*named), seq));
                        }
                    }
                }
            }
            let hash = checked.hash;
            report.head = Head { seq, hash };
            if seq == report.meta_head.seq && hash != report.meta_head.hash {
                return Err(Stop::Violation(violation(
                    seq,
                    ViolationKind::Head,
                    format!(
                        "meta.head says event {seq} hashes to {} but it hashes to {hash}",
                        report.meta_head.hash
                    ),
                )));
            }
            report.events += 1;
            report.bytes += checked.bytes;
            if report.events % PROGRESS_EVERY == 0 && report.events > *shown {
                *shown = report.events;
                if let Some(progress) = options.progress.as_mut() {
                    progress(report.events, report.meta_head.seq.0.max(seq.0));
                }
            }
            if let Some(expect) = options.expect.filter(|e| e.seq == seq) {
                if expect.hash != hash {
                    return Err(Stop::Violation(violation(
                        seq,
                        ViolationKind::Checkpoint,
                        format!(
                            "the checkpoint says event {seq} hashes to {} but the log's event {seq} hashes to {hash}: history up to seq {seq} was rewritten",
                            expect.hash
                        ),
                    )));
                }
            }
            for (key, value) in tree.take_journal() {
                if seq > report.index_applied {
                    continue;
                }
                journal_checked += 1;
                let stored = stored_index.kv().index().get(&key).map_err(Error::from)?;
                if journal_differs.is_none() && stored.as_deref() != Some(value.as_slice()) {
                    let found = if stored.is_some() {
                        "holds a different value than the log implies"
                    } else {
                        "is missing"
                    };
                    journal_differs = Some(violation(
                        seq,
                        ViolationKind::Index,
                        format!(
                            "the store's {} {found}",
                            crate::store::projection::describe_key(&key)
                        ),
                    ));
                }
            }
            if seq == report.index_applied {
                if let Some(v) = journal_differs.take() {
                    return Err(Stop::Violation(v));
                }
                if let Some(v) = compare_index(tree, &stored_index, seq, journal_checked)? {
                    return Err(Stop::Violation(v));
                }
            }
            expected = Seq(seq.0 + 1);
            Ok(())
        });
        // The last answers, then the checker's word on all of them.
        let sent = claims.map_or(Ok(()), Claims::finish);
        let differs = checker.is_some_and(|checker| checker.join().unwrap_or(true));
        (outcome.and(sent), differs)
    });
    // Leaving the scope joined the chain thread: a replay that stopped early dropped the
    // receiver, so its next send failed and it returned.
    if differs {
        return Ok(None);
    }
    match outcome {
        Ok(_) => {}
        Err(Stop::Violation(v)) => return finish(report, Some(v)),
        Err(Stop::Failed(e)) => return Err(e),
        Err(Stop::Differs) => return Ok(None),
    }
    if let Some(first) = erased.first() {
        let v = violation(
            *first,
            ViolationKind::Redaction,
            format!(
                "event {first} is erased but no redaction after it names it: its payload was removed outside Mnemo"
            ),
        );
        return finish(report, Some(v));
    }
    let last = Seq(expected.0 - 1);
    if let Some(v) = label_copy(store, replay.tree(), last)? {
        return finish(report, Some(v));
    }
    report.head_record_missing =
        store.is_read_only_copy() && report.recorded.is_none() && last > Seq(0);
    let head = report.meta_head;
    let rolled_back = match store.rolled_back() {
        Ok(found) => found,
        Err(e) => Some(format!(
            "the store's record of its last commit is unreadable: {e}"
        )),
    };
    let v = if let Some(why) = rolled_back {
        let recorded = store.recorded_head().ok().flatten().map_or(last, |h| h.seq);
        Some(violation(
            Seq(recorded.0.min(last.0 + 1)),
            ViolationKind::Head,
            why,
        ))
    } else if let Some(expect) = options.expect.filter(|e| e.seq > last) {
        Some(violation(
            Seq(last.0 + 1),
            ViolationKind::Checkpoint,
            format!(
                "the checkpoint names seq {} but the log ends at seq {last}: it was truncated or rolled back",
                expect.seq
            ),
        ))
    } else if head.seq > last {
        Some(violation(
            Seq(last.0 + 1),
            ViolationKind::Missing,
            format!(
                "meta.head names seq {} but the log ends at seq {}: events were removed from the tail",
                head.seq, last
            ),
        ))
    } else if report.index_applied > last {
        Some(violation(
            report.index_applied,
            ViolationKind::Index,
            format!(
                "the index claims to have applied seq {} but the log ends at seq {last}",
                report.index_applied
            ),
        ))
    } else {
        None
    };
    if let (None, Some(index)) = (&v, index_out.as_mut()) {
        **index = Some(replay.into_tree().into_inner());
    }
    finish(report, v)
}

/// The copy of a memory store's label beside its log, when it is not the label the chain holds
/// (edited by hand, say, to un-archive the store): a violation at the log's last seq. A copy with
/// no chained label is one an earlier build kept (the server chains it when the API next names
/// the store), and is not checked.
fn label_copy(
    store: &Store,
    tree: &crate::store::projection::Projection<crate::store::kv::MemKv>,
    last: Seq,
) -> Result<Option<Violation>> {
    use crate::model::tool::Tree;
    let Some(chained) = tree.setting(crate::model::policy::LABEL_SETTING)? else {
        return Ok(None);
    };
    let copy = crate::store::disk::read_private(
        store.path(),
        crate::store::disk::LABEL_FILE,
        crate::model::policy::LABEL_MAX_BYTES as u64,
    );
    let why = match copy {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => {
            let same = serde_json::from_slice::<serde_json::Value>(&bytes).ok()
                == serde_json::from_str::<serde_json::Value>(&chained).ok();
            if same {
                return Ok(None);
            }
            "is not the label the chain holds (the last label event): it was changed outside Mnemo"
                .to_string()
        }
        Err(e) => format!("cannot be trusted as the store's own file ({e})"),
    };
    Ok(Some(violation(
        last,
        ViolationKind::Label,
        format!(
            "the copy of the memory store's label beside the log ({}) {why}; the chained label is the store's, and the server writes the copy again the next time the API names the store",
            crate::store::disk::LABEL_FILE
        ),
    )))
}

/// How many records the chain thread hands over at a time, and how many such batches may wait
/// for the replay: enough to keep both threads busy, little enough to bound the memory held.
const PIPELINE_BATCH: usize = 256;
const PIPELINE_DEPTH: usize = 16;

/// A stored record that passed the chain checks, decoded on the chain thread.
struct Checked {
    event: Event,
    hash: EventHash,
    payload_hash: EventHash,
    bytes: u64,
}

impl Step for Checked {
    fn seq(&self) -> Seq {
        self.event.seq
    }

    fn event(&self) -> &Event {
        &self.event
    }

    fn input(&self) -> Option<EventHash> {
        // A salted payload hash is a commitment, not the plain hash retries are matched by.
        self.event.salt.is_none().then_some(self.payload_hash)
    }
}

/// Records handed over at once: checked records, then, when the chain thread stopped after
/// them, why (a violation, or a failure to read).
struct Batch {
    checked: Vec<Checked>,
    end: Option<Stop>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            checked: Vec::with_capacity(PIPELINE_BATCH),
            end: None,
        }
    }
}

/// Why the replay stopped early: a violation to report, a failure to read the store, or an
/// answer the checker thread found different from its record.
enum Stop {
    Violation(Violation),
    Failed(Error),
    Differs,
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Failed(e)
    }
}

impl From<Break> for Violation {
    fn from(b: Break) -> Violation {
        let kind = match b.rule {
            Rule::Dense => ViolationKind::Missing,
            Rule::Decodes => ViolationKind::Undecodable,
            Rule::SeqInside => ViolationKind::SeqMismatch,
            Rule::Link => ViolationKind::BrokenLink,
            Rule::PayloadHash => ViolationKind::PayloadHash,
            Rule::ChainHash => ViolationKind::Hash,
        };
        violation(b.seq, kind, b.detail)
    }
}

/// Walks the stored records (`records`, in seq order) through the chain rules (steps 1-5) and
/// decodes each (the end of step 2), sending them to the replay in batches; stops after the first
/// record that fails, or when the replay hangs up. `marker` is the store's format marker: no
/// record may be of a newer format.
fn read_chain<R: AsRef<[u8]>>(
    records: impl Iterator<Item = Result<(Seq, R)>>,
    marker: u8,
    tx: &crossbeam_channel::Sender<Batch>,
) {
    let mut chain = Chain::new();
    let mut batch = Batch::new();
    for entry in records {
        let checked = match entry {
            Ok((seq, record)) => match chain.check_borrowed(seq, record.as_ref()) {
                // A record that decodes as a format newer than the marker: the marker was
                // lowered (a version byte changed so that the record no longer decodes is
                // named as that).
                Ok(frame) if frame.version > marker => {
                    decode(seq, &frame).and_then(|_| {
                        Err(Stop::Violation(violation(
                            seq,
                            ViolationKind::Format,
                            format!(
                                "event {seq} is of format {} but the store's format marker (meta.format) says the log holds none newer than {marker}: the marker was lowered outside Mnemo, and a build that cannot read format {} would open the store",
                                frame.version, frame.version
                            ),
                        )))
                    })
                }
                Ok(frame) => decode(seq, &frame).map(|event| Checked {
                    event,
                    hash: frame.hash,
                    payload_hash: frame.payload_hash,
                    bytes: record.as_ref().len() as u64,
                }),
                Err(b) => Err(Stop::Violation(b.into())),
            },
            Err(Error::Corrupt { what }) => Err(Stop::Violation(chain.unreadable_key(what).into())),
            // A payload the value file no longer holds as its record names it.
            Err(Error::ChainBroken { seq, what }) => Err(Stop::Violation(
                Break {
                    seq: Seq(seq),
                    rule: Rule::PayloadHash,
                    detail: what,
                }
                .into(),
            )),
            // Damage sled finds in its log is a finding about the log, not a failure to run.
            Err(e) if Report::is_damage(&e) => Err(Stop::Violation(
                chain
                    .unreadable_key(format!(
                        "the log cannot be read from here on: sled found its bytes damaged ({e})"
                    ))
                    .into(),
            )),
            Err(e) => Err(Stop::Failed(e)),
        };
        match checked {
            Ok(checked) => batch.checked.push(checked),
            Err(stop) => {
                batch.end = Some(stop);
                let _ = tx.send(batch);
                return;
            }
        }
        if batch.checked.len() == PIPELINE_BATCH
            && tx
                .send(std::mem::replace(&mut batch, Batch::new()))
                .is_err()
        {
            return;
        }
    }
    if !batch.checked.is_empty() {
        let _ = tx.send(batch);
    }
}

/// Decodes a checked record's header and payload (the end of step 2).
fn decode(seq: Seq, frame: &FrameRef<'_>) -> std::result::Result<Event, Stop> {
    match frame.erased_from {
        Some(from) => crate::model::event::kept_of(frame.version, frame.payload).and_then(|kept| {
            Event::erased_from_parts(
                from,
                seq,
                frame.prev_hash,
                frame.header,
                frame.payload_hash,
                kept,
            )
        }),
        None => Event::from_parts(
            frame.version,
            seq,
            frame.prev_hash,
            frame.header,
            frame.salt,
            frame.payload,
        ),
    }
    .map_err(|e| Stop::Violation(violation(seq, ViolationKind::Undecodable, e.to_string())))
}

/// The replay's source: the chain thread's records, batch by batch.
struct Handed {
    rx: crossbeam_channel::IntoIter<Batch>,
    checked: std::vec::IntoIter<Checked>,
    end: Option<Stop>,
}

impl Handed {
    fn new(rx: crossbeam_channel::Receiver<Batch>) -> Handed {
        Handed {
            rx: rx.into_iter(),
            checked: Vec::new().into_iter(),
            end: None,
        }
    }
}

impl Iterator for Handed {
    type Item = std::result::Result<Checked, Stop>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(checked) = self.checked.next() {
                return Some(Ok(checked));
            }
            if let Some(stop) = self.end.take() {
                return Some(Err(stop));
            }
            let batch = self.rx.next()?;
            self.checked = batch.checked.into_iter();
            self.end = batch.end;
        }
    }
}

/// Compares the answer the replay gave `event` with the outcome the log recorded (step 6): the
/// outcome check, and for a retry the duplicate-call check.
fn check_outcome(event: &Event, traced: Result<Traced>) -> std::result::Result<(), Stop> {
    let seq = event.seq;
    let traced = traced.map_err(|e| {
        Stop::Violation(violation(
            seq,
            ViolationKind::Outcome,
            format!("replaying the command failed: {e}"),
        ))
    })?;
    let answer = traced.answer;
    let outcome = event.outcome_of(answer.is_error, &answer.text);
    if outcome == event.header.outcome {
        return Ok(());
    }
    let found = format!(
        "is_error={} text hash {} but the log recorded is_error={} text hash {}",
        outcome.is_error,
        outcome.result_hash,
        event.header.outcome.is_error,
        event.header.outcome.result_hash
    );
    Err(Stop::Violation(match traced.retry {
        Some(retry) => violation(
            seq,
            ViolationKind::DuplicateCall,
            format!(
                "agent {:?} retried call {:?} of seq {}; the retry rule gives {found}",
                event.header.agent,
                event.header.tool_use_id.as_deref().unwrap_or_default(),
                retry.of
            ),
        ),
        None => violation(
            seq,
            ViolationKind::Outcome,
            format!("re-answering gives {found}"),
        ),
    }))
}

/// Compares the replayed index with the stored one (step 7), through the projection, which names
/// the first entry that differs.
fn compare_index(
    replay: &Projection<MemKv>,
    stored: &Projection<IndexTrees>,
    seq: Seq,
    journal_checked: u64,
) -> Result<Option<Violation>> {
    let found = replay.differs_from(stored, journal_checked)?;
    Ok(found.map(|detail| violation(seq, ViolationKind::Index, detail)))
}
