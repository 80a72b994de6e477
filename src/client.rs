//! `MnemoClient`: an open store acting as one agent.
//!
//! Clones are cheap and share the store and its single writer; [`MnemoClient::with_agent`]
//! gives another agent id over the same store. The writer stops and the store closes when the last
//! clone is dropped.
//!
//! Opening a store that is already open in this process (a notebook cell run again, two parts
//! of one program) returns a handle to that same store and writer, found by the store's
//! canonical path ([`crate::registry`]); the store's lock only turns away other processes. A
//! store another process serves (`mnemo serve`, with the `serve` feature) is reached with
//! [`MnemoClient::connect_store`] or [`MnemoClient::connect`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use crate::error::{Error, Result};
use crate::event::{Body, Event, Seq};
use crate::log::{Durability, Head, Store};
use crate::paths::MemPath;
use crate::policy::{Access, AdminCommand, Policy};
use crate::projection::{MEMORY_TAG, MemoryRecord};
use crate::registry::{Opened, Registry};
use crate::token::TokenRecord;
use crate::tool::Tree;
use crate::verify::{Report, VerifyOptions, verify_store, verify_store_with};
use crate::writer::{Call, Receipt, Writer};

/// The stores open in this process.
static OPEN: LazyLock<Registry<Inner>> = LazyLock::new(Registry::new);

struct Inner {
    store: Option<Store>,
    durability: Durability,
    writer: Option<Writer>,
}

impl Inner {
    fn store(&self) -> &Store {
        // NOTE: `store` is `None` only inside `drop`.
        self.store
            .as_ref()
            .expect("the store is open while a client exists")
    }

    fn writer(&self) -> Result<&Writer> {
        self.writer.as_ref().ok_or(Error::WriterGone)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Every call has written its event before it returned, so nothing is pending here.
        // sled's own threads may hold the lock a moment after the close; `Store::open` waits.
        self.writer.take();
        // Closing sled flushes it, and after a failed write (a full disk) that flush can wait for
        // ever on a write that will never complete. Close on another thread and stop waiting
        // after a while: the process can still exit, and the next open recovers.
        if let Some(store) = self.store.take() {
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
    }
}

fn check_agent(agent: &str) -> Result<()> {
    if agent == crate::policy::ANY_AGENT {
        return Err(Error::InvalidArgument(
            "agent id \"*\" is reserved for grants to every agent; pick another id".into(),
        ));
    }
    crate::policy::check_agent_id(agent).map_err(Error::InvalidArgument)
}

/// How long dropping the last client waits for sled to close the store.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    path: PathBuf,
    agent: String,
    durability: Durability,
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

    /// Opens or creates the store, finishing any index update a crash interrupted. A store
    /// already open in this process is shared: the handle uses its store and writer, which must
    /// have been opened with the same durability.
    pub fn open(self) -> Result<MnemoClient> {
        check_agent(&self.agent)?;
        let durability = self.durability;
        let inner = match OPEN.open(&self.path, || self.open_store().map(Arc::new))? {
            Opened::Fresh(inner) => inner,
            Opened::Shared(inner) if inner.durability == durability => inner,
            Opened::Shared(inner) => {
                return Err(Error::InvalidArgument(format!(
                    "the store at {} is already open in this process with durability {}; open it with that durability to share it, or drop its other handles first",
                    self.path.display(),
                    inner.durability.name()
                )));
            }
        };
        Ok(MnemoClient {
            inner,
            agent: self.agent.into(),
        })
    }

    fn open_store(&self) -> Result<Inner> {
        let store = match Store::open(&self.path) {
            Err(Error::Locked { path }) => return Err(served_or_locked(path)),
            opened => opened?,
        };
        if let Some(why) = store.rolled_back()? {
            return Err(Error::corrupt(why));
        }
        store.catch_up()?;
        let writer = Writer::new(store.clone(), self.durability)?;
        Ok(Inner {
            store: Some(store),
            durability: self.durability,
            writer: Some(writer),
        })
    }
}

/// The error for a store another process holds: [`Error::Served`] when that process is a live
/// `mnemo serve` (so the caller can connect to it), else [`Error::Locked`].
fn served_or_locked(path: PathBuf) -> Error {
    #[cfg(feature = "serve")]
    if let Some(file) = crate::serve::discovery::live_server(&path) {
        return Error::Served {
            path,
            url: file.url,
        };
    }
    Error::Locked { path }
}

/// An open Mnemo store acting as one agent. `Send + Sync`, cheap to clone.
#[derive(Clone)]
pub struct MnemoClient {
    inner: Arc<Inner>,
    agent: Arc<str>,
}

