//! `MnemoClient` for Python: an open store acting as one agent.
//!
//! Every client and server made from one opened store share a [`Shared`] handle; `close()` on any
//! of them closes the store for all (so a `with` block really releases it). Each call clones the
//! Rust client out of the handle and runs with the GIL released, so Python threads can share one
//! client and the store's writer batches their writes together.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use mnemo::LogQuery;
use mnemo::{Access, Durability, MnemoClient, Seq};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::convert::to_py;
use crate::errors::{
    ClosedError, InvalidArgumentError, ServerError, optional_whole_number, to_py_err, whole_number,
};
use crate::records::{PyEvent, PyGrant, PyHead, PyMemoryRecord, PyReceipt, PyVerifyReport};
use crate::remote::PyRemote;

/// The opened store, shared by every client and server made from it.
pub struct Shared {
    client: RwLock<Option<MnemoClient>>,
    path: PathBuf,
}

impl Shared {
    /// A Rust client acting as `agent`, or `ClosedError`.
    pub fn client(&self, agent: &str) -> PyResult<MnemoClient> {
        let guard = self.client.read().unwrap_or_else(PoisonError::into_inner);
        let base = guard.as_ref().ok_or_else(|| {
            ClosedError::new_err(format!(
                "the store at {} was closed; open a new MnemoClient to use it again",
                self.path.display()
            ))
        })?;
        if base.agent_id() == agent {
            Ok(base.clone())
        } else {
            base.with_agent(agent).map_err(to_py_err)
        }
    }

    /// Closes the store: drops the handle's client without the GIL, since the last drop writes the
    /// queued read events and closes sled. Calls in flight finish first; later ones get
    /// `ClosedError`.
    pub fn close(&self, py: Python<'_>) {
        let taken = self
            .client
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        py.detach(move || drop(taken));
    }

    fn is_closed(&self) -> bool {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }
}

/// Parses an access name (`read`, `read-write`).
fn parse_access(name: &str) -> PyResult<Access> {
    Access::from_name(name).ok_or_else(|| {
        InvalidArgumentError::new_err(format!(
            "invalid argument: access must be \"read\" or \"read-write\", got {name:?}"
        ))
    })
}

/// An open Mnemo store acting as one agent.
///
/// `MnemoClient(db_path, agent_id="agent", durability="fsync")` opens the store directory, creating
/// it if it does not exist. A store a live `mnemo serve` holds (one that `mnemo mcp` or `mnemo
/// tool` started, too) is connected to instead, through its server file, with the same calls:
/// the server answers them (`server_url` names it; a server that goes away raises
/// `ServerError`). Any other process holding the store raises `StoreLockedError`; opening it
/// again in the same process shares the store already open. Every call releases the GIL, so
/// Python threads may share one client. `close()`, or
/// leaving a `with` block, closes the store for this client and every client and server opened
/// with it; the store also closes when the last of them is garbage-collected.
#[pyclass(name = "MnemoClient", module = "mnemo", frozen)]
pub struct PyClient {
    pub(crate) shared: Arc<Shared>,
    pub(crate) agent: String,
    durability: Durability,
}

impl PyClient {
    /// Runs `f` on a Rust client for this agent with the GIL released.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(MnemoClient) -> mnemo::Result<T> + Send,
    ) -> PyResult<T> {
        let client = self.shared.client(&self.agent)?;
        py.detach(move || f(client)).map_err(to_py_err)
    }

    /// Records an admin call; a refused change (still logged) raises `InvalidArgumentError`.
    fn admin(
        &self,
        py: Python<'_>,
        f: impl FnOnce(MnemoClient) -> mnemo::Result<mnemo::Receipt> + Send,
    ) -> PyResult<PyReceipt> {
        let receipt = self.run(py, f)?;
        if receipt.is_error {
            return Err(InvalidArgumentError::new_err(format!(
                "{} (refused; logged as seq {})",
                receipt.text, receipt.seq
            )));
        }
        Ok(receipt.into())
    }
}

