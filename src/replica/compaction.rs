//! Compaction: a replica's small segments merged into larger ones by the shipper, so that a
//! replica shipped every second holds a few dozen objects a day rather than one per shipment.
//!
//! The merge is tiered, like a counter in base [`FANOUT`]: a shipment's segment is of level 0;
//! once the last [`FANOUT`] segments of the replica are all of one level N (and all at or before
//! the head checkpoint), they are merged into one segment of level N+1
//! (`{first}-{last}.m{N+1}.seg`), and so on up. The levels then fall from the oldest segment to
//! the newest, with fewer than [`FANOUT`] of each, so `k` shipments leave fewer than
//! `FANOUT × (log_FANOUT(k) + 1)` segments. A merge whose records pass
//! [`MERGED_BYTES`](segment::MERGED_BYTES) is written as `….full.seg` pieces, each made of whole
//! segments, which are never merged again.
//!
//! A merged segment is made from the store's own records (erased where a redaction erased
//! them), each checked against the chain rules from the event before it, never from the
//! replica's objects; it holds the same events, so a reader checks its records exactly as it
//! checks a shipment's. The order keeps the replica whole at every moment: the merged segment
//! is written (durably, with a create that fails if the name is taken), then the segments it
//! covers are removed. A reader prefers the widest segment starting at a seq and sets aside
//! those it covers ([`Listing`](super::Listing)), so a merge cut between the two steps (a kill)
//! leaves a replica that restores and verifies (a restore checks that each segment set aside
//! holds exactly the records of its range); the next compaction removes what it covers first,
//! whatever it holds, so no covered copy of content a redaction erased outlives a shipment.
//! Only segments up to the head checkpoint are merged: the checkpoint (signed, with a key)
//! already names an event at or past every merged one.

use object_store::PutMode;

use super::segment::{self, Level};
use super::{Replica, checkpoint};
use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{Frame, Seq};
use crate::store::log::Store;

/// How many segments of one level are merged into one of the next.
pub const FANOUT: usize = 16;

/// The most merges one compaction makes, so a shipment stays short when a replica a build
/// without compaction left holds a long backlog of small segments (the next shipments go on).
pub const MERGES_PER_PASS: usize = 64;

/// What one compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// The merged segments written.
    pub merged: usize,
    /// The segments removed: those a merged segment covers.
    pub removed: usize,
}

/// Merges the replica's segments up to its head checkpoint, as the tiers above say, from the
/// records of `store` (whose history the replica holds: the shipment that calls this proved it).
/// Segments that a merged one covers are removed first (what a cut compaction left).
pub fn compact(store: &Store, replica: &Replica) -> Result<Compacted> {
    let mut done = Compacted::default();
    let Some(head) = replica.get("head")? else {
        return Ok(done);
    };
    let (_, head) = checkpoint::decode("head", &head)?;
    let listing = replica.listing()?;
    for name in &listing.covered {
        replica.remove(name)?;
        done.removed += 1;
    }
    let mut segments: Vec<(Seq, Seq, Level)> = listing
        .segments
        .iter()
        .filter(|(_, last, _)| *last <= head.seq)
        .map(|(first, last, name)| {
            let level = name
                .strip_prefix("segments/")
                .and_then(segment::parse)
                .map_or(Level::Full, |(_, _, level)| level);
            (*first, *last, level)
        })
        .collect();
    let mut from = 0;
    while let Some((at, level)) = due(&segments, replica.fanout, from) {
        if done.merged >= MERGES_PER_PASS {
            break;
        }
        let inputs: Vec<_> = segments.drain(at..at + replica.fanout).collect();
        let written = merge(store, replica, &inputs, level)?;
        done.merged += written.len();
        done.removed += inputs.len();
        segments.splice(at..at, written);
        // What was just written may complete a run with the segments before it.
        from = at.saturating_sub(replica.fanout);
    }
    Ok(done)
}

/// The first run of `fanout` segments of one level that merges, at or after index `from`: its
/// index and level. Where the replica grows by shipments alone, that is its last `fanout`
/// segments; a replica a build without compaction left (level-0 segments only) is merged from
/// its oldest segments on.
fn due(segments: &[(Seq, Seq, Level)], fanout: usize, from: usize) -> Option<(usize, u8)> {
    let mut run = (from, None::<u8>, 0);
    for (i, (_, _, level)) in segments.iter().enumerate().skip(from) {
        let n = match level {
            Level::Merged(n) => Some(*n),
            Level::Full => None,
        };
        run = match (n, run.1 == n) {
            (Some(_), true) => (run.0, n, run.2 + 1),
            _ => (i, n, 1),
        };
        if let (Some(n), true) = (run.1, run.2 >= fanout) {
            return Some((run.0, n));
        }
    }
    None
}

