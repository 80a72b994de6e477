//! The store's files outside sled's control: what every file of a store must be before it is
//! opened, making sled's files durable, and the head record.
//!
//! **What a store's files must be.** A store directory holds sled's `db` (the log), `conf`,
//! `snap.*` snapshots and the `blobs/` directory of large values, and Mnemo's [`HEAD_FILE`].
//! Before sled opens a store, [`StoreFiles::check`] requires each of them that exists (and the
//! store directory itself) to be a regular file, or a real directory for the store directory and
//! `blobs/` (whose entries must be regular files): never a symbolic link, a FIFO, a device or a
//! socket, which would make sled panic (a pipe or device as `db`), block forever (a pipe as
//! `conf`, a snapshot, the head record or a blob) or read without end (`/dev/zero`), and never a
//! link to a file elsewhere, which a store does not follow. A name there that is not UTF-8 is
//! refused too (sled 0.34 panics on one among its blobs or snapshots). Anything else is
//! [`Error::UnsafeFile`], naming the file, what it is and what to do. Only `lstat` and directory
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
//! * any other file the first time it is seen, and again whenever its inode, length or mtime
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
//! longer. The file holds two slots of [`SLOT_BYTES`] bytes; head `seq` goes to slot `seq % 2`,
//! written in place, and each slot carries a checksum, so a write torn by a crash spoils at most
//! the slot being written and the other still names an earlier head. The record may lag the log
//! after a power loss (it is not fsynced), but never runs ahead of it. A file of the earlier
//! layout (one `SEQ:HASH` line) is still read, and rewritten in the slot layout on the next write.
//!
//! | bytes | slot content (ASCII) |
//! |---|---|
//! | `SEQ:HASH CHECK` | `SEQ` decimal, `HASH` 64 hex, `CHECK` 16 hex: the first 8 bytes of `blake3("mnemo/head/v1" ‖ "SEQ:HASH")` |
//! | rest | spaces, then `\n` as the slot's last byte |

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType, Metadata};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::failpoint::{Failpoint, Failpoints};
use crate::head::Head;

mod copy;
mod extent;

pub(crate) use copy::{COPY_PREFIX, copy_for_reading, sweep_stale_copies};
#[cfg(feature = "testing")]
pub use extent::{MAX_CONF_BYTES, MAX_HOLE_BYTES};

/// The file, beside sled's, that records the last durably committed head.
pub const HEAD_FILE: &str = "mnemo-head";

/// The size of one slot of the head record.
pub const SLOT_BYTES: usize = 128;

/// The size of the head record: two slots. A longer file is not a head record, and no more than
/// one byte past this is ever read of it.
pub const HEAD_BYTES: usize = 2 * SLOT_BYTES;

const HEAD_DOMAIN: &[u8] = b"mnemo/head/v1";

/// What identifies a file's content as unchanged since its last `fsync`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// `fsync`s the files and directories of one store that changed since they were last synced.
#[derive(Default)]
pub(crate) struct DiskSync {
    /// sled's `db` file, kept open so a sync does not reopen it, with its inode.
    db: Option<(File, u64)>,
    /// Files as they were at their last `fsync`.
    files: HashMap<PathBuf, Stamp>,
    /// Each directory's entries (name, inode), sorted, as they were at its last `fsync`.
    dirs: HashMap<PathBuf, Vec<(OsString, u64)>>,
}

impl DiskSync {
    /// `fsync`s what under `root` may hold unsynced data. On an error nothing is remembered as
    /// synced, so the next sync does everything again.
    pub(crate) fn sync(&mut self, root: &Path, faults: &Failpoints) -> Result<()> {
        let result = self.sync_dir(root, root, faults);
        if result.is_err() {
            *self = DiskSync::default();
        }
        result
    }

