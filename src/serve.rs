//! `mnemo serve`: one process owns a store and serves it over HTTP to any number of clients.
//!
//! Compiled only with the `serve` cargo feature (which includes `mcp`), so the default build of
//! the library carries no async runtime and no HTTP stack. [`serve`] binds the listen address,
//! writes the server file ([`crate::client::discovery`]) and answers, on loopback by default:
//!
//! - `POST /v1/memory`: a `tool_use` block or a bare input in, the `tool_result` JSON out, byte
//!   for byte what [`MnemoMemoryToolServer::handle`] returns (see [`routes`]);
//! - the read routes `GET /v1/head`, `/v1/verify`, `/v1/log`, `/v1/ls`, `/v1/cat`,
//!   `/v1/history`, answered by the library functions the CLI prints;
//! - the admin routes `GET`/`POST /v1/acl`, `GET`/`POST /v1/tokens`, `DELETE /v1/tokens/ID`;
//! - MCP over streamable HTTP at `/mcp` (rmcp's transport), the same `memory` tool and resources
//!   as `mnemo mcp`, for clients that keep a session and for session-less requests alike;
//! - the auditor's window at `/ui/`: the viewer's pages, its login and its sessions (`viewer`);
//! - what the CLI's stdio clients need ([`clients`]): `GET /v1/attach` (a client stays
//!   connected, so `--idle-exit` waits for it), `GET /v1/records` (the agent's own files) and
//!   `POST /v1/memory/oversized` (a line over the limit, as its digest).
//!
//! Before any route, the accept loop shares the server out among its principals ([`listen`] and
//! its `tenancy` module): places for connections waiting for a head, each principal's requests
//! in flight, a minimum pace for request bodies and a memory budget for them.
//!
//! Every request passes one gate first: its `Host` and `Origin` must name this server, it must
//! carry a bearer token that proves a principal ([`auth`]), and its body must fit in
//! the request limit (`--max-request-bytes`, default
//! [`DEFAULT_MAX_REQUEST_BYTES`](crate::model::tool::limits::DEFAULT_MAX_REQUEST_BYTES)). A request turned away is answered with its status and a reason, writes
//! nothing, and leaves one line on stderr (status, method, route, reason; never the token).
//!
//! The agent a call is recorded under comes from each request, never from a session: an agent
//! token's agent, or the one the operator names with `X-Mnemo-Agent` (or the server's default
//! agent). An agent token reaches only the memory tool; every other route, the admin routes
//! (`/v1/acl`, `/v1/tokens`) among them, needs the operator's token.
//!
//! Store calls block (a durable write waits for its fsync), so each runs on tokio's blocking
//! pool. On SIGTERM or SIGINT, or after `--idle-exit` seconds without a request in progress (an
//! attached client's lasts as long as it stays connected), the server stops
//! accepting, lets the calls in flight answer, closes the store and removes the server file
//! ([`shutdown`]).

pub mod auth;
pub mod clients;
pub mod fleet;
pub mod lane;
pub mod listen;
mod mcp;
mod memory_api;
mod replicas;
pub mod routes;
pub mod sessions;
pub mod shutdown;
pub mod stores;
mod tenancy;
mod viewer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State as Extract};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use crate::client::MnemoClient;
use crate::client::tool_server::MnemoMemoryToolServer;

pub use crate::client::discovery::{SERVER_FILE, ServerFile};
pub use auth::{Authority, Caller, Hosts, Refusal, Token, TokenLookup};

/// How long a stop waits for calls in flight and open streams before it closes them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How the server listens and when it stops.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Whether an address other than loopback may be listened on.
    pub allow_remote: bool,
    /// More names the `Host` header may carry (`host` or `host:port`), for a server reached by
    /// name.
    pub allow_hosts: Vec<String>,
    /// Stop after this long with no request in progress (an attached client's `GET /v1/attach`
    /// is one for as long as it stays connected).
    pub idle_exit: Option<Duration>,
    /// The replica the store is shipped to as it is written (`mnemo serve --replicate URL`);
    /// what is left is shipped once the server has stopped. A data server ships each store to a
    /// replica of its own, `URL/NAME`, while it is open and once more as it closes.
    /// `GET /v1/replication` answers its status; without one that route says the server does
    /// not replicate. [`prepare`](Self::prepare) checks it before the store is opened.
    pub replicate: Option<ReplicaOptions>,
    /// The replica this server follows (`mnemo serve --follow URL`), taking its new events as
    /// they come: it answers reads only, and refuses every request that would write (any method
    /// but GET, and /mcp) naming it. [`prepare`](Self::prepare) restores a new store from it.
    pub follow: Option<ReplicaOptions>,
    /// The deadline for a request's headers, the cap on open connections, each principal's
    /// share of requests in flight, the pace of request bodies and the memory they may hold.
    pub connections: listen::Connections,
}

