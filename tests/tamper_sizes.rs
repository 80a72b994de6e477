//! The tamper corpus across store sizes: 1, 2, 255, 256, 257 and 10,000 events.
//!
//! Each size's pristine store is built once (Buffered, through `MnemoMemoryToolServer::handle`: a
//! mix of creates, views, str_replace and insert calls and tool_use blocks; 10,000 events from 4
//! threads), closed, and verified intact. Every tamper case then copies the closed directory, opens the copy
//! with `Store::open` (never a client: opening a client runs `catch_up`, which could write to a
//! tampered index before the verifier sees it), changes it below the API through the raw sled
//! trees, and runs `verify_store` on it. Each case asserts the exact first violation: its seq and
//! its [`ViolationKind`].
//!
//! The expectations are derived from the check order documented in src/verify.rs:
//!
//! | change | first violation |
//! |---|---|
//! | the first, middle or last payload byte of event p | `PayloadHash` at p (lengths intact, so it decodes; the payload hash is checked before the chain hash) |
//! | the first or last `prev_hash` byte of p | `BrokenLink` at p |
//! | the low or high byte of the stored seq of p | `SeqMismatch` at p |
//! | the outcome's `is_error` byte, or the first or last `result_hash` byte, in p's header | `Hash` at p (the header is hashed into the chain hash, not decoded first) |
//! | event p deleted | `Missing` at p (for the last event: `meta.head` names a seq past the end, also `Missing` at p) |
//! | p's record also written under key n + 1 | `SeqMismatch` at n + 1 (every real event checks out, the copy says it is seq p) |
//! | p and its neighbour swapped | `SeqMismatch` at the lower key |
//! | a chained, honestly answered event stored at n + 1 | `Head` at n + 1 (the record checks out; `meta.head` still names n) |
//! | garbage stored at n + 1 | `Undecodable` at n + 1 |
//! | the last event removed | `Missing` at n |
//! | `meta.head` rolled back to event n − 1 (seq and hash; the empty head for n = 1), `mnemo-head` removed (a crash's leftover) | `Head` at n |
//! | a file's content bytes changed in the index | `Index` at n (the index is compared at its applied seq, n) |
//! | a `c` (child) entry removed from the index | `Index` at n |
//! | the `events` tree emptied | `Missing` at 1 (`meta.head` names n, the log ends at 0) |
//! | every tree emptied but `meta.format`, and `mnemo-head` removed | nothing on disk contradicts it: `verify_store` says EMPTY; `verify_store_with` and the pristine checkpoint report `Checkpoint` at 1 |
//!
//! The last row is the documented limit of a local chain (see tests/checkpoint.rs): it is counted
//! as detected only with the checkpoint, and reported separately. Positions are the first, middle
//! and last event (deduplicated for 1 and 2 events): 20 cases for 1 event, 34 for 2, 47 for each
//! larger store, 242 in all; every size prints its count and a running total.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mnemo::event::Frame;
use mnemo::tool::{Command, Limits, Profile, Semantics};
use mnemo::{
    Body, Durability, Event, EventHash, Head, MnemoClient, MnemoMemoryToolServer, Outcome, Report,
    Seq, Store, ToolCall, VerifyOptions, ViolationKind, verify_store, verify_store_with,
};
use serde_json::{Value, json};

use crate::support::copy_dir;

/// Cases run by every size so far (each size's test prints the running total).
static TOTAL_CASES: AtomicUsize = AtomicUsize::new(0);

// ---------------------------------------------------------------------------------------------
// Building the pristine stores.
// ---------------------------------------------------------------------------------------------

/// Call `i` of a deterministic mix of creates, views and edits under `dir` (no deletes, so files
/// survive to the end and the index has content to tamper with). Call 0 is a create.
fn mixed_input(i: usize, dir: &str) -> Value {
    let file = format!("/memories/{dir}/f{}.txt", i % 7);
    match i % 6 {
        0 => json!({"command": "create", "path": file, "file_text": format!("line {i}\nsecond\n")}),
        1 => json!({"command": "view", "path": file}),
        2 => json!({"command": "str_replace", "path": file, "old_str": "second", "new_str": "2nd"}),
        3 => {
            json!({"command": "insert", "path": file, "insert_line": 1, "insert_text": format!("ins {i}\n")})
        }
        4 => json!({"command": "view", "path": format!("/memories/{dir}")}),
        // A whole tool_use block (with an id), so the retry entries of the index are exercised.
        _ => json!({"type": "tool_use", "id": format!("toolu_{dir}_{i}"), "name": "memory",
                    "input": {"command": "view", "path": file, "view_range": [1, 2]}}),
    }
}

