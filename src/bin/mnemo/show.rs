//! `mnemo show`: one event whole, its answer re-derived and checked.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use mnemo::Seq;
use mnemo::protocol::printable;
use mnemo::protocol::{EventChange, ShownEvent};

use crate::CliResult;
use crate::connect::Remote;
use crate::print::shown_lines;

pub(crate) fn run_show(db: &Path, seq: u64, as_json: bool, remote: &Remote) -> CliResult {
    let shown = crate::connect::reading(db, remote, |client| client.show(Seq(seq)))?;
    print_shown(&shown, as_json)
}

/// Prints an event as `mnemo show` shows it; exit 1 when its answer is not the one the log
/// recorded.
pub(crate) fn print_shown(shown: &ShownEvent, as_json: bool) -> CliResult {
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string(shown)?)?;
    } else {
        writeln!(out, "event {}  {}", shown.seq, shown.time)?;
        writeln!(out, "  agent:       {}", printable(&shown.agent))?;
        if let Some(id) = &shown.tool_use_id {
            writeln!(out, "  tool_use_id: {}", printable(id))?;
        }
        writeln!(out, "  command:     {}", shown.command)?;
        writeln!(out, "  semantics:   {}", shown.semantics)?;
        writeln!(
            out,
            "  input:       {}",
            printable(&shown.input.to_string())
        )?;
        if shown.chained_through > 0 {
            writeln!(
                out,
                "  record:      chained: its payload and chain hashes recompute, and the chain from event 1 through event {} (the log's end) links and leads to the store's head",
                shown.chained_through
            )?;
        }
        let status = if shown.is_error { "error" } else { "ok" };
        if let Some(redaction) = &shown.redaction {
            writeln!(
                out,
                "  erased:      by redaction {} at {}, operator {}: {}",
                redaction.seq,
                redaction.time,
                printable(&redaction.by),
                printable(&redaction.reason)
            )?;
            writeln!(
                out,
                "  answer:      erased with the payload; its chain hash still verifies"
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        let proof = if shown.verified {
            "re-derived by replaying the events before it; matches the recorded outcome"
        } else {
            "re-derived by replaying the events before it; DOES NOT match the recorded outcome (run mnemo verify)"
        };
        writeln!(out, "  answer:      {status}, {proof}")?;
        for line in shown_lines(&shown.answer) {
            writeln!(out, "    | {}", printable(line))?;
        }
        match &shown.change {
            None => writeln!(out, "  change:      none")?,
            Some(change) => {
                writeln!(out, "  change:      {}", change.kind())?;
                print_change(&mut out, change)?;
            }
        }
    }
    Ok(if shown.verified || shown.redaction.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The lines under `change:` for a change.
pub(crate) fn print_change(out: &mut impl Write, change: &EventChange) -> std::io::Result<()> {
    match change {
        EventChange::Created { diff, .. } | EventChange::Edited { diff, .. } => {
            for line in shown_lines(diff) {
                writeln!(out, "{}", printable(line))?;
            }
        }
        EventChange::Deleted { path, files } => {
            writeln!(out, "    removed {}", printable(path))?;
            for file in files {
                writeln!(out, "    - {}", printable(file))?;
            }
        }
        EventChange::Moved { files, from, to } => {
            writeln!(out, "    moved {} -> {}", printable(from), printable(to))?;
            for (old, new) in files {
                writeln!(out, "    {} -> {}", printable(old), printable(new))?;
            }
        }
        EventChange::Policy { what } => writeln!(out, "    {}", printable(what))?,
        // A kind of change this build does not know, from a newer server.
        _ => writeln!(out, "    ({})", change.kind())?,
    }
    Ok(())
}
