//! Read-only forensics: `verify`, `ls`, `cat`, `log`, `history`, `show`, `diff`, `trace`, `export`,
//! `acl list` and `token list` change no byte of the store, work on a store nobody may write,
//! and never repair a damaged store by reading it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{TempStore, checksums, have, is_root, mnemo_bin, run_mnemo, skip};

fn session(db: &Path, events: usize) {
    let lines: Vec<String> = (0..events)
        .map(|i| match i % 4 {
            0 => json!({"command": "create", "path": format!("/memories/f{i}.md"), "file_text": format!("line {i}\n")}),
            1 => json!({"command": "str_replace", "path": format!("/memories/f{}.md", i - 1), "old_str": "line", "new_str": "LINE"}),
            2 => json!({"command": "view", "path": "/memories"}),
            _ => json!({"command": "view", "path": "/memories/../x"}),
        }
        .to_string())
        .collect();
    let out = run_mnemo(
        &["tool", "--db", db.to_str().expect("utf-8")],
        &lines.join("\n"),
    );
    assert!(out.status.success(), "{out:?}");
}

/// The read commands, each with the exit code it must give on an intact store.
fn reads(db: &str, export_to: &str) -> Vec<Vec<String>> {
    [
        vec!["verify", "--db", db],
        vec!["log", "--db", db],
        vec!["ls", "--db", db],
        vec!["cat", "/memories/f0.md", "--db", db],
        vec!["history", "/memories/f0.md", "--db", db],
        vec!["show", "2", "--db", db],
        vec!["diff", "0", "4", "--db", db],
        vec!["trace", "1", "--db", db],
        vec!["export", export_to, "--db", db],
        vec!["acl", "list", "--db", db],
        vec!["token", "list", "--db", db],
    ]
    .into_iter()
    .map(|args| args.into_iter().map(str::to_string).collect())
    .collect()
}

fn run(wrap: &[&str], args: &[String]) -> Output {
    let (program, pre) = match wrap.split_first() {
        Some((p, rest)) => (*p, rest.to_vec()),
        None => (mnemo_bin(), Vec::new()),
    };
    let mut cmd = Command::new(program);
    cmd.args(pre);
    if !wrap.is_empty() {
        cmd.arg(mnemo_bin());
    }
    cmd.args(args).output().expect("run mnemo")
}

