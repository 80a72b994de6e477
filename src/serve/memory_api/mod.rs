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
//! A write is one event of the store's log ([`crate::tool::api::ApiWrite`], answered by the pure
//! core in the writer, so its condition is checked in the step that writes and a replay checks
//! it again), recorded under the agent `X-Mnemo-Agent` names, else `operator`. Every route takes
//! the operator token, as `x-api-key` (what the SDKs send) or as a bearer token; errors are the
//! API's envelope. Memory versions are not served yet.

mod label;
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
use crate::event::Seq;
use crate::memory_store::ids;
use crate::memory_store::objects::Memory;
use crate::memory_store::reading::{self, Listing};
use crate::paths::MemPath;
use crate::time::{now_ms, parse_rfc3339, utc};
use crate::tool::Body;
use crate::tool::api::{ApiFailure, ApiWrite};
use label::Label;
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

fn unavailable(id: &str, why: Unavailable) -> ApiError {
    match why {
        Unavailable::Missing => no_store(id),
        Unavailable::Busy => ApiError::Overloaded(
            "every open store has a call in flight and the server is at --max-open-stores; retry in a moment".into(),
        ),
        Unavailable::Failed(why) => ApiError::Api(format!(
            "the memory store {id:?} could not be opened ({why}); check it with `mnemo verify --db DIR/NAME` once no server holds it"
        )),
    }
}

/// The store name and directory the memory-store id `id` names, if it is one.
fn resolve(stores: &Stores, id: &str) -> Result<(String, std::path::PathBuf), ApiError> {
    let name = ids::store_name(id).ok_or_else(|| no_store(id))?;
    let dir = crate::data_dir::store_dir(stores.dir(), name).ok_or_else(|| no_store(id))?;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewStore {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

const NEW_STORE: &str =
    r#"{"name": "Notes of user 1042", "description": "...", "metadata": {"user": "1042"}}"#;

fn check_label(label: &Label) -> Result<(), ApiError> {
    label::check_name(&label.name)
        .or_else(|| label::check_description(&label.description))
        .or_else(|| label::check_metadata(&label.metadata))
        .map_or(Ok(()), |why| Err(ApiError::InvalidRequest(why)))
}

async fn create_store(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let bytes = read(sent).await?;
    let asked: NewStore = body(&bytes, NEW_STORE)?;
    let now = now_ms();
    let label = Label {
        name: asked.name,
        description: asked.description,
        metadata: asked.metadata,
        created_ms: now,
        updated_ms: now,
        archived_ms: None,
    };
    check_label(&label)?;
    run(move || {
        // 26 random hex digits: a store name no one chose, so ids do not collide.
        let name = crate::token::random_hex(13).map_err(|e| ApiError::Api(e.to_string()))?;
        match stores.create(&name) {
            Ok(true) => {}
            Ok(false) => return Err(ApiError::Api("a fresh store name was taken; retry".into())),
            Err(why) => return Err(unavailable(&ids::store_id(&name), why)),
        }
        let dir = resolve(&stores, &ids::store_id(&name))?.1;
        let (_, served) = open(&stores, &ids::store_id(&name))?;
        label::record(&served, &dir, &label).map_err(store_failed)?;
        Ok(ok(&store_object(&name, label)))
    })
    .await
}

#[derive(Deserialize)]
struct StoreQuery {
    limit: Option<usize>,
    page: Option<String>,
    include_archived: Option<bool>,
    created_at_gte: Option<String>,
    created_at_lte: Option<String>,
}

/// A time filter's milliseconds.
fn time_filter(name: &str, value: Option<&str>) -> Result<Option<u64>, ApiError> {
    value
        .map(|text| {
            parse_rfc3339(text).ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "{name} must be an RFC 3339 time such as 2026-12-04T08:00:00Z, not {text:?}"
                ))
            })
        })
        .transpose()
}

