//! Mnemo's stores as Anthropic's memory stores (`/v1/memory_stores`): the API's ids and objects,
//! memories read from a store's index, versions read off a replay of its log, the API's path
//! rules, and a store moved whole as the API's JSON. The routes that serve them are
//! `mnemo serve --data`'s; the writes are events of the log ([`ApiWrite`](crate::event::ApiWrite)).
//!
//! A memory at `/a/b.md` is the memory tool's `/memories/a/b.md` in the same store; its id
//! follows the file through renames and edits ([`ids`]).

#[cfg(feature = "serve")]
pub(crate) mod access;
pub mod ids;
pub(crate) mod listing;
pub mod objects;
pub(crate) mod path_rules;
pub(crate) mod reading;
pub mod transfer;
#[cfg(any(feature = "serve", feature = "testing"))]
pub(crate) mod version_index;
pub(crate) mod versions;
