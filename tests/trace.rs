//! `mnemo trace SEQ [--path P]`: the later events shown or carrying the content an event wrote,
//! through the binary (text and `--json`), with a redacted event on the way, its refusals, and
//! an agent's trace within its grants.

use mnemo::{Access, MemPath, Seq};
use serde_json::{Value, json};

use crate::support::{TempStore, open_client, run_mnemo};

/// Runs `calls` as `agent` through `mnemo tool`.
fn session(db: &str, agent: &str, calls: &[Value]) {
    let input: Vec<String> = calls.iter().map(Value::to_string).collect();
    let out = run_mnemo(&["tool", "--db", db, "--agent", agent], &input.join("\n"));
    assert!(out.status.success(), "{out:?}");
}

fn trace_json(db: &str, args: &[&str]) -> Value {
    let mut all = vec!["trace", "--db", db, "--json"];
    all.extend_from_slice(args);
    let out = run_mnemo(&all, "");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Each traced event as (seq, agent, shown, carried, removed, erased).
fn met(report: &Value) -> Vec<(u64, String, bool, bool, bool, bool)> {
    report["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["agent"].as_str().expect("agent").to_string(),
                e["shown"] == true,
                e["carried"] == true,
                e["removed"] == true,
                e["erased_event"] == true,
            )
        })
        .collect()
}

/// A bad fact written at 1, viewed, edited around, moved, viewed by others; listings and views
/// of other lines do not count.
fn incident(db: &str) {
    session(
        db,
        "ann",
        &[
            json!({"command": "create", "path": "/memories/a.md", "file_text": "tea\nthe vault code is 1234\n"}),
            json!({"command": "view", "path": "/memories/a.md", "view_range": [1, 1]}),
            json!({"command": "view", "path": "/memories/a.md"}),
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "# notes\n"}),
            json!({"command": "view", "path": "/memories"}),
        ],
    );
    session(
        db,
        "bob",
        &[
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/team/a.md"}),
            json!({"command": "create", "path": "/memories/b.md", "file_text": "the vault code is 1234\n"}),
            json!({"command": "str_replace", "path": "/memories/team/a.md", "old_str": "1234", "new_str": "(removed)"}),
        ],
    );
    session(
        db,
        "cy",
        &[json!({"command": "view", "path": "/memories/team/a.md"})],
    );
}

#[test]
fn a_trace_names_who_was_shown_and_what_carried_it_as_text_and_json() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    incident(db);
    let report = trace_json(db, &["1"]);
    assert_eq!(report["seq"], 1);
    assert_eq!(report["bytes"], 27);
    assert_eq!(report["file"], "/memories/a.md");
    assert_eq!(report["exact"], true);
    assert_eq!(report["through"], 9);
    // 2 showed line 1 (traced), 3 the whole file, 4 kept it under a new first line, 5 only
    // listed the directory, 6 moved it, 7 typed the same text anew (its own bytes), 8 replaced
    // part of it (and its snippet showed the rest), 9 viewed what was left.
    let s = |seq: u64, agent: &str, shown, carried, removed| {
        (seq, agent.to_string(), shown, carried, removed, false)
    };
    assert_eq!(
        met(&report),
        vec![
            s(2, "ann", true, false, false),
            s(3, "ann", true, false, false),
            s(4, "ann", false, true, false),
            s(6, "bob", false, true, false),
            s(8, "bob", true, true, true),
            s(9, "cy", true, false, false),
        ]
    );
    assert_eq!(
        report["live"],
        json!([{"bytes": 23, "path": "/memories/team/a.md"}])
    );
    // The same as text: by agent, each event with what it did, where the bytes are now.
    let out = run_mnemo(&["trace", "1", "--db", db], "");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let agents: Vec<&str> = text.lines().filter(|l| l.starts_with("agent ")).collect();
    assert_eq!(agents, ["agent ann:", "agent bob:", "agent cy:"], "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("rename") && l.ends_with("carried (/memories/team/a.md)")),
        "{text}"
    );
    assert!(
        text.contains("now: /memories/team/a.md holds 23 of them"),
        "{text}"
    );
    assert!(text.contains("exact: re-derived"), "{text}");
    // The content of a file at a seq: the second file's bytes were never shown to anyone.
    let report = trace_json(db, &["7", "--path", "/memories/b.md"]);
    assert_eq!(report["path"], "/memories/b.md");
    assert_eq!(met(&report), vec![]);
    assert_eq!(
        report["live"],
        json!([{"bytes": 23, "path": "/memories/b.md"}])
    );
}