async fn list_stores(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    query: ApiQuery<StoreQuery>,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let limit = limit(query.limit, 20, 100)?;
    let after = query.page.as_deref().map(wire::page_key).transpose()?;
    let from = time_filter("created_at_gte", query.created_at_gte.as_deref())?;
    let to = time_filter("created_at_lte", query.created_at_lte.as_deref())?;
    let archived = query.include_archived.unwrap_or(false);
    run(move || {
        let mut found = Vec::new();
        let mut cursor = after;
        let mut more = false;
        'scan: loop {
            let (names, rest) = crate::data_dir::list(stores.dir(), cursor.as_deref(), 100)
                .map_err(|e| ApiError::Api(format!("the data directory: {e}")))?;
            for name in names {
                cursor = Some(name.clone());
                let Some(dir) = crate::data_dir::store_dir(stores.dir(), &name) else {
                    continue;
                };
                let label = label::listed(&dir, &name);
                let shown = (archived || label.archived_ms.is_none())
                    && from.is_none_or(|from| label.created_ms >= from)
                    && to.is_none_or(|to| label.created_ms <= to);
                if !shown {
                    continue;
                }
                if found.len() == limit {
                    more = true;
                    break 'scan;
                }
                found.push(store_object(&name, label));
            }
            if !rest {
                break;
            }
        }
        let next_page = more
            .then(|| {
                found
                    .last()
                    .map(|s| wire::page_token(ids::store_name(&s.id).unwrap_or("")))
            })
            .flatten();
        Ok(ok(&Page {
            data: found,
            next_page,
        }))
    })
    .await
}

async fn retrieve_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    run(move || {
        let (name, dir) = resolve(&stores, &id)?;
        let (_, served) = open(&stores, &id)?;
        if stores.operator_refusal(&headers).is_some() {
            // An agent token sees its own store only.
            who(&stores, &served, &id, &headers, &attribution)?;
        }
        let label = label::current(&served, &dir, &name).map_err(store_failed)?;
        Ok(ok(&store_object(&name, label)))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreChange {
    name: Option<String>,
    description: Option<String>,
    metadata: Option<BTreeMap<String, Option<String>>>,
}

const STORE_CHANGE: &str =
    r#"{"name": "...", "description": "...", "metadata": {"user": "1042", "old-key": null}}"#;

/// Serializes changes to labels: each is read, changed and written whole.
static LABELS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Reads the label of the store `id` names, lets `change` change it, and writes it back.
fn relabel(
    stores: &Stores,
    id: &str,
    change: impl FnOnce(&mut Label) -> Result<(), ApiError>,
) -> Result<Response, ApiError> {
    let _one = LABELS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (name, dir) = resolve(stores, id)?;
    let (_, served) = open(stores, id)?;
    let mut label = label::current(&served, &dir, &name).map_err(store_failed)?;
    change(&mut label)?;
    label.updated_ms = now_ms().max(label.created_ms);
    check_label(&label)?;
    label::record(&served, &dir, &label).map_err(store_failed)?;
    Ok(ok(&store_object(&name, label)))
}

fn refuse_archived(label: &Label) -> Result<(), ApiError> {
    match label.archived_ms {
        Some(ms) => Err(ApiError::InvalidRequest(format!(
            "the memory store was archived at {} and can no longer be changed; its memories can still be read",
            utc(ms)
        ))),
        None => Ok(()),
    }
}

async fn update_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let bytes = read(sent).await?;
    let asked: StoreChange = body(&bytes, STORE_CHANGE)?;
    run(move || {
        relabel(&stores, &id, |label| {
            refuse_archived(label)?;
            if let Some(name) = asked.name {
                label.name = name;
            }
            if let Some(description) = asked.description {
                label.description = description;
            }
            for (key, value) in asked.metadata.unwrap_or_default() {
                match value {
                    Some(value) => label.metadata.insert(key, value),
                    None => label.metadata.remove(&key),
                };
            }
            Ok(())
        })
    })
    .await
}

async fn archive_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    run(move || {
        relabel(&stores, &id, |label| {
            refuse_archived(label)?;
            label.archived_ms = Some(now_ms());
            Ok(())
        })
    })
    .await
}

