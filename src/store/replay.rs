//! The replay engine: the one loop that applies the log's events, in seq order, to a projection.
//!
//! The log is the truth, and every tree Mnemo shows but the live one is a replay of it. This
//! module holds what all those replays share: [`Replay`], which takes events from a source in
//! order, answers each again against its projection and applies what the answer changed, handing
//! every event and its answer to the user's observer. The chain rules they trust are
//! [`crate::model::chain`]'s. Each user adds only what it needs:
//!
//! | user | projection | events | what it adds |
//! |---|---|---|---|
//! | recovery on open ([`Store::catch_up`](crate::Store::catch_up)) | the stored index, through an overlay, listing lines kept | after the index's applied seq, to the log's end | writes the overlay's changes into the index |
//! | reading a store no writer holds ([`Store::current_index`](crate::Store::current_index): `ls`, `cat`, `export`, `acl list`, `token list`) | the same | the same | nothing: the overlay stays in memory |
//! | `--at` ([`crate::audit::history::state_at`]: `ls`, `cat`, `export`, Python's `records_at`) | in memory, from empty | to the seq asked | — |
//! | `history` ([`crate::audit::lineage::trails`]) | in memory | all | observes each event's change to follow files through renames |
//! | `show`, `diff` ([`crate::audit::inspect`]) | in memory | to the event before, or the two seqs | the tree before the event; its answer and change |
//! | `verify` ([`crate::audit::verify`]) | in memory, listing lines kept | all, chain-checked and decoded ahead on a thread of its own | the outcome checks (hashed on a third thread) and duplicate-call checks, the index comparison |
//! | a restore from a replica (`verify_appended`) | the same, the version journal written into it | the records appended, from memory, as they are appended | `verify`'s checks; the tree becomes the new store's index |
//!
//! [`Replay::apply`] (through `answer`) is the one place where a replay answers an event again.
//! The live writer answers new calls itself (`src/store/writer/`), through the same
//! [`Projection::run_traced`].
//!
//! The loop trusts its source for the order and integrity of what it is given: stored events
//! are read in key order and decoded, and [`Store::prove`] checks the chain they are part of
//! before the replay's result is given back (first, or on another thread beside a long replay:
//! [`Replay::run`]; recovery on open alone skips the proof); the verifier checks the chain
//! itself before it hands an event over.

use crate::error::{Error, Result};
use crate::model::event::{Event, EventHash, Seq};
use crate::store::kv::{KvRead, KvWrite, MemKv};
use crate::store::log::Store;
use crate::store::projection::{Caller, Placeholders, Projection, Traced};

mod recovery;

/// The longest replay that proves the log before it starts; a longer one proves it beside it, on
/// another thread ([`Replay::run`]).
pub const PROVE_BESIDE: u64 = 16_384;

/// Whether a replay from `at` to `to` proves the log beside it: both the replay and what is
/// left to prove are longer than [`PROVE_BESIDE`] (a `to` past the log's end counts to the
/// end; a store proven before has only what was written since to prove).
fn proves_beside(store: &Store, at: Seq, to: Seq) -> Result<bool> {
    if to.0.saturating_sub(at.0) <= PROVE_BESIDE {
        return Ok(false);
    }
    let last = store.last_seq()?;
    let replay = to.min(last).0.saturating_sub(at.0);
    let unproven = last.0.saturating_sub(store.proven().seq.0);
    Ok(replay > PROVE_BESIDE && unproven > PROVE_BESIDE)
}

/// An event as a source hands it to [`Replay::drive`].
pub trait Step {
    /// The seq the event is stored under.
    fn seq(&self) -> Seq;

    /// The event.
    fn event(&self) -> &Event;

    /// blake3 of the event's canonical body bytes, when the source has it (the payload hash the
    /// chain checks proved); `None` has the replay compute it where it needs it.
    fn input(&self) -> Option<EventHash> {
        None
    }
}

/// A stored event, as [`Replay::run`] reads it.
struct Stored {
    seq: Seq,
    event: Event,
}

impl Step for Stored {
    fn seq(&self) -> Seq {
        self.seq
    }

    fn event(&self) -> &Event {
        &self.event
    }
}

/// The stored events after `after` up to `to`, in key order, decoded (nothing else is checked).
/// A record past `to` is never decoded.
fn stored(store: &Store, after: Seq, to: Seq) -> impl Iterator<Item = Result<Stored>> + use<> {
    let from = after.0.checked_add(1).filter(|from| *from <= to.0);
    from.map(|from| store.records_through(Seq(from), to))
        .into_iter()
        .flatten()
        .map(|item| {
            let (seq, record) = item?;
            Ok(Stored {
                seq,
                event: Event::decode(&record)?,
            })
        })
}

