//! A store rebuilt from a replica: every record fetched re-checked against the chain rules, the
//! head checkpoint against the chain, every object under the prefix read or named (covered
//! segments, events past the head, partial objects), events a redaction names restored erased,
//! the whole log verified as it is appended, in one replay that is also the store's index.

use super::*;
use crate::audit::verify::{Appended, Report};
impl Replica {
    /// Rebuilds a store at `db` (missing or empty) from this replica, up to event `at` (`None`:
    /// its head): every record re-checked against the chain, the whole log verified and the
    /// index derived in one replay; nothing is left at `db` if it fails.
    pub fn restore(&self, db: &Path, at: Option<Seq>) -> Result<Restored> {
        restore(self, db, at)
    }

    /// The head a checkpoint object names (`what` names it in the error): a replica's `head`
    /// object, or a copy an auditor kept.
    pub fn checkpoint_head(what: &str, bytes: &[u8]) -> Result<Head> {
        checkpoint::decode(what, bytes).map(|(_, head)| head)
    }
}

/// Rebuilds the store at `db` (a new path or an empty directory) from `replica`, up to event
/// `at` (else its head checkpoint's event): every record re-checked against the chain rules, the
/// head checkpoint against the chain, the whole log verified as it is appended (every answer
/// re-derived), in one replay whose tree becomes the index.
/// An event a redaction named is restored erased, whatever its segment holds. Returns what was
/// restored. On failure nothing is left at `db`.
pub(crate) fn restore(replica: &Replica, db: &Path, at: Option<Seq>) -> Result<Restored> {
    restore_with(db, |building| fetch(replica, building, at, Made::Store))
}

/// What a fetch of a replica makes: a store to keep (a restore), or one only looked at for its
/// report (`mnemo verify --from`), whose index is not written when the pass that re-derived
/// every answer found the log intact: that pass's report is the one given
/// ([`Restored::report`]), and the store is thrown away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// A store to keep, index and all.
    Store,
    /// A store made only for its report.
    Report,
}

impl Made {
    /// What `verify --from` makes: a store for its report only, unless an expected head is to
    /// be checked, which a verify of the whole store does.
    pub(crate) fn to_verify(expect: Option<Head>) -> Made {
        match expect {
            Some(_) => Made::Store,
            None => Made::Report,
        }
    }

    /// `report`, of the pass that verified the records as they were appended to the store whose
    /// head is now `head`, as a verify of that store would give it once its index and head were
    /// written, as a restore writes them (the pass read them before anything was appended).
    pub(crate) fn report_of(mut report: Report, head: Head) -> Report {
        report.meta_head = head;
        report.index_applied = head.seq;
        report.recorded = Some(head);
        report
    }
}

/// Makes a new store at `db` (a new path or an empty directory) with `make`, which builds it at
/// the path it is given: built beside `db` and renamed there once whole, so that on failure (or a
/// kill midway) nothing is left at `db`.
pub(crate) fn restore_with(
    db: &Path,
    make: impl FnOnce(&Path) -> Result<Restored>,
) -> Result<Restored> {
    if std::fs::read_dir(db).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Error::InvalidArgument(format!(
            "{} is not empty; restore into a new path",
            db.display()
        )));
    }
    let parent = crate::store::disk::parent_of(db);
    if !parent.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} is not a directory, so no store can be restored into {}: make it first, or restore into a path whose directory exists",
            parent.display(),
            db.display()
        )));
    }
    // Built beside its path and renamed there once whole, so a restore killed midway leaves
    // nothing at `db` (only a directory `.NAME.restore-*` beside it).
    let name = db
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", db.display())))?
        .to_string_lossy()
        .into_owned();
    let parent = crate::store::disk::parent_of(db);
    // What earlier restores into this path left when they were killed.
    crate::store::disk::remove_restore_leftovers(db)?;
    let tag =
        crate::client::token::random_hex(8).map_err(|e| Error::io("the OS random source", e))?;
    let building = parent.join(format!(".{name}.restore-{tag}"));
    let made = make(&building).and_then(|restored| {
        if db.is_dir() {
            std::fs::remove_dir(db).map_err(|e| Error::io(db, e))?;
        }
        std::fs::rename(&building, db).map_err(|e| Error::io(db, e))?;
        std::fs::File::open(parent)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| Error::io(parent, e))?;
        Ok(restored)
    });
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&building);
    }
    made
}

