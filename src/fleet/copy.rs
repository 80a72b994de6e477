//! A fleet node's copy of a store on its own disk, built from the store's write-ahead log in the
//! bucket when the node takes the store: the copy answers, the log is the truth.

use std::path::Path;

use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::Seq;
use crate::store::log::{Durability, Head, Store};

/// Makes the store at `path` anew from `records` (the whole log, in seq order, as
/// [`super::wal::Wal::take`] read it): whatever was at `path` before (a copy from an earlier hold,
/// or a copy cut by a crash) is removed first, as the log may have gone on elsewhere since. Every
/// record is checked against the chain rules again, the index is built, and the store is synced
/// before it is served.
pub fn build(path: &Path, records: &[(Seq, Vec<u8>)]) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            std::fs::remove_dir_all(path).map_err(|e| Error::io(path, e))?;
        }
        Ok(_) => {
            return Err(Error::InvalidArgument(format!(
                "{} is in the way of a fleet store's copy: it is not a directory; remove it",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(path, e)),
    }
    let store = Store::open(path)?;
    let mut chain = Chain::new();
    let mut head = Head::EMPTY;
    for run in records.chunks(4096) {
        let mut frames = Vec::with_capacity(run.len());
        for (seq, record) in run {
            let frame = chain.check(*seq, record).map_err(|b| {
                Error::damaged(format!(
                    "the fleet log breaks the chain at event {}: {}",
                    b.seq, b.detail
                ))
            })?;
            head = Head {
                seq: *seq,
                hash: frame.hash,
            };
            frames.push(frame);
        }
        store.append(&frames)?;
    }
    store.catch_up()?;
    store.sync(Durability::Fsync)?;
    if head.seq > Seq(0) {
        store.record_head(head)?;
    }
    Ok(())
}
