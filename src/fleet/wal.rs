//! A store's write-ahead log in the fleet's bucket, fenced by create-only names.
//!
//! The log of the store `NAME` is the objects `stores/NAME/wal/{n:020}`, numbered from 1 with no
//! gap. Each is written once, create-only, by the node that holds the store, and holds the epoch
//! of that node's lease and the events it makes durable (the store's own records, a run of seqs
//! going on from the object before), or no event at all: an epoch's *marker*, which a node that
//! takes a store over writes first (the byte layout is in `docs/formats.md`, "Fleet objects").
//!
//! **Fencing.** A holder writes object `n + 1` only after its object `n` was made, and a node
//! taking the store over at a higher epoch reads the whole log and claims the next number with
//! its marker. So a holder that lost the store without knowing it (paused, cut off) finds its
//! next number taken by the marker (or by an object after it) and can never get an event into
//! the store's history once the marker is made: a name, once claimed, is never free again while
//! it can fence anyone (only objects holding events are ever removed, once a pack covers them
//! ([`super::pack`]) or the store is deleted; markers never are). Whatever the old holder made
//! before the marker is the history the new holder goes on from, so no write it acknowledged is
//! lost. The invariants a reader checks, in [`Wal::scan`]: numbers run from 1 with no gap that
//! no pack covers, epochs never go down, seqs go on densely from one object (or pack) to the
//! next, and every record keeps the chain rules.

use std::sync::Arc;

use super::bucket::Bucket;
use super::signature::{LogKeys, NOTE_MAX};
use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{EventHash, Frame, Seq};
use crate::replica::segment;

/// The first bytes of every unsigned object of a store's write-ahead log.
const MAGIC: &[u8; 8] = b"MNEMOWL1";

/// The first bytes of every signed object of a store's write-ahead log (made by a node with the
/// fleet's signing key, [`super::signature`]).
const MAGIC_SIGNED: &[u8; 8] = b"MNEMOWL2";

/// The largest object of a write-ahead log read: a segment's largest, and its header.
pub(super) const OBJECT_MAX: u64 = crate::replica::SEGMENT_OBJECT_MAX + 64;

/// What a gap in the log's numbers is called.
const GAP: &str = "a log object is removed only once a pack covers it";

/// What an object or pack gone between a listing and its read is called.
const VANISHED: &str = "vanished after it was listed";

/// How many objects a scan fetches before it checks them (bounding what it holds at once
/// beyond the events it returns).
const SCAN_BATCH: usize = 256;

/// How many times [`Wal::take`] claims a next number that a holder still writing took first,
/// before it gives up.
const TAKE_TRIES: usize = 64;

/// Events as a log holds them: each event's seq and its record, in seq order.
pub type Records = Vec<(Seq, Vec<u8>)>;

/// Where a reader of a write-ahead log stands: the next object to read, the highest epoch read
/// so far, and the last event read (seq and chain hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// The number of the next object.
    pub object: u64,
    /// The highest epoch of the objects read (0 before the first).
    pub epoch: u64,
    /// The last event read: its seq (0 before the first) and chain hash.
    pub seq: Seq,
    /// The chain hash of event `seq`.
    pub hash: EventHash,
}

impl Position {
    /// Before the first object.
    pub const START: Position = Position {
        object: 1,
        epoch: 0,
        seq: Seq(0),
        hash: EventHash::ZERO,
    };
}

/// A store's write-ahead log in a fleet's bucket.
#[derive(Clone)]
pub struct Wal {
    bucket: Arc<Bucket>,
    store: String,
    /// The fleet's keys, when its logs are signed: what this log's reader checks, and its
    /// writer signs with.
    keys: Option<LogKeys>,
}

/// A store taken at an epoch ([`Wal::take`]): the holder that writes its log from now on, and
/// the events read on the way.
pub struct Taken {
    /// The holder, which alone can write the log until another node takes the store.
    pub holder: Holder,
    /// The events of the log past the position the take started from, in seq order.
    pub records: Records,
    /// Where the log stood before the take's marker: the end of `records`.
    pub read: Position,
}

/// The node that holds a store: it writes the store's log, one object per commit, until
/// another node takes the store over; from then on every commit is [`Error::Fenced`].
pub struct Holder {
    wal: Wal,
    epoch: u64,
    next: u64,
    seq: Seq,
    hash: EventHash,
    /// The highest epoch seen to take the store away, once a commit found its name taken.
    fenced: Option<u64>,
    /// The first object no pack covers, as far as this holder knows (1 until its first pack
    /// job finds out).
    pack_from: u64,
}

impl Wal {
    /// The write-ahead log of the store `store` in `bucket`.
    pub fn new(bucket: Arc<Bucket>, store: &str) -> Wal {
        Wal {
            bucket,
            store: store.to_string(),
            keys: None,
        }
    }

    /// This log, signed and checked with `keys` ([`super::signature`]): every object it makes
    /// carries a signature, and what it reads must be signed but for a prefix written before the
    /// fleet had a key.
    pub fn signed(mut self, keys: Option<LogKeys>) -> Wal {
        self.keys = keys;
        self
    }

    /// The keys this log is signed and checked with, if any.
    pub(super) fn keys(&self) -> Option<&LogKeys> {
        self.keys.as_ref()
    }

    /// The log of a store named by `url` as `FLEET/stores/NAME` (the fleet's bucket URL and the
    /// store's name, as `mnemo fleet status` and the fleet's errors give it), opened for reading
    /// only, if that is where a fleet keeps a store's log and it holds one: for a reader from
    /// outside the fleet (`mnemo verify --from`, `mnemo restore --from`). `None` when the URL
    /// does not end in `/stores/NAME` or the log there has no object.
    pub fn at(url: &str) -> Result<Option<Wal>> {
        let trimmed = url.trim_end_matches('/');
        let Some((fleet, name)) = trimmed
            .rsplit_once('/')
            .and_then(|(rest, name)| Some((rest.strip_suffix("/stores")?, name)))
        else {
            return Ok(None);
        };
        if crate::store::data_dir::check_store_name(name).is_err() {
            return Ok(None);
        }
        let bucket = match Bucket::open_existing(fleet) {
            Ok(bucket) => bucket,
            Err(_) => return Ok(None),
        };
        // A deleted store's log keeps only its markers: said so, rather than called damaged.
        if let Some(lease) = super::lease::latest(&bucket, name)
            .ok()
            .flatten()
            .filter(|lease| lease.deleted)
        {
            return Err(Error::InvalidArgument(format!(
                "the store {name} of the fleet at {fleet} was deleted (its lease at epoch {} says so): its memories and log were removed from the bucket, so there is nothing to verify or restore",
                lease.epoch
            )));
        }
        let wal = Wal::new(Arc::new(bucket), name);
        Ok((!wal.bucket.list(&wal.dir())?.is_empty()).then_some(wal))
    }

