//! A redaction's plan: the selection closed over what depends on it (the events whose answers
//! showed what it erases, and the later events built on it), by a replay of the log as it is
//! beside one with the erasure, and what it must refuse (an admin event, a live file changed).

use super::*;
/// The events of `store`'s log, decoded, in seq order.
pub(super) fn events(store: &Store) -> impl Iterator<Item = Result<Event>> + use<> {
    store.records(Seq(1)).map(|item| Event::decode(&item?.1))
}

/// Whether `event` is the policy's history (grants, tokens, redactions), which is never erased.
pub(super) fn is_admin(event: &Event) -> bool {
    matches!(event.body, Body::Admin(_))
}

/// The canonical paths `event` named (none for admin and erased events).
pub(super) fn named(event: &Event) -> Vec<String> {
    if is_admin(event) {
        return Vec::new();
    }
    describe(event).1
}

/// A rejected call's raw input: as received, and with the escapes a JSON string may hold
/// decoded (`\u005A` is `Z`), so that a redaction by text or path finds what it spells.
pub(super) fn rejected_input(event: &Event) -> Option<(String, String)> {
    match &event.body {
        Body::Rejected(call) => Some((call.input.clone(), json_unescaped(&call.input))),
        _ => None,
    }
}

/// `text` with every JSON string escape in it decoded, leniently: an escape that is not one is
/// kept as it is (the input was rejected, so it need not be valid JSON).
pub(super) fn json_unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (decoded, used) = unescape_one(rest);
        match decoded {
            Some(c) => out.push(c),
            None => out.push_str(&rest[..used]),
        }
        rest = &rest[used..];
    }
    out.push_str(rest);
    out
}

/// The character the escape at the start of `text` (which starts with `\`) stands for, and
/// how many bytes it took; `None` (one byte taken) for a backslash that starts no escape.
pub(super) fn unescape_one(text: &str) -> (Option<char>, usize) {
    let bytes = text.as_bytes();
    let simple = match bytes.get(1) {
        Some(b'"') => Some('"'),
        Some(b'\\') => Some('\\'),
        Some(b'/') => Some('/'),
        Some(b'b') => Some('\u{8}'),
        Some(b'f') => Some('\u{c}'),
        Some(b'n') => Some('\n'),
        Some(b'r') => Some('\r'),
        Some(b't') => Some('\t'),
        _ => None,
    };
    if simple.is_some() {
        return (simple, 2);
    }
    let unit = |at: usize| {
        text.get(at..at + 6)
            .and_then(|s| s.strip_prefix("\\u"))
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
    };
    match unit(0) {
        Some(high @ 0xD800..=0xDBFF) => match unit(6) {
            Some(low @ 0xDC00..=0xDFFF) => (
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)),
                12,
            ),
            _ => (None, 1),
        },
        Some(code) => match char::from_u32(code) {
            Some(c) => (Some(c), 6),
            None => (None, 1),
        },
        None => (None, 1),
    }
}

pub(super) fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/') || prefix.ends_with('/'))
}

/// What to erase in `store` for `selection`: the chosen events and every event whose recorded
/// answer depends on them (see the module docs). Reads the log; writes nothing.
pub fn plan(store: &Store, selection: &Selection) -> Result<Plan> {
    plan_with(store, selection, None)
}

