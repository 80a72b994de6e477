//! The replica commands of the CLI (part of the binary): `mnemo replicate`, `mnemo restore` and
//! `mnemo verify --from`, over `mnemo::cli_support`'s replica (feature `replicate`); without the
//! feature each says how to get it.

#[cfg(feature = "replicate")]
pub use with::*;
#[cfg(not(feature = "replicate"))]
pub use without::*;

#[cfg(feature = "replicate")]
mod with {
    use std::io::Write;
    use std::path::Path;
    use std::process::ExitCode;

    use mnemo::Seq;
    use mnemo::cli_support::{
        Replica, Store, VerifyOptions, restore as rebuild, ship, verify_store_with,
    };

    use crate::{CliResult, ReportView, print_verify};

    /// `mnemo replicate --to URL --once`.
    pub fn replicate(db: &Path, url: &str, once: bool) -> CliResult {
        if !once {
            return Err("continuous replication is not built yet: pass --once, which ships up to the current head and exits (run it after writes, or from a timer)".into());
        }
        let store = Store::open_current_read_only(db)?;
        let replica = Replica::open(url, true)?;
        // Each segment once it is written, on stderr: how far a long shipment has got.
        let shipped = ship(&store, &replica, &mut |first, last| {
            eprintln!("mnemo replicate: shipped events {first} to {last}");
        })?;
        let mut out = std::io::stdout().lock();
        if shipped.segments == 0 {
            writeln!(
                out,
                "the replica at {url} is up to date at event {}",
                shipped.head.seq
            )?;
        } else {
            writeln!(
                out,
                "replicated events {} to {} in {} segments to {url}",
                shipped.from.0 + 1,
                shipped.head.seq,
                shipped.segments
            )?;
        }
        if shipped.head.seq > Seq(0) {
            writeln!(out, "checkpoint: {}", shipped.head)?;
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `mnemo restore --from URL --db NEW [--at SEQ]`.
    pub fn restore(url: &str, db: &Path, at: Option<u64>) -> CliResult {
        let replica = Replica::open(url, false)?;
        let head = rebuild(&replica, db, at.map(Seq))?;
        println!(
            "restored events 1 to {} from {url} into {}, verified\ncheckpoint: {head}",
            head.seq,
            db.display()
        );
        Ok(ExitCode::SUCCESS)
    }

    /// `mnemo key create [--name NAME]`: the verifier key on stdout.
    pub fn key_create(db: &Path, name: Option<&str>) -> CliResult {
        Store::require(db)?;
        let name = name.map_or_else(|| mnemo::cli_support::default_key_name(db), str::to_string);
        let vkey = mnemo::cli_support::create_key(db, &name)?;
        eprintln!(
            "mnemo: made the signing key {name}; its secret is in {} (mode 0600): keep it there, and back it up apart from any replica. Hand out the verifier key below for `mnemo verify --from URL --key VKEY`.",
            db.join(mnemo::cli_support::KEY_FILE).display()
        );
        println!("{vkey}");
        Ok(ExitCode::SUCCESS)
    }

    /// `mnemo verify --from URL [--expect SEQ:HASH] [--json]`: the replica fetched into a
    /// private store and verified there; a replica that breaks the chain or its checkpoint is a
    /// violation (exit 1) that names the event.
    pub fn verify(url: &str, as_json: bool, expect: Option<&str>, key: Option<&str>) -> CliResult {
        let expect = expect.map(mnemo::Head::parse).transpose()?;
        if let Some(vkey) = key {
            // A key that is not one is a bad argument (exit 2), not a finding about the replica.
            mnemo::cli_support::key_verifier(vkey)?;
        }
        let replica = Replica::open(url, false)?;
        let private = tempfile::tempdir()?;
        let db = private.path().join("replica");
        // The signature first: a replica its owner did not sign is not looked at further.
        let signed = match key {
            None => Ok(()),
            Some(vkey) => match replica.read("head")? {
                Some(head) => mnemo::cli_support::check_signed(&head, vkey),
                None => Err("the replica has no head checkpoint to check".to_string()),
            },
        };
        let rebuilt = signed
            .map_err(|what| mnemo::Error::Corrupt { what })
            .and_then(|()| rebuild(&replica, &db, None));
        match rebuilt {
            Ok(_) => {}
            Err(mnemo::Error::Corrupt { what }) => {
                if as_json {
                    println!(
                        "{}",
                        serde_json::json!({"status": "violation", "replica": url, "violation": what})
                    );
                } else {
                    println!("mnemo verify: VIOLATION\n  replica:    {url}\n  violation:  {what}");
                }
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(e.into()),
        }
        let store = Store::open_read_only(&db)?;
        let report = verify_store_with(
            &store,
            VerifyOptions {
                expect,
                progress: None,
            },
        )?;
        let label = Path::new(url);
        print_verify(
            label,
            as_json,
            &report.to_json(label),
            &ReportView::of(&report),
        )
    }
}

/// Without the feature: each replica command says how to get it.
#[cfg(not(feature = "replicate"))]
mod without {
    use std::path::Path;

    use crate::CliResult;

    fn missing() -> CliResult {
        Err("replicas need a mnemo built with `--features replicate` (from a clone of the repository: `cargo install --path . --features replicate`)".into())
    }

    /// `mnemo replicate` in a build without replicas.
    pub fn replicate(_db: &Path, _url: &str, _once: bool) -> CliResult {
        missing()
    }

    /// `mnemo restore` in a build without replicas.
    pub fn restore(_url: &str, _db: &Path, _at: Option<u64>) -> CliResult {
        missing()
    }

    /// `mnemo verify --from` in a build without replicas.
    pub fn verify(
        _url: &str,
        _as_json: bool,
        _expect: Option<&str>,
        _key: Option<&str>,
    ) -> CliResult {
        missing()
    }

    /// `mnemo key create` in a build without replicas.
    pub fn key_create(_db: &Path, _name: Option<&str>) -> CliResult {
        missing()
    }
}
