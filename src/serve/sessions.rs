//! Whose each MCP session is, and how many one principal may hold.
//!
//! rmcp's session manager knows sessions by their id alone, so before this any request that
//! named a session was served in it, whoever sent it: an agent that learnt another's
//! `Mcp-Session-Id` could call in that session or close it. And any agent token could open
//! sessions without bound. Now the gate records, from the answer that created a session, the
//! principal whose token opened it; a request that names the session with another principal's
//! token is answered 404, as a session that does not exist, and reaches nothing. A principal
//! holds at most [`MAX_SESSIONS`] sessions: opening one more closes its oldest. A session
//! without a request for [`SESSION_IDLE`] is closed by rmcp.
//!
//! On a fleet's node a store's sessions are also kept in the fleet's bucket ([`Kept`]): what
//! rmcp needs to take a session up again (the client's `initialize`) and whose it is. When the
//! store moves to another node (a drain, a takeover after a node died), the next request in a
//! session finds it there: rmcp replays the handshake from the bucket, and this gate checks the
//! session's principal from the bucket before it lets the request in, so a session stays its
//! opener's on every node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

use super::auth::Principal;
use crate::fleet::bucket::Bucket;

/// The most MCP sessions one principal (one agent token, or the operator) holds at once.
pub const MAX_SESSIONS: usize = 32;

/// A session with no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);

/// The header that names a session.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// The sessions of one store's `/mcp`, and whose each is.
pub(crate) struct McpSessions {
    manager: Arc<LocalSessionManager>,
    /// Each live session's principal, and its order of creation.
    owners: Mutex<HashMap<String, (Principal, u64)>>,
    next: std::sync::atomic::AtomicU64,
    /// Where a fleet's node keeps the sessions beyond its own memory.
    kept: Option<Arc<Kept>>,
}

impl std::fmt::Debug for McpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSessions").finish_non_exhaustive()
    }
}

impl McpSessions {
    pub(crate) fn new() -> McpSessions {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(SESSION_IDLE);
        McpSessions {
            manager: Arc::new(manager),
            owners: Mutex::default(),
            next: std::sync::atomic::AtomicU64::new(0),
            kept: None,
        }
    }

    /// The sessions of a fleet's store, kept in its bucket too (see [`Kept`]).
    pub(crate) fn kept_in(kept: Kept) -> McpSessions {
        McpSessions {
            kept: Some(Arc::new(kept)),
            ..McpSessions::new()
        }
    }

    /// The session store rmcp takes sessions up again from, on a fleet's node.
    pub(crate) fn external(&self) -> Option<Arc<dyn SessionStore>> {
        self.kept
            .as_ref()
            .map(|kept| Arc::clone(kept) as Arc<dyn SessionStore>)
    }

    /// The session manager rmcp's service keeps its sessions in.
    pub(crate) fn manager(&self) -> Arc<LocalSessionManager> {
        Arc::clone(&self.manager)
    }

    /// Whether `principal` may send a request in the session `id`: a session this gate saw
    /// another principal open is not theirs. An id never seen here is left to rmcp, which answers
    /// 404 for a session it does not hold; but on a fleet's node (which may take a session up
    /// from the bucket) it is the principal's only if the bucket says so ([`Access::TakenUp`]:
    /// once answered, [`admit`](Self::admit) it).
    pub(crate) async fn may_use(&self, id: &str, principal: &Principal) -> Access {
        let known = {
            let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            owners.get(id).map(|(owner, _)| owner == principal)
        };
        match (known, &self.kept) {
            (Some(true), _) | (None, None) => Access::Allowed,
            (Some(false), _) => Access::Denied,
            // A session opened over a day ago is not taken up (its records await the sweep).
            (None, Some(kept)) => match kept.owner(id).await {
                Some((owner, opened)) if owner == *principal && !past_keeping(opened) => {
                    Access::TakenUp
                }
                _ => Access::Denied,
            },
        }
    }

    /// Records that `principal` opened the session `id`, and closes that principal's oldest
    /// sessions past [`MAX_SESSIONS`] (and forgets sessions rmcp no longer holds).
    pub(crate) async fn opened(&self, id: String, principal: Principal) {
        if let Some(kept) = &self.kept {
            kept.own(&id, &principal).await;
        }
        self.admit(id, principal).await;
    }