#[pymethods]
impl PyClient {
    /// Opens or creates the store at `db_path`, acting as `agent_id`.
    #[new]
    #[pyo3(signature = (db_path, agent_id = "agent", durability = "fsync"))]
    fn new(py: Python<'_>, db_path: PathBuf, agent_id: &str, durability: &str) -> PyResult<Self> {
        let mode = Durability::from_name(durability).ok_or_else(|| {
            InvalidArgumentError::new_err(format!(
                "invalid argument: durability must be \"fsync\", \"flush\" or \"buffered\", got {durability:?}"
            ))
        })?;
        let agent = agent_id.to_string();
        let path = db_path.clone();
        let client = py
            .detach(move || {
                MnemoClient::builder(&path)
                    .agent_id(agent)
                    .durability(mode)
                    .open()
            })
            .map_err(to_py_err)?;
        Ok(PyClient {
            shared: Arc::new(Shared {
                client: RwLock::new(Some(client)),
                path: db_path,
            }),
            agent: agent_id.to_string(),
            durability: mode,
        })
    }

    /// The agent id this client acts as.
    #[getter]
    fn agent_id(&self) -> &str {
        &self.agent
    }

    /// The store directory.
    #[getter]
    fn db_path(&self) -> PathBuf {
        self.shared.path.clone()
    }

