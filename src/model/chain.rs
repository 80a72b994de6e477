//! The chain rules, written once. Every reader that trusts the order of the log checks it here:
//! the verifier (on its chain thread) and the store's search for the log's end past its head
//! (`Store::log_end`).
//!
//! A stored record continues the chain when, in this order (the first rule broken is the one
//! named):
//!
//! 1. its key is the next seq: keys are dense from 1 ([`Rule::Dense`]);
//! 2. it decodes as a frame ([`Rule::Decodes`]);
//! 3. the seq inside it is its key ([`Rule::SeqInside`]);
//! 4. its `prev_hash` is the previous event's hash, zero for seq 1 ([`Rule::Link`]);
//! 5. its payload hashes to the payload hash it stores ([`Rule::PayloadHash`]);
//! 6. its fields hash to the chain hash it stores ([`Rule::ChainHash`]).

use crate::model::event::{EventHash, Frame, FrameRef, Seq};

/// A chain rule, in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Keys are dense from 1: the next record is stored under the next seq.
    Dense,
    /// The record decodes as a frame.
    Decodes,
    /// The seq inside the record is its key.
    SeqInside,
    /// `prev_hash` is the previous event's hash.
    Link,
    /// The payload hashes to the stored payload hash.
    PayloadHash,
    /// The chain hash recomputes to the stored hash.
    ChainHash,
}

/// The first rule a record broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Break {
    /// Where it shows: the record's seq, or for a gap the seq that is missing.
    pub seq: Seq,
    /// The rule.
    pub rule: Rule,
    /// Expected and found values, in words.
    pub detail: String,
}

/// Checks stored records, taken in key order, against the chain rules.
#[derive(Clone, Debug)]
pub struct Chain {
    next: Seq,
    prev: EventHash,
}

impl Default for Chain {
    fn default() -> Self {
        Chain::after(Seq(0), EventHash::ZERO)
    }
}

impl Chain {
    /// A chain from its first event.
    pub fn new() -> Chain {
        Chain::default()
    }

    /// A chain that goes on after event `seq`, whose hash is `hash` (seq 0 and the zero hash
    /// for an empty log).
    pub fn after(seq: Seq, hash: EventHash) -> Chain {
        Chain {
            // A damaged head may name the last seq there is: nothing can follow it.
            next: Seq(seq.0.saturating_add(1)),
            prev: hash,
        }
    }

    /// The seq the next record must be stored under.
    pub fn next(&self) -> Seq {
        self.next
    }

    /// Checks the record stored under key `seq` and decodes it; the chain then goes on after
    /// it. A record that breaks a rule leaves the chain where it was.
    pub fn check(&mut self, seq: Seq, record: &[u8]) -> Result<Frame, Break> {
        self.check_borrowed(seq, record)
            .map(|frame| frame.to_frame())
    }

    /// [`Chain::check`], the frame's header and payload borrowed from `record`.
    pub fn check_borrowed<'a>(
        &mut self,
        seq: Seq,
        record: &'a [u8],
    ) -> Result<FrameRef<'a>, Break> {
        self.check_parsed(seq, || FrameRef::parse(record), true)
    }

    /// [`Chain::check_borrowed`] of a record whose payload's bytes could not be read (`rest` ends
    /// at its `payload_len`, see [`FrameRef::parse_without_payload`]): every rule but the
    /// payload hash, which needs them. The chain goes on after it, so the records after it
    /// are checked as before; a reader of its payload still meets what made it unreadable.
    pub fn check_without_payload<'a>(
        &mut self,
        seq: Seq,
        rest: &'a [u8],
    ) -> Result<FrameRef<'a>, Break> {
        self.check_parsed(seq, || FrameRef::parse_without_payload(rest), false)
    }

    fn check_parsed<'a>(
        &mut self,
        seq: Seq,
        parse: impl FnOnce() -> crate::error::Result<FrameRef<'a>>,
        with_payload: bool,
    ) -> Result<FrameRef<'a>, Break> {
        let broke = |seq, rule, detail| Err(Break { seq, rule, detail });
        let expected = self.next;
        if seq != expected {
            return if seq < expected {
                let detail =
                    format!("a record is stored under key {seq}, which is not a valid seq");
                broke(seq, Rule::Dense, detail)
            } else {
                let detail =
                    format!("expected seq {expected} next but the log goes on at seq {seq}");
                broke(expected, Rule::Dense, detail)
            };
        }
        let frame = match parse() {
            Ok(f) => f,
            Err(e) => return broke(seq, Rule::Decodes, e.to_string()),
        };
        if frame.seq != seq {
            let detail = format!("the record under key {seq} says it is seq {}", frame.seq);
            return broke(seq, Rule::SeqInside, detail);
        }
        if frame.prev_hash != self.prev {
            let detail = format!(
                "expected prev_hash {}, found {}",
                self.prev, frame.prev_hash
            );
            return broke(seq, Rule::Link, detail);
        }
        if with_payload {
            let payload_hash = frame.recompute_payload_hash();
            if payload_hash != frame.payload_hash {
                let detail = format!(
                    "the payload hashes to {payload_hash} but the record says {}",
                    frame.payload_hash
                );
                return broke(seq, Rule::PayloadHash, detail);
            }
        }
        let hash = frame.recompute_hash();
        if hash != frame.hash {
            let detail = format!(
                "the event hashes to {hash} but the record says {}",
                frame.hash
            );
            return broke(seq, Rule::ChainHash, detail);
        }
        self.next = Seq(seq.0.saturating_add(1));
        self.prev = frame.hash;
        Ok(frame)
    }

    /// The break for a stored key that is not a seq at all (`what` says why): the record the
    /// chain expects next is missing.
    pub fn unreadable_key(&self, what: String) -> Break {
        Break {
            seq: self.next,
            rule: Rule::Dense,
            detail: what,
        }
    }
}