    /// Records that the session `id` is `principal`'s here (opened here, or taken up from the
    /// bucket), and closes that principal's oldest sessions past [`MAX_SESSIONS`] (and forgets
    /// sessions rmcp no longer holds, such as one it could not take up).
    pub(crate) async fn admit(&self, id: String, principal: Principal) {
        let order = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mine: Vec<(String, u64)> = {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            owners.insert(id, (principal.clone(), order));
            owners
                .iter()
                .filter(|(_, (owner, _))| *owner == principal)
                .map(|(id, (_, order))| (id.clone(), *order))
                .collect()
        };
        let mut live = Vec::new();
        for (id, order) in mine {
            let held = rmcp::transport::streamable_http_server::SessionManager::has_session(
                self.manager.as_ref(),
                &id.clone().into(),
            )
            .await
            .unwrap_or(false);
            if held {
                live.push((order, id));
            } else {
                self.forget(&id);
            }
        }
        live.sort();
        let excess = live.len().saturating_sub(MAX_SESSIONS);
        for (_, id) in live.into_iter().take(excess) {
            let _ = rmcp::transport::streamable_http_server::SessionManager::close_session(
                self.manager.as_ref(),
                &id.clone().into(),
            )
            .await;
            if let Some(kept) = &self.kept {
                // Closed for good: never to be taken up again on another node.
                let _ = kept.delete(&id).await;
            }
            self.forget(&id);
        }
    }

    /// Closes every session in this process, which ends their streams (the store is leaving
    /// this node, and a stream would hold it here): a fleet's node keeps their records in the
    /// bucket, so each client's next request takes its session up wherever the store went.
    pub(crate) fn let_go(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let manager = Arc::clone(&self.manager);
        runtime.spawn(async move {
            let ids: Vec<_> = manager.sessions.read().await.keys().cloned().collect();
            for id in ids {
                let _ = rmcp::transport::streamable_http_server::SessionManager::close_session(
                    manager.as_ref(),
                    &id,
                )
                .await;
            }
        });
    }

    /// Forgets the session `id` (closed by its client, or gone).
    pub(crate) fn forget(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

/// Whether a request may use the session it names ([`McpSessions::may_use`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// The session is its principal's here, or unknown here (rmcp answers 404).
    Allowed,
    /// Another principal opened it, or (on a fleet's node) no record says the principal did.
    Denied,
    /// The fleet's bucket says the principal opened it on another node: rmcp takes it up here.
    TakenUp,
}

/// The most bytes of a kept session's object (a client's `initialize` parameters).
const KEPT_MAX: u64 = 256 * 1024;

/// A fleet's store's MCP sessions in the fleet's bucket: for each, the client's `initialize`
/// parameters (`stores/NAME/mcp/ID/state`, written by rmcp after the handshake) and the principal
/// that opened it and when (`stores/NAME/mcp/ID/owner`, written by the gate), each made
/// create-only, and both removed when the client closes the session (`DELETE`), when the gate
/// closes it past [`MAX_SESSIONS`], or by the [`sweep`] of the next node to take the store once
/// it is older than [`KEPT_FOR`].
pub(crate) struct Kept {
    bucket: Arc<Bucket>,
    /// `stores/NAME/mcp`.
    prefix: String,
}

impl Kept {
    /// The sessions of the store `store` in `bucket`.
    pub(crate) fn new(bucket: Arc<Bucket>, store: &str) -> Kept {
        Kept {
            bucket,
            prefix: format!("stores/{store}/mcp"),
        }
    }

    /// The object `part` of session `id`, if `id` is a name rmcp could have given (a client's
    /// header names no other object).
    fn object(&self, id: &str, part: &str) -> Option<String> {
        let plain = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        plain.then(|| format!("{}/{id}/{part}", self.prefix))
    }

