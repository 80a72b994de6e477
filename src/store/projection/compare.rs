//! Comparing a replayed index with the stored one, in the index's own words: the kv layer finds
//! the first difference in bytes ([`IndexTrees::first_difference`]), and this module names the
//! keys it involves by what they are (a directory entry, a file record, a chunk, a token), so no
//! caller needs to know the key layout.

use super::Projection;
use super::journal::{FAMILIES, STREAMED};
use crate::error::Result;
use crate::store::kv::{CONTENT_PREFIX, Difference, IndexTrees, MemKv};

impl Projection<MemKv> {
    /// How this index (built in memory, by a replay) first differs from `stored`, in words, or
    /// `None` when the two hold the same entries byte for byte, each stored key in the tree it
    /// belongs in. The version journal's entries that grow with the log ([`STREAMED`]) are not
    /// held by the replay: the verifier checked them event by event, `journal_checked` of them,
    /// and here the stored index must hold that many. A replay that keeps no journal compares
    /// everything but the journal.
    pub fn differs_from(
        &self,
        stored: &Projection<IndexTrees>,
        journal_checked: u64,
    ) -> Result<Option<String>> {
        // A replay that keeps no journal (one of the past, made for reading) compares the rest.
        let skip: &[u8] = if self.journal_on() {
            &STREAMED
        } else {
            &FAMILIES
        };
        let (found, journal) = stored.kv().first_difference(self.kv(), skip)?;
        if found.is_none() && self.journal_on() && journal != journal_checked {
            return Ok(Some(format!(
                "the store's version journal holds {journal} entries where the log implies {journal_checked}"
            )));
        }
        Ok(found.map(|difference| match difference {
            Difference::Value { key } => format!(
                "index entry {} holds a different value than the log implies",
                describe_key(&key)
            ),
            Difference::Key { tree, ours, stored } => format!(
                "the log implies index entry {} where the store's {tree} tree has {}",
                describe_key(&ours),
                describe_key(&stored)
            ),
            Difference::Extra { tree, key } => format!(
                "the store's {tree} tree has an extra entry {}",
                describe_key(&key)
            ),
            Difference::Missing { key } => {
                format!("the store's index is missing entry {}", describe_key(&key))
            }
        }))
    }
}

/// An index key as a reader would name it (see the key table in the module docs of
/// [`crate::store::projection`]); a key of no known shape is shown as lossy text.
pub fn describe_key(key: &[u8]) -> String {
    let id = |range: std::ops::Range<usize>| {
        u64::from_be_bytes(key[range].try_into().unwrap_or_default())
    };
    match key.first() {
        Some(b'c') if key.len() >= 9 => format!(
            "child {:?} of node {}",
            String::from_utf8_lossy(&key[9..]),
            id(1..9)
        ),
        Some(b'f') if key.len() == 9 => format!("record of file node {}", id(1..9)),
        Some(&CONTENT_PREFIX) if key.len() == 17 => {
            format!("chunk {} of file node {}", id(9..17), id(1..9))
        }
        Some(b'k') => format!(
            "record of agent token {:?}",
            String::from_utf8_lossy(&key[1..])
        ),
        Some(b's') => format!("setting {:?}", String::from_utf8_lossy(&key[1..])),
        Some(b'v') if key.len() == 9 => format!("version journal record of event {}", id(1..9)),
        Some(b'm') if key.len() == 17 => format!(
            "version journal entry of memory {} at event {}",
            id(1..9),
            id(9..17)
        ),
        Some(b'w') if key.len() == 9 => {
            format!("version journal entry of a directory at event {}", id(1..9))
        }
        Some(b'h') if key.len() == 9 => format!("content digest of memory {}", id(1..9)),
        Some(b'r') if key.len() == 9 => format!("redaction of event {}", id(1..9)),
        Some(b'j') if key.len() == 1 => "version count".to_string(),
        _ => format!("{:?}", String::from_utf8_lossy(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_by_what_they_hold() {
        let mut child = vec![b'c'];
        child.extend_from_slice(&7u64.to_be_bytes());
        child.extend_from_slice(b"notes.md");
        assert_eq!(describe_key(&child), "child \"notes.md\" of node 7");
        let mut file = vec![b'f'];
        file.extend_from_slice(&9u64.to_be_bytes());
        assert_eq!(describe_key(&file), "record of file node 9");
        let mut chunk = vec![CONTENT_PREFIX];
        chunk.extend_from_slice(&9u64.to_be_bytes());
        chunk.extend_from_slice(&2u64.to_be_bytes());
        assert_eq!(describe_key(&chunk), "chunk 2 of file node 9");
        assert_eq!(describe_key(b"kabc"), "record of agent token \"abc\"");
        assert_eq!(describe_key(b"a"), "\"a\"");
        // A key too short for its kind is shown as it is.
        assert_eq!(describe_key(b"f12"), "\"f12\"");
    }
}
