//! A hostile store directory: read-only, on a full disk, missing or damaged sled files, a newer
//! format, a `--db` that is a file or lies under a directory that does not exist, and store files
//! that are not what they seem (a FIFO, a link, a device node, a socket or the wrong kind in place
//! of `db`, `conf`, a snapshot, `mnemo-head`, `blobs/`, a blob or the store directory).
//!
//! For every case, on fresh copies of the same hostile directory:
//!
//! - the library — `MnemoClient::open` (then one create call), `Store::open` and
//!   `Store::open_existing` (then `verify_store` when they open) — runs in a child process (this
//!   test binary re-executed on [`probe_child`]) so that a hang can be killed, a panic in sled's
//!   background threads cannot take the test harness down, and resource limits or another user
//!   can be applied to it alone;
//! - the CLI — `mnemo verify --db`, `mnemo tool --db` fed one create line, `mnemo log --db` — runs
//!   as a child process too.
//!
//! Neither may panic (exit 101, "panicked at"), hang (every child is killed after [`TIMEOUT`] and
//! the case fails), or succeed silently: a store it cannot use must give an `Err` (library) or
//! exit 2 with a `mnemo: error:` line (CLI), and the message must say what is wrong.
//!
//! Every case records in a comment what Mnemo does, and asserts it; the failure messages start
//! with BUG, HANG or PANIC for silent success or data loss, a hang, a panic.
//!
//! Damage to a store's data is refused or detected, never opened as if nothing happened: damage
//! sled reads as a torn log tail (anything in a store closed once, or in the events written since
//! a store was last opened) leaves sled the events before it, and the head the store recorded at
//! its last commit shows the loss, so verify exits 1 and every writer refuses. The cases that cost
//! no event (sled's configuration, a snapshot, the index frames at the end of the log) are tests
//! of their own, asserting the store opens with every event. A full disk is reported (exit 2)
//! and never hangs the close; `--db` under a missing directory is refused.
//!
//! sled panicked on none of the damaged files. It did panic (exit 101) on a FIFO or a device as
//! `db`, and a FIFO as `conf`, a snapshot, `mnemo-head` or a blob hung every probe; since the
//! store's files are checked before sled opens them, every such case is refused (see the last
//! section).
//!
//! Tests run as root here, where permission bits do not stop writes: the read-only cases detect
//! that and use what does stop root (running the child as `nobody` with `setpriv`; the immutable
//! attribute with `chattr +i`), or skip with a printed reason. The full-disk cases use a file-size
//! limit (`ulimit -f`, with SIGXFSZ ignored so writes fail with EFBIG instead of killing the
//! process; works without root) and, as root, a small tmpfs mounted in a private mount namespace
//! (`unshare -m`), which disappears with the namespace: no mount is left behind.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mnemo::Profile;
use mnemo::testing::{Store, verify_store};
use mnemo::tool::{Command as ToolCommand, Limits};
use mnemo::{Body, ToolCall};
use mnemo::{Head, MnemoClient, MnemoMemoryToolServer};
use serde_json::json;

use crate::support::{Rng, copy_dir, have, is_root, open_store, skip};

/// How long any child process may run before it is killed and the case fails as a hang.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Events in the pristine store.
const EVENTS: u64 = 20;

/// The create line fed to `mnemo tool`.
const CREATE_LINE: &str =
    r#"{"command":"create","path":"/memories/probe.txt","file_text":"probe\n"}"#;

// ---------------------------------------------------------------------------------------------
// Child processes with a timeout.
// ---------------------------------------------------------------------------------------------

/// What a child process did.
struct Ran {
    /// The command, for messages.
    what: String,
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    elapsed: Duration,
    /// The largest resident set (`VmHWM`) seen while polling the child, in KiB.
    peak_rss_kib: u64,
}

impl Ran {
    fn summary(&self) -> String {
        let status = if self.timed_out {
            format!("HUNG (killed after {:?})", self.elapsed)
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}")
        } else {
            format!("exit {}", self.code.unwrap_or(-1))
        };
        let first = |s: &str| {
            s.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(220)
                .collect::<String>()
        };
        format!(
            "{status}; stderr: {:?}; stdout: {:?}",
            first(&self.stderr),
            first(&self.stdout)
        )
    }

    fn panicked(&self) -> bool {
        self.code == Some(101)
            || self.stderr.contains("panicked at")
            || self.stdout.contains("panicked at")
    }
}

