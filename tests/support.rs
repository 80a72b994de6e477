//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod log_builder;
pub mod text;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::rc::Rc;

use mnemo::testing::MemKv;
use mnemo::testing::intake::{Intake, Logged, result_id, tool_result};
use mnemo::testing::replay::Replay;
use mnemo::testing::tool::Tree;
use mnemo::tool::Request;
use mnemo::tool::Semantics;
use mnemo::{
    Access, Body, Durability, Event, EventHash, Header, MEMORY_TAG, MemPath, MemoryRecord,
    MnemoClient, MnemoMemoryToolServer, Outcome, Profile, Seq,
};
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
pub fn open_store(path: &Path) -> mnemo::testing::Store {
    mnemo::testing::Store::open(path)
        .unwrap_or_else(|e| panic!("open the store at {}: {e}", path.display()))
}

/// Runs a command input through a server and returns (content, is_error).
pub fn call(server: &(impl Host + ?Sized), input: Value) -> (String, bool) {
    outcome(&server.handle(&input))
}

/// A `tool_result` block's content and error flag (the test fails on any other shape).
pub fn outcome(out: &Value) -> (String, bool) {
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
/// as they do by default.
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
/// Whether any file under `dir` (in any subdirectory) holds `text` anywhere in its bytes.
pub fn dir_holds(dir: &Path, text: &[u8]) -> bool {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a directory") {
            let entry = entry.expect("an entry");
            if entry.file_type().expect("its type").is_dir() {
                todo.push(entry.path());
            } else if std::fs::read(entry.path())
                .expect("read a file")
                .windows(text.len())
                .any(|w| w == text)
            {
                return true;
            }
        }
    }
    false
}

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

/// Where a test's calls are answered: the pure core over an in-memory tree ([`PureServer`]),
/// or a live server over a sled store ([`SledServer`], [`MnemoMemoryToolServer`]). Both take
/// requests in through the same [`Intake`] and answer them through the same projection code.
pub trait Host {
    /// What the host is, for failure messages.
    fn name(&self) -> &'static str;

    /// The `tool_result` block for a `tool_use` block or a bare input.
    fn handle(&self, block: &Value) -> Value;

    /// The `tool_result` block for one request's raw bytes.
    fn handle_bytes(&self, bytes: &[u8]) -> Value;

    /// The `tool_result` block for one line of text.
    fn handle_line(&self, line: &str) -> Value {
        self.handle_bytes(line.as_bytes())
    }

    /// Every file the agent may read, in path order.
    fn files(&self) -> Vec<MemoryRecord>;

    /// The content of the file at canonical path `path`, if there is one.
    fn file(&self, path: &str) -> Option<String> {
        self.files()
            .into_iter()
            .find(|r| r.path == path)
            .map(|r| r.content)
    }

    /// Why the log of the calls answered so far is not `calls` events that answer again as
    /// they did, if it is not.
    fn log_problem(&self, calls: u64) -> Option<String>;

    /// The temporary directory of the host's store, if it has one.
    fn store_dir(&self) -> Option<&Path> {
        None
    }

    /// A second server over the same tree and log that takes requests in as `intake` does.
    fn sharing(&self, intake: &Intake) -> Box<dyn Host>;
}

impl Host for MnemoMemoryToolServer {
    fn name(&self) -> &'static str {
        "sled"
    }

    fn handle(&self, block: &Value) -> Value {
        MnemoMemoryToolServer::handle(self, block)
    }

    fn handle_bytes(&self, bytes: &[u8]) -> Value {
        MnemoMemoryToolServer::handle_bytes(self, bytes)
    }

    fn files(&self) -> Vec<MemoryRecord> {
        self.client()
            .records_by_tag(MEMORY_TAG)
            .expect("list the files of a sled store")
    }

    fn file(&self, path: &str) -> Option<String> {
        self.client()
            .record(path)
            .expect("read a record of a sled store")
            .map(|r| r.content)
    }

    fn log_problem(&self, calls: u64) -> Option<String> {
        match self.client().verify() {
            Ok(report) if report.is_intact() && report.events == calls => None,
            Ok(report) => Some(format!(
                "verify: {} with {} events for {calls} calls: {:?}",
                report.status(),
                report.events,
                report.violations
            )),
            Err(e) => Some(format!("verify failed: {e}")),
        }
    }

    fn sharing(&self, intake: &Intake) -> Box<dyn Host> {
        let server = MnemoMemoryToolServer::builder(self.client().clone())
            .root(intake.root())
            .profile(intake.profile())
            .limits(intake.limits())
            .build()
            .expect("build a server with a valid root");
        Box::new(server)
    }
}

