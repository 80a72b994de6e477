//! `mnemo redact`: erased content is gone from every byte of the store directory and from every
//! read, the rest of history still verifies (old checkpoints too), tampering with what a
//! redaction left is named by seq, and a kill at any moment leaves the store before or after it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Rng, TempStore, mnemo_command, run_mnemo, tamper_record};

const MARKER: &str = "ZQXMARKERQZX";

fn db(t: &TempStore) -> String {
    t.path().to_str().expect("utf-8").to_string()
}

pub(crate) fn run_ok(args: &[&str], stdin: &str) -> String {
    let out = run_mnemo(args, stdin);
    assert!(
        out.status.success(),
        "mnemo {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn block(id: &str, input: Value) -> String {
    json!({"type": "tool_use", "id": id, "name": "memory", "input": input}).to_string()
}

/// A session that sends the marker through every kind of event: a create, a view's answer, a
/// `str_replace`'s old and new strings, an insert, a rejected raw line, a retried call, a file
/// renamed and then deleted; and files that never held it.
fn session() -> String {
    let lines = [
        block(
            "t1",
            json!({"command": "create", "path": "/memories/secret.md", "file_text": format!("pin {MARKER}\n")}),
        ),
        block(
            "t2",
            json!({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"}),
        ),
        block(
            "t3",
            json!({"command": "view", "path": "/memories/secret.md"}),
        ),
        block(
            "t4",
            json!({"command": "str_replace", "path": "/memories/secret.md", "old_str": MARKER, "new_str": "gone"}),
        ),
        block(
            "t5",
            json!({"command": "str_replace", "path": "/memories/secret.md", "old_str": "gone", "new_str": MARKER}),
        ),
        block(
            "t5",
            json!({"command": "str_replace", "path": "/memories/secret.md", "old_str": "gone", "new_str": MARKER}),
        ),
        block(
            "t6",
            json!({"command": "insert", "path": "/memories/keep.md", "insert_line": 1, "insert_text": format!("{MARKER}\n")}),
        ),
        block(
            "t7",
            json!({"command": "rename", "old_path": "/memories/secret.md", "new_path": "/memories/old/s.md"}),
        ),
        block(
            "t8",
            json!({"command": "delete", "path": "/memories/old/s.md"}),
        ),
        format!("not json {MARKER}"),
        block(
            "t9",
            json!({"command": "create", "path": "/memories/other.md", "file_text": "unrelated\n"}),
        ),
        block(
            "t10",
            json!({"command": "view", "path": "/memories/other.md"}),
        ),
    ];
    lines.join("\n") + "\n"
}

/// [`session`], then a file large enough that its `create`'s payload goes to the store's value
/// file, the marker in its middle: a redaction erases it there too.
fn session_with_a_large_file() -> String {
    let half = "a large note's line\n".repeat(mnemo::testing::VALUE_MIN / 40 + 1);
    let large = block(
        "t11",
        json!({"command": "create", "path": "/memories/large.md", "file_text": format!("{half}{MARKER}\n{half}")}),
    );
    session() + &large + "\n"
}

/// Every file of the store directory holding `needle`, read as bytes.
pub(crate) fn holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read file");
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

fn events(db: &str) -> Vec<Value> {
    run_ok(&["log", "--db", db, "--json"], "")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a log line"))
        .collect()
}

/// Every read of every seq: `cat --at`, `show`, `export --at`, none showing the marker.
fn no_read_shows_it(t: &TempStore) {
    let db = db(t);
    let n = events(&db).len();
    for seq in 1..=n {
        let at = seq.to_string();
        let out = run_mnemo(&["show", &at, "--db", &db, "--json"], "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "show {seq}: {text}");
        assert!(!text.contains(MARKER), "show {seq}: {text}");
        for path in [
            "/memories/secret.md",
            "/memories/keep.md",
            "/memories/old/s.md",
        ] {
            let out = run_mnemo(&["cat", path, "--db", &db, "--at", &at], "");
            assert!(
                !String::from_utf8_lossy(&out.stdout).contains(MARKER),
                "cat {path} --at {seq}"
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let export = dir.path().join("out");
        run_ok(
            &[
                "export",
                export.to_str().expect("utf-8"),
                "--db",
                &db,
                "--at",
                &at,
            ],
            "",
        );
        assert!(
            holding(&export, MARKER.as_bytes()).is_empty(),
            "export --at {seq}"
        );
    }
}

fn verify_names_redaction(db: &str) -> String {
    let out = run_ok(&["verify", "--db", db], "");
    assert!(out.contains("INTACT") && out.contains("redacted:"), "{out}");
    out
}

fn redacted_store(how: &[&str]) -> (TempStore, String, String) {
    let t = TempStore::new();
    let db = db(&t);
    run_ok(&["tool", "--db", &db], &session());
    assert!(!holding(&t.path(), MARKER.as_bytes()).is_empty());
    let before = run_ok(&["verify", "--db", &db, "--json"], "");
    let checkpoint = serde_json::from_str::<Value>(&before).expect("json")["checkpoint"]
        .as_str()
        .expect("a checkpoint")
        .to_string();
    let mut args = vec!["redact", "--db", &db, "--reason", "asked to be forgotten"];
    args.extend_from_slice(how);
    let said = run_ok(&args, "");
    assert!(said.starts_with("redacted "), "{said}");
    (t, db, checkpoint)
}

#[test]
fn a_redaction_by_text_leaves_no_byte_of_it_and_the_rest_verifies() {
    let (t, db, checkpoint) = redacted_store(&["--text", MARKER]);
    assert_eq!(holding(&t.path(), MARKER.as_bytes()), Vec::<String>::new());
    let siblings: Vec<_> = std::fs::read_dir(t.path().parent().expect("parent"))
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".redact-"))
        .collect();
    assert!(siblings.is_empty(), "no copy is left beside the store");
    let out = verify_names_redaction(&db);
    // A checkpoint taken before the redaction still verifies: the chain hashes did not change.
    run_ok(&["verify", "--db", &db, "--expect", &checkpoint], "");
    no_read_shows_it(&t);
    // What never held the marker is still there.
    assert_eq!(
        run_ok(&["cat", "/memories/other.md", "--db", &db], ""),
        "unrelated\n"
    );
    let log = events(&db);
    let erased: Vec<u64> = log
        .iter()
        .filter(|e| e["command"] == "erased")
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    for seq in &erased {
        assert!(out.contains(&seq.to_string()), "verify names {seq}: {out}");
    }
    // The create, the view, both str_replaces and the retry, the insert, the raw line and
    // every later event of the file that held the marker.
    assert!(erased.len() >= 8, "{erased:?}");
    let last = log.last().expect("an event");
    assert_eq!(last["command"], "redact");
    assert_eq!(last["agent"], "operator");
    // `show` of an erased event says by which redaction, when, by whom and why.
    let shown = run_ok(&["show", &erased[0].to_string(), "--db", &db], "");
    assert!(
        shown.contains("erased:") && shown.contains("asked to be forgotten"),
        "{shown}"
    );
    // An SDK that retries the erased create (same tool_use id) is told, and nothing is made.
    let retry = session().lines().next().expect("the create").to_string() + "\n";
    let answer: Value =
        serde_json::from_str(run_ok(&["tool", "--db", &db], &retry).trim()).expect("a result");
    assert_eq!(answer["is_error"], true, "{answer}");
    assert!(
        answer["content"]
            .as_str()
            .is_some_and(|t| t.contains("a redaction erased")),
        "{answer}"
    );
    let out = run_mnemo(&["cat", "/memories/secret.md", "--db", &db], "");
    assert!(!out.status.success(), "the erased file was not made again");
    verify_names_redaction(&db);
}

#[test]
fn a_redaction_by_path_follows_the_file_through_its_rename() {
    let (t, db, _) = redacted_store(&["--path", "/memories/secret.md"]);
    verify_names_redaction(&db);
    let log = events(&db);
    for e in &log {
        let paths = e["paths"].to_string();
        assert!(
            !paths.contains("secret.md") && !paths.contains("old/s.md"),
            "an event of the file is left: {e}"
        );
    }
    // keep.md's insert held the marker but named another file: a path redaction keeps it.
    assert!(run_ok(&["cat", "/memories/keep.md", "--db", &db], "").contains(MARKER));
    assert!(!holding(&t.path(), b"pin ").iter().any(|_| true));
}

/// The other direction: the path a file was renamed to names its whole history, so the
/// content is erased under the name it had first too, not left there in the tree.
#[test]
fn a_redaction_by_the_path_a_file_was_renamed_to_erases_it_under_its_first_name() {
    let t = TempStore::new();
    let db = db(&t);
    let lines = [
        block(
            "r1",
            json!({"command": "create", "path": "/memories/draft.md", "file_text": format!("{MARKER}\n")}),
        ),
        block(
            "r2",
            json!({"command": "rename", "old_path": "/memories/draft.md", "new_path": "/memories/final/f.md"}),
        ),
        block(
            "r3",
            json!({"command": "create", "path": "/memories/other.md", "file_text": "other\n"}),
        ),
        block(
            "r4",
            json!({"command": "view", "path": "/memories/final/f.md"}),
        ),
    ];
    run_ok(&["tool", "--db", &db], &(lines.join("\n") + "\n"));
    let said = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--path",
            "/memories/final",
        ],
        "",
    );
    assert!(said.starts_with("redacted 3 events (1, 2, 4)"), "{said}");
    verify_names_redaction(&db);
    assert_eq!(
        run_ok(&["ls", "/", "--db", &db], "").trim_end(),
        "     6B  /memories/other.md"
    );
    assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
}

/// A store only its owner may read stays so: the redacted store takes the directory's and the
/// files' permissions, and (run as root on another user's store) their owner.
#[test]
fn a_redaction_keeps_the_stores_permissions_and_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let t = TempStore::new();
    let db = db(&t);
    run_ok(&["tool", "--db", &db], &session());
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    let root = std::fs::metadata("/proc/self").expect("proc").uid() == 0;
    for entry in std::fs::read_dir(t.path()).expect("dir") {
        let path = entry.expect("entry").path();
        set(&path, if path.is_dir() { 0o700 } else { 0o600 });
        if root {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
        }
    }
    set(&t.path(), 0o700);
    if root {
        std::os::unix::fs::chown(t.path(), Some(65534), Some(65534)).expect("chown");
    }
    run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--path",
            "/memories/keep.md",
        ],
        "",
    );
    let mut seen = 0;
    let mut todo = vec![t.path().to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::metadata(&path).expect("meta");
        let want = if meta.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(meta.mode() & 0o777, want, "{}", path.display());
        if root {
            assert_eq!(
                (meta.uid(), meta.gid()),
                (65534, 65534),
                "{}",
                path.display()
            );
        }
        if meta.is_dir() {
            todo.extend(
                std::fs::read_dir(&path)
                    .expect("dir")
                    .map(|e| e.expect("e").path()),
            );
        }
        seen += 1;
    }
    assert!(seen >= 4, "the store's files were looked at");
    verify_names_redaction(&db);
}

