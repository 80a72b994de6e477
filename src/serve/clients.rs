//! The routes that stdio clients of the server need beyond the memory tool: staying attached,
//! the agent's own memory files, whom a token proves, and the refusal of a request too large to
//! send.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/attach` | a body that never ends on its own: one `\n` every [`HEARTBEAT`], until the client hangs up or the server stops |
//! | `GET /v1/records?tag=` | `{"files": [{"path", "content", "tags", "created", "updated"}]}`: the files carrying `tag` (`memorytool`, `path:/memories/x`) that the request's agent may read |
//! | `GET /v1/whoami` | `{"principal": "operator" or "agent", "agent"}`: whom the request's token proves |
//! | `GET /v1/identity?challenge=` | the hex of [`identity_proof`](crate::client::discovery::identity_proof) of the challenge: asked *without* a token, before a client sends one, so that a process squatting on a dead server's address, or the server of the store a copy was made from, is told apart from the server of this store |
//! | `POST /v1/memory/oversized` | the `tool_result` JSON for a request over the size limit, from its digest `{"len", "hash", "prefix"}` (and optionally the block's `"tool_use_id"`, and `"stopped": true` for an object whose conversion to text stopped at the limit) |
//!
//! **Attached clients.** `--idle-exit` counts requests in progress, and an attach is one for as
//! long as its connection is open: a `mnemo tool` or `mnemo mcp` that reaches the server holds
//! one for its whole life, so the server does not stop under it. A client killed with `kill -9`
//! has its socket closed by the kernel; the next heartbeat fails to send, the body is dropped
//! and the client no longer counts. On a stop the bodies end, so a graceful shutdown does not
//! wait for them; nor does a server with an idle exit whose store a storage failure stopped,
//! which exits once no call is in progress (its attached clients' next calls start a server
//! that reopens the store).
//!
//! The records route is access-checked for the request's agent, like an MCP resource read, and
//! not logged. The oversized route records what `mnemo tool` records for a line it never held
//! whole: a refusal carrying the line's digest (the client hashed it while reading). A digest of
//! a request within the limit is refused: that request belongs on `/v1/memory`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::auth::Caller;
use super::routes::{Asked, Failure, error, settings_refusal};
use crate::model::event::InputDigest;
use crate::model::tool::request::Request;
use crate::store::projection::MemoryRecord;

/// How often an attached client is sent a heartbeat (and so how soon a dead one is noticed).
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// The longest digest prefix a client can have made: 256 bytes of input, each invalid byte
/// shown as U+FFFD (3 bytes).
const MAX_PREFIX_BYTES: usize = 3 * 256;

/// The route a request over the size limit is recorded through, as its digest.
const OVERSIZED: &str = "/v1/memory/oversized";

/// The largest body the oversized route takes: a digest, whatever the request limit.
const DIGEST_BODY_BYTES: u64 = 4096;

/// The largest body the gate lets through to `route`: the request limit, except for the digest
/// of a request over it (which may be longer than a small limit).
pub(crate) fn body_limit(route: &str, max_request_bytes: u64) -> u64 {
    if route == OVERSIZED {
        max_request_bytes.max(DIGEST_BODY_BYTES)
    } else {
        max_request_bytes
    }
}

/// The routes of this module, over `shared`; `stop` ends the attached bodies.
pub(crate) fn routes(stop: CancellationToken) -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/attach", get(attach))
        .route("/v1/records", get(records))
        .route(WHOAMI, get(whoami))
        .route(IDENTITY, get(identity))
        .route(OVERSIZED, post(oversized))
        .layer(Extension(stop))
}

/// The route that tells a caller whom its token proves.
pub(crate) const WHOAMI: &str = "/v1/whoami";

