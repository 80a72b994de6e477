//! Mnemo: an audited memory store for AI agents, and the backend of Anthropic's memory tool
//! (`memory_20250818`).
//!
//! The model keeps files under `/memories` through six commands (`view`, `create`,
//! `str_replace`, `insert`, `delete`, `rename`); a program hands each `tool_use` block to
//! [`MnemoMemoryToolServer::handle`] and sends back the `tool_result` it returns. Every call,
//! reads and rejected calls included, becomes one blake3-chained [`Event`] in an embedded sled
//! log, and [`MnemoClient::verify`] replays the log from event 1 to prove that the chain, the
//! index and every answer the model was given agree, naming the first bad event if not.
//!
//! # The main types
//!
//! - [`MnemoClient`]: a store opened as one agent ([`ClientBuilder`] for the durability mode);
//!   its reads ([`records_by_tag`](MnemoClient::records_by_tag), [`log`](MnemoClient::log),
//!   [`history`](MnemoClient::history), [`show`](MnemoClient::show), [`diff`](MnemoClient::diff)),
//!   access control ([`Grant`], [`Access`]), [`verify`](MnemoClient::verify) (a [`Report`]) and
//!   redaction ([`Selection`]). On a store that a running `mnemo serve` holds, it talks to that
//!   server with the same API.
//! - [`MnemoMemoryToolServer`]: the memory tool over a client, with its root, [`Profile`] and
//!   [`tool::Limits`] ([`ServerBuilder`]).
//! - The event log's types, [`Event`], [`Body`], [`Header`], [`Outcome`], [`Seq`],
//!   [`EventHash`], and the [`event`] module with the rest of a body and a stored record (the
//!   bytes are in `docs/formats.md`); [`tool`], the calls as a body holds them and a request as
//!   the tool server reads it; [`protocol`], the reads' answers as serde types;
//!   [`MemoryStoreExport`], a store moved whole as Anthropic's memory-stores API's JSON.
//!
//! # Example
//!
//! ```
//! use mnemo::{MnemoClient, MnemoMemoryToolServer};
//! use serde_json::json;
//!
//! # fn main() -> mnemo::Result<()> {
//! # let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
//! # let db_path = std::env::temp_dir().join(format!("mnemo-crate-docs-{stamp}.db"));
//! let server = MnemoMemoryToolServer::new(MnemoClient::open(&db_path, "agent-1")?);
//! let result = server.handle(&json!({
//!     "type": "tool_use", "id": "toolu_01", "name": "memory",
//!     "input": {"command": "create", "path": "/memories/notes.md", "file_text": "- likes tea\n"},
//! }));
//! assert_eq!(result["content"], "File created successfully at: /memories/notes.md");
//! assert!(server.client().verify()?.is_intact());
//! # drop(server); std::fs::remove_dir_all(&db_path).ok();
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `cli` | yes | the `mnemo` binary (clap); the library needs none of it |
//! | `serve` | yes | the HTTP server (`serve()`, `mnemo serve`), which includes `mcp` and `client` |
//! | `replicate` | yes | replicas in object storage (`Replica`, `SigningKey`) |
//! | `mcp` | through `serve` | the MCP server (`MnemoMcpServer`, `mnemo mcp`) |
//! | `client` | through `serve` | the blocking HTTP client of a server (`RemoteClient`), nothing async |
//!
//! A program that embeds the store and wants the lean library (no async runtime, no HTTP, no
//! object storage) depends on it with `default-features = false`, adding `client` to reach a
//! server.
//!
//! # Guides
//!
//! The repository's `README.md` has the quick starts (Rust, Python, MCP) and the command line.
//! `docs/agent-builders.md` covers embedding, the public API, profiles, limits and errors;
//! `docs/operators.md` the server, tokens, many stores, replicas and the durability contract;
//! `docs/auditors.md` verify, checkpoints, history and redaction; `docs/http-api.md` every route;
//! `docs/formats.md` the bytes of events, indexes and replicas; `docs/performance.md` the
//! measurements; `ARCHITECTURE.md` the code map and invariants.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

// Every Rust block in the README and the guides runs as a doctest (`cargo test --doc`);
// `tests/docs.rs` checks that each markdown file with one is listed here.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../ARCHITECTURE.md")]
struct ArchitectureDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/agent-builders.md")]
struct AgentBuildersDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/operators.md")]
struct OperatorsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/auditors.md")]
struct AuditorsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/contributors.md")]
struct ContributorsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/formats.md")]
struct FormatsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/http-api.md")]
struct HttpApiDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/performance.md")]
struct PerformanceDoctests;

