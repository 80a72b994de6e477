//! Replicas of a store in object storage: the log shipped as sealed segments and checkpoints
//! (`mnemo replicate`, once or as it changes; `mnemo serve --replicate`, from the server, by
//! [`shipper`]), a store rebuilt from them (`mnemo restore`), a replica verified where it lies
//! (`mnemo verify --from`) and followed by a read-only copy ([`follower`], `mnemo serve
//! --follow`). Compiled with the `replicate` cargo feature.
//!
//! A replica at `URL` (`s3://bucket/prefix` or `file:///dir`) holds, under the URL's path,
//! `segments/` (events as the store keeps them, each object written once with a create that
//! fails if the name is taken; compaction merges back-to-back ones), `checkpoints/` (one per
//! shipment) and `head` (the latest checkpoint); the names and bytes are written down once, in
//! `docs/formats.md` ("Replica objects").
//!
//! Shipping resumes from the segments themselves: the next segment starts after the last one
//! listed, so a shipment cut anywhere (after a segment, before its checkpoint) goes on with no
//! gap and no duplicate. Each shipment then merges small segments into larger ones
//! ([`compaction`]); a reader takes the widest segment starting at a seq and sets aside those it
//! covers, so a merge cut anywhere leaves no gap and no double. Before it ships, it proves the
//! replica is this store's: the replica's last event must be the store's event of that seq,
//! byte for byte. A restore checks the chain
//! rules over every record it fetches (dense seqs, links, payload and chain hashes), checks the
//! head checkpoint against the chain, and replays the whole log (`verify`) before it calls the
//! new store whole. It writes every event a redaction names erased, whatever its segment holds
//! ([`restore::Stale`] names such segments), and with a trusted key ([`Replica::trusting`]) takes only a
//! head that key signed, and nothing past it. Every object under the prefix is read or named:
//! a segment a merged one covers must hold exactly the records of its range (checked against
//! the segment covering it; one that holds erased content is a [`restore::Stale`]), events past the head
//! checkpoint are checked against the chain and named ([`Restored::beyond`]), and partial
//! objects are named. Objects nested under `segments/` or `checkpoints/`, an object beside
//! `segments/`, `checkpoints/`, `head` and [`REWRITES`], a [`REWRITES`] object that lists
//! anything but segments, and a covered segment that is not its range's records, are damage.
//!
//! Where each part lives: this module the replica itself (the object-store adapter over S3 or a
//! directory, its listing and the reader of its segments); [`shipping`] a shipment;
//! [`restore`] a rebuild and what it checks; [`shipper`] and [`follower`] the threads that ship
//! and follow continuously; [`segment`], [`checkpoint`], [`compaction`] and [`key`] the objects.

pub mod checkpoint;
pub mod compaction;
pub(crate) mod flows;
pub mod follower;
pub mod key;
pub(crate) mod restore;
pub mod segment;
pub mod shipper;
mod shipping;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::Seq;
use crate::store::failpoint::{Failpoint, Failpoints};
use crate::store::log::{Durability, Head, Store};
pub use restore::Restored;
pub(crate) use restore::fetch;
#[cfg(feature = "testing")]
pub use shipping::ship;
pub(crate) use shipping::ship_upto;
pub use shipping::{REWRITES, Shipped};

/// Writes `text` and a newline to stderr, where the replica's threads and flows say what they
/// did; a stderr that is closed loses the line.
pub(crate) fn tell(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Tells stderr of each segment a shipment of `mnemo replicate` wrote.
pub(crate) fn tell_sealed(first: Seq, last: Seq) {
    tell(format_args!(
        "mnemo replicate: shipped events {first} to {last}"
    ));
}

/// A replica: an object store and the prefix under which it lies.
pub struct Replica {
    url: String,
    objects: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
    /// The directory of a `file://` replica, whose objects must be regular files.
    local: Option<PathBuf>,
    /// The verifier key the head checkpoint must be signed by, if one is trusted
    /// ([`Replica::trusting`]).
    trust: Option<String>,
    /// Each write or removal of an object passes one step ([`Failpoint::ReplicaObject`]).
    failpoints: Failpoints,
    /// How many segments of one level a compaction merges ([`compaction::FANOUT`]).
    fanout: usize,
}

/// The largest segment object read: 8 MiB of records and the largest record a store keeps.
pub const SEGMENT_OBJECT_MAX: u64 = 256 * 1024 * 1024;

/// The largest checkpoint object read (a few lines and a signature).
const CHECKPOINT_OBJECT_MAX: u64 = 64 * 1024;

/// A replica's segments as a reader takes them ([`Replica::listing`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Listing {
    /// The segments read, in seq order, each `(first, last, name)`: from event 1, no gap.
    segments: Vec<(Seq, Seq, String)>,
    /// The segments a merged one among them covers, never restored from: what a compaction has
    /// yet to remove. A restore checks each against the segment covering it
    /// ([`check_covered`]).
    covered: Vec<String>,
}

