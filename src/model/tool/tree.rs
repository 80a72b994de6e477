//! The read-only view of the memory tree that the semantics core runs against, and the changes it
//! asks for.
//!
//! The projection implements [`Tree`] over each of its key-value stores (the sled index, the
//! writer's overlay of the changes not yet written to it, and the in-memory map a replay
//! builds), so one pure function answers live calls and re-answers them. A tree names its own
//! error type ([`Tree::Error`]): the core imports no storage and no storage error, and hands a
//! failed read back to its caller as the tree returned it.

use std::sync::Arc;

use crate::model::credential::TokenRecord;
use crate::model::hash::EventHash;
use crate::model::paths::MemPath;
use crate::model::policy::{Access, Policy, SETTINGS};
use crate::model::tool::Profile;

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A directory (implicit: it exists while a file lives under it).
    Dir,
    /// A file.
    File,
}

/// One child of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The child's name (one path segment).
    pub name: String,
    /// File or directory.
    pub kind: NodeKind,
    /// Content length in bytes for a file; 0 for a directory.
    pub size: u64,
}

/// What one walk from `/` down a path found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// What the path names, if anything.
    pub kind: Option<NodeKind>,
    /// When the walk met a file above the path: how many segments deep that file is (fewer than
    /// the path has). Nothing exists under a file, so the walk stops there.
    pub file_above: Option<usize>,
}

/// Read access to the tree.
pub trait Tree {
    /// What a read of the tree fails with: the storage's own error. The core never fails on its
    /// own (every bad input gets an answer), so what it returns is this, handed back untouched.
    type Error;

    /// Walks `path` from `/` once: what it names, and the file in the way if one is. The root is
    /// not special here: it exists only while a file lives under it (callers treat the configured
    /// root as always present).
    fn probe(&self, path: &MemPath) -> Result<Probe, Self::Error>;

    /// What `path` names, if anything.
    fn kind(&self, path: &MemPath) -> Result<Option<NodeKind>, Self::Error> {
        Ok(self.probe(path)?.kind)
    }

    /// A file's content, or `None` if `path` is not a file.
    fn read(&self, path: &MemPath) -> Result<Option<String>, Self::Error>;

    /// The seq of the event that created the file at `path` (its identity, which renames and
    /// edits keep), or `None` if `path` is not a file.
    fn created(&self, path: &MemPath) -> Result<Option<u64>, Self::Error>;

    /// The SHA-256 of a file's content, or `None` if `path` is not a file. In a replay, a file
    /// whose content a redaction erased answers with the digest its erased record kept.
    fn sha256(&self, path: &MemPath) -> Result<Option<[u8; 32]>, Self::Error> {
        Ok(self
            .read(path)?
            .map(|content| crate::model::tool::api::content_sha256(&content)))
    }

    /// In a replay, the seq of the erased event whose content the file at `path` holds in place
    /// of what a redaction erased; `None` for a file whose content is its own (always, in a store's
    /// live tree).
    fn redacted_by(&self, _path: &MemPath) -> Result<Option<u64>, Self::Error> {
        Ok(None)
    }

    /// A directory's children sorted by name (byte order, which is code-point order); empty if
    /// `path` is not a directory.
    fn list(&self, path: &MemPath) -> Result<Vec<Entry>, Self::Error>;

    /// The lines of a listing for the children of directory `path`, named `shown` in the text,
    /// when every entry is visible (the second level of a `view` of a directory): what
    /// [`Tree::list`] renders to. A tree may keep them while the directory is unchanged, so a
    /// listing of a large tree costs what changed since the last one.
    fn child_lines(
        &self,
        path: &MemPath,
        shown: &str,
        profile: Profile,
    ) -> Result<Arc<str>, Self::Error> {
        Ok(crate::model::tool::render::child_lines(&self.list(path)?, shown, profile).into())
    }

    /// The access policy in force.
    fn policy(&self) -> Result<Policy, Self::Error>;

    /// The agent token with id `id`, revoked or not.
    fn token(&self, id: &str) -> Result<Option<TokenRecord>, Self::Error>;

    /// The value of the store setting `name`, if an operator set it (else its default holds).
    fn setting(&self, name: &str) -> Result<Option<String>, Self::Error>;

    /// Every store setting ([`SETTINGS`]) with the value in force, the default where none was
    /// set, as `(name, value)`.
    fn settings(&self) -> Result<Vec<(String, String)>, Self::Error> {
        SETTINGS
            .iter()
            .map(|(name, values)| {
                let value = self.setting(name)?;
                Ok((
                    name.to_string(),
                    value.unwrap_or_else(|| values[0].to_string()),
                ))
            })
            .collect()
    }
}

/// A change to the tree, produced by a successful mutating command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Create a file or replace its content; missing parent directories come into being.
    Write {
        /// The file.
        path: MemPath,
        /// Its new content.
        content: String,
    },
    /// Remove a file, or a directory and everything under it.
    Delete {
        /// What to remove.
        path: MemPath,
    },
    /// Move a file or directory; `to` does not exist and is not inside `from`.
    Rename {
        /// Current path.
        from: MemPath,
        /// New path.
        to: MemPath,
    },
    /// Move the file `from` to `to` (as `Rename`) and replace its content there (as `Write`),
    /// in one step: an API update of a memory's path and content.
    Rewrite {
        /// Current path.
        from: MemPath,
        /// New path.
        to: MemPath,
        /// Its new content.
        content: String,
    },
    /// Set `agent`'s grant on `prefix`.
    Grant {
        /// An agent id or `*`.
        agent: String,
        /// The prefix.
        prefix: MemPath,
        /// What it allows.
        access: Access,
    },
    /// Remove `agent`'s grant on `prefix`.
    Revoke {
        /// An agent id or `*`.
        agent: String,
        /// The prefix.
        prefix: MemPath,
    },
    /// Add an agent token to the token table.
    IssueToken(Box<TokenIssue>),
    /// Mark agent token `id` revoked.
    RevokeToken {
        /// The token's id (issued, not revoked).
        id: String,
        /// The operator who revoked it.
        by: String,
    },
    /// Set the store setting `name` to `value`.
    Configure {
        /// The setting.
        name: String,
        /// Its value.
        value: String,
    },
}

/// A token to add to the token table (boxed in [`Change`], which it would otherwise bloat).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenIssue {
    /// The token's id (not yet taken).
    pub id: String,
    /// The agent it acts as.
    pub agent: String,
    /// The operator's note.
    pub label: String,
    /// `blake3` of the token's text.
    pub hash: EventHash,
    /// The operator who issued it.
    pub by: String,
}
