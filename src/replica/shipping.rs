//! Shipping a store to a replica: every event the replica lacks as sealed segments (written
//! once, with a create that fails if the name is taken), then a checkpoint of the new head; the
//! segments a later redaction erased written again ([`REWRITES`]); and compaction after.

use super::restore::rewrites_listed;
use super::*;
/// What one shipment did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shipped {
    /// The seq the replica reached before.
    pub from: Seq,
    /// The head it reaches now (what its checkpoint names).
    pub head: Head,
    /// The segments written.
    pub segments: usize,
    /// Whether the checkpoint names its head under the store's signing key (the store has
    /// one: `mnemo replicate --keygen`), so a restore trusting that key can prove it.
    pub signed: bool,
}

impl Shipped {
    /// What `mnemo replicate --once` prints of it (and `POST /v1/replicate` answers as its
    /// `result`): what was shipped to `url`, or that it was up to date, and the checkpoint.
    pub fn summary(&self, url: &str) -> String {
        let mut text = match self.segments {
            0 => format!(
                "the replica at {url} is up to date at event {}\n",
                self.head.seq
            ),
            n => format!(
                "replicated events {} to {} in {n} segments to {url}\n",
                self.from.0 + 1,
                self.head.seq
            ),
        };
        if self.head.seq > Seq(0) {
            text.push_str(&format!("checkpoint: {}\n", self.head));
        }
        text
    }
}

impl crate::client::MnemoClient {
    /// Ships every event of the store this client has open (for writing, or as a read-only
    /// copy) that `replica` lacks, as sealed segments and then a checkpoint of the new head,
    /// telling `sealed` the seqs of each segment once it is written; returns what it shipped.
    /// Refuses a replica that holds another history; a served store is [`Error::NotLocal`]
    /// (its server ships it: `POST /v1/replicate`).
    pub fn ship_to(&self, replica: &Replica, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<Shipped> {
        self.settle_index()?;
        ship(&*self.local_store()?, replica, sealed)
    }
}

/// Ships every event of `store` that `replica` lacks, as sealed segments and then a checkpoint
/// of the new head, telling `sealed` the seqs of each segment once it is written; returns what
/// it shipped. Refuses a replica that holds another history.
pub fn ship(store: &Store, replica: &Replica, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<Shipped> {
    let end = store.log_end()?.seq;
    ship_upto(store, replica, end, true, sealed)
}

impl crate::client::MnemoClient {
    /// Ships the events of the store this client has open, up to `end`, to `replica` (the
    /// checkpoint of the shipment kept): a server's `/v1/replicate`.
    pub(crate) fn ship_upto(&self, replica: &Replica, end: Seq) -> Result<Shipped> {
        ship_upto(&*self.local_store()?, replica, end, true, &mut |_, _| {})
    }
}

/// [`ship`] up to event `end` (what the store had made durable when the shipment began), and
/// writes `checkpoints/{seq}` only if `keep_checkpoint` (the `head` object is always written):
/// a continuous shipper keeps one now and then rather than one per shipment.
pub(crate) fn ship_upto(
    store: &Store,
    replica: &Replica,
    end: Seq,
    keep_checkpoint: bool,
    sealed: &mut dyn FnMut(Seq, Seq),
) -> Result<Shipped> {
    replica.check_apart(store.path())?;
    let segments = replica.segments()?;
    let have = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    if have > end {
        return Err(Error::InvalidArgument(format!(
            "the replica at {} reaches event {have}, past this store's last event {end}: it is another store's, or this store was rolled back; ship to a new replica",
            replica.url
        )));
    }
    // The replica's last event must be this store's event of that seq: the same chain hash
    // (a record erased since keeps its hash; its segment is rewritten below). What is shipped
    // next must link to it.
    let mut chain = Chain::new();
    let mut head = Head::EMPTY;
    if let Some((first, last, name)) = segments.last() {
        let bytes = replica
            .get(name)?
            .ok_or_else(|| Error::damaged(format!("replica segment {name} vanished")))?;
        let theirs = segment::decode(name, &bytes, (*first, *last))?;
        let ours = store.records(*last).next().transpose()?;
        let hash = |record: &[u8]| {
            crate::model::event::Frame::decode(record)
                .map(|f| f.hash)
                .ok()
        };
        let same = match (theirs.last(), ours) {
            (Some((_, theirs)), Some((seq, ours))) => {
                seq == *last && hash(theirs).is_some() && hash(theirs) == hash(&ours)
            }
            _ => false,
        };
        let theirs = theirs.last().and_then(|(_, record)| hash(record));
        match (same, theirs) {
            (true, Some(hash)) => {
                chain = Chain::after(*last, hash);
                head = Head { seq: *last, hash };
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "the replica at {} holds another history: its event {last} is not this store's; ship to a new replica",
                    replica.url
                )));
            }
        }
    }
    // A rewrite a cut shipment left half done is finished first.
    finish_rewrites(store, replica, &segments)?;
    // The segments holding events that redactions erased since the replica's head checkpoint
    // (a cut shipment may have sealed a redaction without rewriting what it erased).
    let since = replica
        .head()?
        .map_or(Seq(0), |(_, head)| head.seq.min(have));
    let rewrites = erased_segments(store, &segments, since, have, end)?;
    let mut shipped = 0;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0;
    let mut first = Seq(have.0 + 1);
    for item in store.records(first) {
        let (seq, record) = item?;
        if seq > end {
            break;
        }
        let frame = chain.check(seq, &record).map_err(|b| {
            Error::corrupt(format!(
                "event {}: {} (the store does not verify; run mnemo verify)",
                b.seq, b.detail
            ))
        })?;
        head = Head {
            seq,
            hash: frame.hash,
        };
        bytes += record.len();
        batch.push(record);
        if batch.len() >= segment::SEGMENT_EVENTS || bytes >= segment::SEGMENT_BYTES {
            seal(replica, first, &batch)?;
            sealed(first, seq);
            shipped += 1;
            first = Seq(seq.0 + 1);
            batch.clear();
            bytes = 0;
        }
    }
    if !batch.is_empty() {
        seal(replica, first, &batch)?;
        sealed(first, head.seq);
        shipped += 1;
    }
    // With nothing new, the checkpoint names the replica's last event again (written anew if a
    // cut shipment left it behind).
    let mut signed = false;
    if head.seq > Seq(0) {
        let text = checkpoint::encode(&origin(store.path()), head);
        // Signed by the owner's key, when the store has one.
        let text = match key::signer(store.path())? {
            Some(signer) => {
                signed = true;
                key::sign(&text, &signer)?
            }
            None => text.into_bytes(),
        };
        if keep_checkpoint {
            replica.put(
                &format!("checkpoints/{:020}", head.seq.0),
                text.clone(),
                PutMode::Overwrite,
            )?;
        }
        // The segments to rewrite are named before the head moves past the redaction: a
        // restore from here on erases what the redaction names itself, and the next shipment
        // finishes a rewrite this one could not.
        if !rewrites.is_empty() {
            replica.put(
                REWRITES,
                rewrites.join("\n").into_bytes(),
                PutMode::Overwrite,
            )?;
        }
        replica.put("head", text, PutMode::Overwrite)?;
    }
    if !rewrites.is_empty() {
        finish_rewrites(store, replica, &replica.segments()?)?;
    }
    // Once the head names every event shipped, small segments are merged (and what a cut merge
    // left is removed).
    compaction::compact(store, replica)?;
    Ok(Shipped {
        from: have,
        head,
        segments: shipped,
        signed,
    })
}

