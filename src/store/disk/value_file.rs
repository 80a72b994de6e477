//! The store's value file: large payloads kept outside sled's pages.
//!
//! sled 0.34 writes a whole tree node, every value in it, each time it consolidates or splits the
//! node, and a node over its blob threshold goes out as a blob file of its own, written anew each
//! time: a 15 MB payload in the `events` tree was on disk three times over before the next calls
//! had settled. So an event whose payload is at least [`VALUE_MIN`] bytes has its payload
//! appended to [`VALUES_FILE`] in the store directory, made durable (`fdatasync`) before the
//! record that names it is written, and sled keeps only the record's stored form (format 13,
//! [`VALUE_REF_FORMAT`]): the byte `13`, the payload's place in the file (offset `u64` LE, length
//! `u32` LE), the blake3 hash of its bytes, then the record as it would be stored without the
//! payload's bytes (its last field the payload's length). [`resolve`] turns that back into the
//! whole record before anything above the store sees it, so the chain, the verifier, replicas
//! and the fleet's log read every record as it was written.
//!
//! **Invariant:** every range a stored record names lies within the value file and holds bytes
//! whose blake3 hash the record holds; a read that finds otherwise is [`Error::Corrupt`] naming
//! the event. The file is appended to at its current end: bytes a crash left there before the
//! record naming them was written are never named, and are cut off when the store next opens for
//! writing ([`LastAppend`] says where the named bytes end).
//!
//! The file is opened as the store's other own files are (`lstat`, then no link followed, no pipe
//! opened, and `fstat` the file `lstat` saw), and a read allocates only after it found the file
//! holds the whole range, so a forged length costs nothing.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::fs::OFlags;

use super::checks::{Kind, unsafe_file};
use super::opening::open_own;
use crate::error::{Error, Result};
use crate::model::chain::{Break, Chain};
use crate::model::event::{Frame, FrameRef, Seq, VALUE_REF_FORMAT};

/// The value file's name in the store directory.
pub const VALUES_FILE: &str = "values";

/// The smallest payload kept in the value file; smaller ones stay in the record, in sled. At this
/// size the payload's own write and `fdatasync` cost less than sled writing it again with every
/// node it shares.
pub const VALUE_MIN: usize = 32 * 1024;

/// The bytes of a stored form before the record's own: the format byte and the [`ValueRef`].
const REF_LEN: usize = 1 + ValueRef::LEN;

/// The most bytes of payloads appended and not yet indexed that a store keeps in memory, so the
/// index can name their bytes rather than copy them (see `shared_content`).
const RECENT_MAX: usize = 64 * 1024 * 1024;

/// Where a payload is in the value file, and the hash its bytes must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ValueRef {
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) hash: [u8; 32],
}

impl ValueRef {
    /// The bytes a reference is stored as: offset (`u64` LE), length (`u32` LE), blake3 hash.
    pub(super) const LEN: usize = 8 + 4 + 32;

    /// offset ‖ len ‖ hash, as [`ValueRef::LEN`] says.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.hash);
    }

    /// Reads what [`ValueRef::encode`] wrote, from the first [`ValueRef::LEN`] bytes of `bytes`
    /// (the caller checked there are that many).
    pub(super) fn decode(bytes: &[u8]) -> ValueRef {
        ValueRef {
            offset: u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
            len: u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")),
            hash: bytes[12..Self::LEN].try_into().expect("32 bytes"),
        }
    }
}

/// A payload appended to the value file that the index has not been written past yet: its
/// event, its place, and its bytes.
pub(crate) type Recent = (Seq, ValueRef, Arc<Vec<u8>>);

/// The value file as opened, and whether it was opened for writing.
type Opened = (Arc<File>, bool);

