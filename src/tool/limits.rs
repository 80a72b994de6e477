//! Limits a server enforces on what the model may store and be shown. They are recorded in every
//! event, so replay answers with the limits the call ran under.

use serde::{Deserialize, Serialize};

/// Default largest memory file, in bytes (16 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Limits on one server's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Limits {
    /// Largest content a file may reach through `create`, `str_replace` or `insert`, in bytes.
    pub max_file_bytes: u64,
    /// When set, a file `view` returns at most this many characters of numbered lines and says how
    /// to page on with `view_range`. Off by default.
    pub view_max_chars: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            view_max_chars: None,
        }
    }
}
