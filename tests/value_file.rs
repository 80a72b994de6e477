//! The value file: a large payload is kept once, outside sled's pages, and everything that reads
//! the log reads it whole; a value file changed, cut short, removed or replaced outside Mnemo is
//! named by the event whose payload it held, never read as something else; a redaction leaves no
//! erased byte in it; the index's chunks of a large file name the payload's bytes rather than
//! copy them, so the file is on disk about once; and a server that wrote a large file no longer
//! grows the store by copies of it while the next calls arrive.

use std::path::Path;

use mnemo::testing::event::VALUE_REF_FORMAT;
use mnemo::testing::{VALUE_MIN, VALUES_FILE};
use mnemo::{Durability, MnemoMemoryToolServer, Seq};
use serde_json::json;

use crate::support::text::numbered_lines as text_of;
use crate::support::{TempStore, call, dir_holds, dir_size, open_client, open_store, run_mnemo};

const MB: u64 = 1_000_000;

fn open(s: &TempStore) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::new(open_client(&s.path(), "test-agent", Durability::Fsync))
}

/// `path` read through `server` is `expected`, and the store it serves verifies intact.
fn reads_back_intact(server: &MnemoMemoryToolServer, path: &str, expected: &str, what: &str) {
    let record = server
        .client()
        .record(path)
        .expect("read")
        .expect("the file");
    assert!(record.content == expected, "{what}");
    assert!(server.client().verify().expect("verify").is_intact());
}

/// A store with a small file (event 1), a large one (event 2) and a view (event 3).
fn store_with_large_create() -> (TempStore, String) {
    let s = TempStore::new();
    let server = open(&s);
    let large = text_of(VALUE_MIN * 3, "kept");
    for input in [
        json!({"command": "create", "path": "/memories/small.md", "file_text": "- tea\n"}),
        json!({"command": "create", "path": "/memories/large.md", "file_text": large}),
        json!({"command": "view", "path": "/memories"}),
    ] {
        let (answer, is_error) = call(&server, input);
        assert!(!is_error, "{answer}");
    }
    (s, large)
}

#[test]
fn a_large_payload_is_kept_once_in_the_value_file_and_read_back_whole() {
    let (s, large) = store_with_large_create();
    let store = open_store(&s.path());
    let (events, meta, _) = store.raw_trees();
    let stored = events.get(Seq(2).key()).expect("read").expect("event 2");
    assert_eq!(
        stored[0], VALUE_REF_FORMAT,
        "event 2 is stored as a reference"
    );
    assert!(
        stored.len() < 1024,
        "sled keeps {} bytes of it",
        stored.len()
    );
    let small = events.get(Seq(1).key()).expect("read").expect("event 1");
    assert_ne!(
        small[0], VALUE_REF_FORMAT,
        "a small payload stays in its record"
    );
    assert_eq!(
        meta.get(b"format").expect("read").expect("marker")[..],
        [VALUE_REF_FORMAT],
        "the marker is raised so a build without the value file refuses the store"
    );
    let values = std::fs::read(s.path().join(VALUES_FILE)).expect("the value file");
    let count = values
        .windows(64)
        .filter(|w| *w == &large.as_bytes()[..64])
        .count();
    assert_eq!(count, 1, "the payload is in the value file once");
    let whole = store.get(Seq(2)).expect("read").expect("event 2");
    assert!(whole.len() > large.len() && whole[0] != VALUE_REF_FORMAT);
    drop((events, meta, store));
    // Every reader reads it whole: the model's view, the CLI on the store no process holds, and
    // the verifier's replay.
    let server = open(&s);
    reads_back_intact(
        &server,
        "/memories/large.md",
        &large,
        "/memories/large.md reads back whole",
    );
    drop(server);
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let cat = run_mnemo(&["cat", "/memories/large.md", "--db", db], "");
    assert!(cat.status.success(), "{cat:?}");
    assert!(cat.stdout == large.as_bytes(), "cat prints the file whole");
    let verify = run_mnemo(&["verify", "--db", db], "");
    assert!(verify.status.success(), "{verify:?}");
}

/// What `verify` and a read say of the store at `path` once its value file was tampered with.
fn named_by_event_2(path: &Path, tamper: &str) {
    let server = MnemoMemoryToolServer::new(open_client(path, "test-agent", Durability::Fsync));
    let report = server.client().verify().expect("verify runs");
    assert!(!report.is_intact(), "{tamper}: verify said intact");
    let first = &report.violations[0];
    assert_eq!(first.seq, Seq(2), "{tamper}: {:?}", report.violations);
    assert_eq!(
        first.kind,
        mnemo::ViolationKind::PayloadHash,
        "{tamper}: {first:?}"
    );
    assert!(
        first.detail.contains("event 2") && first.detail.contains("value file"),
        "{tamper}: {}",
        first.detail
    );
    drop(server);
    let db = path.to_str().expect("utf-8");
    let verify = run_mnemo(&["verify", "--db", db], "");
    assert!(!verify.status.success(), "{tamper}: `mnemo verify` passed");
    let said = String::from_utf8_lossy(&verify.stdout).to_string()
        + &String::from_utf8_lossy(&verify.stderr);
    assert!(said.contains("event 2"), "{tamper}: {said}");
    // The store's own file is named, not the private copy a read took of it.
    let own = path.join(VALUES_FILE);
    assert!(said.contains(&*own.to_string_lossy()), "{tamper}: {said}");
}

/// Damages the file at `path` by flipping one bit of its middle byte.
fn flip_a_middle_byte(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(path, bytes).expect("write");
}

/// The `tool_result` lines a `mnemo tool` session printed.
fn result_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a result line"))
        .collect()
}

/// A change of the value file by hand.
type Tamper = fn(&Path);

