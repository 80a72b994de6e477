//! The version journal: what each event did to a memory, written into the index beside the change
//! itself, so that a page of a store's memory versions reads the page's entries rather than a
//! replay of the log. It is part of the index (a pure function of the log, checked by `verify`),
//! in index layouts from [`JOURNAL_LAYOUT`] on.
//!
//! Its keys: `v` (a [`Record`] per event that changed a file or directory), `m` (a memory's own
//! steps), `w` (directory moves and deletes), `h` (the live memory's digest), `r` (erased seq →
//! its redaction) and `j` (the count of `m` entries); their bytes are written down once, in
//! `docs/formats.md` ("The path index").
//!
//! A memory is named by its identity, the seq of the event that created its file. A directory's
//! move or delete is one record whatever lies under it (the index moves one entry), so its
//! versions are spelled out by the reader ([`crate::memory_store::versions`]), which follows the
//! records in order. `v`, `m` and `w` grow with the log; the verifier checks them event by event
//! against the stored index ([`Journal::Hold`]) instead of holding them, and holds only `h` and
//! `r`, which grow with the live memories and the redactions.

use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::Projection;
use super::keys::be_u64;
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::tool::{Change, NodeKind, Tree};
use crate::store::kv::{KvRead, KvWrite};

/// The first index layout that keeps the journal.
pub const JOURNAL_LAYOUT: u8 = 5;

/// The first byte of a `v` key.
pub const RECORD_PREFIX: u8 = b'v';
/// The first byte of an `m` key.
pub const MEMORY_PREFIX: u8 = b'm';
/// The first byte of a `w` key.
pub const DIR_PREFIX: u8 = b'w';
/// The first byte of an `h` key.
const DIGEST_PREFIX: u8 = b'h';
/// The first byte of an `r` key.
const REDACTION_PREFIX: u8 = b'r';
/// The key of the count of `m` entries (its one byte is its family's).
const COUNT_KEY: &[u8] = &[COUNT_PREFIX];
/// The family of the count's key.
const COUNT_PREFIX: u8 = b'j';

/// Every key family of the journal.
pub const FAMILIES: [u8; 6] = [
    DIGEST_PREFIX,
    COUNT_PREFIX,
    MEMORY_PREFIX,
    REDACTION_PREFIX,
    RECORD_PREFIX,
    DIR_PREFIX,
];

/// The journal's key families that grow with the log (`v`, `m`, `w`), which a verifier checks
/// event by event rather than holding in memory.
pub const STREAMED: [u8; 3] = [MEMORY_PREFIX, RECORD_PREFIX, DIR_PREFIX];

/// What the journal records of one event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the event was written, in Unix milliseconds.
    pub time_ms: u64,
    /// The agent it was recorded under.
    pub agent: String,
    /// Whether it was a write of the memory-stores API (else a memory-tool call).
    pub by_api: bool,
    /// Whether a redaction erased the event (its kept effect was applied, not its call).
    pub erased: bool,
    /// What it did.
    pub step: Step,
}

/// What one event did to the files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// A file was created, written, or moved (and perhaps written): a version of its memory.
    File {
        /// The memory's identity.
        memory: u64,
        /// Where the file is now.
        path: String,
        /// Where it was, when the event moved it.
        from: Option<String>,
        /// SHA-256 of its content now.
        sha256: [u8; 32],
        /// Its length in bytes.
        size: u64,
        /// The erased event whose content it holds, when a redaction erased that content.
        redacted: Option<u64>,
    },
    /// A file was deleted.
    FileDeleted {
        /// The memory's identity.
        memory: u64,
        /// Where it was.
        path: String,
    },
    /// A directory moved: a version of every memory under it.
    DirMoved {
        /// Where it was.
        from: String,
        /// Where it is now.
        to: String,
    },
    /// A directory was deleted: a `deleted` version of every memory under it.
    DirDeleted {
        /// Where it was.
        path: String,
    },
}

impl Record {
    /// The record as the index stores it.
    pub fn encode(&self) -> Vec<u8> {
        crate::model::codec::encode(self)
    }

    /// A record the index stored.
    #[cfg(any(feature = "serve", feature = "testing"))]
    pub fn decode(bytes: &[u8]) -> Result<Record> {
        crate::model::codec::decode(bytes, "a version journal record")
    }
}

/// Who made an event, and when: what the journal records beside what the event did.
#[derive(Clone, Copy, Debug)]
pub struct Stamp<'a> {
    /// The agent it was recorded under.
    pub agent: &'a str,
    /// When it was written, in Unix milliseconds.
    pub time_ms: u64,
    /// Whether it was a write of the memory-stores API.
    pub by_api: bool,
    /// Whether a redaction erased it.
    pub erased: bool,
}

