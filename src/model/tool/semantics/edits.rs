//! The edits: `create`, `str_replace`, `insert`, `delete` and `rename`, each answered with its
//! text and the change to apply, as each profile words them; and the pure text work they do
//! (the lines a `str_replace` names for several matches, an insert's new content).

use std::fmt::Write as _;

use super::{Answer, Ctx, Named, Provenance, newlines, prefix};
use crate::model::tool::command::Profile;
use crate::model::tool::matcher::Occurrences;
use crate::model::tool::render::{echoed, numbered};
use crate::model::tool::tree::Change;

impl<E> Ctx<'_, E> {
    /// `create`: a new file `p` holding `text` (refused where anything is already there).
    pub(super) fn create(&self, p: &Named, text: &str) -> Result<Answer, E> {
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
            if self.hidden(&file) {
                return Ok(Answer::err(format!(
                    "Error: Cannot create {}: a file this agent may not read is in the way (a directory above it is a file). Choose another path.",
                    p.shown
                )));
            }
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

    /// `str_replace`: replaces the one occurrence of `old` in file `p` with `new`.
    pub(super) fn str_replace(&self, p: &Named, old: &str, new: &str) -> Result<Answer, E> {
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
        if self.profile == Profile::TypescriptSdk && !old.contains('\n') {
            return Ok(self.str_replace_by_lines(p, &content, old, new));
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
        let (heading, last_changed) = match self.profile {
            Profile::Spec => (
                "The memory file has been edited.",
                first_changed + newlines(new),
            ),
            // The SDKs show two lines either side of the first changed line only.
            Profile::PythonSdk | Profile::TypescriptSdk => (
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):",
                first_changed,
            ),
        };
        let (snippet, quoted) = snippet(&updated, first_changed, last_changed);
        let provenance = replaced(p, &content, at, old.len(), new.len(), quoted);
        Ok(Answer::ok(
            format!("{heading}\n{snippet}"),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        )
        .with_provenance(provenance))
    }

    /// `insert`: puts `text` after line `line` of file `p` (0: at the start).
    pub(super) fn insert(&self, p: &Named, line: i64, text: &str) -> Result<Answer, E> {
        let content = match self.editable(p, "")? {
            Ok(content) => content,
            Err(answer) => return Ok(answer),
        };
        // The TypeScript SDK counts the pieces `split('\n')` gives: a final `\n` starts a line.
        let n = match self.profile {
            Profile::TypescriptSdk => newlines(&content) + 1,
            Profile::Spec | Profile::PythonSdk => line_count(&content),
        };
        let at_line = match usize::try_from(line) {
            Ok(l) if l <= n => l,
            _ => {
                return Ok(Answer::err(match self.profile {
                    Profile::Spec | Profile::TypescriptSdk => format!(
                        "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
                    ),
                    Profile::PythonSdk => format!(
                        "Invalid `insert_line` parameter: {line}. It should be within the range [0, {n}]."
                    ),
                }));
            }
        };
        let (updated, kept) = match self.profile {
            Profile::Spec => spec_insert(&content, at_line, text),
            Profile::PythonSdk => python_insert(&content, at_line, text),
            Profile::TypescriptSdk => typescript_insert(&content, at_line, text),
        };
        if let Some(err) = self.too_big(p, updated.len()) {
            return Ok(err);
        }
        let provenance = Provenance {
            path: p.path.clone(),
            quoted: 0..0,
            kept: kept
                .into_iter()
                .filter(|(from, _)| !from.is_empty())
                .collect(),
        };
        Ok(Answer::ok(
            format!("The file {} has been edited.", p.shown),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        )
        .with_provenance(provenance))
    }

    /// `delete`: removes the file or directory `p`.
    pub(super) fn delete(&self, p: &Named) -> Result<Answer, E> {
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

    /// `rename`: moves the file or directory `from` to `to`.
    pub(super) fn rename(&self, from: &Named, to: &Named) -> Result<Answer, E> {
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
            if self.hidden(&file) {
                return Ok(Answer::err(format!(
                    "Error: Cannot rename {old} to {new}: a file this agent may not read is in the way (a directory above {new} is a file)"
                )));
            }
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

impl<E> Ctx<'_, E> {
    /// The TypeScript SDK's `str_replace` of an `old` without a newline: the lines that contain
    /// `old` are counted (two matches on one line are one), and when one line does, the first
    /// occurrence in the file is replaced; the snippet shows two lines either side of that line.
    fn str_replace_by_lines(&self, p: &Named, content: &str, old: &str, new: &str) -> Answer {
        let shown = &p.shown;
        // The lines holding `old`, each once: [`match_lines`] in the `spec` way.
        let lines = match_lines(content, old, Profile::Spec);
        if lines.is_empty() {
            return Answer::err(format!(
                "No replacement was performed, old_str `{}` did not appear verbatim in {shown}.",
                echoed(old)
            ));
        }
        if lines.contains(',') {
            return Answer::err(format!(
                "No replacement was performed. Multiple occurrences of old_str `{}` in lines: {lines}. Please ensure it is unique",
                echoed(old)
            ));
        }
        // One line holds `old` (an empty `old` is on every line, so the file is one line).
        let at = content.find(old).unwrap_or_default();
        let len = content.len() - old.len() + new.len();
        if let Some(err) = self.too_big(p, len) {
            return err;
        }
        let mut updated = String::with_capacity(len);
        updated.push_str(&content[..at]);
        updated.push_str(new);
        updated.push_str(&content[at + old.len()..]);
        let changed = newlines(&content[..at]) + 1;
        let (snippet, quoted) = snippet(&updated, changed, changed);
        let provenance = replaced(p, content, at, old.len(), new.len(), quoted);
        Answer::ok(
            format!(
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{snippet}"
            ),
            Some(Change::Write {
                path: p.path.clone(),
                content: updated,
            }),
        )
        .with_provenance(provenance)
    }
}

/// What a `str_replace` of the `old` bytes at `at` in `content` by `new` bytes did with the
/// file's bytes: it keeps what is before and after them, and its snippet quotes `quoted`.
fn replaced(
    p: &Named,
    content: &str,
    at: usize,
    old: usize,
    new: usize,
    quoted: std::ops::Range<usize>,
) -> Provenance {
    let kept = [(0..at, 0), (at + old..content.len(), at + new)]
        .into_iter()
        .filter(|(from, _)| !from.is_empty())
        .collect();
    Provenance {
        path: p.path.clone(),
        quoted,
        kept,
    }
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

/// Lines in `content` for `insert`: a final `\n` does not start another line.
fn line_count(content: &str) -> usize {
    if content.is_empty() {
        0
    } else {
        newlines(content) + usize::from(!content.ends_with('\n'))
    }
}

/// The pieces of an insert's old content its new content keeps, as (range before, start after).
type KeptPieces = Vec<(std::ops::Range<usize>, usize)>;

/// `spec`'s insert: `text` as whole line(s) after line `at_line`; only a `\n` needed to keep it on
/// its own lines is added, every other byte is kept. Returns the new content and what of the old
/// it keeps.
fn spec_insert(content: &str, at_line: usize, text: &str) -> (String, KeptPieces) {
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
    let kept = vec![(0..offset, 0), (offset..content.len(), updated.len())];
    updated.push_str(after);
    (updated, kept)
}

/// The Python SDK's insert: split on `\n` (dropping the empty tail of a final newline), insert
/// `text` without its trailing newlines, join, and end with a newline.
///
/// Built by slicing at the start of line `at_line` rather than through a table of every line.
/// Returns the new content and what of the old it keeps (a final newline of the old content is
/// not kept: the one the new content ends with is added).
fn python_insert(content: &str, at_line: usize, text: &str) -> (String, KeptPieces) {
    let text = text.trim_end_matches('\n');
    let mut updated = String::with_capacity(content.len() + text.len() + 2);
    let mut kept = Vec::new();
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
                kept = vec![(0..start, 0), (start..body.len(), updated.len())];
                updated.push_str(&body[start..]);
            }
            // After the last line.
            None => {
                updated.push_str(body);
                updated.push('\n');
                updated.push_str(text);
                kept = vec![(0..body.len(), 0)];
            }
        }
    }
    if !updated.ends_with('\n') {
        updated.push('\n');
    }
    (updated, kept)
}

