//! The replica commands' flows as calls a program makes too, each returning what the command
//! prints: a store shipped once ([`Replica::ship_store`], through the server that holds it, else
//! from a private copy) or in rounds as it changes ([`ShipRounds`],
//! [`Replica::ship_as_it_changes`]), a new store restored from a replica trusting a key
//! (`Replica::restore_new`, which also reads a fleet store's log), a replica verified in a
//! private store
//! (`Replica::verify_replica`, the same) and the checkpoint an auditor kept
//! read back ([`Replica::expected_head`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::restore::{Made, restore_with};
use super::{Replica, Restored, Shipped, fetch};
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::event::Seq;
use crate::model::protocol::VerifyReport;
use crate::replica::key::SigningKey;
use crate::replica::shipper::Shipping;
use crate::store::disk::SERVER_FILE;
use crate::store::log::{Head, Store};

/// The largest checkpoint file [`Replica::expected_head`] reads (a few lines and signatures).
const CHECKPOINT_FILE_MAX: u64 = 64 * 1024;

impl Replica {
    /// The replica at `url` for reading (a restore, a follower, a verification), trusting the
    /// verifier key `key` if given, else the one the store at `store` recorded (if that is a
    /// directory that records one): with a key, only a head it signed is taken.
    pub(crate) fn open_trusting(
        url: &str,
        key: Option<&str>,
        store: Option<&Path>,
    ) -> Result<Replica> {
        let replica = Replica::open(url, false)?;
        let recorded = match store {
            Some(db) if db.is_dir() => SigningKey::of(db).trusted()?,
            _ => None,
        };
        match key.map(str::to_string).or(recorded) {
            Some(vkey) => replica.trusting(&vkey),
            None => Ok(replica),
        }
    }

    /// `mnemo restore`: a new store at `db` restored from the replica at `url` (up to `at`, else
    /// its head), verified; with `key`, only a head that key signed is taken, and the new store
    /// records the key (which `mnemo serve --follow` then requires).
    pub(crate) fn restore_replica(
        url: &str,
        db: &Path,
        at: Option<Seq>,
        key: Option<&str>,
    ) -> Result<Restored> {
        let replica = Replica::open_trusting(url, key, None)?;
        let restored = replica.restore(db, at)?;
        if let Some(vkey) = replica.trusted_key() {
            SigningKey::of(db).trust(vkey)?;
        }
        Ok(restored)
    }

    /// `mnemo verify --from`: the replica at `url` restored into a private store and verified
    /// there (against `expect`, if given), as [`Replica::verify_made`] says; with `key`, a
    /// replica its owner did not sign is [`Error::ReplicaDamaged`]. `key` that is no verifier
    /// key is an [`Error::InvalidArgument`], a bad argument rather than a finding.
    pub(crate) fn verify_only_replica(
        url: &str,
        expect: Option<Head>,
        key: Option<&str>,
    ) -> Result<VerifyReport> {
        if let Some(vkey) = key {
            SigningKey::check_verifier(vkey)?;
        }
        let replica = Replica::open_trusting(url, key, None)?;
        let made = Made::to_verify(expect);
        Replica::verify_made(url, expect, |db| {
            restore_with(db, |building| fetch(&replica, building, None, made))
        })
    }

    /// The store `make` builds at the private path it is given, from the object store at `url`,
    /// verified there (against `expect`, if given): the report, labelled with `url`, with what
    /// the objects hold beside the log (what `make` restored says) in its notes, intact or not
    /// as it says. Damage `make` found (a record that breaks the chain, a head checkpoint that
    /// does not hold or is not signed by the trusted key) is [`Error::ReplicaDamaged`], naming
    /// what.
    pub(crate) fn verify_made(
        url: &str,
        expect: Option<Head>,
        make: impl FnOnce(&Path) -> Result<Restored>,
    ) -> Result<VerifyReport> {
        let private = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let db = private.path().join("replica");
        let restored = match make(&db) {
            Ok(restored) => restored,
            Err(Error::ReplicaDamaged { what } | Error::Corrupt { what }) => {
                return Err(Error::ReplicaDamaged { what });
            }
            Err(e) => return Err(e),
        };
        // The pass that verified the records as they were appended gave its report, unless
        // it found something or an expected head is to be checked: then the store made is
        // verified whole, which names the first violation.
        let report = match (restored.report.clone(), expect) {
            (Some(report), None) => report,
            _ => MnemoClient::builder(&db)
                .read_only()
                .open()?
                .verify_with(expect)?,
        };
        let mut sent = report.to_protocol(Path::new(url));
        // What the replica still holds that a redaction erased is named, segment by segment.
        sent.notes.extend(restored.notes());
        Ok(sent)
    }

