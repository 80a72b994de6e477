//! `mnemo ls`: the files under a directory, now or after an event.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use mnemo::{MemPath, Seq};

use crate::CliResult;
use crate::connect::Remote;

pub(crate) fn run_ls(db: &Path, dir: &str, at: Option<u64>, remote: &Remote) -> CliResult {
    // `/` too: every file the store holds, whatever root its calls ran under.
    let dir = MemPath::absolute(dir).map_err(mnemo::Error::InvalidArgument)?;
    let listing = crate::connect::reading(db, remote, |client| client.listing(&dir, at.map(Seq)))?;
    if listing.files.is_empty() && dir.as_str() != "/" {
        return Err(no_dir(dir.as_str(), at).into());
    }
    let mut out = std::io::stdout().lock();
    for file in &listing.files {
        writeln!(out, "{:>7}  {}", file.size_text(), file.path)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The error of `mnemo ls` for a directory that holds no file (directories live only while a
/// file lives under them, so it is not there).
pub(crate) fn no_dir(dir: &str, at: Option<u64>) -> String {
    format!(
        "no file or directory at {dir}{}; `mnemo ls /` lists every file in the store",
        at.map(|s| format!(" after seq {s}")).unwrap_or_default()
    )
}
