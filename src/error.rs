//! The library's one error type at the storage boundary.
//!
//! Expected outcomes of a memory-tool call (a missing file, a rejected path) are not errors: they are
//! result texts with `is_error: true`, produced by the semantics core and recorded in the log. This
//! enum is for what stops Mnemo from doing its job at all — the store could not be opened, read or
//! made durable — and every message says what to do about it.

use std::path::PathBuf;

/// Convenience alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a store operation could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store directory is already open in another process (sled allows one process per store).
    #[error(
        "the store at {path} is in use by another process; close that process (or point --db at another store) and try again. If it is a `mnemo serve` (which `mnemo tool` and `mnemo mcp` start in the background, and which exits after its idle time), the pid is in mnemo-server.json in the store directory, and the read and admin commands reach the store through it"
    )]
    Locked {
        /// The store directory.
        path: PathBuf,
    },

    /// The client reaches its store through a `mnemo serve` process (the store was open there
    /// when the client was opened), and what was asked needs the store open in this process.
    #[error(
        "{what} needs the store open in this process, but the store at {path} is held by the mnemo server at {url}, which this client reaches over HTTP; use the client's other calls (the tool server, records, log, history, show, diff, verify, head, grants), which the server answers, or stop the server and open the store again"
    )]
    NotLocal {
        /// The store directory.
        path: PathBuf,
        /// The server's base URL.
        url: String,
        /// What was asked, such as `MnemoClient::store`.
        what: String,
    },

    /// A write, or a read that needs the writer, on a store opened read-only.
    #[error(
        "{what} writes, but the store at {path} was opened read-only (a private copy that changes none of its bytes); open it for writing (without `read_only`) to change it"
    )]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
        /// What was asked.
        what: String,
    },

    /// A call to the `mnemo serve` that holds the store failed: it could not be reached, broke
    /// off, refused the request or answered with something unreadable. The message is the HTTP
    /// client's (a `RemoteError`'s), which says which.
    #[error("{reason}")]
    Server {
        /// What failed, and what to do about it.
        reason: String,
        /// Whether the request never reached a server (so it wrote nothing).
        unreachable: bool,
        /// The HTTP status of a refused request.
        status: Option<u16>,
    },

    /// A read could not make the private copy of the store it reads (see
    /// `Store::open_read_only`).
    #[error(
        "a read copies the store into a private directory under {dir} (the system's temporary directory, $TMPDIR) and could not: {source}; set TMPDIR to a writable directory with room for a copy of the store"
    )]
    ReadCopy {
        /// The temporary directory.
        dir: PathBuf,
        /// What failed.
        source: std::io::Error,
    },

    /// A store that must already exist (for `verify`, `log`, ...) does not.
    #[error(
        "no store at {path}; pass the --db of an existing store (or set MNEMO_DB). A store is created only by `mnemo tool`, `mnemo mcp` or `mnemo serve` (or a client's open) on a new or empty path, and `mnemo demo` makes a scratch one of its own"
    )]
    NotFound {
        /// The path that was looked up.
        path: PathBuf,
    },

    /// The store was written by a newer Mnemo whose on-disk format this build does not know.
    #[error(
        "store format version {found} is newer than this mnemo supports (max {max}); upgrade mnemo to open it"
    )]
    NewerFormat {
        /// The version found on disk.
        found: u8,
        /// The newest version this build reads.
        max: u8,
    },

    /// Bytes on disk could not be decoded; the store is damaged or was edited by hand.
    #[error(
        "corrupt store: {what}; it was damaged or edited outside Mnemo. Restore it from a backup (`mnemo verify` names the first bad event when the store opens)"
    )]
    Corrupt {
        /// What could not be decoded, and where.
        what: String,
    },

    /// A record read to show or answer something breaks the log's chain: its payload or chain
    /// hash does not recompute, it does not link to its neighbours, or the chain does not lead
    /// to the head the store recorded. Nothing read from it is shown.
    #[error(
        "event {seq} is not the event the log's chain recorded ({what}): the log was damaged or edited outside Mnemo, so nothing read from it is shown. `mnemo verify` checks the whole log and names every bad event; restore the store from a replica or backup"
    )]
    ChainBroken {
        /// The first seq at which the chain breaks.
        seq: u64,
        /// Which rule broke, in words.
        what: String,
    },

    /// A file or directory of the store is not what the store keeps there — a symbolic link, a
    /// pipe, a device, a socket, a directory where a file belongs or the reverse — or it was
    /// replaced while the store was being opened. Mnemo opens none of them (see
    /// the `disk` module).
    #[error("{path} {what}; {fix}")]
    UnsafeFile {
        /// The file or directory.
        path: PathBuf,
        /// What it is, and what the store keeps there.
        what: String,
        /// What to do about it.
        fix: String,
    },

    /// An earlier storage failure left the writer unable to guarantee the chain; writes are refused.
    ///
    /// Like fjall's poisoned state: after a failed append or fsync Mnemo cannot know what reached the
    /// disk, so it refuses every further write instead of risking a fork of the chain. Reopening the
    /// store recovers to the last durable event.
    #[error(
        "a storage failure poisoned the store ({cause}); reopen the store to recover to the last durable event: restart the server that holds it (a server a client started exits by itself once no call is in progress), or close every client of a store opened in the process"
    )]
    Poisoned {
        /// The failure that poisoned the store.
        cause: String,
    },

    /// The store open in this process was closed for a redaction and could not be opened again.
    #[error(
        "the store at {path} is closed: {cause}; fix that and open the store again (restart the program or the server)"
    )]
    WriterStopped {
        /// The store directory.
        path: PathBuf,
        /// Why it is closed.
        cause: String,
    },

    /// The embedded database (sled) failed to read or write: the disk, its permissions, or
    /// damaged bytes. What it said is the message; the database's own error is the source.
    #[error("storage error: {0}; check the disk and permissions of the store directory")]
    Storage(#[from] StorageError),

    /// An I/O error outside sled (fsync of the store's files, reading a directory).
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A replica in object storage could not be read or written.
    #[error(
        "the replica at {url} failed: {cause}; check the URL, that the location exists and is writable, and try again"
    )]
    Replica {
        /// The replica's URL.
        url: String,
        /// What the object store said.
        cause: String,
    },

    /// A fleet node that held a store lost it: another node took it over (its claim in the
    /// fleet's bucket came first), so this node's write was not made durable there and is not
    /// acknowledged. Nothing of it is in the store's history; send it again through any node.
    #[error(
        "this node no longer holds the store {store}: a node of epoch {epoch} took it over, so the write was not acknowledged; send it again (any node of the fleet forwards it to the store's holder)"
    )]
    Fenced {
        /// The store.
        store: String,
        /// The epoch of the lease that took the store over (the highest this node saw).
        epoch: u64,
    },

    /// A replica's objects (or a fleet store's log) break their format, the chain rules or
    /// their checkpoints: damaged or altered where they lie (`mnemo verify --from` names what
    /// broke).
    #[error(
        "the replica or fleet log is damaged: {what}; run `mnemo verify --from URL` to see it whole; a replica that was altered is replaced by shipping to a new one (or restoring from another), and a fleet store's log is restored up to its last good event with `mnemo restore --from URL --at SEQ --db NEW`"
    )]
    ReplicaDamaged {
        /// What broke, and where.
        what: String,
    },

    /// An argument given to the library was not valid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Builds an [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds an [`Error::ReplicaDamaged`].
    #[cfg(feature = "replicate")]
    pub(crate) fn damaged(what: impl Into<String>) -> Self {
        Error::ReplicaDamaged { what: what.into() }
    }

    /// Whether the store's bytes are damaged (a record that does not decode, or that sled finds
    /// damaged or cannot find), rather than the disk failing to read or write them.
    pub(crate) fn is_damage(&self) -> bool {
        match self {
            Error::Corrupt { .. } => true,
            Error::Storage(e) => e.is_damage(),
            _ => false,
        }
    }

    /// Builds an [`Error::Corrupt`].
    pub(crate) fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt { what: what.into() }
    }
}

/// What the embedded database said when it failed, kept whole as the error's source but not
/// part of the API: which database Mnemo embeds is its own business.
#[derive(Debug)]
pub struct StorageError(pub(crate) sled::Error);

impl StorageError {
    /// Whether the database found bytes of its files damaged (rather than failing to read or
    /// write them).
    pub fn is_damage(&self) -> bool {
        match &self.0 {
            sled::Error::Corruption { .. } => true,
            // A value sled keeps in a blob file of its own, whose file is gone: sled names no
            // path, but every other file it reads is open from the start.
            sled::Error::Io(e) => e.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Error {
        Error::Storage(StorageError(e))
    }
}