    /// What `mnemo verify --expect` names: `value` as SEQ:HASH, or a checkpoint file (a
    /// replica's `head` or `checkpoints/SEQ`, such as an auditor kept), which with `key` must
    /// carry that key's valid signature. The error says what `--expect` takes.
    pub fn expected_head(value: &str, key: Option<&str>) -> std::result::Result<Head, String> {
        let path = Path::new(value);
        match Head::parse(value) {
            Ok(head) => return Ok(head),
            // Not a file either: what is wrong with it as SEQ:HASH.
            Err(e) if value.contains(':') && std::fs::metadata(path).is_err() => {
                return Err(format!("{e}; --expect also takes a checkpoint file"));
            }
            Err(_) => {}
        }
        let neither = || {
            format!(
                "--expect takes SEQ:HASH (as mnemo verify printed it) or a checkpoint file (a replica's head object, signed or not); {value:?} is neither"
            )
        };
        let meta = std::fs::metadata(path).map_err(|_| neither())?;
        if !meta.is_file() || meta.len() > CHECKPOINT_FILE_MAX {
            return Err(neither());
        }
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {value}: {e}"))?;
        let what = format!("the checkpoint file {value}");
        let head = Replica::checkpoint_head(&what, &bytes).map_err(|_| neither())?;
        if let Some(vkey) = key {
            SigningKey::check_verifier(vkey).map_err(|e| e.to_string())?;
            SigningKey::verify_signed(&bytes, vkey, &what)?;
        }
        Ok(head)
    }

    /// `mnemo replicate --once`: ships the store at `db` to the replica at `url` once and
    /// returns what [`Shipped::summary`] says of it. A store a live server holds is shipped by
    /// that server (`POST /v1/replicate`, as the operator, with the `client` feature); else
    /// from a private read-only copy, telling `sealed` the seqs of each segment written. A
    /// server found gone before anything was sent is left for the store, and one that started
    /// after the look is asked. A replica in the store's own directory is refused before
    /// anything is made for it.
    pub fn ship_store(db: &Path, url: &str, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<String> {
        Replica::check_url_apart(url, db)?;
        let mut local = || -> Result<String> {
            let reader = reader(db)?;
            let replica = Replica::open(url, true)?;
            Ok(reader.ship_to(&replica, sealed)?.summary(url))
        };
        #[cfg(feature = "client")]
        {
            use crate::client::discovery::ServerFile;
            if let Some(file) = ServerFile::find(db)? {
                return match served::ship(&file, url) {
                    Err(e) if e.is_unreachable() => local(),
                    answered => answered?,
                };
            }
            match local() {
                // A server that started after the look: ask it.
                Err(e @ (Error::Locked { .. } | Error::NotLocal { .. })) => {
                    match ServerFile::find(db)? {
                        Some(file) => served::ship(&file, url)?,
                        None => Err(e),
                    }
                }
                done => done,
            }
        }
        #[cfg(not(feature = "client"))]
        local()
    }
}

/// A private read-only copy of the store at `db`, for shipping; [`Error::Locked`] when a server
/// holds it (that server ships it), as when its lock is held.
fn reader(db: &Path) -> Result<MnemoClient> {
    let reader = MnemoClient::builder(db).existing().read_only().open()?;
    match reader.server_url() {
        Some(_) => Err(Error::Locked {
            path: db.to_path_buf(),
        }),
        None => Ok(reader),
    }
}

/// A shipment asked of the server that holds a store.
#[cfg(feature = "client")]
mod served {
    use serde_json::Value;