#[test]
fn a_redaction_by_seq_erases_what_showed_it_and_a_dry_run_changes_nothing() {
    let t = TempStore::new();
    let db = db(&t);
    run_ok(&["tool", "--db", &db], &session());
    let sums = crate::support::checksums(&t.path());
    let dry = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--seq",
            "1",
            "--dry-run",
        ],
        "",
    );
    assert!(dry.starts_with("would erase "), "{dry}");
    // The view at seq 3 showed what seq 1 created: it is erased with it.
    assert!(dry.contains("1, ") && dry.contains(" 3"), "{dry}");
    assert_eq!(
        crate::support::checksums(&t.path()),
        sums,
        "a dry run writes nothing"
    );
    let none = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--text",
            "NOWHERE",
            "--dry-run",
        ],
        "",
    );
    assert!(none.starts_with("nothing in the log matches"), "{none}");
    run_ok(&["redact", "--db", &db, "--reason", "r", "--seq", "1"], "");
    verify_names_redaction(&db);
    // An admin event is the policy's history: never erased.
    let redaction = events(&db).len().to_string();
    let out = run_mnemo(
        &["redact", "--db", &db, "--reason", "r", "--seq", &redaction],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin event"));
    // A text kept where a redaction cannot reach (an agent name; the reason itself): refused,
    // and nothing changes.
    let sums = crate::support::checksums(&t.path());
    for args in [
        vec!["redact", "--db", &db, "--reason", "r", "--text", "cli"],
        vec![
            "redact",
            "--db",
            &db,
            "--reason",
            "forget unrelated",
            "--text",
            "unrelated",
        ],
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("keep"),
            "{args:?}"
        );
    }
    assert_eq!(
        crate::support::checksums(&t.path()),
        sums,
        "a refused redaction writes nothing"
    );
    // No selection, an empty reason: refused, saying what a valid call looks like.
    for args in [
        vec!["redact", "--db", &db, "--reason", "r"],
        vec!["redact", "--db", &db, "--reason", "", "--seq", "2"],
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--"),
            "{args:?}"
        );
    }
}

