//! Reverting: files put back as they were after an earlier event, by ordinary memory-tool calls
//! appended after a record of the revert (`mnemo revert`).
//!
//! Two questions, one answer. `--to SEQ [--path P]`: the files under `P` (all of them without
//! it) as they were after event `SEQ`. `--agent A --since SEQ`: the files agent `A` changed
//! after event `SEQ` (wrote, moved, deleted), each as it was after `SEQ`, and no other file.
//!
//! The plan ([`MnemoClient::revert_plan`]) replays the log once from event 1, following files
//! by identity as [`crate::audit::lineage`] does: the tree after `SEQ` and now, and every write
//! after `SEQ` with the files it touched and its agent. The calls that turn one tree into the
//! other come from `plan::calls` (renames where a file moved, so its history follows it). A
//! conflict is a write the revert would throw away that the operator may not mean to: with
//! `--agent A`, a write by another agent to a file `A` changed (putting that file back undoes
//! it too); with `--to`, a file written after `SEQ` by more than one agent (reverting it undoes
//! every one of them). A plan with conflicts is refused unless forced.
//!
//! The revert ([`MnemoClient::revert`]) appends one admin event, [`AdminCommand::Revert`] (the
//! operator as its agent; the seq, the scope, the writes undone and how many calls follow),
//! then each call, under the operator's agent with the tool_use id `revert-R-N` (`R` the
//! record's seq, `N` from 1). Each call is answered, logged and replayed by `verify` like any
//! other, and checked against the grants in force, so the operator needs read-write on what it
//! puts back (the plan says so before anything is written). A call that fails stops the revert
//! and says which calls were made; the record stays in the log as every event does.

mod plan;

use std::collections::{BTreeMap, BTreeSet};

use crate::audit::history::held_records;
use crate::audit::lineage::Files;
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::event::{Body, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::{Access, AdminCommand};
use crate::model::seq::listed;
use crate::model::tool::{Change, Command, Limits, Profile, ToolCall, Tree};
use crate::store::kv::MemKv;
use crate::store::log::Store;
use crate::store::projection::Projection;
use crate::store::replay::Replay;
use plan::{Placed, Step};

/// What a revert puts back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RevertScope {
    /// The files under `path` (`None`: every file) as they were after event `seq`.
    To {
        /// The event whose tree is put back (1 to the head).
        seq: Seq,
        /// A file or directory, such as `/memories/notes`.
        path: Option<String>,
    },
    /// The files `agent` changed after event `since`, each as it was then.
    Agent {
        /// The agent whose writes are undone.
        agent: String,
        /// The event after which they are undone (0 to the head).
        since: Seq,
    },
}

/// What a revert would do: the calls in order, the writes they undo and the conflicts that
/// refuse it unless forced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevertPlan {
    /// The event whose tree is put back.
    pub to: Seq,
    /// What is put back, in words (`/memories/notes`, `agent-2's writes`), as the record says.
    pub scope: String,
    /// The last event when the plan was made.
    pub head: Seq,
    /// The writes after `to` that the calls undo, ascending.
    pub undone: Vec<Seq>,
    /// The calls, each with the memory root it runs under.
    pub calls: Vec<(String, Command)>,
    /// Writes the revert would throw away that another agent made, one line each.
    pub conflicts: Vec<String>,
}

/// A revert made: its plan, the seq of its record and of its last call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reverted {
    /// What was done.
    pub plan: RevertPlan,
    /// The record's seq (`None` when there was nothing to put back, and nothing was written).
    pub record: Option<Seq>,
    /// The seq of the last call made.
    pub last: Option<Seq>,
}

impl RevertScope {
    /// The scope its parts name, as every interface takes them (`--to`, `"to"`, `to=`): `to`
    /// (with `path`, optional) without `agent` and `since`, or `agent` with `since` and nothing
    /// else. `None` for any other mix, which the caller refuses in its own words.
    pub fn of(
        to: Option<Seq>,
        path: Option<String>,
        agent: Option<String>,
        since: Option<Seq>,
    ) -> Option<RevertScope> {
        match (to, path, agent, since) {
            (Some(seq), path, None, None) => Some(RevertScope::To { seq, path }),
            (None, None, Some(agent), Some(since)) => Some(RevertScope::Agent { agent, since }),
            _ => None,
        }
    }

    /// The scope as `POST /v1/revert` takes it: `{"to", "path"}` or `{"agent", "since"}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            RevertScope::To { seq, path } => serde_json::json!({"to": seq.0, "path": path}),
            RevertScope::Agent { agent, since } => {
                serde_json::json!({"agent": agent, "since": since.0})
            }
        }
    }
}

