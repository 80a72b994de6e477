//! The store: the event log in sled, the path index projected from it, and everything that makes
//! them durable and consistent. The writer (`writer`) owns the sequence and the chain and shares
//! syncs; the log (`log`) is sled's trees, the head and the index; the index (`projection`) is
//! written against ordered maps (`kv`) and kept trees of the past (`snapshot`); the files beside
//! sled's (`disk`) are checked before they are opened; `replay` is the one loop that applies events
//! to an index; `proof` checks a read's records before it shows them; `registry` shares a store
//! opened twice in one process; `data_dir` is a directory of stores; `failpoint` and `unwind` are
//! the write path's test hooks and its guard against a dependency's panic.

pub(crate) mod data_dir;
pub(crate) mod disk;
pub(crate) mod failpoint;
pub(crate) mod kv;
pub(crate) mod log;
pub(crate) mod projection;
pub(crate) mod proof;
pub(crate) mod registry;
pub(crate) mod replay;
pub(crate) mod snapshot;
pub(crate) mod unwind;
pub(crate) mod writer;
