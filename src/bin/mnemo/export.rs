//! `mnemo export`: the files written out as plain files in the SDK tool's layout.

use std::path::Path;
use std::process::ExitCode;

use mnemo::Seq;

use crate::CliResult;
use crate::connect::Remote;
use crate::print::count;

pub(crate) fn run_export(db: &Path, dir: &Path, at: Option<u64>, remote: &Remote) -> CliResult {
    let summary =
        crate::connect::reading(db, remote, |client| client.export_files(dir, at.map(Seq)))?;
    crate::print::say(format_args!(
        "exported {} ({} bytes) to {}",
        count(summary.files, "file"),
        summary.bytes,
        dir.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
