//! The store's files outside sled's control: what every file of a store must be before it is
//! opened, making sled's files durable, and the head record.
//!
//! **What a store's files must be.** A store directory holds sled's `db` (the log), `conf`,
//! `snap.*` snapshots and the `blobs/` directory of large values, and Mnemo's [`HEAD_FILE`] and
//! [`VALUES_FILE`].
//! Before sled opens a store, [`StoreFiles::check`] requires each of them that exists (and the
//! store directory itself) to be a regular file, or a real directory for the store directory and
//! `blobs/` (whose entries must be regular files): never a symbolic link, a FIFO, a device or a
//! socket, which would make sled panic (a pipe or device as `db`), block forever (a pipe as
//! `conf`, a snapshot, the head record or a blob) or read without end (`/dev/zero`), and never a
//! link to a file elsewhere, which a store does not follow. A name there that is not UTF-8 is
//! refused too (sled 0.34 panics on one among its blobs or snapshots). Anything else is
//! [`Error::UnsafeFile`](crate::error::Error::UnsafeFile), naming the file, what it is and what to do. Only `lstat` and directory
//! listings are used, and for a `db` or snapshot of 64 MiB or more a no-follow, non-blocking open
//! that looks for holes without reading (`extent`: a sparse `db` or an oversized `conf` would make
//! every open cost seconds per gigabyte of nothing). Other names in the directory are left alone.
//!
//! sled opens its files by path, so a file swapped between that check and sled's own open would
//! be opened anyway. [`StoreFiles::confirm`] runs right after sled opened the store: the store
//! directory, `db`, `conf` and `blobs/` must still be the very files checked (same device, inode
//! and type) and every file must pass the check again, or the open is refused. What remains is
//! a window of a few system calls in which a process that can write to the store directory can
//! swap a file in and back again, and the blobs and snapshots sled opens later, while the store
//! is open: that needs write access to the store directory while Mnemo runs, and is outside what
//! these checks can close without sled's cooperation.
//!
//! Mnemo's own file, the head record, is opened with `O_NOFOLLOW | O_NONBLOCK` only after `lstat`
//! found a regular file, and `fstat` of what was opened must show that same file, so a swap is
//! refused, not read; it is read with a cap of its fixed size. The files a durable sync `fsync`s
//! are opened the same way.
//!
//! **Durable sync.** sled 0.34's `flush` ends in `sync_file_range`, which neither makes data
//! durable nor persists file growth (sled issue #1452), so a durable commit also `fsync`s the
//! store's files. Every `fsync` costs a journal commit or a device cache flush even on a file with
//! nothing new, so `DiskSync` does only the ones that can matter:
//!
//! * sled's `db` file (the log sled appends to in place) on every sync;
//! * any other file but the value file (which syncs what it appends itself, before any record
//!   names it) the first time it is seen, and again whenever its inode, length or mtime
//!   changes (sled writes its snapshots and blobs as new files, and `conf` once);
//! * a directory whenever the set of its entries (name and inode) changed since its last `fsync`,
//!   which persists created, renamed and removed files.
//!
//! The first sync after a store opens has seen nothing, so it `fsync`s everything, as before.
//! sled removes blob files from its own threads, so a file listed can be gone by the time it is
//! opened: a file that is gone needs no `fsync` (its directory's does, and the changed listing
//! brings it about).
//! The head record is never `fsync`ed itself (see below); its directory entry is, when it appears.
//!
//! **Head record** ([`HEAD_FILE`]). After each `fsync` or `flush` commit the head is written
//! outside sled, so a log that sled's recovery rolled back can be told from one that was never
//! longer. The file holds two slots of [`SLOT_BYTES`](head_record::SLOT_BYTES) bytes; head `seq` goes to slot `seq % 2`,
//! written in place, and each slot carries a checksum, so a write torn by a crash spoils at most
//! the slot being written and the other still names an earlier head. The record may lag the log
//! after a power loss (it is not fsynced), but never runs ahead of it. A file of the earlier
//! layout (one `SEQ:HASH` line) is still read, and rewritten in the slot layout on the next write.
//!
//! Each slot holds the ASCII text `SEQ:HASH CHECK`, padded with spaces to a newline, the check the
//! first 8 bytes of a domain-separated blake3 of `SEQ:HASH`; the bytes are written down once, in
//! `docs/formats.md` ("The store's files").
//!
//! Split by concern: [`checks`] (what a store's files must be), [`fsync`] (durable sync),
//! [`head_record`], [`opening`] (Mnemo's own files, opened without following links),
//! [`own_files`] (the files a rewritten store carries), [`leftovers`] (what an interrupted
//! rewrite leaves), [`copy`] (a private copy for reading), [`extent`] (sparse files),
//! [`staging`] (a new store built beside its path by an import), [`value_file`] (large
//! payloads outside sled) and [`shared_content`] (the index's content chunks that name them).

use std::path::Path;

mod checks;
mod chunk_pieces;
mod copy;
mod extent;
mod fsync;
mod head_record;
mod leftovers;
mod opening;
mod own_files;
mod shared_content;
#[cfg(unix)]
mod staging;
mod value_file;

pub use checks::DirId;
pub(crate) use checks::StoreFiles;
pub(crate) use copy::{COPY_PREFIX, copy_for_reading, sweep_stale_copies};
#[cfg(feature = "testing")]
pub use extent::{MAX_CONF_BYTES, MAX_HOLE_BYTES};
pub(crate) use fsync::DiskSync;
pub(crate) use head_record::HeadRecord;
#[cfg(feature = "testing")]
pub use head_record::{HEAD_BYTES, SLOT_BYTES};
pub use head_record::{HEAD_FILE, read_head};
pub(crate) use leftovers::{
    redaction_prefix, remove_redaction_leftovers, remove_restore_leftovers,
};
pub(crate) use opening::open_own;
#[cfg(any(feature = "serve", feature = "testing"))]
pub use own_files::LABEL_FILE;
#[cfg(not(any(feature = "serve", feature = "testing")))]
pub(crate) use own_files::LABEL_FILE;
#[cfg(any(feature = "client", feature = "replicate", feature = "testing"))]
pub use own_files::SERVER_FILE;
pub(crate) use own_files::carry_own_files;
pub(crate) use own_files::read_private;
#[cfg(any(feature = "replicate", feature = "testing"))]
pub use own_files::{KEY_FILE, TRUST_FILE};
#[cfg(test)]
pub(crate) use shared_content::LAST as LAST_CHUNK;
pub(crate) use shared_content::{
    names_values, resolve_chunk, share, share_edits, stored_next, unreadable,
};
#[cfg(unix)]
pub(crate) use staging::{place, staging_beside};
#[cfg(feature = "testing")]
pub use value_file::VALUE_MIN;
pub use value_file::VALUES_FILE;
pub(crate) use value_file::{
    LastAppend, Resolved, ValueFile, goes_to_value_file, resolve, resolve_or_lost, split,
    stored_form,
};

/// `fsync`s the directory `dir`, so an entry renamed into it survives a power loss.
pub(crate) fn fsync_dir(dir: &Path) -> crate::error::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| crate::error::Error::io(dir, e))
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
