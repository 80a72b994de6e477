//! The local socket: the memory tool of a server on this machine over a Unix socket, in frames
//! rather than HTTP requests.
//!
//! A `mnemo serve --db` on Linux also listens on an abstract Unix socket whose name is random and
//! written in the server file (`"socket"`). A client that found the server through the server file
//! ([`RemoteClient::of_server`]) sends its memory calls there: no HTTP parsing on either side and
//! no hand-off between the server's async workers, one thread of the server per connection, so a
//! call costs one wake-up each way. Every other route stays on HTTP.
//!
//! **Frames.** Each message is one frame: a kind byte, the payload's length (u32, little-endian)
//! and the payload. A connection starts with the client's [`CHALLENGE`] (hex it made), answered by
//! the server's [`PROOF`] (the same [`identity_proof`] as `GET /v1/identity`): only then does the
//! client send its [`HELLO`] (`{"token", "agent", "answering"}`), so a process that took the name
//! of a dead server learns no token. The server answers the hello with [`ANSWER`] (`{}`) or
//! [`REFUSAL`] (`{"status", "error"}`, the HTTP status and reason `POST /v1/memory` would give)
//! and then takes any number of [`CALL`]s (a request, as `POST /v1/memory`'s body) and
//! [`OVERSIZED`]s (a digest, as `POST /v1/memory/oversized`'s), answering each in order with an
//! `ANSWER` (the `tool_result` JSON) or a `REFUSAL`. An answer may come after an [`AFTER`]: what
//! failed once the call was answered (text; the `mnemo-store-failure` header over HTTP).
//!
//! **Failures.** A connection that cannot be made or proved is not an error: the call goes over
//! HTTP, which tells an unreachable server from a refusal. A call whose frame could not be
//! written on a kept connection (the server closed it) was not taken, and is sent on a new
//! one; after the frame is written, a broken connection means the call may or may not have been
//! applied ([`RemoteError::Interrupted`]), and no answer within the answer wait is
//! [`RemoteError::Unanswered`], as over HTTP.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Answering, RemoteError, Told};
use crate::store::disk::DirId;

/// The client's challenge (hex it made).
pub(crate) const CHALLENGE: u8 = 1;
/// The server's proof of the challenge.
pub(crate) const PROOF: u8 = 2;
/// The client's token, agent and settings.
pub(crate) const HELLO: u8 = 3;
/// The server's answer: `{}` to a hello, the `tool_result` JSON to a call.
pub(crate) const ANSWER: u8 = 4;
/// The server's refusal: `{"status", "error"}`.
pub(crate) const REFUSAL: u8 = 5;
/// A memory-tool request, as `POST /v1/memory`'s body.
pub(crate) const CALL: u8 = 6;
/// The digest of a request over the limit, as `POST /v1/memory/oversized`'s body.
pub(crate) const OVERSIZED: u8 = 7;
/// What failed after the call was answered (a `delete = erase` that could not erase), sent
/// before the answer it goes with.
pub(crate) const AFTER: u8 = 8;

/// The largest frame of the handshake, of a digest or of a refusal.
pub(crate) const SMALL_FRAME: u64 = 64 * 1024;

/// How long a handshake step waits.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);

/// The domain of the key [`identity_proof`] derives from the operator token.
const IDENTITY_CONTEXT: &str = "mnemo 2026-12 server identity v1";

/// What a server answers to the challenge `challenge` (hex text a client made) to prove that
/// it holds `token` and serves the store directory `dir`: hex of
/// `blake3::keyed_hash(derive_key(IDENTITY_CONTEXT, token), challenge || dev || ino)`, where
/// `dev` and `ino` are the directory's device and inode numbers (little-endian u64): for the
/// client, of the directory at the path it names, now; for the server, of the directory it has
/// open (so the server of a store moved aside, with a copy put at its path, proves nothing).
pub fn identity_proof(token: &str, challenge: &str, dir: DirId) -> blake3::Hash {
    let key = blake3::derive_key(IDENTITY_CONTEXT, token.as_bytes());
    let mut hasher = blake3::Hasher::new_keyed(&key);
    hasher.update(challenge.as_bytes());
    hasher.update(&dir.dev.to_le_bytes());
    hasher.update(&dir.ino.to_le_bytes());
    hasher.finalize()
}

