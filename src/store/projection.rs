//! The path index: an inode-style projection of the log that answers the commands.
//!
//! Every directory and file is a node with a never-reused id; directory `/` is node 0. The index is
//! an ordered key-value map of one-letter key kinds (`c` a directory's child, `f` a file's record,
//! `b` a chunk of its content, `a` the applied seq, `t`/`T`/`U`/`V`/`W` retry records, `p`/`P` the
//! policy, `k` tokens, `s` settings, `g` the trash, `L` the layout, and the version journal's
//! keys, [`journal`]); their bytes are written down once, in `docs/formats.md` ("The path index").
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
//! tree then collects up to [`COLLECT_BUDGET`](trash::COLLECT_BUDGET) entries of the trash, lowest directory id first:
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
//! whole up to [`RETRY_TEXT_MAX`](retry_records::RETRY_TEXT_MAX) bytes (longer ones keep their first line and say the rest is
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
//! [`MemKv`](crate::store::kv::MemKv) yields byte-for-byte the stored index (checked by `verify`).
//!
//! **Where each part lives.** This module holds the type, the layout and the applied seq;
//! [`keys`] the node keys and their values; [`nodes`] path walks and implicit directories;
//! [`journal`] the version journal; [`files`] files as listed ([`MemoryRecord`], [`FileEntry`]); [`tree`] the index as the core's
//! `Tree`; [`changes`] applying a change; [`trash`] collecting deleted directories; [`admin`]
//! grants, tokens and settings; [`retry_records`] the records and their pools; [`calls`]
//! running a call, fresh or as a retry; [`content`] file content in chunks; [`listings`] kept
//! listing lines; [`compare`] a replayed index against the stored one.

use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::store::kv::{KvRead, KvWrite};

mod admin;
mod calls;
mod changes;
mod compare;
pub mod content;
mod files;
pub mod journal;
mod keys;
mod listings;
mod nodes;
mod retry_records;
#[cfg(test)]
mod semantics_versions;
mod trash;
mod tree;

#[cfg(feature = "testing")]
pub use calls::Retry;
pub use calls::{Caller, RetryKind, Traced};
pub use compare::describe_key;
pub use files::{FileEntry, MEMORY_TAG, MemoryRecord};
pub use retry_records::RETRY_RECORDS;
#[cfg(feature = "testing")]
pub use retry_records::{RETRY_TEXT_MAX, Recorded};
#[cfg(feature = "testing")]
pub use trash::COLLECT_BUDGET;

use keys::{APPLIED_KEY, LAYOUT_KEY, be_u64};
use listings::Listings;

/// The layout of the index this build writes: 5 keeps the version journal ([`journal`]); 4
/// stamps a rename's seq into the entries it makes; 3 keeps file content in chunks (`b` keys) and
/// bounded retry records (`t`, `T`, `U`); 2 kept content whole under `f` and collects deleted
/// directories lazily (the trash); 1, with no layout key, removed them at once. An index of an
/// older layout is rebuilt from the log when a client opens the store.
pub const INDEX_LAYOUT: u8 = journal::JOURNAL_LAYOUT;

/// The layout before renames stamped their seq into the entries they make: still verified as
/// it is (the verifier re-derives it in that layout), and rebuilt in [`INDEX_LAYOUT`] when a
/// client opens the store. In an index of this layout, a file's [`FileEntry::touched`] is its
/// last content change.
pub const RENAMES_UNSTAMPED: u8 = 3;

/// The path index over a key-value map `K`.
pub struct Projection<K> {
    kv: K,
    /// How many retry records are kept ([`RETRY_RECORDS`]; smaller in unit tests).
    retry_cap: u64,
    /// The layout it writes ([`INDEX_LAYOUT`]; an older one to re-derive an index of that layout).
    layout: u8,
    /// Rendered listing lines kept between calls ([`Projection::with_listings`]).
    listings: Option<Mutex<Listings>>,
    /// In a replay, the files whose content a redaction erased (each with the placeholder an
    /// erased record's kept effect wrote, [`Projection::apply_kept`]), by identity: the SHA-256
    /// the record kept, and the erased event's seq. Empty in a store's live tree.
    placeholders: Placeholders,
    /// Whether and where it writes the version journal ([`journal`]).
    journal: journal::Journal,
}

pub use crate::store::snapshot::Placeholders;

impl<K> Projection<K> {
    /// The placeholders of erased content this replay holds (see [`Projection::apply_kept`]), to
    /// put back with [`Projection::restore_placeholders`] when a change is rolled back.
    pub(crate) fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }

    /// Puts back the placeholders [`Projection::placeholders`] returned.
    pub(crate) fn restore_placeholders(&mut self, placeholders: Placeholders) {
        self.placeholders = placeholders;
    }

    /// Wraps a map holding an index (an empty map is the empty index).
    pub fn new(kv: K) -> Self {
        Projection {
            kv,
            retry_cap: RETRY_RECORDS,
            layout: INDEX_LAYOUT,
            listings: None,
            placeholders: std::collections::BTreeMap::new(),
            journal: journal::Journal::Off,
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
        if layout < journal::JOURNAL_LAYOUT {
            self.journal = journal::Journal::Off;
        }
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

    /// Directory `id`'s entry `from` was renamed `to`: its kept entries follow (see
    /// [`Listings::renamed`]).
    fn renamed_in_listing(&mut self, id: u64, from: &str, to: &str) {
        if let Some(listings) = &mut self.listings {
            listings
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .renamed(id, from, to);
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
}

/// Whether `key` is one of the index's progress keys (the last seq applied and the layout),
/// which a writer of a whole index writes last.
#[cfg(feature = "replicate")]
pub fn is_progress_key(key: &[u8]) -> bool {
    key == APPLIED_KEY || key == LAYOUT_KEY
}

/// The applied seq a write of `value` under `key` records, if `key` is the applied seq's.
pub(crate) fn applied_written(key: &[u8], value: Option<&[u8]>) -> Option<Seq> {
    let value = value.filter(|_| key == APPLIED_KEY)?;
    be_u64(value, "applied seq").ok().map(Seq)
}

impl<K: KvWrite> Projection<K> {
    /// Records that every event up to `seq` is applied.
    pub fn set_applied(&mut self, seq: Seq) {
        if seq == Seq(1) {
            self.kv.set(LAYOUT_KEY, &[self.layout]);
        }
        self.kv.set(APPLIED_KEY, &seq.0.to_be_bytes());
    }
}

/// A temporary sled database (kept alive by the caller) and the index's two trees in it.
#[cfg(test)]
fn temporary_trees() -> (sled::Db, crate::store::kv::IndexTrees) {
    let db = sled::Config::new()
        .temporary(true)
        .open()
        .expect("temporary sled");
    let trees = crate::store::kv::IndexTrees::new(
        db.open_tree("index").expect("tree"),
        db.open_tree("content").expect("tree"),
    );
    (db, trees)
}