#[test]
fn tampering_with_what_a_redaction_left_is_named_by_seq() {
    let (t, db, _) = redacted_store(&["--seq", "1"]);
    let log = events(&db);
    let redaction = log.last().expect("event")["seq"].as_u64().expect("seq");
    let verify = |path: &Path| {
        let out = run_mnemo(
            &["verify", "--db", path.to_str().expect("utf-8"), "--json"],
            "",
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    // The erased record's commitment (offset 73..105), and the redaction's own reason.
    for (what, seq, at) in [("commitment", 1u64, 80usize), ("redaction", redaction, 0)] {
        let copy = tempfile::tempdir().expect("tempdir");
        let path = copy.path().join("s.db");
        crate::support::copy_dir(&t.path(), &path);
        tamper_record(&path, seq, |rec| {
            let at = if at == 0 { rec.len() - 40 } else { at };
            rec[at] ^= 0x01;
        });
        let report = verify(&path);
        assert_eq!(report["status"], "violation", "{what}: {report}");
        assert_eq!(report["violations"][0]["seq"], seq, "{what}: {report}");
    }
    // A record erased without a redaction naming it: a payload removed outside Mnemo.
    let copy = tempfile::tempdir().expect("tempdir");
    let path = copy.path().join("s.db");
    crate::support::copy_dir(&t.path(), &path);
    tamper_record(&path, 2, |rec| {
        let event = mnemo::Event::decode(rec).expect("decode");
        *rec = event.erased().to_frame().encode();
    });
    let report = verify(&path);
    assert_eq!(report["violations"][0]["kind"], "redaction", "{report}");
    assert_eq!(report["violations"][0]["seq"], 2, "{report}");
}

/// kill -9 at random moments of a redaction: the store opens as it was before (the marker in
/// it, no redaction) or after (no marker, the redaction last, in no file: the value file
/// included, which held a large file's payload with the marker), verifies, and a later
/// redaction clears what the killed one left beside it.
#[test]
fn a_kill_9_during_a_redaction_leaves_the_store_before_or_after_it() {
    let mut rng = Rng(0x4eda_c700_0001);
    let cycles: u64 = std::env::var("MNEMO_REDACT_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    // The kills must land all over the redaction, however long it takes on this machine under
    // its current load: from spawn to the end of an uninterrupted one, and a half again.
    let window = {
        let t = TempStore::new();
        let db = db(&t);
        run_ok(&["tool", "--db", &db], &session_with_a_large_file());
        let values = t.path().join(mnemo::testing::VALUES_FILE);
        let bytes = std::fs::read(&values).expect("the value file");
        assert!(
            bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
            "the large file's payload is in the value file"
        );
        let started = std::time::Instant::now();
        run_ok(
            &["redact", "--db", &db, "--reason", "r", "--text", MARKER],
            "",
        );
        started.elapsed() * 3 / 2
    };
    let window_us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX).max(1);
    let (mut before, mut after) = (0, 0);
    for cycle in 0..cycles {
        let t = TempStore::new();
        let db = db(&t);
        run_ok(&["tool", "--db", &db], &session_with_a_large_file());
        let mut child = mnemo_command(
            &["redact", "--db", &db, "--reason", "r", "--text", MARKER],
            &[],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
        std::thread::sleep(Duration::from_micros(rng.below_u64(window_us)));
        let _ = child.kill();
        let status = child.wait().expect("wait");
        let report = run_ok(&["verify", "--db", &db, "--json"], "");
        let report: Value = serde_json::from_str(&report).expect("json");
        assert_eq!(
            report["status"], "intact",
            "cycle {cycle} ({status}): {report}"
        );
        let redacted = events(&db).last().expect("event")["command"] == "redact";
        let holds = !holding(&t.path(), MARKER.as_bytes()).is_empty();
        assert_ne!(
            redacted, holds,
            "cycle {cycle}: half a redaction ({status})"
        );
        if redacted {
            after += 1;
        } else {
            before += 1;
            // The next redaction completes it and clears the killed one's copy.
            run_ok(
                &["redact", "--db", &db, "--reason", "r", "--text", MARKER],
                "",
            );
            assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
            let parent = t.path().parent().expect("parent").to_path_buf();
            let left: Vec<String> = std::fs::read_dir(parent)
                .expect("list")
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.contains(".redact-"))
                .collect();
            assert!(
                left.is_empty(),
                "cycle {cycle}: a killed redaction's copy is left: {left:?}"
            );
        }
    }
    eprintln!(
        "redaction killed {cycles} times within {window:?} of spawn: {before} before it, {after} after it"
    );
}

/// One call of a random session: the marker goes into some inputs.
fn op() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let path = prop::sample::select(vec![
        "/memories/a.md",
        "/memories/b.md",
        "/memories/d/x.md",
        "/memories/d/y.md",
    ]);
    let text = prop::sample::select(vec!["plain", "other", MARKER]);
    prop_oneof![
        (path.clone(), text.clone()).prop_map(|(p, t)| json!({"command": "create", "path": p, "file_text": format!("{t}\n")})),
        (path.clone(), text.clone(), text.clone()).prop_map(|(p, a, b)| json!({"command": "str_replace", "path": p, "old_str": a, "new_str": b})),
        (path.clone(), text.clone()).prop_map(|(p, t)| json!({"command": "insert", "path": p, "insert_line": 0, "insert_text": format!("{t}\n")})),
        path.clone().prop_map(|p| json!({"command": "view", "path": p})),
        Just(json!({"command": "view", "path": "/memories"})),
        path.clone().prop_map(|p| json!({"command": "delete", "path": p})),
        (path.clone(), path).prop_map(|(a, b)| json!({"command": "rename", "old_path": a, "new_path": b})),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("MNEMO_REDACT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Random sessions, then a redaction of the marker: the store verifies and names exactly
    /// the erased seqs; no byte of the marker is left in the store's directory or in a file;
    /// every event not erased keeps its record byte for byte, and every erased one its chain
    /// hash.
    #[test]
    fn a_redaction_of_random_sessions_keeps_every_promise(ops in proptest::collection::vec(op(), 1..24)) {
        let t = TempStore::new();
        let session: String = ops.iter().map(|o| o.to_string() + "\n").collect();
        run_ok(&["tool", "--db", &db(&t)], &session);
        let before: Vec<(u64, Vec<u8>)> = {
            let store = crate::support::open_store(&t.path());
            store.raw_trees().0.iter().map(|kv| {
                let (k, v) = kv.expect("read");
                (u64::from_be_bytes(k.as_ref().try_into().expect("8 bytes")), v.to_vec())
            }).collect()
        };
        let selection = mnemo::Selection { texts: vec![MARKER.into()], ..Default::default() };
        let held = session.contains(MARKER);
        match mnemo::testing::redact_store(&t.path(), "operator", "test", &selection) {
            Ok(done) => {
                let store = crate::support::open_store(&t.path());
                let report = mnemo::testing::verify_store(&store).expect("verify");
                proptest::prop_assert!(report.is_intact(), "{:?}", report.violations);
                let named: Vec<_> = report.redacted.iter().map(|(s, _)| *s).collect();
                proptest::prop_assert_eq!(&named, &done.plan.seqs);
                let erased: std::collections::BTreeSet<u64> = done.plan.seqs.iter().map(|s| s.0).collect();
                for (seq, record) in &before {
                    let now = store.get(mnemo::Seq(*seq)).expect("read").expect("kept");
                    if erased.contains(seq) {
                        let was = mnemo::event::Frame::decode(record).expect("frame");
                        let is = mnemo::event::Frame::decode(&now).expect("frame");
                        proptest::prop_assert_eq!(is.hash, was.hash, "seq {}", seq);
                        proptest::prop_assert_eq!(is.version, 5);
                    } else {
                        proptest::prop_assert_eq!(&now, record, "seq {} changed", seq);
                    }
                }
                drop(store);
                proptest::prop_assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
            }
            // Nothing held it, so nothing matched.
            Err(mnemo::Error::InvalidArgument(why)) if !held => {
                proptest::prop_assert!(why.contains("nothing"), "{}", why);
            }
            Err(e) => proptest::prop_assert!(false, "redact failed: {}", e),
        }
    }
}

/// What an adversary found: a text pieced together only in the tree (between events, or in a
/// path made by a rename) is erased too; a text in what a redaction keeps (the operator's name,
/// sled's own names) is refused with nothing changed; a refused redaction changes no byte; and
/// a directory beside the store that only looks like a leftover copy is not touched.
#[test]
fn a_text_pieced_together_or_kept_elsewhere_is_erased_or_refused() {
    let lines = |calls: &[Value]| {
        calls
            .iter()
            .map(|c| c.to_string() + "\n")
            .collect::<String>()
    };
    // Between events: "SECXQ" inserted above "RETXQ" makes "XQ\nRET", then the file goes.
    let t = TempStore::new();
    let db = db(&t);
    run_ok(
        &["tool", "--db", &db],
        &lines(&[
            json!({"command": "create", "path": "/memories/a.md", "file_text": "RETXQ"}),
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "SECXQ"}),
            json!({"command": "delete", "path": "/memories/a.md"}),
            json!({"command": "create", "path": "/memories/b.md", "file_text": "unrelated"}),
        ]),
    );
    let pieced = "XQ\nRET";
    run_ok(
        &["redact", "--db", &db, "--reason", "r", "--text", pieced],
        "",
    );
    for at in 1..=4 {
        let out = run_mnemo(
            &[
                "cat",
                "/memories/a.md",
                "--db",
                &db,
                "--at",
                &at.to_string(),
            ],
            "",
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(pieced),
            "cat --at {at}"
        );
    }
    verify_names_redaction(&db);
    // In a path made by a rename.
    let t = TempStore::new();
    let db = self::db(&t);
    run_ok(
        &["tool", "--db", &db],
        &lines(&[
            json!({"command": "create", "path": "/memories/A/ET.md", "file_text": "hello"}),
            json!({"command": "rename", "old_path": "/memories/A", "new_path": "/memories/SECR"}),
        ]),
    );
    run_ok(
        &["redact", "--db", &db, "--reason", "r", "--text", "SECR/ET"],
        "",
    );
    assert!(!run_ok(&["ls", "/", "--db", &db], "").contains("SECR/ET"));
    verify_names_redaction(&db);
    // Kept elsewhere: the operator's name, sled's own names. Refused, and no byte changes.
    run_ok(
        &["tool", "--db", &db],
        &lines(&[
            json!({"command": "create", "path": "/memories/c.md", "file_text": "segment_size 078-05"}),
        ]),
    );
    let parent = t.path().parent().expect("parent").to_path_buf();
    let name = t
        .path()
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let lookalike = parent.join(format!(".{name}.redact-userdir"));
    std::fs::create_dir(&lookalike).expect("mkdir");
    std::fs::write(lookalike.join("notes"), "mine").expect("write");
    let sums = crate::support::checksums(&t.path());
    for args in [
        vec![
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--text",
            "078-05",
            "--as",
            "ops-078-05",
        ],
        vec![
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--text",
            "segment_size",
        ],
        vec!["redact", "--db", &db, "--reason", "r", "--text", "NOPE"],
        vec!["redact", "--db", &db, "--reason", "r", "--seq", "0"],
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("nothing was changed")
                || String::from_utf8_lossy(&out.stderr).contains("no event 0"),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            crate::support::checksums(&t.path()),
            sums,
            "{args:?} changed the store"
        );
    }
    run_ok(
        &["redact", "--db", &db, "--reason", "r", "--text", "078-05"],
        "",
    );
    assert_eq!(
        std::fs::read_to_string(lookalike.join("notes")).expect("still there"),
        "mine",
        "a directory that only looks like a leftover copy is not removed"
    );
}

