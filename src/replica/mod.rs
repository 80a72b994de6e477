//! Replicas of a store in object storage: the log shipped as sealed segments and checkpoints
//! (`mnemo replicate`, once or as it changes; `mnemo serve --replicate`, from the server, by
//! [`shipper`]), a store rebuilt from them (`mnemo restore`), a replica verified where it lies
//! (`mnemo verify --from`) and followed by a read-only copy ([`follower`], `mnemo serve
//! --follow`). Compiled with the `replicate` cargo feature.
//!
//! A replica at `URL` (`file:///dir` in this build) holds, under the URL's path:
//!
//! | object | what |
//! |---|---|
//! | `segments/{first:020}-{last:020}.seg` | events `first` to `last`, as the store keeps them ([`segment`]); written once, with a create that fails if the name is taken |
//! | `segments/{first:020}-{last:020}.m{N}.seg`, `….full.seg` | the same, merged by a compaction from back-to-back segments ([`compaction`]) |
//! | `checkpoints/{seq:020}` | a checkpoint ([`checkpoint`]): the seq the segments reach and its chain hash, one per shipment |
//! | `head` | the latest checkpoint, replaced by each shipment once its segments are written |
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
//! ([`Stale`] names such segments), and with a trusted key ([`Replica::trusting`]) takes only a
//! head that key signed, and nothing past it. Every object under the prefix is read or named:
//! a segment a merged one covers must hold exactly the records of its range (checked against
//! the segment covering it; one that holds erased content is a [`Stale`]), events past the head
//! checkpoint are checked against the chain and named ([`Restored::beyond`]), and partial
//! objects are named. Objects nested under `segments/` or `checkpoints/`, an object beside
//! `segments/`, `checkpoints/`, `head` and [`REWRITES`], a [`REWRITES`] object that lists
//! anything but segments, and a covered segment that is not its range's records, are damage.

pub mod checkpoint;
pub mod compaction;
pub mod follower;
pub mod key;
pub mod segment;
pub mod shipper;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::chain::Chain;
use crate::error::{Error, Result};
use crate::event::Seq;
use crate::failpoint::{Failpoint, Failpoints};
use crate::log::{Durability, Head, Store};

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

/// What one shipment did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shipped {
    /// The seq the replica reached before.
    pub from: Seq,
    /// The head it reaches now (what its checkpoint names).
    pub head: Head,
    /// The segments written.
    pub segments: usize,
    /// Whether the checkpoint names its head under the store's signing key (the store has
    /// one: `mnemo replicate --keygen`), so a restore trusting that key can prove it.
    pub signed: bool,
}

impl Shipped {
    /// What `mnemo replicate --once` prints of it (and `POST /v1/replicate` answers as its
    /// `result`): what was shipped to `url`, or that it was up to date, and the checkpoint.
    pub fn summary(&self, url: &str) -> String {
        let mut text = match self.segments {
            0 => format!(
                "the replica at {url} is up to date at event {}\n",
                self.head.seq
            ),
            n => format!(
                "replicated events {} to {} in {n} segments to {url}\n",
                self.from.0 + 1,
                self.head.seq
            ),
        };
        if self.head.seq > Seq(0) {
            text.push_str(&format!("checkpoint: {}\n", self.head));
        }
        text
    }
}

