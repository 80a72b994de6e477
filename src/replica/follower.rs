//! Following a replica (`mnemo serve --follow URL`): a local store kept a copy of the replica's
//! log, for a read-only server on another host.
//!
//! A thread reads the replica's `head` every interval. When it names an event past the
//! follower's head, the segments past the follower's head are fetched (outside any lock), their
//! records checked against the chain rules from the follower's head on, and the head checkpoint
//! against the chain; only then is the store closed for a moment (its reads wait), the records
//! appended and made durable, and the store opened again, which brings the index up to them.
//! The follower only takes what the replica's `head` names: segments written past it belong to
//! a shipment still under way.
//!
//! Before it appends, it proves the replica continues the follower: the replica's event at the
//! follower's head must have the same chain hash. A replica that no longer does (rolled back,
//! or another store's) stops the following with an error that says so; the store is left as
//! it was. A redaction among the new events erased content the follower already holds, so the
//! follower is rebuilt whole from the replica (a restore beside it, exchanged for it).

use std::path::Path;
use std::time::Duration;

use super::worker::{Control, Worker};
use super::{Reader, Replica};
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{Body, Event, Frame, Seq};
use crate::model::policy::AdminCommand;
use crate::store::log::{Durability, Head, Store};

/// Where a follower stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The replica's URL.
    pub url: String,
    /// The follower's head.
    pub head: Head,
    /// The head the replica's checkpoint named when last read.
    pub replica: Option<Head>,
    /// The times the follower took new events.
    pub updates: u64,
    /// Why the last look at the replica failed, if it did.
    pub error: Option<String>,
}

impl Status {
    /// The status as JSON (what `GET /v1/replication` answers on a follower).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "following": self.url,
            "head": {"seq": self.head.seq.0, "hash": self.head.hash.to_hex()},
            "replica_head": self.replica.map(|h| h.seq.0),
            "lag_events": self.replica.map(|h| h.seq.0.saturating_sub(self.head.seq.0)),
            "updates": self.updates,
            "error": self.error,
        })
    }
}

/// What one look at the replica found: the records to append past the follower's head, or that
/// a redaction makes the follower rebuild.
enum Found {
    /// Nothing new.
    Nothing(Option<Head>),
    /// Checked frames to append, and the head they reach.
    Frames(Vec<Frame>, Head),
    /// A redaction among the new events: rebuild from the replica.
    Rebuild(Head),
}

/// A running follower. Dropping it stops the thread.
pub struct Following(Worker<Status>);

impl Following {
    /// Starts following `replica` into the store `client` holds in this process, looking every
    /// `interval`; `report` hears of each update and failure.
    pub fn start(
        client: &MnemoClient,
        replica: Replica,
        interval: Duration,
        report: impl FnMut(std::result::Result<&Status, &Error>) + Send + 'static,
    ) -> Result<Following> {
        // The first look is made here, so a store that is not a copy of the replica (or a
        // replica that cannot be read) is refused before anything is served from it.
        let (head, theirs, updated) = update(client, &replica)?;
        let status = Status {
            url: replica.url().to_string(),
            head,
            replica: theirs,
            updates: u64::from(updated),
            error: None,
        };
        let client = client.clone();
        Worker::spawn("mnemo-follow", status, move |control| {
            run(&client, &replica, interval, control, report);
        })
        .map(Following)
    }

    /// A handle that reads the status after the follower is moved.
    pub fn watcher(&self) -> impl Fn() -> Status + Send + Sync + 'static {
        self.0.watcher()
    }
}

fn run(
    client: &MnemoClient,
    replica: &Replica,
    interval: Duration,
    control: &Control<Status>,
    mut report: impl FnMut(std::result::Result<&Status, &Error>),
) {
    // After a failure the next look waits twice as long, up to the shipper's longest wait;
    // the same failure again is not reported again.
    let mut wait = interval;
    let mut told: Option<String> = None;
    loop {
        if control.wait(wait) {
            return;
        }
        let looked = update(client, replica);
        let status = control.update(|status| {
            match &looked {
                Ok((head, theirs, updated)) => {
                    status.head = *head;
                    status.replica = *theirs;
                    status.updates += u64::from(*updated);
                    status.error = None;
                }
                Err(e) => status.error = Some(e.to_string()),
            }
            status.clone()
        });
        match &looked {
            Ok((_, _, updated)) => {
                wait = interval;
                told = None;
                if *updated {
                    report(Ok(&status));
                }
            }
            Err(e) => {
                wait = (wait * 2).clamp(interval, super::shipper::MAX_BACKOFF);
                if told.as_deref() != Some(&e.to_string()) {
                    told = Some(e.to_string());
                    report(Err(e));
                }
            }
        }
    }
}

