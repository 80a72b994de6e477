//! The command line: every subcommand, its arguments and their parsing (clap).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use mnemo::tool::Limits;
use mnemo::{Access, Durability, Profile};

use crate::connect::{Remote, Start};

#[derive(Args, Clone)]
pub(crate) struct Db {
    /// The store directory.
    #[arg(long, env = "MNEMO_DB", default_value = "memory.mnemo.db")]
    pub(crate) db: PathBuf,
}

/// How a memory-tool session answers, for `tool` and `mcp` alike.
#[derive(Args)]
pub(crate) struct Session {
    #[command(flatten)]
    pub(crate) db: Db,
    /// Result-string profile: spec (the strings the memory tool's documentation gives),
    /// python-sdk or typescript-sdk (those of the Anthropic Python or TypeScript SDK's
    /// filesystem memory tool).
    #[arg(long, default_value = "spec", value_name = "spec|python-sdk|typescript-sdk", value_parser = parse_profile)]
    pub(crate) profile: Profile,
    /// The memory root.
    #[arg(long, default_value = "/memories")]
    pub(crate) root: String,
    /// When a write is acknowledged: fsync (survives power loss; the default), flush, buffered;
    /// replicated (in the fleet's object storage too: a `serve --fleet` node's default).
    #[arg(long, value_parser = parse_durability)]
    pub(crate) durability: Option<Durability>,
    /// Largest memory file, in bytes.
    #[arg(long, default_value_t = Limits::default().max_file_bytes)]
    pub(crate) max_file_bytes: u64,
    /// Cap a file view at this many characters and tell the model to page with view_range.
    #[arg(long)]
    pub(crate) view_max_chars: Option<u64>,
    /// Largest request (one JSON line or message), in bytes; a longer one is refused unread.
    #[arg(long, default_value_t = Limits::default().max_request_bytes)]
    pub(crate) max_request_bytes: u64,
}

