//! Leases: which node of a fleet serves which store, written create-only in the fleet's bucket.
//!
//! - `nodes/ID/{n:020}`: node `ID`'s heartbeats, the `n`th one made create-only every
//!   [`Timing::beat`]; the object store stamps each with its own clock. A node is alive while its
//!   latest beat is younger than [`Timing::ttl`] by that clock.
//! - `leases/NAME/{epoch:020}`: who holds the store `NAME` from that epoch on (node, URL). The
//!   latest epoch names the holder. A node takes a store that has no lease, or whose holder is
//!   dead, by making the next epoch's object: of nodes racing for it exactly one makes it. A
//!   holder hands a store over by making the next epoch naming the node it gives it to.
//!
//! **Clocks.** Nodes never compare their clocks with each other's. The fleet's one clock is the
//! object store's, read off the stamps of objects: a node judges another dead when the other's
//! latest beat is more than `ttl` (plus the stamps' one-second granularity) older than its own
//! latest beat. A holder serves a store only while its own monotonic clock says less than
//! `ttl - margin` has passed since it *began* its latest beat, and only if that beat continued the
//! one before: made before the earlier deadline ran out, within `margin / 2` of beginning, and
//! stamped less than `ttl - margin` (less the granularity) after it. Otherwise the node *lapsed*:
//! every store it held may have been taken, so it holds none until it takes each again at a new
//! epoch. The assumption: between two beats, the rates of a node's monotonic clock and of the
//! object store's clock differ by less than `margin / ttl` (30% with the defaults), and a paused
//! node does not count its pause as time not passed (a monotonic clock that stops while the
//! process is stopped only makes the holder stop later, which the margin does not cover; Linux's
//! `CLOCK_MONOTONIC`, what `Instant` reads, keeps running).
//!
//! Leases decide who *should* serve; they are not what keeps two holders' writes apart. That is
//! the write-ahead log's fencing ([`super::wal`]), which holds whatever the clocks do.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::bucket::Bucket;
use crate::error::{Error, Result};

/// The largest lease or heartbeat object read.
const OBJECT_MAX: u64 = 64 * 1024;

/// How often a node beats, how long a beat keeps it alive, and how much before then a holder
/// stops acknowledging writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Between two beats.
    pub beat: Duration,
    /// How long after its latest beat (by the object store's clock) a node is alive.
    pub ttl: Duration,
    /// How much before `ttl` runs out (by its own clock) a holder stops serving.
    pub margin: Duration,
    /// How coarse the object store's stamps may be (S3 listings give some to the second):
    /// every comparison of two stamps allows this much.
    pub granularity: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            beat: Duration::from_secs(2),
            ttl: Duration::from_secs(10),
            margin: Duration::from_secs(3),
            granularity: Duration::from_secs(1),
        }
    }
}

/// A node of the fleet: its id and the URL other nodes forward requests to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// The node's id, unique in the fleet.
    pub id: String,
    /// Its advertised URL (`--advertise`).
    pub url: String,
}

/// Who holds a store from an epoch on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The store.
    pub store: String,
    /// The epoch: one more than the lease it followed.
    pub epoch: u64,
    /// The holder.
    pub node: Node,
    /// Whether the store was deleted at this epoch (by the node it names, its holder then): the
    /// last lease the store ever has, which no node takes ([`Leases::take`] refuses it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// When the object store wrote the lease (milliseconds since 1970, its clock).
    #[serde(skip)]
    pub stamp_ms: i64,
}

/// A node's beats: the next number, and how long what they prove lasts.
#[derive(Debug, Default)]
struct Beats {
    /// The next beat's number.
    next: u64,
    /// The stamp of the latest beat made.
    stamp_ms: Option<i64>,
    /// Until when the latest continuing beat lets the node serve.
    until: Option<Instant>,
    /// Counts the node's lapses: a lease taken in an earlier generation is no longer held.
    generation: u64,
}

/// This node's view of the fleet's leases: it beats, takes stores and hands them over.
pub struct Leases {
    bucket: Arc<Bucket>,
    node: Node,
    timing: Timing,
    beats: Mutex<Beats>,
    /// Set once the node is being drained: its beats say so.
    draining: std::sync::atomic::AtomicBool,
}

