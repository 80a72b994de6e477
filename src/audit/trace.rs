//! Where content went: from the bytes one event wrote (or a file's content right after it),
//! every later event that was shown some of them or carried them on, by byte provenance.
//!
//! The replay engine ([`crate::store::replay`]) answers every event again, and each answer says
//! what it did with a file's bytes ([`Provenance`]): the ones its text quotes (a view's lines, an
//! edit's snippet) and, for an edit in place, the pieces of the old content the new one keeps.
//! [`Tracer`] follows the traced bytes as spans of each file's content (sorted, disjoint byte
//! ranges, so its cost is in spans, never in bytes): an edit maps them through the pieces it
//! kept, a rename moves them with the file or the directory above it, a delete or a write of new
//! content drops them. An event is *shown* them when its answer quotes a traced byte, *carried*
//! them on when a file it wrote or moved holds traced bytes after it, and *removed* them when it
//! took traced bytes out of the tree. Nothing is guessed: content typed again is its writer's own,
//! and a directory listing (names and sizes) quotes no content.
//!
//! An erased event ([`Body::Erased`]) is not answered again: met while traced bytes lived, it is
//! listed and the trace from there on is a lower bound (what its kept change moved or deleted is
//! still followed; the bytes of a file it wrote over are lost to the trace).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::audit::history::logged;
use crate::error::{Error, Result};
use crate::model::event::{Body, Event, KeptChange, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::AdminCommand;
use crate::model::protocol::{LiveFile, TraceReport, TracedEvent};
use crate::model::tool::{Answer, Change, Tree};
use crate::store::log::Store;
use crate::store::projection::{RetryKind, Traced};
use crate::store::replay::Replay;

/// What a trace counts, said in every report.
const COUNTS: &str = "shown: the answer quoted traced bytes (a view's lines, an edit's snippet); a directory listing names files and sizes, never content. carried: a write or a move left traced bytes in a file. removed: a write or a delete took traced bytes out of the tree. Content typed again is its writer's own, not a copy.";

/// What the log cannot tell, said in every report.
const UNLOGGED: &str = "reads that are not events of the log are not in a trace: the memory-stores API's (a memory retrieved, a version read), MCP resource reads, and the operator's (cat, the read routes, the viewer); the log records agents, not sessions, so events are grouped by agent.";

/// The traced bytes of one file: sorted, disjoint, non-empty byte ranges of its content.
type Spans = Vec<Range<usize>>;

/// How many bytes `spans` cover.
fn total(spans: &[Range<usize>]) -> usize {
    spans.iter().map(ExactSizeIterator::len).sum()
}

/// `spans` after an edit that kept the pieces `kept` (range before, start after) of the old
/// content: each traced byte a piece kept, at its new offset, adjacent ranges joined.
fn carry(spans: &[Range<usize>], kept: &[(Range<usize>, usize)]) -> Spans {
    let mut out: Spans = Vec::new();
    for (from, to) in kept {
        // Only the spans that reach into this piece.
        let first = spans.partition_point(|s| s.end <= from.start);
        for span in spans[first..].iter().take_while(|s| s.start < from.end) {
            let (lo, hi) = (span.start.max(from.start), span.end.min(from.end));
            if lo >= hi {
                continue;
            }
            let moved = lo - from.start + to..hi - from.start + to;
            match out.last_mut() {
                Some(last) if last.end == moved.start => last.end = moved.end,
                _ => out.push(moved),
            }
        }
    }
    out
}

/// Whether `spans` hold a byte of `range`.
fn meets(spans: &[Range<usize>], range: &Range<usize>) -> bool {
    if range.is_empty() {
        return false;
    }
    let at = spans.partition_point(|s| s.end <= range.start);
    spans.get(at).is_some_and(|s| s.start < range.end)
}

/// The bytes of `len` the pieces `kept` do not cover: what an edit wrote of its own.
fn own_bytes(len: usize, kept: &[(Range<usize>, usize)]) -> Spans {
    let mut out = Vec::new();
    let mut at = 0;
    for (from, to) in kept {
        if *to > at {
            out.push(at..*to);
        }
        at = at.max(to + from.len());
    }
    if len > at {
        out.push(at..len);
    }
    out
}

/// What one event did with the traced bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Met {
    /// Its answer quoted traced bytes.
    pub shown: bool,
    /// A file it wrote or moved holds traced bytes after it.
    pub carried: bool,
    /// It took traced bytes out of the tree.
    pub removed: bool,
    /// It is erased, met while traced bytes lived.
    pub erased: bool,
    /// The files holding traced bytes it met.
    pub files: BTreeSet<String>,
}

impl Met {
    fn any(&self) -> bool {
        self.shown || self.carried || self.removed || self.erased
    }
}

/// The traced bytes followed through events, one at a time: pure over each event and its
/// re-derived answer; it knows no store.
#[derive(Clone, Debug)]
pub struct Tracer {
    /// Per file holding traced bytes, the spans.
    files: BTreeMap<MemPath, Spans>,
    /// The events whose answers quoted traced bytes (a retry that repeats one's text shows them
    /// again).
    shown: BTreeSet<Seq>,
    /// What each event met, by seq.
    met: BTreeMap<Seq, Met>,
    /// Erased events met while traced bytes lived.
    erased: Vec<Seq>,
    /// The seq the traced bytes were chosen at: an event up to it is before the trace.
    from: Seq,
    /// Retries met that repeated the answer of an event before the trace (with `--path`, which
    /// may have quoted bytes now traced: not followed).
    unplaced: Vec<(Seq, Seq)>,
    /// Whether an event before the trace can have quoted traced bytes: not when they are one
    /// event's own, which did not exist before it.
    unplaced_possible: bool,
}

