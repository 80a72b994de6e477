//! `mnemo serve --data DIR`: one process serves every store under a directory, each store the
//! directory `DIR/NAME`, a complete Mnemo store on its own (`mnemo verify --db DIR/NAME` works on
//! it when no server holds it).
//!
//! | route | who | answer |
//! |---|---|---|
//! | `POST /v1/stores` `{"name": "NAME"}` | operator | 201 `{"name", "created": true}`; 409 if it exists or something else has its name; 400 for a name that is not one |
//! | `GET /v1/stores?after=&limit=&details=` | operator | `{"stores": [{"name", "open"}], "next": NAME or null}`, by name, at most `limit` (default 100, at most 1,000) after `after`; with `details=true` each store also has `label` (`{"name", "description"}`: a store made through the memory-stores API is named by its label, any other after its directory, with no description), `head` (`{"seq", "hash"}`), `last_write` (when its last event was recorded, UTC: the time of its head record, which a store opened and closed with nothing new leaves alone), `bytes` (its files) and `verified` (the last verify this server ran on it: `{"intact", "head", "first_bad", "time"}`, or null); on a fleet's node also `holder` (`{"node", "epoch", "alive"}`: the node its lease names) |
//! | `DELETE /v1/stores/NAME?confirm=NAME` | operator | `{"name", "deleted": true}`; 400 without the confirmation, 404 for no such store, 409 while a call is in flight in it (a fleet's store is deleted by its holder once its calls in flight answered, as a drain waits; its name is not used again) |
//! | `ANY /v1/stores/NAME/ROUTE` | as the route | the single-store route `/v1/ROUTE` of that store (`/v1/stores/NAME/mcp` is its `/mcp`), with the same bodies and answers |
//! | `GET /v1/identity?challenge=` | anyone | the proof of `DIR` (see [`crate::client::discovery`]) |
//!
//! **Names and entries** are checked as [`crate::store::data_dir`] says: a name that is not one is
//! refused before any file is touched, and an entry that is not a store's real directory (a
//! symlink or a FIFO planted in `DIR`) is no store: 404.
//!
//! **Opening and closing.** A store is opened on its first request and closed after
//! [`DataOptions::store_idle_close`] without one, and at most [`DataOptions::max_open_stores`]
//! are open at once: opening one more closes the least recently used store that has no call in
//! flight (a request whose answer is still being sent counts, an MCP stream's included; an
//! attached client's heartbeats do not, as they hold nothing of the store); when every open store
//! is busy the request gets 503, which [`crate::RemoteClient`] retries, waiting longer each time,
//! for as long as it waits for an answer. So memory, threads and descriptors are bounded by the cap, whatever the number of
//! stores. Closing a store ends its MCP sessions.
//!
//! **Tokens.** The operator token of the server file `DIR/mnemo-server.json` administers every
//! store. An agent token is issued by one store (`POST /v1/stores/NAME/tokens`), is a chained
//! admin event of that store, and acts only there: any other store answers it 404, as if the
//! store did not exist, and the `/v1/stores` routes answer it 401. Once its store revokes it,
//! that store answers it 401 "revoked" (any other store still 404).
//!
//! One server per data directory: it holds the directory's lock ([`data_dir::lock`]) while it
//! runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as RoutePath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::auth::{Authority, Hosts, Refusal, Token};
use super::routes::error;
use super::shutdown::Activity;
use super::{Error, ReplicaOptions, ServeOptions, ServerFile, Shared, Stopped, refuse};
use crate::client::tool_server::MnemoMemoryToolServer;
use crate::client::{ClientBuilder, MnemoClient};
use crate::store::data_dir::{self, check_store_name};

/// How a data server opens a store (creating it if it is new), given the client builder of its
/// directory ([`ClientBuilder::path`]): the tool server of its default agent, with the root,
/// profile, durability and limits every store shares, and what to do when it closes. (The
/// replica each store is shipped to is [`ServeOptions::replicate`]'s.)
/// A fleet node's builder already sends every write to the fleet's bucket, under
/// [`Durability::Replicated`](crate::Durability::Replicated) unless the callback sets `fsync` or
/// `flush` (then shipped behind the answers; `buffered` is refused).
pub type OpenStore = Arc<dyn Fn(ClientBuilder) -> Result<OpenedStore, String> + Send + Sync>;

/// A store a data server opened.
pub struct OpenedStore {
    /// Its tool server.
    pub tool: MnemoMemoryToolServer,
    /// Called once when the store closes (after its replica, if it has one, got what is left),
    /// before its client does: stops what runs beside it.
    pub on_close: Option<Box<dyn FnOnce() + Send>>,
}

impl From<MnemoMemoryToolServer> for OpenedStore {
    fn from(tool: MnemoMemoryToolServer) -> OpenedStore {
        OpenedStore {
            tool,
            on_close: None,
        }
    }
}

/// What bounds a data server's open stores.
#[derive(Clone, Debug)]
pub struct DataOptions {
    /// At most this many stores open at once.
    pub max_open_stores: usize,
    /// A store with no request for this long is closed.
    pub store_idle_close: Duration,
    /// The memory-stores API creates at most this many memories in a store (the hosted API's
    /// cap, 2,000, by default).
    pub max_memories: usize,
    /// The memory-stores API's creates and updates are refused in a store holding this many
    /// versions (the hosted API's cap, 250,000, by default); deletes never are.
    pub max_versions: u64,
    /// The fleet this server is a node of (`--fleet URL`), if any: its stores are the fleet's,
    /// `DIR` holds this node's copies of those it holds.
    pub fleet: Option<super::fleet::FleetOptions>,
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            max_open_stores: 64,
            store_idle_close: Duration::from_secs(300),
            max_memories: 2000,
            max_versions: 250_000,
            fleet: None,
        }
    }
}

/// Why a store could not be had.
pub(super) enum Unavailable {
    /// There is no store of that name (or its entry is not a store's directory).
    Missing,
    /// Every open store has a call in flight and the cap is reached.
    Busy,
    /// Opening it failed.
    Failed(String),
    /// Another node of the fleet holds it, at this URL (it took the store as this one tried).
    Elsewhere(String),
}

