//! Reads that wait for durability, under each durability mode (`fsync`, the default; `flush`;
//! `buffered`).
//!
//! A `view` is answered at once, but it returns only once the last change it saw is durable, so
//! no answer shows a write a crash could undo (see the durability contract in
//! docs/operators.md). These groups measure what that wait costs a reading agent. Each mode has
//! its own store, shared by every agent of a group: a tree of about 200 small notes in 10 topic
//! directories, each writer agent's own directory, and the note the reader and the editor share.
//!
//! `view_after_write`: agent `reader` views a 20-line note.
//!
//! * `idle`: nothing is pending (the baseline);
//! * `own_write`: right after the reader's own `str_replace` of the note; that write was durable
//!   when it was answered, so the view finds nothing to wait for (only the view is timed);
//! * `edit`: the `str_replace` alone, as its writer sees it (for comparison);
//! * `other_write`: agent `editor`, on a thread of its own, edits the note; once the edit's event
//!   is in the log (its sync has appended it and is flushing; in `buffered` mode it is written at
//!   once), the reader views the note, and only that view is timed. It shows a write that was
//!   answered but is not durable yet, so it waits for the rest of that write's sync.
//!
//! `dir_view`: agent `reader` views `/memories` (every note, two levels down), as an agent does
//! at the start of a session.
//!
//! * `quiet`: nothing else runs (the baseline);
//! * `writers_3`: while 3 other agents, each on a thread of its own, keep working on the notes
//!   of their own directory without a pause (a view of a note, a `str_replace` of it, an
//!   `insert` into a log, a view of the log's top, a `create` and a `delete` of a scratch file).
//!   A view then often shows a change that is still being synced, and waits for it; the writers
//!   also compete for the writer lock and the CPU. `buffered`, where nothing waits, shows that
//!   contention alone, and more of it: its writers never sleep on a sync.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::{Value, json};

/// Topic directories under `/memories`, and notes in each: about 200 files in the listing.
const TOPICS: [&str; 10] = [
    "projects",
    "people",
    "preferences",
    "decisions",
    "bugs",
    "meetings",
    "reading",
    "tools",
    "travel",
    "health",
];
const NOTES_PER_TOPIC: usize = 20;

/// Writer agents of `dir_view/writers_3`.
const WRITERS: usize = 3;

/// A writer's log is deleted and created again after this many inserts, so it stays short.
const LOG_RESET_EVERY: u64 = 50;

/// How long the reader sleeps between looks at the log's head in `other_write` (Linux adds its
/// timer slack, about 50 µs): short beside a sync, without taking a core from the editor.
const POLL: Duration = Duration::from_micros(10);

/// The note the reader views and the editor edits.
const SHARED: &str = "/memories/projects/plan.md";

/// A 20-line note of about 1 KiB, with one `status: open` line.
fn note(title: &str) -> String {
    let mut text = format!("# {title}\nstatus: open\n");
    for i in 3..=20 {
        text.push_str(&format!(
            "- item {i}: the user prefers concise answers and short code samples\n"
        ));
    }
    text
}

fn call(server: &MnemoMemoryToolServer, input: &Value) -> Value {
    let out = server.handle(input);
    common::ok(&out);
    out
}

fn create(server: &MnemoMemoryToolServer, path: &str, text: &str) {
    call(
        server,
        &json!({"command": "create", "path": path, "file_text": text}),
    );
}

/// The two `str_replace` calls that flip `path`'s status line, `open` → `done` and back.
fn flips(path: &str) -> [Value; 2] {
    [
        json!({"command": "str_replace", "path": path,
               "old_str": "status: open", "new_str": "status: done"}),
        json!({"command": "str_replace", "path": path,
               "old_str": "status: done", "new_str": "status: open"}),
    ]
}

/// The status line `flips(..)[flip]` leaves.
fn status_after(flip: usize) -> &'static str {
    if flip == 0 {
        "status: done"
    } else {
        "status: open"
    }
}

