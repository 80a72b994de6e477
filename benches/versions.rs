//! What a page of a store's memory versions costs (`GET /v1/memory_stores/{id}/memory_versions`,
//! 20 a page, newest first), read off the index's version journal, on stores of the view-heavy
//! log (`common::view_heavy_command`: a tree of 2,000 notes, then one call in 20 views
//! `/memories` among views, edits and renames) of 1,000 and 1,000,000 events.
//!
//! - `first_page`: the newest 20 versions.
//! - `page_100`: the 100th page, from the cursor the 99th page's last version makes (at 1,000
//!   events the store has 50 pages: its last page is measured).
//! - `replay_first_page` (1,000 events only): the same first page derived by a replay of the
//!   whole log, which is what every listing cost before the journal.
//!
//! - `cold_first_page_after_a_directory_move` (largest size only): the first page on a store just
//!   opened whose log ends with a directory's move there and back: the reader spells out the
//!   versions of directory records by following every record up to the last of them, once per
//!   open store, and this is that pass.
//!
//! Ratios to read: `first_page` and `page_100` at 1,000,000 events against `first_page` at
//! 1,000 (flat: a page costs the page, not the log).

mod common;

use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use mnemo::testing::Store;
use mnemo::testing::versions::{Journal, Window, versions};
use mnemo::{MemPath, Seq};

const PAGE: usize = 20;

fn memory_versions(c: &mut Criterion) {
    let root = MemPath::absolute("/memories").expect("root");
    for events in common::sizes(&[1_000, 1_000_000], &[1_000, 5_000]) {
        let template = common::view_heavy_log(events as u64);
        let store = Store::open_read_only(&template).expect("open the store read-only");
        let journal = Journal::of(&store)
            .expect("journal")
            .expect("the index keeps a journal");
        let mut group = c.benchmark_group(format!("memory_versions-{events}"));
        group.sample_size(20);
        group.sampling_mode(SamplingMode::Flat);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
        let page = |before| {
            let window = Window {
                before,
                memory: None,
                limit: PAGE,
            };
            journal.page(&root, window, |_| true).expect("page")
        };
        // The cursor of the 100th page (or of the last, for a store with fewer).
        let mut before = None;
        let mut pages = 1;
        while pages < 100 {
            let (found, more) = page(before);
            if !more {
                break;
            }
            before = found.last().map(|v| (v.seq, v.memory));
            pages += 1;
        }
        println!("note: memory_versions-{events}: page_100 measures page {pages}");
        group.bench_function("first_page", |b| {
            b.iter(|| assert_eq!(page(None).0.len(), PAGE));
        });
        group.bench_function("page_100", |b| {
            b.iter(|| assert!(!page(before).0.is_empty()));
        });
        if events <= 1_000 {
            group.bench_function("replay_first_page", |b| {
                b.iter(|| {
                    let mut all = versions(&store, &root, Seq(u64::MAX), |_| true).expect("replay");
                    all.sort_by_key(|v| std::cmp::Reverse((v.seq, v.memory)));
                    all.truncate(PAGE);
                    assert_eq!(all.len(), PAGE);
                });
            });
        }
        if events
            == *common::sizes(&[1_000, 1_000_000], &[1_000, 5_000])
                .last()
                .unwrap_or(&0)
        {
            drop(journal);
            drop(store);
            cold_after_a_move(&mut group, &template, &root);
        }
        group.finish();
    }
}

/// `cold_first_page_after_a_directory_move` on a copy of `template` whose log ends with
/// `/memories/d00` moved away and back.
fn cold_after_a_move(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    template: &std::path::Path,
    root: &MemPath,
) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("moved.mnemo.db");
    common::copy_dir(template, &path);
    {
        let client = mnemo::MnemoClient::open(&path, "bench").expect("open the copy");
        let tool = mnemo::MnemoMemoryToolServer::new(client.clone());
        for (from, to) in [
            ("/memories/d00", "/memories/moved"),
            ("/memories/moved", "/memories/d00"),
        ] {
            common::ok(&tool.handle(
                &serde_json::json!({"command": "rename", "old_path": from, "new_path": to}),
            ));
        }
    }
    group.bench_function("cold_first_page_after_a_directory_move", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Store::open(&path).expect("open the store");
                let journal = Journal::of(&store).expect("journal").expect("a journal");
                let window = Window {
                    before: None,
                    memory: None,
                    limit: PAGE,
                };
                let started = std::time::Instant::now();
                let (page, _) = journal.page(root, window, |_| true).expect("page");
                spent += started.elapsed();
                assert_eq!(page.len(), PAGE);
            }
            spent
        });
    });
}

criterion_group!(benches, memory_versions);
criterion_main!(benches);