async fn delete_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    run(move || {
        let (name, _) = resolve(&stores, &id)?;
        stores
            .delete(&name)
            .map_err(|(status, why)| match status.as_u16() {
                404 => no_store(&id),
                409 => ApiError::Conflict(why),
                _ => ApiError::Api(why),
            })?;
        Ok(ok(&Deleted {
            kind: "memory_store_deleted",
            id,
        }))
    })
    .await
}

#[derive(Deserialize)]
struct MemoryQuery {
    path_prefix: Option<String>,
    depth: Option<usize>,
    limit: Option<usize>,
    page: Option<String>,
    view: Option<String>,
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

/// A `path_prefix`: `/`, or absolute whole segments ending in `/` (`/notes/`).
fn check_prefix(prefix: &str) -> Result<(), ApiError> {
    let segment =
        |s: &str| !s.is_empty() && s != "." && s != ".." && !s.chars().any(char::is_control);
    let valid = prefix.len() <= 1024
        && match prefix.strip_prefix('/') {
            Some("") => true,
            Some(rest) => rest
                .strip_suffix('/')
                .is_some_and(|inner| inner.split('/').all(segment)),
            None => false,
        };
    if valid {
        Ok(())
    } else {
        Err(ApiError::InvalidRequest(format!(
            "path_prefix must start and end with / and name whole segments, such as /notes/, not {prefix:?}"
        )))
    }
}

/// The store `id` names, opened (the store stays open while the answer is made).
fn open(stores: &Stores, id: &str) -> Result<(String, Arc<super::stores::Served>), ApiError> {
    let (name, _) = resolve(stores, id)?;
    let served = stores.get(&name).map_err(|why| unavailable(id, why))?;
    Ok((name, served))
}

async fn list_memories(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    query: ApiQuery<MemoryQuery>,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    let full = full_view(query.view.as_deref(), false)?;
    let limit = limit(query.limit, 20, 100)?.min(if full { 20 } else { 100 });
    let prefix = query.path_prefix.clone().unwrap_or_else(|| "/".into());
    check_prefix(&prefix)?;
    let depth = query.depth.unwrap_or(0);
    let after = query.page.as_deref().map(wire::page_key).transpose()?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        let shared = served.shared();
        let root = MemPath::absolute(shared.root()).map_err(ApiError::Api)?;
        let asked = Listing {
            prefix: &prefix,
            depth,
            after: after.as_deref(),
            limit,
            full,
            reader: who.reader(),
        };
        let store_id = ids::store_id(&name);
        let (data, next) = shared
            .client()
            .memory_page(&root, &store_id, &asked)
            .map_err(store_failed)?;
        let page = Page {
            data,
            next_page: next.map(|key| wire::page_token(&key)),
        };
        Ok(ok(&page))
    })
    .await
}

#[derive(Deserialize)]
struct ViewQuery {
    view: Option<String>,
}

fn no_memory(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::NotFound(format!(
        "there is no memory {shown:?} in this store; list them with GET /v1/memory_stores/{{id}}/memories"
    ))
}

async fn retrieve_memory(
    State(stores): State<Arc<Stores>>,
    RoutePath((id, memory)): RoutePath<(String, String)>,
    headers: HeaderMap,
    query: ApiQuery<ViewQuery>,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    let full = full_view(query.view.as_deref(), true)?;
    let created = ids::memory_seq(&memory).ok_or_else(|| no_memory(&memory))?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        memory_by_seq(&served, &name, created, full, who.reader())?
            .map(|m| ok(&m))
            .ok_or_else(|| no_memory(&memory))
    })
    .await
}

/// The largest memory content, in bytes (the hosted API's).
const MAX_CONTENT_BYTES: usize = 102_400;

fn check_content(content: &str) -> Result<(), ApiError> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(ApiError::InvalidRequest(format!(
            "content is at most {MAX_CONTENT_BYTES} bytes (100 kB), not {}",
            content.len()
        )));
    }
    Ok(())
}

fn check_api_path(path: &str) -> Result<(), ApiError> {
    crate::memory_store::path_rules::check(path)
        .map_or(Ok(()), |why| Err(ApiError::InvalidRequest(why)))
}

