//! The project's own quoting: how an answer of semantics 2 shows a name, key or id the model sent,
//! and a JSON value it sent.
//!
//! These rules are fixed here and depend on no Unicode table of the toolchain or of a dependency,
//! so the bytes of an answer cannot change under a compiler or library upgrade (semantics 1
//! quoted with Rust's `{:?}`, whose escapes follow the toolchain's Unicode tables, and showed JSON
//! values as `serde_json` prints them). Changing any rule below changes recorded answers: it is a
//! new semantics version (see [`Semantics`](crate::model::semantics_version::Semantics)).
//!
//! [`quoted`] writes `"`, then each character of the text, then `"`:
//!
//! | character | written as |
//! |---|---|
//! | `"` | `\"` |
//! | `\` | `\\` |
//! | U+0009 tab, U+000A line feed, U+000D carriage return | `\t`, `\n`, `\r` |
//! | any other of U+0000–U+001F, U+007F–U+009F (the C0 and C1 controls and DEL) | `\u{X}`: the code point in lower-case hex without leading zeros (`\u{1b}`) |
//! | a character of the fixed invisible set that memory paths refuse (`is_invisible` in `src/model/semantics_version/invisible.rs`: bidi controls, zero-width and other default-ignorable characters, U+2028, U+2029) | `\u{X}` (`\u{202e}`) |
//! | anything else | itself |
//!
//! [`json_text`] writes a JSON value: `null`, `true`, `false`; an integer in decimal; any other
//! number from the shortest decimal digits that read back as the same binary64 value (the digits
//! Rust's `{:e}` gives, which the value alone defines): positional, with at least one digit after
//! the point, when its magnitude is zero or from 10⁻⁶ up to but not including 10²¹ (`2.5`,
//! `100.0`, `0.0`, `0.000001`), else the digits with a point after the first, `e` and the power
//! of ten (`1e300`, `1.5e-7`); a string as [`quoted`]; an array as `[a, b]`; an object as
//! `{"key": value, "other": value}` with its keys in byte order.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::semantics_version::is_invisible;

/// `text` between double quotes, escaped by the rules in the module docs.
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_quoted(&mut out, text);
    out
}

fn push_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => push_code_point(out, c),
            c if is_invisible(c) => push_code_point(out, c),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_code_point(out: &mut String, c: char) {
    // NOTE: writing to a String cannot fail.
    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
}