/// A replica beside a server ([`ServeOptions::replicate`], [`ServeOptions::follow`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaOptions {
    /// Where it is: `s3://bucket/prefix`, or `file:///dir`.
    pub url: String,
    /// The least time between shipments to it (the bound on the lag while the object store
    /// keeps up), or how often a follower looks at it.
    pub interval: Duration,
}

/// A view of a replication running beside the server: its status as JSON, read on each
/// `GET /v1/replication`; made `From` a `Replication` or a `Following`.
#[derive(Clone)]
pub(crate) struct ReplicationView(Arc<dyn Fn() -> serde_json::Value + Send + Sync>);

impl std::fmt::Debug for ReplicationView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplicationView")
    }
}

/// What `GET /v1/replication` answers beside a server that ships its store
/// (`mnemo serve --replicate URL`): the replication's status.
impl From<&crate::replica::shipper::Replication> for ReplicationView {
    fn from(replication: &crate::replica::shipper::Replication) -> ReplicationView {
        let status = replication.watcher();
        ReplicationView(Arc::new(move || status().to_json()))
    }
}

/// What `GET /v1/replication` answers on a follower (`mnemo serve --follow URL`): where it
/// stands.
impl From<&crate::replica::follower::Following> for ReplicationView {
    fn from(following: &crate::replica::follower::Following) -> ReplicationView {
        let status = following.watcher();
        ReplicationView(Arc::new(move || status().to_json()))
    }
}

impl ServeOptions {
    /// Checks the options before anything is opened: a listen address other than loopback
    /// needs `allow_remote`.
    pub fn check(&self) -> Result<(), Error> {
        if !self.listen.ip().is_loopback() && !self.allow_remote {
            return Err(Error::Remote(self.listen));
        }
        Ok(())
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            allow_hosts: Vec::new(),
            idle_exit: None,
            replicate: None,
            follow: None,
            connections: listen::Connections::default(),
        }
    }
}