/// The agent a write is recorded under: the one `X-Mnemo-Agent` names, else `operator`.
fn writer_agent(headers: &HeaderMap) -> Result<String, ApiError> {
    named_agent(headers)
        .map(|named| named.unwrap_or_else(|| crate::credential::OPERATOR.to_string()))
        .map_err(|refusal| ApiError::InvalidRequest(format!("{refusal:?}")))
}

/// The memory-tool path of the API path `path` in a store whose root is `root`.
fn tool_path(root: &MemPath, path: &str) -> String {
    format!("{root}{path}")
}

/// `why`, an API write's answer (which names the memory tool's paths, `/memories/a/b.md`), with
/// the paths `write` names and the directories above them as the API names them (`/a/b.md`).
fn api_message(root: &MemPath, write: &ApiWrite, why: &str) -> String {
    let prefix = root.to_string();
    let mut named: Vec<String> = Vec::new();
    for raw in write.paths() {
        named.push(raw.to_string());
        if let Ok(path) = MemPath::absolute(raw) {
            let depth = path.segments().count();
            named.extend((1..=depth).map(|d| path.ancestor(d).to_string()));
        }
    }
    named.retain(|p| {
        p.len() > prefix.len() && p.starts_with(&prefix) && p[prefix.len()..].starts_with('/')
    });
    named.sort_by_key(|p| std::cmp::Reverse(p.len()));
    named.dedup();
    // One pass, left to right, the longest path first at each place: a path already rewritten
    // is not rewritten again.
    let mut message = String::with_capacity(why.len());
    let mut rest = why;
    while let Some(c) = rest.chars().next() {
        match named.iter().find(|path| rest.starts_with(path.as_str())) {
            Some(path) => {
                message.push_str(&path[prefix.len()..]);
                rest = &rest[path.len()..];
            }
            None => {
                message.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    message
}

/// Who writes, and under which `Idempotency-Key`: the agent the writes are recorded under, and
/// the key that makes a retried request a retry of the call it repeats.
struct Writing<'a> {
    served: &'a super::stores::Served,
    agent: String,
    key: Option<String>,
    /// For an agent token: the agent whose read grants decide which memories it may name (one
    /// it may not read is answered 404, as if it were not there, before anything is logged).
    reader: Option<String>,
}

/// The `Idempotency-Key` header: 1 to 255 visible ASCII characters, at most once.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut keys = headers.get_all("idempotency-key").iter();
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return match headers.get("idempotency-key") {
            None => Ok(None),
            Some(_) => Err(ApiError::InvalidRequest(
                "send one Idempotency-Key header".into(),
            )),
        };
    };
    key.to_str()
        .ok()
        .filter(|k| (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()))
        .map(|k| Some(k.to_string()))
        .ok_or_else(|| {
            ApiError::InvalidRequest(
                "the Idempotency-Key header must be 1 to 255 visible ASCII characters".into(),
            )
        })
}

/// Whether `again` asks for what `original` asked (the path an update or delete was looked up
/// at aside: the memory may have moved since, by that very call).
fn same_request(original: &ApiWrite, again: &ApiWrite) -> bool {
    match (original, again) {
        (ApiWrite::Create { .. }, ApiWrite::Create { .. }) => original == again,
        (
            ApiWrite::Update {
                memory,
                content,
                new_path,
                expect,
                ..
            },
            ApiWrite::Update {
                memory: m,
                content: c,
                new_path: n,
                expect: e,
                ..
            },
        ) => (memory, content, new_path, expect) == (m, c, n, e),
        (
            ApiWrite::Delete { memory, expect, .. },
            ApiWrite::Delete {
                memory: m,
                expect: e,
                ..
            },
        ) => (memory, expect) == (m, e),
        _ => false,
    }
}

