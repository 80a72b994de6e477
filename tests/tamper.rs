//! Tampering through sled: `verify` must name the right seq and the right invariant.
//!
//! Every test builds a store through the real server, closes it, alters it below the API (the raw
//! sled trees, as an attacker with write access to the directory would) and re-verifies it. Each
//! case asserts the exact first violation: `violations[0].seq` and `violations[0].kind`.
//!
//! Verification goes through [`verify_tampered`] (`Store::open` + `verify_store`), not a client:
//! opening a client runs `catch_up`, which may write to the index of a tampered store before the
//! verifier sees it. One test checks that `MnemoClient::verify` agrees on a tampered event.

use std::path::Path;
use std::time::Instant;

use mnemo::event::Frame;
use mnemo::tool::{Command, Profile, Semantics};
use mnemo::{
    Body, Durability, Event, EventHash, MnemoClient, MnemoMemoryToolServer, Outcome, Report, Seq,
    Store, ToolCall, ViolationKind, verify_store,
};
use serde_json::{Value, json};

use crate::support::{Rng, TempStore, call, copy_dir, tamper_record};

// ---------------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------------

/// Opens a closed store (`Store::open` waits out the moment sled holds the lock after a close).
fn open_store(path: &Path) -> Store {
    Store::open(path).unwrap_or_else(|e| panic!("open the store at {}: {e}", path.display()))
}

/// A Buffered client over a closed store.
fn open_client(path: &Path) -> MnemoClient {
    MnemoClient::builder(path)
        .agent_id("test-agent")
        .durability(Durability::Buffered)
        .open()
        .unwrap_or_else(|e| panic!("open a client at {}: {e}", path.display()))
}

/// Opens the (closed) store at `path` and verifies it.
fn verify_tampered(path: &Path) -> Report {
    let store = open_store(path);
    verify_store(&store).expect("verify_store returns a report")
}

/// Asserts the report names exactly one violation, at `seq`, of `kind`.
#[track_caller]
fn assert_first(report: &Report, seq: u64, kind: ViolationKind, what: &str) {
    assert!(
        !report.is_intact(),
        "{what}: verify found nothing (report {report:?})"
    );
    let v = &report.violations[0];
    assert_eq!(
        (v.seq, v.kind),
        (Seq(seq), kind),
        "{what}: wrong first violation ({})",
        v.detail
    );
    assert_eq!(
        report.violations.len(),
        1,
        "{what}: verification stops at the first violation"
    );
}

/// Opens the store, hands its raw trees `(events, meta, index)` to `edit`, flushes and closes.
fn edit_trees(path: &Path, edit: impl FnOnce(&sled::Tree, &sled::Tree, &sled::Tree)) {
    let store = open_store(path);
    let (events, meta, index) = store.raw_trees();
    edit(&events, &meta, &index);
    for tree in [&events, &meta, &index] {
        tree.flush().expect("flush the tampered tree");
    }
}

/// The stored record of `seq`.
fn record(path: &Path, seq: u64) -> Vec<u8> {
    let store = open_store(path);
    store
        .get(Seq(seq))
        .expect("read the record")
        .expect("the record exists")
}

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

/// Builds the mixed store through the server and closes it.
fn build_mixed(t: &TempStore) {
    let server = t.server();
    for (i, input) in mixed_inputs().into_iter().enumerate() {
        let out = match input {
            Input::Json(v) => server.handle(&v),
            Input::Line(line) => server.handle_line(line),
        };
        assert_eq!(out["type"], "tool_result", "call {} answered", i + 1);
    }
    let head = server.client().head().expect("head");
    assert_eq!(head.seq, Seq(MIXED_EVENTS), "one event per call");
    // Dropping the server drops the last client: the writer stops and sled closes the store.
}

/// A fresh mixed store that verifies intact before it is tampered with.
fn mixed() -> TempStore {
    let t = TempStore::new();
    build_mixed(&t);
    let report = verify_tampered(&t.path());
    assert!(
        report.is_intact(),
        "the untouched store verifies: {:?}",
        report.violations
    );
    assert_eq!(report.events, MIXED_EVENTS);
    t
}

