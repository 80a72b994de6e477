//! A root inside another root: every tree shape one session can leave for another (a file above
//! the other's root, or at the root itself) is an ordinary error result, in both profiles. Nothing
//! a model sends poisons the store, blames corruption, or loses an event already answered.

use mnemo::{MnemoClient, MnemoMemoryToolServer, Profile};
use serde_json::{Value, json};

use crate::support::{TempStore, call, run_mnemo};

fn server_at(client: &MnemoClient, root: &str, profile: Profile) -> MnemoMemoryToolServer {
    MnemoMemoryToolServer::builder(client.clone())
        .root(root)
        .profile(profile)
        .build()
        .expect("a valid root")
}

/// Asserts an error result whose text names `needles` and blames nothing on the store.
fn refused(server: &MnemoMemoryToolServer, input: Value, needles: &[&str]) {
    let (text, is_error) = call(server, input.clone());
    assert!(is_error, "{input}: {text}");
    for needle in needles {
        assert!(text.contains(needle), "{input}: {text:?} lacks {needle:?}");
    }
    for blame in ["corrupt", "backup", "store failed", "poisoned"] {
        assert!(!text.contains(blame), "{input}: {text}");
    }
}

#[test]
fn every_shape_a_nested_root_meets_is_an_error_result_in_both_profiles() {
    for profile in [Profile::Spec, Profile::PythonSdk, Profile::TypescriptSdk] {
        let s = TempStore::new();
        let client = s.client();
        let outer = server_at(&client, "/memories", profile);
        let (text, is_error) = call(
            &outer,
            json!({"command": "create", "path": "/memories/x", "file_text": "kept\n"}),
        );
        assert!(!is_error, "{text}");

        // The root is the file itself.
        let at = server_at(&client, "/memories/x", profile);
        let file_in_way = ["/memories/x is a file"];
        refused(
            &at,
            json!({"command": "create", "path": "/memories/x/y", "file_text": "t"}),
            &file_in_way,
        );
        refused(
            &at,
            json!({"command": "create", "path": "/memories/x/d/e/y", "file_text": "t"}),
            &file_in_way,
        );
        refused(
            &at,
            json!({"command": "view", "path": "/memories/x"}),
            &["root /memories/x", "a file"],
        );
        refused(
            &at,
            json!({"command": "view", "path": "/memories/x/y"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "delete", "path": "/memories/x"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "delete", "path": "/memories/x/y"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "rename", "old_path": "/memories/x/a", "new_path": "/memories/x/b"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "rename", "old_path": "/memories/x", "new_path": "/memories/x/b"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "str_replace", "path": "/memories/x/y", "old_str": "a", "new_str": "b"}),
            &[],
        );
        refused(
            &at,
            json!({"command": "insert", "path": "/memories/x/y", "insert_line": 0, "insert_text": "b"}),
            &[],
        );

        // The root lies below the file.
        let below = server_at(&client, "/memories/x/deeper", profile);
        refused(
            &below,
            json!({"command": "create", "path": "/memories/x/deeper/z", "file_text": "t"}),
            &file_in_way,
        );
        refused(
            &below,
            json!({"command": "view", "path": "/memories/x/deeper"}),
            &["root /memories/x/deeper", "/memories/x is a file"],
        );

        // Renames into such places from the outer root, and out of them.
        call(
            &outer,
            json!({"command": "create", "path": "/memories/a", "file_text": "a"}),
        );
        refused(
            &outer,
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/x/a"}),
            &file_in_way,
        );
        refused(
            &outer,
            json!({"command": "rename", "old_path": "/memories/x/q", "new_path": "/memories/b"}),
            &[],
        );

        // Nothing was poisoned or changed: the outer session goes on, and the log proves it all.
        let (text, is_error) = call(
            &outer,
            json!({"command": "create", "path": "/memories/after", "file_text": "ok"}),
        );
        assert!(!is_error, "{profile:?}: {text}");
        assert_eq!(outer.store_failures(), 0);
        assert_eq!(at.store_failures() + below.store_failures(), 0);
        let record = outer.client().record("/memories/x").expect("read");
        assert_eq!(record.expect("still there").content, "kept\n");
        let report = outer.client().verify().expect("verify");
        assert!(report.is_intact(), "{profile:?}: {report:?}");
        assert_eq!(report.events, 17, "{profile:?}: every call is one event");
    }
}

/// The reproduction: `mnemo tool --root /memories/x` over a store where `/memories/x` is a
/// file. The create is an error result, the traversal attempt answered before it is logged, and
/// the process exits 0.
#[test]
fn mnemo_tool_with_a_root_that_is_a_file_exits_0_and_logs_every_call() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    let setup = run_mnemo(
        &["tool", "--db", db],
        "{\"command\":\"create\",\"path\":\"/memories/x\",\"file_text\":\"a file\"}\n",
    );
    assert!(setup.status.success(), "{setup:?}");
    let session = concat!(
        "{\"command\":\"view\",\"path\":\"/memories/x/../../etc/passwd\"}\n",
        "{\"command\":\"create\",\"path\":\"/memories/x/y\",\"file_text\":\"t\"}\n",
        "{\"command\":\"view\",\"path\":\"/memories/x\"}\n",
    );
    for profile in ["spec", "python-sdk"] {
        let out = run_mnemo(
            &[
                "tool",
                "--db",
                db,
                "--root",
                "/memories/x",
                "--profile",
                profile,
            ],
            session,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{profile}: {stdout} {stderr}");
        let results: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(results.len(), 3, "{stdout}");
        for result in &results {
            assert_eq!(result["is_error"], true, "{result}");
            let text = result["content"].as_str().expect("text");
            assert!(
                !text.contains("corrupt") && !text.contains("backup"),
                "{text}"
            );
        }
        let create = results[1]["content"].as_str().expect("text");
        assert!(create.contains("/memories/x is a file"), "{create}");
    }
    let verify = run_mnemo(&["verify", "--db", db], "");
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let client = s.client();
    let events: Vec<mnemo::Event> = client
        .events(mnemo::Seq(1))
        .expect("events")
        .collect::<mnemo::Result<_>>()
        .expect("decode");
    assert_eq!(events.len(), 7, "the setup and both sessions' three calls");
    let traversals = events
        .iter()
        .filter(|e| format!("{:?}", e.body).contains("../../etc/passwd"))
        .count();
    assert_eq!(traversals, 2, "both traversal attempts are in the log");
}
