//! Reads that prove what they show: before a read shows anything it took from a stored record
//! (a call as sent, a tree of the past, a version's content, a log line), the records it reads
//! are checked against the chain.
//!
//! A record alone proves nothing: whoever can write the store's files can rewrite a payload and
//! recompute its payload and chain hashes, and only the next event's link (and, at the end, the
//! head the store recorded) gives it away. So [`Store::prove`] checks the whole chain, every
//! rule of [`crate::model::chain`] from event 1, that it leads to `meta.head`, and that every erased
//! record is named by a redaction after it, as `verify` does (without re-answering any call).
//! A payload the value file no longer gives back as written is the one exception: its record's
//! header still joins the chain (its chain hash recomputes from what sled keeps), so the
//! records around it are proven, while every read of its payload meets the loss again. An open store remembers how far it proved its
//! log, so a long-lived server walks each record once, when it is first read after being
//! written, and a read of a private copy (the CLI's) walks the copy once.
//!
//! Who calls it: every reader of stored records that shows them ([`crate::store::replay::Replay::run`],
//! `log`, `show`, `history`, the memory-stores API's versions, [`crate::MnemoClient::events`]).
//! Recovery on open does not (it replays only the events past the index, and a store must open
//! in time independent of its length); `verify` checks the chain itself.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::model::chain::{Break, Chain, Rule};
use crate::model::event::{Body, EventHash, Seq};
use crate::model::policy::AdminCommand;
use crate::store::disk::Resolved;
use crate::store::log::{Head, Store};

/// The fewest records a part of a split walk checks: a shorter log is walked in one.
const MIN_PART: u64 = 16_384;

/// The most parts a walk is split into.
const MAX_PARTS: u64 = 4;

/// The cores this process may use (asked once: the answer reads the control group's files).
fn cores() -> u64 {
    static CORES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64))
}

/// What a walk over a stretch of the log found.
struct Walked {
    /// The last record checked (where the walk started, when it checked none).
    end: Head,
    /// The chain hash of the record at the head `meta` names, if the walk met it.
    meta_hash: Option<EventHash>,
    /// Erased records no redaction in the stretch named, with the digest of what each keeps.
    /// An erased record's payload hash cannot be recomputed, so the chain rules take it as
    /// stored: only the redaction that names it makes it one (a record erased outside Mnemo
    /// hides what it did from every replay). A redaction and what it erased are written in one
    /// rewrite, so a walk that meets one meets the other.
    unnamed: BTreeMap<Seq, Option<EventHash>>,
}

/// What the chain shows past a record whose payload the value file lost ([`Store::chain_past`]).
pub(crate) struct PastLoss {
    /// Each record whose payload the value file lost, with what reading it met (the one that
    /// breaks the chain too).
    pub(crate) lost: Vec<(Seq, Error)>,
    /// The first record that breaks the chain, if one does.
    pub(crate) broken: Option<Break>,
    /// The last record that joined the chain.
    pub(crate) end: Seq,
}

impl Store {
    /// Checks the chain from event 1 to the log's end, every rule of [`crate::model::chain`], and that
    /// it leads to the head in `meta` (the events past it, which a crash leaves, continue it).
    /// An open store checks each record once: a later call walks only what was written since.
    /// A long stretch is checked in parts on several threads, each from the hash its first
    /// record's predecessor stores, and the parts' seams compared after; when any part finds
    /// anything wrong, the stretch is walked again in one, so the break named is always the
    /// first. Returns the log's end; [`Error::ChainBroken`] names the first seq that breaks.
    pub fn prove(&self) -> Result<Head> {
        let proven = self.proven();
        let meta = self.head()?;
        let walked = match self.walk_in_parts(proven, meta.seq)? {
            Some(walked) => walked,
            None => self.walk(proven, None, meta.seq)?,
        };
        if let Some((first, _)) = walked.unnamed.first_key_value() {
            return Err(Error::ChainBroken {
                seq: first.0,
                what: "it is erased, but no redaction after it names it: its payload was removed outside Mnemo".into(),
            });
        }
        let end = walked.end;
        // A head at or before what was proven earlier was checked then, or moved there by this
        // process's own writer.
        if meta.seq > proven.seq {
            match walked.meta_hash {
                Some(hash) if hash == meta.hash => {}
                Some(hash) => {
                    return Err(Error::ChainBroken {
                        seq: meta.seq.0,
                        what: format!(
                            "the store's head says it hashes to {} but the chain gives {hash}",
                            meta.hash
                        ),
                    });
                }
                None => {
                    return Err(Error::ChainBroken {
                        seq: end.seq.0 + 1,
                        what: format!(
                            "the store's head names event {} but the log ends at event {}: events were removed from its tail",
                            meta.seq, end.seq
                        ),
                    });
                }
            }
        }
        self.proved(end);
        Ok(end)
    }

