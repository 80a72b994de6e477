//! `MnemoClient`: an open store acting as one agent.
//!
//! Clones are cheap and share the store and its single writer; [`MnemoClient::with_agent`]
//! gives another agent id over the same store. The writer stops and the store closes when the last
//! clone is dropped.
//!
//! Opening a store that is already open in this process (a notebook cell run again, two parts
//! of one program) returns a handle to that same store and writer, found by the store's
//! canonical path ([`crate::store::registry`]); the store's lock only turns away other processes.
//!
//! **A served store.** With the `client` feature (which `serve` includes, and the Python package
//! builds with), opening a store that a live `mnemo serve` holds connects to that server instead,
//! found through its server file ([`crate::client::discovery`]) and with the operator credential
//! the file holds, acting as the client's agent. The client keeps the same API: the tool server
//! forwards each call to `POST /v1/memory` (refused, and recording nothing, when the server
//! answers with another root, profile, limits or durability than the tool server's), and records,
//! log, history, show, diff, verify, head and grants are answered by the server's routes. What
//! needs the store in this process ([`MnemoClient::events`], [`MnemoClient::token`], a
//! [`MnemoClient::call`] that is not a grant
//! or a revoke) is an [`Error::NotLocal`] that says so; a server that goes away is an
//! [`Error::Server`] with the reason. [`MnemoClient::server_of`] and
//! [`MnemoClient::connect`] give the bare HTTP client ([`crate::RemoteClient`]).

pub(crate) mod backend;
#[cfg(feature = "client")]
pub(crate) mod discovery;
pub(crate) mod reads;
pub(crate) mod redact;
#[cfg(feature = "client")]
pub(crate) mod remote;
pub(crate) mod revert;
pub(crate) mod store_failures;
#[cfg(feature = "client")]
pub(crate) mod stores;
pub(crate) mod token;
pub(crate) mod tool_server;
pub(crate) mod transfer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, PoisonError, RwLock, RwLockReadGuard};

use serde_json::Value;

use crate::audit::verify::Report;
#[cfg(feature = "client")]
use crate::client::discovery::{Launch, Link, START_WAIT, ServerFile, live_server, start_server};
#[cfg(feature = "client")]
use crate::client::remote::RemoteClient;
use crate::error::{Error, Result};
use crate::model::credential::TokenRecord;
use crate::model::event::{Body, Event, InputDigest, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::{Access, AdminCommand, DELETE_ERASES, DELETE_SETTING, Policy};
use crate::model::tool::{Limits, Profile, Tree};
use crate::store::log::{Durability, Head, Store};
use crate::store::projection::MemoryRecord;
use crate::store::registry::{Opened, Registry};
use crate::store::writer::{Receipt, Replicator, Writer};

/// The stores open in this process.
static OPEN: LazyLock<Registry<Inner>> = LazyLock::new(Registry::new);

struct Inner {
    /// The store directory, as it was opened.
    path: PathBuf,
    durability: Durability,
    /// Where its writes go before they are acknowledged, under [`Durability::Replicated`].
    replicate: Option<Replicator>,
    /// The store and its writer. Every call holds this shared while it runs; a redaction holds
    /// it alone, closes them, rewrites the store and opens it again ([`MnemoClient::closed_for`]).
    state: RwLock<State>,
}

/// A store open in this process, or why it is not.
enum State {
    Open {
        store: Store,
        writer: Writer,
    },
    /// Opening the store again after a redaction failed, for this reason; or it is being dropped.
    Closed(String),
}

/// The open store, held shared for as long as a call uses it.
pub(crate) struct Held<'a>(RwLockReadGuard<'a, State>);

impl Held<'_> {
    fn store(&self) -> &Store {
        match &*self.0 {
            State::Open { store, .. } => store,
            State::Closed(_) => unreachable!("a Held is made only of an open store"),
        }
    }

    fn writer(&self) -> &Writer {
        match &*self.0 {
            State::Open { writer, .. } => writer,
            State::Closed(_) => unreachable!("a Held is made only of an open store"),
        }
    }
}

/// The store under a client, held open (see [`MnemoClient::local_store`]).
pub(crate) enum StoreRef<'a> {
    /// A store open for writing, held shared.
    Held(Held<'a>),
    /// A private read-only copy.
    Copy(&'a Store),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        match self {
            StoreRef::Held(held) => held.store(),
            StoreRef::Copy(store) => store,
        }
    }
}