/// Runs `cmd` in its own process group, feeding it `stdin`; kills the whole group after
/// [`TIMEOUT`].
fn run(what: String, mut cmd: Command, stdin: Vec<u8>) -> Ran {
    cmd.env_remove("MNEMO_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let pid = child.id();
    let mut input = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        // A child that never reads gets EPIPE once it is killed; either way the writer ends.
        let _ = input.write_all(&stdin);
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut timed_out = false;
    let mut peak_rss_kib = 0;
    let spawner = std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default();
    let status = loop {
        peak_rss_kib = peak_rss_kib.max(resident_peak_kib(pid, spawner.trim()));
        if let Some(status) = child.try_wait().expect("poll the child") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            timed_out = true;
            // The child leads its own process group: kill the group (wrappers and all), by id.
            let killed = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status()
                .is_ok_and(|s| s.success());
            if !killed {
                let _ = child.kill();
            }
            break child.wait().expect("reap the killed child");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let _ = writer.join();
    let stdout = String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned();
    Ran {
        what,
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        timed_out,
        elapsed,
        peak_rss_kib,
    }
}

/// The `VmHWM` (peak resident set) of process `pid` in KiB; 0 once it is gone, and 0 while it
/// still shares the memory of the thread `spawner` that started it (a child not yet past its
/// `exec` shows that thread's name and the whole test process's peak).
fn resident_peak_kib(pid: u32, spawner: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    if field("Name:") == Some(spawner) {
        return 0;
    }
    field("VmHWM:")
        .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Wrappers: how a child is made to meet the hostile condition.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Wrap {
    /// Run as is.
    Plain,
    /// `ulimit -f BLOCKS` (512-byte blocks in dash, 1024 in bash); with `ignore_sigxfsz`, SIGXFSZ
    /// is ignored (an ignored signal stays ignored across exec) so a write past the limit fails
    /// with EFBIG instead of killing the process.
    FileSizeLimit { blocks: u64, ignore_sigxfsz: bool },
    /// As user and group 65534 (`nobody`), with no supplementary groups, via `setpriv`.
    Unprivileged,
    /// `ulimit -v KIB`: an address-space limit, so an unbounded read fails instead of taking the
    /// machine's memory.
    MemoryLimit { kib: u64 },
    /// In a private mount namespace with a fresh 8 MiB tmpfs mounted over the probe's `mnt`
    /// directory, the store copied into it and the rest filled up but `leave_kib` KiB.
    Tmpfs { leave_kib: u64 },
}

/// The shell script behind [`Wrap::Tmpfs`]. Parameters come in the environment: MNT, SRC, OUT,
/// LEAVE_KIB, COPIES. After the command, the copies are copied back out to OUT for inspection.
const TMPFS_SCRIPT: &str = r#"
set -e
mount -t tmpfs -o size=8m tmpfs "$MNT"
for c in $COPIES; do cp -r "$SRC" "$MNT/$c"; done
free=$(df -k "$MNT" | awk 'NR==2 {print $4}')
fill=$((free - LEAVE_KIB))
if [ "$fill" -gt 0 ]; then dd if=/dev/zero of="$MNT/fill" bs=1024 count="$fill" 2>/dev/null || true; fi
set +e
"$@"
rc=$?
rm -f "$MNT/fill"
for c in $COPIES; do cp -r "$MNT/$c" "$OUT/$c"; done
exit $rc
"#;

/// Makes a store copy hostile.
type Damage<'a> = dyn Fn(&Path) + Sync + 'a;

/// A hostile case: the pristine store, how to make it hostile, and how to run children on it.
struct Case<'a> {
    name: String,
    /// The directory copied for every probe (`None`: nothing is copied, `target` is used as is).
    base: Option<&'a Path>,
    /// Makes a copy hostile (called on every probe's copy; for `Tmpfs`, on the copy the script
    /// copies from).
    damage: &'a Damage<'a>,
    wrap: Wrap,
    /// Scratch space; every probe gets its own numbered directory in it.
    work: &'a Path,
}

/// Where a probe's store copies are, and how to reach them.
struct Prepared {
    /// The store paths the child is given (inside the tmpfs for `Tmpfs`).
    paths: Vec<PathBuf>,
    /// Where to inspect the copies afterwards (copied back out for `Tmpfs`).
    after: Vec<PathBuf>,
    env: Vec<(String, OsString)>,
}

impl Case<'_> {
    fn prepare(&self, probe: &str, copies: &[&str]) -> Prepared {
        let dir = self.work.join(probe);
        std::fs::create_dir_all(&dir).expect("probe directory");
        if matches!(self.wrap, Wrap::Unprivileged) {
            // `nobody` must be able to reach the copies.
            for d in [self.work, &dir] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod the probe directory");
            }
        }
        match self.wrap {
            Wrap::Tmpfs { leave_kib } => {
                let src = dir.join("src");
                let mnt = dir.join("mnt");
                let out = dir.join("out");
                std::fs::create_dir_all(&mnt).expect("mount point");
                std::fs::create_dir_all(&out).expect("out directory");
                if let Some(base) = self.base {
                    copy_dir(base, &src);
                }
                (self.damage)(&src);
                Prepared {
                    paths: copies.iter().map(|c| mnt.join(c)).collect(),
                    after: copies.iter().map(|c| out.join(c)).collect(),
                    env: vec![
                        ("MNT".into(), mnt.into()),
                        ("SRC".into(), src.into()),
                        ("OUT".into(), out.into()),
                        ("LEAVE_KIB".into(), leave_kib.to_string().into()),
                        ("COPIES".into(), copies.join(" ").into()),
                    ],
                }
            }
            _ => {
                let paths: Vec<PathBuf> = copies.iter().map(|c| dir.join(c)).collect();
                for p in &paths {
                    if let Some(base) = self.base {
                        copy_dir(base, p);
                    }
                    (self.damage)(p);
                }
                Prepared {
                    after: paths.clone(),
                    paths,
                    env: Vec::new(),
                }
            }
        }
    }

    fn command(&self, program: &Path, args: Vec<OsString>, env: &[(String, OsString)]) -> Command {
        let mut cmd = match self.wrap {
            Wrap::Plain => Command::new(program),
            Wrap::FileSizeLimit {
                blocks,
                ignore_sigxfsz,
            } => {
                let trap = if ignore_sigxfsz { "trap '' XFSZ; " } else { "" };
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("{trap}ulimit -f {blocks} && exec \"$@\""))
                    .arg("sh")
                    .arg(program);
                c
            }
            Wrap::MemoryLimit { kib } => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -v {kib} && exec \"$@\""))
                    .arg("sh")
                    .arg(program);
                c
            }
            Wrap::Unprivileged => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(program);
                c
            }
            Wrap::Tmpfs { .. } => {
                let mut c = Command::new("unshare");
                c.args(["-m", "sh", "-c", TMPFS_SCRIPT, "sh"]).arg(program);
                c
            }
        };
        cmd.args(args);
        // `tool` opens the hostile copy itself in every build, as the cases expect.
        cmd.env("MNEMO_NO_START", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `mnemo <sub> --db <copy>` (with `stdin`) on a fresh hostile copy.
    fn cli(&self, sub: &'static str, stdin: &str) -> CliRun {
        let p = self.prepare(&format!("cli-{sub}"), &["store"]);
        let args = vec![sub.into(), "--db".into(), p.paths[0].clone().into()];
        let cmd = self.command(Path::new(crate::support::mnemo_bin()), args, &p.env);
        let ran = run(
            format!("{}: mnemo {sub}", self.name),
            cmd,
            stdin.as_bytes().to_vec(),
        );
        eprintln!("[{}] cli {sub}: {}", self.name, ran.summary());
        CliRun {
            sub,
            ran,
            after: p.after[0].clone(),
        }
    }

    /// Runs one library probe on its own fresh hostile copy, in a child process.
    fn lib(&self, op: &'static str, probes: &LibProbes) -> LibRun {
        let p = self.prepare(&format!("lib-{op}"), &["store"]);
        let mut env = p.env.clone();
        env.push((
            PROBE_ENV.into(),
            format!("{op}\t{}", p.paths[0].display()).into(),
        ));
        env.push((PROBE_TEXT_ENV.into(), probes.text_bytes.to_string().into()));
        env.push((PROBE_CALLS_ENV.into(), probes.calls.to_string().into()));
        let exe = std::env::current_exe().expect("this test binary");
        let args = [
            "hostile_storage::probe_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(OsString::from)
        .to_vec();
        let ran = run(
            format!("{}: library {op}", self.name),
            self.command(&exe, args, &env),
            Vec::new(),
        );
        let result = LibResult::parse(op, &ran.stdout);
        eprintln!("[{}] lib {op}: {}", self.name, result.summary(&ran));
        LibRun {
            op,
            ran,
            result,
            after: p.after[0].clone(),
        }
    }

    /// The CLI trio and the three library probes, all at once (a hang costs one timeout).
    fn observe(&self, tool_stdin: &str, probes: &LibProbes) -> Observed {
        self.observe_with(&[("verify", ""), ("tool", tool_stdin), ("log", "")], probes)
    }

    /// `mnemo SUB --db COPY` for each `(SUB, stdin)` of `subs` and the three library probes, all
    /// at once.
    fn observe_with(&self, subs: &[(&'static str, &str)], probes: &LibProbes) -> Observed {
        std::thread::scope(|s| {
            let cli: Vec<_> = subs
                .iter()
                .copied()
                .map(|(sub, stdin)| s.spawn(move || self.cli(sub, stdin)))
                .collect();
            let lib: Vec<_> = ["client_open", "store_open", "open_existing"]
                .into_iter()
                .map(|op| s.spawn(move || self.lib(op, probes)))
                .collect();
            Observed {
                cli: cli
                    .into_iter()
                    .map(|h| h.join().expect("cli probe"))
                    .collect(),
                lib: lib
                    .into_iter()
                    .map(|h| h.join().expect("library probe"))
                    .collect(),
            }
        })
    }
}

/// One CLI run.
struct CliRun {
    sub: &'static str,
    ran: Ran,
    /// The copy it ran on, to inspect afterwards.
    after: PathBuf,
}

/// One library probe: its child process and what the probe reported.
struct LibRun {
    op: &'static str,
    ran: Ran,
    result: LibResult,
    /// The copy it ran on, to inspect afterwards.
    after: PathBuf,
}

/// Everything the probes of one case did: `cli` is verify, tool, log; `lib` is client_open,
/// store_open, open_existing.
struct Observed {
    cli: Vec<CliRun>,
    lib: Vec<LibRun>,
}

impl Observed {
    fn cli(&self, sub: &str) -> &CliRun {
        self.cli.iter().find(|c| c.sub == sub).expect("cli run")
    }

    fn lib(&self, op: &str) -> &LibRun {
        self.lib.iter().find(|l| l.op == op).expect("library run")
    }

    fn runs(&self) -> impl Iterator<Item = &Ran> {
        self.cli
            .iter()
            .map(|c| &c.ran)
            .chain(self.lib.iter().map(|l| &l.ran))
    }

    fn after(&self) -> Vec<PathBuf> {
        self.cli
            .iter()
            .map(|c| c.after.clone())
            .chain(self.lib.iter().map(|l| l.after.clone()))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The library probes, run in a child process.
// ---------------------------------------------------------------------------------------------

const PROBE_ENV: &str = "MNEMO_HOSTILE_PROBE";
const PROBE_TEXT_ENV: &str = "MNEMO_HOSTILE_PROBE_TEXT_BYTES";
const PROBE_CALLS_ENV: &str = "MNEMO_HOSTILE_PROBE_CALLS";
const MARK: &str = "MNEMO-PROBE";

/// What the library child does on the client probe.
struct LibProbes {
    /// Size of the file text of each create call.
    text_bytes: usize,
    /// Create calls made once the client is open.
    calls: usize,
}

const ONE_SMALL_CREATE: LibProbes = LibProbes {
    text_bytes: 6,
    calls: 1,
};

fn create_body(i: usize, text_bytes: usize) -> Body {
    Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: Limits::default(),
        command: ToolCommand::Create {
            path: format!("/memories/probe{i}.txt"),
            file_text: "p".repeat(text_bytes),
        },
    })
}

fn verify_summary(store: &Store) -> String {
    match verify_store(store) {
        Ok(r) => format!(
            "status={} events={} head={} first_violation={}",
            r.status(),
            r.events,
            r.head,
            r.violations
                .first()
                .map_or("-".into(), |v| format!("{}@{}", v.kind.name(), v.seq))
        ),
        Err(e) => format!("verify_store error: {e}"),
    }
}

/// Not a test of its own: the entry point of the library child (it returns at once unless
/// [`PROBE_ENV`] is set). Prints `MARK op start`, then `MARK op ok|err detail`, then, for a store
/// it opened, `MARK op closed` once everything is dropped. Ignored, so that it is not counted
/// as a passing test of its own.
#[test]
#[ignore = "run as a child process by the hostile storage cases"]
fn probe_child() {
    let Ok(spec) = std::env::var(PROBE_ENV) else {
        return;
    };
    let number = |key: &str| -> usize {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
    };
    let (text_bytes, calls) = (number(PROBE_TEXT_ENV), number(PROBE_CALLS_ENV));
    for line in spec.lines() {
        let (op, path) = line.split_once('\t').expect("op TAB path");
        let path = Path::new(path);
        println!("{MARK}\t{op}\tstart");
        let opened = match op {
            "client_open" => match MnemoClient::open(path, "probe") {
                Err(e) => Err(e),
                Ok(client) => {
                    let (mut recorded, mut refused, mut first) = (0, 0, None);
                    for i in 0..calls {
                        match client.call(None, create_body(i, text_bytes)) {
                            Ok(r) if !r.is_error => recorded += 1,
                            Ok(r) => {
                                refused += 1;
                                first.get_or_insert(format!("error result: {}", r.text));
                            }
                            Err(e) => {
                                refused += 1;
                                first.get_or_insert(e.to_string());
                            }
                        }
                    }
                    let head = client
                        .head()
                        .map_or_else(|e| e.to_string(), |h| h.to_string());
                    println!(
                        "{MARK}\t{op}\tok\t{recorded} of {calls} create calls recorded, {refused} refused (first: {}); head {head}",
                        first.as_deref().unwrap_or("-")
                    );
                    drop(client);
                    Ok(())
                }
            },
            "store_open" | "open_existing" => {
                let opened = if op == "store_open" {
                    Store::open(path)
                } else {
                    Store::open_existing(path)
                };
                opened.map(|store| {
                    println!("{MARK}\t{op}\tok\t{}", verify_summary(&store));
                    drop(store);
                })
            }
            other => panic!("unknown probe {other}"),
        };
        match opened {
            Ok(()) => println!("{MARK}\t{op}\tclosed"),
            Err(e) => println!("{MARK}\t{op}\terr\t{e}"),
        }
    }
    println!("{MARK}\tdone");
}

/// One library probe as the child reported it.
struct LibResult {
    /// `Ok(detail)` if it opened the store, `Err(message)` if it refused; `None` if the child
    /// never said (it hung or died first).
    outcome: Option<Result<String, String>>,
    /// The store it opened was closed (all handles dropped) without hanging.
    closed: bool,
}

impl LibResult {
    fn parse(op: &'static str, stdout: &str) -> LibResult {
        let mut r = LibResult {
            outcome: None,
            closed: false,
        };
        for line in stdout.lines() {
            let mut parts = line.splitn(4, '\t');
            if parts.next() != Some(MARK) || parts.next() != Some(op) {
                continue;
            }
            match (parts.next(), parts.next()) {
                (Some("ok"), detail) => r.outcome = Some(Ok(detail.unwrap_or("").into())),
                (Some("err"), msg) => r.outcome = Some(Err(msg.unwrap_or("").into())),
                (Some("closed"), _) => r.closed = true,
                _ => {}
            }
        }
        r
    }

    fn summary(&self, ran: &Ran) -> String {
        match &self.outcome {
            None => format!("no answer; the child: {}", ran.summary()),
            Some(Err(e)) => format!("Err: {e}"),
            Some(Ok(d)) if self.closed => format!("Ok: {d}"),
            Some(Ok(d)) => format!("Ok: {d}; HUNG while closing the store"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checks.
// ---------------------------------------------------------------------------------------------

/// Problems found in one test; asserted empty at its end.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, p: String) {
        eprintln!("  !! {p}");
        self.0.push(p);
    }

    /// No hang, no panic, no death by a signal.
    fn never(&mut self, ran: &Ran) {
        if ran.timed_out {
            self.push(format!(
                "HANG: {} did not finish within {TIMEOUT:?} and was killed ({})",
                ran.what,
                ran.summary()
            ));
        }
        if ran.panicked() {
            let at = ran
                .stderr
                .lines()
                .chain(ran.stdout.lines())
                .skip_while(|l| !l.contains("panicked at"))
                .take(3)
                .collect::<Vec<_>>()
                .join(" | ");
            self.push(format!("PANIC: {} panicked: {at}", ran.what));
        }
        if let Some(sig) = ran.signal.filter(|_| !ran.timed_out) {
            self.push(format!("{} was killed by signal {sig}", ran.what));
        }
    }

    /// The CLI refused: exit 2, one `mnemo: error:` line naming one of `hints`; or, for `mnemo
    /// verify` on a log sled finds damaged, exit 1 with the violation (damage is a finding).
    fn cli_refused(&mut self, ran: &Ran, hints: &[&str]) {
        self.never(ran);
        if ran.timed_out || ran.panicked() {
            return;
        }
        if ran.code == Some(1) && ran.what.contains("verify") && ran.stdout.contains("VIOLATION") {
            return;
        }
        if ran.code != Some(2) {
            self.push(format!(
                "BUG (silent success): {} must exit 2 on this store, got {}",
                ran.what,
                ran.summary()
            ));
            return;
        }
        let msg = ran.stderr.trim();
        if !msg.starts_with("mnemo: error:") || !mentions(msg, hints) {
            self.push(format!(
                "{}: unclear message (expected `mnemo: error:` naming one of {hints:?}): {msg:?}",
                ran.what
            ));
        }
    }

    /// The library probe refused with an `Err` naming one of `hints`.
    fn lib_refused(&mut self, run: &LibRun, hints: &[&str]) {
        self.never(&run.ran);
        match &run.result.outcome {
            None if run.ran.timed_out || run.ran.panicked() => {}
            None => self.push(format!(
                "{} never answered: {}",
                run.ran.what,
                run.ran.summary()
            )),
            Some(Ok(detail)) => self.push(format!(
                "BUG (silent success): {} must return Err on this store, but it opened it: {detail}{}",
                run.ran.what,
                if run.result.closed {
                    ""
                } else {
                    " (and then HUNG while closing it)"
                }
            )),
            Some(Err(e)) if !mentions(e, hints) => self.push(format!(
                "{} refused with an unclear message (expected one of {hints:?}): {e}",
                run.ran.what
            )),
            Some(Err(_)) => {}
        }
    }

    /// Every probe refused: the CLI exits 2, the library returns `Err`, naming one of `hints`.
    fn refused(&mut self, seen: &Observed, hints: &[&str]) {
        for c in &seen.cli {
            self.cli_refused(&c.ran, hints);
        }
        for l in &seen.lib {
            self.lib_refused(l, hints);
        }
    }

    /// Damage that cost nothing: every probe uses the store with all [`EVENTS`] events and the
    /// pristine `head`: verify INTACT, log lists them all, tool and `MnemoClient::open` record the
    /// create as the next seq.
    fn every_event(&mut self, seen: &Observed, head: Head) {
        for r in seen.runs() {
            self.never(r);
        }
        let verify = &seen.cli("verify").ran;
        if verify.code != Some(0)
            || !verify
                .stdout
                .contains(&format!("checked:    {EVENTS} events"))
        {
            self.push(format!(
                "{}: expected INTACT with {EVENTS} events, got {}",
                verify.what,
                verify.summary()
            ));
        }
        let tool = &seen.cli("tool").ran;
        if tool.code != Some(0) || !tool.stdout.contains(&format!("mnemo-{}", EVENTS + 1)) {
            self.push(format!(
                "{}: expected the create as seq {}, got {}",
                tool.what,
                EVENTS + 1,
                tool.summary()
            ));
        }
        let log = &seen.cli("log").ran;
        if log.code != Some(0)
            || log.stdout.lines().count() != usize::try_from(EVENTS).expect("small")
        {
            self.push(format!(
                "{}: expected {EVENTS} events listed, got {}",
                log.what,
                log.summary()
            ));
        }
        for l in &seen.lib {
            let want = if l.op == "client_open" {
                format!("head {}:", EVENTS + 1)
            } else {
                format!("status=intact events={EVENTS} head={} ", head)
            };
            let ok = matches!(&l.result.outcome, Some(Ok(d)) if d.contains(&want));
            if !ok || !l.result.closed {
                self.push(format!(
                    "{}: expected Ok with {want:?}, got {}",
                    l.ran.what,
                    l.result.summary(&l.ran)
                ));
            }
        }
    }

    /// The loss was detected: verify exits 1 with its violation, the verifying library opens
    /// report a violation (or refuse), and every other probe refuses naming one of `hints`.
    fn detected(&mut self, seen: &Observed, hints: &[&str]) {
        for c in &seen.cli {
            if c.sub != "verify" {
                self.cli_refused(&c.ran, hints);
                continue;
            }
            self.never(&c.ran);
            if c.ran.code != Some(1) || !c.ran.stdout.contains("VIOLATION") {
                self.push(format!(
                    "{}: a detected loss must exit 1 with VIOLATION, got {}",
                    c.ran.what,
                    c.ran.summary()
                ));
            }
        }
        for l in &seen.lib {
            match &l.result.outcome {
                Some(Ok(detail)) if l.op != "client_open" => {
                    self.never(&l.ran);
                    if !detail.starts_with("status=violation") {
                        self.push(format!(
                            "{}: a detected loss must report a violation, got {detail}",
                            l.ran.what
                        ));
                    }
                }
                _ => self.lib_refused(l, hints),
            }
        }
    }

    /// A damaged store is refused: every probe refuses naming one of `hints`, or, where sled still
    /// reads a shortened log, the loss is detected and nothing uses the store: `mnemo verify`
    /// exits 1 naming the violation, the verifying opens (`Store::open`, `open_existing`) report it,
    /// and `mnemo tool`, `mnemo log` and `MnemoClient::open` refuse. A store that opens — intact
    /// (the damage cost nothing, so the case proves no refusal), empty or rolled back — is a
    /// problem, the last two reported as silent data loss.
    fn damaged(&mut self, c: &Case<'_>, seen: &Observed, hints: &[&str], head: Head) {
        let case = c.name.as_str();
        let lossless = format!("status=intact events={} head={head} ", head.seq);
        let verdict = match &seen.lib("store_open").result.outcome {
            Some(Err(_)) | None => return self.refused(seen, hints),
            Some(Ok(detail)) if detail.starts_with("status=violation") => {
                eprintln!("[{case}] verdict: detected; {detail}");
                self.detected(seen, hints);
                return;
            }
            Some(Ok(detail)) if detail.starts_with(&lossless) => {
                self.push(format!(
                    "{case}: expected a refusal, but the store opens intact with every event ({detail}): the damage cost nothing, so the case proves no refusal"
                ));
                return;
            }
            Some(Ok(detail)) if detail.starts_with("status=empty") => format!(
                "the store opens as a NEW EMPTY store (Store::open initialized it: {detail})"
            ),
            Some(Ok(detail)) => format!(
                "the store opens silently ROLLED BACK ({detail}; the pristine store has {} events, head {head})",
                head.seq
            ),
        };
        for r in seen.runs() {
            self.never(r);
        }
        let verify = seen.cli("verify");
        let tool = seen.cli("tool");
        let first = |s: &str| s.lines().next().unwrap_or("").to_string();
        // What the documented defence sees: the pristine checkpoint, on the copy verify ran on.
        let mut cmd = Command::new(crate::support::mnemo_bin());
        cmd.arg("verify")
            .arg("--db")
            .arg(&verify.after)
            .args(["--expect", &head.to_string()]);
        let expect = run(format!("{case}: mnemo verify --expect"), cmd, Vec::new());
        self.never(&expect);
        let caught = expect
            .stdout
            .lines()
            .find(|l| l.contains("violation:"))
            .unwrap_or("no violation")
            .trim()
            .to_string();
        // Did opening it to verify change the damaged file? (sled's recovery shreds the log past
        // the last frame it could read, and fsyncs.) Compare with a fresh damaged copy.
        let fresh = c.prepare("untouched", &["store"]);
        let changed = match (
            std::fs::read(fresh.paths[0].join("db")),
            std::fs::read(verify.after.join("db")),
        ) {
            (Ok(before), Ok(after)) => {
                let end = before.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                let changed = (0..end).filter(|&i| after.get(i) != before.get(i)).count();
                format!("opening it to verify rewrote {changed} of the {end} bytes of log in db")
            }
            (Err(_), _) => "db was missing before verify".to_string(),
            (_, Err(e)) => format!("db after verify: {e}"),
        };
        self.push(format!(
            "BUG (silent data loss): {case}: {verdict}; {changed}; `mnemo verify` exits {:?} ({:?}) — only `--expect <pristine checkpoint>` notices (exit {:?}: {caught}); `mnemo tool` exits {:?} and answers {:?}; `mnemo log` exits {:?}; MnemoClient::open: {}; Store::open_existing: {}",
            verify.ran.code,
            first(&verify.ran.stdout),
            expect.code,
            tool.ran.code,
            first(&tool.ran.stdout),
            seen.cli("log").ran.code,
            seen.lib("client_open").result.summary(&seen.lib("client_open").ran),
            seen.lib("open_existing").result.summary(&seen.lib("open_existing").ran),
        ));
    }

    /// The store at `path` (opened now, with no limit) verifies intact with the pristine head.
    fn intact(&mut self, what: &str, path: &Path, head: Head) {
        match Store::open(path) {
            Err(e) => self.push(format!("{what}: the store no longer opens: {e}")),
            Ok(store) => match verify_store(&store) {
                Ok(r) if r.is_intact() && r.head == head => {}
                Ok(r) => self.push(format!(
                    "{what}: the store was changed: {} events, head {}, violations {:?}",
                    r.events, r.head, r.violations
                )),
                Err(e) => self.push(format!("{what}: verify failed: {e}")),
            },
        }
    }

    fn assert_none(&self, test: &str) {
        assert!(
            self.0.is_empty(),
            "{test}: {} problem(s):\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn mentions(msg: &str, hints: &[&str]) -> bool {
    let lower = msg.to_lowercase();
    hints.iter().any(|h| lower.contains(&h.to_lowercase()))
}

/// Runs the CLI trio and the library probes on `case` on a store that cannot be written: the
/// read commands (`verify`, `log`, which read a private copy) must work, `tool` and the
/// library's read-write opens must refuse naming one of `hints`; returns the copies they ran on.
fn expect_read_only(case: &Case<'_>, hints: &[&str], problems: &mut Problems) -> Vec<PathBuf> {
    let seen = case.observe(CREATE_LINE, &ONE_SMALL_CREATE);
    for c in &seen.cli {
        if c.sub == "tool" {
            problems.cli_refused(&c.ran, hints);
        } else {
            problems.never(&c.ran);
            if c.ran.code != Some(0) {
                problems.push(format!(
                    "{}: reading a store that cannot be written must work, got {}",
                    c.ran.what,
                    c.ran.summary()
                ));
            }
        }
    }
    for l in &seen.lib {
        problems.lib_refused(l, hints);
    }
    seen.after()
}

/// Runs the CLI trio and the library probes on `case` and expects every one to refuse; returns
/// the copies they ran on.
fn expect_refused(case: &Case<'_>, hints: &[&str], problems: &mut Problems) -> Vec<PathBuf> {
    let seen = case.observe(CREATE_LINE, &ONE_SMALL_CREATE);
    problems.refused(&seen, hints);
    seen.after()
}

// ---------------------------------------------------------------------------------------------
// The pristine store.
// ---------------------------------------------------------------------------------------------

/// A pristine store of [`EVENTS`] events, built through a default (fsync) client and closed.
struct Pristine {
    dir: tempfile::TempDir,
    /// Closed once by the client that wrote it: sled has written no snapshot file yet, and `db`
    /// holds exactly the log.
    closed_once: PathBuf,
    /// The same store opened once more with `Store::open` and closed: sled wrote a snapshot
    /// (`snap.*`) and padded `db` to its segment size.
    reopened: PathBuf,
    head: Head,
}

fn pristine() -> Pristine {
    let dir = tempfile::tempdir().expect("temporary directory");
    let closed_once = dir.path().join("closed-once.mnemo.db");
    {
        let client = MnemoClient::open(&closed_once, "builder").expect("open a new store");
        let server = MnemoMemoryToolServer::new(client);
        for i in 0..EVENTS {
            let input = if i % 4 == 3 {
                json!({"command": "view", "path": "/memories"})
            } else {
                json!({"command": "create", "path": format!("/memories/f{i}.txt"), "file_text": format!("hello {i}\n")})
            };
            let out = server.handle(&input);
            assert!(out.get("is_error").is_none(), "setup call {i}: {out}");
        }
    }
    let reopened = dir.path().join("reopened.mnemo.db");
    copy_dir(&closed_once, &reopened);
    let head = {
        let store = open_store(&reopened);
        let report = verify_store(&store).expect("verify");
        assert!(report.is_intact() && report.events == EVENTS, "{report:?}");
        report.head
    };
    Pristine {
        dir,
        closed_once,
        reopened,
        head,
    }
}

fn has_snapshot(store: &Path) -> bool {
    std::fs::read_dir(store).expect("list").any(|e| {
        e.expect("entry")
            .file_name()
            .to_string_lossy()
            .starts_with("snap.")
    })
}

/// Where the log's bytes end in `db` (sled pads a segment with zeros).
fn data_end(db: &Path) -> usize {
    let bytes = std::fs::read(db).expect("read db");
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

fn overwrite(file: &Path, at: usize, bytes: &[u8]) {
    let mut content = std::fs::read(file).expect("read");
    content[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(file, content).expect("write");
}

fn no_damage(_: &Path) {}

// ---------------------------------------------------------------------------------------------
// Read-only store.
// ---------------------------------------------------------------------------------------------

fn chmod_tree(path: &Path, dir_mode: u32, file_mode: u32) {
    for entry in std::fs::read_dir(path).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_dir() {
            chmod_tree(&entry.path(), dir_mode, file_mode);
        } else {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(file_mode))
                .expect("chmod file");
        }
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir_mode)).expect("chmod dir");
}

fn make_read_only(store: &Path) {
    chmod_tree(store, 0o555, 0o444);
}

/// Restores write permission on everything under `dir` (so the temporary directory can go).
fn make_writable(dir: &Path) {
    if dir.exists() {
        chmod_tree(dir, 0o755, 0o644);
    }
}

/// As `nobody`, every read-write open fails in sled with EACCES: `mnemo tool` exits 2
/// with "storage error: IO error: Permission denied (os error 13); check the disk and permissions
/// of the store directory", the library's read-write opens return `Error::Storage`. `verify` and
/// `log` read a private copy and work (before read-only opens they failed the same way). The
/// copies are untouched.
#[test]
fn a_read_only_store_is_written_by_no_one_and_read_by_its_readers() {
    const TEST: &str = "read-only store (chmod 0555/0444)";
    let p = pristine();
    // Do permission bits stop this process? Not as root (CAP_DAC_OVERRIDE).
    let probe = p.dir.path().join("probe-ro");
    std::fs::create_dir(&probe).expect("mkdir");
    make_read_only(&probe);
    let bits_bind = std::fs::write(probe.join("x"), b"x").is_err();
    make_writable(&probe);
    let wrap = if bits_bind {
        Wrap::Plain
    } else if is_root() && have("setpriv") {
        eprintln!(
            "{TEST}: running as root, where permission bits do not stop writes: the children run as nobody (setpriv --reuid=65534)"
        );
        Wrap::Unprivileged
    } else {
        return skip(
            TEST,
            "permission bits do not stop this process and setpriv is not available to drop to an unprivileged user",
        );
    };
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &make_read_only,
        wrap,
        work: &work,
    };
    if matches!(wrap, Wrap::Unprivileged) {
        // `nobody` must reach and read the store (the temporary directory is 0700), and must not
        // be able to write it: otherwise "Permission denied" would prove nothing.
        std::fs::set_permissions(p.dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the temporary directory");
        let copy = case.prepare("precondition", &["store"]);
        let mut check = case.command(
            Path::new("sh"),
            [
                "-c",
                r#"cat "$1/conf" > /dev/null && ! touch "$1/x" 2> /dev/null"#,
                "sh",
            ]
            .map(OsString::from)
            .to_vec(),
            &[],
        );
        check.arg(&copy.paths[0]);
        let reachable = check.status().is_ok_and(|s| s.success());
        make_writable(&copy.paths[0]);
        if !reachable {
            return skip(
                TEST,
                "nobody cannot read a store in the temporary directory (or can write a read-only one)",
            );
        }
    }
    let mut problems = Problems::default();
    let after = expect_read_only(&case, &["permission denied"], &mut problems);
    make_writable(&work);
    for path in after {
        problems.intact(TEST, &path, p.head);
    }
    problems.assert_none(TEST);
}

/// Clears the immutable attribute it set, whatever happens.
struct Immutable(Vec<PathBuf>);

impl Immutable {
    fn release(&mut self) {
        for p in self.0.drain(..) {
            let _ = Command::new("chattr").arg("-i").arg(p).status();
        }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        self.release();
    }
}

/// With the immutable attribute (which stops root), every read-write open fails in sled
/// with EPERM: `mnemo tool` exits 2 with "storage error: IO error: Operation not permitted (os
/// error 1); check the disk and permissions of the store directory", the library's read-write
/// opens return `Error::Storage`; `verify` and `log` read a private copy and work.
#[test]
fn an_immutable_store_is_written_by_no_one_even_root_and_still_read() {
    const TEST: &str = "immutable store (chattr +i, as root)";
    if !is_root() || !have("chattr") {
        return skip(TEST, "needs root and chattr");
    }
    let p = pristine();
    let work = p.dir.path().join("work");
    let guard = std::sync::Mutex::new(Immutable(Vec::new()));
    let damage = |store: &Path| {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(store)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .collect();
        paths.push(store.to_path_buf());
        for path in paths {
            let ok = Command::new("chattr")
                .arg("+i")
                .arg(&path)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chattr +i {}", path.display());
            guard.lock().expect("lock").0.push(path);
        }
    };
    // Can this filesystem hold the attribute at all?
    let probe = p.dir.path().join("probe-immutable");
    std::fs::create_dir(&probe).expect("mkdir");
    let supported = Command::new("chattr")
        .arg("+i")
        .arg(&probe)
        .status()
        .is_ok_and(|s| s.success());
    let _ = Command::new("chattr").arg("-i").arg(&probe).status();
    if !supported {
        return skip(
            TEST,
            "the filesystem of the temporary directory has no immutable attribute",
        );
    }
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &damage,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    let after = expect_read_only(&case, &["operation not permitted"], &mut problems);
    guard.lock().expect("lock").release();
    for path in after {
        problems.intact(TEST, &path, p.head);
    }
    problems.assert_none(TEST);
}

// ---------------------------------------------------------------------------------------------
// A full disk.
// ---------------------------------------------------------------------------------------------

/// Sled extends `db` to its 512 KiB segment when it opens the store; past a file-size
/// limit of 64 blocks that write fails with EFBIG, so every open fails: the CLI exits 2 with
/// "storage error: IO error: File too large (os error 27); ...", the library returns
/// `Error::Storage`; the store is left intact. Without the SIGXFSZ trap the kernel kills the
/// process with SIGXFSZ (25) instead — no message, but no damage either (checked below).
#[test]
fn a_file_size_limit_hit_on_open_is_refused() {
    const TEST: &str = "full disk at open (ulimit -f 64)";
    let p = pristine();
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &no_damage,
        wrap: Wrap::FileSizeLimit {
            blocks: 64,
            ignore_sigxfsz: true,
        },
        work: &work,
    };
    let mut problems = Problems::default();
    let after = expect_refused(&case, &["file too large"], &mut problems);
    for path in after {
        problems.intact(TEST, &path, p.head);
    }
    // The default disposition of SIGXFSZ: the process is killed by the signal. Documented, not
    // asserted against; the store must survive it.
    let work = p.dir.path().join("work-sigxfsz");
    let case = Case {
        name: format!("{TEST}, SIGXFSZ not ignored"),
        wrap: Wrap::FileSizeLimit {
            blocks: 64,
            ignore_sigxfsz: false,
        },
        work: &work,
        ..case
    };
    let tool = case.cli("tool", CREATE_LINE);
    let ran = &tool.ran;
    let sigxfsz = ran.signal == Some(25);
    if !(sigxfsz || ran.code == Some(2)) || ran.timed_out || ran.panicked() {
        problems.push(format!(
            "{}: expected death by SIGXFSZ or exit 2, got {}",
            ran.what,
            ran.summary()
        ));
    }
    problems.intact(&case.name, &tool.after, p.head);
    problems.assert_none(TEST);
}

/// Mounting needs root; the mount lives in a private namespace and goes with it.
fn tmpfs_available(scratch: &Path) -> Result<(), String> {
    if !is_root() {
        return Err("mounting a tmpfs needs root".into());
    }
    if !have("unshare") {
        return Err("unshare(1) is not installed".into());
    }
    let mnt = scratch.join("tmpfs-probe");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    let ok = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            r#"mount -t tmpfs -o size=64k tmpfs "$1" && umount "$1""#,
            "sh",
        ])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("`unshare -m` + `mount -t tmpfs` failed here".into())
    }
}

/// On a full tmpfs, sled's read-write open cannot extend `db`: `mnemo tool` exits 2 with
/// "storage error: IO error: No space left on device (os error 28); ...", the library's
/// read-write opens return `Error::Storage`; `verify` and `log` read a private copy (in the
/// temporary directory, elsewhere) and work; the store is left intact.
#[test]
fn a_full_tmpfs_on_open_refuses_writes_and_still_reads() {
    const TEST: &str = "full disk at open (tmpfs, 0 KiB free)";
    let p = pristine();
    if let Err(why) = tmpfs_available(p.dir.path()) {
        return skip(TEST, &why);
    }
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &no_damage,
        wrap: Wrap::Tmpfs { leave_kib: 0 },
        work: &work,
    };
    let mut problems = Problems::default();
    let after = expect_read_only(&case, &["no space left"], &mut problems);
    for path in after {
        problems.intact(TEST, &path, p.head);
    }
    problems.assert_none(TEST);
}

/// `count` create lines of `bytes` bytes of text each.
fn create_lines(count: usize, bytes: usize) -> String {
    (0..count)
        .map(|i| {
            json!({"command": "create", "path": format!("/memories/big{i}.txt"), "file_text": format!("{i}:{}", "x".repeat(bytes))})
                .to_string()
                + "\n"
        })
        .collect()
}

/// Checks a `mnemo tool` run that hit a full disk after it opened the store: every line got a
/// tool_result, every acknowledged create is in the store afterwards (which verifies intact),
/// and every failure was reported as an error result, never as a success.
fn check_tool_after_full_disk(
    ran: &Ran,
    lines: usize,
    bytes: usize,
    after: &Path,
    problems: &mut Problems,
) {
    let results: Vec<serde_json::Value> = ran
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let acknowledged: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.get("is_error").is_none())
        .map(|(i, _)| i)
        .collect();
    let refused = results.len() - acknowledged.len();
    eprintln!(
        "[{}] {} of {lines} lines answered: {} acknowledged, {refused} error results",
        ran.what,
        results.len(),
        acknowledged.len()
    );
    if !ran.timed_out && results.len() != lines {
        problems.push(format!(
            "{}: {} of {lines} lines got a tool_result",
            ran.what,
            results.len()
        ));
    }
    if !ran.timed_out && refused == 0 {
        problems.push(format!(
            "{}: the disk filled up but no call was refused (the case did not hit the limit)",
            ran.what
        ));
    }
    // Every acknowledged write is durable, whatever happened to the process afterwards.
    let client = match MnemoClient::builder(after).agent_id("check").open() {
        Ok(c) => c,
        Err(e) => {
            return problems.push(format!("{}: the store no longer opens: {e}", ran.what));
        }
    };
    match client.verify() {
        Ok(r) if r.is_intact() => {}
        Ok(r) => problems.push(format!(
            "{}: the store does not verify: {:?}",
            ran.what, r.violations
        )),
        Err(e) => problems.push(format!("{}: verify failed: {e}", ran.what)),
    }
    for i in acknowledged {
        let want = format!("{i}:{}", "x".repeat(bytes));
        match client.record(&format!("/memories/big{i}.txt")) {
            Ok(Some(r)) if r.content == want => {}
            other => problems.push(format!(
                "{}: create {i} was acknowledged but is not in the store: {:?}",
                ran.what,
                other.map(|r| r.map(|r| r.content.len()))
            )),
        }
    }
}

