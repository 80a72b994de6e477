//! Events, their canonical bytes and the hash chain.
//!
//! Every call handed to Mnemo becomes one [`Event`]: the seq it got, the hash of the event before it,
//! a header (time, agent, tool_use id, outcome, and the version of the semantics that answered it)
//! and a payload (the typed command with the root and profile it ran under, or the raw input when
//! it could not be parsed).
//!
//! The payload's hash is chained, not the payload, so a later redaction can erase a payload (and
//! its salt) without breaking the chain. From format 4 every event has a [`Salt`], 32 random
//! bytes stored beside the payload and never hashed into the chain: the payload hash and the
//! header's result hash are commitments keyed by it, so a hash confirms no guess of short
//! content to whoever lacks the salt.
//!
//! Every stored record starts with its format version byte. An event's format follows from the
//! semantics that answered it and its salt, so every event has exactly one encoding and a decoded
//! event encodes back to the bytes it came from; a record of a newer format is refused with
//! [`Error::NewerFormat`], and the store's `meta` tree records the newest format its log holds, so
//! an older build refuses the whole store before it reads or writes anything. An erased record is
//! what a redaction leaves of an event: its chain fields and header as they were, the format it was
//! written in, and (format 11) what it did to the tree ([`Kept`]), which the redaction commits to
//! by its digest ([`kept_digest`]).
//!
//! The bytes (the record, the chain-hash input, the header, every enum's variants and fields) are
//! written down once, in `docs/formats.md` ("The event record", and "Format and semantics
//! versions" for what each format adds). The core's [`Body`] derives nothing for them: the format
//! stores it through its own types and an explicit conversion (`src/model/event/wire.rs`), so
//! renaming or reordering a field or variant of the parser's types cannot change these bytes. The
//! golden vectors in the tests freeze them: a change to any of them is a new format version.

mod format;
mod frame;
mod wire;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::codec;
pub use crate::model::hash::EventHash;
pub use crate::model::seq::Seq;
use crate::model::tool::Semantics;
pub use crate::model::tool::{
    Body, Erased, InputDigest, Kept, KeptChange, Refusal, RejectedCall, RejectedDigest, ToolCall,
};
use wire::WireBody;

#[cfg(any(test, feature = "testing"))]
pub use format::SALTED_FORMAT;
pub(crate) use format::kept_of;
pub use format::{
    API_FORMAT, ERASED_FORMAT, ERASED_KEEPING_FORMAT, FORMAT_VERSION, PAYLOAD_TAG,
    REDACT_KEEPING_FORMAT, RESULT_TAG, REVERT_FORMAT, TS_PROFILE_FORMAT, VALUE_REF_FORMAT,
    WRITTEN_FORMAT, format_of, kept_digest, salted_format_of,
};
use format::{
    answers_as_typescript, is_salted, keeps_effects, records_a_revert, semantics_of_format,
};
pub use frame::{Frame, FrameRef};

/// An event's salt: 32 random bytes that key the commitments to its payload and result text (see
/// the module docs). Not secret from whoever holds the store, but erased with the payload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Salt(pub [u8; 32]);

impl Salt {
    /// A fresh salt from the operating system's random source.
    pub fn random() -> Result<Salt> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| {
            Error::io(
                "the OS random source, for an event's salt",
                std::io::Error::other(e.to_string()),
            )
        })?;
        Ok(Salt(bytes))
    }

    /// Lower-case hex, 64 characters.
    pub fn to_hex(&self) -> String {
        EventHash(self.0).to_hex()
    }

    /// The commitment to `bytes` under this salt, for the domain `tag`.
    pub fn commit(&self, tag: &[u8], bytes: &[u8]) -> EventHash {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(tag);
        h.update(bytes);
        EventHash(*h.finalize().as_bytes())
    }
}

impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Salt(..)")
    }
}

/// The payload hash of `payload` in an event salted with `salt` (none: the plain hash of formats
/// 1 to 3).
pub fn payload_hash_of(payload: &[u8], salt: Option<&Salt>) -> EventHash {
    match salt {
        Some(salt) => salt.commit(PAYLOAD_TAG, payload),
        None => EventHash::of(payload),
    }
}

/// Domain-separation tag that starts every chain-hash input.
pub const DOMAIN_TAG: &[u8] = b"mnemo/event/v1";

/// What a call returned: whether it was an error and the hash of the exact result text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the `tool_result` carried `is_error: true`.
    pub is_error: bool,
    /// `blake3` of the result text.
    pub result_hash: EventHash,
}

