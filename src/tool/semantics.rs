//! The six commands' semantics: a pure function from (tree, call) to (result text, change).
//!
//! Nothing here does I/O beyond reading the [`Tree`] it is given, and nothing here fails but a
//! read of it: the functions return the tree's own [`Tree::Error`], untouched. The live write path, the verifier
//! and `ls --at` all call [`answer`], so a replay re-derives exactly the text the model was given.
//!
//! Both profiles share one code path; where they differ (the path echoed in messages, a few
//! strings, `view_range` slicing, the `str_replace` snippet, `insert`'s newline handling) the
//! difference is spelled out at that point with a `match` on the profile.
//!
//! Every call is answered under a [`Semantics`] version, the one its event records: the pieces of
//! text that differ between versions (how a name or a JSON value the model sent is quoted, the
//! words for a JSON error) come from that value's methods, so the versions share this code.

use std::fmt::Write as _;

use crate::credential::{
    already_revoked, check_id_under, check_label, check_token_agent_under, unknown_id,
};
use crate::hash::EventHash;
use crate::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemPath, PathRejection};
use crate::policy::{
    ANY_AGENT, Access, AdminCommand, DELETE_ERASES, DELETE_SETTING, Policy, SETTINGS,
    check_agent_id_under,
};
use crate::semantics_version::Semantics;
use crate::tool::call::Body;
use crate::tool::command::{Command, Profile, parse_text_under};
use crate::tool::limits::Limits;
use crate::tool::matcher::Occurrences;
use crate::tool::render::{echoed, listing, numbered};
use crate::tool::tree::{Change, NodeKind, Probe, TokenIssue, Tree};

/// Most lines a file may have and still be viewed.
pub const MAX_VIEW_LINES: usize = 999_999;

/// What a call produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The `tool_result` content.
    pub text: String,
    /// Whether the `tool_result` is an error.
    pub is_error: bool,
    /// The change to apply, for a successful mutation.
    pub change: Option<Change>,
}

impl Answer {
    fn ok(text: String, change: Option<Change>) -> Answer {
        Answer {
            text,
            is_error: false,
            change,
        }
    }

    fn err(text: String) -> Answer {
        Answer {
            text,
            is_error: true,
            change: None,
        }
    }
}

/// Answers `agent`'s call against `tree` under `semantics`: runs a parsed command under the
/// access policy, re-parses a rejected input, or changes the policy.
///
/// Every bad input gets an answer (an error text), so the only error is the tree's own: a read
/// of `tree` that failed, returned as the tree gave it.
pub fn answer<E>(
    tree: &dyn Tree<Error = E>,
    agent: &str,
    body: &Body,
    semantics: Semantics,
) -> Result<Answer, E> {
    match body {
        Body::Tool(call) => {
            let root = match MemPath::root_under(&call.root, semantics) {
                Ok(root) => root,
                Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
            };
            let ctx = Ctx {
                tree,
                root: &root,
                profile: call.profile,
                limits: call.limits,
                agent,
                policy: tree.policy()?,
                semantics,
            };
            ctx.execute(&call.command)
        }
        Body::Admin(command) => admin(tree, agent, command, semantics),
        Body::Api(write) => crate::tool::api::answer_api(tree, agent, write, semantics),
        Body::Rejected(r) => Ok(
            match parse_text_under(&r.input, &r.root, r.profile, semantics).command {
                Err(text) => Answer::err(text),
                // A rejected input that parses now was not rejected by this parser: replay flags it.
                Ok(_) => Answer::err(String::new()),
            },
        ),
        Body::RejectedDigest(d) => Ok(Answer::err(crate::tool::request::refusal_text(d))),
        // Nothing is left to answer from; replay never asks (see `Body::Erased`).
        Body::Erased(_) => Ok(Answer::ok(String::new(), None)),
    }
}

/// Answers an admin command made by operator `by`.
fn admin<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    command: &AdminCommand,
    semantics: Semantics,
) -> Result<Answer, E> {
    match command {
        AdminCommand::Grant {
            agent,
            prefix,
            access,
        } => acl(tree, agent, prefix, Some(*access), semantics),
        AdminCommand::Revoke { agent, prefix } => acl(tree, agent, prefix, None, semantics),
        AdminCommand::IssueToken {
            id,
            agent,
            label,
            hash,
        } => issue_token(tree, by, id, agent, label, *hash, semantics),
        AdminCommand::RevokeToken { id } => revoke_token(tree, by, id, semantics),
        AdminCommand::Redact { reason, seqs } => Ok(redacted(reason, seqs)),
        AdminCommand::Configure { name, value } => Ok(configured(name, value, semantics)),
    }
}

/// Answers the setting of store setting `name` to `value`.
fn configured(name: &str, value: &str, semantics: Semantics) -> Answer {
    let known = SETTINGS
        .iter()
        .map(|(n, values)| format!("{n} ({})", values.join(" or ")))
        .collect::<Vec<_>>()
        .join(", ");
    let Some((_, values)) = SETTINGS.iter().find(|(n, _)| *n == name) else {
        return Answer::err(format!(
            "Error: there is no setting {}; the settings are {known}",
            semantics.quote(name)
        ));
    };
    if !values.contains(&value) {
        return Answer::err(format!(
            "Error: {} is not a value of the setting {name}; give {}",
            semantics.quote(value),
            values.join(" or ")
        ));
    }
    let what = match (name, value) {
        (DELETE_SETTING, DELETE_ERASES) => {
            ": the memory tool's delete now erases the files it deletes, with their whole history"
        }
        (DELETE_SETTING, _) => {
            ": the memory tool's delete keeps the history of the files it deletes"
        }
        _ => "",
    };
    Answer::ok(
        format!("Set {name} to {value}{what}"),
        Some(Change::Configure {
            name: name.to_string(),
            value: value.to_string(),
        }),
    )
}

