//! `mnemo serve --data DIR`: many stores behind one server. Each store stays a store of its own
//! (it verifies alone), agent tokens act only in their store, names cannot leave `DIR`, and the
//! open stores (and so threads and descriptors) stay within `--max-open-stores`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::{Reply, Server, request};
use crate::support::{TempStore, mnemo_bin, run_mnemo};

/// How many stores the many-stores test makes (`MNEMO_DATA_STORES` for a longer run).
fn store_count() -> usize {
    std::env::var("MNEMO_DATA_STORES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120)
}

fn name(i: usize) -> String {
    format!("user-{i:04}")
}

fn create(server: &Server, name: &str) -> Reply {
    server.call(
        "POST",
        "/v1/stores",
        json!({ "name": name }).to_string().as_bytes(),
    )
}

fn write(server: &Server, store: &str, path: &str, text: &str) -> Reply {
    let call = json!({"command": "create", "path": path, "file_text": text});
    server.call(
        "POST",
        &format!("/v1/stores/{store}/memory"),
        call.to_string().as_bytes(),
    )
}

/// Every store name the server lists, page by page (`limit` a page), checking on each page that
/// no more stores are open than the cap.
fn all_listed(server: &Server, limit: usize, cap: u64) -> Vec<String> {
    let mut names = Vec::new();
    let mut after = String::new();
    loop {
        let page = server.json(&format!("/v1/stores?limit={limit}&after={after}"));
        assert!(page["open"].as_u64() <= Some(cap), "{page}");
        for store in page["stores"].as_array().expect("stores") {
            names.push(store["name"].as_str().expect("name").to_string());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_string(),
            None => return names,
        }
    }
}

/// The number of threads of process `pid`.
fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a thread count")
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd list")
        .count()
}

/// Many stores written through one server with at most 8 open: every write answered, the open
/// stores never above 8, threads and descriptors the same after 8 stores as after all of them,
/// every store listed, and each store verifies alone afterwards, by the library and by `mnemo
/// verify --db DIR/NAME`.
#[test]
fn many_stores_through_one_server_stay_bounded_and_each_verifies_alone() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(
        &dir,
        &["--max-open-stores", "8", "--durability", "buffered"],
    );
    let count = store_count();
    let mut bound = None;
    for i in 0..count {
        let store = name(i);
        let made = create(&server, &store);
        assert_eq!(made.status, 201, "{}", made.text());
        let written = write(&server, &store, "/memories/who.md", &store);
        assert_eq!(written.status, 200, "{}", written.text());
        let answer: Value = serde_json::from_slice(&written.body).expect("json");
        assert!(answer.get("is_error").is_none(), "{answer}");
        if i == 15 {
            // Past the cap already: what the server holds with 8 open.
            bound = Some((
                threads(server.child.id()),
                open_descriptors(server.child.id()),
            ));
        }
    }
    let (threads_at_16, fds_at_16) = bound.expect("measured");
    let (threads_now, fds_now) = (
        threads(server.child.id()),
        open_descriptors(server.child.id()),
    );
    assert!(
        threads_now <= threads_at_16 + 4,
        "threads grew with the stores: {threads_at_16} after 16, {threads_now} after {count}"
    );
    assert!(
        fds_now <= fds_at_16 + 8,
        "descriptors grew with the stores: {fds_at_16} after 16, {fds_now} after {count}"
    );
    let listed = all_listed(&server, 25, 8);
    let expected: Vec<String> = (0..count).map(name).collect();
    assert_eq!(listed, expected);
    // A store closed long ago reads back.
    let first = server.call("GET", "/v1/stores/user-0000/cat?path=/memories/who.md", b"");
    assert_eq!(first.text(), "user-0000");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");

    for i in 0..count {
        let path = dir.join(name(i));
        let store = mnemo::testing::Store::open(&path).expect("open alone");
        let report = mnemo::testing::verify_store(&store).expect("verify");
        assert!(report.is_intact(), "{}: {report:?}", name(i));
        assert_eq!(report.events, 1, "{}", name(i));
    }
    for i in [0, count / 2, count - 1] {
        let out = Command::new(mnemo_bin())
            .args(["verify", "--db"])
            .arg(dir.join(name(i)))
            .env_remove("MNEMO_URL")
            .env_remove("MNEMO_TOKEN")
            .output()
            .expect("verify");
        assert!(out.status.success(), "{out:?}");
    }
}