mod audit;
mod client;
mod error;
#[cfg(feature = "replicate")]
mod fleet;
#[cfg(feature = "mcp")]
mod mcp;
mod memory_store;
mod model;
#[cfg(feature = "replicate")]
mod replica;
#[cfg(feature = "serve")]
mod serve;
mod store;

pub use audit::verify::{Report, Violation, ViolationKind};
#[cfg(feature = "client")]
pub use client::discovery::{DataServer, LineTally, Link, ServerFile};
pub use client::redact::{Plan, Redacted, Selection};
#[cfg(feature = "client")]
pub use client::remote::{RemoteClient, RemoteError};
pub use client::revert::{RevertPlan, RevertScope, Reverted};
#[cfg(feature = "client")]
pub use client::stores::DataStores;
pub use client::token::TokenRecord;
pub use client::tool_server::{MnemoMemoryToolServer, ServerBuilder};
#[cfg(unix)]
pub use client::transfer::{ExportSummary, ImportSummary, Skipped};
pub use client::{ClientBuilder, MnemoClient};
pub use error::{Error, Result, StorageError};
#[cfg(feature = "serve")]
pub use fleet::signature::FleetKey;
#[cfg(feature = "mcp")]
pub use mcp::MnemoMcpServer;
pub use memory_store::transfer::{Imported as MemoryStoreImport, MemoryStoreExport};
pub use model::credential::OPERATOR;
pub use model::event::{Body, Event, EventHash, Header, Outcome, RejectedCall, Seq, ToolCall};
pub use model::paths::{MemPath, PathRejection};
pub use model::policy::{ANY_AGENT, Access, AdminCommand, Grant, Policy};
pub use model::protocol::LogQuery;
pub use model::tool::Profile;
#[cfg(feature = "replicate")]
pub use replica::key::SigningKey;
#[cfg(feature = "replicate")]
pub use replica::{Replica, Restored, Shipped};
#[cfg(feature = "serve")]
pub use serve::fleet::{Fleet, FleetNode, FleetOptions, FleetStatus, FleetStore};
#[cfg(feature = "serve")]
pub use serve::listen::Connections;
#[cfg(feature = "serve")]
pub use serve::shutdown::Reason as StopReason;
#[cfg(feature = "serve")]
pub use serve::stores::{DataOptions, OpenStore, OpenedStore, serve_data};
#[cfg(feature = "serve")]
pub use serve::{Error as ServeError, ReplicaOptions, ServeOptions, Stopped, serve};
pub use store::data_dir::DataDir;
pub use store::log::{Durability, Head};
pub use store::projection::{MEMORY_TAG, MemoryRecord};
pub use store::writer::Receipt;

/// The parts of an event's [`Body`] and record beyond the root's [`Event`], [`Header`],
/// [`Outcome`], [`ToolCall`] and [`RejectedCall`]: what an auditor reading the log meets. Every
/// byte of a stored event (the record, the chain-hash input, the header, each variant) is written
/// down in the repository's `docs/formats.md`; [`Frame`](event::Frame) is a record split into its
/// stored fields, the way the verifier checks it.
pub mod event {
    pub use crate::model::event::{Frame, Salt};
    pub use crate::model::tool::api::ApiWrite;
    pub use crate::model::tool::{Erased, InputDigest, Kept, KeptChange, Refusal, RejectedDigest};
}

/// The memory tool's calls as an event's body holds them ([`Command`](tool::Command), the
/// [`Limits`](tool::Limits) and [`Semantics`](tool::Semantics) a call ran under, with
/// [`Profile`]), a request as a binding makes it for the tool server
/// ([`Request`](tool::Request), [`BoundedText`](tool::BoundedText)), and why a memory-stores API write failed
/// ([`ApiFailure`](tool::ApiFailure), in a [`Receipt`]).
pub mod tool {
    pub use crate::model::tool::api::ApiFailure;
    pub use crate::model::tool::{BoundedText, Command, Limits, Request, Semantics};
}

/// The read commands' answers as serde types: what [`MnemoClient`]'s reads (`log`, `history`,
/// `show`, `diff`, `listing`, `tokens`, `verify`'s report) return, what `mnemo --json` prints and
/// what a server's read routes send, one definition for all three. The question `log` answers
/// is [`LogQuery`].
pub mod protocol {
    pub use crate::model::protocol::{
        Checkpoint, DiffKind, Erased, EventChange, FileDiff, Finding, HistoryEvent, ListedFile,
        Listing, LiveFile, LoggedEvent, Redaction, Revocation, ShownEvent, TokenInfo, TraceReport,
        TracedEvent, UNREADABLE_COMMAND, VerifyReport, printable,
    };
}