/// A record's regions, by the byte table in src/event.rs: `(name, start, end, expected kind)`.
/// Header sub-fields are located by decoding the stored frame.
fn regions(rec: &[u8]) -> Vec<(String, usize, usize, ViolationKind)> {
    use ViolationKind::{BrokenLink, Hash, PayloadHash, SeqMismatch, Undecodable};
    let frame = Frame::decode(rec).expect("an untouched record decodes");
    let h = 109; // header offset
    let hl = frame.header.len();
    let agent_len = usize::try_from(u64::from_le_bytes(
        frame.header[8..16].try_into().expect("8 bytes"),
    ))
    .expect("fits");
    let tool_use_at = 16 + agent_len;
    let is_error_at = hl - 33;
    let p = h + hl + 4; // payload offset
    let out: Vec<(String, usize, usize, ViolationKind)> = vec![
        ("version".into(), 0, 1, Undecodable),
        ("seq".into(), 1, 9, SeqMismatch),
        ("prev_hash".into(), 9, 41, BrokenLink),
        ("hash".into(), 41, 73, Hash),
        ("payload_hash".into(), 73, 105, PayloadHash),
        ("header_len".into(), 105, 109, Undecodable),
        ("header.time_ms".into(), h, h + 8, Hash),
        ("header.agent length".into(), h + 8, h + 16, Hash),
        ("header.agent".into(), h + 16, h + tool_use_at, Hash),
        (
            "header.tool_use_id".into(),
            h + tool_use_at,
            h + is_error_at,
            Hash,
        ),
        (
            "header.outcome.is_error".into(),
            h + is_error_at,
            h + is_error_at + 1,
            Hash,
        ),
        (
            "header.outcome.result_hash".into(),
            h + hl - 32,
            h + hl,
            Hash,
        ),
        ("payload_len".into(), h + hl, p, Undecodable),
        ("payload".into(), p, rec.len(), PayloadHash),
    ];
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
fn expected_kind(rec: &[u8], at: usize) -> (String, ViolationKind) {
    regions(rec)
        .into_iter()
        .find(|(_, start, end, _)| (*start..*end).contains(&at))
        .map(|(name, _, _, kind)| (name, kind))
        .expect("every byte of a record is in some region")
}

// ---------------------------------------------------------------------------------------------
// Empty and untouched stores.
// ---------------------------------------------------------------------------------------------

#[test]
fn an_empty_store_verifies_as_empty() {
    let t = TempStore::new();
    let report = verify_tampered(&t.path());
    assert!(report.is_empty(), "{report:?}");
    assert!(report.is_intact());
    assert_eq!(report.events, 0);
    assert_eq!(report.head.seq, Seq(0));
    // The same through a client (which also creates the store's writer).
    let client = open_client(&t.path());
    let report = client.verify().expect("verify through the client");
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(report.events, 0);
}

#[test]
fn an_untouched_mixed_store_verifies_intact_through_the_client_too() {
    let t = mixed();
    let client = open_client(&t.path());
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

// ---------------------------------------------------------------------------------------------
// One byte changed in each region of a stored event.
// ---------------------------------------------------------------------------------------------

#[test]
fn one_byte_in_each_region_of_a_middle_event_is_named() {
    let base = mixed();
    for seq in [STR_REPLACE, REJECTED_BLOCK] {
        let original = record(&base.path(), seq);
        for (name, start, end, kind) in regions(&original) {
            assert!(start < end, "{name} of seq {seq} is not empty");
            // First, middle and last byte of the region.
            for at in [start, (start + end) / 2, end - 1] {
                let copy = TempStore::new();
                copy_dir(&base.path(), &copy.path());
                tamper_record(&copy.path(), seq, |r| r[at] = r[at].wrapping_add(1));
                let what = format!("seq {seq}, {name}, byte {at} + 1");
                assert_first(&verify_tampered(&copy.path()), seq, kind, &what);
            }
        }
    }
}

#[test]
fn version_bytes_newer_and_zero_are_undecodable_at_that_seq() {
    let t = mixed();
    let original = record(&t.path(), STR_REPLACE);
    // The store's records are format 2: 1 reads its header as one with 4 bytes left over.
    for version in [0u8, 1, 3, 0xff] {
        tamper_record(&t.path(), STR_REPLACE, |r| r[0] = version);
        let report = verify_tampered(&t.path());
        assert_first(
            &report,
            STR_REPLACE,
            ViolationKind::Undecodable,
            &format!("version {version}"),
        );
        if version == 3 {
            assert!(
                report.violations[0].detail.contains("newer"),
                "a newer version says so: {}",
                report.violations[0].detail
            );
        }
    }
    tamper_record(&t.path(), STR_REPLACE, |r| *r = original);
    assert!(verify_tampered(&t.path()).is_intact(), "restored");
}

#[test]
fn outcome_bits_in_the_header_are_covered_by_the_chain_hash() {
    // Flipping the recorded is_error flag (or a result_hash byte, or the semantics the call was
    // answered under) is caught by the chain hash before replay ever compares outcomes: the
    // header is part of the hash input.
    let base = mixed();
    let original = record(&base.path(), STR_REPLACE);
    let frame = Frame::decode(&original).expect("decodes");
    assert_eq!(frame.version, 2, "the writer writes format 2");
    let semantics_at = 109 + frame.header.len() - 4;
    assert_eq!(original[semantics_at..semantics_at + 4], 2u32.to_le_bytes());
    let is_error_at = semantics_at - 33;
    assert_eq!(original[is_error_at], 0, "str_replace at seq 6 succeeded");
    for (what, at, value) in [
        ("is_error 0 -> 1", is_error_at, 1u8),
        ("is_error 0 -> 2 (not a bool)", is_error_at, 2),
        (
            "result_hash byte",
            is_error_at + 1,
            original[is_error_at + 1] ^ 0x80,
        ),
        ("semantics 2 -> 1", semantics_at, 1),
        ("semantics 2 -> 3", semantics_at, 3),
    ] {
        let copy = TempStore::new();
        copy_dir(&base.path(), &copy.path());
        tamper_record(&copy.path(), STR_REPLACE, |r| r[at] = value);
        assert_first(
            &verify_tampered(&copy.path()),
            STR_REPLACE,
            ViolationKind::Hash,
            what,
        );
    }
}

#[test]
fn every_byte_of_event_2_of_3_is_detected_at_seq_2() {
    let base = TempStore::new();
    {
        let server = base.server();
        let inputs = [
            json!({"command": "create", "path": "/memories/n.txt", "file_text": "one\ntwo\n"}),
            json!({"type": "tool_use", "id": "toolu_2", "name": "memory",
                   "input": {"command": "str_replace", "path": "/memories/n.txt", "old_str": "two", "new_str": "2"}}),
            json!({"command": "view", "path": "/memories/n.txt"}),
        ];
        for input in inputs {
            let (text, is_error) = call(&server, input);
            assert!(!is_error, "setup call failed: {text}");
        }
    }
    assert!(verify_tampered(&base.path()).is_intact());
    let original = record(&base.path(), 2);
    let mut undetected = Vec::new();
    let mut other_kind = Vec::new();
    let mut cases = 0;
    // Every byte, with every bit flipped (0xff) and with only its lowest bit flipped (0x01).
    for mask in [0xffu8, 0x01] {
        for at in 0..original.len() {
            let copy = TempStore::new();
            copy_dir(&base.path(), &copy.path());
            tamper_record(&copy.path(), 2, |r| r[at] ^= mask);
            let report = verify_tampered(&copy.path());
            let (region, expected) = expected_kind(&original, at);
            cases += 1;
            match report.violations.first() {
                None => undetected.push((at, mask)),
                Some(v) => {
                    assert_eq!(
                        v.seq,
                        Seq(2),
                        "byte {at} ^ {mask:#04x} ({region}) named the wrong seq: {}",
                        v.detail
                    );
                    if v.kind != expected {
                        other_kind.push((at, mask, region, v.kind));
                    }
                }
            }
        }
    }
    assert_eq!(cases, 2 * original.len(), "every byte was tried");
    assert!(undetected.is_empty(), "undetected flips at {undetected:?}");
    // Every region's kind is the one the verifier's check order predicts (the header is hashed
    // before it is decoded, the payload hash checked before the payload is decoded).
    assert!(other_kind.is_empty(), "unexpected kinds: {other_kind:?}");
}

// ---------------------------------------------------------------------------------------------
// Removed, swapped, duplicated and extra events.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_removed_middle_event_is_missing_at_its_seq() {
    for seq in [1, REJECTED_BLOCK] {
        let t = mixed();
        edit_trees(&t.path(), |events, _, _| {
            events.remove(Seq(seq).key()).expect("remove");
        });
        assert_first(
            &verify_tampered(&t.path()),
            seq,
            ViolationKind::Missing,
            &format!("seq {seq} removed"),
        );
    }
}

#[test]
fn a_removed_last_event_is_missing_past_the_end() {
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        events.remove(Seq(MIXED_EVENTS).key()).expect("remove");
    });
    let report = verify_tampered(&t.path());
    // Every remaining event checks out; meta.head names seq 22, which is no longer there.
    assert_first(
        &report,
        MIXED_EVENTS,
        ViolationKind::Missing,
        "last event removed",
    );
    assert_eq!(report.events, MIXED_EVENTS - 1);
    assert!(
        report.violations[0]
            .detail
            .contains("removed from the tail")
    );
}

