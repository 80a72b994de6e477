//! File content the index shares with the log: a chunk of the index's content tree whose bytes
//! are already in the value file, as part of a payload the log keeps there, is stored as a
//! reference to them rather than as a second copy.
//!
//! A `create` of a large file is the case this is for: its payload ends with the file's text (the
//! command's last field is the text, the payload's last field the command), so the chunks the
//! index splits that text into are, read backwards, the payload's last bytes. When the index's
//! changes are written, each file's run of new chunks (in key order, which for new chunks is their
//! order in the file) is compared backwards with the end of the payloads appended since the
//! index was last written that end with the same 64 bytes (at most four of them); the chunks that
//! match from the end are stored as references, the rest as they are. The comparison costs the
//! run's bytes a few times at most, never a search, and is exact: a chunk is a reference only if
//! its bytes are those it names.
//!
//! A chunk's value in the index is its next chunk's number (`u64` LE, [`LAST`] for none) and its
//! bytes. A chunk number never reaches 2^56 (each is allocated by an event), so the next number's
//! last byte is `0x00`, or `0xFF` for [`LAST`]. The stored reference is 52 bytes: the next number
//! with that last byte's top bit flipped (`0x80` or `0x7F`, which no chunk value has), then the
//! bytes' place in the value file (offset `u64` LE, length `u32` LE) and their blake3 hash. Every
//! read of the index turns it back into the chunk's value, checking the hash; the index's layout,
//! what `verify` re-derives and compares, is the chunk's value, not how it is stored.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::store::disk::chunk_pieces;
use crate::store::disk::value_file::{Recent, ValueFile, ValueRef};

/// The next number of a file's last chunk: the projection's `content::LAST` (a test there holds
/// them equal; the disk layer sits below the index's).
pub(crate) const LAST: u64 = u64::MAX;

/// A content key: the prefix, the file's id (8 bytes) and the chunk's number (8 bytes).
const CHUNK_KEY_LEN: usize = 1 + 8 + 8;

/// The length of a stored reference.
const REF_LEN: usize = 8 + ValueRef::LEN;

/// The least bytes a chunk must hold to be stored as a reference (a smaller one is cheaper kept).
const SHARED_MIN: usize = 1024;

/// How many of a payload's last bytes pick the payloads a run of chunks is compared with.
const TAIL: usize = 64;

/// The most payloads a run of chunks is compared with.
const CANDIDATES: usize = 4;

/// Whether a stored content value is a reference (see the module docs).
pub(crate) fn is_reference(stored: &[u8]) -> bool {
    stored.len() == REF_LEN && matches!(stored[7], 0x80 | 0x7F)
}

/// Whether a stored content value names the value file: a reference, or a chunk an edit stored
/// as pieces (`chunk_pieces`). Any other is the chunk's value itself.
pub(crate) fn names_values(stored: &[u8]) -> bool {
    is_reference(stored) || chunk_pieces::is_pieces(stored)
}

/// The chunk value a stored content value under `key` stands for: the value itself, or the bytes
/// a reference or a chunk of pieces names, read back from `values` and checked.
pub(crate) fn resolve_chunk(key: &[u8], stored: &[u8], values: &ValueFile) -> Result<Vec<u8>> {
    if chunk_pieces::is_pieces(stored) {
        return chunk_pieces::resolve(&chunk_name(key), stored, values);
    }
    if !is_reference(stored) {
        return Ok(stored.to_vec());
    }
    let at = ValueRef::decode(&stored[8..]);
    let mut value = stored[..8].to_vec();
    value[7] ^= 0x80;
    value.extend(values.read(&chunk_name(key), &at)?);
    Ok(value)
}

/// A content key in words: "chunk 6 of file 3 in the index".
fn chunk_name(key: &[u8]) -> String {
    let number = |at: usize| {
        key.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_be_bytes)
    };
    format!("chunk {} of file {} in the index", number(9), number(1))
}

fn reference(value: &[u8], at: &ValueRef) -> Vec<u8> {
    let mut out = Vec::with_capacity(REF_LEN);
    out.extend_from_slice(&value[..8]);
    out[7] ^= 0x80;
    at.encode(&mut out);
    out
}