impl RevertPlan {
    /// What `mnemo revert --dry-run` prints: a line for the revert, one per call, the conflicts.
    pub fn summary(&self) -> String {
        if self.calls.is_empty() {
            let what = match self.scope.strip_suffix("'s writes") {
                Some(agent) => format!(
                    "every file {agent} changed after seq {} is as it was then",
                    self.to
                ),
                None => format!(
                    "the files under {} are as they were after seq {}",
                    self.scope, self.to
                ),
            };
            return format!(
                "nothing to revert: {what} (the log ends at seq {})\n",
                self.head
            );
        }
        let mut out = format!(
            "revert of {} to seq {}: undoes {} ({}) in {}\n",
            self.scope,
            self.to,
            count(self.undone.len(), "event"),
            join(&self.undone),
            count(self.calls.len(), "call"),
        );
        for (_, command) in &self.calls {
            out.push_str("  ");
            out.push_str(&describe(command));
            out.push('\n');
        }
        if !self.conflicts.is_empty() {
            out.push_str(&format!(
                "{} (refused without --force):\n",
                count(self.conflicts.len(), "conflict")
            ));
            for line in &self.conflicts {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Why the revert of this plan is refused: it has conflicts and `force` is not set.
    pub fn refused(&self, force: bool) -> Result<()> {
        if self.conflicts.is_empty() || force {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the revert would throw away other agents' writes, so nothing was written (give --force to revert anyway, or narrow it):\n  {}",
            self.conflicts.join("\n  ")
        )))
    }

    /// The plan as `mnemo revert --json` prints it: `{"to", "scope", "head", "undone", "calls":
    /// [{"root", "input"}], "conflicts"}`, each input as the memory tool takes it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "to": self.to.0,
            "scope": self.scope,
            "head": self.head.0,
            "undone": self.undone.iter().map(|s| s.0).collect::<Vec<_>>(),
            "calls": self.calls.iter().map(|(root, c)| serde_json::json!({
                "root": root,
                "input": c.input(),
            })).collect::<Vec<_>>(),
            "conflicts": self.conflicts,
        })
    }
}

impl RevertPlan {
    /// A plan from its JSON ([`RevertPlan::to_json`]), as a server answers it; `None` for
    /// another shape.
    #[cfg(feature = "client")]
    pub(crate) fn from_json(answer: &serde_json::Value) -> Option<RevertPlan> {
        let seqs = |v: &serde_json::Value| -> Option<Vec<Seq>> {
            v.as_array()?.iter().map(|s| s.as_u64().map(Seq)).collect()
        };
        let calls = answer["calls"]
            .as_array()?
            .iter()
            .map(|call| {
                let root = call["root"].as_str()?;
                let parsed =
                    crate::model::tool::command::parse_value(&call["input"], root, Profile::Spec);
                Some((root.to_string(), parsed.command.ok()?))
            })
            .collect::<Option<_>>()?;
        Some(RevertPlan {
            to: Seq(answer["to"].as_u64()?),
            scope: answer["scope"].as_str()?.to_string(),
            head: Seq(answer["head"].as_u64()?),
            undone: seqs(&answer["undone"])?,
            calls,
            conflicts: answer["conflicts"]
                .as_array()?
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
        })
    }
}

impl Reverted {
    /// The revert as `mnemo revert --json` prints it (and `POST /v1/revert` answers it): the
    /// plan's object with `"record"` and `"last"` (`null` when nothing was written).
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = self.plan.to_json();
        json["record"] = serde_json::json!(self.record.map(|s| s.0));
        json["last"] = serde_json::json!(self.last.map(|s| s.0));
        json
    }

    /// A revert from its JSON ([`Reverted::to_json`]); `None` for another shape.
    #[cfg(feature = "client")]
    pub(crate) fn from_json(answer: &serde_json::Value) -> Option<Reverted> {
        let seq = |v: &serde_json::Value| match v {
            serde_json::Value::Null => Some(None),
            v => v.as_u64().map(|s| Some(Seq(s))),
        };
        Some(Reverted {
            plan: RevertPlan::from_json(answer)?,
            record: seq(&answer["record"])?,
            last: seq(&answer["last"])?,
        })
    }

    /// What `mnemo revert` prints once it is done.
    pub fn summary(&self) -> String {
        match (self.record, self.last) {
            (Some(record), Some(last)) => format!(
                "reverted {} to seq {}: the record at seq {record}, its {} at seqs {} to {last}; undone: {}\n",
                self.plan.scope,
                self.plan.to,
                count(self.plan.calls.len(), "call"),
                record.0 + 1,
                join(&self.plan.undone)
            ),
            _ => self.plan.summary(),
        }
    }
}

fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn join(seqs: &[Seq]) -> String {
    listed(&seqs.iter().map(|s| s.0).collect::<Vec<_>>())
}

/// One call as a dry run lists it.
fn describe(command: &Command) -> String {
    match command {
        Command::Create { path, file_text } => {
            format!("create {path} ({} bytes)", file_text.len())
        }
        Command::Delete { path } => format!("delete {path}"),
        Command::Rename { old_path, new_path } => format!("rename {old_path} -> {new_path}"),
        Command::StrReplace { path, new_str, .. } => format!(
            "str_replace {path} (its whole content, back to {} bytes)",
            new_str.as_deref().unwrap_or("").len()
        ),
        Command::Insert {
            path, insert_text, ..
        } => format!("insert {path} line 0 ({} bytes)", insert_text.len()),
        Command::View { path, .. } => format!("view {path}"),
    }
}