/// One open store: its shared state and routes, and what to run when it closes.
pub(crate) struct Served {
    shared: Arc<Shared>,
    /// On a fleet's node, the fleet's bucket and the store's name: the copy of the store's
    /// memory-stores label the other nodes list it by is kept there.
    fleet: Option<(Arc<crate::fleet::bucket::Bucket>, String)>,
    app: Router,
    last_used_ms: AtomicU64,
    /// The store shipped to its replica while it is open, and once more as it closes.
    shipping: Mutex<Option<crate::replica::shipper::Replication>>,
    on_close: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Served {
    /// The store's shared state.
    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// On a fleet's node, the fleet's bucket and the store's name.
    pub(super) fn fleet(&self) -> Option<(&crate::fleet::bucket::Bucket, &str)> {
        self.fleet
            .as_ref()
            .map(|(bucket, name)| (bucket.as_ref(), name.as_str()))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(shipping) = lock(&self.shipping).take() {
            if let Err(why) = super::replicas::stop(shipping) {
                super::replicas::tell(format_args!("mnemo serve: {why}"));
            }
        }
        if let Some(close) = lock(&self.on_close).take() {
            close();
        }
    }
}

/// A store's place in the registry: the store while it is open. Its mutex is held while the
/// store opens, closes or is deleted.
type Slot = Arc<Mutex<Option<Arc<Served>>>>;

fn lock<V>(mutex: &Mutex<V>) -> MutexGuard<'_, V> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The stores of a data directory, opened on demand.
pub(crate) struct Stores {
    dir: PathBuf,
    /// The data directory as it was when the server locked it.
    dir_id: crate::store::disk::DirId,
    open: OpenStore,
    options: DataOptions,
    /// Where each store is shipped to, under `URL/NAME`, if the stores are replicated.
    replicate: Option<ReplicaOptions>,
    token: Token,
    authority: Authority,
    hosts: Hosts,
    activity: Arc<Activity>,
    stop: CancellationToken,
    slots: Mutex<HashMap<String, Slot>>,
    open_count: AtomicUsize,
    failures: AtomicU64,
    clock: Instant,
    /// Per store name, the outcome of the last verify this server ran on it.
    verified: Mutex<HashMap<String, super::LastVerify>>,
    /// This node's part in its fleet, if it is a fleet's node.
    fleet: Option<Arc<super::fleet::Member>>,
}

impl Stores {
    /// The data directory.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// This node's part in its fleet, if it is a fleet's node.
    pub(super) fn fleet(&self) -> Option<&Arc<super::fleet::Member>> {
        self.fleet.as_ref()
    }

    /// The most memories the memory-stores API creates in a store.
    pub(super) fn max_memories(&self) -> usize {
        self.options.max_memories
    }

    /// The most versions a store holds before the memory-stores API refuses to add any.
    pub(super) fn max_versions(&self) -> u64 {
        self.options.max_versions
    }