#[derive(Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "one command line is parsed once per run; `serve`'s flags are most of it"
)]
pub(crate) enum Cmd {
    /// Run a scripted memory session on a fresh store, printing each call, then verify it.
    Demo {
        /// Where to create the store (must not exist or be empty); default: a new directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Answer memory-tool calls: one JSON object per stdin line, one tool_result line out.
    ///
    /// It sends every call to the server that holds the store, starting one in the background
    /// when none runs, so any number of processes share it.
    Tool(ToolArgs),
    /// Serve the memory tool to an MCP client on stdin/stdout.
    ///
    /// It answers through the server that holds the store, starting one in the background when
    /// none runs, so any number of MCP clients share it.
    Mcp(McpArgs),
    /// Print the URL and the operator token of the server that holds the store, starting one
    /// in the background when none runs (as `tool` does), as one JSON line
    /// `{"url", "token", "pid"}`: how a client in another language reaches a local store. The
    /// token is the operator's: keep it from logs.
    Link {
        #[command(flatten)]
        session: Session,
        #[command(flatten)]
        start: Start,
    },
    /// Open the auditor's window: print a one-time login link to the web viewer (`/ui/`) of
    /// the server that holds the store, starting one when none runs.
    ///
    /// The link's secret works once, within two minutes, and is exchanged for a session cookie
    /// of that server; it rides in the URL's fragment, which no request or log carries.
    Ui(UiArgs),
    /// Own the store and serve it over HTTP: the memory tool, MCP, and the read routes.
    Serve(ServeArgs),
    /// Replay the log and prove the chain, the index and every recorded answer.
    #[command(
        after_help = "Exit status: 0 the log is intact; 1 an integrity violation (the report names the first bad seq and what broke); 2 verify could not run (no store, an I/O error, a bad argument)."
    )]
    Verify(VerifyArgs),
    /// Ship the store's log to a replica in object storage (s3://bucket/prefix or
    /// file:///dir): sealed segments of events and a checkpoint of the head. Resumes where the
    /// replica ends, with no gap and no duplicate; refuses a replica of another history. Runs
    /// until stopped (Ctrl-C, any signal: the next run resumes), shipping whenever the store
    /// changes; --once ships up to the current head and exits. Reads the store as the read
    /// commands do (a private copy, whenever no process holds it), so a store a server holds is
    /// replicated by that server: `mnemo serve --replicate URL`.
    Replicate(ReplicateArgs),
    /// A fleet of `mnemo serve --fleet URL` nodes sharing a bucket: its nodes and stores.
    Fleet {
        #[command(subcommand)]
        command: FleetCmd,
    },
    /// The store owner's signing key for replica checkpoints.
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
    /// rebuilt, the whole store verified; nothing is left at --db if it fails.
    Restore(RestoreArgs),
    /// List the events: seq, time, agent, command, path, ok/error.
    Log(LogArgs),
    /// List the files under a directory, now or as they were after event SEQ (exit 2 when no
    /// file is there).
    Ls(LsArgs),
    /// Print a file's content, now or as it was after event SEQ.
    Cat(CatArgs),
    /// Write the memory tree as plain files (DIR/memories/...), now or after event SEQ; or with
    /// --format memory-stores, every memory and version as the memory-stores API's JSON
    /// (DIR/memory-store.json).
    Export(ExportArgs),
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
    Import(ImportArgs),
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
    History(HistoryArgs),
    /// One event whole: the call as sent, the answer the model saw (re-derived and checked
    /// against the log) and the change it made, as a unified diff
    Show(ShowArgs),
    /// Erase events' content from the store for real: their payloads go, the chain and the rest
    /// of history still verify, and a redaction event records who, when, why and which seqs.
    /// Also erases every event whose answer depended on what is erased (a view that showed it, an
    /// edit or rename of the file). A store a server holds is redacted by that server (its calls
    /// wait meanwhile). Exit 0 when done (or, with --dry-run, listed), 2 when refused: nothing
    /// matches, a text it could not erase, a bad argument, the store in use by another writer;
    /// a refused redaction changes nothing.
    Redact(RedactArgs),
    /// Put files back as they were after an earlier event: the files under --path (all of them
    /// without it) as after --to SEQ, or the files --agent A changed after --since SEQ. Appends
    /// a record of the revert (which seqs it undoes, by whom) and then ordinary memory-tool
    /// calls, each logged and re-derived by verify. Conflicts (other agents' writes it would
    /// throw away) are listed and refused unless --force. Exit 0 when done (or, with --dry-run,
    /// listed), 2 when refused; a refused revert writes nothing.
    Revert(RevertArgs),
    /// What changed in the files between two events: a unified diff per file
    Diff(DiffArgs),
    /// Where the content event SEQ wrote went (with --path, all the file held right after it):
    /// every later event whose answer quoted it, or whose write carried it on or took it out,
    /// by agent, re-derived by replaying the log
    Trace(TraceArgs),
}

/// `mnemo tool`'s arguments.
#[derive(Args)]
pub(crate) struct ToolArgs {
    /// The agent id calls are recorded under [default: cli; with --connect, the token's].
    #[arg(long)]
    pub(crate) agent: Option<String>,
    #[command(flatten)]
    pub(crate) session: Session,
    #[command(flatten)]
    pub(crate) remote: Remote,
    #[command(flatten)]
    pub(crate) start: Start,
}

/// `mnemo mcp`'s arguments.
#[derive(Args)]
pub(crate) struct McpArgs {
    /// The agent id calls are recorded under [default: mcp; with --connect, the token's].
    #[arg(long)]
    pub(crate) agent: Option<String>,
    #[command(flatten)]
    pub(crate) session: Session,
    #[command(flatten)]
    pub(crate) remote: Remote,
    #[command(flatten)]
    pub(crate) start: Start,
}

/// `mnemo serve`'s arguments.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The default agent id calls are recorded under (the operator names another with the
    /// X-Mnemo-Agent header).
    #[arg(long, default_value = "serve")]
    pub(crate) agent: String,
    #[command(flatten)]
    pub(crate) session: Session,
    #[command(flatten)]
    pub(crate) flags: ServeFlags,
}

