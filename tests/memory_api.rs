//! The memory-stores API's writes against a model: random creates, updates (content, path,
//! both, with a right or a wrong precondition) and deletes, interleaved with the memory tool's
//! own calls, on one store. Each answer is the model's (done, or which failure), a memory keeps
//! its identity through every move and edit, the files are the model's after each step, and the
//! store verifies intact at the end (every write re-derived by the replay).

use std::collections::BTreeMap;

use mnemo::event::ApiWrite;
use mnemo::testing::tool::content_sha256;
use mnemo::tool::ApiFailure;
use mnemo::{Body, MnemoClient};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{TempStore, run_mnemo};

/// A small set of paths, so that steps collide: the same path, a path under a memory, a
/// directory of memories.
const PATHS: &[&str] = &[
    "/memories/a.md",
    "/memories/b.md",
    "/memories/d/c.md",
    "/memories/d/e.md",
    "/memories/a.md/x.md",
    "/memories/d",
];

#[derive(Clone, Debug)]
enum Step {
    Create {
        path: usize,
        content: u8,
    },
    Update {
        pick: usize,
        content: Option<u8>,
        path: Option<usize>,
        right: Option<bool>,
    },
    Delete {
        pick: usize,
        right: Option<bool>,
    },
    /// The memory tool renames a file or directory.
    ToolRename {
        from: usize,
        to: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let path = 0..PATHS.len();
    let right = prop_oneof![Just(None), Just(Some(true)), Just(Some(false))];
    prop_oneof![
        (path.clone(), any::<u8>()).prop_map(|(path, content)| Step::Create { path, content }),
        (
            any::<usize>(),
            proptest::option::of(any::<u8>()),
            proptest::option::of(path.clone()),
            right.clone()
        )
            .prop_map(|(pick, content, path, right)| Step::Update {
                pick,
                content,
                path,
                right
            }),
        (any::<usize>(), right).prop_map(|(pick, right)| Step::Delete { pick, right }),
        (path.clone(), path).prop_map(|(from, to)| Step::ToolRename { from, to }),
    ]
}

fn text(n: u8) -> String {
    format!("content {n}\n").repeat(usize::from(n % 3))
}

/// The model: memory identity → (path, content).
type Model = BTreeMap<u64, (String, String)>;

fn at(model: &Model, path: &str) -> Option<u64> {
    model
        .iter()
        .find(|(_, (p, _))| p == path)
        .map(|(id, _)| *id)
}

/// Whether a new memory may go at `path` in the model: no memory there, none above, none below.
fn free(model: &Model, path: &str) -> bool {
    model.values().all(|(p, _)| {
        p != path && !path.starts_with(&format!("{p}/")) && !p.starts_with(&format!("{path}/"))
    })
}

fn outcome(client: &MnemoClient, write: ApiWrite) -> (u64, Option<ApiFailure>) {
    let receipt = client
        .call(None, Body::Api(write))
        .expect("the store answers");
    let failure = receipt.is_error.then(|| {
        let failure = receipt
            .failure
            .expect("an API failure, typed in the receipt");
        // The logged text (what verify re-derives) names the same error type.
        assert!(
            receipt
                .text
                .starts_with(&format!("{}: ", failure.error_type())),
            "{}",
            receipt.text
        );
        assert!(receipt.failure_message().is_some());
        failure
    });
    (receipt.seq.0, failure)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn api_writes_match_the_model_and_verify(steps in proptest::collection::vec(step(), 1..30)) {
        let store = TempStore::new();
        let client = store.client();
        let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
        let mut model = Model::new();
        // The versions the steps should make: (operation, memory, path below the root).
        let mut expected: Vec<(String, u64, String)> = Vec::new();
        let below = |path: &str| path.strip_prefix("/memories").unwrap_or(path).to_string();
        for step in steps {
            match step {
                Step::Create { path, content } => {
                    let path = PATHS[path];
                    let (seq, failure) = outcome(&client, ApiWrite::Create { path: path.into(), content: text(content) });
                    if free(&model, path) {
                        prop_assert_eq!(failure, None, "create {}", path);
                        model.insert(seq, (path.to_string(), text(content)));
                        expected.push(("created".into(), seq, below(path)));
                    } else {
                        prop_assert_eq!(failure, Some(ApiFailure::PathConflict), "create {}", path);
                    }
                }
                Step::Update { pick, content, path, right } => {
                    let Some((&id, (old_path, old))) = model.iter().nth(pick % model.len().max(1)) else { continue };
                    let (old_path, old) = (old_path.clone(), old.clone());
                    let expect = right.map(|right| if right { content_sha256(&old) } else { content_sha256("never this\n") });
                    let new_path = path.map(|p| PATHS[p].to_string());
                    let (_, failure) = outcome(&client, ApiWrite::Update {
                        memory: id, path: old_path.clone(), content: content.map(text), new_path: new_path.clone(), expect,
                    });
                    let moving = new_path.as_ref().filter(|p| **p != old_path);
                    let wanted = if right == Some(false) {
                        Some(ApiFailure::Precondition)
                    } else if moving.is_some_and(|to| {
                        // Not into a path under itself, nor onto a directory above it (its own path
                        // is still in the way), nor where another memory is in the way.
                        let mut rest = model.clone();
                        rest.remove(&id);
                        to.starts_with(&format!("{old_path}/"))
                            || old_path.starts_with(&format!("{to}/"))
                            || !free(&rest, to)
                    }) {
                        Some(ApiFailure::PathConflict)
                    } else {
                        None
                    };
                    prop_assert_eq!(failure, wanted, "update mem_{}", id);
                    if wanted.is_none() {
                        let entry = model.get_mut(&id).expect("picked");
                        let before = entry.clone();
                        if let Some(to) = moving { entry.0 = to.clone(); }
                        if let Some(c) = content { entry.1 = text(c); }
                        if *entry != before {
                            expected.push(("modified".into(), id, below(&entry.0)));
                        }
                    }
                }
                Step::Delete { pick, right } => {
                    let Some((&id, (path, old))) = model.iter().nth(pick % model.len().max(1)) else { continue };
                    let expect = right.map(|right| if right { content_sha256(old) } else { content_sha256("never this\n") });
                    let (_, failure) = outcome(&client, ApiWrite::Delete { memory: id, path: path.clone(), expect });
                    if right == Some(false) {
                        prop_assert_eq!(failure, Some(ApiFailure::Precondition));
                    } else {
                        prop_assert_eq!(failure, None);
                        let (path, _) = model.remove(&id).expect("picked");
                        expected.push(("deleted".into(), id, below(&path)));
                    }
                }
                Step::ToolRename { from, to } => {
                    let (from, to) = (PATHS[from], PATHS[to]);
                    let answer = tool.handle(&json!({"command": "rename", "old_path": from, "new_path": to}));
                    if answer.get("is_error").is_none() {
                        // A rename of a directory is a version of each memory under it, in
                        // path order.
                        let mut moved = Vec::new();
                        for (id, (path, _)) in model.iter_mut() {
                            if path == from {
                                *path = to.to_string();
                            } else if let Some(rest) = path.strip_prefix(&format!("{from}/")) {
                                *path = format!("{to}/{rest}");
                            } else {
                                continue;
                            }
                            moved.push((path.clone(), *id));
                        }
                        moved.sort();
                        for (path, id) in moved {
                            expected.push(("modified".into(), id, below(&path)));
                        }
                    }
                }
            }
            // The files are the model's, each with its identity.
            let files: Model = client
                .records_by_tag("memorytool")
                .expect("records")
                .into_iter()
                .map(|r| (r.created.0, (r.path, r.content)))
                .collect();
            prop_assert_eq!(&files, &model);
            // A stale identity is never taken for the file now at its path.
            if let Some((path, _)) = model.values().next() {
                let (_, failure) = outcome(&client, ApiWrite::Delete { memory: u64::MAX, path: path.clone(), expect: None });
                prop_assert_eq!(failure, Some(ApiFailure::NotFound));
                prop_assert_eq!(at(&model, path).is_some(), true);
            }
        }
        // The versions listed are the events that made them, in order.
        let root = mnemo::MemPath::absolute("/memories").expect("root");
        let exported = mnemo::testing::memory_store::export(&client, &root, "memstore_t").expect("export");
        let listed: Vec<(String, u64, String)> = exported
            .memory_versions
            .iter()
            .map(|v| {
                // A memory's id is `mem_` and the seq of the event that created its file.
                let memory: u64 = v.memory_id.strip_prefix("mem_").and_then(|seq| seq.parse().ok()).expect("an id");
                (v.operation.clone(), memory, v.path.clone().unwrap_or_default())
            })
            .collect();
        prop_assert_eq!(listed, expected);
        let report = client.verify().expect("verify");
        prop_assert!(report.is_intact(), "{:?}", report.violations);
    }
}

/// An API write is an event like the memory tool's: `history` follows the memory it made through
/// an API move and a tool edit, `show` gives the write and the change it made (re-derived), and a
/// redaction by the text it held erases it, after which the store still verifies.
#[test]
fn api_writes_are_followed_shown_and_redacted_like_tool_calls() {
    let store = TempStore::new();
    let client = store.client();
    let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
    let (made, failure) = outcome(
        &client,
        ApiWrite::Create {
            path: "/memories/a/b.md".into(),
            content: "the PIN is 4921\n".into(),
        },
    );
    assert_eq!(failure, None);
    let (moved, failure) = outcome(
        &client,
        ApiWrite::Update {
            memory: made,
            path: "/memories/a/b.md".into(),
            content: Some("no PIN here\n".into()),
            new_path: Some("/memories/c.md".into()),
            expect: Some(content_sha256("the PIN is 4921\n")),
        },
    );
    assert_eq!(failure, None);
    let edit = tool.handle(&json!({"command": "str_replace", "path": "/memories/c.md", "old_str": "no", "new_str": "still no"}));
    assert!(edit.get("is_error").is_none(), "{edit}");

    let path = mnemo::MemPath::absolute("/memories/c.md").expect("path");
    let history = client.history(&path).expect("history");
    let seqs: Vec<u64> = history.iter().map(|line| line.event.seq).collect();
    assert_eq!(seqs, [made, moved, moved + 1], "{history:?}");

    let shown = client.show(mnemo::Seq(moved)).expect("show");
    assert_eq!(shown.command, "api.update", "{shown:?}");
    assert!(shown.verified, "{shown:?}");
    let Some(mnemo::protocol::EventChange::Edited { diff, .. }) = &shown.change else {
        panic!("an edit: {shown:?}");
    };
    assert!(
        diff.contains("-the PIN is 4921") && diff.contains("+no PIN here"),
        "{diff}"
    );

    let selection = mnemo::Selection {
        texts: vec!["4921".into()],
        ..mnemo::Selection::default()
    };
    let done = client.redact("asked", &selection).expect("redact");
    assert!(
        done.plan.seqs.contains(&mnemo::Seq(made)),
        "{:?}",
        done.plan
    );
    let report = client.verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
    let left = client.record("/memories/c.md").expect("read");
    assert!(left.is_none_or(|r| !r.content.contains("4921")));
}

/// `mnemo VERB --format memory-stores --db DB DIR`.
fn memory_stores(verb: &str, db: &std::path::Path, dir: &std::path::Path) -> std::process::Output {
    let (db, dir) = (db.to_str().expect("utf-8"), dir.to_str().expect("utf-8"));
    run_mnemo(&[verb, "--format", "memory-stores", "--db", db, dir], "")
}

/// The export file in `dir`.
fn read_export(dir: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(dir.join("memory-store.json")).expect("the export file");
    serde_json::from_slice(&bytes).expect("json")
}

/// `mnemo export --format memory-stores` writes every memory and version; `mnemo import
/// --format memory-stores` of that file into a new store gives the same memories with the same
/// versions' contents in order, and the new store verifies.
#[test]
fn a_store_exported_as_memory_stores_json_imports_to_the_same_memories_and_versions() {
    let store = TempStore::new();
    let db = store.path();
    {
        let client = store.client();
        let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
        let (a, _) = outcome(
            &client,
            ApiWrite::Create {
                path: "/memories/a.md".into(),
                content: "one\n".into(),
            },
        );
        tool.handle(&json!({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"}));
        tool.handle(
            &json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        );
        outcome(
            &client,
            ApiWrite::Update {
                memory: a,
                path: "/memories/a.md".into(),
                content: Some("two\n".into()),
                new_path: Some("/memories/x/a.md".into()),
                expect: None,
            },
        );
        tool.handle(
            &json!({"command": "create", "path": "/memories/gone.md", "file_text": "bye\n"}),
        );
        tool.handle(&json!({"command": "delete", "path": "/memories/gone.md"}));
    }
    let out = store.dir.path().join("out");
    let done = memory_stores("export", &db, &out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let exported: serde_json::Value = read_export(&out);
    let memories = |doc: &serde_json::Value| -> Vec<(String, String)> {
        let mut m: Vec<(String, String)> = doc["memories"]
            .as_array()
            .expect("memories")
            .iter()
            .map(|m| {
                (
                    m["path"].as_str().expect("path").into(),
                    m["content"].as_str().expect("content").into(),
                )
            })
            .collect();
        m.sort();
        m
    };
    let versions = |doc: &serde_json::Value| -> Vec<(String, Option<String>, Option<String>)> {
        doc["memory_versions"]
            .as_array()
            .expect("versions")
            .iter()
            .map(|v| {
                (
                    v["operation"].as_str().expect("op").to_string(),
                    v["path"].as_str().map(str::to_string),
                    v["content"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    assert_eq!(
        memories(&exported),
        [
            ("/e/b.md".to_string(), "b\n".to_string()),
            ("/x/a.md".into(), "two\n".into())
        ]
    );
    assert_eq!(
        versions(&exported),
        [
            (
                "created".to_string(),
                Some("/a.md".to_string()),
                Some("one\n".to_string())
            ),
            ("created".into(), Some("/d/b.md".into()), Some("b\n".into())),
            (
                "modified".into(),
                Some("/e/b.md".into()),
                Some("b\n".into())
            ),
            (
                "modified".into(),
                Some("/x/a.md".into()),
                Some("two\n".into())
            ),
            (
                "created".into(),
                Some("/gone.md".into()),
                Some("bye\n".into())
            ),
            ("deleted".into(), Some("/gone.md".into()), None),
        ]
    );

    let copy = store.dir.path().join("copy.mnemo.db");
    let done = memory_stores("import", &copy, &out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let again = store.dir.path().join("again");
    let done = memory_stores("export", &copy, &again);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let reimported: serde_json::Value = read_export(&again);
    assert_eq!(memories(&reimported), memories(&exported));
    // The import replays each version as an API write: a directory rename becomes a move of the
    // memory under it, so the versions keep their order, paths and contents.
    assert_eq!(versions(&reimported), versions(&exported));
    let verified = run_mnemo(&["verify", "--db", copy.to_str().expect("utf-8")], "");
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );

    // A hosted export: its own ids, a redacted version, history cut short by retention. The
    // listing decides the end state.
    let hosted = json!({
        "format": "memory-stores",
        "memory_store_id": "memstore_01hosted",
        "memories": [
            {"type": "memory", "id": "mem_01a", "memory_store_id": "memstore_01hosted", "path": "/notes/a.md",
             "content": "latest\n", "content_sha256": "", "content_size_bytes": 7,
             "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-03T00:00:00Z", "memory_version_id": "memver_01c"},
            {"type": "memory", "id": "mem_01b", "memory_store_id": "memstore_01hosted", "path": "/kept.md",
             "content": "no history left\n", "content_sha256": "", "content_size_bytes": 16,
             "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z", "memory_version_id": "memver_01z"}
        ],
        "memory_versions": [
            {"type": "memory_version", "id": "memver_01c", "memory_id": "mem_01a", "memory_store_id": "memstore_01hosted",
             "operation": "modified", "created_at": "2026-01-03T00:00:00Z", "created_by": {"type": "user_actor", "user_id": "user_1"},
             "content": "latest\n", "content_sha256": null, "content_size_bytes": 7, "path": "/notes/a.md",
             "redacted_at": null, "redacted_by": null},
            {"type": "memory_version", "id": "memver_01a", "memory_id": "mem_01a", "memory_store_id": "memstore_01hosted",
             "operation": "created", "created_at": "2026-01-01T00:00:00Z", "created_by": {"type": "api_actor", "api_key_id": "apikey_1"},
             "content": "first\n", "content_sha256": null, "content_size_bytes": 6, "path": "/a.md",
             "redacted_at": null, "redacted_by": null},
            {"type": "memory_version", "id": "memver_01b", "memory_id": "mem_01a", "memory_store_id": "memstore_01hosted",
             "operation": "modified", "created_at": "2026-01-02T00:00:00Z", "created_by": null,
             "content": null, "content_sha256": null, "content_size_bytes": null, "path": null,
             "redacted_at": "2026-02-01T00:00:00Z", "redacted_by": {"type": "api_actor", "api_key_id": "apikey_1"}}
        ]
    });
    let hosted_dir = store.dir.path().join("hosted");
    std::fs::create_dir(&hosted_dir).expect("dir");
    std::fs::write(hosted_dir.join("memory-store.json"), hosted.to_string()).expect("write");
    let brought = store.dir.path().join("brought.mnemo.db");
    let done = memory_stores("import", &brought, &hosted_dir);
    // The redacted version is named as skipped: exit 1, the rest imported.
    assert_eq!(
        done.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(String::from_utf8_lossy(&done.stderr).contains("memver_01b"));
    let client = crate::support::open_client(&brought, "reader", mnemo::Durability::Buffered);
    let mut files: Vec<(String, String)> = client
        .records_by_tag("memorytool")
        .expect("records")
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            (
                "/memories/kept.md".to_string(),
                "no history left\n".to_string()
            ),
            ("/memories/notes/a.md".into(), "latest\n".into()),
        ]
    );
    assert!(client.verify().expect("verify").is_intact());

    // Not a memory-stores file: refused, nothing made.
    std::fs::write(
        hosted_dir.join("memory-store.json"),
        b"{\"format\": \"files\"}",
    )
    .expect("write");
    let refused = store.dir.path().join("refused.mnemo.db");
    let done = memory_stores("import", &refused, &hosted_dir);
    assert_eq!(
        done.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// An API update or delete sent with the path its memory had when the server looked it up finds
/// the memory where a memory-tool rename (of it, or of a directory above it) moved it since: the
/// writer looks it up again by its identity, so a live memory is never "not found", and the
/// event records the path it was answered at (the replay re-derives it).
#[test]
fn an_api_write_finds_its_memory_where_a_rename_moved_it() {
    let store = TempStore::new();
    let client = store.client();
    let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
    let (made, failure) = outcome(
        &client,
        ApiWrite::Create {
            path: "/memories/d/m.md".into(),
            content: "first\n".into(),
        },
    );
    assert_eq!(failure, None);
    let moved = tool.handle(
        &json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    );
    assert!(moved.get("is_error").is_none(), "{moved}");
    let (_, failure) = outcome(
        &client,
        ApiWrite::Update {
            memory: made,
            path: "/memories/d/m.md".into(),
            content: Some("second\n".into()),
            new_path: None,
            expect: Some(content_sha256("first\n")),
        },
    );
    assert_eq!(failure, None, "the memory lives at /memories/e/m.md");
    let record = client
        .record("/memories/e/m.md")
        .expect("read")
        .expect("there");
    assert_eq!(
        (record.created.0, record.content.as_str()),
        (made, "second\n")
    );
    // A wrong digest still fails.
    let (_, failure) = outcome(
        &client,
        ApiWrite::Update {
            memory: made,
            path: "/memories/e/m.md".into(),
            content: Some("third\n".into()),
            new_path: None,
            expect: Some(content_sha256("first\n")),
        },
    );
    assert_eq!(failure, Some(ApiFailure::Precondition));
    let moved = tool.handle(
        &json!({"command": "rename", "old_path": "/memories/e/m.md", "new_path": "/memories/f.md"}),
    );
    assert!(moved.get("is_error").is_none(), "{moved}");
    let (_, failure) = outcome(
        &client,
        ApiWrite::Delete {
            memory: made,
            path: "/memories/e/m.md".into(),
            expect: Some(content_sha256("second\n")),
        },
    );
    assert_eq!(failure, None, "deleted where it was moved to");
    assert!(client.record("/memories/f.md").expect("read").is_none());
    let report = client.verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}

/// An import of the memory-stores API's JSON into a new store that fails leaves nothing at the
/// store's path, nor beside it: the store is built beside its path and renamed into place only
/// once the import ran.
#[test]
fn a_failed_memory_stores_import_into_a_new_store_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("export");
    std::fs::create_dir(&source).expect("dir");
    // A file of another format: read, then refused by the import itself.
    let file = json!({"format": "other", "memory_store_id": "memstore_x", "memories": [], "memory_versions": []});
    std::fs::write(source.join("memory-store.json"), file.to_string()).expect("write");
    let db = dir.path().join("new.mnemo.db");
    let out = memory_stores("import", &db, &source);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!db.exists(), "nothing at the store's path");
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["export"], "nothing beside it either");
}