    /// Why the request may not use the operator's routes (it names another server, or carries
    /// no operator token), or `None` if it may.
    pub(super) fn operator_refusal(&self, headers: &HeaderMap) -> Option<Refusal> {
        self.hosts.check(headers).err().or_else(|| {
            (!self.authority.is_operator_request(headers)).then(|| {
                if super::auth::bearer(headers).is_ok() {
                    Refusal::Unauthorized(
                        "the token is not the operator's (from the data directory's server file); an agent token acts only in its own store",
                    )
                } else {
                    Refusal::Unauthorized("no x-api-key or Authorization: Bearer header")
                }
            })
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The directory of the store `name`, if there may be such a store: for a fleet's node its
    /// copy's (made when the store is taken), else a real directory of `DIR` (not a link) with
    /// sled's `db` in it.
    pub(super) fn located(&self, name: &str) -> Option<PathBuf> {
        match &self.fleet {
            Some(_) => check_store_name(name).ok().map(|()| self.dir.join(name)),
            None => data_dir::store_dir(&self.dir, name),
        }
    }

    /// The directory of the store `name` if it holds a store: a real directory (not a link)
    /// with sled's `db` in it.
    fn store_path(&self, name: &str) -> Result<PathBuf, Unavailable> {
        data_dir::store_dir(&self.dir, name).ok_or(Unavailable::Missing)
    }

    fn slot(&self, name: &str) -> Slot {
        let mut slots = lock(&self.slots);
        Arc::clone(slots.entry(name.to_string()).or_default())
    }

    /// Takes a place among the open stores, closing the least recently used idle one when
    /// the cap is reached (never `except`'s, whose slot the caller holds).
    fn reserve(&self, except: &str) -> Result<(), Unavailable> {
        loop {
            let count = self.open_count.load(Ordering::SeqCst);
            if count < self.options.max_open_stores {
                if self
                    .open_count
                    .compare_exchange(count, count + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            if !self.close_one(|name, _| name != except, true) {
                return Err(Unavailable::Busy);
            }
        }
    }

    /// Closes open stores with no call in flight that `pick` chooses: the least recently used
    /// one if `one`, else every one. Whether any was closed.
    fn close_one(&self, pick: impl Fn(&str, &Served) -> bool, one: bool) -> bool {
        let slots: Vec<(String, Slot)> = lock(&self.slots)
            .iter()
            .map(|(name, slot)| (name.clone(), Arc::clone(slot)))
            .collect();
        let mut candidates: Vec<(u64, String, Slot)> = Vec::new();
        for (name, slot) in slots {
            let Ok(open) = slot.try_lock() else { continue };
            if let Some(served) = open.as_ref() {
                if Arc::strong_count(served) == 1 && pick(&name, served) {
                    let used = served.last_used_ms.load(Ordering::SeqCst);
                    drop(open);
                    candidates.push((used, name, slot));
                }
            }
        }
        candidates.sort_by_key(|(used, _, _)| *used);
        let mut closed = false;
        for (_, _, slot) in candidates {
            let Ok(mut open) = slot.try_lock() else {
                continue;
            };
            let idle = open.as_ref().is_some_and(|s| Arc::strong_count(s) == 1);
            if idle {
                if let Some(served) = open.take() {
                    self.failures
                        .fetch_add(served.shared.store_failures(), Ordering::SeqCst);
                }
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                closed = true;
                if one {
                    break;
                }
            }
        }
        closed
    }

    /// Closes the stores idle for longer than the option says, and forgets empty slots.
    fn close_idle(&self) {
        let now = self.now_ms();
        let limit = u64::try_from(self.options.store_idle_close.as_millis()).unwrap_or(u64::MAX);
        self.close_one(
            |_, served| now.saturating_sub(served.last_used_ms.load(Ordering::SeqCst)) >= limit,
            false,
        );
        lock(&self.slots).retain(|_, slot| {
            Arc::strong_count(slot) > 1 || slot.try_lock().map_or(true, |open| open.is_some())
        });
    }

    /// The open store `name`, opened now if it is closed.
    pub(super) fn get(&self, name: &str) -> Result<Arc<Served>, Unavailable> {
        if let Some(fleet) = &self.fleet {
            return self.get_held(fleet, name, false);
        }
        let path = self.store_path(name)?;
        let slot = self.slot(name);
        let mut open = lock(&slot);
        if let Some(served) = open.as_ref() {
            served.last_used_ms.store(self.now_ms(), Ordering::SeqCst);
            return Ok(Arc::clone(served));
        }
        // Checked again under the slot: a delete may have taken it meanwhile.
        let path = self.store_path(name).map(|_| path)?;
        self.reserve(name)?;
        match self.start(name, &path) {
            Ok(served) => {
                *open = Some(Arc::clone(&served));
                Ok(served)
            }
            Err(why) => {
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                Err(Unavailable::Failed(why))
            }
        }
    }

    /// The fleet's store `name` as this node holds it: open here while this node holds it,
    /// else taken (and its copy built from the fleet's log) unless another live node holds it;
    /// with `create`, only a store the fleet does not have yet.
    fn get_held(
        &self,
        fleet: &super::fleet::Member,
        name: &str,
        create: bool,
    ) -> Result<Arc<Served>, Unavailable> {
        check_store_name(name).map_err(|_| Unavailable::Missing)?;
        let path = self.dir.join(name);
        let slot = self.slot(name);
        let mut open = lock(&slot);
        if let Some(served) = open.as_ref() {
            if create {
                // Open here: the store exists.
                return Err(Unavailable::Missing);
            }
            if fleet.holds(name) {
                served.last_used_ms.store(self.now_ms(), Ordering::SeqCst);
                return Ok(Arc::clone(served));
            }
            // Its lease lapsed: closed here (its copy is built anew below, so nothing may still
            // use the old one), and taken again below if no one else has it.
            if let Some(served) = open.take() {
                self.retire(served);
            }
        }
        self.reserve(name)?;
        let started = match fleet.take(name, &path, create) {
            Ok(super::fleet::Taken::Here(replicator)) => self.start_with(
                name,
                &path,
                MnemoClient::builder(&path).replicate_to(replicator),
            ),
            Ok(super::fleet::Taken::Elsewhere(url)) => {
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                return Err(Unavailable::Elsewhere(url));
            }
            Ok(super::fleet::Taken::Missing) => {
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                return Err(Unavailable::Missing);
            }
            Err(e) => Err(e.to_string()),
        };
        match started {
            Ok(served) => {
                *open = Some(Arc::clone(&served));
                Ok(served)
            }
            Err(why) => {
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                Err(Unavailable::Failed(why))
            }
        }
    }

    /// Opens (or creates) store `name`, at `path`, and builds its routes.
    fn start(&self, name: &str, path: &Path) -> Result<Arc<Served>, String> {
        self.start_with(name, path, MnemoClient::builder(path))
    }

    /// [`start`](Self::start) with the client builder given.
    fn start_with(
        &self,
        name: &str,
        path: &Path,
        builder: ClientBuilder,
    ) -> Result<Arc<Served>, String> {
        let opened = (self.open)(builder)?;
        // Each store to a replica of its own under the URL, shipped while it is open and once
        // more as it closes.
        let shipping = match &self.replicate {
            Some(base) => Some(
                super::replicas::ship(opened.tool.client(), &super::replicas::of_store(base, name))
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        // A data server holds its stores itself: one another server holds (a `serve --db`, or
        // the server `mnemo tool` started) is not served through it.
        if let Some(url) = opened.tool.client().server_url() {
            return Err(format!(
                "another mnemo server holds it ({url}); stop that server (or let it idle out), then retry"
            ));
        }
        // A fleet's store keeps its MCP sessions in the bucket too, so they follow it.
        let mcp_sessions = match &self.fleet {
            Some(fleet) => super::sessions::McpSessions::kept_in(super::sessions::Kept::new(
                Arc::clone(fleet.bucket()),
                name,
            )),
            None => super::sessions::McpSessions::new(),
        };
        let shared = Arc::new(Shared {
            last_verify: self.last_verify(name),
            mcp_sessions,
            ..Shared::of_store(
                opened.tool,
                &self.token,
                self.hosts.clone(),
                Arc::clone(&self.activity),
                path.to_path_buf(),
                shipping.as_ref().map(Into::into),
            )
        });
        let app = super::store_app(Arc::clone(&shared), self.stop.clone());
        Ok(Arc::new(Served {
            shared,
            fleet: self
                .fleet
                .as_ref()
                .map(|fleet| (Arc::clone(fleet.bucket()), name.to_string())),
            app,
            last_used_ms: AtomicU64::new(self.now_ms()),
            shipping: Mutex::new(shipping),
            on_close: Mutex::new(opened.on_close),
        }))
    }

    /// Creates the store `name`, unless a store or something else has its name.
    pub(super) fn create(&self, name: &str) -> Result<Created, Unavailable> {
        check_store_name(name).map_err(Unavailable::Failed)?;
        if let Some(fleet) = &self.fleet {
            if fleet
                .deleted(name)
                .map_err(|e| Unavailable::Failed(e.to_string()))?
            {
                return Ok(Created::Deleted);
            }
            return match self.get_held(fleet, name, true) {
                Ok(_) => Ok(Created::Made),
                Err(Unavailable::Missing) => Ok(Created::Exists),
                Err(why) => Err(why),
            };
        }
        let path = self.dir.join(name);
        let slot = self.slot(name);
        let mut open = lock(&slot);
        if open.is_some() || data_dir::store_dir(&self.dir, name).is_some() {
            return Ok(Created::Exists);
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            return Ok(Created::InTheWay);
        }
        self.reserve(name)?;
        match self.start(name, &path) {
            Ok(served) => {
                *open = Some(served);
                Ok(Created::Made)
            }
            Err(why) => {
                self.open_count.fetch_sub(1, Ordering::SeqCst);
                Err(Unavailable::Failed(why))
            }
        }
    }

    /// Deletes the store `name`: closed first (refused while a call is in flight in it), then
    /// renamed out of the way at once and removed.
    pub(super) fn delete(&self, name: &str) -> Result<(), (StatusCode, String)> {
        let missing = || (StatusCode::NOT_FOUND, no_store(name));
        if let Some(fleet) = &self.fleet {
            return self.delete_held(fleet, name);
        }
        let path = self.store_path(name).map_err(|_| missing())?;
        let slot = self.slot(name);
        let mut open = lock(&slot);
        if let Some(served) = open.as_ref() {
            if Arc::strong_count(served) > 1 {
                return Err((
                    StatusCode::CONFLICT,
                    format!(
                        "the store {name:?} has a call in flight (an MCP stream counts); retry once its clients are gone"
                    ),
                ));
            }
            open.take();
            self.open_count.fetch_sub(1, Ordering::SeqCst);
        }
        data_dir::remove(&self.dir, &path).map_err(|e| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("could not delete the store {name:?} ({e}); check the data directory"),
            )
        })
    }

    /// Deletes the fleet's store `name` ([`super::fleet::Member::delete`]) once it is closed
    /// here (its calls in flight answered, for at most [`DRAIN_WAIT`], as a drain waits);
    /// requests that come meanwhile wait, then find it gone.
    fn delete_held(
        &self,
        fleet: &super::fleet::Member,
        name: &str,
    ) -> Result<(), (StatusCode, String)> {
        check_store_name(name).map_err(|_| (StatusCode::NOT_FOUND, no_store(name)))?;
        let slot = self.slot(name);
        let mut open = lock(&slot);
        if let Some(served) = open.take() {
            self.retire(served);
        }
        match fleet.delete(name, &self.dir.join(name)) {
            Ok(super::fleet::Deleted::Done) => Ok(()),
            Ok(super::fleet::Deleted::Missing) => Err((StatusCode::NOT_FOUND, no_store(name))),
            Ok(super::fleet::Deleted::Elsewhere(url)) => Err((
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the store {name:?} is held by another node of the fleet{}, which deletes it; retry, and this node forwards the request there",
                    if url.is_empty() {
                        String::new()
                    } else {
                        format!(" (at {url})")
                    }
                ),
            )),
            Err(e) => Err((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the store {name:?} could not be deleted ({e}); retry"),
            )),
        }
    }

    /// The stores by name after `after`, at most `limit`, and whether each is open.
    fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> std::io::Result<(Vec<(String, bool)>, bool)> {
        let (names, more) = match &self.fleet {
            Some(fleet) => fleet
                .stores_page(after, limit)
                .map_err(std::io::Error::other)?,
            None => data_dir::list(&self.dir, after, limit)?,
        };
        let slots = lock(&self.slots);
        let listed = names
            .into_iter()
            .map(|name| {
                let open = slots
                    .get(&name)
                    .is_some_and(|slot| slot.try_lock().map_or(true, |open| open.is_some()));
                (name, open)
            })
            .collect();
        Ok((listed, more))
    }

    /// Who `token` is in store `name` (opening it if it is closed): the agent it was issued to,
    /// or a refusal that names no store that is not one, as the store's routes do.
    fn agent_in(&self, name: &str, token: &str) -> Result<super::auth::Principal, Refusal> {
        const NONE: &str = "no such store, or the token is not one of its tokens";
        if check_store_name(name).is_err() {
            return Err(Refusal::Unauthorized(NONE));
        }
        let served = match (self.get(name), &self.fleet) {
            (Ok(served), _) => served,
            // Held by another node of the fleet: it says whom the token proves there.
            (Err(Unavailable::Elsewhere(url)), Some(fleet)) => {
                return fleet
                    .whoami(&url, name, &self.token, token)
                    .ok_or(Refusal::Unauthorized(NONE));
            }
            (Err(_), _) => return Err(Refusal::Unauthorized(NONE)),
        };
        match served.shared.authority.principal(token) {
            Ok(principal) => Ok(principal),
            Err(_) => Err(Refusal::Unauthorized(NONE)),
        }
    }

    /// Where the outcome of the last verify of store `name` is kept.
    fn last_verify(&self, name: &str) -> super::LastVerify {
        Arc::clone(lock(&self.verified).entry(name.to_string()).or_default())
    }

    /// What the stores page shows of store `name` beside its name: the name and description its
    /// label gives it (see the memory-stores API), its head (the open store's,
    /// else the one its head record holds), when its last event was recorded (the head record's
    /// time), the bytes of its files, and the last verify this server ran on it.
    fn details(&self, name: &str) -> serde_json::Value {
        let holder = self
            .fleet
            .as_ref()
            .and_then(|fleet| fleet.holder_of(name))
            .map(|(node, epoch, alive)| json!({"node": node, "epoch": epoch, "alive": alive}));
        let mut found = self.local_details(name);
        if let (Some(holder), Some(found)) = (holder, found.as_object_mut()) {
            found.insert("holder".into(), holder);
        }
        found
    }

    /// [`details`](Self::details) of the store's copy in the data directory.
    fn local_details(&self, name: &str) -> serde_json::Value {
        let Some(path) = data_dir::store_dir(&self.dir, name) else {
            return json!({});
        };
        let open = lock(&self.slots)
            .get(name)
            .and_then(|slot| slot.try_lock().ok().and_then(|open| open.clone()));
        let head = match &open {
            Some(served) => served.shared.client().head().ok(),
            None => crate::store::disk::read_head(&path).ok().flatten(),
        };
        let written = std::fs::symlink_metadata(path.join(crate::store::disk::HEAD_FILE))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| crate::model::time::utc(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
        let verified = lock(&self.verified)
            .get(name)
            .and_then(|kept| kept.lock().unwrap_or_else(PoisonError::into_inner).clone());
        let label = super::memory_api::name_and_description(&path, name)
            .map(|(name, description)| json!({"name": name, "description": description}));
        json!({
            "label": label,
            "head": head.map(|h| json!({"seq": h.seq.0, "hash": h.hash.to_hex()})),
            "last_write": written,
            "bytes": bytes_under(&path, 0),
            "verified": verified,
        })
    }

    /// A fleet node's sweep: takes the fleet's stores that no live node holds (free, or their
    /// holder dead), while it has room under `--max-open-stores` (keeping a quarter free for the
    /// stores its requests ask for), so a dead node's stores serve again about a beat after its
    /// lease ran out, and a node that joins takes its share. How many it took.
    fn adopt(&self) -> usize {
        let Some(fleet) = &self.fleet else { return 0 };
        let room = self.options.max_open_stores - self.options.max_open_stores / 4;
        let Ok(names) = fleet.orphans() else { return 0 };
        let mut took = 0;
        for name in names {
            if self.open_now() >= room {
                break;
            }
            if self.get(&name).is_ok() {
                took += 1;
            }
        }
        took
    }

    /// Closes `served`, taken out of its slot, once the calls in flight in it have answered (for
    /// at most [`DRAIN_WAIT`]), so that its store is closed when this returns unless one is
    /// still running.
    fn retire(&self, served: Arc<Served>) {
        // An MCP stream would hold the store here until the wait ran out: its sessions are let
        // go (their clients' next requests take them up where the store goes).
        served.shared.mcp_sessions.let_go();
        let deadline = Instant::now() + DRAIN_WAIT;
        while Arc::strong_count(&served) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.failures
            .fetch_add(served.shared.store_failures(), Ordering::SeqCst);
        self.open_count.fetch_sub(1, Ordering::SeqCst);
    }

    /// Drains this fleet node: it takes no store from now on, and hands each it holds to
    /// another live node, closing it here first (once its calls in flight have answered, for at
    /// most [`DRAIN_WAIT`]; requests that come meanwhile wait, then go to the new holder). The
    /// stores handed over, each with the node it went to.
    fn drain(&self) -> Result<Vec<(String, String)>, String> {
        let fleet = self.fleet.as_ref().ok_or(
            "this server is no fleet's node (mnemo serve --fleet URL), so it has nothing to drain",
        )?;
        let plan = fleet.start_drain().map_err(|e| e.to_string())?;
        let mut handed = Vec::new();
        for (lease, to) in plan {
            let name = lease.store.clone();
            let slot = self.slot(&name);
            let mut open = lock(&slot);
            if let Some(served) = open.take() {
                self.retire(served);
            }
            if fleet.hand_over(&lease, &to).map_err(|e| e.to_string())? {
                handed.push((name, to.id));
            }
        }
        Ok(handed)
    }

    /// How many stores are open now.
    pub(crate) fn open_now(&self) -> usize {
        self.open_count.load(Ordering::SeqCst)
    }

    /// Closes every store (at the end of serving) and returns the calls that failed in them.
    fn close_all(&self) -> u64 {
        let slots: Vec<Slot> = lock(&self.slots).drain().map(|(_, slot)| slot).collect();
        let mut closed = Vec::new();
        for slot in slots {
            if let Some(served) = lock(&slot).take() {
                self.failures
                    .fetch_add(served.shared.store_failures(), Ordering::SeqCst);
                closed.push(served.shared.store_dir.clone());
            }
        }
        self.open_count.store(0, Ordering::SeqCst);
        // The server file goes after this: by then sled has let go of every store it held, so a
        // client that finds no server file opens a store at once.
        let deadline = std::time::Instant::now() + super::SHUTDOWN_GRACE;
        for dir in closed {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if let Err(e) = crate::client::wait_until_closed(&dir, left) {
                eprintln!("mnemo serve: {e}; the server file is removed all the same");
            }
        }
        self.failures.load(Ordering::SeqCst)
    }
}

/// The bytes of the regular files under `dir`, not following links, at most a few levels down
/// (a store's files are sled's, its head record and `blobs/`).
fn bytes_under(dir: &Path, depth: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.path().symlink_metadata() {
            Ok(m) if m.is_file() => m.len(),
            Ok(m) if m.is_dir() && depth < 4 => bytes_under(&entry.path(), depth + 1),
            _ => 0,
        })
        .sum()
}

fn answer(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn no_store(name: &str) -> String {
    let shown: String = name.chars().take(80).collect();
    format!(
        "no store {shown:?} on this server (or this token is not one of its tokens); list the stores with GET /v1/stores (operator), or create one with POST /v1/stores {{\"name\": \"...\"}}"
    )
}

/// The request's refusal unless it carries the operator token (and names this server).
fn operator_only(
    stores: &Stores,
    method: &str,
    headers: &HeaderMap,
    route: &str,
) -> Option<Response> {
    stores
        .operator_refusal(headers)
        .map(|refusal| refuse(method, route, &refusal))
}

async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(call).await.map_err(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the call did not finish ({e}); retry"),
        )
    })
}

/// How to check the store `name` that could not be opened: a fleet's where its log lies (the
/// bucket is its truth; a node's copy is a cache); else its directory once no server holds it.
pub(super) fn check_advice(name: &str, in_fleet: bool) -> String {
    match in_fleet {
        true => format!(
            "check its log where it lies with `mnemo verify --from FLEET/stores/{name}` (adding --key VKEY when the fleet signs its logs)"
        ),
        false => format!("check it with `mnemo verify --db DIR/{name}` once no server holds it"),
    }
}

fn unavailable(name: &str, why: Unavailable, in_fleet: bool) -> Response {
    match why {
        Unavailable::Missing => error(StatusCode::NOT_FOUND, &no_store(name)),
        Unavailable::Busy => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "every open store has a call in flight and the server is at --max-open-stores; retry in a moment (or start the server with a larger --max-open-stores)",
        ),
        Unavailable::Failed(why) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!(
                "the store {name:?} could not be opened ({why}); {}",
                check_advice(name, in_fleet)
            ),
        ),
        Unavailable::Elsewhere(url) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the store {name:?} was just taken by the fleet's node at {url}; retry, and this node forwards the request there"
            ),
        ),
    }
}

