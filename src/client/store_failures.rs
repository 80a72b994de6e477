//! The calls a tool server could not answer because of the store: what the model is told, and
//! what the host counts. A call can fail two ways. Stored bytes its answer needs may be found
//! damaged (changed outside Mnemo): nothing was recorded or applied, and the store goes on
//! answering the calls that do not read them. Or the store may fail while recording it: the call
//! may or may not have been applied, and the store refuses every later call until reopened; a
//! call refused so was not applied, and is told that.
//!
//! Each error result opens with a fixed sentence of its own. No answer of the memory tool opens
//! with either (its errors name the tool or a path, never the store), so a tool server that
//! forwards calls to the store's server learns from the result what that server counted.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;

/// How both results below begin: what a result is searched for before it is parsed.
const OPENING: &str = "Error: The memory store ";

/// How the result of a call the store failed while recording begins.
const FAILED: &str = "Error: The memory store failed while recording this call";

/// How the result of a call refused because an earlier storage failure had stopped the store
/// begins.
const REFUSED: &str = "Error: The memory store was stopped by an earlier storage failure";

/// How the result of a call that met damaged stored bytes begins (a read of them, or a write
/// refused because the value file it would append to was cut short).
const DAMAGED: &str =
    "Error: The memory store found stored bytes damaged while answering this call";

/// Why the store could not answer a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Stored bytes the answer needs are damaged: nothing was recorded or applied, and the store
    /// answers the calls that do not need them.
    Damaged,
    /// The store failed while recording the call (or the server holding it did not answer): it
    /// may or may not have been applied.
    Failed,
    /// The store was already stopped by an earlier failure when the call came, and refused it:
    /// nothing was applied.
    Refused,
}

impl Failure {
    /// The failure a call that got `e` is, given why the store was stopped `before` it was made
    /// (if it was) and whether it was stopped `after` it. The writer returns damage found while
    /// answering before the chain moves, without stopping; damage found by a failed write stops
    /// it, and then the call may have been applied. A stopped writer stays stopped and refuses
    /// every call before running it, so a call refused for the very failure that had stopped
    /// the store before it was made was not applied (a store reopened in between fails with a
    /// cause of its own).
    pub(crate) fn of(e: &Error, before: Option<&str>, after: bool) -> Failure {
        let damage = matches!(
            e,
            Error::Corrupt { .. } | Error::UnsafeFile { .. } | Error::ChainBroken { .. }
        );
        if matches!(e, Error::Poisoned { cause } if Some(cause.as_str()) == before) {
            return Failure::Refused;
        }
        match damage && !after {
            true => Failure::Damaged,
            false => Failure::Failed,
        }
    }

    /// The failure a read that got `e` (an MCP resource read, which records nothing) is, given
    /// whether the store was stopped `after` it: `None` when what failed is not the store (a
    /// read asked wrongly).
    #[cfg(feature = "mcp")]
    pub(crate) fn of_read(e: &Error, after: bool) -> Option<Failure> {
        let store = matches!(
            e,
            Error::Corrupt { .. }
                | Error::ChainBroken { .. }
                | Error::UnsafeFile { .. }
                | Error::Poisoned { .. }
                | Error::WriterStopped { .. }
                | Error::Storage(_)
                | Error::Io { .. }
        );
        store.then(|| Failure::of(e, None, after))
    }

    /// The error result's text for a call that failed with `e`.
    pub(crate) fn text(self, e: &Error) -> String {
        match self {
            Failure::Damaged => format!(
                "{DAMAGED} ({e}). Nothing was applied, and calls that do not read the damaged bytes are still answered; tell the operator, who can restore the store from a replica or backup."
            ),
            Failure::Failed => format!(
                "{FAILED} ({e}). It may or may not have been applied: view the path to check before you retry."
            ),
            Failure::Refused => format!(
                "{REFUSED} and refused this call ({e}). Nothing was applied; tell the operator, and make the call again once the store is reopened."
            ),
        }
    }

    /// The failure a `tool_result` block sent as JSON text says: [`said_by`](Self::said_by) of
    /// it, parsed only when its bytes hold the opening both failures' texts share (one pass over
    /// them: every answer a bridge forwards is searched).
    #[cfg_attr(not(any(feature = "client", test)), expect(dead_code))]
    pub(crate) fn said_by_bytes(result: &[u8]) -> Option<Failure> {
        let opens = result
            .windows(OPENING.len())
            .any(|window| window == OPENING.as_bytes());
        if !opens {
            return None;
        }
        Failure::said_by(&serde_json::from_slice(result).ok()?)
    }

    /// The failure a `tool_result` block says, if it is the error result of one.
    pub(crate) fn said_by(result: &serde_json::Value) -> Option<Failure> {
        if result["is_error"].as_bool() != Some(true) {
            return None;
        }
        let text = result["content"].as_str()?;
        if text.starts_with(DAMAGED) {
            Some(Failure::Damaged)
        } else if text.starts_with(FAILED) {
            Some(Failure::Failed)
        } else if text.starts_with(REFUSED) {
            Some(Failure::Refused)
        } else {
            None
        }
    }
}

