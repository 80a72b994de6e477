//! Memories as the API shows them, read from a store's index: each file under the memory tool's
//! root, with its identity, digest, size, times and current version.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::memory_store::ids;
use crate::memory_store::listing::{self, Listed};
use crate::memory_store::objects::{Item, Memory};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::policy::Access;
use crate::model::time::utc;
use crate::model::tool::api::{content_sha256, hex};
use crate::store::kv::KvRead;
use crate::store::log::Store;
use crate::store::projection::{FileEntry, Projection};

/// The path the API names a file at: its path below the memory tool's root.
pub fn api_path(root: &MemPath, file: &MemPath) -> Option<String> {
    let full = file.to_string();
    let rest = full.strip_prefix(&root.to_string())?;
    rest.starts_with('/').then(|| rest.to_string())
}

/// What a listing or retrieval reads of a store besides the index: event times.
struct Times<'a> {
    store: &'a Store,
    known: HashMap<Seq, u64>,
}

impl Times<'_> {
    /// The time of the event at `seq`.
    fn of(&mut self, seq: Seq) -> Result<u64> {
        if let Some(ms) = self.known.get(&seq) {
            return Ok(*ms);
        }
        let ms = self.store.written_event(seq)?.header.time_ms;
        self.known.insert(seq, ms);
        Ok(ms)
    }
}

/// The memory at API path `path`, whose file is `entry`, in the memory store `store_id`.
fn memory_object(
    times: &mut Times<'_>,
    index: &Projection<impl KvRead>,
    store_id: &str,
    path: String,
    entry: &FileEntry,
    full: bool,
) -> Result<Memory> {
    let record = index
        .record(&entry.path)?
        .ok_or_else(|| Error::corrupt(format!("{} left the index mid-read", entry.path)))?;
    Ok(Memory {
        kind: "memory".into(),
        id: ids::memory_id(entry.created),
        memory_store_id: store_id.to_string(),
        path,
        content_sha256: hex(&content_sha256(&record.content)),
        content_size_bytes: entry.bytes,
        content: full.then_some(record.content),
        created_at: utc(times.of(entry.created)?),
        updated_at: utc(times.of(entry.touched)?),
        memory_version_id: ids::version_id(entry.touched, entry.created),
    })
}

/// The file of the memory `created` under `root` in `index`, if it lives and `reader` (when
/// given) may read it.
fn find(
    index: &Projection<impl KvRead>,
    root: &MemPath,
    created: Seq,
    reader: Option<&str>,
) -> Result<Option<FileEntry>> {
    let Some(entry) = index
        .file_entries_under(root)?
        .into_iter()
        .find(|entry| entry.created == created)
    else {
        return Ok(None);
    };
    if let Some(agent) = reader {
        if !crate::model::tool::Tree::policy(index)?.allows(agent, &entry.path, Access::Read) {
            return Ok(None);
        }
    }
    Ok(Some(entry))
}

/// The file of the memory `created` under `root`, if it lives and `reader` (when given) may
/// read it.
#[cfg(feature = "serve")]
pub fn locate(
    store: &Store,
    root: &MemPath,
    created: Seq,
    reader: Option<&str>,
) -> Result<Option<FileEntry>> {
    find(&store.current_index()?, root, created, reader)
}

/// The memory `created` of the memory store `store_id` (the store's memory-tool root `root`),
/// with its content if `full`; `None` if it does not live, or `reader` may not read it.
pub fn memory(
    store: &Store,
    root: &MemPath,
    store_id: &str,
    created: Seq,
    full: bool,
    reader: Option<&str>,
) -> Result<Option<Memory>> {
    let index = store.current_index()?;
    let Some(entry) = find(&index, root, created, reader)? else {
        return Ok(None);
    };
    let Some(path) = api_path(root, &entry.path) else {
        return Ok(None);
    };
    let mut times = Times {
        store,
        known: HashMap::new(),
    };
    memory_object(&mut times, &index, store_id, path, &entry, full).map(Some)
}

/// Which memories a listing shows.
#[derive(Clone, Debug)]
pub struct Listing<'a> {
    /// `/`, or whole segments ending in `/`.
    pub prefix: &'a str,
    /// 0 for every memory, else how many segments below `prefix` before prefixes stand in.
    pub depth: usize,
    /// Only items after this key (a page token's).
    pub after: Option<&'a str>,
    /// At most this many items.
    pub limit: usize,
    /// With content.
    pub full: bool,
    /// Only the memories this agent may read (its grants); every memory when `None`.
    pub reader: Option<&'a str>,
}

/// One page of the memories of the memory store `store_id` (root `root`), and the key after
/// its last item if there are more.
pub fn memories(
    store: &Store,
    root: &MemPath,
    store_id: &str,
    asked: &Listing<'_>,
) -> Result<(Vec<Item>, Option<String>)> {
    let under = MemPath::absolute(&format!("{root}{}", asked.prefix.trim_end_matches('/')))
        .map_err(Error::InvalidArgument)?;
    let index = store.current_index()?;
    let policy = crate::model::tool::Tree::policy(&index)?;
    let files = index
        .file_entries_under(&under)?
        .into_iter()
        .filter(|entry| {
            asked
                .reader
                .is_none_or(|agent| policy.allows(agent, &entry.path, Access::Read))
        })
        .filter_map(|entry| Some((api_path(root, &entry.path)?, entry)));
    let (items, next) = listing::page(files, asked.prefix, asked.depth, asked.after, asked.limit);
    let mut times = Times {
        store,
        known: HashMap::new(),
    };
    let data = items
        .into_iter()
        .map(|item| match item {
            Listed::Memory(path, entry) => {
                memory_object(&mut times, &index, store_id, path, &entry, asked.full)
                    .map(Item::Memory)
            }
            Listed::Prefix(path) => Ok(Item::Prefix {
                kind: "memory_prefix".into(),
                path,
            }),
        })
        .collect::<Result<Vec<Item>>>()?;
    Ok((data, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_are_below_the_root() {
        let root = MemPath::absolute("/memories").expect("root");
        let file = MemPath::absolute("/memories/a/b.md").expect("file");
        assert_eq!(api_path(&root, &file).as_deref(), Some("/a/b.md"));
        let other = MemPath::absolute("/memories-old/b.md").expect("file");
        assert_eq!(api_path(&root, &other), None);
    }
}
