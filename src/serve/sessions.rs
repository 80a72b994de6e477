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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::auth::Principal;

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
        }
    }

    /// The session manager rmcp's service keeps its sessions in.
    pub(crate) fn manager(&self) -> Arc<LocalSessionManager> {
        Arc::clone(&self.manager)
    }

    /// Whether `principal` may send a request in the session `id`: a session this gate saw
    /// another principal open is not theirs. (An id never seen is left to rmcp, which answers
    /// 404 for a session it does not hold.)
    pub(crate) fn may_use(&self, id: &str, principal: &Principal) -> bool {
        let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        owners.get(id).is_none_or(|(owner, _)| owner == principal)
    }

    /// Records that `principal` opened the session `id`, and closes that principal's oldest
    /// sessions past [`MAX_SESSIONS`] (and forgets sessions rmcp no longer holds).
    pub(crate) async fn opened(&self, id: String, principal: Principal) {
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
            self.forget(&id);
        }
    }

    /// Forgets the session `id` (closed by its client, or gone).
    pub(crate) fn forget(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}
