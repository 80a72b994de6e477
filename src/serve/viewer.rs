//! The auditor's window: a web viewer at `/ui/`, its login, and the sessions it reads through.
//!
//! The viewer is hand-written files embedded in the binary, with no build step: `viewer/index.html`,
//! `app.css`, `icon.svg`, and its script as native ES modules ([`MODULES`]: the entry `app.js`,
//! a module per page, and shared ones for the DOM, the API, the router and the session); its pages read the store through the JSON read routes (`/v1/log`, `/v1/show`,
//! `/v1/history`, `/v1/ls`, `/v1/diff`, `/v1/verify` (with `?progress=1`), `/v1/replication`, and
//! on a `--data` server `/v1/stores` and `/v1/stores/NAME/...`), so what it shows is what the CLI
//! prints; the operator's pages change access and redact through the admin routes (`/v1/acl`,
//! `/v1/tokens`, `/v1/redact`), and an event's page traces and reverts it (`/v1/trace`,
//! `/v1/revert`, a dry run first), each change behind a confirming second button. Every `/ui/` answer carries a
//! strict Content-Security-Policy ([`CSP`]: no inline script or style, nothing from another
//! origin, no framing), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
//!
//! **Logging in.** A browser holds no bearer token. It logs in one of two ways, and gets a
//! session cookie (`HttpOnly; SameSite=Strict; Path=/`, named after the server's port, or on a
//! fleet's node alike on every node: see below):
//!
//! - a one-time link, `http://HOST:PORT/ui/#login=SECRET`, which `mnemo ui` asks the server for
//!   (`POST /ui/api/link` with the operator token): the secret is 256 random bits, lives
//!   [`LINK_LIFE`], and is dead once used. It rides in the URL's fragment, which a browser never
//!   sends, so no request line, server log or `Referer` carries it; the page reads it, takes it
//!   off the address bar and posts it;
//! - a form that posts a token (the operator's, or on a `--db` server an agent token).
//!
//! `POST /ui/api/login` must come from this server's own origin (`Origin` present and ours, as
//! the gate checks `Host`). Sessions live in this process only, for [`SESSION_LIFE`]: a cookie
//! from another server, or from this one before a restart, names no session and is refused.
//!
//! **On a fleet's node** (`--fleet`) the sessions and links are the fleet's, kept in its bucket
//! ([`crate::fleet::viewer_logins`]: create-only objects named by the hash of the session id or
//! the secret), so a login through one node works through every node, behind a load balancer
//! without affinity too, and outlives a node's restart. The cookie is `mnemo_ui_` and 12 hex
//! digits derived from the fleet's operator token, the same on every node. A link is redeemed by
//! the one node that makes its used marker, so exactly once in the fleet. A node reads a session
//! it does not hold from the bucket once and keeps it (at most [`MAX_SESSIONS`] so), reads it
//! again when it last did [`RECHECK`] before, and reads it for every request that is not a GET or
//! HEAD: a logout (which removes the session's object before it answers) is refused by every
//! node at once for a change, and within [`RECHECK`] for a read. An object that is no session
//! (junk, too large, not a regular file of a `file://` bucket, ending beyond [`SESSION_LIFE`]) is
//! none, and asks for a new login; one expired is none too, and removed by the node that finds
//! it; each node sweeps what expired from the bucket at most every [`SWEEP_EVERY`].
//!
//! **Reading as the session.** A request to `/v1/...` that carries no bearer token but the
//! session cookie goes through the gate as the session's principal (its token is put in its
//! `Authorization` header), so the session reaches exactly what its token reaches: an agent's
//! session none of the operator's read routes. Such a request must also carry the session's CSRF
//! token in `X-Mnemo-CSRF` (given only in the login's answer: the cookie reaches every port of
//! this host, the page's tab storage only this page), and one that is not a GET
//! must carry this server's `Origin`: a cross-site request is refused before the gate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::auth::{Authority, Hosts, Principal, Refusal, Token, bearer};
use super::refuse;
use super::routes::error;
use crate::fleet::bucket::Bucket;
use crate::fleet::viewer_logins;

/// The Content-Security-Policy of every `/ui/` answer.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The header the viewer's requests carry their session's CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-mnemo-csrf";

