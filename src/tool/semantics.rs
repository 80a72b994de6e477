//! The six commands' semantics: a pure function from (tree, call) to (result text, change).
//!
//! Nothing here does I/O beyond reading the [`Tree`] it is given. The live write path, the verifier
//! and `ls --at` all call [`answer`], so a replay re-derives exactly the text the model was given.
//!
//! Both profiles share one code path; where they differ (the path echoed in messages, a few
//! strings, `view_range` slicing, the `str_replace` snippet, `insert`'s newline handling) the
//! difference is spelled out at that point with a `match` on the profile.

use crate::error::Result;
use crate::event::Body;
use crate::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemPath, PathRejection};
use crate::policy::{ANY_AGENT, Access, AdminCommand, Policy, check_agent_id};
use crate::tool::command::{Command, Profile, parse_text};
use crate::tool::limits::Limits;
use crate::tool::render::{listing, numbered};
use crate::tool::tree::{Change, NodeKind, Probe, Tree};

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

/// Answers `agent`'s call against `tree`: runs a parsed command under the access policy,
/// re-parses a rejected input, or changes the policy.
pub fn answer(tree: &dyn Tree, agent: &str, body: &Body) -> Result<Answer> {
    match body {
        Body::Tool(call) => {
            let root = match MemPath::root(&call.root) {
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
            };
            ctx.execute(&call.command)
        }
        Body::Admin(command) => admin(&tree.policy()?, command),
        Body::Rejected(r) => Ok(match parse_text(&r.input, &r.root, r.profile).command {
            Err(text) => Answer::err(text),
            // A rejected input that parses now was not rejected by this parser: replay flags it.
            Ok(_) => Answer::err(String::new()),
        }),
    }
}

/// Answers a policy change.
fn admin(policy: &Policy, command: &AdminCommand) -> Result<Answer> {
    let (agent, prefix) = match command {
        AdminCommand::Grant { agent, prefix, .. } | AdminCommand::Revoke { agent, prefix } => {
            (agent, prefix)
        }
    };
    if agent != ANY_AGENT {
        if let Err(msg) = check_agent_id(agent) {
            return Ok(Answer::err(format!(
                "Error: {msg}, or \"*\" for every agent"
            )));
        }
    }
    let prefix = match MemPath::absolute(prefix) {
        Ok(p) => p,
        Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
    };
    let who = if agent == ANY_AGENT {
        "every agent".to_string()
    } else {
        format!("agent {agent}")
    };
    Ok(match command {
        AdminCommand::Grant { access, .. } => Answer::ok(
            format!("Granted {} on {prefix} to {who}", access.name()),
            Some(Change::Grant {
                agent: agent.clone(),
                prefix,
                access: *access,
            }),
        ),
        AdminCommand::Revoke { .. } => {
            if !policy
                .grants()
                .iter()
                .any(|g| &g.agent == agent && g.prefix == prefix)
            {
                return Ok(Answer::err(format!(
                    "Error: {who} has no grant on {prefix}; `mnemo acl list` shows the grants in force"
                )));
            }
            Answer::ok(
                format!("Revoked the grant on {prefix} from {who}"),
                Some(Change::Revoke {
                    agent: agent.clone(),
                    prefix,
                }),
            )
        }
    })
}

