//! File content in chunks: a file's bytes are a linked list of chunks of at most [`CHUNK_MAX`]
//! bytes, each under a key of its own, so that an edit rewrites only the chunks it touches.
//!
//! The index holds a small head per file (`f` ‖ id, [`FileHead`]): its seqs, its length, its
//! first chunk and the next unused chunk number. Chunk `no` of file `id` is under
//! `b` ‖ id (u64 BE) ‖ no (u64 BE) and holds the number of the chunk after it (u64 LE,
//! [`LAST`] for the last) followed by its bytes. Chunk numbers are never reused within a file,
//! and chunks keep their numbers when their bytes change, so a chunk's key does not depend on
//! its position: inserting at the front of a file rewrites the first chunk, not every later one.
//!
//! An edit finds the bytes it changed from the old and the new content (their common prefix and
//! suffix: a pass over memory, not disk), and rewrites only the chunks overlapping that range,
//! re-split so that every chunk holds at most [`CHUNK_MAX`] bytes and, when the file has more than
//! one, at least [`CHUNK_MIN`]. The layout is a pure function of the log, like the rest of the
//! index, so the writer and the verifier's replay produce the same keys and bytes.
//!
//! Re-splitting a range of `n` bytes: none if `n` is 0; one chunk if `n` ≤ [`CHUNK_MAX`]; else
//! `k = ⌈n / CHUNK_TARGET⌉` chunks, the first `n mod k` of `⌈n / k⌉` bytes and the rest of
//! `⌊n / k⌋`. If the range would hold fewer than [`CHUNK_MIN`] bytes and the file has another
//! chunk, the range first takes in its neighbour: the chunk before it if there is one, else the
//! one after. The chunks of the range keep their numbers in order; any further chunks take new
//! numbers, and chunks left over are removed.

use crate::error::{Error, Result};
use crate::store::kv::{CONTENT_PREFIX, KvRead, KvWrite};

/// The most bytes a chunk holds. Part of the index layout.
pub const CHUNK_MAX: usize = 16 * 1024;

/// The size a long range is split into (chunks of `CHUNK_TARGET` bytes or a little less).
pub const CHUNK_TARGET: usize = CHUNK_MAX / 2;

/// The fewest bytes a chunk holds when its file has more than one.
pub const CHUNK_MIN: usize = CHUNK_MAX / 4;

/// The chunk number that ends the list (no next chunk), and a file's first chunk when it is
/// empty.
pub const LAST: u64 = u64::MAX;

/// The length of a [`FileHead`] record.
pub const FILE_HEAD_LEN: usize = 40;

/// How content is split, so tests can use tiny chunks; the index uses [`Chunking::LAYOUT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    /// The most bytes a chunk holds.
    pub max: usize,
    /// The size a long range is split into.
    pub target: usize,
    /// The fewest bytes a chunk holds when its file has more than one.
    pub min: usize,
}

impl Chunking {
    /// The chunking of the index layout.
    pub const LAYOUT: Chunking = Chunking {
        max: CHUNK_MAX,
        target: CHUNK_TARGET,
        min: CHUNK_MIN,
    };

    /// The chunk lengths a range of `len` bytes is split into.
    fn split(self, len: usize) -> Vec<usize> {
        if len == 0 {
            return Vec::new();
        }
        if len <= self.max {
            return vec![len];
        }
        let k = len.div_ceil(self.target.max(1));
        let (base, extra) = (len / k, len % k);
        (0..k).map(|i| base + usize::from(i < extra)).collect()
    }
}

/// The record under `f` ‖ id: everything about a file but its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHead {
    /// The seq of the event that created the file.
    pub created: u64,
    /// The seq of the event that last wrote it.
    pub updated: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Its first chunk's number ([`LAST`] when it is empty).
    pub first: u64,
    /// The next chunk number not yet used for this file.
    pub next: u64,
}

