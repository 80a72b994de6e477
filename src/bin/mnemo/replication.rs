//! The replica commands of the CLI (part of the binary): `mnemo replicate`, `mnemo restore`,
//! `mnemo key create` and `mnemo verify --from`, and the replicas beside `mnemo serve`, printing
//! what the library's `Replica`, `ShipRounds`, `Replication` and `Following` return.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use mnemo::{Replica, Round, Seq, ShipRounds, SigningKey};

use crate::print::{say, tell};
use crate::{CliResult, verify::print_verify};

/// Tells stderr of each segment a shipment wrote.
fn tell_sealed(first: Seq, last: Seq) {
    tell(format_args!(
        "mnemo replicate: shipped events {first} to {last}"
    ));
}

/// `mnemo replicate --to URL [--once]`: with `interval`, runs until stopped, shipping whenever
/// the store has changed (looked at every `interval` seconds).
pub fn replicate(db: &Path, url: &str, interval: Option<f64>) -> CliResult {
    let Some(interval) = interval else {
        write_out(&Replica::ship_store(db, url, &mut tell_sealed)?)?;
        return Ok(ExitCode::SUCCESS);
    };
    let mut rounds = ShipRounds::new(db, url, seconds(interval, "--interval")?)?;
    loop {
        match rounds.round(&mut tell_sealed)? {
            Round::Unchanged => {}
            Round::Shipped { shipped, first } => {
                if shipped.segments > 0 || first {
                    write_out(&shipped.summary(url))?;
                }
            }
            Round::Held { server } => {
                let who = match server {
                    true => format!(
                        "a mnemo serve holds {} (one that clients started stops once idle; one meant to stay up replicates as it goes if started with --replicate {url})",
                        db.display()
                    ),
                    false => format!("another process is writing {}", db.display()),
                };
                tell(format_args!(
                    "mnemo replicate: {who}; shipping once it lets go"
                ));
            }
            Round::Failed { error, wait } => tell(format_args!(
                "mnemo replicate: shipping to {url} failed ({error}); trying again in {wait:.0?}"
            )),
        }
        std::thread::sleep(rounds.wait());
    }
}

/// Writes `text` to stdout as it is (a shipment's summary ends with its newline).
fn write_out(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A number of seconds from 0.01 to a day.
fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| *d >= Duration::from_millis(10) && *d <= Duration::from_secs(86_400))
        .ok_or_else(|| {
            format!("{flag} takes a number of seconds from 0.01 to 86400, such as 1 or 0.5")
        })
}

/// Checks `mnemo serve`'s replica flags before the store is opened (or created): the
/// intervals, and that a replica to ship to opens and lies apart from the store at `db`.
pub fn check_serve(
    db: &Path,
    replicate: Option<(&str, f64)>,
    follow: Option<(&str, f64)>,
) -> Result<(), Box<dyn std::error::Error>> {
    for (flag, replica, create) in [
        ("--replicate-interval", replicate, true),
        ("--follow-interval", follow, false),
    ] {
        if let Some((url, interval)) = replica {
            seconds(interval, flag)?;
            Replica::check_url_apart(url, db)?;
            Replica::open(url, create)?;
        }
    }
    Ok(())
}