#[test]
fn a_redacted_event_on_the_way_makes_the_trace_a_lower_bound_and_says_so() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    incident(db);
    let out = run_mnemo(
        &[
            "redact",
            "--db",
            db,
            "--seq",
            "3",
            "--reason",
            "an incident",
        ],
        "",
    );
    assert!(out.status.success(), "{out:?}");
    let report = trace_json(db, &["1"]);
    assert_eq!(report["exact"], false);
    assert_eq!(report["erased"], json!([3]));
    let erased = &met(&report)[1];
    assert_eq!(erased, &(3, "ann".to_string(), false, false, false, true));
    // Past it the trace goes on: the rename still carried the bytes, the last view showed them.
    assert!(met(&report).iter().any(|m| m.0 == 9 && m.2));
    let out = run_mnemo(&["trace", "1", "--db", db], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("erased: cannot be re-derived"), "{text}");
    assert!(text.contains("not exact: a lower bound"), "{text}");
    assert!(
        text.contains(
            "event 3 is erased: what an erased event showed or carried cannot be re-derived"
        ),
        "{text}"
    );
    let out = run_mnemo(&["verify", "--db", db], "");
    assert!(out.status.success(), "{out:?}");
}

/// A revert puts content back by calls that write the text again, a copy the trace cannot
/// follow: a trace whose bytes a revert may have written back says so and is a lower bound,
/// and the revert's call is where the put-back bytes are traced from.
#[test]
fn a_revert_that_wrote_traced_bytes_back_makes_the_trace_a_lower_bound() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let secret =
        json!({"command": "create", "path": "/memories/s.md", "file_text": "SECRET=hunter2\n"});
    session(
        db,
        "alice",
        &[
            secret,
            json!({"command": "delete", "path": "/memories/s.md"}),
        ],
    );
    let before = trace_json(db, &["1"]);
    assert_eq!(before["exact"], true, "{before}");
    let out = run_mnemo(&["revert", "--db", db, "--to", "1"], "");
    assert!(out.status.success(), "{out:?}");
    session(
        db,
        "mallory",
        &[json!({"command": "view", "path": "/memories/s.md"})],
    );
    // The revert's record is event 3, its create event 4, mallory's view event 5.
    let report = trace_json(db, &["1"]);
    assert_eq!(report["exact"], false, "{report}");
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("the revert recorded at event 3 (its calls 4 to 4)"),
        "{notes}"
    );
    let put_back = trace_json(db, &["4"]);
    assert!(
        met(&put_back).contains(&(5, "mallory".to_string(), true, false, false, false)),
        "{put_back}"
    );
    let text = run_mnemo(&["trace", "1", "--db", db], "");
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("not exact: a lower bound"),
        "{text:?}"
    );
    // The record itself wrote nothing, and the refusal says which calls did.
    let record = run_mnemo(&["trace", "3", "--db", db], "");
    assert_eq!(record.status.code(), Some(2), "{record:?}");
    assert!(
        String::from_utf8_lossy(&record.stderr).contains("record of a revert")
            && String::from_utf8_lossy(&record.stderr).contains("events 4 to 4"),
        "{record:?}"
    );
}