    /// The walk from after `from` to the log's end in parts, one thread each, when the stretch
    /// is long enough and the machine has the cores; `None` when it is not split, or when any
    /// part found a break, an error, an erased record it could not match with its redaction, or
    /// a seam that does not join (the caller then walks it in one, which names the first).
    fn walk_in_parts(&self, from: Head, meta_seq: Seq) -> Result<Option<Walked>> {
        let last = self.last_seq()?;
        let length = last.0.saturating_sub(from.seq.0);
        if length < 2 * MIN_PART {
            return Ok(None);
        }
        let parts = cores().min(MAX_PARTS).min(length / MIN_PART);
        if parts < 2 {
            return Ok(None);
        }
        // Each part starts after a boundary record, from the hash that record stores; the
        // part before it must end there with that hash.
        let mut starts = vec![from];
        for i in 1..parts {
            let seq = Seq(from.seq.0 + length * i / parts);
            let Some(hash) = self.stored_hash(seq) else {
                return Ok(None);
            };
            starts.push(Head { seq, hash });
        }
        let walks: Vec<Option<Walked>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (1..starts.len())
                .map(|i| {
                    let through = starts.get(i + 1).map(|next| next.seq);
                    let start = starts[i];
                    std::thread::Builder::new()
                        .name("mnemo-prove".into())
                        .spawn_scoped(scope, move || self.walk(start, through, meta_seq).ok())
                })
                .collect();
            let first = self.walk(from, Some(starts[1].seq), meta_seq).ok();
            std::iter::once(first)
                .chain(
                    threads
                        .into_iter()
                        .map(|thread| thread.ok().and_then(|thread| thread.join().ok()).flatten()),
                )
                .collect()
        });
        let mut joined: Option<Walked> = None;
        for (i, walked) in walks.into_iter().enumerate() {
            let Some(walked) = walked else {
                return Ok(None);
            };
            if let Some(before) = joined {
                // The part before must have checked every record up to this part's start and
                // arrived at the hash this part started from; an erased record it left unnamed
                // may be named by a redaction later on, which only a walk in one sees.
                if before.end != starts[i] || !before.unnamed.is_empty() {
                    return Ok(None);
                }
                joined = Some(Walked {
                    end: walked.end,
                    meta_hash: before.meta_hash.or(walked.meta_hash),
                    unnamed: walked.unnamed,
                });
            } else {
                joined = Some(walked);
            }
        }
        Ok(joined)
    }

    /// Walks the chain after `from` (a record checked, and its hash) to the log's end, or to
    /// the first record that breaks it, by every rule but the payload hash of a record whose
    /// payload the value file lost, and names each such record: what a verifier that stopped at
    /// a lost payload can still say of the log after it, without re-answering anything.
    pub(crate) fn chain_past(&self, from: Head) -> Result<PastLoss> {
        let mut chain = Chain::after(from.seq, from.hash);
        let mut past = PastLoss {
            lost: Vec::new(),
            broken: None,
            end: from.seq,
        };
        for item in self.records_or_lost(chain.next()) {
            let (seq, record) = match item {
                Ok(item) => item,
                Err(e) if e.is_damage() => {
                    past.broken = Some(Break {
                        seq: chain.next(),
                        rule: Rule::Decodes,
                        detail: format!("its record cannot be read: {e}"),
                    });
                    break;
                }
                Err(e) => return Err(e),
            };
            let checked = record.check(&mut chain, seq).map(|_| ());
            if let Resolved::PayloadLost { why, .. } = record {
                past.lost.push((seq, why));
            }
            if let Err(broke) = checked {
                past.broken = Some(broke);
                break;
            }
            past.end = seq;
        }
        Ok(past)
    }

    /// The chain hash the record of `seq` stores (unchecked), if it can be read.
    fn stored_hash(&self, seq: Seq) -> Option<EventHash> {
        let (found, record) = self.records_or_lost(seq).next()?.ok()?;
        if found != seq {
            return None;
        }
        record.frame().ok().map(|frame| frame.hash)
    }

    /// Checks the records after `from` (whose hash is taken as `from.hash`) through `through`,
    /// or to the log's end; see [`Walked`].
    fn walk(&self, from: Head, through: Option<Seq>, meta_seq: Seq) -> Result<Walked> {
        let mut chain = Chain::after(from.seq, from.hash);
        let mut walked = Walked {
            end: from,
            meta_hash: None,
            unnamed: BTreeMap::new(),
        };
        let records = self.records_or_lost(chain.next()).take_while(
            |item| !matches!((item, through), (Ok((seq, _)), Some(through)) if *seq > through),
        );
        for item in records {
            let (seq, record) = match item {
                Ok(item) => item,
                Err(e) if e.is_damage() => {
                    return Err(Error::ChainBroken {
                        seq: chain.next().0,
                        what: format!("its record cannot be read: {e}"),
                    });
                }
                Err(e) => return Err(e),
            };
            let broken = |b: Break| Error::ChainBroken {
                seq: b.seq.0,
                what: b.detail,
            };
            // A payload the value file lost is not shown by anything that reads it (each read
            // meets the loss again); its record's header still joins the chain, so the records
            // around it are checked, and what they show proven, as before. While an erased
            // record waits for the redaction that names it, this payload may be that
            // redaction: the walk cannot go on.
            let record = match record {
                Resolved::PayloadLost { why, .. } if !walked.unnamed.is_empty() => return Err(why),
                record => record,
            };
            let frame = record.check(&mut chain, seq).map_err(broken)?;
            if frame.erased_from.is_some() {
                let kept =
                    crate::model::event::kept_of(frame.version, frame.payload).map_err(|e| {
                        Error::ChainBroken {
                            seq: seq.0,
                            what: format!("its record does not decode: {e}"),
                        }
                    })?;
                walked
                    .unnamed
                    .insert(seq, kept.as_ref().map(crate::model::event::kept_digest));
            } else if !walked.unnamed.is_empty() {
                let event = frame.event().map_err(|e| Error::ChainBroken {
                    seq: seq.0,
                    what: format!("its record does not decode: {e}"),
                })?;
                if let Body::Admin(AdminCommand::Redact { seqs, kept, .. }) = &event.body {
                    for named in seqs {
                        if let Some(Some(digest)) = walked.unnamed.remove(&Seq(*named)) {
                            if !kept.contains(&(*named, digest)) {
                                return Err(Error::ChainBroken {
                                    seq: *named,
                                    what: format!(
                                        "it keeps what the event did to the tree, but the redaction (event {seq}) that erased it does not commit to what it keeps: it was changed outside Mnemo"
                                    ),
                                });
                            }
                        }
                    }
                }
            }
            walked.end = Head {
                seq,
                hash: frame.hash,
            };
            if seq == meta_seq {
                walked.meta_hash = Some(frame.hash);
            }
        }
        Ok(walked)
    }
}
