//! Idempotent retries: a tool_use id an agent already used gets the recorded answer again, runs
//! nothing and logs nothing — across restarts and concurrent duplicates too.

use mnemo::event::{Event, Seq};
use mnemo::{MnemoMemoryToolServer, Store, ViolationKind, verify_store};
use serde_json::{Value, json};

use crate::support::TempStore;

fn block(id: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": "memory", "input": input})
}

#[test]
fn a_retried_id_returns_the_recorded_text_and_adds_no_event() {
    let s = TempStore::new();
    let server = s.server();
    let create = block(
        "toolu_1",
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    );
    let first = server.handle(&create);
    assert_eq!(
        first["content"],
        "File created successfully at: /memories/a"
    );
    // Executing it again would fail with "already exists": the retry must not execute.
    assert_eq!(server.handle(&create), first);
    // The id is the key, whatever the retried input says.
    let other_input = block(
        "toolu_1",
        json!({"command": "delete", "path": "/memories/a"}),
    );
    assert_eq!(server.handle(&other_input), first);
    assert_eq!(server.client().head().expect("head").seq, Seq(1));
    assert!(
        server
            .client()
            .record("/memories/a")
            .expect("read")
            .is_some()
    );

    // A view's answer is recorded as it was, even after the file changed.
    let view = block("toolu_2", json!({"command": "view", "path": "/memories/a"}));
    let seen = server.handle(&view);
    server.handle(&block(
        "toolu_3",
        json!({"command": "str_replace", "path": "/memories/a", "old_str": "one", "new_str": "two"}),
    ));
    assert_eq!(server.handle(&view), seen);

    // Errors are recorded too, and bare inputs (no id) always run.
    let bad = block("toolu_4", json!({"command": "view", "path": "/etc"}));
    let bad_first = server.handle(&bad);
    assert_eq!(bad_first["is_error"], true);
    assert_eq!(server.handle(&bad), bad_first);
    let bare = json!({"command": "view", "path": "/memories"});
    server.handle(&bare);
    server.handle(&bare);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.events, 6,
        "create, view, str_replace, the bad view, two bare views"
    );
}

#[test]
fn retries_survive_a_restart_and_are_per_agent() {
    let s = TempStore::new();
    let create = block(
        "toolu_r",
        json!({"command": "create", "path": "/memories/r", "file_text": "x"}),
    );
    let first = s.server().handle(&create);
    let client = s.client();
    let server = MnemoMemoryToolServer::new(client.clone());
    assert_eq!(server.handle(&create), first, "after a reopen");
    assert_eq!(client.head().expect("head").seq, Seq(1));
    // Another agent using the same id is another call.
    let other = MnemoMemoryToolServer::new(client.with_agent("agent-b").expect("agent"));
    let second = other.handle(&create);
    assert_eq!(
        second["is_error"], true,
        "it runs, and the file exists: {second}"
    );
    assert_eq!(client.head().expect("head").seq, Seq(2));
}

#[test]
fn concurrent_duplicates_run_once() {
    let s = TempStore::new();
    let server = s.server();
    let create = block(
        "toolu_c",
        json!({"command": "create", "path": "/memories/c", "file_text": "x"}),
    );
    let results: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| server.handle(&create)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(results.iter().all(|r| r == &results[0]), "{results:?}");
    assert_eq!(
        results[0]["content"],
        "File created successfully at: /memories/c"
    );
    assert_eq!(server.client().head().expect("head").seq, Seq(1));
}

#[test]
fn verify_flags_an_id_logged_twice() {
    let s = TempStore::new();
    {
        let server = s.server();
        server.handle(&block(
            "toolu_d",
            json!({"command": "view", "path": "/memories"}),
        ));
    }
    let store = Store::open(&s.path()).expect("open");
    let (events, _, _) = store.raw_trees();
    let mut again =
        Event::decode(&events.get(Seq(1).key()).expect("get").expect("event")).expect("decode");
    again.seq = Seq(2);
    again.prev_hash = store.head().expect("head").hash;
    store.append(&[again.to_frame()]).expect("append");
    let report = verify_store(&store).expect("verify");
    assert_eq!(
        report.violations[0].kind,
        ViolationKind::DuplicateCall,
        "{report:?}"
    );
    assert_eq!(report.violations[0].seq, Seq(2));
}