/// `MnemoClient::redact` on a store open in this process: other handles of the store (another
/// agent's, a tool server's) keep working across it, calls made while it runs wait and are kept,
/// and the content is gone from disk when it returns.
#[test]
fn a_client_redacts_the_store_it_holds_open_and_its_other_handles_go_on() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = TempStore::new();
    let client = mnemo::MnemoClient::open(t.path(), "operator-1").expect("open");
    let tool = mnemo::MnemoMemoryToolServer::new(client.with_agent("model").expect("agent"));
    for input in [
        json!({"command": "create", "path": "/memories/secret.md", "file_text": format!("{MARKER}\n")}),
        json!({"command": "view", "path": "/memories/secret.md"}),
    ] {
        assert!(tool.handle(&input).get("is_error").is_none());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (tool, stop) = (tool.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut made = Vec::new();
            while !stop.load(Ordering::SeqCst) || made.len() < 3 {
                let path = format!("/memories/n{}.md", made.len());
                let answer =
                    tool.handle(&json!({"command": "create", "path": path, "file_text": "note\n"}));
                assert!(answer.get("is_error").is_none(), "{answer}");
                made.push(path);
            }
            made
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let selection = mnemo::Selection {
        texts: vec![MARKER.to_string()],
        ..Default::default()
    };
    let plan = client.redaction_plan(&selection).expect("plan");
    assert_eq!(plan.seqs, vec![mnemo::Seq(1), mnemo::Seq(2)]);
    let done = client.redact("asked", &selection).expect("redact");
    assert_eq!(done.plan, plan);
    assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    let made = writer.join().expect("writer");
    for path in &made {
        assert!(client.record(path).expect("read").is_some(), "{path}");
    }
    assert!(
        client
            .record("/memories/secret.md")
            .expect("read")
            .is_none()
    );
    let report = client.verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    let redaction = client
        .events(done.seq)
        .expect("events")
        .next()
        .expect("the redaction")
        .expect("decoded");
    assert_eq!(redaction.header.agent, "operator-1");
    // A refused one changes nothing and leaves the store open.
    let again = client.redact("asked", &selection);
    assert!(again.is_err());
    assert!(
        tool.handle(&json!({"command": "view", "path": "/memories"}))
            .get("is_error")
            .is_none()
    );
    drop((tool, client));
    assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
}

/// A redaction killed after its exchange leaves the store as it was beside the store, with what
/// was erased in it: the next open for writing removes it (and a killed copy), not only the next
/// redaction; a directory that only looks like one, or a link, stays.
#[test]
fn the_next_open_removes_what_a_killed_redaction_left_beside_the_store() {
    let t = TempStore::new();
    let db = db(&t);
    run_ok(&["tool", "--db", &db], &session());
    let parent = t.path().parent().expect("parent").to_path_buf();
    let name = t
        .path()
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let old = parent.join(format!(".{name}.redact-0123456789abcdef"));
    let creating = parent.join(format!("..{name}.redact-fedcba9876543210.creating-1-2"));
    let lookalike = parent.join(format!(".{name}.redact-0123456789abcdeg"));
    let target = parent.join(format!("{name}-elsewhere"));
    let link = parent.join(format!(".{name}.redact-00000000000000ff"));
    for dir in [&old, &creating, &lookalike, &target] {
        std::fs::create_dir(dir).expect("mkdir");
        std::fs::write(dir.join("db"), MARKER).expect("write");
    }
    std::os::unix::fs::symlink(&target, &link).expect("link");
    // A read changes nothing, beside the store too.
    run_ok(&["verify", "--db", &db], "");
    assert!(old.exists() && creating.exists());
    run_ok(&["tool", "--db", &db], "");
    assert!(
        !old.exists(),
        "the old store with the erased content is left"
    );
    assert!(!creating.exists(), "a killed copy is left");
    assert!(lookalike.join("db").exists(), "a lookalike was removed");
    assert!(target.join("db").exists(), "a link was followed");
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "a link was removed"
    );
    for dir in [&lookalike, &target] {
        std::fs::remove_dir_all(dir).expect("clean up");
    }
    std::fs::remove_file(&link).expect("clean up");
}