/// The ways a value file is damaged outside Mnemo: a byte flipped, cut short, emptied, removed.
fn value_file_tampers() -> [(&'static str, Tamper); 4] {
    [
        ("a flipped byte", flip_a_middle_byte),
        ("cut short", |values| {
            let len = std::fs::metadata(values).expect("meta").len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(values)
                .and_then(|f| f.set_len(len - 1))
                .expect("truncate");
        }),
        ("emptied", |values| {
            std::fs::write(values, b"").expect("empty");
        }),
        ("removed", |values| {
            std::fs::remove_file(values).expect("remove");
        }),
    ]
}

#[test]
fn a_value_file_flipped_cut_or_removed_is_named_by_the_event_whose_payload_it_held() {
    for (tamper, apply) in value_file_tampers() {
        let (s, large) = store_with_large_create();
        apply(&s.path().join(VALUES_FILE));
        named_by_event_2(&s.path(), tamper);
        // A read of the file refuses rather than showing other bytes.
        let server = open(&s);
        match server.client().record("/memories/large.md") {
            Ok(Some(record)) => assert!(record.content == large, "{tamper}: read other bytes"),
            Ok(None) => panic!("{tamper}: the file is gone"),
            Err(e) => assert!(e.to_string().contains("value file"), "{tamper}: {e}"),
        }
    }
}

#[test]
fn a_link_or_a_pipe_in_place_of_the_value_file_is_refused_before_anything_is_read() {
    let (s, _) = store_with_large_create();
    let values = s.path().join(VALUES_FILE);
    std::fs::remove_file(&values).expect("remove");
    std::os::unix::fs::symlink("/dev/zero", &values).expect("link");
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    for args in [
        vec!["verify", "--db", db],
        vec!["cat", "/memories/large.md", "--db", db],
    ] {
        let out = run_mnemo(&args, "");
        let said = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("values") && said.contains("link"),
            "{args:?}: {said}"
        );
    }
    std::fs::remove_file(&values).expect("remove");
    let made = std::process::Command::new("mkfifo")
        .arg(&values)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let out = run_mnemo(&["cat", "/memories/large.md", "--db", db], "");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("FIFO"), "{said}");
}

#[test]
fn a_redaction_leaves_no_erased_byte_in_the_value_file() {
    let (s, large) = store_with_large_create();
    let secret = "the launch code is 0451";
    let kept = text_of(VALUE_MIN * 2, "other");
    let server = open(&s);
    for input in [
        json!({"command": "str_replace", "path": "/memories/large.md", "old_str": "kept line          7\n", "new_str": format!("{secret}\n")}),
        json!({"command": "create", "path": "/memories/other.md", "file_text": kept}),
        json!({"command": "delete", "path": "/memories/large.md"}),
    ] {
        let (answer, is_error) = call(&server, input);
        assert!(!is_error, "{answer}");
    }
    drop(server);
    assert!(dir_holds(&s.path(), secret.as_bytes()));
    let selection = mnemo::Selection {
        texts: vec![secret.into(), "kept line          9".into()],
        ..Default::default()
    };
    let client = open_client(&s.path(), "operator", Durability::Fsync);
    client
        .redact("a leaked secret", &selection)
        .expect("redact");
    drop(client);
    assert!(
        !dir_holds(&s.path(), secret.as_bytes()),
        "the secret is gone"
    );
    assert!(
        !dir_holds(&s.path(), &large.as_bytes()[..200]),
        "the large create's payload is gone from the value file"
    );
    let server = open(&s);
    reads_back_intact(
        &server,
        "/memories/other.md",
        &kept,
        "a large payload not erased reads back",
    );
}

/// A store the server `server` writes a file of `first` bytes into (and a small one beside it),
/// then answers 300 views of `/memories`: the store's size after the writes, after the views,
/// and once reopened in a new process's way (closed, opened, closed).
fn views_after_writing(first: usize) -> (u64, u64, u64) {
    let s = TempStore::new();
    let server = MnemoMemoryToolServer::new(open_client(&s.path(), "agent", Durability::Flush));
    for (path, text) in [
        ("/memories/big.txt", text_of(first, "big")),
        ("/memories/small.md", "- tea\n".to_string()),
    ] {
        let (answer, is_error) = call(
            &server,
            json!({"command": "create", "path": path, "file_text": text}),
        );
        assert!(!is_error, "{answer}");
    }
    let settled = |server: &MnemoMemoryToolServer| {
        server.client().flush_index().expect("write the index");
        let store = server.client().store().expect("a store open here");
        store.sync(Durability::Fsync).expect("sync");
        dir_size(&s.path())
    };
    let after_write = settled(&server);
    for _ in 0..300 {
        let (listing, is_error) = call(&server, json!({"command": "view", "path": "/memories"}));
        assert!(!is_error && listing.contains("big.txt"), "{listing}");
        server.client().flush_index().expect("write the index");
    }
    let after_views = settled(&server);
    drop(server);
    let again = MnemoMemoryToolServer::new(open_client(&s.path(), "agent", Durability::Flush));
    let (view, is_error) = call(
        &again,
        json!({"command": "view", "path": "/memories/big.txt", "view_range": [1, 1]}),
    );
    assert!(!is_error && view.contains("big line"), "{view}");
    let reopened = settled(&again);
    drop(again);
    assert!(open(&s).client().verify().expect("verify").is_intact());
    (after_write, after_views, reopened)
}