/// Chains of events for tests: the rules never decode a header or a payload, so any bytes
/// stand for them.
#[cfg(any(test, feature = "testing"))]
pub mod sample {
    use super::*;
    use crate::model::event::{SALTED_FORMAT, Salt, chain_hash, payload_hash_of};

    /// Event `seq` after the event whose hash is `prev`, its header and payload naming `tag`.
    pub fn frame(seq: Seq, prev: EventHash, tag: &str) -> Frame {
        let header = format!("header {seq} {tag}").into_bytes();
        let payload = format!("payload {seq} {tag}").into_bytes();
        #[expect(clippy::cast_possible_truncation, reason = "any salt will do")]
        let salt = Salt([seq.0 as u8; 32]);
        let payload_hash = payload_hash_of(&payload, Some(&salt));
        Frame {
            version: SALTED_FORMAT,
            seq,
            prev_hash: prev,
            hash: chain_hash(seq, &prev, &header, &payload_hash),
            payload_hash,
            header,
            salt: Some(salt),
            payload,
            erased_from: None,
        }
    }

    /// The frames of a chain of `n` events.
    pub fn frames(n: u64) -> Vec<Frame> {
        let mut prev = EventHash::ZERO;
        (1..=n)
            .map(|seq| {
                let frame = frame(Seq(seq), prev, "");
                prev = frame.hash;
                frame
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::chain_hash;

    use super::sample::frames;

    /// Runs stored `(key, record)` pairs through a new chain: the seqs that passed, and the
    /// first break.
    fn run(records: &[(u64, Vec<u8>)]) -> (Vec<u64>, Option<(Seq, Rule)>) {
        let mut chain = Chain::new();
        let mut passed = Vec::new();
        for (key, record) in records {
            match chain.check(Seq(*key), record) {
                Ok(frame) => passed.push(frame.seq.0),
                Err(b) => return (passed, Some((b.seq, b.rule))),
            }
        }
        (passed, None)
    }

    fn stored(frames: &[Frame]) -> Vec<(u64, Vec<u8>)> {
        frames.iter().map(|f| (f.seq.0, f.encode())).collect()
    }

    /// `frame` with its chain hash recomputed, so that only what the caller changed is wrong.
    fn rehashed(mut frame: Frame) -> Frame {
        frame.hash = chain_hash(
            frame.seq,
            &frame.prev_hash,
            &frame.header,
            &frame.payload_hash,
        );
        frame
    }

    /// `frame`'s stored record without its payload's bytes, as sled keeps it beside a value file.
    fn without_payload(frame: &Frame) -> Vec<u8> {
        let mut record = frame.encode();
        record.truncate(record.len() - frame.payload.len());
        record
    }

    #[test]
    fn a_record_without_its_payload_joins_the_chain_by_every_rule_but_the_payload_hash() {
        let frames = frames(3);
        let mut chain = Chain::new();
        chain.check(Seq(1), &frames[0].encode()).expect("event 1");
        let rest = without_payload(&frames[1]);
        assert!(
            chain.clone().check(Seq(2), &rest).is_err(),
            "a record cut at its payload is not whole"
        );
        let checked = chain.check_without_payload(Seq(2), &rest).expect("event 2");
        assert_eq!((checked.hash, checked.payload), (frames[1].hash, &[][..]));
        assert!(
            chain.check(Seq(3), &frames[2].encode()).is_ok(),
            "the chain goes on after it"
        );

        // Its header, seq and link are checked as any record's.
        let mut header = frames[1].clone();
        header.header[0] ^= 1;
        let mut link = frames[1].clone();
        link.prev_hash = frames[1].hash;
        let mut seq = rehashed(frames[1].clone());
        seq.seq = Seq(3);
        for (what, frame, rule) in [
            ("a changed header", header, Rule::ChainHash),
            ("a changed link", rehashed(link), Rule::Link),
            ("another seq inside", rehashed(seq), Rule::SeqInside),
        ] {
            let mut chain = Chain::after(Seq(1), frames[0].hash);
            let rest = without_payload(&frame);
            let broke = chain.check_without_payload(Seq(2), &rest);
            assert_eq!(
                broke.map(|f| f.seq).map_err(|b| b.rule),
                Err(rule),
                "{what}"
            );
            assert_eq!(chain.next(), Seq(2), "{what}: the chain stays where it was");
        }
    }

    #[test]
    fn an_intact_chain_passes_and_goes_on_after_its_last_event() {
        let frames = frames(4);
        assert_eq!(run(&stored(&frames)), (vec![1, 2, 3, 4], None));
        // A chain started after event 2 takes event 3 next, and no other.
        let mut chain = Chain::after(Seq(2), frames[1].hash);
        assert_eq!(chain.next(), Seq(3));
        assert!(chain.check(Seq(3), &frames[2].encode()).is_ok());
        assert_eq!(chain.next(), Seq(4));
        let wrong_prev = Chain::after(Seq(2), frames[0].hash).check(Seq(3), &frames[2].encode());
        assert_eq!(wrong_prev.map_err(|b| b.rule), Err(Rule::Link));
    }

    #[test]
    fn a_gap_breaks_density_at_the_missing_seq() {
        let mut records = stored(&frames(4));
        records.remove(2);
        let (passed, broke) = run(&records);
        assert_eq!((passed, broke), (vec![1, 2], Some((Seq(3), Rule::Dense))));
    }

    #[test]
    fn a_key_below_the_next_seq_breaks_density_at_that_key() {
        let mut records = stored(&frames(3));
        records.insert(2, (1, records[0].1.clone()));
        assert_eq!(run(&records), (vec![1, 2], Some((Seq(1), Rule::Dense))));
    }

    #[test]
    fn an_unreadable_key_names_the_seq_expected_next() {
        let mut chain = Chain::new();
        let frames = frames(2);
        chain.check(Seq(1), &frames[0].encode()).expect("event 1");
        let b = chain.unreadable_key("events key [1] is not 8 bytes".into());
        assert_eq!((b.seq, b.rule), (Seq(2), Rule::Dense));
        assert_eq!(b.detail, "events key [1] is not 8 bytes");
    }

    #[test]
    fn a_record_that_does_not_decode_breaks_decoding_at_its_seq() {
        let mut records = stored(&frames(3));
        records[1].1.truncate(20);
        assert_eq!(run(&records), (vec![1], Some((Seq(2), Rule::Decodes))));
    }

    #[test]
    fn a_record_naming_another_seq_breaks_seq_inside_alone() {
        let mut frames = frames(3);
        // Otherwise consistent: hashed as the seq it names, linked to event 1.
        frames[1].seq = Seq(7);
        frames[1] = rehashed(frames[1].clone());
        let records: Vec<(u64, Vec<u8>)> = frames
            .iter()
            .zip(1..)
            .map(|(f, k)| (k, f.encode()))
            .collect();
        assert_eq!(run(&records), (vec![1], Some((Seq(2), Rule::SeqInside))));
    }

    #[test]
    fn a_wrong_prev_hash_breaks_the_link_alone() {
        let mut frames = frames(3);
        frames[2].prev_hash = EventHash([9; 32]);
        frames[2] = rehashed(frames[2].clone());
        assert_eq!(
            run(&stored(&frames)),
            (vec![1, 2], Some((Seq(3), Rule::Link)))
        );
    }

    #[test]
    fn a_changed_payload_breaks_the_payload_hash_alone() {
        let mut frames = frames(3);
        // The stored payload hash and chain hash are left as they were, and still agree.
        frames[0].payload[0] ^= 1;
        assert_eq!(
            run(&stored(&frames)),
            (vec![], Some((Seq(1), Rule::PayloadHash)))
        );
    }

    #[test]
    fn a_wrong_chain_hash_breaks_the_chain_hash_alone() {
        let mut frames = frames(3);
        frames[1].hash.0[31] ^= 1;
        assert_eq!(
            run(&stored(&frames)),
            (vec![1], Some((Seq(2), Rule::ChainHash)))
        );
        // The next event links to the hash event 2 stores, so event 2 is the only break.
        let mut chain = Chain::after(Seq(1), frames[0].hash);
        assert!(chain.check(Seq(2), &frames[1].encode()).is_err());
        assert_eq!(
            chain.next(),
            Seq(2),
            "a break leaves the chain where it was"
        );
    }
}