/// `GET /v1/whoami`: whom the request's token proves, `{"principal": "operator" | "agent",
/// "agent"}` (the agent it acts as). A fleet's node asks a store's holder so when a viewer logs
/// in with one of the store's agent tokens through another node.
async fn whoami(Extension(caller): Extension<Caller>) -> Response {
    let principal = match caller.principal {
        super::auth::Principal::Operator => "operator",
        super::auth::Principal::Agent(_) => "agent",
    };
    json(json!({"principal": principal, "agent": caller.agent}).to_string())
}

/// The route a client proves the server on, the one route the gate admits without a token.
pub(crate) const IDENTITY: &str = "/v1/identity";

/// The longest challenge taken: a client sends 64 hex digits.
const CHALLENGE_MAX: usize = 128;

/// Whether `text` is a challenge a client may send: 1 to [`CHALLENGE_MAX`] hex digits.
pub(crate) fn is_challenge(text: &str) -> bool {
    !text.is_empty() && text.len() <= CHALLENGE_MAX && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[derive(Deserialize)]
struct Challenge {
    challenge: String,
}

/// `GET /v1/identity?challenge=`: the proof that this server holds the operator token of its
/// server file and serves the store directory it has open (the one sled opened, again after a
/// redaction put a new directory in its place; not whatever is at its path now).
async fn identity(State(shared): State<Arc<Shared>>, query: Query<Challenge>) -> Response {
    let dir = shared
        .client()
        .store_dir_id()
        .map_err(|e| std::io::Error::other(e.to_string()));
    prove(shared.operator_token(), &query.challenge, dir)
}

/// The answer to an identity challenge: the proof for `token` and the directory `dir`, or why
/// there is none.
pub(crate) fn prove(
    token: &str,
    challenge: &str,
    dir: std::io::Result<crate::store::disk::DirId>,
) -> Response {
    if !is_challenge(challenge) {
        return error(
            StatusCode::BAD_REQUEST,
            "the challenge must be 1 to 128 hex digits: GET /v1/identity?challenge=HEX",
        );
    }
    match dir.map(|dir| crate::client::discovery::identity_proof(token, challenge, dir)) {
        Ok(proof) => proof.to_hex().to_string().into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store directory cannot be read now ({e}); retry"),
        ),
    }
}

async fn attach(
    State(shared): State<Arc<Shared>>,
    Extension(stop): Extension<CancellationToken>,
) -> Response {
    let attached = shared.activity.attach();
    let mut ticks = tokio::time::interval(HEARTBEAT);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let beats = futures_util::stream::unfold(
        (ticks, attached, stop),
        |(mut ticks, attached, stop)| async move {
            tokio::select! {
                () = stop.cancelled() => None,
                _ = ticks.tick() => Some((
                    Ok::<_, std::io::Error>(Bytes::from_static(b"\n")),
                    (ticks, attached, stop),
                )),
            }
        },
    );
    let mut response = Response::new(Body::from_stream(beats));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `/v1/records`'s query.
#[derive(Deserialize)]
struct RecordsParams {
    tag: Option<String>,
}

async fn records(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Query(params): Query<RecordsParams>,
) -> Response {
    let Some(tag) = params.tag else {
        return error(
            StatusCode::BAD_REQUEST,
            "name the tag: /v1/records?tag=memorytool, or ?tag=path:/memories/notes.md",
        );
    };
    let tool = match shared.tool_for(&caller.agent) {
        Ok(tool) => tool,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why),
    };
    let listed =
        tokio::task::spawn_blocking(move || tool.client().records_by_tag(&tag).map(files_json))
            .await;
    match listed {
        Ok(Ok(body)) => json(body.to_string()),
        // As every route says a store error: damage and a stopped store as they are.
        Ok(Err(e)) => Failure::from(e).into_response(),
        Err(e) => store_failed(&format!("the call did not finish: {e}")),
    }
}

fn files_json(records: Vec<MemoryRecord>) -> serde_json::Value {
    let files: Vec<serde_json::Value> = records
        .into_iter()
        .map(|r| {
            json!({
                "path": r.path,
                "content": r.content,
                "tags": r.tags,
                "created": r.created.0,
                "updated": r.updated.0,
            })
        })
        .collect();
    json!({ "files": files })
}

