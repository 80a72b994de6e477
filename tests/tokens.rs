//! Agent tokens: `mnemo token create | list | revoke`, the token table replayed from the log, and
//! `verify` over the token events.

use std::collections::BTreeMap;

use mnemo::OPERATOR;
use mnemo::testing::token::{self, TokenRecord, Verdict};
use mnemo::testing::{Store, verify_store};
use mnemo::{Durability, MnemoClient, Seq, ViolationKind};
use proptest::prelude::*;

use crate::support::{TempStore, open_client, open_store, run_mnemo, tamper_record};

fn db_arg(store: &TempStore) -> String {
    store.path().to_str().expect("utf-8 path").to_string()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn events(store: &TempStore) -> u64 {
    Store::open_existing(&store.path())
        .expect("open")
        .head()
        .expect("head")
        .seq
        .0
}

/// Runs `mnemo token create` and returns the token it printed (its last line).
fn create(store: &TempStore, agent: &str) -> String {
    // `token create` makes no store (a mistyped --db must not get one): open it first.
    if !store.path().exists() {
        drop(store.client());
    }
    let db = db_arg(store);
    let out = run_mnemo(
        &[
            "token",
            "create",
            "--db",
            &db,
            "--agent",
            agent,
            "--label",
            "ci runner",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .last()
        .expect("a last line")
        .to_string()
}

#[test]
fn the_cli_creates_lists_and_revokes_tokens_and_shows_a_token_only_once() {
    let store = TempStore::new();
    let db = db_arg(&store);
    let text = create(&store, "planner");
    assert!(text.starts_with("mnemo_"), "{text}");
    let id = token::id_of(&text).expect("a token id").to_string();
    let hash_hex = token::hash_of(&text).to_hex();

    let list = run_mnemo(&["token", "list", "--db", &db, "--json"], "");
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let lines: Vec<serde_json::Value> = stdout(&list)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], id.as_str());
    assert_eq!(lines[0]["agent"], "planner");
    assert_eq!(lines[0]["label"], "ci runner");
    assert_eq!(lines[0]["issued_seq"], 1);
    assert_eq!(lines[0]["issued_by"], OPERATOR);
    assert_eq!(lines[0]["revoked"], serde_json::Value::Null);
    let plain = run_mnemo(&["token", "list", "--db", &db], "");
    for shown in [stdout(&list), stdout(&plain)] {
        assert!(!shown.contains(&text[10..]), "the list shows the token");
        assert!(!shown.contains(&hash_hex[..12]), "the list shows the hash");
    }
    assert!(stdout(&plain).contains("active"), "{}", stdout(&plain));

    let revoke = run_mnemo(&["token", "revoke", "--db", &db, &id], "");
    assert_eq!(revoke.status.code(), Some(0), "{}", stderr(&revoke));
    let list = run_mnemo(&["token", "list", "--db", &db, "--json"], "");
    let line: serde_json::Value =
        serde_json::from_str(stdout(&list).trim()).expect("one JSON line");
    assert_eq!(line["revoked"]["seq"], 2);
    assert_eq!(line["revoked"]["by"], OPERATOR);

    // Errors say what to do, and write nothing.
    let before = events(&store);
    for (args, says) in [
        (vec!["token", "revoke", "--db", &db, &id], "already revoked"),
        (
            vec!["token", "revoke", "--db", &db, "0000"],
            "mnemo token list",
        ),
        (vec!["token", "revoke", "--db", &db, "no_such"], "not valid"),
        (
            vec!["token", "create", "--db", &db, "--agent", "*"],
            "name one agent",
        ),
        (
            vec!["token", "create", "--db", &db, "--agent", ""],
            "agent id",
        ),
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    assert_eq!(
        events(&store),
        before,
        "a refused admin command is not logged"
    );

    let verify = run_mnemo(&["verify", "--db", &db], "");
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    let log = run_mnemo(&["log", "--db", &db], "");
    let log = stdout(&log);
    assert!(
        log.contains("token-issue") && log.contains("token-revoke"),
        "{log}"
    );
    assert!(!log.contains(&text[10..]));
}

#[test]
fn a_token_proves_its_agent_until_it_is_revoked() {
    let store = TempStore::new();
    let operator = store.client().with_agent(OPERATOR).expect("operator");
    let issued = token::issue(&operator, "planner", "").expect("issue");
    assert!(!issued.receipt.is_error, "{}", issued.receipt.text);
    let text = issued.token.text().to_string();
    let check =
        |presented: &str| token::authenticate(presented, |id| operator.token(id)).expect("check");
    assert_eq!(check(&text), Verdict::Agent("planner".into()));
    assert_eq!(check(&text.replace("mnemo_", "mnemo_0")), Verdict::Unknown);
    token::revoke(&operator, issued.token.id()).expect("revoke");
    // Straight away, before the index is written: the lookup reads the writer's changes.
    assert_eq!(check(&text), Verdict::Revoked);
    assert!(matches!(
        token::revoke(&operator, issued.token.id()),
        Err(mnemo::Error::InvalidArgument(_))
    ));
}

#[test]
fn tampering_a_token_event_makes_verify_fail() {
    let store = TempStore::new();
    create(&store, "planner");
    let db = db_arg(&store);
    assert_eq!(
        run_mnemo(&["verify", "--db", &db], "").status.code(),
        Some(0)
    );

    // The agent named in the issue event, rewritten in the stored record.
    tamper_record(&store.path(), 1, |record| {
        let at = record
            .windows(7)
            .rposition(|w| w == b"planner")
            .expect("the agent in the payload");
        record[at..at + 7].copy_from_slice(b"intrudr");
    });
    let report = verify_store(&Store::open_existing(&store.path()).expect("open")).expect("verify");
    let first = report.violations.first().expect("a violation");
    assert_eq!(
        (first.seq, first.kind),
        (Seq(1), ViolationKind::PayloadHash)
    );
    let cli = run_mnemo(&["verify", "--db", &db], "");
    assert_eq!(cli.status.code(), Some(1), "{}", stdout(&cli));

    // The token table in the index, rewritten so the token looks live for another agent.
    let other = TempStore::new();
    let text = create(&other, "planner");
    let other_db = db_arg(&other);
    let out = run_mnemo(
        &[
            "token",
            "revoke",
            "--db",
            &other_db,
            token::id_of(&text).expect("id"),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0));
    {
        let store = open_store(&other.path());
        let (_, _, index) = store.raw_trees();
        let key = [b"k".as_slice(), token::id_of(&text).expect("id").as_bytes()].concat();
        let stored = index.get(&key).expect("read").expect("the token record");
        assert!(stored.len() > 40, "a token record");
        let forged = serde_json::to_vec(&"not a record").expect("json");
        index.insert(&key, forged).expect("write");
        index.flush().expect("flush");
    }
    let report = verify_store(&Store::open_existing(&other.path()).expect("open")).expect("verify");
    let first = report.violations.first().expect("a violation");
    assert_eq!(first.kind, ViolationKind::Index, "{first:?}");
    assert!(first.detail.contains("agent token"), "{}", first.detail);
}

/// What a test step does to the token table.
#[derive(Clone, Debug)]
enum Step {
    Issue { agent: usize, label: String },
    Revoke { pick: usize },
    RevokeUnknown,
    Call,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, "[a-z ]{0,6}").prop_map(|(agent, label)| Step::Issue { agent, label }),
        3 => any::<usize>().prop_map(|pick| Step::Revoke { pick }),
        1 => Just(Step::RevokeUnknown),
        2 => Just(Step::Call),
    ]
}

