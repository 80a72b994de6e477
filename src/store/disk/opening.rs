//! Opening Mnemo's own files in a store: never through a link, never blocking on a pipe, and
//! only the very file `lstat` found.

use std::fs::File;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::checks::{Identity, Kind, refused_now, unsafe_file};
use crate::error::{Error, Result};

/// `open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)`: a link is not followed (`ELOOP`)
/// and a pipe does not block the open. A file it creates is its owner's alone (mode 0600).
pub(super) fn open_nofollow(path: &Path, flags: OFlags) -> std::result::Result<File, Errno> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)).map(File::from)
}

/// Opens Mnemo's own file `path` with `flags` (`O_RDONLY`, or `O_WRONLY | O_CREAT`), only if it
/// is a regular file: `lstat` first (a link, pipe or device is refused without being opened),
/// then [`open_nofollow`], then `fstat` of what was opened, which must be the file `lstat` saw.
/// `None` if there is no such file and `flags` does not create one.
pub(crate) fn open_own(path: &Path, flags: OFlags) -> Result<Option<File>> {
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
