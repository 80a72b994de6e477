//! `MnemoMemoryToolServer`: `tool_use` block in, `tool_result` block out, every call logged.
//!
//! Over a client of a served store ([`MnemoClient::server_url`]) each call is forwarded to the
//! server's `POST /v1/memory` as the client's agent, with this server's root, profile, limits
//! and durability: the server answers it byte for byte as a tool server of its own would, or,
//! when it answers with other settings, refuses it and records nothing. A request over the
//! limit is sent as its digest, as [`handle`](MnemoMemoryToolServer::handle) would log it.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::client::store_failures::{Answered, Failure, Failures};
use crate::client::{Forward, MnemoClient};
use crate::error::{Error, Result};
use crate::model::tool::intake::{result_id, tool_result};
use crate::model::tool::{
    Body, Command, Intake, Limits, Logged, Profile, Refusal, RejectedDigest, Request,
};

/// The beta header sent when the server is built for Managed Agents.
const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";

/// Options for a server.
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    client: MnemoClient,
    root: String,
    profile: Profile,
    limits: Limits,
    managed_agents_beta: bool,
}

impl ServerBuilder {
    /// The limits on file size, view length and request size (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The memory root (default `/memories`).
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    /// The result-string profile (default [`Profile::Spec`]).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Whether [`MnemoMemoryToolServer::beta_header`] returns the Managed Agents beta header.
    pub fn managed_agents_beta(mut self, on: bool) -> Self {
        self.managed_agents_beta = on;
        self
    }

    /// The defaults, whose root is known to be valid.
    fn build_default(self) -> MnemoMemoryToolServer {
        MnemoMemoryToolServer {
            client: self.client,
            intake: Intake::memories(self.profile, self.limits),
            managed_agents_beta: self.managed_agents_beta,
            failures: Arc::default(),
        }
    }

    /// Checks the root and builds the server.
    pub fn build(self) -> Result<MnemoMemoryToolServer> {
        Ok(MnemoMemoryToolServer {
            intake: Intake::new(&self.root, self.profile, self.limits)
                .map_err(Error::InvalidArgument)?,
            client: self.client,
            managed_agents_beta: self.managed_agents_beta,
            failures: Arc::default(),
        })
    }
}

/// Answers memory-tool calls from a store. `Send + Sync`, cheap to clone.
#[derive(Clone, Debug)]
pub struct MnemoMemoryToolServer {
    client: MnemoClient,
    /// The root, profile and limits requests are taken in with.
    intake: Intake,
    managed_agents_beta: bool,
    failures: Arc<Failures>,
}

impl MnemoMemoryToolServer {
    /// A server with the default root (`/memories`) and profile (`spec`).
    pub fn new(client: MnemoClient) -> MnemoMemoryToolServer {
        MnemoMemoryToolServer::builder(client).build_default()
    }

    /// Options for a server over `client`.
    pub fn builder(client: MnemoClient) -> ServerBuilder {
        ServerBuilder {
            client,
            root: "/memories".into(),
            profile: Profile::Spec,
            limits: Limits::default(),
            managed_agents_beta: false,
        }
    }

    /// The client calls are recorded through.
    pub fn client(&self) -> &MnemoClient {
        &self.client
    }

    /// The memory root.
    pub fn root(&self) -> &str {
        self.intake.root()
    }

    /// The result-string profile.
    pub fn profile(&self) -> Profile {
        self.intake.profile()
    }

    /// How many calls this server (and its clones) could not record because the store failed,
    /// or found damaged ([`store_damage`](Self::store_damage)), here or in the server of a served
    /// store. Each got an error result; a host should tell its operator.
    pub fn store_failures(&self) -> u64 {
        self.failures.all()
    }

    /// How many of the [`store_failures`](Self::store_failures) found stored bytes their answer
    /// needed damaged (changed outside Mnemo). Nothing was applied for them, and the store went
    /// on answering; `mnemo verify` names the damage, and a restore from a replica mends it.
    pub fn store_damage(&self) -> u64 {
        self.failures.damaged()
    }

    /// How many of the [`store_failures`](Self::store_failures) were deletes under the setting
    /// `delete = erase` whose erasure failed after they were answered: each got the answer the
    /// log recorded ("Successfully deleted"), and the deleted content is still in the log until
    /// `mnemo redact` erases it.
    pub fn erase_failures(&self) -> u64 {
        self.failures.erasures()
    }

    /// Counts a read of the store that failed (an MCP resource read) as a failed call is
    /// counted, when what failed is the store: damage, a stopped store, the disk. A read asked
    /// wrongly is not counted.
    #[cfg(feature = "mcp")]
    pub(crate) fn count_read_failure(&self, e: &Error) {
        if let Some(failure) = Failure::of_read(e, self.client.store_stopped()) {
            self.failures.count(failure);
        }
    }

