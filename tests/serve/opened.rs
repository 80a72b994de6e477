//! Opening a store a `mnemo serve` holds connects to it: the client keeps the API of an opened
//! store (the tool server, records, log, history, show, diff, verify, head, grants), every answer
//! is what a store opened here answers and what the server logged, a tool server whose settings
//! differ from the server's is refused with nothing recorded, a server that stops mid-session
//! is a clear error, and what needs the store in this process says so.

use mnemo::testing::history::LogQuery;
use mnemo::tool::Limits;
use mnemo::{Access, Durability, Error, MemPath, MnemoClient, MnemoMemoryToolServer, Profile, Seq};
use serde_json::{Value, json};

use super::{Server, session};
use crate::support::TempStore;

/// The request limit both sides use, small enough for a block over it to be cheap.
const LIMIT: u64 = 2048;

/// A client of `path` acting as `agent`, with the servers' durability.
fn open(path: &std::path::Path, agent: &str) -> MnemoClient {
    MnemoClient::builder(path)
        .agent_id(agent)
        .durability(Durability::Buffered)
        .open()
        .expect("open")
}

/// A tool server over `client` with the request limit the test servers use.
fn tool(client: MnemoClient) -> MnemoMemoryToolServer {
    let limits = Limits {
        max_request_bytes: LIMIT,
        ..Limits::default()
    };
    MnemoMemoryToolServer::builder(client)
        .limits(limits)
        .build()
        .expect("build")
}

/// What an event says apart from when it was logged (its time, and so its hashes) and its salt
/// (and so its result hash, a commitment keyed by the salt).
fn timeless(event: impl serde::Serialize) -> Value {
    let mut event = serde_json::to_value(event).expect("an event is JSON");
    for key in [
        "time",
        "time_ms",
        "hash",
        "prev_hash",
        "salt",
        "result_hash",
    ] {
        event.as_object_mut().expect("an object").remove(key);
    }
    event
}

/// Stops `server` with SIGTERM; it must exit cleanly.
fn stop(server: Server) {
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
}

fn limit_arg() -> String {
    LIMIT.to_string()
}