impl MnemoClient {
    /// What [`revert`](Self::revert) would do, changing nothing: the calls, the writes they
    /// undo and the conflicts, for this client's agent as the operator (on a served store,
    /// `POST /v1/revert` with `dry_run`, the operator's only).
    pub fn revert_plan(&self, scope: &RevertScope) -> Result<RevertPlan> {
        self.backend().revert_plan(self, scope)
    }

    /// Puts files back as `scope` says: the revert's record, then its calls, each an ordinary
    /// event by this client's agent (the operator; on a served store, through `POST
    /// /v1/revert`, by who asked). Refused, writing nothing, when the plan has conflicts and
    /// `force` is not set, or a call would need a place another file holds. A plan with no
    /// calls writes nothing.
    pub fn revert(&self, scope: &RevertScope, force: bool) -> Result<Reverted> {
        self.backend().revert(self, scope, force)
    }
}

/// [`MnemoClient::revert_plan`] of a store open in this process, or of a read-only copy.
pub(crate) fn planned(client: &MnemoClient, scope: &RevertScope) -> Result<RevertPlan> {
    let operator = client.agent_id().to_string();
    client.read_local(|store| plan_on(store, scope, &operator))
}

/// [`MnemoClient::revert`] of a store open in this process.
pub(crate) fn reverted(client: &MnemoClient, scope: &RevertScope, force: bool) -> Result<Reverted> {
    let plan = client.revert_plan(scope)?;
    if plan.calls.is_empty() {
        return Ok(Reverted {
            plan,
            record: None,
            last: None,
        });
    }
    plan.refused(force)?;
    if client.head()?.seq != plan.head {
        return Err(Error::InvalidArgument(format!(
            "the log moved on from seq {} while the revert was planned; nothing was written: run it again",
            plan.head
        )));
    }
    let record = client.admin(AdminCommand::Revert {
        to: plan.to.0,
        scope: plan.scope.clone(),
        seqs: plan.undone.iter().map(|s| s.0).collect(),
        calls: plan.calls.len() as u64,
    })?;
    if record.is_error {
        return Err(Error::InvalidArgument(format!(
            "the revert's record was refused (seq {}): {}",
            record.seq, record.text
        )));
    }
    let limits = Limits {
        max_file_bytes: plan
            .calls
            .iter()
            .map(|(_, c)| written_len(c))
            .max()
            .unwrap_or(0)
            .max(Limits::default().max_file_bytes),
        ..Limits::default()
    };
    let mut last = None;
    for (n, (root, command)) in plan.calls.iter().enumerate() {
        let receipt = client.call(
            Some(format!("revert-{}-{}", record.seq, n + 1)),
            spec_call(root, limits, command.clone()),
        )?;
        if receipt.is_error {
            return Err(Error::InvalidArgument(format!(
                "the revert recorded at seq {} stopped at its call {} of {} (seq {}, {}): {}; {} before it were made (another write since the plan?): plan it again to finish",
                record.seq,
                n + 1,
                plan.calls.len(),
                receipt.seq,
                describe(command),
                receipt.text,
                count(n, "call"),
            )));
        }
        last = Some(receipt.seq);
    }
    Ok(Reverted {
        plan,
        record: Some(record.seq),
        last,
    })
}

/// A memory-tool call at `root` under the spec profile.
fn spec_call(root: &str, limits: Limits, command: Command) -> Body {
    Body::Tool(ToolCall {
        root: root.to_string(),
        profile: Profile::Spec,
        limits,
        command,
    })
}

/// The bytes a call leaves in its file, for the file-size limit the revert's calls run under.
fn written_len(command: &Command) -> u64 {
    match command {
        Command::Create { file_text, .. } => file_text.len() as u64,
        Command::StrReplace { new_str, .. } => new_str.as_deref().unwrap_or("").len() as u64,
        Command::Insert { insert_text, .. } => insert_text.len() as u64,
        _ => 0,
    }
}

/// A write after the point reverted to: its seq, agent and the files it touched.
struct Write {
    seq: Seq,
    agent: String,
}

/// The files of a replayed tree by identity (`live`: path → ordinal), under `dir`; a file whose
/// content a redaction erased is named apart (its content cannot be put back).
fn by_identity(
    tree: &Projection<MemKv>,
    live: &BTreeMap<MemPath, u64>,
    dir: &MemPath,
) -> Result<(BTreeMap<u64, Placed>, BTreeSet<u64>)> {
    let held = held_records(tree, dir)?;
    let mut files = BTreeMap::new();
    for record in held {
        let path = MemPath::absolute(&record.path).map_err(Error::corrupt)?;
        let Some(id) = live.get(&path) else {
            return Err(Error::corrupt(format!(
                "{path} is in the replayed tree but no event created it"
            )));
        };
        files.insert(
            *id,
            Placed {
                path,
                content: record.content,
            },
        );
    }
    let erased = live
        .range(dir.clone()..)
        .take_while(|(p, _)| p.starts_with(dir))
        .filter(|(_, id)| !files.contains_key(id))
        .map(|(_, id)| *id)
        .collect();
    Ok((files, erased))
}

