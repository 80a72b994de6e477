//! Ordered key-value maps the projection is written against.
//!
//! Three implementations share one projection code path: [`MemKv`] (the verifier's replay and
//! `ls --at`), the stored index read directly ([`IndexTrees`], client reads), and [`Overlay`]
//! (the writer's index changes not yet in sled, over the batch being written to it).
//!
//! The projection sees one ordered key space. Stored, it is two sled trees: keys starting with
//! [`CONTENT_PREFIX`] (file content) in one, every other key in the other, so that sled, which
//! rewrites a whole node of a tree when it consolidates the node's updates, never copies file
//! content because some other key changed ([`IndexTrees`]). [`MemKv`] and [`Overlay`]'s own
//! writes are one map, so a replay and the writer produce the same keys as the stored trees.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::disk::{ValueFile, names_values, resolve_chunk, stored_next, unreadable};

/// The first byte of every key of file content (the projection's chunk keys): the sled-backed
/// index keeps these keys in a tree of their own, so the nodes holding file content are
/// rewritten only when that content changes.
pub const CONTENT_PREFIX: u8 = b'b';

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

    #[cfg(any(test, feature = "testing"))]
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

    /// The next chunk's number the content chunk under `key` opens with (a chunk's value is
    /// that number, `u64` LE, then its bytes), without its bytes: a store whose value file holds
    /// them does not read them there. What removing a file needs, which shows none of it.
    fn chunk_next(&self, key: &[u8]) -> Result<Option<u64>> {
        self.get_with(key, plain_next)?.transpose()
    }
}

/// The next chunk's number a chunk's value (as the index holds it, not a stored reference)
/// opens with.
fn plain_next(value: &[u8]) -> Result<u64> {
    value
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(short_chunk)
}

fn short_chunk() -> Error {
    Error::corrupt("path index content chunk is too short to hold its next chunk's number")
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

/// A [`MemKv`] whose writes since [`Savepoint::begin`] can be undone: a replay that tries an
/// event and keeps its change only if its answer is the recorded one (a redaction's plan).
#[derive(Clone, Debug, Default)]
pub struct UndoKv {
    map: MemKv,
    /// Each write since the savepoint, with the value it replaced (`None`: there was none).
    undo: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl UndoKv {
    /// Opens a savepoint: [`UndoKv::rollback`] undoes every write from here on.
    pub fn begin(&mut self) {
        self.undo.clear();
    }

    /// Undoes every write since [`UndoKv::begin`].
    pub fn rollback(&mut self) {
        for (key, old) in self.undo.drain(..).rev() {
            match old {
                Some(old) => self.map.map.insert(key, old),
                None => self.map.map.remove(&key),
            };
        }
    }

    fn keep(&mut self, key: &[u8]) {
        let old = self.map.map.get(key).cloned();
        self.undo.push((key.to_vec(), old));
    }
}

impl KvRead for UndoKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.map.get(key)
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        self.map.get_with(key, read)
    }

    fn visit_prefix(&self, prefix: &[u8], visit: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        self.map.visit_prefix(prefix, visit)
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.map.scan_prefix(prefix, limit)
    }
}

impl KvWrite for UndoKv {
    fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.keep(&key);
        self.map.insert(key, value);
    }

    fn remove(&mut self, key: &[u8]) {
        self.keep(key);
        self.map.remove(key);
    }
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
        collect_items(sled::Tree::scan_prefix(self, prefix), limit)
    }

    fn visit_prefix(&self, prefix: &[u8], visit: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        visit_items(sled::Tree::scan_prefix(self, prefix), visit)
    }
}

