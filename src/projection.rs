//! The path index: an inode-style projection of the log that answers the commands.
//!
//! Every directory and file is a node with a never-reused id; directory `/` is node 0. The index is
//! an ordered key-value map:
//!
//! | key | value |
//! |---|---|
//! | `c` ‖ parent id (u64 BE) ‖ name | kind (`d` or `f`) ‖ child id (u64 BE), and for an entry a rename made, ‖ that rename's seq (u64 BE) |
//! | `f` ‖ file id (u64 BE) | created seq ‖ updated seq ‖ length in bytes ‖ first chunk ‖ next unused chunk number (five u64 LE) |
//! | `b` ‖ file id (u64 BE) ‖ chunk number (u64 BE) | next chunk's number (u64 LE) ‖ 1 to 16 KiB of the file's bytes |
//! | `n` | next node id (u64 BE) |
//! | `a` | the last seq applied (u64 BE) |
//! | `t` ‖ agent ‖ 0 ‖ tool_use id | the retry record: seq (u64 BE) ‖ record number (u64 BE) ‖ flags (1 byte: 1 is_error, 2 changed the tree) ‖ blake3 of the call's canonical body bytes (32) ‖ blake3 of its result text (32) ‖ for a change only, the text a retry gets |
//! | `T` ‖ slot (u64 BE) | the `t` key of the live record whose number is that slot modulo [`RETRY_RECORDS`] (records of calls answered under semantics 1 to 3: one pool) |
//! | `U` | the next record number (u64 BE) of that pool: how many such records were ever made |
//! | `V` ‖ agent ‖ 0 ‖ slot (u64 BE) | the same, for the pool of `agent`'s records of calls answered under semantics 4 |
//! | `W` ‖ agent | the next record number (u64 BE) of `agent`'s pool |
//! | `P` | present once the policy is explicit (after the first admin event) |
//! | `p` ‖ agent ‖ 0 ‖ prefix | access (`r` or `w`) |
//! | `g` ‖ directory id (u64 BE) | empty: a deleted directory whose nodes are still to be collected |
//! | `k` ‖ token id | the agent token's record ([`TokenRecord`], canonical bytes as the events'): id, agent, label, blake3 of the token, issuing seq and operator, revocation (seq and operator) |
//! | `L` | the index layout ([`INDEX_LAYOUT`], 1 byte), written with event 1 |
//! | `s` ‖ setting name | the setting's value, once an operator set it ([`crate::policy::SETTINGS`]) |
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
//! A call with a tool_use id leaves a retry record, and a later call by the same agent with the
//! same id is a retry of it, logged as an event of its own ([`Projection::run_traced`] names the
//! original's seq). A retry with another input (its body hashes differently) is an error result
//! and runs nothing. A retry of a call that changed the tree runs nothing either: it gets the
//! recorded text, if the agent still holds read-write access to every path the call named, and an
//! error result if not. A retry of a call that changed nothing (a read, an error) runs again
//! against the tree as it is now, and its record becomes that call's. A change's text is kept
//! whole up to [`RETRY_TEXT_MAX`] bytes (longer ones keep their first line and say the rest is
//! not kept); a read keeps only its outcome. The records of the last [`RETRY_RECORDS`] calls that
//! left one are kept, in pools: records are numbered as they are made in their pool, record `k`
//! takes slot `k mod RETRY_RECORDS` and evicts the record `k - RETRY_RECORDS` left there (point
//! reads only, no scan), so eviction is oldest first, a pure function of the log, and a retry of
//! an evicted id runs as a new call. A record replaced by its retry gets a new number and frees
//! its old slot. Calls answered under semantics 4 keep their records in their agent's own pool
//! (flag 4 of the record), so an agent's calls evict only its own records; those answered under
//! semantics 1 to 3 share one pool, as those builds kept them, so old logs replay as they ran.
//!
//! **Invariant:** a tool_use id changes the tree at most once per agent while its record is kept;
//! every retry is logged, and replay re-derives its answer from the records replayed before it.
//!
//! **Invariant:** the index is a pure function of the log: replaying every event into an empty
//! [`MemKv`](crate::kv::MemKv) yields byte-for-byte the stored index (checked by `verify`).

use std::sync::{Arc, Mutex, PoisonError};

use crate::credential::{Revocation, TokenRecord};
use crate::error::{Error, Result};
use crate::event::{Body, EventHash, Refusal, RejectedDigest, Seq};
use crate::kv::{KvRead, KvWrite};
use crate::paths::MemPath;
use crate::policy::{Access, Grant, Policy};
use crate::tool::render::child_lines;
use crate::tool::{Answer, Command, Profile, Semantics};
use crate::tool::{Change, Entry, NodeKind, Probe, Tree};

mod compare;
pub mod content;
mod listings;
#[cfg(test)]
mod semantics_versions;

use content::{Chunking, FileHead};
use listings::Listings;

const ROOT_ID: u64 = 0;
const NEXT_ID_KEY: &[u8] = b"n";
const APPLIED_KEY: &[u8] = b"a";
const LAYOUT_KEY: &[u8] = b"L";
const TRASH_PREFIX: &[u8] = b"g";

/// The layout of the index this build writes: 3 keeps file content in chunks (`b` keys) and
/// bounded retry records (`t`, `T`, `U`); 2 kept content whole under `f` and collects deleted
/// directories lazily (the trash); 1, with no layout key, removed them at once. An index of an
/// older layout is rebuilt from the log when a client opens the store.
pub const INDEX_LAYOUT: u8 = 4;

/// The layout before renames stamped their seq into the entries they make: still verified as
/// it is (the verifier re-derives it in that layout), and rebuilt in [`INDEX_LAYOUT`] when a
/// client opens the store. In an index of this layout, a file's [`FileEntry::touched`] is its
/// last content change.
pub const RENAMES_UNSTAMPED: u8 = 3;

