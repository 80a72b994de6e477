//! Replicas (feature `replicate`): `mnemo replicate --once` ships the log as sealed segments and
//! a checkpoint, resumes with no gap and no duplicate (also after a shipment cut before its
//! checkpoint), refuses a replica of another history; `mnemo restore` rebuilds the same tree
//! from it, also after the primary is gone; `mnemo verify --from` names the event a tampered
//! segment or checkpoint breaks; a redaction rewrites the segments it touches.
//!
//! Every test runs over `file://` in a temporary directory, and over S3 when `MNEMO_TEST_S3`
//! names a bucket and prefix (`s3://bucket/prefix`, with the `AWS_*` variables set):
//! `tests/s3_replica.sh` starts a real S3-compatible server on loopback and runs them so. The
//! replica's objects are read and tampered with through the object store, never as files.

use mnemo::Seq;
use mnemo::testing::replica::{Replica, segment};
use serde_json::json;

use crate::redact::run_ok;
use crate::support::{TempStore, run_mnemo};

mod compaction;
mod conditional;
mod covered;
mod fleet;

fn session(from: usize, to: usize) -> String {
    let mut lines = String::new();
    for i in from..to {
        for call in [
            json!({"command": "create", "path": format!("/memories/d{}/n{i}.md", i % 3), "file_text": format!("note {i}\n")}),
            json!({"command": "str_replace", "path": format!("/memories/d{}/n{i}.md", i % 3), "old_str": "note", "new_str": "edited note"}),
            json!({"command": "view", "path": format!("/memories/d{}", i % 3)}),
        ] {
            lines.push_str(&call.to_string());
            lines.push('\n');
        }
    }
    lines
}

/// `count` memory-tool calls of every kind (creates, edits, inserts, renames, deletes and views
/// of the root, over three directories), picked by `seed`: a session whose replay writes every
/// part of the index. At most one call in six may fail (an edit of a file a rename moved, say).
fn every_kind_of_call(server: &mnemo::MnemoMemoryToolServer, seed: u64, count: usize) {
    let mut rng = crate::support::Rng(seed);
    let mut files: Vec<String> = Vec::new();
    let mut failed = 0;
    for i in 0..count {
        let dir = ["a", "b", "a/c"][rng.below(3)];
        let fresh = format!("/memories/{dir}/f{i}.md");
        let input = match (rng.below(8), files.is_empty()) {
            (0..=2, _) | (_, true) => {
                files.push(fresh.clone());
                json!({"command": "create", "path": fresh,
                    "file_text": format!("line {i}\nsecond\n")})
            }
            (3, _) => {
                json!({"command": "str_replace", "path": files[rng.below(files.len())],
                "old_str": "second", "new_str": format!("edited {i}")})
            }
            (4, _) => {
                json!({"command": "insert", "path": files[rng.below(files.len())],
                "insert_line": 1, "insert_text": format!("inserted {i}\n")})
            }
            (5, _) => {
                let old = files.swap_remove(rng.below(files.len()));
                files.push(fresh.clone());
                json!({"command": "rename", "old_path": old, "new_path": fresh})
            }
            (6, _) => json!({"command": "delete",
                "path": files.swap_remove(rng.below(files.len()))}),
            _ => json!({"command": "view", "path": "/memories"}),
        };
        failed += usize::from(crate::support::call(server, input).1);
    }
    assert!(
        failed <= count / 6,
        "{failed} of the session's {count} calls failed"
    );
}

/// A new, empty replica for one test: under `MNEMO_TEST_S3` when it is set, else a directory of
/// `t`'s.
fn new_replica(t: &TempStore, name: &str) -> (String, Replica) {
    let url = match std::env::var("MNEMO_TEST_S3") {
        Ok(base) if !base.is_empty() => {
            let unique = t
                .dir
                .path()
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .trim_start_matches('.')
                .to_string();
            format!("{}/{unique}-{name}", base.trim_end_matches('/'))
        }
        _ => format!("file://{}", t.dir.path().join(name).display()),
    };
    let replica = Replica::open(&url, true).expect("open the replica");
    (url, replica)
}

fn segments(replica: &Replica) -> Vec<String> {
    replica.names("segments").expect("list the segments")
}

fn s(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8")
}

#[test]
fn a_store_shipped_resumed_and_restored_is_the_same_store() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 10));
    let said = run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(
        said.starts_with("replicated events 1 to 30 in 1 segments"),
        "{said}"
    );
    assert!(said.contains("checkpoint: 30:"), "{said}");
    let again = run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(again.starts_with("the replica at "), "{again}");
    assert_eq!(segments(&replica).len(), 1, "nothing shipped twice");
    run_ok(&["tool", "--db", s(&db)], &session(10, 15));
    let more = run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(
        more.starts_with("replicated events 31 to 45 in 1 segments"),
        "{more}"
    );
    assert_eq!(
        segments(&replica),
        vec![
            format!("segments/{}", segment::name(Seq(1), Seq(30))),
            format!("segments/{}", segment::name(Seq(31), Seq(45)))
        ]
    );
    // The primary's checkpoint is the replica's.
    let verified = run_ok(&["verify", "--db", s(&db)], "");
    let checkpoint = verified
        .lines()
        .find_map(|l| l.trim().strip_prefix("checkpoint: "))
        .expect("a checkpoint")
        .to_string();
    assert!(more.contains(&checkpoint), "{more} / {checkpoint}");
    // Restored: the same files, verified; the replica verifies where it lies, checkpoint too.
    let restored = t.dir.path().join("restored");
    let said = run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert!(said.starts_with("restored events 1 to 45"), "{said}");
    assert_eq!(
        run_ok(&["ls", "/", "--db", s(&restored)], ""),
        run_ok(&["ls", "/", "--db", s(&db)], "")
    );
    let from = run_ok(&["verify", "--from", &to, "--expect", &checkpoint], "");
    assert!(from.contains("INTACT"), "{from}");
    // Restored up to an event: the tree as it was then.
    let early = t.dir.path().join("early");
    run_ok(
        &["restore", "--from", &to, "--db", s(&early), "--at", "20"],
        "",
    );
    assert_eq!(
        run_ok(&["ls", "/", "--db", s(&early)], ""),
        run_ok(&["ls", "/", "--db", s(&db), "--at", "20"], "")
    );
    // The primary gone for good: the replica still restores every shipped event.
    std::fs::remove_dir_all(&db).expect("lose the primary");
    let rescued = t.dir.path().join("rescued");
    run_ok(&["restore", "--from", &to, "--db", s(&rescued)], "");
    assert!(run_ok(&["verify", "--db", s(&rescued)], "").contains("INTACT"));
    assert!(
        run_ok(&["cat", "/memories/d2/n14.md", "--db", s(&rescued)], "").contains("edited note 14")
    );
}