/// Answers the record of a redaction of `seqs` for `reason`: it changes nothing in the tree (the
/// events it names were erased from the log, and every replay skips them).
fn redacted(reason: &str, seqs: &[u64]) -> Answer {
    let n = seqs.len();
    let list = seqs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let plural = if n == 1 { "" } else { "s" };
    Answer::ok(
        format!("Redacted {n} event{plural} ({list}): {reason}"),
        None,
    )
}

/// Answers a grant of `access` to `agent` on `prefix`, or with `None` the revoke of that grant.
fn acl<E>(
    tree: &dyn Tree<Error = E>,
    agent: &str,
    prefix: &str,
    access: Option<Access>,
    semantics: Semantics,
) -> Result<Answer, E> {
    if agent != ANY_AGENT {
        if let Err(msg) = check_agent_id_under(agent, semantics) {
            return Ok(Answer::err(format!(
                "Error: {msg}, or \"*\" for every agent"
            )));
        }
    }
    let prefix = match MemPath::absolute_under(prefix, semantics) {
        Ok(p) => p,
        Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
    };
    let who = if agent == ANY_AGENT {
        "every agent".to_string()
    } else {
        format!("agent {agent}")
    };
    let agent = agent.to_string();
    Ok(match access {
        Some(access) => Answer::ok(
            format!("Granted {} on {prefix} to {who}", access.name()),
            Some(Change::Grant {
                agent,
                prefix,
                access,
            }),
        ),
        None => {
            if !tree
                .policy()?
                .grants()
                .iter()
                .any(|g| g.agent == agent && g.prefix == prefix)
            {
                return Ok(Answer::err(format!(
                    "Error: {who} has no grant on {prefix}; `mnemo acl list` shows the grants in force"
                )));
            }
            Answer::ok(
                format!("Revoked the grant on {prefix} from {who}"),
                Some(Change::Revoke { agent, prefix }),
            )
        }
    })
}

/// Answers the issue of agent token `id` for `agent` by operator `by`.
fn issue_token<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    id: &str,
    agent: &str,
    label: &str,
    hash: EventHash,
    semantics: Semantics,
) -> Result<Answer, E> {
    let checked = check_id_under(id, semantics)
        .and_then(|()| check_token_agent_under(agent, semantics))
        .and_then(|()| check_label(label));
    if let Err(msg) = checked {
        return Ok(Answer::err(format!("Error: {msg}")));
    }
    if let Some(taken) = tree.token(id)? {
        return Ok(Answer::err(format!(
            "Error: token id {id} is already taken (issued at event {}); issue the token again, which picks a fresh id",
            taken.issued
        )));
    }
    Ok(Answer::ok(
        format!("Issued token {id} to agent {agent}"),
        Some(Change::IssueToken(Box::new(TokenIssue {
            id: id.to_string(),
            agent: agent.to_string(),
            label: label.to_string(),
            hash,
            by: by.to_string(),
        }))),
    ))
}

/// Answers the revocation of agent token `id` by operator `by`.
fn revoke_token<E>(
    tree: &dyn Tree<Error = E>,
    by: &str,
    id: &str,
    semantics: Semantics,
) -> Result<Answer, E> {
    if let Err(msg) = check_id_under(id, semantics) {
        return Ok(Answer::err(format!("Error: {msg}")));
    }
    let Some(token) = tree.token(id)? else {
        return Ok(Answer::err(format!("Error: {}", unknown_id(id))));
    };
    if let Some(revoked) = token.revoked {
        return Ok(Answer::err(format!(
            "Error: {}",
            already_revoked(id, &revoked)
        )));
    }
    Ok(Answer::ok(
        format!(
            "Revoked token {id} of agent {}; its bearer is refused from the next request on",
            token.agent
        ),
        Some(Change::RevokeToken {
            id: id.to_string(),
            by: by.to_string(),
        }),
    ))
}

fn reject(raw: &str, root: &MemPath, why: PathRejection, semantics: Semantics) -> Answer {
    let raw = &*echoed(raw);
    Answer::err(match why {
        PathRejection::Outside => format!("Path must start with {root}, got: {raw}"),
        PathRejection::Escape => format!("Path {raw} would escape {root} directory"),
        PathRejection::ControlCharacter(c) => format!(
            "Error: Path {} contains the control character {}; memory paths are plain text such as {root}/notes.txt",
            semantics.quote(raw),
            semantics.control_character(c)
        ),
        PathRejection::InvisibleCharacter(c) => format!(
            "Error: Path {} contains the invisible character U+{:04X} (a bidi control or zero-width character, which can hide or reorder a name in a listing); memory paths are plain text such as {root}/notes.txt",
            semantics.quote_visibly(raw),
            u32::from(c)
        ),
        PathRejection::TooLong { len, max } => format!(
            "Error: Path {} is too long ({len} bytes where at most {max} are allowed; paths are limited to {MAX_PATH_BYTES} bytes and names to {MAX_SEGMENT_BYTES}); use a shorter name under {root}",
            semantics.quote(raw)
        ),
    })
}

