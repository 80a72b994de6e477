//! `mnemo import`: plain files read into a store (a new one is built beside its path and renamed
//! there once the import ran, by the library: `MnemoMemoryToolServer::import_store`).

use std::process::ExitCode;

use mnemo::MnemoMemoryToolServer;
use mnemo::protocol::printable;

use crate::CliResult;
use crate::args::{ImportArgs, TransferFormat};
use crate::print::count;

/// Exit 0 when every entry was imported, 1 when some were skipped (each named on stderr with the
/// reason; the rest was imported), 2 when the import could not run or the store failed.
/// With `--format memory-stores`, the memory-stores API's JSON (exit 1 likewise when some was
/// skipped).
pub(crate) fn run_import(args: &ImportArgs) -> CliResult {
    let (db, dir) = (&args.db.db, &args.dir);
    if let TransferFormat::MemoryStores = args.format {
        return crate::memory_stores::import(db, dir, &args.agent, &args.root);
    }
    let summary = MnemoMemoryToolServer::import_store(db, dir, &args.agent, &args.root)?;
    for skipped in &summary.skipped {
        crate::print::tell(format_args!(
            "mnemo: not imported: {}: {}",
            printable(&skipped.path.to_string_lossy()),
            skipped.reason
        ));
    }
    crate::print::say(format_args!(
        "imported {} ({} bytes) from {}; skipped {}",
        count(summary.imported, "file"),
        summary.bytes,
        dir.display(),
        summary.skipped.len()
    ))?;
    if summary.store_failures > 0 {
        let what = if summary.stored {
            "check the store with `mnemo verify`".to_string()
        } else {
            format!(
                "the new store was removed, so nothing is at {}: fix what each skipped file names (a full disk, say) and import again",
                db.display()
            )
        };
        return Err(format!(
            "the store failed during the import ({} calls could not be recorded); {what}",
            summary.store_failures
        )
        .into());
    }
    Ok(if summary.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
