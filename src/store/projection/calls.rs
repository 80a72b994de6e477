//! Running a call against the index: a fresh call answered and its change applied, or a call
//! that reuses a tool_use id answered from its retry record, and what was done, traced.

use super::Projection;
use super::journal::Stamp;
use crate::error::Result;
use crate::model::event::{Body, EventHash, Header, Refusal, RejectedDigest, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::Access;
use crate::model::tool::{Answer, Command, Semantics, Tree};
use crate::store::kv::{KvRead, KvWrite};

/// The hash a retry's input is compared by: blake3 of the body's canonical bytes (the event's
/// payload hash, `payload_hash` when the caller has it), or for a failed call logged as a
/// digest, the hash of the `Tool` body it replaces (which the digest keeps).
fn input_hash(body: &Body, payload_hash: Option<EventHash>) -> EventHash {
    match body {
        Body::RejectedDigest(RejectedDigest {
            input,
            refusal: Refusal::Failed { .. },
            ..
        }) => input.hash,
        _ => payload_hash.unwrap_or_else(|| EventHash::of(&crate::model::event::payload_of(body))),
    }
}

/// How a call that reused a tool_use id was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryKind {
    /// With the text recorded for the original, a change (nothing ran).
    Repeated,
    /// Run again against the tree as it is now: the original changed nothing.
    Reanswered,
    /// Refused: the input differs from the original's.
    DifferentInput,
    /// Refused: the agent no longer holds the access the original change needed.
    AccessLost,
    /// Refused: a redaction erased the original, so it is not run again.
    Erased,
}

/// The input hash a retry record of an erased call keeps: no input hashes to it (it is no blake3
/// output anyone can aim for), so a retry of the call is told that it was erased.
const ERASED_INPUT: EventHash = EventHash([0xee; 32]);

/// A call that reused a tool_use id with a kept record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The seq of the call whose record it reused.
    pub of: Seq,
    /// How it was answered.
    pub kind: RetryKind,
}

/// What [`Projection::run_traced`] did with one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// The answer, and the change it applied.
    pub answer: Answer,
    /// Set when the call was a retry.
    pub retry: Option<Retry>,
}

/// The paths a tool command writes (none for `view`).
fn written_paths(command: &Command) -> Vec<&str> {
    match command {
        Command::View { .. } => Vec::new(),
        Command::Create { path, .. }
        | Command::StrReplace { path, .. }
        | Command::Insert { path, .. }
        | Command::Delete { path } => vec![path],
        Command::Rename { old_path, new_path } => vec![old_path, new_path],
    }
}

impl<K: KvRead> Projection<K> {
    /// When the agent no longer holds read-write access to a path the recorded change `body`
    /// named: the error result its retry gets.
    fn lost_access(
        &self,
        agent: &str,
        tool_use_id: &str,
        body: &Body,
        original: Seq,
        semantics: Semantics,
    ) -> Result<Option<Answer>> {
        let Body::Tool(call) = body else {
            return Ok(None);
        };
        let Ok(root) = MemPath::root(&call.root) else {
            return Ok(None);
        };
        let policy = self.policy()?;
        for raw in written_paths(&call.command) {
            let Ok(path) = MemPath::resolve(raw, &root) else {
                continue;
            };
            if !policy.allows(agent, &path, Access::ReadWrite) {
                return Ok(Some(Answer {
                    text: format!(
                        "Error: Access denied: agent {agent} no longer has a read-write grant covering {path}, which call {} (event {original}) needed, so its recorded answer is not repeated. Ask an operator for the grant, then retry.",
                        semantics.quote(tool_use_id)
                    ),
                    is_error: true,
                    change: None,
                    failure: None,
                    provenance: None,
                }));
            }
        }
        Ok(None)
    }
}

/// Who makes a call and under what, as its event's header says.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The agent it is recorded under.
    pub agent: &'a str,
    /// The `id` of its `tool_use` block, if it came as one.
    pub tool_use_id: Option<&'a str>,
    /// The semantics that answer it.
    pub semantics: Semantics,
    /// When it was written, in Unix milliseconds (the version journal keeps it).
    pub time_ms: u64,
}

impl<'a> Caller<'a> {
    /// The caller an event's header names.
    pub fn of(header: &'a Header) -> Caller<'a> {
        Caller {
            agent: &header.agent,
            tool_use_id: header.tool_use_id.as_deref(),
            semantics: header.semantics,
            time_ms: header.time_ms,
        }
    }

    /// A caller of no recorded time.
    #[cfg(any(test, feature = "testing"))]
    pub fn new(agent: &'a str, tool_use_id: Option<&'a str>, semantics: Semantics) -> Caller<'a> {
        Caller {
            agent,
            tool_use_id,
            semantics,
            time_ms: 0,
        }
    }

    fn stamp(&self, body: &Body) -> Stamp<'a> {
        Stamp {
            agent: self.agent,
            time_ms: self.time_ms,
            by_api: match body {
                Body::Api(_) => true,
                Body::Erased(erased) => erased.kept.as_ref().is_some_and(|kept| kept.by_api),
                _ => false,
            },
            erased: matches!(body, Body::Erased(_)),
        }
    }
}

