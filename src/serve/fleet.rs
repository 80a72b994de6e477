//! `mnemo serve --data DIR --fleet URL`: a node of a fleet. Every node points at the same bucket
//! (and prefix); each store is served by the one node holding its lease, and `DIR` holds this
//! node's copies of the stores it holds (built from the store's write-ahead log in the bucket
//! when it takes one, never the truth).
//!
//! - **Membership.** A thread beats for the node every [`Timing::beat`]; a node that lapsed
//!   (see [`crate::fleet::lease`]) forgets what it held, and takes each store again on its next
//!   request.
//! - **Taking a store.** A request for a store no live node holds takes it: the lease's next
//!   epoch, then the log's next object with the epoch's marker ([`crate::fleet::wal`]), then a
//!   copy built from the log. Every write is then acknowledged only once it is in the log
//!   (`durability replicated`): a node that lost the store without knowing it is fenced there,
//!   never acknowledged.
//! - **One address.** A request for a store a live node holds is forwarded to that node (once:
//!   a forwarded request, proved by [`crate::fleet::forwarding`], is never forwarded again), with
//!   its headers, and the answer streamed back as it comes (an MCP stream included). A store's
//!   tokens are events of the store, so they work through any node; the operator token is the
//!   fleet's, kept in the bucket (`operator/token`, made by the first node that starts). What a
//!   node shows of stores it does not hold comes from the bucket too: the memory-stores list from
//!   the labels' copies there, an MCP session from its record there
//!   ([`super::sessions::Kept`]), taken up by whichever node holds the store next.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use super::auth::Token;
use super::routes::error;
use crate::error::{Error, Result};
use crate::fleet::bucket::Bucket;
use crate::fleet::copy;
use crate::fleet::forwarding;
use crate::fleet::lease::{Held, Lease, Leases, Node, Timing};
use crate::fleet::shipping::Shipping;
use crate::fleet::signature::{FleetKey, LogKeys};
use crate::fleet::wal::{Position, Wal};
use crate::store::writer::Replicator;

/// Where a node of a fleet is, and the bucket it shares with the others.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// The bucket every node shares: `s3://bucket/prefix` (or `file:///dir` on one machine).
    pub url: String,
    /// This node's id, unique in the fleet.
    pub node_id: String,
    /// The URL the other nodes forward requests to this node at: `http://HOST:PORT` (the nodes
    /// speak plain HTTP to each other; checked when the node starts).
    pub advertise: String,
    /// How long after its last heartbeat a node counts as dead, and its stores are taken over
    /// (default 10 s; the node stops acknowledging writes 30% before).
    pub lease_ttl: Duration,
    /// The fleet's signing key (`--signing-key FILE`): this node signs every log object and pack
    /// it makes, and takes a store only if its log is signed by the key (but for a prefix
    /// written before the fleet had one, or a log the key adopted: [`Fleet::adopt`]). `None`:
    /// nothing is signed or checked. Every node of a fleet is given the same key, or none.
    pub signing: Option<FleetKey>,
}

impl FleetOptions {
    /// The options of a node of the fleet whose bucket is at `url` that listens at `listen`
    /// (`mnemo serve --fleet URL`): the other nodes reach it at `advertise`, an `http://` or
    /// `https://` URL (by default `http://LISTEN`, which then needs a port other than 0), and
    /// know it as `node_id` (by default the advertised host and port, such as
    /// `10.0.0.5-8080`); its leases last `lease_ttl`. The error says which of them to fix.
    pub fn node(
        url: &str,
        listen: std::net::SocketAddr,
        advertise: Option<&str>,
        node_id: Option<&str>,
        lease_ttl: Duration,
    ) -> std::result::Result<FleetOptions, String> {
        let advertise = match advertise {
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                url.to_string()
            }
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
        let node_id = node_id.map(str::to_string).unwrap_or_else(|| {
            advertise
                .split("://")
                .nth(1)
                .unwrap_or(&advertise)
                .trim_end_matches('/')
                .replace([':', '/', '[', ']'], "-")
        });
        Ok(FleetOptions {
            url: url.to_string(),
            node_id,
            advertise,
            lease_ttl,
            signing: None,
        })
    }

    /// Checks what the other nodes need of this one before it starts: an advertised URL they
    /// can forward to (`http://HOST:PORT`, HOST not an unspecified address such as 0.0.0.0).
    pub(crate) fn check(&self) -> Result<()> {
        let unreachable = || {
            Error::InvalidArgument(format!(
                "--advertise: the other nodes cannot reach this one at {:?}; give the address and port they reach it at, such as --advertise http://10.0.0.5:8080",
                self.advertise
            ))
        };
        if self.advertise.len() >= 7
            && self.advertise[..7].eq_ignore_ascii_case("http://")
            && !self.advertise.starts_with("http://")
        {
            return Err(Error::InvalidArgument(format!(
                "--advertise: write the scheme of {:?} in lowercase, as http://HOST:PORT",
                self.advertise
            )));
        }
        let authority = authority_of(&self.advertise)
            .map_err(|why| Error::InvalidArgument(format!("--advertise: {why}")))?;
        // The port is given, and a real one (the URL's own text, not a default).
        let given = self.advertise["http://".len()..]
            .split('/')
            .next()
            .unwrap_or_default();
        let port = given
            .rsplit_once(':')
            .filter(|(host, _)| !host.is_empty() && (!host.starts_with('[') || host.ends_with(']')))
            .and_then(|(_, port)| port.parse::<u16>().ok());
        if port.is_none_or(|port| port == 0) {
            return Err(unreachable());
        }
        let host = authority
            .rsplit_once(':')
            .map_or(authority.as_str(), |(host, _)| host);
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.');
        let unspecified = host == "0"
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| match ip {
                std::net::IpAddr::V4(v4) => v4.is_unspecified(),
                std::net::IpAddr::V6(v6) => {
                    v6.is_unspecified() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified())
                }
            });
        if unspecified {
            return Err(unreachable());
        }
        Ok(())
    }
}

