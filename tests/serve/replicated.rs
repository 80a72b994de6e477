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
