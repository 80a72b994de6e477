//! The viewer's login on a fleet: a session or a login link made through one node works through
//! every node (as behind a load balancer without affinity, every node answering to its name),
//! outlives a node's restart, ends on every node when logged out through one, and a link logs
//! in exactly once however many nodes race to redeem it.

use std::sync::{Arc, Barrier};

use mnemo::testing::fleet::bucket::Bucket;

use super::*;

/// The name every node answers to besides its own, as the load balancer in front of them.
const BALANCER: &str = "mnemo-lb.test:8000";

/// The origin of the viewer's pages, loaded through the load balancer.
const ORIGIN: &str = "http://mnemo-lb.test:8000";

/// How long after a logout every node refuses the session (`RECHECK` in `serve::viewer`), and
/// some slack for a loaded machine.
const RECHECK: Duration = Duration::from_secs(5);

/// A request to `server` as the browser sends it through the load balancer.
fn through(
    server: &Server,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut all = vec![("Host", BALANCER), ("Origin", ORIGIN)];
    all.extend_from_slice(headers);
    request(server.addr(), method, target, &all, body)
}

/// A login through `server`: its answer.
fn login(server: &Server, body: &Value) -> Reply {
    through(
        server,
        "POST",
        "/ui/api/login",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// The cookie (`NAME=ID`) and CSRF token of a login that succeeded.
fn logged_in(reply: &Reply) -> (String, String) {
    assert_eq!(reply.status, 200, "{}", reply.text());
    let cookie = reply
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    (cookie, answer["csrf"].as_str().expect("csrf").to_string())
}

/// A read of `target` through `server` as the session, retried while the store moves (503).
fn read(server: &Server, (cookie, csrf): &(String, String), target: &str) -> Reply {
    let deadline = Instant::now() + Duration::from_secs_f64(ttl() * 5.0);
    loop {
        let reply = through(
            server,
            "GET",
            target,
            &[("Cookie", cookie), ("X-Mnemo-CSRF", csrf)],
            b"",
        );
        if reply.status != 503 || Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `POST /ui/api/link` through `server` with the operator token: a link's secret.
fn mint(server: &Server) -> String {
    let bearer = server.bearer();
    let reply = through(
        server,
        "POST",
        "/ui/api/link",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    answer["secret"].as_str().expect("a secret").to_string()
}

/// Node `id` of the fleet at `url`, answering to the load balancer's name too.
fn behind_balancer(t: &TempStore, url: &str, id: &str) -> Server {
    node_with(t, url, id, &["--allow-host", BALANCER])
}

/// A fleet of two nodes behind one name, with a store `notes` holding a file: the restartable
/// node `a` (which holds it) and `b`.
fn fleet(t: &TempStore, url: &str) -> (Restartable, Server) {
    let a = Restartable::with(t, url, "a", &["--allow-host", BALANCER]);
    let b = behind_balancer(t, url, "b");
    let (code, body) = a
        .server()
        .api("POST", "/v1/stores", &json!({"name": "notes"}));
    assert_eq!(code, 201, "{body}");
    assert!(write(a.server(), "notes", "/memories/plan.md", &[]));
    (a, b)
}

#[test]
fn a_login_through_one_node_works_through_every_node_until_it_is_logged_out_through_any() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (mut a, b) = fleet(&t, &url);
    let operator = a.server().file.token.clone();

    // The token form through a, then every page and read route through b.
    let session = logged_in(&login(a.server(), &json!({ "token": operator })));
    let name = session.0.split_once('=').expect("name=id").0.to_string();
    assert!(
        !name.ends_with(&a.server().addr().port().to_string()),
        "a fleet's cookie is not named after a node's port: {name}"
    );
    let shown = read(&b, &session, "/ui/api/session");
    assert_eq!(shown.status, 200, "{}", shown.text());
    assert!(shown.text().contains("\"operator\""), "{}", shown.text());
    for target in ["/v1/stores", "/v1/stores/notes/records?tag=memorytool"] {
        let reply = read(&b, &session, target);
        assert_eq!(reply.status, 200, "{target}: {}", reply.text());
    }
    assert!(
        read(&b, &session, "/v1/stores/notes/records?tag=memorytool")
            .text()
            .contains("/memories/plan.md")
    );
    let page = through(&b, "GET", "/ui/", &[("Cookie", &session.0)], b"");
    assert_eq!(page.status, 200);
    // The CSRF token is still needed on every node.
    let bare = through(
        &b,
        "GET",
        "/v1/stores",
        &[("Cookie", session.0.as_str())],
        b"",
    );
    assert_eq!(bare.status, 403, "{}", bare.text());

    // A link made through a logs in through b, once, and its session works through a.
    let secret = mint(a.server());
    let linked = logged_in(&login(&b, &json!({ "link": secret })));
    assert_eq!(linked.0.split_once('=').expect("name=id").0, name);
    let reply = read(
        a.server(),
        &linked,
        "/v1/stores/notes/records?tag=memorytool",
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    for node in [a.server(), &b] {
        let again = login(node, &json!({ "link": secret }));
        assert_eq!(again.status, 401, "{}", again.text());
    }
    // The bucket names neither the secret nor a cookie's session id.
    let bucket = Bucket::open(&url).expect("bucket");
    let session_id = session.0.split_once('=').expect("name=id").1;
    for dir in ["viewer/sessions", "viewer/links", "viewer/used"] {
        let names = bucket.list(dir).expect("list");
        assert!(!names.is_empty(), "{dir}");
        for listed in names {
            assert!(
                !listed.name.contains(&secret) && !listed.name.contains(session_id),
                "{}",
                listed.name
            );
        }
    }

    // A restart of the node logged in through forgets nothing.
    a.restart();
    let shown = read(a.server(), &session, "/ui/api/session");
    assert_eq!(shown.status, 200, "{}", shown.text());
    let reply = read(
        a.server(),
        &session,
        "/v1/stores/notes/records?tag=memorytool",
    );
    assert_eq!(reply.status, 200, "{}", reply.text());

    // Logged out through b: refused by b at once, by a at once for a change and within
    // RECHECK for a read, though a served it a moment before.
    assert_eq!(read(a.server(), &session, "/v1/stores").status, 200);
    let out = through(
        &b,
        "POST",
        "/ui/api/logout",
        &[("Cookie", &session.0), ("X-Mnemo-CSRF", &session.1)],
        b"",
    );
    assert_eq!(out.status, 200, "{}", out.text());
    let logged_out = Instant::now();
    assert_eq!(read(&b, &session, "/v1/stores").status, 401);
    let change = through(
        a.server(),
        "POST",
        "/v1/stores/notes/memory",
        &[
            ("Cookie", &session.0),
            ("X-Mnemo-CSRF", &session.1),
            ("Content-Type", "application/json"),
        ],
        json!({"command": "create", "path": "/memories/late.md", "file_text": "x"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(change.status, 401, "{}", change.text());
    loop {
        let reply = read(a.server(), &session, "/v1/stores");
        if reply.status == 401 {
            assert!(reply.text().contains("log in again"), "{}", reply.text());
            break;
        }
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert!(
            logged_out.elapsed() < RECHECK + Duration::from_secs(2),
            "a still serves a session logged out {:?} ago",
            logged_out.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(read(a.server(), &session, "/ui/api/session").status, 401);
    // The other session goes on.
    assert_eq!(read(&b, &linked, "/v1/stores").status, 200);
}

#[test]
fn an_agents_session_sees_only_what_the_agent_sees_through_either_node() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = fleet(&t, &url);
    let (code, body) = a
        .server()
        .api("POST", "/v1/stores", &json!({"name": "other"}));
    assert_eq!(code, 201, "{body}");
    let issued = a.server().call(
        "POST",
        "/v1/stores/notes/tokens",
        br#"{"agent": "planner"}"#,
    );
    assert_eq!(issued.status, 200, "{}", issued.text());
    let agent: Value = serde_json::from_slice(&issued.body).expect("json");
    let agent = agent["token"].as_str().expect("token").to_string();
    let session = logged_in(&login(&b, &json!({"token": agent, "store": "notes"})));
    for node in [a.server(), &b] {
        let shown = read(node, &session, "/ui/api/session");
        assert_eq!(shown.status, 200, "{}", shown.text());
        let shown: Value = serde_json::from_slice(&shown.body).expect("json");
        assert_eq!(shown["agent"], json!("planner"));
        assert_eq!(shown["store"], json!("notes"));
        let files = read(node, &session, "/v1/stores/notes/records?tag=memorytool");
        assert_eq!(files.status, 200, "{}", files.text());
        assert!(files.text().contains("/memories/plan.md"));
        for target in [
            "/v1/stores",
            "/v1/stores/notes/tokens",
            "/v1/stores/notes/acl",
            "/v1/stores/other/records?tag=memorytool",
        ] {
            let reply = read(node, &session, target);
            assert!(
                matches!(reply.status, 401 | 403 | 404),
                "{target}: {} {}",
                reply.status,
                reply.text()
            );
        }
    }
}

#[test]
fn two_nodes_redeeming_one_link_at_once_log_in_once() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let a = behind_balancer(&t, &url, "a");
    let b = behind_balancer(&t, &url, "b");
    let nodes = Arc::new([a, b]);
    for round in 0..6 {
        let secret = mint(&nodes[round % 2]);
        let start = Arc::new(Barrier::new(4));
        let racers: Vec<_> = (0..4)
            .map(|i| {
                let (nodes, start, secret) =
                    (Arc::clone(&nodes), Arc::clone(&start), secret.clone());
                std::thread::spawn(move || {
                    start.wait();
                    login(&nodes[i % 2], &json!({ "link": secret })).status
                })
            })
            .collect();
        let statuses: Vec<u16> = racers
            .into_iter()
            .map(|r| r.join().expect("racer"))
            .collect();
        let logins = statuses.iter().filter(|s| **s == 200).count();
        assert_eq!(logins, 1, "round {round}: {statuses:?}");
        assert!(
            statuses.iter().all(|s| matches!(s, 200 | 401)),
            "{statuses:?}"
        );
    }
}

#[test]
fn a_cookie_naming_junk_in_the_bucket_is_told_to_log_in_again() {
    let t = TempStore::new();
    let url = bucket_url(&t, "bucket");
    let (a, b) = fleet(&t, &url);
    let operator = a.server().file.token.clone();
    let (cookie, csrf) = logged_in(&login(a.server(), &json!({ "token": operator })));
    let name = cookie.split_once('=').expect("name=id").0.to_string();
    let bucket = Bucket::open(&url).expect("bucket");
    let key = |id: &str| format!("viewer/sessions/{}", blake3::hash(id.as_bytes()).to_hex());
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("time")
            .as_millis(),
    )
    .expect("a time in milliseconds");
    let record = |expires_ms: u64| {
        json!({"agent": null, "store": null, "token": operator, "csrf": csrf, "expires_ms": expires_ms})
            .to_string()
            .into_bytes()
    };
    let mut planted = vec![
        ("not json", b"{\"agent\": ".to_vec()),
        ("expired", record(now - 1000)),
        ("ending in a year", record(now + 365 * 24 * 3600 * 1000)),
        ("huge", vec![b' '; 64 * 1024]),
    ];
    // A `file://` bucket's object that is a link to a live record, or a FIFO.
    let local = url.strip_prefix("file://").map(std::path::PathBuf::from);
    if local.is_some() {
        planted.push(("symlink", Vec::new()));
        planted.push(("fifo", Vec::new()));
    }
    let live = format!("{:064x}", 7);
    assert!(
        bucket
            .create(&key(&live), record(now + 3600 * 1000))
            .expect("planted")
    );
    for (i, (what, bytes)) in planted.into_iter().enumerate() {
        let id = format!("{:064x}", 1000 + i);
        match (what, &local) {
            ("symlink", Some(dir)) => {
                std::os::unix::fs::symlink(dir.join(key(&live)), dir.join(key(&id)))
                    .expect("symlink")
            }
            ("fifo", Some(dir)) => {
                let status = Command::new("mkfifo")
                    .arg(dir.join(key(&id)))
                    .status()
                    .expect("mkfifo");
                assert!(status.success());
            }
            _ => assert!(bucket.create(&key(&id), bytes).expect("planted")),
        }
        let sent = (format!("{name}={id}"), csrf.clone());
        for node in [a.server(), &b] {
            let reply = read(node, &sent, "/v1/stores");
            assert_eq!(reply.status, 401, "{what}: {}", reply.text());
            assert!(
                reply.text().contains("log in again"),
                "{what}: {}",
                reply.text()
            );
        }
    }
    // An expired record is removed by the node that found it.
    let expired = format!("{:064x}", 1001);
    assert_eq!(bucket.get(&key(&expired), 1 << 20).expect("get"), None);
    // Cookies that are no id at all never reach the bucket, and are refused alike.
    for id in ["", "x", "../../operator/token", &"f".repeat(10_000)] {
        let sent = (format!("{name}={id}"), csrf.clone());
        let reply = read(&b, &sent, "/v1/stores");
        assert_eq!(reply.status, 401, "{id:.20}: {}", reply.text());
    }
    // The planted live record is one any node serves.
    let sent = (format!("{name}={live}"), csrf.clone());
    assert_eq!(read(&b, &sent, "/v1/stores").status, 200);
}
