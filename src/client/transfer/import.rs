//! `import`: the regular files under `DIR/<root>` become logged `create` calls.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use serde_json::json;

use super::walk::{
    DirChain, describe, kind_at, open_base, open_dir, trim_trailing_slashes, why_not_dir,
};
use super::{ImportSummary, Skipped};
use crate::client::tool_server::MnemoMemoryToolServer;
use crate::error::{Error, Result};
use crate::model::paths::{MAX_PATH_BYTES, MemPath};

/// Flags for opening a file to import: never through a link, never blocking on a FIFO, never
/// taking a terminal as the controlling one, never inherited.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Imports every regular file under `dir/<root>` (for the default root, `dir/memories`) as a
/// `create` call through `server`, in path order (names compared byte by byte, level by level).
///
/// `dir` and every directory from it down to the root must be real directories, not links (the
/// path leading to `dir` is resolved as given). Below the root, nothing is followed: each entry is
/// opened relative to its directory's descriptor with `O_NOFOLLOW | O_NONBLOCK` and checked on the
/// opened descriptor, so a link, FIFO, device or socket is skipped, also when it replaces a file or
/// directory after the listing. A file's size is checked before it is read, and the read stops one
/// byte past the limit. Every entry not imported is listed in `ImportSummary::skipped` with the
/// reason, and the import goes on. Empty directories hold nothing the store keeps (a directory
/// exists there while a file lives under it) and are passed over.
///
/// # Errors
/// When the import cannot start: `dir` or the root below it is missing, is a link or is not a
/// directory, or cannot be listed.
pub fn import(server: &MnemoMemoryToolServer, dir: &Path) -> Result<ImportSummary> {
    let root = MemPath::root(server.root()).map_err(Error::InvalidArgument)?;
    let limit = server.limits().max_file_bytes;
    let shown_dir = trim_trailing_slashes(dir);
    let mut at = open_base(dir).map_err(|e| base_error(shown_dir, e))?;
    let mut shown = shown_dir.to_path_buf();
    for segment in root.segments() {
        let name = CString::new(segment).map_err(|_| Error::InvalidArgument(segment.into()))?;
        shown.push(segment);
        let next =
            open_dir(&at, segment).map_err(|e| root_error(&at, shown_dir, &shown, &name, e))?;
        at = next;
    }
    let entries = list(&at).map_err(|e| Error::io(&shown, e.into()))?;
    let mut walk = Walk {
        server,
        root: &root,
        limit,
        shown,
        chain: DirChain::new(at),
        names: Vec::new(),
        summary: ImportSummary::default(),
    };
    walk.run(entries);
    Ok(walk.summary)
}

/// The entries of the directory `fd`, sorted by name, without `.` and `..`.
fn list(fd: &OwnedFd) -> std::result::Result<Vec<(CString, FileType)>, Errno> {
    let mut dir = Dir::read_from(fd)?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        out.push((name.to_owned(), entry.file_type()));
    }
    out.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// The state of one import's walk down the tree.
struct Walk<'a> {
    server: &'a MnemoMemoryToolServer,
    root: &'a MemPath,
    limit: u64,
    /// `DIR/<root>` as the user would write it, for reports only.
    shown: PathBuf,
    chain: DirChain,
    /// The UTF-8 names of the chain's levels, for store paths.
    names: Vec<String>,
    summary: ImportSummary,
}

