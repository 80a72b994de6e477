//! Memory versions: every event that created, changed (content or path) or deleted a memory,
//! read off a replay of the store's log, so a listing shows what the chain proves rather than
//! what an index holds.
//!
//! The replay follows each memory by identity (the seq of the event that created its file)
//! through renames of the file or of any directory above it: a rename of a directory is a version
//! of every memory under it, a delete of a directory a `deleted` version of each. A change that
//! leaves a memory's path and content as they were makes no version.
//!
//! A version stays a version when a redaction erases its content: an erased record that keeps
//! what its event did ([`crate::model::event::Kept`]) is replayed as that change, with its content a
//! placeholder, and listed as redacted (no content, path or digest; when and by whom it was
//! redacted, from the redaction's own event). So is a later version that only moved that content
//! (its content is the erased one). An event erased with everything it did (a redaction by path
//! or text, or by a build before kept effects) is skipped: its versions are gone from the history.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::memory_store::ids;
use crate::memory_store::objects::{Actor, MemoryVersion};
use crate::model::event::{Body, Event, Seq};
use crate::model::paths::MemPath;
use crate::model::time::utc;
use crate::model::tool::Change;
use crate::model::tool::api::hex;
use crate::store::log::Store;
use crate::store::replay::Replay;

/// What a version records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// The memory was created.
    Created,
    /// Its content, its path, or both changed.
    Modified,
    /// It was deleted.
    Deleted,
}

impl Operation {
    /// Its name in the API.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Modified => "modified",
            Operation::Deleted => "deleted",
        }
    }
}

/// One version of one memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The event that made it.
    pub seq: Seq,
    /// The memory's identity.
    pub memory: Seq,
    /// What it records.
    pub operation: Operation,
    /// The memory's path (the memory tool's) as of this version.
    pub path: MemPath,
    /// The SHA-256 and size of its content as of this version (none for a delete).
    pub content: Option<([u8; 32], u64)>,
    /// When the event was written, in Unix milliseconds.
    pub time_ms: u64,
    /// The agent the event was recorded under.
    pub agent: String,
    /// Whether the event was a write of the memory-stores API (else a memory-tool call).
    pub by_api: bool,
    /// Set when a redaction erased this version's content: the redaction.
    pub redacted: Option<Redaction>,
}

/// The redaction that erased a version's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redaction {
    /// The erased event whose content the version held.
    pub erased: Seq,
    /// When the redaction was recorded, in Unix milliseconds (0 until its event is met).
    pub time_ms: u64,
    /// The agent it was recorded under (empty until its event is met).
    pub by: String,
}

/// The live memories while the log is replayed: path → identity.
#[derive(Default)]
struct Live {
    at: BTreeMap<MemPath, Seq>,
    /// Each memory's last path and content digest, to leave out changes that changed nothing.
    last: BTreeMap<Seq, (MemPath, [u8; 32])>,
}

impl Live {
    fn under(&self, path: &MemPath) -> Vec<(MemPath, Seq)> {
        self.at
            .range(path.clone()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, id)| (p.clone(), *id))
            .collect()
    }
}

/// Every version of the memories under `root` in `store`, oldest first, up to event `to`.
/// `keep` sees each version as it is found and says whether to keep it (so a caller that wants
/// one memory's versions, or one version, holds no others).
pub fn versions(
    store: &Store,
    root: &MemPath,
    to: Seq,
    mut keep: impl FnMut(&Version) -> bool,
) -> Result<Vec<Version>> {
    let mut live = Live::default();
    let mut out = Vec::new();
    let mut replay = Replay::in_memory();
    replay.run(store, to, |tree, event: &Event, traced| {
        let Some(change) = &traced.answer.change else {
            return Ok::<(), crate::Error>(());
        };
        let erased = matches!(event.body, Body::Erased(_)).then_some(event.seq);
        let mut found = Vec::new();
        let moved = |live: &mut Live, from: &MemPath, to: &MemPath| {
            let mut out = Vec::new();
            for (at, id) in live.under(from) {
                live.at.remove(&at);
                let now = at.moved(from, to);
                live.at.insert(now.clone(), id);
                out.push((now, id));
            }
            out
        };
        match change {
            Change::Write { path, .. } => {
                let id = *live.at.entry(path.clone()).or_insert(event.seq);
                found.push((path.clone(), id));
            }
            Change::Rename { from, to } => found = moved(&mut live, from, to),
            Change::Rewrite { from, to, .. } => found = moved(&mut live, from, to),
            Change::Delete { path } => {
                for (at, id) in live.under(path) {
                    live.at.remove(&at);
                    live.last.remove(&id);
                    if at.starts_with(root) && at != *root {
                        let version = Version {
                            seq: event.seq,
                            memory: id,
                            operation: Operation::Deleted,
                            path: at,
                            content: None,
                            time_ms: event.header.time_ms,
                            agent: event.header.agent.clone(),
                            by_api: by_api(event),
                            redacted: erased.map(Redaction::of),
                        };
                        if keep(&version) {
                            out.push(version);
                        }
                    }
                }
            }
            _ => {}
        }
        for (path, id) in found {
            let Some(digest) = crate::model::tool::Tree::sha256(tree, &path)? else {
                continue;
            };
            let size = crate::model::tool::Tree::read(tree, &path)?.map_or(0, |c| c.len());
            // Erased here, or content an erased event wrote and this one only moved.
            let redacted = erased.or(crate::model::tool::Tree::redacted_by(tree, &path)?.map(Seq));
            let same = live.last.get(&id) == Some(&(path.clone(), digest));
            live.last.insert(id, (path.clone(), digest));
            if same || !path.starts_with(root) || path == *root {
                continue;
            }
            let version = Version {
                seq: event.seq,
                memory: id,
                operation: if id == event.seq {
                    Operation::Created
                } else {
                    Operation::Modified
                },
                path,
                content: Some((digest, u64::try_from(size).unwrap_or(u64::MAX))),
                time_ms: event.header.time_ms,
                agent: event.header.agent.clone(),
                by_api: by_api(event),
                redacted: redacted.map(Redaction::of),
            };
            if keep(&version) {
                out.push(version);
            }
        }
        Ok(())
    })?;
    if out.iter().any(|v| v.redacted.is_some()) {
        stamp_redactions(store, &mut out)?;
    }
    Ok(out)
}

