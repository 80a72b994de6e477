//! Memory versions: every event that created, changed (content or path) or deleted a memory,
//! read off a replay of the store's log, so a listing shows what the chain proves rather than
//! what an index holds.
//!
//! The replay follows each memory by identity (the seq of the event that created its file)
//! through renames of the file or of any directory above it: a rename of a directory is a version
//! of every memory under it, a delete of a directory a `deleted` version of each. A change that
//! leaves a memory's path and content as they were makes no version. A redacted event is erased
//! from the log, and the replay skips it: its versions (and those of every event that depended
//! on it) are gone from the history, not listed with empty fields.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::event::{Body, Event, Seq};
use crate::log::Store;
use crate::paths::MemPath;
use crate::replay::Replay;
use crate::tool::Change;
use crate::tool::api::content_sha256;

/// What a version records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operation {
    Created,
    Modified,
    Deleted,
}

impl Operation {
    pub(super) fn name(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Modified => "modified",
            Operation::Deleted => "deleted",
        }
    }
}

/// One version of one memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Version {
    /// The event that made it.
    pub seq: Seq,
    /// The memory's identity.
    pub memory: Seq,
    pub operation: Operation,
    /// The memory's path (the memory tool's) as of this version.
    pub path: MemPath,
    /// The SHA-256 and size of its content as of this version (none for a delete).
    pub content: Option<([u8; 32], u64)>,
    /// When the event was written, in Unix milliseconds.
    pub time_ms: u64,
    /// The agent the event was recorded under.
    pub agent: String,
    /// Whether the event was a write of the memory-stores API (else a memory-tool call).
    pub by_api: bool,
}

/// The live memories while the log is replayed: path → identity.
#[derive(Default)]
struct Live {
    at: BTreeMap<MemPath, Seq>,
    /// Each memory's last path and content digest, to leave out changes that changed nothing.
    last: BTreeMap<Seq, (MemPath, [u8; 32])>,
}

impl Live {
    fn under(&self, path: &MemPath) -> Vec<(MemPath, Seq)> {
        self.at
            .range(path.clone()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, id)| (p.clone(), *id))
            .collect()
    }
}