#[derive(Deserialize)]
struct Listing {
    after: Option<String>,
    limit: Option<usize>,
    /// Each store's head, last write, size and last verify too.
    #[serde(default)]
    details: bool,
}

/// How long a drain waits for the calls in flight in a store before it hands the store over.
const DRAIN_WAIT: Duration = Duration::from_secs(30);

/// `POST /v1/fleet/drain` (operator): hands every store this node holds to the fleet's other
/// nodes; `{"node", "handed_over": [{"store", "to"}]}`.
async fn drain(State(stores): State<Arc<Stores>>, headers: HeaderMap) -> Response {
    if let Some(refused) = operator_only(&stores, "POST", &headers, "/v1/fleet/drain") {
        return refused;
    }
    match blocking(move || stores.drain()).await {
        Ok(Ok(handed)) => {
            let handed: Vec<_> = handed
                .into_iter()
                .map(|(store, to)| json!({"store": store, "to": to}))
                .collect();
            answer(StatusCode::OK, &json!({"handed_over": handed}))
        }
        Ok(Err(why)) => error(StatusCode::CONFLICT, &why),
        Err(response) => response,
    }
}

/// The largest page of `GET /v1/stores`.
const MAX_PAGE: usize = 1000;

async fn list(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    query: Query<Listing>,
) -> Response {
    if let Some(refused) = operator_only(&stores, "GET", &headers, "/v1/stores") {
        return refused;
    }
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_PAGE {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("limit must be 1 to {MAX_PAGE}: GET /v1/stores?limit=100&after=NAME"),
        );
    }
    let (after, details) = (query.0.after, query.0.details);
    let (open_now, max_open) = (stores.open_now(), stores.options.max_open_stores);
    let listed = blocking(move || {
        let (names, more) = stores.list(after.as_deref(), limit)?;
        let listed: Vec<_> = names
            .into_iter()
            .map(|(name, open)| {
                let mut entry = json!({"name": name, "open": open});
                if details {
                    if let (Some(entry), serde_json::Value::Object(more)) =
                        (entry.as_object_mut(), stores.details(&name))
                    {
                        entry.extend(more);
                    }
                }
                (name, entry)
            })
            .collect();
        Ok::<_, std::io::Error>((listed, more))
    })
    .await;
    match listed {
        Ok(Ok((names, more))) => {
            let next = more
                .then(|| names.last().map(|(name, _)| name.clone()))
                .flatten();
            let stores: Vec<_> = names.into_iter().map(|(_, entry)| entry).collect();
            answer(
                StatusCode::OK,
                &json!({"stores": stores, "next": next, "open": open_now, "max_open": max_open}),
            )
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the data directory could not be listed ({e})"),
        ),
        Err(response) => response,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewStore {
    name: String,
}

/// The most bytes `POST /v1/stores` reads of its body.
const NEW_STORE_MAX: usize = 64 * 1024;

async fn create(State(stores): State<Arc<Stores>>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refused) = operator_only(&stores, "POST", &headers, "/v1/stores") {
        return refused;
    }
    // Read only once the operator is known: a body counts against its sender's share.
    let body = match axum::body::to_bytes(body, NEW_STORE_MAX).await {
        Ok(body) => body,
        Err(e) => {
            let why = e.to_string();
            let status = match super::routes::is_too_large(e) {
                true => StatusCode::PAYLOAD_TOO_LARGE,
                false => StatusCode::BAD_REQUEST,
            };
            return error(
                status,
                &format!(
                    "the body could not be read ({why}); send at most {NEW_STORE_MAX} bytes: {{\"name\": \"NAME\"}}"
                ),
            );
        }
    };
    // An object only (serde would take `["NAME"]` for the struct too).
    let object = serde_json::from_slice::<serde_json::Value>(&body).is_ok_and(|v| v.is_object());
    let parsed = if object {
        serde_json::from_slice(&body)
    } else {
        Err(serde::de::Error::custom("it is not a JSON object"))
    };
    let asked: NewStore = match parsed {
        Ok(asked) => asked,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body must be {{\"name\": \"NAME\"}} ({e})"),
            );
        }
    };
    if let Err(why) = check_store_name(&asked.name) {
        return error(StatusCode::BAD_REQUEST, &why);
    }
    let name = asked.name.clone();
    let in_fleet = stores.fleet().is_some();
    let created = blocking(move || stores.create(&name)).await;
    match created {
        Ok(Ok(Created::Made)) => answer(
            StatusCode::CREATED,
            &json!({"name": asked.name, "created": true}),
        ),
        Ok(Ok(Created::Exists)) => error(
            StatusCode::CONFLICT,
            &format!("the store {:?} exists already", asked.name),
        ),
        Ok(Ok(Created::Deleted)) => error(
            StatusCode::CONFLICT,
            &format!(
                "the store {:?} was a fleet's and was deleted: a fleet store's name is not used again after its deletion (its log's markers stay in the bucket, fencing its old holders); choose another name",
                asked.name
            ),
        ),
        Ok(Ok(Created::InTheWay)) => error(
            StatusCode::CONFLICT,
            &format!(
                "the name {:?} is taken in the data directory by something that is not a store (a file, a link or a directory without one); remove it there, or choose another name",
                asked.name
            ),
        ),
        Ok(Err(why)) => unavailable(&asked.name, why, in_fleet),
        Err(response) => response,
    }
}