/// 80 creates of 20 KB under a file-size limit of 1024 blocks. The store opens; the first
/// writes fit, then sled's next segment write fails with EFBIG and the writer is poisoned: that
/// call and every later one get an error result ("The memory store failed while recording this
/// call (storage error: IO error: File too large ...)", then "... poisoned it ..."), the library's
/// `MnemoClient::call` returns `Err(Storage)` then `Err(Poisoned)`. Every acknowledged create is
/// durable and the store verifies intact, and `mnemo tool` exits 2 with a `mnemo: error:` line,
/// so an operator (or supervisor) is told the store failed.
#[test]
fn a_file_size_limit_hit_mid_session_is_reported() {
    const TEST: &str = "full disk mid-session, small writes (ulimit -f 1024)";
    const LINES: usize = 80;
    const BYTES: usize = 20_000;
    let p = pristine();
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &no_damage,
        wrap: Wrap::FileSizeLimit {
            blocks: 1024,
            ignore_sigxfsz: true,
        },
        work: &work,
    };
    let mut problems = Problems::default();
    let seen = case.observe(
        &create_lines(LINES, BYTES),
        &LibProbes {
            text_bytes: BYTES,
            calls: LINES,
        },
    );
    check_full_disk_mid_write(&seen, LINES, BYTES, &mut problems);
    problems.assert_none(TEST);
}