impl FileHead {
    /// created (u64 LE) ‖ updated (u64 LE) ‖ len (u64 LE) ‖ first (u64 LE) ‖ next (u64 LE).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FILE_HEAD_LEN);
        for field in [self.created, self.updated, self.len, self.first, self.next] {
            v.extend_from_slice(&field.to_le_bytes());
        }
        v
    }

    /// Parses a record written by [`FileHead::encode`].
    pub fn decode(value: &[u8]) -> Result<FileHead> {
        if value.len() != FILE_HEAD_LEN {
            return Err(Error::corrupt(format!(
                "path index file record is {} bytes, not {FILE_HEAD_LEN}",
                value.len()
            )));
        }
        let field = |i: usize| le_u64(&value[8 * i..8 * i + 8]);
        Ok(FileHead {
            created: field(0),
            updated: field(1),
            len: field(2),
            first: field(3),
            next: field(4),
        })
    }
}

fn le_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap_or_default())
}

/// The key of chunk `no` of file `id`.
pub fn chunk_key(id: u64, no: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(CONTENT_PREFIX);
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&no.to_be_bytes());
    k
}

/// The next chunk's number and the bytes of a chunk value.
fn split_chunk(value: &[u8]) -> Result<(u64, &[u8])> {
    if value.len() <= 8 {
        return Err(Error::corrupt(
            "path index content chunk holds no bytes (a chunk is its next chunk's number and at least one byte)",
        ));
    }
    Ok((le_u64(&value[..8]), &value[8..]))
}

/// The error for chunk `no` of file node `id` missing where a link names it.
fn lacks_chunk(no: u64, id: u64) -> Error {
    Error::corrupt(format!(
        "path index lacks chunk {no} of file node {id}, which its content links to"
    ))
}

/// A file's chunks in order, as (number, length), and its bytes if `bytes` is given.
fn walk<K: KvRead>(
    kv: &K,
    id: u64,
    head: &FileHead,
    mut bytes: Option<&mut Vec<u8>>,
) -> Result<Vec<(u64, usize)>> {
    let mut chunks = Vec::new();
    let (mut no, mut total) = (head.first, 0u64);
    while no != LAST {
        let (next, len) = kv
            .get_with(&chunk_key(id, no), |value| {
                let (next, data) = split_chunk(value)?;
                if let Some(out) = bytes.as_deref_mut() {
                    out.extend_from_slice(data);
                }
                Ok::<_, Error>((next, data.len()))
            })?
            .ok_or_else(|| lacks_chunk(no, id))??;
        total += len as u64;
        if total > head.len {
            return Err(Error::corrupt(format!(
                "path index content of file node {id} runs past its length of {} bytes",
                head.len
            )));
        }
        chunks.push((no, len));
        no = next;
    }
    if total != head.len {
        return Err(Error::corrupt(format!(
            "path index content of file node {id} holds {total} bytes, not its length of {}",
            head.len
        )));
    }
    Ok(chunks)
}

/// The bytes of file `id`.
pub fn read<K: KvRead>(kv: &K, id: u64, head: &FileHead) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(usize::try_from(head.len).unwrap_or(0));
    walk(kv, id, head, Some(&mut bytes))?;
    Ok(bytes)
}

/// Removes every chunk of file `id`; returns how many there were. Follows the chunks' links
/// alone ([`KvRead::chunk_next`]): a removal reads none of the file's bytes, so it costs the
/// number of chunks, not their size, and a file whose stored bytes are damaged can still be
/// deleted. A link back to a chunk already removed finds no chunk there, so a forged cycle ends.
pub fn remove<K: KvWrite>(kv: &mut K, id: u64, head: &FileHead) -> Result<usize> {
    let (mut no, mut removed) = (head.first, 0);
    while no != LAST {
        let key = chunk_key(id, no);
        let next = kv.chunk_next(&key)?.ok_or_else(|| lacks_chunk(no, id))?;
        kv.remove(&key);
        removed += 1;
        no = next;
    }
    Ok(removed)
}