/// A live server over a fresh sled store of its own (removed on drop).
pub struct SledServer {
    // Declared first so that it closes before its directory is removed.
    pub server: MnemoMemoryToolServer,
    pub store: TempStore,
}

impl SledServer {
    /// A server that takes requests in as `intake` does, over a fresh store.
    pub fn new(intake: &Intake) -> SledServer {
        let store = TempStore::new();
        let server = MnemoMemoryToolServer::builder(store.client())
            .root(intake.root())
            .profile(intake.profile())
            .limits(intake.limits())
            .build()
            .expect("build a server with a valid root");
        SledServer { server, store }
    }
}

impl Host for SledServer {
    fn name(&self) -> &'static str {
        self.server.name()
    }

    fn handle(&self, block: &Value) -> Value {
        self.server.handle(block)
    }

    fn handle_bytes(&self, bytes: &[u8]) -> Value {
        self.server.handle_bytes(bytes)
    }

    fn files(&self) -> Vec<MemoryRecord> {
        self.server.files()
    }

    fn file(&self, path: &str) -> Option<String> {
        Host::file(&self.server, path)
    }

    fn log_problem(&self, calls: u64) -> Option<String> {
        self.server.log_problem(calls)
    }

    fn store_dir(&self) -> Option<&Path> {
        Some(self.store.dir.path())
    }

    fn sharing(&self, intake: &Intake) -> Box<dyn Host> {
        self.server.sharing(intake)
    }
}

/// The agent every harness answers as (the one [`TempStore::client`] opens as).
pub const AGENT: &str = "test-agent";

/// The memory tool on the pure core over an in-memory tree: no sled, no files, no threads. A
/// request goes through the server's own [`Intake`] (the request limits and parsing), becomes an
/// event, and is answered by the replay engine the verifier re-answers events with
/// ([`Replay::apply`] on [`Replay::in_memory_with_listings`]); its result block is made as the
/// server makes it. So it gives the live server's (text, is_error) for every call.
pub struct PureServer {
    intake: Intake,
    state: Rc<RefCell<PureState>>,
}

struct PureState {
    replay: Replay<MemKv>,
    /// Every event answered, encoded, with the outcome it was answered with.
    log: Vec<Vec<u8>>,
}

impl PureServer {
    /// The defaults of a server: root `/memories`, profile `spec`, default limits.
    pub fn new() -> PureServer {
        PureServer::with(&spec())
    }

    /// A server that takes requests in as `intake` does.
    pub fn with(intake: &Intake) -> PureServer {
        PureServer {
            intake: intake.clone(),
            state: Rc::new(RefCell::new(PureState {
                replay: Replay::in_memory_with_listings(),
                log: Vec::new(),
            })),
        }
    }

    /// The `tool_result` block for a request as [`mnemo::testing::read_request`] read it.
    pub fn handle_request(&self, request: &Request) -> Value {
        self.answer(self.intake.request(request))
    }

