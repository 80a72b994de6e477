//! Moving memory in and out as plain files, in the layout the SDK's filesystem tool uses:
//! `/memories/a/b.txt` is the file `DIR/memories/a/b.txt`.
//!
//! Export writes what the log proves (the tree now or after any seq). Import turns each file into
//! a logged `create` call through a tool server, so imported memory is chained, checked against the
//! access policy and the limits, and attributed to an agent like anything else.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};
use crate::paths::MemPath;
use crate::projection::MemoryRecord;
use crate::tool::MnemoMemoryToolServer;

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Files written.
    pub files: u64,
    /// Bytes of content written.
    pub bytes: u64,
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Files recorded as `create` calls that succeeded.
    pub imported: u64,
    /// Bytes of content imported.
    pub bytes: u64,
    /// Files that could not be imported, with the reason (not UTF-8, refused by the store...).
    pub failed: Vec<(PathBuf, String)>,
}

/// Writes `records` under `dir` (which must not exist or be empty).
pub fn export(records: &[MemoryRecord], dir: &Path) -> Result<ExportSummary> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{} is not empty; export into a new or empty directory so no file is overwritten",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    let mut summary = ExportSummary::default();
    for record in records {
        let path = MemPath::absolute(&record.path).map_err(Error::corrupt)?;
        let mut target = dir.to_path_buf();
        target.extend(path.segments());
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        fs::write(&target, record.content.as_bytes()).map_err(|e| Error::io(&target, e))?;
        summary.files += 1;
        summary.bytes += record.content.len() as u64;
    }
    Ok(summary)
}

/// Imports every regular file under `dir/<root>` (for the default root, `dir/memories`) as a
/// `create` call through `server`, in path order. Files that cannot be imported are listed in the
/// summary; the others are imported regardless.
pub fn import(server: &MnemoMemoryToolServer, dir: &Path) -> Result<ImportSummary> {
    let root = MemPath::root(server.root()).map_err(Error::InvalidArgument)?;
    let mut base = dir.to_path_buf();
    base.extend(root.segments());
    if !base.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} has no {} directory; point import at the directory that holds it (the SDK tool's base_path)",
            dir.display(),
            &root.as_str()[1..]
        )));
    }
    let mut files = Vec::new();
    collect(&base, &mut files)?;
    files.sort();
    let mut summary = ImportSummary::default();
    for file in files {
        let rel = file.strip_prefix(&base).unwrap_or(&file);
        let Some(rel) = rel.to_str() else {
            summary
                .failed
                .push((file.clone(), "the file name is not UTF-8".into()));
            continue;
        };
        let bytes = fs::read(&file).map_err(|e| Error::io(&file, e))?;
        let Ok(content) = String::from_utf8(bytes) else {
            summary
                .failed
                .push((file.clone(), "the content is not UTF-8 text".into()));
            continue;
        };
        let input =
            json!({"command": "create", "path": format!("{root}/{rel}"), "file_text": content});
        let result = server.handle(&input);
        if result.get("is_error").is_some() {
            let why = result["content"].as_str().unwrap_or_default().to_string();
            summary.failed.push((file.clone(), why));
        } else {
            summary.imported += 1;
            summary.bytes += content.len() as u64;
        }
    }
    Ok(summary)
}

/// Regular files under `dir`, recursively; symbolic links are not followed.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if kind.is_dir() {
            collect(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}
