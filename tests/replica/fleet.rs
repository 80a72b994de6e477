//! The fleet's primitives over a real bucket (SeaweedFS's S3 when `MNEMO_TEST_S3` is set, else a
//! `file://` directory): holders of one store racing to take it over and to commit to its
//! write-ahead log from threads of their own. Whatever the interleaving, every commit
//! acknowledged is in the log, the log reads back intact (numbers with no gap, epochs never going
//! down, the chain unbroken), so no holder got a commit in after a later epoch's marker, and of
//! nodes racing for one free store's lease exactly one wins.

use std::sync::{Arc, Mutex};

use mnemo::Seq;
use mnemo::testing::fleet::bucket::Bucket;
use mnemo::testing::fleet::lease::{Leases, Node, Timing};
use mnemo::testing::fleet::wal::{Position, Wal};

use crate::support::TempStore;

/// A bucket of this test's own.
fn bucket(t: &TempStore, name: &str) -> Arc<Bucket> {
    Arc::new(Bucket::open(&crate::support::bucket_url(t, name)).expect("open the bucket"))
}

/// The records of a store of `n` calls: one chain that every holder goes on along, each
/// committing the records after the head it has.
fn chain_of(t: &TempStore, n: usize) -> Vec<(Seq, Vec<u8>)> {
    let server = t.server();
    for i in 0..n {
        let input = serde_json::json!({
            "command": "create", "path": format!("/memories/f{i}.md"), "file_text": "x"
        });
        crate::support::call(&server, input);
    }
    drop(server);
    let store = crate::support::open_store(&t.path());
    store.records(Seq(1)).map(|r| r.expect("record")).collect()
}

#[test]
fn holders_racing_on_one_log_lose_no_acknowledged_commit_and_never_fork_it() {
    let t = TempStore::new();
    let master = Arc::new(chain_of(&t, 60));
    let wal = Wal::new(bucket(&t, "fleet"), "notes");
    let epochs = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let acked: Arc<Mutex<Vec<Seq>>> = Arc::default();
    std::thread::scope(|s| {
        for node in 0..4u64 {
            let (wal, master, epochs, acked) = (wal.clone(), &master, &epochs, &acked);
            s.spawn(move || {
                for round in 0..3 {
                    let epoch = epochs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    let Ok(taken) = wal.take(epoch, &Position::START) else {
                        continue; // a later epoch got there first
                    };
                    let mut holder = taken.holder;
                    for k in 1..=3 {
                        let from = usize::try_from(holder.head().0.0).expect("a small seq");
                        let Some(next) = master.get(from..(from + k).min(master.len())) else {
                            return;
                        };
                        if next.is_empty() {
                            return;
                        }
                        match holder.commit(next) {
                            Ok(()) => acked
                                .lock()
                                .expect("lock")
                                .extend(next.iter().map(|(seq, _)| *seq)),
                            Err(mnemo::Error::Fenced { .. }) => break,
                            Err(e) => panic!("node {node} round {round}: {e}"),
                        }
                    }
                }
            });
        }
    });
    let (at, records) = wal
        .scan(&Position::START)
        .expect("the log reads back intact");
    let seqs: Vec<Seq> = records.iter().map(|(seq, _)| *seq).collect();
    let mut acked = acked.lock().expect("lock").clone();
    acked.sort();
    assert_eq!(seqs, acked, "the log is exactly the commits acknowledged");
    assert!(at.epoch >= 1 && at.seq == Seq(records.len() as u64));
    assert_eq!(records.as_slice(), &master[..records.len()]);
}

#[test]
fn of_nodes_racing_for_a_free_store_exactly_one_takes_it() {
    let t = TempStore::new();
    let bucket = bucket(&t, "leases");
    let nodes: Vec<Leases> = (0..6)
        .map(|i| {
            let node = Node {
                id: format!("n{i}"),
                url: format!("http://127.0.0.1:{}", 40000 + i),
            };
            Leases::new(Arc::clone(&bucket), node, Timing::default()).expect("leases")
        })
        .collect();
    for n in &nodes {
        n.beat().expect("beat");
    }
    for store in ["a", "b", "c"] {
        let barrier = std::sync::Barrier::new(nodes.len());
        let won: Vec<bool> = std::thread::scope(|s| {
            let runs: Vec<_> = nodes
                .iter()
                .map(|n| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        n.take(store).expect("take").is_some()
                    })
                })
                .collect();
            runs.into_iter()
                .map(|r| r.join().expect("thread"))
                .collect()
        });
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "store {store}: {won:?}"
        );
    }
    let status = nodes[0].nodes().expect("status");
    assert_eq!(status.len(), nodes.len());
    assert!(status.iter().all(|n| n.alive), "{status:?}");
}
