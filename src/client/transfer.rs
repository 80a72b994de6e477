//! Moving memory in and out as plain files, in the layout the SDK's filesystem tool uses:
//! `/memories/a/b.txt` is the file `DIR/memories/a/b.txt`.
//!
//! Export writes what the log proves (the tree now or after any seq). Import turns each file into
//! a logged `create` call through a tool server, so imported memory is chained, checked against the
//! access policy and the limits, and attributed to an agent like anything else.
//!
//! Both are safe on a hostile tree, also one another process changes while they run: they walk it
//! with `openat`-style calls relative to directory descriptors, never following a link and never
//! opening a FIFO or device for reading, so import reads only
//! regular files under `DIR/<root>` and export writes only inside its directory. The module needs
//! those calls, so it exists on Unix only.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use crate::client::MnemoClient;
use crate::client::tool_server::MnemoMemoryToolServer;
use crate::error::Result;
use crate::model::event::Seq;
use crate::model::paths::MemPath;

mod export;
mod import;
mod walk;

pub use export::export;
pub use import::import;

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Files written.
    pub files: u64,
    /// Bytes of content written.
    pub bytes: u64,
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Files recorded as `create` calls that succeeded.
    pub imported: u64,
    /// Bytes of content imported.
    pub bytes: u64,
    /// Entries that were not imported, each with the reason, in the order met.
    pub skipped: Vec<Skipped>,
    /// Calls the store could not record because it failed (each got an error result): a store
    /// that failed during an import should be checked with `mnemo verify`.
    pub store_failures: u64,
    /// Whether the store holding the import is at its path: false when a new store the store's
    /// own failures cut short was removed ([`MnemoMemoryToolServer::import_store`]), so nothing
    /// is there.
    pub stored: bool,
}

impl ImportSummary {
    /// Whether every entry was imported (nothing was skipped, the store never failed).
    pub fn is_complete(&self) -> bool {
        self.skipped.is_empty() && self.store_failures == 0
    }
}

/// An entry of the imported tree that was not imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The entry, as `DIR/memories/...` (for reports: it is never opened by this path).
    pub path: PathBuf,
    /// Why it was not imported: a link, FIFO, device or socket; over the size limit; not UTF-8;
    /// too deep; refused by the store (its error text); or the I/O error met.
    pub reason: String,
}

impl MnemoClient {
    /// Writes every file of the store as it was right after event `at` (`None`: now) as plain
    /// files under `dir`, in the SDK's filesystem layout (`/memories/a.md` is
    /// `DIR/memories/a.md`): `dir` must be new or empty, and nothing is written outside it.
    /// The store owner's view, whatever the grants (as `mnemo export`).
    pub fn export_files(&self, dir: &Path, at: Option<Seq>) -> Result<ExportSummary> {
        let everything = MemPath::top();
        export(&self.tree_at(&everything, at)?, dir)
    }
}

impl MnemoMemoryToolServer {
    /// Records every regular file under `DIR/<root>` as a `create` call of this tool server
    /// (chained, checked against the policy and the limits, attributed to its agent), as
    /// `mnemo import`; links, FIFOs, devices and what the store refuses are skipped and named.
    pub fn import_files(&self, dir: &Path) -> Result<ImportSummary> {
        let mut summary = import(self, dir)?;
        summary.store_failures = self.store_failures();
        summary.stored = true;
        Ok(summary)
    }

    /// `mnemo import`: the plain files under `DIR/<root>` recorded into the store at `db` as
    /// `agent` ([`import_files`](Self::import_files)). A store not there yet is built beside
    /// `db` and renamed into place once the import ran (the rename made durable), so an import
    /// that fails or is killed midway leaves nothing at `db` (and the next import removes what
    /// a killed one left beside it); an existing store is imported into as it is. A new store
    /// the store's own failures cut short is removed too: the summary says so
    /// ([`ImportSummary::stored`]).
    pub fn import_store(db: &Path, dir: &Path, agent: &str, root: &str) -> Result<ImportSummary> {
        let Some(fresh) = crate::store::disk::staging_beside(db)? else {
            return import_into(db, dir, agent, root);
        };
        let done = import_into(&fresh, dir, agent, root).and_then(|mut summary| {
            // A store that failed midway is not put in place: nothing is left at `db`.
            if summary.store_failures > 0 {
                summary.stored = false;
                let _ = std::fs::remove_dir_all(&fresh);
                return Ok(summary);
            }
            crate::store::disk::place(&fresh, db)?;
            Ok(summary)
        });
        if done.is_err() {
            let _ = std::fs::remove_dir_all(&fresh);
        }
        done
    }
}

/// Imports `dir` into the store at `db` (see [`MnemoMemoryToolServer::import_store`]); the store
/// is closed on return.
fn import_into(db: &Path, dir: &Path, agent: &str, root: &str) -> Result<ImportSummary> {
    let client = MnemoClient::open(db, agent)?;
    MnemoMemoryToolServer::builder(client)
        .root(root)
        .build()?
        .import_files(dir)
}
