//! kill -9: a child `mnemo tool` gets a stream of commands (some large enough that their payload
//! goes to the store's value file); the parent records every acknowledged result, kills the child
//! at a random moment, reopens the store, runs `verify`, and checks what the durability mode
//! promises for a killed process:
//!
//! - `fsync` and `flush`: every acknowledged command's effect is there, and the one call in flight
//!   is either wholly applied or not at all.
//! - `buffered`: the store holds the effects of a prefix of the acknowledged commands, in order
//!   (perhaps plus the call in flight when nothing was lost), and verifies intact; the commands
//!   after that prefix are lost. The test reports how many were.
//!
//! `MNEMO_CRASH_CYCLES` sets the cycles per scenario in the `fsync` mode (default 100); the other
//! modes run a third of that.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::{Value, json};

use crate::support::{Rng, TempStore, mnemo_bin, open_client, open_store};

fn cycles() -> usize {
    std::env::var("MNEMO_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// The cycles a scenario runs in `mode`: the default mode gets the most.
fn cycles_in(mode: Durability) -> usize {
    match mode {
        Durability::Fsync => cycles(),
        _ => cycles().div_ceil(3),
    }
}

type Tree = BTreeMap<String, String>;

/// What a call does to the tree when it is applied.
type Effect = Box<dyn Fn(&mut Tree)>;

/// The files in the store, read after the child is gone (reopening runs recovery).
fn tree(path: &Path) -> (Tree, u64) {
    // As the kill left it, before a writer completes the head and catches the index up: an
    // auditor's verify finds nothing wrong.
    {
        let store = mnemo::testing::Store::open(path).expect("the store opens after a kill");
        let report = mnemo::testing::verify_store(&store).expect("verify runs");
        assert!(
            report.is_intact(),
            "verify of the store a kill left: {report:?}"
        );
    }
    let client = open_client(path, "checker", Durability::Buffered);
    let report = client.verify().expect("verify runs");
    assert!(report.is_intact(), "verify after a kill: {report:?}");
    let files = client
        .records_by_tag("memorytool")
        .expect("records")
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect();
    (files, report.events)
}

/// A child `mnemo tool` on `path` in durability `mode`.
fn spawn(path: &Path, mode: Durability) -> Child {
    Command::new(mnemo_bin())
        .args(["tool", "--db", path.to_str().expect("utf-8 path")])
        .args(["--durability", mode.name()])
        .env_remove("MNEMO_DB")
        // The store is this child's (no server is started): kill -9 hits the writer.
        .env("MNEMO_NO_START", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mnemo tool")
}

/// Sends SIGKILL (like kill -9: no destructor, no flush, no goodbye) to `pid` after `delay`. The
/// child never exits on its own while its stdin is open, so a failed kill fails the test: the
/// cycle would not have tested a crash.
fn kill_after(pid: u32, delay: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let status = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -9 {pid} failed: {status}");
    })
}

/// Reaps a child [`kill_after`] killed and asserts SIGKILL is what ended it: a child that exited
/// on its own (a panic, an error exit) or died of another signal tested no crash.
fn reap_killed(child: &mut Child, what: &str) {
    let status = child.wait().expect("wait for the killed child");
    assert_eq!(
        status.signal(),
        Some(9),
        "{what}: the child was to die by SIGKILL, but it ended with {status}"
    );
}

/// When to kill the child: once `acks` calls were acknowledged, `delay` later — so the kill lands
/// at a random moment of a later call, whatever the machine's load.
struct Kill {
    acks: usize,
    delay: Duration,
}

impl Kill {
    fn random(rng: &mut Rng, max_acks: u64) -> Kill {
        Kill {
            acks: usize::try_from(rng.below_u64(max_acks)).expect("small"),
            delay: Duration::from_micros(rng.below_u64(3000)),
        }
    }
}

/// What one child's run left to check.
struct Run {
    /// The effect of the call in flight when the child died, if any.
    in_flight: Option<Effect>,
    /// The acknowledged calls' effects, in order (already applied to `acked`).
    acks: Vec<Effect>,
}

/// Feeds `next(step)` to a child one call at a time until it dies; applies the effects of the
/// acknowledged calls to `acked` and returns them with the call in flight when it died, if any.
fn drive(
    path: &Path,
    mode: Durability,
    kill: &Kill,
    acked: &mut Tree,
    mut next: impl FnMut(usize, &Tree) -> (Value, Effect),
) -> Run {
    let mut child = spawn(path, mode);
    let pid = child.id();
    let mut killer = (kill.acks == 0).then(|| kill_after(pid, kill.delay));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut in_flight = None;
    let mut acks = Vec::new();
    for step in 0.. {
        let (input, effect) = next(step, acked);
        if writeln!(stdin, "{input}")
            .and_then(|()| stdin.flush())
            .is_err()
        {
            in_flight = Some(effect);
            break;
        }
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            // A line cut short by the kill is no acknowledgement.
            Ok(n) if n > 0 && line.ends_with('\n') => {
                let result: Value = serde_json::from_str(&line).expect("a tool_result line");
                assert!(
                    result.get("is_error").is_none(),
                    "{input} was refused: {result}"
                );
                effect(acked);
                acks.push(effect);
                if step + 1 == kill.acks {
                    killer = Some(kill_after(pid, kill.delay));
                }
            }
            _ => {
                in_flight = Some(effect);
                break;
            }
        }
    }
    if let Some(killer) = killer {
        killer.join().expect("killer");
    }
    reap_killed(
        &mut child,
        &format!("{} after {} acknowledged calls", mode.name(), acks.len()),
    );
    Run { in_flight, acks }
}

