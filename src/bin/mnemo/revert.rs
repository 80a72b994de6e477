//! `mnemo revert`: files put back as they were after an earlier event, with its dry run.

use std::io::Write;
use std::process::ExitCode;

use crate::CliResult;
use crate::args::RevertArgs;

/// `mnemo revert`: the revert made (or with `--dry-run` its plan), and its summary printed.
pub(crate) fn run_revert(args: &RevertArgs) -> CliResult {
    let (db, remote, operator) = (&args.db.db, &args.remote, &args.operator.name);
    // clap requires --to, or --agent with --since.
    let scope = mnemo::RevertScope::of(
        args.to.map(mnemo::Seq),
        args.path.clone(),
        args.agent.clone(),
        args.since.map(mnemo::Seq),
    )
    .ok_or("give --to SEQ (with --path P), or --agent A with --since SEQ")?;
    // Planned first on a private copy, so a dry run, a refused revert and one with nothing to
    // do write no byte; as the operator, whose grants the calls would need.
    let plan = crate::connect::reading(db, remote, |client| {
        client.with_agent(operator.as_str())?.revert_plan(&scope)
    })?;
    let text = if args.dry_run || plan.calls.is_empty() {
        match args.json {
            true => format!("{}\n", plan.to_json()),
            false => plan.summary(),
        }
    } else {
        // Refused for its conflicts: with --json, the plan that lists them is the answer too.
        if let Err(refusal) = plan.refused(args.force) {
            if args.json {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", plan.to_json())?;
                out.flush()?;
            }
            return Err(refusal.into());
        }
        let done = crate::connect::administering(db, remote, operator, |client| {
            client.revert(&scope, args.force)
        })?;
        match args.json {
            true => format!("{}\n", done.to_json()),
            false => done.summary(),
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