/// `POST /v1/memory/oversized`'s body: the digest (its `hash` as 64 hex digits, or as the array
/// of 32 numbers the Rust client sends), and optionally the block's `tool_use_id` and whether
/// the input is an object whose conversion to text `stopped` at the limit.
#[derive(Deserialize)]
#[serde(try_from = "OversizedBody")]
struct Oversized {
    digest: InputDigest,
    tool_use_id: Option<String>,
    stopped: bool,
}

/// [`Oversized`] as sent.
#[derive(Deserialize)]
struct OversizedBody {
    len: u64,
    hash: DigestHash,
    prefix: String,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    stopped: bool,
}

/// A digest's `hash`: hex text, or 32 numbers.
#[derive(Deserialize)]
#[serde(untagged)]
enum DigestHash {
    Hex(String),
    Bytes([u8; 32]),
}

impl TryFrom<OversizedBody> for Oversized {
    type Error = String;

    fn try_from(body: OversizedBody) -> Result<Oversized, String> {
        let hash = match body.hash {
            DigestHash::Bytes(bytes) => crate::model::event::EventHash(bytes),
            DigestHash::Hex(hex) => {
                crate::model::event::EventHash::from_hex(&hex).ok_or_else(|| {
                    "hash is not 64 hex digits (the blake3 of the request's bytes)".to_string()
                })?
            }
        };
        Ok(Oversized {
            digest: InputDigest {
                len: body.len,
                hash,
                prefix: body.prefix,
            },
            tool_use_id: body.tool_use_id,
            stopped: body.stopped,
        })
    }
}

async fn oversized(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Query(asked): Asked,
    body: Body,
) -> Response {
    if let Some(refused) = settings_refusal(&shared, &asked) {
        return refused;
    }
    let limit = usize::try_from(DIGEST_BODY_BYTES).unwrap_or(usize::MAX);
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("a digest takes at most {DIGEST_BODY_BYTES} bytes"),
        );
    };
    let answered =
        tokio::task::spawn_blocking(move || answer_oversized(&shared, &caller.agent, &body)).await;
    match answered {
        Ok(Ok(text)) => json(text),
        Ok(Err((status, why))) => error(status, &why),
        Err(e) => store_failed(&format!("the call did not finish: {e}")),
    }
}

/// The `tool_result` JSON text for the digest `body` of a request over the limit, recorded as
/// `agent`'s call, or the status and reason of its refusal (on a blocking thread: it writes).
pub(crate) fn answer_oversized(
    shared: &Shared,
    agent: &str,
    body: &[u8],
) -> Result<String, (StatusCode, String)> {
    let Oversized {
        digest,
        tool_use_id,
        stopped,
    } = serde_json::from_slice(body).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!(
                "the body is not a digest ({e}); send {{\"len\": BYTES, \"hash\": HEX, \"prefix\": TEXT}}"
            ),
        )
    })?;
    let limit = shared.max_request_bytes();
    if digest.len <= limit || digest.prefix.len() > MAX_PREFIX_BYTES {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "this digest is not one of a request over the limit of {limit} bytes (with a prefix of at most {MAX_PREFIX_BYTES} bytes); send the request itself to POST /v1/memory"
            ),
        ));
    }
    let tool = shared
        .tool_for(agent)
        .map_err(|why| (StatusCode::BAD_REQUEST, why))?;
    let answer = if stopped {
        tool.handle_request(Request::Stopped {
            digest,
            tool_use_id,
        })
    } else {
        tool.refuse_too_large(tool_use_id, digest)
    };
    serde_json::to_string(&answer).map_err(|e| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the store failed ({e}); retry, and check the server's disk if it persists"),
        )
    })
}

fn json(text: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

fn store_failed(why: &str) -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("the store failed ({why}); retry, and check the server's disk if it persists"),
    )
}
