//! Every answer of the memory-stores API names its request, as the hosted API's do: a
//! `request-id` header (`req_` and 24 hex digits), and in an error's body a `request_id` beside
//! its `error`, the id the official SDKs print with every error they raise.

use axum::body::Body;
use axum::http::{HeaderValue, Request};
use axum::middleware::Next;
use axum::response::Response;

/// The largest error body this adds the id to (the API's own errors are a few hundred bytes).
const ERROR_BODY_MAX: usize = 1 << 20;

/// A fresh request id: `req_` and 24 random hex digits (a counter's if the system's random
/// source fails, so an answer always has one).
pub(in crate::serve) fn fresh() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let digits = crate::client::token::random_hex(12).unwrap_or_else(|_| {
        format!(
            "{:024x}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        )
    });
    format!("req_{digits}")
}

/// Names the request in its answer: the header always, and `request_id` in an error's JSON
/// body.
pub(super) async fn name_request(request: Request<Body>, next: Next) -> Response {
    let id = fresh();
    let response = next.run(request).await;
    let (mut parts, body) = response.into_parts();
    if let Ok(value) = HeaderValue::from_str(&id) {
        parts.headers.insert("request-id", value);
    }
    if !parts.status.is_client_error() && !parts.status.is_server_error() {
        return Response::from_parts(parts, body);
    }
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BODY_MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let named = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(mut error)) => {
            error.insert("request_id".into(), id.into());
            serde_json::Value::Object(error).to_string().into_bytes()
        }
        _ => bytes.to_vec(),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(named))
}
