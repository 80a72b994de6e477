//! The line filter between the process's stdin and stdout and rmcp's transport.
//!
//! rmcp reads one JSON-RPC message per line, and skips without a word a line that is not JSON
//! (and one longer than its line limit), so a client that sent one waits for an answer forever.
//! JSON-RPC 2.0 answers a request that does not parse with a parse error (`-32700`, id `null`).
//! So the server reads stdin itself: every line rmcp would drop silently gets that error here,
//! and every other line goes on to rmcp unchanged, which answers it (or reports what is wrong
//! with it) as before. A single writer owns stdout and writes whole lines only, rmcp's and the
//! filter's, each flushed as it is written, so no two replies interleave.
//!
//! A line is held only up to the request-size limit ([`Limits::max_request_bytes`], which rmcp's
//! own line limit is raised to match): a longer one is counted, not kept, and answered with an
//! error that says the limit and how to raise it. A message that names a key twice in one object
//! is answered with an error too (rmcp would keep the last), so no call is run that the client
//! did not mean.
//!
//! EOF on stdin is EOF for rmcp: the session ends as it did without the filter.
//!
//! [`Limits::max_request_bytes`]: crate::model::tool::Limits

use std::future::Future;
use std::io;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use rmcp::transport::async_rw::AsyncRwTransport;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// Bytes in flight in each pipe between the filter and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// Lines queued for stdout before their senders wait.
const QUEUED_LINES: usize = 64;

/// What a valid message looks like, for the error messages.
const EXAMPLE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// The UTF-8 byte order mark, which rmcp (as RFC 8259 allows) ignores at the start of a line.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The transport rmcp is served on: the lines it reads, the pipe it writes its replies into.
pub(super) type Transport = AsyncRwTransport<RoleServer, DuplexStream, DuplexStream>;

/// Puts the filter between `input` and `output`, holding at most `limit` bytes of a line.
/// Returns the transport to serve rmcp on and the relay that moves the lines. The relay must run
/// beside the session; it ends once rmcp has closed its side and every reply has been written,
/// and fails only when `output` does.
pub(super) fn filter<R, W>(
    input: R,
    output: W,
    limit: u64,
) -> (
    Transport,
    impl Future<Output = io::Result<()>> + Send + 'static,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let ((rmcp_reads, rmcp_writes), relay) = filter_pipes(input, output, limit);
    // rmcp counts a line with its `\r\n`; every line the filter forwards is within the limit.
    let rmcp_limit = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_add(2);
    let transport =
        AsyncRwTransport::new_server(rmcp_reads, rmcp_writes).with_max_line_length(rmcp_limit);
    (transport, relay)
}

/// [`filter`] with rmcp's two pipes as they are: the lines it reads, the pipe it writes into.
fn filter_pipes<R, W>(
    input: R,
    output: W,
    limit: u64,
) -> (
    (DuplexStream, DuplexStream),
    impl Future<Output = io::Result<()>> + Send + 'static,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (lines, queued) = mpsc::channel(QUEUED_LINES);
    // The reader holds only a weak sender: the queue closes (and the writer finishes) when rmcp's
    // output ends, even if stdin stays open.
    let errors = lines.downgrade();
    let relay = async move {
        tokio::spawn(read_input(input, to_rmcp, errors, limit));
        tokio::spawn(forward_replies(from_rmcp, lines));
        write_output(output, queued).await
    };
    ((rmcp_reads, rmcp_writes), relay)
}

/// Reads `input` line by line: forwards to rmcp what it can read, answers the rest. Ends at EOF
/// (or a read error) on `input`, or when rmcp or stdout went away; dropping `to_rmcp` is rmcp's
/// EOF.
async fn read_input<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    errors: mpsc::WeakSender<Vec<u8>>,
    limit: u64,
) {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    let mut number: u64 = 0;
    loop {
        let read = match read_line(&mut input, &mut line, limit).await {
            Ok(read) => read,
            Err(_) => return,
        };
        number += 1;
        let reply = match read {
            Read::Eof => return,
            Read::TooLong(len) => error_line(
                ErrorCode::INVALID_REQUEST,
                Value::Null,
                format!(
                    "Invalid Request: stdin line {number} is {len} bytes, over the limit of \
                     {limit} bytes for one message, so it was not read; send smaller messages \
                     (split large content across several files), or start the server with a \
                     higher `--max-request-bytes`"
                ),
            ),
            Read::Line => match check(&line) {
                Check::Forward => {
                    if to_rmcp.write_all(&line).await.is_err() {
                        return;
                    }
                    continue;
                }
                Check::Blank => continue,
                Check::Duplicate { key, id } => error_line(
                    ErrorCode::INVALID_REQUEST,
                    id,
                    format!(
                        "Invalid Request: stdin line {number} names the key {key} more than once \
                         in one object, so it was not run; send each member once, such as \
                         {EXAMPLE}"
                    ),
                ),
                Check::Unreadable(why) => error_line(
                    ErrorCode::PARSE_ERROR,
                    Value::Null,
                    format!(
                        "Parse error: stdin line {number} {why}; send each JSON-RPC 2.0 message \
                         as one JSON object on one line, such as {EXAMPLE}"
                    ),
                ),
            },
        };
        let Some(sender) = errors.upgrade() else {
            return;
        };
        if sender.send(reply).await.is_err() {
            return;
        }
    }
}