impl std::fmt::Debug for MnemoClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MnemoClient")
            .field("path", &self.inner.store().path())
            .field("agent", &self.agent)
            .field("durability", &self.inner.durability)
            .finish()
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

    /// A client of the `mnemo serve` that holds the store at `db_path`, found through its server
    /// file, with the operator token the file holds; [`Error::NotFound`] when no live server
    /// holds it (open it then with [`MnemoClient::open`]).
    #[cfg(feature = "serve")]
    pub fn connect_store(db_path: impl AsRef<Path>) -> Result<crate::RemoteClient> {
        let path = db_path.as_ref();
        let file = crate::serve::discovery::live_server(path).ok_or_else(|| Error::NotFound {
            path: path.to_path_buf(),
        })?;
        Ok(crate::RemoteClient::new(file.url, file.token))
    }

    /// A client for another agent over the same store and writer.
    pub fn with_agent(&self, agent_id: impl Into<String>) -> Result<MnemoClient> {
        let agent = agent_id.into();
        check_agent(&agent)?;
        Ok(MnemoClient {
            inner: Arc::clone(&self.inner),
            agent: agent.into(),
        })
    }

    /// The agent id this client acts as.
    pub fn agent_id(&self) -> &str {
        &self.agent
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        self.inner.store().path()
    }

    /// The durability mode writes are acknowledged under.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// The underlying store (reads only; every write goes through the writer).
    pub fn store(&self) -> &Store {
        self.inner.store()
    }

    /// Records one call and returns its answer. This is what the tool server calls; use it
    /// directly to log calls that did not come as JSON.
    pub fn call(&self, tool_use_id: Option<String>, body: Body) -> Result<Receipt> {
        self.inner.writer()?.call(Call {
            agent: self.agent.to_string(),
            tool_use_id,
            body,
        })
    }

    /// Verifies the whole store, pausing writes while it runs.
    pub fn verify(&self) -> Result<Report> {
        self.read(verify_store)
    }

    /// [`verify`](Self::verify), also proving that the log still holds the checkpoint `expect`.
    pub fn verify_with(&self, expect: Option<Head>) -> Result<Report> {
        self.read(|store| {
            verify_store_with(
                store,
                VerifyOptions {
                    expect,
                    progress: None,
                },
            )
        })
    }

    /// Writes the index changes the writer holds in memory (it writes them in batches), so that
    /// the stored index, [`Store::index`], reflects every call answered so far. For tools and
    /// tests that read the stored index directly.
    pub fn flush_index(&self) -> Result<()> {
        self.read(|_| Ok(()))
    }

    /// The last event.
    pub fn head(&self) -> Result<Head> {
        self.read(Store::head)
    }

    /// Runs `read` on the store under the writer lock (writes wait meanwhile), so it sees every
    /// call answered so far in the stored index ([`Store::index`]) and none half-applied: for
    /// reads the methods here do not cover, such as a server's listing of the whole tree.
    pub fn read_store<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.read(read)
    }

    /// Runs `read` under the writer lock, so it sees no call half-applied.
    fn read<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.inner.writer()?.read(read)
    }

    /// Memory files carrying `tag` that this client's agent may read: `memorytool` lists every
    /// such file, `path:/memories/x` the one at that path; any other tag lists none.
    pub fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>> {
        if tag == MEMORY_TAG {
            let agent = self.agent.clone();
            return self.read(move |store| {
                let index = store.index();
                let policy = index.policy()?;
                let mut records = index.records_under(&MemPath::top())?;
                records.retain(|r| {
                    MemPath::absolute(&r.path)
                        .is_ok_and(|p| policy.allows(&agent, &p, Access::Read))
                });
                Ok(records)
            });
        }
        match tag.strip_prefix("path:") {
            Some(path) => Ok(self.record(path)?.into_iter().collect()),
            None => Ok(Vec::new()),
        }
    }

    /// The file at canonical path `path` (such as `/memories/notes.txt`), if there is one and
    /// this client's agent may read it.
    pub fn record(&self, path: &str) -> Result<Option<MemoryRecord>> {
        let Ok(file) = MemPath::root(path) else {
            return Ok(None);
        };
        if file.to_string() != path {
            return Ok(None);
        }
        let agent = self.agent.clone();
        self.read(move |store| {
            let index = store.index();
            if !index.policy()?.allows(&agent, &file, Access::Read) {
                return Ok(None);
            }
            index.record(&file)
        })
    }

    /// Records a policy change, attributed to this client's agent.
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

    /// The agent token with id `id` (see [`crate::token`]), as every call answered so far left
    /// the token table: one point read under the writer lock, writing nothing, so a server can
    /// check every request's token and a revoke counts from the next request on.
    pub fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        self.inner.writer()?.peek(|index| index.token(id))
    }

    /// The access policy in force.
    pub fn policy(&self) -> Result<Policy> {
        self.read(|store| store.index().policy())
    }

    /// Events from `from` on, decoded (deferred read events are written first).
    pub fn events(&self, from: Seq) -> Result<impl Iterator<Item = Result<Event>> + use<>> {
        self.flush_index()?;
        Ok(self
            .inner
            .store()
            .records(from)
            .map(|item| item.and_then(|(_, record)| Event::decode(&record))))
    }
}