    fn sync_dir(&mut self, root: &Path, dir: &Path, faults: &Failpoints) -> Result<()> {
        let mut listing = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            let path = entry.path();
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, e)),
            };
            listing.push((entry.file_name(), meta.ino()));
            if meta.is_dir() {
                self.sync_dir(root, &path, faults)?;
            } else if meta.is_file() {
                self.sync_file(root, path, &meta, faults)?;
            }
        }
        listing.sort_unstable();
        if self.dirs.get(dir) != Some(&listing) {
            faults.check(Failpoint::Fsync)?;
            fsync_path(dir)?;
            self.dirs.insert(dir.to_path_buf(), listing);
        }
        Ok(())
    }

    fn sync_file(
        &mut self,
        root: &Path,
        path: PathBuf,
        meta: &std::fs::Metadata,
        faults: &Failpoints,
    ) -> Result<()> {
        if path.parent() == Some(root) && path.file_name() == Some(HEAD_FILE.as_ref()) {
            return Ok(());
        }
        if path.parent() == Some(root) && path.file_name() == Some("db".as_ref()) {
            let stale = self.db.as_ref().is_none_or(|(_, ino)| *ino != meta.ino());
            if stale {
                let Some(file) = open_to_sync(&path, Kind::File)? else {
                    return Err(Error::io(&path, std::io::ErrorKind::NotFound.into()));
                };
                self.db = Some((file, meta.ino()));
            }
            if let Some((file, _)) = &self.db {
                faults.check(Failpoint::Fsync)?;
                file.sync_all().map_err(|e| Error::io(&path, e))?;
            }
            return Ok(());
        }
        let stamp = Stamp::of(meta);
        if self.files.get(&path) != Some(&stamp) {
            if let Some(file) = open_to_sync(&path, Kind::File)? {
                faults.check(Failpoint::Fsync)?;
                file.sync_all().map_err(|e| Error::io(&path, e))?;
                self.files.insert(path, stamp);
            }
        }
        Ok(())
    }
}

fn fsync_path(path: &Path) -> Result<()> {
    match open_to_sync(path, Kind::Dir)? {
        Some(dir) => dir.sync_all().map_err(|e| Error::io(path, e)),
        None => Err(Error::io(path, std::io::ErrorKind::NotFound.into())),
    }
}

/// Opens a file or directory of the store read-only to `fsync` it: never through a link, never
/// blocking on a pipe, and only if what was opened is `kind`. `None` if it is gone.
fn open_to_sync(path: &Path, kind: Kind) -> Result<Option<File>> {
    let flags = match kind {
        Kind::File => OFlags::RDONLY,
        Kind::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
    };
    let file = match open_nofollow(path, flags) {
        Ok(file) => file,
        Err(e) if e == Errno::NOENT => return Ok(None),
        Err(e) if e == Errno::LOOP || e == Errno::NOTDIR => return Err(refused_now(path, kind)),
        Err(e) => return Err(Error::io(path, e.into())),
    };
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !kind.matches(meta.file_type()) {
        return Err(unsafe_file(path, meta.file_type(), kind));
    }
    Ok(Some(file))
}

/// The head record of one store, open for in-place slot writes.
#[derive(Default)]
pub(crate) struct HeadRecord {
    file: Option<File>,
}

impl HeadRecord {
    /// Writes `head` into its slot. The first write after the store opens writes the whole file
    /// (both slots), which also converts a record of the earlier layout.
    pub(crate) fn write(&mut self, root: &Path, head: Head) -> Result<()> {
        let path = root.join(HEAD_FILE);
        let slot = slot_bytes(head);
        let result = match &self.file {
            Some(file) => file.write_all_at(&slot, slot_offset(head)),
            None => {
                let mut whole = slot.clone();
                whole.extend_from_slice(&slot);
                let file = open_own(&path, OFlags::WRONLY | OFlags::CREATE)?
                    .ok_or_else(|| Error::io(&path, std::io::ErrorKind::NotFound.into()))?;
                file.write_all_at(&whole, 0)
                    .and_then(|()| file.set_len(whole.len() as u64))
                    .map(|()| self.file = Some(file))
            }
        };
        result.map_err(|e| {
            self.file = None;
            Error::io(&path, e)
        })
    }
}

fn slot_offset(head: Head) -> u64 {
    (head.seq.0 % 2) * SLOT_BYTES as u64
}

fn check(text: &str) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(HEAD_DOMAIN);
    hasher.update(text.as_bytes());
    hasher.finalize().to_hex()[..16].to_string()
}

fn slot_bytes(head: Head) -> Vec<u8> {
    let text = head.to_string();
    let mut slot = format!("{text} {}", check(&text)).into_bytes();
    slot.resize(SLOT_BYTES - 1, b' ');
    slot.push(b'\n');
    slot
}

fn parse_slot(slot: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(slot).ok()?.trim_end();
    let (head, sum) = text.split_once(' ')?;
    (sum == check(head))
        .then(|| Head::parse(head).ok())
        .flatten()
}

