//! Signatures on a fleet's logs: whoever can write the bucket cannot put an event into a store's
//! history, or take one out of it, without the fleet's signing key.
//!
//! The key is an Ed25519 signed-note key, as a store's own (`replica/key.rs`), kept in a file
//! every node is given (`mnemo key create --file FILE`: the signer key on its first line, the
//! verifier key on its second, mode 0600; `mnemo serve --fleet URL --signing-key FILE`). A node
//! with the key signs every log object and pack it makes: the object carries a signed note
//! ([`text`]) naming the object, its epoch and the log's last event after it (seq and chain
//! hash), and the chain hash covers every event before. A reader with the key (a node taking a
//! store over, `mnemo verify --from FLEET/stores/NAME --key VKEY`) checks each signature, and
//! takes an object without one only before the first signed object of a log read from its
//! start (the log a fleet wrote before it had a key, which the first signed object's chain
//! hash then proves). A log with no signed object at all is refused unless the fleet's key
//! adopted it: `mnemo fleet adopt` signs, once, the end of a log written before the fleet had a
//! key ([`adoption_text`], the object `stores/NAME/adopted`), and a reader takes such a log only
//! if it ends exactly there. So a bucket
//! writer can neither add events (unsigned, or signed by another key) nor replace a signed log
//! with an unsigned one. What it can still do is cut a log's newest objects or the whole log:
//! signatures prove what is there, not that nothing is missing.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use signed_note::{Note, StandardSigner, StandardVerifier, VerifierList};

use crate::error::{Error, Result};
use crate::model::event::{EventHash, Seq};
use crate::replica::key;

/// The first line of every signed note on a fleet's log object.
const TITLE: &str = "mnemo fleet log";

/// The most bytes of a key file read.
const KEY_FILE_MAX: u64 = 4096;

/// The most bytes of a note an object may carry.
pub(super) const NOTE_MAX: usize = 4096;

/// A fleet's signing key, as its key file holds it: the signer, and the verifier key
/// (`NAME+ID+KEY`) to hand to auditors.
#[derive(Clone)]
pub struct FleetKey {
    signer: Arc<StandardSigner>,
    verifier: String,
}

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is never printed.
        f.debug_struct("FleetKey")
            .field("verifier", &self.verifier)
            .finish_non_exhaustive()
    }
}

impl FleetKey {
    /// Makes a new key named `name` in the new file `path` (mode 0600; an existing file is never
    /// replaced) and returns its verifier key.
    pub fn create(path: &Path, name: &str) -> Result<String> {
        let (signer, verifier) = key::generate(name)?;
        key::write_new(path, format!("{signer}\n{verifier}").as_bytes()).map_err(|e| match e
            .kind()
        {
            std::io::ErrorKind::AlreadyExists => Error::InvalidArgument(format!(
                "{} already exists; a fleet's key is never replaced (logs signed by it verify only against it): give a new file",
                path.display()
            )),
            std::io::ErrorKind::NotFound => Error::InvalidArgument(format!(
                "--file {}: its directory does not exist; make it first, or give a file in one that does",
                path.display()
            )),
            _ => Error::io(path, e),
        })?;
        Ok(verifier)
    }

    /// The key in the file `path` ([`FleetKey::create`] made it): a regular file of at most a
    /// few kilobytes, readable by its owner only, holding a signer key and the verifier key of
    /// the same key.
    pub fn load(path: &Path) -> Result<FleetKey> {
        let bad = |why: String| {
            Error::InvalidArgument(format!(
                "--signing-key {}: {why}; give the file `mnemo key create --file FILE` made",
                path.display()
            ))
        };
        let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => bad("there is no such file".into()),
            _ => bad(format!("it cannot be read ({e})")),
        })?;
        if !meta.is_file() {
            return Err(bad("it is not a regular file".into()));
        }
        // Not followed if a link took its place, and not waited on if a pipe did.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let opened = file.metadata().map_err(|e| Error::io(path, e))?;
        use std::os::unix::fs::MetadataExt;
        if !opened.is_file() || opened.ino() != meta.ino() || opened.len() > KEY_FILE_MAX {
            return Err(bad(format!(
                "it is not a key file (a regular file of at most {KEY_FILE_MAX} bytes)"
            )));
        }
        if opened.mode() & 0o077 != 0 {
            return Err(bad(format!(
                "its mode is {:04o}: the key's secret must be readable by its owner only (chmod 600)",
                opened.mode() & 0o7777
            )));
        }
        let mut text = String::new();
        file.take(KEY_FILE_MAX)
            .read_to_string(&mut text)
            .map_err(|_| bad("it is not text".into()))?;
        let mut lines = text.lines();
        let (Some(secret), Some(vkey), None) = (lines.next(), lines.next(), lines.next()) else {
            return Err(bad(
                "it does not hold two lines, a signer key and its verifier key".into(),
            ));
        };
        let signer = StandardSigner::new(secret.trim())
            .map_err(|e| bad(format!("its first line is not a signer key ({e})")))?;
        let verifier = vkey.trim().to_string();
        key::check_key(&verifier)
            .map_err(|_| bad("its second line is not a verifier key".into()))?;
        let probe = key::sign("mnemo fleet key probe\n", &signer)?;
        key::check(&probe, &verifier, "a probe").map_err(|_| {
            bad("its verifier key is not the signer key's own (the file was edited)".into())
        })?;
        Ok(FleetKey {
            signer: Arc::new(signer),
            verifier,
        })
    }

    /// A new key named `name`, kept nowhere (for tests).
    #[cfg(test)]
    pub(crate) fn generated(name: &str) -> FleetKey {
        let (signer, verifier) = key::generate(name).expect("a valid name");
        FleetKey {
            signer: Arc::new(StandardSigner::new(&signer).expect("a signer")),
            verifier,
        }
    }

    /// The verifier key (`NAME+ID+KEY`) that checks what this key signs.
    pub fn verifier(&self) -> &str {
        &self.verifier
    }
}

