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

#[cfg(feature = "client")]
mod link;
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
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::client::tool_server::MnemoMemoryToolServer;
use crate::store::projection::{MEMORY_TAG, MemoryRecord};

pub use schema::{TOOL_NAME, instructions, memory_tool_for};
pub use uri::{from_path as resource_uri, to_path as resource_path};

/// How many resources one `resources/list` reply holds at most; a longer list goes on in the
/// next page, which the reply's `nextCursor` asks for (MCP's cursor pagination).
pub const RESOURCES_PAGE: usize = 100;

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
    Initialize(String),

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

    // A resource read the store failed counts as a call it failed: the session ends saying so.
    fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, String> {
        self.client().records_by_tag(tag).map_err(|e| {
            self.count_read_failure(&e);
            e.to_string()
        })
    }

    fn record(&self, path: &str) -> Result<Option<MemoryRecord>, String> {
        self.client().record(path).map_err(|e| {
            self.count_read_failure(&e);
            e.to_string()
        })
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

/// One page of `resources/list`: the resources, and the cursor of the next page if any.
#[derive(Debug)]
pub struct ResourcePage {
    /// At most [`RESOURCES_PAGE`] resources, in path order.
    pub resources: Vec<Resource>,
    /// What the next `resources/list` passes as its `cursor`; `None` on the last page.
    pub next_cursor: Option<String>,
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
        match &self.tool {
            Some(tool) => memory_tool_for(
                &self.root,
                tool.limits().max_file_bytes,
                Some(tool.profile()),
            ),
            None => memory_tool_for(
                &self.root,
                crate::model::tool::limits::DEFAULT_MAX_FILE_BYTES,
                None,
            ),
        }
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

    /// The memory files under the root that the agent may read, as resources, in path order
    /// (not logged).
    pub async fn resources(&self) -> Result<Vec<Resource>, ErrorData> {
        Ok(self.records().await?.iter().map(resource).collect())
    }

    /// One page of [`MnemoMcpServer::resources`]: the first [`RESOURCES_PAGE`] after `cursor`
    /// (the `next_cursor` of the page before; `None` for the first page). The cursor names the
    /// last path listed, so a file created or deleted between pages moves no other file to
    /// another page. A cursor this server did not give is a `-32602` error.
    pub async fn resource_page(&self, cursor: Option<&str>) -> Result<ResourcePage, ErrorData> {
        let after = cursor.map(cursor_path).transpose()?;
        let records = self.records().await?;
        let start = after.map_or(0, |after| {
            records.partition_point(|r| path_order(&r.path, &after).is_le())
        });
        let page: Vec<&MemoryRecord> = records[start..].iter().take(RESOURCES_PAGE).collect();
        let next_cursor = match page.last() {
            Some(last) if start + page.len() < records.len() => {
                Some(format!("{CURSOR_PREFIX}{}", last.path))
            }
            _ => None,
        };
        Ok(ResourcePage {
            resources: page.into_iter().map(resource).collect(),
            next_cursor,
        })
    }

    /// The memory files under the root the agent may read, in path order.
    async fn records(&self) -> Result<Vec<MemoryRecord>, ErrorData> {
        let memory = Arc::clone(&self.memory);
        let mut records = blocking(move || memory.records_by_tag(MEMORY_TAG))
            .await?
            .map_err(store_error)?;
        records.retain(|r| under(&r.path, &self.root));
        records.sort_by(|a, b| path_order(&a.path, &b.path));
        Ok(records)
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
                    .map_err(|e| Error::Initialize(e.to_string()))?;
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
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let server = self.for_request(&context.extensions)?;
        let cursor = request.and_then(|r| r.cursor);
        let page = server.resource_page(cursor.as_deref()).await?;
        let mut result = ListResourcesResult::with_all_items(page.resources);
        result.next_cursor = page.next_cursor;
        Ok(result)
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

/// What starts every `resources/list` cursor this server gives; the path of the last resource
/// listed follows.
const CURSOR_PREFIX: &str = "after:";

/// The path a `resources/list` cursor names, or the `-32602` error for a cursor that is not one
/// this server gives.
fn cursor_path(cursor: &str) -> Result<String, ErrorData> {
    cursor
        .strip_prefix(CURSOR_PREFIX)
        .filter(|path| path.starts_with('/'))
        .map(str::to_string)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "invalid cursor {cursor:?}; pass the nextCursor of the previous resources/list reply, or no cursor for the first page"
                ),
                None,
            )
        })
}