/// Every version of the memories under `root` in `store`, oldest first, up to event `to`.
/// `keep` sees each version as it is found and says whether to keep it (so a caller that wants
/// one memory's versions, or one version, holds no others).
pub(super) fn versions(
    store: &Store,
    root: &MemPath,
    to: Seq,
    mut keep: impl FnMut(&Version) -> bool,
) -> Result<Vec<Version>> {
    let mut live = Live::default();
    let mut out = Vec::new();
    let mut replay = Replay::in_memory();
    replay.run(store, to, |tree, event: &Event, traced| {
        let Some(change) = &traced.answer.change else {
            return Ok::<(), crate::Error>(());
        };
        let mut found = Vec::new();
        let moved = |live: &mut Live, from: &MemPath, to: &MemPath| {
            let mut out = Vec::new();
            for (at, id) in live.under(from) {
                live.at.remove(&at);
                let now = at.moved(from, to);
                live.at.insert(now.clone(), id);
                out.push((now, id));
            }
            out
        };
        match change {
            Change::Write { path, .. } => {
                let id = *live.at.entry(path.clone()).or_insert(event.seq);
                found.push((path.clone(), id));
            }
            Change::Rename { from, to } => found = moved(&mut live, from, to),
            Change::Rewrite { from, to, .. } => found = moved(&mut live, from, to),
            Change::Delete { path } => {
                for (at, id) in live.under(path) {
                    live.at.remove(&at);
                    live.last.remove(&id);
                    if at.starts_with(root) && at != *root {
                        let version = Version {
                            seq: event.seq,
                            memory: id,
                            operation: Operation::Deleted,
                            path: at,
                            content: None,
                            time_ms: event.header.time_ms,
                            agent: event.header.agent.clone(),
                            by_api: matches!(event.body, Body::Api(_)),
                        };
                        if keep(&version) {
                            out.push(version);
                        }
                    }
                }
            }
            _ => {}
        }
        for (path, id) in found {
            let Some(content) = crate::tool::Tree::read(tree, &path)? else {
                continue;
            };
            let digest = content_sha256(&content);
            let same = live.last.get(&id) == Some(&(path.clone(), digest));
            live.last.insert(id, (path.clone(), digest));
            if same || !path.starts_with(root) || path == *root {
                continue;
            }
            let version = Version {
                seq: event.seq,
                memory: id,
                operation: if id == event.seq {
                    Operation::Created
                } else {
                    Operation::Modified
                },
                path,
                content: Some((digest, u64::try_from(content.len()).unwrap_or(u64::MAX))),
                time_ms: event.header.time_ms,
                agent: event.header.agent.clone(),
                by_api: matches!(event.body, Body::Api(_)),
            };
            if keep(&version) {
                out.push(version);
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// The content of each file at `wanted` (seq, path), as it was right after that event: one
/// replay up to the last of them.
pub(super) fn contents_at(
    store: &Store,
    wanted: &[(Seq, MemPath)],
) -> Result<BTreeMap<(Seq, MemPath), String>> {
    let mut out = BTreeMap::new();
    let Some(last) = wanted.iter().map(|(seq, _)| *seq).max() else {
        return Ok(out);
    };
    let mut replay = Replay::in_memory();
    replay.run(store, last, |tree, event: &Event, _| {
        for (seq, path) in wanted.iter().filter(|(seq, _)| *seq == event.seq) {
            if let Some(content) = crate::tool::Tree::read(tree, path)? {
                out.insert((*seq, path.clone()), content);
            }
        }
        Ok::<(), crate::Error>(())
    })?;
    Ok(out)
}

/// The routes of versions: list, retrieve, redact.
pub(super) mod routes {
    use std::sync::Arc;

    use axum::extract::{Path as RoutePath, Query, State};
    use axum::http::HeaderMap;
    use axum::response::Response;
    use serde::Deserialize;

    use super::super::wire::{self, Actor, ApiError, MemoryVersion, Page, ok};
    use super::super::{full_view, limit, open, operator, run, store_failed, time_filter};
    use super::{Operation, Version, contents_at, versions};
    use crate::event::{Body, Event, Seq};
    use crate::paths::MemPath;
    use crate::redact::Selection;
    use crate::serve::stores::{Served, Stores};
    use crate::time::utc;
    use crate::tool::api::hex;

    /// The version as the API shows it, with its content if `content` is given.
    fn object(name: &str, root: &MemPath, v: &Version, content: Option<String>) -> MemoryVersion {
        let path = v.path.to_string();
        MemoryVersion {
            kind: "memory_version",
            id: wire::version_id(v.seq, v.memory),
            memory_id: wire::memory_id(v.memory),
            memory_store_id: wire::store_id(name),
            operation: v.operation.name(),
            created_at: utc(v.time_ms),
            created_by: if v.by_api {
                Actor::Api {
                    api_key_id: v.agent.clone(),
                }
            } else {
                Actor::Session {
                    session_id: v.agent.clone(),
                }
            },
            content,
            content_sha256: v.content.map(|(digest, _)| hex(&digest)),
            content_size_bytes: v.content.map(|(_, size)| size),
            path: Some(
                path.strip_prefix(&root.to_string())
                    .unwrap_or(&path)
                    .to_string(),
            ),
            redacted_at: None,
            redacted_by: None,
        }
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
    pub(in super::super) struct VersionQuery {
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

    /// Fills in the content of each version that has some, from one replay.
    fn with_contents(
        served: &Served,
        name: &str,
        root: &MemPath,
        found: &[Version],
    ) -> Result<Vec<MemoryVersion>, ApiError> {
        let wanted: Vec<(Seq, MemPath)> = found
            .iter()
            .filter(|v| v.content.is_some())
            .map(|v| (v.seq, v.path.clone()))
            .collect();
        let mut contents = served
            .shared()
            .client()
            .read_local(|store| contents_at(store, &wanted))
            .map_err(store_failed)?;
        Ok(found
            .iter()
            .map(|v| {
                let content = contents.remove(&(v.seq, v.path.clone()));
                object(name, root, v, content)
            })
            .collect())
    }

    pub(in super::super) async fn list(
        State(stores): State<Arc<Stores>>,
        RoutePath(id): RoutePath<String>,
        headers: HeaderMap,
        query: Query<VersionQuery>,
    ) -> Result<Response, ApiError> {
        operator(&stores, &headers)?;
        let full = full_view(query.view.as_deref(), false)?;
        let limit = limit(query.limit, 20, 100)?.min(if full { 20 } else { 100 });
        let memory = query
            .memory_id
            .as_deref()
            .map(|m| {
                wire::memory_seq(m).ok_or_else(|| {
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
                    wire::version_seqs(&key).ok_or_else(|| {
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
            let root = root_of(&served)?;
            let end = after.map_or(Seq(u64::MAX), |(seq, _)| seq);
            let mut found = served
                .shared()
                .client()
                .read_local(|store| {
                    versions(store, &root, end, |v| {
                        !none
                            && memory.is_none_or(|m| v.memory == m)
                            && op.is_none_or(|op| v.operation == op)
                            && from.is_none_or(|from| v.time_ms >= from)
                            && to.is_none_or(|to| v.time_ms <= to)
                            && api_key.as_ref().is_none_or(|k| v.by_api && v.agent == *k)
                            && session.as_ref().is_none_or(|s| !v.by_api && v.agent == *s)
                            && after.is_none_or(|cursor| (v.seq, v.memory) < cursor)
                    })
                })
                .map_err(store_failed)?;
            found.sort_by_key(|v| std::cmp::Reverse((v.seq, v.memory)));
            let more = found.len() > limit;
            found.truncate(limit);
            let next_page = more
                .then(|| {
                    found
                        .last()
                        .map(|v| wire::page_token(&wire::version_id(v.seq, v.memory)))
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

    /// The version `version` names in the opened store, if the log holds it; a version whose
    /// event a redaction erased is named as such.
    fn find(served: &Served, version: &str) -> Result<(MemPath, Version), ApiError> {
        let (seq, memory) = wire::version_seqs(version).ok_or_else(|| no_version(version))?;
        let root = root_of(served)?;
        let found = served
            .shared()
            .client()
            .read_local(|store| {
                if let Some(bytes) = store.get(seq)? {
                    if let Body::Erased(_) = Event::decode(&bytes)?.body {
                        return Ok(Err(ApiError::NotFound(format!(
                            "the memory version {version} was redacted: its event {seq} is erased from the log, and with it the version"
                        ))));
                    }
                }
                let mut found = versions(store, &root, seq, |v| v.seq == seq && v.memory == memory)?;
                Ok(found.pop().ok_or_else(|| no_version(version)))
            })
            .map_err(store_failed)??;
        Ok((root, found))
    }

    #[derive(Deserialize)]
    pub(in super::super) struct ViewQuery {
        view: Option<String>,
    }

    pub(in super::super) async fn retrieve(
        State(stores): State<Arc<Stores>>,
        RoutePath((id, version)): RoutePath<(String, String)>,
        headers: HeaderMap,
        query: Query<ViewQuery>,
    ) -> Result<Response, ApiError> {
        operator(&stores, &headers)?;
        let full = full_view(query.view.as_deref(), true)?;
        run(move || {
            let (name, served) = open(&stores, &id)?;
            let (root, found) = find(&served, &version)?;
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

    /// Redacts a version: a Mnemo redaction of its event, which erases every event whose answer
    /// depended on it too. Refused when that would change a live memory (its current version, or
    /// one an edit after it built on), as the hosted API refuses the current version.
    pub(in super::super) async fn redact(
        State(stores): State<Arc<Stores>>,
        RoutePath((id, version)): RoutePath<(String, String)>,
        headers: HeaderMap,
    ) -> Result<Response, ApiError> {
        operator(&stores, &headers)?;
        run(move || {
            let (name, served) = open(&stores, &id)?;
            let (root, found) = find(&served, &version)?;
            let client = served.shared().client();
            let selection = Selection {
                seqs: vec![found.seq],
                ..Selection::default()
            };
            let plan = client.redaction_plan(&selection).map_err(store_failed)?;
            let live = client
                .read_local(|store| store.current_index()?.file_entries_under(&root))
                .map_err(store_failed)?;
            if let Some(hit) = live.iter().find(|entry| plan.seqs.contains(&entry.touched) || plan.seqs.contains(&entry.created)) {
                return Err(ApiError::Conflict(format!(
                    "redacting {version} would erase the events that the live memory {} at {} is made of (a redaction erases an event and every event built on it); delete the memory first, then redact its versions",
                    wire::memory_id(hit.created),
                    hit.path
                )));
            }
            let done = client
                .redact("a memory version redacted through the memory-stores API", &selection)
                .map_err(store_failed)?;
            let redaction_time = client
                .read_local(|store| {
                    let bytes = store.get(done.seq)?.ok_or_else(|| crate::Error::corrupt("the redaction's event is missing"))?;
                    Ok(Event::decode(&bytes)?.header.time_ms)
                })
                .map_err(store_failed)?;
            let mut shown = object(&name, &root, &found, None);
            shown.content_sha256 = None;
            shown.content_size_bytes = None;
            shown.path = None;
            shown.redacted_at = Some(utc(redaction_time));
            shown.redacted_by = Some(Actor::Api {
                api_key_id: client.agent_id().to_string(),
            });
            Ok(ok(&shown))
        })
        .await
    }
}
