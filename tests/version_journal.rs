//! The version journal (index layout 5) against its model, a replay of the log: every page of a
//! store's memory versions, each memory's, and each version alone read off the journal equal
//! what the replay derives, after random memory-tool calls (directory moves and deletes
//! included), API writes and a redaction; `verify` checks the journal and names a forged entry.

use mnemo::Body;
use mnemo::Seq;
use mnemo::event::ApiWrite;
use mnemo::testing::versions::{Journal, Version, Window, count, versions};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{TempStore, open_store};

#[derive(Clone, Debug)]
enum Step {
    /// The memory tool's `create` of `/memories/dD/fF.md`.
    Create(usize, usize),
    /// A `str_replace` in it.
    Edit(usize, usize),
    /// A `create` of it with the content it holds (no version).
    Same(usize, usize),
    /// A `rename` of the file to another directory and name.
    MoveFile(usize, usize, usize, usize),
    /// A `rename` of a directory.
    MoveDir(usize, usize),
    /// A `delete` of the file.
    DeleteFile(usize, usize),
    /// A `delete` of a directory.
    DeleteDir(usize),
    /// The API's create of the file.
    ApiCreate(usize, usize),
    /// The API's update of the file's content, and perhaps its path.
    ApiUpdate(usize, usize, Option<(usize, usize)>),
    /// The API's delete of the file.
    ApiDelete(usize, usize),
    /// A `view` of /memories (a read: no version).
    View,
}

fn step() -> impl Strategy<Value = Step> {
    let slot = || (0..3usize, 0..3usize);
    prop_oneof![
        3 => slot().prop_map(|(d, f)| Step::Create(d, f)),
        2 => slot().prop_map(|(d, f)| Step::Edit(d, f)),
        1 => slot().prop_map(|(d, f)| Step::Same(d, f)),
        1 => (slot(), slot()).prop_map(|((d, f), (e, g))| Step::MoveFile(d, f, e, g)),
        2 => (0..3usize, 0..4usize).prop_map(|(d, e)| Step::MoveDir(d, e)),
        1 => slot().prop_map(|(d, f)| Step::DeleteFile(d, f)),
        1 => (0..4usize).prop_map(Step::DeleteDir),
        2 => slot().prop_map(|(d, f)| Step::ApiCreate(d, f)),
        2 => (slot(), proptest::option::of(slot()))
            .prop_map(|((d, f), to)| Step::ApiUpdate(d, f, to)),
        1 => slot().prop_map(|(d, f)| Step::ApiDelete(d, f)),
        1 => Just(Step::View),
    ]
}

fn dir(d: usize) -> String {
    format!("/memories/d{d}")
}

fn file(d: usize, f: usize) -> String {
    format!("/memories/d{d}/f{f}.md")
}

/// Runs `steps` against a fresh store; returns the store's directory.
fn run(steps: &[Step]) -> TempStore {
    let t = TempStore::new();
    let client = t.client();
    let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
    let mut fresh = 0u32;
    for step in steps {
        fresh += 1;
        let text = format!("text {fresh} end\n");
        let input = match step {
            Step::Create(d, f) => {
                json!({"command": "create", "path": file(*d, *f), "file_text": text})
            }
            Step::Edit(d, f) => {
                json!({"command": "str_replace", "path": file(*d, *f), "old_str": "end", "new_str": format!("end{fresh}")})
            }
            Step::Same(d, f) => match client.record(&file(*d, *f)).expect("read") {
                Some(record) => {
                    json!({"command": "create", "path": file(*d, *f), "file_text": record.content})
                }
                None => continue,
            },
            Step::MoveFile(d, f, e, g) => {
                json!({"command": "rename", "old_path": file(*d, *f), "new_path": file(*e, *g)})
            }
            Step::MoveDir(d, e) => {
                json!({"command": "rename", "old_path": dir(*d), "new_path": dir(*e)})
            }
            Step::DeleteFile(d, f) => json!({"command": "delete", "path": file(*d, *f)}),
            Step::DeleteDir(d) => json!({"command": "delete", "path": dir(*d)}),
            Step::View => json!({"command": "view", "path": "/memories"}),
            Step::ApiCreate(d, f) => {
                let write = ApiWrite::Create {
                    path: file(*d, *f),
                    content: text,
                };
                client.call(None, Body::Api(write)).expect("api create");
                continue;
            }
            Step::ApiUpdate(d, f, to) => {
                let Some(record) = client.record(&file(*d, *f)).expect("read") else {
                    continue;
                };
                let write = ApiWrite::Update {
                    memory: record.created.0,
                    path: file(*d, *f),
                    content: Some(text),
                    new_path: to.map(|(e, g)| file(e, g)),
                    expect: None,
                };
                client.call(None, Body::Api(write)).expect("api update");
                continue;
            }
            Step::ApiDelete(d, f) => {
                let Some(record) = client.record(&file(*d, *f)).expect("read") else {
                    continue;
                };
                let write = ApiWrite::Delete {
                    memory: record.created.0,
                    path: file(*d, *f),
                    expect: None,
                };
                client.call(None, Body::Api(write)).expect("api delete");
                continue;
            }
        };
        tool.handle(&input);
    }
    drop(tool);
    drop(client);
    t
}