    /// `fsync`, `flush` or `buffered`.
    #[getter]
    fn durability(&self) -> &'static str {
        self.durability.name()
    }

    /// Whether the store was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// A client for another agent over the same store and writer.
    fn with_agent(&self, agent_id: &str) -> PyResult<PyClient> {
        self.shared.client(agent_id)?;
        Ok(PyClient {
            shared: Arc::clone(&self.shared),
            agent: agent_id.to_string(),
            durability: self.durability,
        })
    }

    /// Replays the whole log and checks every invariant; writes pause while it runs.
    fn verify(&self, py: Python<'_>) -> PyResult<PyVerifyReport> {
        self.run(py, |c| c.verify()).map(PyVerifyReport::from)
    }

    /// The last event's seq and hash.
    fn head(&self, py: Python<'_>) -> PyResult<PyHead> {
        self.run(py, |c| c.head()).map(PyHead::from)
    }

    /// Memory files carrying `tag` that this agent may read (`memorytool`: every file;
    /// `path:/memories/x`: that one).
    fn records_by_tag(&self, py: Python<'_>, tag: &str) -> PyResult<Vec<PyMemoryRecord>> {
        let tag = tag.to_string();
        let records = self.run(py, move |c| c.records_by_tag(&tag))?;
        Ok(records.into_iter().map(PyMemoryRecord::from).collect())
    }

    /// The file at `path` (normalised as the CLI does: `//memories/./x` is `/memories/x`), if it
    /// exists and this agent may read it.
    fn record(&self, py: Python<'_>, path: &str) -> PyResult<Option<PyMemoryRecord>> {
        // A path no file can have (relative, a traversal) names none.
        let Ok(path) = absolute_path(path).map(|p| p.to_string()) else {
            return Ok(None);
        };
        Ok(self
            .run(py, move |c| c.record(&path))?
            .map(PyMemoryRecord::from))
    }

    /// The files as they were right after event `seq`, replayed from the log (those this agent
    /// may read under the current policy).
    fn records_at(&self, py: Python<'_>, seq: &Bound<'_, PyAny>) -> PyResult<Vec<PyMemoryRecord>> {
        let seq = whole_number(
            seq,
            "seq",
            "the event after which to show the files (0: before the first)",
        )?;
        let records = self.run(py, move |c| c.records_at(Seq(seq)))?;
        Ok(records.into_iter().map(PyMemoryRecord::from).collect())
    }

    /// Logged events in order, like `mnemo log`: from seq `from_seq`, only those of `agent` and
    /// those naming a path under `path` when given, at most `limit`.
    #[pyo3(signature = (agent = None, path = None, from_seq = None, limit = None))]
    fn log(
        &self,
        py: Python<'_>,
        agent: Option<String>,
        path: Option<&str>,
        from_seq: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyEvent>> {
        let from =
            optional_whole_number(from_seq, "from_seq", "the first seq to list (default 1)")?;
        let limit = optional_whole_number(limit, "limit", "the most events to list")?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let query = LogQuery {
            agent,
            path: path.map(absolute_path).transpose().map_err(to_py_err)?,
            from: from.unwrap_or(1).max(1),
            limit,
            ..LogQuery::default()
        };
        let events = self.run(py, move |c| c.log(&query))?;
        Ok(events.iter().map(PyEvent::from).collect())
    }

    /// Every event of every file that lived at `path`, file by file, each followed by identity
    /// through renames (then the events that named `path` while no file was there), like
    /// `mnemo history`.
    fn history(&self, py: Python<'_>, path: &str) -> PyResult<Vec<PyEvent>> {
        let file = absolute_path(path).map_err(to_py_err)?;
        let events = self.run(py, move |c| c.history(&file))?;
        Ok(events.iter().map(|e| PyEvent::from(&e.event)).collect())
    }

    /// The URL of the `mnemo serve` this client reaches its store through, or `None` for a store
    /// open in this process.
    #[getter]
    fn server_url(&self) -> PyResult<Option<String>> {
        Ok(self
            .shared
            .client(&self.agent)?
            .server_url()
            .map(str::to_string))
    }

    /// A client of the `mnemo serve` at `url`, presenting the bearer `token` (the operator's, from
    /// the store's `mnemo-server.json`, or an agent's): the memory tool, the agent's files, the
    /// head and verify, answered by the server.
    #[staticmethod]
    #[pyo3(signature = (url, token, agent_id = None, store = None))]
    fn connect(
        url: &str,
        token: &str,
        agent_id: Option<&str>,
        store: Option<&str>,
    ) -> PyResult<PyRemote> {
        PyRemote::new(url, token, agent_id, store)
    }

    /// Erases the content of the chosen events (as `mnemo.redact`), recorded as a redaction by
    /// this client's agent for `reason`; the store stays open, its calls waiting meanwhile.
    /// Returns `{"seqs": [...], "paths": [...], "seq": N}` (`None` with `dry_run=True`).
    #[pyo3(signature = (reason, *, seqs = Vec::new(), paths = Vec::new(), texts = Vec::new(), dry_run = false))]
    fn redact<'py>(
        &self,
        py: Python<'py>,
        reason: String,
        seqs: Vec<i128>,
        paths: Vec<String>,
        texts: Vec<String>,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let selection = crate::redact::selection(seqs, paths, texts)?;
        let (plan, seq) = self.run(py, move |c| {
            crate::redact::run(&c, &reason, &selection, dry_run)
        })?;
        crate::redact::answer(py, &plan, seq)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it: a dict with `seq`, `agent`,
    /// `tool_use_id`, `input`, `answer` (re-derived by replay), `is_error`, `verified` (whether
    /// that answer hashes to the recorded outcome), `chained_through` (the seq through which the
    /// chain was checked before anything was shown) and `change` (`None`, or a dict with `kind`
    /// and a unified `diff` or the files moved or removed). A record that breaks the chain
    /// raises instead, naming its seq.
    fn show<'py>(&self, py: Python<'py>, seq: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let seq = whole_number(seq, "seq", "the event to show (1 to the last seq)")?;
        let shown = self.run(py, move |c| c.show(Seq(seq)))?;
        to_py(py, &serde_json::to_value(&shown).map_err(unwritable)?)
    }

    /// Where the content event `seq` wrote went (or, with `path`, all the file at `path` held
    /// right after it), as `mnemo trace --json`: a dict with `events` (each later event shown
    /// it, or that carried it on or took it out, with `shown`, `carried`, `removed`), `live`
    /// (where the bytes are now), `erased`, `exact` and `notes`. Re-derived by replaying the log.
    #[pyo3(signature = (seq, path = None))]
    fn trace<'py>(
        &self,
        py: Python<'py>,
        seq: &Bound<'_, PyAny>,
        path: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let seq = whole_number(
            seq,
            "seq",
            "the event whose content to trace (1 to the last seq)",
        )?;
        let file = path.map(absolute_path).transpose().map_err(to_py_err)?;
        let report = self.run(py, move |c| c.trace(Seq(seq), file.as_ref()))?;
        to_py(py, &serde_json::to_value(&report).map_err(unwritable)?)
    }

    /// Puts files back by appending ordinary calls (as `mnemo revert`), recorded as a revert by
    /// this client's agent: with `to`, the files under `path` (every file without it) as they
    /// were after event `to`; with `agent` and `since`, the files that agent changed after
    /// `since`, each as it was then. With `dry_run=True` (the default) nothing is written and the
    /// plan is returned: a dict with `calls`, `undone` and `conflicts`; otherwise the revert is
    /// made (refused, writing nothing, when it has conflicts and `force` is not set) and the dict
    /// also has `record` and `last`, the seqs of its record and last call.
    #[pyo3(signature = (*, to = None, path = None, agent = None, since = None, dry_run = true, force = false))]
    #[allow(clippy::too_many_arguments)]
    fn revert<'py>(
        &self,
        py: Python<'py>,
        to: Option<&Bound<'_, PyAny>>,
        path: Option<String>,
        agent: Option<String>,
        since: Option<&Bound<'_, PyAny>>,
        dry_run: bool,
        force: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let to = to
            .map(|to| whole_number(to, "to", "the event whose files to put back"))
            .transpose()?;
        let since = since
            .map(|since| {
                whole_number(
                    since,
                    "since",
                    "the event after which the agent's writes are undone",
                )
            })
            .transpose()?;
        let scope =
            mnemo::RevertScope::of(to.map(Seq), path, agent, since.map(Seq)).ok_or_else(|| {
                to_py_err(mnemo::Error::InvalidArgument(
                    "give to=SEQ (and path=P, optional), or agent=A with since=SEQ".into(),
                ))
            })?;
        let answer = match dry_run {
            true => self.run(py, move |c| c.revert_plan(&scope))?.to_json(),
            false => self.run(py, move |c| c.revert(&scope, force))?.to_json(),
        };
        to_py(py, &answer)
    }

    /// What changed in the files under `path` from after event `start` to after event `end`
    /// (0: the empty tree), as `mnemo diff --json`: a list of dicts with `path`, `kind`
    /// (`added`, `removed` or `changed`) and a unified `diff`.
    #[pyo3(signature = (start, end, path = "/memories"))]
    fn diff<'py>(
        &self,
        py: Python<'py>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        path: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let start = whole_number(
            start,
            "start",
            "the event after which the diff starts (0: the empty tree)",
        )?;
        let end = whole_number(end, "end", "the event after which the diff ends")?;
        let dir = absolute_path(path).map_err(to_py_err)?;
        let files = self.run(py, move |c| c.diff(Seq(start), Seq(end), &dir))?;
        to_py(py, &serde_json::to_value(&files).map_err(unwritable)?)
    }

    /// Sets a store setting, a logged admin event attributed to this client's agent: `delete` to
    /// `erase` makes the memory tool's delete erase the files it deletes, with their whole
    /// history; `keep` (the default) keeps it. A setting or value that is not one raises
    /// `InvalidArgumentError` (and is logged).
    fn configure(&self, py: Python<'_>, name: &str, value: &str) -> PyResult<PyReceipt> {
        let (name, value) = (name.to_string(), value.to_string());
        self.admin(py, move |c| c.configure(&name, &value))
    }

    /// Every store setting with the value in force, as a dict (`{"delete": "keep"}`).
    fn settings(&self, py: Python<'_>) -> PyResult<std::collections::BTreeMap<String, String>> {
        Ok(self.run(py, |c| c.settings())?.into_iter().collect())
    }

    /// Gives `agent` (or `*`) `access` (`read` or `read-write`) on `prefix` and everything under
    /// it. The change is a logged admin event attributed to this client's agent.
    #[pyo3(signature = (agent, prefix, access = "read-write"))]
    fn grant(
        &self,
        py: Python<'_>,
        agent: &str,
        prefix: &str,
        access: &str,
    ) -> PyResult<PyReceipt> {
        let access = parse_access(access)?;
        let (agent, prefix) = (agent.to_string(), prefix.to_string());
        self.admin(py, move |c| c.grant(&agent, &prefix, access))
    }

    /// Removes `agent`'s grant on exactly `prefix` (a logged admin event).
    fn revoke(&self, py: Python<'_>, agent: &str, prefix: &str) -> PyResult<PyReceipt> {
        let (agent, prefix) = (agent.to_string(), prefix.to_string());
        self.admin(py, move |c| c.revoke(&agent, &prefix))
    }

    /// The grants in force.
    fn policy(&self, py: Python<'_>) -> PyResult<Vec<PyGrant>> {
        let policy = self.run(py, |c| c.policy())?;
        Ok(policy.grants().iter().map(PyGrant::from).collect())
    }

    /// Closes the store for this client and every client and server opened with it.
    fn close(&self, py: Python<'_>) {
        self.shared.close(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "MnemoClient(db_path={:?}, agent_id={:?}, durability={:?}{})",
            self.shared.path.display().to_string(),
            self.agent,
            self.durability.name(),
            if self.shared.is_closed() {
                ", closed"
            } else {
                ""
            }
        )
    }
}

/// An answer of the read protocol that could not be converted to JSON.
fn unwritable(e: serde_json::Error) -> PyErr {
    ServerError::new_err(e.to_string())
}

/// A path given to a call (`/memories/notes.txt`), canonical.
fn absolute_path(raw: &str) -> mnemo::Result<mnemo::MemPath> {
    mnemo::MemPath::root(raw).map_err(mnemo::Error::InvalidArgument)
}