/// How a server run ended.
#[derive(Clone, Debug)]
pub struct Stopped {
    /// Why it stopped.
    pub reason: shutdown::Reason,
    /// Calls that got an error result because the store failed, or found stored bytes they
    /// needed damaged ([`crate::MnemoMemoryToolServer::store_failures`]).
    pub store_failures: u64,
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listen address is not loopback and `allow_remote` is off.
    #[error(
        "refusing to listen on {0}: it is not a loopback address, so other machines could reach the store; pass --allow-remote to serve them (every request still needs the bearer token), or listen on 127.0.0.1"
    )]
    Remote(SocketAddr),

    /// The async runtime could not be started.
    #[error(
        "could not start the server's runtime ({0}); check the process limits (threads, open files) and try again"
    )]
    Runtime(#[source] std::io::Error),

    /// The listen address could not be bound.
    #[error(
        "cannot listen on {0} ({1}); pick another --listen address, or port 0 for any free port"
    )]
    Bind(SocketAddr, #[source] std::io::Error),

    /// The server file could not be written.
    #[error("cannot write the server file {0} ({1}); check that the store directory is writable")]
    ServerFile(PathBuf, #[source] std::io::Error),

    /// The operator token could not be made.
    #[error("cannot make the operator token ({0}); the OS random source is unavailable")]
    Token(#[source] std::io::Error),

    /// SIGTERM and SIGINT could not be caught.
    #[error(
        "cannot catch SIGTERM and SIGINT ({0}); without them the server could not stop cleanly"
    )]
    Signals(#[source] std::io::Error),

    /// The tool server's client reaches its store through another server: the store is served
    /// already.
    #[error(
        "the store at {0} is already served by the mnemo server at {1}; use that server (its clients find it), or stop it first"
    )]
    Served(PathBuf, String),

    /// Serving stopped with an I/O error.
    #[error("the server stopped abnormally ({0}); restart it")]
    Serve(#[source] std::io::Error),
    /// The fleet's bucket could not be joined (`--fleet URL`).
    #[error("cannot join the fleet: {0}")]
    Fleet(#[source] crate::Error),
    /// The replica beside the server ([`ServeOptions::replicate`] or
    /// [`ServeOptions::follow`]) could not be started.
    #[error(transparent)]
    Replica(crate::Error),
    /// The last shipment to the replica, as the server stopped, failed: the replica is behind
    /// the store (the text says how far, and how to ship the rest).
    #[error("{0}")]
    LastShipment(String),
}

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The tool server of the default agent, whose root, profile and limits every agent's shares.
    tool: MnemoMemoryToolServer,
    /// One tool server per agent seen, built on first use.
    agents: Mutex<HashMap<String, MnemoMemoryToolServer>>,
    authority: Authority,
    hosts: Hosts,
    activity: Arc<shutdown::Activity>,
    /// The replication shipping this store, if one does.
    replication: Option<ReplicationView>,
    /// The replica this server follows, if it is a follower.
    follow: Option<String>,
    /// The operator token, which [`clients`]' identity route proves knowledge of.
    operator_token: Token,
    /// The store directory served, as an absolute path (stat'ed by the identity route).
    store_dir: PathBuf,
    /// The MCP sessions of `/mcp`, and whose each is.
    mcp_sessions: sessions::McpSessions,
    /// The outcome of the last `verify` this server ran on the store (a data server keeps it
    /// per store name, across the store's closes).
    last_verify: LastVerify,
    /// Whether [`Shared::warm_past`] runs.
    warming: Arc<std::sync::atomic::AtomicBool>,
}

/// The outcome of the last `verify` a server ran on a store: `{"intact", "head", "first_bad",
/// "time"}`, or nothing yet.
pub(crate) type LastVerify = Arc<Mutex<Option<serde_json::Value>>>;

impl Shared {
    /// The shared state of a server of the store `tool` answers from, at `store_dir`, whose
    /// operator token is `token`; agent tokens are looked up in the store.
    pub(crate) fn of_store(
        tool: MnemoMemoryToolServer,
        token: &Token,
        hosts: Hosts,
        activity: Arc<shutdown::Activity>,
        store_dir: PathBuf,
        replication: Option<ReplicationView>,
    ) -> Shared {
        let tokens: TokenLookup = {
            let client = tool.client().clone();
            Arc::new(move |id: &str| client.token(id))
        };
        Shared {
            tool,
            agents: Mutex::default(),
            authority: Authority::with_tokens(token, tokens),
            hosts,
            activity,
            replication,
            follow: None,
            operator_token: token.clone(),
            store_dir,
            mcp_sessions: sessions::McpSessions::new(),
            last_verify: LastVerify::default(),
            warming: Arc::default(),
        }
    }

    /// Starts, unless one runs, a replay of the whole log in the background that leaves the
    /// store the state its past is read from (the files `history` follows, the trees `show` and
    /// `ls --at` start from), so the viewer's pages of a long log answer from it.
    pub(crate) fn warm_past(&self) {
        if self.warming.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let client = self.client().clone();
        let warming = Arc::clone(&self.warming);
        let root = self.tool.root().to_string();
        tokio::task::spawn_blocking(move || {
            if let Ok(root) = crate::model::paths::MemPath::absolute(&root) {
                // A failure here is met again, and reported, by the page that needs it.
                let _ = client.history(&root);
            }
            warming.store(false, std::sync::atomic::Ordering::SeqCst);
        });
    }

    /// Remembers `report` as the store's last verify.
    pub(crate) fn remember_verify(&self, report: &crate::model::protocol::VerifyReport) {
        let first_bad = report.violations.iter().map(|v| v.seq).min();
        let summary = serde_json::json!({
            "intact": report.violations.is_empty(),
            "head": report.head.seq,
            "first_bad": first_bad,
            "time": crate::model::time::utc(crate::model::time::now_ms()),
        });
        *self
            .last_verify
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(summary);
    }

