//! The hostile-file checks: what every file of a store must be before sled opens it (a regular
//! file, or a real directory for the store and `blobs/`; never a link, pipe, device or socket,
//! nor a name that is not UTF-8), confirmed again right after sled opened it, and the errors
//! that name a refused file and say what to do (see the [disk](super) docs).

use std::ffi::OsStr;
use std::fs::{FileType, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::extent;
use super::head_record::HEAD_FILE;
use crate::error::{Error, Result};

/// The prefix of sled's snapshot files (`snap.LSN`, and `snap.LSN.generating` while one is
/// written); sled reads the newest name with this prefix.
pub(super) const SNAPSHOT_PREFIX: &[u8] = b"snap.";

/// sled's directory of large values, one file per value.
pub(super) const BLOBS_DIR: &str = "blobs";

/// What a store keeps under a name: a regular file or a directory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    File,
    Dir,
}

impl Kind {
    /// Whether `found` is what the store keeps here.
    pub(super) fn matches(self, found: FileType) -> bool {
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
pub(super) fn kept_at(name: &OsStr) -> Option<Kind> {
    let bytes = name.as_bytes();
    if bytes == b"db"
        || bytes == b"conf"
        || bytes == HEAD_FILE.as_bytes()
        || bytes == super::VALUES_FILE.as_bytes()
    {
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
pub(super) fn unsafe_file(path: &Path, found: FileType, kept: Kind) -> Error {
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
pub(super) fn refused_now(path: &Path, kept: Kind) -> Error {
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

/// What identifies a file as the very one checked: its device, inode and type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Identity {
    dev: u64,
    ino: u64,
    format: u32,
}

impl Identity {
    /// The identity of the file `meta` describes.
    pub(super) fn of(meta: &Metadata) -> Identity {
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
                let sparse_checked = bytes == b"db"
                    || bytes == super::VALUES_FILE.as_bytes()
                    || bytes.starts_with(SNAPSHOT_PREFIX);
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

#[cfg(test)]
mod tests {
    use super::hostile::{Maker, fifo, refused_naming};
    use super::*;

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
}

/// Making hostile files in tests, and expecting them refused by name.
#[cfg(test)]
pub(super) mod hostile {
    use std::path::Path;

    use rustix::fs::Mode;

    use crate::error::{Error, Result};

    /// Makes a FIFO at `path`.
    pub(in crate::store::disk) fn fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
    }

    /// Asserts that `result` is [`Error::UnsafeFile`] naming `path`.
    pub(in crate::store::disk) fn refused_naming(
        result: Result<impl std::fmt::Debug>,
        path: &Path,
    ) {
        match result {
            Err(Error::UnsafeFile { path: named, .. }) if named == path => {}
            other => panic!(
                "expected UnsafeFile naming {}, got {other:?}",
                path.display()
            ),
        }
    }

    /// Makes a hostile file at a path.
    pub(in crate::store::disk) type Maker = fn(&Path);
}