/// What a request to create a store found.
pub(super) enum Created {
    /// The store was made.
    Made,
    /// A store of that name exists.
    Exists,
    /// Something that is not a store has the name.
    InTheWay,
    /// A fleet's store had the name and was deleted: the name is not used again.
    Deleted,
}

#[derive(Deserialize)]
struct Confirm {
    confirm: Option<String>,
}

async fn remove(
    State(stores): State<Arc<Stores>>,
    RoutePath(name): RoutePath<String>,
    headers: HeaderMap,
    query: Query<Confirm>,
) -> Response {
    if let Some(refused) = operator_only(&stores, "DELETE", &headers, "/v1/stores/NAME") {
        return refused;
    }
    if check_store_name(&name).is_err() {
        return error(StatusCode::NOT_FOUND, &no_store(&name));
    }
    if query.confirm.as_deref() != Some(name.as_str()) {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "deleting a store removes every memory and its whole log: confirm with DELETE /v1/stores/{name}?confirm={name}"
            ),
        );
    }
    let gone = name.clone();
    match blocking(move || stores.delete(&gone)).await {
        Ok(Ok(())) => answer(StatusCode::OK, &json!({"name": name, "deleted": true})),
        Ok(Err((status, why))) => error(status, &why),
        Err(response) => response,
    }
}

