//! Continuous shipping: a thread that ships a client's store to a replica as it is written
//! (`mnemo serve --replicate URL`, `mnemo replicate --to URL`).
//!
//! The thread watches the store's head (a read of sled, no writer lock). Once the store has
//! events the replica lacks and `interval` has passed since the last shipment, it takes the head
//! the writer has made durable (the same head a read sees: no event a crash could undo) and ships
//! up to it with [`ship_upto`](super::ship_upto), outside the writer lock, so writers never wait
//! for the object store. A shipment that fails (the object store down, a network error) is
//! reported and tried again, waiting twice as long each time up to [`MAX_BACKOFF`]; since a
//! shipment resumes from the segments the replica holds, nothing is shipped twice or skipped.
//!
//! `checkpoints/{seq}` objects are kept at most every [`CHECKPOINT_EVERY`] (and by the first and
//! the last shipment); the `head` object names the replicated head after every shipment.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::worker::{Control, Worker};
use super::{Replica, Shipped, ship_upto};
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::store::log::Head;

/// How often the shipper looks at the store's head.
const POLL: Duration = Duration::from_millis(20);

/// The most heads the shipper remembers while the replica lags (see [`coarser`]).
const SEEN_MAX: usize = 1024;

/// The longest wait between tries after shipments fail.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How often a continuous shipper keeps a `checkpoints/{seq}` object: 144 a day, beside the
/// few dozen segments compaction leaves (each is an object a restore reads).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(600);

/// Where a replication stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The replica's URL.
    pub url: String,
    /// The head the replica's last checkpoint names (seq 0 before the first shipment).
    pub replicated: Head,
    /// The store's last event, as the shipper last saw it.
    pub head: Seq,
    /// How long the oldest event the replica lacks has been in the store (as the shipper saw
    /// it); `None` when the replica is up to date.
    pub behind: Option<Duration>,
    /// The shipments that reached the replica.
    pub shipments: u64,
    /// Why the last shipment failed, if it did (cleared by the next that succeeds).
    pub error: Option<String>,
    /// Whether the last shipment's checkpoint was signed by the store's key (`None` before
    /// the first).
    pub signed: Option<bool>,
}

impl Status {
    /// The events the replica lacks.
    pub fn lag(&self) -> u64 {
        self.head.0.saturating_sub(self.replicated.seq.0)
    }

    /// The status as JSON (what `GET /v1/replication` answers).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "url": self.url,
            "replicated": {"seq": self.replicated.seq.0, "hash": self.replicated.hash.to_hex()},
            "head": self.head.0,
            "lag_events": self.lag(),
            "behind_ms": self.behind.map(|d| d.as_secs_f64() * 1e3),
            "shipments": self.shipments,
            "error": self.error,
            "signed": self.signed,
        })
    }
}

/// What the shipper tells its owner of each shipment: what reached the replica and where the
/// replication then stands, or why it failed and the wait before the next try.
pub(crate) type Told<'a> = std::result::Result<(&'a Shipped, &'a Status), (&'a Error, Duration)>;

/// How a replication runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shipping {
    /// The least time between shipments: the bound on the lag while the object store keeps
    /// up, and what keeps segments from being one event each.
    pub(crate) interval: Duration,
}

impl Shipping {
    /// The longest wait between tries after shipments fail.
    pub(crate) const MAX_BACKOFF: Duration = MAX_BACKOFF;
}

impl Default for Shipping {
    fn default() -> Self {
        Shipping {
            interval: Duration::from_secs(1),
        }
    }
}

/// A running replication: a thread shipping a store to a replica. Dropping it stops the thread
/// without a last shipment; [`stop`](Replication::stop) ships what is left first.
pub struct Replication(Worker<Status>);

impl Replication {
    /// Starts shipping the store `client` holds in this process to `replica`, at most every
    /// `interval` (the bound on the lag while the object store keeps up, and what keeps segments
    /// from being one event each), telling `report` about each shipment: what reached the
    /// replica and where the replication then stands, or why it failed and how long the shipper
    /// waits before it tries again (twice as long each time, up to 30 s). The store must be open
    /// here ([`Error::NotLocal`] for a served store: its server replicates it).
    pub fn start(
        client: &MnemoClient,
        replica: Replica,
        interval: Duration,
        report: impl for<'a> FnMut(
            std::result::Result<(&'a Shipped, &'a Status), (&'a Error, Duration)>,
        ) + Send
        + 'static,
    ) -> Result<Replication> {
        let shipping = Shipping { interval };
        client.local_store()?;
        let status = Status {
            url: replica.url().to_string(),
            replicated: Head::EMPTY,
            head: Seq(0),
            behind: None,
            shipments: 0,
            error: None,
            signed: None,
        };
        let client = client.clone();
        Worker::spawn("mnemo-replicate", status, move |control| {
            run(&client, &replica, shipping, control, report);
        })
        .map(Replication)
    }

    /// Where the replication stands.
    pub fn status(&self) -> Status {
        self.0.status()
    }

