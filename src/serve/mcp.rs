//! MCP over streamable HTTP at `/mcp`: rmcp's transport around [`MnemoMcpServer`].
//!
//! Clients that open a session (`initialize`, then `Mcp-Session-Id` on every request) and
//! session-less requests (the 2026-07-28 protocol) are both served. Either way the agent a call
//! is recorded under is read from the request being answered: the gate put its [`Caller`] in the
//! HTTP request's extensions, rmcp hands the request's parts to the handler, and the server's
//! route picks that agent's tool server. A session never fixes the agent.
//!
//! The gate checks `Host` and `Origin` for every route, so rmcp's own check is off.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::Extensions;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::auth::Caller;
use crate::client::tool_server::MnemoMemoryToolServer;
use crate::mcp::{MnemoMcpServer, Route};

/// The `/mcp` service over `shared`; cancelling `stop` ends its sessions and streams.
pub(crate) fn service(
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> StreamableHttpService<MnemoMcpServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(stop)
        .with_max_request_body_bytes(
            usize::try_from(shared.max_request_bytes()).unwrap_or(usize::MAX),
        );
    // A fleet's node keeps sessions in the bucket, so they follow their store to another node.
    config.session_store = shared.mcp_sessions.external();
    let shared_sessions = shared.mcp_sessions.manager();
    let route: Route = {
        let shared = Arc::clone(&shared);
        Arc::new(move |extensions: &Extensions| tool_for_request(&shared, extensions))
    };
    let factory = move || {
        Ok(MnemoMcpServer::routed(
            shared.tool.clone(),
            Arc::clone(&route),
        ))
    };
    StreamableHttpService::new(factory, shared_sessions, config)
}

/// The tool server of the agent the request being answered acts as.
fn tool_for_request(
    shared: &Shared,
    extensions: &Extensions,
) -> Result<MnemoMemoryToolServer, ErrorData> {
    let caller = extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .ok_or_else(|| {
            ErrorData::internal_error(
                "this request carries no authenticated caller; retry it as an HTTP request to /mcp",
                None,
            )
        })?;
    shared
        .tool_for(&caller.agent)
        .map_err(|why| ErrorData::invalid_request(format!("the X-Mnemo-Agent header: {why}"), None))
}
