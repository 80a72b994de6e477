//! Agent tokens over HTTP: every request's agent is its token's; no token, a wrong or a revoked
//! one is 401; an agent token naming another agent, or calling a route that is not the memory
//! tool, is 403; and none of them writes anything. The admin routes, with the operator's token.

use serde_json::{Value, json};

use super::{Reply, Server, request};
use crate::support::TempStore;

/// A request with `token` as the bearer and `extra` headers.
fn with_token(
    server: &Server,
    token: &str,
    method: &str,
    target: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let bearer = format!("Bearer {token}");
    let mut headers = vec![("Authorization", bearer.as_str())];
    headers.extend_from_slice(extra);
    request(server.addr(), method, target, &headers, body)
}

/// The log's length, asked with the operator's token.
fn events(server: &Server) -> u64 {
    server.json("/v1/head")["seq"].as_u64().expect("a seq")
}

/// The files under /memories, asked with the operator's token.
fn files(server: &Server) -> Vec<String> {
    server.json("/v1/ls")["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path").to_string())
        .collect()
}

/// Creates a token for `agent` through `POST /v1/tokens`; returns (id, token).
fn create_token(server: &Server, agent: &str) -> (String, String) {
    let body = json!({"agent": agent, "label": "test"}).to_string();
    let reply = server.call("POST", "/v1/tokens", body.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(answer["agent"], agent);
    (
        answer["id"].as_str().expect("id").to_string(),
        answer["token"].as_str().expect("token").to_string(),
    )
}

/// The JSON lines a route answers, asked with the operator's token.
fn json_lines(server: &Server, target: &str) -> Vec<Value> {
    let reply = server.call("GET", target, b"");
    assert_eq!(reply.status, 200, "{target}: {}", reply.text());
    reply
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn admin(server: &Server, method: &str, target: &str, body: Value) -> Value {
    let reply = server.call(method, target, body.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{method} {target}: {}", reply.text());
    serde_json::from_slice(&reply.body).expect("json")
}

fn assert_unauthorized(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 401, "{what}: {}", reply.text());
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{what}: {:?}",
        reply.headers
    );
}

fn create(path: &str) -> Vec<u8> {
    json!({"command": "create", "path": path, "file_text": "x\n"})
        .to_string()
        .into_bytes()
}

#[test]
fn an_agent_token_acts_only_as_its_agent_and_every_refusal_writes_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let (id, token) = create_token(&server, "agent-2");
    admin(
        &server,
        "POST",
        "/v1/acl",
        json!({"action": "grant", "agent": "agent-2", "prefix": "/memories/agent-2", "access": "read-write"}),
    );
    admin(
        &server,
        "POST",
        "/v1/acl",
        json!({"action": "revoke", "agent": "*", "prefix": "/"}),
    );
    let mut expected = events(&server);
    assert_eq!(expected, 3);

    // Its own memory: written, recorded under its agent.
    let mine = with_token(
        &server,
        &token,
        "POST",
        "/v1/memory",
        &[],
        &create("/memories/agent-2/a.md"),
    );
    assert_eq!(mine.status, 200, "{}", mine.text());
    assert!(!mine.text().contains("is_error"), "{}", mine.text());
    expected += 1;
    let same = with_token(
        &server,
        &token,
        "POST",
        "/v1/memory",
        &[("X-Mnemo-Agent", "agent-2")],
        &create("/memories/agent-2/b.md"),
    );
    assert_eq!(same.status, 200, "{}", same.text());
    expected += 1;
    // Naming another agent is refused, saying how a client names one.
    let other = with_token(
        &server,
        &token,
        "POST",
        "/v1/memory",
        &[("X-Mnemo-Agent", "agent-3")],
        &create("/memories/agent-3/c.md"),
    );
    assert_eq!(other.status, 403, "{}", other.text());
    assert!(
        other.text().contains("acts only as agent") && other.text().contains("mnemo tool --agent"),
        "{}",
        other.text()
    );
    assert_eq!(events(&server), expected);
    let log = server.call("GET", "/v1/log?agent=agent-2", b"");
    assert_eq!(log.text().lines().count(), 2, "{}", log.text());
    let tree = files(&server);
    assert_eq!(tree, ["/memories/agent-2/a.md", "/memories/agent-2/b.md"]);

    // Outside its grants: an error result, logged like any call; the tree is unchanged.
    let outside = with_token(
        &server,
        &token,
        "POST",
        "/v1/memory",
        &[],
        &create("/memories/plan.md"),
    );
    assert_eq!(outside.status, 200);
    let result: Value = serde_json::from_slice(&outside.body).expect("json");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Access denied"),
        "{result}"
    );
    expected += 1;
    assert_eq!(events(&server), expected, "the denied call is one event");
    assert_eq!(files(&server), tree, "the tree is unchanged");

    // Refused before any route ran: nothing written.
    let wrong_secret = format!("mnemo_{id}_{}", "0".repeat(64));
    let refusals: Vec<(Reply, u16, &str)> = vec![
        (
            request(
                server.addr(),
                "POST",
                "/v1/memory",
                &[],
                &create("/memories/agent-2/c.md"),
            ),
            401,
            "no token",
        ),
        (
            with_token(
                &server,
                &wrong_secret,
                "POST",
                "/v1/memory",
                &[],
                &create("/memories/agent-2/c.md"),
            ),
            401,
            "its id with a wrong secret",
        ),
        (
            with_token(
                &server,
                "mnemo_ffffffffffffffff_00",
                "POST",
                "/mcp",
                &[],
                b"{}",
            ),
            401,
            "an unknown token on /mcp",
        ),
        (
            with_token(
                &server,
                &token,
                "POST",
                "/v1/memory",
                &[("X-Mnemo-Agent", "planner")],
                &create("/memories/agent-2/c.md"),
            ),
            403,
            "claiming another agent",
        ),
        (
            with_token(
                &server,
                &token,
                "POST",
                "/mcp",
                &[("X-Mnemo-Agent", "planner")],
                b"{}",
            ),
            403,
            "claiming another agent on /mcp",
        ),
        (
            with_token(
                &server,
                &token,
                "POST",
                "/v1/memory",
                &[("Host", &format!("evil.example:{}", server.addr().port()))],
                &create("/memories/agent-2/c.md"),
            ),
            421,
            "a foreign Host",
        ),
    ];
    for (reply, status, what) in &refusals {
        assert_eq!(reply.status, *status, "{what}: {}", reply.text());
        if *status == 401 {
            assert_unauthorized(reply, what);
        }
    }
    // Every route but the memory tool is the operator's.
    let grant =
        json!({"action": "grant", "agent": "agent-2", "prefix": "/", "access": "read-write"})
            .to_string();
    let mint = json!({"agent": "agent-2"}).to_string();
    for (method, target, body) in [
        ("GET", "/v1/acl".to_string(), String::new()),
        ("POST", "/v1/acl".to_string(), grant),
        ("GET", "/v1/tokens".to_string(), String::new()),
        ("POST", "/v1/tokens".to_string(), mint),
        ("DELETE", format!("/v1/tokens/{id}"), String::new()),
        ("GET", "/v1/head".to_string(), String::new()),
        ("GET", "/v1/log".to_string(), String::new()),
        ("GET", "/v1/verify".to_string(), String::new()),
    ] {
        let reply = with_token(&server, &token, method, &target, &[], body.as_bytes());
        assert_eq!(reply.status, 403, "{method} {target}: {}", reply.text());
    }
    assert_eq!(
        events(&server),
        expected,
        "no refused request wrote an event"
    );
    assert_eq!(files(&server), tree);
    let acl = server.call("GET", "/v1/acl", b"");
    assert_eq!(acl.text().lines().count(), 1, "{}", acl.text());
    let tokens = server.call("GET", "/v1/tokens", b"");
    assert_eq!(tokens.text().lines().count(), 1, "{}", tokens.text());

    // Revoked while the server runs: the very next request is refused.
    let revoked = admin(&server, "DELETE", &format!("/v1/tokens/{id}"), Value::Null);
    expected += 1;
    assert_eq!(revoked["seq"], expected);
    let after = with_token(
        &server,
        &token,
        "POST",
        "/v1/memory",
        &[],
        &create("/memories/agent-2/d.md"),
    );
    assert_unauthorized(&after, "a revoked token");
    assert_eq!(events(&server), expected, "the revoked token wrote nothing");
    let again = server.call("DELETE", &format!("/v1/tokens/{id}"), b"");
    assert_eq!(again.status, 409, "{}", again.text());
    let unknown = server.call("DELETE", "/v1/tokens/0123", b"");
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    assert_eq!(events(&server), expected);
    assert_eq!(server.json("/v1/verify")["status"], "intact");

    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    assert!(
        !stderr.contains(&token),
        "a token is never logged: {stderr}"
    );
    assert!(stderr.contains("was revoked"), "{stderr}");
}