#[test]
fn a_15_mb_file_takes_under_one_and_a_half_times_its_size_and_300_views_add_under_2_mb() {
    // Before the value file: 53.8 MB for the file (the log's copy in a blob of sled's, the
    // index's as 38 MB of sled's pages), and 30 MB more over these views by the server that
    // wrote it, sled copying the large record with every node the next events joined.
    let size: u64 = 15_000_000;
    let (written, viewed, reopened) = views_after_writing(15_000_000);
    eprintln!(
        "value file: a 15 MB file: {written} bytes written, {viewed} after 300 views, {reopened} reopened"
    );
    let bound = size + size / 2 + MB;
    for (when, bytes) in [
        ("written", written),
        ("viewed", viewed),
        ("reopened", reopened),
    ] {
        assert!(bytes <= bound, "{when}: {bytes} bytes, over {bound}");
    }
    assert!(
        viewed.saturating_sub(written) < 2 * MB,
        "300 views grew the store from {written} to {viewed} bytes"
    );
}

/// The store `s` shipped to a new `file://` replica with `mnemo replicate --once`, then restored
/// from it with `mnemo restore`: the directories (kept while in use), the replica's URL and the
/// restored store's path.
#[cfg(feature = "replicate")]
fn shipped_and_restored(s: &TempStore) -> ([tempfile::TempDir; 2], String, String) {
    let replica = tempfile::tempdir().expect("replica directory");
    let url = format!("file://{}", replica.path().display());
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let shipped = run_mnemo(&["replicate", "--db", db, "--to", &url, "--once"], "");
    assert!(shipped.status.success(), "{shipped:?}");
    let restored = tempfile::tempdir().expect("restore directory");
    let to = restored.path().join("restored");
    let to = to.to_str().expect("utf-8").to_string();
    let made = run_mnemo(&["restore", "--from", &url, "--db", &to], "");
    assert!(made.status.success(), "{made:?}");
    ([replica, restored], url, to)
}

#[cfg(feature = "replicate")]
#[test]
fn a_replica_carries_the_value_files_payloads_and_a_restore_keeps_them_there_again() {
    let (s, large) = store_with_large_create();
    let (_dirs, url, to) = shipped_and_restored(&s);
    let to = to.as_str();
    let cat = run_mnemo(&["cat", "/memories/large.md", "--db", to], "");
    assert!(
        cat.status.success() && cat.stdout == large.as_bytes(),
        "{cat:?}"
    );
    let values = std::fs::metadata(Path::new(to).join(VALUES_FILE))
        .expect("the restored store's value file")
        .len();
    assert!(values >= large.len() as u64, "{values}");
    let verified = run_mnemo(&["verify", "--from", &url], "");
    assert!(verified.status.success(), "{verified:?}");
    // The restored index names the value file's bytes too: the file is on disk about once.
    let size = dir_size(Path::new(to));
    assert!(
        size < 2 * large.len() as u64 + MB,
        "the restored store takes {size} bytes for a file of {}",
        large.len()
    );
}

#[test]
fn an_index_chunk_that_names_the_value_file_wrongly_is_named_by_verify_and_refused_by_reads() {
    let (s, large) = store_with_large_create();
    {
        let server = open(&s);
        server.client().flush_index().expect("write the index");
    }
    let store = open_store(&s.path());
    let content = store.raw_content_tree();
    let references: Vec<_> = content
        .iter()
        .map(|item| item.expect("read"))
        .filter(|(_, v)| v.len() == 52 && matches!(v[7], 0x80 | 0x7F))
        .collect();
    assert!(
        references.len() >= 2,
        "the large file's chunks name the value file: {} of {}",
        references.len(),
        content.len()
    );
    // Point the first chunk at other bytes of the file (a hash that does not match them).
    let (key, value) = &references[0];
    let mut forged = value.to_vec();
    forged[8] ^= 1;
    content.insert(key, forged).expect("forge");
    content.flush().expect("flush");
    drop((content, store));
    forged_chunk_is_named(&s, "/memories/large.md", &large);
}

/// After one of the store's chunks was forged: `verify` reports the index differing, a read of
/// the file at `path` (which held `text`) refuses, naming the chunk, and so does the memory
/// tool's view of it, which fails that call alone: the next calls are answered.
fn forged_chunk_is_named(s: &TempStore, path: &str, text: &str) {
    let server = open(s);
    let report = server.client().verify().expect("verify runs");
    assert!(!report.is_intact(), "a forged chunk verified intact");
    let said = format!("{:?}", report.violations);
    assert!(said.contains("index"), "{said}");
    match server.client().record(path) {
        Ok(Some(record)) => panic!(
            "a read of the forged chunk answered ({} bytes, {} the text)",
            record.content.len(),
            if record.content == text { "as" } else { "not" }
        ),
        Ok(None) => panic!("the file is gone"),
        Err(e) => assert!(e.to_string().contains("of file"), "{e}"),
    }
    // Through the memory tool: a view of the damaged file fails, naming the damage, and only
    // that call: nothing was recorded for it, and the store takes and answers the next calls.
    let head = server.client().head().expect("head").seq;
    let (answer, is_error) = call(&server, json!({"command": "view", "path": path}));
    assert!(is_error, "a view of a damaged file answered: {answer}");
    assert!(
        answer.contains("of file") && !answer.contains("poisoned"),
        "{answer}"
    );
    assert_eq!(
        server.client().head().expect("head").seq,
        head,
        "the failed view was logged"
    );
    let (answer, is_error) = call(
        &server,
        json!({"command": "create", "path": "/memories/after.md", "file_text": "written after\n"}),
    );
    assert!(!is_error, "a write after the damaged read: {answer}");
    let (answer, is_error) = call(
        &server,
        json!({"command": "view", "path": "/memories/after.md"}),
    );
    assert!(!is_error && answer.contains("written after"), "{answer}");
}

