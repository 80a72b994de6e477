//! Bounded input: a request over the size limit is refused while it is read, without holding it,
//! and logged as a digest (length, blake3, prefix); a rejected input over 4 KiB, one that is not
//! UTF-8 and a call whose content is over the file limit are digests too; duplicate JSON keys are
//! refused, never resolved by "the last wins".
//!
//! The 100 MiB cases run the built binary and read its peak memory (`VmHWM` in
//! `/proc/<pid>/status`) while it waits for more input.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};

use mnemo::event::{InputDigest, Refusal, RejectedDigest};
use mnemo::testing::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_REQUEST_BYTES};
use mnemo::tool::Limits;
use mnemo::{Body, Seq};
use mnemo::{EventHash, MnemoMemoryToolServer, Profile};
use serde_json::{Value, json};

use crate::support::{
    TempStore, call, dir_size, last_body, mnemo_command, open_client, run_mnemo_bytes, spawn_piped,
};

const MIB: u64 = 1024 * 1024;

/// One MiB as a buffer size.
const MIB_BYTES: usize = 1024 * 1024;

/// A `mnemo tool` session to talk to line by line.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn start(db: &Path, extra: &[&str]) -> Session {
        let mut args = vec!["tool", "--db", db.to_str().expect("utf-8 path")];
        args.extend(["--durability", "buffered"]);
        args.extend_from_slice(extra);
        let (child, stdin, stdout) = spawn_piped(mnemo_command(&args, &[]));
        Session {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin
            .as_mut()
            .expect("open")
            .write_all(bytes)
            .expect("write to mnemo tool");
    }

    /// Sends `len` bytes made by `fill` (called with offsets, 1 MiB at a time) and a newline,
    /// hashing them as they go; returns the digest the store must record.
    fn send_generated(&mut self, len: u64, fill: impl Fn(u64, &mut Vec<u8>)) -> (u64, EventHash) {
        let mut hasher = blake3::Hasher::new();
        let mut sent = 0;
        let mut chunk = Vec::new();
        while sent < len {
            chunk.clear();
            fill(sent, &mut chunk);
            let take = chunk.len().min(usize::try_from(len - sent).expect("fits"));
            hasher.update(&chunk[..take]);
            let piece = chunk[..take].to_vec();
            self.send(&piece);
            sent += take as u64;
        }
        self.send(b"\n");
        (sent, EventHash(*hasher.finalize().as_bytes()))
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read an answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
    }

    /// The child's peak resident memory so far, in bytes.
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/<pid>/status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status");
        kb * 1024
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait for mnemo tool");
        assert!(status.success(), "mnemo tool exited {status:?}");
    }
}

fn content(answer: &Value) -> &str {
    answer["content"].as_str().expect("content is a string")
}

fn is_error(answer: &Value) -> bool {
    answer.get("is_error") == Some(&Value::Bool(true))
}

/// The digest body of event `seq` of the closed store at `db`.
fn digest_event(db: &Path, seq: u64) -> RejectedDigest {
    let client = open_client(db, "reader", mnemo::Durability::Fsync);
    let event = client
        .events(Seq(seq))
        .expect("read the log")
        .next()
        .expect("the event exists")
        .expect("it decodes");
    assert_eq!(event.seq, Seq(seq));
    match event.body {
        Body::RejectedDigest(d) => d,
        other => panic!("event {seq} is not a digest: {other:?}"),
    }
}

