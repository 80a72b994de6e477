//! The read-only objects the client returns: files, events, grants, receipts and verify reports.
//! Each is a frozen copy of the Rust value, made without the GIL and handed to Python whole.

use mnemo::protocol::LoggedEvent;
use mnemo::{Grant, Head, MemoryRecord, Receipt, Report, Violation};
use pyo3::prelude::*;

/// A memory file: its canonical path, content, tags, and the seqs that created and last changed it.
#[pyclass(name = "MemoryRecord", module = "mnemo", frozen, get_all, eq)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyMemoryRecord {
    /// Canonical path, such as `/memories/notes.md`.
    pub path: String,
    /// The file's content.
    pub content: String,
    /// `memorytool` and `path:{path}`.
    pub tags: Vec<String>,
    /// Seq of the event that created the file.
    pub created: u64,
    /// Seq of the event that last changed its content.
    pub updated: u64,
}

impl From<MemoryRecord> for PyMemoryRecord {
    fn from(r: MemoryRecord) -> Self {
        PyMemoryRecord {
            path: r.path,
            content: r.content,
            tags: r.tags,
            created: r.created.0,
            updated: r.updated.0,
        }
    }
}

#[pymethods]
impl PyMemoryRecord {
    fn __repr__(&self) -> String {
        format!(
            "MemoryRecord(path={:?}, bytes={}, created={}, updated={})",
            self.path,
            self.content.len(),
            self.created,
            self.updated
        )
    }
}

/// One logged event, as `mnemo log --json` shows it, plus its chain hashes.
#[pyclass(name = "Event", module = "mnemo", frozen, get_all)]
#[derive(Clone, Debug)]
pub struct PyEvent {
    /// Position in the log, from 1.
    pub seq: u64,
    /// When it was logged, `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
    pub time: String,
    /// When it was logged, Unix milliseconds.
    pub time_ms: u64,
    /// The agent that made the call.
    pub agent: String,
    /// The `tool_use` id the call came with, if any.
    pub tool_use_id: Option<String>,
    /// `view`, `create`, ..., `rejected` (input that did not parse), `acl-grant`, `acl-revoke`.
    pub command: String,
    /// The canonical paths the call named (for an admin event: the prefix and `agent {id}`).
    pub paths: Vec<String>,
    /// Whether the model was given an error result.
    pub is_error: bool,
    /// blake3 of the exact result text the model was given, hex.
    pub result_hash: String,
    /// The event's chain hash, hex.
    pub hash: String,
    /// The previous event's chain hash, hex (zeros for event 1).
    pub prev_hash: String,
    /// The version of the semantics that answered the call (and that `verify` re-answers it
    /// under): 1 to 5.
    pub semantics: u32,
}

impl From<&LoggedEvent> for PyEvent {
    fn from(event: &LoggedEvent) -> Self {
        PyEvent {
            seq: event.seq,
            time: event.time.clone(),
            time_ms: event.time_ms,
            agent: event.agent.clone(),
            tool_use_id: event.tool_use_id.clone(),
            command: event.command.clone(),
            paths: event.paths.clone(),
            is_error: event.is_error,
            result_hash: event.result_hash.clone(),
            hash: event.hash.clone(),
            prev_hash: event.prev_hash.clone(),
            semantics: event.semantics,
        }
    }
}

#[pymethods]
impl PyEvent {
    fn __repr__(&self) -> String {
        format!(
            "Event(seq={}, agent={:?}, command={:?}, paths={:?}, is_error={})",
            self.seq,
            self.agent,
            self.command,
            self.paths,
            if self.is_error { "True" } else { "False" }
        )
    }
}

/// One access grant: an agent (or `*`), a path prefix, and `read` or `read-write`.
#[pyclass(name = "Grant", module = "mnemo", frozen, get_all, eq)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyGrant {
    /// An agent id, or `*` for every agent.
    pub agent: String,
    /// The path the grant covers, with everything under it.
    pub prefix: String,
    /// `read` or `read-write`.
    pub access: String,
}

impl From<&Grant> for PyGrant {
    fn from(g: &Grant) -> Self {
        PyGrant {
            agent: g.agent.clone(),
            prefix: g.prefix.to_string(),
            access: g.access.name().to_string(),
        }
    }
}

#[pymethods]
impl PyGrant {
    fn __repr__(&self) -> String {
        format!(
            "Grant(agent={:?}, prefix={:?}, access={:?})",
            self.agent, self.prefix, self.access
        )
    }
}

/// What the store answered to a recorded call: its event's seq and the result text.
#[pyclass(name = "Receipt", module = "mnemo", frozen, get_all)]
#[derive(Clone, Debug)]
pub struct PyReceipt {
    /// The seq of the call's event.
    pub seq: u64,
    /// The result text.
    pub text: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Whether this is the recorded answer to an earlier call with the same id.
    pub retried: bool,
}