/// The head recorded in the head record of the store at `root`, `None` if there is none.
pub fn read_head(root: &Path) -> Result<Option<Head>> {
    let path = root.join(HEAD_FILE);
    let Some(file) = open_own(&path, OFlags::RDONLY)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(HEAD_BYTES + 1);
    file.take(HEAD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    if bytes.len() > HEAD_BYTES {
        return Err(Error::corrupt(format!(
            "{} is longer than the {HEAD_BYTES} bytes of a head record",
            path.display()
        )));
    }
    let garbled = || {
        Error::corrupt(format!(
            "{} holds neither a valid head slot nor a SEQ:HASH line",
            path.display()
        ))
    };
    if bytes.len() == 2 * SLOT_BYTES {
        let newest = bytes
            .chunks(SLOT_BYTES)
            .filter_map(parse_slot)
            .max_by_key(|h| h.seq);
        return newest.map(Some).ok_or_else(garbled);
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| garbled())?;
    Head::parse(text).map(Some).map_err(|_| garbled())
}

// ---------------------------------------------------------------------------------------------
// What the store's files must be.
// ---------------------------------------------------------------------------------------------

/// The prefix of sled's snapshot files (`snap.LSN`, and `snap.LSN.generating` while one is
/// written); sled reads the newest name with this prefix.
const SNAPSHOT_PREFIX: &[u8] = b"snap.";

/// sled's directory of large values, one file per value.
const BLOBS_DIR: &str = "blobs";

/// What a store keeps under a name: a regular file or a directory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    File,
    Dir,
}

impl Kind {
    fn matches(self, found: FileType) -> bool {
        match self {
            Kind::File => found.is_file(),
            Kind::Dir => found.is_dir(),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
        }
    }
}

/// What the store keeps at `name` in its directory; `None` for a name neither sled nor Mnemo
/// opens.
fn kept_at(name: &OsStr) -> Option<Kind> {
    let bytes = name.as_bytes();
    if bytes == b"db" || bytes == b"conf" || bytes == HEAD_FILE.as_bytes() {
        Some(Kind::File)
    } else if bytes == BLOBS_DIR.as_bytes() {
        Some(Kind::Dir)
    } else if bytes.starts_with(SNAPSHOT_PREFIX) {
        Some(Kind::File)
    } else {
        None
    }
}

/// Whether sled may replace the file at `name` itself while it opens the store (a snapshot).
fn replaced_by_sled(name: &OsStr) -> bool {
    name.as_bytes().starts_with(SNAPSHOT_PREFIX)
}

/// What a file is, in words, as `lstat` sees it (a link is not followed).
fn describe(found: FileType) -> &'static str {
    if found.is_symlink() {
        "a symbolic link"
    } else if found.is_fifo() {
        "a FIFO (named pipe)"
    } else if found.is_char_device() {
        "a character device"
    } else if found.is_block_device() {
        "a block device"
    } else if found.is_socket() {
        "a socket"
    } else if found.is_dir() {
        "a directory"
    } else if found.is_file() {
        "a regular file"
    } else {
        "a file of an unknown type"
    }
}

/// The error for `path`, found to be `found` where the store keeps `kept`.
fn unsafe_file(path: &Path, found: FileType, kept: Kind) -> Error {
    let target = if found.is_symlink() {
        std::fs::read_link(path)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let noun = match kept {
        Kind::File => "file",
        Kind::Dir => "directory",
    };
    let how = if found.is_symlink() {
        format!(
            "Mnemo never follows a link inside a store: if it points at the store's real {noun}, move that {noun} here in place of the link; otherwise remove the link and"
        )
    } else if found.is_file() || found.is_dir() {
        "move it out of the store directory and".to_string()
    } else {
        "Mnemo opens no pipe, device or socket in a store: move it out of the store directory and"
            .to_string()
    };
    let fix = format!("{how} {}", remedy(path));
    Error::UnsafeFile {
        path: path.to_path_buf(),
        what: format!(
            "is {}{target}, where a store keeps {}",
            describe(found),
            kept.noun()
        ),
        fix,
    }
}

/// What brings a store back once the file at `path` is out of the way.
fn remedy(path: &Path) -> &'static str {
    let name = path.file_name().unwrap_or_default().as_bytes();
    if name == b"conf" || name.starts_with(SNAPSHOT_PREFIX) {
        "open the store again, which writes a new one"
    } else if name == HEAD_FILE.as_bytes() {
        "open the store again, which works without it (but cannot show a rollback of the log until the next durable write records the head)"
    } else {
        "restore the store from a backup"
    }
}