/// The stored index: one ordered key space over two sled trees, `index` (every key but file
/// content) and `content` (the keys starting with [`CONTENT_PREFIX`]). Reads go to the tree a key
/// belongs in; a scan of every key (the empty prefix) merges both trees in key order, whatever
/// each holds, so a key stored in the wrong tree shows up there.
///
/// A content chunk whose bytes the store's value file holds may be stored as a reference to
/// them (`store::disk`'s `shared_content`): every read here turns it back into the chunk's value.
#[derive(Clone, Debug)]
pub struct IndexTrees {
    index: sled::Tree,
    content: sled::Tree,
    /// The value file content chunks may name (none: a chunk stored as a reference is an error).
    values: Option<Arc<ValueFile>>,
}

impl IndexTrees {
    /// The index over `index` and `content`.
    pub fn new(index: sled::Tree, content: sled::Tree) -> IndexTrees {
        IndexTrees {
            index,
            content,
            values: None,
        }
    }

    /// The index, its content chunks read through the store's value file `values`.
    pub(crate) fn with_values(mut self, values: Arc<ValueFile>) -> IndexTrees {
        self.values = Some(values);
        self
    }

    /// The value the index holds under `key`, from what the tree stores there: a content chunk
    /// stored as a reference read back whole.
    fn resolved(&self, key: &[u8], stored: sled::IVec) -> Result<sled::IVec> {
        if !IndexTrees::is_content(key) || !names_values(&stored) {
            return Ok(stored);
        }
        match &self.values {
            Some(values) => resolve_chunk(key, &stored, values).map(sled::IVec::from),
            None => Err(Error::corrupt(
                "an index content chunk names the value file, and this index has none",
            )),
        }
    }

    fn resolved_item(&self, item: Item) -> Result<(sled::IVec, sled::IVec)> {
        let (key, value) = item?;
        let value = self.resolved(&key, value)?;
        Ok((key, value))
    }

    /// The tree of every key but file content.
    pub fn index(&self) -> &sled::Tree {
        &self.index
    }

    /// The tree of file content (keys starting with [`CONTENT_PREFIX`]).
    pub fn content(&self) -> &sled::Tree {
        &self.content
    }

    /// Whether `key` belongs in the content tree.
    pub fn is_content(key: &[u8]) -> bool {
        key.first() == Some(&CONTENT_PREFIX)
    }

    /// The tree `key` belongs in.
    pub fn tree_for(&self, key: &[u8]) -> &sled::Tree {
        if IndexTrees::is_content(key) {
            &self.content
        } else {
            &self.index
        }
    }

    /// The entries whose key starts with `prefix`, in key order.
    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(sled::IVec, sled::IVec)>>> {
        let trees = self.clone();
        let items: Box<dyn Iterator<Item = Item>> = if prefix.is_empty() {
            Box::new(Merged(
                self.index.iter().peekable(),
                self.content.iter().peekable(),
            ))
        } else {
            Box::new(self.tree_for(prefix).scan_prefix(prefix))
        };
        Box::new(items.map(move |item| trees.resolved_item(item)))
    }
}

type Item = sled::Result<(sled::IVec, sled::IVec)>;

/// The first way an in-memory map differs from the stored index ([`IndexTrees::first_difference`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// Both hold `key`, with different values.
    Value {
        /// The key.
        key: Vec<u8>,
    },
    /// Where the stored tree `tree` holds `stored`, the map's next key is `ours`.
    Key {
        /// `index` or `content`.
        tree: &'static str,
        /// The map's key.
        ours: Vec<u8>,
        /// The stored key.
        stored: Vec<u8>,
    },
    /// The stored tree `tree` holds `key`, past the map's last key of that tree.
    Extra {
        /// `index` or `content`.
        tree: &'static str,
        /// The stored key.
        key: Vec<u8>,
    },
    /// The map holds `key`, past the stored tree's last key.
    Missing {
        /// The map's key.
        key: Vec<u8>,
    },
}