/// Where the fleet's operator token lies in its bucket.
const OPERATOR_TOKEN: &str = "operator/token";

/// The fleet's operator token, as its bucket holds it.
fn shared_token(bucket: &Bucket) -> Result<String> {
    let bytes = bucket.get(OPERATOR_TOKEN, 1024)?.ok_or_else(|| {
        Error::damaged(format!(
            "the fleet at {} has no {OPERATOR_TOKEN} (its first node writes it)",
            bucket.url()
        ))
    })?;
    String::from_utf8(bytes)
        .ok()
        .filter(|t| t.len() >= 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            Error::damaged(format!(
                "the fleet's {OPERATOR_TOKEN} at {} is not a token (64 hex digits)",
                bucket.url()
            ))
        })
}

/// The bucket at `url` and its leases as a reader that is no node sees them (named `who` to
/// the leases' checks), with leases of `lease_ttl`.
fn observe(url: &str, who: &str, lease_ttl: Duration) -> Result<(Arc<Bucket>, Leases)> {
    // Read as it is: a `file://` directory that is missing is no fleet, and is not made.
    let missing = url
        .strip_prefix("file://")
        .is_some_and(|dir| !Path::new(dir).is_dir());
    if missing {
        return Err(Error::InvalidArgument(format!(
            "there is no fleet at {url}: the directory does not exist (a fleet's first node makes it); check --fleet"
        )));
    }
    let bucket = Arc::new(Bucket::open_existing(url)?);
    let observer = Node {
        id: who.into(),
        url: String::new(),
    };
    let leases = Leases::new(Arc::clone(&bucket), observer, timing(lease_ttl, &bucket))?;
    Ok((bucket, leases))
}

/// The longest lease a fleet keeps.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// The header a forwarded request carries: the id of the node that forwarded it, and its proof
/// ([`crate::fleet::forwarding`]).
const FORWARDED: &str = "x-mnemo-forwarded-by";

/// How many times a request for a store is sent where the store is (here or another node)
/// while it is answered 503 for want of the store.
const ROUTE_TRIES: usize = 4;

/// The pause before a request is sent where its store is now.
const ROUTE_PAUSE: Duration = Duration::from_millis(50);

/// The most bytes of a request forwarded to another node (its answer streams through).
const FORWARD_MAX: usize = 256 * 1024 * 1024;

/// This node's part in the fleet.
pub(crate) struct Member {
    bucket: Arc<Bucket>,
    /// What this node signs and checks the stores' logs with, if the fleet has a key.
    keys: Option<LogKeys>,
    leases: Leases,
    /// The stores this node holds, by name.
    held: Mutex<HashMap<String, (Held, Arc<Shipping>)>>,
    /// Set by a drain: the node takes no store from then on, and forwards what it held.
    draining: std::sync::atomic::AtomicBool,
}

/// What a request for a store found ([`Member::take`]).
pub(crate) enum Taken {
    /// This node holds it now: its copy is built, and writes go through this.
    Here(Replicator),
    /// The live node at this URL holds it.
    Elsewhere(String),
    /// No such store in the fleet.
    Missing,
}

/// What a delete of a fleet's store found ([`Member::delete`]).
pub(crate) enum Deleted {
    /// Deleted now: its lease says so, and its data is removed from the bucket (or, when the
    /// removal was cut, is removed by the next node's sweep).
    Done,
    /// The live node at this URL holds it: the delete is for that node to serve.
    Elsewhere(String),
    /// No such store in the fleet (or it was deleted before).
    Missing,
}

/// Removes a node's copy of a store at `path` and the position recorded beside it.
fn remove_copy(path: &Path) {
    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
        let _ = std::fs::remove_file(path.with_file_name(format!(".{name}.fleet")));
    }
    if let Some(dir) = path.parent().filter(|_| path.is_dir()) {
        if let Err(e) = crate::store::data_dir::remove(dir, path) {
            eprintln!(
                "mnemo serve: the copy of a deleted store at {} could not be removed: {e}",
                path.display()
            );
        }
    }
}

/// The timing of leases of `ttl`: a beat every fifth of it, serving stopped 30% before it
/// runs out, and stamps taken as coarse as the bucket's may be.
fn timing(ttl: Duration, bucket: &Bucket) -> Timing {
    // Past a day a lease would never run out in practice (and its arithmetic could overflow).
    let ttl = ttl.min(MAX_TTL);
    let granularity = match bucket.url().starts_with("s3://") {
        true => Duration::from_secs(1),
        false => Duration::from_millis(10),
    };
    Timing {
        beat: ttl / 5,
        ttl,
        margin: (ttl * 3 / 10).max(granularity * 2),
        granularity,
    }
}