/// A full disk hit after the store opened: no probe hangs or panics; `mnemo tool` answers every
/// line, never acknowledges a write it lost, and — once the store failed — exits 2 with a
/// `mnemo: error:` line; `MnemoClient::call` returns `Err` for the refused calls and the client
/// closes; the reads (`mnemo verify`, `mnemo log`, the `Store` probes) still work.
fn check_full_disk_mid_write(seen: &Observed, lines: usize, bytes: usize, problems: &mut Problems) {
    for r in seen.runs() {
        problems.never(r);
    }
    let tool = seen.cli("tool");
    let ran = &tool.ran;
    if !ran.timed_out {
        check_tool_after_full_disk(ran, lines, bytes, &tool.after, problems);
        if ran.code != Some(2) || !ran.stderr.contains("mnemo: error:") {
            problems.push(format!(
                "BUG (silent success): {} must exit 2 with a `mnemo: error:` line once the store failed, got {}",
                ran.what,
                ran.summary()
            ));
        }
    }
    for sub in ["verify", "log"] {
        let c = seen.cli(sub);
        if !c.ran.timed_out && c.ran.code != Some(0) {
            problems.push(format!(
                "{}: reading needs no space; expected exit 0, got {}",
                c.ran.what,
                c.ran.summary()
            ));
        }
    }
    for l in &seen.lib {
        match (&l.result.outcome, l.op) {
            (None, _) if !l.ran.timed_out => problems.push(format!(
                "{} never answered: {}",
                l.ran.what,
                l.ran.summary()
            )),
            (None, _) => {}
            (Some(Ok(_)), _) if !l.result.closed => problems.push(format!(
                "HANG: {} opened the store but never finished closing it: {}",
                l.ran.what,
                l.result.summary(&l.ran)
            )),
            (Some(Ok(detail)), "client_open") if detail.contains(" 0 refused") => {
                problems.push(format!(
                    "{}: no call was refused (the case did not hit the limit): {detail}",
                    l.ran.what
                ));
            }
            (Some(Ok(detail)), "store_open" | "open_existing")
                if !detail.starts_with("status=intact") =>
            {
                problems.push(format!("{}: {detail}", l.ran.what));
            }
            (Some(Err(e)), _) => problems.push(format!(
                "{}: reading needs no space, but it was refused: {e}",
                l.ran.what
            )),
            _ => {}
        }
    }
}

