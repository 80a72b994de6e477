//! `mnemo verify`: proving a store (or, with `--from`, a replica) and printing the report.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use mnemo::protocol::VerifyReport;
use mnemo::{Head, Report};

use crate::CliResult;
use crate::connect::Remote;

/// `mnemo verify`: of the store, or of a replica (`--from`); `--expect` as SEQ:HASH or a
/// checkpoint file.
pub(crate) fn verify_command(
    db: &Path,
    json: bool,
    expect: Option<String>,
    from: Option<String>,
    key: Option<String>,
    remote: &Remote,
) -> CliResult {
    if key.is_some() && from.is_none() && expect.is_none() {
        return Err("--key checks a replica's head (--from URL) or a checkpoint file (--expect FILE); give one of them".into());
    }
    let expect = expect
        .map(|e| mnemo::Replica::expected_head(&e, key.as_deref()))
        .transpose()?;
    match from {
        Some(url) => crate::replication::verify(&url, json, expect, key.as_deref()),
        None => run_verify(db, json, expect, remote),
    }
}

pub(crate) fn print_report(
    out: &mut impl Write,
    path: &Path,
    report: &VerifyReport,
) -> std::io::Result<()> {
    let note = if report.events == 0 && report.is_intact() {
        " (the log holds no events; nothing to prove)"
    } else {
        ""
    };
    writeln!(out, "mnemo verify: {}{note}", report.status.to_uppercase())?;
    for note in &report.notes {
        writeln!(out, "  WARNING: {note}")?;
        crate::print::tell(format_args!("mnemo verify: WARNING: {note}"));
    }
    writeln!(out, "  store:      {}", path.display())?;
    let of = if report.events < report.log_last {
        format!(
            " of the {} the log holds (verification stops at the first violation; past a payload the value file lost, it checks the chain alone)",
            report.log_last
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "  checked:    {} events{of}, {} bytes in {:.1} ms ({:.0} events/s, {:.1} MB/s)",
        report.events, report.bytes, report.elapsed_ms, report.events_per_sec, report.mb_per_sec
    )?;
    if let Some(recorded) = report.recorded_head {
        writeln!(
            out,
            "  recorded:   seq {recorded} at the store's last commit or close, so the log must hold at least {recorded} events"
        )?;
    }
    let last = if report.is_intact() {
        ""
    } else {
        " (the last event checked)"
    };
    writeln!(
        out,
        "  head:       seq {} hash {}{last}",
        report.head.seq, report.head.hash
    )?;
    if !report.redacted.is_empty() {
        let mut by: std::collections::BTreeMap<u64, Vec<String>> =
            std::collections::BTreeMap::new();
        for erased in &report.redacted {
            by.entry(erased.by)
                .or_default()
                .push(erased.seq.to_string());
        }
        for (redaction, seqs) in by {
            writeln!(
                out,
                "  redacted:   {} events erased by redaction {redaction} ({}): their chain hashes verify, their answers cannot be re-derived",
                seqs.len(),
                seqs.join(", ")
            )?;
        }
    }
    // Only an intact log has a checkpoint worth keeping.
    if let Some(checkpoint) = &report.checkpoint {
        writeln!(out, "  checkpoint: {checkpoint}")?;
    }
    if report.meta_head < report.head.seq && report.is_intact() {
        writeln!(
            out,
            "  note:       meta.head is {} events behind the log (a commit a crash cut short); the next open for writing moves it",
            report.head.seq - report.meta_head
        )?;
    }
    if report.index_applied < report.head.seq && report.is_intact() {
        writeln!(
            out,
            "  note:       the index is {} events behind the log (an interrupted commit); the next open catches it up",
            report.head.seq - report.index_applied
        )?;
    }
    for violation in &report.violations {
        let at = if violation.seq > report.log_last {
            format!("after seq {}, where the log ends", report.log_last)
        } else {
            format!("seq {}", violation.seq)
        };
        writeln!(
            out,
            "  violation:  {at} ({}): {}",
            violation.kind, violation.detail
        )?;
    }
    Ok(())
}

/// Prints a verify report (as `--json` prints it with `as_json`) and exits 0 when intact, else 1.
pub(crate) fn print_verify(db: &Path, as_json: bool, report: &VerifyReport) -> CliResult {
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string(report)?)?;
    } else {
        print_report(&mut out, db, report)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(crate) fn run_verify(
    db: &Path,
    as_json: bool,
    expect: Option<Head>,
    remote: &Remote,
) -> CliResult {
    let tty = std::io::stderr().is_terminal();
    let mut shown = false;
    let mut progress = |checked, head| {
        if tty {
            crate::print::tell_partial(format_args!("\rverifying: {checked} / {head} events"));
            shown = true;
        }
    };
    let report = match crate::connect::reading(db, remote, |client| {
        client.verify_watching(expect, &mut progress)
    }) {
        Ok(report) => report,
        // sled refuses a log whose bytes are damaged: a finding (exit 1), not a failure to run.
        Err(e) if Report::is_damage(&e) => Report::unreadable(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    if shown {
        crate::print::tell(format_args!(""));
    }
    // What was verified: the store at --db, or the one the server --connect names holds.
    let label = match (&remote.connect, &remote.store) {
        (Some(url), Some(store)) => std::path::PathBuf::from(format!("{url} store {store}")),
        (Some(url), None) => std::path::PathBuf::from(url),
        (None, _) => db.to_path_buf(),
    };
    print_verify(&label, as_json, &report.to_protocol(&label))
}
