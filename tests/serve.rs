//! `mnemo serve` through the built binary: the memory tool over HTTP byte for byte, refused
//! requests, concurrent clients, SIGTERM, the server file, idle exit.
//!
//! The client is a tiny HTTP/1.1 client on `std::net::TcpStream` (one request per connection),
//! so the tests depend on no HTTP crate.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo::testing::DEFAULT_MAX_REQUEST_BYTES as MAX_REQUEST_BYTES;
use mnemo::testing::discovery::{SERVER_FILE, ServerFile};
use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer};
use serde_json::{Value, json};

use crate::support::{TempStore, mnemo_bin};

// Opening a served store connects to its server, with the API of an opened store.
mod opened;
// Many stores, one server: --data, /v1/stores, store-scoped tokens, bounded open stores.
mod stores;
// Agent tokens over HTTP, and the admin routes.
mod tokens;
// The gate against requests a client library would not send.
mod gate;
// Redaction by the server that holds the store.
mod redact;
// Reverts by the server that holds the store, the operator's only.
mod revert;
// The read routes and memory versions refuse a forged record, naming its seq.
mod proof;
// One tenant cannot lock out the rest: shares of requests, body pace, body memory.
mod tenants;
// The viewer at /ui/: its login, sessions and their refusals.
mod viewer;
// Replication by the server that holds the store (`--replicate`).
#[cfg(feature = "replicate")]
mod fleet;
#[cfg(feature = "replicate")]
mod replicated;

pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// A running `mnemo serve`, its stderr collected.
struct Server {
    child: Child,
    file: ServerFile,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(db: &Path, extra: &[&str]) -> Server {
        Server::start_with(db, Durability::Buffered, extra)
    }

    fn start_with(db: &Path, durability: Durability, extra: &[&str]) -> Server {
        let mut args = vec!["--db", db.to_str().expect("a UTF-8 path")];
        args.extend(["--durability", durability.name()]);
        args.extend_from_slice(extra);
        Server::launch(&args, db)
    }

    /// `mnemo serve --data DIR EXTRA...`: every store under `dir`.
    fn start_data(dir: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--data", dir.to_str().expect("a UTF-8 path")];
        args.extend_from_slice(extra);
        Server::launch(&args, dir)
    }

    /// `mnemo serve ARGS...`, once its server file appears in `dir`.
    fn launch(args: &[&str], dir: &Path) -> Server {
        let db = dir;
        let mut child = Command::new(mnemo_bin())
            .arg("serve")
            .args(args)
            .env_remove("MNEMO_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mnemo serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = sink.lock().expect("stderr lock");
                text.push_str(&line);
                text.push('\n');
            }
        });
        let started = Instant::now();
        let file = loop {
            if let Ok(Some(file)) = ServerFile::read(db) {
                if file.pid == child.id() {
                    break file;
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "mnemo serve exited ({status}) before it served: {}",
                    stderr.lock().expect("stderr lock")
                );
            }
            assert!(started.elapsed() < WAIT, "no server file after {WAIT:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        Server {
            child,
            file,
            stderr,
            reader: Some(reader),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.file.address
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.file.token)
    }

    /// A request with the operator token.
    fn call(&self, method: &str, target: &str, body: &[u8]) -> Reply {
        let bearer = self.bearer();
        request(
            self.addr(),
            method,
            target,
            &[("Authorization", &bearer)],
            body,
        )
    }

    /// A request with the operator token and `body` as JSON (none if it is null): the status and
    /// the answer's JSON (null if it is none).
    fn api(&self, method: &str, target: &str, body: &Value) -> (u16, Value) {
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let reply = self.call(method, target, &bytes);
        let json = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        (reply.status, json)
    }

    fn memory(&self, input: &Value) -> Reply {
        self.call("POST", "/v1/memory", input.to_string().as_bytes())
    }

    fn json(&self, target: &str) -> Value {
        let reply = self.call("GET", target, b"");
        assert_eq!(reply.status, 200, "{target}: {}", reply.text());
        serde_json::from_slice(&reply.body).expect("a JSON answer")
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the server to exit and returns its status and stderr.
    fn wait(mut self) -> (ExitStatus, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if started.elapsed() > WAIT {
                let _ = self.child.kill();
                panic!("mnemo serve did not exit within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(reader) = self.reader.take() {
            reader.join().expect("stderr reader");
        }
        let stderr = self.stderr.lock().expect("stderr lock").clone();
        (status, stderr)
    }

    fn stop(self) -> (ExitStatus, String) {
        self.terminate();
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request on a new connection (`Connection: close`) and reads the whole response.
/// `headers` may override `Host`.
/// `POST /v1/memory` of `input` to the server at `addr` with `bearer`, from any thread.
fn post_memory(addr: SocketAddr, bearer: &str, input: &Value) -> Reply {
    request(
        addr,
        "POST",
        "/v1/memory",
        &[("Authorization", bearer)],
        input.to_string().as_bytes(),
    )
}

fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    try_request(addr, method, target, headers, body).expect("HTTP exchange")
}

fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(WAIT))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    read_reply(stream)
}

