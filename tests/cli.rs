//! The built `mnemo` binary: the JSONL tool contract, verify's exit codes, demo and the readers.

use serde_json::{Value, json};

use crate::support::{TempStore, run_mnemo, tamper_record};

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect()
}

/// The `seq` of every JSON line in `out`.
fn seqs(out: &[u8]) -> Vec<u64> {
    lines(out)
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq is a number"))
        .collect()
}

#[test]
fn view_of_a_new_store_is_the_documented_listing() {
    let s = TempStore::new();
    let db = s.path();
    let out = run_mnemo(
        &["tool", "--db", db.to_str().unwrap()],
        "{\"command\":\"view\",\"path\":\"/memories\"}\n",
    );
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = lines(&out.stdout);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0]["content"],
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories"
    );
    assert_eq!(results[0]["type"], "tool_result");
    assert!(results[0].get("is_error").is_none());
}

#[test]
fn tool_answers_every_line_and_logs_the_ones_that_are_not_json() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().unwrap();
    let input = [
        json!({"type": "tool_use", "id": "toolu_a", "name": "memory",
               "input": {"command": "create", "path": "/memories/a.txt", "file_text": "one\ntwo\n"}})
        .to_string(),
        "this is not json".to_string(),
        String::new(),
        json!({"command": "view", "path": "/memories/a.txt", "view_range": [2, -1]}).to_string(),
        json!({"type": "tool_use", "id": "toolu_b", "name": "calculator", "input": {}}).to_string(),
        json!({"command": "delete", "path": "/memories/../../etc"}).to_string(),
    ]
    .join("\n")
        + "\n";
    let out = run_mnemo(&["tool", "--db", db, "--agent", "planner"], &input);
    assert!(out.status.success());
    let results = lines(&out.stdout);
    assert_eq!(results.len(), 6, "one result per input line");
    assert_eq!(results[0]["tool_use_id"], "toolu_a");
    assert_eq!(
        results[0]["content"],
        "File created successfully at: /memories/a.txt"
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: The input is not valid JSON")
    );
    assert_eq!(results[2]["is_error"], true);
    assert_eq!(
        results[3]["content"],
        "Here's the content of /memories/a.txt with line numbers:\n     2\ttwo\n     3\t"
    );
    assert_eq!(results[4]["is_error"], true);
    assert_eq!(results[4]["tool_use_id"], "toolu_b");
    assert_eq!(
        results[5]["content"],
        "Path /memories/../../etc would escape /memories directory"
    );

    // All six calls are in the log, attributed to the agent, and the store verifies.
    let log = run_mnemo(&["log", "--db", db, "--json"], "");
    let events = lines(&log.stdout);
    assert_eq!(events.len(), 6);
    assert!(events.iter().all(|e| e["agent"] == "planner"));
    assert_eq!(events[1]["command"], "rejected");
    let verify = run_mnemo(&["verify", "--db", db, "--json"], "");
    assert_eq!(verify.status.code(), Some(0));
    let report = &lines(&verify.stdout)[0];
    assert_eq!(report["status"], "intact");
    assert_eq!(report["events"], 6);
}

