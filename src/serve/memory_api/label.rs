//! A memory store's label: the name, description and metadata the API gives a store, when it
//! was created and changed, and whether it is archived. The label is chained: each change is an
//! admin event ([`crate::AdminCommand::Label`], the whole label as JSON) recorded under the
//! operator, and the store's index keeps the last one, which the memory tool's and the API's
//! writes read (an archived store's files are never created or changed). A copy is kept beside
//! the log in the store directory's file `mnemo-memory-store.json` (mode 0600, replaced whole
//! and durably after each change), for the one reader that does not open every store: the list
//! of stores; `verify` names a copy that differs from the chained label. A label an earlier build
//! kept only in that file is chained the first time the API names its store. A store made
//! without the API (`mnemo store create`, `POST /v1/stores`) has no label until one is set, and
//! reads as named after its directory.
//!
//! On a fleet's node the list of stores is the fleet's, whose stores most other nodes hold: the
//! holder also keeps a copy of each label it records in the fleet's bucket
//! (`stores/NAME/label/SEQ`, create-only, named by the store's head after the label's event, so
//! the latest is the last), which every node lists the fleet's stores by ([`in_bucket`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::policy::LABEL_SETTING;
use crate::serve::stores::Served;
use crate::store::disk::{LABEL_FILE, read_private};

/// The longest label file read.
const LABEL_MAX: u64 = 64 * 1024;

/// The most metadata pairs a store holds.
pub(super) const METADATA_PAIRS: usize = 16;

/// A store's label.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(super) struct Label {
    /// 1 to 255 characters, no control characters.
    pub name: String,
    /// Up to 1,024 characters.
    pub description: String,
    /// At most [`METADATA_PAIRS`] pairs; keys 1 to 64 characters, values up to 512.
    pub metadata: BTreeMap<String, String>,
    /// Unix milliseconds.
    pub created_ms: u64,
    /// Unix milliseconds of the last change to the label (not to the memories).
    pub updated_ms: u64,
    /// When it was archived, for good.
    pub archived_ms: Option<u64>,
}

/// The label of the store in `store_dir` (named `name` in its data directory): its file's, or
/// for a store without one, `name` with the directory's birth time (its change time where the
/// file system keeps none).
pub(super) fn read(store_dir: &Path, name: &str) -> crate::Result<Label> {
    if let Some(bytes) = read_private(store_dir, LABEL_FILE, LABEL_MAX)? {
        return serde_json::from_slice(&bytes).map_err(|e| {
            crate::Error::corrupt(format!(
                "{} is not a memory store's label ({e}); remove it to name the store after its directory",
                store_dir.join(LABEL_FILE).display()
            ))
        });
    }
    let meta = std::fs::metadata(store_dir).map_err(|e| crate::Error::io(store_dir, e))?;
    Ok(named_after(&meta, name))
}

/// The label of a store that has none: `name`, with its directory's birth time (`meta`'s, or its
/// change time where the file system keeps none).
pub(super) fn named_after(meta: &std::fs::Metadata, name: &str) -> Label {
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(
            || u64::try_from(meta.ctime()).unwrap_or(0) * 1000,
            |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
        );
    Label {
        name: name.to_string(),
        created_ms: born,
        updated_ms: born,
        ..Label::default()
    }
}

/// The label the list of stores shows for the store in `store_dir`: its copy beside the log, or,
/// when there is none or it cannot be trusted (not a regular file of the store's owner, other
/// users may read it, not a label), one named after the directory: one store's bad copy never
/// keeps the others from the list.
pub(super) fn listed(store_dir: &Path, name: &str) -> Label {
    read(store_dir, name).unwrap_or_else(|_| {
        std::fs::metadata(store_dir).map_or_else(
            |_| Label {
                name: name.to_string(),
                ..Label::default()
            },
            |meta| named_after(&meta, name),
        )
    })
}

/// The label the store `served` holds in its chain, if one was recorded.
pub(super) fn chained(served: &Served) -> crate::Result<Option<Label>> {
    let text = served.shared().client().setting(LABEL_SETTING)?;
    text.map(|text| {
        serde_json::from_str(&text).map_err(|e| {
            crate::Error::corrupt(format!("the store's chained label is not one ({e})"))
        })
    })
    .transpose()
}