#[test]
fn a_shipment_cut_before_its_checkpoint_resumes_with_no_gap_or_duplicate() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 4));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    run_ok(&["tool", "--db", s(&db)], &session(4, 8));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    // As if the second shipment was killed after its segment: its checkpoints never landed.
    let older = replica
        .read(&format!("checkpoints/{:020}", 12))
        .expect("read")
        .expect("the first checkpoint");
    replica
        .remove(&format!("checkpoints/{:020}", 24))
        .expect("remove");
    replica.write("head", older).expect("the older head");
    run_ok(&["tool", "--db", s(&db)], &session(8, 10));
    let said = run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(
        said.starts_with("replicated events 25 to 30 in 1 segments"),
        "{said}"
    );
    assert_eq!(segments(&replica).len(), 3);
    let restored = t.dir.path().join("restored");
    run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert_eq!(
        run_ok(&["log", "--db", s(&restored), "--json"], ""),
        run_ok(&["log", "--db", s(&db), "--json"], "")
    );
}

#[test]
fn a_replica_of_another_history_or_a_non_empty_target_is_refused() {
    let t = TempStore::new();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&t.path())], &session(0, 3));
    run_ok(
        &["replicate", "--db", s(&t.path()), "--to", &to, "--once"],
        "",
    );
    let other = t.dir.path().join("other.db");
    run_ok(&["tool", "--db", s(&other)], &session(0, 5));
    let out = run_mnemo(&["replicate", "--db", s(&other), "--to", &to, "--once"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another history"));
    assert_eq!(segments(&replica).len(), 1, "nothing was shipped");
    let out = run_mnemo(&["restore", "--from", &to, "--db", s(&other)], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    let out = run_mnemo(
        &[
            "replicate",
            "--db",
            s(&t.path()),
            "--to",
            "gs://bucket/x",
            "--once",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("give s3://bucket/prefix or file:///absolute/dir")
    );
    let out = run_mnemo(
        &[
            "replicate",
            "--db",
            s(&t.path()),
            "--to",
            &to,
            "--interval",
            "0",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("from 0.01"));
}

/// `mnemo replicate` without `--once` runs on: each time the store has changed and no process
/// holds it, it ships what is new, until it is stopped; killed, the next run resumes.
#[test]
fn a_running_replicate_ships_each_change_and_a_killed_one_resumes() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    let start = || {
        crate::support::mnemo_command(
            &[
                "replicate",
                "--db",
                s(&db),
                "--to",
                &to,
                "--interval",
                "0.05",
            ],
            &[],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start mnemo replicate")
    };
    // The replica's head, once it names the store's head.
    let reaches = |seq: u64| {
        let started = std::time::Instant::now();
        while replica.head().ok().flatten().map(|(_, h)| h.seq) != Some(Seq(seq)) {
            assert!(
                started.elapsed().as_secs() < 30,
                "the replica never reached {seq}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let head = |db: &std::path::Path| -> u64 {
        let out = run_ok(&["verify", "--db", s(db), "--json"], "");
        let report: serde_json::Value = serde_json::from_str(&out).expect("json");
        report["head"]["seq"].as_u64().expect("a seq")
    };
    let mut running = start();
    reaches(head(&db));
    run_ok(&["tool", "--db", s(&db)], &session(2, 4));
    reaches(head(&db));
    running.kill().expect("kill");
    running.wait().expect("wait");
    run_ok(&["tool", "--db", s(&db)], &session(4, 5));
    let mut running = start();
    reaches(head(&db));
    running.kill().expect("kill");
    running.wait().expect("wait");
    let restored = t.dir.path().join("restored");
    run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert_eq!(
        run_ok(&["ls", "/", "--db", s(&restored)], ""),
        run_ok(&["ls", "/", "--db", s(&db)], "")
    );
}

#[test]
fn a_tampered_segment_or_checkpoint_is_named_and_nothing_is_restored() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 4));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let seg = segments(&replica).remove(0);
    let good = replica.read(&seg).expect("read").expect("segment");
    let range = (Seq(1), Seq(12));
    let name = segment::name(range.0, range.1);
    // A record changed and the segment's digest made again: the chain names the event.
    let mut records = segment::decode(&name, &good, range).expect("decodes");
    let last = records.last_mut().expect("a record");
    let at = last.1.len() - 3;
    last.1[at] ^= 1;
    let records: Vec<Vec<u8>> = records.into_iter().map(|(_, r)| r).collect();
    replica
        .write(&seg, segment::encode(Seq(1), &records))
        .expect("tamper");
    let check = |what: &str, says: &str| {
        let out = run_mnemo(&["verify", "--from", &to], "");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(
            text.contains("VIOLATION") && text.contains(says),
            "{what}: {text}"
        );
        let target = t.dir.path().join("target");
        let out = run_mnemo(&["restore", "--from", &to, "--db", s(&target)], "");
        assert_eq!(out.status.code(), Some(2), "{what}");
        assert!(
            !target.exists(),
            "{what}: a restore that failed left a store"
        );
    };
    check("a record", "event 12");
    // A byte changed with no new digest: the segment itself is named.
    let mut flipped = good.clone();
    flipped[40] ^= 1;
    replica.write(&seg, flipped).expect("tamper");
    check("a byte", "damaged or cut");
    // The checkpoint rewritten to another hash.
    replica
        .write(&seg, good.clone())
        .expect("restore the segment");
    let head = String::from_utf8(replica.read("head").expect("read").expect("head")).expect("text");
    let mut lines: Vec<&str> = head.lines().collect();
    let forged = "0".repeat(64);
    lines[2] = &forged;
    replica
        .write("head", (lines.join("\n") + "\n").into_bytes())
        .expect("forge");
    check("the checkpoint", "checkpoint");
    // Whole again, a checkpoint kept elsewhere that the replica no longer holds is refused.
    replica
        .write("head", head.clone().into_bytes())
        .expect("put back");
    assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
    let wrong = format!("5:{}", "1".repeat(64));
    let out = run_mnemo(&["verify", "--from", &to, "--expect", &wrong], "");
    assert_eq!(out.status.code(), Some(1));
}

/// A redaction reaches the replica: the next shipment writes the segments that held the erased
/// events again from the store, so no byte of the text is left in the replica, and a store
/// restored from it verifies and names the redaction.
#[test]
fn a_redaction_is_shipped_and_the_replicas_old_segments_are_rewritten() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    let secret = "QXREPLICASECRETQX";
    let lines = [
        json!({"command": "create", "path": "/memories/s.md", "file_text": format!("{secret}\n")}),
        json!({"command": "create", "path": "/memories/k.md", "file_text": "keep\n"}),
    ]
    .map(|c| c.to_string() + "\n")
    .concat();
    run_ok(&["tool", "--db", s(&db)], &lines);
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    // Every object of the replica, read through the object store.
    let holds = |replica: &Replica| {
        let mut names = segments(replica);
        names.extend(replica.names("checkpoints").expect("list"));
        names.push("head".into());
        names.iter().any(|name| {
            replica
                .read(name)
                .expect("read")
                .is_some_and(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()))
        })
    };
    assert!(holds(&replica));
    run_ok(
        &[
            "redact",
            "--db",
            s(&db),
            "--reason",
            "asked",
            "--text",
            secret,
        ],
        "",
    );
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(!holds(&replica), "the replica still holds the erased text");
    let restored = t.dir.path().join("restored");
    run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    let report = run_ok(&["verify", "--db", s(&restored)], "");
    assert!(
        report.contains("INTACT") && report.contains("redacted:"),
        "{report}"
    );
    assert_eq!(
        run_ok(&["ls", "/", "--db", s(&restored)], ""),
        run_ok(&["ls", "/", "--db", s(&db)], "")
    );
}

/// A restore verifies the log as it appends it, and the index it writes is that verification's
/// replay (the log is replayed once): `verify` of the restored store compares the stored index,
/// byte for byte at the restored head, with what its own replay of the log derives, over a
/// session of every kind of memory-tool call with a redaction in it, restored whole and up to
/// an event.
#[test]
fn a_restored_store_holds_the_index_its_replay_derives() {
    let t = TempStore::new();
    let db = t.path();
    let (to, _) = new_replica(&t, "replica");
    let secret = "QXRESTOREDINDEXQX";
    let server = t.server();
    crate::support::call(
        &server,
        json!({"command": "create", "path": "/memories/a/secret.md", "file_text": format!("{secret}\n")}),
    );
    every_kind_of_call(&server, 0x1e_57, 200);
    drop(server);
    run_ok(
        &["redact", "--db", s(&db), "--reason", "r", "--text", secret],
        "",
    );
    every_kind_of_call(&t.server(), 0x2e_57, 40);
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    for (name, at) in [("whole", None), ("early", Some("230"))] {
        let restored = t.dir.path().join(name);
        let mut args = vec!["restore", "--from", &to, "--db", s(&restored)];
        args.extend(at.iter().flat_map(|at| ["--at", at]));
        run_ok(&args, "");
        let report = mnemo::MnemoClient::open(&restored, "auditor")
            .expect("open the restored store")
            .verify()
            .expect("verify");
        let events = at.map_or(242, |at| at.parse().expect("a seq"));
        assert!(report.is_intact(), "{name}: {report:?}");
        assert_eq!(report.events, events, "{name}");
        assert_eq!(report.index_applied, Seq(events), "{name}: {report:?}");
        assert!(
            report.redacted.iter().any(|(seq, _)| *seq == Seq(1)),
            "{name}: {report:?}"
        );
    }
}

/// A shipment past one segment's worth of events seals several, back to back, and a restore
/// reads them all in order.
#[test]
fn a_long_log_ships_as_several_segments_that_restore_in_order() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    let events = segment::SEGMENT_EVENTS + 200;
    run_ok(
        &["tool", "--db", s(&db), "--durability", "buffered"],
        &session(0, events.div_ceil(3)),
    );
    let said = run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(said.contains(" in 2 segments"), "{said}");
    let names = segments(&replica);
    let first_end = Seq(segment::SEGMENT_EVENTS as u64);
    assert_eq!(
        names[0],
        format!("segments/{}", segment::name(Seq(1), first_end))
    );
    assert!(names[1].starts_with(&format!("segments/{:020}-", first_end.0 + 1)));
    let restored = t.dir.path().join("restored");
    run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert!(
        run_ok(&["verify", "--db", s(&restored), "--json"], "").contains("\"status\":\"intact\"")
    );
    assert_eq!(
        run_ok(&["ls", "/", "--db", s(&restored)], ""),
        run_ok(&["ls", "/", "--db", s(&db)], "")
    );
}

