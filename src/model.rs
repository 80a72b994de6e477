//! The model: what Mnemo records and answers, known without any storage. The memory tool's
//! commands, their semantics over a tree and their result strings (`tool`), the paths and grants
//! they act on (`paths`, `policy`), the agent-token rules (`credential`), the versions of the
//! answers' text (`semantics_version`), the hash and seq everything is named by; then the event
//! format and its chain rules (`event`, `chain`, `head`), the answers of the read commands as data
//! (`protocol`), times and the one serialisation library (`time`, `codec`).
//!
//! The pure core (hash, seq, semantics_version, paths, policy, credential, tool) imports nothing
//! but itself and names no `sled`; `tests/layering.rs` holds every file to it.

pub(crate) mod chain;
pub(crate) mod codec;
pub(crate) mod credential;
pub(crate) mod event;
pub(crate) mod hash;
pub(crate) mod head;
pub(crate) mod paths;
pub(crate) mod policy;
pub(crate) mod protocol;
pub(crate) mod semantics_version;
pub(crate) mod seq;
pub(crate) mod time;
pub(crate) mod tool;
