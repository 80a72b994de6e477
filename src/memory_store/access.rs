//! What the memory-stores API asks of a store, as typed methods of [`MnemoClient`]: the server's
//! routes reach a store through a client only, and these are the reads (and the one write
//! lookup) its memory routes need beyond a client's own. Each runs under the client's writer
//! lock (so it sees every call answered so far and none half-applied), or, for a read of the
//! versions, on the log and index as written once the calls answered so far are stored, with
//! no lock held (a replay of a long log never holds off the store's writes).

use std::collections::BTreeMap;

use crate::client::MnemoClient;
use crate::error::Result;
use crate::memory_store::objects::{Item, Memory};
use crate::memory_store::reading::{self, Listing};
use crate::memory_store::versions::{Version, contents_at, versions};
use crate::model::event::{Body, Event, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::{Access, Policy};
use crate::model::tool::Tree;
use crate::store::projection::FileEntry;

use crate::memory_store::version_index::{self, Journal, Window};

/// Where a version named by its id is: kept, or erased with everything its event did.
#[derive(Debug)]
pub enum Found {
    /// The version (a redacted one included).
    Version(Version),
    /// Its event was erased with everything it did (a redaction by path or text, or by a build
    /// before redactions kept what an event did): the version is gone.
    ErasedWhole,
    /// The log holds no such version.
    Missing,
}

impl MnemoClient {
    /// A page of the memories (and prefixes) under `root` that `asked` selects, as the API
    /// lists them, and the key of the next page.
    pub(crate) fn memory_page(
        &self,
        root: &MemPath,
        store_id: &str,
        asked: &Listing<'_>,
    ) -> Result<(Vec<Item>, Option<String>)> {
        self.read_local(|store| reading::memories(store, root, store_id, asked))
    }

    /// The memory `created` (its identity) under `root`, as the API shows it, if it is live and
    /// `reader` (an agent; `None`: the operator) may read it.
    pub(crate) fn memory_object(
        &self,
        root: &MemPath,
        store_id: &str,
        created: Seq,
        full: bool,
        reader: Option<&str>,
    ) -> Result<Option<Memory>> {
        self.read_local(|store| reading::memory(store, root, store_id, created, full, reader))
    }

    /// Where the memory `created` is now, if it is live under `root` and `reader` may read it.
    pub(crate) fn locate_memory(
        &self,
        root: &MemPath,
        created: Seq,
        reader: Option<&str>,
    ) -> Result<Option<FileEntry>> {
        self.read_local(|store| reading::locate(store, root, created, reader))
    }

    /// The files under `dir` now, each with its identity and last change.
    pub(crate) fn file_entries(&self, dir: &MemPath) -> Result<Vec<FileEntry>> {
        self.read_local(|store| store.current_index()?.file_entries_under(dir))
    }

    /// The value of the store setting `name`, if an operator set it.
    pub(crate) fn setting(&self, name: &str) -> Result<Option<String>> {
        self.read_local(|store| store.current_index()?.setting(name))
    }

    /// The memory in the way of a write to `target` (under `root`) that was refused at or
    /// before seq `decided`, as `reader` may see it: one at the path or under it (one there
    /// when the write was refused first), else the one file a path through it meets.
    pub(crate) fn memory_in_the_way(
        &self,
        root: &MemPath,
        target: &MemPath,
        reader: Option<&str>,
        decided: Seq,
    ) -> Result<Option<FileEntry>> {
        self.read_local(|store| {
            let index = store.current_index()?;
            let policy: Option<Policy> = reader.map(|_| index.policy()).transpose()?;
            let readable = |entry: &FileEntry| match (&policy, reader) {
                (Some(policy), Some(agent)) => policy.allows(agent, &entry.path, Access::Read),
                _ => true,
            };
            let mut under: Vec<FileEntry> = index
                .file_entries_under(target)?
                .into_iter()
                .filter(|entry| readable(entry))
                .collect();
            if let Some(i) = under.iter().position(|e| e.touched < decided) {
                return Ok(Some(under.swap_remove(i)));
            }
            if let Some(entry) = under.into_iter().next() {
                return Ok(Some(entry));
            }
            let depth = target.segments().count();
            for above in (root.segments().count() + 1..depth).map(|d| target.ancestor(d)) {
                let entries = index.file_entries_under(&above)?;
                if let [entry] = entries.as_slice() {
                    if entry.path == above {
                        return Ok(readable(entry).then(|| entry.clone()));
                    }
                }
            }
            Ok(None)
        })
    }

    /// The body of the call `agent` made under the tool_use id (an API write's
    /// `Idempotency-Key`) `key`, while its retry record is kept.
    pub(crate) fn earlier_call(&self, agent: &str, key: &str) -> Result<Option<Body>> {
        self.read_local(|store| {
            let Some(recorded) = store.current_index()?.recorded(agent, key)? else {
                return Ok(None);
            };
            let Some(bytes) = store.get(recorded.seq)? else {
                return Ok(None);
            };
            Ok(Some(Event::decode(&bytes)?.body))
        })
    }

    /// How many versions the store holds, when its index keeps the version journal.
    pub(crate) fn version_count(&self) -> Result<Option<u64>> {
        self.read_local(version_index::count)
    }

    /// How many memories are live under `root`, and [`version_count`](Self::version_count),
    /// from one read of the current index: what an API create checks against both caps.
    pub(crate) fn memory_and_version_counts(&self, root: &MemPath) -> Result<(usize, Option<u64>)> {
        self.read_local(|store| {
            let index = store.current_index()?;
            Ok((
                index.file_entries_under(root)?.len(),
                version_index::count_in(&index)?,
            ))
        })
    }

    /// Runs `read` on the store as written, once the calls answered so far are stored, holding
    /// no lock; `read` is given the last of those calls' seq.
    fn read_written<T>(
        &self,
        read: impl FnOnce(&crate::store::log::Store, Seq) -> Result<T>,
    ) -> Result<T> {
        let answered = self.head()?.seq;
        self.settle_index()?;
        read(&*self.local_store()?, answered)
    }

    /// A page of the versions of the memories under `root` in `window` that `keep` keeps,
    /// newest first, and whether there are more: read off the version journal, or by a replay
    /// of the log for an index that keeps none.
    pub(crate) fn version_page(
        &self,
        root: &MemPath,
        window: Window,
        keep: impl Fn(&Version) -> bool,
    ) -> Result<(Vec<Version>, bool)> {
        self.read_written(|store, answered| match Journal::through(store, answered)? {
            Some(journal) => journal.page(root, window, &keep),
            None => {
                let end = window.before.map_or(Seq(u64::MAX), |(seq, _)| seq);
                let mut found = versions(store, root, end, |v| {
                    keep(v)
                        && window.memory.is_none_or(|m| v.memory == m)
                        && window
                            .before
                            .is_none_or(|cursor| (v.seq, v.memory) < cursor)
                })?;
                found.sort_by_key(|v| std::cmp::Reverse((v.seq, v.memory)));
                let more = found.len() > window.limit;
                found.truncate(window.limit);
                Ok((found, more))
            }
        })
    }

    /// The version `(seq, memory)` of a memory under `root`.
    pub(crate) fn version_at(&self, root: &MemPath, seq: Seq, memory: Seq) -> Result<Found> {
        self.read_written(|store, answered| {
            let found = match Journal::through(store, answered)? {
                Some(journal) => journal.version(seq, memory)?,
                None => versions(store, root, seq, |v| v.seq == seq && v.memory == memory)?.pop(),
            };
            if let Some(found) = found {
                return Ok(Found::Version(found));
            }
            if let Some(bytes) = store.get(seq)? {
                if let Body::Erased(_) = Event::decode(&bytes)?.body {
                    return Ok(Found::ErasedWhole);
                }
            }
            Ok(Found::Missing)
        })
    }

    /// The content of each file at `wanted` (seq, path) right after that event.
    pub(crate) fn version_contents(
        &self,
        wanted: &[(Seq, MemPath)],
    ) -> Result<BTreeMap<(Seq, MemPath), String>> {
        self.read_written(|store, answered| match Journal::through(store, answered)? {
            Some(journal) => journal.contents(wanted),
            None => contents_at(store, wanted),
        })
    }
}