/// The store setting `delete` = `erase`: the memory tool's delete erases the files it deletes,
/// with their whole history (followed by identity: a file that once lived at the path and moved
/// away is kept), before it answers; a failed delete erases nothing; `keep` (the default, and
/// again once set back) keeps history; a setting or value that is not one is refused and logged.
#[test]
fn under_delete_erase_the_tools_delete_erases_what_it_deletes() {
    let t = TempStore::new();
    let db = db(&t);
    let calls = |calls: &[Value]| -> Vec<Value> {
        let input: String = calls.iter().map(|c| c.to_string() + "\n").collect();
        run_ok(&["tool", "--db", &db], &input)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a result"))
            .collect()
    };
    let keep = "KEEPQQ";
    calls(&[
        json!({"command": "create", "path": "/memories/p.md", "file_text": format!("{keep}\n")}),
        json!({"command": "rename", "old_path": "/memories/p.md", "new_path": "/memories/kept.md"}),
        json!({"command": "create", "path": "/memories/gone.md", "file_text": "draft\n"}),
        json!({"command": "delete", "path": "/memories/gone.md"}),
    ]);
    // The default keeps history: the deleted draft is still in the log.
    assert_eq!(
        run_ok(&["config", "list", "--db", &db], ""),
        "delete = keep\n"
    );
    assert_eq!(
        run_ok(&["cat", "/memories/gone.md", "--db", &db, "--at", "3"], ""),
        "draft\n"
    );
    for (args, says) in [
        (
            ["config", "set", "delete", "maybe"],
            "is not a value of the setting delete",
        ),
        (["config", "set", "colour", "red"], "there is no setting"),
    ] {
        let mut args = args.to_vec();
        args.extend(["--db", &db]);
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says));
    }
    let set = run_ok(&["config", "set", "delete", "erase", "--db", &db], "");
    assert!(set.starts_with("Set delete to erase"), "{set}");
    assert_eq!(
        run_ok(&["config", "list", "--db", &db, "--json"], ""),
        "{\"name\":\"delete\",\"value\":\"erase\"}\n"
    );
    let answers = calls(&[
        json!({"command": "create", "path": "/memories/p.md", "file_text": format!("{MARKER}\n")}),
        json!({"command": "view", "path": "/memories/p.md"}),
        json!({"command": "rename", "old_path": "/memories/p.md", "new_path": "/memories/d/s.md"}),
        json!({"command": "create", "path": "/memories/d/t.md", "file_text": format!("t {MARKER}\n")}),
        json!({"command": "delete", "path": "/memories/missing.md"}),
        json!({"command": "delete", "path": "/memories/d"}),
        json!({"command": "view", "path": "/memories"}),
    ]);
    assert!(answers[5].get("is_error").is_none(), "{}", answers[5]);
    assert_eq!(answers[5]["content"], "Successfully deleted /memories/d");
    assert!(!answers[6]["content"].to_string().contains("d/"));
    assert!(
        holding(&t.path(), MARKER.as_bytes()).is_empty(),
        "the deleted files' history is left"
    );
    // The file that once lived at /memories/p.md and moved away is kept, with its history.
    assert!(!holding(&t.path(), keep.as_bytes()).is_empty());
    assert_eq!(
        run_ok(&["cat", "/memories/kept.md", "--db", &db], ""),
        format!("{keep}\n")
    );
    let verified = verify_names_redaction(&db);
    assert!(verified.contains("redacted:"), "{verified}");
    let log = events(&db);
    let redaction = log
        .iter()
        .find(|e| e["command"] == "redact")
        .expect("a redaction");
    // Recorded under the agent whose delete it was, its reason naming no path.
    assert_eq!(redaction["agent"], "cli");
    // The failed delete erased nothing and is still in the log.
    assert!(
        log.iter()
            .any(|e| e["paths"] == json!(["/memories/missing.md"]))
    );
    // Back to keep: history stays.
    run_ok(&["config", "set", "delete", "keep", "--db", &db], "");
    calls(&[
        json!({"command": "create", "path": "/memories/late.md", "file_text": "late\n"}),
        json!({"command": "delete", "path": "/memories/late.md"}),
    ]);
    let n = events(&db).len();
    let at = (n - 1).to_string();
    assert_eq!(
        run_ok(&["cat", "/memories/late.md", "--db", &db, "--at", &at], ""),
        "late\n"
    );
}

/// What an adversary found under `delete` = `erase`: erasing one file must not take other
/// files' history with it. A directory rename moved the deleted file with another agent's file;
/// the rename names only the directories, so it stays, and so does everything after it. And a
/// delete whose erasure was owed (the process died before it, here: the setting came after)
/// is erased when the delete is retried with its tool_use id.
#[test]
fn erasing_a_deleted_file_keeps_the_files_a_rename_moved_with_it_and_a_retry_pays_what_is_owed() {
    let t = TempStore::new();
    let db = db(&t);
    let calls = |agent: &str, calls: &[Value]| -> Vec<Value> {
        let input: String = calls.iter().map(|c| c.to_string() + "\n").collect();
        run_ok(&["tool", "--db", &db, "--agent", agent], &input)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a result"))
            .collect()
    };
    run_ok(&["tool", "--db", &db], "");
    run_ok(&["config", "set", "delete", "erase", "--db", &db], "");
    calls(
        "alice",
        &[
            json!({"command": "create", "path": "/memories/d/x.md", "file_text": format!("{MARKER}\n")}),
            json!({"command": "create", "path": "/memories/d/y.md", "file_text": "Y v1\n"}),
            json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        ],
    );
    calls(
        "bob",
        &[
            json!({"command": "create", "path": "/memories/d/y.md", "file_text": "BOB NOTE\n"}),
            json!({"command": "str_replace", "path": "/memories/e/y.md", "old_str": "Y v1", "new_str": "Y v2 BOB EDIT"}),
        ],
    );
    let gone = calls(
        "alice",
        &[json!({"command": "delete", "path": "/memories/e/x.md"})],
    );
    assert_eq!(gone[0]["content"], "Successfully deleted /memories/e/x.md");
    assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
    assert_eq!(
        run_ok(&["cat", "/memories/d/y.md", "--db", &db], ""),
        "BOB NOTE\n"
    );
    assert_eq!(
        run_ok(&["cat", "/memories/e/y.md", "--db", &db], ""),
        "Y v2 BOB EDIT\n"
    );
    let log = events(&db);
    let redaction = log
        .iter()
        .find(|e| e["command"] == "redact")
        .expect("redaction");
    // Only x.md's create and its delete held its name or content.
    assert_eq!(redaction["paths"], json!(["events 2, 7"]), "{redaction}");
    verify_names_redaction(&db);

    // An erasure owed: the delete was logged under keep, and is retried under erase.
    run_ok(&["config", "set", "delete", "keep", "--db", &db], "");
    let block = |id: &str, input: Value| {
        json!({"type": "tool_use", "id": id, "name": "memory", "input": input}).to_string() + "\n"
    };
    let secret = json!({"command": "create", "path": "/memories/owed.md", "file_text": "OWEDQQ\n"});
    let delete = json!({"command": "delete", "path": "/memories/owed.md"});
    run_ok(
        &["tool", "--db", &db],
        &(block("c1", secret) + &block("DEL1", delete.clone())),
    );
    assert!(!holding(&t.path(), b"OWEDQQ").is_empty(), "kept under keep");
    run_ok(&["config", "set", "delete", "erase", "--db", &db], "");
    let retried = run_ok(&["tool", "--db", &db], &block("DEL1", delete));
    assert!(
        retried.contains("Successfully deleted /memories/owed.md"),
        "{retried}"
    );
    assert!(
        holding(&t.path(), b"OWEDQQ").is_empty(),
        "the retry did not pay the erasure its delete owed"
    );
    verify_names_redaction(&db);
}

