//! No-follow traversal relative to directory file descriptors, shared by import and export.
//!
//! Every name is resolved one component at a time with `openat` relative to the descriptor of the
//! directory that holds it, with `O_NOFOLLOW`, so a symbolic link is never followed: a link where a
//! directory was expected fails the open instead of leading elsewhere, even when it was swapped in
//! after the listing. Directories are opened with `O_DIRECTORY | O_NONBLOCK`, so a FIFO or a device
//! in their place is refused without blocking.
//!
//! A [`DirChain`] holds the directories from the base down to the one being worked in. Paths may
//! nest about 2,000 levels deep (4,096 bytes, one-byte names), more than a process may hold open
//! descriptors, so the chain keeps at most [`MAX_OPEN`] of them open and reopens a closed level by
//! walking down again from the nearest open ancestor, with the same no-follow opens. No path string
//! longer than one name is ever passed to the kernel, so `PATH_MAX` never applies.

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Flags for opening a directory: never a link, never a FIFO or device, never inherited.
pub(super) const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// Most directory descriptors a [`DirChain`] keeps open at once (besides its base).
pub(super) const MAX_OPEN: usize = 32;

/// Opens the directory `name` inside `at`, refusing anything that is not a directory (a link
/// included).
pub(super) fn open_dir<P: rustix::path::Arg>(at: impl AsFd, name: P) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(at, name, DIR_FLAGS, Mode::empty())
}

/// Opens `dir` (a path as the user gave it) as a directory. The path leading to it is resolved as
/// given; `dir` itself must not be a link: trailing slashes are dropped so that `link/` is refused
/// like `link`.
pub(super) fn open_base(dir: &Path) -> Result<OwnedFd, Errno> {
    open_dir(CWD, trim_trailing_slashes(dir))
}

/// `dir` without trailing slashes (`/` stays `/`).
pub(super) fn trim_trailing_slashes(dir: &Path) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    let bytes = dir.as_os_str().as_bytes();
    let mut end = bytes.len();
    while end > 1 && bytes[end - 1] == b'/' {
        end -= 1;
    }
    Path::new(std::ffi::OsStr::from_bytes(&bytes[..end]))
}

/// What is at `name` inside `at`, without following a link; `None` if nothing is there.
pub(super) fn kind_at<P: rustix::path::Arg>(at: impl AsFd, name: P) -> Option<FileType> {
    rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| FileType::from_raw_mode(st.st_mode))
}

/// How a file type reads in a report: "a symbolic link", "a FIFO (named pipe)", ...
pub(super) fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown type",
    }
}

/// Why opening a directory failed, in words: a link or other non-directory in its place is named
/// as such (the usual cause of `ELOOP`/`ENOTDIR` under `O_NOFOLLOW | O_DIRECTORY`).
pub(super) fn why_not_dir(at: impl AsFd, name: &CString, err: Errno) -> String {
    match err {
        Errno::LOOP | Errno::NOTDIR => match kind_at(at, name.as_c_str()) {
            Some(FileType::Symlink) => {
                "is a symbolic link, not a directory; links are never followed".into()
            }
            Some(kind) => format!("is {}, not a directory", describe(kind)),
            None => format!("is not a directory ({err})"),
        },
        _ => format!(
            "could not be opened as a directory: {}",
            std::io::Error::from(err)
        ),
    }
}

/// One directory in a [`DirChain`]: its name inside the level above, and its descriptor while
/// open.
struct Level {
    name: CString,
    fd: Option<OwnedFd>,
}

/// The directories from a base down to the current one, each opened relative to the one above.
pub(super) struct DirChain {
    base: OwnedFd,
    levels: Vec<Level>,
}

impl DirChain {
    /// A chain standing at `base`.
    pub(super) fn new(base: OwnedFd) -> DirChain {
        DirChain {
            base,
            levels: Vec::new(),
        }
    }

