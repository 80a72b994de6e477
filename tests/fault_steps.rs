//! A failure at every I/O step of a session, one step per run, through the store's failpoint
//! countdown: the format marker, the value file's append, each event record (a torn batch), the
//! head, the index batch, the flush, each `fsync`, the head record, and the same at close.
//! Whichever step fails:
//!
//! - every write that was acknowledged is in the log with the answer it got, and so is every
//!   read or refused call answered before the last acknowledged write;
//! - the log is a prefix of the log of the same session without the failure: no call answered
//!   with the store's failure, nor any call after it (the store poisons), lands after what was
//!   acknowledged, and nothing forks the chain;
//! - the store reopens, verifies intact, holds the tree the fault-free session held at that seq,
//!   and takes a write again.

use std::collections::BTreeMap;

use mnemo::testing::history::records_at;
use mnemo::{Durability, Event, MemPath, MnemoClient, MnemoMemoryToolServer, Seq};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{TempStore, open_client};

fn open(store: &TempStore) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::new(open_client(&store.path(), "steps", Durability::Fsync))
}

/// A session as agents make them: writes, listings and file views between them, a refused call,
/// and a write large enough that its payload goes to the store's value file (its own step), then
/// edited in the middle (its chunks stored as pieces of the value file).
fn session() -> Vec<Value> {
    let large: String = (0..mnemo::testing::VALUE_MIN / 16 + 1)
        .map(|i| format!("note {i:>10}\n"))
        .collect();
    let inputs = [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/large.md", "file_text": large}),
        json!({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "1"}),
        json!({"command": "str_replace", "path": "/memories/large.md", "old_str": format!("note {:>10}\n", 1000), "new_str": "an edit in the middle\n"}),
        json!({"command": "view", "path": "/memories/a.md"}),
        json!({"command": "view", "path": "/memories/../etc/passwd"}),
        json!({"command": "insert", "path": "/memories/d/b.md", "insert_line": 1, "insert_text": "c\n"}),
        json!({"command": "rename", "old_path": "/memories/d/b.md", "new_path": "/memories/c.md"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
        json!({"command": "view", "path": "/memories/c.md"}),
    ];
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "memory", "input": input}))
        .collect()
}

/// One call's answer, and whether the store acknowledged it (it did not fail to record it).
struct Answer {
    id: String,
    text: String,
    is_error: bool,
    acknowledged: bool,
    write: bool,
}

/// Runs the session on a new store, with the `fail_at`-th step from the open failing; returns
/// the answers and the steps the session passed (before the close).
fn run(store: &TempStore, fail_at: u64) -> (Vec<Answer>, u64) {
    let server = open(store);
    let store = server.client().store().expect("a store open here");
    let faults = store.failpoints();
    let start = faults.steps();
    faults.countdown(fail_at);
    let mut answers = Vec::new();
    for block in session() {
        let failures = server.store_failures();
        let result = server.handle(&block);
        answers.push(Answer {
            id: block["id"].as_str().expect("id").to_string(),
            text: result["content"].as_str().expect("text").to_string(),
            is_error: result["is_error"] == true,
            acknowledged: server.store_failures() == failures,
            write: block["input"]["command"] != "view",
        });
        // The index written after the large create, as an agent's pause between calls lets the
        // writer do: the edit that follows stores its chunk as pieces of the value file. (Its
        // failure, at its own steps, poisons the store as any index write's does.)
        if block["input"]["command"] == "create" && block["input"]["path"] == "/memories/large.md" {
            let _ = server.client().flush_index();
        }
    }
    let steps = faults.steps() - start;
    (answers, steps)
}

/// What identifies an event apart from its time: who, which call, what, and its answer.
/// What two runs of the session must log alike: agent, id, body and error flag. Not the result
/// hash, a commitment salted afresh for every event.
fn identity(event: &Event) -> (String, Option<String>, String, bool) {
    (
        event.header.agent.clone(),
        event.header.tool_use_id.clone(),
        format!("{:?}", event.body),
        event.header.outcome.is_error,
    )
}

fn log_of(client: &MnemoClient) -> Vec<Event> {
    client
        .events(Seq(1))
        .expect("events")
        .map(|e| e.expect("an event"))
        .collect()
}