impl Member {
    /// This node of the fleet `options` names: the bucket opened, not beating yet (a node beats
    /// once it listens, [`Member::beat_until`]).
    pub(crate) fn open(options: &FleetOptions) -> Result<Member> {
        let bucket = Arc::new(Bucket::open(&options.url)?);
        let node = Node {
            id: options.node_id.clone(),
            url: options.advertise.trim_end_matches('/').to_string(),
        };
        let timing = timing(options.lease_ttl, &bucket);
        let leases = Leases::new(Arc::clone(&bucket), node, timing)?;
        let keys = match &options.signing {
            Some(key) => Some(LogKeys::signing(key)?),
            None => None,
        };
        Ok(Member {
            bucket,
            keys,
            leases,
            held: Mutex::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The log of the store `store`, signed and checked with the fleet's key if it has one.
    fn wal(&self, store: &str) -> Wal {
        Wal::new(Arc::clone(&self.bucket), store).signed(self.keys.clone())
    }

    /// The fleet's operator token: made by the first node that starts (create-only, so nodes
    /// starting together agree), read by the others.
    pub(crate) fn operator_token(&self) -> Result<Token> {
        let fresh = Token::generate().map_err(|e| Error::io("the fleet's operator token", e))?;
        self.bucket
            .create(OPERATOR_TOKEN, fresh.as_str().as_bytes().to_vec())?;
        shared_token(&self.bucket).map(Token::shared)
    }

    /// The fleet's bucket.
    pub(crate) fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Held, Arc<Shipping>)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this node still holds `store`: taken, its beats keeping it, and every commit
    /// to its log made (after one failed, the copy is closed and the store taken again, its
    /// copy brought up from the log, rather than left poisoned).
    pub(crate) fn holds(&self, store: &str) -> bool {
        self.held()
            .get(store)
            .is_some_and(|(held, shipping)| self.leases.holds(held) && !shipping.failed())
    }

    /// Whom `token` proves in `store`, as the node at `url` holding it answers (asked as a node
    /// forwarding a request, proved with the fleet's operator token `operator`); `None` when it
    /// proves no one there, or the node did not answer.
    pub(crate) fn whoami(
        &self,
        url: &str,
        store: &str,
        operator: &Token,
        token: &str,
    ) -> Option<super::auth::Principal> {
        // A store's route `/v1/ROUTE` is `/v1/stores/NAME/ROUTE` on a data server.
        let route = super::clients::WHOAMI.trim_start_matches("/v1");
        let target = format!("/v1/stores/{store}{route}");
        let proof = forwarding::sign(
            &forwarding::key(operator.as_str()),
            &self.leases.node().id,
            "GET",
            &target,
        );
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(CONNECT_WAIT))
                .build(),
        );
        let mut answer = agent
            .get(format!("{url}{target}"))
            .header("authorization", format!("Bearer {token}"))
            .header(FORWARDED, proof)
            .call()
            .ok()?;
        if answer.status() != 200 {
            return None;
        }
        let bytes = answer
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_vec()
            .ok()?;
        let who: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        match (who["principal"].as_str()?, who["agent"].as_str()?) {
            ("operator", _) => Some(super::auth::Principal::Operator),
            ("agent", agent) => Some(super::auth::Principal::Agent(agent.to_string())),
            _ => None,
        }
    }

    /// The URL of the live node other than this one that holds `store`, if one does; for a
    /// node being drained, which takes no store, any other live node's when none holds it.
    pub(crate) fn elsewhere(&self, store: &str) -> Option<String> {
        if self.holds(store) {
            return None;
        }
        let me = &self.leases.node().id;
        let holder = self
            .leases
            .live_lease(store)
            .ok()
            .flatten()
            .filter(|lease| lease.node.id != *me)
            .map(|lease| lease.node.url);
        match holder {
            Some(url) => Some(url),
            None if self.is_draining() => {
                self.other_nodes().ok()?.into_iter().next().map(|n| n.url)
            }
            None => None,
        }
    }

    fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The live nodes other than this one that are not being drained.
    fn other_nodes(&self) -> Result<Vec<Node>> {
        let me = &self.leases.node().id;
        Ok(self
            .leases
            .nodes()?
            .into_iter()
            .filter(|n| n.alive && !n.draining && n.node.id != *me && !n.node.url.is_empty())
            .map(|n| n.node)
            .collect())
    }

    /// Starts a drain: from now on the node takes no store, and says so in its beats (so no
    /// store is handed to it). Returns every store whose lease names this node (open here or
    /// not), each with the lease and the live node it is to be handed to (spread over the others
    /// in turn). An error, and no drain, when no other node is alive and not being drained.
    pub(crate) fn start_drain(&self) -> Result<Vec<(Lease, Node)>> {
        let others = self.other_nodes()?;
        if others.is_empty() {
            return Err(Error::InvalidArgument(
                "no other node of the fleet is alive (and not being drained) to hand the stores to; start one, then drain this one".into(),
            ));
        }
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.leases.drain();
        self.leases.beat()?;
        let me = &self.leases.node().id;
        let mut mine = Vec::new();
        for store in self.stores()? {
            if let Some(lease) = self
                .leases
                .lease(&store)?
                .filter(|l| l.node.id == *me && !l.deleted)
            {
                mine.push(lease);
            }
        }
        Ok(mine
            .into_iter()
            .zip(others.iter().cycle().cloned())
            .collect())
    }

