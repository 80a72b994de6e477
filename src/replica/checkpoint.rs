//! A checkpoint of a replica: which event its segments reach, and that event's chain hash.
//!
//! The text is the body of a C2SP signed note (an origin line naming the store, then one line
//! each for the seq and the hash, each ended by a newline), so a signature line can follow it
//! once checkpoints are signed:
//!
//! ```text
//! mnemo/store/NAME
//! 1234
//! 3f4a…(64 hex digits)
//! ```

use crate::error::{Error, Result};
use crate::model::event::{EventHash, Seq};
use crate::store::log::Head;

/// The first line's prefix: the origin of a mnemo store's checkpoints.
const ORIGIN_PREFIX: &str = "mnemo/store/";

/// The text of the checkpoint of `head` for the store named `name`.
pub fn encode(name: &str, head: Head) -> String {
    format!("{ORIGIN_PREFIX}{name}\n{}\n{}\n", head.seq, head.hash)
}

/// The origin name and head of checkpoint `text` (the object `what`); anything else is
/// [`Error::ReplicaDamaged`].
pub fn decode(what: &str, text: &[u8]) -> Result<(String, Head)> {
    let text = &super::key::text(text);
    let bad = || {
        Error::damaged(format!(
            "replica checkpoint {what} is not a mnemo checkpoint"
        ))
    };
    let text = std::str::from_utf8(text).map_err(|_| bad())?;
    let body = text.strip_suffix('\n').ok_or_else(bad)?;
    let mut lines = body.split('\n');
    let (Some(origin), Some(seq), Some(hash), None) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return Err(bad());
    };
    let name = origin.strip_prefix(ORIGIN_PREFIX).ok_or_else(bad)?;
    let seq = seq.parse::<u64>().map_err(|_| bad())?;
    let hash = EventHash::from_hex(hash).ok_or_else(bad)?;
    // A shipment checkpoints its last event, seq 1 at least.
    if seq == 0 {
        return Err(bad());
    }
    Ok((
        name.to_string(),
        Head {
            seq: Seq(seq),
            hash,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_and_nothing_else_reads_as_one() {
        let head = Head {
            seq: Seq(12),
            hash: EventHash([7; 32]),
        };
        let text = encode("memory.mnemo.db", head);
        assert_eq!(
            decode("head", text.as_bytes()).expect("decodes"),
            ("memory.mnemo.db".to_string(), head)
        );
        for bad in [
            "",
            "mnemo/store/x\n12\n",
            "other/x\n12\n0707070707070707070707070707070707070707070707070707070707070707\n",
            "mnemo/store/x\n-1\n0707070707070707070707070707070707070707070707070707070707070707\n",
            "mnemo/store/x\n12\n0707\n",
            "mnemo/store/x\n0\n0707070707070707070707070707070707070707070707070707070707070707\n",
        ] {
            assert!(decode("head", bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}
