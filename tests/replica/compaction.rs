//! Compaction: shipments merge the replica's small segments into larger ones. Against a simple
//! model (the store's own log, record for record): a replica restores byte for byte whatever
//! merges were made; a merge cut at any step (each object written or removed) leaves a replica
//! that restores and verifies, and the next shipment finishes it; the segments stay few after
//! many shipments; a merged segment is checked as any segment is (a tampered one is refused, a
//! forged wide one shadowing honest segments too); a replica written before compaction existed
//! (level-0 segments only) still restores, and is compacted by the next shipment.

use mnemo::testing::Store;
use mnemo::testing::replica::{Replica, segment};
use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer, Seq};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{TempStore, open_client, open_store};

/// A store to ship (its tool and its client), and a new replica that merges `fanout`
/// segments at once.
pub(super) fn setup(t: &TempStore, fanout: usize) -> (MnemoMemoryToolServer, MnemoClient, Replica) {
    let server = MnemoMemoryToolServer::new(open_client(&t.path(), "compact", Durability::Fsync));
    let client = server.client().clone();
    let (_, replica) = replica_at(t, "replica", fanout);
    (server, client, replica)
}

/// `n` writes to the store.
pub(super) fn write(server: &MnemoMemoryToolServer, from: usize, n: usize) {
    for i in from..from + n {
        let out = server.handle(&json!({"command": "create", "path": format!("/memories/d{}/n{i}.md", i % 4), "file_text": format!("note {i}\n")}));
        assert_eq!(out["is_error"], serde_json::Value::Null, "{out}");
    }
}

/// `count` shipments of `size` writes each, the first write numbered `from`.
fn shipments(
    (server, client, replica): (&MnemoMemoryToolServer, &MnemoClient, &Replica),
    from: usize,
    count: usize,
    size: usize,
) {
    for i in 0..count {
        write(server, from + size * i, size);
        ship(client, replica);
    }
}

fn replica_at(t: &TempStore, name: &str, fanout: usize) -> (String, Replica) {
    let url = format!("file://{}", t.dir.path().join(name).display());
    let replica = Replica::open(&url, true).expect("open the replica");
    (url.clone(), replica.merging(fanout))
}

pub(super) fn ship(client: &MnemoClient, replica: &Replica) -> mnemo::testing::replica::Shipped {
    client.ship_to(replica, &mut |_, _| {}).expect("ship")
}

/// The store's records from event 1.
fn records(store: &Store) -> Vec<(Seq, Vec<u8>)> {
    store
        .records(Seq(1))
        .collect::<Result<Vec<_>, _>>()
        .expect("records")
}

/// Restores `replica` into a new directory of `t` and returns the restored store's records.
fn restored(t: &TempStore, replica: &Replica, tag: &str) -> Vec<(Seq, Vec<u8>)> {
    let db = t.dir.path().join(format!("restored-{tag}"));
    replica.restore(&db, None).expect("restore");
    let out = records(&open_store(&db));
    std::fs::remove_dir_all(&db).expect("remove the restored store");
    out
}

pub(super) fn names(replica: &Replica) -> Vec<String> {
    replica.names("segments").expect("list")
}

fn levels(replica: &Replica) -> Vec<segment::Level> {
    names(replica)
        .iter()
        .map(|n| segment::parse(n.trim_start_matches("segments/")).expect("a segment name"))
        .map(|(_, _, level)| level)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Shipments of any sizes, merged three at a time: after each, the segments tile the log
    /// with no overlap, levels fall from the oldest to the newest, and a restore is the store's
    /// log byte for byte.
    #[test]
    fn a_compacted_replica_restores_the_stores_log_byte_for_byte(
        sizes in proptest::collection::vec(1usize..4, 10..30)
    ) {
        let t = TempStore::new();
        let (server, client, replica) = setup(&t, 3);
        let mut written = 0;
        for (k, n) in sizes.iter().enumerate() {
            write(&server, written, *n);
            written += n;
            ship(&client, &replica);
            let mut next = 1;
            for name in names(&replica) {
                let (first, last, _) = segment::parse(name.trim_start_matches("segments/")).expect("name");
                prop_assert_eq!(first.0, next, "{:?}", names(&replica));
                next = last.0 + 1;
            }
            let levels = levels(&replica);
            prop_assert!(levels.windows(2).all(|w| w[0] >= w[1]), "{:?}", levels);
            if k % 7 == 6 || k + 1 == sizes.len() {
                let ours = client.read_store(|s| Ok(records(s))).expect("ours");
                prop_assert_eq!(restored(&t, &replica, &k.to_string()), ours);
            }
        }
    }
}

