//! A redaction written: a copy of the store with the plan's events erased (each keeping what
//! it did to the tree when the plan says so) and the redaction's own event, verified, then
//! exchanged with the store in one step; the copy made private like the store, first.

use super::*;
/// The directory beside `store` a redaction writes the new store into.
pub(super) fn sibling(store: &Path, tag: &str) -> Result<PathBuf> {
    Ok(parent_of(store).join(redaction_prefix(store)? + tag))
}

/// Erases from the store at `path` what `selection` chooses ([`plan()`]), recorded as a redaction
/// by `operator` for `reason`; durable and gone from the store's directory when it returns. The
/// store must not be open elsewhere (a server holding it makes this [`Error::Locked`]).
pub fn redact(
    path: &Path,
    operator: &str,
    reason: &str,
    selection: &Selection,
) -> Result<Redacted> {
    redact_with(path, operator, reason, selection, None)
}

/// [`redact`], also erasing the files the delete at `deleted_by` removed ([`plan_with`]).
pub(super) fn redact_with(
    path: &Path,
    operator: &str,
    reason: &str,
    selection: &Selection,
    deleted_by: Option<Seq>,
) -> Result<Redacted> {
    check_reason(reason).map_err(Error::InvalidArgument)?;
    crate::model::policy::check_agent_id(operator).map_err(Error::InvalidArgument)?;
    if !selection.texts.iter().any(String::is_empty) {
        if let Some(text) = selection
            .texts
            .iter()
            .find(|t| reason.contains(t.as_str()) || operator.contains(t.as_str()))
        {
            return Err(Error::InvalidArgument(format!(
                "the reason or the operator's name holds {}, and the redaction keeps both, so nothing was changed; give them without it",
                Semantics::CURRENT.quote(text)
            )));
        }
    }
    // Planned and copied from a read-only copy of the store, so a refused redaction changes no
    // byte of it; the store is opened for writing only to exchange it, once the copy is whole.
    let source = Store::open_current_read_only(path)?;
    let plan = plan_with(&source, selection, deleted_by)?;
    if !plan.live.is_empty() {
        return Err(Error::InvalidArgument(refused_live(&plan)));
    }
    if plan.seqs.is_empty() {
        return Err(Error::InvalidArgument(
            format!(
                "nothing in the log matches what was chosen; nothing was changed\n{}",
                plan.unsearched_note()
            )
            .trim_end()
            .to_string(),
        ));
    }
    let head = source.log_end()?;
    let tag =
        crate::client::token::random_hex(8).map_err(|e| Error::io("the OS random source", e))?;
    let new = sibling(path, &tag)?;
    let written = private_like(path, &new)
        .and_then(|()| write_redacted(&source, &new, &plan, head, operator, reason))
        .and_then(|seq| {
            same_access(path, &new)?;
            Ok(seq)
        })
        .and_then(|seq| {
        // Last, the bytes: a text that is still anywhere in the copy (in sled's own names, say)
        // would be left by this redaction, which then does not happen.
        for text in &selection.texts {
            if let Some(file) = holding(&new, text.as_bytes())? {
                return Err(Error::InvalidArgument(format!(
                    "{} would still be in the store's own files ({file}: sled's names or a field every redaction keeps), so it cannot be erased; nothing was changed",
                    Semantics::CURRENT.quote(text)
                )));
            }
        }
        Ok(seq)
    });
    drop(source);
    let exchanged = written.and_then(|seq| {
        let store = Store::open_existing(path)?;
        if store.log_end()? != head {
            return Err(Error::InvalidArgument(
                "the store took a write while it was being redacted, so nothing was changed; run the redaction again (with no writer using the store)".into(),
            ));
        }
        remove_redaction_leftovers(path, Some(&tag))?;
        // A server redacting the store it holds stays findable in the new one, and the owner's
        // signing key stays.
        crate::store::disk::carry_own_files(path, &new)?;
        exchange(&new, path)?;
        sync_parent(path)?;
        Ok((seq, store))
    });
    let (seq, store) = match exchanged {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&new);
            return Err(e);
        }
    };
    drop(store);
    // `new` now names the old store.
    match std::fs::remove_dir_all(&new) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("the store as it was before", e)),
    }
    sync_parent(path)?;
    Ok(Redacted { plan, seq })
}

