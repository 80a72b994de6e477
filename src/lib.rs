#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod chain;
mod client;
mod codec;
mod credential;
pub mod data_dir;
#[cfg(feature = "client")]
mod discovery;
mod disk;
mod error;
pub mod event;
mod failpoint;
mod hash;
mod head;
mod history;
mod inspect;
mod kv;
mod lineage;
mod log;
#[cfg(feature = "mcp")]
mod mcp;
pub mod memory_store;
mod paths;
mod policy;
mod projection;
pub mod protocol;
mod reads;
mod redact;
mod registry;
#[cfg(feature = "client")]
mod remote;
mod replay;
#[cfg(feature = "replicate")]
mod replica;
mod semantics_version;
mod seq;
#[cfg(feature = "serve")]
mod serve;
mod time;
mod token;
pub mod tool;
mod tool_server;
mod transfer;
mod unwind;
mod verify;
mod writer;

pub use client::{ClientBuilder, MnemoClient};
pub use data_dir::check_store_name;
pub use error::{Error, Result};
pub use event::{Body, Event, EventHash, Header, Outcome, RejectedCall, Seq, ToolCall};
pub use history::LogQuery;
pub use log::{Durability, Head};
#[cfg(feature = "mcp")]
pub use mcp::MnemoMcpServer;
pub use paths::{MemPath, PathRejection};
pub use policy::{ANY_AGENT, Access, AdminCommand, Grant, Policy};
pub use projection::{MEMORY_TAG, MemoryRecord};
pub use redact::{Plan, Redacted, Selection};
#[cfg(feature = "client")]
pub use remote::{AdminRequest, RemoteClient, RemoteError};
#[cfg(feature = "replicate")]
pub use replica::Replica;
#[cfg(feature = "replicate")]
pub use replica::follower::{Following, Status as FollowerStatus};
#[cfg(feature = "replicate")]
pub use replica::shipper::{
    Replication, Report as ShipReport, Shipping, Status as ReplicationStatus,
};
#[cfg(feature = "serve")]
pub use serve::listen::Connections;
#[cfg(feature = "serve")]
pub use serve::shutdown::Reason as StopReason;
#[cfg(feature = "serve")]
pub use serve::stores::{DataOptions, OpenStore, OpenedStore, serve_data};
#[cfg(feature = "serve")]
pub use serve::{Error as ServeError, ReplicationView, ServeOptions, Stopped, serve};
pub use token::TokenRecord;
pub use tool::Profile;
pub use tool_server::{MnemoMemoryToolServer, ServerBuilder};
pub use verify::{Report, Violation, ViolationKind};
pub use writer::Receipt;

/// What the `mnemo` binary and the Python bindings use beyond the public API: opening a store
/// read-only (a private copy), the verifier's progress, the log's filters and renderings, tokens,
/// import and export, and finding a store's server. Not a stable API: it changes with them.
#[doc(hidden)]
pub mod cli_support {
    #[cfg(feature = "client")]
    pub use crate::discovery::{Launch, Link, START_WAIT, find_server, live_server, unanswered};
    pub use crate::disk::SERVER_FILE;
    pub use crate::history::{absolute_path, printable};
    pub use crate::log::Store;
    pub use crate::redact::{Plan, Redacted, Selection, plan, redact};
    #[cfg(feature = "replicate")]
    pub use crate::replica::checkpoint::decode as decode_checkpoint;
    #[cfg(feature = "replicate")]
    pub use crate::replica::key::{
        KEY_FILE, TRUST_FILE, check as check_signed, create as create_key,
        default_name as default_key_name, remember as trust_key, remembered as trusted_key,
        verifier as key_verifier,
    };
    #[cfg(feature = "replicate")]
    pub use crate::replica::shipper::MAX_BACKOFF;
    #[cfg(feature = "replicate")]
    pub use crate::replica::{REWRITES, Replica, Restored, Shipped, Stale, restore, ship};
    pub use crate::token::{OPERATOR, check_id, issue, listed, revoke};
    #[cfg(feature = "client")]
    pub use crate::tool::request::tool_use_id;
    pub use crate::transfer::{export, import};
}

/// The internals that the crate's own tests, benches and examples reach (feature `testing`,
/// which a dev-dependency of the crate on itself turns on): the store under the client, the
/// index, the writer's bounds, failpoints, replay, the on-disk files. Not an API: a build for
/// use never has it.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use crate::disk::HEAD_FILE;
    pub use crate::kv::MemKv;
    pub use crate::log::{LOCK_WAIT, Store};
    pub use crate::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES};
    pub use crate::policy::MAX_AGENT_BYTES;
    pub use crate::projection::{
        COLLECT_BUDGET, FileEntry, INDEX_LAYOUT, Projection, RENAMES_UNSTAMPED, RETRY_RECORDS,
        RETRY_TEXT_MAX, Recorded, Retry, RetryKind, Traced,
    };
    pub use crate::verify::{PROGRESS_EVERY, VerifyOptions, verify_store, verify_store_with};
    pub use crate::writer::{
        DEFER_IDLE, INDEX_BATCH_BYTES, INDEX_BATCH_EVENTS, INDEX_BATCH_KEYS, INDEX_IDLE,
        INDEX_OVERFLOW, MAX_DEFERRED,
    };

    /// The store's files beside sled's: the head record, reading them.
    pub mod disk {
        pub use crate::disk::*;
    }
    /// The named failpoints of the write path.
    pub mod failpoint {
        pub use crate::failpoint::*;
    }
    /// The store at a past event, and the log's filters.
    pub mod history {
        pub use crate::history::*;
    }
    /// One event whole, and the diff between two.
    pub mod inspect {
        pub use crate::inspect::*;
    }
    /// A file's events followed through renames.
    pub mod lineage {
        pub use crate::lineage::*;
    }
    /// The MCP server's parts.
    #[cfg(feature = "mcp")]
    pub mod mcp {
        pub use crate::mcp::*;
    }
    /// Replaying the log into a tree.
    pub mod replay {
        pub use crate::replay::*;
    }
    /// Replicas in object storage: segments and checkpoints.
    #[cfg(feature = "replicate")]
    pub mod replica {
        pub use crate::replica::*;
    }
    /// The chain rules.
    pub mod chain {
        pub use crate::chain::*;
    }
    /// The server file, and reaching (or starting) the server it names.
    #[cfg(feature = "client")]
    pub mod discovery {
        pub use crate::discovery::*;
    }
    /// The HTTP server's parts.
    #[cfg(feature = "serve")]
    pub mod serve {
        pub use crate::serve::*;
    }
    /// Agent tokens.
    pub mod token {
        pub use crate::token::*;
    }
    /// Import and export of memory directories.
    pub mod transfer {
        pub use crate::transfer::*;
    }
}