/// Whether `value` under `key` is a chunk that may be stored as a reference.
fn shareable(key: &[u8], value: &[u8], is_content: fn(&[u8]) -> bool) -> bool {
    key.len() == CHUNK_KEY_LEN
        && is_content(key)
        && value.len() >= 8 + SHARED_MIN
        && (value[7] == 0x00 || value[..8] == LAST.to_le_bytes())
}

/// For each of `writes` (in key order), the stored reference it is written as, or `None` to
/// write it as it is: the runs of one file's chunks (the keys `is_content` says are content)
/// that end a payload of `recent` (newest first), matched backwards.
pub(crate) fn share<'a>(
    writes: &[(&'a [u8], Option<&'a [u8]>)],
    recent: &[Recent],
    is_content: fn(&[u8]) -> bool,
) -> Vec<Option<Vec<u8>>> {
    let mut out = vec![None; writes.len()];
    if recent.is_empty() {
        return out;
    }
    // The payloads by their last bytes, newest first: a run is compared only with those that
    // end as it does, at most CANDIDATES of them, so a batch costs its own bytes a few times
    // over however many payloads are kept.
    let mut by_tail: HashMap<&[u8], Vec<(ValueRef, &[u8])>> = HashMap::new();
    for (_, at, payload) in recent.iter().filter(|(_, _, p)| p.len() >= TAIL) {
        by_tail
            .entry(&payload[payload.len() - TAIL..])
            .or_default()
            .push((*at, payload));
    }
    let mut start = 0;
    while start < writes.len() {
        let file = |i: usize| match writes[i] {
            (key, Some(value)) if shareable(key, value, is_content) => Some(&key[..9]),
            _ => None,
        };
        let Some(id) = file(start) else {
            start += 1;
            continue;
        };
        let mut end = start + 1;
        while end < writes.len() && file(end) == Some(id) {
            end += 1;
        }
        let last = &writes[end - 1].1.expect("a chunk written")[8..];
        let candidates = by_tail
            .get(&last[last.len() - TAIL..])
            .map_or(&[][..], Vec::as_slice);
        for (at, payload) in candidates.iter().take(CANDIDATES) {
            let matched = match_end(&writes[start..end], payload);
            if matched.is_empty() {
                continue;
            }
            for (i, from) in matched {
                let value = writes[start + i].1.expect("a chunk written");
                let bytes = &value[8..];
                let part = at.part(from, bytes.len(), *blake3::hash(bytes).as_bytes());
                out[start + i] = Some(reference(value, &part));
            }
            break;
        }
        start = end;
    }
    out
}

/// Fills in `shared` (what [`share`] gave for `writes`) with the chunks an edit changed whose
/// key held, before, a chunk that names the value file (`before` gives what a key stores now):
/// each is stored as the pieces of the old chunk it keeps and the bytes it changed
/// (`chunk_pieces`), when that is cheaper than the whole chunk.
pub(crate) fn share_edits(
    writes: &[(&[u8], Option<&[u8]>)],
    shared: &mut [Option<Vec<u8>>],
    before: impl Fn(&[u8]) -> Option<Vec<u8>>,
    values: &ValueFile,
    is_content: fn(&[u8]) -> bool,
) {
    for ((key, value), out) in writes.iter().zip(shared.iter_mut()) {
        let Some(value) = value else { continue };
        if out.is_some() || !shareable(key, value, is_content) {
            continue;
        }
        let Some(old) = before(key).filter(|old| names_values(old)) else {
            continue;
        };
        *out = chunk_pieces::edited(&chunk_name(key), &old, value, values, SHARED_MIN);
    }
}