/// An agent token issued by store A acts in A only: every route of store B answers it 404, as
/// if B did not exist, and writes nothing there; the /v1/stores routes answer it 401.
#[test]
fn an_agent_token_acts_only_in_its_own_store() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    for store in ["a", "b"] {
        assert_eq!(create(&server, store).status, 201);
    }
    let issued = server.call("POST", "/v1/stores/a/tokens", br#"{"agent": "alice"}"#);
    assert_eq!(issued.status, 200, "{}", issued.text());
    let issued: Value = serde_json::from_slice(&issued.body).expect("json");
    let bearer = format!("Bearer {}", issued["token"].as_str().expect("token"));
    let auth = [("Authorization", bearer.as_str())];
    let call = br#"{"command":"create","path":"/memories/x.md","file_text":"x"}"#;
    let own = request(server.addr(), "POST", "/v1/stores/a/memory", &auth, call);
    assert_eq!(own.status, 200, "{}", own.text());
    let b_head = server.json("/v1/stores/b/head");
    for (method, target) in [
        ("POST", "/v1/stores/b/memory"),
        ("GET", "/v1/stores/b/records?tag=memorytool"),
        ("GET", "/v1/stores/b/log"),
        ("POST", "/v1/stores/b/tokens"),
        ("POST", "/v1/stores/b/mcp"),
        ("GET", "/v1/stores/nowhere/log"),
    ] {
        let reply = request(server.addr(), method, target, &auth, call);
        assert_eq!(reply.status, 404, "{method} {target}: {}", reply.text());
        assert!(reply.text().contains("no store"), "{}", reply.text());
    }
    assert_eq!(server.json("/v1/stores/b/head"), b_head, "B is unchanged");
    for (method, target, body) in [
        ("GET", "/v1/stores", &b""[..]),
        ("POST", "/v1/stores", &br#"{"name":"c"}"#[..]),
        ("DELETE", "/v1/stores/b?confirm=b", &b""[..]),
    ] {
        let reply = request(server.addr(), method, target, &auth, body);
        assert_eq!(reply.status, 401, "{method} {target}: {}", reply.text());
    }
    let names = all_listed(&server, 100, 64);
    assert_eq!(names, ["a", "b"], "nothing made or deleted");
    // In its own store the token still reaches only what an agent token reaches.
    let log = request(server.addr(), "GET", "/v1/stores/a/log", &auth, b"");
    assert_eq!(log.status, 403, "{}", log.text());
    // A revoke through the data server counts from the next request; an unknown id is 404.
    let id = issued["id"].as_str().expect("id");
    let unknown = server.call("DELETE", "/v1/stores/a/tokens/0000000000000000", b"");
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    let revoked = server.call("DELETE", &format!("/v1/stores/a/tokens/{id}"), b"");
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    // The store that revoked it says so, to the holder of the whole token only: store B, which
    // never issued it, still answers as if it did not exist.
    for target in [
        "/v1/stores/a/memory",
        "/v1/memory_stores/memstore_a/memories",
    ] {
        let method = if target.ends_with("memory") {
            "POST"
        } else {
            "GET"
        };
        let after = request(server.addr(), method, target, &auth, call);
        assert_eq!(after.status, 401, "{target}: {}", after.text());
        assert!(after.text().contains("revoked"), "{}", after.text());
    }
    let elsewhere = request(server.addr(), "POST", "/v1/stores/b/memory", &auth, call);
    assert_eq!(elsewhere.status, 404, "{}", elsewhere.text());
    assert!(
        !elsewhere.text().contains("revoked"),
        "{}",
        elsewhere.text()
    );
    let last = if bearer.ends_with('0') { '1' } else { '0' };
    let wrong_secret = format!("{}{last}", &bearer[..bearer.len() - 1]);
    let forged = [("Authorization", wrong_secret.as_str())];
    let forged = request(server.addr(), "POST", "/v1/stores/a/memory", &forged, call);
    assert_eq!(
        forged.status,
        404,
        "only the token's holder learns: {}",
        forged.text()
    );
    // Through `mnemo tool --connect`, the model is told the call was refused and why, never
    // that it may have been applied.
    let token = issued["token"].as_str().expect("token");
    let tool = crate::support::run_command(
        crate::support::served_command(
            &[
                "tool",
                "--connect",
                &server.file.url,
                "--token",
                token,
                "--store",
                "a",
            ],
            &[],
        ),
        &[call.as_slice(), b"\n"].concat(),
    );
    assert_eq!(tool.status.code(), Some(2), "{tool:?}");
    let answer: Value = serde_json::from_slice(&tool.stdout).expect("a tool_result");
    let content = answer["content"].as_str().expect("content");
    assert_eq!(answer["is_error"], true, "{content}");
    assert!(
        content.contains("refused")
            && content.contains("revoked")
            && content.contains("not applied"),
        "{content}"
    );
    assert!(!content.contains("may or may not"), "{content}");
}

/// Names that try to leave the data directory, and entries in it that are not stores (a link
/// to a store elsewhere, a FIFO, a store swapped for a link while closed), are refused before
/// any file outside is touched, and never listed.
#[test]
fn names_and_entries_that_leave_the_data_directory_are_refused() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(
        &dir,
        &["--durability", "buffered", "--store-idle-close", "0.2"],
    );
    for bad in [
        "..",
        "../x",
        "a/b",
        "A",
        "",
        ".hidden",
        "x".repeat(65).as_str(),
        "é",
    ] {
        let reply = create(&server, bad);
        assert_eq!(reply.status, 400, "{bad:?}: {}", reply.text());
        assert!(
            reply.text().contains("is not a store name"),
            "{}",
            reply.text()
        );
    }
    let reply = server.call("POST", "/v1/stores", br#"["x"]"#);
    assert_eq!(
        reply.status,
        400,
        "a body that is no object: {}",
        reply.text()
    );
    let huge = format!(r#"{{"name": "big", "pad": "{}"}}"#, "x".repeat(70 * 1024));
    let reply = server.call("POST", "/v1/stores", huge.as_bytes());
    assert_eq!(reply.status, 413, "a body over the limit: {}", reply.text());
    assert!(
        reply.text().contains("send at most 65536 bytes"),
        "{}",
        reply.text()
    );
    assert!(!dir.join("x").exists());
    for target in [
        "/v1/stores/../log",
        "/v1/stores/%2e%2e/log",
        "/v1/stores/..%2Fdata/log",
        "/v1/stores/A/log",
    ] {
        let reply = server.call("GET", target, b"");
        assert!(
            matches!(reply.status, 400 | 404),
            "{target}: {}",
            reply.text()
        );
    }
    // A store outside, linked in; a FIFO.
    let outside = data.dir.path().join("outside");
    let made = Command::new(mnemo_bin())
        .args(["tool", "--no-start", "--db"])
        .arg(&outside)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("make a store outside");
    assert!(made.status.success());
    std::os::unix::fs::symlink(&outside, dir.join("linked")).expect("symlink");
    let fifo = dir.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    for store in ["linked", "fifo"] {
        let reply = write(&server, store, "/memories/x.md", "x");
        assert_eq!(reply.status, 404, "{store}: {}", reply.text());
    }
    for taken in ["linked", "fifo"] {
        let reply = create(&server, taken);
        assert_eq!(reply.status, 409, "the name is taken: {}", reply.text());
        assert!(
            reply.text().contains("not a store") && !reply.text().contains("exists already"),
            "a name something else has is not said to be a store: {}",
            reply.text()
        );
    }
    // A store swapped for a link while it is closed.
    assert_eq!(create(&server, "s").status, 201);
    assert_eq!(write(&server, "s", "/memories/x.md", "x").status, 200);
    let closed = || {
        server.json("/v1/stores")["stores"]
            .as_array()
            .expect("stores")
            .iter()
            .all(|s| s["open"] == false)
    };
    super::super::discovery::wait_for(closed, "the store to close");
    std::fs::rename(dir.join("s"), dir.join("s-moved")).expect("move");
    std::os::unix::fs::symlink(&outside, dir.join("s")).expect("swap for a link");
    assert_eq!(write(&server, "s", "/memories/y.md", "y").status, 404);
    let names = all_listed(&server, 100, 64);
    assert_eq!(names, ["s-moved"], "only real store directories are listed");
    assert_files_unchanged(&outside);
}

/// The store made outside holds no write from the server.
fn assert_files_unchanged(outside: &Path) {
    let store = mnemo::testing::Store::open(outside).expect("open");
    let report = mnemo::testing::verify_store(&store).expect("verify");
    assert_eq!(report.events, 0, "{report:?}");
}

/// Deleting a store needs the operator and its name again; a second server on the same data
/// directory is refused.
#[test]
fn deleting_needs_confirmation_and_one_server_holds_a_data_directory() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    assert_eq!(create(&server, "keep").status, 201);
    let again = create(&server, "keep");
    assert_eq!(again.status, 409);
    assert!(again.text().contains("exists already"), "{}", again.text());
    assert_eq!(create(&server, "gone").status, 201);
    assert_eq!(write(&server, "gone", "/memories/x.md", "x").status, 200);
    let unconfirmed = server.call("DELETE", "/v1/stores/gone", b"");
    assert_eq!(unconfirmed.status, 400, "{}", unconfirmed.text());
    let wrong = server.call("DELETE", "/v1/stores/gone?confirm=keep", b"");
    assert_eq!(wrong.status, 400, "{}", wrong.text());
    assert!(dir.join("gone").is_dir());
    let deleted = server.call("DELETE", "/v1/stores/gone?confirm=gone", b"");
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert!(!dir.join("gone").exists());
    assert_eq!(write(&server, "gone", "/memories/x.md", "x").status, 404);
    assert_eq!(all_listed(&server, 100, 64), ["keep"]);
    let second = Command::new(mnemo_bin())
        .args(["serve", "--data"])
        .arg(&dir)
        .output()
        .expect("a second server");
    assert_eq!(second.status.code(), Some(2), "{second:?}");
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already served"),
        "{second:?}"
    );
    // A store directory is not a data directory.
    let store = Command::new(mnemo_bin())
        .args(["serve", "--data"])
        .arg(dir.join("keep"))
        .output()
        .expect("serve a store as data");
    assert_eq!(store.status.code(), Some(2), "{store:?}");
}