#[test]
fn an_index_caught_up_after_a_failed_write_names_the_value_files_bytes_too() {
    use mnemo::testing::failpoint::Failpoint;
    let s = TempStore::new();
    let large = text_of(5_000_000, "late");
    {
        let server = open(&s);
        server
            .client()
            .store()
            .expect("a store open here")
            .failpoints()
            .arm(Failpoint::Index);
        // The log takes the create; its index batch fails, so the index lags the log, as after
        // a kill before the index was written.
        let created = server
            .handle(&json!({"command": "create", "path": "/memories/late.md", "file_text": large}));
        assert!(
            created.get("is_error").is_none()
                || created["content"]
                    .as_str()
                    .is_some_and(|t| t.contains("may or may not")),
            "{created}"
        );
        assert!(
            server.client().flush_index().is_err(),
            "the index write failed"
        );
    }
    // Reopening replays the create into the index, which names the payload's bytes.
    let server = open(&s);
    reads_back_intact(
        &server,
        "/memories/late.md",
        &large,
        "/memories/late.md reads back whole",
    );
    drop(server);
    let size = dir_size(&s.path());
    let bound = large.len() as u64 * 3 / 2 + MB;
    assert!(size <= bound, "{size} bytes for a 5 MB file, over {bound}");
}

/// A store with a file of `size` bytes that `edits` one-line `str_replace`s, spread evenly over
/// it, then changed: its size once settled, the text the model holds, and the store.
fn edited_all_over(size: usize, edits: usize) -> (u64, String, TempStore) {
    let s = TempStore::new();
    let server = MnemoMemoryToolServer::new(open_client(&s.path(), "agent", Durability::Flush));
    let mut text = text_of(size, "big");
    let (answer, is_error) = call(
        &server,
        json!({"command": "create", "path": "/memories/big.txt", "file_text": text}),
    );
    assert!(!is_error, "{answer}");
    let lines = text.lines().count();
    for i in 0..edits {
        let line = i * lines / edits;
        let old = format!("big line {line:>10}\n");
        let new = format!("big line {line:>10} edited by call {i}\n");
        let (answer, is_error) = call(
            &server,
            json!({"command": "str_replace", "path": "/memories/big.txt", "old_str": old, "new_str": new}),
        );
        assert!(!is_error, "{answer}");
        text = text.replacen(&old, &new, 1);
        if i % 10 == 0 {
            server.client().flush_index().expect("write the index");
        }
    }
    server.client().flush_index().expect("write the index");
    let store = server.client().store().expect("a store open here");
    store.sync(Durability::Fsync).expect("sync");
    drop(store);
    let size = dir_size(&s.path());
    drop(server);
    (size, text, s)
}