impl Inner {
    /// The open store, held shared until the result is dropped. Never taken twice by one thread
    /// (a redaction waiting for the lock would then block the second take, and with it the first).
    fn held(&self) -> Result<Held<'_>> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        match &*state {
            State::Open { .. } => Ok(Held(state)),
            State::Closed(why) => Err(Error::WriterStopped {
                path: self.path.clone(),
                cause: why.clone(),
            }),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let open = std::mem::replace(state, State::Closed("the store was closed".into()));
        close(open);
    }
}

/// Closes an open store: its writer first (which writes what it holds), then sled.
fn close(state: State) {
    let State::Open { store, writer } = state else {
        return;
    };
    // Every call has written its event before it returned, so nothing is pending here.
    // sled's own threads may hold the lock a moment after the close; `Store::open` waits.
    drop(writer);
    // Closing sled flushes it, and after a failed write (a full disk) that flush can wait for
    // ever on a write that will never complete. Close on another thread and stop waiting
    // after a while: the process can still exit, and the next open recovers.
    let (done, closed) = crossbeam_channel::bounded::<()>(1);
    let closer = std::thread::Builder::new()
        .name("mnemo-close".into())
        .spawn(move || {
            drop(store);
            let _ = done.send(());
        });
    if closer.is_ok() {
        let _ = closed.recv_timeout(CLOSE_WAIT);
    }
}

/// Waits up to `wait` until nothing holds the store at `path` open (see
/// [`Store::wait_until_closed`]): what a server does before it withdraws its server file.
#[cfg(feature = "serve")]
pub(crate) fn wait_until_closed(path: &Path, wait: std::time::Duration) -> Result<()> {
    Store::wait_until_closed(path, wait)
}

/// Opens the store at `path` with a writer, finishing any index update a crash interrupted.
fn open_state(
    path: &Path,
    durability: Durability,
    replicate: Option<&Replicator>,
) -> Result<State> {
    let store = Store::open(path)?;
    // What a redaction killed midway left beside the store (its copy, or after the exchange the
    // store as it was, with what it erased): gone at the next open rather than the next
    // redaction. A failure here is no reason to refuse the store; the next redaction retries it.
    let _ = crate::store::disk::remove_redaction_leftovers(path, None);
    let _ = crate::store::disk::remove_restore_leftovers(path);
    if let Some(why) = store.rolled_back()? {
        return Err(Error::corrupt(why));
    }
    store.catch_up()?;
    let writer = Writer::new(store.clone(), durability, replicate.cloned())?;
    Ok(State::Open { store, writer })
}

fn check_agent(agent: &str) -> Result<()> {
    if agent == crate::model::policy::ANY_AGENT {
        return Err(Error::InvalidArgument(
            "agent id \"*\" is reserved for grants to every agent; pick another id".into(),
        ));
    }
    crate::model::policy::check_agent_id(agent).map_err(Error::InvalidArgument)
}

/// How long dropping the last client waits for sled to close the store.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    path: PathBuf,
    agent: String,
    durability: Durability,
    read_only: bool,
    existing: bool,
    /// Where writes go before they are acknowledged (a fleet node's store).
    replicate: Option<Replicator>,
    /// The server to reach the store through, named by the caller.
    #[cfg(feature = "client")]
    through: Option<RemoteClient>,
    /// How to start a server for the store when none holds it.
    #[cfg(feature = "client")]
    launch: Option<Launch>,
}

impl ClientBuilder {
    /// The agent id the client acts as (default `agent`).
    pub fn agent_id(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self
    }

    /// How durable a write is before it is acknowledged (default [`Durability::Fsync`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Opens the store for reading only, changing none of its bytes (also on a read-only file
    /// system, or for a user who may only read it): through the `mnemo serve` that holds it
    /// (with the `client` feature), else as a private copy taken now (it costs a copy of the
    /// store). Reads see the store as it was when copied; every write is an
    /// [`Error::ReadOnly`]. A store that does not exist is an [`Error::NotFound`] (nothing is
    /// created). [`MnemoClient::verify`] proves the store as it rests; the other reads refuse a
    /// log behind the head it recorded ([`Error::Corrupt`]), which `verify` then shows.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Opens only a store that exists: a path that holds none is an [`Error::NotFound`] rather
    /// than a new store (so a mistyped path does not become a store holding one grant).
    pub fn existing(mut self) -> Self {
        self.existing = true;
        self
    }

