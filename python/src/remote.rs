//! `RemoteClient`: a store that a `mnemo serve` holds, reached over HTTP
//! (`MnemoClient.connect(url, token)`), with the calls of an opened store that a server answers:
//! the memory tool, the agent's files, the head and verify.

use mnemo::tool::BoundedText;
use mnemo::tool::Limits;
use mnemo::{RemoteClient, RemoteError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::convert::{to_json_text, to_py};
use crate::errors::ServerError;
use crate::records::{PyHead, PyMemoryRecord};

/// A client of a `mnemo serve`: every call is an HTTP request to it.
#[pyclass(name = "RemoteClient", module = "mnemo", frozen)]
pub struct PyRemote {
    client: RemoteClient,
}

impl PyRemote {
    /// A client of the server at `url` presenting `token`, acting as `agent_id` when given, in
    /// the store `store` of a `mnemo serve --data` server when given.
    pub fn new(
        url: &str,
        token: &str,
        agent_id: Option<&str>,
        store: Option<&str>,
    ) -> PyResult<PyRemote> {
        let mut client = RemoteClient::new(url, token);
        if let Some(agent) = agent_id {
            client = client.with_agent(agent);
        }
        if let Some(store) = store {
            client = client
                .in_store(store)
                .map_err(pyo3::exceptions::PyValueError::new_err)?;
        }
        Ok(PyRemote { client })
    }
}

fn to_err(e: RemoteError) -> PyErr {
    ServerError::new_err(e.to_string())
}

fn parse(bytes: &[u8]) -> PyResult<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| ServerError::new_err(format!("the server's answer is not JSON: {e}")))
}

#[pymethods]
impl PyRemote {
    /// The server's URL.
    #[getter]
    fn url(&self) -> &str {
        self.client.url()
    }

    /// The agent named in every request (`None`: the token's own, or the server's default).
    #[getter]
    fn agent_id(&self) -> Option<&str> {
        self.client.agent_id()
    }

    /// The same server, acting as another agent (the operator token may name any; an agent
    /// token only its own).
    fn with_agent(&self, agent_id: &str) -> PyRemote {
        PyRemote {
            client: self.client.with_agent(agent_id),
        }
    }

    /// Answers a `tool_use` block (or a bare input) with a `tool_result` dict, as
    /// `MnemoMemoryToolServer.handle` does in-process: the server records and answers it. A
    /// block over the request limit (64 MiB of JSON) is never sent whole: its digest is, and the
    /// server logs its refusal.
    fn handle<'py>(
        &self,
        py: Python<'py>,
        block: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut text = BoundedText::new(Limits::default().max_request_bytes);
        to_json_text(block, &mut text);
        let client = self.client.clone();
        let answer = py
            .detach(move || match text.finish() {
                Ok(bytes) => client.memory_bytes(&bytes),
                Err(digest) => client.oversized(&digest),
            })
            .map_err(to_err)?;
        Ok(to_py(py, &parse(&answer)?)?.cast_into::<PyDict>()?)
    }

    /// The files carrying `tag` that this agent may read.
    fn records_by_tag(&self, py: Python<'_>, tag: &str) -> PyResult<Vec<PyMemoryRecord>> {
        let client = self.client.clone();
        let tag = tag.to_string();
        let records = py
            .detach(move || client.records_by_tag(&tag))
            .map_err(to_err)?;
        Ok(records.into_iter().map(PyMemoryRecord::from).collect())
    }

    /// The file at `path`, if there is one this agent may read.
    fn record(&self, py: Python<'_>, path: &str) -> PyResult<Option<PyMemoryRecord>> {
        let client = self.client.clone();
        let path = path.to_string();
        let record = py.detach(move || client.record(&path)).map_err(to_err)?;
        Ok(record.map(PyMemoryRecord::from))
    }

    /// The log's last event.
    fn head(&self, py: Python<'_>) -> PyResult<PyHead> {
        let client = self.client.clone();
        Ok(py.detach(move || client.head()).map_err(to_err)?.into())
    }

    /// The server's verify of the store, as `mnemo verify --json` prints it (a dict).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        let report = py.detach(move || client.verify(None)).map_err(to_err)?;
        let report = serde_json::to_value(&report)
            .map_err(|e| ServerError::new_err(format!("the verify report is not JSON: {e}")))?;
        to_py(py, &report)
    }

    fn __repr__(&self) -> String {
        format!(
            "RemoteClient(url={:?}, agent_id={:?})",
            self.client.url(),
            self.client.agent_id()
        )
    }
}
