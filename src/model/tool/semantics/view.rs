//! `view`: a file's numbered lines (a `view_range` of them, capped at the call's limit with a note
//! that pages on) or a directory's listing, as each profile gives them.

use std::fmt::Write as _;

use super::{Answer, Ctx, MAX_VIEW_LINES, Named, Provenance, newlines};
use crate::model::paths::MemPath;
use crate::model::policy::Access;
use crate::model::tool::command::Profile;
use crate::model::tool::render::{listing, numbered};
use crate::model::tool::tree::NodeKind;

impl<E> Ctx<'_, E> {
    /// `view` of the file or directory `p`, lines `range` of a file.
    pub(super) fn view(&self, p: &Named, range: Option<(i64, i64)>) -> Result<Answer, E> {
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
            return Ok(self.view_file(p, &content, range));
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

    fn view_file(&self, p: &Named, content: &str, range: Option<(i64, i64)>) -> Answer {
        let shown = p.shown.as_str();
        // Lines are counted before any is collected, and only the lines shown are: a file of
        // newlines costs one scan, not a table of millions of lines.
        let n = newlines(content) + 1;
        if n > MAX_VIEW_LINES {
            return Answer::err(match self.profile {
                Profile::TypescriptSdk => {
                    format!("File {shown} has too many lines ({n}). Maximum is 999,999 lines.")
                }
                Profile::Spec | Profile::PythonSdk => {
                    format!("File {shown} exceeds maximum line limit of 999,999 lines.")
                }
            });
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
            // JavaScript's `lines.slice(max(1, start) - 1, end)` follows Python's slice rules.
            (Profile::PythonSdk | Profile::TypescriptSdk, Some((start, end))) => {
                python_slice(n, start, end)
            }
        };
        let shown_lines: Vec<&str> = content.split('\n').skip(lo).take(hi - lo).collect();
        let header = format!("Here's the content of {shown} with line numbers:\n");
        let all = Provenance::lines_of(content, &shown_lines);
        let (text, quoted) = match self.limits.view_max_chars {
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
            None => (numbered(&shown_lines, first), all.len()),
        };
        Answer::ok(header + &text, None).with_provenance(Provenance {
            path: p.path.clone(),
            quoted: all.start..all.start + quoted,
            kept: Vec::new(),
        })
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
/// without it the note is semantics 2's. Returns the text and how many bytes of `lines` (joined
/// by newlines, from the first one's start) it shows.
fn capped(lines: &[&str], first: usize, cap: u64, page: Option<Page>) -> (String, usize) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = String::new();
    // Characters written so far; never more than `cap`.
    let mut chars = 0;
    let mut shown = 0;
    let mut cut = false;
    // The length in bytes of a first line that did not fit, of which only the start is shown.
    let mut partial = None;
    // The bytes of `lines` shown, newlines between them included.
    let mut quoted = 0;
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
                quoted = line
                    .char_indices()
                    .nth(cap.saturating_sub(number.len()))
                    .map_or(line.len(), |(at, _)| at);
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
        quoted += line.len() + usize::from(i > 0);
        shown += 1;
    }
    if cut {
        let note = match page {
            Some(page) => page.note(cap, first, first + shown - 1, partial),
            None => truncation_note(cap, first, shown, lines.len(), partial.is_some()),
        };
        out.push_str(&note);
    }
    (out, quoted)
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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

    #[test]
    fn a_cap_counts_a_huge_line_only_as_far_as_it_fits() {
        let line = "é".repeat(100_000);
        let (out, quoted) = capped(&[&line, "b"], 1, 20, None);
        assert_eq!(quoted, "é".len() * 13);
        assert_eq!(out, formatted_capped(&[&line, "b"], 1, 20, None));
        let shown = format!(
            "     1\t{}\n[Output truncated at 20 characters",
            "é".repeat(13)
        );
        assert!(out.starts_with(&shown), "{out}");
    }

    proptest! {
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
                capped(&lines, first, cap, page).0,
                formatted_capped(&lines, first, cap, page)
            );
        }
    }
}