/// A projection being brought forward through the log, one event at a time.
pub struct Replay<K> {
    tree: Projection<K>,
    /// The seq of the last event applied (or the seq the projection started at).
    at: Seq,
}

impl Replay<MemKv> {
    /// A replay from the empty tree, in memory.
    pub fn in_memory() -> Replay<MemKv> {
        Replay {
            tree: Projection::new(MemKv::default()),
            at: Seq(0),
        }
    }

    /// [`Replay::in_memory`], keeping each directory's rendered listing between events (see
    /// [`Projection::with_listings`]): for a replay that answers every event of a long log.
    pub fn in_memory_with_listings() -> Replay<MemKv> {
        Replay {
            tree: Projection::with_listings(MemKv::default()),
            at: Seq(0),
        }
    }
}

impl Replay<MemKv> {
    /// A replay from the tree `store` keeps nearest before or at `at` ([`crate::store::snapshot`]),
    /// which the log must still hold the event it was taken after, with the same chain hash (a
    /// tree that does not match is dropped, with every later one); from the empty tree when none
    /// is kept. Its listings are kept between events, as [`Replay::in_memory_with_listings`].
    pub fn from_kept(store: &Store, at: Seq) -> Result<Replay<MemKv>> {
        let kept = store.snapshots();
        while let Some((seq, snapshot)) = kept.nearest(at) {
            if store.event(seq)?.is_some_and(|e| e.hash() == snapshot.hash) {
                let mut tree = Projection::with_listings(MemKv::clone(&snapshot.kv));
                tree.restore_placeholders(Placeholders::clone(&snapshot.placeholders));
                return Ok(Replay { tree, at: seq });
            }
            kept.forget_from(seq);
        }
        Ok(Replay::in_memory_with_listings())
    }

    /// The tree after `at` ([`Replay::from_kept`], then [`Replay::run_to_keeping`]). A replay
    /// longer than one spacing runs alone: one asked meanwhile waits, then starts from the trees
    /// it left.
    pub fn kept_to(store: &Store, at: Seq) -> Result<Replay<MemKv>> {
        let kept = store.snapshots();
        let _alone = kept.is_long(at).then(|| kept.long_replay());
        let mut replay = Replay::from_kept(store, at)?;
        replay.run_to_keeping(store, at)?;
        Ok(replay)
    }

    /// [`Replay::run_to`], leaving the store a tree at each seq its snapshots want on the way.
    pub fn run_to_keeping(&mut self, store: &Store, to: Seq) -> Result<u64> {
        let kept = store.snapshots();
        self.run(store, to, |tree, event, _| {
            kept.offer(event, tree.kv(), tree.placeholders());
            Ok::<(), Error>(())
        })
    }
}

impl<K> Replay<K> {
    /// The replay holds its tree's version journal for the verifier (see
    /// [`Projection::journal_held`]).
    pub fn journal_held(self) -> Replay<K> {
        Replay {
            tree: self.tree.journal_held(),
            at: self.at,
        }
    }

    /// The replay writes its tree's version journal into the tree, as a stored index holds it
    /// (see [`Projection::journaled`]).
    pub fn journaled(self) -> Replay<K> {
        Replay {
            tree: self.tree.journaled(),
            at: self.at,
        }
    }

    /// The replay builds its tree in index layout `layout` (see [`Projection::in_layout`]).
    pub fn in_layout(self, layout: u8) -> Replay<K> {
        Replay {
            tree: self.tree.in_layout(layout),
            at: self.at,
        }
    }
}

impl<K: KvRead> Replay<K> {
    /// A replay that goes on from `tree`, an index as it was after the seq it says it applied.
    pub fn resume(tree: Projection<K>) -> Result<Replay<K>> {
        let at = tree.applied()?;
        Ok(Replay { tree, at })
    }
}

impl<K> Replay<K> {
    /// The seq of the last event applied: the tree is as it was after it (for tests).
    #[cfg(feature = "testing")]
    pub fn at(&self) -> Seq {
        self.at
    }

    /// The tree as replayed so far.
    pub fn tree(&self) -> &Projection<K> {
        &self.tree
    }

    /// The tree as replayed so far.
    pub fn into_tree(self) -> Projection<K> {
        self.tree
    }
}