impl Writing<'_> {
    /// Records `write`; the seq of the event that made its change (for a retry, the original's),
    /// or the API's error.
    fn record(&self, write: ApiWrite) -> Result<Seq, ApiError> {
        let tool = self
            .served
            .shared()
            .tool_for(&self.agent)
            .map_err(ApiError::InvalidRequest)?;
        let receipt = tool
            .client()
            .call(self.key.clone(), Body::Api(write.clone()))
            .map_err(store_failed)?;
        if !receipt.is_error {
            return Ok(receipt
                .retry_of
                .filter(|_| receipt.retried)
                .unwrap_or(receipt.seq));
        }
        let root = MemPath::absolute(self.served.shared().root()).map_err(ApiError::Api)?;
        // The answer text is the log's (re-derived by `verify`), in the memory tool's paths; the
        // API names its own.
        let message = |why: &str| api_message(&root, &write, why);
        let failure = receipt.failure.zip(receipt.failure_message());
        Err(match failure {
            Some((ApiFailure::Invalid, why)) => ApiError::InvalidRequest(message(why)),
            Some((ApiFailure::NotFound, why)) => ApiError::NotFound(message(why)),
            Some((ApiFailure::Precondition, why)) => ApiError::PreconditionFailed(message(why)),
            Some((ApiFailure::PathConflict, why)) => {
                let decided = receipt
                    .retry_of
                    .filter(|_| receipt.retried)
                    .unwrap_or(receipt.seq);
                let (memory_id, path) = self.in_the_way(&root, &write, decided)?;
                ApiError::PathConflict {
                    message: message(why),
                    memory_id,
                    path,
                }
            }
            Some((ApiFailure::Permission, why)) => ApiError::Permission(message(why)),
            // A key reused for another call, or for one a redaction erased.
            None if self.key.is_some() => {
                ApiError::Conflict(receipt.text.replace("tool_use id", "Idempotency-Key"))
            }
            None => ApiError::Api(receipt.text),
        })
    }

    /// The memory that refused the path of `write` (a create's path, an update's new path) in
    /// the event `decided`, as `(conflicting_memory_id, conflicting_path)`: the memory at that
    /// path, else the one above it, else the first one under it, looked up under the writer's
    /// lock. The id is `""` (the SDKs retry then) when that memory has moved or changed since the
    /// event, or when it is one the agent may not read (its path is not named either: the path
    /// given is the write's own).
    fn in_the_way(
        &self,
        root: &MemPath,
        write: &ApiWrite,
        decided: Seq,
    ) -> Result<(String, String), ApiError> {
        let target = match write {
            ApiWrite::Create { path, .. } => Some(path.as_str()),
            ApiWrite::Update { new_path, .. } => new_path.as_deref(),
            ApiWrite::Delete { .. } => None,
        };
        let Some(target) = target.and_then(|raw| MemPath::absolute(raw).ok()) else {
            return Ok((String::new(), String::new()));
        };
        let asked = reading::api_path(root, &target).unwrap_or_default();
        let reader = self.reader.as_deref();
        let found = self
            .served
            .shared()
            .client()
            .memory_in_the_way(root, &target, reader, decided)
            .map_err(store_failed)?;
        Ok(match found {
            Some(entry) => {
                let path = reading::api_path(root, &entry.path).unwrap_or_default();
                let id = match entry.touched < decided {
                    true => ids::memory_id(entry.created),
                    false => String::new(),
                };
                (id, path)
            }
            None => (String::new(), asked),
        })
    }

    /// The write this agent made earlier under this request's key, if it made one: a retry of it
    /// is that write again (refused if the request asks for something else).
    fn earlier(&self, asked: &ApiWrite) -> Result<Option<ApiWrite>, ApiError> {
        let Some(key) = &self.key else {
            return Ok(None);
        };
        let earlier = self
            .served
            .shared()
            .client()
            .earlier_call(&self.agent, key)
            .map_err(store_failed)?;
        match earlier {
            None => Ok(None),
            Some(Body::Api(original)) if same_request(&original, asked) => Ok(Some(original)),
            // Its request cannot be compared with this one: the redaction erased it.
            Some(Body::Erased(_)) => Err(ApiError::Conflict(format!(
                "the Idempotency-Key {key:?} names a request of this agent whose event a redaction erased: its write was made (list the memories or their versions to find what it did); send a new request with a fresh key"
            ))),
            Some(_) => Err(ApiError::Conflict(format!(
                "the Idempotency-Key {key:?} was used by this agent for another request; send this one with a fresh key"
            ))),
        }
    }

    /// Records the write `make` builds for the memory `created` at its current path: looked
    /// up, then written in one event that checks it is still there; a memory moved in between
    /// is looked up again (a few times). A retry under the same key repeats the original write.
    fn write_memory(
        &self,
        memory: &str,
        created: Seq,
        make: impl Fn(String) -> ApiWrite,
    ) -> Result<Seq, ApiError> {
        if let Some(original) = self.earlier(&make(String::new()))? {
            return self.record(original);
        }
        let mut last = no_memory(memory);
        for _ in 0..4 {
            // A memory the agent may not read is not there for it: no path in an error.
            let Some(path) = locate(self.served, created, self.reader.as_deref())? else {
                return Err(no_memory(memory));
            };
            match self.record(make(path)) {
                Err(ApiError::NotFound(why)) => last = ApiError::NotFound(why),
                done => return done,
            }
        }
        Err(last)
    }
}