#[test]
fn verify_exit_codes() {
    let s = TempStore::new();
    let db = s.path();
    let db_str = db.to_str().unwrap();

    let missing = run_mnemo(&["verify", "--db", db_str], "");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no store at"));

    let input = (0..5)
        .map(|i| {
            json!({"command": "create", "path": format!("/memories/f{i}"), "file_text": "x"})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        run_mnemo(&["tool", "--db", db_str], &input)
            .status
            .success()
    );
    assert_eq!(
        run_mnemo(&["verify", "--db", db_str], "").status.code(),
        Some(0)
    );

    // While another process holds the store, verify cannot run: exit 2 and a clear message.
    {
        let _holder = s.client();
        let locked = run_mnemo(&["verify", "--db", db_str], "");
        assert_eq!(locked.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&locked.stderr);
        assert!(
            stderr.contains("in use by another process") && stderr.contains("mnemo-server.json"),
            "the error says where a server that holds it is named: {stderr}"
        );
    }

    tamper_record(&db, 3, |record| {
        let last = record.len() - 1;
        record[last] ^= 0x01;
    });
    let bad = run_mnemo(&["verify", "--db", db_str, "--json"], "");
    assert_eq!(bad.status.code(), Some(1));
    let report = &lines(&bad.stdout)[0];
    assert_eq!(report["status"], "violation");
    assert_eq!(report["violations"][0]["seq"], 3);
}

#[test]
fn an_empty_store_is_reported_as_empty() {
    let s = TempStore::new();
    drop(s.client());
    let out = run_mnemo(&["verify", "--db", s.path().to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("EMPTY"));
}

#[test]
fn demo_runs_on_a_fresh_store_and_refuses_a_used_one() {
    let s = TempStore::new();
    let db = s.path();
    let out = run_mnemo(&["demo", "--db", db.to_str().unwrap()], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("mnemo verify: INTACT"), "{stdout}");
    assert!(stdout.contains("Successfully renamed /memories/projects to /memories/done"));
    assert_eq!(
        run_mnemo(&["verify", "--db", db.to_str().unwrap()], "")
            .status
            .code(),
        Some(0)
    );
    let again = run_mnemo(&["demo", "--db", db.to_str().unwrap()], "");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
}

#[test]
fn readers_show_the_past_and_follow_renames() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().unwrap();
    let input = [
        json!({"command": "create", "path": "/memories/a/n.txt", "file_text": "v1"}),
        json!({"command": "str_replace", "path": "/memories/a/n.txt", "old_str": "v1", "new_str": "v2"}),
        json!({"command": "create", "path": "/memories/other.txt", "file_text": "o"}),
        json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
        json!({"command": "view", "path": "/memories/b/n.txt"}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    assert!(
        run_mnemo(&["tool", "--db", db, "--durability", "flush"], &input)
            .status
            .success()
    );

    let cat_now = run_mnemo(&["cat", "/memories/b/n.txt", "--db", db], "");
    assert_eq!(String::from_utf8_lossy(&cat_now.stdout), "v2");
    let cat_then = run_mnemo(&["cat", "/memories/a/n.txt", "--db", db, "--at", "1"], "");
    assert_eq!(String::from_utf8_lossy(&cat_then.stdout), "v1");
    let gone = run_mnemo(&["cat", "/memories/a/n.txt", "--db", db], "");
    assert_eq!(gone.status.code(), Some(2));

    let ls_then = String::from_utf8_lossy(&run_mnemo(&["ls", "--db", db, "--at", "2"], "").stdout)
        .into_owned();
    assert!(
        ls_then.contains("/memories/a/n.txt") && !ls_then.contains("other.txt"),
        "{ls_then}"
    );
    let ls_now = String::from_utf8_lossy(&run_mnemo(&["ls", "--db", db], "").stdout).into_owned();
    assert!(
        ls_now.contains("/memories/b/n.txt") && ls_now.contains("other.txt"),
        "{ls_now}"
    );

    let history = run_mnemo(&["history", "/memories/b/n.txt", "--db", db, "--json"], "");
    assert_eq!(
        seqs(&history.stdout),
        vec![1, 2, 4, 5],
        "create, edit, the directory rename, the view"
    );

    let by_path = run_mnemo(&["log", "--db", db, "--path", "/memories/a", "--json"], "");
    assert_eq!(seqs(&by_path.stdout), vec![1, 2, 4]);
    let limited = run_mnemo(
        &["log", "--db", db, "--from", "2", "--limit", "2", "--json"],
        "",
    );
    assert_eq!(seqs(&limited.stdout), vec![2, 3]);
}

#[test]
fn tool_refuses_a_line_over_max_request_bytes_and_answers_the_next() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().unwrap();
    let big = json!({"command": "create", "path": "/memories/a.txt", "file_text": "x".repeat(200)})
        .to_string();
    let small =
        json!({"command": "create", "path": "/memories/b.txt", "file_text": "ok"}).to_string();
    let input = format!("{big}\n{small}\n");
    let out = run_mnemo(&["tool", "--db", db, "--max-request-bytes", "100"], &input);
    assert!(out.status.success());
    let results = lines(&out.stdout);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "Error: This call is {} bytes, over the limit of 100 bytes for one request",
                big.len()
            )),
        "{}",
        results[0]
    );
    assert_eq!(
        results[1]["content"],
        "File created successfully at: /memories/b.txt"
    );
    let verify = run_mnemo(&["verify", "--db", db], "");
    assert!(verify.status.success());
    let log = run_mnemo(&["log", "--db", db, "--json"], "");
    let events = lines(&log.stdout);
    assert_eq!(events[0]["command"], "rejected");
    assert_eq!(events[1]["command"], "create");
}

