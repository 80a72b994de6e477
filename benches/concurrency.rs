//! Group commit: durable writes from 1, 4 and 16 concurrent agents; and the same under a fleet's
//! `replicated` durability (each group commit also a create-only object of the store's log in a
//! bucket: here a `file://` one on the same disk, so the ratio to `fsync` is the cost of the
//! object store's own writes, not of a network).
//!
//! In each iteration every agent's thread makes [`CALLS_PER_AGENT`] `create` calls one after the
//! other, under the default `fsync` durability, so the agents stay concurrent for most of the
//! iteration (not just a burst at its start and a tail at its end). Throughput counts every call.
//! With one agent each call waits for its own fsync; with many, one sync writes and fsyncs what
//! all of them queued, so one fsync acknowledges many calls.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mnemo::{Durability, MnemoMemoryToolServer};
use serde_json::json;

const CALLS_PER_AGENT: usize = 32;

fn durable_writes(c: &mut Criterion) {
    let fixture = common::fresh(Durability::Fsync);
    writes(c, "durable_writes", fixture.server.client(), &[1, 4, 16]);
}

fn replicated_writes(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("file://{}", dir.path().join("bucket").display());
    let client =
        mnemo::testing::fleet::replicated_client(&dir.path().join("store"), &url, "bench", "agent")
            .expect("a replicated store");
    writes(c, "replicated_writes", &client, &[1, 16]);
}

/// `agents` agents of `client`'s store each making [`CALLS_PER_AGENT`] creates per iteration.
fn writes(c: &mut Criterion, name: &str, client: &mnemo::MnemoClient, agents: &[usize]) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    let next = AtomicU64::new(0);
    for &agents in agents {
        let servers: Vec<MnemoMemoryToolServer> = (0..agents)
            .map(|a| {
                let client = client.with_agent(format!("agent-{a}")).expect("agent id");
                MnemoMemoryToolServer::new(client)
            })
            .collect();
        group.throughput(Throughput::Elements((agents * CALLS_PER_AGENT) as u64));
        group.bench_with_input(BenchmarkId::new("agents", agents), &agents, |b, _| {
            b.iter(|| {
                std::thread::scope(|scope| {
                    for server in &servers {
                        let next = &next;
                        scope.spawn(move || {
                            for _ in 0..CALLS_PER_AGENT {
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

criterion_group!(benches, durable_writes, replicated_writes);
criterion_main!(benches);
