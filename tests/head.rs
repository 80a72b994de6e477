//! The recorded head (`mnemo-head`) covers reads, rejected calls and a clean close, not only
//! durable writes: a log cut or damaged in the tail those calls left is never reported intact
//! with fewer events than the store recorded.

use std::path::Path;
use std::time::{Duration, Instant};

use mnemo::{Durability, MnemoMemoryToolServer, Seq};
use serde_json::{Value, json};

use crate::support::{TempStore, copy_dir, open_client, run_mnemo};

/// The calls of the session: five creates (each durable), then four views and a traversal
/// attempt (which no caller waits for): ten events.
fn session(server: &MnemoMemoryToolServer) {
    for i in 1..=5 {
        let out = server.handle(
            &json!({"command": "create", "path": format!("/memories/f{i}.md"),
            "file_text": format!("create-{i}-marker\n")}),
        );
        assert!(out.get("is_error").is_none(), "{out}");
    }
    for i in 1..=3 {
        server.handle(&json!({"command": "view", "path": format!("/memories/f{i}.md")}));
    }
    // A view whose path names a marker found in no other record (the index keeps no trace of a
    // path that does not exist): where the reads' events lie in `db`.
    server.handle(&json!({"command": "view", "path": "/memories/reads-start-here"}));
    server.handle(&json!({"command": "view", "path": "/memories/../etc/passwd"}));
}

fn open(path: &Path, durability: Durability) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::builder(open_client(path, "agent", durability))
        .build()
        .expect("server")
}

#[test]
fn a_clean_close_records_the_head_after_reads_in_every_mode() {
    for mode in [Durability::Fsync, Durability::Flush, Durability::Buffered] {
        let s = TempStore::new();
        let server = open(&s.path(), mode);
        session(&server);
        drop(server);
        let head = mnemo::testing::disk::read_head(&s.path()).expect("read the head");
        assert_eq!(head.map(|h| h.seq), Some(Seq(10)), "{mode:?}");
    }
}