    /// Hands the store of `lease` (closed here, its writes all in the bucket) to `to`: the
    /// lease's next epoch names it. Whether it was still this node's to hand.
    pub(crate) fn hand_over(&self, lease: &Lease, to: &Node) -> Result<bool> {
        let held = self.held().remove(&lease.store);
        let lease = match held {
            Some((held, shipping)) => {
                // What it acknowledged goes to the log before the next holder's marker could
                // fence it. A commit that failed (the store taken, or the bucket refusing) left
                // the store's writer poisoned; what it had not shipped is lost either way.
                if let Err(e) = shipping.finish() {
                    eprintln!(
                        "mnemo serve: the store {} is handed over with events this node could not ship: {e}",
                        lease.store
                    );
                }
                // The next holder goes on from the log as the bucket holds it: if this node's
                // last commit is gone from there (removed by someone who can write the bucket),
                // handing over would make the loss of acknowledged writes the store's history.
                if !shipping.last_commit_kept()? {
                    let why = format!(
                        "the store {} is not handed over: the log in the bucket no longer holds this node's last commit (event {}), so someone removed objects from it, and the next holder would go on without writes this node acknowledged. The store stays leased to this node, which serves it no more while it drains: put the removed objects back (or restore the store from this node's copy, DIR/{}), then drain again",
                        lease.store,
                        shipping.head_seq(),
                        lease.store
                    );
                    eprintln!("mnemo serve: {why}");
                    return Err(Error::damaged(why));
                }
                held.lease
            }
            None => lease.clone(),
        };
        self.leases.hand_over(&lease, to)
    }

    /// The node the lease of `store` names, its epoch, and whether that node is alive.
    pub(crate) fn holder_of(&self, store: &str) -> Option<(String, u64, bool)> {
        let (lease, alive) = self.leases.lease_and_life(store).ok()??;
        Some((lease.node.id, lease.epoch, alive))
    }

    /// How often the node beats.
    pub(crate) fn beat_every(&self) -> Duration {
        self.leases.timing().beat
    }

    /// The fleet's stores no live node holds (free, or their holder dead, or leased to this node
    /// by its earlier run), unless this node is being drained (it takes none). On the way,
    /// finishes the deletion of any store whose lease says it is deleted but whose data's
    /// removal was cut (its deleting node killed, or the bucket failing then).
    pub(crate) fn orphans(&self) -> Result<Vec<String>> {
        if self.is_draining() {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        let me = &self.leases.node().id;
        for store in self.stores()? {
            if self.holds(&store) {
                continue;
            }
            // A live lease naming this node that it does not hold is one from its earlier run
            // (restarted, perhaps at another address the others would forward to in vain).
            match self.leases.lease_and_life(&store)? {
                Some((lease, _)) if lease.deleted => self.finish_deletion(&lease),
                Some((lease, true)) if lease.node.id != *me => {}
                _ => found.push(store),
            }
        }
        Ok(found)
    }

    /// Removes the data of the store `lease` says is deleted, unless that was done.
    fn finish_deletion(&self, lease: &Lease) {
        let wal = self.wal(&lease.store);
        if wal.deletion_finished().unwrap_or(true) {
            return;
        }
        match wal.delete(lease.epoch) {
            Ok(()) => eprintln!(
                "mnemo serve: finished the deletion of the store {} (its data removed from the bucket)",
                lease.store
            ),
            Err(e) => eprintln!(
                "mnemo serve: the deletion of the store {} is not finished yet ({e}); the next sweep tries again",
                lease.store
            ),
        }
    }

    /// The stores of the fleet, by name, deleted ones too.
    pub(crate) fn stores(&self) -> Result<Vec<String>> {
        self.leases.stores()
    }

    /// Whether `store` was one of the fleet's and was deleted.
    pub(crate) fn deleted(&self, store: &str) -> Result<bool> {
        Ok(self.leases.lease(store)?.is_some_and(|l| l.deleted))
    }

    /// Deletes the fleet's store `store`, closed on this node (its calls in flight answered):
    /// takes it from this node itself at the next epoch with a lease saying it is deleted (the
    /// store's last: no node takes it again), fences its log at that epoch, removes its data
    /// from the bucket (every object of its log holding events, its label copies and MCP
    /// session records; the markers stay, fencing every older holder) and this node's copy at
    /// `path`. A store held by another live node is that node's to delete.
    pub(crate) fn delete(&self, store: &str, path: &Path) -> Result<Deleted> {
        let elsewhere = |leases: &Leases| -> Result<Deleted> {
            Ok(match leases.live_lease(store)? {
                Some(lease) if lease.node.id != leases.node().id => {
                    Deleted::Elsewhere(lease.node.url)
                }
                _ if leases.lease(store)?.is_some_and(|l| !l.deleted) => {
                    Deleted::Elsewhere(String::new())
                }
                _ => Deleted::Missing,
            })
        };
        match self.leases.lease(store)? {
            None => return Ok(Deleted::Missing),
            Some(lease) if lease.deleted => {
                remove_copy(path);
                return Ok(Deleted::Missing);
            }
            Some(_) => {}
        }
        let held = self
            .held()
            .remove(store)
            .map(|(held, _)| held)
            .filter(|held| self.leases.holds(held));
        let held = match held {
            Some(held) => held,
            None if self.is_draining() => return elsewhere(&self.leases),
            None => match self.leases.take(store)? {
                Some(held) => held,
                None => return elsewhere(&self.leases),
            },
        };
        let Some(deleted) = self.leases.delete(&held)? else {
            return elsewhere(&self.leases);
        };
        // The store is deleted from here on; what follows only removes its data, which the
        // next node's sweep finishes if this is cut.
        if let Err(e) = self.wal(store).delete(deleted.epoch) {
            eprintln!(
                "mnemo serve: deleted the store {store}, but its data's removal from the bucket was cut ({e}); the fleet's next sweep finishes it"
            );
        }
        remove_copy(path);
        Ok(Deleted::Done)
    }

    /// The fleet's stores by name after `after`, at most `limit`, and whether more follow.
    pub(crate) fn stores_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<String>, bool)> {
        // A deleted store is left out (a lease that cannot be read is shown: the store is).
        let mut names: Vec<String> = self
            .stores()?
            .into_iter()
            .filter(|name| after.is_none_or(|after| name.as_str() > after))
            .filter(|name| !self.deleted(name).unwrap_or(false))
            .take(limit + 1)
            .collect();
        let more = names.len() > limit;
        names.truncate(limit);
        Ok((names, more))
    }

