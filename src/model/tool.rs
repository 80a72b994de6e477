//! The memory tool: commands, their pure semantics over a tree, and the result strings. The
//! server that turns `tool_use` blocks into `tool_result` blocks through a client is
//! [`MnemoMemoryToolServer`](crate::MnemoMemoryToolServer), above the store.
//!
//! Nothing under `tool/` does I/O except `request`, which reads one request from the reader it is
//! given. What a request becomes before it is answered (`intake`) is pure, so it can be answered
//! over any tree.
//!
//! This is the top of the pure core: it imports only the core below it (`hash`, `seq`,
//! `semantics_version`, `paths`, `policy`, `credential`), never `error`, the event format or
//! storage. Its functions return the [`Tree`]'s own error.

pub(crate) mod api;
mod call;
pub(crate) mod command;
pub(crate) mod intake;
pub(crate) mod limits;
mod matcher;
pub(crate) mod render;
pub(crate) mod request;
mod semantics;
mod tree;

pub use crate::model::semantics_version::Semantics;
pub use call::{
    Body, Erased, InputDigest, Kept, KeptChange, Refusal, RejectedCall, RejectedDigest, ToolCall,
};
pub use command::{COMMAND_NAMES, Command, Profile};
// What a request becomes before it is answered: the tool server's intake, not an API (the
// crate's own tests reach it through `testing`).
pub(crate) use intake::{Intake, Logged};
pub use limits::Limits;
pub use render::format_size;
pub use request::{BoundedText, Request, read_request};
pub use semantics::{Answer, answer};
pub use tree::{Change, Entry, NodeKind, Probe, Tree};
