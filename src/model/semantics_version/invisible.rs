//! The characters that draw nothing or reorder the text around them: memory paths refuse them,
//! and the project's quoting (semantics 2 on) writes them as escapes. Changing the set changes
//! answers, so it is part of the semantics versions.

/// Whether `c` is refused in names as invisible: it draws nothing, or reorders the text around it,
/// so a listing could show a name as another one (`a\u{202E}txt.exe` shows as `aexe.txt`).
///
/// The set: the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069); every
/// default-ignorable code point of Unicode (U+00AD soft hyphen, U+034F, U+115F, U+1160, U+17B4,
/// U+17B5, U+180B–U+180F, U+200B–U+200F zero-width space, non-joiner, joiner and marks,
/// U+2060–U+206F word joiner and invisible operators, U+3164, U+FE00–U+FE0F variation selectors,
/// U+FEFF byte order mark, U+FFA0, U+FFF0–U+FFF8, U+1BCA0–U+1BCA3, U+1D173–U+1D17A,
/// U+E0000–U+E0FFF tags and variation selectors); the line and paragraph separators U+2028 and
/// U+2029, which break a listing's lines; and the interlinear annotation marks U+FFF9–U+FFFB.
pub fn is_invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFFB
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}