/// The value file of one store, opened when first needed.
#[derive(Debug)]
pub(crate) struct ValueFile {
    path: PathBuf,
    /// The path errors name: the store's own file, also when a read-only copy of it is read.
    shown: PathBuf,
    /// The open file, and whether it was opened for writing (shared, so a read's `pread` does
    /// not wait for an append's write and sync).
    open: Mutex<Option<Opened>>,
    /// Where this process last left the file's end: a file found shorter when the next payload
    /// is appended was cut short meanwhile, outside Mnemo.
    end: Mutex<Option<u64>>,
    /// Payloads appended since the index was last written past them, newest last, at most
    /// [`RECENT_MAX`] bytes in all.
    recent: Mutex<VecDeque<Recent>>,
}

impl ValueFile {
    /// The value file of the store whose files are in `dir` (it need not exist yet).
    pub(crate) fn in_dir(dir: &Path) -> ValueFile {
        ValueFile {
            path: dir.join(VALUES_FILE),
            shown: dir.join(VALUES_FILE),
            open: Mutex::new(None),
            end: Mutex::new(None),
            recent: Mutex::new(VecDeque::new()),
        }
    }

    /// The same file, named in errors as the value file of the store at `store` (the file read
    /// is a private copy's).
    pub(crate) fn shown_as(mut self, store: &Path) -> ValueFile {
        self.shown = store.join(VALUES_FILE);
        self
    }

    /// The file, opened for writing (created if missing) when `write`; a missing file to read is
    /// `missing`'s error.
    fn file(&self, write: bool, missing: impl FnOnce() -> Error) -> Result<Arc<File>> {
        let mut open = self.lock_open()?;
        if let Some((file, writable)) = open.as_ref() {
            if *writable || !write {
                return Ok(file.clone());
            }
        }
        let created = write && std::fs::symlink_metadata(&self.path).is_err();
        let flags = match write {
            true => OFlags::RDWR | OFlags::CREATE,
            false => OFlags::RDONLY,
        };
        let Some(file) = open_own(&self.path, flags)? else {
            return Err(missing());
        };
        if created {
            // The file's name must outlive a power loss before any record names it.
            super::fsync_dir(super::parent_of(&self.path))?;
        }
        let file = Arc::new(file);
        *open = Some((file.clone(), write));
        Ok(file)
    }

    /// Whether the file may hold anything: this process appended to it, or it is there.
    pub(crate) fn may_hold(&self) -> bool {
        self.end.lock().map_or(true, |end| end.is_some())
            || std::fs::symlink_metadata(&self.path).is_ok()
    }

    /// Appends the payloads of events `values` at the file's end and makes them durable; their
    /// places, in order. They are kept in memory until [`ValueFile::indexed_through`] passes
    /// them.
    pub(crate) fn append(&self, values: Vec<(Seq, Vec<u8>)>) -> Result<Vec<ValueRef>> {
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let missing = || Error::io(&self.path, std::io::ErrorKind::NotFound.into());
        let mut end = self.lock_end()?;
        self.holds_named(*end)?;
        let file = self.file(true, missing)?;
        let refs = {
            let io = |e| Error::io(&self.path, e);
            let mut at = file.metadata().map_err(io)?.len();
            if let Some(expected) = *end {
                if at < expected {
                    return Err(self.cut_short(at, expected));
                }
            }
            let mut refs = Vec::with_capacity(values.len());
            for (_, value) in &values {
                let len = u32::try_from(value.len()).map_err(|_| {
                    Error::InvalidArgument(format!(
                        "a payload of {} bytes does not fit an event record (4 GiB at most)",
                        value.len()
                    ))
                })?;
                file.write_all_at(value, at).map_err(io)?;
                refs.push(ValueRef {
                    offset: at,
                    len,
                    hash: *blake3::hash(value).as_bytes(),
                });
                at += u64::from(len);
            }
            file.sync_data().map_err(io)?;
            self.still_named(&file)?;
            *end = Some(at);
            refs
        };
        drop(end);
        for ((seq, bytes), at) in values.into_iter().zip(&refs) {
            self.remember(seq, *at, bytes);
        }
        Ok(refs)
    }

    /// The error for a value file found ending at byte `at`, short of the `expected` bytes the
    /// store's records name.
    fn cut_short(&self, at: u64, expected: u64) -> Error {
        Error::corrupt(format!(
            "the store's value file {} ends at byte {at}, and the store's records name its bytes up to byte {expected}: it was cut short or removed, and no payload is written after bytes an event still names",
            self.shown.display()
        ))
    }

