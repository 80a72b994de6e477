//! The sled store: the event log, its head, the path index, and making them durable.
//!
//! Its sled trees: `events` (a record per seq), `meta` (the format marker and the head), `index`
//! and `content` (the path index, [`crate::store::projection`]); their keys and values are
//! written down once, in `docs/formats.md` ("The store's files").
//!
//! **Invariant:** the `events` tree is append-only: keys are dense from 1 and never overwritten.
//! **Invariant:** `meta.head` names an event of the log, never one past its end. It is written
//! after the events it names, so a crash can leave it behind the last event, never ahead; the
//! events past it were never acknowledged, and [`Store::catch_up`] moves it over them when the
//! store next opens for writing.
//! **Invariant:** the index's applied seq never passes the head. Index changes are written in one
//! sled transaction each (over both index trees), after the events they derive from; the writer keeps them in memory
//! and writes them in batches, so the stored index lags the log, and opening the store replays
//! the missing events into it before anything else runs.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::{Transactional, Tree};

use crate::error::{Error, Result};
use crate::model::chain::Chain;
use crate::model::event::{Event, FORMAT_VERSION, Frame, Seq, WRITTEN_FORMAT};
pub use crate::model::head::Head;
use crate::store::disk::{DirId, DiskSync, HeadRecord, Resolved, StoreFiles, ValueFile};
use crate::store::failpoint::{Failpoint, Failpoints};
use crate::store::kv::{IndexTrees, Pending};
use crate::store::snapshot::Snapshots;
use crate::store::unwind::{self, catch_quietly};

const FORMAT_KEY: &[u8] = b"format";

/// How long [`Store::open`] waits for a lock that a just-closed handle may still hold.
pub const LOCK_WAIT: Duration = Duration::from_millis(1500);
const HEAD_KEY: &[u8] = b"head";

/// The value file's last append ([`crate::store::disk::LastAppend`]).
const VALUES_KEY: &[u8] = b"values";

/// How far a write must get before the call that made it is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// Flush sled's buffers, then `fsync` the store's files and directories (every one that may
    /// hold unsynced data; see the `disk` module): an acknowledged write survives power loss. The
    /// default.
    #[default]
    Fsync,
    /// Flush sled's buffers to the OS (`sync_file_range` on Linux): survives a crash of the
    /// process, not necessarily of the machine.
    Flush,
    /// Leave writes to sled's background flusher (every 500 ms): a crash may lose the last
    /// half-second of acknowledged writes; the chain stays consistent.
    Buffered,
    /// `fsync`, then the events go to the store's log in the fleet's object storage before the
    /// call is answered (group commit: the calls that arrive while one write is in flight go in
    /// the next): an acknowledged write survives the loss of the node. Only for a store a fleet
    /// node holds (`mnemo serve --fleet`), the fleet's default.
    Replicated,
}

impl Durability {
    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Fsync => "fsync",
            Durability::Flush => "flush",
            Durability::Buffered => "buffered",
            Durability::Replicated => "replicated",
        }
    }

    /// Parses a mode name.
    pub fn from_name(name: &str) -> Option<Durability> {
        match name {
            "fsync" => Some(Durability::Fsync),
            "flush" => Some(Durability::Flush),
            "buffered" => Some(Durability::Buffered),
            "replicated" => Some(Durability::Replicated),
            _ => None,
        }
    }
}

/// An open store directory.
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    db: sled::Db,
    events: Tree,
    meta: Tree,
    index: IndexTrees,
    failpoints: Arc<Failpoints>,
    disk: Arc<Mutex<Disk>>,
    /// The value file beside sled's files: the payloads of large events (see
    /// [`crate::store::disk`]'s `value_file`).
    values: Arc<ValueFile>,
    /// For a store opened with [`Store::open_read_only`]: the private copy sled has open (and
    /// the head record copied with it), removed when the last handle goes.
    copy: Option<Arc<tempfile::TempDir>>,
    /// The format marker in `meta` (the newest format the log may hold), as last read or written.
    format: Arc<AtomicU8>,
    /// The directory sled opened (the store's own, or a private copy's).
    dir_id: DirId,
    /// Replayed trees of the past, kept while the store is open (see [`crate::store::snapshot`]).
    snapshots: Arc<Snapshots>,
    /// State derived from the log that readers above the store keep while it is open, one value
    /// per type (see [`Store::derived`]).
    derived: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send>>>>,
    /// How far this open store proved its log from event 1 (see [`crate::store::proof`]): apart from
    /// `derived`, whose users read the log and so prove it while they hold that lock.
    proven: Arc<Mutex<Head>>,
}

/// The store's own files outside sled: what was last synced, and the head record's handle.
#[derive(Default)]
struct Disk {
    sync: DiskSync,
    head: HeadRecord,
}

/// The seq a key of the `events` tree names.
fn seq_of_key(key: &[u8]) -> Result<Seq> {
    Seq::from_key(key).ok_or_else(|| Error::corrupt(format!("events key {key:?} is not 8 bytes")))
}

