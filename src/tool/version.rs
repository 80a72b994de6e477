//! Versions of the answers: which result string each call gets.
//!
//! Every event records the [`Semantics`] that answered it (see [`crate::event`]), and every replay
//! — `verify`, recovery, `show`, `history`, `ls --at` — answers each event again under that
//! version, so a store keeps verifying after the answers change. The live writer answers under
//! [`Semantics::CURRENT`].
//!
//! The versions differ only in how a few pieces of text inside an answer are written, and every
//! difference is a method of [`Semantics`] below; the answer code is shared and calls them where
//! such a piece goes. A change to any answer text — a word, a quoting rule, an order — is a new
//! version: a new variant here, its arm in each method it changes, and the answer code passing it
//! on. Semantics 1 is frozen as the builds before versions answered; semantics 2 as the builds
//! before semantics 3, the current one.
//!
//! | piece of text | semantics 1 | semantics 2 |
//! |---|---|---|
//! | a name, key, path, command, tool_use id, agent id or token id an answer quotes | Rust's `{:?}` (its escapes follow the toolchain's Unicode tables) | [`quoted`]: fixed rules |
//! | a refused path with an invisible character | `{:?}`, then each invisible character as `\u{..}` | [`quoted`] |
//! | a control character an answer names | Rust's `{:?}` of the `char` (`'\t'`) | `U+0009` |
//! | a JSON value an answer shows (a wrong `view_range`, `insert_line`) | as `serde_json` prints it | [`json_text`] |
//! | why a text is not JSON | `serde_json`'s error message | the project's words, from `serde_json`'s error category, line and column |
//! | a text nested past `serde_json`'s recursion limit | recognised by `serde_json`'s message | recognised by counting brackets outside strings before the place the parser stopped |
//!
//! Semantics 3 answers as 2 does except where 2 told the model something untrue or unclear
//! (`spec` profile only where noted; `python-sdk` keeps the SDK's texts):
//!
//! | answer | semantics 1 and 2 | semantics 3 |
//! |---|---|---|
//! | `create` of the memory root (`spec`) | `File /memories already exists` | says it is the memory root directory and where files go |
//! | a `view_range` starting below line 1 (`spec`) | clamped to line 1, while the error for a bad range says `1 <= start_line` | refused with that error ([`Semantics::start_below_one_is_refused`]) |
//! | the error for a bad `view_range` | writes view_range bare | `` `view_range` ``, as the `insert_line` error writes its field |
//! | a file view cut at `view_max_chars` | "of N" counts the lines asked for, not the file's; paging on reads to the end | "of N" is the file's line count; paging on names the range asked for; a line longer than the cap says its length and how to edit it |
//! | a directory listing with `view_max_chars` | not capped | cut at the cap with a note: how many entries are shown, and which view lists the rest |

use serde_json::Value;

use crate::paths::is_invisible;
use crate::tool::command::{text_before, text_nests_too_deep};
use crate::tool::quote::{json_text, quoted};

/// The version of the rules that answer a call: a call answered under one version gets the same
/// text forever, whatever the toolchain or the dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Semantics {
    /// The answers of the first format: names quoted with Rust's `{:?}` and JSON errors in
    /// `serde_json`'s words. Every event of format 1 was answered so.
    V1,
    /// Answers made only of text the project writes: its own quoting ([`quoted`],
    /// [`json_text`]) and its own words for JSON errors.
    V2,
    /// Semantics 2 with truthful view caps (listings included), a strict `view_range` start and
    /// plainer words for the memory root and for a bad `view_range` (see the module docs).
    V3,
}

impl Semantics {
    /// The version new events are answered under.
    pub const CURRENT: Semantics = Semantics::V3;

    /// Every version, oldest first.
    pub const ALL: [Semantics; 3] = [Semantics::V1, Semantics::V2, Semantics::V3];

    /// The version's number (as `mnemo show` prints it and event headers record it).
    pub fn number(self) -> u32 {
        match self {
            Semantics::V1 => 1,
            Semantics::V2 => 2,
            Semantics::V3 => 3,
        }
    }

    /// The version with this number, if this build knows it.
    pub fn from_number(number: u32) -> Option<Semantics> {
        Semantics::ALL.into_iter().find(|s| s.number() == number)
    }

    /// A name, key, path, command or id as an answer quotes it.
    pub(crate) fn quote(self, text: &str) -> String {
        match self {
            Semantics::V1 => format!("{text:?}"),
            _ => quoted(text),
        }
    }

    /// A refused path quoted so that the invisible character in it shows.
    pub(crate) fn quote_visibly(self, text: &str) -> String {
        match self {
            Semantics::V1 => {
                let mut out = String::with_capacity(text.len() + 2);
                for c in format!("{text:?}").chars() {
                    if is_invisible(c) {
                        out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
                    } else {
                        out.push(c);
                    }
                }
                out
            }
            _ => quoted(text),
        }
    }

    /// A control character as an answer names it.
    pub(crate) fn control_character(self, c: char) -> String {
        match self {
            Semantics::V1 => format!("{c:?}"),
            _ => format!("U+{:04X}", u32::from(c)),
        }
    }

    /// A JSON value the model sent, as an answer shows it.
    pub(crate) fn json_value(self, value: &Value) -> String {
        match self {
            Semantics::V1 => value.to_string(),
            _ => json_text(value),
        }
    }

