//! Fixtures shared by the benches, built outside the timed loops.

#![allow(dead_code)]

use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer};
use serde_json::json;

/// A store in a temporary directory that lives as long as the fixture.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub server: MnemoMemoryToolServer,
}

/// Opens a fresh store with `durability`.
pub fn fresh(durability: Durability) -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let client = MnemoClient::builder(dir.path().join("bench.mnemo.db"))
        .agent_id("bench")
        .durability(durability)
        .open()
        .expect("open store");
    Fixture {
        _dir: dir,
        server: MnemoMemoryToolServer::new(client),
    }
}

/// Creates `files` small files under `dir`, spread over subdirectories of 100 files each, from
/// several threads so the writer commits them in large groups.
pub fn fill(server: &MnemoMemoryToolServer, dir: &str, files: usize) {
    const THREADS: usize = 16;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let server = server.clone();
            scope.spawn(move || {
                for i in (t..files).step_by(THREADS) {
                    let input = json!({
                        "command": "create",
                        "path": format!("{dir}/d{:04}/f{i:06}.txt", i / 100),
                        "file_text": "a small memory\n",
                    });
                    let result = server.handle(&input);
                    assert!(
                        result.get("is_error").is_none(),
                        "fixture create failed: {result}"
                    );
                }
            });
        }
    });
}

impl Fixture {
    /// Closes `fixture`'s store and opens it again with `durability`.
    pub fn reopen(fixture: Fixture, path: &std::path::Path, durability: Durability) -> Fixture {
        let Fixture { _dir, server } = fixture;
        drop(server);
        let client = MnemoClient::builder(path)
            .agent_id("bench")
            .durability(durability)
            .open()
            .expect("reopen store");
        Fixture {
            _dir,
            server: MnemoMemoryToolServer::new(client),
        }
    }
}