/// A path as validated, with the text messages name it by.
struct Named {
    path: MemPath,
    /// `spec`: the canonical path; `python-sdk`: the raw path exactly as the model sent it.
    shown: String,
}

/// Everything one call runs with.
struct Ctx<'a, E> {
    tree: &'a dyn Tree<Error = E>,
    root: &'a MemPath,
    profile: Profile,
    limits: Limits,
    agent: &'a str,
    policy: Policy,
    semantics: Semantics,
}

/// `Error: ` in `spec`, nothing in `python-sdk` (whose runner sends the bare `ToolError` text).
fn prefix(profile: Profile) -> &'static str {
    match profile {
        Profile::Spec => "Error: ",
        Profile::PythonSdk => "",
    }
}

impl<E> Ctx<'_, E> {
    fn name(&self, raw: &str) -> Result<Named, Answer> {
        match MemPath::resolve(raw, self.root) {
            Ok(path) => Ok(Named {
                shown: match self.profile {
                    Profile::Spec => path.to_string(),
                    Profile::PythonSdk => raw.to_string(),
                },
                path,
            }),
            Err(why) => Err(reject(raw, self.root, why, self.semantics)),
        }
    }

    fn execute(&self, command: &Command) -> Result<Answer, E> {
        macro_rules! name {
            ($raw:expr) => {
                match self.name($raw) {
                    Ok(named) => named,
                    Err(answer) => return Ok(answer),
                }
            };
        }
        macro_rules! writable {
            ($raw:expr) => {{
                let named = name!($raw);
                if !self
                    .policy
                    .allows(self.agent, &named.path, Access::ReadWrite)
                {
                    return Ok(self.denied(&named, Access::ReadWrite));
                }
                named
            }};
        }
        match command {
            Command::View { path, view_range } => self.view(&name!(path), *view_range),
            Command::Create { path, file_text } => self.create(&writable!(path), file_text),
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(&writable!(path), old_str, new_str.as_deref().unwrap_or("")),
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(&writable!(path), *insert_line, insert_text),
            Command::Delete { path } => self.delete(&writable!(path)),
            Command::Rename { old_path, new_path } => {
                let from = writable!(old_path);
                let to = writable!(new_path);
                self.rename(&from, &to)
            }
        }
    }

    fn denied(&self, p: &Named, need: Access) -> Answer {
        Answer::err(format!(
            "Error: Access denied: agent {} has no {} grant covering {}",
            self.agent,
            need.name(),
            p.shown
        ))
    }

    /// Whether the calling agent may see an entry in a listing.
    fn visible(&self, path: &MemPath, kind: NodeKind) -> bool {
        match kind {
            NodeKind::File => self.policy.allows(self.agent, path, Access::Read),
            NodeKind::Dir => self.policy.may_see(self.agent, path),
        }
    }

    fn kind_of(&self, p: &MemPath) -> Result<Option<NodeKind>, E> {
        Ok(self.probe(p)?.kind)
    }

    /// [`Tree::probe`], with the configured root always a directory.
    fn probe(&self, p: &MemPath) -> Result<Probe, E> {
        if p == self.root {
            return Ok(Probe {
                kind: Some(NodeKind::Dir),
                file_above: None,
            });
        }
        self.tree.probe(p)
    }

    /// The file in the way of creating `p`: its nearest ancestor that is a file, from `p`'s probe.
    /// It may be the root or lie above it: a session with a root that contains this one (say
    /// `/memories` around `/memories/x`) can leave a file there.
    fn file_ancestor(&self, p: &MemPath, probe: Probe) -> Option<MemPath> {
        probe.file_above.map(|depth| p.ancestor(depth))
    }

    /// Why the root cannot be listed, when a session with an enclosing root left a file at the
    /// root or above it.
    fn unusable_root(&self) -> Result<Option<Answer>, E> {
        let root = self.root;
        let probe = self.tree.probe(root)?;
        let file = match (probe.kind, probe.file_above) {
            (Some(NodeKind::File), _) => root.clone(),
            (_, Some(depth)) => root.ancestor(depth),
            _ => return Ok(None),
        };
        let what = if &file == root {
            format!("The memory root {root} is a file, not a directory")
        } else {
            format!("The memory root {root} cannot hold files: {file} is a file, not a directory")
        };
        Ok(Some(Answer::err(format!(
            "Error: {what}. A session with a root that contains it wrote that file; use another root, or rename or delete {file} from such a session."
        ))))
    }

    /// The content of the file to edit, or the error for a missing path or a directory.
    fn editable(&self, p: &Named, spec_missing: &str) -> Result<Result<String, Answer>, E> {
        if let Some(content) = self.tree.read(&p.path)? {
            return Ok(Ok(content));
        }
        let shown = &p.shown;
        Ok(Err(Answer::err(match self.profile {
            Profile::Spec => format!("Error: The path {shown} does not exist{spec_missing}"),
            Profile::PythonSdk if self.kind_of(&p.path)?.is_some() => {
                format!("The path {shown} is not a file.")
            }
            Profile::PythonSdk => {
                format!("The path {shown} does not exist. Please provide a valid path.")
            }
        })))
    }

    /// The size-limit error for content of `len` bytes, if it is over the limit.
    fn too_big(&self, p: &Named, len: usize) -> Option<Answer> {
        let max = self.limits.max_file_bytes;
        (len as u64 > max).then(|| {
            Answer::err(format!(
                "Error: {} would hold {len} bytes, over the limit of {max} bytes for one memory file. Split the content across several files.",
                p.shown
            ))
        })
    }

    fn view(&self, p: &Named, range: Option<(i64, i64)>) -> Result<Answer, E> {
        if !self.policy.may_see(self.agent, &p.path) {
            return Ok(self.denied(p, Access::Read));
        }
        // One walk reads a file; the root always shows as a directory, unless a file is there.
        let file = if &p.path == self.root {
            if let Some(answer) = self.unusable_root()? {
                return Ok(answer);
            }
            None
        } else {
            self.tree.read(&p.path)?
        };
        if let Some(content) = file {
            if !self.policy.allows(self.agent, &p.path, Access::Read) {
                return Ok(self.denied(p, Access::Read));
            }
            return Ok(self.view_file(&p.shown, &content, range));
        }
        let visible = |path: &MemPath, kind| self.visible(path, kind);
        match self.kind_of(&p.path)? {
            Some(NodeKind::Dir) => {
                let text = listing(
                    self.tree,
                    &p.path,
                    &p.shown,
                    self.profile,
                    // A read grant covering the directory covers everything below it.
                    if self.policy.allows(self.agent, &p.path, Access::Read) {
                        None
                    } else {
                        Some(&visible)
                    },
                )?;
                let text = match self.limits.view_max_chars {
                    Some(cap) if self.semantics.caps_truthfully() => {
                        capped_listing(text, cap, &p.shown)
                    }
                    _ => text,
                };
                Ok(Answer::ok(text, None))
            }
            // Not a file (the read found none) and not a directory: nothing is there.
            _ => Ok(Answer::err(format!(
                "The path {} does not exist. Please provide a valid path.",
                p.shown
            ))),
        }
    }

    fn view_file(&self, shown: &str, content: &str, range: Option<(i64, i64)>) -> Answer {
        // Lines are counted before any is collected, and only the lines shown are: a file of
        // newlines costs one scan, not a table of millions of lines.
        let n = newlines(content) + 1;
        if n > MAX_VIEW_LINES {
            return Answer::err(format!(
                "File {shown} exceeds maximum line limit of 999,999 lines."
            ));
        }
        let strict = self.semantics.start_below_one_is_refused();
        let (first, lo, hi) = match (self.profile, range) {
            (_, None) => (1, 0, n),
            (Profile::Spec, Some((start, end))) => match spec_range(n, start, end, strict) {
                Some((from, to)) => (from, from - 1, to),
                None if self.semantics.caps_truthfully() => {
                    return Answer::err(format!(
                        "Error: Invalid {} parameter: [{start}, {end}]. {shown} has {n} lines: use [start_line, end_line] with 1 <= start_line <= end_line and start_line <= {n} (an end_line past {n} reads to line {n}), or end_line -1 to read to the end.",
                        self.semantics.view_range_field()
                    ));
                }
                None => {
                    return Answer::err(format!(
                        "Error: Invalid view_range [{start}, {end}] for {shown}, which has {n} lines. Use [start_line, end_line] with 1 <= start_line <= end_line <= {n}, or end_line -1 to read to the end."
                    ));
                }
            },
            (Profile::PythonSdk, Some((start, end))) => python_slice(n, start, end),
        };
        let shown_lines: Vec<&str> = content.split('\n').skip(lo).take(hi - lo).collect();
        let header = format!("Here's the content of {shown} with line numbers:\n");
        let text = match self.limits.view_max_chars {
            Some(cap) if self.semantics.caps_truthfully() => {
                let asked_end = match range {
                    Some((_, end)) if end != -1 && hi < n => Some(hi),
                    _ => None,
                };
                let page = Page {
                    total: n,
                    asked_end,
                };
                capped(&shown_lines, first, cap, Some(page))
            }
            Some(cap) => capped(&shown_lines, first, cap, None),
            None => numbered(&shown_lines, first),
        };
        Answer::ok(header + &text, None)
    }

    fn create(&self, p: &Named, text: &str) -> Result<Answer, E> {
        let probe = self.probe(&p.path)?;
        if &p.path == self.root && self.profile == Profile::Spec && self.semantics.names_the_root()
        {
            return Ok(Answer::err(format!(
                "Error: {} is the memory root directory, which always exists and cannot be a file; create a file inside it, such as {}/notes.md",
                p.shown, p.shown
            )));
        }
        if probe.kind.is_some() {
            return Ok(Answer::err(format!(
                "{}File {} already exists",
                prefix(self.profile),
                p.shown
            )));
        }
        if let Some(file) = self.file_ancestor(&p.path, probe) {
            return Ok(Answer::err(format!(
                "Error: Cannot create {}: {file} is a file, not a directory. Choose a path whose parent directories are not files.",
                p.shown
            )));
        }
        if let Some(err) = self.too_big(p, text.len()) {
            return Ok(err);
        }
        Ok(Answer::ok(
            format!("File created successfully at: {}", p.shown),
            Some(Change::Write {
                path: p.path.clone(),
                content: text.to_string(),
            }),
        ))
    }

    fn str_replace(&self, p: &Named, old: &str, new: &str) -> Result<Answer, E> {
        let content = match self.editable(p, ". Please provide a valid path.")? {
            Ok(content) => content,
            Err(answer) => return Ok(answer),
        };
        let shown = &p.shown;
        if old.is_empty() && self.profile == Profile::Spec {
            return Ok(Answer::err(format!(
                "Error: old_str must not be empty. Copy the exact text to replace from a view of {shown}; to add text use insert."
            )));
        }
        // Zero, one or several matches, counted without overlap (the SDK's `str.count`): at most
        // two runs of the standard library's linear-time search.
        let mut found = content.match_indices(old).map(|(at, _)| at);
        let Some(at) = found.next() else {
            return Ok(Answer::err(format!(
                "No replacement was performed, old_str `{}` did not appear verbatim in {shown}.",
                echoed(old)
            )));
        };
        if found.next().is_some() {
            return Ok(Answer::err(format!(
                "No replacement was performed. Multiple occurrences of old_str `{}` in lines: {}. Please ensure it is unique",
                echoed(old),
                match_lines(&content, old, self.profile)
            )));
        }
        // `old` lies inside `content`, so this cannot underflow.
        let len = content.len() - old.len() + new.len();
        if let Some(err) = self.too_big(p, len) {
            return Ok(err);
        }
        let mut updated = String::with_capacity(len);
        updated.push_str(&content[..at]);
        updated.push_str(new);
        updated.push_str(&content[at + old.len()..]);
        let first_changed = newlines(&content[..at]) + 1;
        let total_lines = newlines(&updated) + 1;
        let (heading, last_changed) = match self.profile {
            Profile::Spec => (
                "The memory file has been edited.",
                first_changed + newlines(new),
            ),
            // The SDK shows two lines either side of the first changed line only.
            Profile::PythonSdk => (
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):",
                first_changed,
            ),
        };
        // `first_changed` is a line of `updated`, so `from <= to`; only the window is collected.
        let from = first_changed.saturating_sub(2).max(1);
        let to = (last_changed + 2).min(total_lines);
        let window: Vec<&str> = updated
            .split('\n')
            .skip(from - 1)
            .take(to + 1 - from)
            .collect();
        let snippet = numbered(&window, from);
        Ok(Answer::ok(
            format!("{heading}\n{snippet}"),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        ))
    }

    fn insert(&self, p: &Named, line: i64, text: &str) -> Result<Answer, E> {
        let content = match self.editable(p, "")? {
            Ok(content) => content,
            Err(answer) => return Ok(answer),
        };
        let n = line_count(&content);
        let at_line = match usize::try_from(line) {
            Ok(l) if l <= n => l,
            _ => {
                return Ok(Answer::err(match self.profile {
                    Profile::Spec => format!(
                        "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
                    ),
                    Profile::PythonSdk => format!(
                        "Invalid `insert_line` parameter: {line}. It should be within the range [0, {n}]."
                    ),
                }));
            }
        };
        let updated = match self.profile {
            Profile::Spec => spec_insert(&content, at_line, text),
            Profile::PythonSdk => python_insert(&content, at_line, text),
        };
        if let Some(err) = self.too_big(p, updated.len()) {
            return Ok(err);
        }
        Ok(Answer::ok(
            format!("The file {} has been edited.", p.shown),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        ))
    }

    fn delete(&self, p: &Named) -> Result<Answer, E> {
        if &p.path == self.root {
            return Ok(Answer::err(format!(
                "Cannot delete the {} directory itself",
                self.root
            )));
        }
        if self.tree.kind(&p.path)?.is_none() {
            return Ok(Answer::err(format!(
                "{}The path {} does not exist",
                prefix(self.profile),
                p.shown
            )));
        }
        Ok(Answer::ok(
            format!("Successfully deleted {}", p.shown),
            Some(Change::Delete {
                path: p.path.clone(),
            }),
        ))
    }

    fn rename(&self, from: &Named, to: &Named) -> Result<Answer, E> {
        let (old, new) = (&from.shown, &to.shown);
        if &from.path == self.root {
            return Ok(Answer::err(format!(
                "Cannot rename the {} directory itself",
                self.root
            )));
        }
        let to_probe = self.probe(&to.path)?;
        if to_probe.kind.is_some() {
            return Ok(Answer::err(format!(
                "{}The destination {new} already exists",
                prefix(self.profile)
            )));
        }
        if self.tree.kind(&from.path)?.is_none() {
            return Ok(Answer::err(format!(
                "{}The path {old} does not exist",
                prefix(self.profile)
            )));
        }
        if to.path.starts_with(&from.path) {
            return Ok(Answer::err(format!(
                "Error: Cannot rename {old} to {new}: a directory cannot be moved inside itself"
            )));
        }
        if let Some(file) = self.file_ancestor(&to.path, to_probe) {
            return Ok(Answer::err(format!(
                "Error: Cannot rename {old} to {new}: {file} is a file, not a directory"
            )));
        }
        Ok(Answer::ok(
            format!("Successfully renamed {old} to {new}"),
            Some(Change::Rename {
                from: from.path.clone(),
                to: to.path.clone(),
            }),
        ))
    }
}

