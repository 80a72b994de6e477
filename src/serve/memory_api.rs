//! Anthropic's memory-stores API (`/v1/memory_stores`) on a `--data` server: the routes the
//! official SDKs call (`client.beta.memory_stores`), answered from Mnemo's stores.
//!
//! A memory store is a store of the data directory (id `memstore_NAME`), labelled with a name,
//! description and metadata ([`label`]); a memory is a file under the memory tool's root (the
//! memory at `/a/b.md` is the memory tool's `/memories/a/b.md`), named by the seq of the event
//! that created it (`mem_SEQ`), which follows it through renames and edits; its current version
//! is the last event that changed its content or its path (`memver_SEQ_MEMSEQ`).
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/memory_stores` | a new store, labelled as asked |
//! | `GET /v1/memory_stores` | the stores, in id order (`limit`, `page`, `include_archived`, `created_at_gte`, `created_at_lte`) |
//! | `GET, POST, DELETE /v1/memory_stores/{id}` | one store: its label, a change to it, its deletion |
//! | `POST /v1/memory_stores/{id}/archive` | the store, archived for good |
//! | `GET /v1/memory_stores/{id}/memories` | its memories in path order (`path_prefix`, `depth`, `limit`, `page`, `view`) |
//! | `GET /v1/memory_stores/{id}/memories/{mem}` | one memory (`view`) |
//! | `POST /v1/memory_stores/{id}/memories` | a new memory (`path`, `content`) |
//! | `POST /v1/memory_stores/{id}/memories/{mem}` | the memory with new `content` and/or `path`, under an optional `precondition` |
//! | `DELETE /v1/memory_stores/{id}/memories/{mem}` | its deletion (`expected_content_sha256`) |
//!
//! A write is one event of the store's log ([`crate::model::tool::api::ApiWrite`], answered by the pure
//! core in the writer, so its condition is checked in the step that writes and a replay checks
//! it again), recorded under the agent `X-Mnemo-Agent` names, else `operator`. Every route takes
//! the operator token, as `x-api-key` (what the SDKs send) or as a bearer token; errors are the
//! API's envelope. Memory versions are listed, retrieved and redacted ([`versions`]).
//!
//! Where each part lives: this module the routes' table and what every route shares (the
//! operator's and agents' credentials, the body's limits, the errors); [`memory_stores`] the
//! stores' own routes; [`memories`] the memories' (and the writes' lookups and retries);
//! [`versions`] the versions'; [`label`] a store's chained label; [`wire`] the API's objects.

mod label;
mod memories;
mod memory_stores;
pub(super) mod request_id;
mod versions;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body as HttpBody, Bytes};
use axum::extract::{Path as RoutePath, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;

use super::auth::Refusal;
use super::auth::named_agent;
use super::stores::{Stores, Unavailable};
use super::tenancy::{Attribution, Class};
use crate::memory_store::ids;
use crate::memory_store::objects::Memory;
use crate::memory_store::reading::{self, Listing};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::time::{now_ms, parse_rfc3339, utc};
use crate::model::tool::Body;
use crate::model::tool::api::{ApiFailure, ApiWrite};
use label::Label;
use memories::{
    create_memory, delete_memory, list_memories, open, retrieve_memory, update_memory, writer_agent,
};
use memory_stores::{
    archive_store, create_store, delete_store, list_stores, retrieve_store, time_filter,
    update_store,
};
use wire::{ApiError, ApiQuery, Deleted, MemoryStore, Page, ok};

/// The name and description the label of the store in `store_dir` (named `name` in its data
/// directory) gives it, for the viewer's stores page: a store made without the memory-stores API
/// is named after its directory, with no description. `None` when the label cannot be read.
pub(super) fn name_and_description(
    store_dir: &std::path::Path,
    name: &str,
) -> Option<(String, String)> {
    label::read(store_dir, name)
        .ok()
        .map(|label| (label.name, label.description))
}

/// The routes, over the data server's stores.
pub(super) fn routes() -> Router<Arc<Stores>> {
    Router::new()
        .route("/v1/memory_stores", get(list_stores).post(create_store))
        .route(
            "/v1/memory_stores/{id}",
            get(retrieve_store).post(update_store).delete(delete_store),
        )
        .route("/v1/memory_stores/{id}/archive", post(archive_store))
        .route(
            "/v1/memory_stores/{id}/memories",
            get(list_memories).post(create_memory),
        )
        .route(
            "/v1/memory_stores/{id}/memories/{memory}",
            get(retrieve_memory)
                .post(update_memory)
                .delete(delete_memory),
        )
        .route(
            "/v1/memory_stores/{id}/memory_versions",
            get(versions::list),
        )
        .route(
            "/v1/memory_stores/{id}/memory_versions/{version}",
            get(versions::retrieve),
        )
        .route(
            "/v1/memory_stores/{id}/memory_versions/{version}/redact",
            post(versions::redact),
        )
        .layer(axum::middleware::from_fn(request_id::name_request))
}

/// The `view` query of a memory's or a version's route (`basic` or `full`).
#[derive(Deserialize)]
struct ViewQuery {
    view: Option<String>,
}

/// The request's refusal unless it carries the operator token and names this server.
fn operator(stores: &Stores, headers: &HeaderMap) -> Result<(), ApiError> {
    match stores.operator_refusal(headers) {
        None => Ok(()),
        Some(Refusal::Unauthorized(why)) => Err(ApiError::Authentication(format!(
            "{why}; the memory-stores API takes the operator token of the data directory's server file, as x-api-key or as Authorization: Bearer"
        ))),
        Some(Refusal::Forbidden(why) | Refusal::ForeignHost(why)) => Err(ApiError::Permission(why)),
        Some(Refusal::BadRequest(why)) => Err(ApiError::InvalidRequest(why)),
        // The server's own trouble (the token could not be checked): worth a retry.
        Some(Refusal::Unavailable(why)) => Err(ApiError::Overloaded(why)),
        // A 5xx is only ever the server's own failure; what is left is the request's.
        Some(other) => Err(ApiError::InvalidRequest(other.status_and_reason().1)),
    }
}

/// Whom a request to one memory store's memories or versions is from.
struct Who {
    /// The agent it acts as: an agent token's own, or for the operator the one `X-Mnemo-Agent`
    /// names (else `operator`).
    agent: String,
    /// Whether it carries the operator token.
    operator: bool,
}

impl Who {
    /// The agent whose read grants filter what it is shown (none for the operator, who reads
    /// everything, as on the read routes).
    fn reader(&self) -> Option<&str> {
        (!self.operator).then_some(self.agent.as_str())
    }
}

/// Turns away, before any store is opened, a request that names another server or carries no
/// token at all.
fn credentials(stores: &Stores, headers: &HeaderMap) -> Result<(), ApiError> {
    match stores.operator_refusal(headers) {
        None => Ok(()),
        Some(Refusal::Unauthorized(_)) if super::auth::bearer(headers).is_ok() => Ok(()),
        Some(_) => operator(stores, headers),
    }
}

/// Who the request to the opened store `id` is from: the operator, or an agent token this store
/// issued. A token this store did not issue is answered as for a store that does not exist.
fn who(
    stores: &Stores,
    served: &super::stores::Served,
    id: &str,
    headers: &HeaderMap,
    attribution: &Attribution,
) -> Result<Who, ApiError> {
    if stores.operator_refusal(headers).is_none() {
        return Ok(Who {
            agent: writer_agent(headers)?,
            operator: true,
        });
    }
    match served.shared().caller(headers) {
        Ok(caller) => {
            // From here on the request counts against its agent's share of the server.
            attribution
                .attribute(Class::Agent {
                    store: served.shared().store_dir().to_path_buf(),
                    agent: caller.agent.clone(),
                })
                .map_err(ApiError::RateLimited)?;
            Ok(Who {
                agent: caller.agent,
                operator: false,
            })
        }
        Err(Refusal::Forbidden(why)) => Err(ApiError::Permission(why)),
        Err(Refusal::BadRequest(why)) => Err(ApiError::InvalidRequest(why)),
        Err(Refusal::Unavailable(why)) => Err(ApiError::Overloaded(why)),
        // Only the holder of the whole token learns that this store revoked it.
        Err(refusal) if refusal.is_revoked() => Err(ApiError::Authentication(
            super::auth::REVOKED_TOKEN.to_string(),
        )),
        Err(_) => Err(no_store(id)),
    }
}

/// Refuses an agent token: the route is the operator's.
fn operator_only(who: &Who, what: &str) -> Result<(), ApiError> {
    if who.operator {
        Ok(())
    } else {
        Err(ApiError::Permission(format!(
            "{what} is the operator's; an agent token reads and writes the memories of its store"
        )))
    }
}

/// Runs blocking store work off the async workers.
async fn run<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Api(format!("the call did not finish ({e}); retry")))?
}

fn store_failed(e: crate::Error) -> ApiError {
    match e {
        crate::Error::InvalidArgument(why) => ApiError::InvalidRequest(why),
        // A fleet node that lost the store: nothing was written; the node resends the request
        // to the new holder (or the client retries).
        e @ crate::Error::Fenced { .. } => ApiError::Overloaded(e.to_string()),
        other => ApiError::Api(format!(
            "the store failed ({other}); retry, and check the server's disk if it persists"
        )),
    }
}

fn no_store(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::NotFound(format!(
        "there is no memory store {shown:?}; list them with GET /v1/memory_stores"
    ))
}

fn unavailable(stores: &Stores, id: &str, why: Unavailable) -> ApiError {
    match why {
        Unavailable::Missing => no_store(id),
        Unavailable::Busy => ApiError::Overloaded(
            "every open store has a call in flight and the server is at --max-open-stores; retry in a moment".into(),
        ),
        Unavailable::Failed(why) => ApiError::Api(format!(
            "the memory store {id:?} could not be opened ({why}); {}",
            super::stores::check_advice("NAME", stores.fleet().is_some())
        )),
        Unavailable::Elsewhere(url) => ApiError::Overloaded(format!(
            "the memory store {id:?} was just taken by the fleet's node at {url}; retry, and this node forwards the request there"
        )),
    }
}

/// The store name and directory the memory-store id `id` names, if it is one.
fn resolve(stores: &Stores, id: &str) -> Result<(String, std::path::PathBuf), ApiError> {
    let name = ids::store_name(id).ok_or_else(|| no_store(id))?;
    let dir = stores.located(name).ok_or_else(|| no_store(id))?;
    Ok((name.to_string(), dir))
}

fn store_object(name: &str, label: Label) -> MemoryStore {
    MemoryStore {
        kind: "memory_store",
        id: ids::store_id(name),
        name: label.name,
        description: label.description,
        metadata: label.metadata,
        created_at: utc(label.created_ms),
        updated_at: utc(label.updated_ms),
        archived_at: label.archived_ms.map(utc),
    }
}

/// A JSON object body as `T`, or the error that says what a valid one looks like.
fn body<T: serde::de::DeserializeOwned>(bytes: &Bytes, valid: &str) -> Result<T, ApiError> {
    let object = serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| v.is_object());
    if !object {
        return Err(ApiError::InvalidRequest(format!(
            "the body must be a JSON object such as {valid}"
        )));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::InvalidRequest(format!("{e}; a valid body is {valid}")))
}

/// The most bytes a body of this API may hold.
const BODY_MAX: usize = 2 * 1024 * 1024;

/// The request's body, read only once the request is known to come from someone (so that it
/// counts against its principal's share and memory, not against the unauthenticated peers').
async fn read(body: HttpBody) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, BODY_MAX).await.map_err(|e| {
        ApiError::InvalidRequest(format!(
            "the body could not be read ({e}); send at most {BODY_MAX} bytes of JSON"
        ))
    })
}

/// Proves, before the body is read, who a request to the store `id` is from: the operator (known
/// from memory), or an agent token the store issued, which the request then counts against.
async fn admit(
    stores: &Arc<Stores>,
    id: &str,
    headers: &HeaderMap,
    attribution: &Attribution,
) -> Result<(), ApiError> {
    if stores.operator_refusal(headers).is_none() {
        return Ok(());
    }
    let (stores, id, headers, attribution) = (
        Arc::clone(stores),
        id.to_string(),
        headers.clone(),
        attribution.clone(),
    );
    run(move || {
        let (_, served) = open(&stores, &id)?;
        who(&stores, &served, &id, &headers, &attribution).map(|_| ())
    })
    .await
}

/// A limit between 1 and `max`, `default` when none is given.
fn limit(asked: Option<usize>, default: usize, max: usize) -> Result<usize, ApiError> {
    match asked.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(ApiError::InvalidRequest(format!(
            "limit must be between 1 and {max}, not {n}"
        ))),
    }
}

/// Whether `view` asks for content: `basic` (the default `basic_default`) or `full`.
fn full_view(view: Option<&str>, full_default: bool) -> Result<bool, ApiError> {
    match view {
        None => Ok(full_default),
        Some("basic") => Ok(false),
        Some("full") => Ok(true),
        Some(other) => Err(ApiError::InvalidRequest(format!(
            "view must be basic or full, not {other:?}"
        ))),
    }
}