/// `ANY /v1/stores/NAME/ROUTE`: the store's own route `/v1/ROUTE` (or `/mcp...`), through
/// its gate.
async fn dispatch(
    State(stores): State<Arc<Stores>>,
    RoutePath((name, rest)): RoutePath<(String, String)>,
    mut request: Request,
) -> Response {
    if check_store_name(&name).is_err() {
        return error(StatusCode::NOT_FOUND, &no_store(&name));
    }
    let method = request.method().to_string();
    if super::auth::bearer(request.headers()).is_err() {
        return refuse(
            &method,
            request.uri().path(),
            &Refusal::Unauthorized("no x-api-key or Authorization: Bearer header"),
        );
    }
    let operator = stores.authority.is_operator_request(request.headers());
    let opening = Arc::clone(&stores);
    let wanted = name.clone();
    let served = match blocking(move || opening.get(&wanted)).await {
        Ok(Ok(served)) => served,
        Ok(Err(why)) => return unavailable(&name, why, stores.fleet().is_some()),
        Err(response) => return response,
    };
    let path = if rest == "mcp" || rest.starts_with("mcp/") {
        format!("/{rest}")
    } else {
        format!("/v1/{rest}")
    };
    let target = match request.uri().query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    match target.parse() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return error(StatusCode::BAD_REQUEST, "the request target is not valid"),
    }
    // The store's routes see the request as if it came to them: none of this route's own
    // captures (NAME, the rest), which their `Path` extractors would otherwise read as theirs.
    let (mut parts, body) = request.into_parts();
    let attribution = super::tenancy::Attribution::of(&parts.extensions);
    parts.extensions = axum::http::Extensions::new();
    // But the handle that counts the request against its principal's share, which the store's
    // gate names.
    parts.extensions.insert(attribution);
    let request = Request::from_parts(parts, body);
    let response = match served.app.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let revoked = response
        .extensions()
        .get::<super::auth::Revoked>()
        .is_some();
    if !operator && response.status() == StatusCode::UNAUTHORIZED && !revoked {
        // A token this store did not issue: as if the store did not exist. A token it issued
        // and revoked is told so (only that token's holder can learn it: see `Revoked`).
        return error(StatusCode::NOT_FOUND, &no_store(&name));
    }
    // An attached client's heartbeats hold nothing of the store (they keep the server from its
    // idle exit), so they do not keep it open: a `mnemo tool` session left attached must not
    // hold one of the --max-open-stores places for its whole life.
    if rest == "attach" {
        return response;
    }
    // Any other answer keeps the store in use (never closed) until it is all sent: an MCP
    // stream included.
    let (parts, body) = response.into_parts();
    let held = served;
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _in_use = &held;
        chunk
    }));
    Response::from_parts(parts, body)
}