#[test]
fn a_served_store_opens_as_a_client_of_its_server_with_the_same_answers() {
    let served = TempStore::new();
    let local = TempStore::new();
    let server = Server::start(&served.path(), &["--max-request-bytes", &limit_arg()]);
    let remote = open(&served.path(), "planner");
    assert_eq!(remote.server_url(), Some(server.file.url.as_str()));
    let here = open(&local.path(), "planner");
    assert_eq!(here.server_url(), None);
    let (remote_tool, here_tool) = (tool(remote.clone()), tool(here.clone()));
    let mut calls = session();
    // Over the limit: refused and logged as a digest, with the block's id.
    calls.push(
        json!({"type": "tool_use", "id": "toolu_big", "name": "memory",
                      "input": {"command": "create", "path": "/memories/big.md",
                                "file_text": "x".repeat(4096)}}),
    );
    let mut answers = Vec::new();
    for call in &calls {
        let answer = remote_tool.handle(call);
        assert_eq!(answer, here_tool.handle(call), "{call}");
        answers.push(answer);
    }
    let line = b"not json \xff".to_vec();
    assert_eq!(
        remote_tool.handle_bytes(&line),
        here_tool.handle_bytes(&line)
    );
    assert_eq!(remote_tool.store_failures(), 0);
    let calls = calls.len() as u64 + 1;

    // Every answer is the one the server logged: its hash is the event's result hash.
    let logged = remote.log(&LogQuery::default()).expect("log");
    assert_eq!(logged.len() as u64, calls);
    for (answer, event) in answers.iter().zip(&logged) {
        let text = answer["content"].as_str().expect("content");
        assert!(
            crate::support::records_answer(event, text),
            "{answer}: {event:?}"
        );
        assert_eq!(event.agent, "planner");
    }
    let local_log = here.log(&LogQuery::default()).expect("log");
    for (answer, event) in answers.iter().zip(&local_log) {
        let text = answer["content"].as_str().expect("content");
        assert!(
            crate::support::records_answer(event, text),
            "{answer}: {event:?}"
        );
    }
    assert_eq!(
        logged.iter().cloned().map(timeless).collect::<Vec<_>>(),
        local_log.iter().cloned().map(timeless).collect::<Vec<_>>()
    );
    // The chain hashes are those of the server's store (checked by its verify below).
    assert_eq!(logged[1].prev_hash, logged[0].hash);

    // Records, history, show, diff, the past.
    let file = "/memories/done/notes.md";
    assert_eq!(
        remote.record(file).expect("record"),
        here.record(file).expect("record")
    );
    assert!(remote.record(file).expect("record").is_some());
    assert_eq!(
        remote.records_by_tag("memorytool").expect("records"),
        here.records_by_tag("memorytool").expect("records")
    );
    let path = MemPath::root(file).expect("a path");
    let history = remote.history(&path).expect("history");
    assert!(history.len() >= 4, "{history:?}");
    assert_eq!(
        history.into_iter().map(timeless).collect::<Vec<_>>(),
        here.history(&path)
            .expect("history")
            .into_iter()
            .map(timeless)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        remote.show(Seq(4)).expect("show").answer,
        here.show(Seq(4)).expect("show").answer
    );
    let top = MemPath::root("/memories").expect("root");
    assert_eq!(
        remote.diff(Seq(2), Seq(6), &top).expect("diff"),
        here.diff(Seq(2), Seq(6), &top).expect("diff")
    );
    let past = remote.records_at(Seq(3)).expect("records at 3");
    assert_eq!(past, here.records_at(Seq(3)).expect("records at 3"));
    assert_eq!(past[0].content, "# Notes\n- tea\n");

    // Grants: recorded through the server (as its operator), answered as here.
    let granted = remote
        .grant("reader", "/memories/done", Access::Read)
        .expect("grant");
    let granted_here = here
        .grant("reader", "/memories/done", Access::Read)
        .expect("grant");
    assert_eq!(
        (granted.text.as_str(), granted.is_error),
        (granted_here.text.as_str(), false)
    );
    assert_eq!(granted.seq, Seq(calls + 1));
    assert_eq!(
        remote.policy().expect("policy"),
        here.policy().expect("policy")
    );
    let refused = remote.revoke("reader", "/memories/none").expect("revoke");
    assert!(refused.is_error, "{}", refused.text);
    assert_eq!(
        refused.text,
        here.revoke("reader", "/memories/none")
            .expect("revoke")
            .text
    );
    // The reader's view through the server follows the grant.
    let reader = remote.with_agent("reader").expect("another agent");
    let readable = reader.records_by_tag("memorytool").expect("records");
    assert_eq!(
        readable.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        [file]
    );

    let head = remote.head().expect("head");
    assert_eq!(head.seq, Seq(calls + 2));
    let report = remote.verify_with(Some(head)).expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
    assert_eq!((report.events, report.head), (calls + 2, head));
    assert_eq!(report.meta_head, head);

    // What needs the store in this process says so, and what to use.
    let not_local = |e: Error, what: &str| {
        let text = e.to_string();
        assert!(
            matches!(e, Error::NotLocal { .. })
                && text.contains(what)
                && text.contains(&server.file.url),
            "{text}"
        );
    };
    not_local(
        remote.store().err().expect("not here"),
        "MnemoClient::store",
    );
    not_local(
        remote.read_store(|_| Ok(())).expect_err("not here"),
        "read_store",
    );
    not_local(
        remote.events(Seq(1)).err().expect("not here"),
        "MnemoClient::store",
    );
    not_local(
        remote.token("abc").expect_err("not here"),
        "MnemoClient::token",
    );
    let body = mnemo::Body::Rejected(mnemo::RejectedCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        input: "x".into(),
    });
    not_local(
        remote.call(None, body).expect_err("not here"),
        "MnemoClient::call",
    );
    assert_eq!(
        remote.head().expect("head"),
        head,
        "the refusals wrote nothing"
    );

    stop(server);
}