/// Removes the `snap.*.generating` files in `dir`; returns how many there were.
///
/// sled 0.34 writes a snapshot to `snap.LSN.generating`, syncs it and renames it to `snap.LSN`.
/// When it opens it reads the newest `snap.*` file, a `.generating` one included, so a process
/// killed while writing a snapshot leaves a store sled refuses to open (sled issues #1387, #1527).
/// Such a file is never a finished snapshot; without it sled opens from the previous snapshot and
/// replays its log, as it would had the kill come a moment earlier.
fn remove_torn_snapshots(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// [`Error::Corrupt`] for a store directory that holds sled's other files but not its log `db`:
/// the log was removed or lost, and letting sled open it would report garbled offsets (with a
/// snapshot) or start an empty log beside the rest (without one).
fn refuse_missing_log(path: &Path) -> Result<()> {
    if exists(&path.join("db")) {
        return Ok(());
    }
    let names: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| Error::io(path, e))?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let snapshot = names
        .iter()
        .any(|name| name.to_string_lossy().starts_with("snap."));
    if snapshot || exists(&path.join("conf")) {
        return Err(Error::corrupt(format!(
            "{} holds sled's configuration or snapshot but its log file `db` is missing",
            path.display()
        )));
    }
    // Files of something else (an export's memories/, a project): no store is made among them.
    // Mnemo's own files beside a store (the head record, a server's file and its temporary,
    // named as `discovery` names them) are not something else.
    let foreign = names.iter().any(|name| {
        let name = name.to_string_lossy();
        name != crate::store::disk::HEAD_FILE
            && name != "mnemo-server.json"
            && !name.starts_with(".mnemo-server.json.")
    });
    if foreign {
        return Err(Error::InvalidArgument(format!(
            "{} is a directory that holds other files and no store; a store is created only at a new or empty path, so pass the store's directory (or a new one) with --db",
            path.display()
        )));
    }
    Ok(())
}

/// `store`, unless its log is behind the head it recorded ([`Error::Corrupt`]).
fn refuse_rolled_back(store: Store) -> Result<Store> {
    if let Some(why) = store.rolled_back()? {
        return Err(Error::corrupt(format!(
            "{why}; `mnemo verify` shows what is missing"
        )));
    }
    Ok(store)
}

/// Whether `path` is a regular file itself (a link is not followed).
fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether there is anything at `path` (a link is not followed).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// sled's open, with a panic in it turned into [`Error::Corrupt`]: sled 0.34 panics on some
/// files instead of returning an error (a pipe or a device as `db`). [`StoreFiles::check`] keeps
/// the known causes out; this is the last line of defence. The panic is not printed (see
/// `unwind`): the error says what it said.
fn open_sled(path: &Path) -> Result<sled::Result<sled::Db>> {
    without_panic(path, || sled::Config::new().path(path).open())
}

/// Runs `f`, turning a panic in it into [`Error::Corrupt`] about the store at `path`.
fn without_panic<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T> {
    catch_quietly(f).map_err(|panic| {
        let text = unwind::message(&*panic);
        Error::corrupt(format!(
            "sled panicked while opening the store at {} ({text})",
            path.display()
        ))
    })
}

/// Drops a sled handle that will not be used, catching a panic in its drop: sled 0.34 `fsync`s
/// `db` when its last handle goes and panics if that fails (as it does on a pipe or device).
fn close_quietly(db: sled::Db) {
    let _ = catch_quietly(move || drop(db));
}

/// Whether the store at `path` is still to be made: nothing is there, or an empty directory
/// (`false` if there is something at `path` to open, or to refuse).
fn unborn(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::io(path, e)),
        Ok(meta) if meta.is_dir() => {
            let mut entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
            Ok(entries.next().is_none())
        }
        Ok(_) => Ok(false),
    }
}

/// The mode of a new store's directory: its owner's alone, whatever the umask (a service's
/// umask is often 000). Nobody else may read the memories in it, plant a file in it (such as a
/// server file that would take the owner's calls), or swap its files.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// The mode of the files in a new store's directory.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// Makes the store directory `dir` and what is in it its owner's alone: the directory
/// [`PRIVATE_DIR_MODE`], its files [`PRIVATE_FILE_MODE`] (sled creates them as the umask
/// says). Links are not followed.
fn make_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .map_err(|e| Error::io(&d, e))?;
        for entry in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let entry = entry.map_err(|e| Error::io(&d, e))?;
            let kind = entry.file_type().map_err(|e| Error::io(&d, e))?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                std::fs::set_permissions(
                    entry.path(),
                    std::fs::Permissions::from_mode(PRIVATE_FILE_MODE),
                )
                .map_err(|e| Error::io(entry.path(), e))?;
            }
        }
    }
    Ok(())
}

/// Creates the store at `path`, which [`unborn`] found missing or empty, so that a kill or a power
/// loss at any moment leaves either no store there or a whole one, never sled's files without the
/// format marker (which the next open must refuse as a damaged store).
///
/// The store is built in a sibling directory `.NAME.creating-PID-NONCE`: sled creates its files
/// there, the marker is written, sled is closed (and its threads waited for), every file and the
/// directory are `fsync`ed, and the directory is renamed onto `path` (over an empty directory,
/// whose permissions it takes), then the parent is `fsync`ed. If another process created the
/// store first, its store stays and this one's directory is removed. Where the directory cannot
/// be made or renamed (`path` is a mount point, or the parent is not writable: see
/// [`in_place_only`]) the store is created in place, as before, without the guarantee.
///
/// A creator killed midway leaves its directory behind: nothing in it was ever acknowledged, but
/// it is not removed here, because a pid alone cannot tell a dead creator from a live one (pids
/// are reused, and a process in another pid namespace may share the directory).
fn create_atomically(path: &Path) -> Result<()> {
    let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else {
        return Ok(()); // `/` or `..`: created in place.
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = parent.join(format!(
        ".{}.creating-{}-{nonce:08x}",
        name.to_string_lossy(),
        std::process::id()
    ));
    match std::fs::create_dir(&temp) {
        Ok(()) => {}
        // The parent is not ours to write in (an empty directory made for the store in one that
        // is not): created in place as before, in a directory made its owner's alone.
        Err(e) if in_place_only(&e) => return private_in_place(path),
        Err(e) => return Err(Error::io(&temp, e)),
    }
    let built = build_new_store(&temp);
    let placed = built.and_then(|()| match std::fs::rename(&temp, path) {
        Ok(()) => crate::store::disk::fsync_dir(parent),
        // Another process put a store (or something else) there first: open that.
        Err(e)
            if e.kind() == std::io::ErrorKind::DirectoryNotEmpty
                || e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) =>
        {
            remove_quietly(&temp);
            Ok(())
        }
        Err(e) if in_place_only(&e) => {
            remove_quietly(&temp);
            private_in_place(path)
        }
        Err(e) => Err(Error::io(path, e)),
    });
    if placed.is_err() {
        remove_quietly(&temp);
    }
    placed
}

