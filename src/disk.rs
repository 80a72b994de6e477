//! The store's files outside sled's control: making sled's files durable, and the head record.
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
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::log::Head;

/// The file, beside sled's, that records the last durably committed head.
pub const HEAD_FILE: &str = "mnemo-head";

/// The size of one slot of the head record.
pub const SLOT_BYTES: usize = 128;

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
    pub(crate) fn sync(&mut self, root: &Path) -> Result<()> {
        let result = self.sync_dir(root, root);
        if result.is_err() {
            *self = DiskSync::default();
        }
        result
    }

    fn sync_dir(&mut self, root: &Path, dir: &Path) -> Result<()> {
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
                self.sync_dir(root, &path)?;
            } else if meta.is_file() {
                self.sync_file(root, path, &meta)?;
            }
        }
        listing.sort_unstable();
        if self.dirs.get(dir) != Some(&listing) {
            fsync_path(dir)?;
            self.dirs.insert(dir.to_path_buf(), listing);
        }
        Ok(())
    }

    fn sync_file(&mut self, root: &Path, path: PathBuf, meta: &std::fs::Metadata) -> Result<()> {
        if path.parent() == Some(root) && path.file_name() == Some(HEAD_FILE.as_ref()) {
            return Ok(());
        }
        if path.parent() == Some(root) && path.file_name() == Some("db".as_ref()) {
            let stale = self.db.as_ref().is_none_or(|(_, ino)| *ino != meta.ino());
            if stale {
                let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
                self.db = Some((file, meta.ino()));
            }
            if let Some((file, _)) = &self.db {
                file.sync_all().map_err(|e| Error::io(&path, e))?;
            }
            return Ok(());
        }
        let stamp = Stamp::of(meta);
        if self.files.get(&path) != Some(&stamp) {
            match File::open(&path).and_then(|f| f.sync_all()) {
                Ok(()) => {
                    self.files.insert(path, stamp);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Ok(())
    }
}

fn fsync_path(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(path, e))
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
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .and_then(|file| {
                        file.write_all_at(&whole, 0)?;
                        file.set_len(whole.len() as u64)?;
                        self.file = Some(file);
                        Ok(())
                    })
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
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
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
        std::fs::write(dir.path().join("db"), b"log").expect("db");
        sync.sync(dir.path()).expect("first sync");
        assert!(sync.dirs.contains_key(dir.path()));
        let before = sync.dirs[dir.path()].len();
        std::fs::create_dir(dir.path().join("blobs")).expect("blobs");
        std::fs::write(dir.path().join("blobs").join("1"), b"blob").expect("blob");
        sync.sync(dir.path()).expect("second sync");
        assert_eq!(sync.dirs[dir.path()].len(), before + 1);
        assert!(sync.files.contains_key(&dir.path().join("blobs").join("1")));
    }

    #[test]
    fn a_file_removed_after_it_was_listed_is_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let blob = dir.path().join("2");
        std::fs::write(&blob, b"blob").expect("blob");
        let meta = std::fs::metadata(&blob).expect("metadata");
        std::fs::remove_file(&blob).expect("remove");
        let mut sync = DiskSync::default();
        sync.sync_file(dir.path(), blob.clone(), &meta)
            .expect("a vanished file is not an error");
        assert!(!sync.files.contains_key(&blob), "nothing was synced");
    }
}