    fn answer(&self, logged: Logged) -> Value {
        let Logged { tool_use_id, body } = logged;
        let mut state = self.state.borrow_mut();
        let seq = Seq(state.replay.at().0 + 1);
        let mut event = Event {
            seq,
            prev_hash: EventHash::ZERO,
            header: Header {
                time_ms: 0,
                agent: AGENT.to_string(),
                tool_use_id: tool_use_id.clone(),
                outcome: Outcome::of(false, ""),
                semantics: Semantics::CURRENT,
            },
            body,
            // The current format is salted; a fixed salt keeps the log reproducible.
            salt: Some(mnemo::event::Salt([0; 32])),
        };
        let answer = state
            .replay
            .apply(&event)
            .unwrap_or_else(|e| panic!("the pure core failed to answer event {seq}: {e}"))
            .answer;
        event.header.outcome = event.outcome_of(answer.is_error, &answer.text);
        state.log.push(event.to_frame().encode());
        tool_result(result_id(tool_use_id, seq.0), &answer.text, answer.is_error)
    }
}

impl Default for PureServer {
    fn default() -> Self {
        PureServer::new()
    }
}

impl Host for PureServer {
    fn name(&self) -> &'static str {
        "pure"
    }

    fn handle(&self, block: &Value) -> Value {
        self.answer(self.intake.value(block))
    }

    fn handle_bytes(&self, bytes: &[u8]) -> Value {
        self.answer(self.intake.bytes(bytes))
    }

    fn files(&self) -> Vec<MemoryRecord> {
        let state = self.state.borrow();
        let tree = state.replay.tree();
        let policy = tree.policy().expect("read the in-memory policy");
        let top = MemPath::absolute("/").expect("/ is a path");
        let mut records = tree.records_under(&top).expect("list the in-memory tree");
        records.retain(|r| {
            MemPath::absolute(&r.path).is_ok_and(|p| policy.allows(AGENT, &p, Access::Read))
        });
        records
    }

    /// Decodes every event answered and answers it again on a fresh tree, as the verifier would:
    /// each must decode and get the outcome it was answered with.
    fn log_problem(&self, calls: u64) -> Option<String> {
        let state = self.state.borrow();
        if state.log.len() as u64 != calls {
            return Some(format!("{} events for {calls} calls", state.log.len()));
        }
        let mut again = Replay::in_memory();
        for bytes in &state.log {
            let event = match Event::decode(bytes) {
                Ok(event) => event,
                Err(e) => return Some(format!("an event does not decode: {e}")),
            };
            match again.apply(&event) {
                Ok(traced) => {
                    let answer = traced.answer;
                    if event.outcome_of(answer.is_error, &answer.text) != event.header.outcome {
                        return Some(format!(
                            "event {} answers again differently: {:?}",
                            event.seq, answer.text
                        ));
                    }
                }
                Err(e) => return Some(format!("event {} does not answer again: {e}", event.seq)),
            }
        }
        None
    }

    fn sharing(&self, intake: &Intake) -> Box<dyn Host> {
        Box::new(PureServer {
            intake: intake.clone(),
            state: Rc::clone(&self.state),
        })
    }
}

/// The settings of a default server: root `/memories`, profile `spec`, default limits.
pub fn spec() -> Intake {
    settings(Profile::Spec)
}

/// The settings of a server in `profile` with the default root and limits.
pub fn settings(profile: Profile) -> Intake {
    Intake::new("/memories", profile, mnemo::tool::Limits::default()).expect("a valid root")
}

/// One case in [`SLED_EVERY`] also runs through a sled store (all of them when
/// `MNEMO_TEST_SLED=all`).
pub const SLED_EVERY: u8 = 5;

/// Whether `MNEMO_TEST_SLED=all` widens the sled and binary samples to every case.
pub fn sample_all() -> bool {
    std::env::var("MNEMO_TEST_SLED").is_ok_and(|v| v == "all")
}

/// Whether the case named `key` is in the sled sample: a fixed choice by the hash of its name,
/// so every run samples the same cases, whichever test thread gets there first.
pub fn in_sled_sample(key: &str) -> bool {
    sample_all() || blake3::hash(key.as_bytes()).as_bytes()[0] % SLED_EVERY == 0
}