/// Refused paths and agent ids come from outside. `mnemo log` and `mnemo history` print them
/// escaped: a newline cannot forge a log line, and an escape code or bidi control cannot reach
/// the terminal.
#[test]
fn log_and_history_print_hostile_text_escaped() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().unwrap();
    let forged =
        "     3  2026-12-01T23:59:59.000Z  admin         delete       ok     /memories/real.md";
    let input = [
        json!({"command": "create", "path": "/memories/real.md", "file_text": "a"}),
        json!({"command": "view", "path": format!("/memories/x\n{forged}")}),
        json!({"command": "rename", "old_path": "/memories/real.md",
               "new_path": "/memories/\u{1b}]0;pwned\u{7}\r     9  fake"}),
        json!({"command": "view", "path": "/memories/\u{1b}[2J\u{202e}txt.exe"}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let agent = "ag\u{202e}ent";
    let out = run_mnemo(&["tool", "--db", db, "--agent", agent], &input);
    assert!(out.status.success(), "{out:?}");
    let log = run_mnemo(&["log", "--db", db], "");
    assert!(log.status.success(), "{log:?}");
    let text = String::from_utf8(log.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 4, "one line per event:\n{text}");
    for c in text.chars() {
        assert!(
            c == '\n' || !(c.is_control() || ('\u{200b}'..='\u{206f}').contains(&c)),
            "raw {c:?} in the log:\n{text}"
        );
    }
    assert!(
        text.contains("/memories/x\\u{a}     3  2026-12-01T23:59:59.000Z"),
        "{text}"
    );
    assert!(text.contains("\\u{1b}]0;pwned\\u{7}\\u{d}"), "{text}");
    assert!(text.contains("ag\\u{202e}ent"), "{text}");
    let history = run_mnemo(&["history", "/memories/real.md", "--db", db], "");
    let text = String::from_utf8(history.stdout).expect("utf-8");
    assert!(!text.chars().any(|c| c != '\n' && c.is_control()), "{text}");
    assert!(text.lines().count() >= 2, "{text}");
}

/// `--at` past the end of the log says where the log ends (it used to show the head silently),
/// a refused admin call says why once (it used to print "error: Error:"), and counts of one
/// are singular.
#[test]
fn at_past_the_log_refused_admin_calls_and_counts_read_well() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let create = r#"{"command":"create","path":"/memories/a.md","file_text":"x"}"#;
    assert!(run_mnemo(&["tool", "--db", db], create).status.success());
    for args in [
        vec!["ls", "--db", db, "--at", "9999"],
        vec!["cat", "/memories/a.md", "--db", db, "--at", "9999"],
        vec!["diff", "0", "9999", "--db", db],
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("there is no event 9999: the log ends at seq 1"),
            "{args:?}: {err}"
        );
    }
    let out = run_mnemo(
        &[
            "acl",
            "revoke",
            "--db",
            db,
            "--agent",
            "nobody",
            "--prefix",
            "/memories",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("mnemo: error: agent nobody has no grant on /memories")
            && err.contains("(refused; logged as seq 2)")
            && !err.contains("Error:"),
        "{err}"
    );
    let exported = s.dir.path().join("out");
    let out = run_mnemo(
        &["export", exported.to_str().expect("utf-8"), "--db", db],
        "",
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("exported 1 file ("),
        "{out:?}"
    );
}