    /// The limits enforced.
    pub fn limits(&self) -> Limits {
        self.intake.limits()
    }

    /// How this server turns requests into the calls it records, with no I/O: the step before
    /// the answer, which tests and tools can take on their own.
    pub fn intake(&self) -> &Intake {
        &self.intake
    }

    /// The tool definition to put in the request's `tools`.
    pub fn tool_schema(&self) -> Value {
        json!({"type": "memory_20250818", "name": "memory"})
    }

    /// The `anthropic-beta` header to send, if any (the memory tool itself needs none).
    pub fn beta_header(&self) -> Option<&'static str> {
        self.managed_agents_beta.then_some(MANAGED_AGENTS_BETA)
    }

    /// Answers a whole `tool_use` block or a bare `input` object with a `tool_result` block.
    /// Never panics; every call, valid or not, is recorded as one event.
    ///
    /// A value whose compact JSON text is over [`Limits::max_request_bytes`] is refused and logged
    /// as a digest of that text (the size is measured without building the text). A `Value` has
    /// no duplicate keys by construction; text read from outside goes through
    /// [`handle_bytes`](Self::handle_bytes), which refuses them.
    pub fn handle(&self, block: &Value) -> Value {
        let logged = self.intake.value(block);
        self.answer(logged, || block.to_string().into_bytes())
    }

    /// Answers one line of text as `mnemo tool` reads it: see [`handle_bytes`](Self::handle_bytes).
    pub fn handle_line(&self, line: &str) -> Value {
        self.handle_bytes(line.as_bytes())
    }

    /// Answers one request's raw bytes (a line of `mnemo tool`, without its newline): refused
    /// and logged as a digest when over [`Limits::max_request_bytes`] or not UTF-8; otherwise
    /// parsed as JSON that names no key twice in one object, and answered as by
    /// [`handle`](Self::handle). Anything that is not a call gets an error result and is still
    /// recorded.
    pub fn handle_bytes(&self, bytes: &[u8]) -> Value {
        self.handle_bytes_told(bytes).result
    }

    /// [`handle_bytes`](Self::handle_bytes), with what failed after the call was answered: what
    /// a server sends beside the result, so that the client that made the call learns it.
    pub(crate) fn handle_bytes_told(&self, bytes: &[u8]) -> Answered {
        let logged = self.intake.bytes(bytes);
        self.answered(logged, || bytes.to_vec())
    }

    /// Answers a request as the tool server reads it from a stream (or a binding made it): a line as
    /// by [`handle_bytes`](Self::handle_bytes); an input over the limit, which was never held
    /// whole, with the refusal for its size, logged as its digest.
    pub fn handle_request(&self, request: Request) -> Value {
        match request {
            Request::Line(bytes) => self.handle_bytes(&bytes),
            other => self.answer(self.intake.request(&other), Vec::new),
        }
    }

    /// Answers the memory tool's JSON lines from `input`, one `tool_result` line on `output`
    /// each (`mnemo tool`): each line is read holding at most the request limit's bytes of it;
    /// a longer one is only counted and hashed up to its newline, answered with the size
    /// refusal, and the next line goes on.
    pub fn answer_lines(
        &self,
        input: &mut impl std::io::BufRead,
        output: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        let limit = self.limits().max_request_bytes;
        while let Some(request) = crate::model::tool::read_request(input, limit)? {
            serde_json::to_writer(&mut *output, &self.handle_request(request))?;
            output.write_all(b"\n")?;
            output.flush()?;
        }
        Ok(())
    }

    /// Refuses an input over the request limit, which is logged as its digest (through the
    /// server, for a served store).
    #[cfg(feature = "serve")]
    pub(crate) fn refuse_too_large(
        &self,
        tool_use_id: Option<String>,
        input: crate::model::tool::InputDigest,
    ) -> Value {
        self.answer(self.intake.too_large(tool_use_id, input), Vec::new)
    }

    /// Records `logged` and answers it; for a served store, has the server do both: a request
    /// refused for its size as its digest, anything else as the request's bytes (`line`, made only
    /// then).
    fn answer(&self, logged: Logged, line: impl FnOnce() -> Vec<u8>) -> Value {
        self.answered(logged, line).result
    }

    /// [`answer`](Self::answer), with what failed after the answer (see [`Answered`]).
    fn answered(&self, logged: Logged, line: impl FnOnce() -> Vec<u8>) -> Answered {
        if self.client.server_url().is_some() {
            let id = logged.tool_use_id.as_deref();
            let bytes;
            let call = match &logged.body {
                Body::RejectedDigest(RejectedDigest {
                    input,
                    refusal: Refusal::TooLarge { .. },
                    ..
                }) => Forward::TooLarge(input, id),
                Body::RejectedDigest(RejectedDigest {
                    input,
                    refusal: Refusal::Stopped { .. },
                    ..
                }) => Forward::Stopped(input, id),
                _ => {
                    bytes = line();
                    Forward::Line(&bytes)
                }
            };
            if let Some(answer) = self.forwarded(call) {
                return answer;
            }
        }
        self.commit(logged)
    }

    /// The answer of the server of a served store to `call` (a call it did not answer gets an
    /// error result that says why, and counts as a store failure); `None` for a store open here.
    fn forwarded(&self, call: Forward<'_>) -> Option<Answered> {
        let answer = self.client.forward(
            call,
            self.intake.root(),
            self.intake.profile(),
            self.intake.limits(),
        )?;
        Some(match answer {
            // The server's tool server counted a store failure; so does this one, whose host
            // sees only the result.
            Ok(answered) => {
                if let Some(failure) = Failure::said_by(&answered.result) {
                    self.failures.count(failure);
                }
                // What failed after the answer, on the server: said here too, where someone
                // is watching (a server a client started has no stderr).
                if let Some(after) = &answered.after {
                    self.failures.count_erasure();
                    eprintln!("mnemo: the server said: {after}");
                }
                answered
            }
            Err(unanswered) => {
                self.failures.count(Failure::Failed);
                Answered::plain(unanswered)
            }
        })
    }

    fn commit(&self, logged: Logged) -> Answered {
        let Logged { tool_use_id, body } = logged;
        let deletes =
            matches!(&body, Body::Tool(call) if matches!(call.command, Command::Delete { .. }));
        let stopped_before = self.client.stopped_by();
        match self.client.call(tool_use_id.clone(), body) {
            Ok(receipt) => {
                // A retry answered from its record completes what its original owed: a crash
                // between the delete and its erasure left the files in the log.
                let deleted = match receipt.retried {
                    true => receipt.retry_of,
                    false => Some(receipt.seq),
                };
                let after = match (deletes, receipt.is_error, deleted) {
                    (true, false, Some(seq)) => self.erase_if_set(seq),
                    _ => None,
                };
                Answered {
                    result: tool_result(
                        result_id(tool_use_id, receipt.seq.0),
                        &receipt.text,
                        receipt.is_error,
                    ),
                    after,
                }
            }
            Err(e) => {
                let failure =
                    Failure::of(&e, stopped_before.as_deref(), self.client.store_stopped());
                self.failures.count(failure);
                Answered::plain(tool_result(
                    tool_use_id
                        .unwrap_or_else(|| crate::model::tool::intake::UNCONFIRMED_ID.to_string()),
                    &failure.text(&e),
                    true,
                ))
            }
        }
    }
}