    /// Reaches the store through the `mnemo serve` that `remote` reaches (its token, and its
    /// store on a `--data` server) rather than through the server its server file names, or the
    /// store itself: the path then only names the store in reports (such as `mnemo verify`'s),
    /// for a store the caller knows by its directory or its URL, and is not looked at, so
    /// [`existing`](Self::existing) and [`read_only`](Self::read_only) change nothing.
    #[cfg(feature = "client")]
    pub fn through(mut self, remote: RemoteClient) -> Self {
        self.through = Some(remote);
        self
    }

    /// The store directory this builder opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends every write to `replicate` too (a fleet node's store): under
    /// [`Durability::Replicated`], which this sets, a write is acknowledged only once it has it;
    /// under `fsync` or `flush` (set after this) it is shipped there behind the answers.
    #[cfg(feature = "serve")]
    pub(crate) fn replicate_to(mut self, replicate: Replicator) -> Self {
        self.replicate = Some(replicate);
        self.durability = Durability::Replicated;
        self
    }

    /// Starts a server for the store (`exe serve --db DIR ARGS...`, detached, with `args` such as
    /// `--idle-exit 30` so that it stops once idle) when no live server holds it, and reaches the store through
    /// that server: [`open`](Self::open) (for writing) then connects to it rather than opening
    /// the store in this process, [`server`](Self::server) names it and [`link`](Self::link)
    /// starts it again whenever it goes away. So the store is reached through the server that
    /// holds it, else through one started now; without this option, in this process.
    #[cfg(feature = "client")]
    pub fn start_server(
        mut self,
        exe: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Self {
        self.launch = Some(Launch {
            exe: exe.into(),
            args: args.into_iter().map(Into::into).collect(),
            wait: START_WAIT,
        });
        self
    }

    /// The server file of the live server that holds the store, else (with
    /// [`start_server`](Self::start_server)) of one started now; `None` when none holds it and
    /// none is to be started. A server that did not prove itself in time, or could not be
    /// started, is an error that says so.
    #[cfg(feature = "client")]
    pub fn server(&self) -> std::io::Result<Option<ServerFile>> {
        let found =
            ServerFile::find(&self.path).map_err(|e| std::io::Error::other(e.to_string()))?;
        match (found, &self.launch) {
            (Some(file), _) => Ok(Some(file)),
            (None, Some(launch)) => start_server(&self.path, launch).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// A [`Link`] to the store's server acting as this builder's agent (which that server
    /// checks): the server [`through`](Self::through) names, never restarted; else the live
    /// server that holds the store, or one [`start_server`](Self::start_server) starts now,
    /// started again whenever it goes away. Without either, a store no live server holds is an
    /// error ([`std::io::ErrorKind::NotFound`]).
    #[cfg(feature = "client")]
    pub fn link(&self) -> std::io::Result<Link> {
        if let Some(remote) = &self.through {
            return Ok(Link::fixed(remote.with_agent(self.agent.as_str())));
        }
        if let Some(launch) = &self.launch {
            return Link::to_store(&self.path, Some(self.agent.clone()), launch.clone());
        }
        match self.server()? {
            Some(file) => Ok(Link::fixed(
                file.client(&self.path).with_agent(self.agent.as_str()),
            )),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no server holds the store at {}; start one with `mnemo serve --db {}`",
                    self.path.display(),
                    self.path.display()
                ),
            )),
        }
    }

    /// Opens or creates the store, finishing any index update a crash interrupted. A store
    /// already open in this process is shared: the handle uses its store and writer, which must
    /// have been opened with the same durability. A store a live `mnemo serve` holds (with the
    /// `client` feature) is connected to, acting as this agent: see the module docs. With
    /// [`start_server`](Self::start_server), one no server holds gets one started, and is
    /// reached through it.
    #[cfg_attr(not(feature = "client"), expect(unused_mut))]
    pub fn open(mut self) -> Result<MnemoClient> {
        check_agent(&self.agent)?;
        #[cfg(feature = "client")]
        if let Some(server) = self.through.take() {
            return Ok(self.served(server));
        }
        if self.existing {
            Store::require(&self.path)?;
        }
        if self.read_only {
            return self.open_read_only();
        }
        #[cfg(feature = "client")]
        if self.launch.is_some() {
            let file = self.server().map_err(|e| Error::Server {
                reason: e.to_string(),
                unreachable: true,
                status: None,
            })?;
            if let Some(file) = file {
                return self.connect(file);
            }
        }
        let durability = self.durability;
        #[cfg(feature = "client")]
        let mut held = None;
        let opened = OPEN.open(&self.path, || {
            // Look for a server first: trying the store's lock waits `LOCK_WAIT`. One that is
            // there but does not prove itself in time (stopped, overloaded) is an error that
            // says so, rather than that wait.
            #[cfg(feature = "client")]
            if let Some(file) = ServerFile::find(&self.path)? {
                held = Some(file);
                return Err(Error::Locked {
                    path: self.path.clone(),
                });
            }
            self.open_store().map(Arc::new)
        });
        let inner = match opened {
            Ok(Opened::Fresh(inner)) => inner,
            Ok(Opened::Shared(inner)) if inner.durability == durability => inner,
            Ok(Opened::Shared(inner)) => {
                return Err(Error::InvalidArgument(format!(
                    "the store at {} is already open in this process with durability {}; open it with that durability to share it, or drop its other handles first",
                    self.path.display(),
                    inner.durability.name()
                )));
            }
            // A server that started after the look holds the lock: reach it.
            #[cfg(feature = "client")]
            Err(Error::Locked { path }) => {
                return match held.or_else(|| live_server(&path)) {
                    Some(file) => self.connect(file),
                    None => Err(Error::Locked { path }),
                };
            }
            Err(e) => return Err(e),
        };
        Ok(MnemoClient {
            backend: Backend::Local(inner),
            agent: self.agent.into(),
        })
    }

