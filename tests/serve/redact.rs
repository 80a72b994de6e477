//! `POST /v1/redact` and `mnemo redact` on a served store: the server closes the store for the
//! rewrite while its clients wait, loses no call acknowledged before, during or after it, stays
//! findable through its server file, and only the operator may redact.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::{Server, post_memory, request};
use crate::redact::holding;
use crate::support::{TempStore, run_mnemo};

const MARKER: &str = "QZVSERVEDSECRETVZQ";

fn seed(server: &Server) {
    for input in [
        json!({"command": "create", "path": "/memories/secret.md", "file_text": format!("pin {MARKER}\n")}),
        json!({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"}),
        json!({"command": "view", "path": "/memories/secret.md"}),
        json!({"command": "view", "path": "/memories"}),
    ] {
        assert_eq!(server.memory(&input).status, 200);
    }
}

fn head(server: &Server) -> u64 {
    server.json("/v1/head")["seq"].as_u64().expect("a seq")
}

#[test]
fn a_served_store_is_redacted_by_its_server_and_no_acknowledged_call_is_lost() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    seed(&server);
    // Four clients write while the redaction runs; each keeps the files it was told were made.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, bearer, stop) = (server.addr(), server.bearer(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut made = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) || i < 3 {
                    let path = format!("/memories/w{w}/f{i}.md");
                    let input = json!({"command": "create", "path": path, "file_text": format!("{w} {i}\n")});
                    let reply = post_memory(addr, &bearer, &input);
                    assert_eq!(reply.status, 200, "{}", reply.text());
                    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
                    assert!(answer.get("is_error").is_none(), "{answer}");
                    made.push(path);
                    i += 1;
                }
                made
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let body = json!({"reason": "asked to be forgotten", "texts": [MARKER]}).to_string();
    let reply = server.call("POST", "/v1/redact", body.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(answer["seqs"], json!([1, 3, 4]), "{answer}");
    let redaction = answer["seq"].as_u64().expect("the redaction's seq");
    assert!(
        answer["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("redacted 3 events (1, 3, 4); event ")),
        "{answer}"
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let made: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    // The server still answers, and is still found through its file in the new store.
    let file = mnemo::testing::discovery::ServerFile::read(&store.path())
        .expect("read")
        .expect("the server file is in the redacted store");
    assert_eq!(file.pid, server.child.id());
    let listed: Vec<String> = server.json("/v1/ls?dir=/")["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path").to_string())
        .collect();
    for path in &made {
        assert!(listed.contains(path), "{path} was acknowledged and is gone");
    }
    assert!(!listed.contains(&"/memories/secret.md".to_string()));
    let report = server.json("/v1/verify");
    assert_eq!(report["status"], "intact", "{report}");
    assert!(
        report["redacted"]
            .as_array()
            .is_some_and(|r| r.iter().all(|e| e["by"] == redaction) && r.len() == 3),
        "{report}"
    );
    assert!(holding(&store.path(), MARKER.as_bytes()).is_empty());
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    // Closed and opened again: the same files, intact.
    let reopened = mnemo::MnemoClient::open(store.path(), "check").expect("reopen");
    for path in &made {
        assert!(reopened.record(path).expect("read").is_some(), "{path}");
    }
    assert!(reopened.verify().expect("verify").is_intact());
    assert!(holding(&store.path(), MARKER.as_bytes()).is_empty());
}

#[test]
fn only_the_operator_redacts_and_a_refused_or_dry_redaction_changes_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    seed(&server);
    let body = json!({"agent": "planner"}).to_string();
    let issued: Value =
        serde_json::from_slice(&server.call("POST", "/v1/tokens", body.as_bytes()).body)
            .expect("json");
    let token = issued["token"].as_str().expect("token");
    let before = head(&server);
    let wanted = json!({"reason": "r", "texts": [MARKER]}).to_string();
    let bearer = format!("Bearer {token}");
    let reply = request(
        server.addr(),
        "POST",
        "/v1/redact",
        &[("Authorization", &bearer)],
        wanted.as_bytes(),
    );
    assert_eq!(reply.status, 403, "{}", reply.text());
    // Refusals the store gives: no reason, nothing chosen, a text kept elsewhere; and the shape.
    for (body, says) in [
        (json!({"texts": [MARKER]}), "the reason is not valid"),
        (json!({"reason": "r"}), "say what to erase"),
        (
            json!({"reason": "r", "texts": ["planner"]}),
            "cannot be erased",
        ),
        (json!({"reason": "r", "seqs": [99]}), "there is no event 99"),
        (json!({"reason": "r", "seq": [1]}), "send JSON such as"),
    ] {
        let reply = server.call("POST", "/v1/redact", body.to_string().as_bytes());
        assert_eq!(reply.status, 400, "{body}: {}", reply.text());
        assert!(reply.text().contains(says), "{body}: {}", reply.text());
    }
    let dry = json!({"reason": "r", "texts": [MARKER], "dry_run": true}).to_string();
    let reply = server.call("POST", "/v1/redact", dry.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let plan: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(plan["seqs"], json!([1, 3, 4]));
    assert_eq!(plan["seq"], Value::Null);
    assert_eq!(head(&server), before, "nothing was logged");
    let (status, _) = server.stop();
    assert!(status.success());
    // The log is what it was, the text still in it.
    let reopened = mnemo::MnemoClient::open(store.path(), "check").expect("reopen");
    assert_eq!(reopened.head().expect("head").seq.0, before);
    assert!(!holding(&store.path(), MARKER.as_bytes()).is_empty());
}

/// `mnemo redact --db` on a served store goes through its server and prints what it prints on
/// a store alone, for a dry run and a redaction.
#[test]
fn mnemo_redact_through_the_server_prints_what_it_prints_alone() {
    let outputs = |served: bool| {
        let store = TempStore::new();
        let db = store.path().to_str().expect("utf-8").to_string();
        let server = Server::start(&store.path(), &[]);
        seed(&server);
        let server = if served {
            Some(server)
        } else {
            let (status, _) = server.stop();
            assert!(status.success());
            None
        };
        let mut said = Vec::new();
        for extra in [&["--dry-run"][..], &[][..]] {
            let mut args = vec![
                "redact",
                "--db",
                &db,
                "--reason",
                "r",
                "--path",
                "/memories/secret.md",
            ];
            args.extend_from_slice(extra);
            let out = run_mnemo(&args, "");
            assert!(out.status.success(), "{out:?}");
            said.push(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let refused = run_mnemo(&["redact", "--db", &db, "--reason", "r", "--seq", "77"], "");
        assert_eq!(refused.status.code(), Some(2));
        said.push(String::from_utf8_lossy(&refused.stderr).into_owned());
        if let Some(server) = server {
            let (status, _) = server.stop();
            assert!(status.success());
        }
        assert!(holding(&store.path(), MARKER.as_bytes()).is_empty());
        said
    };
    let alone = outputs(false);
    assert!(
        alone[1].starts_with("redacted 3 events (1, 3, 4)"),
        "{alone:?}"
    );
    assert_eq!(outputs(true), alone);
}

/// What an adversary found: a text as long as a note is erased through the server as it is
/// without one (the admin routes' 64 KiB body cap does not apply to this route), and a link
/// planted at the server file's name is neither followed nor a failure.
#[test]
fn a_long_text_is_erased_through_the_server_and_a_planted_link_is_left_alone() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let long = format!("{MARKER}{}", "x".repeat(100_000));
    let create =
        json!({"command": "create", "path": "/memories/long.md", "file_text": format!("{long}\n")});
    assert_eq!(server.memory(&create).status, 200);
    assert_eq!(
        server
            .memory(&json!({"command": "create", "path": "/memories/k.md", "file_text": "k\n"}))
            .status,
        200
    );
    let victim = store.path().with_extension("victim");
    std::fs::write(&victim, "not the server's").expect("write");
    let file = store.path().join(mnemo::testing::discovery::SERVER_FILE);
    std::fs::remove_file(&file).expect("remove");
    std::os::unix::fs::symlink(&victim, &file).expect("link");
    let body = json!({"reason": "r", "texts": [long]}).to_string();
    assert!(body.len() > 64 * 1024);
    let reply = server.call("POST", "/v1/redact", body.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(holding(&store.path(), MARKER.as_bytes()).is_empty());
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "not the server's"
    );
    assert_eq!(server.json("/v1/verify")["status"], "intact");
    std::fs::remove_file(&victim).expect("clean up");
}

/// `mnemo config set delete erase` on a served store goes through its server (`POST
/// /v1/config`), and then a delete sent to the server erases what it deleted before it answers.
#[test]
fn a_served_store_set_to_erase_erases_on_delete() {
    let store = TempStore::new();
    let db = store.path().to_str().expect("utf-8").to_string();
    let server = Server::start(&store.path(), &[]);
    seed(&server);
    let out = run_mnemo(&["config", "set", "delete", "erase", "--db", &db], "");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Set delete to erase"));
    let settings = server.call("GET", "/v1/config", b"");
    assert_eq!(
        settings.text(),
        "{\"name\":\"delete\",\"value\":\"erase\"}\n"
    );
    let refused = server.call(
        "POST",
        "/v1/config",
        json!({"name": "delete", "value": "never"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(refused.status, 400, "{}", refused.text());
    let reply = server.memory(&json!({"command": "delete", "path": "/memories/secret.md"}));
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(
        answer["content"],
        "Successfully deleted /memories/secret.md"
    );
    assert!(holding(&store.path(), MARKER.as_bytes()).is_empty());
    let report = server.json("/v1/verify");
    assert_eq!(report["status"], "intact", "{report}");
    assert!(report["redacted"].as_array().is_some_and(|r| !r.is_empty()));
    let (status, _) = server.stop();
    assert!(status.success());
}

/// A memory's versions, newest first, as the API lists them.
fn versions_of(server: &Server, store: &str, memory: &str) -> Vec<Value> {
    let (status, page) = server.api(
        "GET",
        &format!("/v1/memory_stores/{store}/memory_versions?memory_id={memory}&view=full"),
        &Value::Null,
    );
    assert_eq!(status, 200, "{page}");
    page["data"].as_array().expect("data").clone()
}

fn sha_of(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A redacted version as the hosted API answers it: 200, content, path and digest null, when and
/// by whom it was redacted set (the operator token's redaction as `operator`).
fn assert_redacted(version: &Value) {
    for null in ["content", "path", "content_sha256", "content_size_bytes"] {
        assert!(version[null].is_null(), "{null}: {version}");
    }
    assert!(version["redacted_at"].is_string(), "{version}");
    assert_eq!(version["redacted_by"]["type"], "api_actor", "{version}");
    assert_eq!(
        version["redacted_by"]["api_key_id"], "operator",
        "{version}"
    );
}

/// Issue 44, items 1 and 2: a version a live memory has moved past is redacted (its content gone
/// from every byte of the store), stays listed and retrievable with its content null, and the
/// later versions keep their content and digest (a precondition on the live one still holds);
/// the current version is refused with 409 naming the API's path; redacting a deleted memory's
/// versions newest first never brings it back, and leaves no byte of its content.
#[test]
fn memory_versions_are_redacted_as_the_hosted_api_does() {
    const SECRET: &str = "ZQXFIRSTSECRETQZX";
    const GONE: &[&str] = &["ZQXGONEONEQZX", "ZQXGONETWOQZX"];
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let (status, made) = server.api("POST", "/v1/memory_stores", &json!({"name": "notes"}));
    assert_eq!(status, 200, "{made}");
    let store = made["id"].as_str().expect("id").to_string();
    let memories = format!("/v1/memory_stores/{store}/memories");
    let versions = format!("/v1/memory_stores/{store}/memory_versions");
    // A memory written three times: a secret, then cleaned twice.
    let (status, memory) = server.api(
        "POST",
        &memories,
        &json!({"path": "/people/ann.md", "content": format!("pin {SECRET}\n")}),
    );
    assert_eq!(status, 200, "{memory}");
    let id = memory["id"].as_str().expect("id").to_string();
    let mut sha = memory["content_sha256"].as_str().expect("sha").to_string();
    for content in ["pin removed\n", "pin removed, twice\n"] {
        let (status, updated) = server.api("POST",
            &format!("{memories}/{id}"),
            &json!({"content": content, "precondition": {"type": "content_sha256", "content_sha256": sha}}),
        );
        assert_eq!(status, 200, "{updated}");
        sha = updated["content_sha256"].as_str().expect("sha").to_string();
    }
    let listed = versions_of(&server, &store, &id);
    assert_eq!(listed.len(), 3, "{listed:?}");
    let version = |v: &Value| v["id"].as_str().expect("version id").to_string();
    let (current, middle, first) = (
        version(&listed[0]),
        version(&listed[1]),
        version(&listed[2]),
    );
    // The current version: refused, with an error that says what to do, in the API's paths.
    let (status, refused) = server.api(
        "POST",
        &format!("{versions}/{current}/redact"),
        &Value::Null,
    );
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().expect("message");
    assert!(message.contains("update the memory"), "{message}");
    assert!(!message.contains("/memories"), "{message}");
    // The first version: redacted, and still a version.
    let (status, redacted) =
        server.api("POST", &format!("{versions}/{first}/redact"), &Value::Null);
    assert_eq!(status, 200, "{redacted}");
    assert_redacted(&redacted);
    let (status, retrieved) = server.api(
        "GET",
        &format!("{versions}/{first}?view=full"),
        &Value::Null,
    );
    assert_eq!(status, 200, "{retrieved}");
    assert_redacted(&retrieved);
    assert_eq!(retrieved["operation"], "created", "{retrieved}");
    assert_eq!(retrieved["memory_id"], id.as_str(), "{retrieved}");
    let listed = versions_of(&server, &store, &id);
    assert_eq!(
        listed.len(),
        3,
        "a redacted version stays listed: {listed:?}"
    );
    assert_redacted(&listed[2]);
    assert_eq!(listed[1]["content"], "pin removed\n", "{listed:?}");
    assert_eq!(
        listed[1]["content_sha256"],
        sha_of("pin removed\n"),
        "{listed:?}"
    );
    assert_eq!(listed[1]["path"], "/people/ann.md", "{listed:?}");
    // The middle one too; the live memory is as it was, and its digest still a precondition.
    let (status, redacted) =
        server.api("POST", &format!("{versions}/{middle}/redact"), &Value::Null);
    assert_eq!(status, 200, "{redacted}");
    assert_redacted(&redacted);
    let (status, live) = server.api("GET", &format!("{memories}/{id}?view=full"), &Value::Null);
    assert_eq!(status, 200, "{live}");
    assert_eq!(live["content"], "pin removed, twice\n", "{live}");
    let (status, updated) = server.api(
        "POST",
        &format!("{memories}/{id}"),
        &json!({"content": "pin removed, thrice\n", "precondition": {"type": "content_sha256", "content_sha256": sha}}),
    );
    assert_eq!(status, 200, "{updated}");
    // A current version that only moved the memory is its current version all the same.
    let (status, moved) = server.api(
        "POST",
        &format!("{memories}/{id}"),
        &json!({"path": "/people/ann-moved.md"}),
    );
    assert_eq!(status, 200, "{moved}");
    let moved_version = version(&versions_of(&server, &store, &id)[0]);
    let (status, refused) = server.api(
        "POST",
        &format!("{versions}/{moved_version}/redact"),
        &Value::Null,
    );
    assert_eq!(status, 409, "{refused}");
    // A deleted memory's versions, redacted newest first: it never comes back.
    let (status, doomed) = server.api(
        "POST",
        &memories,
        &json!({"path": "/gone.md", "content": GONE[0]}),
    );
    assert_eq!(status, 200, "{doomed}");
    let doomed = doomed["id"].as_str().expect("id").to_string();
    let (status, _) = server.api(
        "POST",
        &format!("{memories}/{doomed}"),
        &json!({"content": GONE[1]}),
    );
    assert_eq!(status, 200);
    let (status, _) = server.api("DELETE", &format!("{memories}/{doomed}"), &Value::Null);
    assert_eq!(status, 200);
    let listed = versions_of(&server, &store, &doomed);
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[0]["operation"], "deleted", "{listed:?}");
    for v in &listed {
        let (status, redacted) = server.api(
            "POST",
            &format!("{versions}/{}/redact", version(v)),
            &Value::Null,
        );
        assert_eq!(status, 200, "{redacted}");
        assert_redacted(&redacted);
        let (status, gone) = server.api("GET", &format!("{memories}/{doomed}"), &Value::Null);
        assert_eq!(status, 404, "the deleted memory came back: {gone}");
        let view = server.call(
            "POST",
            &format!(
                "/v1/stores/{}/memory",
                store.trim_start_matches("memstore_")
            ),
            json!({"command": "view", "path": "/memories"})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(view.status, 200, "{}", view.text());
        assert!(!view.text().contains("gone.md"), "{}", view.text());
        assert!(view.text().contains("ann-moved.md"), "{}", view.text());
    }
    let listed = versions_of(&server, &store, &doomed);
    assert_eq!(listed.len(), 3, "{listed:?}");
    listed.iter().for_each(assert_redacted);
    let report = server.json(&format!(
        "/v1/stores/{}/verify",
        store.trim_start_matches("memstore_")
    ));
    assert_eq!(report["status"], "intact", "{report}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    let db = data.path().join(store.trim_start_matches("memstore_"));
    for needle in std::iter::once(SECRET).chain(GONE.iter().copied()) {
        assert!(
            holding(&db, needle.as_bytes()).is_empty(),
            "{needle} is still in the store"
        );
    }
    let out = run_mnemo(&["verify", "--db", db.to_str().expect("utf-8")], "");
    assert!(
        out.status.success(),
        "{report}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Found by an attack on redaction by seq: an edit that carried the erased content on (a
/// memory-tool insert, whose answer shows no content) and a directory rename after it, redacted
/// with the create they built on, leave no version showing a placeholder as content: each version
/// either keeps the content and digest it had or is listed as redacted; a past read of the erased
/// content is refused, never answered with the placeholder; and a version whose event is also
/// another live memory's current version (a directory rename moved both) is refused.
#[test]
fn no_version_shows_a_placeholder_and_a_shared_current_version_is_refused() {
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let (_, made) = server.api("POST", "/v1/memory_stores", &json!({"name": "n"}));
    let store = made["id"].as_str().expect("id").to_string();
    let name = store.trim_start_matches("memstore_").to_string();
    let memories = format!("/v1/memory_stores/{store}/memories");
    let versions = format!("/v1/memory_stores/{store}/memory_versions");
    let tool = |input: Value| {
        let reply = server.call(
            "POST",
            &format!("/v1/stores/{name}/memory"),
            input.to_string().as_bytes(),
        );
        assert_eq!(reply.status, 200, "{}", reply.text());
    };
    let (_, a) = server.api(
        "POST",
        &memories,
        &json!({"path": "/d/a.md", "content": "line1 ZQXSECRETA\nline2\n"}),
    );
    let a = a["id"].as_str().expect("id").to_string();
    let (_, b) = server.api(
        "POST",
        &memories,
        &json!({"path": "/d/b.md", "content": "bee\n"}),
    );
    let b = b["id"].as_str().expect("id").to_string();
    tool(
        json!({"command": "insert", "path": "/memories/d/a.md", "insert_line": 1, "insert_text": "ins\n"}),
    );
    tool(json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}));
    let (status, _) = server.api(
        "POST",
        &format!("{memories}/{a}"),
        &json!({"content": "NEW\n"}),
    );
    assert_eq!(status, 200);
    let before: std::collections::BTreeMap<String, Value> = versions_of(&server, &store, &a)
        .into_iter()
        .map(|v| (v["id"].as_str().expect("id").to_string(), v))
        .collect();
    assert_eq!(before.len(), 4, "{before:?}");
    // The rename is b's current version as well as one of a's: refused.
    let renamed = versions_of(&server, &store, &a)[1]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (status, refused) = server.api(
        "POST",
        &format!("{versions}/{renamed}/redact"),
        &Value::Null,
    );
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().expect("message");
    assert!(message.contains(&b), "{message}");
    // a's create: redacted; what built on it (the insert, the rename of its content) goes with it.
    let created = versions_of(&server, &store, &a)[3]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (status, redacted) = server.api(
        "POST",
        &format!("{versions}/{created}/redact"),
        &Value::Null,
    );
    assert_eq!(status, 200, "{redacted}");
    for v in versions_of(&server, &store, &a) {
        let id = v["id"].as_str().expect("id");
        if v["redacted_at"].is_null() {
            assert_eq!(v["content"], before[id]["content"], "{v}");
            assert_eq!(v["content_sha256"], before[id]["content_sha256"], "{v}");
        } else {
            assert!(
                v["content"].is_null() && v["content_sha256"].is_null(),
                "{v}"
            );
        }
        assert!(!v.to_string().contains("[redacted]"), "{v}");
    }
    for v in versions_of(&server, &store, &b) {
        assert!(v["redacted_at"].is_null(), "b was never redacted: {v}");
    }
    let seq = |id: &str| id.split('_').nth(1).expect("a seq").to_string();
    let insert_seq = seq(versions_of(&server, &store, &a)[2]["id"]
        .as_str()
        .expect("id"));
    let past = server.call(
        "GET",
        &format!("/v1/stores/{name}/cat?path=/memories/d/a.md&at={insert_seq}"),
        b"",
    );
    assert_ne!(past.status, 200, "{}", past.text());
    assert!(!past.text().contains("[redacted]"), "{}", past.text());
    let report = server.json(&format!("/v1/stores/{name}/verify"));
    assert_eq!(report["status"], "intact", "{report}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    assert!(holding(&data.path().join(&name), b"ZQXSECRETA").is_empty());
}

/// A retry (same `Idempotency-Key`) of a create whose event a redaction erased cannot be
/// compared with what it asked: it is refused with 409 saying so, and changes nothing.
#[test]
fn a_retried_create_whose_event_was_redacted_is_refused_saying_why() {
    let data = tempfile::TempDir::new().expect("tempdir");
    let server = Server::start_data(data.path(), &[]);
    let (status, made) = server.api("POST", "/v1/memory_stores", &json!({"name": "notes"}));
    assert_eq!(status, 200, "{made}");
    let store = made["id"].as_str().expect("id").to_string();
    let memories = format!("/v1/memory_stores/{store}/memories");
    let bearer = server.bearer();
    let create = json!({"path": "/a.md", "content": "ZQXKEYEDSECRETQZX\n"}).to_string();
    let created = |server: &Server| {
        request(
            server.addr(),
            "POST",
            &memories,
            &[("Authorization", &bearer), ("Idempotency-Key", "create-1")],
            create.as_bytes(),
        )
    };
    let first = created(&server);
    assert_eq!(first.status, 200, "{}", first.text());
    let memory: Value = serde_json::from_slice(&first.body).expect("json");
    let id = memory["id"].as_str().expect("id");
    let (status, updated) = server.api(
        "POST",
        &format!("{memories}/{id}"),
        &json!({"content": "clean\n"}),
    );
    assert_eq!(status, 200, "{updated}");
    let listed = versions_of(&server, &store, id);
    let oldest = listed.last().expect("the create's version")["id"]
        .as_str()
        .expect("version id")
        .to_string();
    let (status, redacted) = server.api(
        "POST",
        &format!("/v1/memory_stores/{store}/memory_versions/{oldest}/redact"),
        &Value::Null,
    );
    assert_eq!(status, 200, "{redacted}");
    let retried = created(&server);
    assert_eq!(retried.status, 409, "{}", retried.text());
    assert!(
        retried.text().contains("a redaction erased"),
        "{}",
        retried.text()
    );
    assert_eq!(versions_of(&server, &store, id).len(), 2, "nothing changed");
}
