//! `mnemo history PATH` follows files by identity: through renames of the file and of the
//! directories above it, and a path that held several files over time lists each file apart.

use serde_json::{Value, json};

use crate::support::{TempStore, run_mnemo};

fn history(db: &str, path: &str) -> Vec<(Value, u64)> {
    let out = run_mnemo(&["history", path, "--db", db, "--json"], "");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json");
            (v["file"].clone(), v["seq"].as_u64().expect("seq"))
        })
        .collect()
}

#[test]
fn a_reused_path_lists_each_file_apart_and_a_moved_file_keeps_its_past() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let calls = [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "first\n"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"}),
        json!({"command": "create", "path": "/memories/a.md", "file_text": "second\n"}),
        json!({"command": "str_replace", "path": "/memories/d/b.md", "old_str": "first", "new_str": "FIRST"}),
        json!({"command": "view", "path": "/memories/a.md"}),
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
        json!({"command": "view", "path": "/memories/a.md"}),
        json!({"command": "delete", "path": "/memories/e"}),
    ];
    let input: Vec<String> = calls.iter().map(Value::to_string).collect();
    assert!(
        run_mnemo(&["tool", "--db", db], &input.join("\n"))
            .status
            .success()
    );
    // /memories/a.md held file 1 (events 1-2, then its life as d/b.md and e/b.md: 4, 6, 9) and
    // file 2 (3, 5, 7); the view at 8 found no file there.
    assert_eq!(
        history(db, "/memories/a.md"),
        vec![
            (json!(1), 1),
            (json!(1), 2),
            (json!(1), 4),
            (json!(1), 6),
            (json!(1), 9),
            (json!(2), 3),
            (json!(2), 5),
            (json!(2), 7),
            (Value::Null, 8),
        ]
    );
    // The moved file, asked for by a later path, has its whole past, and nothing of file 2.
    assert_eq!(
        history(db, "/memories/e/b.md"),
        vec![
            (json!(1), 1),
            (json!(1), 2),
            (json!(1), 4),
            (json!(1), 6),
            (json!(1), 9)
        ]
    );
    let out = run_mnemo(&["history", "/memories/a.md", "--db", db], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("file 1: /memories/a.md -> /memories/d/b.md -> /memories/e/b.md"),
        "{text}"
    );
    assert!(text.contains("file 2: /memories/a.md"), "{text}");
    assert!(text.contains("no file at /memories/a.md:"), "{text}");
}

/// A retry that ran nothing (answered from its record) creates no file: history follows the
/// change the replay re-derives, not the command's name, so a retried create after the file
/// moved away is an event that named the path while no file was there.
#[test]
fn a_retried_create_that_ran_nothing_is_no_new_file() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"});
    let block = |id: &str, input: &Value| {
        json!({"type": "tool_use", "id": id, "name": "memory", "input": input}).to_string()
    };
    let rename =
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"});
    let input = [
        block("toolu_c", &create),
        block("toolu_r", &rename),
        block("toolu_c", &create),
    ];
    let out = run_mnemo(&["tool", "--db", db], &input.join("\n"));
    assert!(out.status.success(), "{out:?}");
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    // The retry got the create's answer again and changed nothing.
    assert_eq!(results[2]["content"], results[0]["content"], "{results:?}");
    let ls = run_mnemo(&["ls", "--db", db], "");
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("a.md"),
        "{ls:?}"
    );
    assert_eq!(
        history(db, "/memories/a.md"),
        vec![(json!(1), 1), (json!(1), 2), (Value::Null, 3)]
    );
    assert_eq!(
        history(db, "/memories/b.md"),
        vec![(json!(1), 1), (json!(1), 2)]
    );
}

/// The files are followed once per open store and then only through the events written since:
/// each history asked between writes is the one a store opened afresh gives.
#[test]
fn history_asked_between_writes_equals_history_from_a_fresh_open() {
    let s = TempStore::new();
    let client = s.client();
    let server = mnemo::MnemoMemoryToolServer::new(client.clone());
    let paths = [
        "/memories/a.md",
        "/memories/d/b.md",
        "/memories/e/b.md",
        "/memories/d",
    ];
    let calls = [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "first\n"}),
        json!({"command": "view", "path": "/memories/d/b.md"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"}),
        json!({"command": "create", "path": "/memories/a.md", "file_text": "second\n"}),
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        json!({"command": "str_replace", "path": "/memories/e/b.md", "old_str": "first", "new_str": "FIRST"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
        json!({"command": "create", "path": "/memories/d/b.md", "file_text": "third\n"}),
    ];
    for call in &calls {
        server.handle(call);
        for path in paths {
            let path = mnemo::MemPath::absolute(path).expect("path");
            let kept: Vec<u64> = client
                .history(&path)
                .expect("history")
                .iter()
                .map(|e| e.event.seq)
                .collect();
            let afresh = client
                .read_store(|store| mnemo::testing::lineage::trails_afresh(store, &path))
                .expect("history from event 1");
            let afresh: Vec<u64> = afresh
                .iter()
                .flat_map(|t| t.events.iter().map(|e| e.seq.0))
                .collect();
            assert_eq!(kept, afresh, "history of {path} after {call}");
        }
    }
    let last: Vec<u64> = client
        .history(&mnemo::MemPath::absolute("/memories/e/b.md").expect("path"))
        .expect("history")
        .iter()
        .map(|e| e.event.seq)
        .collect();
    assert_eq!(
        last,
        [1, 3, 5, 6],
        "create, rename into d, the directory's rename, the edit"
    );
}
