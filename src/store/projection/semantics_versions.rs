//! Every difference between the semantics versions, answer by answer: the same calls answered
//! against a projection under each version give these texts (semantics 1's are those of the
//! builds before versions, byte for byte). Kept here rather than beside `Semantics`, which sits
//! below the event format and the index these tests drive.

use serde_json::json;

use crate::model::event::{Body, RejectedCall, Seq, ToolCall};
use crate::model::policy::{Access, AdminCommand};
use crate::model::tool::{Command, Limits, Profile, Semantics};
use crate::store::kv::MemKv;
use crate::store::projection::Projection;

fn tool(command: Command) -> Body {
    Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: Limits::default(),
        command,
    })
}

fn rejected(input: &str) -> Body {
    Body::Rejected(RejectedCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        input: input.into(),
    })
}

fn view(path: &str) -> Body {
    tool(Command::View {
        path: path.into(),
        view_range: None,
    })
}

/// The calls, each with a tool_use id or none, and the texts of semantics 1 and 2 (3 answers
/// these as 2 does).
fn table() -> Vec<(Option<&'static str>, Body, String, String)> {
    let decomposed = "e\u{301}".repeat(90);
    let valid_call = "A valid call looks like {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}";
    vec![
        (
            None,
            view("/memories/a\tb"),
            "Error: Path \"/memories/a\\tb\" contains the control character '\\t'; memory paths are plain text such as /memories/notes.txt".into(),
            "Error: Path \"/memories/a\\tb\" contains the control character U+0009; memory paths are plain text such as /memories/notes.txt".into(),
        ),
        (
            None,
            view(&format!("/memories/{decomposed}")),
            format!("Error: Path \"/memories/{}\" is too long (270 bytes where at most 255 are allowed; paths are limited to 4096 bytes and names to 255); use a shorter name under /memories", "e\\u{301}".repeat(90)),
            format!("Error: Path \"/memories/{decomposed}\" is too long (270 bytes where at most 255 are allowed; paths are limited to 4096 bytes and names to 255); use a shorter name under /memories"),
        ),
        (
            None,
            view("/memories/e\u{301}\u{200b}"),
            "Error: Path \"/memories/e\\u{301}\\u{200b}\" contains the invisible character U+200B (a bidi control or zero-width character, which can hide or reorder a name in a listing); memory paths are plain text such as /memories/notes.txt".into(),
            "Error: Path \"/memories/e\u{301}\\u{200b}\" contains the invisible character U+200B (a bidi control or zero-width character, which can hide or reorder a name in a listing); memory paths are plain text such as /memories/notes.txt".into(),
        ),
        (
            None,
            rejected("not json"),
            "Error: The input is not valid JSON (expected ident at line 1 column 2). Send one JSON object per line, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
            "Error: The input is not valid JSON (the text stops being JSON at line 1, column 2). Send one JSON object per line, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
        ),
        (
            None,
            rejected("{\"command\": \"view\", \"path\": "),
            "Error: The input is not valid JSON (EOF while parsing a value at line 1 column 28). Send one JSON object per line, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
            "Error: The input is not valid JSON (the text ends at line 1, column 28, before the JSON value is complete). Send one JSON object per line, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
        ),
        (
            None,
            rejected("{\"command\": \"view\", \"command\u{301}\": 1, \"command\u{301}\": 2}"),
            "Error: The input names the key \"command\\u{301}\" more than once in one object; send each field once, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
            "Error: The input names the key \"command\u{301}\" more than once in one object; send each field once, for example {\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}".into(),
        ),
        (
            None,
            rejected("{\"command\": \"vie\u{301}w\"}"),
            "Error: Unknown command \"vie\\u{301}w\"; use one of: view, create, str_replace, insert, delete, rename".into(),
            "Error: Unknown command \"vie\u{301}w\"; use one of: view, create, str_replace, insert, delete, rename".into(),
        ),
        (
            None,
            rejected(&json!({"command": "view", "path": "/memories", "view_range": [1.0, "2\u{301}", {"b": 1, "a": 2e-7}]}).to_string()),
            "Error: view_range must be an array of two integers [start_line, end_line] (1-based, inclusive; end_line -1 reads to the end), got [1.0,\"2\u{301}\",{\"a\":2e-7,\"b\":1}]".into(),
            "Error: view_range must be an array of two integers [start_line, end_line] (1-based, inclusive; end_line -1 reads to the end), got [1.0, \"2\u{301}\", {\"a\": 2e-7, \"b\": 1}]".into(),
        ),
        (
            None,
            rejected(&json!({"command": "insert", "path": "/memories/a", "insert_line": 1e300, "insert_text": "x"}).to_string()),
            format!("Error: \"insert_line\" is out of range (1e+300); use a line number from 0 to the number of lines in the file. {}", valid_call.replace("{\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}", "{\"command\": \"insert\", \"path\": \"/memories/notes.txt\", \"insert_line\": 0, \"insert_text\": \"a new line\\n\"}")),
            format!("Error: \"insert_line\" is out of range (1e300); use a line number from 0 to the number of lines in the file. {}", valid_call.replace("{\"command\": \"view\", \"path\": \"/memories\", \"view_range\": [1, 20]}", "{\"command\": \"insert\", \"path\": \"/memories/notes.txt\", \"insert_line\": 0, \"insert_text\": \"a new line\\n\"}")),
        ),
        (
            None,
            rejected(&json!({"command": "insert", "path": "/memories/a", "insert_line": [0.5], "insert_text": "x"}).to_string()),
            "Error: \"insert_line\" must be a whole number of lines, got [0.5] (an array). A valid call looks like {\"command\": \"insert\", \"path\": \"/memories/notes.txt\", \"insert_line\": 0, \"insert_text\": \"a new line\\n\"}".into(),
            "Error: \"insert_line\" must be a whole number of lines, got [0.5] (an array). A valid call looks like {\"command\": \"insert\", \"path\": \"/memories/notes.txt\", \"insert_line\": 0, \"insert_text\": \"a new line\\n\"}".into(),
        ),
        (
            Some("toolu\u{301}"),
            view("/memories"),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories".into(),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories".into(),
        ),
        (
            Some("toolu\u{301}"),
            view("/memories/other"),
            "Error: tool_use id \"toolu\\u{301}\" was already used by agent a for a different call (event 11), so this call was not run. Send it again with a fresh tool_use id.".into(),
            "Error: tool_use id \"toolu\u{301}\" was already used by agent a for a different call (event 11), so this call was not run. Send it again with a fresh tool_use id.".into(),
        ),
        (
            None,
            Body::Admin(AdminCommand::Grant {
                agent: decomposed.repeat(2),
                prefix: "/".into(),
                access: Access::Read,
            }),
            format!("Error: agent id \"{}\" is not valid; use 1 to 256 bytes of printable text, such as \"agent-1\", or \"*\" for every agent", "e\\u{301}".repeat(180)),
            format!("Error: agent id \"{}\" is not valid; use 1 to 256 bytes of printable text, such as \"agent-1\", or \"*\" for every agent", decomposed.repeat(2)),
        ),
        (
            None,
            Body::Admin(AdminCommand::Revoke {
                agent: "*".into(),
                prefix: "memories\u{301}".into(),
            }),
            "Error: the path must be absolute, such as /memories, got \"memories\\u{301}\"".into(),
            "Error: the path must be absolute, such as /memories, got \"memories\u{301}\"".into(),
        ),
        (
            None,
            Body::Admin(AdminCommand::RevokeToken {
                id: "id\u{301}".into(),
            }),
            "Error: token id \"id\\u{301}\" is not valid; ids are 1 to 64 ASCII letters, digits or '-', as `mnemo token list` shows them".into(),
            "Error: token id \"id\u{301}\" is not valid; ids are 1 to 64 ASCII letters, digits or '-', as `mnemo token list` shows them".into(),
        ),
    ]
}

