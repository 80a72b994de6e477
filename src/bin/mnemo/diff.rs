//! `mnemo diff`: what changed in the files between two events.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use mnemo::Seq;
use mnemo::protocol::printable;

use crate::args::path_arg;

use crate::CliResult;
use crate::connect::Remote;
use crate::print::shown_lines;

pub(crate) fn run_diff(
    db: &Path,
    from: u64,
    to: u64,
    path: &str,
    as_json: bool,
    remote: &Remote,
) -> CliResult {
    let dir = path_arg(path)?;
    let files =
        crate::connect::reading(db, remote, |client| client.diff(Seq(from), Seq(to), &dir))?;
    let mut out = std::io::stdout().lock();
    for file in &files {
        if as_json {
            writeln!(out, "{}", serde_json::to_string(file)?)?;
        } else {
            for line in shown_lines(&file.diff) {
                writeln!(out, "{}", printable(line))?;
            }
        }
    }
    if files.is_empty() && !as_json {
        writeln!(
            out,
            "no file under {dir} differs between event {from} and event {to}"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