impl MnemoMemoryToolServer {
    /// Under the store setting `delete` = `erase`, erases the files the delete at `seq` removed
    /// (with their whole history) before the delete is answered, so the model's forgetting
    /// forgets. The answer itself is the one the log recorded, whatever happens here: a failure
    /// to erase counts as a store failure and is said on stderr, with what to run instead, and
    /// returned to go beside the answer (a server sends it to the client that made the call).
    fn erase_if_set(&self, seq: crate::model::event::Seq) -> Option<String> {
        let erased = self.client.deletes_erase().and_then(|erase| match erase {
            true => self.client.erase_deleted(seq).map(|_| ()),
            false => Ok(()),
        });
        let e = erased.err()?;
        self.failures.count_erasure();
        let why = format!(
            "the store's setting delete = erase could not erase what event {seq} deleted ({e}); erase the deleted files with `mnemo redact --path PATH --reason ...` once the cause is fixed"
        );
        eprintln!("mnemo: {why}");
        Some(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_answered_one_result_each_and_a_long_one_is_refused_by_its_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let client = MnemoClient::open(dir.path().join("store"), "agent").expect("open");
        let server = MnemoMemoryToolServer::builder(client)
            .limits(Limits {
                max_request_bytes: 200,
                ..Limits::default()
            })
            .build()
            .expect("server");
        let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"});
        let long =
            json!({"command": "create", "path": "/memories/b.md", "file_text": "b".repeat(300)});
        let input = format!("{create}\n{long}\nnot json\n");
        let mut output = Vec::new();
        server
            .answer_lines(&mut input.as_bytes(), &mut output)
            .expect("answered");
        let answers: Vec<Value> = output
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("a JSON line"))
            .collect();
        assert_eq!(answers.len(), 3);
        assert_eq!(
            answers[0]["content"],
            "File created successfully at: /memories/a.md"
        );
        assert_eq!(answers[1]["is_error"], true, "{}", answers[1]);
        assert_eq!(answers[2]["is_error"], true, "{}", answers[2]);
        assert_eq!(server.client().head().expect("head").seq.0, 3);
    }
}