/// `spec`'s `view_range`: 1-based inclusive `[start, end]`, `end == -1` to the end, start clamped
/// to 1 and end to the last line; `None` when the range selects nothing sensible.
/// (Under `strict`, semantics 3, a start below 1 selects nothing, as the error says.)
fn spec_range(n: usize, start: i64, end: i64, strict: bool) -> Option<(usize, usize)> {
    if strict && start < 1 {
        return None;
    }
    let from = usize::try_from(start.max(1)).ok()?;
    let to = if end == -1 {
        n
    } else {
        usize::try_from(end).ok()?.min(n)
    };
    (from <= n && from <= to).then_some((from, to))
}

/// The Python SDK's `lines[max(1, start) - 1 : end]` (Python slice rules; `end == -1` means the
/// end). Returns the number of the first line and the slice bounds.
fn python_slice(n: usize, start: i64, end: i64) -> (usize, usize, usize) {
    let n_i = i128::try_from(n).unwrap_or(i128::MAX);
    let lo = i128::from(start.max(1)) - 1;
    let hi = if end == -1 {
        n_i
    } else if end < 0 {
        (n_i + i128::from(end)).max(0)
    } else {
        i128::from(end).min(n_i)
    };
    let number_from = usize::try_from(lo + 1).unwrap_or(usize::MAX);
    let lo = usize::try_from(lo.min(n_i)).unwrap_or(n);
    let hi = usize::try_from(hi).unwrap_or(n).max(lo);
    (number_from, lo, hi)
}

