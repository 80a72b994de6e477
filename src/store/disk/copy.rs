//! A private copy of a store's sled files, for reading a store without changing a byte of it.
//!
//! sled 0.34 has no read-only open: opening runs its recovery, which rewrites `db` and its
//! snapshot (and zeroes everything after a damaged record), and takes a write lock, so a read
//! through sled on the store itself changes evidence and fails on a read-only file system or for
//! a user who may only read. [`copy_for_reading`] copies `db`, `conf`, the snapshots and
//! `blobs/` into a fresh private directory while holding a shared `flock` on `db` (sled holds an
//! exclusive one while a store is open, so no writer changes the files during the copy), opening
//! each file as [`open_own`](super::opening::open_own) does: no link followed, no pipe opened, the file opened the
//! one checked. The head record is copied too, under the same lock. sled then opens the copy;
//! the store's own files are only read.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, OFlags};
use rustix::io::Errno;

use super::checks::{BLOBS_DIR, kept_at};
use super::opening::open_own;
use crate::error::{Error, Result};

/// Copies the sled files of the store at `root` into the empty directory `to`, waiting up to
/// `lock_wait` for a writer that holds the store to close it ([`Error::Locked`] after that).
/// Mnemo's head record is copied under the same lock, so the copy's log and recorded head are
/// of one moment (read in place after the lock, a writer could have moved the head since).
pub(crate) fn copy_for_reading(root: &Path, to: &Path, lock_wait: Duration) -> Result<()> {
    let _shared = lock_shared(root, lock_wait)?;
    let mut names: Vec<_> = std::fs::read_dir(root)
        .map_err(|e| Error::io(root, e))?
        .filter_map(|entry| entry.ok().map(|e| e.file_name()))
        .filter(|name| kept_at(name).is_some())
        .collect();
    names.sort_unstable();
    for name in names {
        let from = root.join(&name);
        if name == BLOBS_DIR {
            copy_blobs(&from, &to.join(&name))?;
        } else {
            copy_file(&from, &to.join(&name))?;
        }
    }
    Ok(())
}

/// A shared `flock` on `root/db`, held until dropped; none when there is no `db` yet.
fn lock_shared(root: &Path, wait: Duration) -> Result<Option<std::fs::File>> {
    let db = root.join("db");
    let Some(file) = open_own(&db, OFlags::RDONLY)? else {
        return Ok(None);
    };
    let deadline = Instant::now() + wait;
    loop {
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => return Ok(Some(file)),
            Err(e) if e == Errno::WOULDBLOCK && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e == Errno::WOULDBLOCK => {
                return Err(Error::Locked {
                    path: root.to_path_buf(),
                });
            }
            Err(e) => return Err(Error::io(&db, e.into())),
        }
    }
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    // Gone since the listing (sled removes snapshots of its own): nothing to copy.
    let Some(mut source) = open_own(from, OFlags::RDONLY)? else {
        return Ok(());
    };
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| Error::io(to, e))?;
    // `std::io::copy` uses `copy_file_range` on Linux: a reflink where the file system has them.
    std::io::copy(&mut source, &mut target).map_err(|e| {
        // A full or read-only file system is the copy's side; anything else, the store's.
        let side = match e.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::ReadOnlyFilesystem => to,
            _ => from,
        };
        Error::io(side, e)
    })?;
    Ok(())
}

fn copy_blobs(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir(to).map_err(|e| Error::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        copy_file(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// The name prefix of a read's private copy; the process id follows, then a random suffix.
pub(crate) const COPY_PREFIX: &str = "mnemo-read-";

/// Removes the private copies under `tmp` that a read killed before it could clean up left
/// (SIGTERM, kill -9): directories named [`COPY_PREFIX`]`PID-…`, owned by `uid`, whose process
/// is gone (`/proc/PID` missing). Best effort: anything unexpected is left alone.
pub(crate) fn sweep_stale_copies(tmp: &Path, uid: u32) {
    use std::os::unix::fs::MetadataExt;
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(COPY_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // `DirEntry::metadata` does not follow a link: only real directories of this user.
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
