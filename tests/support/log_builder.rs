//! A long log written fast, for the benches' fixtures and the tests that need a log longer than
//! the writer would write in their time.

use std::path::Path;

use mnemo::event::Salt;
use mnemo::testing::{MemKv, Projection, Store};
use mnemo::tool::{Command, Limits, Semantics};
use mnemo::{Body, Durability, Event, EventHash, Profile, Seq, ToolCall};

/// The agent every call of a built log is attributed to.
pub const MIX_AGENT: &str = "bench";

/// Writes the log whose `seq`-th call is `command(seq)`, `events` long, into a new store at
/// `path`, without going through the writer: a second thread answers each call against an
/// in-memory replay (the same step the writer runs) and makes the frames, salted as the writer
/// salts every event; this one appends them 1,024 at a time, and the index is brought up to the
/// head at the end with `Store::catch_up`, so the result is a store `verify` finds intact.
pub fn build_log_of(path: &Path, events: u64, command: fn(u64) -> Command) {
    const BATCH: usize = 1024;
    // A fixed clock, so a rebuild makes the same bytes.
    const TIME_MS: u64 = 1_760_000_000_000;
    let started = std::time::Instant::now();
    let store = Store::open(path).expect("open store");
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<mnemo::event::Frame>>(8);
    let producer = std::thread::spawn(move || {
        let mut replay = Projection::new(MemKv::default());
        let mut prev = EventHash::ZERO;
        let mut frames = Vec::with_capacity(BATCH);
        for seq in 1..=events {
            let body = Body::Tool(ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command: command(seq),
            });
            let answer = replay
                .run_call(MIX_AGENT, None, &body, Semantics::CURRENT, Seq(seq))
                .expect("replay");
            assert!(!answer.is_error, "event {seq} failed: {}", answer.text);
            // Salted as the writer salts every event, so verifying it costs what it costs.
            let salt = Salt::random().expect("salt");
            let event = Event::answered(
                Seq(seq),
                prev,
                MIX_AGENT,
                TIME_MS + seq,
                body,
                &answer,
                salt,
            );
            let frame = event.to_frame();
            prev = frame.hash;
            frames.push(frame);
            if frames.len() == BATCH || seq == events {
                let full = std::mem::replace(&mut frames, Vec::with_capacity(BATCH));
                if tx.send(full).is_err() {
                    return;
                }
            }
        }
    });
    for frames in rx {
        store.append(&frames).expect("append");
    }
    producer.join().expect("frame producer");
    let appended = started.elapsed();
    let replayed = store.catch_up().expect("catch up the index");
    assert_eq!(
        replayed, events,
        "the index should have lagged the whole log"
    );
    store.sync(Durability::Fsync).expect("sync");
    eprintln!(
        "log of {events} events: appended in {:.1} s, index caught up in {:.1} s",
        appended.as_secs_f64(),
        (started.elapsed() - appended).as_secs_f64()
    );
}
