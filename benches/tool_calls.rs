//! One memory-tool call through `MnemoMemoryToolServer::handle`, for each command, under each
//! durability mode (`fsync`, the default; `flush`; `buffered`).
//!
//! Every timed call is valid (none answers with an error):
//!
//! * `create` makes a new file per call (a counter names it);
//! * `view_file` reads a 20-line note; `view_dir` lists a small directory (2 subdirectories,
//!   15 files);
//! * `str_replace` swaps `status: open` and `status: done` in a 20-line note, back and forth;
//! * `insert` adds a line after line 1 of a log file, which is deleted and created again, outside
//!   the timed part, every 100 inserts so it stays between 1 and 101 lines;
//! * `delete` removes a file created in the untimed setup (`iter_batched`);
//! * `rename` moves a note between two names, back and forth.
//!
//! `str_replace_repeated` (buffered only) is the pathological case: a 1 MiB file of one repeated
//! byte and an `old_str` of 1,000 of it, which occurs about a million times, overlapping; the
//! answer is the multiple-occurrences error. Restarting the search at each match made this about a
//! billion byte comparisons per call; one pass makes it about two million.
//!
//! `large_create` is what the value file costs a call: creates either side of the size whose
//! payload goes there, and one-line edits spread over a 2 MB file.
//!
//! Each mode has its own store, which also holds 1,000 other files so the index is not trivially
//! small. Every call, reads included, appends one event; only mutations wait for the flush or the
//! fsync.

mod common;

use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::{Value, json};

const BACKGROUND_FILES: usize = 1_000;
const INSERT_RESET_EVERY: u64 = 100;

/// A 20-line note of about 1 KiB, with one `status: open` line.
fn note() -> String {
    let mut text = String::from("# Project notes\nstatus: open\n");
    for i in 3..=20 {
        text.push_str(&format!(
            "- line {i}: the user prefers concise answers and short code samples\n"
        ));
    }
    text
}

/// What `create` writes: a typical small memory file (about 160 bytes).
const CREATE_TEXT: &str = "# Preference\nThe user prefers concise answers, British spelling and code samples in Rust.\nConfirmed in the session about the memory store.\n";

const INSERT_LOG: &str = "# Log\n";

fn call(server: &MnemoMemoryToolServer, input: Value) {
    common::ok(&server.handle(&input));
}

/// A store with `durability` holding the background files and the notes the calls work on.
fn fixture(durability: Durability) -> common::Fixture {
    // Built buffered so the fill is quick, then reopened with the mode under test.
    let fixture = common::fresh(Durability::Buffered);
    let background = if common::test_mode() {
        100
    } else {
        BACKGROUND_FILES
    };
    let server = &fixture.server;
    common::fill(server, "/memories/background", background);
    for (path, text) in [
        ("/memories/notes/view.md", note()),
        ("/memories/notes/edit.md", note()),
        ("/memories/notes/rename-a.md", note()),
        ("/memories/notes/insert.md", INSERT_LOG.to_string()),
    ] {
        call(
            server,
            json!({"command": "create", "path": path, "file_text": text}),
        );
    }
    for i in 0..15 {
        let path = match i {
            0..5 => format!("/memories/small/f{i}.md"),
            5..10 => format!("/memories/small/a/f{i}.md"),
            _ => format!("/memories/small/b/f{i}.md"),
        };
        call(
            server,
            json!({"command": "create", "path": path, "file_text": CREATE_TEXT}),
        );
    }
    let path = fixture.path();
    common::Fixture::reopen(fixture, &path, durability)
}

