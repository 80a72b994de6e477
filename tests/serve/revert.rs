//! `POST /v1/revert` and `mnemo revert` on a served store: only the operator reverts, a dry run
//! logs nothing, and the revert's record and calls are the server's events, verified.

use serde_json::{Value, json};

use super::{Server, request};
use crate::support::run_mnemo;

#[test]
fn only_the_operator_reverts_a_served_store_and_the_cli_goes_through_its_server() {
    let store = crate::support::TempStore::new();
    let server = Server::start(&store.path(), &[]);
    for input in [
        json!({"command": "create", "path": "/memories/plan.md", "file_text": "step 1\n"}),
        json!({"command": "str_replace", "path": "/memories/plan.md", "old_str": "step 1", "new_str": "WRONG"}),
        json!({"command": "create", "path": "/memories/later.md", "file_text": "later\n"}),
    ] {
        assert_eq!(server.memory(&input).status, 200);
    }
    let head = |server: &Server| server.json("/v1/head")["seq"].as_u64().expect("seq");
    let issued: Value = serde_json::from_slice(
        &server
            .call(
                "POST",
                "/v1/tokens",
                json!({"agent": "planner"}).to_string().as_bytes(),
            )
            .body,
    )
    .expect("json");
    let bearer = format!("Bearer {}", issued["token"].as_str().expect("token"));
    let before = head(&server);
    let wanted = json!({"to": 1, "path": "/memories/plan.md"}).to_string();
    let reply = request(
        server.addr(),
        "POST",
        "/v1/revert",
        &[("Authorization", &bearer)],
        wanted.as_bytes(),
    );
    assert_eq!(reply.status, 403, "{}", reply.text());
    for (body, says) in [
        (json!({"path": "/memories"}), "say what to put back"),
        (json!({"to": 99}), "there is no event 99"),
        (json!({"to": 1, "seq": 2}), "JSON such as"),
    ] {
        let reply = server.call("POST", "/v1/revert", body.to_string().as_bytes());
        assert_eq!(reply.status, 400, "{body}: {}", reply.text());
        assert!(reply.text().contains(says), "{body}: {}", reply.text());
    }
    let dry = json!({"to": 1, "path": "/memories/plan.md", "dry_run": true}).to_string();
    let reply = server.call("POST", "/v1/revert", dry.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let plan: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(plan["undone"], json!([2]), "{plan}");
    assert_eq!(plan["record"], Value::Null);
    assert_eq!(head(&server), before, "a dry run logs nothing");

    // The CLI on --db reaches the store through its server: planned, then made.
    let db = store.path().to_str().expect("utf-8").to_string();
    let revert = |flag: &str| {
        let args = [
            "revert",
            "--db",
            &db,
            "--to",
            "1",
            "--path",
            "/memories/plan.md",
            flag,
        ];
        let out = run_mnemo(&args, "");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = revert("--dry-run");
    assert!(
        text.starts_with("revert of /memories/plan.md to seq 1: undoes 1 event (2) in 1 call"),
        "{text}"
    );
    let done: Value = serde_json::from_str(&revert("--json")).expect("json");
    assert_eq!(done["record"], json!(before + 1), "{done}");
    assert_eq!(done["last"], json!(before + 2), "{done}");
    let cat = |path: &str| {
        server
            .call("GET", &format!("/v1/cat?path={path}"), b"")
            .text()
    };
    assert_eq!(cat("/memories/plan.md"), "step 1\n");
    assert_eq!(cat("/memories/later.md"), "later\n", "nothing else changed");
    let report = server.json("/v1/verify");
    assert_eq!(report["status"], "intact", "{report}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
}
