//! Directory rename: its cost must not grow with the number of files under the directory.
//!
//! Each iteration renames a directory holding N files back and forth (one logged `rename` call
//! through `MnemoMemoryToolServer::handle`), under the default durable mode and under `buffered`.

mod common;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::Durability;
use serde_json::json;

fn rename(c: &mut Criterion) {
    let mut group = c.benchmark_group("rename_dir");
    group.sample_size(20);
    for durability in [Durability::Fsync, Durability::Buffered] {
        // The smoke run (`--test`, a debug build) only proves the bench runs: filling 100,000
        // files there took most of CI's bench stage.
        for files in common::sizes(&[1_000, 100_000], &[1_000, 5_000]) {
            let fixture = common::fresh(Durability::Buffered);
            common::fill(&fixture.server, "/memories/big", files);
            // Reopen with the durability under test (the fill ran buffered to build it quickly).
            let path = fixture.server.client().path().to_path_buf();
            let fixture = common::Fixture::reopen(fixture, &path, durability);
            let mut flip = false;
            group.bench_with_input(
                BenchmarkId::new(durability.name(), files),
                &files,
                |b, _| {
                    b.iter(|| {
                        let (from, to) = if flip {
                            ("/memories/big2", "/memories/big")
                        } else {
                            ("/memories/big", "/memories/big2")
                        };
                        flip = !flip;
                        let out = fixture.server.handle(
                            &json!({"command": "rename", "old_path": from, "new_path": to}),
                        );
                        assert!(out.get("is_error").is_none(), "rename failed: {out}");
                    });
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, rename);
criterion_main!(benches);