/// What a restore made, and what it found the replica still holding that it should not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The restored store's head.
    pub head: Head,
    /// The segments that hold, whole, events a redaction erased (restored erased all the same).
    pub(crate) stale: Vec<Stale>,
    /// The partial objects the replica holds ([`Replica::partial_objects`]), not read.
    pub(crate) partial: Vec<String>,
    /// The segments a wider one covers (a compaction under way, or cut before it removed
    /// them), each read and found to hold exactly the records of its range (those holding
    /// erased content are in `stale`).
    pub(crate) covered: Vec<String>,
    /// The events the segments hold past the head checkpoint, first and last (a shipment under
    /// way, or cut before it moved the head): checked against the chain, never restored. Only
    /// a restore to the head looks at them (not one `--at` an event).
    pub(crate) beyond: Option<(Seq, Seq)>,
    /// The report of the pass that verified the records as they were appended, when it found
    /// the log intact and nothing was asked of it beyond ([`Made::Report`]); a verify of the
    /// store made would give the same report.
    pub(crate) report: Option<crate::audit::verify::Report>,
}

impl Restored {
    /// What an auditor must know of what the replica holds beside its log: each segment still
    /// holding erased content, each partial object, and how many covered segments were checked.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.stale.iter().map(Stale::note).collect();
        if let Some((first, last)) = self.beyond {
            notes.push(format!(
                "the replica's segments hold events {first} to {last}, past its head checkpoint at event {}: a shipment is under way, or one was cut before it moved the head, or whoever holds the bucket added them; they link to the chain (and each checkpoint object that names one gives its hash), but the head does not reach them, so nothing past event {} was restored or verified as the replica's; the next shipment from the store moves the head past them (or refuses the replica if they are not the store's)",
                self.head.seq, self.head.seq
            ));
        }
        if let Some(one) = self.covered.first() {
            notes.push(format!(
                "the replica holds {} segment(s) that a merged segment covers ({one}{}): a compaction is under way, or was cut before it removed them; each was read and each holds exactly the records of its range, as the segment covering it does, so no reader needs them; the next shipment removes them",
                self.covered.len(),
                match self.covered.len() {
                    1 => "",
                    _ => " and others",
                }
            ));
        }
        notes.extend(self.partial.iter().map(|name| {
            format!(
                "the replica holds {name}, a partial object (the file store writes NAME#N and renames it into place): a shipment is writing it now, or one was killed, or another writer put it there; it was not read, and it may hold anything, erased content included: remove it unless a shipment is under way"
            )
        }));
        notes
    }
}

/// A replica segment that still holds, whole, events a redaction erased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    /// The segment object, such as `segments/…-….seg`.
    pub segment: String,
    /// The erased events it holds whole, each with the seq of the redaction that names it.
    pub events: Vec<(Seq, Seq)>,
    /// Whether the replica's [`REWRITES`] object names it: a shipment was cut before it wrote
    /// the segment again, and the next shipment does. If not, the bucket kept or was given back
    /// content erased at the source (an old version put back).
    pub pending: bool,
    /// The segment that covers it, if a wider one does: no reader takes it, and the next
    /// shipment removes it.
    pub covered_by: Option<String>,
}

