//! Store files whose size would make an open cost more than what they hold.
//!
//! sled reads `conf` whole and scans `db` and its snapshots from the start on open. A file made
//! sparse (`truncate -s 100G db`) or a `conf` blown up to gigabytes costs seconds per gigabyte
//! of nothing, on every command, or fails with a misleading "out of memory". sled never leaves
//! such a file: it writes `db` and snapshots by appending segments and `conf` is a few dozen
//! bytes. So a `conf` over [`MAX_CONF_BYTES`] and a `db` or snapshot with a hole (an unallocated
//! run, found with `SEEK_HOLE`/`SEEK_DATA`) of [`MAX_HOLE_BYTES`] or more are refused as
//! [`Error::UnsafeFile`] before sled opens them. The walk over a file's runs stops after
//! [`MAX_RUNS`] of them: a file fragmented beyond that holds real data for most of its size, and
//! reading it costs its size.

use std::path::Path;

use rustix::fs::{OFlags, SeekFrom};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// The largest `conf` a store may have (sled writes a few dozen bytes).
pub const MAX_CONF_BYTES: u64 = 64 * 1024;

/// The smallest hole in `db` or a snapshot that is refused.
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
    match largest_hole(path, len) {
        Some((at, hole)) if hole >= MAX_HOLE_BYTES => Err(Error::UnsafeFile {
            path: path.to_path_buf(),
            what: format!(
                "is a sparse file: {hole} bytes from offset {at} hold nothing on disk, which sled never leaves (opening it would read them all)"
            ),
            fix: "it was damaged or replaced: move it out of the store directory and restore the store from a backup".into(),
        }),
        _ => Ok(()),
    }
}

/// The offset and length of the largest hole among the first [`MAX_RUNS`] runs of the file at
/// `path` (`len` bytes long), or `None` if it has none or cannot tell (a file system without
/// `SEEK_HOLE` reports none; a file that cannot be opened is left to the open that follows).
fn largest_hole(path: &Path, len: u64) -> Option<(u64, u64)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = rustix::fs::open(path, flags, rustix::fs::Mode::empty()).ok()?;
    let mut largest: Option<(u64, u64)> = None;
    let mut at = 0;
    for _ in 0..MAX_RUNS {
        let hole = rustix::fs::seek(&file, SeekFrom::Hole(at)).ok()?;
        if hole >= len {
            break;
        }
        let data = match rustix::fs::seek(&file, SeekFrom::Data(hole)) {
            Ok(data) => data,
            // No data after the hole: it runs to the end.
            Err(Errno::NXIO) => len,
            Err(_) => return largest,
        };
        let run = data.saturating_sub(hole);
        if largest.is_none_or(|(_, size)| run > size) {
            largest = Some((hole, run));
        }
        if data >= len {
            break;
        }
        at = data;
    }
    largest
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
            Ok(()) => assert_eq!(largest_hole(&path, len), None),
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
