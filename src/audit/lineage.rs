//! Files followed by identity: which file each event touched, through renames, so that the
//! history of a path that held several files over time lists each file apart.
//!
//! The replay engine ([`crate::store::replay`]) runs the log forward, and this module watches the change
//! each event made as the replay re-derives it: it names every file the log creates by its
//! ordinal (file 1 is the first file ever created, whatever its path), moves those names with
//! renames of the file or a directory above it, and ends them with deletes. An event touches the
//! files it changed (the one a write wrote, every file under a deleted or renamed directory), and
//! an event that changed nothing (a read, an error, a retry answered from its record) the files
//! at the paths it names. One that named a path where no file was (a view of a missing file)
//! touches no file; the history of that path lists it apart.

use std::collections::BTreeMap;

use crate::audit::history::Called;
use crate::error::{Error, Result};
use crate::model::event::{Body, Event, EventHash, Seq};
use crate::model::paths::MemPath;
use crate::model::protocol::HistoryEvent;
use crate::model::tool::Change;
use crate::store::kv::MemKv;
use crate::store::log::Store;
use crate::store::replay::Replay;

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

    /// The files alive now, path → ordinal.
    pub(crate) fn live(&self) -> &BTreeMap<MemPath, u64> {
        &self.live.at
    }
}

/// The files followed through the log up to `at`, kept by the open store ([`Store::derived`]) so
/// that each `history` replays only the events written since the last one.
#[derive(Default)]
struct Followed {
    /// The tree after `at`, to answer the next events again; `None` before the first read.
    replay: Option<Replay<MemKv>>,
    /// The last event followed, and its chain hash (checked against the log before going on).
    last: Option<(Seq, EventHash)>,
    files: Files,
    /// Per file, the events that touched it.
    touched: BTreeMap<u64, Vec<Seq>>,
    /// Per path, the events that named it while no file was there.
    alone: BTreeMap<MemPath, Vec<Seq>>,
}

impl Followed {
    /// Brings the files up to the log's end: from where it stopped if the log still holds that
    /// event as it was, else from event 1.
    fn catch_up(&mut self, store: &Store) -> Result<()> {
        if let Some((seq, hash)) = self.last {
            if !store.event(seq)?.is_some_and(|e| e.hash() == hash) {
                *self = Followed::default();
            }
        }
        let replay = self
            .replay
            .get_or_insert_with(Replay::in_memory_with_listings);
        let (files, touched, alone) = (&mut self.files, &mut self.touched, &mut self.alone);
        let mut last = None;
        // The same replay leaves the store its trees of the past on the way ([`crate::store::snapshot`]),
        // and a long one runs alone, as theirs do.
        let kept = store.snapshots();
        let from = self.last.map_or(0, |(seq, _)| seq.0);
        let behind = store.log_end()?.seq.0.saturating_sub(from);
        let _alone = (behind > kept.spacing()).then(|| kept.long_replay());
        let ran = replay.run(store, Seq(u64::MAX), |tree, event, traced| {
            kept.offer(event, tree.kv(), tree.placeholders());
            let (named, ids) = files.observe(event, traced.answer.change.as_ref());
            if ids.is_empty() {
                for path in named {
                    alone.entry(path).or_default().push(event.seq);
                }
            }
            for id in ids {
                touched.entry(id).or_default().push(event.seq);
            }
            last = Some(event.seq);
            Ok::<(), Error>(())
        });
        if let Err(e) = ran {
            // An event that cannot be read or answered: the next call starts over, and meets it.
            *self = Followed::default();
            return Err(e);
        }
        if let Some(seq) = last {
            self.last = Some((seq, store.written_event(seq)?.hash()));
        }
        Ok(())
    }

    /// The trails of `path` among the files followed so far.
    fn trails(&self, store: &Store, path: &MemPath) -> Result<Vec<Trail>> {
        let events_at = |seqs: &[Seq]| -> Result<Vec<Event>> {
            seqs.iter().map(|seq| store.written_event(*seq)).collect()
        };
        let shown = path.to_string();
        let mut out = Vec::new();
        for (id, paths) in self.files.paths() {
            if !paths.contains(&shown) {
                continue;
            }
            let seqs = self.touched.get(id).map_or(&[][..], Vec::as_slice);
            out.push(Trail {
                file: Some(*id),
                paths: paths.clone(),
                events: events_at(seqs)?,
            });
        }
        if let Some(seqs) = self.alone.get(path) {
            out.push(Trail {
                file: None,
                paths: Vec::new(),
                events: events_at(seqs)?,
            });
        }
        Ok(out)
    }
}

/// The files that ever lived at `path`, each with its events (following it through renames
/// before and after it lived there), in the order they were created, then the events that named
/// `path` while no file was there. The files are followed once per open store and then only
/// through the events written since ([`Followed`]).
pub fn trails(store: &Store, path: &MemPath) -> Result<Vec<Trail>> {
    store.derived(|followed: &mut Followed| {
        followed.catch_up(store)?;
        followed.trails(store, path)
    })
}

/// [`trails`] with the files followed from event 1, whatever the store keeps (for tests).
#[cfg(any(test, feature = "testing"))]
pub fn trails_afresh(store: &Store, path: &MemPath) -> Result<Vec<Trail>> {
    let mut followed = Followed::default();
    followed.catch_up(store)?;
    followed.trails(store, path)
}

/// One event of `trail` as `mnemo history --json` prints it: [`crate::audit::history::logged`]
/// with `file`, the file's ordinal (`null` for an event that named the path while no file was
/// there), and `file_paths`, every path that file has had.
pub fn trail_event(trail: &Trail, event: &Event) -> HistoryEvent {
    HistoryEvent {
        event: crate::audit::history::logged(event),
        file: trail.file,
        file_paths: trail.paths.clone(),
    }
}