/// How long a login link's secret may be used.
pub(crate) const LINK_LIFE: Duration = Duration::from_secs(120);

/// How long a session lasts from its login.
pub(crate) const SESSION_LIFE: Duration = Duration::from_secs(12 * 3600);

/// The most login links waiting to be used, and sessions held, at once: the oldest go first.
const MAX_LINKS: usize = 64;
const MAX_SESSIONS: usize = 256;

/// The most sessions one principal holds at once (its oldest goes first).
const MAX_SESSIONS_EACH: usize = 32;

/// On a fleet's node, how long a session read from the fleet's bucket is served without reading
/// its object again (a request that is not a GET or HEAD reads it every time): a session logged
/// out through one node is refused by every other within this.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// How often at most a fleet's node sweeps the expired logins out of the bucket (when a login
/// or a link is made through it), and the most objects one sweep removes.
const SWEEP_EVERY: Duration = Duration::from_secs(600);
const SWEEP_MOST: usize = 1000;

/// The largest login body read.
const LOGIN_BODY_MAX: usize = 4096;

const INDEX_HTML: &str = include_str!("viewer/index.html");
const APP_CSS: &str = include_str!("viewer/app.css");
const ICON_SVG: &str = include_str!("viewer/icon.svg");

/// The viewer's script: native ES modules, each served as `/ui/NAME` and no other name (the list
/// is the route table: an unknown name answers 404). `app.js` is the entry `index.html` loads;
/// it imports the rest, one module per page and a few shared ones.
const MODULES: [(&str, &str); 17] = [
    ("app.js", include_str!("viewer/app.js")),
    ("access.js", include_str!("viewer/access.js")),
    ("api.js", include_str!("viewer/api.js")),
    ("dom.js", include_str!("viewer/dom.js")),
    ("event.js", include_str!("viewer/event.js")),
    ("files.js", include_str!("viewer/files.js")),
    ("history.js", include_str!("viewer/history.js")),
    ("incident.js", include_str!("viewer/incident.js")),
    ("log.js", include_str!("viewer/log.js")),
    ("login.js", include_str!("viewer/login.js")),
    ("redact.js", include_str!("viewer/redact.js")),
    ("router.js", include_str!("viewer/router.js")),
    ("state.js", include_str!("viewer/state.js")),
    ("stores.js", include_str!("viewer/stores.js")),
    ("timeline.js", include_str!("viewer/timeline.js")),
    ("tree.js", include_str!("viewer/tree.js")),
    ("verify.js", include_str!("viewer/verify.js")),
];

/// One logged-in browser.
struct Session {
    /// The token its requests are authenticated with.
    token: String,
    principal: Principal,
    /// On a `--data` server, the one store an agent token's session reads (its token's store).
    store: Option<String>,
    csrf: String,
    expires: Instant,
    /// On a fleet's node, when its object in the bucket was last read (or made).
    checked: Instant,
}

/// What a live session is: its principal, token, CSRF token, and on a `--data` server the store
/// an agent's session reads.
type Found = (Principal, String, String, Option<String>);

impl Session {
    fn found(&self) -> Found {
        (
            self.principal.clone(),
            self.token.clone(),
            self.csrf.clone(),
            self.store.clone(),
        )
    }
}

/// The viewer of one server: its login links and sessions.
pub(crate) struct Viewer {
    hosts: Hosts,
    authority: Authority,
    /// The operator token, which a session opened by a link acts with.
    operator: Token,
    /// The session cookie's name: with the server's port (cookies are per host, not per port), or
    /// on a fleet's node the same on every node of the fleet.
    cookie: String,
    /// Whether the server is a `--data` server (its stores under `/v1/stores/NAME/`).
    data: bool,
    /// The blake3 hash of each unused link secret, and when it expires.
    links: Mutex<HashMap<[u8; 32], Instant>>,
    /// The blake3 hash of each session id, and the session.
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    /// On a `--data` server: who an agent token is in the store that issued it.
    store_tokens: Option<StoreTokens>,
    /// On a fleet's node, the fleet's bucket, where its sessions and links are kept for every
    /// node ([`viewer_logins`]); `links` is then unused.
    fleet: Option<Arc<Bucket>>,
    /// On a fleet's node, sessions it did not open in this run, as last read from the bucket (at
    /// most [`MAX_SESSIONS`]: the least recently read go first).
    known: Mutex<HashMap<[u8; 32], Session>>,
    /// On a fleet's node, when it last swept the bucket's expired logins.
    swept: Mutex<Option<Instant>>,
}