/// How many retry records the index keeps: those of the last 65,536 calls that left one (calls
/// with a tool_use id). Part of the layout, like [`COLLECT_BUDGET`].
pub const RETRY_RECORDS: u64 = 65_536;

/// The longest answer text of a change that its retry record keeps whole. Longer ones (a
/// `str_replace` snippet of very long lines) keep their first line and a note. Part of the layout.
pub const RETRY_TEXT_MAX: usize = 16 * 1024;

const RETRY_SLOT_PREFIX: &[u8] = b"T";
const RETRY_NEXT_KEY: &[u8] = b"U";
const AGENT_SLOT_PREFIX: u8 = b'V';
const AGENT_NEXT_PREFIX: u8 = b'W';
const RETRY_ERROR: u8 = 1;
const RETRY_CHANGED: u8 = 2;
const RETRY_PER_AGENT: u8 = 4;
const RETRY_FLAGS_AT: usize = 16;
const RETRY_FIXED: usize = RETRY_FLAGS_AT + 1 + 32 + 32;

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

/// A file as the index holds it, without its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Its path.
    pub path: MemPath,
    /// Seq of the event that created the file (its identity: it follows the file through
    /// renames and content changes, and a file created again after a delete gets a new one).
    pub created: Seq,
    /// Seq of the event that last changed its content.
    pub updated: Seq,
    /// Seq of the last event that changed the file at all: its content, or its path (a rename of
    /// the file or of a directory above it).
    pub touched: Seq,
    /// Its length in bytes.
    pub bytes: u64,
}

impl FileEntry {
    fn new(path: MemPath, head: FileHead, moved: u64) -> FileEntry {
        FileEntry {
            path,
            created: Seq(head.created),
            updated: Seq(head.updated),
            touched: Seq(head.updated.max(moved)),
            bytes: head.len,
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
const TOKEN_PREFIX: &[u8] = b"k";

fn setting_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(b's');
    k.extend_from_slice(name.as_bytes());
    k
}

fn token_key(id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + id.len());
    k.extend_from_slice(TOKEN_PREFIX);
    k.extend_from_slice(id.as_bytes());
    k
}

fn decode_token(value: &[u8]) -> Result<TokenRecord> {
    crate::codec::decode(value, "path index token record")
}

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

/// A retry record's pool: the one every agent shared (semantics 1 to 3), or an agent's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool<'a> {
    Shared,
    Agent(&'a str),
}

impl Pool<'_> {
    /// The key of slot `slot` of this pool.
    fn slot_key(self, slot: u64) -> Vec<u8> {
        match self {
            Pool::Shared => {
                let mut k = Vec::with_capacity(9);
                k.extend_from_slice(RETRY_SLOT_PREFIX);
                k.extend_from_slice(&slot.to_be_bytes());
                k
            }
            Pool::Agent(agent) => {
                let mut k = Vec::with_capacity(10 + agent.len());
                k.push(AGENT_SLOT_PREFIX);
                k.extend_from_slice(agent.as_bytes());
                k.push(0);
                k.extend_from_slice(&slot.to_be_bytes());
                k
            }
        }
    }

    /// The key of this pool's next record number.
    fn next_key(self) -> Vec<u8> {
        match self {
            Pool::Shared => RETRY_NEXT_KEY.to_vec(),
            Pool::Agent(agent) => {
                let mut k = Vec::with_capacity(1 + agent.len());
                k.push(AGENT_NEXT_PREFIX);
                k.extend_from_slice(agent.as_bytes());
                k
            }
        }
    }
}

/// The hash a retry's input is compared by: blake3 of the body's canonical bytes (the event's
/// payload hash, `payload_hash` when the caller has it), or for a failed call logged as a
/// digest, the hash of the `Tool` body it replaces (which the digest keeps).
fn input_hash(body: &Body, payload_hash: Option<EventHash>) -> EventHash {
    match body {
        Body::RejectedDigest(RejectedDigest {
            input,
            refusal: Refusal::Failed { .. },
            ..
        }) => input.hash,
        _ => payload_hash.unwrap_or_else(|| EventHash::of(&crate::event::payload_of(body))),
    }
}

/// What the index keeps of a call with a tool_use id, for its retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The seq of the call.
    pub seq: Seq,
    /// The record's number: how many records were made before it (its slot is this modulo
    /// [`RETRY_RECORDS`]).
    pub number: u64,
    /// Whether its result was an error.
    pub is_error: bool,
    /// Whether it is in its agent's own pool (a call answered under semantics 4) rather than the
    /// pool every agent shared.
    pub per_agent: bool,
    /// blake3 of its body's canonical bytes (its event's payload hash).
    pub input: EventHash,
    /// blake3 of its result text.
    pub answer: EventHash,
    /// For a call that changed the tree, the text its retries get (the result text, abridged
    /// past [`RETRY_TEXT_MAX`]); `None` for a call that changed nothing.
    pub text: Option<String>,
}

impl Recorded {
    fn encode(&self) -> Vec<u8> {
        let text = self.text.as_deref().unwrap_or_default();
        let mut v = Vec::with_capacity(RETRY_FIXED + text.len());
        v.extend_from_slice(&self.seq.0.to_be_bytes());
        v.extend_from_slice(&self.number.to_be_bytes());
        let changed = if self.text.is_some() {
            RETRY_CHANGED
        } else {
            0
        };
        let pool = if self.per_agent { RETRY_PER_AGENT } else { 0 };
        v.push(u8::from(self.is_error) | changed | pool);
        v.extend_from_slice(&self.input.0);
        v.extend_from_slice(&self.answer.0);
        v.extend_from_slice(text.as_bytes());
        v
    }