#[test]
fn the_last_two_events_removed_name_the_first_of_them() {
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        events.remove(Seq(MIXED_EVENTS).key()).expect("remove");
        events.remove(Seq(MIXED_EVENTS - 1).key()).expect("remove");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS - 1,
        ViolationKind::Missing,
        "two tail events removed",
    );
}

#[test]
fn two_swapped_events_are_named_at_the_first() {
    let t = mixed();
    let (a, b) = (REJECTED_BLOCK, REJECTED_BLOCK + 1);
    edit_trees(&t.path(), |events, _, _| {
        let ra = events.get(Seq(a).key()).expect("get").expect("present");
        let rb = events.get(Seq(b).key()).expect("get").expect("present");
        events.insert(Seq(a).key(), rb).expect("insert");
        events.insert(Seq(b).key(), ra).expect("insert");
    });
    // The record under key 11 says it is seq 12.
    assert_first(
        &verify_tampered(&t.path()),
        a,
        ViolationKind::SeqMismatch,
        "swapped 11 and 12",
    );
}

#[test]
fn swapped_events_with_their_seq_fields_rewritten_break_the_link_at_the_first() {
    // A smarter swap: the seq inside each record is fixed up to match its new key. The record
    // now under 11 still carries event 12's prev_hash (the hash of event 11), not event 10's.
    let t = mixed();
    let (a, b) = (REJECTED_BLOCK, REJECTED_BLOCK + 1);
    edit_trees(&t.path(), |events, _, _| {
        let mut ra = events
            .get(Seq(a).key())
            .expect("get")
            .expect("present")
            .to_vec();
        let mut rb = events
            .get(Seq(b).key())
            .expect("get")
            .expect("present")
            .to_vec();
        ra[1..9].copy_from_slice(&b.to_le_bytes());
        rb[1..9].copy_from_slice(&a.to_le_bytes());
        events.insert(Seq(a).key(), rb).expect("insert");
        events.insert(Seq(b).key(), ra).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        a,
        ViolationKind::BrokenLink,
        "swapped with seqs fixed",
    );
}

#[test]
fn a_duplicated_event_is_named_at_the_key_it_was_copied_to() {
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        let r3 = events.get(Seq(3).key()).expect("get").expect("present");
        events.insert(Seq(4).key(), r3).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        4,
        ViolationKind::SeqMismatch,
        "seq 3 duplicated over 4",
    );
}

