//! A fleet's viewer logins, kept in its bucket so that every node knows them: the viewer's
//! sessions and its one-time login links (the viewer itself is `serve::viewer`; this module
//! knows only the objects).
//!
//! - `viewer/sessions/KEY`: one session, made create-only at its login and never replaced; its
//!   body ([`Session`]) is what a node needs to serve it (who it is, the token the gate is given,
//!   its CSRF token, when it expires). Removed at its logout, by whoever finds it expired, and by
//!   the [`sweep`].
//! - `viewer/links/KEY`: a login link not yet expired (its body: when it expires), made
//!   create-only by the node that minted it.
//! - `viewer/used/KEY`: the link `KEY` redeemed. Redeeming a link is creating this marker, so
//!   of any number of nodes racing to redeem one secret exactly one logs in.
//!
//! `KEY` is the hex BLAKE3 hash of the session id or the link's secret (each 256 random bits):
//! a listing of the bucket, or a log of its requests, names no cookie and no secret. A session's
//! body does hold its token, as `operator/token` holds the fleet's: whoever reads the bucket could
//! already act as the operator, and learns nothing more here.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::bucket::Bucket;
use crate::error::{Error, Result};

/// Where the sessions are.
pub const SESSIONS: &str = "viewer/sessions";

/// Where the unexpired login links are.
pub const LINKS: &str = "viewer/links";

/// Where the markers of redeemed links are.
pub const USED: &str = "viewer/used";

/// The most bytes of a session's object: a token, a CSRF token, a store's name and a few words.
const SESSION_MAX: u64 = 16 * 1024;

/// The most bytes of a link's object.
const LINK_MAX: u64 = 1024;

/// How far apart the clocks of the nodes and the object store may be for the [`sweep`], which
/// judges objects by their stamps against the sweeping node's clock: an object is swept only
/// this long after it would have expired.
pub const SWEEP_SLACK_MS: u64 = 3600 * 1000;

/// The name of a session or link: the hash of its id or secret.
pub type Key = [u8; 32];

/// The key of the session id or link secret `secret`.
pub fn key(secret: &str) -> Key {
    *blake3::hash(secret.as_bytes()).as_bytes()
}

fn hex(key: &Key) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn session_name(key: &Key) -> String {
    format!("{SESSIONS}/{}", hex(key))
}

/// A session as its object holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// The agent the session's token proves, or none for the operator.
    pub agent: Option<String>,
    /// On a data server, the store an agent's token was issued by.
    pub store: Option<String>,
    /// The token the gate proves the session's requests with.
    pub token: String,
    /// The token each of the session's requests must carry as well.
    pub csrf: String,
    /// When the session ends, in Unix milliseconds by the clock of the node that opened it.
    pub expires_ms: u64,
}

/// Keeps the session `key` in `bucket` (see [`make`]).
pub fn keep(bucket: &Bucket, key: &Key, session: &Session) -> Result<()> {
    let bytes = serde_json::to_vec(session)
        .map_err(|e| Error::damaged(format!("a viewer session could not be written ({e})")))?;
    make(bucket, &session_name(key), bytes)
}

/// Makes the object `name` holding `bytes`: an error if it cannot, or if the name was taken
/// (which names hashed from 256 random bits never meet by chance).
fn make(bucket: &Bucket, name: &str, bytes: Vec<u8>) -> Result<()> {
    if bucket.create(name, bytes)? {
        Ok(())
    } else {
        Err(Error::damaged(format!(
            "the fleet's {name} was taken before this node made it"
        )))
    }
}