fn read_reply(stream: TcpStream) -> std::io::Result<Reply> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    if let Some(length) = reply.header("content-length") {
        let length: usize = length.parse().map_err(std::io::Error::other)?;
        reply.body.resize(length, 0);
        reader.read_exact(&mut reply.body)?;
    } else if reply
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim(), 16).map_err(std::io::Error::other)?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            reply.body.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut reply.body)?;
    }
    Ok(reply)
}

/// A session of the six commands, error cases, a `tool_use` block with an id and one without.
pub fn session() -> Vec<Value> {
    vec![
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n- tea\n"}),
        json!({"type": "tool_use", "id": "toolu_01", "name": "memory",
               "input": {"command": "view", "path": "/memories/notes.md"}}),
        json!({"command": "str_replace", "path": "/memories/notes.md",
               "old_str": "tea", "new_str": "green tea"}),
        json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 1,
               "insert_text": "- Lisbon\n"}),
        json!({"command": "rename", "old_path": "/memories/notes.md",
               "new_path": "/memories/done/notes.md"}),
        json!({"type": "tool_use", "name": "memory",
               "input": {"command": "create", "path": "/memories/tmp.txt", "file_text": "x"}}),
        json!({"command": "delete", "path": "/memories/tmp.txt"}),
        json!({"command": "view", "path": "/memories/../etc/passwd"}),
        json!({"command": "str_replace", "path": "/memories/done/notes.md",
               "old_str": "absent", "new_str": "x"}),
        json!({"command": "launch"}),
        json!({"type": "tool_use", "id": "toolu_01", "name": "memory",
               "input": {"command": "view", "path": "/memories/notes.md"}}),
        json!({"command": "view", "path": "/memories"}),
    ]
}

