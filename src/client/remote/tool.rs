//! The memory tool through a server: a call forwarded as sent, or as a tool server over a
//! served store forwards it with the settings it answers with ([`Answering`]).

use serde_json::Value;

use super::{RemoteClient, RemoteError, Told, lane};
use crate::model::event::InputDigest;
use crate::model::tool::{Limits, Profile};
use crate::store::log::Durability;

impl RemoteClient {
    /// Answers one memory-tool request (a `tool_use` block or a bare input, as JSON text or
    /// any bytes `mnemo tool` might read on a line) and returns the `tool_result` JSON text,
    /// byte for byte what the server's [`MnemoMemoryToolServer`](crate::MnemoMemoryToolServer)
    /// made.
    /// A failure after the answer (a `delete = erase` whose erasure failed) is dropped here;
    /// `mnemo tool` and `mnemo mcp` say it and exit 2.
    pub fn memory_bytes(&self, request: &[u8]) -> Result<Vec<u8>, RemoteError> {
        self.memory_told(request).map(|told| told.body)
    }

    /// [`memory_bytes`](Self::memory_bytes), with what failed after the answer.
    pub(crate) fn memory_told(&self, request: &[u8]) -> Result<Told, RemoteError> {
        self.tool_call(lane::CALL, "/v1/memory", request, None)
    }

    /// [`memory_bytes`](Self::memory_bytes) for a value: the `tool_result` block.
    pub fn handle(&self, block: &Value) -> Result<Value, RemoteError> {
        self.handle_told(block).map(|(result, _)| result)
    }

    /// [`handle`](Self::handle), with what failed after the answer.
    pub(crate) fn handle_told(
        &self,
        block: &Value,
    ) -> Result<(Value, Option<String>), RemoteError> {
        let told = self.memory_told(block.to_string().as_bytes())?;
        Ok((self.json(&told.body)?, told.after))
    }

    /// Records a request over the size limit, which was never held whole, as its digest, and
    /// returns the refusal's `tool_result` JSON text (as `mnemo tool` answers such a line).
    pub fn oversized(&self, digest: &InputDigest) -> Result<Vec<u8>, RemoteError> {
        let body = serde_json::to_vec(digest).map_err(|e| self.protocol(e.to_string()))?;
        self.tool_call(lane::OVERSIZED, "/v1/memory/oversized", &body, None)
            .map(|told| told.body)
    }

    /// [`memory_bytes`](Self::memory_bytes) for a tool server that answers with `answering`:
    /// a server that answers with other settings refuses the call (409) and records nothing.
    pub(crate) fn memory_answering(
        &self,
        request: &[u8],
        answering: &Answering,
    ) -> Result<Told, RemoteError> {
        self.tool_call(lane::CALL, "/v1/memory", request, Some(answering))
    }

    /// Records a request over the limit as its digest, as a tool server that answers with
    /// `answering` refuses it: with the block's `tool_use_id`, and as an input whose conversion
    /// to text `stopped` at the limit (a binding's object) or one sent whole.
    pub(crate) fn oversized_answering(
        &self,
        digest: &InputDigest,
        tool_use_id: Option<&str>,
        stopped: bool,
        answering: &Answering,
    ) -> Result<Told, RemoteError> {
        let mut body = serde_json::to_value(digest).map_err(|e| self.protocol(e.to_string()))?;
        body["tool_use_id"] = tool_use_id.into();
        body["stopped"] = stopped.into();
        self.tool_call(
            lane::OVERSIZED,
            "/v1/memory/oversized",
            body.to_string().as_bytes(),
            Some(answering),
        )
    }

    /// Sends a memory call (a frame of `kind` on the local socket, or `body` posted to `route`
    /// when there is none or it cannot be reached) for a tool server answering with
    /// `answering`.
    fn tool_call(
        &self,
        kind: u8,
        route: &str,
        body: &[u8],
        answering: Option<&Answering>,
    ) -> Result<Told, RemoteError> {
        if let Some(lane) = &self.lane {
            let hello = lane::Hello {
                token: &self.token,
                agent: self.agent.as_deref(),
                answering,
            };
            if let Some(answer) = lane.call(&self.url, self.wait, &hello, kind, body) {
                return answer;
            }
        }
        let query = answering.map(Answering::query).unwrap_or_default();
        self.post_told(route, &query, body)
    }
}

/// What a tool server answers memory calls with, sent with each call a tool server over a
/// served store forwards: the server compares it with its own and refuses a call it would
/// answer with other strings (409), recording nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answering {
    /// The memory root, canonical.
    pub(crate) root: String,
    /// The result-string profile.
    pub(crate) profile: Profile,
    /// The limits.
    pub(crate) limits: Limits,
    /// The durability writes are acknowledged under.
    pub(crate) durability: Durability,
}

impl Answering {
    /// The settings as query parameters (`view_max_chars=none` for no view limit).
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        vec![
            ("root", self.root.clone()),
            ("profile", self.profile.name().to_string()),
            ("durability", self.durability.name().to_string()),
            ("max_file_bytes", self.limits.max_file_bytes.to_string()),
            (
                "max_request_bytes",
                self.limits.max_request_bytes.to_string(),
            ),
            (
                "view_max_chars",
                self.limits
                    .view_max_chars
                    .map_or_else(|| "none".to_string(), |chars| chars.to_string()),
            ),
        ]
    }
}