impl Replica {
    /// The replica at `url`: `s3://bucket/prefix` (endpoint and credentials from the standard
    /// `AWS_*` variables, `AWS_ENDPOINT_URL` included; an `http://` endpoint is allowed as given)
    /// or `file:///absolute/dir` (created if `create`).
    pub fn open(url: &str, create: bool) -> Result<Replica> {
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "the replica URL {url:?} {why}; give s3://bucket/prefix or file:///absolute/dir"
            ))
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("the replica's runtime", e))?;
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
            return Ok(Replica {
                url: url.to_string(),
                objects,
                runtime,
                local: None,
                trust: None,
                failpoints: Failpoints::default(),
                fanout: compaction::FANOUT,
            });
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
                    "the replica {url} names {}, which is not a directory: name a directory (made if missing)",
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
        Ok(Replica {
            url: url.to_string(),
            objects: Arc::new(objects),
            runtime,
            local: Some(dir),
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
    /// there). They are never read; [`Restored::partial`] names them.
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

impl crate::client::MnemoClient {
    /// Ships every event of the store this client has open (for writing, or as a read-only
    /// copy) that `replica` lacks, as sealed segments and then a checkpoint of the new head,
    /// telling `sealed` the seqs of each segment once it is written; returns what it shipped.
    /// Refuses a replica that holds another history; a served store is [`Error::NotLocal`]
    /// (its server ships it: `POST /v1/replicate`).
    pub fn ship_to(&self, replica: &Replica, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<Shipped> {
        self.settle_index()?;
        ship(&*self.local_store()?, replica, sealed)
    }
}

/// Ships every event of `store` that `replica` lacks, as sealed segments and then a checkpoint
/// of the new head, telling `sealed` the seqs of each segment once it is written; returns what
/// it shipped. Refuses a replica that holds another history.
pub fn ship(store: &Store, replica: &Replica, sealed: &mut dyn FnMut(Seq, Seq)) -> Result<Shipped> {
    let end = store.log_end()?.seq;
    ship_upto(store, replica, end, true, sealed)
}

/// [`ship`] up to event `end` (what the store had made durable when the shipment began), and
/// writes `checkpoints/{seq}` only if `keep_checkpoint` (the `head` object is always written):
/// a continuous shipper keeps one now and then rather than one per shipment.
impl crate::client::MnemoClient {
    /// Ships the events of the store this client has open, up to `end`, to `replica` (the
    /// checkpoint of the shipment kept): a server's `/v1/replicate`.
    pub(crate) fn ship_upto(&self, replica: &Replica, end: Seq) -> Result<Shipped> {
        ship_upto(&*self.local_store()?, replica, end, true, &mut |_, _| {})
    }
}

pub(crate) fn ship_upto(
    store: &Store,
    replica: &Replica,
    end: Seq,
    keep_checkpoint: bool,
    sealed: &mut dyn FnMut(Seq, Seq),
) -> Result<Shipped> {
    replica.check_apart(store.path())?;
    let segments = replica.segments()?;
    let have = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    if have > end {
        return Err(Error::InvalidArgument(format!(
            "the replica at {} reaches event {have}, past this store's last event {end}: it is another store's, or this store was rolled back; ship to a new replica",
            replica.url
        )));
    }
    // The replica's last event must be this store's event of that seq: the same chain hash
    // (a record erased since keeps its hash; its segment is rewritten below). What is shipped
    // next must link to it.
    let mut chain = Chain::new();
    let mut head = Head::EMPTY;
    if let Some((first, last, name)) = segments.last() {
        let bytes = replica
            .get(name)?
            .ok_or_else(|| Error::damaged(format!("replica segment {name} vanished")))?;
        let theirs = segment::decode(name, &bytes, (*first, *last))?;
        let ours = store.records(*last).next().transpose()?;
        let hash = |record: &[u8]| crate::event::Frame::decode(record).map(|f| f.hash).ok();
        let same = match (theirs.last(), ours) {
            (Some((_, theirs)), Some((seq, ours))) => {
                seq == *last && hash(theirs).is_some() && hash(theirs) == hash(&ours)
            }
            _ => false,
        };
        let theirs = theirs.last().and_then(|(_, record)| hash(record));
        match (same, theirs) {
            (true, Some(hash)) => {
                chain = Chain::after(*last, hash);
                head = Head { seq: *last, hash };
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "the replica at {} holds another history: its event {last} is not this store's; ship to a new replica",
                    replica.url
                )));
            }
        }
    }
    // A rewrite a cut shipment left half done is finished first.
    finish_rewrites(store, replica, &segments)?;
    // The segments holding events that redactions erased since the replica's head checkpoint
    // (a cut shipment may have sealed a redaction without rewriting what it erased).
    let since = replica
        .head()?
        .map_or(Seq(0), |(_, head)| head.seq.min(have));
    let rewrites = erased_segments(store, &segments, since, have, end)?;
    let mut shipped = 0;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0;
    let mut first = Seq(have.0 + 1);
    for item in store.records(first) {
        let (seq, record) = item?;
        if seq > end {
            break;
        }
        let frame = chain.check(seq, &record).map_err(|b| {
            Error::corrupt(format!(
                "event {}: {} (the store does not verify; run mnemo verify)",
                b.seq, b.detail
            ))
        })?;
        head = Head {
            seq,
            hash: frame.hash,
        };
        bytes += record.len();
        batch.push(record);
        if batch.len() >= segment::SEGMENT_EVENTS || bytes >= segment::SEGMENT_BYTES {
            seal(replica, first, &batch)?;
            sealed(first, seq);
            shipped += 1;
            first = Seq(seq.0 + 1);
            batch.clear();
            bytes = 0;
        }
    }
    if !batch.is_empty() {
        seal(replica, first, &batch)?;
        sealed(first, head.seq);
        shipped += 1;
    }
    // With nothing new, the checkpoint names the replica's last event again (written anew if a
    // cut shipment left it behind).
    let mut signed = false;
    if head.seq > Seq(0) {
        let text = checkpoint::encode(&origin(store.path()), head);
        // Signed by the owner's key, when the store has one.
        let text = match key::signer(store.path())? {
            Some(signer) => {
                signed = true;
                key::sign(&text, &signer)?
            }
            None => text.into_bytes(),
        };
        if keep_checkpoint {
            replica.put(
                &format!("checkpoints/{:020}", head.seq.0),
                text.clone(),
                PutMode::Overwrite,
            )?;
        }
        // The segments to rewrite are named before the head moves past the redaction: a
        // restore from here on erases what the redaction names itself, and the next shipment
        // finishes a rewrite this one could not.
        if !rewrites.is_empty() {
            replica.put(
                REWRITES,
                rewrites.join("\n").into_bytes(),
                PutMode::Overwrite,
            )?;
        }
        replica.put("head", text, PutMode::Overwrite)?;
    }
    if !rewrites.is_empty() {
        finish_rewrites(store, replica, &replica.segments()?)?;
    }
    // Once the head names every event shipped, small segments are merged (and what a cut merge
    // left is removed).
    compaction::compact(store, replica)?;
    Ok(Shipped {
        from: have,
        head,
        segments: shipped,
        signed,
    })
}

