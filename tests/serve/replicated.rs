//! `mnemo serve --replicate URL`: the server ships its store as it is written, reports how far
//! the replica is on `GET /v1/replication`, keeps answering while the replica fails and resumes
//! once it is back, and a kill -9 of the server loses nothing the replica was reported to hold.

use std::time::Instant;

use mnemo::Durability;
use serde_json::{Value, json};

use super::{Server, WAIT, post_memory};
use crate::redact::run_ok;
use crate::support::{TempStore, open_store, run_mnemo};

fn replica_url(store: &TempStore) -> String {
    format!("file://{}", store.dir.path().join("replica").display())
}

/// Polls `GET /v1/replication` until `done` holds, failing after [`WAIT`].
fn replication_until(server: &Server, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let status = server.json("/v1/replication");
        if done(&status) {
            return status;
        }
        assert!(started.elapsed() < WAIT, "{what}: {status}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn caught_up(status: &Value, head: u64) -> bool {
    status["replicated"]["seq"] == head && status["lag_events"] == 0 && status["error"].is_null()
}

fn create(server: &Server, path: &str) {
    let reply = server.memory(&json!({"command": "create", "path": path, "file_text": "x\n"}));
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[test]
fn a_served_store_replicates_as_written_and_a_kill_loses_nothing_it_reported_replicated() {
    let store = TempStore::new();
    let db = store.path();
    let url = replica_url(&store);
    let server = Server::start_with(
        &db,
        Durability::Fsync,
        &["--replicate", &url, "--replicate-interval", "0.05"],
    );
    // Four clients write; the replicated seq the server reports only moves forward.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, bearer) = (server.addr(), server.bearer());
            std::thread::spawn(move || {
                for i in 0..30 {
                    let input = json!({"command": "create", "path": format!("/memories/w{w}/n{i}.md"), "file_text": format!("{w} {i}\n")});
                    let reply = post_memory(addr, &bearer, &input);
                    assert_eq!(reply.status, 200, "{}", reply.text());
                }
            })
        })
        .collect();
    let mut reported = Vec::new();
    while writers.iter().any(|w| !w.is_finished()) {
        reported.push(
            server.json("/v1/replication")["replicated"]["seq"]
                .as_u64()
                .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for writer in writers {
        writer.join().expect("a writer");
    }
    assert!(reported.windows(2).all(|w| w[0] <= w[1]), "{reported:?}");
    let head = server.json("/v1/head")["seq"].as_u64().unwrap();
    assert!(head >= 120, "{head}");
    let status = replication_until(&server, "the replica never caught up", |s| {
        caught_up(s, head)
    });
    let checkpoint = format!("{head}:{}", status["replicated"]["hash"].as_str().unwrap());
    assert_eq!(
        status["signed"], false,
        "the store has no signing key: {status}"
    );
    // More writes, acknowledged but perhaps not replicated, then the server dies at once.
    for i in 0..5 {
        create(&server, &format!("/memories/late{i}.md"));
    }
    drop(server);
    // The replica holds every event up to the head it was reported at, byte for byte as the
    // store does, and verifies with that checkpoint.
    let out = run_mnemo(&["verify", "--from", &url, "--expect", &checkpoint], "");
    assert!(out.status.success(), "{out:?}");
    let restored = store.dir.path().join("restored");
    run_ok(
        &[
            "restore",
            "--from",
            &url,
            "--db",
            restored.to_str().unwrap(),
        ],
        "",
    );
    let (ours, theirs) = (open_store(&db), open_store(&restored));
    for seq in 1..=head {
        let seq = mnemo::Seq(seq);
        assert_eq!(
            ours.get(seq).unwrap(),
            theirs.get(seq).unwrap(),
            "event {seq}"
        );
    }
    drop((ours, theirs));
    let listed = run_ok(&["ls", "/", "--db", restored.to_str().unwrap()], "");
    for w in 0..4 {
        for i in 0..30 {
            assert!(
                listed.contains(&format!("/memories/w{w}/n{i}.md")),
                "{listed}"
            );
        }
    }
}

#[test]
fn a_failing_replica_is_reported_while_writes_go_on_and_shipping_resumes() {
    let store = TempStore::new();
    let db = store.path();
    let url = replica_url(&store);
    let server = Server::start(&db, &["--replicate", &url, "--replicate-interval", "0.05"]);
    create(&server, "/memories/a.md");
    let head = server.json("/v1/head")["seq"].as_u64().unwrap();
    replication_until(&server, "the first shipment", |s| caught_up(s, head));
    // The replica's segment directory becomes a file: every shipment fails.
    let segments = store.dir.path().join("replica/segments");
    let away = store.dir.path().join("replica/segments.away");
    std::fs::rename(&segments, &away).unwrap();
    std::fs::write(&segments, b"not a directory").unwrap();
    for i in 0..3 {
        create(&server, &format!("/memories/b{i}.md"));
    }
    let failing = replication_until(&server, "no failure reported", |s| s["error"].is_string());
    assert!(failing["lag_events"].as_u64().unwrap() > 0, "{failing}");
    // Writes are answered while the replica is down; once it is back the shipper catches up.
    create(&server, "/memories/c.md");
    std::fs::remove_file(&segments).unwrap();
    std::fs::rename(&away, &segments).unwrap();
    let head = server.json("/v1/head")["seq"].as_u64().unwrap();
    replication_until(&server, "shipping did not resume", |s| caught_up(s, head));
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("failed") && stderr.contains("trying again"),
        "{stderr}"
    );
    let out = run_ok(&["verify", "--from", &url], "");
    assert!(out.contains("INTACT"), "{out}");
}

#[test]
fn a_server_that_does_not_replicate_says_how_to_start_one_that_does() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let reply = server.call("GET", "/v1/replication", b"");
    assert_eq!(reply.status, 404);
    assert!(reply.text().contains("--replicate URL"), "{}", reply.text());
}

