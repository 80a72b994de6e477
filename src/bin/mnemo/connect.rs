//! The CLI's side of sharing a store (part of the `mnemo` binary, not of the library): the flags
//! that name a server (`--connect`, `--token`, `--store`) or let one be started (`--idle-exit`,
//! `--no-start`), and what a command says when a path or a token cannot be used.
//!
//! How a command's store is reached is the library's decision (`ClientBuilder`: `through` for
//! --connect's server, else the server that holds the store, else the store itself, or with
//! `start_server` a server started now; `open_and_run` for a server found gone, `link` for the
//! `Link` that `tool` and `mcp` answer through, `redact` for a redaction wherever the store is
//! held). What stays here is the binary's own: which `serve` flags a started server gets (this
//! binary, with the session's settings), and the refusal of a store a `--data` server holds.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Args;
use mnemo::Link;

use crate::CliResult;
use crate::args::Session;

/// Where a command reaches a store that a server holds.
#[derive(Args, Clone, Debug)]
pub struct Remote {
    /// Reach the `mnemo serve` at this URL (such as http://127.0.0.1:41234) instead of the store
    /// at --db.
    #[arg(long, env = "MNEMO_URL", value_name = "URL")]
    pub connect: Option<String>,
    /// The bearer token --connect presents: an agent token, or the operator's from the server
    /// file (mnemo-server.json in the store directory, or in DIR for `mnemo serve --data DIR`).
    #[arg(
        long,
        env = "MNEMO_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// With --connect to a `mnemo serve --data` server: the store NAME every request goes to
    /// (under /v1/stores/NAME/).
    #[arg(long, env = "MNEMO_STORE", value_name = "NAME", requires = "connect")]
    pub store: Option<String>,
}

/// How `tool` and `mcp` start a server when none holds the store.
#[derive(Args, Clone, Debug)]
pub struct Start {
    /// A server this starts exits this many seconds after its last client left.
    #[arg(
        long = "idle-exit",
        env = "MNEMO_IDLE_EXIT",
        value_name = "SECS",
        default_value_t = 30.0
    )]
    pub idle_exit: f64,
    /// Start no server when none holds the store: open it in this process (the store is then
    /// this process's alone until it exits). A server that already holds the store is still
    /// used.
    #[arg(
        long = "no-start",
        env = "MNEMO_NO_START",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub no_start: bool,
}

/// Whether the environment's `MNEMO_URL` and `MNEMO_TOKEN` are to be set aside for this
/// command line: `--db` given on it names the store, and a server named only by the environment
/// must not take the writes or the audit meant for that store. `Err` when the command line
/// gives both `--db` and `--connect`, which name two places.
pub fn env_gives_way(matches: &clap::ArgMatches) -> Result<bool, String> {
    use clap::parser::ValueSource::{CommandLine, EnvVariable};
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    let source = |id: &str| {
        leaf.ids()
            .any(|known| known.as_str() == id)
            .then(|| leaf.value_source(id))
            .flatten()
    };
    if source("db") != Some(CommandLine) {
        return Ok(false);
    }
    match (source("connect"), source("token")) {
        (Some(CommandLine), _) => Err(
            "--db and --connect name two places: give --db to reach the store at that path (through the server that holds it, if one runs), or --connect URL to reach a server, not both".into(),
        ),
        (Some(EnvVariable), _) | (_, Some(EnvVariable)) => Ok(true),
        _ => Ok(false),
    }
}

/// `command` with `--connect` and `--token` no longer read from the environment, in every
/// subcommand.
pub fn without_remote_env(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    let mut command = command;
    for name in names {
        command = command.mut_subcommand(name, without_remote_env);
    }
    for id in ["connect", "token", "store"] {
        if command.get_arguments().any(|arg| arg.get_id() == id) {
            command = command.mut_arg(id, |arg| arg.env(None));
        }
    }
    command
}

type Failure = Box<dyn std::error::Error>;