/// Why an event has no bytes of its own to trace, in words that say what to trace instead.
fn nothing_written(event: &Event, answer: &Answer) -> String {
    let seq = event.seq;
    let instead = "trace a write, or a file's content right after it with --path PATH";
    match &event.body {
        Body::Admin(AdminCommand::Revert { calls, .. }) => format!(
            "event {seq} is the record of a revert: it wrote no content, its calls did (events {} to {}); trace one of those, or a file's content right after it with --path PATH",
            seq.0 + 1,
            seq.0 + calls
        ),
        Body::Admin(_) => {
            format!(
                "event {seq} is an admin event (a grant, a token, a setting or a redaction): it wrote no content; {instead}"
            )
        }
        Body::Erased(_) => format!(
            "event {seq} is erased by a redaction: what it wrote cannot be re-derived, so nothing can be traced from it (`mnemo show {seq}` says which redaction); {instead}"
        ),
        Body::Rejected(_) | Body::RejectedDigest(_) => {
            format!("event {seq} is a rejected call: it wrote nothing; {instead}")
        }
        _ if answer.is_error => {
            format!("event {seq} was answered with an error: it wrote nothing; {instead}")
        }
        _ => match &answer.change {
            Some(Change::Rename { .. } | Change::Delete { .. }) => {
                format!("event {seq} moved or deleted files and wrote no content; {instead}")
            }
            _ => format!(
                "event {seq} read or changed no content (a view or a repeated call); {instead}"
            ),
        },
    }
}

impl Tracer {
    /// A trace of the bytes `event` wrote, as its re-derived answer says: all of a created or
    /// rewritten file, an edit's own bytes. An event that wrote none is an error saying why.
    pub fn of_event(event: &Event, answer: &Answer) -> std::result::Result<Tracer, String> {
        let (path, len) = match (&event.body, &answer.change) {
            (Body::Tool(_) | Body::Api(_), Some(Change::Write { path, content }))
            | (
                Body::Api(_),
                Some(Change::Rewrite {
                    to: path, content, ..
                }),
            ) => (path, content.len()),
            _ => return Err(nothing_written(event, answer)),
        };
        let kept = answer
            .provenance
            .as_ref()
            .filter(|p| &p.path == path)
            .map_or(&[][..], |p| p.kept.as_slice());
        let spans = own_bytes(len, kept);
        let mut tracer = Tracer::of_file(event.seq, path.clone(), spans);
        // Its own answer may quote what it wrote (a snippet), which a retry repeats. No event
        // before it can have quoted what it wrote.
        if let Some(p) = answer.provenance.as_ref()
            && tracer
                .files
                .get(&p.path)
                .is_some_and(|s| meets(s, &p.quoted))
        {
            tracer.shown.insert(event.seq);
        }
        tracer.unplaced_possible = false;
        Ok(tracer)
    }

    /// A trace of the bytes `spans` of the file at `path` as they were right after event `from`.
    pub fn of_file(from: Seq, path: MemPath, spans: Spans) -> Tracer {
        let mut files = BTreeMap::new();
        if !spans.is_empty() {
            files.insert(path, spans);
        }
        Tracer {
            files,
            shown: BTreeSet::new(),
            met: BTreeMap::new(),
            erased: Vec::new(),
            from,
            unplaced: Vec::new(),
            unplaced_possible: true,
        }
    }

    /// Retries met that repeated the answer of an event before the trace, which may have quoted
    /// bytes now traced, as (the retry, the event it repeated): the trace does not follow them.
    pub fn unplaced(&self) -> &[(Seq, Seq)] {
        &self.unplaced
    }

    /// How many bytes are traced now.
    pub fn bytes(&self) -> usize {
        self.files.values().map(|s| total(s)).sum()
    }

    /// The files holding traced bytes now, with their spans.
    pub fn files(&self) -> &BTreeMap<MemPath, Spans> {
        &self.files
    }

    /// What each event met, by seq (only those that met traced bytes).
    pub fn met(&self) -> &BTreeMap<Seq, Met> {
        &self.met
    }

    /// The erased events met while traced bytes lived.
    pub fn erased(&self) -> &[Seq] {
        &self.erased
    }