/// One 3 MB create (a value sled stores as a blob file) under a file-size limit of 2048 blocks.
/// The store opens, the blob write fails with EFBIG, the call gets an error result (library:
/// `Err(Storage)`), and the store closes: `mnemo tool` exits 2 once its input ends, the
/// library's drop of `MnemoClient` returns. (Closing once hung for ever in sled's flush, waiting
/// for a log position the failed write would never make stable; a hang fails the case.)
#[test]
fn a_file_size_limit_hit_by_a_large_value_does_not_hang() {
    const TEST: &str = "full disk mid-write, one 3 MB value (ulimit -f 2048)";
    large_value_case(
        TEST,
        Wrap::FileSizeLimit {
            blocks: 2048,
            ignore_sigxfsz: true,
        },
    );
}

/// The same as [`a_file_size_limit_hit_by_a_large_value_does_not_hang`] with ENOSPC on a tmpfs
/// with 1.5 MiB free: the error result comes, and the store closes.
#[test]
fn a_full_tmpfs_hit_by_a_large_value_does_not_hang() {
    const TEST: &str = "full disk mid-write, one 3 MB value (tmpfs, 1.5 MiB free)";
    let scratch = tempfile::tempdir().expect("temporary directory");
    if let Err(why) = tmpfs_available(scratch.path()) {
        return skip(TEST, &why);
    }
    large_value_case(TEST, Wrap::Tmpfs { leave_kib: 1536 });
}

fn large_value_case(test: &str, wrap: Wrap) {
    const BYTES: usize = 3_000_000;
    let p = pristine();
    let work = p.dir.path().join("work");
    let case = Case {
        name: test.into(),
        base: Some(&p.closed_once),
        damage: &no_damage,
        wrap,
        work: &work,
    };
    let mut problems = Problems::default();
    let seen = case.observe(
        &create_lines(1, BYTES),
        &LibProbes {
            text_bytes: BYTES,
            calls: 1,
        },
    );
    let tool = seen.cli("tool");
    if tool.ran.stdout.contains("File created successfully") {
        problems.push(format!(
            "{}: the 3 MB create was acknowledged although the disk was full",
            tool.ran.what
        ));
    }
    check_full_disk_mid_write(&seen, 1, BYTES, &mut problems);
    problems.assert_none(test);
}

// ---------------------------------------------------------------------------------------------
// Missing files.
// ---------------------------------------------------------------------------------------------

fn remove(file: &'static str) -> impl Fn(&Path) {
    move |store: &Path| std::fs::remove_file(store.join(file)).expect("remove the file")
}

fn remove_snapshots(store: &Path) {
    for entry in std::fs::read_dir(store).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_name().to_string_lossy().starts_with("snap.") {
            std::fs::remove_file(entry.path()).expect("remove the snapshot");
        }
    }
}

/// A store closed once has no snapshot; without `db`, sled would open an empty log from `conf`
/// alone (and once did, so that `Store::open` initialized a new store in it). Every probe refuses:
/// "corrupt store: ... holds sled's configuration or snapshot but its log file `db` is missing" —
/// exit 2 / `Error::Corrupt`.
#[test]
fn a_store_without_its_db_file_is_refused() {
    const TEST: &str = "db file deleted (store closed once, no snapshot)";
    let p = pristine();
    let work = p.dir.path().join("work");
    // A new store is built beside its path and reopened in place, so it has a snapshot from
    // the start: removing it too leaves `conf` alone, the case this test is about.
    let damage = |store: &Path| {
        remove_snapshots(store);
        std::fs::remove_file(store.join("db")).expect("remove the file");
    };
    let case = Case {
        name: TEST.into(),
        base: Some(&p.closed_once),
        damage: &damage,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    expect_refused(&case, &["is missing"], &mut problems);
    problems.assert_none(TEST);
}

/// With a snapshot, sled notices the log it names is gone: "storage error: Read corrupted
/// data at file offset Some(Inline(270)) backtrace (); check the disk and permissions of the
/// store directory" — exit 2 / `Error::Storage`. (Clear enough; `Error::Corrupt`'s wording, which
/// says to restore from a backup, would be better than "check the disk and permissions".)
#[test]
fn a_reopened_store_without_its_db_file_is_refused() {
    const TEST: &str = "db file deleted (store with a snapshot)";
    let p = pristine();
    assert!(has_snapshot(&p.reopened), "sled wrote a snapshot on reopen");
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&p.reopened),
        damage: &remove("db"),
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    expect_refused(&case, &["corrupt"], &mut problems);
    problems.assert_none(TEST);
}

/// `conf` only holds sled's configuration, which Mnemo never changes from the defaults;
/// sled writes it again and the store opens with every event: verify INTACT (20 events), log
/// lists 20 events, tool records the create as seq 21. Nothing was lost, so succeeding is right;
/// asserted as such. The same for a deleted snapshot (sled rebuilds it from the log).
#[test]
fn a_store_without_conf_or_snapshot_opens_with_every_event() {
    let p = pristine();
    let mut problems = Problems::default();
    for (test, base, damage) in [
        (
            "conf deleted (closed once)",
            &p.closed_once,
            &remove("conf") as &Damage<'_>,
        ),
        (
            "conf deleted (with a snapshot)",
            &p.reopened,
            &remove("conf"),
        ),
        ("snapshot deleted", &p.reopened, &remove_snapshots),
    ] {
        let work = p.dir.path().join(test.replace(' ', "-"));
        let case = Case {
            name: test.into(),
            base: Some(base),
            damage,
            wrap: Wrap::Plain,
            work: &work,
        };
        let seen = case.observe(CREATE_LINE, &ONE_SMALL_CREATE);
        problems.every_event(&seen, p.head);
    }
    problems.assert_none("conf or snapshot deleted");
}

// ---------------------------------------------------------------------------------------------
// A truncated or overwritten db file.
// ---------------------------------------------------------------------------------------------

/// Runs every damage in `damages` on copies of `base`: each must be refused with a message naming
/// the corruption, unless it cost nothing (see [`Problems::damaged`]). Everything is run; the
/// problems are asserted together.
fn damaged_db_cases(
    test: &str,
    p: &Pristine,
    base: &Path,
    damages: Vec<(String, Box<Damage<'static>>)>,
) {
    damaged_cases_with_head(test, p, base, p.head, damages);
}

/// [`damaged_db_cases`] for a pristine store whose head is `head`.
fn damaged_cases_with_head(
    test: &str,
    p: &Pristine,
    base: &Path,
    head: Head,
    damages: Vec<(String, Box<Damage<'static>>)>,
) {
    let work = p.dir.path().join("work");
    let mut problems = Problems::default();
    for (what, damage) in &damages {
        let dir = work.join(format!("case-{}", what.replace([' ', '/'], "-")));
        let case = Case {
            name: format!("{test}: {what}"),
            base: Some(base),
            damage: damage.as_ref(),
            wrap: Wrap::Plain,
            work: &dir,
        };
        let seen = case.observe(CREATE_LINE, &ONE_SMALL_CREATE);
        problems.damaged(&case, &seen, &["corrupt"], head);
    }
    eprintln!(
        "{test}: {} damaged stores probed, {} problems",
        damages.len(),
        problems.0.len()
    );
    problems.assert_none(test);
}

/// `db` cut at `at` (of `end` bytes of log).
fn cut_db(at: usize, end: usize) -> (String, Box<Damage<'static>>) {
    let damage: Box<Damage<'static>> = Box::new(move |store: &Path| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(store.join("db"))
            .expect("open db");
        f.set_len(at as u64).expect("truncate db");
    });
    (format!("db cut at {at} of {end} bytes"), damage)
}

/// Cuts of `db` inside its events: from the very start to half of the log.
fn truncations(db: &Path) -> Vec<(String, Box<Damage<'static>>)> {
    let end = data_end(db);
    let mut offsets = vec![0, 1, 64, 512, end / 4, end / 2];
    offsets.dedup();
    offsets.into_iter().map(|at| cut_db(at, end)).collect()
}

/// Damage to the last bytes of `db`'s log: cuts 100 bytes and 1 byte before its end, and a byte
/// flipped 50 bytes before it. In a store closed once these bytes hold no event (sled's last
/// frames there are the index's, some 3 KB of them, rebuilt from the events).
fn tail_damage(db: &Path) -> Vec<(String, Box<Damage<'static>>)> {
    let end = data_end(db);
    vec![
        cut_db(end - 100, end),
        cut_db(end - 1, end),
        (
            format!("one byte flipped at {}", end - 50),
            Box::new(move |store: &Path| {
                let db = store.join("db");
                let mut content = std::fs::read(&db).expect("read");
                content[end - 50] ^= 0x40;
                std::fs::write(&db, content).expect("write");
            }),
        ),
    ]
}

fn garbage(db: &Path) -> Vec<(String, Box<Damage<'static>>)> {
    let len = std::fs::read(db).expect("db").len();
    let end = data_end(db);
    let mid = end / 2;
    let fill = |bytes: Vec<u8>, at: usize| -> Box<Damage<'static>> {
        Box::new(move |store: &Path| overwrite(&store.join("db"), at, &bytes))
    };
    vec![
        ("db all zeros".into(), fill(vec![0; len], 0)),
        (
            "db all random bytes".into(),
            fill(Rng(0x5eed_0001).bytes(len), 0),
        ),
        (
            "first 512 bytes random".into(),
            fill(Rng(0x5eed_0002).bytes(512), 0),
        ),
        ("first 64 bytes zeroed".into(), fill(vec![0; 64], 0)),
        (
            format!("64 random bytes at {mid} (mid-log)"),
            fill(Rng(0x5eed_0003).bytes(64), mid),
        ),
    ]
}

