//! "What did event N do?": one event shown whole (`mnemo show`), and what changed in the tree
//! between two seqs (`mnemo diff`).
//!
//! Both are derived from the log alone, by the replay engine ([`crate::store::replay`]): the tree before
//! the event is replayed from event 1, the event is answered against it again, and that answer
//! is checked against the outcome hash the event recorded, so what is shown is what the chain
//! proves the model was given.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use crate::audit::history::{describe, point, state_at, utc};
use crate::error::{Error, Result};
use crate::model::event::{Body, Event, Refusal, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::AdminCommand;
use crate::model::protocol::{DiffKind, EventChange, FileDiff, Redaction, ShownEvent};
use crate::model::tool::Change;
use crate::store::kv::MemKv;
use crate::store::log::Store;
use crate::store::projection::{MemoryRecord, Projection};
use crate::store::replay::Replay;

/// One event, shown whole.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    /// The event as stored.
    pub event: Event,
    /// The call as it was sent: the `input` of the `tool_use` block for a parsed call, the raw
    /// text of a rejected one, the digest of one logged as a digest, the admin command.
    pub input: Value,
    /// The answer the model was given, re-derived by replaying the log up to the event.
    pub answer: String,
    /// Whether the re-derived answer hashes to the outcome the event recorded. `false` means the
    /// log does not prove this answer: run `mnemo verify`.
    pub verified: bool,
    /// The seq through which the chain was checked before anything was shown: every record from
    /// event 1 to it (the log's end), this event's included, passed the chain rules and the
    /// chain leads to the store's head ([`Store::prove`]).
    pub chained_through: Seq,
    /// What the event changed in the tree or the policy; `None` for a read, an error or a retry.
    pub change: Option<EventChange>,
    /// For an erased event, the redaction that erased it: its seq, time, operator and reason.
    pub redaction: Option<Redaction>,
}

impl Shown {
    /// As `mnemo show --json` prints it.
    pub fn to_protocol(&self) -> ShownEvent {
        let (command, paths) = describe(&self.event);
        ShownEvent {
            agent: self.event.header.agent.clone(),
            answer: self.answer.clone(),
            chained_through: self.chained_through.0,
            change: self.change.clone(),
            command: command.to_string(),
            input: self.input.clone(),
            is_error: self.event.header.outcome.is_error,
            paths,
            redaction: self.redaction.clone(),
            semantics: self.event.header.semantics.number(),
            seq: self.event.seq.0,
            time: utc(self.event.header.time_ms),
            time_ms: self.event.header.time_ms,
            tool_use_id: self.event.header.tool_use_id.clone(),
            verified: self.verified,
        }
    }
}

/// An API write as `show` gives it: the operation, its fields, the digest it expected.
fn api_input(write: &crate::model::tool::api::ApiWrite) -> Value {
    use crate::model::tool::api::{ApiWrite, hex};
    match write {
        ApiWrite::Create { path, content } => {
            json!({"api": "create", "path": path, "content": content})
        }
        ApiWrite::Update {
            memory,
            path,
            content,
            new_path,
            expect,
        } => json!({
            "api": "update", "memory": memory, "path": path, "content": content,
            "new_path": new_path, "expected_content_sha256": expect.as_ref().map(hex),
        }),
        ApiWrite::Delete {
            memory,
            path,
            expect,
        } => json!({
            "api": "delete", "memory": memory, "path": path,
            "expected_content_sha256": expect.as_ref().map(hex),
        }),
    }
}

/// The input an event carries, as `show` gives it.
fn input_of(body: &Body) -> Value {
    match body {
        Body::Tool(call) => call.command.input(),
        Body::Rejected(r) => Value::String(r.input.clone()),
        Body::RejectedDigest(d) => {
            let mut out = json!({
                "digest": {"len": d.input.len, "blake3": (d.input.hash != crate::model::event::EventHash::ZERO).then(|| d.input.hash.to_hex()), "prefix": d.input.prefix},
            });
            if let Refusal::Failed { command, paths, .. } = &d.refusal {
                out["command"] = command.as_str().into();
                out["paths"] = json!(paths);
            }
            out
        }
        Body::Admin(command) => admin_input(command),
        Body::Api(write) => api_input(write),
        Body::Erased(erased) => {
            let mut out = json!({
                "erased": {"format": erased.format, "payload_hash": erased.payload_hash.to_hex()},
            });
            // What a redaction by seq kept of what the event did (never its content).
            if let Some(kept) = &erased.kept {
                out["erased"]["kept"] = json!({
                    "change": kept_name(&kept.change),
                    "paths": kept.change.paths(),
                    "content_sha256": kept.change.content().map(|(sha, _)| crate::model::tool::api::hex(&sha)),
                    "content_bytes": kept.change.content().map(|(_, bytes)| bytes),
                    "by_api": kept.by_api,
                });
            }
            out
        }
    }
}