fn verify_intact(db: &Path, events: u64) {
    let out = run_mnemo_bytes(
        &["verify", "--db", db.to_str().expect("utf-8"), "--json"],
        b"",
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("verify --json");
    assert_eq!(report["status"], "intact", "{report}");
    assert_eq!(report["events"], json!(events), "{report}");
}

/// The store size of a session of only the small calls, to compare against.
fn baseline_size() -> u64 {
    let s = TempStore::new();
    let mut session = Session::start(&s.path(), &[]);
    session.send(b"{\"command\":\"view\",\"path\":\"/memories\"}\n");
    session.answer();
    session.send(
        b"{\"command\":\"create\",\"path\":\"/memories/after.txt\",\"file_text\":\"ok\\n\"}\n",
    );
    session.answer();
    session.finish();
    dir_size(&s.path())
}

/// Sends a view, `big` (through `send_big`, which returns the digest it must get), the small
/// create, and checks: the refusal's text, the next line answered, peak memory and store growth,
/// the digest in the log, and verify.
fn refused_big_line(
    extra: &[&str],
    send_big: impl FnOnce(&mut Session) -> (u64, EventHash),
    want_text: impl Fn(u64) -> String,
    max_peak: u64,
) -> (u64, u64) {
    let s = TempStore::new();
    let db = s.path();
    let mut session = Session::start(&db, extra);
    session.send(b"{\"command\":\"view\",\"path\":\"/memories\"}\n");
    assert!(!is_error(&session.answer()));
    let (len, hash) = send_big(&mut session);
    let refused = session.answer();
    assert!(is_error(&refused), "{refused}");
    assert_eq!(content(&refused), want_text(len));
    session.send(
        b"{\"command\":\"create\",\"path\":\"/memories/after.txt\",\"file_text\":\"ok\\n\"}\n",
    );
    let next = session.answer();
    assert_eq!(
        content(&next),
        "File created successfully at: /memories/after.txt",
        "the next line is answered normally"
    );
    let peak = session.peak_rss();
    session.finish();
    let grew = dir_size(&db).saturating_sub(baseline_size());
    eprintln!(
        "refused {len}-byte line: peak RSS {} MiB, store grew {grew} bytes over the baseline",
        peak / MIB
    );
    assert!(peak < max_peak, "peak RSS {} MiB", peak / MIB);
    assert!(grew < MIB, "the store grew by {grew} bytes");
    let digest = digest_event(&db, 2);
    // Its length; no hash of the whole line (semantics 4 keeps none of a refused input, so
    // nothing confirms a guess at what the store never held). `hash` is what semantics 3 kept.
    assert_eq!(
        (digest.input.len, digest.input.hash),
        (len, EventHash::ZERO)
    );
    assert_ne!(hash, EventHash::ZERO);
    verify_intact(&db, 3);
    (peak, grew)
}

#[test]
fn a_100_mib_line_that_is_not_json_is_refused_unread_and_logged_as_its_digest() {
    let len = 100 * MIB;
    refused_big_line(
        &[],
        |session| session.send_generated(len, |_, chunk| chunk.resize(MIB_BYTES, b'x')),
        |len| {
            format!(
                "Error: This call is {len} bytes, over the limit of {DEFAULT_MAX_REQUEST_BYTES} bytes for one request, so it was not read. Send smaller calls (split large content across several files), or have the host raise the limit (`--max-request-bytes` of `mnemo tool` and `mnemo mcp`, `Limits::max_request_bytes`, or `max_request_bytes` of the Python server)."
            )
        },
        200 * MIB,
    );
}

/// `{"command":"create","path":"/memories/big.txt","file_text":"aaaa…"}`, `len` bytes in all.
fn send_create(session: &mut Session, len: u64) -> (u64, EventHash) {
    let head = br#"{"command":"create","path":"/memories/big.txt","file_text":""#;
    let tail = br#""}"#;
    let body = len - head.len() as u64 - tail.len() as u64;
    session.send_generated(len, move |at, chunk| {
        if at == 0 {
            chunk.extend_from_slice(head);
        }
        let text_end = head.len() as u64 + body;
        let room = MIB_BYTES.saturating_sub(chunk.len());
        let upto = (at + chunk.len() as u64 + room as u64).min(text_end);
        let from = at + chunk.len() as u64;
        if upto > from {
            chunk.resize(
                chunk.len() + usize::try_from(upto - from).expect("fits"),
                b'a',
            );
        }
        if upto == text_end {
            chunk.extend_from_slice(tail);
        }
    })
}

#[test]
fn a_100_mib_create_is_refused_for_its_size_while_it_is_read() {
    refused_big_line(
        &[],
        |session| send_create(session, 100 * MIB),
        |len| {
            format!(
                "Error: This call is {len} bytes, over the limit of {DEFAULT_MAX_REQUEST_BYTES} bytes for one request, so it was not read. Send smaller calls (split large content across several files), or have the host raise the limit (`--max-request-bytes` of `mnemo tool` and `mnemo mcp`, `Limits::max_request_bytes`, or `max_request_bytes` of the Python server)."
            )
        },
        200 * MIB,
    );
}

#[test]
fn a_create_over_the_file_limit_is_refused_before_it_runs_and_logged_as_its_digest() {
    // Under the request limit, so it is parsed: the file limit refuses it, with the Limits table's
    // text, and the log keeps a digest, not the 40 MiB.
    let text_len = 40 * MIB;
    let overhead =
        br#"{"command":"create","path":"/memories/big.txt","file_text":""}"#.len() as u64;
    refused_big_line(
        &[],
        |session| send_create(session, text_len + overhead),
        |_| {
            format!(
                "Error: /memories/big.txt would hold {text_len} bytes, over the limit of {DEFAULT_MAX_FILE_BYTES} bytes for one memory file. Split the content across several files."
            )
        },
        400 * MIB,
    );
}

#[test]
fn a_100_mib_create_under_a_raised_request_limit_is_refused_by_the_file_limit() {
    let text_len = 100 * MIB;
    let overhead =
        br#"{"command":"create","path":"/memories/big.txt","file_text":""}"#.len() as u64;
    let raised = (200 * MIB).to_string();
    refused_big_line(
        &["--max-request-bytes", &raised],
        |session| send_create(session, text_len + overhead),
        |_| {
            format!(
                "Error: /memories/big.txt would hold {text_len} bytes, over the limit of {DEFAULT_MAX_FILE_BYTES} bytes for one memory file. Split the content across several files."
            )
        },
        // The line, its parsed value and the command's copy of the text: about 3 times the line.
        450 * MIB,
    );
}

#[test]
fn the_request_limit_is_documented_and_admits_a_largest_file_after_escaping() {
    assert_eq!(DEFAULT_MAX_REQUEST_BYTES, 64 * MIB);
    assert_eq!(
        Limits::default().max_request_bytes,
        DEFAULT_MAX_REQUEST_BYTES
    );
    // A 16 MiB file of text where every byte escapes to two (newlines, quotes) is accepted.
    let s = TempStore::new();
    let server = s.server();
    let text = "\"\n".repeat(usize::try_from(DEFAULT_MAX_FILE_BYTES / 2).expect("fits"));
    let block = json!({"type": "tool_use", "id": "toolu_big", "name": "memory",
        "input": {"command": "create", "path": "/memories/quotes.txt", "file_text": text}});
    let line = block.to_string();
    assert!(line.len() as u64 > 2 * DEFAULT_MAX_FILE_BYTES);
    let out = server.handle_line(&line);
    assert_eq!(
        out["content"],
        "File created successfully at: /memories/quotes.txt"
    );
}

fn small_limit_server(s: &TempStore, max_request_bytes: u64) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::builder(s.client())
        .limits(Limits {
            max_request_bytes,
            ..Limits::default()
        })
        .build()
        .expect("server")
}

