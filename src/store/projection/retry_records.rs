//! Retry records: what the index keeps of a call with a tool_use id (`t`), and the pools that
//! bound them (`T`, `U` shared; `V`, `W` per agent), oldest evicted first (see the
//! [projection](super) docs).

use super::Projection;
use super::keys::be_u64;
use crate::error::{Error, Result};
use crate::model::event::{EventHash, Seq};
use crate::model::tool::{Answer, Semantics};
use crate::store::kv::{KvRead, KvWrite};

/// How many retry records the index keeps: those of the last 65,536 calls that left one (calls
/// with a tool_use id). Part of the layout, like [`COLLECT_BUDGET`](super::COLLECT_BUDGET).
pub const RETRY_RECORDS: u64 = 65_536;

/// The longest answer text of a change that its retry record keeps whole. Longer ones (a
/// `str_replace` snippet of very long lines) keep their first line and a note. Part of the layout.
pub const RETRY_TEXT_MAX: usize = 16 * 1024;

const RETRY_SLOT_PREFIX: &[u8] = b"T";
const RETRY_NEXT_KEY: &[u8] = b"U";
const AGENT_SLOT_PREFIX: u8 = b'V';
const AGENT_NEXT_PREFIX: u8 = b'W';
const RETRY_ERROR: u8 = 1;
const RETRY_CHANGED: u8 = 2;
const RETRY_PER_AGENT: u8 = 4;
const RETRY_FLAGS_AT: usize = 16;
const RETRY_FIXED: usize = RETRY_FLAGS_AT + 1 + 32 + 32;

/// The `t` key of `agent`'s call with `tool_use_id`: where its retry record is kept.
pub(super) fn retry_key(agent: &str, tool_use_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + agent.len() + tool_use_id.len());
    k.push(b't');
    k.extend_from_slice(agent.as_bytes());
    k.push(0);
    k.extend_from_slice(tool_use_id.as_bytes());
    k
}

/// A retry record's pool: the one every agent shared (semantics 1 to 3), or an agent's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool<'a> {
    Shared,
    Agent(&'a str),
}

impl Pool<'_> {
    /// The key of slot `slot` of this pool.
    fn slot_key(self, slot: u64) -> Vec<u8> {
        match self {
            Pool::Shared => {
                let mut k = Vec::with_capacity(9);
                k.extend_from_slice(RETRY_SLOT_PREFIX);
                k.extend_from_slice(&slot.to_be_bytes());
                k
            }
            Pool::Agent(agent) => {
                let mut k = Vec::with_capacity(10 + agent.len());
                k.push(AGENT_SLOT_PREFIX);
                k.extend_from_slice(agent.as_bytes());
                k.push(0);
                k.extend_from_slice(&slot.to_be_bytes());
                k
            }
        }
    }

    /// The key of this pool's next record number.
    fn next_key(self) -> Vec<u8> {
        match self {
            Pool::Shared => RETRY_NEXT_KEY.to_vec(),
            Pool::Agent(agent) => {
                let mut k = Vec::with_capacity(1 + agent.len());
                k.push(AGENT_NEXT_PREFIX);
                k.extend_from_slice(agent.as_bytes());
                k
            }
        }
    }
}

/// What the index keeps of a call with a tool_use id, for its retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The seq of the call.
    pub seq: Seq,
    /// The record's number: how many records were made before it (its slot is this modulo
    /// [`RETRY_RECORDS`]).
    pub number: u64,
    /// Whether its result was an error.
    pub is_error: bool,
    /// Whether it is in its agent's own pool (a call answered under semantics 4) rather than the
    /// pool every agent shared.
    pub per_agent: bool,
    /// blake3 of its body's canonical bytes (its event's payload hash).
    pub input: EventHash,
    /// blake3 of its result text.
    pub answer: EventHash,
    /// For a call that changed the tree, the text its retries get (the result text, abridged
    /// past [`RETRY_TEXT_MAX`]); `None` for a call that changed nothing.
    pub text: Option<String>,
}

impl Recorded {
    fn encode(&self) -> Vec<u8> {
        let text = self.text.as_deref().unwrap_or_default();
        let mut v = Vec::with_capacity(RETRY_FIXED + text.len());
        v.extend_from_slice(&self.seq.0.to_be_bytes());
        v.extend_from_slice(&self.number.to_be_bytes());
        let changed = if self.text.is_some() {
            RETRY_CHANGED
        } else {
            0
        };
        let pool = if self.per_agent { RETRY_PER_AGENT } else { 0 };
        v.push(u8::from(self.is_error) | changed | pool);
        v.extend_from_slice(&self.input.0);
        v.extend_from_slice(&self.answer.0);
        v.extend_from_slice(text.as_bytes());
        v
    }