    /// Refuses, before a call whose payload would be appended here is answered, what
    /// [`ValueFile::append`] would refuse then: a file found shorter than the bytes the store's
    /// records name, or missing. So that call fails alone, where a refused append would stop the
    /// store; the append checks again.
    pub(crate) fn check_appendable(&self) -> Result<()> {
        let end = *self.lock_end()?;
        self.holds_named(end)
    }

    /// Refuses a file at the value file's path that is missing, not a regular file (a link, a
    /// pipe, a directory put there: named as such, not measured), or shorter than `end`, the
    /// bytes the store's records name (if known).
    fn holds_named(&self, end: Option<u64>) -> Result<()> {
        let Some(expected) = end.filter(|e| *e > 0) else {
            return Ok(());
        };
        let named = std::fs::symlink_metadata(&self.path).ok();
        if let Some(found) = named.as_ref().map(std::fs::Metadata::file_type) {
            if !found.is_file() {
                return Err(unsafe_file(&self.shown, found, Kind::File));
            }
        }
        let at = named.map_or(0, |m| m.len());
        match at < expected {
            true => Err(self.cut_short(at, expected)),
            false => Ok(()),
        }
    }

    /// Where this process last left the file's end.
    fn lock_end(&self) -> Result<MutexGuard<'_, Option<u64>>> {
        self.end.lock().map_err(|_| Error::Poisoned {
            cause: "a thread panicked while it appended to the store's value file".into(),
        })
    }

    /// The open file, if any, and whether it was opened for writing.
    fn lock_open(&self) -> Result<MutexGuard<'_, Option<Opened>>> {
        self.open.lock().map_err(|_| Error::Poisoned {
            cause: "a thread panicked while it opened the store's value file".into(),
        })
    }

    /// Checks that the store's value file is still `file`, the one this process writes: once its
    /// payloads are durable there and before any record names them. A file put in its place (a
    /// copy moved over it, a link, a pipe) or its name removed while the store was open would
    /// leave the payloads in a file no longer named, lost when the process closes it, so the
    /// append is refused.
    fn still_named(&self, file: &File) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let open = file.metadata().map_err(|e| Error::io(&self.path, e))?;
        let named = std::fs::symlink_metadata(&self.path).ok();
        if named
            .as_ref()
            .is_some_and(|named| (named.dev(), named.ino()) == (open.dev(), open.ino()))
        {
            return Ok(());
        }
        *self.lock_open()? = None;
        Err(Error::UnsafeFile {
            path: self.shown.clone(),
            what: format!(
                "was {} while the store was open, so the payloads just written went to a file that no longer has its name and would be lost; they were not recorded",
                match named {
                    Some(_) => "replaced",
                    None => "removed",
                }
            ),
            fix: "put back the store's own value file (or restore the store from a replica or backup), then reopen it".into(),
        })
    }

    /// Keeps event `seq`'s payload, at `at`, for the index written next (the oldest kept
    /// forgotten past [`RECENT_MAX`] bytes).
    fn remember(&self, seq: Seq, at: ValueRef, bytes: Vec<u8>) {
        let mut recent = self.recent();
        recent.push_back((seq, at, Arc::new(bytes)));
        let mut held: usize = recent.iter().map(|(_, _, b)| b.len()).sum();
        while held > RECENT_MAX {
            let Some((_, _, oldest)) = recent.pop_front() else {
                break;
            };
            held -= oldest.len();
        }
    }

    /// Keeps for the index written next the payloads of the events `stored` (what sled stores
    /// for each, newest first) that are stored forms, the newest [`RECENT_MAX`] bytes of them:
    /// an index replayed after a crash names the bytes as the writer's would have. Reads those
    /// payloads, checked.
    pub(crate) fn remember_stored(
        &self,
        stored: impl Iterator<Item = Result<(Seq, sled::IVec)>>,
        marker: u8,
    ) -> Result<()> {
        let mut found = Vec::new();
        let mut held = 0;
        for item in stored {
            let (seq, stored) = item?;
            if let Some((at, _)) = reference_of(seq, &stored, marker)? {
                held += at.len as usize;
                if held > RECENT_MAX {
                    break;
                }
                found.push((seq, at));
            }
        }
        for (seq, at) in found.into_iter().rev() {
            let bytes = self.read(&format!("event {seq}'s payload"), &at)?;
            self.remember(seq, at, bytes);
        }
        Ok(())
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, VecDeque<Recent>> {
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The payloads appended that the index has not been written past, newest first.
    pub(crate) fn recent_payloads(&self) -> Vec<Recent> {
        self.recent().iter().rev().cloned().collect()
    }

    /// Forgets the payloads of events up to `seq`, which the index has been written past.
    pub(crate) fn indexed_through(&self, seq: Seq) {
        self.recent().retain(|(of, _, _)| *of > seq);
    }

    /// Cuts off the bytes past `named`, the end of the last payload a record names: what an
    /// append left there when its records were not written (a crash, or a failure after the
    /// payloads were made durable). Nothing past `named` is ever read, so the space is given
    /// back. A file shorter than `named`, or missing, is left for reads to name, and no payload
    /// is appended to it.
    pub(crate) fn cut_past(&self, named: u64) -> Result<()> {
        let mut end = self.lock_end()?;
        if std::fs::symlink_metadata(&self.path).is_err() {
            *end = Some(named);
            return Ok(());
        }
        let missing = || Error::io(&self.path, std::io::ErrorKind::NotFound.into());
        let file = self.file(true, missing)?;
        let io = |e| Error::io(&self.path, e);
        if file.metadata().map_err(io)?.len() > named {
            file.set_len(named).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        // A file shorter than what records name was cut outside Mnemo: the next append is
        // refused rather than written over bytes an event still names.
        *end = Some(named);
        Ok(())
    }

    /// The bytes `at` names, `whose` (for an error's words: "event 7's payload"): checked
    /// against their hash, read only once the file is found to hold them all.
    pub(super) fn read(&self, whose: &str, at: &ValueRef) -> Result<Vec<u8>> {
        let bytes = self.read_range(whose, at.offset, at.len)?;
        if *blake3::hash(&bytes).as_bytes() != at.hash {
            return Err(Error::corrupt(format!(
                "{whose}, bytes {}..{} of the store's value file {}, does not hash to what its record holds",
                at.offset,
                at.offset + u64::from(at.len),
                self.shown.display()
            )));
        }
        Ok(bytes)
    }

    /// The `len` bytes at `offset`, `whose`, unchecked (the caller checks a hash over them), read
    /// only once the file is found to hold them all.
    pub(super) fn read_range(&self, whose: &str, offset: u64, len: u32) -> Result<Vec<u8>> {
        let missing = || {
            Error::corrupt(format!(
                "{whose} is in the store's value file {}, which is missing",
                self.shown.display()
            ))
        };
        let file = self.file(false, missing)?;
        let io = |e| Error::io(&self.path, e);
        let end = offset.saturating_add(u64::from(len));
        let file_len = file.metadata().map_err(io)?.len();
        if file_len < end {
            return Err(Error::corrupt(format!(
                "{whose} is bytes {offset}..{end} of the store's value file {}, which ends at byte {file_len}: it was cut short",
                self.shown.display()
            )));
        }
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, offset).map_err(io)?;
        Ok(bytes)
    }
}

/// What the store's metadata says of the value file's last append (`meta.values`): where it
/// started, the first and last events whose payloads it held, and where it ended. Written before
/// those events' records, in the same sled log, so whenever a record naming the bytes survived a
/// crash this did too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastAppend {
    start: u64,
    first: Seq,
    last: Seq,
    end: u64,
}

