//! Every read proves what it shows: with one stored call rewritten in a closed store (its bytes
//! alone, or re-encoded with its payload and chain hashes recomputed), `show`, `cat --at`,
//! `ls --at`, `diff`, `export --at`, `log` and `history` refuse with exit 1 and name the seq at
//! which the chain breaks, and print nothing of the forgery; the library's readers say the same.

use std::path::Path;

use mnemo::tool::Command;
use mnemo::{Body, Error, Event, MnemoClient, Seq};
use tempfile::TempDir;

use crate::support::{TempStore, open_store, run_mnemo, tamper_record};

const LEDGER: &str = "/memories/ledger.md";

/// A store of four calls, closed: event 2 writes `pay ALICE 100`.
fn ledger() -> TempStore {
    let s = TempStore::new();
    let calls = [
        r#"{"command":"create","path":"/memories/ledger.md","file_text":"opened\n"}"#,
        r#"{"command":"insert","path":"/memories/ledger.md","insert_line":1,"insert_text":"pay ALICE 100\n"}"#,
        r#"{"command":"view","path":"/memories/ledger.md"}"#,
        r#"{"command":"create","path":"/memories/other.md","file_text":"unrelated\n"}"#,
    ];
    let out = run_mnemo(
        &["tool", "--db", s.path().to_str().expect("utf-8")],
        &calls.join("\n"),
    );
    assert!(out.status.success(), "{out:?}");
    s
}

/// Replaces `from` with `to` (of the same length) in event 2's stored bytes: its payload hash no
/// longer recomputes.
fn forge_bytes(path: &Path) {
    tamper_record(path, 2, |record| {
        let at = record
            .windows(9)
            .position(|w| w == b"ALICE 100")
            .expect("the call's text is in the record");
        record[at..at + 9].copy_from_slice(b"MALLORY 9");
    });
}

/// Rewrites event 2's call and stores it re-encoded, with its payload hash and chain hash
/// recomputed: only event 3's link gives it away.
fn forge_rehashed(path: &Path) {
    tamper_record(path, 2, |record| {
        let mut event = Event::decode(record).expect("decode");
        let Body::Tool(call) = &mut event.body else {
            panic!("event 2 is a tool call")
        };
        let Command::Insert { insert_text, .. } = &mut call.command else {
            panic!("event 2 is an insert")
        };
        *insert_text = "pay MALLORY 9\n".into();
        *record = event.to_frame().encode();
    });
}

/// Runs `args` on the store at `db` and checks the refusal: exit 1, the seq named, nothing of
/// the forgery printed.
fn refused(db: &Path, args: &[&str], seq: u64) -> Option<String> {
    let mut all = args.to_vec();
    all.extend(["--db", db.to_str().expect("utf-8")]);
    let out = run_mnemo(&all, "");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let mut problems = Vec::new();
    if out.status.code() != Some(1) {
        problems.push(format!("exit {:?}, not 1", out.status.code()));
    }
    if !stderr.contains(&format!(
        "event {seq} is not the event the log's chain recorded"
    )) {
        problems.push(format!("stderr does not name event {seq}"));
    }
    if stdout.contains("MALLORY") || stderr.contains("MALLORY") {
        problems.push("the forged text was printed".into());
    }
    (!problems.is_empty()).then(|| {
        format!(
            "mnemo {}: {}\n{stdout}\n{stderr}",
            args.join(" "),
            problems.join("; ")
        )
    })
}

