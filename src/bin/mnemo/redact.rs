//! `mnemo redact`: erasing events' content, with its dry run.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::CliResult;
use crate::connect::Remote;

pub(crate) fn run_redact(
    db: &Path,
    reason: &str,
    selection: &mnemo::Selection,
    dry_run: bool,
    operator: &str,
    remote: &Remote,
) -> CliResult {
    let text = if dry_run {
        // Read from a private copy (or asked of the server that holds the store), so a dry run
        // writes no byte.
        crate::connect::reading(db, remote, |client| client.redaction_plan(selection))?.summary()
    } else {
        redact(db, reason, selection, operator, remote)?.summary()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The redaction, made by the server that holds the store, else on the store's files (not
/// opened for writing first: the rewrite keeps the store's owner and permissions, which a
/// process opening it as another user would not); a server that started meanwhile is asked.
fn redact(
    db: &Path,
    reason: &str,
    selection: &mnemo::Selection,
    operator: &str,
    remote: &Remote,
) -> mnemo::Result<mnemo::Redacted> {
    if let Some(client) = crate::connect::served_administrator(db, remote, operator)? {
        return client.redact(reason, selection);
    }
    match mnemo::redact_store(db, operator, reason, selection) {
        Err(mnemo::Error::Locked { path }) => {
            match crate::connect::served_administrator(db, remote, operator)? {
                Some(client) => client.redact(reason, selection),
                None => Err(mnemo::Error::Locked { path }),
            }
        }
        done => done,
    }
}
