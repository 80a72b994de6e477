//! Applying a change: the one way the tree, the policy, tokens and settings in the index change,
//! each change collecting trash and recording its seq.

use super::Projection;
use super::RENAMES_UNSTAMPED;
use super::admin::{encode_access, grant_key, setting_key, token_key};
use super::content::{self, Chunking, FileHead};
use super::journal::Stamp;
use super::keys::{child_key, decode_child, encode_child, encode_moved, file_key};
use crate::error::{Error, Result};
use crate::model::credential::{Revocation, TokenRecord};
use crate::model::event::Seq;
use crate::model::tool::{Change, Kept, KeptChange, NodeKind, Tree};
use crate::store::kv::KvWrite;

/// What a replay holds in place of erased content of `bytes` bytes: `[redacted]` repeated and cut
/// to that length, so a directory's listing (which shows sizes) re-derives.
fn placeholder(bytes: u64) -> Result<String> {
    let len = usize::try_from(bytes)
        .ok()
        .filter(|len| *len <= u32::MAX as usize)
        .ok_or_else(|| {
            Error::corrupt(format!(
                "an erased record keeps a content of {bytes} bytes, more than any event writes"
            ))
        })?;
    Ok("[redacted]".chars().cycle().take(len).collect())
}

impl<K: KvWrite> Projection<K> {
    /// Applies what the erased event at `seq` kept of its change (see [`Kept`]): a move or delete
    /// as it was, and content as a placeholder of the same length (`[redacted]` repeated) whose
    /// SHA-256 the tree answers as the kept one ([`Tree::sha256`]), so a later write's precondition
    /// re-derives while a read of the content does not. Returns the change applied. `stamp` is
    /// what the version journal records of the event.
    pub fn apply_kept(&mut self, kept: &Kept, seq: Seq, stamp: Stamp<'_>) -> Result<Change> {
        let path = |raw: &str| {
            crate::model::paths::MemPath::absolute(raw).map_err(|why| {
                Error::corrupt(format!("an erased record keeps the path {raw:?}: {why}"))
            })
        };
        let change = match &kept.change {
            KeptChange::Write { path: p, bytes, .. } => Change::Write {
                path: path(p)?,
                content: placeholder(*bytes)?,
            },
            KeptChange::Rewrite {
                from, to, bytes, ..
            } => Change::Rewrite {
                from: path(from)?,
                to: path(to)?,
                content: placeholder(*bytes)?,
            },
            KeptChange::Rename { from, to } => Change::Rename {
                from: path(from)?,
                to: path(to)?,
            },
            KeptChange::Delete { path: p } => Change::Delete { path: path(p)? },
        };
        let before = self.journal_before(&change)?;
        self.apply(&change, seq)?;
        if let (Some((sha256, _)), Change::Write { path, .. } | Change::Rewrite { to: path, .. }) =
            (kept.change.content(), &change)
        {
            if let Some(created) = self.created(path)? {
                self.placeholders.insert(created, (sha256, seq.0));
            }
        }
        self.journal(&change, before, seq, stamp)?;
        Ok(change)
    }