    /// [`open`](Self::open), then `run` on the client. When the client reached its store
    /// through the server its server file names and that server could not be reached (it was
    /// gone before anything was sent, so nothing was done), opens again (the store, which that
    /// server no longer holds, or a server started since) and runs `run` once more.
    pub fn open_and_run<T>(self, mut run: impl FnMut(&MnemoClient) -> Result<T>) -> Result<T> {
        let client = self.clone().open()?;
        match run(&client) {
            Err(Error::Server {
                unreachable: true, ..
            }) if self.found_by_file(&client) => run(&self.open()?),
            done => done,
        }
    }

    /// Whether `client`, opened by this builder, reached its store through the server its
    /// server file names (not one named by [`through`](Self::through)).
    fn found_by_file(&self, client: &MnemoClient) -> bool {
        #[cfg(feature = "client")]
        if self.through.is_some() {
            return false;
        }
        client.server_url().is_some()
    }

    /// A client of the server `file` names, acting as this builder's agent.
    #[cfg(feature = "client")]
    fn connect(self, file: ServerFile) -> Result<MnemoClient> {
        let remote = file.client(&self.path);
        Ok(self.served(remote))
    }

    /// A client whose every call goes to the server `remote` reaches, acting as this builder's
    /// agent, and keeping this process attached to that server.
    #[cfg(feature = "client")]
    fn served(self, remote: RemoteClient) -> MnemoClient {
        crate::client::remote::stay_attached(&remote);
        MnemoClient {
            backend: Backend::Served(Arc::new(Served {
                path: self.path,
                durability: self.durability,
                remote,
            })),
            agent: self.agent.into(),
        }
    }

    /// [`open`](Self::open) for [`read_only`](Self::read_only).
    fn open_read_only(self) -> Result<MnemoClient> {
        // A server that is there but does not prove itself in time (stopped, overloaded) is an
        // error that says so, rather than a wait for its lock.
        #[cfg(feature = "client")]
        if let Some(file) = ServerFile::find(&self.path)? {
            return self.connect(file);
        }
        let store = match Store::open_read_only(&self.path) {
            Ok(store) => store,
            // A server that started after the look holds the lock: reach it.
            #[cfg(feature = "client")]
            Err(Error::Locked { path }) => {
                return match live_server(&path) {
                    Some(file) => self.connect(file),
                    None => Err(Error::Locked { path }),
                };
            }
            Err(e) => return Err(e),
        };
        Ok(MnemoClient {
            backend: Backend::Copy(Arc::new(ReadCopy {
                path: self.path,
                durability: self.durability,
                store,
            })),
            agent: self.agent.into(),
        })
    }

    fn open_store(&self) -> Result<Inner> {
        let state = open_state(&self.path, self.durability, self.replicate.as_ref())?;
        let State::Open { store, .. } = &state else {
            unreachable!("open_state returns an open store");
        };
        Ok(Inner {
            path: store.path().to_path_buf(),
            durability: self.durability,
            replicate: self.replicate.clone(),
            state: RwLock::new(state),
        })
    }
}

/// Where a client's store is.
#[derive(Clone)]
enum Backend {
    /// Open in this process.
    Local(Arc<Inner>),
    /// A private read-only copy, open in this process.
    Copy(Arc<ReadCopy>),
    /// Held by a `mnemo serve`, reached over HTTP.
    #[cfg(feature = "client")]
    Served(Arc<Served>),
}

