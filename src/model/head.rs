//! `Head`: the last event of a log, its seq and hash, and the `SEQ:HASH` checkpoint form.
//!
//! Its own module, below the store and the files beside it (`disk`'s head record), which both
//! name it.

use crate::error::{Error, Result};
use crate::model::event::{EventHash, Seq};

/// The last event: its seq and hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The last seq (0 for an empty log).
    pub seq: Seq,
    /// Its hash ([`EventHash::ZERO`] for an empty log).
    pub hash: EventHash,
}

impl Head {
    /// The head of an empty log.
    pub const EMPTY: Head = Head {
        seq: Seq(0),
        hash: EventHash::ZERO,
    };

    /// Parses a checkpoint written as `SEQ:HASH` (the form `mnemo verify` prints).
    pub fn parse(text: &str) -> Result<Head> {
        let bad = || {
            Error::InvalidArgument(format!(
                "checkpoint {text:?} is not SEQ:HASH (a seq, a colon and 64 hex digits, as `mnemo verify` prints it)"
            ))
        };
        let (seq, hash) = text.trim().split_once(':').ok_or_else(bad)?;
        let head = Head {
            seq: Seq(seq.parse().map_err(|_| bad())?),
            hash: EventHash::from_hex(hash).ok_or_else(bad)?,
        };
        // Seq 0 is the empty log, whose hash is all zeros: any other is no checkpoint at all.
        if head.seq == Seq(0) && head != Head::EMPTY {
            return Err(Error::InvalidArgument(format!(
                "checkpoint {text:?} names seq 0, the empty log, with a hash it cannot have (all zeros); a checkpoint names an event from seq 1 on, as `mnemo verify` prints it"
            )));
        }
        Ok(head)
    }

    /// The 40 bytes `meta.head` holds: the seq, big-endian, then the hash.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = self.seq.0.to_be_bytes().to_vec();
        v.extend_from_slice(&self.hash.0);
        v
    }

    /// [`Head::encode`]'s bytes read back.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Head> {
        if bytes.len() != 40 {
            return Err(Error::corrupt("meta.head is not 40 bytes"));
        }
        let mut hash = [0; 32];
        hash.copy_from_slice(&bytes[8..]);
        Ok(Head {
            seq: Seq::from_key(&bytes[..8]).unwrap_or(Seq(0)),
            hash: EventHash(hash),
        })
    }
}

impl std::fmt::Display for Head {
    /// `SEQ:HASH`, the checkpoint form.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}
