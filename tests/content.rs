//! What calls cost on disk once a large file is in the store: a call writes only what it touches.
//! Reads write no file content, and an edit rewrites a bounded chunk of the file, not all of it.
//!
//! Sizes are measured after the store is closed and reopened (so sled has flushed and recovered
//! everything it keeps), by summing the sizes of every file under the store directory. Calls are
//! followed by [`flush_index`](mnemo::MnemoClient::flush_index), as when a host's calls come
//! further apart than the writer's idle time: every call's index changes reach sled on their own.

use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::json;

use crate::support::text::numbered_lines;
use crate::support::{TempStore, call, dir_size, open_client};

const MB: u64 = 1_000_000;

/// A file of about 15 MB: numbered lines of 32 bytes.
fn large_text() -> String {
    numbered_lines(15_000_000, "a big text file")
}

fn open(s: &TempStore) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::new(open_client(&s.path(), "test-agent", Durability::Flush))
}

/// Flushes and closes `server`, reopens the store and closes it again, and returns its size.
fn settle(s: &TempStore, server: MnemoMemoryToolServer) -> u64 {
    server.client().flush_index().expect("write the index");
    server
        .client()
        .store()
        .expect("a store open here")
        .sync(Durability::Fsync)
        .expect("sync");
    drop(server);
    let again = open(s);
    again
        .client()
        .store()
        .expect("a store open here")
        .sync(Durability::Fsync)
        .expect("sync");
    drop(again);
    dir_size(&s.path())
}

/// A store holding the large file at `/memories/big.txt` and a small one, settled.
fn store_with_large_file() -> (TempStore, String, u64) {
    let s = TempStore::new();
    let server = open(&s);
    let text = large_text();
    for (path, file_text) in [
        ("/memories/big.txt", text.as_str()),
        ("/memories/small.md", "- likes tea\n"),
    ] {
        let (answer, is_error) = call(
            &server,
            json!({"command": "create", "path": path, "file_text": file_text}),
        );
        assert!(!is_error, "{answer}");
    }
    // sled copies the node of its log that holds the large create event while the next few
    // events are appended beside it (a bounded cost of the create, not of later calls): let that
    // pass before measuring.
    for _ in 0..32 {
        call(
            &server,
            json!({"command": "view", "path": "/memories/small.md"}),
        );
        server.client().flush_index().expect("write the index");
    }
    let size = settle(&s, server);
    (s, text, size)
}

fn assert_intact(s: &TempStore) {
    let report = open(s).client().verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}

#[test]
fn six_hundred_views_of_the_directory_beside_a_large_file_grow_the_store_by_under_5_mb() {
    let (s, _, before) = store_with_large_file();
    let server = open(&s);
    for _ in 0..600 {
        let (listing, is_error) = call(&server, json!({"command": "view", "path": "/memories"}));
        assert!(!is_error && listing.contains("big.txt"), "{listing}");
        server.client().flush_index().expect("write the index");
    }
    let after = settle(&s, server);
    let growth = after.saturating_sub(before);
    eprintln!("content: 600 directory views grew the store by {growth} bytes (from {before})");
    assert!(
        growth < 5 * MB,
        "600 directory views grew the store from {before} to {after} bytes"
    );
    assert_intact(&s);
}

#[test]
fn views_of_a_small_file_and_of_the_large_file_itself_write_no_file_content() {
    let (s, text, before) = store_with_large_file();
    let server = open(&s);
    for _ in 0..300 {
        let (view, is_error) = call(
            &server,
            json!({"command": "view", "path": "/memories/small.md"}),
        );
        assert!(!is_error && view.contains("likes tea"), "{view}");
        server.client().flush_index().expect("write the index");
    }
    for _ in 0..12 {
        let (view, is_error) = call(
            &server,
            json!({"command": "view", "path": "/memories/big.txt", "view_range": [1, 2]}),
        );
        assert!(!is_error && view.contains("line          0"), "{view}");
        server.client().flush_index().expect("write the index");
    }
    let record = server
        .client()
        .record("/memories/big.txt")
        .expect("read")
        .expect("the large file");
    assert!(record.content == text, "the large file reads back whole");
    let after = settle(&s, server);
    let growth = after.saturating_sub(before);
    eprintln!("content: 312 file views grew the store by {growth} bytes (from {before})");
    assert!(
        growth < 5 * MB,
        "312 file views grew the store from {before} to {after} bytes"
    );
    assert_intact(&s);
}

