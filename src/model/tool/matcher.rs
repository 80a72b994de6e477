//! Every occurrence of a needle in a text, overlapping ones included, in one linear pass.
//!
//! `str_replace` names the line of every overlapping match when `old_str` occurs more than once
//! (the Python SDK's scan restarts one character after each match). Restarting a substring search
//! at each match costs `matches × |old_str|`: a megabyte of `a` and half a megabyte of `a` as the
//! needle is 10^11 byte comparisons. [`Occurrences`] runs Knuth–Morris–Pratt over the bytes
//! instead: at most `2 × |text|` comparisons after a table of `|needle|` entries, whatever the
//! input. The table is the only memory it takes (a word per needle byte, built only for a needle
//! no longer than the text).

/// The byte offsets where a needle starts in a text, ascending, overlapping occurrences included.
///
/// A non-empty needle that is valid UTF-8 only matches at a character boundary, so the offsets
/// can always slice the text. An empty needle occurs at every character boundary, the end of the
/// text included.
pub struct Occurrences<'a> {
    text: &'a str,
    needle: &'a [u8],
    /// `border[i]`: the length of the longest proper prefix of `needle[..=i]` that is also its
    /// suffix. Empty for an empty needle.
    border: Vec<usize>,
    /// The next byte of the text to read.
    at: usize,
    /// How many bytes of the needle the text read so far ends with.
    matched: usize,
    /// Whether an empty needle's last occurrence (the end of the text) was yielded.
    done: bool,
}

impl<'a> Occurrences<'a> {
    /// The occurrences of `needle` in `text`.
    pub fn new(text: &'a str, needle: &'a str) -> Occurrences<'a> {
        let needle = needle.as_bytes();
        // A needle longer than the text never occurs: skip building its table.
        let border = if needle.len() <= text.len() {
            borders(needle)
        } else {
            Vec::new()
        };
        Occurrences {
            text,
            needle,
            border,
            at: 0,
            matched: 0,
            done: false,
        }
    }

    /// The next occurrence of the empty needle: the next character boundary.
    fn next_boundary(&mut self) -> Option<usize> {
        if self.done {
            return None;
        }
        let at = self.at;
        match self.text[at..].chars().next() {
            Some(c) => self.at += c.len_utf8(),
            None => self.done = true,
        }
        Some(at)
    }
}

impl Iterator for Occurrences<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let m = self.needle.len();
        if m == 0 {
            return self.next_boundary();
        }
        if m > self.text.len() {
            return None;
        }
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.at) {
            self.at += 1;
            // Each step back lowers `matched`, which rises by at most one per byte read, so the
            // steps back over the whole text are at most its length.
            while self.matched > 0 && self.needle[self.matched] != b {
                self.matched = self.border[self.matched - 1];
            }
            if self.needle[self.matched] == b {
                self.matched += 1;
            }
            if self.matched == m {
                // Keep the longest border, so the next, overlapping, occurrence is found too.
                self.matched = self.border[m - 1];
                return Some(self.at - m);
            }
        }
        None
    }
}

/// The border table of `needle` (the prefix function): linear in its length.
fn borders(needle: &[u8]) -> Vec<usize> {
    let mut border = vec![0; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[k] != needle[i] {
            k = border[k - 1];
        }
        if needle[k] == needle[i] {
            k += 1;
        }
        border[i] = k;
    }
    border
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The quadratic reference: a comparison at every character boundary.
    fn naive(text: &str, needle: &str) -> Vec<usize> {
        (0..=text.len())
            .filter(|&i| text.is_char_boundary(i) && text[i..].starts_with(needle))
            .collect()
    }

    fn found(text: &str, needle: &str) -> Vec<usize> {
        Occurrences::new(text, needle).collect()
    }

    #[test]
    fn overlapping_occurrences_are_all_found() {
        assert_eq!(found("aaaa", "aa"), [0, 1, 2]);
        assert_eq!(found("abababa", "aba"), [0, 2, 4]);
        assert_eq!(found("aabaabaaab", "aab"), [0, 3, 7]);
        assert_eq!(found("abc", "abcd"), Vec::<usize>::new());
        assert_eq!(found("", "a"), Vec::<usize>::new());
        assert_eq!(found("x\nx\n", "x"), [0, 2]);
    }

    #[test]
    fn the_empty_needle_occurs_at_every_character_boundary() {
        assert_eq!(found("", ""), [0]);
        assert_eq!(found("ab", ""), [0, 1, 2]);
        assert_eq!(found("é🦀", ""), [0, 2, 6]);
    }

    #[test]
    fn multibyte_needles_match_only_whole_characters() {
        assert_eq!(found("éé", "é"), [0, 2]);
        assert_eq!(found("a🦀🦀b", "🦀"), [1, 5]);
        // `é` is C3 A9 and `©` C2 A9: a shared continuation byte is no match.
        assert_eq!(found("é©é", "©"), [2]);
        assert_eq!(found("é", "©"), Vec::<usize>::new());
    }

    #[test]
    fn a_needle_of_half_a_megabyte_in_a_megabyte_takes_one_pass() {
        let text = "a".repeat(1_000_000);
        let needle = "a".repeat(500_000);
        let mut occurrences = Occurrences::new(&text, &needle);
        assert_eq!(occurrences.next(), Some(0));
        assert_eq!(occurrences.by_ref().last(), Some(500_000));
        assert_eq!(Occurrences::new(&text, &needle).count(), 500_001);
    }

    proptest! {
        #[test]
        fn matches_the_naive_search_over_two_letters(
            text in "[ab]{0,40}",
            needle in "[ab]{0,6}",
        ) {
            prop_assert_eq!(found(&text, &needle), naive(&text, &needle));
        }

        #[test]
        fn matches_the_naive_search_on_periodic_text(
            unit in "[ab]{1,3}",
            repeats in 0usize..30,
            tail in "[ab]{0,3}",
            needle_units in 0usize..8,
            needle_tail in "[ab]{0,2}",
        ) {
            let text = unit.repeat(repeats) + &tail;
            let needle = unit.repeat(needle_units) + &needle_tail;
            prop_assert_eq!(found(&text, &needle), naive(&text, &needle));
        }

        #[test]
        fn matches_the_naive_search_with_multibyte_characters(
            text in "[aé🦀\n]{0,24}",
            needle in "[aé🦀\n]{0,4}",
        ) {
            prop_assert_eq!(found(&text, &needle), naive(&text, &needle));
        }
    }
}
