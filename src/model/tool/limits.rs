//! Limits a server enforces on what the model may store, send and be shown. The file-size and view
//! limits are recorded in every event, so replay answers with the limits the call ran under; the
//! request-size limit bounds what is read, no answer depends on it, and a call refused for it
//! records the limit in its digest instead.

/// Default largest memory file, in bytes (16 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Default largest request, in bytes (64 MiB): one `tool_use` block or input as its JSON text.
///
/// Four times the largest file, so a file of the default 16 MiB fits after JSON escaping whatever
/// text it holds when its writer escapes at most 4 bytes per byte of content: `\n`, `\"` and `\\`
/// take 2, and `\uXXXX` escapes of non-ASCII characters (Python's `json.dumps` default) at most 3
/// per byte (a 4-byte character as a surrogate pair of 12). Only `\u00XX` escapes of control
/// characters take 6: a file made mostly of those needs a higher limit.
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 64 * 1024 * 1024;

/// Limits on one server's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest content a file may reach through `create`, `str_replace` or `insert`, in bytes
    /// (default 16 MiB).
    pub max_file_bytes: u64,
    /// When set, a file `view` returns at most this many characters of numbered lines and says how
    /// to page on with `view_range`. Off by default.
    pub view_max_chars: Option<u64>,
    /// Largest request, in bytes of its JSON text (default 64 MiB). A longer
    /// one is refused unread and logged as a digest. Not encoded in events: a decoded event shows
    /// the default.
    pub max_request_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            view_max_chars: None,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}