#[derive(Deserialize)]
struct Challenge {
    challenge: String,
}

/// `GET /v1/identity?challenge=`: the proof that this server holds the operator token of the
/// data directory's server file and serves that directory.
async fn identity(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    query: Query<Challenge>,
) -> Response {
    if let Err(refusal) = stores.hosts.check(&headers) {
        return refuse("GET", super::clients::IDENTITY, &refusal);
    }
    // The data directory this server locked when it started, not whatever is at its path now.
    super::clients::prove(stores.token.as_str(), &query.challenge, Ok(stores.dir_id))
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such route on a --data server; the routes are GET and POST /v1/stores, DELETE /v1/stores/NAME?confirm=NAME, and every route of a store under /v1/stores/NAME/ (memory, log, ls, cat, history, show, diff, verify, head, acl, tokens, redact, config, records, attach, and mcp); mnemo's commands name the store with --store NAME",
    )
}

/// Holds the data directory's lock file, exclusively, for the server's life.
fn lock_data_dir(dir: &Path) -> Result<std::fs::File, Error> {
    data_dir::lock(dir)
        .map_err(|e| Error::ServerFile(dir.join(data_dir::DATA_LOCK), e))?
        .ok_or_else(|| {
            Error::Served(
                dir.to_path_buf(),
                "another `mnemo serve --data` or `mnemo store` (it holds the data directory's lock)"
                    .into(),
            )
        })
}

/// Checks and prepares the data directory `dir`: made (mode 0700) if missing; refused if it is
/// a store itself.
fn prepare(dir: &Path) -> Result<(), Error> {
    let invalid = |why: String| Error::ServerFile(dir.to_path_buf(), std::io::Error::other(why));
    if data_dir::is_store(dir) {
        return Err(invalid(format!(
            "{} is a store, not a data directory of stores: serve it with `mnemo serve --db {}`, or give --data a directory that holds stores",
            dir.display(),
            dir.display()
        )));
    }
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(invalid(format!("{} is not a directory", dir.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::ServerFile(dir.to_path_buf(), e))
        }
        Err(e) => Err(Error::ServerFile(dir.to_path_buf(), e)),
    }
}

/// Serves every store under `dir` (see the module docs) until a signal or `options.idle_exit`.
/// Prints the URL on stdout once listening. Blocks the calling thread. With
/// `options.replicate`, each store is shipped to a replica of its own, `URL/NAME`, while it is
/// open and once more as it closes.
pub fn serve_data(
    dir: &Path,
    open: OpenStore,
    options: ServeOptions,
    data: DataOptions,
) -> Result<Stopped, Error> {
    options.check()?;
    if data.max_open_stores == 0 {
        return Err(Error::ServerFile(
            dir.to_path_buf(),
            std::io::Error::other("--max-open-stores must be at least 1"),
        ));
    }
    if let Some(fleet) = &data.fleet {
        fleet.check().map_err(Error::Fleet)?;
    }
    prepare(dir)?;
    let dir = std::path::absolute(dir).map_err(|e| Error::ServerFile(dir.to_path_buf(), e))?;
    let _lock = lock_data_dir(&dir)?;
    check_fleet_marker(&dir, data.fleet.as_ref()).map_err(Error::Fleet)?;
    let dir_id =
        crate::store::disk::DirId::of(&dir).map_err(|e| Error::ServerFile(dir.to_path_buf(), e))?;
    let fleet = match &data.fleet {
        Some(options) => Some(Arc::new(
            super::fleet::Member::open(options).map_err(Error::Fleet)?,
        )),
        None => None,
    };
    let shared_token = match &fleet {
        Some(member) => Some(member.operator_token().map_err(Error::Fleet)?),
        None => None,
    };
    let runtime = super::runtime()?;
    let outcome = runtime.block_on(async {
        let super::Started {
            listener,
            address,
            signals,
            token,
            file,
        } = super::start(options.listen, shared_token).await?;
        let stop = CancellationToken::new();
        // A node joins its fleet once it listens: the others forward to it from its first beat.
        let beating = match &fleet {
            Some(member) => {
                let (member, stopping) = (Arc::clone(member), stop.clone());
                let joined = tokio::task::spawn_blocking(move || member.beat_until(stopping))
                    .await
                    .map_err(|e| Error::Serve(std::io::Error::other(e)))?;
                Some(joined.map_err(Error::Fleet)?)
            }
            None => None,
        };
        let path = file
            .publish(&dir)
            .map_err(|e| Error::ServerFile(ServerFile::path(&dir), e))?;
        let stores = Arc::new(Stores {
            dir: dir.clone(),
            dir_id,
            open,
            options: data.clone(),
            replicate: options.replicate.clone(),
            authority: Authority::new(&token),
            token,
            hosts: Hosts::new(address, &allowed_hosts(&options, data.fleet.as_ref())),
            activity: Activity::new(),
            stop: stop.clone(),
            slots: Mutex::default(),
            open_count: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
            clock: Instant::now(),
            verified: Mutex::default(),
            fleet: fleet.clone(),
        });
        let app = Router::new()
            .route("/v1/stores", get(list).post(create))
            .route("/v1/stores/{name}", delete(remove))
            .route("/v1/fleet/drain", axum::routing::post(drain))
            .route("/v1/stores/{name}/{*rest}", any(dispatch))
            .route(super::clients::IDENTITY, get(identity))
            .merge(super::memory_api::routes())
            .fallback(not_found)
            .with_state(Arc::clone(&stores));
        let proving = Arc::clone(&stores);
        let viewer = super::viewer::Viewer::new(
            address,
            stores.hosts.clone(),
            stores.authority.clone(),
            stores.token.clone(),
            true,
        )
        .with_store_tokens(Arc::new(move |name: &str, token: &str| {
            proving.agent_in(name, token)
        }));
        // A fleet's node keeps its viewer's logins in the bucket, so they work through any node.
        let viewer = match &fleet {
            Some(member) => viewer.in_fleet(Arc::clone(member.bucket())),
            None => viewer,
        };
        let app = match &fleet {
            Some(member) => app.layer(axum::middleware::from_fn_with_state(
                super::fleet::Routing::new(Arc::clone(member), stores.hosts.clone(), &stores.token),
                super::fleet::route,
            )),
            None => app,
        };
        let app = super::viewer::around(app, Arc::new(viewer)).layer(
            axum::middleware::from_fn_with_state(Arc::clone(&stores.activity), in_flight),
        );
        let closer = tokio::spawn(close_idle_stores(Arc::clone(&stores), stop.clone()));
        let adopter = fleet.as_ref().map(|member| {
            tokio::spawn(adopt_orphans(
                Arc::clone(&stores),
                member.beat_every(),
                stop.clone(),
            ))
        });
        println!(
            "mnemo serve: listening on {} (stores under {})",
            file.url,
            dir.display()
        );
        println!("mnemo serve: server file {}", path.display());
        let authority = stores.authority.clone();
        let operator: super::tenancy::IsOperator =
            Arc::new(move |headers: &HeaderMap| authority.is_operator_request(headers));
        let outcome = super::serve_app(
            listener,
            app,
            (options.connections, operator),
            Arc::clone(&stores.activity),
            signals,
            super::shutdown::IdleExit {
                after: options.idle_exit,
                stopped: None,
            },
            stop,
        )
        .await;
        closer.abort();
        if let Some(adopter) = adopter {
            adopter.abort();
        }
        drop(beating);
        Ok::<_, Error>((outcome, stores, file))
    });
    let (outcome, stores, file) = match outcome {
        Ok(parts) => parts,
        Err(e) => {
            runtime.shutdown_timeout(super::SHUTDOWN_GRACE);
            return Err(e);
        }
    };
    runtime.shutdown_timeout(super::SHUTDOWN_GRACE);
    let store_failures = stores.close_all();
    drop(stores);
    if let Err(e) = file.withdraw(&dir) {
        eprintln!(
            "mnemo serve: could not remove the server file ({e}); the next server replaces it"
        );
    }
    Ok(Stopped {
        reason: outcome?,
        store_failures,
    })
}