fn buffered_client(path: &Path, agent: &str) -> MnemoClient {
    MnemoClient::builder(path)
        .agent_id(agent)
        .durability(Durability::Buffered)
        .open()
        .unwrap_or_else(|e| panic!("open a client at {}: {e}", path.display()))
}

/// Builds a closed store of exactly `n` events at `path`. Up to 300 events are made by one thread;
/// more are made by 4 threads (one agent and one directory each) so the writer batches them.
fn build_store(path: &Path, n: usize) {
    let client = buffered_client(path, "builder");
    if n <= 300 {
        let server = MnemoMemoryToolServer::new(client.clone());
        for i in 0..n {
            let out = server.handle(&mixed_input(i, "solo"));
            assert_eq!(out["type"], "tool_result", "call {i} answered");
        }
    } else {
        const THREADS: usize = 4;
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let calls = n / THREADS + usize::from(t < n % THREADS);
                let agent = client.with_agent(format!("agent-{t}")).expect("agent id");
                scope.spawn(move || {
                    let server = MnemoMemoryToolServer::new(agent);
                    let dir = format!("t{t}");
                    for i in 0..calls {
                        let out = server.handle(&mixed_input(i, &dir));
                        assert_eq!(out["type"], "tool_result", "thread {t} call {i} answered");
                    }
                });
            }
        });
    }
    let head = client.head().expect("head");
    assert_eq!(head.seq, Seq(n as u64), "one event per call");
    // Dropping the last client stops the writer; sled flushes and closes the store.
}

/// Opens a closed store (`Store::open` waits out the moment sled holds the lock after a close).
fn open_store(path: &Path) -> Store {
    Store::open(path).unwrap_or_else(|e| panic!("open the store at {}: {e}", path.display()))
}

/// A pristine store of `n` events, closed, with what the cases need to know about it.
struct Pristine {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    n: u64,
    /// `meta.head` of the pristine store (its checkpoint).
    head: Head,
    /// The chain hash of every event, by seq (index 0 is `EventHash::ZERO`).
    hashes: Vec<EventHash>,
    /// Every stored record, in seq order (index 0 is event 1).
    records: Vec<Vec<u8>>,
}

impl Pristine {
    /// The chain hash of event `seq` (`EventHash::ZERO` for 0).
    fn hash(&self, seq: u64) -> EventHash {
        self.hashes[usize::try_from(seq).expect("small")]
    }
}

fn pristine(n: usize) -> Pristine {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("pristine.mnemo.db");
    build_store(&path, n);
    let (head, hashes, records) = {
        let store = open_store(&path);
        let report = verify_store(&store).expect("verify the pristine store");
        assert!(
            report.is_intact(),
            "pristine store of {n}: {:?}",
            report.violations
        );
        assert_eq!(report.events, n as u64);
        assert_eq!(
            report.index_applied,
            Seq(n as u64),
            "the index is caught up"
        );
        let mut hashes = vec![EventHash::ZERO];
        let mut records = Vec::new();
        for item in store.records(Seq(1)) {
            let (_, record) = item.expect("read");
            hashes.push(Frame::decode(&record).expect("frame").hash);
            records.push(record);
        }
        (report.head, hashes, records)
    };
    Pristine {
        _dir: dir,
        path,
        n: n as u64,
        head,
        hashes,
        records,
    }
}

// ---------------------------------------------------------------------------------------------
// Cases.
// ---------------------------------------------------------------------------------------------

/// The raw trees of the copy under tamper: `(events, meta, index)`.
struct Trees {
    events: sled::Tree,
    meta: sled::Tree,
    index: sled::Tree,
    content: sled::Tree,
    /// The store directory (for its `mnemo-head`).
    dir: std::path::PathBuf,
}

impl Trees {
    fn record(&self, seq: u64) -> Vec<u8> {
        self.events
            .get(Seq(seq).key())
            .expect("get")
            .unwrap_or_else(|| panic!("record {seq} exists"))
            .to_vec()
    }

    fn put(&self, seq: u64, record: impl Into<sled::IVec>) {
        self.events.insert(Seq(seq).key(), record).expect("insert");
    }

