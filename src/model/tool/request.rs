//! Bounded input: reading one request without holding more than the limit, and the digest an
//! input is logged as when it is not logged whole.
//!
//! A request longer than [`Limits::max_request_bytes`](crate::model::tool::Limits) is never buffered
//! whole: [`read_request`] stops keeping its bytes at the limit and only counts and hashes the
//! rest, up to the newline. Such an input, one that is not UTF-8, a rejected input over
//! [`DIGEST_OVER_BYTES`], a call whose content is over the file-size limit and a call over
//! [`DIGEST_OVER_BYTES`] that ran and failed ([`failed_digest`]) are logged as a
//! [`RejectedDigest`]: length, blake3 and a short prefix. Their answer text ([`refusal_text`]) is
//! made from the digest's fields alone, so the verifier re-derives it without the input.

use std::io::{self, BufRead, Write};

use serde_json::Value;

use crate::model::hash::EventHash;
use crate::model::paths::{MAX_PATH_BYTES, MemPath};
use crate::model::tool::call::{InputDigest, Refusal, RejectedDigest, ToolCall};
use crate::model::tool::command::{Command, Profile, example};
use crate::model::tool::limits::Limits;
use crate::model::tool::render::echoed;

/// A rejected input longer than this (in bytes) is logged as a digest, not whole.
pub const DIGEST_OVER_BYTES: u64 = 4096;

/// How many bytes of an input a digest keeps as its prefix (cut back to a character boundary).
pub const DIGEST_PREFIX_BYTES: usize = 256;

/// The longest parser error text a digest keeps; a longer one is cut, and the model is given the
/// cut text.
pub const MAX_INVALID_TEXT_BYTES: usize = 2048;

/// Counts, hashes and keeps the start of the bytes written to it.
#[derive(Default)]
pub struct Digester {
    len: u64,
    hasher: blake3::Hasher,
    head: Vec<u8>,
}

impl Digester {
    /// A digester that has seen nothing.
    pub fn new() -> Digester {
        Digester::default()
    }

    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        self.hasher.update(bytes);
        let room = DIGEST_PREFIX_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    /// The digest of everything added.
    pub fn finish(&self) -> InputDigest {
        InputDigest {
            len: self.len,
            hash: EventHash(*self.hasher.finalize().as_bytes()),
            prefix: prefix_text(&self.head, self.len > self.head.len() as u64),
        }
    }
}