/// A data server holds its stores itself: a store another server holds (a `serve --db` on it)
/// is refused with a message that names that server, on the store's routes and on the
/// memory-stores API's, and served once that server is gone.
#[test]
fn a_store_another_server_holds_is_not_served_through_a_data_server() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    assert_eq!(create(&server, "held").status, 201);
    // Closed by deleting and re-creating nothing: stop the data server, let another hold it.
    drop(server);
    let other = Server::start(&dir.join("held"), &[]);
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    for route in [
        "/v1/stores/held/ls",
        "/v1/memory_stores/memstore_held/memories",
    ] {
        let refused = server.call("GET", route, b"");
        assert_eq!(refused.status, 500, "{route}: {}", refused.text());
        assert!(
            refused.text().contains("another mnemo server holds it"),
            "{route}: {}",
            refused.text()
        );
    }
    drop(other);
    let served = server.call("GET", "/v1/stores/held/ls", b"");
    assert_eq!(served.status, 200, "{}", served.text());
}

/// The command line reaches one store of a data server with `--connect URL --token T --store
/// NAME` (or `MNEMO_STORE`): `tool` writes there, the reads read there, and nothing reaches the
/// other store.
#[test]
fn the_command_line_names_a_store_of_a_data_server() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    for store in ["a", "b"] {
        assert_eq!(create(&server, store).status, 201);
    }
    let url = server.file.url.clone();
    let token = server.file.token.clone();
    let mnemo = |args: &[&str], env: &[(&str, &str)], stdin: &[u8]| {
        crate::support::run_command(crate::support::served_command(args, env), stdin)
    };
    let connect = ["--connect", url.as_str(), "--token", token.as_str()];
    let line = br#"{"command":"create","path":"/memories/in-a.md","file_text":"for a"}
