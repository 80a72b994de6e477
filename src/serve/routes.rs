//! The routes: the memory tool, the read routes, and MCP at `/mcp`.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/memory` | the `tool_result` JSON for the body (a `tool_use` block or a bare input) |
//! | `GET /v1/head` | `{"seq", "hash", "checkpoint"}` of the last event |
//! | `GET /v1/verify?expect=` | the report, as `mnemo verify --json [--expect SEQ:HASH]` prints it |
//! | `GET /v1/verify?progress=1` | NDJSON: `{"progress": {"done", "of"}}` lines while the log is replayed, then the report (or `{"error"}`) |
//! | `GET /v1/log?agent=&path=&from=&limit=` | one JSON object per line, as `mnemo log --json` |
//! | `GET /v1/ls?dir=&at=` | `{"dir", "at", "files": [{"path", "bytes", "created", "updated"}]}` (`dir=/`: the whole store) |
//! | `GET /v1/cat?path=&at=` | the file's content (`text/plain`), as `mnemo cat` prints it |
//! | `GET /v1/history?path=` | one JSON object per line, as `mnemo history --json` |
//! | `GET /v1/show?seq=` | one event whole, as `mnemo show --json` |
//! | `GET /v1/diff?from=&to=&path=` | one JSON object per changed file, as `mnemo diff --json` |
//! | `GET /v1/trace?seq=&path=` | where event `seq`'s content went, as `mnemo trace --json` |
//! | `GET /v1/acl` | one JSON object per line, as `mnemo acl list --json` |
//! | `POST /v1/acl` | `{"action": "grant", "agent", "prefix", "access"}` or `{"action": "revoke", "agent", "prefix"}` in, `{"seq", "result"}` out |
//! | `GET /v1/tokens` | one JSON object per line, as `mnemo token list --json` |
//! | `POST /v1/tokens` | `{"agent", "label"}` in, `{"id", "agent", "label", "seq", "result", "token"}` out: the token, once |
//! | `DELETE /v1/tokens/ID` | `{"seq", "result"}`; 400 for an id that is not valid, 404 for an unknown id, 409 for one already revoked |
//! | `GET /v1/attach`, `/v1/records?tag=`, `/v1/whoami`, `POST /v1/memory/oversized` | see [`clients`](super::clients) |
//! | `/mcp` | MCP over streamable HTTP |
//!
//! A call to `/v1/memory` is recorded under the request's agent, like any memory-tool call, and
//! its status is 200 whether the tool result is an error or not. A client may name the settings
//! its tool server answers with in the query (`?root=&profile=&durability=&max_file_bytes=&max_request_bytes=&view_max_chars=`,
//! as a [`MnemoClient`] of a served store does): a call whose settings differ from the server's
//! is refused with 409 and records nothing. The read routes are not logged
//! and are the operator's. The admin routes are the operator's too; a change is an admin event
//! recorded under the name the operator gives in `X-Mnemo-Agent`, else [`OPERATOR`], and one the store refuses (a revoke of a grant that is
//! not there) is logged with its error, answered 400 `{"error", "seq"}`. Errors are
//! `{"error": "..."}` with a 4xx or 5xx status.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::auth::{Caller, Refusal, named_agent};
use super::{Shared, refuse};
use crate::audit::history::{LogQuery, absolute_path};
use crate::client::MnemoClient;
use crate::client::redact::Selection;
use crate::client::remote::Answering;
use crate::client::revert::RevertScope;
use crate::client::store_failures::{AFTER_HEADER, header_text};
use crate::client::token;
use crate::model::credential::OPERATOR;
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::policy::{Access, AdminCommand};
use crate::store::log::Head;
use crate::store::writer::Receipt;

/// The router of every route, over `shared`; `stop` ends the MCP streams.
pub(crate) fn router(shared: Arc<Shared>, stop: CancellationToken) -> Router {
    let mcp = super::mcp::service(Arc::clone(&shared), stop.clone());
    Router::new()
        .route("/v1/memory", post(memory))
        .route("/v1/head", get(head))
        .route("/v1/replication", get(replication))
        .route("/v1/verify", get(verify))
        .route("/v1/log", get(log))
        .route("/v1/ls", get(ls))
        .route("/v1/cat", get(cat))
        .route("/v1/history", get(history))
        .route("/v1/show", get(show))
        .route("/v1/diff", get(diff))
        .route("/v1/trace", get(trace))
        .route("/v1/acl", get(acl_list).post(acl_change))
        .route("/v1/tokens", get(tokens_list).post(token_create))
        .route("/v1/tokens/{id}", delete(token_revoke))
        .route("/v1/redact", post(redact))
        .route("/v1/revert", post(revert))
        .route("/v1/replicate", post(replicate))
        .route("/v1/config", get(config_list).post(config_set))
        .route_layer(axum::middleware::map_response(json_rejection))
        .merge(super::clients::routes(stop))
        .nest_service("/mcp", mcp)
        .fallback(not_found)
        .with_state(shared)
}