/// The error for a store directory that is not a directory (the caller has dealt with a regular
/// file, which needs its own advice).
fn unsafe_store_dir(path: &Path, found: FileType) -> Error {
    if found.is_symlink() {
        let target = std::fs::read_link(path)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default();
        return Error::UnsafeFile {
            path: path.to_path_buf(),
            what: format!("is a symbolic link{target}, where a store directory is expected"),
            fix: "Mnemo does not follow a link to a store: pass the directory it points to instead"
                .into(),
        };
    }
    Error::UnsafeFile {
        path: path.to_path_buf(),
        what: format!(
            "is {}, where a store directory is expected",
            describe(found)
        ),
        fix: "pass the path of a store directory (or of a new one to create)".into(),
    }
}

/// The error for a file that `O_NOFOLLOW` or `fstat` found to differ from what `lstat` saw a
/// moment before: what it is now if that can be seen, else that it was replaced.
fn refused_now(path: &Path, kept: Kind) -> Error {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !kept.matches(meta.file_type()) => unsafe_file(path, meta.file_type(), kept),
        _ => replaced(path),
    }
}

fn replaced(path: &Path) -> Error {
    Error::UnsafeFile {
        path: path.to_path_buf(),
        what: "was replaced by another file while the store was being opened".into(),
        fix: "something else is changing the store directory: stop it, check the store's files, and open the store again".into(),
    }
}

/// A name sled cannot handle: sled 0.34 unwraps the UTF-8 form of blob and snapshot names.
fn not_utf8(path: &Path) -> Error {
    Error::UnsafeFile {
        path: path.to_path_buf(),
        what: "has a name that is not UTF-8, which sled cannot handle".into(),
        fix: "move it out of the store directory".into(),
    }
}

/// Which file a path is: device, inode and file type.
/// A directory's device and inode numbers: which directory a path named when it was looked at
/// (a directory renamed into its place is another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirId {
    /// The device number.
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
}

impl DirId {
    /// The directory at `path` now.
    #[cfg(feature = "client")]
    pub fn of(path: &Path) -> std::io::Result<DirId> {
        let meta = std::fs::metadata(path)?;
        Ok(DirId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Identity {
    dev: u64,
    ino: u64,
    format: u32,
}

impl Identity {
    fn of(meta: &Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            format: meta.mode() & 0o170_000,
        }
    }
}

/// The files of one store that sled and Mnemo open, checked to be what the store keeps there,
/// with the identity of each that sled opens by path and keeps (see the module docs).
#[derive(Debug)]
pub(crate) struct StoreFiles {
    /// The store directory, `db`, `conf` and `blobs/` as they were checked.
    identities: Vec<(PathBuf, Identity)>,
}

impl StoreFiles {
    /// Checks the store directory `root` and every file in it that sled or Mnemo opens: each must
    /// be what the store keeps there (a regular file, or a directory for `root` and `blobs/`), or
    /// this is [`Error::UnsafeFile`]. A `root` that does not exist yet passes (sled creates it);
    /// the caller refuses a `root` that is a regular file with its own advice. Opens nothing.
    pub(crate) fn check(root: &Path) -> Result<StoreFiles> {
        let mut identities = Vec::new();
        let meta = match std::fs::symlink_metadata(root) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StoreFiles { identities });
            }
            Err(e) => return Err(Error::io(root, e)),
        };
        if !meta.is_dir() {
            return Err(unsafe_store_dir(root, meta.file_type()));
        }
        identities.push((root.to_path_buf(), Identity::of(&meta)));
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
            let entry = entry.map_err(|e| Error::io(root, e))?;
            if let Some(kind) = kept_at(&entry.file_name()) {
                entries.push((entry.file_name(), kind));
            }
        }
        // In name order, so the same store always names the same file first.
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            let path = root.join(&name);
            if name.to_str().is_none() {
                return Err(not_utf8(&path));
            }
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, e)),
            };
            if !kind.matches(meta.file_type()) {
                return Err(unsafe_file(&path, meta.file_type(), kind));
            }
            if kind == Kind::File {
                let bytes = name.as_bytes();
                let sparse_checked = bytes == b"db" || bytes.starts_with(SNAPSHOT_PREFIX);
                extent::check(&path, meta.len(), bytes == b"conf", sparse_checked)?;
            }
            if name == BLOBS_DIR {
                check_blobs(&path)?;
            }
            if name != HEAD_FILE && !replaced_by_sled(&name) {
                identities.push((path, Identity::of(&meta)));
            }
        }
        Ok(StoreFiles { identities })
    }

    /// Run right after sled opened the store at `root` (by path): the store passes
    /// [`StoreFiles::check`] again (so whatever sled created is what a store keeps), and the
    /// store directory, `db`, `conf` and `blobs/` that were checked before are still the same
    /// files, or this is [`Error::UnsafeFile`]. Catches a swap made between the check and sled's
    /// open that is still in place; one undone before this runs is the window the module docs
    /// describe. Returns the store directory's identity: the directory sled has open.
    pub(crate) fn confirm(&self, root: &Path) -> Result<DirId> {
        let now = StoreFiles::check(root)?;
        for (path, before) in &self.identities {
            let same = now
                .identities
                .iter()
                .any(|(p, id)| p == path && id == before);
            if !same {
                return Err(replaced(path));
            }
        }
        now.identities
            .iter()
            .find(|(p, _)| p == root)
            .map(|(_, id)| DirId {
                dev: id.dev,
                ino: id.ino,
            })
            .ok_or_else(|| replaced(root))
    }
}