#[test]
fn a_record_under_key_0_is_missing_at_0() {
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        let r1 = events.get(Seq(1).key()).expect("get").expect("present");
        events.insert(Seq(0).key(), r1).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        0,
        ViolationKind::Missing,
        "a record under key 0",
    );
}

/// The stored record event `seq` would have if the writer had run `body` right after event
/// `seq - 1`: linked to that event's hash, its outcome the real answer against the replayed tree.
fn honest_record(path: &Path, seq: u64, agent: &str, body: Body) -> Vec<u8> {
    let store = open_store(path);
    let mut replay = mnemo::history::state_at(&store, Seq(seq - 1)).expect("replay");
    let prev = match seq {
        1 => EventHash::ZERO,
        _ => {
            let record = store.get(Seq(seq - 1)).expect("read").expect("event");
            Frame::decode(&record).expect("frame").hash
        }
    };
    let answer = replay
        .run_call("test-agent", None, &body, Semantics::CURRENT, Seq(seq))
        .expect("answer");
    Event {
        seq: Seq(seq),
        prev_hash: prev,
        header: mnemo::Header {
            time_ms: 1_760_000_000_000,
            agent: agent.into(),
            tool_use_id: None,
            outcome: Outcome::of(answer.is_error, &answer.text),
            semantics: Semantics::CURRENT,
        },
        body,
    }
    .to_frame()
    .encode()
}

fn create_body(path: &str, text: &str) -> Body {
    Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: mnemo::tool::Limits::default(),
        command: Command::Create {
            path: path.into(),
            file_text: text.into(),
        },
    })
}

