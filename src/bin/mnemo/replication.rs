//! The replica commands of the CLI (part of the binary): `mnemo replicate`, `mnemo restore` and
//! `mnemo verify --from`, over the library's `Replica`, `Replication` and `SigningKey`.

pub use with::*;

mod with {
    use std::io::Write;
    use std::path::Path;
    use std::process::ExitCode;
    use std::time::Duration;

    use mnemo::MnemoClient;
    use mnemo::Seq;
    use mnemo::{Replica, Shipped, Shipping, SigningKey};

    use crate::{CliResult, verify::print_verify};

    /// `mnemo replicate --to URL [--once]`: with `interval`, runs until stopped, shipping
    /// whenever the store has changed (looked at every `interval` seconds).
    pub fn replicate(db: &Path, url: &str, interval: Option<f64>) -> CliResult {
        let Some(interval) = interval else {
            // A store a server holds is shipped by that server, as the read commands ask it.
            // Refused before anything is made for it (a replica in the store's own directory).
            Replica::check_url_apart(url, db)?;
            let local = || {
                let reader = reader(db)?;
                let replica = Replica::open(url, true)?;
                let shipped = reader.ship_to(&replica, &mut |first, last| {
                    crate::print::tell(format_args!(
                        "mnemo replicate: shipped events {first} to {last}"
                    ));
                })?;
                print_shipped(&mut std::io::stdout().lock(), url, &shipped)?;
                Ok(ExitCode::SUCCESS)
            };
            let body = serde_json::json!({ "to": url });
            return crate::connect::change(
                db,
                &crate::connect::Remote::none(),
                mnemo::OPERATOR,
                &crate::connect::Change::Replicate(body),
                local,
            );
        };
        let interval = seconds(interval, "--interval")?;
        require_store(db)?;
        Replica::check_url_apart(url, db)?;
        let replica = Replica::open(url, true)?;
        let mut shipped_at: Option<Vec<FileState>> = None;
        let mut told_held = false;
        let mut wait = interval;
        loop {
            let now = files(db)?;
            if shipped_at.as_ref() != Some(&now) {
                // Each round reads a private copy, made while no process writes the store.
                let round = reader(db).and_then(|reader| {
                    reader.ship_to(&replica, &mut |first, last| {
                        crate::print::tell(format_args!(
                            "mnemo replicate: shipped events {first} to {last}"
                        ));
                    })
                });
                match round {
                    Ok(shipped) => {
                        if shipped.segments > 0 || shipped_at.is_none() {
                            print_shipped(&mut std::io::stdout().lock(), url, &shipped)?;
                        }
                        shipped_at = Some(now);
                        told_held = false;
                        wait = interval;
                    }
                    Err(mnemo::Error::Locked { .. }) => {
                        if !told_held {
                            let who = match db.join(mnemo::SERVER_FILE).is_file() {
                                true => format!(
                                    "a mnemo serve holds {} (one that clients started stops once idle; one meant to stay up replicates as it goes if started with --replicate {url})",
                                    db.display()
                                ),
                                false => format!("another process is writing {}", db.display()),
                            };
                            crate::print::tell(format_args!(
                                "mnemo replicate: {who}; shipping once it lets go"
                            ));
                            told_held = true;
                        }
                    }
                    Err(e @ (mnemo::Error::Replica { .. } | mnemo::Error::Io { .. })) => {
                        wait = (wait * 2).clamp(interval, Shipping::MAX_BACKOFF);
                        crate::print::tell(format_args!(
                            "mnemo replicate: shipping to {url} failed ({e}); trying again in {:.0?}",
                            wait
                        ));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            std::thread::sleep(wait);
        }
    }

    /// A private read-only copy of the store at `db`, for shipping; [`mnemo::Error::Locked`]
    /// when a server holds it (that server ships it), as when its lock is held.
    fn reader(db: &Path) -> mnemo::Result<MnemoClient> {
        let reader = MnemoClient::builder(db).existing().read_only().open()?;
        match reader.server_url() {
            Some(_) => Err(mnemo::Error::Locked {
                path: db.to_path_buf(),
            }),
            None => Ok(reader),
        }
    }

    /// [`mnemo::Error::NotFound`] unless `db` holds a store (its `conf` or `db` file), checked
    /// without opening it.
    fn require_store(db: &Path) -> mnemo::Result<()> {
        let holds = |name: &str| std::fs::symlink_metadata(db.join(name)).is_ok();
        if holds("conf") || holds("db") {
            return Ok(());
        }
        Err(mnemo::Error::NotFound {
            path: db.to_path_buf(),
        })
    }

    fn print_shipped(out: &mut dyn Write, url: &str, shipped: &Shipped) -> std::io::Result<()> {
        out.write_all(shipped.summary(url).as_bytes())?;
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
        if let Some((url, interval)) = replicate {
            seconds(interval, "--replicate-interval")?;
            Replica::check_url_apart(url, db)?;
            Replica::open(url, true)?;
        }
        if let Some((url, interval)) = follow {
            seconds(interval, "--follow-interval")?;
            Replica::check_url_apart(url, db)?;
            Replica::open(url, false)?;
        }
        Ok(())
    }

    /// A file of the store as a shipment saw it: name, size and modification time.
    type FileState = (std::ffi::OsString, u64, Option<std::time::SystemTime>);

    /// The store's top-level files (what a write changes), to ship only after a change.
    fn files(db: &Path) -> std::io::Result<Vec<FileState>> {
        let mut listed = Vec::new();
        for entry in std::fs::read_dir(db)? {
            let entry = entry?;
            if entry.file_name() == mnemo::SERVER_FILE {
                continue;
            }
            let meta = entry.metadata()?;
            listed.push((entry.file_name(), meta.len(), meta.modified().ok()));
        }
        listed.sort();
        Ok(listed)
    }

    /// A replication beside a server (`mnemo serve --replicate URL`).
    pub struct Running(mnemo::Replication);

    /// Starts shipping the store `client` holds to `url`, every `interval` seconds at most,
    /// telling stderr about each shipment.
    pub fn start(
        client: &mnemo::MnemoClient,
        url: &str,
        interval: f64,
    ) -> Result<Running, Box<dyn std::error::Error>> {
        let interval = seconds(interval, "--replicate-interval")?;
        let replica = Replica::open(url, true)?;
        let url = url.to_string();
        let report = move |report: mnemo::ShipReport<'_>| match report {
            mnemo::ShipReport::Shipped(shipped, status) => crate::print::tell(format_args!(
                "mnemo serve: replicated events {} to {} to {url} ({} events behind)",
                shipped.from.0 + 1,
                shipped.head.seq,
                status.lag()
            )),
            mnemo::ShipReport::Failed(e, wait) => crate::print::tell(format_args!(
                "mnemo serve: shipping to {url} failed ({e}); trying again in {wait:.0?}"
            )),
        };
        let shipping = mnemo::Shipping { interval };
        Ok(Running(mnemo::Replication::start(
            client, replica, shipping, report,
        )?))
    }

    /// A follower beside a server (`mnemo serve --follow URL`).
    pub struct Follower(mnemo::Following);

    /// The replica at `url`, trusting the verifier key `key` (given, or else the one the store
    /// at `db` recorded, if it is there) to have signed its head.
    fn open_trusting(
        url: &str,
        key: Option<&str>,
        db: Option<&Path>,
    ) -> Result<Replica, Box<dyn std::error::Error>> {
        let replica = Replica::open(url, false)?;
        let recorded = match db {
            Some(db) if db.is_dir() => SigningKey::of(db).trusted()?,
            _ => None,
        };
        Ok(match key.map(str::to_string).or(recorded) {
            Some(vkey) => replica.trusting(&vkey)?,
            None => replica,
        })
    }

    /// Says on stderr what a restore found the replica still holding that it should not.
    fn tell_stale(command: &str, restored: &mnemo::Restored) {
        for note in restored.notes() {
            crate::print::tell(format_args!("mnemo {command}: WARNING: {note}"));
        }
    }

    /// Restores the store at `db` from the replica at `url` if it is new (missing or empty);
    /// records the key it trusts (`--key`, which a store that records another refuses).
    pub fn prepare_follower(
        db: &Path,
        url: &str,
        key: Option<&str>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let empty = std::fs::read_dir(db).map_or(true, |mut entries| entries.next().is_none());
        let replica = open_trusting(url, key, (!empty).then_some(db))?;
        if empty {
            let restored = replica.restore(db, None)?;
            tell_stale("serve", &restored);
            crate::print::tell(format_args!(
                "mnemo serve: restored {} from {url} (checkpoint {}) to follow it",
                db.display(),
                restored.head
            ));
        }
        if let Some(vkey) = replica.trusted_key() {
            SigningKey::of(db).trust(vkey)?;
        }
        Ok(())
    }

    /// Starts following `url` into the store `client` holds, every `interval` seconds.
    pub fn follow(
        client: &mnemo::MnemoClient,
        url: &str,
        interval: f64,
    ) -> Result<Follower, Box<dyn std::error::Error>> {
        let interval = seconds(interval, "--follow-interval")?;
        // The key prepare_follower recorded, if any: every head taken must carry its signature.
        let replica = open_trusting(url, None, Some(client.path()))?;
        let url = url.to_string();
        let report = move |looked: Result<&mnemo::FollowerStatus, &mnemo::Error>| match looked {
            Ok(status) => crate::print::tell(format_args!(
                "mnemo serve: took events up to {} from {url}",
                status.head
            )),
            Err(e) => crate::print::tell(format_args!(
                "mnemo serve: following {url} failed ({e}); trying again"
            )),
        };
        Ok(Follower(mnemo::Following::start(
            client, replica, interval, report,
        )?))
    }

    impl Follower {
        /// What `GET /v1/replication` answers on a follower.
        pub fn view(&self) -> mnemo::ReplicationView {
            let status = self.0.watcher();
            mnemo::ReplicationView(std::sync::Arc::new(move || status().to_json()))
        }

        /// Stops following (once the look under way has finished).
        pub fn stop(self) {
            drop(self.0);
        }
    }

    impl Running {
        /// What `GET /v1/replication` answers.
        pub fn view(&self) -> mnemo::ReplicationView {
            let status = self.0.watcher();
            mnemo::ReplicationView(std::sync::Arc::new(move || status().to_json()))
        }

        /// Ships what is left, then stops; an error if that last shipment failed.
        pub fn stop(self) -> Result<(), String> {
            let status = self.0.stop();
            match status.error {
                None => {
                    crate::print::tell(format_args!(
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
    }

    /// What `--expect` names, as SEQ:HASH: the value itself, or the checkpoint in a file (a
    /// replica's `head` or `checkpoints/SEQ`, such as an auditor kept), which with `key` must
    /// carry that key's valid signature.
    pub fn expected(value: &str, key: Option<&str>) -> Result<String, String> {
        let path = Path::new(value);
        match mnemo::Head::parse(value) {
            Ok(_) => return Ok(value.to_string()),
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
        Ok(head.to_string())
    }

    /// The largest checkpoint file read (a few lines and signatures).
    const CHECKPOINT_FILE_MAX: u64 = 64 * 1024;

    /// `mnemo restore --from URL --db NEW [--at SEQ] [--key VKEY]`: with a key, only a head it
    /// signed is taken, and the new store records the key (for `serve --follow`).
    pub fn restore(url: &str, db: &Path, at: Option<u64>, key: Option<&str>) -> CliResult {
        let replica = open_trusting(url, key, None)?;
        let restored = replica.restore(db, at.map(Seq))?;
        tell_stale("restore", &restored);
        if let Some(vkey) = replica.trusted_key() {
            SigningKey::of(db).trust(vkey)?;
        }
        let head = restored.head;
        crate::print::say(format_args!(
            "restored events 1 to {} from {url} into {}, verified\ncheckpoint: {head}",
            head.seq,
            db.display()
        ))?;
        Ok(ExitCode::SUCCESS)
    }

    /// `mnemo key create [--name NAME]`: the verifier key on stdout.
    pub fn key_create(db: &Path, name: Option<&str>) -> CliResult {
        require_store(db)?;
        let key = SigningKey::of(db);
        let vkey = key.create(name)?;
        let name = vkey.split('+').next().unwrap_or_default();
        crate::print::tell(format_args!(
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
    pub fn verify(url: &str, as_json: bool, expect: Option<&str>, key: Option<&str>) -> CliResult {
        let expect = expect.map(mnemo::Head::parse).transpose()?;
        if let Some(vkey) = key {
            // A key that is not one is a bad argument (exit 2), not a finding about the replica.
            SigningKey::check_verifier(vkey)?;
        }
        let replica = open_trusting(url, key, None)?;
        let private = tempfile::tempdir()?;
        let db = private.path().join("replica");
        // With a key, a replica its owner did not sign is not looked at further.
        let restored = match replica.restore(&db, None) {
            Ok(restored) => restored,
            Err(mnemo::Error::ReplicaDamaged { what } | mnemo::Error::Corrupt { what }) => {
                if as_json {
                    crate::print::say(format_args!(
                        "{}",
                        serde_json::json!({"status": "violation", "replica": url, "violation": what})
                    ))?;
                } else {
                    crate::print::say(format_args!(
                        "mnemo verify: VIOLATION\n  replica:    {url}\n  violation:  {what}"
                    ))?;
                }
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(e.into()),
        };
        let report = mnemo::MnemoClient::builder(&db)
            .read_only()
            .open()?
            .verify_with(expect)?;
        let label = Path::new(url);
        // What the replica still holds that a redaction erased is named, segment by segment.
        let notes = restored.notes();
        let mut sent = report.to_protocol(label);
        sent.notes.extend(notes);
        print_verify(label, as_json, &sent)
    }
}
