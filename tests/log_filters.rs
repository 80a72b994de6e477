//! `log`'s filters (agent, path, command, result, time) and its two orders (oldest first from a
//! seq, newest first before one), with a bound on the events looked at, against a model: the
//! whole log listed once and filtered in the test.

use std::sync::OnceLock;

use mnemo::protocol::LoggedEvent;
use mnemo::{Durability, LogQuery, MemPath, MnemoClient};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{TempStore, open_client};

/// A store of a few hundred events by three agents, some failing, and its whole log.
fn fixture() -> &'static (TempStore, Vec<LoggedEvent>) {
    static FIXTURE: OnceLock<(TempStore, Vec<LoggedEvent>)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let temp = TempStore::new();
        let agents: Vec<MnemoClient> = ["ann", "bob", "cy"]
            .iter()
            .map(|a| open_client(&temp.path(), a, Durability::Buffered))
            .collect();
        for i in 0..240_u64 {
            let server = mnemo::MnemoMemoryToolServer::new(agents[(i % 3) as usize].clone());
            let file = format!("/memories/d{}/f{}.md", i % 4, i % 7);
            let call = match i % 5 {
                0 | 1 => json!({"command": "create", "path": file, "file_text": format!("note {i}\n")}),
                2 => json!({"command": "view", "path": file}),
                3 => json!({"command": "str_replace", "path": file, "old_str": "note", "new_str": "Note"}),
                _ => json!({"command": "delete", "path": file}),
            };
            server.handle(&call);
        }
        let all = agents[0].log(&LogQuery::default()).expect("the whole log");
        assert_eq!(all.len(), 240);
        drop(agents);
        (temp, all)
    })
}

fn client() -> MnemoClient {
    MnemoClient::builder(fixture().0.path())
        .read_only()
        .open()
        .expect("open read-only")
}

fn model(all: &[LoggedEvent], q: &LogQuery) -> Vec<u64> {
    let from = q.from.max(1);
    let mut seen: Vec<&LoggedEvent> = all
        .iter()
        .filter(|e| e.seq >= from && q.before.is_none_or(|b| e.seq < b))
        .collect();
    if q.before.is_some() {
        seen.reverse();
    }
    if let Some(scan) = q.scan {
        seen.truncate(usize::try_from(scan).unwrap_or(usize::MAX));
    }
    seen.into_iter()
        .filter(|e| q.agent.as_ref().is_none_or(|a| *a == e.agent))
        .filter(|e| q.command.as_ref().is_none_or(|c| *c == e.command))
        .filter(|e| q.errors.is_none_or(|x| x == e.is_error))
        .filter(|e| q.since_ms.is_none_or(|t| e.time_ms >= t))
        .filter(|e| q.until_ms.is_none_or(|t| e.time_ms <= t))
        .filter(|e| {
            q.path.as_ref().is_none_or(|want| {
                e.paths
                    .iter()
                    .any(|p| MemPath::absolute(p).is_ok_and(|p| p.starts_with(want)))
            })
        })
        .map(|e| e.seq)
        .take(q.limit.unwrap_or(usize::MAX))
        .collect()
}

fn query() -> impl Strategy<Value = LogQuery> {
    (
        prop::option::of(prop::sample::select(vec!["ann", "bob", "cy", "nobody"])),
        prop::option::of(prop::sample::select(vec![
            "/memories/d1",
            "/memories/d2/f3.md",
            "/memories",
        ])),
        prop::option::of(prop::sample::select(vec![
            "create",
            "view",
            "str_replace",
            "delete",
            "rename",
        ])),
        prop::option::of(any::<bool>()),
        prop::option::of(0..260_u64),
        prop::option::of(0..260_u64),
        0..260_u64,
        prop::option::of(1..80_usize),
        prop::option::of(0..300_u64),
        prop::option::of((0..240_usize, 0..240_usize)),
    )
        .prop_map(
            |(agent, path, command, errors, from, before, _, limit, scan, times)| {
                let all = &fixture().1;
                let (since_ms, until_ms) = match times {
                    Some((a, b)) => (Some(all[a.min(b)].time_ms), Some(all[a.max(b)].time_ms)),
                    None => (None, None),
                };
                LogQuery {
                    agent: agent.map(str::to_string),
                    path: path.map(|p| MemPath::absolute(p).expect("path")),
                    command: command.map(str::to_string),
                    errors,
                    since_ms,
                    until_ms,
                    from: from.unwrap_or(1),
                    before,
                    limit,
                    scan,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn log_lists_what_the_model_lists(q in query()) {
        let listed: Vec<u64> = client().log(&q).expect("log").iter().map(|e| e.seq).collect();
        prop_assert_eq!(listed, model(&fixture().1, &q), "{:?}", q);
    }
}

#[test]
fn newest_first_pages_with_a_bounded_scan_cover_the_log_once() {
    let client = client();
    let all = &fixture().1;
    let mut before = all.len() as u64 + 1;
    let mut seen = Vec::new();
    while before > 1 {
        let q = LogQuery {
            command: Some("create".into()),
            before: Some(before),
            scan: Some(37),
            ..LogQuery::default()
        };
        seen.extend(client.log(&q).expect("log").iter().map(|e| e.seq));
        before = before.saturating_sub(37).max(1);
    }
    let want: Vec<u64> = all
        .iter()
        .rev()
        .filter(|e| e.command == "create")
        .map(|e| e.seq)
        .collect();
    assert_eq!(seen, want);
}