    use crate::client::discovery::ServerFile;
    use crate::client::remote::{AdminRequest, RemoteClient, RemoteError};
    use crate::error::{Error, Result};
    use crate::model::credential::OPERATOR;

    /// `POST /v1/replicate` to the server `file` names, as the operator: its `result`, or its
    /// refusal of the replica (an [`Error::InvalidArgument`], as the same shipment gets here);
    /// the outer error when the request failed or was refused otherwise.
    pub(super) fn ship(
        file: &ServerFile,
        url: &str,
    ) -> std::result::Result<Result<String>, RemoteError> {
        let client = RemoteClient::new(file.url.clone(), file.token.clone()).with_agent(OPERATOR);
        let body = serde_json::json!({ "to": url });
        let request = AdminRequest::Post {
            route: "/v1/replicate",
            body: &body,
        };
        let (status, body) = client.admin(request)?;
        let answer: Value = serde_json::from_slice(&body).map_err(|e| RemoteError::Protocol {
            url: client.url().to_string(),
            why: e.to_string(),
        })?;
        match (status, answer["result"].as_str(), answer["error"].as_str()) {
            (200..=299, Some(result), _) => Ok(Ok(result.to_string())),
            (400 | 404 | 409, _, Some(error)) => Ok(Err(Error::InvalidArgument(error.to_string()))),
            _ => Err(RemoteError::Refused {
                url: client.url().to_string(),
                status,
                reason: answer["error"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).into()),
            }),
        }
    }
}

/// A file of the store as a round saw it: name, size and modification time.
type FileState = (std::ffi::OsString, u64, Option<SystemTime>);

/// A store shipped in rounds as it changes (`mnemo replicate` without `--once`): each
/// [`round`](Self::round) looks at the store's files and, when a write changed them, ships from
/// a private copy made while no process writes the store. The caller waits
/// [`wait`](Self::wait) between rounds, which backs off while shipping fails.
pub(crate) struct ShipRounds {
    db: PathBuf,
    replica: Replica,
    interval: Duration,
    wait: Duration,
    /// The files as the last shipment saw them; `None` before the first.
    shipped_at: Option<Vec<FileState>>,
    /// Whether [`Round::Held`] was told since the last shipment.
    told_held: bool,
}

/// What one of [`ShipRounds`]' rounds did.
#[derive(Debug)]
pub(crate) enum Round {
    /// Nothing: the store has not changed since the last shipment, or is still held.
    Unchanged,
    /// A shipment; `first` for the first of these rounds (which `mnemo replicate` prints even
    /// when the replica was up to date).
    Shipped {
        /// What it shipped.
        shipped: Shipped,
        /// Whether it was the first shipment.
        first: bool,
    },
    /// Another process holds the store, told once until it lets go: its server when `server`
    /// (which ships it, if started with `--replicate`), else a writer.
    Held {
        /// Whether the holder is a `mnemo serve` (its server file is there).
        server: bool,
    },
    /// Shipping failed (the replica or the store's files); tried again after `wait`.
    Failed {
        /// Why.
        error: Error,
        /// The wait before the next round.
        wait: Duration,
    },
}

impl ShipRounds {
    /// Rounds shipping the store at `db` (which must exist) to the replica at `url` (which must
    /// lie apart from it, and is made if missing), looking every `interval`.
    pub(crate) fn new(db: &Path, url: &str, interval: Duration) -> Result<ShipRounds> {
        Store::require(db)?;
        Replica::check_url_apart(url, db)?;
        Ok(ShipRounds {
            db: db.to_path_buf(),
            replica: Replica::open(url, true)?,
            interval,
            wait: interval,
            shipped_at: None,
            told_held: false,
        })
    }

