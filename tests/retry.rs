//! Retries by tool_use id. A retry is logged as an event of its own; it is answered from the
//! record of the original only when the same agent sends the same id with the same input and still
//! holds the access the original needed. The same id with another input is an error result. A call
//! that changed nothing (a read, an error) is answered again against the tree as it is now. The
//! verifier re-derives every retry answer from the log alone.

use mnemo::testing::{Store, verify_store};
use mnemo::{Access, MnemoClient, MnemoMemoryToolServer, ViolationKind};
use mnemo::{Event, Seq};
use serde_json::{Value, json};

use crate::support::{TempStore, call, open_store};

fn block(id: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": "memory", "input": input})
}

fn text(result: &Value) -> &str {
    result["content"].as_str().expect("text")
}

fn is_error(result: &Value) -> bool {
    result.get("is_error") == Some(&json!(true))
}

fn head(server: &MnemoMemoryToolServer) -> u64 {
    server.client().head().expect("head").seq.0
}

fn content(client: &MnemoClient, path: &str) -> Option<String> {
    client.record(path).expect("read").map(|r| r.content)
}

#[test]
fn a_retried_change_gets_the_recorded_text_runs_nothing_and_is_logged() {
    let s = TempStore::new();
    let server = s.server();
    let create = block(
        "toolu_1",
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    );
    let first = server.handle(&create);
    assert_eq!(text(&first), "File created successfully at: /memories/a");
    // Running it again would fail with "already exists": the retry must not run.
    assert_eq!(server.handle(&create), first);
    assert_eq!(head(&server), 2, "the retry is an event of its own");
    assert_eq!(
        content(server.client(), "/memories/a").as_deref(),
        Some("one")
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
}

#[test]
fn the_same_id_with_another_input_is_an_error_result_and_both_are_logged() {
    let s = TempStore::new();
    let server = s.server();
    let first = server.handle(&block(
        "toolu_1",
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    ));
    assert!(!is_error(&first), "{first}");
    for other in [
        json!({"command": "delete", "path": "/memories/a"}),
        json!({"command": "create", "path": "/memories/a", "file_text": "two"}),
        json!({"command": "create", "path": "/memories/b", "file_text": "one"}),
    ] {
        let out = server.handle(&block("toolu_1", other.clone()));
        assert!(is_error(&out), "{other}: {out}");
        let why = text(&out);
        assert!(
            why.contains("toolu_1") && why.contains("different") && why.contains("fresh"),
            "{why}"
        );
        assert_eq!(out["tool_use_id"], "toolu_1");
    }
    assert_eq!(head(&server), 4, "every call is logged");
    assert_eq!(
        content(server.client(), "/memories/a").as_deref(),
        Some("one")
    );
    assert_eq!(content(server.client(), "/memories/b"), None);
    // The original is still recognised afterwards.
    let again = server.handle(&block(
        "toolu_1",
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    ));
    assert_eq!(again, first);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 5);
}

/// The issue's reproduction: agent b views a file with `toolu_1`, loses its grant, and sends
/// `toolu_1` again (and once as a delete). Neither may return the old content.
#[test]
fn a_retry_after_a_revoke_is_checked_against_the_policy_now() {
    let s = TempStore::new();
    let operator = s.client();
    let secret = "the secret text";
    operator
        .grant("operator", "/", Access::ReadWrite)
        .expect("grant");
    operator
        .grant("b", "/memories/b", Access::ReadWrite)
        .expect("grant");
    operator.revoke("*", "/").expect("revoke");
    let b = MnemoMemoryToolServer::new(operator.with_agent("b").expect("agent"));
    let create = block(
        "toolu_c",
        json!({"command": "create", "path": "/memories/b/f.md", "file_text": secret}),
    );
    let created = b.handle(&create);
    assert!(!is_error(&created), "{created}");
    let view = block(
        "toolu_1",
        json!({"command": "view", "path": "/memories/b/f.md"}),
    );
    let seen = b.handle(&view);
    assert!(text(&seen).contains(secret), "{seen}");

    operator.revoke("b", "/memories/b").expect("revoke");
    let again = b.handle(&view);
    assert!(is_error(&again), "{again}");
    assert!(!text(&again).contains(secret), "{again}");
    assert!(text(&again).contains("Access denied"), "{again}");
    let as_delete = b.handle(&block(
        "toolu_1",
        json!({"command": "delete", "path": "/memories/b/f.md"}),
    ));
    assert!(is_error(&as_delete), "{as_delete}");
    assert!(!text(&as_delete).contains(secret), "{as_delete}");
    // A retried change is refused too: the grant it needed is gone.
    let recreate = b.handle(&create);
    assert!(is_error(&recreate), "{recreate}");
    assert!(text(&recreate).contains("read-write"), "{recreate}");

    // With the grant back, the retried change gets its recorded answer again.
    operator
        .grant("b", "/memories/b", Access::ReadWrite)
        .expect("grant");
    assert_eq!(b.handle(&create), created);
    assert_eq!(
        content(
            &operator.with_agent("operator").expect("agent"),
            "/memories/b/f.md"
        )
        .as_deref(),
        Some(secret)
    );
    let report = operator.verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 11, "5 policy changes and 6 calls of b");
}