impl Outcome {
    /// The outcome of a result text, with its plain hash (formats 1 to 3).
    pub fn of(is_error: bool, text: &str) -> Outcome {
        Outcome::under(None, is_error, text)
    }

    /// The outcome of a result text in an event salted with `salt` (none: [`Outcome::of`]).
    pub fn under(salt: Option<&Salt>, is_error: bool, text: &str) -> Outcome {
        Outcome {
            is_error,
            result_hash: match salt {
                Some(salt) => salt.commit(RESULT_TAG, text.as_bytes()),
                None => EventHash::of(text.as_bytes()),
            },
        }
    }
}

/// Who made the call, when, what it returned, and under which semantics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Milliseconds since the Unix epoch, taken by the writer.
    pub time_ms: u64,
    /// The agent id of the client that made the call.
    pub agent: String,
    /// The `id` of the `tool_use` block, when the call came as a whole block.
    pub tool_use_id: Option<String>,
    /// The recorded outcome.
    pub outcome: Outcome,
    /// The version of the semantics that answered the call, which every replay answers it under
    /// again. It decides the event's format ([`Event::format`]).
    pub semantics: Semantics,
}

/// The fields every format's header starts with, in order (as encoded): the event format's own
/// types, so no change to [`Outcome`] or [`EventHash`] can change a header's bytes.
#[derive(Serialize)]
struct HeaderFields<'a> {
    time_ms: u64,
    agent: &'a str,
    tool_use_id: Option<&'a str>,
    is_error: bool,
    result_hash: [u8; 32],
}

/// [`HeaderFields`], decoded.
#[derive(Deserialize)]
struct DecodedFields {
    time_ms: u64,
    agent: String,
    tool_use_id: Option<String>,
    is_error: bool,
    result_hash: [u8; 32],
}

impl Header {
    /// Canonical bytes: the fields of format 1, and for a later format its `semantics` after them.
    fn encode(&self) -> Vec<u8> {
        let fields = HeaderFields {
            time_ms: self.time_ms,
            agent: &self.agent,
            tool_use_id: self.tool_use_id.as_deref(),
            is_error: self.outcome.is_error,
            result_hash: self.outcome.result_hash.0,
        };
        match self.semantics {
            Semantics::V1 => codec::encode(&fields),
            _ => codec::encode(&(fields, self.semantics.number())),
        }
    }

    /// Decodes the header of a record of format `version`, which must name the semantics that
    /// format holds.
    fn decode(version: u8, bytes: &[u8]) -> Result<Header> {
        let holds = semantics_of_format(version)
            .ok_or_else(|| Error::corrupt(format!("no event header is of format {version}")))?;
        let (fields, semantics) = if holds == Semantics::V1 {
            let fields: DecodedFields = codec::decode(bytes, "event header")?;
            (fields, Semantics::V1)
        } else {
            let (fields, number): (DecodedFields, u32) = codec::decode(bytes, "event header")?;
            let semantics = Semantics::from_number(number)
                .filter(|s| *s == holds)
                .ok_or_else(|| {
                    Error::corrupt(format!(
                        "an event header of format {version} names semantics version {number}, which format {version} does not hold"
                    ))
                })?;
            (fields, semantics)
        };
        Ok(Header {
            time_ms: fields.time_ms,
            agent: fields.agent,
            tool_use_id: fields.tool_use_id,
            outcome: Outcome {
                is_error: fields.is_error,
                result_hash: EventHash(fields.result_hash),
            },
            semantics,
        })
    }
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Position in the log.
    pub seq: Seq,
    /// Hash of the previous event ([`EventHash::ZERO`] for seq 1).
    pub prev_hash: EventHash,
    /// Time, agent, tool_use id and outcome.
    pub header: Header,
    /// The command or the rejected input.
    pub body: Body,
    /// The salt of its commitments: `Some` for an event of format 4, `None` for the plain hashes
    /// of formats 1 to 3.
    pub salt: Option<Salt>,
}

/// The canonical payload bytes of `body` (what an event holding it stores and hashes).
pub fn payload_of(body: &Body) -> Vec<u8> {
    WireBody::of(body).map_or_else(Vec::new, |wire| codec::encode(&wire))
}

/// Computes the chain hash from its parts (see the module docs).
pub fn chain_hash(
    seq: Seq,
    prev_hash: &EventHash,
    header: &[u8],
    payload_hash: &EventHash,
) -> EventHash {
    let mut h = blake3::Hasher::new();
    h.update(DOMAIN_TAG);
    h.update(&seq.0.to_le_bytes());
    h.update(&prev_hash.0);
    h.update(&(header.len() as u64).to_le_bytes());
    h.update(header);
    h.update(&payload_hash.0);
    EventHash(*h.finalize().as_bytes())
}

