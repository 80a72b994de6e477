//! A memory store moved whole: the memories and every version, as the API's JSON objects, so a
//! hosted store can be brought into Mnemo and a Mnemo store taken back (`mnemo export --format
//! memory-stores`, `mnemo import --format memory-stores`).
//!
//! An import replays the versions, oldest first, as the API's writes (each one chained event,
//! recorded under the importing agent): a `created` version creates its memory, a `modified` one
//! sets its content and path, a `deleted` one deletes it. Then each memory of the listing is
//! brought to its listed path and content, where the versions did not get it there (a hosted
//! store keeps versions only for a while, and a redacted version has no content to replay). The
//! events carry the import's time, not the versions' own.

use std::collections::BTreeMap;
#[cfg(unix)]
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::memory_store::objects::{Item, Memory, MemoryVersion};
use crate::memory_store::reading::{self, Listing};
use crate::memory_store::{path_rules, versions};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::time::parse_rfc3339;
use crate::model::tool::Body;
use crate::model::tool::api::ApiWrite;

/// What `format` says an export file is.
pub(crate) const FORMAT: &str = "memory-stores";

/// The file an export writes in its directory, and an import reads.
pub const FILE_NAME: &str = "memory-store.json";

/// The largest export file [`read_file`] reads (the API caps a store at thousands of memories
/// of 100 kB, and their versions).
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// Writes `exported` as `dir/`[`FILE_NAME`] (`mnemo export --format memory-stores`), made anew
/// and synced; `dir` must be new (it is made) or empty. Returns the file's path. The error says
/// what is in the way.
pub(crate) fn write_file(dir: &Path, exported: &Exported) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write;
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "{} is not empty; give a new or empty directory",
                        dir.display()
                    ),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)?,
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", dir.display()),
            ));
        }
    }
    let path = dir.join(FILE_NAME);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    serde_json::to_writer_pretty(&mut file, exported)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    Ok(path)
}

/// Reads `dir/`[`FILE_NAME`] as an export (`mnemo import --format memory-stores`): a regular
/// file (a link or a pipe at its name is refused unopened) of at most [`MAX_FILE_BYTES`]. The
/// error says what is wrong with it.
pub(crate) fn read_file(dir: &Path) -> std::io::Result<Exported> {
    let path = dir.join(FILE_NAME);
    let refused =
        |kind, why: String| std::io::Error::new(kind, format!("{} {why}", path.display()));
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(refused(
            std::io::ErrorKind::InvalidInput,
            "is not a regular file".into(),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        let why = format!("is larger than {MAX_FILE_BYTES} bytes");
        return Err(refused(std::io::ErrorKind::InvalidInput, why));
    }
    let bytes = std::fs::read(&path)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let why = format!(
            "is not a memory-stores export ({e}); write one with `mnemo export --format memory-stores`"
        );
        refused(std::io::ErrorKind::InvalidData, why)
    })
}

/// A memory store, whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exported {
    /// `memory-stores`.
    pub format: String,
    /// The store's id.
    pub memory_store_id: String,
    /// Every live memory, with its content (`view=full`).
    pub memories: Vec<Memory>,
    /// Every version, oldest first, with its content where it has one.
    pub memory_versions: Vec<MemoryVersion>,
}

/// Everything the store `client` has open holds under `root`, as the memory store `store_id`
/// (a store open in this process, or a read-only copy; a served store is [`Error::NotLocal`]).
pub fn export(client: &MnemoClient, root: &MemPath, store_id: &str) -> Result<Exported> {
    client.settle_index()?;
    let store = client.local_store()?;
    let store = &*store;
    let mut memories = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let asked = Listing {
            prefix: "/",
            depth: 0,
            after: after.as_deref(),
            limit: 1000,
            full: true,
            reader: None,
        };
        let (items, next) = reading::memories(store, root, store_id, &asked)?;
        memories.extend(items.into_iter().filter_map(|item| match item {
            Item::Memory(memory) => Some(memory),
            Item::Prefix { .. } => None,
        }));
        match next {
            Some(key) => after = Some(key),
            None => break,
        }
    }
    let found = versions::versions(store, root, Seq(u64::MAX), |_| true)?;
    let wanted: Vec<(Seq, MemPath)> = found
        .iter()
        .filter(|v| v.content.is_some())
        .map(|v| (v.seq, v.path.clone()))
        .collect();
    let mut contents = versions::contents_at(store, &wanted)?;
    let memory_versions = found
        .iter()
        .map(|v| {
            let content = contents.remove(&(v.seq, v.path.clone()));
            v.object(store_id, root, content)
        })
        .collect();
    Ok(Exported {
        format: FORMAT.into(),
        memory_store_id: store_id.to_string(),
        memories,
        memory_versions,
    })
}

