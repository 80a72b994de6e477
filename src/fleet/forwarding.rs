//! The proof a forwarded request carries that a node of the fleet forwarded it.
//!
//! A node answers a forwarded request itself (a request is forwarded once), so the header that
//! marks one must not be one a client can send: a client that did would keep its request from
//! being routed (answered 503 by a node that does not hold the store). The header's value is the
//! forwarding node's id and a keyed BLAKE3 hash of that id, the method and the target, under a
//! key derived from the fleet's operator token, which every node has and no agent does. A value
//! that is no node's proof is dropped by the node it reaches, which then routes the request as
//! any other.

/// What the key is derived for (BLAKE3's context string).
const CONTEXT: &str = "mnemo 2026-12 fleet forwarded-by";

/// The key forwarded requests are proved with, from the fleet's operator token.
pub fn key(operator_token: &str) -> [u8; 32] {
    blake3::derive_key(CONTEXT, operator_token.as_bytes())
}

fn mac(key: &[u8; 32], node: &str, method: &str, target: &str) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new_keyed(key);
    for part in [node, method, target] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize()
}

/// The header value with which node `node` forwards the request `method target` (the target
/// being the path and query).
pub fn sign(key: &[u8; 32], node: &str, method: &str, target: &str) -> String {
    format!("{node} {}", mac(key, node, method, target).to_hex())
}

/// The node that forwarded the request `method target`, if `value` is that node's proof for it.
pub fn check<'v>(key: &[u8; 32], value: &'v str, method: &str, target: &str) -> Option<&'v str> {
    let (node, hex) = value.rsplit_once(' ')?;
    let given = blake3::Hash::from_hex(hex).ok()?;
    // `Hash`'s equality is constant-time.
    (given == mac(key, node, method, target)).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_holder_of_the_key_proves_a_request_and_only_that_request() {
        let k = key("0123456789abcdef0123456789abcdef");
        let value = sign(&k, "a", "POST", "/v1/stores/notes/memory");
        assert_eq!(
            check(&k, &value, "POST", "/v1/stores/notes/memory"),
            Some("a")
        );
        assert_eq!(check(&k, &value, "GET", "/v1/stores/notes/memory"), None);
        assert_eq!(check(&k, &value, "POST", "/v1/stores/other/memory"), None);
        let other = key("fedcba9876543210fedcba9876543210");
        assert_eq!(
            check(&other, &value, "POST", "/v1/stores/notes/memory"),
            None
        );
        let forged = value.replacen('a', "b", 1);
        assert_eq!(check(&k, &forged, "POST", "/v1/stores/notes/memory"), None);
        for junk in ["", "a", "test", "a zz", "a  "] {
            assert_eq!(check(&k, junk, "POST", "/v1/stores/notes/memory"), None);
        }
    }
}
