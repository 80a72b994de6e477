//! The routes of memory versions: list, retrieve, redact. The versions are read off a replay of
//! the store's log ([`crate::memory_store::versions`]); a redacted version stays listed, with its
//! content, path and digest null and when and by whom it was redacted.

use std::sync::Arc;

use axum::extract::{Path as RoutePath, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

use super::super::tenancy::Attribution;
use super::wire::{self, ApiError, ApiQuery, Page, ok};
use super::{
    ViewQuery, credentials, full_view, limit, open, operator_only, run, store_failed, time_filter,
    who,
};
use crate::client::redact::Selection;
use crate::memory_store::access::Found;
use crate::memory_store::ids;
use crate::memory_store::objects::MemoryVersion;
use crate::memory_store::version_index::Window;
use crate::memory_store::versions::{Operation, Version};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::serve::stores::{Served, Stores};

/// The version as the API shows it, with its content if `content` is given.
fn object(name: &str, root: &MemPath, v: &Version, content: Option<String>) -> MemoryVersion {
    v.object(&ids::store_id(name), root, content)
}

fn operation(name: &str) -> Result<Operation, ApiError> {
    match name {
        "created" => Ok(Operation::Created),
        "modified" => Ok(Operation::Modified),
        "deleted" => Ok(Operation::Deleted),
        other => Err(ApiError::InvalidRequest(format!(
            "operation must be created, modified or deleted, not {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
pub(super) struct VersionQuery {
    memory_id: Option<String>,
    operation: Option<String>,
    created_at_gte: Option<String>,
    created_at_lte: Option<String>,
    api_key_id: Option<String>,
    session_id: Option<String>,
    service_account_id: Option<String>,
    limit: Option<usize>,
    page: Option<String>,
    view: Option<String>,
}

/// The root of the opened store's memory tool.
fn root_of(served: &Served) -> Result<MemPath, ApiError> {
    MemPath::absolute(served.shared().root()).map_err(ApiError::Api)
}

/// Fills in the content of each version that has some (and was not redacted): an API write's
/// from its event, the rest from one replay.
fn with_contents(
    served: &Served,
    name: &str,
    root: &MemPath,
    found: &[Version],
) -> Result<Vec<MemoryVersion>, ApiError> {
    let wanted: Vec<(Seq, MemPath)> = found
        .iter()
        .filter(|v| v.content.is_some() && v.redacted.is_none())
        .map(|v| (v.seq, v.path.clone()))
        .collect();
    let mut contents = served
        .shared()
        .client()
        .version_contents(&wanted)
        .map_err(store_failed)?;
    Ok(found
        .iter()
        .map(|v| {
            let content = contents.remove(&(v.seq, v.path.clone()));
            object(name, root, v, content)
        })
        .collect())
}

pub(super) async fn list(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    query: ApiQuery<VersionQuery>,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    let full = full_view(query.view.as_deref(), false)?;
    let limit = limit(query.limit, 20, 100)?.min(if full { 20 } else { 100 });
    let memory = query
        .memory_id
        .as_deref()
        .map(|m| {
            ids::memory_seq(m).ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "memory_id must be a memory's id (mem_...), not {m:?}"
                ))
            })
        })
        .transpose()?;
    let op = query.operation.as_deref().map(operation).transpose()?;
    let from = time_filter("created_at_gte", query.created_at_gte.as_deref())?;
    let to = time_filter("created_at_lte", query.created_at_lte.as_deref())?;
    // Versions are newest first; a page token is the last one shown.
    let after = query
        .page
        .as_deref()
        .map(|token| {
            wire::page_key(token).and_then(|key| {
                ids::version_seqs(&key).ok_or_else(|| {
                    ApiError::InvalidRequest("page is not a page token of this listing".into())
                })
            })
        })
        .transpose()?;
    let api_key = query.api_key_id.clone();
    let session = query.session_id.clone();
    // No version is written by a service account.
    let none = query.service_account_id.is_some();
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        let root = root_of(&served)?;
        // An agent sees the versions of the paths it may read now.
        let policy = served.shared().client().policy().map_err(store_failed)?;
        let reader = who.reader();
        let keep = |v: &Version| {
            !none
                && reader.is_none_or(|agent| {
                    policy.allows(agent, &v.path, crate::model::policy::Access::Read)
                })
                && op.is_none_or(|op| v.operation == op)
                && from.is_none_or(|from| v.time_ms >= from)
                && to.is_none_or(|to| v.time_ms <= to)
                && api_key.as_ref().is_none_or(|k| v.by_api && v.agent == *k)
                && session.as_ref().is_none_or(|s| !v.by_api && v.agent == *s)
        };
        let window = Window {
            before: after,
            memory,
            limit,
        };
        let (found, more) = served
            .shared()
            .client()
            .version_page(&root, window, keep)
            .map_err(store_failed)?;
        let next_page = more
            .then(|| {
                found
                    .last()
                    .map(|v| wire::page_token(&ids::version_id(v.seq, v.memory)))
            })
            .flatten();
        let data = if full {
            with_contents(&served, &name, &root, &found)?
        } else {
            found
                .iter()
                .map(|v| object(&name, &root, v, None))
                .collect()
        };
        Ok(ok(&Page { data, next_page }))
    })
    .await
}