/// Numbered lines, stopping before the text would pass `cap` characters, with a note that tells
/// the model how to page on.
///
/// A line's characters are counted only as far as the room left, so a view of one huge line costs
/// what the cap allows, not the line's length. `page` (semantics 3) is where the lines sit in the
/// file, for a note that counts the file's lines and pages on within the range asked for;
/// without it the note is semantics 2's.
fn capped(lines: &[&str], first: usize, cap: u64, page: Option<Page>) -> String {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = String::new();
    // Characters written so far; never more than `cap`.
    let mut chars = 0;
    let mut shown = 0;
    let mut cut = false;
    // The length in bytes of a first line that did not fit, of which only the start is shown.
    let mut partial = None;
    for (i, line) in lines.iter().enumerate() {
        let number = format!("{:>6}\t", first + i);
        // The number is ASCII: its length is its character count.
        let fixed = number.len() + usize::from(i > 0);
        let room = cap - chars;
        let line_chars = room.checked_sub(fixed).and_then(|left| {
            let counted = line.chars().take(left.saturating_add(1)).count();
            (counted <= left).then_some(counted)
        });
        let Some(line_chars) = line_chars else {
            if shown == 0 {
                // Not even one line fits: show the start of it rather than nothing.
                out.extend(number.chars().chain(line.chars()).take(cap));
                shown = 1;
                partial = Some(line.len());
            }
            cut = true;
            break;
        };
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&number);
        out.push_str(line);
        chars += fixed + line_chars;
        shown += 1;
    }
    if cut {
        let note = match page {
            Some(page) => page.note(cap, first, first + shown - 1, partial),
            None => truncation_note(cap, first, shown, lines.len(), partial.is_some()),
        };
        out.push_str(&note);
    }
    out
}

