//! The replicas beside a server: the one a server ships its store to as it is written
//! (`mnemo serve --replicate URL`, and each store of a `--data` server to `URL/NAME`), and the
//! one a read-only follower takes its events from (`--follow URL`). Each runs on a thread of its
//! own, tells stderr what it did, and hands its status to `GET /v1/replication`.

use std::path::Path;

use super::{ReplicaOptions, ReplicationView, ServeOptions};
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::replica::Replica;
use crate::replica::follower::{Following, Status as FollowerStatus};
use crate::replica::key::SigningKey;
use crate::replica::shipper::{Replication, Told};
pub(crate) use crate::replica::tell;

impl ServeOptions {
    /// Readies the replicas of a server of `store` (a store, or a data directory whose stores
    /// are each shipped to a replica of their own) before the store is opened or made: a
    /// replica to ship to ([`replicate`](Self::replicate)) must open, made if missing, and lie
    /// apart from `store`; a store that follows a replica ([`follow`](Self::follow)) is restored
    /// from it when new (missing or empty), and records the verifier key `key` it trusts (which
    /// a store that records another refuses), else keeps trusting the one it records.
    pub fn prepare(&self, store: &Path, key: Option<&str>) -> Result<()> {
        for (replica, create) in [(&self.replicate, true), (&self.follow, false)] {
            if let Some(replica) = replica {
                Replica::check_url_apart(&replica.url, store)?;
                Replica::open(&replica.url, create)?;
            }
        }
        let Some(follow) = &self.follow else {
            return Ok(());
        };
        // A new store (missing or empty) is restored from the replica, and records the key it
        // trusts.
        let empty = std::fs::read_dir(store).map_or(true, |mut entries| entries.next().is_none());
        let replica = Replica::open_trusting(&follow.url, key, (!empty).then_some(store))?;
        let restored = match empty {
            true => Some(replica.restore(store, None)?),
            false => None,
        };
        if let Some(vkey) = replica.trusted_key() {
            SigningKey::of(store).trust(vkey)?;
        }
        if let Some(restored) = restored {
            for note in restored.notes() {
                tell(format_args!("mnemo serve: WARNING: {note}"));
            }
            tell(format_args!(
                "mnemo serve: restored {} from {} (checkpoint {}) to follow it",
                store.display(),
                follow.url,
                restored.head
            ));
        }
        Ok(())
    }
}

/// A replica running beside a server's store: shipped to, or followed.
pub(crate) enum Beside {
    /// The store shipped to a replica as it is written.
    Shipping(Replication),
    /// The store following a replica.
    Following(Following),
}

impl Beside {
    /// What `GET /v1/replication` answers of it.
    pub(crate) fn view(&self) -> ReplicationView {
        match self {
            Beside::Shipping(replication) => replication.into(),
            Beside::Following(following) => following.into(),
        }
    }

    /// Starts what `options` asks beside the store `client` holds in this process: a
    /// shipment to `replicate` (the store's own replica), or else following `follow`.
    pub(crate) fn start(client: &MnemoClient, options: &ServeOptions) -> Result<Option<Beside>> {
        if let Some(replica) = &options.replicate {
            return ship(client, replica).map(|running| Some(Beside::Shipping(running)));
        }
        let Some(replica) = &options.follow else {
            return Ok(None);
        };
        // The key the store recorded, if any: every head taken must carry its signature.
        let opened = Replica::open_trusting(&replica.url, None, Some(client.path()))?;
        let url = replica.url.clone();
        let report = move |looked: std::result::Result<&FollowerStatus, &Error>| match looked {
            Ok(status) => tell(format_args!(
                "mnemo serve: took events up to {} from {url}",
                status.head
            )),
            Err(e) => tell(format_args!(
                "mnemo serve: following {url} failed ({e}); trying again"
            )),
        };
        Following::start(client, opened, replica.interval, report)
            .map(|running| Some(Beside::Following(running)))
    }

    /// Stops it; a shipment ships what is left first, and says where the replica is, or why
    /// that last shipment failed as the error.
    pub(crate) fn stop(self) -> std::result::Result<(), String> {
        match self {
            Beside::Shipping(replication) => stop(replication),
            Beside::Following(_) => Ok(()),
        }
    }
}

/// Starts shipping the store `client` holds to `replica`, telling stderr about each shipment.
pub(crate) fn ship(client: &MnemoClient, replica: &ReplicaOptions) -> Result<Replication> {
    let opened = Replica::open(&replica.url, true)?;
    let url = replica.url.clone();
    let report = move |report: Told<'_>| match report {
        Ok((shipped, status)) => tell(format_args!(
            "mnemo serve: replicated events {} to {} to {url} ({} events behind)",
            shipped.from.0 + 1,
            shipped.head.seq,
            status.lag()
        )),
        Err((e, wait)) => tell(format_args!(
            "mnemo serve: shipping to {url} failed ({e}); trying again in {wait:.0?}"
        )),
    };
    Replication::start(client, opened, replica.interval, report)
}

/// Ships what is left, then stops, telling stderr where the replica is; an error if that last
/// shipment failed, saying how to ship the rest.
pub(crate) fn stop(replication: Replication) -> std::result::Result<(), String> {
    let status = replication.stop();
    match status.error {
        None => {
            tell(format_args!(
                "mnemo serve: the replica at {} is at {}",
                status.url, status.replicated
            ));
            Ok(())
        }
        Some(why) => Err(format!(
            "the last shipment to {} failed ({why}): the replica is at {}, behind the store's event {}; run `mnemo replicate --db DIR --to {} --once` to ship the rest",
            status.url, status.replicated, status.head, status.url
        )),
    }
}

/// The replica of the store `name` of a data directory whose stores are shipped under `base`.
pub(crate) fn of_store(base: &ReplicaOptions, name: &str) -> ReplicaOptions {
    ReplicaOptions {
        url: format!("{}/{name}", base.url.trim_end_matches('/')),
        interval: base.interval,
    }
}
