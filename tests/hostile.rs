//! Hostile input. The memory tool's input may be steered by prompt injection, so this throws
//! everything at it: a generated corpus of traversal and malformed paths through every path field of
//! every command in both profiles, malformed calls and lines that are not JSON, the same through the
//! `mnemo tool` binary, and a proptest over arbitrary JSON values.
//!
//! The invariants, everywhere: nothing panics; a path outside the root or one that traverses gets
//! the profile's exact refusal; no file ever lands outside the root; every call, valid or not, is
//! one event; and the log verifies intact afterwards.
//!
//! What the crate does with look-alike characters: only `/` separates segments (and `\` only for the
//! traversal check), and there is no Unicode normalisation, so U+FF0F FULLWIDTH SOLIDUS, U+2215
//! DIVISION SLASH, U+2044 FRACTION SLASH, U+FF0E FULLWIDTH FULL STOP, U+2024 ONE DOT LEADER and the
//! like are ordinary characters of one name: `/memories/／..／etc` is a single file named `／..／etc`
//! directly under the root. Overlong UTF-8 escapes (`%c0%ae`) do not decode to UTF-8, so they stay
//! literal names too. `look_alikes_are_ordinary_names_inside_the_root` pins this.
//!
//! Every case runs on the pure core over an in-memory tree; a sample of them (every fifth path of
//! each class, the malformed cases and proptest cases the hash picks) also through a live server
//! over sled, and a sample through the binary.
//!
//! `MNEMO_HOSTILE_CASES` sets the proptest's case count (default 64).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use mnemo::Profile;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Number, Value, json};

use crate::support::{
    Host, PureServer, SledServer, TempStore, in_binary_sample, in_sled_sample, run_mnemo,
    run_mnemo_bytes, sample_all, settings,
};

const ROOT: &str = "/memories";
const PROFILES: [Profile; 3] = [Profile::Spec, Profile::PythonSdk, Profile::TypescriptSdk];
const COMMANDS: [&str; 6] = mnemo::testing::tool::COMMAND_NAMES;
const VALID_COMMANDS: &str = "view, create, str_replace, insert, delete, rename";

// ---------------------------------------------------------------------------------------------
// Shared checks
// ---------------------------------------------------------------------------------------------

/// A live server in `profile` over a fresh sled store.
fn sled(profile: Profile) -> SledServer {
    SledServer::new(&settings(profile))
}

/// The pure core in `profile` over an in-memory tree.
fn pure(profile: Profile) -> PureServer {
    PureServer::with(&settings(profile))
}

/// Both hosts in `profile`, for the tests small enough to run whole on each.
fn both(profile: Profile) -> [Box<dyn Host>; 2] {
    crate::support::both(&settings(profile))
}

/// A live server in `profile` over the store at `path`, written by the binary.
fn server_at(path: &Path, profile: Profile) -> mnemo::MnemoMemoryToolServer {
    let client = crate::support::open_client(path, "test-agent", mnemo::Durability::Buffered);
    mnemo::MnemoMemoryToolServer::builder(client)
        .profile(profile)
        .build()
        .expect("the default root is valid")
}

/// A `tool_result` is an object with exactly `type`, `tool_use_id`, `content` and optionally
/// `is_error: true`. Returns (tool_use_id, content, is_error).
fn well_formed(out: &Value) -> Result<(String, String, bool), String> {
    let Value::Object(map) = out else {
        return Err(format!("the result is not an object: {out}"));
    };
    for key in map.keys() {
        if !["type", "tool_use_id", "content", "is_error"].contains(&key.as_str()) {
            return Err(format!("the result has an unexpected key {key:?}"));
        }
    }
    if map.get("type") != Some(&json!("tool_result")) {
        return Err(format!(
            "type is not \"tool_result\": {:?}",
            map.get("type")
        ));
    }
    let Some(Value::String(id)) = map.get("tool_use_id") else {
        return Err(format!(
            "tool_use_id is not a string: {:?}",
            map.get("tool_use_id")
        ));
    };
    let Some(Value::String(content)) = map.get("content") else {
        return Err("content is not a string".into());
    };
    if content.is_empty() {
        return Err("content is empty".into());
    }
    let is_error = match map.get("is_error") {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(other) => return Err(format!("is_error must be absent or true, got {other}")),
    };
    Ok((id.clone(), content.clone(), is_error))
}

/// Text for a failure message: the start of a long string, escaped.
fn short(text: &str) -> String {
    let head: String = text.chars().take(160).collect();
    if head.len() < text.len() {
        format!("{head:?}... ({} bytes)", text.len())
    } else {
        format!("{head:?}")
    }
}

/// Whether a stored record path is canonical and inside the root: `/memories/` then non-empty
/// segments, none `.` or `..` (split on `/` and `\`), no control characters.
fn record_path_problem(path: &str) -> Option<String> {
    let Some(rest) = path.strip_prefix("/memories/") else {
        return Some(format!("record {} is outside /memories/", short(path)));
    };
    if rest.split('/').any(|s| s.is_empty() || s == ".") {
        return Some(format!("record {} is not canonical", short(path)));
    }
    if rest.split(['/', '\\']).any(|s| s == "..") {
        return Some(format!("record {} has a .. segment", short(path)));
    }
    if path.chars().any(char::is_control) {
        return Some(format!("record {} has a control character", short(path)));
    }
    None
}

/// After a run: every record is inside the root, the log holds one event per call and answers
/// again as it did (for a store, `verify` is intact), and nothing but the store was written to the
/// store's temporary directory.
fn final_checks(host: &dyn Host, calls: u64) -> Vec<String> {
    let mut problems: Vec<String> = host
        .files()
        .iter()
        .filter_map(|r| record_path_problem(&r.path))
        .collect();
    problems.extend(host.log_problem(calls));
    problems.extend(host.store_dir().and_then(stray_files));
    let name = host.name();
    problems
        .into_iter()
        .map(|p| format!("{name}: {p}"))
        .collect()
}

/// What the temporary directory `dir` holds besides the store, if anything.
fn stray_files(dir: &Path) -> Option<String> {
    let entries: Vec<String> = std::fs::read_dir(dir)
        .expect("list the temporary directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    (entries != ["store.mnemo.db"]).then(|| format!("the temporary directory holds {entries:?}"))
}

fn assert_no_problems(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s), first ones:\n  {}",
        problems.len(),
        problems
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// 1. The path corpus
// ---------------------------------------------------------------------------------------------

/// What the crate must do with a path. `paths.rs` checks in this order: outside the root, then
/// traversal, then control characters and length; a path is labelled by the first rule it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Not the root and not under it: `Path must start with /memories, got: {path}`.
    Outside,
    /// Under the root as text, but traverses: `Path {path} would escape /memories directory`.
    Escape,
    /// A control character: a clear `Error: ` message that names it.
    Control,
    /// A bidi control or a zero-width (default-ignorable) character: a clear `Error: ` message
    /// that names its code point, in the style of the control-character one.
    Invisible,
    /// Over 4096 bytes, or a segment over 255: a clear `Error: ` message with the limits.
    TooLong,
    /// A spelling of the root itself: never deleted or renamed.
    Root,
    /// An ordinary name under the root (look-alikes, literal `%`, deep nesting, boundary lengths).
    Inside,
}

#[derive(Default)]
struct Corpus(BTreeMap<String, Class>);

impl Corpus {
    fn add(&mut self, path: impl Into<String>, class: Class) {
        let path = path.into();
        if let Some(before) = self.0.insert(path.clone(), class) {
            assert_eq!(before, class, "the corpus labels {} twice", short(&path));
        }
    }
}

/// `"%2e"` percent-encoded `extra` more times (`%252e`, `%25252e`, ...).
fn encoded_dot(extra: usize) -> String {
    format!("%{}2e", "25".repeat(extra))
}

/// A path under the root of exactly `len` bytes, in segments of at most 200 bytes.
fn path_of_len(len: usize) -> String {
    let mut p = ROOT.to_string();
    while p.len() + 201 + 2 <= len {
        p.push('/');
        p.push_str(&"b".repeat(200));
    }
    let rest = len - p.len();
    p.push('/');
    p.push_str(&"c".repeat(rest - 1));
    assert_eq!(p.len(), len);
    p
}

