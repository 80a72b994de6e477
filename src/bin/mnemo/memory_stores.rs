//! `mnemo export --format memory-stores` and `mnemo import --format memory-stores`: a store moved
//! whole as the memory-stores API's JSON (`DIR/memory-store.json`), see
//! [`mnemo::memory_store::transfer`].

use std::path::Path;
use std::process::ExitCode;

use mnemo::memory_store::ids::store_id;
use mnemo::memory_store::transfer;
use mnemo::{MemPath, MnemoClient};

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// The memory store id an export names: `memstore_` and the store directory's name, where that
/// is a store name, else the directory's name as it is.
fn id_of(db: &Path) -> String {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if mnemo::DataDir::check_name(&name).is_ok() {
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
    let path = transfer::write_file(dir, &exported)?;
    crate::print::say(format_args!(
        "exported {} memories and {} versions to {}",
        exported.memories.len(),
        exported.memory_versions.len(),
        path.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Imports `DIR/memory-store.json` into the store at `db` as `agent`, under `root`: exit 0 when
/// everything was imported, 1 when something was skipped (each named on stderr).
pub fn import(db: &Path, dir: &Path, agent: &str, root: &str) -> CliResult {
    let exported = transfer::read_file(dir)?;
    let root = MemPath::absolute(root)?;
    let done = transfer::import_store(db, agent, &root, &exported)?;
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