fn replayed_tokens(client: &MnemoClient) -> Vec<TokenRecord> {
    let mut replay = mnemo::testing::replay::Replay::in_memory();
    for event in client.events(Seq(1)).expect("events") {
        replay.apply(&event.expect("decode")).expect("replay");
    }
    replay.tree().tokens().expect("tokens")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Issues and revokes (repeated revokes included) interleaved with memory calls: the live
    /// token table (read through the writer and from the stored index) equals a naive model and
    /// the table replayed from the log, and the store verifies.
    #[test]
    fn the_token_table_replayed_from_the_log_equals_the_live_one(
        steps in proptest::collection::vec(step(), 1..24)
    ) {
        let store = TempStore::new();
        let client = open_client(&store.path(), OPERATOR, Durability::Buffered);
        let mut model: BTreeMap<String, (String, bool)> = BTreeMap::new();
        let mut ids: Vec<String> = Vec::new();
        let server = mnemo::MnemoMemoryToolServer::new(client.clone());
        for (n, step) in steps.iter().enumerate() {
            match step {
                Step::Issue { agent, label } => {
                    let agent = ["planner", "worker-1", "auditor"][*agent];
                    let issued = token::issue(&client, agent, label).expect("issue");
                    prop_assert!(!issued.receipt.is_error, "{}", issued.receipt.text);
                    model.insert(issued.token.id().to_string(), (agent.to_string(), false));
                    ids.push(issued.token.id().to_string());
                }
                Step::Revoke { pick } if !ids.is_empty() => {
                    let id = &ids[pick % ids.len()];
                    let revoked = token::revoke(&client, id);
                    let entry = model.get_mut(id).expect("modelled");
                    prop_assert_eq!(revoked.is_ok(), !entry.1, "{:?}", revoked);
                    entry.1 = true;
                }
                Step::Revoke { .. } | Step::RevokeUnknown => {
                    // Through the log too: the admin command itself, which answers an error.
                    let receipt = client
                        .admin(mnemo::AdminCommand::RevokeToken { id: "fffe".into() })
                        .expect("admin");
                    prop_assert!(receipt.is_error);
                }
                Step::Call => {
                    let input = serde_json::json!({"command": "create",
                        "path": format!("/memories/f{n}.md"), "file_text": "x"});
                    server.handle(&input);
                }
            }
            for (id, (agent, revoked)) in &model {
                let live = client.token(id).expect("lookup").expect("issued");
                prop_assert_eq!(&live.agent, agent);
                prop_assert_eq!(live.revoked.is_some(), *revoked);
            }
        }
        let stored = client
            .read_store(|s| s.index().tokens())
            .expect("stored tokens");
        prop_assert_eq!(stored.len(), model.len());
        prop_assert_eq!(&replayed_tokens(&client), &stored);
        prop_assert!(client.verify().expect("verify").is_intact());
    }
}