#[test]
fn memory_over_http_is_byte_for_byte_what_handle_returns() {
    let served = TempStore::new();
    let local = TempStore::new();
    let server = Server::start(&served.path(), &[]);
    let client = MnemoClient::builder(local.path())
        .agent_id("serve")
        .durability(Durability::Buffered)
        .open()
        .expect("open the second store");
    let tool = MnemoMemoryToolServer::new(client);
    for input in session() {
        let reply = server.memory(&input);
        assert_eq!(reply.status, 200, "{input}: {}", reply.text());
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let expected = serde_json::to_vec(&tool.handle(&input)).expect("serialize");
        assert_eq!(reply.text(), String::from_utf8_lossy(&expected), "{input}");
    }
    // A body that is not JSON is answered and recorded as `mnemo tool` answers such a line.
    let reply = server.call("POST", "/v1/memory", b"view /memories");
    let expected = serde_json::to_vec(&tool.handle_line("view /memories")).expect("serialize");
    assert_eq!(reply.body, expected);
    // The operator acts for the agent it names.
    let named = request(
        server.addr(),
        "POST",
        "/v1/memory",
        &[
            ("Authorization", &server.bearer()),
            ("X-Mnemo-Agent", "planner"),
        ],
        json!({"command": "view", "path": "/memories"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(named.status, 200);
    let bad_agent = request(
        server.addr(),
        "POST",
        "/v1/memory",
        &[("Authorization", &server.bearer()), ("X-Mnemo-Agent", "*")],
        b"{}",
    );
    assert_eq!(bad_agent.status, 400, "{}", bad_agent.text());
    let log = server.call("GET", "/v1/log?agent=planner", b"");
    let lines: Vec<Value> = log
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", log.text());
    assert_eq!(lines[0]["agent"], "planner");
    let head = server.json("/v1/head");
    // Every call is one event, the repeated `toolu_01` too (a retry is logged, answered from its
    // record); plus the body that is not JSON and the planner's view.
    let calls = session().len() + 2;
    assert_eq!(head["seq"], calls as u64);
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn read_routes_answer_what_the_cli_prints() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    for input in session() {
        assert_eq!(server.memory(&input).status, 200);
    }
    let ls = server.json("/v1/ls");
    assert_eq!(ls["dir"], "/memories");
    let paths: Vec<&str> = ls["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(paths, ["/memories/done/notes.md"]);
    let past = server.json("/v1/ls?at=2");
    assert_eq!(past["files"][0]["path"], "/memories/notes.md");
    let cat = server.call("GET", "/v1/cat?path=/memories/done/notes.md", b"");
    assert_eq!(cat.text(), "# Notes\n- Lisbon\n- green tea\n");
    let then = server.call("GET", "/v1/cat?path=/memories/notes.md&at=2", b"");
    assert_eq!(then.text(), "# Notes\n- tea\n");
    let gone = server.call("GET", "/v1/cat?path=/memories/nothing.md", b"");
    assert_eq!(gone.status, 404);
    let bad = server.call("GET", "/v1/cat?path=/memories/../etc", b"");
    assert_eq!(bad.status, 400, "{}", bad.text());
    let history = server.call("GET", "/v1/history?path=/memories/done/notes.md", b"");
    let history = history.text();
    let commands: Vec<String> = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line")["command"].to_string())
        .collect();
    assert!(commands.len() >= 5, "{history}");
    let verify = server.json("/v1/verify");
    assert_eq!(verify["status"], "intact");
    let log = server.call("GET", "/v1/log?from=2&limit=3", b"");
    let log = log.text();
    assert_eq!(log.lines().count(), 3);
    let trace = server.call("GET", "/v1/trace?seq=2", b"");
    assert_eq!(trace.status, 200, "{}", trace.text());
    let trace: Value = serde_json::from_slice(&trace.body).expect("a trace");
    assert!(
        !trace["events"].as_array().expect("events").is_empty(),
        "{trace}"
    );
    // A query string of the wrong shape is refused as every route refuses: `{"error"}`.
    for target in [
        "/v1/log?limit=abc",
        "/v1/show?seq=-1",
        "/v1/ls?at=x",
        "/v1/log?error=maybe",
        "/v1/trace?seq=x",
    ] {
        let bad = server.call("GET", target, b"");
        assert_eq!(bad.status, 400, "{target}: {}", bad.text());
        assert_eq!(
            bad.header("content-type"),
            Some("application/json"),
            "{target}"
        );
        let why: Value = serde_json::from_slice(&bad.body).expect("JSON");
        assert!(
            why["error"]
                .as_str()
                .is_some_and(|e| e.contains("docs/http-api.md")),
            "{why}"
        );
    }
    let (status, _) = server.stop();
    assert!(status.success());
    // The same documents the CLI prints, now that the store is free.
    let db = store.path();
    let db = db.to_str().expect("utf-8 path");
    let cli = crate::support::run_mnemo(
        &["log", "--db", db, "--json", "--from", "2", "--limit", "3"],
        "",
    );
    assert_eq!(String::from_utf8_lossy(&cli.stdout), log);
    let cli = crate::support::run_mnemo(
        &["history", "/memories/done/notes.md", "--db", db, "--json"],
        "",
    );
    assert_eq!(String::from_utf8_lossy(&cli.stdout), history);
    let cli = crate::support::run_mnemo(&["trace", "2", "--db", db, "--json"], "");
    let cli: Value = serde_json::from_slice(&cli.stdout).expect("trace --json");
    assert_eq!(cli, trace);
    let cli = crate::support::run_mnemo(&["verify", "--db", db, "--json"], "");
    let cli: Value = serde_json::from_slice(&cli.stdout).expect("verify --json");
    for key in [
        "status",
        "events",
        "bytes",
        "head",
        "checkpoint",
        "meta_head",
        "violations",
    ] {
        assert_eq!(cli[key], verify[key], "{key}");
    }
}

#[test]
fn refused_requests_get_their_status_and_write_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let create = json!({"command": "create", "path": "/memories/x.md", "file_text": "x"});
    let body = create.to_string();
    let addr = server.addr();
    let good = server.bearer();
    let wrong = format!("Bearer {}", "0".repeat(64));
    let basic = format!("Basic {}", server.file.token);
    for (headers, route) in [
        (vec![], "/v1/memory"),
        (vec![("Authorization", wrong.as_str())], "/v1/memory"),
        (vec![("Authorization", basic.as_str())], "/v1/memory"),
        (vec![("Authorization", "Bearer")], "/v1/memory"),
        (vec![], "/mcp"),
        (vec![("Authorization", wrong.as_str())], "/v1/head"),
    ] {
        let reply = request(addr, "POST", route, &headers, body.as_bytes());
        assert_eq!(reply.status, 401, "{headers:?}: {}", reply.text());
        assert!(
            reply
                .header("www-authenticate")
                .is_some_and(|v| v.starts_with("Bearer")),
            "{:?}",
            reply.headers
        );
    }
    let foreign_host = request(
        addr,
        "POST",
        "/v1/memory",
        &[
            ("Authorization", &good),
            ("Host", &format!("evil.example:{}", addr.port())),
        ],
        body.as_bytes(),
    );
    assert_eq!(foreign_host.status, 421, "{}", foreign_host.text());
    let foreign_origin = request(
        addr,
        "POST",
        "/v1/memory",
        &[("Authorization", &good), ("Origin", "http://evil.example")],
        body.as_bytes(),
    );
    assert_eq!(foreign_origin.status, 403, "{}", foreign_origin.text());
    let own_origin = format!("http://localhost:{}", addr.port());
    let mcp_foreign = request(
        addr,
        "POST",
        "/mcp",
        &[("Authorization", &good), ("Host", "evil.example")],
        b"{}",
    );
    assert_eq!(mcp_foreign.status, 421);

    // A body over the limit: refused from its declared length, before it is sent.
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    let head = format!(
        "POST /v1/memory HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {good}\r\nContent-Length: {}\r\n\r\n{{\"command\":",
        MAX_REQUEST_BYTES + 1
    );
    stream.write_all(head.as_bytes()).expect("send the head");
    let started = Instant::now();
    let reply = read_reply(stream).expect("a reply before the body");
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert!(started.elapsed() < Duration::from_secs(10));

    // Nothing was written.
    let head = server.json("/v1/head");
    assert_eq!(head["seq"], 0, "{head}");
    // The own origin is welcome.
    let ok = request(
        addr,
        "POST",
        "/v1/memory",
        &[("Authorization", &good), ("Origin", &own_origin)],
        body.as_bytes(),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(server.json("/v1/head")["seq"], 1);

    let token = server.file.token.clone();
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    let refused: Vec<&str> = stderr.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refused.len(), 10, "{stderr}");
    for status in ["refused 401", "refused 421", "refused 403", "refused 413"] {
        assert!(stderr.contains(status), "{status}: {stderr}");
    }
    assert!(stderr.contains("\"/v1/memory\""), "{stderr}");
    assert!(!stderr.contains(&token), "the token must never be logged");
}

#[test]
fn sixteen_concurrent_clients_lose_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let addr = server.addr();
    let bearer = server.bearer();
    let per_client = 12;
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let bearer = bearer.clone();
            std::thread::spawn(move || {
                for i in 0..per_client {
                    let input = json!({"command": "create",
                        "path": format!("/memories/c{t}/f{i}.md"),
                        "file_text": format!("client {t} file {i}\n")});
                    let agent = format!("client-{t}");
                    let reply = request(
                        addr,
                        "POST",
                        "/v1/memory",
                        &[("Authorization", &bearer), ("X-Mnemo-Agent", &agent)],
                        input.to_string().as_bytes(),
                    );
                    assert_eq!(reply.status, 200);
                    let result: Value = serde_json::from_slice(&reply.body).expect("json");
                    assert_eq!(
                        result["content"],
                        format!("File created successfully at: /memories/c{t}/f{i}.md")
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("client thread");
    }
    let ls = server.json("/v1/ls?dir=/memories");
    let files = ls["files"].as_array().expect("files");
    assert_eq!(files.len(), 16 * per_client);
    assert_eq!(server.json("/v1/verify")["status"], "intact");
    let (status, _) = server.stop();
    assert!(status.success());
    let reopened = MnemoClient::open(store.path(), "check").expect("reopen");
    for t in 0..16 {
        for i in 0..per_client {
            let record = reopened
                .record(&format!("/memories/c{t}/f{i}.md"))
                .expect("read")
                .expect("the file is there");
            assert_eq!(record.content, format!("client {t} file {i}\n"));
        }
    }
    assert!(reopened.verify().expect("verify").is_intact());
}

#[test]
fn sigterm_finishes_the_calls_in_flight_and_keeps_every_acknowledged_one() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let addr = server.addr();
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let bearer = server.bearer();
            let acknowledged = Arc::clone(&acknowledged);
            std::thread::spawn(move || {
                for i in 0.. {
                    let path = format!("/memories/t{t}/f{i}.md");
                    let input = json!({"command": "create", "path": path, "file_text": "kept\n"});
                    let reply = try_request(
                        addr,
                        "POST",
                        "/v1/memory",
                        &[("Authorization", &bearer)],
                        input.to_string().as_bytes(),
                    );
                    match reply {
                        Ok(reply) if reply.status == 200 => {
                            acknowledged.lock().expect("lock").push(path);
                        }
                        _ => return,
                    }
                }
            })
        })
        .collect();
    let started = Instant::now();
    while acknowledged.lock().expect("lock").len() < 40 {
        assert!(started.elapsed() < WAIT, "the clients made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.terminate();
    for thread in threads {
        thread.join().expect("client thread");
    }
    let db = store.path();
    let (status, stderr) = server.wait();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    assert!(
        !db.join(SERVER_FILE).exists(),
        "the server file is removed on exit"
    );
    let acknowledged = acknowledged.lock().expect("lock").clone();
    let reopened = MnemoClient::open(&db, "check").expect("reopen");
    for path in &acknowledged {
        let record = reopened.record(path).expect("read");
        assert!(
            record.is_some(),
            "{path} was acknowledged but is not in the store"
        );
    }
    assert!(reopened.verify().expect("verify").is_intact());
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

#[test]
fn the_server_file_is_private_removed_on_exit_and_stale_ones_are_replaced() {
    let store = TempStore::new();
    let db: PathBuf = store.path();
    let server = Server::start(&db, &[]);
    let file = ServerFile::path(&db);
    assert_eq!(mode(&file), 0o600);
    assert!(server.file.url.starts_with("http://127.0.0.1:"));
    assert_eq!(server.file.token.len(), 64);
    let first_token = server.file.token.clone();
    let (status, _) = server.stop();
    assert!(status.success());
    assert!(!file.exists(), "removed on a clean exit");

    // A stale file: its pid is gone and nothing listens at its address.
    let stale = ServerFile {
        url: "http://127.0.0.1:9".into(),
        address: "127.0.0.1:9".parse().expect("addr"),
        pid: dead_pid(),
        token: "f".repeat(64),
        socket: None,
    };
    assert!(!stale.is_live());
    std::fs::write(&file, serde_json::to_vec(&stale).expect("json")).expect("plant");
    // The owner's own file (one open to others is not trusted at all: see discovery::trust).
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let server = Server::start(&db, &[]);
    assert_ne!(server.file, stale);
    assert_ne!(server.file.token, first_token);
    assert!(server.file.is_live());
    assert_eq!(mode(&file), 0o600);
    let (status, stderr) = server.stop();
    assert!(status.success());
    assert!(stderr.contains("replacing the server file"), "{stderr}");

    // A symlink planted at the name is replaced, not followed.
    let outside = store.dir.path().join("outside.txt");
    std::fs::write(&outside, "untouched\n").expect("write");
    std::os::unix::fs::symlink(&outside, &file).expect("plant a symlink");
    let dangling = store.dir.path().join("dangling-target");
    let server = Server::start(&db, &[]);
    assert!(
        !std::fs::symlink_metadata(&file)
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "untouched\n"
    );
    let (status, _) = server.stop();
    assert!(status.success());
    // A dangling symlink too: its target is never created.
    std::os::unix::fs::symlink(&dangling, &file).expect("plant a dangling symlink");
    let server = Server::start(&db, &[]);
    assert!(!dangling.exists());
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn idle_exit_stops_the_server_after_the_last_request() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &["--idle-exit", "1"]);
    let input = json!({"command": "create", "path": "/memories/a.md", "file_text": "a"});
    assert_eq!(server.memory(&input).status, 200);
    let last = Instant::now();
    let db = store.path();
    let (status, stderr) = server.wait();
    assert!(status.success(), "{stderr}");
    assert!(
        last.elapsed() >= Duration::from_millis(900),
        "{:?}",
        last.elapsed()
    );
    assert!(stderr.contains("no request for 1 s"), "{stderr}");
    assert!(!db.join(SERVER_FILE).exists());
    let reopened = MnemoClient::open(&db, "check").expect("reopen");
    assert!(reopened.record("/memories/a.md").expect("read").is_some());
}

#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let store = TempStore::new();
    let db = store.path();
    let out = crate::support::run_mnemo(
        &[
            "serve",
            "--db",
            db.to_str().expect("utf-8"),
            "--listen",
            "0.0.0.0:0",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    assert!(
        !db.exists(),
        "the store is not opened for a refused address"
    );
}