/// Whether and where a projection writes the journal.
#[derive(Debug, Default)]
pub(crate) enum Journal {
    /// Not at all: a replay of the past, which never becomes a stored index.
    #[default]
    Off,
    /// Into the index: the store's own index, and its recovery.
    Write,
    /// `h` and `r` into the index, `v`, `m` and `w` into this list until the verifier takes them
    /// ([`Projection::take_journal`]) to check against the stored index.
    Hold(Mutex<Vec<(Vec<u8>, Vec<u8>)>>),
}

/// The `key` of family `prefix` and the ids `ids` (each u64 BE).
fn key(prefix: u8, ids: &[u64]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 8 * ids.len());
    k.push(prefix);
    for id in ids {
        k.extend_from_slice(&id.to_be_bytes());
    }
    k
}

/// The `v` key of event `seq`.
pub fn record_key(seq: u64) -> Vec<u8> {
    key(RECORD_PREFIX, &[seq])
}

/// The `m` key of `memory`'s version at `seq`.
pub fn memory_key(memory: u64, seq: u64) -> Vec<u8> {
    key(MEMORY_PREFIX, &[memory, seq])
}

/// What the journal needs to know of a path before a change: what is there.
#[derive(Clone, Copy, Debug)]
pub(super) enum Before {
    /// Nothing (or the journal is off).
    Nothing,
    /// A file, of this memory.
    File(u64),
    /// A directory.
    Dir,
}

impl<K> Projection<K> {
    /// This projection writes the journal into its index (an index of [`JOURNAL_LAYOUT`] or
    /// later): the store's own index and its recovery.
    pub fn journaled(mut self) -> Self {
        if self.layout >= JOURNAL_LAYOUT {
            self.journal = Journal::Write;
        }
        self
    }

    /// This projection writes the journal's `h` and `r` keys into its index and holds its `v`,
    /// `m` and `w` entries for [`Projection::take_journal`]: the verifier's replay.
    pub fn journal_held(mut self) -> Self {
        if self.layout >= JOURNAL_LAYOUT {
            self.journal = Journal::Hold(Mutex::new(Vec::new()));
        }
        self
    }

    /// The `v`, `m` and `w` entries written since the last call, in the order written (for a
    /// projection made with [`Projection::journal_held`]; empty otherwise).
    pub fn take_journal(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        match &self.journal {
            Journal::Hold(held) => {
                std::mem::take(&mut *held.lock().unwrap_or_else(PoisonError::into_inner))
            }
            _ => Vec::new(),
        }
    }

    pub(super) fn journal_on(&self) -> bool {
        !matches!(self.journal, Journal::Off)
    }
}

impl<K: KvRead> Projection<K> {
    /// What is at the path `change` removes or moves (or writes), for [`Projection::journal`].
    pub(super) fn journal_before(&self, change: &Change) -> Result<Before> {
        if !self.journal_on() {
            return Ok(Before::Nothing);
        }
        let path = match change {
            Change::Write { path, .. } | Change::Delete { path } => path,
            Change::Rename { from, .. } | Change::Rewrite { from, .. } => from,
            _ => return Ok(Before::Nothing),
        };
        Ok(match self.lookup(path)? {
            Some((NodeKind::File, id)) => Before::File(self.file_head(id)?.created),
            Some((NodeKind::Dir, _)) => Before::Dir,
            None => Before::Nothing,
        })
    }

    /// The content SHA-256 and length of the live `memory`, as the journal keeps them.
    pub fn memory_digest(&self, memory: u64) -> Result<Option<([u8; 32], u64)>> {
        let Some(value) = self.kv.get(&key(DIGEST_PREFIX, &[memory]))? else {
            return Ok(None);
        };
        decode_digest(&value).map(Some)
    }

    /// The redaction that erased event `erased`, if one did (in an index that keeps the journal).
    #[cfg(any(feature = "serve", feature = "testing"))]
    pub fn redaction_of(&self, erased: Seq) -> Result<Option<Seq>> {
        self.kv
            .get(&key(REDACTION_PREFIX, &[erased.0]))?
            .map(|v| be_u64(&v, "redaction seq").map(Seq))
            .transpose()
    }

    /// How many versions the memories' own steps made (a file's write, move or delete; a
    /// directory's move or delete makes more, which the journal does not count).
    pub fn file_versions(&self) -> Result<u64> {
        self.kv
            .get(COUNT_KEY)?
            .map_or(Ok(0), |v| be_u64(&v, "version count"))
    }
}

fn decode_digest(value: &[u8]) -> Result<([u8; 32], u64)> {
    if value.len() != 40 {
        return Err(Error::corrupt(
            "a memory's content digest in the index is not 40 bytes",
        ));
    }
    let mut sha = [0u8; 32];
    sha.copy_from_slice(&value[..32]);
    Ok((sha, be_u64(&value[32..], "content length")?))
}

fn encode_digest(sha256: &[u8; 32], size: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(sha256);
    v.extend_from_slice(&size.to_be_bytes());
    v
}

