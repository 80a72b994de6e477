//! The one place that knows the serialisation library.
//!
//! Event headers and payloads are the event format's own serde types (`src/model/event/wire.rs` and
//! the header's fields in `src/model/event.rs`, the bytes in `docs/formats.md`), encoded with bincode 2 (`=2.0.1`) in a fixed
//! configuration: little-endian, fixed-width integers, no size limit beyond the caller's. Version
//! 3.0.0 of bincode is an empty tombstone and the crate is unmaintained, so nothing else in Mnemo
//! imports it: swapping it means rewriting this file and bumping
//! [`FORMAT_VERSION`](crate::model::event::FORMAT_VERSION), nothing more.
//!
//! The resulting bytes, field by field, are documented in [`crate::model::event`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Most bytes one decode may claim. Frames carry u32 lengths, so nothing valid is larger; a
/// corrupt length beyond it is an error before anything is allocated.
const DECODE_LIMIT: usize = u32::MAX as usize;

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_fixed_int_encoding()
}

fn config_with_limit() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_fixed_int_encoding()
        .with_limit::<DECODE_LIMIT>()
}

/// Encodes `value` into its canonical bytes.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // NOTE: encoding into a Vec cannot fail for the plain data types Mnemo defines (no maps with
    // non-string keys, no `serialize_any`); an error here is a programming error caught by tests,
    // so it degrades to an empty encoding that the verifier would flag rather than a panic.
    bincode::serde::encode_to_vec(value, config()).unwrap_or_default()
}

/// Decodes canonical bytes; `what` names the record for the error message.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    let limited = config_with_limit();
    let (value, used) = bincode::serde::decode_from_slice(bytes, limited)
        .map_err(|e| Error::corrupt(format!("{what} could not be decoded: {e}")))?;
    if used != bytes.len() {
        return Err(Error::corrupt(format!(
            "{what} has {} trailing bytes after its encoding",
            bytes.len() - used
        )));
    }
    Ok(value)
}