/// The object naming segments a shipment has yet to write again from the store, because a
/// redaction erased events they hold; present only while such a rewrite is under way.
pub const REWRITES: &str = "rewrites";

/// Redactions reach the replica: the names of the segments (among `segments`, which reach
/// `have`) holding an event erased by a redaction from `since` + 1 to `end`, to be written again
/// from the store, whose records are erased now.
fn erased_segments(
    store: &Store,
    segments: &[(Seq, Seq, String)],
    since: Seq,
    have: Seq,
    end: Seq,
) -> Result<Vec<String>> {
    let mut erased: Vec<Seq> = Vec::new();
    for item in store.records(Seq(since.0 + 1)) {
        let (seq, record) = item?;
        if seq > end {
            break;
        }
        let event = crate::event::Event::decode(&record)?;
        if let crate::event::Body::Admin(crate::policy::AdminCommand::Redact { seqs, .. }) =
            &event.body
        {
            erased.extend(seqs.iter().map(|s| Seq(*s)).filter(|s| *s <= have));
        }
    }
    Ok(segments
        .iter()
        .filter(|(first, last, _)| erased.iter().any(|s| s >= first && s <= last))
        .map(|(_, _, name)| name.clone())
        .collect())
}

/// Writes again, from the store, each segment the replica's [`REWRITES`] object names (one of
/// `segments`), replacing the old objects, then removes it.
fn finish_rewrites(
    store: &Store,
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<()> {
    let Some(listed) = rewrites_listed(replica, segments)? else {
        return Ok(());
    };
    for name in &listed {
        let Some((first, last, _)) = segments.iter().find(|(_, _, n)| n == name) else {
            continue;
        };
        let mut records = Vec::new();
        for item in store.records(*first) {
            let (seq, record) = item?;
            if seq > *last {
                break;
            }
            records.push(record);
        }
        replica.put(name, segment::encode(*first, &records), PutMode::Overwrite)?;
    }
    replica.remove(REWRITES)
}

/// Writes the segment of `records` from event `first`, once.
fn seal(replica: &Replica, first: Seq, records: &[Vec<u8>]) -> Result<()> {
    let last = Seq(first.0 + records.len() as u64 - 1);
    let name = format!("segments/{}", segment::name(first, last));
    replica.put(&name, segment::encode(first, records), PutMode::Create)?;
    // Another shipment may have sealed a segment over some of the same events under another
    // name: whichever looks after the other has written sees both, and takes its own back, so
    // the replica never keeps two. (A merged segment covers only segments a shipment wrote
    // before, so none may overlap a new one.)
    let overlap = replica.listing().and_then(|listing| {
        let other = listing
            .covered
            .iter()
            .chain(listing.segments.iter().map(|(_, _, n)| n))
            .filter(|n| **n != name)
            .filter_map(|n| n.strip_prefix("segments/").and_then(segment::parse_name))
            .find(|(a, b)| *a <= last && *b >= first);
        match other {
            Some((a, b)) => Err(Error::damaged(format!(
                "a segment of events {a} to {b} overlaps the one of events {first} to {last}"
            ))),
            None => Ok(()),
        }
    });
    if let Err(e) = overlap {
        replica.remove(&name)?;
        return Err(Error::InvalidArgument(format!(
            "another shipment to {} wrote events this one was shipping, so this one stopped and took back its segment ({e}); ship from one process at a time, then run this again",
            replica.url
        )));
    }
    Ok(())
}

/// Rebuilds the store at `db` (a new path or an empty directory) from `replica`, up to event
/// `at` (else its head checkpoint's event): every record re-checked against the chain rules, the
/// head checkpoint against the chain, the index rebuilt by replay and the whole store verified.
/// An event a redaction named is restored erased, whatever its segment holds. Returns what was
/// restored. On failure nothing is left at `db`.
impl Replica {
    /// Rebuilds a store at `db` (missing or empty) from this replica, up to event `at` (`None`:
    /// its head): every record re-checked against the chain, the index rebuilt, the whole store
    /// verified; nothing is left at `db` if it fails.
    pub fn restore(&self, db: &Path, at: Option<Seq>) -> Result<Restored> {
        restore(self, db, at)
    }

    /// The head a checkpoint object names (`what` names it in the error): a replica's `head`
    /// object, or a copy an auditor kept.
    pub fn checkpoint_head(what: &str, bytes: &[u8]) -> Result<Head> {
        checkpoint::decode(what, bytes).map(|(_, head)| head)
    }
}

pub(crate) fn restore(replica: &Replica, db: &Path, at: Option<Seq>) -> Result<Restored> {
    if std::fs::read_dir(db).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Error::InvalidArgument(format!(
            "{} is not empty; restore into a new path",
            db.display()
        )));
    }
    // Built beside its path and renamed there once whole, so a restore killed midway leaves
    // nothing at `db` (only a directory `.NAME.restore-*` beside it).
    let name = db
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no name", db.display())))?
        .to_string_lossy()
        .into_owned();
    let parent = crate::disk::parent_of(db);
    // What earlier restores into this path left when they were killed.
    crate::disk::remove_restore_leftovers(db)?;
    let tag = crate::token::random_hex(8).map_err(|e| Error::io("the OS random source", e))?;
    let building = parent.join(format!(".{name}.restore-{tag}"));
    let made = fetch(replica, &building, at).and_then(|restored| {
        if db.is_dir() {
            std::fs::remove_dir(db).map_err(|e| Error::io(db, e))?;
        }
        std::fs::rename(&building, db).map_err(|e| Error::io(db, e))?;
        std::fs::File::open(parent)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| Error::io(parent, e))?;
        Ok(restored)
    });
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&building);
    }
    made
}