/// After a kill: what `mode` promises holds. `before` is the state the run started from; `acked`
/// is that state with every acknowledged effect applied, and becomes what the store holds.
/// Returns how many acknowledged calls the kill lost (always 0 unless `buffered`).
fn check(
    path: &Path,
    mode: Durability,
    before: &Tree,
    acked: &mut Tree,
    run: Run,
    what: &str,
) -> usize {
    let (found, _) = tree(path);
    let with_flight = |state: &Tree| {
        let mut state = state.clone();
        if let Some(effect) = &run.in_flight {
            effect(&mut state);
        }
        state
    };
    if &found == acked || found == with_flight(acked) {
        *acked = found;
        return 0;
    }
    assert_eq!(
        mode,
        Durability::Buffered,
        "{what}: the store holds neither the acknowledged state nor that plus the call in flight\n\
         acknowledged: {} files, found: {} files",
        acked.len(),
        found.len()
    );
    // Buffered: some prefix of the acknowledged calls, in order; the longest that matches (a
    // read's effect changes nothing, so several prefixes can).
    let mut state = before.clone();
    let mut kept = (found == state).then_some(0);
    for (n, effect) in run.acks.iter().enumerate() {
        effect(&mut state);
        if found == state {
            kept = Some(n + 1);
        }
    }
    let Some(kept) = kept else {
        panic!(
            "{what}: the store holds no prefix of the acknowledged calls ({} acknowledged, {} \
             files found, {} expected after all of them)",
            run.acks.len(),
            found.len(),
            acked.len()
        );
    };
    *acked = found;
    run.acks.len() - kept
}

/// Every mode, most durable first.
const MODES: [Durability; 3] = [Durability::Fsync, Durability::Flush, Durability::Buffered];

/// Creates and inserts, killed at a random moment; returns the acknowledged calls lost.
fn small_edits(mode: Durability) -> usize {
    let s = TempStore::new();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut acked = Tree::new();
    let mut counter = 0u64;
    let mut lost = 0;
    for cycle in 0..cycles_in(mode) {
        let kill = Kill::random(&mut rng, 12);
        let before = acked.clone();
        let run = drive(&s.path(), mode, &kill, &mut acked, |_, acked| {
            counter += 1;
            let n = counter;
            // Edit an existing file every other call, else create a new one.
            if n % 2 == 0 {
                if let Some((path, content)) = acked.iter().next_back() {
                    let (path, content) = (path.clone(), content.clone());
                    let input = json!({"command": "insert", "path": path, "insert_line": 0,
                                       "insert_text": format!("edit {n}\n")});
                    return (
                        input,
                        Box::new(move |t: &mut Tree| {
                            t.insert(path.clone(), format!("edit {n}\n{content}"));
                        }),
                    );
                }
            }
            let path = format!("/memories/c{}/f{n}.txt", n % 7);
            // Every fifth create is large enough that its payload goes to the value file.
            let mut text = format!("v{n}\n");
            if n % 5 == 1 {
                text.push_str(&"pad\n".repeat(mnemo::testing::VALUE_MIN / 4 + 1));
            }
            let input = json!({"command": "create", "path": path, "file_text": text});
            (
                input,
                Box::new(move |t: &mut Tree| {
                    t.insert(path.clone(), text.clone());
                }),
            )
        });
        lost += check(
            &s.path(),
            mode,
            &before,
            &mut acked,
            run,
            &format!("{} cycle {cycle}", mode.name()),
        );
    }
    // The loop must have tested something: on average several acknowledged calls per cycle.
    assert!(
        counter >= 2 * cycles_in(mode) as u64,
        "only {counter} calls sent over {} cycles",
        cycles_in(mode)
    );
    eprintln!(
        "small edits, {}: {} cycles, {counter} calls sent, {} files, {lost} acknowledged calls lost",
        mode.name(),
        cycles_in(mode),
        acked.len()
    );
    lost
}