    /// The wait before the next round.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// One round, telling `sealed` the seqs of each segment written. An error that is neither
    /// the replica's nor the files' (the store gone, damaged) ends the rounds.
    pub(crate) fn round(&mut self, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<Round> {
        let now = files(&self.db).map_err(|e| Error::io(&self.db, e))?;
        if self.shipped_at.as_ref() == Some(&now) {
            return Ok(Round::Unchanged);
        }
        match reader(&self.db).and_then(|reader| reader.ship_to(&self.replica, sealed)) {
            Ok(shipped) => {
                let first = self.shipped_at.is_none();
                self.shipped_at = Some(now);
                self.told_held = false;
                self.wait = self.interval;
                Ok(Round::Shipped { shipped, first })
            }
            Err(Error::Locked { .. }) if self.told_held => Ok(Round::Unchanged),
            Err(Error::Locked { .. }) => {
                self.told_held = true;
                let server = self.db.join(SERVER_FILE).is_file();
                Ok(Round::Held { server })
            }
            Err(error @ (Error::Replica { .. } | Error::Io { .. })) => {
                self.wait = (self.wait * 2).clamp(self.interval, Shipping::MAX_BACKOFF);
                let wait = self.wait;
                Ok(Round::Failed { error, wait })
            }
            Err(e) => Err(e),
        }
    }
}

impl Replica {
    /// `mnemo replicate` without `--once`: ships the store at `db` (which must exist) to the
    /// replica at `url` (apart from it, made if missing) whenever its files have changed, looking
    /// every `interval`, for as long as the process runs. Each shipment's summary is written to
    /// `out` (the first one's even when the replica was up to date); stderr is told of each
    /// segment written, of another process holding the store (once, until it lets go: its server
    /// ships it if started with `--replicate`) and of a shipment that failed (tried again,
    /// waiting twice as long each time, up to 30 s). Returns only when writing to `out` failed
    /// (`Ok`, with that error), or with an error that ended the shipping (the store gone or
    /// damaged).
    pub fn ship_as_it_changes(
        db: &Path,
        url: &str,
        interval: Duration,
        out: &mut dyn std::io::Write,
    ) -> Result<std::io::Error> {
        let mut rounds = ShipRounds::new(db, url, interval)?;
        loop {
            match rounds.round(&mut super::tell_sealed)? {
                Round::Unchanged => {}
                Round::Shipped { shipped, first } => {
                    if shipped.segments > 0 || first {
                        let written = out
                            .write_all(shipped.summary(url).as_bytes())
                            .and_then(|()| out.flush());
                        if let Err(e) = written {
                            return Ok(e);
                        }
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
                    super::tell(format_args!(
                        "mnemo replicate: {who}; shipping once it lets go"
                    ));
                }
                Round::Failed { error, wait } => super::tell(format_args!(
                    "mnemo replicate: shipping to {url} failed ({error}); trying again in {wait:.0?}"
                )),
            }
            std::thread::sleep(rounds.wait());
        }
    }
}

/// The store's top-level files (what a write changes), to ship only after a change.
fn files(db: &Path) -> std::io::Result<Vec<FileState>> {
    let mut listed = Vec::new();
    for entry in std::fs::read_dir(db)? {
        let entry = entry?;
        if entry.file_name() == SERVER_FILE {
            continue;
        }
        let meta = entry.metadata()?;
        listed.push((entry.file_name(), meta.len(), meta.modified().ok()));
    }
    listed.sort();
    Ok(listed)
}

impl<'a> SigningKey<'a> {
    /// The signing key of the store at `store`, which must exist ([`Error::NotFound`] if it
    /// holds no store, checked without opening it): for `mnemo key create`.
    pub fn of_store(store: &'a Path) -> Result<SigningKey<'a>> {
        Store::require(store)?;
        Ok(SigningKey::of(store))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_a_call(dir: &Path) -> PathBuf {
        let db = dir.join("store");
        let client = MnemoClient::open(&db, "agent").expect("open");
        let server = crate::client::tool_server::MnemoMemoryToolServer::new(client);
        server.handle(&serde_json::json!({
            "type": "tool_use", "id": "t1", "name": "memory",
            "input": {"command": "create", "path": "/memories/a.md", "file_text": "a\n"},
        }));
        db
    }

    #[test]
    fn a_store_shipped_once_restores_and_verifies_from_its_replica() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = store_with_a_call(dir.path());
        let url = format!("file://{}", dir.path().join("replica").display());
        let mut segments = 0;
        let summary = Replica::ship_store(&db, &url, &mut |_, _| segments += 1).expect("ship");
        assert!(summary.starts_with("replicated events 1 to 1"), "{summary}");
        assert_eq!(segments, 1);
        let again = Replica::ship_store(&db, &url, &mut |_, _| {}).expect("ship again");
        assert!(again.contains("is up to date at event 1"), "{again}");

        let restored =
            Replica::restore_new(&url, &dir.path().join("new"), None, None).expect("restore");
        assert_eq!(restored.head.seq, Seq(1));
        let report = Replica::verify_replica(&url, Some(restored.head), None).expect("verify");
        assert!(report.is_intact(), "{report:?}");
        let head = restored.head.to_string();
        assert_eq!(Replica::expected_head(&head, None), Ok(restored.head));
        let neither = Replica::expected_head("nothing", None).expect_err("neither");
        assert!(neither.contains("--expect takes SEQ:HASH"), "{neither}");
    }

    #[test]
    fn verify_from_a_replica_reports_what_a_verify_of_the_restored_store_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = store_with_a_call(dir.path());
        let client = MnemoClient::open(&db, "agent").expect("open");
        let server = crate::client::tool_server::MnemoMemoryToolServer::new(client);
        for (i, input) in [
            serde_json::json!({"command": "view", "path": "/memories"}),
            serde_json::json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}),
            serde_json::json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
            serde_json::json!({"command": "view", "path": "/memories/c.md"}),
            serde_json::json!({"command": "delete", "path": "/memories/nothing.md"}),
        ]
        .into_iter()
        .enumerate()
        {
            server.handle(&serde_json::json!({
                "type": "tool_use", "id": format!("t{}", i + 2), "name": "memory", "input": input,
            }));
        }
        drop(server);
        // An event erased: the report names it, both ways.
        let selection = crate::client::redact::Selection {
            texts: vec!["nothing.md".into()],
            ..Default::default()
        };
        crate::client::redact::redact(&db, "operator", "a test", &selection).expect("redact");
        let url = format!("file://{}", dir.path().join("replica").display());
        Replica::ship_store(&db, &url, &mut |_, _| {}).expect("ship");
        // Made for its report alone: the pass over the appended records is the report.
        let fast = Replica::verify_replica(&url, None, None).expect("verify");
        assert!(fast.is_intact(), "{fast:?}");
        // The store restored and verified whole, as before.
        let restored = dir.path().join("restored");
        Replica::restore_new(&url, &restored, None, None).expect("restore");
        let mut whole = MnemoClient::builder(&restored)
            .read_only()
            .open()
            .expect("open")
            .verify_with(None)
            .expect("verify")
            .to_protocol(Path::new(&url));
        let mut fast = fast;
        for report in [&mut fast, &mut whole] {
            (report.elapsed_ms, report.events_per_sec, report.mb_per_sec) = (0.0, 0.0, 0.0);
        }
        assert_eq!(fast.redacted.len(), 1, "{fast:?}");
        assert_eq!(fast, whole);
    }

    #[test]
    fn rounds_ship_after_a_change_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = store_with_a_call(dir.path());
        let url = format!("file://{}", dir.path().join("replica").display());
        let mut rounds = ShipRounds::new(&db, &url, Duration::from_millis(10)).expect("rounds");
        match rounds.round(&mut |_, _| {}).expect("round") {
            Round::Shipped { shipped, first } => {
                assert!(first);
                assert_eq!(shipped.head.seq, Seq(1));
            }
            other => panic!("not shipped: {other:?}"),
        }
        assert!(matches!(
            rounds.round(&mut |_, _| {}).expect("round"),
            Round::Unchanged
        ));
        assert!(matches!(
            ShipRounds::new(&dir.path().join("none"), &url, Duration::from_secs(1)),
            Err(Error::NotFound { .. })
        ));
    }
}
