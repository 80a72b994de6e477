//! The index's node keys and the bytes of their values: directory entries (`c`), file records
//! (`f`), the next node id (`n`), the last seq applied (`a`) and the layout (`L`), as the
//! table in the [projection](super) docs lays them out. The other key families live beside
//! what they hold: the trash in [`trash`](super::trash), grants, tokens and settings in
//! [`admin`](super::admin), retry records in [`retry_records`](super::retry_records).

use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::tool::NodeKind;

/// The id of directory `/`.
pub(super) const ROOT_ID: u64 = 0;
/// The key of the next node id.
pub(super) const NEXT_ID_KEY: &[u8] = b"n";
/// The key of the last seq applied.
pub(super) const APPLIED_KEY: &[u8] = b"a";
/// The key of the index layout.
pub(super) const LAYOUT_KEY: &[u8] = b"L";

/// The prefix of every `c` key under directory `parent`: a scan of it lists the directory.
pub(super) fn child_prefix(parent: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'c');
    k.extend_from_slice(&parent.to_be_bytes());
    k
}

/// The `c` key of `name` under directory `parent`.
pub(super) fn child_key(parent: u64, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + name.len());
    set_child_key(&mut k, parent, name);
    k
}

/// Overwrites `key` with the child key of `name` under `parent` (a path walk reuses one buffer).
pub(super) fn set_child_key(key: &mut Vec<u8>, parent: u64, name: &str) {
    key.clear();
    key.push(b'c');
    key.extend_from_slice(&parent.to_be_bytes());
    key.extend_from_slice(name.as_bytes());
}

/// The `f` key of file node `id`.
pub(super) fn file_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'f');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// Reads an index value that must be a u64 BE (`what` names it in the error).
pub(super) fn be_u64(bytes: &[u8], what: &str) -> Result<u64> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::corrupt(format!("path index {what} is not 8 bytes")))?;
    Ok(u64::from_be_bytes(arr))
}

/// A `c` entry's kind and child id.
pub(super) fn decode_child(value: &[u8]) -> Result<(NodeKind, u64)> {
    decode_entry(value).map(|(kind, id, _)| (kind, id))
}

/// A `c` entry's kind, child id, and the seq of the rename that made it (0 if none did).
pub(super) fn decode_entry(value: &[u8]) -> Result<(NodeKind, u64, u64)> {
    let kind = match value.first() {
        Some(b'd') => NodeKind::Dir,
        Some(b'f') => NodeKind::File,
        _ => return Err(Error::corrupt("path index entry has an unknown kind")),
    };
    let (id, moved) = match value.len() {
        9 => (be_u64(&value[1..], "child id")?, 0),
        17 => (
            be_u64(&value[1..9], "child id")?,
            be_u64(&value[9..], "rename seq")?,
        ),
        _ => return Err(Error::corrupt("path index entry is neither 9 nor 17 bytes")),
    };
    Ok((kind, id, moved))
}

/// The `c` entry a rename at `seq` makes for node `id`.
pub(super) fn encode_moved(kind: NodeKind, id: u64, seq: Seq) -> Vec<u8> {
    let mut v = encode_child(kind, id);
    v.extend_from_slice(&seq.0.to_be_bytes());
    v
}

/// The `c` entry for node `id` of `kind` (9 bytes: no rename made it).
pub(super) fn encode_child(kind: NodeKind, id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(9);
    v.push(match kind {
        NodeKind::Dir => b'd',
        NodeKind::File => b'f',
    });
    v.extend_from_slice(&id.to_be_bytes());
    v
}

/// The error for a file node the index names but holds no `f` record for.
pub(super) fn no_content(id: u64) -> Error {
    Error::corrupt(format!(
        "path index names file node {id} but holds no content for it"
    ))
}