/// A server's refusal of an agent token for acting as another agent, said as what the user did:
/// the command line never shows the agent header, only the token given with --token (read
/// and admin commands act as the operator, `tool` and `mcp` as their --agent). `None` for any
/// other error.
pub fn token_refusal(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let reason = match e.downcast_ref::<mnemo::Error>() {
        Some(mnemo::Error::Server {
            reason,
            status: Some(403),
            ..
        }) => reason.clone(),
        _ => match e.downcast_ref::<mnemo::RemoteError>() {
            Some(refused @ mnemo::RemoteError::Refused { status: 403, .. }) => refused.to_string(),
            _ => return None,
        },
    };
    let at = reason.find("this token acts only as agent ")?;
    let (head, rest) = reason.split_at(at);
    let what = rest.split(';').next().unwrap_or(rest);
    let what = what.replacen("this token", "the token given (--token or MNEMO_TOKEN)", 1);
    Some(format!(
        "{head}{what}. The read and admin commands (ls, cat, log, history, show, diff, verify, export, acl, token, config, redact) act as the operator (or the --as name): give them the operator's token, from the server file mnemo-server.json (in the store directory, or in DIR for `mnemo serve --data DIR`). `mnemo tool` and `mnemo mcp` act as the token's own agent when --agent is left out"
    ))
}

/// Why `tool`, `mcp`, `link`, `ui` or `serve` cannot start a server for the store at `db`, said
/// before trying:
/// the directory that would hold it is missing, or it is a store of a `mnemo serve --data`
/// directory, which that server holds (see [`data_server_hint`]).
pub fn unservable(db: &std::path::Path) -> Option<String> {
    unusable_path(db).or_else(|| data_server_hint(db))
}

/// What is wrong with the path `db` before any server is started for it: the directory that
/// would hold a new store is missing or is not a directory, or `db` itself is a symbolic link
/// (a store is opened only at its own path, never through a link).
pub fn unusable_path(db: &std::path::Path) -> Option<String> {
    if std::fs::symlink_metadata(db).is_ok_and(|m| m.file_type().is_symlink()) {
        return Some(format!(
            "{} is a symbolic link: a store is opened at its own directory, never through a link; give --db the store directory itself",
            db.display()
        ));
    }
    let parent = db.parent().filter(|p| !p.as_os_str().is_empty())?;
    if db.exists() || parent.is_dir() {
        return None;
    }
    let dir = crate::demo::shell_word(&parent.to_string_lossy());
    if std::fs::symlink_metadata(parent).is_ok() {
        return Some(format!(
            "{dir} is not a directory, so there is no store at {} and none can be made there; give --db a path in a directory",
            db.display()
        ));
    }
    Some(format!(
        "the directory {dir} does not exist, so there is no store at {} and none can be made there; create the directory first (`mkdir -p {dir}`) or give --db a path in an existing directory",
        db.display()
    ))
}

/// When `db` is a store `DIR/NAME` of a data directory that a live `mnemo serve --data DIR`
/// holds (`mnemo::DataServer::of`): how to reach the store through that server, as a
/// sentence. Nothing secret is in it.
pub fn data_server_hint(db: &std::path::Path) -> Option<String> {
    let mnemo::DataServer {
        name,
        dir,
        exists,
        server: file,
    } = mnemo::DataServer::of(db)?;
    let word = |p: &std::path::Path| crate::demo::shell_word(&p.to_string_lossy());
    let what = match exists {
        true => format!("is the store {name} of"),
        false => format!("would be the store {name} of"),
    };
    Some(format!(
        "the store at {} {what} the `mnemo serve --data {}` at {} (pid {}), which holds its data directory; reach it through that server instead of --db: the commands that read or change a store take `--connect {} --store {name} --token TOKEN` (the operator token is in {}, or use an agent token issued by that store), `mnemo store create {name} --data {}` makes it, and `mnemo ui --data {}` opens the viewer",
        db.display(),
        word(&dir),
        file.url,
        file.pid,
        file.url,
        word(&mnemo::ServerFile::path(&dir)),
        word(&dir),
        word(&dir),
    ))
}

