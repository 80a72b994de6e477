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

use serde_json::{Value, json};

use crate::data_dir::check_store_name;
use crate::event::{InputDigest, Seq};
use crate::log::{Durability, Head};
use crate::paths::MemPath;
use crate::policy::{Access, Grant, Policy};
use crate::projection::{MEMORY_TAG, MemoryRecord};
use crate::protocol::{
    FileDiff, HistoryEvent, Listing, LoggedEvent, ShownEvent, TokenInfo, VerifyReport,
};
use crate::tool::{Limits, Profile};
use crate::verify::Report;
use crate::writer::Receipt;

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
        }
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
    /// ([`check_store_name`]).
    pub fn in_store(&self, name: &str) -> Result<RemoteClient, String> {
        check_store_name(name)?;
        Ok(RemoteClient {
            store: Some(name.to_string()),
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

    fn post(
        &self,
        route: &str,
        query: &[(&str, String)],
        body: &[u8],
    ) -> Result<Vec<u8>, RemoteError> {
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
        self.answer(sent)
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

    /// Answers one memory-tool request (a `tool_use` block or a bare input, as JSON text or
    /// any bytes `mnemo tool` might read on a line) and returns the `tool_result` JSON text,
    /// byte for byte what the server's [`MnemoMemoryToolServer`](crate::MnemoMemoryToolServer)
    /// made.
    pub fn memory_bytes(&self, request: &[u8]) -> Result<Vec<u8>, RemoteError> {
        self.post("/v1/memory", &[], request)
    }

    /// [`memory_bytes`](Self::memory_bytes) for a value: the `tool_result` block.
    pub fn handle(&self, block: &Value) -> Result<Value, RemoteError> {
        let answer = self.memory_bytes(block.to_string().as_bytes())?;
        self.json(&answer)
    }

    /// Records a request over the size limit, which was never held whole, as its digest, and
    /// returns the refusal's `tool_result` JSON text (as `mnemo tool` answers such a line).
    pub fn oversized(&self, digest: &InputDigest) -> Result<Vec<u8>, RemoteError> {
        let body = serde_json::to_vec(digest).map_err(|e| self.protocol(e.to_string()))?;
        self.post("/v1/memory/oversized", &[], &body)
    }

    /// [`memory_bytes`](Self::memory_bytes) for a tool server that answers with `answering`:
    /// a server that answers with other settings refuses the call (409) and records nothing.
    pub(crate) fn memory_answering(
        &self,
        request: &[u8],
        answering: &Answering,
    ) -> Result<Vec<u8>, RemoteError> {
        self.post("/v1/memory", &answering.query(), request)
    }

    /// Records a request over the limit as its digest, as a tool server that answers with
    /// `answering` refuses it: with the block's `tool_use_id`, and as an input whose conversion
    /// to text `stopped` at the limit (a binding's object) or one sent whole.
    pub(crate) fn oversized_answering(
        &self,
        digest: &InputDigest,
        tool_use_id: Option<&str>,
        stopped: bool,
        answering: &Answering,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut body = serde_json::to_value(digest).map_err(|e| self.protocol(e.to_string()))?;
        body["tool_use_id"] = tool_use_id.into();
        body["stopped"] = stopped.into();
        self.post(
            "/v1/memory/oversized",
            &answering.query(),
            body.to_string().as_bytes(),
        )
    }

    /// Memory files carrying `tag` that the acting agent may read (see
    /// [`MnemoClient::records_by_tag`](crate::MnemoClient::records_by_tag)); not logged.
    pub fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, RemoteError> {
        let answer = self.get("/v1/records", &[("tag", tag.to_string())])?;
        let listed = self.json(&answer)?;
        let files = listed["files"]
            .as_array()
            .ok_or_else(|| self.protocol("no \"files\" list".into()))?;
        files.iter().map(|file| self.record_of(file)).collect()
    }

    /// The file at canonical `path` if the acting agent may read it (see
    /// [`MnemoClient::record`](crate::MnemoClient::record)); not logged.
    pub fn record(&self, path: &str) -> Result<Option<MemoryRecord>, RemoteError> {
        Ok(self
            .records_by_tag(&format!("path:{path}"))?
            .into_iter()
            .next())
    }

    fn record_of(&self, file: &Value) -> Result<MemoryRecord, RemoteError> {
        let text = |key: &str| {
            file[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| self.protocol(format!("a file without {key:?}")))
        };
        let seq = |key: &str| {
            file[key]
                .as_u64()
                .map(Seq)
                .ok_or_else(|| self.protocol(format!("a file without {key:?}")))
        };
        let tags = file["tags"]
            .as_array()
            .map(|tags| {
                tags.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(MemoryRecord {
            path: text("path")?,
            content: text("content")?,
            tags,
            created: seq("created")?,
            updated: seq("updated")?,
        })
    }

    /// The files under `dir` right after event `at` (`None`: now), without their content, as
    /// `/v1/ls` answers (operator only).
    pub fn listing(&self, dir: &MemPath, at: Option<Seq>) -> Result<Listing, RemoteError> {
        let mut query = vec![("dir", dir.to_string())];
        query.extend(at.map(|at| ("at", at.0.to_string())));
        self.typed(&self.get("/v1/ls", &query)?)
    }

    /// The content of the file at `file` right after event `at` (`None`: now), as `/v1/cat`
    /// answers (operator only); `None` when there is no file there.
    pub fn content_at(
        &self,
        file: &MemPath,
        at: Option<Seq>,
    ) -> Result<Option<String>, RemoteError> {
        let mut query = vec![("path", file.to_string())];
        query.extend(at.map(|at| ("at", at.0.to_string())));
        match self.get("/v1/cat", &query) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|e| self.protocol(format!("the content of {file} is not UTF-8 ({e})"))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every file under `dir` right after event `at` (`None`: now), with its content, from
    /// `/v1/ls` and `/v1/cat` (operator only).
    pub fn tree_at(
        &self,
        dir: &MemPath,
        at: Option<Seq>,
    ) -> Result<Vec<MemoryRecord>, RemoteError> {
        let listing = self.listing(dir, at)?;
        let mut records = Vec::with_capacity(listing.files.len());
        for file in listing.files {
            let path = MemPath::absolute(&file.path)
                .map_err(|e| self.protocol(format!("a listed path that is not one ({e})")))?;
            // A file deleted between the listing and its read (only now, not at a seq) is gone.
            let Some(content) = self.content_at(&path, at)? else {
                continue;
            };
            records.push(MemoryRecord {
                tags: vec![MEMORY_TAG.to_string(), format!("path:{}", file.path)],
                path: file.path,
                content,
                created: Seq(file.created),
                updated: Seq(file.updated),
            });
        }
        Ok(records)
    }

    /// The files as they were right after event `at` (`None`: now), with their content, as
    /// `/v1/ls` and `/v1/cat` answer (operator only): every file, whoever may read it.
    pub fn records_at(&self, at: Option<Seq>) -> Result<Vec<MemoryRecord>, RemoteError> {
        let mut query = vec![("dir", "/".to_string())];
        query.extend(at.map(|at| ("at", at.0.to_string())));
        let listed = self.json(&self.get("/v1/ls", &query)?)?;
        let files = listed["files"]
            .as_array()
            .ok_or_else(|| self.protocol("no \"files\" list".into()))?;
        let mut records = Vec::with_capacity(files.len());
        for file in files {
            let path = file["path"]
                .as_str()
                .ok_or_else(|| self.protocol("a file without \"path\"".into()))?;
            let mut wanted = vec![("path", path.to_string())];
            wanted.extend(at.map(|at| ("at", at.0.to_string())));
            let content = String::from_utf8(self.get("/v1/cat", &wanted)?)
                .map_err(|e| self.protocol(format!("the content of {path} is not UTF-8 ({e})")))?;
            let mut listed = file.clone();
            listed["content"] = content.into();
            listed["tags"] = json!([MEMORY_TAG, format!("path:{path}")]);
            records.push(self.record_of(&listed)?);
        }
        Ok(records)
    }

    /// The logged events from seq `from` on, only `agent`'s and only those naming a path under
    /// `path` when given, at most `limit`, as `mnemo log --json` prints them (operator only).
    pub fn log(
        &self,
        agent: Option<&str>,
        path: Option<&MemPath>,
        from: u64,
        limit: Option<usize>,
    ) -> Result<Vec<LoggedEvent>, RemoteError> {
        let mut params = vec![("from", from.max(1).to_string())];
        params.extend(agent.map(|agent| ("agent", agent.to_string())));
        params.extend(path.map(|path| ("path", path.to_string())));
        params.extend(limit.map(|limit| ("limit", limit.to_string())));
        self.typed_lines(&self.get("/v1/log", &params)?)
    }

    /// Every event of every file that lived at `path`, as `mnemo history --json` prints them
    /// (operator only).
    pub fn history(&self, path: &MemPath) -> Result<Vec<HistoryEvent>, RemoteError> {
        self.typed_lines(&self.get("/v1/history", &[("path", path.to_string())])?)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it (operator only).
    pub fn show(&self, seq: Seq) -> Result<ShownEvent, RemoteError> {
        self.typed(&self.get("/v1/show", &[("seq", seq.0.to_string())])?)
    }

    /// The files under `dir` that changed from after event `from` to after event `to`, as
    /// `mnemo diff --json` prints them (operator only).
    pub fn diff(&self, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<FileDiff>, RemoteError> {
        let query = [
            ("from", from.0.to_string()),
            ("to", to.0.to_string()),
            ("path", dir.to_string()),
        ];
        self.typed_lines(&self.get("/v1/diff", &query)?)
    }

    /// The access policy in force (operator only).
    pub fn policy(&self) -> Result<Policy, RemoteError> {
        let grants = self.lines(&self.get("/v1/acl", &[])?)?;
        let grants = grants
            .iter()
            .map(|grant| {
                let field = |key: &str| {
                    grant[key]
                        .as_str()
                        .ok_or_else(|| self.protocol(format!("a grant without {key:?}")))
                };
                Ok(Grant {
                    agent: field("agent")?.to_string(),
                    prefix: MemPath::absolute(field("prefix")?).map_err(|e| self.protocol(e))?,
                    access: Access::from_name(field("access")?)
                        .ok_or_else(|| self.protocol("a grant of an unknown access".into()))?,
                })
            })
            .collect::<Result<Vec<Grant>, RemoteError>>()?;
        Ok(Policy::new(grants))
    }

    /// Records a grant (`{"action": "grant", ...}`) or a revoke as the server's operator
    /// (operator only): the receipt of the admin event, an error one when the store refused the
    /// change (which is logged too).
    pub fn acl(&self, change: &Value) -> Result<Receipt, RemoteError> {
        self.admin_receipt("/v1/acl", change)
    }

    /// Sets the store setting `name` to `value` as the server's operator (operator only): the
    /// receipt of the admin event, an error one when the store refused it (which is logged too).
    pub fn configure(&self, name: &str, value: &str) -> Result<Receipt, RemoteError> {
        self.admin_receipt(
            "/v1/config",
            &serde_json::json!({"name": name, "value": value}),
        )
    }

    /// The store settings, each `(name, value)`, the defaults included (operator only).
    pub fn settings(&self) -> Result<Vec<(String, String)>, RemoteError> {
        self.lines(&self.get("/v1/config", &[])?)?
            .iter()
            .map(|row| match (row["name"].as_str(), row["value"].as_str()) {
                (Some(name), Some(value)) => Ok((name.to_string(), value.to_string())),
                _ => Err(self.protocol("a setting without \"name\" or \"value\"".into())),
            })
            .collect()
    }

    /// Every agent token of the store, as `GET /v1/tokens` lists them (operator only).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, RemoteError> {
        self.typed_lines(&self.get("/v1/tokens", &[])?)
    }

    /// Issues a token for `agent` with `label` through `POST /v1/tokens` (operator only): the
    /// receipt, and the token's text unless the store refused it.
    pub fn issue_token(
        &self,
        agent: &str,
        label: &str,
    ) -> Result<(Receipt, Option<String>), RemoteError> {
        let body = json!({"agent": agent, "label": label});
        let (status, answer) = self.admin(AdminRequest::Post {
            route: "/v1/tokens",
            body: &body,
        })?;
        let receipt = self.receipt_of(status, answer.clone())?;
        if receipt.is_error {
            return Ok((receipt, None));
        }
        let sent: Value = self.typed(&answer)?;
        let token = sent["token"]
            .as_str()
            .ok_or_else(|| self.protocol("a new token's answer without \"token\"".into()))?;
        Ok((receipt, Some(token.to_string())))
    }

    /// Revokes token `id` through `DELETE /v1/tokens/ID` (operator only).
    pub fn revoke_token(&self, id: &str) -> Result<Receipt, RemoteError> {
        let route = format!("/v1/tokens/{}", path_segment(id));
        let (status, answer) = self.admin(AdminRequest::Delete { route: &route })?;
        self.receipt_of(status, answer)
    }

    /// An admin change posted to `route`: its receipt (see [`acl`](Self::acl)).
    fn admin_receipt(&self, route: &str, change: &Value) -> Result<Receipt, RemoteError> {
        let (status, body) = self.admin(AdminRequest::Post {
            route,
            body: change,
        })?;
        self.receipt_of(status, body)
    }

    /// The receipt of an admin route's answer: 200 a change made, 400 with a seq one the store
    /// refused (and logged); any other answer is the server's refusal.
    fn receipt_of(&self, status: u16, body: Vec<u8>) -> Result<Receipt, RemoteError> {
        let answer: Option<Value> = serde_json::from_slice(&body).ok();
        let logged = answer.as_ref().and_then(|a| a["seq"].as_u64().map(Seq));
        let text = |key: &str| {
            answer
                .as_ref()
                .and_then(|a| a[key].as_str().map(str::to_string))
        };
        let is_error = match status {
            200 => false,
            400 if logged.is_some() => true,
            _ => return Err(self.refused_or(status, body)),
        };
        let seq = logged.ok_or_else(|| self.protocol("an admin answer without \"seq\"".into()))?;
        let text = text(if is_error { "error" } else { "result" })
            .ok_or_else(|| self.protocol("an admin answer without its text".into()))?;
        Ok(Receipt {
            seq,
            text,
            is_error,
            retried: false,
            retry_of: None,
        })
    }

    /// The refusal an answer with `status` is, or a protocol error for a 2xx one this route
    /// does not make.
    fn refused_or(&self, status: u16, body: Vec<u8>) -> RemoteError {
        match self.accepted(status, body) {
            Err(refused) => refused,
            Ok(_) => self.protocol(format!("an unexpected status {status}")),
        }
    }

    /// [`verify`](Self::verify) as the report the library makes (operator only).
    pub fn verify_report(&self, expect: Option<&Head>) -> Result<Report, RemoteError> {
        let sent = self.verify(expect)?;
        Report::from_protocol(&sent).ok_or_else(|| {
            self.protocol("a verify report with a hash or a name that is not one".into())
        })
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

    /// The last event (operator only).
    pub fn head(&self) -> Result<Head, RemoteError> {
        let answer = self.json(&self.get("/v1/head", &[])?)?;
        let checkpoint = answer["checkpoint"]
            .as_str()
            .ok_or_else(|| self.protocol("no \"checkpoint\"".into()))?;
        Head::parse(checkpoint).map_err(|e| self.protocol(e.to_string()))
    }

    /// Verifies the whole store on the server, as `mnemo verify --json` reports it; `expect`
    /// is a checkpoint (`SEQ:HASH`) the log must still hold (operator only).
    pub fn verify(&self, expect: Option<&Head>) -> Result<VerifyReport, RemoteError> {
        let query: Vec<(&str, String)> = expect
            .map(|head| ("expect", head.to_string()))
            .into_iter()
            .collect();
        let answer = self.get("/v1/verify", &query)?;
        self.typed(&answer)
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
    pub fn admin(&self, change: AdminRequest<'_>) -> Result<(u16, Vec<u8>), RemoteError> {
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

/// What a tool server answers memory calls with, sent with each call a tool server over a
/// served store forwards: the server compares it with its own and refuses a call it would
/// answer with other strings (409), recording nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answering {
    /// The memory root, canonical.
    pub(crate) root: String,
    /// The result-string profile.
    pub(crate) profile: Profile,
    /// The limits.
    pub(crate) limits: Limits,
    /// The durability writes are acknowledged under.
    pub(crate) durability: Durability,
}

impl Answering {
    /// The settings as query parameters (`view_max_chars=none` for no view limit).
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        vec![
            ("root", self.root.clone()),
            ("profile", self.profile.name().to_string()),
            ("durability", self.durability.name().to_string()),
            ("max_file_bytes", self.limits.max_file_bytes.to_string()),
            (
                "max_request_bytes",
                self.limits.max_request_bytes.to_string(),
            ),
            (
                "view_max_chars",
                self.limits
                    .view_max_chars
                    .map_or_else(|| "none".to_string(), |chars| chars.to_string()),
            ),
        ]
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

/// `text` as one segment of a URL path: bytes other than letters, digits, `-` and `_`
/// percent-encoded (`.` too, so `..` cannot reach another route).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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
