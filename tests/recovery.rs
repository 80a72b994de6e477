//! Reopening: the chain continues, an interrupted index update is caught up from the log, and a
//! store that cannot be used says why.

use mnemo::event::Salt;
use mnemo::testing::{Store, verify_store};
use mnemo::tool::{Command, Limits, Semantics};
use mnemo::{Body, Event, Header, Outcome, Seq, ToolCall};
use mnemo::{Error, MnemoClient, MnemoMemoryToolServer, Profile};
use serde_json::json;

use crate::support::{TempStore, call, open_store, run_mnemo};

#[test]
fn reopening_continues_the_chain() {
    let s = TempStore::new();
    let first_head = {
        let server = s.server();
        for i in 0..3 {
            call(
                &server,
                json!({"command": "create", "path": format!("/memories/{i}"), "file_text": "x"}),
            );
        }
        server.client().head().expect("head")
    };
    assert_eq!(first_head.seq, Seq(3));
    let server = s.server();
    call(&server, json!({"command": "view", "path": "/memories/0"}));
    let event4 = server
        .client()
        .events(Seq(4))
        .expect("events")
        .next()
        .expect("event 4")
        .expect("decodes");
    assert_eq!(
        event4.prev_hash, first_head.hash,
        "event 4 links to the old head"
    );
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact() && report.events == 4, "{report:?}");
}

#[test]
fn a_commit_cut_short_by_a_crash_is_read_and_completed_on_open() {
    let s = TempStore::new();
    {
        let server = s.server();
        call(
            &server,
            json!({"command": "create", "path": "/memories/a.txt", "file_text": "a"}),
        );
    }
    // Simulate a crash after the events were appended but before the head that names them and
    // the index batch were written.
    {
        let store = open_store(&s.path());
        let head = store.head().expect("head");
        let mut prev = head.hash;
        let mut frames = Vec::new();
        for (i, command) in [
            Command::Create {
                path: "/memories/b.txt".into(),
                file_text: "b".into(),
            },
            Command::Rename {
                old_path: "/memories/a.txt".into(),
                new_path: "/memories/d/a.txt".into(),
            },
        ]
        .into_iter()
        .enumerate()
        {
            let text = match &command {
                Command::Create { .. } => "File created successfully at: /memories/b.txt",
                _ => "Successfully renamed /memories/a.txt to /memories/d/a.txt",
            };
            // Salted, as the writer salts every event.
            let salt = Salt([u8::try_from(i).expect("a few events") + 1; 32]);
            let event = Event {
                seq: Seq(head.seq.0 + 1 + i as u64),
                prev_hash: prev,
                header: Header {
                    time_ms: 0,
                    agent: "crashed".into(),
                    tool_use_id: None,
                    outcome: Outcome::under(Some(&salt), false, text),
                    semantics: Semantics::CURRENT,
                },
                body: Body::Tool(ToolCall {
                    root: "/memories".into(),
                    profile: Profile::Spec,
                    limits: Limits::default(),
                    command,
                }),
                salt: Some(salt),
            };
            let frame = event.to_frame();
            prev = frame.hash;
            frames.push(frame);
        }
        store.append(&frames).expect("append");
        let (_, meta, _) = store.raw_trees();
        let mut old_head = head.seq.0.to_be_bytes().to_vec();
        old_head.extend_from_slice(&head.hash.0);
        meta.insert("head", old_head).expect("put the head back");
        let report = verify_store(&store).expect("verify");
        assert!(
            report.is_intact(),
            "a lagging head or index is not a violation: {report:?}"
        );
        assert_eq!(
            (
                report.events,
                report.head.seq,
                report.meta_head.seq,
                report.index_applied
            ),
            (3, Seq(3), Seq(1), Seq(1))
        );
    }
    // The read-only commands show the log's end, not the lagging index.
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    let cat = run_mnemo(&["cat", "--db", db, "/memories/d/a.txt"], "");
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "a", "{cat:?}");
    let ls = run_mnemo(&["ls", "--db", db, "/memories"], "");
    let listed = String::from_utf8_lossy(&ls.stdout);
    assert!(
        listed.contains("/memories/b.txt") && !listed.contains("/memories/a.txt"),
        "{listed}"
    );
    let client = s.client();
    assert_eq!(
        client
            .record("/memories/d/a.txt")
            .expect("read")
            .map(|r| r.content),
        Some("a".to_string())
    );
    assert_eq!(client.record("/memories/a.txt").expect("read"), None);
    assert!(client.record("/memories/b.txt").expect("read").is_some());
    let report = client.verify().expect("verify");
    assert!(
        report.is_intact() && report.index_applied == Seq(3) && report.meta_head.seq == Seq(3),
        "{report:?}"
    );
}

