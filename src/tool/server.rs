//! `MnemoMemoryToolServer`: `tool_use` block in, `tool_result` block out, every call logged.
//!
//! Over a client of a served store ([`MnemoClient::server_url`]) each call is forwarded to the
//! server's `POST /v1/memory` as the client's agent, with this server's root, profile, limits
//! and durability: the server answers it byte for byte as a tool server of its own would, or,
//! when it answers with other settings, refuses it and records nothing. A request over the
//! limit is sent as its digest, as [`handle`](MnemoMemoryToolServer::handle) would log it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::client::{Forward, MnemoClient};
use crate::error::{Error, Result};
use crate::paths::MemPath;
use crate::tool::call::{Body, InputDigest, Refusal, RejectedCall, RejectedDigest, ToolCall};
use crate::tool::command::{Parsed, Profile, parse_text, parse_value};
use crate::tool::limits::Limits;
use crate::tool::request::{self, Request};

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
    /// The limits on file size, view length and request size (default [`Limits::default`]).
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
    ///
    /// A value whose compact JSON text is over [`Limits::max_request_bytes`] is refused and logged
    /// as a digest of that text (the size is measured without building the text). A `Value` has
    /// no duplicate keys by construction; text read from outside goes through
    /// [`handle_bytes`](Self::handle_bytes), which refuses them.
    pub fn handle(&self, block: &Value) -> Value {
        let limit = self.limits.max_request_bytes;
        if request::json_len_over(block, limit) {
            let is_block = block.get("type").and_then(Value::as_str) == Some("tool_use");
            let id = block
                .get("id")
                .and_then(Value::as_str)
                .filter(|_| is_block)
                .map(str::to_string);
            return self.refuse_too_large(id, request::value_digest(block));
        }
        if let Some(answer) = self.forwarded(Forward::Line(block.to_string().as_bytes())) {
            return answer;
        }
        let parsed = parse_value(block, &self.root, self.profile);
        self.record(parsed, Raw::Value(block))
    }

    /// Answers one line of text as `mnemo tool` reads it: see [`handle_bytes`](Self::handle_bytes).
    pub fn handle_line(&self, line: &str) -> Value {
        self.handle_bytes(line.as_bytes())
    }

    /// Answers one request's raw bytes (a line of `mnemo tool`, without its newline): refused
    /// and logged as a digest when over [`Limits::max_request_bytes`] or not UTF-8; otherwise
    /// parsed as JSON that names no key twice in one object, and answered as by
    /// [`handle`](Self::handle). Anything that is not a call gets an error result and is still
    /// recorded.
    pub fn handle_bytes(&self, bytes: &[u8]) -> Value {
        let limit = self.limits.max_request_bytes;
        if bytes.len() as u64 > limit {
            return self.refuse_too_large(None, request::digest_of(bytes));
        }
        if let Some(answer) = self.forwarded(Forward::Line(bytes)) {
            return answer;
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                return self.refuse(
                    None,
                    request::digest_of(bytes),
                    Refusal::NotUtf8 {
                        valid_up_to: e.valid_up_to() as u64,
                    },
                );
            }
        };
        let parsed = parse_text(text, &self.root, self.profile);
        self.record(parsed, Raw::Text(text))
    }

    /// Answers a request as [`request::read_request`] read it (or a binding made it): a line as
    /// by [`handle_bytes`](Self::handle_bytes); an input over the limit, which was never held
    /// whole, with the refusal for its size, logged as its digest.
    pub fn handle_request(&self, request: Request) -> Value {
        match request {
            Request::Line(bytes) => self.handle_bytes(&bytes),
            Request::TooLarge(digest) => self.refuse_too_large(None, digest),
            Request::Stopped {
                digest,
                tool_use_id,
            } => {
                let stopped = Forward::Stopped(&digest, tool_use_id.as_deref());
                if let Some(answer) = self.forwarded(stopped) {
                    return answer;
                }
                self.refuse(
                    tool_use_id,
                    digest,
                    Refusal::Stopped {
                        limit: self.limits.max_request_bytes,
                    },
                )
            }
        }
    }

    /// Refuses an input over the request limit, which is logged as its digest (through the
    /// server, for a served store).
    pub(crate) fn refuse_too_large(
        &self,
        tool_use_id: Option<String>,
        input: InputDigest,
    ) -> Value {
        if let Some(answer) = self.forwarded(Forward::TooLarge(&input, tool_use_id.as_deref())) {
            return answer;
        }
        let limit = self.limits.max_request_bytes;
        self.refuse(tool_use_id, input, Refusal::TooLarge { limit })
    }

    /// The answer of the server of a served store to `call` (a call it did not answer gets an
    /// error result that says why, and counts as a store failure); `None` for a store open here.
    fn forwarded(&self, call: Forward<'_>) -> Option<Value> {
        let answer = self
            .client
            .forward(call, &self.root, self.profile, self.limits)?;
        Some(answer.unwrap_or_else(|unanswered| {
            self.failures.fetch_add(1, Ordering::Relaxed);
            unanswered
        }))
    }

    fn refuse(&self, tool_use_id: Option<String>, input: InputDigest, refusal: Refusal) -> Value {
        let body = Body::RejectedDigest(RejectedDigest {
            root: self.root.clone(),
            profile: self.profile,
            input,
            refusal,
        });
        self.commit(tool_use_id, body)
    }

    fn record(&self, parsed: Parsed, raw: Raw<'_>) -> Value {
        let body = match parsed.command {
            Ok(command) => {
                match request::oversized_content(&command, &self.limits, &self.root, self.profile) {
                    Some(refusal) => {
                        return self.refuse(parsed.tool_use_id, raw.digest(), refusal);
                    }
                    None => Body::Tool(ToolCall {
                        root: self.root.clone(),
                        profile: self.profile,
                        limits: self.limits,
                        command,
                    }),
                }
            }
            Err(text) if raw.len() > request::DIGEST_OVER_BYTES => {
                let refusal = Refusal::Invalid {
                    text: request::invalid_text(&text),
                };
                return self.refuse(parsed.tool_use_id, raw.digest(), refusal);
            }
            Err(_) => Body::Rejected(RejectedCall {
                root: self.root.clone(),
                profile: self.profile,
                input: raw.text(),
            }),
        };
        self.commit(parsed.tool_use_id, body)
    }

    fn commit(&self, tool_use_id: Option<String>, body: Body) -> Value {
        match self.client.call(tool_use_id.clone(), body) {
            Ok(receipt) => tool_result(
                tool_use_id.unwrap_or_else(|| format!("mnemo-{}", receipt.seq)),
                &receipt.text,
                receipt.is_error,
            ),
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tool_result(
                    tool_use_id.unwrap_or_default(),
                    &format!(
                        "Error: The memory store failed while recording this call ({e}). It may or may not have been applied: view the path to check before you retry."
                    ),
                    true,
                )
            }
        }
    }
}

/// The input as it came: text read from outside, or a value built in memory (whose text is its
/// compact JSON, made only when needed).
enum Raw<'a> {
    Text(&'a str),
    Value(&'a Value),
}

impl Raw<'_> {
    fn len(&self) -> u64 {
        match self {
            Raw::Text(text) => text.len() as u64,
            Raw::Value(value) => request::json_len(value),
        }
    }

    fn digest(&self) -> InputDigest {
        match self {
            Raw::Text(text) => request::digest_of(text.as_bytes()),
            Raw::Value(value) => request::value_digest(value),
        }
    }

    fn text(&self) -> String {
        match self {
            Raw::Text(text) => (*text).to_string(),
            Raw::Value(value) => value.to_string(),
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
