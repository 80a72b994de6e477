//! Text the model sees: sizes, numbered lines and directory listings.

use std::fmt::Write as _;

use crate::model::paths::MemPath;
use crate::model::tool::command::Profile;
use crate::model::tool::tree::{Entry, NodeKind, Tree};

/// The size column of a listing: bytes below 1 KiB (`999B`), else K/M/G with one decimal unless
/// the value is whole (`1K`, `1.0K` for 1025 bytes, `1024.0K` just under 1 MiB), capped at G.
pub fn format_size(bytes: u64) -> String {
    sized(bytes, |scale| {
        // NOTE: a u64 byte count converts to f64 exactly enough for one decimal place.
        #[expect(clippy::cast_precision_loss)]
        let value = bytes as f64 / scale as f64;
        format!("{value:.1}")
    })
}

/// The TypeScript SDK's size column: as [`format_size`], except that a value halfway between two
/// tenths rounds up (JavaScript's `toFixed`: 1,280 bytes is `1.3K`, where Python's rounding gives
/// `1.2K`).
pub fn format_size_js(bytes: u64) -> String {
    sized(bytes, |scale| {
        // Tenths, rounded half up: the quotient is exact in binary, so JavaScript rounds the same.
        let (value, scale) = (u128::from(bytes), u128::from(scale));
        let tenths = (value * 20 + scale) / (scale * 2);
        format!("{}.{}", tenths / 10, tenths % 10)
    })
}

/// `bytes` in the size column: `{bytes}B` below 1 KiB; else in the largest unit of K, M and G
/// it reaches, whole when it is, else as `fraction` writes it given the unit's size in bytes.
fn sized(bytes: u64, fraction: impl Fn(u64) -> String) -> String {
    const UNITS: [&str; 3] = ["K", "M", "G"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut unit = 0;
    let mut scale: u64 = 1024;
    while unit + 1 < UNITS.len() && bytes >= scale * 1024 {
        unit += 1;
        scale *= 1024;
    }
    if bytes % scale == 0 {
        format!("{}{}", bytes / scale, UNITS[unit])
    } else {
        format!("{}{}", fraction(scale), UNITS[unit])
    }
}

/// The longest piece of the model's input (a path, an `old_str`) an error result repeats whole.
pub const ECHO_MAX_BYTES: usize = 4096;

/// How much of a longer piece an error result repeats.
pub const ECHO_HEAD_BYTES: usize = 256;

/// `text` as an error result repeats it: whole up to [`ECHO_MAX_BYTES`], else its first
/// [`ECHO_HEAD_BYTES`] (cut back to a character boundary) and its length, so a failed call's
/// answer (and the digest it is logged as) stays small whatever the model sent.
pub fn echoed(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= ECHO_MAX_BYTES {
        return text.into();
    }
    let mut end = ECHO_HEAD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len()).into()
}

/// Lines `first..` of `lines`, each as `{n:>6}\t{line}`, joined by `\n`.
pub fn numbered(lines: &[&str], first: usize) -> String {
    // Six digits, a tab and a newline per line, so the text is built without regrowing.
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 8).sum());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // NOTE: writing to a String cannot fail.
        let _ = write!(out, "{:>6}\t{line}", first + i);
    }
    out
}

/// Whether a listing skips an entry (and its subtree): hidden names in every profile, and
/// `node_modules` in `spec` and `typescript-sdk` (the Python SDK lists it).
fn hidden(name: &str, profile: Profile) -> bool {
    name.starts_with('.') || (profile != Profile::PythonSdk && name == "node_modules")
}

/// The entries of a directory in the order a listing shows them: by code point (the tree's
/// order), or in `typescript-sdk` by UTF-16 code unit, as JavaScript's `sort()` orders names (a
/// name with a character past U+FFFF sorts before one with a character from U+E000 to U+FFFF).
fn in_listing_order(mut entries: Vec<Entry>, profile: Profile) -> Vec<Entry> {
    let astral = |e: &Entry| e.name.chars().any(|c| u32::from(c) > 0xFFFF);
    if profile == Profile::TypescriptSdk && entries.iter().any(astral) {
        entries.sort_by(|a, b| a.name.encode_utf16().cmp(b.name.encode_utf16()));
    }
    entries
}

/// The size shown for every directory.
pub const DIR_SIZE: &str = "4K";

/// Whether the calling agent may see an entry (its path and kind) in a listing.
pub type Visible<'a> = &'a dyn Fn(&MemPath, NodeKind) -> bool;