/// A store closed once has no snapshot, and sled reads `db` as a log whose tail may be torn: cut
/// at 0, 1 or 64 bytes, sled refuses it ("Read corrupted data"); cut at 512 bytes, 1/4 or 1/2 of
/// the log, sled opens the events before the cut, and the head the store recorded at its last
/// commit shows what was lost: `mnemo verify` exits 1 (VIOLATION), `mnemo tool`, `mnemo log` and
/// `MnemoClient::open` refuse with "corrupt store: this store committed N:... but its log now ends
/// at M:...". (Before the recorded head, these opened silently, empty or rolled back.)
#[test]
fn a_truncated_db_file_is_refused() {
    let p = pristine();
    damaged_db_cases(
        "truncated db (closed once, no snapshot)",
        &p,
        &p.closed_once,
        truncations(&p.closed_once.join("db")),
    );
}

/// With a snapshot covering the whole log, every cut inside it is refused: "storage error:
/// Read corrupted data at file offset ..." — exit 2 / `Error::Storage`. (The log written after
/// the snapshot is another matter: see
/// [`damage_in_the_log_written_since_the_last_open_is_refused`].)
#[test]
fn a_truncated_db_file_with_a_snapshot_is_refused() {
    let p = pristine();
    damaged_db_cases(
        "truncated db (with a snapshot)",
        &p,
        &p.reopened,
        truncations(&p.reopened.join("db")),
    );
}

/// Store closed once: all zeros, all random bytes, 512 random bytes or 64 zero bytes at the head
/// are refused by sled ("Read corrupted data"); 64 random bytes mid-log leave sled the events
/// before them, and the recorded head shows the loss (verify exits 1, the rest refuse as
/// corrupt). sled panics on none of them. (Before the recorded head, these opened silently as a
/// new empty store or rolled back.)
#[test]
fn a_db_file_overwritten_with_garbage_is_refused() {
    let p = pristine();
    damaged_db_cases(
        "garbage db (closed once, no snapshot)",
        &p,
        &p.closed_once,
        garbage(&p.closed_once.join("db")),
    );
}

/// With a snapshot covering the whole log, every overwrite inside it is refused:
/// "storage error: Read corrupted data at file offset ..." — exit 2 / `Error::Storage`; no
/// panic, no hang.
#[test]
fn a_db_file_with_a_snapshot_overwritten_with_garbage_is_refused() {
    let p = pristine();
    damaged_db_cases(
        "garbage db (with a snapshot)",
        &p,
        &p.reopened,
        garbage(&p.reopened.join("db")),
    );
}

/// Runs [`tail_damage`] on copies of `base`, each case checked by `check`.
fn tail_cases(
    test: &str,
    p: &Pristine,
    base: &Path,
    check: impl Fn(&mut Problems, &Case<'_>, &Observed),
) {
    let work = p.dir.path().join("work");
    let mut problems = Problems::default();
    for (what, damage) in tail_damage(&base.join("db")) {
        let dir = work.join(format!("case-{}", what.replace([' ', '/'], "-")));
        let case = Case {
            name: format!("{test}: {what}"),
            base: Some(base),
            damage: damage.as_ref(),
            wrap: Wrap::Plain,
            work: &dir,
        };
        let seen = case.observe(CREATE_LINE, &ONE_SMALL_CREATE);
        check(&mut problems, &case, &seen);
    }
    problems.assert_none(test);
}

/// In a store closed once, the last bytes of the log usually hold index batches and no event:
/// cut 100 or 1 byte short, or a byte flipped 50 bytes before its end, the store then opens with
/// every event and the pristine head, and is used as usual (the index is rebuilt from the
/// events). But the writer's background thread writes the index in batches of its own timing,
/// so on a loaded machine the last bytes can hold the last event (seen: 1 run in 25). Then the
/// loss must be caught, not used: each case is one or the other, checked in full — used with
/// every event ([`Problems::every_event`]), or refused or reported by every probe
/// ([`Problems::damaged`]) — never opened silently rolled back.
#[test]
fn damage_to_the_last_bytes_of_a_db_closed_once_is_detected_or_costs_no_event() {
    let p = pristine();
    let lossless = format!("status=intact events={EVENTS} head={} ", p.head);
    tail_cases(
        "damaged tail of db (closed once, no snapshot)",
        &p,
        &p.closed_once,
        |problems, case, seen| match &seen.lib("store_open").result.outcome {
            Some(Ok(detail)) if detail.starts_with(&lossless) => {
                problems.every_event(seen, p.head);
            }
            _ => problems.damaged(case, seen, &["corrupt"], p.head),
        },
    );
}

/// With a snapshot, the same damage is refused ("Read corrupted data") when the snapshot sled
/// wrote at the reopen covers those last bytes, and costs no event when it does not: which of
/// the two depends on when sled's background flush ran during the reopen. Each case must be
/// one or the other, checked in full: refused by every probe ([`Problems::damaged`]), or used
/// with every event ([`Problems::every_event`]) — never opened empty or rolled back.
#[test]
fn damage_to_the_last_bytes_of_a_db_with_a_snapshot_is_refused_or_costs_no_event() {
    let p = pristine();
    let lossless = format!("status=intact events={EVENTS} head={} ", p.head);
    tail_cases(
        "damaged tail of db (with a snapshot)",
        &p,
        &p.reopened,
        |problems, case, seen| match &seen.lib("store_open").result.outcome {
            Some(Ok(detail)) if detail.starts_with(&lossless) => {
                eprintln!("[{}] verdict: costs no event", case.name);
                problems.every_event(seen, p.head);
            }
            _ => problems.damaged(case, seen, &["corrupt"], p.head),
        },
    );
}

/// The reopened store (whose snapshot sled wrote when it opened it), with [`EVENTS`] more events
/// appended by a client and closed: the new events lie in the log past that snapshot. Returns the
/// store, its head, and where the appended part of `db` begins and ends.
fn appended(p: &Pristine) -> (PathBuf, Head, usize, usize) {
    let path = p.dir.path().join("appended.mnemo.db");
    copy_dir(&p.reopened, &path);
    let tail_start = data_end(&path.join("db"));
    let (head, last) = {
        let client = MnemoClient::open(&path, "builder").expect("open");
        let server = MnemoMemoryToolServer::new(client.clone());
        for i in 0..EVENTS {
            let input = json!({"command": "create", "path": format!("/memories/tail{i}.txt"), "file_text": format!("tail {i}\n")});
            let out = server.handle(&input);
            assert!(out.get("is_error").is_none(), "append call {i}: {out}");
        }
        let head = client.head().expect("head");
        let store = client.store().expect("a store open here").clone();
        let last = store.get(head.seq).expect("read").expect("the last event");
        (head, last)
    };
    assert_eq!(head.seq.0, 2 * EVENTS);
    let db = std::fs::read(path.join("db")).expect("read db");
    let tail_end = data_end(&path.join("db"));
    assert!(
        tail_end > tail_start,
        "the new events went to the end of db"
    );
    // The appended part ends where the last event's record does: the index changes written after
    // it (at close) are derived state a reopen rebuilds, so damage there costs nothing.
    let events_end = db
        .windows(last.len())
        .rposition(|w| w == last.as_slice())
        .map_or(tail_end, |at| at + last.len());
    assert!(
        events_end > tail_start,
        "the last event lies in the appended part"
    );
    (path, head, tail_start, events_end)
}

/// The snapshot only covers the log up to the open that wrote it. Damage in the part written
/// since — the events of the last session — is read by sled as a torn tail and it opens the events
/// before the damage; the head the store recorded at its last commit shows the loss: verify exits
/// 1, `mnemo tool`, `mnemo log` and `MnemoClient::open` refuse the store as corrupt. (Before the
/// recorded head, it opened silently rolled back.)
#[test]
fn damage_in_the_log_written_since_the_last_open_is_refused() {
    let p = pristine();
    let (path, head, start, end) = appended(&p);
    let mid = (start + end) / 2;
    let quarter = start + (end - start) / 4;
    let cut = |at: usize| -> Box<Damage<'static>> {
        Box::new(move |store: &Path| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(store.join("db"))
                .expect("open db")
                .set_len(at as u64)
                .expect("truncate db");
        })
    };
    let random = |at: usize, seed: u64| -> Box<Damage<'static>> {
        let bytes = Rng(seed).bytes(64);
        Box::new(move |store: &Path| overwrite(&store.join("db"), at, &bytes))
    };
    damaged_cases_with_head(
        "damage after the snapshot (events appended since the last open)",
        &p,
        &path,
        head,
        vec![
            (
                format!("db cut at {mid} (appended part {start}..{end})"),
                cut(mid),
            ),
            (
                format!("db cut at {quarter} (appended part {start}..{end})"),
                cut(quarter),
            ),
            (
                format!("64 random bytes at {mid} (appended part {start}..{end})"),
                random(mid, 0x5eed_0004),
            ),
        ],
    );
}

/// Seeded random damage — a flipped bit, a burst of random or zero bytes, a cut — to a
/// random file of the store (`db`, `conf`, a snapshot), closed once or with a snapshot. Whatever
/// it does to the data (refused with exit 2, or opened, possibly rolled back: see the tests
/// above), neither `mnemo verify` nor `Store::open` + `verify_store` may panic, hang or die by a
/// signal. None does today (nor in 400 more such cases run while writing this test).
#[test]
fn random_damage_never_panics_or_hangs() {
    const CASES: usize = 40;
    let p = pristine();
    let mut rng = Rng(0x5eed_f022);
    let mut problems = Problems::default();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..CASES {
        let base = if i % 2 == 0 {
            &p.closed_once
        } else {
            &p.reopened
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(base)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|f| f.is_file())
            .collect();
        files.sort();
        // Half the cases hit `db`, the rest any file.
        let file = if rng.below(2) == 0 {
            base.join("db")
        } else {
            files[rng.below(files.len())].clone()
        };
        let name = file.file_name().expect("name").to_owned();
        let content = std::fs::read(&file).expect("read");
        let end = content.iter().rposition(|&b| b != 0).map_or(1, |i| i + 1);
        let at = rng.below(end + 64).min(content.len().saturating_sub(1));
        let n = 1 + rng.below(256);
        let (what, damaged) = match rng.below(4) {
            0 => {
                let mut c = content.clone();
                if let Some(b) = c.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
                ("bit flipped", c)
            }
            1 => {
                let mut c = content.clone();
                let stop = (at + n).min(c.len());
                let noise = rng.bytes(stop - at);
                c[at..stop].copy_from_slice(&noise);
                ("random burst", c)
            }
            2 => {
                let mut c = content.clone();
                let stop = (at + n).min(c.len());
                c[at..stop].fill(0);
                ("zero burst", c)
            }
            _ => ("cut", content[..at].to_vec()),
        };
        let label = format!(
            "random damage {i}: {what} at {at} of {} ({})",
            name.to_string_lossy(),
            if i % 2 == 0 {
                "closed once"
            } else {
                "with a snapshot"
            }
        );
        let damage = move |store: &Path| {
            std::fs::write(store.join(&name), &damaged).expect("write the damaged file");
        };
        let work = p.dir.path().join(format!("random-{i}"));
        let case = Case {
            name: label,
            base: Some(base),
            damage: &damage,
            wrap: Wrap::Plain,
            work: &work,
        };
        let verify = case.cli("verify", "");
        problems.never(&verify.ran);
        let lib = case.lib("store_open", &ONE_SMALL_CREATE);
        problems.never(&lib.ran);
        if !matches!(verify.ran.code, Some(0..=2)) {
            problems.push(format!("{}: {}", verify.ran.what, verify.ran.summary()));
        }
        let kind = match &lib.result.outcome {
            Some(Err(_)) => "refused".to_string(),
            Some(Ok(d)) => d.split(' ').take(2).collect::<Vec<_>>().join(" "),
            None => "no answer".to_string(),
        };
        *outcomes.entry(kind).or_default() += 1;
    }
    eprintln!("random damage: {CASES} cases, Store::open outcomes: {outcomes:?}");
    problems.assert_none("random damage");
}

// ---------------------------------------------------------------------------------------------
// A newer format; a --db that is not a store directory.
// ---------------------------------------------------------------------------------------------

