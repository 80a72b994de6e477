//! Memory versions read off the index's version journal ([`crate::store::projection::journal`]): a page
//! of versions reads the page's journal records, newest first, not a replay of the log.
//!
//! A file's own step (a write, a move, a delete) is one record naming its memory. A directory's
//! move or delete is one record whatever lies under it, so its versions (one per memory under
//! it) are spelled out here, by following the records in order with the live memories by path
//! ([`Expanded`]): kept in memory by the open store, brought forward only as far as the last
//! directory record, and only when a store has one (a store the API alone wrote has none). That
//! pass costs the records since the last one, once per open store.
//!
//! [`crate::memory_store::versions::versions`], a replay of the log, is the model this module is
//! tested against, and what reads an index of a layout before the journal.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::memory_store::versions::{Operation, Redaction, Version};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::store::kv::KvRead;
use crate::store::log::Store;
use crate::store::projection::Projection;
use crate::store::projection::journal::{
    DIR_PREFIX, JOURNAL_LAYOUT, MEMORY_PREFIX, RECORD_PREFIX, Record, Step, record_key,
};

/// A live memory, as the expansion of directory records follows it.
#[derive(Clone, Debug)]
struct Held {
    memory: u64,
    sha256: [u8; 32],
    size: u64,
    redacted: Option<u64>,
}

/// One memory's version made by a directory's move or delete.
#[derive(Clone, Debug)]
struct Row {
    memory: u64,
    path: String,
    /// SHA-256 and size of its content (none for a delete).
    content: Option<([u8; 32], u64)>,
    redacted: Option<u64>,
}

/// The versions directory records made, spelled out up to `applied`, with the live memories by
/// path as of then. An open store keeps one ([`Store::derived`]); a store opened anew (a
/// redaction reopens it) starts from nothing.
#[derive(Default)]
struct Expanded {
    applied: u64,
    live: BTreeMap<String, Held>,
    rows: BTreeMap<u64, Vec<Row>>,
    by_memory: BTreeMap<u64, Vec<u64>>,
    count: u64,
}

impl Expanded {
    /// The live memories under the directory `dir`, taken out of the map.
    fn take_under(&mut self, dir: &str) -> Vec<(String, Held)> {
        let start = format!("{dir}/");
        let keys: Vec<String> = self
            .live
            .range(start.clone()..)
            .take_while(|(path, _)| path.starts_with(&start))
            .map(|(path, _)| path.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| self.live.remove(&key).map(|held| (key, held)))
            .collect()
    }

    /// Follows the record of event `seq`.
    fn follow(&mut self, seq: u64, record: &Record) {
        let erased = record.erased.then_some(seq);
        let mut rows = Vec::new();
        match &record.step {
            Step::File {
                memory,
                path,
                from,
                sha256,
                size,
                redacted,
            } => {
                if let Some(from) = from {
                    self.live.remove(from);
                }
                self.live.insert(
                    path.clone(),
                    Held {
                        memory: *memory,
                        sha256: *sha256,
                        size: *size,
                        redacted: *redacted,
                    },
                );
            }
            Step::FileDeleted { path, .. } => {
                self.live.remove(path);
            }
            Step::DirMoved { from, to } => {
                for (path, held) in self.take_under(from) {
                    let now = format!("{to}{}", &path[from.len()..]);
                    rows.push(Row {
                        memory: held.memory,
                        path: now.clone(),
                        content: Some((held.sha256, held.size)),
                        redacted: erased.or(held.redacted),
                    });
                    self.live.insert(now, held);
                }
            }
            Step::DirDeleted { path } => {
                for (at, held) in self.take_under(path) {
                    rows.push(Row {
                        memory: held.memory,
                        path: at,
                        content: None,
                        redacted: erased,
                    });
                }
            }
        }
        if !rows.is_empty() {
            for row in &rows {
                self.by_memory.entry(row.memory).or_default().push(seq);
            }
            self.count += rows.len() as u64;
            self.rows.insert(seq, rows);
        }
        self.applied = seq;
    }
}

/// The seq a journal key of one id names (the key's bytes after its family byte).
fn seq_of(key: &[u8], at: usize) -> Result<u64> {
    key.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| Error::corrupt("a version journal key is not the length its family has"))
}

/// How many versions the memories' own steps made in `store` (a file's write, move or delete:
/// every version the API's writes make), as of the log's end, when its index keeps the journal.
/// The versions a memory-tool directory's move or delete made are not counted: spelling them
/// out reads every record before them, which no write should wait for.
pub fn count(store: &Store) -> Result<Option<u64>> {
    count_in(&store.current_index()?)
}