impl LastAppend {
    /// The encoded length: start, first, last, end, each `u64` LE.
    const LEN: usize = 32;

    /// The append of the payloads of events `seqs` (in order), placed at `refs`.
    pub(crate) fn of(seqs: &[Seq], refs: &[ValueRef]) -> Option<LastAppend> {
        let (first, last) = (refs.first()?, refs.last()?);
        Some(LastAppend {
            start: first.offset,
            first: *seqs.first()?,
            last: *seqs.last()?,
            end: last.offset + u64::from(last.len),
        })
    }

    /// start ‖ first ‖ last ‖ end, each `u64` LE.
    pub(crate) fn encode(&self) -> [u8; LastAppend::LEN] {
        let mut out = [0; LastAppend::LEN];
        for (i, field) in [self.start, self.first.0, self.last.0, self.end]
            .into_iter()
            .enumerate()
        {
            out[8 * i..8 * i + 8].copy_from_slice(&field.to_le_bytes());
        }
        out
    }

    /// Reads what [`LastAppend::encode`] wrote.
    pub(crate) fn decode(bytes: &[u8]) -> Result<LastAppend> {
        if bytes.len() != LastAppend::LEN {
            return Err(Error::corrupt(format!(
                "the store's record of its value file's last append (meta.values) is {} bytes, not {}: it was changed outside Mnemo",
                bytes.len(),
                LastAppend::LEN
            )));
        }
        let field = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8"));
        Ok(LastAppend {
            start: field(0),
            first: Seq(field(1)),
            last: Seq(field(2)),
            end: field(3),
        })
    }

