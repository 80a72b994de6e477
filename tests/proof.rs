//! Every read proves what it shows: with one stored call rewritten in a closed store (its bytes
//! alone, or re-encoded with its payload and chain hashes recomputed), `show`, `cat --at`,
//! `ls --at`, `diff`, `export --at`, `log` and `history` refuse with exit 1 and name the seq at
//! which the chain breaks, and print nothing of the forgery; the library's readers say the same.

use std::path::Path;

use mnemo::tool::Command;
use mnemo::{Body, Error, Event, MnemoClient, Seq};
use tempfile::TempDir;

use crate::support::{TempStore, long_log, open_store, run_mnemo, tamper_record};

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

/// Events enough that the proof checks the log in two parts on a machine of two cores or more
/// (each part at least 16,384 events), and that a replay to its middle runs beside the proof.
const LONG: u64 = 33_000;

/// Event `seq`'s create with its text changed to `to` (of the same length) in its stored bytes,
/// its hashes left as they were: its payload no longer hashes to what it stores.
fn forge_text(path: &Path, seq: u64, to: &[u8]) {
    let text = format!("v{seq}\n");
    tamper_record(path, seq, |record| {
        let at = record
            .windows(text.len())
            .position(|w| w == text.as_bytes())
            .expect("the create's text is in the record");
        record[at..at + text.len()].copy_from_slice(to);
    });
}

/// Event `seq` re-encoded with the text `to` and its payload and chain hashes recomputed: only
/// the next event's link gives it away.
fn forge_rehashed_at(path: &Path, seq: u64, to: &str) {
    tamper_record(path, seq, |record| {
        let mut event = Event::decode(record).expect("decode");
        let Body::Tool(call) = &mut event.body else {
            panic!("event {seq} is a tool call")
        };
        let Command::Create { file_text, .. } = &mut call.command else {
            panic!("event {seq} is a create")
        };
        *file_text = to.into();
        *record = event.to_frame().encode();
    });
}

/// The stored bytes of event `seq`, to put back after a forgery.
fn record_of(path: &Path, seq: u64) -> Vec<u8> {
    let store = open_store(path);
    let (events, _, _) = store.raw_trees();
    events
        .get(seq.to_be_bytes())
        .expect("read")
        .expect("the record")
        .to_vec()
}

/// The seq a fresh open store's proof breaks at, or `None` when it holds.
fn breaks_at(path: &Path) -> Option<u64> {
    match open_store(path).prove() {
        Ok(end) => {
            assert_eq!(end.seq, Seq(LONG), "the proof reaches the log's end");
            None
        }
        Err(Error::ChainBroken { seq, .. }) => Some(seq),
        Err(e) => panic!("the proof failed otherwise: {e}"),
    }
}

/// A long log is proven in parts, each from the hash the record before it stores, the seams
/// compared after: a forgery anywhere (in the first part, the last, either side of the seam) is
/// refused at the seq a proof in one names, the first that breaks.
#[test]
fn a_long_log_proven_in_parts_is_refused_at_the_first_break_wherever_it_is() {
    let s = TempStore::new();
    let path = s.path();
    long_log(&path, LONG);
    assert_eq!(breaks_at(&path), None, "an untouched log is proven");
    // Odd events are creates: the records either side of the seam (after 16,500), the last
    // of the first part and the first of the second.
    for seq in [16_499, 16_501] {
        let original = record_of(&path, seq);
        let put_back = |path: &Path| tamper_record(path, seq, |record| *record = original.clone());
        forge_text(&path, seq, format!("w{}\n", seq).as_bytes());
        assert_eq!(breaks_at(&path), Some(seq), "a changed payload at {seq}");
        put_back(&path);
        forge_rehashed_at(&path, seq, "forged\n");
        assert_eq!(
            breaks_at(&path),
            Some(seq + 1),
            "a rehashed record at {seq} breaks the link after it"
        );
        put_back(&path);
    }
    // Put back, it is proven again; with two breaks, one in each part, the first is named.
    assert_eq!(breaks_at(&path), None, "put back");
    forge_text(&path, LONG - 1, format!("w{}\n", LONG - 1).as_bytes());
    forge_text(&path, 5, b"w5\n");
    assert_eq!(breaks_at(&path), Some(5));
}

