//! The seq every event is named by: its position in the log. It sits below the core, which records
//! the seqs of the admin events that issued and revoked tokens, and below the event format; the
//! public paths are `mnemo::Seq` and `mnemo::event::Seq`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An event's position in the log: dense, from 1, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Seq(pub u64);

impl Seq {
    /// The key of this seq in the `events` tree (big-endian, so sled orders keys by seq).
    pub fn key(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// Parses an `events` key.
    pub fn from_key(key: &[u8]) -> Option<Seq> {
        Some(Seq(u64::from_be_bytes(key.try_into().ok()?)))
    }
}

/// Seqs as the answers and the log list them: `5, 7, 9`.
pub fn listed(seqs: &[u64]) -> String {
    seqs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