"#;
    let out = mnemo(
        &[&["tool"][..], &connect, &["--store", "a"]].concat(),
        &[],
        line,
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("File created"),
        "{out:?}"
    );
    let cat = mnemo(
        &[&["cat"][..], &connect, &["/memories/in-a.md"]].concat(),
        &[("MNEMO_STORE", "a")],
        b"",
    );
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "for a", "{cat:?}");
    let ls_b = mnemo(
        &[&["ls"][..], &connect, &["--store", "b", "/"]].concat(),
        &[],
        b"",
    );
    assert!(ls_b.status.success(), "{ls_b:?}");
    assert!(
        !String::from_utf8_lossy(&ls_b.stdout).contains("in-a"),
        "{ls_b:?}"
    );
    let verify = mnemo(
        &[&["verify", "--json"][..], &connect, &["--store", "a"]].concat(),
        &[],
        b"",
    );
    let report: Value = serde_json::from_slice(&verify.stdout).expect("json");
    assert_eq!(report["events"], 1, "{report}");
    // The report names the store verified, not the --db default (it said memory.mnemo.db).
    let verify = mnemo(
        &[&["verify"][..], &connect, &["--store", "a"]].concat(),
        &[],
        b"",
    );
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(
        text.contains(&format!("store:      {url} store a\n")),
        "{text}"
    );
    assert_eq!(report["store"], format!("{url} store a"), "{report}");
    // From Rust: the same store through connect_store.
    let client = mnemo::MnemoClient::connect_store(&url, &token, "a").expect("a client");
    let record = client
        .record("/memories/in-a.md")
        .expect("read")
        .expect("the file");
    assert_eq!(record.content, "for a");
    let other = mnemo::MnemoClient::connect_store(&url, &token, "b").expect("b client");
    assert!(other.record("/memories/in-a.md").expect("read").is_none());
    let refused = mnemo::MnemoClient::connect_store(&url, &token, "../a").expect_err("a bad name");
    assert!(
        refused.to_string().contains("not a store name"),
        "{refused}"
    );
    let missing = mnemo(
        &[&["ls"][..], &connect, &["--store", "zz"]].concat(),
        &[],
        b"",
    );
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no store"),
        "{missing:?}"
    );
    let bad = mnemo(
        &[&["ls"][..], &connect, &["--store", "../a"]].concat(),
        &[],
        b"",
    );
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not a store name"),
        "{bad:?}"
    );
}

/// A data server killed with `kill -9` while four clients write to twenty stores: every write it
/// acknowledged is in its store, and every store verifies alone.
#[test]
fn a_killed_data_server_loses_no_acknowledged_write_in_any_store() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let mut server = Server::start_data(&dir, &["--max-open-stores", "6"]);
    let stores: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
    for store in &stores {
        assert_eq!(create(&server, store).status, 201);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let (stop, acked, count) = (Arc::clone(&stop), Arc::clone(&acked), Arc::clone(&count));
            let (addr, bearer, stores) = (server.addr(), server.bearer(), stores.clone());
            std::thread::spawn(move || {
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let store = &stores[(t * 5 + n) % stores.len()];
                    let path = format!("/memories/t{t}-{n}.md");
                    let call = json!({"command": "create", "path": path, "file_text": path});
                    let target = format!("/v1/stores/{store}/memory");
                    let sent = super::try_request(
                        addr,
                        "POST",
                        &target,
                        &[("Authorization", &bearer)],
                        call.to_string().as_bytes(),
                    );
                    match sent {
                        Ok(reply) if reply.status == 200 && !reply.text().contains("is_error") => {
                            acked.lock().expect("lock").push((store.clone(), path));
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => return,
                    }
                }
            })
        })
        .collect();
    let started = std::time::Instant::now();
    while count.load(Ordering::SeqCst) < 150 && started.elapsed() < super::WAIT {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    server.child.kill().expect("kill -9");
    let _ = server.child.wait();
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().expect("writer");
    }
    let acked = acked.lock().expect("lock").clone();
    assert!(
        acked.len() >= 150,
        "only {} writes were acknowledged",
        acked.len()
    );
    for store in &stores {
        let opened = mnemo::testing::Store::open(&dir.join(store)).expect("open alone");
        let report = mnemo::testing::verify_store(&opened).expect("verify");
        assert!(report.is_intact(), "{store}: {report:?}");
    }
    let mut clients = std::collections::HashMap::new();
    for (store, path) in &acked {
        let client = clients.entry(store.clone()).or_insert_with(|| {
            mnemo::MnemoClient::open(dir.join(store), "check").expect("open alone")
        });
        let record = client
            .record(path)
            .expect("read")
            .expect("an acknowledged file");
        assert_eq!(record.content, *path, "{store} {path}");
    }
}