/// What a restore made, and what it found the replica still holding that it should not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The restored store's head.
    pub head: Head,
    /// The segments that hold, whole, events a redaction erased (restored erased all the same).
    pub stale: Vec<Stale>,
    /// The partial objects the replica holds ([`Replica::partial_objects`]), not read.
    pub partial: Vec<String>,
    /// The segments a wider one covers (a compaction under way, or cut before it removed
    /// them), each read and found to hold exactly the records of its range (those holding
    /// erased content are in `stale`).
    pub covered: Vec<String>,
    /// The events the segments hold past the head checkpoint, first and last (a shipment under
    /// way, or cut before it moved the head): checked against the chain, never restored. Only
    /// a restore to the head looks at them (not one `--at` an event).
    pub beyond: Option<(Seq, Seq)>,
}

impl Restored {
    /// What an auditor must know of what the replica holds beside its log: each segment still
    /// holding erased content, each partial object, and how many covered segments were checked.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.stale.iter().map(Stale::note).collect();
        if let Some((first, last)) = self.beyond {
            notes.push(format!(
                "the replica's segments hold events {first} to {last}, past its head checkpoint at event {}: a shipment is under way, or one was cut before it moved the head, or whoever holds the bucket added them; they link to the chain (and each checkpoint object that names one gives its hash), but the head does not reach them, so nothing past event {} was restored or verified as the replica's; the next shipment from the store moves the head past them (or refuses the replica if they are not the store's)",
                self.head.seq, self.head.seq
            ));
        }
        if let Some(one) = self.covered.first() {
            notes.push(format!(
                "the replica holds {} segment(s) that a merged segment covers ({one}{}): a compaction is under way, or was cut before it removed them; each was read and each holds exactly the records of its range, as the segment covering it does, so no reader needs them; the next shipment removes them",
                self.covered.len(),
                match self.covered.len() {
                    1 => "",
                    _ => " and others",
                }
            ));
        }
        notes.extend(self.partial.iter().map(|name| {
            format!(
                "the replica holds {name}, a partial object (the file store writes NAME#N and renames it into place): a shipment is writing it now, or one was killed, or another writer put it there; it was not read, and it may hold anything, erased content included: remove it unless a shipment is under way"
            )
        }));
        notes
    }
}

