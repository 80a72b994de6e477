//! Reading the past: the tree as it was after any seq, and the events that touched one file.
//!
//! Both are computed from the log alone, so they show what the chain proves, not what the index
//! happens to hold.

use crate::error::{Error, Result};
use crate::model::event::{Body, Event, Refusal, RejectedDigest, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::AdminCommand;
pub use crate::model::protocol::LogQuery;
use crate::model::protocol::{LoggedEvent, UNREADABLE_COMMAND};
use crate::model::seq::listed;
pub use crate::model::time::utc;
use crate::model::tool::COMMAND_NAMES;
use crate::store::kv::MemKv;
use crate::store::log::Store;
use crate::store::projection::{MemoryRecord, Projection};
use crate::store::replay::Replay;

/// The tree as it was after event `at`: replayed into memory (the `replay` module) from the
/// nearest tree the store keeps before it ([`crate::store::snapshot`]), or from event 1.
pub fn state_at(store: &Store, at: Seq) -> Result<Projection<MemKv>> {
    Ok(Replay::kept_to(store, at)?.into_tree())
}

/// `at` if the log reaches it (0 is the empty tree before the first event), else
/// [`Error::InvalidArgument`] saying where the log ends.
pub fn point(store: &Store, at: Seq) -> Result<Seq> {
    let end = store.log_end()?.seq;
    if at > end {
        return Err(Error::InvalidArgument(format!(
            "there is no event {at}: the log ends at seq {end}; give a seq from 0 (before the first event) to {end}"
        )));
    }
    Ok(at)
}

/// The files under `dir`, now (`at` is `None`) or as they were after event `at` (which the log
/// must reach, see `point`), as `mnemo ls` and `mnemo export` list them.
///
/// A file whose content a redaction erased (a replay holds a placeholder in its place) is left
/// out: its content is not there to show or export.
pub fn records_at(store: &Store, dir: &MemPath, at: Option<Seq>) -> Result<Vec<MemoryRecord>> {
    match at {
        None => store.current_index()?.records_under(dir),
        Some(at) => held_records(&state_at(store, point(store, at)?)?, dir),
    }
}

/// The files under `dir` of a replayed `tree` whose content is their own (not a redaction's
/// placeholder).
pub(crate) fn held_records(tree: &Projection<MemKv>, dir: &MemPath) -> Result<Vec<MemoryRecord>> {
    use crate::model::tool::Tree;
    let mut out = Vec::new();
    for record in tree.records_under(dir)? {
        let path = MemPath::absolute(&record.path).map_err(Error::corrupt)?;
        if tree.redacted_by(&path)?.is_none() {
            out.push(record);
        }
    }
    Ok(out)
}

/// The file at `file`, now (`at` is `None`) or as it was after event `at` (which the log must
/// reach), as `mnemo cat` prints it. A file whose content a redaction erased is refused, naming
/// the erased event.
pub fn record_at(store: &Store, file: &MemPath, at: Option<Seq>) -> Result<Option<MemoryRecord>> {
    use crate::model::tool::Tree;
    match at {
        None => store.current_index()?.record(file),
        Some(at) => {
            let tree = state_at(store, point(store, at)?)?;
            if let Some(erased) = tree.redacted_by(file)? {
                return Err(Error::InvalidArgument(format!(
                    "the content {file} held after event {at} was erased by a redaction (of event {erased}, whose record keeps only its digest and length); `mnemo show {erased}` says which redaction"
                )));
            }
            tree.record(file)
        }
    }
}

/// Whether `event` passes the filters of `query` (not its seq bounds).
fn selects(query: &LogQuery, event: &Event) -> bool {
    if !header_selects(query, event) {
        return false;
    }
    if query.command.is_none() && query.path.is_none() {
        return true;
    }
    let (command, paths) = describe(event);
    if query.command.as_deref().is_some_and(|c| c != command) {
        return false;
    }
    query.path.as_ref().is_none_or(|want| {
        paths
            .iter()
            .any(|p| absolute_path(p).is_ok_and(|p| p.starts_with(want)))
    })
}

/// Whether `event` passes the filters of `query` its header answers: agent, outcome and time.
fn header_selects(query: &LogQuery, event: &Event) -> bool {
    let header = &event.header;
    !(query.agent.as_deref().is_some_and(|a| a != header.agent)
        || query.errors.is_some_and(|e| e != header.outcome.is_error)
        || query.since_ms.is_some_and(|t| header.time_ms < t)
        || query.until_ms.is_some_and(|t| header.time_ms > t))
}

/// An event as `log` lists it: read whole, or its header only, its payload lost.
pub enum Listed<'a> {
    /// The event, read whole.
    Whole(&'a Event),
    /// An event whose payload the store can no longer read back as written: its header (the
    /// event's body stands erased, with the payload hash its record commits to).
    PayloadLost(&'a Event),
}

/// Calls `show` with each event `query` selects, in its order (oldest first, or newest first
/// with `before`), as `mnemo log` lists them, once the chain is proven ([`Store::prove`]); stops
/// at the first error, `show`'s or the store's. An event whose payload the value file lost is
/// listed by its header ([`Listed::PayloadLost`]) whatever the command and path filters ask,
/// which it cannot answer, and the events after it are listed as before.
pub fn select_events<E: From<Error>>(
    store: &Store,
    query: &LogQuery,
    mut show: impl FnMut(Listed<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    use crate::store::disk::Resolved;
    store.prove()?;
    let from = Seq(query.from.max(1));
    let records: Box<dyn Iterator<Item = Result<(Seq, Resolved)>>> = match query.before {
        Some(before) => Box::new(
            store
                .records_or_lost_back(Seq(before))
                .take_while(move |item| !matches!(item, Ok((seq, _)) if *seq < from)),
        ),
        None => Box::new(store.records_or_lost(from)),
    };
    let mut shown = 0;
    for item in records.take(usize::try_from(query.scan.unwrap_or(u64::MAX)).unwrap_or(usize::MAX))
    {
        if query.limit.is_some_and(|l| shown >= l) {
            break;
        }
        match item? {
            (_, Resolved::Whole(record)) => {
                let event = Event::decode(&record)?;
                if !selects(query, &event) {
                    continue;
                }
                show(Listed::Whole(&event))?;
            }
            (_, Resolved::PayloadLost { rest, .. }) => {
                let event = header_of(&rest)?;
                if !header_selects(query, &event) {
                    continue;
                }
                show(Listed::PayloadLost(&event))?;
            }
        }
        shown += 1;
    }
    Ok(())
}

/// The event a record without its payload's bytes stands for: its header and salt, its body
/// erased with the payload hash the record commits to (the chain hash recomputes from it).
fn header_of(rest: &[u8]) -> Result<Event> {
    let frame = crate::model::event::FrameRef::parse_without_payload(rest)?;
    let mut event = Event::erased_from_parts(
        frame.version,
        frame.seq,
        frame.prev_hash,
        frame.header,
        frame.payload_hash,
        None,
    )?;
    event.salt = frame.salt;
    Ok(event)
}

/// An event as `mnemo log --json` lists it: whole, or by its header, its command
/// [`UNREADABLE_COMMAND`], when its payload is lost.
pub fn listed_event(listed: Listed<'_>) -> LoggedEvent {
    match listed {
        Listed::Whole(event) => logged(event),
        Listed::PayloadLost(event) => LoggedEvent {
            command: UNREADABLE_COMMAND.to_string(),
            ..logged(event)
        },
    }
}

/// An event as `mnemo log --json` prints it.
pub fn logged(event: &Event) -> LoggedEvent {
    let (command, paths) = describe(event);
    LoggedEvent {
        agent: event.header.agent.clone(),
        command: command.to_string(),
        hash: event.hash().to_hex(),
        is_error: event.header.outcome.is_error,
        paths,
        prev_hash: event.prev_hash.to_hex(),
        result_hash: event.header.outcome.result_hash.to_hex(),
        salt: event.salt.map(|salt| salt.to_hex()),
        semantics: event.header.semantics.number(),
        seq: event.seq.0,
        time: utc(event.header.time_ms),
        time_ms: event.header.time_ms,
        tool_use_id: event.header.tool_use_id.clone(),
    }
}

/// Parses an absolute path given on the command line (`/memories/notes.txt`).
pub fn absolute_path(raw: &str) -> Result<MemPath> {
    MemPath::root(raw).map_err(Error::InvalidArgument)
}

/// A memory-tool call an event records: a parsed call logged whole, or a failed one logged as a
/// digest (which keeps its command and paths).
pub(crate) struct Called<'a> {
    pub(crate) root: &'a str,
    pub(crate) command: &'static str,
    pub(crate) paths: Vec<&'a str>,
}

impl Called<'_> {
    pub(crate) fn of(event: &Event) -> Option<Called<'_>> {
        match &event.body {
            Body::Tool(call) => Some(Called {
                root: &call.root,
                command: call.command.name(),
                paths: call.command.paths(),
            }),
            Body::RejectedDigest(RejectedDigest {
                root,
                refusal: Refusal::Failed { command, paths, .. },
                ..
            }) => Some(Called {
                root,
                command: COMMAND_NAMES.iter().find(|name| *name == command)?,
                paths: paths.iter().map(String::as_str).collect(),
            }),
            _ => None,
        }
    }
}

