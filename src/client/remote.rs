//! `RemoteClient`: a store that a `mnemo serve` process holds, reached over its HTTP API.
//!
//! Compiled with the `serve` cargo feature. Requests go through `ureq`, a small blocking HTTP/1.1
//! client (built without TLS: a server is on loopback, or behind a proxy that terminates TLS),
//! which keeps connections alive between calls. Every request carries the bearer token, and the
//! acting agent in `X-Mnemo-Agent` when one is named (the operator may name any; an agent token
//! acts only as its own agent, so leave it out there).
//!
//! A failure to reach the server is told apart from a connection that broke after the request
//! was sent ([`RemoteError::is_unreachable`]): only the first is certain to have written
//! nothing, so only it may be retried blindly.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::store::data_dir::check_store_name;

mod admin;
pub(crate) mod lane;

/// A server's answer to a memory call: the `tool_result` JSON text, and what failed after the
/// call was answered, when something did (see
/// [`Answered`](crate::client::store_failures::Answered)).
#[derive(Debug)]
pub(crate) struct Told {
    /// The `tool_result` JSON text.
    pub(crate) body: Vec<u8>,
    /// What failed after the answer.
    pub(crate) after: Option<String>,
}
mod reads;
mod tool;

pub(crate) use tool::Answering;

/// How long a connection attempt waits.
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// How long a request waits for the server's answer (its headers, and then its whole body)
/// unless `MNEMO_ANSWER_WAIT` says otherwise: long enough for a large import or a busy disk,
/// short enough that a stopped or wedged server fails the call instead of hanging it.
pub const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// The environment variable that sets [`ANSWER_WAIT`] for this process, in seconds.
pub const ANSWER_WAIT_VAR: &str = "MNEMO_ANSWER_WAIT";

/// The wait for an answer: `MNEMO_ANSWER_WAIT` seconds (a positive number, fractions allowed)
/// when set to one, else [`ANSWER_WAIT`]; an error that says what is valid otherwise.
fn answer_wait() -> Result<Duration, String> {
    let Some(raw) = std::env::var_os(ANSWER_WAIT_VAR) else {
        return Ok(ANSWER_WAIT);
    };
    let text = raw.to_string_lossy();
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err(format!(
            "{ANSWER_WAIT_VAR}={text:?} is not a number of seconds between 0 and 86400 (such as 30 or 0.5); unset it to wait the default {} s",
            ANSWER_WAIT.as_secs()
        )),
    }
}

/// Why a call to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// No connection could be made: nothing was sent, so nothing was written.
    #[error(
        "cannot reach the mnemo server at {url} ({why}); check that it runs (`mnemo serve`) and that the URL names it"
    )]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// What the connection attempt met.
        why: String,
    },

    /// The server took the request but did not answer within the wait (`MNEMO_ANSWER_WAIT`,
    /// default `ANSWER_WAIT`): it is stopped, wedged or overloaded. The call may or may not
    /// have been applied.
    #[error(
        "the mnemo server at {url} did not answer within {waited_secs} s (is it stopped or overloaded?); the call may or may not have been applied, so check (`mnemo log`) before you retry, or wait longer with {ANSWER_WAIT_VAR}=SECONDS"
    )]
    Unanswered {
        /// The server's base URL.
        url: String,
        /// How long the request waited, in seconds.
        waited_secs: f64,
    },

    /// The process at a server file's address took the challenge that proves a server serves
    /// the store (see `discovery`) and did not answer within the wait: it is stopped, wedged or
    /// overloaded. Nothing else was sent to it, so nothing was applied.
    #[error(
        "the mnemo server at {url} did not answer within {waited_secs} s when asked to prove that it serves this store (is it stopped or overloaded?); nothing was sent to it, so retry once it answers, or wait longer with {ANSWER_WAIT_VAR}=SECONDS"
    )]
    Unproven {
        /// The server's base URL.
        url: String,
        /// How long the challenge waited, in seconds.
        waited_secs: f64,
    },

    /// The connection broke after the request was sent: the call may or may not have been
    /// applied.
    #[error(
        "the connection to the mnemo server at {url} broke before it answered ({why}); the call may or may not have been applied, so check before you retry"
    )]
    Interrupted {
        /// The server's base URL.
        url: String,
        /// What broke.
        why: String,
    },

    /// The server answered with an error status.
    #[error("the mnemo server at {url} refused the request ({status}): {reason}")]
    Refused {
        /// The server's base URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's reason (its `{"error": ...}`), or the body.
        reason: String,
    },

    /// The answer could not be read as the route's document.
    #[error(
        "the mnemo server at {url} answered with a document this client cannot read ({why}); check that it is a mnemo server of the same version"
    )]
    Protocol {
        /// The server's base URL.
        url: String,
        /// What was wrong.
        why: String,
    },
}