/// Proves an agent token in the store that issued it (`store`, `token`): a `--data` server's
/// tokens are each one store's.
pub(crate) type StoreTokens = Arc<dyn Fn(&str, &str) -> Result<Principal, Refusal> + Send + Sync>;

fn lock<V>(mutex: &Mutex<V>) -> MutexGuard<'_, V> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn digest(secret: &str) -> [u8; 32] {
    viewer_logins::key(secret)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Whether `secret` could be a session id or a link's secret this server made (64 lowercase hex
/// digits): anything else is refused before the fleet's bucket is asked.
fn plausible(secret: &str) -> bool {
    secret.len() == 64
        && secret
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Viewer {
    /// The viewer of the server at `address`, which answers to `hosts` and proves tokens with
    /// `authority`; `data` for a `--data` server.
    pub(crate) fn new(
        address: SocketAddr,
        hosts: Hosts,
        authority: Authority,
        operator: Token,
        data: bool,
    ) -> Self {
        Viewer {
            hosts,
            authority,
            operator,
            cookie: format!("mnemo_ui_{}", address.port()),
            data,
            links: Mutex::default(),
            sessions: Mutex::default(),
            store_tokens: None,
            fleet: None,
            known: Mutex::default(),
            swept: Mutex::default(),
        }
    }

    /// A fleet's node's viewer: its sessions and links kept in the fleet's `bucket`, so that
    /// every node knows them, and its cookie named alike on every node (after the fleet's
    /// operator token, which names the fleet and is the same on every node), so that a browser
    /// reaching the nodes behind one address sends it to each.
    pub(crate) fn in_fleet(mut self, bucket: Arc<Bucket>) -> Self {
        let named = blake3::derive_key(
            "mnemo viewer cookie of a fleet",
            self.operator.as_str().as_bytes(),
        );
        let short: String = named[..6].iter().map(|b| format!("{b:02x}")).collect();
        self.cookie = format!("mnemo_ui_{short}");
        self.fleet = Some(bucket);
        self
    }

    /// The bucket's answer to `call` on the blocking pool (the bucket's calls block), or why
    /// there is none.
    async fn in_bucket<T: Send + 'static>(
        bucket: &Arc<Bucket>,
        call: impl FnOnce(&Bucket) -> crate::Result<T> + Send + 'static,
    ) -> Result<T, Refusal> {
        let bucket = Arc::clone(bucket);
        match tokio::task::spawn_blocking(move || call(&bucket)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(Refusal::Unavailable(format!(
                "the fleet's bucket did not answer for the viewer's login ({e}); retry"
            ))),
            Err(e) => Err(Refusal::Unavailable(format!(
                "the viewer's login could not be checked ({e}); retry"
            ))),
        }
    }

    /// On a fleet's node, sweeps the bucket's expired logins in the background, unless it did
    /// within [`SWEEP_EVERY`].
    fn sweep(&self) {
        let Some(bucket) = &self.fleet else { return };
        {
            let mut swept = lock(&self.swept);
            if swept.is_some_and(|at| at.elapsed() < SWEEP_EVERY) {
                return;
            }
            *swept = Some(Instant::now());
        }
        let bucket = Arc::clone(bucket);
        tokio::task::spawn_blocking(move || {
            let swept = viewer_logins::sweep(
                &bucket,
                crate::model::time::now_ms(),
                millis(SESSION_LIFE),
                millis(LINK_LIFE),
                SWEEP_MOST,
            );
            if let Err(e) = swept {
                eprintln!(
                    "mnemo serve: the viewer's expired logins could not be swept from the fleet's bucket: {e}"
                );
            }
        });
    }

    /// A `--data` server's viewer, whose agent tokens `tokens` proves in their stores.
    pub(crate) fn with_store_tokens(mut self, tokens: StoreTokens) -> Self {
        self.store_tokens = Some(tokens);
        self
    }

    /// A new login link's secret (on a fleet's node, kept in the bucket for every node).
    async fn mint_link(&self) -> Result<String, Refusal> {
        let secret = crate::client::token::random_hex(32)
            .map_err(|e| Refusal::Unavailable(format!("cannot make a login link ({e}); retry")))?;
        if let Some(bucket) = &self.fleet {
            let (key, expires_ms) = (
                digest(&secret),
                crate::model::time::now_ms().saturating_add(millis(LINK_LIFE)),
            );
            Self::in_bucket(bucket, move |b| viewer_logins::mint(b, &key, expires_ms)).await?;
            self.sweep();
            return Ok(secret);
        }
        let now = Instant::now();
        let mut links = lock(&self.links);
        links.retain(|_, expires| *expires > now);
        while links.len() >= MAX_LINKS {
            let oldest = links.iter().min_by_key(|(_, e)| **e).map(|(k, _)| *k);
            match oldest {
                Some(key) => links.remove(&key),
                None => break,
            };
        }
        links.insert(digest(&secret), now + LINK_LIFE);
        Ok(secret)
    }

    /// Uses up the link `secret`: true once, if it was minted here (on a fleet's node, by any
    /// node: true once in the whole fleet) and has not expired.
    async fn redeem_link(&self, secret: &str) -> Result<bool, Refusal> {
        if let Some(bucket) = &self.fleet {
            if !plausible(secret) {
                return Ok(false);
            }
            let key = digest(secret);
            let now = crate::model::time::now_ms();
            return Self::in_bucket(bucket, move |b| {
                viewer_logins::redeem(b, &key, now, millis(LINK_LIFE))
            })
            .await;
        }
        let expires = lock(&self.links).remove(&digest(secret));
        Ok(expires.is_some_and(|e| e > Instant::now()))
    }

    /// Opens a session for `principal`, authenticated by `token`: its id and CSRF token. On a
    /// fleet's node the session is kept in the bucket first, and one this node closes to make
    /// room is removed there.
    async fn open_session(
        &self,
        token: String,
        principal: Principal,
        store: Option<String>,
    ) -> Result<(String, String), Refusal> {
        let random = || {
            crate::client::token::random_hex(32)
                .map_err(|e| Refusal::Unavailable(format!("cannot open a session ({e}); retry")))
        };
        let (id, csrf) = (random()?, random()?);
        if let Some(bucket) = &self.fleet {
            let record = viewer_logins::Session {
                agent: match &principal {
                    Principal::Operator => None,
                    Principal::Agent(agent) => Some(agent.clone()),
                },
                store: store.clone(),
                token: token.clone(),
                csrf: csrf.clone(),
                expires_ms: crate::model::time::now_ms().saturating_add(millis(SESSION_LIFE)),
            };
            let key = digest(&id);
            Self::in_bucket(bucket, move |b| viewer_logins::keep(b, &key, &record)).await?;
            self.sweep();
        }
        let closed = self.room_and_insert(&id, token, principal, store, &csrf);
        if let (Some(bucket), false) = (&self.fleet, closed.is_empty()) {
            let removed = Self::in_bucket(bucket, move |b| {
                closed.iter().try_for_each(|key| viewer_logins::end(b, key))
            })
            .await;
            if let Err(refusal) = removed {
                eprintln!(
                    "mnemo serve: sessions closed to make room stay in the fleet's bucket until they expire: {}",
                    refusal.status_and_reason().1
                );
            }
        }
        Ok((id, csrf))
    }

    /// Makes room for a session of `principal` and adds it: the keys of the sessions closed.
    fn room_and_insert(
        &self,
        id: &str,
        token: String,
        principal: Principal,
        store: Option<String>,
        csrf: &str,
    ) -> Vec<[u8; 32]> {
        let mut closed = Vec::new();
        let now = Instant::now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.expires > now);
        // Room is made at the cost of whoever logs in: first its own oldest session (at most
        // MAX_SESSIONS_EACH each), then the oldest of an agent's, the operator's last, so that no
        // token holder can log another principal out by logging in again and again.
        loop {
            let own = sessions
                .values()
                .filter(|s| s.principal == principal)
                .count();
            let full = sessions.len() >= MAX_SESSIONS;
            if own < MAX_SESSIONS_EACH && !full {
                break;
            }
            let oldest_of = |pick: &dyn Fn(&Session) -> bool| {
                sessions
                    .iter()
                    .filter(|(_, s)| pick(s))
                    .min_by_key(|(_, s)| s.expires)
                    .map(|(k, _)| *k)
            };
            let victim = if own >= MAX_SESSIONS_EACH || principal != Principal::Operator {
                oldest_of(&|s| s.principal == principal)
            } else {
                None
            }
            .or_else(|| oldest_of(&|s| s.principal != Principal::Operator))
            .or_else(|| oldest_of(&|_| true));
            match victim {
                Some(key) => {
                    sessions.remove(&key);
                    closed.push(key);
                }
                None => break,
            };
        }
        sessions.insert(
            digest(id),
            Session {
                token,
                principal,
                store,
                csrf: csrf.to_string(),
                expires: now + SESSION_LIFE,
                checked: now,
            },
        );
        closed
    }

    /// The session id the request's cookie names, if it carries this server's cookie once.
    fn session_id<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, Refusal> {
        let mut found = None;
        for value in headers.get_all(header::COOKIE) {
            let Ok(text) = value.to_str() else { continue };
            for pair in text.split(';') {
                let Some((name, id)) = pair.trim().split_once('=') else {
                    continue;
                };
                if name == self.cookie {
                    if found.is_some() {
                        return Err(Refusal::BadRequest(format!(
                            "more than one {} cookie; log in to the viewer again",
                            self.cookie
                        )));
                    }
                    found = Some(id);
                }
            }
        }
        Ok(found)
    }

    /// The live session `id` names, if any. On a fleet's node, a session whose object this node
    /// has not read within [`RECHECK`], or any when `fresh` (for a request that is not a GET or
    /// HEAD), is read from the bucket first: one ended or expired there is none here either.
    async fn session(&self, id: &str, fresh: bool) -> Result<Option<Found>, Refusal> {
        let key = digest(id);
        let now = Instant::now();
        let held = |map: &Mutex<HashMap<[u8; 32], Session>>| {
            lock(map)
                .get(&key)
                .filter(|s| s.expires > now)
                .map(|s| (s.found(), s.checked))
        };
        let here = held(&self.sessions).or_else(|| held(&self.known));
        let Some(bucket) = &self.fleet else {
            return Ok(here.map(|(found, _)| found));
        };
        match here {
            Some((found, checked)) if !fresh && now.duration_since(checked) < RECHECK => {
                return Ok(Some(found));
            }
            _ if !plausible(id) => return Ok(None),
            _ => {}
        }
        let now_ms = crate::model::time::now_ms();
        let read = Self::in_bucket(bucket, move |b| {
            viewer_logins::find(b, &key, now_ms, millis(SESSION_LIFE))
        })
        .await?;
        let Some(record) = read else {
            lock(&self.sessions).remove(&key);
            lock(&self.known).remove(&key);
            return Ok(None);
        };
        let session = Session {
            principal: record.agent.map_or(Principal::Operator, Principal::Agent),
            token: record.token,
            store: record.store,
            csrf: record.csrf,
            expires: now + Duration::from_millis(record.expires_ms.saturating_sub(now_ms)),
            checked: now,
        };
        let found = session.found();
        if let Some(mine) = lock(&self.sessions).get_mut(&key) {
            mine.checked = now;
            return Ok(Some(found));
        }
        let mut known = lock(&self.known);
        known.retain(|_, s| s.expires > now);
        while known.len() >= MAX_SESSIONS {
            let stalest = known.iter().min_by_key(|(_, s)| s.checked).map(|(k, _)| *k);
            match stalest {
                Some(stalest) => known.remove(&stalest),
                None => break,
            };
        }
        known.insert(key, session);
        Ok(Some(found))
    }

    /// Whether `token` still proves a principal: in `store` (a data server's agent token), or
    /// here.
    fn proves(&self, token: &str, store: Option<&str>) -> bool {
        match (store, &self.store_tokens) {
            (Some(store), Some(tokens)) => tokens(store, token).is_ok(),
            _ => self.authority.principal(token).is_ok(),
        }
    }

    /// Ends the session `id`: on a fleet's node its object is removed from the bucket first,
    /// after which every node refuses it within [`RECHECK`].
    async fn close_session(&self, id: &str) -> Result<(), Refusal> {
        let key = digest(id);
        if let Some(bucket) = &self.fleet {
            Self::in_bucket(bucket, move |b| viewer_logins::end(b, &key)).await?;
        }
        lock(&self.sessions).remove(&key);
        lock(&self.known).remove(&key);
        Ok(())
    }

    /// Refuses a request that does not name this server in `Host` or that comes from another
    /// origin; with `own_origin`, one that names no origin too (a browser's POST always does).
    fn check_origin(&self, headers: &HeaderMap, own_origin: bool) -> Result<(), Refusal> {
        self.hosts.check(headers)?;
        if own_origin && !headers.contains_key(header::ORIGIN) {
            return Err(Refusal::Forbidden(
                "no Origin header: the viewer's changes come only from its own pages".into(),
            ));
        }
        Ok(())
    }

    fn cookie_header(&self, id: &str) -> Option<HeaderValue> {
        HeaderValue::from_str(&format!(
            "{}={id}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie
        ))
        .ok()
    }

    fn expired_cookie(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&format!(
            "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
            self.cookie
        ))
        .ok()
    }
}