/// Refuses a write to an archived store.
fn writable(stores: &Stores, id: &str) -> Result<(), ApiError> {
    let (name, dir) = resolve(stores, id)?;
    let (_, served) = open(stores, id)?;
    // The chained label, read from the index; the copy beside the log is read (and an earlier
    // build's label chained) only for a store with none, not on every write.
    let label = match label::chained(&served).map_err(store_failed)? {
        Some(label) => label,
        None => label::current(&served, &dir, &name).map_err(store_failed)?,
    };
    match label.archived_ms {
        Some(ms) => Err(ApiError::InvalidRequest(format!(
            "the memory store was archived at {}: its memories can be read and deleted, not created or changed",
            utc(ms)
        ))),
        None => Ok(()),
    }
}

/// The memory whose identity is `created` in the opened store `name`, as the API shows it.
fn memory_by_seq(
    served: &super::stores::Served,
    name: &str,
    created: Seq,
    full: bool,
    reader: Option<&str>,
) -> Result<Option<Memory>, ApiError> {
    let shared = served.shared();
    let root = MemPath::absolute(shared.root()).map_err(ApiError::Api)?;
    let store_id = ids::store_id(name);
    shared
        .client()
        .memory_object(&root, &store_id, created, full, reader)
        .map_err(store_failed)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMemory {
    path: String,
    content: Option<String>,
}

const NEW_MEMORY: &str = r#"{"path": "/projects/foo/notes.md", "content": "..."}"#;

async fn create_memory(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    query: ApiQuery<ViewQuery>,
    attribution: Attribution,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    admit(&stores, &id, &headers, &attribution).await?;
    let bytes = read(sent).await?;
    let full = full_view(query.view.as_deref(), false)?;
    let asked: NewMemory = body(&bytes, NEW_MEMORY)?;
    check_api_path(&asked.path)?;
    let Some(content) = asked.content else {
        return Err(ApiError::InvalidRequest(
            "content is required: pass \"\" for an empty memory".into(),
        ));
    };
    check_content(&content)?;
    let key = idempotency_key(&headers)?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        writable(&stores, &id)?;
        let root = MemPath::absolute(served.shared().root()).map_err(ApiError::Api)?;
        versions_left(&stores, &served)?;
        let cap = stores.max_memories();
        let held = served
            .shared()
            .client()
            .file_entries(&root)
            .map(|entries| entries.len())
            .map_err(store_failed)?;
        if held >= cap {
            return Err(ApiError::InvalidRequest(format!(
                "the memory store holds {held} memories, the most this server creates in one (--max-memories {cap}); delete some, or start the server with a larger --max-memories"
            )));
        }
        let write = ApiWrite::Create {
            path: tool_path(&root, &asked.path),
            content,
        };
        let writing = Writing {
            served: &served,
            agent: who.agent.clone(),
            key,
            reader: who.reader().map(str::to_string),
        };
        let seq = match writing.earlier(&write)? {
            Some(original) => writing.record(original)?,
            None => writing.record(write)?,
        };
        memory_by_seq(&served, &name, seq, full, who.reader())?
            .map(|m| ok(&m))
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "the memory this request created ({}) has since been deleted or moved out of the store's root; list the memories to see what is there",
                    ids::memory_id(seq)
                ))
            })
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Precondition {
    #[serde(rename = "type")]
    kind: String,
    content_sha256: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryChange {
    content: Option<String>,
    path: Option<String>,
    precondition: Option<Precondition>,
}

const MEMORY_CHANGE: &str = r#"{"content": "...", "path": "/new/path.md", "precondition": {"type": "content_sha256", "content_sha256": "<64 hex digits>"}}"#;

/// A digest given as 64 lower-case hex digits.
fn digest(name: &str, hex: &str) -> Result<[u8; 32], ApiError> {
    let bad = || {
        ApiError::InvalidRequest(format!(
            "{name} must be 64 lower-case hex digits, not {hex:?}"
        ))
    };
    // Lower case only: the API writes digests so, and one spelling keeps the check exact.
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(bad());
    }
    crate::hash::EventHash::from_hex(hex)
        .map(|parsed| parsed.0)
        .ok_or_else(bad)
}

