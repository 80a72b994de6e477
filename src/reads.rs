//! The reads a client offers beyond its files: the files at a past event, the log, a file's
//! history, one event whole and the diff between two events, each as the CLI's `--json` prints
//! it. A store open in this process answers them from its log; a served one, through the
//! server's read routes (`/v1/ls` and `/v1/cat` at a seq, `/v1/log`, `/v1/history`, `/v1/show`,
//! `/v1/diff`), which the same functions answer there.

use serde_json::Value;

use crate::client::{MnemoClient, readable};
use crate::error::{Error, Result};
use crate::event::Seq;
use crate::history::{LogQuery, event_json, select_events, state_at};
use crate::paths::MemPath;
use crate::projection::MemoryRecord;

impl MnemoClient {
    /// The files as they were right after event `at` (past the head: now), replayed from the
    /// log: those this client's agent may read under the policy in force now.
    pub fn records_at(&self, at: Seq) -> Result<Vec<MemoryRecord>> {
        let at = at.min(self.head()?.seq);
        let policy = self.policy()?;
        #[cfg(feature = "client")]
        let served = self
            .remote()
            .map(|remote| remote.records_at(Some(at)).map_err(Error::from));
        #[cfg(not(feature = "client"))]
        let served: Option<Result<Vec<MemoryRecord>>> = None;
        let mut records = match served {
            Some(records) => records?,
            None => {
                self.settle_index()?;
                let everything = MemPath::absolute("/").map_err(Error::InvalidArgument)?;
                state_at(&*self.local_store()?, at)?.records_under(&everything)?
            }
        };
        records.retain(|r| readable(&policy, self.agent_id(), r));
        Ok(records)
    }

    /// The logged events `query` selects, as `mnemo log --json` prints them (one JSON object
    /// each, with the event's chain hash and the previous one's).
    pub fn log(&self, query: &LogQuery) -> Result<Vec<Value>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.log(
                query.agent.as_deref(),
                query.path.as_ref(),
                query.from,
                query.limit,
            )?);
        }
        self.settle_index()?;
        let mut events = Vec::new();
        select_events(&*self.local_store()?, query, |event| {
            events.push(event_json(event));
            Ok::<(), Error>(())
        })?;
        Ok(events)
    }

    /// Every event of every file that lived at `path`, file by file, each followed through
    /// renames, as `mnemo history --json` prints them.
    pub fn history(&self, path: &MemPath) -> Result<Vec<Value>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.history(path)?);
        }
        self.settle_index()?;
        let mut events = Vec::new();
        for trail in crate::lineage::trails(&*self.local_store()?, path)? {
            for event in &trail.events {
                events.push(crate::lineage::trail_json(&trail, event));
            }
        }
        Ok(events)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it.
    pub fn show(&self, seq: Seq) -> Result<Value> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.show(seq)?);
        }
        self.settle_index()?;
        Ok(crate::inspect::show(&*self.local_store()?, seq)?.to_json())
    }

    /// What changed in the files under `dir` from after event `from` to after event `to` (0:
    /// the empty tree), as `mnemo diff --json` prints it.
    pub fn diff(&self, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<Value>> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            return Ok(remote.diff(from, to, dir)?);
        }
        self.settle_index()?;
        let files = crate::inspect::diff(&*self.local_store()?, from, to, dir)?;
        Ok(files
            .iter()
            .map(crate::inspect::FileDiff::to_json)
            .collect())
    }
}
