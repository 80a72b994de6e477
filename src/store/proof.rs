//! Reads that prove what they show: before a read shows anything it took from a stored record
//! (a call as sent, a tree of the past, a version's content, a log line), the records it reads
//! are checked against the chain.
//!
//! A record alone proves nothing: whoever can write the store's files can rewrite a payload and
//! recompute its payload and chain hashes, and only the next event's link (and, at the end, the
//! head the store recorded) gives it away. So [`Store::prove`] checks the whole chain, every
//! rule of [`crate::model::chain`] from event 1, that it leads to `meta.head`, and that every erased
//! record is named by a redaction after it, as `verify` does (without re-answering any call). An open store remembers how far it proved its
//! log, so a long-lived server walks each record once, when it is first read after being
//! written, and a read of a private copy (the CLI's) walks the copy once.
//!
//! Who calls it: every reader of stored records that shows them ([`crate::store::replay::Replay::run`],
//! `log`, `show`, `history`, the memory-stores API's versions, [`crate::MnemoClient::events`]).
//! Recovery on open does not (it replays only the events past the index, and a store must open
//! in time independent of its length); `verify` checks the chain itself.

use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{Body, Seq};
use crate::model::policy::AdminCommand;
use crate::store::log::{Head, Store};

impl Store {
    /// Checks the chain from event 1 to the log's end, every rule of [`crate::model::chain`], and that
    /// it leads to the head in `meta` (the events past it, which a crash leaves, continue it).
    /// An open store checks each record once: a later call walks only what was written since.
    /// Returns the log's end; [`Error::ChainBroken`] names the first seq that breaks.
    pub fn prove(&self) -> Result<Head> {
        let proven = self.proven();
        let mut chain = Chain::after(proven.seq, proven.hash);
        let mut end = proven;
        let meta = self.head()?;
        let mut meta_hash = None;
        // Erased records not yet named by a redaction after them. An erased record's payload
        // hash cannot be recomputed, so the chain rules take it as stored: only the redaction
        // that names it makes it one (a record erased outside Mnemo hides what it did from
        // every replay). A redaction and what it erased are written in one rewrite, so a walk
        // that meets one meets the other.
        // Erased records not yet named by a redaction, with the digest of what each keeps.
        let mut unnamed = std::collections::BTreeMap::new();
        for item in self.records(chain.next()) {
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
            let frame = chain
                .check_borrowed(seq, &record)
                .map_err(|b| Error::ChainBroken {
                    seq: b.seq.0,
                    what: b.detail,
                })?;
            if frame.erased_from.is_some() {
                let kept =
                    crate::model::event::kept_of(frame.version, frame.payload).map_err(|e| {
                        Error::ChainBroken {
                            seq: seq.0,
                            what: format!("its record does not decode: {e}"),
                        }
                    })?;
                unnamed.insert(seq, kept.as_ref().map(crate::model::event::kept_digest));
            } else if !unnamed.is_empty() {
                let event = frame.event().map_err(|e| Error::ChainBroken {
                    seq: seq.0,
                    what: format!("its record does not decode: {e}"),
                })?;
                if let Body::Admin(AdminCommand::Redact { seqs, kept, .. }) = &event.body {
                    for named in seqs {
                        if let Some(Some(digest)) = unnamed.remove(&Seq(*named)) {
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
            end = Head {
                seq,
                hash: frame.hash,
            };
            if seq == meta.seq {
                meta_hash = Some(frame.hash);
            }
        }
        if let Some((first, _)) = unnamed.first_key_value() {
            return Err(Error::ChainBroken {
                seq: first.0,
                what: "it is erased, but no redaction after it names it: its payload was removed outside Mnemo".into(),
            });
        }
        // A head at or before what was proven earlier was checked then, or moved there by this
        // process's own writer.
        if meta.seq > proven.seq {
            match meta_hash {
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
}