/// A memory store moved whole as the memory-stores API's JSON (`DIR/memory-store.json`): every
/// memory and every version of a store, made from a store ([`of`](Self::of)) or read from a
/// file ([`read`](Self::read)), written out ([`write`](Self::write)) or imported into a store
/// ([`import_into`](Self::import_into)). `mnemo export|import --format memory-stores`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryStoreExport(Exported);

impl MemoryStoreExport {
    /// Everything the store at `db` holds under the memory-tool root `root`, read from a
    /// private read-only copy (a store a server holds is [`Error::NotLocal`]). Its id is
    /// `memstore_` and the directory's name where that is a store name (a store of a data
    /// directory), else the directory's name as it is.
    pub fn of(db: &Path, root: &MemPath) -> Result<MemoryStoreExport> {
        let name = db
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = match crate::store::data_dir::check_store_name(&name) {
            Ok(()) => super::ids::store_id(&name),
            Err(_) => name,
        };
        let reader = MnemoClient::builder(db).read_only().open()?;
        export(&reader, root, &id).map(MemoryStoreExport)
    }

    /// Reads `dir/memory-store.json`: a regular file (a link or a pipe at its name is refused
    /// unopened) of at most 4 GiB. The error says what is wrong with it.
    pub fn read(dir: &Path) -> std::io::Result<MemoryStoreExport> {
        read_file(dir).map(MemoryStoreExport)
    }

    /// Writes `dir/memory-store.json`, made anew and synced; `dir` must be new (it is made) or
    /// empty. Returns the file's path. The error says what is in the way.
    pub fn write(&self, dir: &Path) -> std::io::Result<std::path::PathBuf> {
        write_file(dir, &self.0)
    }

    /// The live memories it holds.
    pub fn memories(&self) -> usize {
        self.0.memories.len()
    }

    /// The versions it holds.
    pub fn versions(&self) -> usize {
        self.0.memory_versions.len()
    }

