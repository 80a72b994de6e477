//! `mnemo export`: the files written out as plain files in the SDK tool's layout.

use std::process::ExitCode;

use mnemo::Seq;

use crate::CliResult;
use crate::args::{ExportArgs, TransferFormat};
use crate::print::count;

/// `mnemo export`: as plain files (of the store now, or `--at` an event), or with `--format
/// memory-stores` as the memory-stores API's JSON.
pub(crate) fn run_export(args: &ExportArgs) -> CliResult {
    let (db, dir, at, remote) = (&args.db.db, &args.dir, args.at, &args.remote);
    if let TransferFormat::MemoryStores = args.format {
        return match (at, remote.connect.is_some()) {
            (Some(_), _) => Err("--at is for --format files; a memory-stores export holds every version".into()),
            (_, true) => Err("--format memory-stores exports a store at --db; for a store on a server, use its /v1/memory_stores routes".into()),
            (None, false) => crate::memory_stores::export(db, dir, &args.root),
        };
    }
    let summary =
        crate::connect::reading(db, remote, |client| client.export_files(dir, at.map(Seq)))?;
    crate::print::say(format_args!(
        "exported {} ({} bytes) to {}",
        count(summary.files, "file"),
        summary.bytes,
        dir.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
