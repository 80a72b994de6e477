//! Tampering below the API: `verify` must name the right seq and the right invariant.
//!
//! One table of cases. Each pristine store is built once through the real server (Buffered),
//! closed and verified intact; every case then copies the closed directory, opens the copy with
//! `Store::open` (never a client: opening a client runs `catch_up`, which could write to a
//! tampered index before the verifier sees it), changes it below the API through the raw sled
//! trees (as an attacker with write access to the directory would), and runs `verify_store` on
//! it. Each case asserts the exact first violation — its seq and its [`ViolationKind`] — or, for
//! the few changes that are no violation, exactly what the report says instead ([`Expect`]).
//!
//! The stores: 1, 2, 255, 256, 257 and 10,000 events of creates, views, edits and tool_use blocks
//! (10,000 from 4 threads, so the writer batches them); the mixed store, 22 calls of every kind
//! the server records (rejected input, error answers, renames, deletes); and a store of 3 events
//! whose event 2 is changed in every byte. The corpus below runs on every store of the first two
//! kinds, at the first, middle and last event (1, 11 and 22 in the mixed store); the expectations
//! follow the check order documented in src/audit/verify.rs:
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
//! | a chained, honestly answered event stored at n + 1 | no violation: `meta.head` is behind the log, as a crash leaves it, and moves on the next open |
//! | garbage stored at n + 1 | `Undecodable` at n + 1 |
//! | the last event removed | `Missing` at n, "removed from the tail" |
//! | `meta.head` rolled back to event n − 1 (seq and hash; the empty head for n = 1), `mnemo-head` removed (a crash's leftover) | no violation: `meta.head` behind the log, as above |
//! | `meta.head` rolled back to n − 1 with the hash of n | `Head` at n − 1 |
//! | a file's content bytes changed in the index | `Index` at n (the index is compared at its applied seq, n) |
//! | a `c` (child) entry removed from the index | `Index` at n |
//! | the `events` tree emptied | `Missing` at 1 (`meta.head` names n, the log ends at 0) |
//! | every tree emptied but `meta.format`, and `mnemo-head` removed | nothing on disk contradicts it: `verify_store` says EMPTY; `verify_store_with` and the pristine checkpoint report `Checkpoint` at 1 |
//!
//! The last row is the documented limit of a local chain (see tests/checkpoint.rs): it is counted
//! as detected only with the checkpoint, and reported separately. The mixed store adds the cases
//! that need its events (see [`mixed_cases`]): one byte in every region of two middle events,
//! version bytes, the outcome and semantics fields, smarter swaps, a copy over a neighbour, a
//! gap, `meta.head` rewritten, rolled back against the head recorded at close, or malformed, the
//! index's records and applied seq, consistent rewrites (valid hashes) of a create and of the
//! tail, rehashed headers with bad lengths, malformed keys. Every store prints its count and a
//! running total. Standalone tests cover an empty store, the client's `verify`, a rollback below
//! a durable commit, a store without `meta.format`, 20 random flips in a store of 10,000 random
//! calls, and reopening a closed store at once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mnemo::Profile;
use mnemo::event::{Frame, Salt};
use mnemo::testing::{Store, VerifyOptions, verify_store, verify_store_with};
use mnemo::tool::{Command, Limits, Semantics};
use mnemo::{
    Body, Durability, Event, EventHash, Head, MnemoMemoryToolServer, Outcome, Report, Seq,
    ToolCall, ViolationKind,
};
use serde_json::{Value, json};

use crate::support::{Rng, TempStore, call, copy_dir, open_client, open_store, tamper_record};

/// Cases run by every store so far (each store's test prints the running total).
static TOTAL_CASES: AtomicUsize = AtomicUsize::new(0);

/// Where a record's header starts (the record's table in docs/formats.md): the version byte, the seq (u64
/// LE) at 1..9, prev_hash at 9..41, hash at 41..73, payload_hash at 73..105, the header length at
/// 105..109.
const HEADER_AT: usize = 109;

// ---------------------------------------------------------------------------------------------
// The pristine stores.
// ---------------------------------------------------------------------------------------------