/// Where semantics 3 answers a call of [`table`] otherwise than 2: its row and its text.
fn changed_in_three(row: usize, v2: String) -> String {
    match row {
        7 => v2.replacen("view_range", "`view_range`", 1),
        _ => v2,
    }
}

#[test]
fn each_version_answers_with_its_own_texts() {
    for version in Semantics::ALL {
        let mut tree = Projection::new(MemKv::default());
        for (i, (id, body, v1, v2)) in table().into_iter().enumerate() {
            let seq = Seq(u64::try_from(i).expect("small") + 1);
            let answer = tree
                .run_call("a", id, &body, version, seq)
                .expect("answered");
            let want = match version {
                Semantics::V1 => v1,
                Semantics::V2 => v2,
                _ => changed_in_three(i, v2),
            };
            assert_eq!(answer.text, want, "semantics {version}, call {}", seq);
        }
    }
}

/// A call under a view cap of `cap` characters.
fn capped(cap: u64, command: Command) -> Body {
    Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: Limits {
            view_max_chars: Some(cap),
            ..Limits::default()
        },
        command,
    })
}

fn whole(path: &str) -> Command {
    Command::View {
        path: path.into(),
        view_range: None,
    }
}

fn ranged(path: &str, from: i64, to: i64) -> Command {
    Command::View {
        path: path.into(),
        view_range: Some((from, to)),
    }
}

