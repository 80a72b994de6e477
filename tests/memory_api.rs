//! The memory-stores API's writes against a model: random creates, updates (content, path,
//! both, with a right or a wrong precondition) and deletes, interleaved with the memory tool's
//! own calls, on one store. Each answer is the model's (done, or which failure), a memory keeps
//! its identity through every move and edit, the files are the model's after each step, and the
//! store verifies intact at the end (every write re-derived by the replay).

use std::collections::BTreeMap;

use mnemo::tool::api::{ApiFailure, ApiWrite, content_sha256};
use mnemo::{Body, MnemoClient};
use proptest::prelude::*;
use serde_json::json;

use crate::support::TempStore;

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
        ApiFailure::of(&receipt.text)
            .map(|(f, _)| f)
            .expect("an API failure")
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
        for step in steps {
            match step {
                Step::Create { path, content } => {
                    let path = PATHS[path];
                    let (seq, failure) = outcome(&client, ApiWrite::Create { path: path.into(), content: text(content) });
                    if free(&model, path) {
                        prop_assert_eq!(failure, None, "create {}", path);
                        model.insert(seq, (path.to_string(), text(content)));
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
                        if let Some(to) = moving { entry.0 = to.clone(); }
                        if let Some(c) = content { entry.1 = text(c); }
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
                        model.remove(&id);
                    }
                }
                Step::ToolRename { from, to } => {
                    let (from, to) = (PATHS[from], PATHS[to]);
                    let answer = tool.handle(&json!({"command": "rename", "old_path": from, "new_path": to}));
                    if answer.get("is_error").is_none() {
                        for (path, _) in model.values_mut() {
                            if path == from {
                                *path = to.to_string();
                            } else if let Some(rest) = path.strip_prefix(&format!("{from}/")) {
                                *path = format!("{to}/{rest}");
                            }
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
    let seqs: Vec<u64> = history
        .iter()
        .filter_map(|line| line["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [made, moved, moved + 1], "{history:?}");

    let shown = client.show(mnemo::Seq(moved)).expect("show");
    assert_eq!(shown["command"], "api.update", "{shown}");
    assert_eq!(shown["verified"], true, "{shown}");
    let diff = shown["change"]["diff"].as_str().expect("a diff");
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
