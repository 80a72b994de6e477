//! `mnemo mcp`: the memory tool as an MCP server, for any client of the Model Context Protocol.
//!
//! Built on the official Rust SDK (`rmcp`) and compiled only with the `mcp` cargo feature, so the
//! default build of the library carries no async runtime. [`MnemoMcpServer`] offers:
//!
//! - one tool, `memory`, whose input is the memory tool's `input` object. Each call goes through
//!   [`MnemoMemoryToolServer::handle`], so the text is byte for byte what the memory tool returns,
//!   the call is one event in the log attributed to the server's agent, and an error result is an
//!   MCP tool error (`isError: true`). Calls carry no `tool_use` id: MCP request ids restart with
//!   every session, and the store answers a reused id from its record instead of running the call.
//! - every memory file under the root as a read-only resource (`memory:///memories/notes.md`),
//!   listed and read through [`MnemoClient::records_by_tag`](crate::MnemoClient::records_by_tag)
//!   and [`MnemoClient::record`](crate::MnemoClient::record): access-checked like a `view`, but
//!   not logged, so a client that browses memory spends no events and changes no answer.
//! - instructions that give the model the memory protocol: view the memory directory first.
//!
//! The session speaks JSON-RPC over stdin and stdout, one message per line, through rmcp's
//! transport behind a thin line filter: a line that is not JSON (or not UTF-8), which rmcp would
//! skip without a word, is answered with a parse error (`-32700`, id `null`) that says what was
//! wrong and what a message looks like, and the session goes on. Every other line reaches rmcp
//! unchanged. EOF on stdin ends the session.
//!
//! A store call runs on its caller's thread and blocks it (a durable write waits for its fsync),
//! so each runs on tokio's blocking pool, and one slow commit does not stall the session's reading
//! and writing.

mod schema;
mod stdio;
mod uri;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Extensions, Implementation, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::projection::{MEMORY_TAG, MemoryRecord};
use crate::tool::MnemoMemoryToolServer;

pub use schema::{TOOL_NAME, instructions, memory_tool};
pub use uri::{PREFIX as URI_PREFIX, from_path as resource_uri, to_path as resource_path};

/// How long the runtime waits for its threads after the client hung up.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// Why an MCP session could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The async runtime could not be started.
    #[error(
        "could not start the MCP server's runtime ({0}); check the process limits (threads, open files) and try again"
    )]
    Runtime(#[source] std::io::Error),

    /// No client completed the MCP handshake on stdin.
    #[error(
        "no MCP session was established ({0}); `mnemo mcp` speaks MCP on stdin and stdout, so start it from an MCP client's server configuration, not from a terminal"
    )]
    Initialize(#[source] Box<ServerInitializeError>),

    /// The session's task failed after the handshake.
    #[error("the MCP session stopped abnormally ({0}); restart the server from the client")]
    Session(String),
}

/// Picks the memory-tool server that answers one request from what the transport attached to
/// the request (over HTTP, the caller it authenticated), so that the agent comes from each
/// request and never from the session.
pub type Route = Arc<dyn Fn(&Extensions) -> Result<MnemoMemoryToolServer, ErrorData> + Send + Sync>;

/// What answers an MCP server's calls: a [`MnemoMemoryToolServer`] over a store open in this
/// process, or a client of a store another process serves.
pub trait Memory: Send + Sync + 'static {
    /// Answers a `tool_use` block with the `tool_result` block, recording the call.
    fn handle(&self, block: &Value) -> Value;
    /// The memory files carrying `tag` that the agent may read (not logged).
    fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, String>;
    /// The file at canonical `path`, if the agent may read it (not logged).
    fn record(&self, path: &str) -> Result<Option<MemoryRecord>, String>;
}

impl Memory for MnemoMemoryToolServer {
    fn handle(&self, block: &Value) -> Value {
        MnemoMemoryToolServer::handle(self, block)
    }

    fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, String> {
        self.client().records_by_tag(tag).map_err(|e| e.to_string())
    }

    fn record(&self, path: &str) -> Result<Option<MemoryRecord>, String> {
        self.client().record(path).map_err(|e| e.to_string())
    }
}

/// An MCP server over a [`MnemoMemoryToolServer`] (or another [`Memory`]). `Clone`, so a host
/// can keep a handle (for [`MnemoMemoryToolServer::store_failures`]) while the session runs.
#[derive(Clone)]
pub struct MnemoMcpServer {
    tool: Option<MnemoMemoryToolServer>,
    memory: Arc<dyn Memory>,
    root: String,
    max_request_bytes: u64,
    route: Option<Route>,
}

impl std::fmt::Debug for MnemoMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MnemoMcpServer")
            .field("tool", &self.tool)
            .field("root", &self.root)
            .field("routed", &self.route.is_some())
            .finish()
    }
}

