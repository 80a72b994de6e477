//! An event's stored record split into its fields ([`Frame`], or [`FrameRef`] borrowing them),
//! as the verifier checks them: every field what was on disk, nothing recomputed.

use crate::error::{Error, Result};
use crate::model::hash::EventHash;
use crate::model::seq::Seq;

use super::*;

const FRAME_FIXED: usize = 1 + 8 + 32 + 32 + 32 + 4;

/// An event's stored record split into its fields, before the header and payload are decoded.
///
/// This is what the verifier checks: every field is what was on disk, nothing is recomputed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The format version byte.
    pub version: u8,
    /// The seq written inside the record.
    pub seq: Seq,
    /// The stored `prev_hash`.
    pub prev_hash: EventHash,
    /// The stored hash of this event.
    pub hash: EventHash,
    /// The stored payload hash (format 4: the salted commitment).
    pub payload_hash: EventHash,
    /// Canonical header bytes.
    pub header: Vec<u8>,
    /// The event's salt (format 4 only).
    pub salt: Option<Salt>,
    /// Canonical payload bytes (none in an erased record).
    pub payload: Vec<u8>,
    /// For an erased record (format 5), the format the event was written in.
    pub erased_from: Option<u8>,
}

fn take<'a>(bytes: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8]> {
    if bytes.len() < n {
        return Err(Error::corrupt(format!(
            "event record is truncated in its {what}"
        )));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn take_hash(bytes: &mut &[u8], what: &str) -> Result<EventHash> {
    let mut out = [0; 32];
    out.copy_from_slice(take(bytes, 32, what)?);
    Ok(EventHash(out))
}

fn take_u32(bytes: &mut &[u8], what: &str) -> Result<usize> {
    let mut out = [0; 4];
    out.copy_from_slice(take(bytes, 4, what)?);
    Ok(u32::from_le_bytes(out) as usize)
}

impl Frame {
    /// The bytes every stored record has before its header and payload: none is shorter.
    pub const MIN_LEN: usize = FRAME_FIXED;
}

impl Frame {
    /// The stored record bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FRAME_FIXED + 4 + 32 + self.header.len() + self.payload.len());
        out.push(self.version);
        out.extend_from_slice(&self.seq.0.to_le_bytes());
        out.extend_from_slice(&self.prev_hash.0);
        out.extend_from_slice(&self.hash.0);
        out.extend_from_slice(&self.payload_hash.0);
        // NOTE: headers and payloads are bounded by the tool's input limits, far below 4 GiB; a
        // larger one would not fit the frame, so it is refused before it gets here.
        #[expect(clippy::cast_possible_truncation)]
        out.extend_from_slice(&(self.header.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.header);
        if let Some(from) = self.erased_from {
            out.push(from);
            if self.version == ERASED_KEEPING_FORMAT {
                #[expect(clippy::cast_possible_truncation)]
                out.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
                out.extend_from_slice(&self.payload);
            }
            return out;
        }
        if let Some(salt) = &self.salt {
            out.extend_from_slice(&salt.0);
        }
        #[expect(clippy::cast_possible_truncation)]
        out.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// Splits stored record bytes into fields.
    pub fn decode(bytes: &[u8]) -> Result<Frame> {
        FrameRef::parse(bytes).map(|frame| frame.to_frame())
    }

    /// The chain hash recomputed from the stored fields (with the stored payload hash).
    pub fn recompute_hash(&self) -> EventHash {
        self.borrowed().recompute_hash()
    }

    /// The payload hash recomputed from the stored payload (and salt).
    pub fn recompute_payload_hash(&self) -> EventHash {
        self.borrowed().recompute_payload_hash()
    }

    /// Decodes the header and payload.
    pub fn event(&self) -> Result<Event> {
        self.borrowed().event()
    }

    /// The frame's fields, its header and payload borrowed.
    pub(crate) fn borrowed(&self) -> FrameRef<'_> {
        FrameRef {
            version: self.version,
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash: self.hash,
            payload_hash: self.payload_hash,
            header: &self.header,
            salt: self.salt,
            payload: &self.payload,
            erased_from: self.erased_from,
        }
    }
}

/// A [`Frame`] whose header and payload are borrowed from the stored record they were split
/// from: what a reader that checks or decodes records one after another needs, with no copy of
/// their bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// The format version byte.
    pub version: u8,
    /// The seq written inside the record.
    pub seq: Seq,
    /// The stored `prev_hash`.
    pub prev_hash: EventHash,
    /// The stored hash of this event.
    pub hash: EventHash,
    /// The stored payload hash (format 4: the salted commitment).
    pub payload_hash: EventHash,
    /// Canonical header bytes.
    pub header: &'a [u8],
    /// The event's salt (format 4 only).
    pub salt: Option<Salt>,
    /// Canonical payload bytes (none in an erased record).
    pub payload: &'a [u8],
    /// For an erased record (format 5), the format the event was written in.
    pub erased_from: Option<u8>,
}