    /// Rewrites record `seq` with `edit`.
    fn edit(&self, seq: u64, edit: impl FnOnce(&mut Vec<u8>)) {
        let mut record = self.record(seq);
        edit(&mut record);
        self.put(seq, record);
    }
}

/// What a case must produce.
enum Expect {
    /// `verify_store` names this first violation.
    First(u64, ViolationKind),
    /// `verify_store` finds nothing (the documented limit), and `verify_store_with` the pristine
    /// checkpoint names this first violation.
    OnlyWithCheckpoint(u64, ViolationKind),
    /// Not a violation: `meta.head` is behind a log that chains to event `end`, which is what a
    /// crash leaves when it cuts a commit short. The report names `end` as the head, and the
    /// next open for writing moves `meta.head` there.
    Behind { end: u64, meta_head: u64 },
}

/// Runs tamper cases against copies of one pristine store and collects what went wrong.
struct Runner<'a> {
    base: &'a Pristine,
    cases: usize,
    checkpoint_only: usize,
    failures: Vec<String>,
}

impl Runner<'_> {
    fn case(&mut self, what: &str, expect: Expect, tamper: impl FnOnce(&Trees)) {
        self.cases += 1;
        let what = format!("size {}: {what}", self.base.n);
        let copy = tempfile::tempdir().expect("temporary directory");
        let path = copy.path().join("copy.mnemo.db");
        copy_dir(&self.base.path, &path);
        let store = open_store(&path);
        let (events, meta, index) = store.raw_trees();
        let trees = Trees {
            events,
            meta,
            index,
            content: store.raw_content_tree(),
            dir: path.clone(),
        };
        tamper(&trees);
        for tree in [&trees.events, &trees.meta, &trees.index, &trees.content] {
            tree.flush().expect("flush the tampered tree");
        }
        let report = verify_store(&store).expect("verify_store returns a report");
        match expect {
            Expect::First(seq, kind) => self.check(&what, &report, seq, kind),
            Expect::OnlyWithCheckpoint(seq, kind) => {
                self.checkpoint_only += 1;
                if !report.is_intact() {
                    self.failures.push(format!(
                        "{what}: expected the documented undetectable case (intact without a checkpoint), got {:?}",
                        report.violations
                    ));
                }
                let report = verify_store_with(
                    &store,
                    VerifyOptions {
                        expect: Some(self.base.head),
                        progress: None,
                    },
                )
                .expect("verify_store_with returns a report");
                self.check(&format!("{what} (with the checkpoint)"), &report, seq, kind);
            }
            Expect::Behind { end, meta_head } => {
                let found = (
                    report.violations.is_empty(),
                    report.head.seq.0,
                    report.meta_head.seq.0,
                );
                if found != (true, end, meta_head) {
                    self.failures.push(format!(
                        "{what}: expected intact with meta.head {meta_head} behind the log's end {end}, got {:?} (head {}, meta.head {})",
                        report.violations, report.head, report.meta_head
                    ));
                }
                match store.catch_up().and_then(|_| store.head()) {
                    Ok(head) if head == report.head => {}
                    other => self.failures.push(format!(
                        "{what}: opening for writing must move meta.head to {}, got {other:?}",
                        report.head
                    )),
                }
            }
        }
    }

    fn check(&mut self, what: &str, report: &Report, seq: u64, kind: ViolationKind) {
        match report.violations.first() {
            None => self.failures.push(format!(
                "{what}: UNDETECTED (report says {})",
                report.status()
            )),
            Some(v) if (v.seq, v.kind) != (Seq(seq), kind) => self.failures.push(format!(
                "{what}: expected {} at seq {seq}, got {} at seq {} ({})",
                kind.name(),
                v.kind.name(),
                v.seq,
                v.detail
            )),
            Some(_) if report.violations.len() != 1 => self.failures.push(format!(
                "{what}: verification must stop at the first violation, got {:?}",
                report.violations
            )),
            Some(_) => {}
        }
    }
}

