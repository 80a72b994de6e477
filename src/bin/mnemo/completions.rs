//! `mnemo completions` and `mnemo man`: shell completions and the manual page.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::Cli;
use crate::CliResult;

/// The script is made in memory and then written: `clap_complete::generate` panics when a write
/// fails, and a reader that closes the pipe early (`| head`) must end this quietly, as every
/// other command's output does (a broken pipe is exit 0, see `main`).
pub(crate) fn run_completions(shell: clap_complete::Shell) -> CliResult {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "mnemo", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run_man(out: Option<&Path>) -> CliResult {
    let command = <Cli as clap::CommandFactory>::command();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .map_err(|e| format!("cannot write the man pages into {}: {e}", dir.display()))?;
            crate::print::tell(format_args!(
                "mnemo man: wrote the pages into {}",
                dir.display()
            ));
        }
        None => {
            // Made in memory, then written, as the completions are: a closed pipe is one failed
            // write, which `main` ends quietly.
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&page)?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