/// A replica segment that still holds, whole, events a redaction erased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    /// The segment object, such as `segments/…-….seg`.
    pub segment: String,
    /// The erased events it holds whole, each with the seq of the redaction that names it.
    pub events: Vec<(Seq, Seq)>,
    /// Whether the replica's [`REWRITES`] object names it: a shipment was cut before it wrote
    /// the segment again, and the next shipment does. If not, the bucket kept or was given back
    /// content erased at the source (an old version put back).
    pub pending: bool,
    /// The segment that covers it, if a wider one does: no reader takes it, and the next
    /// shipment removes it.
    pub covered_by: Option<String>,
}

impl Stale {
    /// What an auditor must know of it, in a sentence.
    pub fn note(&self) -> String {
        if let Some(by) = &self.covered_by {
            let first = self.events.first().map_or(Seq(0), |(seq, _)| *seq);
            let last = self.events.last().map_or(Seq(0), |(seq, _)| *seq);
            let by_redaction: std::collections::BTreeSet<Seq> =
                self.events.iter().map(|(_, by)| *by).collect();
            let seqs = match (
                first == last,
                last.0 - first.0 + 1 == self.events.len() as u64,
            ) {
                (true, _) => first.to_string(),
                (false, true) => format!("{first}-{last}"),
                (false, false) => {
                    let each: Vec<String> =
                        self.events.iter().map(|(s, _)| s.to_string()).collect();
                    each.join(", ")
                }
            };
            return format!(
                "the replica's {} still holds the erased content of event(s) {seqs} (erased by the redaction at event {}): the segment {by} covers it, so no reader takes it, but whoever reads the bucket can; delete it (the next shipment from the store removes it)",
                self.segment,
                by_redaction
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let events: Vec<String> = self
            .events
            .iter()
            .map(|(seq, by)| format!("{seq} (erased by the redaction at event {by})"))
            .collect();
        let why = match self.pending {
            true => {
                "a shipment was cut before it wrote the segment again; the next shipment from the store does"
            }
            false => {
                "the bucket kept or was given back content erased at the source (an old object put back, a versioned bucket); whoever reads the bucket reads it, so remove the object's old versions or ship the store to a new replica"
            }
        };
        format!(
            "the replica's {} still holds, whole, event(s) {} (a restore erases them again): {why}",
            self.segment,
            events.join(", ")
        )
    }
}

/// The segments the replica's [`REWRITES`] object names (all of them among `segments`), if it
/// has one: an object that is not such a list is damage, whoever reads it.
fn rewrites_listed(
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<Option<Vec<String>>> {
    let Some(listed) = replica.get(REWRITES)? else {
        return Ok(None);
    };
    let listed = String::from_utf8(listed)
        .map_err(|_| Error::damaged(format!("the replica's {REWRITES} object is not text")))?;
    let mut names = Vec::new();
    for name in listed.lines() {
        if !segments.iter().any(|(_, _, n)| n == name) {
            return Err(Error::damaged(format!(
                "the replica's {REWRITES} object names {name:?}, which is not one of its segments: a shipment writes it with the names of segments it is writing again, so another writer left it"
            )));
        }
        names.push(name.to_string());
    }
    Ok(Some(names))
}

/// Every event a redaction in `segments` names, with the seq of that redaction.
fn redaction_names(
    replica: &Replica,
    segments: &[(Seq, Seq, String)],
) -> Result<std::collections::BTreeMap<Seq, Seq>> {
    let mut named = std::collections::BTreeMap::new();
    let reach = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    let mut reader = Reader::new(replica, segments.to_vec(), Seq(1), reach);
    while let Some((_, records)) = reader.next_segment()? {
        for (seq, record) in records {
            if let Some(seqs) = redacted_by(&record)? {
                for erased in seqs {
                    named.entry(erased).or_insert(seq);
                }
            }
        }
    }
    Ok(named)
}

/// The events a record erases, if it is a redaction.
fn redacted_by(record: &[u8]) -> Result<Option<Vec<Seq>>> {
    Ok(match crate::event::Event::decode(record)?.body {
        crate::event::Body::Admin(crate::policy::AdminCommand::Redact { seqs, .. }) => {
            Some(seqs.into_iter().map(Seq).collect())
        }
        _ => None,
    })
}

/// [`restore`]'s work, in the new directory `db` itself (left partial if it fails).
///
/// The replica is read twice: first for what its redactions name, then for the records, each
/// named one appended erased, so no erased byte reaches `db` (sled would keep a replaced value
/// in its log). The second read must find the same redactions.
pub(crate) fn fetch(replica: &Replica, db: &Path, at: Option<Seq>) -> Result<Restored> {
    let checkpoint = replica.head()?.map(|(_, head)| head);
    // Every object under the prefix is the replica's own, or named.
    replica.check_root()?;
    let listing = replica.listing()?;
    let segments = listing.segments.clone();
    let pending = rewrites_listed(replica, &segments)?.unwrap_or_default();
    let reach = segments.last().map_or(Seq(0), |(_, last, _)| *last);
    if checkpoint.is_none() && reach > Seq(0) {
        return Err(Error::damaged(format!(
            "the replica at {} holds segments up to event {reach} but no head checkpoint",
            replica.url
        )));
    }
    if let Some(head) = checkpoint {
        if head.seq > reach {
            return Err(Error::damaged(format!(
                "the replica's head checkpoint names event {}, but its segments end at event {reach}: a segment is missing",
                head.seq
            )));
        }
    }
    let until = match (at, checkpoint) {
        (Some(at), _) => at,
        (None, Some(head)) => head.seq,
        (None, None) => {
            return Err(Error::InvalidArgument(format!(
                "the replica at {} has no checkpoint: nothing was shipped to it (mnemo replicate --to URL --once)",
                replica.url
            )));
        }
    };
    if until > reach || until == Seq(0) {
        return Err(Error::InvalidArgument(format!(
            "the replica at {} holds events 1 to {reach}; there is no event {until} to restore to",
            replica.url
        )));
    }
    if let (Some(vkey), Some(head)) = (replica.trusted_key(), checkpoint) {
        if until > head.seq {
            return Err(Error::InvalidArgument(format!(
                "the replica's signed head checkpoint names event {}; events past it are not signed by the key {}, so a restore with --key reaches no further: restore to {} or before",
                head.seq,
                vkey.split('+').next().unwrap_or(vkey),
                head.seq
            )));
        }
    }
    let named = redaction_names(replica, &segments)?;
    // Erased content never comes back: a restore to a point before the redaction that erased an
    // event would hold the event whole (or, from a rewritten segment, erased with no redaction
    // to say why).
    if let Some((seq, by)) = named
        .iter()
        .find(|(seq, by)| **seq <= until && **by > until)
    {
        return Err(Error::InvalidArgument(format!(
            "event {seq} was erased by the redaction at event {by}, past event {until} where this restore would stop; restore to event {by} or later (a redaction's erasure is never undone)",
        )));
    }
    let store = Store::open(db)?;
    let mut chain = Chain::new();
    let mut head = Head::EMPTY;
    let mut stale: Vec<Stale> = Vec::new();
    let mut reader = Reader::new(replica, segments.clone(), Seq(1), until);
    while let Some((name, records)) = reader.next_segment()? {
        let mut frames = Vec::with_capacity(records.len());
        for (seq, record) in records {
            let mut frame = chain.check(seq, &record).map_err(|b| {
                Error::damaged(format!(
                    "the replica at {} breaks the chain at event {} ({name}): {}",
                    replica.url, b.seq, b.detail
                ))
            })?;
            head = Head {
                seq,
                hash: frame.hash,
            };
            if let Some(seqs) = redacted_by(&record)? {
                if seqs.iter().any(|s| named.get(s).is_none_or(|by| *by > seq)) {
                    return Err(Error::damaged(format!(
                        "the replica at {} changed while it was restored: the redaction at event {seq} ({name}) was not there when it was first read; run the restore again",
                        replica.url
                    )));
                }
            }
            if let Some(by) = named.get(&seq) {
                let event = crate::event::Event::decode(&record)?;
                if !matches!(event.body, crate::event::Body::Erased(_)) {
                    frame = event.erased().to_frame();
                    match stale.last_mut().filter(|s| s.segment == name) {
                        Some(found) => found.events.push((seq, *by)),
                        None => stale.push(Stale {
                            segment: name.clone(),
                            events: vec![(seq, *by)],
                            pending: pending.contains(&name),
                            covered_by: None,
                        }),
                    }
                }
            }
            frames.push(frame);
        }
        store.append(&frames)?;
    }
    // The checkpoint must name an event of this chain.
    if let Some(checkpoint) = checkpoint {
        if checkpoint.seq <= head.seq {
            let hash = hash_at(&store, checkpoint.seq)?;
            if hash != checkpoint.hash {
                return Err(Error::damaged(format!(
                    "the replica's head checkpoint names event {} with hash {}, but its segments give {hash}",
                    checkpoint.seq, checkpoint.hash
                )));
            }
        }
    }
    // Events the segments hold past the head checkpoint (a shipment under way, or cut before it
    // moved the head) are never restored, but checked against the chain all the same and
    // named, so no record of the replica goes unread.
    let mut beyond = None;
    let mut past_head: Vec<crate::event::EventHash> = Vec::new();
    if at.is_none() && head.seq == until && until < reach {
        let mut chain = Chain::after(head.seq, head.hash);
        let mut reader = Reader::new(replica, segments.clone(), Seq(until.0 + 1), reach);
        while let Some((name, records)) = reader.next_segment()? {
            for (seq, record) in records {
                let frame = chain.check(seq, &record).map_err(|b| {
                    Error::damaged(format!(
                        "the replica at {} breaks the chain at event {} ({name}), past its head checkpoint at event {until}: {}",
                        replica.url, b.seq, b.detail
                    ))
                })?;
                past_head.push(frame.hash);
            }
        }
        beyond = Some((Seq(until.0 + 1), reach));
    }
    // Every checkpoint object too: each names an event of this chain by its own name.
    for name in replica.names("checkpoints")? {
        let bytes = replica
            .get(&name)?
            .ok_or_else(|| Error::damaged(format!("replica checkpoint {name} vanished")))?;
        let (_, named) = checkpoint::decode(&name, &bytes)?;
        if name != format!("checkpoints/{:020}", named.seq.0) {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} names event {}, not the one its name says",
                named.seq
            )));
        }
        if named.seq > reach {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} names event {}, past the replica's last event {reach}",
                named.seq
            )));
        }
        // One past the head (a shipment cut before it moved the head) names one of the events
        // checked past it (none are, in a restore `--at` an event).
        let hash = match named.seq.0.checked_sub(head.seq.0 + 1) {
            None => Some(hash_at(&store, named.seq)?),
            Some(past) => usize::try_from(past)
                .ok()
                .and_then(|past| past_head.get(past))
                .copied(),
        };
        if let Some(hash) = hash.filter(|hash| *hash != named.hash) {
            return Err(Error::damaged(format!(
                "replica checkpoint {name} gives event {} the hash {}, but the chain has {hash}",
                named.seq, named.hash
            )));
        }
    }
    store.catch_up()?;
    store.sync(Durability::Fsync)?;
    store.record_head(head)?;
    let report = crate::verify::verify_store(&store)?;
    if let Some(v) = report.violations.first() {
        return Err(Error::damaged(format!(
            "the store restored from {} does not verify: event {} ({}): {}",
            replica.url,
            v.seq,
            v.kind.name(),
            v.detail
        )));
    }
    // What a reader does not take is checked too: each segment a wider one covers must hold
    // exactly the records of its range, and erased content there is named.
    let mut covered = Vec::new();
    let mut cache = None;
    for name in &listing.covered {
        match check_covered(replica, &segments, name, &named, &mut cache)? {
            Covered::Gone => {}
            Covered::Same => covered.push(name.clone()),
            Covered::Stale(found) => stale.push(found),
        }
    }
    let partial = replica.partial_objects()?;
    Ok(Restored {
        head,
        stale,
        partial,
        covered,
        beyond,
    })
}

