//! A content chunk an edit changed, stored as the pieces the value file already holds and the
//! bytes the edit wrote, rather than as a second copy of the whole chunk.
//!
//! An edit of a large file rewrites each chunk it touches under the chunk's own key (chunks keep
//! their numbers when their bytes change). When the chunk stored there before names the value
//! file (a reference to a `create`'s bytes, or pieces an earlier edit stored), the new bytes are
//! aligned with the old: their common end, the bytes before the edit, and the old bytes between
//! several edits written in one batch ([`within`]) stay where the value file holds them, and only
//! the bytes the edits wrote are stored. A file edited all over costs its edits, not a second
//! copy of itself.
//!
//! The stored form: the chunk's next number (`u64` LE) with its last byte XOR [`MARK`] (`0x40`
//! or `0xBF`, which neither a chunk value nor a reference has), the blake3 hash of the chunk's
//! bytes (32), the number of pieces (`u8`, at most [`MAX_PIECES`]), then each piece: `0`, offset
//! (`u64` LE), length (`u32` LE) for bytes the value file holds; `1`, length (`u32` LE), the bytes
//! for bytes stored here. Every read of the index turns it back into the chunk's value and checks
//! the hash of the whole, so a piece naming the wrong bytes is found as a reference's would be.

use crate::error::{Error, Result};
use crate::store::disk::value_file::{ValueFile, ValueRef};

/// What the next number's last byte is XORed with in a stored chunk of pieces.
pub(crate) const MARK: u8 = 0x40;

/// The bytes before the pieces: the next number, the hash and the count.
const HEADER: usize = 8 + 32 + 1;

/// The most pieces a chunk is stored as; a chunk edited into more is stored whole.
pub(crate) const MAX_PIECES: usize = 16;

/// The most bytes one chunk of pieces stands for. A chunk holds at most 16 KiB in the index's
/// layout; anything far past that was not written by Mnemo, and is refused before a byte of it is
/// read.
const MAX_BYTES: u64 = 1 << 20;

/// One piece of a chunk's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// Bytes the value file holds at `offset`.
    Kept { offset: u64, len: u32 },
    /// Bytes stored in the chunk itself.
    Written(Vec<u8>),
}

impl Piece {
    /// How many bytes of the chunk this piece is.
    pub(super) fn len(&self) -> u64 {
        match self {
            Piece::Kept { len, .. } => u64::from(*len),
            Piece::Written(bytes) => bytes.len() as u64,
        }
    }

    /// The part `start..end` of this piece (offsets within it).
    fn part(&self, start: u64, end: u64) -> Piece {
        match self {
            Piece::Kept { offset, .. } => Piece::Kept {
                offset: offset + start,
                len: u32::try_from(end - start).unwrap_or(u32::MAX),
            },
            Piece::Written(bytes) => {
                let at = |n: u64| usize::try_from(n).map_or(bytes.len(), |n| n.min(bytes.len()));
                Piece::Written(bytes.get(at(start)..at(end)).unwrap_or_default().to_vec())
            }
        }
    }
}

/// Whether a stored content value is a chunk stored as pieces (see the module docs).
pub(crate) fn is_pieces(stored: &[u8]) -> bool {
    stored.len() >= HEADER && matches!(stored[7], 0x40 | 0xBF)
}

/// The chunk value `stored` (a chunk of pieces) stands for, its kept pieces read from `values`
/// and the whole checked against its hash; `name` names the chunk in errors.
pub(crate) fn resolve(name: &str, stored: &[u8], values: &ValueFile) -> Result<Vec<u8>> {
    resolved(name, stored, values).map(|(value, _)| value)
}

/// [`resolve`]'s chunk value, with the pieces it was joined from.
fn resolved(name: &str, stored: &[u8], values: &ValueFile) -> Result<(Vec<u8>, Vec<Piece>)> {
    let (hash, pieces) = decode(name, stored)?;
    let mut value = stored[..8].to_vec();
    value[7] ^= MARK;
    for piece in &pieces {
        match piece {
            Piece::Kept { offset, len } => {
                value.extend(values.read_range(name, *offset, *len)?);
            }
            Piece::Written(bytes) => value.extend_from_slice(bytes),
        }
    }
    if *blake3::hash(&value[8..]).as_bytes() != hash {
        return Err(Error::corrupt(format!(
            "{name}, stored as pieces of the store's value file, does not hash to what the index holds for it"
        )));
    }
    Ok((value, pieces))
}