    fn decode(v: &[u8]) -> Result<Recorded> {
        let bad = |what: &str| Error::corrupt(format!("path index retry record {what}"));
        if v.len() < RETRY_FIXED {
            return Err(bad("is truncated"));
        }
        let flags = v[RETRY_FLAGS_AT];
        if flags & !(RETRY_ERROR | RETRY_CHANGED | RETRY_PER_AGENT) != 0 {
            return Err(bad("has unknown flags"));
        }
        let hash = |at: usize| {
            let mut h = [0; 32];
            h.copy_from_slice(&v[at..at + 32]);
            EventHash(h)
        };
        let rest = &v[RETRY_FIXED..];
        let text = if flags & RETRY_CHANGED != 0 {
            Some(
                std::str::from_utf8(rest)
                    .map_err(|_| bad("text is not UTF-8"))?
                    .to_string(),
            )
        } else if rest.is_empty() {
            None
        } else {
            return Err(bad("of a call that changed nothing holds a text"));
        };
        Ok(Recorded {
            seq: Seq(be_u64(&v[..8], "retry seq")?),
            number: be_u64(&v[8..16], "retry record number")?,
            is_error: flags & RETRY_ERROR != 0,
            per_agent: flags & RETRY_PER_AGENT != 0,
            input: hash(RETRY_FLAGS_AT + 1),
            answer: hash(RETRY_FLAGS_AT + 33),
            text,
        })
    }
}

/// The text a change's retries get: the whole text, or past [`RETRY_TEXT_MAX`] its first line
/// and a note.
fn repeat_text(seq: Seq, text: &str) -> String {
    if text.len() <= RETRY_TEXT_MAX {
        return text.to_string();
    }
    let first = text.split('\n').next().unwrap_or_default();
    let mut end = first.len().min(1024);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[This call was applied as event {seq}; the rest of its answer ({} bytes) is not kept for retries. View the file to see it as it is now.]",
        &first[..end],
        text.len() - end
    )
}

impl<K: KvRead> Projection<K> {
    /// The retry record of `agent`'s call with `tool_use_id`, if one is kept.
    pub fn recorded(&self, agent: &str, tool_use_id: &str) -> Result<Option<Recorded>> {
        self.kv
            .get_with(&retry_key(agent, tool_use_id), Recorded::decode)?
            .transpose()
    }

    /// How many retry records were ever made in `agent`'s own pool (calls answered under
    /// semantics 4), or with `None` in the pool every agent shared (semantics 1 to 3): the next
    /// record's number there.
    pub fn retry_records_made(&self, agent: Option<&str>) -> Result<u64> {
        let pool = agent.map_or(Pool::Shared, Pool::Agent);
        match self.kv.get(&pool.next_key())? {
            Some(v) => be_u64(&v, "next retry record number"),
            None => Ok(0),
        }
    }
}

