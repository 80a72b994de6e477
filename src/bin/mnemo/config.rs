//! `mnemo config`: the store settings, listed and set.

use crate::CliResult;
use crate::args::ConfigCmd;
use crate::print::{print_receipt, print_rows};

pub(crate) fn run_config(command: ConfigCmd) -> CliResult {
    match command {
        ConfigCmd::List { read } => {
            let settings = read.read(|client| client.settings())?;
            let rows: Vec<_> = settings
                .into_iter()
                .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
                .collect();
            print_rows(&rows, read.json, setting_row)
        }
        ConfigCmd::Set {
            setting: name,
            value,
            db,
            operator,
            remote,
        } => {
            let receipt =
                crate::connect::administering(&db.db, &remote, &operator.name, |client| {
                    client.configure(&name, &value)
                })?;
            print_receipt(&receipt)
        }
    }
}

/// A setting as `mnemo config list` prints it: `NAME = VALUE`.
pub(crate) fn setting_row(setting: &serde_json::Value) -> Option<String> {
    Some(format!(
        "{} = {}",
        setting["name"].as_str()?,
        setting["value"].as_str()?
    ))
}