#[test]
fn a_value_over_the_request_limit_is_refused_with_its_id_and_logged_as_the_digest_of_its_text() {
    let s = TempStore::new();
    let server = small_limit_server(&s, 100);
    let block = json!({"type": "tool_use", "id": "toolu_v", "name": "memory",
        "input": {"command": "create", "path": "/memories/a.txt", "file_text": "x".repeat(100)}});
    let out = server.handle(&block);
    assert_eq!(out["tool_use_id"], "toolu_v");
    assert_eq!(out["is_error"], true);
    let text = block.to_string();
    assert!(
        content(&out).starts_with(&format!(
            "Error: This call is {} bytes, over the limit of 100 bytes for one request",
            text.len()
        )),
        "{out}"
    );
    let Body::RejectedDigest(d) = last_body(&server) else {
        panic!("not a digest")
    };
    assert_eq!(
        d.input,
        InputDigest {
            len: text.len() as u64,
            hash: EventHash::ZERO,
            prefix: text[..256.min(text.len())].to_string(),
        },
        "a refused input keeps no hash of itself (semantics 4)"
    );
    assert_eq!(d.refusal, Refusal::TooLarge { limit: 100 });
    // The same as a line: the same refusal. Within the limit, the call runs.
    let out = server.handle_line(&text);
    assert!(content(&out).starts_with("Error: This call is"));
    let small = json!({"command": "view", "path": "/memories"});
    assert!(!call(&server, small).1);
    assert!(server.client().verify().expect("verify").is_intact());
}