impl Stale {
    /// What an auditor must know of it, in a sentence.
    pub fn note(&self) -> String {
        if let Some(by) = &self.covered_by {
            let first = self.events.first().map_or(Seq(0), |(seq, _)| *seq);
            let last = self.events.last().map_or(Seq(0), |(seq, _)| *seq);
            let by_redaction: std::collections::BTreeSet<Seq> =
                self.events.iter().map(|(_, by)| *by).collect();
            let seqs = match (
                first == last,
                last.0 - first.0 + 1 == self.events.len() as u64,
            ) {
                (true, _) => first.to_string(),
                (false, true) => format!("{first}-{last}"),
                (false, false) => {
                    let each: Vec<String> =
                        self.events.iter().map(|(s, _)| s.to_string()).collect();
                    each.join(", ")
                }
            };
            return format!(
                "the replica's {} still holds the erased content of event(s) {seqs} (erased by the redaction at event {}): the segment {by} covers it, so no reader takes it, but whoever reads the bucket can; delete it (the next shipment from the store removes it)",
                self.segment,
                by_redaction
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let events: Vec<String> = self
            .events
            .iter()
            .map(|(seq, by)| format!("{seq} (erased by the redaction at event {by})"))
            .collect();
        let why = match self.pending {
            true => {
                "a shipment was cut before it wrote the segment again; the next shipment from the store does"
            }
            false => {
                "the bucket kept or was given back content erased at the source (an old object put back, a versioned bucket); whoever reads the bucket reads it, so remove the object's old versions or ship the store to a new replica"
            }
        };
        format!(
            "the replica's {} still holds, whole, event(s) {} (a restore erases them again): {why}",
            self.segment,
            events.join(", ")
        )
    }
}

/// The segments the replica's [`REWRITES`] object names (all of them among `segments`), if it
/// has one: an object that is not such a list is damage, whoever reads it.
pub(super) fn rewrites_listed(
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<Option<Vec<String>>> {
    let Some(listed) = replica.get(REWRITES)? else {
        return Ok(None);
    };
    let listed = String::from_utf8(listed)
        .map_err(|_| Error::damaged(format!("the replica's {REWRITES} object is not text")))?;
    let mut names = Vec::new();
    for name in listed.lines() {
        if !segments.iter().any(|(_, _, n)| n == name) {
            return Err(Error::damaged(format!(
                "the replica's {REWRITES} object names {name:?}, which is not one of its segments: a shipment writes it with the names of segments it is writing again, so another writer left it"
            )));
        }
        names.push(name.to_string());
    }
    Ok(Some(names))
}

/// Every event a redaction in `segments` names, with the seq of that redaction.
pub(super) fn redaction_names(
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<std::collections::BTreeMap<Seq, Seq>> {
    let mut named = std::collections::BTreeMap::new();
    let reach = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    let mut reader = Reader::new(replica, segments.to_vec(), Seq(1), reach);
    while let Some((_, records)) = reader.next_segment()? {
        for (seq, record) in records {
            if let Some(seqs) = redacted_by(&record)? {
                for erased in seqs {
                    named.entry(erased).or_insert(seq);
                }
            }
        }
    }
    Ok(named)
}

/// The events a record erases, if it is a redaction.
pub(super) fn redacted_by(record: &[u8]) -> Result<Option<Vec<Seq>>> {
    Ok(match crate::model::event::Event::decode(record)?.body {
        crate::model::event::Body::Admin(crate::model::policy::AdminCommand::Redact {
            seqs,
            ..
        }) => Some(seqs.into_iter().map(Seq).collect()),
        _ => None,
    })
}

/// [`restore`]'s work, in the new directory `db` itself (left partial if it fails).
///
/// The replica is read twice: first for what its redactions name, then for the records, each
/// named one appended erased, so no erased byte reaches `db` (sled would keep a replaced value
/// in its log). The second read must find the same redactions. The records are verified as
/// they are appended (`verify_appended`, on threads of its own): one replay re-derives every
/// answer and is the index, written once every record is appended. When that pass finds
/// anything, the store is made whole and verified whole, which names the first violation as
/// `mnemo verify` does.
pub(crate) fn fetch(replica: &Replica, db: &Path, at: Option<Seq>, made: Made) -> Result<Restored> {
    let checkpoint = replica.head()?.map(|(_, head)| head);
    // Every object under the prefix is the replica's own, or named.
    replica.check_root()?;
    let listing = replica.listing()?;
    let segments = listing.segments.clone();
    let pending = rewrites_listed(replica, &segments)?.unwrap_or_default();
    let reach = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    if checkpoint.is_none() && reach > Seq(0) {
        return Err(Error::damaged(format!(
            "the replica at {} holds segments up to event {reach} but no head checkpoint",
            replica.url
        )));
    }
    if let Some(head) = checkpoint {
        if head.seq > reach {
            return Err(Error::damaged(format!(
                "the replica's head checkpoint names event {}, but its segments end at event {reach}: a segment is missing",
                head.seq
            )));
        }
    }
    let until = match (at, checkpoint) {
        (Some(at), _) => at,
        (None, Some(head)) => head.seq,
        (None, None) => {
            return Err(Error::InvalidArgument(format!(
                "the replica at {} has no checkpoint: nothing was shipped to it (mnemo replicate --to URL --once)",
                replica.url
            )));
        }
    };
    if until > reach || until == Seq(0) {
        return Err(Error::InvalidArgument(format!(
            "the replica at {} holds events 1 to {reach}; there is no event {until} to restore to",
            replica.url
        )));
    }
    if let (Some(vkey), Some(head)) = (replica.trusted_key(), checkpoint) {
        if until > head.seq {
            return Err(Error::InvalidArgument(format!(
                "the replica's signed head checkpoint names event {}; events past it are not signed by the key {}, so a restore with --key reaches no further: restore to {} or before",
                head.seq,
                vkey.split('+').next().unwrap_or(vkey),
                head.seq
            )));
        }
    }
    let named = redaction_names(replica, &segments)?;
    // Erased content never comes back: a restore to a point before the redaction that erased an
    // event would hold the event whole (or, from a rewritten segment, erased with no redaction
    // to say why).
    if let Some((seq, by)) = named
        .iter()
        .find(|(seq, by)| **seq <= until && **by > until)
    {
        return Err(Error::InvalidArgument(format!(
            "event {seq} was erased by the redaction at event {by}, past event {until} where this restore would stop; restore to event {by} or later (a redaction's erasure is never undone)",
        )));
    }
    let store = Store::open(db)?;
    // The records are verified as they are appended, in one pass whose replay is also the
    // index (`verify_appended`), on threads of its own: the log is replayed once, not once to
    // build the index and again to verify the store.
    let (tx, rx) = crossbeam_channel::bounded::<Appended>(VERIFY_AHEAD);
    let (appended, verified) = std::thread::scope(|s| {
        let verified = s.spawn(|| crate::audit::verify::verify_appended(&store, rx));
        let appended = append(replica, &store, &segments, until, &named, &pending, &tx);
        drop(tx);
        let verified = verified.join().unwrap_or_else(|_| {
            Err(Error::Poisoned {
                cause: "a thread panicked while it verified a restored log".into(),
            })
        });
        (appended, verified)
    });
    let (head, mut stale) = appended?;
    let verified = verified?;
    // The checkpoint must name an event of this chain.
    if let Some(checkpoint) = checkpoint {
        if checkpoint.seq <= head.seq {
            let hash = hash_at(&store, checkpoint.seq)?;
            if hash != checkpoint.hash {
                return Err(Error::damaged(format!(
                    "the replica's head checkpoint names event {} with hash {}, but its segments give {hash}",
                    checkpoint.seq, checkpoint.hash
                )));
            }
        }
    }
    // Events the segments hold past the head checkpoint (a shipment under way, or cut before it
    // moved the head) are never restored, but checked against the chain all the same and
    // named, so no record of the replica goes unread.
    let mut beyond = None;
    let mut past_head: Vec<crate::model::event::EventHash> = Vec::new();
    if at.is_none() && head.seq == until && until < reach {
        let mut chain = Chain::after(head.seq, head.hash);
        let mut reader = Reader::new(replica, segments.clone(), Seq(until.0 + 1), reach);
        while let Some((name, records)) = reader.next_segment()? {
            for (seq, record) in records {
                let frame = chain.check(seq, &record).map_err(|b| {
                    Error::damaged(format!(
                        "the replica at {} breaks the chain at event {} ({name}), past its head checkpoint at event {until}: {}",
                        replica.url, b.seq, b.detail
                    ))
                })?;
                past_head.push(frame.hash);
            }
        }
        beyond = Some((Seq(until.0 + 1), reach));
    }
    // Every checkpoint object too: each names an event of this chain by its own name.
    for name in replica.names("checkpoints")? {
        let bytes = replica
            .get(&name)?
            .ok_or_else(|| Error::damaged(format!("replica checkpoint {name} vanished")))?;
        let (_, named) = checkpoint::decode(&name, &bytes)?;
        if name != format!("checkpoints/{:020}", named.seq.0) {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} names event {}, not the one its name says",
                named.seq
            )));
        }
        if named.seq > reach {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} names event {}, past the replica's last event {reach}",
                named.seq
            )));
        }
        // One past the head (a shipment cut before it moved the head) names one of the events
        // checked past it (none are, in a restore `--at` an event).
        let hash = match named.seq.0.checked_sub(head.seq.0 + 1) {
            None => Some(hash_at(&store, named.seq)?),
            Some(past) => usize::try_from(past)
                .ok()
                .and_then(|past| past_head.get(past))
                .copied(),
        };
        if let Some(hash) = hash.filter(|hash| *hash != named.hash) {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} gives event {} the hash {}, but the chain has {hash}",
                named.seq, named.hash
            )));
        }
    }
    let mut report = None;
    match verified {
        // Verified intact, for a report only: the store is thrown away, so its index is not
        // written (at a million events, about half of what a restore costs).
        Some((verified, _)) if made == Made::Report => {
            report = Some(Made::report_of(verified, head));
        }
        // Verified intact: its replay's index is the store's.
        Some((_, index)) => {
            store.write_new_index(index.map.iter().map(|(k, v)| (&k[..], Some(&v[..]))))?;
            store.catch_up()?;
            store.sync(Durability::Fsync)?;
            store.record_head(head)?;
        }
        // Something to report: the store made whole and verified whole, which names the first
        // violation as `verify` does.
        None => {
            store.catch_up()?;
            store.sync(Durability::Fsync)?;
            store.record_head(head)?;
            let report = crate::audit::verify::verify_store(&store)?;
            if let Some(v) = report.violations.first() {
                return Err(Error::damaged(format!(
                    "the store restored from {} does not verify: event {} ({}): {}",
                    replica.url,
                    v.seq,
                    v.kind.name(),
                    v.detail
                )));
            }
        }
    }
    // What a reader does not take is checked too: each segment a wider one covers must hold
    // exactly the records of its range, and erased content there is named.
    let mut covered = Vec::new();
    let mut cache = None;
    for name in &listing.covered {
        match check_covered(replica, &segments, name, &named, &mut cache)? {
            Covered::Gone => {}
            Covered::Same => covered.push(name.clone()),
            Covered::Stale(found) => stale.push(found),
        }
    }
    let partial = replica.partial_objects()?;
    Ok(Restored {
        head,
        stale,
        partial,
        covered,
        beyond,
        report,
    })
}

