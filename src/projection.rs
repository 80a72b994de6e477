//! The path index: an inode-style projection of the log that answers the commands.
//!
//! Every directory and file is a node with a never-reused id; directory `/` is node 0. The index is
//! an ordered key-value map:
//!
//! | key | value |
//! |---|---|
//! | `c` ‖ parent id (u64 BE) ‖ name | kind (`d` or `f`) ‖ child id (u64 BE) |
//! | `f` ‖ file id (u64 BE) | created seq ‖ updated seq ‖ length in bytes ‖ first chunk ‖ next unused chunk number (five u64 LE) |
//! | `b` ‖ file id (u64 BE) ‖ chunk number (u64 BE) | next chunk's number (u64 LE) ‖ 1 to 16 KiB of the file's bytes |
//! | `n` | next node id (u64 BE) |
//! | `a` | the last seq applied (u64 BE) |
//! | `t` ‖ agent ‖ 0 ‖ tool_use id | seq (u64 BE) ‖ is_error (1 byte) ‖ the result text |
//! | `P` | present once the policy is explicit (after the first admin event) |
//! | `p` ‖ agent ‖ 0 ‖ prefix | access (`r` or `w`) |
//! | `g` ‖ directory id (u64 BE) | empty: a deleted directory whose nodes are still to be collected |
//! | `L` | the index layout ([`INDEX_LAYOUT`], 1 byte), written with event 1 |
//!
//! **File content** is in chunks ([`content`]): a file's bytes are the bytes of its chunks, from
//! the `f` record's first chunk on, each chunk naming the next, `u64::MAX` ending the list (an
//! empty file has no chunk and `u64::MAX` as its first). A chunk holds at most 16 KiB
//! ([`content::CHUNK_MAX`]), and at least 4 KiB when its file has more than one. Chunk numbers are
//! per file and never reused, and a chunk keeps its number when its bytes change, so an edit
//! rewrites only the chunks overlapping the bytes it changed (and perhaps a neighbour it merges
//! with), never the whole file; how the changed range is re-split is in [`content`]. The
//! sled-backed index keeps the `b` keys in a tree of their own (`content`, the rest in `index`),
//! so sled never rewrites content for changes to other keys: `a` changes with every event, reads
//! included, and a large value in the same tree would be copied each time sled rewrote its node.
//!
//! A lookup walks one `c` key per path segment; a listing scans one `c` prefix; a rename moves a
//! single `c` entry, so its cost does not depend on how many files lie under the directory.
//!
//! A delete is as cheap: deleting a file removes its `c` and `f` entries; deleting a directory
//! removes its `c` entry and puts the directory in the trash (`g`). Each event that changes the
//! tree then collects up to [`COLLECT_BUDGET`] entries of the trash, lowest directory id first:
//! files under a trashed directory lose their `c`, `f` and `b` entries (a file counts as two entries
//! plus one per chunk), subdirectories move to the
//! trash, and an emptied directory leaves it. Trashed nodes are unreachable from `/`, and ids are
//! never reused, so nothing in the trash is ever seen. Collection is part of applying an event, so
//! the writer and the verifier's replay collect exactly the same entries at the same events.
//!
//! **Invariant:** directories are implicit — a directory node exists exactly while some file lives
//! under it. Writes create missing parents; deletes and renames prune parents left empty.
//!
//! **Invariant:** a tool_use id is recorded at most once per agent: a retry of a recorded id is
//! answered from its `t` entry with the original text and adds no event.
//!
//! **Invariant:** the index is a pure function of the log: replaying every event into an empty
//! [`MemKv`](crate::kv::MemKv) yields byte-for-byte the stored index (checked by `verify`).

use crate::error::{Error, Result};
use crate::event::{Body, Event, Seq};
use crate::kv::{KvRead, KvWrite};
use crate::paths::MemPath;
use crate::policy::{Access, Grant, Policy};
use crate::tool::Answer;
use crate::tool::{Change, Entry, NodeKind, Probe, Tree};

pub mod content;

pub use content::CONTENT_PREFIX;
use content::{Chunking, FileHead};

const ROOT_ID: u64 = 0;
const NEXT_ID_KEY: &[u8] = b"n";
const APPLIED_KEY: &[u8] = b"a";
const LAYOUT_KEY: &[u8] = b"L";
const TRASH_PREFIX: &[u8] = b"g";