impl Walk<'_> {
    /// Walks the tree depth first from the root's `entries`, one listing per open level.
    fn run(&mut self, entries: Vec<(CString, FileType)>) {
        let mut frames = vec![entries.into_iter()];
        while let Some(frame) = frames.last_mut() {
            let Some((name, kind)) = frame.next() else {
                frames.pop();
                self.chain.pop();
                self.names.pop();
                continue;
            };
            let listed = match self.entry(&name, kind) {
                Ok(listed) => listed,
                Err(reason) => {
                    self.skip(&name, reason);
                    None
                }
            };
            if let Some((fd, name, entries)) = listed {
                self.chain.push(name.0, fd);
                self.names.push(name.1);
                frames.push(entries.into_iter());
            }
        }
    }

    /// Imports or skips one entry of the current directory; for a directory to descend into,
    /// returns its descriptor, names and entries.
    #[allow(clippy::type_complexity)]
    fn entry(
        &mut self,
        name: &CString,
        listed: FileType,
    ) -> std::result::Result<Option<(OwnedFd, (CString, String), Vec<(CString, FileType)>)>, String>
    {
        let here = self.chain.current().map_err(|e| {
            format!(
                "its directory could not be reopened: {}",
                std::io::Error::from(e)
            )
        })?;
        let kind = match listed {
            FileType::Unknown => kind_at(here, name.as_c_str()).unwrap_or(FileType::Unknown),
            kind => kind,
        };
        let Ok(text) = name.to_str() else {
            return Err(match kind {
                FileType::Directory => {
                    "the name is not UTF-8 (store paths are text); nothing under it was imported"
                        .into()
                }
                _ => "the name is not UTF-8 (store paths are text)".into(),
            });
        };
        match kind {
            FileType::Directory => {
                // The shortest file path under it: root/names.../name/x.
                let shortest = self.root.as_str().len()
                    + self.names.iter().map(|n| n.len() + 1).sum::<usize>()
                    + text.len()
                    + 3;
                if shortest > MAX_PATH_BYTES {
                    return Err(format!(
                        "too deep: a file under it would have a path over the store's {MAX_PATH_BYTES}-byte limit; nothing under it was imported"
                    ));
                }
                let fd = open_dir(here, name.as_c_str()).map_err(|e| {
                    let why = why_not_dir(here, name, e);
                    format!("{why}; nothing under it was imported")
                })?;
                let entries = list(&fd).map_err(|e| {
                    format!(
                        "could not be listed: {}; nothing under it was imported",
                        std::io::Error::from(e)
                    )
                })?;
                if entries.is_empty() {
                    return Ok(None);
                }
                Ok(Some((fd, (name.clone(), text.to_owned()), entries)))
            }
            FileType::RegularFile => {
                let content = read_file(here, name, self.limit)?;
                let mut path = self.root.as_str().to_owned();
                for level in &self.names {
                    path.push('/');
                    path.push_str(level);
                }
                path.push('/');
                path.push_str(text);
                let input = json!({"command": "create", "path": path, "file_text": content});
                let result = self.server.handle(&input);
                if result.get("is_error").is_some() {
                    return Err(result["content"].as_str().unwrap_or_default().to_owned());
                }
                self.summary.imported += 1;
                self.summary.bytes += content.len() as u64;
                Ok(None)
            }
            FileType::Symlink => Err("a symbolic link; links are never followed".into()),
            other => Err(format!(
                "{}; only regular files are imported",
                describe(other)
            )),
        }
    }

    /// Records that the entry `name` of the current directory was not imported.
    fn skip(&mut self, name: &CStr, reason: String) {
        let mut path = self.shown.clone();
        path.extend(&self.names);
        path.push(OsStr::from_bytes(name.to_bytes()));
        self.summary.skipped.push(Skipped { path, reason });
    }
}

/// The content of the regular file `name` in `at`, or why it is not imported: see
/// [`open_regular`]; at most `limit + 1` bytes are read.
fn read_file(at: BorrowedFd<'_>, name: &CStr, limit: u64) -> std::result::Result<String, String> {
    let (fd, size) = open_regular(at, name, limit)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("could not be read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "grew past the {limit}-byte file limit while it was read"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the content is not UTF-8 text".to_owned())
}

/// Opens the regular file `name` in `at` for reading, with its size, once `fstat` on a descriptor
/// of that very inode shows a regular file within `limit`; a link is never followed.
///
/// On Linux the name is first opened with `O_PATH | O_NOFOLLOW`, which pins the inode without
/// opening it (no driver is called, a FIFO gains no reader); only when that descriptor shows a
/// regular file within the limit is the same inode opened for reading, through
/// `/proc/self/fd/N`, which names the pinned inode and not a path that could be swapped. Elsewhere,
/// or without `/proc`, the name is opened with `O_NOFOLLOW | O_NONBLOCK` and checked right after:
/// a FIFO or device swapped in between the listing and the open is then opened, without blocking,
/// but never read.
fn open_regular(
    at: BorrowedFd<'_>,
    name: &CStr,
    limit: u64,
) -> std::result::Result<(OwnedFd, u64), String> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsRawFd;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let pinned = rustix::fs::openat(at, name, flags, Mode::empty()).map_err(open_error)?;
        let (size, pinned_stat) = check_regular(&pinned, limit)?;
        let by_fd = format!("/proc/self/fd/{}", pinned.as_raw_fd());
        match rustix::fs::open(by_fd.as_str(), READ_FLAGS, Mode::empty()) {
            Ok(fd) => {
                // Cannot differ (the descriptor pins the inode); checked all the same.
                let opened = rustix::fs::fstat(&fd).map_err(stat_error)?;
                if (opened.st_dev, opened.st_ino) != (pinned_stat.st_dev, pinned_stat.st_ino) {
                    return Err("changed while it was opened; it was not read".into());
                }
                return Ok((fd, size));
            }
            Err(Errno::NOENT | Errno::NOTDIR) => {} // No /proc: open by name below.
            Err(e) => return Err(open_error(e)),
        }
    }
    let fd = rustix::fs::openat(at, name, FILE_FLAGS, Mode::empty()).map_err(open_error)?;
    let (size, _) = check_regular(&fd, limit)?;
    Ok((fd, size))
}