impl<K: KvWrite> Projection<K> {
    /// Keeps the record of `agent`'s call `tool_use_id` at `seq` (answered under `semantics`),
    /// in place of `replaced` (the record of an earlier call with the id that changed nothing,
    /// whose slot it frees), in the next slot of its pool, evicting the record made
    /// [`RETRY_RECORDS`] records of that pool before it.
    pub(super) fn keep_record(
        &mut self,
        (agent, tool_use_id, seq, semantics): (&str, &str, Seq, Semantics),
        input: EventHash,
        answer: &Answer,
        replaced: Option<&Recorded>,
    ) -> Result<()> {
        let key = retry_key(agent, tool_use_id);
        if let Some(old) = replaced {
            let pool = if old.per_agent {
                Pool::Agent(agent)
            } else {
                Pool::Shared
            };
            self.kv.remove(&pool.slot_key(old.number % self.retry_cap));
        }
        let per_agent = semantics.retry_records_per_agent();
        let pool = if per_agent {
            Pool::Agent(agent)
        } else {
            Pool::Shared
        };
        let number = self.retry_records_made(per_agent.then_some(agent))?;
        self.kv.set(&pool.next_key(), &(number + 1).to_be_bytes());
        let slot = pool.slot_key(number % self.retry_cap);
        if let Some(evicted) = self.kv.get(&slot)? {
            // The slot names the record made `retry_cap` records ago (a replaced record freed
            // its slot), unless that is the key being kept now.
            if evicted != key {
                self.kv.remove(&evicted);
            }
        }
        let record = Recorded {
            seq,
            number,
            is_error: answer.is_error,
            per_agent,
            input,
            answer: EventHash::of(answer.text.as_bytes()),
            text: answer
                .change
                .as_ref()
                .map(|_| repeat_text(seq, &answer.text)),
        };
        self.kv.insert(slot, key.clone());
        self.kv.insert(key, record.encode());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{RetryKind, temporary_trees};
    use super::*;
    use crate::model::event::Body;
    use crate::model::tool::{Command, Limits, Profile};
    use crate::store::kv::{MemKv, Overlay};

    fn view(path: &str) -> Body {
        Body::Tool(crate::model::event::ToolCall {
            root: "/memories".into(),
            profile: Profile::Spec,
            limits: Limits::default(),
            command: Command::View {
                path: path.into(),
                view_range: None,
            },
        })
    }

    fn records(index: &Projection<MemKv>) -> Vec<&[u8]> {
        index
            .kv()
            .map
            .keys()
            .filter(|k| k[0] == b't')
            .map(|k| &k[1..])
            .collect()
    }

    /// Past the cap, each new record evicts the oldest one of its pool; a record replaced by a
    /// retry becomes the newest and frees its old slot. The same under both pools.
    #[test]
    fn retry_records_past_the_cap_evict_the_oldest() {
        for (semantics, slot_prefix, agent) in [
            (Semantics::V3, b'T', None),
            (Semantics::V4, b'V', Some("a")),
        ] {
            let mut index = Projection::new(MemKv::default());
            index.retry_cap = 3;
            let mut seq = 0;
            let mut run = |index: &mut Projection<MemKv>, id: &str| {
                seq += 1;
                index
                    .run_traced(
                        crate::store::projection::Caller::new("a", Some(id), semantics),
                        &view("/memories"),
                        None,
                        Seq(seq),
                    )
                    .expect("run")
            };
            for id in ["1", "2", "3"] {
                assert_eq!(run(&mut index, id).retry, None);
            }
            // A retry of "1" replaces its record, which becomes the newest.
            let again = run(&mut index, "1").retry.expect("a retry");
            assert_eq!((again.of, again.kind), (Seq(1), RetryKind::Reanswered));
            assert_eq!(records(&index).len(), 3);
            // "4" evicts "2", the oldest now; "5" evicts "3".
            run(&mut index, "4");
            run(&mut index, "5");
            assert_eq!(records(&index), [b"a\x001", b"a\x004", b"a\x005"]);
            let slots = index
                .kv()
                .map
                .keys()
                .filter(|k| k[0] == slot_prefix)
                .count();
            assert_eq!(slots, 3, "{semantics}");
            // An evicted id runs as a new call: no retry, a new record, and "1" goes.
            assert_eq!(run(&mut index, "2").retry, None);
            assert_eq!(records(&index), [b"a\x002", b"a\x004", b"a\x005"]);
            assert_eq!(index.retry_records_made(agent).expect("count"), 7);
        }
    }

    /// Before (semantics 1 to 3, one pool): another agent's calls evicted an agent's records,
    /// so its retry of a change ran twice. Under semantics 4 an agent's calls evict only its own
    /// records, and a record kept under the shared pool is freed from it when its retry keeps
    /// the new record in the agent's pool.
    #[test]
    fn another_agents_calls_never_evict_an_agents_records_under_semantics_four() {
        let create = |n: u64| {
            Body::Tool(crate::model::event::ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command: Command::Create {
                    path: format!("/memories/n{n}.md"),
                    file_text: "x\n".into(),
                },
            })
        };
        for semantics in [Semantics::V3, Semantics::V4] {
            let mut index = Projection::new(MemKv::default());
            index.retry_cap = 4;
            let mut seq = 0;
            let mut run = |index: &mut Projection<MemKv>, agent: &str, id: &str, body: &Body| {
                seq += 1;
                index
                    .run_traced(
                        crate::store::projection::Caller::new(agent, Some(id), semantics),
                        body,
                        None,
                        Seq(seq),
                    )
                    .expect("run")
            };
            run(&mut index, "a", "write", &create(0));
            for i in 0..10 {
                run(&mut index, "b", &format!("flood-{i}"), &view("/memories"));
            }
            let retry = run(&mut index, "a", "write", &create(0));
            match semantics {
                Semantics::V3 => assert_eq!(retry.retry, None, "the shared pool evicted it"),
                _ => {
                    let retry = retry.retry.expect("a's record is kept");
                    // Repeated: the recorded text, nothing run again.
                    assert_eq!((retry.of, retry.kind), (Seq(1), RetryKind::Repeated));
                }
            }
        }
        // A record of the shared pool, retried under semantics 4 after a read: moved to the
        // agent's pool, its shared slot freed.
        let mut index = Projection::new(MemKv::default());
        index.retry_cap = 4;
        let body = view("/memories");
        index
            .run_traced(
                crate::store::projection::Caller::new("a", Some("r"), Semantics::V3),
                &body,
                None,
                Seq(1),
            )
            .expect("run");
        index
            .run_traced(
                crate::store::projection::Caller::new("a", Some("r"), Semantics::V4),
                &body,
                None,
                Seq(2),
            )
            .expect("run");
        assert_eq!(index.kv().map.keys().filter(|k| k[0] == b'T').count(), 0);
        assert_eq!(index.kv().map.keys().filter(|k| k[0] == b'V').count(), 1);
        let kept = index.recorded("a", "r").expect("read").expect("kept");
        assert!(kept.per_agent && kept.seq == Seq(2), "{kept:?}");
    }