/// `app` with the viewer: its pages at `/ui/`, and sessions admitted to `app`'s `/v1/` routes.
pub(crate) fn around(app: Router, viewer: Arc<Viewer>) -> Router {
    let mut pages = Router::new()
        .route("/ui", get(to_index))
        .route("/ui/", get(index))
        .route("/ui/app.css", get(style))
        .route("/ui/icon.svg", get(icon))
        .route("/ui/api/link", post(link))
        .route("/ui/api/login", post(login))
        .route("/ui/api/session", get(session))
        .route("/ui/api/logout", post(logout))
        .route("/ui/{*rest}", get(no_such_file));
    for (name, body) in MODULES {
        pages = pages.route(&format!("/ui/{name}"), get(move || script(body)));
    }
    let pages = pages
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&viewer),
            hardened,
        ))
        .with_state(Arc::clone(&viewer));
    pages
        .merge(app)
        .layer(axum::middleware::from_fn_with_state(viewer, admit))
}

/// Refuses a `/ui/` request that names another server in `Host` (a page reached by DNS
/// rebinding), and adds the viewer's security headers to every `/ui/` answer.
async fn hardened(State(viewer): State<Arc<Viewer>>, request: Request, next: Next) -> Response {
    let checked = viewer
        .hosts
        .check(request.headers())
        .and_then(|()| viewer.hosts.check_target(request.uri()));
    let mut response = match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => refuse(request.method().as_str(), request.uri().path(), &refusal),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn to_index() -> Response {
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, "/ui/")]).into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn script(body: &'static str) -> Response {
    asset("text/javascript; charset=utf-8", body)
}