/// The largest refusal text of the framework's that [`json_rejection`] reads.
const REJECTION_MAX: usize = 16 * 1024;

/// A request the framework refused before the route ran (a query string of the wrong shape, such
/// as `limit=abc`: its refusal is plain text) answers, as the routes themselves do, `{"error"}`.
async fn json_rejection(response: Response) -> Response {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/plain"));
    if !(plain && response.status().is_client_error()) {
        return response;
    }
    let status = response.status();
    let text = axum::body::to_bytes(response.into_body(), REJECTION_MAX)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    error(
        status,
        &format!("{text}; the route's parameters are in docs/http-api.md"),
    )
}

/// An error answer: `{"error": reason}` with `status`.
pub(crate) fn error(status: StatusCode, reason: &str) -> Response {
    let body = json!({ "error": reason }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn json_body(bytes: Vec<u8>, content_type: &'static str) -> Response {
    let mut response = Response::new(Body::from(bytes));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such route; the routes are POST /v1/memory, /v1/memory/oversized, GET /v1/head, /v1/verify, /v1/log, /v1/ls, /v1/cat, /v1/history, /v1/show, /v1/diff, /v1/trace, /v1/records, /v1/attach, GET and POST /v1/acl and /v1/tokens, DELETE /v1/tokens/ID, POST /v1/redact, POST /v1/revert, POST /v1/replicate, GET and POST /v1/config, and MCP at /mcp",
    )
}

/// What went wrong in a route.
pub(super) enum Failure {
    /// The request asked for something invalid (400), or that is not there (404); or an answer
    /// with its own status and a reason to say as it is.
    Client(StatusCode, String),
    /// The store failed (500).
    Storage(String),
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        match self {
            Failure::Client(status, why) => error(status, &why),
            Failure::Storage(why) => error(StatusCode::INTERNAL_SERVER_ERROR, &store_failed(&why)),
        }
    }
}

/// What a store failure is answered with.
fn store_failed(why: &str) -> String {
    format!("the store failed ({why}); retry, and check the server's disk if it persists")
}

