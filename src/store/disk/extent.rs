//! Store files whose size would make an open cost more than what they hold.
//!
//! sled reads `conf` whole and scans `db` and its snapshots from the start on open. A file made
//! sparse (`truncate -s 100G db`) or a `conf` blown up to gigabytes costs seconds per gigabyte
//! of nothing, on every command, or fails with a misleading "out of memory". sled never leaves
//! such a file: it writes `db` and snapshots by appending segments and `conf` is a few dozen
//! bytes. So a `conf` over [`MAX_CONF_BYTES`] and a `db` or snapshot whose holes (unallocated
//! runs, found with `SEEK_HOLE`/`SEEK_DATA`) add up to [`MAX_HOLE_BYTES`] or more are refused as
//! [`Error::UnsafeFile`] before sled opens them. The walk over a file's runs stops after
//! [`MAX_RUNS`] of them: a file fragmented beyond that holds real data for most of its size, and
//! reading it costs its size.

use std::path::Path;

use rustix::fs::{OFlags, SeekFrom};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// The largest `conf` a store may have (sled writes a few dozen bytes).
pub const MAX_CONF_BYTES: u64 = 64 * 1024;

/// The least hole bytes, in all, that make `db` or a snapshot refused.
pub const MAX_HOLE_BYTES: u64 = 64 * 1024 * 1024;

/// How many data and hole runs of one file are looked at, at most.
pub const MAX_RUNS: usize = 65_536;

/// Checks the size of the store file at `path`, a regular file of `len` bytes: `conf` by its
/// length, `db` and snapshots (`sparse_checked`) by their holes.
pub(super) fn check(path: &Path, len: u64, is_conf: bool, sparse_checked: bool) -> Result<()> {
    if is_conf && len > MAX_CONF_BYTES {
        return Err(Error::UnsafeFile {
            path: path.to_path_buf(),
            what: format!(
                "is {len} bytes, where sled's conf is a few dozen (at most {MAX_CONF_BYTES} are read)"
            ),
            fix: "move it out of the store directory and open the store again, which writes a new one"
                .into(),
        });
    }
    if !sparse_checked || len < MAX_HOLE_BYTES {
        return Ok(());
    }
    match holes(path, len) {
        Some(Holes {
            largest: Some((at, hole)),
            total,
        }) if total >= MAX_HOLE_BYTES => Err(Error::UnsafeFile {
            path: path.to_path_buf(),
            what: format!(
                "is a sparse file: {total} bytes of it hold nothing on disk (the largest hole {hole} bytes from offset {at}), which sled never leaves (opening or copying it would read them all)"
            ),
            fix: "it was damaged or replaced: move it out of the store directory and restore the store from a backup".into(),
        }),
        _ => Ok(()),
    }
}

/// The holes of a file: the largest (offset and length) and their total length.
#[derive(Debug, PartialEq, Eq)]
struct Holes {
    largest: Option<(u64, u64)>,
    total: u64,
}

/// The holes among the first [`MAX_RUNS`] runs of the file at `path` (`len` bytes long), or
/// `None` if it cannot tell (a file system without `SEEK_HOLE` reports none; a file that cannot
/// be opened is left to the open that follows).
fn holes(path: &Path, len: u64) -> Option<Holes> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = rustix::fs::open(path, flags, rustix::fs::Mode::empty()).ok()?;
    let mut largest: Option<(u64, u64)> = None;
    let mut total = 0u64;
    let mut at = 0;
    for _ in 0..MAX_RUNS {
        let Ok(hole) = rustix::fs::seek(&file, SeekFrom::Hole(at)) else {
            break;
        };
        if hole >= len {
            break;
        }
        let data = match rustix::fs::seek(&file, SeekFrom::Data(hole)) {
            Ok(data) => data,
            // No data after the hole: it runs to the end.
            Err(Errno::NXIO) => len,
            Err(_) => break,
        };
        let run = data.saturating_sub(hole);
        total = total.saturating_add(run);
        if largest.is_none_or(|(_, size)| run > size) {
            largest = Some((hole, run));
        }
        if data >= len {
            break;
        }
        at = data;
    }
    Some(Holes { largest, total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_hole_is_found_and_refused_and_a_written_file_passes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(b"sled").expect("write");
        file.set_len(MAX_HOLE_BYTES * 2).expect("make sparse");
        let len = MAX_HOLE_BYTES * 2;
        match check(&path, len, false, true) {
            Err(Error::UnsafeFile { what, .. }) => assert!(what.contains("sparse"), "{what}"),
            // A file system without holes stores the zeros: nothing to refuse.
            Ok(()) => assert_eq!(holes(&path, len).map(|h| h.total), Some(0)),
            Err(other) => panic!("unexpected {other:?}"),
        }
        // Not checked for holes: a conf, or a file not asked about.
        assert!(check(&path, len, false, false).is_ok());
        let small = dir.path().join("small");
        std::fs::write(&small, vec![7u8; 4096]).expect("write");
        assert!(check(&small, 4096, false, true).is_ok());
    }

    #[test]
    fn a_conf_over_its_cap_is_refused() {
        let path = Path::new("conf");
        assert!(check(path, MAX_CONF_BYTES, true, false).is_ok());
        assert!(matches!(
            check(path, MAX_CONF_BYTES + 1, true, false),
            Err(Error::UnsafeFile { .. })
        ));
    }
}

#[cfg(test)]
mod many_holes {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn many_holes_smaller_than_the_cap_add_up_and_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        let file = std::fs::File::create(&path).expect("create");
        // A byte every 8 MiB: no hole reaches the cap, 20 of them pass it.
        for i in 0..20u64 {
            file.write_at(b"x", i * 8 * 1024 * 1024).expect("write");
        }
        let len = file.metadata().expect("metadata").len();
        match check(&path, len, false, true) {
            Err(Error::UnsafeFile { what, .. }) => assert!(what.contains("sparse"), "{what}"),
            Ok(()) => assert_eq!(holes(&path, len).map(|h| h.total), Some(0), "no holes seen"),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
}
