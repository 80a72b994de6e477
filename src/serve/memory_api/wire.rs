//! The memory-stores API's objects and errors as the official SDKs read them (`anthropic`
//! 2.16.0, `@anthropic-ai/sdk` 1.16.0: `BetaManagedAgentsMemoryStore`, `BetaManagedAgentsMemory`,
//! `BetaManagedAgentsMemoryPrefix`, the `PageCursor` page, the error envelope), and the ids that
//! name Mnemo's stores, files and events in it.

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::data_dir::check_store_name;
use crate::event::Seq;

/// A memory store's id is `memstore_` and the name of its store in the data directory.
const STORE_ID_PREFIX: &str = "memstore_";
/// A memory's id is `mem_` and the seq of the event that created its file (its identity in the
/// log, which renames and edits keep).
const MEMORY_ID_PREFIX: &str = "mem_";
/// A version's id is `memver_`, the seq of the event that made it, `_`, and its memory's seq.
const VERSION_ID_PREFIX: &str = "memver_";

/// The id of the memory store that is the store `name`.
pub(super) fn store_id(name: &str) -> String {
    format!("{STORE_ID_PREFIX}{name}")
}

/// The store a memory-store id names, if it names one that could exist.
pub(super) fn store_name(id: &str) -> Option<&str> {
    id.strip_prefix(STORE_ID_PREFIX)
        .filter(|name| check_store_name(name).is_ok())
}

/// The id of the memory whose file the event at `created` created.
pub(super) fn memory_id(created: Seq) -> String {
    format!("{MEMORY_ID_PREFIX}{}", created.0)
}

/// The creating seq a memory id names.
pub(super) fn memory_seq(id: &str) -> Option<Seq> {
    let digits = id.strip_prefix(MEMORY_ID_PREFIX)?;
    let canonical = !digits.is_empty()
        && !digits.starts_with('0')
        && digits.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit());
    canonical.then(|| digits.parse().ok().map(Seq)).flatten()
}

/// The id of the version the event at `seq` made of the memory created at `memory`.
pub(super) fn version_id(seq: Seq, memory: Seq) -> String {
    format!("{VERSION_ID_PREFIX}{}_{}", seq.0, memory.0)
}

/// A memory store (`BetaManagedAgentsMemoryStore`).
#[derive(Serialize)]
pub(super) struct MemoryStore {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub name: String,
    pub description: String,
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// A deleted object's confirmation (`memory_store_deleted`, `memory_deleted`).
#[derive(Serialize)]
pub(super) struct Deleted {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
}

/// One item of a memory listing: a memory, or a prefix standing for the memories below the
/// listing's depth.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Item {
    Memory(Memory),
    Prefix {
        #[serde(rename = "type")]
        kind: &'static str,
        path: String,
    },
}

/// A memory (`BetaManagedAgentsMemory`).
#[derive(Serialize)]
pub(super) struct Memory {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub memory_store_id: String,
    pub path: String,
    /// `None` (JSON `null`) under `view=basic`.
    pub content: Option<String>,
    pub content_sha256: String,
    pub content_size_bytes: u64,
    pub created_at: String,
    pub updated_at: String,
    pub memory_version_id: String,
}

/// Who made a version (`BetaManagedAgentsActor`): the agent of an API write as the API key it
/// wrote with, a memory-tool call's agent as the session it wrote in.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum Actor {
    #[serde(rename = "api_actor")]
    Api { api_key_id: String },
    #[serde(rename = "session_actor")]
    Session { session_id: String },
}

/// A memory version (`BetaManagedAgentsMemoryVersion`).
#[derive(Serialize)]
pub(super) struct MemoryVersion {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub memory_id: String,
    pub memory_store_id: String,
    pub operation: &'static str,
    pub created_at: String,
    pub created_by: Actor,
    /// `None` under `view=basic`, for a delete, or once redacted.
    pub content: Option<String>,
    pub content_sha256: Option<String>,
    pub content_size_bytes: Option<u64>,
    pub path: Option<String>,
    pub redacted_at: Option<String>,
    pub redacted_by: Option<Actor>,
}

/// The (seq, memory) a version id names.
pub(super) fn version_seqs(id: &str) -> Option<(Seq, Seq)> {
    let (seq, memory) = id.strip_prefix(VERSION_ID_PREFIX)?.split_once('_')?;
    let number = |digits: &str| {
        let canonical = !digits.is_empty()
            && !digits.starts_with('0')
            && digits.len() <= 20
            && digits.bytes().all(|b| b.is_ascii_digit());
        canonical.then(|| digits.parse().ok().map(Seq)).flatten()
    };
    Some((number(seq)?, number(memory)?))
}