#[test]
fn rejected_input_over_4_kib_is_logged_as_a_digest_and_shorter_input_whole() {
    for profile in [Profile::Spec, Profile::PythonSdk, Profile::TypescriptSdk] {
        let s = TempStore::new();
        let server = MnemoMemoryToolServer::builder(s.client())
            .profile(profile)
            .build()
            .expect("server");
        let long = format!("{{\"command\":\"undo\",\"pad\":\"{}\"}}", "p".repeat(5000));
        let out = server.handle_line(&long);
        assert_eq!(
            content(&out),
            "Error: Unknown command \"undo\"; use one of: view, create, str_replace, insert, delete, rename"
        );
        let Body::RejectedDigest(d) = last_body(&server) else {
            panic!("not a digest")
        };
        assert_eq!(d.input.len, long.len() as u64);
        assert_eq!(d.input.hash, EventHash::ZERO, "no hash of a refused input");
        assert_eq!(d.input.prefix, &long[..256]);
        assert_eq!(
            d.refusal,
            Refusal::Invalid {
                text: content(&out).to_string()
            }
        );
        // Junk over 4 KiB too, and as a value.
        let junk = "not json ".repeat(600);
        assert!(
            content(&server.handle_line(&junk)).starts_with("Error: The input is not valid JSON")
        );
        assert!(matches!(last_body(&server), Body::RejectedDigest(_)));
        let value = json!({"command": 7, "pad": "q".repeat(5000)});
        server.handle(&value);
        let Body::RejectedDigest(d) = last_body(&server) else {
            panic!("not a digest")
        };
        assert_eq!(d.input.len, value.to_string().len() as u64);
        assert_eq!(d.input.hash, EventHash::ZERO, "no hash of a refused input");
        // Short rejected input stays whole, so replay re-parses it.
        server.handle_line("{\"command\":\"undo\"}");
        assert!(
            matches!(last_body(&server), Body::Rejected(r) if r.input == "{\"command\":\"undo\"}")
        );
        let report = server.client().verify().expect("verify");
        assert!(report.is_intact() && report.events == 4, "{report:?}");
    }
}

#[test]
fn content_over_the_file_limit_in_any_field_is_refused_whatever_the_tree_holds() {
    let s = TempStore::new();
    let server = MnemoMemoryToolServer::builder(s.client())
        .limits(Limits {
            max_file_bytes: 8,
            ..Limits::default()
        })
        .build()
        .expect("server");
    call(
        &server,
        json!({"command": "create", "path": "/memories/a", "file_text": "short"}),
    );
    let big = "z".repeat(9);
    for (input, want) in [
        (
            json!({"command": "create", "path": "/memories/a", "file_text": big}),
            "Error: /memories/a would hold 9 bytes, over the limit of 8 bytes for one memory file. Split the content across several files.",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a", "old_str": big, "new_str": "x"}),
            "Error: old_str is 9 bytes, over the limit of 8 bytes for one memory file, so no edit of /memories/a can use it. Split the content across several files.",
        ),
        (
            json!({"command": "str_replace", "path": "/memories//a", "old_str": "s", "new_str": big}),
            "Error: new_str is 9 bytes, over the limit of 8 bytes for one memory file, so no edit of /memories/a can use it. Split the content across several files.",
        ),
        (
            json!({"command": "insert", "path": "/memories/missing", "insert_line": 0, "insert_text": big}),
            "Error: insert_text is 9 bytes, over the limit of 8 bytes for one memory file, so no edit of /memories/missing can use it. Split the content across several files.",
        ),
    ] {
        assert_eq!(call(&server, input), (want.to_string(), true));
        assert!(matches!(
            last_body(&server),
            Body::RejectedDigest(RejectedDigest {
                refusal: Refusal::ContentTooLarge { .. },
                ..
            })
        ));
    }
    assert_eq!(
        server
            .client()
            .record("/memories/a")
            .expect("read")
            .expect("exists")
            .content,
        "short"
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact() && report.events == 5, "{report:?}");
}

#[test]
fn a_key_twice_in_one_object_is_an_error_that_names_it_and_changes_nothing() {
    let s = TempStore::new();
    let server = s.server();
    call(
        &server,
        json!({"command": "create", "path": "/memories/a", "file_text": "keep"}),
    );
    for (line, key) in [
        (
            r#"{"command":"view","path":"/memories/a","command":"delete"}"#,
            "command",
        ),
        (
            r#"{"type":"tool_use","id":"toolu_d","name":"memory","input":{"command":"view","path":"/memories/a","command":"delete"}}"#,
            "command",
        ),
        (
            r#"{"type":"tool_use","id":"toolu_e","name":"memory","input":{"command":"delete","path":"/memories/b","path":"/memories/a"}}"#,
            "path",
        ),
        (
            r#"{"type":"tool_use","id":"toolu_f","name":"memory","name":"memory","input":{"command":"delete","path":"/memories/a"}}"#,
            "name",
        ),
        (
            r#"{"command":"delete","path":"/memories/a","view_range":[{"x":1,"x":2}]}"#,
            "x",
        ),
        (
            r#"{"command":"delete","pa\u0074h":"/memories/b","path":"/memories/a"}"#,
            "path",
        ),
    ] {
        let out = server.handle_line(line);
        assert_eq!(out["is_error"], true, "{line}");
        assert_eq!(
            content(&out),
            format!(
                "Error: The input names the key \"{key}\" more than once in one object; send each field once, for example {{\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}}"
            ),
            "{line}"
        );
    }
    assert_eq!(
        server
            .client()
            .record("/memories/a")
            .expect("read")
            .expect("still there")
            .content,
        "keep"
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact() && report.events == 7, "{report:?}");
}