/// How many segments' records may wait for the verifier while the next are appended.
const VERIFY_AHEAD: usize = 4;

/// Appends to `store` the replica's records from event 1 to `until`, each re-checked against the
/// chain rules, each event `named` by a redaction appended erased, and hands each run appended
/// to the verifier through `verifier` (which may have stopped: it is then no longer given any).
/// Returns the head appended and the segments found holding erased events whole.
fn append(
    replica: &Replica,
    store: &Store,
    segments: &[(Seq, Seq, String)],
    until: Seq,
    named: &std::collections::BTreeMap<Seq, Seq>,
    pending: &[String],
    verifier: &crossbeam_channel::Sender<Appended>,
) -> Result<(Head, Vec<Stale>)> {
    let mut chain = Chain::new();
    let mut head = Head::EMPTY;
    let mut stale: Vec<Stale> = Vec::new();
    let mut reader = Reader::new(replica, segments.to_vec(), Seq(1), until);
    while let Some((name, records)) = reader.next_segment()? {
        let mut frames = Vec::with_capacity(records.len());
        for (seq, record) in records {
            let mut frame = chain.check(seq, &record).map_err(|b| {
                Error::damaged(format!(
                    "the replica at {} breaks the chain at event {} ({name}): {}",
                    replica.url, b.seq, b.detail
                ))
            })?;
            head = Head {
                seq,
                hash: frame.hash,
            };
            if let Some(seqs) = redacted_by(&record)? {
                if seqs.iter().any(|s| named.get(s).is_none_or(|by| *by > seq)) {
                    return Err(Error::damaged(format!(
                        "the replica at {} changed while it was restored: the redaction at event {seq} ({name}) was not there when it was first read; run the restore again",
                        replica.url
                    )));
                }
            }
            if let Some(by) = named.get(&seq) {
                let event = crate::model::event::Event::decode(&record)?;
                if !matches!(event.body, crate::model::event::Body::Erased(_)) {
                    frame = event.erased().to_frame();
                    match stale.last_mut().filter(|s| s.segment == name) {
                        Some(found) => found.events.push((seq, *by)),
                        None => stale.push(Stale {
                            segment: name.clone(),
                            events: vec![(seq, *by)],
                            pending: pending.contains(&name),
                            covered_by: None,
                        }),
                    }
                }
            }
            frames.push(frame);
        }
        store.append(&frames)?;
        // A verifier that stopped (at a violation) hung up: the store is then verified whole.
        let _ = verifier.send(frames.iter().map(|f| (f.seq, f.encode())).collect());
    }
    Ok((head, stale))
}