/// Canonical paths in listing order: segment by segment (`/a/b` before `/a-b`).
fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
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
        let tool = memory_tool_for(
            "/memories",
            crate::model::tool::limits::DEFAULT_MAX_FILE_BYTES,
            Some(crate::model::tool::Profile::Spec),
        );
        assert_eq!(tool.name, "memory");
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["required"], json!(["command"]));
        assert_eq!(
            schema["properties"]["command"]["enum"],
            json!(crate::model::tool::COMMAND_NAMES)
        );
        let properties = schema["properties"].as_object().map(Map::len);
        assert_eq!(properties, Some(10));
        for (field, spec) in schema["properties"].as_object().into_iter().flatten() {
            let text = spec["description"].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{field} has no usable description");
        }
        assert!(instructions("/memories").contains("\"view\" and path \"/memories\""));
    }

    /// A store in a fresh temporary directory (kept while the directory lives) and a server on
    /// it under `durability`.
    fn server(durability: crate::Durability) -> (tempfile::TempDir, MnemoMcpServer) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let client = crate::MnemoClient::builder(dir.path().join("store"))
            .agent_id("mcp")
            .durability(durability)
            .open()
            .expect("open");
        (dir, MnemoMcpServer::new(MnemoMemoryToolServer::new(client)))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn resources_come_in_pages_that_cover_every_file_once() {
        let (_dir, mcp) = server(crate::Durability::Buffered);
        let tool = mcp.tool().expect("local").clone();
        let files = 2 * RESOURCES_PAGE + 50;
        for i in 0..files {
            let create = json!({"command": "create", "path": format!("/memories/d{}/f{i:04}.md", i % 7), "file_text": "x"});
            assert!(tool.handle(&create).get("is_error").is_none());
        }
        let rt = runtime();
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = rt
                .block_on(mcp.resource_page(cursor.as_deref()))
                .expect("page");
            pages += 1;
            assert!(page.resources.len() <= RESOURCES_PAGE);
            seen.extend(page.resources.iter().map(|r| r.uri.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        let all: Vec<String> = rt
            .block_on(mcp.resources())
            .expect("all")
            .iter()
            .map(|r| r.uri.clone())
            .collect();
        assert_eq!(all.len(), files);
        assert_eq!(seen, all, "the pages, in order, are the whole list once");
        for bad in ["nonsense", "after:", "after:relative"] {
            let err = rt.block_on(mcp.resource_page(Some(bad))).expect_err(bad);
            assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{bad}");
            assert!(err.message.contains("nextCursor"), "{}", err.message);
        }
        // A file deleted between pages moves no other file to another page.
        let first = rt.block_on(mcp.resource_page(None)).expect("page");
        let last = first
            .resources
            .last()
            .expect("a page")
            .title
            .clone()
            .expect("title");
        let deleted = tool.handle(&json!({"command": "delete", "path": last}));
        assert!(deleted.get("is_error").is_none(), "{deleted}");
        let second = rt
            .block_on(mcp.resource_page(first.next_cursor.as_deref()))
            .expect("page");
        assert_eq!(second.resources[0].uri, all[RESOURCES_PAGE]);
    }

    /// A resource read, like a call, shows only writes that are durable: a read racing a create
    /// whose fsync fails never returns the content (it gets an error or no file).
    #[test]
    fn a_resource_read_never_shows_a_write_whose_sync_failed() {
        const SECRET: &str = "this text never became durable";
        let rt = runtime();
        for trial in 0..32 {
            let (_dir, mcp) = server(crate::Durability::Fsync);
            let tool = mcp.tool().expect("local").clone();
            tool.client()
                .local_store()
                .expect("a store open here")
                .failpoints()
                .arm(crate::store::failpoint::Failpoint::Sync);
            let uri = resource_uri("/memories/racy.md");
            let (written, read) = std::thread::scope(|scope| {
                let writer = scope.spawn(|| {
                    tool.handle(&json!({"command": "create", "path": "/memories/racy.md", "file_text": SECRET}))
                });
                std::thread::sleep(Duration::from_micros(trial * 40));
                let read = rt.block_on(mcp.read(&uri));
                (writer.join().expect("writer"), read)
            });
            assert_eq!(written["is_error"], true, "the sync failed: {written}");
            if let Ok(ResourceContents::TextResourceContents { text, .. }) = &read {
                assert!(!text.contains(SECRET), "trial {trial}: {text}");
            }
        }
    }

    #[test]
    fn the_tool_description_names_the_size_limit_and_what_listings_leave_out() {
        let (_dir, mcp) = server(crate::Durability::Buffered);
        let description = mcp
            .tool_definition()
            .description
            .expect("description")
            .to_string();
        assert!(
            description.contains(&format!(
                "at most {} bytes (16M)",
                crate::model::tool::limits::DEFAULT_MAX_FILE_BYTES
            )),
            "{description}"
        );
        assert!(
            description
                .contains("names that start with a dot and node_modules directories are created"),
            "{description}"
        );
        let sdk = memory_tool_for("/memories", 1000, Some(crate::Profile::PythonSdk));
        let text = sdk.description.expect("description").to_string();
        assert!(
            text.contains("at most 1000 bytes (1000B)") && !text.contains("node_modules"),
            "{text}"
        );
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