/// Whether `e`, from making or renaming a new store's directory beside its path, means it can only
/// be created in place: the path is a mount point (or on another file system), or the parent
/// directory (or a sticky one's rules) does not let this process write there.
fn in_place_only(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{CrossesDevices, PermissionDenied, ReadOnlyFilesystem, ResourceBusy};
    matches!(
        e.kind(),
        ResourceBusy | CrossesDevices | PermissionDenied | ReadOnlyFilesystem
    )
}

/// An empty directory at `path` that a store is to be created in in place, made its owner's
/// alone first (a directory this process may not change is left as it is: sled's open then
/// says what is wrong, or the owner's mode stands).
fn private_in_place(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()) {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE));
    }
    Ok(())
}

/// Makes a whole new store in `dir`: sled's files and the format marker, all durable, sled
/// closed, and the directory and its files its owner's alone.
fn build_new_store(dir: &Path) -> Result<()> {
    std::fs::set_permissions(
        dir,
        std::os::unix::fs::PermissionsExt::from_mode(PRIVATE_DIR_MODE),
    )
    .map_err(|e| Error::io(dir, e))?;
    let db = open_sled(dir)?.map_err(Error::from)?;
    let marked = db
        .open_tree("meta")
        .and_then(|meta| meta.insert(FORMAT_KEY, &[WRITTEN_FORMAT]))
        .and_then(|_| db.flush());
    close_quietly(db);
    marked?;
    wait_for_sled_to_let_go(&dir.join("db"))?;
    make_private(dir)?;
    // A store being made has no failpoints armed yet.
    DiskSync::default().sync(dir, &Failpoints::default())
}

/// Waits until no sled thread holds `db` open any longer (sled's lock on it is free), so that
/// nothing writes in the directory once it is renamed.
fn wait_for_sled_to_let_go(db: &Path) -> Result<()> {
    wait_for_lock(db, LOCK_WAIT)
}

/// Waits up to `wait` until sled's lock on the file `db` is free; [`Error::Locked`] if it is
/// still held then. No file is not held; one that is not a regular file (a link, a pipe) is
/// refused without being opened ([`crate::store::disk::open_own`]), so nothing planted there
/// makes this block.
fn wait_for_lock(db: &Path, wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    let Some(file) = crate::store::disk::open_own(db, rustix::fs::OFlags::RDONLY)? else {
        return Ok(());
    };
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                return Err(Error::Locked {
                    path: db.parent().unwrap_or(db).to_path_buf(),
                });
            }
            Err(e) => return Err(Error::io(db, e.into())),
        }
    }
}

