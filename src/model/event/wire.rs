//! The payload as it is stored: the event format's own serialisable types, and the explicit
//! conversions between them and the core's types ([`Body`] and what it holds).
//!
//! The byte layout in the [module docs](super) is the serde shape of these types under the codec
//! (field order, variant order, field types), and nothing else: the core's types derive nothing
//! for the format, so renaming or reordering a field or variant of `Command`, `Profile`,
//! `Limits`, `AdminCommand` or `Refusal` cannot change a stored byte; only an edit here can, and
//! the golden vectors in the tests fail on one. The types borrow the core value they encode
//! (`Cow`), so encoding copies no file content; decoding owns what it reads.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::model::hash::EventHash;
use crate::model::policy::{Access, AdminCommand};
use crate::model::tool::api::ApiWrite;
use crate::model::tool::{
    Body, Command, InputDigest, Kept, KeptChange, Limits, Profile, Refusal, RejectedCall,
    RejectedDigest, ToolCall,
};

/// A string as stored: borrowed when encoding, owned when decoded.
type Text<'a> = Cow<'a, str>;

fn text(s: &str) -> Text<'_> {
    Cow::Borrowed(s)
}

fn owned(s: Text<'_>) -> String {
    s.into_owned()
}

/// [`Body`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireBody<'a> {
    Tool {
        root: Text<'a>,
        profile: WireProfile,
        limits: WireLimits,
        command: WireCommand<'a>,
    },
    Rejected {
        root: Text<'a>,
        profile: WireProfile,
        input: Text<'a>,
    },
    Admin(WireAdmin<'a>),
    RejectedDigest {
        root: Text<'a>,
        profile: WireProfile,
        input: WireDigest<'a>,
        refusal: WireRefusal<'a>,
    },
    /// Only in format 7 ([`super::API_FORMAT`]).
    Api(WireApi<'a>),
}

/// [`ApiWrite`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireApi<'a> {
    Create {
        path: Text<'a>,
        content: Text<'a>,
    },
    Update {
        memory: u64,
        path: Text<'a>,
        content: Option<Text<'a>>,
        new_path: Option<Text<'a>>,
        expect: Option<[u8; 32]>,
    },
    Delete {
        memory: u64,
        path: Text<'a>,
        expect: Option<[u8; 32]>,
    },
}

impl<'a> WireApi<'a> {
    fn of(write: &'a ApiWrite) -> WireApi<'a> {
        match write {
            ApiWrite::Create { path, content } => WireApi::Create {
                path: text(path),
                content: text(content),
            },
            ApiWrite::Update {
                memory,
                path,
                content,
                new_path,
                expect,
            } => WireApi::Update {
                memory: *memory,
                path: text(path),
                content: content.as_deref().map(text),
                new_path: new_path.as_deref().map(text),
                expect: *expect,
            },
            ApiWrite::Delete {
                memory,
                path,
                expect,
            } => WireApi::Delete {
                memory: *memory,
                path: text(path),
                expect: *expect,
            },
        }
    }

    fn into_write(self) -> ApiWrite {
        match self {
            WireApi::Create { path, content } => ApiWrite::Create {
                path: owned(path),
                content: owned(content),
            },
            WireApi::Update {
                memory,
                path,
                content,
                new_path,
                expect,
            } => ApiWrite::Update {
                memory,
                path: owned(path),
                content: content.map(owned),
                new_path: new_path.map(owned),
                expect,
            },
            WireApi::Delete {
                memory,
                path,
                expect,
            } => ApiWrite::Delete {
                memory,
                path: owned(path),
                expect,
            },
        }
    }
}

/// [`Profile`] as stored.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) enum WireProfile {
    Spec,
    PythonSdk,
    /// Only in format 8 ([`super::TS_PROFILE_FORMAT`]).
    TypescriptSdk,
}

/// The [`Limits`] an answer depends on, as stored (`max_request_bytes` is not).
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) struct WireLimits {
    max_file_bytes: u64,
    view_max_chars: Option<u64>,
}

