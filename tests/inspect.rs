//! `mnemo show SEQ` and `mnemo diff FROM TO`: one event whole (the call as sent, the answer
//! re-derived and checked against the log, the change as a diff) and the files changed between
//! two events. Random sessions against the model are in `tests/model.rs`.

use serde_json::{Value, json};

use crate::support::{TempStore, run_mnemo, tamper_record};

const SESSION: &[&str] = &[
    r#"{"command":"create","path":"/memories/a.md","file_text":"one\ntwo\nthree\n"}"#,
    r#"{"type":"tool_use","id":"toolu_edit","name":"memory","input":{"command":"str_replace","path":"/memories/a.md","old_str":"two","new_str":"TWO"}}"#,
    r#"{"command":"create","path":"/memories/d/x.md","file_text":"x\n"}"#,
    r#"{"command":"rename","old_path":"/memories/d","new_path":"/memories/e"}"#,
    r#"{"command":"view","path":"/memories/../etc/passwd"}"#,
    r#"{"command":"delete","path":"/memories/e"}"#,
    r#"not json"#,
];

fn store_with_session() -> TempStore {
    let s = TempStore::new();
    let db = s.path();
    let out = run_mnemo(
        &["tool", "--db", db.to_str().expect("utf-8")],
        &SESSION.join("\n"),
    );
    assert!(out.status.success(), "{out:?}");
    s
}

fn show_json(db: &str, seq: &str) -> (Option<i32>, Value) {
    let out = run_mnemo(&["show", seq, "--db", db, "--json"], "");
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), value)
}

#[test]
fn show_gives_the_call_the_answer_and_the_change_of_each_event() {
    let s = store_with_session();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let (code, edit) = show_json(db, "2");
    assert_eq!(code, Some(0), "{edit}");
    assert_eq!(edit["seq"], 2);
    assert_eq!(edit["tool_use_id"], "toolu_edit");
    assert_eq!(
        edit["input"],
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"})
    );
    assert_eq!(edit["verified"], true);
    assert_eq!(edit["is_error"], false);
    assert!(
        edit["answer"]
            .as_str()
            .expect("answer")
            .starts_with("The memory file has been edited"),
        "{edit}"
    );
    assert_eq!(edit["change"]["kind"], "edited");
    assert_eq!(
        edit["change"]["diff"],
        "--- a/memories/a.md\n+++ b/memories/a.md\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    );
    let (_, created) = show_json(db, "1");
    assert_eq!(created["change"]["kind"], "created");
    let (_, moved) = show_json(db, "4");
    assert_eq!(moved["change"]["kind"], "moved");
    assert_eq!(
        moved["change"]["files"],
        json!([["/memories/d/x.md", "/memories/e/x.md"]])
    );
    let (_, refused) = show_json(db, "5");
    assert_eq!(refused["is_error"], true);
    assert_eq!(refused["change"], Value::Null);
    assert!(
        refused["answer"]
            .as_str()
            .expect("answer")
            .contains("would escape"),
        "{refused}"
    );
    let (_, deleted) = show_json(db, "6");
    assert_eq!(deleted["change"]["kind"], "deleted");
    assert_eq!(deleted["change"]["files"], json!(["/memories/e/x.md"]));
    let (_, junk) = show_json(db, "7");
    assert_eq!(
        junk["input"], "not json",
        "a rejected call shows its raw text"
    );
    // The text form shows the diff and says the answer was checked.
    let out = run_mnemo(&["show", "2", "--db", db], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("matches the recorded outcome"), "{text}");
    assert!(text.contains("\n-two\n+TWO\n"), "{text}");
}

#[test]
fn show_of_a_seq_past_the_log_says_where_the_log_ends() {
    let s = store_with_session();
    let db = s.path();
    let out = run_mnemo(&["show", "99", "--db", db.to_str().expect("utf-8")], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("there is no event 99: the log holds events 1 to 7"),
        "{err}"
    );
}

#[test]
fn show_flags_an_answer_the_log_does_not_prove() {
    let s = store_with_session();
    // Flip a bit of event 2's recorded result hash: the last 32 bytes of its header, which
    // starts at byte 109 after its u32 length (the record's byte table in docs/formats.md).
    tamper_record(&s.path(), 2, |record| {
        let header_len = u32::from_le_bytes(record[105..109].try_into().expect("4 bytes"));
        let at = 109 + header_len as usize - 32;
        record[at] ^= 1;
    });
    // The header is part of the chain hash: the record no longer proves itself, so nothing of
    // it is shown, and the refusal names it (tests/proof.rs has the payload cases).
    let db = s.path();
    let out = run_mnemo(
        &["show", "2", "--db", db.to_str().expect("utf-8"), "--json"],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("event 2 is not the event the log's chain recorded"),
        "{err}"
    );
}

#[test]
fn diff_lists_each_file_that_changed_between_two_events() {
    let s = store_with_session();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let out = run_mnemo(&["diff", "0", "3", "--db", db, "--json"], "");
    assert!(out.status.success(), "{out:?}");
    let files: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let kinds: Vec<(&str, &str)> = files
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or(""),
                f["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("/memories/a.md", "added"), ("/memories/d/x.md", "added")]
    );
    let out = run_mnemo(&["diff", "3", "6", "--db", db, "--json"], "");
    let files: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["kind"], "removed");
    let out = run_mnemo(&["diff", "4", "5", "--db", db], "");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no file under /memories differs"),
        "{out:?}"
    );
}

/// A carriage return is shown, not dropped: a CRLF file edited to LF does not print two
/// identical lines as a change.
#[test]
fn show_and_diff_show_a_carriage_return() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let calls = [
        json!({"command": "create", "path": "/memories/c.md", "file_text": "a\r\nb\n"}),
        json!({"command": "str_replace", "path": "/memories/c.md", "old_str": "a\r\n", "new_str": "a\n"}),
    ];
    let input: Vec<String> = calls.iter().map(Value::to_string).collect();
    let out = run_mnemo(&["tool", "--db", db], &input.join("\n"));
    assert!(out.status.success(), "{out:?}");
    let out = run_mnemo(&["diff", "1", "2", "--db", db], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("-a\\u{d}\n"), "{text}");
    assert!(text.contains("+a\n"), "{text}");
    let out = run_mnemo(&["show", "1", "--db", db], "");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("+a\\u{d}\n"),
        "{out:?}"
    );
}