fn writer_dir(w: usize) -> String {
    format!("/memories/agent-{w}")
}

/// A store with `durability` holding the tree every group reads.
fn fixture(durability: Durability) -> common::Fixture {
    // Built buffered so it is quick, then reopened with the mode under test.
    let fixture = common::fresh(Durability::Buffered);
    let server = &fixture.server;
    let notes = if common::test_mode() {
        2
    } else {
        NOTES_PER_TOPIC
    };
    for topic in TOPICS {
        for i in 0..notes {
            create(
                server,
                &format!("/memories/{topic}/note-{i:02}.md"),
                &format!("# {topic} {i}\n- noted in an earlier session\n- still relevant: yes\n"),
            );
        }
    }
    create(server, SHARED, &note("Plan"));
    for w in 0..WRITERS {
        let dir = writer_dir(w);
        create(server, &format!("{dir}/notes.md"), &note("Working notes"));
        create(server, &format!("{dir}/log.md"), "# Log\n");
    }
    let path = fixture.path();
    common::Fixture::reopen(fixture, &path, durability)
}

/// Waits until the store has written everything the calls so far left to write in the background
/// (events, index batches), then gives sled a moment: a bench that made thousands of writes
/// otherwise leaves that work to slow down the next one.
fn settle(server: &MnemoMemoryToolServer) {
    // A multi-key read writes the queue and the index first.
    server.client().head().expect("head");
    if !common::test_mode() {
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The seq of the last event in the log as stored: it moves when a sync (or, in `buffered`
/// mode, a write) appends events, before any flush. Reading it takes no writer lock and records
/// no event.
fn log_head(server: &MnemoMemoryToolServer) -> u64 {
    let store = server.client().store().expect("a store open here");
    store.head().expect("head").seq.0
}

/// The server of another agent on `fixture`'s store.
fn agent(fixture: &common::Fixture, id: &str) -> MnemoMemoryToolServer {
    let client = fixture.server.client().with_agent(id).expect("agent id");
    MnemoMemoryToolServer::new(client)
}

/// Writer `w`'s session, until `stop`: calls on the notes of its own directory, in a cycle.
fn writer_session(server: &MnemoMemoryToolServer, w: usize, stop: &AtomicBool) {
    let dir = writer_dir(w);
    let notes = format!("{dir}/notes.md");
    let log = format!("{dir}/log.md");
    let scratch = format!("{dir}/scratch.md");
    let view_notes = json!({"command": "view", "path": notes});
    let view_log = json!({"command": "view", "path": log, "view_range": [1, 5]});
    let flips = flips(&notes);
    let (mut flip, mut inserted) = (0, 0u64);
    while !stop.load(Ordering::Relaxed) {
        call(server, &view_notes);
        call(server, &flips[flip]);
        flip ^= 1;
        inserted += 1;
        if inserted % LOG_RESET_EVERY == 0 {
            call(server, &json!({"command": "delete", "path": log}));
            create(server, &log, "# Log\n");
        }
        call(
            server,
            &json!({"command": "insert", "path": log, "insert_line": 1,
                    "insert_text": format!("- step {inserted}: checked the plan and noted the outcome\n")}),
        );
        call(server, &view_log);
        create(server, &scratch, "draft: to be folded into the notes\n");
        call(server, &json!({"command": "delete", "path": scratch}));
    }
}

fn view_after_write(c: &mut Criterion, fixtures: &[(Durability, common::Fixture)]) {
    let mut group = c.benchmark_group("view_after_write");
    group.sample_size(30);
    let view = json!({"command": "view", "path": SHARED});

    for (durability, fixture) in fixtures {
        let reader = agent(fixture, "reader");
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        settle(&reader);
        group.bench_function(BenchmarkId::new("idle", durability.name()), |b| {
            b.iter(|| call(&reader, &view));
        });

        // Only the view is timed, but every iteration also pays the write: a short measurement
        // keeps the wall time of the durable modes within seconds.
        group.warm_up_time(Duration::from_millis(200));
        group.measurement_time(Duration::from_millis(500));
        let flips = flips(SHARED);
        let mut flip = 0;
        settle(&reader);
        group.bench_function(BenchmarkId::new("own_write", durability.name()), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    call(&reader, &flips[flip]);
                    let start = Instant::now();
                    let out = reader.handle(&view);
                    timed += start.elapsed();
                    common::ok(&out);
                    assert!(
                        out["content"]
                            .as_str()
                            .is_some_and(|t| t.contains(status_after(flip)))
                    );
                    flip ^= 1;
                }
                timed
            });
        });

        // What the edit itself costs its writer in this run, for comparison with the wait below.
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        settle(&reader);
        group.bench_function(BenchmarkId::new("edit", durability.name()), |b| {
            b.iter(|| {
                call(&reader, &flips[flip]);
                flip ^= 1;
            });
        });

        // The editor edits on its thread when told to, and says when its edit was answered.
        let editor = agent(fixture, "editor");
        let (go, edit) = mpsc::channel::<usize>();
        let (edited, done) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let flips = &flips;
            scope.spawn(move || {
                for flip in edit {
                    call(&editor, &flips[flip]);
                    if edited.send(()).is_err() {
                        return;
                    }
                }
            });
            settle(&reader);
            group.bench_function(BenchmarkId::new("other_write", durability.name()), |b| {
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        let want = status_after(flip);
                        let mut seen = log_head(&reader);
                        go.send(flip).expect("editor thread");
                        // Views before the edit is answered would show the old text (and each
                        // add an event for the edit's sync to write), so the reader first
                        // watches the log's head: it moves when the sync has appended the
                        // edit's event and starts the flush. A view that still misses the
                        // edit (the head moved for other events) is not timed.
                        loop {
                            loop {
                                let head = log_head(&reader);
                                if head > seen {
                                    seen = head;
                                    break;
                                }
                                std::thread::sleep(POLL);
                            }
                            let start = Instant::now();
                            let out = reader.handle(&view);
                            let took = start.elapsed();
                            common::ok(&out);
                            if out["content"].as_str().is_some_and(|t| t.contains(want)) {
                                timed += took;
                                break;
                            }
                        }
                        done.recv().expect("editor thread");
                        flip ^= 1;
                    }
                    timed
                });
            });
            drop(go);
        });
    }
    group.finish();
}

