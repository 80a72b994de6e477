//! The reads a client offers beyond its files: the files at a past event, the log, a file's
//! history, one event whole, the diff between two events and where content went (a trace),
//! each as the CLI's `--json` prints it. A store open in this process answers them from its log;
//! a served one, through the server's read routes (`/v1/ls` and `/v1/cat` at a seq, `/v1/log`,
//! `/v1/history`, `/v1/show`, `/v1/diff`, `/v1/trace`), which the same functions answer there.

use crate::audit::history::LogQuery;
use crate::client::{MnemoClient, readable};
use crate::error::Result;
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::protocol::{
    FileDiff, HistoryEvent, ListedFile, Listing, LoggedEvent, ShownEvent, TraceReport,
};
use crate::store::projection::{FileEntry, MemoryRecord};

impl MnemoClient {
    /// The files as they were right after event `at` (past the head: now), replayed from the
    /// log: those this client's agent may read under the policy in force now.
    pub fn records_at(&self, at: Seq) -> Result<Vec<MemoryRecord>> {
        let at = at.min(self.head()?.seq);
        let policy = self.policy()?;
        let mut records = self.backend().files_at(self, at)?;
        records.retain(|r| readable(&policy, self.agent_id(), r));
        Ok(records)
    }

    /// Every file under `dir` (`/`: the whole store, whatever root its calls ran under) as it
    /// was right after event `at` (`None`: now), with its content: the store owner's view,
    /// whatever the grants (a server answers it to its operator only).
    pub fn tree_at(&self, dir: &MemPath, at: Option<Seq>) -> Result<Vec<MemoryRecord>> {
        self.backend().tree_at(self, dir, at)
    }

    /// The files under `dir` as [`tree_at`](Self::tree_at) finds them, without their content,
    /// as `mnemo ls` prints them.
    pub fn listing(&self, dir: &MemPath, at: Option<Seq>) -> Result<Listing> {
        self.backend().listing(self, dir, at)
    }

    /// The content of the file at `file` right after event `at` (`None`: now), if there was
    /// one, as `mnemo cat` prints it: the store owner's view, whatever the grants.
    pub fn content_at(&self, file: &MemPath, at: Option<Seq>) -> Result<Option<String>> {
        self.backend().content_at(self, file, at)
    }

    /// The logged events `query` selects, as `mnemo log --json` prints them (one JSON object
    /// each, with the event's chain hash and the previous one's).
    pub fn log(&self, query: &LogQuery) -> Result<Vec<LoggedEvent>> {
        self.backend().log(self, query)
    }

    /// Every event of every file that lived at `path`, file by file, each followed through
    /// renames, as `mnemo history --json` prints them.
    pub fn history(&self, path: &MemPath) -> Result<Vec<HistoryEvent>> {
        self.backend().history(self, path)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it.
    pub fn show(&self, seq: Seq) -> Result<ShownEvent> {
        self.backend().show(self, seq)
    }

    /// Where the content event `seq` wrote went (with `file`, the whole content that file held
    /// right after it), as `mnemo trace --json` prints it: every later event whose answer quoted
    /// some of it, or whose write carried it on or took it out, re-derived by replaying the log.
    /// The store owner's view, whatever the grants (a server answers it to its operator only);
    /// [`trace_within_grants`](Self::trace_within_grants) is an agent's.
    pub fn trace(&self, seq: Seq, file: Option<&MemPath>) -> Result<TraceReport> {
        self.backend().trace(self, seq, file)
    }

    /// [`trace`](Self::trace) as this client's agent may see it under the grants in force now:
    /// no event on a file it may not read, no such file where the bytes are now, and no erased
    /// event (whose files cannot be known); a trace from a file it may not read is refused. A
    /// trace cut so says so and is not `exact`.
    pub fn trace_within_grants(&self, seq: Seq, file: Option<&MemPath>) -> Result<TraceReport> {
        let report = self.trace(seq, file)?;
        crate::audit::trace::scoped(report, &self.policy()?, self.agent_id())
    }

    /// What changed in the files under `dir` from after event `from` to after event `to` (0:
    /// the empty tree), as `mnemo diff --json` prints it.
    pub fn diff(&self, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<FileDiff>> {
        self.backend().diff(self, from, to, dir)
    }
}

/// The index's `entries` as the listing of `dir` now.
pub(crate) fn listing_of_entries(dir: String, entries: &[FileEntry]) -> Listing {
    Listing {
        at: None,
        dir,
        files: entries
            .iter()
            .map(|e| ListedFile {
                bytes: e.bytes,
                created: e.created.0,
                path: e.path.to_string(),
                updated: e.updated.0,
            })
            .collect(),
    }
}

/// `records` as the listing of `dir` at `at`.
pub(crate) fn listing_of(dir: String, at: Option<u64>, records: &[MemoryRecord]) -> Listing {
    Listing {
        at,
        dir,
        files: records
            .iter()
            .map(|r| ListedFile {
                bytes: r.content.len() as u64,
                created: r.created.0,
                path: r.path.clone(),
                updated: r.updated.0,
            })
            .collect(),
    }
}
