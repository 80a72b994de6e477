//! The gate before every route, against requests a client library would not send: two `Host`,
//! `Origin` or `Authorization` headers, a request target in absolute form naming another host, an admin body
//! sent in chunks past the server's request limit; and the routes an agent token may use.

use std::io::Write;
use std::net::TcpStream;

use serde_json::{Value, json};

use super::{Server, WAIT, read_reply, request};
use crate::support::TempStore;

/// The log's length, asked with the operator's token.
fn events(server: &Server) -> u64 {
    server.json("/v1/head")["seq"].as_u64().expect("a seq")
}

#[test]
fn two_hosts_two_origins_or_a_foreign_absolute_target_are_refused_and_write_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let own = server.addr().to_string();
    let bearer = server.bearer();
    let grant = json!({"action": "grant", "agent": "x", "prefix": "/memories", "access": "read"})
        .to_string();
    let origin = format!("http://{own}");
    // (target, headers besides the bearer, the status it gets)
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, u16);
    let cases: Vec<Case> = vec![
        (
            "/v1/acl".into(),
            vec![("Host", own.as_str()), ("Host", "evil.example")],
            400,
        ),
        (
            "/v1/acl".into(),
            vec![
                ("Origin", origin.as_str()),
                ("Origin", "http://evil.example"),
            ],
            400,
        ),
        ("http://evil.example/v1/acl".to_string(), vec![], 421),
        // Before: two Authorization headers were taken (the first won), where a proxy in front
        // could have checked the other one.
        (
            "/v1/acl".into(),
            vec![("Authorization", "Bearer not-the-token")],
            400,
        ),
    ];
    for (target, extra, status) in cases {
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend(extra.iter().copied());
        let reply = request(server.addr(), "POST", &target, &headers, grant.as_bytes());
        assert_eq!(reply.status, status, "{target} {extra:?}: {}", reply.text());
    }
    // The same grant, sent plainly, is taken: the refusals were for the headers.
    let own_target = format!("http://{own}/v1/acl");
    let reply = request(
        server.addr(),
        "POST",
        &own_target,
        &[("Authorization", bearer.as_str())],
        grant.as_bytes(),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(events(&server), 1, "only the plain grant was recorded");
}

#[test]
fn an_admin_body_sent_in_chunks_is_cut_off_at_the_request_limit() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &["--max-request-bytes", "1000"]);
    let prefix = format!("/memories/{}", "p".repeat(1500));
    let body =
        json!({"action": "grant", "agent": "x", "prefix": prefix, "access": "read"}).to_string();
    let mut stream = TcpStream::connect(server.addr()).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    let head = format!(
        "POST /v1/acl HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.addr(),
        server.bearer()
    );
    // The server may answer 413 and close while the rest of the body is still being sent, so
    // a write can fail with a broken pipe; the answer is read either way.
    let sent = (|| -> std::io::Result<()> {
        stream.write_all(head.as_bytes())?;
        for chunk in body.as_bytes().chunks(400) {
            write!(stream, "{:x}\r\n", chunk.len())?;
            stream.write_all(chunk)?;
            stream.write_all(b"\r\n")?;
        }
        stream.write_all(b"0\r\n\r\n")
    })();
    match read_reply(stream) {
        Ok(reply) => assert_eq!(reply.status, 413, "{}", reply.text()),
        // The connection was reset before the 413 could be read: only if the server cut the
        // body off (a write failed), never after taking all of it.
        Err(e) => assert!(sent.is_err(), "no reply to a whole body: {e}"),
    }
    assert_eq!(events(&server), 0, "nothing was recorded");
}