/// A fresh challenge: 64 hex digits from the OS random source.
pub(crate) fn new_challenge() -> Option<String> {
    let mut nonce = [0u8; 32];
    getrandom::fill(&mut nonce).ok()?;
    Some(nonce.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes one frame.
pub(crate) fn write_frame(to: &mut impl Write, kind: u8, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| std::io::Error::other("a frame holds at most 4 GiB"))?;
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.push(kind);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(payload);
    to.write_all(&frame)
}

/// What reading a frame met.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole frame: its kind and payload.
    Whole(u8, Vec<u8>),
    /// The other side closed the connection before a frame began.
    Closed,
    /// A frame whose length (given) is over the limit (its payload is not read).
    TooLong(u64),
}

/// Reads one frame whose payload is at most `max` bytes.
pub(crate) fn read_frame(from: &mut impl Read, max: u64) -> std::io::Result<Frame> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match from.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(Frame::Closed),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u64::from(u32::from_le_bytes([head[1], head[2], head[3], head[4]]));
    if len > max {
        return Ok(Frame::TooLong(len));
    }
    let mut payload = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
    from.read_exact(&mut payload)?;
    Ok(Frame::Whole(head[0], payload))
}

/// The abstract socket address `name`.
#[cfg(target_os = "linux")]
pub(crate) fn address(name: &str) -> std::io::Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
}

/// A connection that proved the server and said hello, and what it said.
#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    /// The hello's agent and settings, which a call's must equal to use this connection.
    agent: Option<String>,
    answering: Option<Answering>,
}

impl Conn {
    fn said(&self, hello: &Hello<'_>) -> bool {
        self.agent.as_deref() == hello.agent && self.answering.as_ref() == hello.answering
    }
}

/// The local socket of one server run: its name, the store directory it must prove, and the
/// connections kept between calls (shared by a client's clones).
#[derive(Debug)]
pub(crate) struct Lane {
    name: String,
    store_dir: PathBuf,
    kept: Mutex<Vec<Conn>>,
}

/// At most this many idle connections are kept per lane.
const KEPT_MAX: usize = 16;

impl Lane {
    /// The lane to the socket `name` of the server of the store at `store_dir`.
    pub(crate) fn new(name: String, store_dir: &Path) -> Lane {
        Lane {
            name,
            store_dir: store_dir.to_path_buf(),
            kept: Mutex::new(Vec::new()),
        }
    }

    /// Sends one frame of `kind` and returns the server's answer: `None` when no connection
    /// could be made and proved (the caller goes over HTTP), else what the call met.
    pub(crate) fn call(
        &self,
        url: &str,
        wait: Duration,
        hello: &Hello<'_>,
        kind: u8,
        payload: &[u8],
    ) -> Option<Result<Told, RemoteError>> {
        let mut conn = match self.take(hello) {
            Some(conn) => conn,
            None => self.open(hello)?,
        };
        if write_frame(&mut conn.stream, kind, payload).is_err() {
            // The server closed a kept connection: the frame was not taken. A new one.
            conn = self.open(hello)?;
            if write_frame(&mut conn.stream, kind, payload).is_err() {
                return None;
            }
        }
        let interrupted = |why: String| RemoteError::Interrupted {
            url: url.to_string(),
            why,
        };
        let _ = conn.stream.set_read_timeout(Some(wait));
        let mut after = None;
        let mut frame = read_frame(&mut conn.stream, u64::from(u32::MAX));
        if let Ok(Frame::Whole(AFTER, text)) = &frame {
            after = Some(String::from_utf8_lossy(text).into_owned());
            frame = read_frame(&mut conn.stream, u64::from(u32::MAX));
        }
        let answer = match frame {
            Ok(Frame::Whole(ANSWER, body)) => Ok(Told { body, after }),
            Ok(Frame::Whole(REFUSAL, body)) => Err(refused(url, &body)),
            Ok(Frame::Whole(other, _)) => {
                return Some(Err(RemoteError::Protocol {
                    url: url.to_string(),
                    why: format!("a frame of kind {other} where an answer belongs"),
                }));
            }
            Ok(Frame::Closed) => {
                return Some(Err(interrupted(
                    "the server closed the local socket".into(),
                )));
            }
            Ok(Frame::TooLong(len)) => {
                return Some(Err(RemoteError::Protocol {
                    url: url.to_string(),
                    why: format!("an answer of {len} bytes, over any frame's size"),
                }));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Some(Err(RemoteError::Unanswered {
                    url: url.to_string(),
                    waited_secs: wait.as_secs_f64(),
                }));
            }
            Err(e) => return Some(Err(interrupted(e.to_string()))),
        };
        self.keep(conn);
        Some(answer)
    }