fn no_version(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::NotFound(format!(
        "there is no memory version {shown:?} in this store; list them with GET /v1/memory_stores/{{id}}/memory_versions"
    ))
}

/// The version `version` names in the opened store, if the log holds it (a redacted one
/// included); a version whose event a redaction erased with everything it did (by path or text,
/// or before redactions kept what an event did) is named as such.
fn find(served: &Served, version: &str) -> Result<(MemPath, Version), ApiError> {
    let (seq, memory) = ids::version_seqs(version).ok_or_else(|| no_version(version))?;
    let root = root_of(served)?;
    let found = match served
        .shared()
        .client()
        .version_at(&root, seq, memory)
        .map_err(store_failed)?
    {
        Found::Version(found) => found,
        Found::ErasedWhole => {
            return Err(ApiError::NotFound(format!(
                "the memory version {version} was redacted with everything its event did (a redaction by path or text): its event {seq} is erased from the log, and with it the version"
            )));
        }
        Found::Missing => return Err(no_version(version)),
    };
    Ok((root, found))
}

pub(super) async fn retrieve(
    State(stores): State<Arc<Stores>>,
    RoutePath((id, version)): RoutePath<(String, String)>,
    headers: HeaderMap,
    query: ApiQuery<ViewQuery>,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    let full = full_view(query.view.as_deref(), true)?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        let who = who(&stores, &served, &id, &headers, &attribution)?;
        let (root, found) = find(&served, &version)?;
        if let Some(agent) = who.reader() {
            let policy = served.shared().client().policy().map_err(store_failed)?;
            if !policy.allows(agent, &found.path, crate::model::policy::Access::Read) {
                return Err(no_version(&version));
            }
        }
        let shown = if full {
            with_contents(&served, &name, &root, std::slice::from_ref(&found))?
                .pop()
                .ok_or_else(|| no_version(&version))?
        } else {
            object(&name, &root, &found, None)
        };
        Ok(ok(&shown))
    })
    .await
}

/// Redacts a version: a Mnemo redaction of its event that keeps what the event did to the tree
/// (so every later version, the live one included, stays as it is) and erases its content, and
/// that of every event whose answer showed it. Refused with 409 when that would change a live
/// memory (its current version, or content an edit after it built on): update or delete it
/// first. A version already redacted is answered as it is.
pub(super) async fn redact(
    State(stores): State<Arc<Stores>>,
    RoutePath((id, version)): RoutePath<(String, String)>,
    headers: HeaderMap,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    run(move || {
        let (name, served) = open(&stores, &id)?;
        operator_only(&who(&stores, &served, &id, &headers, &attribution)?, "redacting a version")?;
        let (root, found) = find(&served, &version)?;
        if found.redacted.is_some() {
            return Ok(ok(&object(&name, &root, &found, None)));
        }
        let client = served.shared().client();
        // The current version of a live memory, even one that only moved it, is refused, as the
        // hosted API refuses it; so is a version whose event is another live memory's current
        // version too (a directory's rename moved both).
        let live = client.file_entries(&root).map_err(store_failed)?;
        if let Some(entry) = live
            .iter()
            .find(|entry| entry.touched == found.seq)
        {
            let path = entry.path.to_string();
            return Err(ApiError::Conflict(format!(
                "{version} is the current version of the memory {} at {}; a redaction erases versions a memory has moved past, never its current one: update the memory (or delete it) first, then redact this version",
                ids::memory_id(entry.created),
                path.strip_prefix(&root.to_string()).unwrap_or(&path)
            )));
        }
        let selection = Selection {
            seqs: vec![found.seq],
            ..Selection::default()
        };
        let plan = client.redaction_plan(&selection).map_err(store_failed)?;
        if !plan.live.is_empty() {
            return Err(ApiError::Conflict(format!(
                "redacting {version} would erase what a memory holds now ({}); a redaction erases versions a memory has moved past, never its current content: update the memory (or delete it) first, then redact this version",
                plan.live
                    .iter()
                    .map(|line| line.strip_prefix(&root.to_string()).unwrap_or(line))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        client
            .redact_as(
                crate::model::credential::OPERATOR,
                "a memory version redacted through the memory-stores API",
                &selection,
            )
            .map_err(store_failed)?;
        let (root, found) = find(&served, &version)?;
        Ok(ok(&object(&name, &root, &found, None)))
    })
    .await
}
