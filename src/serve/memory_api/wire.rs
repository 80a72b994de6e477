//! The memory-stores API's objects and errors as the official SDKs read them (`anthropic`
//! 2.16.0 and 2.17.0, `@anthropic-ai/sdk` 1.16.0 and 1.17.0: `BetaManagedAgentsMemoryStore`,
//! `BetaManagedAgentsMemory`, the `PageCursor` page, the error envelope and its
//! `BetaManagedAgentsMemoryPathConflictErrorObject`).

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

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
    /// 409 `memory_path_conflict_error`, naming the memory in the way as the SDKs' error object
    /// does (`conflicting_memory_id`, `""` when it cannot be named; `conflicting_path`).
    PathConflict {
        message: String,
        memory_id: String,
        path: String,
    },
    /// 529 `overloaded_error` (the SDKs retry it).
    Overloaded(String),
    /// 429 `rate_limit_error`, with `Retry-After` (the SDKs retry it): the request's principal
    /// has its whole share of the server in flight.
    RateLimited(String),
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
            ApiError::PathConflict { message, .. } => {
                (StatusCode::CONFLICT, "memory_path_conflict_error", message)
            }
            ApiError::Overloaded(m) => (
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                "overloaded_error",
                m,
            ),
            ApiError::RateLimited(m) => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", m),
            ApiError::Api(m) => (StatusCode::INTERNAL_SERVER_ERROR, "api_error", m),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind, message) = self.parts();
        let mut error = serde_json::json!({"type": kind, "message": message});
        if let ApiError::PathConflict {
            memory_id, path, ..
        } = &self
        {
            error["conflicting_memory_id"] = memory_id.as_str().into();
            error["conflicting_path"] = path.as_str().into();
        }
        let body = serde_json::json!({"type": "error", "error": error});
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"mnemo\""),
            );
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // The SDKs retry 409 and 5xx unless told not to; only an overloaded server (or one
        // that asks to slow down) is worth it.
        if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

/// A query string read as `T`, refused (when it does not read) with the API's envelope rather
/// than axum's plain-text rejection.
pub(super) struct ApiQuery<T>(pub T);

impl<T> std::ops::Deref for ApiQuery<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| ApiQuery(value))
            .map_err(|e| {
                ApiError::InvalidRequest(format!(
                    "the query string is not one this route takes ({}); give each parameter once, with a value of its type",
                    e.body_text()
                ))
            })
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
    fn page_tokens_carry_any_key_and_refuse_what_no_page_gave() {
        for key in ["", "/a/b.md", "/ünï/cödé/", "/a b/%2F?&=#"] {
            assert_eq!(page_key(&page_token(key)).expect("a token"), key);
        }
        for bad in ["0", "zz", "c3", "ff00"] {
            assert!(page_key(bad).is_err(), "{bad}");
        }
    }
}
