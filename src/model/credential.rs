//! Agent tokens' rules: the shape of a token's text, the checks on its id, label and agent, the
//! record the token table keeps of it, and the messages a refused issue or revoke is told. Part
//! of the pure core (the tool answers token admin events with these rules); making, issuing,
//! revoking and checking tokens against a store is [`crate::client::token`]'s.

use serde::{Deserialize, Serialize};

use crate::model::hash::EventHash;
use crate::model::policy::{ANY_AGENT, check_agent_id_under};
use crate::model::semantics_version::Semantics;
use crate::model::seq::Seq;

/// What every agent token's text starts with.
pub const TOKEN_PREFIX: &str = "mnemo_";

/// The identity admin events made with the operator credential are recorded under, unless the
/// command line names another with `--as`.
pub const OPERATOR: &str = "operator";

/// Longest token id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 64;

/// Longest label accepted, in bytes.
pub const MAX_LABEL_BYTES: usize = 256;

/// `blake3` of a token's text: what the store keeps of it.
pub fn hash_of(token: &str) -> EventHash {
    EventHash::of(token.as_bytes())
}

/// The id in a token's text, if it has the shape of an agent token.
#[cfg_attr(
    not(feature = "serve"),
    allow(dead_code, reason = "the server's; tests reach it")
)]
pub fn id_of(token: &str) -> Option<&str> {
    let (id, secret) = token.strip_prefix(TOKEN_PREFIX)?.split_once('_')?;
    (check_id(id).is_ok() && !secret.is_empty()).then_some(id)
}

/// Checks a token id: 1 to `MAX_ID_BYTES` ASCII letters, digits or `-`.
pub fn check_id(id: &str) -> std::result::Result<(), String> {
    check_id_under(id, Semantics::CURRENT)
}

/// [`check_id`], with the error text of `semantics` (an answer's).
pub fn check_id_under(id: &str, semantics: Semantics) -> std::result::Result<(), String> {
    if id.is_empty()
        || id.len() > MAX_ID_BYTES
        || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(format!(
            "token id {} is not valid; ids are 1 to {MAX_ID_BYTES} ASCII letters, digits or '-', as `mnemo token list` shows them",
            semantics.quote(id)
        ));
    }
    Ok(())
}

/// Checks a label: at most [`MAX_LABEL_BYTES`] bytes of printable text (empty is fine).
pub fn check_label(label: &str) -> std::result::Result<(), String> {
    if label.len() > MAX_LABEL_BYTES || label.chars().any(char::is_control) {
        return Err(format!(
            "the label is not valid; use at most {MAX_LABEL_BYTES} bytes of printable text, such as \"ci runner\""
        ));
    }
    Ok(())
}

/// Checks the agent a new token is for: an agent id, not `*`, and not [`OPERATOR`], the name the
/// operator's own admin events are recorded under (a token of that name would make an agent's
/// events look like the operator's in the log). Replay checks only what
/// [`check_token_agent_under`] checks, so a log that issued such a token still verifies.
pub fn check_token_agent(agent: &str) -> std::result::Result<(), String> {
    if agent == OPERATOR {
        return Err(format!(
            "a token acts as an agent, and \"{OPERATOR}\" is the name the operator's own admin events are recorded under; name the agent the token is for, such as \"planner\""
        ));
    }
    check_token_agent_under(agent, Semantics::CURRENT)
}

/// [`check_token_agent`], with the error text of `semantics` (an answer's).
pub fn check_token_agent_under(
    agent: &str,
    semantics: Semantics,
) -> std::result::Result<(), String> {
    if agent == ANY_AGENT {
        return Err(
            "a token acts as one agent, and \"*\" names every agent; name one agent, such as \"planner\""
                .into(),
        );
    }
    check_agent_id_under(agent, semantics)
}

/// A token's entry in the index's token table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The token's id.
    pub id: String,
    /// The agent it acts as.
    pub agent: String,
    /// The operator's note.
    pub label: String,
    /// `blake3` of the token's text.
    pub hash: EventHash,
    /// The seq of the event that issued it.
    pub issued: Seq,
    /// The operator who issued it (that event's agent).
    pub issued_by: String,
    /// When it was revoked, if it was.
    pub revoked: Option<Revocation>,
}

/// When and by whom a token was revoked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The seq of the event that revoked it.
    pub seq: Seq,
    /// The operator who revoked it.
    pub by: String,
}

/// What a revoke of an id that names no token is told.
pub fn unknown_id(id: &str) -> String {
    format!("no token has id {id}; `mnemo token list` shows the tokens and their ids")
}

/// What a revoke of a token already revoked is told.
pub fn already_revoked(id: &str, revoked: &Revocation) -> String {
    format!(
        "token {id} was already revoked (event {}, by {}); nothing to do",
        revoked.seq, revoked.by
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_labels_and_agents_are_checked() {
        assert!(check_id("0123abcd").is_ok());
        for bad in ["", "a_b", "a b", &"a".repeat(65), "é"] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_label("").is_ok());
        assert!(check_label("ci\nrunner").is_err());
        assert!(check_label(&"x".repeat(257)).is_err());
        assert!(check_token_agent("*").is_err());
        assert!(check_token_agent("").is_err());
        assert!(check_token_agent("planner").is_ok());
    }

    #[test]
    fn a_new_token_is_never_for_the_operator_but_an_old_one_still_replays() {
        let refused = check_token_agent(OPERATOR).expect_err("refused");
        assert!(refused.contains("planner"), "{refused}");
        assert_eq!(
            check_token_agent_under(OPERATOR, Semantics::CURRENT),
            Ok(())
        );
    }
}
