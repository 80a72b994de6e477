//! Agent tokens: bearer credentials that prove which agent a request comes from.
//!
//! A token's text is `mnemo_` ‖ id ‖ `_` ‖ secret: the id is 16 lower-case hex digits (64 random
//! bits, not secret: `mnemo token list` shows it), the secret 64 hex digits (256 bits from the
//! operating system's random source). The store keeps only `blake3` of the whole text, in the
//! admin event that issued it ([`AdminCommand::IssueToken`]); revoking it is another admin event
//! ([`AdminCommand::RevokeToken`]). Both are chained and replayed by `verify` like any event, and
//! the index keeps the table of tokens (key `k` ‖ id of the path index), so checking a
//! token is one point read: its id names the record, whose hash is compared with the presented
//! token's in constant time ([`EventHash`](crate::EventHash)'s equality). The token is shown once, when it is made.
//!
//! The token's rules and its record are [`crate::model::credential`]'s, part of the pure core; this
//! module makes tokens, issues and revokes them through a client and checks a presented one.
//!
//! The operator who issued or revoked a token is the agent of that admin event: `operator` for a
//! server's admin routes and, by default, for `mnemo token` on the command line.

use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::credential::{
    TOKEN_PREFIX, already_revoked, check_label, check_token_agent, unknown_id,
};
pub use crate::model::credential::{TokenRecord, check_id, hash_of, id_of};
use crate::model::event::Event;
use crate::model::policy::AdminCommand;
use crate::model::protocol::{Revocation, TokenInfo};
use crate::model::time::utc;
use crate::store::log::Store;
use crate::store::writer::Receipt;

const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

/// `n` bytes from the operating system's random source, as lower-case hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("the OS random source failed ({e})")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A token just made: its text (shown once) and the command that issues it.
pub struct NewToken {
    id: String,
    text: String,
}

impl NewToken {
    /// A fresh token from the OS random source.
    pub fn generate() -> std::io::Result<NewToken> {
        let id = random_hex(ID_BYTES)?;
        let secret = random_hex(SECRET_BYTES)?;
        let text = format!("{TOKEN_PREFIX}{id}_{secret}");
        Ok(NewToken { id, text })
    }

    #[cfg(any(test, feature = "serve", feature = "testing"))]
    /// The token's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The token's text, as a client sends it after `Bearer `.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The admin command that issues this token for `agent`.
    pub fn command(&self, agent: &str, label: &str) -> AdminCommand {
        AdminCommand::IssueToken {
            id: self.id.clone(),
            agent: agent.to_string(),
            label: label.to_string(),
            hash: hash_of(&self.text),
        }
    }
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken").field("id", &self.id).finish()
    }
}

/// What a presented token proves.
#[cfg_attr(
    not(feature = "serve"),
    allow(dead_code, reason = "the server's; tests reach it")
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A live token of this agent.
    Agent(String),
    /// Not a token this store issued.
    Unknown,
    /// A token this store issued and then revoked.
    Revoked,
}

/// Checks a presented token against the token table: `lookup` reads the record of an id (one
/// point read). The hashes are compared in constant time.
#[cfg_attr(
    not(feature = "serve"),
    allow(dead_code, reason = "the server's; tests reach it")
)]
pub fn authenticate(
    presented: &str,
    lookup: impl FnOnce(&str) -> Result<Option<TokenRecord>>,
) -> Result<Verdict> {
    let Some(id) = id_of(presented) else {
        return Ok(Verdict::Unknown);
    };
    let Some(record) = lookup(id)? else {
        return Ok(Verdict::Unknown);
    };
    if record.hash != hash_of(presented) {
        return Ok(Verdict::Unknown);
    }
    Ok(match record.revoked {
        Some(_) => Verdict::Revoked,
        None => Verdict::Agent(record.agent),
    })
}

/// A token issued through [`issue`]: its text (to hand to the agent, once) and the receipt of the
/// admin event.
#[derive(Debug)]
pub struct Issued {
    /// The token.
    pub token: NewToken,
    /// The admin event's receipt; `is_error` when the store refused it (its text says why).
    pub receipt: Receipt,
}

/// Issues a new token for `agent`, recorded as an admin event of `operator`'s agent. An agent id
/// or label that is not valid is an [`Error::InvalidArgument`], and nothing is recorded.
pub fn issue(operator: &MnemoClient, agent: &str, label: &str) -> Result<Issued> {
    check_token_agent(agent)
        .and_then(|()| check_label(label))
        .map_err(Error::InvalidArgument)?;
    let token =
        NewToken::generate().map_err(|e| Error::io("the OS random source, for a new token", e))?;
    let receipt = operator.admin(token.command(agent, label))?;
    Ok(Issued { token, receipt })
}