/// Every entry of sled's `blobs/` must be a regular file with a UTF-8 name.
fn check_blobs(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if entry.file_name().to_str().is_none() {
            return Err(not_utf8(&path));
        }
        // `DirEntry::metadata` does not follow a link.
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            // sled removes blobs from its own threads.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        if !meta.is_file() {
            return Err(unsafe_file(&path, meta.file_type(), Kind::File));
        }
    }
    Ok(())
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The start of the names of the directories a redaction of `store` writes beside it:
/// `.NAME.redact-`.
pub(crate) fn redaction_prefix(store: &Path) -> Result<String> {
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", store.display())))?;
    Ok(format!(".{name}.redact-"))
}

/// Whether `rest` (what follows `.NAME.redact-` in a name) is a tag this module makes: 16
/// lower-case hex digits, then nothing, or (for the directory a killed creation of the copy
/// left) `.creating-` and more.
fn is_tag(rest: &str, creating: bool) -> bool {
    let (tag, tail) = rest.split_at(rest.len().min(16));
    tag.len() == 16
        && tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && if creating {
            tail.starts_with(".creating-")
        } else {
            tail.is_empty()
        }
}

/// Removes the directories a killed `mnemo restore` into `store` left beside it
/// (`.NAME.restore-` and 16 hex digits, each a partial copy of a replica, which may hold what a
/// later redaction erased); never a link, never any other name. Run by every restore and every
/// open for writing: a restore refuses a path that holds a store, so none is under way then.
pub(crate) fn remove_restore_leftovers(store: &Path) -> Result<()> {
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", store.display())))?;
    let prefix = format!(".{name}.restore-");
    for entry in
        std::fs::read_dir(parent_of(store)).map_err(|e| Error::io("the store's directory", e))?
    {
        let entry = entry.map_err(|e| Error::io("the store's directory", e))?;
        let left = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .is_some_and(|rest| is_tag(rest, false));
        if left && entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| Error::io("an interrupted restore's directory", e))?;
        }
    }
    Ok(())
}

/// Removes what an interrupted redaction left beside `store`: directories named as its copies
/// are (`.NAME.redact-` and 16 hex digits: a copy being written, or after the exchange the store
/// as it was, holding what was erased), never a link, never any other name, and not the copy of
/// tag `ours` (a redaction's own). Run by every redaction and every open for writing.
pub(crate) fn remove_redaction_leftovers(store: &Path, ours: Option<&str>) -> Result<()> {
    let ours = ours.unwrap_or("-");
    let prefix = redaction_prefix(store)?;
    for entry in
        std::fs::read_dir(parent_of(store)).map_err(|e| Error::io("the store's directory", e))?
    {
        let entry = entry.map_err(|e| Error::io("the store's directory", e))?;
        let name = entry.file_name();
        // The copy, and the directory a killed creation of the copy left (`.COPY.creating-*`).
        let Some(name) = name.to_str() else {
            continue;
        };
        let left = name
            .strip_prefix(&prefix)
            .is_some_and(|rest| is_tag(rest, false) && rest != ours)
            || name
                .strip_prefix('.')
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|rest| is_tag(rest, true) && !rest.starts_with(ours));
        if left && entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| Error::io("an interrupted redaction's directory", e))?;
        }
    }
    Ok(())
}

/// The file a running `mnemo serve` keeps in the store directory (see `discovery`): the store's
/// own, so a redaction carries it into the store it writes.
pub const SERVER_FILE: &str = "mnemo-server.json";

/// The store owner's signing key for replica checkpoints (`mnemo key create`), mode 0600: the
/// store's own, so a redaction carries it too.
pub const KEY_FILE: &str = "mnemo-key";

