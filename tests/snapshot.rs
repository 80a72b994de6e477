//! Trees of the past kept in memory (`src/store/snapshot.rs`): the tree after any seq, replayed from
//! the nearest kept tree, is the tree a replay from event 1 gives; a kept tree whose event the
//! log no longer holds as it was is never used.

use mnemo::Seq;
use mnemo::testing::history::state_at;
use mnemo::testing::inspect::show;
use mnemo::testing::replay::Replay;
use mnemo::testing::snapshot::FIRST_SPACING;
use mnemo::testing::{MemKv, Store};
use serde_json::json;

use crate::support::{TempStore, open_store};

/// A session of `events` calls of every kind over a few directories, chosen by a fixed
/// generator: creates, edits, inserts, views, renames of files and directories, deletes, and
/// calls that fail.
fn session(store: &TempStore, events: u64) {
    let server = store.server();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    for i in 0..events {
        let dir = format!("/memories/d{}", next(4));
        let file = format!("{dir}/f{}.md", next(12));
        let call = match next(8) {
            0 | 1 => {
                json!({"command": "create", "path": file, "file_text": format!("note {i}\nstatus: open\n")})
            }
            2 => {
                json!({"command": "str_replace", "path": file, "old_str": "status: open", "new_str": format!("status: done {i}")})
            }
            3 => {
                json!({"command": "insert", "path": file, "insert_line": 1, "insert_text": format!("line {i}\n")})
            }
            4 => {
                json!({"command": "view", "path": if next(2) == 0 { "/memories".to_string() } else { file }})
            }
            5 => {
                json!({"command": "rename", "old_path": file, "new_path": format!("/memories/d{}/f{}.md", next(4), next(12))})
            }
            6 if next(10) == 0 => {
                json!({"command": "rename", "old_path": dir, "new_path": format!("/memories/d{}", next(6))})
            }
            _ => json!({"command": "delete", "path": file}),
        };
        server.handle(&call);
    }
}

/// The tree after `at` replayed from event 1, nothing kept.
fn from_event_one(store: &Store, at: Seq) -> MemKv {
    let mut replay = Replay::in_memory();
    replay.run_to(store, at).expect("replay");
    replay.into_tree().into_inner()
}

fn kept_tree(store: &Store, at: Seq) -> MemKv {
    state_at(store, at).expect("the tree at a seq").into_inner()
}

#[test]
fn the_past_from_a_kept_tree_is_the_past_from_event_one() {
    let events = 2 * FIRST_SPACING + FIRST_SPACING / 2;
    let temp = TempStore::new();
    session(&temp, events);
    let store = open_store(&temp.path());
    assert_eq!(store.head().expect("head").seq, Seq(events));
    let before = store.snapshots().held().0;
    assert_eq!(before, 0, "nothing is kept before the past is read");
    // Far first (every tree on the way is kept), then back and forth around the kept ones.
    let spacing = FIRST_SPACING;
    let seqs = [
        events,
        spacing - 1,
        spacing,
        spacing + 1,
        2 * spacing + 17,
        0,
        1,
        2 * spacing,
        spacing + spacing / 2,
        events - 1,
    ];
    for at in seqs {
        assert_eq!(
            kept_tree(&store, Seq(at)).map,
            from_event_one(&store, Seq(at)).map,
            "the tree after seq {at}"
        );
    }
    assert_eq!(
        store.snapshots().held().0,
        2,
        "a tree kept at {spacing} and {}",
        2 * spacing
    );
    // `show` re-derives each answer from a kept tree, and the log proves it.
    for at in [spacing, spacing + 1, 2 * spacing + 3, events] {
        let shown = show(&store, Seq(at)).expect("show");
        assert!(shown.verified, "event {at}: {}", shown.answer);
    }
}

#[test]
fn a_kept_tree_the_log_no_longer_matches_is_dropped() {
    let events = FIRST_SPACING + 40;
    let temp = TempStore::new();
    session(&temp, events);
    let store = open_store(&temp.path());
    kept_tree(&store, Seq(events));
    assert_eq!(store.snapshots().held().0, 1);
    // The event the tree was taken after, rewritten in place (another time, so another hash).
    let (log, _, _) = store.raw_trees();
    let at = Seq(FIRST_SPACING);
    let record = log.get(at.0.to_be_bytes()).expect("read").expect("record");
    let mut event = mnemo::Event::decode(&record).expect("decode");
    event.header.time_ms += 1;
    log.insert(at.0.to_be_bytes(), event.to_frame().encode())
        .expect("rewrite");
    let tree = kept_tree(&store, Seq(events));
    assert_eq!(
        store.snapshots().held().0,
        1,
        "dropped, and kept again from the log as it is"
    );
    assert_eq!(tree.map, from_event_one(&store, Seq(events)).map);
    let (seq, kept) = store.snapshots().nearest(Seq(events)).expect("a tree");
    assert_eq!(seq, at);
    assert_eq!(
        kept.hash,
        event.hash(),
        "the tree kept now is the rewritten log's"
    );
}

/// Pages asked at once of a store just opened: each gets the tree a replay from event 1 gives
/// (the long replays run one at a time, the later ones from the trees the first left).
#[test]
fn trees_asked_at_once_are_each_the_past_from_event_one() {
    let events = 3 * FIRST_SPACING + 100;
    let temp = TempStore::new();
    session(&temp, events);
    let store = open_store(&temp.path());
    let asked = [events, events - 1, 2 * FIRST_SPACING + 5, events];
    let trees: Vec<MemKv> = std::thread::scope(|scope| {
        let handles: Vec<_> = asked
            .iter()
            .map(|at| {
                let store = store.clone();
                scope.spawn(move || kept_tree(&store, Seq(*at)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reader"))
            .collect()
    });
    for (at, tree) in asked.iter().zip(trees) {
        assert_eq!(
            tree.map,
            from_event_one(&store, Seq(*at)).map,
            "after seq {at}"
        );
    }
    assert_eq!(store.snapshots().held().0, 3);
}