/// `mnemo completions SHELL` prints a script that knows every subcommand, `mnemo man` the roff
/// page, and `man --out DIR` one page per command; the help says what `--profile` and `--at` take
/// and what verify's exit codes mean.
#[test]
fn completions_man_pages_and_help_name_what_they_take() {
    let out = run_mnemo(&["completions", "bash"], "");
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    for sub in ["tool", "verify", "serve", "show", "diff", "token", "acl"] {
        assert!(script.contains(sub), "the bash script misses {sub}");
    }
    assert!(
        script.contains("complete -F"),
        "not a bash completion script"
    );
    let bad = run_mnemo(&["completions", "tcsh"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));

    let out = run_mnemo(&["man"], "");
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH mnemo 1"), "{page}");
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = dir.path().join("man1");
    let out = run_mnemo(&["man", "--out", pages.to_str().expect("utf-8")], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["mnemo.1", "mnemo-verify.1", "mnemo-token-create.1"] {
        let text = std::fs::read_to_string(pages.join(page)).expect(page);
        assert!(text.contains(".TH"), "{page}");
    }

    let help = |args: &[&str]| String::from_utf8_lossy(&run_mnemo(args, "").stdout).into_owned();
    assert!(help(&["tool", "--help"]).contains("spec|python-sdk"));
    assert!(help(&["ls", "--help"]).contains("--at <SEQ>"));
    let verify = help(&["verify", "--help"]);
    assert!(
        verify.contains("Exit status: 0 the log is intact; 1"),
        "{verify}"
    );
}

/// Every entry of the directory `dir`, by name, in order.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `ls /` lists every file, `ls` of a directory that is not there says so (exit 2, as `cat` of
/// a missing file does), and every read command on a path with no store says "no store at" and
/// creates nothing, without pointing `mnemo demo` at that path.
#[test]
fn ls_of_the_top_and_of_nothing_and_reads_of_no_store() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let input = [
        json!({"command": "create", "path": "/memories/a/n.md", "file_text": "x"}),
        json!({"command": "create", "path": "/other/o.md", "file_text": "yy"}),
    ];
    let lines = format!("{}\n{}", input[0], input[1]);
    assert!(run_mnemo(&["tool", "--db", db], &lines).status.success());
    let other = run_mnemo(
        &["tool", "--db", db, "--root", "/other"],
        &input[1].to_string(),
    );
    assert!(other.status.success());

    let top = run_mnemo(&["ls", "--db", db, "/"], "");
    assert_eq!(top.status.code(), Some(0), "{top:?}");
    let listed = String::from_utf8_lossy(&top.stdout);
    assert!(
        listed.contains("/memories/a/n.md") && listed.contains("/other/o.md"),
        "{listed}"
    );
    for (args, shown) in [
        (
            vec!["ls", "--db", db, "/memories/nothere"],
            "/memories/nothere",
        ),
        (
            vec!["ls", "--db", db, "/memories/a", "--at", "0"],
            "/memories/a after seq 0",
        ),
    ] {
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("no file or directory at {shown}")),
            "{args:?}: {err}"
        );
    }

    let missing = s.dir.path().join("no-store-here");
    let missing = missing.to_str().expect("utf-8");
    let before = entries(s.dir.path());
    let out_dir = s.dir.path().join("exported");
    let out_dir = out_dir.to_str().expect("utf-8");
    for args in [
        vec!["export", out_dir],
        vec!["ls", "/"],
        vec!["ls"],
        vec!["cat", "/memories/a/n.md"],
        vec!["log"],
        vec!["history", "/memories/a/n.md"],
        vec!["show", "1"],
        vec!["diff", "0", "1"],
        vec!["verify"],
        vec!["acl", "list"],
        vec!["token", "list"],
    ] {
        let mut args = args;
        args.extend(["--db", missing]);
        let out = run_mnemo(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("mnemo: error: no store at {missing};")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("mnemo demo --db"), "{args:?}: {err}");
        assert_eq!(entries(s.dir.path()), before, "{args:?} made something");
    }
}

/// A failed import leaves no store behind; a successful one into a new path leaves only the
/// store there, which verifies.
#[test]
fn a_failed_import_leaves_nothing_and_a_good_one_only_the_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("new.mnemo.db");
    let db_str = db.to_str().expect("utf-8");
    let nowhere = dir.path().join("dir/that/does/not/exist");
    let out = run_mnemo(
        &["import", "--db", db_str, nowhere.to_str().expect("utf-8")],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert_eq!(entries(dir.path()), Vec::<String>::new(), "nothing is left");

    // Into an empty directory made for it, too: it stays empty.
    std::fs::create_dir(&db).expect("mkdir");
    let out = run_mnemo(
        &["import", "--db", db_str, nowhere.to_str().expect("utf-8")],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(entries(dir.path()), vec!["new.mnemo.db".to_string()]);
    assert_eq!(entries(&db), Vec::<String>::new());

    let base = dir.path().join("base");
    std::fs::create_dir_all(base.join("memories/x")).expect("mkdir");
    std::fs::write(base.join("memories/x/n.md"), "hi").expect("write");
    let out = run_mnemo(
        &["import", "--db", db_str, base.to_str().expect("utf-8")],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        entries(dir.path()),
        vec!["base".to_string(), "new.mnemo.db".to_string()],
        "no building directory is left beside the store"
    );
    let cat = run_mnemo(&["cat", "/memories/x/n.md", "--db", db_str], "");
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "hi");
    assert_eq!(
        run_mnemo(&["verify", "--db", db_str], "").status.code(),
        Some(0)
    );
}