/// The corpus, built from parts: every path with the class the crate must give it.
fn corpus() -> Vec<(String, Class)> {
    use Class::*;
    let mut c = Corpus::default();

    // `..` in every position below the root (start, middle, end, repeated), joined by `/` or `\`,
    // with and without a trailing separator.
    let mut dotted: Vec<Vec<&str>> = vec![
        vec![".."],
        vec!["..", "x"],
        vec!["..", "..", "etc", "passwd"],
        vec!["a", ".."],
        vec!["a", "..", "b"],
        vec!["a", "b", "..", "..", "..", "etc"],
        vec!["..", "memories", "x"],
        vec![".", ".."],
        vec!["..", "."],
        vec!["a", ".", "..", "b"],
        vec!["", "..", "", "x"],
    ];
    for n in [2, 3, 16, 1000] {
        dotted.push(vec![".."; n]);
    }
    let mut climb = vec!["a"; 5];
    climb.extend([".."; 6]);
    climb.push("etc");
    dotted.push(climb);
    for segs in &dotted {
        for sep in ["/", "\\"] {
            let rel = segs.join(sep);
            c.add(format!("{ROOT}/{rel}"), Escape);
            c.add(format!("{ROOT}/{rel}{sep}"), Escape);
        }
    }
    for p in [
        "/memories/\\..\\",
        "/memories/x\\..\\..\\etc",
        "/memories/..\\..\\..\\windows\\system32",
        "/memories/a/..\\b",
        "/memories/a\\../b",
    ] {
        c.add(p, Escape);
    }
    // `..` before the root: refused as outside, which paths.rs checks first.
    for p in [
        "..",
        "../memories/x",
        "/..",
        "/../memories/x",
        "/../../../../etc/passwd",
        "..\\memories\\x",
        "/memories\\..\\x",
        "/tmp/../memories/x",
    ] {
        c.add(p, Outside);
    }

    // Percent-encoded dots and separators, any case, encoded up to seven times.
    let mut dots: Vec<String> = [
        "%2e%2e",
        "%2E%2e",
        "%2e%2E",
        "%2E%2E",
        ".%2e",
        ".%2E",
        "%2e.",
        "%2E.",
        ".%252e",
        "%252e.",
        "%252E%252e",
        "%%32%65%%32%65",
        "%25%32%65%25%32%65",
    ]
    .map(str::to_string)
    .to_vec();
    for extra in 1..=6 {
        dots.push(format!("{0}{0}", encoded_dot(extra)));
    }
    let seps = [
        "/", "\\", "%2f", "%2F", "%5c", "%5C", "%252f", "%255C", "%25252f",
    ];
    for d in &dots {
        c.add(format!("{ROOT}/{d}"), Escape);
        for s in seps {
            c.add(format!("{ROOT}/{d}{s}etc{s}passwd"), Escape);
            c.add(format!("{ROOT}/a{s}{d}{s}{d}{s}x"), Escape);
        }
    }
    for s in &seps[2..] {
        c.add(format!("{ROOT}/a{s}b"), Escape);
        c.add(format!("{ROOT}/{s}"), Escape);
    }

    // Absolute and relative paths outside the root, and near-misses of its name.
    let outside_prefixes = [
        "",
        "/",
        "/etc",
        "/memoriesX",
        "/memories_backup",
        "/memories.bak",
        "/memories.",
        "/memories..",
        "/memories~",
        "//memories",
        " /memories",
        "/ memories",
        "memories",
        "./memories",
        "~/memories",
        "/Memories",
        "/MEMORIES",
        "/memorie",
        "\\memories",
        "/memories\\",
        "C:\\memories",
        "file:///memories",
        "%2fmemories",
        "/memories%2f",
        "/memories\u{FF0F}",
        "/memories\u{2215}",
        "\u{FF0F}memories",
        "\0/memories",
        "\n/memories",
        "/memories\0",
        "/memories\n",
    ];
    for prefix in outside_prefixes {
        for suffix in ["", "/x", "/../x", "/passwd"] {
            c.add(format!("{prefix}{suffix}"), Outside);
        }
    }
    for p in [
        "/etc/passwd",
        "/etc/shadow",
        "/proc/self/environ",
        "/root/.ssh/id_rsa",
        "/memories_backup/x",
        "//memories/x",
        " /memories/x",
        "memories/x",
        "./memories",
    ] {
        c.add(p, Outside);
    }

    // The root's own spellings.
    for p in [
        "/memories",
        "/memories/",
        "/memories//",
        "/memories/.",
        "/memories/./",
        "/memories/./.",
        "/memories/.//./",
        "/memories///",
    ] {
        c.add(p, Root);
    }
    c.add(format!("{ROOT}{}", "/.".repeat(10)), Root);
    c.add(format!("{ROOT}/{}", "./".repeat(1000)), Root);

    // Control characters anywhere below the root.
    for ch in [
        '\0', '\u{1}', '\u{7}', '\u{8}', '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{1b}', '\u{7f}',
        '\u{80}', '\u{85}', '\u{9f}',
    ] {
        c.add(format!("{ROOT}/a{ch}b"), Control);
        c.add(format!("{ROOT}/{ch}"), Control);
        c.add(format!("{ROOT}/notes.txt{ch}"), Control);
        c.add(format!("{ROOT}/{ch}/x"), Control);
        c.add(format!("{ROOT}/a/b{ch}c/d"), Control);
    }

    // Bidi controls and invisible characters anywhere below the root: a listing would show such
    // a name as another one (`a\u{202E}txt.exe` shows as `aexe.txt`).
    for ch in [
        '\u{202A}',
        '\u{202B}',
        '\u{202C}',
        '\u{202D}',
        '\u{202E}',
        '\u{2066}',
        '\u{2067}',
        '\u{2068}',
        '\u{2069}',
        '\u{200E}',
        '\u{200F}',
        '\u{061C}',
        '\u{200B}',
        '\u{200C}',
        '\u{200D}',
        '\u{2060}',
        '\u{2062}',
        '\u{FEFF}',
        '\u{00AD}',
        '\u{180E}',
        '\u{034F}',
        '\u{2028}',
        '\u{2029}',
        '\u{3164}',
        '\u{115F}',
        '\u{FE0F}',
        '\u{E0041}',
        '\u{E0100}',
    ] {
        c.add(format!("{ROOT}/a{ch}b"), Invisible);
        c.add(format!("{ROOT}/{ch}"), Invisible);
        c.add(format!("{ROOT}/notes.txt{ch}"), Invisible);
        c.add(format!("{ROOT}/{ch}/x"), Invisible);
        c.add(format!("{ROOT}/a/b{ch}c/d"), Invisible);
    }
    for p in [
        "/memories/..\u{200B}",
        "/memories/\u{200B}..",
        "/memories/\u{FEFF}../x",
        "/memories/\u{202E}txt.exe",
        "/memories/a\u{2028}b",
        "/memories/report\u{202E}fdp.exe",
        "/memories/\u{2067}notes\u{2069}.md",
    ] {
        c.add(p, Invisible);
    }

    // Lengths: names over 255 bytes, paths over 4096, and the boundaries that are still fine.
    for name in [
        "a".repeat(256),
        "a".repeat(1000),
        "é".repeat(128),
        "😀".repeat(64),
        "z".repeat(100_000),
    ] {
        c.add(format!("{ROOT}/{name}"), TooLong);
    }
    c.add(format!("{ROOT}/x/{}/y", "a".repeat(256)), TooLong);
    c.add(path_of_len(4097), TooLong);
    c.add(path_of_len(65_536), TooLong);
    c.add(format!("{ROOT}/{}f", "a/".repeat(2100)), TooLong);
    c.add(path_of_len(4096), Inside);
    c.add(format!("{ROOT}/{}", "a".repeat(255)), Inside);
    c.add(format!("{ROOT}/{}a", "é".repeat(127)), Inside);

    // Deep nesting that is still within the limits. (Nesting as deep as the 4096-byte limit
    // allows, about 2,040 segments, is exercised in a child process by
    // `a_file_nested_as_deep_as_paths_allow_can_be_listed`: listing it overflows the writer's
    // stack in a debug build and aborts the whole process.)
    c.add(format!("{ROOT}/{}f.txt", "d/".repeat(1000)), Inside);
    c.add(format!("{ROOT}/{}f", "e/".repeat(1500)), Inside);
    c.add(format!("{ROOT}/{}x", "./".repeat(1000)), Inside);

    // Unicode look-alikes of `/`, `\` and `.`: ordinary characters of one name.
    for slash in [
        '\u{FF0F}', '\u{2215}', '\u{2044}', '\u{29F8}', '\u{FF3C}', '\u{29F5}', '\u{FE68}',
        '\u{2216}',
    ] {
        c.add(format!("{ROOT}/{slash}..{slash}etc{slash}passwd"), Inside);
        c.add(format!("{ROOT}/..{slash}x"), Inside);
        c.add(format!("{ROOT}/a{slash}..{slash}..{slash}b"), Inside);
        c.add(format!("{ROOT}{slash}x"), Outside);
    }
    for dot in ['\u{FF0E}', '\u{2024}', '\u{FE52}', '\u{3002}', '\u{B7}'] {
        c.add(format!("{ROOT}/{dot}{dot}"), Inside);
        c.add(format!("{ROOT}/{dot}{dot}/x"), Inside);
        c.add(format!("{ROOT}/.{dot}/x"), Inside);
    }
    // Other odd but ordinary names: visible non-ASCII text and spaces, literal and overlong
    // percent escapes, dots that are not a `..` segment, shell and markup text.
    for p in [
        "/memories/\u{00A0}nbsp",
        "/memories/\u{3000}ideographic space",
        "/memories/日本語のメモ.md",
        "/memories/ا\u{0644}عربية.txt",
        "/memories/%c0%ae%c0%ae/x",
        "/memories/%c0%af",
        "/memories/%e0%80%ae%e0%80%ae",
        "/memories/%u002e%u002e/x",
        "/memories/%00",
        "/memories/%2e",
        "/memories/50%25",
        "/memories/%",
        "/memories/%2",
        "/memories/%zz",
        "/memories/...",
        "/memories/..../x",
        "/memories/.hidden",
        "/memories/a..b",
        "/memories/..a",
        "/memories/ ..",
        "/memories/.. ",
        "/memories/..;/x",
        "/memories/C:\\Windows",
        "/memories/\\\\server\\share",
        "/memories/a\\b",
        "/memories/~",
        "/memories/$HOME",
        "/memories/`id`",
        "/memories/<script>",
        "/memories/'; DROP TABLE",
        "/memories/node_modules/x",
    ] {
        c.add(p, Inside);
    }
    c.0.into_iter().collect()
}

