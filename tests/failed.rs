//! A call over 4 KiB that parses and then fails against the tree (a missing file, an `old_str`
//! not in it, a path too long) is logged as a digest that keeps its command, its paths and the
//! error it got, never whole; the error repeats a bounded part of the input; a retry of it keeps
//! the retry rules; `log` and `history` still name it; verify replays it.

use mnemo::event::{Refusal, RejectedDigest};
use mnemo::tool::{Limits, Semantics};
use mnemo::{Body, Seq};
use mnemo::{Event, EventHash, Header, MnemoMemoryToolServer, Outcome, Profile, ToolCall};
use serde_json::{Value, json};

use crate::support::{TempStore, dir_size, last_body, run_mnemo};

fn server(s: &TempStore, profile: Profile) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::builder(s.client())
        .profile(profile)
        .build()
        .expect("server")
}

/// The canonical bytes of `input` as the `Tool` body it parses to.
fn tool_payload(input: &Value, profile: Profile) -> Vec<u8> {
    let command = mnemo::testing::intake::parse_value(input, "/memories", profile)
        .command
        .expect("a valid call");
    let event = Event {
        seq: Seq(1),
        prev_hash: EventHash::ZERO,
        header: Header {
            time_ms: 0,
            agent: String::new(),
            tool_use_id: None,
            outcome: Outcome::of(false, ""),
            semantics: Semantics::CURRENT,
        },
        body: Body::Tool(ToolCall {
            root: "/memories".into(),
            profile,
            limits: Limits::default(),
            command,
        }),
        salt: None,
    };
    event.payload_bytes()
}

fn failed(body: Body) -> (RejectedDigest, String, Vec<String>, String) {
    match body {
        Body::RejectedDigest(d) => match d.refusal.clone() {
            Refusal::Failed {
                command,
                paths,
                text,
            } => (d, command, paths, text),
            other => panic!("not a failed call's digest: {other:?}"),
        },
        other => panic!("not a digest: {other:?}"),
    }
}

/// The calls that fail, each over 4 KiB, with the command and paths their digest must keep.
fn failing_calls() -> Vec<(Value, &'static str)> {
    let mib = "m".repeat(1 << 20);
    vec![
        (
            json!({"command": "view", "path": format!("/memories/{mib}")}),
            "view",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/missing.md", "old_str": mib, "new_str": "x"}),
            "str_replace",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": mib, "new_str": "x"}),
            "str_replace",
        ),
        (
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 99, "insert_text": mib}),
            "insert",
        ),
        (
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": format!("/memories/{mib}")}),
            "rename",
        ),
        (
            json!({"command": "create", "path": "/memories/../../etc/passwd", "file_text": mib}),
            "create",
        ),
    ]
}