/// Writes the redacted copy of `store` (whose log ends at `head`) into `new`, verified and
/// durable; returns the seq of the redaction's event.
pub(super) fn write_redacted(
    store: &Store,
    new: &Path,
    plan: &Plan,
    head: Head,
    operator: &str,
    reason: &str,
) -> Result<Seq> {
    let copy = Store::open(new)?;
    let erased: BTreeSet<Seq> = plan.seqs.iter().copied().collect();
    let mut batch = Vec::with_capacity(256);
    for item in store.records(Seq(1)) {
        let (seq, record) = item?;
        if seq > head.seq {
            break;
        }
        let frame = if erased.contains(&seq) {
            Event::decode(&record)?
                .erased_keeping(plan.kept.get(&seq).cloned())
                .to_frame()
        } else {
            Frame::decode(&record)?
        };
        batch.push(frame);
        if batch.len() == batch.capacity() {
            copy.append(&batch)?;
            batch.clear();
        }
    }
    let body = Body::Admin(AdminCommand::Redact {
        reason: reason.to_string(),
        seqs: plan.seqs.iter().map(|s| s.0).collect(),
        kept: plan
            .kept
            .iter()
            .map(|(seq, kept)| (seq.0, kept_digest(kept)))
            .collect(),
    });
    let salt = Salt::random()?;
    let answer = crate::model::tool::answer(
        &Projection::new(crate::store::kv::MemKv::default()),
        operator,
        &body,
        Semantics::CURRENT,
    )?;
    let seq = Seq(head.seq.0 + 1);
    let event = Event::answered(
        seq,
        head.hash,
        operator,
        crate::model::time::now_ms(),
        body,
        &answer,
        salt,
    );
    batch.push(event.to_frame());
    let head = copy.append(&batch)?;
    copy.catch_up()?;
    copy.sync(Durability::Fsync)?;
    copy.record_head(head)?;
    let report = verify_store(&copy)?;
    if !report.is_intact() {
        return Err(Error::corrupt(format!(
            "the redacted copy does not verify ({:?}); nothing was changed",
            report.violations.first()
        )));
    }
    Ok(seq)
}

/// Makes the directory `new` with the permissions and owner of the store at `store`, before
/// anything is written in it: a store only its owner may read gives no one else a moment's look
/// at its copy. (An empty directory's permissions are what [`Store::open`] gives a new store.)
pub(super) fn private_like(store: &Path, new: &Path) -> Result<()> {
    let meta = std::fs::metadata(store).map_err(|e| Error::io(store, e))?;
    std::fs::create_dir(new).map_err(|e| Error::io(new, e))?;
    std::fs::set_permissions(new, meta.permissions()).map_err(|e| Error::io(new, e))?;
    owned_like(new, &meta)
}

/// Gives `path` the owner and group `like` has, when they are not this process's (the
/// superuser redacting another user's store); an unprivileged owner's own files need nothing.
pub(super) fn owned_like(path: &Path, like: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let here = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if (here.uid(), here.gid()) != (like.uid(), like.gid()) {
        std::os::unix::fs::lchown(path, Some(like.uid()), Some(like.gid()))
            .map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Gives every file and directory of the redacted copy `new` the permissions and owner of its
/// namesake in the store at `store` (a file sled names anew takes those of the store's `db`, a
/// directory those of the store's directory), and makes them durable: sled creates its files
/// as the umask says, and a store kept `0600` must not come back readable by all.
pub(super) fn same_access(store: &Path, new: &Path) -> Result<()> {
    let db = std::fs::metadata(store.join("db")).map_err(|e| Error::io(store, e))?;
    let top = std::fs::metadata(store).map_err(|e| Error::io(store, e))?;
    std::fs::set_permissions(new, top.permissions()).map_err(|e| Error::io(new, e))?;
    owned_like(new, &top)?;
    let mut todo = vec![std::path::PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for entry in std::fs::read_dir(new.join(&rel)).map_err(|e| Error::io(new, e))? {
            let entry = entry.map_err(|e| Error::io(new, e))?;
            let kind = entry.file_type().map_err(|e| Error::io(new, e))?;
            let rel = rel.join(entry.file_name());
            let like = match std::fs::symlink_metadata(store.join(&rel)) {
                Ok(old) if old.file_type() == kind => old,
                _ if kind.is_dir() => top.clone(),
                _ => db.clone(),
            };
            if kind.is_dir() {
                todo.push(rel.clone());
            } else if !kind.is_file() {
                continue;
            }
            let path = entry.path();
            std::fs::set_permissions(&path, like.permissions()).map_err(|e| Error::io(&path, e))?;
            owned_like(&path, &like)?;
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    std::fs::File::open(new)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(new, e))
}

/// The first file under `dir` (links not followed) whose bytes hold `needle`, by name.
pub(super) fn holding(dir: &Path, needle: &[u8]) -> Result<Option<String>> {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| Error::io("the redacted copy", e))? {
            let entry = entry.map_err(|e| Error::io("the redacted copy", e))?;
            let kind = entry
                .file_type()
                .map_err(|e| Error::io("the redacted copy", e))?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                let bytes =
                    std::fs::read(entry.path()).map_err(|e| Error::io("the redacted copy", e))?;
                if contains(&bytes, needle) {
                    return Ok(Some(entry.file_name().to_string_lossy().into_owned()));
                }
            }
        }
    }
    Ok(None)
}

/// Exchanges the directories `a` and `b` in one atomic step.
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(|e| Error::io("exchanging the redacted store for the old one", e.into()))
}

pub(super) fn sync_parent(path: &Path) -> Result<()> {
    std::fs::File::open(parent_of(path))
        .and_then(|dir| dir.sync_all())
        .map_err(|e| Error::io("the store's directory, after the redaction", e))
}