    /// How many levels below the base the chain stands.
    pub(super) fn depth(&self) -> usize {
        self.levels.len()
    }

    /// The names from the base down to the current directory.
    pub(super) fn names(&self) -> impl Iterator<Item = &CString> {
        self.levels.iter().map(|l| &l.name)
    }

    /// Steps down into `name`, already opened as `fd` relative to the current directory.
    pub(super) fn push(&mut self, name: CString, fd: OwnedFd) {
        self.levels.push(Level { name, fd: Some(fd) });
        self.trim();
    }

    /// Steps back up one level (no-op at the base).
    pub(super) fn pop(&mut self) {
        self.levels.pop();
    }

    /// The current directory's descriptor, reopened from the nearest open ancestor if it was
    /// closed to stay under [`MAX_OPEN`].
    pub(super) fn current(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        if self.levels.last().is_some_and(|l| l.fd.is_none()) {
            let from = self.levels.iter().rposition(|l| l.fd.is_some());
            let start = from.map_or(0, |i| i + 1);
            for i in start..self.levels.len() {
                let fd = {
                    let parent = match i.checked_sub(1) {
                        // Opened by the previous round, or the open ancestor it started from.
                        Some(p) => self.levels[p].fd.as_ref().ok_or(Errno::BADF)?.as_fd(),
                        None => self.base.as_fd(),
                    };
                    open_dir(parent, self.levels[i].name.as_c_str())?
                };
                self.levels[i].fd = Some(fd);
            }
            self.trim();
        }
        match self.levels.last() {
            Some(level) => Ok(level.fd.as_ref().ok_or(Errno::BADF)?.as_fd()),
            None => Ok(self.base.as_fd()),
        }
    }

    /// Closes the shallowest open levels until at most [`MAX_OPEN`] are open.
    fn trim(&mut self) {
        let mut open = self.levels.iter().filter(|l| l.fd.is_some()).count();
        for level in &mut self.levels {
            if open <= MAX_OPEN {
                break;
            }
            if level.fd.take().is_some() {
                open -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inode of the directory `fd` is open on.
    fn ino(fd: BorrowedFd<'_>) -> u64 {
        rustix::fs::fstat(fd).expect("fstat").st_ino
    }

    #[test]
    fn a_deep_chain_keeps_few_descriptors_open_and_reopens_the_right_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = open_base(dir.path()).expect("open the base");
        let mut chain = DirChain::new(base);
        let mut inodes = Vec::new();
        for _ in 0..(3 * MAX_OPEN) {
            let here = chain.current().expect("current");
            rustix::fs::mkdirat(here, "d", Mode::from_raw_mode(0o755)).expect("mkdirat");
            let fd = open_dir(here, "d").expect("open");
            inodes.push(ino(fd.as_fd()));
            chain.push(CString::from(c"d"), fd);
            let open = chain.levels.iter().filter(|l| l.fd.is_some()).count();
            assert!(open <= MAX_OPEN, "{open} descriptors open");
        }
        // Back up past the open window: the level is reopened by walking down from the base.
        for depth in [2 * MAX_OPEN, MAX_OPEN / 2, 1] {
            while chain.depth() > depth {
                chain.pop();
            }
            let here = chain.current().expect("reopen");
            assert_eq!(ino(here), inodes[depth - 1], "depth {depth}");
        }
    }

    #[test]
    fn a_link_is_never_opened_as_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).expect("symlink");
        let base = open_base(dir.path()).expect("open the base");
        let err = open_dir(&base, "link").expect_err("a link is refused");
        let name = CString::from(c"link");
        assert!(why_not_dir(&base, &name, err).starts_with("is a symbolic link"));
        assert!(open_base(&dir.path().join("link/")).is_err());
        assert_eq!(trim_trailing_slashes(Path::new("a//")), Path::new("a"));
        assert_eq!(trim_trailing_slashes(Path::new("/")), Path::new("/"));
    }
}