/// What a segment that a wider one covers was found to hold ([`check_covered`]).
enum Covered {
    /// Nothing: it was removed since it was listed (a compaction finishing).
    Gone,
    /// Exactly the records of its range, as the segment covering it holds them (byte for
    /// byte, or each the same event by the chain: an erased record beside a whole one).
    Same,
    /// The records of its range, some of them whole where a redaction erased them.
    Stale(Stale),
}

/// Checks the segment `name`, which one of `taken` covers, against that segment: it must hold
/// exactly the records of its range (each record the same event by the chain: the same chain
/// hash, linked to the same event before it, its payload hashing as it says), else it is
/// damage naming it; a whole record of an event that a redaction named (`named`) makes it
/// [`Covered::Stale`].
fn check_covered(
    replica: &Replica,
    taken: &[(Seq, Seq, String)],
    name: &str,
    named: &std::collections::BTreeMap<Seq, Seq>,
    cache: &mut Option<(String, Records)>,
) -> Result<Covered> {
    let Some((first, last)) = name.strip_prefix("segments/").and_then(segment::parse_name) else {
        return Err(Error::damaged(format!(
            "the replica at {} holds {name}, which is not a segment's name",
            replica.url
        )));
    };
    let Some(bytes) = replica.get(name)? else {
        return Ok(Covered::Gone);
    };
    let covering = |listed: &[(Seq, Seq, String)]| {
        listed
            .iter()
            .find(|(a, b, _)| *a <= first && *b >= last)
            .cloned()
    };
    let bad = |by: &str, why: String| {
        Error::damaged(format!(
            "the replica at {} holds {name}, which the segment {by} covers, so no reader takes it, but it is not what a shipment or a compaction wrote: {why}; remove it (the next shipment from the store removes it too)",
            replica.url
        ))
    };
    let Some((a, b, by)) = covering(taken) else {
        return Err(Error::damaged(format!(
            "the replica at {}: no segment covers {name} (a gap or an overlap)",
            replica.url
        )));
    };
    // Those a segment covers are listed together: it is read once for them all.
    let (by, theirs) = match cache.take().filter(|(n, _)| *n == by) {
        Some(read) => read,
        None => match replica.get(&by)? {
            Some(theirs) => {
                let theirs = segment::decode(&by, &theirs, (a, b))?;
                (by, theirs)
            }
            // Merged again since it was listed: the segment that covers the range now.
            None => {
                let listing = replica.listing()?;
                if !listing.covered.iter().any(|n| n == name) {
                    return Ok(Covered::Gone);
                }
                let (a, b, now) = covering(&listing.segments).ok_or_else(|| {
                    Error::damaged(format!(
                        "replica segment {by} vanished, and no segment covers {name} now"
                    ))
                })?;
                let theirs = replica
                    .get(&now)?
                    .ok_or_else(|| Error::damaged(format!("replica segment {now} vanished")))?;
                let theirs = segment::decode(&now, &theirs, (a, b))?;
                (now, theirs)
            }
        },
    };
    let found = compare_covered(name, (first, last), &bytes, &by, &theirs, named, &bad);
    *cache = Some((by, theirs));
    found
}

