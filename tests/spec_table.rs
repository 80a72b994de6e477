//! The `spec` profile, one case per row of its table and per semantics note: a fresh tree, a few
//! files, one call, the exact result text and error flag, and the file afterwards. Every case
//! runs on the pure core over an in-memory tree; the sled sample (`support::in_sled_sample`) also
//! through a live server over a sled store, which must answer the same.

use serde_json::{Value, json};

use crate::support::{Host, PureServer, SledServer, call, hosts, spec};

const LISTING: &str = "Here're the files and directories up to 2 levels deep in";

/// Runs `setup` (path, content) creates, then `input`, on each host of the case; checks the
/// result and the log, and returns the hosts to look at the files afterwards.
fn check(setup: &[(&str, &str)], input: Value, want: &str, want_error: bool) -> Vec<Box<dyn Host>> {
    let hosts = hosts(&format!("{setup:?} {input}"), &spec());
    for host in &hosts {
        let name = host.name();
        for (path, content) in setup {
            let (text, err) = call(
                &**host,
                json!({"command": "create", "path": path, "file_text": content}),
            );
            assert!(!err, "{name}: setup create {path}: {text}");
        }
        let (text, is_error) = call(&**host, input.clone());
        assert_eq!(text, want, "{name}: input: {input}");
        assert_eq!(is_error, want_error, "{name}: is_error for input: {input}");
        let calls = setup.len() as u64 + 1;
        assert_eq!(host.log_problem(calls), None, "{name}: input: {input}");
    }
    hosts
}

/// The content of the file at `path` (`None` = no such file), the same on every host.
fn file(hosts: &[Box<dyn Host>], path: &str) -> Option<String> {
    same(hosts, |host| host.file(path))
}

/// What `read` gives on every host, failing unless they all give the same.
fn same<T: PartialEq + std::fmt::Debug>(
    hosts: &[Box<dyn Host>],
    read: impl Fn(&dyn Host) -> T,
) -> T {
    let mut got = hosts.iter().map(|host| (host.name(), read(&**host)));
    let (first_name, first) = got.next().expect("a case runs on at least one host");
    for (name, other) in got {
        assert_eq!(other, first, "{name} and {first_name} differ");
    }
    first
}

#[test]
fn view_directory_lists_two_levels_sorted_without_hidden_items() {
    let setup = [
        ("/memories/b.txt", "12345"),
        ("/memories/a/x.md", "x"),
        ("/memories/a/deep/y.md", "y"),
        ("/memories/a/deep/deeper/z.md", "z"),
        ("/memories/.hidden/s.txt", "s"),
        ("/memories/a/.dot", "d"),
        ("/memories/node_modules/m.js", "m"),
        ("/memories/B.txt", &"k".repeat(1536)),
    ];
    let want = format!(
        "{LISTING} /memories, excluding hidden items and node_modules:\n4K\t/memories\n1.5K\t/memories/B.txt\n4K\t/memories/a/\n4K\t/memories/a/deep/\n1B\t/memories/a/x.md\n5B\t/memories/b.txt"
    );
    check(
        &setup,
        json!({"command": "view", "path": "/memories"}),
        &want,
        false,
    );
    // A trailing slash names the same directory; a subdirectory lists from itself.
    check(
        &setup,
        json!({"command": "view", "path": "/memories/"}),
        &want,
        false,
    );
    check(
        &setup,
        json!({"command": "view", "path": "/memories/a"}),
        &format!(
            "{LISTING} /memories/a, excluding hidden items and node_modules:\n4K\t/memories/a\n4K\t/memories/a/deep/\n4K\t/memories/a/deep/deeper/\n1B\t/memories/a/deep/y.md\n1B\t/memories/a/x.md"
        ),
        false,
    );
    // Hidden directories can be viewed directly.
    check(
        &setup,
        json!({"command": "view", "path": "/memories/.hidden"}),
        &format!(
            "{LISTING} /memories/.hidden, excluding hidden items and node_modules:\n4K\t/memories/.hidden\n1B\t/memories/.hidden/s.txt"
        ),
        false,
    );
}

#[test]
fn view_file_numbers_lines_and_keeps_crlf() {
    let setup = [("/memories/n.txt", "alpha\r\nbeta\n\tgamma")];
    check(
        &setup,
        json!({"command": "view", "path": "/memories/n.txt"}),
        "Here's the content of /memories/n.txt with line numbers:\n     1\talpha\r\n     2\tbeta\n     3\t\tgamma",
        false,
    );
    check(
        &[("/memories/e.txt", "")],
        json!({"command": "view", "path": "/memories/e.txt"}),
        "Here's the content of /memories/e.txt with line numbers:\n     1\t",
        false,
    );
}

