//! A fleet node's copy of a store on its own disk, built from the store's write-ahead log in the
//! bucket when the node takes the store: the copy answers, the log is the truth.
//!
//! Beside the copy `DIR/NAME`, the file `DIR/.NAME.fleet` records a position of the log the copy
//! was equal to up to that point ([`record`]): a node that takes the store again reads the log
//! from there and brings its copy up ([`extend`]) rather than reading every object and building
//! the copy anew, once it has checked that the copy holds exactly the log's events up to its end
//! (else the copy is built anew).

use std::path::{Path, PathBuf};

use super::wal::{Position, Records, Wal};
use crate::audit::verify::Report;
use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{EventHash, Frame, Seq};
use crate::replica::restore::Made;
use crate::store::log::{Durability, Head, Store};

/// The most bytes of a position file read.
const POSITION_MAX: u64 = 1024;

/// The file beside the copy at `path` that records its position in the log.
fn position_file(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    Some(path.with_file_name(format!(".{name}.fleet")))
}

/// The position of the log the copy at `path` was last recorded equal to, if one was (and the
/// file holding it is a small regular file of the form [`record`] writes).
pub fn recorded(path: &Path) -> Option<Position> {
    let file = position_file(path)?;
    let meta = std::fs::symlink_metadata(&file).ok()?;
    if !meta.is_file() || meta.len() > POSITION_MAX || !path.is_dir() {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let mut parts = text.split_whitespace();
    let position = Position {
        object: parts.next()?.parse().ok()?,
        epoch: parts.next()?.parse().ok()?,
        seq: Seq(parts.next()?.parse().ok()?),
        hash: EventHash::from_hex(parts.next()?)?,
    };
    parts.next().is_none().then_some(position)
}

/// Records that the copy at `path` holds the log's events up to `at` (written whole or not at
/// all: a new file renamed over the old). A failure only costs the next take a whole read.
pub fn record(path: &Path, at: &Position) {
    let Some(file) = position_file(path) else {
        return;
    };
    let text = format!(
        "{} {} {} {}\n",
        at.object,
        at.epoch,
        at.seq.0,
        at.hash.to_hex()
    );
    let fresh = file.with_extension("fleet-new");
    if std::fs::write(&fresh, text).is_ok() {
        let _ = std::fs::rename(&fresh, &file);
    }
}

/// Forgets the position of the copy at `path` (before it is built anew).
fn forget(path: &Path) {
    if let Some(file) = position_file(path) {
        let _ = std::fs::remove_file(file);
    }
}

/// Brings the copy at `path`, recorded equal to the log up to `from`, up to the log's end:
/// `tail` is the log's events after `from`. The copy must hold event `from.seq` with its hash,
/// and every event of `tail` it already has, byte for byte by their hashes; then the events it
/// lacks are appended and its index brought up. The copy's events past the log's end (written
/// on this node and not yet shipped when it last held the store, as `fsync` acknowledges them)
/// are returned, for the caller to commit to the log before anything else: they go on from
/// the log's last event, since the copy holds every event of it. `None` (nothing changed) when
/// the copy does not hold: build it anew then (its events past the log's end are lost: the log
/// went on without them).
pub fn extend(path: &Path, from: &Position, tail: &Records) -> Result<Option<Records>> {
    let store = match Store::open_existing(path) {
        Ok(store) => store,
        Err(_) => return Ok(None),
    };
    let hash_of = |seq: Seq| -> Result<Option<EventHash>> {
        Ok(store
            .get(seq)?
            .and_then(|record| Frame::decode(&record).ok())
            .map(|frame| frame.hash))
    };
    if from.seq > Seq(0) && hash_of(from.seq)? != Some(from.hash) {
        return Ok(None);
    }
    let local = store.log_end()?;
    let end = tail.last().map_or(from.seq, |(seq, _)| *seq);
    if local.seq < from.seq {
        return Ok(None);
    }
    for (seq, record) in tail.iter().filter(|(seq, _)| *seq <= local.seq) {
        let theirs = Frame::decode(record).map(|f| f.hash).ok();
        if theirs.is_none() || hash_of(*seq)? != theirs {
            return Ok(None);
        }
    }
    if local.seq > end {
        let ahead = store
            .records_through(Seq(end.0 + 1), local.seq)
            .collect::<Result<Records>>()?;
        return Ok(Some(ahead));
    }
    let past: Vec<&(Seq, Vec<u8>)> = tail.iter().filter(|(seq, _)| *seq > local.seq).collect();
    append(&store, local, &past)?;
    Ok(Some(Vec::new()))
}

/// Makes the store at `path` anew from `records` (the whole log, in seq order, as
/// [`super::wal::Wal::take`] read it): whatever was at `path` before (a copy from an earlier hold,
/// or a copy cut by a crash) is removed first, as the log may have gone on elsewhere since. Every
/// record is checked against the chain rules again, the index is built, and the store is synced
/// before it is served.
pub fn build(path: &Path, records: &[(Seq, Vec<u8>)]) -> Result<()> {
    forget(path);
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
    made(path, records)?;
    Ok(())
}

/// Makes a new store at `path` (which must not exist) from the whole log `wal`, up to event `at`
/// if given (else the log's end), for a reader from outside the fleet (`mnemo restore --from`,
/// `mnemo verify --from`): every invariant of the log and the chain is checked on the way
/// ([`Wal::scan`]), and every answer re-derived as the records are appended, in one replay
/// that is also the index. Returns the new store's head, and that pass's report when it found
/// the log intact; then, for `made` [`Made::Report`], the index is not written (the store is
/// made only for the report). `None`: the pass found something, and the store is made whole
/// (its index replayed) for the caller to verify whole, which names the first violation.
pub(crate) fn restore(
    wal: &Wal,
    path: &Path,
    at: Option<Seq>,
    made: Made,
) -> Result<(Head, Option<Report>)> {
    let (end, mut records) = wal.scan(&Position::START)?;
    if let Some(at) = at {
        if at > end.seq {
            return Err(Error::InvalidArgument(format!(
                "the fleet log of the store {} ends at event {}, before event {at}: give --at {} or less",
                wal.store(),
                end.seq,
                end.seq
            )));
        }
        records.retain(|(seq, _)| *seq <= at);
    }
    let store = Store::open(path)?;
    let all: Vec<&(Seq, Vec<u8>)> = records.iter().collect();
    let (tx, rx) = crossbeam_channel::bounded::<Records>(4);
    let (head, verified) = std::thread::scope(|s| {
        let verified = s.spawn(|| crate::audit::verify::verify_appended(&store, rx));
        let head = append_events_then(&store, Head::EMPTY, &all, &mut |run| {
            // A verifier that stopped (at a violation) hung up: the store is verified whole.
            let _ = tx.send(run.iter().map(|(seq, r)| (*seq, r.clone())).collect());
        });
        drop(tx);
        let verified = verified.join().unwrap_or_else(|_| {
            Err(Error::Poisoned {
                cause: "a thread panicked while it verified a fleet log".into(),
            })
        });
        (head, verified)
    });
    let (head, verified) = (head?, verified?);
    match verified {
        Some((report, _)) if made == Made::Report => {
            Ok((head, Some(Made::report_of(report, head))))
        }
        Some((report, index)) => {
            if head.seq > Seq(0) {
                store.write_new_index(index.map.iter().map(|(k, v)| (&k[..], Some(&v[..]))))?;
            }
            Ok((finish(&store, head)?, Some(report)))
        }
        None => Ok((finish(&store, head)?, None)),
    }
}

/// A new store at `path` (which holds none) holding `records`, its whole log: the records
/// appended, each checked against the chain rules, while another thread replays them from
/// memory into the store's index ([`Store::index_of`]), written once they are all appended
/// ([`Store::write_new_index`], from two threads); then synced and its head recorded, which it
/// returns.
fn made(path: &Path, records: &[(Seq, Vec<u8>)]) -> Result<Head> {
    let store = Store::open(path)?;
    let all: Vec<&(Seq, Vec<u8>)> = records.iter().collect();
    let (head, index) = std::thread::scope(|s| {
        let index = s.spawn(|| store.index_of(records));
        let head = append_events(&store, Head::EMPTY, &all);
        let index = index.join().unwrap_or_else(|_| {
            Err(Error::Poisoned {
                cause: "a thread panicked while it built a fleet copy's index".into(),
            })
        });
        (head, index)
    });
    let (head, index) = (head?, index?);
    if head.seq > Seq(0) {
        store.write_new_index(index.writes())?;
    }
    finish(&store, head)
}

/// Appends `records` (going on after `head`) to `store`, each checked against the chain rules
/// again, then builds the index, syncs, and records the new head, which it returns.
fn append(store: &Store, head: Head, records: &[&(Seq, Vec<u8>)]) -> Result<Head> {
    let head = append_events(store, head, records)?;
    finish(store, head)
}

/// Appends `records` (going on after `head`) to `store`, each checked against the chain rules
/// again; returns the new head.
fn append_events(store: &Store, head: Head, records: &[&(Seq, Vec<u8>)]) -> Result<Head> {
    append_events_then(store, head, records, &mut |_| {})
}

/// An event as a log holds it: its seq and its record.
type Event = (Seq, Vec<u8>);

/// [`append_events`], handing each run appended to `appended`.
fn append_events_then(
    store: &Store,
    head: Head,
    records: &[&(Seq, Vec<u8>)],
    appended: &mut dyn FnMut(&[&Event]),
) -> Result<Head> {
    let mut chain = Chain::after(head.seq, head.hash);
    let mut head = head;
    for run in records.chunks(4096) {
        let mut frames = Vec::with_capacity(run.len());
        for (seq, record) in run.iter().copied() {
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
        appended(run);
    }
    Ok(head)
}

/// Brings the index of `store` up to its log (nothing to do once [`Store::write_index`] took a
/// whole log's), syncs, and records `head`, which it returns.
fn finish(store: &Store, head: Head) -> Result<Head> {
    store.catch_up()?;
    store.sync(Durability::Fsync)?;
    if head.seq > Seq(0) {
        store.record_head(head)?;
    }
    Ok(head)
}