/// `Store::open` refuses `meta.format` 10 with `Error::NewerFormat` ("store format version
/// 10 is newer than this mnemo supports (max 1); upgrade mnemo to open it"), so does every caller;
/// the CLI prints it and exits 2. (tests/recovery.rs covers `MnemoClient::open`.)
#[test]
fn a_store_from_a_newer_format_is_refused_by_the_cli_too() {
    const TEST: &str = "meta.format says a version past this build's";
    let p = pristine();
    let newer = p.dir.path().join("newer.mnemo.db");
    copy_dir(&p.closed_once, &newer);
    {
        let store = open_store(&newer);
        let (_, meta, _) = store.raw_trees();
        meta.insert("format", &[mnemo::testing::event::FORMAT_VERSION + 1])
            .expect("write");
        meta.flush().expect("flush");
    }
    let work = p.dir.path().join("work");
    let case = Case {
        name: TEST.into(),
        base: Some(&newer),
        damage: &no_damage,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    expect_refused(&case, &["upgrade mnemo"], &mut problems);
    problems.assert_none(TEST);
}

/// Sled cannot make a directory where a file is: `MnemoClient::open`, `Store::open` and
/// `mnemo tool` fail with "storage error: IO error: Not a directory (os error 20); ...";
/// `Store::open_existing`, `mnemo verify` and `mnemo log` say "no store at PATH; create one with
/// `mnemo demo --db PATH` ...". Exit 2 / `Err` everywhere; the file is untouched.
#[test]
fn a_db_path_that_is_a_regular_file_is_refused() {
    const TEST: &str = "--db is a regular file";
    let p = pristine();
    let work = p.dir.path().join("work");
    let make_file = |path: &Path| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, b"not a store\n").expect("write the file");
    };
    let case = Case {
        name: TEST.into(),
        base: None,
        damage: &make_file,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    let after = expect_refused(&case, &["not a directory", "no store at"], &mut problems);
    for path in after {
        if std::fs::read(&path).ok().as_deref() != Some(&b"not a store\n"[..]) {
            problems.push(format!("{TEST}: {} was changed", path.display()));
        }
    }
    problems.assert_none(TEST);
}

/// `Store::open_existing`, `mnemo verify` and `mnemo log` say "no store at PATH ..."; the
/// creating opens (`MnemoClient::open`, `Store::open`, `mnemo tool`) say "the directory ... does
/// not exist; create it first": exit 2 / `Err`. (They once created every missing parent, so a
/// mistyped or unmounted parent silently put the memory somewhere else.)
#[test]
fn a_db_path_under_a_missing_directory_is_refused() {
    const TEST: &str = "--db under a directory that does not exist";
    let p = pristine();
    let work = p.dir.path().join("work");
    // `prepare` hands out `<probe dir>/<copy>`; the damage removes the copy's parent.
    let under_missing = |path: &Path| {
        let parent = path.parent().expect("parent");
        if parent.exists() {
            std::fs::remove_dir_all(parent).expect("remove the parent");
        }
    };
    let case = Case {
        name: TEST.into(),
        base: None,
        damage: &under_missing,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    expect_refused(
        &case,
        &["no store at", "does not exist", "no such file"],
        &mut problems,
    );
    problems.assert_none(TEST);
}

// ---------------------------------------------------------------------------------------------
// Store files that are not what they seem.
// ---------------------------------------------------------------------------------------------

/// The address-space limit the impostor probes run under, so that a read of `/dev/zero` fails
/// (at about half of it, where a doubling buffer can grow no more) instead of taking the
/// machine's memory.
const IMPOSTOR_MEMORY_KIB: u64 = 1024 * 1024;

/// The peak resident set a probe may reach: a refused open needs under 10 MiB, one call on a
/// 20-event store about 30 MiB. Before the store's files were checked, sled reached 84-128 MiB
/// on a FIFO as `db`, and a read of `/dev/zero` stopped by [`IMPOSTOR_MEMORY_KIB`] 230-513 MiB.
/// (Sampled every 20 ms while the probe runs.)
const IMPOSTOR_PEAK_KIB: u64 = 64 * 1024;

/// What takes the place of a file or directory of the store.
#[derive(Clone, Copy, Debug)]
enum Impostor {
    /// A FIFO (named pipe) with no writer: opening or reading it blocks.
    Fifo,
    /// A symbolic link to `/dev/zero`: reads without end.
    LinkToZero,
    /// A symbolic link to `/dev/null`: reads as empty, takes every write.
    LinkToNull,
    /// The real file or directory moved out of the store, a symbolic link to it in its place.
    LinkElsewhere,
    /// A directory where the store keeps a file, a regular file where it keeps a directory.
    WrongKind,
    /// A unix socket.
    Socket,
    /// A character device node of `/dev/zero` (1, 5) made with mknod: needs root.
    ZeroDevice,
    /// A character device node of `/dev/null` (1, 3) made with mknod: needs root.
    NullDevice,
}

impl Impostor {
    const ALL: [Impostor; 8] = [
        Impostor::Fifo,
        Impostor::LinkToZero,
        Impostor::LinkToNull,
        Impostor::LinkElsewhere,
        Impostor::WrongKind,
        Impostor::Socket,
        Impostor::ZeroDevice,
        Impostor::NullDevice,
    ];

    fn name(self) -> &'static str {
        match self {
            Impostor::Fifo => "a FIFO",
            Impostor::LinkToZero => "a symlink to /dev/zero",
            Impostor::LinkToNull => "a symlink to /dev/null",
            Impostor::LinkElsewhere => "a symlink to the real one moved elsewhere",
            Impostor::WrongKind => "the wrong kind (directory for a file, file for a directory)",
            Impostor::Socket => "a unix socket",
            Impostor::ZeroDevice => "a device node of /dev/zero (mknod)",
            Impostor::NullDevice => "a device node of /dev/null (mknod)",
        }
    }

    fn needs_mknod(self) -> bool {
        matches!(self, Impostor::ZeroDevice | Impostor::NullDevice)
    }

    /// Words of which the refusal must use one, to say what the file is.
    fn words(self, was_dir: bool) -> &'static [&'static str] {
        match self {
            Impostor::Fifo => &["fifo", "pipe"],
            Impostor::LinkToZero | Impostor::LinkToNull | Impostor::LinkElsewhere => &["link"],
            Impostor::WrongKind if was_dir => &["regular file", "not a directory"],
            Impostor::WrongKind => &["directory"],
            Impostor::Socket => &["socket"],
            Impostor::ZeroDevice | Impostor::NullDevice => &["device"],
        }
    }
}

/// Where [`Impostor::LinkElsewhere`] moves the real `target` of the store copy `store`.
fn elsewhere(store: &Path, target: &str) -> PathBuf {
    let parent = store.parent().expect("a copy has a parent");
    parent.join(format!("outside-{}", target.replace('/', "-")))
}

fn make_node(path: &Path, file_type: rustix::fs::FileType, dev: rustix::fs::Dev) -> String {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        file_type,
        rustix::fs::Mode::from_raw_mode(0o644),
        dev,
    )
    .map(|()| String::new())
    .unwrap_or_else(|e| format!("mknod {}: {e}", path.display()))
}

/// Puts `impostor` in place of `target` (a path relative to the store; empty for the store
/// directory itself) in the store copy `store`. Returns what failed, empty if nothing did.
fn replace_with(store: &Path, target: &str, impostor: Impostor) -> String {
    let file = if target.is_empty() {
        store.to_path_buf()
    } else {
        store.join(target)
    };
    let was_dir = std::fs::symlink_metadata(&file)
        .expect("the target exists in the pristine store")
        .is_dir();
    if let Impostor::LinkElsewhere = impostor {
        let outside = elsewhere(store, target);
        std::fs::rename(&file, &outside).expect("move the real one out");
        std::os::unix::fs::symlink(&outside, &file).expect("link to it");
        return String::new();
    }
    if was_dir {
        std::fs::remove_dir_all(&file).expect("remove the directory");
    } else {
        std::fs::remove_file(&file).expect("remove the file");
    }
    let link = |to: &str| {
        std::os::unix::fs::symlink(to, &file).expect("make the link");
        String::new()
    };
    match impostor {
        Impostor::Fifo => make_node(&file, rustix::fs::FileType::Fifo, 0),
        Impostor::LinkToZero => link("/dev/zero"),
        Impostor::LinkToNull => link("/dev/null"),
        Impostor::LinkElsewhere => unreachable!("handled above"),
        Impostor::WrongKind if was_dir => {
            std::fs::write(&file, b"not a directory\n").expect("write the file");
            String::new()
        }
        Impostor::WrongKind => {
            std::fs::create_dir(&file).expect("make the directory");
            String::new()
        }
        Impostor::Socket => match std::os::unix::net::UnixListener::bind(&file) {
            Ok(listener) => {
                drop(listener);
                String::new()
            }
            Err(e) => format!("bind a unix socket at {}: {e}", file.display()),
        },
        Impostor::ZeroDevice => make_node(
            &file,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::makedev(1, 5),
        ),
        Impostor::NullDevice => make_node(
            &file,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::makedev(1, 3),
        ),
    }
}

/// Whether device nodes can be made here (root with CAP_MKNOD); `Err` says why not.
fn mknod_available(scratch: &Path) -> Result<(), String> {
    let probe = scratch.join("mknod-probe");
    let failed = make_node(
        &probe,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::makedev(1, 3),
    );
    let _ = std::fs::remove_file(&probe);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "cannot make a device node ({failed}); it needs root"
        ))
    }
}

/// One impostor case: `target` of a copy of `base` replaced by `impostor`. `mnemo verify`,
/// `mnemo ls` and `mnemo tool` (one create line) and the three library probes each run under an
/// address-space limit of [`IMPOSTOR_MEMORY_KIB`] and [`TIMEOUT`]: each must refuse (exit 2 with
/// one `mnemo: error:` line, or `Err`) naming the file and what it is — no hang, panic, signal,
/// or silent success — with a peak resident set under [`IMPOSTOR_PEAK_KIB`]; and a real file
/// moved out behind a link is left untouched.
fn impostor_case(work: &Path, base: &Path, target: &str, impostor: Impostor) -> Problems {
    let name = format!(
        "{} replaced by {}",
        if target.is_empty() {
            "the store directory"
        } else {
            target
        },
        impostor.name()
    );
    let mut problems = Problems::default();
    let setup_failure = std::sync::Mutex::new(String::new());
    let damage = |store: &Path| {
        let failed = replace_with(store, target, impostor);
        if !failed.is_empty() {
            *setup_failure.lock().expect("lock") = failed;
        }
    };
    let was_dir = base.join(target).is_dir();
    let case = Case {
        name: name.clone(),
        base: Some(base),
        damage: &damage,
        wrap: Wrap::MemoryLimit {
            kib: IMPOSTOR_MEMORY_KIB,
        },
        // Short: a unix socket's path must fit in 108 bytes.
        work: &work.join(format!("{}", impostor as u8)),
    };
    let seen = case.observe_with(
        &[("verify", ""), ("ls", ""), ("tool", CREATE_LINE)],
        &ONE_SMALL_CREATE,
    );
    let failed = setup_failure.lock().expect("lock").clone();
    if !failed.is_empty() {
        problems.push(format!("{name}: could not set the case up: {failed}"));
        return problems;
    }
    let named = |after: &Path| {
        if target.is_empty() {
            after.display().to_string()
        } else {
            after.join(target).display().to_string()
        }
    };
    let words = impostor.words(was_dir);
    let says_what = |msg: &str, problems: &mut Problems, what: &str| {
        if !mentions(msg, words) {
            problems.push(format!(
                "{what}: the refusal does not say what the file is (expected one of {words:?}): {msg:?}"
            ));
        }
    };
    for c in &seen.cli {
        let file = named(&c.after);
        let before = problems.0.len();
        problems.cli_refused(&c.ran, &[&file]);
        if problems.0.len() == before {
            says_what(&c.ran.stderr, &mut problems, &c.ran.what);
        }
    }
    for l in &seen.lib {
        let file = named(&l.after);
        let before = problems.0.len();
        problems.lib_refused(l, &[&file]);
        if let (true, Some(Err(e))) = (problems.0.len() == before, &l.result.outcome) {
            says_what(e, &mut problems, &l.ran.what);
        }
    }
    for r in seen.runs() {
        if r.peak_rss_kib > IMPOSTOR_PEAK_KIB {
            problems.push(format!(
                "{}: memory grew to {} KiB resident (bound {IMPOSTOR_PEAK_KIB} KiB)",
                r.what, r.peak_rss_kib
            ));
        }
    }
    if let Impostor::LinkElsewhere = impostor {
        let original = base.join(target);
        if original.is_file() {
            let want = std::fs::read(&original).expect("read the pristine file");
            for after in seen.after() {
                let outside = elsewhere(&after, target);
                if std::fs::read(&outside).ok().as_deref() != Some(&want[..]) {
                    problems.push(format!(
                        "{name}: {} (the real file, behind the link) was changed through the link",
                        outside.display()
                    ));
                }
            }
        }
    }
    problems
}