#[test]
fn a_trace_of_nothing_written_is_refused_with_what_to_trace_instead() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    incident(db);
    for (args, says) in [
        (
            &["99"][..],
            "there is no event 99: the log holds events 1 to 9",
        ),
        (&["0"][..], "there is no event 0"),
        (&["2"][..], "event 2 read or changed no content"),
        (
            &["6"][..],
            "event 6 moved or deleted files and wrote no content",
        ),
        (
            &["2", "--path", "/memories/b.md"][..],
            "no file was at /memories/b.md right after event 2",
        ),
    ] {
        let mut all = vec!["trace", "--db", db];
        all.extend_from_slice(args);
        let out = run_mnemo(&all, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn an_agents_trace_shows_nothing_outside_its_grants() {
    let s = TempStore::new();
    let owner = open_client(&s.path(), mnemo::OPERATOR, mnemo::Durability::Buffered);
    // Every agent may read and write everything until the grant to all is taken away.
    owner.revoke("*", "/").expect("revoke");
    owner
        .grant("ann", "/memories/ann", Access::ReadWrite)
        .expect("grant");
    owner
        .grant("bob", "/memories", Access::ReadWrite)
        .expect("grant");
    let ann = open_client(&s.path(), "ann", mnemo::Durability::Buffered);
    let bob = open_client(&s.path(), "bob", mnemo::Durability::Buffered);
    let tool = |client: &mnemo::MnemoClient, input: Value| {
        let server = mnemo::MnemoMemoryToolServer::new(client.clone());
        let out = server.handle(&json!({"type": "tool_use", "id": format!("t{}", rand_id()), "name": "memory", "input": input}));
        assert_ne!(out["is_error"], true, "{out}");
    };
    // bob writes in ann's directory, moves the file out of her reach, views it there, and moves
    // it back under another name, which she views.
    let calls = [
        (
            &bob,
            json!({"command": "create", "path": "/memories/ann/x.md", "file_text": "secret\n"}),
        ),
        (
            &ann,
            json!({"command": "view", "path": "/memories/ann/x.md"}),
        ),
        (
            &bob,
            json!({"command": "rename", "old_path": "/memories/ann/x.md", "new_path": "/memories/bob/x.md"}),
        ),
        (
            &bob,
            json!({"command": "view", "path": "/memories/bob/x.md"}),
        ),
        (
            &bob,
            json!({"command": "rename", "old_path": "/memories/bob/x.md", "new_path": "/memories/ann/y.md"}),
        ),
        (
            &ann,
            json!({"command": "view", "path": "/memories/ann/y.md"}),
        ),
    ];
    let origin = Seq(owner.head().expect("head").seq.0 + 1);
    for (client, input) in calls {
        tool(client, input);
    }
    let whole = owner.trace(origin, None).expect("trace");
    assert_eq!(whole.events.len(), 5);
    assert!(whole.exact);
    let hers = ann.trace_within_grants(origin, None).expect("trace");
    // Her two views only: the move back names bob's path, so it is left out too.
    let seqs: Vec<u64> = hers.events.iter().map(|e| e.event.seq).collect();
    assert_eq!(seqs, [origin.0 + 1, origin.0 + 5], "{hers:?}");
    let named: Vec<&String> = hers
        .events
        .iter()
        .flat_map(|e| e.files.iter().chain(&e.event.paths))
        .chain(hers.live.iter().map(|f| &f.path))
        .collect();
    assert!(
        named.iter().all(|p| p.starts_with("/memories/ann/")),
        "{named:?}"
    );
    assert_eq!(hers.live.len(), 1);
    assert!(!hers.exact);
    // A trace from a file outside the agent's grants is refused.
    let bobs = MemPath::absolute("/memories/bob/x.md").expect("path");
    let refused = ann.trace_within_grants(Seq(origin.0 + 2), Some(&bobs));
    assert!(refused.is_err(), "{refused:?}");
}

/// A fresh tool_use id.
fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
