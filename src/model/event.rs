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

/// The newest on-disk format version this build reads and writes: [`WRITTEN_FORMAT`], the
/// writer's; a redaction writes erased records ([`ERASED_FORMAT`]).
///
/// Compatibility policy: a build reads every version up to its own and refuses newer ones with
/// [`Error::NewerFormat`]; the version byte leads every stored event and the store's `meta` tree.
pub const FORMAT_VERSION: u8 = 11;

/// The first format whose events are salted (answered under semantics 3).
pub const SALTED_FORMAT: u8 = 4;

/// The format the writer writes: salted, answered under semantics 5, with any payload (an API
/// write included) and any profile (`typescript-sdk` included).
pub const WRITTEN_FORMAT: u8 = 9;

/// The format of a salted event answered under semantics 4, but an API write's
/// ([`API_FORMAT`]) or a `typescript-sdk` call's ([`TS_PROFILE_FORMAT`]).
const SEMANTICS_4_FORMAT: u8 = 6;

/// The format of an event that holds a write of the memory-stores API ([`Body::Api`]): as format
/// 6 (salted, semantics 4), with the payload variant only this format may hold, so a build that
/// does not know it refuses the event as newer rather than misreading it.
pub const API_FORMAT: u8 = 7;

/// The format of an event answered under the `typescript-sdk` profile
/// ([`Profile::TypescriptSdk`](crate::Profile::TypescriptSdk)): as format 6 (salted, semantics
/// 4), with the profile only this format may hold, so a build that does not know the profile
/// refuses the event as newer rather than calling it corrupt.
pub const TS_PROFILE_FORMAT: u8 = 8;

/// The format of the admin commands format 9 does not hold: a redaction's event that keeps what
/// some erased events did to the tree
/// ([`AdminCommand::Redact`](crate::model::policy::AdminCommand::Redact) with `kept`), and a memory
/// store's label ([`AdminCommand::Label`](crate::model::policy::AdminCommand::Label)): as format 9
/// (salted, semantics 5), with the payload variants only this format may hold, so a build that
/// does not know them refuses the event as newer instead of misreading it.
pub const REDACT_KEEPING_FORMAT: u8 = 10;

/// The format of an erased record that keeps what the event did to the tree ([`Kept`]): a
/// format-5 record followed by the kept effect's length (`u32` LE) and bytes.
pub const ERASED_KEEPING_FORMAT: u8 = 11;

/// Domain-separation tag of the digest a redaction's event commits to a kept effect by.
const KEPT_TAG: &[u8] = b"mnemo/kept/v1";

/// The digest of what an erased record keeps, as the redaction's event names it (blake3 of a tag
/// and the kept effect's stored bytes).
pub fn kept_digest(kept: &Kept) -> EventHash {
    let mut h = blake3::Hasher::new();
    h.update(KEPT_TAG);
    h.update(&codec::encode(&wire::WireKept::of(kept)));
    EventHash(*h.finalize().as_bytes())
}

/// The format of an erased record: an event of any earlier format whose payload and salt a
/// redaction dropped (see the module docs).
pub const ERASED_FORMAT: u8 = 5;

/// Domain-separation tag of a format-4 payload commitment.
pub const PAYLOAD_TAG: &[u8] = b"mnemo/payload/v4";

/// Domain-separation tag of a format-4 result commitment.
pub const RESULT_TAG: &[u8] = b"mnemo/result/v4";

/// The format version an event answered under `semantics`, without a salt, is written in (see
/// the module docs); with one, [`salted_format_of`] it. Semantics 4 and 5 are only ever salted.
pub fn format_of(semantics: Semantics) -> u8 {
    match semantics {
        Semantics::V1 => 1,
        Semantics::V2 => 2,
        Semantics::V3 => 3,
        Semantics::V4 => SEMANTICS_4_FORMAT,
        _ => WRITTEN_FORMAT,
    }
}

/// The format version a salted event answered under `semantics` is written in: format 4 for
/// semantics 3 (and below, which no salted event is), format 6 for semantics 4 (7 for an API
/// write, 8 for a `typescript-sdk` call: see [`Event::format`]), format 9 for semantics 5.
pub fn salted_format_of(semantics: Semantics) -> u8 {
    match semantics {
        Semantics::V1 | Semantics::V2 | Semantics::V3 => SALTED_FORMAT,
        Semantics::V4 => SEMANTICS_4_FORMAT,
        _ => WRITTEN_FORMAT,
    }
}

/// Whether a record of format `version` holds a salt (formats 4, 6, 7, 8, 9 and 10).
fn is_salted(version: u8) -> bool {
    version == SALTED_FORMAT
        || version == SEMANTICS_4_FORMAT
        || version == API_FORMAT
        || version == TS_PROFILE_FORMAT
        || version == WRITTEN_FORMAT
        || version == REDACT_KEEPING_FORMAT
}

