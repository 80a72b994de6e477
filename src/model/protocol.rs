//! The answers of the read commands as data: what `mnemo log|history|show|diff|verify --json`
//! print, what the server's read routes send (`/v1/log`, `/v1/history`, `/v1/show`,
//! `/v1/diff`, `/v1/verify`), and what [`crate::MnemoClient`]'s reads return, local or served.
//!
//! One serde definition per answer: the store's side builds these values, the server writes
//! them, [`crate::RemoteClient`] reads them back into the same types, and the Python package
//! converts them. Nothing here knows a store.
//!
//! Fields are declared in the order of their names, so a value prints with its keys sorted
//! (the order `--json` has always printed them in; a history line's file fields come
//! last). Each type is `#[non_exhaustive]`: a later
//! version may add fields, which an older reader ignores.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::paths::MemPath;

/// The `command` of a [`LoggedEvent`] whose payload the store can no longer read back as it
/// was written (its bytes in the value file damaged, cut off or gone): its header (time, agent,
/// outcome, hashes) is checked by the chain and shown; what it called, and its paths, are not
/// known. `mnemo verify` names the damage; a restore from a replica mends it.
pub const UNREADABLE_COMMAND: &str = "unreadable";

/// One logged event, as a line of `mnemo log --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoggedEvent {
    /// The agent the event is attributed to.
    pub agent: String,
    /// The command: `view`, `create`, ... for the memory tool (`rejected` for a call refused
    /// before it ran), `api.create` ... for the memory-stores API, `acl-grant`, `token-issue`,
    /// `redact` ... for an administrative event, `erased` for an event
    /// a redaction erased, [`UNREADABLE_COMMAND`] for one whose payload is damaged.
    pub command: String,
    /// The event's chain hash (hex).
    pub hash: String,
    /// Whether the answer the model was given was an error.
    pub is_error: bool,
    /// The paths the call names.
    pub paths: Vec<String>,
    /// The chain hash of the event before it (hex).
    pub prev_hash: String,
    /// The hash of the answer (hex).
    pub result_hash: String,
    /// The event's salt (hex), when its format has one.
    pub salt: Option<String>,
    /// The version of the command semantics that answered it.
    pub semantics: u32,
    /// The event's sequence number.
    pub seq: u64,
    /// When it was logged, UTC (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
    pub time: String,
    /// When it was logged, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The `tool_use` block's id, when the call had one.
    pub tool_use_id: Option<String>,
}

/// One event of a file's history, as a line of `mnemo history --json`: the logged event and
/// the file it belongs to, followed through renames.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HistoryEvent {
    /// The event.
    #[serde(flatten)]
    pub event: LoggedEvent,
    /// The file's ordinal in the log (the `file`th file created), or `None` for an event that
    /// named the path while no file was there.
    pub file: Option<u64>,
    /// Every path the file has had, in order (empty for `file: None`).
    pub file_paths: Vec<String>,
}

/// What `mnemo trace SEQ [--path P] --json` prints: from the content event `seq` wrote (or the
/// file `path` held right after it), every later event that was shown some of it or carried it
/// on, re-derived by replaying the log (see `docs/auditors.md`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TraceReport {
    /// How many bytes were traced at the start: what the event wrote, or the file's content.
    pub bytes: u64,
    /// The erased events met while traced bytes lived in the tree: what each showed or carried
    /// cannot be re-derived, so the trace past the first is a lower bound.
    pub erased: Vec<u64>,
    /// The later events that met the traced bytes, in seq order.
    pub events: Vec<TracedEvent>,
    /// Whether the trace is exact: no erased event stood in its way and no grant hid part of it.
    pub exact: bool,
    /// The file the traced bytes were in right after `seq`.
    pub file: String,
    /// The files that hold traced bytes after the last event, with how many each holds.
    pub live: Vec<LiveFile>,
    /// What the trace counts and what it cannot see, one sentence each.
    pub notes: Vec<String>,
    /// The file asked for with `--path`, or `None` when the event's own bytes were traced.
    pub path: Option<String>,
    /// The event traced from.
    pub seq: u64,
    /// The last event the trace read (the log's end when it ran).
    pub through: u64,
}

/// A file that holds traced bytes when a trace ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LiveFile {
    /// How many of its bytes are traced ones.
    pub bytes: u64,
    /// Its path.
    pub path: String,
}

