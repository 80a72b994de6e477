//! A memory-tool session over a store open in this process, as `tool`, `mcp` and `serve` open it.

use std::process::ExitCode;

use mnemo::tool::Limits;
use mnemo::{MnemoClient, MnemoMemoryToolServer};

use crate::CliResult;
use crate::args::Session;

/// Opens the store and builds the memory-tool server a session answers through.
pub(crate) fn open_session(
    session: Session,
    agent: String,
) -> Result<MnemoMemoryToolServer, Box<dyn std::error::Error>> {
    let db = &session.db.db;
    let new = no_store_yet(db);
    let client = MnemoClient::builder(db)
        .agent_id(agent)
        .durability(session.durability.unwrap_or_default())
        .open()?;
    if new {
        say_created(db);
    }
    Ok(MnemoMemoryToolServer::builder(client)
        .root(session.root.as_str())
        .profile(session.profile)
        .limits(session.limits())
        .build()?)
}

/// Whether `db` holds no store yet (nothing there, or an empty directory): a session's open will
/// create one.
pub(crate) fn no_store_yet(db: &std::path::Path) -> bool {
    std::fs::read_dir(db).map_or_else(
        |e| e.kind() == std::io::ErrorKind::NotFound,
        |mut entries| entries.next().is_none(),
    )
}

/// Says that a session created the store at `db`: a mistyped --db makes a store too, and this
/// shows where at once (also when the server a session started made it, whose stderr is gone).
pub(crate) fn say_created(db: &std::path::Path) {
    crate::print::tell(format_args!(
        "mnemo: created a new store at {}",
        db.display()
    ));
}

impl Session {
    /// The limits the session's flags set.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.max_file_bytes,
            view_max_chars: self.view_max_chars,
            max_request_bytes: self.max_request_bytes,
        }
    }
}

/// Exit 0, or exit 2 when the store failed during the session, or found stored bytes damaged
/// (each such call got an error result).
pub(crate) fn end_session(server: &MnemoMemoryToolServer) -> CliResult {
    match store_failed(
        server.store_failures(),
        server.store_damage(),
        server.erase_failures(),
    ) {
        Some(why) => Err(why.into()),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What a session whose store failed on `failures` calls, `damaged` of them for damaged stored
/// bytes and `erasures` of them deletes whose erasure failed after their answer, exits 2 saying;
/// `None` when there were none.
pub(crate) fn store_failed(failures: u64, damaged: u64, erasures: u64) -> Option<String> {
    let mut said = Vec::new();
    if damaged > 0 {
        said.push(format!(
            "{damaged} call(s) of this session met damaged stored bytes (changed outside Mnemo; each got an error result and nothing was applied for it): `mnemo verify` names the damage; restore the store from a replica or backup"
        ));
    }
    if erasures > 0 {
        said.push(format!(
            "{erasures} delete(s) of this session were answered as recorded but could not be erased as the store's setting delete = erase asks (said above, with why): what they deleted is still in the log; erase it with `mnemo redact --path PATH --reason ...` once the cause is fixed"
        ));
    }
    let others = failures.saturating_sub(damaged + erasures);
    if others > 0 {
        said.push(format!(
            "the store failed on {others} call(s) of this session (each got an error result); check the disk, then reopen the store, which recovers to the last event that reached the log"
        ));
    }
    (!said.is_empty()).then(|| said.join("; and "))
}
