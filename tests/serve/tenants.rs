//! One tenant must not lock out the rest: slow bodies of one agent token, a flood of unfinished
//! heads, a body below the minimum rate, and bodies past the memory budget, each while other
//! principals' requests are still answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Reply, Server, read_reply};
use crate::support::TempStore;

/// How long a request that must get through may take: generous, as an honest one takes
/// milliseconds (the attacks below would hold it for 30 s or more).
const PROMPT: Duration = Duration::from_secs(5);

/// A new agent token of `agent`, as a bearer header value.
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

/// A memory call of `len` bytes: a view, padded with spaces.
fn padded_view(len: usize) -> Vec<u8> {
    let mut body = json!({"command": "view", "path": "/memories"})
        .to_string()
        .into_bytes();
    assert!(body.len() <= len);
    body.resize(len, b' ');
    body
}

/// The head of `POST /v1/memory` with `bearer` and a body of `len` bytes (`expect`: asks for
/// `100 Continue` first).
fn memory_head(addr: SocketAddr, bearer: &str, len: usize, expect: bool) -> String {
    let mut head = format!(
        "POST /v1/memory HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\nContent-Length: {len}\r\n"
    );
    if expect {
        head.push_str("Expect: 100-continue\r\n");
    }
    head.push_str("\r\n");
    head
}

