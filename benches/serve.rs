//! The latency `mnemo serve` adds to one memory-tool call: the same `view` of a 20-line note
//! through `MnemoMemoryToolServer::handle` in-process, and as `POST /v1/memory` to a server on
//! loopback, over one kept-alive HTTP/1.1 connection (a minimal client on `std::net`).
//!
//! Both stores use `buffered` durability, and a view waits for no flush, so the difference is the
//! HTTP round trip: the request written and parsed, the gate (Host, token), the hop to the
//! blocking pool, the response. Feature `serve`, a default one.
//!
//! `data_server`: a `view` through `mnemo serve --data` in a store that is open, and in one that
//! is closed (two stores under `--max-open-stores 1`, called in turn: each call closes the other
//! store and opens its own, so the figure is an open plus the answer).
//!
//! `one_call/local_socket`: the same view through the server's local socket, as a client that
//! found the server through its server file sends it.
//!
//! `durable_writes`: `create` calls under `fsync` from 16 threads in-process, against 1, 4 and 16
//! client processes (`mnemo tool --connect`, each fed its calls on stdin) through one server on
//! loopback, 16 `mnemo tool --db` processes (the default path: the server's local socket), and 16 processes through a `--data` server, all in one store or each in its own. Each iteration starts the processes and waits until each has answered one `view`;
//! the clock then runs over the creates alone. `processes_16_start_up_included` runs the clock
//! from the start of the processes, so their start-up is in that figure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mnemo::testing::discovery::ServerFile;
use mnemo::{DataOptions, Durability, MnemoClient, MnemoMemoryToolServer, ServeOptions};
use serde_json::json;

fn tool(path: &std::path::Path) -> MnemoMemoryToolServer {
    tool_with(path, Durability::Buffered)
}

fn tool_with(path: &std::path::Path, durability: Durability) -> MnemoMemoryToolServer {
    let client = MnemoClient::builder(path)
        .agent_id("bench")
        .durability(durability)
        .open()
        .expect("open the store");
    let tool = MnemoMemoryToolServer::new(client);
    let note = "# Notes\n".to_string() + &"- the user prefers short answers\n".repeat(19);
    tool.handle(&json!({"command": "create", "path": "/memories/note.md", "file_text": note}));
    tool
}

/// One kept-alive connection to the server.
struct Connection {
    reader: BufReader<TcpStream>,
    head: String,
}

impl Connection {
    fn open(file: &ServerFile) -> Connection {
        Connection::open_at(file, "/v1/memory")
    }

    /// A connection whose requests go to `route`.
    fn open_at(file: &ServerFile, route: &str) -> Connection {
        let stream = TcpStream::connect(file.address).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let head = format!(
            "POST {route} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n",
            file.address, file.token
        );
        Connection {
            reader: BufReader::new(stream),
            head,
        }
    }

    /// Sends `body` and returns the response body's length.
    fn call(&mut self, body: &[u8]) -> usize {
        let answer = self.send(body);
        assert!(answer.starts_with(b"{\"content\":\"Here's the content"));
        answer.len()
    }

    /// Sends `body` and returns the response body.
    fn send(&mut self, body: &[u8]) -> Vec<u8> {
        let mut request = self.head.clone().into_bytes();
        request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        request.extend_from_slice(body);
        self.reader.get_mut().write_all(&request).expect("send");
        let mut line = String::new();
        let mut length = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("read");
            if line == "\r\n" {
                break;
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().expect("length");
            }
        }
        let mut answer = vec![0; length];
        self.reader.read_exact(&mut answer).expect("body");
        answer
    }
}

fn latency(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let view = json!({"command": "view", "path": "/memories/note.md"});
    let local = tool(&dir.path().join("local.db"));
    let served_path = dir.path().join("served.db");
    let file = serve_in_background(tool(&served_path), &served_path);
    let mut group = c.benchmark_group("one_call");
    group.bench_function("in_process", |b| b.iter(|| local.handle(&view)));
    let mut connection = Connection::open(&file);
    let body = view.to_string().into_bytes();
    group.bench_function("http_loopback", |b| b.iter(|| connection.call(&body)));
    // What a client that found the server through its server file uses: the local socket.
    let client = file.client(&served_path);
    group.bench_function("local_socket", |b| {
        b.iter(|| client.memory_bytes(&body).expect("an answer"))
    });
    group.finish();
}