fn dir_view(c: &mut Criterion, fixtures: &[(Durability, common::Fixture)]) {
    let mut group = c.benchmark_group("dir_view");
    group.sample_size(30);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    let view = json!({"command": "view", "path": "/memories"});

    for (durability, fixture) in fixtures {
        let reader = agent(fixture, "reader");
        settle(&reader);
        group.bench_function(BenchmarkId::new("quiet", durability.name()), |b| {
            b.iter(|| call(&reader, &view));
        });

        let writers: Vec<MnemoMemoryToolServer> = (0..WRITERS)
            .map(|w| agent(fixture, &format!("agent-{w}")))
            .collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for (w, server) in writers.iter().enumerate() {
                let stop = &stop;
                scope.spawn(move || writer_session(server, w, stop));
            }
            group.bench_function(BenchmarkId::new("writers_3", durability.name()), |b| {
                b.iter(|| call(&reader, &view));
            });
            stop.store(true, Ordering::Relaxed);
        });
        settle(&reader);
    }
    group.finish();
}

fn read_wait(c: &mut Criterion) {
    let fixtures: Vec<(Durability, common::Fixture)> =
        [Durability::Fsync, Durability::Flush, Durability::Buffered]
            .into_iter()
            .map(|d| (d, fixture(d)))
            .collect();
    view_after_write(c, &fixtures);
    dir_view(c, &fixtures);
}

criterion_group!(benches, read_wait);
criterion_main!(benches);