/// What a log is signed and checked with: a node's key (which signs and checks), or an
/// auditor's verifier key (which only checks).
#[derive(Clone)]
pub struct LogKeys {
    signer: Option<Arc<StandardSigner>>,
    verifier: Arc<StandardVerifier>,
    vkey: String,
}

impl LogKeys {
    /// A node's keys: it signs what it writes with `key` and checks what it reads against it.
    pub fn signing(key: &FleetKey) -> Result<LogKeys> {
        let mut keys = LogKeys::checking(&key.verifier)?;
        keys.signer = Some(Arc::clone(&key.signer));
        Ok(keys)
    }

    /// A reader's keys: what it reads is checked against the verifier key `vkey`.
    pub fn checking(vkey: &str) -> Result<LogKeys> {
        Ok(LogKeys {
            signer: None,
            verifier: Arc::new(key::verifier(vkey)?),
            vkey: vkey.trim().to_string(),
        })
    }

    /// The note to carry on the object `name` of `epoch`, after which the log's last event is
    /// `last`; `None` without a signer.
    pub(super) fn sign(
        &self,
        name: &str,
        epoch: u64,
        last: (Seq, EventHash),
    ) -> Result<Option<Vec<u8>>> {
        let Some(signer) = &self.signer else {
            return Ok(None);
        };
        key::sign(&text(name, epoch, last), signer).map(Some)
    }

    /// Checks that `note` is a signature of these keys on the object `name` of `epoch` after
    /// which the log's last event is `last`; the error says what is wrong.
    pub(super) fn check(
        &self,
        note: &[u8],
        name: &str,
        epoch: u64,
        last: (Seq, EventHash),
    ) -> std::result::Result<(), String> {
        let parsed = self.verified(note)?;
        let expected = text(name, epoch, last);
        if parsed.text() != expected.as_bytes() {
            return Err(format!(
                "it is signed by the key, but for another object or place in the log ({:?}, where {:?} was due): a signed object was copied or moved",
                String::from_utf8_lossy(parsed.text()),
                expected
            ));
        }
        Ok(())
    }

    /// The adoption of the log of `store`, written before the fleet had a key, as it ends at
    /// `last` ([`adoption_text`], signed); an error without a signer.
    pub(super) fn sign_adoption(&self, store: &str, last: (Seq, EventHash)) -> Result<Vec<u8>> {
        let signer = self.signer.as_ref().ok_or_else(|| {
            Error::InvalidArgument(
                "adopting a log takes the fleet's signing key, not its verifier key".into(),
            )
        })?;
        key::sign(&adoption_text(store, last), signer)
    }

    /// Whether `note` is these keys' adoption of the log of `store` as it ends at `last`.
    pub(super) fn adopted(&self, note: &[u8], store: &str, last: (Seq, EventHash)) -> bool {
        self.verified(note)
            .is_ok_and(|parsed| parsed.text() == adoption_text(store, last).as_bytes())
    }

    /// `note` parsed, when it carries a valid signature of these keys; else what is wrong.
    fn verified(&self, note: &[u8]) -> std::result::Result<Note, String> {
        let parsed =
            Note::from_bytes(note).map_err(|e| format!("its signature is no signed note ({e})"))?;
        let known = VerifierList::new(vec![Box::new(self.verifier.as_ref().clone())]);
        match parsed.verify(&known) {
            Ok(_) => Ok(parsed),
            Err(_) => Err(key::check(note, &self.vkey, "its signature")
                .err()
                .unwrap_or_else(|| "its signature does not verify".into())),
        }
    }