/// The stored form of `new` (a chunk value: next number and bytes) as the pieces of the chunk
/// stored before under its key (`old`, a reference or pieces) that it keeps, plus the bytes in
/// between; `None` when storing it whole is as cheap, or the old chunk names nothing kept (or
/// cannot be read: then the new one is stored whole, and the old one's damage is found where it
/// is read).
pub(crate) fn edited(
    name: &str,
    old: &[u8],
    new: &[u8],
    values: &ValueFile,
    kept_min: usize,
) -> Option<Vec<u8>> {
    let (old_pieces, old_bytes) = if super::shared_content::is_reference(old) {
        let at = ValueRef::decode(&old[8..]);
        let bytes = values.read(name, &at).ok()?;
        let pieces = vec![Piece::Kept {
            offset: at.offset,
            len: at.len,
        }];
        (pieces, bytes)
    } else if is_pieces(old) {
        let (mut bytes, pieces) = resolved(name, old, values).ok()?;
        (pieces, bytes.split_off(8))
    } else {
        return None;
    };
    // The new bytes found in the old (offsets there), then each kept range mapped onto the old
    // chunk's own pieces.
    let found = super::shared_content::align_one(&new[8..], &old_bytes)?;
    let mut pieces = Vec::new();
    let mut kept_to = 0;
    for piece in found {
        match piece {
            Piece::Kept { offset, len } => {
                kept_to = offset + u64::from(len);
                pieces.extend(take(&old_pieces, offset, kept_to));
            }
            Piece::Written(bytes) => {
                for piece in within(&bytes, &old_bytes, kept_to) {
                    match piece {
                        Piece::Kept { offset, len } => {
                            kept_to = offset + u64::from(len);
                            pieces.extend(take(&old_pieces, offset, kept_to));
                        }
                        written => pieces.push(written),
                    }
                }
            }
        }
    }
    stored_as(new, pieces, kept_min)
}

/// How far apart, in the bytes between the kept ends of an edited chunk, the old chunk's bytes
/// are looked for: several edits in one index batch leave old bytes between them.
const BLOCK: usize = 256;

/// The most lookups for old bytes within the changed bytes of one chunk (each costs the old
/// chunk's length at most), so a chunk rewritten with new text costs a bounded search.
const LOOKUPS: usize = 16;

/// The least old bytes found between edits worth a piece of their own.
const KEPT_RUN: usize = 64;

/// `bytes` (what an edit left between the kept ends of a chunk) as pieces: the runs of at least
/// [`KEPT_RUN`] bytes found in `old` (offsets there), looked for every [`BLOCK`] bytes by their
/// first bytes near where the last run found ended (`from`, in `old`), and the rest as written.
fn within(bytes: &[u8], old: &[u8], from: u64) -> Vec<Piece> {
    use super::shared_content::{ANCHOR, common_prefix, common_suffix, nearest};
    let mut out = Vec::new();
    let (mut i, mut written_from, mut lookups) = (0, 0, 0);
    let mut expected = usize::try_from(from).unwrap_or(old.len()).min(old.len());
    while i + ANCHOR <= bytes.len() && lookups < LOOKUPS {
        lookups += 1;
        let Some(j) = nearest(old, &bytes[i..i + ANCHOR], expected, 0) else {
            i += BLOCK;
            continue;
        };
        let ahead = common_prefix(&bytes[i..], &old[j..]);
        let back = common_suffix(&bytes[written_from..i], &old[..j]);
        let (start, at, len) = (i - back, j - back, ahead + back);
        if len < KEPT_RUN {
            i += BLOCK;
            continue;
        }
        if start > written_from {
            out.push(Piece::Written(bytes[written_from..start].to_vec()));
        }
        out.push(Piece::Kept {
            offset: at as u64,
            len: u32::try_from(len).unwrap_or(u32::MAX),
        });
        i = start + len;
        written_from = i;
        expected = at + len;
    }
    if written_from < bytes.len() {
        out.push(Piece::Written(bytes[written_from..].to_vec()));
    }
    out
}

