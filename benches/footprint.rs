//! Bytes on disk: what a store costs per event and per byte of memory content.
//!
//! Not a timing bench at heart. For each case it builds a store, closes it (flushed and fsynced),
//! sums the sizes of every file in the store directory and prints
//! `bytes on disk / events` and `bytes on disk / content bytes`:
//!
//! * 10,000 `create` calls of 100 B, 1 KiB and 10 KiB each, from 16 threads, `buffered`;
//! * 10,000 `create` calls of 100 B from one agent under `fsync` (a flush and fsync per call);
//! * 100,000 events of the synthetic log of `common::build_log` (creates, views, edits, renames,
//!   deletes; the verify and open benches use 1,000,000 of them), built fresh, where content is the
//!   text the calls carried (`file_text`, `insert_text`, `new_str`).
//!
//! Criterion times one cheap thing so the bench has a figure: walking the store directory to sum
//! its size.

mod common;

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use mnemo::tool::Command;
use mnemo::{Durability, Seq, Store};
use serde_json::json;

fn row(case: &str, path: &Path, events: u64, content: u64, records: u64) {
    let disk = common::disk_bytes(path);
    // NOTE: precision loss is irrelevant for printed ratios.
    #[allow(clippy::cast_precision_loss)]
    let ratio = |n: u64| disk as f64 / n.max(1) as f64;
    println!(
        "footprint: {case:<44} events {events:>9}  content {content:>11} B  records {records:>11} B  disk {disk:>11} B  disk/event {:>8.1} B  disk/content-byte {:>6.2}  disk/record-byte {:>5.2}",
        ratio(events),
        ratio(content),
        ratio(records),
    );
}

fn record_bytes(path: &Path) -> u64 {
    let store = Store::open(path).expect("open store");
    store
        .records(Seq(1))
        .map(|r| r.expect("record").1.len() as u64)
        .sum()
}

/// Creates `files` files of `size` bytes from `threads` threads, closes the store and prints.
fn creates(files: usize, size: usize, durability: Durability, threads: usize) {
    let dir = tempfile::tempdir_in(common::cache_dir()).expect("temporary directory");
    let path = dir.path().join("bench.mnemo.db");
    let server = common::open_server(&path, durability);
    let text: String = "memory text. "
        .chars()
        .cycle()
        .take(size - 1)
        .collect::<String>()
        + "\n";
    std::thread::scope(|scope| {
        for t in 0..threads {
            let server = server.clone();
            let text = &text;
            scope.spawn(move || {
                for i in (t..files).step_by(threads) {
                    common::ok(&server.handle(&json!({
                        "command": "create",
                        "path": format!("/memories/f/d{:03}/f{i:06}.md", i / 100),
                        "file_text": text,
                    })));
                }
            });
        }
    });
    common::close(server);
    let case = format!("{files} creates of {size} B, {}", durability.name());
    row(
        &case,
        &path,
        files as u64,
        (files * size) as u64,
        record_bytes(&path),
    );
}

fn content_of(command: &Command) -> u64 {
    match command {
        Command::Create { file_text, .. } => file_text.len() as u64,
        Command::StrReplace { new_str, .. } => new_str.as_ref().map_or(0, |s| s.len() as u64),
        Command::Insert { insert_text, .. } => insert_text.len() as u64,
        _ => 0,
    }
}

fn footprint(c: &mut Criterion) {
    let (files, fsync_files) = if common::test_mode() {
        (200, 20)
    } else {
        (10_000, 10_000)
    };
    for size in [100, 1024, 10 * 1024] {
        creates(files, size, Durability::Buffered, 16);
    }
    creates(fsync_files, 100, Durability::Fsync, 1);

    let events = common::sizes(&[100_000], &[1_000])[0] as u64;
    let dir = tempfile::tempdir_in(common::cache_dir()).expect("temporary directory");
    let log = dir.path().join("store");
    common::build_log(&log, events);
    let content = (1..=events)
        .map(|seq| content_of(&common::mix_command(seq)))
        .sum();
    row(
        &format!("synthetic log of {events} events"),
        &log,
        events,
        content,
        record_bytes(&log),
    );

    c.bench_function("footprint/walk_store_dir", |b| {
        b.iter(|| common::disk_bytes(&log));
    });
}

criterion_group!(benches, footprint);
criterion_main!(benches);