/// Starts shipping the store `client` holds to `url`, every `interval` seconds at most,
/// telling stderr about each shipment (`mnemo serve --replicate URL`).
pub fn start(
    client: &mnemo::MnemoClient,
    url: &str,
    interval: f64,
) -> Result<mnemo::Replication, Box<dyn std::error::Error>> {
    let interval = seconds(interval, "--replicate-interval")?;
    let replica = Replica::open(url, true)?;
    let url = url.to_string();
    type Told<'a> =
        Result<(&'a mnemo::Shipped, &'a mnemo::ReplicationStatus), (&'a mnemo::Error, Duration)>;
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
    Ok(mnemo::Replication::start(
        client, replica, interval, report,
    )?)
}

/// Ships what is left, then stops; an error if that last shipment failed.
pub fn stop(replication: mnemo::Replication) -> Result<(), String> {
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

/// Says on stderr what a restore found the replica still holding that it should not.
fn tell_stale(command: &str, restored: &mnemo::Restored) {
    for note in restored.notes() {
        tell(format_args!("mnemo {command}: WARNING: {note}"));
    }
}

/// Restores the store at `db` from the replica at `url` if it is new (missing or empty);
/// records the key it trusts (`--key`, which a store that records another refuses).
pub fn prepare_follower(db: &Path, url: &str, key: Option<&str>) -> mnemo::Result<()> {
    if let Some(restored) = Replica::prepare_follower(db, url, key)? {
        tell_stale("serve", &restored);
        tell(format_args!(
            "mnemo serve: restored {} from {url} (checkpoint {}) to follow it",
            db.display(),
            restored.head
        ));
    }
    Ok(())
}

/// Starts following `url` into the store `client` holds, every `interval` seconds.
pub fn follow(
    client: &mnemo::MnemoClient,
    url: &str,
    interval: f64,
) -> Result<mnemo::Following, Box<dyn std::error::Error>> {
    let interval = seconds(interval, "--follow-interval")?;
    // The key prepare_follower recorded, if any: every head taken must carry its signature.
    let replica = Replica::open_trusting(url, None, Some(client.path()))?;
    let url = url.to_string();
    let report = move |looked: Result<&mnemo::FollowerStatus, &mnemo::Error>| match looked {
        Ok(status) => tell(format_args!(
            "mnemo serve: took events up to {} from {url}",
            status.head
        )),
        Err(e) => tell(format_args!(
            "mnemo serve: following {url} failed ({e}); trying again"
        )),
    };
    Ok(mnemo::Following::start(client, replica, interval, report)?)
}

/// `mnemo restore --from URL --db NEW [--at SEQ] [--key VKEY]`: with a key, only a head it
/// signed is taken, and the new store records the key (for `serve --follow`).
pub fn restore(url: &str, db: &Path, at: Option<u64>, key: Option<&str>) -> CliResult {
    let restored = Replica::restore_new(url, db, at.map(Seq), key)?;
    tell_stale("restore", &restored);
    let head = restored.head;
    say(format_args!(
        "restored events 1 to {} from {url} into {}, verified\ncheckpoint: {head}",
        head.seq,
        db.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `mnemo key create [--name NAME]`: the verifier key on stdout.
pub fn key_create(db: &Path, name: Option<&str>) -> CliResult {
    let key = SigningKey::of_store(db)?;
    let vkey = key.create(name)?;
    let name = vkey.split('+').next().unwrap_or_default();
    tell(format_args!(
        "mnemo: made the signing key {name}; its secret is in {} (mode 0600): keep it there, and back it up apart from any replica. Hand out the verifier key below for `mnemo verify --from URL --key VKEY`.",
        key.file().display()
    ));
    crate::print::say_once(
        &vkey,
        "the verifier key",
        &format!(
            "the signing key stays in {}; if no replica was shipped with it yet, remove that file and run `mnemo key create` again",
            key.file().display()
        ),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `mnemo verify --from URL [--expect SEQ:HASH] [--json]`: the replica fetched into a
/// private store and verified there; a replica that breaks the chain or its checkpoint is a
/// violation (exit 1) that names the event.
pub fn verify(
    url: &str,
    as_json: bool,
    expect: Option<mnemo::Head>,
    key: Option<&str>,
) -> CliResult {
    let what = match Replica::verify_replica(url, expect, key) {
        Ok(report) => return print_verify(Path::new(url), as_json, &report),
        Err(mnemo::Error::ReplicaDamaged { what }) => what,
        Err(e) => return Err(e.into()),
    };
    match as_json {
        true => say(format_args!(
            "{}",
            serde_json::json!({"status": "violation", "replica": url, "violation": what})
        ))?,
        false => say(format_args!(
            "mnemo verify: VIOLATION\n  replica:    {url}\n  violation:  {what}"
        ))?,
    }
    Ok(ExitCode::from(1))
}
