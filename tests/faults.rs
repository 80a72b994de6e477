//! Fault injection on the write path: a failed commit or fsync is an error result
//! for the calls it hit, poisons the store so no later write can fork the chain, and a reopen
//! recovers to the last event that reached the log, with `verify` clean.

use std::collections::BTreeMap;

use mnemo::testing::failpoint::Failpoint;
use mnemo::tool::Command;
use mnemo::{Body, Durability, MnemoMemoryToolServer, ToolCall};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{TempStore, open_client};

fn open(s: &TempStore) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::new(open_client(&s.path(), "faulty", Durability::Fsync))
}

fn create(id: &str, path: &str, text: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "memory",
           "input": {"command": "create", "path": path, "file_text": text}})
}

/// The body the server logs for a create under its root.
fn create_body(server: &MnemoMemoryToolServer, path: &str, text: &str) -> Body {
    Body::Tool(ToolCall {
        root: server.root().to_string(),
        profile: server.profile(),
        limits: server.limits(),
        command: Command::Create {
            path: path.into(),
            file_text: text.into(),
        },
    })
}

fn content(server: &MnemoMemoryToolServer, path: &str) -> Option<String> {
    server
        .client()
        .record(path)
        .expect("read")
        .map(|r| r.content)
}

#[test]
fn each_failpoint_fails_the_call_poisons_the_store_and_recovers_on_reopen() {
    for (point, lands_in_log) in [(Failpoint::Append, false), (Failpoint::Sync, true)] {
        let s = TempStore::new();
        {
            let server = open(&s);
            let ok = server.handle(&create("toolu_a", "/memories/a", "a"));
            assert!(ok.get("is_error").is_none(), "{ok}");
            server
                .client()
                .store()
                .expect("a store open here")
                .failpoints()
                .arm(point);
            let hit = server.handle(&create("toolu_b", "/memories/b", "b"));
            assert_eq!(hit["is_error"], true, "{point:?}: {hit}");
            assert!(
                hit["content"]
                    .as_str()
                    .expect("text")
                    .contains("may or may not have been applied"),
                "{hit}"
            );
            // Poisoned: every later call is refused, reads included, until a reopen.
            let after = server.handle(&json!({"command": "view", "path": "/memories"}));
            assert_eq!(after["is_error"], true);
            // A bare input has no tool_use id, and no event is known to name it.
            assert_eq!(after["tool_use_id"], "mnemo-unconfirmed", "{after}");
            assert!(
                after["content"]
                    .as_str()
                    .expect("text")
                    .contains("poisoned"),
                "{after}"
            );
        }
        let server = open(&s);
        let report = server.client().verify().expect("verify");
        assert!(report.is_intact(), "{point:?}: {report:?}");
        assert_eq!(content(&server, "/memories/a").as_deref(), Some("a"));
        let expected_b = lands_in_log.then(|| "b".to_string());
        assert_eq!(content(&server, "/memories/b"), expected_b, "{point:?}");
        // A retry of the failed call is safe: it runs if the call never reached the log, and is
        // answered from the record if it did (running nothing); either way it is logged.
        let before = server.client().head().expect("head").seq;
        let retry = server
            .client()
            .call(
                Some("toolu_b".into()),
                create_body(&server, "/memories/b", "b"),
            )
            .expect("call");
        assert_eq!(
            retry.text, "File created successfully at: /memories/b",
            "{point:?}"
        );
        assert_eq!(retry.retried, lands_in_log, "{point:?}");
        let after = server.client().head().expect("head").seq;
        assert_eq!(after.0 - before.0, 1, "{point:?}");
        let report = server.client().verify().expect("verify");
        assert!(report.is_intact(), "{point:?}: {report:?}");
    }
}