/// `mnemo store create|list|delete`: on a data directory no server holds (directly, under its
/// lock), through the server that serves it (found by its file), and through `--connect`; a
/// delete asks for the name again; a name that is not one is refused before any file is made.
#[test]
fn the_store_command_manages_a_data_directory_directly_or_through_its_server() {
    let t = TempStore::new();
    let dir = t.dir.path().join("data");
    let d = dir.to_str().expect("utf-8").to_string();
    let mnemo = |args: &[&str]| {
        let out = Command::new(mnemo_bin())
            .args(args)
            .env_remove("MNEMO_URL")
            .env_remove("MNEMO_TOKEN")
            .output()
            .expect("run mnemo");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // No data directory yet.
    let (code, _, err) = mnemo(&["store", "list", "--data", &d]);
    assert_eq!(code, Some(2), "{err}");
    std::fs::create_dir(&dir).expect("mkdir");
    let (code, out, err) = mnemo(&["store", "create", "alpha", "--data", &d]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("created the store alpha"), "{out}");
    assert!(dir.join("alpha/db").is_file());
    let (code, _, err) = mnemo(&["store", "create", "alpha", "--data", &d]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("exists already"), "{err}");
    for bad in ["../escape", "Alpha", "a/b", ".hidden"] {
        let (code, _, err) = mnemo(&["store", "create", bad, "--data", &d]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("is not a store name"), "{bad}: {err}");
    }
    assert!(!t.dir.path().join("escape").exists());
    // A link planted in the directory is no store.
    std::os::unix::fs::symlink(dir.join("alpha"), dir.join("linked")).expect("ln");
    let (_, out, _) = mnemo(&["store", "list", "--data", &d]);
    assert_eq!(out, "alpha\n");
    // With a server on the directory, the command goes through it.
    let server = Server::start_data(&dir, &[]);
    let (code, out, err) = mnemo(&["store", "create", "beta", "--data", &d]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&server.addr().to_string()),
        "through the server: {out}"
    );
    let (_, out, _) = mnemo(&["store", "list", "--data", &d, "--json"]);
    let listed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(listed.len(), 2, "{out}");
    assert_eq!(listed[1]["name"], "beta");
    assert_eq!(
        listed[1]["open"], true,
        "beta was opened by its creation: {out}"
    );
    let (url, token) = (
        format!("http://{}", server.addr()),
        server.file.token.clone(),
    );
    let (code, _, err) = mnemo(&[
        "store",
        "delete",
        "beta",
        "--connect",
        &url,
        "--token",
        &token,
    ]);
    assert_eq!(code, Some(2), "no confirmation: {err}");
    assert!(err.contains("--confirm beta"), "{err}");
    let (code, out, err) = mnemo(&[
        "store",
        "delete",
        "beta",
        "--confirm",
        "beta",
        "--connect",
        &url,
        "--token",
        &token,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("deleted the store beta"), "{out}");
    assert!(!dir.join("beta").exists());
    let (code, _, err) = mnemo(&["store", "list", "--connect", &url, "--token", "mnemo_wrong"]);
    assert_eq!(code, Some(2), "{err}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    // Directly again: the store the server made is a store of its own.
    let (code, out, err) = mnemo(&[
        "store",
        "delete",
        "alpha",
        "--confirm",
        "alpha",
        "--data",
        &d,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("deleted the store alpha"), "{out}");
    let (_, out, _) = mnemo(&["store", "list", "--data", &d]);
    assert_eq!(out, "", "{out}");
}

/// `mnemo serve --data DIR --replicate URL`: each store is shipped to a replica of its own,
/// `URL/NAME`, while it is open and once more as it closes (evicted by the cap, or at the
/// server's stop), so each restores alone with every acknowledged write.
#[cfg(feature = "replicate")]
#[test]
fn a_data_server_ships_each_store_to_a_replica_of_its_own() {
    let t = TempStore::new();
    let dir = t.dir.path().join("data");
    let base = format!("file://{}", t.dir.path().join("replicas").display());
    let server = Server::start_data(
        &dir,
        &[
            "--replicate",
            &base,
            "--replicate-interval",
            "0.05",
            "--max-open-stores",
            "1",
        ],
    );
    for store in ["alpha", "beta"] {
        assert_eq!(create(&server, store).status, 201);
    }
    // With one store open at a time, each write below closes the other store.
    for (store, path) in [
        ("alpha", "/memories/a1.md"),
        ("beta", "/memories/b1.md"),
        ("alpha", "/memories/a2.md"),
    ] {
        let reply = write(&server, store, path, "x\n");
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let status = server.json("/v1/stores/alpha/replication");
    assert!(
        status["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/alpha")),
        "{status}"
    );
    let (stopped, stderr) = server.stop();
    assert!(stopped.success(), "{stderr}");
    for (store, files) in [("alpha", "a1.md a2.md"), ("beta", "b1.md")] {
        let url = format!("{base}/{store}");
        let restored = t.dir.path().join(format!("restored-{store}"));
        let r = restored.to_str().expect("utf-8");
        crate::redact::run_ok(&["restore", "--from", &url, "--db", r], "");
        let listed = crate::redact::run_ok(&["ls", "/memories", "--db", r], "");
        for file in files.split(' ') {
            assert!(listed.contains(file), "{store}: {listed}");
        }
        assert_eq!(
            listed.lines().filter(|l| l.contains(".md")).count(),
            files.split(' ').count(),
            "{store} holds only its own files: {listed}"
        );
        assert!(crate::redact::run_ok(&["verify", "--from", &url], "").contains("INTACT"));
    }
}

/// How many client processes and stores the spread test uses (`MNEMO_DATA_CLIENTS` and
/// `MNEMO_DATA_SPREAD` for the issue's 64 over 200).
fn spread() -> (usize, usize) {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    };
    (var("MNEMO_DATA_CLIENTS", 16), var("MNEMO_DATA_SPREAD", 40))
}

/// Client processes (`mnemo tool --connect --store`, each a mixed session of the six commands)
/// spread over more stores than may be open, with `--max-open-stores 8`: the open count never
/// passes 8 (a request finding every open store busy gets 503, which the client retries), every
/// answer a client got is the one its store's log records for that call, and every store
/// verifies alone afterwards.
#[test]
fn client_processes_spread_over_many_stores_get_the_answers_their_logs_record() {
    let (clients, stores) = spread();
    let t = TempStore::new();
    let dir = t.dir.path().join("data");
    let server = Server::start_data(&dir, &["--max-open-stores", "8"]);
    for s in 0..stores {
        assert_eq!(create(&server, &name(s)).status, 201);
    }
    let url = format!("http://{}", server.addr());
    let token = server.file.token.clone();
    // Watches the open count while the clients run.
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (running, addr, bearer) = (running.clone(), server.addr(), server.bearer());
        std::thread::spawn(move || {
            let mut most = 0;
            while running.load(std::sync::atomic::Ordering::SeqCst) {
                let reply = request(
                    addr,
                    "GET",
                    "/v1/stores?limit=1",
                    &[("Authorization", &bearer)],
                    b"",
                );
                let page: Value = serde_json::from_slice(&reply.body).expect("json");
                most = most.max(page["open"].as_u64().expect("open"));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            most
        })
    };
    let session = |c: usize| -> String {
        let dir = format!("/memories/c{c}");
        let calls = [
            json!({"command": "create", "path": format!("{dir}/n.md"), "file_text": "one\ntwo\n"}),
            json!({"command": "view", "path": "/memories"}),
            json!({"command": "str_replace", "path": format!("{dir}/n.md"), "old_str": "two", "new_str": "TWO"}),
            json!({"command": "insert", "path": format!("{dir}/n.md"), "insert_line": 1, "insert_text": "x\n"}),
            json!({"command": "view", "path": format!("{dir}/n.md")}),
            json!({"command": "rename", "old_path": format!("{dir}/n.md"), "new_path": format!("{dir}/m.md")}),
            json!({"command": "str_replace", "path": format!("{dir}/missing.md"), "old_str": "a", "new_str": "b"}),
            json!({"command": "delete", "path": format!("{dir}/m.md")}),
        ];
        calls
            .iter()
            .enumerate()
            .map(|(i, input)| {
                json!({"type": "tool_use", "id": format!("toolu_c{c}_{i}"), "name": "memory", "input": input}).to_string() + "\n"
            })
            .collect()
    };
    // Each client's store: spread over all of them, several clients on some.
    let store_of = |c: usize| name((c * 7) % stores);
    let children: Vec<_> = (0..clients)
        .map(|c| {
            let mut child = crate::support::served_command(
                &[
                    "tool",
                    "--connect",
                    &url,
                    "--token",
                    &token,
                    "--store",
                    &store_of(c),
                ],
                &[],
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a client");
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(session(c).as_bytes())
                .expect("send the session");
            child
        })
        .collect();
    let answers: Vec<Vec<Value>> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).expect("a tool_result line"))
                .collect()
        })
        .collect();
    running.store(false, std::sync::atomic::Ordering::SeqCst);
    let most = watcher.join().expect("watcher");
    assert!(most <= 8, "{most} stores were open at once");
    let (stopped, stderr) = server.stop();
    assert!(stopped.success(), "{stderr}");
    for (c, got) in answers.iter().enumerate() {
        assert_eq!(got.len(), 8, "client {c}");
        let db = dir.join(store_of(c));
        let log =
            crate::redact::run_ok(&["log", "--db", db.to_str().expect("utf-8"), "--json"], "");
        let events: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        for (i, result) in got.iter().enumerate() {
            let id = format!("toolu_c{c}_{i}");
            let event = events
                .iter()
                .find(|e| e["tool_use_id"] == id.as_str())
                .unwrap_or_else(|| panic!("client {c}: no event for {id}"));
            let text = result["content"].as_str().expect("a text answer");
            assert!(
                crate::support::records_answer(event, text),
                "client {c}, {id}: {text}"
            );
            assert_eq!(
                event["is_error"],
                result["is_error"].as_bool().unwrap_or(false),
                "{id}"
            );
        }
    }
    for s in 0..stores {
        let db = dir.join(name(s));
        let report = crate::redact::run_ok(&["verify", "--db", db.to_str().expect("utf-8")], "");
        // A store no client chose holds no events.
        assert!(
            report.contains("INTACT") || report.contains("EMPTY"),
            "{}: {report}",
            name(s)
        );
    }
}