impl Event {
    /// The event logged as `seq` after the event whose hash is `prev_hash` for `body`, a call
    /// `agent` made at `time_ms` that was answered `answer` under the current semantics, with
    /// no `tool_use` id: salted with `salt` and its outcome committed under it, as the writer
    /// makes every event.
    pub fn answered(
        seq: Seq,
        prev_hash: EventHash,
        agent: &str,
        time_ms: u64,
        body: Body,
        answer: &crate::model::tool::Answer,
        salt: Salt,
    ) -> Event {
        Event {
            seq,
            prev_hash,
            header: Header {
                time_ms,
                agent: agent.into(),
                tool_use_id: None,
                outcome: Outcome::under(Some(&salt), answer.is_error, &answer.text),
                semantics: Semantics::CURRENT,
            },
            body,
            salt: Some(salt),
        }
    }

    /// Canonical header bytes (of the event's format).
    pub fn header_bytes(&self) -> Vec<u8> {
        self.header.encode()
    }

    /// The format version this event is written in, which follows from its semantics and whether
    /// it has a salt (`docs/formats.md` lists which format holds which).
    pub fn format(&self) -> u8 {
        match (&self.body, self.salt) {
            (Body::Erased(Erased { kept: Some(_), .. }), _) => ERASED_KEEPING_FORMAT,
            (Body::Erased(_), _) => ERASED_FORMAT,
            (_, Some(_)) if keeps_effects(&self.body) => REDACT_KEEPING_FORMAT,
            (_, Some(_)) if records_a_revert(&self.body) => REVERT_FORMAT,
            // Format 9 (semantics 5) holds any payload and any profile.
            (_, Some(_)) if self.header.semantics >= Semantics::V5 => WRITTEN_FORMAT,
            (Body::Api(_), _) => API_FORMAT,
            (body, _) if answers_as_typescript(body) => TS_PROFILE_FORMAT,
            (_, Some(_)) => salted_format_of(self.header.semantics),
            (_, None) => format_of(self.header.semantics),
        }
    }

    /// This event with its payload and salt erased: what a redaction leaves of it. Its chain hash
    /// is the same.
    pub fn erased(&self) -> Event {
        self.erased_keeping(None)
    }

    /// [`Event::erased`], keeping what the event did to the tree (`kept`), if given.
    pub fn erased_keeping(&self, kept: Option<Kept>) -> Event {
        let frame = self.to_frame();
        Event {
            seq: self.seq,
            prev_hash: self.prev_hash,
            header: self.header.clone(),
            body: Body::Erased(Erased {
                format: frame.erased_from.unwrap_or(frame.version),
                payload_hash: frame.payload_hash,
                kept,
            }),
            salt: None,
        }
    }

    /// The outcome of a result text, as this event's header records it (salted when the event
    /// is).
    pub fn outcome_of(&self, is_error: bool, text: &str) -> Outcome {
        Outcome::under(self.salt.as_ref(), is_error, text)
    }

    /// Canonical payload bytes.
    pub fn payload_bytes(&self) -> Vec<u8> {
        payload_of(&self.body)
    }

    /// Splits the event into its stored frame, computing the payload hash and the chain hash.
    pub fn to_frame(&self) -> Frame {
        let header = self.header_bytes();
        let payload = self.payload_bytes();
        let (payload_hash, erased_from) = match &self.body {
            Body::Erased(erased) => (erased.payload_hash, Some(erased.format)),
            _ => (payload_hash_of(&payload, self.salt.as_ref()), None),
        };
        // An erased record's only payload is what it keeps.
        let payload = match &self.body {
            Body::Erased(Erased {
                kept: Some(kept), ..
            }) => codec::encode(&wire::WireKept::of(kept)),
            _ => payload,
        };
        let hash = chain_hash(self.seq, &self.prev_hash, &header, &payload_hash);
        Frame {
            version: self.format(),
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash,
            payload_hash,
            header,
            salt: self.salt,
            payload,
            erased_from,
        }
    }

    /// This event's chain hash.
    pub fn hash(&self) -> EventHash {
        self.to_frame().hash
    }

    /// Decodes a stored record, checking nothing but that it decodes.
    pub fn decode(bytes: &[u8]) -> Result<Event> {
        FrameRef::parse(bytes)?.event()
    }
}

