//! `mnemo.redact`: erasing events' content from a store for real (see `mnemo redact`).

use std::path::PathBuf;

use mnemo::Seq;
use mnemo::cli_support::{Selection, plan, redact as redact_store};
use pyo3::prelude::*;
use serde_json::json;

use crate::convert::to_py;
use crate::errors::to_py_err;

/// Erases from the store at `db_path` the content of the events chosen by `seqs`, `paths` (a
/// file's history, a directory's subtree) and `texts` (every event whose input or answer held
/// one), with every event whose answer depended on them, recorded as a redaction by `operator`
/// for `reason`. Returns `{"seqs": [...], "paths": [...], "seq": N}`: what was erased and the
/// redaction's own seq (`None` with `dry_run=True`, which changes nothing). The store must not be
/// open elsewhere, this process included (`StoreLockedError`).
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
    let selection = Selection { seqs, paths, texts };
    let done = py
        .detach(move || -> mnemo::Result<_> {
            if dry_run {
                let store = mnemo::cli_support::Store::open_current_read_only(&db_path)?;
                Ok((plan(&store, &selection)?, None))
            } else {
                let done = redact_store(&db_path, &operator, &reason, &selection)?;
                Ok((done.plan, Some(done.seq.0)))
            }
        })
        .map_err(to_py_err)?;
    let (plan, seq) = done;
    let value = json!({
        "seqs": plan.seqs.iter().map(|s| s.0).collect::<Vec<_>>(),
        "paths": plan.paths,
        "seq": seq,
    });
    to_py(py, &value)
}
