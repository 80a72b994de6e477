//! The store owner's signing key, and the signed checkpoints it makes.
//!
//! `mnemo key create` makes an Ed25519 key from the OS random source and keeps its secret beside
//! the store, in [`KEY_FILE`] (mode 0600), as a C2SP signed-note signer key
//! (`PRIVATE+KEY+NAME+ID+…`); it prints the verifier key (`NAME+ID+…`), which the owner hands to
//! whoever verifies a replica. While the key is there, every checkpoint a shipment publishes is
//! a signed note: the checkpoint's text, a blank line, and the signature line `— NAME …`.
//! `mnemo verify --from URL --key VKEY` then accepts the replica's head only if the key signed
//! it, so whoever holds the bucket cannot rewrite the replica, consistently or not, without the
//! secret.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use signed_note::{Note, Signature, StandardSigner, StandardVerifier, VerifierList};

use crate::error::{Error, Result};
pub use crate::store::disk::{KEY_FILE, TRUST_FILE};

/// The key name a store's key takes by default: `mnemo-` and the store directory's name, each
/// character a key name may not hold (a space, a `+`) replaced by `-`.
pub fn default_name(store: &Path) -> String {
    let dir = store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    let clean: String = dir
        .chars()
        .map(|c| {
            if c == '+' || c.is_whitespace() || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("mnemo-{clean}")
}

/// Makes the store's signing key, named `name`, and returns its verifier key. Refuses to replace
/// one that is there (a replica signed by it would no longer verify against the new key).
pub fn create(store: &Path, name: &str) -> Result<String> {
    let (signer, verifier) = generate(name)?;
    let path = store.join(KEY_FILE);
    write_new(&path, signer.as_bytes()).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::InvalidArgument(format!(
            "{} already holds a key; replicas signed by it verify only against it, so it is not replaced (remove the file by hand to make a new one)",
            path.display()
        )),
        _ => Error::io(&path, e),
    })?;
    Ok(verifier)
}

/// A new Ed25519 key named `name`: its signer key and verifier key, as signed notes write them.
pub(crate) fn generate(name: &str) -> Result<(String, String)> {
    if !signed_note::is_key_name_valid(name) {
        return Err(Error::InvalidArgument(format!(
            "the key name {name:?} is not valid: give a non-empty name without spaces or +"
        )));
    }
    Ok(signed_note::generate_key(&mut rand_core::OsRng, name))
}