/// The verifier key a store restored or followed from a replica trusts that replica's head
/// checkpoints to be signed by (`mnemo restore --key`, `mnemo serve --follow URL --key`), mode
/// 0600: a later `serve --follow` without `--key` still refuses a head it did not sign.
pub const TRUST_FILE: &str = "mnemo-replica-key";

/// The label a memory store of the API keeps beside the store's log (its name, description and
/// metadata), in the store directory.
pub const LABEL_FILE: &str = "mnemo-memory-store.json";

/// The longest of those files carried: they hold a URL and a token, or a key.
const CARRIED_MAX: u64 = 64 * 1024;

/// Copies the store's own files beside sled's that a rewritten store must keep (the server file,
/// so a server that redacts the store it holds stays findable; the signing key) from the store
/// at `from` into the store being written at `to` (and the replica key it trusts), each if it is there and a regular file (a link
/// or a pipe planted at its name is no file of the store's: left behind, never followed), with
/// its permissions, durably.
pub(crate) fn carry_own_files(from: &Path, to: &Path) -> Result<()> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    for name in [SERVER_FILE, KEY_FILE, TRUST_FILE, LABEL_FILE] {
        let source = from.join(name);
        let Ok(Some(file)) = open_own(&source, OFlags::RDONLY) else {
            continue;
        };
        let meta = file.metadata().map_err(|e| Error::io(&source, e))?;
        let mut bytes = Vec::new();
        file.take(CARRIED_MAX)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&source, e))?;
        let target = to.join(name);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&target)
            .map_err(|e| Error::io(&target, e))?;
        out.write_all(&bytes)
            .and_then(|()| out.set_permissions(meta.permissions()))
            .and_then(|()| out.sync_all())
            .map_err(|e| Error::io(&target, e))?;
    }
    File::open(to)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| Error::io(to, e))
}

/// Reads the store's own private file `name` (the server file) from the store directory
/// `store_dir`, at most `max` bytes; `Ok(None)` if there is none. It is read only if it is a
/// regular file (a link, pipe or device at its name is refused unopened), owned by the store
/// directory's owner, and neither readable nor writable by anyone else: a file another local user
/// planted (in a directory others may write to) or could have read is not the owner's word.
#[cfg(any(feature = "client", feature = "replicate"))]
pub(crate) fn read_private(store_dir: &Path, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
    let path = store_dir.join(name);
    let Some(file) = open_own(&path, OFlags::RDONLY)? else {
        return Ok(None);
    };
    let dir = std::fs::metadata(store_dir).map_err(|e| Error::io(store_dir, e))?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    if meta.uid() != dir.uid() {
        return Err(Error::io(
            &path,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "it is owned by uid {}, not by the store directory's owner (uid {}): another user may have planted it, so it is not trusted; remove it, and make the store directory writable by its owner only (chmod 700)",
                    meta.uid(),
                    dir.uid()
                ),
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Error::io(
            &path,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "its mode is {:04o}, so users other than its owner may read or change it; it is not trusted: remove it (a server writes it anew, mode 0600)",
                    meta.mode() & 0o7777
                ),
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    Ok(Some(bytes))
}

/// `open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)`: a link is not followed (`ELOOP`)
/// and a pipe does not block the open. A file it creates is its owner's alone (mode 0600).
fn open_nofollow(path: &Path, flags: OFlags) -> std::result::Result<File, Errno> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)).map(File::from)
}

