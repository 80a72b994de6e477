//! Intake: what one request becomes before it is answered, with no I/O. A tool server turns each
//! request into the event body it records and the tool_use id its result carries, with its root,
//! profile and limits; the limits a request is refused for (its size, its encoding, content over
//! the file-size limit) are applied here, so everything that decides an answer is pure: the body
//! is then answered by `Projection::run_traced`, live or in a
//! replay.

use serde_json::{Value, json};

use crate::model::paths::MemPath;
use crate::model::tool::call::{
    Body, InputDigest, Refusal, RejectedCall, RejectedDigest, ToolCall,
};
use crate::model::tool::command::{Parsed, Profile, parse_text, parse_value};
use crate::model::tool::limits::Limits;
use crate::model::tool::request::{self, Request};

/// One request as a server records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The id of the `tool_use` block the request came as, which its result carries.
    pub tool_use_id: Option<String>,
    /// The event body recorded for it, which its answer is made from.
    pub body: Body,
}

/// The settings a server takes requests in with: its root, profile and limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intake {
    root: String,
    profile: Profile,
    limits: Limits,
}

impl Intake {
    /// Requests under `root` answered in `profile` with `limits`; `Err` says why `root` is not a
    /// valid memory root.
    pub fn new(root: &str, profile: Profile, limits: Limits) -> Result<Intake, String> {
        let root = MemPath::root(root)?;
        Ok(Intake {
            root: root.to_string(),
            profile,
            limits,
        })
    }

    /// The settings whose root, `/memories`, is known to be valid.
    pub(crate) fn memories(profile: Profile, limits: Limits) -> Intake {
        Intake {
            root: "/memories".into(),
            profile,
            limits,
        }
    }

    /// The memory root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The result-string profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The limits enforced.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A whole `tool_use` block or a bare `input` object. A value whose compact JSON text is over
    /// [`Limits::max_request_bytes`] is refused as a digest of that text (its size measured
    /// without building the text).
    pub fn value(&self, block: &Value) -> Logged {
        if request::json_len_over(block, self.limits.max_request_bytes) {
            let is_block = block.get("type").and_then(Value::as_str) == Some("tool_use");
            let id = block
                .get("id")
                .and_then(Value::as_str)
                .filter(|_| is_block)
                .map(str::to_string);
            return self.too_large(id, request::value_digest(block));
        }
        self.parsed(
            parse_value(block, &self.root, self.profile),
            Raw::Value(block),
        )
    }

    /// One request's raw bytes (a line of `mnemo tool`, without its newline): refused as a digest
    /// when over [`Limits::max_request_bytes`] or not UTF-8, otherwise parsed as JSON that names
    /// no key twice in one object.
    pub fn bytes(&self, bytes: &[u8]) -> Logged {
        if bytes.len() as u64 > self.limits.max_request_bytes {
            return self.too_large(None, request::digest_of(bytes));
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let refusal = Refusal::NotUtf8 {
                    valid_up_to: e.valid_up_to() as u64,
                };
                return self.refused(None, request::digest_of(bytes), refusal);
            }
        };
        self.parsed(parse_text(text, &self.root, self.profile), Raw::Text(text))
    }

    /// A request as [`request::read_request`] read it (or a binding made it).
    pub fn request(&self, request: &Request) -> Logged {
        match request {
            Request::Line(bytes) => self.bytes(bytes),
            Request::TooLarge(digest) => self.too_large(None, digest.clone()),
            Request::Stopped {
                digest,
                tool_use_id,
            } => {
                let refusal = Refusal::Stopped {
                    limit: self.limits.max_request_bytes,
                };
                self.refused(tool_use_id.clone(), digest.clone(), refusal)
            }
        }
    }

    /// An input over the request limit, never held whole: refused as its digest.
    pub fn too_large(&self, tool_use_id: Option<String>, input: InputDigest) -> Logged {
        let limit = self.limits.max_request_bytes;
        self.refused(tool_use_id, input, Refusal::TooLarge { limit })
    }

    fn refused(&self, tool_use_id: Option<String>, input: InputDigest, refusal: Refusal) -> Logged {
        Logged {
            tool_use_id,
            body: Body::RejectedDigest(RejectedDigest {
                root: self.root.clone(),
                profile: self.profile,
                input,
                refusal,
            }),
        }
    }

    fn parsed(&self, parsed: Parsed, raw: Raw<'_>) -> Logged {
        let body = match parsed.command {
            Ok(command) => {
                match request::oversized_content(&command, &self.limits, &self.root, self.profile) {
                    Some(refusal) => {
                        return self.refused(parsed.tool_use_id, raw.digest(), refusal);
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
                return self.refused(parsed.tool_use_id, raw.digest(), refusal);
            }
            Err(_) => Body::Rejected(RejectedCall {
                root: self.root.clone(),
                profile: self.profile,
                input: raw.text(),
            }),
        };
        Logged {
            tool_use_id: parsed.tool_use_id,
            body,
        }
    }
}

/// The id a result carries: the request's tool_use id, or for a request that had none, one
/// made from the seq of its event (`mnemo-SEQ`).
pub fn result_id(tool_use_id: Option<String>, seq: u64) -> String {
    tool_use_id.unwrap_or_else(|| format!("mnemo-{seq}"))
}

/// The `tool_use_id` of the result of a bare input whose recording failed, or whose server did
/// not answer: no seq is known to name it (it may or may not have been recorded).
pub(crate) const UNCONFIRMED_ID: &str = "mnemo-unconfirmed";

/// The `tool_result` block with `id`, `text` and, when set, `is_error`.
pub fn tool_result(id: String, text: &str, is_error: bool) -> Value {
    let mut out = json!({"type": "tool_result", "tool_use_id": id, "content": text});
    if is_error {
        out["is_error"] = Value::Bool(true);
    }
    out
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