impl IndexTrees {
    /// The first difference between `ours` and the stored trees, tree by tree: `ours`'s content
    /// keys against the content tree, its other keys against the index tree, so that a key stored
    /// in the wrong tree (where reads would not find it) shows too. The two trees are compared
    /// side by side, on two threads; the index tree's difference is the one named when both
    /// differ. Keys of the index tree whose first byte is in `skip` are left out on both sides
    /// (a caller checked them another way) and counted: the count is returned beside.
    pub fn first_difference(&self, ours: &MemKv, skip: &[u8]) -> Result<(Option<Difference>, u64)> {
        let skipped = |k: &[u8]| k.first().is_some_and(|b| skip.contains(b));
        let content = ours
            .map
            .iter()
            .filter(|(k, _)| IndexTrees::is_content(k.as_slice()));
        let rest = ours
            .map
            .iter()
            .filter(|(k, _)| !IndexTrees::is_content(k.as_slice()) && !skipped(k));
        let mut count = 0u64;
        // A chunk stored as a reference whose bytes cannot be read back differs from any value
        // (an empty one: every chunk value holds its next number).
        let stored_content = self.content.iter().map(|item| {
            let (key, stored) = item?;
            match self.resolved(&key, stored) {
                Err(e) if unreadable(&e) => Ok((key, sled::IVec::default())),
                other => Ok((key, other?)),
            }
        });
        let (index, content) = std::thread::scope(|scope| {
            let content = scope.spawn(|| first_difference(content, stored_content, "content"));
            let stored = self
                .index
                .iter()
                .map(|item| item.map_err(Error::from))
                .filter(|item| match item {
                    Ok((key, _)) if skipped(key) => {
                        count += 1;
                        false
                    }
                    _ => true,
                });
            let index = first_difference(rest, stored, "index");
            (index, content.join())
        });
        let content = content.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match index? {
            Some(found) => Ok((Some(found), count)),
            None => Ok((content?, count)),
        }
    }
}

/// The first difference between the entries `ours` and the entries `stored` of the sled tree
/// named `tree`.
fn first_difference<'a>(
    mut ours: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>,
    stored: impl Iterator<Item = Result<(sled::IVec, sled::IVec)>>,
    tree: &'static str,
) -> Result<Option<Difference>> {
    for item in stored {
        let (key, value) = item?;
        let found = match ours.next() {
            Some((k, v)) if k.as_slice() == &*key && v.as_slice() == &*value => continue,
            Some((k, _)) if k.as_slice() == &*key => Difference::Value { key: key.to_vec() },
            Some((k, _)) => Difference::Key {
                tree,
                ours: k.clone(),
                stored: key.to_vec(),
            },
            None => Difference::Extra {
                tree,
                key: key.to_vec(),
            },
        };
        return Ok(Some(found));
    }
    Ok(ours
        .next()
        .map(|(k, _)| Difference::Missing { key: k.clone() }))
}

/// The first `limit` entries of a sled scan, copied out.
fn collect_items<E>(
    items: impl Iterator<Item = std::result::Result<(sled::IVec, sled::IVec), E>>,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>>
where
    Error: From<E>,
{
    let mut out = Vec::new();
    for item in items.take(limit) {
        let (k, v) = item?;
        out.push((k.to_vec(), v.to_vec()));
    }
    Ok(out)
}

/// Hands the entries of a sled scan to `visit` in order until it returns false.
fn visit_items<E>(
    items: impl Iterator<Item = std::result::Result<(sled::IVec, sled::IVec), E>>,
    mut visit: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()>
where
    Error: From<E>,
{
    for item in items {
        let (k, v) = item?;
        if !visit(&k, &v) {
            break;
        }
    }
    Ok(())
}

/// Two scans merged in key order (an error is passed on as soon as it is met).
struct Merged(Peekable<sled::Iter>, Peekable<sled::Iter>);

impl Iterator for Merged {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        let take_first = match (self.0.peek(), self.1.peek()) {
            (None, _) => false,
            (_, None) | (Some(Err(_)), _) => true,
            (_, Some(Err(_))) => false,
            (Some(Ok((a, _))), Some(Ok((b, _)))) => a <= b,
        };
        if take_first {
            self.0.next()
        } else {
            self.1.next()
        }
    }
}

impl KvRead for IndexTrees {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, <[u8]>::to_vec)
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        match sled::Tree::get(self.tree_for(key), key)? {
            Some(stored) => Ok(Some(read(&self.resolved(key, stored)?))),
            None => Ok(None),
        }
    }

    fn chunk_next(&self, key: &[u8]) -> Result<Option<u64>> {
        match sled::Tree::get(self.tree_for(key), key)? {
            Some(stored) if IndexTrees::is_content(key) => {
                stored_next(&stored).map(Some).ok_or_else(short_chunk)
            }
            Some(stored) => plain_next(&stored).map(Some),
            None => Ok(None),
        }
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        collect_items(self.scan(prefix), limit)
    }

    fn visit_prefix(&self, prefix: &[u8], visit: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        visit_items(self.scan(prefix), visit)
    }
}

