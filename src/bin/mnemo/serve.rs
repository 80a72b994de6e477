//! `mnemo serve`: the HTTP server of one store (`--db`) or of a directory of stores (`--data`).

use std::path::PathBuf;
use std::{path::Path, process::ExitCode};

use mnemo::{MnemoMemoryToolServer, tool::Limits};

use crate::CliResult;
use crate::args::Session;
use crate::session::open_session;

/// Where and how long `mnemo serve` listens.
pub(crate) struct Listen {
    pub(crate) listen: std::net::SocketAddr,
    pub(crate) allow_remote: bool,
    pub(crate) allow_host: Vec<String>,
    pub(crate) idle_exit: Option<f64>,
    /// The replica to ship to, and the least time between shipments in seconds.
    pub(crate) replicate: Option<(String, f64)>,
    /// The replica to follow, and how often to look at it in seconds.
    pub(crate) follow: Option<(String, f64)>,
    /// The verifier key the followed replica's heads must be signed by.
    pub(crate) follow_key: Option<String>,
    /// `--data`: the data directory, the most stores open at once, the idle close in seconds,
    /// the most memories the memory-stores API creates in a store, and the most versions.
    pub(crate) data: Option<(PathBuf, usize, f64, usize, u64)>,
    /// The deadline for a request's headers, in seconds.
    pub(crate) header_timeout: f64,
    /// The cap on open connections.
    pub(crate) max_connections: usize,
    /// The share of one principal's requests in flight, if not the default.
    pub(crate) max_requests_per_principal: Option<usize>,
    /// The grace of a request body, in seconds.
    pub(crate) body_grace: f64,
    /// The minimum rate of a request body after its grace, in bytes a second.
    pub(crate) min_body_rate: u64,
    /// The budget of memory for request bodies, in bytes.
    pub(crate) max_body_memory: u64,
    /// `--fleet URL` and the node's flags.
    pub(crate) fleet: Option<Fleet>,
}

/// `--fleet URL`, `--node-id`, `--advertise` and `--lease-ttl`.
pub(crate) struct Fleet {
    pub(crate) url: String,
    pub(crate) node_id: Option<String>,
    pub(crate) advertise: Option<String>,
    pub(crate) lease_ttl: f64,
}

impl Fleet {
    /// The fleet's options, the defaults filled in from the address the server listens on.
    fn options(self, listen: std::net::SocketAddr) -> Result<mnemo::FleetOptions, String> {
        let lease_ttl = std::time::Duration::try_from_secs_f64(self.lease_ttl)
            .ok()
            .filter(|d| *d >= std::time::Duration::from_secs(1))
            .ok_or("--lease-ttl takes a number of seconds of at least 1, such as 10")?;
        let advertise = match self.advertise {
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => url,
            Some(url) => {
                return Err(format!(
                    "--advertise {url:?} is not a URL: give the one the other nodes reach this one at, such as http://10.0.0.5:8080"
                ));
            }
            None if listen.port() == 0 => {
                return Err("--fleet needs --advertise URL, or a --listen address with a port (such as 127.0.0.1:8080): the other nodes forward requests to it".into());
            }
            None => format!("http://{listen}"),
        };
        let node_id = self.node_id.unwrap_or_else(|| {
            advertise
                .split("://")
                .nth(1)
                .unwrap_or(&advertise)
                .trim_end_matches('/')
                .replace([':', '/', '[', ']'], "-")
        });
        Ok(mnemo::FleetOptions {
            url: self.url,
            node_id,
            advertise,
            lease_ttl,
        })
    }
}

