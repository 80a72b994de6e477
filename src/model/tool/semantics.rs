//! The six commands' semantics: a pure function from (tree, call) to (result text, change).
//!
//! Nothing here does I/O beyond reading the [`Tree`] it is given, and nothing here fails but a
//! read of it: the functions return the tree's own [`Tree::Error`], untouched. The live write path, the verifier
//! and `ls --at` all call [`answer`], so a replay re-derives exactly the text the model was given.
//!
//! The profiles share one code path; where they differ (the path echoed in messages, a few
//! strings, `view_range` slicing, the `str_replace` snippet, `insert`'s newline handling) the
//! difference is spelled out at that point with a `match` on the profile.
//!
//! Every call is answered under a [`Semantics`] version, the one its event records: the pieces of
//! text that differ between versions (how a name or a JSON value the model sent is quoted, the
//! words for a JSON error) come from that value's methods, so the versions share this code.
//!
//! Split by concern: this module names the paths a call gives and checks the access it needs;
//! [`view`] reads files and lists directories, [`edits`] answers the five commands that change
//! the tree, and [`admin`] the operator's commands (grants, tokens, settings, redactions).

use crate::model::paths::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemPath, PathRejection};
use crate::model::policy::{Access, Policy};
use crate::model::semantics_version::Semantics;
use crate::model::tool::call::Body;
use crate::model::tool::command::{Command, Profile, parse_text_under};
use crate::model::tool::limits::Limits;
use crate::model::tool::render::echoed;
use crate::model::tool::tree::{Change, NodeKind, Probe, Tree};

mod admin;
mod edits;
mod view;

use admin::admin;

/// Most lines a file may have and still be viewed.
pub(crate) const MAX_VIEW_LINES: usize = 999_999;

/// What a call produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The `tool_result` content.
    pub text: String,
    /// Whether the `tool_result` is an error.
    pub is_error: bool,
    /// The change to apply, for a successful mutation.
    pub change: Option<Change>,
    /// Why a write of the memory-stores API failed, when it did: the API's error type, typed
    /// (the text starts with its name).
    pub failure: Option<crate::model::tool::api::ApiFailure>,
    /// What the answer did with a file's bytes: the ones its text quotes, and the ones an edit
    /// in place kept (for a trace, [`crate::audit::trace`]); `None` when it read or kept none.
    pub provenance: Option<Box<Provenance>>,
}

/// Which bytes of one file an answer quotes and an edit in place keeps: what a trace follows
/// content by. Offsets are byte offsets into the file's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The file read or edited.
    pub path: MemPath,
    /// The bytes of the file's content after the call that the answer's text quotes: the lines a
    /// view shows (the newlines between them included, a cut line's shown start only), the lines
    /// of an edit's snippet. Empty when it quotes none.
    pub quoted: std::ops::Range<usize>,
    /// For an edit in place (`str_replace`, `insert`), each piece of the content before it that
    /// the content after it keeps, as (its range before, where it starts after); every other byte
    /// after it is the call's own. Empty for a read.
    pub kept: Vec<(std::ops::Range<usize>, usize)>,
}

impl Provenance {
    /// The bytes of `content` that `lines` (consecutive pieces of it, as `split('\n')` gives
    /// them) cover, from the first one's start to the last one's end.
    pub(crate) fn lines_of(content: &str, lines: &[&str]) -> std::ops::Range<usize> {
        let base = content.as_ptr() as usize;
        match (lines.first(), lines.last()) {
            (Some(first), Some(last)) => {
                let start = first.as_ptr() as usize - base;
                start..last.as_ptr() as usize - base + last.len()
            }
            _ => 0..0,
        }
    }
}

impl Answer {
    pub(crate) fn ok(text: String, change: Option<Change>) -> Answer {
        Answer {
            text,
            is_error: false,
            change,
            failure: None,
            provenance: None,
        }
    }

    /// The answer, saying what it did with a file's bytes.
    pub(crate) fn with_provenance(mut self, provenance: Provenance) -> Answer {
        self.provenance = Some(Box::new(provenance));
        self
    }

    pub(crate) fn err(text: String) -> Answer {
        Answer {
            text,
            is_error: true,
            change: None,
            failure: None,
            provenance: None,
        }
    }
}