/// `mnemo verify`'s arguments.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also prove the log still holds this checkpoint: SEQ:HASH, as an earlier verify
    /// printed, or a checkpoint file (a replica's head object, kept by an auditor; checked
    /// against --key when given).
    #[arg(long, value_name = "SEQ:HASH|FILE")]
    pub(crate) expect: Option<String>,
    /// Verify the replica at URL (file:///dir) instead of a store: its segments are fetched
    /// into a private store, every record checked against the chain and the whole log
    /// replayed.
    #[arg(long, value_name = "URL", conflicts_with = "connect")]
    pub(crate) from: Option<String>,
    /// Accept the replica's head (--from) and the checkpoint file (--expect FILE) only if
    /// this verifier key (NAME+ID+KEY, as `mnemo key create` printed it) signed them.
    #[arg(long, value_name = "VKEY")]
    pub(crate) key: Option<String>,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo replicate`'s arguments.
#[derive(Args)]
pub(crate) struct ReplicateArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// The replica: s3://bucket/prefix (AWS_* variables) or file:///absolute/dir (created
    /// if missing).
    #[arg(long, value_name = "URL")]
    pub(crate) to: String,
    /// Ship up to the current head and exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Without --once: look for changes this often, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        conflicts_with = "once"
    )]
    pub(crate) interval: f64,
}

/// `mnemo restore`'s arguments.
#[derive(Args)]
pub(crate) struct RestoreArgs {
    /// The replica: file:///absolute/dir.
    #[arg(long, value_name = "URL")]
    pub(crate) from: String,
    /// The new store: a path that does not exist yet, or an empty directory.
    #[arg(long, value_name = "NEW")]
    pub(crate) db: PathBuf,
    /// Restore up to this event (default: the replica's head checkpoint).
    #[arg(long, value_name = "SEQ")]
    pub(crate) at: Option<u64>,
    /// Take the replica only if this verifier key (as `mnemo key create` printed it) signed
    /// its head, and restore no further than that head; the new store records the key.
    #[arg(long, value_name = "VKEY")]
    pub(crate) key: Option<String>,
}

/// `mnemo ls`'s arguments.
#[derive(Args)]
pub(crate) struct LsArgs {
    /// Directory to list; / lists every file in the store.
    #[arg(default_value = "/memories")]
    pub(crate) dir: String,
    #[command(flatten)]
    pub(crate) db: Db,
    /// Show the tree as it was after event SEQ (a seq `mnemo log` lists).
    #[arg(long, value_name = "SEQ")]
    pub(crate) at: Option<u64>,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo cat`'s arguments.
#[derive(Args)]
pub(crate) struct CatArgs {
    /// The file.
    pub(crate) path: String,
    #[command(flatten)]
    pub(crate) db: Db,
    /// Show the file as it was after event SEQ (a seq `mnemo log` lists).
    #[arg(long, value_name = "SEQ")]
    pub(crate) at: Option<u64>,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo history`'s arguments.
#[derive(Args)]
pub(crate) struct HistoryArgs {
    /// The file.
    pub(crate) path: String,
    #[command(flatten)]
    pub(crate) read: ReadLines,
}

/// `mnemo show`'s arguments.
#[derive(Args)]
pub(crate) struct ShowArgs {
    /// The event's seq (as `mnemo log` lists it).
    pub(crate) seq: u64,
    #[command(flatten)]
    pub(crate) db: Db,
    /// One JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo diff`'s arguments.
#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The tree after this event (0: the empty tree before the first).
    pub(crate) from: u64,
    /// The tree after this event.
    pub(crate) to: u64,
    /// Only files under this path.
    #[arg(default_value = "/memories")]
    pub(crate) path: String,
    #[command(flatten)]
    pub(crate) db: Db,
    /// One JSON object per file.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo trace`'s arguments: `show`'s (the event, the store, `--json`), and a file.
#[derive(Args)]
pub(crate) struct TraceArgs {
    #[command(flatten)]
    pub(crate) event: ShowArgs,
    /// Trace instead the whole content this file held right after event SEQ.
    #[arg(long, value_name = "PATH")]
    pub(crate) path: Option<String>,
}

/// `mnemo ui`'s arguments.
#[derive(Args)]
pub(crate) struct UiArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// The data directory of a running `mnemo serve --data DIR` instead of one store (it
    /// wins over --db, which MNEMO_DB may set).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: Option<PathBuf>,
    /// Open the link in the desktop's browser too (xdg-open, or open on macOS).
    #[arg(long)]
    pub(crate) open: bool,
    /// A server this starts exits this many seconds after its last request.
    #[arg(long = "idle-exit", value_name = "SECS", default_value_t = 900.0)]
    pub(crate) idle_exit: f64,
}