/// Drops from `want` each file that no longer exists whose path another file now holds with the
/// same content (one an earlier revert created anew, since a create cannot bring a file's
/// identity back, or one written so since), and that file from `have`: the path is already as
/// wanted, and putting the file back again would delete it and create it anew, at every revert.
/// A file that still exists elsewhere is left wanted: moving it back keeps its history.
fn already_back(
    want: &mut BTreeMap<u64, Placed>,
    have: &mut BTreeMap<u64, Placed>,
    now: &BTreeMap<u64, Placed>,
) {
    let at: BTreeMap<&MemPath, (u64, &Placed)> =
        now.iter().map(|(id, f)| (&f.path, (*id, f))).collect();
    let back: Vec<(u64, u64)> = want
        .iter()
        .filter(|(id, _)| !now.contains_key(id))
        .filter_map(|(id, wanted)| {
            let (other, held) = at.get(&wanted.path)?;
            (!want.contains_key(other) && *held == wanted).then_some((*id, *other))
        })
        .collect();
    for (id, other) in back {
        want.remove(&id);
        have.remove(&other);
    }
}

/// The plan of `scope` on `store`, for `operator`.
fn plan_on(store: &Store, scope: &RevertScope, operator: &str) -> Result<RevertPlan> {
    let head = store.log_end()?.seq;
    let (to, dir) = match scope {
        RevertScope::To { seq, path } => {
            if seq.0 == 0 {
                return Err(Error::InvalidArgument(
                    "events count from 1: give --to a seq from 1 to the head (`mnemo log` lists them); to delete every file, delete them".into(),
                ));
            }
            let dir = match path {
                Some(raw) => MemPath::absolute(raw).map_err(|why| {
                    Error::InvalidArgument(format!("--path {raw:?} is not a path: {why}"))
                })?,
                None => MemPath::top(),
            };
            (*seq, Some(dir))
        }
        RevertScope::Agent { agent, .. } if agent.is_empty() => {
            return Err(Error::InvalidArgument("--agent needs an agent id".into()));
        }
        RevertScope::Agent { since, .. } => (*since, None),
    };
    if to > head {
        return Err(Error::InvalidArgument(format!(
            "there is no event {to}: the log ends at seq {head}; give a seq up to {head}"
        )));
    }
    let top = MemPath::top();
    // One replay: the tree and its identities after `to`, then every write after it.
    let mut replay = Replay::in_memory_with_listings();
    let mut files = Files::default();
    replay.run(store, to, |_, event, traced| {
        files.observe(event, traced.answer.change.as_ref());
        Ok::<(), Error>(())
    })?;
    let then_live = files.live().clone();
    let (then, then_erased) = by_identity(replay.tree(), &then_live, &top)?;
    drop(then_live);
    let mut writes: BTreeMap<u64, Vec<Write>> = BTreeMap::new();
    replay.run(store, head, |_, event, traced| {
        let change = traced.answer.change.as_ref();
        let (_, ids) = files.observe(event, change);
        if matches!(
            change,
            Some(
                Change::Write { .. }
                    | Change::Delete { .. }
                    | Change::Rename { .. }
                    | Change::Rewrite { .. }
            )
        ) {
            for id in ids {
                writes.entry(id).or_default().push(Write {
                    seq: event.seq,
                    agent: event.header.agent.clone(),
                });
            }
        }
        Ok::<(), Error>(())
    })?;
    let (now, now_erased) = by_identity(replay.tree(), files.live(), &top)?;
    let policy = replay.tree().policy()?;

    // The files concerned, what is wanted of each and what there is.
    let (concerned, scope_text): (BTreeSet<u64>, String) = match (scope, &dir) {
        (RevertScope::To { .. }, Some(dir)) => {
            let under = |f: &Placed| f.path.starts_with(dir);
            let ids = then
                .iter()
                .chain(now.iter())
                .filter(|(_, f)| under(f))
                .map(|(id, _)| *id)
                .collect();
            (ids, dir.to_string())
        }
        (RevertScope::Agent { agent, .. }, _) => {
            let ids = writes
                .iter()
                .filter(|(_, w)| w.iter().any(|w| &w.agent == agent))
                .map(|(id, _)| *id)
                .collect();
            (ids, format!("{agent}'s writes"))
        }
        (RevertScope::To { .. }, None) => unreachable!("a --to scope has a directory"),
    };
    let within = |f: &Placed| match &dir {
        Some(dir) => f.path.starts_with(dir),
        None => true,
    };
    let mut want = BTreeMap::new();
    let mut have = BTreeMap::new();
    for id in &concerned {
        if let Some(f) = then.get(id).filter(|f| within(f)) {
            want.insert(*id, f.clone());
        }
        if let Some(f) = now.get(id).filter(|f| within(f)) {
            have.insert(*id, f.clone());
        }
        if then_erased.contains(id) || now_erased.contains(id) {
            return Err(Error::InvalidArgument(format!(
                "file {id} (by order of creation) holds content a redaction erased, which a revert cannot put back; narrow the revert"
            )));
        }
    }
    already_back(&mut want, &mut have, &now);
    let changed: BTreeSet<u64> = concerned
        .iter()
        .copied()
        .filter(|id| want.get(id) != have.get(id))
        .collect();
    want.retain(|id, _| changed.contains(id));
    have.retain(|id, _| changed.contains(id));
    let fixed: BTreeSet<MemPath> = now
        .iter()
        .filter(|(id, _)| !have.contains_key(id))
        .map(|(_, f)| f.path.clone())
        .collect();
    let steps = plan::calls(&want, &have, &fixed, head.0).map_err(|why| {
        Error::InvalidArgument(format!(
            "the revert cannot be made: {why}; nothing was written"
        ))
    })?;

    // The writes undone, and the conflicts.
    let mut undone = BTreeSet::new();
    let mut conflicts = Vec::new();
    for id in &changed {
        let Some(w) = writes.get(id) else { continue };
        undone.extend(w.iter().map(|w| w.seq));
        let shown = have
            .get(id)
            .or_else(|| want.get(id))
            .map_or_else(|| format!("file {id}"), |f| f.path.to_string());
        let others: Vec<&Write> = match scope {
            RevertScope::Agent { agent, .. } => w.iter().filter(|w| &w.agent != agent).collect(),
            RevertScope::To { .. } => {
                let first = &w[0].agent;
                if w.iter().all(|w| &w.agent == first) {
                    Vec::new()
                } else {
                    w.iter().collect()
                }
            }
        };
        if !others.is_empty() {
            conflicts.push(format!(
                "{shown}: written after seq {to} by {}",
                by_agent(&others)
            ));
        }
    }

    // A file the revert deletes from the directory, which was elsewhere then: moved in since
    // from outside the directory, it would be held by no file at all.
    if let (RevertScope::To { .. }, Some(dir)) = (scope, &dir) {
        for (id, f) in &have {
            let Some(was) = then.get(id).filter(|was| !was.path.starts_with(dir)) else {
                continue;
            };
            if !want.contains_key(id) {
                conflicts.push(format!(
                    "{}: it was {} after seq {to}, outside {dir}, so the revert deletes it and no file will hold its content (revert a directory above both to move it back)",
                    f.path, was.path
                ));
            }
        }
    }

    // The operator must be allowed to make every call.
    for step in &steps {
        for raw in step.command.paths() {
            let path = MemPath::absolute(raw).map_err(Error::corrupt)?;
            if !policy.allows(operator, &path, Access::ReadWrite) {
                // A file moved aside goes through a directory named for the head, which the
                // next plan names anew: the grant to ask for is of the directory it is in.
                let grant = path
                    .segments()
                    .position(|name| name.starts_with(".revert-"))
                    .map_or_else(|| path.clone(), |depth| path.ancestor(depth));
                return Err(Error::InvalidArgument(format!(
                    "{operator} may not write {path}, which the revert would: grant it first (mnemo acl grant --agent {operator} --prefix {grant} --access read-write), or revert as an operator that may; nothing was written"
                )));
            }
        }
    }
    Ok(RevertPlan {
        to,
        scope: scope_text,
        head,
        undone: undone.into_iter().collect(),
        calls: steps
            .into_iter()
            .map(|Step { root, command }| (root, command))
            .collect(),
        conflicts,
    })
}

