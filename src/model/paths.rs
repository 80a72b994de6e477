//! Memory paths: validation against the root, traversal rejection and normalisation.
//!
//! **Invariant:** no path that leaves the root ever reaches the tree. Validation runs on the raw text
//! the model sent, *before* normalisation, in this order:
//!
//! 1. the path is the root or starts with the root followed by `/` (so `/memoriesfoo` is outside);
//! 2. no traversal: no `..` segment (split on `/` and `\`), no `..\`, no percent-encoded dot pair,
//!    slash or backslash (`%2e%2e`, `%2f`, `%5c`, any case), and none of those after repeated
//!    percent-decoding (double encoding such as `%252e%252e`);
//! 3. no control characters (NUL included), no invisible characters ([`is_invisible`]: bidi
//!    controls and zero-width or other default-ignorable characters, which can make a listing
//!    show one name as another), no segment over [`MAX_SEGMENT_BYTES`], and at most
//!    [`MAX_PATH_BYTES`] in all.
//!
//! Normalisation then drops empty segments (`//`, a trailing `/`) and `.` segments. The canonical
//! path is the root followed by the remaining segments.

use std::fmt;

use crate::model::semantics_version::Semantics;
pub(crate) use crate::model::semantics_version::is_invisible;

/// Longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Longest single path segment accepted, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// A validated, canonical absolute path: `/` followed by non-empty segments joined by `/`.
///
/// Held as its canonical text, so naming, comparing and showing a path costs no more than the
/// string; paths order segment by segment (`/a/b` before `/a-b`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemPath {
    text: String,
}

/// Why a raw path was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathRejection {
    /// The path is not the root and does not start with the root followed by `/`.
    Outside,
    /// The path contains a traversal sequence.
    Escape,
    /// The path contains a control character (shown escaped).
    ControlCharacter(char),
    /// The path contains an invisible character (a bidi control, a zero-width or another
    /// default-ignorable character: the set `is_invisible` holds), shown as its code point.
    InvisibleCharacter(char),
    /// The path or one of its segments is too long.
    TooLong {
        /// Length of the offending path or segment, in bytes.
        len: usize,
        /// The limit it broke.
        max: usize,
    },
}

impl MemPath {
    /// Parses a configured root such as `/memories`. Roots are trusted configuration but are still
    /// checked: absolute, no traversal, no control characters, not `/` itself.
    pub fn root(raw: &str) -> Result<MemPath, String> {
        MemPath::root_under(raw, Semantics::CURRENT)
    }

    /// [`MemPath::root`], with the error text of `semantics` (an answer's).
    pub fn root_under(raw: &str, semantics: Semantics) -> Result<MemPath, String> {
        let path = MemPath::absolute_under(raw, semantics)?;
        if path.is_top() {
            return Err(
                "the memory root cannot be / itself; use a directory such as /memories".into(),
            );
        }
        Ok(path)
    }

    /// Parses an absolute path given by an operator (a grant's prefix, a CLI argument): checked
    /// like a root, but `/` itself is allowed.
    pub fn absolute(raw: &str) -> Result<MemPath, String> {
        MemPath::absolute_under(raw, Semantics::CURRENT)
    }

    /// [`MemPath::absolute`], with the error text of `semantics` (an answer's).
    pub fn absolute_under(raw: &str, semantics: Semantics) -> Result<MemPath, String> {
        if !raw.starts_with('/') {
            return Err(format!(
                "the path must be absolute, such as /memories, got {}",
                semantics.quote(raw)
            ));
        }
        if has_traversal(raw) || raw.chars().any(|c| c.is_control() || is_invisible(c)) {
            return Err(format!(
                "the path {} contains a traversal sequence, a control character or an invisible (bidi or zero-width) character",
                semantics.quote(raw)
            ));
        }
        Ok(MemPath::normal(raw))
    }