#[derive(Subcommand)]
pub(crate) enum AclCmd {
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
        read: ReadLines,
    },
}

/// Where `mnemo store` finds the stores.
#[derive(Args)]
pub(crate) struct DataPlace {
    /// The data directory: through the server that serves it if one runs, else directly.
    #[arg(long, value_name = "DIR", required_unless_present = "connect")]
    pub(crate) data: Option<PathBuf>,
    /// The `mnemo serve --data` server at this URL instead.
    #[arg(long, value_name = "URL", conflicts_with = "data", requires = "token")]
    pub(crate) connect: Option<String>,
    /// With --connect: the server's operator token (from DIR/mnemo-server.json).
    #[arg(long, value_name = "TOKEN", requires = "connect")]
    pub(crate) token: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum StoreCmd {
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

#[derive(Subcommand)]
pub(crate) enum FleetCmd {
    /// The fleet's nodes (alive or not, how long since each beat, how many stores each holds)
    /// and stores (the node holding each, its lease's epoch, its log's objects), read from the
    /// bucket.
    Status {
        /// The fleet's bucket, as its nodes were given it (s3://bucket/prefix or file:///dir).
        #[arg(long, value_name = "URL")]
        fleet: String,
        /// The nodes' --lease-ttl, in seconds: a node whose last beat is older is shown dead.
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        lease_ttl: f64,
        /// One JSON object: {"nodes": [...], "stores": [...]}.
        #[arg(long)]
        json: bool,
    },
    /// Sign, with the fleet's key, where each store's log written before the fleet had a key
    /// ends, so that nodes started with --signing-key take it: run once, while no node writes
    /// the stores (before starting the nodes with the key). A log with a signed object needs
    /// none.
    Adopt {
        /// The stores to adopt (default: every store of the fleet).
        stores: Vec<String>,
        /// The fleet's bucket, as its nodes were given it (s3://bucket/prefix or file:///dir).
        #[arg(long, value_name = "URL")]
        fleet: String,
        /// The fleet's key file (`mnemo key create --file FILE`).
        #[arg(long, value_name = "FILE")]
        signing_key: PathBuf,
    },
    /// Hand every store NODE holds to the fleet's other live nodes (each closed on NODE once
    /// its calls in flight have answered; requests meanwhile wait, then go to the new holder),
    /// and have NODE take no store from then on: before stopping it.
    Drain {
        /// The node's id, as `mnemo fleet status` lists it.
        node: String,
        /// The fleet's bucket, as its nodes were given it (s3://bucket/prefix or file:///dir).
        #[arg(long, value_name = "URL")]
        fleet: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum KeyCmd {
    /// Make the store's Ed25519 signing key (its secret kept beside the store, mode 0600) and
    /// print the verifier key to hand to whoever verifies a replica; from then on every
    /// checkpoint `mnemo replicate` publishes is signed. With --file, make a fleet's key
    /// instead. A key is never replaced.
    Create {
        #[command(flatten)]
        db: Db,
        /// The key's name (default: mnemo- and the store directory's name; mnemo-fleet with
        /// --file).
        #[arg(long)]
        name: Option<String>,
        /// Make a fleet's signing key in this new file (mode 0600) rather than a store's: every
        /// node is given it (`mnemo serve --fleet URL --signing-key FILE`) and signs the logs
        /// it writes with it.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(crate) enum ConfigCmd {
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
        read: ReadLines,
    },
}

#[derive(Subcommand)]
pub(crate) enum TokenCmd {
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
        read: ReadLines,
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

/// The store a read command reads, where, and whether it prints JSON lines.
#[derive(Args)]
pub(crate) struct ReadLines {
    #[command(flatten)]
    pub(crate) db: Db,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

impl ReadLines {
    /// `read` on the store, as the read commands read it ([`crate::connect::reading`]).
    pub(crate) fn read<T>(
        &self,
        read: impl FnMut(&mnemo::MnemoClient) -> mnemo::Result<T>,
    ) -> mnemo::Result<T> {
        crate::connect::reading(&self.db.db, &self.remote, read)
    }
}

/// Who an admin change is recorded under.
#[derive(Args)]
pub(crate) struct Operator {
    /// The operator the change is recorded under (whoever can open the store directory is the
    /// operator).
    #[arg(long = "as", default_value = mnemo::OPERATOR)]
    pub(crate) name: String,
}

/// Whose grant, on what, recorded by whom.
#[derive(Args)]
pub(crate) struct AclTarget {
    #[command(flatten)]
    pub(crate) db: Db,
    /// The agent id, or `*` for every agent.
    #[arg(long)]
    pub(crate) agent: String,
    /// The path prefix, such as /memories/agent-2 (or / for everything).
    #[arg(long)]
    pub(crate) prefix: String,
    /// The operator the change is recorded under.
    #[arg(long = "as", default_value = "cli")]
    pub(crate) operator: String,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

pub(crate) fn parse_access(s: &str) -> Result<Access, String> {
    Access::from_name(s).ok_or_else(|| format!("unknown access {s:?}; use read or read-write"))
}

pub(crate) fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::from_name(s)
        .ok_or_else(|| format!("unknown profile {s:?}; use spec, python-sdk or typescript-sdk"))
}

pub(crate) fn parse_durability(s: &str) -> Result<Durability, String> {
    Durability::from_name(s).ok_or_else(|| {
        format!("unknown durability {s:?}; use one of: fsync, flush, buffered, replicated")
    })
}

/// What `mnemo export` writes and `mnemo import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TransferFormat {
    /// Plain files, DIR/memories/..., as the SDK's filesystem tool keeps them.
    Files,
    /// DIR/memory-store.json: the memories and versions as the memory-stores API's objects.
    MemoryStores,
}

/// A path given on the command line (`/memories/notes.txt`), canonical.
pub(crate) fn path_arg(raw: &str) -> mnemo::Result<mnemo::MemPath> {
    mnemo::MemPath::root(raw).map_err(mnemo::Error::InvalidArgument)
}

/// `mnemo serve`'s flags beyond the session's: where and how it listens, its replicas, its data
/// directory and its bounds.
#[derive(Args, Clone, Debug)]
pub struct ServeFlags {
    /// The address to listen on; port 0 picks a free port (printed, and written to the
    /// server file: in the store directory, or in DIR with --data).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Allow a --listen address other than loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Another name the Host header may carry (host or host:port); repeatable.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Exit after this many seconds with no request in progress and no client attached.
    #[arg(long, value_name = "SECS")]
    pub idle_exit: Option<f64>,
    /// Ship the log to the replica at URL (s3://bucket/prefix or file:///dir) as it is
    /// written, from a thread of the server; `GET /v1/replication` says how far it is.
    #[arg(long, value_name = "URL")]
    pub replicate: Option<String>,
    /// With --replicate: the least time between shipments, in seconds (the lag's bound
    /// while the object store keeps up).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        requires = "replicate"
    )]
    pub replicate_interval: f64,
    /// Serve a read-only copy of the replica at URL, kept up to date from it: --db is
    /// restored from the replica if it is new, and must be a copy of it otherwise. Reads
    /// are answered; every request that would write is refused.
    #[arg(long, value_name = "URL", conflicts_with = "replicate")]
    pub follow: Option<String>,
    /// With --follow: look at the replica this often, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "follow")]
    pub follow_interval: f64,
    /// With --follow: take only heads this verifier key signed (as `mnemo key create`
    /// printed it). The store records it, so a later --follow without --key still checks.
    #[arg(long, value_name = "VKEY", requires = "follow")]
    pub key: Option<String>,
    /// Serve every store under DIR (each DIR/NAME a store of its own) instead of the one
    /// store --db names: the routes of a store are under /v1/stores/NAME/, and POST, GET
    /// /v1/stores and DELETE /v1/stores/NAME?confirm=NAME manage them.
    #[arg(long, value_name = "DIR", conflicts_with = "follow")]
    pub data: Option<PathBuf>,
    /// With --data: at most this many stores open at once (the least recently used idle
    /// one is closed to open another).
    #[arg(long, value_name = "N", default_value_t = 64, requires = "data")]
    pub max_open_stores: usize,
    /// Close a connection that has not sent a whole request head within this many seconds
    /// (an idle kept-alive connection too).
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub header_timeout: f64,
    /// Accept at most this many connections at once (more wait in the kernel's backlog).
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_connections: usize,
    /// At most this many requests of one principal in flight at once (the operator, one
    /// agent token's agent in its store, or every request without a token together); more
    /// get 503 with Retry-After (429 on the memory-stores API's routes). Default: a quarter
    /// of --max-connections.
    #[arg(long, value_name = "N")]
    pub max_requests_per_principal: Option<usize>,
    /// The seconds a request body may take before it must keep --min-body-rate.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub body_grace: f64,
    /// After --body-grace, a request body must come at this many bytes a second on average,
    /// or it is cut off with 408 and its connection closed (0: no minimum).
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    pub min_body_rate: u64,
    /// Hold at most this many bytes of request bodies at once (one principal at most half of
    /// it); a body that does not fit waits up to 2 s, then gets 503 with Retry-After.
    #[arg(long, value_name = "BYTES", default_value_t = 268_435_456)]
    pub max_body_memory: u64,
    /// With --data: close a store after this many seconds without a request.
    #[arg(long, value_name = "SECS", default_value_t = 300.0, requires = "data")]
    pub store_idle_close: f64,
    /// With --data: the memory-stores API creates at most this many memories in a store.
    #[arg(long, value_name = "N", default_value_t = 2000, requires = "data")]
    pub max_memories: usize,
    /// With --data: the memory-stores API refuses creates and updates in a store holding
    /// this many versions (deletes never are).
    #[arg(long, value_name = "N", default_value_t = 250_000, requires = "data")]
    pub max_versions: u64,
    /// Be a node of the fleet whose bucket is URL (s3://bucket/prefix, shared by every node;
    /// file:///dir for nodes on one machine): each store is served by the node holding its
    /// lease, any node forwards a request to it, every write is acknowledged once it is in
    /// the bucket, and a dead node's stores are taken over. --data DIR holds this node's
    /// copies.
    #[arg(
        long,
        value_name = "URL",
        requires = "data",
        conflicts_with_all = ["replicate", "follow"]
    )]
    pub fleet: Option<String>,
    /// With --fleet: this node's id, unique in the fleet (letters, digits, '-', '_', '.').
    /// Default: the --advertise URL's host and port.
    #[arg(long, value_name = "ID", requires = "fleet")]
    pub node_id: Option<String>,
    /// With --fleet: the URL the other nodes forward requests to this one at. Default:
    /// http:// and the --listen address (which must then name a port).
    #[arg(long, value_name = "URL", requires = "fleet")]
    pub advertise: Option<String>,
    /// With --fleet: seconds after a node's last heartbeat before the others take its
    /// stores over (it stops serving them 30% sooner).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, requires = "fleet")]
    pub lease_ttl: f64,
    /// With --fleet: the fleet's signing key (`mnemo key create --file FILE` made it; every
    /// node is given the same): this node signs the store logs it writes, and takes a store
    /// only if its log is signed by the key (a log written before the fleet had a key: once
    /// `mnemo fleet adopt` adopted it).
    #[arg(long, value_name = "FILE", requires = "fleet")]
    pub signing_key: Option<PathBuf>,
}

/// `mnemo redact`'s arguments.
#[derive(Args)]
pub(crate) struct RedactArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// Why, recorded in the redaction event (1 to 1024 bytes of printable text).
    #[arg(long)]
    pub(crate) reason: String,
    /// Erase event N (as `mnemo log` lists it); may be repeated.
    #[arg(long = "seq", value_name = "N")]
    pub(crate) seqs: Vec<u64>,
    /// Erase every event that named PATH or a path under it (a file's whole history,
    /// followed through renames; a directory's subtree); may be repeated.
    #[arg(long = "path", value_name = "PATH")]
    pub(crate) paths: Vec<String>,
    /// Erase every event whose input or answer contains STRING; may be repeated.
    #[arg(long = "text", value_name = "STRING")]
    pub(crate) texts: Vec<String>,
    /// List the seqs and paths that would be erased, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) operator: Operator,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo revert`'s arguments.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["to", "since"])))]
pub(crate) struct RevertArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// Put the files back as they were after event SEQ (as `mnemo ls --at SEQ` lists them).
    #[arg(long, value_name = "SEQ", conflicts_with_all = ["agent", "since"])]
    pub(crate) to: Option<u64>,
    /// Only the file or directory PATH (with --to): what is under it, nothing else.
    #[arg(long, value_name = "PATH", requires = "to")]
    pub(crate) path: Option<String>,
    /// Undo this agent's writes (with --since): the files it changed, and no other file.
    #[arg(long, value_name = "A", requires = "since")]
    pub(crate) agent: Option<String>,
    /// The event after which --agent's writes are undone.
    #[arg(long, value_name = "SEQ", requires = "agent")]
    pub(crate) since: Option<u64>,
    /// List the calls, the events they undo and the conflicts, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Revert even though other agents' writes would be thrown away (the conflicts listed).
    #[arg(long)]
    pub(crate) force: bool,
    /// Print the plan (or the revert made) as one JSON object; a plan refused for its conflicts
    /// is printed too, before the refusal (exit 2).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) operator: Operator,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo log`'s arguments.
#[derive(Args)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    pub(crate) db: Db,
    /// Only events of this agent.
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// Only events naming this path or a path under it.
    #[arg(long)]
    pub(crate) path: Option<String>,
    /// Start at this seq.
    #[arg(long, default_value_t = 1)]
    pub(crate) from: u64,
    /// At most this many events.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo export`'s arguments.
#[derive(Args)]
pub(crate) struct ExportArgs {
    /// A new or empty directory.
    pub(crate) dir: PathBuf,
    #[command(flatten)]
    pub(crate) db: Db,
    /// Export the tree as it was after event SEQ (a seq `mnemo log` lists).
    #[arg(long, value_name = "SEQ")]
    pub(crate) at: Option<u64>,
    /// files (DIR/memories/...) or memory-stores (DIR/memory-store.json).
    #[arg(long, value_enum, default_value = "files")]
    pub(crate) format: TransferFormat,
    /// With --format memory-stores: the memory tool's root the memories live under.
    #[arg(long, default_value = "/memories")]
    pub(crate) root: String,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// `mnemo import`'s arguments.
#[derive(Args)]
pub(crate) struct ImportArgs {
    /// The directory that holds memories/ (the SDK tool's base_path), or memory-store.json.
    pub(crate) dir: PathBuf,
    /// files (DIR/memories/...) or memory-stores (DIR/memory-store.json).
    #[arg(long, value_enum, default_value = "files")]
    pub(crate) format: TransferFormat,
    #[command(flatten)]
    pub(crate) db: Db,
    /// The agent the create calls are recorded under.
    #[arg(long, default_value = "import")]
    pub(crate) agent: String,
    /// The memory root to import into.
    #[arg(long, default_value = "/memories")]
    pub(crate) root: String,
}
