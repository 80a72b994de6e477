//! Limits a server enforces: the largest memory file and the optional cap on a file view. Both
//! are recorded with each call, so the store verifies under the limits the call ran under. The
//! answers run on the pure core and on a sled store alike; the large-file case is about storage
//! and runs on sled alone.

use mnemo::Profile;
use mnemo::testing::DEFAULT_MAX_FILE_BYTES;
use mnemo::testing::intake::Intake;
use mnemo::tool::Limits;
use serde_json::json;

use crate::support::{Host, PureServer, TempStore, both, call};

/// The settings of a server in `profile` with `limits` and the default root.
fn with_limits(limits: Limits, profile: Profile) -> Intake {
    Intake::new("/memories", profile, limits).expect("a valid root")
}

#[test]
fn files_cannot_grow_past_the_limit_by_any_command() {
    let limits = Limits {
        max_file_bytes: 10,
        view_max_chars: None,
        ..Limits::default()
    };
    for server in both(&with_limits(limits, Profile::Spec)) {
        files_cannot_grow(&*server);
    }
}

fn files_cannot_grow(server: &dyn Host) {
    let big = "x".repeat(11);
    let (text, err) = call(
        server,
        json!({"command": "create", "path": "/memories/a", "file_text": big}),
    );
    assert!(err);
    assert_eq!(
        text,
        "Error: /memories/a would hold 11 bytes, over the limit of 10 bytes for one memory file. Split the content across several files."
    );
    assert_eq!(
        call(
            server,
            json!({"command": "create", "path": "/memories/a", "file_text": "0123456789"})
        ),
        (
            "File created successfully at: /memories/a".to_string(),
            false
        )
    );
    let (_, err) = call(
        server,
        json!({"command": "str_replace", "path": "/memories/a", "old_str": "0", "new_str": "ab"}),
    );
    assert!(err, "str_replace past the limit");
    let (_, err) = call(
        server,
        json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "z"}),
    );
    assert!(err, "insert past the limit");
    assert_eq!(
        server.file("/memories/a").as_deref(),
        Some("0123456789"),
        "refused edits change nothing"
    );
    assert_eq!(server.log_problem(4), None, "{}", server.name());
}

#[test]
fn the_default_limit_is_documented_and_generous() {
    assert_eq!(DEFAULT_MAX_FILE_BYTES, 16 * 1024 * 1024);
    assert_eq!(
        Limits::default().view_max_chars,
        None,
        "the view cap is off by default"
    );
}

#[test]
fn a_capped_view_stops_at_a_line_and_says_how_to_page() {
    for profile in [Profile::Spec, Profile::PythonSdk, Profile::TypescriptSdk] {
        let limits = Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            view_max_chars: Some(30),
            ..Limits::default()
        };
        for server in both(&with_limits(limits, profile)) {
            capped_views(&*server, profile);
        }
    }
}

fn capped_views(server: &dyn Host, profile: Profile) {
    let content = (1..=10)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    call(
        server,
        json!({"command": "create", "path": "/memories/f.txt", "file_text": content}),
    );
    // Each numbered line is 6 + 1 + 6 = 13 characters, plus a newline between lines: two fit.
    let (text, err) = call(
        server,
        json!({"command": "view", "path": "/memories/f.txt"}),
    );
    assert!(!err);
    assert_eq!(
        text,
        "Here's the content of /memories/f.txt with line numbers:\n     1\tline 1\n     2\tline 2\n[Output truncated at 30 characters: showing lines 1-2 of the 10 in the file. Use view_range [3, -1] to read on.]",
        "{profile:?}"
    );
    // Paging on from where it stopped works and is capped the same way.
    let (text, _) = call(
        server,
        json!({"command": "view", "path": "/memories/f.txt", "view_range": [9, -1]}),
    );
    assert_eq!(
        text,
        "Here's the content of /memories/f.txt with line numbers:\n     9\tline 9\n    10\tline 10"
    );
    // A single line longer than the cap is cut rather than dropped.
    call(
        server,
        json!({"command": "create", "path": "/memories/long.txt", "file_text": "y".repeat(100)}),
    );
    let (text, _) = call(
        server,
        json!({"command": "view", "path": "/memories/long.txt"}),
    );
    assert!(
        text.contains(&format!("     1\t{}\n[Output truncated", "y".repeat(23))),
        "{text}"
    );
    // It says that the rest of that line cannot be viewed under the cap, and suggests no
    // range past the end of the file.
    assert!(
        text.ends_with("line 1 is 100 bytes long, more than a view under this limit shows, so only its start is shown and no view shows the rest of it; to change the line, str_replace a part of it you can see. It is the last line asked for.]"),
        "{text}"
    );
    // With lines after it, the range it suggests reads them.
    call(
        server,
        json!({"command": "create", "path": "/memories/long2.txt", "file_text": format!("{}\nshort\n", "y".repeat(100))}),
    );
    let (text, _) = call(
        server,
        json!({"command": "view", "path": "/memories/long2.txt"}),
    );
    assert!(
        text.ends_with("Use view_range [2, -1] to read on.]"),
        "{text}"
    );
    let (text, is_error) = call(
        server,
        json!({"command": "view", "path": "/memories/long2.txt", "view_range": [2, -1]}),
    );
    assert!(!is_error && text.contains("     2\tshort"), "{text}");
    // A range cut by the cap counts the file's lines and pages on within the range asked
    // for (a 4-line file viewed as [1, 3] used to say "showing lines 1-1 of 3").
    call(
        server,
        json!({"command": "create", "path": "/memories/four.txt", "file_text": "line 1\nline 2\nline 3\nline 4"}),
    );
    let (text, _) = call(
        server,
        json!({"command": "view", "path": "/memories/four.txt", "view_range": [1, 3]}),
    );
    assert!(
        text.ends_with("     2\tline 2\n[Output truncated at 30 characters: showing lines 1-2 of the 4 in the file. Use view_range [3, 3] to read on.]"),
        "{text}"
    );
    assert_eq!(server.log_problem(10), None, "{}", server.name());
}

