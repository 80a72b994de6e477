//! Sharing one server among its tenants, so that none of them (and no peer without a token) can
//! lock out the rest: the connections waiting for a request head, the requests in flight of each
//! principal, the pace of request bodies and the memory they hold.
//!
//! - **Connections waiting for a head** (a new one, or a kept-alive one between requests) hold
//!   nothing of anyone's: when all [`Connections::max`] places are taken, a new connection closes
//!   the one that has waited longest, so a flood of unfinished heads (from one address, as every
//!   peer on loopback is) never keeps a client that sends its request out for long. A new
//!   connection must send its first head within [`FIRST_HEAD_TIMEOUT`] (or the head timeout, if
//!   lower).
//! - **Requests in flight** (from the head until the answer is sent, a stream's included) count
//!   against their principal's share, [`Connections::per_principal`]: the operator, each agent
//!   token's agent in its store, and peers without a token together as one more. A request over its
//!   principal's share is answered 503 with `Retry-After` at once, and its connection closed.
//! - **Bodies** must keep a pace: after [`Connections::body_grace`], on average at least
//!   [`Connections::min_body_rate`] bytes a second (a body of N bytes is read within the grace
//!   plus N / rate); one slower is cut off with 408 and its connection closed.
//! - **Memory**: a body's bytes are reserved before it is read (its `Content-Length`, or each
//!   chunk as it comes) against a server-wide budget, [`Connections::max_body_memory`], of which
//!   one principal may hold at most half (requests without a proven token together an eighth);
//!   a body that does not fit waits up to [`MEMORY_WAIT`] for room, then gets 503 with
//!   `Retry-After`. The reservation is given back when the request is answered.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Version, header};
use hyper::body::{Body as HttpBody, Incoming};
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::ServiceExt;

use super::listen::Connections;

mod body;

pub(crate) use body::cut_off;
use body::{Guarded, Held};

/// The longest a new connection may take to send its first request head (the head timeout
/// bounds it too, when lower).
pub const FIRST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a body that does not fit in the memory budget waits for room before its 503.
pub const MEMORY_WAIT: Duration = Duration::from_secs(2);

/// What a refused request is told to wait before it retries, in seconds.
const RETRY_AFTER: &str = "1";

/// Whom a request is counted against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Class {
    /// A request not (yet) proven to come from anyone.
    Unauthenticated,
    /// The operator's token.
    Operator,
    /// An agent token's agent, in the store (directory) that issued it.
    Agent {
        /// The store's directory.
        store: PathBuf,
        /// The agent.
        agent: String,
    },
    /// The attached clients of a principal (`GET /v1/attach`, held for a client's whole life),
    /// which have a share of their own: a principal's many clients staying attached never leave
    /// it without room for its calls.
    Attached(Box<Class>),
}

impl Class {
    fn describe(&self) -> String {
        match self {
            Class::Unauthenticated => "requests without a proven token".into(),
            Class::Operator => "the operator's token".into(),
            Class::Agent { agent, .. } => format!("agent {agent:?}'s token"),
            Class::Attached(whose) => format!("the attached clients of {}", whose.describe()),
        }
    }
}

/// Why a request was cut off or refused by the sharing rules.
#[derive(Clone, Debug)]
enum Cut {
    /// The body came slower than the minimum rate (408).
    Slow(String),
    /// No room: the body memory budget, or a connection closed to make room (503).
    Busy(String),
    /// The request's principal has its whole share of requests in flight (503; on the
    /// memory-stores routes 429 `rate_limit_error`, as the hosted API answers a client over its
    /// rate).
    Share(String),
    /// The body is larger than the budget could ever hold for one principal (413).
    TooLarge(String),
}