/// One JSON-RPC message to `/mcp` with `token`; returns the reply and the message it carried
/// (from a JSON body or the `data:` line of an event stream).
fn mcp(
    server: &Server,
    token: &str,
    session: Option<&str>,
    message: &Value,
) -> (Reply, Option<Value>) {
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    let reply = with_token(
        server,
        token,
        "POST",
        "/mcp",
        &headers,
        message.to_string().as_bytes(),
    );
    let text = reply.text();
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some());
    (reply, answer)
}

#[test]
fn an_agent_tokens_mcp_session_is_its_agent_and_ends_with_the_revoke() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let (id, token) = create_token(&server, "agent-2");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "token-test", "version": "0"}}});
    let (reply, answer) = mcp(&server, &token, None, &init);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(answer.is_some_and(|a| a["result"]["serverInfo"]["name"] == "mnemo"));
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (reply, _) = mcp(&server, &token, Some(&session), &initialized);
    assert!(reply.status < 300, "{}", reply.text());
    let call = |n: u64, path: &str| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "memory",
            "arguments": {"command": "create", "path": path, "file_text": "x\n"}}})
    };
    let (reply, answer) = mcp(&server, &token, Some(&session), &call(2, "/memories/m.md"));
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer = answer.expect("a tools/call answer");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let log = server.call("GET", "/v1/log?agent=agent-2", b"");
    assert_eq!(log.text().lines().count(), 1, "{}", log.text());
    let before = events(&server);

    admin(&server, "DELETE", &format!("/v1/tokens/{id}"), Value::Null);
    let (reply, _) = mcp(&server, &token, Some(&session), &call(3, "/memories/n.md"));
    assert_eq!(
        reply.status,
        401,
        "the session does not outlive the token: {}",
        reply.text()
    );
    assert_eq!(events(&server), before + 1, "only the revoke was written");
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn admin_routes_record_the_operator_and_refuse_bad_bodies_unwritten() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let granted = admin(
        &server,
        "POST",
        "/v1/acl",
        json!({"action": "grant", "agent": "planner", "prefix": "/memories/plans", "access": "read"}),
    );
    assert_eq!(granted["seq"], 1);
    assert_eq!(
        granted["result"],
        "Granted read on /memories/plans to agent planner"
    );
    let acl = json_lines(&server, "/v1/acl");
    assert!(
        acl.contains(&json!({"agent": "planner", "prefix": "/memories/plans", "access": "read"}))
    );
    // A revoke of a grant that is not there: logged with its error, answered 400.
    let missing = server.call(
        "POST",
        "/v1/acl",
        json!({"action": "revoke", "agent": "nobody", "prefix": "/x"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(missing.status, 400, "{}", missing.text());
    assert_eq!(events(&server), 2);
    for (target, body) in [
        ("/v1/acl", "not json"),
        (
            "/v1/acl",
            r#"{"action": "grant", "agent": "a", "prefix": "/", "access": "all"}"#,
        ),
        ("/v1/acl", r#"{"action": "promote", "agent": "a"}"#),
        ("/v1/tokens", r#"{"agent": "*"}"#),
        ("/v1/tokens", r#"{"agent": "a", "extra": 1}"#),
        ("/v1/tokens", r#"{}"#),
    ] {
        let reply = server.call("POST", target, body.as_bytes());
        assert_eq!(reply.status, 400, "{target} {body}: {}", reply.text());
        assert!(reply.text().contains("error"), "{}", reply.text());
    }
    assert_eq!(events(&server), 2, "bad bodies write nothing");
    let (_, token) = create_token(&server, "planner");
    let log = json_lines(&server, "/v1/log");
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|e| e["agent"] == "operator"), "{log:?}");
    let listed = server.call("GET", "/v1/tokens", b"").text();
    assert!(
        !listed.contains(&token[10..]),
        "the list never shows the token"
    );
    let (status, _) = server.stop();
    assert!(status.success());
}