const FIELDS: [&str; 7] = [
    "view.path",
    "create.path",
    "str_replace.path",
    "insert.path",
    "delete.path",
    "rename.old_path",
    "rename.new_path",
];

const SEED: &str = "/memories/seed.txt";

/// A call that puts `path` in field `field` (an index into [`FIELDS`]); every other field is valid.
fn call_for(field: usize, path: &str) -> Value {
    match field {
        0 => json!({"command": "view", "path": path}),
        1 => json!({"command": "create", "path": path, "file_text": "hostile\n"}),
        2 => {
            json!({"command": "str_replace", "path": path, "old_str": "hostile", "new_str": "tamed"})
        }
        3 => json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x\n"}),
        4 => json!({"command": "delete", "path": path}),
        5 => {
            json!({"command": "rename", "old_path": path, "new_path": MOVED})
        }
        _ => json!({"command": "rename", "old_path": SEED, "new_path": path}),
    }
}

/// Checks the answer to `call_for(field, path)` against the path's class.
fn check_path_answer(
    profile: Profile,
    field: usize,
    path: &str,
    class: Class,
    content: &str,
    is_error: bool,
) -> Result<(), String> {
    // Both SDK profiles echo the path as sent; the TypeScript SDK's runner puts `Error: ` before
    // every error.
    let python = profile != Profile::Spec;
    let runner = |want: String| {
        if profile == Profile::TypescriptSdk && !want.starts_with("Error: ") {
            format!("Error: {want}")
        } else {
            want
        }
    };
    let want_exact = |want: String| -> Result<(), String> {
        let want = runner(want);
        if is_error && content == want {
            Ok(())
        } else {
            Err(format!(
                "want is_error with {}, got is_error={is_error} {}",
                short(&want),
                short(content)
            ))
        }
    };
    let want_error_with = |parts: &[&str]| -> Result<(), String> {
        if is_error && content.starts_with("Error: ") && parts.iter().all(|p| content.contains(p)) {
            Ok(())
        } else {
            Err(format!(
                "want an `Error: ` result naming {parts:?}, got is_error={is_error} {}",
                short(content)
            ))
        }
    };
    match class {
        Class::Outside => want_exact(format!("Path must start with {ROOT}, got: {path}")),
        Class::Escape => want_exact(format!("Path {path} would escape {ROOT} directory")),
        Class::Control => {
            want_error_with(&["contains the control character", "/memories/notes.txt"])?;
            // The message quotes the path escaped: no raw control character reaches the model.
            if content.chars().any(char::is_control) {
                return Err(format!(
                    "the message carries a raw control character: {}",
                    short(content)
                ));
            }
            Ok(())
        }
        Class::Invisible => {
            want_error_with(&[
                "contains the invisible character U+",
                "bidi control or zero-width",
                "/memories/notes.txt",
            ])?;
            // The message quotes the path escaped: no raw invisible character reaches the model.
            if content.chars().any(|c| {
                matches!(u32::from(c), 0x00AD | 0x034F | 0x061C | 0x115F | 0x180E | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE0F | 0xFEFF | 0xE0000..=0xE0FFF)
            }) {
                return Err(format!(
                    "the message carries a raw invisible character: {}",
                    short(content)
                ));
            }
            Ok(())
        }
        Class::TooLong => want_error_with(&["is too long", "4096 bytes", "names to 255"]),
        Class::Root => {
            let shown = if python { path } else { ROOT };
            match field {
                0 => {
                    let want = format!(
                        "Here're the files and directories up to 2 levels deep in {shown}, excluding hidden items"
                    );
                    if !is_error && content.starts_with(&want) {
                        Ok(())
                    } else {
                        Err(format!("want the root listing, got {}", short(content)))
                    }
                }
                1 if python => want_exact(format!("File {path} already exists")),
                1 => want_exact(format!(
                    "Error: {ROOT} is the memory root directory, which always exists and cannot be a file; create a file inside it, such as {ROOT}/notes.md"
                )),
                2 if python => want_exact(format!("The path {path} is not a file.")),
                2 => want_exact(format!(
                    "Error: The path {ROOT} does not exist. Please provide a valid path."
                )),
                3 if python => want_exact(format!("The path {path} is not a file.")),
                3 => want_exact(format!("Error: The path {ROOT} does not exist")),
                4 => want_exact(format!("Cannot delete the {ROOT} directory itself")),
                5 => want_exact(format!("Cannot rename the {ROOT} directory itself")),
                _ if python => want_exact(format!("The destination {path} already exists")),
                _ => want_exact(format!("Error: The destination {ROOT} already exists")),
            }
        }
        Class::Inside => {
            if content.starts_with("Path must start with")
                || content.contains("would escape")
                || content.starts_with("Error: Path ")
            {
                Err(format!("an ordinary path was refused: {}", short(content)))
            } else {
                Ok(())
            }
        }
    }
}

/// Sends `input` (as a bare input on even calls, as a `tool_use` block on odd ones), counts the
/// call and checks the result's shape. Returns (content, is_error) when it is well formed.
fn send(
    server: &dyn Host,
    input: &Value,
    calls: &mut u64,
    problems: &mut Vec<String>,
) -> Option<(String, bool)> {
    let id = format!("toolu_hostile_{calls}");
    let as_block = *calls % 2 == 1;
    let out = if as_block {
        server.handle(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}))
    } else {
        server.handle(input)
    };
    *calls += 1;
    match well_formed(&out) {
        Ok((got_id, content, is_error)) => {
            if as_block && got_id != id {
                problems.push(format!("tool_use_id {got_id:?} is not the block's {id:?}"));
            }
            Some((content, is_error))
        }
        Err(e) => {
            problems.push(format!("{e} for {}", short(&input.to_string())));
            None
        }
    }
}

/// The canonical form of a path under the root, as paths.rs documents it: empty and `.` segments
/// dropped.
fn canonical(raw: &str) -> String {
    let segments: Vec<&str> = raw
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    format!("/{}", segments.join("/"))
}

const MOVED: &str = "/memories/moved/target.txt";

/// Every file a corpus run may leave: the seed, the rename target, and the ordinary paths.
fn allowed_records(corpus: &[(String, Class)]) -> BTreeSet<String> {
    let mut allowed: BTreeSet<String> = corpus
        .iter()
        .filter(|(_, class)| *class == Class::Inside)
        .map(|(path, _)| canonical(path))
        .collect();
    allowed.extend([SEED.to_string(), MOVED.to_string()]);
    allowed
}

/// Records that are not where a corpus run may put files.
fn unexpected_records(server: &dyn Host, allowed: &BTreeSet<String>) -> Vec<String> {
    server
        .files()
        .iter()
        .filter(|r| !allowed.contains(&r.path))
        .map(|r| format!("{}: unexpected record {}", server.name(), short(&r.path)))
        .collect()
}