#[test]
fn a_retried_read_is_answered_against_the_tree_as_it_is_now() {
    let s = TempStore::new();
    let server = s.server();
    call(
        &server,
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    );
    let view = block("toolu_v", json!({"command": "view", "path": "/memories/a"}));
    assert!(text(&server.handle(&view)).contains("     1\tone"));
    call(
        &server,
        json!({"command": "str_replace", "path": "/memories/a", "old_str": "one", "new_str": "two"}),
    );
    let again = server.handle(&view);
    assert!(text(&again).contains("     1\ttwo"), "{again}");
    // A failed call changed nothing either: its retry runs now, and then counts as the change.
    let make_b = block(
        "toolu_b",
        json!({"command": "create", "path": "/memories/b/c", "file_text": "c"}),
    );
    call(
        &server,
        json!({"command": "create", "path": "/memories/b", "file_text": "in the way"}),
    );
    assert!(is_error(&server.handle(&make_b)));
    call(&server, json!({"command": "delete", "path": "/memories/b"}));
    let made = server.handle(&make_b);
    assert_eq!(text(&made), "File created successfully at: /memories/b/c");
    call(&server, json!({"command": "delete", "path": "/memories/b"}));
    assert_eq!(server.handle(&make_b), made, "answered from the record now");
    assert_eq!(content(server.client(), "/memories/b/c"), None);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 10);
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
    assert_eq!(client.head().expect("head").seq, Seq(2));
    // Another agent using the same id makes another call.
    let other = MnemoMemoryToolServer::new(client.with_agent("agent-b").expect("agent"));
    let second = other.handle(&create);
    assert_eq!(
        second["is_error"], true,
        "it runs, and the file exists: {second}"
    );
    assert_eq!(client.head().expect("head").seq, Seq(3));
}

#[test]
fn concurrent_duplicates_change_the_tree_once() {
    let s = TempStore::new();
    let server = s.server();
    let insert = block(
        "toolu_c",
        json!({"command": "insert", "path": "/memories/c", "insert_line": 0, "insert_text": "x"}),
    );
    call(
        &server,
        json!({"command": "create", "path": "/memories/c", "file_text": ""}),
    );
    let results: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| server.handle(&insert)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(results.iter().all(|r| r == &results[0]), "{results:?}");
    assert_eq!(text(&results[0]), "The file /memories/c has been edited.");
    assert_eq!(
        content(server.client(), "/memories/c").as_deref(),
        Some("x")
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 17);
}

/// Appends a copy of event 1 as event 2 with the outcome of `(is_error, text)`, straight
/// through sled.
fn append_copy_of_first(s: &TempStore, (is_error, text): (bool, &str)) -> Store {
    let store = open_store(&s.path());
    let (events, _, _) = store.raw_trees();
    let mut again =
        Event::decode(&events.get(Seq(1).key()).expect("get").expect("event")).expect("decode");
    again.seq = Seq(2);
    again.prev_hash = store.head().expect("head").hash;
    again.header.outcome = again.outcome_of(is_error, text);
    store.append(&[again.to_frame()]).expect("append");
    store
}

#[test]
fn verify_proves_each_retry_was_answered_by_the_rule() {
    let create = json!({"command": "create", "path": "/memories/d", "file_text": "d"});
    let s = TempStore::new();
    s.server().handle(&block("toolu_d", create.clone()));
    // A logged retry with the recorded answer is what the writer does: intact.
    let store = append_copy_of_first(&s, (false, "File created successfully at: /memories/d"));
    let report = verify_store(&store).expect("verify");
    assert!(report.is_intact(), "{report:?}");

    // A retry that ran again (and so found the file it had made) breaks the rule.
    let s = TempStore::new();
    s.server().handle(&block("toolu_d", create));
    let store = append_copy_of_first(&s, (true, "Error: File /memories/d already exists"));
    let report = verify_store(&store).expect("verify");
    assert_eq!(
        report.violations[0].kind,
        ViolationKind::DuplicateCall,
        "{report:?}"
    );
    assert_eq!(report.violations[0].seq, Seq(2));
    assert!(
        report.violations[0].detail.contains("seq 1"),
        "{:?}",
        report.violations[0]
    );
}