/// Where a capped view's lines sit in the file (semantics 3).
#[derive(Clone, Copy)]
struct Page {
    /// The lines in the file.
    total: usize,
    /// The last line the `view_range` asked for, when it stops before the end of the file.
    asked_end: Option<usize>,
}

impl Page {
    /// The note after a view of lines `first..=last` cut at `cap`; `partial` is the length of
    /// line `first` when only its start is shown.
    fn note(self, cap: usize, first: usize, last: usize, partial: Option<usize>) -> String {
        let total = self.total;
        let asked_last = self.asked_end.unwrap_or(total);
        let next = last + 1;
        let end = self
            .asked_end
            .map_or_else(|| "-1".to_string(), |e| e.to_string());
        let after = if last < asked_last {
            format!("Use view_range [{next}, {end}] to read on.")
        } else {
            "It is the last line asked for.".to_string()
        };
        match partial {
            None => format!(
                "\n[Output truncated at {cap} characters: showing lines {first}-{last} of the {total} in the file. {after}]"
            ),
            Some(bytes) => format!(
                "\n[Output truncated at {cap} characters: line {first} is {bytes} bytes long, more than a view under this limit shows, so only its start is shown and no view shows the rest of it; to change the line, str_replace a part of it you can see. {after}]"
            ),
        }
    }
}

/// A listing cut at `cap` characters (semantics 3): the header and the directory's own line,
/// then the entry lines that fit in `cap` (counted as a file view counts its lines: without the
/// header), then a note with how many entries are shown and which view lists the rest. `shown`
/// names the listed directory as the listing does.
fn capped_listing(text: String, cap: u64, shown: &str) -> String {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    // Lines: the header, the directory itself, then one per entry.
    let lines: Vec<&str> = text.split('\n').collect();
    let mut kept: usize = 2;
    let mut chars = 0;
    for line in &lines[2.min(lines.len())..] {
        chars += line.chars().count() + 1;
        if chars > cap {
            break;
        }
        kept += 1;
    }
    if kept >= lines.len() {
        return text;
    }
    let entries = lines.len() - 2;
    let listed = kept - 2;
    let omitted = lines[kept..]
        .iter()
        .filter_map(|line| line.split_once('\t').map(|(_, path)| path))
        .find_map(|path| {
            let rest = path.strip_prefix(shown)?.strip_prefix('/')?;
            let (top, below) = rest.split_once('/')?;
            (!below.is_empty() || rest.ends_with('/')).then(|| format!("{shown}/{top}"))
        });
    let rest = match omitted {
        Some(dir) => format!(
            "View a subdirectory, such as {dir}, to list what it holds, or view a file by its path."
        ),
        None => {
            format!("The entries left out are files directly in {shown}; view a file by its path.")
        }
    };
    let mut out = lines[..kept].join("\n");
    let _ = write!(
        out,
        "\n[Listing truncated at {cap} characters: showing {listed} of {entries} entries. {rest}]"
    );
    out
}

