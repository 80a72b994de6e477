//! Access control: which agent may read or write which paths.
//!
//! The policy is a set of grants — (agent or `*`, path prefix, `read` or `read-write`) — changed
//! only by admin events in the log, so every change is chained, audited and replayed by `verify`.
//! A store whose log holds no grant or revoke has one implicit grant: every agent may read and
//! write everything (`*`, `/`, read-write), so the quick start needs no set-up. The first grant or
//! revoke makes that grant explicit, and an operator narrows from there.
//!
//! Agent tokens ([`crate::client::token`]) are admin events too: issuing one and revoking it are
//! [`AdminCommand::IssueToken`] and [`AdminCommand::RevokeToken`], chained and replayed like the
//! grants. They leave the grants as they are.
//!
//! **Invariant:** every call is checked against the policy as it stood when the call was
//! committed; a denied call changes nothing and is logged like any other.

use serde::Serialize;

use crate::model::hash::EventHash;
use crate::model::paths::MemPath;
use crate::model::semantics_version::Semantics;

/// The agent pattern that matches every agent.
pub const ANY_AGENT: &str = "*";

/// Longest agent id accepted, in bytes.
pub const MAX_AGENT_BYTES: usize = 256;

/// Checks an agent id: 1 to [`MAX_AGENT_BYTES`] bytes of printable text.
pub fn check_agent_id(agent: &str) -> Result<(), String> {
    check_agent_id_under(agent, Semantics::CURRENT)
}

/// [`check_agent_id`], with the error text of `semantics` (an answer's).
pub fn check_agent_id_under(agent: &str, semantics: Semantics) -> Result<(), String> {
    if agent.is_empty() || agent.len() > MAX_AGENT_BYTES || agent.chars().any(char::is_control) {
        return Err(format!(
            "agent id {} is not valid; use 1 to {MAX_AGENT_BYTES} bytes of printable text, such as \"agent-1\"",
            semantics.quote(agent)
        ));
    }
    Ok(())
}

/// What a grant allows.
/// `Serialize` gives the JSON `mnemo show --json` prints; the stored bytes are the event format's
/// own (see `docs/formats.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Access {
    /// `view` only.
    Read,
    /// Every command.
    ReadWrite,
}

impl Access {
    /// The name on the command line: `read` or `read-write`.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }

    /// Parses `read` or `read-write`.
    pub fn from_name(name: &str) -> Option<Access> {
        match name {
            "read" => Some(Access::Read),
            "read-write" => Some(Access::ReadWrite),
            _ => None,
        }
    }
}

/// One grant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    /// An agent id, or `*` for every agent.
    pub agent: String,
    /// The path the grant covers, with everything under it.
    pub prefix: MemPath,
    /// What it allows.
    pub access: Access,
}

impl Grant {
    /// The grant as `mnemo acl list --json` prints it (and `GET /v1/acl` answers it):
    /// `{"agent", "prefix", "access"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "agent": self.agent,
            "prefix": self.prefix.to_string(),
            "access": self.access.name(),
        })
    }
}