/// Fills in when and by whom each redacted version of `out` was redacted, from the redactions'
/// events: read (not replayed) from the first erased event on, which the replay's proof of the
/// chain covered.
fn stamp_redactions(store: &Store, out: &mut [Version]) -> Result<()> {
    let Some(first) = out
        .iter()
        .filter_map(|v| v.redacted.as_ref())
        .map(|r| r.erased)
        .min()
    else {
        return Ok(());
    };
    let mut redactions: BTreeMap<Seq, (u64, String)> = BTreeMap::new();
    for item in store.records(first) {
        let event = Event::decode(&item?.1)?;
        if let Body::Admin(crate::model::policy::AdminCommand::Redact { seqs, .. }) = &event.body {
            for seq in seqs {
                redactions.insert(
                    Seq(*seq),
                    (event.header.time_ms, event.header.agent.clone()),
                );
            }
        }
    }
    for redaction in out.iter_mut().filter_map(|v| v.redacted.as_mut()) {
        if let Some((time_ms, by)) = redactions.get(&redaction.erased) {
            redaction.time_ms = *time_ms;
            redaction.by.clone_from(by);
        }
    }
    Ok(())
}

/// Whether `event` was a write of the memory-stores API (an erased one's record keeps it).
fn by_api(event: &Event) -> bool {
    match &event.body {
        Body::Api(_) => true,
        Body::Erased(erased) => erased.kept.as_ref().is_some_and(|kept| kept.by_api),
        _ => false,
    }
}

impl Redaction {
    fn of(erased: Seq) -> Redaction {
        Redaction {
            erased,
            time_ms: 0,
            by: String::new(),
        }
    }
}

/// The content of each file at `wanted` (seq, path), as it was right after that event: one
/// replay up to the last of them.
pub fn contents_at(
    store: &Store,
    wanted: &[(Seq, MemPath)],
) -> Result<BTreeMap<(Seq, MemPath), String>> {
    let mut out = BTreeMap::new();
    let Some(last) = wanted.iter().map(|(seq, _)| *seq).max() else {
        return Ok(out);
    };
    let mut replay = Replay::in_memory();
    replay.run(store, last, |tree, event: &Event, _| {
        for (seq, path) in wanted.iter().filter(|(seq, _)| *seq == event.seq) {
            if let Some(content) = crate::model::tool::Tree::read(tree, path)? {
                out.insert((*seq, path.clone()), content);
            }
        }
        Ok::<(), crate::Error>(())
    })?;
    Ok(out)
}

impl Version {
    /// The version as the API shows it, in the memory store `store_id` whose memory-tool root is
    /// `root`, with `content` if it is given.
    pub fn object(&self, store_id: &str, root: &MemPath, content: Option<String>) -> MemoryVersion {
        let path = self.path.to_string();
        MemoryVersion {
            kind: "memory_version".into(),
            id: ids::version_id(self.seq, self.memory),
            memory_id: ids::memory_id(self.memory),
            memory_store_id: store_id.to_string(),
            operation: self.operation.name().into(),
            created_at: utc(self.time_ms),
            created_by: Some(if self.by_api {
                Actor::Api {
                    api_key_id: self.agent.clone(),
                }
            } else {
                Actor::Session {
                    session_id: self.agent.clone(),
                }
            }),
            content: content.filter(|_| self.redacted.is_none()),
            content_sha256: self
                .content
                .filter(|_| self.redacted.is_none())
                .map(|(digest, _)| hex(&digest)),
            content_size_bytes: self
                .content
                .filter(|_| self.redacted.is_none())
                .map(|(_, size)| size),
            path: self.redacted.is_none().then(|| {
                path.strip_prefix(&root.to_string())
                    .unwrap_or(&path)
                    .to_string()
            }),
            redacted_at: self.redacted.as_ref().map(|r| utc(r.time_ms)),
            redacted_by: self.redacted.as_ref().map(|r| Actor::Api {
                api_key_id: r.by.clone(),
            }),
        }
    }
}