/// A store opened read-only: a private copy of it.
struct ReadCopy {
    /// The store directory, as it was opened (not the copy's).
    path: PathBuf,
    durability: Durability,
    store: Store,
}

impl ReadCopy {
    /// The copy, as the store is now: refused when its log is behind the head it recorded.
    fn current(&self) -> Result<&Store> {
        if let Some(why) = self.store.rolled_back()? {
            return Err(Error::corrupt(format!(
                "{why}; `mnemo verify` shows what is missing"
            )));
        }
        Ok(&self.store)
    }
}

/// A store a `mnemo serve` holds.
#[cfg(feature = "client")]
struct Served {
    path: PathBuf,
    durability: Durability,
    /// The server, with the operator credential of its server file (and no agent named).
    remote: RemoteClient,
}

/// An open Mnemo store acting as one agent. `Send + Sync`, cheap to clone.
#[derive(Clone)]
pub struct MnemoClient {
    backend: Backend,
    agent: Arc<str>,
}

impl std::fmt::Debug for MnemoClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = f.debug_struct("MnemoClient");
        shown
            .field("path", &self.path())
            .field("agent", &self.agent)
            .field("durability", &self.durability());
        if let Some(url) = self.server_url() {
            shown.field("server", &url);
        }
        shown.finish()
    }
}

impl MnemoClient {
    /// Opens or creates the store at `db_path`, acting as `agent_id`, with durable writes.
    pub fn open(db_path: impl AsRef<Path>, agent_id: impl Into<String>) -> Result<MnemoClient> {
        MnemoClient::builder(db_path).agent_id(agent_id).open()
    }

    /// Options for opening the store at `db_path`.
    pub fn builder(db_path: impl AsRef<Path>) -> ClientBuilder {
        ClientBuilder {
            path: db_path.as_ref().to_path_buf(),
            agent: "agent".into(),
            durability: Durability::default(),
            read_only: false,
            existing: false,
            replicate: None,
            #[cfg(feature = "client")]
            through: None,
            #[cfg(feature = "client")]
            launch: None,
        }
    }

    /// A client of the `mnemo serve` at `url` (such as `http://127.0.0.1:41234`), presenting the
    /// bearer `token`: the operator's, from the server file, or an agent's. The memory tool
    /// ([`RemoteClient::handle`](crate::RemoteClient::handle)), the agent's files, the log,
    /// verify and head are answered by the server.
    #[cfg(feature = "client")]
    pub fn connect(url: impl Into<String>, token: impl Into<String>) -> crate::RemoteClient {
        crate::RemoteClient::new(url, token)
    }

    /// A client of the store `store` of the `mnemo serve --data` at `url`, presenting the
    /// bearer `token` (the data directory's operator token, or an agent token that store
    /// issued): every request goes to `/v1/stores/STORE/...`. [`Error::InvalidArgument`] for a
    /// name that is not a store name.
    #[cfg(feature = "client")]
    pub fn connect_store(
        url: impl Into<String>,
        token: impl Into<String>,
        store: &str,
    ) -> Result<crate::RemoteClient> {
        crate::RemoteClient::new(url, token)
            .in_store(store)
            .map_err(Error::InvalidArgument)
    }

    /// A client of the `mnemo serve` that holds the store at `db_path`, found through its server
    /// file, with the operator token the file holds; [`Error::NotFound`] when no live server
    /// holds it (open it then with [`MnemoClient::open`]).
    #[cfg(feature = "client")]
    pub fn server_of(db_path: impl AsRef<Path>) -> Result<crate::RemoteClient> {
        let path = db_path.as_ref();
        let file = crate::client::discovery::live_server(path).ok_or_else(|| Error::NotFound {
            path: path.to_path_buf(),
        })?;
        Ok(file.client(path))
    }

    /// A client whose every call goes to the server `remote` reaches (its token, and its store
    /// on a `--data` server), acting as `agent_id`: the same API as a client that found its
    /// server through the store's server file. `name` is how the store is named in reports
    /// (such as `mnemo verify`'s), for a store the caller knows by its directory or its URL.
    #[cfg(feature = "client")]
    pub fn served_by(
        remote: crate::RemoteClient,
        name: impl AsRef<Path>,
        agent_id: impl Into<String>,
    ) -> Result<MnemoClient> {
        MnemoClient::builder(name)
            .agent_id(agent_id)
            .through(remote)
            .open()
    }