/// Before: a rejected raw line that spelt a secret with a JSON escape (`\u005AEBRA6666`) was not
/// found by `redact --text ZEBRA6666`, and `redact --path` left the path in a rejected line that
/// named it. Now a rejected line is searched as received and as JSON would decode it, for the
/// texts and for the paths, and what is found is erased.
#[test]
fn rejected_raw_lines_are_searched_decoded_and_by_path() {
    let t = TempStore::new();
    let db = db(&t);
    let lines = [
        json!({"command": "create", "path": "/memories/people/ann.md", "file_text": "ann\n"})
            .to_string(),
        // Not JSON (cut short): kept as received.
        r#"{"command":"create","path":"/memories/pin.md","file_text":"\u005AEBRA6666""#.to_string(),
        r#"{"command":"view","path":"/memories/people/ann.md""#.to_string(),
        json!({"command": "view", "path": "/memories"}).to_string(),
    ];
    run_ok(&["tool", "--db", &db], &(lines.join("\n") + "\n"));
    let marker = "\\u005AEBRA6666";
    assert!(
        !holding(&t.path(), marker.as_bytes()).is_empty(),
        "the raw line is kept"
    );
    let said = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "a secret",
            "--text",
            "ZEBRA6666",
        ],
        "",
    );
    assert!(said.contains("redacted 1 event"), "{said}");
    assert!(
        holding(&t.path(), marker.as_bytes()).is_empty(),
        "no byte of it is left"
    );
    let raw_path = r#""path":"/memories/people/ann.md""#;
    assert!(!holding(&t.path(), raw_path.as_bytes()).is_empty());
    let said = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "forget ann",
            "--path",
            "/memories/people/ann.md",
        ],
        "",
    );
    assert!(said.starts_with("redacted "), "{said}");
    assert!(
        holding(&t.path(), raw_path.as_bytes()).is_empty(),
        "the rejected line that named the path is erased"
    );
    verify_names_redaction(&db);
}

/// Before: a rejected call over 4 KiB keeps only a digest (its length, hash and first 256
/// bytes), and `redact --text` with a text past that start answered "nothing matches" as if the
/// log could not hold it. Now the answer (and a dry run, and a redaction that erases other
/// events) names every such event it could not search, and says to erase it by seq; erased so,
/// nothing of it is left.
#[test]
fn a_text_past_what_a_digest_keeps_is_named_as_unsearched_never_as_absent() {
    let t = TempStore::new();
    let db = db(&t);
    // Not JSON (cut short) and over 4 KiB: kept as a digest; the PIN lies past its start.
    let padding = "x".repeat(5000);
    let long =
        format!(r#"{{"command":"create","path":"/memories/a.md","file_text":"{padding} PIN 7319"#);
    let lines = [
        json!({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"})
            .to_string(),
        long,
    ];
    run_ok(&["tool", "--db", &db], &(lines.join("\n") + "\n"));
    let shown = run_ok(&["show", "2", "--db", &db], "");
    assert!(
        shown.contains("digest") || shown.contains("bytes"),
        "{shown}"
    );
    // No hash of the whole line is kept (semantics 4): nothing confirms a guess at the PIN.
    let shown: serde_json::Value =
        serde_json::from_str(&run_ok(&["show", "2", "--db", &db, "--json"], "")).expect("json");
    assert!(
        shown["input"]["digest"]["len"].as_u64() > Some(5000),
        "{shown}"
    );
    assert_eq!(
        shown["input"]["digest"]["blake3"],
        serde_json::Value::Null,
        "{shown}"
    );
    let whole = blake3::hash(lines[1].as_bytes());
    assert!(
        holding(&t.path(), whole.as_bytes()).is_empty(),
        "the store keeps the hash of the whole line"
    );
    let out = run_mnemo(
        &[
            "redact", "--db", &db, "--reason", "pin", "--text", "PIN 7319",
        ],
        "",
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("nothing in the log matches")
            && said.contains("digest")
            && said.contains("(2)"),
        "{said}"
    );
    let dry = run_ok(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "pin",
            "--text",
            "PIN 7319",
            "--dry-run",
        ],
        "",
    );
    assert!(dry.contains("--seq") && dry.contains("(2)"), "{dry}");
    // A redaction that does erase something says it too.
    let done = run_ok(
        &["redact", "--db", &db, "--reason", "k", "--text", "keep"],
        "",
    );
    assert!(
        done.starts_with("redacted ") && done.contains("(2)"),
        "{done}"
    );
    // A short line that is not UTF-8: its start is kept decoded (each invalid byte made U+FFFD),
    // so a text between the invalid bytes is not there to find either.
    let mut odd = vec![0xffu8; 300];
    odd.extend_from_slice(b"HUNTER2PASSWORD\n");
    let out = crate::support::run_mnemo_bytes(&["tool", "--db", &db], &odd);
    assert!(out.status.success(), "{out:?}");
    let out = run_mnemo(
        &[
            "redact",
            "--db",
            &db,
            "--reason",
            "r",
            "--text",
            "HUNTER2PASSWORD",
            "--dry-run",
        ],
        "",
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("digest") && said.contains("(2, 4)"), "{said}");
    let kept = r#""path":"/memories/a.md""#;
    assert!(
        !holding(&t.path(), kept.as_bytes()).is_empty(),
        "the digest keeps the start"
    );
    let done = run_ok(
        &["redact", "--db", &db, "--reason", "pin", "--seq", "2"],
        "",
    );
    assert!(done.starts_with("redacted 1 events (2)"), "{done}");
    assert!(
        holding(&t.path(), kept.as_bytes()).is_empty(),
        "the start is left"
    );
    verify_names_redaction(&db);
}

/// Issue 44: a redaction by seq keeps what the erased event did to the tree, so a file created
/// again after the erased one was deleted keeps its history, a directory listing that showed only
/// the erased file's name and size re-derives, and only what showed or built on the content is
/// erased with it; one that would change a live file (its content built on the erased event by an
/// edit) is refused, naming the file, and changes nothing; and the kept effect is committed to by
/// the redaction's event: changing it is named by its seq.
#[test]
fn a_redaction_by_seq_keeps_what_the_event_did_and_never_changes_the_live_tree() {
    let t = TempStore::new();
    let db = db(&t);
    let lines = [
        block(
            "k1",
            json!({"command": "create", "path": "/memories/a.md", "file_text": format!("pin {MARKER}\n")}),
        ),
        block("k2", json!({"command": "view", "path": "/memories"})),
        block("k3", json!({"command": "view", "path": "/memories/a.md"})),
        block(
            "k4",
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": MARKER, "new_str": "gone"}),
        ),
    ];
    run_ok(&["tool", "--db", &db], &(lines.join("\n") + "\n"));
    let sums = crate::support::checksums(&t.path());
    let refused = run_mnemo(&["redact", "--db", &db, "--reason", "r", "--seq", "1"], "");
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("/memories/a.md") && said.contains("update or delete"),
        "{said}"
    );
    assert_eq!(
        crate::support::checksums(&t.path()),
        sums,
        "a refused redaction writes nothing"
    );
    // The live file moves past it: deleted, then made again.
    let more = [
        block("k5", json!({"command": "delete", "path": "/memories/a.md"})),
        block(
            "k6",
            json!({"command": "create", "path": "/memories/a.md", "file_text": "fresh\n"}),
        ),
    ];
    run_ok(&["tool", "--db", &db], &(more.join("\n") + "\n"));
    let done = run_ok(&["redact", "--db", &db, "--reason", "r", "--seq", "1"], "");
    let erased: Vec<u64> = done
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(seqs, _)| {
            seqs.split(", ")
                .map(|s| s.parse().expect("a seq"))
                .collect()
        })
        .unwrap_or_default();
    // The create, the view of its content and the edit of it; not the directory's listing (a
    // name and a size), the delete, or the file made again.
    assert_eq!(erased, vec![1, 3, 4], "{done}");
    assert!(holding(&t.path(), MARKER.as_bytes()).is_empty());
    let report = run_ok(&["verify", "--db", &db], "");
    assert!(report.contains("INTACT"), "{report}");
    assert_eq!(
        run_ok(&["cat", "--db", &db, "/memories/a.md"], ""),
        "fresh\n"
    );
    // The past holds no placeholder as content: a read of it is refused, a diff and an export
    // leave the file out.
    let past = run_mnemo(&["cat", "--db", &db, "/memories/a.md", "--at", "2"], "");
    let said = String::from_utf8_lossy(&past.stderr).into_owned();
    assert!(
        !past.status.success() && said.contains("erased by a redaction"),
        "{said}"
    );
    let diff = run_ok(&["diff", "--db", &db, "0", "2"], "");
    assert!(!diff.contains("[redacted]"), "{diff}");
    let out = tempfile::TempDir::new().expect("tempdir");
    let exported = out.path().join("at2");
    run_ok(
        &[
            "export",
            "--db",
            &db,
            exported.to_str().expect("utf-8"),
            "--at",
            "2",
        ],
        "",
    );
    assert!(
        holding(&exported, b"[redacted]").is_empty(),
        "an export wrote a placeholder"
    );
    // The kept effect of event 1, changed and re-encoded: the chain still holds (it is not
    // hashed), the redaction's commitment does not.
    tamper_record(&t.path(), 1, |record| {
        let mut event = mnemo::Event::decode(record).expect("decode");
        let mnemo::Body::Erased(erased) = &mut event.body else {
            panic!("event 1 is not erased: {event:?}");
        };
        let kept = erased.kept.as_mut().expect("event 1 keeps what it did");
        let mnemo::event::KeptChange::Write { bytes, .. } = &mut kept.change else {
            panic!("event 1 kept {kept:?}");
        };
        *bytes += 1;
        *record = event.to_frame().encode();
    });
    let out = run_mnemo(&["verify", "--db", &db], "");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("event 1") || said.contains("seq 1"), "{said}");
    let cat = run_mnemo(&["cat", "--db", &db, "/memories/a.md", "--at", "2"], "");
    assert!(
        !cat.status.success(),
        "a read of the past proves the chain first"
    );
}