impl From<Receipt> for PyReceipt {
    fn from(r: Receipt) -> Self {
        PyReceipt {
            seq: r.seq.0,
            text: r.text,
            is_error: r.is_error,
            retried: r.retried,
        }
    }
}

#[pymethods]
impl PyReceipt {
    fn __repr__(&self) -> String {
        format!("Receipt(seq={}, text={:?})", self.seq, self.text)
    }
}

/// The last event of the log: its seq and hash. `str(head)` is the checkpoint form `SEQ:HASH`.
#[pyclass(name = "Head", module = "mnemo", frozen, get_all, eq)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyHead {
    /// The last seq (0 for an empty log).
    pub seq: u64,
    /// Its hash, hex (zeros for an empty log).
    pub hash: String,
}

impl From<Head> for PyHead {
    fn from(h: Head) -> Self {
        PyHead {
            seq: h.seq.0,
            hash: h.hash.to_hex(),
        }
    }
}

#[pymethods]
impl PyHead {
    fn __str__(&self) -> String {
        format!("{}:{}", self.seq, self.hash)
    }

    fn __repr__(&self) -> String {
        format!("Head(seq={}, hash={:?})", self.seq, self.hash)
    }
}

/// One broken invariant found by `verify`.
#[pyclass(name = "Violation", module = "mnemo", frozen, get_all)]
#[derive(Clone, Debug)]
pub struct PyViolation {
    /// The first seq at which it shows.
    pub seq: u64,
    /// What broke: `missing`, `hash`, `broken-link`, `outcome`, `index`, `head`, ...
    pub kind: String,
    /// Expected and found values, in words.
    pub detail: String,
}

impl From<&Violation> for PyViolation {
    fn from(v: &Violation) -> Self {
        PyViolation {
            seq: v.seq.0,
            kind: v.kind.name().to_string(),
            detail: v.detail.clone(),
        }
    }
}

#[pymethods]
impl PyViolation {
    fn __repr__(&self) -> String {
        format!(
            "Violation(seq={}, kind={:?}, detail={:?})",
            self.seq, self.kind, self.detail
        )
    }
}

/// What `verify()` found: the whole log replayed from event 1.
#[pyclass(name = "VerifyReport", module = "mnemo", frozen, get_all)]
#[derive(Clone, Debug)]
pub struct PyVerifyReport {
    /// `intact`, `empty` (no events, nothing claims otherwise) or `violation`.
    pub status: String,
    /// Events checked.
    pub events: u64,
    /// Bytes of stored records checked.
    pub bytes: u64,
    /// The log's last event (what the checkpoint names).
    pub head: PyHead,
    /// The checkpoint `SEQ:HASH` to keep outside the store (`mnemo verify --expect`); `None`
    /// unless the log is intact and not empty.
    pub checkpoint: Option<String>,
    /// The seq the path index has applied.
    pub index_applied: u64,
    /// Broken invariants; empty means intact (verification stops at the first).
    pub violations: Vec<PyViolation>,
    /// The events a redaction erased, as `(seq, redaction's seq)`: their chain hashes verify,
    /// their answers cannot be re-derived.
    pub redacted: Vec<(u64, u64)>,
    /// Wall time spent, in milliseconds.
    pub elapsed_ms: f64,
}

impl From<Report> for PyVerifyReport {
    fn from(r: Report) -> Self {
        PyVerifyReport {
            status: r.status().to_string(),
            events: r.events,
            bytes: r.bytes,
            checkpoint: r.checkpoint(),
            head: r.head.into(),
            index_applied: r.index_applied.0,
            violations: r.violations.iter().map(PyViolation::from).collect(),
            redacted: r.redacted.iter().map(|(seq, by)| (seq.0, by.0)).collect(),
            elapsed_ms: r.elapsed.as_secs_f64() * 1e3,
        }
    }
}

#[pymethods]
impl PyVerifyReport {
    /// True when no invariant is broken.
    fn is_intact(&self) -> bool {
        self.violations.is_empty()
    }

    /// `bool(report)` is `report.is_intact()`, so `if client.verify():` reads as it should.
    fn __bool__(&self) -> bool {
        self.is_intact()
    }

    fn __repr__(&self) -> String {
        let violations: Vec<String> = self.violations.iter().map(PyViolation::__repr__).collect();
        format!(
            "VerifyReport(status={:?}, events={}, checkpoint={}, violations=[{}])",
            self.status,
            self.events,
            self.checkpoint
                .as_ref()
                .map_or_else(|| "None".to_string(), |c| format!("{c:?}")),
            violations.join(", ")
        )
    }
}
