//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mnemo::{Body, Durability, MnemoClient, MnemoMemoryToolServer, Seq};
use serde_json::Value;

/// A store in a temporary directory, removed on drop.
pub struct TempStore {
    pub dir: tempfile::TempDir,
}

impl TempStore {
    pub fn new() -> TempStore {
        TempStore {
            dir: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    /// The store directory (inside the temporary directory, not yet created).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("store.mnemo.db")
    }

    /// A client as `test-agent` with the cheapest durability (see [`open_client`]).
    pub fn client(&self) -> MnemoClient {
        open_client(&self.path(), "test-agent", Durability::Buffered)
    }

    pub fn server(&self) -> MnemoMemoryToolServer {
        MnemoMemoryToolServer::new(self.client())
    }
}

/// A client on the store at `path` (created if missing) as `agent` with `durability`, or why
/// it did not open.
pub fn try_open_client(
    path: &Path,
    agent: &str,
    durability: Durability,
) -> mnemo::Result<MnemoClient> {
    MnemoClient::builder(path)
        .agent_id(agent)
        .durability(durability)
        .open()
}

/// [`try_open_client`], failing the test with the path and the error if it did not open.
pub fn open_client(path: &Path, agent: &str, durability: Durability) -> MnemoClient {
    try_open_client(path, agent, durability)
        .unwrap_or_else(|e| panic!("open a client at {}: {e}", path.display()))
}

/// Opens the (closed) store at `path` below the client, to read or tamper with it (`Store::open`
/// waits out the moment sled holds the lock after a close).
pub fn open_store(path: &Path) -> mnemo::Store {
    mnemo::Store::open(path).unwrap_or_else(|e| panic!("open the store at {}: {e}", path.display()))
}

/// Runs a command input through a server and returns (content, is_error).
pub fn call(server: &MnemoMemoryToolServer, input: Value) -> (String, bool) {
    let out = server.handle(&input);
    let content = out["content"]
        .as_str()
        .expect("tool_result content is a string")
        .to_string();
    let is_error = match out.get("is_error") {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(other) => panic!("is_error must be absent or true, got {other}"),
    };
    (content, is_error)
}

/// The built `mnemo` binary.
pub fn mnemo_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mnemo")
}

/// Runs `mnemo args...` with `stdin` and returns its output.
pub fn run_mnemo(args: &[&str], stdin: &str) -> Output {
    run_mnemo_bytes(args, stdin.as_bytes())
}

/// `mnemo args...` with the variables `env` and no other `MNEMO_*` variable from outside:
/// `tool` and `mcp` open the store in their own process (`MNEMO_NO_START`), as in a build
/// without the server, so every suite means the same in every build; the suites about
/// servers use [`served_command`].
pub fn mnemo_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = served_command(args, &[]);
    command.env("MNEMO_NO_START", "1");
    command.envs(env.iter().copied());
    command
}

/// [`mnemo_command`], but `tool` and `mcp` reach (or start) the server that holds the store,
/// as they do by default in a build with `--features serve`.
pub fn served_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(mnemo_bin());
    command.args(args);
    for name in [
        "MNEMO_DB",
        "MNEMO_URL",
        "MNEMO_TOKEN",
        "MNEMO_IDLE_EXIT",
        "MNEMO_NO_START",
        "MNEMO_ANSWER_WAIT",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

/// A spawned `command` to talk to line by line: its stdin, and its stdout buffered (stderr
/// goes to the test's).
pub fn spawn_piped(
    mut command: Command,
) -> (
    std::process::Child,
    Option<std::process::ChildStdin>,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn mnemo");
    let stdin = child.stdin.take();
    let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdin, stdout)
}

/// [`run_mnemo`] with raw bytes on stdin (lines that are not UTF-8, for instance).
pub fn run_mnemo_bytes(args: &[&str], stdin: &[u8]) -> Output {
    run_mnemo_env(args, &[], stdin)
}

/// [`run_mnemo_bytes`] with the variables `env` set.
pub fn run_mnemo_env(args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Output {
    run_command(mnemo_command(args, env), stdin)
}

/// Runs `command` with `stdin` and returns its output.
pub fn run_command(mut command: Command, stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mnemo");
    // Write from another thread: with megabytes both ways, writing everything before reading
    // would deadlock on full pipes.
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for mnemo");
    writer.join().expect("stdin writer");
    output
}

/// Rewrites the stored record of event `seq` with `edit`, straight through sled, so sled's own
/// checks still pass. The store must not be open elsewhere.
pub fn tamper_record(path: &Path, seq: u64, edit: impl FnOnce(&mut Vec<u8>)) {
    let store = open_store(path);
    let (events, _, _) = store.raw_trees();
    let mut record = events
        .get(seq.to_be_bytes())
        .expect("read record")
        .expect("record exists")
        .to_vec();
    edit(&mut record);
    events
        .insert(seq.to_be_bytes(), record)
        .expect("write record");
    events.flush().expect("flush");
}

/// Copies a closed store directory (sled's files) to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("list the store directory") {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a store file");
        }
    }
}

/// The suite's one seeded generator (xorshift64: shifts 13, 7 and 17), so that every run of a
/// seed makes the same choices: the same damage, tampering, commands and kill times. A seed of 0
/// stays 0; pick any other.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below_u64(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).expect("n fits in u64");
        usize::try_from(self.below_u64(n)).expect("below n")
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A number in `lo..=hi`.
    pub fn small(&mut self, lo: i64, hi: i64) -> i64 {
        let span = usize::try_from(hi - lo + 1).expect("a small span");
        lo + i64::try_from(self.below(span)).expect("a small number")
    }

    /// `n` pseudo-random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next().to_le_bytes()[7]).collect()
    }
}

/// The body of the last event `server` logged (its index flushed first).
pub fn last_body(server: &MnemoMemoryToolServer) -> Body {
    server.client().flush_index().expect("flush");
    server
        .client()
        .events(Seq(1))
        .expect("events")
        .last()
        .expect("an event")
        .expect("decodes")
        .body
}

/// Whether this is a CI run (`CI` set to anything but empty, `0` or `false`; CI machines set
/// `CI=true`), where a check that cannot run must fail rather than pass.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A check `test` cannot run here because `why` (a prerequisite is missing): says so on stderr
/// and returns, so the caller can skip it; under CI it panics instead, so a check that never ran
/// cannot pass green there.
pub fn skip(test: &str, why: &str) {
    assert!(
        !in_ci(),
        "{test}: cannot run here ({why}); under CI a skipped check is a failure: give CI what this test needs"
    );
    eprintln!("SKIPPED {test}: {why}");
}

/// Whether this process runs as root (permission bits do not stop it).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The bytes the files under `path` take (recursively), as their lengths add up.
pub fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .expect("list")
        .map(|e| {
            let e = e.expect("entry");
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                dir_size(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// Every file under `dir` (recursively) with the blake3 of its bytes: equal maps before and
/// after a command mean it changed no byte.
pub fn checksums(dir: &Path) -> std::collections::BTreeMap<PathBuf, String> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("list") {
        let entry = entry.expect("entry");
        let path = entry.path();
        if entry.file_type().expect("type").is_dir() {
            out.extend(checksums(&path));
        } else {
            let bytes = std::fs::read(&path).expect("read");
            out.insert(path, blake3::hash(&bytes).to_hex().to_string());
        }
    }
    out
}