fn reject(raw: &str, root: &MemPath, why: PathRejection) -> Answer {
    Answer::err(match why {
        PathRejection::Outside => format!("Path must start with {root}, got: {raw}"),
        PathRejection::Escape => format!("Path {raw} would escape {root} directory"),
        PathRejection::ControlCharacter(c) => format!(
            "Error: Path {raw:?} contains the control character {c:?}; memory paths are plain text such as {root}/notes.txt"
        ),
        PathRejection::TooLong { len, max } => format!(
            "Error: Path {raw:?} is too long ({len} bytes where at most {max} are allowed; paths are limited to {MAX_PATH_BYTES} bytes and names to {MAX_SEGMENT_BYTES}); use a shorter name under {root}"
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
struct Ctx<'a> {
    tree: &'a dyn Tree,
    root: &'a MemPath,
    profile: Profile,
    limits: Limits,
    agent: &'a str,
    policy: Policy,
}

/// `Error: ` in `spec`, nothing in `python-sdk` (whose runner sends the bare `ToolError` text).
fn prefix(profile: Profile) -> &'static str {
    match profile {
        Profile::Spec => "Error: ",
        Profile::PythonSdk => "",
    }
}

impl Ctx<'_> {
    fn name(&self, raw: &str) -> Result<Named, Answer> {
        match MemPath::resolve(raw, self.root) {
            Ok(path) => Ok(Named {
                shown: match self.profile {
                    Profile::Spec => path.to_string(),
                    Profile::PythonSdk => raw.to_string(),
                },
                path,
            }),
            Err(why) => Err(reject(raw, self.root, why)),
        }
    }

    fn execute(&self, command: &Command) -> Result<Answer> {
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

    fn kind_of(&self, p: &MemPath) -> Result<Option<NodeKind>> {
        Ok(self.probe(p)?.kind)
    }

    /// [`Tree::probe`], with the configured root always a directory.
    fn probe(&self, p: &MemPath) -> Result<Probe> {
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
    fn unusable_root(&self) -> Result<Option<Answer>> {
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
    fn editable(&self, p: &Named, spec_missing: &str) -> Result<Result<String, Answer>> {
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

    fn view(&self, p: &Named, range: Option<(i64, i64)>) -> Result<Answer> {
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
        match self.kind_of(&p.path)? {
            Some(NodeKind::Dir) => Ok(Answer::ok(
                listing(self.tree, &p.path, &p.shown, self.profile, &|path, kind| {
                    self.visible(path, kind)
                })?,
                None,
            )),
            // Not a file (the read found none) and not a directory: nothing is there.
            _ => Ok(Answer::err(format!(
                "The path {} does not exist. Please provide a valid path.",
                p.shown
            ))),
        }
    }

    fn view_file(&self, shown: &str, content: &str, range: Option<(i64, i64)>) -> Answer {
        let lines: Vec<&str> = content.split('\n').collect();
        let n = lines.len();
        if n > MAX_VIEW_LINES {
            return Answer::err(format!(
                "File {shown} exceeds maximum line limit of 999,999 lines."
            ));
        }
        let (first, shown_lines) = match (self.profile, range) {
            (_, None) => (1, &lines[..]),
            (Profile::Spec, Some((start, end))) => match spec_range(n, start, end) {
                Some((from, to)) => (from, &lines[from - 1..to]),
                None => {
                    return Answer::err(format!(
                        "Error: Invalid view_range [{start}, {end}] for {shown}, which has {n} lines. Use [start_line, end_line] with 1 <= start_line <= end_line <= {n}, or end_line -1 to read to the end."
                    ));
                }
            },
            (Profile::PythonSdk, Some((start, end))) => {
                let (number_from, lo, hi) = python_slice(n, start, end);
                (number_from, &lines[lo..hi])
            }
        };
        let header = format!("Here's the content of {shown} with line numbers:\n");
        let text = match self.limits.view_max_chars {
            Some(cap) => capped(shown_lines, first, cap),
            None => numbered(shown_lines, first),
        };
        Answer::ok(header + &text, None)
    }

    fn create(&self, p: &Named, text: &str) -> Result<Answer> {
        let probe = self.probe(&p.path)?;
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

    fn str_replace(&self, p: &Named, old: &str, new: &str) -> Result<Answer> {
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
        let count = content.matches(old).count();
        if count == 0 {
            return Ok(Answer::err(format!(
                "No replacement was performed, old_str `{old}` did not appear verbatim in {shown}."
            )));
        }
        if count > 1 {
            let lines = match_lines(&content, old, self.profile);
            let list: Vec<String> = lines.iter().map(usize::to_string).collect();
            return Ok(Answer::err(format!(
                "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                list.join(", ")
            )));
        }
        let at = content.find(old).unwrap_or_default();
        let updated = format!("{}{new}{}", &content[..at], &content[at + old.len()..]);
        if let Some(err) = self.too_big(p, updated.len()) {
            return Ok(err);
        }
        let first_changed = content[..at].matches('\n').count() + 1;
        let lines: Vec<&str> = updated.split('\n').collect();
        let (heading, last_changed) = match self.profile {
            Profile::Spec => (
                "The memory file has been edited.",
                first_changed + new.matches('\n').count(),
            ),
            // The SDK shows two lines either side of the first changed line only.
            Profile::PythonSdk => (
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):",
                first_changed,
            ),
        };
        let from = first_changed.saturating_sub(2).max(1);
        let to = (last_changed + 2).min(lines.len());
        let snippet = numbered(&lines[from - 1..to], from);
        Ok(Answer::ok(
            format!("{heading}\n{snippet}"),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        ))
    }

    fn insert(&self, p: &Named, line: i64, text: &str) -> Result<Answer> {
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

    fn delete(&self, p: &Named) -> Result<Answer> {
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

    fn rename(&self, from: &Named, to: &Named) -> Result<Answer> {
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
fn spec_range(n: usize, start: i64, end: i64) -> Option<(usize, usize)> {
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
fn capped(lines: &[&str], first: usize, cap: u64) -> String {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut chars = 0;
    let mut shown = 0;
    let mut cut = false;
    for (i, line) in lines.iter().enumerate() {
        let text = format!("{:>6}\t{line}", first + i);
        let len = text.chars().count() + usize::from(i > 0);
        if chars + len > cap {
            if shown == 0 {
                // Not even one line fits: show the start of it rather than nothing.
                out.extend(text.chars().take(cap));
                shown = 1;
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
        let last = first + shown - 1;
        let total = first + lines.len() - 1;
        out.push_str(&format!(
            "\n[Output truncated at {cap} characters: showing lines {first}-{last} of {total}. Use view_range [{}, -1] to read the rest, or a narrower range.]",
            last + 1
        ));
    }
    out
}

/// The lines `str_replace` names for several matches: `spec` lists each line once, `python-sdk`
/// once per overlapping match, as the SDK's scan does.
///
/// Newlines are counted from the previous match on, so the scan is linear in the file size.
fn match_lines(content: &str, old: &str, profile: Profile) -> Vec<usize> {
    let mut lines: Vec<usize> = Vec::new();
    let mut from = 0;
    let mut counted_to = 0;
    let mut line = 1;
    while let Some(pos) = content[from..].find(old) {
        let at = from + pos;
        line += content[counted_to..at].matches('\n').count();
        counted_to = at;
        if profile == Profile::PythonSdk || lines.last() != Some(&line) {
            lines.push(line);
        }
        match content[at..].chars().next() {
            Some(c) => from = at + c.len_utf8(),
            None => break,
        }
    }
    lines
}

/// Lines in `content` for `insert`: a final `\n` does not start another line.
fn line_count(content: &str) -> usize {
    if content.is_empty() {
        0
    } else {
        content.matches('\n').count() + usize::from(!content.ends_with('\n'))
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
fn python_insert(content: &str, at_line: usize, text: &str) -> String {
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