/// [`check_covered`]'s comparison of the covered segment `name` (its `bytes`, of the seqs
/// `range`) with the records `theirs` of the segment `by` that covers it.
fn compare_covered(
    name: &str,
    range: (Seq, Seq),
    bytes: &[u8],
    by: &str,
    theirs: &Records,
    named: &std::collections::BTreeMap<Seq, Seq>,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Covered> {
    let (first, last) = range;
    let ours = segment::decode(name, bytes, (first, last)).map_err(|e| match e {
        Error::ReplicaDamaged { what } => bad(by, what),
        e => e,
    })?;
    let mut erased: Vec<(Seq, Seq)> = Vec::new();
    for (seq, record) in ours {
        // `theirs` runs from its first seq with no gap (its name says so, and decode checked).
        let at = theirs
            .first()
            .and_then(|(start, _)| usize::try_from(seq.0.checked_sub(start.0)?).ok());
        let Some((_, same)) = at.and_then(|at| theirs.get(at)).filter(|(s, _)| *s == seq) else {
            return Err(bad(by, format!("{by} does not hold its event {seq}")));
        };
        let frame = if record == *same {
            crate::event::Frame::decode(&record).map_err(|e| bad(by, e.to_string()))?
        } else {
            // Not byte for byte: the same event by the chain, or a forgery.
            let expected = crate::event::Frame::decode(same)?;
            let frame = Chain::after(Seq(seq.0 - 1), expected.prev_hash)
                .check(seq, &record)
                .map_err(|b| bad(by, format!("event {}: {}", b.seq, b.detail)))?;
            if frame.hash != expected.hash {
                return Err(bad(
                    by,
                    format!(
                        "event {seq}: its record hashes to {}, where {by} holds the event of hash {}",
                        frame.hash, expected.hash
                    ),
                ));
            }
            frame
        };
        if let (Some(redaction), None) = (named.get(&seq), frame.erased_from) {
            erased.push((seq, *redaction));
        }
    }
    Ok(match erased.is_empty() {
        true => Covered::Same,
        false => Covered::Stale(Stale {
            segment: name.to_string(),
            events: erased,
            pending: false,
            covered_by: Some(by.to_string()),
        }),
    })
}

/// The chain hash of event `seq` of `store`.
fn hash_at(store: &Store, seq: Seq) -> Result<crate::event::EventHash> {
    let (_, record) = store
        .records(seq)
        .next()
        .transpose()?
        .filter(|(at, _)| *at == seq)
        .ok_or_else(|| Error::damaged(format!("the restored log lost event {seq}")))?;
    Ok(crate::event::Frame::decode(&record)?.hash)
}