/// A JSON value as an answer of semantics 2 shows it (the rules in the module docs).
pub fn json_text(value: &Value) -> String {
    let mut out = String::new();
    // Written without recursion: an input value nests at most `MAX_INPUT_DEPTH` levels, but a
    // loop costs no stack whatever it is handed.
    enum Step<'a> {
        Value(&'a Value),
        Text(&'static str),
        Key(&'a str),
    }
    let mut todo = vec![Step::Value(value)];
    while let Some(step) = todo.pop() {
        match step {
            Step::Text(text) => out.push_str(text),
            Step::Key(key) => {
                push_quoted(&mut out, key);
                out.push_str(": ");
            }
            Step::Value(Value::Null) => out.push_str("null"),
            Step::Value(Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
            Step::Value(Value::Number(n)) => push_number(&mut out, n),
            Step::Value(Value::String(s)) => push_quoted(&mut out, s),
            Step::Value(Value::Array(items)) => {
                out.push('[');
                todo.push(Step::Text("]"));
                for (i, item) in items.iter().enumerate().rev() {
                    todo.push(Step::Value(item));
                    if i > 0 {
                        todo.push(Step::Text(", "));
                    }
                }
            }
            Step::Value(Value::Object(map)) => {
                out.push('{');
                todo.push(Step::Text("}"));
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                for (i, (key, item)) in entries.into_iter().enumerate().rev() {
                    todo.push(Step::Value(item));
                    todo.push(Step::Key(key));
                    if i > 0 {
                        todo.push(Step::Text(", "));
                    }
                }
            }
        }
    }
    out
}

fn push_number(out: &mut String, n: &serde_json::Number) {
    // NOTE: writing to a String cannot fail.
    if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(f) = n.as_f64() {
        out.push_str(&float_text(f));
    }
}

/// A finite binary64 value by the rule in the module docs.
fn float_text(f: f64) -> String {
    if !f.is_finite() {
        // serde_json holds no such number; say what it is rather than print nothing.
        return "null".into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Where the decimal point falls, counted in digits from the first one.
    let point = exponent + 1;
    let count = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let mut out = String::from(sign);
    if (1..=21).contains(&point) {
        let whole = usize::try_from(point).unwrap_or(0);
        if count <= point {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', whole - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..whole]);
            out.push('.');
            out.push_str(&digits[whole..]);
        }
    } else if (-5..=0).contains(&point) {
        out.push_str("0.");
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(-point).unwrap_or(0),
        ));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        // NOTE: writing to a String cannot fail.
        let _ = write!(out, "e{}", point - 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoting_follows_the_table() {
        assert_eq!(
            quoted("plain /memories/a b.md"),
            "\"plain /memories/a b.md\""
        );
        assert_eq!(quoted("say \"hi\" \\ bye"), r#""say \"hi\" \\ bye""#);
        assert_eq!(quoted("a\tb\nc\rd"), r#""a\tb\nc\rd""#);
        assert_eq!(
            quoted("\u{0}\u{1b}\u{7f}\u{85}\u{9f}"),
            r#""\u{0}\u{1b}\u{7f}\u{85}\u{9f}""#
        );
        assert_eq!(quoted("a\u{202e}txt"), r#""a\u{202e}txt""#);
        assert_eq!(
            quoted("zero\u{200b}\u{feff}\u{e0001}"),
            r#""zero\u{200b}\u{feff}\u{e0001}""#
        );
        // What Rust's `{:?}` escapes by its Unicode tables is kept as it is: unassigned code
        // points, combining marks at the start, private use.
        assert_eq!(
            quoted("\u{378}\u{301}x\u{e000}"),
            "\"\u{378}\u{301}x\u{e000}\""
        );
        assert_eq!(quoted("é ü 日本 'single'"), "\"é ü 日本 'single'\"");
        assert_eq!(quoted(""), "\"\"");
    }

    #[test]
    fn every_character_is_quoted_visibly_and_reversibly() {
        // Nothing the table escapes reaches the output raw, and unescaping gives the text back.
        let text: String = (0u32..0x3000)
            .chain(0xE0000..0xE0100)
            .filter_map(char::from_u32)
            .collect();
        let out = quoted(&text);
        assert!(!out.chars().any(|c| c.is_control() || is_invisible(c)));
        let inner = &out[1..out.len() - 1];
        let mut back = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                back.push(c);
                continue;
            }
            match chars.next() {
                Some('t') => back.push('\t'),
                Some('n') => back.push('\n'),
                Some('r') => back.push('\r'),
                Some('u') => {
                    let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                    let code = u32::from_str_radix(&hex, 16).expect("hex");
                    back.push(char::from_u32(code).expect("a char"));
                }
                Some(other) => back.push(other),
                None => panic!("a dangling backslash"),
            }
        }
        assert_eq!(back, text);
    }

    #[test]
    fn json_values_follow_the_table() {
        assert_eq!(json_text(&json!(null)), "null");
        assert_eq!(json_text(&json!([true, false])), "[true, false]");
        assert_eq!(
            json_text(&json!(18_446_744_073_709_551_615u64)),
            "18446744073709551615"
        );
        assert_eq!(
            json_text(&json!(-9_223_372_036_854_775_808i64)),
            "-9223372036854775808"
        );
        assert_eq!(
            json_text(&json!({"b": 1, "a": "x\ty", "é": [], "Z": {}})),
            r#"{"Z": {}, "a": "x\ty", "b": 1, "é": []}"#
        );
        assert_eq!(
            json_text(&json!([[1, [2]], "\u{202e}"])),
            r#"[[1, [2]], "\u{202e}"]"#
        );
    }

    #[test]
    fn numbers_with_a_fraction_or_exponent_are_written_by_rule() {
        for (f, want) in [
            (2.5, "2.5"),
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (-1.25, "-1.25"),
            (0.1, "0.1"),
            (0.000_001, "0.000001"),
            (0.000_000_15, "1.5e-7"),
            (1e20, "100000000000000000000.0"),
            (1.5e20, "150000000000000000000.0"),
            (1e21, "1e21"),
            (1.5e300, "1.5e300"),
            (123_456.789, "123456.789"),
            (f64::MAX, "1.7976931348623157e308"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(float_text(f), want, "{f}");
            let value = serde_json::Number::from_f64(f)
                .map(Value::Number)
                .expect("finite");
            assert_eq!(json_text(&value), want);
        }
    }

    #[test]
    fn a_deep_value_costs_no_stack() {
        let mut value = json!(1);
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let text = json_text(&value);
        assert_eq!(text.len(), 200_001);
        // serde_json's own drop recurses; unwind it by hand.
        let mut items = vec![value];
        while let Some(v) = items.pop() {
            if let Value::Array(inner) = v {
                items.extend(inner);
            }
        }
    }
}