/// Whether the case named `key` is in the sample that also runs through the `mnemo` binary: one
/// case in [`SLED_EVERY`], chosen by another byte of the same hash, so it is not the sled sample
/// (all of them when `MNEMO_TEST_SLED=all`).
pub fn in_binary_sample(key: &str) -> bool {
    sample_all() || blake3::hash(key.as_bytes()).as_bytes()[1] % SLED_EVERY == 0
}

/// Both hosts, each fresh, for a test small enough to run whole on each.
pub fn both(intake: &Intake) -> [Box<dyn Host>; 2] {
    [
        Box::new(PureServer::with(intake)),
        Box::new(SledServer::new(intake)),
    ]
}

/// The hosts the case named `key` runs on: the pure core always, and a fresh sled store too
/// when the case is in the sample ([`in_sled_sample`]).
pub fn hosts(key: &str, intake: &Intake) -> Vec<Box<dyn Host>> {
    let mut hosts: Vec<Box<dyn Host>> = vec![Box::new(PureServer::with(intake))];
    if in_sled_sample(key) {
        hosts.push(Box::new(SledServer::new(intake)));
    }
    hosts
}

/// Whether `text` is the answer whose hash the event `event` (a line of `mnemo log --json`)
/// records: `blake3_keyed(salt, "mnemo/result/v4" ‖ text)` for a salted event, `blake3(text)`
/// for one of an earlier format (`"salt": null`), as docs/auditors.md documents.
pub fn records_answer(event: &impl serde::Serialize, text: &str) -> bool {
    let event = serde_json::to_value(event).expect("an event is JSON");
    let hash = match event["salt"].as_str() {
        None => blake3::hash(text.as_bytes()),
        Some(salt) => {
            let key = blake3::Hash::from_hex(salt).expect("a salt is 64 hex digits");
            let mut h = blake3::Hasher::new_keyed(key.as_bytes());
            h.update(b"mnemo/result/v4");
            h.update(text.as_bytes());
            h.finalize()
        }
    };
    event["result_hash"].as_str() == Some(hash.to_hex().as_str())
}

/// The URL of a bucket of object storage for one test: under `MNEMO_TEST_S3` (an S3 server the
/// suite runs on loopback) when it is set, else a directory `name` of `t`'s.
pub fn bucket_url(t: &TempStore, name: &str) -> String {
    match std::env::var("MNEMO_TEST_S3") {
        Ok(base) if !base.is_empty() => {
            let unique = t.dir.path().file_name().expect("a name").to_string_lossy();
            format!(
                "{}/{}-{name}",
                base.trim_end_matches('/'),
                unique.trim_start_matches('.')
            )
        }
        _ => format!("file://{}", t.dir.path().join(name).display()),
    }
}

/// A copy at `path` of a closed store whose log holds `events` calls ([`write_long_log`]), each
/// length written once per test process and copied for each test that asks for it.
pub fn long_log(path: &Path, events: u64) {
    static MADE: std::sync::Mutex<Vec<(u64, TempStore)>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !made.iter().any(|(length, _)| *length == events) {
        let store = TempStore::new();
        write_long_log(&store.path(), events);
        made.push((events, store));
    }
    let (_, template) = made
        .iter()
        .find(|(length, _)| *length == events)
        .expect("written above");
    copy_dir(&template.path(), path);
}

/// Writes a log of `events` calls into a new store at `path` ([`log_builder::build_log_of`]):
/// odd events create `/memories/f.md` with `v{seq}`, even ones delete it, so the tree stays one
/// file.
fn write_long_log(path: &Path, events: u64) {
    use mnemo::tool::Command as ToolCommand;
    log_builder::build_log_of(path, events, |seq| {
        if seq % 2 == 1 {
            ToolCommand::Create {
                path: "/memories/f.md".into(),
                file_text: format!("v{seq}\n"),
            }
        } else {
            ToolCommand::Delete {
                path: "/memories/f.md".into(),
            }
        }
    });
}
