//! A new store built beside its path and renamed into place once whole: an import into a new
//! store (`mnemo import`, plain files or the memory-stores API's JSON) leaves nothing at the path
//! if it fails or is killed. The directory it builds in is `.NAME.importing-PID-STAMP` beside the
//! path; one a killed import left (its process gone) is removed by the next import into that
//! path, never a link, never another name.

use std::path::{Path, PathBuf};

use super::parent_of;
use crate::error::{Error, Result};

/// The start of the names of the directories an import into `store` builds in.
fn prefix(store: &Path) -> Option<String> {
    store
        .file_name()
        .and_then(|n| n.to_str())
        .map(|name| format!(".{name}.importing-"))
}

/// Where an import into `db` builds its new store, after removing what killed imports into
/// `db` left: `None` when `db` is not new (a store, or anything else, which opening refuses, is
/// there) or its directory is not there to build in (the import then opens `db` itself, which
/// says why).
pub(crate) fn staging_beside(db: &Path) -> Result<Option<PathBuf>> {
    let unborn = match std::fs::symlink_metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(Error::io(db, e)),
        Ok(meta) => {
            meta.is_dir()
                && std::fs::read_dir(db)
                    .map_err(|e| Error::io(db, e))?
                    .next()
                    .is_none()
        }
    };
    let (Some(prefix), parent) = (prefix(db), parent_of(db)) else {
        return Ok(None);
    };
    // `NAME/.` and `.` name the directory itself: nothing can be renamed onto them.
    let raw = db.as_os_str().as_encoded_bytes();
    let renamable = !(raw == b"."
        || raw == b".."
        || raw.ends_with(b"/.")
        || raw.ends_with(b"/..")
        || raw.ends_with(b"/"));
    if !unborn || !renamable || !parent.is_dir() {
        return Ok(None);
    }
    remove_abandoned(parent, &prefix)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Ok(Some(parent.join(format!(
        "{prefix}{}-{stamp:08x}",
        std::process::id()
    ))))
}

/// Removes the directories under `parent` named `PREFIX` ‖ PID ‖ `-` ‖ 8 hex digits whose
/// process is gone (a killed import's); never a link, never any other name.
fn remove_abandoned(parent: &Path, prefix: &str) -> Result<()> {
    let entries = std::fs::read_dir(parent).map_err(|e| Error::io(parent, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(parent, e))?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(abandoned_pid)
        else {
            continue;
        };
        if pid != std::process::id() && !alive(pid) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| Error::io("a killed import's directory", e))?;
        }
    }
    Ok(())
}

/// The pid in `rest` (what follows the prefix): `PID-XXXXXXXX`, 8 lower-case hex digits.
fn abandoned_pid(rest: &str) -> Option<u32> {
    let (pid, stamp) = rest.split_once('-')?;
    let hex = stamp.len() == 8
        && stamp
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    hex.then(|| pid.parse().ok()).flatten()
}

/// Whether a process `pid` runs (one this user may not signal runs too).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Moves the store built at `fresh` to `db` and makes the rename durable.
pub(crate) fn place(fresh: &Path, db: &Path) -> Result<()> {
    std::fs::rename(fresh, db).map_err(|e| Error::io(db, e))?;
    super::fsync_dir(parent_of(db))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_dead_imports_directory_of_this_path_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("s.db");
        // A pid no process has (past the kernel's pid_max), ours, and names that are not ours.
        let dead = dir.path().join(".s.db.importing-4194999-0000abcd");
        let mine = dir
            .path()
            .join(format!(".s.db.importing-{}-0000abcd", std::process::id()));
        let other = dir.path().join(".t.db.importing-4194999-0000abcd");
        let odd = dir.path().join(".s.db.importing-4194999-xyz");
        for d in [&dead, &mine, &other, &odd] {
            std::fs::create_dir(d).expect("mkdir");
        }
        let fresh = staging_beside(&db).expect("staging").expect("a new store");
        assert!(fresh.starts_with(dir.path()));
        assert!(!dead.exists(), "a dead import's directory is removed");
        for kept in [&mine, &other, &odd] {
            assert!(kept.exists(), "{} is kept", kept.display());
        }
        // A store there already, or a path naming the directory itself: no staging.
        std::fs::create_dir(&db).expect("mkdir");
        std::fs::write(db.join("db"), b"x").expect("write");
        assert!(staging_beside(&db).expect("staging").is_none());
        assert!(
            staging_beside(&dir.path().join("empty/."))
                .expect("staging")
                .is_none()
        );
    }
}
