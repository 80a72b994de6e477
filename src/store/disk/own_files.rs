//! The store's own files beside sled's (the server file, the signing key, the replica key it
//! trusts, a memory store's label): their names, carrying them into a rewritten store, and
//! reading one only if it is private to the store's owner.

use std::fs::File;
use std::path::Path;

use rustix::fs::OFlags;

use super::opening::open_own;
use crate::error::{Error, Result};

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
pub(crate) fn read_private(store_dir: &Path, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
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