/// Every fifth path of each class (the first one included, so no class is left out): the part
/// of the corpus that also goes through sled and the binary (all of it when
/// `MNEMO_TEST_SLED=all`).
fn corpus_sample(corpus: &[(String, Class)]) -> Vec<(String, Class)> {
    if sample_all() {
        return corpus.to_vec();
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    corpus
        .iter()
        .filter(|(_, class)| {
            let n = seen.entry(format!("{class:?}")).or_default();
            *n += 1;
            (*n - 1) % 5 == 0
        })
        .cloned()
        .collect()
}

/// Runs every corpus path through every path field under `profile`; returns (calls, problems).
fn run_corpus(
    server: &dyn Host,
    profile: Profile,
    corpus: &[(String, Class)],
) -> (u64, Vec<String>) {
    let mut calls = 0;
    let mut problems = Vec::new();
    let seed = json!({"command": "create", "path": SEED, "file_text": "hostile\nline two\n"});
    send(server, &seed, &mut calls, &mut problems);
    for (path, class) in corpus {
        for (field, &name) in FIELDS.iter().enumerate() {
            let Some((content, is_error)) =
                send(server, &call_for(field, path), &mut calls, &mut problems)
            else {
                continue;
            };
            if let Err(e) = check_path_answer(profile, field, path, *class, &content, is_error) {
                problems.push(format!(
                    "{} {name} ({class:?}) {}: {e}",
                    profile.name(),
                    short(path)
                ));
            }
            // A rename onto an ordinary path moved the seed: put a new one back.
            if field == 6 && !is_error {
                send(server, &seed, &mut calls, &mut problems);
            }
        }
    }
    problems.extend(unexpected_records(server, &allowed_records(corpus)));
    problems.extend(final_checks(server, calls));
    (calls, problems)
}

#[test]
fn every_hostile_path_in_every_field_of_every_command_is_refused_or_stays_inside() {
    let corpus = corpus();
    let count = |class: Class| corpus.iter().filter(|(_, c)| *c == class).count();
    assert!(
        corpus.len() >= 200,
        "corpus has only {} paths",
        corpus.len()
    );
    for class in [
        Class::Outside,
        Class::Escape,
        Class::Control,
        Class::Invisible,
        Class::TooLong,
        Class::Root,
        Class::Inside,
    ] {
        assert!(count(class) > 0, "no {class:?} paths");
    }
    let sample = corpus_sample(&corpus);
    let mut total = 0;
    for profile in PROFILES {
        let (calls, problems) = run_corpus(&pure(profile), profile, &corpus);
        assert_no_problems(profile.name(), &problems);
        total += calls;
        let (_, problems) = run_corpus(&sled(profile), profile, &sample);
        assert_no_problems(profile.name(), &problems);
    }
    eprintln!(
        "hostile corpus: {} paths (outside {}, escape {}, control {}, invisible {}, too long {}, root {}, inside {}), {} fields, 2 profiles: {total} calls",
        corpus.len(),
        count(Class::Outside),
        count(Class::Escape),
        count(Class::Control),
        count(Class::Invisible),
        count(Class::TooLong),
        count(Class::Root),
        count(Class::Inside),
        FIELDS.len(),
    );
    eprintln!("of which through sled: {} paths", sample.len());
}

#[test]
fn look_alikes_are_ordinary_names_inside_the_root() {
    for server in PROFILES.into_iter().flat_map(both) {
        let server = &*server;
        let mut calls = 0;
        let mut problems = Vec::new();
        let names = [
            "\u{FF0F}..\u{FF0F}etc\u{FF0F}passwd",
            "..\u{2215}..\u{2215}x",
            "\u{FF0E}\u{FF0E}",
            "\u{2024}\u{2024}",
            "%c0%ae%c0%ae",
            "%00",
        ];
        for name in names {
            let path = format!("{ROOT}/{name}");
            let input = json!({"command": "create", "path": path, "file_text": name});
            let got = send(server, &input, &mut calls, &mut problems);
            assert_eq!(
                got,
                Some((format!("File created successfully at: {path}"), false)),
                "{}",
                server.name()
            );
        }
        let records = server.files();
        let mut got: Vec<(String, String)> =
            records.into_iter().map(|r| (r.path, r.content)).collect();
        got.sort();
        let mut want: Vec<(String, String)> = names
            .iter()
            .map(|n| (format!("{ROOT}/{n}"), (*n).to_string()))
            .collect();
        want.sort();
        assert_eq!(
            got,
            want,
            "{}: each look-alike is one file directly under the root",
            server.name()
        );
        problems.extend(final_checks(server, calls));
        assert_no_problems(server.name(), &problems);
    }
}

/// Set in the child process of `a_file_nested_as_deep_as_paths_allow_can_be_listed`.
const CHILD_ENV: &str = "MNEMO_HOSTILE_DEEP_CHILD";

/// The child's work: create a file nested as deep as the path limits allow, list every record,
/// verify. Does nothing unless [`CHILD_ENV`] is set, so `--ignored` runs stay harmless.
#[test]
#[ignore = "run as a child process by a_file_nested_as_deep_as_paths_allow_can_be_listed"]
fn deep_listing_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let server = sled(Profile::Spec);
    // 10 + 2 * 2040 + 1 = 4091 bytes: inside MAX_PATH_BYTES, so the path is valid.
    let path = format!("{ROOT}/{}f", "e/".repeat(2040));
    let out = server.handle(&json!({"command": "create", "path": path, "file_text": "deep"}));
    assert_eq!(
        out["content"],
        json!(format!("File created successfully at: {path}"))
    );
    assert_eq!(server.files().len(), 1);
    let problems = final_checks(&server, 1);
    assert_no_problems("deep", &problems);
}

/// FINDING (kept failing on purpose in debug builds): one valid `create` of a file nested about
/// 1,900 segments deep (the 4096-byte limit allows 2,043; in this debug build 1,850 passes and
/// 1,900 aborts) makes `records_by_tag("memorytool")` overflow the writer thread's stack (the
/// recursive `Projection::collect`, on a default 2 MiB thread): the process aborts, it does not
/// even panic. A release build's smaller frames pass at 2,040. Run in a child process so the
/// abort cannot take the test binary down.
#[test]
fn a_file_nested_as_deep_as_paths_allow_can_be_listed() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "hostile::deep_listing_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("run the child test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = stderr
        .lines()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "listing a file 2,040 segments deep killed the process ({}):\n{tail}",
        out.status
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child test did not run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Malformed calls and lines
// ---------------------------------------------------------------------------------------------

/// What a malformed input must get.
#[derive(Clone, Debug)]
enum Want {
    /// `is_error`, the text starts with `Error: ` and contains every fragment.
    Error(Vec<String>),
    /// `is_error` with exactly this text.
    Exact(String),
    /// `is_error` with a text that starts with this (a profile without the `Error: ` prefix).
    Starts(String),
    /// Accepted as a call (the python-sdk profile's documented leniency, a missing optional field);
    /// any well-formed result.
    Accepted,
}

fn error_with(parts: &[&str]) -> Want {
    Want::Error(parts.iter().map(|p| (*p).to_string()).collect())
}

/// The input: a JSON value for `handle`, or a raw line for `handle_line`.
#[derive(Clone, Debug)]
enum Input {
    Json(Value),
    Line(String),
}

impl Input {
    fn line(&self) -> String {
        match self {
            Input::Json(v) => v.to_string(),
            Input::Line(l) => l.clone(),
        }
    }
}

struct Case {
    label: String,
    input: Input,
    spec: Want,
    sdk: Want,
}

/// What the typescript-sdk profile answers a malformed case: as `spec` (its errors all start with
/// `Error: `), except that a `view_range` that is not two long is ignored, as the SDK ignores it.
fn typescript_want(c: &Case) -> Want {
    match &c.input {
        Input::Json(Value::Object(input))
            if input
                .get("view_range")
                .is_some_and(|range| range.as_array().is_some_and(|items| items.len() != 2)) =>
        {
            Want::Accepted
        }
        _ => c.spec.clone(),
    }
}

fn case(label: impl Into<String>, input: Input, want: Want) -> Case {
    Case {
        label: label.into(),
        input,
        spec: want.clone(),
        sdk: want,
    }
}

