//! `mnemo trace`: where the content an event wrote (or a file held right after it) went, event
//! by event, grouped by agent.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use mnemo::Seq;
use mnemo::protocol::{TraceReport, TracedEvent, printable};

use crate::CliResult;
use crate::args::{TraceArgs, path_arg};
use crate::log::event_line;

pub(crate) fn run_trace(args: &TraceArgs) -> CliResult {
    let file = args.path.as_deref().map(path_arg).transpose()?;
    let shown = &args.event;
    let report = crate::connect::reading(&shown.db.db, &shown.remote, |client| {
        client.trace(Seq(shown.seq), file.as_ref())
    })?;
    let mut out = std::io::stdout().lock();
    if shown.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for line in trace_lines(&report) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What an event did with the traced bytes, as a trace line ends.
fn what(event: &TracedEvent) -> String {
    let mut did = Vec::new();
    if event.erased_event {
        did.push("erased: cannot be re-derived");
    }
    if event.shown {
        did.push("shown");
    }
    if event.carried {
        did.push("carried");
    }
    if event.removed {
        did.push("removed");
    }
    let files: Vec<String> = event
        .files
        .iter()
        .map(|f| printable(f).into_owned())
        .collect();
    format!("{} ({})", did.join(", "), files.join(", "))
}

/// The lines `mnemo trace` prints: what was traced, the events by agent, where the bytes are
/// now, and what the trace counts.
fn trace_lines(report: &TraceReport) -> Vec<String> {
    let file = printable(&report.file);
    let mut lines = vec![match &report.path {
        Some(_) => format!(
            "trace of {file} as it was right after event {}: {} bytes, through event {}",
            report.seq, report.bytes, report.through
        ),
        None => format!(
            "trace of the {} bytes event {} wrote in {file}, through event {}",
            report.bytes, report.seq, report.through
        ),
    }];
    let mut by_agent: BTreeMap<&str, Vec<&TracedEvent>> = BTreeMap::new();
    for event in &report.events {
        by_agent.entry(&event.event.agent).or_default().push(event);
    }
    if by_agent.is_empty() {
        lines.push("no later event was shown these bytes or carried them".into());
    }
    for (agent, events) in by_agent {
        lines.push(format!("agent {}:", printable(agent)));
        for event in events {
            lines.push(format!("{}  {}", event_line(&event.event), what(event)));
        }
    }
    if report.live.is_empty() {
        lines.push("now: no file holds these bytes".into());
    }
    for live in &report.live {
        lines.push(format!(
            "now: {} holds {} of them",
            printable(&live.path),
            live.bytes
        ));
    }
    lines.push(if report.exact {
        "exact: re-derived by replaying the log, every answer answered again".into()
    } else {
        "not exact: a lower bound (see the notes)".into()
    });
    lines.extend(report.notes.iter().map(|n| format!("note: {n}")));
    lines
}
