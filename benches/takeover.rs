//! A fleet's takeover: a node taking a store over reads the store's write-ahead log from the
//! bucket (every object, fetched 32 at once, each record checked against the chain) and builds
//! its copy from it (the index included), before the store serves again. Measured on the agent
//! mix log of 1,000 and 100,000 events, committed 8 events to an object (a busy store's group
//! commits), in a `file://` bucket on this disk (S3 adds a round trip per 32 objects).
//!
//! The targets: 1 s at 1,000 events, 5 s at 100,000 (the time from the old lease's expiry
//! also holds the lease's judgement, at most a beat).
//!
//! `takeover_again`: a node taking back a store it held, whose copy stops 800 events (100
//! objects) before the log's end: it checks its recorded position (one read), reads the log from
//! there and appends what its copy lacks.
//!
//! `takeover_read`: reading a lone writer's log of one event an object, as committed and after
//! its holder packed it.

mod common;

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::Seq;
use mnemo::testing::Store;
use mnemo::testing::fleet::bucket::Bucket;
use mnemo::testing::fleet::copy;
use mnemo::testing::fleet::wal::{Position, Wal};

/// Events per commit object.
const PER_OBJECT: usize = 8;

/// The agent mix log of `events` events committed to a new store's log in a `file://` bucket in a
/// temporary directory, `per_object` events an object: the directory, the log, its records, and
/// the position just after event `mark`.
fn logged(
    events: usize,
    per_object: usize,
    mark: usize,
) -> (tempfile::TempDir, Wal, Vec<(Seq, Vec<u8>)>, Position) {
    let log = common::event_log(events as u64);
    let records: Vec<(Seq, Vec<u8>)> = Store::open(&log)
        .expect("open the log")
        .records(Seq(1))
        .map(|r| r.expect("a record"))
        .collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bucket = Arc::new(
        Bucket::open(&format!("file://{}", dir.path().join("bucket").display()))
            .expect("the bucket"),
    );
    let wal = Wal::new(bucket, "bench");
    let mut holder = wal.take(1, &Position::START).expect("take").holder;
    let mut marked = Position::START;
    for chunk in records.chunks(per_object) {
        holder.commit(chunk).expect("commit");
        if chunk.last().is_some_and(|(seq, _)| seq.0 == mark as u64) {
            marked = holder.position();
        }
    }
    (dir, wal, records, marked)
}

fn takeover(c: &mut Criterion) {
    let mut group = c.benchmark_group("takeover");
    group.sample_size(10);
    for events in common::sizes(&[1_000, 100_000], &[1_000]) {
        let (dir, wal, _, _) = logged(events, PER_OBJECT, 0);
        let mut epoch = 1;
        let copy_at = dir.path().join("copy");
        group.bench_with_input(BenchmarkId::new("events", events), &events, |b, _| {
            b.iter(|| {
                epoch += 1;
                let taken = wal.take(epoch, &Position::START).expect("take over");
                copy::build(&copy_at, &taken.records).expect("the copy");
            });
        });
    }
    group.finish();
}

fn takeover_again(c: &mut Criterion) {
    let mut group = c.benchmark_group("takeover_again");
    group.sample_size(10);
    for events in common::sizes(&[100_000], &[1_000]) {
        let behind = events - 800;
        let (dir, wal, records, left) = logged(events, PER_OBJECT, behind);
        assert_ne!(
            left,
            Position::START,
            "a position 800 events before the end"
        );
        let earlier = dir.path().join("earlier");
        copy::build(&earlier, &records[..behind]).expect("the earlier copy");
        let mut epoch = 1;
        let copy_at = dir.path().join("copy");
        group.bench_with_input(BenchmarkId::new("events", events), &events, |b, _| {
            b.iter_batched(
                || {
                    let _ = std::fs::remove_dir_all(&copy_at);
                    common::copy_dir(&earlier, &copy_at);
                },
                |()| {
                    epoch += 1;
                    assert!(wal.holds(&left).expect("holds"));
                    let taken = wal.take(epoch, &left).expect("take back");
                    let ahead = copy::extend(&copy_at, &left, &taken.records).expect("extend");
                    assert_eq!(ahead.map(|a| a.len()), Some(0), "the copy is brought up");
                },
                criterion::BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

/// A lone writer's log (one event an object, as `replicated` durability commits each call alone)
/// read whole by a node taking the store over: as the objects were committed, and after the
/// holder packed them (`fleet::pack`), with the events of up to 256 objects in each pack.
fn takeover_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("takeover_read");
    group.sample_size(10);
    for events in common::sizes(&[20_000], &[600]) {
        let (_dir, wal, _, end) = logged(events, 1, events);
        let last = end.object - 1;
        let read = |wal: &Wal| {
            let (_, read) = wal.scan(&Position::START).expect("read the log");
            assert_eq!(read.len(), events);
        };
        group.bench_with_input(BenchmarkId::new("unpacked", events), &events, |b, _| {
            b.iter(|| read(&wal));
        });
        // Packed as a holder packs, 256 objects at a time, leaving nothing out.
        let mut from = 1;
        while from <= last {
            let upto = (from + mnemo::testing::fleet::pack::PACK_OBJECTS - 1).min(last);
            from = wal.pack(upto, 1).expect("pack");
        }
        group.bench_with_input(BenchmarkId::new("packed", events), &events, |b, _| {
            b.iter(|| read(&wal));
        });
    }
    group.finish();
}

criterion_group!(benches, takeover, takeover_again, takeover_read);
criterion_main!(benches);