/// The internals that the crate's own tests, benches and examples reach (feature `testing`,
/// which a dev-dependency of the crate on itself turns on): the store under the client, the
/// index, the writer's bounds, failpoints, replay, the on-disk files. Not an API: a build for
/// use never has it.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use crate::audit::verify::{
        PROGRESS_EVERY, VerifyOptions, verify_store, verify_store_with,
    };
    pub use crate::model::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES};
    pub use crate::model::policy::MAX_AGENT_BYTES;
    #[cfg(feature = "replicate")]
    pub use crate::replica::REWRITES;
    pub use crate::store::disk::{HEAD_FILE, VALUE_MIN, VALUES_FILE};
    pub use crate::store::kv::MemKv;
    pub use crate::store::log::{LOCK_WAIT, Store};
    pub use crate::store::projection::{
        COLLECT_BUDGET, Caller, FileEntry, INDEX_LAYOUT, Projection, RENAMES_UNSTAMPED,
        RETRY_RECORDS, RETRY_TEXT_MAX, Recorded, Retry, RetryKind, Traced,
    };
    pub use crate::store::writer::{
        DEFER_IDLE, INDEX_BATCH_BYTES, INDEX_BATCH_EVENTS, INDEX_BATCH_KEYS, INDEX_IDLE,
        INDEX_OVERFLOW, MAX_DEFERRED, Replicate,
    };

    /// The event format: its versions, domain tags and hashes, and a record split without a copy.
    pub mod event {
        pub use crate::model::event::*;
    }
    /// The pure core's answer over a tree, the `Tree` trait and its parts, and the memory-stores
    /// API's writes.
    pub mod tool {
        pub use crate::model::tool::api::{answer_api, content_sha256, hex};
        pub use crate::model::tool::{
            Answer, COMMAND_NAMES, Change, Entry, NodeKind, Probe, Tree, answer,
        };
    }
    /// The tool server's intake (what one request becomes before it is answered) and the
    /// command parser.
    pub mod intake {
        pub use crate::model::tool::command::parse_value;
        pub use crate::model::tool::intake::*;
    }
    /// The store's files beside sled's: the head record, reading them.
    pub mod disk {
        pub use crate::store::disk::*;
    }
    /// The named failpoints of the write path.
    pub mod failpoint {
        pub use crate::store::failpoint::*;
    }
    /// Memory versions read off the index's version journal, and off a replay of the log (the
    /// model the journal is tested against).
    pub mod versions {
        pub use crate::memory_store::version_index::*;
        pub use crate::memory_store::versions::*;
    }
    /// The store at a past event, and the log's filters.
    pub mod history {
        pub use crate::audit::history::*;
    }
    /// One event whole, and the diff between two.
    pub mod inspect {
        pub use crate::audit::inspect::*;
    }
    /// A file's events followed through renames.
    pub mod lineage {
        pub use crate::audit::lineage::*;
    }
    /// The MCP server's parts.
    #[cfg(feature = "mcp")]
    pub mod mcp {
        pub use crate::mcp::*;
    }
    /// Replaying the log into a tree.
    pub mod replay {
        pub use crate::store::replay::*;
    }
    /// Replayed trees of the past an open store keeps.
    pub mod snapshot {
        pub use crate::store::snapshot::*;
    }
    /// Replicas in object storage: segments and checkpoints.
    #[cfg(feature = "replicate")]
    pub mod replica {
        pub use crate::replica::*;
    }
    /// A fleet's bucket, leases and write-ahead logs, and a store replicated to one.
    #[cfg(feature = "replicate")]
    pub mod fleet {
        pub use crate::fleet::*;
        #[cfg(feature = "serve")]
        pub use crate::serve::fleet::replicated_client;
    }
    /// The limits' defaults, which `tool::Limits::default()` holds.
    pub use crate::model::tool::limits::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_REQUEST_BYTES};
    /// A request read from a stream as the tool server reads it.
    pub use crate::model::tool::read_request;
    /// The memory-stores API's model of a store: ids, objects, a store moved whole as its JSON.
    pub mod memory_store {
        pub use crate::memory_store::ids::*;
        pub use crate::memory_store::objects::*;
        pub use crate::memory_store::transfer::*;
    }
    /// A store redacted on its files, no process holding it.
    pub use crate::client::redact::redact as redact_store;
    /// The chain rules.
    pub mod chain {
        pub use crate::model::chain::*;
    }
    /// The server file, and reaching (or starting) the server it names.
    #[cfg(feature = "client")]
    pub mod discovery {
        pub use crate::client::discovery::*;
    }
    /// The HTTP server's parts.
    #[cfg(feature = "serve")]
    pub mod serve {
        pub use crate::serve::*;
    }
    /// Agent tokens.
    pub mod token {
        pub use crate::client::token::*;
    }
    /// Import and export of memory directories.
    pub mod transfer {
        pub use crate::client::transfer::*;
    }
}
