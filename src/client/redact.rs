//! Redaction: erasing chosen events' content from a store for real, while the rest of its history
//! still verifies.
//!
//! An erased event keeps its record's seq, hashes and header, and loses its payload and salt
//! (format 5, [`crate::model::event::ERASED_FORMAT`]): the chain hashed only the payload's commitment,
//! so every chain hash, and every checkpoint taken before, still verifies. A redaction is itself
//! an admin event ([`AdminCommand::Redact`]): the operator, the time, the reason and the seqs
//! erased, never the content.
//!
//! What is erased is the selection closed over what depends on it ([`plan()`]): the log is
//! replayed with the chosen events skipped, and every other event whose answer then differs
//! from the one it recorded (a view that showed an erased file, an edit of it, a rename that
//! moved it, a retry of an erased call) is erased too, and skipped in turn. What is left
//! re-derives every answer it recorded, so the verifier skips the erased events and checks the
//! rest as before. For a text, a file of the tree left that still holds it (pieced together by
//! edits none of which held it whole) has every event that named it erased, until no file does;
//! and an event that leaves a text in a file it touched (in its content, or in a path a rename
//! made) is erased in the same replay. A text in what a redaction keeps (an agent name, a
//! tool_use id, an admin event, the reason, the operator's name, sled's own names) is refused.
//!
//! Chosen by seq alone (`mnemo redact --seq`, a memory version redacted through the
//! memory-stores API), an event is erased keeping what it did to the tree ([`Kept`]: where it
//! wrote, moved or deleted, and the SHA-256 and length of what it wrote, never the content), and
//! so is every event erased with it: the closing replay applies each kept effect with the content
//! a placeholder ([`Projection::apply_kept`]) beside a replay of the log as it is, which says what
//! each event did. So a memory keeps its identity and a later write's precondition still holds,
//! and what is erased with the chosen event is what showed or built on its content. Such a
//! redaction must leave the live tree exactly as it is ([`Plan::live`]): one that would change a
//! live file (its current content, or a deleted file brought back) is refused. The redaction's
//! event commits to every kept effect by its digest ([`kept_digest`]).
//!
//! The store is rewritten, not edited ([`redact`]): sled keeps overwritten values in its log
//! until it rewrites a segment, so the erased bytes would stay in `db`. The plan and the copy are
//! made from a read-only copy of the store, so a refused redaction changes no byte of it: the
//! whole store is copied into a new sled directory beside it (erased records in place of the
//! chosen ones, the redaction appended, the index rebuilt by replay and the copy verified and
//! scanned for the texts), made durable; only then is the store opened for writing, checked to
//! have taken no write meanwhile, and exchanged with the copy in one atomic
//! `renameat2(RENAME_EXCHANGE)`; the old directory is then removed. A crash before the exchange leaves the store as it was (and a directory
//! `.NAME.redact-*` beside it, which the next redaction removes, with the directory a killed
//! creation of that copy leaves); after it, the redacted store.
//!
//! Where each part lives: this module the selection, the plan and the outcome as types, and the
//! client's redaction methods (in-process or through the server); `plan` closing a selection
//! over what depends on it; [`rewrite`] the copy written, verified and exchanged.

mod plan;
mod rewrite;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::audit::history::describe;
use crate::audit::lineage::Files;
use crate::audit::verify::verify_store;
use crate::client::MnemoClient;
use crate::error::{Error, Result};
use crate::model::event::{Body, Event, Frame, Kept, Salt, Seq, kept_digest};
use crate::model::paths::MemPath;
use crate::model::policy::{AdminCommand, DELETE_ERASES, DELETE_SETTING};
use crate::model::protocol::printable;
use crate::model::tool::Semantics;
use crate::store::disk::{parent_of, redaction_prefix, remove_redaction_leftovers};
use crate::store::kv::UndoKv;
use crate::store::log::{Durability, Head, Store};
use crate::store::projection::Projection;
use crate::store::replay::Replay;
use plan::*;
pub use plan::{plan, refused_live};
#[cfg(feature = "replicate")]
pub(crate) use rewrite::exchange;
pub use rewrite::redact;
use rewrite::*;