/// A storage failure while a call is answered (an index read, here injected) poisons the store,
/// but the calls answered before it — a traversal attempt and a listing, whose events wait for
/// the next write — are still appended first, so the log holds every answer a model was given.
#[test]
fn calls_answered_before_a_storage_failure_are_still_logged() {
    let s = TempStore::new();
    {
        let server = open(&s);
        let a = server.handle(&create("toolu_a", "/memories/a", "a"));
        assert!(a.get("is_error").is_none(), "{a}");
        let traversal =
            server.handle(&json!({"command": "view", "path": "/memories/../etc/passwd"}));
        assert_eq!(traversal["is_error"], true, "{traversal}");
        assert_eq!(traversal["tool_use_id"], "mnemo-2");
        let listing = server.handle(&json!({"command": "view", "path": "/memories"}));
        assert_eq!(listing["tool_use_id"], "mnemo-3", "{listing}");
        server
            .client()
            .store()
            .expect("a store open here")
            .failpoints()
            .arm(Failpoint::Answer);
        let hit = server.handle(&create("toolu_c", "/memories/c", "c"));
        assert_eq!(hit["is_error"], true, "{hit}");
        let why = hit["content"].as_str().expect("text");
        assert!(why.contains("may or may not have been applied"), "{why}");
        assert!(!why.contains("corrupt"), "{why}");
        let after = server.handle(&json!({"command": "view", "path": "/memories"}));
        assert!(
            after["content"]
                .as_str()
                .expect("text")
                .contains("poisoned"),
            "{after}"
        );
    }
    let server = open(&s);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.events, 3,
        "the create, the traversal attempt and the listing"
    );
    let second = server
        .client()
        .events(mnemo::Seq(2))
        .expect("events")
        .next()
        .expect("event 2")
        .expect("decodes");
    assert!(
        format!("{:?}", second.body).contains("/memories/../etc/passwd"),
        "{second:?}"
    );
    assert_eq!(content(&server, "/memories/a").as_deref(), Some("a"));
    assert_eq!(content(&server, "/memories/c"), None);
}

/// The index is written in batches after the log: a failed index write poisons the writer like
/// any storage error and loses nothing, since the events are in the log and reopening replays
/// them into the index.
#[test]
fn a_failed_index_write_poisons_and_the_index_catches_up_on_reopen() {
    let s = TempStore::new();
    {
        let server = open(&s);
        let a = server.handle(&create("toolu_a", "/memories/a", "a"));
        assert!(a.get("is_error").is_none(), "{a}");
        // `a`'s index batch is written before the failpoint is armed, so the write that fails is
        // `b`'s, however late the background thread runs on a loaded machine.
        server.client().flush_index().expect("write a's index");
        server
            .client()
            .store()
            .expect("a store open here")
            .failpoints()
            .arm(Failpoint::Index);
        let b = server.handle(&create("toolu_b", "/memories/b", "b"));
        // The log takes `b`; its index batch then fails on the background thread, which may
        // poison the writer before `b`'s own wait for durability returns on a loaded machine:
        // then `b` is told it may or may not have been applied (it was: see below), never that
        // it failed.
        assert!(
            b.get("is_error").is_none()
                || b["content"]
                    .as_str()
                    .is_some_and(|t| t.contains("poisoned") && t.contains("may or may not")),
            "the log took it: {b}"
        );
        // A listing writes the index first: that write fails (or the idle thread's did).
        let listed = server.client().records_by_tag("memorytool");
        assert!(listed.is_err(), "{listed:?}");
        let after = server.handle(&json!({"command": "view", "path": "/memories"}));
        assert_eq!(after["is_error"], true, "poisoned: {after}");
    }
    let server = open(&s);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(content(&server, "/memories/a").as_deref(), Some("a"));
    assert_eq!(content(&server, "/memories/b").as_deref(), Some("b"));
}

