//! `mnemo store create|list|delete` (part of the binary): the stores of a data directory
//! (`mnemo serve --data DIR`), where the library's `DataStores` reaches them: through the server
//! that serves it (the one `--connect` names, or the one whose server file `DIR` holds), else on
//! `DIR` directly, holding its lock meanwhile.

use std::process::ExitCode;

use mnemo::DataStores;

use crate::CliResult;
use crate::args::{DataPlace, StoreCmd};
use crate::print::say;

/// Runs `command` where its `--data` or `--connect` says.
pub fn run(command: &StoreCmd) -> CliResult {
    let (StoreCmd::Create { place, .. }
    | StoreCmd::List { place, .. }
    | StoreCmd::Delete { place, .. }) = command;
    if let StoreCmd::Create { name, .. } | StoreCmd::Delete { name, .. } = command {
        mnemo::DataDir::check_name(name)?;
    }
    if let StoreCmd::Delete { name, confirm, .. } = command {
        if confirm.as_deref() != Some(name.as_str()) {
            return Err(format!(
                "deleting a store removes every memory and its whole log: confirm with `mnemo store delete {name} --confirm {name}`"
            )
            .into());
        }
    }
    let stores = stores(place)?;
    let (on, from) = match &stores {
        DataStores::Dir(dir) => (format!("in {}", dir.display()), dir.display().to_string()),
        DataStores::Served { url, .. } => (format!("on {url}"), url.clone()),
    };
    match command {
        StoreCmd::Create { name, .. } => {
            stores.create(name)?;
            say(format_args!("created the store {name} {on}"))?;
        }
        StoreCmd::List { json, .. } => {
            for store in stores.list()? {
                match json {
                    true => say(&store)?,
                    false => say(store["name"].as_str().unwrap_or_default())?,
                }
            }
        }
        StoreCmd::Delete { name, .. } => {
            stores.delete(name)?;
            say(format_args!("deleted the store {name} from {from}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where `place` says the stores are: a server given by URL and operator token, or a data
/// directory (through its server if one serves it).
fn stores(place: &DataPlace) -> Result<DataStores, Box<dyn std::error::Error>> {
    Ok(match (&place.data, &place.connect) {
        (_, Some(url)) => DataStores::Served {
            url: url.clone(),
            token: place
                .token
                .clone()
                .ok_or("--connect needs --token: the operator token of the --data server")?,
        },
        (Some(dir), None) => DataStores::of(dir)?,
        (None, None) => {
            return Err("say where the stores are: --data DIR (a data directory), or --connect URL --token T (its server)".into());
        }
    })
}