    /// Who a request is from (on a blocking thread: an agent token is looked up in the store).
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<auth::Caller, auth::Refusal> {
        self.authority
            .caller(headers, self.tool.client().agent_id())
    }

    /// The client of the default agent (for reads, which are not attributed).
    pub(crate) fn client(&self) -> &MnemoClient {
        self.tool.client()
    }

    /// The largest request body taken, in bytes (the tool's request limit).
    pub(crate) fn max_request_bytes(&self) -> u64 {
        self.tool.limits().max_request_bytes
    }

    /// The replication's status, if this server replicates its store.
    pub(crate) fn replication(&self) -> Option<serde_json::Value> {
        self.replication.as_ref().map(|view| (view.0)())
    }

    /// The operator token's text.
    pub(crate) fn operator_token(&self) -> &str {
        self.operator_token.as_str()
    }

    /// The store directory served.
    pub(crate) fn store_dir(&self) -> &std::path::Path {
        &self.store_dir
    }

    /// The memory root.
    pub(crate) fn root(&self) -> &str {
        self.tool.root()
    }

    /// The tool server that records calls as `agent`.
    pub(crate) fn tool_for(&self, agent: &str) -> Result<MnemoMemoryToolServer, String> {
        if agent == self.tool.client().agent_id() {
            return Ok(self.tool.clone());
        }
        let mut agents = self
            .agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(tool) = agents.get(agent) {
            return Ok(tool.clone());
        }
        let client = self
            .tool
            .client()
            .with_agent(agent)
            .map_err(|e| e.to_string())?;
        let tool = MnemoMemoryToolServer::builder(client)
            .root(self.tool.root())
            .profile(self.tool.profile())
            .limits(self.tool.limits())
            .build()
            .map_err(|e| e.to_string())?;
        agents.insert(agent.to_string(), tool.clone());
        Ok(tool)
    }

    fn store_failures(&self) -> u64 {
        let agents = self
            .agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.tool.store_failures()
            + agents
                .values()
                .map(MnemoMemoryToolServer::store_failures)
                .sum::<u64>()
    }
}

/// The multi-threaded runtime a server runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("mnemo-serve")
        .build()
        .map_err(Error::Runtime)
}

/// What every server starts with: its listener and address, the signals it stops on, a new
/// operator token, and the server file naming them (not yet published).
pub(crate) struct Started {
    pub(crate) listener: tokio::net::TcpListener,
    pub(crate) address: SocketAddr,
    pub(crate) signals: shutdown::Signals,
    pub(crate) token: Token,
    pub(crate) file: ServerFile,
}

/// Binds `listen`, catches the signals and makes the operator token and server file.
pub(crate) async fn start(listen: SocketAddr, token: Option<Token>) -> Result<Started, Error> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::Bind(listen, e))?;
    let address = listener.local_addr().map_err(|e| Error::Bind(listen, e))?;
    let signals = shutdown::Signals::catch().map_err(Error::Signals)?;
    let token = match token {
        Some(token) => token,
        None => Token::generate().map_err(Error::Token)?,
    };
    let file = ServerFile {
        url: format!("http://{}", auth::authority(address)),
        address,
        pid: std::process::id(),
        token: token.as_str().to_string(),
        socket: None,
    };
    Ok(Started {
        listener,
        address,
        signals,
        token,
        file,
    })
}