impl From<crate::Error> for Failure {
    fn from(e: crate::Error) -> Failure {
        match e {
            crate::Error::InvalidArgument(why) => Failure::Client(StatusCode::BAD_REQUEST, why),
            // The object store failed or holds something it should not: not the store's fault.
            e @ (crate::Error::Replica { .. } | crate::Error::ReplicaDamaged { .. }) => {
                Failure::Client(StatusCode::BAD_GATEWAY, e.to_string())
            }
            // A fleet node that lost the store: nothing was written; the node resends the
            // request to the new holder (or the client retries).
            e @ crate::Error::Fenced { .. } => {
                Failure::Client(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            // Said as it is: a retry or a look at the disk would not help (each says what
            // would: a restore, the store's own file put back, or a restart that reopens it).
            e @ (crate::Error::ChainBroken { .. }
            | crate::Error::Corrupt { .. }
            | crate::Error::UnsafeFile { .. }
            | crate::Error::Poisoned { .. }
            | crate::Error::WriterStopped { .. }) => {
                Failure::Client(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
            other => Failure::Storage(other.to_string()),
        }
    }
}

/// Runs a blocking store call on the worker thread that polls the request, which tokio first
/// relieves of its other tasks (`block_in_place`): no hand-off to the blocking pool and back, which
/// cost about 40% of the server's CPU time per call. The server's runtime is multi-threaded, as
/// `block_in_place` requires, and a call once started runs to its end even if the client goes away.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::block_in_place(call)
}

/// The read routes are the operator's.
fn operator(caller: &Caller) -> Result<(), Failure> {
    if caller.principal.is_operator() {
        Ok(())
    } else {
        Err(Failure::Client(
            StatusCode::FORBIDDEN,
            "the read routes need the operator's token; an agent token reaches only the memory tool and what its clients use: POST /v1/memory, POST /v1/memory/oversized, GET /v1/records, GET /v1/whoami, GET /v1/attach and /mcp".into(),
        ))
    }
}

/// A request of the operator's (the read routes, the replica's and the admin lists): refused
/// with 403 for any other principal; holds the store's client.
struct Operator(MnemoClient);

impl axum::extract::FromRequestParts<Arc<Shared>> for Operator {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        shared: &Arc<Shared>,
    ) -> Result<Self, Failure> {
        caller_of(parts).and_then(operator)?;
        Ok(Operator(shared.client().clone()))
    }
}

/// An admin change of the operator's: refused as [`Operator`] is; holds the client the change
/// is recorded through ([`operator_client`]).
struct AdminChange(MnemoClient);

impl axum::extract::FromRequestParts<Arc<Shared>> for AdminChange {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        shared: &Arc<Shared>,
    ) -> Result<Self, Failure> {
        caller_of(parts).and_then(operator)?;
        Ok(AdminChange(operator_client(shared, &parts.headers)?))
    }
}

/// Who the request came from, as the gate proved it.
fn caller_of(parts: &axum::http::request::Parts) -> Result<&Caller, Failure> {
    parts.extensions.get::<Caller>().ok_or_else(|| {
        Failure::Storage("the request reached a route without passing the gate".into())
    })
}

/// The settings a call's tool server answers with, as it sent them
/// (`?root=&profile=&durability=&max_file_bytes=&max_request_bytes=&view_max_chars=`): none
/// from a client that sends none.
pub(crate) type Asked = Query<HashMap<String, String>>;

/// The refusal (409, nothing recorded) of a call whose tool server answers with settings other
/// than this server's: answering it here would give other strings than the caller's own would.
pub(crate) fn settings_refusal(
    shared: &Shared,
    asked: &HashMap<String, String>,
) -> Option<Response> {
    settings_differ(shared, asked).map(|why| error(StatusCode::CONFLICT, &why))
}

/// Why a call whose tool server answers with the settings `asked` is refused here (409), if it
/// is: the settings that differ from this server's.
pub(crate) fn settings_differ(shared: &Shared, asked: &HashMap<String, String>) -> Option<String> {
    let here = Answering {
        root: shared.tool.root().to_string(),
        profile: shared.tool.profile(),
        limits: shared.tool.limits(),
        durability: shared.client().durability(),
    };
    let differ: Vec<String> = here
        .query()
        .into_iter()
        .filter_map(|(key, ours)| match asked.get(key) {
            Some(theirs) if *theirs != ours => {
                Some(format!("{key} {ours} here, {theirs} in the caller's"))
            }
            _ => None,
        })
        .collect();
    if differ.is_empty() {
        return None;
    }
    Some(format!(
        "this server answers memory calls with other settings than the calling tool server ({}); build the tool server with the server's settings (its root, profile and limits, and the client's durability), or stop the server and open the store in your process",
        differ.join("; ")
    ))
}

async fn memory(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Query(asked): Asked,
    body: Body,
) -> Response {
    if let Some(refused) = settings_refusal(&shared, &asked) {
        return refused;
    }
    let max = shared.max_request_bytes();
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) if super::tenancy::cut_off(&e) => {
            // Answered (and logged) by the accept loop, as too slow or over the memory budget.
            return error(StatusCode::REQUEST_TIMEOUT, &e.to_string());
        }
        Err(e) => {
            let why = e.to_string();
            let refusal = if is_too_large(e) {
                Refusal::TooLarge {
                    bytes: max.saturating_add(1),
                    limit: max,
                }
            } else {
                Refusal::BadRequest(format!("the body could not be read ({why})"))
            };
            return refuse("POST", "/v1/memory", &refusal);
        }
    };
    let tool = match shared.tool_for(&caller.agent) {
        Ok(tool) => tool,
        Err(why) => return Failure::Client(StatusCode::BAD_REQUEST, why).into_response(),
    };
    // As `mnemo tool` answers a line: JSON is handled as by `handle`, anything else (bytes that
    // are not UTF-8 too) is recorded as a rejected call and answered with an error result.
    let answered = blocking(move || {
        let told = tool.handle_bytes_told(&bytes);
        let body = serde_json::to_vec(&told.result).map_err(|e| Failure::Storage(e.to_string()))?;
        Ok((body, told.after))
    })
    .await;
    match answered {
        Ok((bytes, after)) => {
            let mut response = json_body(bytes, "application/json");
            // What failed after the answer goes beside it (the answer is the recorded one).
            if let Some(after) = after
                .as_deref()
                .map(header_text)
                .and_then(|text| HeaderValue::from_str(&text).ok())
            {
                response.headers_mut().insert(AFTER_HEADER, after);
            }
            response
        }
        Err(failure) => failure.into_response(),
    }
}

/// Whether reading the body failed because it passed the limit (a body sent without a length).
pub(super) fn is_too_large(e: axum::Error) -> bool {
    e.into_inner()
        .downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
}

async fn head(Operator(client): Operator) -> Result<Response, Failure> {
    let head = blocking(move || Ok(client.head()?)).await?;
    let body = json!({
        "seq": head.seq.0,
        "hash": head.hash.to_hex(),
        "checkpoint": head.to_string(),
    });
    Ok(json_body(body.to_string().into_bytes(), "application/json"))
}

