//! A fleet of `mnemo serve --fleet URL` nodes sharing a bucket (a `file://` directory; SeaweedFS's
//! S3 under `MNEMO_TEST_S3`): any node answers any store; a node killed or stopped past its lease
//! loses no acknowledged write and gets none acknowledged after another node took its store over;
//! a drained node hands its stores over with no request failing.

use std::sync::atomic::{AtomicBool, Ordering};

use mnemo::Seq;
use mnemo::testing::fleet::bucket::Bucket;
use mnemo::testing::fleet::wal::{Position, Wal};

use super::*;
use crate::support::bucket_url;

// The viewer's login known to every node.
mod viewer;

/// How long leases last in these tests (S3's stamps are to the second, so longer there).
fn ttl() -> f64 {
    match std::env::var("MNEMO_TEST_S3") {
        Ok(base) if !base.is_empty() => 6.0,
        _ => 2.0,
    }
}

/// A free loopback port (a node must listen on a known one to advertise it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Node `id` of the fleet at `url`, its copies under `t`.
fn node(t: &TempStore, url: &str, id: &str) -> Server {
    node_with(t, url, id, &[])
}

/// [`node`] with the options `extra` too.
fn node_with(t: &TempStore, url: &str, id: &str, extra: &[&str]) -> Server {
    let dir = t.dir.path().join(id);
    let listen = format!("127.0.0.1:{}", free_port());
    let ttl = ttl().to_string();
    let mut args = vec![
        "--fleet",
        url,
        "--node-id",
        id,
        "--listen",
        &listen,
        "--lease-ttl",
        &ttl,
    ];
    args.extend_from_slice(extra);
    Server::start_data(&dir, &args)
}

fn signal(sig: &str, pid: u32) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid}");
}

/// `create` of `path` in `store` through `server`, retried while it answers 503 (a store being
/// taken over): whether it was acknowledged (200 and no error result).
fn write(server: &Server, store: &str, path: &str, extra: &[(&str, &str)]) -> bool {
    let input = json!({"command": "create", "path": path, "file_text": path});
    let started = Instant::now();
    loop {
        let bearer = server.bearer();
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend_from_slice(extra);
        let reply = try_request(
            server.addr(),
            "POST",
            &format!("/v1/stores/{store}/memory"),
            &headers,
            input.to_string().as_bytes(),
        );
        match reply {
            Ok(reply) if reply.status == 503 && extra.is_empty() && started.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(reply) => {
                let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
                if std::env::var("FLEET_DEBUG").is_ok() {
                    eprintln!("write {path}: {} {}", reply.status, reply.text());
                }
                return reply.status == 200 && body["is_error"] != json!(true);
            }
            Err(_) => return false,
        }
    }
}