impl RemoteError {
    /// Whether the request never reached a server (so it wrote nothing, and a retry is safe).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RemoteError::Unreachable { .. })
    }

    /// Whether the server is gone: unreachable, or the connection broke mid-call.
    pub fn is_disconnected(&self) -> bool {
        matches!(
            self,
            RemoteError::Unreachable { .. } | RemoteError::Interrupted { .. }
        )
    }

    /// The HTTP status of a refused request.
    pub fn status(&self) -> Option<u16> {
        match self {
            RemoteError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A request to one of the server's admin routes, for [`RemoteClient::admin`].
#[derive(Clone, Copy, Debug)]
pub enum AdminRequest<'a> {
    /// `POST` of a JSON body to `route`.
    Post {
        /// The route, such as `/v1/acl`.
        route: &'a str,
        /// The JSON body.
        body: &'a Value,
    },
    /// `DELETE` of `route`, such as `/v1/tokens/ID`.
    Delete {
        /// The route.
        route: &'a str,
    },
}

impl From<RemoteError> for crate::Error {
    fn from(e: RemoteError) -> crate::Error {
        crate::Error::Server {
            reason: e.to_string(),
            unreachable: e.is_unreachable(),
            status: e.status(),
        }
    }
}

/// The longest pause between tries of a request the server answered 503.
const BUSY_PAUSE_MAX: Duration = Duration::from_millis(200);

/// A client of a `mnemo serve` process: the memory tool, the agent's memory files, and the
/// operator's read routes. `Send + Sync`, cheap to clone (clones share connections).
#[derive(Clone)]
pub struct RemoteClient {
    url: String,
    token: String,
    agent: Option<String>,
    /// The store of a `--data` server every request goes to (under `/v1/stores/NAME/`).
    store: Option<String>,
    http: ureq::Agent,
    /// How long a request waits for the answer.
    wait: Duration,
    /// The server's local socket, for the memory tool's calls (see [`lane`]).
    lane: Option<Arc<lane::Lane>>,
}

impl std::fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteClient")
            .field("url", &self.url)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl RemoteClient {
    /// A client of the server at `url` (such as `http://127.0.0.1:41234`) presenting `token`.
    /// Makes no request: the first call finds out whether the server is there.
    ///
    /// Each request waits [`RemoteClient::answer_wait`] for the answer, then fails with
    /// [`RemoteError::Unanswered`].
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> RemoteClient {
        let wait = RemoteClient::answer_wait().unwrap_or(ANSWER_WAIT);
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_WAIT))
            .timeout_recv_response(Some(wait))
            .timeout_recv_body(Some(wait))
            .build();
        RemoteClient {
            url: url.into().trim_end_matches('/').to_string(),
            token: token.into(),
            agent: None,
            store: None,
            http: ureq::Agent::new_with_config(config),
            wait,
            lane: None,
        }
    }

    /// The same client, sending the memory tool's calls to the server's local socket `name`
    /// (see [`lane`]), which must prove that it serves the store directory `store_dir`.
    pub(crate) fn with_lane(mut self, name: &str, store_dir: &std::path::Path) -> RemoteClient {
        self.lane = Some(Arc::new(lane::Lane::new(name.to_string(), store_dir)));
        self
    }

    /// How long this process's clients wait for an answer: `MNEMO_ANSWER_WAIT` seconds when
    /// set, else `ANSWER_WAIT`. An unusable value is an error that says what is valid (a
    /// client made meanwhile waits the default); the `mnemo` binary refuses to start with one.
    pub fn answer_wait() -> Result<Duration, String> {
        answer_wait()
    }

    /// The same server and token, acting as `agent` (sent as `X-Mnemo-Agent`, or
    /// percent-encoded as `X-Mnemo-Agent-Encoded` when no header could carry it as it is).
    pub fn with_agent(&self, agent: impl Into<String>) -> RemoteClient {
        RemoteClient {
            agent: Some(agent.into()),
            ..self.clone()
        }
    }

    /// The same server, token and agent, sending every request to the store `name` of a
    /// `mnemo serve --data` server: `/v1/X` becomes `/v1/stores/NAME/X`, and `/mcp`
    /// `/v1/stores/NAME/mcp`. `Err` (what a name is) for a name that is not one
    /// ([`DataDir::check_name`](crate::DataDir::check_name)).
    pub fn in_store(&self, name: &str) -> Result<RemoteClient, String> {
        check_store_name(name)?;
        Ok(RemoteClient {
            store: Some(name.to_string()),
            // A local socket serves the store of a `--db` server only.
            lane: None,
            ..self.clone()
        })
    }

    /// The store of a `--data` server this client's requests go to, if any.
    pub fn store(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// Where `route` (such as `/v1/memory`) is for this client: on the server, or in its store.
    fn target(&self, route: &str) -> String {
        match (&self.store, route.strip_prefix("/v1")) {
            (Some(store), Some(rest)) => format!("{}/v1/stores/{store}{rest}", self.url),
            (Some(store), None) => format!("{}/v1/stores/{store}{route}", self.url),
            (None, _) => format!("{}{route}", self.url),
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether `other` reaches the same server run (the same URL and token: a server started
    /// again makes a new token, even on a port it happens to get again).
    pub(crate) fn same_server(&self, other: &RemoteClient) -> bool {
        self.url == other.url && self.token == other.token && self.store == other.store
    }

    /// The agent named in every request, if any (otherwise the token's, or the server's
    /// default agent for the operator).
    pub fn agent_id(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    fn authorize<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        request = request.header("Authorization", format!("Bearer {}", self.token));
        if let Some(agent) = &self.agent {
            let (name, value) = agent_header(agent);
            request = request.header(name, value);
        }
        request
    }

    /// Sends with `send`, again while the server answers 503 (it refused the request before
    /// doing anything: every open store of a `--data` server busy, the token table unreadable
    /// for a moment), waiting longer each time, for as long as an answer is waited for.
    fn retrying(
        &self,
        send: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            let sent = send();
            let busy = sent.as_ref().is_ok_and(|r| r.status().as_u16() == 503);
            if !busy || started.elapsed() + pause > self.wait {
                return sent;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(BUSY_PAUSE_MAX);
        }
    }

    fn get(&self, route: &str, query: &[(&str, String)]) -> Result<Vec<u8>, RemoteError> {
        let sent = self.retrying(|| {
            let mut request = self.http.get(self.target(route));
            for (key, value) in query {
                request = request.query(key, value);
            }
            self.authorize(request).call()
        });
        self.answer(sent)
    }

    /// Posts `body` to `route` and returns the answer's body, with what failed after the answer
    /// (its [`AFTER_HEADER`](crate::client::store_failures::AFTER_HEADER)).
    fn post_told(
        &self,
        route: &str,
        query: &[(&str, String)],
        body: &[u8],
    ) -> Result<Told, RemoteError> {
        let sent = self.retrying(|| {
            let mut request = self
                .http
                .post(self.target(route))
                .header("Content-Type", "application/json");
            for (key, value) in query {
                request = request.query(key, value);
            }
            self.authorize(request).send(body)
        });
        let after = sent.as_ref().ok().and_then(|response| {
            let value = response
                .headers()
                .get(crate::client::store_failures::AFTER_HEADER)?;
            Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
        });
        let body = self.answer(sent)?;
        Ok(Told { body, after })
    }

    /// The status and body of an answer, whatever the status.
    fn answer_whole(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<(u16, Vec<u8>), RemoteError> {
        let response = sent.map_err(|e| self.failure(e))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        response
            .into_body()
            .into_reader()
            .read_to_end(&mut body)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => RemoteError::Unanswered {
                    url: self.url.clone(),
                    waited_secs: self.wait.as_secs_f64(),
                },
                _ => RemoteError::Interrupted {
                    url: self.url.clone(),
                    why: e.to_string(),
                },
            })?;
        Ok((status, body))
    }

    /// The body of a 2xx answer; anything else as an error.
    fn answer(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Vec<u8>, RemoteError> {
        let (status, body) = self.answer_whole(sent)?;
        self.accepted(status, body)
    }

    /// `body` when `status` is 2xx; else the refusal, with the server's reason.
    fn accepted(&self, status: u16, body: Vec<u8>) -> Result<Vec<u8>, RemoteError> {
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let reason = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        Err(RemoteError::Refused {
            url: self.url.clone(),
            status,
            reason,
        })
    }

    fn failure(&self, e: ureq::Error) -> RemoteError {
        let url = self.url.clone();
        let why = e.to_string();
        let never_sent = match &e {
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
            ureq::Error::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::NotFound
            ),
            ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => true,
            ureq::Error::Timeout(_) => {
                return RemoteError::Unanswered {
                    url,
                    waited_secs: self.wait.as_secs_f64(),
                };
            }
            _ => false,
        };
        if never_sent {
            RemoteError::Unreachable { url, why }
        } else {
            RemoteError::Interrupted { url, why }
        }
    }

    fn json(&self, bytes: &[u8]) -> Result<Value, RemoteError> {
        serde_json::from_slice(bytes).map_err(|e| self.protocol(e.to_string()))
    }

    fn protocol(&self, why: String) -> RemoteError {
        RemoteError::Protocol {
            url: self.url.clone(),
            why,
        }
    }

    /// One JSON value of type `T`.
    fn typed<T: serde::de::DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, RemoteError> {
        serde_json::from_slice(bytes).map_err(|e| self.protocol(e.to_string()))
    }

    /// JSON lines, each a `T`.
    fn typed_lines<T: serde::de::DeserializeOwned>(
        &self,
        bytes: &[u8],
    ) -> Result<Vec<T>, RemoteError> {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|line| serde_json::from_str(line).map_err(|e| self.protocol(e.to_string())))
            .collect()
    }

    /// JSON lines.
    fn lines(&self, bytes: &[u8]) -> Result<Vec<Value>, RemoteError> {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|line| serde_json::from_str(line).map_err(|e| self.protocol(e.to_string())))
            .collect()
    }

    /// The server's answer to `challenge` on `GET /v1/identity`, asked without the token (see
    /// `discovery::ServerFile::proves`): the hex of its proof, read within the answer wait and a
    /// small size, since whatever listens at the address is not trusted yet.
    pub(crate) fn identity(&self, challenge: &str) -> Result<String, RemoteError> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_WAIT))
            .timeout_recv_response(Some(self.wait))
            .timeout_recv_body(Some(self.wait))
            .build();
        let sent = ureq::Agent::new_with_config(config)
            .get(format!("{}/v1/identity", self.url))
            .query("challenge", challenge)
            .call();
        let response = sent.map_err(|e| self.failure(e))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .with_config()
            .limit(1024)
            .read_to_string()
            .map_err(|e| self.failure(e))?;
        if status != 200 {
            return Err(RemoteError::Refused {
                url: self.url.clone(),
                status,
                reason: body,
            });
        }
        Ok(body)
    }

    /// Runs a read route (`/v1/log`, `/v1/ls`, `/v1/cat`, `/v1/history`) with `query` and
    /// returns its body as the server sent it (operator only).
    pub fn read(&self, route: &str, query: &[(&str, String)]) -> Result<Vec<u8>, RemoteError> {
        self.get(route, query)
    }

    /// Runs an admin route (`POST /v1/acl`, `POST /v1/tokens`, `DELETE /v1/tokens/ID`; operator
    /// only) and returns its status and body whatever the status: a refusal's body carries
    /// the seq it was logged as, which [`RemoteError::Refused`] does not keep.
    pub(crate) fn admin(&self, change: AdminRequest<'_>) -> Result<(u16, Vec<u8>), RemoteError> {
        let sent = self.retrying(|| match &change {
            AdminRequest::Post { route, body } => {
                let request = self
                    .http
                    .post(self.target(route))
                    .header("Content-Type", "application/json");
                self.authorize(request).send(body.to_string().as_bytes())
            }
            AdminRequest::Delete { route } => {
                let request = self.http.delete(self.target(route));
                self.authorize(request).call()
            }
        });
        self.answer_whole(sent)
    }

    /// Holds a connection to the server open until this process exits (or the server stops),
    /// so that the server counts this client as connected and does not stop for `--idle-exit`
    /// meanwhile. Runs on a thread of its own and returns at once: the flag is true while the
    /// connection is open (or the server answered without attaching), and turns false when the
    /// server goes away.
    pub fn attach(&self) -> Arc<AtomicBool> {
        let attached = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&attached);
        let client = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mnemo-attach".into())
            .spawn(move || {
                // The heartbeats last as long as the server: only the headers are waited for.
                let request = client
                    .http
                    .get(client.target("/v1/attach"))
                    .config()
                    .timeout_recv_body(None)
                    .build();
                match client.authorize(request).call() {
                    Ok(response) if response.status().is_success() => {
                        // Heartbeats until the server stops or this process exits.
                        let mut sink = [0u8; 64];
                        let mut reader = response.into_body().into_reader();
                        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
                    }
                    // The server is there but does not attach this client (a token it refuses,
                    // a server without the route): it is not gone, so the flag stays up.
                    Ok(_) => return,
                    Err(_) => {}
                }
                flag.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // Without the thread the client still works; the server may then stop while it is
            // idle, and the next call finds it gone.
            attached.store(false, Ordering::SeqCst);
        }
        attached
    }
}