/// `GET /v1/replication`: how far the replica is (operator only, as the head is).
async fn replication(State(shared): State<Arc<Shared>>, _: Operator) -> Result<Response, Failure> {
    let status = shared.replication().ok_or_else(|| {
        Failure::Client(
            StatusCode::NOT_FOUND,
            "this server does not replicate its store; start it with `mnemo serve --replicate URL`"
                .into(),
        )
    })?;
    Ok(json_body(
        status.to_string().into_bytes(),
        "application/json",
    ))
}

/// `/v1/verify`'s query.
#[derive(Deserialize)]
struct VerifyParams {
    expect: Option<String>,
    /// `1`: stream progress lines before the report (see [`verify_progress`]).
    progress: Option<String>,
}

async fn verify(
    State(shared): State<Arc<Shared>>,
    Operator(client): Operator,
    Query(params): Query<VerifyParams>,
) -> Result<Response, Failure> {
    let expect = params.expect.as_deref().map(Head::parse).transpose()?;
    match params.progress.as_deref() {
        None | Some("0") => {}
        Some("1") => return Ok(verify_progress(Arc::clone(&shared), expect)),
        Some(other) => {
            return Err(Failure::Client(
                StatusCode::BAD_REQUEST,
                format!(
                    "progress is 1 (stream progress lines, then the report) or 0, not {other:?}"
                ),
            ));
        }
    }
    let report = blocking(move || {
        let report = client.verify_with(expect)?;
        Ok(report.to_protocol(client.path()))
    })
    .await?;
    shared.remember_verify(&report);
    Ok(typed_body(&report))
}

/// How many lines of a verification's progress wait for a slow reader; past that, progress
/// lines are dropped (a later one, or the report, says more) rather than waited for.
const PROGRESS_QUEUE: usize = 16;