/// Sum of the index's key and value bytes.
fn index_bytes(client: &MnemoClient) -> usize {
    client.flush_index().expect("write the index");
    let (_, _, index) = client.store().expect("a store open here").raw_trees();
    index
        .iter()
        .map(|item| {
            let (k, v) = item.expect("index entry");
            k.len() + v.len()
        })
        .sum()
}

/// Retry records keep the outcome, not a read's text: 20 views of a large file (and a retry of
/// each) leave the index about as large as it was.
#[test]
fn retry_records_of_views_of_a_large_file_stay_small() {
    let s = TempStore::new();
    let server = s.server();
    let line = "0123456789".repeat(10);
    let big: String = (0..40_000).map(|i| format!("{i:06} {line}\n")).collect();
    assert!(big.len() > 4_000_000);
    let (out, err) = call(
        &server,
        json!({"command": "create", "path": "/memories/big.txt", "file_text": big}),
    );
    assert!(!err, "{out}");
    let before = index_bytes(server.client());
    for i in 0..20 {
        let view = block(
            &format!("toolu_view_{i}"),
            json!({"command": "view", "path": "/memories/big.txt"}),
        );
        for _ in 0..2 {
            let out = server.handle(&view);
            assert!(!is_error(&out) && text(&out).len() > big.len(), "view {i}");
        }
    }
    let grown = index_bytes(server.client()) - before;
    assert!(
        grown < 40 * 1024,
        "40 calls with ids grew the index by {grown} bytes (the file is {} bytes)",
        big.len()
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
}

/// A command of the model test: on file `/memories/f{n}`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cmd {
    Create(u8, u8),
    View(u8),
    Delete(u8),
}

impl Cmd {
    fn path(&self) -> String {
        let (Cmd::Create(f, _) | Cmd::View(f) | Cmd::Delete(f)) = self;
        format!("/memories/f{f}")
    }

