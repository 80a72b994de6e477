//! `mnemo export`: the files written out as plain files in the SDK tool's layout.

use std::path::Path;
use std::process::ExitCode;

use mnemo::{MemPath, Seq};

use crate::CliResult;
use crate::connect::Remote;
use crate::print::count;

#[cfg(unix)]
pub(crate) fn run_export(db: &Path, dir: &Path, at: Option<u64>, remote: &Remote) -> CliResult {
    let everything = MemPath::absolute("/")?;
    let records = crate::connect::reading(db, remote, |client| {
        client.tree_at(&everything, at.map(Seq))
    })?;
    export_records(&records, dir)
}

/// Writes `records` as plain files under `dir` and says how many.
#[cfg(unix)]
pub(crate) fn export_records(records: &[mnemo::MemoryRecord], dir: &Path) -> CliResult {
    let summary = mnemo::cli_support::export(records, dir)?;
    println!(
        "exported {} ({} bytes) to {}",
        count(summary.files, "file"),
        summary.bytes,
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(unix))]
pub(crate) fn run_export(_db: &Path, _dir: &Path, _at: Option<u64>, _remote: &Remote) -> CliResult {
    Err("mnemo export needs a Unix system (it walks directories with openat-style calls)".into())
}