/// The numbered lines of `updated` from two before line `first_changed` to two after line
/// `last_changed`, clipped to the file.
/// Also returns the bytes of `updated` those lines cover.
fn snippet(
    updated: &str,
    first_changed: usize,
    last_changed: usize,
) -> (String, std::ops::Range<usize>) {
    // `first_changed` is a line of `updated`, so `from <= to`; only the window is collected.
    let from = first_changed.saturating_sub(2).max(1);
    let to = (last_changed + 2).min(newlines(updated) + 1);
    let window: Vec<&str> = updated
        .split('\n')
        .skip(from - 1)
        .take(to + 1 - from)
        .collect();
    (
        numbered(&window, from),
        Provenance::lines_of(updated, &window),
    )
}

/// The TypeScript SDK's insert: the content split on `\n` (a final `\n` leaves an empty last
/// line), `text` without one trailing `\n` put in as line `at_line + 1`, joined with `\n`.
///
/// Built by slicing at the end of line `at_line` rather than through a table of every line.
/// Returns the new content and what of the old it keeps.
fn typescript_insert(content: &str, at_line: usize, text: &str) -> (String, KeptPieces) {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let mut updated = String::with_capacity(content.len() + text.len() + 1);
    if at_line == 0 {
        updated.push_str(text);
        updated.push('\n');
        let kept = vec![(0..content.len(), updated.len())];
        updated.push_str(content);
        return (updated, kept);
    }
    // The `\n` that ends line `at_line`; none after the last line.
    let kept = match content.match_indices('\n').nth(at_line - 1) {
        Some((end, _)) => {
            updated.push_str(&content[..end]);
            updated.push('\n');
            updated.push_str(text);
            let kept = vec![(0..end, 0), (end..content.len(), updated.len())];
            updated.push_str(&content[end..]);
            kept
        }
        None => {
            updated.push_str(content);
            updated.push('\n');
            updated.push_str(text);
            vec![(0..content.len(), 0)]
        }
    };
    (updated, kept)
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
        fn python_insert_agrees_with_the_list_of_lines_and_every_insert_keeps_what_it_says(
            content in "[a\n\r]{0,12}",
            line in 0usize..8,
            text in "[b\n]{0,4}",
        ) {
            let line = line.min(line_count(&content));
            let (updated, _) = python_insert(&content, line, &text);
            prop_assert_eq!(&updated, &listed_python_insert(&content, line, &text));
            for insert in [spec_insert, python_insert, typescript_insert] {
                let (updated, kept) = insert(&content, line, &text);
                // Each piece kept is where it says, byte for byte, in order; every other byte
                // is the inserted text's or a newline it needed: no `a` or `\r` of the old content.
                let mut own = vec![true; updated.len()];
                let mut last = 0;
                for (from, to) in kept {
                    prop_assert!(to >= last);
                    prop_assert_eq!(&updated[to..to + from.len()], &content[from.clone()]);
                    own[to..to + from.len()].iter_mut().for_each(|o| *o = false);
                    last = to + from.len();
                }
                let mine: String = updated
                    .bytes()
                    .zip(own)
                    .filter(|(_, own)| *own)
                    .map(|(b, _)| char::from(b))
                    .collect();
                prop_assert!(!mine.contains(['a', '\r']), "{:?}", mine);
            }
        }
    }
}