    fn decode(v: &[u8]) -> Result<Recorded> {
        let bad = |what: &str| Error::corrupt(format!("path index retry record {what}"));
        if v.len() < RETRY_FIXED {
            return Err(bad("is truncated"));
        }
        let flags = v[RETRY_FLAGS_AT];
        if flags & !(RETRY_ERROR | RETRY_CHANGED | RETRY_PER_AGENT) != 0 {
            return Err(bad("has unknown flags"));
        }
        let hash = |at: usize| {
            let mut h = [0; 32];
            h.copy_from_slice(&v[at..at + 32]);
            EventHash(h)
        };
        let rest = &v[RETRY_FIXED..];
        let text = if flags & RETRY_CHANGED != 0 {
            Some(
                std::str::from_utf8(rest)
                    .map_err(|_| bad("text is not UTF-8"))?
                    .to_string(),
            )
        } else if rest.is_empty() {
            None
        } else {
            return Err(bad("of a call that changed nothing holds a text"));
        };
        Ok(Recorded {
            seq: Seq(be_u64(&v[..8], "retry seq")?),
            number: be_u64(&v[8..16], "retry record number")?,
            is_error: flags & RETRY_ERROR != 0,
            per_agent: flags & RETRY_PER_AGENT != 0,
            input: hash(RETRY_FLAGS_AT + 1),
            answer: hash(RETRY_FLAGS_AT + 33),
            text,
        })
    }
}

/// How a call that reused a tool_use id was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryKind {
    /// With the text recorded for the original, a change (nothing ran).
    Repeated,
    /// Run again against the tree as it is now: the original changed nothing.
    Reanswered,
    /// Refused: the input differs from the original's.
    DifferentInput,
    /// Refused: the agent no longer holds the access the original change needed.
    AccessLost,
    /// Refused: a redaction erased the original, so it is not run again.
    Erased,
}

/// The input hash a retry record of an erased call keeps: no input hashes to it (it is no blake3
/// output anyone can aim for), so a retry of the call is told that it was erased.
const ERASED_INPUT: EventHash = EventHash([0xee; 32]);

/// A call that reused a tool_use id with a kept record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The seq of the call whose record it reused.
    pub of: Seq,
    /// How it was answered.
    pub kind: RetryKind,
}

/// What [`Projection::run_traced`] did with one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// The answer, and the change it applied.
    pub answer: Answer,
    /// Set when the call was a retry.
    pub retry: Option<Retry>,
}

/// The text a change's retries get: the whole text, or past [`RETRY_TEXT_MAX`] its first line
/// and a note.
fn repeat_text(seq: Seq, text: &str) -> String {
    if text.len() <= RETRY_TEXT_MAX {
        return text.to_string();
    }
    let first = text.split('\n').next().unwrap_or_default();
    let mut end = first.len().min(1024);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[This call was applied as event {seq}; the rest of its answer ({} bytes) is not kept for retries. View the file to see it as it is now.]",
        &first[..end],
        text.len() - end
    )
}

/// The paths a tool command writes (none for `view`).
fn written_paths(command: &Command) -> Vec<&str> {
    match command {
        Command::View { .. } => Vec::new(),
        Command::Create { path, .. }
        | Command::StrReplace { path, .. }
        | Command::Insert { path, .. }
        | Command::Delete { path } => vec![path],
        Command::Rename { old_path, new_path } => vec![old_path, new_path],
    }
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
    decode_entry(value).map(|(kind, id, _)| (kind, id))
}

/// A `c` entry's kind, child id, and the seq of the rename that made it (0 if none did).
fn decode_entry(value: &[u8]) -> Result<(NodeKind, u64, u64)> {
    let kind = match value.first() {
        Some(b'd') => NodeKind::Dir,
        Some(b'f') => NodeKind::File,
        _ => return Err(Error::corrupt("path index entry has an unknown kind")),
    };
    let (id, moved) = match value.len() {
        9 => (be_u64(&value[1..], "child id")?, 0),
        17 => (
            be_u64(&value[1..9], "child id")?,
            be_u64(&value[9..], "rename seq")?,
        ),
        _ => return Err(Error::corrupt("path index entry is neither 9 nor 17 bytes")),
    };
    Ok((kind, id, moved))
}

/// The `c` entry a rename at `seq` makes for node `id`.
fn encode_moved(kind: NodeKind, id: u64, seq: Seq) -> Vec<u8> {
    let mut v = encode_child(kind, id);
    v.extend_from_slice(&seq.0.to_be_bytes());
    v
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
    /// How many retry records are kept ([`RETRY_RECORDS`]; smaller in unit tests).
    retry_cap: u64,
    /// The layout it writes ([`INDEX_LAYOUT`]; an older one to re-derive an index of that layout).
    layout: u8,
    /// Rendered listing lines kept between calls ([`Projection::with_listings`]).
    listings: Option<Mutex<Listings>>,
}

impl<K> Projection<K> {
    /// Wraps a map holding an index (an empty map is the empty index).
    pub fn new(kv: K) -> Self {
        Projection {
            kv,
            retry_cap: RETRY_RECORDS,
            layout: INDEX_LAYOUT,
            listings: None,
        }
    }

    /// [`Projection::new`], keeping each directory's rendered listing lines between calls
    /// while the directory is unchanged, for a projection that answers many calls in a row
    /// (the verifier's replay): a listing then costs what changed since the last one. Only
    /// changes made through this projection are seen, so the map must not change beneath it.
    pub fn with_listings(kv: K) -> Self {
        Projection {
            listings: Some(Mutex::new(Listings::default())),
            ..Projection::new(kv)
        }
    }

    /// Builds the index in `layout` rather than [`INDEX_LAYOUT`]: the verifier re-derives an
    /// index of layout [`RENAMES_UNSTAMPED`] (whose renames made 9-byte entries) in its own
    /// layout, to compare it byte for byte. Layouts before that one are not re-derivable.
    pub fn in_layout(mut self, layout: u8) -> Self {
        self.layout = layout;
        self
    }

