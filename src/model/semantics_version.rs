//! Versions of the answers: which result string each call gets.
//!
//! This module sits below the whole core (paths, policy, the tool): it holds the version enum and
//! the pieces of text whose rules it versions ([`quote`], the invisible characters, the nesting
//! count of JSON text), so path validation and the answers can both be written against it. It
//! imports nothing of the crate but its own files. The public path is `mnemo::tool::Semantics`.
//!
//! Every event records the [`Semantics`] that answered it (see [`crate::model::event`]), and every replay
//! — `verify`, recovery, `show`, `history`, `ls --at` — answers each event again under that
//! version, so a store keeps verifying after the answers change. The live writer answers under
//! [`Semantics::CURRENT`].
//!
//! The versions differ only in how a few pieces of text inside an answer are written, and every
//! difference is a method of [`Semantics`] below; the answer code is shared and calls them where
//! such a piece goes. A change to any answer text — a word, a quoting rule, an order — is a new
//! version: a new variant here, its arm in each method it changes, and the answer code passing it
//! on. Semantics 1 is frozen as the builds before versions answered; semantics 2 as the builds
//! before semantics 3; semantics 3 as the builds before semantics 4; semantics 4 as the builds before
//! semantics 5, the current one.
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
//!
//! Semantics 4 answers every call as 3 does; what differs is which calls are retries. Up to
//! semantics 3 the retry records of the last 65,536 calls were one
//! pool for every agent, so one agent's calls evicted another's records and that agent's retry of
//! a change then ran twice. Under semantics 4 each agent's records are a pool of their own
//! ([`Semantics::retry_records_per_agent`]): an agent evicts only its own. And an input refused
//! before it ran (too large, not UTF-8, not a call) and logged as a digest keeps no hash of the
//! whole input ([`Semantics::digest_keeps_input_hash`]): only its length and first 256 bytes, so
//! nothing in the log confirms a guess at what lay past them; a retry of it is matched by those.
//!
//! Semantics 5 answers every call as 4 does, except that no answer names a file its agent may not
//! read ([`Semantics::names_only_readable_files`]): a memory-tool `create` or `rename` whose path
//! goes through a file, and an API write whose path does, named that file (`/memories/zone is a
//! file, not a directory`, `the memory /zone is in the way`) even to an agent whose grants do not
//! let it read it; under semantics 5 such an answer says that a file it may not read is in the
//! way, and names no path but the one the agent sent.

use serde_json::Value;

mod invisible;
pub(crate) mod nesting;
pub mod quote;

pub(crate) use invisible::is_invisible;
use nesting::{text_before, text_nests_too_deep};
use quote::{json_text, quoted};

/// The version of the rules that answer a call: a call answered under one version gets the same
/// text forever, whatever the toolchain or the dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Semantics {
    /// The answers of the first format: names quoted with Rust's `{:?}` and JSON errors in
    /// `serde_json`'s words. Every event of format 1 was answered so.
    V1,
    /// Answers made only of text the project writes: its own quoting (`quoted` and `json_text`
    /// in `quote.rs`) and its own words for JSON errors.
    V2,
    /// Semantics 2 with truthful view caps (listings included), a strict `view_range` start and
    /// plainer words for the memory root and for a bad `view_range` (see the module docs).
    V3,
    /// Semantics 3 with each agent's retry records a pool of its own (see the module docs).
    V4,
    /// Semantics 4 with no answer naming a file its agent may not read (see the module docs).
    V5,
}

impl Semantics {
    /// The version new events are answered under.
    pub const CURRENT: Semantics = Semantics::V5;

    /// Every version, oldest first.
    pub const ALL: [Semantics; 5] = [
        Semantics::V1,
        Semantics::V2,
        Semantics::V3,
        Semantics::V4,
        Semantics::V5,
    ];

    /// The version's number (as `mnemo show` prints it and event headers record it).
    pub fn number(self) -> u32 {
        match self {
            Semantics::V1 => 1,
            Semantics::V2 => 2,
            Semantics::V3 => 3,
            Semantics::V4 => 4,
            Semantics::V5 => 5,
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

    /// Whether each agent's retry records are a pool of their own, evicted only by that agent's
    /// calls (semantics 4), rather than one pool for every agent.
    pub(crate) fn retry_records_per_agent(self) -> bool {
        self >= Semantics::V4
    }

    /// Whether an answer that would name a file in the way of a path (a memory-tool `create` or
    /// `rename` under it, an API write whose path goes through it) names it only when the agent
    /// may read it (semantics 5); before, it named it whatever the agent's grants, which told an
    /// agent granted only `/memories/zone/inner` that a file it cannot read is at
    /// `/memories/zone`.
    pub(crate) fn names_only_readable_files(self) -> bool {
        self >= Semantics::V5
    }

    /// Whether a refused input logged as a digest keeps the hash of the whole input (up to
    /// semantics 3); under semantics 4 it keeps its length and start only (its hash is all
    /// zeros), so a retry of it is matched by those.
    pub(crate) fn digest_keeps_input_hash(self) -> bool {
        self < Semantics::V4
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
        assert_eq!(Semantics::from_number(6), None);
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