/// Where the memory `created` is now, in the opened store: its memory-tool path; `None` if it
/// is not there, or `reader` (an agent token's agent) may not read it.
fn locate(
    served: &super::stores::Served,
    created: Seq,
    reader: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let root = MemPath::absolute(served.shared().root()).map_err(ApiError::Api)?;
    served
        .shared()
        .client()
        .locate_memory(&root, created, reader)
        .map(|entry| entry.map(|e| e.path.to_string()))
        .map_err(store_failed)
}

async fn update_memory(
    State(stores): State<Arc<Stores>>,
    RoutePath((id, memory)): RoutePath<(String, String)>,
    headers: HeaderMap,
    query: ApiQuery<ViewQuery>,
    attribution: Attribution,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    admit(&stores, &id, &headers, &attribution).await?;
    let bytes = read(sent).await?;
    let full = full_view(query.view.as_deref(), false)?;
    let asked: MemoryChange = body(&bytes, MEMORY_CHANGE)?;
    if let Some(path) = &asked.path {
        check_api_path(path)?;
    }
    if let Some(content) = &asked.content {
        check_content(content)?;
    }
    let expect = match &asked.precondition {
        None => None,
        Some(Precondition {
            kind,
            content_sha256,
        }) if kind == "content_sha256" => {
            let Some(hex) = content_sha256 else {
                return Err(ApiError::InvalidRequest(
                    "a content_sha256 precondition names the digest: {\"type\": \"content_sha256\", \"content_sha256\": \"<64 hex digits>\"}".into(),
                ));
            };
            Some(digest("precondition.content_sha256", hex)?)
        }
        Some(other) => {
            return Err(ApiError::InvalidRequest(format!(
                "the only precondition type is content_sha256, not {:?}",
                other.kind
            )));
        }
    };
    let created = ids::memory_seq(&memory).ok_or_else(|| no_memory(&memory))?;
    let key = idempotency_key(&headers)?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        writable(&stores, &id)?;
        let root = MemPath::absolute(served.shared().root()).map_err(ApiError::Api)?;
        let new_path = asked.path.as_deref().map(|p| tool_path(&root, p));
        versions_left(&stores, &served)?;
        let writing = Writing {
            served: &served,
            agent: who.agent.clone(),
            key,
            reader: who.reader().map(str::to_string),
        };
        writing.write_memory(&memory, created, |path| ApiWrite::Update {
            memory: created.0,
            path,
            content: asked.content.clone(),
            new_path: new_path.clone(),
            expect,
        })?;
        memory_by_seq(&served, &name, created, full, who.reader())?
            .map(|m| ok(&m))
            .ok_or_else(|| no_memory(&memory))
    })
    .await
}

