//! Group commit: durable writes from 1, 4 and 16 concurrent agents.
//!
//! Each iteration makes 64 `create` calls, spread over the agents' threads, under the default
//! `fsync` durability. With one agent each call waits for its own fsync; with many, the writer
//! commits what is queued together, so one fsync acknowledges many calls.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::json;

const CALLS: usize = 64;

fn durable_writes(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_writes");
    group.sample_size(10);
    group.throughput(Throughput::Elements(CALLS as u64));
    let fixture = common::fresh(Durability::Fsync);
    let next = AtomicU64::new(0);
    for agents in [1usize, 4, 16] {
        let servers: Vec<MnemoMemoryToolServer> = (0..agents)
            .map(|a| {
                let client = fixture
                    .server
                    .client()
                    .with_agent(format!("agent-{a}"))
                    .expect("agent id");
                MnemoMemoryToolServer::new(client)
            })
            .collect();
        group.bench_with_input(BenchmarkId::new("agents", agents), &agents, |b, &agents| {
            b.iter(|| {
                std::thread::scope(|scope| {
                    for server in &servers {
                        let next = &next;
                        scope.spawn(move || {
                            for _ in 0..CALLS / agents {
                                let n = next.fetch_add(1, Ordering::Relaxed);
                                let out = server.handle(&json!({
                                    "command": "create",
                                    "path": format!("/memories/w/{n}.txt"),
                                    "file_text": "a durable memory\n",
                                }));
                                assert!(out.get("is_error").is_none(), "{out}");
                            }
                        });
                    }
                });
            });
        });
    }
    group.finish();
}

criterion_group!(benches, durable_writes);
criterion_main!(benches);