#[test]
fn an_extra_event_past_the_end_is_named() {
    let next = MIXED_EVENTS + 1;
    // (a) garbage under the next key.
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        events
            .insert(Seq(next).key(), &b"garbage"[..])
            .expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        next,
        ViolationKind::Undecodable,
        "garbage past the end",
    );
    // (b) a copy of the last record under the next key.
    let t = mixed();
    edit_trees(&t.path(), |events, _, _| {
        let last = events
            .get(Seq(MIXED_EVENTS).key())
            .expect("get")
            .expect("present");
        events.insert(Seq(next).key(), last).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        next,
        ViolationKind::SeqMismatch,
        "the last record copied past the end",
    );
    // (c) a perfectly chained, honestly answered event appended without moving meta.head: every
    // record checks out, so it is the head that no longer names the last event.
    let t = mixed();
    let forged = honest_record(
        &t.path(),
        next,
        "mallory",
        create_body("/memories/evil.txt", "x"),
    );
    edit_trees(&t.path(), |events, _, _| {
        events.insert(Seq(next).key(), forged).expect("insert");
    });
    // A chain proves order and content, not who may append: anyone who can write the store can
    // extend it (with or without moving the head), and a checkpoint taken before cannot tell.
    // Who wrote it is in the event, for the audit.
    assert_behind(&t.path(), next, MIXED_EVENTS, "a chained event appended");
    // (d) a chained event far past the end (a gap) is missing at the first absent seq.
    let t = mixed();
    let forged = honest_record(
        &t.path(),
        next,
        "mallory",
        create_body("/memories/evil.txt", "x"),
    );
    edit_trees(&t.path(), |events, _, _| {
        events.insert(Seq(next + 5).key(), forged).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        next,
        ViolationKind::Missing,
        "an event stored 5 past the end",
    );
}

// ---------------------------------------------------------------------------------------------
// meta.head.
// ---------------------------------------------------------------------------------------------

fn read_head(meta: &sled::Tree) -> Vec<u8> {
    meta.get(b"head")
        .expect("get")
        .expect("meta.head exists")
        .to_vec()
}

#[test]
fn a_rewritten_head_hash_is_named_at_the_last_event() {
    let t = mixed();
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = read_head(meta);
        assert_eq!(head.len(), 40, "head is seq (8, BE) + hash (32)");
        head[8 + 17] ^= 0x01;
        meta.insert(b"head", head).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS,
        ViolationKind::Head,
        "head hash changed",
    );
}

/// Asserts the report is intact, names the log's last event as the head, and shows `meta.head`
/// behind it at `meta_head`; then that opening a client moves `meta.head` there.
fn assert_behind(path: &Path, end: u64, meta_head: u64, what: &str) {
    let report = verify_tampered(path);
    assert!(report.is_intact(), "{what}: {:?}", report.violations);
    assert_eq!(
        (report.head.seq, report.meta_head.seq),
        (Seq(end), Seq(meta_head)),
        "{what}: {report:?}"
    );
    let client = open_client(path);
    assert_eq!(client.head().expect("head"), report.head, "{what}");
    drop(client);
    let report = verify_tampered(path);
    assert!(report.is_intact(), "{what}: {:?}", report.violations);
    assert_eq!(report.meta_head, report.head, "{what}: moved on open");
}

#[test]
fn a_head_behind_a_chained_log_is_what_a_crash_leaves_and_moves_on_open() {
    // The head is written after the events it names, so a crash can leave it behind them. With
    // every event there and chained, a head rolled back by hand looks the same and loses nothing.
    let t = mixed();
    let hash_of_21 = Frame::decode(&record(&t.path(), MIXED_EVENTS - 1))
        .expect("frame")
        .hash;
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = (MIXED_EVENTS - 1).to_be_bytes().to_vec();
        head.extend_from_slice(&hash_of_21.0);
        meta.insert(b"head", head).expect("insert");
    });
    rolled_back_then_crash_like(&t.path());
    assert_behind(&t.path(), MIXED_EVENTS, MIXED_EVENTS - 1, "head at 21");
}

/// A `meta.head` moved back behind the head the store recorded at its clean close is a rollback
/// (named as `Head`); with that record gone too, it is what a crash leaves. Removes the record.
fn rolled_back_then_crash_like(path: &Path) {
    let report = verify_tampered(path);
    assert_eq!(
        report.violations.first().map(|v| v.kind),
        Some(ViolationKind::Head),
        "{:?}",
        report.violations
    );
    std::fs::remove_file(path.join(mnemo::HEAD_FILE)).expect("remove the head record");
}

#[test]
fn a_head_rolled_back_below_a_durable_commit_is_named() {
    // After each durable commit the store records its head outside sled: a meta.head behind
    // that record is a rollback, not a crash.
    let t = TempStore::new();
    {
        let client = MnemoClient::builder(t.path())
            .durability(Durability::Fsync)
            .open()
            .expect("open");
        let server = MnemoMemoryToolServer::new(client);
        for name in ["a", "b"] {
            let (text, is_error) = call(
                &server,
                json!({"command": "create", "path": format!("/memories/{name}"), "file_text": name}),
            );
            assert!(!is_error, "{text}");
        }
    }
    let hash_of_1 = Frame::decode(&record(&t.path(), 1)).expect("frame").hash;
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = 1u64.to_be_bytes().to_vec();
        head.extend_from_slice(&hash_of_1.0);
        meta.insert(b"head", head).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        2,
        ViolationKind::Head,
        "head rolled back below the recorded head",
    );
}

#[test]
fn a_head_seq_past_the_end_is_missing_there() {
    // Pushing the head's seq forward reads like events removed from the tail: it is reported as
    // Missing at the first absent seq, not as Head.
    let t = mixed();
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = read_head(meta);
        head[..8].copy_from_slice(&(MIXED_EVENTS + 1).to_be_bytes());
        meta.insert(b"head", head).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS + 1,
        ViolationKind::Missing,
        "head seq + 1",
    );
}

