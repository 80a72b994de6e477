//! The calls the core answers, as the core sees them: a parsed call with the settings it ran
//! under, an input that did not parse, an admin command, or an input kept only as a digest with
//! the reason it was refused.
//!
//! These are the core's own types: the event format ([`crate::model::event`]) stores them through its
//! own serialisable mirror and an explicit encoder, so nothing here decides a stored byte.
//! `InputDigest` also derives serde for the JSON a client sends a server an oversized input as.

use serde::{Deserialize, Serialize};

use crate::model::hash::EventHash;
use crate::model::policy::AdminCommand;
use crate::model::tool::command::{Command, Profile};
use crate::model::tool::limits::Limits;

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
    Api(crate::model::tool::api::ApiWrite),
    /// Input logged as a digest (too large, not UTF-8, or rejected or failed and over 4 KiB);
    /// replay re-derives its answer from the digest's fields.
    RejectedDigest(RejectedDigest),
    /// An event whose payload (and salt) a redaction erased: what is left is the commitment the
    /// chain hashed, and perhaps what it did to the tree ([`Kept`]). Replay applies that, if it
    /// is kept, and nothing else: its answer cannot be re-derived.
    Erased(Erased),
}

/// What is left of an erased event's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Erased {
    /// The format the event was written in before its payload was erased (its header's shape).
    pub format: u8,
    /// The payload hash the record stored (a salted commitment from format 4).
    pub payload_hash: EventHash,
    /// What the event did to the tree, kept so that the versions after it still re-derive
    /// (format 11); `None` for an event erased with everything it did (format 5).
    pub kept: Option<Kept>,
}

/// What an erased write did to the tree, without its content ([`KeptChange`]), and whether it
/// was a write of the memory-stores API (a version's `created_by` says so). A redaction that
/// erases a version a memory has moved past keeps it; the redaction's own event commits to it
/// (by its digest, [`AdminCommand::Redact`]'s `kept`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// What it did.
    pub change: KeptChange,
    /// Whether the event was a write of the memory-stores API (else a memory-tool call).
    pub by_api: bool,
}

/// An erased write's change to the tree, without its content: where it wrote, and the SHA-256
/// and length of what it wrote, so that a later write's precondition and a directory's sizes
/// re-derive, and its memory keeps its identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptChange {
    /// A file created or its content replaced.
    Write {
        /// The file (canonical).
        path: String,
        /// SHA-256 of the content written.
        sha256: [u8; 32],
        /// Its length in bytes.
        bytes: u64,
    },
    /// A file moved and its content replaced in one step.
    Rewrite {
        /// Where it was.
        from: String,
        /// Where it went.
        to: String,
        /// SHA-256 of the content written.
        sha256: [u8; 32],
        /// Its length in bytes.
        bytes: u64,
    },
    /// A file or directory moved.
    Rename {
        /// Where it was.
        from: String,
        /// Where it went.
        to: String,
    },
    /// A file or directory removed.
    Delete {
        /// What was removed.
        path: String,
    },
}

impl Kept {
    /// What `change` did, without its content, made by an API write if `by_api`; `None` for a
    /// change of the policy or settings, which no redaction erases.
    pub(crate) fn of(change: &crate::model::tool::Change, by_api: bool) -> Option<Kept> {
        KeptChange::of(change).map(|change| Kept { change, by_api })
    }
}

impl KeptChange {
    /// What `change` did, without its content; `None` for a change of the policy or settings.
    pub(crate) fn of(change: &crate::model::tool::Change) -> Option<KeptChange> {
        use crate::model::tool::Change;
        let digest = |content: &str| {
            (
                crate::model::tool::api::content_sha256(content),
                content.len() as u64,
            )
        };
        Some(match change {
            Change::Write { path, content } => {
                let (sha256, bytes) = digest(content);
                KeptChange::Write {
                    path: path.to_string(),
                    sha256,
                    bytes,
                }
            }
            Change::Rewrite { from, to, content } => {
                let (sha256, bytes) = digest(content);
                KeptChange::Rewrite {
                    from: from.to_string(),
                    to: to.to_string(),
                    sha256,
                    bytes,
                }
            }
            Change::Rename { from, to } => KeptChange::Rename {
                from: from.to_string(),
                to: to.to_string(),
            },
            Change::Delete { path } => KeptChange::Delete {
                path: path.to_string(),
            },
            _ => return None,
        })
    }

    /// The SHA-256 and length of the content it wrote, if it wrote any.
    pub fn content(&self) -> Option<([u8; 32], u64)> {
        match self {
            KeptChange::Write { sha256, bytes, .. } | KeptChange::Rewrite { sha256, bytes, .. } => {
                Some((*sha256, *bytes))
            }
            KeptChange::Rename { .. } | KeptChange::Delete { .. } => None,
        }
    }

    /// The paths it names.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            KeptChange::Write { path, .. } | KeptChange::Delete { path } => vec![path],
            KeptChange::Rewrite { from, to, .. } | KeptChange::Rename { from, to } => {
                vec![from, to]
            }
        }
    }
}