/// A replay to the middle of a long log runs while another thread proves it: `show` refuses a
/// forgery the replay never reaches (after the event) and one it meets (before it); `cat --at`
/// prints nothing of a file the replay found intact when the proof then breaks.
#[test]
fn a_read_replaying_beside_the_proof_refuses_a_forgery_either_side_of_what_it_shows() {
    let s = TempStore::new();
    let path = s.path();
    long_log(&path, LONG);
    let middle = LONG / 2 + 1;
    let db = path.to_str().expect("utf-8").to_owned();
    let show = |path: &Path| {
        let client = MnemoClient::builder(path)
            .read_only()
            .open()
            .expect("a read-only client");
        client.show(Seq(middle))
    };
    let shown = show(&path).expect("show an untouched log");
    assert!(shown.verified, "the answer re-derived");
    assert_eq!(shown.chained_through, LONG);
    for (seq, meets) in [(LONG - 1, "after"), (3, "before")] {
        let original = record_of(&path, seq);
        forge_rehashed_at(&path, seq, &format!("FORGED{seq}\n"));
        match show(&path) {
            Err(Error::ChainBroken { seq: at, .. }) => assert_eq!(at, seq + 1, "{meets}"),
            other => panic!("show with a forgery {meets} it: {other:?}"),
        }
        if meets == "after" {
            let out = run_mnemo(
                &[
                    "cat",
                    "/memories/f.md",
                    "--at",
                    &middle.to_string(),
                    "--db",
                    &db,
                ],
                "",
            );
            assert_eq!(out.status.code(), Some(1), "cat --at: {out:?}");
            assert!(
                String::from_utf8_lossy(&out.stderr)
                    .contains(&format!("event {} is not the event", seq + 1)),
                "{out:?}"
            );
            assert!(out.stdout.is_empty(), "{out:?}");
        }
        tamper_record(&path, seq, |record| *record = original.clone());
    }
}

/// A log of `LONG` events like [`long_log`]'s whose creates at 16,499 and 16,501, either side of
/// where a split proof's parts meet, are large (their payloads in the value file).
fn long_log_with_large_creates(path: &Path) {
    crate::support::log_builder::build_log_of(path, LONG, |seq| {
        let file_text = match seq {
            16_499 | 16_501 => format!("v{seq}\n").repeat(mnemo::testing::VALUE_MIN / 6),
            _ => format!("v{seq}\n"),
        };
        if seq % 2 == 1 {
            Command::Create {
                path: "/memories/f.md".into(),
                file_text,
            }
        } else {
            Command::Delete {
                path: "/memories/f.md".into(),
            }
        }
    });
}

/// Payloads the value file lost, either side of a split proof's seam, are passed by the proof
/// on their headers alone (the chain still links through them), while a forgery anywhere else
/// is refused as before, at its own seq; `verify` names both lost payloads.
#[test]
fn a_long_log_with_lost_payloads_is_proven_in_parts_and_a_forgery_elsewhere_still_breaks_it() {
    let s = TempStore::new();
    let path = s.path();
    long_log_with_large_creates(&path);
    let values = path.join(mnemo::testing::VALUES_FILE);
    assert!(
        std::fs::metadata(&values).expect("the value file").len()
            >= 2 * mnemo::testing::VALUE_MIN as u64,
        "both large payloads are in the value file"
    );
    assert_eq!(breaks_at(&path), None, "an untouched log is proven");
    std::fs::write(&values, b"").expect("empty the value file");
    assert_eq!(breaks_at(&path), None, "lost payloads alone");
    for seq in [5, 16_497, 16_503, LONG - 1] {
        let original = record_of(&path, seq);
        forge_text(&path, seq, format!("w{}\n", seq).as_bytes());
        assert_eq!(breaks_at(&path), Some(seq), "a changed payload at {seq}");
        tamper_record(&path, seq, |record| *record = original.clone());
    }
    let db = path.to_str().expect("utf-8");
    let out = run_mnemo(&["verify", "--db", db, "--json"], "");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let seqs: Vec<u64> = report["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| v["seq"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(seqs, [16_499, 16_501], "{report}");
}