    /// The verifier key's name and id (`NAME+ID`), for messages.
    pub(super) fn name(&self) -> String {
        self.vkey
            .splitn(3, '+')
            .take(2)
            .collect::<Vec<_>>()
            .join("+")
    }
}

/// The text a fleet's key signs for the object `name` of `epoch`, after which the log's last
/// event is `last` (seq 0 before the first).
pub(super) fn text(name: &str, epoch: u64, (seq, hash): (Seq, EventHash)) -> String {
    format!(
        "{TITLE}\n{name}\nepoch {epoch}\nevent {} {}\n",
        seq.0,
        hash.to_hex()
    )
}

/// The text a fleet's key signs to adopt the log of `store` written before the fleet had a key,
/// as it ends at `last` (its last event's seq and chain hash, which prove every event before).
pub(super) fn adoption_text(store: &str, (seq, hash): (Seq, EventHash)) -> String {
    format!(
        "{TITLE} adopted\nstores/{store}\nevent {} {}\n",
        seq.0,
        hash.to_hex()
    )
}

/// The event after which the object `name` was signed, read from its signed note's text
/// (checked or not): how a pack of markers alone learns where the log stood.
pub(super) fn signed_last(note: &[u8]) -> Option<(Seq, EventHash)> {
    let note = Note::from_bytes(note).ok()?;
    let text = std::str::from_utf8(note.text()).ok()?;
    let event = text.lines().nth(3)?.strip_prefix("event ")?;
    let (seq, hash) = event.split_once(' ')?;
    Some((Seq(seq.parse().ok()?), EventHash::from_hex(hash)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_read_only_when_it_is_the_owners_alone_and_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("fleet.key");
        let vkey = FleetKey::create(&path, "mnemo-fleet").expect("create");
        assert!(
            FleetKey::create(&path, "mnemo-fleet").is_err(),
            "never replaced"
        );
        let key = FleetKey::load(&path).expect("load");
        assert_eq!(key.verifier(), vkey);
        assert!(
            !format!("{key:?}").contains("PRIVATE"),
            "the secret is never printed"
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let open = FleetKey::load(&path)
            .expect_err("readable by others")
            .to_string();
        assert!(open.contains("chmod 600"), "{open}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");

        // Another key's verifier on the second line: the file was edited.
        let other = dir.path().join("other.key");
        let other_vkey = FleetKey::create(&other, "mnemo-fleet").expect("create");
        let text = std::fs::read_to_string(&path).expect("read");
        let secret = text.lines().next().expect("line");
        let mixed = dir.path().join("mixed.key");
        std::fs::write(&mixed, format!("{secret}\n{other_vkey}\n")).expect("write");
        std::fs::set_permissions(&mixed, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let edited = FleetKey::load(&mixed).expect_err("mixed").to_string();
        assert!(edited.contains("edited"), "{edited}");

        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).expect("link");
        assert!(FleetKey::load(&link).is_err(), "a link is not followed");
        let fifo = dir.path().join("fifo.key");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("fifo");
        assert!(
            FleetKey::load(&fifo).is_err(),
            "a pipe is refused, not waited on"
        );
        assert!(FleetKey::load(Path::new("/dev/zero")).is_err());
    }

    #[test]
    fn a_signature_holds_only_for_its_object_epoch_and_place() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("fleet.key");
        FleetKey::create(&path, "mnemo-fleet").expect("create");
        let keys = LogKeys::signing(&FleetKey::load(&path).expect("load")).expect("keys");
        let at = (Seq(7), EventHash([7; 32]));
        let note = keys
            .sign("stores/a/wal/1", 2, at)
            .expect("sign")
            .expect("a note");
        assert_eq!(keys.check(&note, "stores/a/wal/1", 2, at), Ok(()));
        assert_eq!(signed_last(&note), Some(at));
        assert!(keys.check(&note, "stores/a/wal/2", 2, at).is_err(), "moved");
        assert!(
            keys.check(&note, "stores/b/wal/1", 2, at).is_err(),
            "another store"
        );
        assert!(
            keys.check(&note, "stores/a/wal/1", 3, at).is_err(),
            "another epoch"
        );
        let later = (Seq(8), EventHash([7; 32]));
        assert!(
            keys.check(&note, "stores/a/wal/1", 2, later).is_err(),
            "another place"
        );

        let other = dir.path().join("other.key");
        let other_vkey = FleetKey::create(&other, "mnemo-fleet").expect("create");
        let foreign = LogKeys::checking(&other_vkey).expect("keys");
        let refused = foreign
            .check(&note, "stores/a/wal/1", 2, at)
            .expect_err("another key");
        assert!(refused.contains("not by the key given"), "{refused}");
        assert_eq!(
            LogKeys::checking(&other_vkey)
                .expect("keys")
                .sign("x", 1, at)
                .expect("sign"),
            None,
            "a verifier key alone signs nothing"
        );
    }
}