    /// The writer runs calls over an overlay whose changes reach sled in batches; the verifier
    /// replays into memory. Both keep and evict exactly the same records.
    #[test]
    fn eviction_over_an_overlay_matches_the_replay_in_memory() {
        let (_db, trees) = temporary_trees();
        let tree = trees.index();
        let mut replay = Projection::new(MemKv::default());
        replay.retry_cap = 4;
        let mut pending = crate::store::kv::Pending::default();
        let write = |pending: &crate::store::kv::Pending| {
            for (key, value) in pending.writes() {
                match value {
                    Some(value) => tree.insert(key, value).map(|_| ()),
                    None => tree.remove(key).map(|_| ()),
                }
                .expect("write");
            }
        };
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        for seq in 1..=300 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let id = format!("{}", rng % 9);
            let body = view(if rng % 5 == 0 {
                "/memories/x"
            } else {
                "/memories"
            });
            let agent = if rng % 7 == 0 { "b" } else { "a" };
            // Both pools, records moving from the shared one to an agent's.
            let semantics = if rng % 3 == 0 {
                Semantics::V3
            } else {
                Semantics::V4
            };
            let mut live = Projection::new(Overlay::resume(&trees, None, pending));
            live.retry_cap = 4;
            let ours = live
                .run_traced(
                    crate::store::projection::Caller::new(agent, Some(&id), semantics),
                    &body,
                    None,
                    Seq(seq),
                )
                .expect("run live");
            pending = live.into_inner().into_pending();
            let theirs = replay
                .run_traced(
                    crate::store::projection::Caller::new(agent, Some(&id), semantics),
                    &body,
                    None,
                    Seq(seq),
                )
                .expect("run replay");
            assert_eq!(ours, theirs, "seq {seq}");
            if seq % 11 == 0 {
                write(&pending);
                pending = crate::store::kv::Pending::default();
            }
        }
        write(&pending);
        let stored: Vec<(Vec<u8>, Vec<u8>)> = tree
            .iter()
            .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("read"))
            .collect();
        let replayed: Vec<(Vec<u8>, Vec<u8>)> = replay.kv().map.clone().into_iter().collect();
        assert_eq!(stored, replayed);
        // The shared pool and each agent's own hold at most the cap each.
        assert!(replayed.iter().filter(|(k, _)| k[0] == b't').count() <= 4 * 3);
        assert!(replayed.iter().filter(|(k, _)| k[0] == b'T').count() <= 4);
        assert!(replayed.iter().filter(|(k, _)| k[0] == b'V').count() <= 4 * 2);
    }

    #[test]
    fn a_long_change_answer_is_kept_abridged() {
        let short = "File created successfully at: /memories/a";
        assert_eq!(repeat_text(Seq(3), short), short);
        let long = format!(
            "The memory file has been edited.\n{}",
            "x".repeat(RETRY_TEXT_MAX)
        );
        let kept = repeat_text(Seq(3), &long);
        assert!(kept.len() < 1024, "{}", kept.len());
        assert!(
            kept.starts_with("The memory file has been edited.\n[This call was applied as event 3")
        );
    }

    #[test]
    fn a_retry_record_round_trips_and_rejects_garbage() {
        let record = Recorded {
            seq: Seq(7),
            number: 3,
            is_error: false,
            per_agent: true,
            input: EventHash([1; 32]),
            answer: EventHash([2; 32]),
            text: Some("done".into()),
        };
        assert_eq!(Recorded::decode(&record.encode()).expect("decode"), record);
        let read = Recorded {
            text: None,
            is_error: true,
            per_agent: false,
            ..record.clone()
        };
        assert_eq!(Recorded::decode(&read.encode()).expect("decode"), read);
        let mut bad = read.encode();
        bad.push(b'x');
        assert!(Recorded::decode(&bad).is_err());
        let mut flags = record.encode();
        flags[RETRY_FLAGS_AT] = 0x80;
        assert!(Recorded::decode(&flags).is_err());
        assert!(Recorded::decode(&[0; 10]).is_err());
    }
}