/// A valid call of each command, used as the base for missing and mistyped fields.
fn base(command: &str) -> Map<String, Value> {
    let v = match command {
        "view" => json!({"command": "view", "path": SEED}),
        "create" => json!({"command": "create", "path": "/memories/new.txt", "file_text": "t"}),
        "str_replace" => {
            json!({"command": "str_replace", "path": SEED, "old_str": "not there", "new_str": "q"})
        }
        "insert" => {
            json!({"command": "insert", "path": SEED, "insert_line": 0, "insert_text": "x"})
        }
        "delete" => json!({"command": "delete", "path": "/memories/none.txt"}),
        _ => {
            json!({"command": "rename", "old_path": "/memories/none.txt", "new_path": "/memories/other.txt"})
        }
    };
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn string_fields(command: &str) -> &'static [&'static str] {
    match command {
        "view" | "delete" => &["path"],
        "create" => &["path", "file_text"],
        "str_replace" => &["path", "old_str", "new_str"],
        "insert" => &["path", "insert_text"],
        _ => &["old_path", "new_path"],
    }
}

/// The `Error: ` fragments that show a valid call of `command`.
fn shows_valid(command: &str) -> String {
    format!("A valid call looks like {{\"command\": \"{command}\"")
}

fn malformed_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Missing fields, one at a time, and every field at once.
    for command in COMMANDS {
        let mut fields: Vec<&str> = string_fields(command).to_vec();
        if command == "insert" {
            fields.push("insert_line");
        }
        for field in fields {
            let mut input = base(command);
            input.remove(field);
            let want = match field {
                // An omitted new_str deletes old_str (here: no match, an ordinary error).
                "new_str" => Want::Accepted,
                "insert_line" => Want::Error(vec![
                    "needs an integer \"insert_line\"".into(),
                    shows_valid(command),
                ]),
                _ => Want::Error(vec![
                    format!("The {command} command needs a \"{field}\" string"),
                    shows_valid(command),
                ]),
            };
            cases.push(case(
                format!("{command} without {field}"),
                Input::Json(Value::Object(input)),
                want,
            ));
        }
        cases.push(case(
            format!("{command} with no fields"),
            Input::Json(json!({"command": command})),
            Want::Error(vec![shows_valid(command)]),
        ));
    }

    // Every string field given every other JSON type.
    let wrong = [
        ("a number", json!(1)),
        ("a number", json!(-1.5)),
        ("a boolean", json!(true)),
        ("an array", json!([])),
        ("an array", json!(["/memories/x"])),
        ("an object", json!({})),
        ("an object", json!({"path": "/memories/x"})),
    ];
    for command in COMMANDS {
        for field in string_fields(command) {
            for (ty, value) in &wrong {
                let mut input = base(command);
                input.insert((*field).to_string(), value.clone());
                cases.push(case(
                    format!("{command}.{field} = {value}"),
                    Input::Json(Value::Object(input)),
                    Want::Error(vec![
                        format!("\"{field}\" must be a string, got {ty}"),
                        shows_valid(command),
                    ]),
                ));
            }
            let mut input = base(command);
            input.insert((*field).to_string(), Value::Null);
            let want = if *field == "new_str" {
                Want::Accepted
            } else {
                Want::Error(vec![
                    format!("needs a \"{field}\" string"),
                    shows_valid(command),
                ])
            };
            cases.push(case(
                format!("{command}.{field} = null"),
                Input::Json(Value::Object(input)),
                want,
            ));
        }
    }

    // insert_line of the wrong type or size. python-sdk parses integers laxly, as the SDK does
    // (whole floats, booleans, numeric strings), then the range check answers.
    let bad_line = |v: Value| {
        let mut input = base("insert");
        input.insert("insert_line".into(), v);
        Input::Json(Value::Object(input))
    };
    let not_whole = error_with(&[
        "\"insert_line\" must be a whole number of lines",
        "A valid call",
    ]);
    for (v, sdk) in [
        (json!("5"), Want::Accepted),
        (json!(" 2 "), Want::Accepted),
        (json!("abc"), not_whole.clone()),
        (json!("1.5"), not_whole.clone()),
        (json!(1.5), not_whole.clone()),
        (json!(-0.5), not_whole.clone()),
        (json!(2.0), Want::Accepted),
        (json!(true), Want::Accepted),
        (json!([1]), not_whole.clone()),
        (json!({"line": 1}), not_whole.clone()),
    ] {
        cases.push(Case {
            label: format!("insert_line = {v}"),
            input: bad_line(v),
            spec: not_whole.clone(),
            sdk,
        });
    }
    cases.push(case(
        "insert_line = null",
        bad_line(Value::Null),
        error_with(&["needs an integer \"insert_line\""]),
    ));
    cases.push(case(
        "insert_line = u64::MAX",
        bad_line(json!(u64::MAX)),
        error_with(&["\"insert_line\" is out of range (18446744073709551615)"]),
    ));
    for n in [-1_i64, i64::MIN, i64::MAX] {
        cases.push(Case {
            label: format!("insert_line = {n}"),
            input: bad_line(json!(n)),
            spec: Want::Error(vec![format!(
                "Invalid `insert_line` parameter: {n}. It should be within the range of lines of the file: [0, "
            )]),
            sdk: Want::Starts(format!(
                "Invalid `insert_line` parameter: {n}. It should be within the range [0, "
            )),
        });
    }

    // view_range of the wrong shape. python-sdk ignores a list that is not two long, as the SDK
    // does, and reads booleans as integers.
    let range_error = error_with(&[
        "`view_range` must be an array of two integers [start_line, end_line]",
        "end_line -1 reads to the end",
    ]);
    for (v, sdk_ignores) in [
        (json!([]), true),
        (json!([1]), true),
        (json!([1, 2, 3]), true),
        (json!(["a", "b"]), false),
        (json!("1-2"), false),
        (json!({"start": 1}), false),
        (json!([1.5, 2]), false),
        // A whole number past i64 saturates (an SDK-compatible clamp), so spec then refuses the
        // range itself rather than its shape; see below.
        (json!([null, 2]), false),
        (json!([null, null]), false),
        (json!([true, false]), true),
        (json!([[1], [2]]), false),
        (json!(5), false),
        (json!(true), false),
    ] {
        let mut input = base("view");
        input.insert("view_range".into(), v.clone());
        cases.push(Case {
            label: format!("view_range = {v}"),
            input: Input::Json(Value::Object(input)),
            spec: range_error.clone(),
            sdk: if sdk_ignores {
                Want::Accepted
            } else {
                range_error.clone()
            },
        });
    }

    // Unknown commands, and `command` missing or not a string.
    let long = "a".repeat(10_000);
    for name in [
        "undo_edit",
        "View",
        "VIEW",
        " view",
        "view ",
        "view\0",
        "create\n",
        "",
        "rm -rf /",
        "../view",
        "str-replace",
        "ls",
        long.as_str(),
    ] {
        let mut input = base("view");
        input.insert("command".into(), json!(name));
        cases.push(case(
            format!("command = {}", short(name)),
            Input::Json(Value::Object(input)),
            error_with(&["Error: Unknown command", VALID_COMMANDS]),
        ));
    }
    let mut no_command = base("view");
    no_command.remove("command");
    cases.push(case(
        "no command",
        Input::Json(Value::Object(no_command)),
        error_with(&[
            "no \"command\" field",
            VALID_COMMANDS,
            "A valid input looks like",
        ]),
    ));
    for v in [
        json!(1),
        json!(true),
        json!(null),
        json!(["view"]),
        json!({"name": "view"}),
    ] {
        let mut input = base("view");
        input.insert("command".into(), v.clone());
        cases.push(case(
            format!("command = {v}"),
            Input::Json(Value::Object(input)),
            error_with(&["\"command\" must be a string naming one of", VALID_COMMANDS]),
        ));
    }

    // The input is not an object.
    for v in [
        json!([]),
        json!([{"command": "view", "path": "/memories"}]),
        json!("view /memories"),
        json!(42),
        json!(-1.5),
        json!(null),
        json!(true),
    ] {
        cases.push(case(
            format!("input {v}"),
            Input::Json(v),
            error_with(&[
                "Expected a tool_use block or a memory tool input object",
                "A valid input looks like",
            ]),
        ));
    }

    // Whole tool_use blocks that are not for memory, have no usable input, or a non-string id.
    let view = json!({"command": "view", "path": "/memories"});
    // Every block gets its own id: a repeated id would be answered as a retry.
    for (n, name) in [
        "bash",
        "Memory",
        "memory ",
        "str_replace_based_edit_tool",
        "",
    ]
    .into_iter()
    .enumerate()
    {
        cases.push(case(
            format!("tool_use named {name:?}"),
            Input::Json(json!({"type": "tool_use", "id": format!("toolu_other_{n}"), "name": name, "input": view})),
            Want::Exact(format!(
                "Error: Tool '{name}' not found. This server only answers the memory tool (tool_use blocks named \"memory\")"
            )),
        ));
    }
    cases.push(case(
        "tool_use without input",
        Input::Json(json!({"type": "tool_use", "id": "toolu_noinput", "name": "memory"})),
        error_with(&[
            "The tool_use block has no \"input\" object",
            "A valid input looks like",
        ]),
    ));
    for (n, v) in [
        json!(null),
        json!("view /memories"),
        json!([view]),
        json!(7),
    ]
    .into_iter()
    .enumerate()
    {
        cases.push(case(
            format!("tool_use with input {v}"),
            Input::Json(
                json!({"type": "tool_use", "id": format!("toolu_badinput_{n}"), "name": "memory", "input": v}),
            ),
            error_with(&[
                "The memory tool input must be a JSON object",
                "A valid input looks like",
            ]),
        ));
    }
    for id in [
        json!(5),
        json!(null),
        json!(["toolu_x"]),
        json!({"id": "toolu_x"}),
        json!(true),
    ] {
        // With a malformed input: an error, answered under a generated id.
        cases.push(case(
            format!("tool_use id {id} and no command"),
            Input::Json(json!({"type": "tool_use", "id": id, "name": "memory", "input": {"path": "/memories"}})),
            error_with(&["no \"command\" field"]),
        ));
        // With a valid input the crate treats the block as a bare input (documented in
        // command.rs: the id is kept only when it is a string) and answers under `mnemo-{seq}`.
        cases.push(case(
            format!("tool_use id {id} and a valid view"),
            Input::Json(json!({"type": "tool_use", "id": id, "name": "memory", "input": view})),
            Want::Accepted,
        ));
    }

    // Lines that are not JSON, or not one JSON object.
    let not_json = error_with(&[
        "Error: The input is not valid JSON (",
        "Send one JSON object per line, for example {\"command\": \"view\"",
    ]);
    let garbage: String = (0u8..=255)
        .filter(|b| *b != b'\n')
        .map(char::from)
        .collect();
    for line in [
        String::new(),
        " ".into(),
        "{".into(),
        "}".into(),
        "{\"command\":\"view\",\"path\":\"/memories\"".into(),
        "{\"command\": \"view\", \"path\": \"/mem".into(),
        "{\"command\":\"view\",\"path\":\"/memories\"} trailing".into(),
        "{\"command\":\"view\",\"path\":\"/memories\"}{\"command\":\"delete\",\"path\":\"/memories/seed.txt\"}".into(),
        "{'command': 'view', 'path': '/memories'}".into(),
        "{\"command\":\"view\",\"path\":\"/memories/a\u{1}b\"}".into(),
        "not json".into(),
        "NaN".into(),
        "Infinity".into(),
        "1e999".into(),
        "\u{FFFD}\u{FFFD}garbage\0\u{1}\u{7f}".into(),
        garbage,
        "{".repeat(1000),
        "x".repeat(1 << 20),
    ] {
        cases.push(case(
            format!("line {}", short(&line)),
            Input::Line(line),
            not_json.clone(),
        ));
    }
    // JSON nested past any sensible call is refused as such, whether or not serde_json would
    // have parsed it.
    for depth in [65, 200] {
        cases.push(case(
            format!("line nested {depth} deep"),
            Input::Line(format!("{}{}", "[".repeat(depth), "]".repeat(depth))),
            error_with(&["Error: The input nests arrays or objects more than 64 levels deep"]),
        ));
    }
    for line in ["null", "42", "\"/memories\"", "[]", "true"] {
        cases.push(case(
            format!("line {line}"),
            Input::Line(line.into()),
            error_with(&["Expected a tool_use block or a memory tool input object"]),
        ));
    }
    // A 1 MB line that is JSON, naming a 1 MB path.
    cases.push(case(
        "1 MB path",
        Input::Line(
            json!({"command": "view", "path": format!("{ROOT}/{}", "p".repeat(1 << 20))})
                .to_string(),
        ),
        error_with(&["is too long", "4096 bytes"]),
    ));
    // Duplicate keys are refused, in both profiles: "the last one wins" would make this a delete.
    cases.push(case(
        "duplicate command keys",
        Input::Line(
            "{\"command\":\"view\",\"command\":\"delete\",\"path\":\"/memories/dup.txt\"}".into(),
        ),
        error_with(&["the key \"command\" more than once in one object"]),
    ));
    cases
}