#[test]
fn view_range_is_clamped_at_the_end_and_an_error_elsewhere() {
    let setup = [("/memories/r.txt", "l1\nl2\nl3\nl4\nl5")];
    let head = "Here's the content of /memories/r.txt with line numbers:\n";
    for (range, want) in [
        (json!([2, 3]), format!("{head}     2\tl2\n     3\tl3")),
        (json!([4, -1]), format!("{head}     4\tl4\n     5\tl5")),
        (json!([5, 99]), format!("{head}     5\tl5")),
        (json!([3, 3]), format!("{head}     3\tl3")),
    ] {
        check(
            &setup,
            json!({"command": "view", "path": "/memories/r.txt", "view_range": range}),
            &want,
            false,
        );
    }
    // A start below line 1 is refused, as the error's `1 <= start_line` says (semantics 3; it
    // used to be clamped to 1).
    for range in [
        json!([6, 7]),
        json!([3, 2]),
        json!([1, 0]),
        json!([1, -2]),
        json!([0, 1]),
        json!([-7, 2]),
    ] {
        let (s, e) = (range[0].as_i64().unwrap(), range[1].as_i64().unwrap());
        check(
            &setup,
            json!({"command": "view", "path": "/memories/r.txt", "view_range": range}),
            &format!(
                "Error: Invalid `view_range` parameter: [{s}, {e}]. /memories/r.txt has 5 lines: use [start_line, end_line] with 1 <= start_line <= end_line and start_line <= 5 (an end_line past 5 reads to line 5), or end_line -1 to read to the end."
            ),
            true,
        );
    }
    for range in [
        json!([1]),
        json!([1, 2, 3]),
        json!(["1", "2"]),
        json!("1-2"),
        json!([1.5, 2]),
    ] {
        let input = json!({"command": "view", "path": "/memories", "view_range": range});
        for host in hosts(&input.to_string(), &spec()) {
            let (text, err) = call(&*host, input.clone());
            assert!(err, "{}: {range}: {text}", host.name());
            assert!(
                text.starts_with("Error: `view_range` must be an array of two integers"),
                "{}: {text}",
                host.name()
            );
        }
    }
}

#[test]
fn view_missing_and_the_line_limit() {
    check(
        &[],
        json!({"command": "view", "path": "/memories/nope.txt"}),
        "The path /memories/nope.txt does not exist. Please provide a valid path.",
        true,
    );
    check(
        &[("/memories/f.txt", "x")],
        json!({"command": "view", "path": "/memories/f.txt/under"}),
        "The path /memories/f.txt/under does not exist. Please provide a valid path.",
        true,
    );
    let at_limit = "\n".repeat(999_998);
    check(
        &[("/memories/ok.txt", &at_limit)],
        json!({"command": "view", "path": "/memories/ok.txt", "view_range": [999_999, -1]}),
        "Here's the content of /memories/ok.txt with line numbers:\n999999\t",
        false,
    );
    let over = "\n".repeat(999_999);
    check(
        &[("/memories/huge.txt", &over)],
        json!({"command": "view", "path": "/memories/huge.txt"}),
        "File /memories/huge.txt exceeds maximum line limit of 999,999 lines.",
        true,
    );
}

#[test]
fn create_and_its_errors() {
    let s = check(
        &[],
        json!({"command": "create", "path": "/memories/x/y.txt", "file_text": "\u{feff}hé\r\n"}),
        "File created successfully at: /memories/x/y.txt",
        false,
    );
    assert_eq!(
        file(&s, "/memories/x/y.txt").as_deref(),
        Some("\u{feff}hé\r\n")
    );
    for path in ["/memories/a.txt", "/memories/d"] {
        check(
            &[("/memories/a.txt", "a"), ("/memories/d/f", "f")],
            json!({"command": "create", "path": path, "file_text": "new"}),
            &format!("Error: File {path} already exists"),
            true,
        );
    }
    // The memory root is no file: the answer says what it is and where files go.
    for path in ["/memories", "/memories/"] {
        for setup in [&[][..], &[("/memories/a.txt", "a")][..]] {
            check(
                setup,
                json!({"command": "create", "path": path, "file_text": "new"}),
                "Error: /memories is the memory root directory, which always exists and cannot be a file; create a file inside it, such as /memories/notes.md",
                true,
            );
        }
    }
    let s = check(
        &[("/memories/a.txt", "a")],
        json!({"command": "create", "path": "/memories/a.txt/b", "file_text": "new"}),
        "Error: Cannot create /memories/a.txt/b: /memories/a.txt is a file, not a directory. Choose a path whose parent directories are not files.",
        true,
    );
    assert_eq!(file(&s, "/memories/a.txt").as_deref(), Some("a"));
}