/// The stored form of the chunk value `value` as `pieces` (which make up its bytes), when at
/// least `kept_min` of its bytes are kept in the value file, it has at most [`MAX_PIECES`] pieces
/// and the form is smaller than the value; else `None` (stored whole).
pub(super) fn stored_as(value: &[u8], pieces: Vec<Piece>, kept_min: usize) -> Option<Vec<u8>> {
    let mut pieces = merged(pieces);
    // Over the limit, the smallest kept pieces are stored as bytes instead (joining the bytes
    // either side), so a chunk edited many times keeps most of what it shares.
    while pieces.len() > MAX_PIECES {
        let mut at = 0u64;
        let mut smallest: Option<(usize, u64, u64)> = None;
        for (i, piece) in pieces.iter().enumerate() {
            if matches!(piece, Piece::Kept { .. })
                && smallest.is_none_or(|(_, _, len)| piece.len() < len)
            {
                smallest = Some((i, at, piece.len()));
            }
            at += piece.len();
        }
        let (i, start, len) = smallest?;
        let bytes = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start + len).ok())
            .and_then(|(from, to)| value.get(8 + from..8 + to))?;
        pieces[i] = Piece::Written(bytes.to_vec());
        pieces = merged(pieces);
    }
    let kept: u64 = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Kept { .. }))
        .map(Piece::len)
        .sum();
    if kept < kept_min as u64 || pieces.len() > MAX_PIECES {
        return None;
    }
    debug_assert_eq!(
        pieces.iter().map(Piece::len).sum::<u64>(),
        value.len() as u64 - 8
    );
    let stored = encode(value, &pieces);
    (stored.len() < value.len()).then_some(stored)
}

/// The pieces covering bytes `start..end` of the chunk `pieces` make up.
fn take(pieces: &[Piece], start: u64, end: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut at = 0;
    for piece in pieces {
        let (from, to) = (at, at + piece.len());
        at = to;
        let (lo, hi) = (start.max(from), end.min(to));
        if lo < hi {
            out.push(piece.part(lo - from, hi - from));
        }
    }
    out
}

/// `pieces` without empty ones, neighbours of the same kind joined where they are contiguous.
fn merged(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for piece in pieces.into_iter().filter(|p| p.len() > 0) {
        match (out.last_mut(), piece) {
            (Some(Piece::Written(last)), Piece::Written(bytes)) => last.extend(bytes),
            (
                Some(Piece::Kept { offset, len }),
                Piece::Kept {
                    offset: next,
                    len: more,
                },
            ) if *offset + u64::from(*len) == next
                && u32::try_from(u64::from(*len) + u64::from(more)).is_ok() =>
            {
                *len += more;
            }
            (_, piece) => out.push(piece),
        }
    }
    out
}

