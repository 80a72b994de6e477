//! The admin commands' answers: grants and revokes of access, agent tokens issued and revoked,
//! settings configured, events redacted. An operator's change to who may do what, answered as
//! the memory commands are: a text and the change to apply.

use super::Answer;
use crate::model::credential::{
    already_revoked, check_id_under, check_label, check_token_agent_under, unknown_id,
};
use crate::model::hash::EventHash;
use crate::model::paths::MemPath;
use crate::model::policy::{
    ANY_AGENT, Access, AdminCommand, DELETE_ERASES, DELETE_SETTING, LABEL_MAX_BYTES, LABEL_SETTING,
    SETTINGS, check_agent_id_under,
};
use crate::model::semantics_version::Semantics;
use crate::model::seq::listed;
use crate::model::tool::tree::{Change, TokenIssue, Tree};

/// Answers an admin command made by operator `by`.
pub(super) fn admin<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    command: &AdminCommand,
    semantics: Semantics,
) -> Result<Answer, E> {
    match command {
        AdminCommand::Grant {
            agent,
            prefix,
            access,
        } => acl(tree, agent, prefix, Some(*access), semantics),
        AdminCommand::Revoke { agent, prefix } => acl(tree, agent, prefix, None, semantics),
        AdminCommand::IssueToken {
            id,
            agent,
            label,
            hash,
        } => issue_token(tree, by, id, agent, label, *hash, semantics),
        AdminCommand::RevokeToken { id } => revoke_token(tree, by, id, semantics),
        AdminCommand::Redact { reason, seqs, .. } => Ok(redacted(reason, seqs)),
        AdminCommand::Configure { name, value } => Ok(configured(name, value, semantics)),
        AdminCommand::Label { label } => Ok(labelled(label)),
        AdminCommand::Revert {
            to,
            scope,
            seqs,
            calls,
        } => Ok(reverting(*to, scope, seqs, *calls)),
    }
}

/// Answers a revert's record: what it puts back, to which seq, the writes it undoes and how many
/// calls follow. It changes nothing itself.
fn reverting(to: u64, scope: &str, seqs: &[u64], calls: u64) -> Answer {
    let n = seqs.len();
    let list = listed(seqs);
    let plural = if n == 1 { "" } else { "s" };
    let calls = if calls == 1 {
        "the 1 call that follows".to_string()
    } else {
        format!("the {calls} calls that follow")
    };
    Answer::ok(
        format!("Reverting {scope} to seq {to}: undoing {n} event{plural} ({list}) by {calls}"),
        None,
    )
}

/// Answers the setting of the memory store's label: a JSON object of at most
/// [`LABEL_MAX_BYTES`] bytes, kept whole.
fn labelled(label: &str) -> Answer {
    let object = (label.len() <= LABEL_MAX_BYTES)
        .then(|| serde_json::from_str::<serde_json::Value>(label).ok())
        .flatten()
        .filter(serde_json::Value::is_object);
    let Some(object) = object else {
        return Answer::err(format!(
            "Error: a memory store's label is a JSON object of at most {LABEL_MAX_BYTES} bytes, such as {{\"name\": \"notes\"}}"
        ));
    };
    let name = object
        .get("name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let archived = if object.get("archived_ms").is_some_and(|v| !v.is_null()) {
        ", archived: its memories can be read and deleted, not created or changed"
    } else {
        ""
    };
    Answer::ok(
        format!("Labelled the memory store {name:?}{archived}"),
        Some(Change::Configure {
            name: LABEL_SETTING.to_string(),
            value: label.to_string(),
        }),
    )
}

/// Answers the setting of store setting `name` to `value`.
fn configured(name: &str, value: &str, semantics: Semantics) -> Answer {
    let known = SETTINGS
        .iter()
        .map(|(n, values)| format!("{n} ({})", values.join(" or ")))
        .collect::<Vec<_>>()
        .join(", ");
    let Some((_, values)) = SETTINGS.iter().find(|(n, _)| *n == name) else {
        return Answer::err(format!(
            "Error: there is no setting {}; the settings are {known}",
            semantics.quote(name)
        ));
    };
    if !values.contains(&value) {
        return Answer::err(format!(
            "Error: {} is not a value of the setting {name}; give {}",
            semantics.quote(value),
            values.join(" or ")
        ));
    }
    let what = match (name, value) {
        (DELETE_SETTING, DELETE_ERASES) => {
            ": the memory tool's delete now erases the files it deletes, with their whole history"
        }
        (DELETE_SETTING, _) => {
            ": the memory tool's delete keeps the history of the files it deletes"
        }
        _ => "",
    };
    Answer::ok(
        format!("Set {name} to {value}{what}"),
        Some(Change::Configure {
            name: name.to_string(),
            value: value.to_string(),
        }),
    )
}

