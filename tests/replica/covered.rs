//! What a reader does not take is checked too: every object under a replica's prefix is either
//! part of what `verify --from` proved or named in its report. A segment that a merged segment
//! covers (a compaction cut before it removed it, or a bucket holder's object under such a
//! name) is read and compared with the chain: one that holds exactly the records of its range
//! passes, counted in a note; junk or a forged record there is a violation naming the object;
//! erased content there is named as such, and the next shipment removes the object. An object
//! that is no object of a replica at all (beside `segments/`, `checkpoints/`, `head` and
//! `rewrites`) is a violation too, and events past the head checkpoint are checked against the
//! chain and named.

use mnemo::testing::replica::{Replica, segment};
use mnemo::{MnemoClient, MnemoMemoryToolServer, Selection, Seq};
use serde_json::json;

use super::compaction::{names, setup, ship, write};
use crate::support::{TempStore, run_mnemo};

/// `mnemo verify --from` the replica: its exit code and stdout.
fn verify_from(replica: &Replica) -> (Option<i32>, String) {
    let out = run_mnemo(&["verify", "--from", replica.url()], "");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), stdout)
}

/// A store and its replica (merging two segments at once), shipped twice, three events each:
/// the second shipment merged the two level-0 segments into one of level 1. Returns the name
/// and bytes of the first level-0 segment (events 1 to 3), which the merged one now covers.
fn merged(t: &TempStore) -> (MnemoMemoryToolServer, MnemoClient, Replica, String, Vec<u8>) {
    let (server, client, replica) = setup(t, 2);
    write(&server, 0, 3);
    ship(&client, &replica);
    let first = format!("segments/{}", segment::name(Seq(1), Seq(3)));
    let bytes = replica
        .read(&first)
        .expect("read")
        .expect("the first segment");
    write(&server, 3, 3);
    ship(&client, &replica);
    let merged = format!(
        "segments/{}",
        segment::named(Seq(1), Seq(6), segment::Level::Merged(1))
    );
    assert_eq!(names(&replica), vec![merged], "the two segments merged");
    (server, client, replica, first, bytes)
}

/// The records of a segment's bytes.
fn records(name: &str, bytes: &[u8]) -> Vec<Vec<u8>> {
    let (first, last) = segment::parse_name(name.trim_start_matches("segments/")).expect("name");
    segment::decode(name, bytes, (first, last))
        .expect("decode")
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// Before: a compaction cut after it wrote the merged segment, before it removed the segments
/// it covers, left them unread and unmentioned. Now each is read and checked against the chain;
/// honest ones pass, and a note says how many were checked; the next shipment removes them.
#[test]
fn an_honest_covered_leftover_passes_and_is_counted() {
    let t = TempStore::new();
    let (server, client, replica) = setup(&t, 2);
    write(&server, 0, 3);
    ship(&client, &replica);
    write(&server, 3, 3);
    // The second shipment's steps: its segment, its checkpoint, the head, the merged segment,
    // then the removal of the first covered segment, which fails as a kill there would.
    replica.failpoints().countdown(5);
    assert!(client.ship_to(&replica, &mut |_, _| {}).is_err(), "cut");
    let left = names(&replica);
    assert_eq!(
        left.len(),
        3,
        "the merged segment and the two it covers: {left:?}"
    );
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("INTACT")
            && stdout.contains("2 segment(s) that a merged segment covers")
            && stdout.contains("each holds exactly the records of its range"),
        "{stdout}"
    );
    let db = t.dir.path().join("restored");
    let restored = replica.restore(&db, None).expect("restore");
    assert!(
        restored
            .notes()
            .iter()
            .any(|n| n.contains("2 segment(s) that a merged segment covers")),
        "{:?}",
        restored.notes()
    );
    write(&server, 6, 1);
    ship(&client, &replica);
    assert_eq!(names(&replica).len(), 2, "{:?}", names(&replica));
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("covers"), "{stdout}");
}