    /// Takes `store` for this node unless a live node holds it, builds its copy at `path` from
    /// its log, and returns what its writes go through; with `create`, only a store that does
    /// not exist yet is taken (`Missing` then means it exists).
    pub(crate) fn take(&self, store: &str, path: &Path, create: bool) -> Result<Taken> {
        if self.is_draining() {
            return match self.elsewhere(store) {
                Some(url) => Ok(Taken::Elsewhere(url)),
                None => Err(Error::InvalidArgument(
                    "this node is being drained and takes no store, and no other node of the fleet is alive to take it; start one".into(),
                )),
            };
        }
        let lease = self.leases.lease(store)?;
        if lease.as_ref().is_some_and(|l| l.deleted) {
            // A copy this node kept of a store deleted since is removed, never served.
            remove_copy(path);
            return Ok(Taken::Missing);
        }
        if lease.is_some() == create {
            return Ok(Taken::Missing);
        }
        // Events this node acknowledged in an earlier hold and still ships go to the log
        // before this take's marker could fence them.
        let earlier = self.held().remove(store);
        if let Some((_, shipping)) = earlier {
            let _ = shipping.finish();
        }
        let Some(held) = self.leases.take(store)? else {
            return Ok(match self.leases.lease(store)? {
                Some(lease) if !create => Taken::Elsewhere(lease.node.url),
                _ => Taken::Missing,
            });
        };
        let wal = self.wal(store);
        // The copy an earlier hold left is brought up from where it was recorded, if it holds.
        let recorded = copy::recorded(path).filter(|at| wal.holds(at).unwrap_or(false));
        let from = recorded.unwrap_or(Position::START);
        let taken = match wal.take(held.lease.epoch, &from) {
            Ok(taken) => taken,
            Err(Error::Fenced { .. }) => return self.taken_since(store),
            Err(e) => return Err(e),
        };
        let mut holder = taken.holder;
        let read = taken.read;
        let reused = match recorded {
            Some(from) => copy::extend(path, &from, &taken.records)?,
            None => None,
        };
        if let Some(ahead) = reused {
            eprintln!(
                "mnemo serve: took the store {store} at epoch {}: its copy brought up from event {} with {} event(s) of the log",
                held.lease.epoch,
                from.seq,
                taken.records.len()
            );
            if !ahead.is_empty() {
                // Events written here and acknowledged on this disk that never reached the log:
                // the log did not go on without them, so they go to it first.
                match holder.commit(&ahead) {
                    Ok(()) => eprintln!(
                        "mnemo serve: the store {store}'s copy held {} event(s) this node wrote that the log lacked: shipped",
                        ahead.len()
                    ),
                    Err(Error::Fenced { .. }) => return self.taken_since(store),
                    Err(e) => return Err(e),
                }
            }
        } else {
            let records = match from == Position::START {
                true => taken.records,
                false => wal.scan(&Position::START)?.1,
            };
            copy::build(path, &records)?;
            eprintln!(
                "mnemo serve: took the store {store} at epoch {}: its copy built from the log's {} event(s)",
                held.lease.epoch,
                records.len()
            );
        }
        let shipping = Arc::new(Shipping::new(holder, path, read));
        self.held()
            .insert(store.to_string(), (held, Arc::clone(&shipping)));
        // The store's MCP session records past their time, removed beside the takeover.
        let (bucket, name) = (Arc::clone(&self.bucket), store.to_string());
        let swept = std::thread::Builder::new()
            .name("mnemo-fleet-sweep".into())
            .spawn(move || {
                if let Err(e) = super::sessions::sweep(&bucket, &name) {
                    eprintln!("mnemo serve: the store {name}'s old MCP session records could not be swept: {e}");
                }
            });
        if let Err(e) = swept {
            eprintln!(
                "mnemo serve: no thread to sweep the store {store}'s old MCP session records: {e}"
            );
        }
        Ok(Taken::Here(Replicator(shipping)))
    }

    /// What a take of `store` fenced by a later epoch answers: the node the latest lease names.
    fn taken_since(&self, store: &str) -> Result<Taken> {
        Ok(match self.leases.lease(store)? {
            Some(lease) => Taken::Elsewhere(lease.node.url),
            None => Taken::Missing,
        })
    }

    /// Makes the node's first beat (it joins the fleet), then beats on a thread of its own until
    /// `stop`; when a beat finds the node lapsed, forgets every store it held (each is taken
    /// again, at a new epoch, on its next request here).
    pub(crate) fn beat_until(
        self: &Arc<Self>,
        stop: CancellationToken,
    ) -> Result<std::thread::JoinHandle<()>> {
        self.leases.check_alone()?;
        self.leases.beat()?;
        let member = Arc::clone(self);
        std::thread::Builder::new()
            .name("mnemo-fleet-beat".into())
            .spawn(move || {
                let every = member.leases.timing().beat;
                while !stop.is_cancelled() {
                    std::thread::sleep(every);
                    match member.leases.beat() {
                        Ok(true) => {}
                        Ok(false) => member.held().clear(),
                        // Another process beats as this node: this one holds nothing more,
                        // takes nothing, and forwards every request.
                        Err(e @ Error::InvalidArgument(_)) => {
                            eprintln!("mnemo serve: {e}; this node now serves no store");
                            member
                                .draining
                                .store(true, std::sync::atomic::Ordering::SeqCst);
                            member.held().clear();
                        }
                        Err(e) => eprintln!("mnemo serve: the fleet heartbeat failed: {e}"),
                    }
                }
            })
            .map_err(|e| Error::io("the fleet's heartbeat thread", e))
    }
}