/// [`Command`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireCommand<'a> {
    View {
        path: Text<'a>,
        view_range: Option<(i64, i64)>,
    },
    Create {
        path: Text<'a>,
        file_text: Text<'a>,
    },
    StrReplace {
        path: Text<'a>,
        old_str: Text<'a>,
        new_str: Option<Text<'a>>,
    },
    Insert {
        path: Text<'a>,
        insert_line: i64,
        insert_text: Text<'a>,
    },
    Delete {
        path: Text<'a>,
    },
    Rename {
        old_path: Text<'a>,
        new_path: Text<'a>,
    },
}

/// [`AdminCommand`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireAdmin<'a> {
    Grant {
        agent: Text<'a>,
        prefix: Text<'a>,
        access: WireAccess,
    },
    Revoke {
        agent: Text<'a>,
        prefix: Text<'a>,
    },
    IssueToken {
        id: Text<'a>,
        agent: Text<'a>,
        label: Text<'a>,
        hash: [u8; 32],
    },
    RevokeToken {
        id: Text<'a>,
    },
    Redact {
        reason: Text<'a>,
        seqs: Vec<u64>,
    },
    Configure {
        name: Text<'a>,
        value: Text<'a>,
    },
    /// A redaction that keeps what some erased events did: only in format 10
    /// ([`super::REDACT_KEEPING_FORMAT`]); one that keeps nothing is `Redact`.
    RedactKeeping {
        reason: Text<'a>,
        seqs: Vec<u64>,
        kept: Vec<(u64, [u8; 32])>,
    },
    /// A memory store's label: only in format 10.
    Label {
        label: Text<'a>,
    },
    /// A revert's record: only in format 12 ([`super::REVERT_FORMAT`]).
    Revert {
        to: u64,
        scope: Text<'a>,
        seqs: Vec<u64>,
        calls: u64,
    },
}

/// [`Kept`] as stored after an erased record of format 11 ([`super::ERASED_KEEPING_FORMAT`]).
#[derive(Serialize, Deserialize)]
pub(super) struct WireKept<'a> {
    change: WireKeptChange<'a>,
    by_api: bool,
}

impl<'a> WireKept<'a> {
    pub(super) fn of(kept: &'a Kept) -> WireKept<'a> {
        WireKept {
            change: WireKeptChange::of(&kept.change),
            by_api: kept.by_api,
        }
    }

    pub(super) fn into_kept(self) -> Kept {
        Kept {
            change: self.change.into_change(),
            by_api: self.by_api,
        }
    }
}

/// [`KeptChange`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireKeptChange<'a> {
    Write {
        path: Text<'a>,
        sha256: [u8; 32],
        bytes: u64,
    },
    Rewrite {
        from: Text<'a>,
        to: Text<'a>,
        sha256: [u8; 32],
        bytes: u64,
    },
    Rename {
        from: Text<'a>,
        to: Text<'a>,
    },
    Delete {
        path: Text<'a>,
    },
}

impl<'a> WireKeptChange<'a> {
    pub(super) fn of(kept: &'a KeptChange) -> WireKeptChange<'a> {
        match kept {
            KeptChange::Write {
                path,
                sha256,
                bytes,
            } => WireKeptChange::Write {
                path: text(path),
                sha256: *sha256,
                bytes: *bytes,
            },
            KeptChange::Rewrite {
                from,
                to,
                sha256,
                bytes,
            } => WireKeptChange::Rewrite {
                from: text(from),
                to: text(to),
                sha256: *sha256,
                bytes: *bytes,
            },
            KeptChange::Rename { from, to } => WireKeptChange::Rename {
                from: text(from),
                to: text(to),
            },
            KeptChange::Delete { path } => WireKeptChange::Delete { path: text(path) },
        }
    }

    pub(super) fn into_change(self) -> KeptChange {
        match self {
            WireKeptChange::Write {
                path,
                sha256,
                bytes,
            } => KeptChange::Write {
                path: owned(path),
                sha256,
                bytes,
            },
            WireKeptChange::Rewrite {
                from,
                to,
                sha256,
                bytes,
            } => KeptChange::Rewrite {
                from: owned(from),
                to: owned(to),
                sha256,
                bytes,
            },
            WireKeptChange::Rename { from, to } => KeptChange::Rename {
                from: owned(from),
                to: owned(to),
            },
            WireKeptChange::Delete { path } => KeptChange::Delete { path: owned(path) },
        }
    }
}

/// [`Access`] as stored.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) enum WireAccess {
    Read,
    ReadWrite,
}

