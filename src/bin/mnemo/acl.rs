//! `mnemo acl`: the grants, listed, given and taken.

use mnemo::AdminCommand;
use mnemo::protocol::printable;

use crate::CliResult;
use crate::args::AclCmd;
use crate::print::{print_receipt, print_rows};

pub(crate) fn run_acl(command: AclCmd) -> CliResult {
    let (db, operator, remote, change) = match command {
        AclCmd::List { read } => {
            let policy = read.read(|client| client.policy())?;
            let grants: Vec<_> = policy.grants().iter().map(|g| g.to_json()).collect();
            return print_rows(&grants, read.json, grant_row);
        }
        AclCmd::Grant { target, access } => (
            target.db,
            target.operator,
            target.remote,
            AdminCommand::Grant {
                agent: target.agent,
                prefix: target.prefix,
                access,
            },
        ),
        AclCmd::Revoke { target } => (
            target.db,
            target.operator,
            target.remote,
            AdminCommand::Revoke {
                agent: target.agent,
                prefix: target.prefix,
            },
        ),
    };
    let receipt = crate::connect::administering(&db.db, &remote, &operator, |client| {
        client.admin(change.clone())
    })?;
    print_receipt(&receipt)
}

/// A grant as `mnemo acl list` shows it, from its JSON.
pub(crate) fn grant_row(g: &serde_json::Value) -> Option<String> {
    Some(format!(
        "{:<24}  {:<10}  {}",
        printable(g["agent"].as_str()?),
        g["access"].as_str()?,
        printable(g["prefix"].as_str()?)
    ))
}