/// The command name (`create`, `rejected`, `acl-grant`, `token-issue`, ...) and the canonical paths an event
/// names (raw paths if they do not resolve; for an admin event, the prefix and `agent {id}`, or
/// `token {id}` and the token's agent), as
/// `mnemo log` and `mnemo history` show them.
pub fn describe(event: &Event) -> (&'static str, Vec<String>) {
    if let Some(call) = Called::of(event) {
        let root = MemPath::root(call.root).ok();
        let paths = call
            .paths
            .into_iter()
            .map(|raw| {
                root.as_ref()
                    .and_then(|r| MemPath::resolve(raw, r).ok())
                    .map_or_else(|| raw.to_string(), |p| p.to_string())
            })
            .collect();
        return (call.command, paths);
    }
    match &event.body {
        Body::Tool(_) | Body::Rejected(_) | Body::RejectedDigest(_) => ("rejected", Vec::new()),
        Body::Api(write) => (
            write.name(),
            write.paths().into_iter().map(str::to_string).collect(),
        ),
        Body::Admin(AdminCommand::Grant { agent, prefix, .. }) => {
            ("acl-grant", vec![prefix.clone(), format!("agent {agent}")])
        }
        Body::Admin(AdminCommand::Revoke { agent, prefix }) => {
            ("acl-revoke", vec![prefix.clone(), format!("agent {agent}")])
        }
        Body::Admin(AdminCommand::IssueToken { id, agent, .. }) => (
            "token-issue",
            vec![format!("token {id}"), format!("agent {agent}")],
        ),
        Body::Admin(AdminCommand::RevokeToken { id }) => {
            ("token-revoke", vec![format!("token {id}")])
        }
        Body::Admin(AdminCommand::Configure { name, value }) => {
            ("config-set", vec![format!("{name} {value}")])
        }
        Body::Admin(AdminCommand::Label { .. }) => ("store-label", Vec::new()),
        Body::Admin(AdminCommand::Revert {
            to, scope, seqs, ..
        }) => (
            "revert",
            vec![format!(
                "of events {} ({scope} as after seq {to})",
                listed(seqs)
            )],
        ),
        Body::Admin(AdminCommand::Redact { seqs, .. }) => {
            ("redact", vec![format!("events {}", listed(seqs))])
        }
        // What it named was erased with its payload.
        Body::Erased(_) => ("erased", Vec::new()),
    }
}