    /// The bucket's answer to `call`, on the blocking pool (the bucket's calls block).
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Bucket) -> crate::Result<T> + Send + 'static,
    ) -> Result<T, SessionStoreError> {
        let bucket = Arc::clone(&self.bucket);
        Ok(tokio::task::spawn_blocking(move || call(&bucket)).await??)
    }

    /// The principal that opened session `id`, and when, as the bucket records it (none when it
    /// records none, or cannot be read).
    async fn owner(&self, id: &str) -> Option<(Principal, u64)> {
        let name = self.object(id, "owner")?;
        let bytes = self
            .blocking(move |bucket| bucket.get(&name, KEPT_MAX))
            .await
            .ok()??;
        owner_of(&bytes)
    }

    /// Records that `principal` opened session `id`.
    async fn own(&self, id: &str, principal: &Principal) {
        let Some(name) = self.object(id, "owner") else {
            return;
        };
        let (kind, agent) = match principal {
            Principal::Operator => ("operator", None),
            Principal::Agent(agent) => ("agent", Some(agent)),
        };
        let opened_ms = crate::model::time::now_ms();
        let Ok(bytes) = serde_json::to_vec(
            &serde_json::json!({"principal": kind, "agent": agent, "opened_ms": opened_ms}),
        ) else {
            return;
        };
        if let Err(e) = self
            .blocking(move |bucket| bucket.create(&name, bytes))
            .await
        {
            // The session serves here; it just cannot move with its store.
            eprintln!("mnemo serve: an MCP session's owner could not be kept in the bucket: {e}");
        }
    }
}

/// A session's owner record: its principal, and when it was opened (Unix milliseconds, by the
/// clock of the node that opened it).
fn owner_of(bytes: &[u8]) -> Option<(Principal, u64)> {
    let record: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let principal = match (record["principal"].as_str()?, record["agent"].as_str()) {
        ("operator", _) => Principal::Operator,
        ("agent", Some(agent)) => Principal::Agent(agent.to_string()),
        _ => return None,
    };
    Some((principal, record["opened_ms"].as_u64()?))
}

/// How long a session's records are kept in a fleet's bucket after it was opened: a session
/// older than this no longer follows its store to another node (its client opens a new one).
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// Whether a session opened at `opened_ms` (Unix milliseconds) is past [`KEPT_FOR`] now.
fn past_keeping(opened_ms: u64) -> bool {
    let limit = u64::try_from(KEPT_FOR.as_millis()).unwrap_or(u64::MAX);
    crate::model::time::now_ms().saturating_sub(opened_ms) > limit
}

/// Removes from `bucket` the records of the store `store`'s MCP sessions opened more than
/// [`KEPT_FOR`] ago (by this node's clock against the opener's, which a day dwarfs any skew
/// between), as a node does once it took the store: sessions never closed leave no records
/// for ever. A session whose owner record is not made yet (being opened) is left alone. How
/// many sessions' records were removed.
pub(crate) fn sweep(bucket: &Bucket, store: &str) -> crate::Result<usize> {
    let kept = format!("stores/{store}/mcp");
    let mut removed = 0;
    for id in bucket.dirs(&kept)? {
        let owner = format!("{kept}/{id}/owner");
        let Some(bytes) = bucket.get(&owner, KEPT_MAX)? else {
            continue;
        };
        let old = owner_of(&bytes).is_none_or(|(_, opened)| past_keeping(opened));
        if old {
            bucket.remove(&format!("{kept}/{id}/state"))?;
            bucket.remove(&owner)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[async_trait::async_trait]
impl SessionStore for Kept {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(name) = self.object(id, "state") else {
            return Ok(None);
        };
        let bytes = self
            .blocking(move |bucket| bucket.get(&name, KEPT_MAX))
            .await?;
        Ok(bytes.map(|b| serde_json::from_slice(&b)).transpose()?)
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let Some(name) = self.object(id, "state") else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(state)?;
        self.blocking(move |bucket| bucket.create(&name, bytes))
            .await
            .map(|_| ())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        let (Some(state), Some(owner)) = (self.object(id, "state"), self.object(id, "owner"))
        else {
            return Ok(());
        };
        self.blocking(move |bucket| {
            bucket.remove(&state)?;
            bucket.remove(&owner)
        })
        .await
    }
}
