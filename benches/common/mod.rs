//! Fixtures shared by the benches, built outside the timed loops.

#![allow(dead_code)]

#[path = "../../tests/support/text.rs"]
pub mod text;

#[path = "../../tests/support/log_builder.rs"]
mod log_builder;
pub use log_builder::build_log_of;

use std::path::{Path, PathBuf};

use mnemo::Seq;
use mnemo::testing::Store;
use mnemo::tool::Command;
use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer};
use serde_json::{Value, json};

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

// ---------------------------------------------------------------------------------------------
// Shared by tool_calls, directory, verify, open and footprint.
// ---------------------------------------------------------------------------------------------

/// Whether this bench binary runs in criterion's smoke mode (`cargo bench -- --test`), where every
/// bench runs once: fixtures are then built small so CI stays fast.
pub fn test_mode() -> bool {
    std::env::args().any(|a| a == "--test")
}

/// `full` in a real run, `smoke` under `--test`.
pub fn sizes(full: &[usize], smoke: &[usize]) -> Vec<usize> {
    if test_mode() { smoke } else { full }.to_vec()
}

/// Panics with the result text unless `result` is a successful `tool_result`.
#[track_caller]
pub fn ok(result: &Value) {
    assert!(result.get("is_error").is_none(), "call failed: {result}");
}

/// Opens the store at `path` as agent `bench` with `durability`.
pub fn open_server(path: &Path, durability: Durability) -> MnemoMemoryToolServer {
    let client = MnemoClient::builder(path)
        .agent_id("bench")
        .durability(durability)
        .open()
        .expect("open store");
    MnemoMemoryToolServer::new(client)
}

/// Makes everything `server` wrote durable, then closes it (its writer is joined when the last
/// clone goes).
pub fn close(server: MnemoMemoryToolServer) {
    server
        .client()
        .store()
        .expect("a store open here")
        .sync(Durability::Fsync)
        .expect("sync store");
    drop(server);
}

impl Fixture {
    /// The store directory.
    pub fn path(&self) -> PathBuf {
        self.server.client().path().to_path_buf()
    }

    /// A private copy of the closed store at `template`, opened with `durability`.
    pub fn copy_of(template: &Path, durability: Durability) -> Fixture {
        let dir = tempfile::tempdir_in(cache_dir()).expect("temporary directory");
        let path = dir.path().join("bench.mnemo.db");
        copy_dir(template, &path);
        Fixture {
            _dir: dir,
            server: open_server(&path, durability),
        }
    }
}

/// Sum of the sizes of the regular files under `path` (what the store costs on disk, in bytes
/// of file length; sled preallocates nothing sparse, so this is close to `du --apparent-size`).
pub fn disk_bytes(path: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(path).expect("read store directory") {
        let entry = entry.expect("directory entry");
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            total += disk_bytes(&entry.path());
        } else if kind.is_file() {
            total += entry.metadata().expect("metadata").len();
        }
    }
    total
}

/// Copies the directory tree `from` to `to` (which must not exist).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read template") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Where built fixtures are cached between runs: `$MNEMO_BENCH_FIXTURES`, else
/// `<target dir>/bench-fixtures` (the bench binary lives in `<target dir>/<profile>/deps`).
/// Delete it to force a rebuild.
pub fn cache_dir() -> PathBuf {
    let dir = std::env::var_os("MNEMO_BENCH_FIXTURES")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.parent()?.join("bench-fixtures"))
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-fixtures"));
    std::fs::create_dir_all(&dir).expect("create fixture cache");
    dir
}

