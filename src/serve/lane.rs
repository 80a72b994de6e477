//! The local socket's server side: an abstract Unix socket beside the HTTP listener of a
//! `mnemo serve --db` on Linux, its name in the server file, answering the memory tool's calls
//! in frames (the frames and the handshake are described in `remote::lane`).
//!
//! One thread per connection, blocking: it reads a frame, answers it on the spot and writes the
//! answer, so a call costs the server one wake-up, with no HTTP to parse and no hand-off between
//! the async runtime's threads. What a call is checked against is what `POST /v1/memory` checks:
//! the token (again on every call, so a revoked agent token stops at its next call), the agent it
//! may act as, the settings of the calling tool server, the request limit. A connection
//! proves the server before the client sends its token; one that has not said hello within
//! [`HANDSHAKE_WAIT`] is closed, and at most [`MAX_CONNECTIONS`] are open at once (past that a
//! new one is closed at once, and its client goes over HTTP).
//!
//! An abstract socket is open to every local user, as the loopback port is; neither lets
//! anyone in without the token. On a stop the listener closes, every connection's reading side
//! is shut (a call under way still answers), and the threads are waited for, up to the grace.

use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header::AUTHORIZATION};
use serde::Deserialize;
use serde_json::json;

use super::Shared;
use super::clients::{answer_oversized, is_challenge};
use super::routes::settings_differ;
use crate::client::remote::lane::{
    AFTER, ANSWER, CALL, CHALLENGE, Frame, HELLO, OVERSIZED, PROOF, REFUSAL, SMALL_FRAME,
    identity_proof, read_frame, write_frame,
};

/// How long a new connection has to prove the server and say hello.
pub const HANDSHAKE_WAIT: Duration = Duration::from_secs(30);

/// The most connections open at once.
pub const MAX_CONNECTIONS: usize = 256;

/// A bound socket, not yet answering.
#[derive(Debug)]
pub(crate) struct Bound {
    name: String,
    listener: UnixListener,
}

/// A fresh abstract socket with a random name (`mnemo-` and 32 hex digits).
#[cfg(target_os = "linux")]
pub(crate) fn bind() -> std::io::Result<Bound> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(std::io::Error::other)?;
    let name: String = std::iter::once("mnemo-".to_string())
        .chain(nonce.iter().map(|b| format!("{b:02x}")))
        .collect();
    let listener = UnixListener::bind_addr(&crate::client::remote::lane::address(&name)?)?;
    Ok(Bound { name, listener })
}

/// No abstract sockets here: no local socket (clients use HTTP).
#[cfg(not(target_os = "linux"))]
pub(crate) fn bind() -> std::io::Result<Bound> {
    Err(std::io::ErrorKind::Unsupported.into())
}

impl Bound {
    /// The socket's name, for the server file.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Answers connections on a thread of its own until [`Running::stop`].
    pub(crate) fn run(self, shared: Arc<Shared>) -> std::io::Result<Running> {
        let open = Arc::new(Open::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let accepting = {
            let open = Arc::clone(&open);
            let stopping = Arc::clone(&stopping);
            let listener = self.listener;
            std::thread::Builder::new()
                .name("mnemo-socket".into())
                .spawn(move || accept(&listener, &shared, &open, &stopping))?
        };
        Ok(Running {
            name: self.name,
            stopping,
            accepting,
            open,
        })
    }
}

/// The open connections: a handle on each (to shut it on a stop) and their threads.
#[derive(Debug, Default)]
struct Open {
    next: AtomicU64,
    streams: Mutex<HashMap<u64, UnixStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Open {
    fn count(&self) -> usize {
        self.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

fn accept(listener: &UnixListener, shared: &Arc<Shared>, open: &Arc<Open>, stopping: &AtomicBool) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else {
            // Out of descriptors: wait a moment rather than spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if open.count() >= MAX_CONNECTIONS {
            continue;
        }
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let id = open.next.fetch_add(1, Ordering::SeqCst);
        open.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, handle);
        let serving = {
            let shared = Arc::clone(shared);
            let open = Arc::clone(open);
            std::thread::Builder::new()
                .name("mnemo-socket".into())
                .spawn(move || {
                    let _ = serve(stream, &shared);
                    open.streams
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&id);
                })
        };
        let mut threads = open.threads.lock().unwrap_or_else(PoisonError::into_inner);
        threads.retain(|thread| !thread.is_finished());
        match serving {
            Ok(thread) => threads.push(thread),
            Err(_) => {
                open.streams
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
            }
        }
    }
}

/// The local socket answering.
#[derive(Debug)]
pub(crate) struct Running {
    name: String,
    stopping: Arc<AtomicBool>,
    accepting: JoinHandle<()>,
    open: Arc<Open>,
}

