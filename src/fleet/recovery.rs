//! A fleet store read from outside the fleet, with no node running: `mnemo restore --from` and
//! `mnemo verify --from` take a store's log in the fleet's bucket (`FLEET/stores/NAME`, beside
//! the replicas they already read), for an auditor and for a disaster that took every node.
//!
//! The log is read whole with every invariant [`Wal::scan`] checks (no gap, epochs that never go
//! down, dense seqs, the chain), a store is built from it as a node builds its copy, and that
//! store is verified like any other. With `--key` (the fleet's verifier key, which `mnemo key
//! create --file` printed), every object is checked to be signed by it, but for a prefix
//! written before the fleet had a key, which the first signed object proves ([`super::signature`]);
//! a log none of whose objects the key signed is damage.

use std::path::Path;

use super::copy;
use super::signature::LogKeys;
use super::wal::Wal;
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::protocol::VerifyReport;
use crate::replica::restore::{Made, restore_with};
use crate::replica::{Replica, Restored};
use crate::store::log::{Head, Store};

impl Replica {
    /// `mnemo restore`: a new store at `db` restored from the replica at `url` (up to `at`, else
    /// its head), verified; with `key`, only a head that key signed is taken, and the new store
    /// records the key (which `mnemo serve --follow` then requires). A URL naming a fleet
    /// store's log (`FLEET/stores/NAME`) is read as that log (up to `at`, else its end).
    pub fn restore_new(
        url: &str,
        db: &Path,
        at: Option<Seq>,
        key: Option<&str>,
    ) -> Result<Restored> {
        if at == Some(Seq(0)) {
            return Err(Error::InvalidArgument(
                "--at names the last event to restore, counting from 1; give --at 1 or more, or leave it out to restore every event".into(),
            ));
        }
        match Wal::at(url)? {
            Some(wal) => {
                let wal = checked(wal, key)?;
                // A store made inside the bucket would be read as the fleet's objects.
                Replica::check_url_apart(wal.fleet_url(), db)?;
                restore_with(db, |building| built(&wal, building, at, Made::Store))
            }
            None => {
                not_a_fleet_root(url)?;
                Replica::restore_replica(url, db, at, key)
            }
        }
    }

    /// `mnemo verify --from`: the replica at `url` restored into a private store and verified
    /// there (against `expect`, if given): the report, labelled with the replica's URL, with
    /// what the replica holds beside its log in its notes, intact or not as it says. A replica
    /// that could not be restored (a record breaks the chain, or its head checkpoint does not
    /// hold, or with `key` is not signed by it) is [`Error::ReplicaDamaged`], which names what.
    /// A URL naming a fleet store's log (`FLEET/stores/NAME`) is read as that log, whose damage
    /// (a gap, an epoch going down, a broken chain, with `key` an object it did not sign) is
    /// [`Error::ReplicaDamaged`] too. `key` that is no verifier key is an
    /// [`Error::InvalidArgument`], a bad argument rather than a finding.
    pub fn verify_replica(
        url: &str,
        expect: Option<Head>,
        key: Option<&str>,
    ) -> Result<VerifyReport> {
        match Wal::at(url)? {
            Some(wal) => {
                let wal = checked(wal, key)?;
                let made = Made::to_verify(expect);
                Replica::verify_made(url, expect, |db| built(&wal, db, None, made))
            }
            None => {
                not_a_fleet_root(url)?;
                Replica::verify_only_replica(url, expect, key)
            }
        }
    }
}

/// Refuses a fleet's bucket given where one store's log is meant (read as a replica, its
/// objects would all be called strays).
fn not_a_fleet_root(url: &str) -> Result<()> {
    match Wal::is_fleet_root(url) {
        true => Err(Error::InvalidArgument(format!(
            "{url} is a fleet's bucket, not one store's log in it: give {}/stores/NAME (`mnemo fleet status --fleet URL` lists the stores)",
            url.trim_end_matches('/').trim_end_matches("/stores")
        ))),
        false => Ok(()),
    }
}

/// The log `wal`, checked against the verifier key `key` if one is given.
fn checked(wal: Wal, key: Option<&str>) -> Result<Wal> {
    let keys = key.map(LogKeys::checking).transpose()?;
    Ok(wal.signed(keys))
}

/// The store at `path` built from the fleet log `wal` (up to `at`) and verified whole: by the
/// pass over the records as they were appended, else (it found something) by a verify of the
/// store made, which names the first violation. For `made` [`Made::Report`] the pass's report
/// is kept ([`Restored::report`]) and the index not written.
fn built(wal: &Wal, path: &Path, at: Option<Seq>, made: Made) -> Result<Restored> {
    let (head, report) = copy::restore(wal, path, at, made)?;
    if report.is_none() {
        let store = Store::open_existing(path)?;
        let whole = crate::audit::verify::verify_store(&store)?;
        if let Some(v) = whole.violations.first() {
            return Err(Error::damaged(format!(
                "the store built from the fleet log of {} does not verify: event {} ({}): {}",
                wal.store(),
                v.seq,
                v.kind.name(),
                v.detail
            )));
        }
    }
    Ok(Restored {
        head,
        stale: Vec::new(),
        partial: Vec::new(),
        covered: Vec::new(),
        beyond: None,
        report: report.filter(|_| made == Made::Report),
    })
}