    /// The name of the store whose log this is.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// The URL of the fleet's bucket the log is in.
    pub fn fleet_url(&self) -> &str {
        self.bucket.url()
    }

    /// Whether `url` is a fleet's bucket (or its `stores/` directory) rather than one store's log
    /// in it: it holds the fleet's leases, heartbeats or operator token.
    pub fn is_fleet_root(url: &str) -> bool {
        let root = url.trim_end_matches('/');
        let root = root.strip_suffix("/stores").unwrap_or(root);
        Bucket::open_existing(root).is_ok_and(|bucket| {
            bucket.dirs("").is_ok_and(|dirs| {
                dirs.iter()
                    .any(|dir| ["leases", "nodes", "operator"].contains(&dir.as_str()))
            })
        })
    }

    fn dir(&self) -> String {
        format!("stores/{}/wal", self.store)
    }

    /// The bucket the log is in.
    pub(super) fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    pub(super) fn name(&self, n: u64) -> String {
        format!("{}/{n:020}", self.dir())
    }

    /// Reads the objects from `from` on, checking every invariant of the log, and returns where
    /// it then stands and the events read. A number missing before a later one, a name that is
    /// no number, an epoch lower than one before it, seqs that do not go on from the object
    /// before, a record that breaks the chain, or a damaged object is [`Error::ReplicaDamaged`].
    /// With keys ([`Wal::signed`]), so is an object not signed by them, but for a prefix of a log
    /// read from its start before its first signed object; and so is a log read from its start
    /// of which no object is signed, unless the keys adopt it.
    pub fn scan(&self, from: &Position) -> Result<(Position, Records)> {
        let (at, records, open) = self.scan_open(from, *from == Position::START)?;
        self.refuse_unsigned(from, &at, open)?;
        Ok((at, records))
    }

    /// [`Wal::scan`] without its last check, telling whether unsigned objects may still come
    /// (`open`: none of the objects read from the log's start was signed), for a reader that
    /// goes on reading.
    fn scan_open(&self, from: &Position, open: bool) -> Result<(Position, Records, bool)> {
        // A listing made while objects are being made may show a later one and not the one
        // before it (a directory read is not atomic), and one made while a pack is made may
        // miss the pack and then the objects it covers, removed meanwhile: a gap or an object
        // gone is looked at again, from a new listing, before it is called damage.
        let mut tries = 0;
        loop {
            match self.scan_once(from, open) {
                Err(Error::ReplicaDamaged { what })
                    if (what.contains(GAP) || what.contains(VANISHED)) && tries < 3 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                done => return done,
            }
        }
    }

    /// Refuses a log read from its start (`from`) to `at` none of whose objects was signed
    /// (`open`), when it has keys, unless the fleet's key adopted it as it ends at `at`
    /// ([`Wal::adopt`]).
    fn refuse_unsigned(&self, from: &Position, at: &Position, open: bool) -> Result<()> {
        let Some(keys) = &self.keys else {
            return Ok(());
        };
        if !open || at.object <= from.object {
            return Ok(());
        }
        let adoption = self.bucket.get(&self.adoption_name(), NOTE_MAX as u64)?;
        if adoption.is_some_and(|note| keys.adopted(&note, &self.store, (at.seq, at.hash))) {
            return Ok(());
        }
        Err(self.damaged(&format!(
            "none of its objects is signed by the fleet's key {}, and the key did not adopt it as it ends (event {}): it was written before the fleet had its key, by a node without --signing-key, or by someone without the key. A log written before the fleet had a key is adopted once, while no node writes it, with `mnemo fleet adopt {} --fleet URL --signing-key FILE`",
            keys.name(),
            at.seq,
            self.store
        )))
    }

    /// The object recording the fleet's key's adoption of this log.
    fn adoption_name(&self) -> String {
        format!("stores/{}/adopted", self.store)
    }

    /// Adopts this log, written before the fleet had a key, with this log's signing key: reads
    /// it whole (every invariant checked) and records, create-only, the key's signature of where
    /// it ends (`stores/NAME/adopted`), so that a keyed reader takes it as it is, and nothing
    /// an unkeyed writer adds after it. Run while no node writes the store. Returns where the
    /// log ends. A log with a signed object needs no adoption, and one is adopted once.
    pub fn adopt(&self) -> Result<Position> {
        let keys = self.keys.as_ref().ok_or_else(|| {
            Error::InvalidArgument("adopting a log takes the fleet's signing key".into())
        })?;
        let (at, _, open) = self.scan_open(&Position::START, true)?;
        if at.object == 1 {
            return Err(Error::InvalidArgument(format!(
                "the store {} has no log to adopt",
                self.store
            )));
        }
        if !open {
            return Err(Error::InvalidArgument(format!(
                "the log of the store {} is signed by the fleet's key already: it needs no adoption",
                self.store
            )));
        }
        let note = keys.sign_adoption(&self.store, (at.seq, at.hash))?;
        if !self.bucket.create(&self.adoption_name(), note)? {
            return Err(Error::InvalidArgument(format!(
                "the log of the store {} was adopted before ({} is there) and has not been taken by a node with the key since: start the nodes with --signing-key; if an unkeyed node wrote it since, it is no longer the log adopted, and the object must be removed by hand before adopting it again",
                self.store,
                self.adoption_name()
            )));
        }
        Ok(at)
    }