/// Writes not yet committed, in key order: `Some(value)` sets a key, `None` removes it. Keeps a
/// count of the bytes it holds, so a writer can bound how much it keeps in memory.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    map: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    bytes: usize,
    /// While a savepoint is open: each write since, with the entry it replaced, oldest first.
    undo: Option<Vec<Undo>>,
}

/// A key written under a savepoint, and the write it replaced (`None`: the key held none).
type Undo = (Vec<u8>, Option<Option<Vec<u8>>>);

fn entry_bytes(key: &[u8], value: Option<&Vec<u8>>) -> usize {
    key.len() + value.map_or(0, Vec::len)
}

impl Pending {
    /// Whether no write is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many keys are written.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The bytes of keys and values held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn put(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.bytes += entry_bytes(&key, value.as_ref());
        let key_len = key.len();
        let undo_key = self.undo.is_some().then(|| key.clone());
        let old = self.map.insert(key, value);
        if let Some(old) = &old {
            self.bytes -= key_len + old.as_ref().map_or(0, Vec::len);
        }
        if let (Some(undo), Some(key)) = (self.undo.as_mut(), undo_key) {
            undo.push((key, old));
        }
    }

    /// Opens a savepoint: [`rollback`](Self::rollback) undoes every write from here on, and
    /// [`release`](Self::release) keeps them. The replaced entries are moved, not copied.
    pub fn savepoint(&mut self) {
        self.undo = Some(Vec::new());
    }

    /// Undoes every write since [`savepoint`](Self::savepoint) and closes it.
    pub fn rollback(&mut self) {
        let Some(undo) = self.undo.take() else {
            return;
        };
        for (key, old) in undo.into_iter().rev() {
            let now = match old {
                Some(old) => {
                    self.bytes += entry_bytes(&key, old.as_ref());
                    self.map.insert(key.clone(), old)
                }
                None => self.map.remove(&key),
            };
            if let Some(now) = now {
                self.bytes -= entry_bytes(&key, now.as_ref());
            }
        }
    }

    /// Keeps every write since [`savepoint`](Self::savepoint) and closes it.
    pub fn release(&mut self) {
        self.undo = None;
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        match self.map.get_mut(key) {
            // In place only when no savepoint needs the old value.
            Some(Some(stored)) if self.undo.is_none() => {
                self.bytes = self.bytes - stored.len() + value.len();
                overwrite(stored, value);
            }
            _ => self.put(key.to_vec(), Some(value.to_vec())),
        }
    }

    /// The writes, in key order: `Some(value)` to set a key, `None` to remove it.
    pub fn writes(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.map.iter().map(|(k, v)| (k.as_slice(), v.as_deref()))
    }

    /// The write of `key`, if there is one: `Some(None)` for a removal.
    fn lookup(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.map.get(key).map(Option::as_deref)
    }
}