impl Write for Digester {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The digest of `bytes`.
pub fn digest_of(bytes: &[u8]) -> InputDigest {
    let mut d = Digester::new();
    d.update(bytes);
    d.finish()
}

/// The digest of a value's compact JSON text (the text `value.to_string()` gives), computed
/// without building the text.
pub fn value_digest(value: &Value) -> InputDigest {
    let mut d = Digester::new();
    // Cannot fail: the digester's writes never do, and a Value always serializes.
    let _ = serde_json::to_writer(&mut d, value);
    d.finish()
}

/// Counts bytes written and fails once they pass a limit.
struct Counter {
    len: u64,
    limit: u64,
}

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.len += buf.len() as u64;
        if self.len > self.limit {
            return Err(io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The `id` of a request that is a `tool_use` block (JSON text naming `"type": "tool_use"`).
#[cfg(feature = "client")]
pub fn tool_use_id(request: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(request).ok()?;
    if value.get("type").and_then(Value::as_str) != Some("tool_use") {
        return None;
    }
    value.get("id").and_then(Value::as_str).map(str::to_string)
}

/// Whether a value's compact JSON text is longer than `limit` bytes. Stops writing as soon as it
/// is, and allocates nothing for the text.
pub fn json_len_over(value: &Value, limit: u64) -> bool {
    let mut counter = Counter { len: 0, limit };
    serde_json::to_writer(&mut counter, value).is_err()
}

/// The length of a value's compact JSON text, without building it.
pub fn json_len(value: &Value) -> u64 {
    let mut counter = Counter {
        len: 0,
        limit: u64::MAX,
    };
    let _ = serde_json::to_writer(&mut counter, value);
    counter.len
}

/// The first bytes of an input as text: decoded with U+FFFD for each invalid sequence, and a
/// character the cut fell inside dropped (so a UTF-8 input is cut at a character boundary).
/// `cut` says the input went on after `head`.
fn prefix_text(head: &[u8], cut: bool) -> String {
    let mut out = String::new();
    let end = head.as_ptr_range().end;
    for chunk in head.utf8_chunks() {
        out.push_str(chunk.valid());
        let invalid = chunk.invalid();
        let split_by_cut = cut && invalid.as_ptr_range().end == end && is_incomplete(invalid);
        if !invalid.is_empty() && !split_by_cut {
            out.push('\u{FFFD}');
        }
    }
    out
}

/// Whether `bytes` is the start of a multi-byte UTF-8 sequence that was cut short.
fn is_incomplete(bytes: &[u8]) -> bool {
    let need = match bytes.first() {
        Some(b) if b & 0xE0 == 0xC0 => 2,
        Some(b) if b & 0xF0 == 0xE0 => 3,
        Some(b) if b & 0xF8 == 0xF0 => 4,
        _ => return false,
    };
    bytes.len() < need && bytes[1..].iter().all(|b| b & 0xC0 == 0x80)
}

/// The JSON text of an input being made (as the Python bindings convert a dict), held up to a
/// limit: once a write would pass it, the text is dropped and the writer says to stop.
pub struct BoundedText {
    buf: Vec<u8>,
    limit: u64,
    over: Option<Digester>,
}

impl BoundedText {
    /// An empty text that may grow to `limit` bytes.
    pub fn new(limit: u64) -> BoundedText {
        BoundedText {
            buf: Vec::new(),
            limit,
            over: None,
        }
    }

    /// Adds bytes; returns `false` once the text is over the limit (then the caller stops making
    /// it: nothing more is kept or counted).
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        if let Some(d) = &mut self.over {
            d.update(bytes);
            return false;
        }
        if self.buf.len() as u64 + bytes.len() as u64 > self.limit {
            let mut d = Digester::new();
            d.update(&self.buf);
            d.update(bytes);
            self.buf = Vec::new();
            self.over = Some(d);
            return false;
        }
        self.buf.extend_from_slice(bytes);
        true
    }

    /// Whether the text went over the limit.
    pub fn is_over(&self) -> bool {
        self.over.is_some()
    }

    /// The text, or, when it went over the limit, the digest of the bytes made until then.
    pub fn finish(self) -> Result<Vec<u8>, InputDigest> {
        match self.over {
            None => Ok(self.buf),
            Some(d) => Err(d.finish()),
        }
    }
}

impl Write for BoundedText {
    /// Fails once the text is over its limit, so a serializer writing into it stops there.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.push(buf) {
            Ok(buf.len())
        } else {
            Err(io::Error::other("over the request-size limit"))
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One request as the tool server reads it from a stream, or as a binding made it.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A line within the limit, without its `\n` or `\r\n`.
    Line(Vec<u8>),
    /// A line over the limit: it was not kept, only counted and hashed (without its `\n` or
    /// `\r\n`).
    TooLarge(InputDigest),
    /// An input handed over as an object whose conversion to JSON text stopped at the limit
    /// ([`BoundedText`]): the digest of the bytes made until then, and the `tool_use` block's id
    /// when the object named one.
    Stopped {
        /// The digest of the text made before the conversion stopped.
        digest: InputDigest,
        /// The block's `id`, when it was a `tool_use` block with a string id.
        tool_use_id: Option<String>,
    },
}

/// Reads one line of `input` as a request, holding at most `limit` bytes of it (plus one read
/// buffer). Returns `None` at the end of input; a last line without a newline is a line.
pub fn read_request(input: &mut impl BufRead, limit: u64) -> io::Result<Option<Request>> {
    let keep = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut line: Vec<u8> = Vec::new();
    let mut over: Option<Digester> = None;
    // In a line over the limit: a `\r` held back until it is known not to end the line.
    let mut held_cr = false;
    let mut read_any = false;
    let mut ended = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            if !read_any {
                return Ok(None);
            }
            break;
        }
        read_any = true;
        let newline = available.iter().position(|b| *b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        match &mut over {
            None => {
                // One byte of room for a `\r` that turns out to end the line.
                if line.len().saturating_add(chunk.len()) > keep.saturating_add(1) {
                    let mut d = Digester::new();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                        held_cr = true;
                    }
                    d.update(&line);
                    line = Vec::new();
                    feed(&mut d, chunk, newline.is_some(), &mut held_cr);
                    over = Some(d);
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            Some(d) => feed(d, chunk, newline.is_some(), &mut held_cr),
        }
        let used = newline.map_or(available.len(), |at| at + 1);
        input.consume(used);
        if newline.is_some() {
            ended = true;
            break;
        }
    }
    if let Some(mut d) = over {
        if held_cr {
            // The input ended after a `\r` with no newline: it is part of the line.
            d.update(b"\r");
        }
        return Ok(Some(Request::TooLarge(d.finish())));
    }
    if ended && line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.len() > keep {
        return Ok(Some(Request::TooLarge(digest_of(&line))));
    }
    Ok(Some(Request::Line(line)))
}

/// Adds one chunk of a line over the limit to its digest. `ends` says the line's newline follows
/// the chunk: a `\r` right before it is not part of the line.
fn feed(d: &mut Digester, chunk: &[u8], ends: bool, held_cr: &mut bool) {
    if chunk.is_empty() {
        // Nothing new: a held `\r` stays held, or ends the line with its newline.
        if ends {
            *held_cr = false;
        }
        return;
    }
    if *held_cr {
        d.update(b"\r");
        *held_cr = false;
    }
    match chunk.split_last() {
        Some((b'\r', rest)) => {
            d.update(rest);
            // The `\r` of a `\r\n` is not part of the line; otherwise it waits for what follows.
            *held_cr = !ends;
        }
        _ => d.update(chunk),
    }
}

/// A string as a digest's answer shows it: at most `max` bytes, cut at a character boundary and
/// marked with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A parser error text as a digest keeps it (and the model is given it).
pub fn invalid_text(text: &str) -> String {
    cut(text, MAX_INVALID_TEXT_BYTES)
}

/// The content field of `command` that is over the file-size limit, if any: such a call can never
/// succeed, so it is refused before it runs (whatever the tree holds) and logged as a digest.
pub fn oversized_content(
    command: &Command,
    limits: &Limits,
    root: &str,
    profile: Profile,
) -> Option<Refusal> {
    let (path, fields): (&str, Vec<(&str, &str)>) = match command {
        Command::Create { path, file_text } => (path, vec![("file_text", file_text)]),
        Command::StrReplace {
            path,
            old_str,
            new_str,
        } => {
            let mut fields = vec![("old_str", old_str.as_str())];
            if let Some(new_str) = new_str {
                fields.push(("new_str", new_str));
            }
            (path, fields)
        }
        Command::Insert {
            path, insert_text, ..
        } => (path, vec![("insert_text", insert_text)]),
        _ => return None,
    };
    let (field, text) = fields
        .into_iter()
        .find(|(_, text)| text.len() as u64 > limits.max_file_bytes)?;
    // The path as the semantics would show it: canonical in `spec`, as sent in `python-sdk` (and
    // as sent, cut, when it does not resolve).
    let resolved = MemPath::root(root)
        .ok()
        .and_then(|r| MemPath::resolve(path, &r).ok());
    let shown = match (profile, resolved) {
        (Profile::Spec, Some(p)) => p.to_string(),
        _ => cut(path, MAX_PATH_BYTES),
    };
    Some(Refusal::ContentTooLarge {
        path: shown,
        field: field.to_string(),
        bytes: text.len() as u64,
        limit: limits.max_file_bytes,
    })
}

/// Whether a call that ran and failed is logged as a [`Refusal::Failed`] digest instead of whole:
/// its canonical `Tool` payload is over [`DIGEST_OVER_BYTES`].
pub fn logs_failure_as_digest(payload_len: usize) -> bool {
    payload_len as u64 > DIGEST_OVER_BYTES
}

/// The digest a failed call is logged as in place of its `Tool` body (see [`Refusal::Failed`]):
/// `payload_len` and `payload_hash` are those of the body's canonical bytes, `text` the error it
/// got.
pub fn failed_digest(
    call: &ToolCall,
    payload_len: usize,
    payload_hash: EventHash,
    text: &str,
) -> RejectedDigest {
    RejectedDigest {
        root: call.root.clone(),
        profile: call.profile,
        input: InputDigest {
            len: payload_len as u64,
            hash: payload_hash,
            prefix: cut(
                // Each field cut first, so the preview costs time bounded by the cut.
                &call
                    .command
                    .input_with(|text| Value::String(cut(text, DIGEST_PREFIX_BYTES)))
                    .to_string(),
                DIGEST_PREFIX_BYTES,
            ),
        },
        refusal: Refusal::Failed {
            command: call.command.name().to_string(),
            paths: call
                .command
                .paths()
                .into_iter()
                .map(|p| echoed(p).into_owned())
                .collect(),
            text: text.to_string(),
        },
    }
}

/// The answer to an input logged as a digest: made from the digest's fields alone.
pub fn refusal_text(d: &RejectedDigest) -> String {
    let len = d.input.len;
    match &d.refusal {
        Refusal::TooLarge { limit } => format!(
            "Error: This call is {len} bytes, over the limit of {limit} bytes for one request, so it was not read. Send smaller calls (split large content across several files), or have the host raise the limit (`--max-request-bytes` of `mnemo tool` and `mnemo mcp`, `Limits::max_request_bytes`, or `max_request_bytes` of the Python server)."
        ),
        Refusal::Stopped { limit } => format!(
            "Error: This call is over the limit of {limit} bytes for one request (its conversion to JSON stopped after {len} bytes), so it was not run. Send smaller calls (split large content across several files), or have the host raise the limit (`max_request_bytes` of the server)."
        ),
        Refusal::NotUtf8 { valid_up_to } => format!(
            "Error: The input is not valid UTF-8 (byte {valid_up_to} of {len} starts an invalid sequence), so it was not read. Send each call as one line of UTF-8 JSON, for example {}",
            example("view", &d.root)
        ),
        Refusal::Invalid { text } | Refusal::Failed { text, .. } => text.clone(),
        Refusal::ContentTooLarge {
            path,
            field,
            bytes,
            limit,
        } => match field.as_str() {
            "file_text" => format!(
                "Error: {path} would hold {bytes} bytes, over the limit of {limit} bytes for one memory file. Split the content across several files."
            ),
            _ => format!(
                "Error: {field} is {bytes} bytes, over the limit of {limit} bytes for one memory file, so no edit of {path} can use it. Split the content across several files."
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], limit: u64) -> Vec<Request> {
        let mut reader = io::BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        while let Some(r) = read_request(&mut reader, limit).expect("read") {
            out.push(r);
        }
        out
    }

    #[test]
    fn lines_within_the_limit_come_whole_and_longer_ones_as_their_digest() {
        let long = vec![b'x'; 100];
        let mut input = b"{}\r\nab\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\r\n\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\r\rq\nlast");
        let got = read_all(&input, 10);
        let mut with_crs = long.clone();
        with_crs.extend_from_slice(b"\r\rq");
        assert_eq!(
            got,
            vec![
                Request::Line(b"{}".to_vec()),
                Request::Line(b"ab".to_vec()),
                Request::TooLarge(digest_of(&long)),
                Request::Line(Vec::new()),
                Request::TooLarge(digest_of(&with_crs)),
                Request::Line(b"last".to_vec()),
            ]
        );
        // Exactly at the limit, with or without `\r\n`, is within it.
        assert_eq!(
            read_all(b"0123456789\r\n0123456789\n0123456789a\r\n", 10),
            vec![
                Request::Line(b"0123456789".to_vec()),
                Request::Line(b"0123456789".to_vec()),
                Request::TooLarge(digest_of(b"0123456789a")),
            ]
        );
        assert_eq!(read_all(b"", 10), vec![]);
    }

    #[test]
    fn every_split_of_a_long_line_gives_the_same_digest() {
        let mut line: Vec<u8> = (0..300u32)
            .map(|i| b"ab\r\xc3\xa9"[(i % 5) as usize])
            .collect();
        line.push(b'\r');
        for capacity in [1, 2, 3, 7, 64, 1000] {
            let mut input = line.clone();
            input.extend_from_slice(b"\r\n");
            let mut reader = io::BufReader::with_capacity(capacity, &input[..]);
            let got = read_request(&mut reader, 16).expect("read");
            assert_eq!(got, Some(Request::TooLarge(digest_of(&line))), "{capacity}");
        }
    }

    #[test]
    fn a_prefix_is_cut_at_a_character_boundary() {
        let text = "é".repeat(200);
        let d = digest_of(text.as_bytes());
        assert_eq!(d.prefix, "é".repeat(128));
        assert_eq!(d.len, 400);
        assert_eq!(d.hash, EventHash::of(text.as_bytes()));
        let mut odd = "a".repeat(255).into_bytes();
        odd.extend_from_slice("é".as_bytes());
        assert_eq!(digest_of(&odd).prefix, "a".repeat(255));
        assert_eq!(digest_of(b"a\xffb\xc3").prefix, "a\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn a_bounded_text_stops_at_its_limit() {
        let mut t = BoundedText::new(5);
        assert!(t.push(b"abc") && t.push(b"de"));
        assert!(!t.push(b"fg") && t.is_over());
        assert_eq!(t.finish(), Err(digest_of(b"abcdefg")));
        let mut t = BoundedText::new(5);
        assert!(t.push(b"abcde"));
        assert_eq!(t.finish(), Ok(b"abcde".to_vec()));
    }

    #[test]
    fn the_size_of_a_value_is_that_of_its_text() {
        let v =
            serde_json::json!({"command": "create", "path": "/m/\"x\"\n", "file_text": "é\u{1}"});
        let text = v.to_string();
        assert_eq!(json_len(&v), text.len() as u64);
        assert!(!json_len_over(&v, text.len() as u64));
        assert!(json_len_over(&v, text.len() as u64 - 1));
        assert_eq!(value_digest(&v), digest_of(text.as_bytes()));
    }
}