/// One event of a trace: the logged event, and what it did with the traced bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TracedEvent {
    /// The event.
    #[serde(flatten)]
    pub event: LoggedEvent,
    /// Its write left traced bytes in a file it wrote or moved (an edit that kept them, a
    /// rename of the file or of a directory above it).
    pub carried: bool,
    /// It is erased: what it showed or carried cannot be re-derived.
    pub erased_event: bool,
    /// The files holding traced bytes it met (after a move, where they went).
    pub files: Vec<String>,
    /// Its write took traced bytes out of the tree (an edit that replaced them, a delete, new
    /// content written over them).
    pub removed: bool,
    /// The answer its agent was given quoted traced bytes (a view's lines, an edit's snippet).
    pub shown: bool,
}

/// One event whole, as `mnemo show --json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShownEvent {
    /// The agent the event is attributed to.
    pub agent: String,
    /// The answer the model was given, re-derived by replaying the log up to the event.
    pub answer: String,
    /// The seq through which the chain was checked before the event was shown: every record
    /// from event 1 to it (the log's end), this event's included, recomputes its payload and
    /// chain hashes and links to the one before, and the chain leads to the store's head. 0 from
    /// a server that did not say (an older one).
    #[serde(default)]
    pub chained_through: u64,
    /// What the event changed in the tree or the policy; `None` for a read, an error or a
    /// retry.
    pub change: Option<EventChange>,
    /// The command, as [`LoggedEvent::command`].
    pub command: String,
    /// The call as it was sent: the `input` of the `tool_use` block for a parsed call, the raw
    /// text of a rejected one, the digest of one logged as a digest, the admin command.
    pub input: Value,
    /// Whether the answer was an error.
    pub is_error: bool,
    /// The paths the call names.
    pub paths: Vec<String>,
    /// For an erased event, the redaction that erased it.
    pub redaction: Option<Redaction>,
    /// The version of the command semantics that answered it.
    pub semantics: u32,
    /// The event's sequence number.
    pub seq: u64,
    /// When it was logged, UTC.
    pub time: String,
    /// When it was logged, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The `tool_use` block's id, when the call had one.
    pub tool_use_id: Option<String>,
    /// Whether the re-derived answer hashes to the outcome the event recorded. `false` means
    /// the log does not prove this answer: run `mnemo verify`.
    pub verified: bool,
}

/// What one event changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventChange {
    /// A file was created.
    Created {
        /// Its content as a unified diff against nothing.
        diff: String,
        /// Its path.
        path: String,
    },
    /// A file's content was replaced.
    Edited {
        /// The unified diff from the old content to the new.
        diff: String,
        /// Its path.
        path: String,
    },
    /// A file or a directory was removed, with the files under it.
    Deleted {
        /// The files that went with it.
        files: Vec<String>,
        /// What was removed.
        path: String,
    },
    /// A file or a directory was moved, with the files under it.
    Moved {
        /// The files that moved, as (old path, new path).
        files: Vec<(String, String)>,
        /// Where it was.
        from: String,
        /// Where it is.
        to: String,
    },
    /// The access policy, the token table or a setting changed.
    Policy {
        /// What changed, in words.
        what: String,
    },
}

impl EventChange {
    /// The kind, as `--json` names it: `created`, `edited`, `deleted`, `moved` or `policy`.
    pub fn kind(&self) -> &'static str {
        match self {
            EventChange::Created { .. } => "created",
            EventChange::Edited { .. } => "edited",
            EventChange::Deleted { .. } => "deleted",
            EventChange::Moved { .. } => "moved",
            EventChange::Policy { .. } => "policy",
        }
    }
}

/// The redaction that erased an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Redaction {
    /// The operator who redacted it.
    pub by: String,
    /// The reason the operator gave.
    pub reason: String,
    /// The redaction's own seq.
    pub seq: u64,
    /// When the redaction was logged, UTC.
    pub time: String,
}

/// How one file differs between two points of the log, as a line of `mnemo diff --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FileDiff {
    /// The unified diff from the content at the first point to the content at the second.
    pub diff: String,
    /// How it differs.
    pub kind: DiffKind,
    /// The file's path.
    pub path: String,
}

