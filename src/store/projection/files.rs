//! Files as the index lists them: a [`MemoryRecord`] with its content, a [`FileEntry`] without
//! it, one at a path or every one under a directory, in path order.

use super::Projection;
use super::content::{self, FileHead};
use super::keys::{ROOT_ID, child_prefix, decode_entry, file_key, no_content, set_child_key};
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::tool::NodeKind;
use crate::store::kv::KvRead;

/// The tag every memory file carries.
pub const MEMORY_TAG: &str = "memorytool";

/// A memory file as the client lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRecord {
    /// Canonical path, such as `/memories/notes.txt`.
    pub path: String,
    /// The file's content.
    pub content: String,
    /// `memorytool` and `path:{path}`.
    pub tags: Vec<String>,
    /// Seq of the event that created the file.
    pub created: Seq,
    /// Seq of the event that last changed its content.
    pub updated: Seq,
}

impl MemoryRecord {
    pub(super) fn new(path: &MemPath, file: FileRecord) -> MemoryRecord {
        let path = path.to_string();
        MemoryRecord {
            tags: vec![MEMORY_TAG.to_string(), format!("path:{path}")],
            path,
            content: file.content,
            created: Seq(file.created),
            updated: Seq(file.updated),
        }
    }
}

/// A file as the index holds it, without its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Its path.
    pub path: MemPath,
    /// Seq of the event that created the file (its identity: it follows the file through
    /// renames and content changes, and a file created again after a delete gets a new one).
    pub created: Seq,
    /// Seq of the event that last changed its content.
    pub updated: Seq,
    /// Seq of the last event that changed the file at all: its content, or its path (a rename of
    /// the file or of a directory above it).
    pub touched: Seq,
    /// Its length in bytes.
    pub bytes: u64,
}

impl FileEntry {
    pub(super) fn new(path: MemPath, head: FileHead, moved: u64) -> FileEntry {
        FileEntry {
            path,
            created: Seq(head.created),
            updated: Seq(head.updated),
            touched: Seq(head.updated.max(moved)),
            bytes: head.len,
        }
    }
}

/// A file as the index holds it, with its content.
pub(super) struct FileRecord {
    /// Seq of the event that created the file.
    pub(super) created: u64,
    /// Seq of the event that last changed its content.
    pub(super) updated: u64,
    /// The file's content.
    pub(super) content: String,
}

impl<K: KvRead> Projection<K> {
    /// The `f` record of file node `id`.
    pub(super) fn file_head(&self, id: u64) -> Result<FileHead> {
        self.kv
            .get_with(&file_key(id), FileHead::decode)?
            .unwrap_or_else(|| Err(no_content(id)))
    }

    pub(super) fn file(&self, id: u64) -> Result<FileRecord> {
        let head = self.file_head(id)?;
        let bytes = content::read(&self.kv, id, &head)?;
        Ok(FileRecord {
            created: head.created,
            updated: head.updated,
            content: String::from_utf8(bytes)
                .map_err(|_| Error::corrupt("path index file content is not UTF-8"))?,
        })
    }

    /// File node `id`, at `path`, as a record. Content found damaged is named by its path, not
    /// only by its node: what `mnemo cat` or `export` could not read, the operator can look up.
    fn record_of(&self, path: &MemPath, id: u64) -> Result<MemoryRecord> {
        match self.file(id) {
            Ok(file) => Ok(MemoryRecord::new(path, file)),
            Err(Error::Corrupt { what }) => Err(Error::Corrupt {
                what: format!("the content of {path} cannot be read: {what}"),
            }),
            Err(other) => Err(other),
        }
    }