    /// Forgets the kept listing lines of directory `id`, whose entries changed.
    fn forget_listing(&mut self, id: u64) {
        if let Some(listings) = &mut self.listings {
            listings
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .forget(id);
        }
    }

    /// The underlying map.
    pub fn into_inner(self) -> K {
        self.kv
    }

    /// The underlying map.
    pub fn kv(&self) -> &K {
        &self.kv
    }

    /// The underlying map, to write around the projection (a savepoint's rollback).
    pub fn kv_mut(&mut self) -> &mut K {
        &mut self.kv
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

    /// The agent tokens ever issued, revoked or not, in id order.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>> {
        self.kv
            .scan_prefix(TOKEN_PREFIX, usize::MAX)?
            .iter()
            .map(|(_, v)| decode_token(v))
            .collect()
    }

    /// How many deleted directories still wait in the trash to be collected.
    pub fn trash_len(&self) -> Result<usize> {
        Ok(self.kv.scan_prefix(TRASH_PREFIX, usize::MAX)?.len())
    }

    /// The retry record of `agent`'s call with `tool_use_id`, if one is kept.
    pub fn recorded(&self, agent: &str, tool_use_id: &str) -> Result<Option<Recorded>> {
        self.kv
            .get_with(&retry_key(agent, tool_use_id), Recorded::decode)?
            .transpose()
    }

    /// How many retry records were ever made in `agent`'s own pool (calls answered under
    /// semantics 4), or with `None` in the pool every agent shared (semantics 1 to 3): the next
    /// record's number there.
    pub fn retry_records_made(&self, agent: Option<&str>) -> Result<u64> {
        let pool = agent.map_or(Pool::Shared, Pool::Agent);
        match self.kv.get(&pool.next_key())? {
            Some(v) => be_u64(&v, "next retry record number"),
            None => Ok(0),
        }
    }

    /// When the agent no longer holds read-write access to a path the recorded change `body`
    /// named: the error result its retry gets.
    fn lost_access(
        &self,
        agent: &str,
        tool_use_id: &str,
        body: &Body,
        original: Seq,
        semantics: Semantics,
    ) -> Result<Option<Answer>> {
        let Body::Tool(call) = body else {
            return Ok(None);
        };
        let Ok(root) = MemPath::root(&call.root) else {
            return Ok(None);
        };
        let policy = self.policy()?;
        for raw in written_paths(&call.command) {
            let Ok(path) = MemPath::resolve(raw, &root) else {
                continue;
            };
            if !policy.allows(agent, &path, Access::ReadWrite) {
                return Ok(Some(Answer {
                    text: format!(
                        "Error: Access denied: agent {agent} no longer has a read-write grant covering {path}, which call {} (event {original}) needed, so its recorded answer is not repeated. Ask an operator for the grant, then retry.",
                        semantics.quote(tool_use_id)
                    ),
                    is_error: true,
                    change: None,
                }));
            }
        }
        Ok(None)
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

    /// The file at `path` without its content, or `None` if no file is there.
    pub fn file_entry(&self, path: &MemPath) -> Result<Option<FileEntry>> {
        let mut moved = 0;
        let mut key = Vec::with_capacity(64);
        let mut id = ROOT_ID;
        let mut kind = NodeKind::Dir;
        for seg in path.segments() {
            if kind != NodeKind::Dir {
                return Ok(None);
            }
            set_child_key(&mut key, id, seg);
            match self.kv.get_with(&key, decode_entry)? {
                Some(entry) => {
                    let (k, child, m) = entry?;
                    (kind, id, moved) = (k, child, moved.max(m));
                }
                None => return Ok(None),
            }
        }
        if kind != NodeKind::File {
            return Ok(None);
        }
        Ok(Some(FileEntry::new(
            path.clone(),
            self.file_head(id)?,
            moved,
        )))
    }

    /// Every file at or under `dir` without its content, in path order (segment by segment, as
    /// [`Projection::records_under`]). Iterative, as `collect`.
    pub fn file_entries_under(&self, dir: &MemPath) -> Result<Vec<FileEntry>> {
        let mut moved = 0;
        let mut key = Vec::with_capacity(64);
        let (mut kind, mut id) = (NodeKind::Dir, ROOT_ID);
        for seg in dir.segments() {
            if kind != NodeKind::Dir {
                return Ok(Vec::new());
            }
            set_child_key(&mut key, id, seg);
            match self.kv.get_with(&key, decode_entry)? {
                Some(entry) => {
                    let (k, child, m) = entry?;
                    (kind, id, moved) = (k, child, moved.max(m));
                }
                None => return Ok(Vec::new()),
            }
        }
        let mut out = Vec::new();
        let mut stack = vec![(dir.clone(), kind, id, moved)];
        while let Some((path, kind, id, moved)) = stack.pop() {
            match kind {
                NodeKind::File => out.push(FileEntry::new(path, self.file_head(id)?, moved)),
                NodeKind::Dir => {
                    let mut children = Vec::new();
                    for (k, v) in self.kv.scan_prefix(&child_prefix(id), usize::MAX)? {
                        let name = std::str::from_utf8(&k[9..])
                            .map_err(|_| Error::corrupt("path index name is not UTF-8"))?;
                        let (kind, child, m) = decode_entry(&v)?;
                        children.push((path.join(name), kind, child, moved.max(m)));
                    }
                    stack.extend(children.into_iter().rev());
                }
            }
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
    type Error = Error;

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

    fn created(&self, path: &MemPath) -> Result<Option<u64>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(self.file_head(id)?.created)),
            _ => Ok(None),
        }
    }