/// How `remote` reaches the store `builder` opens: through the server --connect names, else as
/// the builder finds it (through the live server that holds it, else in this process).
pub fn connected(
    builder: mnemo::ClientBuilder,
    remote: &Remote,
) -> mnemo::Result<mnemo::ClientBuilder> {
    let Some(url) = &remote.connect else {
        return Ok(builder);
    };
    let client =
        remote_client(url, remote).map_err(|e| mnemo::Error::InvalidArgument(e.to_string()))?;
    Ok(builder.through(client))
}

/// `read` on the store at `db` as its owner reads it: through the server --connect names, or
/// the live one that holds it, else as a private read-only copy (which changes none of its
/// bytes). A server found by its file that is gone before it answered is left for the store,
/// which it then no longer holds: `read` runs again on a copy.
pub fn reading<T>(
    db: &std::path::Path,
    remote: &Remote,
    read: impl FnMut(&mnemo::MnemoClient) -> mnemo::Result<T>,
) -> mnemo::Result<T> {
    let builder = mnemo::MnemoClient::builder(db)
        .agent_id(mnemo::OPERATOR)
        .read_only();
    connected(builder, remote)?.open_and_run(read)
}

/// The store at `db` for an admin change, acting as `operator`: through the server --connect
/// names, or the live one that holds it, else open in this process; an existing store only,
/// so a mistyped `--db` is an error rather than a new store holding one grant.
fn administrator(
    db: &std::path::Path,
    remote: &Remote,
    operator: &str,
) -> mnemo::Result<mnemo::ClientBuilder> {
    let builder = mnemo::MnemoClient::builder(db)
        .agent_id(operator)
        .existing();
    if remote.connect.is_none() {
        held_by_a_data_server(db)?;
    }
    connected(builder, remote)
}

/// A change to the store at `db` is made through the server that holds it: refused here when
/// `db` is a store of a served data directory, whose server may open it at any moment.
pub fn held_by_a_data_server(db: &std::path::Path) -> mnemo::Result<()> {
    match data_server_hint(db) {
        Some(hint) => Err(mnemo::Error::InvalidArgument(hint)),
        None => Ok(()),
    }
}

/// `change` on [`administrator`]'s client, again on the store itself if a server found by its
/// file was gone before anything was sent to it.
pub fn administering<T>(
    db: &std::path::Path,
    remote: &Remote,
    operator: &str,
    change: impl FnMut(&mnemo::MnemoClient) -> mnemo::Result<T>,
) -> mnemo::Result<T> {
    administrator(db, remote, operator)?.open_and_run(change)
}

/// The client of the server at `url` that `remote` names: its token, and its store on a
/// `--data` server.
fn remote_client(url: &str, remote: &Remote) -> Result<mnemo::RemoteClient, Failure> {
    let token = remote.token.clone().ok_or(
        "--connect needs --token (or MNEMO_TOKEN): an agent token, or the operator's from the server file",
    )?;
    let client = mnemo::RemoteClient::new(url.to_string(), token);
    Ok(match &remote.store {
        Some(store) => client.in_store(store)?,
        None => client,
    })
}

/// `builder` starting a server for its store when none holds it: this binary, run with `serve
/// --db DIR` and `args`.
pub fn starting(
    builder: mnemo::ClientBuilder,
    args: Vec<OsString>,
) -> Result<mnemo::ClientBuilder, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the mnemo binary to start a server ({e})"))?;
    Ok(builder.start_server(exe, args))
}

/// The server connection of a `tool` or `mcp` session: to --connect's server, or to the
/// server of --db, started now (and again when it goes away) when none runs. `None` under
/// `--no-start`, or when no server could be started: that session opens the store itself.
pub fn session_link(
    session: &Session,
    remote: &Remote,
    start: &Start,
    agent: Option<String>,
    default_agent: &str,
) -> Result<Option<Link>, Failure> {
    if let Some(url) = &remote.connect {
        let client = remote_client(url, remote)?;
        return Ok(Some(Link::fixed(match agent {
            Some(agent) => client.with_agent(agent),
            None => client,
        })));
    }
    if let Some(why) = unservable(&session.db.db) {
        return Err(why.into());
    }
    if start.no_start {
        return Ok(None);
    }
    let builder = mnemo::MnemoClient::builder(&session.db.db)
        .agent_id(agent.unwrap_or_else(|| default_agent.to_string()));
    let builder = starting(builder, serve_args(session, start))?;
    let new = crate::session::no_store_yet(&session.db.db);
    match builder.link() {
        Ok(link) => {
            if new && !crate::session::no_store_yet(&session.db.db) {
                crate::session::say_created(&session.db.db);
            }
            Ok(Some(link))
        }
        Err(e) => {
            // Opening the store here says what stopped the server, or serves alone.
            crate::print::tell(format_args!(
                "mnemo: {e}; opening the store in this process instead"
            ));
            Ok(None)
        }
    }
}

