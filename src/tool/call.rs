//! The calls the core answers, as the core sees them: a parsed call with the settings it ran
//! under, an input that did not parse, an admin command, or an input kept only as a digest with
//! the reason it was refused.
//!
//! These are the core's own types: the event format ([`crate::event`]) stores them through its
//! own serialisable mirror and an explicit encoder, so nothing here decides a stored byte.
//! `InputDigest` also derives serde for the JSON a client sends a server an oversized input as.

use serde::{Deserialize, Serialize};

use crate::hash::EventHash;
use crate::policy::AdminCommand;
use crate::tool::command::{Command, Profile};
use crate::tool::limits::Limits;

/// A memory-tool call that parsed into a typed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The memory root the server ran under (`/memories` by default).
    pub root: String,
    /// The result-string profile the server ran under.
    pub profile: Profile,
    /// The limits the server enforced.
    pub limits: Limits,
    /// The command, with its paths exactly as the model sent them.
    pub command: Command,
}

/// An input that could not be parsed into a command (not JSON, unknown command, missing fields...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedCall {
    /// The memory root the server ran under.
    pub root: String,
    /// The result-string profile the server ran under.
    pub profile: Profile,
    /// The raw input text: the JSON as received, or the line that was not JSON.
    pub input: String,
}

/// What is logged of an input instead of the input itself: its length, its hash and its start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDigest {
    /// The input's length in bytes.
    pub len: u64,
    /// `blake3` of the input's bytes.
    pub hash: EventHash,
    /// At most the first 256 bytes, cut at a character boundary (decoded with U+FFFD for each
    /// invalid sequence when the input is not UTF-8).
    pub prefix: String,
}

/// Why an input logged as a digest was refused. The answer text is made from these fields (and
/// the digest's) alone, so replay re-derives it without the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The input is over the request-size limit; it was not parsed.
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The input is not UTF-8; it was not parsed.
    NotUtf8 {
        /// Offset of the first byte that is not UTF-8.
        valid_up_to: u64,
    },
    /// An input over 4 KiB that is not a valid call: the parser's error text (at most 2 KiB).
    Invalid {
        /// The text the model was given.
        text: String,
    },
    /// A call whose content field is over the file-size limit: refused before it runs.
    ContentTooLarge {
        /// The path as the answer shows it.
        path: String,
        /// The field that is too large (`file_text`, `old_str`, `new_str` or `insert_text`).
        field: String,
        /// The field's length in bytes.
        bytes: u64,
        /// The file-size limit, in bytes.
        limit: u64,
    },
    /// An input handed over as an object (a Python dict) whose conversion to JSON text stopped
    /// once it passed the request-size limit; the digest covers the bytes made until then.
    Stopped {
        /// The limit, in bytes.
        limit: u64,
    },
    /// A call over 4 KiB that ran and failed against the tree (its path does not exist, its
    /// `old_str` is not in the file, ...). The digest stands for the `Tool` body it was logged
    /// in place of: `len` and `hash` are those of that body's canonical bytes (the hash a retry
    /// of it is compared by) and `prefix` is the start of the call as JSON.
    Failed {
        /// The command's name (`view`, `str_replace`, ...).
        command: String,
        /// The paths the call named, as sent (each as an error result echoes it: whole up to
        /// 4 KiB, else its start and length).
        paths: Vec<String>,
        /// The error the model was given (it echoes a bounded part of the input).
        text: String,
    },
}

/// An input logged as a digest instead of whole (see [`Refusal`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedDigest {
    /// The memory root the server ran under.
    pub root: String,
    /// The result-string profile the server ran under.
    pub profile: Profile,
    /// The input's length, hash and start.
    pub input: InputDigest,
    /// Why it was refused.
    pub refusal: Refusal,
}

/// The payload of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// A parsed memory-tool command.
    Tool(ToolCall),
    /// Input that could not be parsed; replay re-parses it and must get the same error.
    Rejected(RejectedCall),
    /// A change to the access policy.
    Admin(AdminCommand),
    /// A write of the memory-stores API (an operator's).
    Api(crate::tool::api::ApiWrite),
    /// Input logged as a digest (too large, not UTF-8, or rejected or failed and over 4 KiB);
    /// replay re-derives its answer from the digest's fields.
    RejectedDigest(RejectedDigest),
    /// An event whose payload (and salt) a redaction erased: what is left is the commitment the
    /// chain hashed. Replay skips it: it changes nothing, and its answer cannot be re-derived.
    Erased(Erased),
}

/// What is left of an erased event's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Erased {
    /// The format the event was written in before its payload was erased (its header's shape).
    pub format: u8,
    /// The payload hash the record stored (a salted commitment from format 4).
    pub payload_hash: EventHash,
}