/// One call: a JSON value for `handle`, or a raw line for `handle_line`.
enum Input {
    Json(Value),
    Line(&'static str),
}

/// The calls of the mixed store, in order: event `i + 1` is `mixed_inputs()[i]`.
fn mixed_inputs() -> Vec<Input> {
    use Input::{Json, Line};
    vec![
        // 1
        Json(json!({"command": "view", "path": "/memories"})),
        // 2
        Json(
            json!({"command": "create", "path": "/memories/notes.txt", "file_text": "alpha\nbeta\n"}),
        ),
        // 3
        Json(
            json!({"command": "create", "path": "/memories/a/b.txt", "file_text": "hello\nworld\n"}),
        ),
        // 4
        Json(json!({"command": "view", "path": "/memories"})),
        // 5
        Json(json!({"command": "view", "path": "/memories/a/b.txt", "view_range": [1, 1]})),
        // 6
        Json(
            json!({"command": "str_replace", "path": "/memories/a/b.txt", "old_str": "world", "new_str": "there"}),
        ),
        // 7
        Json(json!({"command": "str_replace", "path": "/memories/notes.txt", "old_str": "beta\n"})),
        // 8
        Json(
            json!({"command": "insert", "path": "/memories/a/b.txt", "insert_line": 1, "insert_text": "mid\n"}),
        ),
        // 9: a rejected path (a parsed command whose answer is an error)
        Json(json!({"command": "view", "path": "/memories/../etc/passwd"})),
        // 10: not JSON at all (a Rejected body)
        Line("not json"),
        // 11: a whole tool_use block with an unknown command (Rejected, with a tool_use id)
        Json(
            json!({"type": "tool_use", "id": "toolu_bogus", "name": "memory", "input": {"command": "bogus"}}),
        ),
        // 12
        Json(json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/c/d"})),
        // 13
        Json(
            json!({"type": "tool_use", "id": "toolu_view", "name": "memory", "input": {"command": "view", "path": "/memories/c/d/b.txt"}}),
        ),
        // 14
        Json(json!({"command": "create", "path": "/memories/x.txt", "file_text": "x marks\n"})),
        // 15
        Json(json!({"command": "delete", "path": "/memories/notes.txt"})),
        // 16
        Json(json!({"command": "create", "path": "/memories/c/e.txt", "file_text": "eee"})),
        // 17
        Json(
            json!({"command": "rename", "old_path": "/memories/x.txt", "new_path": "/memories/y.txt"}),
        ),
        // 18: an error answer (old_str not found)
        Json(
            json!({"command": "str_replace", "path": "/memories/y.txt", "old_str": "absent", "new_str": "z"}),
        ),
        // 19
        Json(json!({"command": "delete", "path": "/memories/c"})),
        // 20
        Json(json!({"command": "view", "path": "/memories"})),
        // 21
        Json(json!({"command": "create", "path": "/memories/final.txt", "file_text": "the end\n"})),
        // 22
        Json(json!({"command": "view", "path": "/memories/final.txt"})),
    ]
}

/// Seqs of interesting events in the mixed store.
const MIXED_EVENTS: u64 = 22;
const STR_REPLACE: u64 = 6;
const REJECTED_BLOCK: u64 = 11;
const CREATE_X: u64 = 14;

/// Call `i` of a deterministic mix of creates, views and edits under `dir` (no deletes, so files
/// survive to the end and the index has content to tamper with). Call 0 is a create.
fn sized_input(i: usize, dir: &str) -> Value {
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

/// What a pristine store is made of.
enum Build {
    /// These calls, in order: event `i + 1` is call `i`.
    Calls(Vec<Input>),
    /// `n` calls of [`sized_input`]: up to 300 from one thread, more from 4 threads (one agent
    /// and one directory each) so the writer batches them.
    Sized(usize),
}

/// Builds the closed store `build` describes at `path`; returns its number of events.
fn build_store(path: &Path, build: Build) -> u64 {
    let client = open_client(path, "builder", Durability::Buffered);
    let n = match build {
        Build::Calls(inputs) => {
            let server = MnemoMemoryToolServer::new(client.clone());
            let n = inputs.len();
            for (i, input) in inputs.into_iter().enumerate() {
                let out = match input {
                    Input::Json(v) => server.handle(&v),
                    Input::Line(line) => server.handle_line(line),
                };
                assert_eq!(out["type"], "tool_result", "call {} answered", i + 1);
            }
            n
        }
        Build::Sized(n) if n <= 300 => {
            let server = MnemoMemoryToolServer::new(client.clone());
            for i in 0..n {
                let out = server.handle(&sized_input(i, "solo"));
                assert_eq!(out["type"], "tool_result", "call {i} answered");
            }
            n
        }
        Build::Sized(n) => {
            const THREADS: usize = 4;
            std::thread::scope(|scope| {
                for t in 0..THREADS {
                    let calls = n / THREADS + usize::from(t < n % THREADS);
                    let agent = client.with_agent(format!("agent-{t}")).expect("agent id");
                    scope.spawn(move || {
                        let server = MnemoMemoryToolServer::new(agent);
                        let dir = format!("t{t}");
                        for i in 0..calls {
                            let out = server.handle(&sized_input(i, &dir));
                            assert_eq!(out["type"], "tool_result", "thread {t} call {i} answered");
                        }
                    });
                }
            });
            n
        }
    };
    let n = u64::try_from(n).expect("small");
    assert_eq!(
        client.head().expect("head").seq,
        Seq(n),
        "one event per call"
    );
    // Dropping the last client stops the writer; sled flushes and closes the store.
    n
}

/// A pristine store, closed, with what the cases need to know about it.
struct Pristine {
    _dir: tempfile::TempDir,
    path: PathBuf,
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

    /// The pristine record of event `seq`.
    fn record(&self, seq: u64) -> Vec<u8> {
        self.records[usize::try_from(seq).expect("small") - 1].clone()
    }
}

fn pristine(build: Build) -> Pristine {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("pristine.mnemo.db");
    let n = build_store(&path, build);
    let store = open_store(&path);
    let report = verify_store(&store).expect("verify the pristine store");
    assert!(
        report.is_intact(),
        "pristine store of {n}: {:?}",
        report.violations
    );
    assert_eq!(report.events, n);
    assert_eq!(report.index_applied, Seq(n), "the index is caught up");
    let mut hashes = vec![EventHash::ZERO];
    let mut records = Vec::new();
    for item in store.records(Seq(1)) {
        let (_, record) = item.expect("read");
        hashes.push(Frame::decode(&record).expect("frame").hash);
        records.push(record);
    }
    drop(store);
    Pristine {
        _dir: dir,
        path,
        n,
        head: report.head,
        hashes,
        records,
    }
}

/// The mixed store.
fn mixed() -> Pristine {
    let base = pristine(Build::Calls(mixed_inputs()));
    assert_eq!(base.n, MIXED_EVENTS);
    base
}

// ---------------------------------------------------------------------------------------------
// The record's byte table.
// ---------------------------------------------------------------------------------------------

/// A record's regions, by the record's byte table in docs/formats.md: `(name, start, end, expected kind)`.
/// Header sub-fields are located by decoding the stored frame; the header ends with the outcome
/// (`is_error`, then the 32-byte `result_hash`) and, from format 2, the 4-byte `semantics`; in
/// format 4 the 32-byte salt follows the header.
fn regions(rec: &[u8]) -> Vec<(&'static str, usize, usize, ViolationKind)> {
    use ViolationKind::{BrokenLink, Hash, PayloadHash, SeqMismatch, Undecodable};
    let frame = Frame::decode(rec).expect("an untouched record decodes");
    let h = HEADER_AT;
    let hl = frame.header.len();
    let agent_len = usize::try_from(u64::from_le_bytes(
        frame.header[8..16].try_into().expect("8 bytes"),
    ))
    .expect("fits");
    let tool_use_at = 16 + agent_len;
    let outcome_end = hl - if frame.version >= 2 { 4 } else { 0 };
    let is_error_at = outcome_end - 33;
    let salt = if frame.salt.is_some() { 32 } else { 0 };
    let p = h + hl + salt + 4; // payload offset
    let mut out = vec![
        ("version", 0, 1, Undecodable),
        ("seq", 1, 9, SeqMismatch),
        ("prev_hash", 9, 41, BrokenLink),
        ("hash", 41, 73, Hash),
        ("payload_hash", 73, 105, PayloadHash),
        ("header_len", 105, h, Undecodable),
        ("header.time_ms", h, h + 8, Hash),
        ("header.agent length", h + 8, h + 16, Hash),
        ("header.agent", h + 16, h + tool_use_at, Hash),
        ("header.tool_use_id", h + tool_use_at, h + is_error_at, Hash),
        (
            "header.outcome.is_error",
            h + is_error_at,
            h + is_error_at + 1,
            Hash,
        ),
        (
            "header.outcome.result_hash",
            h + is_error_at + 1,
            h + outcome_end,
            Hash,
        ),
    ];
    if outcome_end < hl {
        out.push(("header.semantics", h + outcome_end, h + hl, Hash));
    }
    if salt > 0 {
        // The salt keys the payload commitment: a changed salt is a payload that no longer
        // hashes to its commitment.
        out.push(("salt", h + hl, h + hl + salt, PayloadHash));
    }
    out.extend([
        ("payload_len", h + hl + salt, p, Undecodable),
        ("payload", p, rec.len(), PayloadHash),
    ]);
    // The regions tile the record: no gap, no overlap, nothing past the end.
    let mut next = 0;
    for (name, start, end, _) in &out {
        assert_eq!(
            *start, next,
            "region {name} starts where the previous one ends"
        );
        assert!(start < end, "region {name} is not empty");
        next = *end;
    }
    assert_eq!(next, rec.len(), "the regions cover the whole record");
    out
}

/// The region byte `at` of `rec` lies in, and the violation a change there must produce.
fn expected_kind(rec: &[u8], at: usize) -> (&'static str, ViolationKind) {
    regions(rec)
        .into_iter()
        .find(|(_, start, end, _)| (*start..*end).contains(&at))
        .map(|(name, _, _, kind)| (name, kind))
        .expect("every byte of a record is in some region")
}

/// The one-byte changes the corpus makes to each tampered event: `(region, offset, xor mask,
/// expected kind)`, at the first, middle or last byte of a region of [`regions`].
fn flips(record: &[u8]) -> Vec<(&'static str, usize, u8, ViolationKind)> {
    let regions = regions(record);
    let region = |name: &str| {
        regions
            .iter()
            .find(|r| r.0 == name)
            .copied()
            .expect("a region of the record")
    };
    let first = |name| (region(name).0, region(name).1, region(name).3);
    let last = |name| (region(name).0, region(name).2 - 1, region(name).3);
    let (payload, start, end, kind) = region("payload");
    [
        (first("payload"), 0x01),
        ((payload, (start + end - 1) / 2, kind), 0x20),
        (last("payload"), 0x80),
        (first("prev_hash"), 0x01),
        (last("prev_hash"), 0x80),
        (first("seq"), 0x01),
        (last("seq"), 0x80),
        (first("header.outcome.is_error"), 0x01),
        (first("header.outcome.result_hash"), 0x01),
        (last("header.outcome.result_hash"), 0xff),
    ]
    .into_iter()
    .map(|((name, at, kind), mask)| (name, at, mask, kind))
    .collect()
}

// ---------------------------------------------------------------------------------------------
// The table's runner.
// ---------------------------------------------------------------------------------------------

/// The raw trees of the copy under tamper.
struct Trees {
    events: sled::Tree,
    meta: sled::Tree,
    index: sled::Tree,
    content: sled::Tree,
    /// The store directory (for its `mnemo-head`).
    dir: PathBuf,
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

    fn remove(&self, seq: u64) {
        self.events.remove(Seq(seq).key()).expect("remove");
    }

    /// Rewrites record `seq` with `edit`.
    fn edit(&self, seq: u64, edit: impl FnOnce(&mut Vec<u8>)) {
        let mut record = self.record(seq);
        edit(&mut record);
        self.put(seq, record);
    }

    /// Decodes event `seq`, lets `change` alter it, and stores it re-encoded with a correctly
    /// recomputed payload hash and chain hash (`Event::to_frame`). Later events are left alone.
    fn rewrite(&self, seq: u64, change: impl FnOnce(&mut Event)) {
        self.edit(seq, |r| {
            let mut event = Event::decode(r).expect("decode the original");
            change(&mut event);
            let frame = event.to_frame();
            assert_eq!(frame.payload_hash, frame.recompute_payload_hash());
            assert_eq!(frame.recompute_hash(), frame.hash);
            *r = frame.encode();
        });
    }

    /// `meta.head`'s 40 bytes: seq (8, BE) and hash (32).
    fn meta_head(&self) -> Vec<u8> {
        let head = self
            .meta
            .get(b"head")
            .expect("get")
            .expect("meta.head exists")
            .to_vec();
        assert_eq!(head.len(), 40, "head is seq (8, BE) + hash (32)");
        head
    }

    fn set_meta_head(&self, head: Vec<u8>) {
        self.meta.insert(b"head", head).expect("insert");
    }

    /// Sets `meta.head` to `seq` and `hash`.
    fn set_head(&self, seq: u64, hash: EventHash) {
        let mut head = seq.to_be_bytes().to_vec();
        head.extend_from_slice(&hash.0);
        self.set_meta_head(head);
    }

    /// Removes the head the store recorded outside sled at its close (`mnemo-head`), as a crash
    /// before the close leaves it.
    fn drop_recorded_head(&self) {
        std::fs::remove_file(self.dir.join(mnemo::testing::HEAD_FILE))
            .expect("remove the head record");
    }
}

/// What a case must produce.
enum Expect {
    /// `verify_store` names this first violation.
    First(u64, ViolationKind),
    /// [`Expect::First`], and the violation's detail says this.
    Saying(u64, ViolationKind, &'static str),
    /// `verify_store` finds nothing (the documented limit), and `verify_store_with` the pristine
    /// checkpoint names this first violation.
    OnlyWithCheckpoint(u64, ViolationKind),
    /// Not a violation: `meta.head` is behind a log that chains to event `end`, which is what a
    /// crash leaves when it cuts a commit short. The report names `end` as the head, and the
    /// next open for writing moves `meta.head` there.
    Behind { end: u64, meta_head: u64 },
    /// The limit of a hash chain without an external anchor: the last event rewritten
    /// consistently, `meta.head` moved to its new hash and the recorded head removed. Nothing on
    /// disk contradicts it: intact, with a head at the pristine seq but another hash.
    Forged,
}

/// Why `report` does not name exactly one violation, at `seq`, of `kind`; `None` if it does.
fn wrong_first(report: &Report, seq: u64, kind: ViolationKind) -> Option<String> {
    match report.violations.first() {
        None => Some(format!("UNDETECTED (report says {})", report.status())),
        Some(v) if (v.seq, v.kind) != (Seq(seq), kind) => Some(format!(
            "expected {} at seq {seq}, got {} at seq {} ({})",
            kind.name(),
            v.kind.name(),
            v.seq,
            v.detail
        )),
        Some(_) if report.violations.len() != 1 => Some(format!(
            "verification must stop at the first violation, got {:?}",
            report.violations
        )),
        Some(_) => None,
    }
}

/// Asserts the report names exactly one violation, at `seq`, of `kind`.
#[track_caller]
fn assert_first(report: &Report, seq: u64, kind: ViolationKind, what: &str) {
    if let Some(wrong) = wrong_first(report, seq, kind) {
        panic!("{what}: {wrong}");
    }
}

/// Runs tamper cases against copies of one pristine store and collects what went wrong.
struct Runner<'a> {
    base: &'a Pristine,
    label: String,
    started: Instant,
    cases: usize,
    checkpoint_only: usize,
    failures: Vec<String>,
}

impl<'a> Runner<'a> {
    fn new(base: &'a Pristine, label: &str, started: Instant) -> Runner<'a> {
        Runner {
            base,
            label: label.to_string(),
            started,
            cases: 0,
            checkpoint_only: 0,
            failures: Vec::new(),
        }
    }

    fn case(&mut self, what: &str, expect: Expect, tamper: impl FnOnce(&Trees)) {
        self.cases += 1;
        let what = format!("{}: {what}", self.label);
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
        let wrong = match expect {
            Expect::First(seq, kind) => wrong_first(&report, seq, kind),
            Expect::Saying(seq, kind, text) => wrong_first(&report, seq, kind).or_else(|| {
                let detail = &report.violations[0].detail;
                (!detail.contains(text))
                    .then(|| format!("the detail does not say {text:?}: {detail}"))
            }),
            Expect::OnlyWithCheckpoint(seq, kind) => {
                self.checkpoint_only += 1;
                if report.is_intact() {
                    let options = VerifyOptions {
                        expect: Some(self.base.head),
                        progress: None,
                    };
                    let report = verify_store_with(&store, options)
                        .expect("verify_store_with returns a report");
                    wrong_first(&report, seq, kind).map(|w| format!("with the checkpoint: {w}"))
                } else {
                    Some(format!(
                        "expected the documented undetectable case (intact without a checkpoint), got {:?}",
                        report.violations
                    ))
                }
            }
            Expect::Behind { end, meta_head } => {
                let found = (
                    report.violations.is_empty(),
                    report.head.seq.0,
                    report.meta_head.seq.0,
                );
                if found == (true, end, meta_head) {
                    match store.catch_up().and_then(|_| store.head()) {
                        Ok(head) if head == report.head => None,
                        other => Some(format!(
                            "opening for writing must move meta.head to {}, got {other:?}",
                            report.head
                        )),
                    }
                } else {
                    Some(format!(
                        "expected intact with meta.head {meta_head} behind the log's end {end}, got {:?} (head {}, meta.head {})",
                        report.violations, report.head, report.meta_head
                    ))
                }
            }
            Expect::Forged => {
                let pristine = self.base.head;
                let forged = report.is_intact()
                    && report.head.seq == pristine.seq
                    && report.head.hash != pristine.hash;
                (!forged).then(|| {
                    format!(
                        "expected the forged head accepted (intact, seq {}, another hash than {}), got {:?} with head {}",
                        pristine.seq, pristine.hash, report.violations, report.head
                    )
                })
            }
        };
        if let Some(wrong) = wrong {
            self.failures.push(format!("{what}: {wrong}"));
        }
    }

    /// Prints the count and the running total, and asserts that no case failed.
    fn finish(self) {
        let total = TOTAL_CASES.fetch_add(self.cases, Ordering::SeqCst) + self.cases;
        eprintln!(
            "tamper: {}: {} cases ({} detected only with the checkpoint), {} failed, in {:.1?} (running total: {total} cases)",
            self.label,
            self.cases,
            self.checkpoint_only,
            self.failures.len(),
            self.started.elapsed()
        );
        assert!(
            self.failures.is_empty(),
            "{}: {} of {} cases failed:\n{}",
            self.label,
            self.failures.len(),
            self.cases,
            self.failures.join("\n")
        );
    }
}

/// The record of event `seq`, chained after the pristine event `seq - 1` and honestly answered
/// against the replayed tree: every check passes on it.
fn honest_record(events: &sled::Tree, seq: u64, prev: EventHash) -> Vec<u8> {
    let mut replay = mnemo::testing::replay::Replay::in_memory();
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
    // Salted, as the writer salts every event: a forgery looks like any other event.
    let salt = Salt([0x5a; 32]);
    Event::answered(
        Seq(seq),
        prev,
        "mallory",
        1_760_000_000_000,
        body,
        &answer,
        salt,
    )
    .to_frame()
    .encode()
}

// ---------------------------------------------------------------------------------------------
// The corpus: every store.
// ---------------------------------------------------------------------------------------------

/// Adds the corpus of the table above to `r`, its per-event cases at `positions`.
fn corpus(r: &mut Runner<'_>, positions: &[u64]) {
    use ViolationKind::{Checkpoint, Head as HeadKind, Index, Missing, SeqMismatch, Undecodable};
    let base = r.base;
    let n = base.n;
    for &p in positions {
        for (region, at, mask, kind) in flips(&base.record(p)) {
            r.case(
                &format!("{region} of event {p}: byte {at} ^ {mask:#04x}"),
                Expect::First(p, kind),
                |t| t.edit(p, |rec| rec[at] ^= mask),
            );
        }
        r.case(
            &format!("event {p} deleted"),
            Expect::First(p, Missing),
            |t| t.remove(p),
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
    // A chain proves order and content, not who may append: anyone who can write the store can
    // extend it, and a checkpoint taken before cannot tell. Who wrote it is in the event.
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
        Expect::Saying(n, Missing, "removed from the tail"),
        |t| t.remove(n),
    );
    r.case(
        &format!("meta.head rolled back to {}", n - 1),
        Expect::Behind {
            end: n,
            meta_head: n - 1,
        },
        |t| {
            t.set_head(n - 1, base.hash(n - 1));
            // What a crash leaves: no head recorded past `meta.head` (a clean close records
            // one, and a `meta.head` behind it is a rollback: see the mixed store's cases).
            t.drop_recorded_head();
        },
    );
    if n > 1 {
        r.case(
            &format!("meta.head rolled back to {} with a wrong hash", n - 1),
            Expect::First(n - 1, HeadKind),
            |t| t.set_head(n - 1, base.hash(n)),
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
            t.drop_recorded_head();
        },
    );
}

/// The corpus on a store of `n` events, at its first, middle and last event.
fn sized(n: usize) {
    let started = Instant::now();
    let base = pristine(Build::Sized(n));
    let n = base.n;
    let mut positions = vec![1, n.div_ceil(2), n];
    positions.dedup();
    let mut r = Runner::new(&base, &format!("size {n}"), started);
    corpus(&mut r, &positions);
    r.finish();
}

#[test]
fn size_1() {
    sized(1);
}

#[test]
fn size_2() {
    sized(2);
}

#[test]
fn size_255() {
    sized(255);
}

#[test]
fn size_256() {
    sized(256);
}

#[test]
fn size_257() {
    sized(257);
}

#[test]
fn size_10_000() {
    sized(10_000);
}

// ---------------------------------------------------------------------------------------------
// The mixed store: the corpus, and the cases that need its events.
// ---------------------------------------------------------------------------------------------

#[test]
fn the_mixed_store() {
    let started = Instant::now();
    let base = mixed();
    let mut r = Runner::new(&base, "mixed store", started);
    corpus(&mut r, &[1, REJECTED_BLOCK, MIXED_EVENTS]);
    mixed_cases(&mut r);
    r.finish();
}

/// The key of the content chunk holding `content` (a file of one chunk), and of its file's `f`
/// record.
fn file_entry(content_tree: &sled::Tree, content: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let chunk = content_tree
        .iter()
        .map(|item| item.expect("scan"))
        .find(|(_, v)| v.len() >= 8 && &v[8..] == content)
        .map(|(k, _)| k.to_vec())
        .expect("the file's content chunk");
    let mut file = b"f".to_vec();
    file.extend_from_slice(&chunk[1..9]);
    (chunk, file)
}

/// A rewrite of one event.
type Change = Box<dyn FnOnce(&mut Event)>;

/// Event 14's create, as `change` sees it.
fn create_x(e: &mut Event) -> (&mut String, &mut String) {
    let Body::Tool(ToolCall {
        command: Command::Create { path, file_text },
        ..
    }) = &mut e.body
    else {
        panic!("event 14 is a create")
    };
    (path, file_text)
}

/// The cases that need the mixed store's events (see [`mixed_inputs`]).
fn mixed_cases(r: &mut Runner<'_>) {
    use ViolationKind::{
        BrokenLink, Hash, Head as HeadKind, Index, Missing, Outcome as OutcomeKind, SeqMismatch,
        Undecodable,
    };
    let base = r.base;
    let n = base.n;

    // One byte in every region of two middle events: its first, middle and last byte, plus one.
    for seq in [STR_REPLACE, REJECTED_BLOCK] {
        for (name, start, end, kind) in regions(&base.record(seq)) {
            for at in [start, (start + end) / 2, end - 1] {
                r.case(
                    &format!("seq {seq}, {name}, byte {at} + 1"),
                    Expect::First(seq, kind),
                    |t| t.edit(seq, |rec| rec[at] = rec[at].wrapping_add(1)),
                );
            }
        }
    }
    // The store's records are format 9: read as 1, 2 or 3 the salt is taken for the payload's
    // length, and read as 5 (erased) its first byte for the format erased and the rest left
    // over, so the record no longer splits; read as 4 its header names semantics 5, which
    // format 4 does not hold, nor do formats 6, 7 and 8 (semantics 4); read as 10 it is not a
    // redaction, which is all format 10 holds; read as 11 (erased, keeping an effect) it does
    // not split either; read as 12 it is not a revert's record, which is all format 12 holds;
    // the one past this build's is newer than this build.
    let newer = mnemo::testing::event::FORMAT_VERSION + 1;
    for version in [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, newer, 0xff] {
        let expect = if version == newer {
            Expect::Saying(STR_REPLACE, Undecodable, "newer")
        } else {
            Expect::First(STR_REPLACE, Undecodable)
        };
        r.case(&format!("version byte {version}"), expect, |t| {
            t.edit(STR_REPLACE, |rec| rec[0] = version);
        });
    }
    // The recorded is_error flag, a result_hash byte, the semantics the call was answered under:
    // caught by the chain hash before replay compares outcomes (the header is hashed).
    let record = base.record(STR_REPLACE);
    let frame = Frame::decode(&record).expect("decodes");
    assert_eq!(frame.version, 9, "the writer writes format 9");
    let semantics_at = HEADER_AT + frame.header.len() - 4;
    assert_eq!(record[semantics_at..semantics_at + 4], 5u32.to_le_bytes());
    let is_error_at = semantics_at - 33;
    assert_eq!(record[is_error_at], 0, "str_replace at seq 6 succeeded");
    for (what, at, value) in [
        ("is_error 0 -> 1", is_error_at, 1u8),
        ("is_error 0 -> 2 (not a bool)", is_error_at, 2),
        (
            "result_hash byte",
            is_error_at + 1,
            record[is_error_at + 1] ^ 0x80,
        ),
        ("semantics 5 -> 1", semantics_at, 1),
        ("semantics 5 -> 4", semantics_at, 4),
        ("semantics 5 -> 6", semantics_at, 6),
    ] {
        r.case(
            &format!("seq {STR_REPLACE}: {what}"),
            Expect::First(STR_REPLACE, Hash),
            |t| t.edit(STR_REPLACE, |rec| rec[at] = value),
        );
    }

    // Removed, swapped, copied and extra events.
    r.case(
        "the last two events removed",
        Expect::First(n - 1, Missing),
        |t| {
            t.remove(n);
            t.remove(n - 1);
        },
    );
    // A smarter swap: the seq inside each record is fixed up to match its new key. The record
    // now under 11 still carries event 12's prev_hash (the hash of event 11), not event 10's.
    let (a, b) = (REJECTED_BLOCK, REJECTED_BLOCK + 1);
    r.case(
        "events 11 and 12 swapped with their seq fields rewritten",
        Expect::First(a, BrokenLink),
        |t| {
            let (mut ra, mut rb) = (t.record(a), t.record(b));
            ra[1..9].copy_from_slice(&b.to_le_bytes());
            rb[1..9].copy_from_slice(&a.to_le_bytes());
            t.put(a, rb);
            t.put(b, ra);
        },
    );
    r.case(
        "event 3 copied over event 4",
        Expect::First(4, SeqMismatch),
        |t| t.put(4, t.record(3)),
    );
    r.case(
        "event 1 copied under key 0",
        Expect::First(0, Missing),
        |t| t.put(0, t.record(1)),
    );
    r.case(
        "a chained, honestly answered event stored 5 past the end (a gap)",
        Expect::First(n + 1, Missing),
        |t| t.put(n + 6, honest_record(&t.events, n + 1, base.hash(n))),
    );
    // "abc" sorts after every 8-byte key that starts with a zero byte: named past the end, where
    // it sorts, as a key that is no seq.
    r.case(
        "the last record copied under an events key of 3 bytes",
        Expect::Saying(n + 1, Missing, "is not 8 bytes"),
        |t| {
            t.events.insert(b"abc", t.record(n)).expect("insert");
        },
    );

    // meta.head. After the clean close the store recorded its head outside sled (`mnemo-head`):
    // a meta.head behind that record is a rollback, named at the recorded head.
    r.case(
        "meta.head's hash changed",
        Expect::First(n, HeadKind),
        |t| {
            let mut head = t.meta_head();
            head[8 + 17] ^= 0x01;
            t.set_meta_head(head);
        },
    );
    r.case(
        &format!("meta.head rolled back to {}, the recorded head kept", n - 1),
        Expect::First(n, HeadKind),
        |t| t.set_head(n - 1, base.hash(n - 1)),
    );
    r.case(
        "meta.head removed, the recorded head kept",
        Expect::First(n, HeadKind),
        |t| {
            t.meta.remove(b"head").expect("remove");
        },
    );
    // Removed with the record: the head reads as the empty log's (seq 0), as after a crash
    // during the first commit; the log chains on from seq 1, so nothing is lost.
    r.case(
        "meta.head removed, and the recorded head",
        Expect::Behind {
            end: n,
            meta_head: 0,
        },
        |t| {
            t.meta.remove(b"head").expect("remove");
            t.drop_recorded_head();
        },
    );
    // Pushing the head's seq forward reads like events removed from the tail.
    r.case(
        "meta.head's seq pushed past the end",
        Expect::First(n + 1, Missing),
        |t| {
            let mut head = t.meta_head();
            head[..8].copy_from_slice(&(n + 1).to_be_bytes());
            t.set_meta_head(head);
        },
    );
    r.case("meta.head of 41 bytes", Expect::First(0, HeadKind), |t| {
        let mut head = t.meta_head();
        head.push(0);
        t.set_meta_head(head);
    });

    // The index: compared when replay reaches its applied seq (the head).
    r.case(
        "the created seq of a file's `f` record changed",
        Expect::First(n, Index),
        |t| {
            let (_, key) = file_entry(&t.content, b"the end\n");
            let mut value = t.index.get(&key).expect("get").expect("present").to_vec();
            value[0] ^= 0x01; // created seq (u64 LE)
            t.index.insert(key, value).expect("insert");
        },
    );
    for stray in [
        &b"zzz"[..],
        b"c\0\0\0\0\0\0\0\0stray",
        b"f\0\0\0\0\0\0\0\x63",
    ] {
        r.case(
            &format!("stray index key {stray:?}"),
            Expect::First(n, Index),
            |t| {
                t.index.insert(stray, &b"x"[..]).expect("insert");
            },
        );
    }
    // Rolled back to 20: at seq 20 the replayed tree (before final.txt was created at 21)
    // differs from the stored one. Pushed past the head: never reached during replay, reported
    // after the head checks. Not 8 bytes: unreadable, reported at 0.
    for (what, applied, expect) in [
        ("rolled back to 20", (n - 2).to_be_bytes().to_vec(), n - 2),
        (
            "pushed past the head",
            (n + 3).to_be_bytes().to_vec(),
            n + 3,
        ),
        ("of 3 bytes", b"abc".to_vec(), 0),
    ] {
        r.case(
            &format!("the index's applied seq {what}"),
            Expect::First(expect, Index),
            |t| {
                t.index.insert(b"a", applied).expect("insert");
            },
        );
    }

    // Consistent rewrites: hashes valid. Event 14 creates /memories/x.txt; rewrite who made it,
    // when, or what text it wrote, and the result text is the same: event 14 passes every check
    // on its own, and the first inconsistency is event 15's prev_hash.
    let same_outcome: [(&str, Change); 3] = [
        ("agent", Box::new(|e| e.header.agent = "mallory".into())),
        ("time", Box::new(|e| e.header.time_ms += 1)),
        (
            "file_text",
            Box::new(|e| *create_x(e).1 = "forged\n".into()),
        ),
    ];
    for (what, change) in same_outcome {
        r.case(
            &format!("consistent rewrite of event 14's {what}"),
            Expect::First(CREATE_X + 1, BrokenLink),
            |t| t.rewrite(CREATE_X, change),
        );
    }
    // Re-answering gives another outcome than the recorded one: the rewritten event is named.
    let other_outcome: [(&str, Change); 2] = [
        (
            "path to one that exists then",
            Box::new(|e| *create_x(e).0 = "/memories/c/d/b.txt".into()),
        ),
        ("is_error", Box::new(|e| e.header.outcome.is_error = true)),
    ];
    for (what, change) in other_outcome {
        r.case(
            &format!("consistent rewrite of event 14's {what}"),
            Expect::First(CREATE_X, OutcomeKind),
            |t| t.rewrite(CREATE_X, change),
        );
    }
    // The last event: no later prev_hash to break, so meta.head's hash is the witness; moved to
    // the new hash, the recorded head still names the old one; with that record removed too,
    // nothing on disk contradicts the rewrite (anchoring the head elsewhere detects it).
    let mallory = |e: &mut Event| e.header.agent = "mallory".into();
    r.case(
        "consistent rewrite of the last event",
        Expect::First(n, HeadKind),
        |t| t.rewrite(n, mallory),
    );
    let forge_tail = |t: &Trees| {
        t.rewrite(n, mallory);
        t.set_head(n, Frame::decode(&t.record(n)).expect("frame").hash);
    };
    r.case(
        "consistent rewrite of the last event and meta.head, the recorded head kept",
        Expect::First(n, HeadKind),
        forge_tail,
    );
    r.case(
        "consistent rewrite of the last event and meta.head, the recorded head removed",
        Expect::Forged,
        |t| {
            forge_tail(t);
            t.drop_recorded_head();
        },
    );
    // The agent's length field rewritten, and the chain hash recomputed so that every hash
    // check passes: only decoding the header catches it. u64::MAX would only panic ("capacity
    // overflow"); a length like 1 << 45 would make bincode allocate 32 TiB and abort the
    // process, so it is not run.
    for len in [1u64 << 20, u64::MAX] {
        r.case(
            &format!("event 14's agent length set to {len}, rehashed"),
            Expect::First(CREATE_X, Undecodable),
            |t| {
                t.edit(CREATE_X, |rec| {
                    let mut frame = Frame::decode(rec).expect("decode");
                    frame.header[8..16].copy_from_slice(&len.to_le_bytes());
                    frame.hash = frame.recompute_hash();
                    *rec = frame.encode();
                });
            },
        );
    }
}

/// Every byte of event 2 of 3, with every bit flipped (0xff) and with only its lowest bit
/// flipped (0x01): each is named at seq 2, with the kind its region predicts (the header is
/// hashed before it is decoded, the payload hash checked before the payload is decoded).
#[test]
fn every_byte_of_event_2_of_3_is_named_at_seq_2() {
    let started = Instant::now();
    let base = pristine(Build::Calls(vec![
        Input::Json(
            json!({"command": "create", "path": "/memories/n.txt", "file_text": "one\ntwo\n"}),
        ),
        Input::Json(
            json!({"type": "tool_use", "id": "toolu_2", "name": "memory",
               "input": {"command": "str_replace", "path": "/memories/n.txt", "old_str": "two", "new_str": "2"}}),
        ),
        Input::Json(json!({"command": "view", "path": "/memories/n.txt"})),
    ]));
    let record = base.record(2);
    let mut r = Runner::new(&base, "every byte of event 2 of 3", started);
    for mask in [0xffu8, 0x01] {
        for at in 0..record.len() {
            let (region, kind) = expected_kind(&record, at);
            r.case(
                &format!("byte {at} ({region}) ^ {mask:#04x}"),
                Expect::First(2, kind),
                |t| t.edit(2, |rec| rec[at] ^= mask),
            );
        }
    }
    assert_eq!(r.cases, 2 * record.len(), "every byte was tried");
    r.finish();
}

// ---------------------------------------------------------------------------------------------
// Standalone cases.
// ---------------------------------------------------------------------------------------------

#[test]
fn an_empty_store_verifies_as_empty() {
    let t = TempStore::new();
    let report = verify_store(&open_store(&t.path())).expect("verify");
    assert!(report.is_empty(), "{report:?}");
    assert!(report.is_intact());
    assert_eq!(report.events, 0);
    assert_eq!(report.head.seq, Seq(0));
    // The same through a client (which also creates the store's writer).
    let report = t.client().verify().expect("verify through the client");
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(report.events, 0);
}

#[test]
fn an_untouched_mixed_store_verifies_intact_through_the_client_too() {
    let base = mixed();
    let client = open_client(&base.path, "test-agent", Durability::Buffered);
    let report = client.verify().expect("verify through the client");
    assert!(report.is_intact(), "{:?}", report.violations);
    assert_eq!(report.events, MIXED_EVENTS);
    assert_eq!(report.head.seq, Seq(MIXED_EVENTS));
    assert_eq!(report.index_applied, Seq(MIXED_EVENTS));
    // The mixed store holds every kind of body the server records.
    let bodies: Vec<Body> = client
        .events(Seq(1))
        .expect("events")
        .map(|e| e.expect("decode").body)
        .collect();
    assert!(matches!(&bodies[9], Body::Rejected(r) if r.input == "not json"));
    assert!(matches!(&bodies[10], Body::Rejected(_)));
    assert!(matches!(
        &bodies[8],
        Body::Tool(ToolCall {
            command: Command::View { .. },
            ..
        })
    ));
}

#[test]
fn the_client_verify_names_the_same_violation() {
    let base = mixed();
    tamper_record(&base.path, STR_REPLACE, |r| {
        let last = r.len() - 1;
        r[last] ^= 0x20;
    });
    let report = open_client(&base.path, "test-agent", Durability::Buffered)
        .verify()
        .expect("verify through the client");
    assert_first(
        &report,
        STR_REPLACE,
        ViolationKind::PayloadHash,
        "client verify",
    );
}

#[test]
fn a_head_rolled_back_below_a_durable_commit_is_named() {
    // After each durable commit the store records its head outside sled: a meta.head behind
    // that record is a rollback, not a crash.
    let t = TempStore::new();
    {
        let client = open_client(&t.path(), "test-agent", Durability::Fsync);
        let server = MnemoMemoryToolServer::new(client);
        for name in ["a", "b"] {
            let (text, is_error) = call(
                &server,
                json!({"command": "create", "path": format!("/memories/{name}"), "file_text": name}),
            );
            assert!(!is_error, "{text}");
        }
    }
    let store = open_store(&t.path());
    let record = store.get(Seq(1)).expect("read").expect("event 1");
    let mut head = 1u64.to_be_bytes().to_vec();
    head.extend_from_slice(&Frame::decode(&record).expect("frame").hash.0);
    let (_, meta, _) = store.raw_trees();
    meta.insert(b"head", head).expect("insert");
    meta.flush().expect("flush");
    assert_first(
        &verify_store(&store).expect("verify"),
        2,
        ViolationKind::Head,
        "head rolled back below the recorded head",
    );
}

#[test]
fn a_store_without_meta_format_cannot_be_opened_to_verify() {
    // Store::open refuses a store that has events but no meta.format: it cannot tell which format
    // the events are in, so it says the store is corrupt rather than guess.
    let base = mixed();
    {
        let store = open_store(&base.path);
        let (_, meta, _) = store.raw_trees();
        meta.remove(b"format").expect("remove");
        meta.flush().expect("flush");
    }
    match Store::open(&base.path) {
        Err(mnemo::Error::Corrupt { what }) => assert!(what.contains("no meta.format"), "{what}"),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("expected Corrupt, got an open store"),
    }
}

// ---------------------------------------------------------------------------------------------
// A large random store.
// ---------------------------------------------------------------------------------------------

const RANDOM_CALLS: u64 = 10_000;

fn random_input(rng: &mut Rng) -> Input {
    const DIRS: [&str; 3] = ["", "/a", "/a/b"];
    const TEXTS: [&str; 4] = ["x", "one\ntwo\n", "two", "h\u{e9}llo\n"];
    let path = |rng: &mut Rng| {
        format!(
            "/memories{}/f{}.txt",
            DIRS[rng.below(DIRS.len())],
            rng.below(4)
        )
    };
    let text = |rng: &mut Rng| TEXTS[rng.below(TEXTS.len())];
    let v = match rng.below(20) {
        0..=4 => json!({"command": "create", "path": path(rng), "file_text": text(rng)}),
        5..=7 => json!({"command": "view", "path": path(rng)}),
        8 => json!({"command": "view", "path": "/memories", "view_range": null}),
        9..=11 => {
            json!({"command": "str_replace", "path": path(rng), "old_str": text(rng), "new_str": text(rng)})
        }
        12..=13 => {
            json!({"command": "insert", "path": path(rng), "insert_line": rng.below(3), "insert_text": text(rng)})
        }
        14..=15 => json!({"command": "delete", "path": path(rng)}),
        16 => json!({"command": "delete", "path": format!("/memories{}", DIRS[1 + rng.below(2)])}),
        17 => json!({"command": "rename", "old_path": path(rng), "new_path": path(rng)}),
        18 => json!({"command": "view", "path": "/memories/../x"}),
        _ => return Input::Line("{not json"),
    };
    Input::Json(v)
}

#[test]
fn ten_thousand_random_calls_verify_and_each_random_tamper_is_named() {
    let started = Instant::now();
    let t = TempStore::new();
    {
        let server = t.server(); // Durability::Buffered (TempStore::client)
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mut errors = 0;
        for _ in 0..RANDOM_CALLS {
            let out = match random_input(&mut rng) {
                Input::Json(v) => server.handle(&v),
                Input::Line(line) => server.handle_line(line),
            };
            if out.get("is_error").is_some() {
                errors += 1;
            }
        }
        // The generator exercises both paths: plenty of successes and plenty of errors.
        assert!(
            (RANDOM_CALLS / 5..=RANDOM_CALLS * 4 / 5).contains(&errors),
            "{errors} of {RANDOM_CALLS} calls were errors"
        );
        assert_eq!(server.client().head().expect("head").seq, Seq(RANDOM_CALLS));
    }
    let built = started.elapsed();
    let store = open_store(&t.path());
    let report = verify_store(&store).expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
    assert_eq!(report.events, RANDOM_CALLS);
    let verified = report.elapsed;
    let (events, _, _) = store.raw_trees();
    let mut rng = Rng(0x7a3b_e4e4_0000_0042);
    for round in 0..20 {
        let seq = 1 + rng.next() % RANDOM_CALLS;
        let key = Seq(seq).key();
        let original = events.get(key).expect("get").expect("present");
        let mut tampered = original.to_vec();
        let at = rng.below(tampered.len());
        let mask = u8::try_from(1 + rng.next() % 255).expect("1..=255");
        tampered[at] ^= mask;
        events.insert(key, tampered).expect("tamper");
        let report = verify_store(&store).expect("verify");
        let (region, kind) = expected_kind(&original, at);
        assert_first(
            &report,
            seq,
            kind,
            &format!("round {round}: byte {at} ({region}) ^ {mask:#04x} of seq {seq}"),
        );
        events.insert(key, original).expect("restore");
    }
    let report = verify_store(&store).expect("verify");
    assert!(
        report.is_intact(),
        "restored store verifies: {:?}",
        report.violations
    );
    eprintln!(
        "random store: {RANDOM_CALLS} calls built in {built:?}, verified intact in {verified:?}, total {:?}",
        started.elapsed()
    );
}

#[test]
fn a_closed_store_reopens_at_once() {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let mut locked = 0;
                for _ in 0..40 {
                    let t = TempStore::new();
                    {
                        let server = t.server();
                        for i in 0..5 {
                            call(
                                &server,
                                json!({"command": "create", "path": format!("/memories/{i}.txt"), "file_text": "x"}),
                            );
                        }
                    } // the last client is gone: "the store is closed (and its lock released)"
                    match Store::open(&t.path()) {
                        Err(mnemo::Error::Locked { .. }) => locked += 1,
                        Err(e) => panic!("{e}"),
                        Ok(_) => {}
                    }
                }
                locked
            })
        })
        .collect();
    let locked: u32 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    assert_eq!(
        locked, 0,
        "{locked} of 160 immediate reopens were refused as Locked"
    );
}

/// Before: most single-byte flips in `db` made `verify` exit 2 ("storage error ... check the
/// disk"), which an audit script reads as "could not run". Now damage sled finds in its log is a
/// finding: exit 1 with a violation naming the first seq that cannot be read (or exit 0 for a
/// flip in bytes the log does not use). A bounded sweep: the file's first 64 bytes and about 120
/// offsets spread over the bytes the log uses.
#[test]
fn a_flipped_byte_in_the_log_is_a_finding_never_a_failure_to_run() {
    use crate::support::{copy_dir, run_mnemo};
    let s = TempStore::new();
    let db = s.path();
    let lines: String = (0..60)
        .map(|i| {
            format!(
                "{{\"command\":\"create\",\"path\":\"/memories/f{i}.md\",\"file_text\":\"note {i}\"}}\n"
            )
        })
        .collect();
    let made = run_mnemo(&["tool", "--db", db.to_str().expect("utf-8")], &lines);
    assert!(made.status.success(), "{made:?}");
    let bytes = std::fs::read(db.join("db")).expect("read db");
    let used = bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    let offsets: Vec<usize> = (0..64)
        .chain((64..used).step_by((used / 120).max(1)))
        .collect();
    let mut findings = 0;
    for offset in offsets {
        let copy = s.dir.path().join(format!("flip-{offset}"));
        copy_dir(&db, &copy);
        let mut flipped = bytes.clone();
        flipped[offset] ^= 0x01;
        std::fs::write(copy.join("db"), &flipped).expect("write the flip");
        let out = run_mnemo(
            &["verify", "--db", copy.to_str().expect("utf-8"), "--json"],
            "",
        );
        match out.status.code() {
            Some(0) => {}
            Some(1) => {
                let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
                assert!(
                    report["violations"][0]["seq"]
                        .as_u64()
                        .is_some_and(|seq| seq >= 1),
                    "offset {offset}: {report}"
                );
                findings += 1;
            }
            other => panic!(
                "offset {offset}: exit {other:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
        std::fs::remove_dir_all(&copy).expect("clean up");
    }
    assert!(findings > 0, "no flip was found at all");
}

// ---------------------------------------------------------------------------------------------
// Listings the replay keeps between views.
// ---------------------------------------------------------------------------------------------

/// The calls of the listings store: a view of `/memories` after each kind of call that leaves
/// its listing as it was (another view, an edit that keeps a file's size) or changes it (a
/// rename), and one as the last event.
fn listing_inputs() -> Vec<Input> {
    let view = || Input::Json(json!({"command": "view", "path": "/memories"}));
    let create = |path: &str, text: &str| {
        Input::Json(json!({"command": "create", "path": path, "file_text": text}))
    };
    vec![
        // 1-3
        create("/memories/a/one.md", "status: open\n"),
        create("/memories/a/two.md", "two\n"),
        create("/memories/b/three.md", "three\n"),
        // 4, 5: the second view's listing is unchanged since the first
        view(),
        view(),
        // 6, 7: an edit that keeps the file's size keeps the listing
        Input::Json(
            json!({"command": "str_replace", "path": "/memories/a/one.md", "old_str": "open", "new_str": "done"}),
        ),
        view(),
        // 8, 9: a rename changes it
        Input::Json(
            json!({"command": "rename", "old_path": "/memories/a/two.md", "new_path": "/memories/a/zwei.md"}),
        ),
        view(),
        // 10
        view(),
    ]
}

/// The text the replay gives event `seq` of the store at `path`.
fn answer_of(path: &Path, seq: u64) -> String {
    let store = open_store(path);
    let mut replay = mnemo::testing::replay::Replay::in_memory();
    let mut text = None;
    for item in store
        .records(Seq(1))
        .take(usize::try_from(seq).expect("small"))
    {
        let (_, record) = item.expect("read");
        let traced = replay
            .apply(&Event::decode(&record).expect("decode"))
            .expect("replay");
        text = Some(traced.answer.text);
    }
    text.expect("the event exists")
}

/// A view's recorded answer rewritten (its hashes made consistent) is named at that view,
/// whether the replay answers it from listing lines it kept (the listing unchanged since an
/// earlier view, or changed only by an edit that kept a file's size) or had to list the
/// directory again; and so is a recorded answer that is the listing as it was before a rename,
/// what a replay that kept stale lines would give. The answers are checked on a thread of their
/// own, ahead of which the replay may already have met a later violation (the next event's
/// prev_hash): the first in seq order is the one named.
#[test]
fn a_rewritten_listing_answer_is_named_at_its_view() {
    use ViolationKind::Outcome as OutcomeKind;
    let started = Instant::now();
    let base = pristine(Build::Calls(listing_inputs()));
    assert_eq!(base.n, 10);
    let before_rename = answer_of(&base.path, 7);
    assert!(
        before_rename.contains("/memories/a/two.md"),
        "{before_rename}"
    );
    assert_eq!(answer_of(&base.path, 5), answer_of(&base.path, 4));
    let mut r = Runner::new(&base, "listings store", started);
    for seq in [4, 5, 7, 9, 10] {
        r.case(
            &format!("view {seq}'s answer rewritten"),
            Expect::First(seq, OutcomeKind),
            |t| {
                t.rewrite(seq, |e| {
                    e.header.outcome = Outcome::under(e.salt.as_ref(), false, "forged");
                });
            },
        );
    }
    r.case(
        "view 9's answer rewritten to the listing before the rename",
        Expect::First(9, OutcomeKind),
        |t| {
            t.rewrite(9, |e| {
                e.header.outcome = Outcome::under(e.salt.as_ref(), false, &before_rename);
            });
        },
    );
    r.finish();
}

/// The format marker (`meta.format`) is what makes an older build refuse a store it cannot read:
/// lowered below the newest format in the log, it is named at the first event it misdescribes
/// (before, `verify` said INTACT with no note).
#[test]
fn a_format_marker_lowered_below_the_log_is_named() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let out = crate::support::run_mnemo(
        &["tool", "--db", db],
        r#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#,
    );
    assert!(out.status.success(), "{out:?}");
    {
        let store = open_store(&s.path());
        let (events, meta, _) = store.raw_trees();
        let record = events.get(Seq(1).key()).expect("get").expect("event 1");
        assert!(record[0] > 1, "event 1 is of a format above 1");
        meta.insert(b"format", &[record[0] - 1])
            .expect("lower the marker");
        meta.flush().expect("flush");
    }
    let out = crate::support::run_mnemo(&["verify", "--db", db, "--json"], "");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["violations"][0]["kind"], "format", "{report}");
    assert_eq!(report["violations"][0]["seq"], 1, "{report}");
}

/// A store whose event 2 is large enough for sled to keep its record in a blob file of its own;
/// returns the store and that blob's path.
fn blobbed_event() -> (TempStore, PathBuf) {
    let s = TempStore::new();
    let db = s.path();
    let calls = [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}).to_string(),
        json!({"command": "create", "path": "/memories/large.md", "file_text": "L".repeat(300_000)})
            .to_string(),
        json!({"command": "view", "path": "/memories"}).to_string(),
    ];
    let out = crate::support::run_mnemo(
        &["tool", "--db", db.to_str().expect("utf-8")],
        &calls.join("\n"),
    );
    assert!(out.status.success(), "{out:?}");
    // This build keeps the large payload in the value file; a store an earlier build wrote (or
    // any record of 128 KiB or more sled keeps) has it in a blob of sled's: store the record
    // whole, as that build did.
    {
        let store = crate::support::open_store(&db);
        let whole = store.get(mnemo::Seq(2)).expect("read").expect("event 2");
        let (events, _, _) = store.raw_trees();
        events
            .insert(mnemo::Seq(2).key(), whole)
            .expect("store it whole");
        events.flush().expect("flush");
    }
    std::fs::remove_file(db.join(mnemo::testing::VALUES_FILE)).expect("no longer named");
    let blobs: Vec<PathBuf> = std::fs::read_dir(db.join("blobs"))
        .expect("list blobs")
        .map(|e| e.expect("entry").path())
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.windows(64).any(|w| w == [b'L'; 64])))
        .collect();
    assert_eq!(blobs.len(), 1, "one blob holds the large create: {blobs:?}");
    (s, blobs[0].clone())
}