/// What semantics 3 answers otherwise than 2, on one tree: the texts of 2, then of 3.
fn three_table() -> Vec<(Body, String, String)> {
    let four = "Here's the content of /memories/four.md with line numbers:\n";
    let listing = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories";
    vec![
        (
            tool(Command::Create {
                path: "/memories".into(),
                file_text: "x".into(),
            }),
            "Error: File /memories already exists".into(),
            "Error: /memories is the memory root directory, which always exists and cannot be a file; create a file inside it, such as /memories/notes.md".into(),
        ),
        (
            tool(ranged("/memories/four.md", 0, 3)),
            format!("{four}     1\tone\n     2\ttwo\n     3\tthree"),
            "Error: Invalid `view_range` parameter: [0, 3]. /memories/four.md has 4 lines: use [start_line, end_line] with 1 <= start_line <= end_line and start_line <= 4 (an end_line past 4 reads to line 4), or end_line -1 to read to the end.".into(),
        ),
        (
            tool(ranged("/memories/four.md", 3, 2)),
            "Error: Invalid view_range [3, 2] for /memories/four.md, which has 4 lines. Use [start_line, end_line] with 1 <= start_line <= end_line <= 4, or end_line -1 to read to the end.".into(),
            "Error: Invalid `view_range` parameter: [3, 2]. /memories/four.md has 4 lines: use [start_line, end_line] with 1 <= start_line <= end_line and start_line <= 4 (an end_line past 4 reads to line 4), or end_line -1 to read to the end.".into(),
        ),
        (
            capped(10, ranged("/memories/four.md", 1, 3)),
            format!("{four}     1\tone\n[Output truncated at 10 characters: showing lines 1-1 of 3. Use view_range [2, -1] to read the rest, or a narrower range.]"),
            format!("{four}     1\tone\n[Output truncated at 10 characters: showing lines 1-1 of the 4 in the file. Use view_range [2, 3] to read on.]"),
        ),
        (
            capped(9, whole("/memories/long.md")),
            "Here's the content of /memories/long.md with line numbers:\n     1\tab\n[Output truncated at 9 characters: line 1 alone is longer than that, so only its start is shown, and no view under this limit shows the rest of it. Use view_range [2, -1] to read the lines after it.]".into(),
            "Here's the content of /memories/long.md with line numbers:\n     1\tab\n[Output truncated at 9 characters: line 1 is 5 bytes long, more than a view under this limit shows, so only its start is shown and no view shows the rest of it; to change the line, str_replace a part of it you can see. Use view_range [2, -1] to read on.]".into(),
        ),
        (
            capped(40, whole("/memories")),
            format!("{listing}\n4K\t/memories/d/\n1B\t/memories/d/a.md\n1B\t/memories/d/b.md\n18B\t/memories/four.md\n7B\t/memories/long.md"),
            format!("{listing}\n4K\t/memories/d/\n1B\t/memories/d/a.md\n[Listing truncated at 40 characters: showing 2 of 5 entries. View a subdirectory, such as /memories/d, to list what it holds, or view a file by its path.]"),
        ),
        (
            capped(20, whole("/memories")),
            format!("{listing}\n4K\t/memories/d/\n1B\t/memories/d/a.md\n1B\t/memories/d/b.md\n18B\t/memories/four.md\n7B\t/memories/long.md"),
            format!("{listing}\n4K\t/memories/d/\n[Listing truncated at 20 characters: showing 1 of 5 entries. View a subdirectory, such as /memories/d, to list what it holds, or view a file by its path.]"),
        ),
    ]
}