#[test]
fn small_edits_survive_kill_9() {
    assert_eq!(small_edits(Durability::Fsync), 0);
}

#[test]
fn small_edits_survive_kill_9_in_flush_mode() {
    assert_eq!(small_edits(Durability::Flush), 0);
}

/// `buffered` promises nothing for the last moments before a kill, but what survives is a prefix of
/// what was acknowledged, and the store verifies intact (`check` and `tree` assert both).
#[test]
fn buffered_mode_keeps_a_prefix_of_acknowledged_calls_across_kill_9() {
    small_edits(Durability::Buffered);
}

/// The seq of the last event in the log and the last the stored index has applied (the replay
/// on open catches up the rest).
fn log_and_index(path: &Path) -> (u64, u64) {
    let store = open_store(path);
    let end = store.log_end().expect("the log's end");
    (end.seq.0, store.index().applied().expect("applied seq").0)
}

/// The writer hands its index changes to a background thread once it has been idle for
/// `INDEX_IDLE`, and the next commit's flush takes that batch to disk with its own events. Each
/// cycle makes a burst of creates, goes idle past `INDEX_IDLE`, makes one more create, and is
/// killed at a random moment around the batch and that commit.
#[test]
fn index_batches_written_in_the_background_survive_kill_9() {
    let s = TempStore::new();
    let mut rng = Rng(0x6A09_E667_F3BC_C908);
    let mut acked = Tree::new();
    let (mut written, mut lagging) = (0, 0);
    let idle = mnemo::testing::INDEX_IDLE;
    let idle_us = u64::try_from(idle.as_micros()).expect("small");
    for cycle in 0..cycles().div_ceil(2) {
        let burst = 20 + rng.below_u64(40);
        let (before, _) = log_and_index(&s.path());
        let kill = Kill {
            acks: usize::try_from(burst).expect("small"),
            delay: Duration::from_micros(idle_us + rng.below_u64(2 * idle_us)),
        };
        let start = acked.clone();
        let run = drive(
            &s.path(),
            Durability::Fsync,
            &kill,
            &mut acked,
            |step, _| {
                if step as u64 == burst {
                    // Idle past INDEX_IDLE, so the background thread writes the batch.
                    std::thread::sleep(idle * 3 / 2);
                }
                let path = format!("/memories/bg/c{cycle}/f{step}.txt");
                let input =
                    json!({"command": "create", "path": path, "file_text": format!("{step}")});
                (
                    input,
                    Box::new(move |t: &mut Tree| {
                        t.insert(path.clone(), format!("{step}"));
                    }),
                )
            },
        );
        // The batch reached the disk if the stored index has the burst's last event.
        if log_and_index(&s.path()).1 >= before + burst {
            written += 1;
        } else {
            lagging += 1;
        }
        let what = format!("cycle {cycle}");
        check(&s.path(), Durability::Fsync, &start, &mut acked, run, &what);
    }
    assert!(
        acked.len() >= 20 * cycles().div_ceil(2),
        "every burst was acknowledged: {} files",
        acked.len()
    );
    eprintln!(
        "background index batches: {} kills, {written} found the batch written, {lagging} found the index behind",
        written + lagging
    );
}

fn fill(path: &Path, dir: &str, files: usize) -> Tree {
    // Built buffered, outside the crash: closing the client flushes it before any child runs.
    let client = open_client(path, "setup", Durability::Buffered);
    let server = MnemoMemoryToolServer::new(client);
    let mut tree = Tree::new();
    for i in 0..files {
        let p = format!("{dir}/d{}/f{i}.txt", i % 10);
        let out =
            server.handle(&json!({"command": "create", "path": p, "file_text": format!("{i}")}));
        assert!(out.get("is_error").is_none(), "{out}");
        tree.insert(p, format!("{i}"));
    }
    tree
}

