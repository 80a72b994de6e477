//! `mnemo export --format memory-stores` and `mnemo import --format memory-stores`: a store moved
//! whole as the memory-stores API's JSON (`DIR/memory-store.json`), see
//! [`mnemo::MemoryStoreExport`].

use std::path::Path;
use std::process::ExitCode;

use mnemo::{MemPath, MemoryStoreExport};

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Writes the store at `db` (its memories under `root`) as `DIR/memory-store.json`; `dir` must
/// be new or empty.
pub fn export(db: &Path, dir: &Path, root: &str) -> CliResult {
    let root = MemPath::absolute(root)?;
    let exported = MemoryStoreExport::of(db, &root)?;
    let path = exported.write(dir)?;
    crate::print::say(format_args!(
        "exported {} memories and {} versions to {}",
        exported.memories(),
        exported.versions(),
        path.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Imports `DIR/memory-store.json` into the store at `db` as `agent`, under `root`: exit 0 when
/// everything was imported, 1 when something was skipped (each named on stderr).
pub fn import(db: &Path, dir: &Path, agent: &str, root: &str) -> CliResult {
    let exported = MemoryStoreExport::read(dir)?;
    let root = MemPath::absolute(root)?;
    let done = exported.import_into(db, agent, &root)?;
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