/// `GET /v1/verify?progress=1`: NDJSON, a line `{"progress": {"done", "of"}}` at the start (0
/// done) and every [`PROGRESS_EVERY`](crate::audit::verify::PROGRESS_EVERY) events, then the report as
/// the plain route answers it, or `{"error"}` if the store failed meanwhile. The status is sent
/// before the replay ends, so a failure can only be told in that last line. The replay runs on
/// the blocking pool, not on the request's worker thread, so that the lines flow while it runs.
///
/// The replay holds the store's writer, as the plain route's does, so it never waits for the
/// reader: a progress line that finds the queue full is dropped. A reader that went away stops
/// nothing: the replay runs to its end, as the plain route's does.
fn verify_progress(shared: Arc<Shared>, expect: Option<Head>) -> Response {
    let client = shared.client().clone();
    let (lines, mut queue) = tokio::sync::mpsc::channel::<Value>(PROGRESS_QUEUE);
    tokio::task::spawn_blocking(move || {
        let last = client.head().and_then(|head| {
            let _ = lines.try_send(json!({"progress": {"done": 0, "of": head.seq.0}}));
            client.verify_watching(expect, &mut |done, of| {
                let _ = lines.try_send(json!({"progress": {"done": done, "of": of}}));
            })
        });
        let last = match last {
            Ok(report) => {
                let report = report.to_protocol(client.path());
                shared.remember_verify(&report);
                serde_json::to_value(report).unwrap_or_else(|e| json!({ "error": e.to_string() }))
            }
            // As the plain route's 4xx or 5xx body says it.
            Err(e) => json!({ "error": match Failure::from(e) {
                Failure::Client(_, why) => why,
                Failure::Storage(why) => store_failed(&why),
            }}),
        };
        // The writer is let go by now: the report waits for room.
        let _ = lines.blocking_send(last);
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        queue.poll_recv(cx).map(|line| {
            line.map(|line| {
                let mut bytes = line.to_string().into_bytes();
                bytes.push(b'\n');
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(bytes))
            })
        })
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `/v1/log`'s query.
#[derive(Deserialize)]
struct LogParams {
    agent: Option<String>,
    path: Option<String>,
    command: Option<String>,
    error: Option<bool>,
    since_ms: Option<u64>,
    until_ms: Option<u64>,
    from: Option<u64>,
    before: Option<u64>,
    limit: Option<usize>,
    scan: Option<u64>,
}

async fn log(
    State(shared): State<Arc<Shared>>,
    Operator(client): Operator,
    headers: HeaderMap,
    Query(params): Query<LogParams>,
) -> Result<Response, Failure> {
    // The viewer's timeline (its requests alone carry the CSRF header): its next pages read the
    // past, so the state they read it from is brought up now, in the background.
    if headers.contains_key(super::viewer::CSRF_HEADER) {
        shared.warm_past();
    }
    let query = LogQuery {
        agent: params.agent,
        path: params.path.as_deref().map(absolute_path).transpose()?,
        command: params.command,
        errors: params.error,
        since_ms: params.since_ms,
        until_ms: params.until_ms,
        from: params.from.unwrap_or(1),
        before: params.before,
        limit: params.limit,
        scan: params.scan,
    };
    let events = blocking(move || Ok(client.log(&query)?)).await?;
    Ok(lines(events))
}

/// `/v1/ls`'s and `/v1/cat`'s query.
#[derive(Deserialize)]
struct TreeParams {
    dir: Option<String>,
    path: Option<String>,
    at: Option<u64>,
}

async fn ls(
    State(shared): State<Arc<Shared>>,
    Operator(client): Operator,
    Query(params): Query<TreeParams>,
) -> Result<Response, Failure> {
    // `/` too: the whole store, as `mnemo export` reads it.
    let dir = MemPath::absolute(params.dir.as_deref().unwrap_or(shared.root()))
        .map_err(crate::Error::InvalidArgument)?;
    let at = params.at.map(Seq);
    let listing = blocking(move || Ok(client.listing(&dir, at)?)).await?;
    Ok(typed_body(&listing))
}

async fn cat(
    Operator(client): Operator,
    Query(params): Query<TreeParams>,
) -> Result<Response, Failure> {
    let Some(raw) = params.path.as_deref() else {
        return Err(Failure::Client(
            StatusCode::BAD_REQUEST,
            "name the file: /v1/cat?path=/memories/notes.md".into(),
        ));
    };
    let file = absolute_path(raw)?;
    let at = params.at.map(Seq);
    let wanted = file.clone();
    let content = blocking(move || Ok(client.content_at(&wanted, at)?)).await?;
    match content {
        Some(content) => Ok(json_body(content.into_bytes(), "text/plain; charset=utf-8")),
        None => Err(Failure::Client(
            StatusCode::NOT_FOUND,
            format!(
                "no file at {file}{}; list files with /v1/ls",
                params
                    .at
                    .map(|s| format!(" after seq {s}"))
                    .unwrap_or_default()
            ),
        )),
    }
}

/// `/v1/history`'s query.
#[derive(Deserialize)]
struct HistoryParams {
    path: Option<String>,
}

async fn history(
    Operator(client): Operator,
    Query(params): Query<HistoryParams>,
) -> Result<Response, Failure> {
    let Some(raw) = params.path.as_deref() else {
        return Err(Failure::Client(
            StatusCode::BAD_REQUEST,
            "name the file: /v1/history?path=/memories/notes.md".into(),
        ));
    };
    let file: MemPath = absolute_path(raw)?;
    let events = blocking(move || Ok(client.history(&file)?)).await?;
    Ok(lines(events))
}

/// `/v1/show`'s query.
#[derive(Deserialize)]
struct ShowParams {
    seq: Option<u64>,
}

/// One event whole, as `mnemo show --json` prints it.
async fn show(
    Operator(client): Operator,
    Query(params): Query<ShowParams>,
) -> Result<Response, Failure> {
    let Some(seq) = params.seq else {
        return Err(Failure::Client(
            StatusCode::BAD_REQUEST,
            "name the event: /v1/show?seq=12".into(),
        ));
    };
    let shown = blocking(move || Ok(client.show(Seq(seq))?)).await?;
    Ok(typed_body(&shown))
}

/// `/v1/trace`'s query.
#[derive(Deserialize)]
struct TraceParams {
    seq: Option<u64>,
    path: Option<String>,
}

/// Where an event's content went, as `mnemo trace --json` prints it: the operator's, like every
/// read route (an agent token gets 403).
async fn trace(
    Operator(client): Operator,
    Query(params): Query<TraceParams>,
) -> Result<Response, Failure> {
    let Some(seq) = params.seq else {
        return Err(Failure::Client(
            StatusCode::BAD_REQUEST,
            "name the event: /v1/trace?seq=12 (and &path=/memories/notes.md for a file's content right after it)".into(),
        ));
    };
    let file = params.path.as_deref().map(absolute_path).transpose()?;
    let report = blocking(move || Ok(client.trace(Seq(seq), file.as_ref())?)).await?;
    Ok(typed_body(&report))
}

/// `/v1/diff`'s query.
#[derive(Deserialize)]
struct DiffParams {
    from: Option<u64>,
    to: Option<u64>,
    path: Option<String>,
}

/// The files changed between two events, one JSON object per line, as `mnemo diff --json`.
async fn diff(
    Operator(client): Operator,
    Query(params): Query<DiffParams>,
) -> Result<Response, Failure> {
    let (Some(from), Some(to)) = (params.from, params.to) else {
        return Err(Failure::Client(
            StatusCode::BAD_REQUEST,
            "name both events: /v1/diff?from=0&to=12 (and optionally &path=/memories/notes)".into(),
        ));
    };
    let dir = absolute_path(params.path.as_deref().unwrap_or("/memories"))?;
    let files = blocking(move || Ok(client.diff(Seq(from), Seq(to), &dir)?)).await?;
    Ok(lines(files))
}

/// The most bytes an admin route reads of its body, but `POST /v1/redact`'s, whose texts may be
/// as long as a note.
const ADMIN_BODY_MAX: usize = 64 * 1024;

/// An admin route's JSON body of at most `cap` bytes, parsed as `T`; `shape` shows a valid one.
async fn admin_body<T: serde::de::DeserializeOwned>(
    shared: &Shared,
    body: Body,
    cap: usize,
    shape: &str,
) -> Result<T, Failure> {
    // The server's request limit, if lower: a body sent in chunks is cut off there too.
    let limit = usize::try_from(shared.max_request_bytes())
        .unwrap_or(usize::MAX)
        .min(cap);
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        let why = e.to_string();
        let status = match is_too_large(e) {
            true => StatusCode::PAYLOAD_TOO_LARGE,
            false => StatusCode::BAD_REQUEST,
        };
        Failure::Client(
            status,
            format!("the body could not be read ({why}); send at most {limit} bytes of JSON such as {shape}"),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::Client(
            StatusCode::BAD_REQUEST,
            format!("the body is not what this route takes ({e}); send JSON such as {shape}"),
        )
    })
}

/// The client an admin change is recorded through: as the name the operator gave in
/// `X-Mnemo-Agent` or `X-Mnemo-Agent-Encoded` (`mnemo acl grant --as NAME` sends it), else as
/// [`OPERATOR`].
fn operator_client(shared: &Shared, headers: &HeaderMap) -> Result<MnemoClient, Failure> {
    // The caller was authenticated with these headers, so they name at most one agent.
    let name = named_agent(headers)
        .ok()
        .flatten()
        .unwrap_or_else(|| OPERATOR.to_string());
    Ok(shared.client().with_agent(name)?)
}

/// The answer to an admin change: `{"seq", "result"}`, or 400 `{"error", "seq"}` when the store
/// refused it (the refusal is logged like any call).
fn admin_answer(receipt: &Receipt) -> Response {
    if receipt.is_error {
        let body = json!({"error": receipt.text, "seq": receipt.seq.0}).to_string();
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    let body = json!({"seq": receipt.seq.0, "result": receipt.text});
    json_body(body.to_string().into_bytes(), "application/json")
}

/// JSON lines of `values`.
fn lines<T: serde::Serialize>(values: impl IntoIterator<Item = T>) -> Response {
    let mut out = Vec::new();
    for value in values {
        // Writing to a Vec fails only for a value serde cannot write, which these types are not.
        let _ = serde_json::to_writer(&mut out, &value);
        out.push(b'\n');
    }
    json_body(out, "application/x-ndjson")
}

/// `value` as a JSON body.
fn typed_body<T: serde::Serialize>(value: &T) -> Response {
    json_body(
        serde_json::to_vec(value).unwrap_or_default(),
        "application/json",
    )
}

async fn acl_list(Operator(client): Operator) -> Result<Response, Failure> {
    let policy = blocking(move || Ok(client.policy()?)).await?;
    Ok(lines(
        policy
            .grants()
            .iter()
            .map(crate::model::policy::Grant::to_json),
    ))
}

/// `POST /v1/acl`'s body.
#[derive(Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case", deny_unknown_fields)]
enum AclChange {
    Grant {
        agent: String,
        prefix: String,
        access: String,
    },
    Revoke {
        agent: String,
        prefix: String,
    },
}

const ACL_SHAPE: &str = r#"{"action": "grant", "agent": "planner", "prefix": "/memories/plans", "access": "read-write"} or {"action": "revoke", "agent": "planner", "prefix": "/memories/plans"}"#;

async fn acl_change(
    State(shared): State<Arc<Shared>>,
    AdminChange(client): AdminChange,
    body: Body,
) -> Result<Response, Failure> {
    let command = match admin_body(&shared, body, ADMIN_BODY_MAX, ACL_SHAPE).await? {
        AclChange::Grant {
            agent,
            prefix,
            access,
        } => AdminCommand::Grant {
            agent,
            prefix,
            access: Access::from_name(&access).ok_or_else(|| {
                Failure::Client(
                    StatusCode::BAD_REQUEST,
                    format!("unknown access {access:?}; use read or read-write"),
                )
            })?,
        },
        AclChange::Revoke { agent, prefix } => AdminCommand::Revoke { agent, prefix },
    };
    let receipt = blocking(move || Ok(client.admin(command)?)).await?;
    Ok(admin_answer(&receipt))
}

async fn tokens_list(Operator(client): Operator) -> Result<Response, Failure> {
    let listed = blocking(move || Ok(client.tokens()?)).await?;
    Ok(lines(listed))
}

/// `POST /v1/tokens`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenRequest {
    agent: String,
    #[serde(default)]
    label: String,
}

async fn token_create(
    State(shared): State<Arc<Shared>>,
    AdminChange(client): AdminChange,
    body: Body,
) -> Result<Response, Failure> {
    let wanted: TokenRequest = admin_body(
        &shared,
        body,
        ADMIN_BODY_MAX,
        r#"{"agent": "planner", "label": "ci runner"}"#,
    )
    .await?;
    let (agent, label) = (wanted.agent.clone(), wanted.label.clone());
    let issued = blocking(move || Ok(token::issue(&client, &wanted.agent, &wanted.label)?)).await?;
    if issued.receipt.is_error {
        return Ok(admin_answer(&issued.receipt));
    }
    let body = json!({
        "id": issued.token.id(),
        "agent": agent,
        "label": label,
        "seq": issued.receipt.seq.0,
        "result": issued.receipt.text,
        "token": issued.token.text(),
    });
    // The token is shown this once: no cache may keep it.
    let mut response = json_body(body.to_string().into_bytes(), "application/json");
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn token_revoke(
    AdminChange(client): AdminChange,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    token::check_id(&id).map_err(|why| Failure::Client(StatusCode::BAD_REQUEST, why))?;
    let receipt = blocking(move || match client.token(&id)? {
        None => Err(Failure::Client(
            StatusCode::NOT_FOUND,
            crate::model::credential::unknown_id(&id),
        )),
        Some(token::TokenRecord {
            revoked: Some(revoked),
            ..
        }) => Err(Failure::Client(
            StatusCode::CONFLICT,
            crate::model::credential::already_revoked(&id, &revoked),
        )),
        Some(_) => Ok(token::revoke(&client, &id)?),
    })
    .await?;
    Ok(admin_answer(&receipt))
}

/// `POST /v1/redact`'s body: what to erase and why (see `mnemo redact`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RedactRequest {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    seqs: Vec<u64>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    texts: Vec<String>,
    #[serde(default)]
    dry_run: bool,
}

/// Erases events' content, recorded under the operator's name (`X-Mnemo-Agent`, else
/// `operator`): the store is closed for the rewrite, so calls wait until it is open again. With
/// `"dry_run": true`, what would be erased, changing nothing.
async fn redact(
    State(shared): State<Arc<Shared>>,
    AdminChange(client): AdminChange,
    body: Body,
) -> Result<Response, Failure> {
    // The request limit alone: a text to erase may be as long as the note that holds it.
    let wanted: RedactRequest = admin_body(
        &shared,
        body,
        usize::MAX,
        r#"{"reason": "asked to be forgotten", "paths": ["/memories/people/ann.md"], "seqs": [12], "texts": ["hunter2"], "dry_run": false}"#,
    )
    .await?;
    let selection = Selection {
        seqs: wanted.seqs.into_iter().map(Seq).collect(),
        paths: wanted.paths,
        texts: wanted.texts,
    };
    let body = blocking(move || {
        if wanted.dry_run {
            let plan = client.redaction_plan(&selection)?;
            let mut body = plan.to_json();
            body["seq"] = Value::Null;
            body["result"] = plan.summary().into();
            return Ok(body);
        }
        let done = client.redact(&wanted.reason, &selection)?;
        let mut body = done.plan.to_json();
        body["seq"] = done.seq.0.into();
        body["result"] = done.summary().into();
        Ok(body)
    })
    .await?;
    Ok(json_body(body.to_string().into_bytes(), "application/json"))
}

/// `POST /v1/revert`'s body: what to put back (see `mnemo revert`), `to` (with `path`) or
/// `agent` with `since`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevertRequest {
    #[serde(default)]
    to: Option<u64>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    since: Option<u64>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    force: bool,
}