/// Runs every impostor on `target` of a copy of `base`, the cases in parallel; device nodes
/// only where mknod works (a skip that fails under `CI=true`).
fn impostor_cases(test: &str, p: &Pristine, base: &Path, target: &str, impostors: &[Impostor]) {
    let work = p.dir.path().join("imp");
    std::fs::create_dir_all(&work).expect("work directory");
    let mknod = mknod_available(&work);
    let mut problems = Problems::default();
    let runnable: Vec<Impostor> = impostors
        .iter()
        .copied()
        .filter(|i| !i.needs_mknod() || mknod.is_ok())
        .collect();
    let found: Vec<Problems> = std::thread::scope(|s| {
        let handles: Vec<_> = runnable
            .iter()
            .map(|&i| {
                let work = &work;
                s.spawn(move || impostor_case(work, base, target, i))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("impostor case"))
            .collect()
    });
    for f in found {
        problems.0.extend(f.0);
    }
    problems.assert_none(test);
    if let Err(why) = &mknod {
        if impostors.iter().any(|i| i.needs_mknod()) {
            skip(&format!("{test} (the device-node cases)"), why);
        }
    }
}

/// The newest snapshot file of a store.
fn snapshot_name(store: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(store)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap."))
        .collect();
    names.sort();
    names.pop().expect("the reopened store has a snapshot")
}

/// Before the store's files were checked: a FIFO, a device node or a link to `/dev/zero` or
/// `/dev/null` as `db` made sled panic (exit 101, "called `Result::unwrap()` on an `Err` value:
/// ... Invalid argument": its fsync of `db` as it gave up), or fail with "in use by another
/// process" (the lock is on the shared device); a link to the real `db` elsewhere was followed
/// and `tool` wrote through it; a socket or a directory was "storage error: IO error: No such
/// device or address" / "Is a directory", naming no file.
#[test]
fn a_db_file_that_is_not_a_regular_file_is_refused() {
    let p = pristine();
    impostor_cases(
        "db is not a regular file",
        &p,
        &p.reopened,
        "db",
        &Impostor::ALL,
    );
}

/// Before the store's files were checked: a FIFO as `conf` hung every probe; `/dev/zero` and
/// `/dev/null` (links or device nodes) read as no `conf` at all and every probe succeeded; a link
/// to the real `conf` elsewhere was followed; a socket or a directory was an I/O error naming no
/// file.
#[test]
fn a_conf_file_that_is_not_a_regular_file_is_refused() {
    let p = pristine();
    impostor_cases(
        "conf is not a regular file",
        &p,
        &p.reopened,
        "conf",
        &Impostor::ALL,
    );
}

/// Before the store's files were checked: a FIFO as the newest `snap.*` hung every probe;
/// `/dev/zero` (a link or a device node) was read until the memory limit stopped it ("IO error:
/// out of memory"); a link to the real snapshot elsewhere was followed; the rest were I/O errors
/// naming no file.
#[test]
fn a_snapshot_that_is_not_a_regular_file_is_refused() {
    let p = pristine();
    let snapshot = snapshot_name(&p.reopened);
    impostor_cases(
        "snapshot is not a regular file",
        &p,
        &p.reopened,
        &snapshot,
        &Impostor::ALL,
    );
}

/// Before the store's files were checked: a FIFO as `mnemo-head` hung `verify`, `tool` and every
/// library probe (`ls` never read it and exited 0); `/dev/zero` was read until the memory limit
/// stopped it; `/dev/null`, a device, a socket or a directory made `verify` report a violation
/// (exit 1); a link to the real record elsewhere was followed, and `tool` wrote the new head
/// through it.
#[test]
fn a_head_record_that_is_not_a_regular_file_is_refused() {
    let p = pristine();
    impostor_cases(
        "mnemo-head is not a regular file",
        &p,
        &p.reopened,
        mnemo::testing::HEAD_FILE,
        &Impostor::ALL,
    );
}

/// Before the store's files were checked: anything but a directory as `blobs` was "storage error:
/// IO error: Not a directory (os error 20)", naming no file; a link to the real directory
/// elsewhere was followed.
#[test]
fn a_blobs_directory_that_is_not_a_directory_is_refused() {
    let p = pristine();
    impostor_cases(
        "blobs is not a directory",
        &p,
        &p.reopened,
        "blobs",
        &Impostor::ALL,
    );
}

/// A copy of the reopened pristine store with a value large enough for sled to keep it in a
/// blob file; returns its path and the blob's path relative to it.
fn blobbed(p: &Pristine) -> (PathBuf, String) {
    let store = p.dir.path().join("blobbed.mnemo.db");
    copy_dir(&p.reopened, &store);
    {
        let server =
            MnemoMemoryToolServer::new(MnemoClient::open(&store, "builder").expect("open"));
        let out = server.handle(&json!({"command": "create", "path": "/memories/large.txt", "file_text": "L".repeat(300_000)}));
        assert!(out.get("is_error").is_none(), "large create: {out}");
    }
    let blob = std::fs::read_dir(store.join("blobs"))
        .expect("list blobs")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .min();
    let blob = match blob {
        Some(blob) => blob,
        None => {
            // The store keeps large contents in small pieces now: make sled write a blob anyway.
            let s = open_store(&store);
            let (_, meta, _) = s.raw_trees();
            meta.insert("hostile-storage-blob", vec![b'B'; 300_000])
                .expect("large meta value");
            meta.flush().expect("flush");
            drop(s);
            std::fs::read_dir(store.join("blobs"))
                .expect("list blobs")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .min()
                .expect("a 300 KB value is a sled blob")
        }
    };
    (store, format!("blobs/{blob}"))
}

/// Before the store's files were checked: a FIFO as a blob hung every probe that read the value
/// (`verify` replays every event); `/dev/zero` was read until the memory limit stopped it; `ls`
/// never read it and exited 0 in every case; a link to the real blob elsewhere was followed.
#[test]
fn a_blob_that_is_not_a_regular_file_is_refused() {
    let p = pristine();
    let (store, blob) = blobbed(&p);
    impostor_cases(
        "a blob is not a regular file",
        &p,
        &store,
        &blob,
        &Impostor::ALL,
    );
}

/// Before the store's files were checked: a link to the real store was followed; a FIFO, a
/// device, a socket or a link to a device at `--db` made `verify` and `ls` say "no store at PATH"
/// and `tool` "IO error: Not a directory", neither saying what is there. (A regular file there is
/// its own test above.)
#[test]
fn a_store_directory_that_is_a_link_or_a_special_file_is_refused() {
    let p = pristine();
    impostor_cases(
        "the store directory is not a directory",
        &p,
        &p.reopened,
        "",
        &[
            Impostor::Fifo,
            Impostor::LinkToZero,
            Impostor::LinkToNull,
            Impostor::LinkElsewhere,
            Impostor::Socket,
            Impostor::ZeroDevice,
            Impostor::NullDevice,
        ],
    );
}

/// Before the store's files were checked: a blob or a snapshot whose name is not UTF-8 made sled
/// panic as it opened the store ("called `Option::unwrap()` on a `None` value", in its blob
/// collector or as it replaced its snapshots; exit 101) in every probe.
#[test]
fn a_store_file_whose_name_is_not_utf8_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let p = pristine();
    let snapshot = snapshot_name(&p.reopened);
    let mut problems = Problems::default();
    for (test, dir, name) in [
        (
            "a blob named with bytes that are not UTF-8",
            "blobs",
            &b"1\xff"[..],
        ),
        (
            "a snapshot named with bytes that are not UTF-8",
            "",
            &b"snap.\xff"[..],
        ),
    ] {
        let snapshot = snapshot.clone();
        let damage = move |store: &Path| {
            let odd = store.join(dir).join(std::ffi::OsStr::from_bytes(name));
            std::fs::copy(store.join(&snapshot), odd).expect("write the file");
        };
        let work = p.dir.path().join(format!("utf8-{}", dir.len()));
        let case = Case {
            name: test.into(),
            base: Some(&p.reopened),
            damage: &damage,
            wrap: Wrap::Plain,
            work: &work,
        };
        expect_refused(&case, &["not UTF-8"], &mut problems);
    }
    problems.assert_none("store file names that are not UTF-8");
}

// ---------------------------------------------------------------------------------------------
// Store files whose size would make every open cost more than they hold.
// ---------------------------------------------------------------------------------------------

/// Grows the file `name` of a store to `len` bytes with a hole after its data.
fn grow_sparse(name: &'static str, len: u64) -> impl Fn(&Path) {
    move |store: &Path| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(store.join(name))
            .expect("open the store file");
        file.set_len(len).expect("make it sparse");
    }
}

/// Before: a `db` grown to 100 GiB of holes made every command read them (about 2.6 s per GiB);
/// a `conf` grown to 50 GB failed with "IO error: out of memory". Now both are refused before
/// sled opens them, naming the file, and the store itself is left as it was.
#[test]
fn sparse_or_oversized_store_files_are_refused_without_being_read() {
    const TEST: &str = "db or conf grown sparse";
    let p = pristine();
    let mut problems = Problems::default();
    for (file, len, hints) in [
        ("db", 100u64 << 30, ["sparse", "db"]),
        ("conf", 50u64 << 30, ["conf", "bytes"]),
    ] {
        let work = p.dir.path().join(format!("work-{file}"));
        let damage = grow_sparse(file, len);
        let case = Case {
            name: format!("{TEST}: {file} at {len} bytes"),
            base: Some(&p.reopened),
            damage: &damage,
            wrap: Wrap::Plain,
            work: &work,
        };
        for copy in expect_refused(&case, &hints, &mut problems) {
            // Nothing was written: the file is as long as the damage made it.
            let now = std::fs::metadata(copy.join(file)).expect("metadata").len();
            if now != len {
                problems.push(format!(
                    "{}: {file} is {now} bytes after the refusal",
                    copy.display()
                ));
            }
        }
    }
    problems.assert_none(TEST);
}

/// Before: a `db` shifted by a megabyte made sled panic inside the open, and the panic's message
/// (with a backtrace under RUST_BACKTRACE) reached stderr ahead of the clean error. Now only the
/// error is printed.
#[test]
fn a_db_shifted_by_a_megabyte_is_refused_without_a_panic_message() {
    const TEST: &str = "db shifted by 1 MiB";
    let p = pristine();
    let work = p.dir.path().join("work");
    let damage = |store: &Path| {
        let db = store.join("db");
        let mut bytes = vec![0u8; 1 << 20];
        bytes.extend(std::fs::read(&db).expect("read db"));
        std::fs::write(&db, bytes).expect("write db");
    };
    let case = Case {
        name: TEST.into(),
        base: Some(&p.reopened),
        damage: &damage,
        wrap: Wrap::Plain,
        work: &work,
    };
    let mut problems = Problems::default();
    expect_refused(&case, &["corrupt", "damaged"], &mut problems);
    problems.assert_none(TEST);
}
