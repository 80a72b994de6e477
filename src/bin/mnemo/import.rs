//! `mnemo import`: plain files read into a new store, which then replaces none.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mnemo::protocol::printable;
use mnemo::{MnemoClient, MnemoMemoryToolServer};

use crate::CliResult;
use crate::print::count;

/// Exit 0 when every entry was imported, 1 when some were skipped (each named on stderr with the
/// reason; the rest was imported), 2 when the import could not run.
#[cfg(unix)]
pub(crate) fn run_import(db: &Path, dir: &Path, agent: String, root: String) -> CliResult {
    let Some(fresh) = fresh_store_beside(db)? else {
        return import_into(db, dir, agent, root);
    };
    // A new store is built beside its path and renamed there once the import ran, so a failed
    // import (or one killed midway) leaves nothing at the path.
    let imported = import_into(&fresh, dir, agent, root);
    let placed = imported.and_then(|code| {
        std::fs::rename(&fresh, db)
            .and_then(|()| sync_parent(db))
            .map_err(|e| {
                format!(
                    "cannot move the imported store from {} to {}: {e}",
                    fresh.display(),
                    db.display()
                )
            })?;
        Ok(code)
    });
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    placed
}

/// Where an import into the store at `db` builds it first: `None` when a store (or anything
/// else, which opening refuses) is already at `db`, or its directory is not there to build in.
#[cfg(unix)]
pub(crate) fn fresh_store_beside(db: &Path) -> Result<Option<PathBuf>, Box<dyn std::error::Error>> {
    let unborn = match std::fs::symlink_metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("cannot read {}: {e}", db.display()).into()),
        Ok(meta) => meta.is_dir() && std::fs::read_dir(db)?.next().is_none(),
    };
    let (Some(name), Some(parent)) = (db.file_name(), db.parent()) else {
        return Ok(None);
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    if !unborn || !parent.is_dir() {
        return Ok(None);
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Ok(Some(parent.join(format!(
        ".{}.importing-{}-{stamp:08x}",
        name.to_string_lossy(),
        std::process::id()
    ))))
}

/// `fsync`s the directory that holds `path`, so a rename into it survives a power loss.
#[cfg(unix)]
pub(crate) fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => std::fs::File::open(parent)?.sync_all(),
        _ => std::fs::File::open(".")?.sync_all(),
    }
}

/// Imports `dir` into the store at `db` (see [`run_import`]); the store is closed on return.
#[cfg(unix)]
pub(crate) fn import_into(db: &Path, dir: &Path, agent: String, root: String) -> CliResult {
    let client = MnemoClient::open(db, agent)?;
    let server = MnemoMemoryToolServer::builder(client).root(root).build()?;
    let summary = server.import_files(dir)?;
    for skipped in &summary.skipped {
        eprintln!(
            "mnemo: not imported: {}: {}",
            printable(&skipped.path.to_string_lossy()),
            skipped.reason
        );
    }
    println!(
        "imported {} ({} bytes) from {}; skipped {}",
        count(summary.imported, "file"),
        summary.bytes,
        dir.display(),
        summary.skipped.len()
    );
    if server.store_failures() > 0 {
        return Err(format!(
            "the store failed during the import ({} calls could not be recorded); check the store with `mnemo verify`",
            server.store_failures()
        )
        .into());
    }
    Ok(if summary.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(not(unix))]
pub(crate) fn run_import(_db: &Path, _dir: &Path, _agent: String, _root: String) -> CliResult {
    Err("mnemo import needs a Unix system (it walks directories with openat-style calls)".into())
}