    /// The files at `path` or under it that hold traced bytes, taken out.
    fn take_under(&mut self, path: &MemPath) -> Vec<(MemPath, Spans)> {
        let under: Vec<MemPath> = self
            .files
            .range(path.clone()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
            .collect();
        under
            .into_iter()
            .filter_map(|p| self.files.remove(&p).map(|s| (p, s)))
            .collect()
    }

    /// Moves the traced files under `from` to `to`; the paths they went to.
    fn rename(&mut self, from: &MemPath, to: &MemPath, met: &mut Met) {
        for (at, spans) in self.take_under(from) {
            let moved = at.moved(from, to);
            met.carried = true;
            met.files.insert(moved.to_string());
            self.files.insert(moved, spans);
        }
    }

    /// Drops the traced files under `path`.
    fn delete(&mut self, path: &MemPath, met: &mut Met) {
        for (at, _) in self.take_under(path) {
            met.removed = true;
            met.files.insert(at.to_string());
        }
    }

    /// The file at `from` moved to `to` with new content written whole (an API update of both):
    /// it carries none of its traced bytes on.
    fn rewrite(&mut self, from: &MemPath, to: &MemPath, met: &mut Met) {
        if self.files.remove(from).is_some() {
            met.removed = true;
            met.files.insert(to.to_string());
        }
    }

    /// The file at `path` written whole, or edited keeping the pieces `kept`.
    fn write(&mut self, path: &MemPath, kept: &[(Range<usize>, usize)], met: &mut Met) {
        let Some(spans) = self.files.remove(path) else {
            return;
        };
        let after = carry(&spans, kept);
        met.files.insert(path.to_string());
        met.removed |= total(&after) < total(&spans);
        if !after.is_empty() {
            met.carried = true;
            self.files.insert(path.clone(), after);
        }
    }

    /// Follows the traced bytes through `event`, answered again as `traced` (its answer, and
    /// whether it was a retry).
    pub fn observe(&mut self, event: &Event, traced: &Traced) {
        // With no traced byte left in the tree, only a retry that repeats an answer can still
        // show one.
        let repeated = traced
            .retry
            .is_some_and(|retry| retry.kind == RetryKind::Repeated);
        if self.files.is_empty() && !repeated {
            return;
        }
        let mut met = Met::default();
        if let Body::Erased(erased) = &event.body {
            self.erased.push(event.seq);
            met.erased = true;
            self.follow_kept(erased.kept.as_ref().map(|k| &k.change), &mut met);
            self.met.insert(event.seq, met);
            return;
        }
        let answer = &traced.answer;
        if let Some(retry) = traced.retry
            && retry.kind == RetryKind::Repeated
        {
            if self.shown.contains(&retry.of) {
                met.shown = true;
            } else if retry.of <= self.from && self.unplaced_possible {
                self.unplaced.push((event.seq, retry.of));
            }
        }
        let provenance = answer.provenance.as_ref();
        match &answer.change {
            Some(Change::Write { path, .. }) => {
                let kept = provenance
                    .filter(|p| &p.path == path)
                    .map_or(&[][..], |p| p.kept.as_slice());
                self.write(path, kept, &mut met);
            }
            Some(Change::Delete { path }) => self.delete(path, &mut met),
            Some(Change::Rename { from, to }) => self.rename(from, to, &mut met),
            Some(Change::Rewrite { from, to, .. }) => self.rewrite(from, to, &mut met),
            _ => {}
        }
        if let Some(p) = provenance
            && let Some(spans) = self.files.get(&p.path)
            && meets(spans, &p.quoted)
        {
            met.shown = true;
            met.files.insert(p.path.to_string());
        }
        if met.shown {
            self.shown.insert(event.seq);
        }
        if met.any() {
            self.met.insert(event.seq, met);
        }
    }

    /// An erased event's kept change: a move or a delete is followed; the traced bytes of a file
    /// it wrote over are lost to the trace (its content is a placeholder now).
    fn follow_kept(&mut self, kept: Option<&KeptChange>, met: &mut Met) {
        let path = |raw: &str| MemPath::absolute(raw).ok();
        match kept {
            Some(KeptChange::Rename { from, to }) => {
                if let (Some(from), Some(to)) = (path(from), path(to)) {
                    self.rename(&from, &to, met);
                }
            }
            Some(KeptChange::Delete { path: at }) => {
                if let Some(at) = path(at) {
                    self.delete(&at, met);
                }
            }
            Some(KeptChange::Write { path: at, .. }) => {
                if let Some(at) = path(at) {
                    self.write(&at, &[], met);
                }
            }
            Some(KeptChange::Rewrite { from, to, .. }) => {
                if let (Some(from), Some(to)) = (path(from), path(to)) {
                    self.rewrite(&from, &to, met);
                }
            }
            None => {}
        }
    }
}

/// The trace of event `seq`'s own bytes, or with `path` of the whole content the file at `path`
/// held right after it, through the log's end: replays the log once (proving its chain first).
/// A seq the log does not hold, an event that wrote nothing, or no file at `path` after it, is
/// an [`Error::InvalidArgument`] that says what to trace instead.
pub fn trace(store: &Store, seq: Seq, path: Option<&MemPath>) -> Result<TraceReport> {
    let end = store.log_end()?.seq;
    if seq.0 == 0 || seq > end {
        return Err(Error::InvalidArgument(format!(
            "there is no event {seq}: the log holds events 1 to {end}; trace one of those (`mnemo log` lists them)"
        )));
    }
    // The tree before the event, from the nearest tree the store keeps (see `show`).
    let mut replay = Replay::kept_to(store, Seq(seq.0 - 1))?;
    let mut first = None;
    replay.run(store, seq, |_, event, traced| {
        first = Some((event.clone(), traced));
        Ok::<(), Error>(())
    })?;
    let Some((event, traced)) = first else {
        return Err(Error::InvalidArgument(format!(
            "event {seq} could not be read from the log"
        )));
    };
    let mut notes = Vec::new();
    let tracer = match path {
        Some(file) => {
            let tree = replay.tree();
            let Some(content) = tree.read(file)? else {
                return Err(Error::InvalidArgument(format!(
                    "no file was at {file} right after event {seq}; `mnemo ls / --at {seq}` lists the files then, `mnemo history {file}` when one lived there"
                )));
            };
            if let Some(by) = tree.redacted_by(file)? {
                notes.push(format!(
                    "{file} held content that event {by} wrote, which a redaction erased: its bytes are followed by position, not by what they said"
                ));
            }
            let whole = std::iter::once(0..content.len()).filter(|r| !r.is_empty());
            Tracer::of_file(seq, file.clone(), whole.collect())
        }
        None => Tracer::of_event(&event, &traced.answer).map_err(Error::InvalidArgument)?,
    };
    let file = match (path, &traced.answer.change) {
        (Some(p), _)
        | (None, Some(Change::Write { path: p, .. } | Change::Rewrite { to: p, .. })) => {
            p.to_string()
        }
        (None, _) => String::new(),
    };
    let bytes = tracer.bytes() as u64;
    if bytes == 0 {
        notes.push(format!(
            "nothing to trace: {} held no bytes of its own right after event {seq}",
            if path.is_some() {
                "the file"
            } else {
                "the event's write"
            }
        ));
    }
    let mut tracer = tracer;
    let mut events = BTreeMap::new();
    let mut through = seq.0;
    // Each revert after it: its seq, the writes it undid, and how many calls followed.
    let mut reverts: Vec<(u64, Vec<u64>, u64)> = Vec::new();
    replay.run(store, Seq(u64::MAX), |_, event, traced| {
        tracer.observe(event, &traced);
        if let Body::Admin(AdminCommand::Revert { seqs, calls, .. }) = &event.body {
            reverts.push((event.seq.0, seqs.clone(), *calls));
        }
        if tracer.met().contains_key(&event.seq) {
            events.insert(event.seq, logged(event));
        }
        through = event.seq.0;
        Ok::<(), Error>(())
    })?;
    // A revert puts content back by calls that write the text again: a copy the trace cannot
    // follow. One that undid a write the trace met, or whose calls met traced bytes, may have
    // written them back.
    let met = tracer.met();
    let copied = reverts
        .iter()
        .filter(|(at, undone, calls)| {
            undone.iter().any(|s| met.contains_key(&Seq(*s)))
                || (at + 1..=at.saturating_add(*calls)).any(|s| met.contains_key(&Seq(s)))
        })
        .map(|(at, _, calls)| (*at, *calls))
        .collect();
    Ok(report(ReportParts {
        seq,
        path,
        file,
        bytes,
        through,
        tracer: &tracer,
        events,
        notes,
        copied,
    }))
}

/// The note on reverts that may have written traced bytes back (`(seq, calls)` each).
fn copied_note(copied: &[(u64, u64)]) -> Option<String> {
    let listed: Vec<String> = copied
        .iter()
        .map(|(at, calls)| format!("{at} (its calls {} to {})", at + 1, at + calls))
        .collect();
    (!listed.is_empty()).then(|| {
        format!(
            "the revert recorded at event {} put content back by calls that write the text again, a copy this trace does not follow: bytes it wrote back are not traced from here, so the trace is a lower bound; trace those calls (`mnemo trace SEQ`) for who met them after",
            listed.join(", ")
        )
    })
}

/// What [`report`] is made from.
struct ReportParts<'a> {
    seq: Seq,
    path: Option<&'a MemPath>,
    file: String,
    bytes: u64,
    through: u64,
    tracer: &'a Tracer,
    events: BTreeMap<Seq, crate::model::protocol::LoggedEvent>,
    notes: Vec<String>,
    /// The reverts that may have written traced bytes back, each with its number of calls.
    copied: Vec<(u64, u64)>,
}

