//! A segment: a run of the log's records, sealed into one immutable object.
//!
//! | bytes | what |
//! |---|---|
//! | 8 | `MNEMOSG1`, the segment format |
//! | 8 | the first seq (u64 LE) |
//! | 4 | how many records (u32 LE) |
//! | per record | its length (u32 LE), then the record's bytes exactly as the store keeps them |
//! | 32 | blake3 of every byte before it |
//!
//! The records are the store's own (`events` values, format byte first), so a segment carries
//! every event's chain hash, and a restore re-checks the chain rules over them; the closing
//! digest names a damaged or cut object before any record is read. Its object name says which
//! seqs it holds, so a listing sorts by seq, and what made it ([`Level`]):
//! `segments/{first:020}-{last:020}.seg` for a shipment's segment, `….m{N}.seg` for one that
//! compaction merged from segments of level N-1, `….full.seg` for a merged one that reached
//! [`MERGED_BYTES`] and is never merged again. Every form holds the same bytes.

use crate::error::{Error, Result};
use crate::model::event::{Frame, Seq};

const MAGIC: &[u8; 8] = b"MNEMOSG1";

/// The most records one segment holds.
pub const SEGMENT_EVENTS: usize = 4096;

/// A segment is sealed once its records pass this many bytes.
pub const SEGMENT_BYTES: usize = 8 * 1024 * 1024;

/// The bytes of a segment holding `records`, the first of which is event `first`.
pub fn encode(first: Seq, records: &[Vec<u8>]) -> Vec<u8> {
    let size: usize = records.iter().map(|r| 4 + r.len()).sum();
    let mut out = Vec::with_capacity(8 + 8 + 4 + size + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&first.0.to_le_bytes());
    let count = u32::try_from(records.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for record in records {
        let len = u32::try_from(record.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(record);
    }
    let digest = blake3::hash(&out);
    out.extend_from_slice(digest.as_bytes());
    out
}

/// The records of the segment `bytes` named `name`, each with its seq; a segment that is cut,
/// damaged or not the range its name says is [`Error::ReplicaDamaged`], naming the object.
pub fn decode(name: &str, bytes: &[u8], range: (Seq, Seq)) -> Result<Vec<(Seq, Vec<u8>)>> {
    let bad = |why: &str| Error::damaged(format!("replica segment {name}: {why}"));
    let Some((body, digest)) = bytes.split_last_chunk::<32>() else {
        return Err(bad("it is shorter than a segment can be"));
    };
    if blake3::hash(body).as_bytes() != digest {
        return Err(bad(
            "its bytes do not hash to the digest it ends with (damaged or cut)",
        ));
    }
    let rest = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| bad("it does not start with MNEMOSG1"))?;
    let (first, rest) = take_u64(rest).ok_or_else(|| bad("it has no first seq"))?;
    let (count, mut rest) = take_u32(rest).ok_or_else(|| bad("it has no record count"))?;
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(SEGMENT_EVENTS));
    for i in 0..u64::from(count) {
        let (len, after) = take_u32(rest).ok_or_else(|| bad("a record's length is cut"))?;
        let len = usize::try_from(len).map_err(|_| bad("a record is too long"))?;
        if after.len() < len {
            return Err(bad("a record is cut"));
        }
        // What is decoded costs what it holds: a record too short to be an event's would cost
        // its vector's own bytes many times over (a segment of empty records, 4 bytes each).
        if len < Frame::MIN_LEN {
            return Err(bad(&format!(
                "record {} is {len} bytes, shorter than any event's ({})",
                i + 1,
                Frame::MIN_LEN
            )));
        }
        let seq = first
            .checked_add(i)
            .ok_or_else(|| bad("its seqs run past the largest one"))?;
        out.push((Seq(seq), after[..len].to_vec()));
        rest = &after[len..];
    }
    if !rest.is_empty() {
        return Err(bad("bytes follow its last record"));
    }
    let last = first + u64::from(count).saturating_sub(1);
    if count == 0 || (Seq(first), Seq(last)) != range {
        return Err(bad(&format!(
            "it holds events {first} to {last}, its name says {} to {}",
            range.0, range.1
        )));
    }
    Ok(out)
}

/// The seqs the segment `bytes` says it holds, read off its header (first seq and count) before
/// anything is checked: what [`decode`] is then given as the range to check. `None` if the header
/// is cut or it holds no record.
pub fn range_of(bytes: &[u8]) -> Option<(Seq, Seq)> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (first, rest) = take_u64(rest)?;
    let (count, _) = take_u32(rest)?;
    let last = first.checked_add(u64::from(count.checked_sub(1)?))?;
    Some((Seq(first), Seq(last)))
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), rest))
}

/// A merged segment is sealed once its records pass this many bytes: it is then
/// [`Level::Full`], and never merged again.
pub const MERGED_BYTES: usize = 64 * 1024 * 1024;

