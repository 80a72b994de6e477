//! The server file: how local clients find the server that holds a store, and its credential.
//!
//! While `mnemo serve` runs it keeps [`SERVER_FILE`] in the store directory: JSON with the URL,
//! the address, the server's pid and the operator token. Only the directory's owner can read it
//! (mode 0600), so only that user's processes can act as the operator.
//!
//! It is written to a fresh temporary name opened with `O_CREAT | O_EXCL` (which never follows a
//! symlink, not even a dangling one) and renamed over [`SERVER_FILE`] (a rename replaces a
//! symlink planted there rather than writing through it), so a reader sees either no file or a
//! whole one. A file left by a server that died is stale: the new server holds the store's lock,
//! so no other server can be serving it, and it replaces the file. Clients tell a live file from a
//! stale one with [`ServerFile::is_live`]. On a clean exit the server removes the file, if it is
//! still its own.
//!
//! Clients find a server with [`live_server`], and start one with [`start_server`]: a detached
//! `mnemo serve` in a process group of its own, with no terminal (stdin, stdout and stderr on
//! `/dev/null`), that outlives the client and stops by `--idle-exit` once no client is attached.
//! When two clients start one at once, the store's lock picks the server: the other exits, and
//! both clients connect to the one whose server file appears. [`Link`] is a client's connection
//! that starts the server again when it goes away.

use std::ffi::OsString;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::remote::{RemoteClient, RemoteError, Told};
use crate::client::store_failures::Failure;
use crate::store::disk::DirId;

pub use crate::store::disk::SERVER_FILE;

/// The largest server file read: it holds a URL, an address, a pid and a token.
const SERVER_FILE_MAX: u64 = 64 * 1024;

pub use crate::client::remote::lane::identity_proof;

/// How long [`ServerFile::is_live`] waits for the server to accept a connection.
const CONNECT_WAIT: Duration = Duration::from_millis(500);

/// What the server file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFile {
    /// The base URL, such as `http://127.0.0.1:41234`.
    pub url: String,
    /// The address the server listens on.
    pub address: SocketAddr,
    /// The server's process id.
    pub pid: u32,
    /// The operator's bearer token.
    pub token: String,
    /// The name of the server's local socket (an abstract Unix socket, Linux only), where the
    /// memory tool's calls go without HTTP; none from a server without one (see
    /// `remote::lane`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
}

impl ServerFile {
    /// A client of this server acting as the operator, its memory calls on the local socket
    /// when the server has one (which proves again, on each new connection, that it serves the
    /// store at `store_dir`).
    pub fn client(&self, store_dir: &Path) -> RemoteClient {
        let client = RemoteClient::new(self.url.clone(), self.token.clone());
        match &self.socket {
            Some(name) => client.with_lane(name, store_dir),
            None => client,
        }
    }

    /// The server file of the store at `store_dir`.
    pub fn path(store_dir: &Path) -> PathBuf {
        store_dir.join(SERVER_FILE)
    }