/// Flags for opening a checked file by its descriptor: read only, never blocking, never taking a
/// terminal as the controlling one, never inherited.
#[cfg(any(target_os = "linux", target_os = "android"))]
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// The size and status of the file open on `fd`, if it is a regular file within `limit`; otherwise
/// why it is not imported.
fn check_regular(fd: &OwnedFd, limit: u64) -> std::result::Result<(u64, Stat), String> {
    let stat = rustix::fs::fstat(fd).map_err(stat_error)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        let why = match kind {
            FileType::Symlink => "links are never followed",
            _ => "only regular files are imported",
        };
        return Err(format!(
            "{} (it replaced the file after the listing); {why}",
            describe(kind)
        ));
    }
    if stat.st_nlink > 1 {
        return Err(format!(
            "a hard link ({} names for one file), which may be a file from outside the directory; it was not read (copy it to import it)",
            stat.st_nlink
        ));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > limit {
        return Err(format!(
            "{size} bytes, over the {limit}-byte file limit; it was not read"
        ));
    }
    Ok((size, stat))
}

/// Why a file could not be opened.
fn open_error(e: Errno) -> String {
    match e {
        Errno::LOOP => {
            "a symbolic link (it replaced the file after the listing); links are never followed"
                .to_owned()
        }
        e => format!("could not be opened: {}", std::io::Error::from(e)),
    }
}

/// Why a file could not be examined.
fn stat_error(e: Errno) -> String {
    format!("could not be examined: {}", std::io::Error::from(e))
}

/// Why the base directory cannot be imported from.
fn base_error(dir: &Path, err: Errno) -> Error {
    let why = match err {
        Errno::NOENT => "does not exist".to_owned(),
        Errno::LOOP | Errno::NOTDIR => match kind_at(CWD, dir) {
            Some(FileType::Symlink) => {
                "is a symbolic link; links are never followed, so name the real directory"
                    .to_owned()
            }
            Some(kind) => format!("is {}, not a directory", describe(kind)),
            None => format!("is not a directory ({err})"),
        },
        e => format!("could not be opened: {}", std::io::Error::from(e)),
    };
    Error::InvalidArgument(format!(
        "{} {why}; point import at the directory that holds the memories/ directory (the SDK tool's base_path)",
        dir.display()
    ))
}

/// Why the directory `shown` on the way from the base `dir` to the root cannot be imported from.
fn root_error(at: &OwnedFd, dir: &Path, shown: &Path, name: &CString, err: Errno) -> Error {
    if err == Errno::NOENT {
        return Error::InvalidArgument(format!(
            "{} has no {} directory; point import at the directory that holds it (the SDK tool's base_path)",
            dir.display(),
            shown.strip_prefix(dir).unwrap_or(shown).display()
        ));
    }
    Error::InvalidArgument(format!(
        "{} {}; import reads only real directories, so copy the files into one first",
        shown.display(),
        why_not_dir(at, name, err)
    ))
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use std::os::fd::AsFd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    /// A FIFO met where a regular file was listed is refused without being opened for reading: a
    /// writer blocked on opening it is never woken.
    #[test]
    fn a_fifo_in_place_of_a_file_is_never_opened_for_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .expect("mkfifo");
        let woken = Arc::new(AtomicBool::new(false));
        let writer = {
            let (fifo, woken) = (fifo.clone(), woken.clone());
            std::thread::spawn(move || {
                // Blocks until some reader opens the FIFO.
                let file = std::fs::OpenOptions::new().write(true).open(&fifo);
                woken.store(true, Ordering::SeqCst);
                drop(file);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let base = open_dir(CWD, dir.path()).expect("open the directory");
        let why = read_file(base.as_fd(), c"fifo", 1 << 20).expect_err("a FIFO is refused");
        assert!(why.starts_with("a FIFO (named pipe)"), "{why}");
        std::thread::sleep(Duration::from_millis(50));
        let opened_by_import = woken.load(Ordering::SeqCst);
        // Release the writer.
        let reader = rustix::fs::open(&fifo, READ_FLAGS, Mode::empty()).expect("open to release");
        writer.join().expect("writer");
        drop(reader);
        assert!(!opened_by_import, "the import opened the FIFO for reading");
    }
}
