//! Packs of a store's write-ahead log: the events of a run of its objects in one object, so that
//! a node taking the store over reads a few packs and the objects after them rather than one
//! object per commit the store ever made.
//!
//! A pack `stores/NAME/pack/{first:020}-{last:020}` holds the events of the log's objects `first`
//! through `last` (in the layout of a log object, its epoch the highest of theirs; see
//! `docs/formats.md`, "Fleet objects"). It is made create-only by the store's holder once enough
//! objects are past the last pack, a few of the newest always left out, and only then are the
//! objects it covers that hold events removed. The markers stay: a holder that lost its store
//! without knowing it claims, for its next commit, the name of the marker of the epoch that took
//! the store from it, so that name is never free again (see `wal.rs`). Packs are never removed
//! (while the store lives), so a reader that missed a pack in one listing and an object in the
//! next, removed meanwhile, finds the pack when it lists again. Two packs of one range (two
//! holders, one stale) hold the same events: the log's history up to them cannot fork.

use super::wal::{Object, Records, Wal};
use crate::error::Result;
use crate::model::chain::Chain;
use crate::model::event::{EventHash, Frame, Seq};
use crate::replica::segment;

/// How many objects past the last pack a holder waits for before it packs them.
pub const PACK_OBJECTS: u64 = 256;

/// How many of the log's newest objects are never packed: a position a node recorded beside its
/// copy after its last commit stays a position the log can check ([`Wal::holds`]).
pub const KEEP: u64 = 16;

/// The most objects one pack job reads (the rest wait for the next job).
const JOB_MAX: u64 = 1024;

impl Wal {
    fn pack_dir(&self) -> String {
        format!("stores/{}/pack", self.store())
    }

    /// The name of the pack of objects `first` through `last`.
    pub(super) fn pack_name(&self, first: u64, last: u64) -> String {
        format!("{}/{first:020}-{last:020}", self.pack_dir())
    }

    /// The log's packs, each as the first and last object it covers, by first object. A name
    /// that is no pack's is [`Error::ReplicaDamaged`].
    pub(super) fn packs(&self) -> Result<Vec<(u64, u64)>> {
        let dir = format!("{}/", self.pack_dir());
        let mut packs = Vec::new();
        for listed in self.bucket().list(&self.pack_dir())? {
            let tail = listed.name.strip_prefix(&dir).unwrap_or("");
            let range = tail
                .split_once('-')
                .and_then(|(a, b)| Some((segment::fixed_number(a)?, segment::fixed_number(b)?)))
                .filter(|(first, last)| *first > 0 && first <= last)
                .ok_or_else(|| {
                    self.damaged(&format!(
                        "it holds {}, which is no pack's name (FIRST-LAST, twenty digits each)",
                        listed.name
                    ))
                })?;
            packs.push(range);
        }
        packs.sort_unstable();
        Ok(packs)
    }

    /// Packs the log's objects from the first no pack covers up to `upto` (at most a job's worth),
    /// once at least `min_objects` of them are there: each run of them up to a segment's size
    /// goes in a pack, and then the objects it covers that hold events are removed. Returns the
    /// first object no pack covers afterwards.
    pub fn pack(&self, upto: u64, min_objects: u64) -> Result<u64> {
        let start = self
            .packs()?
            .iter()
            .map(|(_, last)| last + 1)
            .max()
            .unwrap_or(1);
        if upto < start || upto - start + 1 < min_objects.max(1) {
            return Ok(start);
        }
        let end = upto.min(start + JOB_MAX - 1);
        let mut run = Run::new(start, None);
        // Fetched a few at a time: a log object may be a segment's size.
        for batch in (start..=end).collect::<Vec<_>>().chunks(32) {
            let names: Vec<String> = batch.iter().map(|n| self.name(*n)).collect();
            let fetched = self.bucket().get_all(&names, super::wal::OBJECT_MAX)?;
            for ((n, name), bytes) in batch.iter().copied().zip(names).zip(fetched) {
                let Some(bytes) = bytes else {
                    // Packed by another holder meanwhile: its pack covers it.
                    return Ok(start);
                };
                let object = Object::decode(&name, &bytes)?;
                let size: usize = object.events.iter().map(|(_, r)| r.len()).sum();
                if !run.records.is_empty() && run.bytes + size > segment::SEGMENT_BYTES {
                    self.write_pack(&run, n - 1)?;
                    let ever_signed = run.ever_signed;
                    run = Run::new(n, run.last);
                    run.ever_signed = ever_signed;
                }
                self.check_packed(&mut run, &name, &object)?;
                run.add(n, object.epoch, object.events, size);
            }
        }
        self.write_pack(&run, end)?;
        Ok(end + 1)
    }