#[test]
fn duplicate_keys_and_invalid_utf8_through_the_binary() {
    let s = TempStore::new();
    let db = s.path();
    let lines: [&[u8]; 4] = [
        br#"{"command":"create","path":"/memories/a","file_text":"keep"}"#,
        br#"{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories/a","command":"delete"}}"#,
        b"{\"command\":\"create\",\"path\":\"/memories/\xff.txt\",\"file_text\":\"x\"}",
        b"\xc3\x28 not text",
    ];
    let mut input = lines.join(&b'\n');
    input.push(b'\n');
    let out = run_mnemo_bytes(&["tool", "--db", db.to_str().expect("utf-8")], &input);
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8 out")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(answers.len(), 4);
    assert!(
        content(&answers[1])
            .starts_with("Error: The input names the key \"command\" more than once")
    );
    for (i, at) in [(2, 38), (3, 0)] {
        assert_eq!(answers[i]["is_error"], true);
        assert_eq!(
            content(&answers[i]),
            format!(
                "Error: The input is not valid UTF-8 (byte {at} of {} starts an invalid sequence), so it was not read. Send each call as one line of UTF-8 JSON, for example {{\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}}",
                lines[i].len()
            )
        );
    }
    let third = digest_event(&db, 3);
    assert_eq!(
        third.input,
        InputDigest {
            len: lines[2].len() as u64,
            hash: EventHash::ZERO,
            prefix: String::from_utf8_lossy(lines[2]).into_owned(),
        },
        "the digest keeps the raw bytes' length and no hash; the prefix shows them with U+FFFD"
    );
    assert_eq!(third.refusal, Refusal::NotUtf8 { valid_up_to: 38 });
    let client = open_client(&db, "reader", mnemo::Durability::Fsync);
    assert_eq!(
        client
            .records_by_tag(mnemo::MEMORY_TAG)
            .expect("records")
            .len(),
        1,
        "nothing was created from the line that is not UTF-8"
    );
    drop(client);
    verify_intact(&db, 4);
}

/// `mnemo mcp` holds a line only up to the request limit: a longer one gets a JSON-RPC error that
/// says the limit, a message with a key twice gets one with its id, and the session goes on.
#[cfg(feature = "mcp")]
#[test]
fn mcp_refuses_an_oversized_message_and_duplicate_keys_and_goes_on() {
    let s = TempStore::new();
    let db = s.path();
    let args = ["mcp", "--db", db.to_str().expect("utf-8")];
    let limits = ["--durability", "buffered", "--max-request-bytes", "100000"];
    let (mut child, stdin, mut stdout) =
        spawn_piped(mnemo_command(&[&args[..], &limits].concat(), &[]));
    let mut stdin = stdin.expect("stdin");
    let mut reply = |stdin: &mut ChildStdin, line: &[u8]| -> Value {
        stdin.write_all(line).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
        let mut out = String::new();
        stdout.read_line(&mut out).expect("read a reply");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("reply is not JSON ({e}): {out}"))
    };
    let init = reply(
        &mut stdin,
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(init.get("result").is_some(), "{init}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .expect("write");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"memory","arguments":{{"command":"create","path":"/memories/a","file_text":"{}"}}}}}}"#,
        "a".repeat(200_000)
    );
    let refused = reply(&mut stdin, big.as_bytes());
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().expect("message");
    assert!(
        message.contains(&format!(
            "is {} bytes, over the limit of 100000 bytes",
            big.len()
        )) && message.contains("--max-request-bytes"),
        "{message}"
    );
    let dup = reply(
        &mut stdin,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories","command":"delete"}}}"#,
    );
    assert_eq!(
        (dup["id"].clone(), dup["error"]["code"].clone()),
        (json!(3), json!(-32600)),
        "{dup}"
    );
    assert!(
        dup["error"]["message"]
            .as_str()
            .expect("message")
            .contains("the key \"command\" more than once")
    );
    let listed = reply(
        &mut stdin,
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
    );
    assert_eq!(listed["id"], 4, "the session goes on: {listed}");
    assert!(listed.get("result").is_some(), "{listed}");
    drop(stdin);
    assert!(child.wait().expect("wait").success());
}