fn report(parts: ReportParts<'_>) -> TraceReport {
    let ReportParts {
        seq,
        path,
        file,
        bytes,
        through,
        tracer,
        mut events,
        mut notes,
        copied,
    } = parts;
    let erased: Vec<u64> = tracer.erased().iter().map(|s| s.0).collect();
    notes.extend(erased_note(&erased));
    let unplaced = unplaced_note(tracer.unplaced());
    notes.extend(unplaced.clone());
    let copied = copied_note(&copied);
    notes.extend(copied.clone());
    notes.push(COUNTS.to_string());
    notes.push(UNLOGGED.to_string());
    let traced = tracer
        .met()
        .iter()
        .filter_map(|(s, met)| {
            events.remove(s).map(|event| TracedEvent {
                event,
                carried: met.carried,
                erased_event: met.erased,
                files: met.files.iter().cloned().collect(),
                removed: met.removed,
                shown: met.shown,
            })
        })
        .collect();
    TraceReport {
        bytes,
        exact: erased.is_empty() && unplaced.is_none() && copied.is_none(),
        erased,
        events: traced,
        file,
        live: tracer
            .files()
            .iter()
            .map(|(p, spans)| LiveFile {
                bytes: total(spans) as u64,
                path: p.to_string(),
            })
            .collect(),
        notes,
        path: path.map(MemPath::to_string),
        seq: seq.0,
        through,
    }
}

/// What a report says of the retries it met that repeated an answer given before the trace.
fn unplaced_note(unplaced: &[(Seq, Seq)]) -> Option<String> {
    let listed: Vec<String> = unplaced
        .iter()
        .map(|(retry, of)| format!("{retry} (of {of})"))
        .collect();
    (!listed.is_empty()).then(|| format!(
        "event(s) {} repeated by tool_use id the answer an event before the traced content was chosen had given; whether that answer quoted bytes traced here is not followed, so the trace is a lower bound there",
        listed.join(", ")
    ))
}

/// What a report says of the erased events it met, if any.
fn erased_note(erased: &[u64]) -> Option<String> {
    let first = erased.first()?;
    let more = match erased.len() - 1 {
        0 => String::new(),
        n => format!(" (and {n} more after it)"),
    };
    Some(format!(
        "event {first} is erased{more}: what an erased event showed or carried cannot be re-derived, so the trace from event {first} on is a lower bound (its moves and deletes are still followed; bytes it wrote over are lost to the trace)"
    ))
}