/// Puts files back as they were after an earlier event, recorded under the operator's name
/// (`X-Mnemo-Agent`, else `operator`): the revert's record, then its calls. With `"dry_run":
/// true`, the plan (calls, writes undone, conflicts), changing nothing.
async fn revert(
    State(shared): State<Arc<Shared>>,
    AdminChange(client): AdminChange,
    body: Body,
) -> Result<Response, Failure> {
    let wanted: RevertRequest = admin_body(
        &shared,
        body,
        ADMIN_BODY_MAX,
        r#"{"to": 40, "path": "/memories/plan.md", "dry_run": true} or {"agent": "agent-2", "since": 40, "force": false}"#,
    )
    .await?;
    let scope = RevertScope::of(
        wanted.to.map(Seq),
        wanted.path,
        wanted.agent,
        wanted.since.map(Seq),
    );
    let scope = match scope {
        Some(scope) => scope,
        None => {
            return Err(Failure::Client(
                StatusCode::BAD_REQUEST,
                "say what to put back: {\"to\": SEQ} (with \"path\"), or {\"agent\": A, \"since\": SEQ}".into(),
            ));
        }
    };
    let body = blocking(move || {
        if wanted.dry_run {
            let plan = client.revert_plan(&scope)?;
            let mut body = plan.to_json();
            body["record"] = Value::Null;
            body["last"] = Value::Null;
            body["result"] = plan.summary().into();
            return Ok(body);
        }
        let done = client.revert(&scope, wanted.force)?;
        let mut body = done.to_json();
        body["result"] = done.summary().into();
        Ok(body)
    })
    .await?;
    Ok(json_body(body.to_string().into_bytes(), "application/json"))
}

