//! `mnemo store create|list|delete` (part of the binary): the stores of a data directory
//! (`mnemo serve --data DIR`), where the library's `DataStores` reaches them: through the server
//! that serves it (the one `--connect` names, or the one whose server file `DIR` holds), else on
//! `DIR` directly, holding its lock meanwhile.

use std::path::Path;
use std::process::ExitCode;

use mnemo::DataStores;

use crate::CliResult;
use crate::print::say;

/// What to do to a data directory's stores.
pub enum Action<'a> {
    /// Make the store `NAME`.
    Create(&'a str),
    /// List the stores, as JSON lines if asked.
    List { json: bool },
    /// Remove the store `NAME` and all of it; `confirm` must repeat the name.
    Delete {
        name: &'a str,
        confirm: Option<&'a str>,
    },
}

/// Where the stores are: a data directory, or a server given by URL and operator token.
pub struct Place<'a> {
    /// `--data DIR`.
    pub data: Option<&'a Path>,
    /// `--connect URL`.
    pub connect: Option<&'a str>,
    /// `--token T`.
    pub token: Option<&'a str>,
}

/// Runs `action` where `place` says.
pub fn run(action: &Action<'_>, place: &Place<'_>) -> CliResult {
    if let Action::Create(name) | Action::Delete { name, .. } = action {
        mnemo::check_store_name(name)?;
    }
    if let Action::Delete { name, confirm } = action {
        if *confirm != Some(*name) {
            return Err(format!(
                "deleting a store removes every memory and its whole log: confirm with `mnemo store delete {name} --confirm {name}`"
            )
            .into());
        }
    }
    let stores = match (place.data, place.connect) {
        (_, Some(url)) => DataStores::Served {
            url: url.to_string(),
            token: place
                .token
                .ok_or("--connect needs --token: the operator token of the --data server")?
                .to_string(),
        },
        (Some(dir), None) => DataStores::of(dir)?,
        (None, None) => {
            return Err("say where the stores are: --data DIR (a data directory), or --connect URL --token T (its server)".into());
        }
    };
    let (on, from) = match &stores {
        DataStores::Dir(dir) => (format!("in {}", dir.display()), dir.display().to_string()),
        DataStores::Served { url, .. } => (format!("on {url}"), url.clone()),
    };
    match action {
        Action::Create(name) => {
            stores.create(name)?;
            say(format_args!("created the store {name} {on}"))?;
        }
        Action::List { json } => {
            for store in stores.list()? {
                match json {
                    true => say(&store)?,
                    false => say(store["name"].as_str().unwrap_or_default())?,
                }
            }
        }
        Action::Delete { name, .. } => {
            stores.delete(name)?;
            say(format_args!("deleted the store {name} from {from}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