/// The chunks of `run` that, read backwards, are the last bytes of `payload`: each one's index in
/// the run and where its bytes start in the payload.
fn match_end(run: &[(&[u8], Option<&[u8]>)], payload: &[u8]) -> Vec<(usize, usize)> {
    let mut cursor = payload.len();
    let mut matched = Vec::new();
    for (i, (_, value)) in run.iter().enumerate().rev() {
        let bytes = &value.expect("a chunk written")[8..];
        if bytes.len() > cursor || payload[cursor - bytes.len()..cursor] != *bytes {
            break;
        }
        cursor -= bytes.len();
        matched.push((i, cursor));
    }
    matched
}

/// The error for a content value stored as a reference that cannot be read: the index differs
/// from what the log derives there.
pub(crate) fn unreadable(e: &Error) -> bool {
    matches!(e, Error::Corrupt { .. } | Error::UnsafeFile { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Seq;

    fn content(key: &[u8]) -> bool {
        key.first() == Some(&b'b')
    }

    fn key(id: u64, no: u64) -> Vec<u8> {
        let mut k = vec![b'b'];
        k.extend_from_slice(&id.to_be_bytes());
        k.extend_from_slice(&no.to_be_bytes());
        k
    }

    fn chunk(next: u64, bytes: &[u8]) -> Vec<u8> {
        let mut v = next.to_le_bytes().to_vec();
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn the_chunks_that_end_a_payload_are_stored_as_references_and_read_back_whole() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let text: Vec<u8> = (0..6000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut payload = b"header of the payload".to_vec();
        payload.extend_from_slice(&text);
        values
            .append(vec![(Seq(3), payload.clone())])
            .expect("append");
        let (a, b, c) = (&text[..8000], &text[8000..16000], &text[16000..]);
        let keys = [key(1, 0), key(1, 1), key(1, 2), key(2, 0)];
        let other = chunk(LAST, &[7; 2000]);
        let vals = [chunk(1, a), chunk(2, b), chunk(LAST, c), other.clone()];
        let writes: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(&vals)
            .map(|(k, v)| (&k[..], Some(&v[..])))
            .collect();
        let shared = share(&writes, &values.recent_payloads(), content);
        assert!(
            shared[..3]
                .iter()
                .all(|s| s.as_ref().is_some_and(|r| is_reference(r)))
        );
        assert!(
            shared[3].is_none(),
            "bytes no payload holds stay as they are"
        );
        for ((k, v), stored) in keys.iter().zip(&vals).zip(&shared) {
            let stored = stored.clone().unwrap_or_else(|| v.clone());
            assert_eq!(&resolve_chunk(k, &stored, &values).expect("read"), v);
        }
        assert!(!is_reference(&other) && !is_reference(&chunk(1, &[0; REF_LEN - 8])));
        // A run whose last chunk differs from the payload's end shares nothing; one whose middle
        // differs shares what matches from the end.
        let edited = [chunk(1, a), chunk(2, &[9; 8000]), chunk(LAST, c)];
        let writes: Vec<(&[u8], Option<&[u8]>)> = keys[..3]
            .iter()
            .zip(&edited)
            .map(|(k, v)| (&k[..], Some(&v[..])))
            .collect();
        let shared = share(&writes, &values.recent_payloads(), content);
        assert_eq!(
            shared.iter().map(Option::is_some).collect::<Vec<_>>(),
            [false, false, true]
        );
        values.indexed_through(Seq(3));
        assert!(
            share(&writes, &values.recent_payloads(), content)
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn a_reference_whose_bytes_changed_is_refused_naming_the_chunk() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let text = vec![b'x'; 4000];
        values.append(vec![(Seq(1), text.clone())]).expect("append");
        let k = key(5, 0);
        let v = chunk(LAST, &text);
        let writes = [(&k[..], Some(&v[..]))];
        let stored = share(&writes, &values.recent_payloads(), content)[0]
            .clone()
            .expect("a reference");
        let path = dir.path().join(crate::store::disk::VALUES_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[10] = b'y';
        std::fs::write(&path, bytes).expect("write");
        let fresh = ValueFile::in_dir(dir.path());
        match resolve_chunk(&k, &stored, &fresh) {
            Err(e @ Error::Corrupt { .. }) => {
                assert!(unreadable(&e));
                assert!(e.to_string().contains("chunk 0 of file 5"), "{e}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
}
