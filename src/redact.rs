//! Redaction: erasing chosen events' content from a store for real, while the rest of its history
//! still verifies.
//!
//! An erased event keeps its record's seq, hashes and header, and loses its payload and salt
//! (format 5, [`crate::event::ERASED_FORMAT`]): the chain hashed only the payload's commitment,
//! so every chain hash, and every checkpoint taken before, still verifies. A redaction is itself
//! an admin event ([`AdminCommand::Redact`]): the operator, the time, the reason and the seqs
//! erased, never the content.
//!
//! What is erased is the selection closed over what depends on it ([`plan`]): the log is
//! replayed with the chosen events skipped, and every other event whose answer then differs
//! from the one it recorded (a view that showed an erased file, an edit of it, a rename that
//! moved it, a retry of an erased call) is erased too, and skipped in turn. What is left
//! re-derives every answer it recorded, so the verifier skips the erased events and checks the
//! rest as before. For a text, a file of the tree left that still holds it (pieced together by
//! edits none of which held it whole) has every event that named it erased, until no file does;
//! and an event that leaves a text in a file it touched (in its content, or in a path a rename
//! made) is erased in the same replay. A text in what a redaction keeps (an agent name, a
//! tool_use id, an admin event, the reason, the operator's name, sled's own names) is refused.
//!
//! Chosen by seq alone (`mnemo redact --seq`, a memory version redacted through the
//! memory-stores API), an event is erased keeping what it did to the tree ([`Kept`]: where it
//! wrote, moved or deleted, and the SHA-256 and length of what it wrote, never the content), and
//! so is every event erased with it: the closing replay applies each kept effect with the content
//! a placeholder ([`Projection::apply_kept`]) beside a replay of the log as it is, which says what
//! each event did. So a memory keeps its identity and a later write's precondition still holds,
//! and what is erased with the chosen event is what showed or built on its content. Such a
//! redaction must leave the live tree exactly as it is ([`Plan::live`]): one that would change a
//! live file (its current content, or a deleted file brought back) is refused. The redaction's
//! event commits to every kept effect by its digest ([`kept_digest`]).
//!
//! The store is rewritten, not edited ([`redact`]): sled keeps overwritten values in its log
//! until it rewrites a segment, so the erased bytes would stay in `db`. The plan and the copy are
//! made from a read-only copy of the store, so a refused redaction changes no byte of it: the
//! whole store is copied into a new sled directory beside it (erased records in place of the
//! chosen ones, the redaction appended, the index rebuilt by replay and the copy verified and
//! scanned for the texts), made durable; only then is the store opened for writing, checked to
//! have taken no write meanwhile, and exchanged with the copy in one atomic
//! `renameat2(RENAME_EXCHANGE)`; the old directory is then removed. A crash before the exchange leaves the store as it was (and a directory
//! `.NAME.redact-*` beside it, which the next redaction removes, with the directory a killed
//! creation of that copy leaves); after it, the redacted store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::client::MnemoClient;
use crate::disk::{parent_of, redaction_prefix, remove_redaction_leftovers};
use crate::error::{Error, Result};
use crate::event::{Body, Event, Frame, Header, Kept, Outcome, Salt, Seq, kept_digest};
use crate::history::describe;
use crate::kv::UndoKv;
use crate::lineage::Files;
use crate::log::{Durability, Head, Store};
use crate::paths::MemPath;
use crate::policy::{AdminCommand, DELETE_ERASES, DELETE_SETTING};
use crate::projection::Projection;
use crate::protocol::printable;
use crate::replay::Replay;
use crate::tool::Semantics;
use crate::verify::verify_store;

/// The longest reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// How many times a text found again in the tree left may widen the erasure.
const MAX_ROUNDS: usize = 64;

/// What to erase: events by seq, everything that named a path (a file, or a directory's
/// subtree), everything whose input or answer held a text. At least one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Events by seq.
    pub seqs: Vec<Seq>,
    /// Paths such as `/memories/pin.txt` or `/memories/people`.
    pub paths: Vec<String>,
    /// Texts, such as a password pasted by mistake.
    pub texts: Vec<String>,
}

/// What a redaction erases: the seqs, and the paths their events named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The events to erase, ascending.
    pub seqs: Vec<Seq>,
    /// Of them, those whose records keep what the event did to the tree (a redaction by seq
    /// only: see the module docs), and what each keeps.
    pub kept: BTreeMap<Seq, Kept>,
    /// A redaction by seq only: the live files whose content (or existence) the erasure would
    /// change, with why. A plan that names any is refused: erasing a version a file has moved
    /// past is allowed, erasing what a file holds now is not (update or delete it first).
    pub live: Vec<String>,
    /// The paths the erased events named, in order.
    pub paths: Vec<String>,
    /// With texts chosen: the events left that keep only a digest of an input too large (or
    /// too malformed) to log whole, past whose kept start a text may lie unseen. They were not
    /// searched and are not erased; [`Plan::summary`] says so, and how to erase them.
    pub unsearched: Vec<Seq>,
}

/// A redaction done: what it erased and the seq of the admin event that records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redacted {
    /// What was erased.
    pub plan: Plan,
    /// The redaction's own event.
    pub seq: Seq,
}