impl<K: KvWrite> Projection<K> {
    /// Writes one journal entry: into the index, or held for the verifier.
    fn put_journal(&mut self, key: Vec<u8>, value: Vec<u8>) {
        match &self.journal {
            Journal::Off => {}
            Journal::Write => self.kv.insert(key, value),
            Journal::Hold(held) => held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((key, value)),
        }
    }

    /// A file of `memory` left the tree: its digest goes.
    pub(super) fn forget_digest(&mut self, memory: u64) {
        if self.journal_on() {
            self.kv.remove(&key(DIGEST_PREFIX, &[memory]));
        }
    }

    /// Records that the redaction at `seq` erased the events `erased`.
    pub(super) fn journal_redaction(&mut self, erased: &[u64], seq: Seq) {
        if self.journal_on() {
            for named in erased {
                self.kv.insert(
                    key(REDACTION_PREFIX, &[*named]),
                    seq.0.to_be_bytes().to_vec(),
                );
            }
        }
    }

    /// Records what `change`, just applied as event `seq` by `stamp`, did to the memories, given
    /// what was at its path before ([`Projection::journal_before`]).
    pub(super) fn journal(
        &mut self,
        change: &Change,
        before: Before,
        seq: Seq,
        stamp: Stamp<'_>,
    ) -> Result<()> {
        if !self.journal_on() {
            return Ok(());
        }
        let step = match (change, before) {
            (Change::Write { path, content }, before) => {
                let Some(step) = self.file_step(path, None, Some(content), before)? else {
                    return Ok(());
                };
                step
            }
            (Change::Rewrite { from, to, content }, before) => self
                .file_step(to, Some(from), Some(content), before)?
                .ok_or_else(|| Error::corrupt("a move with a write made no version"))?,
            (Change::Rename { from, to }, Before::File(_)) => self
                .file_step(to, Some(from), None, before)?
                .ok_or_else(|| Error::corrupt("a move made no version"))?,
            (Change::Rename { from, to }, Before::Dir) => Step::DirMoved {
                from: from.to_string(),
                to: to.to_string(),
            },
            (Change::Delete { path }, Before::File(memory)) => Step::FileDeleted {
                memory,
                path: path.to_string(),
            },
            (Change::Delete { path }, Before::Dir) => Step::DirDeleted {
                path: path.to_string(),
            },
            _ => return Ok(()),
        };
        match &step {
            Step::File { memory, .. } | Step::FileDeleted { memory, .. } => {
                self.put_journal(memory_key(*memory, seq.0), Vec::new());
                let count = self.file_versions()? + 1;
                self.kv
                    .insert(COUNT_KEY.to_vec(), count.to_be_bytes().to_vec());
            }
            Step::DirMoved { .. } | Step::DirDeleted { .. } => {
                self.put_journal(key(DIR_PREFIX, &[seq.0]), Vec::new());
            }
        }
        let record = Record {
            time_ms: stamp.time_ms,
            agent: stamp.agent.to_string(),
            by_api: stamp.by_api,
            erased: stamp.erased,
            step,
        };
        self.put_journal(record_key(seq.0), record.encode());
        Ok(())
    }

    /// The version a write or move of the file now at `path` makes (`from`: where it was moved
    /// from; `content`: what was written), keeping its digest; `None` for a write that left its
    /// content as it was.
    fn file_step(
        &mut self,
        path: &MemPath,
        from: Option<&MemPath>,
        content: Option<&String>,
        before: Before,
    ) -> Result<Option<Step>> {
        let memory = self.created(path)?.ok_or_else(|| {
            Error::corrupt(format!("the journal found no file at {path} after a write"))
        })?;
        let placeholder = self.placeholders.get(&memory).copied();
        let (sha256, size) = match (placeholder, content) {
            (Some((sha256, _)), Some(content)) => (sha256, content.len() as u64),
            (None, Some(content)) => (
                crate::model::tool::api::content_sha256(content),
                content.len() as u64,
            ),
            (_, None) => match self.memory_digest(memory)? {
                Some(found) => found,
                None => {
                    let content = self.read(path)?.unwrap_or_default();
                    (
                        crate::model::tool::api::content_sha256(&content),
                        content.len() as u64,
                    )
                }
            },
        };
        let digest = encode_digest(&sha256, size);
        if from.is_none() && matches!(before, Before::File(m) if m == memory) {
            let kept = self.kv.get(&key(DIGEST_PREFIX, &[memory]))?;
            if kept.as_deref() == Some(digest.as_slice()) {
                return Ok(None);
            }
        }
        self.kv.insert(key(DIGEST_PREFIX, &[memory]), digest);
        Ok(Some(Step::File {
            memory,
            path: path.to_string(),
            from: from.map(ToString::to_string),
            sha256,
            size,
            redacted: placeholder.map(|(_, seq)| seq),
        }))
    }
}
