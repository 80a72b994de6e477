//! Trees of the past, kept in memory: replayed trees taken every so many events, so that the tree
//! after any seq (`show`, `ls --at`, `cat --at`, `diff`) costs a replay from the nearest one
//! before it rather than from event 1.
//!
//! A [`Snapshots`] belongs to one open store (a [`crate::store::log::Store`] and its clones) and is
//! filled by the replays that read the past ([`crate::store::replay`]): as one runs forward it leaves a
//! tree every so many events (the spacing). What it holds is bounded: at most [`MAX_TREES`]
//! trees and [`MAX_BYTES`] of them, and every store open in the process together at most
//! [`PROCESS_MAX_BYTES`]; when either would be passed, the spacing doubles and every
//! tree off the new spacing goes (so a long log keeps trees evenly spread, each replay at most one
//! spacing long). A tree larger than the budget is not kept at all.
//!
//! Each tree is kept with the chain hash of the event it was taken after, and is used only while
//! the log still holds that event with that hash: a rewritten log (a redaction, which also opens
//! the store anew) never serves a tree of the log it replaced. The verifier never uses these
//! trees: it replays from event 1 and is what proves them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::model::event::{Event, EventHash, Seq};
use crate::store::kv::MemKv;

/// The placeholders of erased content a replay's tree holds: by file identity, the SHA-256 its
/// erased record kept and the erased event's seq
/// ([`crate::store::projection::Projection::apply_kept`]); kept with the tree they belong to.
pub type Placeholders = BTreeMap<u64, ([u8; 32], u64)>;

/// The most trees one store keeps.
pub const MAX_TREES: usize = 256;

/// The most bytes (keys, values and a per-entry overhead) one store's trees take together.
pub const MAX_BYTES: usize = 64 << 20;

/// The most bytes the trees of every store open in this process take together (a data server
/// holds many): a store that would pass it thins its own trees, and keeps none when it has none.
pub const PROCESS_MAX_BYTES: usize = 256 << 20;

/// What the trees of several stores may hold together, and hold now.
struct Budget {
    max: usize,
    held: AtomicUsize,
}

/// The budget of every store open in this process.
static PROCESS: Budget = Budget {
    max: PROCESS_MAX_BYTES,
    held: AtomicUsize::new(0),
};

/// The spacing of a store's first trees, in events.
pub const FIRST_SPACING: u64 = 1024;

/// What one entry of a map costs beyond its key and value (the tree's node and two vectors).
const ENTRY_OVERHEAD: usize = 64;

/// A kept tree: the map after event `seq` (the key it is kept under).
#[derive(Clone)]
pub struct Snapshot {
    /// The map.
    pub kv: Arc<MemKv>,
    /// The chain hash of the event it was taken after.
    pub hash: EventHash,
    /// The placeholders of erased content the tree holds, with the digests they answer with
    /// ([`crate::store::projection::Projection::apply_kept`]); empty for a store with no redaction by seq.
    pub placeholders: Arc<Placeholders>,
    /// What it costs, as counted against [`MAX_BYTES`].
    bytes: usize,
}

/// One store's kept trees.
pub struct Snapshots {
    inner: Mutex<Inner>,
    /// Held by a replay that runs more than one spacing, so that pages asked at once of a store
    /// just opened replay its log once, not once each: the others wait, then start from the trees
    /// it left.
    long: Mutex<()>,
}

struct Inner {
    trees: BTreeMap<Seq, Snapshot>,
    spacing: u64,
    bytes: usize,
    /// [`MAX_BYTES`], or less in tests.
    max_bytes: usize,
    /// What it shares with the other stores' trees: [`PROCESS`], or another in tests.
    shared: &'static Budget,
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots::within(MAX_BYTES)
    }
}

/// What `kv` costs to keep.
fn size_of(kv: &MemKv) -> usize {
    kv.map
        .iter()
        .map(|(k, v)| k.len() + v.len() + ENTRY_OVERHEAD)
        .sum()
}

impl Snapshots {
    /// Trees kept within `max_bytes`.
    fn within(max_bytes: usize) -> Snapshots {
        Snapshots::sharing(max_bytes, &PROCESS)
    }