/// What a segment that a wider one covers was found to hold ([`check_covered`]).
pub(super) enum Covered {
    /// Nothing: it was removed since it was listed (a compaction finishing).
    Gone,
    /// Exactly the records of its range, as the segment covering it holds them (byte for
    /// byte, or each the same event by the chain: an erased record beside a whole one).
    Same,
    /// The records of its range, some of them whole where a redaction erased them.
    Stale(Stale),
}

/// Checks the segment `name`, which one of `taken` covers, against that segment: it must hold
/// exactly the records of its range (each record the same event by the chain: the same chain
/// hash, linked to the same event before it, its payload hashing as it says), else it is
/// damage naming it; a whole record of an event that a redaction named (`named`) makes it
/// [`Covered::Stale`].
pub(super) fn check_covered(
    replica: &Replica,
    taken: &[(Seq, Seq, String)],
    name: &str,
    named: &std::collections::BTreeMap<Seq, Seq>,
    cache: &mut Option<(String, Records)>,
) -> Result<Covered> {
    let Some((first, last)) = name.strip_prefix("segments/").and_then(segment::parse_name) else {
        return Err(Error::damaged(format!(
            "the replica at {} holds {name}, which is not a segment's name",
            replica.url
        )));
    };
    let Some(bytes) = replica.get(name)? else {
        return Ok(Covered::Gone);
    };
    let covering = |listed: &[(Seq, Seq, String)]| {
        listed
            .iter()
            .find(|(a, b, _)| *a <= first && *b >= last)
            .cloned()
    };
    let bad = |by: &str, why: String| {
        Error::damaged(format!(
            "the replica at {} holds {name}, which the segment {by} covers, so no reader takes it, but it is not what a shipment or a compaction wrote: {why}; remove it (the next shipment from the store removes it too)",
            replica.url
        ))
    };
    let Some((a, b, by)) = covering(taken) else {
        return Err(Error::damaged(format!(
            "the replica at {}: no segment covers {name} (a gap or an overlap)",
            replica.url
        )));
    };
    // Those a segment covers are listed together: it is read once for them all.
    let (by, theirs) = match cache.take().filter(|(n, _)| *n == by) {
        Some(read) => read,
        None => match replica.get(&by)? {
            Some(theirs) => {
                let theirs = segment::decode(&by, &theirs, (a, b))?;
                (by, theirs)
            }
            // Merged again since it was listed: the segment that covers the range now.
            None => {
                let listing = replica.listing()?;
                if !listing.covered.iter().any(|n| n == name) {
                    return Ok(Covered::Gone);
                }
                let (a, b, now) = covering(&listing.segments).ok_or_else(|| {
                    Error::damaged(format!(
                        "replica segment {by} vanished, and no segment covers {name} now"
                    ))
                })?;
                let theirs = replica
                    .get(&now)?
                    .ok_or_else(|| Error::damaged(format!("replica segment {now} vanished")))?;
                let theirs = segment::decode(&now, &theirs, (a, b))?;
                (now, theirs)
            }
        },
    };
    let found = compare_covered(name, (first, last), &bytes, &by, &theirs, named, &bad);
    *cache = Some((by, theirs));
    found
}