/// A segment's records, each with its seq.
type Records = Vec<(Seq, Vec<u8>)>;

/// Reads a replica's records in seq order, segment by segment, from a listing, up to an event.
/// A segment that vanished since it was listed (a compaction merged it, then removed it) is no
/// damage: the replica is listed again and the segment that holds the next event now is read,
/// from that event on, with the same checks.
struct Reader<'r> {
    replica: &'r Replica,
    listed: Vec<(Seq, Seq, String)>,
    next: Seq,
    end: Seq,
}

impl<'r> Reader<'r> {
    /// A reader of `listed` (a listing of `replica`) from event `from` to event `end`.
    fn new(replica: &'r Replica, listed: Vec<(Seq, Seq, String)>, from: Seq, end: Seq) -> Self {
        Reader {
            replica,
            listed,
            next: from,
            end,
        }
    }

    /// The segment that holds `next` in `listed`, if one does.
    fn holding(listed: &[(Seq, Seq, String)], next: Seq) -> Option<(Seq, Seq, String)> {
        let at = listed.partition_point(|(_, last, _)| *last < next);
        listed
            .get(at)
            .filter(|(first, _, _)| *first <= next)
            .cloned()
    }

    /// The next segment's name and its records from the next event on (none past `end`), or
    /// `None` once `end` is passed.
    fn next_segment(&mut self) -> Result<Option<(String, Records)>> {
        if self.next > self.end {
            return Ok(None);
        }
        let Some((first, last, name)) = Self::holding(&self.listed, self.next) else {
            return Ok(None);
        };
        let (first, last, name, bytes) = match self.replica.get(&name)? {
            Some(bytes) => (first, last, name, bytes),
            None => {
                self.listed = self.replica.segments()?;
                let (first, last, found) =
                    Self::holding(&self.listed, self.next).ok_or_else(|| {
                        Error::damaged(format!(
                            "replica segment {name} vanished, and no segment holds event {} now",
                            self.next
                        ))
                    })?;
                let bytes = self
                    .replica
                    .get(&found)?
                    .ok_or_else(|| Error::damaged(format!("replica segment {found} vanished")))?;
                (first, last, found, bytes)
            }
        };
        let mut records = segment::decode(&name, &bytes, (first, last))?;
        let (next, end) = (self.next, self.end);
        records.retain(|(seq, _)| *seq >= next && *seq <= end);
        self.next = Seq(last.0 + 1);
        Ok(Some((name, records)))
    }
}