impl Cut {
    fn status(&self) -> StatusCode {
        match self {
            Cut::Slow(_) => StatusCode::REQUEST_TIMEOUT,
            Cut::Busy(_) | Cut::Share(_) => StatusCode::SERVICE_UNAVAILABLE,
            Cut::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    fn reason(&self) -> &str {
        match self {
            Cut::Slow(why) | Cut::Busy(why) | Cut::Share(why) | Cut::TooLarge(why) => why,
        }
    }
}

/// A connection's place.
struct Conn {
    /// Its place in the waiting order, while it waits for a request head.
    waiting: Option<u64>,
    /// Cancelled to close it.
    evict: tokio_util::sync::CancellationToken,
    evicted: bool,
    /// Whether a request head ever came on it.
    served: bool,
    /// Whether its connection has read what it was sent once: until then it is not closed to
    /// make room (a client that sent its request with the connection is answered).
    polled: bool,
    /// Its requests in flight (the next head may be read before the last answer's end is
    /// noted).
    busy: usize,
}

/// A request in flight.
struct Flight {
    conn: u64,
    class: Class,
    /// Body bytes reserved.
    memory: u64,
    /// Whether it counts among the unauthenticated bodies being read.
    anonymous_body: bool,
    /// While it counts so and its body is still coming: cancelled to cut the body off, when a
    /// newer request without a token needs its place.
    make_room: Option<tokio_util::sync::CancellationToken>,
    cut: Option<Cut>,
    /// Whether its connection closes after the answer.
    close: bool,
}

#[derive(Default)]
struct State {
    open: usize,
    /// Connections told to close that have not closed yet.
    evicting: usize,
    next: u64,
    /// The connections waiting for a request head, oldest first: order → connection.
    waiting: BTreeMap<u64, u64>,
    conns: HashMap<u64, Conn>,
    flights: HashMap<u64, Flight>,
    in_flight: HashMap<Class, usize>,
    anonymous_bodies: usize,
    memory: u64,
    memory_of: HashMap<Class, u64>,
}

impl State {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn count(&mut self, class: &Class, delta: isize) {
        let entry = self.in_flight.entry(class.clone()).or_default();
        *entry = entry.saturating_add_signed(delta);
        if *entry == 0 {
            self.in_flight.remove(class);
        }
    }

    fn give_memory(&mut self, class: &Class, bytes: u64) {
        self.memory = self.memory.saturating_sub(bytes);
        if let Some(held) = self.memory_of.get_mut(class) {
            *held = held.saturating_sub(bytes);
            if *held == 0 {
                self.memory_of.remove(class);
            }
        }
    }
}

/// The server's shares: its connections, the requests in flight and the body memory.
pub(crate) struct Tenancy {
    limits: Connections,
    state: Mutex<State>,
    /// Woken when a connection closes, or a request ends or gives back memory.
    room: Notify,
}

impl Tenancy {
    /// The shares of a server bounded by `limits`.
    pub(crate) fn new(limits: Connections) -> Arc<Tenancy> {
        Arc::new(Tenancy {
            limits,
            state: Mutex::default(),
            room: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn share(&self) -> usize {
        self.limits.per_principal.max(1)
    }

    /// How long a new connection has to send its first request head.
    pub(crate) fn first_head_timeout(&self) -> Duration {
        self.limits.header_timeout.min(FIRST_HEAD_TIMEOUT)
    }

    /// A place for a connection just accepted: at once if one is free; else the connection that
    /// has waited longest for a request head is closed to make one; else (every connection has
    /// a request in flight) when one closes.
    pub(crate) async fn admit(self: &Arc<Self>) -> Place {
        let max = self.limits.max.max(1);
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.open < max {
                    state.open += 1;
                    let id = state.fresh();
                    let order = state.fresh();
                    let evict = tokio_util::sync::CancellationToken::new();
                    state.waiting.insert(order, id);
                    state.conns.insert(
                        id,
                        Conn {
                            waiting: Some(order),
                            evict: evict.clone(),
                            evicted: false,
                            served: false,
                            polled: false,
                            busy: 0,
                        },
                    );
                    return Place {
                        tenancy: Arc::clone(self),
                        id,
                        evict,
                    };
                }
                if state.open - state.evicting.min(state.open) >= max {
                    // The one that has waited longest among those that read what they were sent.
                    let victim = state
                        .waiting
                        .iter()
                        .find(|(_, id)| state.conns.get(id).is_some_and(|conn| conn.polled))
                        .map(|(order, id)| (*order, *id));
                    if let Some((order, victim)) = victim {
                        state.waiting.remove(&order);
                        if let Some(conn) = state.conns.get_mut(&victim) {
                            conn.waiting = None;
                            conn.evicted = true;
                            conn.evict.cancel();
                            state.evicting += 1;
                        }
                    }
                }
            }
            notified.await;
        }
    }

    /// Notes that the connection `id` has read what it was sent once.
    fn polled(&self, id: u64) {
        if let Some(conn) = self.lock().conns.get_mut(&id) {
            conn.polled = true;
        }
        self.room.notify_waiters();
    }

    /// Whether a request head ever came on the connection `id`.
    fn served(&self, id: u64) -> bool {
        self.lock().conns.get(&id).is_none_or(|conn| conn.served)
    }

    /// A request whose head came on connection `conn`: it counts as unauthenticated until
    /// [`Ticket::attribute`] names its principal. Also whether the connection was told to close
    /// to make room just before its head came (then the request must not run: the connection is
    /// dropped at its next turn, and its answer would never be sent).
    fn begin(self: &Arc<Self>, conn: u64) -> (Ticket, bool) {
        let mut state = self.lock();
        let id = state.fresh();
        let mut evicted = true;
        if let Some(entry) = state.conns.get_mut(&conn) {
            entry.served = true;
            entry.busy += 1;
            evicted = entry.evicted;
            if let Some(order) = entry.waiting.take() {
                state.waiting.remove(&order);
            }
        }
        state.flights.insert(
            id,
            Flight {
                conn,
                class: Class::Unauthenticated,
                memory: 0,
                anonymous_body: false,
                make_room: None,
                cut: None,
                close: false,
            },
        );
        state.count(&Class::Unauthenticated, 1);
        let ticket = Ticket {
            tenancy: Arc::clone(self),
            id,
        };
        (ticket, evicted)
    }
}

/// A connection's place among the open ones; dropping it frees the place.
pub(crate) struct Place {
    tenancy: Arc<Tenancy>,
    id: u64,
    evict: tokio_util::sync::CancellationToken,
}

impl Place {
    /// The connection's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Runs `connection` until it ends or is to be closed: another needs its place while it
    /// waits for a request head, or its first head did not come in time.
    pub(crate) async fn serve<F: Future>(&self, connection: F) {
        let mut connection = std::pin::pin!(connection);
        // Once, before it may be closed to make room: a request sent with the connection has
        // its head read (and is then in flight) by the time another could take its place.
        let ended =
            std::future::poll_fn(|cx| Poll::Ready(connection.as_mut().poll(cx).is_ready())).await;
        self.tenancy.polled(self.id);
        if ended {
            return;
        }
        tokio::select! {
            _ = connection => {}
            () = self.closed() => {}
        }
    }

    /// Resolves when the connection is to be closed: another needs its place while it waits
    /// for a request head, or its first head did not come in time.
    async fn closed(&self) {
        let first_head = async {
            tokio::time::sleep(self.tenancy.first_head_timeout()).await;
            if self.tenancy.served(self.id) {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = self.evict.cancelled() => {}
            () = first_head => {}
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = self.tenancy.lock();
        if let Some(conn) = state.conns.remove(&self.id) {
            if let Some(order) = conn.waiting {
                state.waiting.remove(&order);
            }
            if conn.evicted {
                state.evicting = state.evicting.saturating_sub(1);
            }
        }
        state.open = state.open.saturating_sub(1);
        drop(state);
        self.tenancy.room.notify_waiters();
    }
}

/// One request in flight: what it counts against, until the last of its answer is sent.
pub(crate) struct Ticket {
    tenancy: Arc<Tenancy>,
    id: u64,
}

impl Ticket {
    /// Counts the request against `class` from now on, unless that principal has its whole
    /// share in flight already: then the reason it is refused (503, its connection closed).
    fn attribute(&self, class: Class) -> Result<(), String> {
        let share = self.tenancy.share();
        let mut state = self.tenancy.lock();
        let Some(flight) = state.flights.get(&self.id) else {
            return Ok(());
        };
        let old = flight.class.clone();
        if old == class {
            return Ok(());
        }
        let held = state.in_flight.get(&class).copied().unwrap_or(0);
        if class != Class::Unauthenticated && held >= share {
            if let Some(flight) = state.flights.get_mut(&self.id) {
                flight.close = true;
            }
            return Err(format!(
                "{} has {held} requests in flight, its whole share of this server (--max-requests-per-principal {share}); retry when one of them has been answered",
                class.describe()
            ));
        }
        let (memory, anonymous_body) = {
            let Some(flight) = state.flights.get_mut(&self.id) else {
                return Ok(());
            };
            flight.class = class.clone();
            let anonymous_body = std::mem::take(&mut flight.anonymous_body);
            (flight.memory, anonymous_body)
        };
        state.count(&old, -1);
        state.count(&class, 1);
        if anonymous_body {
            state.anonymous_bodies = state.anonymous_bodies.saturating_sub(1);
        }
        if memory > 0 {
            state.give_memory(&old, memory);
            state.memory += memory;
            *state.memory_of.entry(class).or_default() += memory;
        }
        Ok(())
    }

    /// Records why the request was cut off; its answer says so.
    fn cut(&self, cut: Cut) {
        let mut state = self.tenancy.lock();
        if let Some(flight) = state.flights.get_mut(&self.id) {
            flight.close = true;
            flight.cut.get_or_insert(cut);
        }
    }

    /// The start of the body's reading: a request still unproven counts among the
    /// unauthenticated bodies, which have one principal's share. When the share is full, the
    /// oldest of those whose body is still coming is cut off to make room (as the longest-waiting
    /// head is): a peer without a token that keeps slow bodies coming cannot keep out a request
    /// (the viewer's login) that sends its body with its head. Returns what cuts this one off in
    /// turn, if it counts among them.
    fn begin_body(&self) -> Result<Option<tokio_util::sync::CancellationToken>, Cut> {
        let share = self.tenancy.share();
        let mut state = self.tenancy.lock();
        let reading = state.anonymous_bodies;
        let Some(flight) = state.flights.get(&self.id) else {
            return Ok(None);
        };
        if flight.class != Class::Unauthenticated || flight.anonymous_body {
            return Ok(None);
        }
        if reading >= share {
            let oldest = state
                .flights
                .iter()
                .filter(|(_, f)| f.anonymous_body && f.make_room.is_some())
                .map(|(id, _)| *id)
                .min();
            let Some(oldest) = oldest else {
                return Err(Cut::Share(format!(
                    "{reading} request bodies without a proven token are being read, the share of such requests on this server (--max-requests-per-principal {share}); send the token with the request, or retry in a moment"
                )));
            };
            if let Some(victim) = state.flights.get_mut(&oldest) {
                victim.anonymous_body = false;
                victim.close = true;
                victim.cut.get_or_insert(Cut::Busy(format!(
                    "this request's body, sent without a proven token, was still coming when a newer one needed its place (such bodies share --max-requests-per-principal {share} places); send the body as the request goes out, or send the token with it"
                )));
                if let Some(cut) = victim.make_room.take() {
                    cut.cancel();
                }
            }
            state.anonymous_bodies = state.anonymous_bodies.saturating_sub(1);
        }
        let make_room = tokio_util::sync::CancellationToken::new();
        let Some(flight) = state.flights.get_mut(&self.id) else {
            return Ok(None);
        };
        flight.anonymous_body = true;
        flight.make_room = Some(make_room.clone());
        state.anonymous_bodies += 1;
        Ok(Some(make_room))
    }

    /// The body has come whole (or failed): it no longer makes room for a newer one.
    fn end_body(&self) {
        if let Some(flight) = self.tenancy.lock().flights.get_mut(&self.id) {
            flight.make_room = None;
        }
    }

    /// Reserves `bytes` of body memory if they fit now: `Ok(true)` if reserved, `Ok(false)` if
    /// they do not fit yet, an error if they never could.
    fn try_reserve(&self, bytes: u64) -> Result<bool, Cut> {
        let budget = self.tenancy.limits.max_body_memory;
        let mut state = self.tenancy.lock();
        let Some(flight) = state.flights.get(&self.id) else {
            return Ok(true);
        };
        let class = flight.class.clone();
        let mine = flight.memory;
        // Half for a principal; an eighth for the requests without a proven token, whose only
        // body is the viewer's login (the other routes check the token before reading one).
        let (half, share) = if class == Class::Unauthenticated {
            (budget / 8, "an eighth")
        } else {
            (budget / 2, "half")
        };
        if mine.saturating_add(bytes) > half {
            return Err(Cut::TooLarge(format!(
                "the body is {} bytes; {} may hold at most {half} bytes of request bodies at once on this server ({share} of --max-body-memory {budget}); send a smaller body, or start the server with a larger --max-body-memory",
                mine.saturating_add(bytes),
                class.describe()
            )));
        }
        let held = state.memory_of.get(&class).copied().unwrap_or(0);
        if state.memory.saturating_add(bytes) > budget || held.saturating_add(bytes) > half {
            return Ok(false);
        }
        state.memory += bytes;
        *state.memory_of.entry(class).or_default() += bytes;
        if let Some(flight) = state.flights.get_mut(&self.id) {
            flight.memory += bytes;
        }
        Ok(true)
    }

    /// Reserves `bytes` of body memory, waiting up to [`MEMORY_WAIT`] for room.
    async fn reserve(&self, bytes: u64) -> Result<(), Cut> {
        let deadline = Instant::now() + MEMORY_WAIT;
        loop {
            let notified = self.tenancy.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_reserve(bytes)? {
                return Ok(());
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(deadline) => {
                    if self.try_reserve(bytes)? {
                        return Ok(());
                    }
                    let budget = self.tenancy.limits.max_body_memory;
                    return Err(Cut::Busy(format!(
                        "the server holds as many request bodies as its memory budget allows (--max-body-memory {budget} bytes, at most half of it for one principal), and this body of {bytes} bytes did not fit within {} s; retry in a moment",
                        MEMORY_WAIT.as_secs()
                    )));
                }
            }
        }
    }

    /// Gives back the request's body memory (its answer is made: the body is consumed).
    fn release_memory(&self) {
        let mut state = self.tenancy.lock();
        let Some(flight) = state.flights.get_mut(&self.id) else {
            return;
        };
        let (class, memory) = (flight.class.clone(), std::mem::take(&mut flight.memory));
        if memory > 0 {
            state.give_memory(&class, memory);
            drop(state);
            self.tenancy.room.notify_waiters();
        }
    }

    /// Why the request was cut off, if it was, and whether its connection closes.
    fn outcome(&self) -> (Option<Cut>, bool) {
        let state = self.tenancy.lock();
        state
            .flights
            .get(&self.id)
            .map_or((None, false), |flight| (flight.cut.clone(), flight.close))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.tenancy.lock();
        if let Some(flight) = state.flights.remove(&self.id) {
            state.count(&flight.class, -1);
            state.give_memory(&flight.class, flight.memory);
            if flight.anonymous_body {
                state.anonymous_bodies = state.anonymous_bodies.saturating_sub(1);
            }
            // The connection waits for its next request head, newest in the waiting order
            // (unless it closes after this answer: closing it sooner would gain nothing).
            let order = state.fresh();
            if let Some(conn) = state.conns.get_mut(&flight.conn) {
                conn.busy = conn.busy.saturating_sub(1);
                if conn.busy == 0 && !flight.close && !conn.evicted && conn.waiting.is_none() {
                    conn.waiting = Some(order);
                    state.waiting.insert(order, flight.conn);
                }
            }
        }
        drop(state);
        self.tenancy.room.notify_waiters();
    }
}

/// The handle a route names the request's principal with, in the request's extensions (weak:
/// whatever keeps the request's parts keeps no request in flight).
#[derive(Clone, Default)]
pub(crate) struct Attribution(Option<Weak<Ticket>>);

impl Attribution {
    /// Counts the request against `class`; the reason it is refused if that principal has its
    /// whole share in flight (answer 503 with `Retry-After`).
    pub(crate) fn attribute(&self, class: Class) -> Result<(), String> {
        match self.0.as_ref().and_then(Weak::upgrade) {
            Some(ticket) => ticket.attribute(class),
            None => Ok(()),
        }
    }

    /// The handle in `extensions`, or one that does nothing.
    pub(crate) fn of(extensions: &axum::http::Extensions) -> Attribution {
        extensions.get::<Attribution>().cloned().unwrap_or_default()
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Attribution {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Attribution::of(&parts.extensions))
    }
}

/// Whether a request carries the operator's token (answered from memory).
pub(crate) type IsOperator = Arc<dyn Fn(&HeaderMap) -> bool + Send + Sync>;

/// Answers `request`, which came on connection `conn`, with `app`, under the sharing rules.
pub(crate) async fn serve(
    app: Router,
    tenancy: Arc<Tenancy>,
    conn: u64,
    operator: IsOperator,
    request: Request<Incoming>,
) -> Response<Body> {
    let (ticket, evicted) = tenancy.begin(conn);
    let ticket = Arc::new(ticket);
    let http1 = request.version() <= Version::HTTP_11;
    let path: String = request.uri().path().chars().take(200).collect();
    let method = request.method().to_string();
    if evicted {
        let why = "the connection was closed to make room for another while it waited for this request's head; retry on a new connection";
        return hold(
            answer(&Cut::Busy(why.into()), &method, &path, http1),
            ticket,
        );
    }
    if operator(request.headers()) {
        if let Err(why) = ticket.attribute(Class::Operator) {
            let response = answer(&Cut::Share(why), &method, &path, http1);
            return hold(response, ticket);
        }
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (mut parts, incoming) = request.into_parts();
    parts
        .extensions
        .insert(Attribution(Some(Arc::downgrade(&ticket))));
    let body = if incoming.is_end_stream() {
        Body::new(incoming)
    } else {
        Body::new(Guarded::new(incoming, Arc::clone(&ticket), declared))
    };
    let response = match app.oneshot(Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    ticket.release_memory();
    let (cut, close) = ticket.outcome();
    let mut response = match cut {
        Some(cut) => answer(&cut, &method, &path, http1),
        None => response,
    };
    if close && http1 {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    hold(response, ticket)
}

fn hold(response: Response<Body>, ticket: Arc<Ticket>) -> Response<Body> {
    let (parts, inner) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            inner,
            _ticket: ticket,
        }),
    )
}

/// The answer to a request cut off or refused by the sharing rules (logged on stderr): on the
/// memory-stores API's routes in its error envelope, named by a request id as every answer of
/// those routes is (the `request-id` header, and `request_id` in the body), else `{"error"}`;
/// its connection closes.
fn answer(cut: &Cut, method: &str, path: &str, http1: bool) -> Response<Body> {
    let memory_stores = path == "/v1/memory_stores" || path.starts_with("/v1/memory_stores/");
    let status = match cut {
        Cut::Share(_) if memory_stores => StatusCode::TOO_MANY_REQUESTS,
        _ => cut.status(),
    };
    let reason = cut.reason();
    eprintln!(
        "mnemo serve: refused {} {method} {path:?}: {reason}",
        status.as_u16()
    );
    let request_id = memory_stores.then(super::memory_api::request_id::fresh);
    let body = match &request_id {
        Some(id) => {
            let kind = match cut {
                Cut::Slow(_) => "timeout_error",
                Cut::Busy(_) => "overloaded_error",
                Cut::Share(_) => "rate_limit_error",
                Cut::TooLarge(_) => "request_too_large",
            };
            serde_json::json!({"type": "error", "error": {"type": kind, "message": reason}, "request_id": id})
        }
        None => serde_json::json!({ "error": reason }),
    };
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(value) = request_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        headers.insert("request-id", value);
    }
    if matches!(cut, Cut::Busy(_) | Cut::Share(_)) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
    }
    if http1 {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn limits(max: usize, per_principal: usize, max_body_memory: u64) -> Connections {
        Connections {
            max,
            per_principal,
            max_body_memory,
            ..Connections::default()
        }
    }

    fn agent(name: &str) -> Class {
        Class::Agent {
            store: PathBuf::from("/store"),
            agent: name.into(),
        }
    }

    #[test]
    fn a_principal_has_exactly_its_share_in_flight_and_others_theirs() {
        runtime().block_on(async {
            let tenancy = Tenancy::new(limits(16, 2, 1 << 20));
            let mut places = Vec::new();
            let mut tickets = Vec::new();
            for _ in 0..5 {
                let place = tenancy.admit().await;
                let (ticket, evicted) = tenancy.begin(place.id());
                assert!(!evicted);
                places.push(place);
                tickets.push(ticket);
            }
            assert_eq!(tickets[0].attribute(agent("a")), Ok(()));
            assert_eq!(tickets[1].attribute(agent("a")), Ok(()));
            let refused = tickets[2]
                .attribute(agent("a"))
                .expect_err("over its share");
            assert!(
                refused.contains("--max-requests-per-principal 2"),
                "{refused}"
            );
            assert!(tickets[2].outcome().1, "its connection closes");
            // Another agent, the operator and the first agent's attached clients have shares of
            // their own.
            assert_eq!(tickets[3].attribute(agent("b")), Ok(()));
            assert_eq!(tickets[4].attribute(Class::Operator), Ok(()));
            let attached = Class::Attached(Box::new(agent("a")));
            assert_eq!(tickets[2].attribute(attached), Ok(()));
            // One of the first agent's requests ends: it has room for one more.
            drop(tickets.remove(0));
            let place = tenancy.admit().await;
            let (fresh, _) = tenancy.begin(place.id());
            assert_eq!(fresh.attribute(agent("a")), Ok(()));
            let refused = tenancy.begin(place.id()).0;
            assert!(refused.attribute(agent("a")).is_err(), "2 again");
        });
    }

    #[test]
    fn the_body_budget_fits_exactly_and_one_principal_holds_at_most_half() {
        runtime().block_on(async {
            let tenancy = Tenancy::new(limits(16, 8, 100));
            let mut places = Vec::new();
            let mut tickets = Vec::new();
            for class in [agent("a"), agent("b"), Class::Operator] {
                let place = tenancy.admit().await;
                let (ticket, _) = tenancy.begin(place.id());
                ticket.attribute(class).expect("a share");
                places.push(place);
                tickets.push(ticket);
            }
            assert!(tickets[0].try_reserve(50).expect("fits"));
            assert!(matches!(tickets[0].try_reserve(1), Err(Cut::TooLarge(_))));
            assert!(tickets[1].try_reserve(50).expect("fits exactly"));
            assert!(!tickets[2].try_reserve(1).expect("waits"));
            let started = Instant::now();
            let refused = tickets[2].reserve(1).await.expect_err("no room came");
            assert!(matches!(refused, Cut::Busy(_)), "{refused:?}");
            assert!(started.elapsed() >= MEMORY_WAIT);
            // The first request is answered: its memory comes back.
            tickets[0].release_memory();
            assert!(tickets[2].try_reserve(50).expect("fits now"));
        });
    }

    #[test]
    fn requests_without_a_token_share_one_place_for_bodies_and_an_eighth_of_the_memory() {
        runtime().block_on(async {
            let tenancy = Tenancy::new(limits(16, 2, 800));
            let mut places = Vec::new();
            let mut tickets = Vec::new();
            for _ in 0..4 {
                let place = tenancy.admit().await;
                let (ticket, _) = tenancy.begin(place.id());
                places.push(place);
                tickets.push(ticket);
            }
            assert!(tickets[0].begin_body().is_ok());
            assert!(tickets[0].begin_body().is_ok(), "counted once");
            assert!(tickets[1].begin_body().is_ok());
            // The share is full: the oldest body still coming (0's) is cut off to make room.
            let made_room = tickets[2].begin_body().expect("room made");
            assert!(made_room.is_some());
            assert!(matches!(tickets[0].outcome(), (Some(Cut::Busy(_)), true)));
            // Bodies that came whole make no room: the next is refused.
            tickets[1].end_body();
            tickets[2].end_body();
            assert!(matches!(tickets[3].begin_body(), Err(Cut::Share(_))));
            assert!(matches!(tickets[0].try_reserve(101), Err(Cut::TooLarge(_))));
            assert!(tickets[0].try_reserve(100).expect("fits"));
            // Proven, a request leaves the unauthenticated bodies (and takes its memory along).
            tickets[0].attribute(agent("a")).expect("a share");
            assert!(tickets[2].begin_body().is_ok());
            assert!(tickets[0].try_reserve(300).expect("half, for a principal"));
            drop(tickets.remove(1));
            assert!(
                matches!(tickets[2].begin_body(), Ok(Some(_))),
                "1's place is free"
            );
        });
    }

    #[test]
    fn past_the_cap_the_longest_waiting_connection_that_read_once_makes_room() {
        runtime().block_on(async {
            let tenancy = Tenancy::new(limits(2, 2, 1 << 20));
            let first = tenancy.admit().await;
            let second = tenancy.admit().await;
            // Neither has read what it was sent: the next waits.
            let waiting = tokio::time::timeout(Duration::from_millis(50), tenancy.admit()).await;
            assert!(
                waiting.is_err(),
                "took the place of a connection not yet read"
            );
            tenancy.polled(first.id());
            tenancy.polled(second.id());
            // A request in flight on the second: the first, waiting, makes room.
            let (ticket, _) = tenancy.begin(second.id());
            let admitting = tokio::spawn({
                let tenancy = Arc::clone(&tenancy);
                async move { tenancy.admit().await }
            });
            tokio::time::timeout(Duration::from_secs(5), first.evict.cancelled())
                .await
                .expect("the waiting one is told to close");
            assert!(!second.evict.is_cancelled());
            drop(first);
            let third = tokio::time::timeout(Duration::from_secs(5), admitting)
                .await
                .expect("admitted")
                .expect("admit");
            drop((ticket, third, second));
        });
    }
}