#[test]
fn an_idle_writer_records_the_head_after_reads_without_closing() {
    let s = TempStore::new();
    let server = open(&s.path(), Durability::Fsync);
    session(&server);
    // No call waits for the reads: the background thread settles them once it has nothing left.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let head = mnemo::testing::disk::read_head(&s.path()).expect("read the head");
        if head.map(|h| h.seq) == Some(Seq(10)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the recorded head is still {head:?} with the writer idle"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
}

/// Where the reads' events start in `db` (a little before the marker view's path), and where the
/// file's data ends.
fn tail_of(db: &Path) -> (usize, usize) {
    let bytes = std::fs::read(db).expect("read db");
    let marker = b"reads-start-here";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the marker view is in db");
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    (at.saturating_sub(1024), end)
}

fn verify_json(db: &Path) -> Value {
    let out = run_mnemo(
        &["verify", "--db", db.to_str().expect("utf-8"), "--json"],
        "",
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(
        |_| json!({"status": "refused", "stderr": String::from_utf8_lossy(&out.stderr)}),
    )
}

/// Truncations and bit flips through the tail that the reads and the refused call left: verify
/// may refuse the store or find it damaged, but never call it intact with fewer than 10 events.
#[test]
fn a_cut_or_damaged_tail_of_reads_is_never_intact() {
    let s = TempStore::new();
    drop({
        let server = open(&s.path(), Durability::Fsync);
        session(&server);
        server
    });
    let db = s.path().join("db");
    let (start, end) = tail_of(&db);
    assert!(end > start, "the tail holds the reads' events");
    let work = tempfile::tempdir().expect("tempdir");
    let mut cases = 0;
    let mut silent = Vec::new();
    let step = ((end - start) / 40).max(1);
    for (i, at) in (start..end).step_by(step).enumerate() {
        for flip in [false, true] {
            let copy = work.path().join(format!("c{i}-{flip}"));
            copy_dir(&s.path(), &copy);
            let file = copy.join("db");
            let mut bytes = std::fs::read(&file).expect("read");
            if flip {
                bytes[at] ^= 0x10;
            } else {
                bytes.truncate(at);
            }
            std::fs::write(&file, bytes).expect("write");
            let how = if flip { "flip" } else { "cut" };
            // `log` first: a read command must not present a rolled-back log as current.
            let log = run_mnemo(
                &["log", "--db", copy.to_str().expect("utf-8"), "--json"],
                "",
            );
            let listed = String::from_utf8_lossy(&log.stdout).lines().count();
            if log.status.success() && listed != 10 {
                silent.push(format!(
                    "{how} at byte {at}: `mnemo log` listed {listed} events"
                ));
            }
            if !log.status.success() && log.status.code() != Some(2) {
                silent.push(format!(
                    "{how} at byte {at}: `mnemo log` exited {:?}",
                    log.status
                ));
            }
            let report = verify_json(&copy);
            cases += 1;
            if report["status"] == "intact" && report["events"] != json!(10) {
                silent.push(format!("{how} at byte {at}: {report}"));
            }
            std::fs::remove_dir_all(&copy).ok();
        }
    }
    assert!(cases >= 40, "{cases} cases");
    assert!(
        silent.is_empty(),
        "{} of {cases} damaged tails passed as intact with events missing:\n{}",
        silent.len(),
        silent.join("\n")
    );
}

/// Before: with `mnemo-head` deleted, `verify` said INTACT with no note, even after `db` was
/// rolled back from ten events to five. Now an intact report of a log whose head record is
/// missing says so loudly (a warning on stdout and stderr, and in `notes` of the JSON), and names
/// what proves the log whole: a kept checkpoint, which then catches the rollback.
#[test]
fn a_missing_head_record_is_never_silent() {
    let s = TempStore::new();
    let db = s.path();
    let five = s.dir.path().join("five");
    {
        let server = open(&db, Durability::Fsync);
        for i in 1..=5 {
            server.handle(&json!({"command": "create", "path": format!("/memories/a{i}.md"), "file_text": "x"}));
        }
    }
    copy_dir(&db, &five);
    {
        let server = open(&db, Durability::Fsync);
        for i in 6..=10 {
            server.handle(&json!({"command": "create", "path": format!("/memories/a{i}.md"), "file_text": "x"}));
        }
    }
    let whole = verify_json(&db);
    assert_eq!(whole["status"], "intact");
    assert_eq!(whole["notes"], json!([]), "{whole}");
    let checkpoint = whole["checkpoint"]
        .as_str()
        .expect("a checkpoint")
        .to_string();
    // The rollback: the store's files as they were at five events, its head record deleted.
    std::fs::remove_dir_all(&db).expect("remove");
    copy_dir(&five, &db);
    std::fs::remove_file(db.join(mnemo::testing::HEAD_FILE)).expect("delete the head record");
    let rolled = verify_json(&db);
    assert_eq!(rolled["events"], 5, "{rolled}");
    let notes = rolled["notes"].as_array().expect("notes");
    assert!(
        notes.len() == 1
            && notes[0]
                .as_str()
                .is_some_and(|n| n.contains("mnemo-head") && n.contains("--expect")),
        "{rolled}"
    );
    let db_arg = db.to_str().expect("utf-8");
    let out = run_mnemo(&["verify", "--db", db_arg], "");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("WARNING") && stdout.contains("mnemo-head"),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("WARNING"),
        "{out:?}"
    );
    let expected = run_mnemo(&["verify", "--db", db_arg, "--expect", &checkpoint], "");
    assert_eq!(
        expected.status.code(),
        Some(1),
        "the kept checkpoint catches the rollback: {expected:?}"
    );
}

/// A store opened and closed with no new event leaves its head record untouched, so the
/// record's modification time is the time of the store's last event (what a data server's
/// stores page shows as its last event); a new event moves it.
#[test]
fn an_open_and_close_with_no_new_event_leaves_the_head_record_alone() {
    let s = TempStore::new();
    let record = s.path().join(mnemo::testing::HEAD_FILE);
    let server = open(&s.path(), Durability::Fsync);
    session(&server);
    drop(server);
    let written = std::fs::metadata(&record)
        .expect("head record")
        .modified()
        .expect("mtime");
    let bytes = std::fs::read(&record).expect("read");
    std::thread::sleep(Duration::from_millis(50));
    for durability in [Durability::Fsync, Durability::Buffered] {
        drop(open(&s.path(), durability));
    }
    let after = std::fs::metadata(&record)
        .expect("head record")
        .modified()
        .expect("mtime");
    assert_eq!(after, written, "reopened and closed with nothing new");
    assert_eq!(std::fs::read(&record).expect("read"), bytes);
    let server = open(&s.path(), Durability::Fsync);
    server.handle(&json!({"command": "view", "path": "/memories"}));
    drop(server);
    let moved = std::fs::metadata(&record)
        .expect("head record")
        .modified()
        .expect("mtime");
    assert!(moved > written, "a new event moves it");
}