/// [`count`] in `index`, a store's current index.
pub fn count_in(index: &Projection<impl KvRead>) -> Result<Option<u64>> {
    if index.layout()? < JOURNAL_LAYOUT {
        return Ok(None);
    }
    index.file_versions().map(Some)
}

/// A store's version journal, as its stored index holds it.
pub struct Journal<'a> {
    store: &'a Store,
    tree: sled::Tree,
}

/// What a listing asks for besides its filter: the versions before `before` ((seq, memory),
/// newest first), at most `limit` of them, of one memory if `memory` is set.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Only versions older than this (seq, memory).
    pub before: Option<(Seq, Seq)>,
    /// Only this memory's.
    pub memory: Option<Seq>,
    /// How many to return (one more is looked for, to say whether there are more).
    pub limit: usize,
}

impl<'a> Journal<'a> {
    /// The journal of `store`, when its index keeps one and has applied the whole log (a store
    /// served by this build, or opened for writing by it); `None` otherwise (read it by replay).
    #[cfg(feature = "testing")]
    pub fn of(store: &'a Store) -> Result<Option<Journal<'a>>> {
        Journal::through(store, store.last_seq()?)
    }

    /// The journal of `store`, when its index keeps one and has applied every event up to
    /// `seq` (a writer may be appending more meanwhile: what a listing shows is the index as of
    /// the seq it applied, every call answered before the listing began included).
    pub fn through(store: &'a Store, seq: Seq) -> Result<Option<Journal<'a>>> {
        let index = store.index();
        if index.layout()? < JOURNAL_LAYOUT || index.applied()? < seq {
            return Ok(None);
        }
        Ok(Some(Journal {
            store,
            tree: store.index_tree().index().clone(),
        }))
    }

    fn record(&self, seq: u64) -> Result<Option<Record>> {
        self.tree
            .get(record_key(seq))?
            .map(|v| Record::decode(&v))
            .transpose()
    }

    /// The seq of the last directory record at or before `to`, if any.
    fn last_dir_record(&self, to: u64) -> Result<Option<u64>> {
        let mut end = vec![DIR_PREFIX];
        end.extend_from_slice(&to.to_be_bytes());
        match self.tree.range(vec![DIR_PREFIX]..=end).next_back() {
            Some(item) => Ok(Some(seq_of(&item?.0, 1)?)),
            None => Ok(None),
        }
    }

    /// Runs `with` on the expansion of directory records, brought forward to cover every
    /// directory record at or before `to`.
    fn expanded<T>(&self, to: u64, with: impl FnOnce(&Expanded) -> T) -> Result<T> {
        let last = self.last_dir_record(to)?;
        self.store.derived(|expanded: &mut Expanded| {
            if let Some(last) = last.filter(|last| *last > expanded.applied) {
                for item in self
                    .tree
                    .range(record_key(expanded.applied + 1)..=record_key(last))
                {
                    let (key, value) = item?;
                    expanded.follow(seq_of(&key, 1)?, &Record::decode(&value)?);
                }
            }
            Ok(with(expanded))
        })
    }

    /// The versions event `seq` made (`record` is its journal record), newest memory first.
    fn versions_at(&self, seq: u64, record: &Record) -> Result<Vec<Version>> {
        let version = |memory: u64,
                       path: &str,
                       content: Option<([u8; 32], u64)>,
                       redacted: Option<u64>,
                       operation: Operation|
         -> Result<Version> {
            Ok(Version {
                seq: Seq(seq),
                memory: Seq(memory),
                operation,
                path: MemPath::absolute(path).map_err(|why| {
                    Error::corrupt(format!(
                        "the version journal names the path {path:?} at event {seq}: {why}"
                    ))
                })?,
                content,
                time_ms: record.time_ms,
                agent: record.agent.clone(),
                by_api: record.by_api,
                redacted: redacted.map(|erased| Redaction {
                    erased: Seq(erased),
                    time_ms: 0,
                    by: String::new(),
                }),
            })
        };
        let erased = record.erased.then_some(seq);
        let mut out = match &record.step {
            Step::File {
                memory,
                path,
                sha256,
                size,
                redacted,
                ..
            } => vec![version(
                *memory,
                path,
                Some((*sha256, *size)),
                erased.or(*redacted),
                if *memory == seq {
                    Operation::Created
                } else {
                    Operation::Modified
                },
            )?],
            Step::FileDeleted { memory, path } => {
                vec![version(*memory, path, None, erased, Operation::Deleted)?]
            }
            Step::DirMoved { .. } | Step::DirDeleted { .. } => {
                let rows = self.expanded(seq, |e| e.rows.get(&seq).cloned().unwrap_or_default())?;
                rows.iter()
                    .map(|row| {
                        version(
                            row.memory,
                            &row.path,
                            row.content,
                            row.redacted,
                            if row.content.is_some() {
                                Operation::Modified
                            } else {
                                Operation::Deleted
                            },
                        )
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        };
        out.sort_by_key(|v| std::cmp::Reverse(v.memory));
        Ok(out)
    }

    /// One page of the versions of the memories under `root`, newest first, that `keep` keeps,
    /// in `window`; and whether there are more. Each redacted version says when and by whom.
    pub fn page(
        &self,
        root: &MemPath,
        window: Window,
        mut keep: impl FnMut(&Version) -> bool,
    ) -> Result<(Vec<Version>, bool)> {
        let end = window.before.map_or(u64::MAX, |(seq, _)| seq.0);
        let mut out = Vec::new();
        let mut take = |found: Vec<Version>, out: &mut Vec<Version>| {
            for v in found {
                let in_window = window
                    .before
                    .is_none_or(|cursor| (v.seq, v.memory) < cursor)
                    && window.memory.is_none_or(|m| v.memory == m)
                    && v.path.starts_with(root)
                    && v.path != *root;
                if in_window && keep(&v) {
                    out.push(v);
                }
            }
            out.len() > window.limit
        };
        match window.memory {
            Some(memory) => {
                for seq in self.seqs_of(memory.0, end)? {
                    if let Some(record) = self.record(seq)? {
                        if take(self.versions_at(seq, &record)?, &mut out) {
                            break;
                        }
                    }
                }
            }
            None => {
                for item in self.tree.range(vec![RECORD_PREFIX]..=record_key(end)).rev() {
                    let (key, value) = item?;
                    let seq = seq_of(&key, 1)?;
                    if take(self.versions_at(seq, &Record::decode(&value)?)?, &mut out) {
                        break;
                    }
                }
            }
        }
        let more = out.len() > window.limit;
        out.truncate(window.limit);
        self.stamp(&mut out)?;
        Ok((out, more))
    }

    /// The version `(seq, memory)`, if the journal holds it (a redacted one included).
    pub fn version(&self, seq: Seq, memory: Seq) -> Result<Option<Version>> {
        let Some(record) = self.record(seq.0)? else {
            return Ok(None);
        };
        let mut found: Vec<Version> = self
            .versions_at(seq.0, &record)?
            .into_iter()
            .filter(|v| v.memory == memory)
            .collect();
        self.stamp(&mut found)?;
        Ok(found.pop())
    }

    /// The seqs of `memory`'s versions at or before `end`, newest first: its own steps (`m`
    /// keys) and the directory records that moved or deleted it.
    fn seqs_of(&self, memory: u64, end: u64) -> Result<Vec<u64>> {
        let mut start = vec![MEMORY_PREFIX];
        start.extend_from_slice(&memory.to_be_bytes());
        let mut last = start.clone();
        last.extend_from_slice(&end.to_be_bytes());
        let mut seqs = Vec::new();
        for item in self.tree.range(start..=last) {
            seqs.push(seq_of(&item?.0, 9)?);
        }
        let moved = self.expanded(end, |e| e.by_memory.get(&memory).cloned())?;
        seqs.extend(moved.unwrap_or_default().into_iter().filter(|s| *s <= end));
        seqs.sort_unstable_by(|a, b| b.cmp(a));
        seqs.dedup();
        Ok(seqs)
    }

    /// Fills in when and by whom each redacted version in `found` was redacted, from the
    /// redaction's own event (the index names it).
    fn stamp(&self, found: &mut [Version]) -> Result<()> {
        let index = self.store.index();
        for redaction in found.iter_mut().filter_map(|v| v.redacted.as_mut()) {
            if let Some(by) = index.redaction_of(redaction.erased)? {
                let event = self.store.written_event(by)?;
                redaction.time_ms = event.header.time_ms;
                redaction.by = event.header.agent;
            }
        }
        Ok(())
    }

    /// The content of each file at `wanted` (seq, path) as it was right after that event: an
    /// API write's from its own event (it carries the whole content), the rest from one replay up
    /// to the last of them.
    pub fn contents(&self, wanted: &[(Seq, MemPath)]) -> Result<BTreeMap<(Seq, MemPath), String>> {
        self.store.prove()?;
        let mut out = BTreeMap::new();
        let mut rest = Vec::new();
        for (seq, path) in wanted {
            let event = self.store.written_event(*seq)?;
            match event.body {
                crate::model::tool::Body::Api(
                    crate::model::tool::api::ApiWrite::Create { content, .. }
                    | crate::model::tool::api::ApiWrite::Update {
                        content: Some(content),
                        ..
                    },
                ) => {
                    out.insert((*seq, path.clone()), content);
                }
                _ => rest.push((*seq, path.clone())),
            }
        }
        out.extend(crate::memory_store::versions::contents_at(
            self.store, &rest,
        )?);
        Ok(out)
    }
}
