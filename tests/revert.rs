//! `mnemo revert` through the binary: a dry run lists the calls and changes no byte, a conflict
//! is refused (writing nothing) until forced, the revert's record and calls are in the log under
//! the operator, the tree is put back, and `verify` is intact after.

use serde_json::{Value, json};

use crate::redact::run_ok;
use crate::support::{TempStore, checksums, run_mnemo};

fn calls(db: &str, agent: &str, inputs: &[Value]) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let lines: Vec<String> = inputs
        .iter()
        .map(|input| {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": "memory", "input": input})
                .to_string()
        })
        .collect();
    let out = run_ok(&["tool", "--db", db, "--agent", agent], &lines.join("\n"));
    assert!(!out.contains("\"is_error\":true"), "{out}");
}

/// Seqs 1-2 by agent-1; 3 (the bad write), 4 and 5 by agent-2; 6 by agent-1 on agent-2's edit.
fn incident(db: &str) {
    calls(
        db,
        "agent-1",
        &[
            json!({"command": "create", "path": "/memories/plan.md", "file_text": "step 1\n"}),
            json!({"command": "create", "path": "/memories/notes/a.md", "file_text": "a\n"}),
        ],
    );
    calls(
        db,
        "agent-2",
        &[
            json!({"command": "str_replace", "path": "/memories/plan.md", "old_str": "step 1", "new_str": "WRONG"}),
            json!({"command": "rename", "old_path": "/memories/notes/a.md", "new_path": "/memories/notes/b.md"}),
            json!({"command": "create", "path": "/memories/notes/c.md", "file_text": "c\n"}),
        ],
    );
    calls(
        db,
        "agent-1",
        &[
            json!({"command": "str_replace", "path": "/memories/plan.md", "old_str": "WRONG", "new_str": "WRONG too"}),
        ],
    );
}

#[test]
fn a_revert_is_planned_refused_on_conflict_forced_logged_and_verified() {
    let t = TempStore::new();
    let db = t.path().to_str().expect("utf-8").to_string();
    incident(&db);
    let sums = checksums(&t.path());

    // A dry run of a path's revert: a rename back (history follows the file) and a delete.
    let dry = run_ok(
        &[
            "revert",
            "--db",
            &db,
            "--to",
            "2",
            "--path",
            "/memories/notes",
            "--dry-run",
        ],
        "",
    );
    assert!(
        dry.starts_with("revert of /memories/notes to seq 2: undoes 2 events (4, 5) in 2 calls"),
        "{dry}"
    );
    assert!(dry.contains("delete /memories/notes/c.md"), "{dry}");
    assert!(
        dry.contains("rename /memories/notes/b.md -> /memories/notes/a.md"),
        "{dry}"
    );
    assert!(!dry.contains("conflict"), "{dry}");
    let json: Value = serde_json::from_str(&run_ok(
        &[
            "revert",
            "--db",
            &db,
            "--agent",
            "agent-2",
            "--since",
            "2",
            "--dry-run",
            "--json",
        ],
        "",
    ))
    .expect("one JSON object");
    assert_eq!(json["undone"], json!([3, 4, 5, 6]));
    assert_eq!(json["calls"].as_array().map(Vec::len), Some(3), "{json}");
    assert_eq!(checksums(&t.path()), sums, "a dry run writes nothing");

    // agent-2's writes: plan.md was edited after by agent-1, a conflict refused without --force.
    let refused = run_mnemo(
        &["revert", "--db", &db, "--agent", "agent-2", "--since", "2"],
        "",
    );
    assert_eq!(refused.status.code(), Some(2));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("/memories/plan.md: written after seq 2 by agent-1 (6)"),
        "{why}"
    );
    let refused = run_mnemo(
        &[
            "revert", "--db", &db, "--agent", "agent-2", "--since", "2", "--json",
        ],
        "",
    );
    assert_eq!(refused.status.code(), Some(2));
    let plan: Value = serde_json::from_slice(&refused.stdout).expect("the refused plan as JSON");
    assert_eq!(
        plan["conflicts"],
        json!(["/memories/plan.md: written after seq 2 by agent-1 (6)"]),
        "{plan}"
    );
    assert_eq!(
        checksums(&t.path()),
        sums,
        "a refused revert writes nothing"
    );

    let done = run_ok(
        &[
            "revert", "--db", &db, "--agent", "agent-2", "--since", "2", "--force", "--as", "alice",
        ],
        "",
    );
    assert!(
        done.starts_with(
            "reverted agent-2's writes to seq 2: the record at seq 7, its 3 calls at seqs 8 to 10"
        ),
        "{done}"
    );
    assert_eq!(
        run_ok(&["cat", "--db", &db, "/memories/plan.md"], ""),
        "step 1\n"
    );
    let ls = run_ok(&["ls", "--db", &db, "/memories"], "");
    assert!(ls.contains("/memories/notes/a.md"), "{ls}");
    assert!(!ls.contains("b.md") && !ls.contains("c.md"), "{ls}");
    let now = run_ok(&["ls", "--db", &db, "/memories"], "");
    assert_eq!(
        now,
        run_ok(&["ls", "--db", &db, "/memories", "--at", "2"], ""),
        "the tree of seq 2"
    );

    // The log says plainly what was undone, and by whom; each call names the record.
    let log = run_ok(&["log", "--db", &db, "--from", "7"], "");
    let first = log.lines().next().expect("the record");
    assert!(first.contains("alice"), "{first}");
    assert!(
        first.contains("revert")
            && first.contains("of events 3, 4, 5, 6 (agent-2's writes as after seq 2)"),
        "{first}"
    );
    let logged: Vec<Value> = run_ok(&["log", "--db", &db, "--from", "8", "--json"], "")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(logged.len(), 3);
    for (n, event) in logged.iter().enumerate() {
        assert_eq!(event["agent"], "alice");
        assert_eq!(event["tool_use_id"], format!("revert-7-{}", n + 1));
        assert_eq!(event["is_error"], false);
    }
    let shown = run_ok(&["show", "--db", &db, "7"], "");
    assert!(
        shown.contains("Reverting agent-2's writes to seq 2: undoing 4 events (3, 4, 5, 6) by the 3 calls that follow"),
        "{shown}"
    );

    let verify = run_mnemo(&["verify", "--db", &db], "");
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );

    // Nothing left to do; bad points are clear errors.
    let again = run_ok(&["revert", "--db", &db, "--to", "2", "--dry-run"], "");
    assert!(again.starts_with("nothing to revert"), "{again}");
    for bad in [
        &["--to", "0"][..],
        &["--to", "99"],
        &["--agent", "agent-2", "--since", "99"],
    ] {
        let out = run_mnemo(&[&["revert", "--db", &db][..], bad].concat(), "");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}