/// Many small shipments leave few segments: 300 shipments of one event, at the default fanout
/// of 16, leave at most 15 segments of each level (300 is 1 2 12 in base 16: 15 segments).
#[test]
fn many_small_shipments_leave_a_bounded_number_of_segments() {
    let t = TempStore::new();
    let (server, client, replica) = setup(&t, mnemo::testing::replica::compaction::FANOUT);
    let mut most = 0;
    for i in 0..300 {
        write(&server, i, 1);
        ship(&client, &replica);
        most = most.max(names(&replica).len());
    }
    assert_eq!(names(&replica).len(), 1 + 2 + 12, "{:?}", names(&replica));
    assert!(most <= 2 * 15 + 1, "{most}");
    let ours = client.read_store(|s| Ok(records(s))).expect("ours");
    assert_eq!(restored(&t, &replica, "all"), ours);
}

/// A merge cut at each of its steps (the merged segment written; each segment it covers
/// removed; and so on up the levels), as a kill there would cut it: the replica restores the
/// store's log up to its head checkpoint, every time, and the next shipment leaves the same
/// objects as a shipment that was never cut.
#[test]
fn a_merge_cut_at_any_step_leaves_a_replica_that_restores_and_is_finished_next() {
    let t = TempStore::new();
    let (server, client, replica) = setup(&t, 2);
    // Seven shipments at fanout 2 leave levels 2, 1, 0; the eighth merges all the way up.
    shipments((&server, &client, &replica), 0, 7, 2);
    write(&server, 14, 2);
    let before = t.dir.path().join("before");
    crate::support::copy_dir(&t.dir.path().join("replica"), &before);
    let start = replica.failpoints().steps();
    ship(&client, &replica);
    let steps = replica.failpoints().steps() - start;
    let whole = names(&replica);
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert!(
        steps >= 10,
        "a segment, a checkpoint, the head, three merges: {steps}"
    );
    let ours = client.read_store(|s| Ok(records(s))).expect("ours");
    for step in 1..=steps {
        let dir = t.dir.path().join(format!("cut{step}"));
        crate::support::copy_dir(&before, &dir);
        let cut = Replica::open(&format!("file://{}", dir.display()), false)
            .expect("open")
            .merging(2);
        cut.failpoints().countdown(step);
        let failed = client.ship_to(&cut, &mut |_, _| {});
        assert!(failed.is_err(), "step {step} of {steps} did not fail");
        let head = cut.head().expect("head").expect("a head").1;
        let got = restored(&t, &cut, &format!("cut{step}"));
        let reach = usize::try_from(head.seq.0).expect("a small log");
        assert_eq!(got[..], ours[..reach], "cut at step {step}");
        ship(&client, &cut);
        assert_eq!(names(&cut), whole, "after a cut at step {step}");
        assert_eq!(restored(&t, &cut, &format!("done{step}")), ours);
    }
}

