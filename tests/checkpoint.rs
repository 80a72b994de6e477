//! Checkpoints: `mnemo verify --expect SEQ:HASH` proves the log still holds the event a
//! checkpoint exported earlier names — which a local chain alone cannot do against whoever holds
//! the disk and rewrites the whole log consistently.

use mnemo::Head;
use mnemo::tool::Command;
use mnemo::{Body, Event, Seq};
use serde_json::{Value, json};

use crate::support::{TempStore, open_store, run_mnemo};

fn create_lines(from: usize, to: usize) -> String {
    (from..to)
        .map(|i| {
            json!({"command": "create", "path": format!("/memories/f{i}.txt"), "file_text": format!("v{i}")})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn verify_json(db: &str, expect: Option<&str>) -> (Option<i32>, Value) {
    let mut args = vec!["verify", "--db", db, "--json"];
    if let Some(e) = expect {
        args.extend(["--expect", e]);
    }
    let out = run_mnemo(&args, "");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), report)
}

/// Rewrites events `from..` of the closed store so that every hash, link and the head are
/// consistent again, changing event `from`'s created text, and drops the index (an index that
/// lags the log is legal: the next open rebuilds it): what an attacker with the disk can do.
fn rewrite_consistently(path: &std::path::Path, from: u64) {
    let store = open_store(path);
    let (events, meta, index) = store.raw_trees();
    let mut all: Vec<Event> = events
        .iter()
        .map(|item| Event::decode(&item.expect("read").1).expect("decode"))
        .collect();
    let at = usize::try_from(from - 1).expect("small");
    if let Body::Tool(call) = &mut all[at].body {
        if let Command::Create { file_text, .. } = &mut call.command {
            file_text.push_str(" (forged)");
        }
    }
    let mut prev = all[at].prev_hash;
    for event in &mut all[at..] {
        event.prev_hash = prev;
        let frame = event.to_frame();
        prev = frame.hash;
        events
            .insert(event.seq.key(), frame.encode())
            .expect("write");
    }
    let last = all.last().expect("events").seq;
    let mut head = last.0.to_be_bytes().to_vec();
    head.extend_from_slice(&prev.0);
    meta.insert("head", head).expect("write head");
    index.clear().expect("drop the index");
    store
        .raw_content_tree()
        .clear()
        .expect("drop the index's content");
    events.flush().expect("flush");
    // The store's own record of its last commit would give the rewrite away: remove it too.
    std::fs::remove_file(path.join(mnemo::testing::HEAD_FILE)).expect("remove the head record");
}

#[test]
fn a_checkpoint_catches_a_consistent_rewrite_and_a_rollback() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    assert!(
        run_mnemo(&["tool", "--db", db], &create_lines(0, 3))
            .status
            .success()
    );
    let (code, report) = verify_json(db, None);
    assert_eq!(code, Some(0));
    let checkpoint = report["checkpoint"]
        .as_str()
        .expect("checkpoint")
        .to_string();
    assert!(checkpoint.starts_with("3:"), "{checkpoint}");
    assert_eq!(
        Head::parse(&checkpoint).expect("parses").to_string(),
        checkpoint
    );

    assert!(
        run_mnemo(&["tool", "--db", db], &create_lines(3, 6))
            .status
            .success()
    );
    assert_eq!(
        verify_json(db, Some(&checkpoint)).0,
        Some(0),
        "the log still holds it"
    );

    // A consistent rewrite of history before the checkpoint: the chain alone cannot tell...
    rewrite_consistently(&s.path(), 2);
    let (code, report) = verify_json(db, None);
    assert_eq!(
        code,
        Some(0),
        "a consistent rewrite passes a local verify: {report}"
    );
    // ...but the checkpoint kept elsewhere names the event that no longer matches.
    let (code, report) = verify_json(db, Some(&checkpoint));
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["violations"][0]["kind"], "checkpoint", "{report}");
    assert_eq!(report["violations"][0]["seq"], 3, "{report}");
}

#[test]
fn a_checkpoint_past_the_end_of_the_log_is_a_rollback() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    assert!(
        run_mnemo(&["tool", "--db", db], &create_lines(0, 4))
            .status
            .success()
    );
    let (_, report) = verify_json(db, None);
    let checkpoint = report["checkpoint"]
        .as_str()
        .expect("checkpoint")
        .to_string();
    // Roll the log back to 2 events, consistently: remove the tail and move the head.
    {
        let store = open_store(&s.path());
        let (events, meta, index) = store.raw_trees();
        let two = Event::decode(&events.get(Seq(2).key()).expect("get").expect("event 2"))
            .expect("decode");
        events.remove(Seq(3).key()).expect("remove");
        events.remove(Seq(4).key()).expect("remove");
        let mut head = 2u64.to_be_bytes().to_vec();
        head.extend_from_slice(&two.hash().0);
        meta.insert("head", head).expect("head");
        index.clear().expect("clear index");
        store
            .raw_content_tree()
            .clear()
            .expect("clear the index's content");
        index.flush().expect("flush");
    }
    // Left in place, the store's record of its last commit already shows the loss...
    let (code, report) = verify_json(db, None);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["violations"][0]["kind"], "head", "{report}");
    assert_eq!(report["violations"][0]["seq"], 3, "{report}");
    // ...and a client refuses to write on top of it.
    let refused = mnemo::MnemoClient::open(s.path(), "writer");
    assert!(
        matches!(&refused, Err(mnemo::Error::Corrupt { what }) if what.contains("rolled back")),
        "{refused:?}"
    );
    // Whoever holds the disk can remove that record too; the exported checkpoint still knows.
    std::fs::remove_file(s.path().join(mnemo::testing::HEAD_FILE)).expect("remove the head record");
    let (code, report) = verify_json(db, Some(&checkpoint));
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["violations"][0]["kind"], "checkpoint", "{report}");
    assert_eq!(report["violations"][0]["seq"], 3, "{report}");
    let bad = run_mnemo(&["verify", "--db", db, "--expect", "3:nothex"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("SEQ:HASH"));
}

/// `verify --expect` says what it checked against what the log holds, names a seq past the log
/// by where the log ends, and prints a checkpoint only for an intact log.
#[test]
fn a_failed_expect_reports_what_was_checked_and_gives_no_checkpoint() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    assert!(
        run_mnemo(&["tool", "--db", db], &create_lines(0, 12))
            .status
            .success()
    );
    let (code, intact) = verify_json(db, None);
    assert_eq!(code, Some(0), "{intact}");
    assert_eq!(intact["log_last"], 12, "{intact}");
    assert_eq!(intact["recorded_head"], 12, "{intact}");
    assert!(intact["checkpoint"].as_str().is_some(), "{intact}");
    let wrong = format!("5:{}", "ab".repeat(32));
    let out = run_mnemo(&["verify", "--db", db, "--expect", &wrong], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("checked:    5 events of the 12 the log holds"),
        "{text}"
    );
    assert!(text.contains("(the last event checked)"), "{text}");
    assert!(
        !text.contains("checkpoint:"),
        "no checkpoint of a log with a violation: {text}"
    );
    let (_, report) = verify_json(db, Some(&wrong));
    assert_eq!(report["checkpoint"], Value::Null, "{report}");
    let beyond = format!("99:{}", "ab".repeat(32));
    let out = run_mnemo(&["verify", "--db", db, "--expect", &beyond], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("violation:  after seq 12, where the log ends (checkpoint)"),
        "{text}"
    );
    assert!(!text.contains("seq 13"), "{text}");
}