/// `report` as `agent` may see it under `policy`: only the events whose every traced file and
/// every path its call named it may read (an erased event, whose files cannot be known, is left
/// out, and so is the note that names it) and the live files it may read; the origin file must
/// be one it may read. A report cut so says it is no longer exact.
pub fn scoped(
    mut report: TraceReport,
    policy: &crate::model::policy::Policy,
    agent: &str,
) -> Result<TraceReport> {
    use crate::model::policy::Access;
    let may =
        |raw: &str| MemPath::absolute(raw).is_ok_and(|p| policy.allows(agent, &p, Access::Read));
    if !report.file.is_empty() && !may(&report.file) {
        return Err(Error::InvalidArgument(format!(
            "agent {agent} has no read grant covering the file traced from; ask the store's operator to run the trace"
        )));
    }
    let before = report.events.len() + report.live.len();
    report
        .events
        .retain(|e| !e.erased_event && e.files.iter().chain(&e.event.paths).all(|f| may(f)));
    report.live.retain(|f| may(&f.path));
    // Notes that name events the agent may not be allowed to know of.
    report.notes.retain(|n| {
        Some(n) != erased_note(&report.erased).as_ref()
            && !n.contains("repeated by tool_use id the answer")
    });
    report.erased.clear();
    if report.events.len() + report.live.len() < before {
        report.exact = false;
        report.notes.insert(
            0,
            format!("scoped to agent {agent}'s grants: events and files outside them are left out, so this is part of the trace"),
        );
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    //! The tracer against a brute-force model: a replay that keeps, for every byte of every
    //! file, the byte's own identity (the event that wrote it and its place in that write), and
    //! records per event the identities its answer quoted and those its change kept, moved or
    //! dropped. For a random set of traced bytes (one event's, or a file's at a seq) the events
    //! the tracer names, and what it says each did, are exactly the model's.

    // Spans are vectors of ranges, so one span is a vector of one range, not a vector of bytes.
    #![allow(clippy::single_range_in_vec_init)]

    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;
    use crate::model::event::{EventHash, Header, Outcome, ToolCall};
    use crate::model::tool::{Command, Limits, Profile, Semantics};

    /// A byte's identity: the seq that wrote it and its index in that write.
    type Id = (u64, usize);

    /// A file of the model: each byte with its identity.
    type Bytes = Vec<(u8, Id)>;

    /// What one event did, by byte identity.
    #[derive(Default, Debug)]
    struct Did {
        shown: BTreeSet<Id>,
        /// Per file written or moved: the identities it held before and after.
        before: Vec<Id>,
        after: Vec<Id>,
        moved: BTreeSet<Id>,
        deleted: BTreeSet<Id>,
        /// How many bytes of its own it wrote.
        wrote: usize,
    }

    /// The model's tree.
    #[derive(Default)]
    struct Model {
        files: BTreeMap<String, Bytes>,
    }

    fn text(bytes: &Bytes) -> String {
        String::from_utf8(bytes.iter().map(|(b, _)| *b).collect()).expect("ascii")
    }

    fn fresh(seq: u64, text: &str) -> Bytes {
        text.bytes()
            .enumerate()
            .map(|(i, b)| (b, (seq, i)))
            .collect()
    }

    /// The byte ranges of each line of `bytes` (split at every `\n`).
    fn lines(bytes: &Bytes) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, (b, _)) in bytes.iter().enumerate() {
            if *b == b'\n' {
                out.push((start, i));
                start = i + 1;
            }
        }
        out.push((start, bytes.len()));
        out
    }

    /// The identities of lines `lo..hi` (0-based) of `bytes`, the newlines between them too.
    fn quoted(bytes: &Bytes, lo: usize, hi: usize) -> BTreeSet<Id> {
        let lines = lines(bytes);
        if lo >= hi {
            return BTreeSet::new();
        }
        bytes[lines[lo].0..lines[hi - 1].1]
            .iter()
            .map(|(_, id)| *id)
            .collect()
    }

    /// The identities a view of lines `lo..hi` capped at `cap` characters quotes: each line
    /// costs its number (7 characters), its bytes (ASCII here) and a newline before all but the
    /// first; the lines that fit are shown, and of a first line that does not, its start.
    fn capped(bytes: &Bytes, lo: usize, hi: usize, cap: usize) -> BTreeSet<Id> {
        let lines = lines(bytes);
        let mut used = 0;
        let mut end = None;
        for (k, (start, stop)) in lines[lo..hi].iter().enumerate() {
            let cost = 7 + usize::from(k > 0) + (stop - start);
            if used + cost > cap {
                if k == 0 {
                    end = Some(start + cap.saturating_sub(7).min(stop - start));
                }
                break;
            }
            used += cost;
            end = Some(*stop);
        }
        match end {
            Some(end) if lo < hi => bytes[lines[lo].0..end].iter().map(|(_, id)| *id).collect(),
            _ => BTreeSet::new(),
        }
    }

    fn under(path: &str, dir: &str) -> bool {
        path == dir || path.starts_with(&format!("{dir}/"))
    }

    impl Model {
        /// The files at `dir` or under it, taken out of the tree.
        fn take_under(&mut self, dir: &str) -> Vec<(String, Bytes)> {
            let paths: Vec<String> = self
                .files
                .keys()
                .filter(|p| under(p, dir))
                .cloned()
                .collect();
            paths
                .into_iter()
                .filter_map(|p| self.files.remove(&p).map(|bytes| (p, bytes)))
                .collect()
        }

        /// Applies a call that succeeded (the replay said so) at `seq`, its views capped at
        /// `cap` characters.
        fn apply(&mut self, seq: u64, command: &Command, cap: Option<usize>) -> Did {
            let mut did = Did::default();
            match command {
                Command::Create { path, file_text } => {
                    did.wrote = file_text.len();
                    self.files.insert(path.clone(), fresh(seq, file_text));
                }
                Command::StrReplace {
                    path,
                    old_str,
                    new_str,
                } => {
                    let file = self.files.get_mut(path).expect("file");
                    let old = text(file);
                    let at = old.find(old_str.as_str()).expect("match");
                    let new = new_str.clone().unwrap_or_default();
                    did.before = file.iter().map(|(_, id)| *id).collect();
                    let mut updated: Bytes = file[..at].to_vec();
                    did.wrote = new.len();
                    updated.extend(fresh(seq, &new));
                    updated.extend_from_slice(&file[at + old_str.len()..]);
                    did.after = updated.iter().map(|(_, id)| *id).collect();
                    // The snippet: two lines either side of the changed ones.
                    let first = old[..at].matches('\n').count();
                    let last = first + new.matches('\n').count();
                    let count = lines(&updated).len();
                    did.shown = quoted(&updated, first.saturating_sub(2), (last + 3).min(count));
                    *file = updated;
                }
                Command::Insert {
                    path,
                    insert_line,
                    insert_text,
                } => {
                    let file = self.files.get_mut(path).expect("file");
                    let line = usize::try_from(*insert_line).expect("line");
                    let offset = if line == 0 {
                        0
                    } else {
                        lines(file)
                            .get(line - 1)
                            .map_or(file.len(), |(_, end)| (*end + 1).min(file.len()))
                    };
                    did.before = file.iter().map(|(_, id)| *id).collect();
                    let (before, after) = file.split_at(offset);
                    let mut added = String::new();
                    if !before.is_empty() && before.last().map(|(b, _)| *b) != Some(b'\n') {
                        added.push('\n');
                    }
                    added.push_str(insert_text);
                    if !after.is_empty() && !insert_text.ends_with('\n') {
                        added.push('\n');
                    }
                    let mut updated = before.to_vec();
                    did.wrote = added.len();
                    updated.extend(fresh(seq, &added));
                    updated.extend_from_slice(after);
                    did.after = updated.iter().map(|(_, id)| *id).collect();
                    *file = updated;
                }
                Command::Delete { path } => {
                    for (_, bytes) in self.take_under(path) {
                        did.deleted.extend(bytes.iter().map(|(_, id)| *id));
                    }
                }
                Command::Rename { old_path, new_path } => {
                    for (p, bytes) in self.take_under(old_path) {
                        did.moved.extend(bytes.iter().map(|(_, id)| *id));
                        let to = format!("{new_path}{}", &p[old_path.len()..]);
                        self.files.insert(to, bytes);
                    }
                }
                Command::View { path, view_range } => {
                    if let Some(file) = self.files.get(path) {
                        let n = lines(file).len();
                        let (lo, hi) = match view_range {
                            None => (0, n),
                            Some((start, end)) => {
                                let from = usize::try_from((*start).max(1)).expect("start");
                                let to = if *end == -1 {
                                    n
                                } else {
                                    usize::try_from(*end).expect("end").min(n)
                                };
                                (from - 1, to)
                            }
                        };
                        did.shown = match cap {
                            None => quoted(file, lo, hi),
                            Some(cap) => capped(file, lo, hi, cap),
                        };
                    }
                }
            }
            did
        }
    }

    /// What the model says an event did with the bytes `traced`, as the tracer's [`Met`] flags.
    fn judged(did: &Did, traced: &BTreeSet<Id>) -> (bool, bool, bool) {
        let count = |ids: &[Id]| ids.iter().filter(|id| traced.contains(id)).count();
        let shown = did.shown.iter().any(|id| traced.contains(id));
        let carried = count(&did.after) > 0 || did.moved.iter().any(|id| traced.contains(id));
        let removed = count(&did.before) > count(&did.after)
            || did.deleted.iter().any(|id| traced.contains(id));
        (shown, carried, removed)
    }

    fn event(seq: u64, agent: &str, command: Command) -> Event {
        capped_event(seq, agent, command, None)
    }

    fn capped_event(seq: u64, agent: &str, command: Command, cap: Option<usize>) -> Event {
        Event {
            seq: Seq(seq),
            prev_hash: EventHash::ZERO,
            header: Header {
                time_ms: 0,
                agent: agent.to_string(),
                tool_use_id: None,
                outcome: Outcome {
                    is_error: false,
                    result_hash: EventHash::ZERO,
                },
                semantics: Semantics::CURRENT,
            },
            body: Body::Tool(ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits {
                    view_max_chars: cap.map(|c| c as u64),
                    ..Limits::default()
                },
                command,
            }),
            salt: None,
        }
    }

    const PATHS: &[&str] = &[
        "/memories/a",
        "/memories/b",
        "/memories/d/c",
        "/memories/d/e",
        "/memories/f/g",
        "/memories/d",
        "/memories/f",
    ];

    fn path() -> impl Strategy<Value = String> {
        prop::sample::select(PATHS).prop_map(str::to_string)
    }

    fn content() -> impl Strategy<Value = String> {
        "[ab\n]{0,8}"
    }

    fn command() -> impl Strategy<Value = Command> {
        prop_oneof![
            2 => (path(), content()).prop_map(|(path, file_text)| Command::Create { path, file_text }),
            3 => (path(), prop::sample::select(&["a", "b", "ab", "\n", "ba", "a\nb"][..]), "[ab\n]{0,3}")
                .prop_map(|(path, old, new)| Command::StrReplace {
                    path,
                    old_str: old.to_string(),
                    new_str: Some(new),
                }),
            2 => (path(), 0i64..4, "[ab\n]{1,3}").prop_map(|(path, insert_line, insert_text)| {
                Command::Insert { path, insert_line, insert_text }
            }),
            1 => path().prop_map(|path| Command::Delete { path }),
            2 => (path(), path()).prop_map(|(old_path, new_path)| Command::Rename { old_path, new_path }),
            3 => (path(), prop::option::of(prop::sample::select(&[(1i64, 1i64), (2, -1), (1, 2), (3, 3), (2, 9)][..])))
                .prop_map(|(path, view_range)| Command::View { path, view_range }),
        ]
    }

    /// Runs `calls` through the replay and the model; returns each
    /// event with its answer, what the model says it did, and the model's files after each.
    #[allow(clippy::type_complexity)]
    fn run(calls: &[Call]) -> (Vec<(Event, Traced)>, Vec<Did>, Vec<BTreeMap<String, Bytes>>) {
        let mut replay = Replay::in_memory();
        let mut model = Model::default();
        let (mut events, mut dids, mut trees) = (Vec::new(), Vec::new(), Vec::new());
        // A call sent again is a copy of an earlier one that had a tool_use id.
        let mut sent: Vec<(usize, Command, Option<usize>, Option<String>)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let seq = i as u64 + 1;
            let with_ids: Vec<_> = sent.iter().filter(|c| c.3.is_some()).cloned().collect();
            let (agent, command, cap, id) = match &call.again {
                Some(pick) if !with_ids.is_empty() => with_ids[pick.index(with_ids.len())].clone(),
                _ => (
                    call.agent,
                    call.command.clone(),
                    call.cap,
                    call.id.then(|| format!("toolu_{seq}")),
                ),
            };
            sent.push((agent, command.clone(), cap, id.clone()));
            let mut event = capped_event(seq, ["ann", "bob", "cy"][agent], command.clone(), cap);
            event.header.tool_use_id = id;
            let traced = replay.apply(&event).expect("apply");
            let did = match traced.retry {
                // Answered with the original's text: it quotes what that answer quoted.
                Some(retry) if retry.kind == RetryKind::Repeated => Did {
                    shown: dids
                        .get(usize::try_from(retry.of.0).expect("seq") - 1)
                        .map_or_else(BTreeSet::new, |d: &Did| d.shown.clone()),
                    ..Did::default()
                },
                _ if traced.answer.is_error => Did::default(),
                _ => model.apply(seq, &command, cap),
            };
            // The model's tree is the replay's, byte for byte.
            for (p, bytes) in &model.files {
                let at = MemPath::absolute(p).expect("path");
                assert_eq!(
                    replay.tree().read(&at).expect("read"),
                    Some(text(bytes)),
                    "{p} after {seq}"
                );
            }
            events.push((event, traced));
            dids.push(did);
            trees.push(model.files.clone());
        }
        (events, dids, trees)
    }

    /// Traces `tracer` through the events after `seq` and compares with the model for `traced`.
    fn check(
        mut tracer: Tracer,
        seq: usize,
        traced: &BTreeSet<Id>,
        events: &[(Event, Traced)],
        dids: &[Did],
    ) -> std::result::Result<(), TestCaseError> {
        for (event, answer) in &events[seq..] {
            tracer.observe(event, answer);
        }
        // A retry of an answer from before a file's trace began is said, not followed.
        let unplaced: BTreeSet<u64> = tracer.unplaced().iter().map(|(s, _)| s.0).collect();
        for (retry, of) in tracer.unplaced() {
            prop_assert!(of.0 <= seq as u64, "{retry} retried {of}");
        }
        let mut expected = BTreeMap::new();
        for (i, did) in dids.iter().enumerate().skip(seq) {
            let (shown, carried, removed) = judged(did, traced);
            if (shown || carried || removed) && !unplaced.contains(&(i as u64 + 1)) {
                expected.insert(i as u64 + 1, (shown, carried, removed));
            }
        }
        let got: BTreeMap<u64, (bool, bool, bool)> = tracer
            .met()
            .iter()
            .map(|(s, m)| (s.0, (m.shown, m.carried, m.removed)))
            .collect();
        prop_assert_eq!(got, expected);
        Ok(())
    }

    /// One call of a random session: an agent's command, its view cap, whether it has a
    /// tool_use id, or (`again`) an earlier call with an id sent again.
    #[derive(Clone, Debug)]
    struct Call {
        agent: usize,
        command: Command,
        cap: Option<usize>,
        id: bool,
        again: Option<prop::sample::Index>,
    }

    fn sessions() -> impl Strategy<Value = Vec<Call>> {
        let cap = prop::option::weighted(0.3, prop::sample::select(&[4usize, 9, 12, 20][..]));
        let again = prop::option::weighted(0.15, any::<prop::sample::Index>());
        let call = (0usize..3, command(), cap, any::<bool>(), again).prop_map(
            |(agent, command, cap, id, again)| Call {
                agent,
                command,
                cap,
                id,
                again,
            },
        );
        prop::collection::vec(call, 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]

        #[test]
        fn a_trace_of_an_events_bytes_is_the_brute_force_replays(
            calls in sessions(),
            pick in any::<prop::sample::Index>(),
        ) {
            let (events, dids, _) = run(&calls);
            let writes: Vec<usize> = (0..events.len())
                .filter(|i| Tracer::of_event(&events[*i].0, &events[*i].1.answer).is_ok())
                .collect();
            prop_assume!(!writes.is_empty());
            let i = writes[pick.index(writes.len())];
            let seq = i as u64 + 1;
            let tracer = Tracer::of_event(&events[i].0, &events[i].1.answer).expect("a write");
            let traced: BTreeSet<Id> = (0..dids[i].wrote).map(|k| (seq, k)).collect();
            // The tracer starts from what the event wrote: exactly the bytes the model says it did.
            prop_assert_eq!(tracer.bytes(), traced.len());
            check(tracer, i + 1, &traced, &events, &dids)?;
        }

        #[test]
        fn a_trace_of_a_files_content_is_the_brute_force_replays(
            calls in sessions(),
            pick in any::<prop::sample::Index>(),
            which in any::<prop::sample::Index>(),
        ) {
            let (events, dids, trees) = run(&calls);
            let i = pick.index(events.len());
            let files: Vec<(&String, &Bytes)> = trees[i].iter().collect();
            prop_assume!(!files.is_empty());
            let (p, bytes) = files[which.index(files.len())];
            let traced: BTreeSet<Id> = bytes.iter().map(|(_, id)| *id).collect();
            let spans: Spans = if bytes.is_empty() { Vec::new() } else { vec![0..bytes.len()] };
            let tracer = Tracer::of_file(Seq(i as u64 + 1), MemPath::absolute(p).expect("path"), spans);
            check(tracer, i + 1, &traced, &events, &dids)?;
        }
    }

    /// Runs `events` through a replay, tracing the first one's bytes.
    fn tracer_from_first(events: &[Event]) -> Tracer {
        let mut replay = Replay::in_memory();
        let first = replay.apply(&events[0]).expect("apply");
        let mut tracer = Tracer::of_event(&events[0], &first.answer).expect("a write");
        for event in &events[1..] {
            let traced = replay.apply(event).expect("apply");
            tracer.observe(event, &traced);
        }
        tracer
    }

    /// [`tracer_from_first`]: what each later event met, as (shown, carried, removed).
    fn traced_from_first(events: &[Event]) -> BTreeMap<u64, (bool, bool, bool)> {
        tracer_from_first(events)
            .met()
            .iter()
            .map(|(s, m)| (s.0, (m.shown, m.carried, m.removed)))
            .collect()
    }

    /// A file created holding `text` (event 1), then a `str_replace` of `old` by `new` (2) sent
    /// again with the same tool_use id (3).
    fn edited_and_retried(text: &str, old: &str, new: &str) -> Vec<Event> {
        let create = Command::Create {
            path: "/memories/a".into(),
            file_text: text.into(),
        };
        let edit = Command::StrReplace {
            path: "/memories/a".into(),
            old_str: old.into(),
            new_str: Some(new.into()),
        };
        let mut events = vec![event(1, "ann", create)];
        for seq in [2, 3] {
            let mut retried = event(seq, "bob", edit.clone());
            retried.header.tool_use_id = Some("toolu_1".into());
            events.push(retried);
        }
        events
    }

    #[test]
    fn a_retry_answered_with_a_snippet_that_showed_traced_bytes_shows_them_again() {
        let events = edited_and_retried("one\ntwo\n", "two", "2");
        // 2 kept "one\n" and removed "two", its snippet showing "one"; 3 repeated 2's answer.
        assert_eq!(
            traced_from_first(&events),
            BTreeMap::from([(2, (true, true, true)), (3, (true, false, false))])
        );
        // Its answer is repeated as it was, even once no traced byte is left in the tree.
        let mut gone = edited_and_retried("one\ntwo\n", "two", "2");
        gone.insert(
            2,
            event(
                3,
                "ann",
                Command::Delete {
                    path: "/memories/a".into(),
                },
            ),
        );
        gone[3].seq = Seq(4);
        assert_eq!(
            traced_from_first(&gone),
            BTreeMap::from([
                (2, (true, true, true)),
                (3, (false, false, true)),
                (4, (true, false, false))
            ])
        );
    }

    #[test]
    fn a_retry_of_the_traced_edit_shows_what_its_snippet_showed() {
        let mut replay = Replay::in_memory();
        let events: Vec<(Event, Traced)> = edited_and_retried("one\n", "one", "uno")
            .into_iter()
            .map(|e| {
                let traced = replay.apply(&e).expect("apply");
                (e, traced)
            })
            .skip(1)
            .collect();
        let (origin, answer) = &events[0];
        let mut tracer = Tracer::of_event(origin, &answer.answer).expect("a write");
        tracer.observe(&events[1].0, &events[1].1);
        assert!(tracer.met()[&Seq(3)].shown);
        // The same retry, seen by a trace of the file's content after event 2, repeats an answer
        // given before that trace began: said, not guessed.
        let path = MemPath::absolute("/memories/a").expect("path");
        let mut tracer = Tracer::of_file(Seq(2), path, vec![0..4]);
        tracer.observe(&events[1].0, &events[1].1);
        assert!(tracer.met().is_empty());
        assert_eq!(tracer.unplaced(), [(Seq(3), Seq(2))]);
    }

    #[test]
    fn an_api_update_of_path_and_content_carries_nothing_on() {
        use crate::model::tool::api::ApiWrite;
        let create = Command::Create {
            path: "/memories/a".into(),
            file_text: "one\n".into(),
        };
        let mut update = event(
            2,
            crate::model::credential::OPERATOR,
            Command::Delete {
                path: String::new(),
            },
        );
        update.body = Body::Api(ApiWrite::Update {
            memory: 1,
            path: "/memories/a".into(),
            content: Some("new\n".into()),
            new_path: Some("/memories/b".into()),
            expect: None,
        });
        let mut moved = update.clone();
        moved.seq = Seq(3);
        moved.body = Body::Api(ApiWrite::Update {
            memory: 1,
            path: "/memories/b".into(),
            content: None,
            new_path: Some("/memories/c".into()),
            expect: None,
        });
        assert_eq!(
            traced_from_first(&[event(1, "ann", create), update, moved]),
            BTreeMap::from([(2, (false, false, true))])
        );
    }

    #[test]
    fn erased_events_are_named_their_moves_followed_and_what_they_wrote_over_lost() {
        use crate::model::event::{Erased, Kept};
        let erased = |seq: u64, change: KeptChange| {
            let mut e = event(
                seq,
                "bob",
                Command::Delete {
                    path: String::new(),
                },
            );
            e.body = Body::Erased(Erased {
                format: 11,
                payload_hash: EventHash::ZERO,
                kept: Some(Kept {
                    change,
                    by_api: false,
                }),
            });
            e
        };
        let create = Command::Create {
            path: "/memories/a".into(),
            file_text: "one\n".into(),
        };
        let events = [
            event(1, "ann", create),
            erased(
                2,
                KeptChange::Rename {
                    from: "/memories/a".into(),
                    to: "/memories/b".into(),
                },
            ),
            event(
                3,
                "ann",
                Command::View {
                    path: "/memories/b".into(),
                    view_range: None,
                },
            ),
            erased(
                4,
                KeptChange::Write {
                    path: "/memories/b".into(),
                    sha256: [0; 32],
                    bytes: 4,
                },
            ),
            event(
                5,
                "ann",
                Command::View {
                    path: "/memories/b".into(),
                    view_range: None,
                },
            ),
        ];
        // The erased move is followed (the view after it was shown the bytes where it moved
        // them); the erased write over them loses them, so the last view is not counted.
        assert_eq!(
            traced_from_first(&events),
            BTreeMap::from([
                (2, (false, true, false)),
                (3, (true, false, false)),
                (4, (false, false, true)),
            ])
        );
        let tracer = tracer_from_first(&events);
        assert_eq!(tracer.erased(), [Seq(2), Seq(4)]);
        assert!(tracer.met()[&Seq(2)].erased);
    }

    #[test]
    fn spans_follow_the_pieces_an_edit_kept() {
        // Traced 2..6 of a 10-byte file; an edit kept 0..4 at 0 and 5..10 at 7 (it replaced byte
        // 4 by three bytes of its own).
        assert_eq!(carry(&[2..6], &[(0..4, 0), (5..10, 7)]), vec![2..4, 7..8]);
        // Pieces that join up again make one span.
        assert_eq!(carry(&[0..10], &[(0..4, 0), (4..10, 4)]), vec![0..10]);
        assert_eq!(own_bytes(10, &[(0..4, 0), (5..10, 7)]), vec![4..7]);
        assert_eq!(own_bytes(3, &[]), vec![0..3]);
        assert!(meets(&[2..4, 7..8], &(3..5)));
        assert!(!meets(&[2..4, 7..8], &(4..7)));
        assert!(!meets(&[2..4], &(0..0)));
    }

    #[test]
    fn a_file_of_one_repeated_byte_costs_spans_not_bytes() {
        // A megabyte of `a`, edited a thousand times in the middle: the trace keeps two spans.
        let big = "a".repeat(1 << 20);
        let mut calls = vec![(
            0,
            Command::Create {
                path: "/memories/a".into(),
                file_text: big,
            },
        )];
        for _ in 0..1000 {
            calls.push((
                1,
                Command::Insert {
                    path: "/memories/a".into(),
                    insert_line: 0,
                    insert_text: "b\n".into(),
                },
            ));
        }
        let mut replay = Replay::in_memory();
        let mut tracer = None;
        for (i, (agent, command)) in calls.into_iter().enumerate() {
            let event = event(i as u64 + 1, ["ann", "bob"][agent], command);
            let traced = replay.apply(&event).expect("apply");
            match tracer.as_mut() {
                None => tracer = Some(Tracer::of_event(&event, &traced.answer).expect("write")),
                Some(t) => t.observe(&event, &traced),
            }
        }
        let tracer = tracer.expect("traced");
        assert_eq!(tracer.bytes(), 1 << 20);
        assert_eq!(tracer.files().values().map(Vec::len).sum::<usize>(), 1);
        assert_eq!(tracer.met().len(), 1000);
    }
}