/// The view cap bounds a directory listing too: 3,000 files under a cap of 1,000 characters
/// list about that much (they used to list 78,541), and the note says how many entries are
/// shown and which view lists the rest.
#[test]
fn a_capped_listing_stops_at_the_cap_and_names_a_view_that_lists_the_rest() {
    let limits = Limits {
        view_max_chars: Some(1000),
        ..Limits::default()
    };
    let capped = with_limits(limits, Profile::Spec);
    let server = PureServer::with(&capped);
    for i in 0..3000 {
        let (_, err) = call(
            &server,
            json!({"command": "create", "path": format!("/memories/d{}/note-{i:04}.md", i % 30), "file_text": "x"}),
        );
        assert!(!err);
    }
    let (text, err) = call(&server, json!({"command": "view", "path": "/memories"}));
    assert!(!err, "{text}");
    let (listing, note) = text
        .rsplit_once("\n[Listing truncated at 1000 characters: ")
        .expect("a note");
    let entries: Vec<&str> = listing.lines().skip(2).collect();
    let counted: usize = entries.iter().map(|l| l.chars().count() + 1).sum();
    assert!(
        counted <= 1000 && counted > 900,
        "{counted} characters of entries"
    );
    assert_eq!(
        note,
        format!(
            "showing {} of 3030 entries. View a subdirectory, such as /memories/d0, to list what it holds, or view a file by its path.]",
            entries.len()
        )
    );
    // The subdirectory it names lists on (under the same cap).
    let (text, _) = call(&server, json!({"command": "view", "path": "/memories/d0"}));
    assert!(text.contains("/memories/d0/note-0000.md"), "{text}");
    // Without a cap the listing is whole.
    let whole = server.sharing(&with_limits(Limits::default(), Profile::Spec));
    let (text, _) = call(&*whole, json!({"command": "view", "path": "/memories"}));
    assert_eq!(text.lines().count(), 3032);
    assert_eq!(server.log_problem(3003), None);
}

/// Large files fill the writer's index changes fast: they are handed to the background thread
/// about every `INDEX_BATCH_BYTES` (calls would wait for it once `INDEX_OVERFLOW` times that were
/// held; on this machine it keeps up). Nothing may be lost on the way, and every file reads back
/// whole.
#[test]
fn large_files_written_faster_than_the_index_batches_all_read_back() {
    let s = TempStore::new();
    let server = s.server(); // buffered: calls do not wait for fsyncs, so they outpace sled
    let size = 512 * 1024;
    let files = 2 * mnemo::testing::INDEX_OVERFLOW * mnemo::testing::INDEX_BATCH_BYTES / size;
    for i in 0..files {
        let text = format!("{i:08}").repeat(size / 8);
        let (out, is_error) = call(
            &server,
            json!({"command": "create", "path": format!("/memories/big/{i}"), "file_text": text}),
        );
        assert!(!is_error, "{out}");
    }
    for i in (0..files).step_by(7) {
        let record = server
            .client()
            .record(&format!("/memories/big/{i}"))
            .expect("read")
            .expect("the file exists");
        assert_eq!(record.content.len(), size);
        assert!(record.content.starts_with(&format!("{i:08}")));
    }
    let report = server.client().verify().expect("verify");
    assert!(report.is_intact(), "{:?}", report.violations);
}