/// Records `label` as the label of the store `served` (in `store_dir`): an admin event under the
/// operator, then the copy beside the log.
pub(super) fn record(served: &Served, store_dir: &Path, label: &Label) -> crate::Result<()> {
    let text = serde_json::to_string(label)
        .map_err(|e| crate::Error::InvalidArgument(format!("the label: {e}")))?;
    let receipt = served
        .shared()
        .client()
        .with_agent(crate::model::credential::OPERATOR)?
        .admin(crate::AdminCommand::Label { label: text })?;
    if receipt.is_error {
        return Err(crate::Error::InvalidArgument(receipt.text));
    }
    write(store_dir, label)?;
    copy_to_bucket(served, label);
    Ok(())
}

/// [`mirror`], a failure said on stderr: the label is recorded (and acknowledged), and a copy the
/// bucket missed only leaves the other nodes' lists showing the one before until the next change.
fn copy_to_bucket(served: &Served, label: &Label) {
    if let Err(e) = mirror(served, label) {
        eprintln!(
            "mnemo serve: a memory store's label could not be copied to the fleet's bucket: {e}"
        );
    }
}

/// The most bytes of a label's copy in a fleet's bucket.
const BUCKET_LABEL_MAX: u64 = 64 * 1024;

/// On a fleet's node, keeps `label`, the label of the store `served`, in the fleet's bucket, named
/// by the store's head now (at or after the label's event).
fn mirror(served: &Served, label: &Label) -> crate::Result<()> {
    let Some((bucket, name)) = served.fleet() else {
        return Ok(());
    };
    let head = served.shared().client().head()?;
    let bytes = serde_json::to_vec(label)
        .map_err(|e| crate::Error::InvalidArgument(format!("the label: {e}")))?;
    // A name already taken holds this label already (the head has not moved since).
    bucket.create(&format!("stores/{name}/label/{:020}", head.seq.0), bytes)?;
    Ok(())
}

/// The latest label of the fleet's store `name` its holders kept in `bucket`, if one did.
pub(super) fn in_bucket(
    bucket: &crate::fleet::bucket::Bucket,
    name: &str,
) -> crate::Result<Option<Label>> {
    let Some(last) = bucket.list(&format!("stores/{name}/label"))?.pop() else {
        return Ok(None);
    };
    let Some(bytes) = bucket.get(&last.name, BUCKET_LABEL_MAX)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        crate::Error::corrupt(format!(
            "{} in the fleet's bucket is not a memory store's label ({e})",
            last.name
        ))
    })
}

/// The label of the store `served` (in `store_dir`, named `name`): the chained one; else the one
/// an earlier build kept only beside the log, chained now; else one named after the directory.
pub(super) fn current(served: &Served, store_dir: &Path, name: &str) -> crate::Result<Label> {
    if let Some(label) = chained(served)? {
        // The copy the list of stores reads: written again when it is missing or not this
        // label (a store restored from its replica has none).
        if read(store_dir, name).ok().as_ref() != Some(&label) {
            write(store_dir, &label)?;
            // A fleet's store taken by a node whose copy had none: its bucket's copy too, for
            // a label an earlier build kept only on its node.
            if served.fleet().is_some_and(|(bucket, name)| {
                in_bucket(bucket, name).ok().flatten().as_ref() != Some(&label)
            }) {
                copy_to_bucket(served, &label);
            }
        }
        return Ok(label);
    }
    let kept = store_dir.join(LABEL_FILE).exists();
    let label = match served.fleet() {
        // Created when the fleet first leased it, as every node lists it: not when this node's
        // copy was made.
        Some((bucket, fleet_name)) if !kept => unlabelled_in_fleet(bucket, fleet_name),
        _ => read(store_dir, name)?,
    };
    if kept {
        record(served, store_dir, &label)?;
    }
    Ok(label)
}

/// The label of the fleet's store `name` that none was given (made without the memory-stores
/// API): named after the store, created when its first lease was taken, by the bucket's clock,
/// so that every node answers it alike.
pub(super) fn unlabelled_in_fleet(bucket: &crate::fleet::bucket::Bucket, name: &str) -> Label {
    let born = bucket
        .list(&format!("leases/{name}"))
        .ok()
        .and_then(|leases| {
            leases
                .first()
                .map(|l| u64::try_from(l.stamp_ms).unwrap_or(0))
        })
        .unwrap_or(0);
    Label {
        name: name.to_string(),
        created_ms: born,
        updated_ms: born,
        ..Label::default()
    }
}