impl Running {
    /// Stops accepting, shuts the reading side of every connection (a call under way answers),
    /// and waits up to `grace` for the connections' threads.
    pub(crate) fn stop(self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the stop.
        #[cfg(target_os = "linux")]
        if let Ok(address) = crate::client::remote::lane::address(&self.name) {
            let _ = UnixStream::connect_addr(&address);
        }
        let _ = self.accepting.join();
        for stream in self
            .open
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            let _ = stream.shutdown(std::net::Shutdown::Read);
        }
        let deadline = Instant::now() + grace;
        let threads = std::mem::take(
            &mut *self
                .open
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for thread in threads {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// A connection's hello.
#[derive(Deserialize)]
struct Hello {
    token: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    answering: Option<HashMap<String, String>>,
}

/// Writes a refusal frame.
fn refuse(stream: &mut UnixStream, status: StatusCode, why: &str) -> std::io::Result<()> {
    let body = json!({"status": status.as_u16(), "error": why}).to_string();
    write_frame(stream, REFUSAL, body.as_bytes())
}

/// Serves one connection: the handshake, then calls until the client closes it.
fn serve(mut stream: UnixStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(HANDSHAKE_WAIT))?;
    let Frame::Whole(CHALLENGE, challenge) = read_frame(&mut stream, SMALL_FRAME)? else {
        return Ok(());
    };
    let challenge = String::from_utf8_lossy(&challenge).into_owned();
    if !is_challenge(&challenge) {
        return refuse(
            &mut stream,
            StatusCode::BAD_REQUEST,
            "the challenge must be 1 to 128 hex digits",
        );
    }
    let dir = match shared.client().store_dir_id() {
        Ok(dir) => dir,
        Err(e) => {
            let why = format!("the store directory cannot be read now ({e}); retry");
            return refuse(&mut stream, StatusCode::SERVICE_UNAVAILABLE, &why);
        }
    };
    let proof = identity_proof(shared.operator_token(), &challenge, dir);
    write_frame(&mut stream, PROOF, proof.to_hex().as_bytes())?;
    let Frame::Whole(HELLO, hello) = read_frame(&mut stream, SMALL_FRAME)? else {
        return Ok(());
    };
    let hello: Hello = match serde_json::from_slice(&hello) {
        Ok(hello) => hello,
        Err(e) => {
            let why = format!("the hello is not {{\"token\", \"agent\", \"answering\"}} ({e})");
            return refuse(&mut stream, StatusCode::BAD_REQUEST, &why);
        }
    };
    let headers = match headers(&hello) {
        Ok(headers) => headers,
        Err(why) => return refuse(&mut stream, StatusCode::BAD_REQUEST, &why),
    };
    if let Err(refusal) = shared.caller(&headers) {
        let (status, why) = refusal.status_and_reason();
        return refuse(&mut stream, status, &why);
    }
    if let Some(why) = settings_differ(shared, &hello.answering.unwrap_or_default()) {
        return refuse(&mut stream, StatusCode::CONFLICT, &why);
    }
    write_frame(&mut stream, ANSWER, b"{}")?;
    stream.set_read_timeout(None)?;
    let limit = shared.max_request_bytes();
    loop {
        let (kind, body) = match read_frame(&mut stream, limit.max(SMALL_FRAME))? {
            Frame::Closed => return Ok(()),
            Frame::Whole(kind, body) => (kind, body),
            Frame::TooLong(len) => {
                let refusal = super::Refusal::TooLarge { bytes: len, limit };
                let (status, why) = refusal.status_and_reason();
                return refuse(&mut stream, status, &why);
            }
        };
        let _in_flight = shared.activity.begin();
        // The token again, as each HTTP request's: a revoked agent token stops here.
        let caller = match shared.caller(&headers) {
            Ok(caller) => caller,
            Err(refusal) => {
                let (status, why) = refusal.status_and_reason();
                return refuse(&mut stream, status, &why);
            }
        };
        let mut after = None;
        let answered = match kind {
            CALL if body.len() as u64 > limit => {
                let refusal = super::Refusal::TooLarge {
                    bytes: body.len() as u64,
                    limit,
                };
                Err(refusal.status_and_reason())
            }
            CALL => shared
                .tool_for(&caller.agent)
                .map_err(|why| (StatusCode::BAD_REQUEST, why))
                .and_then(|tool| {
                    let told = tool.handle_bytes_told(&body);
                    after = told.after;
                    serde_json::to_vec(&told.result).map_err(|e| {
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("the store failed ({e}); retry"),
                        )
                    })
                }),
            OVERSIZED => answer_oversized(shared, &caller.agent, &body).map(String::into_bytes),
            other => {
                let why = format!(
                    "a frame of kind {other} where a call ({CALL}) or a digest ({OVERSIZED}) belongs"
                );
                return refuse(&mut stream, StatusCode::BAD_REQUEST, &why);
            }
        };
        match answered {
            Ok(answer) => {
                // What failed after the answer goes before it, in a frame of its own.
                if let Some(after) = after.take() {
                    write_frame(&mut stream, AFTER, after.as_bytes())?;
                }
                write_frame(&mut stream, ANSWER, &answer)?
            }
            Err((status, why)) => refuse(&mut stream, status, &why)?,
        }
    }
}

/// The HTTP headers the hello stands for, which the gate's checks read.
fn headers(hello: &Hello) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&format!("Bearer {}", hello.token))
        .map_err(|_| "the token is not header text".to_string())?;
    headers.insert(AUTHORIZATION, bearer);
    if let Some(agent) = &hello.agent {
        let (name, value) = crate::client::remote::agent_header(agent);
        let name = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|_| "the agent header has no name".to_string())?;
        headers.insert(
            name,
            HeaderValue::from_str(&value)
                .map_err(|_| "the agent is not header text".to_string())?,
        );
    }
    Ok(headers)
}