    /// Validates `raw` against `root` and returns its canonical form.
    pub fn resolve(raw: &str, root: &MemPath) -> Result<MemPath, PathRejection> {
        let inside = match root.strip_from(raw) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        };
        if !inside {
            return Err(PathRejection::Outside);
        }
        if has_traversal(raw) {
            return Err(PathRejection::Escape);
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(PathRejection::ControlCharacter(c));
        }
        if let Some(c) = raw.chars().find(|c| is_invisible(*c)) {
            return Err(PathRejection::InvisibleCharacter(c));
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathRejection::TooLong {
                len: raw.len(),
                max: MAX_PATH_BYTES,
            });
        }
        let path = MemPath::normal(raw);
        if let Some(long) = path.segments().find(|s| s.len() > MAX_SEGMENT_BYTES) {
            return Err(PathRejection::TooLong {
                len: long.len(),
                max: MAX_SEGMENT_BYTES,
            });
        }
        Ok(path)
    }

    /// What follows this path's text at the start of `raw`, or `None` if `raw` does not start
    /// with it.
    fn strip_from<'r>(&self, raw: &'r str) -> Option<&'r str> {
        raw.strip_prefix(if self.is_top() { "/" } else { &self.text })
    }

    /// Canonicalises text already known to be valid: drops empty and `.` segments.
    fn normal(raw: &str) -> MemPath {
        let mut text = String::with_capacity(raw.len());
        for segment in raw.split('/').filter(|s| !s.is_empty() && *s != ".") {
            text.push('/');
            text.push_str(segment);
        }
        if text.is_empty() {
            text.push('/');
        }
        MemPath { text }
    }

    /// The directory `/`.
    pub(crate) fn top() -> MemPath {
        MemPath { text: "/".into() }
    }

    fn is_top(&self) -> bool {
        self.text.len() == 1
    }

    /// The canonical text, such as `/memories/notes.txt`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The segments, from the top.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + Clone {
        self.text[1..].split('/').filter(|s| !s.is_empty())
    }

    /// How many segments the path has (0 for `/`).
    pub fn depth(&self) -> usize {
        if self.is_top() {
            0
        } else {
            self.text.bytes().filter(|b| *b == b'/').count()
        }
    }

    /// The path of this one's first `depth` segments (all of it if it has fewer).
    pub fn ancestor(&self, depth: usize) -> MemPath {
        if depth == 0 {
            return MemPath::top();
        }
        let end = self
            .text
            .match_indices('/')
            .nth(depth)
            .map_or(self.text.len(), |(at, _)| at);
        MemPath {
            text: self.text[..end].to_string(),
        }
    }

    /// The last segment (empty for `/`).
    pub fn name(&self) -> &str {
        self.text.rsplit('/').next().unwrap_or_default()
    }

    /// The parent directory, or `None` for `/`.
    pub fn parent(&self) -> Option<MemPath> {
        if self.is_top() {
            return None;
        }
        let at = self.text.rfind('/').unwrap_or_default();
        Some(MemPath {
            text: if at == 0 {
                "/".into()
            } else {
                self.text[..at].to_string()
            },
        })
    }

    /// This path with `name` appended.
    pub fn join(&self, name: &str) -> MemPath {
        let mut text = String::with_capacity(self.text.len() + 1 + name.len());
        if !self.is_top() {
            text.push_str(&self.text);
        }
        text.push('/');
        text.push_str(name);
        MemPath { text }
    }

    /// This path with its leading `from` (which it must start with) replaced by `to`.
    pub fn moved(&self, from: &MemPath, to: &MemPath) -> MemPath {
        let rest = if from.is_top() {
            &self.text
        } else {
            self.text.get(from.text.len()..).unwrap_or_default()
        };
        let mut moved = to.clone();
        for segment in rest.split('/').filter(|s| !s.is_empty()) {
            moved = moved.join(segment);
        }
        moved
    }

    /// Whether `self` is `other` or lies under it.
    pub fn starts_with(&self, other: &MemPath) -> bool {
        other.is_top()
            || self
                .text
                .strip_prefix(&other.text)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

impl Ord for MemPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.segments().cmp(other.segments())
    }
}

impl PartialOrd for MemPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for MemPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether `raw` holds a traversal sequence, plain or percent-encoded (up to four times).
fn has_traversal(raw: &str) -> bool {
    let plain_traversal =
        |text: &str| text.contains("..\\") || text.split(['/', '\\']).any(|s| s == "..");
    if !raw.contains('%') {
        // Nothing to decode and no escape to find: only the plain spellings can be here.
        return plain_traversal(raw);
    }
    let mut text = raw.to_string();
    for _ in 0..5 {
        let lower = text.to_ascii_lowercase();
        if lower.contains("%2e%2e")
            || lower.contains("%2f")
            || lower.contains("%5c")
            || plain_traversal(&text)
        {
            return true;
        }
        let decoded = percent_decode(&text);
        if decoded == text {
            return false;
        }
        text = decoded;
    }
    // Still changing after five rounds of decoding: nobody names a file like that by accident.
    true
}

