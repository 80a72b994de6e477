//! The server's reads prove what they show: with one stored call rewritten in a closed store
//! (re-encoded with its payload and chain hashes recomputed), `/v1/show`, `/v1/ls` and `/v1/cat`
//! at a seq, `/v1/log`, and a `--data` store's memory versions answer an error naming the seq at
//! which the chain breaks, and nothing of the forgery.

use serde_json::{Value, json};

use super::Server;
use crate::support::{TempStore, tamper_record};

/// Rewrites the content event `seq` writes (a memory-tool create or an API create) and stores
/// the event re-encoded with its hashes recomputed.
fn forge(db: &std::path::Path, seq: u64, to: &str) {
    use mnemo::event::ApiWrite;
    use mnemo::tool::Command;
    tamper_record(db, seq, |record| {
        let mut event = mnemo::Event::decode(record).expect("decode");
        match &mut event.body {
            mnemo::Body::Tool(call) => match &mut call.command {
                Command::Create { file_text, .. } => *file_text = to.into(),
                other => panic!("event {seq} is {other:?}"),
            },
            mnemo::Body::Api(ApiWrite::Create { content, .. }) => *content = to.into(),
            other => panic!("event {seq} is {other:?}"),
        }
        *record = event.to_frame().encode();
    });
}

fn refused(server: &Server, target: &str, seq: u64) -> Option<String> {
    let reply = server.call("GET", target, b"");
    let text = reply.text();
    let named = text.contains(&format!(
        "event {seq} is not the event the log's chain recorded"
    ));
    (reply.status == 200 || !named || text.contains("MALLORY"))
        .then(|| format!("{target}: {} {text}", reply.status))
}

#[test]
fn the_read_routes_refuse_a_forged_record() {
    let s = TempStore::new();
    {
        let server = Server::start(&s.path(), &[]);
        for call in [
            json!({"command": "create", "path": "/memories/ledger.md", "file_text": "pay ALICE 100\n"}),
            json!({"command": "view", "path": "/memories"}),
        ] {
            assert_eq!(server.memory(&call).status, 200);
        }
        server.stop();
    }
    forge(&s.path(), 1, "pay MALLORY 9\n");
    let server = Server::start(&s.path(), &[]);
    let problems: Vec<String> = [
        "/v1/show?seq=1",
        "/v1/show?seq=2",
        "/v1/ls?at=1",
        "/v1/cat?path=/memories/ledger.md&at=1",
        "/v1/log",
        "/v1/history?path=/memories/ledger.md",
    ]
    .iter()
    .filter_map(|target| refused(&server, target, 2))
    .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn memory_versions_refuse_a_forged_api_write() {
    let data = tempfile::TempDir::new().expect("tempdir");
    let (store, first, second) = {
        let server = Server::start_data(data.path(), &[]);
        let created = server.call("POST", "/v1/memory_stores", br#"{"name":"ledger"}"#);
        assert_eq!(created.status, 200, "{}", created.text());
        let store: Value = serde_json::from_slice(&created.body).expect("json");
        let store = store["id"].as_str().expect("id").to_string();
        let memory = server.call(
            "POST",
            &format!("/v1/memory_stores/{store}/memories"),
            json!({"path": "/ledger.md", "content": "pay ALICE 100\n"})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(memory.status, 200, "{}", memory.text());
        let memory: Value = serde_json::from_slice(&memory.body).expect("json");
        let id = memory["id"].as_str().expect("id").to_string();
        let sha = memory["content_sha256"].as_str().expect("sha").to_string();
        let updated = server.call(
            "POST",
            &format!("/v1/memory_stores/{store}/memories/{id}"),
            json!({"content": "pay BOB 7\n", "precondition": {"type": "content_sha256", "content_sha256": sha}})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(updated.status, 200, "{}", updated.text());
        server.stop();
        (store, 1, 2)
    };
    let name = store.trim_start_matches("memstore_");
    let db = data.path().join(name);
    // The store's own events: find the API create among them.
    let count = {
        let s = crate::support::open_store(&db);
        s.head().expect("head").seq.0
    };
    assert!(count >= second, "the store holds both writes");
    let create = (1..=count)
        .find(|seq| {
            let s = crate::support::open_store(&db);
            let (events, _, _) = s.raw_trees();
            let record = events.get(seq.to_be_bytes()).expect("get").expect("record");
            String::from_utf8_lossy(&record).contains("ALICE 100")
        })
        .expect("the create is logged");
    assert!(create >= first);
    forge(&db, create, "pay MALLORY 9\n");
    let server = Server::start_data(data.path(), &[]);
    let reply = server.call(
        "GET",
        &format!("/v1/memory_stores/{store}/memory_versions?view=full"),
        b"",
    );
    let text = reply.text();
    assert_ne!(reply.status, 200, "{text}");
    assert!(!text.contains("MALLORY"), "{text}");
    assert!(
        text.contains(&format!(
            "event {} is not the event the log's chain recorded",
            create + 1
        )),
        "{text}"
    );
}