#[test]
fn a_large_file_edited_all_over_keeps_what_the_edits_left_where_the_create_put_it() {
    // Before: each chunk an edit touched was stored whole again in sled, so a 4 MB file edited
    // once in each of its chunks (451 edits) took 2.47 times its size. This one has about 250
    // chunks, each edited once.
    let size = 2_000_000;
    let (bytes, text, s) = edited_all_over(size, 250);
    eprintln!("value file: a 2 MB file after 250 spread edits: {bytes} bytes");
    let bound = (size + size / 2) as u64 + MB;
    assert!(bytes <= bound, "{bytes} bytes, over {bound}");
    let server = open(&s);
    reads_back_intact(
        &server,
        "/memories/big.txt",
        &text,
        "the edited file reads back as the model holds it",
    );
    drop(server);
    let out = run_mnemo(
        &[
            "cat",
            "--db",
            &s.path().to_string_lossy(),
            "/memories/big.txt",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == text.as_bytes(),
        "cat reads the edited file back"
    );
}

#[test]
fn an_edited_chunk_naming_the_value_file_wrongly_is_named_by_verify_and_refused_by_reads() {
    let (_, text, s) = edited_all_over(200_000, 20);
    let store = open_store(&s.path());
    let content = store.raw_content_tree();
    let pieces: Vec<_> = content
        .iter()
        .map(|item| item.expect("read"))
        .filter(|(_, v)| matches!(v[7], 0x40 | 0xBF))
        .collect();
    assert!(
        pieces.len() >= 10,
        "the edited chunks are stored as pieces: {} of {}",
        pieces.len(),
        content.len()
    );
    // The last byte is in the last piece: kept bytes' length, or the edit's own bytes.
    let (key, value) = &pieces[pieces.len() / 2];
    let mut forged = value.to_vec();
    *forged.last_mut().expect("bytes") ^= 1;
    content.insert(key, forged).expect("forge");
    content.flush().expect("flush");
    drop((content, store));
    forged_chunk_is_named(&s, "/memories/big.txt", &text);
}

#[test]
fn payloads_whose_records_were_never_written_are_cut_off_when_the_store_opens_for_writing() {
    use mnemo::testing::failpoint::Failpoint;
    let (s, large) = store_with_large_create();
    let values = s.path().join(VALUES_FILE);
    let before = std::fs::metadata(&values).expect("values").len();
    let orphan = text_of(VALUE_MIN * 4, "orphan");
    {
        let server = open(&s);
        // The payload is appended and made durable; writing its record fails, as a kill there
        // would leave it: bytes no record names.
        server
            .client()
            .store()
            .expect("a store open here")
            .failpoints()
            .arm(Failpoint::Event);
        let failed = server.handle(
            &json!({"command": "create", "path": "/memories/orphan.md", "file_text": orphan}),
        );
        assert_eq!(failed["is_error"], true, "{failed}");
    }
    let left = std::fs::metadata(&values).expect("values").len();
    assert!(
        left >= before + orphan.len() as u64,
        "the failed append left its payload: {left} bytes, {before} before"
    );
    // Read-only commands change no byte of the store, the value file included.
    let out = run_mnemo(&["verify", "--db", &s.path().to_string_lossy()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(std::fs::metadata(&values).expect("values").len(), left);
    // Opening for writing gives the space back, and what records name reads back whole.
    let server = open(&s);
    assert_eq!(std::fs::metadata(&values).expect("values").len(), before);
    let read = |path: &str| {
        server
            .client()
            .record(path)
            .expect("read")
            .map(|r| r.content)
    };
    assert!(read("/memories/large.md").is_some_and(|t| t == large));
    assert!(
        read("/memories/orphan.md").is_none(),
        "the failed create left no file"
    );
    // The next large write goes where the cut left the file's end.
    let next = text_of(VALUE_MIN * 2, "next");
    let (answer, is_error) = call(
        &server,
        json!({"command": "create", "path": "/memories/next.md", "file_text": next}),
    );
    assert!(!is_error, "{answer}");
    let after = std::fs::metadata(&values).expect("values").len();
    let grown = after - before;
    assert!(
        grown >= next.len() as u64 && grown < next.len() as u64 + 4096,
        "the next payload went at the cut: {grown} bytes more for a {}-byte text",
        next.len()
    );
    assert!(read("/memories/next.md").is_some_and(|t| t == next));
    assert!(server.client().verify().expect("verify").is_intact());
}

#[cfg(feature = "replicate")]
#[test]
fn a_store_restored_after_its_large_file_was_edited_all_over_keeps_it_about_once() {
    // A restore writes the whole index in one batch: each chunk is found in the create's payload
    // where the edits left it, not only when it still ends the payload.
    let size = 2_000_000;
    let (_, text, s) = edited_all_over(size, 250);
    let (_dirs, _, to) = shipped_and_restored(&s);
    let to = to.as_str();
    let cat = run_mnemo(&["cat", "/memories/big.txt", "--db", to], "");
    assert!(
        cat.status.success() && cat.stdout == text.as_bytes(),
        "cat of the restored file"
    );
    let bytes = dir_size(Path::new(to));
    eprintln!("value file: a 2 MB file edited 250 times, restored: {bytes} bytes");
    let bound = (size + size / 2) as u64 + MB;
    assert!(
        bytes <= bound,
        "the restored store takes {bytes} bytes, over {bound}"
    );
}

#[test]
fn a_value_file_cut_short_or_removed_before_the_store_opens_gets_no_payload_written_over_it() {
    // A large write is refused before it is answered, that call alone; smaller ones go on.
    for damage in ["cut short", "removed"] {
        let (s, _) = store_with_large_create();
        let values = s.path().join(VALUES_FILE);
        let len = std::fs::metadata(&values).expect("values").len();
        match damage {
            "cut short" => std::fs::OpenOptions::new()
                .write(true)
                .open(&values)
                .and_then(|f| f.set_len(len - 5000))
                .expect("cut"),
            _ => std::fs::remove_file(&values).expect("remove"),
        }
        let left = std::fs::metadata(&values).map_or(0, |m| m.len());
        let server = open(&s);
        let (answer, is_error) = call(
            &server,
            json!({"command": "create", "path": "/memories/new.md", "file_text": text_of(VALUE_MIN * 2, "new")}),
        );
        assert!(
            is_error,
            "{damage}: a payload was written after damaged bytes: {answer}"
        );
        assert_eq!(
            std::fs::metadata(&values).map_or(0, |m| m.len()),
            left,
            "{damage}: the value file was written"
        );
        // That call alone: the refusal came before it was answered, so the store goes on with
        // calls that write nothing there.
        for input in [
            json!({"command": "create", "path": "/memories/small2.md", "file_text": "- coffee\n"}),
            json!({"command": "view", "path": "/memories/small.md"}),
        ] {
            let (answer, is_error) = call(&server, input);
            assert!(!is_error, "{damage}: the store stopped: {answer}");
        }
        drop(server);
        let report = open(&s).client().verify().expect("verify runs");
        assert!(!report.is_intact(), "{damage}: verify found nothing");
    }
}

#[test]
fn a_value_file_replaced_or_removed_while_the_store_is_open_takes_no_payload_it_would_lose() {
    for how in ["a copy moved over it", "removed", "a link moved over it"] {
        let (s, large) = store_with_large_create();
        let values = s.path().join(VALUES_FILE);
        let server = open(&s);
        let next = text_of(VALUE_MIN * 2, "next");
        let (answer, is_error) = call(
            &server,
            json!({"command": "create", "path": "/memories/next.md", "file_text": next}),
        );
        assert!(!is_error, "{how}: {answer}");
        // The server holds the value file open; its name now goes to another file, or nowhere.
        let copy = s.path().join("values.copy");
        match how {
            "removed" => std::fs::remove_file(&values).expect("remove"),
            "a link moved over it" => {
                std::fs::rename(&values, &copy).expect("move");
                std::os::unix::fs::symlink(&copy, &values).expect("link");
            }
            _ => {
                std::fs::copy(&values, &copy).expect("copy");
                std::fs::rename(&copy, &values).expect("move over");
            }
        }
        let lost = text_of(VALUE_MIN * 2, "lost");
        let (answer, is_error) = call(
            &server,
            json!({"command": "create", "path": "/memories/lost.md", "file_text": lost}),
        );
        assert!(
            is_error && !answer.contains("created successfully"),
            "{how}: a payload written to the unnamed file was acknowledged: {answer}"
        );
        assert!(answer.contains("values"), "{how}: {answer}");
        // A link is named as one, not measured as a file cut short.
        if how == "a link moved over it" {
            assert!(answer.contains("symbolic link"), "{how}: {answer}");
            std::fs::remove_file(&values).expect("unlink");
            std::fs::rename(&copy, &values).expect("put back");
        }
        drop(server);
        if how == "removed" {
            continue;
        }
        // The copy holds every payload acknowledged: the store reopens intact without the
        // refused one.
        let server = open(&s);
        reads_back_intact(&server, "/memories/large.md", &large, "the first file");
        reads_back_intact(&server, "/memories/next.md", &next, "the second file");
        let (answer, is_error) = call(
            &server,
            json!({"command": "view", "path": "/memories/lost.md"}),
        );
        assert!(is_error, "{how}: the refused create is there: {answer}");
    }
}

/// A `mnemo tool` session whose reads meet a value file changed outside Mnemo, run in its own
/// process or through the server it starts: the damaged read's result says nothing was applied,
/// the other calls are answered, `mnemo ls` still lists the damaged file (a listing reads no
/// content) while `cat` names it by its path, the session exits 2 saying the store is damaged
/// and how to mend it, and the damaged file can still be deleted.
#[test]
fn a_session_whose_read_met_damage_is_told_nothing_was_applied_and_exits_2_saying_so() {
    let (s, _) = store_with_large_create();
    flip_a_middle_byte(&s.path().join(VALUES_FILE));
    let db = s.path().to_str().expect("utf-8").to_string();
    let lines = |after: &str| {
        [
            json!({"command": "view", "path": "/memories/large.md"}),
            json!({"command": "view", "path": "/memories/small.md"}),
            json!({"command": "create", "path": after, "file_text": "- later\n"}),
        ]
        .map(|line| line.to_string() + "\n")
        .concat()
    };
    let mut sessions = vec![(
        "in its own process",
        crate::support::mnemo_command(&["tool", "--db", &db], &[]),
    )];
    #[cfg(feature = "serve")]
    sessions.push((
        "through its server",
        crate::support::served_command(&["tool", "--db", &db], &[]),
    ));
    for (n, (how, command)) in sessions.into_iter().enumerate() {
        let input = lines(&format!("/memories/after-{n}.md"));
        let out = crate::support::run_command(command, input.as_bytes());
        let results = result_lines(&out);
        assert_eq!(results.len(), 3, "{how}: {out:?}");
        let damaged = results[0]["content"].as_str().expect("text");
        assert_eq!(results[0]["is_error"], true, "{how}: {damaged}");
        assert!(
            damaged.contains("Nothing was applied") && !damaged.contains("may or may not"),
            "{how}: {damaged}"
        );
        for result in &results[1..] {
            assert!(result.get("is_error").is_none(), "{how}: {result}");
        }
        assert_eq!(out.status.code(), Some(2), "{how}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("1 call(s)") && said.contains("damaged") && said.contains("restore"),
            "{how}: {said}"
        );
        #[cfg(feature = "serve")]
        crate::discovery::stop_server(&s.path());
        let ls = run_mnemo(&["ls", "--db", &db, "/memories"], "");
        let listed = String::from_utf8_lossy(&ls.stdout);
        assert!(
            ls.status.success() && listed.contains("/memories/large.md"),
            "{how}: {ls:?}"
        );
        let cat = run_mnemo(&["cat", "--db", &db, "/memories/large.md"], "");
        let said = String::from_utf8_lossy(&cat.stderr);
        assert_eq!(cat.status.code(), Some(2), "{how}: {cat:?}");
        assert!(said.contains("/memories/large.md"), "{how}: {said}");
    }
    // The damaged file can be deleted: a delete follows the chunks' links and reads none of
    // their bytes. The log still holds the damage, and `verify` still names it.
    let delete = json!({"command": "delete", "path": "/memories/large.md"}).to_string() + "\n";
    let out = run_mnemo(&["tool", "--db", &db], &delete);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Successfully deleted"),
        "{out:?}"
    );
    let ls = run_mnemo(&["ls", "--db", &db, "/memories"], "");
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("large.md"),
        "{ls:?}"
    );
    let verify = run_mnemo(&["verify", "--db", &db], "");
    assert_eq!(verify.status.code(), Some(1), "{verify:?}");
}

/// Under the setting `delete = erase`, a delete whose erasure fails (a redaction needs a sound
/// log, and one payload is damaged) is answered as the log recorded it, "Successfully deleted",
/// and its session says the erasure failed and exits 2: in its own process, through its server
/// (the local socket) and through a server named by URL (HTTP). Before, through a server, the
/// failure was said only on that server's stderr (nowhere, for a server a client started) and
/// the session exited 0.
#[test]
fn a_delete_whose_erasure_failed_is_said_to_its_session_through_its_server_too() {
    let (s, _) = store_with_large_create();
    let db = s.path().to_str().expect("utf-8").to_string();
    let set = run_mnemo(&["config", "set", "delete", "erase", "--db", &db], "");
    assert!(set.status.success(), "{set:?}");
    flip_a_middle_byte(&s.path().join(VALUES_FILE));
    let session = |how: &str, command: std::process::Command, path: &str| {
        let input = [
            json!({"command": "create", "path": path, "file_text": "- a secret\n"}),
            json!({"command": "delete", "path": path}),
        ]
        .map(|line| line.to_string() + "\n")
        .concat();
        let out = crate::support::run_command(command, input.as_bytes());
        let results = result_lines(&out);
        assert_eq!(results.len(), 2, "{how}: {out:?}");
        assert_eq!(
            results[1]["content"],
            format!("Successfully deleted {path}"),
            "{how}: the answer is the recorded one"
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("delete = erase could not erase") && said.contains("mnemo redact"),
            "{how}: {said}"
        );
        // The exit says what happened: answered, not erased; not that calls got error results.
        assert!(
            said.contains("1 delete(s) of this session were answered as recorded")
                && !said.contains("error result"),
            "{how}: {said}"
        );
        assert_eq!(out.status.code(), Some(2), "{how}: {out:?}");
    };
    session(
        "in its own process",
        crate::support::mnemo_command(&["tool", "--db", &db], &[]),
        "/memories/secret-0.md",
    );
    #[cfg(feature = "serve")]
    {
        session(
            "through its server",
            crate::support::served_command(&["tool", "--db", &db], &[]),
            "/memories/secret-1.md",
        );
        let file = crate::discovery::server_of(&s.path());
        let by_url = ["tool", "--connect", &file.url, "--token", &file.token];
        session(
            "through a server named by URL",
            crate::support::served_command(&by_url, &[]),
            "/memories/secret-2.md",
        );
        crate::discovery::stop_server(&s.path());
    }
}

/// An MCP session whose resource read met damaged stored bytes ends as one whose call did: exit
/// 2, in its own process and through its server; one whose reads met none exits 0.
#[cfg(feature = "serve")]
#[test]
fn an_mcp_session_whose_resource_read_met_damage_exits_2() {
    let (s, _) = store_with_large_create();
    let db = s.path().to_str().expect("utf-8").to_string();
    flip_a_middle_byte(&s.path().join(VALUES_FILE));
    let read = |path: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": {"uri": format!("memory://{path}")}})
        .to_string()
    };
    for (how, args) in [
        ("in its own process", vec!["--db", &db, "--no-start"]),
        ("through its server", vec!["--db", &db]),
    ] {
        let (replies, ended) = crate::discovery::mcp_session(&args, &read("/memories/small.md"));
        assert_eq!(replies[1]["result"]["contents"][0]["text"], "- tea\n");
        assert_eq!(ended.status.code(), Some(0), "{how}: {replies:?}");
        let (replies, ended) = crate::discovery::mcp_session(&args, &read("/memories/large.md"));
        assert!(replies[1].get("error").is_some(), "{how}: {replies:?}");
        assert_eq!(ended.status.code(), Some(2), "{how}: {replies:?}");
    }
    crate::discovery::stop_server(&s.path());
}