/// Serves the store `tool` answers from (its agent is the default agent) until a signal, or
/// `idle_exit`. Prints the URL on stdout once listening. Blocks the calling thread. With
/// [`ServeOptions::replicate`] the store is shipped to that replica as it is written and once
/// more when the server has stopped; with [`ServeOptions::follow`] it takes the replica's new
/// events as they come (each telling stderr what it did).
pub fn serve(tool: MnemoMemoryToolServer, options: ServeOptions) -> Result<Stopped, Error> {
    options.check()?;
    // The replica runs beside the server, on the store the server holds, and ships what is
    // left once the server has stopped.
    let beside = replicas::Beside::start(tool.client(), &options).map_err(Error::Replica)?;
    if let Some(url) = tool.client().server_url() {
        return Err(Error::Served(
            tool.client().path().to_path_buf(),
            url.to_string(),
        ));
    }
    let runtime = runtime()?;
    let store_dir = tool.client().path().to_path_buf();
    let dir = store_dir.clone();
    let view = beside.as_ref().map(replicas::Beside::view);
    let outcome = runtime.block_on(async move {
        let store_dir = dir;
        let Started {
            listener,
            address,
            signals,
            token,
            mut file,
        } = start(options.listen, None).await?;
        // The local socket for the memory tool's calls (not on a follower, which takes none);
        // without one, clients use HTTP.
        let socket = if options.follow.is_none() {
            lane::bind().ok()
        } else {
            None
        };
        file.socket = socket.as_ref().map(|bound| bound.name().to_string());
        match ServerFile::read(&store_dir) {
            Ok(Some(stale)) => eprintln!(
                "mnemo serve: replacing the server file of a server that is gone (pid {}, {})",
                stale.pid, stale.url
            ),
            Ok(None) => {}
            Err(e) => eprintln!("mnemo serve: replacing a server file that is not trusted: {e}"),
        }
        let path = file
            .publish(&store_dir)
            .map_err(|e| Error::ServerFile(ServerFile::path(&store_dir), e))?;
        let shared = Arc::new(Shared {
            follow: options.follow.as_ref().map(|replica| replica.url.clone()),
            ..Shared::of_store(
                tool,
                &token,
                Hosts::new(address, &options.allow_hosts),
                shutdown::Activity::new(),
                std::path::absolute(&store_dir).unwrap_or_else(|_| store_dir.clone()),
                view,
            )
        });
        println!("mnemo serve: listening on {}", file.url);
        println!("mnemo serve: server file {}", path.display());
        let socket = socket.and_then(|bound| bound.run(Arc::clone(&shared)).ok());
        let outcome = run(
            listener,
            options.connections,
            Arc::clone(&shared),
            signals,
            options.idle_exit,
        )
        .await;
        Ok::<_, Error>((outcome, shared, file, socket))
    });
    let (outcome, shared, file, socket) = match outcome {
        Ok(parts) => parts,
        Err(e) => {
            runtime.shutdown_timeout(SHUTDOWN_GRACE);
            return Err(e);
        }
    };
    // Calls a client gave up on may still be running on the blocking pool; let them finish.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    if let Some(socket) = socket {
        socket.stop(SHUTDOWN_GRACE);
    }
    let store_failures = shared.store_failures();
    // The last handle of the store: dropping it closes the store. The server file goes only
    // once sled has let go of the store's lock, so a client that finds no server file can open
    // the store at once.
    drop(shared);
    if let Err(e) = crate::client::wait_until_closed(&store_dir, SHUTDOWN_GRACE) {
        eprintln!("mnemo serve: {e}; the server file is removed all the same");
    }
    if let Err(e) = file.withdraw(&store_dir) {
        eprintln!(
            "mnemo serve: could not remove the server file ({e}); the next server replaces it"
        );
    }
    let reason = outcome?;
    if let Some(beside) = beside {
        beside.stop().map_err(Error::LastShipment)?;
    }
    Ok(Stopped {
        reason,
        store_failures,
    })
}

/// The routes of one store behind its gate: what a `--db` server serves at `/`, and a `--data`
/// server under `/v1/stores/NAME/` ([`stores`]).
pub(crate) fn store_app(shared: Arc<Shared>, stop: CancellationToken) -> axum::Router {
    routes::router(Arc::clone(&shared), stop)
        .layer(axum::middleware::from_fn_with_state(shared, gate))
}

