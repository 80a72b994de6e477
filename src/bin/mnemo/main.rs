//! `mnemo`: the command-line face of the store. Every subcommand is a thin layer over library
//! calls; errors are printed once, and the exit code is 0 (ok), 1 (verify found a violation, a
//! read met a record that breaks the chain, or import skipped entries) or 2 (could not run).

use std::process::ExitCode;

use clap::Parser;

use crate::acl::run_acl;
use crate::args::{Cmd, FleetCmd, KeyCmd};
use crate::cat::run_cat;
use crate::completions::{run_completions, run_man};
use crate::config::run_config;
use crate::demo::run_demo;
use crate::diff::run_diff;
use crate::export::run_export;
use crate::history::run_history;
use crate::import::run_import;
use crate::log::run_log;
use crate::ls::run_ls;
use crate::mcp::run_mcp;
use crate::redact::run_redact;
use crate::revert::run_revert;
use crate::serve::run_serve;
use crate::show::run_show;
use crate::token::run_token;
use crate::tool::run_tool;
use crate::trace::run_trace;
use crate::ui::run_ui;
use crate::verify::verify_command;

mod acl;
mod args;
mod cat;
mod completions;
mod config;
mod connect;
mod demo;
mod diff;
mod export;
mod fleet;
mod history;
mod import;
mod log;
mod ls;
mod mcp;
mod memory_stores;
mod print;
mod redact;
mod replication;
mod revert;
mod serve;
mod session;
mod show;
mod store;
mod token;
mod tool;
mod trace;
mod ui;
mod verify;

/// An event-sourced, verifiable memory store for Anthropic's memory tool.
#[derive(Parser)]
#[command(name = "mnemo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

pub(crate) type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// The command line, parsed. An explicit `--db` wins over `MNEMO_URL` and `MNEMO_TOKEN` from
/// the environment (which are then not read, with a note on stderr); `--db` and `--connect`
/// both on the command line are refused.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let matches = match connect::env_gives_way(&matches) {
        Ok(false) => matches,
        Ok(true) => {
            crate::print::tell(format_args!(
                "mnemo: --db names the store, so MNEMO_URL and MNEMO_TOKEN from the environment are not used (pass --connect to reach a server by URL)"
            ));
            connect::without_remote_env(Cli::command()).get_matches()
        }
        Err(why) => Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, why)
            .exit(),
    };
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The binary with the server allocates with jemalloc (see Cargo.toml): the library leaves the
/// allocator to whoever embeds it.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = parse_cli();
    // What this process creates is its owner's alone: sled makes some files of a store (its
    // snapshots) with the umask, at moments of its own. Not for the commands whose output is
    // meant for others (man pages, completions, an export).
    if !matches!(
        cli.command,
        Cmd::Man { .. } | Cmd::Completions { .. } | Cmd::Export(_)
    ) {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    }
    if let Err(why) = mnemo::RemoteClient::answer_wait() {
        crate::print::tell(format_args!("error: {why}"));
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Cmd::Demo { db } => run_demo(db),
        Cmd::Completions { shell } => run_completions(shell),
        Cmd::Man { out } => run_man(out.as_deref()),
        Cmd::Ui(a) => run_ui(&a.db.db, a.data.as_deref(), a.open, a.idle_exit),
        Cmd::Tool(a) => run_tool(a.session, a.agent, &a.remote, &a.start),
        Cmd::Link { session, start } => connect::run_link(&session, &start),
        Cmd::Mcp(a) => run_mcp(a.session, a.agent, &a.remote, &a.start),
        Cmd::Serve(a) => run_serve(a.session, a.agent, a.flags),
        Cmd::Verify(a) => verify_command(&a.db.db, a.json, a.expect, a.from, a.key, &a.remote),
        Cmd::Replicate(a) => {
            replication::replicate(&a.db.db, &a.to, (!a.once).then_some(a.interval))
        }
        Cmd::Restore(a) => replication::restore(&a.from, &a.db, a.at, a.key.as_deref()),
        Cmd::Fleet {
            command:
                FleetCmd::Status {
                    fleet,
                    lease_ttl,
                    json,
                },
        } => fleet::status(&fleet, lease_ttl, json),
        Cmd::Fleet {
            command: FleetCmd::Drain { node, fleet },
        } => fleet::drain(&fleet, &node),
        Cmd::Fleet {
            command:
                FleetCmd::Adopt {
                    stores,
                    fleet,
                    signing_key,
                },
        } => fleet::adopt(&fleet, &signing_key, &stores),
        Cmd::Key {
            command: KeyCmd::Create { db, name, file },
        } => replication::key_create(&db.db, name.as_deref(), file.as_deref()),
        Cmd::Store { command } => store::run(&command),
        Cmd::Log(args) => run_log(&args),
        Cmd::Ls(a) => run_ls(&a.db.db, &a.dir, a.at, &a.remote),
        Cmd::Cat(a) => run_cat(&a.db.db, &a.path, a.at, &a.remote),
        Cmd::History(a) => run_history(&a.path, &a.read),
        Cmd::Show(a) => run_show(&a.db.db, a.seq, a.json, &a.remote),
        Cmd::Diff(a) => run_diff(&a.db.db, a.from, a.to, &a.path, a.json, &a.remote),
        Cmd::Trace(args) => run_trace(&args),
        Cmd::Redact(args) => run_redact(&args),
        Cmd::Revert(args) => run_revert(&args),
        Cmd::Acl { command } => run_acl(command),
        Cmd::Token { command } => run_token(command),
        Cmd::Config { command } => run_config(command),
        Cmd::Export(args) => run_export(&args),
        Cmd::Import(args) => run_import(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        // A read that met a record breaking the chain found what `verify` calls a violation.
        Err(e) if matches!(e.downcast_ref(), Some(mnemo::Error::ChainBroken { .. })) => {
            crate::print::tell(format_args!("mnemo: error: {e}"));
            ExitCode::from(1)
        }
        // A store of a data directory is held by its `--data` server: say how to reach it there; an
        // agent token refused for acting as another agent: say it of the token given.
        Err(e) => {
            let held = match e.downcast_ref() {
                Some(mnemo::Error::Locked { path }) => connect::data_server_hint(path),
                _ => connect::token_refusal(e.as_ref()),
            };
            crate::print::tell(format_args!(
                "mnemo: error: {}",
                held.unwrap_or_else(|| e.to_string())
            ));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
