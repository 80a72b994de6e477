//! `export`: the tree as plain files under a new or empty directory.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Dir, Mode, OFlags};
use rustix::io::Errno;

use super::ExportSummary;
use super::walk::{DirChain, open_base, open_dir, trim_trailing_slashes, why_not_dir};
use crate::error::{Error, Result};
use crate::model::paths::MemPath;
use crate::store::projection::MemoryRecord;

/// Flags for creating an exported file: a new file only (`O_EXCL`, so nothing in the way is ever
/// overwritten or followed), never inherited.
const FILE_FLAGS: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Writes `records` under `dir`, which must not exist or be an empty directory (not a link): the
/// file at `/memories/a/b` becomes `dir/memories/a/b`.
///
/// Nothing is written outside `dir`: each directory is made with `mkdirat` and opened with
/// `O_NOFOLLOW | O_DIRECTORY` relative to its parent's descriptor, and each file is created with
/// `O_CREAT | O_EXCL | O_NOFOLLOW` relative to its directory's, so a link or file that appears in
/// the way (put there by another process during the export) stops the export with an error
/// instead of being followed or overwritten. No path string longer than one name reaches the
/// kernel, so every path the store accepts (up to 4,096 bytes) is written.
///
/// # Errors
/// `dir` is not empty, is a link or not a directory, or a write failed. A failed export leaves
/// the files written so far; the message says so, and a new export into a new directory starts
/// afresh.
pub fn export(records: &[MemoryRecord], dir: &Path) -> Result<ExportSummary> {
    let shown = trim_trailing_slashes(dir);
    let base = open_export_dir(shown)?;
    let mut chain = DirChain::new(base);
    let mut summary = ExportSummary::default();
    for record in records {
        write_record(&mut chain, record, shown).map_err(|why| {
            Error::InvalidArgument(format!(
                "export stopped at {}: {why}. {} holds a partial export of {} files; remove it or export into a new directory",
                record.path,
                shown.display(),
                summary.files
            ))
        })?;
        summary.files += 1;
        summary.bytes += record.content.len() as u64;
    }
    Ok(summary)
}

/// Creates `dir` if missing (and its parents), opens it without following a link, and checks that
/// it is empty.
fn open_export_dir(dir: &Path) -> Result<OwnedFd> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    match rustix::fs::mkdirat(CWD, dir, Mode::from_raw_mode(0o777)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(Error::io(dir, e.into())),
    }
    let name = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::InvalidArgument(format!("{} holds a NUL byte", dir.display())))?;
    let base = open_base(dir).map_err(|e| {
        Error::InvalidArgument(format!(
            "{} {}; export into a new or empty directory",
            dir.display(),
            why_not_dir(CWD, &name, e)
        ))
    })?;
    let mut entries = Dir::read_from(&base).map_err(|e| Error::io(dir, e.into()))?;
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(|e| Error::io(dir, e.into()))?;
        if entry.file_name() != c"." && entry.file_name() != c".." {
            return Err(Error::InvalidArgument(format!(
                "{} is not empty; export into a new or empty directory so no file is overwritten",
                dir.display()
            )));
        }
    }
    Ok(base)
}

/// Writes one record, moving `chain` to its directory (making the directories that are missing).
fn write_record(
    chain: &mut DirChain,
    record: &MemoryRecord,
    shown: &Path,
) -> std::result::Result<(), String> {
    let path = MemPath::absolute(&record.path)
        .map_err(|e| format!("the store holds a path it should have refused ({e})"))?;
    let segments = path
        .segments()
        .map(|s| CString::new(s).map_err(|_| "the path holds a NUL byte".to_owned()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let Some((file, dirs)) = segments.split_last() else {
        return Err("the record has no file name".into());
    };
    // Step up to the directory this record shares with the previous one, then down.
    let shared = chain
        .names()
        .zip(dirs)
        .take_while(|(have, want)| have == want)
        .count();
    while chain.depth() > shared {
        chain.pop();
    }
    for name in &dirs[shared..] {
        let at = shown_path(shown, chain, name);
        let here = chain.current().map_err(|e| {
            format!(
                "a directory of the export could not be reopened: {}",
                std::io::Error::from(e)
            )
        })?;
        match rustix::fs::mkdirat(here, name.as_c_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => {
                return Err(format!(
                    "could not make the directory {}: {}",
                    at.display(),
                    std::io::Error::from(e)
                ));
            }
        }
        let fd = open_dir(here, name.as_c_str()).map_err(|e| {
            format!(
                "{} {} (something else changed the export directory)",
                at.display(),
                why_not_dir(here, name, e)
            )
        })?;
        chain.push(name.clone(), fd);
    }
    let at = shown_path(shown, chain, file);
    let here = chain.current().map_err(|e| {
        format!(
            "a directory of the export could not be reopened: {}",
            std::io::Error::from(e)
        )
    })?;
    let fd = rustix::fs::openat(here, file.as_c_str(), FILE_FLAGS, Mode::from_raw_mode(0o666))
        .map_err(|e| {
            let why = match e {
                Errno::EXIST => "something is already there (another process wrote into the export directory); nothing was overwritten".to_owned(),
                e => std::io::Error::from(e).to_string(),
            };
            format!("could not create {}: {why}", at.display())
        })?;
    File::from(fd)
        .write_all(record.content.as_bytes())
        .map_err(|e| format!("could not write {}: {e}", at.display()))
}

/// `shown/<chain's names>/name`, for messages only (never opened).
fn shown_path(shown: &Path, chain: &DirChain, name: &CString) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut path = shown.to_path_buf();
    for level in chain.names() {
        path.push(std::ffi::OsStr::from_bytes(level.as_bytes()));
    }
    path.push(std::ffi::OsStr::from_bytes(name.as_bytes()));
    path
}
