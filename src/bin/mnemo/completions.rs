//! `mnemo completions` and `mnemo man`: shell completions and the manual page.

use std::path::Path;
use std::process::ExitCode;

use crate::Cli;
use crate::CliResult;

pub(crate) fn run_completions(shell: clap_complete::Shell) -> CliResult {
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "mnemo", &mut std::io::stdout().lock());
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
            eprintln!("mnemo man: wrote the pages into {}", dir.display());
        }
        None => clap_mangen::Man::new(command).render(&mut std::io::stdout().lock())?,
    }
    Ok(ExitCode::SUCCESS)
}