/// A GET of a `/ui/` name that is none of the viewer's files: 404, with the viewer's headers
/// (without this it would fall through to the API's routes, and their gate's 401).
async fn no_such_file() -> Response {
    error(StatusCode::NOT_FOUND, "no such file of the viewer")
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

async fn icon() -> Response {
    asset("image/svg+xml", ICON_SVG)
}

fn answer(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `POST /ui/api/link` (operator token): a one-time login link's secret.
async fn link(State(viewer): State<Arc<Viewer>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = viewer.hosts.check(&headers) {
        return refuse("POST", "/ui/api/link", &refusal);
    }
    if !viewer.authority.is_operator_request(&headers) {
        return refuse(
            "POST",
            "/ui/api/link",
            &Refusal::Unauthorized("a login link needs the operator's token"),
        );
    }
    match viewer.mint_link().await {
        Ok(secret) => answer(
            StatusCode::OK,
            &json!({"secret": secret, "expires_in_s": LINK_LIFE.as_secs()}),
        ),
        Err(refusal) => refuse("POST", "/ui/api/link", &refusal),
    }
}

/// What `POST /ui/api/login` takes: a link's secret, or a token (on a `--data` server, an
/// agent token with the store that issued it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    link: Option<String>,
    token: Option<String>,
    store: Option<String>,
}

/// `POST /ui/api/login`: a link's secret or a token in, a session cookie out.
async fn login(State(viewer): State<Arc<Viewer>>, headers: HeaderMap, body: Bytes) -> Response {
    const ROUTE: &str = "/ui/api/login";
    if let Err(refusal) = viewer.check_origin(&headers, true) {
        return refuse("POST", ROUTE, &refusal);
    }
    if body.len() > LOGIN_BODY_MAX {
        return refuse(
            "POST",
            ROUTE,
            &Refusal::TooLarge {
                bytes: body.len() as u64,
                limit: LOGIN_BODY_MAX as u64,
            },
        );
    }
    let asked: Login = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body must be {{\"link\": SECRET}} or {{\"token\": TOKEN}} ({e})"),
            );
        }
    };
    let store = asked.store.filter(|s| !s.trim().is_empty());
    let (token, principal) = match (asked.link, asked.token) {
        (Some(_), _) if store.is_some() => {
            return error(
                StatusCode::BAD_REQUEST,
                "a login link is the operator's and names no store; send {\"link\": SECRET} alone",
            );
        }
        (Some(secret), None) => {
            let redeemed = match viewer.redeem_link(&secret).await {
                Ok(redeemed) => redeemed,
                Err(refusal) => return refuse("POST", ROUTE, &refusal),
            };
            if !redeemed {
                return refuse(
                    "POST",
                    ROUTE,
                    &Refusal::Unauthorized(
                        "the login link is used, expired or not this server's; run `mnemo ui` again for a new one",
                    ),
                );
            }
            (viewer.operator.as_str().to_string(), Principal::Operator)
        }
        (None, Some(token)) => {
            let authority = viewer.authority.clone();
            let checked = token.clone();
            let in_store = match (&store, &viewer.store_tokens) {
                (Some(name), Some(tokens)) => Some((name.clone(), Arc::clone(tokens))),
                (Some(_), None) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "this server holds one store: log in with a token alone",
                    );
                }
                (None, _) => None,
            };
            let proved = tokio::task::spawn_blocking(move || match in_store {
                Some((name, tokens)) => tokens(&name, checked.trim()),
                None => authority.principal(checked.trim()),
            })
            .await;
            match proved {
                Ok(Ok(principal)) => (token.trim().to_string(), principal),
                Ok(Err(refusal)) => return refuse("POST", ROUTE, &refusal),
                Err(e) => {
                    return error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!("the token check did not finish ({e}); retry"),
                    );
                }
            }
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "send one of {\"link\": SECRET} or {\"token\": TOKEN}",
            );
        }
    };
    // An operator's session reads every store; only an agent's is held to its token's.
    let store = store.filter(|_| principal != Principal::Operator);
    let (id, csrf) = match viewer
        .open_session(token, principal.clone(), store.clone())
        .await
    {
        Ok(opened) => opened,
        Err(refusal) => return refuse("POST", ROUTE, &refusal),
    };
    let Some(cookie) = viewer.cookie_header(&id) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "cannot open a session (its cookie is not a valid header); retry",
        );
    };
    let mut shown = describe(&principal);
    shown["store"] = json!(store);
    // The CSRF token goes to the page that logged in, and only here: a cookie reaches every
    // server of this host whatever its port, so what the cookie alone can fetch must not be it.
    shown["csrf"] = json!(csrf);
    let mut response = answer(StatusCode::OK, &shown);
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