/// A directory listing, two levels deep; `shown` is how the directory is named in the text.
///
/// `visible` decides which entries the calling agent may see; `None` when it may see everything
/// under `dir` (a read grant covering `dir` covers every path below it), which spares a check
/// and a path per entry.
pub fn listing<E>(
    tree: &dyn Tree<Error = E>,
    dir: &MemPath,
    shown: &str,
    profile: Profile,
    visible: Option<Visible<'_>>,
) -> Result<String, E> {
    let excluding = match profile {
        Profile::Spec | Profile::TypescriptSdk => "hidden items and node_modules",
        Profile::PythonSdk => "hidden items",
    };
    let mut out = format!(
        "Here're the files and directories up to 2 levels deep in {shown}, excluding {excluding}:\n{DIR_SIZE}\t{shown}"
    );
    let shows = |parent: &MemPath, name: &str, kind: NodeKind| {
        !hidden(name, profile) && visible.is_none_or(|visible| visible(&parent.join(name), kind))
    };
    let entries = in_listing_order(tree.list(dir)?, profile);
    // When every entry shows, a subdirectory's lines are the same whoever lists it, and a tree
    // may keep them while the subdirectory is unchanged: taken first, so that the text is
    // allocated once at its full size.
    let mut kept = Vec::new();
    if visible.is_none() {
        for entry in &entries {
            if entry.kind == NodeKind::Dir && !hidden(&entry.name, profile) {
                let child = dir.join(&entry.name);
                let named = format!("{shown}/{}", entry.name);
                kept.push(tree.child_lines(&child, &named, profile)?);
            }
        }
        let lines: usize = entries
            .iter()
            .map(|e| shown.len() + e.name.len() + LINE_EXTRA)
            .sum();
        out.reserve(lines + kept.iter().map(|l| l.len()).sum::<usize>());
    }
    let mut kept = kept.into_iter();
    for entry in entries {
        if !shows(dir, &entry.name, entry.kind) {
            continue;
        }
        push_entry(&mut out, shown, "", &entry, profile);
        if entry.kind == NodeKind::Dir {
            if let Some(lines) = kept.next() {
                out.push_str(&lines);
                continue;
            }
            let child = dir.join(&entry.name);
            for grandchild in in_listing_order(tree.list(&child)?, profile) {
                if shows(&child, &grandchild.name, grandchild.kind) {
                    push_entry(&mut out, shown, &entry.name, &grandchild, profile);
                }
            }
        }
    }
    Ok(out)
}

/// What a listing line holds beyond its directory's name and the entry's: a newline, the size
/// (at most 7 characters, `1023.9K`), a tab, slashes, with room to spare.
const LINE_EXTRA: usize = 16;

/// The lines a listing shows for `entries`, the children of a directory named `shown` in the
/// text, when every entry is visible: hidden names skipped, each line starting with a newline.
pub(crate) fn child_lines(entries: &[Entry], shown: &str, profile: Profile) -> String {
    let lines: usize = entries.iter().map(|e| e.name.len() + LINE_EXTRA).sum();
    let mut out = String::with_capacity(lines + entries.len() * shown.len());
    let reordered;
    let entries = if profile == Profile::TypescriptSdk {
        reordered = in_listing_order(entries.to_vec(), profile);
        &reordered[..]
    } else {
        entries
    };
    for entry in entries.iter().filter(|e| !hidden(&e.name, profile)) {
        push_entry(&mut out, shown, "", entry, profile);
    }
    out
}

/// Appends the line of entry `name` (under `parent/` when `parent` is not empty) of the listing
/// of `dir`, written in place: a large listing makes one string, not several per line.
fn push_entry(out: &mut String, dir: &str, parent: &str, entry: &Entry, profile: Profile) {
    let (name, kind, size) = (&entry.name, entry.kind, entry.size);
    out.push('\n');
    match kind {
        NodeKind::Dir => out.push_str(DIR_SIZE),
        NodeKind::File if size < 1024 => {
            // NOTE: writing to a String cannot fail.
            let _ = write!(out, "{size}B");
        }
        NodeKind::File if profile == Profile::TypescriptSdk => {
            out.push_str(&format_size_js(size));
        }
        NodeKind::File => out.push_str(&format_size(size)),
    }
    out.push('\t');
    out.push_str(dir);
    out.push('/');
    if !parent.is_empty() {
        out.push_str(parent);
        out.push('/');
    }
    out.push_str(name);
    if kind == NodeKind::Dir {
        out.push('/');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_reference_table() {
        for (bytes, want) in [
            (0, "0B"),
            (1023, "1023B"),
            (1024, "1K"),
            (1025, "1.0K"),
            (1280, "1.2K"),
            (1536, "1.5K"),
            (2047, "2.0K"),
            (2304, "2.2K"),
            (3328, "3.2K"),
            (4096, "4K"),
            (5000, "4.9K"),
            (10291, "10.0K"),
            (1_048_575, "1024.0K"),
            (1_048_576, "1M"),
            (1_048_577, "1.0M"),
            (1_073_741_824, "1G"),
            (1_099_511_627_776, "1024G"),
        ] {
            assert_eq!(format_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn javascript_sizes_round_halves_up() {
        // What `@anthropic-ai/sdk` 1.16.0's formatFileSize prints for these byte counts.
        for (bytes, want) in [
            (0, "0B"),
            (1023, "1023B"),
            (1024, "1K"),
            (1025, "1.0K"),
            (1280, "1.3K"),
            (1536, "1.5K"),
            (2047, "2.0K"),
            (2304, "2.3K"),
            (3328, "3.3K"),
            (5000, "4.9K"),
            (10291, "10.0K"),
            (1_048_575, "1024.0K"),
            (1_048_576, "1M"),
            (1_310_720, "1.3M"),
            (1_073_741_824, "1G"),
        ] {
            assert_eq!(format_size_js(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn numbering_is_six_wide_and_tab_separated() {
        assert_eq!(numbered(&["a", "b"], 9), "     9\ta\n    10\tb");
    }
}