    /// Whether this client only reads: a store opened with [`ClientBuilder::read_only`] as a
    /// private copy.
    pub fn is_read_only(&self) -> bool {
        matches!(self.backend, Backend::Copy(_))
    }

    /// A client for another agent over the same store and writer (or the same server).
    pub fn with_agent(&self, agent_id: impl Into<String>) -> Result<MnemoClient> {
        let agent = agent_id.into();
        check_agent(&agent)?;
        Ok(MnemoClient {
            backend: self.backend.clone(),
            agent: agent.into(),
        })
    }

    /// The agent id this client acts as.
    pub fn agent_id(&self) -> &str {
        &self.agent
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        match &self.backend {
            Backend::Local(inner) => &inner.path,
            Backend::Copy(copy) => &copy.path,
            #[cfg(feature = "client")]
            Backend::Served(served) => &served.path,
        }
    }

    /// The durability mode writes are acknowledged under. For a served store, the one the
    /// client was opened with: the server refuses tool calls when its own differs.
    pub fn durability(&self) -> Durability {
        match &self.backend {
            Backend::Local(inner) => inner.durability,
            Backend::Copy(copy) => copy.durability,
            #[cfg(feature = "client")]
            Backend::Served(served) => served.durability,
        }
    }

    /// The URL of the `mnemo serve` this client reaches its store through, or `None` for a store
    /// open in this process.
    pub fn server_url(&self) -> Option<&str> {
        self.backend().server_url()
    }

    /// Whether the store open for writing in this process was stopped by a storage failure (it
    /// refuses every later call until reopened), or closed; `false` for any other backend.
    pub(crate) fn store_stopped(&self) -> bool {
        self.stopped_by().is_some()
    }

    /// Why the store open for writing in this process was stopped or closed, if it was (see
    /// [`store_stopped`](Self::store_stopped)). Never waits: while a redaction has the store
    /// closed to rewrite it, it is neither (a server's watch of its store runs on its runtime).
    pub(crate) fn stopped_by(&self) -> Option<String> {
        let Backend::Local(inner) = &self.backend else {
            return None;
        };
        let state = match inner.state.try_read() {
            Ok(state) => state,
            Err(std::sync::TryLockError::Poisoned(state)) => state.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        match &*state {
            State::Open { writer, .. } => writer.stopped_by(),
            State::Closed(why) => Some(why.clone()),
        }
    }

    /// The store open for writing in this process; for a served store, [`Error::NotLocal`]
    /// naming `what`; for a read-only copy, [`Error::ReadOnly`].
    fn local(&self, what: &str) -> Result<&Inner> {
        match &self.backend {
            Backend::Local(inner) => Ok(inner),
            Backend::Copy(copy) => Err(Error::ReadOnly {
                path: copy.path.clone(),
                what: what.to_string(),
            }),
            #[cfg(feature = "client")]
            Backend::Served(served) => Err(served.not_local(what)),
        }
    }

    /// The underlying store (reads only; every write goes through the writer), as it is now:
    /// a read-only copy whose log is behind the head it recorded is refused. A served store is
    /// not open in this process: [`Error::NotLocal`].
    pub(crate) fn local_store(&self) -> Result<StoreRef<'_>> {
        if let Backend::Copy(copy) = &self.backend {
            return Ok(StoreRef::Copy(copy.current()?));
        }
        Ok(StoreRef::Held(self.local("MnemoClient::store")?.held()?))
    }

    /// Closes the store open in this process (once the calls running have answered, holding
    /// off new ones), runs `closed` on its directory, and opens it again, for a redaction, which
    /// rewrites the store's files. Returns what `closed` returned; if the store cannot be opened
    /// again, every later call is an [`Error::WriterStopped`] that says why. A served store:
    /// [`Error::NotLocal`].
    pub(crate) fn closed_for<T>(
        &self,
        doing: &str,
        closed: impl FnOnce(&Path) -> Result<T>,
    ) -> Result<T> {
        let inner = self.local("a redaction")?;
        if inner.replicate.is_some() {
            return Err(Error::InvalidArgument(format!(
                "the store at {} is a fleet's (durability replicated), whose log in object storage a redaction cannot rewrite yet; nothing was erased",
                inner.path.display()
            )));
        }
        let mut state = inner.state.write().unwrap_or_else(PoisonError::into_inner);
        if let State::Closed(why) = &*state {
            return Err(Error::WriterStopped {
                path: inner.path.clone(),
                cause: why.clone(),
            });
        }
        close(std::mem::replace(
            &mut *state,
            State::Closed(doing.to_string()),
        ));
        let done = closed(&inner.path);
        match open_state(&inner.path, inner.durability, None) {
            Ok(open) => *state = open,
            Err(e) => {
                *state = State::Closed(format!("it could not be opened again ({doing}): {e}"));
                return Err(e);
            }
        }
        done
    }