    /// Makes the pack of `run` (objects `run.first` through `last`), then removes the objects it
    /// covers that hold events.
    fn write_pack(&self, run: &Run, last: u64) -> Result<()> {
        let name = self.pack_name(run.first, last);
        let records: Vec<Vec<u8>> = run.records.iter().map(|(_, r)| r.clone()).collect();
        let events = run
            .records
            .first()
            .map(|(first, _)| (*first, records.as_slice()));
        // A pack is signed when what it covers is: its objects all signed but for a prefix the
        // last signed one proves (see `check_packed`). A pack of objects written before the
        // fleet had a key is not, as they were not.
        let bytes = match (self.keys(), run.signed, run.last) {
            (Some(_), true, Some(at)) => self.object(&name, run.epoch, events, at)?,
            _ => super::wal::encode(run.epoch, events),
        };
        // Made already (by another holder of the same history): the same events.
        self.bucket().create(&name, bytes)?;
        for n in &run.with_events {
            self.bucket().remove(&self.name(*n))?;
        }
        Ok(())
    }
}

impl Wal {
    /// With keys, checks the object `name` before `run` takes it, so that a pack signs only what
    /// the fleet's key signed: its events go on densely from the run's last (their chain holds),
    /// and its signature, if it has one, holds for its place; an unsigned object after a signed
    /// one is refused, and so is a run ending unsigned after a signed object (`Run::signed`
    /// turns false again: such a run's pack is left unsigned, and a reader refuses it). Without
    /// keys nothing is checked here: the reader checks every pack.
    fn check_packed(&self, run: &mut Run, name: &str, object: &Object) -> Result<()> {
        let Some(keys) = self.keys() else {
            return Ok(());
        };
        for (seq, record) in &object.events {
            let frame = Frame::decode(record)
                .map_err(|e| self.damaged(&format!("{name} holds an unreadable event: {e}")))?;
            let mut chain = match run.last {
                Some((at, hash)) => Chain::after(at, hash),
                None => Chain::after(Seq(seq.0.saturating_sub(1)), frame.prev_hash),
            };
            chain.check(*seq, record).map_err(|b| {
                self.damaged(&format!(
                    "{name} breaks the chain at event {}: {}, so it is not packed",
                    b.seq, b.detail
                ))
            })?;
            run.last = Some((*seq, frame.hash));
        }
        match &object.note {
            Some(note) => {
                let at = run.last.or_else(|| super::signature::signed_last(note));
                let checked = match at {
                    Some(at) => keys.check(note, name, object.epoch, at),
                    None => Err("its signature names no place in the log".into()),
                };
                checked
                    .map_err(|why| self.damaged(&format!("{name}: {why}, so it is not packed")))?;
                run.last = at;
                run.signed = true;
                run.ever_signed = true;
            }
            None if run.ever_signed => {
                return Err(self.damaged(&format!(
                    "{name} is not signed by the fleet's key {}, though objects before it are, so it is not packed",
                    keys.name()
                )));
            }
            None => run.signed = false,
        }
        Ok(())
    }
}

/// The objects of a pack being made.
struct Run {
    first: u64,
    epoch: u64,
    records: Records,
    bytes: usize,
    /// The objects that hold events (removed once the pack is made).
    with_events: Vec<u64>,
    /// The log's last event after the run's objects, as far as they tell (checked with keys).
    last: Option<(Seq, EventHash)>,
    /// Whether the run's last object was signed (and checked).
    signed: bool,
    /// Whether any object this job read was signed.
    ever_signed: bool,
}

impl Run {
    fn new(first: u64, last: Option<(Seq, EventHash)>) -> Run {
        Run {
            first,
            epoch: 0,
            records: Vec::new(),
            bytes: 0,
            with_events: Vec::new(),
            last,
            signed: false,
            ever_signed: false,
        }
    }

    fn add(&mut self, n: u64, epoch: u64, events: Records, size: usize) {
        self.epoch = self.epoch.max(epoch);
        if !events.is_empty() {
            self.with_events.push(n);
        }
        self.records.extend(events);
        self.bytes += size;
    }
}