fn check_want(want: &Want, content: &str, is_error: bool) -> Result<(), String> {
    match want {
        Want::Accepted => Ok(()),
        Want::Exact(text) if is_error && content == text => Ok(()),
        Want::Exact(text) => Err(format!(
            "want is_error with {}, got is_error={is_error} {}",
            short(text),
            short(content)
        )),
        Want::Starts(text) if is_error && content.starts_with(text.as_str()) => Ok(()),
        Want::Starts(text) => Err(format!(
            "want is_error with a text starting {}, got is_error={is_error} {}",
            short(text),
            short(content)
        )),
        Want::Error(parts)
            if is_error
                && content.starts_with("Error: ")
                && parts.iter().all(|p| content.contains(p.as_str())) =>
        {
            Ok(())
        }
        Want::Error(parts) => Err(format!(
            "want an `Error: ` result containing {parts:?}, got is_error={is_error} {}",
            short(content)
        )),
    }
}

/// The id a result must carry: the block's string id, or one the server made up.
fn check_id(input: &Input, id: &str) -> Result<(), String> {
    let block_id = match input {
        Input::Json(Value::Object(m)) if m.get("type") == Some(&json!("tool_use")) => {
            m.get("id").and_then(Value::as_str)
        }
        _ => None,
    };
    match block_id {
        Some(want) if id == want => Ok(()),
        None if id.starts_with("mnemo-") => Ok(()),
        _ => Err(format!("tool_use_id {id:?} for a block id {block_id:?}")),
    }
}

#[test]
fn malformed_calls_get_clear_errors_and_are_all_logged() {
    let cases = malformed_cases();
    let sample: Vec<&Case> = cases.iter().filter(|c| in_sled_sample(&c.label)).collect();
    assert!(
        !sample.is_empty(),
        "the sled sample holds no malformed case"
    );
    let mut total = 0;
    for profile in PROFILES {
        let all: Vec<&Case> = cases.iter().collect();
        total += run_malformed(&pure(profile), profile, &all);
        run_malformed(&sled(profile), profile, &sample);
    }
    eprintln!(
        "malformed: {} cases, 2 profiles: {total} calls, {} cases through sled as well",
        cases.len(),
        sample.len()
    );
}

/// Sends a seed and then every case to `server`, checks each answer and the log; returns how many
/// calls it made.
fn run_malformed(server: &dyn Host, profile: Profile, cases: &[&Case]) -> u64 {
    let what = format!("{} on {}", profile.name(), server.name());
    let mut problems = Vec::new();
    let mut calls = 0;
    let seed = json!({"command": "create", "path": SEED, "file_text": "hostile\nline two\n"});
    send(server, &seed, &mut calls, &mut problems);
    for c in cases {
        let out = match &c.input {
            Input::Json(v) => server.handle(v),
            Input::Line(l) => server.handle_line(l),
        };
        calls += 1;
        let typescript;
        let want = match profile {
            Profile::PythonSdk => &c.sdk,
            Profile::TypescriptSdk => {
                typescript = typescript_want(c);
                &typescript
            }
            _ => &c.spec,
        };
        let checked = well_formed(&out).and_then(|(id, content, is_error)| {
            check_id(&c.input, &id)?;
            check_want(want, &content, is_error)
        });
        if let Err(e) = checked {
            problems.push(format!("{what} {}: {e}", c.label));
        }
    }
    problems.extend(final_checks(server, calls));
    assert_no_problems(&what, &problems);
    calls
}

/// FINDING (kept failing on purpose): a whole number too big for i64/u64 (a JSON integer literal
/// past u64::MAX, which serde_json reads as a float, or `1e20`) is called "not a whole number"
/// instead of "out of range" — the very message commit 6f35a3f fixed for u64 values.
#[test]
fn huge_whole_insert_line_is_called_out_of_range() {
    for profile in PROFILES {
        for server in both(profile) {
            huge_insert_lines(&*server, profile);
        }
    }
}

/// The out-of-range checks of [`huge_whole_insert_line_is_called_out_of_range`] on one host.
fn huge_insert_lines(server: &dyn Host, profile: Profile) {
    let mut calls = 0;
    let mut problems = Vec::new();
    let seed = json!({"command": "create", "path": SEED, "file_text": "hostile\n"});
    send(server, &seed, &mut calls, &mut problems);
    for n in [
        "100000000000000000000",
        "-100000000000000000000",
        "1e20",
        "-1e300",
    ] {
        let line = format!(
            "{{\"command\":\"insert\",\"path\":\"{SEED}\",\"insert_line\":{n},\"insert_text\":\"x\"}}"
        );
        let out = server.handle_line(&line);
        calls += 1;
        let (_, content, is_error) = well_formed(&out).expect("well formed");
        if !(is_error && content.contains("out of range") && !content.contains("whole number")) {
            problems.push(format!(
                "{} insert_line {n}: want an out-of-range error, got {}",
                profile.name(),
                short(&content)
            ));
        }
    }
    problems.extend(final_checks(server, calls));
    assert_no_problems(profile.name(), &problems);
}

