//! Many processes on one store: clients and servers killed with `kill -9` mid-call, the
//! README's MCP config started twice at once, and 16 client processes making mixed calls.
//!
//! Bounded for CI (a few seconds each); `MNEMO_SOAK_SECS=N` runs the 16-process test for N
//! seconds instead, and the kill loops for more rounds.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use mnemo::{Durability, MnemoClient, MnemoMemoryToolServer};
use serde_json::{Value, json};

use super::{Session, db_arg, mnemo, server_of, signal, stop_server, text};
use crate::model::{Cmd, Line, Model, check_result};
use crate::support::{Rng, TempStore};

/// Seconds the soak runs, when `MNEMO_SOAK_SECS` asks for one.
fn soak() -> Option<Duration> {
    let secs: f64 = std::env::var("MNEMO_SOAK_SECS").ok()?.parse().ok()?;
    Some(Duration::from_secs_f64(secs))
}

fn rounds(ci: usize) -> usize {
    soak().map_or(ci, |d| ci.max(usize::try_from(d.as_secs()).unwrap_or(ci)))
}

fn create(path: &str) -> String {
    json!({"command": "create", "path": path, "file_text": format!("{path}\n")}).to_string()
}

/// The files of the store at `db`, listed by `mnemo ls` (through its server, if one runs).
fn files(db: &Path) -> Vec<String> {
    let out = mnemo(&["ls", "/memories", "--db", db_arg(db)], &[], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

fn verify_intact(db: &Path) {
    let out = mnemo(&["verify", "--db", db_arg(db)], &[], b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn session(db: &Path, extra: &[&str]) -> Session {
    super::tool(db, &[&["--idle-exit", "5"], extra].concat())
}

#[test]
fn clients_killed_mid_call_lose_nothing_acknowledged_and_the_server_serves_on() {
    let store = TempStore::new();
    let db = store.path();
    let mut acknowledged = Vec::new();
    let mut server = None;
    for round in 0..rounds(4) {
        let mut client = session(&db, &[]);
        let paths: Vec<String> = (0..40)
            .map(|i| format!("/memories/r{round}/f{i}.md"))
            .collect();
        // The whole batch at once, so the kill lands with calls in flight.
        for path in &paths {
            client.send(&create(path));
        }
        for path in paths.iter().take(5 + round % 7) {
            let answer = client.line().expect("an answer");
            assert!(answer.contains("File created successfully"), "{answer}");
            acknowledged.push(path.clone());
        }
        let pid = server_of(&db).pid;
        assert_eq!(*server.get_or_insert(pid), pid, "the server serves on");
        signal("-KILL", client.child.id());
        let _ = client.child.wait();
    }
    let listed = files(&db);
    for path in &acknowledged {
        assert!(listed.contains(path), "{path} was acknowledged but is gone");
    }
    verify_intact(&db);
    assert_eq!(server_of(&db).pid, server.expect("a server"));
    stop_server(&db);
}

#[test]
fn a_server_killed_mid_batch_is_restarted_by_the_next_call_and_keeps_what_it_acknowledged() {
    let store = TempStore::new();
    let db = store.path();
    let mut client = session(&db, &[]);
    let mut acknowledged = Vec::new();
    let mut unanswered = 0;
    let mut pids = Vec::new();
    for round in 0..rounds(3) {
        let paths: Vec<String> = (0..30)
            .map(|i| format!("/memories/r{round}/f{i}.md"))
            .collect();
        for path in &paths {
            client.send(&create(path));
        }
        pids.push(server_of(&db).pid);
        for (i, path) in paths.iter().enumerate() {
            if i == 4 {
                signal("-KILL", *pids.last().expect("pid"));
            }
            let answer: Value =
                serde_json::from_str(&client.line().expect("an answer")).expect("JSON");
            let content = answer["content"].as_str().expect("content");
            if answer.get("is_error").is_none() {
                assert_eq!(content, format!("File created successfully at: {path}"));
                acknowledged.push(path.clone());
            } else {
                // Cut off by the kill: it says so, and to check before a retry.
                assert!(
                    (content.contains("did not answer")
                        || content.contains("could not be reached"))
                        && content.contains("retry"),
                    "{content}"
                );
                eprintln!("round {round} call {i}: {content}");
                unanswered += 1;
            }
        }
        // The next call reaches a server (a new one).
        let after = client.call(&create(&format!("/memories/after{round}.md")));
        assert!(after.get("is_error").is_none(), "{after}");
        acknowledged.push(format!("/memories/after{round}.md"));
        assert_ne!(server_of(&db).pid, *pids.last().expect("pid"), "restarted");
    }
    eprintln!(
        "server killed {} times: {unanswered} call(s) cut off, {} acknowledged",
        rounds(3),
        acknowledged.len()
    );
    assert!(
        unanswered <= rounds(3),
        "at most the call in flight at each kill goes unanswered ({unanswered})"
    );
    let listed = files(&db);
    for path in &acknowledged {
        assert!(listed.contains(path), "{path} was acknowledged but is gone");
    }
    verify_intact(&db);
    drop(client);
    stop_server(&db);
}

/// One MCP session over stdio: initialize, then requests by id.
struct Mcp {
    session: Session,
    id: u64,
}

impl Mcp {
    fn start(db: &Path, agent: &str) -> Mcp {
        // The README's MCP config: `mnemo mcp --db PATH --agent NAME`.
        let session = Session::start(
            &[
                "mcp",
                "--db",
                db_arg(db),
                "--agent",
                agent,
                "--idle-exit",
                "5",
            ],
            &[],
        );
        Mcp { session, id: 0 }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let message = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        self.session.send(&message.to_string());
        let line = self.session.line().expect("a reply");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(reply["id"], self.id, "{reply}");
        reply
    }

    fn initialize(&mut self) {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"]["name"] == "mnemo", "{init}");
        self.session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    }

    /// A memory call: its text and whether it is an error.
    fn memory(&mut self, input: Value) -> (String, bool) {
        let reply = self.request("tools/call", json!({"name": "memory", "arguments": input}));
        let result = &reply["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_string();
        (text, result["isError"] == true)
    }
}

#[test]
fn the_mcp_config_started_twice_at_once_shares_the_store() {
    let store = TempStore::new();
    let db = store.path();
    let mut desktop = Mcp::start(&db, "claude-desktop");
    let mut code = Mcp::start(&db, "claude-code");
    desktop.initialize();
    code.initialize();
    let (made, is_error) = desktop.memory(json!({"command": "create",
        "path": "/memories/desktop.md", "file_text": "from desktop\n"}));
    assert!(!is_error, "{made}");
    let (made, is_error) = code.memory(json!({"command": "create",
        "path": "/memories/code.md", "file_text": "from code\n"}));
    assert!(!is_error, "{made}");
    let (seen, _) = code.memory(json!({"command": "view", "path": "/memories/desktop.md"}));
    assert!(seen.contains("from desktop"), "{seen}");
    let (seen, _) = desktop.memory(json!({"command": "view", "path": "/memories/code.md"}));
    assert!(seen.contains("from code"), "{seen}");
    let listed = desktop.request("resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        [
            "memory:///memories/code.md",
            "memory:///memories/desktop.md"
        ]
    );
    let read = code.request(
        "resources/read",
        json!({"uri": "memory:///memories/desktop.md"}),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "from desktop\n");
    // While both are connected, the store's readers work.
    verify_intact(&db);
    assert_eq!(files(&db), ["/memories/code.md", "/memories/desktop.md"]);
    let log = mnemo(&["log", "--db", db_arg(&db), "--json"], &[], b"");
    let agents: Vec<String> = text(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line")["agent"].to_string())
        .collect();
    assert_eq!(
        agents,
        [
            "\"claude-desktop\"",
            "\"claude-code\"",
            "\"claude-code\"",
            "\"claude-desktop\""
        ]
    );
    // A third client by URL and token (an agent named, as the operator may).
    let file = server_of(&db);
    let mut remote = Mcp {
        session: Session::start(&super::connect_args("mcp", &file, "remote"), &[]),
        id: 0,
    };
    remote.initialize();
    let (seen, is_error) = remote.memory(json!({"command": "view", "path": "/memories/code.md"}));
    assert!(!is_error && seen.contains("from code"), "{seen}");
    assert!(remote.session.finish().success());
    // The server killed: the next call restarts it, or (cut off mid-call) says to retry.
    let pid = server_of(&db).pid;
    signal("-KILL", pid);
    let (text_after, is_error) =
        code.memory(json!({"command": "view", "path": "/memories/code.md"}));
    eprintln!("after the kill, the next MCP call was an error result: {is_error}");
    let cut_off = is_error;
    if is_error {
        assert!(text_after.contains("retry"), "{text_after}");
        let (again, is_error) =
            code.memory(json!({"command": "view", "path": "/memories/code.md"}));
        assert!(!is_error && again.contains("from code"), "{again}");
    } else {
        assert!(text_after.contains("from code"), "{text_after}");
    }
    assert_ne!(server_of(&db).pid, pid);
    let (seen, is_error) = desktop.memory(json!({"command": "view", "path": "/memories/code.md"}));
    assert!(!is_error && seen.contains("from code"), "{seen}");
    assert!(desktop.session.finish().success());
    // A call the kill cut off ends the session as it ends `mnemo tool`'s: exit 2, saying so.
    assert_eq!(
        code.session.finish().code(),
        Some(if cut_off { 2 } else { 0 }),
        "cut off: {cut_off}"
    );
    stop_server(&db);
}

/// A client's calls: each one's id, command (for the model) and `tool_use` block.
type Script = Vec<(String, Cmd, Value)>;

/// One client process's calls: mixed commands on overlapping paths, each with its own id.
fn script(client: usize, calls: usize, seed: u64) -> Script {
    let mut rng = Rng(seed ^ (client as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let path = |rng: &mut Rng| {
        let dir = ["/memories/a", "/memories/b", "/memories"][rng.below(3)];
        format!("{dir}/f{}.md", rng.below(4))
    };
    (0..calls)
        .map(|i| {
            let id = format!("toolu_c{client}_{seed}_{i}");
            let cmd = match rng.below(7) {
                0 | 1 => Cmd::Create {
                    path: path(&mut rng),
                    text: format!("c{client} {i}\nline two\n"),
                },
                2 => Cmd::View {
                    path: ["/memories", "/memories/a", "/memories/b"][rng.below(3)].into(),
                    range: None,
                },
                3 => Cmd::StrReplace {
                    path: path(&mut rng),
                    old: "line two".into(),
                    new: Some(format!("two by c{client}")),
                },
                4 => Cmd::Insert {
                    path: path(&mut rng),
                    line: Line::Int(1),
                    text: format!("ins c{client} {i}\n"),
                },
                5 => Cmd::Delete {
                    path: path(&mut rng),
                },
                _ => Cmd::Rename {
                    old: path(&mut rng),
                    new: path(&mut rng),
                },
            };
            let block =
                json!({"type": "tool_use", "id": id, "name": "memory", "input": cmd.to_json()});
            (id, cmd, block)
        })
        .collect()
}

#[test]
fn sixteen_client_processes_agree_with_the_log_and_its_serial_replay() {
    let store = TempStore::new();
    let db = store.path();
    let soak_for = soak();
    let calls = if soak_for.is_some() { 60 } else { 12 };
    // An anchor session starts the server; half the clients find it through the store, half
    // reach it by URL and token (an HTTP client process).
    let mut anchor = session(&db, &["--agent", "anchor"]);
    anchor.call(&json!({"command": "view", "path": "/memories"}).to_string());
    let file = server_of(&db);
    let started = Instant::now();
    let mut answers: HashMap<String, (Cmd, Value, Value)> = HashMap::new();
    let mut seed = 0u64;
    loop {
        let clients: Vec<(Script, std::thread::JoinHandle<Vec<u8>>)> = (0..16)
            .map(|c| {
                let calls = script(c, calls, seed);
                let input: Vec<u8> = calls
                    .iter()
                    .flat_map(|(_, _, block)| format!("{block}\n").into_bytes())
                    .collect();
                let agent = format!("client-{c}");
                let mut args: Vec<String> = vec!["tool".into(), "--agent".into(), agent];
                if c % 2 == 0 {
                    args.extend([
                        "--db".into(),
                        db_arg(&db).into(),
                        "--idle-exit".into(),
                        "5".into(),
                    ]);
                } else {
                    args.extend([
                        "--connect".into(),
                        file.url.clone(),
                        "--token".into(),
                        file.token.clone(),
                    ]);
                }
                let process = std::thread::spawn(move || {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let out = mnemo(&args, &[], &input);
                    assert!(out.status.success(), "{}", text(&out.stderr));
                    out.stdout
                });
                (calls, process)
            })
            .collect();
        for (calls, process) in clients {
            let stdout = process.join().expect("client process");
            let results: Vec<Value> = text(&stdout)
                .lines()
                .map(|l| serde_json::from_str(l).expect("a tool_result line"))
                .collect();
            assert_eq!(results.len(), calls.len(), "one answer per call");
            for ((id, cmd, block), result) in calls.into_iter().zip(results) {
                assert_eq!(result["tool_use_id"], id.as_str());
                answers.insert(id, (cmd, block, result));
            }
        }
        seed += 1;
        match soak_for {
            Some(limit) if started.elapsed() < limit => continue,
            _ => break,
        }
    }
    // Every answer is its logged outcome.
    let log = mnemo(&["log", "--db", db_arg(&db), "--json"], &[], b"");
    assert!(log.status.success(), "{}", text(&log.stderr));
    let events: Vec<Value> = text(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a log line"))
        .collect();
    let mut by_seq: BTreeMap<u64, String> = BTreeMap::new();
    for event in &events {
        let Some(id) = event["tool_use_id"].as_str() else {
            continue;
        };
        let (_, _, result) = answers
            .get(id)
            .unwrap_or_else(|| panic!("a logged call nobody made: {event}"));
        let content = result["content"].as_str().expect("content");
        assert!(
            crate::support::records_answer(event, content),
            "{id}: the answer is not the logged outcome: {event}"
        );
        assert_eq!(event["is_error"], result.get("is_error").is_some(), "{id}");
        assert!(
            by_seq
                .insert(event["seq"].as_u64().expect("seq"), id.into())
                .is_none()
        );
    }
    assert_eq!(
        by_seq.len(),
        answers.len(),
        "every answered call is logged, once"
    );
    // The final tree is a serial replay of the log, and each answer is the replay's.
    let replay_store = TempStore::new();
    let replay = MnemoMemoryToolServer::new(
        MnemoClient::builder(replay_store.path())
            .agent_id("replay")
            .durability(Durability::Buffered)
            .open()
            .expect("open the replay store"),
    );
    // And the naive model of the model test, replayed in the same order, agrees with both.
    let mut model = Model::new("/memories");
    for id in by_seq.values() {
        let (cmd, block, result) = &answers[id];
        let replayed = replay.handle(block);
        assert_eq!(replayed["content"], result["content"], "{id}: {block}");
        let content = result["content"].as_str().expect("content");
        check_result(&model.step(cmd), content, result.get("is_error").is_some())
            .unwrap_or_else(|e| panic!("{id}: {block}: {e}"));
    }
    let served = MnemoClient::connect(file.url.clone(), file.token.clone());
    let tree = |records: Vec<mnemo::MemoryRecord>| -> Vec<(String, String)> {
        records.into_iter().map(|r| (r.path, r.content)).collect()
    };
    let final_tree = tree(
        served
            .records_by_tag("memorytool")
            .expect("the served tree"),
    );
    let replayed_tree = tree(
        replay
            .client()
            .records_by_tag("memorytool")
            .expect("the replayed tree"),
    );
    assert_eq!(final_tree, replayed_tree);
    let modelled: Vec<(String, String)> = model.files.clone().into_iter().collect();
    assert_eq!(final_tree, modelled, "the model's tree");
    assert!(!final_tree.is_empty());
    let report = served.verify(None).expect("verify through the server");
    assert_eq!(report.status, "intact", "{report:?}");
    assert!(anchor.finish().success());
    stop_server(&db);
    verify_intact(&db);
}
