//! The reads a client offers beyond its files: the files at a past event, the log, a file's
//! history, one event whole and the diff between two events, each as the CLI's `--json` prints
//! it. A store open in this process answers them from its log; a served one, through the
//! server's read routes (`/v1/ls` and `/v1/cat` at a seq, `/v1/log`, `/v1/history`, `/v1/show`,
//! `/v1/diff`), which the same functions answer there.

use crate::audit::history::{LogQuery, logged, select_events, state_at};
use crate::client::{MnemoClient, readable};
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::protocol::{
    FileDiff, HistoryEvent, ListedFile, Listing, LoggedEvent, ShownEvent,
};
use crate::store::projection::MemoryRecord;

impl MnemoClient {
    /// The files as they were right after event `at` (past the head: now), replayed from the
    /// log: those this client's agent may read under the policy in force now.
    pub fn records_at(&self, at: Seq) -> Result<Vec<MemoryRecord>> {
        let at = at.min(self.head()?.seq);
        let policy = self.policy()?;
        #[cfg(feature = "client")]
        let served = self.remote().map(|remote| {
            remote
                .tree_at(&MemPath::top(), Some(at))
                .map_err(Error::from)
        });
        #[cfg(not(feature = "client"))]
        let served: Option<Result<Vec<MemoryRecord>>> = None;
        let mut records = match served {
            Some(records) => records?,
            None => {
                self.settle_index()?;
                let everything = MemPath::absolute("/").map_err(Error::InvalidArgument)?;
                crate::audit::history::held_records(
                    &state_at(&*self.local_store()?, at)?,
                    &everything,
                )?
            }
        };
        records.retain(|r| readable(&policy, self.agent_id(), r));
        Ok(records)
    }

    /// Every file under `dir` (`/`: the whole store, whatever root its calls ran under) as it
    /// was right after event `at` (`None`: now), with its content: the store owner's view,
    /// whatever the grants (a server answers it to its operator only).
    pub fn tree_at(&self, dir: &MemPath, at: Option<Seq>) -> Result<Vec<MemoryRecord>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.tree_at(dir, at)?);
        }
        self.past_or_now(at, |store| {
            crate::audit::history::records_at(store, dir, at)
        })
    }

    /// Runs `read` for the tree after event `at`: now (`None`) under the writer lock, so no
    /// call is half-applied; a past one on the log as written once the calls answered so far
    /// are stored, holding no lock (its replay needs none, and never holds off writes).
    fn past_or_now<T>(
        &self,
        at: Option<Seq>,
        read: impl FnOnce(&crate::store::log::Store) -> Result<T>,
    ) -> Result<T> {
        match at {
            None => self.read_local(read),
            Some(_) => {
                self.settle_index()?;
                read(&*self.local_store()?)
            }
        }
    }

    /// The files under `dir` as [`tree_at`](Self::tree_at) finds them, without their content,
    /// as `mnemo ls` prints them.
    pub fn listing(&self, dir: &MemPath, at: Option<Seq>) -> Result<Listing> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.listing(dir, at)?);
        }
        let records = self.tree_at(dir, at)?;
        Ok(listing_of(dir.to_string(), at.map(|at| at.0), &records))
    }

    /// The content of the file at `file` right after event `at` (`None`: now), if there was
    /// one, as `mnemo cat` prints it: the store owner's view, whatever the grants.
    pub fn content_at(&self, file: &MemPath, at: Option<Seq>) -> Result<Option<String>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.content_at(file, at)?);
        }
        Ok(self
            .past_or_now(at, |store| {
                crate::audit::history::record_at(store, file, at)
            })?
            .map(|r| r.content))
    }

    /// The logged events `query` selects, as `mnemo log --json` prints them (one JSON object
    /// each, with the event's chain hash and the previous one's).
    pub fn log(&self, query: &LogQuery) -> Result<Vec<LoggedEvent>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.log(query)?);
        }
        self.settle_index()?;
        let mut events = Vec::new();
        select_events(&*self.local_store()?, query, |event| {
            events.push(logged(event));
            Ok::<(), Error>(())
        })?;
        Ok(events)
    }

    /// Every event of every file that lived at `path`, file by file, each followed through
    /// renames, as `mnemo history --json` prints them.
    pub fn history(&self, path: &MemPath) -> Result<Vec<HistoryEvent>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.history(path)?);
        }
        self.settle_index()?;
        let mut events = Vec::new();
        for trail in crate::audit::lineage::trails(&*self.local_store()?, path)? {
            for event in &trail.events {
                events.push(crate::audit::lineage::trail_event(&trail, event));
            }
        }
        Ok(events)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it.
    pub fn show(&self, seq: Seq) -> Result<ShownEvent> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.show(seq)?);
        }
        self.settle_index()?;
        Ok(crate::audit::inspect::show(&*self.local_store()?, seq)?.to_protocol())
    }

    /// What changed in the files under `dir` from after event `from` to after event `to` (0:
    /// the empty tree), as `mnemo diff --json` prints it.
    pub fn diff(&self, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<FileDiff>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.diff(from, to, dir)?);
        }
        self.settle_index()?;
        crate::audit::inspect::diff(&*self.local_store()?, from, to, dir)
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