/// `tree` with every path under `from` moved under `to`.
fn moved(tree: &Tree, from: &str, to: &str) -> Tree {
    tree.iter()
        .map(|(p, c)| match p.strip_prefix(from) {
            Some(rest) if rest.starts_with('/') => (format!("{to}{rest}"), c.clone()),
            _ => (p.clone(), c.clone()),
        })
        .collect()
}

#[test]
fn large_directory_renames_survive_kill_9() {
    for mode in MODES {
        let s = TempStore::new();
        let mut acked = fill(&s.path(), "/memories/big", 1000);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut lost = 0;
        for cycle in 0..cycles_in(mode) {
            let kill = Kill::random(&mut rng, 6);
            let before = acked.clone();
            let run = drive(&s.path(), mode, &kill, &mut acked, |_, acked| {
                let (from, to) = if acked.keys().any(|p| p.starts_with("/memories/big/")) {
                    ("/memories/big", "/memories/big2")
                } else {
                    ("/memories/big2", "/memories/big")
                };
                let input = json!({"command": "rename", "old_path": from, "new_path": to});
                (input, Box::new(move |t: &mut Tree| *t = moved(t, from, to)))
            });
            let what = format!("{} cycle {cycle}", mode.name());
            lost += check(&s.path(), mode, &before, &mut acked, run, &what);
            assert_eq!(acked.len(), 1000);
        }
        eprintln!(
            "directory renames, {}: {lost} acknowledged calls lost",
            mode.name()
        );
    }
}

#[test]
fn large_directory_deletes_survive_kill_9() {
    for mode in MODES {
        let mut s = TempStore::new();
        let mut acked = Tree::new();
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let mut lost = 0;
        for cycle in 0..cycles_in(mode) {
            // A fresh store every ten cycles keeps each verify's replay short.
            if cycle % 10 == 9 {
                s = TempStore::new();
                acked.clear();
            }
            // A directory of 100 files is built (outside the crash) and then deleted by a child
            // that is killed at a random moment, often in the middle of the delete.
            let dir = format!("/memories/victim{cycle}");
            acked.extend(fill(&s.path(), &dir, 100));
            // Killed before the delete is answered (0 acks) or after it (1 or 2 acks).
            let kill = Kill::random(&mut rng, 3);
            let mut sent = false;
            let before = acked.clone();
            let run = drive(&s.path(), mode, &kill, &mut acked, |_, _| {
                let dir = dir.clone();
                let input = if sent {
                    // After the delete, keep the child busy with harmless reads until it dies.
                    json!({"command": "view", "path": "/memories"})
                } else {
                    json!({"command": "delete", "path": dir})
                };
                let effect: Effect = if sent {
                    Box::new(|_: &mut Tree| {})
                } else {
                    Box::new(move |t: &mut Tree| {
                        t.retain(|p, _| !p.starts_with(&format!("{dir}/")));
                    })
                };
                sent = true;
                (input, effect)
            });
            let what = format!("{} cycle {cycle}", mode.name());
            lost += check(&s.path(), mode, &before, &mut acked, run, &what);
        }
        eprintln!(
            "directory deletes, {}: {lost} acknowledged calls lost",
            mode.name()
        );
    }
}

#[test]
fn a_store_left_by_kill_9_reopens_with_the_lock_released() {
    let s = TempStore::new();
    let mut child = spawn(&s.path(), Durability::Fsync);
    let stdin = child.stdin.as_mut().expect("stdin");
    writeln!(stdin, "{}", json!({"command": "view", "path": "/memories"})).expect("write");
    kill_after(child.id(), Duration::from_millis(200))
        .join()
        .expect("killer");
    reap_killed(&mut child, "mnemo tool with a view in flight");
    let (files, events) = tree(&s.path());
    assert!(files.is_empty());
    assert!(events <= 1);
}

/// The names in `dir` that a creator killed midway leaves: its `.NAME.creating-*` directories.
fn creators_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list the parent")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".creating-"))
        .collect()
}