/// A lease this node holds: valid while [`Leases::holds`] says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The lease.
    pub lease: Lease,
    /// The generation of this node's beats it was taken in.
    pub generation: u64,
}

/// What a heartbeat holds: the node, and whether it is being drained (it takes no store, and
/// no store is handed to it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Heartbeat {
    #[serde(flatten)]
    node: Node,
    #[serde(default)]
    draining: bool,
}

/// A node as the fleet's status shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeStatus {
    /// The node.
    pub node: Node,
    /// Whether it is being drained.
    pub draining: bool,
    /// How long before the latest beat of any node this one last beat, in milliseconds.
    pub beat_age_ms: i64,
    /// Whether it is alive.
    pub alive: bool,
}

impl Leases {
    /// The leases as `node` sees them in `bucket`.
    pub fn new(bucket: Arc<Bucket>, node: Node, timing: Timing) -> Result<Leases> {
        if node.id.is_empty()
            || node.id.len() > 64
            || !node
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(Error::InvalidArgument(format!(
                "the node id {:?} is not one: give 1 to 64 of a-z, A-Z, 0-9, '-', '_' and '.' (such as node-1)",
                node.id
            )));
        }
        if timing.margin * 2 >= timing.ttl
            || timing.beat * 2 > timing.ttl - timing.margin
            || timing.granularity * 2 > timing.margin
        {
            return Err(Error::InvalidArgument(format!(
                "lease timing {timing:?} leaves no room: the margin must be under half the ttl, two beats must fit in ttl - margin, and the margin must be at least twice the stamps' granularity"
            )));
        }
        Ok(Leases {
            bucket,
            node,
            timing,
            beats: Mutex::new(Beats::default()),
            draining: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The timing the leases keep.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    fn beats(&self) -> Result<std::sync::MutexGuard<'_, Beats>> {
        self.beats.lock().map_err(|_| Error::Poisoned {
            cause: "a thread panicked while it beat for this node".into(),
        })
    }

    /// Makes this node's next beat. Returns whether the node is alive and serving (its beat
    /// continued the last one); after a lapse it holds no store until it takes each again.
    pub fn beat(&self) -> Result<bool> {
        let mut beats = self.beats()?;
        let dir = format!("nodes/{}", self.node.id);
        if beats.next == 0 {
            // A node starting (again): its beats go on after any an earlier run made.
            beats.next = self
                .bucket
                .list(&dir)?
                .last()
                .map_or(1, |last| number(&last.name) + 1);
        }
        let began = Instant::now();
        let beat = Heartbeat {
            node: self.node.clone(),
            draining: self.draining.load(std::sync::atomic::Ordering::SeqCst),
        };
        let body = serde_json::to_vec(&beat)
            .map_err(|e| Error::io("a heartbeat", std::io::Error::other(e)))?;
        let made = self
            .bucket
            .create(&format!("{dir}/{:020}", beats.next), body)?;
        if !made {
            return Err(Error::InvalidArgument(format!(
                "another process beats as the node {} in the fleet at {}: give each node its own --node-id",
                self.node.id,
                self.bucket.url()
            )));
        }
        let n = beats.next;
        beats.next += 1;
        let took = began.elapsed();
        let listed = self.bucket.list(&dir)?;
        let stamp = listed
            .iter()
            .find(|l| number(&l.name) == n)
            .map(|l| l.stamp_ms)
            .ok_or_else(|| Error::damaged(format!("heartbeat {dir}/{n:020} vanished")))?;
        let budget = ms(self.timing.ttl - self.timing.margin);
        let continued = match (beats.stamp_ms, beats.until) {
            (Some(before), Some(until)) => {
                Instant::now() < until
                    && took <= self.timing.margin / 2
                    && stamp - before + ms(self.timing.granularity) <= budget
            }
            _ => false,
        };
        if !continued {
            beats.generation += 1;
        }
        beats.stamp_ms = Some(stamp);
        beats.until = (took <= self.timing.margin / 2)
            .then(|| began + (self.timing.ttl - self.timing.margin));
        // Older beats prove nothing more: two are kept (a reader listing while one is made).
        for old in listed.iter().filter(|l| number(&l.name) + 2 <= n) {
            self.bucket.remove(&old.name)?;
        }
        Ok(continued)
    }

    /// Whether this node still holds `held`: taken in its current generation, and its latest
    /// beat's deadline not passed. A holder checks this before it acknowledges a write.
    pub fn holds(&self, held: &Held) -> bool {
        self.beats().is_ok_and(|b| {
            b.generation == held.generation && b.until.is_some_and(|until| Instant::now() < until)
        })
    }

    /// The latest lease of `store`, if it has one.
    pub fn lease(&self, store: &str) -> Result<Option<Lease>> {
        latest(&self.bucket, store)
    }

    /// The latest lease of `store` if the node it names is alive (judged at this node's latest
    /// beat) and the store is not deleted: where the store is served now.
    pub fn live_lease(&self, store: &str) -> Result<Option<Lease>> {
        Ok(self
            .lease_and_life(store)?
            .and_then(|(lease, alive)| (alive && !lease.deleted).then_some(lease)))
    }

    /// The latest lease of `store`, if it has one, and whether the node it names is alive
    /// (judged at this node's latest beat; never, before its first).
    pub fn lease_and_life(&self, store: &str) -> Result<Option<(Lease, bool)>> {
        let now_ms = self.beats()?.stamp_ms;
        let Some(lease) = self.lease(store)? else {
            return Ok(None);
        };
        let alive = match now_ms {
            Some(now_ms) => self.alive(&lease.node.id, now_ms)?,
            None => false,
        };
        Ok(Some((lease, alive)))
    }

    /// The stamp of `node`'s latest beat, if it ever beat.
    fn last_beat(&self, node: &str) -> Result<Option<i64>> {
        Ok(self
            .bucket
            .list(&format!("nodes/{node}"))?
            .iter()
            .map(|l| l.stamp_ms)
            .max())
    }

    /// Whether the node `id`'s latest beat is younger than the ttl, judged at `now_ms` (a stamp
    /// of this node's own latest beat).
    fn alive(&self, id: &str, now_ms: i64) -> Result<bool> {
        if id.is_empty() {
            return Ok(false); // the node of a lease that is not one
        }
        let ttl = ms(self.timing.ttl);
        Ok(self
            .last_beat(id)?
            .is_some_and(|beat| now_ms - beat <= ttl + ms(self.timing.granularity)))
    }

    /// Takes `store` for this node, at the next epoch, if it is free, its holder is dead, or its
    /// latest lease names this node (held before, or handed to it): `Some` with the lease held,
    /// `None` if another live node holds it or another node took it first. Each take is a new
    /// epoch, which the store's log is then taken at. This node must have beaten (and be
    /// serving) first.
    pub fn take(&self, store: &str) -> Result<Option<Held>> {
        let (generation, now_ms) = {
            let beats = self.beats()?;
            match (beats.stamp_ms, beats.until) {
                (Some(stamp), Some(until)) if Instant::now() < until => (beats.generation, stamp),
                _ => {
                    return Err(Error::InvalidArgument(
                        "this node has not beaten within its ttl, so it cannot take a store; beat first".into(),
                    ));
                }
            }
        };
        let current = self.lease(store)?;
        let epoch = match &current {
            None => 1,
            // A deleted store's last lease: never taken again.
            Some(lease) if lease.deleted => return Ok(None),
            Some(lease)
                if lease.node.id != self.node.id && self.alive(&lease.node.id, now_ms)? =>
            {
                return Ok(None);
            }
            Some(lease) => lease.epoch + 1,
        };
        self.claim(store, epoch, &self.node, false)
            .map(|made| made.map(|lease| Held { lease, generation }))
    }

    /// Deletes the store of `held` (this node's, closed here): makes the next epoch's lease,
    /// naming this node and saying the store is deleted, which no node takes again. The lease
    /// made, or `None` if this node no longer holds the store (its beats lapsed, or another
    /// node took the store meanwhile): nothing was deleted then.
    pub fn delete(&self, held: &Held) -> Result<Option<Lease>> {
        if held.lease.node.id != self.node.id || !self.holds(held) {
            return Ok(None);
        }
        self.claim(&held.lease.store, held.lease.epoch + 1, &self.node, true)
    }

    /// Hands the store of `lease` (this node's, not served here any more) over to `to`: makes
    /// the next epoch naming it. `false` if another node took the store meanwhile.
    pub fn hand_over(&self, lease: &Lease, to: &Node) -> Result<bool> {
        Ok(self
            .claim(&lease.store, lease.epoch + 1, to, false)?
            .is_some())
    }

    /// Marks this node as being drained, in its next beats.
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Before a node's first beat: refuses to start when another live process beats as this node
    /// (its beats go on over a beat and a half), so that two processes never hold one node's
    /// stores. A node started again after its process died waits that long once.
    pub fn check_alone(&self) -> Result<()> {
        let dir = format!("nodes/{}", self.node.id);
        let before = self.bucket.list(&dir)?.last().map(|l| number(&l.name));
        if before.is_none() {
            return Ok(());
        }
        std::thread::sleep(self.timing.beat * 3 / 2);
        let after = self.bucket.list(&dir)?.last().map(|l| number(&l.name));
        if after != before {
            return Err(Error::InvalidArgument(format!(
                "another process beats as the node {} in the fleet at {}: give each node its own --node-id (or stop the other first)",
                self.node.id,
                self.bucket.url()
            )));
        }
        Ok(())
    }

    fn claim(&self, store: &str, epoch: u64, to: &Node, deleted: bool) -> Result<Option<Lease>> {
        let lease = Lease {
            store: store.to_string(),
            epoch,
            node: to.clone(),
            deleted,
            stamp_ms: 0,
        };
        let body = serde_json::to_vec(&lease)
            .map_err(|e| Error::io("a lease", std::io::Error::other(e)))?;
        match self
            .bucket
            .create(&format!("leases/{store}/{epoch:020}"), body)?
        {
            true => Ok(self.lease(store)?.filter(|l| l.epoch == epoch)),
            false => Ok(None),
        }
    }

    /// The stores that have a lease, in name order.
    pub fn stores(&self) -> Result<Vec<String>> {
        self.bucket.dirs("leases")
    }

    /// Every node that ever beat and is still listed, with its age against the latest beat of
    /// any node.
    pub fn nodes(&self) -> Result<Vec<NodeStatus>> {
        let mut found = Vec::new();
        for id in self.bucket.dirs("nodes")? {
            let listed = self.bucket.list(&format!("nodes/{id}"))?;
            let Some(last) = listed.last() else { continue };
            // A beat that cannot be read (damaged, or not a beat) shows no node: the others stay
            // visible and drainable.
            let Some(beat) = self
                .bucket
                .get(&last.name, OBJECT_MAX)
                .ok()
                .flatten()
                .and_then(|bytes| serde_json::from_slice::<Heartbeat>(&bytes).ok())
            else {
                continue;
            };
            found.push((beat, listed.iter().map(|l| l.stamp_ms).max().unwrap_or(0)));
        }
        let now = found.iter().map(|(_, s)| *s).max().unwrap_or(0);
        let ttl = ms(self.timing.ttl);
        Ok(found
            .into_iter()
            .map(|(beat, stamp)| NodeStatus {
                node: beat.node,
                draining: beat.draining,
                beat_age_ms: now - stamp,
                alive: now - stamp <= ttl + ms(self.timing.granularity),
            })
            .collect())
    }
}

/// The latest lease of `store` in `bucket`, if it has one (read by a node, or from outside the
/// fleet: `verify --from` tells a deleted store from a damaged one by it).
pub fn latest(bucket: &Bucket, store: &str) -> Result<Option<Lease>> {
    // Only an epoch's name counts (20 digits); anything else under the store's leases is no
    // lease.
    let Some((epoch, latest)) = bucket
        .list(&format!("leases/{store}"))?
        .into_iter()
        .filter_map(|l| {
            let tail = l.name.rsplit('/').next().unwrap_or_default();
            Some((crate::replica::segment::fixed_number(tail)?, l))
        })
        .next_back()
    else {
        return Ok(None);
    };
    let bytes = bucket
        .get(&latest.name, OBJECT_MAX)?
        .ok_or_else(|| Error::damaged(format!("lease {} vanished", latest.name)))?;
    // A lease that is not one (written by hand, or by whoever else holds the bucket's keys)
    // names no node: the store is free, and the next take outranks it with the next epoch,
    // rather than the store being down on every node until someone removes it.
    let mut lease = serde_json::from_slice::<Lease>(&bytes)
        .ok()
        .filter(|lease| lease.store == store && lease.epoch == epoch)
        .unwrap_or_else(|| Lease {
            store: store.to_string(),
            epoch,
            node: Node {
                id: String::new(),
                url: String::new(),
            },
            deleted: false,
            stamp_ms: 0,
        });
    lease.stamp_ms = latest.stamp_ms;
    Ok(Some(lease))
}

/// `d` in whole milliseconds.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// The number a beat's or a lease's object name ends with (0 if none).
fn number(name: &str) -> u64 {
    name.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short times for tests over a store in memory, whose stamps are to the millisecond.
    const QUICK: Timing = Timing {
        beat: Duration::from_millis(50),
        ttl: Duration::from_millis(400),
        margin: Duration::from_millis(100),
        granularity: Duration::from_millis(5),
    };

    fn node(bucket: &Arc<Bucket>, id: &str) -> Leases {
        let node = Node {
            id: id.into(),
            url: format!("http://{id}"),
        };
        Leases::new(Arc::clone(bucket), node, QUICK).expect("leases")
    }

    /// Nodes `a` and `b` of a fleet in memory, each having beaten once, and `notes` free.
    fn beating() -> (Leases, Leases) {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let (a, b) = (node(&bucket, "a"), node(&bucket, "b"));
        a.beat().expect("a beats");
        b.beat().expect("b beats");
        (a, b)
    }

    #[test]
    fn a_free_store_is_taken_once_and_a_dead_holders_store_is_taken_over() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let (a, b) = (node(&bucket, "a"), node(&bucket, "b"));
        assert!(
            a.take("notes").is_err(),
            "a node that never beat takes nothing"
        );
        assert!(
            !a.beat().expect("a beats"),
            "a first beat starts a generation"
        );
        assert!(a.beat().expect("a beats"), "the next one continues it");
        let held = a
            .take("notes")
            .expect("take")
            .expect("a free store is taken");
        assert_eq!((held.lease.epoch, held.lease.node.id.as_str()), (1, "a"));
        assert!(a.holds(&held));
        let held = a
            .take("notes")
            .expect("take")
            .expect("a takes its own store again");
        assert_eq!(held.lease.epoch, 2, "each take is a new epoch");
        b.beat().expect("b beats");
        assert_eq!(b.take("notes").expect("take"), None, "a is alive");
        // a stops beating: its deadline passes before anyone may judge it dead.
        std::thread::sleep(QUICK.ttl - QUICK.margin);
        assert!(!a.holds(&held), "a stops serving at ttl - margin");
        std::thread::sleep(QUICK.margin + QUICK.granularity * 2);
        b.beat().expect("b beats");
        let taken = b
            .take("notes")
            .expect("take")
            .expect("a is dead: b takes over");
        assert_eq!(taken.lease.epoch, 3);
        // a comes back: it lapsed, holds nothing, and cannot take the store from a live b.
        assert!(!a.beat().expect("a beats again"), "a lapsed");
        assert!(!a.holds(&held));
        assert_eq!(a.take("notes").expect("take"), None);
        let status = b.nodes().expect("status");
        assert_eq!(status.len(), 2);
        assert!(status.iter().all(|s| s.alive));
        assert_eq!(b.stores().expect("stores"), vec!["notes".to_string()]);
    }

