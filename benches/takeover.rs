//! A fleet's takeover: a node taking a store over reads the store's write-ahead log from the
//! bucket (every object, fetched 32 at once, each record checked against the chain) and builds
//! its copy from it (the index included), before the store serves again. Measured on the agent
//! mix log of 1,000 and 100,000 events, committed 8 events to an object (a busy store's group
//! commits), in a `file://` bucket on this disk (S3 adds a round trip per 32 objects).
//!
//! The targets: 1 s at 1,000 events, 5 s at 100,000 (the time from the old lease's expiry
//! also holds the lease's judgement, at most a beat).

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

fn takeover(c: &mut Criterion) {
    let mut group = c.benchmark_group("takeover");
    group.sample_size(10);
    for events in common::sizes(&[1_000, 100_000], &[1_000]) {
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
        for chunk in records.chunks(PER_OBJECT) {
            holder.commit(chunk).expect("commit");
        }
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

criterion_group!(benches, takeover);
criterion_main!(benches);