/// The one-byte changes made to the record of each tampered event: `(region, offset, xor mask,
/// expected kind)`. Offsets follow the table in src/event.rs: the version byte, the seq (u64 LE)
/// at 1..9, prev_hash at 9..41, hash at 41..73, payload_hash at 73..105, the header length at
/// 105..109, then the header (which ends with the outcome — `is_error`, then the 32-byte
/// `result_hash` — and, in format 2, the 4-byte `semantics`), the payload length and the payload.
fn flips(record: &[u8]) -> Vec<(&'static str, usize, u8, ViolationKind)> {
    use ViolationKind::{BrokenLink, Hash, PayloadHash, SeqMismatch};
    const HEADER_AT: usize = 109;
    let frame = Frame::decode(record).expect("an untouched record decodes");
    let header_end = HEADER_AT + frame.header.len();
    let payload_at = header_end + 4;
    // Where the outcome ends: before the semantics field of a format-2 header.
    let outcome_end = header_end - if frame.version >= 2 { 4 } else { 0 };
    assert_eq!(
        payload_at + frame.payload.len(),
        record.len(),
        "frame layout"
    );
    let last = record.len() - 1;
    vec![
        ("payload, first byte", payload_at, 0x01, PayloadHash),
        (
            "payload, middle byte",
            (payload_at + last) / 2,
            0x20,
            PayloadHash,
        ),
        ("payload, last byte", last, 0x80, PayloadHash),
        ("prev_hash, first byte", 9, 0x01, BrokenLink),
        ("prev_hash, last byte", 40, 0x80, BrokenLink),
        ("stored seq, low byte", 1, 0x01, SeqMismatch),
        ("stored seq, high byte", 8, 0x80, SeqMismatch),
        ("outcome is_error", outcome_end - 33, 0x01, Hash),
        (
            "outcome result_hash, first byte",
            outcome_end - 32,
            0x01,
            Hash,
        ),
        (
            "outcome result_hash, last byte",
            outcome_end - 1,
            0xff,
            Hash,
        ),
    ]
}

/// The pristine record of event `seq`.
fn base_record(base: &Pristine, seq: u64) -> Vec<u8> {
    base.records[usize::try_from(seq).expect("small") - 1].clone()
}

/// The record of event `seq`, chained after the pristine event `seq - 1` and honestly answered
/// against the replayed tree: every check passes on it except that `meta.head` does not name it.
fn honest_record(events: &sled::Tree, seq: u64, prev: EventHash) -> Vec<u8> {
    let mut replay = mnemo::replay::Replay::in_memory();
    for item in events.range(..Seq(seq).key()) {
        let (_, record) = item.expect("read");
        replay
            .apply(&Event::decode(&record).expect("decode"))
            .expect("replay");
    }
    let mut replay = replay.into_tree();
    let body = Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: Limits::default(),
        command: Command::Create {
            path: "/memories/stray.txt".into(),
            file_text: "stray\n".into(),
        },
    });
    let answer = replay
        .run_call("mallory", None, &body, Semantics::CURRENT, Seq(seq))
        .expect("answer");
    Event {
        seq: Seq(seq),
        prev_hash: prev,
        header: mnemo::Header {
            time_ms: 1_760_000_000_000,
            agent: "mallory".into(),
            tool_use_id: None,
            outcome: Outcome::of(answer.is_error, &answer.text),
            semantics: Semantics::CURRENT,
        },
        body,
    }
    .to_frame()
    .encode()
}