/// `mnemo log --json` of the store at `db`: its exit code, its lines, and what it said on stderr.
fn logged_json(db: &str) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let out = run_mnemo(&["log", "--db", db, "--json"], "");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A payload the value file lost (flipped, cut, emptied, removed) is one event the log can no
/// longer read whole, not a log that shows nothing: `log` lists every event, the damaged one by
/// its header (which the chain still proves) as `unreadable`, names it on stderr and exits 2;
/// the past before it is still shown; every read that needs its payload names it.
#[test]
fn a_lost_payload_is_listed_by_its_header_and_the_past_before_it_still_shows() {
    for (tamper, apply) in value_file_tampers() {
        let (s, _) = store_with_large_create();
        let db = s.path().to_str().expect("utf-8").to_string();
        let (code, before, _) = logged_json(&db);
        assert_eq!((code, before.len()), (Some(0), 3), "{tamper}: {before:?}");
        apply(&s.path().join(VALUES_FILE));

        let (code, after, said) = logged_json(&db);
        assert_eq!(code, Some(2), "{tamper}: {said}");
        assert_eq!(after.len(), 3, "{tamper}: {after:?}");
        assert_eq!(after[0], before[0], "{tamper}");
        assert_eq!(after[2], before[2], "{tamper}");
        // Event 2 by its header: every field as before but what its payload said.
        let mut header_only = before[1].clone();
        header_only["command"] = json!(mnemo::protocol::UNREADABLE_COMMAND);
        header_only["paths"] = json!([]);
        assert_eq!(after[1], header_only, "{tamper}");
        assert!(
            said.contains("event(s) 2 ") && said.contains("mnemo verify"),
            "{tamper}: {said}"
        );
        let lines = run_mnemo(&["log", "--db", &db], "");
        let listed = String::from_utf8_lossy(&lines.stdout);
        assert_eq!(lines.status.code(), Some(2), "{tamper}: {lines:?}");
        assert_eq!(listed.lines().count(), 3, "{tamper}: {listed}");
        assert!(listed.contains("unreadable"), "{tamper}: {listed}");
        // Filters its payload would answer cannot leave it out.
        let on_small = run_mnemo(
            &["log", "--db", &db, "--json", "--path", "/memories/small.md"],
            "",
        );
        let on_small = String::from_utf8_lossy(&on_small.stdout).lines().count();
        assert_eq!(on_small, 2, "{tamper}: event 1 and the unreadable event 2");

        // The past before it is read whole, and proven.
        let show = run_mnemo(&["show", "--db", &db, "1"], "");
        assert!(show.status.success(), "{tamper}: {show:?}");
        let ls = run_mnemo(&["ls", "--db", &db, "--at", "1", "/memories"], "");
        assert!(ls.status.success(), "{tamper}: {ls:?}");
        assert!(
            String::from_utf8_lossy(&ls.stdout).contains("/memories/small.md"),
            "{tamper}: {ls:?}"
        );
        let cat = run_mnemo(&["cat", "--db", &db, "--at", "1", "/memories/small.md"], "");
        assert_eq!(String::from_utf8_lossy(&cat.stdout), "- tea\n", "{tamper}");
        // Whatever needs its payload names it, and shows nothing.
        for args in [
            vec!["show", "--db", &db, "2"],
            vec!["show", "--db", &db, "3"],
            vec!["ls", "--db", &db, "--at", "2", "/memories"],
            vec!["history", "--db", &db, "/memories/small.md"],
        ] {
            let out = run_mnemo(&args, "");
            assert!(!out.status.success(), "{tamper}: {args:?} {out:?}");
            assert!(out.stdout.is_empty(), "{tamper}: {args:?} {out:?}");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(said.contains("event 2"), "{tamper}: {args:?} {said}");
        }
        // Through the server that holds the store, the same.
        #[cfg(feature = "serve")]
        {
            let mut holder = crate::discovery::tool(&s.path(), &[]);
            let viewed = holder.call(r#"{"command": "view", "path": "/memories/small.md"}"#);
            assert!(viewed.get("is_error").is_none(), "{tamper}: {viewed}");
            let server = crate::discovery::server_of(&s.path()).pid;
            let out = crate::discovery::mnemo(&["log", "--db", &db, "--json"], &[], b"");
            assert_eq!(
                crate::discovery::server_of(&s.path()).pid,
                server,
                "{tamper}: the same server answered"
            );
            drop(holder);
            crate::discovery::stop_server(&s.path());
            let listed: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|line| serde_json::from_str(line).expect("a JSON line"))
                .collect();
            assert_eq!(out.status.code(), Some(2), "{tamper}: {out:?}");
            // The session's view is event 4.
            assert_eq!(listed.len(), 4, "{tamper}: {listed:?}");
            assert_eq!(listed[..3], after[..], "{tamper}: through the server");
        }
        named_by_event_2(&s.path(), tamper);
    }
}