#[test]
fn semantics_three_answers_truthfully_where_two_did_not() {
    let files = [
        ("/memories/four.md", "one\ntwo\nthree\nfour"),
        ("/memories/long.md", "abcde\nf"),
        ("/memories/d/a.md", "a"),
        ("/memories/d/b.md", "b"),
    ];
    for version in [Semantics::V2, Semantics::V3] {
        let mut tree = Projection::new(MemKv::default());
        let mut seq = 0;
        for (path, text) in files {
            seq += 1;
            let create = tool(Command::Create {
                path: path.into(),
                file_text: text.into(),
            });
            let made = tree
                .run_call("a", None, &create, version, Seq(seq))
                .expect("answered");
            assert!(!made.is_error, "{}", made.text);
        }
        for (body, v2, v3) in three_table() {
            seq += 1;
            let answer = tree
                .run_call("a", None, &body, version, Seq(seq))
                .expect("answered");
            let want = if version == Semantics::V2 { v2 } else { v3 };
            assert_eq!(answer.text, want, "semantics {version}, call {seq}");
        }
    }
}

/// Semantics 5 names no file the agent may not read: a `create` or `rename` under a file, or an
/// API write whose path goes through one, told an agent granted only `/memories/zone/inner` that
/// a file is at `/memories/zone` (semantics 4 still answers so, as its events were answered); an
/// agent that may read the file is still told which it is.
#[test]
fn semantics_five_names_no_file_the_agent_may_not_read() {
    use crate::model::tool::api::ApiWrite;
    let create = |path: &str| {
        tool(Command::Create {
            path: path.into(),
            file_text: "x".into(),
        })
    };
    let grant = |agent: &str, prefix: &str| {
        Body::Admin(AdminCommand::Grant {
            agent: agent.into(),
            prefix: prefix.into(),
            access: Access::ReadWrite,
        })
    };
    let rename = tool(Command::Rename {
        old_path: "/memories/mine/a.md".into(),
        new_path: "/memories/zone/inner/b.md".into(),
    });
    let api = Body::Api(ApiWrite::Create {
        path: "/memories/zone/inner/c.md".into(),
        content: "x".into(),
    });
    for version in [Semantics::V4, Semantics::V5] {
        let mut tree = Projection::new(MemKv::default());
        let mut seq = 0;
        let mut run = |agent: &str, body: &Body| {
            seq += 1;
            tree.run_call(agent, None, body, version, Seq(seq))
                .expect("answered")
        };
        for (agent, body) in [
            ("operator", create("/memories/zone")),
            ("operator", grant("zoned", "/memories/zone/inner")),
            ("operator", grant("zoned", "/memories/mine")),
            ("operator", grant("owner", "/")),
            (
                "operator",
                Body::Admin(AdminCommand::Revoke {
                    agent: "*".into(),
                    prefix: "/".into(),
                }),
            ),
            ("zoned", create("/memories/mine/a.md")),
        ] {
            let done = run(agent, &body);
            assert!(!done.is_error, "{}", done.text);
        }
        let answers = [
            run("zoned", &create("/memories/zone/inner/x.md")).text,
            run("zoned", &rename).text,
            run("zoned", &api).text,
        ];
        let want: [&str; 3] = match version {
            Semantics::V4 => [
                "Error: Cannot create /memories/zone/inner/x.md: /memories/zone is a file, not a directory. Choose a path whose parent directories are not files.",
                "Error: Cannot rename /memories/mine/a.md to /memories/zone/inner/b.md: /memories/zone is a file, not a directory",
                "memory_path_conflict_error: the memory /memories/zone is in the way: a path cannot go through a memory",
            ],
            _ => [
                "Error: Cannot create /memories/zone/inner/x.md: a file this agent may not read is in the way (a directory above it is a file). Choose another path.",
                "Error: Cannot rename /memories/mine/a.md to /memories/zone/inner/b.md: a file this agent may not read is in the way (a directory above /memories/zone/inner/b.md is a file)",
                "memory_path_conflict_error: a memory this agent may not read is in the way of /memories/zone/inner/c.md: a path cannot go through a memory; choose another path",
            ],
        };
        assert_eq!(
            answers.map(|a| a),
            want.map(String::from),
            "semantics {version}"
        );
        // An agent that may read the file is told which it is, under either version.
        let owner = run("owner", &create("/memories/zone/inner/x.md")).text;
        assert!(owner.contains("/memories/zone is a file"), "{owner}");
    }
}
