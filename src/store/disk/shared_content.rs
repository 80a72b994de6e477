//! File content the index shares with the log: a chunk of the index's content tree whose bytes
//! are already in the value file, as part of a payload the log keeps there, is stored as a
//! reference to them rather than as a second copy.
//!
//! A `create` of a large file is the case this is for: its payload ends with the file's text (the
//! command's last field is the text, the payload's last field the command), so the chunks the
//! index splits that text into are, read backwards, the payload's last bytes. When the index's
//! changes are written, each file's run of new chunks (in key order, which for new chunks is their
//! order in the file) is compared with the payloads appended since the index was last written
//! that end as the run does (or, for a run as large as a payload, whose end its last chunk holds),
//! at most four of them, aligned from the payload's end ([`align`]): a chunk equal to the bytes
//! where it should be is stored as a reference; one an edit changed since (a restore writes a
//! whole file's chunks at once) is found by its first or last bytes near where it should be and
//! stored as pieces (`chunk_pieces`). Each lookup is bounded by a window, so a batch costs its
//! own bytes a bounded number of times, and the result is exact: a kept range is only ever bytes
//! compared equal.
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
use crate::store::disk::chunk_pieces::{self, Piece};
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

/// The next chunk's number a stored content value opens with, read from it alone: a reference
/// or a chunk of pieces keeps it with its last byte marked, a chunk value as it is. `None` for a
/// value too short to hold one.
pub(crate) fn stored_next(stored: &[u8]) -> Option<u64> {
    let mut next: [u8; 8] = stored.get(..8)?.try_into().ok()?;
    if is_reference(stored) {
        next[7] ^= 0x80;
    } else if chunk_pieces::is_pieces(stored) {
        next[7] ^= chunk_pieces::MARK;
    }
    Some(u64::from_le_bytes(next))
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
        let run: Vec<&[u8]> = writes[start..end]
            .iter()
            .map(|(_, value)| &value.expect("a chunk written")[8..])
            .collect();
        let candidates = candidates_for(&run, &by_tail);
        for (at, payload) in candidates.iter().take(CANDIDATES) {
            let aligned = align(&run, payload);
            if aligned.iter().all(Option::is_none) {
                continue;
            }
            for (i, pieces) in aligned.into_iter().enumerate() {
                let value = writes[start + i].1.expect("a chunk written");
                out[start + i] = pieces.and_then(|pieces| stored(value, pieces, at));
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

/// The payloads a run of one file's chunks is compared with: those that end as the run does
/// (a file unchanged at its end since its `create`), else, for a run of at least [`DEEP_MIN`]
/// bytes, those whose last [`TAIL`] bytes are found in its last chunk (a file written to past its
/// end since: its `create`'s text ends there). The search costs the last chunk's length in
/// lookups, and only runs as large as a payload kept in the value file pay it.
fn candidates_for<'p>(
    run: &[&[u8]],
    by_tail: &'p HashMap<&[u8], Vec<(ValueRef, &'p [u8])>>,
) -> &'p [(ValueRef, &'p [u8])] {
    let Some(last) = run.last() else {
        return &[];
    };
    if let Some(found) = by_tail.get(&last[last.len().saturating_sub(TAIL)..]) {
        return found;
    }
    if run.iter().map(|c| c.len()).sum::<usize>() < DEEP_MIN {
        return &[];
    }
    last.windows(TAIL)
        .rev()
        .find_map(|window| by_tail.get(window))
        .map_or(&[], Vec::as_slice)
}

/// The least bytes a run of chunks must hold for its last chunk to be searched for a payload's
/// end (the size from which a payload goes to the value file).
const DEEP_MIN: usize = crate::store::disk::value_file::VALUE_MIN;

/// How many of a chunk's first (or last) bytes are looked for in a payload to find where the
/// chunk's kept bytes are.
pub(super) const ANCHOR: usize = 32;