/// One page of a listing (`PageCursor`): `next_page` is the `page` of the next request, `null`
/// on the last page.
#[derive(Serialize)]
pub(super) struct Page<T> {
    pub data: Vec<T>,
    pub next_page: Option<String>,
}

/// A page token: the last item's sort key, hex-encoded (it travels in a URL).
pub(super) fn page_token(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The sort key a page token carries.
pub(super) fn page_key(token: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::InvalidRequest(
            "page is not a page token: pass the next_page value of the previous response, or leave it out for the first page".into(),
        )
    };
    if token.len() % 2 != 0 || token.len() > 8192 {
        return Err(bad());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect::<Result<Vec<u8>, ApiError>>()?;
    String::from_utf8(bytes).map_err(|_| bad())
}

/// What went wrong, as the API's error envelope
/// `{"type": "error", "error": {"type": ..., "message": ...}}` names it.
#[derive(Debug)]
pub(super) enum ApiError {
    /// 400 `invalid_request_error`.
    InvalidRequest(String),
    /// 401 `authentication_error`.
    Authentication(String),
    /// 403 `permission_error`.
    Permission(String),
    /// 404 `not_found_error`.
    NotFound(String),
    /// 409 `conflict_error`.
    Conflict(String),
    /// 409 `memory_precondition_failed_error`.
    PreconditionFailed(String),
    /// 409 `memory_path_conflict_error`.
    PathConflict(String),
    /// 529 `overloaded_error` (the SDKs retry it).
    Overloaded(String),
    /// 500 `api_error`.
    Api(String),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, &str) {
        match self {
            ApiError::InvalidRequest(m) => (StatusCode::BAD_REQUEST, "invalid_request_error", m),
            ApiError::Authentication(m) => (StatusCode::UNAUTHORIZED, "authentication_error", m),
            ApiError::Permission(m) => (StatusCode::FORBIDDEN, "permission_error", m),
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, "not_found_error", m),
            ApiError::Conflict(m) => (StatusCode::CONFLICT, "conflict_error", m),
            ApiError::PreconditionFailed(m) => {
                (StatusCode::CONFLICT, "memory_precondition_failed_error", m)
            }
            ApiError::PathConflict(m) => (StatusCode::CONFLICT, "memory_path_conflict_error", m),
            ApiError::Overloaded(m) => (
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                "overloaded_error",
                m,
            ),
            ApiError::Api(m) => (StatusCode::INTERNAL_SERVER_ERROR, "api_error", m),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind, message) = self.parts();
        let body = serde_json::json!({
            "type": "error",
            "error": {"type": kind, "message": message},
        });
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        // The SDKs retry 409 and 5xx unless told not to; only an overloaded server is worth it.
        if status.is_client_error() {
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

/// A JSON answer with status 200.
pub(super) fn ok<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => {
            ApiError::Api(format!("the answer could not be written ({e}); retry")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_exactly_one_store_file_and_event() {
        assert_eq!(store_name(&store_id("user-1042")), Some("user-1042"));
        for bad in [
            "memstore_",
            "memstore_..",
            "memstore_A",
            "user-1042",
            "memstore_a/b",
        ] {
            assert_eq!(store_name(bad), None, "{bad}");
        }
        assert_eq!(memory_seq(&memory_id(Seq(42))), Some(Seq(42)));
        for bad in [
            "mem_",
            "mem_042",
            "mem_0",
            "mem_-1",
            "mem_+1",
            "mem_1x",
            "memver_1_1",
            "mem_99999999999999999999999",
        ] {
            assert_eq!(memory_seq(bad), None, "{bad}");
        }
        assert_eq!(version_id(Seq(7), Seq(3)), "memver_7_3");
        assert_eq!(version_seqs("memver_7_3"), Some((Seq(7), Seq(3))));
        for bad in [
            "memver_7",
            "memver__3",
            "memver_07_3",
            "memver_7_3_1",
            "mem_7_3",
            "memver_7_x",
        ] {
            assert_eq!(version_seqs(bad), None, "{bad}");
        }
    }

    #[test]
    fn page_tokens_carry_any_key_and_refuse_what_no_page_gave() {
        for key in ["", "/a/b.md", "/ünï/cödé/", "/a b/%2F?&=#"] {
            assert_eq!(page_key(&page_token(key)).expect("a token"), key);
        }
        for bad in ["0", "zz", "c3", "ff00"] {
            assert!(page_key(bad).is_err(), "{bad}");
        }
    }
}
