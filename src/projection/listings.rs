//! Rendered listing lines kept between calls, per directory, so that listing a large tree costs
//! what changed since the last listing, not the whole tree.
//!
//! A directory's lines (see [`Tree::child_lines`](crate::tool::Tree::child_lines)) depend only on
//! its children's names, kinds and sizes, the name it is shown under and the profile. They are
//! kept by directory node id, and the projection forgets a directory's lines whenever it changes
//! a child entry of that directory or the size of a file in it (see the calls of
//! [`Listings::forget`] in `apply`). Node ids are never reused, so kept lines can never be taken
//! for another directory's. Nothing here is stored: it is memory beside the index, and
//! dropping it changes no answer.

use std::collections::HashMap;
use std::sync::Arc;

use crate::tool::Profile;

/// The most bytes of lines kept; past it every kept line is dropped and kept again as listed.
const MAX_BYTES: usize = 64 << 20;

/// Lines kept per directory id: for each (profile, shown name) it was listed under.
#[derive(Default)]
pub struct Listings {
    by_dir: HashMap<u64, Vec<(Profile, String, Arc<str>)>>,
    bytes: usize,
}

impl Listings {
    /// The lines kept for directory `id` shown as `shown` under `profile`.
    pub fn get(&self, id: u64, shown: &str, profile: Profile) -> Option<Arc<str>> {
        self.by_dir.get(&id).and_then(|kept| {
            kept.iter()
                .find(|(p, s, _)| *p == profile && s == shown)
                .map(|(_, _, lines)| Arc::clone(lines))
        })
    }

    /// Keeps `lines` for directory `id` shown as `shown` under `profile`.
    pub fn put(&mut self, id: u64, shown: &str, profile: Profile, lines: Arc<str>) {
        if self.bytes + lines.len() > MAX_BYTES {
            self.by_dir.clear();
            self.bytes = 0;
        }
        self.bytes += lines.len() + shown.len();
        self.by_dir
            .entry(id)
            .or_default()
            .push((profile, shown.to_string(), lines));
    }

    /// Forgets the lines of directory `id`: its children or their sizes changed.
    pub fn forget(&mut self, id: u64) {
        if let Some(kept) = self.by_dir.remove(&id) {
            let freed: usize = kept.iter().map(|(_, s, l)| s.len() + l.len()).sum();
            self.bytes -= freed;
        }
    }
}
