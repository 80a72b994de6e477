//! `MnemoMemoryToolServer`: `tool_use` block in, `tool_result` block out, every call logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::event::{Body, RejectedCall, ToolCall};
use crate::paths::MemPath;
use crate::tool::command::{Parsed, Profile, parse_value};
use crate::tool::limits::Limits;

/// The beta header sent when the server is built for Managed Agents.
const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";

/// Options for a server.
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    client: MnemoClient,
    root: String,
    profile: Profile,
    limits: Limits,
    managed_agents_beta: bool,
}

impl ServerBuilder {
    /// The limits on file size and view length (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The memory root (default `/memories`).
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    /// The result-string profile (default [`Profile::Spec`]).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Whether [`MnemoMemoryToolServer::beta_header`] returns the Managed Agents beta header.
    pub fn managed_agents_beta(mut self, on: bool) -> Self {
        self.managed_agents_beta = on;
        self
    }

    /// The defaults, whose root is known to be valid.
    fn build_default(self) -> MnemoMemoryToolServer {
        MnemoMemoryToolServer {
            client: self.client,
            root: self.root,
            profile: self.profile,
            limits: self.limits,
            managed_agents_beta: self.managed_agents_beta,
            failures: Arc::default(),
        }
    }

    /// Checks the root and builds the server.
    pub fn build(self) -> Result<MnemoMemoryToolServer> {
        let root = MemPath::root(&self.root).map_err(Error::InvalidArgument)?;
        Ok(MnemoMemoryToolServer {
            client: self.client,
            root: root.to_string(),
            profile: self.profile,
            limits: self.limits,
            managed_agents_beta: self.managed_agents_beta,
            failures: Arc::default(),
        })
    }
}

/// Answers memory-tool calls from a store. `Send + Sync`, cheap to clone.
#[derive(Clone, Debug)]
pub struct MnemoMemoryToolServer {
    client: MnemoClient,
    root: String,
    profile: Profile,
    limits: Limits,
    managed_agents_beta: bool,
    failures: Arc<AtomicU64>,
}

impl MnemoMemoryToolServer {
    /// A server with the default root (`/memories`) and profile (`spec`).
    pub fn new(client: MnemoClient) -> MnemoMemoryToolServer {
        MnemoMemoryToolServer::builder(client).build_default()
    }

    /// Options for a server over `client`.
    pub fn builder(client: MnemoClient) -> ServerBuilder {
        ServerBuilder {
            client,
            root: "/memories".into(),
            profile: Profile::Spec,
            limits: Limits::default(),
            managed_agents_beta: false,
        }
    }

    /// The client calls are recorded through.
    pub fn client(&self) -> &MnemoClient {
        &self.client
    }

    /// The memory root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The result-string profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// How many calls this server (and its clones) could not record because the store failed.
    /// Each got an error result; a host should tell its operator.
    pub fn store_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The limits enforced.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The tool definition to put in the request's `tools`.
    pub fn tool_schema(&self) -> Value {
        json!({"type": "memory_20250818", "name": "memory"})
    }

    /// The `anthropic-beta` header to send, if any (the memory tool itself needs none).
    pub fn beta_header(&self) -> Option<&'static str> {
        self.managed_agents_beta.then_some(MANAGED_AGENTS_BETA)
    }

    /// Answers a whole `tool_use` block or a bare `input` object with a `tool_result` block.
    /// Never panics; every call, valid or not, is recorded as one event.
    pub fn handle(&self, block: &Value) -> Value {
        let parsed = parse_value(block, &self.root, self.profile);
        self.record(parsed, || block.to_string())
    }

    /// Answers one line of text as `mnemo tool` reads it: JSON is handled as by
    /// [`handle`](Self::handle); anything else gets an error result and is still recorded.
    pub fn handle_line(&self, line: &str) -> Value {
        match serde_json::from_str::<Value>(line) {
            Ok(value) => self.handle(&value),
            Err(_) => {
                let parsed = crate::tool::command::parse_text(line, &self.root, self.profile);
                self.record(parsed, || line.to_string())
            }
        }
    }

    fn record(&self, parsed: Parsed, raw: impl FnOnce() -> String) -> Value {
        let body = match parsed.command {
            Ok(command) => Body::Tool(ToolCall {
                root: self.root.clone(),
                profile: self.profile,
                limits: self.limits,
                command,
            }),
            Err(_) => Body::Rejected(RejectedCall {
                root: self.root.clone(),
                profile: self.profile,
                input: raw(),
            }),
        };
        match self.client.call(parsed.tool_use_id.clone(), body) {
            Ok(receipt) => tool_result(
                parsed
                    .tool_use_id
                    .unwrap_or_else(|| format!("mnemo-{}", receipt.seq)),
                &receipt.text,
                receipt.is_error,
            ),
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tool_result(
                    parsed.tool_use_id.unwrap_or_default(),
                    &format!(
                        "Error: The memory store failed while recording this call ({e}). It may or may not have been applied: view the path to check before you retry."
                    ),
                    true,
                )
            }
        }
    }
}

fn tool_result(tool_use_id: String, text: &str, is_error: bool) -> Value {
    let mut out = json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": text});
    if is_error {
        out["is_error"] = Value::Bool(true);
    }
    out
}
