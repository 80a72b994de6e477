//! The local socket (Linux): the server file names it, `mnemo tool`'s calls go there and answer
//! as over HTTP, and it lets in what the HTTP gate lets in and nothing else: the server proves
//! itself before a client sends its token, a wrong token or a revoked one is refused, a process
//! that took the name of a dead server learns no token, and an idle connection does not keep a
//! server from stopping.

#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use mnemo::testing::discovery::{ServerFile, identity_proof};
use mnemo::testing::disk::DirId;
use serde_json::{Value, json};

use super::{db_arg, mnemo, server_of, signal, stop_server, tool, wait_for};
use crate::support::TempStore;

const CHALLENGE: u8 = 1;
const PROOF: u8 = 2;
const HELLO: u8 = 3;
const ANSWER: u8 = 4;
const REFUSAL: u8 = 5;
const CALL: u8 = 6;

fn frame(stream: &mut UnixStream, kind: u8, payload: &[u8]) {
    let mut bytes = vec![kind];
    bytes.extend_from_slice(&u32::try_from(payload.len()).expect("len").to_le_bytes());
    bytes.extend_from_slice(payload);
    stream.write_all(&bytes).expect("write a frame");
}

/// The next frame, or `None` when the other side closed the connection.
fn next(stream: &mut UnixStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

fn connect(file: &ServerFile) -> UnixStream {
    let name = file
        .socket
        .as_ref()
        .expect("the server file names a local socket");
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let stream = UnixStream::connect_addr(&address).expect("connect to the local socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
}

/// A connection that checked the server's proof and said hello with `token` (and `agent`);
/// the server's answer to the hello.
fn hello(
    db: &Path,
    file: &ServerFile,
    token: &str,
    agent: Option<&str>,
) -> (UnixStream, (u8, Value)) {
    let mut stream = connect(file);
    let challenge = "0123456789abcdef".repeat(4);
    frame(&mut stream, CHALLENGE, challenge.as_bytes());
    let (kind, proof) = next(&mut stream).expect("a proof");
    assert_eq!(kind, PROOF);
    let expected = identity_proof(&file.token, &challenge, DirId::of(db).expect("dir id"));
    assert_eq!(String::from_utf8_lossy(&proof), expected.to_hex().as_str());
    let hello = json!({"token": token, "agent": agent});
    frame(&mut stream, HELLO, hello.to_string().as_bytes());
    let (kind, body) = next(&mut stream).expect("an answer to the hello");
    (stream, (kind, serde_json::from_slice(&body).expect("JSON")))
}

fn call(stream: &mut UnixStream, input: &Value) -> Option<(u8, Value)> {
    frame(stream, CALL, input.to_string().as_bytes());
    let (kind, body) = next(stream)?;
    Some((kind, serde_json::from_slice(&body).expect("JSON")))
}

fn http_call(file: &ServerFile, input: &Value) -> Value {
    let client = mnemo::RemoteClient::new(file.url.clone(), file.token.clone());
    client.handle(input).expect("an HTTP answer")
}

#[test]
fn calls_on_the_local_socket_answer_as_over_http_and_are_recorded_under_their_agent() {
    let store = TempStore::new();
    let db = &store.path();
    let mut session = tool(db, &[]);
    let created = session
        .call(r#"{"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"}"#);
    assert_eq!(created["is_error"], Value::Null, "{created}");
    let file = server_of(db);
    let (mut stream, (kind, _)) = hello(db, &file, &file.token, Some("socket-agent"));
    assert_eq!(kind, ANSWER, "the operator's token is let in");
    let view = json!({"type": "tool_use", "id": "toolu_view", "name": "memory",
        "input": {"command": "view", "path": "/memories/a.md"}});
    let (kind, over_socket) = call(&mut stream, &view).expect("an answer");
    assert_eq!(kind, ANSWER);
    assert_eq!(over_socket, http_call(&file, &view));
    assert_eq!(over_socket, session.call(&view.to_string()));
    // Bytes that are no JSON are a rejected call, answered as `mnemo tool` answers them.
    frame(&mut stream, CALL, b"\xff not json");
    let (kind, body) = next(&mut stream).expect("an answer");
    assert_eq!(kind, ANSWER);
    let rejected: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(rejected["is_error"], true, "{rejected}");
    drop(stream);
    drop(session);
    let log = mnemo(&["log", "--db", db_arg(db), "--json"], &[], b"");
    let lines: Vec<Value> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let agents: Vec<&str> = lines.iter().filter_map(|l| l["agent"].as_str()).collect();
    assert_eq!(
        agents.iter().filter(|a| **a == "socket-agent").count(),
        2,
        "the view and the rejected call are recorded under the hello's agent: {agents:?}"
    );
    stop_server(db);
}

#[test]
fn a_wrong_or_revoked_token_is_refused_and_a_hello_without_a_challenge_is_not_answered() {
    let store = TempStore::new();
    let db = &store.path();
    let session = tool(db, &[]);
    let file = server_of(db);
    let (_, (kind, body)) = hello(db, &file, &"0".repeat(64), None);
    assert_eq!(kind, REFUSAL);
    assert_eq!(body["status"], 401, "{body}");

    // A hello first, before the server proved itself: the connection is closed unanswered.
    let mut stream = connect(&file);
    let early = json!({"token": file.token});
    frame(&mut stream, HELLO, early.to_string().as_bytes());
    assert!(
        next(&mut stream).is_none(),
        "no answer to a hello before the challenge"
    );

    // An agent token works until it is revoked, then its next call is refused.
    let created = mnemo(
        &["token", "create", "--agent", "planner", "--db", db_arg(db)],
        &[],
        b"",
    );
    let printed = String::from_utf8_lossy(&created.stdout).into_owned();
    let token = printed.lines().last().expect("the token, last").trim();
    // `mnemo_ID_SECRET`
    let id = token.split('_').nth(1).expect("an id");
    let (mut stream, (kind, _)) = hello(db, &file, token, None);
    assert_eq!(kind, ANSWER);
    let view = json!({"command": "view", "path": "/memories"});
    let (kind, _) = call(&mut stream, &view).expect("an answer");
    assert_eq!(kind, ANSWER, "the agent's token is let in");
    let revoked = mnemo(&["token", "revoke", id, "--db", db_arg(db)], &[], b"");
    assert!(revoked.status.success(), "{revoked:?}");
    let (kind, body) = call(&mut stream, &view).expect("a refusal");
    assert_eq!(kind, REFUSAL, "{body}");
    assert_eq!(body["status"], 401, "{body}");
    drop(session);
    stop_server(db);
}

#[test]
fn a_process_on_a_dead_servers_socket_name_learns_no_token() {
    let store = TempStore::new();
    let db = &store.path();
    let mut session = tool(db, &[]);
    session.call(r#"{"command": "view", "path": "/memories"}"#);
    let file = server_of(db);
    signal("-KILL", file.pid);
    wait_for(
        || !Path::new(&format!("/proc/{}", file.pid)).exists(),
        "the server to die",
    );
    drop(session);
    // Whoever binds the name now gets the next connection of a client that kept the file.
    let name = file.socket.clone().expect("a socket name");
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let squatter = UnixListener::bind_addr(&address).expect("bind the dead server's name");
    let heard = std::thread::spawn(move || {
        let (mut stream, _) = squatter.accept().expect("a client");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut frames = Vec::new();
        if let Some(challenge) = next(&mut stream) {
            frames.push(challenge);
            // A proof it cannot make.
            frame(&mut stream, PROOF, "ab".repeat(32).as_bytes());
            while let Some(more) = next(&mut stream) {
                frames.push(more);
            }
        }
        frames
    });
    let client = file.client(db);
    let answer = client.handle(&json!({"command": "view", "path": "/memories"}));
    assert!(
        answer.is_err(),
        "the dead server answers nothing: {answer:?}"
    );
    drop(client);
    let frames = heard.join().expect("squatter");
    assert_eq!(
        frames.iter().map(|(kind, _)| *kind).collect::<Vec<_>>(),
        vec![CHALLENGE],
        "the squatter got the challenge and nothing after it"
    );
    let token = file.token.as_bytes();
    assert!(
        !frames
            .iter()
            .any(|(_, body)| body.windows(token.len()).any(|w| w == token)),
        "the token never reached the squatter"
    );
}

#[test]
fn an_idle_connection_does_not_keep_a_server_from_stopping() {
    let store = TempStore::new();
    let db = &store.path();
    let mut session = tool(db, &["--idle-exit", "1"]);
    session.call(r#"{"command": "view", "path": "/memories"}"#);
    let file = server_of(db);
    let (mut stream, (kind, _)) = hello(db, &file, &file.token, None);
    assert_eq!(kind, ANSWER);
    assert!(session.finish().success());
    // The session is gone; the connection stays open and idle, and the server idles out.
    wait_for(
        || !ServerFile::path(db).exists(),
        "the server to stop with an idle connection open",
    );
    assert!(
        next(&mut stream).is_none(),
        "the server closed the connection"
    );
}