/// The longest reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// How many times a text found again in the tree left may widen the erasure.
const MAX_ROUNDS: usize = 64;

/// What to erase: events by seq, everything that named a path (a file, or a directory's
/// subtree), everything whose input or answer held a text. At least one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Events by seq.
    pub seqs: Vec<Seq>,
    /// Paths such as `/memories/pin.txt` or `/memories/people`.
    pub paths: Vec<String>,
    /// Texts, such as a password pasted by mistake.
    pub texts: Vec<String>,
}

/// What a redaction erases: the seqs, and the paths their events named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The events to erase, ascending.
    pub seqs: Vec<Seq>,
    /// Of them, those whose records keep what the event did to the tree (a redaction by seq
    /// only: see the module docs), and what each keeps.
    pub kept: BTreeMap<Seq, Kept>,
    /// A redaction by seq only: the live files whose content (or existence) the erasure would
    /// change, with why. A plan that names any is refused: erasing a version a file has moved
    /// past is allowed, erasing what a file holds now is not (update or delete it first).
    pub live: Vec<String>,
    /// The paths the erased events named, in order.
    pub paths: Vec<String>,
    /// With texts chosen: the events left that keep only a digest of an input too large (or
    /// too malformed) to log whole, past whose kept start a text may lie unseen. They were not
    /// searched and are not erased; [`Plan::summary`] says so, and how to erase them.
    pub unsearched: Vec<Seq>,
}

/// A redaction done: what it erased and the seq of the admin event that records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redacted {
    /// What was erased.
    pub plan: Plan,
    /// The redaction's own event.
    pub seq: Seq,
}

impl Selection {
    /// The selection as `POST /v1/redact` takes it: `{"seqs", "paths", "texts"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seqs": self.seqs.iter().map(|s| s.0).collect::<Vec<_>>(),
            "paths": self.paths,
            "texts": self.texts,
        })
    }
}

impl Plan {
    /// What `mnemo redact --dry-run` prints: `would erase N events: 1, 2` and a line per path
    /// (or that nothing matches).
    pub fn summary(&self) -> String {
        if self.seqs.is_empty() {
            return format!(
                "nothing in the log matches what was chosen; a redaction would erase nothing\n{}",
                self.unsearched_note()
            );
        }
        let mut out = format!(
            "would erase {} events: {}\n",
            self.seqs.len(),
            listed(&self.seqs)
        );
        for path in &self.paths {
            out.push_str(&format!("  {}\n", printable(path)));
        }
        out.push_str(&self.unsearched_note());
        out
    }

    /// The line that names the events a text search could not look into, if there are any.
    fn unsearched_note(&self) -> String {
        if self.unsearched.is_empty() {
            return String::new();
        }
        format!(
            "note: {} event(s) keep only a digest of an input too large or malformed to log whole ({}): past the first {} bytes it was never kept, so a text there could not be searched; if it may be there, erase them by seq (--seq N, \"seqs\" over HTTP)\n",
            self.unsearched.len(),
            listed(&self.unsearched),
            crate::model::tool::request::DIGEST_PREFIX_BYTES
        )
    }

