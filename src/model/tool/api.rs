//! Writes of the memory-stores API: create a memory, change its content or path, delete it, each
//! under the condition the caller set (the memory is still the one it named, its content still
//! has the digest it expects). Pure, like the six commands: the writer and the verifier's replay
//! call [`answer_api`] on the tree as it is when the event runs, so a condition is checked in the
//! same step that writes, and a replay re-derives both.
//!
//! An answer's text is the API's: on success what was done, on failure the error type of the
//! memory-stores API, `: `, and why (see [`ApiFailure`]), which the server answers with.

use sha2::{Digest, Sha256};

use crate::model::credential::OPERATOR;
use crate::model::hash::EventHash;
use crate::model::paths::MemPath;
use crate::model::policy::Access;
use crate::model::semantics_version::Semantics;
use crate::model::tool::semantics::Answer;
use crate::model::tool::tree::{Change, NodeKind, Tree};

/// One write of the memory-stores API. Paths are the memory tool's (`/memories/a.md`); `memory`
/// is the memory's identity, the seq of the event that created its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiWrite {
    /// A new memory at `path` holding `content`.
    Create {
        /// Where.
        path: String,
        /// Its content.
        content: String,
    },
    /// New content, a new path, or both, for the memory `memory` at `path`.
    Update {
        /// The memory's identity.
        memory: u64,
        /// Its path when the call was made.
        path: String,
        /// Its new content, if it changes.
        content: Option<String>,
        /// Its new path, if it moves.
        new_path: Option<String>,
        /// The SHA-256 its content must have for the update to apply.
        expect: Option<[u8; 32]>,
    },
    /// Deletes the memory `memory` at `path`.
    Delete {
        /// The memory's identity.
        memory: u64,
        /// Its path when the call was made.
        path: String,
        /// The SHA-256 its content must have for the delete to apply.
        expect: Option<[u8; 32]>,
    },
}

impl ApiWrite {
    /// The operation's name, as `mnemo log` shows it.
    pub fn name(&self) -> &'static str {
        match self {
            ApiWrite::Create { .. } => "api.create",
            ApiWrite::Update { .. } => "api.update",
            ApiWrite::Delete { .. } => "api.delete",
        }
    }

    /// The paths it names.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            ApiWrite::Create { path, .. } | ApiWrite::Delete { path, .. } => vec![path],
            ApiWrite::Update { path, new_path, .. } => std::iter::once(path.as_str())
                .chain(new_path.as_deref())
                .collect(),
        }
    }

    /// The texts it carries (content), for a redaction's search.
    pub fn texts(&self) -> Vec<&str> {
        match self {
            ApiWrite::Create { content, .. } => vec![content],
            ApiWrite::Update { content, .. } => content.iter().map(String::as_str).collect(),
            ApiWrite::Delete { .. } => Vec::new(),
        }
    }
}

/// Why an API write failed: the error type of the memory-stores API its answer starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiFailure {
    /// The path is not one (`invalid_request_error`).
    Invalid,
    /// The memory is not there (`not_found_error`): deleted, or moved since it was looked up.
    NotFound,
    /// The content's digest is not the one expected (`memory_precondition_failed_error`).
    Precondition,
    /// Another memory (or a directory of memories) holds the path (`memory_path_conflict_error`).
    PathConflict,
    /// The agent holds no read-write grant covering a path the write names (`permission_error`).
    Permission,
}

impl ApiFailure {
    /// The API's name for it.
    pub fn error_type(self) -> &'static str {
        match self {
            ApiFailure::Invalid => "invalid_request_error",
            ApiFailure::NotFound => "not_found_error",
            ApiFailure::Precondition => "memory_precondition_failed_error",
            ApiFailure::PathConflict => "memory_path_conflict_error",
            ApiFailure::Permission => "permission_error",
        }
    }

    fn answer(self, why: String) -> Answer {
        Answer {
            text: format!("{}: {why}", self.error_type()),
            is_error: true,
            change: None,
            failure: Some(self),
            provenance: None,
        }
    }
}

/// The SHA-256 of `content`'s UTF-8 bytes.
pub fn content_sha256(content: &str) -> [u8; 32] {
    Sha256::digest(content.as_bytes()).into()
}

/// Lower-case hex of a digest (64 characters), as event hashes are written.
pub fn hex(digest: &[u8; 32]) -> String {
    EventHash(*digest).to_hex()
}

fn path_of(raw: &str, semantics: Semantics) -> Result<MemPath, Answer> {
    MemPath::absolute_under(raw, semantics)
        .map_err(|why| ApiFailure::Invalid.answer(why))
        .and_then(|path| {
            path.parent()
                .is_some()
                .then_some(path)
                .ok_or_else(|| ApiFailure::Invalid.answer("a memory cannot be at /".into()))
        })
}

/// Whether a new memory may go at `path`: nothing there, and no file above it. A file above it
/// that `hidden` says the answer must not name is not named.
fn free<E>(
    tree: &dyn Tree<Error = E>,
    path: &MemPath,
    hidden: &dyn Fn(&MemPath) -> bool,
) -> Result<Option<Answer>, E> {
    let probe = tree.probe(path)?;
    Ok(match (probe.kind, probe.file_above) {
        (None, None) => None,
        (Some(NodeKind::File), _) => Some(ApiFailure::PathConflict.answer(format!(
            "another memory is at {path}; update that one, or choose another path"
        ))),
        (Some(NodeKind::Dir), _) => Some(ApiFailure::PathConflict.answer(format!(
            "{path} holds other memories under it; choose another path"
        ))),
        (None, Some(depth)) if hidden(&path.ancestor(depth)) => {
            Some(ApiFailure::PathConflict.answer(format!(
                "a memory this agent may not read is in the way of {path}: a path cannot go through a memory; choose another path"
            )))
        }
        (None, Some(depth)) => {
            let above: Vec<&str> = path.segments().take(depth).collect();
            Some(ApiFailure::PathConflict.answer(format!(
                "the memory /{} is in the way: a path cannot go through a memory",
                above.join("/")
            )))
        }
    })
}