/// Signed checkpoints: `mnemo key create` keeps the secret beside the store (0600) and prints the
/// verifier key; every checkpoint shipped after is a signed note; `verify --from --key` accepts
/// the head only with the owner's valid signature, so a head rewritten by whoever holds the
/// bucket (signature kept, signature dropped, another key's) is a violation; and the key
/// survives a redaction, which rewrites the store's directory.
#[test]
fn a_replica_head_is_accepted_only_with_the_owners_signature() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 3));
    let vkey = run_ok(&["key", "create", "--db", s(&db)], "")
        .trim()
        .to_string();
    assert!(vkey.starts_with("mnemo-store.mnemo.db+"), "{vkey}");
    let file = mnemo::SigningKey::of(&db).file();
    let mode = std::fs::metadata(&file).expect("key").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = run_mnemo(&["key", "create", "--db", s(&db)], "");
    assert_eq!(again.status.code(), Some(2), "a key is never replaced");
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let head = String::from_utf8(replica.read("head").expect("read").expect("head")).expect("text");
    assert!(
        head.contains("\n\n\u{2014} mnemo-store.mnemo.db "),
        "{head}"
    );
    assert!(run_ok(&["verify", "--from", &to, "--key", &vkey], "").contains("INTACT"));
    let refused = |what: &str, says: &str, key: &str| {
        let out = run_mnemo(&["verify", "--from", &to, "--key", key], "");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
    };
    // Another key: another store's owner.
    let other = t.dir.path().join("other.db");
    run_ok(&["tool", "--db", s(&other)], &session(0, 1));
    let other_key = run_ok(&["key", "create", "--db", s(&other)], "")
        .trim()
        .to_string();
    // The refusal names the key that signed and the one given.
    // NAME+ID of NAME+ID+KEY (the key's base64 may hold a `+` too).
    let given = other_key
        .splitn(3, '+')
        .take(2)
        .collect::<Vec<_>>()
        .join("+");
    refused(
        "another key",
        "is signed by the key mnemo-store.mnemo.db+",
        &other_key,
    );
    refused(
        "another key",
        &format!("not by the key given ({given})"),
        &other_key,
    );
    // The text changed under the signature.
    let (body, signature) = head.split_once("\n\n").expect("a signed note");
    let mut lines: Vec<&str> = body.lines().collect();
    lines[1] = "3";
    replica
        .write(
            "head",
            format!("{}\n\n{signature}", lines.join("\n")).into_bytes(),
        )
        .expect("forge");
    refused("an altered text", "signature", &vkey);
    // The signature dropped.
    replica
        .write("head", format!("{body}\n").into_bytes())
        .expect("forge");
    refused("no signature", "not signed", &vkey);
    replica
        .write("head", head.clone().into_bytes())
        .expect("put back");
    // A redaction keeps the key, and what ships after it is signed by it.
    run_ok(
        &[
            "redact",
            "--db",
            s(&db),
            "--reason",
            "r",
            "--path",
            "/memories/d0/n0.md",
        ],
        "",
    );
    assert!(file.exists(), "the redaction dropped the key");
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(run_ok(&["verify", "--from", &to, "--key", &vkey], "").contains("INTACT"));
}

