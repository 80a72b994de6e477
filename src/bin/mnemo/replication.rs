//! The replica commands of the CLI (part of the binary): `mnemo replicate`, `mnemo restore`,
//! `mnemo key create` and `mnemo verify --from`, printing what the library's `Replica` and
//! `SigningKey` return. (The replicas beside `mnemo serve` are the library's `serve`'s.)

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use mnemo::{Replica, Seq, SigningKey};

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
    let interval = seconds(interval, "--interval")?;
    let failed = Replica::ship_as_it_changes(db, url, interval, &mut std::io::stdout().lock())?;
    Err(failed.into())
}

/// Writes `text` to stdout as it is (a shipment's summary ends with its newline).
fn write_out(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A number of seconds from 0.01 to a day.
pub(crate) fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| *d >= Duration::from_millis(10) && *d <= Duration::from_secs(86_400))
        .ok_or_else(|| {
            format!("{flag} takes a number of seconds from 0.01 to 86400, such as 1 or 0.5")
        })
}

/// Says on stderr what a restore found the replica still holding that it should not.
fn tell_stale(command: &str, restored: &mnemo::Restored) {
    for note in restored.notes() {
        tell(format_args!("mnemo {command}: WARNING: {note}"));
    }
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
pub fn key_create(db: &Path, name: Option<&str>, file: Option<&Path>) -> CliResult {
    if let Some(file) = file {
        return fleet_key_create(file, name);
    }
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

/// `mnemo key create --file FILE [--name NAME]`: a fleet's key in FILE, its verifier key on
/// stdout.
fn fleet_key_create(file: &Path, name: Option<&str>) -> CliResult {
    let vkey = mnemo::FleetKey::create(file, name.unwrap_or("mnemo-fleet"))?;
    let name = vkey.split('+').next().unwrap_or_default();
    tell(format_args!(
        "mnemo: made the fleet signing key {name} in {} (mode 0600): give that file to every node (`mnemo serve --fleet URL --signing-key FILE`) and back it up apart from the bucket. Hand out the verifier key below for `mnemo verify --from FLEET/stores/NAME --key VKEY`.",
        file.display()
    ));
    crate::print::say_once(
        &vkey,
        "the verifier key",
        &format!(
            "the key is in {}; if no node signed with it yet, remove that file and run `mnemo key create --file` again",
            file.display()
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