/// Moves rmcp's replies, whole lines at a time, onto the queue for stdout.
async fn forward_replies(from_rmcp: DuplexStream, lines: mpsc::Sender<Vec<u8>>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            // Dropping `from_rmcp` when stdout is gone fails rmcp's writes instead of blocking them.
            Ok(_) => {
                if lines.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The one writer of `output`: writes and flushes each queued line until the queue closes.
async fn write_output<W: AsyncWrite + Unpin>(
    mut output: W,
    mut queued: mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    while let Some(line) = queued.recv().await {
        output.write_all(&line).await?;
        output.flush().await?;
    }
    Ok(())
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq)]
enum Read {
    /// A line, with its `\n` (none on a last line cut off by EOF), is in the buffer.
    Line,
    /// A line over the limit went by, this many bytes long (without its `\n` or `\r\n`); it was
    /// dropped, not buffered.
    TooLong(u64),
    /// `input` ended.
    Eof,
}

/// Reads one line into `line` (cleared first), its `\n` included, holding at most `limit` bytes
/// of it (without its `\n` or `\r\n`), so a longer line costs no memory and is never forwarded.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    limit: u64,
) -> io::Result<Read> {
    line.clear();
    let keep = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_add(2);
    // Set once the line is over the limit: its length so far, without a trailing `\r`.
    let mut too_long: Option<u64> = None;
    let mut cr = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match too_long {
                Some(len) => Read::TooLong(len + u64::from(cr)),
                None if line.is_empty() => Read::Eof,
                None => Read::Line,
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        match &mut too_long {
            None if line.len().saturating_add(take) > keep => {
                line.extend_from_slice(&available[..take]);
                let (len, ends_in_cr) = content_len(line);
                too_long = Some(len);
                cr = ends_in_cr;
                *line = Vec::new();
            }
            None => line.extend_from_slice(&available[..take]),
            Some(len) => {
                let chunk = &available[..take];
                let (n, ends_in_cr) = content_len(chunk);
                if n > 0 || newline.is_none() {
                    *len += u64::from(cr) + n;
                    cr = ends_in_cr;
                }
            }
        }
        input.consume(take);
        if newline.is_some() {
            break;
        }
    }
    if let Some(len) = too_long {
        return Ok(Read::TooLong(len));
    }
    let (len, _) = content_len(line);
    if len > limit {
        *line = Vec::new();
        return Ok(Read::TooLong(len));
    }
    Ok(Read::Line)
}

/// The length of a piece of a line without its `\n` and a `\r` right before it, and whether it
/// ends in a `\r` not yet known to be part of it (no `\n` after it in this piece).
fn content_len(piece: &[u8]) -> (u64, bool) {
    match piece.strip_suffix(b"\n") {
        Some(rest) => (rest.strip_suffix(b"\r").unwrap_or(rest).len() as u64, false),
        None => match piece.strip_suffix(b"\r") {
            Some(rest) => (rest.len() as u64, true),
            None => (piece.len() as u64, false),
        },
    }
}

/// What to do with a line.
#[derive(Debug, PartialEq)]
enum Check {
    /// rmcp reads it (and answers it, or says what is wrong with it).
    Forward,
    /// Nothing but whitespace: no message, so no answer, as in rmcp.
    Blank,
    /// rmcp would skip it without an answer; why it cannot be read.
    Unreadable(String),
    /// An object in it names a key twice (quoted for the message); the request's id, when the
    /// id is not what is duplicated.
    Duplicate {
        /// The key, quoted.
        key: String,
        /// The id to answer, or null.
        id: Value,
    },
}

/// Decides a line's fate the way rmcp would parse it: rmcp drops exactly the lines whose parse
/// fails with a syntax or end-of-input error, so those are answered here.
fn check(line: &[u8]) -> Check {
    let text = line.strip_suffix(b"\n").unwrap_or(line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    let text = text.strip_prefix(BOM).unwrap_or(text);
    if text
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Check::Blank;
    }
    let text = match std::str::from_utf8(text) {
        Ok(text) => text,
        Err(e) => return Check::Unreadable(format!("is not UTF-8 text ({e})")),
    };
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Err(e)
            if matches!(
                e.classify(),
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof
            ) =>
        {
            Check::Unreadable(format!("is not valid JSON ({e})"))
        }
        _ => match crate::model::tool::command::parse_json(text) {
            Err(crate::model::tool::command::JsonError::Duplicate(key)) => {
                let id = match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(map)) if key != "id" => {
                        map.get("id").cloned().unwrap_or(Value::Null)
                    }
                    _ => Value::Null,
                };
                Check::Duplicate {
                    key: format!("{key:?}"),
                    id,
                }
            }
            _ => Check::Forward,
        },
    }
}

