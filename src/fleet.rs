//! A fleet: several `mnemo serve` nodes sharing one bucket of object storage, each store served
//! by one node at a time, object storage the source of truth (compiled with the `replicate`
//! cargo feature, whose object-store client it uses).
//!
//! The one coordination primitive is the object store's create-only write (`If-None-Match: *`),
//! reached through [`bucket`]. On it: [`lease`], which node should serve which store (heartbeats
//! and lease epochs, judged by the object store's clock), and [`wal`], each store's write-ahead
//! log in the bucket, whose create-only object names fence a holder that lost its store, so that
//! two nodes can never both get a write into one store's history; [`signature`], the fleet's key
//! that signs those logs, so that no one without it can write a store's history through the
//! bucket; [`forwarding`], the proof a request forwarded between nodes carries;
//! [`viewer_logins`], the viewer's sessions and login links, kept there so that every node
//! knows them. The layout of the bucket's
//! objects is in `docs/formats.md` ("Fleet objects"); the design and its invariants in
//! ARCHITECTURE.md.

pub mod bucket;
pub mod copy;
pub mod forwarding;
pub mod lease;
pub mod pack;
mod recovery;
pub mod shipping;
pub mod signature;
pub mod viewer_logins;
pub mod wal;