/// The files of the store, as (path, content).
fn tree(client: &MnemoClient, at: Option<Seq>) -> Vec<(String, String)> {
    let root = MemPath::root("/memories").expect("root");
    records_at(&client.store().expect("a store open here"), &root, at)
        .expect("records")
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect()
}

#[test]
fn a_failure_at_any_io_step_loses_nothing_acknowledged_and_recovers() {
    let clean = TempStore::new();
    let (clean_answers, steps) = run(&clean, 0);
    assert!(clean_answers.iter().all(|a| a.acknowledged));
    assert!(
        steps > session().len() as u64,
        "every call passes steps: {steps}"
    );
    let clean_client = open(&clean).client().clone();
    let clean_log: Vec<_> = log_of(&clean_client).iter().map(identity).collect();
    assert_eq!(clean_log.len(), session().len());
    let pieces = clean_client
        .store()
        .expect("a store open here")
        .raw_content_tree()
        .iter()
        .filter(|item| {
            item.as_ref()
                .is_ok_and(|(_, v)| matches!(v[7], 0x40 | 0xBF))
        })
        .count();
    assert!(
        pieces > 0,
        "the large file's edited chunk is stored as pieces"
    );

    // Past the session's own steps the countdown reaches those of the close.
    let mut failed_at_close = 0;
    let mut places = std::collections::BTreeSet::new();
    for fail_at in 1..=steps + 6 {
        let store = TempStore::new();
        let (answers, _) = run(&store, fail_at);
        let server = open(&store);
        let client = server.client();
        let report = client.verify().expect("verify");
        assert!(report.is_intact(), "step {fail_at}: {report:?}");
        let events = log_of(client);
        let log: Vec<_> = events.iter().map(identity).collect();
        assert!(
            log.len() <= clean_log.len() && log[..] == clean_log[..log.len()],
            "step {fail_at}: the log is not a prefix of the fault-free log:\n{log:#?}"
        );
        let last_acknowledged_write = answers
            .iter()
            .rposition(|a| a.write && a.acknowledged)
            .map_or(0, |i| i + 1);
        for (i, answer) in answers.iter().enumerate() {
            let logged = events
                .iter()
                .find(|e| e.header.tool_use_id.as_deref() == Some(answer.id.as_str()));
            match logged {
                Some(event) if answer.acknowledged => assert_eq!(
                    event.header.outcome,
                    event.outcome_of(answer.is_error, &answer.text),
                    "step {fail_at}: {} was logged with another answer",
                    answer.id
                ),
                None if answer.acknowledged => assert!(
                    !answer.write && i >= last_acknowledged_write,
                    "step {fail_at}: acknowledged call {} is not in the log",
                    answer.id
                ),
                _ => {}
            }
        }
        let unacknowledged = answers.iter().position(|a| !a.acknowledged);
        match unacknowledged {
            // Poisoned from the failure on: every later call got the failure too.
            Some(first) => {
                assert!(
                    answers[first..].iter().all(|a| !a.acknowledged),
                    "step {fail_at}: a call after the failure was acknowledged"
                );
                // The answer names the place that failed: "failpoint Event (step 3)".
                let text = &answers[first].text;
                let place = text
                    .split("failpoint ")
                    .nth(1)
                    .and_then(|rest| rest.split(' ').next())
                    .unwrap_or_else(|| panic!("step {fail_at}: {text}"));
                places.insert(place.to_string());
            }
            None => failed_at_close += 1,
        }
        let at = Seq(log.len() as u64);
        let expected = match at {
            Seq(0) => Vec::new(),
            at => tree(&clean_client, Some(at)),
        };
        assert_eq!(tree(client, None), expected, "step {fail_at}");
        // A large write too: its payload goes after whatever a failed one left in the value file.
        let large = "after\n".repeat(mnemo::testing::VALUE_MIN / 6 + 1);
        for (path, text) in [
            ("/memories/after.md", "x"),
            ("/memories/after-large.md", &large),
        ] {
            let again =
                server.handle(&json!({"command": "create", "path": path, "file_text": text}));
            assert!(again.get("is_error").is_none(), "step {fail_at}: {again}");
        }
        let read = client
            .record("/memories/after-large.md")
            .expect("read")
            .expect("the large file");
        assert!(
            read.content == large,
            "step {fail_at}: the large file reads back"
        );
        assert!(
            client.verify().expect("verify").is_intact(),
            "step {fail_at}"
        );
    }
    assert!(
        failed_at_close > 0,
        "the countdown also reached the steps of the close"
    );
    // Every place a commit passes was made to fail at least once (the index is written in the
    // background, so it may be reached only at the close).
    let expected = [
        "Answer",
        "Append",
        "Event",
        "Flush",
        "Fsync",
        "Head",
        "HeadRecord",
        "Sync",
        "Value",
    ];
    for place in expected {
        assert!(places.contains(place), "{place} never failed: {places:?}");
    }
}