/// Uncommitted writes over the stored index. Reads see the writes; nothing reaches sled until
/// its [`Overlay::into_pending`] writes are committed.
///
/// An overlay may also sit on a batch of older writes that are being committed (`under`): reads
/// see the overlay's own writes first, then that batch, then the tree, so they do not depend on
/// whether the batch has reached the tree yet.
pub struct Overlay<'a> {
    base: &'a IndexTrees,
    under: Option<&'a Pending>,
    pending: Pending,
}

impl<'a> Overlay<'a> {
    /// An empty overlay over `base`.
    pub fn new(base: &'a IndexTrees) -> Self {
        Overlay::resume(base, None, Pending::default())
    }

    /// An overlay over `base`, and over `under` if given, that already holds `pending` writes.
    pub fn resume(base: &'a IndexTrees, under: Option<&'a Pending>, pending: Pending) -> Self {
        Overlay {
            base,
            under,
            pending,
        }
    }

    /// The write `pending` or `under` holds for `key`, if either does.
    fn lookup(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.pending
            .lookup(key)
            .or_else(|| self.under.and_then(|u| u.lookup(key)))
    }

    /// The writes `pending` and `under` hold for keys starting with `prefix`, in key order, the
    /// overlay's own winning over `under`'s.
    fn writes_under<'s>(&'s self, prefix: &'s [u8]) -> Vec<(&'s [u8], Option<&'s [u8]>)> {
        let mut top = prefix_range(&self.pending.map, prefix).peekable();
        let Some(under) = self.under else {
            return top.map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
        };
        let mut low = prefix_range(&under.map, prefix).peekable();
        let mut out = Vec::new();
        loop {
            let next = match (top.peek(), low.peek()) {
                (None, None) => break,
                (Some(_), None) => top.next(),
                (None, Some(_)) => low.next(),
                (Some((a, _)), Some((b, _))) => match a.cmp(b) {
                    std::cmp::Ordering::Less => top.next(),
                    std::cmp::Ordering::Greater => low.next(),
                    std::cmp::Ordering::Equal => {
                        low.next();
                        top.next()
                    }
                },
            };
            if let Some((k, v)) = next {
                out.push((k.as_slice(), v.as_deref()));
            }
        }
        out
    }

    /// The writes, to resume or commit later.
    pub fn into_pending(self) -> Pending {
        self.pending
    }
}