/// Opens Mnemo's own file `path` with `flags` (`O_RDONLY`, or `O_WRONLY | O_CREAT`), only if it
/// is a regular file: `lstat` first (a link, pipe or device is refused without being opened),
/// then [`open_nofollow`], then `fstat` of what was opened, which must be the file `lstat` saw.
/// `None` if there is no such file and `flags` does not create one.
fn open_own(path: &Path, flags: OFlags) -> Result<Option<File>> {
    let before = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Some(Identity::of(&meta)),
        Ok(meta) => return Err(unsafe_file(path, meta.file_type(), Kind::File)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(path, e)),
    };
    let creates = flags.contains(OFlags::CREATE);
    if before.is_none() && !creates {
        return Ok(None);
    }
    let file = match open_nofollow(path, flags) {
        Ok(file) => file,
        Err(e) if e == Errno::NOENT && !creates => return Ok(None),
        // A link (`ELOOP`) or a pipe with no reader (`ENXIO`) took its place since the `lstat`.
        Err(e) if e == Errno::LOOP || e == Errno::NXIO => {
            return Err(refused_now(path, Kind::File));
        }
        Err(e) => return Err(Error::io(path, e.into())),
    };
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    let opened = Identity::of(&meta);
    if !meta.is_file() || before.is_some_and(|b| b != opened) {
        return Err(refused_now(path, Kind::File));
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventHash, Seq};

    fn head(seq: u64, byte: u8) -> Head {
        Head {
            seq: Seq(seq),
            hash: EventHash([byte; 32]),
        }
    }

    #[test]
    fn the_newest_whole_slot_wins_and_a_torn_slot_falls_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut record = HeadRecord::default();
        assert_eq!(read_head(dir.path()).expect("read"), None);
        record.write(dir.path(), head(7, 1)).expect("write 7");
        record.write(dir.path(), head(8, 2)).expect("write 8");
        assert_eq!(read_head(dir.path()).expect("read"), Some(head(8, 2)));

        // Tear slot 0 (where seq 8 lives): the record falls back to seq 7.
        let path = dir.path().join(HEAD_FILE);
        let mut bytes = std::fs::read(&path).expect("read file");
        bytes[5] ^= 0x55;
        std::fs::write(&path, &bytes).expect("tear");
        assert_eq!(read_head(dir.path()).expect("read"), Some(head(7, 1)));

        // Both slots torn: an error, not a silent "no record".
        bytes[SLOT_BYTES + 5] ^= 0x55;
        std::fs::write(&path, &bytes).expect("tear both");
        assert!(matches!(read_head(dir.path()), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn a_record_of_the_earlier_layout_is_read_and_rewritten() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(HEAD_FILE);
        std::fs::write(&path, format!("{}\n", head(3, 9))).expect("legacy record");
        assert_eq!(read_head(dir.path()).expect("read"), Some(head(3, 9)));
        HeadRecord::default()
            .write(dir.path(), head(4, 5))
            .expect("write");
        assert_eq!(
            std::fs::metadata(&path).expect("stat").len(),
            2 * SLOT_BYTES as u64
        );
        assert_eq!(read_head(dir.path()).expect("read"), Some(head(4, 5)));
    }

    #[test]
    fn a_sync_after_a_new_file_appears_syncs_it_and_its_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut sync = DiskSync::default();
        // Each fsync is one step of the store's failpoints: the count is the fsyncs made.
        let fsyncs = Failpoints::default();
        std::fs::write(dir.path().join("db"), b"log").expect("db");
        sync.sync(dir.path(), &fsyncs).expect("first sync");
        assert_eq!(fsyncs.steps(), 2, "db and its directory");
        assert!(sync.dirs.contains_key(dir.path()));
        let before = sync.dirs[dir.path()].len();
        std::fs::create_dir(dir.path().join("blobs")).expect("blobs");
        std::fs::write(dir.path().join("blobs").join("1"), b"blob").expect("blob");
        sync.sync(dir.path(), &fsyncs).expect("second sync");
        assert_eq!(
            fsyncs.steps(),
            2 + 4,
            "db, blobs/1, blobs and the changed root"
        );
        assert_eq!(sync.dirs[dir.path()].len(), before + 1);
        assert!(sync.files.contains_key(&dir.path().join("blobs").join("1")));
        sync.sync(dir.path(), &fsyncs).expect("third sync");
        assert_eq!(
            fsyncs.steps(),
            6 + 1,
            "nothing changed but db, which sled may have written"
        );
        // A failed fsync forgets what was synced: the next sync does everything again.
        fsyncs.countdown(1);
        sync.sync(dir.path(), &fsyncs)
            .expect_err("the injected fsync failure");
        sync.sync(dir.path(), &fsyncs)
            .expect("a sync after the failure");
        assert_eq!(fsyncs.steps(), 8 + 4, "every file and directory again");
    }

    #[test]
    fn a_file_removed_after_it_was_listed_is_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let blob = dir.path().join("2");
        std::fs::write(&blob, b"blob").expect("blob");
        let meta = std::fs::metadata(&blob).expect("metadata");
        std::fs::remove_file(&blob).expect("remove");
        let mut sync = DiskSync::default();
        sync.sync_file(dir.path(), blob.clone(), &meta, &Failpoints::default())
            .expect("a vanished file is not an error");
        assert!(!sync.files.contains_key(&blob), "nothing was synced");
    }

    fn fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
    }

    /// Makes a hostile file at a path.
    type Maker = fn(&Path);

    fn refused_naming(result: Result<impl std::fmt::Debug>, path: &Path) {
        match result {
            Err(Error::UnsafeFile { path: named, .. }) if named == path => {}
            other => panic!(
                "expected UnsafeFile naming {}, got {other:?}",
                path.display()
            ),
        }
    }

    #[test]
    fn a_store_file_that_is_a_link_a_pipe_or_a_directory_is_refused_by_name() {
        let makers: [(&str, Maker); 4] = [
            ("link to /dev/zero", |p| {
                std::os::unix::fs::symlink("/dev/zero", p).expect("symlink")
            }),
            ("link to a regular file", |p| {
                let target = p.with_extension("real");
                std::fs::write(&target, b"x").expect("target");
                std::os::unix::fs::symlink(&target, p).expect("symlink")
            }),
            ("fifo", fifo),
            ("directory", |p| std::fs::create_dir(p).expect("mkdir")),
        ];
        for name in ["db", "conf", "snap.00000000000006E5", HEAD_FILE] {
            for (what, make) in makers {
                let dir = tempfile::tempdir().expect("temp dir");
                let root = dir.path().join("store");
                std::fs::create_dir(&root).expect("store dir");
                std::fs::write(root.join("db"), b"log").expect("db");
                let file = root.join(name);
                let _ = std::fs::remove_file(&file);
                make(&file);
                eprintln!("{name} as {what}");
                refused_naming(StoreFiles::check(&root), &file);
            }
        }
    }

    #[test]
    fn blobs_must_be_a_directory_of_regular_files_with_utf8_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let blobs = dir.path().join(BLOBS_DIR);
        std::fs::write(&blobs, b"not a directory").expect("blobs as a file");
        refused_naming(StoreFiles::check(dir.path()), &blobs);
        std::fs::remove_file(&blobs).expect("rm");
        std::fs::create_dir(&blobs).expect("blobs");
        std::fs::write(blobs.join("17"), b"blob").expect("blob");
        StoreFiles::check(dir.path()).expect("a directory of regular files passes");
        fifo(&blobs.join("18"));
        refused_naming(StoreFiles::check(dir.path()), &blobs.join("18"));
        std::fs::remove_file(blobs.join("18")).expect("rm");
        let odd = blobs.join(OsStr::from_bytes(b"1\xff"));
        std::fs::write(&odd, b"blob").expect("a name that is not UTF-8");
        refused_naming(StoreFiles::check(dir.path()), &odd);
    }

    #[test]
    fn the_store_directory_must_be_a_directory_not_a_link_to_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("real");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        refused_naming(StoreFiles::check(&link), &link);
        let pipe = dir.path().join("pipe");
        fifo(&pipe);
        refused_naming(StoreFiles::check(&pipe), &pipe);
        let missing = dir.path().join("new");
        StoreFiles::check(&missing).expect("a store to be created passes");
    }

    #[test]
    fn a_file_replaced_after_the_check_is_refused_by_confirm() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        std::fs::write(root.join("db"), b"log").expect("db");
        std::fs::write(root.join("conf"), b"conf").expect("conf");
        let checked = StoreFiles::check(root).expect("check");
        checked.confirm(root).expect("nothing changed");
        // A regular file still, but another one: what sled opened by path is not what was checked.
        std::fs::write(root.join("conf.new"), b"conf").expect("new conf");
        std::fs::rename(root.join("conf.new"), root.join("conf")).expect("swap");
        refused_naming(checked.confirm(root), &root.join("conf"));
    }

    #[test]
    fn the_head_record_is_never_read_through_a_link_or_a_pipe_nor_past_its_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(HEAD_FILE);
        fifo(&path);
        // A pipe would block an open for reading (and a read) forever: refused without opening.
        refused_naming(read_head(dir.path()), &path);
        std::fs::remove_file(&path).expect("rm");
        std::os::unix::fs::symlink("/dev/zero", &path).expect("symlink");
        refused_naming(read_head(dir.path()), &path);
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, vec![b'7'; 1 << 20]).expect("a long file");
        match read_head(dir.path()) {
            Err(Error::Corrupt { what }) => assert!(what.contains("longer than"), "{what}"),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn the_head_record_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"precious").expect("outside");
        let store = dir.path().join("store");
        std::fs::create_dir(&store).expect("store");
        let path = store.join(HEAD_FILE);
        std::os::unix::fs::symlink(&outside, &path).expect("symlink");
        refused_naming(HeadRecord::default().write(&store, head(1, 1)), &path);
        assert_eq!(std::fs::read(&outside).expect("read"), b"precious");
        std::fs::remove_file(&path).expect("rm");
        fifo(&path);
        // No reader: a plain open for writing would block here forever.
        refused_naming(HeadRecord::default().write(&store, head(1, 1)), &path);
    }
}