/// The semantics a header of format `version` must name (`None` for a version no event has).
fn semantics_of_format(version: u8) -> Option<Semantics> {
    match version {
        1 => Some(Semantics::V1),
        2 => Some(Semantics::V2),
        3 | SALTED_FORMAT => Some(Semantics::V3),
        SEMANTICS_4_FORMAT | API_FORMAT | TS_PROFILE_FORMAT => Some(Semantics::V4),
        WRITTEN_FORMAT | REDACT_KEEPING_FORMAT => Some(Semantics::V5),
        _ => None,
    }
}

/// Whether `body` is an admin command only format 10 holds: a redaction that keeps what some
/// erased events did, or a memory store's label.
fn keeps_effects(body: &Body) -> bool {
    matches!(body, Body::Admin(crate::model::policy::AdminCommand::Redact { kept, .. }) if !kept.is_empty())
        || matches!(
            body,
            Body::Admin(crate::model::policy::AdminCommand::Label { .. })
        )
}

/// What an erased record of format `version` keeps: decoded from `bytes` in format 11, none in
/// format 5.
pub(crate) fn kept_of(version: u8, bytes: &[u8]) -> Result<Option<Kept>> {
    (version == ERASED_KEEPING_FORMAT)
        .then(|| codec::decode::<wire::WireKept<'static>>(bytes, "kept effect"))
        .transpose()
        .map(|kept| kept.map(wire::WireKept::into_kept))
}

/// Whether `body` is a call answered under the `typescript-sdk` profile (written as format 8).
fn answers_as_typescript(body: &Body) -> bool {
    let profile = match body {
        Body::Tool(call) => call.profile,
        Body::Rejected(call) => call.profile,
        Body::RejectedDigest(call) => call.profile,
        Body::Admin(_) | Body::Api(_) | Body::Erased(_) => return false,
    };
    profile == crate::Profile::TypescriptSdk
}

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

const FRAME_FIXED: usize = 1 + 8 + 32 + 32 + 32 + 4;

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

/// An event's stored record split into its fields, before the header and payload are decoded.
///
/// This is what the verifier checks: every field is what was on disk, nothing is recomputed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The format version byte.
    pub version: u8,
    /// The seq written inside the record.
    pub seq: Seq,
    /// The stored `prev_hash`.
    pub prev_hash: EventHash,
    /// The stored hash of this event.
    pub hash: EventHash,
    /// The stored payload hash (format 4: the salted commitment).
    pub payload_hash: EventHash,
    /// Canonical header bytes.
    pub header: Vec<u8>,
    /// The event's salt (format 4 only).
    pub salt: Option<Salt>,
    /// Canonical payload bytes (none in an erased record).
    pub payload: Vec<u8>,
    /// For an erased record (format 5), the format the event was written in.
    pub erased_from: Option<u8>,
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

fn take<'a>(bytes: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8]> {
    if bytes.len() < n {
        return Err(Error::corrupt(format!(
            "event record is truncated in its {what}"
        )));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn take_hash(bytes: &mut &[u8], what: &str) -> Result<EventHash> {
    let mut out = [0; 32];
    out.copy_from_slice(take(bytes, 32, what)?);
    Ok(EventHash(out))
}

fn take_u32(bytes: &mut &[u8], what: &str) -> Result<usize> {
    let mut out = [0; 4];
    out.copy_from_slice(take(bytes, 4, what)?);
    Ok(u32::from_le_bytes(out) as usize)
}

impl Frame {
    /// The stored record bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FRAME_FIXED + 4 + 32 + self.header.len() + self.payload.len());
        out.push(self.version);
        out.extend_from_slice(&self.seq.0.to_le_bytes());
        out.extend_from_slice(&self.prev_hash.0);
        out.extend_from_slice(&self.hash.0);
        out.extend_from_slice(&self.payload_hash.0);
        // NOTE: headers and payloads are bounded by the tool's input limits, far below 4 GiB; a
        // larger one would not fit the frame, so it is refused before it gets here.
        #[expect(clippy::cast_possible_truncation)]
        out.extend_from_slice(&(self.header.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.header);
        if let Some(from) = self.erased_from {
            out.push(from);
            if self.version == ERASED_KEEPING_FORMAT {
                #[expect(clippy::cast_possible_truncation)]
                out.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
                out.extend_from_slice(&self.payload);
            }
            return out;
        }
        if let Some(salt) = &self.salt {
            out.extend_from_slice(&salt.0);
        }
        #[expect(clippy::cast_possible_truncation)]
        out.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// Splits stored record bytes into fields.
    pub fn decode(bytes: &[u8]) -> Result<Frame> {
        FrameRef::parse(bytes).map(|frame| frame.to_frame())
    }

    /// The chain hash recomputed from the stored fields (with the stored payload hash).
    pub fn recompute_hash(&self) -> EventHash {
        self.borrowed().recompute_hash()
    }

    /// The payload hash recomputed from the stored payload (and salt).
    pub fn recompute_payload_hash(&self) -> EventHash {
        self.borrowed().recompute_payload_hash()
    }

    /// Decodes the header and payload.
    pub fn event(&self) -> Result<Event> {
        self.borrowed().event()
    }

    /// The frame's fields, its header and payload borrowed.
    pub(crate) fn borrowed(&self) -> FrameRef<'_> {
        FrameRef {
            version: self.version,
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash: self.hash,
            payload_hash: self.payload_hash,
            header: &self.header,
            salt: self.salt,
            payload: &self.payload,
            erased_from: self.erased_from,
        }
    }
}

/// A [`Frame`] whose header and payload are borrowed from the stored record they were split
/// from: what a reader that checks or decodes records one after another needs, with no copy of
/// their bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// The format version byte.
    pub version: u8,
    /// The seq written inside the record.
    pub seq: Seq,
    /// The stored `prev_hash`.
    pub prev_hash: EventHash,
    /// The stored hash of this event.
    pub hash: EventHash,
    /// The stored payload hash (format 4: the salted commitment).
    pub payload_hash: EventHash,
    /// Canonical header bytes.
    pub header: &'a [u8],
    /// The event's salt (format 4 only).
    pub salt: Option<Salt>,
    /// Canonical payload bytes (none in an erased record).
    pub payload: &'a [u8],
    /// For an erased record (format 5), the format the event was written in.
    pub erased_from: Option<u8>,
}

impl<'a> FrameRef<'a> {
    /// Splits stored record bytes into fields (what [`Frame::decode`] does, without copying).
    pub fn parse(bytes: &'a [u8]) -> Result<FrameRef<'a>> {
        let mut rest = bytes;
        let version = take(&mut rest, 1, "version byte")?[0];
        if version > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found: version,
                max: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(Error::corrupt("event record has format version 0"));
        }
        let mut seq = [0; 8];
        seq.copy_from_slice(take(&mut rest, 8, "seq")?);
        let prev_hash = take_hash(&mut rest, "prev_hash")?;
        let hash = take_hash(&mut rest, "hash")?;
        let payload_hash = take_hash(&mut rest, "payload_hash")?;
        let header_len = take_u32(&mut rest, "header length")?;
        let header = take(&mut rest, header_len, "header")?;
        let (salt, payload, erased_from) =
            if version == ERASED_FORMAT || version == ERASED_KEEPING_FORMAT {
                let from = take(&mut rest, 1, "erased record's format")?[0];
                if semantics_of_format(from).is_none() {
                    return Err(Error::corrupt(format!(
                        "an erased record says it was an event of format {from}, which no event has"
                    )));
                }
                let kept = if version == ERASED_KEEPING_FORMAT {
                    let len = take_u32(&mut rest, "kept effect's length")?;
                    take(&mut rest, len, "kept effect")?
                } else {
                    &[][..]
                };
                (None, kept, Some(from))
            } else {
                let salt = if is_salted(version) {
                    let mut salt = [0; 32];
                    salt.copy_from_slice(take(&mut rest, 32, "salt")?);
                    Some(Salt(salt))
                } else {
                    None
                };
                let payload_len = take_u32(&mut rest, "payload length")?;
                (salt, take(&mut rest, payload_len, "payload")?, None)
            };
        if !rest.is_empty() {
            return Err(Error::corrupt(format!(
                "event record has {} trailing bytes",
                rest.len()
            )));
        }
        Ok(FrameRef {
            version,
            seq: Seq(u64::from_le_bytes(seq)),
            prev_hash,
            hash,
            payload_hash,
            header,
            salt,
            payload,
            erased_from,
        })
    }

    /// The chain hash recomputed from the stored fields (with the stored payload hash).
    pub fn recompute_hash(&self) -> EventHash {
        chain_hash(self.seq, &self.prev_hash, self.header, &self.payload_hash)
    }

    /// The payload hash recomputed from the stored payload (and salt); an erased record's, which
    /// has no payload left to hash, as stored.
    pub fn recompute_payload_hash(&self) -> EventHash {
        match self.erased_from {
            Some(_) => self.payload_hash,
            None => payload_hash_of(self.payload, self.salt.as_ref()),
        }
    }

    /// Decodes the header and payload.
    pub fn event(&self) -> Result<Event> {
        if let Some(from) = self.erased_from {
            return Event::erased_from_parts(
                from,
                self.seq,
                self.prev_hash,
                self.header,
                self.payload_hash,
                kept_of(self.version, self.payload)?,
            );
        }
        Event::from_parts(
            self.version,
            self.seq,
            self.prev_hash,
            self.header,
            self.salt,
            self.payload,
        )
    }

    /// The frame with its own copy of the header and payload.
    pub fn to_frame(self) -> Frame {
        Frame {
            version: self.version,
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash: self.hash,
            payload_hash: self.payload_hash,
            header: self.header.to_vec(),
            salt: self.salt,
            payload: self.payload.to_vec(),
            erased_from: self.erased_from,
        }
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
