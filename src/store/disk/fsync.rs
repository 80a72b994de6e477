//! Durable sync: sled's `flush` does not make data durable (sled issue #1452), so a durable
//! commit also `fsync`s the store's files: only those that can hold unsynced data (see the
//! [disk](super) docs).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use rustix::io::Errno;

use super::checks::{Kind, refused_now, unsafe_file};
use super::head_record::HEAD_FILE;
use super::opening::open_nofollow;
use crate::error::{Error, Result};
use crate::store::failpoint::{Failpoint, Failpoints};

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
        // The head record is never synced (see the module docs); the value file syncs what it
        // appends before any record names it.
        if path.parent() == Some(root)
            && [HEAD_FILE, super::VALUES_FILE]
                .iter()
                .any(|own| path.file_name() == Some(own.as_ref()))
        {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
