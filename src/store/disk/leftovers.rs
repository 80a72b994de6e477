//! What an interrupted rewrite leaves beside a store: the directories of a killed `mnemo
//! restore` or redaction, found by their names and removed (never a link, never another name).

use std::path::Path;

use super::parent_of;
use crate::error::{Error, Result};

/// The start of the names of the directories a redaction of `store` writes beside it:
/// `.NAME.redact-`.
pub(crate) fn redaction_prefix(store: &Path) -> Result<String> {
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", store.display())))?;
    Ok(format!(".{name}.redact-"))
}

/// Whether `rest` (what follows `.NAME.redact-` in a name) is a tag this module makes: 16
/// lower-case hex digits, then nothing, or (for the directory a killed creation of the copy
/// left) `.creating-` and more.
fn is_tag(rest: &str, creating: bool) -> bool {
    let (tag, tail) = rest.split_at(rest.len().min(16));
    tag.len() == 16
        && tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && if creating {
            tail.starts_with(".creating-")
        } else {
            tail.is_empty()
        }
}

/// Removes the directories a killed `mnemo restore` into `store` left beside it
/// (`.NAME.restore-` and 16 hex digits, each a partial copy of a replica, which may hold what a
/// later redaction erased); never a link, never any other name. Run by every restore and every
/// open for writing: a restore refuses a path that holds a store, so none is under way then.
pub(crate) fn remove_restore_leftovers(store: &Path) -> Result<()> {
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", store.display())))?;
    let prefix = format!(".{name}.restore-");
    for entry in
        std::fs::read_dir(parent_of(store)).map_err(|e| Error::io("the store's directory", e))?
    {
        let entry = entry.map_err(|e| Error::io("the store's directory", e))?;
        let left = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .is_some_and(|rest| is_tag(rest, false));
        if left && entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| Error::io("an interrupted restore's directory", e))?;
        }
    }
    Ok(())
}

/// Removes what an interrupted redaction left beside `store`: directories named as its copies
/// are (`.NAME.redact-` and 16 hex digits: a copy being written, or after the exchange the store
/// as it was, holding what was erased), never a link, never any other name, and not the copy of
/// tag `ours` (a redaction's own). Run by every redaction and every open for writing.
pub(crate) fn remove_redaction_leftovers(store: &Path, ours: Option<&str>) -> Result<()> {
    let ours = ours.unwrap_or("-");
    let prefix = redaction_prefix(store)?;
    for entry in
        std::fs::read_dir(parent_of(store)).map_err(|e| Error::io("the store's directory", e))?
    {
        let entry = entry.map_err(|e| Error::io("the store's directory", e))?;
        let name = entry.file_name();
        // The copy, and the directory a killed creation of the copy left (`.COPY.creating-*`).
        let Some(name) = name.to_str() else {
            continue;
        };
        let left = name
            .strip_prefix(&prefix)
            .is_some_and(|rest| is_tag(rest, false) && rest != ours)
            || name
                .strip_prefix('.')
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|rest| is_tag(rest, true) && !rest.starts_with(ours));
        if left && entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| Error::io("an interrupted redaction's directory", e))?;
        }
    }
    Ok(())
}