/// A rejected call is recorded as its text and answered again by re-parsing that text (which is
/// what lets verify prove it). serde_json refuses text nested past 128 levels, so inputs nested
/// deeper than 64 levels are refused up front, from the value and from its text alike, with one
/// message that says what a valid call looks like.
#[test]
fn a_deeply_nested_value_is_refused_with_the_same_words_as_its_text() {
    for (profile, server) in PROFILES.into_iter().flat_map(|p| both(p).map(|h| (p, h))) {
        let server = &*server;
        let mut deep = json!("leaf");
        for _ in 0..200 {
            deep = Value::Array(vec![deep]);
        }
        let input = json!({"command": "undo_edit", "path": SEED, "extra": deep});
        let from_value = server.handle(&input);
        let from_text = server.handle_line(&input.to_string());
        let problems = final_checks(server, 2);
        assert_no_problems(profile.name(), &problems);
        for out in [from_value, from_text] {
            let (_, content, is_error) = well_formed(&out).expect("well formed");
            assert!(
                is_error
                    && content.starts_with(
                        "Error: The input nests arrays or objects more than 64 levels deep"
                    ),
                "{}: want the nesting error, got {}",
                profile.name(),
                short(&content)
            );
        }
        // 64 levels are fine: the same call is then an unknown command.
        let mut shallow = json!("leaf");
        for _ in 0..62 {
            shallow = Value::Array(vec![shallow]);
        }
        let out = server.handle(&json!({"command": "undo_edit", "path": SEED, "extra": shallow}));
        let (_, content, _) = well_formed(&out).expect("well formed");
        assert!(
            content.starts_with("Error: Unknown command \"undo_edit\""),
            "{}",
            short(&content)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The same through the binary
// ---------------------------------------------------------------------------------------------

/// Every output line parsed as a well-formed `tool_result`.
fn results(out: &Output) -> Vec<Result<(String, String, bool), String>> {
    String::from_utf8_lossy(&out.stdout)
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .map_err(|e| format!("output line is not JSON ({e}): {}", short(l)))
                .and_then(|v| well_formed(&v))
        })
        .collect()
}

/// `mnemo verify --db DIR` exits 0, and its JSON report counts `events`.
fn cli_verify(db: &Path, events: usize) -> Vec<String> {
    let db = db.to_str().expect("utf-8 path");
    let mut problems = Vec::new();
    let plain = run_mnemo(&["verify", "--db", db], "");
    if !plain.status.success() {
        problems.push(format!(
            "mnemo verify exited {:?}: {}",
            plain.status.code(),
            String::from_utf8_lossy(&plain.stdout)
        ));
    }
    let out = run_mnemo(&["verify", "--db", db, "--json"], "");
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(report) => {
            if report["status"] != "intact" || report["events"] != json!(events) {
                problems.push(format!("verify --json: {report}"));
            }
        }
        Err(e) => problems.push(format!("verify --json is not JSON: {e}")),
    }
    problems
}

/// The check of one output line of the binary: (content, is_error).
type Check = Box<dyn Fn(&str, bool) -> Result<(), String>>;

#[test]
fn the_binary_answers_every_hostile_line_with_one_tool_result() {
    let corpus = corpus_sample(&corpus());
    let malformed: Vec<Case> = malformed_cases()
        .into_iter()
        .filter(|c| in_binary_sample(&c.label))
        .collect();
    assert!(
        !malformed.is_empty(),
        "the binary sample holds no malformed case"
    );
    for profile in PROFILES {
        // (line, check of its answer)
        let mut lines: Vec<String> = Vec::new();
        let mut checks: Vec<Check> = Vec::new();
        let seed = json!({"command": "create", "path": SEED, "file_text": "hostile\nline two\n"});
        for (path, class) in &corpus {
            for (field, &name) in FIELDS.iter().enumerate() {
                lines.push(call_for(field, path).to_string());
                let (path, class) = (path.clone(), *class);
                checks.push(Box::new(move |content: &str, is_error: bool| {
                    check_path_answer(profile, field, &path, class, content, is_error)
                        .map_err(|e| format!("{name} {}: {e}", short(&path)))
                }));
                if field == 6 {
                    // Whatever the rename did, put a seed back (refused when it is still there).
                    lines.push(seed.to_string());
                    checks.push(Box::new(|_: &str, _: bool| Ok(())));
                }
            }
        }
        for c in &malformed {
            lines.push(c.input.line());
            let want = match profile {
                Profile::PythonSdk => c.sdk.clone(),
                Profile::TypescriptSdk => typescript_want(c),
                _ => c.spec.clone(),
            };
            let label = c.label.clone();
            checks.push(Box::new(move |content: &str, is_error: bool| {
                check_want(&want, content, is_error).map_err(|e| format!("{label}: {e}"))
            }));
        }
        lines.insert(0, seed.to_string());
        checks.insert(
            0,
            Box::new(|_: &str, is_error: bool| {
                if is_error {
                    Err("the seed was not created".into())
                } else {
                    Ok(())
                }
            }),
        );
        assert!(lines.iter().all(|l| !l.contains('\n')));

        let s = TempStore::new();
        let db = s.path();
        let db_str = db.to_str().expect("utf-8 path");
        let mut args = vec!["tool", "--db", db_str];
        args.extend(["--profile", profile.name()]);
        let input = lines.join("\n") + "\n";
        // Not `support::run_mnemo`: it writes all of stdin before reading stdout, so with megabytes
        // each way both processes block on full pipes.
        let out = run_mnemo_bytes(&args, input.as_bytes());
        assert!(
            out.status.success(),
            "mnemo tool exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let got = results(&out);
        assert_eq!(got.len(), lines.len(), "one output line per input line");
        let mut problems = Vec::new();
        for (i, (result, check)) in got.iter().zip(&checks).enumerate() {
            match result {
                Ok((_, content, is_error)) => {
                    if let Err(e) = check(content, *is_error) {
                        problems.push(format!("{} line {i}: {e}", profile.name()));
                    }
                }
                Err(e) => problems.push(format!("{} line {i}: {e}", profile.name())),
            }
        }
        problems.extend(cli_verify(&db, lines.len()));
        // Open the store the binary wrote: every file is inside the root, where the run may put one.
        let server = server_at(&db, profile);
        problems.extend(unexpected_records(&server, &allowed_records(&corpus)));
        problems.extend(final_checks(
            &server,
            u64::try_from(lines.len()).expect("fits"),
        ));
        drop(server);
        problems.extend(stray_files(s.dir.path()));
        assert_no_problems(profile.name(), &problems);
        eprintln!("binary ({}): {} lines", profile.name(), lines.len());
    }
}

#[test]
fn bytes_that_are_not_utf8_are_refused_and_do_not_break_the_line_count() {
    let s = TempStore::new();
    let db = s.path();
    let db = db.to_str().expect("utf-8 path");
    let lines: [&[u8]; 8] = [
        b"\xff\xfe\xfd",
        b"{\"command\":\"view\",\"path\":\"/memories\"}",
        b"\xc3\x28",
        b"{\"command\":\"create\",\"path\":\"/memories/\xff.txt\",\"file_text\":\"x\"}",
        b"\x00\x00\x00",
        b"\r",
        b"{\"command\":\"delete\",\"path\":\"/memories/\xc0\xae\xc0\xae/x\"}",
        b"{\"command\":\"view\",\"path\":\"/memories/../\xed\xa0\x80\"}",
    ];
    let mut input = lines.join(&b'\n');
    input.push(b'\n');
    let out = run_mnemo_bytes(&["tool", "--db", db], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<(String, String, bool)> = results(&out)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("every line is a tool_result");
    assert_eq!(got.len(), lines.len(), "one output line per input line");
    let content = |i: usize| got[i].1.as_str();
    // A line that is not UTF-8 is refused as such, never decoded lossily: no `\u{FFFD}` file is
    // created and no path is guessed from it.
    for i in [0, 2, 3, 6, 7] {
        assert!(
            got[i].2 && content(i).starts_with("Error: The input is not valid UTF-8 (byte "),
            "line {i}: {}",
            content(i)
        );
    }
    assert!(!got[1].2);
    assert!(got[4].2 && content(4).starts_with("Error: The input is not valid JSON"));
    assert!(got[5].2 && content(5).starts_with("Error: The input is not valid JSON"));
    let server = server_at(&s.path(), Profile::Spec);
    let records = server.files();
    assert!(records.is_empty(), "{records:?}");
    drop(server);
    let problems = cli_verify(&s.path(), lines.len());
    assert_no_problems("non-UTF-8", &problems);
}

// ---------------------------------------------------------------------------------------------
// 4. Arbitrary JSON
// ---------------------------------------------------------------------------------------------

const KEYS: [&str; 14] = [
    "command",
    "path",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "old_path",
    "new_path",
    "view_range",
    "type",
    "id",
    "name",
    "input",
];

fn cases() -> u32 {
    std::env::var("MNEMO_HOSTILE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn arb_string() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        prop::sample::select(vec![
            "..",
            ".",
            "",
            "a",
            "notes.txt",
            "%2e%2e",
            "%2E%2e",
            ".%2e",
            "%252e%252e",
            "%2f",
            "%5C",
            "..\\",
            "\\..\\",
            "\\",
            "\0",
            "\n",
            "\r",
            "\t",
            "\u{1b}",
            "\u{7f}",
            "\u{FF0F}",
            "\u{2215}",
            "\u{FF0E}\u{FF0E}",
            "memories",
            "%00",
            "%c0%ae",
        ])
        .prop_map(str::to_string),
        "[a-z]{1,8}",
        any::<char>().prop_map(String::from),
        Just("x".repeat(300)),
    ];
    let start = prop::sample::select(vec![
        "/memories",
        "/memories/",
        "",
        "/",
        "/etc",
        "/memoriesX",
        "memories",
        "//memories",
    ]);
    prop_oneof![
        4 => (start, prop::collection::vec(fragment, 0..5))
            .prop_map(|(start, frags)| format!("{start}/{}", frags.join("/"))),
        2 => prop::sample::select(COMMANDS.to_vec()).prop_map(str::to_string),
        1 => any::<String>(),
        1 => "\\PC{0,24}",
    ]
}

fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (-3_i64..12).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => prop::sample::select(vec![1e300, -1e300, 0.5, 1.5, 2.0, -0.0, 1e20, -1e20, 9.3e18])
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => arb_number(),
        4 => arb_string().prop_map(Value::String),
    ]
}

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_string),
        1 => "[a-z_]{0,10}",
        1 => any::<String>(),
    ]
}

/// A path field's value: mostly ordinary names under the root (so calls succeed and collide),
/// the rest hostile.
fn arb_path() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::collection::vec(prop::sample::select(vec!["a", "b", "notes.txt", "dir"]), 0..3)
            .prop_map(|segs| format!("{ROOT}/{}", segs.join("/"))),
        1 => arb_string(),
    ]
}

/// The fields of the six commands.
const FIELD_KEYS: [&str; 9] = [
    "path",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "old_path",
    "new_path",
    "view_range",
];

/// A value of the type `key` wants, most of the time (`inner` for the rest).
fn typed(key: &str, inner: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    let well_typed = match key {
        "path" | "old_path" | "new_path" => arb_path().prop_map(Value::from).boxed(),
        "insert_line" => prop_oneof![
            4 => (-1_i64..5).prop_map(Value::from),
            1 => arb_number(),
        ]
        .boxed(),
        "view_range" => (-2_i64..6, -2_i64..6)
            .prop_map(|(a, b)| json!([a, b]))
            .boxed(),
        _ => prop_oneof![
            3 => "[ab\n]{0,12}",
            1 => any::<String>(),
            1 => arb_string(),
        ]
        .prop_map(Value::from)
        .boxed(),
    };
    prop_oneof![5 => well_typed, 1 => inner].boxed()
}

/// An object that is often a valid or nearly valid command: a command name, each command field
/// present most of the time and well typed most of the time, and a few other keys.
fn arb_command(inner: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    let command = prop_oneof![
        8 => prop::sample::select(COMMANDS.to_vec()).prop_map(Value::from),
        1 => arb_leaf(),
        1 => inner.clone(),
    ];
    let fields: Vec<BoxedStrategy<Option<Value>>> = FIELD_KEYS
        .iter()
        .map(|key| prop::option::weighted(0.85, typed(key, inner.clone())).boxed())
        .collect();
    (
        prop::option::weighted(0.95, command),
        fields,
        prop::collection::vec((arb_key(), inner), 0..3),
    )
        .prop_map(|(command, fields, extra)| {
            let mut map: Map<String, Value> = extra.into_iter().collect();
            if let Some(command) = command {
                map.insert("command".into(), command);
            }
            for (key, value) in FIELD_KEYS.iter().zip(fields) {
                if let Some(value) = value {
                    map.insert((*key).to_string(), value);
                }
            }
            Value::Object(map)
        })
        .boxed()
}

fn arb_json() -> BoxedStrategy<Value> {
    arb_leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((arb_key(), inner.clone()), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
                arb_command(inner),
            ]
        })
        .boxed()
}

/// A top-level input: any value, a command-shaped object, or a tool_use block around one.
fn arb_input() -> impl Strategy<Value = Value> {
    let block = (
        prop_oneof![
            3 => "toolu_[a-zA-Z0-9]{1,12}".prop_map(Value::from),
            1 => arb_leaf(),
        ],
        prop_oneof![4 => Just(json!("memory")), 1 => arb_leaf()],
        prop::option::weighted(
            0.9,
            prop_oneof![3 => arb_command(arb_json()), 1 => arb_json()],
        ),
    )
        .prop_map(|(id, name, input)| {
            let mut block = json!({"type": "tool_use", "id": id, "name": name});
            if let Some(input) = input {
                block["input"] = input;
            }
            block
        });
    prop_oneof![
        1 => arb_json(),
        4 => arb_command(arb_json()),
        2 => block,
    ]
}

/// Runs `inputs` on the pure core and, for the inputs in the sled sample, on sled as well, which
/// must give every result block exactly as the pure core did.
fn run_arbitrary(profile: Profile, inputs: &[Value]) -> Result<(), TestCaseError> {
    let answers = run_arbitrary_on(&pure(profile), inputs)?;
    if in_sled_sample(&format!("{inputs:?}")) {
        let on_sled = run_arbitrary_on(&sled(profile), inputs)?;
        prop_assert_eq!(on_sled, answers, "sled and the pure core differ");
    }
    Ok(())
}

/// Sends each input as a value and as a line and checks the results; returns them.
fn run_arbitrary_on(server: &dyn Host, inputs: &[Value]) -> Result<Vec<Value>, TestCaseError> {
    let mut answers = Vec::new();
    let mut calls = 0;
    for input in inputs {
        let block_id = match input {
            Value::Object(m) if m.get("type") == Some(&json!("tool_use")) => {
                m.get("id").and_then(Value::as_str).map(str::to_string)
            }
            _ => None,
        };
        let mut first = None;
        // serde_json may parse a float it printed into a neighbouring one: then the line is
        // another input, and its retry is refused as one.
        let line = input.to_string();
        let same_input = serde_json::from_str::<Value>(&line).ok().as_ref() == Some(input);
        for out in [server.handle(input), server.handle_line(&line)] {
            let (id, content, is_error) =
                well_formed(&out).map_err(|e| TestCaseError::fail(format!("{e} for {input}")))?;
            answers.push(out);
            // Every call is an event, a retry included.
            calls += 1;
            if let Some(want) = &block_id {
                prop_assert_eq!(&id, want);
                // The same block again at once is a retry: a change is repeated from its record,
                // anything else runs again on the unchanged tree, so the answer is the same.
                match &first {
                    Some(_) if !same_input && is_error && content.contains("different call") => {}
                    Some(first) => {
                        prop_assert_eq!(first, &(content, is_error), "retry of {}", want)
                    }
                    None => first = Some((content, is_error)),
                }
            }
        }
    }
    let problems = final_checks(server, calls);
    prop_assert!(problems.is_empty(), "{:?}", problems);
    Ok(answers)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    })]

    /// Any JSON value, through `handle` and as a line through `handle_line`: always a well-formed
    /// tool_result, never a panic, one event per call, and the store verifies.
    #[test]
    fn arbitrary_json_always_gets_a_well_formed_tool_result(
        python in any::<bool>(),
        inputs in prop::collection::vec(arb_input(), 1..12),
    ) {
        let profile = if python { Profile::PythonSdk } else { Profile::Spec };
        run_arbitrary(profile, &inputs)?;
    }
}