    /// Trees kept within `max_bytes`, and with other stores' within `shared`.
    fn sharing(max_bytes: usize, shared: &'static Budget) -> Snapshots {
        Snapshots {
            inner: Mutex::new(Inner {
                trees: BTreeMap::new(),
                spacing: FIRST_SPACING,
                bytes: 0,
                max_bytes,
                shared,
            }),
            long: Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept tree nearest before or at `at`, and the seq it was taken after.
    pub fn nearest(&self, at: Seq) -> Option<(Seq, Snapshot)> {
        self.lock()
            .trees
            .range(..=at)
            .next_back()
            .map(|(seq, tree)| (*seq, tree.clone()))
    }

    /// Every `spacing()` events a replay offers its tree ([`Snapshots::wants`] says when).
    pub fn spacing(&self) -> u64 {
        self.lock().spacing
    }

    /// Whether a replay to `at` would run more than one spacing from the nearest kept tree.
    pub fn is_long(&self, at: Seq) -> bool {
        let from = self.nearest(at).map_or(0, |(seq, _)| seq.0);
        at.0.saturating_sub(from) > self.spacing()
    }

    /// Waits for, and holds until the guard goes, the right to run a long replay (see
    /// [`Snapshots::is_long`]).
    pub fn long_replay(&self) -> MutexGuard<'_, ()> {
        self.long.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Offers `kv`, the tree right after `event`, and the placeholders of erased content it holds:
    /// kept if the spacing wants one there (cloned only then).
    pub fn offer(&self, event: &Event, kv: &MemKv, placeholders: &Placeholders) {
        if self.wants(event.seq) {
            self.keep_with(event.seq, event.hash(), kv.clone(), placeholders.clone());
        }
    }

    /// Whether a tree taken after `seq` would be kept: `seq` is on the spacing and none is kept
    /// there yet.
    pub fn wants(&self, seq: Seq) -> bool {
        let inner = self.lock();
        seq.0 > 0 && seq.0 % inner.spacing == 0 && !inner.trees.contains_key(&seq)
    }

    /// Keeps `kv`, the tree after event `seq` whose chain hash is `hash`, if it fits; returns
    /// whether it was kept.
    #[cfg(test)]
    pub fn keep(&self, seq: Seq, hash: EventHash, kv: MemKv) -> bool {
        self.keep_with(seq, hash, kv, Placeholders::new())
    }

    /// [`Snapshots::keep`], with the placeholders of erased content the tree holds.
    pub fn keep_with(
        &self,
        seq: Seq,
        hash: EventHash,
        kv: MemKv,
        placeholders: Placeholders,
    ) -> bool {
        let bytes = size_of(&kv);
        let mut inner = self.lock();
        if bytes > inner.max_bytes {
            return false;
        }
        if seq.0 == 0 || seq.0 % inner.spacing != 0 || inner.trees.contains_key(&seq) {
            return false;
        }
        inner.bytes += bytes;
        inner.shared.held.fetch_add(bytes, Ordering::SeqCst);
        inner.trees.insert(
            seq,
            Snapshot {
                kv: Arc::new(kv),
                hash,
                placeholders: Arc::new(placeholders),
                bytes,
            },
        );
        while inner.trees.len() > MAX_TREES
            || inner.bytes > inner.max_bytes
            || inner.shared.held.load(Ordering::SeqCst) > inner.shared.max
        {
            if inner.trees.is_empty() {
                break;
            }
            inner.thin();
        }
        inner.trees.contains_key(&seq)
    }

    /// Drops the tree kept after `seq` (one the log no longer matches), and with it every later
    /// one, which was replayed through it.
    pub fn forget_from(&self, seq: Seq) {
        let mut inner = self.lock();
        let dropped = inner.trees.split_off(&seq);
        inner.release(dropped.values().map(|t| t.bytes).sum());
    }

    /// How many trees are kept, and their bytes.
    #[cfg(any(test, feature = "testing"))]
    pub fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.trees.len(), inner.bytes)
    }
}

impl Inner {
    /// Doubles the spacing and drops the trees off it (the last one too, once the spacing
    /// passes every kept seq).
    fn thin(&mut self) {
        self.spacing = self.spacing.saturating_mul(2);
        let spacing = self.spacing;
        let mut freed = 0;
        self.trees.retain(|seq, tree| {
            let keep = seq.0 % spacing == 0;
            if !keep {
                freed += tree.bytes;
            }
            keep
        });
        self.release(freed);
    }