/// Every listing the journal answers equals the replay's, and `verify` is intact.
fn journal_agrees(t: &TempStore) -> Result<(), TestCaseError> {
    let store = open_store(&t.path());
    let root = mnemo::MemPath::absolute("/memories").expect("root");
    let mut model: Vec<Version> = versions(&store, &root, Seq(u64::MAX), |_| true).expect("replay");
    model.sort_by_key(|v| std::cmp::Reverse((v.seq, v.memory)));
    let journal = Journal::of(&store)
        .expect("journal")
        .expect("the index keeps a journal");
    // Every page, three versions at a time.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let window = Window {
            before,
            memory: None,
            limit: 3,
        };
        let (page, more) = journal.page(&root, window, |_| true).expect("page");
        prop_assert!(page.len() <= 3);
        before = page.last().map(|v| (v.seq, v.memory));
        paged.extend(page);
        if !more {
            break;
        }
    }
    prop_assert_eq!(
        &paged,
        &model,
        "the journal's pages and the replay's versions"
    );
    // Each memory's, and each version alone.
    let memories: std::collections::BTreeSet<Seq> = model.iter().map(|v| v.memory).collect();
    for memory in memories {
        let window = Window {
            before: None,
            memory: Some(memory),
            limit: 1000,
        };
        let (own, more) = journal
            .page(&root, window, |_| true)
            .expect("memory's page");
        prop_assert!(!more);
        let expected: Vec<&Version> = model.iter().filter(|v| v.memory == memory).collect();
        prop_assert_eq!(
            own.iter().collect::<Vec<_>>(),
            expected,
            "memory {}",
            memory.0
        );
    }
    for v in &model {
        let found = journal.version(v.seq, v.memory).expect("version");
        prop_assert_eq!(found.as_ref(), Some(v));
    }
    // The count is of the memories' own steps: one `m` entry each, never more than all.
    let (_, _, index) = store.raw_trees();
    let own = index.scan_prefix([b'm']).count() as u64;
    prop_assert_eq!(count(&store).expect("count"), Some(own));
    prop_assert!(own <= model.len() as u64);
    let report = mnemo::testing::verify_store(&store).expect("verify");
    prop_assert!(report.is_intact(), "{:?}", report.violations);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_journal_lists_what_a_replay_of_the_log_derives(
        steps in proptest::collection::vec(step(), 1..40),
        redact in proptest::option::of(any::<proptest::sample::Index>()),
    ) {
        let t = run(&steps);
        journal_agrees(&t)?;
        // A redaction of a version a memory moved past keeps what its event did: the journal of
        // the redacted store lists it as redacted, as the replay does.
        if let Some(pick) = redact {
            let store = open_store(&t.path());
            let root = mnemo::MemPath::absolute("/memories").expect("root");
            let all = versions(&store, &root, Seq(u64::MAX), |v| v.content.is_some()).expect("replay");
            drop(store);
            if !all.is_empty() {
                let chosen = all[pick.index(all.len())].seq;
                let selection = mnemo::Selection { seqs: vec![chosen], ..Default::default() };
                // A redaction that would change a live memory is refused; either way the
                // journal agrees.
                let _ = mnemo::testing::redact_store(&t.path(), "operator", "test", &selection);
                journal_agrees(&t)?;
            }
        }
    }
}

/// A forged journal record (a version's digest changed in the stored index) is named by
/// `verify` at its event, as an index entry that differs from what the log implies.
#[test]
fn a_forged_journal_record_is_named_by_verify() {
    let t = run(&[
        Step::Create(0, 0),
        Step::Edit(0, 0),
        Step::MoveDir(0, 1),
        Step::ApiCreate(2, 2),
    ]);
    let store = open_store(&t.path());
    let (_, _, index) = store.raw_trees();
    let mut key = vec![b'v'];
    key.extend_from_slice(&2u64.to_be_bytes());
    let mut record = index
        .get(&key)
        .expect("read")
        .expect("event 2's record")
        .to_vec();
    let last = record.len() - 20;
    record[last] ^= 1;
    index.insert(&key, record.clone()).expect("forge");
    let report = mnemo::testing::verify_store(&store).expect("verify");
    let first = report.violations.first().expect("a violation");
    assert_eq!(first.seq, Seq(2), "{first:?}");
    assert!(
        first.detail.contains("version journal record of event 2"),
        "{}",
        first.detail
    );
    // An extra entry the log does not imply is named too.
    record[last] ^= 1;
    index.insert(&key, record).expect("put back");
    assert!(
        mnemo::testing::verify_store(&store)
            .expect("verify")
            .is_intact()
    );
    let mut extra = vec![b'm'];
    extra.extend_from_slice(&99u64.to_be_bytes());
    extra.extend_from_slice(&99u64.to_be_bytes());
    index.insert(&extra, &[][..]).expect("add");
    let report = mnemo::testing::verify_store(&store).expect("verify");
    let first = report.violations.first().expect("a violation");
    assert!(
        first.detail.contains("version journal holds"),
        "{}",
        first.detail
    );
}
