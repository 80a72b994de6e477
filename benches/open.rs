//! Opening a store of 1,000,000 events: `Store::open` (sled and the format check) and
//! `MnemoClient::open` (that, the index catch-up check and the writer thread).
//!
//! The store is a private copy of the cached synthetic log of `common::event_log` (opening and
//! closing a sled store writes to it; the cache stays as built). Its index is caught up, so an open
//! reads the head and the index's applied seq and replays nothing (checked before timing). Each
//! iteration opens the store and closes it; only the open is timed.

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::testing::Store;
use mnemo::{MnemoClient, Seq};

fn open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for events in common::sizes(&[1_000_000], &[1_000]) {
        let mut copy = None;
        let mut fixture = || {
            let (_dir, path) = copy.get_or_insert_with(|| {
                let dir = tempfile::tempdir_in(common::cache_dir()).expect("temporary directory");
                let path = dir.path().join("store");
                common::copy_dir(&common::event_log(events as u64), &path);
                let store = Store::open(&path).expect("open");
                let head = store.head().expect("head");
                assert_eq!(head.seq, Seq(events as u64));
                assert_eq!(
                    store.index().applied().expect("applied"),
                    head.seq,
                    "the index must be caught up, or the first open would replay the log"
                );
                (dir, path)
            });
            path.clone()
        };
        group.bench_function(BenchmarkId::new("Store::open", events), |b| {
            let path = fixture();
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let store = Store::open(&path).expect("open");
                    timed += start.elapsed();
                    assert_eq!(store.head().expect("head").seq, Seq(events as u64));
                    drop(store);
                }
                timed
            });
        });
        group.bench_function(BenchmarkId::new("MnemoClient::open", events), |b| {
            let path = fixture();
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let client = MnemoClient::open(&path, "bench").expect("open");
                    timed += start.elapsed();
                    assert_eq!(client.head().expect("head").seq, Seq(events as u64));
                    drop(client);
                }
                timed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, open);
criterion_main!(benches);