impl<'a> FrameRef<'a> {
    /// Splits stored record bytes into fields (what [`Frame::decode`] does, without copying).
    pub fn parse(bytes: &'a [u8]) -> Result<FrameRef<'a>> {
        FrameRef::parse_as(bytes, true)
    }

    /// Splits a stored record that ends at its `payload_len`, its payload's bytes absent (what a
    /// store keeps in sled of a payload it keeps in its value file): every field but the
    /// payload, which is empty. The chain hash recomputes from it; the payload hash cannot.
    pub fn parse_without_payload(bytes: &'a [u8]) -> Result<FrameRef<'a>> {
        FrameRef::parse_as(bytes, false)
    }

    fn parse_as(bytes: &'a [u8], with_payload: bool) -> Result<FrameRef<'a>> {
        let mut rest = bytes;
        let version = take(&mut rest, 1, "version byte")?[0];
        if version > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found: version,
                max: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(Error::corrupt("event record has format version 0"));
        }
        if version == VALUE_REF_FORMAT {
            return Err(Error::corrupt(
                "event record is a stored reference into a store's value file (format 13), not a record: only the store that holds the value file can read it whole",
            ));
        }
        let mut seq = [0; 8];
        seq.copy_from_slice(take(&mut rest, 8, "seq")?);
        let prev_hash = take_hash(&mut rest, "prev_hash")?;
        let hash = take_hash(&mut rest, "hash")?;
        let payload_hash = take_hash(&mut rest, "payload_hash")?;
        let header_len = take_u32(&mut rest, "header length")?;
        let header = take(&mut rest, header_len, "header")?;
        let (salt, payload, erased_from) =
            if version == ERASED_FORMAT || version == ERASED_KEEPING_FORMAT {
                let from = take(&mut rest, 1, "erased record's format")?[0];
                if semantics_of_format(from).is_none() {
                    return Err(Error::corrupt(format!(
                        "an erased record says it was an event of format {from}, which no event has"
                    )));
                }
                let kept = if version == ERASED_KEEPING_FORMAT {
                    let len = take_u32(&mut rest, "kept effect's length")?;
                    take(&mut rest, len, "kept effect")?
                } else {
                    &[][..]
                };
                (None, kept, Some(from))
            } else {
                let salt = if is_salted(version) {
                    let mut salt = [0; 32];
                    salt.copy_from_slice(take(&mut rest, 32, "salt")?);
                    Some(Salt(salt))
                } else {
                    None
                };
                let payload_len = take_u32(&mut rest, "payload length")?;
                let payload = if with_payload {
                    take(&mut rest, payload_len, "payload")?
                } else {
                    &[][..]
                };
                (salt, payload, None)
            };
        if !rest.is_empty() {
            return Err(Error::corrupt(format!(
                "event record has {} trailing bytes",
                rest.len()
            )));
        }
        Ok(FrameRef {
            version,
            seq: Seq(u64::from_le_bytes(seq)),
            prev_hash,
            hash,
            payload_hash,
            header,
            salt,
            payload,
            erased_from,
        })
    }

    /// The chain hash recomputed from the stored fields (with the stored payload hash).
    pub fn recompute_hash(&self) -> EventHash {
        chain_hash(self.seq, &self.prev_hash, self.header, &self.payload_hash)
    }

    /// The payload hash recomputed from the stored payload (and salt); an erased record's, which
    /// has no payload left to hash, as stored.
    pub fn recompute_payload_hash(&self) -> EventHash {
        match self.erased_from {
            Some(_) => self.payload_hash,
            None => payload_hash_of(self.payload, self.salt.as_ref()),
        }
    }

    /// Decodes the header and payload.
    pub fn event(&self) -> Result<Event> {
        if let Some(from) = self.erased_from {
            return Event::erased_from_parts(
                from,
                self.seq,
                self.prev_hash,
                self.header,
                self.payload_hash,
                kept_of(self.version, self.payload)?,
            );
        }
        Event::from_parts(
            self.version,
            self.seq,
            self.prev_hash,
            self.header,
            self.salt,
            self.payload,
        )
    }

    /// The frame with its own copy of the header and payload.
    pub fn to_frame(self) -> Frame {
        Frame {
            version: self.version,
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash: self.hash,
            payload_hash: self.payload_hash,
            header: self.header.to_vec(),
            salt: self.salt,
            payload: self.payload.to_vec(),
            erased_from: self.erased_from,
        }
    }
}