/// `mnemo tool --db` on a directory that holds other files (an export) is refused and writes
/// nothing into it.
#[test]
fn tool_refuses_a_directory_that_is_not_a_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::create_dir_all(dir.path().join("memories")).expect("mkdir");
    std::fs::write(dir.path().join("memories/n.md"), "x").expect("write");
    let out = run_mnemo(
        &["tool", "--db", dir.path().to_str().expect("utf-8")],
        r#"{"command":"view","path":"/memories"}"#,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds other files and no store"), "{err}");
    assert_eq!(entries(dir.path()), vec!["memories".to_string()]);
}

/// The demo's closing hint is one command a line (pasted, each runs on its own), and a demo on
/// a store of its own says where the store stays and how to remove it. With no `mnemo` on PATH
/// (as after `cargo run -- demo`) the commands name the binary that ran, and the hint says how
/// to install it.
#[test]
fn the_demo_hint_is_one_command_a_line_and_names_the_scratch_store() {
    let out = crate::support::run_command(
        crate::support::mnemo_command(&["demo"], &[("PATH", "/nonexistent")]),
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let store = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Mnemo demo: a memory session on a fresh store at "))
        .expect("the demo names its store")
        .to_string();
    let hint: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Inspect it"))
        .collect();
    assert!(hint.len() > 3, "{stdout}");
    assert!(
        hint[0].contains("`mnemo` is not on your PATH")
            && hint[0].contains("cargo install --path . --locked"),
        "{}",
        hint[0]
    );
    let bin = std::fs::canonicalize(crate::support::mnemo_bin()).expect("the binary");
    for line in &hint[1..hint.len() - 1] {
        assert!(!line.contains('|'), "{line}");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            std::fs::canonicalize(words[0]).ok().as_ref(),
            Some(&bin),
            "{line}"
        );
        assert_eq!(&words[words.len() - 2..], ["--db", store.as_str()]);
        let mut pasted = std::process::Command::new(words[0]);
        pasted.args(&words[1..]).env_remove("MNEMO_DB");
        let out = crate::support::run_command(pasted, b"");
        assert_eq!(out.status.code(), Some(0), "{line}: {out:?}");
    }
    let last = hint[hint.len() - 1];
    assert_eq!(
        last,
        format!("The store stays in the temporary directory until you remove it: rm -r {store}")
    );
    std::fs::remove_dir_all(&store).expect("remove the demo store");

    let s = TempStore::new();
    let out = run_mnemo(&["demo", "--db", s.path().to_str().expect("utf-8")], "");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("rm -r"));
}

/// With this `mnemo` on PATH, the demo's hint names it as `mnemo`, with nothing about installing.
#[test]
fn the_demo_hint_says_mnemo_when_it_is_on_path() {
    let bin = std::path::Path::new(crate::support::mnemo_bin());
    let dir = bin.parent().expect("the binary's directory");
    let s = TempStore::new();
    let db = s.path();
    let out = crate::support::run_command(
        crate::support::mnemo_command(
            &["demo", "--db", db.to_str().expect("utf-8")],
            &[("PATH", dir.to_str().expect("utf-8"))],
        ),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hint: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Inspect it"))
        .collect();
    assert_eq!(hint[0], "Inspect it, one command a line:", "{stdout}");
    assert_eq!(
        hint[1],
        format!("  mnemo log --db {}", db.display()),
        "{stdout}"
    );
}

/// `mnemo tool` says on stderr when it made the store (a mistyped `--db` shows at once), and only
/// then.
#[test]
fn tool_says_when_it_creates_the_store() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8");
    let view = r#"{"command":"view","path":"/memories"}"#;
    let first = run_mnemo(&["tool", "--db", db], view);
    assert!(first.status.success());
    assert_eq!(
        String::from_utf8_lossy(&first.stderr),
        format!("mnemo: created a new store at {db}\n")
    );
    let again = run_mnemo(&["tool", "--db", db], view);
    assert!(
        again.status.success() && again.stderr.is_empty(),
        "{again:?}"
    );
}