/// `POST /v1/replicate`'s body: the replica to ship to.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplicateRequest {
    to: String,
}

/// Ships, once, every event of the store the replica at `to` lacks (`mnemo replicate --once`
/// on a store this server holds, which could not open it): the answer's `result` is what that
/// command prints. Writers do not wait: the shipment reads what they made durable.
async fn replicate(
    State(shared): State<Arc<Shared>>,
    Operator(client): Operator,
    body: Body,
) -> Result<Response, Failure> {
    let wanted: ReplicateRequest = admin_body(
        &shared,
        body,
        ADMIN_BODY_MAX,
        r#"{"to": "s3://bucket/prefix"}"#,
    )
    .await?;
    let store_dir = shared.store_dir().to_path_buf();
    let body = blocking(move || ship_once(&client, &store_dir, &wanted.to)).await?;
    Ok(json_body(body.to_string().into_bytes(), "application/json"))
}

#[cfg(feature = "replicate")]
fn ship_once(
    client: &MnemoClient,
    store_dir: &std::path::Path,
    url: &str,
) -> Result<Value, Failure> {
    // Refused before anything is made for it.
    crate::replica::Replica::check_url_apart(url, store_dir)?;
    let replica = crate::replica::Replica::open(url, true)?;
    // Up to what the writer made durable, as the server's own shipper ships.
    let end = client.head()?.seq;
    let shipped = client.ship_upto(&replica, end)?;
    Ok(json!({
        "result": shipped.summary(url),
        "from": shipped.from.0,
        "head": {"seq": shipped.head.seq.0, "hash": shipped.head.hash.to_hex()},
        "segments": shipped.segments,
    }))
}