/// One request, answered within `within` (retried while the connection is closed or reset
/// before an answer, as a client's pool does), or an error.
fn prompt_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    bearer: &str,
    body: &[u8],
    within: Duration,
) -> std::io::Result<Reply> {
    let started = Instant::now();
    loop {
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{method} {target} was not answered within {within:?}"),
            ));
        }
        let attempt = (|| {
            let mut stream = TcpStream::connect(addr)?;
            stream.set_read_timeout(Some(left))?;
            let head = format!(
                "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {bearer}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes())?;
            stream.write_all(body)?;
            read_reply(stream)
        })();
        match attempt {
            Ok(reply) => return Ok(reply),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(e);
            }
            // Closed or reset before an answer: the connection lost its place; a client retries.
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// `POST /v1/memory` of `body` with `bearer`, asking for `100 Continue` before the body is sent
/// (as a client sending a large body does): the answer.
fn expect_request(addr: SocketAddr, bearer: &str, body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let head = memory_head(addr, bearer, body.len(), true)
        .replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("head");
    let mut peek = [0u8; 12];
    while stream.peek(&mut peek).expect("an answer") < peek.len() {
        std::thread::sleep(Duration::from_millis(5));
    }
    if peek.starts_with(b"HTTP/1.1 100") {
        read_continue(&stream);
        stream.write_all(body).expect("the body");
    }
    read_reply(stream).expect("an answer")
}

/// Reads `HTTP/1.1 100 Continue` and its blank line off `stream`.
fn read_continue(stream: &TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("an interim answer");
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    line.clear();
    reader.read_line(&mut line).expect("its end");
    assert_eq!(line, "\r\n");
    assert!(reader.buffer().is_empty(), "nothing after 100 Continue yet");
}

/// Before: bodies had no deadline and no token a share: 520 connections of one agent token, each
/// sending a body byte every 10 s, filled every connection and every other tenant's request timed
/// out. Now one principal has at most --max-requests-per-principal requests in flight, and the
/// rest of its requests are refused at once (503, Retry-After), so another agent and the operator
/// are answered at once.
#[test]
fn one_tokens_slow_bodies_leave_room_for_other_tokens_and_the_operator() {
    let store = TempStore::new();
    let server = Server::start(
        &store.path(),
        &[
            "--max-connections",
            "16",
            "--max-requests-per-principal",
            "4",
        ],
    );
    let greedy = agent_bearer(&server, "greedy");
    let honest = agent_bearer(&server, "honest");
    let addr = server.addr();
    // 24 connections with one token, each with the head of a body of 1,000 that never comes.
    let mut slow = Vec::new();
    for _ in 0..24 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(memory_head(addr, &greedy, 1000, false).as_bytes())
            .expect("head");
        slow.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    let view = json!({"command": "view", "path": "/memories"}).to_string();
    let answered = prompt_request(addr, "POST", "/v1/memory", &honest, view.as_bytes(), PROMPT)
        .expect("another agent's call is answered during the attack");
    assert_eq!(answered.status, 200, "{}", answered.text());
    let head = prompt_request(addr, "GET", "/v1/head", &server.bearer(), b"", PROMPT)
        .expect("the operator's call is answered during the attack");
    assert_eq!(head.status, 200, "{}", head.text());
    // The greedy token's requests past its share were refused, each with Retry-After (or, a
    // few perhaps, closed unanswered to make room for the next while they waited for their
    // turn); its share (4) is still being read.
    let (mut refused, mut closed, mut held) = (0, 0, 0);
    for stream in slow {
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        match read_reply(stream) {
            Ok(reply) => {
                assert_eq!(reply.status, 503, "{}", reply.text());
                assert_eq!(reply.header("retry-after"), Some("1"));
                assert!(
                    reply.text().contains("--max-requests-per-principal"),
                    "{}",
                    reply.text()
                );
                refused += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                held += 1;
            }
            Err(_) => closed += 1,
        }
    }
    assert_eq!((refused + closed, held), (20, 4), "{refused} refused");
    assert!(refused >= 12, "{refused} refused, {closed} closed");
    // Its clients staying attached have a share of their own: one still attaches.
    let mut attach = TcpStream::connect(addr).expect("connect");
    attach
        .write_all(
            format!("GET /v1/attach HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {greedy}\r\n\r\n")
                .as_bytes(),
        )
        .expect("head");
    attach.set_read_timeout(Some(PROMPT)).expect("timeout");
    let mut status = String::new();
    BufReader::new(&attach)
        .read_line(&mut status)
        .expect("attached");
    assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
}

/// Before: a connection had 30 s to finish its head, and the first --max-connections of a flood
/// of unfinished heads (from one address, as every peer on loopback is) kept the operator out for
/// as long as the flood lasted. Now a new connection takes the place of the one that has waited
/// longest for its head, so a request sent at once gets through.
#[test]
fn a_flood_of_unfinished_heads_does_not_keep_a_request_out() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &["--max-connections", "16"]);
    let addr = server.addr();
    let half = format!("POST /v1/memory HTTP/1.1\r\nHost: {addr}\r\nAuth");
    let mut slow = Vec::new();
    for _ in 0..64 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.write_all(half.as_bytes()).expect("half a head");
        slow.push(stream);
    }
    // More keep coming while the operator asks.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (stop, half) = (std::sync::Arc::clone(&stop), half.clone());
        std::thread::spawn(move || {
            let mut more = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && more.len() < 200 {
                if let Ok(mut stream) = TcpStream::connect(addr) {
                    let _ = stream.write_all(half.as_bytes());
                    more.push(stream);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            more.len()
        })
    };
    for _ in 0..3 {
        let started = Instant::now();
        let head = prompt_request(addr, "GET", "/v1/head", &server.bearer(), b"", PROMPT)
            .expect("the operator's request gets through the flood");
        assert_eq!(head.status, 200, "{}", head.text());
        assert!(started.elapsed() < PROMPT);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(flood.join().expect("flood") > 0);
    // The oldest unfinished heads were closed by the server to make room.
    let first = &mut slow[0];
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut rest = Vec::new();
    assert!(
        !matches!(first.read_to_end(&mut rest), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the oldest unfinished head was kept open"
    );
}

/// Before: a body had no deadline: one byte every 10 s held a connection for ever. Now after
/// --body-grace a body must come at --min-body-rate on average, or it is cut off with 408 and its
/// connection closed; a body at a pace above it is read whole.
#[test]
fn a_body_below_the_minimum_rate_is_cut_off_with_408() {
    let store = TempStore::new();
    let server = Server::start(
        &store.path(),
        &["--body-grace", "1", "--min-body-rate", "1000"],
    );
    let addr = server.addr();
    let bearer = server.bearer();
    // 8,000 bytes at 4,000 a second: above the rate, read whole.
    let body = padded_view(8000);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(memory_head(addr, &bearer, body.len(), false).as_bytes())
        .expect("head");
    for chunk in body.chunks(400) {
        stream.write_all(chunk).expect("a chunk");
        std::thread::sleep(Duration::from_millis(100));
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let reply = read_reply(stream).expect("an answer");
    assert_eq!(reply.status, 200, "{}", reply.text());
    // Ten bytes of 8,000, then nothing: cut off after the grace.
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(memory_head(addr, &bearer, 8000, false).as_bytes())
        .expect("head");
    stream.write_all(&body[..10]).expect("ten bytes");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let reply =
        read_reply(stream.try_clone().expect("clone")).expect("an answer before the read timeout");
    assert_eq!(reply.status, 408, "{}", reply.text());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(reply.text().contains("--min-body-rate"), "{}", reply.text());
    assert_eq!(reply.header("connection"), Some("close"));
    // Nothing was recorded: the head is where it was (the first call is event 1).
    assert_eq!(server.json("/v1/head")["seq"], 1);
}

/// Before: request bodies had no memory bound (100 unfinished bodies held 6.1 GB). Now at most
/// --max-body-memory bytes of bodies are held, one principal at most half: a body that does not
/// fit waits briefly, then gets 503 with Retry-After; a body that fits exactly is read; the
/// memory is given back when a request ends.
#[test]
fn the_body_memory_budget_refuses_with_503_and_retry_after() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &["--max-body-memory", "200000"]);
    let addr = server.addr();
    let (first, second) = (
        agent_bearer(&server, "first"),
        agent_bearer(&server, "second"),
    );
    // Two agents' bodies of 90,000 bytes, each reserved (100 Continue proves it) and held.
    let hold = |bearer: &str| {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(memory_head(addr, bearer, 90_000, true).as_bytes())
            .expect("head");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        read_continue(&stream);
        stream
            .write_all(&padded_view(90_000)[..100])
            .expect("a start");
        stream
    };
    let held_first = hold(&first);
    let _held_second = hold(&second);
    // The operator's body of 90,000 does not fit (180,000 of 200,000 are held): 503.
    let operator = server.bearer();
    let over = expect_request(addr, &operator, &padded_view(90_000));
    assert_eq!(over.status, 503, "{}", over.text());
    assert_eq!(over.header("retry-after"), Some("1"));
    assert!(over.text().contains("--max-body-memory"), "{}", over.text());
    // The first agent's second body would take it past half the budget: 503 too.
    let past_half = expect_request(addr, &first, &padded_view(20_000));
    assert_eq!(past_half.status, 503, "{}", past_half.text());
    // One that fills the budget exactly is read.
    let exact = expect_request(addr, &operator, &padded_view(20_000));
    assert_eq!(exact.status, 200, "{}", exact.text());
    // A body larger than one principal may ever hold is refused as too large.
    let never = expect_request(addr, &operator, &padded_view(100_001));
    assert_eq!(never.status, 413, "{}", never.text());
    // The first agent gives up its body: its memory comes back, and the operator's fits.
    drop(held_first);
    let fits = expect_request(addr, &operator, &padded_view(90_000));
    assert_eq!(fits.status, 200, "{}", fits.text());
}

/// Requests without a proven token are one more principal: their bodies being read (the viewer's
/// login reads one before it knows anyone) have one share, so slow ones from a peer with no token
/// never take the places of the tokens' calls.
#[test]
fn slow_bodies_without_a_token_have_one_share_and_leave_the_rest_alone() {
    let store = TempStore::new();
    let server = Server::start(
        &store.path(),
        &[
            "--max-connections",
            "16",
            "--max-requests-per-principal",
            "2",
        ],
    );
    let agent = agent_bearer(&server, "agent");
    let addr = server.addr();
    let mut slow = Vec::new();
    // More than --max-connections: without a share of their own they would take every place.
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(
                format!(
                    "POST /ui/api/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                )
                .as_bytes(),
            )
            .expect("head");
        slow.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    let view = json!({"command": "view", "path": "/memories"}).to_string();
    let answered = prompt_request(addr, "POST", "/v1/memory", &agent, view.as_bytes(), PROMPT)
        .expect("an agent's call is answered");
    assert_eq!(answered.status, 200, "{}", answered.text());
    let head = prompt_request(addr, "GET", "/v1/head", &server.bearer(), b"", PROMPT)
        .expect("the operator's call is answered");
    assert_eq!(head.status, 200, "{}", head.text());
    let (mut refused, mut closed, mut held) = (0, 0, 0);
    for stream in slow {
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        match read_reply(stream) {
            Ok(reply) => {
                assert_eq!(reply.status, 503, "{}", reply.text());
                assert_eq!(reply.header("retry-after"), Some("1"));
                refused += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                held += 1;
            }
            Err(_) => closed += 1,
        }
    }
    assert_eq!((refused + closed, held), (18, 2), "{refused} refused");
    assert!(refused >= 14, "{refused} refused, {closed} closed");
}

/// Before: a connection buffered up to hyper's default (about 400 KiB) of an unfinished head, so
/// 500 of them held 209 MiB. Now a head is at most 64 KiB: one past it is refused with 431, and
/// one within it is answered.
#[test]
fn a_request_head_past_64_kib_is_refused_with_431() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let addr = server.addr();
    let ask = |head: &[u8]| {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        stream.write_all(head).expect("the head");
        read_reply(stream).expect("an answer")
    };
    let start = format!(
        "GET /v1/head HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {}\r\nX-Pad: ",
        server.bearer()
    );
    let mut within = start.clone().into_bytes();
    within.resize(60_000, b'a');
    within.extend_from_slice(b"\r\n\r\n");
    assert_eq!(ask(&within).status, 200);
    // 64 KiB of a head not yet finished: the buffer is full (and all of it read, so the
    // connection closes cleanly after the answer).
    let mut past = start.into_bytes();
    past.resize(64 * 1024, b'a');
    assert_eq!(ask(&past).status, 431);
}

/// Before: peers without a token that kept slow bodies coming held every place such requests
/// share, so the viewer's login (whose body is read before its sender is known) got 503 for as
/// long as they kept it up, the operator's included. Now the oldest body still coming makes room
/// for a newer one: a login that sends its body with its head is answered.
#[test]
fn a_login_that_sends_its_body_gets_in_past_slow_bodies_without_a_token() {
    let store = TempStore::new();
    let server = Server::start(
        &store.path(),
        &[
            "--max-connections",
            "32",
            "--max-requests-per-principal",
            "2",
        ],
    );
    let addr = server.addr();
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(
                format!(
                    "POST /ui/api/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
                )
                .as_bytes(),
            )
            .expect("head");
        slow.push(stream);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let body = r#"{"secret":"not-a-login-secret"}"#;
    for _ in 0..3 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(PROMPT)).expect("timeout");
        stream
            .write_all(
                format!(
                    "POST /ui/api/login HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .expect("the login");
        let reply = read_reply(stream).expect("the login is answered");
        // Refused as a login (a wrong secret), not for want of a place.
        assert_ne!(reply.status, 503, "{}", reply.text());
        assert_ne!(reply.status, 408, "{}", reply.text());
        assert!(
            reply.status >= 400 && reply.status < 500,
            "{}",
            reply.text()
        );
    }
    drop(slow);
}