    /// A handle that reads the status after the replication is moved (into a server's route).
    pub fn watcher(&self) -> impl Fn() -> Status + Send + Sync + 'static {
        self.0.watcher()
    }

    /// Ships what the store holds now, then stops; returns the last status (its `error` says
    /// why the last shipment failed, if it did).
    pub fn stop(mut self) -> Status {
        self.0.halt();
        self.status()
    }
}

/// The shipper's loop: watch, ship once `interval` has passed, back off on failure, and ship
/// once more when asked to stop.
fn run(
    client: &MnemoClient,
    replica: &Replica,
    shipping: Shipping,
    control: &Control<Status>,
    mut report: impl FnMut(Told<'_>),
) {
    // Each head seen with when it was first seen: the age of the oldest event the replica
    // lacks is that of the first entry past the replicated seq.
    let mut seen: VecDeque<(Seq, Instant)> = VecDeque::new();
    let mut replicated = Head::EMPTY;
    let mut last_ship: Option<Instant> = None;
    // The seq of the last `checkpoints/{seq}` object kept, and when.
    let mut checkpointed = (Seq(0), None::<Instant>);
    let mut wait = shipping.interval;
    let mut failing = false;
    loop {
        let stopping = control.stopping();
        let head = client
            .local_store()
            .and_then(|store| store.head())
            .map(|h| h.seq);
        let now = Instant::now();
        if let Ok(head) = head {
            if seen.back().is_none_or(|(seq, _)| *seq < head) {
                seen.push_back((head, now));
            }
            if seen.len() > SEEN_MAX {
                seen = coarser(&seen);
            }
        }
        let newest = seen.back().map_or(Seq(0), |(seq, _)| *seq);
        control.update(|status| {
            status.head = newest.max(replicated.seq);
            status.behind = seen
                .iter()
                .find(|(seq, _)| *seq > replicated.seq)
                .map(|(_, at)| at.elapsed());
        });
        let due = last_ship.is_none_or(|at| now.duration_since(at) >= wait);
        // The first round ships too: it proves the replica is this store's and resumes it.
        // The last ships what is left and keeps the checkpoint of where the replica ends.
        let unkept = stopping && checkpointed.0 < replicated.seq;
        if (newest > replicated.seq || last_ship.is_none() || failing || unkept)
            && (due || stopping)
        {
            last_ship = Some(now);
            let keep = stopping
                || checkpointed
                    .1
                    .is_none_or(|at| now.duration_since(at) >= CHECKPOINT_EVERY);
            match shipment(client, replica, keep) {
                Ok(shipped) => {
                    failing = false;
                    wait = shipping.interval;
                    replicated = shipped.head;
                    if keep && replicated.seq > Seq(0) {
                        checkpointed = (replicated.seq, Some(now));
                    }
                    while seen.front().is_some_and(|(seq, _)| *seq <= replicated.seq) {
                        seen.pop_front();
                    }
                    let status = control.update(|status| {
                        status.replicated = replicated;
                        status.signed = Some(shipped.signed);
                        status.head = newest.max(replicated.seq);
                        status.behind = seen.front().map(|(_, at)| at.elapsed());
                        status.shipments += 1;
                        status.error = None;
                        status.clone()
                    });
                    if shipped.segments > 0 {
                        report(Ok((&shipped, &status)));
                    }
                }
                Err(e) => {
                    failing = true;
                    wait = (wait * 2).clamp(shipping.interval, MAX_BACKOFF);
                    control.update(|status| status.error = Some(e.to_string()));
                    report(Err((&e, wait)));
                    if stopping {
                        return;
                    }
                }
            }
        }
        if stopping {
            return;
        }
        control.wait(POLL);
    }
}

/// Heads seen while the replica lags, halved: each pair becomes the later seq with the earlier
/// time, so an event's age is never under-reported (the list stays small while the replica is
/// down for hours).
fn coarser(seen: &VecDeque<(Seq, Instant)>) -> VecDeque<(Seq, Instant)> {
    let seen: Vec<_> = seen.iter().copied().collect();
    seen.chunks(2)
        .map(|pair| (pair[pair.len() - 1].0, pair[0].1))
        .collect()
}

/// One shipment: up to the head a read sees (durable), from a clone of the open store, with no
/// writer lock held while the objects are written.
fn shipment(client: &MnemoClient, replica: &Replica, keep_checkpoint: bool) -> Result<Shipped> {
    let end = client.head()?;
    let store = client.local_store()?;
    ship_upto(&store, replica, end.seq, keep_checkpoint, &mut |_, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coarser_list_never_makes_an_event_younger() {
        let start = Instant::now();
        let seen: VecDeque<_> = (1..=7u64)
            .map(|i| (Seq(i * 10), start + Duration::from_millis(i)))
            .collect();
        let coarse = coarser(&seen);
        assert_eq!(coarse.len(), 4);
        // Whatever was replicated, the first entry past it is no later than the exact one.
        for replicated in 0..80 {
            let first = |list: &VecDeque<(Seq, Instant)>| {
                list.iter().find(|(s, _)| s.0 > replicated).map(|(_, t)| *t)
            };
            assert!(first(&coarse) <= first(&seen), "at {replicated}");
            assert_eq!(first(&coarse).is_some(), first(&seen).is_some());
        }
    }
}