fn tool_calls(c: &mut Criterion) {
    let modes = [Durability::Fsync, Durability::Flush, Durability::Buffered];
    let fixtures: Vec<(Durability, common::Fixture)> =
        modes.iter().map(|&d| (d, fixture(d))).collect();

    let mut group = c.benchmark_group("tool_call");
    group.sample_size(50);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let mut n = 0u64;
        group.bench_function(BenchmarkId::new("create", durability.name()), |b| {
            b.iter(|| {
                n += 1;
                call(
                    server,
                    json!({
                        "command": "create",
                        "path": format!("/memories/created/{}/c{n}.md", n / 1000),
                        "file_text": CREATE_TEXT,
                    }),
                );
            });
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let input = json!({"command": "view", "path": "/memories/notes/view.md"});
        group.bench_function(BenchmarkId::new("view_file", durability.name()), |b| {
            b.iter(|| common::ok(&server.handle(&input)));
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let input = json!({"command": "view", "path": "/memories/small"});
        group.bench_function(BenchmarkId::new("view_dir", durability.name()), |b| {
            b.iter(|| common::ok(&server.handle(&input)));
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let inputs = [
            json!({"command": "str_replace", "path": "/memories/notes/edit.md",
                   "old_str": "status: open", "new_str": "status: done"}),
            json!({"command": "str_replace", "path": "/memories/notes/edit.md",
                   "old_str": "status: done", "new_str": "status: open"}),
        ];
        let mut flip = 0;
        group.bench_function(BenchmarkId::new("str_replace", durability.name()), |b| {
            b.iter(|| {
                common::ok(&server.handle(&inputs[flip]));
                flip ^= 1;
            });
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let mut inserted = 0u64;
        group.bench_function(BenchmarkId::new("insert", durability.name()), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    if inserted % INSERT_RESET_EVERY == INSERT_RESET_EVERY - 1 {
                        call(
                            server,
                            json!({"command": "delete", "path": "/memories/notes/insert.md"}),
                        );
                        call(
                            server,
                            json!({"command": "create", "path": "/memories/notes/insert.md",
                                   "file_text": INSERT_LOG}),
                        );
                    }
                    inserted += 1;
                    let input = json!({
                        "command": "insert",
                        "path": "/memories/notes/insert.md",
                        "insert_line": 1,
                        "insert_text": format!("- entry {inserted}: the agent noted a decision\n"),
                    });
                    let start = Instant::now();
                    let out = server.handle(&input);
                    timed += start.elapsed();
                    common::ok(&out);
                }
                timed
            });
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let mut n = 0u64;
        group.bench_function(BenchmarkId::new("delete", durability.name()), |b| {
            b.iter_batched(
                || {
                    n += 1;
                    let path = format!("/memories/doomed/d{n}.md");
                    call(
                        server,
                        json!({"command": "create", "path": path, "file_text": CREATE_TEXT}),
                    );
                    json!({"command": "delete", "path": path})
                },
                |input| common::ok(&server.handle(&input)),
                BatchSize::SmallInput,
            );
        });
    }

    for (durability, fixture) in &fixtures {
        let server = &fixture.server;
        let inputs = [
            json!({"command": "rename", "old_path": "/memories/notes/rename-a.md",
                   "new_path": "/memories/notes/rename-b.md"}),
            json!({"command": "rename", "old_path": "/memories/notes/rename-b.md",
                   "new_path": "/memories/notes/rename-a.md"}),
        ];
        let mut flip = 0;
        group.bench_function(BenchmarkId::new("rename", durability.name()), |b| {
            b.iter(|| {
                common::ok(&server.handle(&inputs[flip]));
                flip ^= 1;
            });
        });
    }

    group.finish();
}

fn str_replace_repeated(c: &mut Criterion) {
    let fixture = common::fresh(Durability::Buffered);
    let server = &fixture.server;
    call(
        server,
        json!({"command": "create", "path": "/memories/repeated.txt",
               "file_text": "a".repeat(1 << 20)}),
    );
    let old = "a".repeat(1_000);
    let input = json!({"command": "str_replace", "path": "/memories/repeated.txt",
                       "old_str": old, "new_str": "b"});
    let want = format!(
        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: 1. Please ensure it is unique"
    );
    let mut group = c.benchmark_group("tool_call");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function(BenchmarkId::new("str_replace_repeated", "buffered"), |b| {
        b.iter(|| {
            let out = server.handle(&input);
            assert_eq!(out["content"], want.as_str(), "unexpected answer");
        });
    });
    group.finish();
}

/// `large_create`: what the value file costs a call. A `create` of a text just under the size
/// whose payload goes to the value file (30,000 bytes: the payload stays in sled's record) beside
/// one just over it (36,000 bytes: the payload appended to `values` and `fdatasync`ed before the
/// record, in every mode), under `fsync` and `buffered`, in one run; and a one-line
/// `str_replace` in a 2 MB file (its chunk stored as pieces of the value file once the index is
/// written, buffered).
fn large_create(c: &mut Criterion) {
    let mut group = c.benchmark_group("large_create");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    let text = |bytes: usize| common::text::numbered_lines(bytes, "a remembered");
    for durability in [Durability::Fsync, Durability::Buffered] {
        let fixture = common::fresh(durability);
        let server = &fixture.server;
        for bytes in [30_000usize, 36_000] {
            let body = text(bytes);
            let mut n = 0u64;
            group.bench_function(
                BenchmarkId::new(format!("{}/{bytes}", durability.name()), "create"),
                |b| {
                    b.iter(|| {
                        n += 1;
                        call(
                            server,
                            json!({"command": "create", "path": format!("/memories/large/{bytes}/c{n}.md"), "file_text": body}),
                        );
                    });
                },
            );
        }
    }
    let fixture = common::fresh(Durability::Buffered);
    let server = &fixture.server;
    let big = text(2_000_000);
    let lines = big.lines().count();
    // 7919 is prime: the lines edited are a permutation of the file's until every one is.
    assert!(lines % 7919 != 0, "{lines} lines");
    call(
        server,
        json!({"command": "create", "path": "/memories/big.txt", "file_text": big}),
    );
    server.client().flush_index().expect("write the index");
    let mut n = 0usize;
    group.bench_function(
        BenchmarkId::new("buffered/2000000", "str_replace_spread"),
        |b| {
            b.iter(|| {
                // A different line each call, spread over the file, each edited once.
                let line = (n * 7919) % lines;
                n += 1;
                call(
                    server,
                    json!({"command": "str_replace", "path": "/memories/big.txt",
                           "old_str": format!("a remembered line {line:>10}\n"),
                           "new_str": format!("a remembered line {line:>10} (edited {n})\n")}),
                );
            });
        },
    );
    group.finish();
}

criterion_group!(benches, tool_calls, str_replace_repeated, large_create);
criterion_main!(benches);
