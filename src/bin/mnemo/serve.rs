//! `mnemo serve`: the HTTP server of one store (`--db`) or of a directory of stores (`--data`).

use std::{path::Path, process::ExitCode};

use crate::CliResult;
use crate::args::{ServeFlags, Session};
use crate::session::open_session;

/// `mnemo serve`: the server of the store at --db, or with --data of every store under DIR.
pub(crate) fn run_serve(session: Session, agent: String, listen: ServeFlags) -> CliResult {
    let idle_exit = listen
        .idle_exit
        .map(std::time::Duration::try_from_secs_f64)
        .transpose()
        .map_err(|_| "--idle-exit takes a number of seconds, such as 600 or 0.5")?;
    let header_timeout = std::time::Duration::try_from_secs_f64(listen.header_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--header-timeout takes a number of seconds above 0, such as 30 or 0.5")?;
    if listen.max_connections == 0 {
        return Err("--max-connections must be at least 1".into());
    }
    let per_principal = listen
        .max_requests_per_principal
        .unwrap_or((listen.max_connections / 4).max(1));
    if per_principal == 0 {
        return Err("--max-requests-per-principal must be at least 1".into());
    }
    let body_grace = std::time::Duration::try_from_secs_f64(listen.body_grace)
        .map_err(|_| "--body-grace takes a number of seconds, such as 10 or 0.5")?;
    if listen.max_body_memory == 0 {
        return Err("--max-body-memory must be at least 1 byte (such as 268435456)".into());
    }
    let mut options = mnemo::ServeOptions {
        connections: mnemo::Connections {
            header_timeout,
            max: listen.max_connections,
            per_principal,
            body_grace,
            min_body_rate: listen.min_body_rate,
            max_body_memory: listen.max_body_memory,
        },
        listen: listen.listen,
        allow_remote: listen.allow_remote,
        allow_hosts: listen.allow_host.clone(),
        idle_exit,
        replicate: None,
        follow: None,
    };
    options.check()?;
    if listen.fleet.is_none() && session.durability == Some(mnemo::Durability::Replicated) {
        return Err("--durability replicated is a fleet node's: add --fleet URL (and --data DIR), or use fsync".into());
    }
    if let Some(dir) = &listen.data {
        return run_data_server(dir, session, agent, options, &listen);
    }
    let db = &session.db.db;
    if let Some(why) = crate::connect::unservable(db) {
        return Err(why.into());
    }
    options.replicate = replica(
        &listen.replicate,
        listen.replicate_interval,
        "--replicate-interval",
    )?;
    options.follow = replica(&listen.follow, listen.follow_interval, "--follow-interval")?;
    // A follower is restored from its replica first if it is new.
    options.prepare(db, listen.key.as_deref())?;
    let server = open_session(session, agent)?;
    let stopped = mnemo::serve(server, options).map_err(|e| match e {
        mnemo::ServeError::Replica(e) => Box::new(e) as Box<dyn std::error::Error>,
        e => e.into(),
    })?;
    if stopped.store_failures > 0 {
        return Err(format!(
            "the store failed, or found stored bytes damaged, on {} call(s) while serving (each got an error result that says which); run `mnemo verify`, which names any damage (restore the store from a replica or backup), and check the disk, then restart the server, which recovers to the last event that reached the log",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `mnemo serve --data DIR`: every store under DIR, each opened with the session's settings.
pub(crate) fn run_data_server(
    dir: &Path,
    session: Session,
    agent: String,
    mut options: mnemo::ServeOptions,
    flags: &ServeFlags,
) -> CliResult {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(format!(
            "--data {} is not a directory: give it the data directory (made if missing)",
            dir.display()
        )
        .into());
    }
    if let Some(parent) = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.is_dir())
    {
        return Err(format!(
            "--data {}: the directory {} that would hold it does not exist; create it first (`mkdir -p {}`)",
            dir.display(),
            parent.display(),
            crate::demo::shell_word(&parent.to_string_lossy())
        )
        .into());
    }
    options.replicate = replica(
        &flags.replicate,
        flags.replicate_interval,
        "--replicate-interval",
    )?;
    options.prepare(dir, None)?;
    let fleet = match &flags.fleet {
        Some(url) => {
            let mut node = mnemo::FleetOptions::node(
                url,
                flags.listen,
                flags.advertise.as_deref(),
                flags.node_id.as_deref(),
                crate::fleet::lease_ttl_of(flags.lease_ttl)?,
            )?;
            node.signing = flags
                .signing_key
                .as_deref()
                .map(mnemo::FleetKey::load)
                .transpose()?;
            Some(node)
        }
        None => None,
    };
    let durability = match (&fleet, session.durability) {
        (Some(_), None) => mnemo::Durability::Replicated,
        (Some(_), Some(mnemo::Durability::Buffered)) => {
            return Err("--durability buffered is not one a fleet node writes with (it acknowledges before anything is durable, so nothing would be shipped while calls keep coming): use replicated (the fleet's default: a write is acknowledged once it is in the bucket), fsync or flush (acknowledged once on the node's disk, shipped to the bucket behind the answers)".into());
        }
        (_, durability) => durability.unwrap_or_default(),
    };
    let store_idle_close = std::time::Duration::try_from_secs_f64(flags.store_idle_close)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--store-idle-close takes a number of seconds above 0, such as 300 or 0.5")?;
    if flags.max_open_stores == 0 {
        return Err("--max-open-stores must be at least 1".into());
    }
    let (limits, root, profile) = (session.limits(), session.root, session.profile);
    let open: mnemo::OpenStore = std::sync::Arc::new(move |builder: mnemo::ClientBuilder| {
        let client = builder.agent_id(agent.clone()).durability(durability);
        let tool = client.open().and_then(|client| {
            let tool = mnemo::MnemoMemoryToolServer::builder(client).root(root.as_str());
            tool.profile(profile).limits(limits).build()
        });
        tool.map(Into::into).map_err(|e| e.to_string())
    });
    let stopped = mnemo::serve_data(
        dir,
        open,
        options,
        mnemo::DataOptions {
            max_open_stores: flags.max_open_stores,
            store_idle_close,
            max_memories: flags.max_memories,
            max_versions: flags.max_versions,
            fleet,
        },
    )?;
    if stopped.store_failures > 0 {
        return Err(format!(
            "the stores failed, or found stored bytes damaged, on {} call(s) while serving (each got an error result that says which); run `mnemo verify` on each store, which names any damage (restore that store from a replica or backup), and check the disk, then restart the server",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The replica a `--replicate` or `--follow` flag names, with its interval `flag` (a number of
/// seconds from 0.01 to a day).
fn replica(
    url: &Option<String>,
    interval: f64,
    flag: &str,
) -> Result<Option<mnemo::ReplicaOptions>, String> {
    let Some(url) = url else {
        return Ok(None);
    };
    Ok(Some(mnemo::ReplicaOptions {
        url: url.clone(),
        interval: crate::replication::seconds(interval, flag)?,
    }))
}