/// The `serve` options that give a started server this session's answers.
fn serve_args(session: &Session, start: &Start) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--profile".into(),
        session.profile.name().into(),
        "--root".into(),
        session.root.clone().into(),
        "--durability".into(),
        session.durability.unwrap_or_default().name().into(),
        "--max-file-bytes".into(),
        session.max_file_bytes.to_string().into(),
        "--max-request-bytes".into(),
        session.max_request_bytes.to_string().into(),
        "--idle-exit".into(),
        start.idle_exit.to_string().into(),
    ];
    if let Some(chars) = session.view_max_chars {
        args.push("--view-max-chars".into());
        args.push(chars.to_string().into());
    }
    args
}

/// `mnemo link`: the live server of the store (or one started now with the session's
/// settings) as one JSON line, `{"url", "token", "pid"}`.
pub fn run_link(session: &Session, start: &Start) -> CliResult {
    let db = &session.db.db;
    if let Some(why) = unservable(db) {
        return Err(why.into());
    }
    let mut builder = mnemo::MnemoClient::builder(db);
    if !start.no_start {
        builder = starting(builder, serve_args(session, start))?;
    }
    let file = builder
        .server()?
        .ok_or_else(|| format!("no server holds the store at {}", db.display()))?;
    let line = serde_json::json!({"url": file.url, "token": file.token, "pid": file.pid});
    crate::print::say(line)?;
    Ok(ExitCode::SUCCESS)
}

/// `mnemo tool` through a server: every line is sent as it was read, and the server's
/// `tool_result` printed as it came (byte for byte what a local session prints). Exit 2 when
/// calls went unanswered, were refused, or the server's store failed on them.
pub fn run_tool(link: &Link, limit: u64) -> CliResult {
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let tally = link.answer_lines(&mut input, &mut std::io::stdout().lock(), limit)?;
    ended(tally)
}

/// How a session through a server whose calls came to `tally` exits: 2, saying why, when calls
/// went unanswered, were refused, or the server's store failed on them.
fn ended(tally: mnemo::LineTally) -> CliResult {
    if tally.unanswered > 0 {
        return Err(format!(
            "the server did not answer {} call(s) of this session (each got an error result that says it may or may not have been applied); check them with `mnemo log`",
            tally.unanswered
        )
        .into());
    }
    if let Some(why) = crate::session::store_failed(
        tally.store_failures,
        tally.store_damage,
        tally.erase_failures,
    ) {
        return Err(why.into());
    }
    if tally.unreached > 0 {
        return Err(format!(
            "no server could be reached for {} call(s) of this session (each got an error result; none was sent or applied): start the server, or check --connect",
            tally.unreached
        )
        .into());
    }
    if tally.refused > 0 {
        return Err(format!(
            "the server refused {} call(s) of this session (each got an error result with its reason; none was applied)",
            tally.refused
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `mnemo mcp` through a server: the same MCP session on stdin and stdout, every call and
/// resource read answered by the server. It ends as `mnemo tool` does (exit 2 when calls went
/// unanswered, were refused, or the server's store failed on them), as a session in this
/// process does when its store fails.
pub fn run_mcp(link: Link, session: &Session) -> CliResult {
    let root = mnemo::MemPath::root(&session.root).map_err(mnemo::Error::InvalidArgument)?;
    let link = std::sync::Arc::new(link);
    mnemo::MnemoMcpServer::over(
        std::sync::Arc::clone(&link) as _,
        root.to_string(),
        session.max_request_bytes,
    )
    .serve_stdio()?;
    ended(link.handled())
}