/// `agent-1 (5, 7), agent-2 (9)`: the writes' agents, each with its seqs, in order of first write.
fn by_agent(writes: &[&Write]) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut seqs: BTreeMap<&str, Vec<Seq>> = BTreeMap::new();
    for w in writes {
        if !seqs.contains_key(w.agent.as_str()) {
            order.push(&w.agent);
        }
        seqs.entry(&w.agent).or_default().push(w.seq);
    }
    order
        .iter()
        .map(|a| format!("{a} ({})", join(&seqs[a])))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    //! Random sessions of three agents against a naive model that follows files by identity:
    //! `revert --to` leaves the tree the log had at that seq, `--agent --since` without
    //! conflicts puts back exactly the agent's files, and the store verifies after either.

    use super::*;
    use crate::store::log::Durability;
    use proptest::prelude::*;

    const AGENTS: [&str; 3] = ["agent-1", "agent-2", "agent-3"];
    const NAMES: [&str; 6] = ["a", "b", "c", "d/a", "d/b", "e/a"];
    const TEXTS: [&str; 4] = ["one\n", "two", "one two\n", ""];

    #[derive(Clone, Debug)]
    enum Op {
        Create(usize, usize),
        Replace(usize, usize, usize),
        Insert(usize, usize),
        Rename(usize, usize),
        RenameDir(bool),
        Delete(usize),
        DeleteDir,
    }

    fn op() -> impl Strategy<Value = (usize, Op)> {
        let n = NAMES.len();
        let t = TEXTS.len();
        let op = prop_oneof![
            3 => (0..n, 0..t).prop_map(|(p, x)| Op::Create(p, x)),
            3 => (0..n, 0..t, 0..t).prop_map(|(p, a, b)| Op::Replace(p, a, b)),
            2 => (0..n, 0..t).prop_map(|(p, x)| Op::Insert(p, x)),
            2 => (0..n, 0..n).prop_map(|(a, b)| Op::Rename(a, b)),
            1 => any::<bool>().prop_map(Op::RenameDir),
            2 => (0..n).prop_map(Op::Delete),
            1 => Just(Op::DeleteDir),
        ];
        (0..AGENTS.len(), op)
    }

    fn path(name: &str) -> String {
        format!("/memories/{name}")
    }

    /// The model: path → (identity, content); identities from 1 in order of creation.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct Model {
        files: BTreeMap<String, (u64, String)>,
        next: u64,
    }

    impl Model {
        fn kind(&self, p: &str) -> Option<bool> {
            if self.files.contains_key(p) {
                return Some(true);
            }
            let dir = format!("{p}/");
            self.files
                .keys()
                .any(|k| k.starts_with(&dir))
                .then_some(false)
        }

        fn under(&self, p: &str) -> Vec<String> {
            let dir = format!("{p}/");
            self.files
                .keys()
                .filter(|k| *k == p || k.starts_with(&dir))
                .cloned()
                .collect()
        }

        fn file_above(&self, p: &str) -> bool {
            let mut at = p.to_string();
            while let Some(i) = at.rfind('/') {
                at.truncate(i);
                if self.files.contains_key(&at) {
                    return true;
                }
            }
            false
        }

        /// Applies `command` as the memory tool would; returns the identities it changed, or
        /// `None` when the tool refuses it.
        fn apply(&mut self, command: &Command) -> Option<Vec<u64>> {
            match command {
                Command::Create { path, file_text } => {
                    if self.kind(path).is_some() || self.file_above(path) {
                        return None;
                    }
                    self.next += 1;
                    self.files
                        .insert(path.clone(), (self.next, file_text.clone()));
                    Some(vec![self.next])
                }
                Command::StrReplace {
                    path,
                    old_str,
                    new_str,
                } => {
                    let (id, content) = self.files.get_mut(path)?;
                    if old_str.is_empty() || content.matches(old_str.as_str()).count() != 1 {
                        return None;
                    }
                    *content = content.replace(old_str.as_str(), new_str.as_deref().unwrap_or(""));
                    Some(vec![*id])
                }
                Command::Insert {
                    path, insert_text, ..
                } => {
                    let (id, content) = self.files.get_mut(path)?;
                    let mut updated = insert_text.clone();
                    if !content.is_empty() && !insert_text.ends_with('\n') {
                        updated.push('\n');
                    }
                    updated.push_str(content);
                    *content = updated;
                    Some(vec![*id])
                }
                Command::Rename { old_path, new_path } => {
                    if self.kind(old_path).is_none()
                        || self.kind(new_path).is_some()
                        || self.file_above(new_path)
                        || new_path.starts_with(&format!("{old_path}/"))
                    {
                        return None;
                    }
                    let mut ids = Vec::new();
                    for from in self.under(old_path) {
                        let file = self.files.remove(&from)?;
                        ids.push(file.0);
                        let to = format!("{new_path}{}", &from[old_path.len()..]);
                        self.files.insert(to, file);
                    }
                    Some(ids)
                }
                Command::Delete { path } => {
                    let gone = self.under(path);
                    if gone.is_empty() {
                        return None;
                    }
                    Some(
                        gone.iter()
                            .filter_map(|p| self.files.remove(p))
                            .map(|f| f.0)
                            .collect(),
                    )
                }
                Command::View { .. } => Some(Vec::new()),
            }
        }

        fn contents(&self) -> BTreeMap<String, String> {
            self.files
                .iter()
                .map(|(p, (_, c))| (p.clone(), c.clone()))
                .collect()
        }
    }

    fn command(op: &Op, model: &Model) -> Command {
        match op {
            Op::Create(p, x) => Command::Create {
                path: path(NAMES[*p]),
                file_text: TEXTS[*x].into(),
            },
            Op::Replace(p, a, b) => {
                // Half the time, a text the file holds: an edit that lands.
                let held = model.files.get(&path(NAMES[*p])).map(|f| f.1.clone());
                let old = match held {
                    Some(c) if a % 2 == 0 && !c.is_empty() => c,
                    _ => TEXTS[*a].into(),
                };
                Command::StrReplace {
                    path: path(NAMES[*p]),
                    old_str: old,
                    new_str: Some(TEXTS[*b].into()),
                }
            }
            Op::Insert(p, x) => Command::Insert {
                path: path(NAMES[*p]),
                insert_line: 0,
                insert_text: TEXTS[*x].into(),
            },
            Op::Rename(a, b) => Command::Rename {
                old_path: path(NAMES[*a]),
                new_path: path(NAMES[*b]),
            },
            Op::RenameDir(back) => {
                let (from, to) = if *back { ("e", "d") } else { ("d", "e") };
                Command::Rename {
                    old_path: path(from),
                    new_path: path(to),
                }
            }
            Op::Delete(p) => Command::Delete {
                path: path(NAMES[*p]),
            },
            Op::DeleteDir => Command::Delete { path: path("d") },
        }
    }

    struct Session {
        _dir: tempfile::TempDir,
        client: MnemoClient,
        /// The model after each seq (index 0: the empty tree).
        trees: Vec<Model>,
        /// Per seq (from 1), its agent and the identities it changed.
        changed: Vec<(usize, Vec<u64>)>,
    }

    fn run(ops: &[(usize, Op)]) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let client = MnemoClient::builder(dir.path().join("s.mnemo.db"))
            .agent_id(crate::model::credential::OPERATOR)
            .durability(Durability::Buffered)
            .open()
            .unwrap();
        let mut model = Model::default();
        let mut trees = vec![model.clone()];
        let mut changed = Vec::new();
        for (agent, op) in ops {
            let command = command(op, &model);
            let expect = model.apply(&command);
            let receipt = client
                .with_agent(AGENTS[*agent])
                .unwrap()
                .call(
                    None,
                    spec_call("/memories", Limits::default(), command.clone()),
                )
                .unwrap();
            assert_eq!(
                receipt.is_error,
                expect.is_none(),
                "{command:?}: {}",
                receipt.text
            );
            assert_eq!(receipt.seq.0, trees.len() as u64);
            trees.push(model.clone());
            changed.push((*agent, expect.unwrap_or_default()));
        }
        Session {
            _dir: dir,
            client,
            trees,
            changed,
        }
    }

    fn tree(client: &MnemoClient, at: Option<Seq>) -> BTreeMap<String, String> {
        client
            .tree_at(&MemPath::top(), at)
            .unwrap()
            .into_iter()
            .map(|r| (r.path, r.content))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// `revert --to SEQ` (forced: several agents wrote) leaves the tree the log had after
        /// SEQ, which is the model's; verify is intact after it.
        #[test]
        fn a_revert_to_a_seq_leaves_the_tree_of_that_seq(
            ops in prop::collection::vec(op(), 1..24),
            pick in any::<prop::sample::Index>(),
        ) {
            let s = run(&ops);
            let to = 1 + pick.index(ops.len());
            prop_assert_eq!(tree(&s.client, Some(Seq(to as u64))), s.trees[to].contents());
            let plan = s.client.revert_plan(&RevertScope::To { seq: Seq(to as u64), path: None }).unwrap();
            let done = s.client.revert(&RevertScope::To { seq: Seq(to as u64), path: None }, true).unwrap();
            prop_assert_eq!(&done.plan, &plan);
            prop_assert_eq!(tree(&s.client, None), s.trees[to].contents(), "{}", plan.summary());
            prop_assert!(s.client.verify().unwrap().is_intact());
        }

        /// `revert --agent A --since S`: its conflicts are exactly the files A changed that
        /// another agent also changed after S; without any, the files A changed are as they
        /// were after S and every other file as it is.
        #[test]
        fn an_agents_revert_puts_back_its_files_and_no_other(
            ops in prop::collection::vec(op(), 1..24),
            pick in any::<prop::sample::Index>(),
            agent in 0..AGENTS.len(),
        ) {
            let s = run(&ops);
            let since = pick.index(ops.len() + 1);
            let after = &s.changed[since..];
            let touched: BTreeSet<u64> = after
                .iter()
                .filter(|(a, _)| *a == agent)
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
            let conflicted = after
                .iter()
                .any(|(a, ids)| *a != agent && ids.iter().any(|id| touched.contains(id)));
            let scope = RevertScope::Agent { agent: AGENTS[agent].into(), since: Seq(since as u64) };
            let plan = match s.client.revert_plan(&scope) {
                Ok(plan) => plan,
                // A place another agent's file took since: refused as a whole.
                Err(e) => {
                    prop_assert!(e.to_string().contains("cannot"), "{e}");
                    return Ok(());
                }
            };
            let (then, now) = (&s.trees[since], s.trees.last().unwrap());
            // A file gone whose path holds its content in a file not itself put back is back
            // already: neither it nor the file that holds its place changes.
            let wanted = |id: u64| then.files.values().any(|f| f.0 == id) && touched.contains(&id);
            let mut back = BTreeSet::new();
            for (path, f) in then.files.iter().filter(|(_, f)| touched.contains(&f.0)) {
                let gone = !now.files.values().any(|g| g.0 == f.0);
                if let Some(g) = now.files.get(path).filter(|g| gone && g.1 == f.1 && !wanted(g.0)) {
                    back.extend([f.0, g.0]);
                }
            }
            let reverted_changes: BTreeSet<u64> = touched
                .iter()
                .copied()
                .filter(|id| {
                    let was = then.files.iter().find(|(_, f)| f.0 == *id);
                    let is = now.files.iter().find(|(_, f)| f.0 == *id);
                    was != is && !back.contains(id)
                })
                .collect();
            let conflicted_now = after.iter().any(|(a, ids)| {
                *a != agent && ids.iter().any(|id| reverted_changes.contains(id))
            });
            prop_assert_eq!(!plan.conflicts.is_empty(), conflicted_now, "{}", plan.summary());
            prop_assert!(conflicted || !conflicted_now);
            if conflicted_now {
                return Ok(());
            }
            s.client.revert(&scope, false).unwrap();
            let mut expected: BTreeMap<String, String> = now
                .files
                .iter()
                .filter(|(_, f)| !touched.contains(&f.0))
                .map(|(p, f)| (p.clone(), f.1.clone()))
                .collect();
            expected.extend(
                then.files
                    .iter()
                    .filter(|(_, f)| touched.contains(&f.0))
                    .map(|(p, f)| (p.clone(), f.1.clone())),
            );
            prop_assert_eq!(tree(&s.client, None), expected, "{}", plan.summary());
            prop_assert!(s.client.verify().unwrap().is_intact());
        }
    }

    /// A file deleted since is put back by a create, which makes a new file: a second revert
    /// to the same point finds its path as wanted and has nothing to do (it deleted and created
    /// the file again, and `--agent` was refused for the file it had put back).
    #[test]
    fn a_file_put_back_by_a_create_is_not_put_back_again() {
        let s = run(&[(0, Op::Create(0, 0)), (1, Op::Delete(0))]);
        let to = RevertScope::To {
            seq: Seq(1),
            path: None,
        };
        let first = s.client.revert(&to, false).unwrap();
        assert_eq!(first.plan.calls.len(), 1, "{}", first.plan.summary());
        let head = s.client.head().unwrap().seq;
        let again = s.client.revert(&to, false).unwrap();
        assert!(again.plan.calls.is_empty(), "{}", again.plan.summary());
        assert_eq!(again.record, None, "nothing written");
        assert_eq!(s.client.head().unwrap().seq, head);

        // agent-2 deleted agent-1's file: undoing agent-2 twice puts it back once.
        let s = run(&[(0, Op::Create(1, 2)), (1, Op::Delete(1))]);
        let agent = RevertScope::Agent {
            agent: AGENTS[1].into(),
            since: Seq(1),
        };
        let first = s.client.revert(&agent, false).unwrap();
        assert_eq!(first.plan.calls.len(), 1, "{}", first.plan.summary());
        let head = s.client.head().unwrap().seq;
        let again = s.client.revert(&agent, false).unwrap();
        assert!(again.plan.calls.is_empty(), "{}", again.plan.summary());
        assert_eq!(s.client.head().unwrap().seq, head);
        assert_eq!(
            tree(&s.client, None),
            BTreeMap::from([("/memories/b".to_string(), TEXTS[2].to_string())])
        );
        assert!(s.client.verify().unwrap().is_intact());
    }

    /// A file moved into the reverted directory since, from outside it, would be deleted and held
    /// by no file: a conflict, refused unless forced.
    #[test]
    fn a_file_moved_in_from_outside_is_not_deleted_unasked() {
        let s = run(&[(0, Op::Create(3, 0)), (0, Op::Rename(3, 5))]);
        let scope = RevertScope::To {
            seq: Seq(1),
            path: Some("/memories/e".into()),
        };
        let plan = s.client.revert_plan(&scope).unwrap();
        assert_eq!(plan.conflicts.len(), 1, "{}", plan.summary());
        assert!(
            plan.conflicts[0].contains("it was /memories/d/a after seq 1, outside /memories/e"),
            "{}",
            plan.summary()
        );
        assert!(s.client.revert(&scope, false).is_err(), "refused unforced");
        assert_eq!(s.client.head().unwrap().seq, Seq(2), "nothing written");
        // A directory above both moves it back.
        let above = RevertScope::To {
            seq: Seq(1),
            path: Some("/memories".into()),
        };
        let plan = s.client.revert_plan(&above).unwrap();
        assert!(plan.conflicts.is_empty(), "{}", plan.summary());
        s.client.revert(&above, false).unwrap();
        assert_eq!(
            tree(&s.client, None),
            BTreeMap::from([("/memories/d/a".to_string(), TEXTS[0].to_string())])
        );
    }

    #[test]
    fn bad_points_are_refused_and_an_empty_plan_says_why() {
        let s = run(&[(0, Op::Create(0, 0)), (1, Op::Create(1, 1))]);
        let to = |seq: u64, path: Option<&str>| RevertScope::To {
            seq: Seq(seq),
            path: path.map(str::to_string),
        };
        for bad in [to(0, None), to(3, None), to(1, Some("memories"))] {
            assert!(matches!(
                s.client.revert_plan(&bad),
                Err(Error::InvalidArgument(_))
            ));
        }
        let agent = |a: &str, since: u64| RevertScope::Agent {
            agent: a.into(),
            since: Seq(since),
        };
        assert!(s.client.revert_plan(&agent("agent-1", 9)).is_err());
        let none = s.client.revert_plan(&agent("nobody", 0)).unwrap();
        assert!(none.calls.is_empty());
        assert!(
            none.summary()
                .starts_with("nothing to revert: every file nobody changed")
        );
        let head = s.client.revert(&to(2, None), false).unwrap();
        assert_eq!(head.record, None, "nothing to put back, nothing written");
        assert!(head.summary().contains("are as they were after seq 2"));
        // A path that did not exist then: what is there now goes.
        let gone = s.client.revert_plan(&to(1, Some("/memories/b"))).unwrap();
        assert_eq!(gone.calls.len(), 1);
        assert_eq!(s.client.head().unwrap().seq, Seq(2));
    }
}
