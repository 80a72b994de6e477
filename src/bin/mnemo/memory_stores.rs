//! `mnemo export --format memory-stores` and `mnemo import --format memory-stores`: a store moved
//! whole as the memory-stores API's JSON (`DIR/memory-store.json`), see
//! [`mnemo::memory_store::transfer`].

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use mnemo::memory_store::ids::store_id;
use mnemo::memory_store::transfer::{self, Exported, FILE_NAME};
use mnemo::{MemPath, MnemoClient};

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// The largest export file read (the API caps a store at thousands of memories of 100 kB, and
/// their versions).
const MAX_FILE_BYTES: u64 = 4 << 30;

/// The memory store id an export names: `memstore_` and the store directory's name, where that
/// is a store name, else the directory's name as it is.
fn id_of(db: &Path) -> String {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if mnemo::check_store_name(&name).is_ok() {
        store_id(&name)
    } else {
        name
    }
}

/// Writes the store at `db` (its memories under `root`) as `DIR/memory-store.json`; `dir` must
/// be new or empty.
pub fn export(db: &Path, dir: &Path, root: &str) -> CliResult {
    let root = MemPath::absolute(root)?;
    let reader = MnemoClient::builder(db).read_only().open()?;
    let exported = transfer::export(&reader, &root, &id_of(db))?;
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            if entries.into_iter().next().is_some() {
                return Err(format!(
                    "{} is not empty; give a new or empty directory",
                    dir.display()
                )
                .into());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)?,
        Err(e) => return Err(format!("{}: {e}", dir.display()).into()),
    }
    let path = dir.join(FILE_NAME);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    serde_json::to_writer_pretty(&mut file, &exported)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    crate::print::say(format_args!(
        "exported {} memories and {} versions to {}",
        exported.memories.len(),
        exported.memory_versions.len(),
        path.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Reads `DIR/memory-store.json`: a regular file (a link or a pipe at its name is refused
/// unopened), at most [`MAX_FILE_BYTES`].
fn read(dir: &Path) -> Result<Exported, Box<dyn std::error::Error>> {
    let path = dir.join(FILE_NAME);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()).into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()).into());
    }
    let bytes = std::fs::read(&path)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{} is not a memory-stores export ({e}); write one with `mnemo export --format memory-stores`",
            path.display()
        )
        .into()
    })
}

/// Imports `DIR/memory-store.json` into the store at `db` as `agent`, under `root`: exit 0 when
/// everything was imported, 1 when something was skipped (each named on stderr).
pub fn import(db: &Path, dir: &Path, agent: String, root: &str) -> CliResult {
    let exported = read(dir)?;
    let root = MemPath::absolute(root)?;
    let done = transfer::import_store(db, &agent, &root, &exported)?;
    for skipped in &done.skipped {
        crate::print::tell(format_args!("mnemo: not imported: {skipped}"));
    }
    crate::print::say(format_args!(
        "imported {} memories ({} versions replayed, {} writes to settle the listing); skipped {}",
        done.memories,
        done.versions,
        done.settled,
        done.skipped.len()
    ))?;
    Ok(if done.skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