/// Runs the whole corpus on a store of `n` events, at `positions` (or first / middle / last).
fn corpus(n: usize, positions: Option<&[u64]>) {
    use ViolationKind::{Checkpoint, Head as HeadKind, Index, Missing, SeqMismatch, Undecodable};
    let started = Instant::now();
    let base = pristine(n);
    let built = started.elapsed();
    let n = base.n;
    let mut positions: Vec<u64> =
        positions.map_or_else(|| vec![1, n.div_ceil(2), n], <[u64]>::to_vec);
    positions.dedup();
    let mut r = Runner {
        base: &base,
        cases: 0,
        checkpoint_only: 0,
        failures: Vec::new(),
    };

    for &p in &positions {
        for (region, at, mask, kind) in flips(&base_record(&base, p)) {
            r.case(
                &format!("{region} of event {p}: byte {at} ^ {mask:#04x}"),
                Expect::First(p, kind),
                |t| t.edit(p, |rec| rec[at] ^= mask),
            );
        }
        r.case(
            &format!("event {p} deleted"),
            Expect::First(p, Missing),
            |t| {
                t.events.remove(Seq(p).key()).expect("remove");
            },
        );
        r.case(
            &format!("event {p} duplicated under key {}", n + 1),
            Expect::First(n + 1, SeqMismatch),
            |t| t.put(n + 1, t.record(p)),
        );
        if n >= 2 {
            let (a, b) = if p < n { (p, p + 1) } else { (p - 1, p) };
            r.case(
                &format!("events {a} and {b} swapped"),
                Expect::First(a, SeqMismatch),
                |t| {
                    let (ra, rb) = (t.record(a), t.record(b));
                    t.put(a, rb);
                    t.put(b, ra);
                },
            );
        }
    }

    r.case(
        &format!("a chained, honestly answered event inserted at {}", n + 1),
        Expect::Behind {
            end: n + 1,
            meta_head: n,
        },
        |t| t.put(n + 1, honest_record(&t.events, n + 1, base.hash(n))),
    );
    r.case(
        &format!("garbage inserted at {}", n + 1),
        Expect::First(n + 1, Undecodable),
        |t| t.put(n + 1, &b"garbage"[..]),
    );
    r.case(
        "the tail truncated (last event removed)",
        Expect::First(n, Missing),
        |t| {
            t.events.remove(Seq(n).key()).expect("remove");
        },
    );
    r.case(
        &format!("meta.head rolled back to {}", n - 1),
        Expect::Behind {
            end: n,
            meta_head: n - 1,
        },
        |t| {
            let mut head = (n - 1).to_be_bytes().to_vec();
            head.extend_from_slice(&base.hash(n - 1).0);
            t.meta.insert(b"head", head).expect("insert");
            // What a crash leaves: no head recorded past `meta.head` (a clean close records
            // one, and a `meta.head` behind it is a rollback, which tests/tamper.rs names).
            std::fs::remove_file(t.dir.join(mnemo::HEAD_FILE)).ok();
        },
    );
    if n > 1 {
        r.case(
            &format!("meta.head rolled back to {} with a wrong hash", n - 1),
            Expect::First(n - 1, HeadKind),
            |t| {
                let mut head = (n - 1).to_be_bytes().to_vec();
                head.extend_from_slice(&base.hash(n).0);
                t.meta.insert(b"head", head).expect("insert");
            },
        );
    }
    r.case(
        "a file's content changed in the index",
        Expect::First(n, Index),
        |t| {
            let (key, mut value) = t
                .content
                .iter()
                .map(|item| item.expect("scan"))
                .find(|(_, v)| v.len() > 8)
                .map(|(k, v)| (k, v.to_vec()))
                .expect("a file with content in the index");
            value[8] ^= 0x01;
            t.content.insert(key, value).expect("insert");
        },
    );
    r.case(
        "a `c` entry removed from the index",
        Expect::First(n, Index),
        |t| {
            let (key, _) = t
                .index
                .scan_prefix(b"c")
                .next()
                .expect("a child entry")
                .expect("scan");
            t.index.remove(key).expect("remove");
        },
    );
    r.case("the events tree emptied", Expect::First(1, Missing), |t| {
        t.events.clear().expect("clear");
    });
    r.case(
        "every tree emptied but meta.format",
        Expect::OnlyWithCheckpoint(1, Checkpoint),
        |t| {
            t.events.clear().expect("clear");
            t.index.clear().expect("clear");
            t.content.clear().expect("clear");
            t.meta.remove(b"head").expect("remove");
            // The store's own record of its last head would show the loss: gone too.
            std::fs::remove_file(t.dir.join(mnemo::HEAD_FILE)).ok();
        },
    );

    let total = TOTAL_CASES.fetch_add(r.cases, Ordering::SeqCst) + r.cases;
    eprintln!(
        "tamper_sizes: size {n}: {} cases at positions {positions:?} ({} detected only with the checkpoint), {} failed; built in {built:.1?}, total {:.1?} (running total over sizes: {total} cases)",
        r.cases,
        r.checkpoint_only,
        r.failures.len(),
        started.elapsed()
    );
    assert!(
        r.failures.is_empty(),
        "size {n}: {} of {} cases failed:\n{}",
        r.failures.len(),
        r.cases,
        r.failures.join("\n")
    );
}

#[test]
fn size_1() {
    corpus(1, None);
}

#[test]
fn size_2() {
    corpus(2, None);
}

#[test]
fn size_255() {
    corpus(255, None);
}

#[test]
fn size_256() {
    corpus(256, None);
}

#[test]
fn size_257() {
    corpus(257, None);
}

#[test]
fn size_10_000() {
    corpus(10_000, None);
}