impl MnemoMcpServer {
    /// A server answering through `tool`, with its root, profile, limits and agent.
    pub fn new(tool: MnemoMemoryToolServer) -> MnemoMcpServer {
        MnemoMcpServer {
            memory: Arc::new(tool.clone()),
            root: tool.root().to_string(),
            max_request_bytes: tool.limits().max_request_bytes,
            tool: Some(tool),
            route: None,
        }
    }

    /// A server answering through `memory` (such as a client of a `mnemo serve`) under the
    /// canonical memory `root`, reading messages of at most `max_request_bytes` on stdin.
    pub fn over(
        memory: Arc<dyn Memory>,
        root: impl Into<String>,
        max_request_bytes: u64,
    ) -> MnemoMcpServer {
        MnemoMcpServer {
            tool: None,
            memory,
            root: root.into(),
            max_request_bytes,
            route: None,
        }
    }

    /// A server whose tool calls and resource reads are answered by the tool server `route`
    /// picks for each request; `tool` answers what needs no agent (the tool list, the
    /// instructions), so the routed servers should share its root.
    pub fn routed(tool: MnemoMemoryToolServer, route: Route) -> MnemoMcpServer {
        MnemoMcpServer {
            route: Some(route),
            ..MnemoMcpServer::new(tool)
        }
    }

    /// The server that answers a request carrying `extensions`.
    fn for_request(&self, extensions: &Extensions) -> Result<MnemoMcpServer, ErrorData> {
        match &self.route {
            None => Ok(self.clone()),
            Some(route) => Ok(MnemoMcpServer::new(route(extensions)?)),
        }
    }

    /// The memory-tool server calls are answered by, when the store is open in this process.
    pub fn tool(&self) -> Option<&MnemoMemoryToolServer> {
        self.tool.as_ref()
    }

    /// The `memory` tool's MCP definition: name, description and input schema.
    pub fn tool_definition(&self) -> Tool {
        memory_tool(&self.root)
    }

    /// Answers one `memory` call whose arguments are `input` (the memory tool's `input` object),
    /// recording it as one event. The text is the memory tool's; `is_error` its error flag.
    pub async fn call(&self, input: Value) -> Result<CallToolResult, ErrorData> {
        // A block without an id: nothing in the arguments can name a tool_use id to replay.
        let block = json!({"type": "tool_use", "name": TOOL_NAME, "input": input});
        let memory = Arc::clone(&self.memory);
        let result = blocking(move || memory.handle(&block)).await?;
        let text = result["content"].as_str().unwrap_or_default().to_string();
        let content = vec![ContentBlock::text(text)];
        Ok(if result.get("is_error") == Some(&Value::Bool(true)) {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }

    /// The memory files under the root that the agent may read, as resources (not logged).
    pub async fn resources(&self) -> Result<Vec<Resource>, ErrorData> {
        let memory = Arc::clone(&self.memory);
        let mut records = blocking(move || memory.records_by_tag(MEMORY_TAG))
            .await?
            .map_err(store_error)?;
        records.retain(|r| under(&r.path, &self.root));
        Ok(records.iter().map(resource).collect())
    }

    /// The content of the memory file `uri` names, if it is under the root and the agent may
    /// read it (not logged).
    pub async fn read(&self, uri: &str) -> Result<ResourceContents, ErrorData> {
        let missing = || {
            ErrorData::resource_not_found(
                format!(
                    "no memory file at {uri}; resources/list gives the URIs of the files there are"
                ),
                Some(json!({"uri": uri})),
            )
        };
        let path = resource_path(uri)
            .filter(|p| under(p, &self.root))
            .ok_or_else(missing)?;
        let memory = Arc::clone(&self.memory);
        let record = blocking(move || memory.record(&path))
            .await?
            .map_err(store_error)?
            .ok_or_else(missing)?;
        Ok(ResourceContents::text(record.content, uri).with_mime_type(mime_type(&record.path)))
    }

    /// Serves one MCP session on stdin and stdout until the client closes it, on a
    /// current-thread runtime of its own. Blocks the calling thread.
    pub fn serve_stdio(self) -> Result<(), Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let outcome = runtime.block_on(async move {
            let (stdin, stdout) = rmcp::transport::stdio();
            let limit = self.max_request_bytes;
            let (transport, relay) = stdio::filter(stdin, stdout, limit);
            let relay = tokio::spawn(relay);
            let session = async {
                let running = self
                    .serve(transport)
                    .await
                    .map_err(|e| Error::Initialize(Box::new(e)))?;
                running
                    .waiting()
                    .await
                    .map(drop)
                    .map_err(|e| Error::Session(e.to_string()))
            };
            let outcome = session.await;
            // rmcp has dropped its side of the transport: the relay writes what is left and ends.
            let relayed = relay
                .await
                .map_err(|e| e.to_string())
                .and_then(|written| written.map_err(|e| format!("writing to stdout failed: {e}")));
            outcome.and(relayed.map_err(Error::Session))
        });
        runtime.shutdown_timeout(SHUTDOWN_WAIT);
        outcome
    }
}

impl ServerHandler for MnemoMcpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let implementation = Implementation::new("mnemo", env!("CARGO_PKG_VERSION"))
            .with_title("Mnemo memory")
            .with_description(
                "Anthropic's memory tool over an event-sourced, verifiable memory store",
            );
        ServerConfig::new(capabilities)
            .with_server_info(implementation)
            .with_instructions(instructions(&self.root))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            self.tool_definition(),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; this server has one tool, {TOOL_NAME:?}",
                    request.name
                ),
                None,
            ));
        }
        let input = Value::Object(request.arguments.unwrap_or_default());
        let server = self.for_request(&context.extensions)?;
        Ok(server.call(input).await?.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let server = self.for_request(&context.extensions)?;
        Ok(ListResourcesResult::with_all_items(
            server.resources().await?,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let server = self.for_request(&context.extensions)?;
        let contents = server.read(&request.uri).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(unrouted(&request))
    }
}

/// The methods a client may call, for the error that answers any other.
const METHODS: &str = "initialize, ping, tools/list, tools/call, resources/list, resources/read, resources/templates/list";

/// The protocol error for a request the SDK could not route: a method this server answers whose
/// params did not parse (`-32602`, with what serde found wrong), or an unknown method (`-32601`).
fn unrouted(request: &CustomRequest) -> ErrorData {
    let params = request.params.clone().unwrap_or(Value::Null);
    let problem = match request.method.as_str() {
        "tools/call" => serde_json::from_value::<CallToolRequestParams>(params).err(),
        "resources/read" => serde_json::from_value::<ReadResourceRequestParams>(params).err(),
        "tools/list" | "resources/list" | "resources/templates/list" => {
            serde_json::from_value::<Option<PaginatedRequestParams>>(params).err()
        }
        method => {
            return ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("unknown method {method:?}; this server answers {METHODS}"),
                None,
            );
        }
    };
    let detail = problem.map_or_else(
        || "they do not fit its schema".to_string(),
        |e| e.to_string(),
    );
    ErrorData::invalid_params(
        format!(
            "invalid params for {}: {detail}; send them as the MCP specification describes",
            request.method
        ),
        None,
    )
}