/// The layout of the index this build writes: 3 keeps file content in chunks (`b` keys); 2 kept
/// it whole under `f` and collects deleted directories lazily (the trash); 1, with no layout key,
/// removed them at once. An index of an older layout is rebuilt from the log when a client opens
/// the store.
pub const INDEX_LAYOUT: u8 = 3;

/// The most index entries (about) one event's trash collection removes. Part of the layout: the
/// stored index must match a replay byte for byte, so changing it means a new [`INDEX_LAYOUT`].
pub const COLLECT_BUDGET: usize = 64;

/// The tag every memory file carries.
pub const MEMORY_TAG: &str = "memorytool";

/// A memory file as the client lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRecord {
    /// Canonical path, such as `/memories/notes.txt`.
    pub path: String,
    /// The file's content.
    pub content: String,
    /// `memorytool` and `path:{path}`.
    pub tags: Vec<String>,
    /// Seq of the event that created the file.
    pub created: Seq,
    /// Seq of the event that last changed its content.
    pub updated: Seq,
}

impl MemoryRecord {
    fn new(path: &MemPath, file: FileRecord) -> MemoryRecord {
        let path = path.to_string();
        MemoryRecord {
            tags: vec![MEMORY_TAG.to_string(), format!("path:{path}")],
            path,
            content: file.content,
            created: Seq(file.created),
            updated: Seq(file.updated),
        }
    }
}

struct FileRecord {
    created: u64,
    updated: u64,
    content: String,
}

fn child_prefix(parent: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'c');
    k.extend_from_slice(&parent.to_be_bytes());
    k
}

fn child_key(parent: u64, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + name.len());
    set_child_key(&mut k, parent, name);
    k
}

/// Overwrites `key` with the child key of `name` under `parent` (a path walk reuses one buffer).
fn set_child_key(key: &mut Vec<u8>, parent: u64, name: &str) {
    key.clear();
    key.push(b'c');
    key.extend_from_slice(&parent.to_be_bytes());
    key.extend_from_slice(name.as_bytes());
}

const POLICY_KEY: &[u8] = b"P";

fn grant_key(agent: &str, prefix: &MemPath) -> Vec<u8> {
    let prefix = prefix.to_string();
    let mut k = Vec::with_capacity(2 + agent.len() + prefix.len());
    k.push(b'p');
    k.extend_from_slice(agent.as_bytes());
    k.push(0);
    k.extend_from_slice(prefix.as_bytes());
    k
}

fn decode_grant(key: &[u8], value: &[u8]) -> Result<Grant> {
    let bad = || Error::corrupt("path index grant entry is malformed");
    let body = key.get(1..).ok_or_else(bad)?;
    let split = body.iter().position(|b| *b == 0).ok_or_else(bad)?;
    let agent = String::from_utf8(body[..split].to_vec()).map_err(|_| bad())?;
    let prefix = std::str::from_utf8(&body[split + 1..]).map_err(|_| bad())?;
    let access = match value {
        b"r" => Access::Read,
        b"w" => Access::ReadWrite,
        _ => return Err(bad()),
    };
    Ok(Grant {
        agent,
        prefix: MemPath::absolute(prefix).map_err(|_| bad())?,
        access,
    })
}

fn encode_access(access: Access) -> Vec<u8> {
    match access {
        Access::Read => b"r".to_vec(),
        Access::ReadWrite => b"w".to_vec(),
    }
}

fn retry_key(agent: &str, tool_use_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + agent.len() + tool_use_id.len());
    k.push(b't');
    k.extend_from_slice(agent.as_bytes());
    k.push(0);
    k.extend_from_slice(tool_use_id.as_bytes());
    k
}

/// The answer recorded for a tool_use id: its seq, whether it was an error, and the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The seq of the original call.
    pub seq: Seq,
    /// Whether the original result was an error.
    pub is_error: bool,
    /// The original result text.
    pub text: String,
}

fn file_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'f');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn trash_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.extend_from_slice(TRASH_PREFIX);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn be_u64(bytes: &[u8], what: &str) -> Result<u64> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::corrupt(format!("path index {what} is not 8 bytes")))?;
    Ok(u64::from_be_bytes(arr))
}