/// Answers `agent`'s API write against `tree` under `semantics`. The operator's writes (agent
/// [`OPERATOR`], a name no agent token takes) are the store owner's, as its admin events are;
/// any other agent's are held to its grants, as its memory-tool calls are: read-write access to
/// every path the write names. The only error is the tree's own.
pub fn answer_api<E>(
    tree: &dyn Tree<Error = E>,
    agent: &str,
    write: &ApiWrite,
    semantics: Semantics,
) -> Result<Answer, E> {
    let policy = match agent == OPERATOR {
        true => None,
        false => Some(tree.policy()?),
    };
    // Under semantics 5 no answer names a memory the agent may not read.
    let hidden = |file: &MemPath| {
        semantics.names_only_readable_files()
            && policy
                .as_ref()
                .is_some_and(|policy| !policy.allows(agent, file, Access::Read))
    };
    if let Some(policy) = &policy {
        for raw in write.paths() {
            let Ok(path) = MemPath::absolute_under(raw, semantics) else {
                continue;
            };
            if !policy.allows(agent, &path, Access::ReadWrite) {
                return Ok(ApiFailure::Permission.answer(format!(
                    "agent {agent} holds no read-write grant covering {path}; ask the operator for one (`mnemo acl grant`)"
                )));
            }
        }
    }
    let ok = Answer::ok;
    // An archived memory store's memories are read and deleted, never created or changed.
    if !matches!(write, ApiWrite::Delete { .. })
        && tree
            .setting(crate::model::policy::LABEL_SETTING)?
            .and_then(|label| crate::model::policy::archived_ms(&label))
            .is_some()
    {
        return Ok(ApiFailure::Invalid.answer(
            "the memory store was archived: its memories can be read and deleted, not created or changed".into(),
        ));
    }
    match write {
        ApiWrite::Create { path, content } => {
            let path = match path_of(path, semantics) {
                Ok(path) => path,
                Err(answer) => return Ok(answer),
            };
            if let Some(refused) = free(tree, &path, &hidden)? {
                return Ok(refused);
            }
            Ok(ok(
                format!("Created the memory {path}"),
                Some(Change::Write {
                    path,
                    content: content.clone(),
                }),
            ))
        }
        ApiWrite::Update {
            memory,
            path,
            content,
            new_path,
            expect,
        } => {
            let path = match path_of(path, semantics) {
                Ok(path) => path,
                Err(answer) => return Ok(answer),
            };
            let current = match held(tree, &path, *memory, expect.as_ref())? {
                Ok(current) => current,
                Err(answer) => return Ok(answer),
            };
            let to = match new_path
                .as_deref()
                .map(|p| path_of(p, semantics))
                .transpose()
            {
                Ok(to) => to.filter(|to| *to != path),
                Err(answer) => return Ok(answer),
            };
            if let Some(to) = &to {
                if let Some(refused) = free(tree, to, &hidden)? {
                    return Ok(refused);
                }
            }
            let content = content.clone().filter(|c| content_sha256(c) != current);
            Ok(match (to, content) {
                (None, None) => ok(format!("The memory {path} is unchanged"), None),
                (None, Some(content)) => ok(
                    format!("Updated the memory {path}"),
                    Some(Change::Write { path, content }),
                ),
                (Some(to), None) => ok(
                    format!("Moved the memory {path} to {to}"),
                    Some(Change::Rename { from: path, to }),
                ),
                (Some(to), Some(content)) => ok(
                    format!("Moved the memory {path} to {to} and updated it"),
                    Some(Change::Rewrite {
                        from: path,
                        to,
                        content,
                    }),
                ),
            })
        }
        ApiWrite::Delete {
            memory,
            path,
            expect,
        } => {
            let path = match path_of(path, semantics) {
                Ok(path) => path,
                Err(answer) => return Ok(answer),
            };
            if let Err(answer) = held(tree, &path, *memory, expect.as_ref())? {
                return Ok(answer);
            }
            Ok(ok(
                format!("Deleted the memory {path}"),
                Some(Change::Delete { path }),
            ))
        }
    }
}

/// The SHA-256 of the content of the memory `memory` at `path`, if it is there and its content
/// has the digest `expect` asks for; else the failure. (The digest, not the content: in a replay,
/// content a redaction erased answers with the digest its record kept.)
fn held<E>(
    tree: &dyn Tree<Error = E>,
    path: &MemPath,
    memory: u64,
    expect: Option<&[u8; 32]>,
) -> Result<Result<[u8; 32], Answer>, E> {
    if tree.created(path)? != Some(memory) {
        return Ok(Err(ApiFailure::NotFound.answer(format!(
            "the memory mem_{memory} is no longer at {path}: it was deleted or moved"
        ))));
    }
    let Some(actual) = tree.sha256(path)? else {
        return Ok(Err(ApiFailure::NotFound.answer(format!(
            "the memory mem_{memory} is no longer at {path}"
        ))));
    };
    if let Some(expect) = expect {
        if actual != *expect {
            return Ok(Err(ApiFailure::Precondition.answer(format!(
                "the memory's content_sha256 is {}, not {}; read it again and retry with the current digest",
                hex(&actual),
                hex(expect)
            ))));
        }
    }
    Ok(Ok(actual))
}