    /// The events whose records may name this append's bytes.
    pub(crate) fn events(&self) -> std::ops::RangeInclusive<Seq> {
        self.first..=self.last
    }

    /// Where the bytes any record names end, given what sled holds for this append's events
    /// (`stored`: those it kept, a prefix of them after a crash, in seq order): the end of the
    /// last payload a kept record names, or the append's start if none does.
    pub(crate) fn named_end(
        &self,
        stored: impl Iterator<Item = Result<(Seq, sled::IVec)>>,
        marker: u8,
    ) -> Result<u64> {
        let mut named = self.start;
        for item in stored {
            let (seq, stored) = item?;
            if let Some((at, _)) = reference_of(seq, &stored, marker)? {
                named = named.max(at.offset + u64::from(at.len));
            }
        }
        Ok(named.min(self.end))
    }
}

/// Whether `frame`'s payload goes to the value file (an erased record keeps none).
pub(crate) fn goes_to_value_file(frame: &Frame) -> bool {
    frame.erased_from.is_none() && frame.payload.len() >= VALUE_MIN
}

/// `frame`'s stored record without its payload's bytes, and those bytes.
pub(crate) fn split(frame: &Frame) -> (Vec<u8>, Vec<u8>) {
    let mut record = frame.encode();
    let payload = record.split_off(record.len() - frame.payload.len());
    (record, payload)
}

/// The stored form of a record split by [`split`] whose payload is at `at`.
pub(crate) fn stored_form(rest: &[u8], at: &ValueRef) -> Vec<u8> {
    let mut out = Vec::with_capacity(REF_LEN + rest.len());
    out.push(VALUE_REF_FORMAT);
    at.encode(&mut out);
    out.extend_from_slice(rest);
    out
}

/// A stored record as a reader of the log gets it from what sled stores under its key.
pub(crate) enum Resolved {
    /// The whole record: the value itself, or a stored form's record with its payload read back
    /// from `values` and checked against its hash.
    Whole(Vec<u8>),
    /// A stored form whose payload `values` no longer gives back as it was written (its bytes
    /// damaged, cut off or gone): the record without its payload's bytes (ending at its
    /// `payload_len`, see [`crate::model::event::FrameRef::parse_without_payload`]), and why,
    /// [`Error::ChainBroken`] naming the event. Any other failure to read is an error.
    PayloadLost {
        /// The record without the payload's bytes.
        rest: Vec<u8>,
        /// What the read of the payload met.
        why: Error,
    },
}

