//! Stores written by earlier builds keep verifying: each committed fixture store (made by
//! `tests/fixtures/stores/make.sh` with the build of its format) re-verifies intact with exactly
//! the events and checkpoint it was made with. A change to a result string, the encoding or a
//! replay rule fails here; such a change needs a new version whose verifier still re-answers
//! these stores as they were answered.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{checksums, run_mnemo};

fn fixture_stores() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the fixture stores")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("store").is_dir())
        .collect();
    found.sort();
    found
}

#[test]
fn every_fixture_store_verifies_with_the_events_and_checkpoint_it_was_made_with() {
    let stores = fixture_stores();
    assert!(
        !stores.is_empty(),
        "no fixture store under tests/fixtures/stores"
    );
    for dir in stores {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
        )
        .expect("json");
        let store = dir.join("store");
        let before = checksums(&store);
        let out = run_mnemo(
            &["verify", "--db", store.to_str().expect("utf-8"), "--json"],
            "",
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!(
            report["status"],
            "intact",
            "{}: {report} {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report["events"], expected["events"], "{}", dir.display());
        assert_eq!(
            report["checkpoint"],
            expected["checkpoint"],
            "{}",
            dir.display()
        );
        assert_eq!(
            checksums(&store),
            before,
            "{}: verify changed the committed store",
            dir.display()
        );
    }
}