/// A `tool_result` and the store failure its call met after it was answered, if one did: a
/// delete under the setting `delete = erase` whose erasure failed. The result is the one the log
/// recorded whatever happened after it, so the failure goes beside it: a server sends it with the
/// answer (the [`AFTER_HEADER`] header, or a frame of its own on the local socket), and the
/// client that made the call says it and counts it as a store failure.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The `tool_result` block.
    pub(crate) result: serde_json::Value,
    /// What failed after the answer.
    pub(crate) after: Option<String>,
}

impl Answered {
    /// A result nothing failed after.
    pub(crate) fn plain(result: serde_json::Value) -> Answered {
        Answered {
            result,
            after: None,
        }
    }
}

/// The HTTP header of an answer that carries [`Answered::after`].
#[cfg_attr(not(any(feature = "client", feature = "serve")), expect(dead_code))]
pub(crate) const AFTER_HEADER: &str = "mnemo-store-failure";

/// [`Answered::after`] as a header value may hold it: printable ASCII, anything else as `?`.
#[cfg_attr(not(feature = "serve"), expect(dead_code))]
pub(crate) fn header_text(after: &str) -> String {
    after
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

/// How many calls a tool server and its clones could not answer because of the store.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// Every such call.
    all: AtomicU64,
    /// Those that found stored bytes damaged.
    damaged: AtomicU64,
    /// Deletes answered as recorded whose erasure under `delete = erase` failed after (counted
    /// in `all` too).
    erasures: AtomicU64,
}

impl Failures {
    pub(crate) fn count(&self, failure: Failure) {
        self.all.fetch_add(1, Ordering::Relaxed);
        if failure == Failure::Damaged {
            self.damaged.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a delete whose erasure failed after it was answered.
    pub(crate) fn count_erasure(&self) {
        self.all.fetch_add(1, Ordering::Relaxed);
        self.erasures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn erasures(&self) -> u64 {
        self.erasures.load(Ordering::Relaxed)
    }

    pub(crate) fn all(&self) -> u64 {
        self.all.load(Ordering::Relaxed)
    }

    pub(crate) fn damaged(&self) -> u64 {
        self.damaged.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::tool::intake::tool_result;

    fn damage() -> Error {
        Error::corrupt("chunk 2 of file 1 in the index does not hash to what its record holds")
    }

    /// Damage found with the store still running is told apart from a failure that stopped it,
    /// and a result of either says which it was, while no other result says either.
    #[test]
    fn damage_is_told_from_a_stopped_store_and_each_result_says_which() {
        let full = || Error::Poisoned {
            cause: "disk full".into(),
        };
        let cases = [
            (damage(), None, false, Failure::Damaged),
            (damage(), None, true, Failure::Failed),
            (damage(), Some("disk full"), true, Failure::Failed),
            (full(), None, true, Failure::Failed),
            (full(), Some("disk full"), true, Failure::Refused),
            (full(), Some("an earlier cause"), true, Failure::Failed),
            (
                Error::InvalidArgument("too large".into()),
                None,
                false,
                Failure::Failed,
            ),
        ];
        for (e, before, after, expected) in cases {
            let failure = Failure::of(&e, before, after);
            assert_eq!(failure, expected, "{e}");
            let result = tool_result("toolu_1".into(), &failure.text(&e), true);
            assert_eq!(Failure::said_by(&result), Some(expected), "{result}");
            let text = failure.text(&e);
            assert_eq!(
                text.contains("Nothing was applied"),
                expected != Failure::Failed,
                "{text}"
            );
            let bytes = result.to_string().into_bytes();
            assert_eq!(Failure::said_by_bytes(&bytes), Some(expected), "{result}");
            let not_error = tool_result("toolu_1".into(), &text, false);
            assert_eq!(Failure::said_by(&not_error), None);
            assert_eq!(
                Failure::said_by_bytes(not_error.to_string().as_bytes()),
                None
            );
        }
        for other in [
            "Error: The path /memories/x does not exist",
            "Error: The memory tool input must be a JSON object, got 3.",
            "Error: The memory server refused this call (HTTP 401: no). It was not applied.",
        ] {
            let result = json!({"type": "tool_result", "content": other, "is_error": true});
            assert_eq!(Failure::said_by(&result), None, "{other}");
        }
        assert!(
            [FAILED, DAMAGED, REFUSED]
                .iter()
                .all(|text| text.starts_with(OPENING))
        );
        let failures = Failures::default();
        for failure in [Failure::Damaged, Failure::Failed, Failure::Damaged] {
            failures.count(failure);
        }
        assert_eq!((failures.all(), failures.damaged()), (3, 2));
    }
}