/// What an adversary found, each now named: a stray object among the segments, a checkpoint
/// object whose hash or name lies, a head with no segments to back it or segments with no
/// head, a pipe in place of an object (no hang), a replica placed in the store's own directory,
/// a `--key` that is no key (a bad argument, exit 2); and a restore killed at any moment leaves
/// nothing at its path, or the whole store.
#[test]
fn a_replica_is_checked_object_by_object_and_a_killed_restore_leaves_nothing() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(
        &["tool", "--db", s(&db), "--durability", "buffered"],
        &session(0, 1500),
    );
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    run_ok(&["tool", "--db", s(&db)], &session(1500, 1502));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let violation = |what: &str, says: &str| {
        let out = run_mnemo(&["verify", "--from", &to], "");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
    };
    replica.write("segments/zzz", b"x".to_vec()).expect("stray");
    violation("a stray object", "not a segment's name");
    replica.remove("segments/zzz").expect("clean");
    let checkpoints = replica.names("checkpoints").expect("list");
    let first = checkpoints[0].clone();
    let good = replica.read(&first).expect("read").expect("checkpoint");
    let text = String::from_utf8(good.clone()).expect("text");
    let mut lines: Vec<&str> = text.lines().collect();
    let zeros = "0".repeat(64);
    lines[2] = &zeros;
    replica
        .write(&first, (lines.join("\n") + "\n").into_bytes())
        .expect("forge");
    violation("a checkpoint's hash", "but the chain has");
    replica.write(&first, good.clone()).expect("put back");
    replica
        .write(&format!("checkpoints/{:020}", 7), good.clone())
        .expect("misnamed");
    violation("a misnamed checkpoint", "not the one its name says");
    replica
        .remove(&format!("checkpoints/{:020}", 7))
        .expect("clean");
    let segments = segments(&replica);
    let last = segments.last().expect("a segment").clone();
    let bytes = replica.read(&last).expect("read").expect("segment");
    replica.remove(&last).expect("remove");
    violation("the last segment gone", "a segment is missing");
    replica.write(&last, bytes).expect("put back");
    let head = replica.read("head").expect("read").expect("head");
    replica.remove("head").expect("remove");
    violation("the head gone", "but no head checkpoint");
    replica.write("head", head).expect("put back");
    assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
    let out = run_mnemo(&["verify", "--from", &to, "--key", "garbage+zz+AAAA"], "");
    assert_eq!(out.status.code(), Some(2), "a key that is no key");
    if let Some(dir) = to.strip_prefix("file://") {
        // A pipe named as the head: named, never waited on.
        let head = std::path::Path::new(dir).join("head");
        let saved = std::fs::read(&head).expect("head");
        std::fs::remove_file(&head).expect("remove");
        let made = std::process::Command::new("mkfifo")
            .arg(&head)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        violation("a pipe as the head", "not a regular file");
        std::fs::remove_file(&head).expect("remove the pipe");
        std::fs::write(&head, saved).expect("put back");
        // The store's own directory is no place for its replica.
        let inside = format!("file://{}/replica", db.display());
        let out = run_mnemo(
            &["replicate", "--db", s(&db), "--to", &inside, "--once"],
            "",
        );
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("store's own directory"));
        assert!(
            !db.join("replica").exists(),
            "a refused replica made its directory in the store"
        );
    }
    // A restore killed at any moment: nothing at its path, or the whole store.
    let mut rng = crate::support::Rng(0x5e11);
    for round in 0..6 {
        let target = t.dir.path().join(format!("killed-{round}"));
        let mut child =
            crate::support::mnemo_command(&["restore", "--from", &to, "--db", s(&target)], &[])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(rng.below_u64(1500)));
        let _ = child.kill();
        let _ = child.wait();
        if target.exists() {
            let report = run_ok(&["verify", "--db", s(&target), "--json"], "");
            assert!(
                report.contains("\"events\":4506"),
                "round {round}: {report}"
            );
        }
    }
}