impl Replica {
    /// The replica at `url`: `s3://bucket/prefix` (endpoint and credentials from the standard
    /// `AWS_*` variables, `AWS_ENDPOINT_URL` included; an `http://` endpoint is allowed as given)
    /// or `file:///absolute/dir` (created if `create`).
    pub fn open(url: &str, create: bool) -> Result<Replica> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("the replica's runtime", e))?;
        let (objects, local) = objects_at(url, create)?;
        Ok(Replica {
            url: url.to_string(),
            objects,
            runtime,
            local,
            trust: None,
            failpoints: Failpoints::default(),
            fanout: compaction::FANOUT,
        })
    }

    /// The replica, read only through a head checkpoint that the verifier key `vkey` signed: an
    /// unsigned head, or one another key signed, is damage ([`Error::ReplicaDamaged`]), so
    /// whoever holds the bucket cannot append events a restore or a follower would take. A
    /// restore then reaches no further than that head. `vkey` that is no verifier key is
    /// [`Error::InvalidArgument`].
    pub fn trusting(mut self, vkey: &str) -> Result<Replica> {
        key::verifier(vkey)?;
        self.trust = Some(vkey.trim().to_string());
        Ok(self)
    }

    /// The replica, its compactions merging `fanout` segments of a level at once rather than
    /// [`compaction::FANOUT`] (at least 2): for tests that reach the higher levels in a few
    /// shipments.
    #[doc(hidden)]
    pub fn merging(mut self, fanout: usize) -> Replica {
        self.fanout = fanout.max(2);
        self
    }

    /// The verifier key the replica's head must be signed by, if one is trusted.
    pub fn trusted_key(&self) -> Option<&str> {
        self.trust.as_deref()
    }

    /// Refuses a `file://` replica that would lie in or around the store at `store` (which
    /// need not exist yet).
    pub fn check_apart(&self, store: &Path) -> Result<()> {
        match &self.local {
            Some(dir) => apart(&self.url, dir, store),
            None => Ok(()),
        }
    }

    /// [`check_apart`](Self::check_apart) for the replica at `url` before it is opened (so
    /// that nothing is created for a replica that is refused).
    pub fn check_url_apart(url: &str, store: &Path) -> Result<()> {
        match url.strip_prefix("file://") {
            Some(dir) => apart(url, Path::new(dir), store),
            None => Ok(()),
        }
    }

    /// The replica's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let cap = match name.starts_with("segments/") {
            true => SEGMENT_OBJECT_MAX,
            false => CHECKPOINT_OBJECT_MAX,
        };
        // A file:// replica's object must be a regular file: a pipe would block the read, a
        // link could point anywhere.
        if let Some(dir) = &self.local {
            match std::fs::symlink_metadata(dir.join(name)) {
                Ok(meta) if !meta.is_file() => {
                    return Err(Error::damaged(format!(
                        "replica object {name} is not a regular file"
                    )));
                }
                _ => {}
            }
        }
        let path = ObjectPath::from(name);
        self.runtime.block_on(async {
            match self.objects.head(&path).await {
                Ok(meta) if meta.size > cap => {
                    return Err(Error::damaged(format!(
                        "replica object {name} is {} bytes, more than such an object can be ({cap})",
                        meta.size
                    )));
                }
                Ok(_) => {}
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(failed(&self.url, &e)),
            }
            match self.objects.get(&path).await {
                Ok(got) => Ok(Some(
                    got.bytes()
                        .await
                        .map_err(|e| failed(&self.url, &e))?
                        .to_vec(),
                )),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(failed(&self.url, &e)),
            }
        })
    }

    /// This replica's failpoints, for fault-injection tests: each write or removal of an
    /// object is one step.
    #[doc(hidden)]
    pub fn failpoints(&self) -> &Failpoints {
        &self.failpoints
    }

    fn put(&self, name: &str, bytes: Vec<u8>, mode: PutMode) -> Result<()> {
        self.failpoints.check(Failpoint::ReplicaObject)?;
        let path = ObjectPath::from(name);
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let payload = PutPayload::from(bytes);
        let put = self.runtime.block_on(async {
            match self.objects.put_opts(&path, payload.clone(), options).await {
                // A store without conditional puts: look first (a race with another shipper
                // to the same replica is then possible; ship from one store at a time).
                Err(
                    object_store::Error::NotImplemented { .. }
                    | object_store::Error::NotSupported { .. },
                ) => match self.objects.head(&path).await {
                    Ok(_) => Err(object_store::Error::AlreadyExists {
                        path: path.to_string(),
                        source: "the object exists".into(),
                    }),
                    Err(object_store::Error::NotFound { .. }) => {
                        self.objects.put(&path, payload).await
                    }
                    Err(e) => Err(e),
                },
                done => done,
            }
        });
        put.map(|_| ()).map_err(|e| match e {
                object_store::Error::AlreadyExists { .. } => Error::damaged(format!(
                    "the replica at {} already holds {name}: another process is shipping to it; ship from one store at a time",
                    self.url
                )),
                e => failed(&self.url, &e),
            })
    }

    /// The replica's segments in seq order, each `(first, last, name)`: they run from event 1
    /// with no gap, the segments a merged one covers left out ([`Listing`]).
    fn segments(&self) -> Result<Vec<(Seq, Seq, String)>> {
        Ok(self.listing()?.segments)
    }

    /// The replica's segments, resolved: where a merged segment covers others (a compaction
    /// wrote it and has yet to remove them, or was cut before it could), the widest segment
    /// starting at a seq is taken and those it covers are set apart. A segment that overlaps
    /// another only in part, or a gap, is damage: a merge always covers whole segments.
    fn listing(&self) -> Result<Listing> {
        if let Some(dir) = &self.local {
            if std::fs::symlink_metadata(dir.join("segments")).is_ok_and(|m| !m.is_dir()) {
                return Err(Error::damaged(format!(
                    "the replica at {}: segments is not a directory (a link is not followed)",
                    self.url
                )));
            }
        }
        let mut all: Vec<(Seq, Seq, String)> = Vec::new();
        for path in self.names("segments")? {
            let name = path.strip_prefix("segments/").unwrap_or(&path);
            let Some((first, last)) = segment::parse_name(name) else {
                return Err(Error::damaged(format!(
                    "the replica at {} holds segments/{name}, which is not a segment's name",
                    self.url
                )));
            };
            all.push((first, last, path.clone()));
        }
        // By first seq, the widest first: the one a reader takes comes before those it covers.
        all.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut listing = Listing::default();
        let mut next = Seq(1);
        for (first, last, name) in all {
            if last < next {
                listing.covered.push(name);
                continue;
            }
            if first != next {
                return Err(Error::damaged(format!(
                    "the replica at {} has a gap or an overlap: {name} starts at event {first}, where event {next} was next",
                    self.url
                )));
            }
            next = Seq(last.0 + 1);
            listing.segments.push((first, last, name));
        }
        Ok(listing)
    }

    /// The object `name` (such as `head` or `segments/…`), if there is one: for tools and tests
    /// that look at a replica object by object.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        self.get(name)
    }

    /// Writes the object `name`, replacing one there (for tests that tamper with a replica).
    pub fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        self.put(name, bytes, PutMode::Overwrite)
    }

    /// Removes the object `name`, if there is one.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.failpoints.check(Failpoint::ReplicaObject)?;
        let path = ObjectPath::from(name);
        match self.runtime.block_on(self.objects.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed(&self.url, &e)),
        }
    }

    /// The names of the objects directly under `dir` (such as `segments`), sorted. Anything
    /// nested under it is damage.
    pub fn names(&self, dir: &str) -> Result<Vec<String>> {
        if let Some(root) = &self.local {
            return self.local_names(&root.join(dir), dir);
        }
        let prefix = ObjectPath::from(dir);
        let listed = self
            .runtime
            .block_on(self.objects.list_with_delimiter(Some(&prefix)))
            .map_err(|e| failed(&self.url, &e))?;
        for nested in &listed.common_prefixes {
            // Some object stores keep a "directory" once its objects are gone: only one that
            // holds an object is a leftover.
            if self.holds_objects(nested, 0)? {
                return Err(Error::damaged(format!(
                    "the replica at {} holds {nested}/ under {dir}/, where only its own objects lie (nothing is nested there): another writer left it",
                    self.url
                )));
            }
        }
        let mut names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(|n| format!("{dir}/{n}")))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Whether anything lies under `prefix` (an object, or a prefix nested more than a few
    /// levels deep, which no object store keeps empty on its own).
    fn holds_objects(&self, prefix: &ObjectPath, depth: usize) -> Result<bool> {
        let listed = self
            .runtime
            .block_on(self.objects.list_with_delimiter(Some(prefix)))
            .map_err(|e| failed(&self.url, &e))?;
        // A directory marker (an empty object named as the prefix) is no object.
        let marker = |o: &object_store::ObjectMeta| o.size == 0 && o.location == *prefix;
        if listed.objects.iter().any(|o| !marker(o)) {
            return Ok(true);
        }
        if depth >= 4 {
            return Ok(!listed.common_prefixes.is_empty());
        }
        for nested in &listed.common_prefixes {
            if self.holds_objects(nested, depth + 1)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`names`](Self::names) of a `file://` replica, read from the directory itself: the
    /// object store's listing skips some names (those ending in `#` and digits, its own
    /// temporary files) and fails on others, and every entry must be an object of the replica
    /// or be named as damage. Each must be a regular file (not a link, a pipe or a directory)
    /// with a name of printable UTF-8.
    fn local_names(&self, path: &Path, dir: &str) -> Result<Vec<String>> {
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(failed(&self.url, &e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| failed(&self.url, &e))?;
            let raw = entry.file_name();
            let shown = raw.to_string_lossy();
            if is_partial(&raw) {
                // A write of the object store under way (or cut): see `partial_objects`.
                continue;
            }
            let Some(name) = raw.to_str().filter(|n| !n.chars().any(char::is_control)) else {
                return Err(Error::damaged(format!(
                    "the replica at {} holds {dir}/{shown:?}, whose name is not one of its objects' (not printable UTF-8): another writer left it",
                    self.url
                )));
            };
            let kind = entry.file_type().map_err(|e| failed(&self.url, &e))?;
            if kind.is_dir() {
                return Err(Error::damaged(format!(
                    "the replica at {} holds {dir}/{name}/, where only its own objects lie (nothing is nested there): another writer left it",
                    self.url
                )));
            }
            if !kind.is_file() {
                return Err(Error::damaged(format!(
                    "the replica at {} holds {dir}/{name}, which is not a regular file (a link or a pipe is no object of the replica)",
                    self.url
                )));
            }
            names.push(format!("{dir}/{name}"));
        }
        names.sort();
        Ok(names)
    }

    /// Refuses a replica whose prefix holds anything but its own objects (`segments/`,
    /// `checkpoints/`, `head`, [`REWRITES`], and a `file://` replica's partial objects): an
    /// object beside them is no part of what a restore or `verify --from` proves, so it is
    /// damage that names it, as a stray object among the segments is.
    fn check_root(&self) -> Result<()> {
        let stray = |name: &str| {
            Error::damaged(format!(
                "the replica at {} holds {name}, which is no object of a replica (only segments/, checkpoints/, head and {REWRITES} lie there, and nothing is read from anything else): another writer left it; remove it, or keep the replica under a prefix of its own",
                self.url
            ))
        };
        if let Some(root) = &self.local {
            let entries = match std::fs::read_dir(root) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(failed(&self.url, &e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| failed(&self.url, &e))?;
                let raw = entry.file_name();
                let kind = entry.file_type().map_err(|e| failed(&self.url, &e))?;
                let name = raw.to_string_lossy();
                let own = match &*name {
                    "segments" | "checkpoints" if !kind.is_dir() => {
                        return Err(Error::damaged(format!(
                            "the replica at {}: {name} is not a directory (a link is not followed)",
                            self.url
                        )));
                    }
                    "segments" | "checkpoints" => true,
                    "head" => true,
                    n if n == REWRITES => true,
                    _ => is_partial(&raw) && kind.is_file(),
                };
                if !own {
                    let shown = match kind.is_dir() {
                        true => format!("{:?}", format!("{name}/")),
                        false => format!("{name:?}"),
                    };
                    return Err(stray(&shown));
                }
            }
            return Ok(());
        }
        let listed = self
            .runtime
            .block_on(self.objects.list_with_delimiter(None))
            .map_err(|e| failed(&self.url, &e))?;
        for object in &listed.objects {
            let name = object.location.as_ref();
            // A directory marker of the prefix itself is no object.
            if name.is_empty() || (object.size == 0 && name.ends_with('/')) {
                continue;
            }
            if name != "head" && name != REWRITES {
                return Err(stray(&format!("{name:?}")));
            }
        }
        for nested in &listed.common_prefixes {
            let name = nested.as_ref();
            if name != "segments" && name != "checkpoints" && self.holds_objects(nested, 0)? {
                return Err(stray(&format!("{:?}", format!("{name}/"))));
            }
        }
        Ok(())
    }

    /// The partial objects of a `file://` replica, under `segments/`, `checkpoints/` or beside
    /// them (`head` and [`REWRITES`] are written so too): files
    /// named `NAME#DIGITS`, which the object store writes and renames into place, so one is
    /// there while a shipment writes and stays if it was killed (or another writer put it
    /// there). They are never read; a restore's [`Restored::notes`] name them.
    pub fn partial_objects(&self) -> Result<Vec<String>> {
        let Some(root) = &self.local else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for dir in ["segments", "checkpoints", ""] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries {
                let raw = entry.map_err(|e| failed(&self.url, &e))?.file_name();
                if is_partial(&raw) {
                    found.push(match dir {
                        "" => raw.to_string_lossy().into_owned(),
                        dir => format!("{dir}/{}", raw.to_string_lossy()),
                    });
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// The replica's head checkpoint, if it has one: the origin name and the head. With a
    /// trusted key ([`Replica::trusting`]) the head must carry its valid signature.
    pub fn head(&self) -> Result<Option<(String, Head)>> {
        let Some(bytes) = self.get("head")? else {
            return Ok(None);
        };
        if let Some(vkey) = &self.trust {
            key::check(&bytes, vkey, "the replica's head checkpoint").map_err(|why| {
                Error::damaged(format!(
                    "{why}: whoever holds the bucket may have written it, so nothing of the replica is taken (the owner signs every checkpoint once `mnemo key create` made the store's key)"
                ))
            })?;
        }
        checkpoint::decode("head", &bytes).map(Some)
    }
}

/// Whether a file name is a partial object of a `file://` replica: `NAME#DIGITS`.
fn is_partial(name: &std::ffi::OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    match bytes.iter().rposition(|b| *b == b'#') {
        Some(at) => {
            at > 0 && at + 1 < bytes.len() && bytes[at + 1..].iter().all(u8::is_ascii_digit)
        }
        None => false,
    }
}

/// Refuses the replica directory `dir` (of `url`) if it lies in or around `store`.
fn apart(url: &str, dir: &Path, store: &Path) -> Result<()> {
    let (dir, store) = (resolved(dir), resolved(store));
    if dir.starts_with(&store) || store.starts_with(&dir) {
        return Err(Error::InvalidArgument(format!(
            "the replica at {url} would lie in or around the store's own directory; put it elsewhere (another disk, ideally)"
        )));
    }
    Ok(())
}

/// `path` with its links resolved as far as it exists (the rest joined as given).
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The object store at `url` (`s3://bucket/prefix`, endpoint and credentials from the standard
/// `AWS_*` variables, `AWS_ENDPOINT_URL` included, an `http://` endpoint allowed as given; or
/// `file:///absolute/dir`, created if `create`), and for `file://` its directory.
pub(crate) fn objects_at(
    url: &str,
    create: bool,
) -> Result<(Arc<dyn ObjectStore>, Option<PathBuf>)> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "the object store URL {url:?} {why}; give s3://bucket/prefix or file:///absolute/dir"
        ))
    };
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("names no bucket"));
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let endpoint = std::env::var("AWS_ENDPOINT_URL")
            .or_else(|_| std::env::var("AWS_ENDPOINT"))
            .unwrap_or_default();
        if endpoint.starts_with("http://") {
            builder = builder.with_allow_http(true);
        }
        let s3 = builder.build().map_err(|e| failed(url, &e))?;
        let prefix = prefix.trim_matches('/');
        let objects: Arc<dyn ObjectStore> = match prefix.is_empty() {
            true => Arc::new(s3),
            false => Arc::new(PrefixStore::new(s3, prefix)),
        };
        return Ok((objects, None));
    }
    let dir = url
        .strip_prefix("file://")
        .ok_or_else(|| bad("is neither s3:// nor file://"))?;
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() || dir.components().any(|c| c.as_os_str() == "..") {
        return Err(bad("does not name an absolute directory"));
    }
    if create {
        // Something not a directory in the way is the URL's fault, not the store's.
        if std::fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::InvalidArgument(format!(
                "the object store {url} names {}, which is not a directory: name a directory (made if missing)",
                dir.display()
            )));
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    } else if !dir.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "there is no replica at {url}: {} is not a directory",
            dir.display()
        )));
    }
    let objects = LocalFileSystem::new_with_prefix(&dir)
        .map_err(|e| failed(url, &e))?
        .with_fsync(true);
    Ok((Arc::new(objects), Some(dir)))
}

fn failed(url: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Replica {
        url: url.to_string(),
        cause: e.to_string(),
    }
}

/// The name a store's checkpoints give as their origin: its directory's name.
fn origin(store: &Path) -> String {
    store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into())
}