    /// Reads the server file of the store at `store_dir`; `Ok(None)` when there is none. A file
    /// that is not a regular file, not owned by the store directory's owner, or open to other
    /// users is refused (see [`crate::store::disk::read_private`]): another local user could have
    /// planted it to receive the owner's calls and token.
    pub fn read(store_dir: &Path) -> std::io::Result<Option<ServerFile>> {
        let bytes = match crate::store::disk::read_private(store_dir, SERVER_FILE, SERVER_FILE_MAX)
        {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(crate::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None);
            }
            Err(e) => {
                let kind = match &e {
                    crate::Error::Io { source, .. } => source.kind(),
                    _ => std::io::ErrorKind::PermissionDenied,
                };
                return Err(std::io::Error::new(kind, e.to_string()));
            }
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the server file is not valid ({e})"),
            )
        })
    }

    /// Whether the server it names still runs: its process exists (where the OS shows it) and
    /// its address accepts a connection.
    pub fn is_live(&self) -> bool {
        let proc = Path::new("/proc");
        if proc.is_dir() && !proc.join(self.pid.to_string()).exists() {
            return false;
        }
        TcpStream::connect_timeout(&self.address, CONNECT_WAIT).is_ok()
    }

    /// Whether the server at this file's address proves that it holds the operator token of
    /// this file and serves the store directory `store_dir` itself (not a copy of it, which
    /// carries the original's server file), before anything secret is sent to it: the client
    /// sends a fresh random challenge, unauthenticated, to `GET /v1/identity`, and the answer
    /// must be [`identity_proof`] of it. A process that took over a dead server's pid and port
    /// knows no token; the original server of a copied store stats another directory.
    pub fn proves(&self, store_dir: &Path) -> bool {
        self.challenge(store_dir).unwrap_or(false)
    }

    /// [`ServerFile::proves`], telling a wrong or missing proof (`Ok(false)`) from a request
    /// that failed (`Err`: [`RemoteError::Unanswered`] for a process that took the challenge
    /// and did not answer within the answer wait).
    fn challenge(&self, store_dir: &Path) -> Result<bool, RemoteError> {
        let Some(challenge) = crate::client::remote::lane::new_challenge() else {
            return Ok(false);
        };
        let Ok(dir) = DirId::of(store_dir) else {
            return Ok(false);
        };
        let expected = identity_proof(&self.token, &challenge, dir);
        let answer = match RemoteClient::new(self.url.clone(), String::new()).identity(&challenge) {
            Ok(answer) => answer,
            Err(RemoteError::Refused { .. } | RemoteError::Protocol { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(blake3::Hash::from_hex(answer.trim()).is_ok_and(|h| h == expected))
    }

    /// Writes this as the server file of the store at `store_dir`, replacing any stale one (and
    /// any symlink planted at its name, which is not followed). Returns the file's path.
    pub fn publish(&self, store_dir: &Path) -> std::io::Result<PathBuf> {
        let target = ServerFile::path(store_dir);
        let temporary = store_dir.join(format!(".{SERVER_FILE}.{}.tmp", self.pid));
        // A temporary file a crashed start left behind; removing a symlink removes only the link.
        match std::fs::remove_file(&temporary) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        text.push(b'\n');
        let written = create_private(&temporary).and_then(|mut file| {
            file.write_all(&text)?;
            file.sync_all()
        });
        let renamed = written.and_then(|()| std::fs::rename(&temporary, &target));
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
        // The rename is durable once the directory is.
        if let Ok(dir) = std::fs::File::open(store_dir) {
            let _ = dir.sync_all();
        }
        Ok(target)
    }

    /// Removes the server file of the store at `store_dir` if it is still this one (a newer
    /// server's file is left alone).
    pub fn withdraw(&self, store_dir: &Path) -> std::io::Result<()> {
        match ServerFile::read(store_dir) {
            Ok(Some(current)) if current == *self => {
                std::fs::remove_file(ServerFile::path(store_dir))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The server that holds the store at `store_dir`, if its server file names a live one that
/// proves it serves this very store (see [`ServerFile::find`], which also tells a server that did
/// not answer the proof in time from none).
pub fn live_server(store_dir: &Path) -> Option<ServerFile> {
    ServerFile::find(store_dir).ok().flatten()
}

impl ServerFile {
    /// The server that holds the store (or the data directory) at `store_dir`: `Ok(Some)` for
    /// a live one that proved it serves this very directory ([`ServerFile::proves`]),
    /// `Ok(None)` when there is no server file, or it is not trusted, stale or names a process
    /// that cannot prove it, and [`RemoteError::Unproven`] when a live process at its address
    /// did not answer the proof within the answer wait (a stopped or overloaded server; nothing
    /// was sent to it).
    pub fn find(store_dir: &Path) -> Result<Option<ServerFile>, RemoteError> {
        let Some(file) = ServerFile::read(store_dir).ok().flatten() else {
            return Ok(None);
        };
        if !file.is_live() {
            return Ok(None);
        }
        match file.challenge(store_dir) {
            Ok(proven) => Ok(proven.then_some(file)),
            Err(RemoteError::Unanswered { url, waited_secs }) => {
                Err(RemoteError::Unproven { url, waited_secs })
            }
            Err(_) => Ok(None),
        }
    }
}

/// The `mnemo serve --data DIR` that serves the data directory a store path lies in
/// ([`DataServer::of`]): that server holds the store, and it is reached through it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataServer {
    /// The store's name in the directory.
    pub name: String,
    /// The data directory, whole.
    pub dir: PathBuf,
    /// Whether the store is there now (else it would be made there).
    pub exists: bool,
    /// The server file (in `dir`) of the server that serves it.
    pub server: ServerFile,
}

impl DataServer {
    /// When `db` is, or would be, the store `DIR/NAME` of a data directory that a live `mnemo
    /// serve --data DIR` serves (the server file in `DIR` names it, and it proves it serves
    /// `DIR`): that server. `db` is read as the directory it names (`.` included); a name that
    /// is no store name is no store of the directory.
    pub fn of(db: &Path) -> Option<DataServer> {
        let whole = std::fs::canonicalize(db)
            .or_else(|_| std::path::absolute(db))
            .ok()?;
        let name = whole.file_name()?.to_str()?;
        crate::store::data_dir::check_store_name(name).ok()?;
        let dir = whole.parent()?;
        Some(DataServer {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            exists: whole.is_dir(),
            server: live_server(dir)?,
        })
    }
}

/// How a client starts a server for a store none holds.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The `mnemo` binary.
    pub exe: PathBuf,
    /// The arguments after `serve --db DIR` (profile, root, limits, durability, idle exit).
    pub args: Vec<OsString>,
    /// How long to wait for a server file.
    pub wait: Duration,
}

/// How long a client waits for a server it saw fail to stop looking live (a killed process
/// closes its sockets within moments); one that still answers after this is taken as alive.
const DYING_WAIT: Duration = Duration::from_secs(2);

/// How long `start_server` waits by default: past the store's lock wait of a server that
/// loses a race, and an open that catches up a large index.
pub const START_WAIT: Duration = Duration::from_secs(30);

/// Starts `exe serve --db store_dir ARGS...` detached and returns the server file of the server
/// that then holds the store: this one, or the one another client started at the same time.
pub fn start_server(store_dir: &Path, launch: &Launch) -> std::io::Result<ServerFile> {
    let mut command = Command::new(&launch.exe);
    command
        .arg("serve")
        .arg("--db")
        .arg(store_dir)
        .args(&launch.args)
        .env_remove("MNEMO_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        // Its own process group: a Ctrl-C meant for the client's terminal does not stop it.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command.spawn().map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot start `{} serve` ({e}); start the server yourself with `mnemo serve --db {}`",
                launch.exe.display(),
                store_dir.display()
            ),
        )
    })?;
    let started = Instant::now();
    let mut exited = None;
    loop {
        if let Some(file) = live_server(store_dir) {
            if exited.is_none() {
                // Reap it when it exits, so it leaves no zombie behind a long-lived client.
                let _ = std::thread::Builder::new()
                    .name("mnemo-reap".into())
                    .spawn(move || child.wait());
            }
            return Ok(file);
        }
        if exited.is_none() {
            exited = child.try_wait()?.map(|status| (status, Instant::now()));
        }
        let gave_up = match exited {
            // A server that lost the race waits for the lock before it exits: give the winner
            // as long again to publish its file.
            Some((_, at)) => at.elapsed() > crate::store::log::LOCK_WAIT * 2,
            None => started.elapsed() > launch.wait,
        };
        if gave_up {
            let how = match exited {
                Some((status, _)) => format!("it exited ({status}) without serving"),
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    format!("no server file after {} s", launch.wait.as_secs())
                }
            };
            return Err(std::io::Error::other(format!(
                "started a server for {}, but {how}; run `mnemo serve --db {}` to see why (another process that is not a mnemo server may hold the store)",
                store_dir.display(),
                store_dir.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client's connection to the server of one store, through a [`RemoteClient`] that stays
/// attached ([`RemoteClient::attach`]). When it was opened with a `Launch`, a server that
/// went away is started again: a call that could not reach it is sent to the new one, and a call
/// cut off mid-way fails (it may or may not have been applied) while the next one reaches the
/// new server.
#[derive(Debug)]
pub struct Link {
    store_dir: PathBuf,
    launch: Option<Launch>,
    agent: Option<String>,
    current: Mutex<(RemoteClient, Arc<AtomicBool>)>,
    /// What the calls answered one at a time ([`Link::count`]) came to: an MCP session's.
    handled: Mutex<LineTally>,
}

impl Link {
    /// A link to `client`, which is never restarted (a server named by URL).
    pub fn fixed(client: RemoteClient) -> Link {
        let attached = client.attach();
        Link {
            store_dir: PathBuf::new(),
            launch: None,
            agent: client.agent_id().map(str::to_string),
            current: Mutex::new((client, attached)),
            handled: Mutex::default(),
        }
    }

    /// A link to the server of the store at `store_dir`, acting as `agent`: the live one, or
    /// one started with `launch`.
    pub fn to_store(
        store_dir: &Path,
        agent: Option<String>,
        launch: Launch,
    ) -> std::io::Result<Link> {
        let client = Link::reach(store_dir, agent.as_deref(), &launch, None)?;
        let attached = client.attach();
        Ok(Link {
            store_dir: store_dir.to_path_buf(),
            launch: Some(launch),
            agent,
            current: Mutex::new((client, attached)),
            handled: Mutex::default(),
        })
    }

    /// The client of the live server of the store, or of one started now; never of `failed`'s
    /// server, which is gone even if it still seems live for a moment (a killed process closes
    /// its sockets one by one while it dies), and which may hold the store's lock a while after
    /// it stopped taking calls (an idle exit closing the store): a new one is started once the
    /// lock is free, within the launch's wait.
    fn reach(
        store_dir: &Path,
        agent: Option<&str>,
        launch: &Launch,
        failed: Option<&RemoteClient>,
    ) -> std::io::Result<RemoteClient> {
        let started = Instant::now();
        let file = loop {
            let found =
                ServerFile::find(store_dir).map_err(|e| std::io::Error::other(e.to_string()))?;
            match found {
                Some(file) => {
                    let found = RemoteClient::new(file.url.clone(), file.token.clone());
                    let dying = failed.is_some_and(|failed| failed.same_server(&found));
                    if !dying || started.elapsed() > DYING_WAIT {
                        break file;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                // The server that went away may still be closing the store: one started
                // before it lets go of the lock would wait for it, give up and exit.
                None if failed.is_some()
                    && started.elapsed() < launch.wait
                    && matches!(
                        crate::store::log::Store::wait_until_closed(store_dir, Duration::ZERO),
                        Err(crate::Error::Locked { .. })
                    ) =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                None => break start_server(store_dir, launch)?,
            }
        };
        let client = file.client(store_dir);
        Ok(match agent {
            Some(agent) => client.with_agent(agent),
            None => client,
        })
    }

    /// The client in use now, and whether it is still attached.
    fn current(&self) -> (RemoteClient, bool) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (current.0.clone(), current.1.load(Ordering::SeqCst))
    }

    /// The client in use now.
    pub fn client(&self) -> RemoteClient {
        self.current().0
    }

    /// Runs `call` against the server, starting it again first when this client's attachment
    /// ended (the server went away), and again after each start while `call` could not reach
    /// the server (nothing was sent), within the launch's wait. Calls run concurrently; only a
    /// restart is serialized.
    pub fn call<T>(
        &self,
        call: impl Fn(&RemoteClient) -> Result<T, RemoteError>,
    ) -> Result<T, RemoteError> {
        let (mut client, attached) = self.current();
        if !attached {
            // Best effort: if no server can be started, the call below says it is unreachable.
            if let Ok(restarted) = self.restart(&client) {
                client = restarted;
            }
        }
        let Some(launch) = &self.launch else {
            return call(&client);
        };
        let deadline = Instant::now() + launch.wait;
        let mut answered = call(&client);
        // A call that could not reach its server was not sent: it goes to a server started in
        // its place, and again while each one it reaches is already gone (a server that idles
        // out as this call arrives), within the launch's wait. A call cut off mid-way is not
        // sent again; the next call reaches the new server.
        while let Err(e) = &answered {
            if !e.is_disconnected() {
                break;
            }
            let unreachable = e.is_unreachable();
            match self.restart(&client) {
                Ok(restarted) if unreachable && Instant::now() < deadline => {
                    client = restarted;
                    answered = call(&client);
                }
                _ => break,
            }
        }
        answered
    }

    /// The client of a live server in place of `failed`: the one another call already started,
    /// or one started now.
    fn restart(&self, failed: &RemoteClient) -> std::io::Result<RemoteClient> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(launch) = &self.launch else {
            return Ok(current.0.clone());
        };
        if !current.0.same_server(failed) && current.1.load(Ordering::SeqCst) {
            return Ok(current.0.clone());
        }
        let client = Link::reach(&self.store_dir, self.agent.as_deref(), launch, Some(failed))?;
        let attached = client.attach();
        *current = (client.clone(), attached);
        Ok(client)
    }
}

/// What a session of memory-tool lines answered through a [`Link`] came to
/// ([`Link::answer_lines`]): each call counted here got an error result that says which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineTally {
    /// Calls the server did not answer: each may or may not have been applied.
    pub unanswered: u64,
    /// Calls the server refused (4xx, or 503 when too busy): none was applied.
    pub refused: u64,
    /// Calls never sent, because no server could be reached: none was applied.
    pub unreached: u64,
    /// Calls the server answered with a store failure: its store failed while recording the
    /// call, or found stored bytes the answer needed damaged (see
    /// [`MnemoMemoryToolServer::store_failures`](crate::MnemoMemoryToolServer::store_failures)).
    pub store_failures: u64,
    /// Of those, the calls that found stored bytes damaged: nothing was applied for them.
    pub store_damage: u64,
    /// Of those, deletes under `delete = erase` answered as recorded whose erasure failed after
    /// (the server said so beside the answer).
    pub erase_failures: u64,
}

impl Link {
    /// Answers the memory tool's JSON lines (a `tool_use` block, or a bare input, per line)
    /// from `input` through the server, one `tool_result` line on `output` each, byte for byte
    /// what the server sent: `mnemo tool` through a server. A line over `limit` bytes is sent as
    /// its digest; a call the server did not carry out gets `unanswered`'s error result and
    /// is counted.
    pub fn answer_lines(
        &self,
        input: &mut impl std::io::BufRead,
        output: &mut impl Write,
        limit: u64,
    ) -> std::io::Result<LineTally> {
        use crate::model::tool::request::{Request, read_request, tool_use_id};
        let mut tally = LineTally::default();
        while let Some(request) = read_request(input, limit)? {
            let answer = self.call(|client| match &request {
                Request::Line(bytes) => client.memory_told(bytes),
                Request::TooLarge(digest) | Request::Stopped { digest, .. } => client
                    .oversized(digest)
                    .map(|body| Told { body, after: None }),
            });
            match answer {
                Ok(told) => {
                    tally.answered(Failure::said_by_bytes(&told.body));
                    tally.after(told.after.as_deref());
                    output.write_all(&told.body)?
                }
                Err(e) => {
                    tally.unanswered_by(&e);
                    let id = match &request {
                        Request::Line(bytes) => tool_use_id(bytes),
                        _ => None,
                    };
                    serde_json::to_writer(&mut *output, &unanswered(id.as_deref(), &e))?;
                }
            }
            output.write_all(b"\n")?;
            output.flush()?;
        }
        Ok(tally)
    }

    /// Counts a call answered one at a time (an MCP session's): `answer` is the server's
    /// `tool_result`, or why it gave none. Read back with [`Link::handled`].
    #[cfg(feature = "mcp")]
    pub(crate) fn count(&self, answer: Result<&(serde_json::Value, Option<String>), &RemoteError>) {
        let mut handled = self.handled.lock().unwrap_or_else(PoisonError::into_inner);
        match answer {
            Ok((result, after)) => {
                handled.answered(Failure::said_by(result));
                handled.after(after.as_deref());
            }
            Err(e) => handled.unanswered_by(e),
        }
    }

    /// Counts a read (an MCP resource read) the server did not answer with what was asked: one
    /// the store failed (500, said as it is) is a store failure, not a call that may or may not
    /// have been applied; any other as [`Link::count`] counts it.
    #[cfg(feature = "mcp")]
    pub(crate) fn count_read(&self, e: &RemoteError) {
        let mut handled = self.handled.lock().unwrap_or_else(PoisonError::into_inner);
        match e.status() {
            Some(500) => handled.store_failures += 1,
            _ => handled.unanswered_by(e),
        }
    }

    /// What the calls counted by [`Link::count`] came to: how a session of them should end.
    pub fn handled(&self) -> LineTally {
        *self.handled.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LineTally {
    /// Counts a call the server answered, whose result said `failure` (if it said one).
    fn answered(&mut self, failure: Option<Failure>) {
        match failure {
            Some(Failure::Damaged) => {
                self.store_failures += 1;
                self.store_damage += 1;
            }
            Some(Failure::Failed | Failure::Refused) => self.store_failures += 1,
            None => {}
        }
    }

    /// Counts and says what the server said failed after it answered a call (see
    /// [`Answered`](crate::client::store_failures::Answered)): a store failure, said here on
    /// stderr, where someone is watching (a server a client started has no stderr).
    fn after(&mut self, after: Option<&str>) {
        if let Some(after) = after {
            self.store_failures += 1;
            self.erase_failures += 1;
            eprintln!("mnemo: the server said: {after}");
        }
    }

    /// Counts a call the server did not answer: refused (4xx, or 503 when too busy) or not.
    fn unanswered_by(&mut self, e: &RemoteError) {
        match e.status() {
            Some(400..=499 | 503) => self.refused += 1,
            _ if e.is_unreachable() => self.unreached += 1,
            _ => self.unanswered += 1,
        }
    }
}

/// The `tool_result` for a call the server did not carry out: an error result that says what
/// is known. A definite refusal (the server answered 4xx, or 503 when it was too busy to take
/// the call) says the call was not applied and the server's reason, as a refusal is never
/// applied; any other failure (no answer within the wait, a connection that broke after the
/// request was sent, a 5xx from a failing store) says the call may or may not have been
/// applied, and to check and retry (the next call reaches a restarted server, or says why none
/// could be started). A server that could not be reached at all never got the call: it was not
/// applied, and the result says so.
///
/// A bare input (no `tool_use` block) has no id, and no event names it: its result's
/// `tool_use_id` is `mnemo-unrecorded` for a refusal, `mnemo-unconfirmed` otherwise (where a
/// recorded call's is `mnemo-{seq}`).
pub fn unanswered(tool_use_id: Option<&str>, error: &RemoteError) -> serde_json::Value {
    let refused = refusal(error);
    let id = match (tool_use_id, refused) {
        (Some(id), _) => id,
        (None, Some(_)) => UNRECORDED_ID,
        (None, None) => crate::model::tool::intake::UNCONFIRMED_ID,
    };
    let content = match refused {
        None if error.is_unreachable() => format!(
            "Error: The memory server could not be reached ({error}). This call was not sent, so it was not applied: retry it once the server runs."
        ),
        Some((status, reason)) => format!(
            "Error: The memory server refused this call (HTTP {status}: {reason}). It was not applied{}.",
            if status == 503 {
                "; retry it later"
            } else {
                ""
            }
        ),
        None => format!(
            "Error: The memory server did not answer this call ({error}). It may or may not have been applied: view the path to check, then retry the call."
        ),
    };
    serde_json::json!({
        "type": "tool_result",
        "tool_use_id": id,
        "content": content,
        "is_error": true,
    })
}

/// The `tool_use_id` of the result of a bare input the server refused: it was not recorded, so no
/// event's seq names it.
const UNRECORDED_ID: &str = "mnemo-unrecorded";

/// The status and reason of a server's definite refusal of a call, which it never applied: any
/// 4xx, or 503 (too busy to take it). `None` for an error that leaves the call's fate unknown.
pub(crate) fn refusal(error: &RemoteError) -> Option<(u16, &str)> {
    match error {
        RemoteError::Refused { status, reason, .. }
            if (400..500).contains(status) || *status == 503 =>
        {
            Some((*status, reason.as_str()))
        }
        _ => None,
    }
}

/// Creates `path`, which must not exist (a symlink there is not followed), readable and
/// writable by its owner only.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(pid: u32) -> ServerFile {
        ServerFile {
            url: "http://127.0.0.1:9".into(),
            address: "127.0.0.1:9".parse().expect("addr"),
            pid,
            token: "ab".repeat(32),
            socket: None,
        }
    }

    #[test]
    fn published_files_read_back_and_are_withdrawn_only_by_their_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(ServerFile::read(dir.path()).expect("read"), None);
        let ours = file(std::process::id());
        ours.publish(dir.path()).expect("publish");
        assert_eq!(
            ServerFile::read(dir.path()).expect("read"),
            Some(ours.clone())
        );
        file(1).withdraw(dir.path()).expect("withdraw");
        assert!(
            ServerFile::path(dir.path()).exists(),
            "another server's file stays"
        );
        ours.withdraw(dir.path()).expect("withdraw");
        assert!(!ServerFile::path(dir.path()).exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert!(names.is_empty(), "no temporary file is left: {names:?}");
    }

    #[test]
    fn a_path_in_a_directory_no_data_server_serves_has_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(DataServer::of(&dir.path().join("store")), None);
        // A server file in the directory that names no live server is no data server either.
        file(1).publish(dir.path()).expect("publish");
        assert_eq!(DataServer::of(&dir.path().join("store")), None);
        assert_eq!(DataServer::of(&dir.path().join("Not A Name")), None);
    }

    #[test]
    fn a_dead_address_is_not_live() {
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        assert!(!file(std::process::id()).is_live());
    }
}