impl Selection {
    /// The selection as `POST /v1/redact` takes it: `{"seqs", "paths", "texts"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seqs": self.seqs.iter().map(|s| s.0).collect::<Vec<_>>(),
            "paths": self.paths,
            "texts": self.texts,
        })
    }
}

impl Plan {
    /// What `mnemo redact --dry-run` prints: `would erase N events: 1, 2` and a line per path
    /// (or that nothing matches).
    pub fn summary(&self) -> String {
        if self.seqs.is_empty() {
            return format!(
                "nothing in the log matches what was chosen; a redaction would erase nothing\n{}",
                self.unsearched_note()
            );
        }
        let mut out = format!(
            "would erase {} events: {}\n",
            self.seqs.len(),
            listed(&self.seqs)
        );
        for path in &self.paths {
            out.push_str(&format!("  {}\n", printable(path)));
        }
        out.push_str(&self.unsearched_note());
        out
    }

    /// The line that names the events a text search could not look into, if there are any.
    fn unsearched_note(&self) -> String {
        if self.unsearched.is_empty() {
            return String::new();
        }
        format!(
            "note: {} event(s) keep only a digest of an input too large or malformed to log whole ({}): past the first {} bytes it was never kept, so a text there could not be searched; if it may be there, erase them by seq (--seq N, \"seqs\" over HTTP)\n",
            self.unsearched.len(),
            listed(&self.unsearched),
            crate::tool::request::DIGEST_PREFIX_BYTES
        )
    }

