//! How deep a JSON text nests, counted on its bytes: the limit every input is held to, and the
//! count semantics 2 uses to tell a text nested too deep from one that is not JSON.

/// Deepest nesting of arrays and objects accepted in one input. A memory-tool call is a flat
/// object; the limit sits well below serde_json's own (128), so an input parsed from a `Value` and
/// the same input re-parsed from its text (as replay does) are refused with the same words.
pub const MAX_INPUT_DEPTH: usize = 64;

/// Whether JSON text opens more than [`MAX_INPUT_DEPTH`] arrays or objects inside one another:
/// `[` and `{` outside strings count one level in, `]` and `}` one level out, and a string runs
/// from an unescaped `"` to the next (a `\` escapes the byte after it). For JSON text this is
/// the depth of the value it holds, so text and value are refused alike; for any other text it
/// is a fixed rule that reads each byte once.
pub(crate) fn text_nests_too_deep(text: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_INPUT_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The bytes of `text` before the place a parser names by `line` (from 1) and `column` (bytes
/// after the line's start), as `serde_json` counts them.
pub(crate) fn text_before(text: &str, line: usize, column: usize) -> &[u8] {
    let bytes = text.as_bytes();
    let mut start = 0;
    for _ in 1..line {
        match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(at) => start += at + 1,
            None => return bytes,
        }
    }
    &bytes[..start.saturating_add(column).min(bytes.len())]
}