/// [`InputDigest`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) struct WireDigest<'a> {
    len: u64,
    hash: [u8; 32],
    prefix: Text<'a>,
}

/// [`Refusal`] as stored.
#[derive(Serialize, Deserialize)]
pub(super) enum WireRefusal<'a> {
    TooLarge {
        limit: u64,
    },
    NotUtf8 {
        valid_up_to: u64,
    },
    Invalid {
        text: Text<'a>,
    },
    ContentTooLarge {
        path: Text<'a>,
        field: Text<'a>,
        bytes: u64,
        limit: u64,
    },
    Stopped {
        limit: u64,
    },
    Failed {
        command: Text<'a>,
        paths: Vec<Text<'a>>,
        text: Text<'a>,
    },
}

impl<'a> WireBody<'a> {
    /// The stored form of `body`, borrowing its text; none for an erased event, which has no
    /// payload.
    pub(super) fn of(body: &'a Body) -> Option<WireBody<'a>> {
        Some(match body {
            Body::Tool(call) => WireBody::Tool {
                root: text(&call.root),
                profile: WireProfile::of(call.profile),
                limits: WireLimits::of(&call.limits),
                command: WireCommand::of(&call.command),
            },
            Body::Rejected(call) => WireBody::Rejected {
                root: text(&call.root),
                profile: WireProfile::of(call.profile),
                input: text(&call.input),
            },
            Body::Admin(command) => WireBody::Admin(WireAdmin::of(command)),
            Body::RejectedDigest(d) => WireBody::RejectedDigest {
                root: text(&d.root),
                profile: WireProfile::of(d.profile),
                input: WireDigest::of(&d.input),
                refusal: WireRefusal::of(&d.refusal),
            },
            Body::Api(write) => WireBody::Api(WireApi::of(write)),
            Body::Erased(_) => return None,
        })
    }

    /// The core's value of a decoded payload.
    pub(super) fn into_body(self) -> Body {
        match self {
            WireBody::Tool {
                root,
                profile,
                limits,
                command,
            } => Body::Tool(ToolCall {
                root: owned(root),
                profile: profile.into_profile(),
                limits: limits.into_limits(),
                command: command.into_command(),
            }),
            WireBody::Rejected {
                root,
                profile,
                input,
            } => Body::Rejected(RejectedCall {
                root: owned(root),
                profile: profile.into_profile(),
                input: owned(input),
            }),
            WireBody::Admin(command) => Body::Admin(command.into_admin()),
            WireBody::RejectedDigest {
                root,
                profile,
                input,
                refusal,
            } => Body::RejectedDigest(RejectedDigest {
                root: owned(root),
                profile: profile.into_profile(),
                input: input.into_digest(),
                refusal: refusal.into_refusal(),
            }),
            WireBody::Api(write) => Body::Api(write.into_write()),
        }
    }
}

impl WireProfile {
    fn of(profile: Profile) -> WireProfile {
        match profile {
            Profile::Spec => WireProfile::Spec,
            Profile::PythonSdk => WireProfile::PythonSdk,
            Profile::TypescriptSdk => WireProfile::TypescriptSdk,
        }
    }

    fn into_profile(self) -> Profile {
        match self {
            WireProfile::Spec => Profile::Spec,
            WireProfile::PythonSdk => Profile::PythonSdk,
            WireProfile::TypescriptSdk => Profile::TypescriptSdk,
        }
    }
}

impl WireLimits {
    fn of(limits: &Limits) -> WireLimits {
        WireLimits {
            max_file_bytes: limits.max_file_bytes,
            view_max_chars: limits.view_max_chars,
        }
    }