fn decode_child(value: &[u8]) -> Result<(NodeKind, u64)> {
    let kind = match value.first() {
        Some(b'd') => NodeKind::Dir,
        Some(b'f') => NodeKind::File,
        _ => return Err(Error::corrupt("path index entry has an unknown kind")),
    };
    Ok((kind, be_u64(&value[1..], "child id")?))
}

fn encode_child(kind: NodeKind, id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(9);
    v.push(match kind {
        NodeKind::Dir => b'd',
        NodeKind::File => b'f',
    });
    v.extend_from_slice(&id.to_be_bytes());
    v
}

fn no_content(id: u64) -> Error {
    Error::corrupt(format!(
        "path index names file node {id} but holds no content for it"
    ))
}

/// The path index over a key-value map `K`.
pub struct Projection<K> {
    kv: K,
}

impl<K> Projection<K> {
    /// Wraps a map holding an index (an empty map is the empty index).
    pub fn new(kv: K) -> Self {
        Projection { kv }
    }

    /// The underlying map.
    pub fn into_inner(self) -> K {
        self.kv
    }

    /// The underlying map.
    pub fn kv(&self) -> &K {
        &self.kv
    }
}

impl<K: KvRead> Projection<K> {
    /// The last seq applied to the index (0 for an empty index).
    pub fn applied(&self) -> Result<Seq> {
        match self.kv.get(APPLIED_KEY)? {
            Some(v) => Ok(Seq(be_u64(&v, "applied seq")?)),
            None => Ok(Seq(0)),
        }
    }

    /// The layout this index was built with: [`INDEX_LAYOUT`] for an empty index or one this
    /// build wrote, 1 for one written before the layout was recorded.
    pub fn layout(&self) -> Result<u8> {
        match self.kv.get(LAYOUT_KEY)? {
            Some(v) => v
                .first()
                .copied()
                .ok_or_else(|| Error::corrupt("path index layout is empty")),
            None if self.kv.get(APPLIED_KEY)?.is_some() => Ok(1),
            None => Ok(INDEX_LAYOUT),
        }
    }

    /// How many deleted directories still wait in the trash to be collected.
    pub fn trash_len(&self) -> Result<usize> {
        Ok(self.kv.scan_prefix(TRASH_PREFIX, usize::MAX)?.len())
    }

    /// The answer recorded for `agent`'s call with `tool_use_id`, if there was one.
    pub fn recorded(&self, agent: &str, tool_use_id: &str) -> Result<Option<Recorded>> {
        let Some(v) = self.kv.get(&retry_key(agent, tool_use_id))? else {
            return Ok(None);
        };
        if v.len() < 9 {
            return Err(Error::corrupt("path index retry entry is truncated"));
        }
        Ok(Some(Recorded {
            seq: Seq(be_u64(&v[..8], "retry seq")?),
            is_error: v[8] != 0,
            text: String::from_utf8(v[9..].to_vec())
                .map_err(|_| Error::corrupt("path index retry text is not UTF-8"))?,
        }))
    }