    fn scan_once(&self, from: &Position, mut open: bool) -> Result<(Position, Records, bool)> {
        let packs = self.packs()?;
        let dir = self.dir();
        let mut numbers = Vec::new();
        for listed in self.bucket.list(&dir)? {
            let tail = listed.name.strip_prefix(&format!("{dir}/")).unwrap_or("");
            let n = segment::fixed_number(tail)
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    self.damaged(&format!(
                        "it holds {}, which is no log object's name",
                        listed.name
                    ))
                })?;
            numbers.push(n);
        }
        let mut at = *from;
        let mut chain = Chain::after(at.seq, at.hash);
        let mut records = Vec::new();
        // The packs first: the one that covers the next object and reaches furthest, each time.
        while let Some((first, last)) = packs
            .iter()
            .filter(|(first, last)| *first <= at.object && at.object <= *last)
            .max_by_key(|(_, last)| *last)
            .copied()
        {
            let name = self.pack_name(first, last);
            let bytes = self
                .bucket
                .get(&name, OBJECT_MAX)?
                .ok_or_else(|| self.damaged(&format!("the pack {name} {VANISHED}")))?;
            let object = Object::decode(&name, &bytes)?;
            let read = Reading {
                name: &name,
                what: &format!("the pack {name}"),
                overlap: true,
            };
            self.read_on(&mut at, &mut chain, &mut records, &mut open, read, object)?;
            at.object = last + 1;
        }
        numbers.retain(|n| *n >= at.object);
        // Fetched many at once, in batches (a log read whole can be long), checked in order.
        for batch in numbers.chunks(SCAN_BATCH) {
            let names: Vec<String> = batch.iter().map(|n| self.name(*n)).collect();
            let fetched = self.bucket.get_all(&names, OBJECT_MAX)?;
            for ((n, name), bytes) in batch.iter().copied().zip(names).zip(fetched) {
                if n != at.object {
                    return Err(self.damaged(&format!(
                        "object {n} is there but object {} is not, and no pack covers it ({GAP})",
                        at.object
                    )));
                }
                let bytes = bytes.ok_or_else(|| self.damaged(&format!("object {n} {VANISHED}")))?;
                let object = Object::decode(&name, &bytes)?;
                let read = Reading {
                    name: &name,
                    what: &format!("object {n}"),
                    overlap: false,
                };
                self.read_on(&mut at, &mut chain, &mut records, &mut open, read, object)?;
                at.object = n + 1;
            }
        }
        Ok((at, records, open))
    }

    /// Takes the epoch and events of `object`, the object or pack `read` names, into the log read
    /// so far (`at`, `chain`, `records`), checking that its epoch does not go down, its events
    /// keep the chain, and, with keys, that it is signed by them for its place in the log (or
    /// comes before any signed object: `open`). With `read.overlap` (a pack, which a position
    /// may lie inside), events up to `at` are skipped, the one at `at` checked to be the
    /// position's own.
    fn read_on(
        &self,
        at: &mut Position,
        chain: &mut Chain,
        records: &mut Records,
        open: &mut bool,
        read: Reading<'_>,
        object: Object,
    ) -> Result<()> {
        let Reading {
            name,
            what,
            overlap,
        } = read;
        let epoch = object.epoch;
        if epoch < at.epoch {
            return Err(self.damaged(&format!(
                "{what} was written at epoch {epoch}, after an object of epoch {}: a node wrote past the one that took the store from it",
                at.epoch
            )));
        }
        for (seq, record) in object.events {
            if overlap && seq <= at.seq {
                let hash = Frame::decode(&record).map(|f| f.hash).ok();
                if seq == at.seq && hash != Some(at.hash) {
                    return Err(self.damaged(&format!(
                        "{what} holds another event {seq} than the position read from"
                    )));
                }
                continue;
            }
            let frame = chain.check(seq, &record).map_err(|b| {
                self.damaged(&format!(
                    "{what} breaks the chain at event {}: {}",
                    b.seq, b.detail
                ))
            })?;
            at.seq = seq;
            at.hash = frame.hash;
            records.push((seq, record));
        }
        at.epoch = epoch;
        if let Some(keys) = &self.keys {
            match object.note {
                Some(note) => {
                    keys.check(&note, name, epoch, (at.seq, at.hash))
                        .map_err(|why| self.damaged(&format!("{what}: {why}")))?;
                    *open = false;
                }
                None if *open => {}
                None => {
                    return Err(self.damaged(&format!(
                        "{what} is not signed by the fleet's key {}, though objects before it are: a node without --signing-key wrote it, or someone without the key wrote the bucket",
                        keys.name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether `at` is a real position of the log: before the first object, or just after an
    /// object of epoch `at.epoch` whose last event is `at.seq` with the hash `at.hash` (one read).
    /// A position recorded by a node is checked so before a take starts from it: one that is not
    /// (damaged, or written for another log) would have the take claim a number past a gap.
    pub fn holds(&self, at: &Position) -> Result<bool> {
        if *at == Position::START {
            return Ok(true);
        }
        let Some(n) = at.object.checked_sub(1).filter(|n| *n > 0) else {
            return Ok(false);
        };
        let name = self.name(n);
        let Some(bytes) = self.bucket.get(&name, OBJECT_MAX)? else {
            return Ok(false);
        };
        let Ok(object) = Object::decode(&name, &bytes) else {
            return Ok(false);
        };
        let last = object
            .events
            .last()
            .and_then(|(seq, record)| Some((*seq, Frame::decode(record).ok()?.hash)));
        // With keys, a position is one of the signed log's (one recorded before the fleet had a
        // key is not: the copy is built anew, from the log read whole and checked).
        let signed = match (&self.keys, &object.note) {
            (None, _) => true,
            (Some(keys), Some(note)) => {
                keys.check(note, &name, at.epoch, (at.seq, at.hash)).is_ok()
            }
            (Some(_), None) => false,
        };
        Ok(signed && object.epoch == at.epoch && last == Some((at.seq, at.hash)))
    }

    /// Takes the store at `epoch` (the epoch of the lease this node just won): reads the log
    /// from `from` on and claims the next number with the epoch's marker; when a holder still
    /// writing claimed that number first, reads on from there and claims the next. Returns the
    /// holder and every event read. An epoch already in the log at or above `epoch` means
    /// another node took the store later: [`Error::Fenced`].
    pub fn take(&self, epoch: u64, from: &Position) -> Result<Taken> {
        let mut at = *from;
        let mut records = Vec::new();
        let mut open = *from == Position::START;
        for _ in 0..TAKE_TRIES {
            let (now, read, still_open) = self.scan_open(&at, open)?;
            records.extend(read);
            (at, open) = (now, still_open);
            self.refuse_unsigned(from, &at, open)?;
            if at.epoch >= epoch {
                return Err(Error::Fenced {
                    store: self.store.clone(),
                    epoch: at.epoch,
                });
            }
            let name = self.name(at.object);
            let marker = self.object(&name, epoch, None, (at.seq, at.hash))?;
            if self.bucket.create(&name, marker)? {
                return Ok(Taken {
                    holder: Holder {
                        wal: self.clone(),
                        epoch,
                        next: at.object + 1,
                        seq: at.seq,
                        hash: at.hash,
                        fenced: None,
                        pack_from: 1,
                    },
                    records,
                    read: at,
                });
            }
        }
        Err(Error::Replica {
            url: self.bucket.url().to_string(),
            cause: format!(
                "the log of the store {} grew under every one of {TAKE_TRIES} claims of its next object: its old holder is still writing; try the takeover again",
                self.store
            ),
        })
    }

    /// Deletes the store's data from the bucket, its lease at `epoch` saying it is deleted
    /// (made by [`super::lease::Leases::delete`]): fences the log at `epoch` (an epoch's marker
    /// after its last object, unless an object of `epoch` ends it already), then removes every
    /// object of the log that holds events and everything else kept under the store (label
    /// copies, MCP session records), and last records that it did (`stores/NAME/deleted`).
    /// The markers stay: a stale holder's next name is always a marker (see `docs/fleet.md`,
    /// "Deleting a store keeps what fences"), so none ever gets a commit in. Done again after a cut, by any node, it
    /// finishes what the cut left.
    pub fn delete(&self, epoch: u64) -> Result<()> {
        self.fence(epoch)?;
        let names: Vec<String> = self
            .bucket
            .list(&self.dir())?
            .into_iter()
            .map(|l| l.name)
            .collect();
        for batch in names.chunks(SCAN_BATCH) {
            let fetched = self.bucket.get_all(batch, OBJECT_MAX)?;
            for (name, bytes) in batch.iter().zip(fetched) {
                // An object that does not decode is kept: it may be a damaged marker.
                let events = bytes.and_then(|b| decode(name, &b).ok()).map(|(_, e)| e);
                if events.is_some_and(|events| !events.is_empty()) {
                    self.bucket.remove(name)?;
                }
            }
        }
        let top = format!("stores/{}", self.store);
        for dir in self.bucket.dirs(&top)? {
            if dir != "wal" {
                self.remove_tree(&format!("{top}/{dir}"))?;
            }
        }
        self.bucket.create(&deleted_name(&self.store), Vec::new())?;
        Ok(())
    }

    /// Whether the store's deletion finished ([`Wal::delete`] recorded it).
    pub fn deletion_finished(&self) -> Result<bool> {
        Ok(self.bucket.get(&deleted_name(&self.store), 64)?.is_some())
    }

    /// Claims the name after the log's last object with `epoch`'s marker, unless an object of
    /// `epoch` or later ends the log already. Reads only the last object: a log whose events
    /// were partly removed (a delete cut short) is fenced all the same.
    fn fence(&self, epoch: u64) -> Result<()> {
        for _ in 0..TAKE_TRIES {
            let dir = format!("{}/", self.dir());
            let last = self
                .bucket
                .list(&self.dir())?
                .iter()
                .filter_map(|l| l.name.strip_prefix(&dir)?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            if last > 0 {
                let name = self.name(last);
                if let Some(bytes) = self.bucket.get(&name, OBJECT_MAX)? {
                    if decode(&name, &bytes)?.0 >= epoch {
                        return Ok(());
                    }
                }
            }
            if self
                .bucket
                .create(&self.name(last + 1), encode(epoch, None))?
            {
                return Ok(());
            }
        }
        Err(Error::Replica {
            url: self.bucket.url().to_string(),
            cause: format!(
                "the log of the store {} grew under every one of {TAKE_TRIES} claims of its next object: its old holder is still writing; delete it again",
                self.store
            ),
        })
    }

    /// Removes every object under `dir`, however deep.
    fn remove_tree(&self, dir: &str) -> Result<()> {
        for listed in self.bucket.list(dir)? {
            self.bucket.remove(&listed.name)?;
        }
        for sub in self.bucket.dirs(dir)? {
            self.remove_tree(&format!("{dir}/{sub}"))?;
        }
        Ok(())
    }

    pub(super) fn damaged(&self, what: &str) -> Error {
        Error::damaged(format!(
            "the fleet log of the store {} at {}/stores/{}: {what}",
            self.store,
            self.bucket.url().trim_end_matches('/'),
            self.store
        ))
    }
}

impl Holder {
    /// Where the log stands after this holder's last commit.
    pub fn position(&self) -> Position {
        Position {
            object: self.next,
            epoch: self.epoch,
            seq: self.seq,
            hash: self.hash,
        }
    }

    /// The last object a pack job should cover now ([`Wal::pack`]), when at least
    /// [`PACK_OBJECTS`](super::pack::PACK_OBJECTS) objects past the last pack this holder knows
    /// of are older than the newest [`KEEP`](super::pack::KEEP).
    pub fn pack_due(&self) -> Option<u64> {
        let upto = self.next.checked_sub(1 + super::pack::KEEP)?;
        (upto + 1 >= self.pack_from + super::pack::PACK_OBJECTS).then_some(upto)
    }

    /// Records that the objects before `from` are packed (what [`Wal::pack`] returned).
    pub fn packed(&mut self, from: u64) {
        self.pack_from = self.pack_from.max(from);
    }

    /// The log this holder writes.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    /// The last event in the log, and its chain hash.
    #[cfg(any(test, feature = "testing"))]
    pub fn head(&self) -> (Seq, EventHash) {
        (self.seq, self.hash)
    }

    /// Makes `records` (the store's events right after the last one committed, in seq order)
    /// durable in the log: one create-only object per run of [`segment::SEGMENT_BYTES`]. Once a
    /// name is found taken, the store was taken over: this and every later commit is
    /// [`Error::Fenced`], and whatever the commit did not make is not in the store's history.
    pub fn commit(&mut self, records: &[(Seq, Vec<u8>)]) -> Result<()> {
        if let Some(epoch) = self.fenced {
            return Err(self.fenced_error(epoch));
        }
        let mut chain = Chain::after(self.seq, self.hash);
        let mut run: Vec<Vec<u8>> = Vec::new();
        let mut first = Seq(self.seq.0 + 1);
        let mut bytes = 0;
        for (i, (seq, record)) in records.iter().enumerate() {
            let frame = chain.check(*seq, record).map_err(|b| {
                Error::InvalidArgument(format!(
                    "a commit to the fleet log of {} breaks the chain at event {}: {}",
                    self.wal.store, b.seq, b.detail
                ))
            })?;
            bytes += record.len();
            run.push(record.clone());
            if bytes >= segment::SEGMENT_BYTES || i + 1 == records.len() {
                self.claim(first, &run, (*seq, frame.hash))?;
                first = Seq(seq.0 + 1);
                run.clear();
                bytes = 0;
            }
        }
        Ok(())
    }

    fn claim(&mut self, first: Seq, run: &[Vec<u8>], last: (Seq, EventHash)) -> Result<()> {
        let name = self.wal.name(self.next);
        let bytes = self
            .wal
            .object(&name, self.epoch, Some((first, run)), last)?;
        if self.wal.bucket.create(&name, bytes)? {
            self.next += 1;
            (self.seq, self.hash) = last;
            return Ok(());
        }
        // The name is taken: a node took the store over. Its epoch is read for the message; a
        // failure to read it changes nothing (this holder is fenced whatever it is).
        let epoch = self
            .wal
            .bucket
            .get(&self.wal.name(self.next), OBJECT_MAX)
            .ok()
            .flatten()
            .and_then(|b| decode(&self.wal.name(self.next), &b).ok())
            .map_or(self.epoch + 1, |(epoch, _)| epoch);
        self.fenced = Some(epoch);
        Err(self.fenced_error(epoch))
    }

    fn fenced_error(&self, epoch: u64) -> Error {
        Error::Fenced {
            store: self.wal.store.clone(),
            epoch,
        }
    }
}

/// The object recording that the deletion of `store` finished.
fn deleted_name(store: &str) -> String {
    format!("stores/{store}/deleted")
}

impl Wal {
    /// The bytes of the object `name` of `epoch` holding `events` (or an epoch's marker), after
    /// which the log's last event is `last`: signed when this log's keys can sign.
    pub(super) fn object(
        &self,
        name: &str,
        epoch: u64,
        events: Option<(Seq, &[Vec<u8>])>,
        last: (Seq, EventHash),
    ) -> Result<Vec<u8>> {
        let note = match &self.keys {
            Some(keys) => keys.sign(name, epoch, last)?,
            None => None,
        };
        Ok(encode_with(epoch, events, note.as_deref()))
    }
}

/// The bytes of an unsigned log object of `epoch` holding `events` (the first seq and the
/// records), or an epoch's marker when `None`.
pub(super) fn encode(epoch: u64, events: Option<(Seq, &[Vec<u8>])>) -> Vec<u8> {
    encode_with(epoch, events, None)
}

/// The bytes of a log object of `epoch` holding `events`, carrying the signed note `note`.
fn encode_with(epoch: u64, events: Option<(Seq, &[Vec<u8>])>, note: Option<&[u8]>) -> Vec<u8> {
    let mut out = match note {
        Some(_) => MAGIC_SIGNED.to_vec(),
        None => MAGIC.to_vec(),
    };
    out.extend_from_slice(&epoch.to_le_bytes());
    if let Some(note) = note {
        let len = u32::try_from(note.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(note);
    }
    if let Some((first, records)) = events {
        out.extend_from_slice(&segment::encode(first, records));
    }
    let digest = blake3::hash(&out);
    out.extend_from_slice(digest.as_bytes());
    out
}

/// The epoch and the events of the log object `bytes` named `name`.
pub(super) fn decode(name: &str, bytes: &[u8]) -> Result<(u64, Records)> {
    Object::decode(name, bytes).map(|object| (object.epoch, object.events))
}

/// A log object (or pack) read: its epoch, its events, and the signed note it carries if a node
/// with the fleet's key made it.
pub(super) struct Object {
    pub(super) epoch: u64,
    pub(super) events: Records,
    pub(super) note: Option<Vec<u8>>,
}

impl Object {
    /// The log object `bytes` named `name`; damage is [`Error::ReplicaDamaged`].
    pub(super) fn decode(name: &str, bytes: &[u8]) -> Result<Object> {
        let bad = |why: &str| Error::damaged(format!("fleet log object {name}: {why}"));
        let Some((body, digest)) = bytes.split_last_chunk::<32>() else {
            return Err(bad("it is shorter than a log object can be"));
        };
        if blake3::hash(body).as_bytes() != digest {
            return Err(bad(
                "its bytes do not hash to the digest it ends with (damaged or cut)",
            ));
        }
        let (signed, rest) = match body.split_first_chunk::<8>() {
            Some((magic, rest)) if magic == MAGIC => (false, rest),
            Some((magic, rest)) if magic == MAGIC_SIGNED => (true, rest),
            _ => return Err(bad("it does not start with MNEMOWL1 or MNEMOWL2")),
        };
        let (epoch, mut rest) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| bad("it has no epoch"))?;
        let epoch = u64::from_le_bytes(*epoch);
        let mut note = None;
        if signed {
            let (len, after) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| bad("its signature's length is cut"))?;
            let len = usize::try_from(u32::from_le_bytes(*len)).unwrap_or(usize::MAX);
            if len > super::signature::NOTE_MAX || len > after.len() {
                return Err(bad(
                    "its signature is longer than a signature can be, or cut",
                ));
            }
            let (text, after) = after.split_at(len);
            note = Some(text.to_vec());
            rest = after;
        }
        if rest.is_empty() {
            return Ok(Object {
                epoch,
                events: Vec::new(),
                note,
            });
        }
        let range = segment::range_of(rest).ok_or_else(|| bad("its events' header is cut"))?;
        Ok(Object {
            epoch,
            events: segment::decode(name, rest, range)?,
            note,
        })
    }
}

/// Which object or pack [`Wal::read_on`] reads: its name in the bucket, what messages call it,
/// and whether a position may lie inside it (a pack).
struct Reading<'a> {
    name: &'a str,
    what: &'a str,
    overlap: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::signature::FleetKey;
    use crate::model::chain::sample::frame;
    use proptest::prelude::*;

    fn wal() -> Wal {
        Wal::new(Arc::new(Bucket::in_memory().expect("bucket")), "notes")
    }

    /// `n` events going on after `head`, naming `tag`.
    fn after(head: (Seq, EventHash), n: u64, tag: &str) -> Vec<(Seq, Vec<u8>)> {
        let (mut seq, mut prev) = head;
        (0..n)
            .map(|_| {
                seq = Seq(seq.0 + 1);
                let frame = frame(seq, prev, tag);
                prev = frame.hash;
                (seq, frame.encode())
            })
            .collect()
    }

    #[test]
    fn a_holder_taken_over_is_fenced_and_what_it_made_before_goes_on() {
        let wal = wal();
        let mut a = wal.take(1, &Position::START).expect("a takes").holder;
        let first = after(a.head(), 3, "a");
        a.commit(&first).expect("a commits");
        let b = wal.take(2, &Position::START).expect("b takes");
        assert_eq!(
            b.records, first,
            "the new holder goes on from what the old one made"
        );
        let late = after(a.head(), 1, "a");
        assert!(
            matches!(a.commit(&late), Err(Error::Fenced { epoch: 2, .. })),
            "the old holder's next commit is fenced"
        );
        assert!(
            matches!(a.commit(&late), Err(Error::Fenced { .. })),
            "and stays so"
        );
        let mut b = b.holder;
        let next = after(b.head(), 2, "b");
        b.commit(&next).expect("b commits");
        let (at, all) = wal.scan(&Position::START).expect("scan");
        assert_eq!(all, [first, next].concat());
        assert_eq!((at.object, at.epoch, at.seq), (5, 2, Seq(5)));
        // A take at an epoch the log has passed is refused.
        assert!(matches!(
            wal.take(2, &Position::START),
            Err(Error::Fenced { epoch: 2, .. })
        ));
    }

    #[test]
    fn a_deleted_stores_log_keeps_only_markers_and_no_stale_holder_gets_a_commit_after_it() {
        let wal = wal();
        let mut holders = Vec::new();
        for epoch in 1..=3 {
            let mut holder = wal.take(epoch, &Position::START).expect("takes").holder;
            for _ in 0..2 {
                let next = after(holder.head(), 2, "x");
                holder.commit(&next).expect("commits");
            }
            holders.push(holder);
        }
        wal.bucket
            .create("stores/notes/label/00000000000000000004", b"label".to_vec())
            .expect("a label copy");
        wal.bucket
            .create("stores/notes/mcp/s1/state", b"session".to_vec())
            .expect("a session record");
        // The holder of epoch 3 deletes the store at epoch 4; the delete is done twice (a node
        // finishing one cut short), which changes nothing more.
        assert!(!wal.deletion_finished().expect("read"));
        wal.delete(4).expect("delete");
        wal.delete(4).expect("delete again");
        assert!(wal.deletion_finished().expect("read"));
        let kept = |wal: &Wal| -> Vec<(String, u64, usize)> {
            let names: Vec<String> = wal
                .bucket
                .list(&wal.dir())
                .expect("list")
                .into_iter()
                .map(|l| l.name)
                .collect();
            let bytes = wal.bucket.get_all(&names, OBJECT_MAX).expect("get");
            names
                .into_iter()
                .zip(bytes)
                .map(|(name, b)| {
                    let (epoch, events) = decode(&name, &b.expect("listed")).expect("decodes");
                    (name, epoch, events.len())
                })
                .collect()
        };
        // No holder from before the delete gets a commit in: each one's next name is a marker
        // (of the epoch that took the store from it, or of the deletion's), kept.
        for stale in &mut holders {
            let late = after(stale.head(), 1, "late");
            assert!(
                matches!(stale.commit(&late), Err(Error::Fenced { .. })),
                "a stale holder's commit after the delete is fenced"
            );
        }
        let left = kept(&wal);
        assert_eq!(
            left.iter().map(|(_, e, n)| (*e, *n)).collect::<Vec<_>>(),
            [(1, 0), (2, 0), (3, 0), (4, 0)],
            "only the markers are left, the deletion's last: {left:?}"
        );
        assert!(wal.bucket.dirs("stores/notes").expect("dirs") == ["wal"]);
    }

    #[test]
    fn a_take_that_loses_the_next_name_to_the_old_holder_reads_on_and_claims_after_it() {
        let wal = wal();
        let mut a = wal.take(1, &Position::START).expect("a takes").holder;
        a.commit(&after(a.head(), 2, "a")).expect("a commits");
        // The old holder's object lands between the new holder's listing and its claim: the
        // claim finds the name taken, reads it, and claims the next one.
        let (at, _) = wal.scan(&Position::START).expect("scan");
        a.commit(&after(a.head(), 1, "a")).expect("a commits again");
        let b = wal.take(2, &at).expect("b takes");
        assert_eq!(b.records.len(), 1);
        assert_eq!(b.holder.head().0, Seq(3));
        assert!(a.commit(&after(a.head(), 1, "a")).is_err());
    }

    #[test]
    fn only_a_real_position_of_the_log_is_held_for_one() {
        let wal = wal();
        let taken = wal.take(1, &Position::START).expect("take");
        assert_eq!(taken.read, Position::START);
        let mut a = taken.holder;
        a.commit(&after(a.head(), 3, "a")).expect("commit");
        let at = a.position();
        assert!(wal.holds(&at).expect("holds"), "{at:?}");
        assert!(wal.holds(&Position::START).expect("holds"));
        let wrong = [
            Position {
                object: at.object + 5,
                ..at
            },
            Position { seq: Seq(2), ..at },
            Position {
                hash: EventHash::ZERO,
                ..at
            },
            Position { epoch: 7, ..at },
            Position { object: 2, ..at },
            Position { object: 0, ..at },
        ];
        for position in wrong {
            assert!(!wal.holds(&position).expect("holds"), "{position:?}");
        }
        // A take from a real position reads only what follows it.
        let mut a = a;
        a.commit(&after(a.head(), 2, "a")).expect("commit");
        let b = wal.take(2, &at).expect("take from a position");
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.read.seq, Seq(5));
    }

    #[test]
    fn damage_to_the_log_is_named() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let wal = Wal::new(Arc::clone(&bucket), "notes");
        let mut a = wal.take(1, &Position::START).expect("take").holder;
        a.commit(&after(a.head(), 2, "a")).expect("commit");
        let name = wal.name(2);
        let good = bucket.get(&name, OBJECT_MAX).expect("get").expect("there");
        type Damage<'a> = Box<dyn Fn(&Bucket) + 'a>;
        let cases: Vec<(&str, Damage)> = vec![
            (
                "a gap",
                Box::new(|b: &Bucket| {
                    b.create(&wal.name(4), encode(1, None)).expect("create");
                }),
            ),
            (
                "a foreign name",
                Box::new(|b: &Bucket| {
                    b.create("stores/notes/wal/x", Vec::new()).expect("create");
                }),
            ),
            (
                "an epoch going down",
                Box::new(|b: &Bucket| {
                    b.create(&wal.name(3), encode(0, None)).expect("create");
                }),
            ),
            (
                "a broken chain",
                Box::new(|b: &Bucket| {
                    let other = after((Seq(2), EventHash::ZERO), 1, "x");
                    let run: Vec<Vec<u8>> = other.into_iter().map(|(_, r)| r).collect();
                    b.create(&wal.name(3), encode(1, Some((Seq(3), &run))))
                        .expect("create");
                }),
            ),
        ];
        for (what, damage) in cases {
            let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
            let copy = Wal::new(Arc::clone(&bucket), "notes");
            bucket
                .create(&copy.name(1), encode(1, None))
                .expect("marker");
            bucket.create(&copy.name(2), good.clone()).expect("object");
            copy.scan(&Position::START)
                .expect("intact before the damage");
            damage(&bucket);
            assert!(
                matches!(
                    copy.scan(&Position::START),
                    Err(Error::ReplicaDamaged { .. })
                ),
                "{what} is named"
            );
        }
        for i in 0..good.len() {
            let mut flipped = good.clone();
            flipped[i] ^= 1;
            assert!(decode(&name, &flipped).is_err(), "byte {i}");
            assert!(decode(&name, &good[..i]).is_err(), "cut at {i}");
        }
    }

    #[test]
    fn a_pack_replaces_the_objects_it_covers_and_damage_to_it_is_named() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let wal = Wal::new(Arc::clone(&bucket), "notes");
        let mut a = wal.take(1, &Position::START).expect("take").holder;
        let mut all = Vec::new();
        for _ in 0..6 {
            let next = after(a.head(), 2, "a");
            a.commit(&next).expect("commit");
            all.extend(next);
        }
        let (middle, _) = wal.scan(&Position::START).expect("scan");
        let middle = Position {
            object: 4,
            seq: Seq(4),
            hash: Frame::decode(&all[3].1).expect("frame").hash,
            ..middle
        };
        // Objects 1 (the marker) to 5 packed; the marker stays, 2 to 5 go, 6 and 7 stay.
        assert_eq!(wal.pack(5, 1).expect("pack"), 6);
        let left: Vec<String> = bucket
            .list(&wal.dir())
            .expect("list")
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(left, [wal.name(1), wal.name(6), wal.name(7)]);
        assert_eq!(wal.scan(&Position::START).expect("scan").1, all);
        assert_eq!(wal.scan(&middle).expect("scan").1, all[4..]);
        // Packing again changes nothing; a stale position inside the pack is still read on from.
        assert_eq!(wal.pack(5, 1).expect("pack"), 6);
        let name = wal.pack_name(1, 5);
        let good = bucket.get(&name, OBJECT_MAX).expect("get").expect("there");
        let replace = |bytes: Vec<u8>| {
            bucket.remove(&name).expect("remove");
            bucket.create(&name, bytes).expect("create");
        };
        let damaged = |what: &str| {
            assert!(
                matches!(
                    wal.scan(&Position::START),
                    Err(Error::ReplicaDamaged { .. })
                ),
                "{what} is named"
            );
        };
        for i in (0..good.len()).step_by(7) {
            let mut flipped = good.clone();
            flipped[i] ^= 1;
            replace(flipped);
            damaged(&format!("byte {i} flipped"));
        }
        let other = after((Seq(0), EventHash::ZERO), 8, "forged");
        let run: Vec<Vec<u8>> = other.into_iter().map(|(_, r)| r).collect();
        replace(encode(1, Some((Seq(1), &run))));
        damaged("a pack of another history");
        replace(good.clone());
        assert_eq!(wal.scan(&Position::START).expect("scan").1, all);
        bucket
            .create("stores/notes/pack/x", Vec::new())
            .expect("create");
        damaged("a name that is no pack's");
        bucket.remove("stores/notes/pack/x").expect("remove");
        bucket.remove(&name).expect("remove");
        damaged("a pack gone");
    }

    /// A bucket holding what `from` holds under `stores/notes/wal` and `stores/notes/pack`.
    fn copy_of(from: &Bucket) -> Arc<Bucket> {
        let to = Arc::new(Bucket::in_memory().expect("bucket"));
        for dir in ["stores/notes/wal", "stores/notes/pack"] {
            for listed in from.list(dir).expect("list") {
                let bytes = from
                    .get(&listed.name, OBJECT_MAX)
                    .expect("get")
                    .expect("there");
                to.create(&listed.name, bytes).expect("create");
            }
        }
        to
    }

    /// Whether reading the log in `bucket` with `keys` is refused as damage saying `why`.
    fn refused(bucket: &Arc<Bucket>, keys: &LogKeys, why: &str) -> bool {
        let wal = Wal::new(Arc::clone(bucket), "notes").signed(Some(keys.clone()));
        match wal.scan(&Position::START) {
            Err(Error::ReplicaDamaged { what }) => what.contains(why) || panic!("{what}"),
            other => panic!("read: {:?}", other.map(|(at, _)| at)),
        }
    }

    #[test]
    fn a_signed_log_takes_nothing_its_key_did_not_sign_but_a_prefix_from_before_the_key() {
        let key = FleetKey::generated("mnemo-fleet");
        let keys = LogKeys::signing(&key).expect("keys");
        let auditor = LogKeys::checking(key.verifier()).expect("keys");
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let plain = Wal::new(Arc::clone(&bucket), "notes");
        // Objects 1 and 2, written before the fleet had a key.
        let mut a = plain.take(1, &Position::START).expect("take").holder;
        a.commit(&after(a.head(), 3, "before")).expect("commit");
        let before_key = a.position();
        let signed = Wal::new(Arc::clone(&bucket), "notes").signed(Some(keys.clone()));
        let Err(Error::ReplicaDamaged { what }) = signed.take(2, &Position::START) else {
            panic!("a log with no signed object is taken only when adopted");
        };
        assert!(what.contains("mnemo fleet adopt"), "{what}");
        assert!(refused(&bucket, &auditor, "none of its objects is signed"));
        assert!(
            Wal::new(Arc::clone(&bucket), "notes")
                .signed(Some(auditor.clone()))
                .adopt()
                .is_err(),
            "a verifier key adopts nothing"
        );
        // Adopted by the key as it ends; then an unkeyed writer's commit after the adoption is
        // not the log adopted.
        let late_write = copy_of(&bucket);
        assert_eq!(signed.adopt().expect("adopt"), before_key);
        assert!(signed.adopt().is_err(), "adopted once");
        let adopted_object = bucket
            .get("stores/notes/adopted", 4096)
            .expect("get")
            .expect("the adoption");
        late_write
            .create("stores/notes/adopted", adopted_object.clone())
            .expect("create");
        let mut u = Wal::new(Arc::clone(&late_write), "notes")
            .take(2, &Position::START)
            .expect("take")
            .holder;
        u.commit(&after(u.head(), 1, "unkeyed")).expect("commit");
        assert!(refused(
            &late_write,
            &auditor,
            "did not adopt it as it ends"
        ));
        // A whole log forged unsigned with the adoption copied beside it: not what was adopted.
        let forged = Arc::new(Bucket::in_memory().expect("bucket"));
        let fake = Wal::new(Arc::clone(&forged), "notes");
        let mut f = fake.take(1, &Position::START).expect("take").holder;
        f.commit(&after(f.head(), 3, "fake")).expect("commit");
        forged
            .create("stores/notes/adopted", adopted_object)
            .expect("create");
        assert!(refused(&forged, &auditor, "did not adopt it as it ends"));
        // Taken by a keyed node: object 3 the signed marker, object 4 a signed commit.
        let mut b = signed.take(2, &Position::START).expect("adopted").holder;
        b.commit(&after(b.head(), 2, "after")).expect("commit");
        assert!(signed.adopt().is_err(), "a signed log needs no adoption");
        let (end, all) = Wal::new(Arc::clone(&bucket), "notes")
            .signed(Some(auditor.clone()))
            .scan(&Position::START)
            .expect("the signed log reads under the key, its unsigned prefix with it");
        assert_eq!((end.object, all.len()), (5, 5));
        assert_eq!(
            plain.scan(&Position::START).expect("scan").1,
            all,
            "unkeyed reads it too"
        );
        assert!(signed.holds(&b.position()).expect("holds"));
        assert!(plain.holds(&before_key).expect("holds"));
        assert!(
            !signed.holds(&before_key).expect("holds"),
            "a position from before the key is no signed log's: the copy is built anew"
        );

        // An unsigned commit after the signed objects (a node without the key, or a forger).
        let forged = copy_of(&bucket);
        let late = Wal::new(Arc::clone(&forged), "notes");
        let mut c = late.take(3, &Position::START).expect("take").holder;
        c.commit(&after(c.head(), 1, "forged")).expect("commit");
        assert!(refused(
            &forged,
            &auditor,
            "is not signed by the fleet's key"
        ));
        assert!(refused(&forged, &keys, "is not signed by the fleet's key"));
        // Commits signed by another key.
        let forged = copy_of(&bucket);
        let other = LogKeys::signing(&FleetKey::generated("mnemo-fleet")).expect("keys");
        let late = Wal::new(Arc::clone(&forged), "notes").signed(Some(other.clone()));
        let c = late.take(3, &Position::START);
        assert!(c.is_err(), "a node of another key refuses the log too");
        assert!(late.adopt().is_err(), "a signed log is never adopted");
        // A signed marker copied to the next name: signed, but for another place.
        let forged = copy_of(&bucket);
        let marker = forged
            .get(&signed.name(3), OBJECT_MAX)
            .expect("get")
            .expect("there");
        forged.create(&signed.name(5), marker).expect("create");
        assert!(refused(&forged, &auditor, "for another object or place"));
        // The unsigned prefix changed under the signed marker that proves it.
        let forged = copy_of(&bucket);
        forged.remove(&signed.name(2)).expect("remove");
        let run: Vec<Vec<u8>> = after((Seq(0), EventHash::ZERO), 3, "other")
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        forged
            .create(&signed.name(2), encode(1, Some((Seq(1), &run))))
            .expect("create");
        assert!(refused(&forged, &auditor, "for another object or place"));
        // The whole log replaced by an unsigned one.
        let forged = Arc::new(Bucket::in_memory().expect("bucket"));
        let fake = Wal::new(Arc::clone(&forged), "notes");
        let mut f = fake.take(1, &Position::START).expect("take").holder;
        f.commit(&after(f.head(), 9, "fake")).expect("commit");
        assert!(refused(&forged, &auditor, "none of its objects is signed"));

        // A keyed holder's pack of the unsigned prefix and the signed objects is signed, and
        // reads back under the key; one of a run holding a forged unsigned object is not made.
        let packed = copy_of(&bucket);
        let wal = Wal::new(Arc::clone(&packed), "notes").signed(Some(keys.clone()));
        assert_eq!(wal.pack(4, 1).expect("pack"), 5);
        let (_, read) = Wal::new(Arc::clone(&packed), "notes")
            .signed(Some(auditor.clone()))
            .scan(&Position::START)
            .expect("packed, signed");
        assert_eq!(read, all);
        let forged = copy_of(&bucket);
        let late = Wal::new(Arc::clone(&forged), "notes");
        let mut c = late.take(3, &Position::START).expect("take").holder;
        c.commit(&after(c.head(), 1, "forged")).expect("commit");
        let wal = Wal::new(Arc::clone(&forged), "notes").signed(Some(keys.clone()));
        let Err(Error::ReplicaDamaged { what }) = wal.pack(6, 1) else {
            panic!("a pack over a forged object is not made");
        };
        assert!(what.contains("not packed"), "{what}");
        assert!(forged.list("stores/notes/pack").expect("list").is_empty());
    }

    /// One step of nodes sharing a store's log.
    #[derive(Clone, Debug)]
    enum Step {
        /// Node `0` takes the store over at the next epoch, from what it read before.
        Take(usize),
        /// Node `0` commits `1` events, if it ever took the store.
        Commit(usize, u64),
        /// Node `0` packs the log up to `1` objects before the last it made, if it ever took
        /// the store (a stale holder too).
        Pack(usize, u64),
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            prop_oneof![
                (0..3usize).prop_map(Step::Take),
                (0..3usize, 1..4u64).prop_map(|(n, k)| Step::Commit(n, k)),
                (0..3usize, 0..3u64).prop_map(|(n, k)| Step::Pack(n, k)),
            ],
            1..40,
        )
    }

    proptest! {
        /// Any interleaving of three nodes taking a store over and committing to it: every
        /// commit acknowledged is in the log, in order; a holder whose store was taken after it
        /// took it never gets a commit through; the log always reads back intact.
        #[test]
        fn no_acknowledged_commit_is_lost_and_no_stale_holder_gets_one_through(steps in steps()) {
            run_steps(&wal(), steps)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The same with every node signing with the fleet's key, and every read checking it:
        /// takes from a position, packs by stale holders and all, the log reads back signed.
        #[test]
        fn a_signed_log_keeps_every_acknowledged_commit_and_reads_back_under_its_key(steps in steps()) {
            let keys = LogKeys::signing(&FleetKey::generated("mnemo-test")).expect("keys");
            run_steps(&wal().signed(Some(keys)), steps)?;
        }
    }

    /// Runs `steps` of three nodes on the log `wal`, checking after each that every acknowledged
    /// commit reads back, in order, from the start and from where each node last read.
    fn run_steps(wal: &Wal, steps: Vec<Step>) -> std::result::Result<(), TestCaseError> {
        {
            let mut holders: Vec<Option<Holder>> = vec![None, None, None];
            let mut read: Vec<Position> = vec![Position::START; 3];
            let mut acked: Vec<(Seq, Vec<u8>)> = Vec::new();
            let mut epoch = 0;
            let mut latest_taker: Option<usize> = None;
            for step in steps {
                match step {
                    Step::Take(n) => {
                        epoch += 1;
                        let taken = wal.take(epoch, &read[n]).expect("a take at a new epoch");
                        read[n] = wal.scan(&Position::START).expect("scan").0;
                        holders[n] = Some(taken.holder);
                        latest_taker = Some(n);
                    }
                    Step::Commit(n, k) => {
                        let Some(holder) = holders[n].as_mut() else {
                            continue;
                        };
                        let events = after(holder.head(), k, &format!("node {n}"));
                        match holder.commit(&events) {
                            Ok(()) => {
                                prop_assert_eq!(
                                    Some(n),
                                    latest_taker,
                                    "only the latest taker commits"
                                );
                                acked.extend(events);
                            }
                            Err(Error::Fenced { .. }) => {
                                prop_assert_ne!(
                                    Some(n),
                                    latest_taker,
                                    "the latest taker is never fenced"
                                );
                            }
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                    Step::Pack(n, keep) => {
                        let Some(holder) = holders[n].as_mut() else {
                            continue;
                        };
                        let Some(upto) = holder.next.checked_sub(1 + keep) else {
                            continue;
                        };
                        let from = wal.pack(upto, 1).expect("a pack job");
                        holder.packed(from);
                    }
                }
                let (_, all) = wal
                    .scan(&Position::START)
                    .expect("the log reads back intact");
                prop_assert_eq!(&all, &acked);
                // Read on from where each node last read (inside a pack, maybe): the rest.
                for at in &read {
                    let (_, rest) = wal.scan(at).expect("read on from a position");
                    prop_assert_eq!(&rest[..], &acked[acked.len() - rest.len()..]);
                    prop_assert_eq!(
                        rest.first().map(|(s, _)| s.0),
                        (at.seq.0 < acked.len() as u64).then_some(at.seq.0 + 1)
                    );
                }
            }
        }
        Ok(())
    }
}
