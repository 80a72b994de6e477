//! The audit: reading a store's past and proving it. `verify` replays the log from the first event
//! and proves the chain, the index and every answer; `history` gives the tree after any seq and
//! the log's filters; `lineage` follows a file by identity through renames; `inspect` shows one
//! event whole and the change between two. None of them writes a store.

pub(crate) mod history;
pub(crate) mod inspect;
pub(crate) mod lineage;
pub(crate) mod trace;
pub(crate) mod verify;