/// A merged segment is trusted no more than a shipment's: one whose record was changed (its
/// digest made anew, so only the chain can tell) is refused, naming it, and so is a forged
/// segment named as a merge over the whole log, which a reader prefers to the honest ones it
/// covers.
#[test]
fn a_tampered_or_forged_merged_segment_is_refused() {
    let t = TempStore::new();
    let (server, client, replica) = setup(&t, 2);
    shipments((&server, &client, &replica), 0, 4, 3);
    let merged = names(&replica);
    assert_eq!(merged.len(), 1, "{merged:?}");
    let name = &merged[0];
    let (first, last, level) =
        segment::parse(name.trim_start_matches("segments/")).expect("a name");
    assert_eq!(level, segment::Level::Merged(2));
    let honest = replica.read(name).expect("read").expect("there");
    let mut merged_records: Vec<Vec<u8>> = segment::decode(name, &honest, (first, last))
        .expect("decode")
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let tamper = |records: &mut Vec<Vec<u8>>| {
        let record = &mut records[4];
        let at = record
            .windows(6)
            .position(|w| w == b"note 4")
            .expect("the text");
        record[at + 5] = b'9';
    };
    tamper(&mut merged_records);
    replica
        .write(name, segment::encode(first, &merged_records))
        .expect("tamper");
    let db = t.dir.path().join("refused");
    let err = replica.restore(&db, None).expect_err("refused");
    assert!(
        err.to_string().contains("breaks the chain at event 5") && err.to_string().contains(name),
        "{err}"
    );
    assert!(!db.exists());
    // Put back, then shadowed by a forged merge of the whole log, wider than the honest
    // merged segment, so a reader prefers it.
    replica.write(name, honest).expect("put back");
    write(&server, 12, 3);
    ship(&client, &replica);
    assert_eq!(names(&replica).len(), 2, "{:?}", names(&replica));
    let mut all: Vec<Vec<u8>> = client
        .read_store(|s| Ok(records(s)))
        .expect("ours")
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    tamper(&mut all);
    let forged = format!(
        "segments/{}",
        segment::named(Seq(1), Seq(15), segment::Level::Merged(5))
    );
    replica
        .write(&forged, segment::encode(Seq(1), &all))
        .expect("forge");
    let err = replica.restore(&db, None).expect_err("refused");
    assert!(
        err.to_string().contains("breaks the chain at event 5"),
        "{err}"
    );
    assert!(err.to_string().contains(&forged), "{err}");
    // A merged segment that covers only part of another is damage, not a choice.
    replica.remove(&forged).expect("remove");
    let part = format!(
        "segments/{}",
        segment::named(Seq(10), Seq(14), segment::Level::Merged(1))
    );
    replica
        .write(&part, segment::encode(Seq(10), &all[9..14]))
        .expect("overlap");
    let err = replica.restore(&db, None).expect_err("refused");
    assert!(err.to_string().contains("gap or an overlap"), "{err}");
}

/// A replica as a build without compaction left it (level-0 segments only, more than a
/// compaction leaves) restores, and the next shipment compacts it.
#[test]
fn a_replica_written_before_compaction_restores_and_is_compacted_next() {
    let t = TempStore::new();
    // A fanout no shipment reaches: level-0 segments only, as the previous build wrote them.
    let (server, client, old) = setup(&t, 1_000);
    let url = old.url().to_string();
    shipments((&server, &client, &old), 0, 20, 1);
    assert_eq!(names(&old).len(), 20);
    assert!(levels(&old).iter().all(|l| *l == segment::Level::Merged(0)));
    let ours = client.read_store(|s| Ok(records(s))).expect("ours");
    assert_eq!(restored(&t, &old, "old"), ours);
    let new = Replica::open(&url, false).expect("reopen");
    write(&server, 20, 1);
    ship(&client, &new);
    // Merged from the oldest on: the first 16, then the 5 after them stay below a merge.
    let mut expected = vec![segment::Level::Merged(1)];
    expected.extend([segment::Level::Merged(0); 5]);
    assert_eq!(levels(&new), expected, "{:?}", names(&new));
    let ours = client.read_store(|s| Ok(records(s))).expect("ours");
    assert_eq!(restored(&t, &new, "new"), ours);
}