/// No answer shows a write that a crash could still undo: a view racing a create whose fsync
/// fails either misses the file or gets an error, never the content that was not made durable.
#[test]
fn a_read_never_shows_a_write_whose_sync_failed() {
    const SECRET: &str = "this text never became durable";
    for trial in 0..24 {
        let s = TempStore::new();
        let server = open(&s);
        let reader =
            MnemoMemoryToolServer::new(server.client().with_agent("reader").expect("agent"));
        server
            .client()
            .store()
            .expect("a store open here")
            .failpoints()
            .arm(Failpoint::Sync);
        let view = json!({"command": "view", "path": "/memories/racy.md"});
        let (written, seen) = std::thread::scope(|scope| {
            let writer =
                scope.spawn(|| server.handle(&create("toolu_w", "/memories/racy.md", SECRET)));
            // Vary the reader's start so some trials view before the create is queued and some
            // while its sync is running.
            std::thread::sleep(std::time::Duration::from_micros(trial * 25));
            let seen = reader.handle(&view);
            (writer.join().expect("writer thread"), seen)
        });
        assert_eq!(written["is_error"], true, "the sync failed: {written}");
        let text = seen["content"].as_str().expect("text");
        assert!(
            !text.contains(SECRET),
            "trial {trial}: a read showed a write whose sync failed: {seen}"
        );
        assert_eq!(seen["is_error"], true, "trial {trial}: {seen}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create(u8, u8),
    Fault(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6, any::<u8>()).prop_map(|(f, c)| Op::Create(f, c)),
        2 => (0u8..2).prop_map(Op::Fault),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MNEMO_FAULT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    /// Commands, injected faults and reopens against a model: acknowledged creates are always
    /// there, a call hit by a fault is there exactly when its events reached the log, a poisoned
    /// store refuses everything until reopened, and the store always verifies.
    #[test]
    fn faults_and_reopens_against_a_model(ops in proptest::collection::vec(op(), 1..30)) {
        let s = TempStore::new();
        let mut server = Some(open(&s));
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        let mut armed: Option<Failpoint> = None;
        let mut poisoned = false;
        let mut calls = 0;
        for op in &ops {
            match op {
                Op::Fault(n) => {
                    let point = [Failpoint::Append, Failpoint::Sync][usize::from(*n)];
                    if armed.is_none() && !poisoned {
                        server.as_ref().expect("open").client().store().expect("a store open here").failpoints().arm(point);
                        armed = Some(point);
                    }
                }
                Op::Reopen => {
                    drop(server.take());
                    server = Some(open(&s));
                    poisoned = false;
                    armed = None;
                }
                Op::Create(f, c) => {
                    let srv = server.as_ref().expect("open");
                    let path = format!("/memories/f{f}");
                    calls += 1;
                    let out = srv.handle(&create(&format!("toolu_{calls}"), &path, &c.to_string()));
                    let exists = model.contains_key(&path);
                    // The fsync step runs only for batches that change the tree; the append and
                    // index steps run for every batch.
                    let fires = armed.is_some_and(|p| p != Failpoint::Sync || !exists);
                    if poisoned {
                        prop_assert_eq!(&out["is_error"], &json!(true), "poisoned: {}", out);
                    } else if fires {
                        let point = armed.take().expect("armed");
                        prop_assert_eq!(&out["is_error"], &json!(true), "fault {:?}: {}", point, out);
                        poisoned = true;
                        if point != Failpoint::Append && !exists {
                            model.insert(path, c.to_string());
                        }
                    } else if exists {
                        prop_assert_eq!(&out["is_error"], &json!(true), "{}", out);
                    } else {
                        prop_assert!(out.get("is_error").is_none(), "{}", out);
                        model.insert(path, c.to_string());
                    }
                }
            }
        }
        drop(server.take());
        let server = open(&s);
        let report = server.client().verify().expect("verify");
        prop_assert!(report.is_intact(), "{:?}", report);
        let found: BTreeMap<String, String> = server
            .client()
            .records_by_tag("memorytool")
            .expect("records")
            .into_iter()
            .map(|r| (r.path, r.content))
            .collect();
        prop_assert_eq!(found, model);
    }
}