/// Runs a blocking store call on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorData> {
    tokio::task::spawn_blocking(call).await.map_err(|e| {
        ErrorData::internal_error(
            format!("the memory store call did not finish ({e}); retry, or restart the server"),
            None,
        )
    })
}

fn store_error(why: String) -> ErrorData {
    ErrorData::internal_error(why, None)
}

/// Whether canonical `path` is `root` or lies under it.
fn under(path: &str, root: &str) -> bool {
    root == "/"
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn mime_type(path: &str) -> &'static str {
    if path.ends_with(".md") {
        "text/markdown"
    } else {
        "text/plain"
    }
}

fn resource(record: &MemoryRecord) -> Resource {
    let name = record.path.rsplit('/').next().unwrap_or_default();
    Resource::new(resource_uri(&record.path), name)
        .with_title(record.path.clone())
        .with_description(format!(
            "Memory file {}; created by event {}, last changed by event {}.",
            record.path, record.created, record.updated
        ))
        .with_mime_type(mime_type(&record.path))
        .with_size(record.content.len() as u64)
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    #[test]
    fn schema_names_the_six_commands_and_describes_every_field() {
        let tool = memory_tool("/memories");
        assert_eq!(tool.name, "memory");
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["required"], json!(["command"]));
        assert_eq!(
            schema["properties"]["command"]["enum"],
            json!(crate::tool::COMMAND_NAMES)
        );
        let properties = schema["properties"].as_object().map(Map::len);
        assert_eq!(properties, Some(10));
        for (field, spec) in schema["properties"].as_object().into_iter().flatten() {
            let text = spec["description"].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{field} has no usable description");
        }
        assert!(instructions("/memories").contains("\"view\" and path \"/memories\""));
    }

    #[test]
    fn resources_stay_under_the_root() {
        assert!(under("/memories/a.md", "/memories"));
        assert!(under("/memories/x/y.md", "/memories"));
        assert!(!under("/memoriesX/a.md", "/memories"));
        assert!(!under("/other/a.md", "/memories"));
        assert!(under("/other/a.md", "/"));
        assert_eq!(mime_type("/memories/a.md"), "text/markdown");
        assert_eq!(mime_type("/memories/a.txt"), "text/plain");
    }
}