/// Before: junk bytes under a covered level-0 name passed `verify --from` as INTACT. Now they
/// are a violation naming the object (exit 1), and the next shipment removes them.
#[test]
fn junk_under_a_covered_name_is_a_violation() {
    let t = TempStore::new();
    let (server, client, replica, first, _) = merged(&t);
    replica
        .write(&first, b"not a segment at all".to_vec())
        .expect("junk");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("VIOLATION") && stdout.contains(&first) && stdout.contains("covers"),
        "{stdout}"
    );
    let db = t.dir.path().join("refused");
    let err = replica.restore(&db, None).expect_err("refused");
    assert!(err.to_string().contains(&first), "{err}");
    write(&server, 6, 1);
    ship(&client, &replica);
    assert!(!names(&replica).contains(&first), "{:?}", names(&replica));
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
}

/// Before: a forged record under a covered name (a whole, well-formed segment whose digest was
/// made anew) passed as INTACT. Now it is a violation naming the object and the event.
#[test]
fn a_forged_record_under_a_covered_name_is_a_violation() {
    let t = TempStore::new();
    let (_server, _client, replica, first, bytes) = merged(&t);
    let mut forged = records(&first, &bytes);
    let record = &mut forged[1];
    let at = record
        .windows(6)
        .position(|w| w == b"note 1")
        .expect("the text");
    record[at + 5] = b'9';
    replica
        .write(&first, segment::encode(Seq(1), &forged))
        .expect("forge");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("VIOLATION") && stdout.contains(&first) && stdout.contains("event 2"),
        "{stdout}"
    );
    // A covered name holding records of another range than its name says is named too.
    let shifted = records(&first, &bytes);
    replica
        .write(&first, segment::encode(Seq(2), &shifted))
        .expect("shift");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains(&first), "{stdout}");
}

/// Before: a pre-redaction copy of erased events under a covered name passed as INTACT with no
/// word, and its erased bytes stayed in the bucket. Now `verify --from` names it as holding
/// erased content (a restore still never takes it), and the next shipment removes it.
#[test]
fn erased_content_under_a_covered_name_is_named_and_removed_by_the_next_shipment() {
    let t = TempStore::new();
    let (server, client, replica) = setup(&t, 2);
    let secret = "QXCOVEREDSECRETQX";
    let out = server.handle(
        &json!({"command": "create", "path": "/memories/s.md", "file_text": format!("{secret}\n")}),
    );
    assert_eq!(out["is_error"], serde_json::Value::Null, "{out}");
    write(&server, 1, 2);
    ship(&client, &replica);
    let first = format!("segments/{}", segment::name(Seq(1), Seq(3)));
    let old = replica
        .read(&first)
        .expect("read")
        .expect("the first segment");
    write(&server, 3, 3);
    ship(&client, &replica);
    let selection = Selection {
        texts: vec![secret.to_string()],
        ..Selection::default()
    };
    client.redact("asked", &selection).expect("redact");
    ship(&client, &replica);
    let holds = |replica: &Replica| {
        names(replica).iter().any(|name| {
            replica
                .read(name)
                .expect("read")
                .is_some_and(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()))
        })
    };
    assert!(!holds(&replica), "the redaction reached the replica");
    assert_eq!(verify_from(&replica).0, Some(0));
    // The bucket's holder puts the pre-redaction segment back under its covered name.
    replica.write(&first, old).expect("put back");
    assert!(holds(&replica));
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("WARNING")
            && stdout.contains(&first)
            && stdout.contains("erased content of event(s) 1"),
        "{stdout}"
    );
    let db = t.dir.path().join("restored");
    let restored = replica.restore(&db, None).expect("restore");
    assert!(
        restored.notes().iter().any(|n| n.contains(&first)),
        "{:?}",
        restored.notes()
    );
    assert!(
        !crate::support::dir_holds(&db, secret.as_bytes()),
        "the restored store's files hold the erased text"
    );
    write(&server, 6, 1);
    ship(&client, &replica);
    assert!(!holds(&replica), "the next shipment left the erased text");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains(&first), "{stdout}");
}