/// The header that names the acting agent when its id is printable ASCII with no space at
/// either end (as most are): the id itself.
pub(crate) const AGENT_HEADER: &str = "X-Mnemo-Agent";

/// The header that names any other agent id (non-ASCII, or spaces at an end, which an HTTP
/// header would lose): its UTF-8 bytes percent-encoded, every byte outside `A-Z a-z 0-9 - . _ ~`
/// as `%XX`. A request carries one of the two headers, never both.
pub(crate) const AGENT_ENCODED_HEADER: &str = "X-Mnemo-Agent-Encoded";

/// The header, and its value, that carries `agent` to the server.
pub(crate) fn agent_header(agent: &str) -> (&'static str, String) {
    let plain = !agent.starts_with(' ')
        && !agent.ends_with(' ')
        && agent.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if plain {
        return (AGENT_HEADER, agent.to_string());
    }
    let mut encoded = String::with_capacity(agent.len() * 3);
    for b in agent.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    (AGENT_ENCODED_HEADER, encoded)
}

/// The agent id an [`AGENT_ENCODED_HEADER`] value carries; an error that says what is wrong.
#[cfg(any(feature = "serve", test))]
pub(crate) fn decode_agent(value: &[u8]) -> Result<String, String> {
    const HOW: &str = "send the agent id's UTF-8 bytes with every byte outside A-Z a-z 0-9 - . _ ~ written as %XX";
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut bytes = Vec::with_capacity(value.len());
    let mut at = 0;
    while at < value.len() {
        match value[at] {
            b'%' => {
                let pair = value
                    .get(at + 1..at + 3)
                    .and_then(|pair| u8::try_from(hex(pair[0])? * 16 + hex(pair[1])?).ok());
                let Some(byte) = pair else {
                    return Err(format!(
                        "a % at byte {at} is not followed by two hex digits; {HOW}"
                    ));
                };
                bytes.push(byte);
                at += 3;
            }
            b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => {
                bytes.push(b);
                at += 1;
            }
            b => {
                return Err(format!(
                    "byte {b:#04x} at {at} must be percent-encoded; {HOW}"
                ));
            }
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("the decoded bytes are not UTF-8; {HOW}"))
}

/// The servers this process holds an attachment to (see [`RemoteClient::attach`]), each with
/// the flag that drops when the server goes away.
static ATTACHED: std::sync::Mutex<Vec<(RemoteClient, Arc<AtomicBool>)>> =
    std::sync::Mutex::new(Vec::new());

/// Keeps this process attached to `client`'s server, so that the server does not stop for
/// `--idle-exit` while the process may still call it: one attachment per server run, made by
/// the first client of it opened here.
pub(crate) fn stay_attached(client: &RemoteClient) {
    let mut attached = ATTACHED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    attached.retain(|(_, up)| up.load(Ordering::SeqCst));
    if !attached.iter().any(|(held, _)| held.same_server(client)) {
        let up = client.attach();
        attached.push((client.clone(), up));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    #[test]
    fn plain_ids_go_as_they_are_and_others_encoded() {
        assert_eq!(
            agent_header("planner-2"),
            (AGENT_HEADER, "planner-2".into())
        );
        assert_eq!(agent_header("a b"), (AGENT_HEADER, "a b".into()));
        assert_eq!(
            agent_header(" José"),
            (AGENT_ENCODED_HEADER, "%20Jos%C3%A9".into())
        );
    }

    #[test]
    fn malformed_encodings_are_refused_with_what_to_send() {
        for bad in [&b"%"[..], b"%4", b"%zz", b"a b", b"%C3", b"\xff", b"%+1"] {
            let why = decode_agent(bad).expect_err("refused");
            assert!(why.contains("%XX"), "{why}");
        }
    }

    proptest! {
        #[test]
        fn every_id_decodes_to_itself(agent in any::<String>()) {
            let (name, value) = agent_header(&agent);
            if name == AGENT_ENCODED_HEADER {
                prop_assert!(value.bytes().all(|b| b.is_ascii_graphic()));
                prop_assert_eq!(decode_agent(value.as_bytes()), Ok(agent));
            } else {
                prop_assert_eq!(value, agent);
            }
        }
    }
}