/// Answers `agent`'s call against `tree` under `semantics`: runs a parsed command under the
/// access policy, re-parses a rejected input, or changes the policy.
///
/// Every bad input gets an answer (an error text), so the only error is the tree's own: a read
/// of `tree` that failed, returned as the tree gave it.
pub fn answer<E>(
    tree: &dyn Tree<Error = E>,
    agent: &str,
    body: &Body,
    semantics: Semantics,
) -> Result<Answer, E> {
    match body {
        Body::Tool(call) => {
            let root = match MemPath::root_under(&call.root, semantics) {
                Ok(root) => root,
                Err(msg) => return Ok(Answer::err(format!("Error: {msg}"))),
            };
            let ctx = Ctx {
                tree,
                root: &root,
                profile: call.profile,
                limits: call.limits,
                agent,
                policy: tree.policy()?,
                semantics,
            };
            let answer = ctx.execute(&call.command)?;
            Ok(with_runner_prefix(answer, call.profile))
        }
        Body::Admin(command) => admin(tree, agent, command, semantics),
        Body::Api(write) => crate::model::tool::api::answer_api(tree, agent, write, semantics),
        Body::Rejected(r) => Ok(
            match parse_text_under(&r.input, &r.root, r.profile, semantics).command {
                Err(text) => with_runner_prefix(Answer::err(text), r.profile),
                // A rejected input that parses now was not rejected by this parser: replay flags it.
                Ok(_) => Answer::err(String::new()),
            },
        ),
        Body::RejectedDigest(d) => Ok(with_runner_prefix(
            Answer::err(crate::model::tool::request::refusal_text(d)),
            d.profile,
        )),
        // Nothing is left to answer from; replay never asks (see `Body::Erased`).
        Body::Erased(_) => Ok(Answer::ok(String::new(), None)),
    }
}

fn reject(raw: &str, root: &MemPath, why: PathRejection, semantics: Semantics) -> Answer {
    let raw = &*echoed(raw);
    Answer::err(match why {
        PathRejection::Outside => format!("Path must start with {root}, got: {raw}"),
        PathRejection::Escape => format!("Path {raw} would escape {root} directory"),
        PathRejection::ControlCharacter(c) => format!(
            "Error: Path {} contains the control character {}; memory paths are plain text such as {root}/notes.txt",
            semantics.quote(raw),
            semantics.control_character(c)
        ),
        PathRejection::InvisibleCharacter(c) => format!(
            "Error: Path {} contains the invisible character U+{:04X} (a bidi control or zero-width character, which can hide or reorder a name in a listing); memory paths are plain text such as {root}/notes.txt",
            semantics.quote_visibly(raw),
            u32::from(c)
        ),
        PathRejection::TooLong { len, max } => format!(
            "Error: Path {} is too long ({len} bytes where at most {max} are allowed; paths are limited to {MAX_PATH_BYTES} bytes and names to {MAX_SEGMENT_BYTES}); use a shorter name under {root}",
            semantics.quote(raw)
        ),
    })
}

/// A path as validated, with the text messages name it by.
struct Named {
    path: MemPath,
    /// `spec`: the canonical path; `python-sdk`: the raw path exactly as the model sent it.
    shown: String,
}

/// Everything one call runs with.
struct Ctx<'a, E> {
    tree: &'a dyn Tree<Error = E>,
    root: &'a MemPath,
    profile: Profile,
    limits: Limits,
    agent: &'a str,
    policy: Policy,
    semantics: Semantics,
}

/// `Error: ` in `spec`, nothing in `python-sdk` (whose runner sends the bare `ToolError` text)
/// nor in `typescript-sdk` (whose runner adds `Error: ` to every error, see
/// [`with_runner_prefix`]).
fn prefix(profile: Profile) -> &'static str {
    match profile {
        Profile::Spec => "Error: ",
        Profile::PythonSdk | Profile::TypescriptSdk => "",
    }
}

/// An error answer as the TypeScript SDK's tool runner sends it: the filesystem tool throws an
/// `Error`, and the runner's result is `Error: ` and its message. Mnemo's own errors already
/// start with `Error: ` and keep their text; every other answer is left as it is.
fn with_runner_prefix(mut answer: Answer, profile: Profile) -> Answer {
    if profile == Profile::TypescriptSdk && answer.is_error && !answer.text.starts_with("Error: ") {
        answer.text.insert_str(0, "Error: ");
    }
    answer
}