use crate::store::data_dir::FLEET_MARKER;

/// Keeps a data directory of stores and a fleet node's copies apart: a fleet node's directory
/// names its fleet (written on its first start, in a directory holding no store), a directory
/// holding stores of its own is never made a fleet node's (its stores would be hidden, and a
/// store of the same name in the fleet would replace one), and a fleet node's directory is served
/// only as that fleet's node (its copies are not the truth).
fn check_fleet_marker(dir: &Path, fleet: Option<&super::fleet::FleetOptions>) -> crate::Result<()> {
    let marker = dir.join(FLEET_MARKER);
    let named = match std::fs::symlink_metadata(&marker) {
        Ok(meta) if meta.is_file() && meta.len() <= 4096 => {
            Some(std::fs::read_to_string(&marker).map_err(|e| crate::Error::io(&marker, e))?)
        }
        Ok(_) => {
            return Err(crate::Error::InvalidArgument(format!(
                "{} is not the small file a fleet node writes; remove it",
                marker.display()
            )));
        }
        Err(_) => None,
    };
    let named = named.map(|text| text.trim().to_string());
    match (fleet, named) {
        (Some(fleet), Some(url)) if url != fleet.url => {
            Err(crate::Error::InvalidArgument(format!(
                "{} holds a node's copies of the fleet at {url}, not {}: give this fleet's node another directory",
                dir.display(),
                fleet.url
            )))
        }
        (Some(_), Some(_)) => Ok(()),
        (Some(fleet), None) => {
            let (stores, _) = data_dir::list(dir, None, 1).map_err(|e| crate::Error::io(dir, e))?;
            if let Some(store) = stores.first() {
                return Err(crate::Error::InvalidArgument(format!(
                    "{} holds stores of its own (such as {store}), which a fleet node would hide: give the node an empty directory, and move a store into the fleet by exporting it and importing it through a node",
                    dir.display()
                )));
            }
            std::fs::write(&marker, format!("{}\n", fleet.url))
                .map_err(|e| crate::Error::io(&marker, e))
        }
        (None, Some(url)) => Err(crate::Error::InvalidArgument(format!(
            "{} holds a node's copies of the fleet at {url}, which are not the truth: serve it with --fleet {url}, or give another directory",
            dir.display()
        ))),
        (None, None) => Ok(()),
    }
}

/// The Host names the server accepts beside its address: `--allow-host`'s, and a fleet node's
/// advertised host, which the other nodes' forwarded requests name.
fn allowed_hosts(
    options: &ServeOptions,
    fleet: Option<&super::fleet::FleetOptions>,
) -> Vec<String> {
    let mut hosts = options.allow_hosts.clone();
    if let Some(fleet) = fleet {
        let authority = fleet
            .advertise
            .split("://")
            .nth(1)
            .unwrap_or(&fleet.advertise)
            .split('/')
            .next()
            .unwrap_or_default();
        if !authority.is_empty() {
            hosts.push(authority.to_string());
        }
    }
    hosts
}

/// Counts each request as in progress for `--idle-exit` while it runs.
async fn in_flight(
    State(activity): State<Arc<Activity>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let _in_flight = activity.begin();
    next.run(request).await
}

/// A fleet node takes the stores no live node holds, every beat, until the stop.
async fn adopt_orphans(stores: Arc<Stores>, every: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let sweeping = Arc::clone(&stores);
        let _ = tokio::task::spawn_blocking(move || sweeping.adopt()).await;
    }
}

/// Closes idle stores every few seconds until the stop.
async fn close_idle_stores(stores: Arc<Stores>, stop: CancellationToken) {
    let every = (stores.options.store_idle_close / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let sweeping = Arc::clone(&stores);
        let _ = tokio::task::spawn_blocking(move || sweeping.close_idle()).await;
    }
}
