//! The blake3 hash Mnemo names everything by: an event's chain hash, a payload's, a result text's,
//! a token's. It sits below the core, which records the hashes of inputs and tokens, and below
//! the event format, which chains them; the public paths are `mnemo::EventHash` and
//! `mnemo::event::EventHash`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A blake3 hash in the chain (an event hash, a payload hash or a result-text hash).
///
/// Equality goes through [`blake3::Hash`], which compares in constant time.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub struct EventHash(pub [u8; 32]);

impl EventHash {
    /// The `prev_hash` of event 1.
    pub const ZERO: EventHash = EventHash([0; 32]);

    /// Hashes `bytes` with blake3.
    pub fn of(bytes: &[u8]) -> EventHash {
        EventHash(*blake3::hash(bytes).as_bytes())
    }

    /// Lower-case hex, 64 characters.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses 64 hex characters.
    pub fn from_hex(hex: &str) -> Option<EventHash> {
        blake3::Hash::from_hex(hex)
            .ok()
            .map(|h| EventHash(*h.as_bytes()))
    }
}

impl PartialEq for EventHash {
    fn eq(&self, other: &Self) -> bool {
        blake3::Hash::from_bytes(self.0) == blake3::Hash::from_bytes(other.0)
    }
}

impl Eq for EventHash {}

impl fmt::Debug for EventHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventHash({})", self.to_hex())
    }
}

impl fmt::Display for EventHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}
