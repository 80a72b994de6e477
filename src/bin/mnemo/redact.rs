//! `mnemo redact`: erasing events' content, with its dry run.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::CliResult;
use crate::args::RedactArgs;
use crate::connect::Remote;

/// `mnemo redact`: the redaction made (or with `--dry-run` its plan), and its summary printed.
pub(crate) fn run_redact(args: &RedactArgs) -> CliResult {
    let (db, remote) = (&args.db.db, &args.remote);
    let selection = mnemo::Selection {
        seqs: args.seqs.iter().copied().map(mnemo::Seq).collect(),
        paths: args.paths.clone(),
        texts: args.texts.clone(),
    };
    let text = if args.dry_run {
        // Read from a private copy (or asked of the server that holds the store), so a dry run
        // writes no byte.
        crate::connect::reading(db, remote, |client| client.redaction_plan(&selection))?.summary()
    } else {
        redact(db, &args.reason, &selection, &args.operator.name, remote)?.summary()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The redaction, made by the server that holds the store (or that --connect names), else on
/// the store's files (`ClientBuilder::redact`); a store of a served data directory is refused
/// here, saying how to reach it through its server.
fn redact(
    db: &Path,
    reason: &str,
    selection: &mnemo::Selection,
    operator: &str,
    remote: &Remote,
) -> mnemo::Result<mnemo::Redacted> {
    if remote.connect.is_none() && mnemo::ServerFile::find(db)?.is_none() {
        crate::connect::held_by_a_data_server(db)?;
    }
    crate::connect::connected(mnemo::MnemoClient::builder(db).agent_id(operator), remote)?
        .redact(reason, selection)
}
