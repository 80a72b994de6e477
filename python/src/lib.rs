//! Python bindings for Mnemo, built by maturin into the `mnemo-db` wheel as `mnemo._native` and
//! re-exported by the pure-Python package `mnemo` (see `python/mnemo/__init__.py`).
//!
//! The Python surface mirrors the Rust one: `MnemoClient` (open, agents, ACL, reads, verify) and
//! `MnemoMemoryToolServer` (`tool_schema`, `beta_header`, `handle`). Every store call releases the
//! GIL. Conversion between Python objects and JSON is in [`convert`], by hand, so that any input
//! the model sends becomes a logged `tool_result`, never an exception.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used)]

mod client;
mod convert;
mod errors;
mod records;
mod redact;
mod remote;
mod server;

use pyo3::prelude::*;

/// The native module `mnemo._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::PyClient>()?;
    m.add_class::<server::PyServer>()?;
    m.add_class::<records::PyMemoryRecord>()?;
    m.add_class::<records::PyEvent>()?;
    m.add_class::<records::PyGrant>()?;
    m.add_class::<records::PyReceipt>()?;
    m.add_class::<records::PyHead>()?;
    m.add_class::<records::PyViolation>()?;
    m.add_class::<records::PyVerifyReport>()?;
    m.add_class::<remote::PyRemote>()?;
    m.add_function(wrap_pyfunction!(redact::redact, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_MAX_FILE_BYTES",
        mnemo::tool::Limits::default().max_file_bytes,
    )?;
    Ok(())
}