/// How far around where an edited chunk's bytes are expected they are looked for in the payload:
/// a chunk whose edits moved its bytes further is stored whole.
const WINDOW: usize = 64 * 1024;

/// How each chunk of `run` (one file's new chunks in file order, their bytes) is made of the
/// bytes of `payload`, aligned from the payload's end (a `create`'s text ends its payload): its
/// pieces, offsets within `payload`, or `None` where none of its bytes were found. A chunk the
/// file has unchanged since the payload is one piece; one an edit changed is the bytes before
/// the edit, kept, the bytes the edit wrote, and the bytes after it, kept. Exact: a kept piece
/// is only ever bytes compared equal.
fn align(run: &[&[u8]], payload: &[u8]) -> Vec<Option<Vec<Piece>>> {
    let mut out = vec![None; run.len()];
    // Where the chunk being aligned ends in the payload, when known; else where it should.
    let mut end = Some(payload.len());
    let mut guess = payload.len();
    for (i, bytes) in run.iter().enumerate().rev() {
        let Some(at) = end.or_else(|| find_end(bytes, payload, guess)) else {
            guess = guess.saturating_sub(bytes.len());
            continue;
        };
        let suffix = common_suffix(bytes, &payload[..at]);
        let before = at - suffix;
        let rest = &bytes[..bytes.len() - suffix];
        let kept_after = Piece::Kept {
            offset: before as u64,
            len: u32::try_from(suffix).unwrap_or(u32::MAX),
        };
        if rest.is_empty() {
            out[i] = Some(vec![kept_after]);
            (end, guess) = (Some(before), before);
            continue;
        }
        let start = rest.get(..ANCHOR).and_then(|anchor| {
            let from = before.saturating_sub(rest.len() + WINDOW);
            nearest(
                &payload[..before],
                anchor,
                before.saturating_sub(rest.len()),
                from,
            )
        });
        let pieces = match start {
            Some(start) => {
                let prefix = common_prefix(rest, &payload[start..before]);
                (end, guess) = (Some(start), start);
                vec![
                    Piece::Kept {
                        offset: start as u64,
                        len: u32::try_from(prefix).unwrap_or(u32::MAX),
                    },
                    Piece::Written(rest[prefix..].to_vec()),
                    kept_after,
                ]
            }
            None => {
                (end, guess) = (None, before.saturating_sub(rest.len()));
                vec![Piece::Written(rest.to_vec()), kept_after]
            }
        };
        out[i] = Some(pieces);
    }
    out
}

/// How the one chunk `bytes` is made of the bytes of `old` (aligned from its end, as [`align`]
/// does a run): its pieces, offsets within `old`.
pub(super) fn align_one(bytes: &[u8], old: &[u8]) -> Option<Vec<Piece>> {
    align(&[bytes], old).pop().flatten()
}

/// Where `bytes` (a chunk) ends in `payload`, looked for by its last [`ANCHOR`] bytes within
/// [`WINDOW`] of `guess`, the occurrence nearest it.
fn find_end(bytes: &[u8], payload: &[u8], guess: usize) -> Option<usize> {
    let anchor = bytes.get(bytes.len().checked_sub(ANCHOR)?..)?;
    let guess = guess.min(payload.len());
    let to = (guess + WINDOW).min(payload.len());
    let at = guess.saturating_sub(ANCHOR);
    nearest(&payload[..to], anchor, at, at.saturating_sub(WINDOW)).map(|p| p + ANCHOR)
}

/// The occurrence of `anchor` in `within[from..]` that starts nearest `expected` (where the
/// bytes would be had nothing moved them): repeated text has many, and the nearest is the one
/// the longest kept range starts from.
pub(super) fn nearest(within: &[u8], anchor: &[u8], expected: usize, from: usize) -> Option<usize> {
    let expected = expected.clamp(from, within.len());
    let before = memchr::memmem::rfind(
        &within[from..(expected + anchor.len()).min(within.len())],
        anchor,
    )
    .map(|p| from + p);
    if before == Some(expected) {
        return before;
    }
    let after = memchr::memmem::find(&within[expected..], anchor).map(|p| expected + p);
    match (before, after) {
        (Some(b), Some(a)) => Some(if expected - b <= a - expected { b } else { a }),
        (b, a) => b.or(a),
    }
}