/// Serves on `listener` until a stop, then drains.
async fn run(
    listener: tokio::net::TcpListener,
    connections: listen::Connections,
    shared: Arc<Shared>,
    signals: shutdown::Signals,
    idle_exit: Option<Duration>,
) -> Result<shutdown::Reason, Error> {
    let stop = CancellationToken::new();
    let client = shared.client().clone();
    let exit = shutdown::IdleExit {
        after: idle_exit,
        stopped: Some(Arc::new(move || client.stopped_by())),
    };
    let address = listener.local_addr().map_err(Error::Serve)?;
    let viewer = viewer::Viewer::new(
        address,
        shared.hosts.clone(),
        shared.authority.clone(),
        shared.operator_token.clone(),
        false,
    );
    let app = viewer::around(
        store_app(Arc::clone(&shared), stop.clone()),
        Arc::new(viewer),
    );
    let authority = shared.authority.clone();
    let operator: tenancy::IsOperator =
        Arc::new(move |headers: &HeaderMap| authority.is_operator_request(headers));
    serve_app(
        listener,
        app,
        (connections, operator),
        Arc::clone(&shared.activity),
        signals,
        exit,
        stop,
    )
    .await
}

/// Serves `app` on `listener` until a signal, `idle_exit` with no request in progress, or
/// `stop`, then drains; `operator` tells the operator's requests from the rest.
pub(crate) async fn serve_app(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    (connections, operator): (listen::Connections, tenancy::IsOperator),
    activity: Arc<shutdown::Activity>,
    signals: shutdown::Signals,
    exit: shutdown::IdleExit,
    stop: CancellationToken,
) -> Result<shutdown::Reason, Error> {
    let watcher = tokio::spawn(shutdown::wait(signals, stop.clone(), activity, exit));
    let server = listen::accept(listener, app, connections, operator, stop.clone());
    let grace = async {
        stop.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = server => {}
        () = grace => eprintln!(
            "mnemo serve: calls or streams still open {} s after the stop; closing them",
            SHUTDOWN_GRACE.as_secs()
        ),
    }
    stop.cancel();
    let reason = watcher.await.unwrap_or(shutdown::Reason::Cancelled);
    eprintln!("mnemo serve: stopped ({})", describe(reason));
    Ok(reason)
}

fn describe(reason: shutdown::Reason) -> String {
    match reason {
        shutdown::Reason::Signal(name) => name.to_string(),
        shutdown::Reason::Idle(limit) => format!("no request for {} s", limit.as_secs_f64()),
        shutdown::Reason::StoreStopped => {
            "a storage failure stopped the store, and no request was in progress: the next server reopens it".into()
        }
        shutdown::Reason::Cancelled => "cancelled".into(),
    }
}

