//! Rendered listing lines kept between calls, per directory, so that listing a large tree costs
//! what changed since the last listing, not the whole tree.
//!
//! A directory's lines (see [`Tree::child_lines`](crate::model::tool::Tree::child_lines)) depend only on
//! its children's names, kinds and sizes, the name it is shown under and the profile. They are
//! kept by directory node id, with the entries they were rendered from, and the projection
//! forgets a directory's lines whenever it changes a child entry of that directory or the size
//! of a file in it (see the calls of [`Listings::forget`] in `apply`). One change keeps the
//! entries: a rename within one directory, which only changes one entry's name
//! ([`Listings::renamed`]); the lines are then rendered again from the kept entries, without
//! reading the index. Node ids are never reused, so kept lines can never be taken for another
//! directory's. Nothing here is stored: it is memory beside the index, and dropping it changes
//! no answer.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::tool::{Entry, Profile};

/// The most bytes of lines kept; past it every kept line is dropped and kept again as listed.
const MAX_BYTES: usize = 64 << 20;

/// What is kept of one directory.
#[derive(Default)]
struct Kept {
    /// Its entries in the index's order, as they were listed (and renamed since).
    entries: Option<Vec<Entry>>,
    /// Its lines for each (profile, shown name) it was listed under.
    lines: Vec<(Profile, String, Arc<str>)>,
}

impl Kept {
    fn bytes(&self) -> usize {
        let entries = self.entries.as_deref().map_or(0, entries_bytes);
        let lines: usize = self.lines.iter().map(|(_, s, l)| s.len() + l.len()).sum();
        entries + lines
    }
}

/// About what `entries` hold in memory.
fn entries_bytes(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| e.name.len() + std::mem::size_of::<Entry>())
        .sum()
}

/// Lines kept per directory id.
#[derive(Default)]
pub struct Listings {
    by_dir: HashMap<u64, Kept>,
    bytes: usize,
}

impl Listings {
    /// The lines kept for directory `id` shown as `shown` under `profile`.
    pub fn get(&self, id: u64, shown: &str, profile: Profile) -> Option<Arc<str>> {
        self.by_dir.get(&id).and_then(|kept| {
            kept.lines
                .iter()
                .find(|(p, s, _)| *p == profile && s == shown)
                .map(|(_, _, lines)| Arc::clone(lines))
        })
    }

    /// The entries kept for directory `id`, rendered by `render`.
    pub fn render<T>(&self, id: u64, render: impl FnOnce(&[Entry]) -> T) -> Option<T> {
        let entries = self.by_dir.get(&id)?.entries.as_deref()?;
        Some(render(entries))
    }

    /// Keeps `lines` for directory `id` shown as `shown` under `profile`, and the `entries` they
    /// were rendered from when they were listed from the index.
    pub fn put(
        &mut self,
        id: u64,
        shown: &str,
        profile: Profile,
        lines: Arc<str>,
        entries: Option<Vec<Entry>>,
    ) {
        let added = lines.len() + shown.len() + entries.as_deref().map_or(0, entries_bytes);
        if self.bytes + added > MAX_BYTES {
            self.by_dir.clear();
            self.bytes = 0;
        }
        self.bytes += added;
        let kept = self.by_dir.entry(id).or_default();
        if entries.is_some() {
            kept.entries = entries;
        }
        kept.lines.push((profile, shown.to_string(), lines));
    }

    /// Forgets the lines of directory `id`: its children or their sizes changed.
    pub fn forget(&mut self, id: u64) {
        if let Some(kept) = self.by_dir.remove(&id) {
            self.bytes -= kept.bytes();
        }
    }

    /// Directory `id`'s entry `from` was renamed `to` (replacing any entry of that name): its
    /// kept entries follow, in the index's order (by name), and its lines are forgotten, to be
    /// rendered again from them.
    pub fn renamed(&mut self, id: u64, from: &str, to: &str) {
        let Some(kept) = self.by_dir.get_mut(&id) else {
            return;
        };
        self.bytes -= kept.bytes();
        kept.lines.clear();
        let moved = kept.entries.as_mut().and_then(|entries| {
            let at = entries
                .binary_search_by(|e| e.name.as_str().cmp(from))
                .ok()?;
            let mut entry = entries.remove(at);
            entry.name = to.to_string();
            match entries.binary_search_by(|e| e.name.as_str().cmp(to)) {
                Ok(at) => entries[at] = entry,
                Err(at) => entries.insert(at, entry),
            }
            Some(())
        });
        if moved.is_none() {
            // Entries that did not hold `from` are not the directory's: kept no longer.
            self.by_dir.remove(&id);
            return;
        }
        self.bytes += kept.bytes();
    }
}