/// A fleet as `mnemo fleet status` shows it, read from its bucket.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FleetStatus {
    /// Every node that beat lately (a node's beats are kept while it runs), by id.
    pub nodes: Vec<FleetNode>,
    /// Every store, by name.
    pub stores: Vec<FleetStore>,
}

/// A node of a fleet.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FleetNode {
    /// Its id.
    pub id: String,
    /// The URL the other nodes forward to.
    pub url: String,
    /// How long before the latest beat of any node its own latest beat was, in milliseconds
    /// (the object store's clock).
    pub beat_age_ms: i64,
    /// Whether its lease still holds (its latest beat is within the ttl).
    pub alive: bool,
    /// Whether it is being drained (its beats say so): it takes no store.
    pub draining: bool,
    /// How many stores' latest lease names it.
    pub stores: usize,
}

/// A store of a fleet.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FleetStore {
    /// Its name.
    pub name: String,
    /// The node its latest lease names.
    pub node: String,
    /// That lease's epoch (how many times the store was taken).
    pub epoch: u64,
    /// Whether that node is alive (else the store is taken by the next node asked for it).
    pub alive: bool,
    /// How many objects its log in the bucket holds: one per commit since its last pack, one
    /// per epoch, and its packs (each the events of a run of commits).
    pub log_objects: usize,
}

/// A fleet seen from outside its nodes, through its bucket: what `mnemo fleet status` reads and
/// `mnemo fleet drain` asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fleet {
    /// The bucket every node shares.
    url: String,
}

impl Fleet {
    /// The fleet whose bucket is at `url` (`s3://bucket/prefix`, or `file:///dir`); nothing is
    /// read until it is asked.
    pub fn at(url: impl Into<String>) -> Fleet {
        Fleet { url: url.into() }
    }

    /// The fleet as its objects show it, with leases of `lease_ttl`.
    pub fn status(&self, lease_ttl: Duration) -> Result<FleetStatus> {
        let url = self.url.as_str();
        let (bucket, leases) = observe(url, "status", lease_ttl)?;
        let beating = leases.nodes()?;
        let mut stores = Vec::new();
        for name in leases.stores()? {
            // A lease that cannot be read shows as held by no node: the rest stay visible.
            let lease = match leases.lease(&name) {
                Ok(Some(lease)) if lease.deleted => continue,
                Ok(Some(lease)) => lease,
                Ok(None) => continue,
                Err(e) => Lease {
                    store: name.clone(),
                    epoch: 0,
                    node: Node {
                        id: format!("(unreadable lease: {e})"),
                        url: String::new(),
                    },
                    deleted: false,
                    stamp_ms: 0,
                },
            };
            let alive = beating
                .iter()
                .any(|n| n.node.id == lease.node.id && n.alive);
            let log_objects = bucket.list(&format!("stores/{name}/wal"))?.len()
                + bucket.list(&format!("stores/{name}/pack"))?.len();
            stores.push(FleetStore {
                name,
                node: lease.node.id,
                epoch: lease.epoch,
                alive,
                log_objects,
            });
        }
        let nodes = beating
            .into_iter()
            .map(|n| FleetNode {
                stores: stores.iter().filter(|s| s.node == n.node.id).count(),
                id: n.node.id,
                url: n.node.url,
                beat_age_ms: n.beat_age_ms,
                alive: n.alive,
                draining: n.draining,
            })
            .collect();
        Ok(FleetStatus { nodes, stores })
    }

    /// Adopts with the fleet's key `key` the logs of `stores` (every store of the fleet when
    /// empty) written before the fleet had a key, so that nodes started with the key take them
    /// (`mnemo fleet adopt`): each log read whole and the end it reached signed, once. Run while
    /// no node writes the stores (before the nodes are started with the key). Returns, for each
    /// store, the last event adopted, or why it was not (signed already, adopted before, no log).
    pub fn adopt(
        &self,
        key: &FleetKey,
        stores: &[String],
    ) -> Result<Vec<(String, std::result::Result<crate::Seq, String>)>> {
        let bucket = Arc::new(Bucket::open_existing(&self.url)?);
        let keys = LogKeys::signing(key)?;
        let names = match stores {
            [] => {
                let (_, leases) = observe(&self.url, "adopt", Duration::from_secs(10))?;
                leases.stores()?
            }
            named => named.to_vec(),
        };
        Ok(names
            .into_iter()
            .map(|store| {
                let wal = Wal::new(Arc::clone(&bucket), &store).signed(Some(keys.clone()));
                let adopted = wal.adopt().map(|at| at.seq).map_err(|e| e.to_string());
                (store, adopted)
            })
            .collect())
    }

