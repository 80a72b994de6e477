//! Replication's cost and lag (feature `replicate`, a default one).
//!
//! `replicate_durable_writes`: 16 agents in one process, each running agent-like turns (a
//! `create`, a `view` of its directory, a `str_replace`) under `fsync`, with no replication
//! against a continuous shipper to a `file://` replica on the same disk at the default interval
//! (1 s) and at 100 ms. The figure to read is the ratio of `on` to `off` (the target is at least
//! 0.9).
//!
//! `replication_lag_16_agents`: while 16 agents write in the background, one more agent's
//! `create`, made at a random moment of the interval, is timed from its answer to the moment the
//! shipper reports a replicated head that holds it: the lag an event waits before a lost primary
//! would no longer lose it. Printed at the end: p50 and p99 over every sample of the run.
//!
//! `restore_file`: `restore` (the library call under `mnemo restore --from`) of a `file://`
//! replica of the synthetic log (`common::mix_command`) of 10k and 1M events, shipped in one
//! shipment (segments of 4,096 events), into a new directory: fetch, chain checks, append with
//! the verifier's replay beside it, and the index that replay derived written. The target is 1M events under 10 s. The store and
//! its replica are built once and cached under `target/bench-fixtures`.
//!
//! `sled_floor`: sled alone, inserting keys like the index's in key order into a fresh tree: the
//! floor under a restore's writes (per key, against `restore_file`'s per event).
//!
//! `verify_from_file`: `verify_replica` (under `mnemo verify --from`) of a replica of 100k
//! events, against a restore followed by a whole verify (what it did before), in one run.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mnemo::testing::replica::shipper::Replication;
use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer, Replica};
use serde_json::json;

const AGENTS: usize = 16;
const TURNS: usize = 4;

fn open(dir: &std::path::Path) -> MnemoClient {
    MnemoClient::builder(dir.join("store"))
        .agent_id("bench")
        .durability(Durability::Fsync)
        .open()
        .expect("open the store")
}

fn replicate(client: &MnemoClient, dir: &std::path::Path, interval: Duration) -> Replication {
    let url = format!("file://{}", dir.join("replica").display());
    let replica = Replica::open(&url, true).expect("open the replica");
    Replication::start(client, replica, interval, |_| {}).expect("replicate")
}

/// One agent's turn: make a note, look at the directory, edit the note.
fn turn(tool: &MnemoMemoryToolServer, agent: usize, n: u64) {
    let path = format!("/memories/agent{agent}/note{n}.md");
    let text = format!("# note {n}\n") + &"- the user prefers short answers\n".repeat(7);
    for input in [
        json!({"command": "create", "path": path, "file_text": text}),
        json!({"command": "view", "path": format!("/memories/agent{agent}")}),
        json!({"command": "str_replace", "path": path, "old_str": "# note", "new_str": "# Note"}),
    ] {
        let out = tool.handle(&input);
        assert_eq!(out["is_error"], serde_json::Value::Null, "{out}");
    }
}

fn tools(client: &MnemoClient) -> Vec<MnemoMemoryToolServer> {
    (0..AGENTS)
        .map(|a| MnemoMemoryToolServer::new(client.with_agent(format!("agent{a}")).unwrap()))
        .collect()
}

fn durable_writes(c: &mut Criterion) {
    let mut group = c.benchmark_group("replicate_durable_writes");
    group.throughput(Throughput::Elements((AGENTS * TURNS * 3) as u64));
    group.sample_size(10);
    for (name, interval) in [
        ("off", None),
        ("on_1s", Some(Duration::from_secs(1))),
        ("on_100ms", Some(Duration::from_millis(100))),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let client = open(dir.path());
        let replication = interval.map(|i| replicate(&client, dir.path(), i));
        let tools = tools(&client);
        let mut round = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                round += 1;
                std::thread::scope(|s| {
                    for (agent, tool) in tools.iter().enumerate() {
                        s.spawn(move || {
                            for t in 0..TURNS as u64 {
                                turn(tool, agent, round * TURNS as u64 + t);
                            }
                        });
                    }
                });
            });
        });
        if let Some(replication) = replication {
            assert_eq!(replication.stop().error, None);
        }
    }
    group.finish();
}

fn lag(c: &mut Criterion) {
    let mut group = c.benchmark_group("replication_lag_16_agents");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for (name, interval) in [
        ("interval_1s", Duration::from_secs(1)),
        ("interval_100ms", Duration::from_millis(100)),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let client = open(dir.path());
        let replication = replicate(&client, dir.path(), interval);
        let stop = Arc::new(AtomicBool::new(false));
        let background: Vec<_> = tools(&client)
            .into_iter()
            .enumerate()
            .map(|(agent, tool)| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        turn(&tool, agent, n);
                        n += 1;
                    }
                })
            })
            .collect();
        let timed = MnemoMemoryToolServer::new(client.with_agent("timed").unwrap());
        let mut samples: Vec<Duration> = Vec::new();
        let mut n = 0u64;
        let mut phase = 0x9e37_79b9_7f4a_7c15u64;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    // Writes come at any moment of the interval, as agents' do (waiting for
                    // the shipment and writing at once would time every write from just after
                    // a shipment: the whole interval each time). Not timed.
                    phase = phase
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    std::thread::sleep(
                        interval.mul_f64((phase >> 11) as f64 / (1u64 << 53) as f64),
                    );
                    let path = format!("/memories/timed/n{n}.md");
                    timed.handle(&json!({"command": "create", "path": path, "file_text": "x\n"}));
                    // The head once answered holds the create (and perhaps a few later events).
                    let seq = client.head().expect("head").seq;
                    let answered = Instant::now();
                    while replication.status().replicated.seq < seq {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let lag = answered.elapsed();
                    samples.push(lag);
                    total += lag;
                }
                total
            });
        });
        stop.store(true, Ordering::Relaxed);
        for agent in background {
            agent.join().expect("an agent");
        }
        assert_eq!(replication.stop().error, None);
        if samples.is_empty() {
            // Filtered out: nothing was timed.
            continue;
        }
        samples.sort();
        // The sample at quantile `percent`, by nearest rank.
        let at = |percent: usize| samples[(samples.len() - 1) * percent / 100];
        println!(
            "replication_lag_16_agents/{name}: {} samples, p50 {:.1} ms, p99 {:.1} ms",
            samples.len(),
            at(50).as_secs_f64() * 1e3,
            at(99).as_secs_f64() * 1e3
        );
    }
    group.finish();
}

