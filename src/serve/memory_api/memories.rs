//! The routes of memories: list, retrieve, create, update, delete; a write is one event of the
//! store's log, answered by the pure core in the writer ([`crate::model::tool::api::ApiWrite`]).

use super::*;

#[derive(Deserialize)]
pub(super) struct MemoryQuery {
    path_prefix: Option<String>,
    depth: Option<usize>,
    limit: Option<usize>,
    page: Option<String>,
    view: Option<String>,
}
/// A `path_prefix`: `/`, or absolute whole segments ending in `/` (`/notes/`).
pub(super) fn check_prefix(prefix: &str) -> Result<(), ApiError> {
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
pub(super) fn open(
    stores: &Stores,
    id: &str,
) -> Result<(String, Arc<crate::serve::stores::Served>), ApiError> {
    let (name, _) = resolve(stores, id)?;
    let served = stores
        .get(&name)
        .map_err(|why| unavailable(stores, id, why))?;
    Ok((name, served))
}

pub(super) async fn list_memories(
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

pub(super) fn no_memory(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::NotFound(format!(
        "there is no memory {shown:?} in this store; list them with GET /v1/memory_stores/{{id}}/memories"
    ))
}

pub(super) async fn retrieve_memory(
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
pub(super) const MAX_CONTENT_BYTES: usize = 102_400;

pub(super) fn check_content(content: &str) -> Result<(), ApiError> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(ApiError::InvalidRequest(format!(
            "content is at most {MAX_CONTENT_BYTES} bytes (100 kB), not {}",
            content.len()
        )));
    }
    Ok(())
}

pub(super) fn check_api_path(path: &str) -> Result<(), ApiError> {
    crate::memory_store::path_rules::check(path)
        .map_or(Ok(()), |why| Err(ApiError::InvalidRequest(why)))
}

/// The agent a write is recorded under: the one `X-Mnemo-Agent` names, else `operator`.
pub(super) fn writer_agent(headers: &HeaderMap) -> Result<String, ApiError> {
    named_agent(headers)
        .map(|named| named.unwrap_or_else(|| crate::model::credential::OPERATOR.to_string()))
        .map_err(|refusal| ApiError::InvalidRequest(format!("{refusal:?}")))
}

/// The memory-tool path of the API path `path` in a store whose root is `root`.
pub(super) fn tool_path(root: &MemPath, path: &str) -> String {
    format!("{root}{path}")
}

/// `why`, an API write's answer (which names the memory tool's paths, `/memories/a/b.md`), with
/// the paths `write` names and the directories above them as the API names them (`/a/b.md`).
pub(super) fn api_message(root: &MemPath, write: &ApiWrite, why: &str) -> String {
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
pub(super) struct Writing<'a> {
    served: &'a crate::serve::stores::Served,
    agent: String,
    key: Option<String>,
    /// For an agent token: the agent whose read grants decide which memories it may name (one
    /// it may not read is answered 404, as if it were not there, before anything is logged).
    reader: Option<String>,
}

/// The `Idempotency-Key` header: 1 to 255 visible ASCII characters, at most once.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
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
pub(super) fn same_request(original: &ApiWrite, again: &ApiWrite) -> bool {
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
pub(super) fn writable(stores: &Stores, id: &str) -> Result<(), ApiError> {
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
pub(super) fn memory_by_seq(
    served: &crate::serve::stores::Served,
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
pub(super) struct NewMemory {
    path: String,
    content: Option<String>,
}

pub(super) const NEW_MEMORY: &str = r#"{"path": "/projects/foo/notes.md", "content": "..."}"#;

pub(super) async fn create_memory(
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
        let (held, versions) = served
            .shared()
            .client()
            .memory_and_version_counts(&root)
            .map_err(store_failed)?;
        versions_left(&stores, versions)?;
        let cap = stores.max_memories();
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
pub(super) struct Precondition {
    #[serde(rename = "type")]
    kind: String,
    content_sha256: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MemoryChange {
    content: Option<String>,
    path: Option<String>,
    precondition: Option<Precondition>,
}

pub(super) const MEMORY_CHANGE: &str = r#"{"content": "...", "path": "/new/path.md", "precondition": {"type": "content_sha256", "content_sha256": "<64 hex digits>"}}"#;

/// A digest given as 64 lower-case hex digits.
pub(super) fn digest(name: &str, hex: &str) -> Result<[u8; 32], ApiError> {
    let bad = || {
        ApiError::InvalidRequest(format!(
            "{name} must be 64 lower-case hex digits, not {hex:?}"
        ))
    };
    // Lower case only: the API writes digests so, and one spelling keeps the check exact.
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(bad());
    }
    crate::model::hash::EventHash::from_hex(hex)
        .map(|parsed| parsed.0)
        .ok_or_else(bad)
}

/// Where the memory `created` is now, in the opened store: its memory-tool path; `None` if it
/// is not there, or `reader` (an agent token's agent) may not read it.
pub(super) fn locate(
    served: &crate::serve::stores::Served,
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

pub(super) async fn update_memory(
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
        let versions = served
            .shared()
            .client()
            .version_count()
            .map_err(store_failed)?;
        versions_left(&stores, versions)?;
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
/// hosted cap), `held` counted as [`crate::memory_store::version_index::count`] counts them:
/// creates and updates, never deletes, so a full store can still forget.
pub(super) fn versions_left(stores: &Stores, held: Option<u64>) -> Result<(), ApiError> {
    let cap = stores.max_versions();
    match held {
        Some(held) if held >= cap => Err(ApiError::InvalidRequest(format!(
            "the memory store holds {held} memory versions, the most this server keeps in one (--max-versions {cap}); every change adds a version and none is ever removed (a delete, which is still accepted, adds one too), so start the server with a larger --max-versions to write to this store again"
        ))),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
pub(super) struct DeleteQuery {
    expected_content_sha256: Option<String>,
}

pub(super) async fn delete_memory(
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