/// `server`'s answer to a request with the operator token once the store it names has settled:
/// a store moving between nodes (taken over after a kill, or from a node resumed past its lease)
/// is answered 503 (the memory-stores API: 529) until its new holder serves it, which takes about
/// a lease; asked again until then, for at most five leases.
fn settled(server: &Server, method: &str, target: &str, body: &[u8]) -> crate::serve::Reply {
    let deadline = Instant::now() + Duration::from_secs_f64(ttl() * 5.0);
    loop {
        let reply = server.call(method, target, body);
        if !matches!(reply.status, 503 | 529) || Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `server`'s answer to a view of the root of `store`, once the store settled.
fn viewed(server: &Server, store: &str) -> crate::serve::Reply {
    settled(
        server,
        "POST",
        &format!("/v1/stores/{store}/memory"),
        json!({"command": "view", "path": "/memories"})
            .to_string()
            .as_bytes(),
    )
}

/// The files of `store` as `server` answers a view of its root.
fn files(server: &Server, store: &str) -> String {
    let reply = viewed(server, store);
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.text()
}

/// The header with which the node `via` answers a write to `store` itself, as it answers a
/// request another node forwarded to it (proved with the fleet's operator token).
fn as_forwarded(via: &Server, store: &str) -> String {
    let key = mnemo::testing::fleet::forwarding::key(&via.file.token);
    mnemo::testing::fleet::forwarding::sign(
        &key,
        "test",
        "POST",
        &format!("/v1/stores/{store}/memory"),
    )
}

/// The store's log in the bucket, read back with every invariant checked: its events' seqs.
fn log_of(url: &str, store: &str) -> Vec<Seq> {
    let wal = Wal::new(
        std::sync::Arc::new(Bucket::open(url).expect("bucket")),
        store,
    );
    let (_, records) = wal
        .scan(&Position::START)
        .expect("the fleet log reads back intact");
    records.into_iter().map(|(seq, _)| seq).collect()
}

/// `mnemo fleet status --json` of the fleet at `url`.
fn status(url: &str) -> Value {
    let out = crate::support::run_mnemo(
        &[
            "fleet",
            "status",
            "--fleet",
            url,
            "--lease-ttl",
            &ttl().to_string(),
            "--json",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status JSON")
}

#[test]
fn any_node_answers_any_store_and_a_killed_holder_loses_no_acknowledged_write() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let mut nodes: Vec<Server> = ["a", "b", "c"]
        .iter()
        .map(|id| node(&t, &url, id))
        .collect();
    let stores = ["s0", "s1", "s2"];
    for (i, store) in stores.iter().enumerate() {
        let (code, body) = nodes[i].api("POST", "/v1/stores", &json!({"name": store}));
        assert_eq!(code, 201, "{body}");
    }
    for node in &nodes {
        let (code, _) = node.api("POST", "/v1/stores", &json!({"name": "s0"}));
        assert_eq!(
            code, 409,
            "a store of the fleet exists on every node, its holder's too"
        );
    }
    let mut acked: Vec<(String, String)> = Vec::new();
    for i in 0..18 {
        let (store, path) = (stores[i % 3], format!("/memories/before-{i}.md"));
        assert!(
            write(&nodes[(i / 3) % 3], store, &path, &[]),
            "{store} {path}"
        );
        acked.push((store.to_string(), path));
    }
    // An agent token is an event of its store: issued through one node, it acts through any
    // (and only in its store).
    let issued = nodes[1].call("POST", "/v1/stores/s2/tokens", br#"{"agent": "alice"}"#);
    assert_eq!(issued.status, 200, "{}", issued.text());
    let issued: Value = serde_json::from_slice(&issued.body).expect("json");
    let agent = format!("Bearer {}", issued["token"].as_str().expect("a token"));
    let call = br#"{"command":"create","path":"/memories/alice.md","file_text":"x"}"#;
    for (store, status) in [("s2", 200), ("s1", 404)] {
        let reply = request(
            nodes[0].addr(),
            "POST",
            &format!("/v1/stores/{store}/memory"),
            &[("Authorization", agent.as_str())],
            call,
        );
        assert_eq!(reply.status, status, "{store}: {}", reply.text());
    }
    acked.push(("s2".to_string(), "/memories/alice.md".to_string()));
    // The fleet's operations are the operator's: an agent token, none, or a wrong one cannot
    // drain a node (each node keeps serving its stores).
    let held = || -> Vec<(String, u64)> {
        let shown = status(&url);
        let mut held: Vec<(String, u64)> = shown["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| (n["id"].to_string(), n["stores"].as_u64().expect("stores")))
            .collect();
        held.sort();
        held
    };
    let before = held();
    assert!(before.iter().all(|(_, n)| *n > 0), "{before:?}");
    for bearer in [agent.as_str(), "", "Bearer 00ff"] {
        let headers: Vec<(&str, &str)> = match bearer {
            "" => Vec::new(),
            _ => vec![("Authorization", bearer)],
        };
        let reply = request(nodes[1].addr(), "POST", "/v1/fleet/drain", &headers, b"{}");
        assert!(
            matches!(reply.status, 401 | 403),
            "{bearer:?} drained a node: {} {}",
            reply.status,
            reply.text()
        );
    }
    assert_eq!(held(), before, "no node handed its stores over");
    // A browser's request (its Origin the node's own) is checked by the node it reaches and
    // forwarded without it: the holder answers it.
    let origin = format!("http://{}", nodes[2].addr());
    assert!(
        write(
            &nodes[2],
            "s0",
            "/memories/from-a-page.md",
            &[("Origin", origin.as_str())]
        ),
        "a request with its node's Origin is forwarded and answered"
    );
    acked.push(("s0".to_string(), "/memories/from-a-page.md".to_string()));
    let shown = status(&url);
    let holder = shown["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .find(|s| s["name"] == "s0")
        .map(|s| s["node"].as_str().expect("a node").to_string())
        .expect("s0 is held");
    assert_eq!(holder, "a", "the node that made a store holds it: {shown}");
    // The holder dies (kill -9): the live nodes take its stores over once its lease runs out,
    // with no request asking for them (each node sweeps for stores no live node holds).
    let dead = nodes.remove(0);
    signal("-KILL", dead.child.id());
    let started = Instant::now();
    loop {
        let shown = status(&url);
        let stores = shown["stores"].as_array().expect("stores");
        if stores
            .iter()
            .all(|s| s["node"] != "a" && s["alive"] == json!(true))
        {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "a's stores were not taken over: {shown}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 0..12 {
        let (store, path) = (stores[i % 3], format!("/memories/after-{i}.md"));
        assert!(write(&nodes[i % 2], store, &path, &[]), "{store} {path}");
        acked.push((store.to_string(), path));
    }
    for store in stores {
        let shown = files(&nodes[0], store);
        for (_, path) in acked.iter().filter(|(s, _)| s == store) {
            assert!(
                shown.contains(path.as_str()),
                "{store} lost {path}: {shown}"
            );
        }
        let log = log_of(&url, store);
        assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());
    }
    let shown = status(&url);
    let a = shown["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == "a")
        .cloned()
        .unwrap_or_default();
    assert_eq!(a["alive"], json!(false), "{shown}");
    assert!(
        shown["stores"]
            .as_array()
            .expect("stores")
            .iter()
            .all(|s| s["node"] != "a"),
        "every store of the dead node was taken over: {shown}"
    );
}

/// The names of the memory stores `server` lists (`query` added), page by page of `limit`, and
/// how many pages it took.
fn memory_stores(server: &Server, query: &str, limit: usize) -> (Vec<String>, usize) {
    let (mut names, mut page, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let target = match &page {
            Some(page) => format!("/v1/memory_stores?limit={limit}{query}&page={page}"),
            None => format!("/v1/memory_stores?limit={limit}{query}"),
        };
        let (code, body) = server.api("GET", &target, &Value::Null);
        assert_eq!(code, 200, "{target}: {body}");
        pages += 1;
        let data = body["data"].as_array().expect("data");
        assert!(data.len() <= limit, "{body}");
        names.extend(
            data.iter()
                .map(|s| s["name"].as_str().expect("name").to_string()),
        );
        match body["next_page"].as_str() {
            Some(next) => page = Some(next.to_string()),
            None => return (names, pages),
        }
    }
}

#[test]
fn the_memory_stores_api_through_any_node_lists_and_serves_the_fleets_stores() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let nodes: Vec<Server> = ["a", "b", "c"]
        .iter()
        .map(|id| node(&t, &url, id))
        .collect();
    // Five memory stores, each made through a node in turn (which then holds it), and a store
    // made without the API.
    let mut made: Vec<(String, String)> = Vec::new();
    for i in 0..5 {
        let (code, body) = nodes[i % 3].api(
            "POST",
            "/v1/memory_stores",
            &json!({"name": format!("user {i}"), "metadata": {"user": i.to_string()}}),
        );
        assert_eq!(code, 200, "{body}");
        made.push((
            body["id"].as_str().expect("id").to_string(),
            format!("user {i}"),
        ));
    }
    let (code, body) = nodes[0].api("POST", "/v1/stores", &json!({"name": "plain"}));
    assert_eq!(code, 201, "{body}");
    made.push(("memstore_plain".into(), "plain".into()));
    made.sort();
    let every: Vec<String> = made.iter().map(|(_, name)| name.clone()).collect();
    // Every node lists the fleet's six stores, in id order, in pages of two.
    for node in &nodes {
        assert_eq!(memory_stores(node, "", 2), (every.clone(), 3));
    }
    // A store held by a (the first made through it), changed through the others.
    let (held_by_a, _) = made
        .iter()
        .find(|(_, name)| name == "user 0")
        .expect("user 0")
        .clone();
    let (code, body) = nodes[2].api(
        "POST",
        &format!("/v1/memory_stores/{held_by_a}"),
        &json!({"name": "renamed through c"}),
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = nodes[1].api(
        "POST",
        &format!("/v1/memory_stores/{held_by_a}/archive"),
        &Value::Null,
    );
    assert_eq!(code, 200, "{body}");
    assert!(body["archived_at"].is_string(), "{body}");
    let (code, body) = nodes[2].api(
        "GET",
        &format!("/v1/memory_stores/{held_by_a}"),
        &Value::Null,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (body["name"].as_str(), body["metadata"]["user"].as_str()),
        (Some("renamed through c"), Some("0")),
        "{body}"
    );
    assert!(body["archived_at"].is_string(), "{body}");
    // Every node's list shows the change: the archived store only when asked for.
    let unarchived: Vec<String> = every.iter().filter(|n| *n != "user 0").cloned().collect();
    let mut with_archived = every.clone();
    let at = with_archived
        .iter()
        .position(|n| n == "user 0")
        .expect("user 0");
    with_archived[at] = "renamed through c".into();
    for node in &nodes {
        assert_eq!(memory_stores(node, "", 100).0, unarchived);
        assert_eq!(
            memory_stores(node, "&include_archived=true", 100).0,
            with_archived
        );
    }
    // The store made without the API was created when the fleet first leased it, whichever
    // node answers and wherever its copy was made: a drained node's stores are built anew on
    // another node, a second or more later.
    let listed_created = |node: &Server| {
        let (code, body) = node.api("GET", "/v1/memory_stores?limit=100", &Value::Null);
        assert_eq!(code, 200, "{body}");
        body["data"]
            .as_array()
            .expect("data")
            .iter()
            .find(|s| s["id"] == "memstore_plain")
            .map(|s| s["created_at"].clone())
            .expect("plain is listed")
    };
    let created = listed_created(&nodes[0]);
    std::thread::sleep(Duration::from_millis(1100));
    let out = crate::support::run_mnemo(&["fleet", "drain", "a", "--fleet", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for node in &nodes {
        assert_eq!(listed_created(node), created);
        let (code, body) = node.api("GET", "/v1/memory_stores/memstore_plain", &Value::Null);
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["created_at"], created, "retrieved as listed: {body}");
    }
    // Deleted through another node: no node lists it any more.
    let (code, body) = nodes[1].api(
        "DELETE",
        &format!("/v1/memory_stores/{held_by_a}"),
        &Value::Null,
    );
    assert_eq!(code, 200, "{body}");
    for node in &nodes {
        assert_eq!(
            memory_stores(node, "&include_archived=true", 100).0.len(),
            5
        );
    }
}

#[test]
fn a_client_cannot_pass_for_a_node_and_a_node_proves_what_it_forwards() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    // A client's header (any value no node made, or one proved for another request) is dropped
    // by the node it reaches, which routes the request to the holder as any other.
    let other_route = as_forwarded(&b, "other");
    let forgeries = ["test", "a 00", other_route.as_str()];
    for (i, forged) in forgeries.into_iter().enumerate() {
        let reply = request(
            b.addr(),
            "POST",
            "/v1/stores/notes/memory",
            &[
                ("Authorization", b.bearer().as_str()),
                ("x-mnemo-forwarded-by", forged),
            ],
            json!({"command": "create", "path": format!("/memories/{i}.md"), "file_text": "x"})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(reply.status, 200, "{forged:?}: {}", reply.text());
    }
    // A node's proof is honoured: b answers the request itself, and refuses it, as it does not
    // hold the store (and no longer forwards it).
    assert!(!write(
        &b,
        "notes",
        "/memories/proved.md",
        &[("x-mnemo-forwarded-by", &as_forwarded(&b, "notes"))]
    ));
    let shown = files(&a, "notes");
    assert!(
        shown.contains("/memories/2.md") && !shown.contains("/memories/proved.md"),
        "{shown}"
    );
}

#[test]
fn a_node_refuses_to_start_with_a_url_the_others_cannot_forward_to() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let listen = format!("127.0.0.1:{}", free_port());
    for advertise in [
        "https://10.0.0.5:8080",
        "http://0.0.0.0:8080",
        "http://[::]:8080",
        "http://10.0.0.5:8080/mnemo",
        "http://user@10.0.0.5:8080",
        "http://",
        "http://127.0.0.1",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "http://0:8080",
        "http://0.0.0.0.:8080",
        "http://[::ffff:0.0.0.0]:8080",
        "HTTP://127.0.0.1:8080",
    ] {
        let dir = t.dir.path().join("n");
        // Were the URL taken, the node would serve: --idle-exit ends it with success.
        let out = crate::support::run_mnemo(
            &[
                "serve",
                "--data",
                dir.to_str().expect("utf-8"),
                "--fleet",
                &url,
                "--listen",
                &listen,
                "--advertise",
                advertise,
                "--idle-exit",
                "1",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("--advertise"),
            "{advertise}: {stderr}"
        );
    }
}

#[test]
fn a_body_over_the_limit_is_refused_413_through_a_node_that_does_not_hold_the_store() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let small = |id: &str| node_with(&t, &url, id, &["--max-request-bytes", "65536"]);
    let (a, b) = (small("a"), small("b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    let big =
        json!({"command": "create", "path": "/memories/big.md", "file_text": "x".repeat(200_000)});
    for server in [&a, &b] {
        let reply = server.call(
            "POST",
            "/v1/stores/notes/memory",
            big.to_string().as_bytes(),
        );
        assert_eq!(reply.status, 413, "{}", reply.text());
        assert!(reply.text().contains("65536"), "{}", reply.text());
    }
}

#[test]
fn a_holder_stopped_past_its_lease_gets_no_write_acknowledged_after_the_takeover() {
    stopped_with(&[]);
}

/// [`a_holder_stopped_past_its_lease_gets_no_write_acknowledged_after_the_takeover`] with both
/// nodes answering once a write is on their disk: what the stopped node acknowledged and had not
/// shipped is lost, and that is a tail of its writes, never one from the middle; the store's
/// history never forks, and the node, resumed, no longer answers the store.
#[test]
fn a_holder_writing_with_fsync_stopped_past_its_lease_loses_only_a_tail_and_never_forks() {
    stopped_with(&["--durability", "fsync"]);
}

/// Two nodes started with `extra` (`replicated` unless it says otherwise), a writer to a alone,
/// a stopped past its lease while b takes the store over and writes, then a resumed.
fn stopped_with(extra: &[&str]) {
    let replicated = extra.is_empty();
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (
        node_with(&t, &url, "a", extra),
        node_with(&t, &url, "b", extra),
    );
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    // A writer sends to a alone (as forwarded, so a answers it itself) all along.
    let forwarded = as_forwarded(&a, "notes");
    let stop = AtomicBool::new(false);
    let to_a: Vec<(String, bool)> = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut sent = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let path = format!("/memories/a-{i}.md");
                let acked = write(&a, "notes", &path, &[("x-mnemo-forwarded-by", &forwarded)]);
                sent.push((path, acked));
                i += 1;
            }
            sent
        });
        std::thread::sleep(Duration::from_millis(500));
        signal("-STOP", a.child.id());
        std::thread::sleep(Duration::from_secs_f64(ttl() * 1.5));
        for i in 0..5 {
            assert!(
                write(&b, "notes", &format!("/memories/b-{i}.md"), &[]),
                "b {i}"
            );
        }
        signal("-CONT", a.child.id());
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::SeqCst);
        writer.join().expect("writer")
    });
    let shown = files(&b, "notes");
    let acked: Vec<&String> = to_a.iter().filter(|(_, ok)| *ok).map(|(p, _)| p).collect();
    assert!(
        !acked.is_empty(),
        "a acknowledged writes before it was stopped"
    );
    // Under fsync, what a had not shipped when it was stopped is lost: a tail of its writes.
    let kept = acked
        .iter()
        .take_while(|path| shown.contains(path.as_str()))
        .count();
    if replicated {
        assert_eq!(
            kept,
            acked.len(),
            "a acknowledged writes that are lost: {shown}"
        );
    }
    for path in &acked[kept..] {
        assert!(
            !shown.contains(path.as_str()),
            "only a tail of a's acknowledged writes may be lost, not {}: {shown}",
            acked[kept]
        );
    }
    for i in 0..5 {
        assert!(shown.contains(&format!("/memories/b-{i}.md")), "{shown}");
    }
    let refused = to_a.iter().rev().take_while(|(_, ok)| !*ok).count();
    assert!(
        refused > 0,
        "a, resumed, no longer answers the store itself: {to_a:?}"
    );
    let log = log_of(&url, "notes");
    assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());
}

#[test]
fn a_drained_node_hands_its_stores_over_with_no_request_failing() {
    drained_with(&[]);
}

/// [`a_drained_node_hands_its_stores_over_with_no_request_failing`] with both nodes answering
/// once a write is on their disk: the drain ships what the drained node acknowledged before the
/// next holder's marker, so nothing acknowledged is lost there either.
#[test]
fn a_node_writing_with_fsync_is_drained_with_no_request_failing_and_no_write_lost() {
    drained_with(&["--durability", "fsync"]);
}

/// Two nodes started with `extra`, two writers through them, and node a drained meanwhile.
fn drained_with(extra: &[&str]) {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (
        node_with(&t, &url, "a", extra),
        node_with(&t, &url, "b", extra),
    );
    for store in ["s0", "s1"] {
        let (code, body) = a.api("POST", "/v1/stores", &json!({"name": store}));
        assert_eq!(code, 201, "{body}");
    }
    let stop = AtomicBool::new(false);
    let (out, written): (_, Vec<(String, String, bool)>) = std::thread::scope(|s| {
        let writers: Vec<_> = [&a, &b]
            .into_iter()
            .enumerate()
            .map(|(w, server)| {
                let stop = &stop;
                s.spawn(move || {
                    let mut sent = Vec::new();
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let store = ["s0", "s1"][i % 2];
                        let path = format!("/memories/w{w}-{i}.md");
                        // No 503 retry here: a drain must not refuse any request.
                        let reply = try_request(
                            server.addr(),
                            "POST",
                            &format!("/v1/stores/{store}/memory"),
                            &[("Authorization", &server.bearer())],
                            json!({"command": "create", "path": path, "file_text": "x"})
                                .to_string()
                                .as_bytes(),
                        );
                        let ok = reply.is_ok_and(|r| r.status == 200);
                        sent.push((store.to_string(), path, ok));
                        i += 1;
                    }
                    sent
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let out = crate::support::run_mnemo(&["fleet", "drain", "a", "--fleet", &url], "");
        std::thread::sleep(Duration::from_millis(500));
        // The writers stop before anything is asserted, so a failed drain fails the test
        // rather than leave it waiting on them.
        stop.store(true, Ordering::SeqCst);
        let written = writers
            .into_iter()
            .flat_map(|w| w.join().expect("writer"))
            .collect();
        (out, written)
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        moved.contains("s0 -> b") && moved.contains("s1 -> b"),
        "{moved}"
    );
    let failed: Vec<_> = written.iter().filter(|(_, _, ok)| !ok).collect();
    assert!(
        failed.is_empty(),
        "requests failed during the drain: {failed:?}"
    );
    for store in ["s0", "s1"] {
        let shown = files(&b, store);
        for (_, path, _) in written.iter().filter(|(s, _, _)| s == store) {
            assert!(shown.contains(path.as_str()), "{store} lost {path}");
        }
    }
    // A store made through the drained node is made on another (the memory-stores API's too).
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "after"}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = a.api("POST", "/v1/memory_stores", &json!({"name": "after-api"}));
    assert_eq!(code, 200, "{body}");
    let shown = status(&url);
    assert!(
        shown["stores"]
            .as_array()
            .expect("stores")
            .iter()
            .all(|s| s["node"] == "b"),
        "{shown}"
    );
    assert_eq!(
        shown["stores"].as_array().expect("stores").len(),
        4,
        "{shown}"
    );
    let draining: Vec<&Value> = shown["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["draining"] == json!(true))
        .map(|n| &n["id"])
        .collect();
    assert_eq!(draining, [&json!("a")], "{shown}");
}

#[test]
fn a_node_taking_a_store_again_brings_its_copy_up_from_where_it_left_it() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let mut a = Restartable::new(&t, &url, "a");
    let b = node(&t, &url, "b");
    let (code, body) = a
        .server()
        .api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    for i in 0..10 {
        assert!(write(
            a.server(),
            "notes",
            &format!("/memories/a{i}.md"),
            &[]
        ));
    }
    // a hands the store to b (closing it records where its copy stands), is started again, and
    // takes the store back when b is drained: its copy is brought up with b's writes only.
    let out = crate::support::run_mnemo(&["fleet", "drain", "a", "--fleet", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..5 {
        assert!(write(&b, "notes", &format!("/memories/b{i}.md"), &[]));
    }
    a.restart();
    let out = crate::support::run_mnemo(&["fleet", "drain", "b", "--fleet", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = files(a.server(), "notes");
    for i in 0..10 {
        assert!(shown.contains(&format!("/memories/a{i}.md")), "{shown}");
    }
    for i in 0..5 {
        assert!(shown.contains(&format!("/memories/b{i}.md")), "{shown}");
    }
    let said = a.server().stderr.lock().expect("stderr").clone();
    assert!(
        said.contains("took the store notes") && said.contains("its copy brought up from event"),
        "a reused its copy: {said}"
    );
    let log = log_of(&url, "notes");
    assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());
}

#[test]
fn a_drain_hands_over_every_store_leased_to_the_node_and_never_to_a_draining_one() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let mut a = Restartable::new(&t, &url, "a");
    let (b, c) = (node(&t, &url, "b"), node(&t, &url, "c"));
    for store in ["s0", "s1"] {
        let (code, body) = a
            .server()
            .api("POST", "/v1/stores", &json!({"name": store}));
        assert_eq!(code, 201, "{body}");
        assert!(write(a.server(), store, "/memories/one.md", &[]));
    }
    // a starts again: its leases still name it, though nothing is open there yet.
    a.restart();
    let drained = |id: &str| {
        let out = crate::support::run_mnemo(&["fleet", "drain", id, "--fleet", &url], "");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let moved = drained("b");
    assert!(moved.is_empty(), "b held nothing: {moved}");
    let moved = drained("a");
    assert!(
        moved.contains("s0 -> c") && moved.contains("s1 -> c"),
        "a's stores go to c, the one node not being drained: {moved}"
    );
    for server in [a.server(), &b, &c] {
        for store in ["s0", "s1"] {
            assert!(files(server, store).contains("/memories/one.md"), "{store}");
        }
    }
    // With every other node drained, c's drain is refused, saying why, and c keeps its stores.
    let out = crate::support::run_mnemo(&["fleet", "drain", "c", "--fleet", &url], "");
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no other node"), "{said}");
    assert!(write(&c, "s0", "/memories/two.md", &[]));
}

#[test]
fn a_commit_that_failed_in_the_bucket_does_not_leave_the_store_poisoned() {
    if std::env::var("MNEMO_TEST_S3").is_ok_and(|v| !v.is_empty()) {
        return; // the failure is made by moving a directory of a file:// bucket
    }
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    assert!(write(&a, "notes", "/memories/before.md", &[]));
    let wal = t.dir.path().join("bucket/stores/notes/wal");
    let aside = t.dir.path().join("wal-aside");
    std::fs::rename(&wal, &aside).expect("move the log aside");
    std::fs::write(&wal, b"not a directory").expect("a file in its place");
    assert!(!write(
        &a,
        "notes",
        "/memories/lost.md",
        &[("x-mnemo-forwarded-by", &as_forwarded(&a, "notes"))]
    ));
    std::fs::remove_file(&wal).expect("remove the file");
    std::fs::rename(&aside, &wal).expect("put the log back");
    for (i, server) in [&a, &b].into_iter().enumerate() {
        assert!(
            write(server, "notes", &format!("/memories/after-{i}.md"), &[]),
            "{i}"
        );
    }
    let shown = files(&b, "notes");
    assert!(shown.contains("/memories/before.md") && shown.contains("/memories/after-1.md"));
    // The failed write was recorded on a's disk and answered as failing ("it may or may not have
    // been applied"); no one else wrote the store meanwhile, so a shipped it when it took the
    // store again rather than drop an event of its copy.
    assert!(
        shown.contains("/memories/lost.md"),
        "an event of the copy the log lacked was shipped: {shown}"
    );
    let log = log_of(&url, "notes");
    assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());
    let said = a.stderr.lock().expect("stderr").clone();
    assert!(said.contains("that the log lacked: shipped"), "{said}");
}

#[test]
fn a_directory_of_stores_and_a_fleet_nodes_copies_are_kept_apart() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let own = t.dir.path().join("own");
    let standalone = Server::start_data(&own, &[]);
    let (code, body) = standalone.api("POST", "/v1/stores", &json!({"name": "mine"}));
    assert_eq!(code, 201, "{body}");
    let _ = standalone.stop();
    let listen = format!("127.0.0.1:{}", free_port());
    let dir = own.display().to_string();
    let out = crate::support::run_mnemo(
        &[
            "serve", "--data", &dir, "--fleet", &url, "--listen", &listen,
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("holds stores of its own (such as mine)"),
        "{said}"
    );
    // A fleet node's directory is served only as that fleet's node.
    let copies = t.dir.path().join("copies");
    let node = Server::start_data(&copies, &["--fleet", &url, "--listen", &listen]);
    let _ = node.stop();
    let out = crate::support::run_mnemo(&["serve", "--data", &copies.display().to_string()], "");
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("serve it with --fleet"), "{said}");
    // A lease of more than a day is refused, not an overflow.
    let out = crate::support::run_mnemo(
        &["fleet", "status", "--fleet", &url, "--lease-ttl", "1e19"],
        "",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A node that can be killed and started again on its port, with its id and copies.
struct Restartable {
    args: Vec<String>,
    dir: std::path::PathBuf,
    server: Option<Server>,
}

impl Restartable {
    fn new(t: &TempStore, url: &str, id: &str) -> Restartable {
        Restartable::with(t, url, id, &[])
    }

    /// [`Restartable::new`] with the options `extra` too.
    fn with(t: &TempStore, url: &str, id: &str, extra: &[&str]) -> Restartable {
        let dir = t.dir.path().join(id);
        let mut args = vec![
            "--data".to_string(),
            dir.display().to_string(),
            "--fleet".into(),
            url.into(),
            "--node-id".into(),
            id.into(),
            "--listen".into(),
            format!("127.0.0.1:{}", free_port()),
            "--lease-ttl".into(),
            ttl().to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut node = Restartable {
            args,
            dir,
            server: None,
        };
        node.start();
        node
    }

    fn start(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.server = Some(Server::launch(&args, &self.dir));
    }

    fn server(&self) -> &Server {
        self.server.as_ref().expect("the node runs")
    }

    /// Waits for the node's process, stopped by a signal, and forgets it.
    fn stopped(&mut self) {
        if let Some(mut old) = self.server.take() {
            let _ = old.child.wait();
            old.reader.take();
        }
    }

    /// Stops the node (SIGTERM) and starts it again, with its id, port and copies.
    fn restart(&mut self) {
        if let Some(old) = &self.server {
            old.terminate();
        }
        self.stopped();
        self.start();
    }
}

/// The memory files `server` shows in `store`, by path.
fn paths(server: &Server, store: &str) -> std::collections::BTreeSet<String> {
    let text = files(server, store);
    let answer: Value = serde_json::from_str(&text).expect("a JSON answer");
    answer["content"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .filter(|w| w.starts_with("/memories/") && w.ends_with(".md"))
        .map(str::to_string)
        .collect()
}

/// A node writing with `--durability fsync` answers once a write is on its disk and ships it to
/// the bucket behind the answer. Killed (-9) and started again before another node takes its
/// store, it ships what the log lacked, so no acknowledged write is lost. Killed for good, the
/// node that takes the store over serves the log as it was shipped: what is lost is a tail of
/// the acknowledged writes, never one from the middle. Started again and handed the store, the
/// old node builds its copy anew from the log rather than serve writes the log went on without.
#[test]
fn a_node_writing_with_fsync_ships_behind_its_answers_and_a_restart_loses_nothing() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let refused = crate::support::run_mnemo(
        &[
            "serve",
            "--data",
            &t.dir.path().join("x").display().to_string(),
            "--fleet",
            &url,
            "--listen",
            "127.0.0.1:9",
            "--durability",
            "buffered",
        ],
        "",
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && said.contains("--durability buffered is not one a fleet node writes with"),
        "{said}"
    );
    let mut a = Restartable::with(&t, &url, "a", &["--durability", "fsync"]);
    let (code, body) = a
        .server()
        .api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    let first: Vec<String> = (0..30).map(|i| format!("/memories/a{i:02}.md")).collect();
    for path in &first {
        assert!(write(a.server(), "notes", path, &[]), "{path}");
    }
    signal("-KILL", a.server().child.id());
    a.stopped();
    a.start();
    let shown = paths(a.server(), "notes");
    for path in &first {
        assert!(
            shown.contains(path),
            "{path} acknowledged, lost: {shown:?} {}",
            a.server().stderr.lock().expect("stderr")
        );
    }
    let log = log_of(&url, "notes");
    assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());

    // Killed for good after a burst: b takes the store over from the log as shipped.
    let b = node(&t, &url, "b");
    let burst: Vec<String> = (0..20).map(|i| format!("/memories/b{i:02}.md")).collect();
    for path in &burst {
        assert!(write(a.server(), "notes", path, &[]), "{path}");
    }
    signal("-KILL", a.server().child.id());
    a.stopped();
    let kept = paths(&b, "notes");
    for path in &first {
        assert!(kept.contains(path), "{path} shipped before, lost: {kept:?}");
    }
    let survived = burst.iter().take_while(|p| kept.contains(*p)).count();
    assert!(
        burst[survived..].iter().all(|p| !kept.contains(p)),
        "only a tail of the acknowledged writes may be lost: {kept:?}"
    );
    assert!(write(&b, "notes", "/memories/c.md", &[]));
    let expected = paths(&b, "notes");
    a.start();
    let out = crate::support::run_mnemo(&["fleet", "drain", "b", "--fleet", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(paths(a.server(), "notes"), expected);
    let log = log_of(&url, "notes");
    assert_eq!(log, (1..=log.len() as u64).map(Seq).collect::<Vec<_>>());
    let out = crate::support::run_mnemo(&["verify", "--from", &format!("{url}/stores/notes")], "");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates `path` in `store` through `server`, by the memory tool or (`api`) as a memory of the
/// memory-stores API, retrying what a store moving between nodes refuses (503, or a connection
/// to a node that is down) for a while, as clients do: the memory's id, or the path, once
/// acknowledged.
fn acknowledged(
    addr: SocketAddr,
    bearer: &str,
    store: &str,
    path: &str,
    api: bool,
) -> Option<String> {
    let (target, body) = if api {
        (
            format!("/v1/memory_stores/memstore_{store}/memories"),
            json!({"path": path, "content": path}),
        )
    } else {
        (
            format!("/v1/stores/{store}/memory"),
            json!({"command": "create", "path": format!("/memories{path}"), "file_text": path}),
        )
    };
    let started = Instant::now();
    while started.elapsed() < WAIT {
        let headers = [("Authorization", bearer)];
        match try_request(addr, "POST", &target, &headers, body.to_string().as_bytes()) {
            Ok(reply) if reply.status == 200 => {
                let answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
                if api {
                    return answer["id"].as_str().map(str::to_string);
                }
                return (answer["is_error"] != json!(true)).then(|| path.to_string());
            }
            Ok(reply) if reply.status != 503 && reply.status != 429 => return None,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    None
}

/// Three nodes, stores written through random nodes by the memory tool and the memory-stores API,
/// while a chaos loop kills holders (and starts them again) and stops them past their lease (and
/// resumes them). At the end every acknowledged write is there, through any node, and every
/// store's log in the bucket is one chain that verifies whole. `MNEMO_FLEET_SOAK=SECS` runs the
/// chaos that long over 30 stores (the CI run: 12 s over 6).
#[test]
fn a_fleet_under_kills_and_pauses_loses_no_acknowledged_write_and_never_forks_a_store() {
    let soak: Option<u64> = std::env::var("MNEMO_FLEET_SOAK")
        .ok()
        .and_then(|s| s.parse().ok());
    let (seconds, store_count) = soak.map_or((12, 6), |s| (s, 30));
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let mut nodes: Vec<Restartable> = ["a", "b", "c"]
        .iter()
        .map(|id| Restartable::new(&t, &url, id))
        .collect();
    let stores: Vec<String> = (0..store_count).map(|i| format!("s{i}")).collect();
    for (i, store) in stores.iter().enumerate() {
        let (code, body) = nodes[i % 3]
            .server()
            .api("POST", "/v1/stores", &json!({"name": store}));
        assert_eq!(code, 201, "{body}");
    }
    let bearer = nodes[0].server().bearer();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.server().addr()).collect();
    let stop = AtomicBool::new(false);
    let (acked, unacked) = std::thread::scope(|s| {
        let clients: Vec<_> = (0..4u64)
            .map(|c| {
                let (stop, stores, addrs, bearer) = (&stop, &stores, &addrs, &bearer);
                s.spawn(move || {
                    let mut rng = crate::support::Rng(0x9e37_79b9 + c);
                    let (mut acked, mut unacked) = (Vec::new(), 0);
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let store = stores[rng.below(stores.len())].clone();
                        let api = rng.chance(50);
                        let path = format!("/c{c}/w{i}.md");
                        match acknowledged(rng.pick(addrs), bearer, &store, &path, api) {
                            Some(id) => acked.push((store, path, api, id)),
                            None => unacked += 1,
                        }
                        i += 1;
                    }
                    (acked, unacked)
                })
            })
            .collect();
        let mut rng = crate::support::Rng(0x5eed);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(seconds) {
            std::thread::sleep(Duration::from_millis(300 + rng.below_u64(700)));
            let victim = rng.below(nodes.len());
            let pid = nodes[victim].server().child.id();
            if rng.chance(50) {
                signal("-KILL", pid);
                nodes[victim].stopped();
                std::thread::sleep(Duration::from_millis(500));
                nodes[victim].start();
            } else {
                signal("-STOP", pid);
                std::thread::sleep(Duration::from_secs_f64(ttl() * 1.5));
                signal("-CONT", pid);
            }
        }
        stop.store(true, Ordering::SeqCst);
        let mut all = Vec::new();
        let mut refused = 0;
        for client in clients {
            let (acked, unacked) = client.join().expect("client");
            all.extend(acked);
            refused += unacked;
        }
        (all, refused)
    });
    assert!(
        acked.len() > 20,
        "the clients got writes through: {} acked, {unacked} not",
        acked.len()
    );
    eprintln!(
        "fleet chaos: {} writes acknowledged, {unacked} not (refused while a store moved)",
        acked.len()
    );
    let reader = nodes[0].server();
    for store in &stores {
        let shown = files(reader, store);
        for (_, path, api, id) in acked.iter().filter(|(s, _, _, _)| s == store) {
            if *api {
                let got = settled(
                    reader,
                    "GET",
                    &format!("/v1/memory_stores/memstore_{store}/memories/{id}"),
                    b"",
                );
                assert_eq!(
                    got.status,
                    200,
                    "{store}: the memory {path} ({id}) is lost: {}",
                    got.text()
                );
            } else {
                assert!(
                    shown.contains(&format!("/memories{path}")),
                    "{store} lost {path}: {shown}"
                );
            }
        }
        // One chain in the bucket, which an auditor with no node running proves whole.
        let out =
            crate::support::run_mnemo(&["verify", "--from", &format!("{url}/stores/{store}")], "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("INTACT"),
            "{store}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A viewer's login through `server` (from its own page): the session's cookie and CSRF token.
fn viewer_login(server: &Server, body: &Value) -> Option<(String, String)> {
    let origin = format!("http://{}", server.addr());
    let reply = request(
        server.addr(),
        "POST",
        "/ui/api/login",
        &[("Origin", &origin), ("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    if reply.status != 200 {
        eprintln!("login: {} {}", reply.status, reply.text());
        return None;
    }
    let cookie = reply.header("set-cookie")?.split(';').next()?.to_string();
    let answer: Value = serde_json::from_slice(&reply.body).ok()?;
    Some((cookie, answer["csrf"].as_str()?.to_string()))
}

#[test]
fn the_viewer_browses_a_store_through_a_node_that_does_not_hold_it() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    assert!(write(&a, "notes", "/memories/plan.md", &[]));
    let issued = a.call(
        "POST",
        "/v1/stores/notes/tokens",
        br#"{"agent": "planner"}"#,
    );
    assert_eq!(issued.status, 200, "{}", issued.text());
    let agent: Value = serde_json::from_slice(&issued.body).expect("json");
    let agent = agent["token"].as_str().expect("token").to_string();
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "other"}));
    assert_eq!(code, 201, "{body}");
    // The holder is asked whom a token proves in its store: a wrong one, or one of another
    // store, proves no one.
    for body in [
        json!({"token": "mnemo_wrong", "store": "notes"}),
        json!({"token": agent, "store": "other"}),
        json!({"token": agent}),
    ] {
        assert!(viewer_login(&b, &body).is_none(), "{body}");
    }
    for (who, body) in [
        ("operator", json!({"token": b.file.token})),
        ("agent", json!({"token": agent, "store": "notes"})),
    ] {
        let (cookie, csrf) =
            viewer_login(&b, &body).unwrap_or_else(|| panic!("{who}: login through b"));
        let reply = request(
            b.addr(),
            "GET",
            "/v1/stores/notes/records?tag=memorytool",
            &[("Cookie", &cookie), ("X-Mnemo-CSRF", &csrf)],
            b"",
        );
        assert_eq!(reply.status, 200, "{who}: {}", reply.text());
        assert!(
            reply.text().contains("/memories/plan.md"),
            "{who}: {}",
            reply.text()
        );
    }
}

#[test]
fn a_node_taking_a_store_sweeps_the_records_of_its_mcp_sessions_past_their_day() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    let bucket = Bucket::open(&url).expect("bucket");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_millis();
    let now_ms = u64::try_from(now_ms).expect("milliseconds since 1970 fit in u64");
    let day_ms = 24 * 3600 * 1000;
    for (id, opened_ms) in [
        ("old", now_ms - day_ms - 60_000),
        ("recent", now_ms - day_ms + 600_000),
    ] {
        let owner = json!({"principal": "operator", "agent": null, "opened_ms": opened_ms});
        for (part, bytes) in [
            ("state", b"{}".to_vec()),
            ("owner", owner.to_string().into_bytes()),
        ] {
            let made = bucket.create(&format!("stores/notes/mcp/{id}/{part}"), bytes);
            assert!(made.expect("create"), "{id}/{part}");
        }
    }
    let (code, body) = a.api("POST", "/v1/fleet/drain", &json!({}));
    assert_eq!(code, 200, "{body}");
    // b takes the store on the next request for it, and sweeps beside the takeover.
    assert!(write(&b, "notes", "/memories/after.md", &[]));
    let present = |id: &str, part: &str| {
        bucket
            .get(&format!("stores/notes/mcp/{id}/{part}"), 1 << 20)
            .expect("get")
            .is_some()
    };
    let started = Instant::now();
    while present("old", "owner") && started.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !present("old", "owner") && !present("old", "state"),
        "a session opened over a day ago is swept"
    );
    assert!(
        present("recent", "owner") && present("recent", "state"),
        "a session opened within the day is kept"
    );
}

/// A raw MCP request to `store`'s `/mcp` through `server` (in session `session`, if any).
fn mcp(server: &Server, store: &str, session: Option<&str>, message: &Value) -> Reply {
    let bearer = server.bearer();
    let mut headers = vec![
        ("Authorization", bearer.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
        headers.push(("MCP-Protocol-Version", "2025-06-18"));
    }
    request(
        server.addr(),
        "POST",
        &format!("/v1/stores/{store}/mcp"),
        &headers,
        message.to_string().as_bytes(),
    )
}

/// A new MCP session of the operator in `store` through `server`: its id.
fn mcp_session(server: &Server, store: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fleet-test", "version": "1"}}});
    let opened = mcp(server, store, None, &init);
    assert_eq!(opened.status, 200, "{}", opened.text());
    let id = opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let done = mcp(
        server,
        store,
        Some(&id),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert!([200, 202].contains(&done.status), "{}", done.text());
    id
}

#[test]
fn an_mcp_session_follows_its_store_to_another_node_for_a_day() {
    if std::env::var("MNEMO_TEST_S3").is_ok_and(|v| !v.is_empty()) {
        return; // a session's age is made by rewriting its record in a file:// bucket
    }
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    let (kept, aged) = (mcp_session(&a, "notes"), mcp_session(&a, "notes"));
    // The second session was opened (its record says) over a day ago.
    let owner = t
        .dir
        .path()
        .join(format!("bucket/stores/notes/mcp/{aged}/owner"));
    std::fs::write(
        &owner,
        json!({"principal": "operator", "agent": null, "opened_ms": 1_000}).to_string(),
    )
    .expect("age the record");
    let (code, body) = a.api("POST", "/v1/fleet/drain", &json!({}));
    assert_eq!(code, 200, "{body}");
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"});
    let reply = mcp(&b, "notes", Some(&kept), &ping);
    assert_eq!(
        reply.status,
        200,
        "taken up on the new holder: {}",
        reply.text()
    );
    // Swept by b as it took the store, and refused by its gate were its records still there.
    let reply = mcp(&b, "notes", Some(&aged), &ping);
    assert_eq!(
        reply.status,
        404,
        "a day old: not taken up: {}",
        reply.text()
    );
}

/// A node killed and started again with its id at another address (its leases still name the
/// old one) takes back the stores its earlier run held within a few beats, so every node serves
/// them again rather than forwarding to an address nobody listens at.
#[test]
fn a_node_started_again_at_another_address_serves_its_stores_through_every_node() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let a = node(&t, &url, "a");
    let b = node(&t, &url, "b");
    let (code, body) = b.api("POST", "/v1/stores", &json!({"name": "moved"}));
    assert_eq!(code, 201, "{body}");
    assert!(write(&b, "moved", "/memories/before.md", &[]));
    signal("-KILL", b.child.id());
    drop(b);
    let b = node(&t, &url, "b");
    let reply = viewed(&a, "moved");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.text().contains("before.md"), "{}", reply.text());
    drop(b);
}

/// A request forwarded to a holder that stopped (SIGSTOP) before it answered is not waited on
/// for ever, nor sent again: after a bounded wait it is answered 504, saying it may or may not
/// have been applied.
#[test]
fn a_request_forwarded_to_a_holder_that_went_quiet_is_answered_may_or_may_not_have_been_applied() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let a = node(&t, &url, "a");
    let b = node(&t, &url, "b");
    let (code, body) = b.api("POST", "/v1/stores", &json!({"name": "quiet"}));
    assert_eq!(code, 201, "{body}");
    assert!(write(&b, "quiet", "/memories/before.md", &[]));
    signal("-STOP", b.child.id());
    let started = Instant::now();
    let reply = a.call(
        "POST",
        "/v1/stores/quiet/memory",
        json!({"command": "create", "path": "/memories/during.md", "file_text": "x"})
            .to_string()
            .as_bytes(),
    );
    let waited = started.elapsed();
    signal("-CONT", b.child.id());
    // Sent while `b` was alive, so forwarded to it; had `b` been judged dead by then, `a` took
    // the store and answered itself.
    if reply.status != 200 {
        assert_eq!(reply.status, 504, "{}", reply.text());
        assert!(
            reply.text().contains("may or may not have been applied"),
            "{}",
            reply.text()
        );
        assert!(waited < Duration::from_secs(60), "waited {waited:?}");
    }
    drop((a, b));
}

/// The objects of `store`'s log in the bucket at `url` that hold events (a marker, with none,
/// is 48 bytes: the magic, the epoch and the digest), and whether anything else of the store
/// (label copies, MCP session records) is left.
fn store_data_left(url: &str, store: &str) -> (usize, bool) {
    let bucket = Bucket::open(url).expect("bucket");
    let wal = bucket.list(&format!("stores/{store}/wal")).expect("list");
    let names: Vec<String> = wal.into_iter().map(|l| l.name).collect();
    let events = bucket
        .get_all(&names, 1 << 20)
        .expect("get")
        .into_iter()
        .filter(|b| b.as_ref().is_some_and(|b| b.len() != 48))
        .count();
    fn objects(bucket: &Bucket, dir: &str) -> usize {
        let below: usize = bucket
            .dirs(dir)
            .expect("dirs")
            .iter()
            .filter(|d| *d != "wal")
            .map(|d| objects(bucket, &format!("{dir}/{d}")))
            .sum();
        // What holds bytes: an S3 server may list an emptied folder as an object of its own.
        let here = bucket.list(dir).expect("list");
        let held = here
            .iter()
            .filter(|l| {
                bucket
                    .get(&l.name, 1 << 20)
                    .ok()
                    .flatten()
                    .is_some_and(|b| !b.is_empty())
            })
            .count();
        below + held
    }
    // The empty record that the deletion finished is all there may be beside the log.
    (events, objects(&bucket, &format!("stores/{store}")) > 0)
}

/// Asserts that `server` answers a view of `store` as of a missing store (404).
fn assert_view_missing(server: &Server, store: &str) {
    let view = json!({"command": "view", "path": "/memories"}).to_string();
    let reply = server.call(
        "POST",
        &format!("/v1/stores/{store}/memory"),
        view.as_bytes(),
    );
    assert_eq!(reply.status, 404, "{store}: {}", reply.text());
}

/// The names `GET /v1/stores` lists through `server`.
fn listed(server: &Server) -> Vec<String> {
    let (code, body) = server.api("GET", "/v1/stores", &Value::Null);
    assert_eq!(code, 200, "{body}");
    body["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn a_fleets_store_deleted_through_any_node_is_gone_from_every_node_and_the_bucket() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = (node(&t, &url, "a"), node(&t, &url, "b"));
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "kept"}));
    assert_eq!(code, 201, "{body}");
    let (code, made) = a.api("POST", "/v1/memory_stores", &json!({"name": "user"}));
    assert_eq!(code, 200, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let session = mcp_session(&a, "notes");
    for i in 0..3 {
        assert!(write(&a, "notes", &format!("/memories/{i}.md"), &[]));
    }
    assert!(write(&a, "kept", "/memories/k.md", &[]));
    let (code, body) = b.api(
        "POST",
        &format!("/v1/memory_stores/{id}/memories"),
        &json!({"path": "/a.md", "content": "x"}),
    );
    assert_eq!(code, 200, "{body}");
    assert!(t.dir.path().join("a/notes").is_dir());
    // Deleted through b, which holds neither: a, the holder, serves both deletes.
    let (code, body) = b.api("DELETE", "/v1/stores/notes?confirm=notes", &Value::Null);
    assert_eq!((code, &body["deleted"]), (200, &json!(true)), "{body}");
    let (code, body) = b.api("DELETE", &format!("/v1/memory_stores/{id}"), &Value::Null);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["type"], "memory_store_deleted", "{body}");
    // Every node answers them as missing, lists them no more, and so does the fleet's status.
    for node in [&a, &b] {
        assert_view_missing(node, "notes");
        let (code, body) = node.api("GET", &format!("/v1/memory_stores/{id}"), &Value::Null);
        assert_eq!(code, 404, "{body}");
        assert_eq!(body["error"]["type"], "not_found_error", "{body}");
        assert_eq!(listed(node), ["kept"]);
        assert_eq!(
            memory_stores(node, "&include_archived=true", 100).0,
            ["kept"]
        );
        let (code, body) = node.api("DELETE", "/v1/stores/notes?confirm=notes", &Value::Null);
        assert_eq!(code, 404, "deleted once: {body}");
    }
    let reply = mcp(
        &b,
        "notes",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    );
    assert_eq!(reply.status, 404, "{}", reply.text());
    let shown = status(&url);
    assert_eq!(
        shown["stores"].as_array().expect("stores").len(),
        1,
        "{shown}"
    );
    assert_eq!(shown["stores"][0]["name"], "kept", "{shown}");
    // Their data left the bucket (the log's markers stay) and the holder's disk.
    let memstore = id.trim_start_matches("memstore_");
    for store in ["notes", memstore] {
        assert_eq!(store_data_left(&url, store), (0, false), "{store}");
        assert!(!t.dir.path().join("a").join(store).exists(), "{store}");
        assert!(!t.dir.path().join(format!("a/.{store}.fleet")).exists());
    }
    assert!(
        store_data_left(&url, "kept").0 > 0,
        "a store kept keeps its log"
    );
    assert!(files(&b, "kept").contains("k.md"));
    // The name is not used again, and the log read from outside says the store was deleted.
    let (code, body) = b.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 409, "{body}");
    assert!(body.to_string().contains("not used again"), "{body}");
    let out = crate::support::run_mnemo(&["verify", "--from", &format!("{url}/stores/notes")], "");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("was deleted"),
        "{said}"
    );
    // A delete cut after its lease (the holder killed before it fenced the log and removed
    // anything): no node serves the store, and a live node's sweep finishes the removal.
    assert!(write(&a, "kept", "/memories/l.md", &[]));
    let bucket = Bucket::open(&url).expect("bucket");
    let epoch = bucket.list("leases/kept").expect("leases").len() as u64 + 1;
    signal("-KILL", a.child.id());
    let lease = json!({"store": "kept", "epoch": epoch, "deleted": true,
        "node": {"id": "a", "url": format!("http://{}", a.addr())}});
    assert!(
        bucket
            .create(
                &format!("leases/kept/{epoch:020}"),
                lease.to_string().into_bytes()
            )
            .expect("create")
    );
    assert_view_missing(&b, "kept");
    let started = Instant::now();
    while store_data_left(&url, "kept") != (0, false) {
        assert!(
            started.elapsed() < WAIT,
            "b's sweep never finished the delete"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listed(&b).is_empty());
}

/// `mnemo fleet status` and `fleet drain` read a fleet as it is: a `file://` bucket that does
/// not exist is named as no fleet (exit 2), and is not made.
#[test]
fn a_fleet_that_does_not_exist_is_named_and_not_made() {
    let t = TempStore::new();
    let missing = t.dir.path().join("no-fleet");
    let url = format!("file://{}", missing.display());
    for args in [
        vec!["fleet", "status", "--fleet", &url],
        vec!["fleet", "drain", "a", "--fleet", &url],
    ] {
        let out = crate::support::run_mnemo(&args, "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("there is no fleet at"), "{args:?}: {err}");
        assert!(!missing.exists(), "{args:?} made the directory");
    }
}

/// `mnemo key create --file` of a new fleet key at `path`: its verifier key.
fn fleet_key(path: &std::path::Path) -> String {
    let out = crate::support::run_mnemo(&["key", "create", "--file", &path.to_string_lossy()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `mnemo verify --from` of the store's log in the fleet at `url`, with `extra`: its exit
/// success and everything it printed.
fn verify_from(url: &str, store: &str, extra: &[&str]) -> (bool, String) {
    let from = format!("{url}/stores/{store}");
    let mut args = vec!["verify", "--from", &from];
    args.extend_from_slice(extra);
    let out = crate::support::run_mnemo(&args, "");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn a_fleet_with_a_key_signs_its_logs_and_takes_no_store_whose_log_someone_without_it_wrote() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let key_file = t.dir.path().join("fleet.key");
    let vkey = fleet_key(&key_file);
    let key = key_file.to_string_lossy().to_string();
    let signing = ["--signing-key", key.as_str()];
    let a = node_with(&t, &url, "a", &signing);
    let b = node_with(&t, &url, "b", &signing);
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    for i in 0..4 {
        assert!(write(&a, "notes", &format!("/memories/a{i}.md"), &[]));
    }
    // b takes the store over from a's signed log, checking it, and signs on.
    let out = crate::support::run_mnemo(&["fleet", "drain", "a", "--fleet", &url], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..3 {
        assert!(write(&b, "notes", &format!("/memories/b{i}.md"), &[]));
    }
    let shown = files(&b, "notes");
    assert!(
        shown.contains("/memories/a3.md") && shown.contains("/memories/b2.md"),
        "{shown}"
    );

    // An auditor proves the log with the verifier key alone; another key is refused, by name.
    let (ok, said) = verify_from(&url, "notes", &["--key", &vkey]);
    assert!(ok && said.contains("INTACT"), "{said}");
    let other = fleet_key(&t.dir.path().join("other.key"));
    let (ok, said) = verify_from(&url, "notes", &["--key", &other]);
    assert!(!ok, "another key: {said}");
    let given = other.splitn(3, '+').take(2).collect::<Vec<_>>().join("+");
    assert!(said.contains(&given), "the key given is named: {said}");
    let restored = t.dir.path().join("restored");
    let out = crate::support::run_mnemo(
        &[
            "restore",
            "--from",
            &format!("{url}/stores/notes"),
            "--db",
            &restored.to_string_lossy(),
            "--key",
            &vkey,
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Someone with the bucket and without the key appends a commit: the next holder refuses
    // the store, and the auditor names the object, though the log is otherwise whole.
    drop(b);
    drop(a);
    let wal = Wal::new(
        std::sync::Arc::new(Bucket::open(&url).expect("bucket")),
        "notes",
    );
    let forger = wal.take(1_000, &Position::START).expect("an unsigned take");
    let (seq, hash) = (forger.read.seq, forger.read.hash);
    let mut holder = forger.holder;
    let forged = mnemo::testing::chain::sample::frame(Seq(seq.0 + 1), hash, "forged");
    holder
        .commit(&[(forged.seq, forged.encode())])
        .expect("the forged commit");
    let (ok, said) = verify_from(&url, "notes", &["--key", &vkey]);
    assert!(
        !ok && said.contains("is not signed by the fleet's key"),
        "{said}"
    );
    let c = node_with(&t, &url, "c", &signing);
    let reply = viewed(&c, "notes");
    assert_ne!(
        reply.status,
        200,
        "a forged log is not served: {}",
        reply.text()
    );
    let said = c.stderr.lock().expect("stderr").clone();
    assert!(
        reply.text().contains("is not signed") || said.contains("is not signed"),
        "{} / {said}",
        reply.text()
    );
}

#[test]
fn a_fleet_that_gets_a_key_adopts_its_logs_once_and_takes_none_written_without_it_since() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let key_file = t.dir.path().join("fleet.key");
    let vkey = fleet_key(&key_file);
    let key = key_file.to_string_lossy().to_string();
    // Two stores written by a fleet without a key.
    let a = node(&t, &url, "a");
    for store in ["early", "late"] {
        let (code, body) = a.api("POST", "/v1/stores", &json!({"name": store}));
        assert_eq!(code, 201, "{body}");
        assert!(write(&a, store, "/memories/before.md", &[]));
    }
    drop(a);
    // The key adopts `early` as it ends; `late` is written again without the key afterwards.
    let adopt = |stores: &[&str]| {
        let mut args = vec!["fleet", "adopt", "--fleet", &url, "--signing-key", &key];
        args.extend_from_slice(stores);
        let out = crate::support::run_mnemo(&args, "");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, said) = adopt(&[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("early: adopted") && said.contains("late: adopted"),
        "{said}"
    );
    let (code, said) = adopt(&["early"]);
    assert_eq!(code, Some(1), "adopted once: {said}");
    let unkeyed = node(&t, &url, "u");
    assert!(write(&unkeyed, "late", "/memories/after.md", &[]));
    drop(unkeyed);

    let b = node_with(&t, &url, "b", &["--signing-key", key.as_str()]);
    assert!(files(&b, "early").contains("/memories/before.md"));
    assert!(write(&b, "early", "/memories/signed.md", &[]));
    let (ok, said) = verify_from(&url, "early", &["--key", &vkey]);
    assert!(ok && said.contains("INTACT"), "{said}");
    let reply = viewed(&b, "late");
    assert_ne!(
        reply.status,
        200,
        "written without the key after its adoption: {}",
        reply.text()
    );
    assert!(
        reply.text().contains("did not adopt it as it ends")
            && reply
                .text()
                .contains("mnemo verify --from FLEET/stores/late"),
        "{}",
        reply.text()
    );
}

#[test]
fn a_holder_whose_last_commit_was_removed_from_the_bucket_does_not_hand_its_store_over() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let a = node(&t, &url, "a");
    let _b = node(&t, &url, "b");
    let (code, body) = a.api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    for i in 0..3 {
        assert!(write(&a, "notes", &format!("/memories/a{i}.md"), &[]));
    }
    // Someone who can write the bucket removes the newest commit.
    let bucket = Bucket::open(&url).expect("bucket");
    let newest = bucket
        .list("stores/notes/wal")
        .expect("list")
        .pop()
        .expect("an object");
    bucket.remove(&newest.name).expect("remove");
    let out = crate::support::run_mnemo(&["fleet", "drain", "a", "--fleet", &url], "");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the drain must not go on: {said}");
    assert!(
        said.contains("no longer holds this node's last commit"),
        "{said}"
    );
    assert_eq!(
        status(&url)["stores"][0]["node"],
        "a",
        "the store stays leased to the node that holds its acknowledged writes"
    );
}