/// [`check_covered`]'s comparison of the covered segment `name` (its `bytes`, of the seqs
/// `range`) with the records `theirs` of the segment `by` that covers it.
pub(super) fn compare_covered(
    name: &str,
    range: (Seq, Seq),
    bytes: &[u8],
    by: &str,
    theirs: &Records,
    named: &std::collections::BTreeMap<Seq, Seq>,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Covered> {
    let (first, last) = range;
    let ours = segment::decode(name, bytes, (first, last)).map_err(|e| match e {
        Error::ReplicaDamaged { what } => bad(by, what),
        e => e,
    })?;
    let mut erased: Vec<(Seq, Seq)> = Vec::new();
    for (seq, record) in ours {
        // `theirs` runs from its first seq with no gap (its name says so, and decode checked).
        let at = theirs
            .first()
            .and_then(|(start, _)| usize::try_from(seq.0.checked_sub(start.0)?).ok());
        let Some((_, same)) = at.and_then(|at| theirs.get(at)).filter(|(s, _)| *s == seq) else {
            return Err(bad(by, format!("{by} does not hold its event {seq}")));
        };
        let frame = if record == *same {
            crate::model::event::Frame::decode(&record).map_err(|e| bad(by, e.to_string()))?
        } else {
            // Not byte for byte: the same event by the chain, or a forgery.
            let expected = crate::model::event::Frame::decode(same)?;
            let frame = Chain::after(Seq(seq.0 - 1), expected.prev_hash)
                .check(seq, &record)
                .map_err(|b| bad(by, format!("event {}: {}", b.seq, b.detail)))?;
            if frame.hash != expected.hash {
                return Err(bad(
                    by,
                    format!(
                        "event {seq}: its record hashes to {}, where {by} holds the event of hash {}",
                        frame.hash, expected.hash
                    ),
                ));
            }
            frame
        };
        if let (Some(redaction), None) = (named.get(&seq), frame.erased_from) {
            erased.push((seq, *redaction));
        }
    }
    Ok(match erased.is_empty() {
        true => Covered::Same,
        false => Covered::Stale(Stale {
            segment: name.to_string(),
            events: erased,
            pending: false,
            covered_by: Some(by.to_string()),
        }),
    })
}

/// The chain hash of event `seq` of `store`.
pub(super) fn hash_at(store: &Store, seq: Seq) -> Result<crate::model::event::EventHash> {
    let (_, record) = store
        .records(seq)
        .next()
        .transpose()?
        .filter(|(at, _)| *at == seq)
        .ok_or_else(|| Error::damaged(format!("the restored log lost event {seq}")))?;
    Ok(crate::model::event::Frame::decode(&record)?.hash)
}