/// Refuses a write that would add a version to a store holding `--max-versions` of them (the
/// hosted cap), counted as [`crate::memory_store::version_index::count`] counts them: creates
/// and updates, never deletes, so a full store can still forget.
fn versions_left(stores: &Stores, served: &crate::serve::stores::Served) -> Result<(), ApiError> {
    let cap = stores.max_versions();
    let held = served
        .shared()
        .client()
        .version_count()
        .map_err(store_failed)?;
    match held {
        Some(held) if held >= cap => Err(ApiError::InvalidRequest(format!(
            "the memory store holds {held} memory versions, the most this server keeps in one (--max-versions {cap}); every change adds a version and none is ever removed (a delete, which is still accepted, adds one too), so start the server with a larger --max-versions to write to this store again"
        ))),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct DeleteQuery {
    expected_content_sha256: Option<String>,
}

async fn delete_memory(
    State(stores): State<Arc<Stores>>,
    RoutePath((id, memory)): RoutePath<(String, String)>,
    headers: HeaderMap,
    query: ApiQuery<DeleteQuery>,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    let expect = query
        .expected_content_sha256
        .as_deref()
        .map(|hex| digest("expected_content_sha256", hex))
        .transpose()?;
    let created = ids::memory_seq(&memory).ok_or_else(|| no_memory(&memory))?;
    let key = idempotency_key(&headers)?;
    run(move || {
        let (_, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        let writing = Writing {
            served: &served,
            agent: who.agent.clone(),
            key,
            reader: who.reader().map(str::to_string),
        };
        writing.write_memory(&memory, created, |path| ApiWrite::Delete {
            memory: created.0,
            path,
            expect,
        })?;
        Ok(ok(&Deleted {
            kind: "memory_deleted",
            id: memory,
        }))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_names_the_api_paths_of_the_write_not_the_memory_tools() {
        let root = MemPath::absolute("/memories").expect("a root");
        let create = |path: &str| ApiWrite::Create {
            path: path.into(),
            content: String::new(),
        };
        // A segment named like the root is the API path's own.
        assert_eq!(
            api_message(
                &root,
                &create("/memories/memories/x.md"),
                "another memory is at /memories/memories/x.md; update that one, or choose another path"
            ),
            "another memory is at /memories/x.md; update that one, or choose another path"
        );
        // A memory above the path is named as the API names it.
        assert_eq!(
            api_message(
                &root,
                &create("/memories/a/b.md"),
                "the memory /memories/a is in the way: a path cannot go through a memory"
            ),
            "the memory /a is in the way: a path cannot go through a memory"
        );
        let update = ApiWrite::Update {
            memory: 3,
            path: "/memories/old.md".into(),
            content: None,
            new_path: Some("/memories/n/new.md".into()),
            expect: None,
        };
        assert_eq!(
            api_message(
                &root,
                &update,
                "agent x holds no read-write grant covering /memories/n/new.md; ask"
            ),
            "agent x holds no read-write grant covering /n/new.md; ask"
        );
        assert_eq!(
            api_message(
                &root,
                &update,
                "the memory mem_3 is no longer at /memories/old.md"
            ),
            "the memory mem_3 is no longer at /old.md"
        );
        // A path rewritten is not rewritten again by a shorter one it now reads as.
        let nested = ApiWrite::Update {
            memory: 3,
            path: "/memories/memories/a.md".into(),
            content: None,
            new_path: Some("/memories/a.md".into()),
            expect: None,
        };
        assert_eq!(
            api_message(
                &root,
                &nested,
                "from /memories/memories/a.md to /memories/a.md"
            ),
            "from /memories/a.md to /a.md"
        );
    }

    #[test]
    fn digests_are_64_lower_case_hex_digits() {
        let hex = "ab".repeat(32);
        assert_eq!(digest("d", &hex).expect("a digest"), [0xab; 32]);
        for bad in [
            "",
            "AB".repeat(32).as_str(),
            &"ab".repeat(31),
            &"zz".repeat(32),
            &"é".repeat(32),
        ] {
            assert!(digest("d", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn path_prefixes_are_whole_absolute_segments() {
        for good in ["/", "/notes/", "/a/b c/", "/ü/"] {
            assert!(check_prefix(good).is_ok(), "{good}");
        }
        for bad in ["", "notes/", "/notes", "//", "/a//", "/./", "/../", "/a\n/"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        assert!(check_prefix(&format!("/{}/", "a".repeat(1023))).is_err());
    }
}
