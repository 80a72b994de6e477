//! The six commands' semantics: a pure function from (tree, call) to (result text, change).
//!
//! Nothing here does I/O beyond reading the [`Tree`] it is given. The live write path, the verifier
//! and `ls --at` all call [`answer`], so a replay re-derives exactly the text the model was given.

use crate::error::Result;
use crate::event::Body;
use crate::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemPath, PathRejection};
use crate::tool::command::{Command, parse_text};
use crate::tool::render::{listing, numbered};
use crate::tool::tree::{Change, NodeKind, Tree};

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

/// Answers an event body against `tree`: runs a parsed command, or re-parses a rejected input.
pub fn answer(tree: &dyn Tree, body: &Body) -> Result<Answer> {
    match body {
        Body::Tool(call) => {
            let root = match MemPath::root(&call.root) {
                Ok(root) => root,
                Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
            };
            execute(tree, &root, &call.command)
        }
        Body::Rejected(r) => Ok(match parse_text(&r.input, &r.root, r.profile).command {
            Err(text) => Answer::err(text),
            // A rejected input that parses now was not rejected by this parser: replay flags it.
            Ok(_) => Answer::err(String::new()),
        }),
    }
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

/// Runs one parsed command under `root`.
pub fn execute(tree: &dyn Tree, root: &MemPath, command: &Command) -> Result<Answer> {
    macro_rules! resolve {
        ($raw:expr) => {
            match MemPath::resolve($raw, root) {
                Ok(p) => p,
                Err(why) => return Ok(reject($raw, root, why)),
            }
        };
    }
    match command {
        Command::View { path, view_range } => {
            let p = resolve!(path);
            view(tree, root, &p, *view_range)
        }
        Command::Create { path, file_text } => {
            let p = resolve!(path);
            create(tree, root, &p, file_text)
        }
        Command::StrReplace {
            path,
            old_str,
            new_str,
        } => {
            let p = resolve!(path);
            str_replace(tree, &p, old_str, new_str.as_deref().unwrap_or(""))
        }
        Command::Insert {
            path,
            insert_line,
            insert_text,
        } => {
            let p = resolve!(path);
            insert(tree, &p, *insert_line, insert_text)
        }
        Command::Delete { path } => {
            let p = resolve!(path);
            delete(tree, root, &p)
        }
        Command::Rename { old_path, new_path } => {
            let from = resolve!(old_path);
            let to = resolve!(new_path);
            rename(tree, root, &from, &to)
        }
    }
}

fn kind_of(tree: &dyn Tree, root: &MemPath, p: &MemPath) -> Result<Option<NodeKind>> {
    if p == root {
        return Ok(Some(NodeKind::Dir));
    }
    tree.kind(p)
}

/// The nearest ancestor of `p` (below `root`) that is a file, if any.
fn file_ancestor(tree: &dyn Tree, root: &MemPath, p: &MemPath) -> Result<Option<MemPath>> {
    let mut ancestor = root.clone();
    for seg in &p.segments()[root.segments().len()..p.segments().len().saturating_sub(1)] {
        ancestor = ancestor.join(seg);
        if tree.kind(&ancestor)? == Some(NodeKind::File) {
            return Ok(Some(ancestor));
        }
    }
    Ok(None)
}

fn view(tree: &dyn Tree, root: &MemPath, p: &MemPath, range: Option<(i64, i64)>) -> Result<Answer> {
    match kind_of(tree, root, p)? {
        Some(NodeKind::Dir) => Ok(Answer::ok(listing(tree, p)?, None)),
        Some(NodeKind::File) => {
            let content = tree.read(p)?.unwrap_or_default();
            Ok(view_file(p, &content, range))
        }
        None => Ok(Answer::err(format!(
            "The path {p} does not exist. Please provide a valid path."
        ))),
    }
}

fn view_file(p: &MemPath, content: &str, range: Option<(i64, i64)>) -> Answer {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() > MAX_VIEW_LINES {
        return Answer::err(format!(
            "File {p} exceeds maximum line limit of 999,999 lines."
        ));
    }
    let n = lines.len();
    let (first, last) = match range {
        None => (1, n),
        Some((start, end)) => {
            let start_at = usize::try_from(start.max(1)).unwrap_or(usize::MAX);
            let end_at = if end == -1 {
                Some(n)
            } else {
                usize::try_from(end).ok().map(|e| e.min(n))
            };
            match end_at {
                Some(end_at) if start_at <= n && start_at <= end_at => (start_at, end_at),
                _ => {
                    return Answer::err(format!(
                        "Error: Invalid view_range [{start}, {end}] for {p}, which has {n} lines. Use [start_line, end_line] with 1 <= start_line <= end_line <= {n}, or end_line -1 to read to the end."
                    ));
                }
            }
        }
    };
    Answer::ok(
        format!(
            "Here's the content of {p} with line numbers:\n{}",
            numbered(lines[first - 1..last].iter().copied(), first)
        ),
        None,
    )
}

fn create(tree: &dyn Tree, root: &MemPath, p: &MemPath, text: &str) -> Result<Answer> {
    if kind_of(tree, root, p)?.is_some() {
        return Ok(Answer::err(format!("Error: File {p} already exists")));
    }
    if let Some(file) = file_ancestor(tree, root, p)? {
        return Ok(Answer::err(format!(
            "Error: Cannot create {p}: {file} is a file, not a directory. Choose a path whose parent directories are not files."
        )));
    }
    Ok(Answer::ok(
        format!("File created successfully at: {p}"),
        Some(Change::Write {
            path: p.clone(),
            content: text.to_string(),
        }),
    ))
}

fn str_replace(tree: &dyn Tree, p: &MemPath, old: &str, new: &str) -> Result<Answer> {
    let Some(content) = tree.read(p)? else {
        return Ok(Answer::err(format!(
            "Error: The path {p} does not exist. Please provide a valid path."
        )));
    };
    if old.is_empty() {
        return Ok(Answer::err(format!(
            "Error: old_str must not be empty. Copy the exact text to replace from a view of {p}; to add text use insert."
        )));
    }
    let count = content.matches(old).count();
    if count == 0 {
        return Ok(Answer::err(format!(
            "No replacement was performed, old_str `{old}` did not appear verbatim in {p}."
        )));
    }
    if count > 1 {
        let mut lines: Vec<usize> = Vec::new();
        let mut from = 0;
        while let Some(pos) = content[from..].find(old) {
            let at = from + pos;
            let line = content[..at].matches('\n').count() + 1;
            if lines.last() != Some(&line) {
                lines.push(line);
            }
            from = at + content[at..].chars().next().map_or(1, char::len_utf8);
        }
        let list: Vec<String> = lines.iter().map(usize::to_string).collect();
        return Ok(Answer::err(format!(
            "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
            list.join(", ")
        )));
    }
    let at = content.find(old).unwrap_or_default();
    let updated = format!("{}{new}{}", &content[..at], &content[at + old.len()..]);
    let first_changed = content[..at].matches('\n').count() + 1;
    let last_changed = first_changed + new.matches('\n').count();
    let lines: Vec<&str> = updated.split('\n').collect();
    let from = first_changed.saturating_sub(2).max(1);
    let to = (last_changed + 2).min(lines.len());
    let snippet = numbered(lines[from - 1..to].iter().copied(), from);
    Ok(Answer::ok(
        format!("The memory file has been edited.\n{snippet}"),
        Some(Change::Write {
            path: p.clone(),
            content: updated,
        }),
    ))
}

/// Lines in `content` for `insert`: a final `\n` does not start another line.
fn line_count(content: &str) -> usize {
    if content.is_empty() {
        0
    } else {
        content.matches('\n').count() + usize::from(!content.ends_with('\n'))
    }
}

fn insert(tree: &dyn Tree, p: &MemPath, line: i64, text: &str) -> Result<Answer> {
    let Some(content) = tree.read(p)? else {
        return Ok(Answer::err(format!("Error: The path {p} does not exist")));
    };
    let n = line_count(&content);
    let at_line = match usize::try_from(line) {
        Ok(l) if l <= n => l,
        _ => {
            return Ok(Answer::err(format!(
                "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
            )));
        }
    };
    // Byte offset where line `at_line + 1` starts (the end of the content when inserting last).
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
    Ok(Answer::ok(
        format!("The file {p} has been edited."),
        Some(Change::Write {
            path: p.clone(),
            content: updated,
        }),
    ))
}

fn delete(tree: &dyn Tree, root: &MemPath, p: &MemPath) -> Result<Answer> {
    if p == root {
        return Ok(Answer::err(format!(
            "Cannot delete the {root} directory itself"
        )));
    }
    if tree.kind(p)?.is_none() {
        return Ok(Answer::err(format!("Error: The path {p} does not exist")));
    }
    Ok(Answer::ok(
        format!("Successfully deleted {p}"),
        Some(Change::Delete { path: p.clone() }),
    ))
}

fn rename(tree: &dyn Tree, root: &MemPath, from: &MemPath, to: &MemPath) -> Result<Answer> {
    if from == root {
        return Ok(Answer::err(format!(
            "Cannot rename the {root} directory itself"
        )));
    }
    if kind_of(tree, root, to)?.is_some() {
        return Ok(Answer::err(format!(
            "Error: The destination {to} already exists"
        )));
    }
    if tree.kind(from)?.is_none() {
        return Ok(Answer::err(format!(
            "Error: The path {from} does not exist"
        )));
    }
    if to.starts_with(from) {
        return Ok(Answer::err(format!(
            "Error: Cannot rename {from} to {to}: a directory cannot be moved inside itself"
        )));
    }
    if let Some(file) = file_ancestor(tree, root, to)? {
        return Ok(Answer::err(format!(
            "Error: Cannot rename {from} to {to}: {file} is a file, not a directory"
        )));
    }
    Ok(Answer::ok(
        format!("Successfully renamed {from} to {to}"),
        Some(Change::Rename {
            from: from.clone(),
            to: to.clone(),
        }),
    ))
}
