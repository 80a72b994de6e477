//! The ids of the memory-stores API and what they name in Mnemo: a memory store is a store of a
//! data directory (`memstore_NAME`), a memory is a file named by the seq of the event that
//! created it (`mem_SEQ`), and a version is the event that made it and its memory
//! (`memver_SEQ_MEMSEQ`).

use crate::model::event::Seq;
#[cfg(any(feature = "serve", test))]
use crate::store::data_dir::check_store_name;

/// A memory store's id is `memstore_` and the name of its store in the data directory.
const STORE_ID_PREFIX: &str = "memstore_";
/// A memory's id is `mem_` and the seq of the event that created its file (its identity in the
/// log, which renames and edits keep).
const MEMORY_ID_PREFIX: &str = "mem_";
/// A version's id is `memver_`, the seq of the event that made it, `_`, and its memory's seq.
const VERSION_ID_PREFIX: &str = "memver_";

/// The id of the memory store that is the store `name`.
pub fn store_id(name: &str) -> String {
    format!("{STORE_ID_PREFIX}{name}")
}

/// The store a memory-store id names, if it names one that could exist.
#[cfg(any(feature = "serve", test))]
pub(crate) fn store_name(id: &str) -> Option<&str> {
    id.strip_prefix(STORE_ID_PREFIX)
        .filter(|name| check_store_name(name).is_ok())
}

/// A seq written the one way ids write it: decimal, no sign, no leading zero.
#[cfg(any(feature = "serve", test))]
fn seq_of(digits: &str) -> Option<Seq> {
    let canonical = !digits.is_empty()
        && !digits.starts_with('0')
        && digits.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit());
    canonical.then(|| digits.parse().ok().map(Seq)).flatten()
}

/// The id of the memory whose file the event at `created` created.
pub(crate) fn memory_id(created: Seq) -> String {
    format!("{MEMORY_ID_PREFIX}{}", created.0)
}

/// The creating seq a memory id names.
#[cfg(any(feature = "serve", test))]
pub(crate) fn memory_seq(id: &str) -> Option<Seq> {
    seq_of(id.strip_prefix(MEMORY_ID_PREFIX)?)
}

/// The id of the version the event at `seq` made of the memory created at `memory`.
pub(crate) fn version_id(seq: Seq, memory: Seq) -> String {
    format!("{VERSION_ID_PREFIX}{}_{}", seq.0, memory.0)
}

/// The (seq, memory) a version id names.
#[cfg(any(feature = "serve", test))]
pub(crate) fn version_seqs(id: &str) -> Option<(Seq, Seq)> {
    let (seq, memory) = id.strip_prefix(VERSION_ID_PREFIX)?.split_once('_')?;
    Some((seq_of(seq)?, seq_of(memory)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_exactly_one_store_file_and_event() {
        assert_eq!(store_name(&store_id("user-1042")), Some("user-1042"));
        for bad in [
            "memstore_",
            "memstore_..",
            "memstore_A",
            "user-1042",
            "memstore_a/b",
        ] {
            assert_eq!(store_name(bad), None, "{bad}");
        }
        assert_eq!(memory_seq(&memory_id(Seq(42))), Some(Seq(42)));
        for bad in [
            "mem_",
            "mem_042",
            "mem_0",
            "mem_-1",
            "mem_+1",
            "mem_1x",
            "memver_1_1",
            "mem_99999999999999999999999",
        ] {
            assert_eq!(memory_seq(bad), None, "{bad}");
        }
        assert_eq!(version_id(Seq(7), Seq(3)), "memver_7_3");
        assert_eq!(version_seqs("memver_7_3"), Some((Seq(7), Seq(3))));
        for bad in [
            "memver_7",
            "memver__3",
            "memver_07_3",
            "memver_7_3_1",
            "mem_7_3",
            "memver_7_x",
        ] {
            assert_eq!(version_seqs(bad), None, "{bad}");
        }
    }
}