fn describe(principal: &Principal) -> serde_json::Value {
    match principal {
        Principal::Operator => json!({"principal": "operator", "agent": null}),
        Principal::Agent(agent) => json!({"principal": "agent", "agent": agent}),
    }
}

/// `GET /ui/api/session`: who the session is, its CSRF token, and what kind of server this is.
async fn session(State(viewer): State<Arc<Viewer>>, headers: HeaderMap) -> Response {
    const ROUTE: &str = "/ui/api/session";
    if let Err(refusal) = viewer.check_origin(&headers, false) {
        return refuse("GET", ROUTE, &refusal);
    }
    let id = match viewer.session_id(&headers) {
        Ok(id) => id.map(str::to_string),
        Err(refusal) => return refuse("GET", ROUTE, &refusal),
    };
    let found = match &id {
        Some(id) => match viewer.session(id, false).await {
            Ok(found) => found,
            Err(refusal) => return refuse("GET", ROUTE, &refusal),
        },
        None => None,
    };
    // An agent's token proved again: a session of a token revoked since is over.
    if let (Some(id), Some((Principal::Agent(_), token, _, store))) = (&id, &found) {
        let (checker, token, store) = (Arc::clone(&viewer), token.clone(), store.clone());
        let still = tokio::task::spawn_blocking(move || checker.proves(&token, store.as_deref()))
            .await
            .unwrap_or(false);
        if !still {
            if let Err(refusal) = viewer.close_session(id).await {
                return refuse("GET", ROUTE, &refusal);
            }
            return error(
                StatusCode::UNAUTHORIZED,
                "the session's token was revoked (or its store is gone); log in again",
            );
        }
    }
    match found {
        Some((principal, _, _, store)) => {
            // Not the CSRF token: the login's answer gave it to the page that logged in.
            let mut shown = describe(&principal);
            shown["store"] = json!(store);
            shown["data"] = json!(viewer.data);
            answer(StatusCode::OK, &shown)
        }
        None => error(StatusCode::UNAUTHORIZED, "not logged in"),
    }
}