/// Before: a deleted blob made `verify` fail to run (exit 2, "storage error ... check the
/// disk"), and a flipped byte in one was named "after seq 0, where the log ends"; both are the
/// log's damage, named at the event whose record it held (or, where sled dropped it with the
/// rest of the log as a torn tail, as the first seq past the log's new end).
#[test]
fn a_damaged_or_missing_blob_is_named_at_its_event() {
    for damage in ["deleted", "flipped"] {
        let (s, blob) = blobbed_event();
        match damage {
            "deleted" => std::fs::remove_file(&blob).expect("remove the blob"),
            _ => {
                let mut bytes = std::fs::read(&blob).expect("read the blob");
                let at = bytes.len() / 2;
                bytes[at] ^= 0x20;
                std::fs::write(&blob, bytes).expect("write the blob");
            }
        }
        let db = s.path();
        let db = db.to_str().expect("utf-8");
        let out = crate::support::run_mnemo(&["verify", "--db", db, "--json"], "");
        assert_eq!(out.status.code(), Some(1), "{damage}: {out:?}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(report["violations"][0]["seq"], 2, "{damage}: {report}");
        // In words: sled drops a damaged blob's record and all after it as a torn tail, so the
        // log now ends at event 1, and the text says so (it said "after seq 0").
        let out = crate::support::run_mnemo(&["verify", "--db", db], "");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("violation:  seq 2 ")
                || text.contains("violation:  after seq 1, where the log ends"),
            "{damage}: {text}"
        );
    }
}