    /// Records one call and returns its answer. This is what the tool server calls; use it
    /// directly to log calls that did not come as JSON. On a served store only a grant or a
    /// revoke can be sent this way (recorded as the server's operator, as `/v1/acl` records
    /// it); send memory-tool calls through the tool server.
    pub fn call(&self, tool_use_id: Option<String>, body: Body) -> Result<Receipt> {
        self.backend().call(self, tool_use_id, body)
    }

    /// Verifies the whole store, pausing writes while it runs.
    pub fn verify(&self) -> Result<Report> {
        self.verify_with(None)
    }

    /// [`verify`](Self::verify), also proving that the log still holds the checkpoint `expect`.
    pub fn verify_with(&self, expect: Option<Head>) -> Result<Report> {
        self.verify_watching(expect, &mut |_, _| {})
    }

    /// [`verify_with`](Self::verify_with), calling `progress(checked, head_seq)` every
    /// 10,000 events checked in this process (a server's verification reports none).
    pub fn verify_watching(
        &self,
        expect: Option<Head>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report> {
        self.backend().verify(self, expect, progress)
    }

    /// Writes the index changes the writer holds in memory (it writes them in batches), so that
    /// the stored index, [`Store::index`], reflects every call answered so far. For tools and
    /// tests that read the stored index directly. Nothing to do for a served store (the
    /// server's reads write them first).
    pub(crate) fn settle_index(&self) -> Result<()> {
        self.backend().settle_index(self)
    }

    /// The last event.
    pub fn head(&self) -> Result<Head> {
        self.backend().head(self)
    }

    /// The directory the store open in this process has open (see `Store::dir_id`). A served
    /// store is not open here: [`Error::NotLocal`]. Known without the writer, so a store that a
    /// storage failure stopped still proves which directory it holds: its server's clients
    /// reach it and get each call's error, rather than taking it for no server at all.
    #[cfg(feature = "serve")]
    pub(crate) fn store_dir_id(&self) -> Result<crate::store::disk::DirId> {
        Ok(self.local_store()?.dir_id())
    }

    /// Runs `read` on the store under the writer lock (writes wait meanwhile), so it sees every
    /// call answered so far in the stored index ([`Store::index`]) and none half-applied: for
    /// reads the methods here do not cover, such as a server's listing of the whole tree. A
    /// served store is not open in this process: [`Error::NotLocal`].
    pub(crate) fn read_local<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.read("MnemoClient::read_store", read)
    }

    /// Runs `read` under the writer lock, so it sees no call half-applied (on a read-only copy,
    /// which no writer holds, on the copy as it is now).
    fn read<T>(&self, what: &str, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        if let Backend::Copy(copy) = &self.backend {
            return read(copy.current()?);
        }
        self.local(what)?.held()?.writer().read(read)
    }

    /// Memory files carrying `tag` that this client's agent may read: `memorytool` lists every
    /// such file, `path:/memories/x` the one at that path; any other tag lists none.
    pub fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>> {
        self.backend().records_by_tag(self, tag)
    }

    /// The file at canonical path `path` (such as `/memories/notes.txt`), if there is one and
    /// this client's agent may read it.
    pub fn record(&self, path: &str) -> Result<Option<MemoryRecord>> {
        self.backend().record(self, path)
    }

    /// Records a policy change, attributed to this client's agent (on a served store, to the
    /// server's operator).
    pub fn admin(&self, command: AdminCommand) -> Result<Receipt> {
        self.call(None, Body::Admin(command))
    }

    /// Gives `agent` (or `*`) `access` on `prefix` and everything under it.
    pub fn grant(&self, agent: &str, prefix: &str, access: Access) -> Result<Receipt> {
        self.admin(AdminCommand::Grant {
            agent: agent.into(),
            prefix: prefix.into(),
            access,
        })
    }

    /// Removes `agent`'s grant on exactly `prefix`.
    pub fn revoke(&self, agent: &str, prefix: &str) -> Result<Receipt> {
        self.admin(AdminCommand::Revoke {
            agent: agent.into(),
            prefix: prefix.into(),
        })
    }