impl Resolved {
    /// The record's fields (a lost payload's record has an empty payload).
    pub(crate) fn frame(&self) -> Result<FrameRef<'_>> {
        match self {
            Resolved::Whole(record) => FrameRef::parse(record),
            Resolved::PayloadLost { rest, .. } => FrameRef::parse_without_payload(rest),
        }
    }

    /// Checks the record stored under `seq` against `chain`: a whole one by every rule, one
    /// whose payload was lost by every rule but the payload hash.
    pub(crate) fn check<'a>(&'a self, chain: &mut Chain, seq: Seq) -> Result<FrameRef<'a>, Break> {
        match self {
            Resolved::Whole(record) => chain.check_borrowed(seq, record),
            Resolved::PayloadLost { rest, .. } => chain.check_without_payload(seq, rest),
        }
    }
}

/// The whole record of event `seq` from what sled stores under its key: the value itself, or a
/// stored form's record with its payload read back from `values`. `marker` is the store's format
/// marker: a stored form in a store whose marker is older was written outside Mnemo.
pub(crate) fn resolve(seq: Seq, stored: &[u8], values: &ValueFile, marker: u8) -> Result<Vec<u8>> {
    match resolve_or_lost(seq, stored, values, marker)? {
        Resolved::Whole(record) => Ok(record),
        Resolved::PayloadLost { why, .. } => Err(why),
    }
}

/// [`resolve`], a payload the value file no longer gives back as written kept apart
/// ([`Resolved::PayloadLost`]) rather than failing the read.
pub(crate) fn resolve_or_lost(
    seq: Seq,
    stored: &[u8],
    values: &ValueFile,
    marker: u8,
) -> Result<Resolved> {
    let Some((at, rest)) = reference_of(seq, stored, marker)? else {
        return Ok(Resolved::Whole(stored.to_vec()));
    };
    // Bytes the file no longer holds as the record names them break the chain at this event,
    // as a payload that does not hash would.
    let payload = match values.read(&format!("event {seq}'s payload"), &at) {
        Ok(payload) => payload,
        Err(Error::Corrupt { what }) => {
            return Ok(Resolved::PayloadLost {
                rest: rest.to_vec(),
                why: Error::ChainBroken { seq: seq.0, what },
            });
        }
        Err(other) => return Err(other),
    };
    let mut record = Vec::with_capacity(rest.len() + payload.len());
    record.extend_from_slice(rest);
    record.extend_from_slice(&payload);
    Ok(Resolved::Whole(record))
}

