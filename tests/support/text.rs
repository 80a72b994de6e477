//! Texts of a given size for the footprint tests and benches (shared by both through `#[path]`).

/// A text of at least `bytes` bytes: numbered lines of about 24 bytes, each `{tag} line N`, the
/// number right-aligned in 10 columns, so one line's text is found once.
pub fn numbered_lines(bytes: usize, tag: &str) -> String {
    let mut text = String::with_capacity(bytes + tag.len() + 17);
    let mut line = 0;
    while text.len() < bytes {
        text.push_str(&format!("{tag} line {line:>10}\n"));
        line += 1;
    }
    text
}