impl KvRead for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.lookup(key) {
            Some(v) => Ok(v.map(<[u8]>::to_vec)),
            None => KvRead::get(self.base, key),
        }
    }

    fn get_with<T>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        match self.lookup(key) {
            Some(v) => Ok(v.map(read)),
            None => KvRead::get_with(self.base, key, read),
        }
    }

    fn chunk_next(&self, key: &[u8]) -> Result<Option<u64>> {
        match self.lookup(key) {
            Some(v) => v.map(plain_next).transpose(),
            None => KvRead::chunk_next(self.base, key),
        }
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut base = self.base.scan(prefix).peekable();
        let mut over = self.writes_under(prefix).into_iter().peekable();
        while out.len() < limit {
            let base_key = match base.peek() {
                Some(Ok((k, _))) => Some(k.to_vec()),
                Some(Err(_)) => {
                    if let Some(Err(e)) = base.next() {
                        return Err(e);
                    }
                    continue;
                }
                None => None,
            };
            let over_key = over.peek().map(|(k, _)| *k);
            let take_over = match (&base_key, over_key) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(b), Some(o)) => o <= b.as_slice(),
            };
            if take_over {
                let Some((k, v)) = over.next() else { break };
                if base_key.as_deref() == Some(k) {
                    base.next();
                }
                if let Some(v) = v {
                    out.push((k.to_vec(), v.to_vec()));
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
        self.pending.put(key, Some(value));
    }

    fn remove(&mut self, key: &[u8]) {
        self.pending.put(key.to_vec(), None);
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.pending.set(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A write to one of the three layers: the tree (0), the batch under the overlay (1), the
    /// overlay (2, or 3 to overwrite in place with `set`).
    #[derive(Clone, Debug)]
    struct Write {
        layer: u8,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    }

    /// Key bytes, with the content prefix among them so that keys go to both trees.
    fn key_byte() -> impl Strategy<Value = u8> {
        proptest::sample::select(vec![0u8, 1, 2, CONTENT_PREFIX])
    }

    fn write() -> impl Strategy<Value = Write> {
        (
            0u8..4,
            proptest::collection::vec(key_byte(), 1..4),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
        )
            .prop_map(|(layer, key, value)| Write { layer, key, value })
    }

    proptest! {
        /// A rollback restores exactly the writes and the byte count held at the savepoint; a
        /// release keeps everything written since.
        #[test]
        fn a_rollback_restores_the_savepoint(
            before in proptest::collection::vec(write(), 0..20),
            after in proptest::collection::vec(write(), 0..20),
            keep in any::<bool>(),
        ) {
            let apply = |p: &mut Pending, writes: &[Write]| {
                for w in writes {
                    match (&w.value, w.layer % 2) {
                        (Some(v), 0) => p.set(&w.key, v),
                        (v, _) => p.put(w.key.clone(), v.clone()),
                    }
                }
            };
            let mut pending = Pending::default();
            apply(&mut pending, &before);
            let saved = pending.map.clone();
            let mut expected = pending.clone();
            pending.savepoint();
            apply(&mut pending, &after);
            if keep {
                pending.release();
                apply(&mut expected, &after);
            } else {
                pending.rollback();
            }
            prop_assert_eq!(&pending.map, &expected.map);
            prop_assert_eq!(pending.bytes(), expected.bytes());
            prop_assert!(pending.undo.is_none());
            if !keep {
                prop_assert_eq!(&pending.map, &saved);
            }
        }
    }

    proptest! {
        /// Reads through an overlay on a batch on a tree equal reads of one map the three were
        /// applied to in order: tree first, then the batch, then the overlay.
        #[test]
        fn an_overlay_on_a_batch_reads_like_the_layers_applied_in_order(
            writes in proptest::collection::vec(write(), 0..40),
            prefix in proptest::collection::vec(key_byte(), 0..3),
        ) {
            let db = sled::Config::new().temporary(true).open().expect("temporary sled");
            let base = IndexTrees::new(
                db.open_tree("index").expect("tree"),
                db.open_tree("content").expect("tree"),
            );
            let (mut under, mut over) = (Pending::default(), Pending::default());
            let mut layers: [BTreeMap<Vec<u8>, Option<Vec<u8>>>; 3] = Default::default();
            for w in &writes {
                match w.layer {
                    0 => match &w.value {
                        Some(v) => {
                            base.tree_for(&w.key).insert(&w.key, v.as_slice()).expect("insert");
                        }
                        None => {
                            base.tree_for(&w.key).remove(&w.key).expect("remove");
                        }
                    },
                    1 => under.put(w.key.clone(), w.value.clone()),
                    2 => over.put(w.key.clone(), w.value.clone()),
                    _ => match &w.value {
                        Some(v) => over.set(&w.key, v),
                        None => over.put(w.key.clone(), None),
                    },
                }
                layers[usize::from(w.layer.min(2))].insert(w.key.clone(), w.value.clone());
            }
            let mut model = BTreeMap::new();
            for layer in &layers {
                for (k, v) in layer {
                    match v {
                        Some(v) => model.insert(k.clone(), v.clone()),
                        None => model.remove(k),
                    };
                }
            }
            let overlay = Overlay::resume(&base, Some(&under), over);
            for key in layers.iter().flat_map(|l| l.keys()) {
                prop_assert_eq!(KvRead::get(&overlay, key).expect("get"), model.get(key).cloned());
            }
            let scanned = overlay.scan_prefix(&prefix, usize::MAX).expect("scan");
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            prop_assert_eq!(scanned, expected);
            let bytes: usize = overlay.pending.writes().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len)).sum();
            prop_assert_eq!(overlay.pending.bytes(), bytes);
        }
    }
}