pub(crate) fn run_serve(session: Session, agent: String, listen: Listen) -> CliResult {
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
        allow_hosts: listen.allow_host,
        idle_exit,
        replication: None,
        follow: None,
    };
    options.check()?;
    let fleet = match listen.fleet {
        Some(fleet) => Some(fleet.options(listen.listen)?),
        None if session.durability == mnemo::Durability::Replicated => {
            return Err("--durability replicated is a fleet node's: add --fleet URL (and --data DIR), or use fsync".into());
        }
        None => None,
    };
    if let Some((dir, max_open_stores, idle_close, max_memories, max_versions)) = listen.data {
        let data = DataServer {
            max_open_stores,
            idle_close,
            max_memories,
            max_versions,
            replicate: listen.replicate,
            fleet,
        };
        return run_data_server(&dir, session, agent, options, data);
    }
    let db = &session.db.db;
    if let Some(why) = crate::connect::unservable(db) {
        return Err(why.into());
    }
    crate::replication::check_serve(
        db,
        listen.replicate.as_ref().map(|(u, i)| (u.as_str(), *i)),
        listen.follow.as_ref().map(|(u, i)| (u.as_str(), *i)),
    )?;
    // A follower is restored from its replica first if it is new.
    if let Some((url, _)) = &listen.follow {
        crate::replication::prepare_follower(&session.db.db, url, listen.follow_key.as_deref())?;
    }
    let server = open_session(session, agent)?;
    // The replication runs beside the server, on the store the server holds, and ships what
    // is left once the server has stopped.
    let replication = match &listen.replicate {
        Some((url, interval)) => {
            let started = crate::replication::start(server.client(), url, *interval)?;
            options.replication = Some(started.view());
            Some(started)
        }
        None => None,
    };
    let following = match &listen.follow {
        Some((url, interval)) => {
            let started = crate::replication::follow(server.client(), url, *interval)?;
            options.replication = Some(started.view());
            options.follow = Some(url.clone());
            Some(started)
        }
        None => None,
    };
    let stopped = mnemo::serve(server, options)?;
    if let Some(following) = following {
        following.stop();
    }
    if let Some(replication) = replication {
        replication.stop()?;
    }
    if stopped.store_failures > 0 {
        return Err(format!(
            "the store failed on {} call(s) while serving (each got an error result); check the disk, then restart the server, which recovers to the last event that reached the log",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `mnemo serve --data DIR`: every store under DIR, each opened with the session's settings.
/// What `--data` adds to a server's options.
pub(crate) struct DataServer {
    /// At most this many stores open at once.
    pub(crate) max_open_stores: usize,
    /// Close a store after this many seconds without a request.
    pub(crate) idle_close: f64,
    /// The memory-stores API creates at most this many memories in a store.
    pub(crate) max_memories: usize,
    /// The memory-stores API refuses creates and updates in a store holding this many versions.
    pub(crate) max_versions: u64,
    /// `--replicate URL` and its interval: each store shipped to `URL/NAME` while it is open.
    pub(crate) replicate: Option<(String, f64)>,
    /// `--fleet URL`: the fleet this server is a node of.
    pub(crate) fleet: Option<mnemo::FleetOptions>,
}

pub(crate) fn run_data_server(
    dir: &Path,
    session: Session,
    agent: String,
    options: mnemo::ServeOptions,
    data: DataServer,
) -> CliResult {
    let DataServer {
        max_open_stores,
        idle_close,
        max_memories,
        max_versions,
        replicate,
        fleet,
    } = data;
    let durability = match (&fleet, session.durability) {
        (Some(_), mnemo::Durability::Fsync | mnemo::Durability::Replicated) => {
            mnemo::Durability::Replicated
        }
        (Some(_), other) => {
            return Err(format!(
                "--durability {} is not one a fleet node writes with: a fleet's node acknowledges a write once it is in the bucket (--durability replicated, its default)",
                other.name()
            )
            .into());
        }
        (None, durability) => durability,
    };
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
    crate::replication::check_serve(dir, replicate.as_ref().map(|(u, i)| (u.as_str(), *i)), None)?;
    let store_idle_close = std::time::Duration::try_from_secs_f64(idle_close)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--store-idle-close takes a number of seconds above 0, such as 300 or 0.5")?;
    if max_open_stores == 0 {
        return Err("--max-open-stores must be at least 1".into());
    }
    let limits = Limits {
        max_file_bytes: session.max_file_bytes,
        view_max_chars: session.view_max_chars,
        max_request_bytes: session.max_request_bytes,
    };
    let (root, profile) = (session.root, session.profile);
    let open: mnemo::OpenStore = std::sync::Arc::new(move |builder: mnemo::ClientBuilder| {
        let path = builder.path().to_path_buf();
        let client = builder
            .agent_id(agent.clone())
            .durability(durability)
            .open()
            .map_err(|e| e.to_string())?;
        let tool = MnemoMemoryToolServer::builder(client)
            .root(root.clone())
            .profile(profile)
            .limits(limits)
            .build()
            .map_err(|e| e.to_string())?;
        let Some((base, interval)) = &replicate else {
            return Ok(tool.into());
        };
        // Each store to a replica of its own under the URL, shipped while it is open and once
        // more as it closes.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let url = format!(
            "{}/{}",
            base.trim_end_matches('/'),
            name.unwrap_or_default()
        );
        let running =
            crate::replication::start(tool.client(), &url, *interval).map_err(|e| e.to_string())?;
        Ok(mnemo::OpenedStore {
            replication: Some(running.view()),
            on_close: Some(Box::new(move || {
                if let Err(why) = running.stop() {
                    crate::print::tell(format_args!("mnemo serve: {why}"));
                }
            })),
            tool,
        })
    });
    let stopped = mnemo::serve_data(
        dir,
        open,
        options,
        mnemo::DataOptions {
            max_open_stores,
            store_idle_close,
            max_memories,
            max_versions,
            fleet,
        },
    )?;
    if stopped.store_failures > 0 {
        return Err(format!(
            "the stores failed on {} call(s) while serving (each got an error result); check the disk, then restart the server",
            stopped.store_failures
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}