impl<K: KvWrite> Replay<K> {
    /// Answers `event` again against the tree as replayed so far and applies what it changed:
    /// the one place where a replay answers an event. `input` is blake3 of the event's body
    /// bytes, if the caller has it.
    fn answer(&mut self, event: &Event, input: Option<EventHash>) -> Result<Traced> {
        self.tree
            .run_traced(Caller::of(&event.header), &event.body, input, event.seq)
    }

    /// The tree as replayed so far, to undo what an event changed (see [`crate::store::kv::UndoKv`]).
    pub fn tree_mut(&mut self) -> &mut Projection<K> {
        &mut self.tree
    }

    /// Applies one event, the next after [`Replay::at`]: its answer, and whether it was a retry.
    pub fn apply(&mut self, event: &Event) -> Result<Traced> {
        let traced = self.answer(event, None)?;
        self.at = event.seq;
        Ok(traced)
    }

    /// The loop: applies each event of `source` in turn and hands it, with its answer (or why
    /// answering it failed) and the tree after it, to `observe`. Stops at the first error of the
    /// source or of `observe`, which it returns; else returns how many events were applied.
    pub fn drive<T: Step, S>(
        &mut self,
        source: impl IntoIterator<Item = std::result::Result<T, S>>,
        mut observe: impl FnMut(&Projection<K>, &T, Result<Traced>) -> std::result::Result<(), S>,
    ) -> std::result::Result<u64, S> {
        let mut applied = 0;
        for step in source {
            let step = step?;
            let traced = self.answer(step.event(), step.input());
            self.at = step.seq();
            observe(&self.tree, &step, traced)?;
            applied += 1;
        }
        Ok(applied)
    }

    /// [`Replay::drive`] over the events `store` holds after [`Replay::at`] up to `to` (or to
    /// the log's end, if that comes first), with `observe` seeing each event and its answer;
    /// an event that cannot be decoded or answered stops it with that error. The log is proven
    /// ([`Store::prove`]): a record that breaks the chain fails it with [`Error::ChainBroken`],
    /// whatever the replay met. A replay of more than [`PROVE_BESIDE`] events, on a log with as
    /// many still to prove, runs while another thread proves it (what it applied and observed is given back only once the
    /// proof holds: observers keep what they see in memory until then); a shorter one proves
    /// first. Returns how many events were applied.
    pub fn run<E: From<Error>>(
        &mut self,
        store: &Store,
        to: Seq,
        observe: impl FnMut(&Projection<K>, &Event, Traced) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        if to <= self.at {
            return self.run_unproven(store, to, observe);
        }
        if !proves_beside(store, self.at, to)? {
            store.prove()?;
            return self.run_unproven(store, to, observe);
        }
        std::thread::scope(|scope| {
            let proof = std::thread::Builder::new()
                .name("mnemo-prove".into())
                .spawn_scoped(scope, || store.prove());
            let ran = self.run_unproven(store, to, observe);
            let proved = match proof {
                Ok(proof) => proof
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to spare: prove here, after.
                Err(_) => store.prove(),
            };
            proved?;
            ran
        })
    }

    /// [`Replay::run`] with nothing to observe: brings the tree to `to`.
    #[cfg(feature = "testing")]
    pub fn run_to(&mut self, store: &Store, to: Seq) -> Result<u64> {
        self.run(store, to, |_, _, _| Ok(()))
    }

    /// Applies `records` (stored records in seq order, going on from [`Replay::at`]) from memory,
    /// as [`Replay::recover_to`] applies the same records read from a store: for a store being
    /// made from them, whose index is built while they are appended. Returns how many were
    /// applied.
    #[cfg(feature = "replicate")]
    pub(crate) fn recover_from(&mut self, records: &[(Seq, Vec<u8>)]) -> Result<u64> {
        let source = records.iter().map(|(seq, record)| {
            Ok(Stored {
                seq: *seq,
                event: Event::decode(record)?,
            })
        });
        self.drive(source, |_, _, _| Ok::<(), Error>(()))
    }

    /// [`Replay::run_to`] without proving the log first: for recovery on open, which replays only
    /// the events past the stored index and must not cost time in the log's length.
    pub(crate) fn recover_to(&mut self, store: &Store, to: Seq) -> Result<u64> {
        self.run_unproven(store, to, |_, _, _| Ok::<(), Error>(()))
    }

    fn run_unproven<E: From<Error>>(
        &mut self,
        store: &Store,
        to: Seq,
        mut observe: impl FnMut(&Projection<K>, &Event, Traced) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let source = stored(store, self.at, to).map(|step| step.map_err(E::from));
        self.drive(source, |tree, step, traced| {
            observe(tree, &step.event, traced?)
        })
    }
}
