//! The stored index brought up to the log: recovery when a store opens for writing, and the same
//! replay kept in memory for a reader. Here, not in `src/store/log.rs`, because the log stores and reads
//! frames and knows nothing of the projection they derive.

use super::Replay;
use crate::error::{Error, Result};
use crate::model::event::Seq;
#[cfg(feature = "replicate")]
use crate::store::kv::Pending;
use crate::store::kv::{IndexTrees, Overlay};
use crate::store::log::{Durability, Store};
use crate::store::projection::{INDEX_LAYOUT, Projection, RENAMES_UNSTAMPED};

impl Store {
    /// The path index as stored.
    pub fn index(&self) -> Projection<IndexTrees> {
        Projection::new(self.index_tree().clone())
    }

    /// Brings the head and the index up to the log, after a crash cut a commit short: gives back
    /// the value file's bytes no record names ([`Store::reclaim_values`]), moves the
    /// head over events appended past it ([`Store::log_end`]), then writes into the index the
    /// events it has not applied ([`Store::current_index`]). Returns how many events were
    /// replayed into the index.
    ///
    /// An index of an older layout ([`INDEX_LAYOUT`]) is derived state in a form this build does
    /// not write: it is cleared and rebuilt from the whole log. So is the content tree of an
    /// index that applied nothing (an index removed whole leaves no content behind that the
    /// replay would not write).
    pub fn catch_up(&self) -> Result<u64> {
        self.reclaim_values()?;
        let (head, moved) = self.settle_head()?;
        let index = self.index();
        let trees = self.index_tree();
        if index.layout()? < INDEX_LAYOUT {
            trees.index().clear()?;
            trees.content().clear()?;
        } else if index.applied()? == Seq(0) && !trees.content().is_empty() {
            trees.content().clear()?;
        }
        let applied = index.applied()?;
        let (replay, replayed) = self.replay_index(head.seq, true)?;
        if replayed > 0 {
            self.remember_payloads_after(applied)?;
            self.write_index(&replay.into_tree().into_inner().into_pending())?;
        }
        if replayed > 0 || moved {
            self.sync(Durability::Fsync)?;
        }
        Ok(replayed)
    }

    /// The index a replay of `records` builds, for a store being made from them (its whole log
    /// from event 1, in seq order) whose index has applied nothing yet: the records may be
    /// appended meanwhile, from another thread. Nothing is written; [`Store::write_index`] takes
    /// the result once every record is appended (the index never runs ahead of the log).
    #[cfg(feature = "replicate")]
    pub(crate) fn index_of(&self, records: &[(Seq, Vec<u8>)]) -> Result<Pending> {
        if self.index().applied()? != Seq(0) {
            return Err(Error::corrupt(
                "an index is built from a whole log only in a store whose index has applied nothing",
            ));
        }
        let tree = Projection::with_listings(Overlay::new(self.index_tree()))
            .in_layout(INDEX_LAYOUT)
            .journaled();
        let mut replay = Replay::resume(tree)?;
        replay.recover_from(records)?;
        Ok(replay.into_tree().into_inner().into_pending())
    }

    /// The path index as of the log's end, for reading a store no writer has open: the stored
    /// index, plus in memory the events it has not applied yet (the writer writes the index in
    /// batches, so after a crash or kill it lags the log; see [`Store::catch_up`]). Writes
    /// nothing.
    pub fn current_index(&self) -> Result<Projection<Overlay<'_>>> {
        if self.index().layout()? < RENAMES_UNSTAMPED {
            return Err(Error::corrupt(
                "the index was written by an older Mnemo; open the store once with a client (for example `mnemo tool --db PATH < /dev/null`) to rebuild it from the log",
            ));
        }
        Ok(self.replay_index(self.log_end()?.seq, false)?.0.into_tree())
    }

    /// The stored index with the events after its applied seq, up to `end`, replayed over it in
    /// memory; and how many were replayed. With `listings`, the replay keeps listing lines between
    /// events ([`Projection::with_listings`]): for a tree dropped when the replay ends (a long
    /// log replayed on open, or restored from a replica), never for one handed to readers, whose
    /// stored index a writer may change beneath it.
    fn replay_index(&self, end: Seq, listings: bool) -> Result<(Replay<Overlay<'_>>, u64)> {
        // An index of the layout before this build's is read (and extended in memory) in its own.
        let layout = self.index().layout()?.min(INDEX_LAYOUT);
        let overlay = Overlay::new(self.index_tree());
        let tree = if listings {
            Projection::with_listings(overlay)
        } else {
            Projection::new(overlay)
        }
        .in_layout(layout)
        .journaled();
        let mut replay = Replay::resume(tree)?;
        let replayed = replay.recover_to(self, end)?;
        Ok((replay, replayed))
    }
}