    fn take(&self, hello: &Hello<'_>) -> Option<Conn> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let at = kept.iter().rposition(|conn| conn.said(hello))?;
        Some(kept.swap_remove(at))
    }

    fn keep(&self, conn: Conn) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT_MAX {
            kept.push(conn);
        }
    }

    /// A new connection that proved the server and was accepted by it; `None` if anything
    /// failed (the call goes over HTTP, which says why).
    #[cfg(target_os = "linux")]
    fn open(&self, hello: &Hello<'_>) -> Option<Conn> {
        let mut stream = UnixStream::connect_addr(&address(&self.name).ok()?).ok()?;
        stream.set_read_timeout(Some(HANDSHAKE_WAIT)).ok()?;
        let challenge = new_challenge()?;
        write_frame(&mut stream, CHALLENGE, challenge.as_bytes()).ok()?;
        let Frame::Whole(PROOF, proof) = read_frame(&mut stream, SMALL_FRAME).ok()? else {
            return None;
        };
        let expected = identity_proof(hello.token, &challenge, DirId::of(&self.store_dir).ok()?);
        let proof = blake3::Hash::from_hex(std::str::from_utf8(&proof).ok()?.trim()).ok()?;
        if proof != expected {
            return None;
        }
        write_frame(&mut stream, HELLO, hello.to_json().to_string().as_bytes()).ok()?;
        match read_frame(&mut stream, SMALL_FRAME).ok()? {
            Frame::Whole(ANSWER, _) => Some(Conn {
                stream,
                agent: hello.agent.map(str::to_string),
                answering: hello.answering.cloned(),
            }),
            _ => None,
        }
    }

    /// Without abstract sockets there is no lane.
    #[cfg(not(target_os = "linux"))]
    fn open(&self, _hello: &Hello<'_>) -> Option<Conn> {
        None
    }
}

/// A refusal frame as the error HTTP's status and reason would give.
fn refused(url: &str, body: &[u8]) -> RemoteError {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    RemoteError::Refused {
        url: url.to_string(),
        status: value["status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(500),
        reason: value["error"].as_str().map_or_else(
            || String::from_utf8_lossy(body).into_owned(),
            str::to_string,
        ),
    }
}

/// What a connection's hello says: the token, the agent named (if any) and the settings the
/// calling tool server answers with (if it forwards as one).
#[derive(Debug)]
pub(crate) struct Hello<'a> {
    pub(crate) token: &'a str,
    pub(crate) agent: Option<&'a str>,
    pub(crate) answering: Option<&'a Answering>,
}

impl Hello<'_> {
    fn settings(&self) -> Value {
        match self.answering {
            Some(answering) => answering
                .query()
                .into_iter()
                .map(|(key, value)| (key.to_string(), Value::String(value)))
                .collect::<serde_json::Map<_, _>>()
                .into(),
            None => Value::Null,
        }
    }

    /// The hello's frame payload.
    fn to_json(&self) -> Value {
        json!({"token": self.token, "agent": self.agent, "answering": self.settings()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_and_long_ones_are_told() {
        let mut wire = Vec::new();
        write_frame(&mut wire, CALL, b"{\"command\":\"view\"}").expect("write");
        write_frame(&mut wire, OVERSIZED, &[7u8; 100]).expect("write");
        let mut from = &wire[..];
        match read_frame(&mut from, 1000).expect("read") {
            Frame::Whole(CALL, body) => assert_eq!(body, b"{\"command\":\"view\"}"),
            other => panic!("{other:?}"),
        }
        match read_frame(&mut from, 99).expect("read") {
            Frame::TooLong(100) => {}
            other => panic!("{other:?}"),
        }
        let mut cut = &wire[..3];
        assert!(
            read_frame(&mut cut, 1000).is_err(),
            "a cut header is an error"
        );
        let mut none: &[u8] = &[];
        assert!(matches!(read_frame(&mut none, 1000), Ok(Frame::Closed)));
    }
}
