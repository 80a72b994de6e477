//! `mnemo fleet status|drain|adopt`: a fleet's nodes and stores, read from its bucket; a node's
//! stores handed to the others; logs written before the fleet had a key adopted by it.

use std::process::ExitCode;

use crate::CliResult;
use crate::print::say;

/// `--lease-ttl SECS` (of `serve --fleet` and `fleet status`) as a duration, from a second to a day.
pub(crate) fn lease_ttl_of(secs: f64) -> Result<std::time::Duration, &'static str> {
    std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| {
            *d >= std::time::Duration::from_secs(1) && *d <= std::time::Duration::from_secs(86_400)
        })
        .ok_or("--lease-ttl takes a number of seconds from 1 to 86400 (a day), such as 10")
}

/// Prints the fleet whose bucket is at `url`: a table, or one JSON object with `json`.
pub(crate) fn status(url: &str, lease_ttl: f64, json: bool) -> CliResult {
    let status = mnemo::Fleet::at(url).status(lease_ttl_of(lease_ttl)?)?;
    if json {
        say(serde_json::to_string(&status)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    say(format_args!("nodes ({}):", status.nodes.len()))?;
    for node in &status.nodes {
        say(format_args!(
            "  {}  {}  {}  last beat {:.1} s before the latest  {} store(s)",
            node.id,
            node.url,
            match (node.alive, node.draining) {
                (true, true) => "alive, being drained",
                (true, false) => "alive",
                (false, _) => "dead",
            },
            node.beat_age_ms as f64 / 1000.0,
            node.stores
        ))?;
    }
    say(format_args!("stores ({}):", status.stores.len()))?;
    for store in &status.stores {
        say(format_args!(
            "  {}  held by {}{}  epoch {}  {} log object(s)",
            store.name,
            store.node,
            if store.alive {
                ""
            } else {
                " (dead: taken over at its next request)"
            },
            store.epoch,
            store.log_objects
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Drains the node `node` of the fleet at `url`, printing each store handed over.
pub(crate) fn drain(url: &str, node: &str) -> CliResult {
    let handed = mnemo::Fleet::at(url).drain(node)?;
    for (store, to) in &handed {
        say(format_args!("{store} -> {to}"))?;
    }
    crate::print::tell(format_args!(
        "mnemo fleet drain: {node} handed over {} store(s) and takes no more; stop it when you like",
        handed.len()
    ));
    Ok(ExitCode::SUCCESS)
}

/// Adopts with the key in `key_file` the logs of `stores` (every store when none is named) of
/// the fleet at `url`, printing each store's outcome; exit 1 if any could not be adopted.
pub(crate) fn adopt(url: &str, key_file: &std::path::Path, stores: &[String]) -> CliResult {
    let key = mnemo::FleetKey::load(key_file)?;
    let adopted = mnemo::Fleet::at(url).adopt(&key, stores)?;
    let mut failed = 0;
    for (store, outcome) in &adopted {
        match outcome {
            Ok(seq) => say(format_args!(
                "{store}: adopted as it ends, at event {seq}: nodes with --signing-key take it"
            ))?,
            Err(why) => {
                failed += 1;
                say(format_args!("{store}: not adopted: {why}"))?;
            }
        }
    }
    Ok(match failed {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}
