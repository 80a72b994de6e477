//! Reading the past: the tree as it was after any seq, and the events that touched one file.
//!
//! Both are computed from the log alone, so they show what the chain proves, not what the index
//! happens to hold.

use crate::error::{Error, Result};
use crate::event::{Body, Event, Seq};
use crate::kv::MemKv;
use crate::log::Store;
use crate::paths::MemPath;
use crate::projection::Projection;
use crate::tool::Command;

/// Replays events `1..=at` into memory and returns the tree as it was after event `at`.
pub fn state_at(store: &Store, at: Seq) -> Result<Projection<MemKv>> {
    let mut tree = Projection::new(MemKv::default());
    for item in store.records(Seq(1)) {
        let (seq, record) = item?;
        if seq > at {
            break;
        }
        let event = Event::decode(&record)?;
        tree.run_event(&event)?;
    }
    Ok(tree)
}

/// Parses an absolute path given on the command line (`/memories/notes.txt`).
pub fn absolute_path(raw: &str) -> Result<MemPath> {
    MemPath::root(raw).map_err(Error::InvalidArgument)
}

fn canonical(raw: &str, root: &str) -> Option<MemPath> {
    let root = MemPath::root(root).ok()?;
    MemPath::resolve(raw, &root).ok()
}

/// Every event that named the file now (or last) at `path`, oldest first, following it back
/// through renames of the file or of any directory above it, and including deletes of a directory
/// above it.
pub fn file_history(store: &Store, path: &MemPath) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    for item in store.records(Seq(1)) {
        let (_, record) = item?;
        events.push(Event::decode(&record)?);
    }
    let mut current = path.clone();
    let mut touched = Vec::new();
    for event in events.into_iter().rev() {
        let Body::Tool(call) = &event.body else {
            continue;
        };
        let ok = !event.header.outcome.is_error;
        let hit = match &call.command {
            Command::Rename { old_path, new_path } => {
                match (
                    canonical(old_path, &call.root),
                    canonical(new_path, &call.root),
                ) {
                    (Some(old), Some(new)) if ok && current.starts_with(&new) => {
                        let rest = &current.segments()[new.segments().len()..];
                        let mut segments = old.segments().to_vec();
                        segments.extend_from_slice(rest);
                        current = MemPath::from_segments(segments);
                        true
                    }
                    (Some(old), _) if old == current => true,
                    (_, Some(new)) => new == current,
                    _ => false,
                }
            }
            Command::Delete { path } => canonical(path, &call.root)
                .is_some_and(|p| p == current || (ok && current.starts_with(&p))),
            other => other
                .paths()
                .first()
                .and_then(|p| canonical(p, &call.root))
                .is_some_and(|p| p == current),
        };
        if hit {
            touched.push(event);
        }
    }
    touched.reverse();
    Ok(touched)
}