/// [`plan`], also choosing every event of the files the delete at `deleted_by` removed (each
/// followed by identity through its renames): what the setting `delete` = `erase` erases.
pub(super) fn plan_with(
    store: &Store,
    selection: &Selection,
    deleted_by: Option<Seq>,
) -> Result<Plan> {
    if selection.seqs.is_empty()
        && selection.paths.is_empty()
        && selection.texts.is_empty()
        && deleted_by.is_none()
    {
        return Err(Error::InvalidArgument(
            "say what to erase: events by seq, paths or texts (--seq N, --path PATH or --text STRING, each may be repeated; \"seqs\", \"paths\" and \"texts\" over HTTP)"
                .into(),
        ));
    }
    let head = store.log_end()?;
    let mut chosen = BTreeSet::new();
    for seq in &selection.seqs {
        if seq.0 == 0 || *seq > head.seq {
            return Err(Error::InvalidArgument(format!(
                "there is no event {seq}: the log holds events 1 to {}",
                head.seq
            )));
        }
        chosen.insert(*seq);
    }
    let prefixes = selection
        .paths
        .iter()
        .map(|raw| {
            MemPath::absolute(raw)
                .map(|p| p.to_string())
                .map_err(|why| {
                    Error::InvalidArgument(format!(
                        "the path {}: {why}",
                        Semantics::CURRENT.quote(raw)
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    if selection.texts.iter().any(String::is_empty) {
        return Err(Error::InvalidArgument(
            "a text to erase must not be empty: every event would match".into(),
        ));
    }
    let texts: Vec<&[u8]> = selection.texts.iter().map(|t| t.as_bytes()).collect();
    // Events by path and by input; answers that held a text, and the files that lived under a
    // path (followed by identity through renames), need a replay of the whole log.
    let mut replay =
        (!texts.is_empty() || !prefixes.is_empty() || deleted_by.is_some()).then(Replay::in_memory);
    let mut files = Files::default();
    // Per file, the events that touched it and the paths each named.
    let mut touched: BTreeMap<u64, Vec<(Seq, Vec<String>)>> = BTreeMap::new();
    let mut deleted = Vec::new();
    let mut unsearched = Vec::new();
    for event in events(store) {
        let event = event?;
        let answer = match replay.as_mut() {
            Some(replay) => {
                let traced = replay.apply(&event)?;
                let (named, ids) = files.observe(&event, traced.answer.change.as_ref());
                let named: Vec<String> = named.iter().map(MemPath::to_string).collect();
                for id in ids {
                    touched
                        .entry(id)
                        .or_default()
                        .push((event.seq, named.clone()));
                    if Some(event.seq) == deleted_by {
                        deleted.push(id);
                    }
                }
                traced.answer.text
            }
            None => String::new(),
        };
        // Only a text is looked for in the payload.
        let payload = if texts.is_empty() {
            Vec::new()
        } else {
            event.payload_bytes()
        };
        // What is never erased must not hold a text to erase: the redaction would leave it.
        let header = [
            Some(event.header.agent.as_str()),
            event.header.tool_use_id.as_deref(),
        ];
        if let Some(text) = selection.texts.iter().find(|t| {
            header.iter().flatten().any(|h| h.contains(t.as_str()))
                || (is_admin(&event) && contains(&payload, t.as_bytes()))
        }) {
            return Err(Error::InvalidArgument(format!(
                "event {} holds {} where a redaction keeps it (an agent name, a tool_use id, or an admin event: a grant, a token or a redaction), so it cannot be erased; nothing was changed",
                event.seq,
                Semantics::CURRENT.quote(text)
            )));
        }
        if is_admin(&event) {
            if chosen.contains(&event.seq) {
                return Err(refused_admin(event.seq));
            }
            continue;
        }
        if !texts.is_empty() && keeps_part(&event) {
            unsearched.push(event.seq);
        }
        // A rejected raw input names no path the index knows, and may spell a text with JSON
        // escapes: it is searched as received and as a JSON string would decode it.
        let raw = rejected_input(&event);
        if named(&event)
            .iter()
            .any(|p| prefixes.iter().any(|prefix| under(p, prefix)))
            || raw.as_ref().is_some_and(|(received, decoded)| {
                prefixes.iter().any(|prefix| {
                    received.contains(prefix.as_str()) || decoded.contains(prefix.as_str())
                })
            })
            || texts.iter().any(|t| {
                contains(&payload, t)
                    || contains(answer.as_bytes(), t)
                    || raw
                        .as_ref()
                        .is_some_and(|(_, decoded)| contains(decoded.as_bytes(), t))
            })
        {
            chosen.insert(event.seq);
        }
    }
    // A file that ever lived under a path chosen, or that the delete removed: its whole
    // history, under every name it had. Only the events that named the file itself hold its
    // name or content: a rename or delete of a directory above it names the directory, and is
    // erased only if erasing the file changes its answer (the closure below), so the other files
    // it moved keep their history.
    for (id, paths) in files.paths() {
        if deleted.contains(id)
            || paths
                .iter()
                .any(|p| prefixes.iter().any(|prefix| under(p, prefix)))
        {
            for (seq, named) in touched.remove(id).unwrap_or_default() {
                if named.iter().any(|n| paths.contains(n)) {
                    chosen.insert(seq);
                }
            }
        }
    }
    // Chosen by seq alone, an event's erasure keeps what it did to the tree, so the versions
    // after it re-derive, and must leave every live file as it is.
    let keep = selection.paths.is_empty() && selection.texts.is_empty() && deleted_by.is_none();
    for _ in 0..MAX_ROUNDS {
        let (plan, left) = close(store, &chosen, &texts, keep)?;
        let found: Vec<String> = left
            .iter()
            .filter(|(_, content)| texts.iter().any(|t| contains(content.as_bytes(), t)))
            .map(|(path, _)| path.clone())
            .collect();
        if found.is_empty() {
            let unsearched = unsearched
                .into_iter()
                .filter(|s| !plan.seqs.contains(s))
                .collect();
            return Ok(Plan { unsearched, ..plan });
        }
        // A file left holds the text: erase every event that named it.
        let before = plan.seqs.len();
        chosen = plan.seqs.into_iter().collect();
        for event in events(store) {
            let event = event?;
            if named(&event).iter().any(|p| found.contains(p)) {
                chosen.insert(event.seq);
            }
        }
        if chosen.len() == before {
            return Err(Error::InvalidArgument(format!(
                "the text is still in {} after every event that named it would be erased; nothing was changed",
                found.join(", ")
            )));
        }
    }
    Err(Error::InvalidArgument(
        "the erasure did not settle; redact by --path or --seq instead; nothing was changed".into(),
    ))
}

/// Whether the event keeps only part of its input: a digest whose kept start is shorter than
/// the input, past which a text may lie unseen, or that is not the input's bytes (an input that
/// is not UTF-8 keeps its start decoded, each invalid sequence made U+FFFD, so a text between
/// them is not there to find).
pub(super) fn keeps_part(event: &Event) -> bool {
    matches!(&event.body, Body::RejectedDigest(d)
        if d.input.len > d.input.prefix.len() as u64
            || matches!(d.refusal, crate::model::event::Refusal::NotUtf8 { .. })
            || d.input.prefix.contains('\u{FFFD}'))
}

/// Why a redaction by seq that would change live files is refused, and what to do instead.
pub fn refused_live(plan: &Plan) -> String {
    format!(
        "erasing event(s) {} would change what the store holds now: {}; a redaction by seq erases versions a file has moved past, never its current content: update or delete the file first, then redact (or erase the file with its whole history: --path, \"paths\" over HTTP); nothing was changed",
        listed(&plan.seqs),
        plan.live.join("; ")
    )
}

pub(super) fn refused_admin(seq: Seq) -> Error {
    Error::InvalidArgument(format!(
        "event {seq} is an admin event (a grant, a token or a redaction): the policy's history is never erased; choose memory-tool events"
    ))
}

pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A file of the tree a redaction leaves: its path and content.
type FileLeft = (String, String);

/// Whether a file the event named (or one under a directory it named) holds one of `texts`, in
/// its path or its content, in the tree after it: a text pieced together by edits or a rename
/// that no input or answer held whole.
pub(super) fn makes_text(
    tree: &Projection<UndoKv>,
    event: &Event,
    texts: &[&[u8]],
) -> Result<bool> {
    if texts.is_empty() {
        return Ok(false);
    }
    for raw in named(event) {
        let Ok(path) = MemPath::absolute(&raw) else {
            continue;
        };
        for record in tree.records_under(&path)? {
            if texts.iter().any(|t| {
                contains(record.path.as_bytes(), t) || contains(record.content.as_bytes(), t)
            }) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `chosen` closed over what depends on it: replays the log skipping the chosen events, and
/// erases every other event whose answer then differs from its recorded one, or that leaves one
/// of `texts` in a file it touched (skipping it in turn). Events an earlier redaction erased are
/// not erased again. With `keep`, an erased event keeps what it did to the tree (its change as
/// the log made it, content as a digest: [`Kept`]) instead of being skipped, and the plan names
/// the live files the erasure would change. Returns the plan and the files left (path, content).
pub(super) fn close(
    store: &Store,
    chosen: &BTreeSet<Seq>,
    texts: &[&[u8]],
    keep: bool,
) -> Result<(Plan, Vec<FileLeft>)> {
    let mut erased = chosen.clone();
    let mut kept_effects = BTreeMap::new();
    let mut paths: Vec<String> = Vec::new();
    let mut erase = |event: &Event, erased: &mut BTreeSet<Seq>| {
        erased.insert(event.seq);
        for path in named(event) {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    };
    let mut replay = Replay::resume(Projection::new(UndoKv::default()))?;
    // With `keep`, the log as it is, for what each event did and for the live tree.
    let mut original = keep
        .then(|| Replay::resume(Projection::new(UndoKv::default())))
        .transpose()?;
    for event in events(store) {
        let event = event?;
        if let Body::Erased(_) = event.body {
            erased.remove(&event.seq);
            replay.apply(&event)?;
            if let Some(original) = original.as_mut() {
                original.apply(&event)?;
            }
            continue;
        }
        let did = match original.as_mut() {
            Some(original) => {
                let by_api = matches!(event.body, Body::Api(_));
                let traced = original.apply(&event)?;
                traced
                    .answer
                    .change
                    .as_ref()
                    .and_then(|change| Kept::of(change, by_api))
            }
            None => None,
        };
        let mut erase_keeping =
            |event: &Event, erased: &mut BTreeSet<Seq>, replay: &mut Replay<_>| {
                erase(event, erased);
                if let Some(kept) = &did {
                    kept_effects.insert(event.seq, kept.clone());
                }
                replay.apply(&event.erased_keeping(did.clone()))
            };
        if erased.contains(&event.seq) {
            erase_keeping(&event, &mut erased, &mut replay)?;
            continue;
        }
        replay.tree_mut().kv_mut().begin();
        let placeholders = replay.tree().placeholders().clone();
        let traced = replay.apply(&event)?;
        let same =
            event.outcome_of(traced.answer.is_error, &traced.answer.text) == event.header.outcome;
        // An edit of erased content (an insert, a str_replace: not a write of whole content)
        // carries it on, whatever its answer showed: erased with it, keeping what it did.
        let edits_erased = !placeholders.is_empty()
            && edits_in_place(&event)
            && edited_placeholder(replay.tree(), traced.answer.change.as_ref(), &placeholders)?;
        if !same || edits_erased || (!is_admin(&event) && makes_text(replay.tree(), &event, texts)?)
        {
            if is_admin(&event) {
                return Err(Error::InvalidArgument(format!(
                    "erasing what was chosen would change the answer of admin event {}; nothing was changed",
                    event.seq
                )));
            }
            replay.tree_mut().kv_mut().rollback();
            replay.tree_mut().restore_placeholders(placeholders);
            erase_keeping(&event, &mut erased, &mut replay)?;
        }
    }
    let root = MemPath::absolute("/").map_err(Error::InvalidArgument)?;
    let records = replay.tree().records_under(&root)?;
    let live = match &original {
        Some(original) => changed_live(&original.tree().records_under(&root)?, &records),
        None => Vec::new(),
    };
    let left = records.into_iter().map(|r| (r.path, r.content)).collect();
    let plan = Plan {
        seqs: erased.into_iter().collect(),
        kept: kept_effects,
        live,
        paths,
        unsearched: Vec::new(),
    };
    Ok((plan, left))
}

/// Whether `event` changes a file's content from what it held (a memory-tool `str_replace` or
/// `insert`), rather than writing whole content (a `create`, an API write).
pub(super) fn edits_in_place(event: &Event) -> bool {
    matches!(&event.body, Body::Tool(call) if matches!(
        call.command,
        crate::model::tool::Command::StrReplace { .. } | crate::model::tool::Command::Insert { .. }
    ))
}

/// Whether `change` wrote to a file that held a redaction's placeholder (one of `before`, by
/// identity) before it ran.
pub(super) fn edited_placeholder(
    tree: &Projection<UndoKv>,
    change: Option<&crate::model::tool::Change>,
    before: &crate::store::projection::Placeholders,
) -> Result<bool> {
    use crate::model::tool::{Change, Tree};
    let path = match change {
        Some(Change::Write { path, .. } | Change::Rewrite { to: path, .. }) => path,
        _ => return Ok(false),
    };
    Ok(tree
        .created(path)?
        .is_some_and(|created| before.contains_key(&created)))
}

/// The live files (`now`) that the tree an erasure leaves (`left`) does not hold as they are:
/// gone, holding other content (a redaction's placeholder), or in their place a file that is not.
pub(super) fn changed_live(
    now: &[crate::store::projection::MemoryRecord],
    left: &[crate::store::projection::MemoryRecord],
) -> Vec<String> {
    let left_at: BTreeMap<&str, &crate::store::projection::MemoryRecord> =
        left.iter().map(|r| (r.path.as_str(), r)).collect();
    let now_at: BTreeSet<&str> = now.iter().map(|r| r.path.as_str()).collect();
    let mut out = Vec::new();
    for file in now {
        match left_at.get(file.path.as_str()) {
            None => out.push(format!("{} would be gone", file.path)),
            Some(after) if after.created != file.created => {
                out.push(format!("{} would be another file", file.path))
            }
            Some(after) if after.content != file.content => out.push(format!(
                "{} holds content the erased events wrote (its current version)",
                file.path
            )),
            Some(_) => {}
        }
    }
    for file in left {
        if !now_at.contains(file.path.as_str()) {
            out.push(format!("{} would come back (it was deleted)", file.path));
        }
    }
    out
}