/// What a capped view says after the `shown` lines from `first` it holds, of `count` from
/// there: which `view_range` reads on, or, when the first line did not fit (`partial`), that no
/// view under this cap shows the rest of it and which range reads the lines after it.
fn truncation_note(cap: usize, first: usize, shown: usize, count: usize, partial: bool) -> String {
    let last = first + shown - 1;
    let total = first + count - 1;
    let next = last + 1;
    if !partial {
        return format!(
            "\n[Output truncated at {cap} characters: showing lines {first}-{last} of {total}. Use view_range [{next}, -1] to read the rest, or a narrower range.]"
        );
    }
    let after = if last < total {
        format!("Use view_range [{next}, -1] to read the lines after it.")
    } else {
        "It is the last line asked for.".to_string()
    };
    format!(
        "\n[Output truncated at {cap} characters: line {first} alone is longer than that, so only its start is shown, and no view under this limit shows the rest of it. {after}]"
    )
}

/// The lines `str_replace` names for several matches, joined by `, `: `spec` names each line
/// once, `python-sdk` once per overlapping match, as the SDK's scan does.
///
/// One pass finds every match ([`Occurrences`]) and another walks the newlines up to each, so the
/// cost is linear in the file size plus the text returned, whatever `old` is.
fn match_lines(content: &str, old: &str, profile: Profile) -> String {
    let mut list = String::new();
    // How many entries the list has (or would have, past the cap), and whether it was cut.
    let mut entries = 0usize;
    let mut cut = false;
    let mut line = 1;
    // The first newline not yet counted, if any is left.
    let mut newline = content.find('\n');
    // The current line's number as text, and whether it is listed yet.
    let mut digits = String::from("1");
    let mut listed = false;
    for at in Occurrences::new(content, old) {
        let before = line;
        while let Some(nl) = newline.filter(|&nl| nl < at) {
            line += 1;
            newline = content[nl + 1..].find('\n').map(|next| nl + 1 + next);
        }
        if line != before {
            digits.clear();
            // NOTE: writing to a String cannot fail.
            let _ = write!(digits, "{line}");
            listed = false;
        }
        if profile == Profile::PythonSdk || !listed {
            entries += 1;
            let separator = if list.is_empty() { 0 } else { 2 };
            if !cut && list.len() + separator + digits.len() <= MAX_LISTED_BYTES {
                if separator > 0 {
                    list.push_str(", ");
                }
                list.push_str(&digits);
            } else {
                cut = true;
            }
            listed = true;
        }
    }
    if cut {
        // NOTE: writing to a String cannot fail.
        let _ = write!(list, ", … ({entries} in all)");
    }
    list
}

/// The longest list of line numbers the "Multiple occurrences" error gives whole (64 KiB, about
/// 10,000 numbers); past it the rest are counted.
pub const MAX_LISTED_BYTES: usize = 64 * 1024;

/// How many `\n` `text` holds.
fn newlines(text: &str) -> usize {
    text.matches('\n').count()
}

/// Lines in `content` for `insert`: a final `\n` does not start another line.
fn line_count(content: &str) -> usize {
    if content.is_empty() {
        0
    } else {
        newlines(content) + usize::from(!content.ends_with('\n'))
    }
}

/// `spec`'s insert: `text` as whole line(s) after line `at_line`; only a `\n` needed to keep it on
/// its own lines is added, every other byte is kept.
fn spec_insert(content: &str, at_line: usize, text: &str) -> String {
    let offset = if at_line == 0 {
        0
    } else {
        content
            .match_indices('\n')
            .nth(at_line - 1)
            .map_or(content.len(), |(i, _)| i + 1)
    };
    let (before, after) = content.split_at(offset);
    let mut updated = String::with_capacity(content.len() + text.len() + 2);
    updated.push_str(before);
    if !before.is_empty() && !before.ends_with('\n') {
        updated.push('\n');
    }
    updated.push_str(text);
    if !after.is_empty() && !text.ends_with('\n') {
        updated.push('\n');
    }
    updated.push_str(after);
    updated
}