fn encode(value: &[u8], pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + pieces.len() * 13);
    out.extend_from_slice(&value[..8]);
    out[7] ^= MARK;
    out.extend_from_slice(blake3::hash(&value[8..]).as_bytes());
    out.push(u8::try_from(pieces.len()).unwrap_or(u8::MAX));
    for piece in pieces {
        match piece {
            Piece::Kept { offset, len } => {
                out.push(0);
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
            }
            Piece::Written(bytes) => {
                out.push(1);
                out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(0).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    out
}

/// The hash and pieces of a stored chunk of pieces, refused as the index differing from its
/// layout when malformed or standing for more than [`MAX_BYTES`].
fn decode(name: &str, stored: &[u8]) -> Result<([u8; 32], Vec<Piece>)> {
    let malformed = |why: &str| {
        Error::corrupt(format!(
            "{name} is stored as pieces of the store's value file, and {why}"
        ))
    };
    if !is_pieces(stored) {
        return Err(malformed("its header is cut short"));
    }
    let hash: [u8; 32] = stored[8..40].try_into().expect("32 bytes");
    let count = usize::from(stored[40]);
    if count > MAX_PIECES {
        return Err(malformed("it has more pieces than any chunk is stored as"));
    }
    let mut rest = &stored[HEADER..];
    let mut take_bytes = |n: usize| -> Result<&[u8]> {
        if rest.len() < n {
            return Err(malformed("a piece is cut short"));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let mut pieces = Vec::with_capacity(count);
    let mut total = 0u64;
    for _ in 0..count {
        let piece = match take_bytes(1)?[0] {
            0 => {
                let offset = u64::from_le_bytes(take_bytes(8)?.try_into().expect("8 bytes"));
                let len = u32::from_le_bytes(take_bytes(4)?.try_into().expect("4 bytes"));
                Piece::Kept { offset, len }
            }
            1 => {
                let len = u32::from_le_bytes(take_bytes(4)?.try_into().expect("4 bytes"));
                let len = usize::try_from(len).map_err(|_| malformed("a piece is too long"))?;
                Piece::Written(take_bytes(len)?.to_vec())
            }
            _ => return Err(malformed("a piece is of no known kind")),
        };
        total += piece.len();
        if total > MAX_BYTES {
            return Err(malformed("its pieces add up to more than any chunk holds"));
        }
        pieces.push(piece);
    }
    if !rest.is_empty() {
        return Err(malformed("bytes follow its last piece"));
    }
    Ok((hash, pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Seq;
    use proptest::prelude::*;

    const NAME: &str = "chunk 0 of file 1 in the index";

    fn chunk(next: u64, bytes: &[u8]) -> Vec<u8> {
        let mut v = next.to_le_bytes().to_vec();
        v.extend_from_slice(bytes);
        v
    }

    /// A value file holding `text` and the stored reference of a chunk whose bytes are all of it.
    fn referenced(dir: &std::path::Path, next: u64, text: &[u8]) -> (ValueFile, Vec<u8>) {
        let values = ValueFile::in_dir(dir);
        let at = values
            .append(vec![(Seq(1), text.to_vec())])
            .expect("append")[0];
        let mut stored = next.to_le_bytes().to_vec();
        stored[7] ^= 0x80;
        at.encode(&mut stored);
        assert!(super::super::shared_content::is_reference(&stored));
        (values, stored)
    }

    fn text(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| u8::try_from(i * 7 % 251).expect("under 251"))
            .collect()
    }

    #[test]
    fn an_edited_chunk_keeps_the_old_bytes_where_they_are_and_reads_back_whole() {
        let dir = tempfile::tempdir().expect("dir");
        let old = text(12_000);
        let (values, stored) = referenced(dir.path(), 4, &old);
        let mut new = old.clone();
        new.splice(6000..6010, b"an edit of more bytes".iter().copied());
        let value = chunk(4, &new);
        let pieces = edited(NAME, &stored, &value, &values, 1024).expect("stored as pieces");
        assert!(is_pieces(&pieces) && pieces.len() < 200, "{}", pieces.len());
        assert_eq!(resolve(NAME, &pieces, &values).expect("read"), value);
        // Edited again, at the front, in the middle and at the end, one edit at a time: still
        // pieces of the first bytes.
        let mut again = new.clone();
        let mut stored_again = pieces;
        for step in 0..3 {
            match step {
                0 => again[0] = b'!',
                1 => drop(again.splice(9000..9000, *b"inserted")),
                _ => again.truncate(again.len() - 5),
            }
            let value = chunk(u64::MAX, &again);
            stored_again = edited(NAME, &stored_again, &value, &values, 1024).expect("pieces");
            assert_eq!(resolve(NAME, &stored_again, &values).expect("read"), value);
        }
        assert!(stored_again.len() < 300, "{}", stored_again.len());
        assert_eq!(stored_again[7], 0xBF, "the last chunk's marker");
        // Edits at both ends, and several between, in one write (one index batch): the old
        // bytes between them are found and kept too.
        let mut both = old.clone();
        both[0] = b'<';
        *both.last_mut().expect("bytes") = b'>';
        for at in [3000, 6000, 9000] {
            both[at] ^= 0x20;
        }
        let value = chunk(4, &both);
        let pieces = edited(NAME, &stored, &value, &values, 1024).expect("pieces");
        assert!(pieces.len() < 500, "{}", pieces.len());
        assert_eq!(resolve(NAME, &pieces, &values).expect("read"), value);
        // A chunk rewritten with nothing in common is stored whole; so is one over a literal.
        assert!(edited(NAME, &stored, &chunk(4, &vec![b'z'; 12_000]), &values, 1024).is_none());
        assert!(edited(NAME, &chunk(4, &old), &chunk(4, &new), &values, 1024).is_none());
    }

    #[test]
    fn a_value_file_changed_under_a_chunk_of_pieces_is_named_never_read_as_it() {
        let dir = tempfile::tempdir().expect("dir");
        let old = text(8000);
        let (values, stored) = referenced(dir.path(), 2, &old);
        let mut new = old.clone();
        new[4000] ^= 1;
        let pieces = edited(NAME, &stored, &chunk(2, &new), &values, 1024).expect("pieces");
        let path = dir.path().join(crate::store::disk::VALUES_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[100] ^= 0xFF;
        std::fs::write(&path, &bytes).expect("write");
        let fresh = ValueFile::in_dir(dir.path());
        let err = resolve(NAME, &pieces, &fresh).expect_err("refused");
        assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
        assert!(err.to_string().contains("chunk 0 of file 1"), "{err}");
        std::fs::write(&path, &bytes[..1000]).expect("cut");
        let err = resolve(NAME, &pieces, &ValueFile::in_dir(dir.path())).expect_err("refused");
        assert!(err.to_string().contains("cut short"), "{err}");
    }

    #[test]
    fn malformed_pieces_are_refused_before_anything_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let header = |count: u8| {
            let mut v = vec![0, 0, 0, 0, 0, 0, 0, MARK];
            v.extend_from_slice(&[0; 32]);
            v.push(count);
            v
        };
        let mut huge = header(1);
        huge.push(0);
        huge.extend_from_slice(&0u64.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut long_written = header(1);
        long_written.push(1);
        long_written.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut trailing = header(0);
        trailing.push(9);
        let mut unknown = header(1);
        unknown.push(7);
        for (what, stored) in [
            (
                "too many pieces",
                header(u8::try_from(MAX_PIECES + 1).expect("few")),
            ),
            ("a kept piece past any chunk", huge),
            ("a written piece cut short", long_written),
            ("bytes after the last piece", trailing),
            ("a piece of no known kind", unknown),
            ("a piece missing", header(1)),
        ] {
            let err = resolve(NAME, &stored, &values).expect_err(what);
            assert!(matches!(err, Error::Corrupt { .. }), "{what}: {err:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any run of edits of a chunk that began as a reference reads back as the model says,
        /// whether each step was stored as pieces or whole.
        #[test]
        fn edits_read_back_as_the_model_says(
            edits in proptest::collection::vec(
                (0usize..6000, 0usize..40, proptest::collection::vec(any::<u8>(), 0..40)),
                1..12,
            ),
        ) {
            let dir = tempfile::tempdir().expect("dir");
            let mut model = text(6000);
            let (values, mut stored) = referenced(dir.path(), 9, &model);
            for (at, cut, with) in edits {
                let at = at.min(model.len());
                let end = (at + cut).min(model.len());
                model.splice(at..end, with);
                let value = chunk(9, &model);
                stored = edited(NAME, &stored, &value, &values, 1024).unwrap_or(value.clone());
                prop_assert_eq!(super::super::resolve_chunk(b"b", &stored, &values).expect("read"), value.clone());
                // The link alone, as a removal reads it: the value's own, whatever the form.
                prop_assert_eq!(
                    super::super::stored_next(&stored),
                    Some(u64::from_le_bytes(value[..8].try_into().expect("8 bytes")))
                );
            }
        }

        /// Bytes marked as pieces, whatever follows, are refused or read; never a panic.
        #[test]
        fn any_bytes_marked_as_pieces_are_read_or_refused(
            tail in proptest::collection::vec(any::<u8>(), 0..200),
            last in prop_oneof![Just(0x40u8), Just(0xBFu8)],
        ) {
            let dir = tempfile::tempdir().expect("dir");
            let (values, _) = referenced(dir.path(), 1, &text(4000));
            let mut stored = vec![1, 0, 0, 0, 0, 0, 0, last];
            stored.extend(tail);
            let _ = resolve(NAME, &stored, &values);
        }
    }
}
