//! Memory paths: validation against the root, traversal rejection and normalisation.
//!
//! **Invariant:** no path that leaves the root ever reaches the tree. Validation runs on the raw text
//! the model sent, *before* normalisation, in this order:
//!
//! 1. the path is the root or starts with the root followed by `/` (so `/memoriesfoo` is outside);
//! 2. no traversal: no `..` segment (split on `/` and `\`), no `..\`, no percent-encoded dot pair,
//!    slash or backslash (`%2e%2e`, `%2f`, `%5c`, any case), and none of those after repeated
//!    percent-decoding (double encoding such as `%252e%252e`);
//! 3. no control characters (NUL included), no segment over [`MAX_SEGMENT_BYTES`], and at most
//!    [`MAX_PATH_BYTES`] in all.
//!
//! Normalisation then drops empty segments (`//`, a trailing `/`) and `.` segments. The canonical
//! path is the root followed by the remaining segments.

use std::fmt;

/// Longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Longest single path segment accepted, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// A validated, canonical absolute path: `/` followed by non-empty segments joined by `/`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemPath {
    segments: Vec<String>,
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
        let path = MemPath::absolute(raw)?;
        if path.segments.is_empty() {
            return Err(
                "the memory root cannot be / itself; use a directory such as /memories".into(),
            );
        }
        Ok(path)
    }

    /// Parses an absolute path given by an operator (a grant's prefix, a CLI argument): checked
    /// like a root, but `/` itself is allowed.
    pub fn absolute(raw: &str) -> Result<MemPath, String> {
        if !raw.starts_with('/') {
            return Err(format!(
                "the path must be absolute, such as /memories, got {raw:?}"
            ));
        }
        if has_traversal(raw) || raw.chars().any(char::is_control) {
            return Err(format!(
                "the path {raw:?} contains a traversal sequence or a control character"
            ));
        }
        Ok(MemPath {
            segments: normal_segments(raw),
        })
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
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathRejection::TooLong {
                len: raw.len(),
                max: MAX_PATH_BYTES,
            });
        }
        let segments = normal_segments(raw);
        if let Some(long) = segments.iter().find(|s| s.len() > MAX_SEGMENT_BYTES) {
            return Err(PathRejection::TooLong {
                len: long.len(),
                max: MAX_SEGMENT_BYTES,
            });
        }
        Ok(MemPath { segments })
    }

    /// What follows this path's text (`/a/b`) at the start of `raw`, or `None` if `raw` does not
    /// start with it.
    fn strip_from<'r>(&self, raw: &'r str) -> Option<&'r str> {
        if self.segments.is_empty() {
            return raw.strip_prefix('/');
        }
        let mut rest = raw;
        for segment in &self.segments {
            rest = rest.strip_prefix('/')?.strip_prefix(segment.as_str())?;
        }
        Some(rest)
    }

    /// Builds a path from segments that are already known to be valid (read back from the tree).
    pub(crate) fn from_segments(segments: Vec<String>) -> MemPath {
        MemPath { segments }
    }

    /// The segments, from the top.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The last segment (empty for `/`).
    pub fn name(&self) -> &str {
        self.segments.last().map_or("", String::as_str)
    }

    /// The parent directory, or `None` for `/`.
    pub fn parent(&self) -> Option<MemPath> {
        let (_, parent) = self.segments.split_last()?;
        Some(MemPath {
            segments: parent.to_vec(),
        })
    }

    /// This path with `name` appended.
    pub fn join(&self, name: &str) -> MemPath {
        let mut segments = self.segments.clone();
        segments.push(name.to_string());
        MemPath { segments }
    }

    /// Whether `self` is `other` or lies under it.
    pub fn starts_with(&self, other: &MemPath) -> bool {
        self.segments.starts_with(&other.segments)
    }
}

impl fmt::Display for MemPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for s in &self.segments {
            f.write_str("/")?;
            f.write_str(s)?;
        }
        Ok(())
    }
}

fn normal_segments(raw: &str) -> Vec<String> {
    raw.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .map(str::to_string)
        .collect()
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