    /// Imports it into the store at `db` as `agent`, under its memory-tool root `root`: a
    /// store not there yet is built beside `db` and renamed into place once the import ran, so
    /// an import that fails or is killed midway leaves nothing at `db`; an existing store is
    /// imported into as it is.
    #[cfg(unix)]
    pub fn import_into(&self, db: &Path, agent: &str, root: &MemPath) -> Result<Imported> {
        import_store(db, agent, root, &self.0)
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// Versions replayed as writes.
    pub versions: u64,
    /// Writes made after the versions to bring a memory to its listed state.
    pub settled: u64,
    /// Live memories once done.
    pub memories: u64,
    /// What was not imported, each with why.
    pub skipped: Vec<String>,
}

/// Records `write` through `client`; the seq of its event, or why the store refused it.
fn write(client: &MnemoClient, write: ApiWrite) -> Result<std::result::Result<Seq, String>> {
    let receipt = client.call(None, Body::Api(write))?;
    if !receipt.is_error {
        return Ok(Ok(receipt.seq));
    }
    Ok(Err(receipt
        .failure_message()
        .map_or_else(|| receipt.text.clone(), str::to_string)))
}

/// The memory-tool path of API path `path` under `root`, if it is a memory path of the API.
fn tool_path(root: &MemPath, path: &str) -> std::result::Result<String, String> {
    match path_rules::check(path) {
        Some(why) => Err(why),
        None => Ok(format!("{root}{path}")),
    }
}

/// Imports `exported` into the store at `db` as `agent`, under its memory-tool root `root`: a
/// store not there yet is built beside `db` and renamed into place once the import ran, so an
/// import that fails or is killed midway leaves nothing at `db`; an existing store is imported
/// into as it is.
#[cfg(unix)]
pub(crate) fn import_store(
    db: &Path,
    agent: &str,
    root: &MemPath,
    exported: &Exported,
) -> Result<Imported> {
    let into = |path: &Path| {
        let client = MnemoClient::open(path, agent)?;
        import(&client, root, exported)
    };
    let Some(fresh) = crate::store::disk::staging_beside(db)? else {
        return into(db);
    };
    let done = into(&fresh).and_then(|imported| {
        crate::store::disk::place(&fresh, db)?;
        Ok(imported)
    });
    if done.is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    done
}

/// Imports `exported` into the store `client` writes, under its memory-tool root `root`.
pub(crate) fn import(
    client: &MnemoClient,
    root: &MemPath,
    exported: &Exported,
) -> Result<Imported> {
    if exported.format != FORMAT {
        return Err(Error::InvalidArgument(format!(
            "the file's format is {:?}, not {FORMAT:?}: write it with `mnemo export --format {FORMAT}`, or from the API's listings",
            exported.format
        )));
    }
    let mut done = Imported::default();
    // The hosted memory id → (Mnemo identity, its memory-tool path now).
    let mut made: BTreeMap<String, (Seq, String)> = BTreeMap::new();
    let mut order: Vec<&MemoryVersion> = exported.memory_versions.iter().collect();
    order.sort_by_key(|v| parse_rfc3339(&v.created_at).unwrap_or(0));
    for version in order {
        if version.redacted_at.is_some() {
            done.skipped.push(format!(
                "version {}: redacted, no content to replay",
                version.id
            ));
            continue;
        }
        let target = version
            .path
            .as_deref()
            .map(|p| tool_path(root, p))
            .transpose();
        let target = match target {
            Ok(target) => target,
            Err(why) => {
                done.skipped.push(format!("version {}: {why}", version.id));
                continue;
            }
        };
        let outcome = match (
            version.operation.as_str(),
            made.get(&version.memory_id),
            target,
        ) {
            ("deleted", Some((memory, path)), _) => write(
                client,
                ApiWrite::Delete {
                    memory: memory.0,
                    path: path.clone(),
                    expect: None,
                },
            )?
            .map(|_| None),
            ("deleted", None, _) => continue,
            (_, Some((memory, path)), Some(to)) => {
                let memory = *memory;
                let moved = (to != *path).then(|| to.clone());
                write(
                    client,
                    ApiWrite::Update {
                        memory: memory.0,
                        path: path.clone(),
                        content: version.content.clone(),
                        new_path: moved,
                        expect: None,
                    },
                )?
                .map(|_| Some((memory, to)))
            }
            (_, None, Some(to)) => match &version.content {
                Some(content) => write(
                    client,
                    ApiWrite::Create {
                        path: to.clone(),
                        content: content.clone(),
                    },
                )?
                .map(|seq| Some((seq, to))),
                None => continue,
            },
            (_, _, None) => continue,
        };
        match outcome {
            Ok(Some(now)) => {
                made.insert(version.memory_id.clone(), now);
                done.versions += 1;
            }
            Ok(None) => {
                made.remove(&version.memory_id);
                done.versions += 1;
            }
            Err(why) => done.skipped.push(format!("version {}: {why}", version.id)),
        }
    }
    // Each listed memory as the listing has it; what the versions left that is not listed goes.
    let listed: BTreeMap<&str, &Memory> = exported
        .memories
        .iter()
        .map(|m| (m.id.as_str(), m))
        .collect();
    for (id, (memory, path)) in made.clone() {
        if listed.contains_key(id.as_str()) {
            continue;
        }
        let gone = ApiWrite::Delete {
            memory: memory.0,
            path,
            expect: None,
        };
        match write(client, gone)? {
            Ok(_) => {
                made.remove(&id);
                done.settled += 1;
            }
            Err(why) => done.skipped.push(format!("memory {id}: {why}")),
        }
    }
    for memory in &exported.memories {
        let Some(content) = &memory.content else {
            done.skipped.push(format!(
                "memory {}: no content (export it with view=full)",
                memory.id
            ));
            continue;
        };
        let to = match tool_path(root, &memory.path) {
            Ok(to) => to,
            Err(why) => {
                done.skipped.push(format!("memory {}: {why}", memory.id));
                continue;
            }
        };
        let outcome = match made.get(&memory.id).cloned() {
            Some((seq, path)) => {
                let now = client
                    .read_local(|store| reading::memory(store, root, "", seq, true, None))?
                    .and_then(|m| m.content);
                if path == to && now.as_deref() == Some(content.as_str()) {
                    continue;
                }
                let update = ApiWrite::Update {
                    memory: seq.0,
                    path: path.clone(),
                    content: Some(content.clone()),
                    new_path: (path != to).then(|| to.clone()),
                    expect: None,
                };
                write(client, update)?.map(|_| seq)
            }
            None => {
                let create = ApiWrite::Create {
                    path: to.clone(),
                    content: content.clone(),
                };
                write(client, create)?
            }
        };
        match outcome {
            Ok(identity) => {
                made.insert(memory.id.clone(), (identity, to));
                done.settled += 1;
            }
            Err(why) => done.skipped.push(format!("memory {}: {why}", memory.id)),
        }
    }
    done.memories = u64::try_from(made.len()).unwrap_or(u64::MAX);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_file_reads_back_and_is_written_only_into_a_new_or_empty_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exported = Exported {
            format: FORMAT.into(),
            memory_store_id: "memstore_a".into(),
            memories: Vec::new(),
            memory_versions: Vec::new(),
        };
        let target = dir.path().join("new");
        let path = write_file(&target, &exported).expect("written");
        assert_eq!(path, target.join(FILE_NAME));
        assert_eq!(read_file(&target).expect("read"), exported);
        let full = write_file(&target, &exported).expect_err("not empty");
        assert!(
            full.to_string()
                .ends_with("is not empty; give a new or empty directory")
        );
        std::fs::write(&path, b"{}").expect("overwrite");
        let bad = read_file(&target).expect_err("not an export");
        assert!(
            bad.to_string().contains("is not a memory-stores export"),
            "{bad}"
        );
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("a directory at its name");
        let odd = read_file(&target).expect_err("not a file");
        assert!(odd.to_string().ends_with("is not a regular file"), "{odd}");
    }
}