/// Writes `line` and a newline to the new file `path` (mode 0600; an error if it exists),
/// durably, the directory entry included.
pub(crate) fn write_new(path: &Path, line: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(line)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

/// The store's signer, if it has a key.
pub fn signer(store: &Path) -> Result<Option<StandardSigner>> {
    let path = store.join(KEY_FILE);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    if !meta.is_file() || meta.len() > 4096 {
        return Err(Error::corrupt(format!(
            "{} is not a key file (a regular file of a few hundred bytes)",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    StandardSigner::new(text.trim_end()).map(Some).map_err(|e| {
        Error::corrupt(format!(
            "{} does not hold a signer key ({e})",
            path.display()
        ))
    })
}

/// `text` signed by `signer`, as a signed note.
pub fn sign(text: &str, signer: &StandardSigner) -> Result<Vec<u8>> {
    let mut note = Note::new(text.as_bytes(), &[])
        .map_err(|e| Error::corrupt(format!("a checkpoint cannot be a signed note ({e})")))?;
    note.add_sigs(&[signer])
        .map_err(|e| Error::corrupt(format!("the checkpoint could not be signed ({e})")))?;
    Ok(note.to_bytes())
}

/// The text a checkpoint object holds: a signed note's text, or the object whole when it is not
/// signed.
pub fn text(object: &[u8]) -> Vec<u8> {
    match Note::from_bytes(object) {
        Ok(note) => note.text().to_vec(),
        Err(_) => object.to_vec(),
    }
}

/// The verifier of key text `vkey`; anything else is [`Error::InvalidArgument`].
pub fn verifier(vkey: &str) -> Result<StandardVerifier> {
    StandardVerifier::new(vkey.trim()).map_err(|e| {
        Error::InvalidArgument(format!(
            "--key is not a verifier key ({e}); give the NAME+ID+KEY that mnemo key create printed"
        ))
    })
}

/// Whether `vkey` is a verifier key (`NAME+ID+KEY`, as `mnemo key create` prints it): `Err`
/// says what is wrong.
pub fn check_key(vkey: &str) -> Result<()> {
    verifier(vkey).map(|_| ())
}

/// Checks that `object` (a checkpoint; `what` names it in the error) is a note signed by the
/// verifier key `vkey`; the error says what is wrong.
pub fn check(object: &[u8], vkey: &str, what: &str) -> std::result::Result<(), String> {
    let verifier = verifier(vkey).map_err(|e| e.to_string())?;
    let note = Note::from_bytes(object).map_err(|_| format!("{what} is not signed"))?;
    let known = VerifierList::new(vec![Box::new(verifier)]);
    note.verify(&known).map(|_| ()).map_err(|e| {
        let given = key_name(vkey);
        let signed_by = signers(object);
        if signed_by.is_empty() || signed_by.contains(&given) {
            return format!("{what} does not carry a valid signature of the key {given} ({e})");
        }
        format!(
            "{what} is signed by the key {}, not by the key given ({given}): give the verifier key `mnemo key create` printed for the store this replica is shipped from",
            signed_by.join(", ")
        )
    })
}

/// A verifier key's name and id (`NAME+ID` of `NAME+ID+KEY`), as signatures are named.
fn key_name(vkey: &str) -> String {
    vkey.trim()
        .splitn(3, '+')
        .take(2)
        .collect::<Vec<_>>()
        .join("+")
}

/// The keys (`NAME+ID`) the signature lines of the note `object` name, valid or not.
fn signers(object: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(object);
    let Some((_, signatures)) = text.rsplit_once("\n\n") else {
        return Vec::new();
    };
    signatures
        .lines()
        .filter_map(|line| Signature::from_bytes(line.as_bytes()).ok())
        .map(|sig| format!("{}+{:08x}", sig.name(), sig.id()))
        .collect()
}

/// Records in the store at `store` that it trusts the replica heads `vkey` signs
/// ([`TRUST_FILE`]). A store that trusts another key already is refused: which key a follower
/// trusts is changed by hand (the file removed), never by a command line that may be mistaken.
pub fn remember(store: &Path, vkey: &str) -> Result<()> {
    let vkey = vkey.trim();
    if let Some(known) = remembered(store)? {
        if known != vkey {
            return Err(Error::InvalidArgument(format!(
                "the store at {} trusts replica heads signed by the key {known}, not {vkey}; to trust another key, remove {} by hand and run this again",
                store.display(),
                store.join(TRUST_FILE).display()
            )));
        }
        return Ok(());
    }
    let path = store.join(TRUST_FILE);
    write_new(&path, vkey.as_bytes()).map_err(|e| Error::io(&path, e))
}

/// The verifier key the store at `store` trusts its replica's heads to be signed by, if it
/// recorded one ([`remember`]). A file there that is not its owner's alone, or holds no verifier
/// key, is an error: it is never ignored, as that would let anyone drop the check.
pub fn remembered(store: &Path) -> Result<Option<String>> {
    let Some(bytes) = crate::store::disk::read_private(store, TRUST_FILE, 4096)? else {
        return Ok(None);
    };
    let path = store.join(TRUST_FILE);
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::corrupt(format!("{} is not a verifier key", path.display())))?;
    verifier(&text).map_err(|_| {
        Error::corrupt(format!(
            "{} does not hold a verifier key (NAME+ID+KEY); write the key the replica's owner gave you into it, or remove it to trust none",
            path.display()
        ))
    })?;
    Ok(Some(text.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_checkpoint_verifies_only_against_its_key_and_text() {
        let dir = tempfile::tempdir().expect("dir");
        let vkey = create(dir.path(), "mnemo-test").expect("create");
        assert!(
            create(dir.path(), "mnemo-test").is_err(),
            "a key is never replaced"
        );
        let signer = signer(dir.path()).expect("read").expect("a key");
        let body =
            "mnemo/store/s\n3\n0707070707070707070707070707070707070707070707070707070707070707\n";
        let signed = sign(body, &signer).expect("sign");
        assert_eq!(text(&signed), body.as_bytes());
        assert_eq!(check(&signed, &vkey, "it"), Ok(()));
        assert!(check(body.as_bytes(), &vkey, "it").is_err(), "unsigned");
        let forged = String::from_utf8(signed.clone())
            .expect("utf-8")
            .replacen("\n3\n", "\n4\n", 1);
        assert!(
            check(forged.as_bytes(), &vkey, "it").is_err(),
            "altered text"
        );
        let other = tempfile::tempdir().expect("dir");
        let other_key = create(other.path(), "mnemo-test").expect("create");
        // Another key of the same name: the refusal names the key that signed and the one given.
        let refused = check(&signed, &other_key, "it").expect_err("another key of the same name");
        assert!(
            refused.contains(&key_name(&vkey)) && refused.contains(&key_name(&other_key)),
            "{refused}"
        );
        assert_ne!(key_name(&vkey), key_name(&other_key));
        assert!(check(&signed, "not a key", "it").is_err());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// The signing key of the store at a path, and the verifier key it trusts: the owner's key,
/// whose signed checkpoints let a restore or a follower trust a replica, kept in the store's
/// directory (`mnemo-key`, mode 0600, [`SigningKey::file`]); and the key a restored or
/// following store trusts its replica's heads to be signed by (`mnemo-replica-key`,
/// [`SigningKey::trust_file`]).
#[derive(Clone, Copy, Debug)]
pub struct SigningKey<'a> {
    store: &'a Path,
}

impl<'a> SigningKey<'a> {
    /// The key of the store at `store` (made or not).
    pub fn of(store: &'a Path) -> SigningKey<'a> {
        SigningKey { store }
    }

    /// Makes the store's signing key, named `name` (by default `mnemo-` and the store
    /// directory's name), and returns its verifier key (`NAME+ID+KEY`), to hand to whoever
    /// verifies a replica. Refuses to replace one that is there.
    pub fn create(&self, name: Option<&str>) -> Result<String> {
        let name = name.map_or_else(|| default_name(self.store), str::to_string);
        create(self.store, &name)
    }

    /// The file that holds the key's secret.
    pub fn file(&self) -> std::path::PathBuf {
        self.store.join(KEY_FILE)
    }

    /// The file that holds the verifier key the store trusts.
    pub fn trust_file(&self) -> std::path::PathBuf {
        self.store.join(TRUST_FILE)
    }

    /// Records that the store trusts the replica heads `vkey` signs; a store that trusts another
    /// key is refused (which key is trusted is changed by hand, never by a mistaken command).
    pub fn trust(&self, vkey: &str) -> Result<()> {
        remember(self.store, vkey)
    }

    /// The verifier key the store trusts, if it recorded one.
    pub fn trusted(&self) -> Result<Option<String>> {
        remembered(self.store)
    }

    /// Whether `vkey` is a verifier key (`NAME+ID+KEY`): the error says what is wrong.
    pub fn check_verifier(vkey: &str) -> Result<()> {
        check_key(vkey)
    }

    /// Checks that `object` (a checkpoint; `what` names it in the error) is a note signed by the
    /// verifier key `vkey`.
    pub fn verify_signed(object: &[u8], vkey: &str, what: &str) -> std::result::Result<(), String> {
        check(object, vkey, what)
    }
}
