//! `mnemo.redact`: erasing events' content from a store for real (see `mnemo redact`).

use std::path::PathBuf;

use mnemo::Seq;
use mnemo::{MnemoClient, Plan, Selection};
use pyo3::prelude::*;
use serde_json::json;

use crate::convert::to_py;
use crate::errors::to_py_err;

/// Erases from the store at `db_path` the content of the events chosen by `seqs`, `paths` (a
/// file's history, a directory's subtree) and `texts` (every event whose input or answer held
/// one), with every event whose answer depended on them, recorded as a redaction by `operator`
/// for `reason`. Returns `{"seqs": [...], "paths": [...], "seq": N}`: what was erased and the
/// redaction's own seq (`None` with `dry_run=True`, which changes nothing). A store a server
/// holds is redacted by that server, and one open in this process through its open handle.
#[pyfunction]
#[pyo3(signature = (db_path, reason, *, seqs = Vec::new(), paths = Vec::new(), texts = Vec::new(), dry_run = false, operator = "operator".to_string()))]
#[expect(
    clippy::too_many_arguments,
    reason = "keyword arguments of one Python call"
)]
pub fn redact<'py>(
    py: Python<'py>,
    db_path: PathBuf,
    reason: String,
    seqs: Vec<i128>,
    paths: Vec<String>,
    texts: Vec<String>,
    dry_run: bool,
    operator: String,
) -> PyResult<Bound<'py, PyAny>> {
    let selection = selection(seqs, paths, texts)?;
    let done = py
        .detach(move || -> mnemo::Result<_> {
            if dry_run {
                // Read from a private copy (or through the server that holds the store), so a dry
                // run writes no byte; a store held open in this process is asked through its
                // handle.
                let reader = MnemoClient::builder(&db_path)
                    .agent_id(operator.clone())
                    .read_only()
                    .open();
                match reader {
                    Ok(client) => return Ok((client.redaction_plan(&selection)?, None)),
                    Err(mnemo::Error::Locked { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let client = MnemoClient::builder(&db_path)
                .agent_id(operator)
                .existing()
                .open()?;
            run(&client, &reason, &selection, dry_run)
        })
        .map_err(to_py_err)?;
    answer(py, &done.0, done.1)
}

/// A redaction (or with `dry_run`, its plan) through `client`: the plan and the redaction's seq.
pub fn run(
    client: &MnemoClient,
    reason: &str,
    selection: &Selection,
    dry_run: bool,
) -> mnemo::Result<(Plan, Option<u64>)> {
    if dry_run {
        return Ok((client.redaction_plan(selection)?, None));
    }
    let done = client.redact(reason, selection)?;
    Ok((done.plan, Some(done.seq.0)))
}

/// The selection of Python's keyword arguments; a seq that is not an event number is a
/// `ValueError`.
pub fn selection(seqs: Vec<i128>, paths: Vec<String>, texts: Vec<String>) -> PyResult<Selection> {
    let seqs = seqs
        .into_iter()
        .map(|seq| {
            u64::try_from(seq).map(Seq).map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "seqs are event numbers, whole numbers from 1 to 18446744073709551615 (as `log()` lists them), got {seq}"
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Selection { seqs, paths, texts })
}

/// `{"seqs": [...], "kept": [...], "live": [...], "paths": [...], "unsearched": [...], "seq": N or
/// None}`.
pub fn answer<'py>(py: Python<'py>, plan: &Plan, seq: Option<u64>) -> PyResult<Bound<'py, PyAny>> {
    let mut value = plan.to_json();
    value["seq"] = json!(seq);
    to_py(py, &value)
}