/// A view of the note in a store that is open, and in one that must be opened first.
fn data_server(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_server_of(dir.path().join("data"), 2, 1, Durability::Buffered);
    let body = json!({"command": "view", "path": "/memories/note.md"})
        .to_string()
        .into_bytes();
    let mut a = Connection::open_at(&file, "/v1/stores/s0/memory");
    let mut b = Connection::open_at(&file, "/v1/stores/s1/memory");
    let mut group = c.benchmark_group("data_server");
    group.bench_function("view_in_an_open_store", |bench| {
        bench.iter(|| a.call(&body))
    });
    group.bench_function("view_in_a_closed_store", |bench| {
        bench.iter(|| {
            b.call(&body);
            a.call(&body)
        });
    });
    group.finish();
}

/// Starts `mnemo serve --data DIR` in this process with stores `s0`..`s{stores - 1}`, each with
/// the note and `durability`, and at most `max_open` of them open. Returns the server file.
fn data_server_of(
    data: PathBuf,
    stores: usize,
    max_open: usize,
    durability: Durability,
) -> ServerFile {
    let open: mnemo::OpenStore = std::sync::Arc::new(move |builder: mnemo::ClientBuilder| {
        Ok(tool_with(builder.path(), durability).into())
    });
    let options = DataOptions {
        max_open_stores: max_open,
        ..DataOptions::default()
    };
    let served = data.clone();
    std::thread::spawn(move || {
        mnemo::serve_data(&served, open, ServeOptions::default(), options).expect("serve --data");
    });
    let file = loop {
        if let Ok(Some(file)) = ServerFile::read(&data) {
            break file;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut created = Connection::open_at(&file, "/v1/stores");
    for n in 0..stores {
        created.send(json!({ "name": format!("s{n}") }).to_string().as_bytes());
    }
    file
}

/// Starts `mnemo serve` in this process on the store `tool` holds; returns its server file.
fn serve_in_background(tool: MnemoMemoryToolServer, path: &std::path::Path) -> ServerFile {
    std::thread::spawn(move || {
        mnemo::serve(tool, ServeOptions::default()).expect("serve");
    });
    loop {
        if let Ok(Some(file)) = ServerFile::read(path) {
            return file;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Calls each writer makes per iteration.
const CALLS: u64 = 64;

/// A fresh path for every create of the run.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn create_line(writer: u64) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    json!({"command": "create", "path": format!("/memories/w{writer}/f{n}.md"), "file_text": "a durable note\n"})
        .to_string()
}

/// How a client process reaches the server.
#[derive(Clone, Copy)]
enum Reach<'a> {
    /// `mnemo tool --connect URL --token T`, over HTTP (with `--store` for a `--data` server).
    Url(&'a ServerFile),
    /// `mnemo tool --db PATH`: the default path, the server found through its server file and
    /// the memory tool's calls on its local socket.
    Db(&'a std::path::Path),
}

/// One `mnemo tool` client process, fed on stdin and read on stdout.
struct Writer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Writer {
    /// Starts a client as agent `writer-{p}` and sends it one `view`, whose answer [`Writer::ready`]
    /// waits for: then its start-up and first connection are behind it.
    /// With `store`, the client calls that store of a `--data` server.
    fn start(reach: Reach<'_>, p: u64, store: Option<String>) -> Writer {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
        match reach {
            Reach::Url(file) => {
                command.args(["tool", "--connect", &file.url, "--token", &file.token])
            }
            Reach::Db(path) => command
                .args(["tool", "--durability", "fsync", "--db"])
                .arg(path),
        };
        command.args(["--agent", &format!("writer-{p}")]);
        if let Some(store) = store {
            command.args(["--store", &store]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a client");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut writer = Writer {
            child,
            stdin,
            stdout,
        };
        writer.send(&(json!({"command": "view", "path": "/memories"}).to_string() + "\n"));
        writer
    }

    fn ready(&mut self) {
        self.answer();
    }

    fn send(&mut self, lines: &str) {
        self.stdin.write_all(lines.as_bytes()).expect("send");
        self.stdin.flush().expect("flush");
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read an answer");
        assert!(line.ends_with('\n'), "a client stopped answering");
        line
    }

    /// Reads `CALLS` answers, each a success, then closes stdin and waits for the exit.
    fn finish(mut self) {
        for _ in 0..CALLS {
            let answer = self.answer();
            assert!(!answer.contains("\"is_error\":true"), "{answer}");
        }
        drop(self.stdin);
        assert!(
            self.child.wait().expect("wait").success(),
            "a client failed"
        );
    }
}

/// `processes` clients, each `mnemo tool --connect` with `CALLS` creates on stdin. With
/// `start_up`, the time includes starting the processes; without, the clock starts once every
/// client has answered a first call, and it measures the calls alone. With `store`, client `p`
/// writes to the store that `store(p)` names on a `--data` server.
fn through_processes(
    reach: Reach<'_>,
    processes: u64,
    start_up: bool,
    store: impl Fn(u64) -> Option<String>,
) -> Duration {
    let started = Instant::now();
    let mut writers: Vec<Writer> = (0..processes)
        .map(|p| Writer::start(reach, p, store(p)))
        .collect();
    writers.iter_mut().for_each(Writer::ready);
    let start = if start_up { started } else { Instant::now() };
    for (p, writer) in writers.iter_mut().enumerate() {
        let lines: String = (0..CALLS).map(|_| create_line(p as u64) + "\n").collect();
        writer.send(&lines);
    }
    for writer in writers {
        writer.finish();
    }
    start.elapsed()
}

fn durable_writes(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = tool_with(&dir.path().join("local.db"), Durability::Fsync);
    let served_path = dir.path().join("served.db");
    let file = serve_in_background(tool_with(&served_path, Durability::Fsync), &served_path);
    let mut group = c.benchmark_group("durable_writes");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(16 * CALLS));
    group.bench_function("in_process_16_threads", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                std::thread::scope(|scope| {
                    for t in 0..16 {
                        let local = &local;
                        scope.spawn(move || {
                            for _ in 0..CALLS {
                                let input: serde_json::Value =
                                    serde_json::from_str(&create_line(t)).expect("json");
                                assert!(local.handle(&input).get("is_error").is_none());
                            }
                        });
                    }
                });
            }
            start.elapsed()
        });
    });
    for processes in [1, 4, 16] {
        group.throughput(Throughput::Elements(processes * CALLS));
        group.bench_function(format!("processes_{processes}"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| through_processes(Reach::Url(&file), processes, false, |_| None))
                    .sum()
            });
        });
    }
    group.throughput(Throughput::Elements(16 * CALLS));
    group.bench_function("processes_16_local_socket", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| through_processes(Reach::Db(&served_path), 16, false, |_| None))
                .sum()
        });
    });
    group.throughput(Throughput::Elements(16 * CALLS));
    group.bench_function("processes_16_start_up_included", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| through_processes(Reach::Url(&file), 16, true, |_| None))
                .sum()
        });
    });
    let data = data_server_of(dir.path().join("data"), 16, 16, Durability::Fsync);
    group.bench_function("processes_16_to_one_store_of_a_data_server", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| through_processes(Reach::Url(&data), 16, false, |_| Some("s0".into())))
                .sum()
        });
    });
    group.bench_function("processes_16_to_16_stores_of_a_data_server", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| through_processes(Reach::Url(&data), 16, false, |p| Some(format!("s{p}"))))
                .sum()
        });
    });
    group.finish();
}

criterion_group!(benches, latency, data_server, durable_writes);
criterion_main!(benches);