/// A store opened again in the same process (by another spelling of its path too) is the same
/// store: one writer, one chain; a handle asking for another durability is told what to do.
#[test]
fn a_second_opener_in_this_process_shares_the_store() {
    let s = TempStore::new();
    let first = s.client();
    let other_spelling = s.dir.path().join(".").join("store.mnemo.db");
    let second = MnemoClient::builder(&other_spelling)
        .agent_id("second")
        .durability(mnemo::Durability::Buffered)
        .open()
        .expect("a second open in this process shares the store");
    let one = MnemoMemoryToolServer::new(first.clone());
    let two = MnemoMemoryToolServer::new(second.clone());
    call(
        &one,
        json!({"command": "create", "path": "/memories/a.txt", "file_text": "1"}),
    );
    call(
        &two,
        json!({"command": "create", "path": "/memories/b.txt", "file_text": "2"}),
    );
    assert!(first.record("/memories/b.txt").expect("read").is_some());
    assert!(second.record("/memories/a.txt").expect("read").is_some());
    assert_eq!(first.head().expect("head"), second.head().expect("head"));
    match MnemoClient::builder(s.path())
        .durability(mnemo::Durability::Fsync)
        .open()
    {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("durability buffered"), "{why}"),
        other => panic!("expected a durability mismatch, got {other:?}"),
    }
    drop((one, two, first, second));
    // Closed once every handle is gone: another process may open it now.
    let out = run_mnemo(&["verify", "--db", s.path().to_str().expect("utf-8")], "");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_store_from_a_newer_format_is_refused() {
    /// A format past this build's.
    const NEWER: u8 = mnemo::testing::event::FORMAT_VERSION + 1;
    let s = TempStore::new();
    drop(s.client());
    {
        let store = open_store(&s.path());
        let (_, meta, _) = store.raw_trees();
        meta.insert("format", &[NEWER]).expect("write");
        meta.flush().expect("flush");
    }
    match MnemoClient::open(s.path(), "a") {
        Err(e @ Error::NewerFormat { found: NEWER, .. }) => {
            assert!(e.to_string().contains("upgrade mnemo"), "{e}");
        }
        other => panic!("expected Error::NewerFormat, got {other:?}"),
    }
}

/// sled 0.34 picks the newest `snap.*` file when it opens, including a `snap.*.generating` file
/// that a kill left half-written, and then refuses to open at all (sled issues #1387, #1527). The
/// store removes such a file and opens from the previous snapshot and the log.
#[test]
fn a_snapshot_left_half_written_by_a_kill_does_not_stop_the_store_opening() {
    let s = TempStore::new();
    {
        let server = s.server();
        call(
            &server,
            json!({"command": "create", "path": "/memories/a.txt", "file_text": "a"}),
        );
    }
    let torn = s.path().join("snap.FFFFFFFFFFFFFFF0.generating");
    std::fs::write(&torn, b"").expect("write the torn snapshot");
    let client = s.client();
    assert_eq!(
        client
            .record("/memories/a.txt")
            .expect("read")
            .map(|r| r.content),
        Some("a".to_string())
    );
    assert!(!torn.exists(), "the torn snapshot was removed");
    assert!(client.verify().expect("verify").is_intact());
}

/// A new store is built beside its path and renamed into place: an empty directory made for it
/// becomes the store and keeps its permissions, the creator's own directory does not stay behind,
/// and a creator's directory a kill left beside the path neither stops the store being created
/// nor becomes it.
#[test]
fn a_new_store_is_created_whole_in_place_of_nothing_or_an_empty_directory() {
    use std::os::unix::fs::PermissionsExt;
    let s = TempStore::new();
    let path = s.path();
    std::fs::create_dir(&path).expect("an empty directory for the store");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let killed = s.dir.path().join(".store.mnemo.db.creating-1-00000000");
    std::fs::create_dir(&killed).expect("a killed creator's directory");
    std::fs::write(killed.join("conf"), b"half made").expect("its conf");
    {
        let store = Store::open(&path).expect("an empty directory becomes a store");
        let report = verify_store(&store).expect("verify");
        assert!(report.is_intact() && report.events == 0, "{report:?}");
    }
    let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "the store directory is its owner's alone"
    );
    assert!(path.join("db").is_file() && path.join("conf").is_file());
    let mut beside: Vec<String> = std::fs::read_dir(s.dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(
        beside,
        [".store.mnemo.db.creating-1-00000000", "store.mnemo.db"],
        "only the killed creator's directory is left beside the store, untouched"
    );
    assert_eq!(
        std::fs::read(killed.join("conf")).expect("read"),
        b"half made"
    );
    // Made whole, the store is no longer new: losing its log is damage, not a fresh start.
    std::fs::remove_file(path.join("db")).expect("rm db");
    match Store::open(&path) {
        Err(Error::Corrupt { .. } | Error::Storage(_)) => {}
        Err(other) => panic!("expected a damaged store error, got {other}"),
        Ok(_) => panic!("a store without its db was re-created empty"),
    }
}