/// Creating a store is atomic: a `mnemo tool` killed at any moment while it creates a new store
/// leaves either no store (nothing, or nothing but a creator's own `.NAME.creating-*` directory
/// beside it) or a whole one that opens and verifies, never sled's files without the format
/// marker, which the next open would have to refuse as damaged.
#[test]
fn a_kill_9_while_a_store_is_created_leaves_no_store_or_a_whole_one() {
    let mut rng = Rng(0x5eed_c4ea_7e00_0001);
    // The kills must land all over creation, however long it takes on this machine under its
    // current load: from spawn to the first answer of an uninterrupted run, and a half again.
    let window = {
        let dir = tempfile::tempdir().expect("temp dir");
        let started = std::time::Instant::now();
        let mut child = spawn(&dir.path().join("store"), Durability::Fsync);
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{}", json!({"command": "view", "path": "/memories"})).expect("write");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the first answer");
        let took = started.elapsed();
        drop(stdin);
        let status = child.wait().expect("wait");
        assert!(
            status.success(),
            "the uninterrupted run ended with {status}"
        );
        took * 3 / 2
    };
    let window_us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX).max(1);
    let (mut absent, mut whole, mut left_behind) = (0, 0, 0);
    for cycle in 0..50 {
        let dir = tempfile::tempdir().expect("temp dir");
        let name = "store";
        let path = dir.path().join(name);
        let mut child = spawn(&path, Durability::Fsync);
        let killer = kill_after(child.id(), Duration::from_micros(rng.below_u64(window_us)));
        if let Some(stdin) = child.stdin.as_mut() {
            // The child may be dead already: a broken pipe is expected then.
            let _ = writeln!(stdin, "{}", json!({"command": "view", "path": "/memories"}));
        }
        killer.join().expect("killer");
        reap_killed(
            &mut child,
            &format!("cycle {cycle}: mnemo tool creating a store"),
        );
        let there = std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_some());
        if there {
            whole += 1;
        } else {
            absent += 1;
        }
        let store = mnemo::testing::Store::open(&path).unwrap_or_else(|e| {
            panic!("cycle {cycle}: the store a kill left while creating it does not open: {e}")
        });
        let report = mnemo::testing::verify_store(&store).expect("verify runs");
        assert!(report.is_intact(), "cycle {cycle}: {report:?}");
        assert!(report.events <= 1, "cycle {cycle}: {report:?}");
        drop(store);
        for left in creators_left(dir.path()) {
            left_behind += 1;
            assert!(
                left.starts_with(&format!(".{name}.creating-")),
                "cycle {cycle}: {left} is not the directory of the creator of {name}"
            );
        }
    }
    eprintln!(
        "store creation killed 50 times within {window:?} of spawn: {absent} left no store, {whole} a whole one, {left_behind} a creator's directory"
    );
}

/// Two processes creating the same new store at once end up in one store: one creates it, the
/// other opens that one (waiting for its lock, or refused as locked if it waited too long), and
/// every acknowledged create is in it; the creator that lost the race leaves nothing behind.
#[test]
fn two_processes_creating_one_store_at_once_share_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    for cycle in 0..8 {
        let path = dir.path().join(format!("store-{cycle}"));
        let mut children: Vec<Child> = (0..2).map(|_| spawn(&path, Durability::Fsync)).collect();
        let mut acked = Tree::new();
        for (i, child) in children.iter_mut().enumerate() {
            let file = format!("/memories/{i}.txt");
            let input =
                json!({"command": "create", "path": file, "file_text": format!("from {i}\n")});
            let mut stdin = child.stdin.take().expect("stdin");
            // A child refused as locked has exited: a broken pipe is expected then.
            let _ = writeln!(stdin, "{input}");
            drop(stdin);
            let mut line = String::new();
            let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
            let _ = stdout.read_line(&mut line);
            if line.ends_with('\n') {
                let result: Value = serde_json::from_str(&line).expect("a tool_result line");
                assert!(result.get("is_error").is_none(), "{input}: {result}");
                acked.insert(file, format!("from {i}\n"));
            }
        }
        // Each exits once its input ends: 0, or 2 when it was refused as locked; never a signal
        // or a panic.
        for child in &mut children {
            let status = child.wait().expect("wait");
            assert!(
                matches!(status.code(), Some(0 | 2)),
                "cycle {cycle}: a creator ended with {status}"
            );
        }
        assert!(
            !acked.is_empty(),
            "cycle {cycle}: neither creator got the store"
        );
        let (files, _) = tree(&path);
        assert_eq!(files, acked, "cycle {cycle}");
        assert_eq!(
            creators_left(dir.path()),
            Vec::<String>::new(),
            "cycle {cycle}"
        );
    }
}