/// Replaces the copy of the label of the store in `store_dir` with `label`: written to a new file beside it
/// (mode 0600), synced, renamed over the old one, and the directory synced.
pub(super) fn write(store_dir: &Path, label: &Label) -> crate::Result<()> {
    let bytes = serde_json::to_vec(label)
        .map_err(|e| crate::Error::InvalidArgument(format!("the label: {e}")))?;
    let target = store_dir.join(LABEL_FILE);
    let partial = store_dir.join(format!("{LABEL_FILE}.{}.new", std::process::id()));
    let written = (|| {
        let _ = std::fs::remove_file(&partial);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, &target)?;
        std::fs::File::open(store_dir)?.sync_all()
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        crate::Error::io(&target, e)
    })
}

/// Why a name is not a store name of the API: `None` if it is one.
pub(super) fn check_name(name: &str) -> Option<String> {
    let n = name.chars().count();
    if !(1..=255).contains(&n) {
        return Some(format!("name must be 1 to 255 characters long, not {n}"));
    }
    name.chars()
        .any(char::is_control)
        .then(|| "name must not contain control characters".to_string())
}

/// Why a description is not one: `None` if it is one.
pub(super) fn check_description(description: &str) -> Option<String> {
    let n = description.chars().count();
    (n > 1024).then(|| format!("description must be at most 1,024 characters long, not {n}"))
}

/// Why metadata is not valid: `None` if it is.
pub(super) fn check_metadata(metadata: &BTreeMap<String, String>) -> Option<String> {
    if metadata.len() > METADATA_PAIRS {
        return Some(format!(
            "metadata holds at most {METADATA_PAIRS} key-value pairs, not {}",
            metadata.len()
        ));
    }
    metadata.iter().find_map(|(key, value)| {
        let k = key.chars().count();
        let v = value.chars().count();
        if !(1..=64).contains(&k) {
            Some(format!(
                "metadata keys are 1 to 64 characters long; {key:?} has {k}"
            ))
        } else if v > 512 {
            Some(format!(
                "metadata values are at most 512 characters long; the value of {key:?} has {v}"
            ))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_reads_back_and_a_store_without_one_is_named_after_its_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let unlabelled = read(dir.path(), "user-1").expect("read");
        assert_eq!(unlabelled.name, "user-1");
        assert!(unlabelled.created_ms > 0);
        let label = Label {
            name: "Notes of user 1".into(),
            description: "what the user prefers".into(),
            metadata: BTreeMap::from([("user".into(), "1".into())]),
            created_ms: 5,
            updated_ms: 6,
            archived_ms: Some(7),
        };
        write(dir.path(), &label).expect("write");
        assert_eq!(read(dir.path(), "user-1").expect("read"), label);
        let file = dir.path().join(LABEL_FILE);
        let mode = std::fs::metadata(&file).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&file, b"{").expect("break it");
        assert!(read(dir.path(), "user-1").is_err());
    }

    #[test]
    fn a_link_in_place_of_the_label_is_refused_unfollowed() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(LABEL_FILE)).expect("link");
        assert!(read(dir.path(), "s").is_err());
    }

    #[test]
    fn names_descriptions_and_metadata_are_checked_as_the_hosted_api_checks_them() {
        assert_eq!(check_name("a"), None);
        assert!(check_name("").is_some());
        assert!(check_name(&"é".repeat(256)).is_some());
        assert_eq!(check_name(&"é".repeat(255)), None);
        assert!(check_name("a\nb").is_some());
        assert!(check_description(&"x".repeat(1025)).is_some());
        let many: BTreeMap<String, String> =
            (0..17).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(check_metadata(&many).is_some());
        assert!(check_metadata(&BTreeMap::from([(String::new(), "v".into())])).is_some());
        assert!(check_metadata(&BTreeMap::from([("k".into(), "v".repeat(513))])).is_some());
        assert_eq!(
            check_metadata(&BTreeMap::from([("k".into(), "v".repeat(512))])),
            None
        );
    }
}