#[test]
fn a_removed_head_is_behind_and_a_malformed_one_is_named() {
    // Removed: the head reads as the empty log's (seq 0), as after a crash during the first
    // commit; the log chains on from seq 1, so nothing is lost.
    let t = mixed();
    edit_trees(&t.path(), |_, meta, _| {
        meta.remove(b"head").expect("remove");
    });
    rolled_back_then_crash_like(&t.path());
    assert_behind(&t.path(), MIXED_EVENTS, 0, "head removed");
    // Not 40 bytes: cannot be read at all, reported at seq 0.
    let t = mixed();
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = read_head(meta);
        head.push(0);
        meta.insert(b"head", head).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        0,
        ViolationKind::Head,
        "head of 41 bytes",
    );
}

// ---------------------------------------------------------------------------------------------
// The index.
// ---------------------------------------------------------------------------------------------

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

#[test]
fn an_altered_file_content_in_the_index_is_named() {
    let t = mixed();
    {
        let store = open_store(&t.path());
        let content = store.raw_content_tree();
        let (key, _) = file_entry(&content, b"the end\n");
        let mut value = content.get(&key).expect("get").expect("present").to_vec();
        value[8] = b'T';
        content.insert(key, value).expect("insert");
        content.flush().expect("flush the tampered tree");
    }
    // The index is compared when replay reaches the index's applied seq (the head).
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS,
        ViolationKind::Index,
        "file content changed",
    );
}