#[test]
fn str_replace_success_shows_a_snippet() {
    let content = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10";
    let s = check(
        &[("/memories/s.txt", content)],
        json!({"command": "str_replace", "path": "/memories/s.txt", "old_str": "l5", "new_str": "A\nB\nC"}),
        "The memory file has been edited.\n     3\tl3\n     4\tl4\n     5\tA\n     6\tB\n     7\tC\n     8\tl6\n     9\tl7",
        false,
    );
    assert_eq!(
        file(&s, "/memories/s.txt").as_deref(),
        Some("l1\nl2\nl3\nl4\nA\nB\nC\nl6\nl7\nl8\nl9\nl10")
    );
    // Multi-line old_str, CRLF kept, `$` literal, omitted new_str deletes.
    let s = check(
        &[("/memories/m.txt", "a\r\nb\r\nc\r\n")],
        json!({"command": "str_replace", "path": "/memories/m.txt", "old_str": "a\r\nb", "new_str": "$&"}),
        "The memory file has been edited.\n     1\t$&\r\n     2\tc\r\n     3\t",
        false,
    );
    assert_eq!(file(&s, "/memories/m.txt").as_deref(), Some("$&\r\nc\r\n"));
    let s = check(
        &[("/memories/d.txt", "keep drop keep")],
        json!({"command": "str_replace", "path": "/memories/d.txt", "old_str": " drop"}),
        "The memory file has been edited.\n     1\tkeep keep",
        false,
    );
    assert_eq!(file(&s, "/memories/d.txt").as_deref(), Some("keep keep"));
}

#[test]
fn str_replace_errors() {
    let setup = [("/memories/s.txt", "x\ny x\nz\nx")];
    check(
        &setup,
        json!({"command": "str_replace", "path": "/memories/s.txt", "old_str": "nope", "new_str": "n"}),
        "No replacement was performed, old_str `nope` did not appear verbatim in /memories/s.txt.",
        true,
    );
    check(
        &setup,
        json!({"command": "str_replace", "path": "/memories/s.txt", "old_str": "x", "new_str": "n"}),
        "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 2, 4. Please ensure it is unique",
        true,
    );
    check(
        &setup,
        json!({"command": "str_replace", "path": "/memories/missing", "old_str": "x", "new_str": "n"}),
        "Error: The path /memories/missing does not exist. Please provide a valid path.",
        true,
    );
    check(
        &[("/memories/d/f", "x")],
        json!({"command": "str_replace", "path": "/memories/d", "old_str": "x", "new_str": "n"}),
        "Error: The path /memories/d does not exist. Please provide a valid path.",
        true,
    );
    let s = check(
        &setup,
        json!({"command": "str_replace", "path": "/memories/s.txt", "old_str": "", "new_str": "n"}),
        "Error: old_str must not be empty. Copy the exact text to replace from a view of /memories/s.txt; to add text use insert.",
        true,
    );
    assert_eq!(file(&s, "/memories/s.txt").as_deref(), Some("x\ny x\nz\nx"));
}

#[test]
fn insert_places_whole_lines() {
    for (content, line, text, want) in [
        ("a\nb\n", 0, "x", "x\na\nb\n"),
        ("a\nb\n", 1, "x\n", "a\nx\nb\n"),
        ("a\nb\n", 2, "x\n", "a\nb\nx\n"),
        ("a\nb", 2, "x", "a\nb\nx"),
        ("a\nb", 2, "x\n", "a\nb\nx\n"),
        ("a\r\nb\r\n", 1, "x\r\n", "a\r\nx\r\nb\r\n"),
        ("", 0, "x\n", "x\n"),
        ("a", 0, "x\ny", "x\ny\na"),
    ] {
        let s = check(
            &[("/memories/i.txt", content)],
            json!({"command": "insert", "path": "/memories/i.txt", "insert_line": line, "insert_text": text}),
            "The file /memories/i.txt has been edited.",
            false,
        );
        assert_eq!(
            file(&s, "/memories/i.txt").as_deref(),
            Some(want),
            "insert {text:?} after line {line} of {content:?}"
        );
    }
}

