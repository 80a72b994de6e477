//! `MnemoMemoryToolServer` for Python: a `tool_use` dict in, a `tool_result` dict out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mnemo::tool::Limits;
use mnemo::{MnemoMemoryToolServer, Profile};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::{PyClient, Shared};
use mnemo::tool::{BoundedText, Request};

use crate::convert::{block_id, to_json_text, to_py};
use crate::errors::{InvalidArgumentError, optional_whole_number, to_py_err};

/// Answers memory-tool calls from a Mnemo store; every call, valid or not, is one logged event.
///
/// `MnemoMemoryToolServer(client, root="/memories", profile="spec", managed_agents_beta=False,
/// max_file_bytes=None, view_max_chars=None, max_request_bytes=None)`: `profile` picks the result
/// strings (`spec`, the documented ones, or `python-sdk`, those of the SDK's filesystem tool); the
/// limits default to a 16 MiB file, no view limit and a 64 MiB request (the call's JSON text).
/// Calls are made as the client's agent.
#[pyclass(name = "MnemoMemoryToolServer", module = "mnemo", frozen)]
pub struct PyServer {
    client: Py<PyClient>,
    shared: Arc<Shared>,
    agent: String,
    root: String,
    profile: Profile,
    limits: Limits,
    managed_agents_beta: bool,
    failures: AtomicU64,
}

impl PyServer {
    /// The Rust server for one call. Building it is a few string copies; holding one per call
    /// (instead of one for the server's life) is what lets `close()` release the store.
    fn server(&self) -> PyResult<MnemoMemoryToolServer> {
        let client = self.shared.client(&self.agent)?;
        MnemoMemoryToolServer::builder(client)
            .root(self.root.clone())
            .profile(self.profile)
            .limits(self.limits)
            .managed_agents_beta(self.managed_agents_beta)
            .build()
            .map_err(to_py_err)
    }
}

#[pymethods]
impl PyServer {
    /// A server over `client`'s store, answering as `client`'s agent.
    #[new]
    #[pyo3(signature = (
        client,
        root = "/memories",
        profile = "spec",
        managed_agents_beta = false,
        max_file_bytes = None,
        view_max_chars = None,
        max_request_bytes = None,
    ))]
    fn new(
        client: Bound<'_, PyClient>,
        root: &str,
        profile: &str,
        managed_agents_beta: bool,
        max_file_bytes: Option<Bound<'_, PyAny>>,
        view_max_chars: Option<Bound<'_, PyAny>>,
        max_request_bytes: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let max_file_bytes = optional_whole_number(
            max_file_bytes.as_ref(),
            "max_file_bytes",
            "the largest memory file, in bytes (None for 16 MiB)",
        )?;
        let view_max_chars = optional_whole_number(
            view_max_chars.as_ref(),
            "view_max_chars",
            "the most characters a view shows (None for no limit)",
        )?;
        let max_request_bytes = optional_whole_number(
            max_request_bytes.as_ref(),
            "max_request_bytes",
            "the largest call, in bytes of JSON (None for 64 MiB)",
        )?;
        let profile = Profile::from_name(profile).ok_or_else(|| {
            InvalidArgumentError::new_err(format!(
                "invalid argument: profile must be \"spec\", \"python-sdk\" or \"typescript-sdk\", got {profile:?}"
            ))
        })?;
        let defaults = Limits::default();
        let limits = Limits {
            max_file_bytes: max_file_bytes.unwrap_or(defaults.max_file_bytes),
            view_max_chars,
            max_request_bytes: max_request_bytes.unwrap_or(defaults.max_request_bytes),
        };
        let inner = client.get();
        let (shared, agent) = (Arc::clone(&inner.shared), inner.agent.clone());
        // Checks the root once and keeps its canonical spelling.
        let checked = MnemoMemoryToolServer::builder(shared.client(&agent)?)
            .root(root)
            .build()
            .map_err(to_py_err)?;
        Ok(PyServer {
            root: checked.root().to_string(),
            client: client.unbind(),
            shared,
            agent,
            profile,
            limits,
            managed_agents_beta,
            failures: AtomicU64::new(0),
        })
    }

    /// The client calls are recorded through.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }

    /// The memory root, such as `/memories`.
    #[getter]
    fn root(&self) -> &str {
        &self.root
    }

    /// `spec` or `python-sdk`.
    #[getter]
    fn profile(&self) -> &'static str {
        self.profile.name()
    }

    /// Whether `beta_header()` returns the Managed Agents beta header.
    #[getter]
    fn managed_agents_beta(&self) -> bool {
        self.managed_agents_beta
    }

    /// The largest a file may grow, in bytes.
    #[getter]
    fn max_file_bytes(&self) -> u64 {
        self.limits.max_file_bytes
    }

    /// The largest request, in bytes of the call's JSON text.
    #[getter]
    fn max_request_bytes(&self) -> u64 {
        self.limits.max_request_bytes
    }

    /// The most characters a file view returns, or None for no limit.
    #[getter]
    fn view_max_chars(&self) -> Option<u64> {
        self.limits.view_max_chars
    }

    /// How many calls could not be recorded because the store failed (each got an error result).
    #[getter]
    fn store_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The tool definition to put in the request's `tools`.
    fn tool_schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let schema = self.server()?.tool_schema();
        to_py(py, &schema)
    }

    /// The `anthropic-beta` header to send, or None (the memory tool itself needs none).
    fn beta_header(&self) -> PyResult<Option<&'static str>> {
        Ok(self.server()?.beta_header())
    }

    /// Answers a whole `tool_use` block (or a bare `input`) with a `tool_result` dict. Whatever
    /// the model sent, this returns a result (an error one for bad input) and logs one event.
    /// The block is converted to JSON text, which stops once it passes `max_request_bytes`: such
    /// a call is refused and logged as a digest of what was made.
    fn handle<'py>(
        &self,
        py: Python<'py>,
        block: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut text = BoundedText::new(self.limits.max_request_bytes);
        to_json_text(block, &mut text);
        let request = match text.finish() {
            Ok(bytes) => Request::Line(bytes),
            Err(digest) => Request::Stopped {
                digest,
                tool_use_id: block_id(block),
            },
        };
        let server = self.server()?;
        let (result, failed) = py.detach(move || {
            let result = server.handle_request(request);
            (result, server.store_failures())
        });
        self.failures.fetch_add(failed, Ordering::Relaxed);
        Ok(to_py(py, &result)?.cast_into::<PyDict>()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "MnemoMemoryToolServer(agent_id={:?}, root={:?}, profile={:?}, managed_agents_beta={})",
            self.agent,
            self.root,
            self.profile.name(),
            if self.managed_agents_beta {
                "True"
            } else {
                "False"
            }
        )
    }
}