/// The session `key` if the bucket holds a live one at `now_ms` (Unix milliseconds) that ends
/// within `longest_ms` of it. An object that is not such a session (too large, not a regular file
/// of a `file://` bucket, not a session's JSON, ending too late) is none; one expired is none,
/// and removed. An error only when the bucket could not be read.
pub fn find(bucket: &Bucket, key: &Key, now_ms: u64, longest_ms: u64) -> Result<Option<Session>> {
    let name = session_name(key);
    let bytes = match bucket.get(&name, SESSION_MAX) {
        Ok(Some(bytes)) => bytes,
        Ok(None) | Err(Error::ReplicaDamaged { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(session) = serde_json::from_slice::<Session>(&bytes) else {
        return Ok(None);
    };
    if session.expires_ms <= now_ms {
        // Whoever finds a session expired removes it (the sweep would, later).
        let _ = bucket.remove(&name);
        return Ok(None);
    }
    if session.expires_ms > now_ms.saturating_add(longest_ms) {
        return Ok(None);
    }
    Ok(Some(session))
}

/// Ends the session `key`: its object removed, so no node serves it past its next reading.
pub fn end(bucket: &Bucket, key: &Key) -> Result<()> {
    bucket.remove(&session_name(key))
}

/// A login link's object.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Link {
    /// When it expires, in Unix milliseconds by the clock of the node that minted it.
    expires_ms: u64,
}

/// Keeps the login link `key`, usable until `expires_ms` (Unix milliseconds).
pub fn mint(bucket: &Bucket, key: &Key, expires_ms: u64) -> Result<()> {
    let bytes = serde_json::to_vec(&Link { expires_ms })
        .map_err(|e| Error::damaged(format!("a login link could not be written ({e})")))?;
    make(bucket, &format!("{LINKS}/{}", hex(key)), bytes)
}

/// Whether the link `key` is kept and unexpired at `now_ms`, ending within `longest_ms` of it.
fn link_live(bucket: &Bucket, key: &Key, now_ms: u64, longest_ms: u64) -> Result<bool> {
    let bytes = match bucket.get(&format!("{LINKS}/{}", hex(key)), LINK_MAX) {
        Ok(Some(bytes)) => bytes,
        Ok(None) | Err(Error::ReplicaDamaged { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    Ok(serde_json::from_slice::<Link>(&bytes)
        .is_ok_and(|link| link.expires_ms > now_ms && link.expires_ms <= now_ms + longest_ms))
}

/// Redeems the link `key` at `now_ms`: true for exactly one call in the whole fleet, if the
/// link is kept and unexpired (and ends within `longest_ms`). The one that makes its used
/// marker redeems it; it then reads the link again, so that a link swept meanwhile (the sweep
/// removes a link before its marker) is not redeemed a second time through a marker made after
/// the first one was swept.
pub fn redeem(bucket: &Bucket, key: &Key, now_ms: u64, longest_ms: u64) -> Result<bool> {
    // Read first: a secret that names no link makes no marker.
    if !link_live(bucket, key, now_ms, longest_ms)? {
        return Ok(false);
    }
    let marker = serde_json::json!({ "redeemed_ms": now_ms }).to_string();
    if !bucket.create(&format!("{USED}/{}", hex(key)), marker.into_bytes())? {
        return Ok(false);
    }
    link_live(
        bucket,
        key,
        crate::model::time::now_ms().max(now_ms),
        longest_ms,
    )
}

/// Removes what has expired, judged by each object's stamp (when the object store made it)
/// against `now_ms` with [`SWEEP_SLACK_MS`] to spare: sessions made over `session_ms` before,
/// links made over `link_ms` before, and then the used markers of links no longer kept and as
/// old. At most `most` objects are removed in one call; how many were.
pub fn sweep(
    bucket: &Bucket,
    now_ms: u64,
    session_ms: u64,
    link_ms: u64,
    most: usize,
) -> Result<usize> {
    let past = |stamp_ms: i64, life_ms: u64| {
        let made = u64::try_from(stamp_ms).unwrap_or(0);
        made.saturating_add(life_ms).saturating_add(SWEEP_SLACK_MS) < now_ms
    };
    let mut removed = 0;
    for (dir, life_ms) in [(SESSIONS, session_ms), (LINKS, link_ms)] {
        for listed in bucket.list(dir)? {
            if removed >= most {
                return Ok(removed);
            }
            if past(listed.stamp_ms, life_ms) {
                bucket.remove(&listed.name)?;
                removed += 1;
            }
        }
    }
    // A marker goes only once its link is gone: while the link is kept, the marker is what
    // says it was redeemed.
    let kept: BTreeSet<String> = bucket
        .list(LINKS)?
        .into_iter()
        .filter_map(|l| l.name.rsplit('/').next().map(str::to_string))
        .collect();
    for listed in bucket.list(USED)? {
        if removed >= most {
            break;
        }
        let Some(key) = listed.name.rsplit('/').next() else {
            continue;
        };
        if !kept.contains(key) && past(listed.stamp_ms, link_ms) {
            bucket.remove(&listed.name)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3600 * 1000;

    fn session(expires_ms: u64) -> Session {
        Session {
            agent: Some("planner".into()),
            store: Some("notes".into()),
            token: "mnemo_t".into(),
            csrf: "c".into(),
            expires_ms,
        }
    }

    #[test]
    fn a_session_kept_is_found_until_it_expires_or_ends() {
        let bucket = Bucket::in_memory().expect("bucket");
        let now = crate::model::time::now_ms();
        let (one, two) = (key("one"), key("two"));
        keep(&bucket, &one, &session(now + HOUR)).expect("kept");
        assert!(keep(&bucket, &one, &session(now + HOUR)).is_err());
        assert_eq!(
            find(&bucket, &one, now, 12 * HOUR).expect("read"),
            Some(session(now + HOUR))
        );
        // Ending past the longest a session lasts: not a session this fleet made.
        assert_eq!(find(&bucket, &one, now, HOUR / 2).expect("read"), None);
        assert_eq!(find(&bucket, &two, now, 12 * HOUR).expect("read"), None);
        // Expired: none, and removed.
        assert_eq!(
            find(&bucket, &one, now + 2 * HOUR, 12 * HOUR).expect("read"),
            None
        );
        assert_eq!(
            bucket.get(&session_name(&one), SESSION_MAX).expect("get"),
            None
        );
        keep(&bucket, &two, &session(now + HOUR)).expect("kept");
        end(&bucket, &two).expect("ended");
        assert_eq!(find(&bucket, &two, now, 12 * HOUR).expect("read"), None);
    }

    #[test]
    fn an_object_that_is_no_session_is_none() {
        let bucket = Bucket::in_memory().expect("bucket");
        let now = crate::model::time::now_ms();
        for (i, junk) in [
            b"".to_vec(),
            b"{}".to_vec(),
            b"[1,2]".to_vec(),
            br#"{"agent":null,"store":null,"token":"t","csrf":"c","expires_ms":-1}"#.to_vec(),
            vec![b' '; 16 * 1024 + 1],
        ]
        .into_iter()
        .enumerate()
        {
            let k = key(&i.to_string());
            assert!(bucket.create(&session_name(&k), junk).expect("planted"));
            assert_eq!(
                find(&bucket, &k, now, 12 * HOUR).expect("read"),
                None,
                "{i}"
            );
        }
    }

    #[test]
    fn a_link_is_redeemed_once_and_not_after_it_expires() {
        let bucket = Bucket::in_memory().expect("bucket");
        let now = crate::model::time::now_ms();
        let (link, late, none) = (key("link"), key("late"), key("none"));
        mint(&bucket, &link, now + 60_000).expect("minted");
        mint(&bucket, &late, now + 60_000).expect("minted");
        assert!(redeem(&bucket, &link, now, 120_000).expect("redeem"));
        assert!(!redeem(&bucket, &link, now, 120_000).expect("redeem"));
        assert!(!redeem(&bucket, &late, now + 61_000, 120_000).expect("redeem"));
        assert!(!redeem(&bucket, &none, now, 120_000).expect("redeem"));
        // A secret that names no link leaves no marker.
        assert_eq!(bucket.list(USED).expect("list").len(), 1);
    }

    #[test]
    fn the_sweep_removes_only_what_expired_and_a_marker_only_after_its_link() {
        let bucket = Bucket::in_memory().expect("bucket");
        let now = crate::model::time::now_ms();
        keep(&bucket, &key("s"), &session(now + HOUR)).expect("kept");
        mint(&bucket, &key("l"), now + 60_000).expect("minted");
        assert!(redeem(&bucket, &key("l"), now, 120_000).expect("redeemed"));
        assert_eq!(
            sweep(&bucket, now, 12 * HOUR, 120_000, 100).expect("sweep"),
            0
        );
        let later = now + 12 * HOUR + SWEEP_SLACK_MS + 60_000;
        // One at a time: the session, then the link, then its marker.
        assert_eq!(
            sweep(&bucket, later, 12 * HOUR, 120_000, 1).expect("sweep"),
            1
        );
        assert_eq!(bucket.list(SESSIONS).expect("list").len(), 0);
        assert_eq!(
            sweep(&bucket, later, 12 * HOUR, 120_000, 1).expect("sweep"),
            1
        );
        assert_eq!(bucket.list(LINKS).expect("list").len(), 0);
        assert_eq!(bucket.list(USED).expect("list").len(), 1);
        assert_eq!(
            sweep(&bucket, later, 12 * HOUR, 120_000, 1).expect("sweep"),
            1
        );
        assert_eq!(bucket.list(USED).expect("list").len(), 0);
    }
}
