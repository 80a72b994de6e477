//! The format versions of an event record: which format an event is written in, which formats
//! hold a salt or a kept effect, and the semantics each names (the table is in `docs/formats.md`,
//! "Format and semantics versions").

use crate::error::Result;
use crate::model::codec;
use crate::model::hash::EventHash;
use crate::model::tool::{Body, Kept, Semantics};

use super::wire;

/// The newest on-disk format version this build reads and writes: [`WRITTEN_FORMAT`], the
/// writer's; a redaction writes erased records ([`ERASED_FORMAT`]).
///
/// Compatibility policy: a build reads every version up to its own and refuses newer ones with
/// [`Error::NewerFormat`]; the version byte leads every stored event and the store's `meta` tree.
pub const FORMAT_VERSION: u8 = 13;

/// The first format whose events are salted (answered under semantics 3).
pub const SALTED_FORMAT: u8 = 4;

/// The format the writer writes: salted, answered under semantics 5, with any payload (an API
/// write included) and any profile (`typescript-sdk` included).
pub const WRITTEN_FORMAT: u8 = 9;

/// The format of a salted event answered under semantics 4, but an API write's
/// ([`API_FORMAT`]) or a `typescript-sdk` call's ([`TS_PROFILE_FORMAT`]).
pub(super) const SEMANTICS_4_FORMAT: u8 = 6;

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

/// The format of a revert's record ([`AdminCommand::Revert`](crate::model::policy::AdminCommand::Revert)):
/// as format 9 (salted, semantics 5), with the payload variant only this format may hold, so a
/// build that does not know it refuses the store as newer instead of calling the event corrupt.
pub const REVERT_FORMAT: u8 = 12;

/// The stored form of a record whose payload is in the store's value file (the `values` file
/// beside sled's, see `store::values`): no event is of this format. It appears only as the first
/// byte of a value in sled's `events` tree, which the store resolves into the whole record before
/// anything else reads it; the store's format marker is raised to it with the first such record,
/// so a build that does not know the value file refuses the store instead of missing payloads.
pub const VALUE_REF_FORMAT: u8 = 13;

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

/// Whether a record of format `version` holds a salt (formats 4, 6, 7, 8, 9, 10 and 12).
pub(super) fn is_salted(version: u8) -> bool {
    version == REVERT_FORMAT
        || version == SALTED_FORMAT
        || version == SEMANTICS_4_FORMAT
        || version == API_FORMAT
        || version == TS_PROFILE_FORMAT
        || version == WRITTEN_FORMAT
        || version == REDACT_KEEPING_FORMAT
}

/// The semantics a header of format `version` must name (`None` for a version no event has).
pub(super) fn semantics_of_format(version: u8) -> Option<Semantics> {
    match version {
        1 => Some(Semantics::V1),
        2 => Some(Semantics::V2),
        3 | SALTED_FORMAT => Some(Semantics::V3),
        SEMANTICS_4_FORMAT | API_FORMAT | TS_PROFILE_FORMAT => Some(Semantics::V4),
        WRITTEN_FORMAT | REDACT_KEEPING_FORMAT | REVERT_FORMAT => Some(Semantics::V5),
        _ => None,
    }
}

/// Whether `body` is an admin command only format 10 holds: a redaction that keeps what some
/// erased events did, or a memory store's label.
pub(super) fn keeps_effects(body: &Body) -> bool {
    matches!(body, Body::Admin(crate::model::policy::AdminCommand::Redact { kept, .. }) if !kept.is_empty())
        || matches!(
            body,
            Body::Admin(crate::model::policy::AdminCommand::Label { .. })
        )
}

/// Whether `body` is a revert's record, which only format 12 holds.
pub(super) fn records_a_revert(body: &Body) -> bool {
    matches!(
        body,
        Body::Admin(crate::model::policy::AdminCommand::Revert { .. })
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
pub(super) fn answers_as_typescript(body: &Body) -> bool {
    let profile = match body {
        Body::Tool(call) => call.profile,
        Body::Rejected(call) => call.profile,
        Body::RejectedDigest(call) => call.profile,
        Body::Admin(_) | Body::Api(_) | Body::Erased(_) => return false,
    };
    profile == crate::Profile::TypescriptSdk
}