/// Revokes token `id`, recorded as an admin event of `operator`'s agent. An id that names no
/// token, or one already revoked, is an [`Error::InvalidArgument`] that says so, and nothing is
/// recorded.
pub fn revoke(operator: &MnemoClient, id: &str) -> Result<Receipt> {
    check_id(id).map_err(Error::InvalidArgument)?;
    match operator.token(id)? {
        None => Err(Error::InvalidArgument(unknown_id(id))),
        Some(TokenRecord {
            revoked: Some(revoked),
            ..
        }) => Err(Error::InvalidArgument(already_revoked(id, &revoked))),
        Some(_) => operator.admin(AdminCommand::RevokeToken { id: id.to_string() }),
    }
}

/// A token as `mnemo token list` shows it: its record and when it was issued. Never its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The record.
    pub record: TokenRecord,
    /// The issuing event's time, milliseconds since the Unix epoch.
    pub issued_ms: u64,
}

impl Listed {
    /// One line of `mnemo token list --json` (and of `GET /v1/tokens`): id, agent, label, issued
    /// seq, time and operator, revoked (`null` or its seq and operator). No hash, no token.
    pub fn to_protocol(&self) -> TokenInfo {
        let r = &self.record;
        TokenInfo {
            agent: r.agent.clone(),
            id: r.id.clone(),
            issued_at: utc(self.issued_ms),
            issued_by: r.issued_by.clone(),
            issued_seq: r.issued.0,
            label: r.label.clone(),
            revoked: r.revoked.as_ref().map(|v| Revocation {
                by: v.by.clone(),
                seq: v.seq.0,
            }),
        }
    }
}

/// The tokens of the table `records`, with the time of each one's issuing event read from the
/// log of `store`.
pub fn listed(store: &Store, records: Vec<TokenRecord>) -> Result<Vec<Listed>> {
    records
        .into_iter()
        .map(|record| {
            let issued_ms = match store.get(record.issued)? {
                Some(bytes) => Event::decode(&bytes)?.header.time_ms,
                None => {
                    return Err(Error::corrupt(format!(
                        "token {} names event {} as its issue, which is not in the log; run `mnemo verify`",
                        record.id, record.issued
                    )));
                }
            };
            Ok(Listed { record, issued_ms })
        })
        .collect()
}

impl MnemoClient {
    /// Every agent token of the store, revoked ones included, as `mnemo token list` shows them
    /// (never a token's hash or text).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>> {
        self.backend().tokens(self)
    }

    /// Issues a new token for `agent` with `label`, recorded as an admin event of this
    /// client's agent (the operator): the receipt, and the token's text, shown this once (`None`
    /// when the store refused it, which the receipt says). An agent id or label that is not
    /// valid is an [`Error::InvalidArgument`], and nothing is recorded.
    pub fn issue_token(&self, agent: &str, label: &str) -> Result<(Receipt, Option<String>)> {
        self.backend().issue_token(self, agent, label)
    }

    /// Revokes token `id`, recorded as an admin event of this client's agent. An id that is
    /// not one, names no token, or names one already revoked is an [`Error::InvalidArgument`]
    /// that says so, and nothing is recorded.
    pub fn revoke_token(&self, id: &str) -> Result<Receipt> {
        self.backend().revoke_token(self, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::credential::Revocation;
    use crate::model::event::Seq;

    fn record(token: &NewToken, revoked: bool) -> TokenRecord {
        TokenRecord {
            id: token.id().to_string(),
            agent: "planner".into(),
            label: String::new(),
            hash: hash_of(token.text()),
            issued: Seq(3),
            issued_by: crate::model::credential::OPERATOR.into(),
            revoked: revoked.then(|| Revocation {
                seq: Seq(4),
                by: crate::model::credential::OPERATOR.into(),
            }),
        }
    }

    #[test]
    fn a_token_is_its_id_and_256_secret_bits_and_only_its_own_text_proves_it() {
        let token = NewToken::generate().expect("token");
        assert_eq!(token.text().len(), TOKEN_PREFIX.len() + 16 + 1 + 64);
        assert_eq!(id_of(token.text()), Some(token.id()));
        assert!(!format!("{token:?}").contains(token.text()));
        let other = NewToken::generate().expect("token");
        assert_ne!(token.id(), other.id());
        let live = record(&token, false);
        let find = |id: &str| Ok((id == live.id).then(|| live.clone()));
        assert_eq!(
            authenticate(token.text(), find).expect("check"),
            Verdict::Agent("planner".into())
        );
        // Same id, another secret: unknown.
        let forged = format!("{TOKEN_PREFIX}{}_{}", token.id(), "0".repeat(64));
        assert_eq!(
            authenticate(&forged, find).expect("check"),
            Verdict::Unknown
        );
        for junk in [
            "",
            "mnemo_",
            "mnemo__x",
            "mnemo_ab",
            "Bearer x",
            other.text(),
        ] {
            assert_eq!(authenticate(junk, find).expect("check"), Verdict::Unknown);
        }
        let gone = record(&token, true);
        assert_eq!(
            authenticate(token.text(), |_| Ok(Some(gone.clone()))).expect("check"),
            Verdict::Revoked
        );
    }
}