impl<K: KvWrite> Projection<K> {
    #[cfg(any(test, feature = "testing"))]
    /// Answers `agent`'s call against the index under `semantics`, applies its change as event
    /// `seq`, and keeps the retry record of a call with a tool_use id (see the module docs). This
    /// is the one step shared by the writer and the replay engine ([`crate::store::replay`]: recovery on
    /// open, the verifier, and every view of the past).
    pub fn run_call(
        &mut self,
        agent: &str,
        tool_use_id: Option<&str>,
        body: &Body,
        semantics: Semantics,
        seq: Seq,
    ) -> Result<Answer> {
        Ok(self
            .run_traced(Caller::new(agent, tool_use_id, semantics), body, None, seq)?
            .answer)
    }

    /// [`run_call`](Self::run_call), also saying whether the call was a retry and of which seq.
    /// `input` is blake3 of `body`'s canonical bytes when the caller has it (the event's payload
    /// hash); `None` computes it. Either way a retry is compared by [`input_hash`].
    pub fn run_traced(
        &mut self,
        caller: Caller<'_>,
        body: &Body,
        input: Option<EventHash>,
        seq: Seq,
    ) -> Result<Traced> {
        let Caller {
            agent,
            tool_use_id,
            semantics,
            ..
        } = caller;
        if let Body::Erased(erased) = body {
            // Erased by a redaction: it changes only what its record kept (a kept effect, with
            // its content a placeholder) and its answer is not re-derived (the verifier counts
            // it as redacted). Its tool_use id keeps a record that says so, so a retry of the
            // erased call (an SDK's, after a timeout) is not run again.
            let mut nothing = Answer {
                text: String::new(),
                is_error: false,
                change: None,
                failure: None,
                provenance: None,
            };
            if let Some(id) = tool_use_id {
                let recorded = self.recorded(agent, id)?;
                let kept = (agent, id, seq, semantics);
                self.keep_record(kept, ERASED_INPUT, &nothing, recorded.as_ref())?;
            }
            match &erased.kept {
                Some(kept) => {
                    nothing.change = Some(self.apply_kept(kept, seq, caller.stamp(body))?);
                }
                None => self.set_applied(seq),
            }
            return Ok(Traced {
                answer: nothing,
                retry: None,
            });
        }
        let Some(id) = tool_use_id else {
            let answer = self.run_fresh(caller, body, seq)?;
            return Ok(Traced {
                answer,
                retry: None,
            });
        };
        let input = input_hash(body, input);
        let recorded = self.recorded(agent, id)?;
        let (answer, kind) = match &recorded {
            Some(original) if original.input == ERASED_INPUT => (
                Answer {
                    text: format!(
                        "Error: tool_use id {} of agent {agent} named a call that a redaction erased (event {}), so this call was not run. If it is still wanted, send it again with a fresh tool_use id.",
                        semantics.quote(id),
                        original.seq
                    ),
                    is_error: true,
                    change: None,
                    failure: None,
                    provenance: None,
                },
                RetryKind::Erased,
            ),
            Some(original) if original.input != input => (
                Answer {
                    text: format!(
                        "Error: tool_use id {} was already used by agent {agent} for a different call (event {}), so this call was not run. Send it again with a fresh tool_use id.",
                        semantics.quote(id),
                        original.seq
                    ),
                    is_error: true,
                    change: None,
                    failure: None,
                    provenance: None,
                },
                RetryKind::DifferentInput,
            ),
            Some(original) if original.text.is_some() => {
                match self.lost_access(agent, id, body, original.seq, semantics)? {
                    Some(denied) => (denied, RetryKind::AccessLost),
                    None => (
                        Answer {
                            text: original.text.clone().unwrap_or_default(),
                            is_error: original.is_error,
                            change: None,
                            failure: None,
                            provenance: None,
                        },
                        RetryKind::Repeated,
                    ),
                }
            }
            _ => {
                let answer = self.run_fresh(caller, body, seq)?;
                self.keep_record(
                    (agent, id, seq, semantics),
                    input,
                    &answer,
                    recorded.as_ref(),
                )?;
                let retry = recorded.map(|original| Retry {
                    of: original.seq,
                    kind: RetryKind::Reanswered,
                });
                return Ok(Traced { answer, retry });
            }
        };
        self.set_applied(seq);
        let of = recorded.map_or(seq, |original| original.seq);
        Ok(Traced {
            answer,
            retry: Some(Retry { of, kind }),
        })
    }

    /// Answers a call as new and applies its change.
    fn run_fresh(&mut self, caller: Caller<'_>, body: &Body, seq: Seq) -> Result<Answer> {
        let answer = crate::model::tool::answer(self, caller.agent, body, caller.semantics)?;
        match &answer.change {
            Some(change) => {
                let before = self.journal_before(change)?;
                self.apply(change, seq)?;
                self.journal(change, before, seq, caller.stamp(body))?;
            }
            None => self.set_applied(seq),
        }
        if let (Body::Admin(crate::model::policy::AdminCommand::Redact { seqs, .. }), false) =
            (body, answer.is_error)
        {
            self.journal_redaction(seqs, seq);
        }
        Ok(answer)
    }
}