    /// The limits, with the default request-size limit (which no answer depends on).
    fn into_limits(self) -> Limits {
        Limits {
            max_file_bytes: self.max_file_bytes,
            view_max_chars: self.view_max_chars,
            ..Limits::default()
        }
    }
}

impl<'a> WireCommand<'a> {
    fn of(command: &'a Command) -> WireCommand<'a> {
        match command {
            Command::View { path, view_range } => WireCommand::View {
                path: text(path),
                view_range: *view_range,
            },
            Command::Create { path, file_text } => WireCommand::Create {
                path: text(path),
                file_text: text(file_text),
            },
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => WireCommand::StrReplace {
                path: text(path),
                old_str: text(old_str),
                new_str: new_str.as_deref().map(text),
            },
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => WireCommand::Insert {
                path: text(path),
                insert_line: *insert_line,
                insert_text: text(insert_text),
            },
            Command::Delete { path } => WireCommand::Delete { path: text(path) },
            Command::Rename { old_path, new_path } => WireCommand::Rename {
                old_path: text(old_path),
                new_path: text(new_path),
            },
        }
    }

    fn into_command(self) -> Command {
        match self {
            WireCommand::View { path, view_range } => Command::View {
                path: owned(path),
                view_range,
            },
            WireCommand::Create { path, file_text } => Command::Create {
                path: owned(path),
                file_text: owned(file_text),
            },
            WireCommand::StrReplace {
                path,
                old_str,
                new_str,
            } => Command::StrReplace {
                path: owned(path),
                old_str: owned(old_str),
                new_str: new_str.map(owned),
            },
            WireCommand::Insert {
                path,
                insert_line,
                insert_text,
            } => Command::Insert {
                path: owned(path),
                insert_line,
                insert_text: owned(insert_text),
            },
            WireCommand::Delete { path } => Command::Delete { path: owned(path) },
            WireCommand::Rename { old_path, new_path } => Command::Rename {
                old_path: owned(old_path),
                new_path: owned(new_path),
            },
        }
    }
}

impl<'a> WireAdmin<'a> {
    fn of(command: &'a AdminCommand) -> WireAdmin<'a> {
        match command {
            AdminCommand::Grant {
                agent,
                prefix,
                access,
            } => WireAdmin::Grant {
                agent: text(agent),
                prefix: text(prefix),
                access: match access {
                    Access::Read => WireAccess::Read,
                    Access::ReadWrite => WireAccess::ReadWrite,
                },
            },
            AdminCommand::Revoke { agent, prefix } => WireAdmin::Revoke {
                agent: text(agent),
                prefix: text(prefix),
            },
            AdminCommand::IssueToken {
                id,
                agent,
                label,
                hash,
            } => WireAdmin::IssueToken {
                id: text(id),
                agent: text(agent),
                label: text(label),
                hash: hash.0,
            },
            AdminCommand::RevokeToken { id } => WireAdmin::RevokeToken { id: text(id) },
            AdminCommand::Redact { reason, seqs, kept } if kept.is_empty() => WireAdmin::Redact {
                reason: text(reason),
                seqs: seqs.clone(),
            },
            AdminCommand::Redact { reason, seqs, kept } => WireAdmin::RedactKeeping {
                reason: text(reason),
                seqs: seqs.clone(),
                kept: kept.iter().map(|(seq, digest)| (*seq, digest.0)).collect(),
            },
            AdminCommand::Configure { name, value } => WireAdmin::Configure {
                name: text(name),
                value: text(value),
            },
            AdminCommand::Label { label } => WireAdmin::Label { label: text(label) },
            AdminCommand::Revert {
                to,
                scope,
                seqs,
                calls,
            } => WireAdmin::Revert {
                to: *to,
                scope: text(scope),
                seqs: seqs.clone(),
                calls: *calls,
            },
        }
    }

    fn into_admin(self) -> AdminCommand {
        match self {
            WireAdmin::Grant {
                agent,
                prefix,
                access,
            } => AdminCommand::Grant {
                agent: owned(agent),
                prefix: owned(prefix),
                access: match access {
                    WireAccess::Read => Access::Read,
                    WireAccess::ReadWrite => Access::ReadWrite,
                },
            },
            WireAdmin::Revoke { agent, prefix } => AdminCommand::Revoke {
                agent: owned(agent),
                prefix: owned(prefix),
            },
            WireAdmin::IssueToken {
                id,
                agent,
                label,
                hash,
            } => AdminCommand::IssueToken {
                id: owned(id),
                agent: owned(agent),
                label: owned(label),
                hash: EventHash(hash),
            },
            WireAdmin::RevokeToken { id } => AdminCommand::RevokeToken { id: owned(id) },
            WireAdmin::Redact { reason, seqs } => AdminCommand::Redact {
                reason: owned(reason),
                seqs,
                kept: Vec::new(),
            },
            WireAdmin::RedactKeeping { reason, seqs, kept } => AdminCommand::Redact {
                reason: owned(reason),
                seqs,
                kept: kept
                    .into_iter()
                    .map(|(seq, digest)| (seq, EventHash(digest)))
                    .collect(),
            },
            WireAdmin::Configure { name, value } => AdminCommand::Configure {
                name: owned(name),
                value: owned(value),
            },
            WireAdmin::Label { label } => AdminCommand::Label {
                label: owned(label),
            },
            WireAdmin::Revert {
                to,
                scope,
                seqs,
                calls,
            } => AdminCommand::Revert {
                to,
                scope: owned(scope),
                seqs,
                calls,
            },
        }
    }
}

impl<'a> WireDigest<'a> {
    fn of(digest: &'a InputDigest) -> WireDigest<'a> {
        WireDigest {
            len: digest.len,
            hash: digest.hash.0,
            prefix: text(&digest.prefix),
        }
    }

    fn into_digest(self) -> InputDigest {
        InputDigest {
            len: self.len,
            hash: EventHash(self.hash),
            prefix: owned(self.prefix),
        }
    }
}

impl<'a> WireRefusal<'a> {
    fn of(refusal: &'a Refusal) -> WireRefusal<'a> {
        match refusal {
            Refusal::TooLarge { limit } => WireRefusal::TooLarge { limit: *limit },
            Refusal::NotUtf8 { valid_up_to } => WireRefusal::NotUtf8 {
                valid_up_to: *valid_up_to,
            },
            Refusal::Invalid { text: t } => WireRefusal::Invalid { text: text(t) },
            Refusal::ContentTooLarge {
                path,
                field,
                bytes,
                limit,
            } => WireRefusal::ContentTooLarge {
                path: text(path),
                field: text(field),
                bytes: *bytes,
                limit: *limit,
            },
            Refusal::Stopped { limit } => WireRefusal::Stopped { limit: *limit },
            Refusal::Failed {
                command,
                paths,
                text: t,
            } => WireRefusal::Failed {
                command: text(command),
                paths: paths.iter().map(|p| text(p)).collect(),
                text: text(t),
            },
        }
    }

    fn into_refusal(self) -> Refusal {
        match self {
            WireRefusal::TooLarge { limit } => Refusal::TooLarge { limit },
            WireRefusal::NotUtf8 { valid_up_to } => Refusal::NotUtf8 { valid_up_to },
            WireRefusal::Invalid { text } => Refusal::Invalid { text: owned(text) },
            WireRefusal::ContentTooLarge {
                path,
                field,
                bytes,
                limit,
            } => Refusal::ContentTooLarge {
                path: owned(path),
                field: owned(field),
                bytes,
                limit,
            },
            WireRefusal::Stopped { limit } => Refusal::Stopped { limit },
            WireRefusal::Failed {
                command,
                paths,
                text,
            } => Refusal::Failed {
                command: owned(command),
                paths: paths.into_iter().map(owned).collect(),
                text: owned(text),
            },
        }
    }
}