/// Continuous shipping from the process that holds the store: eight agents write while the
/// shipper runs, a redaction lands in the middle, and the replicated head only ever moves
/// forward. Once stopped, the replica holds the store's own log record for record, up to the
/// head the status reports, with no byte of the erased text, and a restore of it verifies.
#[test]
fn a_store_shipped_as_it_is_written_holds_the_stores_own_log() {
    use mnemo::testing::replica::shipper::Replication;
    use mnemo::{MnemoMemoryToolServer, Selection};
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "live");
    let client = crate::support::open_client(&db, "owner", mnemo::Durability::Fsync);
    let secret = "QXLIVESECRETQX";
    crate::support::call(
        &MnemoMemoryToolServer::new(client.clone()),
        json!({"command": "create", "path": "/memories/secret.md", "file_text": format!("{secret}\n")}),
    );
    let interval = std::time::Duration::from_millis(30);
    let replication =
        Replication::start(&client, replica, interval, |_| {}).expect("start the replication");
    let writers: Vec<_> = (0..8)
        .map(|n| {
            let tool = MnemoMemoryToolServer::new(client.with_agent(format!("agent{n}")).unwrap());
            std::thread::spawn(move || {
                for i in 0..40 {
                    let path = format!("/memories/a{n}/f{i}.md");
                    let (text, failed) = crate::support::call(
                        &tool,
                        json!({"command": "create", "path": path, "file_text": format!("{n} {i}\n")}),
                    );
                    assert!(!failed, "{text}");
                    crate::support::call(&tool, json!({"command": "view", "path": "/memories"}));
                }
            })
        })
        .collect();
    let mut seen = Vec::new();
    let mut redacted = false;
    while writers.iter().any(|w| !w.is_finished()) {
        seen.push(replication.status().replicated.seq);
        if !redacted && seen.last() > Some(&Seq(40)) {
            let selection = Selection {
                texts: vec![secret.to_string()],
                ..Selection::default()
            };
            client.redact("asked", &selection).expect("redact");
            redacted = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for writer in writers {
        writer.join().expect("a writer");
    }
    assert!(
        redacted,
        "the writers finished before the first shipment: {seen:?}"
    );
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "went back: {seen:?}");
    assert!(
        seen.iter().any(|s| *s > Seq(0)),
        "nothing shipped while writing"
    );
    let head = client.head().expect("head");
    let status = replication.stop();
    assert_eq!(status.error, None);
    assert_eq!(status.replicated, head, "the last shipment stopped short");
    assert_eq!(status.lag(), 0);
    let (replica, ours) = (
        Replica::open(&to, false).expect("reopen"),
        client.read_store(|store| store.records(Seq(1)).collect::<Result<Vec<_>, _>>()),
    );
    let ours = ours.expect("the store's records");
    drop(client);
    let mut theirs = Vec::new();
    for name in segments(&replica) {
        let bytes = replica.read(&name).unwrap().unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{name} still holds the erased text"
        );
        let file = name.trim_start_matches("segments/");
        let (first, last) = segment::parse_name(file).expect("a segment name");
        theirs.extend(segment::decode(&name, &bytes, (first, last)).expect("a segment"));
    }
    assert_eq!(theirs, ours, "the replica's log is not the store's");
    let restored = t.dir.path().join("restored");
    let out = run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert!(out.contains(&head.to_string()), "{out}");
}

