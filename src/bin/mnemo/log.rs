//! `mnemo log`: the logged events, one line each.

use std::io::Write;
use std::process::ExitCode;

use mnemo::LogQuery;
use mnemo::protocol::{UNREADABLE_COMMAND, printable};

use crate::args::{LogArgs, path_arg};
use mnemo::protocol::LoggedEvent;

use crate::CliResult;

pub(crate) fn event_line(event: &LoggedEvent) -> String {
    let paths: Vec<&str> = event.paths.iter().map(String::as_str).collect();
    event_line_parts(
        event.seq,
        &event.time,
        &event.agent,
        &event.command,
        event.is_error,
        &paths,
    )
}

/// One line of `mnemo log`: seq, time, agent, command, ok/error, paths.
pub(crate) fn event_line_parts(
    seq: u64,
    time: &str,
    agent: &str,
    command: &str,
    is_error: bool,
    paths: &[&str],
) -> String {
    let status = if is_error { "error" } else { "ok" };
    // Agent ids and the raw paths of refused calls come from outside: printed escaped, so no
    // logged text can forge a line of the log or send escape codes to the terminal.
    let paths: Vec<String> = paths.iter().map(|p| printable(p).into_owned()).collect();
    format!(
        "{seq:>6}  {time}  {:<12}  {command:<11}  {status:<5}  {}",
        printable(agent),
        paths.join(" -> ")
    )
}

/// `mnemo log`: the events its filters choose, one line (or JSON object) each.
pub(crate) fn run_log(args: &LogArgs) -> CliResult {
    let query = LogQuery {
        agent: args.agent.clone(),
        path: args.path.as_deref().map(path_arg).transpose()?,
        from: args.from,
        limit: args.limit,
        ..LogQuery::default()
    };
    let events = crate::connect::reading(&args.db.db, &args.remote, |client| client.log(&query))?;
    let mut out = std::io::stdout().lock();
    for event in &events {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(event)?)?;
        } else {
            writeln!(out, "{}", event_line(event))?;
        }
    }
    out.flush()?;
    let unreadable: Vec<u64> = events
        .iter()
        .filter(|event| event.command == UNREADABLE_COMMAND)
        .map(|event| event.seq)
        .collect();
    if unreadable.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("{}", unreadable_note(&unreadable));
    Ok(ExitCode::from(2))
}

/// What `log` says when it listed events whose payloads it could not read.
fn unreadable_note(seqs: &[u64]) -> String {
    let listed: Vec<String> = seqs.iter().map(u64::to_string).collect();
    format!(
        "mnemo: the payload of event(s) {} cannot be read back as it was written (its bytes in the store's value file are damaged, cut off or gone): listed by their headers alone, which the chain proves, as `{UNREADABLE_COMMAND}`; what they called is not known. `mnemo verify` names the damage; restore the store from a replica or backup",
        listed.join(", ")
    )
}