/// Polls `server`'s `GET /v1/head` until it reaches `seq`.
fn head_reaches(server: &Server, seq: u64) {
    let started = Instant::now();
    loop {
        let head = server.json("/v1/head")["seq"].as_u64().unwrap();
        if head == seq {
            return;
        }
        assert!(
            head < seq,
            "the follower went past the primary: {head} > {seq}"
        );
        assert!(
            started.elapsed() < WAIT,
            "the follower stayed at {head}, not {seq}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `mnemo serve --follow URL`: a new follower is restored from the replica, takes each new
/// shipment, answers reads (the same file, the same head, an intact verify), refuses every
/// write naming the replica (its log unchanged), and a redaction on the primary rebuilds it so
/// that no byte of the erased text stays in its directory.
#[test]
fn a_follower_serves_the_replica_read_only_and_keeps_up_through_a_redaction() {
    let store = TempStore::new();
    let url = replica_url(&store);
    let primary = Server::start(
        &store.path(),
        &["--replicate", &url, "--replicate-interval", "0.05"],
    );
    let secret = "QXFOLLOWSECRETQX";
    let input = json!({"command": "create", "path": "/memories/secret.md", "file_text": format!("{secret}\n")});
    assert_eq!(primary.memory(&input).status, 200);
    create(&primary, "/memories/a.md");
    let head = primary.json("/v1/head")["seq"].as_u64().unwrap();
    replication_until(&primary, "the first shipment", |s| caught_up(s, head));
    let follower_db = store.dir.path().join("follower");
    let follower = Server::start(
        &follower_db,
        &["--follow", &url, "--follow-interval", "0.05"],
    );
    head_reaches(&follower, head);
    for i in 0..3 {
        create(&primary, &format!("/memories/b{i}.md"));
    }
    let head = primary.json("/v1/head")["seq"].as_u64().unwrap();
    head_reaches(&follower, head);
    let cat = follower.call("GET", "/v1/cat?path=/memories/b2.md", b"");
    assert_eq!((cat.status, cat.text()), (200, "x\n".to_string()));
    assert_eq!(follower.json("/v1/head"), primary.json("/v1/head"));
    // Writes are refused, naming the replica, and leave the follower's log as it was.
    let refused = follower.memory(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains("read-only follower") && refused.text().contains(&url));
    let refused = follower.call(
        "POST",
        "/v1/config",
        br#"{"name":"delete","value":"erase"}"#,
    );
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(follower.json("/v1/head")["seq"], head);
    // A redaction on the primary reaches the follower, which is rebuilt without the text.
    let body = json!({"reason": "asked", "texts": [secret]}).to_string();
    let reply = primary.call("POST", "/v1/redact", body.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let head = primary.json("/v1/head")["seq"].as_u64().unwrap();
    head_reaches(&follower, head);
    assert_eq!(follower.json("/v1/verify")["status"], "intact");
    let status = follower.json("/v1/replication");
    assert_eq!(status["lag_events"], 0, "{status}");
    let (stopped, stderr) = follower.stop();
    assert!(stopped.success(), "{stderr}");
    assert!(
        !crate::support::dir_holds(&follower_db, secret.as_bytes()),
        "the follower kept the erased text"
    );
    assert!(!crate::support::dir_holds(
        &store.dir.path().join("replica"),
        secret.as_bytes()
    ));
    let beside: Vec<_> = std::fs::read_dir(store.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".follower") || n.starts_with("..follower"))
        .collect();
    assert!(beside.is_empty(), "the rebuild left {beside:?}");
}

/// Replica flags are checked before the store is opened: a bad interval or a replica in the
/// store's own directory is refused with exit 2 and no store is created.
#[test]
fn bad_replica_flags_are_refused_before_a_store_is_made() {
    let store = TempStore::new();
    let db = store.path();
    let url = replica_url(&store);
    let inside = format!("file://{}/replica", db.display());
    for (args, says) in [
        (
            vec!["--replicate", &url, "--replicate-interval", "0"],
            "from 0.01",
        ),
        (
            vec!["--replicate", &url, "--replicate-interval", "1e30"],
            "to 86400",
        ),
        (
            vec!["--replicate", &url, "--replicate-interval", "nan"],
            "from 0.01",
        ),
        (vec!["--replicate", &inside], "own directory"),
        (vec!["--replicate", "file:///"], "own directory"),
        (vec!["--follow", &url, "--follow-interval=-1"], "from 0.01"),
    ] {
        let mut all = vec!["serve", "--db", db.to_str().unwrap()];
        all.extend(&args);
        let out = run_mnemo(&all, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!db.exists(), "{args:?} made a store");
    }
}

/// A follower is refused at start on a store that is not a copy of its replica, and what killed
/// restores left beside its directory (partial copies, which may hold what a later redaction
/// erased) is removed when it starts.
#[test]
fn a_follower_refuses_a_store_that_is_not_a_copy_and_sweeps_killed_restores() {
    let store = TempStore::new();
    let url = replica_url(&store);
    let db = store.path();
    run_ok(
        &["tool", "--db", db.to_str().unwrap()],
        &session_lines(0, 3),
    );
    run_ok(
        &[
            "replicate",
            "--db",
            db.to_str().unwrap(),
            "--to",
            &url,
            "--once",
        ],
        "",
    );
    let other = store.dir.path().join("other");
    run_ok(
        &["tool", "--db", other.to_str().unwrap()],
        &session_lines(5, 9),
    );
    let out = run_mnemo(
        &["serve", "--db", other.to_str().unwrap(), "--follow", &url],
        "",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("another store's"), "{stderr}");
    // A restore killed before it finished, and a name that only looks like one.
    let follower = store.dir.path().join("f");
    let left = store.dir.path().join(".f.restore-0123456789abcdef");
    let other_name = store.dir.path().join(".f.restore-mine");
    for dir in [&left, &other_name] {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("db"), "QXLEFTQX").unwrap();
    }
    let server = Server::start(&follower, &["--follow", &url]);
    assert!(!left.exists(), "a killed restore's directory was kept");
    assert!(
        other_name.exists(),
        "a directory of another name was removed"
    );
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
}

fn session_lines(from: usize, to: usize) -> String {
    (from..to)
        .map(|i| json!({"command": "create", "path": format!("/memories/n{i}.md"), "file_text": format!("{i}\n")}).to_string() + "\n")
        .collect()
}

/// Before: `serve --follow` took no `--key`, so whoever holds the bucket appended forged events
/// under an unsigned head and the follower served them with `error: null`. Now a follower given
/// the key takes only heads it signed (the forged tail is never served, and the status says why),
/// records the key so a restart without `--key` still checks, and refuses another key.
#[test]
fn a_follower_with_the_owners_key_never_takes_a_forged_tail() {
    let store = TempStore::new();
    let url = replica_url(&store);
    let db = store.path();
    let d = |p: &std::path::Path| p.to_str().unwrap().to_string();
    run_ok(&["tool", "--db", &d(&db)], &session_lines(0, 3));
    let vkey = run_ok(&["key", "create", "--db", &d(&db)], "")
        .trim()
        .to_string();
    run_ok(&["replicate", "--db", &d(&db), "--to", &url, "--once"], "");
    let follower_db = store.dir.path().join("follower");
    let follower = Server::start(
        &follower_db,
        &[
            "--follow",
            &url,
            "--follow-interval",
            "0.05",
            "--key",
            &vkey,
        ],
    );
    head_reaches(&follower, 3);
    // The forger restores the replica, writes, and ships a tail under an unsigned head.
    let forged = store.dir.path().join("forged");
    run_ok(&["restore", "--from", &url, "--db", &d(&forged)], "");
    run_ok(&["tool", "--db", &d(&forged)], &session_lines(10, 11));
    run_ok(
        &["replicate", "--db", &d(&forged), "--to", &url, "--once"],
        "",
    );
    let status = replication_until(&follower, "the forged head refused", |s| {
        s["error"]
            .as_str()
            .is_some_and(|e| e.contains("not signed"))
    });
    assert_eq!(status["head"]["seq"], 3, "{status}");
    assert_eq!(follower.json("/v1/head")["seq"], 3);
    let cat = follower.call("GET", "/v1/cat?path=/memories/n10.md", b"");
    assert_eq!(cat.status, 404, "{}", cat.text());
    let (stopped, stderr) = follower.stop();
    assert!(stopped.success(), "{stderr}");
    // Restarted without --key, it still checks (the key is recorded in the store) and is
    // refused at once, the forged head being its replica's.
    let out = run_mnemo(&["serve", "--db", &d(&follower_db), "--follow", &url], "");
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not signed"),
        "{out:?}"
    );
    // Another key is refused, naming the one recorded.
    let other = store.dir.path().join("other");
    run_ok(&["tool", "--db", &d(&other)], &session_lines(0, 1));
    let other_key = run_ok(&["key", "create", "--db", &d(&other)], "")
        .trim()
        .to_string();
    let out = run_mnemo(
        &[
            "serve",
            "--db",
            &d(&follower_db),
            "--follow",
            &url,
            "--key",
            &other_key,
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("trusts replica heads signed by"));
}