impl Event {
    /// The event whose canonical header and payload bytes, in format `version`, are `header` and
    /// `payload`, salted with `salt` (a [`Frame`]'s fields, wherever they are kept).
    pub fn from_parts(
        version: u8,
        seq: Seq,
        prev_hash: EventHash,
        header: &[u8],
        salt: Option<Salt>,
        payload: &[u8],
    ) -> Result<Event> {
        if version == ERASED_FORMAT || version == ERASED_KEEPING_FORMAT {
            return Err(Error::corrupt(format!(
                "a record of format {version} has a payload"
            )));
        }
        if salt.is_some() != is_salted(version) {
            return Err(Error::corrupt(format!(
                "an event of format {version} {} a salt",
                if salt.is_some() { "has" } else { "lacks" }
            )));
        }
        let body = codec::decode::<WireBody<'static>>(payload, "event payload")?.into_body();
        // Exactly one encoding per event: an API write of semantics 4 is format 7, and format 7
        // holds nothing else; format 9 (semantics 5) holds any.
        if version != WRITTEN_FORMAT && matches!(body, Body::Api(_)) != (version == API_FORMAT) {
            return Err(Error::corrupt(format!(
                "an event of format {version} {} a write of the memory-stores API",
                if version == API_FORMAT {
                    "is not"
                } else {
                    "holds"
                }
            )));
        }
        // A redaction that keeps effects is format 10, which holds nothing else.
        if keeps_effects(&body) != (version == REDACT_KEEPING_FORMAT) {
            return Err(Error::corrupt(format!(
                "an event of format {version} {} a redaction that keeps what erased events did, or a store's label",
                if version == REDACT_KEEPING_FORMAT {
                    "is not"
                } else {
                    "holds"
                }
            )));
        }
        // A revert's record is format 12, which holds nothing else.
        if records_a_revert(&body) != (version == REVERT_FORMAT) {
            return Err(Error::corrupt(format!(
                "an event of format {version} {} a revert's record",
                if version == REVERT_FORMAT {
                    "is not"
                } else {
                    "holds"
                }
            )));
        }
        // And a call under the `typescript-sdk` profile is format 8, which holds nothing else.
        if version != WRITTEN_FORMAT
            && answers_as_typescript(&body) != (version == TS_PROFILE_FORMAT)
        {
            return Err(Error::corrupt(format!(
                "an event of format {version} {} a call under the typescript-sdk profile",
                if version == TS_PROFILE_FORMAT {
                    "is not"
                } else {
                    "holds"
                }
            )));
        }
        Ok(Event {
            seq,
            prev_hash,
            header: Header::decode(version, header)?,
            body,
            salt,
        })
    }