    /// Drains the node `node`: asks it (at the URL it beats with, with the fleet's operator
    /// token) to hand every store it holds to the other live nodes. Returns each store handed
    /// over and the node it went to.
    pub fn drain(&self, node: &str) -> Result<Vec<(String, String)>> {
        let url = self.url.as_str();
        let (bucket, leases) = observe(url, "drain", Duration::from_secs(10))?;
        let found = leases
        .nodes()?
        .into_iter()
        .find(|n| n.node.id == node)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the fleet at {url} has no node {node:?}: `mnemo fleet status --fleet {url}` lists its nodes"
            ))
        })?;
        let token = shared_token(&bucket)?;
        let remote = crate::client::remote::RemoteClient::new(&found.node.url, &token);
        let (status, body) = remote.admin(crate::client::remote::AdminRequest::Post {
            route: "/v1/fleet/drain",
            body: &serde_json::json!({}),
        })?;
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if status != 200 {
            return Err(Error::Server {
                reason: format!(
                    "the node {node} at {} refused the drain ({status}): {}",
                    found.node.url,
                    answer["error"].as_str().unwrap_or("no reason given")
                ),
                unreachable: false,
                status: Some(status),
            });
        }
        Ok(answer["handed_over"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|h| {
                        (
                            h["store"].as_str().unwrap_or_default().to_string(),
                            h["to"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// A client of the store at `path` that acknowledges each write once it is in the log of the
/// store `store` in the bucket at `url` (taken at epoch 1, so the log must be new): what a fleet
/// node's store is, without the node, for benches and tests.
#[cfg(feature = "testing")]
pub fn replicated_client(
    path: &Path,
    url: &str,
    store: &str,
    agent: &str,
) -> Result<crate::MnemoClient> {
    let wal = Wal::new(Arc::new(Bucket::open(url)?), store);
    let taken = wal.take(1, &Position::START)?;
    copy::build(path, &taken.records)?;
    crate::MnemoClient::builder(path)
        .agent_id(agent)
        .replicate_to(Replicator(Arc::new(Shipping::new(
            taken.holder,
            path,
            taken.read,
        ))))
        .open()
}

/// The store a request's path names, if it names one: `/v1/stores/NAME/...` or
/// `/v1/memory_stores/ID/...`.
fn store_of(path: &str) -> Option<String> {
    let mut parts = path.trim_start_matches('/').split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("v1"), Some("stores"), Some(name)) => Some(name.to_string()),
        (Some("v1"), Some("memory_stores"), Some(id)) => {
            crate::memory_store::ids::store_name(id).map(str::to_string)
        }
        _ => None,
    }
}

/// What the router of a fleet's node needs: the node, and the Host and Origin values its
/// requests may carry.
#[derive(Clone)]
pub(crate) struct Routing {
    member: Arc<Member>,
    hosts: super::auth::Hosts,
    /// The key forwarded requests are proved with ([`crate::fleet::forwarding`]).
    key: [u8; 32],
}

impl Routing {
    /// The router of `member`, whose server answers to `hosts` and serves with the fleet's
    /// operator token `token`.
    pub(crate) fn new(member: Arc<Member>, hosts: super::auth::Hosts, token: &Token) -> Routing {
        Routing {
            member,
            hosts,
            key: forwarding::key(token.as_str()),
        }
    }
}

/// Forwards a request for a store another live node holds to that node, once; any other
/// request goes on here. A request is forwarded only once its Host and Origin are this node's
/// (the check against DNS rebinding is the first node's; the holder then sees no Origin).
pub(crate) async fn route(
    State(Routing { member, hosts, key }): State<Routing>,
    mut request: Request,
    next: axum::middleware::Next,
) -> Response {
    // A store made on a node being drained would be handed over at once (or refused): it is
    // made on another node ("" below: no store yet, routed to where new stores go).
    let creating = request.method() == axum::http::Method::POST
        && matches!(request.uri().path(), "/v1/stores" | "/v1/memory_stores")
        && member.is_draining();
    // A name that is no store's is never looked up in the bucket: the routes refuse it here.
    let Some(store) = store_of(request.uri().path())
        .filter(|name| crate::store::data_dir::check_store_name(name).is_ok())
        .or_else(|| creating.then(String::new))
    else {
        return next.run(request).await;
    };
    let target = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let proved = request
        .headers()
        .get(FORWARDED)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| forwarding::check(&key, value, request.method().as_str(), &target))
        .is_some();
    if proved {
        return next.run(request).await;
    }
    // A header no node made (a client's) is dropped: the request is routed as any other.
    request.headers_mut().remove(FORWARDED);
    if let Err(refusal) = hosts.check(request.headers()) {
        return super::refuse(request.method().as_str(), request.uri().path(), &refusal);
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, FORWARD_MAX).await {
        Ok(body) => body,
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request body could not be read ({e}); send at most {FORWARD_MAX} bytes"
                ),
            );
        }
    };
    // A store refused for want of it (another node took it meanwhile, or a drain hands it
    // over) is looked for again, and the request sent where it is now, rather than back.
    let mut next = Some(next);
    let mut answered = None;
    for _ in 0..ROUTE_TRIES {
        let response = match holder(&member, &store).await {
            Some(url) => forward(&member, &key, url, parts.clone(), body.clone()).await,
            None => match next.take() {
                Some(next) => {
                    let here = Request::from_parts(parts.clone(), Body::from(body.clone()));
                    next.run(here).await
                }
                None => break,
            },
        };
        // 503, or the memory-stores API's 529 (overloaded): the store is not here, or not yet.
        if !matches!(response.status().as_u16(), 503 | 529) {
            return response;
        }
        answered = Some(response);
        tokio::time::sleep(ROUTE_PAUSE).await;
    }
    answered.unwrap_or_else(|| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the store is moving between the fleet's nodes; retry",
        )
    })
}

/// Where `store` is served, if not here ([`Member::elsewhere`]); for "" (a store being made on
/// a node being drained), a live node not being drained.
async fn holder(member: &Arc<Member>, store: &str) -> Option<String> {
    let (asking, store) = (Arc::clone(member), store.to_string());
    tokio::task::spawn_blocking(move || match store.is_empty() {
        true => asking.other_nodes().ok()?.into_iter().next().map(|n| n.url),
        false => asking.elsewhere(&store),
    })
    .await
    .ok()
    .flatten()
}

