//! `mnemo export` and `mnemo import`: plain files in the SDK tool's layout, round-tripped byte for
//! byte, and imports recorded as ordinary logged calls.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::support::{TempStore, call, run_mnemo};

/// Every regular file under `dir`, by path relative to `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path.strip_prefix(base).expect("under base");
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn export_then_import_round_trips_a_tree_byte_for_byte() {
    let a = TempStore::new();
    {
        let server = a.server();
        for (path, text) in [
            ("/memories/notes.md", "line one\r\nline two\n"),
            ("/memories/deep/er/still.txt", "\ttabs\tand `ticks`"),
            ("/memories/empty", ""),
            ("/memories/ünïcödé/名前.txt", "héllo 👋"),
            ("/memories/.hidden", "kept too"),
        ] {
            let (out, err) = call(
                &server,
                json!({"command": "create", "path": path, "file_text": text}),
            );
            assert!(!err, "{out}");
        }
        call(
            &server,
            json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "one", "new_str": "1"}),
        );
    }
    let work = tempfile::tempdir().expect("tempdir");
    let first = work.path().join("first");
    let out = run_mnemo(
        &[
            "export",
            first.to_str().unwrap(),
            "--db",
            a.path().to_str().unwrap(),
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("exported 5 files"));
    let exported = files(&first);
    assert_eq!(exported["memories/notes.md"], b"line 1\r\nline two\n");
    assert_eq!(exported["memories/ünïcödé/名前.txt"], "héllo 👋".as_bytes());

    let b = TempStore::new();
    let out = run_mnemo(
        &[
            "import",
            first.to_str().unwrap(),
            "--db",
            b.path().to_str().unwrap(),
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("imported 5 files"));
    let second = work.path().join("second");
    let out = run_mnemo(
        &[
            "export",
            second.to_str().unwrap(),
            "--db",
            b.path().to_str().unwrap(),
        ],
        "",
    );
    assert!(out.status.success());
    assert_eq!(
        files(&second),
        exported,
        "export → import → export is the identity"
    );

    // The import is five logged create calls by agent "import", and the store verifies.
    let log = run_mnemo(
        &[
            "log",
            "--db",
            b.path().to_str().unwrap(),
            "--agent",
            "import",
        ],
        "",
    );
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 5);
    assert_eq!(
        run_mnemo(&["verify", "--db", b.path().to_str().unwrap()], "")
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn export_at_a_seq_shows_the_past_and_never_overwrites() {
    let s = TempStore::new();
    {
        let server = s.server();
        call(
            &server,
            json!({"command": "create", "path": "/memories/a", "file_text": "v1"}),
        );
        call(
            &server,
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "v1", "new_str": "v2"}),
        );
    }
    let work = tempfile::tempdir().expect("tempdir");
    let then = work.path().join("then");
    let db = s.path();
    let db = db.to_str().unwrap();
    assert!(
        run_mnemo(
            &["export", then.to_str().unwrap(), "--db", db, "--at", "1"],
            ""
        )
        .status
        .success()
    );
    assert_eq!(files(&then)["memories/a"], b"v1");
    let again = run_mnemo(&["export", then.to_str().unwrap(), "--db", db], "");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
}

#[test]
fn import_reports_what_it_could_not_take_and_takes_the_rest() {
    let work = tempfile::tempdir().expect("tempdir");
    let mem = work.path().join("memories");
    std::fs::create_dir_all(mem.join("sub")).expect("mkdir");
    std::fs::write(mem.join("ok.txt"), "fine").expect("write");
    std::fs::write(mem.join("sub/binary.bin"), [0xff, 0xfe, 0x00]).expect("write");
    std::fs::write(mem.join("exists.txt"), "new").expect("write");
    let s = TempStore::new();
    {
        let server = s.server();
        call(
            &server,
            json!({"command": "create", "path": "/memories/exists.txt", "file_text": "old"}),
        );
    }
    let out = run_mnemo(
        &[
            "import",
            work.path().to_str().unwrap(),
            "--db",
            s.path().to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "a partial import exits 1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("binary.bin: the content is not UTF-8 text"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Error: File /memories/exists.txt already exists"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("imported 1 file ("));
    let client = s.client();
    assert_eq!(
        client
            .record("/memories/ok.txt")
            .expect("read")
            .expect("imported")
            .content,
        "fine"
    );
    assert_eq!(
        client
            .record("/memories/exists.txt")
            .expect("read")
            .expect("kept")
            .content,
        "old"
    );
    let missing = run_mnemo(
        &[
            "import",
            "/nonexistent-dir",
            "--db",
            s.path().to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(missing.status.code(), Some(2));
}