    /// Why `text` is not JSON, from the parser's error `e`: what goes between the parentheses of
    /// "The input is not valid JSON (…)".
    pub(crate) fn not_json(self, e: &serde_json::Error) -> String {
        use serde_json::error::Category;
        if self == Semantics::V1 {
            return e.to_string();
        }
        let at = format!("line {}, column {}", e.line(), e.column());
        match e.classify() {
            Category::Eof => format!("the text ends at {at}, before the JSON value is complete"),
            Category::Syntax => format!("the text stops being JSON at {at}"),
            Category::Data => format!("the value at {at} cannot be read"),
            Category::Io => "the text could not be read".to_string(),
        }
    }

    /// Whether a `spec` `view_range` whose start is below 1 is refused (semantics 3, as the
    /// error's `1 <= start_line` says) rather than clamped to line 1.
    pub(crate) fn start_below_one_is_refused(self) -> bool {
        self >= Semantics::V3
    }

    /// How an answer names the `view_range` field in an error about it.
    pub(crate) fn view_range_field(self) -> &'static str {
        match self {
            Semantics::V1 | Semantics::V2 => "view_range",
            _ => "`view_range`",
        }
    }

    /// Whether `view_max_chars` notes count the file's lines and page on within the range asked
    /// for, and cap directory listings too (semantics 3).
    pub(crate) fn caps_truthfully(self) -> bool {
        self >= Semantics::V3
    }

    /// Whether a `spec` `create` of the memory root says it is the root (semantics 3) rather
    /// than that a file is there.
    pub(crate) fn names_the_root(self) -> bool {
        self >= Semantics::V3
    }

    /// Whether the parser refused `text` (with `e`) because it nests too deep, which the answer
    /// says in words of its own. Semantics 2 counts the brackets before the place the parser
    /// stopped: text that breaks off within 64 levels is not JSON, whatever follows.
    pub(crate) fn nests_too_deep(self, text: &str, e: &serde_json::Error) -> bool {
        match self {
            Semantics::V1 => e.to_string().starts_with("recursion limit exceeded"),
            _ => text_nests_too_deep(text_before(text, e.line(), e.column())),
        }
    }
}

impl std::fmt::Display for Semantics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.number().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_name_the_versions_in_order() {
        for (i, s) in Semantics::ALL.into_iter().enumerate() {
            assert_eq!(s.number(), u32::try_from(i).expect("small") + 1);
            assert_eq!(Semantics::from_number(s.number()), Some(s));
        }
        assert_eq!(Semantics::from_number(0), None);
        assert_eq!(Semantics::from_number(4), None);
        assert_eq!(Semantics::CURRENT, *Semantics::ALL.last().expect("one"));
    }

    #[test]
    fn version_one_quotes_as_rust_did_and_version_two_by_its_own_rules() {
        let text = "a\tb\u{202e}\u{1b}\"\\";
        assert_eq!(
            Semantics::V1.quote(text),
            "\"a\\tb\\u{202e}\\u{1b}\\\"\\\\\""
        );
        assert_eq!(
            Semantics::V2.quote(text),
            "\"a\\tb\\u{202e}\\u{1b}\\\"\\\\\""
        );
        // Where the toolchain's tables decide, the two part: a combining mark, an unassigned
        // code point.
        assert_eq!(Semantics::V1.quote("\u{301}"), "\"\\u{301}\"");
        assert_eq!(Semantics::V2.quote("\u{301}"), "\"\u{301}\"");
        assert_eq!(Semantics::V1.quote_visibly("a\u{200b}"), "\"a\\u{200b}\"");
        assert_eq!(Semantics::V1.control_character('\t'), "'\\t'");
        assert_eq!(Semantics::V2.control_character('\t'), "U+0009");
        assert_eq!(Semantics::V2.control_character('\u{85}'), "U+0085");
    }

    #[test]
    fn json_errors_are_described_from_category_line_and_column() {
        let err = |text: &str| serde_json::from_str::<Value>(text).expect_err("not JSON");
        let v2 = Semantics::V2;
        assert_eq!(
            v2.not_json(&err("not json")),
            "the text stops being JSON at line 1, column 2"
        );
        assert_eq!(
            v2.not_json(&err("{\"a\":\n [1,")),
            "the text ends at line 2, column 4, before the JSON value is complete"
        );
        assert_eq!(
            Semantics::V1.not_json(&err("not json")),
            "expected ident at line 1 column 2"
        );
        let deep = "[".repeat(200);
        assert!(Semantics::V1.nests_too_deep(&deep, &err(&deep)));
        assert!(v2.nests_too_deep(&deep, &err(&deep)));
        assert!(!v2.nests_too_deep("[1,", &err("[1,")));
        // Text that stops being JSON within 64 levels is not JSON, however deep it goes on.
        let broken = "{".repeat(200);
        assert!(!Semantics::V1.nests_too_deep(&broken, &err(&broken)));
        assert!(!v2.nests_too_deep(&broken, &err(&broken)));
        let late = format!("{}{{{{", "[".repeat(64));
        assert!(v2.nests_too_deep(&late, &err(&late)));
        let lines = format!("[\n[\n{}x", "[".repeat(62));
        assert!(
            !v2.nests_too_deep(&lines, &err(&lines)),
            "64 levels, then not JSON"
        );
        let lines = format!("[\n[\n{}[x", "[".repeat(62));
        assert!(
            v2.nests_too_deep(&lines, &err(&lines)),
            "65 levels before the stop"
        );
    }
}

/// Every difference between the versions, answer by answer: the same calls replayed under each
/// version give these texts (semantics 1's are those of the builds before versions, byte for byte).
#[cfg(test)]
mod differences {
    use serde_json::json;

    use super::Semantics;
    use crate::event::{Body, RejectedCall, Seq, ToolCall};
    use crate::kv::MemKv;
    use crate::policy::{Access, AdminCommand};
    use crate::projection::Projection;
    use crate::tool::{Command, Limits, Profile};

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
}