    /// Counts `bytes` of trees as gone, here and in the process.
    fn release(&mut self, bytes: usize) {
        self.bytes -= bytes;
        self.shared.held.fetch_sub(bytes, Ordering::SeqCst);
    }
}

impl Drop for Snapshots {
    fn drop(&mut self) {
        let mut inner = self.lock();
        let held = inner.bytes;
        inner.release(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(entries: usize, value: usize) -> MemKv {
        let mut kv = MemKv::default();
        for i in 0..entries {
            kv.map
                .insert(format!("k{i:08}").into_bytes(), vec![b'x'; value]);
        }
        kv
    }

    #[test]
    fn keeps_trees_on_the_spacing_only_and_finds_the_nearest() {
        let kept = Snapshots::default();
        assert!(!kept.keep(Seq(FIRST_SPACING + 1), EventHash::ZERO, tree(1, 1)));
        assert!(kept.keep(Seq(FIRST_SPACING), EventHash::ZERO, tree(1, 1)));
        assert!(!kept.wants(Seq(FIRST_SPACING)), "already kept");
        assert!(kept.wants(Seq(2 * FIRST_SPACING)));
        assert!(kept.nearest(Seq(FIRST_SPACING - 1)).is_none());
        let (seq, _) = kept.nearest(Seq(3 * FIRST_SPACING)).expect("a tree");
        assert_eq!(seq, Seq(FIRST_SPACING));
    }

    #[test]
    fn thins_to_stay_within_its_count_and_bytes() {
        let kept = Snapshots::default();
        for i in 1..=(MAX_TREES as u64 * 4) {
            let seq = Seq(i * kept.spacing());
            kept.keep(seq, EventHash::ZERO, tree(4, 8));
        }
        let (count, _) = kept.held();
        assert!(count <= MAX_TREES, "{count} trees kept");
        assert!(kept.spacing() > FIRST_SPACING, "the spacing grew");
        // Every kept tree sits on the current spacing.
        let spacing = kept.spacing();
        assert!(kept.lock().trees.keys().all(|s| s.0 % spacing == 0));

        let budget = 10 * size_of(&tree(100, 100));
        let big = Snapshots::within(budget);
        for i in 1..=40 {
            let seq = Seq(i * big.spacing());
            big.keep(seq, EventHash::ZERO, tree(100, 100));
            assert!(big.held().1 <= budget, "{} bytes kept", big.held().1);
        }
        assert!(
            big.held().0 >= 5,
            "thinning halves, so at least half the budget stays used"
        );
        assert!(
            !big.keep(Seq(1 << 40), EventHash::ZERO, tree(1100, 100)),
            "larger than the budget"
        );
    }

    #[test]
    fn stores_together_stay_within_the_shared_budget_and_give_it_back_when_closed() {
        let one = size_of(&tree(100, 100));
        let shared: &'static Budget = Box::leak(Box::new(Budget {
            max: 6 * one,
            held: AtomicUsize::new(0),
        }));
        let stores: Vec<Snapshots> = (0..4)
            .map(|_| Snapshots::sharing(MAX_BYTES, shared))
            .collect();
        for round in 1..=6 {
            for store in &stores {
                let seq = Seq(round * store.spacing());
                store.keep(seq, EventHash::ZERO, tree(100, 100));
                assert!(shared.held.load(Ordering::SeqCst) <= shared.max);
            }
        }
        let held: usize = stores.iter().map(|s| s.held().1).sum();
        assert_eq!(held, shared.held.load(Ordering::SeqCst));
        assert!(held > 0);
        drop(stores);
        assert_eq!(
            shared.held.load(Ordering::SeqCst),
            0,
            "closed stores give their bytes back"
        );
    }

    #[test]
    fn forgets_a_tree_and_every_later_one() {
        let kept = Snapshots::default();
        for i in 1..=4 {
            assert!(kept.keep(Seq(i * FIRST_SPACING), EventHash::ZERO, tree(2, 2)));
        }
        kept.forget_from(Seq(2 * FIRST_SPACING));
        assert_eq!(kept.held().0, 1);
        let (seq, _) = kept.nearest(Seq(10 * FIRST_SPACING)).expect("a tree");
        assert_eq!(seq, Seq(FIRST_SPACING));
        assert_eq!(kept.held().1, size_of(&tree(2, 2)));
    }
}