    /// The agent token with id `id` (see `mnemo token`), as every call answered so far left
    /// the token table: one point read under the writer lock, writing nothing, so a server can
    /// check every request's token and a revoke counts from the next request on. A served
    /// store: [`Error::NotLocal`] (`mnemo token list` asks the server).
    pub fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        if let Backend::Copy(copy) = &self.backend {
            return copy.current()?.index().token(id);
        }
        self.local("MnemoClient::token")?
            .held()?
            .writer()
            .peek(|index| index.token(id))
    }

    /// Sets the store setting `name` to `value` (see `mnemo config`), recorded as an admin event
    /// by this client's agent (on a served store, by the server's operator): `delete` = `erase`
    /// makes the memory tool's delete erase the files it deletes, with their whole history.
    pub fn configure(&self, name: &str, value: &str) -> Result<Receipt> {
        self.admin(AdminCommand::Configure {
            name: name.into(),
            value: value.into(),
        })
    }

    /// Every store setting and its value in force (the default where none was set).
    pub fn settings(&self) -> Result<Vec<(String, String)>> {
        self.backend().settings(self)
    }

    /// Whether the memory tool's delete erases what it deletes in a store open in this process
    /// (the setting `delete` = `erase`): one point read of the index, writing nothing.
    pub(crate) fn deletes_erase(&self) -> Result<bool> {
        let held = self.local("MnemoClient::deletes_erase")?.held()?;
        held.writer()
            .peek(|index| Ok(index.setting(DELETE_SETTING)?.as_deref() == Some(DELETE_ERASES)))
    }

    /// The access policy in force.
    pub fn policy(&self) -> Result<Policy> {
        self.backend().policy(self)
    }

    /// Events from `from` on, decoded, once the chain is proven (deferred read events are written
    /// first; a record that breaks the chain is [`Error::ChainBroken`]). A served store:
    /// [`Error::NotLocal`]; [`log`](Self::log) reads the log through the server.
    pub fn events(&self, from: Seq) -> Result<impl Iterator<Item = Result<Event>> + use<>> {
        self.settle_index()?;
        let store = self.local_store()?;
        store.prove()?;
        Ok(store
            .records(from)
            .map(|item| item.and_then(|(_, record)| Event::decode(&record))))
    }
}

/// The store under a client, for the crate's own tests and benches (feature `testing`): a user
/// reads through the methods above, which keep the writer's guarantees.
#[cfg(feature = "testing")]
impl MnemoClient {
    /// [`local_store`](Self::local_store), for tests.
    #[doc(hidden)]
    pub fn store(&self) -> Result<Store> {
        Ok(self.local_store()?.clone())
    }

    /// [`read_local`](Self::read_local), for tests.
    #[doc(hidden)]
    pub fn read_store<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.read_local(read)
    }

    /// [`settle_index`](Self::settle_index), for tests.
    #[doc(hidden)]
    pub fn flush_index(&self) -> Result<()> {
        self.settle_index()
    }
}

/// A memory-tool call a tool server forwards to the server of a served store.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "client"), expect(dead_code))]
pub(crate) enum Forward<'a> {
    /// A request's text (or bytes that may not be text).
    Line(&'a [u8]),
    /// The digest of an input over the limit, with the block's id.
    TooLarge(&'a InputDigest, Option<&'a str>),
    /// The digest of an object whose conversion to text stopped at the limit, with its id.
    Stopped(&'a InputDigest, Option<&'a str>),
}

impl MnemoClient {
    /// For a served store: sends `call` to the server, as a tool server that answers with
    /// `root`, `profile`, `limits` and this client's durability (a server that answers with
    /// others refuses it, recording nothing), and returns the `tool_result`: `Ok` the server's,
    /// `Err` an error result that says why the server did not answer. `None` for a store open
    /// in this process.
    pub(crate) fn forward(
        &self,
        call: Forward<'_>,
        root: &str,
        profile: Profile,
        limits: Limits,
    ) -> Option<std::result::Result<crate::client::store_failures::Answered, Value>> {
        self.backend().forward(self, call, root, profile, limits)
    }
}

/// Whether `agent` may read `record` under `policy`.
pub(crate) fn readable(policy: &Policy, agent: &str, record: &MemoryRecord) -> bool {
    MemPath::absolute(&record.path).is_ok_and(|p| policy.allows(agent, &p, Access::Read))
}

#[cfg(feature = "client")]
impl Served {
    /// The error for `what`, which needs the store in this process.
    fn not_local(&self, what: &str) -> Error {
        Error::NotLocal {
            path: self.path.clone(),
            url: self.remote.url().to_string(),
            what: what.to_string(),
        }
    }
}
