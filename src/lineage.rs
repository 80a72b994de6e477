//! Files followed by identity: which file each event touched, through renames, so that the
//! history of a path that held several files over time lists each file apart.
//!
//! The replay engine ([`crate::replay`]) runs the log forward, and this module watches the change
//! each event made as the replay re-derives it: it names every file the log creates by its
//! ordinal (file 1 is the first file ever created, whatever its path), moves those names with
//! renames of the file or a directory above it, and ends them with deletes. An event touches the
//! files it changed (the one a write wrote, every file under a deleted or renamed directory), and
//! an event that changed nothing (a read, an error, a retry answered from its record) the files
//! at the paths it names. One that named a path where no file was (a view of a missing file)
//! touches no file; the history of that path lists it apart.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::event::{Body, Event, Seq};
use crate::history::Called;
use crate::log::Store;
use crate::paths::MemPath;
use crate::protocol::HistoryEvent;
use crate::replay::Replay;
use crate::tool::Change;

/// The events of one file that lived at the path asked about, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Trail {
    /// The file's ordinal in the log (the `file`th file created), or `None` for the events that
    /// named the path while no file was there.
    pub file: Option<u64>,
    /// Every path the file has had, in order (empty for `file: None`).
    pub paths: Vec<String>,
    /// The events that touched it.
    pub events: Vec<Event>,
}

/// The live files while the log is replayed: path → ordinal.
#[derive(Default)]
struct Live {
    at: BTreeMap<MemPath, u64>,
    next: u64,
    /// Every path each file has had.
    paths: BTreeMap<u64, Vec<String>>,
}

impl Live {
    /// The files at `path` or under it.
    fn under(&self, path: &MemPath) -> Vec<(MemPath, u64)> {
        self.at
            .range(path.clone()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, id)| (p.clone(), *id))
            .collect()
    }

    fn write(&mut self, path: &MemPath) -> u64 {
        if let Some(id) = self.at.get(path) {
            return *id;
        }
        self.next += 1;
        let id = self.next;
        self.at.insert(path.clone(), id);
        self.paths.insert(id, vec![path.to_string()]);
        id
    }

    /// Follows the files through one event that made `change` (if it changed the tree) and named
    /// the paths `named`; returns the files it touched.
    fn follow(&mut self, change: Option<&Change>, named: &[MemPath]) -> Vec<u64> {
        match change {
            Some(Change::Write { path, .. }) => vec![self.write(path)],
            Some(Change::Delete { path }) => {
                let gone = self.under(path);
                for (at, _) in &gone {
                    self.at.remove(at);
                }
                gone.into_iter().map(|(_, id)| id).collect()
            }
            Some(Change::Rename { from, to }) => {
                let moving = self.under(from);
                for (at, id) in &moving {
                    self.at.remove(at);
                    let moved = at.moved(from, to);
                    self.paths.entry(*id).or_default().push(moved.to_string());
                    self.at.insert(moved, *id);
                }
                moving.into_iter().map(|(_, id)| id).collect()
            }
            Some(Change::Rewrite { from, to, .. }) => {
                let moved = self.follow(
                    Some(&Change::Rename {
                        from: from.clone(),
                        to: to.clone(),
                    }),
                    named,
                );
                let written = self.write(to);
                moved
                    .into_iter()
                    .chain([written])
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect()
            }
            _ => named
                .iter()
                .filter_map(|p| self.at.get(p).copied())
                .collect(),
        }
    }
}

/// Files followed by identity through a replay: feed it each event and the change its answer
/// made ([`Files::observe`]); it says which files (by ordinal) the event touched and keeps every
/// path each file has had.
#[derive(Default)]
pub(crate) struct Files {
    live: Live,
}

impl Files {
    /// Follows the files through `event`, whose replayed answer made `change`; returns the
    /// canonical paths the event named and the files it touched.
    pub(crate) fn observe(
        &mut self,
        event: &Event,
        change: Option<&Change>,
    ) -> (Vec<MemPath>, Vec<u64>) {
        let named: Vec<MemPath> = match (&event.body, Called::of(event)) {
            // An API write names whole paths, not paths under a root.
            (Body::Api(write), _) => write
                .paths()
                .into_iter()
                .filter_map(|raw| MemPath::absolute(raw).ok())
                .collect(),
            (_, Some(call)) => {
                let root = MemPath::root(call.root).ok();
                call.paths
                    .iter()
                    .filter_map(|raw| MemPath::resolve(raw, root.as_ref()?).ok())
                    .collect()
            }
            (_, None) => return (Vec::new(), Vec::new()),
        };
        let ids = self.live.follow(change, &named);
        (named, ids)
    }

    /// Every path each file has had, by ordinal.
    pub(crate) fn paths(&self) -> &BTreeMap<u64, Vec<String>> {
        &self.live.paths
    }
}

/// The files that ever lived at `path`, each with its events (following it through renames
/// before and after it lived there), in the order they were created, then the events that named
/// `path` while no file was there.
pub fn trails(store: &Store, path: &MemPath) -> Result<Vec<Trail>> {
    let mut files = Files::default();
    // Per file, the events that touched it; and the events that named `path` alone.
    let mut touched: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    let mut alone = Vec::new();
    Replay::in_memory().run(store, Seq(u64::MAX), |_, event, traced| {
        let (named, ids) = files.observe(event, traced.answer.change.as_ref());
        if ids.is_empty() && named.iter().any(|p| p == path) {
            alone.push(event.clone());
        }
        for id in ids {
            touched.entry(id).or_default().push(event.clone());
        }
        Ok::<(), Error>(())
    })?;
    let shown = path.to_string();
    let mut out: Vec<Trail> = files
        .paths()
        .iter()
        .filter(|(_, paths)| paths.contains(&shown))
        .map(|(id, paths)| Trail {
            file: Some(*id),
            paths: paths.clone(),
            events: touched.remove(id).unwrap_or_default(),
        })
        .collect();
    if !alone.is_empty() {
        out.push(Trail {
            file: None,
            paths: Vec::new(),
            events: alone,
        });
    }
    Ok(out)
}

/// One event of `trail` as `mnemo history --json` prints it: [`crate::history::logged`]
/// with `file`, the file's ordinal (`null` for an event that named the path while no file was
/// there), and `file_paths`, every path that file has had.
pub fn trail_event(trail: &Trail, event: &Event) -> HistoryEvent {
    HistoryEvent {
        event: crate::history::logged(event),
        file: trail.file,
        file_paths: trail.paths.clone(),
    }
}
