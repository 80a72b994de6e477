//! The server file: how local clients find the server that holds a store, and its credential.
//!
//! While `mnemo serve` runs it keeps [`SERVER_FILE`] in the store directory: JSON with the URL,
//! the address, the server's pid and the operator token. Only the directory's owner can read it
//! (mode 0600), so only that user's processes can act as the operator.
//!
//! It is written to a fresh temporary name opened with `O_CREAT | O_EXCL` (which never follows a
//! symlink, not even a dangling one) and renamed over [`SERVER_FILE`] (a rename replaces a
//! symlink planted there rather than writing through it), so a reader sees either no file or a
//! whole one. A file left by a server that died is stale: the new server holds the store's lock,
//! so no other server can be serving it, and it replaces the file. Clients tell a live file from a
//! stale one with [`ServerFile::is_live`]. On a clean exit the server removes the file, if it is
//! still its own.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The server file's name in the store directory.
pub const SERVER_FILE: &str = "mnemo-server.json";

/// How long [`ServerFile::is_live`] waits for the server to accept a connection.
const CONNECT_WAIT: Duration = Duration::from_millis(500);

/// What the server file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFile {
    /// The base URL, such as `http://127.0.0.1:41234`.
    pub url: String,
    /// The address the server listens on.
    pub address: SocketAddr,
    /// The server's process id.
    pub pid: u32,
    /// The operator's bearer token.
    pub token: String,
}

impl ServerFile {
    /// The server file of the store at `store_dir`.
    pub fn path(store_dir: &Path) -> PathBuf {
        store_dir.join(SERVER_FILE)
    }

    /// Reads the server file of the store at `store_dir`; `Ok(None)` when there is none.
    pub fn read(store_dir: &Path) -> std::io::Result<Option<ServerFile>> {
        let text = match std::fs::read_to_string(ServerFile::path(store_dir)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the server file is not valid ({e})"),
            )
        })
    }

    /// Whether the server it names still runs: its process exists (where the OS shows it) and
    /// its address accepts a connection.
    pub fn is_live(&self) -> bool {
        let proc = Path::new("/proc");
        if proc.is_dir() && !proc.join(self.pid.to_string()).exists() {
            return false;
        }
        TcpStream::connect_timeout(&self.address, CONNECT_WAIT).is_ok()
    }

    /// Writes this as the server file of the store at `store_dir`, replacing any stale one (and
    /// any symlink planted at its name, which is not followed). Returns the file's path.
    pub fn publish(&self, store_dir: &Path) -> std::io::Result<PathBuf> {
        let target = ServerFile::path(store_dir);
        let temporary = store_dir.join(format!(".{SERVER_FILE}.{}.tmp", self.pid));
        // A temporary file a crashed start left behind; removing a symlink removes only the link.
        match std::fs::remove_file(&temporary) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        text.push(b'\n');
        let written = create_private(&temporary).and_then(|mut file| {
            file.write_all(&text)?;
            file.sync_all()
        });
        let renamed = written.and_then(|()| std::fs::rename(&temporary, &target));
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
        // The rename is durable once the directory is.
        if let Ok(dir) = std::fs::File::open(store_dir) {
            let _ = dir.sync_all();
        }
        Ok(target)
    }

    /// Removes the server file of the store at `store_dir` if it is still this one (a newer
    /// server's file is left alone).
    pub fn withdraw(&self, store_dir: &Path) -> std::io::Result<()> {
        match ServerFile::read(store_dir) {
            Ok(Some(current)) if current == *self => {
                std::fs::remove_file(ServerFile::path(store_dir))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Creates `path`, which must not exist (a symlink there is not followed), readable and
/// writable by its owner only.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(pid: u32) -> ServerFile {
        ServerFile {
            url: "http://127.0.0.1:9".into(),
            address: "127.0.0.1:9".parse().expect("addr"),
            pid,
            token: "ab".repeat(32),
        }
    }

    #[test]
    fn published_files_read_back_and_are_withdrawn_only_by_their_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(ServerFile::read(dir.path()).expect("read"), None);
        let ours = file(std::process::id());
        ours.publish(dir.path()).expect("publish");
        assert_eq!(
            ServerFile::read(dir.path()).expect("read"),
            Some(ours.clone())
        );
        file(1).withdraw(dir.path()).expect("withdraw");
        assert!(
            ServerFile::path(dir.path()).exists(),
            "another server's file stays"
        );
        ours.withdraw(dir.path()).expect("withdraw");
        assert!(!ServerFile::path(dir.path()).exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert!(names.is_empty(), "no temporary file is left: {names:?}");
    }

    #[test]
    fn a_dead_address_is_not_live() {
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        assert!(!file(std::process::id()).is_live());
    }
}