#[test]
fn an_agent_token_reaches_its_records_and_the_oversized_route_and_no_admin_route() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let issued = server.call(
        "POST",
        "/v1/tokens",
        json!({"agent": "planner"}).to_string().as_bytes(),
    );
    assert_eq!(issued.status, 200, "{}", issued.text());
    let token: serde_json::Value = serde_json::from_slice(&issued.body).expect("json");
    let bearer = format!("Bearer {}", token["token"].as_str().expect("token"));
    let auth = [("Authorization", bearer.as_str())];
    let made = request(
        server.addr(),
        "POST",
        "/v1/memory",
        &auth,
        json!({"command": "create", "path": "/memories/p.md", "file_text": "p"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(made.status, 200, "{}", made.text());
    let records = request(
        server.addr(),
        "GET",
        "/v1/records?tag=memorytool",
        &auth,
        b"",
    );
    assert_eq!(records.status, 200, "{}", records.text());
    assert!(
        records.text().contains("/memories/p.md"),
        "{}",
        records.text()
    );
    // Whom each token proves.
    let whoami = request(server.addr(), "GET", "/v1/whoami", &auth, b"");
    assert_eq!(whoami.status, 200, "{}", whoami.text());
    let who: Value = serde_json::from_slice(&whoami.body).expect("json");
    assert_eq!(who, json!({"principal": "agent", "agent": "planner"}));
    let who: Value =
        serde_json::from_slice(&server.call("GET", "/v1/whoami", b"").body).expect("json");
    assert_eq!(who["principal"], "operator", "{who}");
    let digest = json!({"len": 100_000_000u64, "hash": vec![0u8; 32], "prefix": "{\"command\""});
    let oversized = request(
        server.addr(),
        "POST",
        "/v1/memory/oversized",
        &auth,
        digest.to_string().as_bytes(),
    );
    assert_eq!(oversized.status, 200, "{}", oversized.text());
    // The hash as hex, as the route's error asks for it; text that is not 64 hex digits is 400.
    let hex = "ab".repeat(32);
    for (hash, status) in [(hex.as_str(), 200), ("not hex", 400)] {
        let digest = json!({"len": 100_000_000u64, "hash": hash, "prefix": "{\"command\""});
        let reply = request(
            server.addr(),
            "POST",
            "/v1/memory/oversized",
            &auth,
            digest.to_string().as_bytes(),
        );
        assert_eq!(reply.status, status, "{hash}: {}", reply.text());
        if status == 200 {
            let answer: Value = serde_json::from_slice(&reply.body).expect("a tool_result");
            assert!(
                answer["content"]
                    .as_str()
                    .expect("text")
                    .contains("over the limit"),
                "{answer}"
            );
        } else {
            assert!(reply.text().contains("hex"), "{}", reply.text());
        }
    }
    for (method, target) in [
        ("GET", "/v1/log"),
        ("GET", "/v1/trace?seq=1"),
        ("POST", "/v1/acl"),
        ("GET", "/v1/tokens"),
    ] {
        let reply = request(server.addr(), method, target, &auth, b"{}");
        assert_eq!(reply.status, 403, "{method} {target}: {}", reply.text());
    }
    // The token's create and its oversized calls, recorded under its agent.
    assert_eq!(events(&server), 4);
}

/// An unknown resource read without a session, in the 2026-07-28 protocol, is that protocol's
/// resource-not-found: `-32602` with the URI in `data` (a session of an earlier protocol gets
/// `-32002`, as `tests/mcp_client.py` checks). Before, README promised `-32002` for both.
#[test]
fn a_session_less_read_of_an_unknown_resource_is_that_protocols_not_found() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let bearer = server.bearer();
    let uri = "memory:///memories/nope.md";
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": uri,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string();
    let reply = request(
        server.addr(),
        "POST",
        "/mcp",
        &[
            ("Authorization", bearer.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "resources/read"),
            ("Mcp-Name", uri),
        ],
        body.as_bytes(),
    );
    let text = reply.text();
    let json_text = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(&text);
    let answer: serde_json::Value = serde_json::from_str(json_text).expect("a JSON-RPC answer");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["uri"], uri, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no memory file")),
        "{answer}"
    );
}