/// Writes the segments of `level` + 1 that cover `inputs` (back to back, one level), from the
/// store's records, and removes each input once the segment covering it is written; returns
/// what now stands in their place.
fn merge(
    store: &Store,
    replica: &Replica,
    inputs: &[(Seq, Seq, Level)],
    level: u8,
) -> Result<Vec<(Seq, Seq, Level)>> {
    let (first, last) = (inputs[0].0, inputs[inputs.len() - 1].1);
    let mut chain = match first {
        Seq(1) => Chain::new(),
        _ => {
            let before = Seq(first.0 - 1);
            let record = store
                .records(before)
                .next()
                .transpose()?
                .filter(|(seq, _)| *seq == before)
                .ok_or_else(|| lost(before))?
                .1;
            Chain::after(before, Frame::decode(&record)?.hash)
        }
    };
    // Each input's records, read and checked in turn; a piece is cut at an input's end once
    // it passes the bound, so every piece covers whole inputs.
    let mut pieces: Vec<(Seq, Seq, Vec<Vec<u8>>)> = Vec::new();
    let mut records = store.records(first);
    let mut bytes = 0;
    for (from, to, _) in inputs {
        if pieces.last().is_none_or(|_| bytes >= segment::MERGED_BYTES) {
            pieces.push((*from, *to, Vec::new()));
            bytes = 0;
        }
        let piece = pieces.last_mut().ok_or_else(|| lost(*from))?;
        piece.1 = *to;
        for expected in from.0..=to.0 {
            let (seq, record) = records
                .next()
                .transpose()?
                .ok_or_else(|| lost(Seq(expected)))?;
            chain.check(seq, &record).map_err(|b| {
                Error::corrupt(format!(
                    "event {}: {} (the store does not verify; run mnemo verify)",
                    b.seq, b.detail
                ))
            })?;
            bytes += record.len();
            piece.2.push(record);
        }
    }
    let whole = pieces.len() == 1 && bytes < segment::MERGED_BYTES;
    let level = match whole {
        true if level < segment::MAX_LEVEL => Level::Merged(level + 1),
        _ => Level::Full,
    };
    let mut out = Vec::new();
    for (from, to, records) in pieces {
        let name = format!("segments/{}", segment::named(from, to, level));
        replica.put(&name, segment::encode(from, &records), PutMode::Create)?;
        for (a, b, l) in inputs.iter().filter(|(a, b, _)| *a >= from && *b <= to) {
            replica.remove(&format!("segments/{}", segment::named(*a, *b, *l)))?;
        }
        out.push((from, to, level));
    }
    debug_assert_eq!(out.last().map(|(_, to, _)| *to), Some(last));
    Ok(out)
}

fn lost(seq: Seq) -> Error {
    Error::corrupt(format!(
        "the store lacks event {seq}, which its replica holds (the store does not verify; run mnemo verify)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiers alone, over a day of shipments one second apart: each shipment adds a segment
    /// of level 0 and every merge that is due is made, as [`compact`] makes them.
    #[test]
    fn a_day_of_shipments_a_second_apart_leaves_a_few_dozen_segments() {
        let mut segments: Vec<(Seq, Seq, Level)> = Vec::new();
        let mut most = 0;
        for k in 1..=86_400u64 {
            segments.push((Seq(k), Seq(k), Level::Merged(0)));
            while let Some((at, level)) = due(&segments, FANOUT, 0) {
                let inputs: Vec<_> = segments.drain(at..at + FANOUT).collect();
                let merged = (inputs[0].0, inputs[FANOUT - 1].1, Level::Merged(level + 1));
                segments.insert(at, merged);
            }
            most = most.max(segments.len());
            // Fewer than FANOUT of each level, levels falling from the oldest to the newest.
            assert!(segments.windows(2).all(|w| w[0].2 >= w[1].2), "at {k}");
            assert!(
                segments.windows(2).all(|w| w[0].1.0 + 1 == w[1].0.0),
                "at {k}"
            );
        }
        // 86,400 in base 16 is 1 5 1 8 0: that many of each level are left.
        assert_eq!(segments.len(), 1 + 5 + 1 + 8);
        // At most: after 65,535 shipments (FFFF in base 16), 15 segments of each of 4 levels.
        assert_eq!(most, 4 * (FANOUT - 1), "{most}");
    }
}
