//! The objects of the memory-stores API, as the official SDKs read them (`anthropic` 2.16.0,
//! `@anthropic-ai/sdk` 1.16.0: `BetaManagedAgentsMemory`, `BetaManagedAgentsMemoryPrefix`,
//! `BetaManagedAgentsMemoryVersion`, `BetaManagedAgentsActor`), and as an export holds them.

use serde::{Deserialize, Serialize};

/// A memory (`BetaManagedAgentsMemory`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// `memory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `mem_...`.
    pub id: String,
    /// `memstore_...`.
    pub memory_store_id: String,
    /// Its path, such as `/projects/foo/notes.md`.
    pub path: String,
    /// Its content; `None` (JSON `null`) under `view=basic`.
    pub content: Option<String>,
    /// Lower-case hex SHA-256 of the content's UTF-8 bytes.
    pub content_sha256: String,
    /// The content's size in bytes.
    pub content_size_bytes: u64,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When its content or path last changed (RFC 3339).
    pub updated_at: String,
    /// Its current version (`memver_...`).
    pub memory_version_id: String,
}

/// One item of a memory listing: a memory, or a prefix standing for the memories below the
/// listing's depth (`BetaManagedAgentsMemoryPrefix`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Item {
    /// A memory.
    Memory(Memory),
    /// A prefix ending in `/`.
    Prefix {
        /// `memory_prefix`.
        #[serde(rename = "type")]
        kind: String,
        /// The prefix.
        path: String,
    },
}

/// Who made a version (`BetaManagedAgentsActor`): the agent of an API write as the API key it
/// wrote with, a memory-tool call's agent as the session it wrote in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Actor {
    /// `api_actor`.
    #[serde(rename = "api_actor")]
    Api {
        /// The agent the write was recorded under.
        api_key_id: String,
    },
    /// `session_actor`.
    #[serde(rename = "session_actor")]
    Session {
        /// The agent the memory-tool call was recorded under.
        session_id: String,
    },
    /// `user_actor` (never made by Mnemo; read from a hosted export).
    #[serde(rename = "user_actor")]
    User {
        /// The user.
        user_id: String,
    },
    /// `service_account_actor` (never made by Mnemo; read from a hosted export).
    #[serde(rename = "service_account_actor")]
    ServiceAccount {
        /// The service account.
        service_account_id: String,
    },
}

/// A memory version (`BetaManagedAgentsMemoryVersion`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryVersion {
    /// `memory_version`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `memver_...`.
    pub id: String,
    /// The memory's id.
    pub memory_id: String,
    /// `memstore_...`.
    pub memory_store_id: String,
    /// `created`, `modified` or `deleted`.
    pub operation: String,
    /// When the version was written (RFC 3339).
    pub created_at: String,
    /// Who wrote it.
    pub created_by: Option<Actor>,
    /// The content as of this version; `None` under `view=basic`, for a delete, or redacted.
    pub content: Option<String>,
    /// Its SHA-256; `None` for a delete or redacted.
    pub content_sha256: Option<String>,
    /// Its size; `None` for a delete or redacted.
    pub content_size_bytes: Option<u64>,
    /// The memory's path as of this version; `None` once redacted.
    pub path: Option<String>,
    /// When it was redacted, if it was.
    pub redacted_at: Option<String>,
    /// Who redacted it, if someone did.
    pub redacted_by: Option<Actor>,
}