/// Answers the record of a redaction of `seqs` for `reason`: it changes nothing in the tree (the
/// events it names were erased from the log, and every replay skips them).
fn redacted(reason: &str, seqs: &[u64]) -> Answer {
    let n = seqs.len();
    let list = listed(seqs);
    let plural = if n == 1 { "" } else { "s" };
    Answer::ok(
        format!("Redacted {n} event{plural} ({list}): {reason}"),
        None,
    )
}

/// Answers a grant of `access` to `agent` on `prefix`, or with `None` the revoke of that grant.
fn acl<E>(
    tree: &dyn Tree<Error = E>,
    agent: &str,
    prefix: &str,
    access: Option<Access>,
    semantics: Semantics,
) -> Result<Answer, E> {
    if agent != ANY_AGENT {
        if let Err(msg) = check_agent_id_under(agent, semantics) {
            return Ok(Answer::err(format!(
                "Error: {msg}, or \"*\" for every agent"
            )));
        }
    }
    let prefix = match MemPath::absolute_under(prefix, semantics) {
        Ok(p) => p,
        Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
    };
    let who = if agent == ANY_AGENT {
        "every agent".to_string()
    } else {
        format!("agent {agent}")
    };
    let agent = agent.to_string();
    Ok(match access {
        Some(access) => Answer::ok(
            format!("Granted {} on {prefix} to {who}", access.name()),
            Some(Change::Grant {
                agent,
                prefix,
                access,
            }),
        ),
        None => {
            if !tree
                .policy()?
                .grants()
                .iter()
                .any(|g| g.agent == agent && g.prefix == prefix)
            {
                return Ok(Answer::err(format!(
                    "Error: {who} has no grant on {prefix}; `mnemo acl list` shows the grants in force"
                )));
            }
            Answer::ok(
                format!("Revoked the grant on {prefix} from {who}"),
                Some(Change::Revoke { agent, prefix }),
            )
        }
    })
}

/// Answers the issue of agent token `id` for `agent` by operator `by`.
fn issue_token<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    id: &str,
    agent: &str,
    label: &str,
    hash: EventHash,
    semantics: Semantics,
) -> Result<Answer, E> {
    let checked = check_id_under(id, semantics)
        .and_then(|()| check_token_agent_under(agent, semantics))
        .and_then(|()| check_label(label));
    if let Err(msg) = checked {
        return Ok(Answer::err(format!("Error: {msg}")));
    }
    if let Some(taken) = tree.token(id)? {
        return Ok(Answer::err(format!(
            "Error: token id {id} is already taken (issued at event {}); issue the token again, which picks a fresh id",
            taken.issued
        )));
    }
    Ok(Answer::ok(
        format!("Issued token {id} to agent {agent}"),
        Some(Change::IssueToken(Box::new(TokenIssue {
            id: id.to_string(),
            agent: agent.to_string(),
            label: label.to_string(),
            hash,
            by: by.to_string(),
        }))),
    ))
}

/// Answers the revocation of agent token `id` by operator `by`.
fn revoke_token<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    id: &str,
    semantics: Semantics,
) -> Result<Answer, E> {
    if let Err(msg) = check_id_under(id, semantics) {
        return Ok(Answer::err(format!("Error: {msg}")));
    }
    let Some(token) = tree.token(id)? else {
        return Ok(Answer::err(format!("Error: {}", unknown_id(id))));
    };
    if let Some(revoked) = token.revoked {
        return Ok(Answer::err(format!(
            "Error: {}",
            already_revoked(id, &revoked)
        )));
    }
    Ok(Answer::ok(
        format!(
            "Revoked token {id} of agent {}; its bearer is refused from the next request on",
            token.agent
        ),
        Some(Change::RevokeToken {
            id: id.to_string(),
            by: by.to_string(),
        }),
    ))
}