    #[test]
    fn a_lease_that_is_not_one_names_no_node_and_the_next_take_outranks_it() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let a = node(&bucket, "a");
        a.beat().expect("a beats");
        a.beat().expect("a beats");
        let held = a.take("notes").expect("take").expect("taken");
        assert_eq!(held.lease.epoch, 1);
        // A name that is no epoch's is no lease.
        assert!(
            bucket
                .create("leases/notes/zzz", b"{}".to_vec())
                .expect("create")
        );
        assert_eq!(a.lease("notes").expect("lease"), Some(held.lease.clone()));
        // Junk at a later epoch: no node's lease, outranked by the next take.
        let junk = format!("leases/notes/{:020}", 9);
        assert!(bucket.create(&junk, b"{garbage".to_vec()).expect("create"));
        let read = a.lease("notes").expect("lease").expect("a lease");
        assert_eq!((read.epoch, read.node.id.as_str()), (9, ""));
        assert_eq!(a.live_lease("notes").expect("live"), None);
        let again = a.take("notes").expect("take").expect("taken over the junk");
        assert_eq!((again.lease.epoch, again.lease.node.id.as_str()), (10, "a"));
    }

    #[test]
    fn a_store_handed_over_is_held_by_its_new_node_at_the_next_epoch() {
        let (a, b) = beating();
        let held = a.take("notes").expect("take").expect("free");
        assert!(a.hand_over(&held.lease, b.node()).expect("hand over"));
        let got = b.take("notes").expect("take").expect("handed to b");
        assert_eq!((got.lease.epoch, got.lease.node.id.as_str()), (3, "b"));
        assert!(
            !a.hand_over(&held.lease, b.node()).expect("again"),
            "an epoch is made once"
        );
        assert_eq!(a.take("notes").expect("take"), None, "b is alive");
    }

    #[test]
    fn a_deleted_stores_lease_is_never_taken_again() {
        let (a, b) = beating();
        let held = a.take("notes").expect("take").expect("free");
        assert_eq!(b.delete(&held).expect("b holds nothing"), None);
        let deleted = a.delete(&held).expect("delete").expect("a holds it");
        assert_eq!((deleted.epoch, deleted.deleted), (2, true));
        assert_eq!(
            a.delete(&held).expect("again"),
            None,
            "an epoch is made once"
        );
        assert_eq!(a.live_lease("notes").expect("read"), None);
        assert_eq!(a.take("notes").expect("take"), None, "not by its deleter");
        std::thread::sleep(QUICK.ttl + QUICK.granularity * 2);
        b.beat().expect("b beats");
        assert_eq!(b.take("notes").expect("take"), None, "nor once it is dead");
        assert!(b.lease("notes").expect("read").is_some_and(|l| l.deleted));
    }

    #[test]
    fn a_node_started_while_another_process_beats_as_it_is_refused() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let a = node(&bucket, "a");
        a.beat().expect("beat");
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    a.beat().expect("a beats");
                    std::thread::sleep(QUICK.beat);
                }
            });
            let twin = node(&bucket, "a");
            let refused = twin.check_alone().expect_err("a beats meanwhile");
            assert!(refused.to_string().contains("--node-id"), "{refused}");
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        node(&bucket, "a")
            .check_alone()
            .expect("a node started again after its process stopped");
        node(&bucket, "new")
            .check_alone()
            .expect("a node never seen");
    }

    #[test]
    fn two_processes_beating_as_one_node_or_a_bad_id_or_timing_are_refused() {
        let bucket = Arc::new(Bucket::in_memory().expect("bucket"));
        let (a, twin) = (node(&bucket, "a"), node(&bucket, "a"));
        a.beat().expect("beat");
        twin.beat().expect("the twin starts after a's beats");
        let refused = a.beat().expect_err("a finds its next number taken");
        assert!(refused.to_string().contains("--node-id"), "{refused}");
        for id in ["", "a/b", "..x y"] {
            let node = Node {
                id: id.into(),
                url: String::new(),
            };
            assert!(
                Leases::new(Arc::clone(&bucket), node, QUICK).is_err(),
                "{id:?}"
            );
        }
        let node = Node {
            id: "c".into(),
            url: String::new(),
        };
        let tight = Timing {
            margin: QUICK.ttl / 2,
            ..QUICK
        };
        assert!(Leases::new(Arc::clone(&bucket), node, tight).is_err());
    }
}