/// An admin command: a change to the policy, or to the agent tokens. The operator who made it is
/// the event's agent.
///
/// The event format stores it through its own types and encoder (see `docs/formats.md`), so
/// nothing here decides a stored byte; a new kind of admin event is a new variant there too.
/// `Serialize` gives only the JSON `mnemo show --json` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum AdminCommand {
    /// Give `agent` `access` on `prefix` and everything under it (replacing an earlier grant for
    /// the same agent and prefix).
    Grant {
        /// An agent id or `*`.
        agent: String,
        /// An absolute path such as `/memories/agent-2`, or `/`.
        prefix: String,
        /// What to allow.
        access: Access,
    },
    /// Remove `agent`'s grant on exactly `prefix`.
    Revoke {
        /// An agent id or `*`.
        agent: String,
        /// The prefix of the grant to remove.
        prefix: String,
    },
    /// Issue an agent token: whoever presents the token that hashes to `hash` acts as `agent`.
    /// The token itself is never logged.
    IssueToken {
        /// The token's id, unique in the store and part of the token's text (not secret).
        id: String,
        /// The agent the token acts as (an agent id, not `*`).
        agent: String,
        /// A note for the operator, such as what the token was made for (may be empty).
        label: String,
        /// `blake3` of the token's text.
        hash: EventHash,
    },
    /// Revoke the agent token `id`: from the next request on, its bearer is refused.
    RevokeToken {
        /// The token's id.
        id: String,
    },
    /// Record a redaction: the payloads (and salts) of events `seqs` were erased, for `reason`.
    /// The erased content is not in it.
    Redact {
        /// Why, in the operator's words.
        reason: String,
        /// The seqs erased, ascending.
        seqs: Vec<u64>,
        /// Of the seqs erased, those whose record keeps what the event did to the tree
        /// ([`crate::model::event::Kept`]), each with the digest of what it keeps (blake3 of a tag
        /// and the kept effect's stored bytes, as `docs/formats.md` spells it), ascending: the
        /// chain's commitment to it.
        kept: Vec<(u64, crate::model::hash::EventHash)>,
    },
    /// Set the memory store's label (its name, description, metadata, times and whether it is
    /// archived, as the memory-stores API shows them): `label` is the whole label as a JSON
    /// object, kept under [`LABEL_SETTING`]. A text that is not one is answered with an error
    /// and changes nothing. Only format 10 holds it.
    Label {
        /// The label, a JSON object of at most [`LABEL_MAX_BYTES`] bytes.
        label: String,
    },
    /// Record a revert (`mnemo revert`): the memory-tool calls that follow this event, made by
    /// the same operator and each naming this event's seq in its tool_use id (`revert-SEQ-N`),
    /// put files back as they were after event `to`, undoing the writes `seqs`. The record changes
    /// nothing itself; the calls do, and are answered and replayed like any other. Only format 12
    /// holds it.
    Revert {
        /// The event whose tree the files are put back to (for one agent's writes, the seq they
        /// are undone since).
        to: u64,
        /// What is put back, in words: `/memories/notes` (that subtree) or `agent-2's writes`.
        scope: String,
        /// The writes undone, ascending.
        seqs: Vec<u64>,
        /// How many calls carry it out, following this event.
        calls: u64,
    },
    /// Set the store setting `name` to `value` (see [`SETTINGS`]); a name or value that is not
    /// one is answered with an error and changes nothing.
    Configure {
        /// The setting, such as `delete`.
        name: String,
        /// Its new value, such as `erase`.
        value: String,
    },
}

/// The store settings an operator may set (`mnemo config set NAME VALUE`), each with its values,
/// the default first. `delete`: `keep` (the memory tool's delete keeps the history of what it
/// deletes, as every change does) or `erase` (it erases the deleted files' whole history, as a
/// redaction would).
pub const SETTINGS: &[(&str, &[&str])] = &[(DELETE_SETTING, &["keep", DELETE_ERASES])];

/// Where the index keeps a store's label ([`AdminCommand::Label`]): beside the settings, under a
/// name no setting has.
pub const LABEL_SETTING: &str = "memory-store.label";

/// The longest label, in bytes of its JSON text.
pub const LABEL_MAX_BYTES: usize = 64 * 1024;

/// When the store whose label is `label` (its JSON text, [`AdminCommand::Label`]) was archived,
/// in Unix milliseconds, if it was.
pub fn archived_ms(label: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(label)
        .ok()?
        .get("archived_ms")?
        .as_u64()
}

/// The setting that decides what the memory tool's delete does to history.
pub const DELETE_SETTING: &str = "delete";

/// The value of [`DELETE_SETTING`] under which a delete erases.
pub const DELETE_ERASES: &str = "erase";

/// The grants in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    grants: Vec<Grant>,
}

impl Policy {
    /// The policy of a store with no admin event: everyone may do everything.
    pub fn open() -> Policy {
        Policy {
            grants: vec![Grant {
                agent: ANY_AGENT.into(),
                prefix: MemPath::top(),
                access: Access::ReadWrite,
            }],
        }
    }

    /// A policy of exactly these grants.
    pub fn new(grants: Vec<Grant>) -> Policy {
        Policy { grants }
    }

    /// The grants.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    fn applies(grant: &Grant, agent: &str) -> bool {
        grant.agent == ANY_AGENT || grant.agent == agent
    }

    /// Whether `agent` may `need` `path`.
    pub fn allows(&self, agent: &str, path: &MemPath, need: Access) -> bool {
        self.grants
            .iter()
            .any(|g| Self::applies(g, agent) && g.access >= need && path.starts_with(&g.prefix))
    }

    /// Whether `agent` may see that directory `path` exists: it may read it, or a grant of its
    /// lies below it (the directory is on the way there).
    pub fn may_see(&self, agent: &str, path: &MemPath) -> bool {
        self.allows(agent, path, Access::Read)
            || self
                .grants
                .iter()
                .any(|g| Self::applies(g, agent) && g.prefix.starts_with(path))
    }
}