/// `verify --expect FILE`: an auditor keeps a replica's signed head as a file; later the store
/// and the replica are proven to still hold that checkpoint (with `--key`, only if the file is
/// the owner's signed note). A file whose text was changed, or that another key signed, or
/// that is unsigned, is refused as an argument (exit 2); a checkpoint the log does not hold is a
/// violation (exit 1); a file that is no checkpoint says what `--expect` takes.
#[test]
fn a_kept_checkpoint_file_is_expected_only_with_its_owners_signature() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 3));
    let vkey = run_ok(&["key", "create", "--db", s(&db)], "")
        .trim()
        .to_string();
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let head = String::from_utf8(replica.read("head").unwrap().unwrap()).unwrap();
    let kept = t.dir.path().join("kept-head");
    std::fs::write(&kept, &head).unwrap();
    // The store goes on; the kept checkpoint still holds, for the store and for the replica.
    run_ok(&["tool", "--db", s(&db)], &session(3, 5));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    for args in [
        vec![
            "verify",
            "--db",
            s(&db),
            "--expect",
            s(&kept),
            "--key",
            &vkey,
        ],
        vec![
            "verify",
            "--from",
            &to,
            "--expect",
            s(&kept),
            "--key",
            &vkey,
        ],
        vec!["verify", "--db", s(&db), "--expect", s(&kept)],
    ] {
        assert!(run_ok(&args, "").contains("INTACT"), "{args:?}");
    }
    let refused = |file: &std::path::Path, key: Option<&str>, code: i32, says: &str| {
        let mut args = vec!["verify", "--db", s(&db), "--expect", s(file)];
        args.extend(key.map(|k| ["--key", k]).into_iter().flatten());
        let out = run_mnemo(&args, "");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    };
    // The hash under the signature changed: refused with the key, a violation without it.
    let (body, signature) = head.split_once("\n\n").expect("a signed note");
    let mut lines: Vec<String> = body.lines().map(str::to_string).collect();
    lines[2] = "0".repeat(64);
    let forged = t.dir.path().join("forged");
    std::fs::write(&forged, format!("{}\n\n{signature}", lines.join("\n"))).unwrap();
    refused(&forged, Some(&vkey), 2, "valid signature");
    refused(&forged, None, 1, "VIOLATION");
    // Unsigned, or signed by another store's key.
    let unsigned = t.dir.path().join("unsigned");
    std::fs::write(&unsigned, format!("{body}\n")).unwrap();
    refused(&unsigned, Some(&vkey), 2, "not signed");
    let other = t.dir.path().join("other.db");
    run_ok(&["tool", "--db", s(&other)], &session(0, 1));
    let other_key = run_ok(&["key", "create", "--db", s(&other)], "")
        .trim()
        .to_string();
    refused(
        &kept,
        Some(&other_key),
        2,
        "is signed by the key mnemo-store.mnemo.db+",
    );
    // Not a checkpoint at all; a key with nothing to check.
    let junk = t.dir.path().join("junk");
    std::fs::write(&junk, "hello\n").unwrap();
    refused(&junk, None, 2, "SEQ:HASH");
    let out = run_mnemo(&["verify", "--db", s(&db), "--key", &vkey], "");
    assert_eq!(out.status.code(), Some(2));
    // Seq 0 is the empty log: no hash but zeros makes it a checkpoint.
    let zero = format!("0:{}", "f".repeat(64));
    let out = run_mnemo(&["verify", "--db", s(&db), "--expect", &zero], "");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("seq 0"));
}

/// A shipment that carries a redaction can be cut at any step and the replica still restores
/// and verifies, and the next shipment finishes it: (a) cut after the head moved past the
/// redaction but before the segments holding what it erased were written again (the restore
/// erases them itself, `verify --from` says the rewrite is pending); (b) cut after the new
/// segment was sealed but before the head moved (the replica restores to its old head, whole).
/// Both states are made through the object store from a finished shipment.
#[test]
fn a_shipment_cut_around_a_redaction_leaves_a_replica_that_restores_and_is_finished_next() {
    let t = TempStore::new();
    let db = t.path();
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    for (case, cut_after_head) in [("a", true), ("b", false)] {
        let secret = format!("QXCUTREDACTION{case}QX");
        let holds = |replica: &Replica| {
            segments(replica).iter().any(|name| {
                let bytes = replica.read(name).unwrap().unwrap();
                bytes.windows(secret.len()).any(|w| w == secret.as_bytes())
            })
        };
        let line = json!({"command": "create", "path": format!("/memories/{case}.md"), "file_text": format!("{secret}\n")});
        run_ok(&["tool", "--db", s(&db)], &format!("{line}\n"));
        let (to, replica) = new_replica(&t, &format!("cut-{case}"));
        run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
        let first = segments(&replica)[0].clone();
        let (whole, old_head) = (
            replica.read(&first).unwrap().unwrap(),
            replica.read("head").unwrap().unwrap(),
        );
        run_ok(
            &["redact", "--db", s(&db), "--reason", "r", "--text", &secret],
            "",
        );
        run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
        assert!(!holds(&replica), "{case}: the shipment left the text");
        // Put the replica back in the state a cut would have left.
        replica.write(&first, whole).unwrap();
        if cut_after_head {
            replica
                .write(mnemo::testing::REWRITES, first.clone().into_bytes())
                .unwrap();
        } else {
            replica.write("head", old_head).unwrap();
        }
        assert!(holds(&replica));
        let restored = t.dir.path().join(format!("restored-{case}"));
        if cut_after_head {
            run_ok(&["restore", "--from", &to, "--db", s(&restored)], "");
            let out = run_mnemo(&["verify", "--from", &to], "");
            assert!(out.status.success(), "{case}: {out:?}");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains("a shipment was cut") && said.contains(&first),
                "{case}: {out:?}"
            );
        } else {
            // The head predates the redaction: restoring to it would bring the erased text
            // back, so the restore names the redaction and restores to it when asked.
            let out = run_mnemo(&["restore", "--from", &to, "--db", s(&restored)], "");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && said.contains("was erased by the redaction at event"),
                "{case}: {said}"
            );
            assert!(!restored.exists(), "{case}: a refused restore left a store");
            let end = run_ok(&["log", "--db", s(&db), "--json"], "")
                .lines()
                .count()
                .to_string();
            run_ok(
                &["restore", "--from", &to, "--db", s(&restored), "--at", &end],
                "",
            );
        }
        let report = run_ok(&["verify", "--db", s(&restored)], "");
        assert!(report.contains("INTACT"), "{case}: {report}");
        assert!(
            !crate::support::dir_holds(&restored, secret.as_bytes()),
            "{case}: the restored store holds the erased text"
        );
        // The next shipment finishes the redaction in the replica.
        run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
        assert!(!holds(&replica), "{case}: the next shipment left the text");
        assert_eq!(replica.read(mnemo::testing::REWRITES).unwrap(), None);
        assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
    }
}

