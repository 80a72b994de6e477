//! `mnemo cat`: a file's content, now or after an event.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::args::path_arg;
use mnemo::Seq;

use crate::CliResult;
use crate::connect::Remote;

pub(crate) fn run_cat(db: &Path, path: &str, at: Option<u64>, remote: &Remote) -> CliResult {
    let file = path_arg(path)?;
    match crate::connect::reading(db, remote, |client| client.content_at(&file, at.map(Seq)))? {
        Some(content) => {
            let mut out = std::io::stdout().lock();
            out.write_all(content.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        None => Err(no_file(&file.to_string(), at).into()),
    }
}

/// The error of `mnemo cat` for a file that is not there.
pub(crate) fn no_file(file: &str, at: Option<u64>) -> String {
    format!(
        "no file at {file}{}; list files with `mnemo ls`",
        at.map(|s| format!(" after seq {s}")).unwrap_or_default()
    )
}