/// The place a stored form names and the record's bytes without the payload; `None` for a
/// record stored whole.
fn reference_of(seq: Seq, stored: &[u8], marker: u8) -> Result<Option<(ValueRef, &[u8])>> {
    if stored.first() != Some(&VALUE_REF_FORMAT) {
        return Ok(None);
    }
    if marker < VALUE_REF_FORMAT {
        return Err(Error::corrupt(format!(
            "event {seq}'s record names a payload in the value file (format {VALUE_REF_FORMAT}), but the store's format marker (meta.format) says the log holds nothing newer than format {marker}: the marker was lowered outside Mnemo"
        )));
    }
    if stored.len() < REF_LEN + 4 {
        return Err(Error::corrupt(format!(
            "event {seq}'s record is truncated in its reference to the value file"
        )));
    }
    let at = ValueRef::decode(&stored[1..]);
    // Only a payload of VALUE_MIN bytes or more is ever kept in the file: a shorter one named
    // there is a record rewritten outside Mnemo, not a payload the file lost.
    if (at.len as usize) < VALUE_MIN {
        return Err(Error::corrupt(format!(
            "event {seq}'s record names a payload of {} bytes in the value file, where only payloads of {VALUE_MIN} bytes or more are kept: the record was changed outside Mnemo",
            at.len
        )));
    }
    let named = u32::from_le_bytes(stored[stored.len() - 4..].try_into().expect("4 bytes"));
    if named != at.len {
        return Err(Error::corrupt(format!(
            "event {seq}'s record says its payload is {named} bytes, and its reference to the value file says {}",
            at.len
        )));
    }
    Ok(Some((at, &stored[REF_LEN..])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hash::EventHash;

    fn frame(payload_len: usize) -> Frame {
        Frame {
            version: 9,
            seq: Seq(7),
            prev_hash: EventHash([1; 32]),
            hash: EventHash([2; 32]),
            payload_hash: EventHash([3; 32]),
            header: b"header".to_vec(),
            salt: None,
            payload: (0..payload_len).map(|i| b"0123456789"[i % 10]).collect(),
            erased_from: None,
        }
    }

    #[test]
    fn a_value_file_may_hold_bytes_once_appended_to_or_found_there() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        assert!(!values.may_hold(), "no file, nothing appended");
        values
            .append(vec![(Seq(1), b"a payload".to_vec())])
            .expect("append");
        assert!(values.may_hold(), "appended by this process");
        assert!(
            ValueFile::in_dir(dir.path()).may_hold(),
            "found by another opening"
        );
    }

    #[test]
    fn a_stored_form_resolves_to_the_record_it_stands_for() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let (small, big) = (frame(10), frame(VALUE_MIN + 3));
        assert!(!goes_to_value_file(&small) && goes_to_value_file(&big));
        let (rest, payload) = split(&big);
        let first = values
            .append(vec![(Seq(6), b"left by a crash".to_vec())])
            .expect("append");
        let at = values.append(vec![(Seq(7), payload)]).expect("append")[0];
        assert!(
            at.offset >= u64::from(first[0].len),
            "appended after the bytes already there"
        );
        let stored = stored_form(&rest, &at);
        assert!(stored.len() < 200, "sled keeps {} bytes", stored.len());
        let whole = resolve(Seq(7), &stored, &values, VALUE_REF_FORMAT).expect("resolves");
        assert_eq!(whole, big.encode());
        // A record stored whole is what sled holds.
        let plain = small.encode();
        assert_eq!(resolve(Seq(7), &plain, &values, 9).expect("plain"), plain);
    }

    #[test]
    fn a_lost_payload_is_kept_apart_and_a_short_one_in_the_file_is_a_changed_record() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let (rest, payload) = split(&frame(VALUE_MIN));
        let at = values.append(vec![(Seq(7), payload)]).expect("append")[0];
        let stored = stored_form(&rest, &at);
        std::fs::write(dir.path().join(VALUES_FILE), b"").expect("empty");
        let fresh = ValueFile::in_dir(dir.path());
        match resolve_or_lost(Seq(7), &stored, &fresh, VALUE_REF_FORMAT) {
            Ok(Resolved::PayloadLost { rest: kept, why }) => {
                assert_eq!(kept, rest, "the record without its payload's bytes");
                assert!(matches!(why, Error::ChainBroken { seq: 7, .. }), "{why}");
            }
            Ok(Resolved::Whole(_)) => panic!("an emptied file gave the payload back"),
            Err(e) => panic!("a lost payload failed the read: {e}"),
        }
        // A small event's record rewritten to name bytes of the file, as only a large payload's
        // is, is refused as a record changed, never taken for a payload the file lost.
        let other = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(other.path());
        let (small_rest, small_payload) = split(&frame(100));
        let small_at = values
            .append(vec![(Seq(8), small_payload)])
            .expect("append")[0];
        let forged = stored_form(&small_rest, &small_at);
        match resolve_or_lost(Seq(8), &forged, &values, VALUE_REF_FORMAT) {
            Err(Error::Corrupt { what }) => {
                assert!(what.contains("changed outside Mnemo"), "{what}");
            }
            Err(e) => panic!("refused as other than a changed record: {e}"),
            Ok(_) => panic!("a short payload in the value file was read"),
        }
    }

    #[test]
    fn a_damaged_cut_or_missing_value_is_named_by_its_event() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        let (rest, payload) = split(&frame(VALUE_MIN));
        let at = values.append(vec![(Seq(7), payload)]).expect("append")[0];
        let stored = stored_form(&rest, &at);
        let path = dir.path().join(VALUES_FILE);
        let named = |what: &str| {
            let fresh = ValueFile::in_dir(dir.path());
            match resolve(Seq(7), &stored, &fresh, VALUE_REF_FORMAT) {
                Err(Error::ChainBroken { seq: 7, what: said }) => {
                    assert!(said.contains("event 7") && said.contains(what), "{said}");
                }
                other => panic!(
                    "expected Corrupt ({what}), got {:?}",
                    other.map(|r| r.len())
                ),
            }
        };
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[100] ^= 1;
        std::fs::write(&path, &bytes).expect("flip");
        named("does not hash");
        bytes.truncate(1000);
        std::fs::write(&path, &bytes).expect("cut");
        named("ends at byte 1000");
        std::fs::remove_file(&path).expect("rm");
        named("missing");
        // A marker lowered below the stored form's format, and a reference forged to disagree
        // with the record's own length, are refused before any read.
        named_marker(&stored, &values);
        let mut forged = stored.clone();
        forged[9] ^= 1;
        assert!(matches!(
            resolve(Seq(7), &forged, &values, VALUE_REF_FORMAT),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            resolve(Seq(7), &stored[..20], &values, VALUE_REF_FORMAT),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn the_named_end_of_an_append_is_that_of_the_last_record_a_crash_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        values
            .append(vec![(Seq(1), vec![1; 100])])
            .expect("an earlier append");
        let seqs = [Seq(5), Seq(6), Seq(7)];
        let refs = values
            .append(seqs.iter().map(|s| (*s, vec![2; VALUE_MIN])).collect())
            .expect("append");
        let append = LastAppend::of(&seqs, &refs).expect("an append");
        assert_eq!(
            LastAppend::decode(&append.encode()).expect("decode"),
            append
        );
        assert!(LastAppend::decode(&[0; 31]).is_err());
        let stored = |upto: usize| {
            seqs.iter()
                .zip(&refs)
                .take(upto)
                .map(|(seq, at)| {
                    let mut rest = b"record".to_vec();
                    rest.extend_from_slice(&at.len.to_le_bytes());
                    Ok((*seq, sled::IVec::from(stored_form(&rest, at))))
                })
                .collect::<Vec<_>>()
        };
        let named = |upto| {
            append
                .named_end(stored(upto).into_iter(), VALUE_REF_FORMAT)
                .expect("named end")
        };
        let min = VALUE_MIN as u64;
        assert_eq!(named(0), 100, "no record kept: the append's start");
        assert_eq!(named(1), 100 + min);
        assert_eq!(named(2), 100 + 2 * min);
        assert_eq!(named(3), 100 + 3 * min);
    }

    fn named_marker(stored: &[u8], values: &ValueFile) {
        match resolve(Seq(7), stored, values, 12) {
            Err(Error::Corrupt { what }) => assert!(what.contains("marker"), "{what}"),
            other => panic!("expected Corrupt, got {:?}", other.map(|r| r.len())),
        }
    }

    #[test]
    fn a_file_cut_short_while_open_is_refused_at_the_next_append() {
        let dir = tempfile::tempdir().expect("dir");
        let values = ValueFile::in_dir(dir.path());
        values
            .append(vec![(Seq(1), vec![b'a'; 100])])
            .expect("append");
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(VALUES_FILE))
            .and_then(|f| f.set_len(10))
            .expect("cut");
        match values.append(vec![(Seq(2), vec![b'b'; 100])]) {
            Err(Error::Corrupt { what }) => assert!(what.contains("cut short"), "{what}"),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_link_or_a_pipe_in_place_of_the_value_file_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(VALUES_FILE)).expect("link");
        let values = ValueFile::in_dir(dir.path());
        assert!(matches!(
            values.append(vec![(Seq(1), b"x".to_vec())]),
            Err(Error::UnsafeFile { .. })
        ));
        let (rest, _) = split(&frame(VALUE_MIN));
        let at = ValueRef {
            offset: 0,
            len: u32::try_from(VALUE_MIN).expect("fits"),
            hash: [0; 32],
        };
        assert!(matches!(
            resolve(Seq(7), &stored_form(&rest, &at), &values, VALUE_REF_FORMAT),
            Err(Error::UnsafeFile { .. })
        ));
    }
}