/// Before: `mnemo replicate --once` (and `key create`) right after `mnemo tool` waited 30 s
/// for the lock of the store the auto-started server holds, then told a build with the server
/// to rebuild with it. Now the server that holds the store ships it (`POST /v1/replicate`), at
/// once, and the key is made beside the served store; what ships after is signed.
#[cfg(feature = "serve")]
#[test]
fn replicate_once_and_key_create_on_a_served_store_go_through_its_server() {
    let t = TempStore::new();
    let db = t.path();
    let out = crate::support::run_command(
        crate::support::served_command(&["tool", "--db", s(&db), "--idle-exit", "30"], &[]),
        session(0, 2).as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        mnemo::ServerFile::find(&db).is_ok_and(|f| f.is_some()),
        "no server holds the store"
    );
    let (url, replica) = new_replica(&t, "held");
    let started = std::time::Instant::now();
    let served =
        |args: &[&str]| crate::support::run_command(crate::support::served_command(args, &[]), b"");
    let shipped = served(&["replicate", "--db", s(&db), "--to", &url, "--once"]);
    assert!(shipped.status.success(), "{shipped:?}");
    let said = String::from_utf8_lossy(&shipped.stdout);
    assert!(said.contains("replicated events 1 to 6"), "{said}");
    let vkey = served(&["key", "create", "--db", s(&db)]);
    assert!(vkey.status.success(), "{vkey:?}");
    let vkey = String::from_utf8_lossy(&vkey.stdout).trim().to_string();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "they answered after {:?}",
        started.elapsed()
    );
    let more = crate::support::run_command(
        crate::support::served_command(&["tool", "--db", s(&db)], &[]),
        session(2, 3).as_bytes(),
    );
    assert!(more.status.success(), "{more:?}");
    let shipped = served(&["replicate", "--db", s(&db), "--to", &url, "--once"]);
    assert!(shipped.status.success(), "{shipped:?}");
    let head = String::from_utf8(replica.read("head").unwrap().unwrap()).unwrap();
    assert!(
        head.contains("\n\n\u{2014} "),
        "the server's shipment is not signed: {head}"
    );
    assert!(run_ok(&["verify", "--from", &url, "--key", &vkey], "").contains("INTACT"));
    crate::discovery::stop_server(&db);
}

/// Before: a replica that still held a segment from before a redaction (an old object put back
/// by whoever holds the bucket) restored into a store whose `db` held the erased text, and
/// `verify --from` said nothing. Now a restore erases every event a redaction names, whatever
/// its segment holds, before a byte of it reaches the new store, and `verify --from` names the
/// segment that still holds it (in its notes, on stdout, stderr and in the JSON).
#[test]
fn a_segment_put_back_with_erased_content_is_named_and_never_restored() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    let secret = "QXPUTBACKSECRETQX";
    let line =
        json!({"command": "create", "path": "/memories/s.md", "file_text": format!("{secret}\n")});
    run_ok(
        &["tool", "--db", s(&db)],
        &format!("{line}\n{}", session(0, 2)),
    );
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let first = segments(&replica)[0].clone();
    let whole = replica.read(&first).unwrap().unwrap();
    run_ok(
        &["redact", "--db", s(&db), "--reason", "r", "--text", secret],
        "",
    );
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
    // The bucket's holder puts the old segment back; no shipment is under way.
    replica.write(&first, whole).unwrap();
    assert_eq!(replica.read(mnemo::testing::REWRITES).unwrap(), None);
    let restored = t.dir.path().join("restored");
    let out = run_mnemo(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&first),
        "{out:?}"
    );
    assert!(
        !crate::support::dir_holds(&restored, secret.as_bytes()),
        "the restored store's files hold the erased text"
    );
    assert!(run_ok(&["verify", "--db", s(&restored)], "").contains("INTACT"));
    let shown = run_ok(&["show", "1", "--db", s(&restored)], "");
    assert!(
        shown.contains("erased") && !shown.contains(secret),
        "{shown}"
    );
    let out = run_mnemo(&["verify", "--from", &to], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("WARNING") && stdout.contains(&first) && stdout.contains("put back"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&first));
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&["verify", "--from", &to, "--json"], "")).unwrap();
    let notes = json["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains(&first)),
        "{json}"
    );
}

/// Before: `restore` took no `--key`, so whoever holds the bucket appended events under an
/// unsigned head to a signed replica and a restore took them. Now `restore --key` takes only a
/// head the key signed, reaches no further than it, and the new store records the key.
#[test]
fn a_forged_tail_under_an_unsigned_head_is_refused_by_a_restore_with_the_key() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    let vkey = run_ok(&["key", "create", "--db", s(&db)], "")
        .trim()
        .to_string();
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let signed_head = replica.read("head").unwrap().unwrap();
    // The forger restores the replica (no key of the owner's), writes, and ships the tail.
    let forged = t.dir.path().join("forged");
    run_ok(&["restore", "--from", &to, "--db", s(&forged)], "");
    let line =
        json!({"command": "create", "path": "/memories/forged.md", "file_text": "trust me\n"});
    run_ok(&["tool", "--db", s(&forged)], &format!("{line}\n"));
    run_ok(
        &["replicate", "--db", s(&forged), "--to", &to, "--once"],
        "",
    );
    // Without the key the forgery is taken: that is what the key is for.
    let naive = t.dir.path().join("naive");
    run_ok(&["restore", "--from", &to, "--db", s(&naive)], "");
    assert!(run_ok(&["ls", "/", "--db", s(&naive)], "").contains("forged.md"));
    let careful = t.dir.path().join("careful");
    let out = run_mnemo(
        &[
            "restore",
            "--from",
            &to,
            "--db",
            s(&careful),
            "--key",
            &vkey,
        ],
        "",
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not signed"));
    assert!(!careful.exists(), "a refused restore left a store");
    // The signed head back: the forged tail past it is not reached, even when asked for.
    replica.write("head", signed_head).unwrap();
    let end = run_ok(&["log", "--db", s(&forged), "--json"], "")
        .lines()
        .count()
        .to_string();
    let out = run_mnemo(
        &[
            "restore",
            "--from",
            &to,
            "--db",
            s(&careful),
            "--key",
            &vkey,
            "--at",
            &end,
        ],
        "",
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("reaches no further"));
    run_ok(
        &[
            "restore",
            "--from",
            &to,
            "--db",
            s(&careful),
            "--key",
            &vkey,
        ],
        "",
    );
    assert!(!run_ok(&["ls", "/", "--db", s(&careful)], "").contains("forged.md"));
    let recorded = std::fs::read_to_string(mnemo::SigningKey::of(&careful).trust_file())
        .expect("the restored store records the key");
    assert_eq!(recorded.trim(), vkey);
}