/// How a file differs between two points of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// Only at the second point.
    Added,
    /// Only at the first point.
    Removed,
    /// At both, with other content.
    Changed,
}

impl DiffKind {
    /// `added`, `removed` or `changed`.
    pub fn name(self) -> &'static str {
        match self {
            DiffKind::Added => "added",
            DiffKind::Removed => "removed",
            DiffKind::Changed => "changed",
        }
    }
}

/// The files under a directory, now or after an event, as `GET /v1/ls` sends them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Listing {
    /// The seq asked for (`None`: now).
    pub at: Option<u64>,
    /// The directory listed.
    pub dir: String,
    /// Its files, in path order.
    pub files: Vec<ListedFile>,
}

/// One file of a [`Listing`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListedFile {
    /// Its size in bytes.
    pub bytes: u64,
    /// The seq of the event that created it.
    pub created: u64,
    /// Its path.
    pub path: String,
    /// The seq of the event that last changed it.
    pub updated: u64,
}

impl ListedFile {
    /// Its size as `mnemo ls` and the memory tool's listings show it, such as `1.5K`.
    pub fn size_text(&self) -> String {
        crate::model::tool::format_size(self.bytes)
    }
}

/// An agent token as `mnemo token list --json` prints it and `GET /v1/tokens` sends it: never
/// its hash or its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenInfo {
    /// The agent the token acts as.
    pub agent: String,
    /// The token's id (the part of its text that names it).
    pub id: String,
    /// When it was issued, UTC.
    pub issued_at: String,
    /// The operator who issued it.
    pub issued_by: String,
    /// The seq of the admin event that issued it.
    pub issued_seq: u64,
    /// The label it was issued with.
    pub label: String,
    /// Its revocation, if it was revoked.
    pub revoked: Option<Revocation>,
}

/// A token's revocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Revocation {
    /// The operator who revoked it.
    pub by: String,
    /// The seq of the admin event that revoked it.
    pub seq: u64,
}

/// A verification's report, as `mnemo verify --json` prints it and `GET /v1/verify` sends it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Bytes of stored records checked.
    pub bytes: u64,
    /// The checkpoint to keep (`SEQ:HASH` of the last event), only for an intact log.
    pub checkpoint: Option<String>,
    /// Wall time spent, in milliseconds.
    pub elapsed_ms: f64,
    /// Events checked.
    pub events: u64,
    /// Events checked per second.
    pub events_per_sec: f64,
    /// The log's last event.
    pub head: Checkpoint,
    /// The index's applied seq.
    pub index_applied: u64,
    /// The highest seq the log holds a record for: what there was to check.
    pub log_last: u64,
    /// Megabytes (10^6 bytes) of records checked per second.
    pub mb_per_sec: f64,
    /// The head as recorded in the store's metadata.
    pub meta_head: u64,
    /// Its chain hash (hex).
    pub meta_head_hash: String,
    /// What an auditor must know of an intact report (such as a missing head record).
    pub notes: Vec<String>,
    /// The head the store recorded outside its database at its last commit or close.
    pub recorded_head: Option<u64>,
    /// Its chain hash (hex).
    pub recorded_head_hash: Option<String>,
    /// The events a redaction erased: their chain hashes verified, their answers not
    /// re-derivable, and no violation.
    pub redacted: Vec<Erased>,
    /// `intact`, `empty` (no events, nothing claims otherwise) or `violation`.
    pub status: String,
    /// The store, as the command that verified it names it.
    pub store: String,
    /// Broken invariants; empty means intact. Verification stops at the first; past a payload
    /// the value file lost it checks the chain alone, and names every other lost payload and
    /// the first break after it.
    pub violations: Vec<Finding>,
}

impl VerifyReport {
    /// Whether no invariant is broken.
    pub fn is_intact(&self) -> bool {
        self.violations.is_empty()
    }
}

/// An event and its chain hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Checkpoint {
    /// The chain hash (hex).
    pub hash: String,
    /// The seq.
    pub seq: u64,
}

/// An event a redaction erased.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Erased {
    /// The seq of the redaction that names it.
    pub by: u64,
    /// The erased event's seq.
    pub seq: u64,
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Finding {
    /// What is wrong there, in words.
    pub detail: String,
    /// Which invariant (see `ViolationKind::name`).
    pub kind: String,
    /// The first seq where it is broken.
    pub seq: u64,
}