fn kept_name(change: &crate::model::event::KeptChange) -> &'static str {
    match change {
        crate::model::event::KeptChange::Write { .. } => "write",
        crate::model::event::KeptChange::Rewrite { .. } => "rewrite",
        crate::model::event::KeptChange::Rename { .. } => "rename",
        crate::model::event::KeptChange::Delete { .. } => "delete",
    }
}

fn admin_input(command: &AdminCommand) -> Value {
    serde_json::to_value(command).unwrap_or(Value::Null)
}

/// The redaction after `seq` that names it, as `show` gives it.
fn redaction_of(store: &Store, seq: Seq) -> Result<Option<Redaction>> {
    for item in store.records(Seq(seq.0 + 1)) {
        let later = Event::decode(&item?.1)?;
        if let Body::Admin(AdminCommand::Redact { reason, seqs, .. }) = &later.body {
            if seqs.contains(&seq.0) {
                return Ok(Some(Redaction {
                    by: later.header.agent,
                    reason: reason.clone(),
                    seq: later.seq.0,
                    time: utc(later.header.time_ms),
                }));
            }
        }
    }
    Ok(None)
}

/// Event `seq` of `store`, shown whole, once the chain is proven ([`Store::prove`]: a record
/// that breaks it is [`Error::ChainBroken`], and nothing is shown, whatever the replay met).
/// Replays events `1..seq` (time linear in `seq`) while the chain is proven.
pub fn show(store: &Store, seq: Seq) -> Result<Shown> {
    let no_such = |end: Seq| {
        Error::InvalidArgument(format!(
            "there is no event {seq}: the log holds events 1 to {end}"
        ))
    };
    if seq.0 == 0 || seq > store.last_seq()? {
        return Err(no_such(store.prove()?.seq));
    }
    let shown = show_unproven(store, seq);
    let end = store.prove()?.seq;
    if seq > end {
        return Err(no_such(end));
    }
    Ok(Shown {
        chained_through: end,
        ..shown?
    })
}

/// [`show`] of an event the log holds, before its chain is known to hold (`chained_through`
/// is left at the event itself).
fn show_unproven(store: &Store, seq: Seq) -> Result<Shown> {
    let end = seq;
    let event = store.written_event(seq)?;
    if let Body::Erased(_) = event.body {
        return Ok(Shown {
            input: input_of(&event.body),
            answer: String::new(),
            verified: false,
            change: None,
            redaction: redaction_of(store, seq)?,
            chained_through: end,
            event,
        });
    }
    let mut replay = Replay::kept_to(store, Seq(seq.0 - 1))?;
    let before = BeforeAnswer::of(replay.tree(), &event)?;
    let answer = replay.apply(&event)?.answer;
    let verified = event.outcome_of(answer.is_error, &answer.text) == event.header.outcome;
    let change = answer
        .change
        .as_ref()
        .map(|change| before.shift(change, &answer.text));
    Ok(Shown {
        input: input_of(&event.body),
        answer: answer.text,
        verified,
        change,
        redaction: None,
        chained_through: end,
        event,
    })
}

/// What the tree held before an event, for describing its change: the files under each path it
/// names.
struct BeforeAnswer {
    files: Vec<MemoryRecord>,
}

impl BeforeAnswer {
    fn of(tree: &Projection<MemKv>, event: &Event) -> Result<BeforeAnswer> {
        let (_, paths) = describe(event);
        let mut files = Vec::new();
        if let Body::Tool(_) | Body::Api(_) = event.body {
            for raw in paths {
                if let Ok(path) = MemPath::absolute(&raw) {
                    if let Some(file) = tree.record(&path)? {
                        files.push(file);
                    } else {
                        files.extend(tree.records_under(&path)?);
                    }
                }
            }
        }
        Ok(BeforeAnswer { files })
    }