/// Before: a nested `segments/sub/*.seg` passed `verify --from` and `restore`, a junk
/// `rewrites` object was ignored, and a 300 MB one made `verify --from` exit 2 while `restore`
/// exited 0. Now each is damage that both name the same way: `verify --from` a violation (exit
/// 1), `restore` a refusal that leaves nothing.
#[test]
fn replica_leftovers_are_refused_alike_by_verify_and_restore() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let first = segments(&replica)[0].clone();
    let bytes = replica.read(&first).unwrap().unwrap();
    // Past the cap on such an object as the 300 MB one was.
    let big = vec![b'x'; 1024 * 1024];
    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        (
            "a nested segment",
            format!("segments/sub/{}", first.trim_start_matches("segments/")),
            bytes,
            "nested",
        ),
        (
            "a junk rewrites object",
            mnemo::testing::REWRITES.to_string(),
            b"segments/nothing-here.seg\n".to_vec(),
            "not one of its segments",
        ),
        (
            "a 1 MiB rewrites object",
            mnemo::testing::REWRITES.to_string(),
            big,
            "more than such an object can be",
        ),
    ];
    for (what, name, object, says) in cases {
        replica.write(&name, object).unwrap();
        let out = run_mnemo(&["verify", "--from", &to], "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        assert!(text.contains(says), "{what}: {text}");
        let target = t.dir.path().join("restored");
        let out = run_mnemo(&["restore", "--from", &to, "--db", s(&target)], "");
        assert!(!out.status.success(), "{what}: restored");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{what}: {out:?}"
        );
        assert!(!target.exists(), "{what}: a refused restore left a store");
        replica.remove(&name).unwrap();
        if let Some(dir) = to.strip_prefix("file://") {
            // An empty directory under segments/ is a leftover too.
            let _ = std::fs::remove_dir(std::path::Path::new(dir).join("segments/sub"));
        }
        assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
    }
}

/// Before (found by an adversary): an object named `NAME#DIGITS` (the file store's own
/// temporary name) was skipped by `verify --from` and `restore` alike, so an old segment put
/// back as `….seg#1` kept erased content in the bucket with no word of it. Now every such
/// partial object is named in a WARNING (it is never read: a shipment under way writes one),
/// and any other entry that is no object of the replica (a name that is not UTF-8, a link, a
/// directory) is damage to both.
#[test]
fn a_partial_object_is_named_and_an_unreadable_name_is_damage() {
    let t = TempStore::new();
    let db = t.path();
    let (to, replica) = new_replica(&t, "replica");
    let Some(dir) = to.strip_prefix("file://").map(std::path::PathBuf::from) else {
        return; // Partial objects are the file store's; S3 has none.
    };
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let first = segments(&replica)[0].clone();
    let hidden = format!("{first}#1");
    std::fs::copy(dir.join(&first), dir.join(&hidden)).expect("plant");
    let out = run_mnemo(&["verify", "--from", &to], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("WARNING") && stdout.contains(&hidden) && stdout.contains("partial"),
        "{stdout}"
    );
    let restored = t.dir.path().join("restored");
    let out = run_mnemo(&["restore", "--from", &to, "--db", s(&restored)], "");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&hidden),
        "{out:?}"
    );
    std::fs::remove_file(dir.join(&hidden)).expect("clean");
    // A name that is not UTF-8, and one with a newline: damage, exit 1, to both.
    use std::os::unix::ffi::OsStrExt;
    for name in [&b"segments/\xff.seg"[..], b"segments/a\nb"] {
        let path = dir.join(std::ffi::OsStr::from_bytes(name));
        std::fs::write(&path, b"x").expect("plant");
        let out = run_mnemo(&["verify", "--from", &to], "");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let target = t.dir.path().join("refused");
        let out = run_mnemo(&["restore", "--from", &to, "--db", s(&target)], "");
        assert!(!out.status.success() && !target.exists(), "{out:?}");
        std::fs::remove_file(&path).expect("clean");
    }
    assert!(run_ok(&["verify", "--from", &to], "").contains("INTACT"));
}

/// A replica URL naming a file, not a directory, is the caller's mistake (exit 2, saying so),
/// never a store failure, and the file is left as it was.
#[test]
fn a_replica_url_naming_a_file_is_refused_as_a_bad_argument() {
    let t = TempStore::new();
    let db = t.path();
    run_ok(
        &["tool", "--db", s(&db), "--no-start"],
        "{\"command\": \"view\", \"path\": \"/memories\"}\n",
    );
    let file = t.dir.path().join("not-a-dir");
    std::fs::write(&file, b"mine").expect("write");
    let to = format!("file://{}", file.display());
    let out = run_mnemo(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not a directory"), "{said}");
    assert_eq!(std::fs::read(&file).expect("read"), b"mine");
}

/// A restore into a path whose directory does not exist is refused up front, naming the
/// directory to make (it said "I/O error on the store's directory").
#[test]
fn a_restore_into_a_missing_directory_names_it() {
    let t = TempStore::new();
    let db = t.path();
    let (to, _replica) = new_replica(&t, "replica");
    run_ok(&["tool", "--db", s(&db)], &session(0, 2));
    run_ok(&["replicate", "--db", s(&db), "--to", &to, "--once"], "");
    let missing = t.dir.path().join("missing").join("new.mnemo.db");
    let out = run_mnemo(&["restore", "--from", &to, "--db", s(&missing)], "");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("is not a directory") && said.contains("missing"),
        "{said}"
    );
    assert!(!t.dir.path().join("missing").exists());
}
