//! The head record ([`HEAD_FILE`]): the last durably committed head, written outside sled in two
//! checksummed slots, so a log that sled's recovery rolled back can be told from one that was
//! never longer (see the [disk](super) docs for the layout).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::OFlags;

use super::opening::open_own;
use crate::error::{Error, Result};
use crate::model::head::Head;

/// The file, beside sled's, that records the last durably committed head.
pub const HEAD_FILE: &str = "mnemo-head";

/// The size of one slot of the head record.
pub const SLOT_BYTES: usize = 128;

/// The size of the head record: two slots. A longer file is not a head record, and no more than
/// one byte past this is ever read of it.
pub const HEAD_BYTES: usize = 2 * SLOT_BYTES;

const HEAD_DOMAIN: &[u8] = b"mnemo/head/v1";

/// The head record of one store, open for in-place slot writes.
#[derive(Default)]
pub(crate) struct HeadRecord {
    file: Option<File>,
    /// The head last written (or found already recorded), so that writing it again, as a close
    /// or a sync with nothing new does, leaves the file and its time alone.
    last: Option<Head>,
}

impl HeadRecord {
    /// Writes `head` into its slot. The first write after the store opens writes the whole file
    /// (both slots), which also converts a record of the earlier layout.
    pub(crate) fn write(&mut self, root: &Path, head: Head) -> Result<()> {
        let path = root.join(HEAD_FILE);
        if self.file.is_some() && self.last == Some(head) {
            return Ok(());
        }
        let slot = slot_bytes(head);
        let result = match &self.file {
            Some(file) => file.write_all_at(&slot, slot_offset(head)),
            // Already recorded, in this layout (a store opened and closed with no new event):
            // its modification time stays the time of its last event.
            None if recorded_as(&path, head) => open_own(&path, OFlags::WRONLY)
                .and_then(|file| {
                    file.ok_or_else(|| Error::io(&path, std::io::ErrorKind::NotFound.into()))
                })
                .map(|file| self.file = Some(file))
                .map_err(|e| std::io::Error::other(e.to_string())),
            None => {
                let mut whole = slot.clone();
                whole.extend_from_slice(&slot);
                let file = open_own(&path, OFlags::WRONLY | OFlags::CREATE)?
                    .ok_or_else(|| Error::io(&path, std::io::ErrorKind::NotFound.into()))?;
                file.write_all_at(&whole, 0)
                    .and_then(|()| file.set_len(whole.len() as u64))
                    .map(|()| self.file = Some(file))
            }
        };
        match result {
            Ok(()) => {
                self.last = Some(head);
                Ok(())
            }
            Err(e) => {
                self.file = None;
                self.last = None;
                Err(Error::io(&path, e))
            }
        }
    }
}

/// Whether the head record at `path` is of this layout (two slots) and names `head` already.
fn recorded_as(path: &Path, head: Head) -> bool {
    let root = path.parent().unwrap_or(path);
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == HEAD_BYTES as u64)
        && read_head(root).ok().flatten() == Some(head)
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
    let Some(file) = open_own(&path, OFlags::RDONLY)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(HEAD_BYTES + 1);
    file.take(HEAD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    if bytes.len() > HEAD_BYTES {
        return Err(Error::corrupt(format!(
            "{} is longer than the {HEAD_BYTES} bytes of a head record",
            path.display()
        )));
    }
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
    use super::super::checks::hostile::{fifo, refused_naming};
    use super::*;
    use crate::model::event::{EventHash, Seq};

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
    fn the_head_record_is_never_read_through_a_link_or_a_pipe_nor_past_its_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(HEAD_FILE);
        fifo(&path);
        // A pipe would block an open for reading (and a read) forever: refused without opening.
        refused_naming(read_head(dir.path()), &path);
        std::fs::remove_file(&path).expect("rm");
        std::os::unix::fs::symlink("/dev/zero", &path).expect("symlink");
        refused_naming(read_head(dir.path()), &path);
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, vec![b'7'; 1 << 20]).expect("a long file");
        match read_head(dir.path()) {
            Err(Error::Corrupt { what }) => assert!(what.contains("longer than"), "{what}"),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn the_head_record_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"precious").expect("outside");
        let store = dir.path().join("store");
        std::fs::create_dir(&store).expect("store");
        let path = store.join(HEAD_FILE);
        std::os::unix::fs::symlink(&outside, &path).expect("symlink");
        refused_naming(HeadRecord::default().write(&store, head(1, 1)), &path);
        assert_eq!(std::fs::read(&outside).expect("read"), b"precious");
        std::fs::remove_file(&path).expect("rm");
        fifo(&path);
        // No reader: a plain open for writing would block here forever.
        refused_naming(HeadRecord::default().write(&store, head(1, 1)), &path);
    }
}