/// The store `<cache>/<name>/store`, built by `build` (given a store path that does not exist yet)
/// the first time and reused after that. A build goes to a temporary name and is renamed into place
/// once complete, so an interrupted build is never mistaken for a fixture.
pub fn cached(name: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let dir = cache_dir().join(name);
    let store = dir.join("store");
    if dir.join("READY").exists() {
        return store;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let tmp = cache_dir().join(format!("{name}.building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("create fixture directory");
    let started = std::time::Instant::now();
    build(&tmp.join("store"));
    std::fs::write(tmp.join("READY"), b"").expect("mark fixture ready");
    std::fs::rename(&tmp, &dir).expect("move fixture into place");
    eprintln!(
        "built fixture {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    store
}

/// A closed store holding `files` small files under `/memories/big` (100 per subdirectory, so a
/// listing two levels deep shows every file), cached.
pub fn directory_template(files: usize) -> PathBuf {
    cached(
        &format!("dir-v{}-{files}", mnemo::testing::INDEX_LAYOUT),
        |path| {
            let server = open_server(path, Durability::Buffered);
            fill(&server, "/memories/big", files);
            close(server);
        },
    )
}

/// The `seq`-th command (from 1) of the synthetic log: blocks of ten calls, each of which creates
/// four notes, views one (whole and a range), edits it with `str_replace` and `insert`, renames
/// one and deletes one, so every call succeeds and 3 of the 4 notes stay (30 live files per 100
/// events). Notes go 30 blocks to a directory.
pub fn mix_command(seq: u64) -> Command {
    let block = (seq - 1) / 10;
    let dir = format!("/memories/notes/d{:04}", block / 30);
    let note = |tag: &str| format!("{dir}/n{block:07}-{tag}.md");
    match (seq - 1) % 10 {
        0 => Command::Create {
            path: note("a"),
            file_text: format!(
                "# Note {block}\nstatus: open\n- the user prefers short answers\n- project: mnemo, block {block}\n- next step: review the log\n"
            ),
        },
        1 => Command::Create {
            path: note("b"),
            file_text: format!("reference material for block {block}\n"),
        },
        2 => Command::Create {
            path: note("c"),
            file_text: format!("scratch {block}\n"),
        },
        3 => Command::View {
            path: note("a"),
            view_range: None,
        },
        4 => Command::StrReplace {
            path: note("a"),
            old_str: "status: open".into(),
            new_str: Some("status: done".into()),
        },
        5 => Command::Insert {
            path: note("a"),
            insert_line: 1,
            insert_text: format!("- follow-up recorded at event {seq}\n"),
        },
        6 => Command::View {
            path: note("a"),
            view_range: Some((1, 3)),
        },
        7 => Command::Rename {
            old_path: note("b"),
            new_path: note("b-archived"),
        },
        8 => Command::Delete { path: note("c") },
        _ => Command::Create {
            path: note("d"),
            file_text: format!(
                "Summary of block {block}: the agent reviewed the notes, closed the open item and archived the reference. Nothing is pending.\n"
            ),
        },
    }
}

/// Writes the first `events` events of the synthetic log ([`mix_command`]) into a new store at
/// `path`, without going through the writer: a second thread answers each call against an
/// in-memory replay (the same step the writer runs) and makes the frames, this one appends them
/// 1,024 at a time, and the index is brought up to the head at the end with
/// [`Store::catch_up`], so the result is a store `verify` finds intact.
pub fn build_log(path: &Path, events: u64) {
    build_log_of(path, events, mix_command);
}

/// A closed store whose log holds the first `events` events of the synthetic log, index caught
/// up, cached.
pub fn event_log(events: u64) -> PathBuf {
    cached_log("mix1", events, mix_command)
}

/// The closed store, cached under a name made of `name` and `events`, whose log holds the first
/// `events` events of the log whose `seq`-th command is `command(seq)`, index caught up.
fn cached_log(name: &str, events: u64, command: fn(u64) -> Command) -> PathBuf {
    let path = cached(
        &format!(
            "log-v{}-i{}-{name}-{events}",
            mnemo::testing::event::FORMAT_VERSION,
            mnemo::testing::INDEX_LAYOUT
        ),
        |path| build_log_of(path, events, command),
    );
    let store = Store::open(&path).expect("open cached log");
    let head = store.head().expect("head");
    let applied = store.index().applied().expect("applied seq");
    assert!(
        head.seq == Seq(events) && applied == head.seq,
        "cached fixture {} is stale (head {}, index at {}); delete it",
        path.display(),
        head.seq,
        applied
    );
    path
}

/// Files in the tree of the view-heavy log ([`view_heavy_command`]): 20 directories of 100.
pub const VIEW_HEAVY_FILES: u64 = 2_000;

/// One call in this many of the view-heavy log, after the tree is built, lists `/memories`.
pub const VIEW_HEAVY_EVERY: u64 = 20;

/// The `seq`-th command (from 1) of the view-heavy log, closer to what agents send than
/// [`mix_command`]: the first [`VIEW_HEAVY_FILES`] calls create a tree of small notes
/// (`/memories/dNN/fNNNN.md`), then every [`VIEW_HEAVY_EVERY`]th call views `/memories` (a
/// listing of all 2,020 entries, two levels deep) and the others view, edit and rename notes
/// of that tree in a cycle that keeps it at 2,000 files, every call succeeding.
pub fn view_heavy_command(seq: u64) -> Command {
    let note = |i: u64| format!("/memories/d{:02}/f{i:04}.md", i / 100);
    if seq <= VIEW_HEAVY_FILES {
        let i = seq - 1;
        return Command::Create {
            path: note(i),
            file_text: format!("# Note {i}\nstatus: open\n- the user prefers short answers\n"),
        };
    }
    let k = seq - VIEW_HEAVY_FILES;
    if k % VIEW_HEAVY_EVERY == 0 {
        return Command::View {
            path: "/memories".into(),
            view_range: None,
        };
    }
    // A cycle of six calls on one note, counting only the calls that are not root views;
    // successive cycles walk the notes.
    let j = k - k / VIEW_HEAVY_EVERY - 1;
    let i = (j / 6) % VIEW_HEAVY_FILES;
    let moved = format!("/memories/d{:02}/f{i:04}-moved.md", i / 100);
    let flip = |from: &str, to: &str| Command::StrReplace {
        path: note(i),
        old_str: format!("status: {from}"),
        new_str: Some(format!("status: {to}")),
    };
    match j % 6 {
        0 => Command::View {
            path: note(i),
            view_range: None,
        },
        1 => Command::Rename {
            old_path: note(i),
            new_path: moved,
        },
        2 => Command::View {
            path: moved,
            view_range: Some((1, 2)),
        },
        3 => Command::Rename {
            old_path: moved,
            new_path: note(i),
        },
        4 => flip("open", "done"),
        _ => flip("done", "open"),
    }
}

/// A closed store whose log holds the first `events` events of the view-heavy log
/// ([`view_heavy_command`]), index caught up, cached.
pub fn view_heavy_log(events: u64) -> PathBuf {
    cached_log("views1", events, view_heavy_command)
}