/// The gate every request passes: `Host` and `Origin`, the bearer token (and, for an agent
/// token, the route), the body's declared size. An admitted request carries its [`Caller`] in
/// its extensions.
async fn gate(Extract(shared): Extract<Arc<Shared>>, mut request: Request, next: Next) -> Response {
    let _in_flight = shared.activity.begin();
    let checked = shared
        .hosts
        .check(request.headers())
        .and_then(|()| shared.hosts.check_target(request.uri()));
    if checked.is_ok()
        && request.uri().path() == clients::IDENTITY
        && request.method() == axum::http::Method::GET
    {
        // The one route answered without a token: the client proves the server before it
        // sends one. It reads nothing from the store and changes nothing.
        return next.run(request).await;
    }
    let admitted = match checked {
        Ok(()) => authenticate(&shared, request.headers()).await,
        Err(refusal) => Err(refusal),
    };
    let attribution = tenancy::Attribution::of(request.extensions());
    let admitted = admitted
        .and_then(|caller| {
            // From here on the request counts against its principal's share.
            let class = match &caller.principal {
                auth::Principal::Operator => tenancy::Class::Operator,
                auth::Principal::Agent(agent) => tenancy::Class::Agent {
                    store: shared.store_dir.clone(),
                    agent: agent.clone(),
                },
            };
            let class = if request.uri().path() == "/v1/attach" {
                tenancy::Class::Attached(Box::new(class))
            } else {
                class
            };
            attribution.attribute(class).map_err(Refusal::Unavailable)?;
            Ok(caller)
        })
        .and_then(|caller| {
            if caller.principal.is_operator() || auth::agent_may_use(request.uri().path()) {
                Ok(caller)
            } else {
                Err(Refusal::Forbidden(
                    "this route needs the operator's token; an agent token reaches only the memory tool and what its clients use: POST /v1/memory, POST /v1/memory/oversized, GET /v1/records, GET /v1/whoami, GET /v1/attach and /mcp".into(),
                ))
            }
        })
        .and_then(|caller| match &shared.follow {
            Some(url) if request.method() != axum::http::Method::GET || request.uri().path().starts_with("/mcp") => {
                Err(Refusal::Forbidden(format!(
                    "this server is a read-only follower of the replica at {url}: it answers GET /v1/ls, /v1/cat, /v1/log, /v1/history, /v1/show, /v1/diff, /v1/head, /v1/verify and /v1/replication; memory-tool calls (each one is recorded), MCP and changes go to the server of the primary store"
                )))
            }
            _ => Ok(caller),
        })
        .and_then(|caller| {
            let limit = clients::body_limit(request.uri().path(), shared.max_request_bytes());
            let declared = request
                .headers()
                .get(axum::http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            match declared {
                Some(bytes) if bytes > limit => Err(Refusal::TooLarge { bytes, limit }),
                _ => Ok(caller),
            }
        });
    let mcp = request.uri().path() == "/mcp" || request.uri().path().starts_with("/mcp/");
    let session = request
        .headers()
        .get(sessions::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let access = match (&admitted, &session) {
        (Ok(caller), Some(id)) if mcp => shared.mcp_sessions.may_use(id, &caller.principal).await,
        _ => sessions::Access::Allowed,
    };
    let admitted = match admitted {
        Ok(_) if access == sessions::Access::Denied => Err(Refusal::NoSession(
            "no such MCP session for this token; initialize a session of your own (a session belongs to the token that opened it)".into(),
        )),
        admitted => admitted,
    };
    match admitted {
        Ok(caller) if mcp => {
            let principal = caller.principal.clone();
            let closing = request.method() == axum::http::Method::DELETE;
            request.extensions_mut().insert(caller);
            let response = next.run(request).await;
            match (&session, response.headers().get(sessions::SESSION_HEADER)) {
                (None, Some(opened)) => {
                    if let Ok(id) = opened.to_str() {
                        shared.mcp_sessions.opened(id.to_string(), principal).await;
                    }
                }
                (Some(id), _) if closing && response.status().is_success() => {
                    shared.mcp_sessions.forget(id);
                }
                (Some(id), _) if access == sessions::Access::TakenUp => {
                    // Taken up from the fleet's bucket: it counts among its principal's here.
                    shared.mcp_sessions.admit(id.clone(), principal).await;
                }
                _ => {}
            }
            response
        }
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => refuse(request.method().as_str(), request.uri().path(), &refusal),
    }
}

/// Who the request is from. The operator's token is checked in memory; any other is looked up in
/// the store on the blocking pool (a point read under the writer lock, which a write may hold).
async fn authenticate(shared: &Arc<Shared>, headers: &HeaderMap) -> Result<Caller, Refusal> {
    let default_agent = shared.tool.client().agent_id();
    if shared.authority.is_operator_request(headers) {
        return shared.authority.caller(headers, default_agent);
    }
    let authority = shared.authority.clone();
    let headers = headers.clone();
    let default_agent = default_agent.to_string();
    tokio::task::spawn_blocking(move || authority.caller(&headers, &default_agent))
        .await
        .unwrap_or_else(|e| {
            Err(Refusal::Unavailable(format!(
                "the token check did not finish ({e}); retry"
            )))
        })
}

/// Answers a refused request and logs it on stderr: status, method, route, reason.
pub(crate) fn refuse(method: &str, route: &str, refusal: &Refusal) -> Response {
    let (status, reason) = refusal.status_and_reason();
    let route: String = route.chars().take(200).collect();
    eprintln!(
        "mnemo serve: refused {} {method} {route:?}: {reason}",
        status.as_u16()
    );
    let mut response = routes::error(status, &reason);
    if refusal.is_revoked() {
        response.extensions_mut().insert(auth::Revoked);
    }
    if matches!(refusal, Refusal::Unavailable(_)) {
        // Refused before anything was done: the client may retry (RemoteClient does).
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    if matches!(refusal, Refusal::Unauthorized(_)) {
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer realm=\"mnemo\""),
        );
    }
    response.into_response()
}