/// `text` as it may be printed on a terminal: every control character (line breaks and escape
/// sequences included) and every character the store refuses in names as invisible (bidi
/// controls, zero-width characters) is written as `\u{HEX}`, and a backslash as `\\`, so a
/// logged string can neither forge a line of `mnemo log` nor hide or reorder what it shows.
/// Text with none of these is returned as it is.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c == '\\' || c.is_control() || crate::model::paths::is_invisible(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_line_is_a_log_line_and_its_file() {
        let event = LoggedEvent {
            agent: "a".into(),
            command: "view".into(),
            hash: "h".into(),
            is_error: false,
            paths: vec!["/memories".into()],
            prev_hash: "p".into(),
            result_hash: "r".into(),
            salt: None,
            semantics: 1,
            seq: 3,
            time: "t".into(),
            time_ms: 7,
            tool_use_id: None,
        };
        let line = serde_json::to_string(&event).unwrap_or_default();
        assert!(
            line.starts_with(r#"{"agent":"a","command":"view","hash""#),
            "{line}"
        );
        for file in [None, Some(2)] {
            let history = HistoryEvent {
                event: event.clone(),
                file,
                file_paths: file.map(|_| vec!["/memories/a".into()]).unwrap_or_default(),
            };
            let line = serde_json::to_string(&history).unwrap_or_default();
            assert!(line.contains(r#""file":"#), "{line}");
            let back: HistoryEvent = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, history);
        }
    }

    #[test]
    fn keys_print_sorted_as_the_json_objects_before_them_did() {
        let change = EventChange::Moved {
            files: vec![("/memories/a".into(), "/memories/b".into())],
            from: "/memories/a".into(),
            to: "/memories/b".into(),
        };
        let text = serde_json::to_string(&change).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"kind":"moved","files":[["/memories/a","/memories/b"]],"from":"/memories/a","to":"/memories/b"}"#
        );
        let back: EventChange = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, change);
        let diff = FileDiff {
            diff: "d".into(),
            kind: DiffKind::Added,
            path: "/memories/x".into(),
        };
        assert_eq!(
            serde_json::to_string(&diff).unwrap_or_default(),
            r#"{"diff":"d","kind":"added","path":"/memories/x"}"#
        );
    }
}

#[cfg(test)]
mod printable_tests {
    use super::printable;

    #[test]
    fn plain_text_is_borrowed_and_hostile_text_escaped() {
        assert!(matches!(
            printable("/memories/a b.md"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(printable("a\nb"), "a\\u{a}b");
        assert_eq!(printable("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(printable("r\u{202e}txt"), "r\\u{202e}txt");
        assert_eq!(printable("zero\u{200b}width"), "zero\\u{200b}width");
        // A backslash is doubled, so a name cannot mimic an escape.
        assert_eq!(printable("a\\u{a}"), "a\\\\u{a}");
        assert_eq!(printable("é ü 日本"), "é ü 日本");
    }
}

/// Which events `mnemo log` lists.
#[derive(Clone, Debug, Default)]
pub struct LogQuery {
    /// Only events of this agent.
    pub agent: Option<String>,
    /// Only events naming this path or a path under it.
    pub path: Option<MemPath>,
    /// Only events of this command (`create`, `view`, ..., or an admin command such as `redact`,
    /// as `mnemo log` names it).
    pub command: Option<String>,
    /// Only events whose result was an error (`Some(true)`) or was not (`Some(false)`).
    pub errors: Option<bool>,
    /// Only events recorded at or after this time (milliseconds since the Unix epoch, UTC).
    pub since_ms: Option<u64>,
    /// Only events recorded at or before this time (milliseconds since the Unix epoch, UTC).
    pub until_ms: Option<u64>,
    /// Start at this seq (1 when 0); with `before`, the lowest seq looked at.
    pub from: u64,
    /// Newest first: the events before this seq, from the newest down (`None`: oldest first,
    /// from `from` up).
    pub before: Option<u64>,
    /// At most this many events.
    pub limit: Option<usize>,
    /// Look at no more than this many events, whether they match or not, so that a filter that
    /// matches little costs a bounded read (a page of a long log): the next stretch starts
    /// where this one stopped.
    pub scan: Option<u64>,
}
