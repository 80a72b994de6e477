//! The memory-stores API's path rules, checked before a write is recorded: a path starts with
//! `/` and has 1 to 20 segments, none empty, `.` or `..`; no control characters, format
//! characters (Unicode category Cf) or the line and paragraph separators U+2028 and U+2029; in
//! Unicode Normalization Form C; at most 1,024 bytes. And, stricter than the hosted API, no
//! segment over 255 bytes: the memory tool's own limit, so that every memory the API makes is
//! one the memory tool can read, edit and delete.

use unicode_normalization::{IsNormalized, is_nfc_quick};

/// The most segments a path has.
const MAX_SEGMENTS: usize = 20;
/// The longest path, in bytes.
const MAX_BYTES: usize = 1024;

/// The format characters (general category Cf) of Unicode 15.1, as inclusive ranges.
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

fn is_format(c: char) -> bool {
    let c = u32::from(c);
    FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// Why `path` is not a memory path of the API: `None` if it is one.
pub fn check(path: &str) -> Option<String> {
    let example = "such as /projects/foo/notes.md";
    if path.len() > MAX_BYTES {
        return Some(format!(
            "a memory path is at most {MAX_BYTES} bytes long, not {}",
            path.len()
        ));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Some(format!("a memory path starts with /, {example}"));
    };
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.len() > MAX_SEGMENTS {
        return Some(format!(
            "a memory path has at most {MAX_SEGMENTS} segments, not {}",
            segments.len()
        ));
    }
    if let Some(long) = segments
        .iter()
        .find(|s| s.len() > crate::model::paths::MAX_SEGMENT_BYTES)
    {
        return Some(format!(
            "a memory path's segments are at most {} bytes each (the memory tool's limit), not {}",
            crate::model::paths::MAX_SEGMENT_BYTES,
            long.len()
        ));
    }
    if let Some(bad) = segments
        .iter()
        .find(|s| s.is_empty() || **s == "." || **s == "..")
    {
        return Some(format!(
            "a memory path's segments cannot be empty, . or .. (found {bad:?}), {example}"
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|&c| c.is_control() || is_format(c) || c == '\u{2028}' || c == '\u{2029}')
    {
        return Some(format!(
            "a memory path cannot hold control or format characters or line separators (found U+{:04X})",
            u32::from(c)
        ));
    }
    let nfc = match is_nfc_quick(path.chars()) {
        IsNormalized::Yes => true,
        IsNormalized::No => false,
        IsNormalized::Maybe => {
            unicode_normalization::UnicodeNormalization::nfc(path).eq(path.chars())
        }
    };
    (!nfc).then(|| {
        "a memory path must be in Unicode Normalization Form C (compose it, as NFC does, before sending it)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn paths_are_held_to_the_hosted_rules() {
        for good in [
            "/a.md",
            "/projects/foo/notes.md",
            "/é.md",
            "/a b/c",
            "/日本語/メモ.md",
        ] {
            assert_eq!(check(good), None, "{good}");
        }
        let long = format!("/{}/{}", "a".repeat(200), "b".repeat(900));
        let wide = format!("/{}", "c".repeat(256));
        let deep = format!("/{}", vec!["a"; 21].join("/"));
        for bad in [
            "a.md",
            "/",
            "/a//b",
            "/a/",
            "/./a",
            "/a/..",
            "/a\u{0}b",
            "/a\u{7f}",
            "/a\u{200b}b",
            "/a\u{feff}",
            "/a\u{2028}",
            "/e\u{301}.md",
            &long,
            &wide,
            &deep,
        ] {
            assert!(check(bad).is_some(), "{bad:?}");
        }
        assert_eq!(check(&format!("/{}", vec!["a"; 20].join("/"))), None);
        assert_eq!(check(&format!("/{}", "é".repeat(127))), None);
        assert!(check(&format!("/{}", "é".repeat(128))).is_some());
    }
}