#[test]
fn six_small_inserts_into_a_large_file_grow_the_store_by_well_under_its_size() {
    let (s, text, before) = store_with_large_file();
    let server = open(&s);
    let lines = text.len() / 32;
    for (i, line) in [0, lines / 5, lines / 2, lines / 2 + 1, lines - 1, lines]
        .into_iter()
        .enumerate()
    {
        let (answer, is_error) = call(
            &server,
            json!({"command": "insert", "path": "/memories/big.txt", "insert_line": line, "insert_text": format!("+{i}\n")}),
        );
        assert!(!is_error, "{answer}");
        server.client().flush_index().expect("write the index");
    }
    let holds_the_inserts = |content: &str| {
        content.len() == text.len() + 18
            && content.starts_with("+0\n")
            && (1..6).all(|i| content.contains(&format!("\n+{i}\n")))
    };
    let record = server
        .client()
        .record("/memories/big.txt")
        .expect("read")
        .expect("the large file");
    assert!(
        holds_the_inserts(&record.content),
        "the large file holds the six inserts"
    );
    let after = settle(&s, server);
    let growth = after.saturating_sub(before);
    eprintln!("content: six 3-byte inserts grew the store by {growth} bytes (from {before})");
    assert!(
        growth < 5 * MB,
        "six 3-byte inserts into a 15 MB file grew the store from {before} to {after} bytes"
    );
    assert_intact(&s);
    let record = open(&s)
        .client()
        .record("/memories/big.txt")
        .expect("read")
        .expect("the large file");
    assert!(
        holds_the_inserts(&record.content),
        "the inserts survive a reopen"
    );
}

#[test]
fn an_index_of_layout_2_is_rebuilt_on_open_with_content_in_chunks() {
    let s = TempStore::new();
    let text = "x".repeat(100_000);
    {
        let server = open(&s);
        call(
            &server,
            json!({"command": "create", "path": "/memories/a.md", "file_text": text}),
        );
        server.client().flush_index().expect("write the index");
        // What an index of layout 2 says of itself (its content was whole under `f`).
        let (_, _, index) = server
            .client()
            .store()
            .expect("a store open here")
            .raw_trees();
        index.insert(b"L", &[2u8]).expect("set the layout");
        index.flush().expect("flush");
    }
    {
        let store = mnemo::testing::Store::open_existing(&s.path()).expect("open");
        assert_eq!(store.index().layout().expect("layout"), 2);
        let report = mnemo::testing::verify_store(&store).expect("verify");
        assert!(
            report.violations[0].detail.contains("older Mnemo"),
            "{:?}",
            report.violations
        );
    }
    let server = open(&s);
    let store = server.client().store().expect("a store open here").clone();
    assert_eq!(
        store.index().layout().expect("layout"),
        mnemo::testing::INDEX_LAYOUT
    );
    assert_eq!(mnemo::testing::INDEX_LAYOUT, 5);
    let record = server
        .client()
        .record("/memories/a.md")
        .expect("read")
        .expect("the file");
    assert!(record.content == text);
    assert!(
        store.raw_content_tree().len() >= 100_000 / (16 * 1024),
        "the content is in chunks in the content tree"
    );
    let (_, _, index) = store.raw_trees();
    // Small values only: a version journal record names a path and an agent, never content.
    assert!(
        index.iter().all(|item| {
            let (key, value) = item.expect("entry");
            value.len() <= if key[0] == b'v' { 256 } else { 64 }
        }),
        "the index tree holds only small values"
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}

#[test]
fn a_content_chunk_stored_in_the_wrong_tree_is_named_by_verify() {
    let s = TempStore::new();
    {
        let server = open(&s);
        call(
            &server,
            json!({"command": "create", "path": "/memories/a.md", "file_text": "tea\n"}),
        );
        server.client().flush_index().expect("write the index");
        let store = server.client().store().expect("a store open here");
        let content = store.raw_content_tree();
        let (key, value) = content.pop_min().expect("pop").expect("a chunk");
        let (_, _, index) = store.raw_trees();
        index.insert(key, value).expect("misplace the chunk");
        index.flush().expect("flush");
        content.flush().expect("flush");
    }
    let store = mnemo::testing::Store::open_existing(&s.path()).expect("open");
    let report = mnemo::testing::verify_store(&store).expect("verify");
    assert_eq!(
        report.violations.first().map(|v| v.kind),
        Some(mnemo::ViolationKind::Index),
        "{:?}",
        report.violations
    );
    assert!(
        report.violations[0].detail.contains("chunk 0 of file node"),
        "{:?}",
        report.violations
    );
}