/// Removes a store directory this process was building and gave up on.
fn remove_quietly(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

impl Store {
    /// Waits up to `wait` until nothing holds the store at `path` open any longer: the last
    /// handle was dropped and sled's own threads, which outlive it a moment (longer on a disk
    /// slow to flush), have let go of its lock. A server calls this before it withdraws its
    /// server file, so a client that finds no server file opens the store at once rather than
    /// waiting [`LOCK_WAIT`] for a lock and then failing. [`Error::Locked`] if it is still held
    /// after `wait`; a store with no sled file is not held, and one whose sled file is not a
    /// regular file is [`Error::UnsafeFile`].
    #[cfg(any(feature = "client", test))]
    pub fn wait_until_closed(path: &Path, wait: Duration) -> Result<()> {
        wait_for_lock(&path.join("db"), wait)
    }

    /// Opens or creates the store at `path`.
    ///
    /// sled's background threads can hold the store's lock for a moment after its last handle is
    /// dropped, so a lock conflict is retried for up to [`LOCK_WAIT`] before it is reported as
    /// [`Error::Locked`]: a store closed a moment ago reopens, one held by a live process does not.
    /// A snapshot that a kill left half-written (`snap.*.generating`, which sled 0.34 would
    /// otherwise read and refuse) is removed, and sled opens from the previous one and its log.
    ///
    /// Every file of the store that sled or Mnemo opens must be a regular file (the store
    /// directory and `blobs/` real directories): a symbolic link, FIFO, device or socket is
    /// refused with [`Error::UnsafeFile`] before sled opens anything, and checked again once it
    /// has (see [`crate::store::disk`]). A panic in sled's open is [`Error::Corrupt`].
    pub fn open(path: &Path) -> Result<Store> {
        if is_regular_file(path) {
            return Err(Error::InvalidArgument(format!(
                "{} is a file, not a directory: a store is a directory (it is created if missing)",
                path.display()
            )));
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !parent.is_dir() {
                return Err(Error::InvalidArgument(format!(
                    "the directory {} does not exist; create it first, or put the store in an existing directory",
                    parent.display()
                )));
            }
        }
        if unborn(path)? {
            create_atomically(path)?;
        }
        let files = StoreFiles::check(path)?;
        refuse_missing_log(path)?;
        Store::open_checked(path, path, &files)
    }

    /// [`Store::open`] once `files` passed [`StoreFiles::check`]: sled opens `sled_dir` (the
    /// store at `path` itself, or a private copy of it).
    fn open_checked(path: &Path, sled_dir: &Path, files: &StoreFiles) -> Result<Store> {
        // Whether sled's files were there before this open: if they were, a missing format
        // marker means damage, not a new store.
        let existed = exists(&sled_dir.join("db")) || exists(&sled_dir.join("conf"));
        let deadline = Instant::now() + LOCK_WAIT;
        let mut removed_torn_snapshots = false;
        let db = loop {
            match open_sled(sled_dir)? {
                Ok(db) => break db,
                // sled holds the lock by the time it reads snapshots, so no other process is
                // writing one now.
                Err(e @ sled::Error::Corruption { .. }) if !removed_torn_snapshots => {
                    removed_torn_snapshots = true;
                    if remove_torn_snapshots(sled_dir)? == 0 {
                        return Err(Error::from(e));
                    }
                }
                Err(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock") => {
                    if Instant::now() >= deadline {
                        return Err(Error::Locked {
                            path: path.to_path_buf(),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(other) => return Err(Error::from(other)),
            }
        };
        // sled opened its files by path: refuse the store if one was swapped since the check.
        let dir_id = match files.confirm(sled_dir) {
            Ok(id) => id,
            Err(e) => {
                close_quietly(db);
                return Err(e);
            }
        };
        let values = Arc::new(ValueFile::in_dir(sled_dir).shown_as(path));
        let store = Store {
            path: path.to_path_buf(),
            events: db.open_tree("events")?,
            meta: db.open_tree("meta")?,
            index: IndexTrees::new(db.open_tree("index")?, db.open_tree("content")?)
                .with_values(values.clone()),
            db,
            failpoints: Arc::default(),
            disk: Arc::default(),
            values,
            copy: None,
            format: Arc::default(),
            dir_id,
            snapshots: Arc::default(),
            derived: Arc::default(),
            proven: Arc::new(Mutex::new(Head::EMPTY)),
        };
        match store.meta.get(FORMAT_KEY)? {
            Some(v) if v.len() == 1 && v[0] > FORMAT_VERSION => {
                return Err(Error::NewerFormat {
                    found: v[0],
                    max: FORMAT_VERSION,
                });
            }
            Some(v) if v.len() == 1 && v[0] >= 1 => store.format.store(v[0], Ordering::Relaxed),
            Some(_) => return Err(Error::corrupt("meta.format is not a valid version byte")),
            None => {
                if !store.events.is_empty() {
                    return Err(Error::corrupt("the store has events but no meta.format"));
                }
                if existed {
                    return Err(Error::corrupt(format!(
                        "{} holds a store whose log lost its format marker (meta.format): its db file is missing or damaged",
                        path.display()
                    )));
                }
                // The newest format the log holds: a new store's first events are the writer's;
                // an API write raises it with the first of its own (format 7).
                store.meta.insert(FORMAT_KEY, &[WRITTEN_FORMAT])?;
                store.sync(Durability::Fsync)?;
                store.format.store(WRITTEN_FORMAT, Ordering::Relaxed);
            }
        }
        Ok(store)
    }

    /// Opens an existing store; [`Error::NotFound`] if there is none at `path`.
    ///
    /// Its files are checked as by [`Store::open`].
    pub fn open_existing(path: &Path) -> Result<Store> {
        if is_regular_file(path) {
            return Err(Error::InvalidArgument(format!(
                "{} is a file, not a directory: pass the store's directory with --db",
                path.display()
            )));
        }
        let files = StoreFiles::check(path)?;
        Store::require(path)?;
        refuse_missing_log(path)?;
        Store::open_checked(path, path, &files)
    }

    /// [`Error::NotFound`] unless `path` holds a store (sled's files are there): for a command
    /// that must not create one where a `--db` was mistyped.
    pub fn require(path: &Path) -> Result<()> {
        if !exists(&path.join("conf")) && !exists(&path.join("db")) {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Opens an existing store for reading without changing any byte of it, also on a read-only
    /// file system or for a user who may only read it: sled opens a private copy of its files
    /// (in the system's temporary directory, made while a shared lock keeps writers out; see
    /// `disk::copy`), and the head record is copied with it. Costs a copy of the store (about
    /// what reading it costs; a reflink where the file system has them). A store a writer holds
    /// is [`Error::Locked`] after [`LOCK_WAIT`], as for [`Store::open_existing`]. Writing
    /// through the returned store changes the copy only.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if is_regular_file(path) {
            return Err(Error::InvalidArgument(format!(
                "{} is a file, not a directory: pass the store's directory with --db",
                path.display()
            )));
        }
        StoreFiles::check(path)?;
        if !exists(&path.join("conf")) && !exists(&path.join("db")) {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            });
        }
        refuse_missing_log(path)?;
        let dir = std::env::temp_dir();
        let prefix = format!("{}{}-", crate::store::disk::COPY_PREFIX, std::process::id());
        let copy = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir()
            .map_err(|source| Error::ReadCopy {
                dir: dir.clone(),
                source,
            })?;
        // Copies that reads killed before their cleanup left behind go now.
        if let Ok(meta) = std::fs::metadata(copy.path()) {
            use std::os::unix::fs::MetadataExt;
            crate::store::disk::sweep_stale_copies(&dir, meta.uid());
        }
        // A copy that fails on the temporary side (full, read-only) says so; a store file that
        // cannot be read keeps its own error.
        crate::store::disk::copy_for_reading(path, copy.path(), LOCK_WAIT).map_err(
            |e| match e {
                Error::Io {
                    path: failed,
                    source,
                } if failed.starts_with(copy.path()) => Error::ReadCopy { dir, source },
                other => other,
            },
        )?;
        let files = StoreFiles::check(copy.path())?;
        let mut store = Store::open_checked(path, copy.path(), &files)?;
        store.copy = Some(Arc::new(copy));
        Ok(store)
    }

    /// [`Store::open_read_only`] for a command that presents the store as it is now: refuses a
    /// log behind its recorded head, as [`Store::open_current`] does.
    pub fn open_current_read_only(path: &Path) -> Result<Store> {
        refuse_rolled_back(Store::open_read_only(path)?)
    }

    /// Whether this is a private read-only copy (see [`Store::open_read_only`]): a store no
    /// writer of this process holds, whose head record is final for the moment it was copied.
    pub fn is_read_only_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// The head this store last recorded, outside sled, after a durable commit (`None` if it never
    /// did: a new store, or one written only in `buffered` mode).
    ///
    /// sled's recovery treats damage in its log as a torn tail and silently rolls the log back to
    /// before it, head included, so the chain alone would look intact. This record, written after
    /// each `fsync` or `flush` commit, is what shows the loss.
    pub fn recorded_head(&self) -> Result<Option<Head>> {
        // A read-only store reads the record copied with its log, of the same moment.
        match &self.copy {
            Some(copy) => crate::store::disk::read_head(copy.path()),
            None => crate::store::disk::read_head(&self.path),
        }
    }

    /// Records `head` outside sled (see [`Store::recorded_head`] and [`crate::store::disk`]); called
    /// after a durable commit. Not fsynced itself, so it can lag the log after a power loss but
    /// never run ahead of it.
    pub(crate) fn record_head(&self, head: Head) -> Result<()> {
        self.failpoints.check(Failpoint::HeadRecord)?;
        self.disk()?.head.write(&self.path, head)
    }

    /// Why the log is behind the head this store recorded, if it is.
    pub fn rolled_back(&self) -> Result<Option<String>> {
        let Some(recorded) = self.recorded_head()? else {
            return Ok(None);
        };
        if recorded.seq == Seq(0) {
            return Ok(None);
        }
        // Compared with `meta.head`, not the log's end: the head is recorded after the commit
        // that wrote `meta.head`, so a crash leaves `meta.head` at or past it, and a `meta.head`
        // behind it was moved back.
        let head = self.head()?;
        // What the message names as the log's end: its last chained event, which can be past
        // `meta.head` when sled's recovery kept events but not the head that named them.
        let shown = self.log_end().unwrap_or(head);
        let behind = match recorded.seq.cmp(&head.seq) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => recorded.hash != head.hash,
            std::cmp::Ordering::Less => match self.get(recorded.seq)? {
                Some(record) => Frame::decode(&record).map_or(true, |f| f.hash != recorded.hash),
                None => true,
            },
        };
        Ok(behind.then(|| {
            format!(
                "this store committed {recorded} but its log now ends at {shown}: the log was truncated, damaged or rolled back (sled recovers a damaged log by dropping its tail)"
            )
        }))
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory this store's sled has open, as it was when it opened: a server proves it
    /// serves that directory, not whatever is at its path now (a copy moved into its place).
    #[cfg_attr(not(feature = "serve"), expect(dead_code))]
    pub(crate) fn dir_id(&self) -> DirId {
        self.dir_id
    }

    /// The head recorded in `meta`.
    pub fn head(&self) -> Result<Head> {
        match self.meta.get(HEAD_KEY)? {
            Some(v) => Head::decode(&v),
            None => Ok(Head::EMPTY),
        }
    }

    /// The stored record of event `seq` (whole: a payload kept in the value file read back and
    /// checked against its hash).
    pub fn get(&self, seq: Seq) -> Result<Option<Vec<u8>>> {
        self.events
            .get(seq.key())?
            .map(|v| self.resolve(seq, &v))
            .transpose()
    }

    /// The whole record from what sled holds under event `seq`'s key.
    fn resolve(&self, seq: Seq, stored: &[u8]) -> Result<Vec<u8>> {
        crate::store::disk::resolve(seq, stored, &self.values, self.format_marker())
    }

    /// Event `seq`, decoded (nothing else is checked); `None` when the log holds no record of it.
    pub fn event(&self, seq: Seq) -> Result<Option<Event>> {
        self.get(seq)?
            .map(|record| Event::decode(&record))
            .transpose()
    }

    /// Event `seq`, which the caller knows was written: [`Error::Corrupt`] when the log holds no
    /// record of it.
    pub fn written_event(&self, seq: Seq) -> Result<Event> {
        self.event(seq)?
            .ok_or_else(|| Error::corrupt(format!("event {seq} is missing from the log")))
    }

    /// Every stored record from `from` on, in key order, with the seq its key names.
    pub fn records(&self, from: Seq) -> impl Iterator<Item = Result<(Seq, Vec<u8>)>> + use<> {
        let store = self.clone();
        self.events
            .range(from.key()..)
            .map(move |item| store.resolve_item(item))
    }

    fn resolve_item(&self, item: sled::Result<(sled::IVec, sled::IVec)>) -> Result<(Seq, Vec<u8>)> {
        let (k, v) = item?;
        let seq = seq_of_key(&k)?;
        Ok((seq, self.resolve(seq, &v)?))
    }

    /// The stored records from `from` through `to`, in key order, with the seq each key names:
    /// none past `to` is read (a reader of the past never meets what a later record holds).
    pub fn records_through(
        &self,
        from: Seq,
        to: Seq,
    ) -> impl Iterator<Item = Result<(Seq, Vec<u8>)>> + use<> {
        let store = self.clone();
        // An empty stretch reads nothing (a range whose start is past its end is never asked
        // of sled).
        let to = if from > to { None } else { Some(to) };
        to.map(|to| self.events.range(from.key()..=to.key()))
            .into_iter()
            .flatten()
            .map(move |item| store.resolve_item(item))
    }

    /// [`Store::records`], a record whose payload the value file no longer gives back as it was
    /// written kept apart ([`Resolved::PayloadLost`]) rather than ending the walk: what a reader
    /// that can go on past one damaged payload (the proof, `log`) reads.
    pub(crate) fn records_or_lost(
        &self,
        from: Seq,
    ) -> impl Iterator<Item = Result<(Seq, Resolved)>> + use<> {
        let store = self.clone();
        self.events
            .range(from.key()..)
            .map(move |item| store.resolve_item_or_lost(item))
    }

    /// [`Store::records_back`], as [`Store::records_or_lost`] reads them.
    pub(crate) fn records_or_lost_back(
        &self,
        before: Seq,
    ) -> impl Iterator<Item = Result<(Seq, Resolved)>> + use<> {
        let store = self.clone();
        self.events
            .range(..before.key())
            .rev()
            .map(move |item| store.resolve_item_or_lost(item))
    }

    fn resolve_item_or_lost(
        &self,
        item: sled::Result<(sled::IVec, sled::IVec)>,
    ) -> Result<(Seq, Resolved)> {
        let (k, v) = item?;
        let seq = seq_of_key(&k)?;
        let resolved =
            crate::store::disk::resolve_or_lost(seq, &v, &self.values, self.format_marker())?;
        Ok((seq, resolved))
    }

    /// This store's failpoints, for fault-injection tests.
    #[doc(hidden)]
    pub fn failpoints(&self) -> &Failpoints {
        &self.failpoints
    }

    /// The index trees, for the writer's overlay.
    pub(crate) fn index_tree(&self) -> &IndexTrees {
        &self.index
    }

    #[cfg(any(test, feature = "testing"))]
    /// The raw sled trees `(events, meta, index)`, for tests and tools that must reach below the
    /// API (tamper tests). Writing through them breaks the store's invariants on purpose. File
    /// content is in a fourth tree, [`Store::raw_content_tree`].
    #[doc(hidden)]
    pub fn raw_trees(&self) -> (Tree, Tree, Tree) {
        (
            self.events.clone(),
            self.meta.clone(),
            self.index.index().clone(),
        )
    }

    #[cfg(any(test, feature = "testing"))]
    /// The raw sled tree of file content (the index's `b` keys), like [`Store::raw_trees`].
    #[doc(hidden)]
    pub fn raw_content_tree(&self) -> Tree {
        self.index.content().clone()
    }

    /// Appends `frames` (consecutive, continuing the head), then moves the head over them.
    ///
    /// Each event is its own sled write, not one transaction: sled recovers a prefix of its log
    /// after a crash, so a crash can keep only some of a batch, or its events without the head
    /// that names them. That tail was never acknowledged (callers are answered only after the
    /// sync that covers the head), and [`Store::catch_up`] moves the head over it when the store
    /// next opens for writing. (A transaction would make the batch atomic, but sled 0.34 writes
    /// each transaction's manifest into an IO buffer of its own: a second device write per commit.)
    ///
    /// A frame of a newer format than the store's marker (`meta.format`) raises the marker first,
    /// in the same sled log before the frame, so a build that cannot read the frame refuses the
    /// store (a store written by an earlier build gets the marker with its first new event).
    pub fn append(&self, frames: &[Frame]) -> Result<Head> {
        self.failpoints.check(Failpoint::Append)?;
        let Some(last) = frames.last() else {
            return self.head();
        };
        let records = self.stored_records(frames)?;
        let newest = records.iter().map(|r| r[0]).max().unwrap_or(0);
        if newest > self.format.load(Ordering::Relaxed) {
            self.failpoints.check(Failpoint::Format)?;
            self.meta.insert(FORMAT_KEY, &[newest])?;
            self.format.fetch_max(newest, Ordering::Relaxed);
        }
        for (frame, record) in frames.iter().zip(records) {
            self.failpoints.check(Failpoint::Event)?;
            self.events.insert(frame.seq.key(), record)?;
        }
        let head = Head {
            seq: last.seq,
            hash: last.hash,
        };
        self.failpoints.check(Failpoint::Head)?;
        self.meta.insert(HEAD_KEY, head.encode())?;
        Ok(head)
    }

    /// What sled is to hold for each of `frames`: the record, or for a large payload its stored
    /// form, the payloads appended to the value file (and durable there) first, so no record
    /// ever names bytes a crash could lose.
    fn stored_records(&self, frames: &[Frame]) -> Result<Vec<Vec<u8>>> {
        use crate::store::disk::{goes_to_value_file, split, stored_form};
        let mut records = Vec::with_capacity(frames.len());
        let (mut separated, mut payloads) = (Vec::new(), Vec::new());
        for frame in frames {
            if goes_to_value_file(frame) {
                let (rest, payload) = split(frame);
                separated.push(records.len());
                records.push(rest);
                payloads.push((frame.seq, payload));
            } else {
                records.push(frame.encode());
            }
        }
        if payloads.is_empty() {
            return Ok(records);
        }
        self.failpoints.check(Failpoint::Value)?;
        let seqs: Vec<Seq> = payloads.iter().map(|(seq, _)| *seq).collect();
        let refs = self.values.append(payloads)?;
        if let Some(append) = crate::store::disk::LastAppend::of(&seqs, &refs) {
            self.meta.insert(VALUES_KEY, &append.encode())?;
        }
        for (i, at) in separated.into_iter().zip(refs) {
            records[i] = stored_form(&records[i], &at);
        }
        Ok(records)
    }

    /// Refuses a call whose payload would go to the value file when that file was found cut
    /// short or removed ([`ValueFile::check_appendable`]), before the call is answered.
    pub(crate) fn check_values_appendable(&self) -> Result<()> {
        self.values.check_appendable()
    }

    /// Gives back the value file's bytes past the last payload a record names (what an append
    /// left when its records were not written), as the store opens for writing: the store's
    /// record of the last append says where it started and which events it was for, and the
    /// records sled kept of those say what is named.
    pub(crate) fn reclaim_values(&self) -> Result<()> {
        let Some(bytes) = self.meta.get(VALUES_KEY)? else {
            return Ok(());
        };
        let append = crate::store::disk::LastAppend::decode(&bytes)?;
        let events = append.events();
        let stored = self
            .events
            .range(events.start().key()..=events.end().key())
            .map(|item| {
                let (key, stored) = item?;
                Ok((seq_of_key(&key)?, stored))
            });
        let named = append.named_end(stored, self.format_marker())?;
        self.values.cut_past(named)
    }

    /// Writes index changes in one sled transaction over both index trees, so the index moves
    /// from one applied seq to another with nothing in between. The events the changes derive from
    /// must be appended first: the index never runs ahead of the log.
    pub(crate) fn write_index(&self, pending: &Pending) -> Result<()> {
        self.failpoints.check(Failpoint::Index)?;
        let writes: Vec<_> = pending.writes().collect();
        let stored = self.shared(&writes);
        (self.index.index(), self.index.content())
            .transaction(|(idx, content)| {
                for ((key, value), shared) in writes.iter().zip(&stored) {
                    let tree = if IndexTrees::is_content(key) {
                        content
                    } else {
                        idx
                    };
                    match (value, shared) {
                        (Some(_), Some(reference)) => tree.insert(*key, &reference[..])?,
                        (Some(v), None) => tree.insert(*key, *v)?,
                        (None, _) => tree.remove(*key)?,
                    };
                }
                Ok::<_, ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                TransactionError::Storage(e) => Error::from(e),
                TransactionError::Abort(()) => Error::corrupt("index transaction aborted"),
            })?;
        if let Some(applied) = writes
            .iter()
            .find_map(|(key, value)| crate::store::projection::applied_written(key, *value))
        {
            self.values.indexed_through(applied);
        }
        Ok(())
    }

    /// Keeps in memory the value file's payloads of the events after `applied`, so that the
    /// index written next for them names their bytes as the writer's would have (a catch-up of an
    /// index a crash left behind the log).
    pub(crate) fn remember_payloads_after(&self, applied: Seq) -> Result<()> {
        let after = Seq(applied.0.saturating_add(1));
        let stored = self.events.range(after.key()..).rev().map(|item| {
            let (key, stored) = item?;
            Ok((seq_of_key(&key)?, stored))
        });
        self.values.remember_stored(stored, self.format_marker())
    }

    /// For each of `writes` (in key order), the reference a content chunk is stored as when the
    /// value file already holds its bytes (see `store::disk`'s `shared_content`), or the pieces
    /// an edited chunk is stored as when the value file holds most of them (`chunk_pieces`),
    /// else `None`.
    fn shared(&self, writes: &[(&[u8], Option<&[u8]>)]) -> Vec<Option<Vec<u8>>> {
        let mut shared = crate::store::disk::share(
            writes,
            &self.values.recent_payloads(),
            IndexTrees::is_content,
        );
        // A chunk stored before can name the value file only if there is one.
        if !self.values.may_hold() {
            return shared;
        }
        let content = self.index.content();
        crate::store::disk::share_edits(
            writes,
            &mut shared,
            |key| content.get(key).ok().flatten().map(|v| v.to_vec()),
            &self.values,
            IndexTrees::is_content,
        );
        shared
    }

    /// Writes a whole index (a replay's from event 1: `writes`, as [`Pending::writes`] gives
    /// them) into a store whose index holds nothing yet (a store being made from a log): its
    /// entries from two threads at once, then the applied seq and the layout, so that a crash
    /// midway leaves an index that applied nothing, rebuilt on the next open, never one that
    /// claims events it lacks. The events must be appended first.
    #[cfg(feature = "replicate")]
    pub(crate) fn write_new_index<'a>(
        &self,
        writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<()> {
        self.failpoints.check(Failpoint::Index)?;
        let trees = (self.index.index(), self.index.content());
        if !trees.0.is_empty() || !trees.1.is_empty() {
            return Err(Error::corrupt(
                "a whole index is written only into a store whose index holds nothing",
            ));
        }
        let writes: Vec<_> = writes.filter(|(_, value)| value.is_some()).collect();
        let shared = self.shared(&writes);
        // Each entry's value is borrowed: the stored reference where there is one, else the
        // value as the replay made it.
        let (last, entries): (Vec<_>, Vec<_>) = writes
            .iter()
            .zip(&shared)
            .filter_map(|((key, value), shared)| Some((*key, shared.as_deref().or(*value)?)))
            .partition(|(key, _)| crate::store::projection::is_progress_key(key));
        let put = |part: &[(&[u8], &[u8])]| -> Result<()> {
            for (key, value) in part {
                match IndexTrees::is_content(key) {
                    true => trees.1.insert(key, *value)?,
                    false => trees.0.insert(key, *value)?,
                };
            }
            Ok(())
        };
        let (first, second) = entries.split_at(entries.len() / 2);
        std::thread::scope(|s| {
            let other = s.spawn(|| put(second));
            let mine = put(first);
            let theirs = other.join().unwrap_or_else(|_| {
                Err(Error::Poisoned {
                    cause: "a thread panicked while it wrote an index".into(),
                })
            });
            mine.and(theirs)
        })?;
        put(&last)?;
        self.values.indexed_through(Seq(u64::MAX));
        Ok(())
    }

    /// Makes everything written so far as durable as `mode` asks.
    pub fn sync(&self, mode: Durability) -> Result<()> {
        self.failpoints.check(Failpoint::Sync)?;
        match mode {
            Durability::Buffered => Ok(()),
            Durability::Flush => {
                self.failpoints.check(Failpoint::Flush)?;
                self.db.flush()?;
                Ok(())
            }
            Durability::Fsync | Durability::Replicated => {
                self.failpoints.check(Failpoint::Flush)?;
                self.db.flush()?;
                // IMPORTANT: sled 0.34's flush uses sync_file_range on Linux, which does not make
                // data durable (sled issue #1452) nor persist file growth. fsync every file and
                // directory of the store that may hold unsynced data, so an acknowledged write
                // survives power loss.
                self.disk()?.sync.sync(&self.path, &self.failpoints)
            }
        }
    }

    fn disk(&self) -> Result<std::sync::MutexGuard<'_, Disk>> {
        self.disk.lock().map_err(|_| Error::Poisoned {
            cause: "a thread panicked while syncing the store's files".into(),
        })
    }

    #[cfg(any(test, feature = "testing"))]
    /// [`Store::open_existing`] for a command that presents the store as it is now (`ls`, `cat`,
    /// `log`, `history`, `export`): refuses, with [`Error::Corrupt`], a log that is behind the
    /// head the store recorded at its last commit or close, rather than show a rolled-back log
    /// as current. (`verify` opens with [`Store::open_existing`] and reports it.)
    pub fn open_current(path: &Path) -> Result<Store> {
        refuse_rolled_back(Store::open_existing(path)?)
    }

    /// The highest seq the `events` tree holds a record for (`Seq(0)` when it holds none),
    /// whatever the records say: what a verifier has to check.
    pub fn last_seq(&self) -> Result<Seq> {
        match self.events.last()? {
            Some((key, _)) => seq_of_key(&key),
            None => Ok(Seq(0)),
        }
    }

    /// The replayed trees of the past this open store keeps (shared by its clones).
    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    /// Runs `with` on the value of type `T` this open store keeps for a reader above it (made
    /// with `T::default()` the first time), shared by the store's clones; one `with` at a time
    /// per store. What it keeps must check itself against the log: a store opened anew starts
    /// with none.
    pub(crate) fn derived<T: Any + Send + Default, R>(&self, with: impl FnOnce(&mut T) -> R) -> R {
        let mut kept = self
            .derived
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = kept
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()));
        // Keyed by its type, so the downcast holds; a fresh value otherwise, rather than a panic.
        let mut fresh = T::default();
        with(slot.downcast_mut::<T>().unwrap_or(&mut fresh))
    }

    /// The format marker (`meta.format`: the newest format the log may hold), as this open store
    /// read it or last raised it.
    pub(crate) fn format_marker(&self) -> u8 {
        self.format.load(Ordering::Relaxed)
    }

    /// The last event this open store proved its log through (see [`crate::store::proof`]).
    pub(crate) fn proven(&self) -> Head {
        *self
            .proven
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the log is proven through `head`, unless it was proven further already.
    pub(crate) fn proved(&self, head: Head) {
        let mut proven = self
            .proven
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if head.seq > proven.seq {
            *proven = head;
        }
    }

    /// The log's last event. That is the head, unless a crash cut a commit short after its events
    /// were written but before the head was: then it is the last of the events past the head,
    /// each of which must continue the chain ([`crate::model::chain`]), or this fails with
    /// [`Error::Corrupt`] (a writer must not overwrite them). Reads only.
    pub fn log_end(&self) -> Result<Head> {
        let mut head = self.head()?;
        let mut chain = Chain::after(head.seq, head.hash);
        for item in self.records(chain.next()) {
            let (seq, record) = item?;
            let Ok(next) = chain.check(seq, &record) else {
                return Err(Error::corrupt(format!(
                    "the log goes on past its head {head} with event {seq}, which does not continue the chain; run `mnemo verify` to see what broke"
                )));
            };
            head = Head {
                seq,
                hash: next.hash,
            };
        }
        Ok(head)
    }

    /// Moves `meta.head` over the events a crash left past it ([`Store::log_end`]), as the
    /// first step of recovery. Returns the head, and whether it moved.
    pub(crate) fn settle_head(&self) -> Result<(Head, bool)> {
        let stored = self.head()?;
        let head = self.log_end()?;
        let moved = head != stored;
        if moved {
            self.meta.insert(HEAD_KEY, head.encode())?;
        }
        Ok((head, moved))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_opening_is_a_corrupt_store_error_naming_the_store() {
        let path = Path::new("/some/store");
        let caught = without_panic(path, || -> u8 { panic!("sled: unexpected segment header") });
        match caught {
            Err(Error::Corrupt { what }) => {
                assert!(what.contains("/some/store"), "{what}");
                assert!(what.contains("unexpected segment header"), "{what}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert_eq!(without_panic(path, || 7).expect("no panic"), 7);
    }

    #[test]
    fn records_through_read_that_stretch_and_nothing_past_it() {
        use crate::model::chain::sample::frames;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("store")).expect("open");
        store.append(&frames(5)).expect("append");
        let seqs = |from: u64, to: u64| -> Vec<u64> {
            store
                .records_through(Seq(from), Seq(to))
                .map(|item| item.expect("read").0.0)
                .collect()
        };
        assert_eq!(seqs(2, 4), [2, 3, 4]);
        assert_eq!(seqs(4, 9), [4, 5]);
        assert_eq!(seqs(3, 3), [3]);
        assert!(seqs(5, 3).is_empty(), "an empty stretch");
        assert!(seqs(6, 9).is_empty());
    }

    #[test]
    fn waiting_until_closed_ends_when_the_last_handle_lets_go_and_not_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store");
        Store::wait_until_closed(&path, Duration::ZERO).expect("no store is not held");
        let store = Store::open(&path).expect("open");
        match Store::wait_until_closed(&path, Duration::from_millis(50)) {
            Err(Error::Locked { path: held }) => assert_eq!(held, path),
            other => panic!("an open store is held, got {other:?}"),
        }
        let dropping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let closer = std::thread::spawn({
            let dropping = Arc::clone(&dropping);
            move || {
                std::thread::sleep(Duration::from_millis(200));
                dropping.store(true, Ordering::SeqCst);
                drop(store);
            }
        });
        Store::wait_until_closed(&path, Duration::from_secs(30)).expect("closed in time");
        assert!(
            dropping.load(Ordering::SeqCst),
            "it waited for the last handle"
        );
        Store::open(&path).expect("opens at once");
        closer.join().expect("closer");
    }

    #[test]
    fn waiting_until_closed_never_opens_a_pipe_in_place_of_the_sled_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &db,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        match Store::wait_until_closed(dir.path(), Duration::from_secs(30)) {
            Err(Error::UnsafeFile { .. }) => {}
            other => panic!("a pipe is refused unopened, got {other:?}"),
        }
    }
}