/// The highest level a merge makes before [`Level::Full`] (levels past it would hold more than
/// [`MERGED_BYTES`] anyway).
pub const MAX_LEVEL: u8 = 15;

/// What made a segment, as its object name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Merged from segments of the level below (0: a shipment's own segment), `N` from 0 to
    /// [`MAX_LEVEL`].
    Merged(u8),
    /// Merged, and past [`MERGED_BYTES`]: never merged again.
    Full,
}

/// The object name of the segment of events `first` to `last`, under `segments/`, as a
/// shipment writes it (level 0).
pub fn name(first: Seq, last: Seq) -> String {
    named(first, last, Level::Merged(0))
}

/// The object name of the segment of events `first` to `last` of `level`, under `segments/`.
pub fn named(first: Seq, last: Seq, level: Level) -> String {
    let range = format!("{:020}-{:020}", first.0, last.0);
    match level {
        Level::Merged(0) => format!("{range}.seg"),
        Level::Merged(n) => format!("{range}.m{n}.seg"),
        Level::Full => format!("{range}.full.seg"),
    }
}

/// The seqs a segment's object name says it holds; `None` for a name this module does not make.
pub fn parse_name(name: &str) -> Option<(Seq, Seq)> {
    parse(name).map(|(first, last, _)| (first, last))
}

/// The seqs and the level a segment's object name says; `None` for a name this module does not
/// make.
pub fn parse(name: &str) -> Option<(Seq, Seq, Level)> {
    let stem = name.strip_suffix(".seg")?;
    let (stem, level) = match stem.split_once('.') {
        None => (stem, Level::Merged(0)),
        Some((stem, "full")) => (stem, Level::Full),
        Some((stem, level)) => {
            let n = level.strip_prefix('m')?;
            // One spelling per level: no leading zero, no sign.
            let level = n
                .parse::<u8>()
                .ok()
                .filter(|l| (1..=MAX_LEVEL).contains(l) && n == l.to_string())?;
            (stem, Level::Merged(level))
        }
    };
    let (first, last) = stem.split_once('-')?;
    let (first, last) = (fixed_number(first)?, fixed_number(last)?);
    (first >= 1 && first <= last).then_some((Seq(first), Seq(last), level))
}

/// The number `s` spells in the width every numbered object name is written in (20 decimal
/// digits, zero-padded: segments, and a fleet's log objects and lease epochs), if it is one.
pub(crate) fn fixed_number(s: &str) -> Option<u64> {
    (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse::<u64>().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_decodes_to_its_records_and_any_damage_is_named() {
        let records = vec![
            vec![1; Frame::MIN_LEN],
            vec![2; Frame::MIN_LEN + 1],
            vec![3; 300],
        ];
        let bytes = encode(Seq(7), &records);
        let range = (Seq(7), Seq(9));
        let name = name(Seq(7), Seq(9));
        assert_eq!(parse_name(&name), Some(range));
        let back = decode(&name, &bytes, range).expect("decodes");
        assert_eq!(
            back,
            vec![
                (Seq(7), records[0].clone()),
                (Seq(8), records[1].clone()),
                (Seq(9), records[2].clone())
            ]
        );
        // A record shorter than any event's is refused, not held at many times its size.
        let short = encode(Seq(7), &[vec![1; Frame::MIN_LEN], Vec::new()]);
        let refused = decode(&name, &short, (Seq(7), Seq(8)))
            .expect_err("an empty record")
            .to_string();
        assert!(refused.contains("shorter than any event's"), "{refused}");
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1;
            assert!(decode(&name, &flipped, range).is_err(), "byte {i}");
            assert!(decode(&name, &bytes[..i], range).is_err(), "cut at {i}");
        }
        assert!(decode(&name, &bytes, (Seq(7), Seq(10))).is_err());
        assert!(decode(&name, &encode(Seq(7), &[]), (Seq(7), Seq(7))).is_err());
        for level in [Level::Merged(0), Level::Merged(3), Level::Full] {
            let name = named(Seq(7), Seq(9), level);
            assert_eq!(parse(&name), Some((Seq(7), Seq(9), level)), "{name}");
        }
        for odd in [
            "1-2.seg",
            "00000000000000000002-00000000000000000001.seg",
            "x.seg",
            "00000000000000000001-00000000000000000002.m0.seg",
            "00000000000000000001-00000000000000000002.m01.seg",
            "00000000000000000001-00000000000000000002.m16.seg",
            "00000000000000000001-00000000000000000002.m+1.seg",
            "00000000000000000001-00000000000000000002.full.m1.seg",
            "00000000000000000001-00000000000000000002.seg.seg",
        ] {
            assert_eq!(parse_name(odd), None, "{odd}");
        }
    }
}
