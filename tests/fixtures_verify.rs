//! Stores written by earlier builds keep verifying: each committed fixture store (made by
//! `tests/fixtures/stores/make.sh` with the build of its format) re-verifies intact with exactly
//! the events and checkpoint it was made with. A change to a result string, the encoding or a
//! replay rule fails here; such a change needs a new version whose verifier still re-answers
//! these stores as they were answered. `format-1` was written by a build of format 1 (semantics
//! 1), `format-2` by the build that introduced semantics 2, `format-7` by the build that
//! introduced the memory-stores API's writes, `format-8` by the build that introduced the
//! typescript-sdk profile, `format-9` by the build that introduced semantics 5 (no answer names
//! a file its agent may not read), `format-11` by the build that introduced redactions by seq that
//! keep what an event did and chained store labels (formats 10 and 11); and a store of format 1 that this build goes on
//! writing holds both its events and this build's.

use std::path::{Path, PathBuf};

use mnemo::Seq;
use mnemo::testing::Store;
use mnemo::testing::event::format_of;
use mnemo::tool::Semantics;
use serde_json::Value;

use crate::support::{TempStore, checksums, copy_dir, run_mnemo};

fn fixture_stores() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the fixture stores")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("store").is_dir())
        .collect();
    found.sort();
    found
}

#[test]
fn every_fixture_store_verifies_with_the_events_and_checkpoint_it_was_made_with() {
    let stores = fixture_stores();
    assert!(
        !stores.is_empty(),
        "no fixture store under tests/fixtures/stores"
    );
    for dir in stores {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
        )
        .expect("json");
        let store = dir.join("store");
        let before = checksums(&store);
        let out = run_mnemo(
            &["verify", "--db", store.to_str().expect("utf-8"), "--json"],
            "",
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!(
            report["status"],
            "intact",
            "{}: {report} {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report["events"], expected["events"], "{}", dir.display());
        assert_eq!(
            report["checkpoint"],
            expected["checkpoint"],
            "{}",
            dir.display()
        );
        assert_eq!(
            checksums(&store),
            before,
            "{}: verify changed the committed store",
            dir.display()
        );
        // Every event is of the store's format, answered under the semantics that format holds
        // (format 4 holds semantics 3, salted; format 6 semantics 4, salted).
        let format: u8 = dir
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("format-")?.parse().ok())
            .expect("a fixture directory is named format-N");
        let events = log(&store);
        assert_eq!(Some(events.len() as u64), expected["events"].as_u64());
        // Format 7 holds the events of format 6 (semantics 4) and the memory-stores API's
        // writes, which are format 7 under the same semantics; format 8 those of format 7 and
        // calls under the typescript-sdk profile, format 8 under the same semantics too. Format
        // 9 (semantics 5) holds every kind in one format.
        let semantics_format = match format {
            4 => 3,
            7 | 8 => 6,
            // Formats 10 and 11 (redactions by seq, labels) are semantics 5's, as format 9.
            10 | 11 => 9,
            other => other,
        };
        for event in &events {
            assert_eq!(
                semantics_of(event).map(format_of),
                Some(semantics_format),
                "{}: event {}",
                dir.display(),
                event["seq"]
            );
        }
        let api = events
            .iter()
            .filter(|e| e["command"].as_str().is_some_and(|c| c.starts_with("api.")))
            .count();
        assert_eq!(api > 0, format >= 7, "{}: {api} API writes", dir.display());
    }
}

/// Every event of the store as `mnemo log --json` prints it.
fn log(store: &Path) -> Vec<Value> {
    let out = run_mnemo(
        &["log", "--db", store.to_str().expect("utf-8"), "--json"],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn semantics_of(event: &Value) -> Option<Semantics> {
    Semantics::from_number(u32::try_from(event["semantics"].as_u64()?).ok()?)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stores")
        .join(name)
}

#[test]
fn a_store_of_format_one_goes_on_in_the_current_format_and_verifies() {
    let old = fixture("format-1");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(old.join("expected.json")).expect("expected.json"),
    )
    .expect("json");
    let old_events = expected["events"].as_u64().expect("a count");
    let t = TempStore::new();
    copy_dir(&old.join("store"), &t.path());
    let db = t.path();
    let db = db.to_str().expect("utf-8");
    // Calls whose answers the two semantics write differently, from this build.
    let calls = [
        r#"{"command": "view", "path": "/memories/a\tb"}"#,
        r#"{"command": "view", "path": "/memories/e\u0301\u200b"}"#,
        "not json",
        r#"{"command": "create", "path": "/memories/new.md", "file_text": "new\n"}"#,
    ];
    let out = run_mnemo(&["tool", "--db", db, "--agent", "later"], &calls.join("\n"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a tool_result"))
        .collect();
    assert_eq!(answers.len(), calls.len());
    // Semantics 2's words, where semantics 1 wrote `'\t'` and serde_json's message.
    for (answer, words) in [
        (&answers[0], "the control character U+0009"),
        (
            &answers[2],
            "(the text stops being JSON at line 1, column 2)",
        ),
    ] {
        let text = answer["content"].as_str().unwrap_or_default();
        assert!(text.contains(words), "{answer}");
    }
    let out = run_mnemo(&["verify", "--db", db, "--json"], "");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(report["status"], "intact", "{report}");
    let total = old_events + calls.len() as u64;
    assert_eq!(report["events"], total);
    // The old events are untouched and still semantics 1; the new ones are the current one.
    let events = log(&t.path());
    assert_eq!(events.len() as u64, total);
    for event in &events {
        let seq = event["seq"].as_u64().expect("seq");
        let want = if seq <= old_events {
            Semantics::V1
        } else {
            Semantics::CURRENT
        };
        assert_eq!(semantics_of(event), Some(want), "event {seq}");
    }
    let committed = Store::open_read_only(&old.join("store")).expect("the committed store");
    let continued = Store::open_read_only(&t.path()).expect("the continued store");
    for seq in 1..=old_events {
        assert_eq!(
            continued.get(Seq(seq)).expect("read"),
            committed.get(Seq(seq)).expect("read"),
            "event {seq} is the earlier build's record, byte for byte"
        );
    }
    let marker = |store: &Store| store.raw_trees().1.get(b"format").expect("read");
    assert_eq!(marker(&committed).as_deref(), Some(&[1u8][..]));
    let current = mnemo::testing::event::WRITTEN_FORMAT;
    assert_eq!(
        marker(&continued).as_deref(),
        Some(&[current][..]),
        "the store now says it holds the current format, so an earlier build refuses it"
    );
    // `show` names the semantics of each and re-derives both kinds of answer.
    for (seq, want) in [(1, 1), (old_events + 1, Semantics::CURRENT.number())] {
        let out = run_mnemo(&["show", &seq.to_string(), "--db", db, "--json"], "");
        let shown: Value = serde_json::from_slice(&out.stdout).expect("show --json");
        assert_eq!(shown["semantics"], want, "{shown}");
        assert_eq!(shown["verified"], true, "{shown}");
        let out = run_mnemo(&["show", &seq.to_string(), "--db", db], "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("  semantics:   {want}\n")), "{text}");
    }
}
