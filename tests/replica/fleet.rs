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

/// A fleet store's log, read with no node running: `mnemo verify --from FLEET/stores/NAME` proves
/// it (writing nothing to the bucket), `mnemo restore --from` makes a store of it (whole or up to
/// an event), a `--key` is refused (the log is not signed), and a log with an object missing or
/// altered is a violation that names it.
#[test]
fn a_fleet_stores_log_is_verified_and_restored_with_no_node_running() {
    let t = TempStore::new();
    let records = chain_of(&t, 30);
    let head = crate::support::open_store(&t.path())
        .log_end()
        .expect("the head");
    let fleet = crate::support::bucket_url(&t, "fleet");
    let shared = bucket(&t, "fleet");
    let wal = Wal::new(shared.clone(), "notes");
    // Two holders: the second took the store over (its marker) after the first's commits.
    let mut first = wal.take(1, &Position::START).expect("take").holder;
    for run in records[..12].chunks(5) {
        first.commit(run).expect("commit");
    }
    let mut second = wal.take(2, &Position::START).expect("take over").holder;
    for run in records[12..].chunks(7) {
        second.commit(run).expect("commit");
    }
    let url = format!("{fleet}/stores/notes");
    let listing = || shared.list("stores/notes/wal").expect("list");
    let before = listing();

    let out = crate::support::run_mnemo(&["verify", "--from", &url], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("INTACT") && text.contains(&format!("hash {}", head.hash)),
        "{text}"
    );
    assert_eq!(
        listing(),
        before,
        "verify --from wrote nothing to the bucket"
    );

    // `mnemo restore --from URL --db DIR/name [--at SEQ]`: its exit code, stdout and stderr.
    let restore = |name: &str, at: Option<&str>| {
        let db = t.dir.path().join(name).display().to_string();
        let mut args = vec!["restore", "--from", &url, "--db", &db];
        args.extend(at.iter().flat_map(|at| ["--at", *at]));
        let out = crate::support::run_mnemo(&args, "");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, text, err) = restore("restored", None);
    assert_eq!(code, Some(0), "{text}{err}");
    assert!(text.contains(&format!("checkpoint: {head}")), "{text}");
    let store = crate::support::open_store(&t.dir.path().join("restored"));
    assert_eq!(store.log_end().expect("the head"), head);
    let all: Vec<(Seq, Vec<u8>)> = store.records(Seq(1)).map(|r| r.expect("record")).collect();
    assert_eq!(
        all, records,
        "the restored store holds the log's events, byte for byte"
    );
    drop(store);

    // The report verify --from gives (the pass over the records as they are appended, no
    // index written) is the one a verify of the restored store gives.
    let json = |args: &[&str]| {
        let out = crate::support::run_mnemo(args, "");
        assert!(out.status.success(), "{out:?}");
        let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        for timing in ["elapsed_ms", "events_per_sec", "mb_per_sec", "store"] {
            report[timing] = serde_json::Value::Null;
        }
        report
    };
    let restored = t.dir.path().join("restored").display().to_string();
    assert_eq!(
        json(&["verify", "--from", &url, "--json"]),
        json(&["verify", "--db", &restored, "--json"])
    );

    let (code, text, err) = restore("early", Some("10"));
    assert_eq!(code, Some(0), "{text}{err}");
    let store = crate::support::open_store(&t.dir.path().join("early"));
    assert_eq!(store.log_end().expect("the head").seq, Seq(10));
    drop(store);
    let (code, _, err) = restore("zero", Some("0"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("counting from 1"), "{err}");
    assert!(!t.dir.path().join("zero").exists());
    let (code, _, err) = restore("late", Some("31"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("ends at event 30") && err.contains("--at 30"),
        "{err}"
    );

    // A store made inside the bucket would be read as the fleet's objects: refused.
    if let Some(dir) = fleet.strip_prefix("file://") {
        let inside = format!("{dir}/stores/notes/wal/{:020}", 99);
        let out = crate::support::run_mnemo(&["restore", "--from", &url, "--db", &inside], "");
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(!std::path::Path::new(&inside).exists());
    }
    // The fleet's bucket is not one store's log: said so, rather than its objects called strays.
    assert!(
        shared
            .create("operator/token", b"00".to_vec())
            .expect("create")
    );
    for root in [fleet.clone(), format!("{fleet}/stores")] {
        let out = crate::support::run_mnemo(&["verify", "--from", &root], "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("is a fleet's bucket") && err.contains("/stores/NAME"),
            "{err}"
        );
    }

    // Written with no key: a verifier key finds nothing it signed, and says so; a key that is
    // none is a bad argument.
    let key_file = t.dir.path().join("fleet.key");
    let made = crate::support::run_mnemo(
        &["key", "create", "--file", &key_file.to_string_lossy()],
        "",
    );
    assert!(made.status.success(), "{made:?}");
    let vkey = String::from_utf8_lossy(&made.stdout).trim().to_string();
    let out = crate::support::run_mnemo(&["verify", "--from", &url, "--key", &vkey], "");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("none of its objects is signed"), "{said}");
    let out = crate::support::run_mnemo(&["verify", "--from", &url, "--key", "k+1+AAAA"], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not a verifier key"), "{err}");

    // An object altered where it lies: the chain breaks there.
    let third = &before[2].name;
    let mut bytes = shared.get(third, 1 << 20).expect("get").expect("there");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    shared.remove(third).expect("remove");
    assert!(shared.create(third, bytes).expect("create"));
    let out = crate::support::run_mnemo(&["verify", "--from", &url], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("VIOLATION") && text.contains("wal/00000000000000000003"),
        "{text}"
    );

    // An object removed: the gap is named.
    shared.remove(third).expect("remove");
    let out = crate::support::run_mnemo(&["verify", "--from", &url, "--json"], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("\"violation\"") && text.contains("object 3 is not"),
        "{text}"
    );
    let (code, text, err) = restore("gap", None);
    assert_eq!(code, Some(2), "{text}{err}");
    assert!(
        !t.dir.path().join("gap").exists(),
        "a failed restore leaves nothing"
    );
}

/// A copy built from a log (its index replayed from memory while its events are appended, as a
/// node taking a store over builds it) holds the index a replay of its log derives: `verify`
/// compares the two byte for byte, over a session of every kind of memory-tool call.
#[test]
fn a_copy_built_from_a_log_holds_the_index_its_replay_derives() {
    let t = TempStore::new();
    let server = t.server();
    super::every_kind_of_call(&server, 0xc0_9e, 240);
    drop(server);
    let records: Vec<(Seq, Vec<u8>)> = crate::support::open_store(&t.path())
        .records(Seq(1))
        .map(|r| r.expect("record"))
        .collect();
    assert_eq!(records.len(), 240);
    let copy = t.dir.path().join("copy");
    mnemo::testing::fleet::copy::build(&copy, &records).expect("the copy");
    let report = mnemo::MnemoClient::open(&copy, "auditor")
        .expect("open the copy")
        .verify()
        .expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 240);
}

/// A copy that holds events past the end of its store's log (written and acknowledged on the
/// node's disk under `--durability fsync`, not yet shipped when the node died) gives them back
/// for the next take by its node to commit, as long as the log did not go on without them;
/// once another holder wrote after the log's end, the copy does not hold and is built anew.
#[test]
fn a_copy_ahead_of_its_log_gives_back_what_the_log_lacks_unless_the_log_went_on() {
    let t = TempStore::new();
    let records = chain_of(&t, 12);
    let wal = Wal::new(bucket(&t, "bucket"), "notes");
    let taken = wal.take(1, &Position::START).expect("take");
    let mut holder = taken.holder;
    holder.commit(&records[..5]).expect("commit the first five");
    let at = holder.position();
    // The copy holds all twelve events: seven the log lacks.
    let copy = t.dir.path().join("copy");
    mnemo::testing::fleet::copy::build(&copy, &records).expect("the copy");
    let ahead = mnemo::testing::fleet::copy::extend(&copy, &at, &Vec::new())
        .expect("extend")
        .expect("the copy holds the log");
    assert_eq!(ahead, records[5..].to_vec());
    // A take at the next epoch (the same node again) ships them; the log is then the copy's.
    let again = wal.take(2, &at).expect("take again");
    assert!(again.records.is_empty());
    let mut holder = again.holder;
    holder.commit(&ahead).expect("ship what the log lacked");
    let (_, log) = wal.scan(&Position::START).expect("scan");
    assert_eq!(log, records);

    // Another log that went on without the copy's tail: another holder's events at its seqs.
    let other = TempStore::new();
    let theirs = chain_of(&other, 8);
    let wal = Wal::new(bucket(&t, "bucket-2"), "notes");
    let mut holder = wal.take(1, &Position::START).expect("take").holder;
    holder.commit(&theirs[..5]).expect("commit");
    let at = holder.position();
    let diverged = TempStore::new();
    let mine: Vec<(Seq, Vec<u8>)> = theirs[..5].to_vec();
    let copy = diverged.dir.path().join("copy");
    mnemo::testing::fleet::copy::build(&copy, &mine).expect("copy");
    let server = mnemo::MnemoMemoryToolServer::new(
        mnemo::MnemoClient::open(&copy, "agent").expect("open the copy"),
    );
    for i in 0..3 {
        let input = serde_json::json!({
            "command": "create", "path": format!("/memories/mine{i}.md"), "file_text": "y"
        });
        crate::support::call(&server, input);
    }
    drop(server);
    let taken = wal.take(2, &at).expect("take");
    assert!(taken.records.is_empty());
    holder = taken.holder;
    holder.commit(&theirs[5..]).expect("the log goes on");
    let (_, tail) = wal.scan(&at).expect("scan");
    assert!(
        mnemo::testing::fleet::copy::extend(&copy, &at, &tail)
            .expect("extend")
            .is_none(),
        "a copy whose events past the log's end differ from the log's is built anew"
    );
}

/// A store written through a fleet's holder one commit at a time gets its log packed by the
/// holder as it goes: the objects holding events that a pack covers are removed (the markers and
/// the newest objects stay), and the log reads back as the store's events, whole and from a
/// position inside a pack.
#[test]
fn a_holder_packs_its_log_as_it_goes_and_the_log_reads_back_whole() {
    let t = TempStore::new();
    let url = crate::support::bucket_url(&t, "bucket");
    let path = t.dir.path().join("store");
    let client =
        mnemo::testing::fleet::replicated_client(&path, &url, "notes", "agent").expect("client");
    let server = mnemo::MnemoMemoryToolServer::new(client);
    let calls = mnemo::testing::fleet::pack::PACK_OBJECTS + 2 * mnemo::testing::fleet::pack::KEEP;
    for i in 0..calls {
        let input = serde_json::json!({
            "command": "create", "path": format!("/memories/f{i}.md"), "file_text": "x"
        });
        crate::support::call(&server, input);
    }
    drop(server);
    let records: Vec<(Seq, Vec<u8>)> = crate::support::open_store(&path)
        .records(Seq(1))
        .map(|r| r.expect("record"))
        .collect();
    let bucket = Bucket::open(&url).expect("bucket");
    let packs = bucket.list("stores/notes/pack").expect("list");
    assert!(!packs.is_empty(), "no pack was made");
    let objects = bucket.list("stores/notes/wal").expect("list").len() as u64;
    assert!(
        objects < calls / 2,
        "{objects} log objects left after {calls} commits"
    );
    let wal = Wal::new(Arc::new(bucket), "notes");
    let (end, log) = wal.scan(&Position::START).expect("the log reads back");
    assert_eq!(log, records);
    assert_eq!(end.seq, Seq(records.len() as u64));
}

/// What a node acknowledged under `--durability fsync` and handed to its shipping is all in the
/// log once `finish` returns (a drain and a take wait for it before the next marker could fence
/// it), in order, however many hand-overs were queued behind one commit in flight; and once the
/// store is taken from the node, shipping fails and says so rather than drop events quietly.
#[test]
fn shipping_behind_the_answers_has_everything_in_the_log_once_finished() {
    use mnemo::testing::Replicate;
    use mnemo::testing::fleet::shipping::Shipping;
    let t = TempStore::new();
    let mut records = chain_of(&t, 81);
    let more = records.split_off(80);
    let wal = Wal::new(bucket(&t, "bucket"), "notes");
    let taken = wal.take(1, &Position::START).expect("take");
    let copy = t.dir.path().join("copy");
    let shipping = Shipping::new(taken.holder, &copy, taken.read);
    for pair in records.chunks(2) {
        shipping.replicate(pair, false).expect("queued");
    }
    shipping.finish().expect("shipped");
    let (_, log) = wal.scan(&Position::START).expect("scan");
    assert_eq!(log, records);
    // Taken by another node: the next hand-over is queued, its commit fenced, and from then on
    // every hand-over and `finish` fail.
    let other = wal.take(2, &Position::START).expect("take over");
    assert_eq!(other.records, records);
    let _ = shipping.replicate(&more, false);
    assert!(shipping.finish().is_err(), "a fenced shipment is an error");
    assert!(shipping.failed());
    assert!(shipping.replicate(&more, false).is_err());
    assert_eq!(wal.scan(&Position::START).expect("scan").1, records);
}