/// API updates with a precondition, racing memory-tool renames of the directory above their
/// memories: the memories live throughout, so no update is answered 404 (the server looks each
/// up by its identity under the writer lock), each applies, and the store verifies.
#[test]
fn api_updates_racing_renames_of_their_directory_never_miss_the_memory() {
    use mnemo::testing::tool::{content_sha256, hex};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    assert_eq!(create(&server, "race").status, 201);
    let memories = "/v1/memory_stores/memstore_race/memories";
    let (updaters, updates, renamers) = (4, 250, 24);
    let ids: Vec<String> = (0..updaters)
        .map(|k| {
            let made = server.call(
                "POST",
                memories,
                json!({"path": format!("/d0/m{k}.md"), "content": "v0"})
                    .to_string()
                    .as_bytes(),
            );
            assert_eq!(made.status, 200, "{}", made.text());
            let made: Value = serde_json::from_slice(&made.body).expect("json");
            made["id"].as_str().expect("an id").to_string()
        })
        .collect();
    let done = AtomicBool::new(false);
    let renames = AtomicU64::new(0);
    let missed: Vec<String> = std::thread::scope(|scope| {
        // The renamers move the directory back and forth (a rename that finds it gone is
        // answered with an error and changes nothing).
        for t in 0..renamers {
            let (server, done, renames) = (&server, &done, &renames);
            scope.spawn(move || {
                let mut at = t % 2;
                while !done.load(Ordering::SeqCst) {
                    let (from, to) = (format!("/memories/d{at}"), format!("/memories/d{}", 1 - at));
                    let call = json!({"command": "rename", "old_path": from, "new_path": to});
                    let reply = server.call(
                        "POST",
                        "/v1/stores/race/memory",
                        call.to_string().as_bytes(),
                    );
                    assert_eq!(reply.status, 200, "renamer {t}: {}", reply.text());
                    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
                    if answer.get("is_error").is_none() {
                        renames.fetch_add(1, Ordering::Relaxed);
                    }
                    at = 1 - at;
                }
            });
        }
        let updating: Vec<_> = ids
            .iter()
            .map(|id| {
                let server = &server;
                scope.spawn(move || {
                    let mut missed = Vec::new();
                    let mut content = "v0".to_string();
                    for i in 1..=updates {
                        let next = format!("v{i}");
                        let digest = hex(&content_sha256(&content));
                        let body = json!({
                            "content": next,
                            "precondition": {"type": "content_sha256", "content_sha256": digest},
                        });
                        let target = format!("{memories}/{id}");
                        let reply = server.call("POST", &target, body.to_string().as_bytes());
                        match reply.status {
                            200 => content = next,
                            404 => missed.push(reply.text()),
                            other => panic!("update {i} of {id}: {other} {}", reply.text()),
                        }
                    }
                    missed
                })
            })
            .collect();
        let missed = updating
            .into_iter()
            .flat_map(|updater| updater.join().expect("an updater"))
            .collect();
        done.store(true, Ordering::SeqCst);
        missed
    });
    let renames = renames.load(Ordering::Relaxed);
    assert!(renames > 0, "the renames ran");
    assert!(
        missed.is_empty(),
        "{} of {} updates missed a live memory ({renames} renames): {:?}",
        missed.len(),
        updaters * updates,
        missed.first()
    );
    assert_eq!(server.json("/v1/stores/race/verify")["status"], "intact");
}

