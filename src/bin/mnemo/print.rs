//! What several commands print the same way: receipts, refusals, rows, counts, shown lines.

use std::io::Write;
use std::process::ExitCode;

use crate::CliResult;

/// Writes `text` and a newline to stdout. A closed pipe is an error the dispatch ends on quietly,
/// as a reader that stopped reading wants; never the panic `println!` would be.
pub(crate) fn say(text: impl std::fmt::Display) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Writes `text` and a newline to stderr, where the CLI says what it did and why it failed. A
/// stderr that is closed or full loses the line: the exit code still says how the command ended,
/// where `eprintln!` would panic.
pub(crate) fn tell(text: impl std::fmt::Display) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// [`tell`] without the newline (a progress line rewritten in place).
pub(crate) fn tell_partial(text: impl std::fmt::Display) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

/// Writes `what`, a secret shown this once (a token, a verifier key, a login link), to stdout.
/// Output that could not be written is an error here that says so (`again`: how to get on),
/// never the quiet end a closed pipe is for what can be asked for again.
pub(crate) fn say_once(text: &str, what: &str, again: &str) -> Result<(), String> {
    say(text).map_err(|e| {
        format!("{what} could not be written to stdout ({e}) and is not shown again: {again}")
    })
}

/// An admin change's answer as the CLI prints it: `RESULT (seq N)`, or the refusal as an error.
pub(crate) fn print_receipt(receipt: &mnemo::Receipt) -> CliResult {
    if receipt.is_error {
        return Err(refused(receipt).into());
    }
    crate::print::say(format_args!("{} (seq {})", receipt.text, receipt.seq))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints `rows` (as `--json` prints them, one per line; else each as `row` shows it).
pub(crate) fn print_rows(
    rows: &[serde_json::Value],
    as_json: bool,
    row: fn(&serde_json::Value) -> Option<String>,
) -> CliResult {
    let mut out = std::io::stdout().lock();
    for value in rows {
        match (as_json, row(value)) {
            (true, _) => writeln!(out, "{value}")?,
            (false, Some(text)) => writeln!(out, "{text}")?,
            (false, None) => return Err(format!("a row without its fields: {value}").into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An admin call's refusal as the CLI reports it (after `mnemo: error: `): the answer without its
/// own `Error: ` prefix, and the seq it was logged as.
pub(crate) fn refused(receipt: &mnemo::Receipt) -> String {
    refused_text(&receipt.text, receipt.seq.0)
}

/// [`refused`] from the answer's text and seq (as a server sends them).
pub(crate) fn refused_text(text: &str, seq: u64) -> String {
    let text = text.strip_prefix("Error: ").unwrap_or(text);
    format!("{text} (refused; logged as seq {seq})")
}

/// `n` and `noun`, plural unless `n` is 1: `1 file`, `3 files`.
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The lines of `text` as `show` and `diff` print them: split at `\n` only, so a `\r` stays
/// on its line (and [`printable`] shows it), where `str::lines` would drop it.
pub(crate) fn shown_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
        .map(|line| line.strip_suffix('\n').unwrap_or(line))
}
