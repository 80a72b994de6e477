//! Access control: grants kept as chained admin events, enforced under the tool surface, listings
//! that show only what an agent may read, and the `mnemo acl` commands.

use mnemo::{Access, MnemoClient, MnemoMemoryToolServer};
use serde_json::{Value, json};

use crate::support::{TempStore, call, run_mnemo};

fn restricted(s: &TempStore) -> (MnemoClient, MnemoMemoryToolServer, MnemoMemoryToolServer) {
    let operator = s.client();
    let planner = MnemoMemoryToolServer::new(operator.with_agent("planner").expect("agent"));
    call(
        &planner,
        json!({"command": "create", "path": "/memories/plan.md", "file_text": "secret plan"}),
    );
    call(
        &planner,
        json!({"command": "create", "path": "/memories/agent-1/notes.md", "file_text": "one"}),
    );
    for (agent, prefix, access) in [
        ("planner", "/", Access::ReadWrite),
        ("agent-2", "/memories/agent-2", Access::ReadWrite),
        ("agent-2", "/memories/shared", Access::Read),
    ] {
        let r = operator.grant(agent, prefix, access).expect("grant");
        assert!(!r.is_error, "{}", r.text);
    }
    let r = operator.revoke("*", "/").expect("revoke");
    assert_eq!(r.text, "Revoked the grant on / from every agent");
    let agent2 = MnemoMemoryToolServer::new(operator.with_agent("agent-2").expect("agent"));
    (operator, planner, agent2)
}

#[test]
fn a_fresh_store_lets_every_agent_do_everything() {
    let s = TempStore::new();
    let client = s.client();
    let grants = client.policy().expect("policy");
    assert_eq!(grants.grants().len(), 1);
    assert_eq!(grants.grants()[0].agent, "*");
    assert_eq!(grants.grants()[0].prefix.to_string(), "/");
    assert_eq!(grants.grants()[0].access, Access::ReadWrite);
}

#[test]
fn a_restricted_agent_is_refused_everywhere_outside_its_grant() {
    let s = TempStore::new();
    let (_operator, planner, agent2) = restricted(&s);
    call(
        &planner,
        json!({"command": "create", "path": "/memories/shared/readme.md", "file_text": "shared"}),
    );
    assert_eq!(
        call(
            &agent2,
            json!({"command": "create", "path": "/memories/agent-2/todo.md", "file_text": "x"})
        ),
        (
            "File created successfully at: /memories/agent-2/todo.md".to_string(),
            false
        )
    );
    let outside: Vec<Value> = vec![
        json!({"command": "view", "path": "/memories/plan.md"}),
        json!({"command": "view", "path": "/memories/agent-1"}),
        json!({"command": "create", "path": "/memories/x.md", "file_text": "x"}),
        json!({"command": "create", "path": "/memories/shared/x.md", "file_text": "x"}),
        json!({"command": "str_replace", "path": "/memories/plan.md", "old_str": "secret", "new_str": "public"}),
        json!({"command": "insert", "path": "/memories/plan.md", "insert_line": 0, "insert_text": "x"}),
        json!({"command": "delete", "path": "/memories/plan.md"}),
        json!({"command": "delete", "path": "/memories/agent-1"}),
        json!({"command": "rename", "old_path": "/memories/plan.md", "new_path": "/memories/agent-2/plan.md"}),
        json!({"command": "rename", "old_path": "/memories/agent-2/todo.md", "new_path": "/memories/todo.md"}),
    ];
    for input in &outside {
        let (text, err) = call(&agent2, input.clone());
        assert!(err, "{input}: {text}");
        assert!(
            text.starts_with("Error: Access denied: agent agent-2 has no read"),
            "{input}: {text}"
        );
    }
    // A missing file outside the grant is denied, not reported missing: no probing.
    let (text, _) = call(
        &agent2,
        json!({"command": "view", "path": "/memories/nope.md"}),
    );
    assert_eq!(
        text,
        "Error: Access denied: agent agent-2 has no read grant covering /memories/nope.md"
    );
    // Reading the shared, read-only subtree works.
    let (text, err) = call(
        &agent2,
        json!({"command": "view", "path": "/memories/shared/readme.md"}),
    );
    assert!(!err, "{text}");
    // The listing of the root shows only what agent-2 may see.
    let (text, err) = call(&agent2, json!({"command": "view", "path": "/memories"}));
    assert!(!err);
    assert_eq!(
        text,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories\n4K\t/memories/agent-2/\n1B\t/memories/agent-2/todo.md\n4K\t/memories/shared/\n6B\t/memories/shared/readme.md"
    );
    // The client's record listing is filtered the same way; the planner sees everything.
    let paths: Vec<String> = agent2
        .client()
        .records_by_tag("memorytool")
        .expect("records")
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(
        paths,
        ["/memories/agent-2/todo.md", "/memories/shared/readme.md"]
    );
    assert_eq!(
        agent2.client().record("/memories/plan.md").expect("read"),
        None
    );
    assert_eq!(
        planner
            .client()
            .records_by_tag("memorytool")
            .expect("records")
            .len(),
        4
    );
    // Nothing outside was changed, and the whole history, policy included, verifies.
    assert_eq!(
        planner
            .client()
            .record("/memories/plan.md")
            .expect("read")
            .expect("exists")
            .content,
        "secret plan"
    );
    let report = planner.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
}

