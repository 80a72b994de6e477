//! Collecting deleted directories: a delete puts a directory in the trash (`g`), and each event
//! that changes the tree then removes up to [`COLLECT_BUDGET`] entries of it, lowest directory id
//! first, so a delete costs the same whatever lies under the directory (see the
//! [projection](super) docs).

use super::Projection;
use super::content;
use super::keys::{be_u64, child_prefix, decode_child, file_key};
use crate::error::Result;
use crate::model::tool::NodeKind;
use crate::store::kv::{KvRead, KvWrite};

/// The most index entries (about) one event's trash collection removes. Part of the layout: the
/// stored index must match a replay byte for byte, so changing it means a new [`INDEX_LAYOUT`](super::INDEX_LAYOUT).
pub const COLLECT_BUDGET: usize = 64;

/// The prefix of the trash: deleted directories still to collect.
pub(super) const TRASH_PREFIX: &[u8] = b"g";

/// The `g` key of directory `id` in the trash.
fn trash_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.extend_from_slice(TRASH_PREFIX);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

impl<K: KvRead> Projection<K> {
    #[cfg(any(test, feature = "testing"))]
    /// How many deleted directories still wait in the trash to be collected.
    pub fn trash_len(&self) -> Result<usize> {
        Ok(self.kv.scan_prefix(TRASH_PREFIX, usize::MAX)?.len())
    }
}

impl<K: KvWrite> Projection<K> {
    /// Removes node `id` from the index: a file at once, a directory by putting it in the trash.
    /// Returns how many entries that removed or wrote.
    pub(super) fn forget(&mut self, kind: NodeKind, id: u64) -> Result<usize> {
        match kind {
            NodeKind::File => {
                let head = self.file_head(id)?;
                let chunks = content::remove(&mut self.kv, id, &head)?;
                self.kv.remove(&file_key(id));
                self.forget_digest(head.created);
                Ok(1 + chunks)
            }
            NodeKind::Dir => {
                self.kv.insert(trash_key(id), Vec::new());
                Ok(1)
            }
        }
    }

    /// Collects up to about [`COLLECT_BUDGET`] entries of the trash, lowest directory id first.
    pub(super) fn collect_trash(&mut self) -> Result<()> {
        let mut budget = COLLECT_BUDGET;
        while budget > 0 {
            let mut first = None;
            self.kv.visit_prefix(TRASH_PREFIX, |key, _| {
                first = Some(key.to_vec());
                false
            })?;
            let Some(key) = first else {
                break;
            };
            let dir = be_u64(&key[TRASH_PREFIX.len()..], "trash id")?;
            self.forget_listing(dir);
            let children = self.kv.scan_prefix(&child_prefix(dir), budget)?;
            if children.is_empty() {
                self.kv.remove(&key);
                budget -= 1;
                continue;
            }
            for (child_key, value) in children {
                let (kind, child) = decode_child(&value)?;
                self.kv.remove(&child_key);
                let removed = 1 + self.forget(kind, child)?;
                budget = budget.saturating_sub(removed);
                if budget == 0 {
                    break;
                }
            }
        }
        Ok(())
    }
}