/// The object naming segments a shipment has yet to write again from the store, because a
/// redaction erased events they hold; present only while such a rewrite is under way.
pub const REWRITES: &str = "rewrites";

/// Redactions reach the replica: the names of the segments (among `segments`, which reach
/// `have`) holding an event erased by a redaction from `since` + 1 to `end`, to be written again
/// from the store, whose records are erased now.
pub(super) fn erased_segments(
    store: &Store,
    segments: &[(Seq, Seq, String)],
    since: Seq,
    have: Seq,
    end: Seq,
) -> Result<Vec<String>> {
    let mut erased: Vec<Seq> = Vec::new();
    for item in store.records(Seq(since.0 + 1)) {
        let (seq, record) = item?;
        if seq > end {
            break;
        }
        let event = crate::model::event::Event::decode(&record)?;
        if let crate::model::event::Body::Admin(crate::model::policy::AdminCommand::Redact {
            seqs,
            ..
        }) = &event.body
        {
            erased.extend(seqs.iter().map(|s| Seq(*s)).filter(|s| *s <= have));
        }
    }
    Ok(segments
        .iter()
        .filter(|(first, last, _)| erased.iter().any(|s| s >= first && s <= last))
        .map(|(_, _, name)| name.clone())
        .collect())
}

/// Writes again, from the store, each segment the replica's [`REWRITES`] object names (one of
/// `segments`), replacing the old objects, then removes it.
pub(super) fn finish_rewrites(
    store: &Store,
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<()> {
    let Some(listed) = rewrites_listed(replica, segments)? else {
        return Ok(());
    };
    for name in &listed {
        let Some((first, last, _)) = segments.iter().find(|(_, _, n)| n == name) else {
            continue;
        };
        let mut records = Vec::new();
        for item in store.records(*first) {
            let (seq, record) = item?;
            if seq > *last {
                break;
            }
            records.push(record);
        }
        replica.put(name, segment::encode(*first, &records), PutMode::Overwrite)?;
    }
    replica.remove(REWRITES)
}

/// Writes the segment of `records` from event `first`, once.
pub(super) fn seal(replica: &Replica, first: Seq, records: &[Vec<u8>]) -> Result<()> {
    let last = Seq(first.0 + records.len() as u64 - 1);
    let name = format!("segments/{}", segment::name(first, last));
    replica.put(&name, segment::encode(first, records), PutMode::Create)?;
    // Another shipment may have sealed a segment over some of the same events under another
    // name: whichever looks after the other has written sees both, and takes its own back, so
    // the replica never keeps two. (A merged segment covers only segments a shipment wrote
    // before, so none may overlap a new one.)
    let overlap = replica.listing().and_then(|listing| {
        let other = listing
            .covered
            .iter()
            .chain(listing.segments.iter().map(|(_, _, n)| n))
            .filter(|n| **n != name)
            .filter_map(|n| n.strip_prefix("segments/").and_then(segment::parse_name))
            .find(|(a, b)| *a <= last && *b >= first);
        match other {
            Some((a, b)) => Err(Error::damaged(format!(
                "a segment of events {a} to {b} overlaps the one of events {first} to {last}"
            ))),
            None => Ok(()),
        }
    });
    if let Err(e) = overlap {
        replica.remove(&name)?;
        return Err(Error::InvalidArgument(format!(
            "another shipment to {} wrote events this one was shipping, so this one stopped and took back its segment ({e}); ship from one process at a time, then run this again",
            replica.url
        )));
    }
    Ok(())
}