    fn list(&self, path: &MemPath) -> Result<Vec<Entry>> {
        let Some((NodeKind::Dir, id)) = self.lookup(path)? else {
            return Ok(Vec::new());
        };
        // Visited in place, not collected first: a listing reads each entry once.
        let mut out = Vec::new();
        let mut failed = None;
        self.kv.visit_prefix(&child_prefix(id), |key, value| {
            let entry = std::str::from_utf8(&key[9..])
                .map_err(|_| Error::corrupt("path index name is not UTF-8"))
                .and_then(|name| {
                    let (kind, child) = decode_child(value)?;
                    let size = match kind {
                        NodeKind::Dir => 0,
                        NodeKind::File => self.file_head(child)?.len,
                    };
                    Ok(Entry {
                        name: name.to_string(),
                        kind,
                        size,
                    })
                });
            match entry {
                Ok(entry) => out.push(entry),
                Err(e) => failed = Some(e),
            }
            failed.is_none()
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn child_lines(&self, path: &MemPath, shown: &str, profile: Profile) -> Result<Arc<str>> {
        let render =
            || Ok::<Arc<str>, Error>(child_lines(&self.list(path)?, shown, profile).into());
        let Some(listings) = &self.listings else {
            return render();
        };
        let Some((NodeKind::Dir, id)) = self.lookup(path)? else {
            return render();
        };
        let lock = || listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lines) = lock().get(id, shown, profile) {
            return Ok(lines);
        }
        let lines = render()?;
        lock().put(id, shown, profile, Arc::clone(&lines));
        Ok(lines)
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

    fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        self.kv.get_with(&token_key(id), decode_token)?.transpose()
    }

    fn setting(&self, name: &str) -> Result<Option<String>> {
        match self.kv.get(&setting_key(name))? {
            None => Ok(None),
            Some(value) => String::from_utf8(value.to_vec())
                .map(Some)
                .map_err(|_| Error::corrupt(format!("path index setting {name} is not text"))),
        }
    }
}

impl<K: KvWrite> Projection<K> {
    /// Records that every event up to `seq` is applied.
    pub fn set_applied(&mut self, seq: Seq) {
        if seq == Seq(1) {
            self.kv.set(LAYOUT_KEY, &[self.layout]);
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
                // A new entry or a new size: either way the directory's lines change.
                self.forget_listing(parent_id);
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
                for &(_, dir) in &chain {
                    self.forget_listing(dir);
                }
                self.forget_listing(parent_id);
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
                    .insert(token_key(&issue.id), crate::codec::encode(&record));
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
                self.kv.insert(token_key(id), crate::codec::encode(&record));
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

impl<K: KvWrite> Projection<K> {
    /// Answers `agent`'s call against the index under `semantics`, applies its change as event
    /// `seq`, and keeps the retry record of a call with a tool_use id (see the module docs). This
    /// is the one step shared by the writer and the replay engine ([`crate::replay`]: recovery on
    /// open, the verifier, and every view of the past).
    pub fn run_call(
        &mut self,
        agent: &str,
        tool_use_id: Option<&str>,
        body: &Body,
        semantics: Semantics,
        seq: Seq,
    ) -> Result<Answer> {
        Ok(self
            .run_traced(agent, tool_use_id, body, semantics, None, seq)?
            .answer)
    }

    /// [`run_call`](Self::run_call), also saying whether the call was a retry and of which seq.
    /// `input` is blake3 of `body`'s canonical bytes when the caller has it (the event's payload
    /// hash); `None` computes it. Either way a retry is compared by [`input_hash`].
    pub fn run_traced(
        &mut self,
        agent: &str,
        tool_use_id: Option<&str>,
        body: &Body,
        semantics: Semantics,
        input: Option<EventHash>,
        seq: Seq,
    ) -> Result<Traced> {
        if let Body::Erased(_) = body {
            // Erased by a redaction: it changes nothing and its answer is not re-derived (the
            // verifier counts it as redacted). Its tool_use id keeps a record that says so, so
            // a retry of the erased call (an SDK's, after a timeout) is not run again.
            let nothing = Answer {
                text: String::new(),
                is_error: false,
                change: None,
            };
            if let Some(id) = tool_use_id {
                let recorded = self.recorded(agent, id)?;
                let kept = (agent, id, seq, semantics);
                self.keep_record(kept, ERASED_INPUT, &nothing, recorded.as_ref())?;
            }
            self.set_applied(seq);
            return Ok(Traced {
                answer: nothing,
                retry: None,
            });
        }
        let Some(id) = tool_use_id else {
            let answer = self.run_fresh(agent, body, semantics, seq)?;
            return Ok(Traced {
                answer,
                retry: None,
            });
        };
        let input = input_hash(body, input);
        let recorded = self.recorded(agent, id)?;
        let (answer, kind) = match &recorded {
            Some(original) if original.input == ERASED_INPUT => (
                Answer {
                    text: format!(
                        "Error: tool_use id {} of agent {agent} named a call that a redaction erased (event {}), so this call was not run. If it is still wanted, send it again with a fresh tool_use id.",
                        semantics.quote(id),
                        original.seq
                    ),
                    is_error: true,
                    change: None,
                },
                RetryKind::Erased,
            ),
            Some(original) if original.input != input => (
                Answer {
                    text: format!(
                        "Error: tool_use id {} was already used by agent {agent} for a different call (event {}), so this call was not run. Send it again with a fresh tool_use id.",
                        semantics.quote(id),
                        original.seq
                    ),
                    is_error: true,
                    change: None,
                },
                RetryKind::DifferentInput,
            ),
            Some(original) if original.text.is_some() => {
                match self.lost_access(agent, id, body, original.seq, semantics)? {
                    Some(denied) => (denied, RetryKind::AccessLost),
                    None => (
                        Answer {
                            text: original.text.clone().unwrap_or_default(),
                            is_error: original.is_error,
                            change: None,
                        },
                        RetryKind::Repeated,
                    ),
                }
            }
            _ => {
                let answer = self.run_fresh(agent, body, semantics, seq)?;
                self.keep_record(
                    (agent, id, seq, semantics),
                    input,
                    &answer,
                    recorded.as_ref(),
                )?;
                let retry = recorded.map(|original| Retry {
                    of: original.seq,
                    kind: RetryKind::Reanswered,
                });
                return Ok(Traced { answer, retry });
            }
        };
        self.set_applied(seq);
        let of = recorded.map_or(seq, |original| original.seq);
        Ok(Traced {
            answer,
            retry: Some(Retry { of, kind }),
        })
    }

    /// Answers a call as new and applies its change.
    fn run_fresh(
        &mut self,
        agent: &str,
        body: &Body,
        semantics: Semantics,
        seq: Seq,
    ) -> Result<Answer> {
        let answer = crate::tool::answer(self, agent, body, semantics)?;
        match &answer.change {
            Some(change) => self.apply(change, seq)?,
            None => self.set_applied(seq),
        }
        Ok(answer)
    }

    /// Keeps the record of `agent`'s call `tool_use_id` at `seq` (answered under `semantics`),
    /// in place of `replaced` (the record of an earlier call with the id that changed nothing,
    /// whose slot it frees), in the next slot of its pool, evicting the record made
    /// [`RETRY_RECORDS`] records of that pool before it.
    fn keep_record(
        &mut self,
        (agent, tool_use_id, seq, semantics): (&str, &str, Seq, Semantics),
        input: EventHash,
        answer: &Answer,
        replaced: Option<&Recorded>,
    ) -> Result<()> {
        let key = retry_key(agent, tool_use_id);
        if let Some(old) = replaced {
            let pool = if old.per_agent {
                Pool::Agent(agent)
            } else {
                Pool::Shared
            };
            self.kv.remove(&pool.slot_key(old.number % self.retry_cap));
        }
        let per_agent = semantics.retry_records_per_agent();
        let pool = if per_agent {
            Pool::Agent(agent)
        } else {
            Pool::Shared
        };
        let number = self.retry_records_made(per_agent.then_some(agent))?;
        self.kv.set(&pool.next_key(), &(number + 1).to_be_bytes());
        let slot = pool.slot_key(number % self.retry_cap);
        if let Some(evicted) = self.kv.get(&slot)? {
            // The slot names the record made `retry_cap` records ago (a replaced record freed
            // its slot), unless that is the key being kept now.
            if evicted != key {
                self.kv.remove(&evicted);
            }
        }
        let record = Recorded {
            seq,
            number,
            is_error: answer.is_error,
            per_agent,
            input,
            answer: EventHash::of(answer.text.as_bytes()),
            text: answer
                .change
                .as_ref()
                .map(|_| repeat_text(seq, &answer.text)),
        };
        self.kv.insert(slot, key.clone());
        self.kv.insert(key, record.encode());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{IndexTrees, MemKv, Overlay};
    use crate::tool::{Limits, Profile};

    fn view(path: &str) -> Body {
        Body::Tool(crate::event::ToolCall {
            root: "/memories".into(),
            profile: Profile::Spec,
            limits: Limits::default(),
            command: Command::View {
                path: path.into(),
                view_range: None,
            },
        })
    }

    fn records(index: &Projection<MemKv>) -> Vec<&[u8]> {
        index
            .kv()
            .map
            .keys()
            .filter(|k| k[0] == b't')
            .map(|k| &k[1..])
            .collect()
    }

    /// A file keeps its identity (`created`) through renames and edits; `touched` is the last
    /// event that changed its content or its path, whether the rename named the file or a
    /// directory above it; the listing without content is the listing with it, in the same order.
    /// An index built in the layout before rename stamps holds 9-byte entries only.
    #[test]
    fn renames_stamp_the_entries_they_make_and_files_keep_their_identity() {
        let p = |s: &str| MemPath::absolute(s).expect("path");
        let write = |path: &str| Change::Write {
            path: p(path),
            content: format!("{path}\n"),
        };
        let rename = |from: &str, to: &str| Change::Rename {
            from: p(from),
            to: p(to),
        };
        let changes = [
            write("/m/a/x.md"),
            write("/m/a/y.md"),
            write("/m/a-b.md"),
            rename("/m/a/x.md", "/m/c/x.md"),
            rename("/m/c", "/m/d"),
            write("/m/d/x.md"),
        ];
        for layout in [RENAMES_UNSTAMPED, INDEX_LAYOUT] {
            let mut index = Projection::new(MemKv::default()).in_layout(layout);
            for (n, change) in changes.iter().enumerate() {
                index.apply(change, Seq(n as u64 + 1)).expect("apply");
            }
            let entries = index.file_entries_under(&p("/m")).expect("entries");
            let records = index.records_under(&p("/m")).expect("records");
            let paths: Vec<String> = entries.iter().map(|e| e.path.to_string()).collect();
            let record_paths: Vec<String> = records.iter().map(|r| r.path.clone()).collect();
            assert_eq!(paths, record_paths);
            assert_eq!(paths, ["/m/a/y.md", "/m/a-b.md", "/m/d/x.md"]);
            let x = &entries[2];
            assert_eq!((x.created, x.updated), (Seq(1), Seq(6)));
            assert_eq!(x.touched, Seq(6));
            let y = index.file_entry(&p("/m/a/y.md")).expect("read").expect("y");
            assert_eq!((y.created, y.touched, y.bytes), (Seq(2), Seq(2), 10));
            assert_eq!(index.file_entry(&p("/m/a")).expect("read"), None);
            assert_eq!(index.file_entry(&p("/m/a/y.md/z")).expect("read"), None);
            let long = index
                .kv()
                .map
                .iter()
                .filter(|(k, v)| k[0] == b'c' && v.len() == 17);
            assert_eq!(long.count(), if layout == INDEX_LAYOUT { 2 } else { 0 });
            // A rename of the directory above stamps the file below it.
            index.apply(&rename("/m/d", "/m/e"), Seq(7)).expect("apply");
            let x = index.file_entry(&p("/m/e/x.md")).expect("read").expect("x");
            let stamped = if layout == INDEX_LAYOUT {
                Seq(7)
            } else {
                Seq(6)
            };
            assert_eq!((x.created, x.updated, x.touched), (Seq(1), Seq(6), stamped));
            assert_eq!(
                index.file_entries_under(&p("/m/e")).expect("entries"),
                vec![x]
            );
        }
    }

    /// Past the cap, each new record evicts the oldest one of its pool; a record replaced by a
    /// retry becomes the newest and frees its old slot. The same under both pools.
    #[test]
    fn retry_records_past_the_cap_evict_the_oldest() {
        for (semantics, slot_prefix, agent) in [
            (Semantics::V3, b'T', None),
            (Semantics::V4, b'V', Some("a")),
        ] {
            let mut index = Projection::new(MemKv::default());
            index.retry_cap = 3;
            let mut seq = 0;
            let mut run = |index: &mut Projection<MemKv>, id: &str| {
                seq += 1;
                index
                    .run_traced("a", Some(id), &view("/memories"), semantics, None, Seq(seq))
                    .expect("run")
            };
            for id in ["1", "2", "3"] {
                assert_eq!(run(&mut index, id).retry, None);
            }
            // A retry of "1" replaces its record, which becomes the newest.
            let again = run(&mut index, "1").retry.expect("a retry");
            assert_eq!((again.of, again.kind), (Seq(1), RetryKind::Reanswered));
            assert_eq!(records(&index).len(), 3);
            // "4" evicts "2", the oldest now; "5" evicts "3".
            run(&mut index, "4");
            run(&mut index, "5");
            assert_eq!(records(&index), [b"a\x001", b"a\x004", b"a\x005"]);
            let slots = index
                .kv()
                .map
                .keys()
                .filter(|k| k[0] == slot_prefix)
                .count();
            assert_eq!(slots, 3, "{semantics}");
            // An evicted id runs as a new call: no retry, a new record, and "1" goes.
            assert_eq!(run(&mut index, "2").retry, None);
            assert_eq!(records(&index), [b"a\x002", b"a\x004", b"a\x005"]);
            assert_eq!(index.retry_records_made(agent).expect("count"), 7);
        }
    }

    /// Before (semantics 1 to 3, one pool): another agent's calls evicted an agent's records,
    /// so its retry of a change ran twice. Under semantics 4 an agent's calls evict only its own
    /// records, and a record kept under the shared pool is freed from it when its retry keeps
    /// the new record in the agent's pool.
    #[test]
    fn another_agents_calls_never_evict_an_agents_records_under_semantics_four() {
        let create = |n: u64| {
            Body::Tool(crate::event::ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command: Command::Create {
                    path: format!("/memories/n{n}.md"),
                    file_text: "x\n".into(),
                },
            })
        };
        for semantics in [Semantics::V3, Semantics::V4] {
            let mut index = Projection::new(MemKv::default());
            index.retry_cap = 4;
            let mut seq = 0;
            let mut run = |index: &mut Projection<MemKv>, agent: &str, id: &str, body: &Body| {
                seq += 1;
                index
                    .run_traced(agent, Some(id), body, semantics, None, Seq(seq))
                    .expect("run")
            };
            run(&mut index, "a", "write", &create(0));
            for i in 0..10 {
                run(&mut index, "b", &format!("flood-{i}"), &view("/memories"));
            }
            let retry = run(&mut index, "a", "write", &create(0));
            match semantics {
                Semantics::V3 => assert_eq!(retry.retry, None, "the shared pool evicted it"),
                _ => {
                    let retry = retry.retry.expect("a's record is kept");
                    // Repeated: the recorded text, nothing run again.
                    assert_eq!((retry.of, retry.kind), (Seq(1), RetryKind::Repeated));
                }
            }
        }
        // A record of the shared pool, retried under semantics 4 after a read: moved to the
        // agent's pool, its shared slot freed.
        let mut index = Projection::new(MemKv::default());
        index.retry_cap = 4;
        let body = view("/memories");
        index
            .run_traced("a", Some("r"), &body, Semantics::V3, None, Seq(1))
            .expect("run");
        index
            .run_traced("a", Some("r"), &body, Semantics::V4, None, Seq(2))
            .expect("run");
        assert_eq!(index.kv().map.keys().filter(|k| k[0] == b'T').count(), 0);
        assert_eq!(index.kv().map.keys().filter(|k| k[0] == b'V').count(), 1);
        let kept = index.recorded("a", "r").expect("read").expect("kept");
        assert!(kept.per_agent && kept.seq == Seq(2), "{kept:?}");
    }

    /// A replay that keeps listing lines answers every call exactly as one that renders each
    /// listing afresh, through writes, edits that change sizes, renames of files and
    /// directories, deletes that prune parents, trash collection and both profiles.
    #[test]
    fn kept_listing_lines_give_the_same_answers_as_fresh_ones() {
        let tool = |profile: Profile, command: Command| {
            Body::Tool(crate::event::ToolCall {
                root: "/memories".into(),
                profile,
                limits: Limits::default(),
                command,
            })
        };
        let mut fresh = Projection::new(MemKv::default());
        let mut kept = Projection::with_listings(MemKv::default());
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut listed = 0;
        for seq in 1..=3_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let dir = |n: u64| format!("/memories/d{}", n % 4);
            let file = |n: u64| format!("{}/s{}/f{}.md", dir(n), (n >> 3) % 3, (n >> 5) % 5);
            let profile = if rng % 11 == 0 {
                Profile::PythonSdk
            } else {
                Profile::Spec
            };
            let command = match rng % 9 {
                0 | 1 => Command::View {
                    path: if rng % 2 == 0 {
                        "/memories".into()
                    } else {
                        dir(rng >> 8)
                    },
                    view_range: None,
                },
                2 | 3 => Command::Create {
                    path: file(rng >> 8),
                    file_text: "x".repeat(((rng >> 20) % 3000) as usize),
                },
                4 => Command::Insert {
                    path: file(rng >> 8),
                    insert_line: 0,
                    insert_text: "more\n".into(),
                },
                5 => Command::Rename {
                    old_path: file(rng >> 8),
                    new_path: file(rng >> 16),
                },
                6 => Command::Rename {
                    old_path: dir(rng >> 8),
                    new_path: format!("{}/moved", dir(rng >> 16)),
                },
                7 => Command::Delete {
                    path: if rng % 3 == 0 {
                        dir(rng >> 8)
                    } else {
                        file(rng >> 8)
                    },
                },
                _ => Command::Create {
                    path: format!("{}/.hidden/node_modules/n.md", dir(rng >> 8)),
                    file_text: "n".into(),
                },
            };
            let body = tool(profile, command);
            let ours = kept
                .run_call("a", None, &body, Semantics::CURRENT, Seq(seq))
                .expect("kept");
            let theirs = fresh
                .run_call("a", None, &body, Semantics::CURRENT, Seq(seq))
                .expect("fresh");
            assert_eq!(ours, theirs, "seq {seq}: {body:?}");
            listed += usize::from(ours.text.starts_with("Here're"));
        }
        assert!(listed > 300, "only {listed} listings");
        assert_eq!(kept.kv().map, fresh.kv().map);
    }

    /// A temporary sled database (kept alive by the caller) and the index's two trees in it.
    fn temporary_trees() -> (sled::Db, IndexTrees) {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let trees = IndexTrees::new(
            db.open_tree("index").expect("tree"),
            db.open_tree("content").expect("tree"),
        );
        (db, trees)
    }

    /// The writer runs calls over an overlay whose changes reach sled in batches; the verifier
    /// replays into memory. Both keep and evict exactly the same records.
    #[test]
    fn eviction_over_an_overlay_matches_the_replay_in_memory() {
        let (_db, trees) = temporary_trees();
        let tree = trees.index();
        let mut replay = Projection::new(MemKv::default());
        replay.retry_cap = 4;
        let mut pending = crate::kv::Pending::default();
        let write = |pending: &crate::kv::Pending| {
            for (key, value) in pending.writes() {
                match value {
                    Some(value) => tree.insert(key, value).map(|_| ()),
                    None => tree.remove(key).map(|_| ()),
                }
                .expect("write");
            }
        };
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        for seq in 1..=300 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let id = format!("{}", rng % 9);
            let body = view(if rng % 5 == 0 {
                "/memories/x"
            } else {
                "/memories"
            });
            let agent = if rng % 7 == 0 { "b" } else { "a" };
            // Both pools, records moving from the shared one to an agent's.
            let semantics = if rng % 3 == 0 {
                Semantics::V3
            } else {
                Semantics::V4
            };
            let mut live = Projection::new(Overlay::resume(&trees, None, pending));
            live.retry_cap = 4;
            let ours = live
                .run_traced(agent, Some(&id), &body, semantics, None, Seq(seq))
                .expect("run live");
            pending = live.into_inner().into_pending();
            let theirs = replay
                .run_traced(agent, Some(&id), &body, semantics, None, Seq(seq))
                .expect("run replay");
            assert_eq!(ours, theirs, "seq {seq}");
            if seq % 11 == 0 {
                write(&pending);
                pending = crate::kv::Pending::default();
            }
        }
        write(&pending);
        let stored: Vec<(Vec<u8>, Vec<u8>)> = tree
            .iter()
            .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("read"))
            .collect();
        let replayed: Vec<(Vec<u8>, Vec<u8>)> = replay.kv().map.clone().into_iter().collect();
        assert_eq!(stored, replayed);
        // The shared pool and each agent's own hold at most the cap each.
        assert!(replayed.iter().filter(|(k, _)| k[0] == b't').count() <= 4 * 3);
        assert!(replayed.iter().filter(|(k, _)| k[0] == b'T').count() <= 4);
        assert!(replayed.iter().filter(|(k, _)| k[0] == b'V').count() <= 4 * 2);
    }

    #[test]
    fn a_long_change_answer_is_kept_abridged() {
        let short = "File created successfully at: /memories/a";
        assert_eq!(repeat_text(Seq(3), short), short);
        let long = format!(
            "The memory file has been edited.\n{}",
            "x".repeat(RETRY_TEXT_MAX)
        );
        let kept = repeat_text(Seq(3), &long);
        assert!(kept.len() < 1024, "{}", kept.len());
        assert!(
            kept.starts_with("The memory file has been edited.\n[This call was applied as event 3")
        );
    }

    #[test]
    fn a_retry_record_round_trips_and_rejects_garbage() {
        let record = Recorded {
            seq: Seq(7),
            number: 3,
            is_error: false,
            per_agent: true,
            input: EventHash([1; 32]),
            answer: EventHash([2; 32]),
            text: Some("done".into()),
        };
        assert_eq!(Recorded::decode(&record.encode()).expect("decode"), record);
        let read = Recorded {
            text: None,
            is_error: true,
            per_agent: false,
            ..record.clone()
        };
        assert_eq!(Recorded::decode(&read.encode()).expect("decode"), read);
        let mut bad = read.encode();
        bad.push(b'x');
        assert!(Recorded::decode(&bad).is_err());
        let mut flags = record.encode();
        flags[RETRY_FLAGS_AT] = 0x80;
        assert!(Recorded::decode(&flags).is_err());
        assert!(Recorded::decode(&[0; 10]).is_err());
    }

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