    fn file(&self, path: &MemPath) -> Option<&MemoryRecord> {
        self.files.iter().find(|f| f.path == path.as_str())
    }

    fn under(&self, dir: &MemPath) -> impl Iterator<Item = &MemoryRecord> {
        self.files
            .iter()
            .filter(move |f| MemPath::absolute(&f.path).is_ok_and(|p| p.starts_with(dir)))
    }

    fn shift(&self, change: &Change, answer: &str) -> EventChange {
        match change {
            Change::Write { path, content } => match self.file(path) {
                Some(old) => EventChange::Edited {
                    path: path.to_string(),
                    diff: unified(&old.content, content, path),
                },
                None => EventChange::Created {
                    path: path.to_string(),
                    diff: unified("", content, path),
                },
            },
            Change::Delete { path } => EventChange::Deleted {
                path: path.to_string(),
                files: self.under(path).map(|f| f.path.clone()).collect(),
            },
            // The file's path and content changed in one step: shown as the edit at its new path
            // (the answer says where it came from).
            Change::Rewrite { from, to, content } => EventChange::Edited {
                path: to.to_string(),
                diff: unified(
                    &self
                        .file(from)
                        .map(|f| f.content.clone())
                        .unwrap_or_default(),
                    content,
                    to,
                ),
            },
            Change::Rename { from, to } => EventChange::Moved {
                from: from.to_string(),
                to: to.to_string(),
                files: self
                    .under(from)
                    .filter_map(|f| {
                        let old = MemPath::absolute(&f.path).ok()?;
                        Some((f.path.clone(), old.moved(from, to).to_string()))
                    })
                    .collect(),
            },
            // The answer says what a policy or token change did, and never shows a token hash.
            _ => EventChange::Policy {
                what: answer.to_string(),
            },
        }
    }
}

/// The unified diff from `old` to `new` of the file at `path` (`a/…`, `b/…` headers, three
/// lines of context); empty when they are equal.
fn unified(old: &str, new: &str, path: &MemPath) -> String {
    let name = path.as_str().trim_start_matches('/');
    // Lines as the memory tool counts them: ended by `\n` only (a `\r` is content).
    let old: Vec<&str> = old.split_inclusive('\n').collect();
    let new: Vec<&str> = new.split_inclusive('\n').collect();
    let diff = TextDiff::from_slices(&old, &new);
    let mut out = String::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        if out.is_empty() {
            out = format!("--- a/{name}\n+++ b/{name}\n");
        }
        out.push_str(&format!("{}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                ChangeTag::Equal => ' ',
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
            };
            out.push(sign);
            out.push_str(change.value());
            if !change.value().ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    out
}

/// What changed in the files under `dir` from after event `from` to after event `to` (each one
/// the log reaches), in path order: a file at the same path with other content is
/// `changed` (a file moved elsewhere is `removed` at its old path and `added` at its new one).
pub fn diff(store: &Store, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<FileDiff>> {
    let (from, to) = (point(store, from)?, point(store, to)?);
    // A file whose content a redaction erased is left out (its placeholder is no content).
    let files = |tree: &Projection<MemKv>| -> Result<BTreeMap<String, String>> {
        Ok(crate::audit::history::held_records(tree, dir)?
            .into_iter()
            .map(|f| (f.path, f.content))
            .collect())
    };
    // Each from the nearest tree the store keeps before it.
    let old = files(&state_at(store, from)?)?;
    let new = files(&state_at(store, to)?)?;
    let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        let (kind, before, after) = match (old.get(path), new.get(path)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => (DiffKind::Changed, a.as_str(), b.as_str()),
            (Some(a), None) => (DiffKind::Removed, a.as_str(), ""),
            (None, Some(b)) => (DiffKind::Added, "", b.as_str()),
            (None, None) => continue,
        };
        let canonical = MemPath::absolute(path).map_err(Error::corrupt)?;
        out.push(FileDiff {
            path: path.clone(),
            kind,
            diff: unified(before, after, &canonical),
        });
    }
    Ok(out)
}