/// The length of the common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    // Compare in blocks first: the slices' own equality is a memcmp.
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The length of the common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let (mut at, al, bl) = (0, a.len(), b.len());
    while at + BLOCK <= n && a[al - at - BLOCK..al - at] == b[bl - at - BLOCK..bl - at] {
        at += BLOCK;
    }
    at + a[..al - at]
        .iter()
        .rev()
        .zip(b[..bl - at].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// Writes `new` as the content of file `id`, whose head is `old` (`None` for a new file), and
/// returns the new head with `created` and `updated` copied from `old` (0 for a new file): the
/// caller sets them and stores the head.
pub fn write<K: KvWrite>(
    kv: &mut K,
    id: u64,
    old: Option<&FileHead>,
    new: &[u8],
    chunking: Chunking,
) -> Result<FileHead> {
    let empty = FileHead {
        created: 0,
        updated: 0,
        len: 0,
        first: LAST,
        next: 0,
    };
    let old = old.copied().unwrap_or(empty);
    let mut old_bytes = Vec::new();
    let chunks = walk(kv, id, &old, Some(&mut old_bytes))?;
    let mut head = FileHead {
        len: new.len() as u64,
        ..old
    };
    if old_bytes == new {
        return Ok(head);
    }
    // The chunks' start offsets, and the changed range of the old content: [p, e).
    let mut starts = Vec::with_capacity(chunks.len() + 1);
    let mut at = 0;
    for (_, len) in &chunks {
        starts.push(at);
        at += len;
    }
    starts.push(at);
    let p = common_prefix(&old_bytes, new);
    let s = common_suffix(&old_bytes[p..], &new[p..]);
    let e = old_bytes.len() - s;
    // The chunks [lo, hi) that the change overlaps (for an insertion, the one it lands in).
    let (mut lo, mut hi) = (0, 0);
    if !chunks.is_empty() {
        lo = starts[1..]
            .iter()
            .position(|end| *end > p)
            .unwrap_or(chunks.len() - 1);
        hi = if e > p {
            starts[1..]
                .iter()
                .position(|end| *end >= e)
                .map_or(chunks.len(), |i| i + 1)
        } else {
            lo + 1
        };
    }
    // The range's new bytes: what lies between the unchanged chunks before and after it.
    let range = |lo: usize, hi: usize| starts[lo]..new.len() - (old_bytes.len() - starts[hi]);
    if range(lo, hi).len() < chunking.min {
        if lo > 0 {
            lo -= 1;
        } else if hi < chunks.len() {
            hi += 1;
        }
    }
    let bytes = &new[range(lo, hi)];
    let lengths = chunking.split(bytes.len());
    let mut numbers: Vec<u64> = chunks[lo..hi].iter().map(|(no, _)| *no).collect();
    for no in numbers.iter().skip(lengths.len()) {
        kv.remove(&chunk_key(id, *no));
    }
    numbers.truncate(lengths.len());
    while numbers.len() < lengths.len() {
        numbers.push(head.next);
        head.next += 1;
    }
    let after = chunks.get(hi).map_or(LAST, |(no, _)| *no);
    let mut offset = 0;
    for (i, len) in lengths.iter().enumerate() {
        let next = numbers.get(i + 1).copied().unwrap_or(after);
        let mut value = Vec::with_capacity(8 + len);
        value.extend_from_slice(&next.to_le_bytes());
        value.extend_from_slice(&bytes[offset..offset + len]);
        kv.insert(chunk_key(id, numbers[i]), value);
        offset += len;
    }
    if lo == 0 {
        head.first = numbers.first().copied().unwrap_or(after);
    } else if numbers.is_empty() {
        // Only a range with no chunk before it can end up empty: one that would have been short
        // took in the chunk before it.
        return Err(Error::corrupt(format!(
            "path index content of file node {id} has an empty chunk"
        )));
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kv::MemKv;
    use proptest::prelude::*;

    const TINY: Chunking = Chunking {
        max: 8,
        target: 4,
        min: 2,
    };

    #[test]
    fn the_value_file_knows_a_last_chunk_as_the_index_does() {
        // A chunk stored as a reference to the value file keeps its next number, and the disk
        // layer, below this one, tells a last chunk by this value.
        assert_eq!(LAST, crate::store::disk::LAST_CHUNK);
    }

    /// The file's chunk lengths, checking the invariants every chunk keeps, and that no chunk key
    /// of the file is left outside its list.
    fn check(kv: &MemKv, id: u64, head: &FileHead, chunking: Chunking) -> Vec<usize> {
        let chunks = walk(kv, id, head, None).expect("the content walks");
        let lengths: Vec<usize> = chunks.iter().map(|(_, len)| *len).collect();
        for len in &lengths {
            assert!(*len <= chunking.max, "a chunk of {len} bytes: {lengths:?}");
            if lengths.len() > 1 {
                assert!(*len >= chunking.min, "a chunk of {len} bytes: {lengths:?}");
            }
        }
        let mut prefix = vec![CONTENT_PREFIX];
        prefix.extend_from_slice(&id.to_be_bytes());
        let stored = kv.scan_prefix(&prefix, usize::MAX).expect("scan").len();
        assert_eq!(stored, chunks.len(), "every chunk key is in the list");
        assert!(chunks.iter().all(|(no, _)| *no < head.next));
        lengths
    }

    /// One edit of a model string: replace `cut` bytes at `at` (both taken modulo the length)
    /// with `text`, or make the whole file `text`.
    #[derive(Clone, Debug)]
    enum Edit {
        Splice { at: usize, cut: usize, text: String },
        Whole(String),
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-c\n]{0,6}",
            2 => "[a-z\n]{0,40}",
            1 => "[ab]{0,200}",
            1 => Just("é€\u{1F600}".to_string()),
            // Longer than a chunk of the layout, as one line.
            1 => (0..3 * CHUNK_MAX).prop_map(|n| "y".repeat(n)),
        ]
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let cut = prop_oneof![4 => 0usize..50, 1 => 0usize..4 * CHUNK_MAX];
        prop_oneof![
            8 => (any::<usize>(), cut, text()).prop_map(|(at, cut, text)| Edit::Splice { at, cut, text }),
            1 => text().prop_map(Edit::Whole),
            1 => Just(Edit::Whole(String::new())),
        ]
    }

    /// Applies `edit` to `model` on a char boundary (content is UTF-8).
    fn apply(model: &str, edit: &Edit) -> String {
        match edit {
            Edit::Splice { at, cut, text } => {
                let mut at = at % (model.len() + 1);
                while !model.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + cut).min(model.len());
                while !model.is_char_boundary(end) {
                    end += 1;
                }
                format!("{}{text}{}", &model[..at], &model[end..])
            }
            Edit::Whole(text) => text.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Chunked content reads back exactly what a plain string holds, under random inserts,
        /// replaces and cuts at random places, growth and shrinking across chunk boundaries,
        /// emptying and refilling, with tiny chunks and with the layout's.
        #[test]
        fn chunked_content_reads_back_what_a_string_holds(
            first in text(),
            edits in proptest::collection::vec(edit(), 0..40),
            tiny in any::<bool>(),
        ) {
            let chunking = if tiny { TINY } else { Chunking::LAYOUT };
            let mut kv = MemKv::default();
            let mut model = if tiny { first } else { first.repeat(3 * CHUNK_MAX / first.len().max(1) + 1) };
            let mut head = write(&mut kv, 7, None, model.as_bytes(), chunking).expect("create");
            for edit in &edits {
                model = apply(&model, edit);
                head = write(&mut kv, 7, Some(&head), model.as_bytes(), chunking).expect("edit");
                prop_assert_eq!(head.len, model.len() as u64);
                prop_assert_eq!(read(&kv, 7, &head).expect("read"), model.as_bytes());
                check(&kv, 7, &head, chunking);
            }
            let chunks = check(&kv, 7, &head, chunking).len();
            prop_assert_eq!(remove(&mut kv, 7, &head).expect("remove"), chunks);
            prop_assert!(kv.map.is_empty(), "removing the file leaves no chunk: {:?}", kv.map.keys());
        }
    }

    /// Counts what a [`MemKv`] is asked to write.
    #[derive(Default)]
    struct Counting {
        kv: MemKv,
        written: usize,
    }

    impl KvRead for Counting {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.kv.get(key)
        }

        fn scan_prefix(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.kv.scan_prefix(prefix, limit)
        }
    }

    impl KvWrite for Counting {
        fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
            self.written += key.len() + value.len();
            self.kv.insert(key, value);
        }

        fn remove(&mut self, key: &[u8]) {
            self.written += key.len();
            self.kv.remove(key);
        }
    }

    #[test]
    fn an_edit_writes_a_bounded_chunk_however_large_the_file() {
        let large = "0123456789abcdef".repeat(10 * 1024 * 1024 / 16);
        for (what, at) in [
            ("the front", 0),
            ("the middle", large.len() / 2),
            ("the end", large.len()),
        ] {
            let mut kv = Counting::default();
            let head = write(&mut kv, 1, None, large.as_bytes(), Chunking::LAYOUT).expect("create");
            assert!(kv.written >= large.len(), "a create writes the content");
            let mut edited = large.clone();
            edited.insert_str(at, "new");
            kv.written = 0;
            let head = write(&mut kv, 1, Some(&head), edited.as_bytes(), Chunking::LAYOUT)
                .expect("insert");
            assert!(
                kv.written <= 2 * (CHUNK_MAX + 17 + 8),
                "an insert at {what} of a 10 MiB file wrote {} bytes",
                kv.written
            );
            edited.replace_range(at..at + 3, "");
            kv.written = 0;
            write(&mut kv, 1, Some(&head), edited.as_bytes(), Chunking::LAYOUT).expect("cut");
            assert!(
                kv.written <= 2 * (CHUNK_MAX + 17 + 8),
                "a cut wrote {}",
                kv.written
            );
        }
    }

    #[test]
    fn an_unchanged_write_writes_no_chunk_and_an_empty_file_has_none() {
        let mut kv = Counting::default();
        let head = write(&mut kv, 1, None, b"", Chunking::LAYOUT).expect("create");
        assert_eq!((head.len, head.first, kv.written), (0, LAST, 0));
        let head = write(&mut kv, 1, Some(&head), b"abc", Chunking::LAYOUT).expect("fill");
        kv.written = 0;
        let again = write(&mut kv, 1, Some(&head), b"abc", Chunking::LAYOUT).expect("same");
        assert_eq!((again, kv.written), (head, 0));
        let emptied = write(&mut kv, 1, Some(&head), b"", Chunking::LAYOUT).expect("empty");
        assert_eq!((emptied.len, emptied.first), (0, LAST));
        assert!(kv.kv.map.is_empty());
    }

    #[test]
    fn one_huge_line_is_split_into_chunks_within_bounds() {
        let line = "x".repeat(5 * CHUNK_MAX + 3);
        let mut kv = MemKv::default();
        let head = write(&mut kv, 2, None, line.as_bytes(), Chunking::LAYOUT).expect("create");
        let lengths = check(&kv, 2, &head, Chunking::LAYOUT);
        assert_eq!(lengths.iter().sum::<usize>(), line.len());
        assert!(lengths.len() >= 10, "{lengths:?}");
    }

    #[test]
    fn a_file_head_round_trips_and_a_wrong_length_is_corrupt() {
        let head = FileHead {
            created: 1,
            updated: 2,
            len: 3,
            first: 4,
            next: 5,
        };
        assert_eq!(FileHead::decode(&head.encode()).expect("decode"), head);
        assert!(matches!(
            FileHead::decode(&[0; 16]),
            Err(Error::Corrupt { .. })
        ));
    }
}