/// Headers that belong to one connection, not to the request or answer forwarded (and the
/// Origin the forwarding node checked).
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "host"
            | "origin"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "content-length"
            | "upgrade"
    )
}

/// How long forwarding waits to connect to the node holding a store.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// Sends the request (`parts`, `body`) to the node at `url` and streams its answer back as it
/// comes: a stream of server-sent events (MCP's) reaches the client event by event, and ends
/// when either side ends it (a client that leaves closes the connection to the holder).
async fn forward(
    member: &Member,
    key: &[u8; 32],
    url: String,
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Response {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let proof = forwarding::sign(key, &member.leases.node().id, parts.method.as_str(), target);
    let wait = answer_wait(member.leases.timing().ttl);
    match send(&url, parts, body, &proof, wait).await {
        Ok(response) => response,
        Err(Unanswered::NotSent(why)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the node holding the store could not be reached ({why}), and the request was not sent; retry: a store whose node is gone is taken over once its lease runs out"
            ),
        ),
        // Never resent: the holder may have applied it before it went quiet.
        Err(Unanswered::MaybeApplied(why)) => error(
            StatusCode::GATEWAY_TIMEOUT,
            &format!(
                "the node holding the store took the request but gave no answer ({why}): it may or may not have been applied; read the store before you send it again (a memory-tool call retried with the same tool_use id, or an API write with the same Idempotency-Key, is applied at most once)"
            ),
        ),
    }
}

/// Why a forwarded request got no answer: it was never sent (no connection), so it can be sent
/// again anywhere; or it was sent and the holder went quiet, so it may have been applied.
enum Unanswered {
    NotSent(String),
    MaybeApplied(String),
}

/// How long forwarding waits for the head of the holder's answer: three leases, and at least
/// 10 s. A holder stopped (or cut off) for longer has lost its stores to another node by then,
/// so the wait is bounded; an answer's body (an MCP stream's included) then comes as it comes.
fn answer_wait(ttl: Duration) -> Duration {
    (ttl * 3).max(Duration::from_secs(10))
}

/// The `host:port` an advertised `http://host[:port]` URL names (port 80 if it names none), or
/// why it names none.
fn authority_of(url: &str) -> std::result::Result<String, String> {
    let invalid = || {
        format!(
            "{url:?} is not http://HOST:PORT (the host and port the other nodes reach this node at over plain HTTP, with no path)"
        )
    };
    let rest = url.strip_prefix("http://").ok_or_else(invalid)?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let parsed: axum::http::uri::Authority = authority.parse().map_err(|_| invalid())?;
    if parsed.host().is_empty() || authority.contains('@') || !path.trim_end_matches('/').is_empty()
    {
        return Err(invalid());
    }
    Ok(format!(
        "{}:{}",
        parsed.host(),
        parsed.port_u16().unwrap_or(80)
    ))
}

async fn send(
    url: &str,
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
    proof: &str,
    wait: Duration,
) -> std::result::Result<Response, Unanswered> {
    let authority = authority_of(url).map_err(Unanswered::NotSent)?;
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let stream = tokio::time::timeout(CONNECT_WAIT, tokio::net::TcpStream::connect(&authority))
        .await
        .map_err(|_| {
            Unanswered::NotSent(format!(
                "no connection to {authority} within {CONNECT_WAIT:?}"
            ))
        })?
        .map_err(|e| Unanswered::NotSent(format!("connecting to {authority}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| Unanswered::NotSent(e.to_string()))?;
    // The connection runs until the answer is all read, or dropped (its client gone).
    tokio::spawn(connection);
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = hyper::Request::builder()
        .method(parts.method.clone())
        .uri(target)
        .header(axum::http::header::HOST, host);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name.as_str()) && name.as_str() != FORWARDED {
            request = request.header(name, value);
        }
    }
    let request = request
        .header(FORWARDED, proof)
        .body(http_body_util::Full::new(body))
        .map_err(|e| Unanswered::NotSent(e.to_string()))?;
    let answer = tokio::time::timeout(wait, sender.send_request(request))
        .await
        .map_err(|_| {
            Unanswered::MaybeApplied(format!("no answer from {authority} within {wait:?}"))
        })?
        .map_err(|e| Unanswered::MaybeApplied(e.to_string()))?;
    let (mut head, body) = answer.into_parts();
    let kept: Vec<HeaderName> = head
        .headers
        .keys()
        .filter(|name| hop_by_hop(name.as_str()))
        .cloned()
        .collect();
    for name in kept {
        head.headers.remove(name);
    }
    head.extensions = axum::http::Extensions::new();
    Ok(Response::from_parts(head, Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::store_of;

    #[test]
    fn the_store_a_path_names_is_read_off_it() {
        assert_eq!(store_of("/v1/stores/notes/view").as_deref(), Some("notes"));
        assert_eq!(store_of("/v1/stores/notes/mcp/x").as_deref(), Some("notes"));
        assert_eq!(
            store_of("/v1/stores/notes").as_deref(),
            Some("notes"),
            "a delete is served by the holder"
        );
        assert_eq!(store_of("/v1/stores"), None);
        assert_eq!(
            store_of("/v1/memory_stores/memstore_notes/memories").as_deref(),
            Some("notes")
        );
        assert_eq!(store_of("/v1/memory_stores"), None);
        assert_eq!(store_of("/v1/memory_stores/other"), None);
        assert_eq!(store_of("/v1/view"), None);
    }
}
