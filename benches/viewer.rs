//! What each page of the viewer (`/ui/`) costs on a long log: the reads behind the timeline, one
//! event, a file's history and the tree at a seq, on a store of 1,000,000 events of the
//! view-heavy log (`common::view_heavy_command`: a tree of 2,000 notes, then one call in 20 views
//! `/memories` among views, edits and renames), through a `MnemoClient` on the store, the calls
//! the server's routes make.
//!
//! - `timeline_newest`: the newest page, unfiltered (`log` from head − 49).
//! - `timeline_filtered`: the newest page of one agent's renames, newest first, looking at most
//!   at `SCAN` events (the viewer asks for the next stretch when a page is not full);
//!   `timeline_filter_matching_nothing`: the same stretch for a filter no event passes.
//! - `event_near_head`, `event_middle`: `show` of one event (its answer re-derived).
//! - `tree_middle`: the tree after a seq in the middle of the log (`ls --at`).
//! - `file_history`: every event of one note, through its renames.
//!
//! The first call of each kind runs in criterion's warm-up, so what is measured is a viewer someone
//! is already looking at (the trees and the files followed that the store keeps, built); the note
//! printed first gives the first `show`'s cost on a store just opened.

mod common;

use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use mnemo::{LogQuery, MemPath, MnemoClient, Seq};

/// The events the viewer's timeline reads per request when it filters (`SCAN` in `app.js`).
const SCAN: u64 = 20_000;

fn viewer(c: &mut Criterion) {
    let events = common::sizes(&[1_000_000], &[5_000])[0] as u64;
    let template = common::view_heavy_log(events);
    let client = MnemoClient::builder(&template)
        .read_only()
        .open()
        .expect("open the store read-only");
    let mut group = c.benchmark_group(format!("viewer-{events}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));

    let middle = Seq(events / 2);
    let cold = std::time::Instant::now();
    client.show(middle).expect("show the middle event");
    println!(
        "note: viewer-{events}: first show of event {middle} took {:.3} s",
        cold.elapsed().as_secs_f64()
    );

    group.bench_function("timeline_newest", |b| {
        b.iter(|| {
            let page = client
                .log(&LogQuery {
                    from: events - 49,
                    limit: Some(50),
                    ..LogQuery::default()
                })
                .expect("log");
            assert_eq!(page.len(), 50);
        });
    });
    // The viewer's stretch: a filter that matches nothing costs the most, every event of the
    // stretch read and none shown.
    for (name, agent, command) in [
        ("timeline_filtered", "bench", "rename"),
        ("timeline_filter_matching_nothing", "nobody", "create"),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                client
                    .log(&LogQuery {
                        agent: Some(agent.into()),
                        command: Some(command.into()),
                        before: Some(events + 1),
                        limit: Some(50),
                        scan: Some(SCAN),
                        ..LogQuery::default()
                    })
                    .expect("log")
            });
        });
    }
    group.bench_function("event_near_head", |b| {
        b.iter(|| client.show(Seq(events - 7)).expect("show"));
    });
    group.bench_function("event_middle", |b| {
        b.iter(|| client.show(middle).expect("show"));
    });
    let root = MemPath::absolute("/memories").expect("path");
    group.bench_function("tree_middle", |b| {
        b.iter(|| {
            let tree = client.tree_at(&root, Some(middle)).expect("tree");
            assert_eq!(tree.len() as u64, common::VIEW_HEAVY_FILES);
        });
    });
    let note = MemPath::absolute("/memories/d07/f0712.md").expect("path");
    group.bench_function("file_history", |b| {
        b.iter(|| {
            let history = client.history(&note).expect("history");
            assert!(!history.is_empty());
        });
    });
    group.finish();
}

criterion_group!(benches, viewer);
criterion_main!(benches);
