//! A data directory: the stores one `mnemo serve --data DIR` serves, each the directory
//! `DIR/NAME`, a complete store on its own. What the server and `mnemo store` (on `--data DIR`
//! directly, when no server holds it) both do to the directory: check names, find, list, make
//! and remove stores, and hold the directory's lock.
//!
//! **Names** are `[a-z0-9][a-z0-9_-]{0,63}` ([`check_store_name`]); anything else (a `..`, a
//! `/`, a capital) is refused before any file is touched. A name whose directory entry is not a
//! real directory holding sled's `db` (a symlink or a FIFO planted in `DIR`) is no store.
//!
//! One process at a time changes a data directory: it holds an exclusive lock on
//! [`DATA_LOCK`] while it does ([`lock`]).

use std::fs::File;
use std::path::{Path, PathBuf};

/// The lock file a data server (or `mnemo store` on the directory) holds in it.
pub(crate) const DATA_LOCK: &str = "mnemo-data.lock";

/// The file in a fleet node's data directory naming its fleet's bucket (never a store's name).
pub(crate) const FLEET_MARKER: &str = "mnemo-fleet";

/// The longest store name, in bytes.
pub const MAX_STORE_NAME: usize = 64;

/// Whether `name` is a store name of a data directory: `[a-z0-9][a-z0-9_-]{0,63}`. The error
/// says what a name is.
pub fn check_store_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_STORE_NAME
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
    if valid && name == FLEET_MARKER {
        Err(format!(
            "{name:?} is the name of the file in which a fleet node's directory names its fleet, so no store can have it; choose another name"
        ))
    } else if valid {
        Ok(())
    } else {
        let shown: String = name.chars().take(80).collect();
        Err(format!(
            "{shown:?} is not a store name: a name is 1 to {MAX_STORE_NAME} of a-z, 0-9, _ and -, starting with a letter or digit, such as \"user-1042\""
        ))
    }
}

/// The directory of the store `name` under `dir`, if it holds one: a valid name, a real
/// directory (not a link) with sled's `db` file in it.
pub(crate) fn store_dir(dir: &Path, name: &str) -> Option<PathBuf> {
    check_store_name(name).ok()?;
    let path = dir.join(name);
    let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
    let has_db = std::fs::symlink_metadata(path.join("db")).is_ok_and(|m| m.is_file());
    (is_dir && has_db).then_some(path)
}

/// The names of the stores under `dir` after `after`, sorted, at most `limit`, and whether
/// there are more. Entries that are not stores ([`store_dir`]: another name, a link, a file, a
/// directory without a store in it) are left out.
pub(crate) fn list(
    dir: &Path,
    after: Option<&str>,
    limit: usize,
) -> std::io::Result<(Vec<String>, bool)> {
    let mut candidates = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if check_store_name(&name).is_ok() && after.is_none_or(|after| name.as_str() > after) {
            candidates.push(name);
        }
    }
    candidates.sort_unstable();
    // Only as many entries are looked at as the page needs (and one more, to say there are).
    let mut names: Vec<String> = candidates
        .into_iter()
        .filter(|name| store_dir(dir, name).is_some())
        .take(limit.saturating_add(1))
        .collect();
    let more = names.len() > limit;
    names.truncate(limit);
    Ok((names, more))
}

/// Removes the store directory `path` (of `dir`): renamed out of the way at once (so no
/// request finds half a store), made durable, then removed.
#[cfg(feature = "serve")]
pub(crate) fn remove(dir: &Path, path: &Path) -> std::io::Result<()> {
    let gone = rename_away(dir, path)?;
    std::fs::remove_dir_all(&gone)
}

/// Renames the store directory `path` (of `dir`) out of the way, durably; returns where it is.
fn rename_away(dir: &Path, path: &Path) -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let nonce = format!("{}-{nanos}", std::process::id());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let gone = dir.join(format!(".deleted-{name}-{nonce}"));
    std::fs::rename(path, &gone)?;
    File::open(dir)?.sync_all()?;
    Ok(gone)
}

/// Whether `dir` is a store itself (where a data directory is wanted).
pub(crate) fn is_store(dir: &Path) -> bool {
    dir.join("db").exists() || dir.join("conf").exists()
}

/// Takes the data directory's lock, exclusively, without waiting: `Ok(None)` if another
/// process holds it. The lock lasts as long as the file returned is open.
pub(crate) fn lock(dir: &Path) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(DATA_LOCK))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A data directory of stores taken for changes made on disk directly, when no server serves it
/// (`mnemo store create|list|delete --data DIR`): it holds the directory's lock while it lives,
/// so no `mnemo serve --data` starts on it halfway.
#[derive(Debug)]
pub struct DataDir {
    dir: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Whether `name` is a store name of a data directory: `[a-z0-9][a-z0-9_-]{0,63}`. The
    /// error says what a name is.
    pub fn check_name(name: &str) -> Result<(), String> {
        check_store_name(name)
    }