fn every_read_refuses(db: &Path, seq: u64) {
    let export = TempDir::new().expect("tempdir");
    let export_dir = export.path().join("out");
    let export_arg = export_dir.to_str().expect("utf-8");
    let versions_dir = export.path().join("versions");
    let versions_arg = versions_dir.to_str().expect("utf-8");
    let cases: &[&[&str]] = &[
        &["show", "2"],
        &["show", "2", "--json"],
        &["show", "4"],
        &["cat", LEDGER, "--at", "3"],
        &["ls", "/", "--at", "2"],
        &["diff", "1", "3"],
        &["export", export_arg, "--at", "3"],
        &["export", "--format", "memory-stores", versions_arg],
        &["log"],
        &["log", "--json"],
        &["history", LEDGER],
        &["trace", "1"],
        &["trace", "1", "--json"],
        &["revert", "--to", "1", "--dry-run"],
    ];
    let problems: Vec<String> = cases
        .iter()
        .filter_map(|args| refused(db, args, seq))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(
        !crate::support::dir_holds(export.path(), b"MALLORY"),
        "export --at wrote the forged text"
    );
    // verify names the same seq.
    let out = run_mnemo(&["verify", "--db", db.to_str().expect("utf-8")], "");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("seq {seq} ")), "{text}");
}

#[test]
fn a_rewritten_payload_is_refused_by_every_read_at_its_seq() {
    let s = ledger();
    forge_bytes(&s.path());
    every_read_refuses(&s.path(), 2);
}

#[test]
fn a_rewritten_and_rehashed_payload_is_refused_at_the_link_it_breaks() {
    let s = ledger();
    forge_rehashed(&s.path());
    every_read_refuses(&s.path(), 3);
}

#[test]
fn an_untouched_store_is_read_and_shown_as_chained_to_its_end() {
    let s = ledger();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let out = run_mnemo(&["show", "2", "--db", db, "--json"], "");
    assert!(out.status.success(), "{out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(shown["verified"], true, "{shown}");
    assert_eq!(shown["chained_through"], 4, "{shown}");
    let out = run_mnemo(&["show", "2", "--db", db], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("chain from event 1 through event 4"),
        "show says what it checked: {text}"
    );
    let out = run_mnemo(&["cat", LEDGER, "--at", "2", "--db", db], "");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("pay ALICE 100"));
}

/// The library's readers: a store's proof, a read-only client's events, log and show.
#[test]
fn the_library_readers_refuse_a_forged_record() {
    let s = ledger();
    forge_rehashed(&s.path());
    let broken = |what: &str, result: Result<(), Error>| match result {
        Err(Error::ChainBroken { seq: 3, .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    let store = open_store(&s.path());
    broken("prove", store.prove().map(drop));
    drop(store);
    let client = MnemoClient::builder(s.path())
        .read_only()
        .open()
        .expect("a read-only client");
    broken("events", client.events(Seq(1)).map(drop));
    broken("show", client.show(Seq(2)).map(drop));
    broken("trace", client.trace(Seq(1), None).map(drop));
    broken(
        "revert_plan",
        client
            .revert_plan(&mnemo::RevertScope::To {
                seq: Seq(1),
                path: None,
            })
            .map(drop),
    );
    broken(
        "history",
        client
            .history(&mnemo::MemPath::absolute(LEDGER).expect("path"))
            .map(drop),
    );
}

/// A store whose head no longer matches its chain's end is refused too.
#[test]
fn a_log_cut_below_its_head_is_refused() {
    let s = ledger();
    let store = open_store(&s.path());
    let (events, _, _) = store.raw_trees();
    events.remove(Seq(4).key()).expect("remove");
    match store.prove() {
        Err(Error::ChainBroken { seq: 4, what }) => {
            assert!(what.contains("removed from its tail"), "{what}");
        }
        other => panic!("a cut tail: {other:?}"),
    }
}

/// An erased record no redaction names: its payload hash cannot be recomputed, so the chain
/// rules take it as stored, and the replay skips it; every read hid what event 2 did (it
/// showed a tree that never was) until the proof required a redaction after it to name it.
#[test]
fn an_erased_record_no_redaction_names_is_refused_by_every_read() {
    let s = ledger();
    tamper_record(&s.path(), 2, |record| {
        *record = Event::decode(record)
            .expect("decode")
            .erased()
            .to_frame()
            .encode();
    });
    every_read_refuses(&s.path(), 2);
    let out = run_mnemo(
        &["show", "3", "--db", s.path().to_str().expect("utf-8")],
        "",
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no redaction after it names it"),
        "{out:?}"
    );
}