/// The Python SDK's insert: split on `\n` (dropping the empty tail of a final newline), insert
/// `text` without its trailing newlines, join, and end with a newline.
///
/// Built by slicing at the start of line `at_line` rather than through a table of every line.
fn python_insert(content: &str, at_line: usize, text: &str) -> String {
    let text = text.trim_end_matches('\n');
    let mut updated = String::with_capacity(content.len() + text.len() + 2);
    if content.is_empty() {
        // No lines at all: the text is the whole file.
        updated.push_str(text);
    } else {
        // The lines are `body`'s, split on `\n`: at least one.
        let body = content.strip_suffix('\n').unwrap_or(content);
        let start = if at_line == 0 {
            Some(0)
        } else {
            body.match_indices('\n')
                .nth(at_line - 1)
                .map(|(i, _)| i + 1)
        };
        match start {
            Some(start) => {
                updated.push_str(&body[..start]);
                updated.push_str(text);
                updated.push('\n');
                updated.push_str(&body[start..]);
            }
            // After the last line.
            None => {
                updated.push_str(body);
                updated.push('\n');
                updated.push_str(text);
            }
        }
    }
    if !updated.ends_with('\n') {
        updated.push('\n');
    }
    updated
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The line list as the quadratic scan built it: a fresh search one character after each match.
    fn rescanned_match_lines(content: &str, old: &str, profile: Profile) -> String {
        let mut lines: Vec<usize> = Vec::new();
        let mut from = 0;
        while let Some(pos) = content[from..].find(old) {
            let at = from + pos;
            let line = content[..at].matches('\n').count() + 1;
            if profile == Profile::PythonSdk || lines.last() != Some(&line) {
                lines.push(line);
            }
            match content[at..].chars().next() {
                Some(c) => from = at + c.len_utf8(),
                None => break,
            }
        }
        let list: Vec<String> = lines.iter().map(usize::to_string).collect();
        list.join(", ")
    }

    /// The capped view as first written: every line formatted and counted whole.
    fn formatted_capped(lines: &[&str], first: usize, cap: u64, page: Option<Page>) -> String {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        let mut out = String::new();
        let mut chars = 0;
        let mut shown = 0;
        let mut cut = false;
        let mut partial = None;
        for (i, line) in lines.iter().enumerate() {
            let text = format!("{:>6}\t{line}", first + i);
            let len = text.chars().count() + usize::from(i > 0);
            if chars + len > cap {
                if shown == 0 {
                    out.extend(text.chars().take(cap));
                    shown = 1;
                    partial = Some(line.len());
                }
                cut = true;
                break;
            }
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&text);
            chars += len;
            shown += 1;
        }
        if cut {
            out.push_str(&match page {
                Some(page) => page.note(cap, first, first + shown - 1, partial),
                None => truncation_note(cap, first, shown, lines.len(), partial.is_some()),
            });
        }
        out
    }

    /// The SDK's insert as it reads in Python: a list of lines, `insert`, `join`.
    fn listed_python_insert(content: &str, at_line: usize, text: &str) -> String {
        let mut lines: Vec<&str> = content.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        lines.insert(at_line.min(lines.len()), text.trim_end_matches('\n'));
        let mut updated = lines.join("\n");
        if !updated.ends_with('\n') {
            updated.push('\n');
        }
        updated
    }

    #[test]
    fn match_lines_lists_overlapping_matches_per_profile() {
        assert_eq!(match_lines("aaaa", "aa", Profile::PythonSdk), "1, 1, 1");
        assert_eq!(match_lines("aaaa", "aa", Profile::Spec), "1");
        assert_eq!(match_lines("ab", "", Profile::PythonSdk), "1, 1, 1");
        assert_eq!(
            match_lines("x\nyx\n\nx", "x", Profile::PythonSdk),
            "1, 2, 4"
        );
        assert_eq!(match_lines("a\na\na", "a\na", Profile::Spec), "1, 2");
    }

    #[test]
    fn the_match_list_stops_at_its_cap_and_counts_the_rest() {
        let lines = 30_000;
        let content = "a\n".repeat(lines);
        // The numbers 1, 2, ... joined by ", " for as long as they fit the cap.
        let mut fitting = String::new();
        let mut shown = 0;
        for n in 1..=lines {
            let next = if fitting.is_empty() {
                n.to_string()
            } else {
                format!(", {n}")
            };
            if fitting.len() + next.len() > MAX_LISTED_BYTES {
                break;
            }
            fitting.push_str(&next);
            shown += 1;
        }
        assert!(shown > 5_000 && shown < lines, "{shown}");
        for profile in [Profile::Spec, Profile::PythonSdk] {
            let list = match_lines(&content, "a", profile);
            assert_eq!(list, format!("{fitting}, … ({lines} in all)"));
        }
        // Under the cap, nothing is counted.
        let content = "a\n".repeat(1000);
        assert!(!match_lines(&content, "a", Profile::Spec).contains('…'));
    }

    #[test]
    fn a_cap_counts_a_huge_line_only_as_far_as_it_fits() {
        let line = "é".repeat(100_000);
        let out = capped(&[&line, "b"], 1, 20, None);
        assert_eq!(out, formatted_capped(&[&line, "b"], 1, 20, None));
        let shown = format!(
            "     1\t{}\n[Output truncated at 20 characters",
            "é".repeat(13)
        );
        assert!(out.starts_with(&shown), "{out}");
    }

    proptest! {
        #[test]
        fn match_lines_agrees_with_the_rescanning_scan(
            content in "[ab\n]{0,40}",
            old in "[ab\n]{0,4}",
            sdk in any::<bool>(),
        ) {
            let profile = if sdk { Profile::PythonSdk } else { Profile::Spec };
            prop_assert_eq!(
                match_lines(&content, &old, profile),
                rescanned_match_lines(&content, &old, profile)
            );
        }

        #[test]
        fn capped_agrees_with_formatting_every_line(
            lines in proptest::collection::vec("[aé\t]{0,12}", 0..8),
            first in prop_oneof![1usize..3, 999_990usize..1_000_010],
            cap in 0u64..80,
            page in proptest::option::of((0usize..4, any::<bool>())),
        ) {
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            // The lines sit in a file with `more` lines after them, and were asked for to the
            // end or to their last.
            let last = first + lines.len().max(1) - 1;
            let page = page.map(|(more, to_end)| Page {
                total: last + more,
                asked_end: (!to_end && more > 0).then_some(last),
            });
            prop_assert_eq!(
                capped(&lines, first, cap, page),
                formatted_capped(&lines, first, cap, page)
            );
        }

        #[test]
        fn python_insert_agrees_with_the_list_of_lines(
            content in "[a\n\r]{0,12}",
            line in 0usize..8,
            text in "[b\n]{0,4}",
        ) {
            let line = line.min(line_count(&content));
            prop_assert_eq!(
                python_insert(&content, line, &text),
                listed_python_insert(&content, line, &text)
            );
        }
    }
}