    /// The plan as `POST /v1/redact` answers it: `{"seqs", "kept", "paths", "unsearched",
    /// "live"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seqs": self.seqs.iter().map(|s| s.0).collect::<Vec<_>>(),
            "kept": self.kept.keys().map(|s| s.0).collect::<Vec<_>>(),
            "live": self.live,
            "paths": self.paths,
            "unsearched": self.unsearched.iter().map(|s| s.0).collect::<Vec<_>>(),
        })
    }

    #[cfg(feature = "client")]
    fn from_json(answer: &serde_json::Value) -> Option<Plan> {
        Some(Plan {
            seqs: answer["seqs"]
                .as_array()?
                .iter()
                .map(|s| s.as_u64().map(Seq))
                .collect::<Option<_>>()?,
            paths: answer["paths"]
                .as_array()?
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
            unsearched: answer["unsearched"]
                .as_array()
                .map(|all| all.iter().filter_map(|s| s.as_u64().map(Seq)).collect())
                .unwrap_or_default(),
            // What a kept effect holds stays on the server; the plan names its seqs.
            kept: BTreeMap::new(),
            live: answer["live"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

impl Redacted {
    /// What `mnemo redact` prints: `redacted N events (1, 2); event S records it`, and the
    /// events a text search could not look into, if any.
    pub fn summary(&self) -> String {
        format!(
            "redacted {} events ({}); event {} records it\n{}",
            self.plan.seqs.len(),
            listed(&self.plan.seqs),
            self.seq,
            self.plan.unsearched_note()
        )
    }
}

fn listed(seqs: &[Seq]) -> String {
    seqs.iter()
        .map(|s| s.0.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Redaction through a client: of the store open in this process, or of a served store through
/// its server's `POST /v1/redact` (which only the operator may call).
impl MnemoClient {
    /// Erases what `selection` chooses from the store, and every event whose answer depended on
    /// it ([`plan`]), recorded as a redaction by this client's agent (the operator) for
    /// `reason`: durable, and gone from the store's directory, when it returns. A store open in
    /// this process is closed meanwhile: calls wait until it is open again (as long as the
    /// rewrite takes, which grows with the log). A refused redaction changes nothing.
    pub fn redact(&self, reason: &str, selection: &Selection) -> Result<Redacted> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            let mut body = selection.to_json();
            body["reason"] = reason.into();
            let answer = redact_served(&remote, &body)?;
            let plan = Plan::from_json(&answer);
            return match (plan, answer["seq"].as_u64()) {
                (Some(plan), Some(seq)) => Ok(Redacted {
                    plan,
                    seq: Seq(seq),
                }),
                _ => Err(unexpected(&remote, &answer)),
            };
        }
        let operator = self.agent_id().to_string();
        self.closed_for("the store is being redacted", |path| {
            redact(path, &operator, reason, selection)
        })
    }

    /// [`redact`](Self::redact), recorded under `operator` rather than this client's agent (a
    /// server redacting for the holder of its operator token). Through a server, the server
    /// records who asked.
    pub fn redact_as(
        &self,
        operator: &str,
        reason: &str,
        selection: &Selection,
    ) -> Result<Redacted> {
        #[cfg(feature = "client")]
        if self.remote().is_some() {
            return self.redact(reason, selection);
        }
        self.closed_for("the store is being redacted", |path| {
            redact(path, operator, reason, selection)
        })
    }

    /// Under the store setting `delete` = `erase`: erases the files the delete at `seq` removed,
    /// each with its whole history, recorded as a redaction by this client's agent (whose delete
    /// it was). The reason names the setting and the seq, never a path (which may be what is
    /// erased).
    pub(crate) fn erase_deleted(&self, seq: Seq) -> Result<Redacted> {
        let operator = self.agent_id().to_string();
        let reason = format!(
            "the store's setting {DELETE_SETTING} = {DELETE_ERASES}: the files event {seq} deleted"
        );
        self.closed_for("the store is being redacted", |path| {
            redact_with(path, &operator, &reason, &Selection::default(), Some(seq))
        })
    }

    /// What [`redact`](Self::redact) would erase for `selection`, changing nothing.
    pub fn redaction_plan(&self, selection: &Selection) -> Result<Plan> {
        #[cfg(feature = "client")]
        if let Some(remote) = self.remote() {
            let mut body = selection.to_json();
            body["dry_run"] = true.into();
            let answer = redact_served(&remote, &body)?;
            return Plan::from_json(&answer).ok_or_else(|| unexpected(&remote, &answer));
        }
        self.read_local(|store| plan(store, selection))
    }
}

/// `POST /v1/redact` with `body`: the answer, or the server's refusal as the error the store
/// would have given.
#[cfg(feature = "client")]
fn redact_served(
    remote: &crate::remote::RemoteClient,
    body: &serde_json::Value,
) -> Result<serde_json::Value> {
    let (status, bytes) = remote.admin(crate::remote::AdminRequest::Post {
        route: "/v1/redact",
        body,
    })?;
    let answer: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    match (status, answer["error"].as_str()) {
        (200..=299, _) => Ok(answer),
        (400, Some(why)) => Err(Error::InvalidArgument(why.to_string())),
        (_, why) => Err(Error::Server {
            reason: format!(
                "{} answered {status} to POST /v1/redact: {}",
                remote.url(),
                why.map_or_else(
                    || String::from_utf8_lossy(&bytes).into_owned(),
                    str::to_string
                )
            ),
            unreachable: false,
            status: Some(status),
        }),
    }
}

#[cfg(feature = "client")]
fn unexpected(remote: &crate::remote::RemoteClient, answer: &serde_json::Value) -> Error {
    Error::Server {
        reason: format!(
            "{} answered POST /v1/redact with {answer}, not a redaction; is it a mnemo serve of this version?",
            remote.url()
        ),
        unreachable: false,
        status: None,
    }
}

/// Checks a redaction's reason: 1 to [`MAX_REASON_BYTES`] bytes of printable text.
pub fn check_reason(reason: &str) -> std::result::Result<(), String> {
    if reason.trim().is_empty()
        || reason.len() > MAX_REASON_BYTES
        || reason.chars().any(char::is_control)
    {
        return Err(format!(
            "the reason is not valid; give 1 to {MAX_REASON_BYTES} bytes of printable text, such as --reason \"user asked to be forgotten\""
        ));
    }
    Ok(())
}

/// The events of `store`'s log, decoded, in seq order.
fn events(store: &Store) -> impl Iterator<Item = Result<Event>> + use<> {
    store.records(Seq(1)).map(|item| Event::decode(&item?.1))
}

/// Whether `event` is the policy's history (grants, tokens, redactions), which is never erased.
fn is_admin(event: &Event) -> bool {
    matches!(event.body, Body::Admin(_))
}

/// The canonical paths `event` named (none for admin and erased events).
fn named(event: &Event) -> Vec<String> {
    if is_admin(event) {
        return Vec::new();
    }
    describe(event).1
}

/// A rejected call's raw input: as received, and with the escapes a JSON string may hold
/// decoded (`\u005A` is `Z`), so that a redaction by text or path finds what it spells.
fn rejected_input(event: &Event) -> Option<(String, String)> {
    match &event.body {
        Body::Rejected(call) => Some((call.input.clone(), json_unescaped(&call.input))),
        _ => None,
    }
}

/// `text` with every JSON string escape in it decoded, leniently: an escape that is not one is
/// kept as it is (the input was rejected, so it need not be valid JSON).
fn json_unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (decoded, used) = unescape_one(rest);
        match decoded {
            Some(c) => out.push(c),
            None => out.push_str(&rest[..used]),
        }
        rest = &rest[used..];
    }
    out.push_str(rest);
    out
}

/// The character the escape at the start of `text` (which starts with `\`) stands for, and
/// how many bytes it took; `None` (one byte taken) for a backslash that starts no escape.
fn unescape_one(text: &str) -> (Option<char>, usize) {
    let bytes = text.as_bytes();
    let simple = match bytes.get(1) {
        Some(b'"') => Some('"'),
        Some(b'\\') => Some('\\'),
        Some(b'/') => Some('/'),
        Some(b'b') => Some('\u{8}'),
        Some(b'f') => Some('\u{c}'),
        Some(b'n') => Some('\n'),
        Some(b'r') => Some('\r'),
        Some(b't') => Some('\t'),
        _ => None,
    };
    if simple.is_some() {
        return (simple, 2);
    }
    let unit = |at: usize| {
        text.get(at..at + 6)
            .and_then(|s| s.strip_prefix("\\u"))
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
    };
    match unit(0) {
        Some(high @ 0xD800..=0xDBFF) => match unit(6) {
            Some(low @ 0xDC00..=0xDFFF) => (
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)),
                12,
            ),
            _ => (None, 1),
        },
        Some(code) => match char::from_u32(code) {
            Some(c) => (Some(c), 6),
            None => (None, 1),
        },
        None => (None, 1),
    }
}

fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/') || prefix.ends_with('/'))
}

/// What to erase in `store` for `selection`: the chosen events and every event whose recorded
/// answer depends on them (see the module docs). Reads the log; writes nothing.
pub fn plan(store: &Store, selection: &Selection) -> Result<Plan> {
    plan_with(store, selection, None)
}

/// [`plan`], also choosing every event of the files the delete at `deleted_by` removed (each
/// followed by identity through its renames): what the setting `delete` = `erase` erases.
fn plan_with(store: &Store, selection: &Selection, deleted_by: Option<Seq>) -> Result<Plan> {
    if selection.seqs.is_empty()
        && selection.paths.is_empty()
        && selection.texts.is_empty()
        && deleted_by.is_none()
    {
        return Err(Error::InvalidArgument(
            "say what to erase: events by seq, paths or texts (--seq N, --path PATH or --text STRING, each may be repeated; \"seqs\", \"paths\" and \"texts\" over HTTP)"
                .into(),
        ));
    }
    let head = store.log_end()?;
    let mut chosen = BTreeSet::new();
    for seq in &selection.seqs {
        if seq.0 == 0 || *seq > head.seq {
            return Err(Error::InvalidArgument(format!(
                "there is no event {seq}: the log holds events 1 to {}",
                head.seq
            )));
        }
        chosen.insert(*seq);
    }
    let prefixes = selection
        .paths
        .iter()
        .map(|raw| {
            MemPath::absolute(raw)
                .map(|p| p.to_string())
                .map_err(|why| {
                    Error::InvalidArgument(format!(
                        "the path {}: {why}",
                        Semantics::CURRENT.quote(raw)
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    if selection.texts.iter().any(String::is_empty) {
        return Err(Error::InvalidArgument(
            "a text to erase must not be empty: every event would match".into(),
        ));
    }
    let texts: Vec<&[u8]> = selection.texts.iter().map(|t| t.as_bytes()).collect();
    // Events by path and by input; answers that held a text, and the files that lived under a
    // path (followed by identity through renames), need a replay of the whole log.
    let mut replay =
        (!texts.is_empty() || !prefixes.is_empty() || deleted_by.is_some()).then(Replay::in_memory);
    let mut files = Files::default();
    // Per file, the events that touched it and the paths each named.
    let mut touched: BTreeMap<u64, Vec<(Seq, Vec<String>)>> = BTreeMap::new();
    let mut deleted = Vec::new();
    let mut unsearched = Vec::new();
    for event in events(store) {
        let event = event?;
        let answer = match replay.as_mut() {
            Some(replay) => {
                let traced = replay.apply(&event)?;
                let (named, ids) = files.observe(&event, traced.answer.change.as_ref());
                let named: Vec<String> = named.iter().map(MemPath::to_string).collect();
                for id in ids {
                    touched
                        .entry(id)
                        .or_default()
                        .push((event.seq, named.clone()));
                    if Some(event.seq) == deleted_by {
                        deleted.push(id);
                    }
                }
                traced.answer.text
            }
            None => String::new(),
        };
        // Only a text is looked for in the payload.
        let payload = if texts.is_empty() {
            Vec::new()
        } else {
            event.payload_bytes()
        };
        // What is never erased must not hold a text to erase: the redaction would leave it.
        let header = [
            Some(event.header.agent.as_str()),
            event.header.tool_use_id.as_deref(),
        ];
        if let Some(text) = selection.texts.iter().find(|t| {
            header.iter().flatten().any(|h| h.contains(t.as_str()))
                || (is_admin(&event) && contains(&payload, t.as_bytes()))
        }) {
            return Err(Error::InvalidArgument(format!(
                "event {} holds {} where a redaction keeps it (an agent name, a tool_use id, or an admin event: a grant, a token or a redaction), so it cannot be erased; nothing was changed",
                event.seq,
                Semantics::CURRENT.quote(text)
            )));
        }
        if is_admin(&event) {
            if chosen.contains(&event.seq) {
                return Err(refused_admin(event.seq));
            }
            continue;
        }
        if !texts.is_empty() && keeps_part(&event) {
            unsearched.push(event.seq);
        }
        // A rejected raw input names no path the index knows, and may spell a text with JSON
        // escapes: it is searched as received and as a JSON string would decode it.
        let raw = rejected_input(&event);
        if named(&event)
            .iter()
            .any(|p| prefixes.iter().any(|prefix| under(p, prefix)))
            || raw.as_ref().is_some_and(|(received, decoded)| {
                prefixes.iter().any(|prefix| {
                    received.contains(prefix.as_str()) || decoded.contains(prefix.as_str())
                })
            })
            || texts.iter().any(|t| {
                contains(&payload, t)
                    || contains(answer.as_bytes(), t)
                    || raw
                        .as_ref()
                        .is_some_and(|(_, decoded)| contains(decoded.as_bytes(), t))
            })
        {
            chosen.insert(event.seq);
        }
    }
    // A file that ever lived under a path chosen, or that the delete removed: its whole
    // history, under every name it had. Only the events that named the file itself hold its
    // name or content: a rename or delete of a directory above it names the directory, and is
    // erased only if erasing the file changes its answer (the closure below), so the other files
    // it moved keep their history.
    for (id, paths) in files.paths() {
        if deleted.contains(id)
            || paths
                .iter()
                .any(|p| prefixes.iter().any(|prefix| under(p, prefix)))
        {
            for (seq, named) in touched.remove(id).unwrap_or_default() {
                if named.iter().any(|n| paths.contains(n)) {
                    chosen.insert(seq);
                }
            }
        }
    }
    // Chosen by seq alone, an event's erasure keeps what it did to the tree, so the versions
    // after it re-derive, and must leave every live file as it is.
    let keep = selection.paths.is_empty() && selection.texts.is_empty() && deleted_by.is_none();
    for _ in 0..MAX_ROUNDS {
        let (plan, left) = close(store, &chosen, &texts, keep)?;
        let found: Vec<String> = left
            .iter()
            .filter(|(_, content)| texts.iter().any(|t| contains(content.as_bytes(), t)))
            .map(|(path, _)| path.clone())
            .collect();
        if found.is_empty() {
            let unsearched = unsearched
                .into_iter()
                .filter(|s| !plan.seqs.contains(s))
                .collect();
            return Ok(Plan { unsearched, ..plan });
        }
        // A file left holds the text: erase every event that named it.
        let before = plan.seqs.len();
        chosen = plan.seqs.into_iter().collect();
        for event in events(store) {
            let event = event?;
            if named(&event).iter().any(|p| found.contains(p)) {
                chosen.insert(event.seq);
            }
        }
        if chosen.len() == before {
            return Err(Error::InvalidArgument(format!(
                "the text is still in {} after every event that named it would be erased; nothing was changed",
                found.join(", ")
            )));
        }
    }
    Err(Error::InvalidArgument(
        "the erasure did not settle; redact by --path or --seq instead; nothing was changed".into(),
    ))
}

/// Whether the event keeps only part of its input: a digest whose kept start is shorter than
/// the input, past which a text may lie unseen, or that is not the input's bytes (an input that
/// is not UTF-8 keeps its start decoded, each invalid sequence made U+FFFD, so a text between
/// them is not there to find).
fn keeps_part(event: &Event) -> bool {
    matches!(&event.body, Body::RejectedDigest(d)
        if d.input.len > d.input.prefix.len() as u64
            || matches!(d.refusal, crate::event::Refusal::NotUtf8 { .. })
            || d.input.prefix.contains('\u{FFFD}'))
}

/// Why a redaction by seq that would change live files is refused, and what to do instead.
pub fn refused_live(plan: &Plan) -> String {
    format!(
        "erasing event(s) {} would change what the store holds now: {}; a redaction by seq erases versions a file has moved past, never its current content: update or delete the file first, then redact (or erase the file with its whole history: --path, \"paths\" over HTTP); nothing was changed",
        listed(&plan.seqs),
        plan.live.join("; ")
    )
}

fn refused_admin(seq: Seq) -> Error {
    Error::InvalidArgument(format!(
        "event {seq} is an admin event (a grant, a token or a redaction): the policy's history is never erased; choose memory-tool events"
    ))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A file of the tree a redaction leaves: its path and content.
type FileLeft = (String, String);

/// Whether a file the event named (or one under a directory it named) holds one of `texts`, in
/// its path or its content, in the tree after it: a text pieced together by edits or a rename
/// that no input or answer held whole.
fn makes_text(tree: &Projection<UndoKv>, event: &Event, texts: &[&[u8]]) -> Result<bool> {
    if texts.is_empty() {
        return Ok(false);
    }
    for raw in named(event) {
        let Ok(path) = MemPath::absolute(&raw) else {
            continue;
        };
        for record in tree.records_under(&path)? {
            if texts.iter().any(|t| {
                contains(record.path.as_bytes(), t) || contains(record.content.as_bytes(), t)
            }) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `chosen` closed over what depends on it: replays the log skipping the chosen events, and
/// erases every other event whose answer then differs from its recorded one, or that leaves one
/// of `texts` in a file it touched (skipping it in turn). Events an earlier redaction erased are
/// not erased again. With `keep`, an erased event keeps what it did to the tree (its change as
/// the log made it, content as a digest: [`Kept`]) instead of being skipped, and the plan names
/// the live files the erasure would change. Returns the plan and the files left (path, content).
fn close(
    store: &Store,
    chosen: &BTreeSet<Seq>,
    texts: &[&[u8]],
    keep: bool,
) -> Result<(Plan, Vec<FileLeft>)> {
    let mut erased = chosen.clone();
    let mut kept_effects = BTreeMap::new();
    let mut paths: Vec<String> = Vec::new();
    let mut erase = |event: &Event, erased: &mut BTreeSet<Seq>| {
        erased.insert(event.seq);
        for path in named(event) {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    };
    let mut replay = Replay::resume(Projection::new(UndoKv::default()))?;
    // With `keep`, the log as it is, for what each event did and for the live tree.
    let mut original = keep
        .then(|| Replay::resume(Projection::new(UndoKv::default())))
        .transpose()?;
    for event in events(store) {
        let event = event?;
        if let Body::Erased(_) = event.body {
            erased.remove(&event.seq);
            replay.apply(&event)?;
            if let Some(original) = original.as_mut() {
                original.apply(&event)?;
            }
            continue;
        }
        let did = match original.as_mut() {
            Some(original) => {
                let by_api = matches!(event.body, Body::Api(_));
                let traced = original.apply(&event)?;
                traced
                    .answer
                    .change
                    .as_ref()
                    .and_then(|change| Kept::of(change, by_api))
            }
            None => None,
        };
        let mut erase_keeping =
            |event: &Event, erased: &mut BTreeSet<Seq>, replay: &mut Replay<_>| {
                erase(event, erased);
                if let Some(kept) = &did {
                    kept_effects.insert(event.seq, kept.clone());
                }
                replay.apply(&event.erased_keeping(did.clone()))
            };
        if erased.contains(&event.seq) {
            erase_keeping(&event, &mut erased, &mut replay)?;
            continue;
        }
        replay.tree_mut().kv_mut().begin();
        let placeholders = replay.tree().placeholders().clone();
        let traced = replay.apply(&event)?;
        let same =
            event.outcome_of(traced.answer.is_error, &traced.answer.text) == event.header.outcome;
        // An edit of erased content (an insert, a str_replace: not a write of whole content)
        // carries it on, whatever its answer showed: erased with it, keeping what it did.
        let edits_erased = !placeholders.is_empty()
            && edits_in_place(&event)
            && edited_placeholder(replay.tree(), traced.answer.change.as_ref(), &placeholders)?;
        if !same || edits_erased || (!is_admin(&event) && makes_text(replay.tree(), &event, texts)?)
        {
            if is_admin(&event) {
                return Err(Error::InvalidArgument(format!(
                    "erasing what was chosen would change the answer of admin event {}; nothing was changed",
                    event.seq
                )));
            }
            replay.tree_mut().kv_mut().rollback();
            replay.tree_mut().restore_placeholders(placeholders);
            erase_keeping(&event, &mut erased, &mut replay)?;
        }
    }
    let root = MemPath::absolute("/").map_err(Error::InvalidArgument)?;
    let records = replay.tree().records_under(&root)?;
    let live = match &original {
        Some(original) => changed_live(&original.tree().records_under(&root)?, &records),
        None => Vec::new(),
    };
    let left = records.into_iter().map(|r| (r.path, r.content)).collect();
    let plan = Plan {
        seqs: erased.into_iter().collect(),
        kept: kept_effects,
        live,
        paths,
        unsearched: Vec::new(),
    };
    Ok((plan, left))
}

/// Whether `event` changes a file's content from what it held (a memory-tool `str_replace` or
/// `insert`), rather than writing whole content (a `create`, an API write).
fn edits_in_place(event: &Event) -> bool {
    matches!(&event.body, Body::Tool(call) if matches!(
        call.command,
        crate::tool::Command::StrReplace { .. } | crate::tool::Command::Insert { .. }
    ))
}

/// Whether `change` wrote to a file that held a redaction's placeholder (one of `before`, by
/// identity) before it ran.
fn edited_placeholder(
    tree: &Projection<UndoKv>,
    change: Option<&crate::tool::Change>,
    before: &crate::projection::Placeholders,
) -> Result<bool> {
    use crate::tool::{Change, Tree};
    let path = match change {
        Some(Change::Write { path, .. } | Change::Rewrite { to: path, .. }) => path,
        _ => return Ok(false),
    };
    Ok(tree
        .created(path)?
        .is_some_and(|created| before.contains_key(&created)))
}

/// The live files (`now`) that the tree an erasure leaves (`left`) does not hold as they are:
/// gone, holding other content (a redaction's placeholder), or in their place a file that is not.
fn changed_live(
    now: &[crate::projection::MemoryRecord],
    left: &[crate::projection::MemoryRecord],
) -> Vec<String> {
    let left_at: BTreeMap<&str, &crate::projection::MemoryRecord> =
        left.iter().map(|r| (r.path.as_str(), r)).collect();
    let now_at: BTreeSet<&str> = now.iter().map(|r| r.path.as_str()).collect();
    let mut out = Vec::new();
    for file in now {
        match left_at.get(file.path.as_str()) {
            None => out.push(format!("{} would be gone", file.path)),
            Some(after) if after.created != file.created => {
                out.push(format!("{} would be another file", file.path))
            }
            Some(after) if after.content != file.content => out.push(format!(
                "{} holds content the erased events wrote (its current version)",
                file.path
            )),
            Some(_) => {}
        }
    }
    for file in left {
        if !now_at.contains(file.path.as_str()) {
            out.push(format!("{} would come back (it was deleted)", file.path));
        }
    }
    out
}

/// The directory beside `store` a redaction writes the new store into.
fn sibling(store: &Path, tag: &str) -> Result<PathBuf> {
    Ok(parent_of(store).join(redaction_prefix(store)? + tag))
}

/// Erases from the store at `path` what `selection` chooses ([`plan`]), recorded as a redaction
/// by `operator` for `reason`; durable and gone from the store's directory when it returns. The
/// store must not be open elsewhere (a server holding it makes this [`Error::Locked`]).
pub fn redact(
    path: &Path,
    operator: &str,
    reason: &str,
    selection: &Selection,
) -> Result<Redacted> {
    redact_with(path, operator, reason, selection, None)
}

/// [`redact`], also erasing the files the delete at `deleted_by` removed ([`plan_with`]).
fn redact_with(
    path: &Path,
    operator: &str,
    reason: &str,
    selection: &Selection,
    deleted_by: Option<Seq>,
) -> Result<Redacted> {
    check_reason(reason).map_err(Error::InvalidArgument)?;
    crate::policy::check_agent_id(operator).map_err(Error::InvalidArgument)?;
    if !selection.texts.iter().any(String::is_empty) {
        if let Some(text) = selection
            .texts
            .iter()
            .find(|t| reason.contains(t.as_str()) || operator.contains(t.as_str()))
        {
            return Err(Error::InvalidArgument(format!(
                "the reason or the operator's name holds {}, and the redaction keeps both, so nothing was changed; give them without it",
                Semantics::CURRENT.quote(text)
            )));
        }
    }
    // Planned and copied from a read-only copy of the store, so a refused redaction changes no
    // byte of it; the store is opened for writing only to exchange it, once the copy is whole.
    let source = Store::open_current_read_only(path)?;
    let plan = plan_with(&source, selection, deleted_by)?;
    if !plan.live.is_empty() {
        return Err(Error::InvalidArgument(refused_live(&plan)));
    }
    if plan.seqs.is_empty() {
        return Err(Error::InvalidArgument(
            format!(
                "nothing in the log matches what was chosen; nothing was changed\n{}",
                plan.unsearched_note()
            )
            .trim_end()
            .to_string(),
        ));
    }
    let head = source.log_end()?;
    let tag = crate::token::random_hex(8).map_err(|e| Error::io("the OS random source", e))?;
    let new = sibling(path, &tag)?;
    let written = private_like(path, &new)
        .and_then(|()| write_redacted(&source, &new, &plan, head, operator, reason))
        .and_then(|seq| {
            same_access(path, &new)?;
            Ok(seq)
        })
        .and_then(|seq| {
        // Last, the bytes: a text that is still anywhere in the copy (in sled's own names, say)
        // would be left by this redaction, which then does not happen.
        for text in &selection.texts {
            if let Some(file) = holding(&new, text.as_bytes())? {
                return Err(Error::InvalidArgument(format!(
                    "{} would still be in the store's own files ({file}: sled's names or a field every redaction keeps), so it cannot be erased; nothing was changed",
                    Semantics::CURRENT.quote(text)
                )));
            }
        }
        Ok(seq)
    });
    drop(source);
    let exchanged = written.and_then(|seq| {
        let store = Store::open_existing(path)?;
        if store.log_end()? != head {
            return Err(Error::InvalidArgument(
                "the store took a write while it was being redacted, so nothing was changed; run the redaction again (with no writer using the store)".into(),
            ));
        }
        remove_redaction_leftovers(path, Some(&tag))?;
        // A server redacting the store it holds stays findable in the new one, and the owner's
        // signing key stays.
        crate::disk::carry_own_files(path, &new)?;
        exchange(&new, path)?;
        sync_parent(path)?;
        Ok((seq, store))
    });
    let (seq, store) = match exchanged {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&new);
            return Err(e);
        }
    };
    drop(store);
    // `new` now names the old store.
    match std::fs::remove_dir_all(&new) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("the store as it was before", e)),
    }
    sync_parent(path)?;
    Ok(Redacted { plan, seq })
}

/// Writes the redacted copy of `store` (whose log ends at `head`) into `new`, verified and
/// durable; returns the seq of the redaction's event.
fn write_redacted(
    store: &Store,
    new: &Path,
    plan: &Plan,
    head: Head,
    operator: &str,
    reason: &str,
) -> Result<Seq> {
    let copy = Store::open(new)?;
    let erased: BTreeSet<Seq> = plan.seqs.iter().copied().collect();
    let mut batch = Vec::with_capacity(256);
    for item in store.records(Seq(1)) {
        let (seq, record) = item?;
        if seq > head.seq {
            break;
        }
        let frame = if erased.contains(&seq) {
            Event::decode(&record)?
                .erased_keeping(plan.kept.get(&seq).cloned())
                .to_frame()
        } else {
            Frame::decode(&record)?
        };
        batch.push(frame);
        if batch.len() == batch.capacity() {
            copy.append(&batch)?;
            batch.clear();
        }
    }
    let body = Body::Admin(AdminCommand::Redact {
        reason: reason.to_string(),
        seqs: plan.seqs.iter().map(|s| s.0).collect(),
        kept: plan
            .kept
            .iter()
            .map(|(seq, kept)| (seq.0, kept_digest(kept)))
            .collect(),
    });
    let salt = Salt::random()?;
    let answer = crate::tool::answer(
        &Projection::new(crate::kv::MemKv::default()),
        operator,
        &body,
        Semantics::CURRENT,
    )?;
    let seq = Seq(head.seq.0 + 1);
    let event = Event {
        seq,
        prev_hash: head.hash,
        header: Header {
            time_ms: crate::time::now_ms(),
            agent: operator.to_string(),
            tool_use_id: None,
            outcome: Outcome::under(Some(&salt), answer.is_error, &answer.text),
            semantics: Semantics::CURRENT,
        },
        body,
        salt: Some(salt),
    };
    batch.push(event.to_frame());
    let head = copy.append(&batch)?;
    copy.catch_up()?;
    copy.sync(Durability::Fsync)?;
    copy.record_head(head)?;
    let report = verify_store(&copy)?;
    if !report.is_intact() {
        return Err(Error::corrupt(format!(
            "the redacted copy does not verify ({:?}); nothing was changed",
            report.violations.first()
        )));
    }
    Ok(seq)
}

/// Makes the directory `new` with the permissions and owner of the store at `store`, before
/// anything is written in it: a store only its owner may read gives no one else a moment's look
/// at its copy. (An empty directory's permissions are what [`Store::open`] gives a new store.)
fn private_like(store: &Path, new: &Path) -> Result<()> {
    let meta = std::fs::metadata(store).map_err(|e| Error::io(store, e))?;
    std::fs::create_dir(new).map_err(|e| Error::io(new, e))?;
    std::fs::set_permissions(new, meta.permissions()).map_err(|e| Error::io(new, e))?;
    owned_like(new, &meta)
}

/// Gives `path` the owner and group `like` has, when they are not this process's (the
/// superuser redacting another user's store); an unprivileged owner's own files need nothing.
fn owned_like(path: &Path, like: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let here = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if (here.uid(), here.gid()) != (like.uid(), like.gid()) {
        std::os::unix::fs::lchown(path, Some(like.uid()), Some(like.gid()))
            .map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Gives every file and directory of the redacted copy `new` the permissions and owner of its
/// namesake in the store at `store` (a file sled names anew takes those of the store's `db`, a
/// directory those of the store's directory), and makes them durable: sled creates its files
/// as the umask says, and a store kept `0600` must not come back readable by all.
fn same_access(store: &Path, new: &Path) -> Result<()> {
    let db = std::fs::metadata(store.join("db")).map_err(|e| Error::io(store, e))?;
    let top = std::fs::metadata(store).map_err(|e| Error::io(store, e))?;
    std::fs::set_permissions(new, top.permissions()).map_err(|e| Error::io(new, e))?;
    owned_like(new, &top)?;
    let mut todo = vec![std::path::PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for entry in std::fs::read_dir(new.join(&rel)).map_err(|e| Error::io(new, e))? {
            let entry = entry.map_err(|e| Error::io(new, e))?;
            let kind = entry.file_type().map_err(|e| Error::io(new, e))?;
            let rel = rel.join(entry.file_name());
            let like = match std::fs::symlink_metadata(store.join(&rel)) {
                Ok(old) if old.file_type() == kind => old,
                _ if kind.is_dir() => top.clone(),
                _ => db.clone(),
            };
            if kind.is_dir() {
                todo.push(rel.clone());
            } else if !kind.is_file() {
                continue;
            }
            let path = entry.path();
            std::fs::set_permissions(&path, like.permissions()).map_err(|e| Error::io(&path, e))?;
            owned_like(&path, &like)?;
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    std::fs::File::open(new)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(new, e))
}

/// The first file under `dir` (links not followed) whose bytes hold `needle`, by name.
fn holding(dir: &Path, needle: &[u8]) -> Result<Option<String>> {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| Error::io("the redacted copy", e))? {
            let entry = entry.map_err(|e| Error::io("the redacted copy", e))?;
            let kind = entry
                .file_type()
                .map_err(|e| Error::io("the redacted copy", e))?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                let bytes =
                    std::fs::read(entry.path()).map_err(|e| Error::io("the redacted copy", e))?;
                if contains(&bytes, needle) {
                    return Ok(Some(entry.file_name().to_string_lossy().into_owned()));
                }
            }
        }
    }
    Ok(None)
}

/// Exchanges the directories `a` and `b` in one atomic step.
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(|e| Error::io("exchanging the redacted store for the old one", e.into()))
}

fn sync_parent(path: &Path) -> Result<()> {
    std::fs::File::open(parent_of(path))
        .and_then(|dir| dir.sync_all())
        .map_err(|e| Error::io("the store's directory, after the redaction", e))
}

#[cfg(test)]
mod tests {
    use super::json_unescaped;

    #[test]
    fn json_escapes_decode_leniently() {
        assert_eq!(json_unescaped(r"\u005AEBRA"), "ZEBRA");
        assert_eq!(json_unescaped(r#"a\"b\\c\/d\n"#), "a\"b\\c/d\n");
        assert_eq!(json_unescaped(r"\ud83d\ude00!"), "\u{1F600}!");
        // Not escapes: kept as they are.
        for kept in [
            r"\x41", r"\u00", r"\ud83d", r"\udc00x", "\\", r"\u12G4", "é\\",
        ] {
            assert_eq!(json_unescaped(kept), kept, "{kept}");
        }
        // A megabyte of backslashes decodes in one pass.
        let many = "\\\\".repeat(1 << 19);
        assert_eq!(json_unescaped(&many).len(), 1 << 19);
    }
}