    /// The erased event of format `format` whose canonical header is `header` and whose record
    /// keeps `payload_hash` (an erased record's fields).
    pub fn erased_from_parts(
        format: u8,
        seq: Seq,
        prev_hash: EventHash,
        header: &[u8],
        payload_hash: EventHash,
        kept: Option<Kept>,
    ) -> Result<Event> {
        Ok(Event {
            seq,
            prev_hash,
            header: Header::decode(format, header)?,
            body: Body::Erased(Erased {
                format,
                payload_hash,
                kept,
            }),
            salt: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tool::{Command, Limits, Profile};
    use proptest::prelude::*;

    fn command() -> impl Strategy<Value = Command> {
        let s = || ".{0,12}";
        prop_oneof![
            (s(), proptest::option::of((any::<i64>(), any::<i64>())))
                .prop_map(|(path, view_range)| Command::View { path, view_range }),
            (s(), s()).prop_map(|(path, file_text)| Command::Create { path, file_text }),
            (s(), s(), proptest::option::of(s())).prop_map(|(path, old_str, new_str)| {
                Command::StrReplace {
                    path,
                    old_str,
                    new_str,
                }
            }),
            (s(), any::<i64>(), s()).prop_map(|(path, insert_line, insert_text)| {
                Command::Insert {
                    path,
                    insert_line,
                    insert_text,
                }
            }),
            s().prop_map(|path| Command::Delete { path }),
            (s(), s()).prop_map(|(old_path, new_path)| Command::Rename { old_path, new_path }),
        ]
    }

    fn event() -> impl Strategy<Value = Event> {
        let body = prop_oneof![
            command().prop_map(|command| Body::Tool(ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command,
            })),
            ".{0,20}".prop_map(|input| Body::Rejected(RejectedCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                input,
            })),
        ];
        (
            1..u64::MAX,
            any::<[u8; 32]>(),
            any::<u64>(),
            ".{0,8}",
            proptest::option::of(".{0,8}"),
            any::<bool>(),
            ".{0,8}",
            body,
            prop::sample::select(Semantics::ALL.to_vec()),
            proptest::option::of(any::<[u8; 32]>()),
        )
            .prop_map(
                |(seq, prev, time_ms, agent, id, is_error, text, body, semantics, salt)| {
                    // Semantics 3 may be salted (format 4) or not (format 3), semantics 4 is
                    // always salted (format 6), and the older ones never are.
                    let salt = match semantics {
                        Semantics::V1 | Semantics::V2 => None,
                        Semantics::V3 => salt.map(Salt),
                        _ => Some(Salt(salt.unwrap_or([9; 32]))),
                    };
                    Event {
                        seq: Seq(seq),
                        prev_hash: EventHash(prev),
                        header: Header {
                            time_ms,
                            agent,
                            tool_use_id: id,
                            outcome: Outcome::under(salt.as_ref(), is_error, &text),
                            semantics,
                        },
                        body,
                        salt,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn records_round_trip(event in event()) {
            let frame = event.to_frame();
            prop_assert_eq!(frame.version, event.format());
            prop_assert_eq!(frame.salt.is_some(), is_salted(frame.version));
            let bytes = frame.encode();
            let decoded = Frame::decode(&bytes).expect("decodes");
            prop_assert_eq!(&decoded, &frame);
            prop_assert_eq!(decoded.event().expect("event decodes"), event);
            prop_assert_eq!(decoded.recompute_hash(), frame.hash);
        }

        #[test]
        fn any_flipped_byte_is_detectable(event in event(), pick in any::<prop::sample::Index>(), bit in 0u8..8) {
            let frame = event.to_frame();
            let mut bytes = frame.encode();
            let at = pick.index(bytes.len());
            bytes[at] ^= 1 << bit;
            // Detectable: the record no longer decodes (as a frame, or its header under the
            // format it now claims: a format-2 and a format-3 header differ only in the semantics
            // they must name), or its stored hashes no longer match what its fields hash to, or
            // it claims another seq or prev_hash than the original.
            let detected = match Frame::decode(&bytes) {
                Err(_) => true,
                Ok(f) => {
                    f.event().is_err()
                        || f.recompute_hash() != f.hash
                        || f.recompute_payload_hash() != f.payload_hash
                        || f.seq != frame.seq
                        || f.prev_hash != frame.prev_hash
                        || f.hash != frame.hash
                }
            };
            prop_assert!(detected, "flip of bit {} at byte {} went unnoticed", bit, at);
        }

        #[test]
        fn a_header_read_as_another_format_does_not_decode(event in event()) {
            let frame = event.to_frame();
            // Formats 3 and 4 share a header: their records differ by the salt, which a record
            // of format 4 must have and one of format 3 must not. Format 6's names semantics 4.
            let header_of = |version: u8| semantics_of_format(version);
            for version in 1..=FORMAT_VERSION {
                if version == ERASED_FORMAT {
                    continue;
                }
                let salt = is_salted(version).then(|| event.salt.unwrap_or(Salt([7; 32])));
                let read = Event::from_parts(version, frame.seq, frame.prev_hash, &frame.header, salt, &frame.payload);
                if version == frame.version {
                    prop_assert_eq!(read.expect("its own format"), event.clone());
                } else if header_of(version) != header_of(frame.version) {
                    prop_assert!(read.is_err(), "format {} read as {}", frame.version, version);
                }
                let wrong = if salt.is_some() { None } else { Some(Salt([7; 32])) };
                prop_assert!(
                    Event::from_parts(version, frame.seq, frame.prev_hash, &frame.header, wrong, &frame.payload).is_err(),
                    "format {} read with a salt it must not have", version
                );
            }
        }
    }

    #[test]
    fn a_format_two_header_names_semantics_two_only() {
        let header = |number: u32| {
            let fields = HeaderFields {
                time_ms: 1,
                agent: "a",
                tool_use_id: None,
                is_error: false,
                result_hash: Outcome::of(false, "").result_hash.0,
            };
            codec::encode(&(fields, number))
        };
        assert_eq!(
            Header::decode(2, &header(2))
                .expect("semantics 2")
                .semantics,
            Semantics::V2
        );
        for number in [0, 1, 3, u32::MAX] {
            assert!(
                matches!(
                    Header::decode(2, &header(number)),
                    Err(Error::Corrupt { .. })
                ),
                "semantics {number} in a format-2 header"
            );
        }
    }
}