pub(super) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

pub(super) fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The stored form of the chunk `value` made of `pieces` of the payload at `at`: a reference
/// when one piece holds it all, else a chunk of pieces when that is worth it (`chunk_pieces`),
/// else `None`.
fn stored(value: &[u8], pieces: Vec<Piece>, at: &ValueRef) -> Option<Vec<u8>> {
    let bytes = &value[8..];
    let absolute: Vec<Piece> = pieces
        .into_iter()
        .filter(|piece| piece.len() > 0)
        .map(|piece| match piece {
            Piece::Kept { offset, len } => Piece::Kept {
                offset: at.offset + offset,
                len,
            },
            written => written,
        })
        .collect();
    match absolute.as_slice() {
        [Piece::Kept { offset, len }] if u64::from(*len) == bytes.len() as u64 => {
            if bytes.len() < SHARED_MIN {
                return None;
            }
            let part = ValueRef {
                offset: *offset,
                len: *len,
                hash: *blake3::hash(bytes).as_bytes(),
            };
            Some(reference(value, &part))
        }
        _ => chunk_pieces::stored_as(value, absolute, SHARED_MIN),
    }
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

    /// What [`share`] gives for chunks `vals` under `keys`, written in one batch.
    fn shared_of(keys: &[Vec<u8>], vals: &[Vec<u8>], values: &ValueFile) -> Vec<Option<Vec<u8>>> {
        let writes: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(vals)
            .map(|(k, v)| (&k[..], Some(&v[..])))
            .collect();
        share(&writes, &values.recent_payloads(), content)
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
        let shared = shared_of(&keys, &vals, &values);
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
            // The link, read from the stored form alone (LAST included), is the value's own.
            let next = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
            assert_eq!(stored_next(&stored), Some(next));
        }
        assert_eq!(stored_next(&[0; 7]), None);
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
            [true, false, true],
            "the chunks either side of one no payload holds are found where they are"
        );
        for ((k, v), stored) in keys.iter().zip(&edited).zip(&shared) {
            let stored = stored.clone().unwrap_or_else(|| v.clone());
            assert_eq!(&resolve_chunk(k, &stored, &values).expect("read"), v);
        }
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

    /// `bytes` in chunks of `sizes` (in turn), the last at least 4,096 bytes when there are
    /// several, as the index's layout has them.
    fn split<'a>(bytes: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
        let mut chunks = Vec::new();
        let (mut from, mut size) = (0, sizes.iter().cycle());
        while from < bytes.len() {
            let mut to = (from + size.next().expect("sizes")).min(bytes.len());
            if bytes.len() - to < 4096 {
                to = bytes.len();
            }
            chunks.push(&bytes[from..to]);
            from = to;
        }
        chunks
    }

    /// The bytes the chunks of `now`, split in 8,000-byte chunks and written in one batch beside
    /// the payload that created `text`, are stored in, and the bytes of `now`.
    fn stored_bytes(text: &[u8], now: &[u8]) -> (usize, usize) {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let mut payload = b"the command's other fields".to_vec();
        payload.extend_from_slice(text);
        values.append(vec![(Seq(4), payload)]).expect("append");
        let chunks = split(now, &[8000]);
        let keys: Vec<Vec<u8>> = (0..chunks.len() as u64).map(|no| key(7, no)).collect();
        let vals: Vec<Vec<u8>> = chunks
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                chunk(
                    if i + 1 == chunks.len() {
                        LAST
                    } else {
                        i as u64 + 1
                    },
                    bytes,
                )
            })
            .collect();
        let shared = shared_of(&keys, &vals, &values);
        let mut stored = 0;
        for ((k, v), s) in keys.iter().zip(&vals).zip(&shared) {
            let s = s.clone().unwrap_or_else(|| v.clone());
            assert_eq!(&resolve_chunk(k, &s, &values).expect("read"), v);
            stored += s.len();
        }
        (stored, now.len())
    }

    #[test]
    fn a_file_edited_since_its_create_is_stored_as_the_payloads_bytes_and_its_edits() {
        let text: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("line {i:>8}\n").into_bytes())
            .collect();
        let edit = |at: usize, cut: usize, with: &[u8]| {
            let mut now = text.clone();
            now.splice(at..at + cut, with.iter().copied());
            now
        };
        let mut spread = text.clone();
        for i in (0..spread.len() - 100).step_by(25_000).rev() {
            spread.splice(i..i + 10, *b"an edit, a little longer");
        }
        for (what, now) in [
            ("unchanged", text.clone()),
            ("spread edits", spread),
            ("appended to", edit(text.len(), 0, &[b'+'; 3000])),
            ("written at the front", edit(0, 0, &[b'<'; 500])),
            ("a range removed", edit(50_000, 12_000, b"")),
        ] {
            let (stored, len) = stored_bytes(&text, &now);
            assert!(stored * 10 < len, "{what}: {stored} bytes stored for {len}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// A file created whole and then edited, its chunks written in one batch (as a restore or
        /// a catch-up writes them): every chunk read back is the chunk written, and with no edit
        /// every chunk of 1 KiB or more names the payload's bytes.
        #[test]
        fn chunks_of_an_edited_text_read_back_as_written(
            seed in 0u64..1000,
            len in 2_000usize..60_000,
            alphabet in 2u8..40,
            edits in proptest::collection::vec(
                (0usize..60_000, 0usize..3_000, proptest::collection::vec(0u8..40, 0..3_000)),
                0..5,
            ),
            sizes in proptest::collection::vec(4_096usize..16_384, 1..20),
        ) {
            let dir = tempfile::tempdir().expect("dir");
            let values = ValueFile::in_dir(dir.path());
            let mut state = seed;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    b'a' + u8::try_from((state >> 33) % u64::from(alphabet)).expect("small")
                })
                .collect();
            let mut payload = b"the command's other fields".to_vec();
            payload.extend_from_slice(&text);
            values.append(vec![(Seq(4), payload)]).expect("append");
            let mut now = text.clone();
            for (at, cut, with) in &edits {
                let at = (*at).min(now.len());
                let end = (at + cut).min(now.len());
                now.splice(at..end, with.iter().map(|b| b'a' + b));
            }
            let chunks = split(&now, &sizes);
            let keys: Vec<Vec<u8>> = (0..chunks.len() as u64).map(|no| key(7, no)).collect();
            let vals: Vec<Vec<u8>> = chunks
                .iter()
                .enumerate()
                .map(|(i, bytes)| chunk(if i + 1 == chunks.len() { LAST } else { i as u64 + 1 }, bytes))
                .collect();
            let writes: Vec<(&[u8], Option<&[u8]>)> =
                keys.iter().zip(&vals).map(|(k, v)| (&k[..], Some(&v[..]))).collect();
            let shared = share(&writes, &values.recent_payloads(), content);
            for ((k, v), stored) in keys.iter().zip(&vals).zip(&shared) {
                let stored = stored.clone().unwrap_or_else(|| v.clone());
                proptest::prop_assert_eq!(&resolve_chunk(k, &stored, &values).expect("read"), v);
            }
            if edits.is_empty() {
                for (v, stored) in vals.iter().zip(&shared) {
                    proptest::prop_assert!(v.len() < 8 + SHARED_MIN || stored.is_some());
                }
            }
        }
    }
}