    /// Takes the data directory `dir`: refused when it is not a directory, is a store itself,
    /// or another process (a data server, another change) holds its lock.
    pub fn lock(dir: &Path) -> crate::Result<DataDir> {
        if !dir.is_dir() {
            return Err(crate::Error::InvalidArgument(format!(
                "{} is no data directory: `mnemo serve --data {}` makes one",
                dir.display(),
                dir.display()
            )));
        }
        if is_store(dir) {
            return Err(crate::Error::InvalidArgument(format!(
                "{} is a store, not a data directory of stores",
                dir.display()
            )));
        }
        let Some(lock) = lock(dir).map_err(|e| crate::Error::io(dir.join(DATA_LOCK), e))? else {
            return Err(crate::Error::InvalidArgument(format!(
                "another process holds {} (a `mnemo serve --data` starting or stopping, or another `mnemo store`): try again in a moment",
                dir.display()
            )));
        };
        Ok(DataDir {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Makes the empty store `name`; returns its directory. Refused for a name that is not a
    /// store name, or whose entry exists.
    pub fn create(&self, name: &str) -> crate::Result<PathBuf> {
        check_store_name(name).map_err(crate::Error::InvalidArgument)?;
        let path = self.dir.join(name);
        if store_dir(&self.dir, name).is_some() {
            return Err(crate::Error::InvalidArgument(format!(
                "the store {name:?} exists already in {}",
                self.dir.display()
            )));
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(crate::Error::InvalidArgument(format!(
                "{} is in the way: something that is not a store (a file, a link or a directory without one) has the name {name:?}; remove it, or choose another name",
                path.display()
            )));
        }
        drop(crate::store::log::Store::open(&path)?);
        Ok(path)
    }

    /// The names of its stores, sorted.
    pub fn names(&self) -> crate::Result<Vec<String>> {
        Ok(list(&self.dir, None, usize::MAX)
            .map_err(|e| crate::Error::io(&self.dir, e))?
            .0)
    }

    /// Removes the store `name` and all of it. Refused while another process has the store open
    /// (a `mnemo serve --db` of it, say): the store is held open here, so that none can, until
    /// it is renamed out of the way.
    pub fn delete(&self, name: &str) -> crate::Result<()> {
        check_store_name(name).map_err(crate::Error::InvalidArgument)?;
        let path = store_dir(&self.dir, name).ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "there is no store {name:?} in {}",
                self.dir.display()
            ))
        })?;
        let held = crate::store::log::Store::open(&path).map_err(|e| match e {
            crate::Error::Locked { .. } => crate::Error::InvalidArgument(format!(
                "another process has the store {name:?} open (a `mnemo serve --db {}`, or a program's client): stop it, then delete the store",
                path.display()
            )),
            other => other,
        })?;
        let gone = rename_away(&self.dir, &path).map_err(|e| crate::Error::io(&path, e))?;
        drop(held);
        std::fs::remove_dir_all(&gone).map_err(|e| crate::Error::io(&gone, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name taken by a store is refused as existing; one taken by something else, as in the way.
    #[test]
    fn the_name_of_a_fleet_nodes_marker_file_is_no_store_name() {
        let refused = check_store_name(FLEET_MARKER).expect_err("refused");
        assert!(refused.contains("fleet node"), "{refused}");
        assert!(check_store_name("mnemo-fleets").is_ok());
        assert!(check_store_name("notes").is_ok());
    }

    #[test]
    fn a_create_over_a_store_or_something_else_says_which() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::lock(dir.path()).expect("a data directory");
        data.create("made").expect("create");
        let again = data.create("made").expect_err("exists");
        assert!(again.to_string().contains("exists already"), "{again}");
        std::fs::write(dir.path().join("file"), b"x").expect("write");
        let in_the_way = data.create("file").expect_err("in the way");
        assert!(
            in_the_way.to_string().contains("in the way"),
            "{in_the_way}"
        );
        assert_eq!(std::fs::read(dir.path().join("file")).expect("read"), b"x");
    }

    /// A store another holder has open is never deleted from under it; once it is closed, it is.
    #[test]
    fn a_store_held_open_is_not_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::lock(dir.path()).expect("a data directory");
        let path = data.create("held").expect("create");
        let holder = crate::store::log::Store::open(&path).expect("open");
        let refused = data.delete("held").expect_err("refused while held");
        assert!(refused.to_string().contains("open"), "{refused}");
        assert!(path.join("db").exists(), "the store is still there");
        drop(holder);
        data.delete("held").expect("deleted once closed");
        assert!(!path.exists());
        assert_eq!(data.names().expect("names"), Vec::<String>::new());
    }

    #[test]
    fn a_name_is_lowercase_letters_digits_and_dashes_and_nothing_escapes() {
        for good in ["a", "user-1042", "0", "a_b", &"x".repeat(64)] {
            assert!(check_store_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "..",
            ".",
            "a/b",
            "/a",
            "A",
            "-a",
            "_a",
            "a.b",
            "a b",
            "é",
            &"x".repeat(65),
            "a\0",
            "mnemo-server.json",
        ] {
            let err = check_store_name(bad).expect_err(bad);
            assert!(err.contains("is not a store name"), "{err}");
        }
    }

    #[test]
    fn only_a_real_directory_with_a_db_is_a_store_and_a_second_lock_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("real")).expect("mkdir");
        std::fs::write(dir.path().join("real/db"), b"").expect("db");
        std::fs::create_dir(dir.path().join("empty")).expect("mkdir");
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).expect("ln");
        assert!(store_dir(dir.path(), "real").is_some());
        assert!(store_dir(dir.path(), "empty").is_none());
        assert!(store_dir(dir.path(), "link").is_none());
        assert!(store_dir(dir.path(), "../real").is_none());
        let (names, more) = list(dir.path(), None, 10).expect("list");
        assert_eq!(
            (names, more),
            (vec!["real".to_string()], false),
            "an empty directory is no store"
        );
        let held = lock(dir.path()).expect("lock").expect("free");
        assert!(
            lock(dir.path()).expect("lock").is_none(),
            "a second lock is refused"
        );
        drop(held);
        assert!(lock(dir.path()).expect("lock").is_some());
        let real = dir.path().join("real");
        remove(dir.path(), &real).expect("remove");
        assert!(!real.exists());
    }
}
