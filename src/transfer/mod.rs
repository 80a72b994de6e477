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
use crate::error::Result;
use crate::event::Seq;
use crate::paths::MemPath;
use crate::tool_server::MnemoMemoryToolServer;

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
}

impl ImportSummary {
    /// Whether every entry was imported (nothing was skipped).
    pub fn is_complete(&self) -> bool {
        self.skipped.is_empty()
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
        import(self, dir)
    }
}