#[cfg(not(feature = "replicate"))]
fn ship_once(_: &MnemoClient, _: &std::path::Path, _: &str) -> Result<Value, Failure> {
    Err(Failure::Client(
        StatusCode::NOT_IMPLEMENTED,
        "this server was built without replicas (`--features replicate`): stop it and ship with `mnemo replicate --once`, or run a mnemo built with them".into(),
    ))
}

/// The store settings, one JSON object per line: `{"name": "delete", "value": "keep"}`.
async fn config_list(Operator(client): Operator) -> Result<Response, Failure> {
    let settings = blocking(move || Ok(client.settings()?)).await?;
    Ok(lines(settings.into_iter().map(
        |(name, value)| json!({"name": name, "value": value}),
    )))
}

/// `POST /v1/config`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRequest {
    name: String,
    value: String,
}

/// Sets a store setting, recorded as an admin event under the operator's name.
async fn config_set(
    State(shared): State<Arc<Shared>>,
    AdminChange(client): AdminChange,
    body: Body,
) -> Result<Response, Failure> {
    let wanted: ConfigRequest = admin_body(
        &shared,
        body,
        ADMIN_BODY_MAX,
        r#"{"name": "delete", "value": "erase"}"#,
    )
    .await?;
    let receipt = blocking(move || Ok(client.configure(&wanted.name, &wanted.value)?)).await?;
    Ok(admin_answer(&receipt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_past_the_limit_is_told_apart_from_a_broken_one() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let read = |body: &'static str, limit| {
            runtime.block_on(axum::body::to_bytes(Body::from(body), limit))
        };
        let too_large = read("{\"command\": \"view\"}", 4).expect_err("over the limit");
        assert!(is_too_large(too_large));
        assert!(read("{}", 4).is_ok());
        assert!(!is_too_large(axum::Error::new(std::io::Error::other(
            "reset"
        ))));
    }
}