#[test]
fn insert_errors() {
    for (content, line, n) in [("a\nb\n", 3, 2), ("a\nb", -1, 2), ("", 1, 0)] {
        check(
            &[("/memories/i.txt", content)],
            json!({"command": "insert", "path": "/memories/i.txt", "insert_line": line, "insert_text": "x"}),
            &format!(
                "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
            ),
            true,
        );
    }
    check(
        &[],
        json!({"command": "insert", "path": "/memories/none", "insert_line": 0, "insert_text": "x"}),
        "Error: The path /memories/none does not exist",
        true,
    );
    check(
        &[("/memories/d/f", "x")],
        json!({"command": "insert", "path": "/memories/d", "insert_line": 0, "insert_text": "x"}),
        "Error: The path /memories/d does not exist",
        true,
    );
}

#[test]
fn delete_files_directories_and_never_the_root() {
    let s = check(
        &[
            ("/memories/a/b/c.txt", "c"),
            ("/memories/a/d.txt", "d"),
            ("/memories/e.txt", "e"),
        ],
        json!({"command": "delete", "path": "/memories/a/"}),
        "Successfully deleted /memories/a",
        false,
    );
    assert_eq!(file(&s, "/memories/a/b/c.txt"), None);
    assert_eq!(file(&s, "/memories/a/d.txt"), None);
    assert_eq!(file(&s, "/memories/e.txt").as_deref(), Some("e"));
    check(
        &[],
        json!({"command": "delete", "path": "/memories/none"}),
        "Error: The path /memories/none does not exist",
        true,
    );
    for root in ["/memories", "/memories/", "/memories/.", "/memories//"] {
        let s = check(
            &[("/memories/keep.txt", "k")],
            json!({"command": "delete", "path": root}),
            "Cannot delete the /memories directory itself",
            true,
        );
        assert_eq!(file(&s, "/memories/keep.txt").as_deref(), Some("k"));
    }
}

#[test]
fn rename_files_and_directories() {
    let s = check(
        &[("/memories/a/x.txt", "x"), ("/memories/a/s/y.txt", "y")],
        json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/n/m"}),
        "Successfully renamed /memories/a to /memories/n/m",
        false,
    );
    assert_eq!(file(&s, "/memories/n/m/x.txt").as_deref(), Some("x"));
    assert_eq!(file(&s, "/memories/n/m/s/y.txt").as_deref(), Some("y"));
    assert_eq!(file(&s, "/memories/a/x.txt"), None);
    let (text, _) = same(&s, |host| {
        call(host, json!({"command": "view", "path": "/memories"}))
    });
    assert_eq!(
        text,
        format!(
            "{LISTING} /memories, excluding hidden items and node_modules:\n4K\t/memories\n4K\t/memories/n/\n4K\t/memories/n/m/"
        ),
        "the emptied directory /memories/a is gone"
    );
    let setup = [
        ("/memories/a.txt", "a"),
        ("/memories/b.txt", "b"),
        ("/memories/d/f", "f"),
    ];
    for (old, new, want) in [
        (
            "/memories/a.txt",
            "/memories/b.txt",
            "Error: The destination /memories/b.txt already exists",
        ),
        (
            "/memories/a.txt",
            "/memories/a.txt",
            "Error: The destination /memories/a.txt already exists",
        ),
        (
            "/memories/none",
            "/memories/b.txt",
            "Error: The destination /memories/b.txt already exists",
        ),
        (
            "/memories/a.txt",
            "/memories",
            "Error: The destination /memories already exists",
        ),
        (
            "/memories/none",
            "/memories/z",
            "Error: The path /memories/none does not exist",
        ),
        (
            "/memories",
            "/memories/z",
            "Cannot rename the /memories directory itself",
        ),
        (
            "/memories/",
            "/memories/z",
            "Cannot rename the /memories directory itself",
        ),
        (
            "/memories/d",
            "/memories/d/inner",
            "Error: Cannot rename /memories/d to /memories/d/inner: a directory cannot be moved inside itself",
        ),
        (
            "/memories/b.txt",
            "/memories/a.txt/b.txt",
            "Error: Cannot rename /memories/b.txt to /memories/a.txt/b.txt: /memories/a.txt is a file, not a directory",
        ),
    ] {
        let s = check(
            &setup,
            json!({"command": "rename", "old_path": old, "new_path": new}),
            want,
            true,
        );
        assert_eq!(file(&s, "/memories/a.txt").as_deref(), Some("a"));
        assert_eq!(file(&s, "/memories/d/f").as_deref(), Some("f"));
    }
}