/// A lost payload excuses nothing else of its record: a header changed beside it still breaks
/// the chain there, no read shows anything, and `verify` names both.
#[test]
fn a_lost_payload_beside_a_changed_header_still_breaks_the_chain() {
    let (s, _) = store_with_large_create();
    let db = s.path().to_str().expect("utf-8").to_string();
    {
        let store = open_store(&s.path());
        let (events, _, _) = store.raw_trees();
        let key = 2u64.to_be_bytes();
        let mut stored = events.get(key).expect("read").expect("event 2").to_vec();
        assert_eq!(stored[0], VALUE_REF_FORMAT, "event 2 names the value file");
        // The stored form's reference (45 bytes), then the record's fixed fields (109): the
        // header's first byte, the low byte of its time.
        stored[45 + 109] ^= 1;
        events.insert(key, stored).expect("write");
        events.flush().expect("flush");
    }
    flip_a_middle_byte(&s.path().join(VALUES_FILE));
    for args in [vec!["log", "--db", &db], vec!["show", "--db", &db, "1"]] {
        let out = run_mnemo(&args, "");
        assert!(!out.status.success(), "{args:?} {out:?}");
        assert!(out.stdout.is_empty(), "{args:?} {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("event 2") && said.contains("hashes to"),
            "{args:?} {said}"
        );
    }
    // `verify` names the lost payload first, and the changed header beside it too.
    let out = run_mnemo(&["verify", "--db", &db, "--json"], "");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let kinds: Vec<(u64, &str)> = report["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| {
            (
                v["seq"].as_u64().unwrap_or(0),
                v["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(kinds, [(2, "payload-hash"), (2, "hash")], "{report}");
}

/// A store of five events whose events 2 and 4 are large creates (their payloads in the value
/// file), with a view of the files at 3 and 5.
fn store_with_two_large_creates() -> TempStore {
    let s = TempStore::new();
    let server = open(&s);
    for input in [
        json!({"command": "create", "path": "/memories/small.md", "file_text": "- tea\n"}),
        json!({"command": "create", "path": "/memories/one.md", "file_text": text_of(VALUE_MIN * 2, "one")}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/two.md", "file_text": text_of(VALUE_MIN * 2, "two")}),
        json!({"command": "view", "path": "/memories"}),
    ] {
        let (answer, is_error) = call(&server, input);
        assert!(!is_error, "{answer}");
    }
    s
}

/// Past a payload the value file lost, `verify` checks the chain alone and says how far it
/// links: every other lost payload is named, and so is the first record that breaks the chain.
#[test]
fn verify_names_every_lost_payload_and_the_first_break_past_the_first_loss() {
    let s = store_with_two_large_creates();
    let db = s.path().to_str().expect("utf-8").to_string();
    let values = s.path().join(VALUES_FILE);
    let mut bytes = std::fs::read(&values).expect("read");
    let half = bytes.len() / 2;
    bytes[half / 2] ^= 1;
    bytes[half + half / 2] ^= 1;
    std::fs::write(&values, &bytes).expect("write");
    let report = |what: &str| -> serde_json::Value {
        let out = run_mnemo(&["verify", "--db", &db, "--json"], "");
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        serde_json::from_slice(&out.stdout).expect("a JSON report")
    };
    // Each violation's seq and kind.
    let named = |report: &serde_json::Value| -> Vec<(u64, String)> {
        report["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .map(|v| {
                let kind = v["kind"].as_str().expect("kind");
                (v["seq"].as_u64().expect("seq"), kind.to_string())
            })
            .collect()
    };
    let found = report("two lost payloads");
    let violations = found["violations"].as_array().expect("violations");
    assert_eq!(
        named(&found),
        [(2, "payload-hash".into()), (4, "payload-hash".into())],
        "{found}"
    );
    let first = violations[0]["detail"].as_str().expect("detail");
    assert!(
        first.contains("link through event 5, the last the log holds")
            && first.contains("event 4 is lost too"),
        "{first}"
    );
    assert!(
        violations[1]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("event 4's payload") && d.contains("value file")),
        "{found}"
    );
    assert_eq!(
        found["events"], 1,
        "answers were re-derived through event 1 only"
    );

    // A header changed past the first loss breaks the chain there, and is named.
    {
        let store = open_store(&s.path());
        let (events, _, _) = store.raw_trees();
        let key = 3u64.to_be_bytes();
        let mut stored = events.get(key).expect("read").expect("event 3").to_vec();
        // The record's fixed fields (109 bytes), then the header: the low byte of its time.
        stored[109] ^= 1;
        events.insert(key, stored).expect("write");
        events.flush().expect("flush");
    }
    let found = report("a header changed at event 3");
    assert_eq!(
        named(&found),
        [(2, "payload-hash".into()), (3, "hash".into())],
        "{found}"
    );
    assert!(
        found["violations"][0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("link through event 2, and event 3 breaks the chain")),
        "{found}"
    );
}