    /// Walks `path` from `/`, calling `visit` with each node met (the root first), and stops at
    /// a missing segment or at a file with segments left. Returns how many segments it resolved.
    fn walk(&self, path: &MemPath, mut visit: impl FnMut(NodeKind, u64)) -> Result<usize> {
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
    fn chain(&self, path: &MemPath) -> Result<Option<Vec<(NodeKind, u64)>>> {
        let mut chain = Vec::with_capacity(path.depth() + 1);
        let depth = self.walk(path, |kind, id| chain.push((kind, id)))?;
        Ok((depth == path.depth()).then_some(chain))
    }

    fn lookup(&self, path: &MemPath) -> Result<Option<(NodeKind, u64)>> {
        let mut last = (NodeKind::Dir, ROOT_ID);
        let depth = self.walk(path, |kind, id| last = (kind, id))?;
        Ok((depth == path.depth()).then_some(last))
    }

    /// The `f` record of file node `id`.
    fn file_head(&self, id: u64) -> Result<FileHead> {
        self.kv
            .get_with(&file_key(id), FileHead::decode)?
            .unwrap_or_else(|| Err(no_content(id)))
    }

    fn file(&self, id: u64) -> Result<FileRecord> {
        let head = self.file_head(id)?;
        let bytes = content::read(&self.kv, id, &head)?;
        Ok(FileRecord {
            created: head.created,
            updated: head.updated,
            content: String::from_utf8(bytes)
                .map_err(|_| Error::corrupt("path index file content is not UTF-8"))?,
        })
    }

    fn children(&self, id: u64) -> Result<Vec<(String, NodeKind, u64)>> {
        let mut out = Vec::new();
        for (k, v) in self.kv.scan_prefix(&child_prefix(id), usize::MAX)? {
            let name = String::from_utf8(k[9..].to_vec())
                .map_err(|_| Error::corrupt("path index name is not UTF-8"))?;
            let (kind, child) = decode_child(&v)?;
            out.push((name, kind, child));
        }
        Ok(out)
    }

    /// The file at `path` as a record.
    pub fn record(&self, path: &MemPath) -> Result<Option<MemoryRecord>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(MemoryRecord::new(path, self.file(id)?))),
            _ => Ok(None),
        }
    }

    /// Every file at or under `dir`, in path order.
    pub fn records_under(&self, dir: &MemPath) -> Result<Vec<MemoryRecord>> {
        let mut out = Vec::new();
        match self.lookup(dir)? {
            Some((NodeKind::File, id)) => out.push(MemoryRecord::new(dir, self.file(id)?)),
            Some((NodeKind::Dir, id)) => self.collect(dir, id, &mut out)?,
            None => {}
        }
        Ok(out)
    }

    /// Every file under directory `id` (at `dir`), in path order. Iterative: paths may nest
    /// thousands of levels deep, more than a thread's stack would take in recursion.
    fn collect(&self, dir: &MemPath, id: u64, out: &mut Vec<MemoryRecord>) -> Result<()> {
        let mut stack = vec![(dir.clone(), NodeKind::Dir, id)];
        while let Some((path, kind, id)) = stack.pop() {
            match kind {
                NodeKind::File => out.push(MemoryRecord::new(&path, self.file(id)?)),
                NodeKind::Dir => {
                    let children = self.children(id)?;
                    stack.extend(
                        children
                            .into_iter()
                            .rev()
                            .map(|(name, kind, child)| (path.join(&name), kind, child)),
                    );
                }
            }
        }
        Ok(())
    }
}

impl<K: KvRead> Tree for Projection<K> {
    fn probe(&self, path: &MemPath) -> Result<Probe> {
        let mut last = NodeKind::Dir;
        let depth = self.walk(path, |kind, _| last = kind)?;
        Ok(if depth == path.depth() {
            Probe {
                kind: Some(last),
                file_above: None,
            }
        } else {
            Probe {
                kind: None,
                file_above: (last == NodeKind::File).then_some(depth),
            }
        })
    }

    fn read(&self, path: &MemPath) -> Result<Option<String>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(self.file(id)?.content)),
            _ => Ok(None),
        }
    }

    fn list(&self, path: &MemPath) -> Result<Vec<Entry>> {
        let Some((NodeKind::Dir, id)) = self.lookup(path)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (name, kind, child) in self.children(id)? {
            let size = match kind {
                NodeKind::Dir => 0,
                NodeKind::File => self.file_head(child)?.len,
            };
            out.push(Entry { name, kind, size });
        }
        Ok(out)
    }

    fn policy(&self) -> Result<Policy> {
        if self.kv.get(POLICY_KEY)?.is_none() {
            return Ok(Policy::open());
        }
        let mut grants = Vec::new();
        for (k, v) in self.kv.scan_prefix(b"p", usize::MAX)? {
            grants.push(decode_grant(&k, &v)?);
        }
        Ok(Policy::new(grants))
    }
}

impl<K: KvWrite> Projection<K> {
    /// Records that every event up to `seq` is applied.
    pub fn set_applied(&mut self, seq: Seq) {
        if seq == Seq(1) {
            self.kv.set(LAYOUT_KEY, &[INDEX_LAYOUT]);
        }
        self.kv.set(APPLIED_KEY, &seq.0.to_be_bytes());
    }

    fn new_id(&mut self) -> Result<u64> {
        let next = match self.kv.get_with(NEXT_ID_KEY, |v| be_u64(v, "next id"))? {
            Some(next) => next?,
            None => ROOT_ID + 1,
        };
        self.kv.set(NEXT_ID_KEY, &(next + 1).to_be_bytes());
        Ok(next)
    }

