//! `mnemo`: the command-line face of the store. Every subcommand is a thin layer over library
//! calls; errors are printed once, and the exit code is 0 (ok), 1 (verify found a violation, or
//! import skipped entries) or 2 (could not run).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use connect::{Change, Read, Remote, Start};
use mnemo::cli_support::{Store, absolute_path, printable};
use mnemo::protocol::{EventChange, LoggedEvent, ShownEvent, VerifyReport};
use mnemo::tool::{Limits, Tree, format_size};
use mnemo::{
    Access, AdminCommand, Durability, Head, LogQuery, MemPath, MnemoClient, MnemoMemoryToolServer,
    Profile, Report, Seq,
};
use serde_json::json;

mod connect;
mod memory_store_file;
mod replication;
mod store_admin;

/// An event-sourced, verifiable memory store for Anthropic's memory tool.
#[derive(Parser)]
#[command(name = "mnemo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Clone)]
struct Db {
    /// The store directory.
    #[arg(long, env = "MNEMO_DB", default_value = "memory.mnemo.db")]
    db: PathBuf,
}

/// How a memory-tool session answers, for `tool` and `mcp` alike.
#[derive(Args)]
struct Session {
    #[command(flatten)]
    db: Db,
    /// Result-string profile: spec (the strings the memory tool's documentation gives) or
    /// python-sdk (those of the Anthropic Python SDK's filesystem memory tool).
    #[arg(long, default_value = "spec", value_name = "spec|python-sdk", value_parser = parse_profile)]
    profile: Profile,
    /// The memory root.
    #[arg(long, default_value = "/memories")]
    root: String,
    /// When a write is acknowledged: fsync (survives power loss), flush, buffered.
    #[arg(long, default_value = "fsync", value_parser = parse_durability)]
    durability: Durability,
    /// Largest memory file, in bytes.
    #[arg(long, default_value_t = mnemo::tool::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Cap a file view at this many characters and tell the model to page with view_range.
    #[arg(long)]
    view_max_chars: Option<u64>,
    /// Largest request (one JSON line or message), in bytes; a longer one is refused unread.
    #[arg(long, default_value_t = mnemo::tool::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: u64,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scripted memory session on a fresh store, printing each call, then verify it.
    Demo {
        /// Where to create the store (must not exist or be empty); default: a new directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Answer memory-tool calls: one JSON object per stdin line, one tool_result line out.
    ///
    /// Built with `--features serve`, it sends every call to the server that holds the store,
    /// starting one in the background when none runs, so any number of processes share it.
    Tool {
        /// The agent id calls are recorded under [default: cli; with --connect, the token's].
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        session: Session,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        start: Start,
    },
    /// Serve the memory tool to an MCP client on stdin/stdout (a build with `--features mcp`).
    ///
    /// Built with `--features serve`, it answers through the server that holds the store,
    /// starting one in the background when none runs, so any number of MCP clients share it.
    Mcp {
        /// The agent id calls are recorded under [default: mcp; with --connect, the token's].
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        session: Session,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        start: Start,
    },
    /// Own the store and serve it over HTTP: the memory tool, MCP, and the read routes (a build
    /// with `--features serve`).
    Serve {
        /// The default agent id calls are recorded under (the operator names another with the
        /// X-Mnemo-Agent header).
        #[arg(long, default_value = "serve")]
        agent: String,
        #[command(flatten)]
        session: Session,
        /// The address to listen on; port 0 picks a free port (printed, and written to the
        /// server file in the store directory).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Allow a --listen address other than loopback.
        #[arg(long)]
        allow_remote: bool,
        /// Another name the Host header may carry (host or host:port); repeatable.
        #[arg(long, value_name = "HOST")]
        allow_host: Vec<String>,
        /// Exit after this many seconds with no request in progress and no client attached.
        #[arg(long, value_name = "SECS")]
        idle_exit: Option<f64>,
        /// Ship the log to the replica at URL (s3://bucket/prefix or file:///dir) as it is
        /// written, from a thread of the server; `GET /v1/replication` says how far it is (a
        /// build with `--features serve,replicate`).
        #[arg(long, value_name = "URL")]
        replicate: Option<String>,
        /// With --replicate: the least time between shipments, in seconds (the lag's bound
        /// while the object store keeps up).
        #[arg(
            long,
            value_name = "SECS",
            default_value_t = 1.0,
            requires = "replicate"
        )]
        replicate_interval: f64,
        /// Serve a read-only copy of the replica at URL, kept up to date from it: --db is
        /// restored from the replica if it is new, and must be a copy of it otherwise. Reads
        /// are answered; every request that would write is refused (a build with `--features
        /// serve,replicate`).
        #[arg(long, value_name = "URL", conflicts_with = "replicate")]
        follow: Option<String>,
        /// With --follow: look at the replica this often, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "follow")]
        follow_interval: f64,
        /// With --follow: take only heads this verifier key signed (as `mnemo key create`
        /// printed it). The store records it, so a later --follow without --key still checks.
        #[arg(long, value_name = "VKEY", requires = "follow")]
        key: Option<String>,
        /// Serve every store under DIR (each DIR/NAME a store of its own) instead of the one
        /// store --db names: the routes of a store are under /v1/stores/NAME/, and POST, GET
        /// /v1/stores and DELETE /v1/stores/NAME?confirm=NAME manage them.
        #[arg(long, value_name = "DIR", conflicts_with = "follow")]
        data: Option<PathBuf>,
        /// With --data: at most this many stores open at once (the least recently used idle
        /// one is closed to open another).
        #[arg(long, value_name = "N", default_value_t = 64, requires = "data")]
        max_open_stores: usize,
        /// Close a connection that has not sent a whole request head within this many seconds
        /// (an idle kept-alive connection too).
        #[arg(long, value_name = "SECS", default_value_t = 30.0)]
        header_timeout: f64,
        /// Accept at most this many connections at once (more wait in the kernel's backlog).
        #[arg(long, value_name = "N", default_value_t = 512)]
        max_connections: usize,
        /// With --data: close a store after this many seconds without a request.
        #[arg(long, value_name = "SECS", default_value_t = 300.0, requires = "data")]
        store_idle_close: f64,
        /// With --data: the memory-stores API creates at most this many memories in a store.
        #[arg(long, value_name = "N", default_value_t = 2000, requires = "data")]
        max_memories: usize,
    },
    /// Replay the log and prove the chain, the index and every recorded answer.
    #[command(
        after_help = "Exit status: 0 the log is intact; 1 an integrity violation (the report names the first bad seq and what broke); 2 verify could not run (no store, an I/O error, a bad argument)."
    )]
    Verify {
        #[command(flatten)]
        db: Db,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also prove the log still holds this checkpoint: SEQ:HASH, as an earlier verify
        /// printed, or a checkpoint file (a replica's head object, kept by an auditor; checked
        /// against --key when given). A build with `--features replicate` reads files.
        #[arg(long, value_name = "SEQ:HASH|FILE")]
        expect: Option<String>,
        /// Verify the replica at URL (file:///dir) instead of a store: its segments are fetched
        /// into a private store, every record checked against the chain and the whole log
        /// replayed (a build with `--features replicate`).
        #[arg(long, value_name = "URL", conflicts_with = "connect")]
        from: Option<String>,
        /// Accept the replica's head (--from) and the checkpoint file (--expect FILE) only if
        /// this verifier key (NAME+ID+KEY, as `mnemo key create` printed it) signed them.
        #[arg(long, value_name = "VKEY")]
        key: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Ship the store's log to a replica in object storage (s3://bucket/prefix or
    /// file:///dir): sealed segments of events and a checkpoint of the head. Resumes where the
    /// replica ends, with no gap and no duplicate; refuses a replica of another history. Runs
    /// until stopped (Ctrl-C, any signal: the next run resumes), shipping whenever the store
    /// changes; --once ships up to the current head and exits. Reads the store as the read
    /// commands do (a private copy, whenever no process holds it), so a store a server holds is
    /// replicated by that server: `mnemo serve --replicate URL`. A build with `--features
    /// replicate`.
    Replicate {
        #[command(flatten)]
        db: Db,
        /// The replica: s3://bucket/prefix (AWS_* variables) or file:///absolute/dir (created
        /// if missing).
        #[arg(long, value_name = "URL")]
        to: String,
        /// Ship up to the current head and exit.
        #[arg(long)]
        once: bool,
        /// Without --once: look for changes this often, in seconds.
        #[arg(
            long,
            value_name = "SECS",
            default_value_t = 1.0,
            conflicts_with = "once"
        )]
        interval: f64,
    },
    /// The store owner's signing key for replica checkpoints (a build with `--features
    /// replicate`).
    Key {
        #[command(subcommand)]
        command: KeyCmd,
    },
    /// The stores of a data directory (`mnemo serve --data DIR`): create, list or delete one,
    /// through the server that serves it, else on the directory itself.
    Store {
        #[command(subcommand)]
        command: StoreCmd,
    },
    /// Rebuild a store from a replica: every record re-checked against the chain, the index
    /// rebuilt, the whole store verified; nothing is left at --db if it fails. A build with
    /// `--features replicate`.
    Restore {
        /// The replica: file:///absolute/dir.
        #[arg(long, value_name = "URL")]
        from: String,
        /// The new store: a path that does not exist yet, or an empty directory.
        #[arg(long, value_name = "NEW")]
        db: PathBuf,
        /// Restore up to this event (default: the replica's head checkpoint).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Take the replica only if this verifier key (as `mnemo key create` printed it) signed
        /// its head, and restore no further than that head; the new store records the key.
        #[arg(long, value_name = "VKEY")]
        key: Option<String>,
    },
    /// List the events: seq, time, agent, command, path, ok/error.
    Log {
        #[command(flatten)]
        db: Db,
        /// Only events of this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only events naming this path or a path under it.
        #[arg(long)]
        path: Option<String>,
        /// Start at this seq.
        #[arg(long, default_value_t = 1)]
        from: u64,
        /// At most this many events.
        #[arg(long)]
        limit: Option<usize>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the files under a directory, now or as they were after event SEQ (exit 2 when no
    /// file is there).
    Ls {
        /// Directory to list; / lists every file in the store.
        #[arg(default_value = "/memories")]
        dir: String,
        #[command(flatten)]
        db: Db,
        /// Show the tree as it was after event SEQ (a seq `mnemo log` lists).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print a file's content, now or as it was after event SEQ.
    Cat {
        /// The file.
        path: String,
        #[command(flatten)]
        db: Db,
        /// Show the file as it was after event SEQ (a seq `mnemo log` lists).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Write the memory tree as plain files (DIR/memories/...), now or after event SEQ; or with
    /// --format memory-stores, every memory and version as the memory-stores API's JSON
    /// (DIR/memory-store.json).
    Export {
        /// A new or empty directory.
        dir: PathBuf,
        #[command(flatten)]
        db: Db,
        /// Export the tree as it was after event SEQ (a seq `mnemo log` lists).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// files (DIR/memories/...) or memory-stores (DIR/memory-store.json).
        #[arg(long, value_enum, default_value = "files")]
        format: TransferFormat,
        /// With --format memory-stores: the memory tool's root the memories live under.
        #[arg(long, default_value = "/memories")]
        root: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print a shell completion script, such as `mnemo completions bash > /etc/bash_completion.d/mnemo`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or with --out write one page per command into a directory.
    Man {
        /// Write mnemo.1 and a page per subcommand (mnemo-ls.1, ...) into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Import the files an SDK filesystem tool left (DIR/memories/...) as logged create calls;
    /// or with --format memory-stores, a memory-stores export (DIR/memory-store.json) as the API's
    /// writes.
    Import {
        /// The directory that holds memories/ (the SDK tool's base_path), or memory-store.json.
        dir: PathBuf,
        /// files (DIR/memories/...) or memory-stores (DIR/memory-store.json).
        #[arg(long, value_enum, default_value = "files")]
        format: TransferFormat,
        #[command(flatten)]
        db: Db,
        /// The agent the create calls are recorded under.
        #[arg(long, default_value = "import")]
        agent: String,
        /// The memory root to import into.
        #[arg(long, default_value = "/memories")]
        root: String,
    },
    /// Who may read or write what: grants of (agent, path prefix, access), kept in the log.
    Acl {
        #[command(subcommand)]
        command: AclCmd,
    },
    /// Store settings, each an admin event: `delete erase` makes the memory tool's delete erase
    /// the files it deletes, with their whole history (a redaction each time).
    Config {
        #[command(subcommand)]
        command: ConfigCmd,
    },
    /// Agent tokens: bearer credentials for `mnemo serve`, each acting only as its agent.
    Token {
        #[command(subcommand)]
        command: TokenCmd,
    },
    /// Each file that lived at PATH, followed by identity through renames, with its events
    History {
        /// The file.
        path: String,
        #[command(flatten)]
        db: Db,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// One event whole: the call as sent, the answer the model saw (re-derived and checked
    /// against the log) and the change it made, as a unified diff
    Show {
        /// The event's seq (as `mnemo log` lists it).
        seq: u64,
        #[command(flatten)]
        db: Db,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// Erase events' content from the store for real: their payloads go, the chain and the rest
    /// of history still verify, and a redaction event records who, when, why and which seqs.
    /// Also erases every event whose answer depended on what is erased (a view that showed it, an
    /// edit or rename of the file). A store a server holds is redacted by that server (its calls
    /// wait meanwhile). Exit 0 when done (or, with --dry-run, listed), 2 when refused: nothing
    /// matches, a text it could not erase, a bad argument, the store in use by another writer;
    /// a refused redaction changes nothing.
    Redact {
        #[command(flatten)]
        db: Db,
        /// Why, recorded in the redaction event (1 to 1024 bytes of printable text).
        #[arg(long)]
        reason: String,
        /// Erase event N (as `mnemo log` lists it); may be repeated.
        #[arg(long = "seq", value_name = "N")]
        seqs: Vec<u64>,
        /// Erase every event that named PATH or a path under it (a file's whole history,
        /// followed through renames; a directory's subtree); may be repeated.
        #[arg(long = "path", value_name = "PATH")]
        paths: Vec<String>,
        /// Erase every event whose input or answer contains STRING; may be repeated.
        #[arg(long = "text", value_name = "STRING")]
        texts: Vec<String>,
        /// List the seqs and paths that would be erased, and change nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        operator: Operator,
        #[command(flatten)]
        remote: Remote,
    },
    /// What changed in the files between two events: a unified diff per file
    Diff {
        /// The tree after this event (0: the empty tree before the first).
        from: u64,
        /// The tree after this event.
        to: u64,
        /// Only files under this path.
        #[arg(default_value = "/memories")]
        path: String,
        #[command(flatten)]
        db: Db,
        /// One JSON object per file.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

#[derive(Subcommand)]
enum AclCmd {
    /// Give an agent (or `*`, every agent) access to a path prefix and everything under it.
    Grant {
        #[command(flatten)]
        target: AclTarget,
        /// read or read-write.
        #[arg(long, value_parser = parse_access)]
        access: Access,
    },
    /// Remove an agent's grant on exactly this prefix.
    Revoke {
        #[command(flatten)]
        target: AclTarget,
    },
    /// List the grants in force.
    List {
        #[command(flatten)]
        db: Db,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

/// Where `mnemo store` finds the stores.
#[derive(Args)]
struct DataPlace {
    /// The data directory: through the server that serves it if one runs, else directly.
    #[arg(long, value_name = "DIR", required_unless_present = "connect")]
    data: Option<PathBuf>,
    /// The `mnemo serve --data` server at this URL instead (a build with `--features serve`).
    #[arg(long, value_name = "URL", conflicts_with = "data", requires = "token")]
    connect: Option<String>,
    /// With --connect: the server's operator token (from DIR/mnemo-server.json).
    #[arg(long, value_name = "TOKEN", requires = "connect")]
    token: Option<String>,
}

#[derive(Subcommand)]
enum StoreCmd {
    /// Make the store NAME (`[a-z0-9][a-z0-9_-]{0,63}`).
    Create {
        name: String,
        #[command(flatten)]
        place: DataPlace,
    },
    /// The stores, one name a line (--json: `{"name", "open"}` a line).
    List {
        #[command(flatten)]
        place: DataPlace,
        #[arg(long)]
        json: bool,
    },
    /// Remove the store NAME, every memory and its whole log: asked with --confirm NAME.
    Delete {
        name: String,
        /// The store's name again.
        #[arg(long, value_name = "NAME")]
        confirm: Option<String>,
        #[command(flatten)]
        place: DataPlace,
    },
}

impl DataPlace {
    fn place(&self) -> store_admin::Place<'_> {
        store_admin::Place {
            data: self.data.as_deref(),
            connect: self.connect.as_deref(),
            token: self.token.as_deref(),
        }
    }
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Make the store's Ed25519 signing key (its secret kept beside the store, mode 0600) and
    /// print the verifier key to hand to whoever verifies a replica; from then on every
    /// checkpoint `mnemo replicate` publishes is signed. A key is never replaced.
    Create {
        #[command(flatten)]
        db: Db,
        /// The key's name (default: mnemo- and the store directory's name).
        #[arg(long)]
        name: Option<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Set a store setting. `delete erase`: the memory tool's delete erases the files it
    /// deletes, with their whole history, before it answers; `delete keep` (the default): it
    /// keeps their history, as every change does.
    Set {
        /// The setting: delete.
        #[arg(value_name = "NAME")]
        setting: String,
        /// Its value: keep or erase.
        value: String,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        operator: Operator,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the settings in force (`NAME = VALUE`).
    List {
        #[command(flatten)]
        db: Db,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

#[derive(Subcommand)]
enum TokenCmd {
    /// Make a token for an agent; it is printed once, as the last line of stdout.
    Create {
        #[command(flatten)]
        db: Db,
        /// The agent the token acts as.
        #[arg(long)]
        agent: String,
        /// A note for the operator, such as what the token is for.
        #[arg(long, default_value = "")]
        label: String,
        #[command(flatten)]
        operator: Operator,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the tokens: id, agent, label, when and by whom issued, revoked or not.
    List {
        #[command(flatten)]
        db: Db,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// Revoke a token: its bearer is refused from the next request on.
    Revoke {
        /// The token's id, as `mnemo token list` shows it.
        id: String,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        operator: Operator,
        #[command(flatten)]
        remote: Remote,
    },
}

/// Who an admin change is recorded under.
#[derive(Args)]
struct Operator {
    /// The operator the change is recorded under (whoever can open the store directory is the
    /// operator).
    #[arg(long = "as", default_value = mnemo::cli_support::OPERATOR)]
    name: String,
}

/// Whose grant, on what, recorded by whom.
#[derive(Args)]
struct AclTarget {
    #[command(flatten)]
    db: Db,
    /// The agent id, or `*` for every agent.
    #[arg(long)]
    agent: String,
    /// The path prefix, such as /memories/agent-2 (or / for everything).
    #[arg(long)]
    prefix: String,
    /// The operator the change is recorded under.
    #[arg(long = "as", default_value = "cli")]
    operator: String,
    #[command(flatten)]
    remote: Remote,
}

fn parse_access(s: &str) -> Result<Access, String> {
    Access::from_name(s).ok_or_else(|| format!("unknown access {s:?}; use read or read-write"))
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::from_name(s).ok_or_else(|| format!("unknown profile {s:?}; use spec or python-sdk"))
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    Durability::from_name(s)
        .ok_or_else(|| format!("unknown durability {s:?}; use one of: fsync, flush, buffered"))
}

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

fn run_completions(shell: clap_complete::Shell) -> CliResult {
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "mnemo", &mut std::io::stdout().lock());
    Ok(ExitCode::SUCCESS)
}

fn run_man(out: Option<&Path>) -> CliResult {
    let command = <Cli as clap::CommandFactory>::command();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .map_err(|e| format!("cannot write the man pages into {}: {e}", dir.display()))?;
            eprintln!("mnemo man: wrote the pages into {}", dir.display());
        }
        None => clap_mangen::Man::new(command).render(&mut std::io::stdout().lock())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The command line, parsed. An explicit `--db` wins over `MNEMO_URL` and `MNEMO_TOKEN` from
/// the environment (which are then not read, with a note on stderr); `--db` and `--connect`
/// both on the command line are refused.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let matches = match connect::env_gives_way(&matches) {
        Ok(false) => matches,
        Ok(true) => {
            eprintln!(
                "mnemo: --db names the store, so MNEMO_URL and MNEMO_TOKEN from the environment are not used (pass --connect to reach a server by URL)"
            );
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
#[cfg(feature = "serve")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What `mnemo export` writes and `mnemo import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum TransferFormat {
    /// Plain files, DIR/memories/..., as the SDK's filesystem tool keeps them.
    Files,
    /// DIR/memory-store.json: the memories and versions as the memory-stores API's objects.
    MemoryStores,
}

fn main() -> ExitCode {
    let cli = parse_cli();
    // What this process creates is its owner's alone: sled makes some files of a store (its
    // snapshots) with the umask, at moments of its own. Not for the commands whose output is
    // meant for others (man pages, completions, an export).
    if !matches!(
        cli.command,
        Cmd::Man { .. } | Cmd::Completions { .. } | Cmd::Export { .. }
    ) {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    }
    #[cfg(feature = "client")]
    if let Err(why) = mnemo::RemoteClient::answer_wait() {
        eprintln!("error: {why}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Cmd::Demo { db } => run_demo(db),
        Cmd::Completions { shell } => run_completions(shell),
        Cmd::Man { out } => run_man(out.as_deref()),
        Cmd::Tool {
            agent,
            session,
            remote,
            start,
        } => run_tool(session, agent, &remote, &start),
        Cmd::Mcp {
            agent,
            session,
            remote,
            start,
        } => run_mcp(session, agent, &remote, &start),
        Cmd::Serve {
            agent,
            session,
            listen,
            allow_remote,
            allow_host,
            idle_exit,
            replicate,
            replicate_interval,
            follow,
            follow_interval,
            key,
            data,
            max_open_stores,
            store_idle_close,
            max_memories,
            header_timeout,
            max_connections,
        } => run_serve(
            session,
            agent,
            Listen {
                listen,
                allow_remote,
                allow_host,
                idle_exit,
                replicate: replicate.map(|url| (url, replicate_interval)),
                follow: follow.map(|url| (url, follow_interval)),
                follow_key: key,
                data: data.map(|dir| (dir, max_open_stores, store_idle_close, max_memories)),
                header_timeout,
                max_connections,
            },
        ),
        Cmd::Verify {
            db,
            json,
            expect,
            remote,
            from,
            key,
        } => verify_command(&db.db, json, expect, from, key, &remote),
        Cmd::Replicate {
            db,
            to,
            once,
            interval,
        } => replication::replicate(&db.db, &to, (!once).then_some(interval)),
        Cmd::Restore { from, db, at, key } => replication::restore(&from, &db, at, key.as_deref()),
        Cmd::Key {
            command: KeyCmd::Create { db, name },
        } => replication::key_create(&db.db, name.as_deref()),
        Cmd::Store { command } => match &command {
            StoreCmd::Create { name, place } => {
                store_admin::run(&store_admin::Action::Create(name), &place.place())
            }
            StoreCmd::List { place, json } => {
                store_admin::run(&store_admin::Action::List { json: *json }, &place.place())
            }
            StoreCmd::Delete {
                name,
                confirm,
                place,
            } => store_admin::run(
                &store_admin::Action::Delete {
                    name,
                    confirm: confirm.as_deref(),
                },
                &place.place(),
            ),
        },
        Cmd::Log {
            db,
            agent,
            path,
            from,
            limit,
            json,
            remote,
        } => run_log(
            &db.db,
            agent.as_deref(),
            path.as_deref(),
            (from, limit),
            json,
            &remote,
        ),
        Cmd::Ls {
            dir,
            db,
            at,
            remote,
        } => run_ls(&db.db, &dir, at, &remote),
        Cmd::Cat {
            path,
            db,
            at,
            remote,
        } => run_cat(&db.db, &path, at, &remote),
        Cmd::History {
            path,
            db,
            json,
            remote,
        } => run_history(&db.db, &path, json, &remote),
        Cmd::Show {
            seq,
            db,
            json,
            remote,
        } => run_show(&db.db, seq, json, &remote),
        Cmd::Diff {
            from,
            to,
            path,
            db,
            json,
            remote,
        } => run_diff(&db.db, from, to, &path, json, &remote),
        Cmd::Redact {
            db,
            reason,
            seqs,
            paths,
            texts,
            dry_run,
            operator,
            remote,
        } => {
            let selection = mnemo::Selection {
                seqs: seqs.into_iter().map(Seq).collect(),
                paths,
                texts,
            };
            run_redact(
                &db.db,
                &reason,
                &selection,
                dry_run,
                &operator.name,
                &remote,
            )
        }
        Cmd::Acl { command } => run_acl(command),
        Cmd::Token { command } => run_token(command),
        Cmd::Config { command } => run_config(command),
        Cmd::Export {
            dir,
            db,
            at,
            format: TransferFormat::Files,
            remote,
            ..
        } => run_export(&db.db, &dir, at, &remote),
        Cmd::Export {
            dir,
            db,
            at,
            format: TransferFormat::MemoryStores,
            root,
            remote,
        } => match (at, remote.connect.is_some()) {
            (Some(_), _) => Err("--at is for --format files; a memory-stores export holds every version".into()),
            (_, true) => Err("--format memory-stores exports a store at --db; for a store on a server, use its /v1/memory_stores routes".into()),
            (None, false) => memory_store_file::export(&db.db, &dir, &root),
        },
        Cmd::Import {
            dir,
            format: TransferFormat::Files,
            db,
            agent,
            root,
        } => run_import(&db.db, &dir, agent, root),
        Cmd::Import {
            dir,
            format: TransferFormat::MemoryStores,
            db,
            agent,
            root,
        } => memory_store_file::import(&db.db, &dir, agent, &root),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mnemo: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn demo_dir(db: Option<PathBuf>) -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(path) = db {
        let empty = match std::fs::read_dir(&path) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
        };
        if !empty {
            return Err(format!(
                "{} is not empty; the demo needs a fresh store, so pass a new path or leave out --db",
                path.display()
            )
            .into());
        }
        return Ok(path);
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    Ok(std::env::temp_dir().join(format!("mnemo-demo-{}-{stamp}.db", std::process::id())))
}

fn run_demo(db: Option<PathBuf>) -> CliResult {
    let scratch = db.is_none();
    let path = demo_dir(db)?;
    let client = MnemoClient::open(&path, "demo-agent")?;
    let server = MnemoMemoryToolServer::new(client.clone());
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Mnemo demo: a memory session on a fresh store at {}",
        path.display()
    )?;
    writeln!(out, "tool definition: {}", server.tool_schema())?;
    let script = [
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/projects/mnemo.md",
               "file_text": "# Mnemo\n- status: planning\n- owner: agent-1\n"}),
        json!({"command": "view", "path": "/memories/projects/mnemo.md"}),
        json!({"command": "str_replace", "path": "/memories/projects/mnemo.md",
               "old_str": "status: planning", "new_str": "status: building"}),
        json!({"command": "insert", "path": "/memories/projects/mnemo.md",
               "insert_line": 1, "insert_text": "- goal: verifiable agent memory\n"}),
        json!({"command": "rename", "old_path": "/memories/projects",
               "new_path": "/memories/done"}),
        json!({"command": "create", "path": "/memories/scratch.txt", "file_text": "temporary\n"}),
        json!({"command": "delete", "path": "/memories/scratch.txt"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "view", "path": "/memories/../etc/passwd"}),
    ];
    for (i, input) in script.iter().enumerate() {
        let block = json!({"type": "tool_use", "id": format!("toolu_demo_{:02}", i + 1),
                           "name": "memory", "input": input});
        let result = server.handle(&block);
        writeln!(out, "\n>>> {input}")?;
        let tag = if result.get("is_error").is_some() {
            "error"
        } else {
            "ok"
        };
        writeln!(out, "<<< [{tag}]")?;
        writeln!(out, "{}", result["content"].as_str().unwrap_or_default())?;
    }
    let report = client.verify()?;
    writeln!(out)?;
    print_report(&mut out, &path, &report.to_protocol(&path))?;
    let db = shell_word(&path.to_string_lossy());
    writeln!(out, "\nInspect it, one command a line:")?;
    for command in ["log", "history /memories/done/mnemo.md", "show 2", "verify"] {
        writeln!(out, "  mnemo {command} --db {db}")?;
    }
    if scratch {
        writeln!(
            out,
            "The store stays in the temporary directory until you remove it: rm -r {db}"
        )?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `word` as one word for a POSIX shell: as it is when it is made of characters no shell treats
/// specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Opens the store and builds the memory-tool server a session answers through.
fn open_session(
    session: Session,
    agent: String,
) -> Result<MnemoMemoryToolServer, Box<dyn std::error::Error>> {
    let db = &session.db.db;
    let new = std::fs::read_dir(db).map_or_else(
        |e| e.kind() == std::io::ErrorKind::NotFound,
        |mut entries| entries.next().is_none(),
    );
    let client = MnemoClient::builder(db)
        .agent_id(agent)
        .durability(session.durability)
        .open()?;
    if new {
        // A mistyped --db makes a store too: say where, so it is seen at once.
        eprintln!("mnemo: created a new store at {}", db.display());
    }
    Ok(MnemoMemoryToolServer::builder(client)
        .root(session.root)
        .profile(session.profile)
        .limits(Limits {
            max_file_bytes: session.max_file_bytes,
            view_max_chars: session.view_max_chars,
            max_request_bytes: session.max_request_bytes,
        })
        .build()?)
}

/// Exit 0, or exit 2 when the store failed during the session (each such call got an error).
fn end_session(server: &MnemoMemoryToolServer) -> CliResult {
    let failures = server.store_failures();
    if failures > 0 {
        return Err(format!(
            "the store failed on {failures} call(s) of this session (each got an error result); check the disk, then reopen the store, which recovers to the last event that reached the log"
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "mcp")]
fn run_mcp(session: Session, agent: Option<String>, remote: &Remote, start: &Start) -> CliResult {
    #[cfg(feature = "serve")]
    if let Some(link) = connect::session_link(&session, remote, start, agent.clone(), "mcp")? {
        return connect::run_mcp(link, &session);
    }
    #[cfg(not(feature = "serve"))]
    {
        let _ = start;
        connect::refuse_connect(remote)?;
    }
    let server = open_session(session, agent.unwrap_or_else(|| "mcp".into()))?;
    mnemo::MnemoMcpServer::new(server.clone()).serve_stdio()?;
    end_session(&server)
}

#[cfg(not(feature = "mcp"))]
fn run_mcp(
    _session: Session,
    _agent: Option<String>,
    _remote: &Remote,
    _start: &Start,
) -> CliResult {
    Err("this mnemo was built without MCP support; rebuild it with `cargo build --release --features mcp` (or, from a clone of the repository, install it with `cargo install --path . --features mcp`)".into())
}

/// Where and how long `mnemo serve` listens.
#[cfg_attr(not(feature = "serve"), expect(dead_code))]
struct Listen {
    listen: std::net::SocketAddr,
    allow_remote: bool,
    allow_host: Vec<String>,
    idle_exit: Option<f64>,
    /// The replica to ship to, and the least time between shipments in seconds.
    replicate: Option<(String, f64)>,
    /// The replica to follow, and how often to look at it in seconds.
    follow: Option<(String, f64)>,
    /// The verifier key the followed replica's heads must be signed by.
    follow_key: Option<String>,
    /// `--data`: the data directory, the most stores open at once, the idle close in seconds,
    /// and the most memories the memory-stores API creates in a store.
    data: Option<(PathBuf, usize, f64, usize)>,
    /// The deadline for a request's headers, in seconds.
    header_timeout: f64,
    /// The cap on open connections.
    max_connections: usize,
}

#[cfg(feature = "serve")]
fn run_serve(session: Session, agent: String, listen: Listen) -> CliResult {
    let idle_exit = listen
        .idle_exit
        .map(std::time::Duration::try_from_secs_f64)
        .transpose()
        .map_err(|_| "--idle-exit takes a number of seconds, such as 600 or 0.5")?;
    let header_timeout = std::time::Duration::try_from_secs_f64(listen.header_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--header-timeout takes a number of seconds above 0, such as 30 or 0.5")?;
    if listen.max_connections == 0 {
        return Err("--max-connections must be at least 1".into());
    }
    let mut options = mnemo::ServeOptions {
        connections: mnemo::Connections {
            header_timeout,
            max: listen.max_connections,
        },
        listen: listen.listen,
        allow_remote: listen.allow_remote,
        allow_hosts: listen.allow_host,
        idle_exit,
        replication: None,
        follow: None,
    };
    options.check()?;
    if let Some((dir, max_open_stores, idle_close, max_memories)) = listen.data {
        let data = DataServer {
            max_open_stores,
            idle_close,
            max_memories,
            replicate: listen.replicate,
        };
        return run_data_server(&dir, session, agent, options, data);
    }
    let db = &session.db.db;
    replication::check_serve(
        db,
        listen.replicate.as_ref().map(|(u, i)| (u.as_str(), *i)),
        listen.follow.as_ref().map(|(u, i)| (u.as_str(), *i)),
    )?;
    // A follower is restored from its replica first if it is new.
    if let Some((url, _)) = &listen.follow {
        replication::prepare_follower(&session.db.db, url, listen.follow_key.as_deref())?;
    }
    let server = open_session(session, agent)?;
    // The replication runs beside the server, on the store the server holds, and ships what
    // is left once the server has stopped.
    let replication = match &listen.replicate {
        Some((url, interval)) => {
            let started = replication::start(server.client(), url, *interval)?;
            options.replication = Some(started.view());
            Some(started)
        }
        None => None,
    };
    let following = match &listen.follow {
        Some((url, interval)) => {
            let started = replication::follow(server.client(), url, *interval)?;
            options.replication = Some(started.view());
            options.follow = Some(url.clone());
            Some(started)
        }
        None => None,
    };
    let stopped = mnemo::serve(server, options)?;
    if let Some(following) = following {
        following.stop();
    }
    if let Some(replication) = replication {
        replication.stop()?;
    }
    if stopped.store_failures > 0 {
        return Err(format!(
            "the store failed on {} call(s) while serving (each got an error result); check the disk, then restart the server, which recovers to the last event that reached the log",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `mnemo serve --data DIR`: every store under DIR, each opened with the session's settings.
/// What `--data` adds to a server's options.
#[cfg(feature = "serve")]
struct DataServer {
    /// At most this many stores open at once.
    max_open_stores: usize,
    /// Close a store after this many seconds without a request.
    idle_close: f64,
    /// The memory-stores API creates at most this many memories in a store.
    max_memories: usize,
    /// `--replicate URL` and its interval: each store shipped to `URL/NAME` while it is open.
    replicate: Option<(String, f64)>,
}

#[cfg(feature = "serve")]
fn run_data_server(
    dir: &Path,
    session: Session,
    agent: String,
    options: mnemo::ServeOptions,
    data: DataServer,
) -> CliResult {
    let DataServer {
        max_open_stores,
        idle_close,
        max_memories,
        replicate,
    } = data;
    replication::check_serve(dir, replicate.as_ref().map(|(u, i)| (u.as_str(), *i)), None)?;
    let store_idle_close = std::time::Duration::try_from_secs_f64(idle_close)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--store-idle-close takes a number of seconds above 0, such as 300 or 0.5")?;
    if max_open_stores == 0 {
        return Err("--max-open-stores must be at least 1".into());
    }
    let limits = Limits {
        max_file_bytes: session.max_file_bytes,
        view_max_chars: session.view_max_chars,
        max_request_bytes: session.max_request_bytes,
    };
    let (root, profile, durability) = (session.root, session.profile, session.durability);
    let open: mnemo::OpenStore = std::sync::Arc::new(move |path: &Path| {
        let client = MnemoClient::builder(path)
            .agent_id(agent.clone())
            .durability(durability)
            .open()
            .map_err(|e| e.to_string())?;
        let tool = MnemoMemoryToolServer::builder(client)
            .root(root.clone())
            .profile(profile)
            .limits(limits)
            .build()
            .map_err(|e| e.to_string())?;
        let Some((base, interval)) = &replicate else {
            return Ok(tool.into());
        };
        // Each store to a replica of its own under the URL, shipped while it is open and once
        // more as it closes.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let url = format!(
            "{}/{}",
            base.trim_end_matches('/'),
            name.unwrap_or_default()
        );
        let running =
            replication::start(tool.client(), &url, *interval).map_err(|e| e.to_string())?;
        Ok(mnemo::OpenedStore {
            replication: Some(running.view()),
            on_close: Some(Box::new(move || {
                if let Err(why) = running.stop() {
                    eprintln!("mnemo serve: {why}");
                }
            })),
            tool,
        })
    });
    let stopped = mnemo::serve_data(
        dir,
        open,
        options,
        mnemo::DataOptions {
            max_open_stores,
            store_idle_close,
            max_memories,
        },
    )?;
    if stopped.store_failures > 0 {
        return Err(format!(
            "the stores failed on {} call(s) while serving (each got an error result); check the disk, then restart the server",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "serve"))]
fn run_serve(_session: Session, _agent: String, _listen: Listen) -> CliResult {
    Err("this mnemo was built without the server; rebuild it with `cargo build --release --features serve` (or, from a clone of the repository, install it with `cargo install --path . --features serve`)".into())
}

/// `mnemo verify`: of the store, or of a replica (`--from`); `--expect` as SEQ:HASH or a
/// checkpoint file.
fn verify_command(
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
        .map(|e| replication::expected(&e, key.as_deref()))
        .transpose()?;
    match from {
        Some(url) => replication::verify(&url, json, expect.as_deref(), key.as_deref()),
        None => run_verify(db, json, expect.as_deref(), remote),
    }
}

fn run_tool(session: Session, agent: Option<String>, remote: &Remote, start: &Start) -> CliResult {
    #[cfg(feature = "serve")]
    if let Some(link) = connect::session_link(&session, remote, start, agent.clone(), "cli")? {
        return connect::run_tool(&link, session.max_request_bytes);
    }
    #[cfg(not(feature = "serve"))]
    {
        let _ = start;
        connect::refuse_connect(remote)?;
    }
    let server = open_session(session, agent.unwrap_or_else(|| "cli".into()))?;
    let limit = server.limits().max_request_bytes;
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    // Each line is read holding at most `limit` bytes of it; a longer one is only counted and
    // hashed up to its newline, answered with the size refusal, and the next line goes on.
    while let Some(request) = mnemo::tool::read_request(&mut input, limit)? {
        let result = server.handle_request(request);
        serde_json::to_writer(&mut out, &result)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    end_session(&server)
}

fn print_report(out: &mut impl Write, path: &Path, report: &VerifyReport) -> std::io::Result<()> {
    let note = if report.events == 0 && report.is_intact() {
        " (the log holds no events; nothing to prove)"
    } else {
        ""
    };
    writeln!(out, "mnemo verify: {}{note}", report.status.to_uppercase())?;
    for note in &report.notes {
        writeln!(out, "  WARNING: {note}")?;
        eprintln!("mnemo verify: WARNING: {note}");
    }
    writeln!(out, "  store:      {}", path.display())?;
    let of = if report.events < report.log_last {
        format!(
            " of the {} the log holds (verification stops at the first violation)",
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

fn run_verify(db: &Path, as_json: bool, expect: Option<&str>, remote: &Remote) -> CliResult {
    let expect = expect.map(Head::parse).transpose()?;
    let tty = std::io::stderr().is_terminal();
    let mut shown = false;
    let mut progress = |checked, head| {
        if tty {
            eprint!("\rverifying: {checked} / {head} events");
            shown = true;
        }
    };
    let report = match connect::reading(db, remote, |client| {
        client.verify_watching(expect, &mut progress)
    }) {
        Ok(report) => report,
        // sled refuses a log whose bytes are damaged: a finding (exit 1), not a failure to run.
        Err(e) if Report::is_damage(&e) => Report::unreadable(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    if shown {
        eprintln!();
    }
    print_verify(db, as_json, &report.to_protocol(db))
}

fn event_line(event: &LoggedEvent) -> String {
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
fn event_line_parts(
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

fn run_log(
    db: &Path,
    agent: Option<&str>,
    path: Option<&str>,
    (from, limit): (u64, Option<usize>),
    as_json: bool,
    remote: &Remote,
) -> CliResult {
    let query = LogQuery {
        agent: agent.map(str::to_string),
        path: path.map(absolute_path).transpose()?,
        from,
        limit,
    };
    let events = connect::reading(db, remote, |client| client.log(&query))?;
    let mut out = std::io::stdout().lock();
    for event in &events {
        if as_json {
            writeln!(out, "{}", serde_json::to_string(event)?)?;
        } else {
            writeln!(out, "{}", event_line(event))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_ls(db: &Path, dir: &str, at: Option<u64>, remote: &Remote) -> CliResult {
    // `/` too: every file the store holds, whatever root its calls ran under.
    let dir = MemPath::absolute(dir).map_err(mnemo::Error::InvalidArgument)?;
    let listing = connect::reading(db, remote, |client| client.listing(&dir, at.map(Seq)))?;
    if listing.files.is_empty() && dir.as_str() != "/" {
        return Err(no_dir(dir.as_str(), at).into());
    }
    let mut out = std::io::stdout().lock();
    for file in &listing.files {
        writeln!(out, "{:>7}  {}", format_size(file.bytes), file.path)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_cat(db: &Path, path: &str, at: Option<u64>, remote: &Remote) -> CliResult {
    let file = absolute_path(path)?;
    match connect::reading(db, remote, |client| client.content_at(&file, at.map(Seq)))? {
        Some(content) => {
            let mut out = std::io::stdout().lock();
            out.write_all(content.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        None => Err(no_file(&file.to_string(), at).into()),
    }
}

/// The error of `mnemo cat` for a file that is not there.
fn no_file(file: &str, at: Option<u64>) -> String {
    format!(
        "no file at {file}{}; list files with `mnemo ls`",
        at.map(|s| format!(" after seq {s}")).unwrap_or_default()
    )
}

/// The error of `mnemo ls` for a directory that holds no file (directories live only while a
/// file lives under them, so it is not there).
fn no_dir(dir: &str, at: Option<u64>) -> String {
    format!(
        "no file or directory at {dir}{}; `mnemo ls /` lists every file in the store",
        at.map(|s| format!(" after seq {s}")).unwrap_or_default()
    )
}

#[cfg(unix)]
fn run_export(db: &Path, dir: &Path, at: Option<u64>, remote: &Remote) -> CliResult {
    let everything = MemPath::absolute("/")?;
    let records = connect::reading(db, remote, |client| {
        client.tree_at(&everything, at.map(Seq))
    })?;
    export_records(&records, dir)
}

/// Writes `records` as plain files under `dir` and says how many.
#[cfg(unix)]
fn export_records(records: &[mnemo::MemoryRecord], dir: &Path) -> CliResult {
    let summary = mnemo::cli_support::export(records, dir)?;
    println!(
        "exported {} ({} bytes) to {}",
        count(summary.files, "file"),
        summary.bytes,
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Exit 0 when every entry was imported, 1 when some were skipped (each named on stderr with the
/// reason; the rest was imported), 2 when the import could not run.
#[cfg(unix)]
fn run_import(db: &Path, dir: &Path, agent: String, root: String) -> CliResult {
    let Some(fresh) = fresh_store_beside(db)? else {
        return import_into(db, dir, agent, root);
    };
    // A new store is built beside its path and renamed there once the import ran, so a failed
    // import (or one killed midway) leaves nothing at the path.
    let imported = import_into(&fresh, dir, agent, root);
    let placed = imported.and_then(|code| {
        std::fs::rename(&fresh, db)
            .and_then(|()| sync_parent(db))
            .map_err(|e| {
                format!(
                    "cannot move the imported store from {} to {}: {e}",
                    fresh.display(),
                    db.display()
                )
            })?;
        Ok(code)
    });
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    placed
}

/// Where an import into the store at `db` builds it first: `None` when a store (or anything
/// else, which opening refuses) is already at `db`, or its directory is not there to build in.
#[cfg(unix)]
fn fresh_store_beside(db: &Path) -> Result<Option<PathBuf>, Box<dyn std::error::Error>> {
    let unborn = match std::fs::symlink_metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("cannot read {}: {e}", db.display()).into()),
        Ok(meta) => meta.is_dir() && std::fs::read_dir(db)?.next().is_none(),
    };
    let (Some(name), Some(parent)) = (db.file_name(), db.parent()) else {
        return Ok(None);
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    if !unborn || !parent.is_dir() {
        return Ok(None);
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Ok(Some(parent.join(format!(
        ".{}.importing-{}-{stamp:08x}",
        name.to_string_lossy(),
        std::process::id()
    ))))
}

/// `fsync`s the directory that holds `path`, so a rename into it survives a power loss.
#[cfg(unix)]
fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => std::fs::File::open(parent)?.sync_all(),
        _ => std::fs::File::open(".")?.sync_all(),
    }
}

/// Imports `dir` into the store at `db` (see [`run_import`]); the store is closed on return.
#[cfg(unix)]
fn import_into(db: &Path, dir: &Path, agent: String, root: String) -> CliResult {
    let client = MnemoClient::open(db, agent)?;
    let server = MnemoMemoryToolServer::builder(client).root(root).build()?;
    let summary = mnemo::cli_support::import(&server, dir)?;
    for skipped in &summary.skipped {
        eprintln!(
            "mnemo: not imported: {}: {}",
            printable(&skipped.path.to_string_lossy()),
            skipped.reason
        );
    }
    println!(
        "imported {} ({} bytes) from {}; skipped {}",
        count(summary.imported, "file"),
        summary.bytes,
        dir.display(),
        summary.skipped.len()
    );
    if server.store_failures() > 0 {
        return Err(format!(
            "the store failed during the import ({} calls could not be recorded); check the store with `mnemo verify`",
            server.store_failures()
        )
        .into());
    }
    Ok(if summary.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(not(unix))]
fn run_export(_db: &Path, _dir: &Path, _at: Option<u64>, _remote: &Remote) -> CliResult {
    Err("mnemo export needs a Unix system (it walks directories with openat-style calls)".into())
}

#[cfg(not(unix))]
fn run_import(_db: &Path, _dir: &Path, _agent: String, _root: String) -> CliResult {
    Err("mnemo import needs a Unix system (it walks directories with openat-style calls)".into())
}

fn run_acl(command: AclCmd) -> CliResult {
    // The change as the store records it, and as the body of `POST /v1/acl`.
    let (db, operator, remote, body, change) = match command {
        AclCmd::List { db, json, remote } => {
            let read = Read::Rows {
                route: "/v1/acl",
                as_json: json,
                row: grant_row,
            };
            return connect::read(&db.db, &remote, &read, || {
                let store = Store::open_current_read_only(&db.db)?;
                let grants: Vec<_> = store
                    .current_index()?
                    .policy()?
                    .grants()
                    .iter()
                    .map(|g| g.to_json())
                    .collect();
                print_rows(&grants, json, grant_row)
            });
        }
        AclCmd::Grant { target, access } => (
            target.db,
            target.operator,
            target.remote,
            serde_json::json!({"action": "grant", "agent": &target.agent, "prefix": &target.prefix, "access": access.name()}),
            AdminCommand::Grant {
                agent: target.agent,
                prefix: target.prefix,
                access,
            },
        ),
        AclCmd::Revoke { target } => (
            target.db,
            target.operator,
            target.remote,
            serde_json::json!({"action": "revoke", "agent": &target.agent, "prefix": &target.prefix}),
            AdminCommand::Revoke {
                agent: target.agent,
                prefix: target.prefix,
            },
        ),
    };
    connect::change(&db.db, &remote, &operator, &Change::Acl(body), || {
        let client = open_for_admin(&db.db, &operator)?;
        print_receipt(&client.admin(change)?)
    })
}

fn run_config(command: ConfigCmd) -> CliResult {
    match command {
        ConfigCmd::List { db, json, remote } => {
            let read = Read::Rows {
                route: "/v1/config",
                as_json: json,
                row: setting_row,
            };
            connect::read(&db.db, &remote, &read, || {
                let store = Store::open_current_read_only(&db.db)?;
                let settings: Vec<_> = store
                    .current_index()?
                    .settings()?
                    .into_iter()
                    .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
                    .collect();
                print_rows(&settings, json, setting_row)
            })
        }
        ConfigCmd::Set {
            setting: name,
            value,
            db,
            operator,
            remote,
        } => {
            let body = serde_json::json!({"name": &name, "value": &value});
            connect::change(
                &db.db,
                &remote,
                &operator.name,
                &Change::Config(body),
                || {
                    let client = open_for_admin(&db.db, &operator.name)?;
                    print_receipt(&client.configure(&name, &value)?)
                },
            )
        }
    }
}

/// A setting as `mnemo config list` prints it: `NAME = VALUE`.
fn setting_row(setting: &serde_json::Value) -> Option<String> {
    Some(format!(
        "{} = {}",
        setting["name"].as_str()?,
        setting["value"].as_str()?
    ))
}

/// The store at `db` for an admin change, acting as `operator`: an existing one only, so a
/// mistyped `--db` is an error rather than a new store holding one grant.
fn open_for_admin(db: &Path, operator: &str) -> Result<MnemoClient, mnemo::Error> {
    Store::require(db)?;
    MnemoClient::open(db, operator)
}

/// An admin change's answer as the CLI prints it: `RESULT (seq N)`, or the refusal as an error.
fn print_receipt(receipt: &mnemo::Receipt) -> CliResult {
    if receipt.is_error {
        return Err(refused(receipt).into());
    }
    println!("{} (seq {})", receipt.text, receipt.seq);
    Ok(ExitCode::SUCCESS)
}

fn run_history(db: &Path, path: &str, as_json: bool, remote: &Remote) -> CliResult {
    let file = absolute_path(path)?;
    let events = connect::reading(db, remote, |client| client.history(&file))?;
    let mut out = std::io::stdout().lock();
    // The events come file by file: a header where the file changes.
    let mut last: Option<Option<u64>> = None;
    for event in &events {
        if as_json {
            writeln!(out, "{}", serde_json::to_string(event)?)?;
            continue;
        }
        if last != Some(event.file) {
            writeln!(
                out,
                "{}",
                history_header(event.file, &event.file_paths, file.as_str())
            )?;
            last = Some(event.file);
        }
        writeln!(out, "{}", event_line(&event.event))?;
    }
    if events.is_empty() && !as_json {
        writeln!(out, "no event names {file}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_redact(
    db: &Path,
    reason: &str,
    selection: &mnemo::Selection,
    dry_run: bool,
    operator: &str,
    remote: &Remote,
) -> CliResult {
    let mut body = selection.to_json();
    body["reason"] = reason.into();
    body["dry_run"] = dry_run.into();
    connect::change(db, remote, operator, &Change::Redact(body), || {
        let text = if dry_run {
            let store = Store::open_current_read_only(db)?;
            mnemo::cli_support::plan(&store, selection)?.summary()
        } else {
            mnemo::cli_support::redact(db, operator, reason, selection)?.summary()
        };
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })
}

fn run_show(db: &Path, seq: u64, as_json: bool, remote: &Remote) -> CliResult {
    let shown = connect::reading(db, remote, |client| client.show(Seq(seq)))?;
    print_shown(&shown, as_json)
}

/// Prints an event as `mnemo show` shows it; exit 1 when its answer is not the one the log
/// recorded.
fn print_shown(shown: &ShownEvent, as_json: bool) -> CliResult {
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
            "re-derived from the log; matches the recorded outcome"
        } else {
            "re-derived from the log; DOES NOT match the recorded outcome (run mnemo verify)"
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
fn print_change(out: &mut impl Write, change: &EventChange) -> std::io::Result<()> {
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

fn run_diff(
    db: &Path,
    from: u64,
    to: u64,
    path: &str,
    as_json: bool,
    remote: &Remote,
) -> CliResult {
    let dir = absolute_path(path)?;
    let files = connect::reading(db, remote, |client| client.diff(Seq(from), Seq(to), &dir))?;
    let mut out = std::io::stdout().lock();
    for file in &files {
        if as_json {
            writeln!(out, "{}", serde_json::to_string(file)?)?;
        } else {
            for line in shown_lines(&file.diff) {
                writeln!(out, "{}", printable(line))?;
            }
        }
    }
    if files.is_empty() && !as_json {
        writeln!(
            out,
            "no file under {dir} differs between event {from} and event {to}"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_token(command: TokenCmd) -> CliResult {
    match command {
        TokenCmd::Create {
            db,
            agent,
            label,
            operator,
            remote,
        } => {
            let change = Change::IssueToken {
                agent: agent.clone(),
                label: label.clone(),
            };
            connect::change(&db.db, &remote, &operator.name, &change, || {
                let client = open_for_admin(&db.db, &operator.name)?;
                let issued = mnemo::cli_support::issue(&client, &agent, &label)?;
                if issued.receipt.is_error {
                    return Err(refused(&issued.receipt).into());
                }
                eprintln!("{KEEP_TOKEN}");
                let mut out = std::io::stdout().lock();
                writeln!(out, "{} (seq {})", issued.receipt.text, issued.receipt.seq)?;
                writeln!(out, "{}", issued.token.text())?;
                out.flush()?;
                Ok(ExitCode::SUCCESS)
            })
        }
        TokenCmd::List { db, json, remote } => {
            let read = Read::Rows {
                route: "/v1/tokens",
                as_json: json,
                row: token_row,
            };
            connect::read(&db.db, &remote, &read, || {
                let store = Store::open_current_read_only(&db.db)?;
                let records = store.current_index()?.tokens()?;
                let tokens: Vec<_> = mnemo::cli_support::listed(&store, records)?
                    .iter()
                    .map(|t| t.to_json())
                    .collect();
                print_rows(&tokens, json, token_row)
            })
        }
        TokenCmd::Revoke {
            id,
            db,
            operator,
            remote,
        } => {
            let change = Change::RevokeToken { id: id.clone() };
            connect::change(&db.db, &remote, &operator.name, &change, || {
                let client = open_for_admin(&db.db, &operator.name)?;
                print_receipt(&mnemo::cli_support::revoke(&client, &id)?)
            })
        }
    }
}

/// Prints `rows` (as `--json` prints them, one per line; else each as `row` shows it).
fn print_rows(
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

/// A grant as `mnemo acl list` shows it, from its JSON.
fn grant_row(g: &serde_json::Value) -> Option<String> {
    Some(format!(
        "{:<24}  {:<10}  {}",
        printable(g["agent"].as_str()?),
        g["access"].as_str()?,
        printable(g["prefix"].as_str()?)
    ))
}

/// A token as `mnemo token list` shows it, from its JSON.
fn token_row(t: &serde_json::Value) -> Option<String> {
    let state = match &t["revoked"] {
        serde_json::Value::Null => "active".to_string(),
        v => format!(
            "revoked at seq {} by {}",
            v["seq"].as_u64()?,
            printable(v["by"].as_str()?)
        ),
    };
    Some(format!(
        "{}  {:<16}  issued seq {} {} by {}  {}  {}",
        t["id"].as_str()?,
        printable(t["agent"].as_str()?),
        t["issued_seq"].as_u64()?,
        t["issued_at"].as_str()?,
        printable(t["issued_by"].as_str()?),
        state,
        printable(t["label"].as_str()?)
    ))
}

/// The line `mnemo history` prints before the events of one file: `file N: PATH -> PATH ...`,
/// or `no file at PATH:` before the calls that found none.
fn history_header(file: Option<u64>, paths: &[String], asked: &str) -> String {
    match file {
        Some(n) => {
            let paths: Vec<String> = paths.iter().map(|p| printable(p).into_owned()).collect();
            format!("file {n}: {}", paths.join(" -> "))
        }
        None => format!("no file at {asked}:"),
    }
}

/// An admin call's refusal as the CLI reports it (after `mnemo: error: `): the answer without its
/// own `Error: ` prefix, and the seq it was logged as.
fn refused(receipt: &mnemo::Receipt) -> String {
    refused_text(&receipt.text, receipt.seq.0)
}

/// [`refused`] from the answer's text and seq (as a server sends them).
fn refused_text(text: &str, seq: u64) -> String {
    let text = text.strip_prefix("Error: ").unwrap_or(text);
    format!("{text} (refused; logged as seq {seq})")
}

/// What `mnemo token create` says on stderr before it prints the new token.
const KEEP_TOKEN: &str = "mnemo: keep this token now, it is not shown again; send it as `Authorization: Bearer TOKEN` to `mnemo serve` on this store";

/// `n` and `noun`, plural unless `n` is 1: `1 file`, `3 files`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The lines of `text` as `show` and `diff` print them: split at `\n` only, so a `\r` stays
/// on its line (and [`printable`] shows it), where `str::lines` would drop it.
fn shown_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
        .map(|line| line.strip_suffix('\n').unwrap_or(line))
}