    /// The plan as `POST /v1/redact` answers it: `{"seqs", "kept", "paths", "unsearched",
    /// "live"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seqs": self.seqs.iter().map(|s| s.0).collect::<Vec<_>>(),
            "kept": self.kept.keys().map(|s| s.0).collect::<Vec<_>>(),
            "live": self.live,
            "paths": self.paths,
            "unsearched": self.unsearched.iter().map(|s| s.0).collect::<Vec<_>>(),
        })
    }

    #[cfg(feature = "client")]
    pub(crate) fn from_json(answer: &serde_json::Value) -> Option<Plan> {
        Some(Plan {
            seqs: answer["seqs"]
                .as_array()?
                .iter()
                .map(|s| s.as_u64().map(Seq))
                .collect::<Option<_>>()?,
            paths: answer["paths"]
                .as_array()?
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
            unsearched: answer["unsearched"]
                .as_array()
                .map(|all| all.iter().filter_map(|s| s.as_u64().map(Seq)).collect())
                .unwrap_or_default(),
            // What a kept effect holds stays on the server; the plan names its seqs.
            kept: BTreeMap::new(),
            live: answer["live"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

impl Redacted {
    /// What `mnemo redact` prints: `redacted N events (1, 2); event S records it`, and the
    /// events a text search could not look into, if any.
    pub fn summary(&self) -> String {
        format!(
            "redacted {} events ({}); event {} records it\n{}",
            self.plan.seqs.len(),
            listed(&self.plan.seqs),
            self.seq,
            self.plan.unsearched_note()
        )
    }
}

fn listed(seqs: &[Seq]) -> String {
    seqs.iter()
        .map(|s| s.0.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Redaction through a client: of the store open in this process, or of a served store through
/// its server's `POST /v1/redact` (which only the operator may call).
impl crate::client::ClientBuilder {
    /// Redacts the store as this builder's agent (the operator, whom the redaction names), for
    /// `reason`: through the server [`through`](crate::ClientBuilder::through) names or the
    /// live one that holds the store (with the `client` feature), else on the store's files
    /// without opening it for writing first (the rewrite
    /// keeps the store's owner and permissions, which a process opening it as another user
    /// would not), asking a server that started meanwhile. `mnemo redact`.
    pub fn redact(self, reason: &str, selection: &Selection) -> Result<Redacted> {
        #[cfg(feature = "client")]
        {
            use crate::client::discovery::ServerFile;
            use crate::client::remote::RemoteClient;
            let served = |builder: Self, file: ServerFile| {
                let remote = RemoteClient::new(file.url, file.token);
                builder.through(remote).open()?.redact(reason, selection)
            };
            if self.through.is_some() {
                return self.open()?.redact(reason, selection);
            }
            if let Some(file) = ServerFile::find(&self.path)? {
                return served(self, file);
            }
            match redact(&self.path, &self.agent, reason, selection) {
                Err(Error::Locked { path }) => match ServerFile::find(&path)? {
                    Some(file) => served(self, file),
                    None => Err(Error::Locked { path }),
                },
                done => done,
            }
        }
        #[cfg(not(feature = "client"))]
        redact(&self.path, &self.agent, reason, selection)
    }
}

impl MnemoClient {
    /// Erases what `selection` chooses from the store, and every event whose answer depended on
    /// it ([`plan()`]), recorded as a redaction by this client's agent (the operator) for
    /// `reason`: durable, and gone from the store's directory, when it returns. A store open in
    /// this process is closed meanwhile: calls wait until it is open again (as long as the
    /// rewrite takes, which grows with the log). A refused redaction changes nothing.
    pub fn redact(&self, reason: &str, selection: &Selection) -> Result<Redacted> {
        self.backend()
            .redact(self, self.agent_id(), reason, selection)
    }

    /// [`redact`](Self::redact), recorded under `operator` rather than this client's agent (a
    /// server redacting for the holder of its operator token). Through a server, the server
    /// records who asked.
    pub fn redact_as(
        &self,
        operator: &str,
        reason: &str,
        selection: &Selection,
    ) -> Result<Redacted> {
        self.backend().redact(self, operator, reason, selection)
    }

    /// Under the store setting `delete` = `erase`: erases the files the delete at `seq` removed,
    /// each with its whole history, recorded as a redaction by this client's agent (whose delete
    /// it was). The reason names the setting and the seq, never a path (which may be what is
    /// erased).
    pub(crate) fn erase_deleted(&self, seq: Seq) -> Result<Redacted> {
        let operator = self.agent_id().to_string();
        let reason = format!(
            "the store's setting {DELETE_SETTING} = {DELETE_ERASES}: the files event {seq} deleted"
        );
        self.closed_for("the store is being redacted", |path| {
            redact_with(path, &operator, &reason, &Selection::default(), Some(seq))
        })
    }

    /// What [`redact`](Self::redact) would erase for `selection`, changing nothing.
    pub fn redaction_plan(&self, selection: &Selection) -> Result<Plan> {
        self.backend().redaction_plan(self, selection)
    }
}

/// `POST route` (an operator's admin route: `/v1/redact`, `/v1/revert`) with `body`: the
/// answer, or the server's refusal as the error the store would have given.
#[cfg(feature = "client")]
pub(crate) fn admin_post(
    remote: &crate::client::remote::RemoteClient,
    route: &'static str,
    body: &serde_json::Value,
) -> Result<serde_json::Value> {
    let (status, bytes) =
        remote.admin(crate::client::remote::AdminRequest::Post { route, body })?;
    let answer: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    match (status, answer["error"].as_str()) {
        (200..=299, _) => Ok(answer),
        (400, Some(why)) => Err(Error::InvalidArgument(why.to_string())),
        (_, why) => Err(Error::Server {
            reason: format!(
                "{} answered {status} to POST {route}: {}",
                remote.url(),
                why.map_or_else(
                    || String::from_utf8_lossy(&bytes).into_owned(),
                    str::to_string
                )
            ),
            unreachable: false,
            status: Some(status),
        }),
    }
}

/// The error for an answer of `POST route` that is not `what` (`a redaction`, `a revert`).
#[cfg(feature = "client")]
pub(crate) fn unexpected(
    remote: &crate::client::remote::RemoteClient,
    route: &str,
    what: &str,
    answer: &serde_json::Value,
) -> Error {
    Error::Server {
        reason: format!(
            "{} answered POST {route} with {answer}, not {what}; is it a mnemo serve of this version?",
            remote.url()
        ),
        unreachable: false,
        status: None,
    }
}

/// Checks a redaction's reason: 1 to [`MAX_REASON_BYTES`] bytes of printable text.
pub fn check_reason(reason: &str) -> std::result::Result<(), String> {
    if reason.trim().is_empty()
        || reason.len() > MAX_REASON_BYTES
        || reason.chars().any(char::is_control)
    {
        return Err(format!(
            "the reason is not valid; give 1 to {MAX_REASON_BYTES} bytes of printable text, such as --reason \"user asked to be forgotten\""
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::json_unescaped;
    use super::{MnemoClient, Selection};

    #[test]
    fn a_builder_redacts_a_store_no_process_holds_on_its_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("store");
        let server = crate::MnemoMemoryToolServer::new(MnemoClient::open(&db, "a").expect("open"));
        server.handle(&serde_json::json!({
            "command": "create", "path": "/memories/pin.txt", "file_text": "1234\n",
        }));
        drop(server);
        let selection = Selection {
            texts: vec!["1234".into()],
            ..Selection::default()
        };
        let done = MnemoClient::builder(&db)
            .agent_id("operator")
            .redact("a pin", &selection)
            .expect("redacted");
        assert_eq!(done.seq.0, 2);
        let client = MnemoClient::builder(&db).read_only().open().expect("open");
        assert!(client.verify().expect("verify").is_intact());
        let missing = MnemoClient::builder(dir.path().join("none"))
            .redact("why", &selection)
            .expect_err("no store");
        assert!(
            matches!(missing, crate::Error::NotFound { .. }),
            "{missing}"
        );
    }

    #[test]
    fn json_escapes_decode_leniently() {
        assert_eq!(json_unescaped(r"\u005AEBRA"), "ZEBRA");
        assert_eq!(json_unescaped(r#"a\"b\\c\/d\n"#), "a\"b\\c/d\n");
        assert_eq!(json_unescaped(r"\ud83d\ude00!"), "\u{1F600}!");
        // Not escapes: kept as they are.
        for kept in [
            r"\x41", r"\u00", r"\ud83d", r"\udc00x", "\\", r"\u12G4", "é\\",
        ] {
            assert_eq!(json_unescaped(kept), kept, "{kept}");
        }
        // A megabyte of backslashes decodes in one pass.
        let many = "\\\\".repeat(1 << 19);
        assert_eq!(json_unescaped(&many).len(), 1 << 19);
    }
}
