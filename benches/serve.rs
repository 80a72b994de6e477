//! The latency `mnemo serve` adds to one memory-tool call: the same `view` of a 20-line note
//! through `MnemoMemoryToolServer::handle` in-process, and as `POST /v1/memory` to a server on
//! loopback, over one kept-alive HTTP/1.1 connection (a minimal client on `std::net`).
//!
//! Both stores use `buffered` durability, and a view waits for no flush, so the difference is the
//! HTTP round trip: the request written and parsed, the gate (Host, token), the hop to the
//! blocking pool, the response. Build with `--features serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use mnemo::serve::ServerFile;
use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer, ServeOptions};
use serde_json::json;

fn tool(path: &std::path::Path) -> MnemoMemoryToolServer {
    let client = MnemoClient::builder(path)
        .agent_id("bench")
        .durability(Durability::Buffered)
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
        let stream = TcpStream::connect(file.address).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let head = format!(
            "POST /v1/memory HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n",
            file.address, file.token
        );
        Connection {
            reader: BufReader::new(stream),
            head,
        }
    }

    /// Sends `body` and returns the response body's length.
    fn call(&mut self, body: &[u8]) -> usize {
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
        assert!(answer.starts_with(b"{\"content\":\"Here's the content"));
        length
    }
}

fn latency(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let view = json!({"command": "view", "path": "/memories/note.md"});
    let local = tool(&dir.path().join("local.db"));
    let served_path = dir.path().join("served.db");
    let served = tool(&served_path);
    std::thread::spawn(move || {
        let options = ServeOptions::default();
        mnemo::serve(served, options).expect("serve");
    });
    let file = loop {
        if let Ok(Some(file)) = ServerFile::read(&served_path) {
            break file;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut group = c.benchmark_group("one_call");
    group.bench_function("in_process", |b| b.iter(|| local.handle(&view)));
    let mut connection = Connection::open(&file);
    let body = view.to_string().into_bytes();
    group.bench_function("http_loopback", |b| b.iter(|| connection.call(&body)));
    group.finish();
}

criterion_group!(benches, latency);
criterion_main!(benches);
