//! `mnemo history`: every event of the files that lived at a path, followed through renames.

use std::io::Write;
use std::process::ExitCode;

use mnemo::protocol::printable;

use crate::CliResult;
use crate::args::{ReadLines, path_arg};
use crate::log::event_line;

pub(crate) fn run_history(path: &str, read: &ReadLines) -> CliResult {
    let file = path_arg(path)?;
    let events = read.read(|client| client.history(&file))?;
    let mut out = std::io::stdout().lock();
    // The events come file by file: a header where the file changes.
    let mut last: Option<Option<u64>> = None;
    for event in &events {
        if read.json {
            writeln!(out, "{}", serde_json::to_string(event)?)?;
            continue;
        }
        if last != Some(event.file) {
            writeln!(
                out,
                "{}",
                history_header(event.file, &event.file_paths, file.as_str())
            )?;
            last = Some(event.file);
        }
        writeln!(out, "{}", event_line(&event.event))?;
    }
    if events.is_empty() && !read.json {
        writeln!(out, "no event names {file}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The line `mnemo history` prints before the events of one file: `file N: PATH -> PATH ...`,
/// or `no file at PATH:` before the calls that found none.
pub(crate) fn history_header(file: Option<u64>, paths: &[String], asked: &str) -> String {
    match file {
        Some(n) => {
            let paths: Vec<String> = paths.iter().map(|p| printable(p).into_owned()).collect();
            format!("file {n}: {}", paths.join(" -> "))
        }
        None => format!("no file at {asked}:"),
    }
}
