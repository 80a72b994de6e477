#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod client;
mod codec;
pub mod disk;
mod error;
pub mod event;
pub mod failpoint;
mod hash;
mod head;
pub mod history;
pub mod inspect;
mod kv;
pub mod lineage;
mod log;
#[cfg(feature = "mcp")]
pub mod mcp;
mod paths;
mod policy;
mod projection;
mod reads;
mod registry;
#[cfg(feature = "client")]
mod remote;
pub mod replay;
mod semantics_version;
#[cfg(feature = "serve")]
pub mod serve;
/// What a client of `mnemo serve` needs in a build without the server (feature `client` alone,
/// as the Python package builds): the server file of a store, and reaching (or starting) the
/// server it names. A build with the `serve` feature has the whole module.
#[cfg(all(feature = "client", not(feature = "serve")))]
pub mod serve {
    pub mod discovery;
    pub use discovery::{SERVER_FILE, ServerFile};
}
mod time;
pub mod token;
pub mod tool;
pub mod transfer;
mod unwind;
mod verify;
mod writer;

pub use client::{ClientBuilder, MnemoClient};
pub use error::{Error, Result};
pub use event::{Body, Event, EventHash, Header, Outcome, RejectedCall, Seq, ToolCall};
pub use kv::MemKv;
pub use log::{Durability, HEAD_FILE, Head, LOCK_WAIT, Store};
#[cfg(feature = "mcp")]
pub use mcp::MnemoMcpServer;
pub use paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemPath, PathRejection};
pub use policy::{ANY_AGENT, Access, AdminCommand, Grant, MAX_AGENT_BYTES, Policy};
pub use projection::{
    COLLECT_BUDGET, INDEX_LAYOUT, MEMORY_TAG, MemoryRecord, Projection, RETRY_RECORDS,
    RETRY_TEXT_MAX, Recorded, Retry, RetryKind, Traced,
};
#[cfg(feature = "client")]
pub use remote::{AdminRequest, RemoteClient, RemoteError};
#[cfg(feature = "serve")]
pub use serve::{ServeOptions, serve};
pub use tool::{MnemoMemoryToolServer, Profile};
pub use verify::{
    PROGRESS_EVERY, Report, VerifyOptions, Violation, ViolationKind, verify_store,
    verify_store_with,
};
pub use writer::{
    DEFER_IDLE, INDEX_BATCH_BYTES, INDEX_BATCH_EVENTS, INDEX_BATCH_KEYS, INDEX_IDLE,
    INDEX_OVERFLOW, MAX_DEFERRED, Receipt,
};
