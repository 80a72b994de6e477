//! The admin commands (`acl grant|revoke`, `token create|revoke`) through the server that holds
//! the store: the same output, exit code and recorded events as the same commands on a store no
//! server holds, the operator's `--as` name recorded, and an agent token refused with nothing
//! written.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::{connect_args, db_arg, mnemo, server_of, stop_server, text, tool};
use crate::support::TempStore;

/// What a run printed, with every token id and token text in it replaced by a placeholder (the
/// two stores get different random tokens) and the timestamps of `log` lines cut.
fn shown(out: &Output, ids: &[String]) -> (Option<i32>, String, String) {
    let mask = |bytes: &[u8]| {
        let mut t = text(bytes);
        for id in ids {
            t = t.replace(id.as_str(), "ID");
        }
        t.lines()
            .map(|line| match line.find("mnemo_") {
                Some(at) => format!("{}TOKEN", &line[..at]),
                // `token list` shows when each token was issued.
                None => line
                    .split(' ')
                    .map(|word| match word.len() == 24 && word.ends_with('Z') {
                        true => "TIME",
                        false => word,
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    (out.status.code(), mask(&out.stdout), mask(&out.stderr))
}

/// The ids of the tokens of the store at `db`, oldest first.
fn token_ids(db: &Path) -> Vec<String> {
    let out = mnemo(&["token", "list", "--json", "--db", db_arg(db)], &[], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            v["id"].as_str().expect("id").to_string()
        })
        .collect()
}

/// The log as `mnemo log --json` gives it, without the time of each event.
fn events(db: &Path, ids: &[String]) -> Vec<String> {
    let out = mnemo(&["log", "--json", "--db", db_arg(db)], &[], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("a JSON line");
            // The time, and so the chain hashes, differ between the two stores, and so do the
            // salts the result hashes are keyed with.
            for key in [
                "time",
                "time_ms",
                "hash",
                "prev_hash",
                "salt",
                "result_hash",
            ] {
                v[key] = Value::Null;
            }
            let mut line = v.to_string();
            for id in ids {
                line = line.replace(id.as_str(), "ID");
            }
            line
        })
        .collect()
}

/// Runs the admin session on `db` and returns each command's output, masked.
fn admin_session(db: &Path) -> Vec<(Option<i32>, String, String)> {
    let run = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--db", db_arg(db)]);
        mnemo(&args, &[], b"")
    };
    let mut outputs = vec![
        run(&[
            "acl",
            "grant",
            "--agent",
            "planner",
            "--prefix",
            "/memories/plans",
            "--access",
            "read-write",
        ]),
        run(&[
            "acl",
            "grant",
            "--agent",
            "*",
            "--prefix",
            "/memories/shared",
            "--access",
            "read",
        ]),
        run(&[
            "acl",
            "grant",
            "--agent",
            "coder",
            "--prefix",
            "/memories",
            "--access",
            "read",
            "--as",
            "alice",
        ]),
        // Refused by the store, and logged.
        run(&[
            "acl",
            "revoke",
            "--agent",
            "nobody",
            "--prefix",
            "/memories/x",
        ]),
        run(&[
            "acl",
            "revoke",
            "--agent",
            "planner",
            "--prefix",
            "/memories/plans",
        ]),
        run(&[
            "token", "create", "--agent", "planner", "--label", "ci", "--as", "bob",
        ]),
        run(&["token", "create", "--agent", "*"]),
    ];
    let id = token_ids(db).pop().expect("a token");
    outputs.push(run(&["token", "revoke", &id, "--as", "carol"]));
    outputs.push(run(&["token", "revoke", &id]));
    outputs.push(run(&["token", "revoke", "0123456789abcdef"]));
    // An id that is a path is one segment of the route, never another route.
    outputs.push(run(&["token", "revoke", "../../v1/head"]));
    outputs.push(run(&["acl", "list"]));
    outputs.push(run(&["token", "list"]));
    let ids = token_ids(db);
    outputs.iter().map(|out| shown(out, &ids)).collect()
}

/// Fails naming the first item that differs between the run through the server and the run on
/// the store alone (a short message: a whole session's output is too long to read in a report).
fn same_lines<T: PartialEq + std::fmt::Debug>(what: &str, served: &[T], alone: &[T]) {
    if let Some(at) = (0..served.len().max(alone.len())).find(|&i| served.get(i) != alone.get(i)) {
        panic!(
            "{what} item {at} differs: through the server {:?}, alone {:?}",
            served.get(at),
            alone.get(at)
        );
    }
}

/// What one run of a session gave, and the store's log after it.
struct Ran<T> {
    output: T,
    log: Vec<String>,
}

/// Runs `session` twice on stores that start with the one call `first`: on one that a server
/// (started by the `mnemo tool` that made `first`) holds throughout, and on one that no server
/// holds. Each log is read with `log_of` while the store is in that state.
fn served_and_alone<T>(
    first: &Value,
    session: impl Fn(&Path) -> T,
    log_of: impl Fn(&Path) -> Vec<String>,
) -> (Ran<T>, Ran<T>) {
    let (served, alone) = (TempStore::new(), TempStore::new());
    let mut holder = tool(&served.path(), &["--idle-exit", "5"]);
    holder.call(&first.to_string());
    let server = server_of(&served.path());
    let output = session(&served.path());
    assert_eq!(
        server_of(&served.path()).pid,
        server.pid,
        "one server held the store throughout"
    );
    let through_server = Ran {
        output,
        log: log_of(&served.path()),
    };
    assert!(holder.finish().success());
    stop_server(&served.path());

    let mut local = tool(&alone.path(), &["--idle-exit", "1"]);
    local.call(&first.to_string());
    assert!(local.finish().success());
    stop_server(&alone.path());
    let output = session(&alone.path());
    assert!(
        std::fs::metadata(alone.path().join("mnemo-server.json")).is_err(),
        "no server held the second store"
    );
    let by_itself = Ran {
        output,
        log: log_of(&alone.path()),
    };
    (through_server, by_itself)
}

#[test]
fn admin_commands_go_through_the_server_and_print_and_record_what_they_do_alone() {
    let first = json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"});
    let (served, alone) = served_and_alone(&first, admin_session, |db| events(db, &token_ids(db)));
    same_lines("output", &served.output, &alone.output);
    same_lines("log", &served.log, &alone.log);
    let (by_itself, logged_served) = (alone.output, served.log);

    // What the commands did, checked on their own (not only as equal to each other).
    let codes: Vec<Option<i32>> = by_itself.iter().map(|(code, _, _)| *code).collect();
    assert_eq!(
        codes,
        [0, 0, 0, 2, 0, 0, 2, 0, 2, 2, 2, 0, 0].map(Some),
        "{by_itself:#?}"
    );
    assert!(
        by_itself[3].2.contains("(refused; logged as seq 5)"),
        "{}",
        by_itself[3].2
    );
    assert!(
        by_itself[5].1.ends_with("TOKEN"),
        "the token is the last line"
    );
    assert!(
        by_itself[8].2.contains("already revoked"),
        "{}",
        by_itself[8].2
    );
    assert!(
        by_itself[10]
            .2
            .contains("token id \"../../v1/head\" is not valid"),
        "{}",
        by_itself[10].2
    );
    let agents: Vec<String> = logged_served
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("json")["agent"].to_string())
        .collect();
    assert_eq!(
        agents,
        ["cli", "cli", "cli", "alice", "cli", "cli", "bob", "carol"].map(|a| format!("{a:?}")),
        "{logged_served:#?}"
    );
}

#[test]
fn an_agent_token_cannot_run_admin_commands_through_a_server() {
    let store = TempStore::new();
    let db = store.path();
    let holder = tool(&db, &["--idle-exit", "5"]);
    let file = server_of(&db);
    let issued = mnemo(
        &["token", "create", "--agent", "planner", "--db", db_arg(&db)],
        &[],
        b"",
    );
    assert!(issued.status.success(), "{}", text(&issued.stderr));
    let token = text(&issued.stdout)
        .lines()
        .last()
        .expect("the token")
        .to_string();
    let head = |file: &mnemo::testing::discovery::ServerFile| {
        let out = mnemo(&connect_args("log", file, "check")[..5], &[], b"");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().count()
    };
    let before = head(&file);
    for command in [
        vec![
            "acl",
            "grant",
            "--agent",
            "planner",
            "--prefix",
            "/",
            "--access",
            "read-write",
        ],
        vec!["acl", "revoke", "--agent", "planner", "--prefix", "/"],
        vec!["token", "create", "--agent", "planner"],
        vec!["token", "revoke", "0123456789abcdef"],
    ] {
        let mut args = command.clone();
        args.extend(["--connect", file.url.as_str(), "--token", token.as_str()]);
        let out = mnemo(&args, &[], b"");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{command:?}: {}",
            text(&out.stdout)
        );
        assert!(
            text(&out.stderr).contains("(403)"),
            "{command:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(head(&file), before, "nothing was written");
    drop(holder);
    stop_server(&db);
}

#[test]
fn import_goes_through_the_server_and_records_what_it_records_alone() {
    let source = TempStore::new();
    let memories = source.dir.path().join("export").join("memories");
    std::fs::create_dir_all(memories.join("sub")).expect("dirs");
    std::fs::write(memories.join("a.md"), "a\n").expect("a");
    std::fs::write(memories.join("sub").join("b.md"), "b\n").expect("b");
    let from = source.dir.path().join("export");
    let first = json!({"command": "create", "path": "/memories/x.md", "file_text": "x\n"});
    let import = |db: &Path| {
        let out = mnemo(
            &["import", from.to_str().expect("utf-8"), "--db", db_arg(db)],
            &[],
            b"",
        );
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (served, alone) = served_and_alone(&first, import, |db| events(db, &[]));
    assert_eq!(served.output, alone.output);
    assert_eq!(served.log, alone.log);
    let (through_server, logged_served) = (served.output, served.log);
    assert_eq!(through_server.0, Some(0), "{through_server:?}");
    assert!(
        through_server.1.starts_with("imported 2 files"),
        "{through_server:?}"
    );
    let agents: Vec<String> = logged_served
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("json")["agent"].to_string())
        .collect();
    assert_eq!(agents, ["\"cli\"", "\"import\"", "\"import\""]);
}
