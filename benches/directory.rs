//! Directory calls over large directories: `delete` of a directory of 1,000, 10,000 and 100,000
//! files (which unlinks the directory and leaves its entries to the trash, collected by later
//! writes, so it should not grow with the files), and `view` (two levels deep) of 1,000 and 10,000
//! files, which does. (A directory `rename` is in `benches/rename.rs`.)
//!
//! The directories are `/memories/big/dNNNN/fNNNNNN.txt`, 100 files per subdirectory, built once
//! per size by `common::fill` (16 threads, so the writer commits in groups) and cached under
//! `target/bench-fixtures/`. A delete destroys its fixture, so every iteration's untimed setup
//! copies the cached store, opens the copy with the mode under test, lists the directory once and
//! writes one other file (so sled's cache is warm and the delete is not the first write since the
//! open, as in a long-running server); only the `delete` call is timed.
//! Throughput is in files.

mod common;

use std::time::Duration;

use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use mnemo::Durability;
use serde_json::json;

const DIR: &str = "/memories/big";

fn delete(c: &mut Criterion) {
    let mut group = c.benchmark_group("dir_delete");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(500));
    for durability in [Durability::Fsync, Durability::Buffered] {
        for files in common::sizes(&[1_000, 10_000, 100_000], &[1_000]) {
            group.throughput(Throughput::Elements(files as u64));
            // Keep the iteration count low: each one copies and opens a store.
            group.measurement_time(Duration::from_millis(match files {
                0..=1_000 => 1_000,
                _ => 2_000,
            }));
            let mut template = None;
            group.bench_function(BenchmarkId::new(durability.name(), files), |b| {
                let template = template
                    .get_or_insert_with(|| common::directory_template(files))
                    .clone();
                b.iter_batched(
                    || {
                        let fixture = common::Fixture::copy_of(&template, durability);
                        let server = &fixture.server;
                        common::ok(&server.handle(&json!({"command": "view", "path": DIR})));
                        // The timed delete is not the store's first write since it opened.
                        common::ok(&server.handle(&json!({
                            "command": "create",
                            "path": "/memories/warm.md",
                            "file_text": "warm-up write\n",
                        })));
                        fixture
                    },
                    |fixture| {
                        let out = fixture
                            .server
                            .handle(&json!({"command": "delete", "path": DIR}));
                        common::ok(&out);
                        // Returned, so the store is closed and removed outside the timed part.
                        fixture
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

fn view(c: &mut Criterion) {
    let mut group = c.benchmark_group("dir_view");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for files in common::sizes(&[1_000, 10_000], &[1_000]) {
        group.throughput(Throughput::Elements(files as u64));
        let mut fixture = None;
        group.bench_function(BenchmarkId::new("fsync", files), |b| {
            let fixture = fixture.get_or_insert_with(|| {
                common::Fixture::copy_of(&common::directory_template(files), Durability::Fsync)
            });
            let input = json!({"command": "view", "path": DIR});
            // The header line, the directory itself, its subdirectories and every file.
            let out = fixture.server.handle(&input);
            let lines = out["content"].as_str().map(|s| s.lines().count());
            assert_eq!(lines, Some(2 + files / 100 + files), "{out}");
            b.iter(|| common::ok(&fixture.server.handle(&input)));
        });
    }
    group.finish();
}

criterion_group!(benches, delete, view);
criterion_main!(benches);