/// A JSON-RPC error response to `id` (null when it is not known), as one line.
fn error_line(code: ErrorCode, id: Value, message: String) -> Vec<u8> {
    // `json!` would sort the keys; a struct keeps `jsonrpc` first, as rmcp writes it.
    #[derive(Serialize)]
    struct Response {
        jsonrpc: &'static str,
        id: Value,
        error: Value,
    }
    let response = Response {
        jsonrpc: "2.0",
        id,
        error: json!({ "code": code.0, "message": message }),
    };
    // Cannot fail: every key is a string and every value plain JSON.
    let mut line = serde_json::to_vec(&response).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn run<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    #[test]
    fn lines_rmcp_would_skip_are_unreadable_and_the_rest_go_on() {
        for line in [
            &b"{not json\n"[..],
            b"[1, 2\n",
            b"\xff\xfe\n",
            b"this is not json",
        ] {
            assert!(matches!(check(line), Check::Unreadable(_)), "{line:?}");
        }
        for line in [&b"\n"[..], b"  \r\n", b"\xEF\xBB\xBF\n"] {
            assert_eq!(check(line), Check::Blank, "{line:?}");
        }
        // Valid JSON, even when not a message, is rmcp's to answer (-32600).
        let valid: [&[u8]; 5] = [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n",
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
            b"{\"foo\": 1}\n",
            b"42\n",
            b"[]\n",
        ];
        for line in valid {
            assert_eq!(check(line), Check::Forward, "{line:?}");
        }
    }

    #[test]
    fn a_line_over_the_limit_is_counted_and_dropped_whole() {
        let mut input = vec![b'x'; 1000];
        input.extend_from_slice(b"\r\n{}\n0123456789\r\n01234567890\n");
        input.extend(vec![b'y'; 99]);
        input.extend_from_slice(b"\r\rz");
        for capacity in [1, 3, 8, 4096] {
            let mut reader = BufReader::with_capacity(capacity, &input[..]);
            let mut line = Vec::new();
            run(async {
                let mut reads = Vec::new();
                loop {
                    let read = read_line(&mut reader, &mut line, 10).await.expect("read");
                    if read == Read::Eof {
                        break;
                    }
                    reads.push((read, line.clone()));
                }
                assert_eq!(
                    reads,
                    vec![
                        (Read::TooLong(1000), Vec::new()),
                        (Read::Line, b"{}\n".to_vec()),
                        (Read::Line, b"0123456789\r\n".to_vec()),
                        (Read::TooLong(11), Vec::new()),
                        (Read::TooLong(102), Vec::new()),
                    ],
                    "{capacity}"
                );
            });
        }
    }

    #[test]
    fn a_message_with_a_key_twice_is_refused_with_its_id() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories","command":"delete"}}}"#;
        assert_eq!(
            check(line),
            Check::Duplicate {
                key: "\"command\"".into(),
                id: json!(7)
            }
        );
        let line = br#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#;
        assert_eq!(
            check(line),
            Check::Duplicate {
                key: "\"id\"".into(),
                id: Value::Null
            }
        );
    }

    #[test]
    fn unreadable_lines_are_answered_and_the_rest_reach_rmcp() {
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        let mut input = b"{not json\n\n\xff\n".to_vec();
        input.extend_from_slice(ping);
        let (stdout, mut client) = tokio::io::duplex(PIPE_BYTES);
        let (forwarded, written) = run(async move {
            let ((mut rmcp_reads, mut rmcp_writes), relay) =
                filter_pipes(std::io::Cursor::new(input), stdout, 1 << 20);
            let relay = tokio::spawn(relay);
            // Stands in for rmcp: reads to EOF, then answers and hangs up.
            let mut forwarded = Vec::new();
            rmcp_reads.read_to_end(&mut forwarded).await.expect("read");
            rmcp_writes
                .write_all(b"{\"reply\":1}\n")
                .await
                .expect("write");
            drop(rmcp_writes);
            relay.await.expect("relay").expect("written");
            let mut written = Vec::new();
            client.read_to_end(&mut written).await.expect("read");
            (forwarded, written)
        });
        assert_eq!(forwarded, ping);
        let written = String::from_utf8(written).expect("utf-8");
        let lines: Vec<Value> = written
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 3, "{written}");
        for (error, line) in lines[..2].iter().zip([1, 3]) {
            assert_eq!(error["id"], Value::Null);
            assert_eq!(error["error"]["code"], -32700);
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("stdin line {line} ")),
                "{message}"
            );
            assert!(message.contains(EXAMPLE), "{message}");
        }
        assert_eq!(lines[2], json!({"reply": 1}));
    }
}
