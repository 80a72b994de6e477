//! `verify`: replaying the whole log from seq 1 (chain, payload hashes, every recorded answer,
//! the index) over stores of 10,000, 100,000 and 1,000,000 events.
//!
//! The stores hold the synthetic log of `common::mix_command` (creates, views, edits, renames and
//! deletes of small notes), written through `Store::append` and cached under
//! `target/bench-fixtures/`, so only the first run pays for building them. `verify_store` runs on
//! an open `Store` whose sled cache is warm (one untimed verify runs first). Throughput is in
//! events; the note printed after each size turns the report's record bytes into MB/s, and
//! gives the CPU time the process spent per verify (both of its threads, over every iteration
//! criterion ran, warm-up included): on a machine shared with other work, events per CPU
//! second move far less than wall time, and they are what one core would give.
//!
//! `verify-views` does the same, at the same sizes, for a log closer to what agents send
//! (`common::view_heavy_command`): a tree of 2,000 notes, then one call in 20 views `/memories`
//! (a listing of the whole tree, two levels deep) among views, edits and renames of its notes.
//! Its 1,000,000-event store takes about two minutes to build the first time.
//!
//! `prove-views` is what a read pays before it shows anything of those stores on a store just
//! opened: `Store::prove`, the chain rules from event 1 to the head (every payload hashed, no
//! call re-answered), once per open store; each iteration opens the store afresh (untimed).

mod common;

use std::time::Duration;

use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use mnemo::Report;
use mnemo::testing::{Store, verify_store};

fn verify(c: &mut Criterion) {
    let sizes = common::sizes(&[10_000, 100_000, 1_000_000], &[1_000]);
    group(c, "verify", &sizes, common::event_log);
    let sizes = common::sizes(&[10_000, 100_000, 1_000_000], &[3_000]);
    group(c, "verify-views", &sizes, common::view_heavy_log);
    prove(c, "prove-views", &sizes, common::view_heavy_log);
}

/// The settings both groups share: ten samples, flat sampling, a second of warm-up.
fn sized_group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group
}

/// Benches `Store::prove` on a store just opened, on the stores `fixture(events)` (built only
/// for a size the filter selects).
fn prove(c: &mut Criterion, name: &str, sizes: &[usize], fixture: fn(u64) -> std::path::PathBuf) {
    let mut group = sized_group(c, name);
    for &events in sizes {
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(BenchmarkId::from_parameter(events), |b| {
            let path = fixture(events as u64);
            b.iter_batched(
                || Store::open(&path).expect("open store"),
                |store| {
                    let end = store.prove().expect("prove");
                    assert_eq!(end.seq.0, events as u64);
                    store
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

/// Benches `verify_store` on the stores `fixture(events)` for each of `sizes`.
fn group(c: &mut Criterion, name: &str, sizes: &[usize], fixture: fn(u64) -> std::path::PathBuf) {
    let mut group = sized_group(c, name);
    for &events in sizes {
        group.throughput(Throughput::Elements(events as u64));
        let mut store: Option<Store> = None;
        let mut last: Option<Report> = None;
        let mut cpu = CpuSpent::default();
        group.bench_function(BenchmarkId::from_parameter(events), |b| {
            let store = store.get_or_insert_with(|| {
                let store = Store::open(&fixture(events as u64)).expect("open store");
                let report = verify_store(&store).expect("verify");
                assert!(report.is_intact(), "{:?}", report.violations);
                store
            });
            let before = cpu_time();
            b.iter(|| {
                let report = verify_store(store).expect("verify");
                assert!(report.is_intact() && report.events == events as u64);
                last = Some(report);
                cpu.runs += 1;
            });
            cpu.add(before, cpu_time());
        });
        if let Some(report) = last {
            // NOTE: precision loss is irrelevant for a printed rate.
            #[allow(clippy::cast_precision_loss)]
            let per_event = report.bytes as f64 / report.events as f64;
            println!(
                "note: {name}/{events}: {} events, {} bytes of records ({per_event:.0} B/event); last iteration {:.3} s = {:.1} MB/s, {:.0} events/s",
                report.events,
                report.bytes,
                report.elapsed.as_secs_f64(),
                report.mb_per_sec(),
                report.events_per_sec(),
            );
            match cpu.per_run() {
                // NOTE: precision loss is irrelevant for a printed rate.
                #[allow(clippy::cast_precision_loss)]
                Some(per_run) => println!(
                    "note: {name}/{events}: CPU time per verify {:.3} s over {} runs = {:.0} events per CPU second",
                    per_run.as_secs_f64(),
                    cpu.runs,
                    report.events as f64 / per_run.as_secs_f64().max(1e-9),
                ),
                None => println!(
                    "note: {name}/{events}: no CPU time (this system has no /proc/self/stat)"
                ),
            }
        }
    }
    group.finish();
}

/// The process's CPU time over the iterations of one size.
#[derive(Default)]
struct CpuSpent {
    total: Duration,
    runs: u32,
    unknown: bool,
}

impl CpuSpent {
    /// Adds the CPU time between two readings; a missing reading makes the total unknown.
    fn add(&mut self, before: Option<Duration>, after: Option<Duration>) {
        match (before, after) {
            (Some(before), Some(after)) => self.total += after.saturating_sub(before),
            _ => self.unknown = true,
        }
    }

    /// CPU time per verify, if every reading was there.
    fn per_run(&self) -> Option<Duration> {
        (!self.unknown && self.runs > 0).then(|| self.total / self.runs)
    }
}

/// User and system CPU time of this process, every thread it ran included (those that ended
/// too), from `/proc/self/stat`, in clock ticks of 10 ms (Linux's `USER_HZ`, which it keeps at
/// 100 for this file whatever the kernel's own tick); `None` without procfs.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces: fields are counted after it. utime
    // and stime are the 14th and 15th fields, the 12th and 13th after the name.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

criterion_group!(benches, verify);
criterion_main!(benches);