#[test]
fn read_commands_change_no_byte_of_the_store() {
    let s = TempStore::new();
    session(&s.path(), 40);
    let before = checksums(&s.path());
    let out_dir = s.dir.path().join("exported");
    let db = s.path();
    for args in reads(
        db.to_str().expect("utf-8"),
        out_dir.to_str().expect("utf-8"),
    ) {
        let out = run(&[], &args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    assert_eq!(
        checksums(&s.path()),
        before,
        "a read command changed the store's files"
    );
}

/// A store no one may write: as an unprivileged user when this runs as root (permission bits
/// do not stop root), every read command works and the files stay as they were.
#[test]
fn read_commands_work_on_a_store_nobody_may_write() {
    let s = TempStore::new();
    session(&s.path(), 12);
    let before = checksums(&s.path());
    let wrap: Vec<&str> = if is_root() {
        if !have("setpriv") {
            return skip(
                "read commands on a store nobody may write",
                "running as root and setpriv is not available to drop to an unprivileged user",
            );
        }
        vec![
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        Vec::new()
    };
    // The store: readable by all, writable by none; its parent reachable.
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mode = |path: &Path, m: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).expect("chmod");
    };
    for path in before.keys() {
        mode(path, 0o444);
    }
    mode(&s.path().join("blobs"), 0o555);
    mode(&s.path(), 0o555);
    // The export goes where the reader may write.
    let exports = tempfile::tempdir().expect("tempdir");
    mode(exports.path(), 0o777);
    let out_dir = exports.path().join("exported");
    let db = s.path();
    // Writing is refused for this user: the check proves something.
    let write = run(
        &wrap,
        &[
            "tool".into(),
            "--db".into(),
            db.to_str().expect("utf-8").into(),
        ],
    );
    assert!(
        !write.status.success(),
        "a write to a read-only store: {write:?}"
    );
    for args in reads(
        db.to_str().expect("utf-8"),
        out_dir.to_str().expect("utf-8"),
    ) {
        let out = run(&wrap, &args);
        assert!(
            out.status.success(),
            "{args:?} on a read-only store: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    mode(&s.path(), 0o755);
    assert_eq!(checksums(&s.path()), before);
}

/// Before: one bit flipped in event 50 of 100 and `mnemo ls` let sled's recovery zero events
/// 51-100 in `db`, then showed the rolled-back tree. Now reads leave the file as it was, and
/// verify still names the damage after any number of them.
#[test]
fn a_damaged_store_is_never_repaired_by_a_read() {
    let s = TempStore::new();
    session(&s.path(), 100);
    let db_file = s.path().join("db");
    let mut bytes = std::fs::read(&db_file).expect("read db");
    let marker = b"line 48\n";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("event 49's text is in db");
    bytes[at] ^= 0x01;
    std::fs::write(&db_file, &bytes).expect("write db");
    let before = checksums(&s.path());
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    for args in [
        vec!["ls", "--db", db],
        vec!["log", "--db", db],
        vec!["verify", "--db", db, "--json"],
    ] {
        let out = run_mnemo(&args, "");
        assert!(
            !out.status.success() || args[0] == "verify",
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(
        checksums(&s.path()),
        before,
        "a read changed the damaged store"
    );
    let out = run_mnemo(&["verify", "--db", db, "--json"], "");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_ne!(report["status"], "intact", "{report}");
    assert_eq!(out.status.code(), Some(1), "{report}");
}

/// A temporary directory a read cannot copy the store into is a clear error that names
/// `TMPDIR`, never a hang, and the store is left as it was.
#[test]
fn a_read_without_a_usable_temporary_directory_says_to_set_tmpdir() {
    let s = TempStore::new();
    session(&s.path(), 4);
    let before = checksums(&s.path());
    let db = s.path();
    let out = Command::new(mnemo_bin())
        .args(["ls", "--db", db.to_str().expect("utf-8")])
        .env("TMPDIR", s.dir.path().join("no-such-directory"))
        .output()
        .expect("run mnemo");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("set TMPDIR to a writable directory"), "{err}");
    assert_eq!(checksums(&s.path()), before);
}

/// A read removes its copy when it ends, and the copies of reads killed before their cleanup
/// (SIGTERM, kill -9) go with the next read: a copy whose process is gone is removed, one of a
/// live process is left alone.
#[test]
fn copies_left_by_killed_reads_are_swept_and_a_read_leaves_none() {
    let s = TempStore::new();
    session(&s.path(), 4);
    let tmp = s.dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    // No process has this id (ids stay below 2^22 on Linux).
    let stale = tmp.join("mnemo-read-999999999-abc");
    std::fs::create_dir(&stale).expect("mkdir");
    std::fs::write(stale.join("db"), vec![0u8; 4096]).expect("write");
    // Process 1 is alive: its copy is not ours to remove.
    let live = tmp.join("mnemo-read-1-abc");
    std::fs::create_dir(&live).expect("mkdir");
    let db = s.path();
    let out = Command::new(mnemo_bin())
        .args(["ls", "--db", db.to_str().expect("utf-8")])
        .env("TMPDIR", &tmp)
        .output()
        .expect("run mnemo");
    assert!(out.status.success(), "{out:?}");
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["mnemo-read-1-abc".to_string()], "{left:?}");
}

/// A store whose log file `db` was removed is refused by name, by reads and writes alike, and
/// nothing starts a new empty `db` beside the snapshot and configuration left.
#[test]
fn a_store_without_its_log_file_is_refused_by_name_and_left_as_it_is() {
    let s = TempStore::new();
    session(&s.path(), 8);
    // Reopen once so sled writes a snapshot, then remove the log.
    drop(s.client());
    std::fs::remove_file(s.path().join("db")).expect("remove db");
    let before = checksums(&s.path());
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    for args in [
        vec!["verify", "--db", db],
        vec!["ls", "--db", db],
        vec!["tool", "--db", db],
    ] {
        let out = run_mnemo(&args, r#"{"command":"view","path":"/memories"}"#);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("its log file `db` is missing"),
            "{args:?}: {err}"
        );
    }
    assert!(!s.path().join("db").exists(), "a new empty log was started");
    assert_eq!(checksums(&s.path()), before);
}