/// A `--db` in a directory that does not exist: `tool`, `mcp` and `link` say so, and how to
/// make it, before they try to start a server for it (they said a started server had exited).
#[test]
fn a_db_in_a_missing_directory_is_named_before_a_server_is_started() {
    let s = TempStore::new();
    let db = s.dir.path().join("missing").join("memory.mnemo.db");
    let db = db.to_str().expect("utf-8");
    for command in ["tool", "mcp", "link"] {
        let out = crate::support::run_command(
            crate::support::served_command(&[command, "--db", db], &[]),
            b"",
        );
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "the directory {} does not exist",
                s.dir.path().join("missing").display()
            )) && err.contains("mkdir -p")
                && !err.contains("started a server"),
            "{command}: {err}"
        );
        assert!(!s.dir.path().join("missing").exists(), "{command}");
    }
    // A file where the directory would be, and a store path that is a dangling link: each said as
    // it is, before any server is started.
    let file = s.dir.path().join("a-file");
    std::fs::write(&file, b"x").expect("write a file");
    let under_file = file.join("s.db");
    let link = s.dir.path().join("dangling");
    std::os::unix::fs::symlink(s.dir.path().join("nowhere"), &link).expect("symlink");
    for (db, says) in [
        (under_file.to_str().expect("utf-8"), "is not a directory"),
        (link.to_str().expect("utf-8"), "is a symbolic link"),
    ] {
        for command in ["tool", "link", "serve"] {
            let out = crate::support::run_command(
                crate::support::served_command(&[command, "--db", db], &[]),
                b"",
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {db}: {err}");
            assert!(
                err.contains(says) && !err.contains("started a server") && !err.contains("mkdir"),
                "{command} {db}: {err}"
            );
        }
    }
    // --data naming a file, or a directory whose parent is missing.
    let missing_parent = s.dir.path().join("gone").join("data");
    for (data, says) in [
        (file.to_str().expect("utf-8"), "is not a directory"),
        (missing_parent.to_str().expect("utf-8"), "does not exist"),
    ] {
        let out = crate::support::run_command(
            crate::support::served_command(&["serve", "--data", data], &[]),
            b"",
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{data}: {err}");
        assert!(err.contains(says), "{data}: {err}");
    }
    assert!(!s.dir.path().join("gone").exists());
}

/// A reader that closes the pipe before anything is written (`mnemo completions zsh | head -1`
/// on a long script): the big outputs end quietly with exit 0, as every command does on a
/// broken pipe, and never panic (clap_complete's `generate` panicked on the failed write: 101).
/// Runs `mnemo args` with its stdout closed before it writes (a reader that stopped reading, as
/// `| head -1` is once it has its line); its exit code and stderr.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut child = crate::support::mnemo_command(args, &[])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mnemo");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for mnemo");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An admin change whose answer finds stdout closed still ends quietly (the change is made and
/// logged, as `mnemo log` shows); a secret shown only once (an agent token, a verifier key) that
/// cannot be written is an error saying so, never a panic and never a quiet success that lost it.
#[test]
fn a_closed_stdout_never_panics_and_a_lost_secret_is_an_error() {
    let t = TempStore::new();
    let db = t.path().to_str().expect("utf-8").to_string();
    run_mnemo(
        &["tool", "--db", &db],
        "{\"command\":\"view\",\"path\":\"/memories\"}\n",
    );
    let (code, err) = with_stdout_closed(&[
        "acl", "grant", "--db", &db, "--agent", "z", "--prefix", "/", "--access", "read",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let log = run_mnemo(&["log", "--db", &db], "");
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("grant"),
        "the grant was made"
    );
    for (args, what) in [
        (
            vec!["token", "create", "--db", &db, "--agent", "w2"],
            "the token could not be written",
        ),
        (
            vec!["key", "create", "--db", &db],
            "the verifier key could not be written",
        ),
    ] {
        let (code, err) = with_stdout_closed(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(what) && err.contains("not shown again"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // An error told to a full stderr is lost, but the exit code still says it failed.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if full.is_err() && std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "no /dev/full on this machine: the full-stderr check cannot run, and under CI=true that fails"
        );
    }
    if let Ok(full) = full {
        let status = crate::support::mnemo_command(&["cat", "--db", &db, "/memories/nope"], &[])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(full)
            .status()
            .expect("run mnemo");
        assert_eq!(status.code(), Some(2), "an error on a full stderr");
    } else {
        eprintln!("skipped: no /dev/full, so an error on a full stderr was not tried");
    }
}

#[test]
fn a_closed_stdout_ends_the_big_outputs_quietly() {
    for args in [
        &["completions", "zsh"][..],
        &["completions", "bash"],
        &["completions", "fish"],
        &["completions", "elvish"],
        &["completions", "powershell"],
        &["man"],
        &["--help"],
        &["serve", "--help"],
    ] {
        let mut child = crate::support::mnemo_command(args, &[])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn mnemo");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait for mnemo");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