    /// Applies a change made by the event at `seq`.
    pub fn apply(&mut self, change: &Change, seq: Seq) -> Result<()> {
        match change {
            // A move, then a write at the new path: each collects trash and records `seq`.
            Change::Rewrite { from, to, content } => {
                self.apply(
                    &Change::Rename {
                        from: from.clone(),
                        to: to.clone(),
                    },
                    seq,
                )?;
                return self.apply(
                    &Change::Write {
                        path: to.clone(),
                        content: content.clone(),
                    },
                    seq,
                );
            }
            Change::Write { path, content } => {
                let Some(parent) = path.parent() else {
                    return Err(Error::corrupt("a write named the directory /"));
                };
                let parent_id = self.ensure_dir(&parent)?;
                let key = child_key(parent_id, path.name());
                let (id, old) = match self.kv.get_with(&key, decode_child)? {
                    Some(child) => {
                        let (_, id) = child?;
                        (id, Some(self.file_head(id)?))
                    }
                    None => {
                        let id = self.new_id()?;
                        self.kv.insert(key, encode_child(NodeKind::File, id));
                        (id, None)
                    }
                };
                // A new entry or a new size changes the directory's lines; an edit that keeps
                // the file's length leaves them as they were (a line shows name, kind and size).
                if old
                    .as_ref()
                    .is_none_or(|old| old.len != content.len() as u64)
                {
                    self.forget_listing(parent_id);
                }
                let head = content::write(
                    &mut self.kv,
                    id,
                    old.as_ref(),
                    content.as_bytes(),
                    Chunking::LAYOUT,
                )?;
                // Content of its own replaces a redaction's placeholder (see `apply_kept`).
                if let Some(old) = &old {
                    if !self.placeholders.is_empty() {
                        self.placeholders.remove(&old.created);
                    }
                }
                let head = FileHead {
                    created: old.map_or(seq.0, |o| o.created),
                    updated: seq.0,
                    ..head
                };
                self.kv.insert(file_key(id), head.encode());
            }
            Change::Delete { path } => {
                let chain = self.chain(path)?.ok_or_else(|| {
                    Error::corrupt(format!("a delete named {path}, which is not in the index"))
                })?;
                let (kind, id) = chain[chain.len() - 1];
                // The entry goes, and perhaps parents it leaves empty.
                for &(_, dir) in &chain {
                    self.forget_listing(dir);
                }
                self.unlink(path, &chain)?;
                self.forget(kind, id)?;
            }
            Change::Rename { from, to } => {
                let chain = self.chain(from)?.ok_or_else(|| {
                    Error::corrupt(format!("a rename named {from}, which is not in the index"))
                })?;
                let (kind, id) = chain[chain.len() - 1];
                let Some(to_parent) = to.parent() else {
                    return Err(Error::corrupt("a rename targeted the directory /"));
                };
                let parent_id = self.ensure_dir(&to_parent)?;
                let from_parent = chain[chain.len() - 2].1;
                if from_parent == parent_id && from.name() != to.name() {
                    // Within one directory: one entry's name changes, and the directory keeps
                    // an entry, so none above it is pruned.
                    self.renamed_in_listing(parent_id, from.name(), to.name());
                } else {
                    for &(_, dir) in &chain {
                        self.forget_listing(dir);
                    }
                    self.forget_listing(parent_id);
                }
                let entry = if self.layout > RENAMES_UNSTAMPED {
                    encode_moved(kind, id, seq)
                } else {
                    encode_child(kind, id)
                };
                self.kv.insert(child_key(parent_id, to.name()), entry);
                // The chain is still valid: the new entry cannot lie on the old path's chain
                // because `to` is neither `from` nor inside it.
                self.unlink(from, &chain)?;
            }
            Change::Grant {
                agent,
                prefix,
                access,
            } => {
                self.explicit_policy()?;
                self.kv
                    .insert(grant_key(agent, prefix), encode_access(*access));
            }
            Change::Revoke { agent, prefix } => {
                self.explicit_policy()?;
                self.kv.remove(&grant_key(agent, prefix));
            }
            Change::IssueToken(issue) => {
                let record = TokenRecord {
                    id: issue.id.clone(),
                    agent: issue.agent.clone(),
                    label: issue.label.clone(),
                    hash: issue.hash,
                    issued: seq,
                    issued_by: issue.by.clone(),
                    revoked: None,
                };
                self.kv
                    .insert(token_key(&issue.id), crate::model::codec::encode(&record));
            }
            Change::RevokeToken { id, by } => {
                let mut record = self.token(id)?.ok_or_else(|| {
                    Error::corrupt(format!(
                        "a revoke named token {id}, which is not in the index"
                    ))
                })?;
                record.revoked = Some(Revocation {
                    seq,
                    by: by.clone(),
                });
                self.kv
                    .insert(token_key(id), crate::model::codec::encode(&record));
            }
            Change::Configure { name, value } => {
                self.kv.insert(setting_key(name), value.as_bytes().to_vec());
            }
        }
        self.collect_trash()?;
        self.set_applied(seq);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::temporary_trees;
    use super::*;
    use crate::model::paths::MemPath;
    use crate::store::kv::Overlay;

    /// An edit of a large file holds only the chunks it rewrites in the writer's pending changes,
    /// which is what the writer's bound on held bytes counts.
    #[test]
    fn an_edit_of_a_large_file_holds_a_bounded_chunk_in_the_pending_changes() {
        let (_db, trees) = temporary_trees();
        let path = MemPath::absolute("/memories/big.txt").expect("path");
        let mut text = "a line of a large memory file\n".repeat(15_000_000 / 30);
        let mut projection = Projection::new(Overlay::new(&trees));
        let write = |content: &str| Change::Write {
            path: path.clone(),
            content: content.to_string(),
        };
        projection.apply(&write(&text), Seq(1)).expect("create");
        let created = projection.into_inner().into_pending();
        assert!(created.bytes() >= text.len(), "a create holds its content");
        for (key, value) in created.writes() {
            let tree = trees.tree_for(key);
            match value {
                Some(v) => tree.insert(key, v).map(drop),
                None => tree.remove(key).map(drop),
            }
            .expect("write the index");
        }
        assert!(
            trees
                .index()
                .iter()
                .all(|item| { item.expect("index entry").1.len() <= 64 }),
            "the index tree holds only small values"
        );
        text.insert_str(text.len() / 2, "new\n");
        let mut projection = Projection::new(Overlay::new(&trees));
        projection.apply(&write(&text), Seq(2)).expect("insert");
        assert_eq!(projection.read(&path).expect("read"), Some(text.clone()));
        let pending = projection.into_inner().into_pending();
        assert!(
            pending.bytes() <= 3 * content::CHUNK_MAX,
            "an insert into a 15 MB file holds {} bytes of index changes",
            pending.bytes()
        );
    }
}