#[test]
fn a_large_call_that_fails_is_logged_as_a_digest_with_a_bounded_answer() {
    for profile in [Profile::Spec, Profile::PythonSdk, Profile::TypescriptSdk] {
        let s = TempStore::new();
        let server = server(&s, profile);
        let created = server.handle(
            &json!({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"}),
        );
        assert!(created.get("is_error").is_none(), "{created}");
        server.client().flush_index().expect("flush");
        let before = dir_size(&s.path());
        let mut sent = 0;
        for (input, command) in failing_calls() {
            let out = server.handle(&input);
            assert_eq!(out["is_error"], true, "{profile:?} {command}: {out}");
            let text = out["content"].as_str().expect("content");
            assert!(
                text.len() < 8192,
                "{profile:?} {command}: the error repeats {} bytes",
                text.len()
            );
            let payload = tool_payload(&input, profile);
            sent += payload.len();
            let (d, logged_command, paths, logged_text) = failed(last_body(&server));
            assert_eq!(logged_command, command);
            assert_eq!(logged_text, text, "the digest keeps the answer");
            assert_eq!(d.input.len, payload.len() as u64);
            assert_eq!(d.input.hash, EventHash::of(&payload));
            assert!(d.input.prefix.len() <= 260, "{}", d.input.prefix);
            assert!(
                d.input
                    .prefix
                    .starts_with(&format!("{{\"command\":\"{command}\"")),
                "{}",
                d.input.prefix
            );
            assert!(
                paths.iter().all(|p| p.len() < 4200),
                "paths are kept bounded"
            );
        }
        server.client().flush_index().expect("flush");
        let grown = dir_size(&s.path()) - before;
        assert!(
            grown < sent as u64 / 4,
            "{profile:?}: {sent} bytes of failing calls grew the store by {grown}"
        );
        let report = server.client().verify().expect("verify");
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(report.events, 1 + failing_calls().len() as u64);
        // A small call that fails is still logged whole, so replay re-runs it.
        server.handle(&json!({"command": "view", "path": "/memories/nope"}));
        assert!(matches!(last_body(&server), Body::Tool(_)));
    }
}

#[test]
fn an_echo_over_4_kib_shows_its_start_and_length() {
    let s = TempStore::new();
    let server = server(&s, Profile::Spec);
    server.handle(&json!({"command": "create", "path": "/memories/a.md", "file_text": "abc\n"}));
    let exact = "q".repeat(4096);
    let out = server.handle(
        &json!({"command": "str_replace", "path": "/memories/a.md", "old_str": exact, "new_str": ""}),
    );
    assert_eq!(
        out["content"],
        format!(
            "No replacement was performed, old_str `{exact}` did not appear verbatim in /memories/a.md."
        ),
        "up to 4 KiB the old_str is repeated whole, as the SDK does"
    );
    let long = format!("{}{}", "é".repeat(200), "z".repeat(5000));
    let out = server.handle(
        &json!({"command": "str_replace", "path": "/memories/a.md", "old_str": long, "new_str": ""}),
    );
    // 256 bytes, cut back to a character boundary: 128 two-byte characters.
    let head = "é".repeat(128);
    assert_eq!(
        out["content"],
        format!(
            "No replacement was performed, old_str `{head}… ({} bytes in all)` did not appear verbatim in /memories/a.md.",
            long.len()
        )
    );
}

#[test]
fn a_retry_of_a_large_failed_call_is_run_again_and_a_changed_one_is_refused() {
    let s = TempStore::new();
    let server = server(&s, Profile::PythonSdk);
    let big = "r".repeat(10_000);
    let block = |old: &str| {
        json!({"type": "tool_use", "id": "toolu_big", "name": "memory",
            "input": {"command": "str_replace", "path": "/memories/gone.md", "old_str": old, "new_str": "x"}})
    };
    let first = server.handle(&block(&big));
    assert_eq!(first["is_error"], true);
    failed(last_body(&server));
    // The same id and input: a retry, run again (it changed nothing), with the same answer.
    let again = server.handle(&block(&big));
    assert_eq!(
        again, first,
        "a retry of a failed call gets its answer again"
    );
    failed(last_body(&server));
    // The file appears; the retry now runs against it and fails for another reason.
    server.handle(&json!({"command": "create", "path": "/memories/gone.md", "file_text": "x\n"}));
    let third = server.handle(&block(&big));
    assert!(
        third["content"]
            .as_str()
            .expect("text")
            .contains("did not appear verbatim"),
        "{third}"
    );
    // The same id with another input is refused as a different call.
    let other = server.handle(&block(&"s".repeat(10_000)));
    let text = other["content"].as_str().expect("text");
    assert!(
        text.contains("was already used by agent") && text.contains("for a different call"),
        "{other}"
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact() && report.events == 5, "{report:?}");
    // Replay from scratch agrees: reopen and verify again.
    let db = s.path();
    drop(server);
    let client = mnemo::MnemoClient::open(&db, "auditor").expect("reopen");
    assert!(client.verify().expect("verify").is_intact());
}

#[test]
fn log_and_history_name_a_large_failed_call_by_its_command_and_path() {
    let s = TempStore::new();
    let db = s.path();
    {
        let server = server(&s, Profile::Spec);
        server.handle(
            &json!({"command": "create", "path": "/memories/notes.md", "file_text": "a\n"}),
        );
        server.handle(
            &json!({"command": "str_replace", "path": "/memories/notes.md",
            "old_str": "n".repeat(9000), "new_str": "b"}),
        );
        server.client().flush_index().expect("flush");
    }
    let db = db.to_str().expect("utf-8");
    let out = run_mnemo(&["log", "--db", db, "--json"], "");
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["command"], "str_replace");
    assert_eq!(lines[1]["paths"], json!(["/memories/notes.md"]));
    assert_eq!(lines[1]["is_error"], true);
    let out = run_mnemo(&["history", "--db", db, "/memories/notes.md", "--json"], "");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}