/// Before: no deadline for request headers and no cap on connections: connections that never
/// finished their headers held a descriptor each for ever, and enough of them starved every
/// client. Now at most `--max-connections` are open (its descriptors stay bounded: past the cap
/// a new connection takes the place of the one that has waited longest for its head), a
/// connection without a whole request head within `--header-timeout` is closed, and a legitimate
/// request behind them is answered.
#[test]
fn connections_that_never_finish_their_headers_are_closed_and_bounded() {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let store = TempStore::new();
    let server = Server::start(
        &store.path(),
        &["--header-timeout", "1", "--max-connections", "8"],
    );
    let pid = server.child.id();
    let descriptors = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("fd list")
            .count()
    };
    let before = descriptors();
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut stream = TcpStream::connect(server.addr()).expect("connect");
        stream
            .write_all(b"POST /v1/memory HTTP/1.1\r\nHost: ")
            .expect("half a head");
        slow.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let held = descriptors();
    assert!(
        held <= before + 8 + 2,
        "the server took {} descriptors for 40 half-sent heads",
        held - before
    );
    let started = Instant::now();
    let head = server.json("/v1/head");
    assert!(head["seq"].is_u64(), "{head}");
    assert!(
        started.elapsed() < WAIT,
        "a legitimate request waited {:?}",
        started.elapsed()
    );
    // The first eight were accepted and timed out: each is closed by the server.
    for stream in slow.iter_mut().take(8) {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        // Read to the end: the server closes it (perhaps after a 408), or resets it.
        let mut answered = Vec::new();
        if let Err(e) = stream.read_to_end(&mut answered) {
            assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "a half-sent head was kept open: {e}"
            );
        }
    }
}

/// `POST /mcp` of `message` with `bearer`, in the session `session` if given.
fn mcp(
    server: &Server,
    bearer: &str,
    session: Option<&str>,
    message: &serde_json::Value,
) -> super::Reply {
    let mut headers = vec![
        ("Authorization", bearer),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
    }
    request(
        server.addr(),
        "POST",
        "/mcp",
        &headers,
        message.to_string().as_bytes(),
    )
}

/// A new MCP session opened with `bearer`: its id.
fn open_session(server: &Server, bearer: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "gate-test", "version": "1"}}});
    let reply = mcp(server, bearer, None, &init);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let id = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let reply = mcp(server, bearer, Some(&id), &ready);
    assert!(reply.status < 300, "{}", reply.text());
    id
}

fn agent_bearer(server: &Server, agent: &str) -> String {
    let issued = server.call(
        "POST",
        "/v1/tokens",
        json!({ "agent": agent }).to_string().as_bytes(),
    );
    assert_eq!(issued.status, 200, "{}", issued.text());
    let issued: serde_json::Value = serde_json::from_slice(&issued.body).expect("json");
    format!("Bearer {}", issued["token"].as_str().expect("a token"))
}

/// Before: an MCP session was not bound to the token that opened it (another agent that learnt
/// its id could call in it or close it), and one token could open sessions without bound. Now
/// another principal's request naming the session is 404 and reaches nothing, and a token holds
/// at most 32 sessions: opening more closes its oldest.
#[test]
fn an_mcp_session_belongs_to_its_token_and_a_token_holds_a_bounded_number() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let alice = agent_bearer(&server, "alice");
    let mallory = agent_bearer(&server, "mallory");
    let session = open_session(&server, &alice);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let stolen = mcp(&server, &mallory, Some(&session), &list);
    assert_eq!(stolen.status, 404, "{}", stolen.text());
    assert!(
        stolen.text().contains("no such MCP session"),
        "{}",
        stolen.text()
    );
    let closed = request(
        server.addr(),
        "DELETE",
        "/mcp",
        &[
            ("Authorization", mallory.as_str()),
            ("Mcp-Session-Id", session.as_str()),
        ],
        b"",
    );
    assert_eq!(closed.status, 404, "{}", closed.text());
    let own = mcp(&server, &alice, Some(&session), &list);
    assert_eq!(own.status, 200, "{}", own.text());
    assert!(own.text().contains("\"memory\""), "{}", own.text());

    let mut opened: Vec<String> = (0..34).map(|_| open_session(&server, &mallory)).collect();
    let newest = opened.pop().expect("a session");
    let reply = mcp(&server, &mallory, Some(&newest), &list);
    assert_eq!(
        reply.status,
        200,
        "the newest session works: {}",
        reply.text()
    );
    for oldest in &opened[..2] {
        let reply = mcp(&server, &mallory, Some(oldest), &list);
        assert_eq!(
            reply.status,
            404,
            "the oldest sessions are closed: {}",
            reply.text()
        );
    }
    // Another token's session is not counted against this one's.
    let own = mcp(&server, &alice, Some(&session), &list);
    assert_eq!(own.status, 200, "{}", own.text());
}