#[test]
fn a_tool_server_with_other_settings_than_the_servers_is_refused_and_records_nothing() {
    let served = TempStore::new();
    let server = Server::start(&served.path(), &["--max-request-bytes", &limit_arg()]);
    let view = json!({"type": "tool_use", "id": "toolu_1", "name": "memory",
                      "input": {"command": "view", "path": "/memories"}});
    let build = |client: MnemoClient, profile: Profile, root: &str| {
        MnemoMemoryToolServer::builder(client)
            .limits(Limits {
                max_request_bytes: LIMIT,
                ..Limits::default()
            })
            .profile(profile)
            .root(root)
            .build()
            .expect("build")
    };
    let path = served.path();
    let differing = [
        (
            build(open(&path, "a"), Profile::PythonSdk, "/memories"),
            "profile spec here, python-sdk",
        ),
        // Opened with the default durability, where the server's is buffered.
        (
            build(
                MnemoClient::open(&path, "a").expect("open"),
                Profile::Spec,
                "/memories",
            ),
            "durability buffered here, fsync",
        ),
        (
            build(open(&path, "a"), Profile::Spec, "/other"),
            "root /memories here, /other",
        ),
        (
            MnemoMemoryToolServer::new(open(&path, "a")),
            "max_request_bytes 2048 here",
        ),
    ];
    for (tool, what) in &differing {
        let answer = tool.handle(&view);
        let text = answer["content"].as_str().expect("content");
        assert_eq!(answer["is_error"], true, "{what}: {answer}");
        assert_eq!(answer["tool_use_id"], "toolu_1");
        assert!(
            text.contains("409") && text.contains(what) && text.contains("It was not applied"),
            "{what}: {text}"
        );
        assert_eq!(tool.store_failures(), 1);
    }
    let same = tool(open(&served.path(), "a"));
    assert_eq!(same.handle(&view).get("is_error"), None);
    assert_eq!(
        same.client().head().expect("head").seq,
        Seq(1),
        "only the call with the server's settings was recorded"
    );
    stop(server);
}

#[test]
fn a_server_that_stops_mid_session_is_a_clear_error_and_the_store_opens_here_again() {
    let served = TempStore::new();
    let server = Server::start(&served.path(), &["--max-request-bytes", &limit_arg()]);
    let first = open(&served.path(), "agent");
    let second = open(&served.path(), "other");
    assert_eq!(first.server_url(), second.server_url(), "one server");
    let tool = tool(first.clone());
    let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "a"});
    assert_eq!(tool.handle(&create).get("is_error"), None);
    stop(server);

    let answer = tool.handle(
        &json!({"type": "tool_use", "id": "toolu_9", "name": "memory",
                                    "input": {"command": "view", "path": "/memories"}}),
    );
    let text = answer["content"].as_str().expect("content");
    assert_eq!(
        (answer["is_error"].clone(), answer["tool_use_id"].clone()),
        (json!(true), json!("toolu_9"))
    );
    assert!(text.contains("cannot reach the mnemo server"), "{text}");
    assert_eq!(tool.store_failures(), 1);
    match first.head() {
        Err(Error::Server {
            reason,
            unreachable,
            ..
        }) => assert!(unreachable && reason.contains("cannot reach"), "{reason}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    assert!(second.records_by_tag("memorytool").is_err());

    // The server gone, the store opens in this process, once for every handle.
    drop((tool, first, second));
    let one = open(&served.path(), "agent");
    let two = open(&served.path(), "other");
    assert_eq!(one.server_url(), None);
    assert_eq!(one.head().expect("head"), two.head().expect("head"));
    assert_eq!(
        one.head().expect("head").seq,
        Seq(1),
        "the answered call is kept"
    );
    assert!(one.verify().expect("verify").is_intact());
}

#[test]
fn a_second_serve_of_a_served_store_names_the_server() {
    let served = TempStore::new();
    let server = Server::start(&served.path(), &[]);
    let second = std::process::Command::new(crate::support::mnemo_bin())
        .args(["serve", "--db"])
        .arg(served.path())
        .args(["--durability", "buffered"])
        .env_remove("MNEMO_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run a second mnemo serve");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("already served by the mnemo server at")
            && stderr.contains(&server.file.url),
        "{stderr}"
    );
    stop(server);
}