/// `POST /ui/api/logout` (with the session's CSRF token): ends the session.
async fn logout(State(viewer): State<Arc<Viewer>>, headers: HeaderMap) -> Response {
    const ROUTE: &str = "/ui/api/logout";
    let checked = async {
        viewer.check_origin(&headers, true)?;
        let id = viewer
            .session_id(&headers)?
            .ok_or(Refusal::Unauthorized("not logged in"))?;
        let (_, _, csrf, _) = viewer
            .session(id, true)
            .await?
            .ok_or(Refusal::Unauthorized("no such session"))?;
        check_csrf(&headers, &csrf)?;
        viewer.close_session(id).await
    };
    match checked.await {
        Ok(()) => {
            let mut response = answer(StatusCode::OK, &json!({"logged_out": true}));
            if let Some(cookie) = viewer.expired_cookie() {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
        Err(refusal) => refuse("POST", ROUTE, &refusal),
    }
}

fn check_csrf(headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // Compared as blake3 hashes, in constant time.
    if blake3::hash(sent.as_bytes()) == blake3::hash(csrf.as_bytes()) {
        Ok(())
    } else {
        Err(Refusal::Forbidden(
            "the viewer's request lacks its session's X-Mnemo-CSRF token; reload the viewer".into(),
        ))
    }
}

/// Admits a viewer session's request to the `/v1/` routes: with no bearer token but the session
/// cookie, its CSRF token and (when it is not a GET) this server's `Origin`, it goes on with the
/// session's token; a cookie naming no session here is refused.
async fn admit(State(viewer): State<Arc<Viewer>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if !path.starts_with("/v1/") || bearer(request.headers()).is_ok() {
        return next.run(request).await;
    }
    let id = match viewer.session_id(request.headers()) {
        Ok(Some(id)) => id.to_string(),
        Ok(None) => return next.run(request).await,
        Err(refusal) => return refuse(request.method().as_str(), path, &refusal),
    };
    let changes = request.method() != Method::GET && request.method() != Method::HEAD;
    let unknown = match viewer.fleet {
        None => {
            "the viewer's session is not one of this server's (it expired, or the server restarted); log in again"
        }
        Some(_) => {
            "the viewer's session is not one of this fleet's (it expired, or was logged out); log in again"
        }
    };
    // The request is not borrowed across the bucket's read (its body is not `Sync`).
    let found = match viewer.check_origin(request.headers(), changes) {
        Ok(()) => viewer.session(&id, changes).await,
        Err(refusal) => Err(refusal),
    };
    let checked = found
        .and_then(|found| found.ok_or(Refusal::Unauthorized(unknown)))
        .and_then(|(_, token, csrf, _)| {
            check_csrf(request.headers(), &csrf)?;
            Ok(token)
        });
    let token = match checked {
        Ok(token) => token,
        Err(refusal) => {
            let (method, path) = (
                request.method().to_string(),
                request.uri().path().to_string(),
            );
            return refuse(&method, &path, &refusal);
        }
    };
    match HeaderValue::from_str(&format!("Bearer {token}")) {
        Ok(value) => {
            let headers = request.headers_mut();
            headers.insert(header::AUTHORIZATION, value);
            headers.remove(header::COOKIE);
            next.run(request).await
        }
        Err(_) => error(
            StatusCode::BAD_REQUEST,
            "the session's token is not a valid header; log in again",
        ),
    }
}
