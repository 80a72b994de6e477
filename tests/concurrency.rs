//! Many agents, one store: clones and agents on 16 threads share one writer; the chain stays a
//! total order, read-modify-write commands never interleave, nothing is lost, and every answer an
//! agent got is the one its event records.

use std::collections::HashMap;

use mnemo::Seq;
use mnemo::{MnemoClient, MnemoMemoryToolServer};
use serde_json::{Value, json};

use crate::support::{Rng, TempStore};

const THREADS: usize = 16;

fn calls_per_thread() -> usize {
    std::env::var("MNEMO_CONCURRENCY_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// A mixed command on paths every thread shares.
fn command(rng: &mut Rng, thread: usize) -> Value {
    let dirs = ["/memories/a", "/memories/b", "/memories/a/x"];
    let names = ["1.txt", "2.txt", "3.txt"];
    let path = format!("{}/{}", rng.pick(&dirs), rng.pick(&names));
    match rng.next() % 8 {
        0 | 1 => {
            json!({"command": "create", "path": path, "file_text": format!("from {thread}\n")})
        }
        2 => json!({"command": "str_replace", "path": path, "old_str": "from", "new_str": "by"}),
        3 => {
            json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": format!("t{thread}\n")})
        }
        4 => {
            json!({"command": "view", "path": rng.pick(&["/memories", "/memories/a", path.as_str()])})
        }
        5 => json!({"command": "delete", "path": rng.pick(&[path.as_str(), "/memories/b"])}),
        6 => json!({"command": "rename", "old_path": rng.pick(&dirs), "new_path": rng.pick(&dirs)}),
        _ => {
            json!({"command": "rename", "old_path": path, "new_path": format!("/memories/b/{}", rng.pick(&names))})
        }
    }
}

#[test]
fn sixteen_threads_share_one_writer_without_losing_or_interleaving_anything() {
    let s = TempStore::new();
    let client = s.client();
    let per_thread = calls_per_thread();
    let answers: Vec<Vec<(u64, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                // Half the threads are clones of one agent, half are agents of their own.
                let c: MnemoClient = if t % 2 == 0 {
                    client.clone()
                } else {
                    client.with_agent(format!("agent-{t}")).expect("agent")
                };
                scope.spawn(move || {
                    let server = MnemoMemoryToolServer::new(c);
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
                    (0..per_thread)
                        .map(|_| {
                            let out = server.handle(&command(&mut rng, t));
                            let seq = out["tool_use_id"]
                                .as_str()
                                .and_then(|id| id.strip_prefix("mnemo-"))
                                .and_then(|n| n.parse().ok())
                                .expect("a bare input's result names its seq");
                            (seq, out["content"].as_str().expect("content").to_string())
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });

    let total = THREADS * per_thread;
    // Nothing lost: one event per call, seqs dense, each seq answered exactly once.
    let mut by_seq: HashMap<u64, String> = HashMap::new();
    for (seq, text) in answers.into_iter().flatten() {
        assert!(
            by_seq.insert(seq, text).is_none(),
            "seq {seq} answered twice"
        );
    }
    assert_eq!(by_seq.len(), total);
    assert_eq!(client.head().expect("head").seq, Seq(total as u64));
    // Every answer an agent got is the one its event records.
    for event in client.events(Seq(1)).expect("events") {
        let event = event.expect("decode");
        let text = &by_seq[&event.seq.0];
        assert_eq!(
            event.header.outcome,
            event.outcome_of(event.header.outcome.is_error, text),
            "seq {}",
            event.seq
        );
    }
    // The final state equals a serial replay of the log in seq order: that is what verify checks
    // (it re-answers every call in seq order and compares the outcomes and the index).
    let report = client.verify().expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, total as u64);
}
