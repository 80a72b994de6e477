//! Deleting a directory is O(1): it goes to the trash, and later writes collect it, the same way
//! in the writer and in the verifier's replay. An index of the layout before the trash is rebuilt.

use mnemo::MnemoClient;
use mnemo::testing::{COLLECT_BUDGET, INDEX_LAYOUT, verify_store};
use serde_json::json;

use crate::support::{TempStore, call};

/// Every index key, in order.
fn index_keys(client: &MnemoClient) -> Vec<Vec<u8>> {
    client.flush_index().expect("write the index");
    let (_, _, index) = client.store().expect("a store open here").raw_trees();
    index
        .iter()
        .map(|item| item.expect("index entry").0.to_vec())
        .collect()
}

/// Keys naming nodes: children (`c`) and file contents (`f`).
fn node_keys(keys: &[Vec<u8>]) -> usize {
    keys.iter()
        .filter(|k| k.first().is_some_and(|b| *b == b'c' || *b == b'f'))
        .count()
}

#[test]
fn a_deleted_directory_is_unreachable_at_once_and_collected_by_later_writes() {
    let s = TempStore::new();
    let server = s.server();
    call(
        &server,
        json!({"command": "create", "path": "/memories/keep.md", "file_text": "kept"}),
    );
    let baseline = node_keys(&index_keys(server.client()));
    // 600 files in 6 subdirectories (two levels): 600 `f` keys and 606 `c` keys.
    for i in 0..600 {
        let path = format!("/memories/big/d{}/e{}/f{i}.txt", i % 3, i % 2);
        let (text, is_error) = call(
            &server,
            json!({"command": "create", "path": path, "file_text": "x"}),
        );
        assert!(!is_error, "{text}");
    }
    let full = node_keys(&index_keys(server.client()));
    let (text, is_error) = call(
        &server,
        json!({"command": "delete", "path": "/memories/big"}),
    );
    assert!(!is_error, "{text}");

    // Gone for every reader at once, though most entries are still in the trash.
    let (listing, _) = call(&server, json!({"command": "view", "path": "/memories"}));
    assert!(!listing.contains("big"), "{listing}");
    let (text, is_error) = call(
        &server,
        json!({"command": "view", "path": "/memories/big/d0/e0/f0.txt"}),
    );
    assert!(is_error, "{text}");
    assert_eq!(
        server
            .client()
            .records_by_tag("memorytool")
            .expect("records")
            .len(),
        1
    );
    server.client().flush_index().expect("write the index");
    let index = server.client().store().expect("a store open here").index();
    assert!(
        index.trash_len().expect("trash") > 0,
        "the directory is in the trash"
    );
    assert!(node_keys(&index_keys(server.client())) > full - 2 * COLLECT_BUDGET);

    // Each later write collects about COLLECT_BUDGET entries; reads collect nothing.
    let entries = full - baseline;
    let writes_needed = entries.div_ceil(COLLECT_BUDGET / 2) + 2;
    let mut writes = 0;
    while {
        server.client().flush_index().expect("write the index");
        server
            .client()
            .store()
            .expect("a store open here")
            .index()
            .trash_len()
            .expect("trash")
            > 0
    } {
        assert!(writes < writes_needed, "the trash is not shrinking");
        let path = format!("/memories/w{}.md", writes % 2);
        let command = if writes < 2 {
            json!({"command": "create", "path": path, "file_text": "w"})
        } else {
            json!({"command": "str_replace", "path": path, "old_str": "w", "new_str": "w"})
        };
        let (text, is_error) = call(&server, command);
        assert!(!is_error, "{text}");
        writes += 1;
    }
    // Nothing of the deleted tree is left: only keep.md and the two files written since.
    let (keys, extra) = (index_keys(server.client()), 4);
    assert_eq!(node_keys(&keys), baseline + extra, "{} writes", writes);
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}

#[test]
fn an_index_of_the_layout_before_the_trash_is_rebuilt_on_open() {
    let s = TempStore::new();
    {
        let server = s.server();
        for path in ["/memories/a.md", "/memories/d/b.md"] {
            call(
                &server,
                json!({"command": "create", "path": path, "file_text": "t"}),
            );
        }
        call(&server, json!({"command": "delete", "path": "/memories/d"}));
        // What an index written before the layout key existed looks like: no `L`.
        server.client().flush_index().expect("write the index");
        let (_, _, index) = server
            .client()
            .store()
            .expect("a store open here")
            .raw_trees();
        index.remove(b"L").expect("remove the layout key");
        index.flush().expect("flush");
    }
    {
        let store = mnemo::testing::Store::open_existing(&s.path()).expect("open");
        assert_eq!(store.index().layout().expect("layout"), 1);
        let report = verify_store(&store).expect("verify");
        assert!(
            !report.is_intact(),
            "an old layout is reported, not compared"
        );
        let why = &report.violations[0].detail;
        assert!(
            why.contains("older Mnemo") && why.contains("rebuild"),
            "{why}"
        );
    }
    let client = s.client();
    assert_eq!(
        client
            .store()
            .expect("a store open here")
            .index()
            .layout()
            .expect("layout"),
        INDEX_LAYOUT
    );
    let report = client.verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
    let (text, _) = call(
        &mnemo::MnemoMemoryToolServer::new(client),
        json!({"command": "view", "path": "/memories/a.md"}),
    );
    assert!(text.contains("     1\tt"), "{text}");
}