/// One step of a memory-stores session: an API write on one of three memories (by slot), or a
/// memory-tool view of the directory or of a memory's file.
#[derive(Clone, Debug)]
enum ApiStep {
    /// Create the memory of this slot (a fresh one if the slot's was deleted).
    Create(usize),
    /// Replace its content, with the current digest as the precondition or without one.
    Update(usize, bool),
    /// Delete it.
    Delete(usize),
    /// `view` of the memory's file, whose answer shows its content.
    ViewFile(usize),
    /// `view` of the directory: names and sizes.
    ViewDir,
}

fn api_step() -> impl proptest::strategy::Strategy<Value = ApiStep> {
    use proptest::prelude::*;
    prop_oneof![
        (0..3usize).prop_map(ApiStep::Create),
        (0..3usize, any::<bool>()).prop_map(|(s, p)| ApiStep::Update(s, p)),
        (0..3usize).prop_map(ApiStep::Delete),
        (0..3usize).prop_map(ApiStep::ViewFile),
        Just(ApiStep::ViewDir),
    ]
}

/// The model: per slot, the live memory (its identity and the seq whose content it holds now),
/// and every content written, by seq.
#[derive(Default)]
struct ApiModel {
    live: [Option<(u64, u64)>; 3],
    written: std::collections::BTreeMap<u64, String>,
    content: std::collections::BTreeMap<u64, String>,
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("MNEMO_REDACT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Issue 44: random memory-stores sessions (API writes with and without preconditions, the
    /// memory tool's views), then a redaction of one API write by seq, as a memory version is
    /// redacted. Against a model: it is refused exactly when that write's content is what a live
    /// memory holds now (and then changes no byte); else it succeeds, no byte of that content is
    /// left in the store, every live memory holds the model's content under its identity, a
    /// precondition on it still holds, and the store verifies intact.
    #[test]
    fn redacting_a_version_by_seq_agrees_with_the_model(
        steps in proptest::collection::vec(api_step(), 1..20),
        pick in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        use mnemo::event::ApiWrite;
        use mnemo::testing::tool::content_sha256;
        let t = TempStore::new();
        let client = t.client();
        let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
        let mut model = ApiModel::default();
        let path = |slot: usize| format!("/memories/slot{slot}.md");
        let mut fresh = 0u32;
        for step in &steps {
            let next = |fresh: &mut u32| {
                *fresh += 1;
                format!("content QZK{fresh:04}KZQ of this version\n")
            };
            match step {
                ApiStep::Create(slot) if model.live[*slot].is_none() => {
                    let text = next(&mut fresh);
                    let r = client.call(None, mnemo::Body::Api(ApiWrite::Create { path: path(*slot), content: text.clone() })).expect("create");
                    proptest::prop_assert!(!r.is_error, "{}", r.text);
                    model.live[*slot] = Some((r.seq.0, r.seq.0));
                    model.written.insert(r.seq.0, text.clone());
                    model.content.insert(r.seq.0, text);
                }
                ApiStep::Update(slot, precondition) => {
                    let Some((memory, at)) = model.live[*slot] else { continue };
                    let text = next(&mut fresh);
                    let expect = precondition.then(|| content_sha256(&model.content[&at]));
                    let r = client.call(None, mnemo::Body::Api(ApiWrite::Update { memory, path: path(*slot), content: Some(text.clone()), new_path: None, expect })).expect("update");
                    proptest::prop_assert!(!r.is_error, "{}", r.text);
                    model.live[*slot] = Some((memory, r.seq.0));
                    model.written.insert(r.seq.0, text.clone());
                    model.content.insert(r.seq.0, text);
                }
                ApiStep::Delete(slot) => {
                    let Some((memory, _)) = model.live[*slot] else { continue };
                    let r = client.call(None, mnemo::Body::Api(ApiWrite::Delete { memory, path: path(*slot), expect: None })).expect("delete");
                    proptest::prop_assert!(!r.is_error, "{}", r.text);
                    model.live[*slot] = None;
                }
                ApiStep::ViewFile(slot) => {
                    tool.handle(&json!({"command": "view", "path": path(*slot)}));
                }
                ApiStep::ViewDir | ApiStep::Create(_) => {
                    tool.handle(&json!({"command": "view", "path": "/memories"}));
                }
            }
        }
        proptest::prop_assume!(!model.written.is_empty());
        let seqs: Vec<u64> = model.written.keys().copied().collect();
        let chosen = seqs[pick.index(seqs.len())];
        let current = model.live.iter().flatten().any(|(_, at)| *at == chosen);
        drop(tool);
        drop(client);
        let sums = crate::support::checksums(&t.path());
        let selection = mnemo::Selection { seqs: vec![mnemo::Seq(chosen)], ..Default::default() };
        match mnemo::testing::redact_store(&t.path(), "operator", "test", &selection) {
            Err(e) => {
                proptest::prop_assert!(current, "refused a version a memory moved past: {e}");
                proptest::prop_assert!(e.to_string().contains("update or delete"), "{e}");
                proptest::prop_assert_eq!(crate::support::checksums(&t.path()), sums);
            }
            Ok(done) => {
                proptest::prop_assert!(!current, "redacted what a live memory holds now: {done:?}");
                let marker = model.written[&chosen].split(' ').nth(1).expect("marker").to_string();
                proptest::prop_assert!(holding(&t.path(), marker.as_bytes()).is_empty(), "{marker} left");
                let client = t.client();
                proptest::prop_assert!(client.verify().expect("verify").is_intact());
                for (slot, live) in model.live.iter().enumerate() {
                    let record = client.record(&path(slot)).expect("read");
                    match live {
                        None => proptest::prop_assert!(record.is_none(), "slot {slot} came back"),
                        Some((memory, at)) => {
                            let record = record.expect("a live memory");
                            proptest::prop_assert_eq!(record.created.0, *memory);
                            proptest::prop_assert_eq!(&record.content, &model.content[at]);
                            let r = client.call(None, mnemo::Body::Api(ApiWrite::Update {
                                memory: *memory,
                                path: path(slot),
                                content: Some(format!("after {slot}\n")),
                                new_path: None,
                                expect: Some(content_sha256(&model.content[at])),
                            })).expect("update");
                            proptest::prop_assert!(!r.is_error, "{}", r.text);
                        }
                    }
                }
                proptest::prop_assert!(client.verify().expect("verify").is_intact());
            }
        }
    }
}

/// Issue 44's tamper table for formats 10 and 11: every byte of an erased record that keeps what
/// its event did (format 11), of the redaction that commits to it and of a store's label (format
/// 10), flipped in turn, is named by `verify` at that record's seq, never passed as intact (the
/// kept effect is not hashed by the chain: the redaction's digest of it is).
#[test]
fn every_byte_of_a_kept_effect_a_keeping_redaction_and_a_label_is_checked() {
    use mnemo::event::ApiWrite;
    use mnemo::testing::tool::content_sha256;
    let t = TempStore::new();
    {
        let client = t.client();
        let made = client
            .call(
                None,
                mnemo::Body::Api(ApiWrite::Create {
                    path: "/memories/k.md".into(),
                    content: format!("{MARKER}\n"),
                }),
            )
            .expect("create");
        assert_eq!(made.seq.0, 1, "{}", made.text);
        let moved_past = client
            .call(
                None,
                mnemo::Body::Api(ApiWrite::Update {
                    memory: 1,
                    path: "/memories/k.md".into(),
                    content: Some("clean\n".into()),
                    new_path: None,
                    expect: Some(content_sha256(&format!("{MARKER}\n"))),
                }),
            )
            .expect("update");
        assert!(!moved_past.is_error, "{}", moved_past.text);
        let label = client
            .admin(mnemo::AdminCommand::Label {
                label: r#"{"name":"n","metadata":{"k":"v"}}"#.into(),
            })
            .expect("label");
        assert!(!label.is_error, "{}", label.text);
    }
    let selection = mnemo::Selection {
        seqs: vec![mnemo::Seq(1)],
        ..Default::default()
    };
    let done =
        mnemo::testing::redact_store(&t.path(), "operator", "test", &selection).expect("redact");
    assert_eq!(done.seq.0, 4);
    let originals: Vec<(u64, Vec<u8>)> = {
        let store = crate::support::open_store(&t.path());
        let (events, _, _) = store.raw_trees();
        [1u64, 3, 4]
            .into_iter()
            .map(|seq| {
                (
                    seq,
                    events
                        .get(seq.to_be_bytes())
                        .expect("get")
                        .expect("record")
                        .to_vec(),
                )
            })
            .collect()
    };
    assert_eq!(
        originals[0].1[0], 11,
        "event 1 is an erased record that keeps its effect"
    );
    assert_eq!(originals[1].1[0], 10, "the label is format 10");
    assert_eq!(originals[2].1[0], 10, "the keeping redaction is format 10");
    let mut passed = Vec::new();
    for (seq, record) in &originals {
        for at in 0..record.len() {
            tamper_record(&t.path(), *seq, |rec| rec[at] ^= 0x01);
            let report = {
                let store = crate::support::open_store(&t.path());
                mnemo::testing::verify_store(&store).expect("verify")
            };
            let named = report.violations.first().map(|v| v.seq.0);
            if named != Some(*seq) {
                passed.push(format!(
                    "event {seq}, byte {at}: {named:?} {:?}",
                    report.violations.first()
                ));
            }
            tamper_record(&t.path(), *seq, |rec| *rec = record.clone());
        }
    }
    assert!(
        passed.is_empty(),
        "{} flips not named at their seq:\n{}",
        passed.len(),
        passed.join("\n")
    );
    let store = crate::support::open_store(&t.path());
    assert!(
        mnemo::testing::verify_store(&store)
            .expect("verify")
            .is_intact()
    );
}

/// A tree kept in memory for the viewer and `show` (every 1,024 events) carries the digests a
/// redaction's kept effects answer with: an API update whose precondition names erased content,
/// shown from a tree kept after the erased event, still re-derives its recorded answer.
#[test]
fn a_kept_tree_past_a_kept_effect_still_re_derives_a_precondition_on_it() {
    use mnemo::event::ApiWrite;
    use mnemo::testing::tool::content_sha256;
    let t = TempStore::new();
    let update_seq = {
        let client = t.client();
        let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
        let made = client
            .call(
                None,
                mnemo::Body::Api(ApiWrite::Create {
                    path: "/memories/k.md".into(),
                    content: format!("{MARKER}\n"),
                }),
            )
            .expect("create");
        assert_eq!(made.seq.0, 1);
        for _ in 0..1100 {
            tool.handle(&json!({"command": "view", "path": "/memories/none"}));
        }
        let update = client
            .call(
                None,
                mnemo::Body::Api(ApiWrite::Update {
                    memory: 1,
                    path: "/memories/k.md".into(),
                    content: Some("clean\n".into()),
                    new_path: None,
                    expect: Some(content_sha256(&format!("{MARKER}\n"))),
                }),
            )
            .expect("update");
        assert!(!update.is_error, "{}", update.text);
        update.seq
    };
    let selection = mnemo::Selection {
        seqs: vec![mnemo::Seq(1)],
        ..Default::default()
    };
    mnemo::testing::redact_store(&t.path(), "operator", "test", &selection).expect("redact");
    let client = t.client();
    // The first show runs from event 1 and keeps a tree at 1,024; the second starts from it.
    for round in 0..2 {
        let shown = client.show(update_seq).expect("show");
        assert!(shown.verified, "round {round}: {shown:?}");
    }
}