/// One look: fetch and check what is new, then take it into the store. Returns the follower's
/// head, the replica's and whether anything was taken.
fn update(client: &MnemoClient, replica: &Replica) -> Result<(Head, Option<Head>, bool)> {
    let ours = client.head()?;
    match look(replica, ours)? {
        Found::Nothing(theirs) => Ok((ours, theirs, false)),
        Found::Frames(frames, head) => {
            client.closed_for("the follower is taking new events from its replica", |path| {
                let store = Store::open(path)?;
                if store.head()? != ours {
                    return Err(Error::InvalidArgument(format!(
                        "the follower at {} took events from elsewhere (a write that bypassed its server?); it follows only its replica: rebuild it with `mnemo restore`",
                        path.display()
                    )));
                }
                store.append(&frames)?;
                store.sync(Durability::Fsync)?;
                store.record_head(head)
            })?;
            Ok((head, Some(head), true))
        }
        Found::Rebuild(head) => {
            client.closed_for(
                "the follower is being rebuilt from its replica after a redaction",
                |path| rebuild(replica, path),
            )?;
            Ok((client.head()?, Some(head), true))
        }
    }
}

/// What the replica holds past `ours`, fetched and checked, up to its head checkpoint.
fn look(replica: &Replica, ours: Head) -> Result<Found> {
    let Some((_, theirs)) = replica.head()? else {
        return Ok(Found::Nothing(None));
    };
    if theirs.seq < ours.seq {
        return Err(Error::InvalidArgument(format!(
            "the replica at {} names event {} as its head, behind this follower's {}: it was rolled back or is another store's; rebuild the follower with `mnemo restore`",
            replica.url, theirs.seq, ours.seq
        )));
    }
    if theirs.seq == ours.seq {
        if theirs.hash != ours.hash {
            return Err(diverged(replica, ours));
        }
        return Ok(Found::Nothing(Some(theirs)));
    }
    let mut chain = match ours.seq {
        Seq(0) => Chain::new(),
        _ => Chain::after(ours.seq, ours.hash),
    };
    let mut frames = Vec::new();
    let mut head = ours;
    // From the follower's own last event (to prove the replica still holds it) to the head.
    let from = Seq(ours.seq.0.max(1));
    let mut reader = Reader::new(replica, replica.segments()?, from, theirs.seq);
    while let Some((name, records)) = reader.next_segment()? {
        for (seq, record) in records {
            if seq == ours.seq {
                // The replica's copy of the follower's last event: the same chain hash.
                let same = Frame::decode(&record).is_ok_and(|f| f.hash == ours.hash);
                if !same {
                    return Err(diverged(replica, ours));
                }
                continue;
            }
            if seq < ours.seq || seq > theirs.seq {
                continue;
            }
            let frame = chain.check(seq, &record).map_err(|b| {
                Error::damaged(format!(
                    "the replica at {} breaks the chain at event {} ({name}): {}",
                    replica.url, b.seq, b.detail
                ))
            })?;
            if let Body::Admin(AdminCommand::Redact { .. }) = Event::decode(&record)?.body {
                return Ok(Found::Rebuild(theirs));
            }
            head = Head {
                seq,
                hash: frame.hash,
            };
            frames.push(frame);
        }
    }
    if head != theirs {
        return Err(Error::damaged(format!(
            "the replica's head checkpoint names {theirs}, but its segments give {head}",
        )));
    }
    Ok(Found::Frames(frames, head))
}

fn diverged(replica: &Replica, ours: Head) -> Error {
    Error::InvalidArgument(format!(
        "the replica at {} does not hold this follower's event {} ({}): it is another store's, or was rewritten; rebuild the follower with `mnemo restore`",
        replica.url, ours.seq, ours.hash
    ))
}

/// Rebuilds the closed store at `path` from the replica: a restore beside it, exchanged for it
/// (the server file carried over), the old one removed.
fn rebuild(replica: &Replica, path: &Path) -> Result<()> {
    // Named as a redaction's copy, so what a kill leaves is removed at the next open.
    let prefix = crate::store::disk::redaction_prefix(path)?;
    let tag =
        crate::client::token::random_hex(8).map_err(|e| Error::io("the OS random source", e))?;
    let fresh = crate::store::disk::parent_of(path).join(format!("{prefix}{tag}"));
    // Built in place under that name (a restore's own directory beside it would not be).
    let swapped = super::fetch(replica, &fresh, None, super::restore::Made::Store)
        .and_then(|_| crate::store::disk::carry_own_files(path, &fresh))
        .and_then(|()| crate::client::redact::exchange(&fresh, path));
    // After the exchange `fresh` holds the old store, erased content and all; before it, the
    // restore that could not be put in place.
    let _ = std::fs::remove_dir_all(&fresh);
    swapped
}