/// One step of the proptest below.
#[derive(Clone, Debug)]
enum Op {
    Create(u8, u8),
    Delete(u8),
    View,
    /// The n-th I/O step from now fails.
    Countdown(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..5, any::<u8>()).prop_map(|(f, c)| Op::Create(f, c)),
        2 => (0u8..5).prop_map(Op::Delete),
        2 => Just(Op::View),
        2 => (1u8..24).prop_map(Op::Countdown),
        1 => Just(Op::Reopen),
    ]
}

/// `model` after `change`: a file written with its content, or removed (`None`).
fn applied(
    model: &BTreeMap<String, String>,
    (path, after): (String, Option<String>),
) -> BTreeMap<String, String> {
    let mut model = model.clone();
    match after {
        Some(text) => model.insert(path, text),
        None => model.remove(&path),
    };
    model
}

/// The files of the store now, as (path, content).
fn files(server: &MnemoMemoryToolServer) -> BTreeMap<String, String> {
    server
        .client()
        .records_by_tag("memorytool")
        .expect("records")
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MNEMO_FAULT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// Calls, a failure at a random I/O step and reopens against a model: an acknowledged change
    /// is always there; the call the failure hit is either there or not, and nothing after it
    /// (the store refuses every call until reopened); a failure at the close loses no change;
    /// the store always verifies.
    #[test]
    fn a_countdown_at_any_step_against_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store = TempStore::new();
        let mut server = Some(open(&store));
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        // The change whose call the failure hit: it may or may not have landed.
        let mut uncertain: Option<(String, Option<String>)> = None;
        let mut poisoned = false;
        for op in &ops {
            let srv = server.as_ref().expect("open");
            let (input, change) = match op {
                Op::Countdown(n) => {
                    srv.client().store().expect("a store open here").failpoints().countdown(u64::from(*n));
                    continue;
                }
                Op::Reopen => {
                    drop(server.take());
                    let reopened = open(&store);
                    prop_assert!(reopened.client().verify().expect("verify").is_intact());
                    let found = files(&reopened);
                    if let Some(change) = uncertain.take() {
                        let landed = applied(&model, change);
                        prop_assert!(found == model || found == landed, "{:?}", found);
                        model = found.clone();
                    }
                    prop_assert_eq!(&found, &model);
                    server = Some(reopened);
                    poisoned = false;
                    continue;
                }
                Op::View => (json!({"command": "view", "path": "/memories"}), None),
                Op::Create(f, c) => {
                    let path = format!("/memories/f{f}.md");
                    let change = (!model.contains_key(&path)).then(|| (path.clone(), Some(c.to_string())));
                    (json!({"command": "create", "path": path, "file_text": c.to_string()}), change)
                }
                Op::Delete(f) => {
                    let path = format!("/memories/f{f}.md");
                    let change = model.contains_key(&path).then(|| (path.clone(), None));
                    (json!({"command": "delete", "path": path}), change)
                }
            };
            let failures = srv.store_failures();
            let out = srv.handle(&input);
            let acknowledged = srv.store_failures() == failures;
            if poisoned {
                prop_assert!(!acknowledged, "a call after the failure was acknowledged: {}", out);
            } else if !acknowledged {
                poisoned = true;
                uncertain = change;
            } else if let Some(change) = change {
                prop_assert!(out.get("is_error").is_none(), "{}", out);
                model = applied(&model, change);
            }
        }
        drop(server.take());
        let server = open(&store);
        prop_assert!(server.client().verify().expect("verify").is_intact());
        let found = files(&server);
        if let Some(change) = uncertain {
            let landed = applied(&model, change);
            prop_assert!(found == model || found == landed, "{:?}", found);
        } else {
            prop_assert_eq!(found, model);
        }
    }
}