impl<E> Ctx<'_, E> {
    fn name(&self, raw: &str) -> Result<Named, Answer> {
        match MemPath::resolve(raw, self.root) {
            Ok(path) => Ok(Named {
                shown: match self.profile {
                    Profile::Spec => path.to_string(),
                    Profile::PythonSdk | Profile::TypescriptSdk => raw.to_string(),
                },
                path,
            }),
            Err(why) => Err(reject(raw, self.root, why, self.semantics)),
        }
    }

    fn execute(&self, command: &Command) -> Result<Answer, E> {
        macro_rules! name {
            ($raw:expr) => {
                match self.name($raw) {
                    Ok(named) => named,
                    Err(answer) => return Ok(answer),
                }
            };
        }
        macro_rules! writable {
            ($raw:expr) => {{
                let named = name!($raw);
                if !self
                    .policy
                    .allows(self.agent, &named.path, Access::ReadWrite)
                {
                    return Ok(self.denied(&named, Access::ReadWrite));
                }
                named
            }};
        }
        // An archived memory store's files are read and deleted, never created or changed.
        macro_rules! changing {
            ($raw:expr) => {{
                let named = writable!($raw);
                if let Some(refused) = self.archived()? {
                    return Ok(refused);
                }
                named
            }};
        }
        match command {
            Command::View { path, view_range } => self.view(&name!(path), *view_range),
            Command::Create { path, file_text } => self.create(&changing!(path), file_text),
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(&changing!(path), old_str, new_str.as_deref().unwrap_or("")),
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(&changing!(path), *insert_line, insert_text),
            Command::Delete { path } => self.delete(&writable!(path)),
            Command::Rename { old_path, new_path } => {
                let from = writable!(old_path);
                let to = changing!(new_path);
                self.rename(&from, &to)
            }
        }
    }

    /// The refusal of a change in a memory store that was archived, if it was.
    fn archived(&self) -> Result<Option<Answer>, E> {
        Ok(self
            .tree
            .setting(crate::model::policy::LABEL_SETTING)?
            .and_then(|label| crate::model::policy::archived_ms(&label))
            .map(|_| {
                Answer::err(format!(
                    "{}the memory store was archived: its memories can be read and deleted, not created or changed",
                    prefix(self.profile)
                ))
            }))
    }

    fn denied(&self, p: &Named, need: Access) -> Answer {
        Answer::err(format!(
            "Error: Access denied: agent {} has no {} grant covering {}",
            self.agent,
            need.name(),
            p.shown
        ))
    }

    /// Whether an answer must not name `file`, which is in the way of a path: under semantics 5,
    /// a file the calling agent may not read (its grants are the only place it may learn of it).
    fn hidden(&self, file: &MemPath) -> bool {
        self.semantics.names_only_readable_files()
            && !self.policy.allows(self.agent, file, Access::Read)
    }

    /// Whether the calling agent may see an entry in a listing.
    fn visible(&self, path: &MemPath, kind: NodeKind) -> bool {
        match kind {
            NodeKind::File => self.policy.allows(self.agent, path, Access::Read),
            NodeKind::Dir => self.policy.may_see(self.agent, path),
        }
    }

    fn kind_of(&self, p: &MemPath) -> Result<Option<NodeKind>, E> {
        Ok(self.probe(p)?.kind)
    }

    /// [`Tree::probe`], with the configured root always a directory.
    fn probe(&self, p: &MemPath) -> Result<Probe, E> {
        if p == self.root {
            return Ok(Probe {
                kind: Some(NodeKind::Dir),
                file_above: None,
            });
        }
        self.tree.probe(p)
    }

    /// The file in the way of creating `p`: its nearest ancestor that is a file, from `p`'s probe.
    /// It may be the root or lie above it: a session with a root that contains this one (say
    /// `/memories` around `/memories/x`) can leave a file there.
    fn file_ancestor(&self, p: &MemPath, probe: Probe) -> Option<MemPath> {
        probe.file_above.map(|depth| p.ancestor(depth))
    }

    /// Why the root cannot be listed, when a session with an enclosing root left a file at the
    /// root or above it.
    fn unusable_root(&self) -> Result<Option<Answer>, E> {
        let root = self.root;
        let probe = self.tree.probe(root)?;
        let file = match (probe.kind, probe.file_above) {
            (Some(NodeKind::File), _) => root.clone(),
            (_, Some(depth)) => root.ancestor(depth),
            _ => return Ok(None),
        };
        let what = if &file == root {
            format!("The memory root {root} is a file, not a directory")
        } else {
            format!("The memory root {root} cannot hold files: {file} is a file, not a directory")
        };
        Ok(Some(Answer::err(format!(
            "Error: {what}. A session with a root that contains it wrote that file; use another root, or rename or delete {file} from such a session."
        ))))
    }

    /// The content of the file to edit, or the error for a missing path or a directory.
    fn editable(&self, p: &Named, spec_missing: &str) -> Result<Result<String, Answer>, E> {
        if let Some(content) = self.tree.read(&p.path)? {
            return Ok(Ok(content));
        }
        let shown = &p.shown;
        Ok(Err(Answer::err(match self.profile {
            Profile::Spec => format!("Error: The path {shown} does not exist{spec_missing}"),
            Profile::PythonSdk | Profile::TypescriptSdk if self.kind_of(&p.path)?.is_some() => {
                format!("The path {shown} is not a file.")
            }
            Profile::PythonSdk | Profile::TypescriptSdk => {
                format!("The path {shown} does not exist. Please provide a valid path.")
            }
        })))
    }

    /// The size-limit error for content of `len` bytes, if it is over the limit.
    fn too_big(&self, p: &Named, len: usize) -> Option<Answer> {
        let max = self.limits.max_file_bytes;
        (len as u64 > max).then(|| {
            Answer::err(format!(
                "Error: {} would hold {len} bytes, over the limit of {max} bytes for one memory file. Split the content across several files.",
                p.shown
            ))
        })
    }
}

/// How many `\n` `text` holds.
fn newlines(text: &str) -> usize {
    text.matches('\n').count()
}