#[test]
fn denials_are_in_the_log_and_the_cli_manages_grants() {
    let s = TempStore::new();
    {
        let (_operator, _planner, agent2) = restricted(&s);
        call(
            &agent2,
            json!({"command": "delete", "path": "/memories/plan.md"}),
        );
    }
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let log = run_mnemo(&["log", "--db", db, "--agent", "agent-2", "--json"], "");
    let events: Vec<Value> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["command"], "delete");
    assert_eq!(events[0]["is_error"], true);

    let list = run_mnemo(&["acl", "list", "--db", db, "--json"], "");
    let grants: Vec<Value> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(grants.len(), 3, "{grants:?}");
    let grant = run_mnemo(
        &[
            "acl",
            "grant",
            "--db",
            db,
            "--agent",
            "agent-3",
            "--prefix",
            "/memories/agent-3",
            "--access",
            "read",
        ],
        "",
    );
    assert!(
        grant.status.success(),
        "{}",
        String::from_utf8_lossy(&grant.stderr)
    );
    assert!(
        String::from_utf8_lossy(&grant.stdout)
            .starts_with("Granted read on /memories/agent-3 to agent agent-3")
    );
    let missing = run_mnemo(
        &[
            "acl",
            "revoke",
            "--db",
            db,
            "--agent",
            "nobody",
            "--prefix",
            "/memories",
        ],
        "",
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("has no grant on /memories"));
    let bad = run_mnemo(
        &[
            "acl", "grant", "--db", db, "--agent", "a", "--prefix", "relative", "--access", "read",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(2));
    let verify = run_mnemo(&["verify", "--db", db], "");
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let log = run_mnemo(&["log", "--db", db, "--json", "--from", "1"], "");
    let admin = String::from_utf8_lossy(&log.stdout)
        .lines()
        .filter(|l| l.contains("\"acl-"))
        .count();
    assert_eq!(
        admin, 7,
        "3 grants and a revoke, then the CLI's grant, failed revoke and refused grant"
    );
}

#[test]
fn admin_commands_on_a_mistyped_db_make_no_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("typo.db");
    let db = missing.to_str().expect("utf-8");
    for args in [
        vec![
            "acl",
            "grant",
            "--agent",
            "a",
            "--prefix",
            "/memories",
            "--access",
            "read",
        ],
        vec!["acl", "revoke", "--agent", "a", "--prefix", "/memories"],
        vec!["token", "create", "--agent", "a"],
        vec!["token", "revoke", "0123456789abcdef"],
    ] {
        let mut args = args.clone();
        args.extend(["--db", db]);
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no store at"), "{args:?}: {stderr}");
        assert!(
            !missing.exists(),
            "{args:?} made a store at the mistyped path"
        );
    }
}

/// An agent granted only `/memories/zone/inner` is not told that a file it may not read is at
/// `/memories/zone`: not by the memory tool's `create` under it, nor by an API write (issue 43).
/// The store verifies, its events answered under semantics 5.
#[test]
fn no_answer_names_a_file_the_agent_may_not_read() {
    let s = TempStore::new();
    let operator = s.client();
    let owner = MnemoMemoryToolServer::new(operator.clone());
    call(
        &owner,
        json!({"command": "create", "path": "/memories/zone", "file_text": "the zone's secret"}),
    );
    let r = operator
        .grant("zoned", "/memories/zone/inner", Access::ReadWrite)
        .expect("grant");
    assert!(!r.is_error, "{}", r.text);
    let r = operator.revoke("*", "/").expect("revoke");
    assert!(!r.is_error, "{}", r.text);
    let zoned = operator.with_agent("zoned").expect("agent");
    let tool = MnemoMemoryToolServer::new(zoned.clone());
    let answer = tool.handle(
        &json!({"command": "create", "path": "/memories/zone/inner/x.md", "file_text": "x"}),
    );
    let text = answer["content"].as_str().expect("text");
    assert_eq!(answer["is_error"], true, "{text}");
    let api = zoned
        .call(
            None,
            mnemo::Body::Api(mnemo::event::ApiWrite::Create {
                path: "/memories/zone/inner/y.md".into(),
                content: "y".into(),
            }),
        )
        .expect("answered");
    assert!(api.is_error, "{}", api.text);
    for said in [text, api.text.as_str()] {
        // Only the path it sent, and nothing of the file above it.
        let rest = said
            .replace("/memories/zone/inner/x.md", "")
            .replace("/memories/zone/inner/y.md", "");
        assert!(!rest.contains("/memories/zone"), "{said}");
    }
    let report = operator.verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}