#[test]
fn an_altered_file_seq_in_the_index_is_named() {
    let t = mixed();
    let content = open_store(&t.path()).raw_content_tree();
    let (_, key) = file_entry(&content, b"the end\n");
    drop(content);
    edit_trees(&t.path(), |_, _, index| {
        let mut value = index.get(&key).expect("get").expect("present").to_vec();
        value[0] ^= 0x01; // created seq (u64 LE)
        index.insert(key, value).expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS,
        ViolationKind::Index,
        "created seq changed",
    );
}

#[test]
fn a_removed_child_entry_is_named() {
    let t = mixed();
    edit_trees(&t.path(), |_, _, index| {
        let mut key = b"c".to_vec();
        key.extend_from_slice(&0u64.to_be_bytes());
        key.extend_from_slice(b"memories");
        assert!(
            index.remove(&key).expect("remove").is_some(),
            "the root holds a `memories` child entry"
        );
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS,
        ViolationKind::Index,
        "c entry removed",
    );
}

#[test]
fn a_stray_index_key_is_named() {
    for stray in [
        &b"zzz"[..],
        b"c\0\0\0\0\0\0\0\0stray",
        b"f\0\0\0\0\0\0\0\x63",
    ] {
        let t = mixed();
        edit_trees(&t.path(), |_, _, index| {
            index.insert(stray, &b"x"[..]).expect("insert");
        });
        assert_first(
            &verify_tampered(&t.path()),
            MIXED_EVENTS,
            ViolationKind::Index,
            &format!("stray key {stray:?}"),
        );
    }
}

#[test]
fn a_rewritten_applied_seq_is_named() {
    // Rolled back to 20: the index is compared when replay reaches seq 20, where the replayed
    // tree (before final.txt was created at 21) differs from the stored one.
    let t = mixed();
    edit_trees(&t.path(), |_, _, index| {
        index
            .insert(b"a", &(MIXED_EVENTS - 2).to_be_bytes()[..])
            .expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS - 2,
        ViolationKind::Index,
        "applied rolled back to 20",
    );
    // Pushed past the head: never reached during replay, reported after the head checks.
    let t = mixed();
    edit_trees(&t.path(), |_, _, index| {
        index
            .insert(b"a", &(MIXED_EVENTS + 3).to_be_bytes()[..])
            .expect("insert");
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS + 3,
        ViolationKind::Index,
        "applied pushed past the head",
    );
}

// ---------------------------------------------------------------------------------------------
// Consistent rewrites: a record re-encoded with valid hashes.
// ---------------------------------------------------------------------------------------------

/// Decodes event `seq`, lets `change` alter it, re-encodes it with a correctly recomputed payload
/// hash and chain hash (`Event::to_frame`), and stores it. Later events are left alone.
fn rewrite_consistently(path: &Path, seq: u64, change: impl FnOnce(&mut Event)) {
    tamper_record(path, seq, |r| {
        let mut event = Event::decode(r).expect("decode the original");
        change(&mut event);
        let frame = event.to_frame();
        assert_eq!(frame.payload_hash, EventHash::of(&frame.payload));
        assert_eq!(frame.recompute_hash(), frame.hash);
        *r = frame.encode();
    });
}

#[test]
fn a_consistent_rewrite_with_the_same_outcome_is_named_at_the_next_seq() {
    // Event 14 creates /memories/x.txt. Rewrite who made it, or what text it wrote: the result
    // text ("File created successfully at: /memories/x.txt") is the same, so event 14 passes every
    // check on its own — its hashes are valid and re-answering it reproduces its recorded outcome.
    // The first inconsistency is event 15's prev_hash, which still holds event 14's old hash:
    // verify names seq 15 (BrokenLink), one past the event that was actually rewritten.
    for (what, change) in [
        (
            "agent",
            Box::new(|e: &mut Event| e.header.agent = "mallory".into())
                as Box<dyn FnOnce(&mut Event)>,
        ),
        ("time", Box::new(|e: &mut Event| e.header.time_ms += 1)),
        (
            "file_text",
            Box::new(|e: &mut Event| {
                let Body::Tool(ToolCall {
                    command: Command::Create { file_text, .. },
                    ..
                }) = &mut e.body
                else {
                    panic!("event 14 is a create")
                };
                *file_text = "forged\n".into();
            }),
        ),
    ] {
        let t = mixed();
        rewrite_consistently(&t.path(), CREATE_X, change);
        assert_first(
            &verify_tampered(&t.path()),
            CREATE_X + 1,
            ViolationKind::BrokenLink,
            &format!("consistent rewrite of {what} at 14"),
        );
    }
}

#[test]
fn a_consistent_rewrite_with_a_different_outcome_is_named_at_its_seq() {
    // Event 14 rewritten to create /memories/c/d/b.txt, which exists at that point: re-answering
    // gives an error where the log recorded success, so the rewritten event itself is named.
    let t = mixed();
    rewrite_consistently(&t.path(), CREATE_X, |e| {
        let Body::Tool(ToolCall {
            command: Command::Create { path, .. },
            ..
        }) = &mut e.body
        else {
            panic!("event 14 is a create")
        };
        *path = "/memories/c/d/b.txt".into();
    });
    assert_first(
        &verify_tampered(&t.path()),
        CREATE_X,
        ViolationKind::Outcome,
        "rewrite changing the answer",
    );
    // The same with a recorded is_error flipped (and hashes fixed up): Outcome at 14.
    let t = mixed();
    rewrite_consistently(&t.path(), CREATE_X, |e| e.header.outcome.is_error = true);
    assert_first(
        &verify_tampered(&t.path()),
        CREATE_X,
        ViolationKind::Outcome,
        "rewrite flipping is_error",
    );
}

#[test]
fn a_consistent_rewrite_of_the_last_event_is_named_at_the_head() {
    // Rewriting the last event consistently leaves no later prev_hash to break: meta.head's hash
    // is the witness, named at the last seq.
    let t = mixed();
    rewrite_consistently(&t.path(), MIXED_EVENTS, |e| {
        e.header.agent = "mallory".into();
    });
    assert_first(
        &verify_tampered(&t.path()),
        MIXED_EVENTS,
        ViolationKind::Head,
        "consistent rewrite of the tail",
    );
}

#[test]
fn a_consistent_rewrite_of_the_tail_with_its_head_is_not_detectable() {
    // The limit of a hash chain without an external anchor: rewrite the last event consistently
    // (same outcome, same effect on the index), move meta.head to its new hash and remove the
    // store's own record of its last head (`mnemo-head`, which alone would give the rewrite away),
    // and nothing on disk contradicts it. This test pins that limit down; anchoring the head hash
    // elsewhere (printing it, signing it) is what detects it.
    let t = mixed();
    let old_hash = Frame::decode(&record(&t.path(), MIXED_EVENTS))
        .expect("frame")
        .hash;
    rewrite_consistently(&t.path(), MIXED_EVENTS, |e| {
        e.header.agent = "mallory".into();
    });
    let rewritten = Event::decode(&record(&t.path(), MIXED_EVENTS)).expect("decode");
    assert_eq!(rewritten.header.agent, "mallory", "the rewrite is on disk");
    let new_hash = rewritten.hash();
    assert_ne!(new_hash, old_hash, "the rewritten event hashes differently");
    edit_trees(&t.path(), |_, meta, _| {
        let mut head = MIXED_EVENTS.to_be_bytes().to_vec();
        head.extend_from_slice(&new_hash.0);
        meta.insert(b"head", head).expect("insert");
    });
    // Left in place, the recorded head names the hash the rewrite replaced.
    let report = verify_tampered(&t.path());
    assert_eq!(
        report.violations.first().map(|v| v.kind),
        Some(ViolationKind::Head),
        "{:?}",
        report.violations
    );
    std::fs::remove_file(t.path().join(mnemo::HEAD_FILE)).expect("remove the head record");
    let report = verify_tampered(&t.path());
    assert!(report.is_intact(), "{:?}", report.violations);
    assert_eq!(
        report.head.hash, new_hash,
        "verify accepted the forged head"
    );
}

// ---------------------------------------------------------------------------------------------
// Through the client.
// ---------------------------------------------------------------------------------------------

#[test]
fn the_client_verify_names_the_same_violation() {
    let t = mixed();
    tamper_record(&t.path(), STR_REPLACE, |r| {
        let last = r.len() - 1;
        r[last] ^= 0x20;
    });
    let client = open_client(&t.path());
    let report = client.verify().expect("verify through the client");
    assert_first(
        &report,
        STR_REPLACE,
        ViolationKind::PayloadHash,
        "client verify",
    );
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

// ---------------------------------------------------------------------------------------------
// Malformed stores: keys and values that do not decode are named as violations, never errors.
// ---------------------------------------------------------------------------------------------

/// A malformed index applied seq (`a` not 8 bytes), and a key in `events` that is not 8 bytes.
fn malformed_stores() -> Vec<(&'static str, TempStore)> {
    let applied = mixed();
    edit_trees(&applied.path(), |_, _, index| {
        index.insert(b"a", &b"abc"[..]).expect("insert");
    });
    let key = mixed();
    edit_trees(&key.path(), |events, _, _| {
        let last = events
            .get(Seq(MIXED_EVENTS).key())
            .expect("get")
            .expect("present");
        // "abc" sorts after every 8-byte key that starts with a zero byte: past the end.
        events.insert(b"abc", last).expect("insert");
    });
    vec![
        ("index `a` of 3 bytes", applied),
        ("events key of 3 bytes", key),
    ]
}

#[test]
fn malformed_applied_seq_or_events_key_are_named_as_violations() {
    let mut stores = malformed_stores().into_iter();
    let (_, applied) = stores.next().expect("first");
    let report = verify_store(&open_store(&applied.path()))
        .expect("a malformed applied seq is a violation, not an error");
    assert_first(&report, 0, ViolationKind::Index, "index `a` of 3 bytes");
    let (_, key) = stores.next().expect("second");
    let report = verify_store(&open_store(&key.path()))
        .expect("a malformed events key is a violation, not an error");
    assert!(!report.is_intact(), "a stray events key");
    assert_eq!(
        report.violations[0].seq,
        Seq(MIXED_EVENTS + 1),
        "named past the end, where the stray key sorts"
    );
}

/// Re-encodes event `seq` with its agent's `string` length field set to `len`, and the chain
/// hash recomputed so that every hash check passes: only decoding the header can catch it.
fn forge_agent_length(path: &Path, seq: u64, len: u64) {
    tamper_record(path, seq, |r| {
        let mut frame = Frame::decode(r).expect("decode");
        frame.header[8..16].copy_from_slice(&len.to_le_bytes());
        frame.hash = frame.recompute_hash();
        *r = frame.encode();
    });
}

#[test]
fn a_rehashed_header_with_a_bad_but_small_length_is_undecodable() {
    // A length that runs past the header (but is small enough to allocate) decodes to an error.
    let t = mixed();
    forge_agent_length(&t.path(), CREATE_X, 1 << 20);
    assert_first(
        &verify_tampered(&t.path()),
        CREATE_X,
        ViolationKind::Undecodable,
        "agent length 1 MiB, rehashed",
    );
}

#[test]
fn a_rehashed_header_with_a_huge_length_is_undecodable() {
    // u64::MAX only panics ("capacity overflow"); a length like 1 << 45 makes bincode allocate
    // 32 TiB up front and aborts the whole process (SIGABRT), so it is not run here.
    let t = mixed();
    forge_agent_length(&t.path(), CREATE_X, u64::MAX);
    assert_first(
        &verify_tampered(&t.path()),
        CREATE_X,
        ViolationKind::Undecodable,
        "agent length u64::MAX, rehashed",
    );
}

#[test]
fn a_store_without_meta_format_cannot_be_opened_to_verify() {
    // Store::open refuses a store that has events but no meta.format: it cannot tell which format
    // the events are in, so it says the store is corrupt rather than guess.
    let t = mixed();
    edit_trees(&t.path(), |_, meta, _| {
        meta.remove(b"format").expect("remove");
    });
    match Store::open(&t.path()) {
        Err(mnemo::Error::Corrupt { what }) => assert!(what.contains("no meta.format"), "{what}"),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("expected Corrupt, got an open store"),
    }
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
