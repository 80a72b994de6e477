//! The admin state the index holds: grants (`P`, `p`: the policy once it is explicit), agent
//! tokens (`k`) and settings (`s`), their keys and the bytes of their values.

use super::Projection;
use crate::error::{Error, Result};
use crate::model::credential::TokenRecord;
use crate::model::paths::MemPath;
use crate::model::policy::{Access, Grant, Policy};
use crate::store::kv::{KvRead, KvWrite};

/// Present once the policy is explicit.
pub(super) const POLICY_KEY: &[u8] = b"P";
/// The prefix of the token records.
pub(super) const TOKEN_PREFIX: &[u8] = b"k";

/// The `s` key of setting `name`.
pub(super) fn setting_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(b's');
    k.extend_from_slice(name.as_bytes());
    k
}

/// The `k` key of the token with id `id`.
pub(super) fn token_key(id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + id.len());
    k.extend_from_slice(TOKEN_PREFIX);
    k.extend_from_slice(id.as_bytes());
    k
}

/// A token record from its canonical bytes.
pub(super) fn decode_token(value: &[u8]) -> Result<TokenRecord> {
    crate::model::codec::decode(value, "path index token record")
}

/// The `p` key of `agent`'s grant on `prefix`.
pub(super) fn grant_key(agent: &str, prefix: &MemPath) -> Vec<u8> {
    let prefix = prefix.to_string();
    let mut k = Vec::with_capacity(2 + agent.len() + prefix.len());
    k.push(b'p');
    k.extend_from_slice(agent.as_bytes());
    k.push(0);
    k.extend_from_slice(prefix.as_bytes());
    k
}

/// A grant from its `p` key and its value.
pub(super) fn decode_grant(key: &[u8], value: &[u8]) -> Result<Grant> {
    let bad = || Error::corrupt("path index grant entry is malformed");
    let body = key.get(1..).ok_or_else(bad)?;
    let split = body.iter().position(|b| *b == 0).ok_or_else(bad)?;
    let agent = String::from_utf8(body[..split].to_vec()).map_err(|_| bad())?;
    let prefix = std::str::from_utf8(&body[split + 1..]).map_err(|_| bad())?;
    let access = match value {
        b"r" => Access::Read,
        b"w" => Access::ReadWrite,
        _ => return Err(bad()),
    };
    Ok(Grant {
        agent,
        prefix: MemPath::absolute(prefix).map_err(|_| bad())?,
        access,
    })
}

/// The value of a grant of `access`: `r` or `w`.
pub(super) fn encode_access(access: Access) -> Vec<u8> {
    match access {
        Access::Read => b"r".to_vec(),
        Access::ReadWrite => b"w".to_vec(),
    }
}

impl<K: KvRead> Projection<K> {
    /// The agent tokens ever issued, revoked or not, in id order.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>> {
        self.kv
            .scan_prefix(TOKEN_PREFIX, usize::MAX)?
            .iter()
            .map(|(_, v)| decode_token(v))
            .collect()
    }
}

impl<K: KvWrite> Projection<K> {
    /// Makes the implicit open policy explicit before the first admin change.
    pub(super) fn explicit_policy(&mut self) -> Result<()> {
        if self.kv.get(POLICY_KEY)?.is_none() {
            for grant in Policy::open().grants() {
                self.kv.insert(
                    grant_key(&grant.agent, &grant.prefix),
                    encode_access(grant.access),
                );
            }
            self.kv.insert(POLICY_KEY.to_vec(), Vec::new());
        }
        Ok(())
    }
}
