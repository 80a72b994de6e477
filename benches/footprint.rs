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
//!   text the calls carried (`file_text`, `insert_text`, `new_str`);
//! * what one call costs once the store holds a large file (`buffered`, the index written after
//!   every call, as when calls come further apart than the writer's idle time): 600 views of
//!   `/memories` and 600 views of a small file, each with and without a 15 MB file beside them,
//!   and 200 three-byte inserts into a 10 KB file and into a 10 MB file. Each prints the store's
//!   growth per call (closed and reopened before and after) and, on Linux, the bytes the process
//!   wrote per call (`wchar` in `/proc/self/io`), which sled's reuse of freed space cannot hide.
//!
//! Criterion times one cheap thing so the bench has a figure: walking the store directory to sum
//! its size.

mod common;

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use mnemo::testing::Store;
use mnemo::tool::Command;
use mnemo::{Durability, MnemoMemoryToolServer, Seq};
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

/// Bytes this process has passed to `write` and its kin so far (Linux), if known.
fn written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
}

/// Writes the index, makes the store durable, closes it, opens it and closes it again (so sled
/// has written and recovered everything it keeps), and returns its size.
fn settle(path: &Path, server: MnemoMemoryToolServer) -> u64 {
    server.client().flush_index().expect("write the index");
    common::close(server);
    common::close(common::open_server(path, Durability::Buffered));
    common::disk_bytes(path)
}

/// `lines` numbered lines of 32 bytes.
fn numbered_lines(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("line {i:>10} of a large file\n"))
        .collect()
}

/// Builds a store holding a small file, and the file `large` if given (path, content), then runs
/// `calls` calls made by `call` (given the call's number), writing the index after each, and
/// prints the store's growth and the bytes written per call; returns both.
fn per_call(
    case: &str,
    large: Option<(&str, &str)>,
    calls: usize,
    call: impl Fn(usize) -> serde_json::Value,
) -> (f64, Option<f64>) {
    let dir = tempfile::tempdir_in(common::cache_dir()).expect("temporary directory");
    let path = dir.path().join("bench.mnemo.db");
    let server = common::open_server(&path, Durability::Buffered);
    common::ok(&server.handle(&json!({
        "command": "create", "path": "/memories/small.md", "file_text": "- likes tea\n",
    })));
    if let Some((file, text)) = large {
        common::ok(&server.handle(&json!({"command": "create", "path": file, "file_text": text})));
    }
    // sled rewrites the node of its log that holds a large event while the next few events are
    // appended beside it (a bounded cost of the create): let that pass before measuring.
    for _ in 0..32 {
        common::ok(&server.handle(&json!({"command": "view", "path": "/memories/small.md"})));
        server.client().flush_index().expect("write the index");
    }
    let before = settle(&path, server);
    let server = common::open_server(&path, Durability::Buffered);
    let wrote_before = written();
    for i in 0..calls {
        common::ok(&server.handle(&call(i)));
        server.client().flush_index().expect("write the index");
    }
    // Counted up to the close (sled writes what it buffered then), not the reopen after it:
    // opening a store writes a little of sled's own (a segment's worth or more) every time.
    server.client().flush_index().expect("write the index");
    common::close(server);
    let wrote = written()
        .zip(wrote_before)
        .map(|(after, before)| after - before);
    common::close(common::open_server(&path, Durability::Buffered));
    let after = common::disk_bytes(&path);
    // NOTE: precision loss is irrelevant for printed ratios.
    #[allow(clippy::cast_precision_loss)]
    let per = |n: u64| n as f64 / calls.max(1) as f64;
    let growth = after.saturating_sub(before);
    println!(
        "footprint: {case:<52} calls {calls:>5}  store {before:>11} B -> {after:>11} B  growth/call {:>9.1} B  written/call {:>9}",
        per(growth),
        wrote.map_or("unknown".to_string(), |w| format!("{:.1} B", per(w))),
    );
    (per(growth), wrote.map(per))
}

/// Disk per call with and without a large file present.
fn beside_a_large_file() {
    let (views, inserts) = if common::test_mode() {
        (30, 10)
    } else {
        (600, 200)
    };
    let large = numbered_lines(15_000_000 / 32);
    for (what, path) in [
        ("views of /memories", "/memories"),
        ("views of a small file", "/memories/small.md"),
    ] {
        let view = |_| json!({"command": "view", "path": path});
        per_call(&format!("{what}, no large file"), None, views, view);
        per_call(
            &format!("{what}, a 15 MB file beside"),
            Some(("/memories/big.txt", &large)),
            views,
            view,
        );
    }
    let mut costs = Vec::new();
    for (what, lines) in [("10 KB", 10_000 / 32), ("10 MB", 10_000_000 / 32)] {
        let text = numbered_lines(lines);
        let insert = |i: usize| {
            json!({"command": "insert", "path": "/memories/edited.txt",
                   "insert_line": (i * 7919) % lines, "insert_text": "+a\n"})
        };
        costs.push(per_call(
            &format!("3-byte inserts into a {what} file"),
            Some(("/memories/edited.txt", &text)),
            inserts,
            insert,
        ));
    }
    println!(
        "footprint: an insert into a 10 MB file grows the store {:.2}x as much as one into a 10 KB file, and writes {}x as much",
        costs[1].0 / costs[0].0.max(1.0),
        costs[1]
            .1
            .zip(costs[0].1)
            .map_or("unknown".to_string(), |(large, small)| format!(
                "{:.2}",
                large / small.max(1.0)
            )),
    );
}

fn footprint(c: &mut Criterion) {
    beside_a_large_file();
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