/// Every answer of the memory-stores API names its request, as the hosted API does and as the
/// SDKs print with each error: a `request-id` header, and `request_id` in an error's body (the
/// same id). Issue 44, item 3 (in part).
#[test]
fn memory_stores_answers_name_their_request() {
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let listed = server.call("GET", "/v1/memory_stores", b"");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let id = listed.header("request-id").expect("a request-id header");
    assert!(
        id.starts_with("req_") && id.len() == 28,
        "a request id: {id}"
    );
    let missing = server.call("GET", "/v1/memory_stores/memstore_nothere", b"");
    assert_eq!(missing.status, 404, "{}", missing.text());
    let header = missing.header("request-id").expect("a request-id header");
    assert_ne!(header, id, "each request its own id");
    let body: Value = serde_json::from_slice(&missing.body).expect("json");
    assert_eq!(body["request_id"], header, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
}

/// Issue 44, item 4: a memory store's label is chained. Metadata set to null is removed; an
/// archived store refuses the memory tool's changes as well as the API's (its memories are read
/// and deleted); a label copy beside the log edited to un-archive the store changes nothing the
/// server answers, and `verify` names it.
#[test]
fn a_stores_label_is_chained_and_archiving_holds_every_route() {
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let call = |method: &str, target: &str, body: Value| server.api(method, target, &body);
    let (status, made) = call(
        "POST",
        "/v1/memory_stores",
        json!({"name": "labelled", "metadata": {"team": "a", "old": "x"}}),
    );
    assert_eq!(status, 200, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let name = id.trim_start_matches("memstore_").to_string();
    let (status, changed) = call(
        "POST",
        &format!("/v1/memory_stores/{id}"),
        json!({"metadata": {"old": null, "new": "y"}}),
    );
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        changed["metadata"],
        json!({"team": "a", "new": "y"}),
        "{changed}"
    );
    let (status, kept) = call(
        "POST",
        &format!("/v1/memory_stores/{id}/memories"),
        json!({"path": "/kept.md", "content": "kept\n"}),
    );
    assert_eq!(status, 200, "{kept}");
    let (status, archived) = call(
        "POST",
        &format!("/v1/memory_stores/{id}/archive"),
        Value::Null,
    );
    assert_eq!(status, 200, "{archived}");
    assert!(archived["archived_at"].is_string(), "{archived}");
    let refused_everywhere = |when: &str| {
        let tool = server.call(
            "POST",
            &format!("/v1/stores/{name}/memory"),
            json!({"command": "create", "path": "/memories/new.md", "file_text": "x"})
                .to_string()
                .as_bytes(),
        );
        let text = tool.text();
        assert!(
            text.contains("archived") && text.contains("\"is_error\":true"),
            "{when}: {text}"
        );
        let (status, api) = call(
            "POST",
            &format!("/v1/memory_stores/{id}/memories"),
            json!({"path": "/new.md", "content": "x"}),
        );
        assert_eq!(status, 400, "{when}: {api}");
        let (status, store) = call("GET", &format!("/v1/memory_stores/{id}"), Value::Null);
        assert_eq!(status, 200, "{when}: {store}");
        assert!(store["archived_at"].is_string(), "{when}: {store}");
        assert_eq!(
            store["metadata"],
            json!({"team": "a", "new": "y"}),
            "{when}: {store}"
        );
    };
    refused_everywhere("archived");
    // The copy beside the log, edited to un-archive the store and forge its metadata.
    let copy = data.path().join(&name).join("mnemo-memory-store.json");
    let mut forged: Value =
        serde_json::from_slice(&std::fs::read(&copy).expect("the label's copy")).expect("json");
    forged["archived_ms"] = Value::Null;
    forged["metadata"] = json!({"team": "mallory"});
    std::fs::write(&copy, forged.to_string()).expect("forge");
    refused_everywhere("after the copy was forged");
    // Its memories are still read and deleted.
    let memory = kept["id"].as_str().expect("memory id");
    let (status, read) = call(
        "GET",
        &format!("/v1/memory_stores/{id}/memories/{memory}"),
        Value::Null,
    );
    assert_eq!(status, 200, "{read}");
    let (status, deleted) = call(
        "DELETE",
        &format!("/v1/memory_stores/{id}/memories/{memory}"),
        Value::Null,
    );
    assert_eq!(status, 200, "{deleted}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    // The server wrote the copy again when the API named the store; forged once more, with no
    // server to write it, `verify` names it.
    assert_ne!(
        std::fs::read_to_string(&copy).expect("the copy"),
        forged.to_string(),
        "the server wrote the copy again"
    );
    std::fs::write(&copy, forged.to_string()).expect("forge");
    let out = run_mnemo(
        &[
            "verify",
            "--db",
            data.path().join(&name).to_str().expect("utf-8"),
        ],
        "",
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("label"), "{said}");
}

/// Found by an attack on chained labels: one store's label copy that cannot be trusted (a
/// symlink, open to other users, not JSON) leaves every store listed (it is listed as named after
/// its directory), and a copy that went missing is written again the next time the API names its
/// store, so the list shows it archived again.
#[test]
fn a_bad_or_missing_label_copy_never_spoils_the_list_of_stores() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let call = |method: &str, target: &str, body: Value| server.api(method, target, &body);
    let mut ids = Vec::new();
    for name in ["one", "two", "three"] {
        let (status, made) = call("POST", "/v1/memory_stores", json!({"name": name}));
        assert_eq!(status, 200, "{made}");
        ids.push(made["id"].as_str().expect("id").to_string());
    }
    let copy = |id: &str| {
        data.path()
            .join(id.trim_start_matches("memstore_"))
            .join("mnemo-memory-store.json")
    };
    let listed = || {
        let (status, page) = call(
            "GET",
            "/v1/memory_stores?include_archived=true&limit=100",
            Value::Null,
        );
        assert_eq!(status, 200, "{page}");
        page["data"].as_array().expect("data").clone()
    };
    std::fs::set_permissions(copy(&ids[0]), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::write(copy(&ids[1]), b"not json").expect("spoil");
    assert_eq!(listed().len(), 3, "every store is listed");
    // The third store archived, then its copy lost (as a restore from its replica leaves it).
    let (status, _) = call(
        "POST",
        &format!("/v1/memory_stores/{}/archive", ids[2]),
        Value::Null,
    );
    assert_eq!(status, 200);
    std::fs::remove_file(copy(&ids[2])).expect("remove the copy");
    let (status, store) = call("GET", &format!("/v1/memory_stores/{}", ids[2]), Value::Null);
    assert_eq!(status, 200, "{store}");
    assert!(store["archived_at"].is_string(), "{store}");
    let third = listed()
        .into_iter()
        .find(|s| s["id"] == ids[2].as_str())
        .expect("listed");
    assert!(third["archived_at"].is_string(), "{third}");
    assert_eq!(third["name"], "three", "{third}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
}

/// A store of a data directory named with `--db` while the `--data` server holds it: every
/// command says which server holds it and how to reach it there (`--connect URL --store NAME`,
/// the token in DIR's server file), and `tool` starts no server of its own first. An agent
/// token on a read is told about the token it gave, and the 401 names DIR's server file.
#[test]
fn a_data_servers_store_named_by_db_is_pointed_to_its_server() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(&dir, &["--durability", "buffered"]);
    assert_eq!(create(&server, "a").status, 201);
    let url = server.file.url.clone();
    let store = dir.join("a");
    let store = store.to_str().expect("utf-8");
    let server_file = dir.join("mnemo-server.json");
    for args in [
        &["ls", "--db", store][..],
        &["log", "--db", store],
        &["verify", "--db", store],
        &["tool", "--db", store],
        &["link", "--db", store],
        // Nor is a server started for it alone, which would lock its own server out of it.
        &["serve", "--db", store, "--listen", "127.0.0.1:0"],
        &["ui", "--db", store],
    ] {
        let out = crate::support::run_command(crate::support::served_command(args, &[]), b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("--connect {url} --store a --token TOKEN"))
                && err.contains(&format!(
                    "the operator token is in {}",
                    server_file.display()
                ))
                && !err.contains("started a server")
                && !err.contains("in the store directory"),
            "{args:?}: {err}"
        );
    }
    // The store named from inside it (`--db .`), and a store the directory does not hold yet.
    let mut inside = crate::support::served_command(&["tool", "--db", "."], &[]);
    inside.current_dir(dir.join("a"));
    let out = crate::support::run_command(inside, b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is the store a of"), "{err}");
    let missing = dir.join("b");
    let args = ["link", "--db", missing.to_str().expect("utf-8")];
    let out = crate::support::run_command(crate::support::served_command(&args, &[]), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("would be the store b of") && err.contains("mnemo store create b --data"),
        "{err}"
    );
    assert!(
        !missing.exists(),
        "nothing was made at {}",
        missing.display()
    );
    let issued = server.call("POST", "/v1/stores/a/tokens", br#"{"agent": "alice"}"#);
    assert_eq!(issued.status, 200, "{}", issued.text());
    let issued: Value = serde_json::from_slice(&issued.body).expect("json");
    let token = issued["token"].as_str().expect("token");
    for command in ["ls", "log"] {
        let args = [command, "--connect", &url, "--token", token, "--store", "a"];
        let out = crate::support::run_command(crate::support::served_command(&args, &[]), b"");
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the token given (--token or MNEMO_TOKEN) acts only as agent \"alice\"")
                && err.contains("give them the operator's token")
                && !err.contains("X-Mnemo-Agent"),
            "{command}: {err}"
        );
    }
    let anonymous = request(server.addr(), "GET", "/v1/stores", &[], b"");
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    assert!(
        anonymous
            .text()
            .contains("in DIR of a `mnemo serve --data DIR`"),
        "{}",
        anonymous.text()
    );
}

/// A change named by `--db` to a store its data server has closed (idle) is refused too, and made
/// through the server: the server may open the store at any moment.
#[test]
fn a_change_to_a_closed_store_of_a_data_server_goes_through_its_server() {
    let data = TempStore::new();
    let dir = data.dir.path().join("data");
    let server = Server::start_data(
        &dir,
        &["--durability", "buffered", "--store-idle-close", "0.2"],
    );
    assert_eq!(create(&server, "a").status, 201);
    let url = server.file.url.clone();
    let store = dir.join("a");
    let store = store.to_str().expect("utf-8");
    let before = std::fs::read_dir(dir.join("a")).expect("the store").count();
    std::thread::sleep(std::time::Duration::from_millis(800));
    for args in [
        &["config", "set", "--db", store, "delete", "keep"][..],
        &[
            "acl", "grant", "--db", store, "--agent", "z", "--prefix", "/", "--access", "read",
        ],
        &["token", "create", "--db", store, "--agent", "z"],
    ] {
        let out = crate::support::run_command(crate::support::served_command(args, &[]), b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("--connect {url} --store a --token TOKEN")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.join("a")).expect("the store").count(),
        before,
        "nothing was written beside the store"
    );
    let log = server.call("GET", "/v1/stores/a/log", b"");
    assert_eq!(log.status, 200, "{}", log.text());
    assert!(
        !log.text().contains("delete"),
        "no setting was made: {}",
        log.text()
    );
}