#[test]
fn paths_outside_the_root_and_traversal_are_refused_with_the_raw_path() {
    for path in [
        "/etc/passwd",
        "memories/a",
        "",
        "/memoriesfoo.txt",
        "/memories_backup/x",
    ] {
        check(
            &[],
            json!({"command": "view", "path": path}),
            &format!("Path must start with /memories, got: {path}"),
            true,
        );
    }
    for path in [
        "/memories/../etc/passwd",
        "/memories/a/..",
        "/memories/%2e%2e/x",
        "/memories/%2E%2e%2Fx",
        "/memories/a%2fb",
        "/memories/a%5cb",
        "/memories/..\\x",
        "/memories/%252e%252e/x",
    ] {
        check(
            &[],
            json!({"command": "create", "path": path, "file_text": "x"}),
            &format!("Path {path} would escape /memories directory"),
            true,
        );
    }
    // rename checks both paths.
    check(
        &[("/memories/a", "a")],
        json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/../a"}),
        "Path /memories/../a would escape /memories directory",
        true,
    );
}

#[test]
fn malformed_calls_get_clear_errors() {
    for (input, starts) in [
        (
            json!({"path": "/memories"}),
            "Error: The input has no \"command\" field",
        ),
        (
            json!({"command": "frobnicate"}),
            "Error: Unknown command \"frobnicate\"",
        ),
        (json!({"command": 7}), "Error: \"command\" must be a string"),
        (
            json!({"command": "create", "path": "/memories/a"}),
            "Error: The create command needs a \"file_text\" string",
        ),
        (
            json!({"command": "view", "path": 3}),
            "Error: \"path\" must be a string, got a number",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": "x"}),
            "Error: \"insert_line\" must be a whole number of lines",
        ),
        (
            json!([1, 2]),
            "Error: Expected a tool_use block or a memory tool input object",
        ),
        (
            json!({"type": "tool_use", "id": "t", "name": "bash", "input": {}}),
            "Error: Tool 'bash' not found",
        ),
    ] {
        for host in hosts(&input.to_string(), &spec()) {
            let name = host.name();
            let (text, err) = call(&*host, input.clone());
            assert!(err, "{name}: {input}");
            assert!(text.starts_with(starts), "{name}: {input}: {text}");
            assert_eq!(host.log_problem(1), None, "{name}: {input}");
        }
    }
}

#[test]
fn a_custom_root_is_used_in_every_message() {
    let other =
        mnemo::testing::intake::Intake::new("/other", mnemo::Profile::Spec, Default::default())
            .expect("valid root");
    let sled = SledServer::new(&other);
    assert_eq!(sled.server.root(), "/other");
    let hosts: [Box<dyn Host>; 2] = [Box::new(PureServer::with(&other)), Box::new(sled)];
    for server in &hosts {
        custom_root_messages(&**server);
    }
    let client = crate::support::TempStore::new().client();
    for bad in ["relative", "/", "/a/../b"] {
        assert!(
            mnemo::MnemoMemoryToolServer::builder(client.clone())
                .root(bad)
                .build()
                .is_err(),
            "{bad}"
        );
        assert!(
            mnemo::testing::intake::Intake::new(bad, mnemo::Profile::Spec, Default::default())
                .is_err(),
            "{bad}"
        );
    }
}

/// The answers of a server under root `/other` name that root.
fn custom_root_messages(server: &dyn Host) {
    assert_eq!(
        call(server, json!({"command": "view", "path": "/memories"})),
        (
            "Path must start with /other, got: /memories".to_string(),
            true
        )
    );
    assert_eq!(
        call(server, json!({"command": "delete", "path": "/other"})),
        (
            "Cannot delete the /other directory itself".to_string(),
            true
        )
    );
    assert_eq!(
        call(
            server,
            json!({"command": "create", "path": "/other/x", "file_text": ""})
        ),
        ("File created successfully at: /other/x".to_string(), false)
    );
}