    /// The file at `path` as a record.
    pub fn record(&self, path: &MemPath) -> Result<Option<MemoryRecord>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(self.record_of(path, id)?)),
            _ => Ok(None),
        }
    }

    /// Every file at or under `dir`, in path order.
    pub fn records_under(&self, dir: &MemPath) -> Result<Vec<MemoryRecord>> {
        let mut out = Vec::new();
        match self.lookup(dir)? {
            Some((NodeKind::File, id)) => out.push(self.record_of(dir, id)?),
            Some((NodeKind::Dir, id)) => self.collect(dir, id, &mut out)?,
            None => {}
        }
        Ok(out)
    }

    #[cfg(any(test, feature = "testing"))]
    /// The file at `path` without its content, or `None` if no file is there.
    pub fn file_entry(&self, path: &MemPath) -> Result<Option<FileEntry>> {
        let mut moved = 0;
        let mut key = Vec::with_capacity(64);
        let mut id = ROOT_ID;
        let mut kind = NodeKind::Dir;
        for seg in path.segments() {
            if kind != NodeKind::Dir {
                return Ok(None);
            }
            set_child_key(&mut key, id, seg);
            match self.kv.get_with(&key, decode_entry)? {
                Some(entry) => {
                    let (k, child, m) = entry?;
                    (kind, id, moved) = (k, child, moved.max(m));
                }
                None => return Ok(None),
            }
        }
        if kind != NodeKind::File {
            return Ok(None);
        }
        Ok(Some(FileEntry::new(
            path.clone(),
            self.file_head(id)?,
            moved,
        )))
    }

    /// Every file at or under `dir` without its content, in path order (segment by segment, as
    /// [`Projection::records_under`]). Iterative, as `collect`.
    pub fn file_entries_under(&self, dir: &MemPath) -> Result<Vec<FileEntry>> {
        let mut moved = 0;
        let mut key = Vec::with_capacity(64);
        let (mut kind, mut id) = (NodeKind::Dir, ROOT_ID);
        for seg in dir.segments() {
            if kind != NodeKind::Dir {
                return Ok(Vec::new());
            }
            set_child_key(&mut key, id, seg);
            match self.kv.get_with(&key, decode_entry)? {
                Some(entry) => {
                    let (k, child, m) = entry?;
                    (kind, id, moved) = (k, child, moved.max(m));
                }
                None => return Ok(Vec::new()),
            }
        }
        let mut out = Vec::new();
        let mut stack = vec![(dir.clone(), kind, id, moved)];
        while let Some((path, kind, id, moved)) = stack.pop() {
            match kind {
                NodeKind::File => out.push(FileEntry::new(path, self.file_head(id)?, moved)),
                NodeKind::Dir => {
                    let mut children = Vec::new();
                    for (k, v) in self.kv.scan_prefix(&child_prefix(id), usize::MAX)? {
                        let name = std::str::from_utf8(&k[9..])
                            .map_err(|_| Error::corrupt("path index name is not UTF-8"))?;
                        let (kind, child, m) = decode_entry(&v)?;
                        children.push((path.join(name), kind, child, moved.max(m)));
                    }
                    stack.extend(children.into_iter().rev());
                }
            }
        }
        Ok(out)
    }

    /// Every file under directory `id` (at `dir`), in path order. Iterative: paths may nest
    /// thousands of levels deep, more than a thread's stack would take in recursion.
    fn collect(&self, dir: &MemPath, id: u64, out: &mut Vec<MemoryRecord>) -> Result<()> {
        let mut stack = vec![(dir.clone(), NodeKind::Dir, id)];
        while let Some((path, kind, id)) = stack.pop() {
            match kind {
                NodeKind::File => out.push(self.record_of(&path, id)?),
                NodeKind::Dir => {
                    let children = self.children(id)?;
                    stack.extend(
                        children
                            .into_iter()
                            .rev()
                            .map(|(name, kind, child)| (path.join(&name), kind, child)),
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{INDEX_LAYOUT, RENAMES_UNSTAMPED};
    use super::*;
    use crate::model::tool::Change;
    use crate::store::kv::MemKv;

    /// A file keeps its identity (`created`) through renames and edits; `touched` is the last
    /// event that changed its content or its path, whether the rename named the file or a
    /// directory above it; the listing without content is the listing with it, in the same order.
    /// An index built in the layout before rename stamps holds 9-byte entries only.
    #[test]
    fn renames_stamp_the_entries_they_make_and_files_keep_their_identity() {
        let p = |s: &str| MemPath::absolute(s).expect("path");
        let write = |path: &str| Change::Write {
            path: p(path),
            content: format!("{path}\n"),
        };
        let rename = |from: &str, to: &str| Change::Rename {
            from: p(from),
            to: p(to),
        };
        let changes = [
            write("/m/a/x.md"),
            write("/m/a/y.md"),
            write("/m/a-b.md"),
            rename("/m/a/x.md", "/m/c/x.md"),
            rename("/m/c", "/m/d"),
            write("/m/d/x.md"),
        ];
        for layout in [RENAMES_UNSTAMPED, INDEX_LAYOUT] {
            let mut index = Projection::new(MemKv::default()).in_layout(layout);
            for (n, change) in changes.iter().enumerate() {
                index.apply(change, Seq(n as u64 + 1)).expect("apply");
            }
            let entries = index.file_entries_under(&p("/m")).expect("entries");
            let records = index.records_under(&p("/m")).expect("records");
            let paths: Vec<String> = entries.iter().map(|e| e.path.to_string()).collect();
            let record_paths: Vec<String> = records.iter().map(|r| r.path.clone()).collect();
            assert_eq!(paths, record_paths);
            assert_eq!(paths, ["/m/a/y.md", "/m/a-b.md", "/m/d/x.md"]);
            let x = &entries[2];
            assert_eq!((x.created, x.updated), (Seq(1), Seq(6)));
            assert_eq!(x.touched, Seq(6));
            let y = index.file_entry(&p("/m/a/y.md")).expect("read").expect("y");
            assert_eq!((y.created, y.touched, y.bytes), (Seq(2), Seq(2), 10));
            assert_eq!(index.file_entry(&p("/m/a")).expect("read"), None);
            assert_eq!(index.file_entry(&p("/m/a/y.md/z")).expect("read"), None);
            let long = index
                .kv()
                .map
                .iter()
                .filter(|(k, v)| k[0] == b'c' && v.len() == 17);
            assert_eq!(long.count(), if layout == INDEX_LAYOUT { 2 } else { 0 });
            // A rename of the directory above stamps the file below it.
            index.apply(&rename("/m/d", "/m/e"), Seq(7)).expect("apply");
            let x = index.file_entry(&p("/m/e/x.md")).expect("read").expect("x");
            let stamped = if layout == INDEX_LAYOUT {
                Seq(7)
            } else {
                Seq(6)
            };
            assert_eq!((x.created, x.updated, x.touched), (Seq(1), Seq(6), stamped));
            assert_eq!(
                index.file_entries_under(&p("/m/e")).expect("entries"),
                vec![x]
            );
        }
    }
}