/// The `file://` replica of the synthetic log of `events` events, shipped from the cached store
/// in one shipment, cached.
fn replica_of(events: u64) -> String {
    let log = common::event_log(events);
    let dir = common::cached(
        &format!(
            "replica-v{}-i{}-mix1-{events}",
            mnemo::testing::event::FORMAT_VERSION,
            mnemo::testing::INDEX_LAYOUT
        ),
        |path| {
            let store = mnemo::testing::Store::open(&log).expect("open the cached log");
            let replica = Replica::open(&format!("file://{}", path.display()), true)
                .expect("open the replica");
            mnemo::testing::replica::ship(&store, &replica, &mut |_, _| {}).expect("ship");
        },
    );
    format!("file://{}", dir.display())
}

fn restore(c: &mut Criterion) {
    let mut group = c.benchmark_group("restore_file");
    group.sample_size(10);
    for events in common::sizes(&[10_000, 1_000_000], &[1_000]) {
        let url = replica_of(events as u64);
        let replica = Replica::open(&url, false).expect("open the replica");
        let objects = replica.names("segments").expect("list").len();
        eprintln!("restore_file/{events}: the replica holds {objects} segments");
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(events.to_string(), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir_in(common::cache_dir()).expect("dir");
                    let db = dir.path().join("restored");
                    let started = Instant::now();
                    let restored = replica.restore(&db, None).expect("restore");
                    total += started.elapsed();
                    assert_eq!(restored.head.seq.0, events as u64);
                }
                total
            });
        });
    }
    group.finish();
}

/// `sled_floor`: what sled 0.34 alone costs for the kind of writes a restore makes, the floor under
/// `restore_file`: `keys` keys of 9 bytes (a letter and a big-endian number, as the version
/// journal's) with 60-byte values, inserted in key order into a fresh tree of a new database on
/// this disk, one `insert` each. A restore of 1M events writes about 3.8M keys (1M records, 2.8M
/// index entries). Prints the database's bytes once flushed, against the bytes written.
fn sled_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("sled_floor");
    group.sample_size(10);
    let value = [7u8; 60];
    for keys in common::sizes(&[1_000_000], &[1_000]) {
        group.throughput(Throughput::Elements(keys as u64));
        let mut printed = false;
        group.bench_function(format!("insert_in_key_order/{keys}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir_in(common::cache_dir()).expect("dir");
                    let db = sled::Config::new()
                        .path(dir.path().join("sled"))
                        .open()
                        .expect("open sled");
                    let tree = db.open_tree("index").expect("tree");
                    let started = Instant::now();
                    for n in 0..keys as u64 {
                        let mut key = [b'v'; 9];
                        key[1..].copy_from_slice(&n.to_be_bytes());
                        tree.insert(key, &value[..]).expect("insert");
                    }
                    total += started.elapsed();
                    db.flush().expect("flush");
                    if !printed {
                        printed = true;
                        let bytes = common::disk_bytes(&dir.path().join("sled"));
                        eprintln!(
                            "sled_floor/{keys}: {bytes} bytes on disk for {} bytes of keys and values",
                            keys * (9 + value.len())
                        );
                    }
                }
                total
            });
        });
    }
    group.finish();
}

/// `verify_from_file`: `mnemo verify --from` of the same replicas (`Replica::verify_replica`):
/// the store made only for the report of the pass that checks the records as they are appended
/// (`report_pass`), against what it did before, the store restored whole and then verified
/// whole (`restore_then_verify`), in one run.
fn verify_from(c: &mut Criterion) {
    let mut group = c.benchmark_group("verify_from_file");
    group.sample_size(10);
    for events in common::sizes(&[100_000], &[1_000]) {
        let url = replica_of(events as u64);
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(format!("report_pass/{events}"), |b| {
            b.iter(|| {
                let report = Replica::verify_replica(&url, None, None).expect("verify");
                assert!(report.is_intact());
            });
        });
        let replica = Replica::open(&url, false).expect("open the replica");
        group.bench_function(format!("restore_then_verify/{events}"), |b| {
            b.iter(|| {
                let dir = tempfile::tempdir_in(common::cache_dir()).expect("dir");
                let db = dir.path().join("restored");
                replica.restore(&db, None).expect("restore");
                let client = MnemoClient::builder(&db).read_only().open().expect("open");
                assert!(client.verify().expect("verify").is_intact());
            });
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    durable_writes,
    lag,
    restore,
    sled_floor,
    verify_from
);
criterion_main!(benches);