    fn input(&self) -> Value {
        let path = self.path();
        match self {
            Cmd::Create(_, c) => {
                json!({"command": "create", "path": path, "file_text": format!("c{c}")})
            }
            Cmd::View(_) => json!({"command": "view", "path": path}),
            Cmd::Delete(_) => json!({"command": "delete", "path": path}),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Agent `a` (0) or `b` (1) calls, with tool_use id `toolu_{id}` or none.
    Call(u8, Option<u8>, Cmd),
    /// Toggles b's read-write grant on /memories.
    Toggle,
    Reopen,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let cmd = prop_oneof![
        (0u8..3, 0u8..3).prop_map(|(f, c)| Cmd::Create(f, c)),
        (0u8..3).prop_map(Cmd::View),
        (0u8..3).prop_map(Cmd::Delete),
    ];
    prop_oneof![
        12 => (0u8..2, proptest::option::weighted(0.85, 0u8..4), cmd)
            .prop_map(|(agent, id, cmd)| Op::Call(agent, id, cmd)),
        2 => Just(Op::Toggle),
        1 => Just(Op::Reopen),
    ]
}

/// What the model keeps of a call with an id.
struct Rec {
    cmd: Cmd,
    changed: bool,
    text: String,
    is_error: bool,
}

/// The answer a new call gets, and the change it makes, in the model.
fn fresh(
    agent: &str,
    cmd: &Cmd,
    files: &mut std::collections::BTreeMap<String, String>,
    may_write: bool,
) -> (String, bool, bool) {
    let path = cmd.path();
    if !may_write {
        let need = if matches!(cmd, Cmd::View(_)) {
            "read"
        } else {
            "read-write"
        };
        return (
            format!("Error: Access denied: agent {agent} has no {need} grant covering {path}"),
            true,
            false,
        );
    }
    match cmd {
        Cmd::Create(_, c) if !files.contains_key(&path) => {
            files.insert(path.clone(), format!("c{c}"));
            (format!("File created successfully at: {path}"), false, true)
        }
        Cmd::Create(..) => (format!("Error: File {path} already exists"), true, false),
        Cmd::View(_) => match files.get(&path) {
            Some(content) => (
                format!("Here's the content of {path} with line numbers:\n     1\t{content}"),
                false,
                false,
            ),
            None => (
                format!("The path {path} does not exist. Please provide a valid path."),
                true,
                false,
            ),
        },
        Cmd::Delete(_) if files.remove(&path).is_some() => {
            (format!("Successfully deleted {path}"), false, true)
        }
        Cmd::Delete(_) => (
            format!("Error: The path {path} does not exist"),
            true,
            false,
        ),
    }
}

fn open_servers(s: &TempStore) -> (MnemoClient, [MnemoMemoryToolServer; 2]) {
    let client = s.client();
    let servers = ["a", "b"]
        .map(|agent| MnemoMemoryToolServer::new(client.with_agent(agent).expect("agent id")));
    (client, servers)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("MNEMO_RETRY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Calls with and without ids, by two agents, with b's grant revoked and given back and the
    /// store reopened, against a model of the retry rule: the same input repeats a change's text
    /// while the agent may still write, runs a read or failed call again, another input is refused;
    /// every call is one event, and the store verifies.
    #[test]
    fn retries_against_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        use proptest::prelude::*;
        let s = TempStore::new();
        let (mut client, mut servers) = open_servers(&s);
        client.grant("a", "/", Access::ReadWrite).expect("grant");
        client.grant("b", "/memories", Access::ReadWrite).expect("grant");
        client.revoke("*", "/").expect("revoke");
        let mut events = 3;
        let mut b_may = true;
        let mut files = std::collections::BTreeMap::new();
        let mut records: std::collections::HashMap<(u8, u8), Rec> = Default::default();
        for op in &ops {
            match op {
                Op::Toggle => {
                    if b_may {
                        client.revoke("b", "/memories").expect("revoke");
                    } else {
                        client.grant("b", "/memories", Access::ReadWrite).expect("grant");
                    }
                    b_may = !b_may;
                    events += 1;
                }
                Op::Reopen => {
                    drop((client, servers));
                    (client, servers) = open_servers(&s);
                }
                Op::Call(agent, id, cmd) => {
                    let name = ["a", "b"][usize::from(*agent)];
                    let may = *agent == 0 || b_may;
                    let out = match id {
                        Some(id) => servers[usize::from(*agent)]
                            .handle(&block(&format!("toolu_{id}"), cmd.input())),
                        None => servers[usize::from(*agent)].handle(&cmd.input()),
                    };
                    events += 1;
                    let (got, got_error) = (text(&out).to_string(), is_error(&out));
                    let key = id.map(|id| (*agent, id));
                    match key.and_then(|k| records.get(&k)) {
                        Some(rec) if &rec.cmd != cmd => {
                            prop_assert!(got_error && got.contains("for a different call"), "{}", got);
                        }
                        Some(rec) if rec.changed && !may => {
                            prop_assert!(got_error && got.contains("no longer has a read-write grant"), "{}", got);
                        }
                        Some(rec) if rec.changed => {
                            prop_assert_eq!((&got, got_error), (&rec.text, rec.is_error));
                        }
                        _ => {
                            let (want, want_error, changed) = fresh(name, cmd, &mut files, may);
                            prop_assert_eq!((&got, got_error), (&want, want_error), "{:?}", op);
                            if let Some(k) = key {
                                records.insert(k, Rec { cmd: cmd.clone(), changed, text: want, is_error: want_error });
                            }
                        }
                    }
                }
            }
        }
        let report = client.verify().expect("verify");
        prop_assert!(report.is_intact(), "{:?}", report.violations);
        prop_assert_eq!(report.events, events);
        let found: std::collections::BTreeMap<String, String> = servers[0]
            .client()
            .records_by_tag("memorytool")
            .expect("records")
            .into_iter()
            .map(|r| (r.path, r.content))
            .collect();
        prop_assert_eq!(found, files);
    }
}

/// An index of layout 2 (whose retry records held every answer's text) is rebuilt from the log
/// on open, into bounded records.
#[test]
fn an_index_of_layout_2_is_rebuilt_with_bounded_records() {
    let s = TempStore::new();
    {
        let server = s.server();
        server.handle(&block(
            "toolu_1",
            json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
        ));
        server.handle(&block(
            "toolu_2",
            json!({"command": "view", "path": "/memories/a"}),
        ));
        server.client().flush_index().expect("write the index");
        let (_, _, index) = server
            .client()
            .store()
            .expect("a store open here")
            .raw_trees();
        index.insert(b"L", &[2u8]).expect("layout 2");
        // A record in the old layout: seq, is_error, the text.
        let mut old = 2u64.to_be_bytes().to_vec();
        old.push(0);
        old.extend_from_slice(b"Here's the content of /memories/a with line numbers:\n     1\tone");
        index
            .insert(b"ttest-agent\0toolu_2", old)
            .expect("old record");
        index.flush().expect("flush");
    }
    let server = s.server();
    assert_eq!(
        server
            .client()
            .store()
            .expect("a store open here")
            .index()
            .layout()
            .expect("layout"),
        mnemo::testing::INDEX_LAYOUT
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
    let kept = server
        .client()
        .store()
        .expect("a store open here")
        .index()
        .recorded("test-agent", "toolu_2")
        .expect("read")
        .expect("kept");
    assert_eq!((kept.seq, kept.text), (Seq(2), None));
    let again = server.handle(&block(
        "toolu_1",
        json!({"command": "create", "path": "/memories/a", "file_text": "one"}),
    ));
    assert_eq!(text(&again), "File created successfully at: /memories/a");
}