/// Before: an object beside the replica's own (neither a segment, a checkpoint, `head` nor
/// `rewrites`) was never listed, so `verify --from` passed whatever lay there. Now each is a
/// violation naming it.
#[test]
fn an_object_that_is_no_part_of_a_replica_is_a_violation() {
    let t = TempStore::new();
    let (_server, _client, replica, _, _) = merged(&t);
    assert_eq!(verify_from(&replica).0, Some(0));
    for stray in ["stray", "notes/kept.txt"] {
        replica.write(stray, b"anything".to_vec()).expect("stray");
        let (code, stdout) = verify_from(&replica);
        assert_eq!(code, Some(1), "{stray}: {stdout}");
        assert!(
            stdout.contains("VIOLATION") && stdout.contains(stray.split('/').next().unwrap()),
            "{stray}: {stdout}"
        );
        replica.remove(stray).expect("clean");
        if let Some(dir) = replica.url().strip_prefix("file://") {
            let _ = std::fs::remove_dir(std::path::Path::new(dir).join("notes"));
        }
    }
    assert_eq!(verify_from(&replica).0, Some(0));
}

/// Before: events the segments hold past the head checkpoint (a shipment cut after it sealed
/// its segment, before it moved the head) were never read by `verify --from`, so a forged
/// record there, or a forged checkpoint naming one, passed with no word. Now they are checked
/// against the chain and named in a note; a record there that breaks the chain, or a checkpoint
/// that gives one of them another hash, is a violation naming the object.
#[test]
fn events_past_the_head_checkpoint_are_checked_and_named() {
    let t = TempStore::new();
    let (server, client, replica, _, _) = merged(&t);
    write(&server, 6, 2);
    // The shipment's steps: its segment, its checkpoint, then the head, which fails as a kill
    // would.
    replica.failpoints().countdown(3);
    assert!(client.ship_to(&replica, &mut |_, _| {}).is_err(), "cut");
    let tail = format!("segments/{}", segment::name(Seq(7), Seq(8)));
    assert!(names(&replica).contains(&tail), "{:?}", names(&replica));
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("INTACT")
            && stdout.contains("hold events 7 to 8, past its head checkpoint at event 6"),
        "{stdout}"
    );
    // The checkpoint the cut shipment wrote names event 8, past the head: checked all the same.
    let kept = format!("checkpoints/{:020}", 8);
    let good = replica.read(&kept).expect("read").expect("the checkpoint");
    let text = String::from_utf8(good.clone()).expect("text");
    let mut lines: Vec<&str> = text.lines().collect();
    let zeros = "0".repeat(64);
    lines[2] = &zeros;
    replica
        .write(&kept, (lines.join("\n") + "\n").into_bytes())
        .expect("forge");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(&kept) && stdout.contains("gives event 8 the hash"),
        "{stdout}"
    );
    replica.write(&kept, good).expect("put back");
    // A record past the head forged (its segment's digest made anew).
    let honest = replica.read(&tail).expect("read").expect("the tail");
    let mut forged = records(&tail, &honest);
    let record = &mut forged[1];
    let at = record
        .windows(6)
        .position(|w| w == b"note 7")
        .expect("the text");
    record[at + 5] = b'9';
    replica
        .write(&tail, segment::encode(Seq(7), &forged))
        .expect("forge");
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("VIOLATION") && stdout.contains(&tail) && stdout.contains("event 8"),
        "{stdout}"
    );
    // Put back, the next shipment moves the head past them, and no note is left.
    replica.write(&tail, honest).expect("put back");
    ship(&client, &replica);
    let (code, stdout) = verify_from(&replica);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("WARNING"), "{stdout}");
}