/// Decodes `%XX` escapes; invalid escapes and non-UTF-8 results are kept as they were.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                // NOTE: h and l are hex digits (< 16), so the byte fits.
                #[expect(clippy::cast_possible_truncation)]
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> MemPath {
        MemPath::root("/memories").unwrap()
    }

    #[test]
    fn canonical_forms() {
        let r = root();
        for (raw, want) in [
            ("/memories", "/memories"),
            ("/memories/", "/memories"),
            ("/memories//a//b/", "/memories/a/b"),
            ("/memories/./a", "/memories/a"),
        ] {
            assert_eq!(MemPath::resolve(raw, &r).unwrap().to_string(), want);
        }
    }

    #[test]
    fn rejections() {
        let r = root();
        for raw in [
            "",
            "memories/a",
            "/memoriesfoo",
            "/etc/passwd",
            "/memories_x/a",
        ] {
            assert_eq!(
                MemPath::resolve(raw, &r),
                Err(PathRejection::Outside),
                "{raw}"
            );
        }
        for raw in [
            "/memories/..",
            "/memories/a/../b",
            "/memories/%2e%2e/x",
            "/memories/%2E%2E/x",
            "/memories/a%2fb",
            "/memories/a%5Cb",
            "/memories/..\\x",
            "/memories/%252e%252e/x",
            "/memories/.%2e/x",
        ] {
            assert_eq!(
                MemPath::resolve(raw, &r),
                Err(PathRejection::Escape),
                "{raw}"
            );
        }
        assert_eq!(
            MemPath::resolve("/memories/a\0b", &r),
            Err(PathRejection::ControlCharacter('\0'))
        );
        assert!(matches!(
            MemPath::resolve(&format!("/memories/{}", "x".repeat(300)), &r),
            Err(PathRejection::TooLong { .. })
        ));
    }

    #[test]
    fn walking_and_rebuilding_paths() {
        let top = MemPath::top();
        let p = MemPath::absolute("/memories//notes/./a.md").unwrap();
        assert_eq!(p.as_str(), "/memories/notes/a.md");
        assert_eq!(
            p.segments().collect::<Vec<_>>(),
            ["memories", "notes", "a.md"]
        );
        assert_eq!((p.depth(), top.depth(), top.segments().count()), (3, 0, 0));
        assert_eq!(p.ancestor(0), top);
        assert_eq!(p.ancestor(2).as_str(), "/memories/notes");
        assert_eq!(p.ancestor(9), p);
        assert_eq!((p.name(), top.name()), ("a.md", ""));
        assert_eq!(p.parent().unwrap().as_str(), "/memories/notes");
        assert_eq!(MemPath::absolute("/m").unwrap().parent(), Some(top.clone()));
        assert_eq!(top.parent(), None);
        assert_eq!(top.join("m").join("x").as_str(), "/m/x");
        let dir = MemPath::absolute("/memories/notes").unwrap();
        let archive = MemPath::absolute("/memories/archive/2026").unwrap();
        assert_eq!(
            p.moved(&dir, &archive).as_str(),
            "/memories/archive/2026/a.md"
        );
        assert_eq!(
            p.moved(&top, &dir).as_str(),
            "/memories/notes/memories/notes/a.md"
        );
        assert!(p.starts_with(&dir) && p.starts_with(&top) && p.starts_with(&p));
        assert!(
            !MemPath::absolute("/memories/notes2")
                .unwrap()
                .starts_with(&dir)
        );
        // Segment order, not text order: `/a/b` sorts before `/a-b` although '/' > '-'.
        let (nested, dashed) = (
            MemPath::absolute("/a/b").unwrap(),
            MemPath::absolute("/a-b").unwrap(),
        );
        assert!(nested < dashed && top < nested);
    }

    #[test]
    fn bidi_and_zero_width_characters_are_refused() {
        let r = root();
        for c in [
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200E}',
            '\u{200F}',
            '\u{061C}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{180E}',
            '\u{2028}',
            '\u{2029}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{E0100}',
        ] {
            assert!(is_invisible(c), "{c:?}");
            assert_eq!(
                MemPath::resolve(&format!("/memories/a{c}b"), &r),
                Err(PathRejection::InvisibleCharacter(c))
            );
            assert!(MemPath::absolute(&format!("/memories/{c}")).is_err());
        }
        // Visible text of every script stays fine, spaces included.
        for raw in [
            "/memories/é",
            "/memories/日本語",
            "/memories/a b",
            "/memories/\u{00A0}",
            "/memories/😀",
            "/memories/ㄱ",
        ] {
            assert!(MemPath::resolve(raw, &r).is_ok(), "{raw}");
        }
    }

    #[test]
    fn dots_inside_names_are_fine() {
        let r = root();
        for raw in [
            "/memories/a..b",
            "/memories/...",
            "/memories/.hidden",
            "/memories/50%25",
        ] {
            assert!(MemPath::resolve(raw, &r).is_ok(), "{raw}");
        }
    }
}