    /// The id of directory `path`, creating it and its missing parents.
    fn ensure_dir(&mut self, path: &MemPath) -> Result<u64> {
        let mut id = ROOT_ID;
        for seg in path.segments() {
            let key = child_key(id, seg);
            id = match self.kv.get_with(&key, decode_child)? {
                Some(child) => match child? {
                    (NodeKind::Dir, child) => child,
                    (NodeKind::File, _) => {
                        return Err(Error::corrupt(format!(
                            "a change asked for directory {path} but a file is in the way"
                        )));
                    }
                },
                None => {
                    let child = self.new_id()?;
                    self.kv.insert(key, encode_child(NodeKind::Dir, child));
                    child
                }
            };
        }
        Ok(id)
    }

    /// Removes the entry for `path` (whose chain is `chain`) and prunes parents left empty.
    fn unlink(&mut self, path: &MemPath, chain: &[(NodeKind, u64)]) -> Result<()> {
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

    /// Removes node `id` from the index: a file at once, a directory by putting it in the trash.
    /// Returns how many entries that removed or wrote.
    fn forget(&mut self, kind: NodeKind, id: u64) -> Result<usize> {
        match kind {
            NodeKind::File => {
                let head = self.file_head(id)?;
                let chunks = content::remove(&mut self.kv, id, &head)?;
                self.kv.remove(&file_key(id));
                Ok(1 + chunks)
            }
            NodeKind::Dir => {
                self.kv.insert(trash_key(id), Vec::new());
                Ok(1)
            }
        }
    }

    /// Collects up to about [`COLLECT_BUDGET`] entries of the trash, lowest directory id first.
    fn collect_trash(&mut self) -> Result<()> {
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

    /// Makes the implicit open policy explicit before the first admin change.
    fn explicit_policy(&mut self) -> Result<()> {
        if self.kv.get(POLICY_KEY)?.is_none() {
            for grant in Policy::open().grants() {
                self.kv.insert(
                    grant_key(&grant.agent, &grant.prefix),
                    encode_access(grant.access),
                );
            }
            self.kv.insert(POLICY_KEY.to_vec(), Vec::new());
        }
        Ok(())
    }

    /// Applies a change made by the event at `seq`.
    pub fn apply(&mut self, change: &Change, seq: Seq) -> Result<()> {
        match change {
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
                let head = content::write(
                    &mut self.kv,
                    id,
                    old.as_ref(),
                    content.as_bytes(),
                    Chunking::LAYOUT,
                )?;
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
                self.kv
                    .insert(child_key(parent_id, to.name()), encode_child(kind, id));
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
        }
        self.collect_trash()?;
        self.set_applied(seq);
        Ok(())
    }
}

impl<K: KvWrite> Projection<K> {
    /// Answers `agent`'s call against the index, applies its change as event `seq`, and records
    /// the answer under the call's tool_use id so a retry gets the same text. This is the one
    /// step shared by the writer, recovery on open and the verifier's replay.
    pub fn run_call(
        &mut self,
        agent: &str,
        tool_use_id: Option<&str>,
        body: &Body,
        seq: Seq,
    ) -> Result<Answer> {
        let answer = crate::tool::answer(self, agent, body)?;
        match &answer.change {
            Some(change) => self.apply(change, seq)?,
            None => self.set_applied(seq),
        }
        if let Some(id) = tool_use_id {
            let mut v = seq.0.to_be_bytes().to_vec();
            v.push(u8::from(answer.is_error));
            v.extend_from_slice(answer.text.as_bytes());
            self.kv.insert(retry_key(agent, id), v);
        }
        Ok(answer)
    }

    /// [`run_call`](Self::run_call) for a stored event.
    pub fn run_event(&mut self, event: &Event) -> Result<Answer> {
        self.run_call(
            &event.header.agent,
            event.header.tool_use_id.as_deref(),
            &event.body,
            event.seq,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{IndexTrees, Overlay};

    /// An edit of a large file holds only the chunks it rewrites in the writer's pending changes,
    /// which is what the writer's bound on held bytes counts.
    #[test]
    fn an_edit_of_a_large_file_holds_a_bounded_chunk_in_the_pending_changes() {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let trees = IndexTrees::new(
            db.open_tree("index").expect("tree"),
            db.open_tree("content").expect("tree"),
        );
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
