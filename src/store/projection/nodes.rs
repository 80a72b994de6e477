//! The tree of nodes: walking a path from `/` to the ids of its nodes, listing a directory's
//! children, and the writes that keep directories implicit (making missing parents, pruning
//! emptied ones).

use super::Projection;
use super::keys::{
    NEXT_ID_KEY, ROOT_ID, be_u64, child_key, child_prefix, decode_child, encode_child,
    set_child_key,
};
use crate::error::{Error, Result};
use crate::model::paths::MemPath;
use crate::model::tool::NodeKind;
use crate::store::kv::{KvRead, KvWrite};

impl<K: KvRead> Projection<K> {
    /// Walks `path` from `/`, calling `visit` with each node met (the root first), and stops at
    /// a missing segment or at a file with segments left. Returns how many segments it resolved.
    pub(super) fn walk(
        &self,
        path: &MemPath,
        mut visit: impl FnMut(NodeKind, u64),
    ) -> Result<usize> {
        let (mut kind, mut id) = (NodeKind::Dir, ROOT_ID);
        visit(kind, id);
        let mut key = Vec::with_capacity(64);
        let mut depth = 0;
        for seg in path.segments() {
            if kind != NodeKind::Dir {
                return Ok(depth);
            }
            set_child_key(&mut key, id, seg);
            match self.kv.get_with(&key, decode_child)? {
                Some(child) => (kind, id) = child?,
                None => return Ok(depth),
            }
            visit(kind, id);
            depth += 1;
        }
        Ok(depth)
    }

    /// The node ids from `/` down to `path`, or `None` if `path` does not exist.
    pub(super) fn chain(&self, path: &MemPath) -> Result<Option<Vec<(NodeKind, u64)>>> {
        let mut chain = Vec::with_capacity(path.depth() + 1);
        let depth = self.walk(path, |kind, id| chain.push((kind, id)))?;
        Ok((depth == path.depth()).then_some(chain))
    }

    pub(super) fn lookup(&self, path: &MemPath) -> Result<Option<(NodeKind, u64)>> {
        let mut last = (NodeKind::Dir, ROOT_ID);
        let depth = self.walk(path, |kind, id| last = (kind, id))?;
        Ok((depth == path.depth()).then_some(last))
    }

    pub(super) fn children(&self, id: u64) -> Result<Vec<(String, NodeKind, u64)>> {
        let mut out = Vec::new();
        for (k, v) in self.kv.scan_prefix(&child_prefix(id), usize::MAX)? {
            let name = String::from_utf8(k[9..].to_vec())
                .map_err(|_| Error::corrupt("path index name is not UTF-8"))?;
            let (kind, child) = decode_child(&v)?;
            out.push((name, kind, child));
        }
        Ok(out)
    }
}

impl<K: KvWrite> Projection<K> {
    pub(super) fn new_id(&mut self) -> Result<u64> {
        let next = match self.kv.get_with(NEXT_ID_KEY, |v| be_u64(v, "next id"))? {
            Some(next) => next?,
            None => ROOT_ID + 1,
        };
        self.kv.set(NEXT_ID_KEY, &(next + 1).to_be_bytes());
        Ok(next)
    }

    /// The id of directory `path`, creating it and its missing parents.
    pub(super) fn ensure_dir(&mut self, path: &MemPath) -> Result<u64> {
        let mut id = ROOT_ID;
        for seg in path.segments() {
            let key = child_key(id, seg);
            id = match self.kv.get_with(&key, decode_child)? {
                Some(child) => match child? {
                    (NodeKind::Dir, child) => child,
                    (NodeKind::File, _) => {
                        // The semantics core refuses such a change with an error result; reaching
                        // this means a check is missing, not that the store is damaged. Nothing
                        // has been written yet: the walk meets the file before it creates any
                        // directory.
                        return Err(Error::InvalidArgument(format!(
                            "a change needs directory {path}, but a file is in the way (at depth {}); the change was not applied. This is a gap in Mnemo's checks, not damage to the store: please report it",
                            path.depth()
                        )));
                    }
                },
                None => {
                    let child = self.new_id()?;
                    self.kv.insert(key, encode_child(NodeKind::Dir, child));
                    self.forget_listing(id);
                    child
                }
            };
        }
        Ok(id)
    }

    /// Removes the entry for `path` (whose chain is `chain`) and prunes parents left empty.
    pub(super) fn unlink(&mut self, path: &MemPath, chain: &[(NodeKind, u64)]) -> Result<()> {
        let segs: Vec<&str> = path.segments().collect();
        let mut depth = segs.len();
        while depth > 0 {
            let parent = chain[depth - 1].1;
            self.kv.remove(&child_key(parent, segs[depth - 1]));
            if parent == ROOT_ID || !self.kv.scan_prefix(&child_prefix(parent), 1)?.is_empty() {
                break;
            }
            depth -= 1;
        }
        Ok(())
    }
}
