//! Ordered key-value maps the projection is written against.
//!
//! Three implementations share one projection code path: [`MemKv`] (the verifier's replay and
//! `ls --at`), a sled tree read directly (client reads), and [`Overlay`] (the writer's uncommitted
//! batch over the sled tree, committed in the batch's transaction).

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::Result;

/// Read side of an ordered map.
pub trait KvRead {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Up to `limit` entries whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Calls `visit` with each entry whose key starts with `prefix`, in key order, until it
    /// returns `false`; nothing is collected (the verifier walks the whole stored index).
    fn visit_prefix(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        for (key, value) in self.scan_prefix(prefix, usize::MAX)? {
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }

    /// The length of the value under `key`, without copying it (a listing needs file sizes, not
    /// contents).
    fn value_len(&self, key: &[u8]) -> Result<Option<usize>> {
        self.get_with(key, <[u8]>::len)
    }

    /// `read` applied to the value under `key`, borrowed where the map allows (a path walk
    /// decodes a 9-byte entry per segment and need not copy it).
    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        Ok(self.get(key)?.map(|v| read(&v)))
    }
}

/// Write side of an ordered map. Writes cannot fail: they are buffered or in memory.
pub trait KvWrite: KvRead {
    /// Sets `key` to `value`.
    fn insert(&mut self, key: Vec<u8>, value: Vec<u8>);

    /// Removes `key`.
    fn remove(&mut self, key: &[u8]);

    /// Sets `key` to a copy of `value`, reusing the buffers already stored where the map allows
    /// (the applied seq and the next node id change with every event).
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.insert(key.to_vec(), value.to_vec());
    }
}

fn overwrite(stored: &mut Vec<u8>, value: &[u8]) {
    stored.clear();
    stored.extend_from_slice(value);
}

/// An in-memory map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemKv {
    /// The entries.
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn prefix_range<'a, V>(
    map: &'a BTreeMap<Vec<u8>, V>,
    prefix: &'a [u8],
) -> impl Iterator<Item = (&'a Vec<u8>, &'a V)> + 'a {
    map.range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |(k, _)| k.starts_with(prefix))
}

impl KvRead for MemKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.get(key).cloned())
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        Ok(self.map.get(key).map(|v| read(v)))
    }

    fn visit_prefix(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        for (key, value) in prefix_range(&self.map, prefix) {
            if !visit(key, value) {
                break;
            }
        }
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(prefix_range(&self.map, prefix)
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl KvWrite for MemKv {
    fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.map.insert(key, value);
    }

    fn remove(&mut self, key: &[u8]) {
        self.map.remove(key);
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        match self.map.get_mut(key) {
            Some(stored) => overwrite(stored, value),
            None => self.insert(key.to_vec(), value.to_vec()),
        }
    }
}

impl KvRead for sled::Tree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(sled::Tree::get(self, key)?.map(|v| v.to_vec()))
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        Ok(sled::Tree::get(self, key)?.map(|v| read(&v)))
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        for item in sled::Tree::scan_prefix(self, prefix).take(limit) {
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn visit_prefix(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        for item in sled::Tree::scan_prefix(self, prefix) {
            let (k, v) = item?;
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }
}

/// Writes not yet committed: `Some(value)` sets a key, `None` removes it.
pub type Pending = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Uncommitted writes over a sled tree. Reads see the writes; nothing reaches sled until
/// its [`Overlay::into_writes`] are committed.
pub struct Overlay<'a> {
    base: &'a sled::Tree,
    pending: Pending,
}

impl<'a> Overlay<'a> {
    /// An empty overlay over `base`.
    pub fn new(base: &'a sled::Tree) -> Self {
        Overlay::resume(base, Pending::new())
    }

    /// An overlay over `base` that already holds `pending` writes.
    pub fn resume(base: &'a sled::Tree, pending: Pending) -> Self {
        Overlay { base, pending }
    }

    /// The writes, to resume later.
    pub fn into_pending(self) -> Pending {
        self.pending
    }

    /// The writes, in key order: `Some(value)` to set a key, `None` to remove it.
    pub fn into_writes(self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        self.pending.into_iter().collect()
    }
}

impl KvRead for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.pending.get(key) {
            Some(v) => Ok(v.clone()),
            None => KvRead::get(self.base, key),
        }
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        match self.pending.get(key) {
            Some(v) => Ok(v.as_deref().map(read)),
            None => KvRead::get_with(self.base, key, read),
        }
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut base = sled::Tree::scan_prefix(self.base, prefix).peekable();
        let mut over = prefix_range(&self.pending, prefix).peekable();
        while out.len() < limit {
            let base_key = match base.peek() {
                Some(Ok((k, _))) => Some(k.to_vec()),
                Some(Err(_)) => {
                    if let Some(Err(e)) = base.next() {
                        return Err(e.into());
                    }
                    continue;
                }
                None => None,
            };
            let over_key = over.peek().map(|(k, _)| (*k).clone());
            let take_over = match (&base_key, &over_key) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(b), Some(o)) => o <= b,
            };
            if take_over {
                let (k, v) = over
                    .next()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                if base_key.as_ref() == Some(&k) {
                    base.next();
                }
                if let Some(v) = v {
                    out.push((k, v));
                }
            } else if let Some(Ok((k, v))) = base.next() {
                out.push((k.to_vec(), v.to_vec()));
            }
        }
        Ok(out)
    }
}

impl KvWrite for Overlay<'_> {
    fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.pending.insert(key, Some(value));
    }

    fn remove(&mut self, key: &[u8]) {
        self.pending.insert(key.to_vec(), None);
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        match self.pending.get_mut(key) {
            Some(Some(stored)) => overwrite(stored, value),
            _ => self.insert(key.to_vec(), value.to_vec()),
        }
    }
}
