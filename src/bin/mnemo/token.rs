//! `mnemo token`: agent tokens, issued, listed and revoked.

use std::io::Write;
use std::process::ExitCode;

use mnemo::protocol::TokenInfo;
use mnemo::protocol::printable;

use crate::CliResult;
use crate::args::TokenCmd;
use crate::print::{print_receipt, refused};

pub(crate) fn run_token(command: TokenCmd) -> CliResult {
    match command {
        TokenCmd::Create {
            db,
            agent,
            label,
            operator,
            remote,
        } => {
            let (receipt, token) =
                crate::connect::administering(&db.db, &remote, &operator.name, |client| {
                    client.issue_token(&agent, &label)
                })?;
            let Some(token) = token.filter(|_| !receipt.is_error) else {
                return Err(refused(&receipt).into());
            };
            crate::print::tell(format_args!("{KEEP_TOKEN}"));
            let issued = format!("{} (seq {})\n{token}", receipt.text, receipt.seq);
            crate::print::say_once(
                &issued,
                "the token",
                "revoke it (`mnemo token list` shows its id, by agent and label; then `mnemo token revoke ID`) and create another",
            )?;
            Ok(ExitCode::SUCCESS)
        }
        TokenCmd::List { read } => {
            let tokens = read.read(|client| client.tokens())?;
            let mut out = std::io::stdout().lock();
            for token in &tokens {
                if read.json {
                    writeln!(out, "{}", serde_json::to_string(token)?)?;
                } else {
                    writeln!(out, "{}", token_row(token))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TokenCmd::Revoke {
            id,
            db,
            operator,
            remote,
        } => {
            let receipt =
                crate::connect::administering(&db.db, &remote, &operator.name, |client| {
                    client.revoke_token(&id)
                })?;
            print_receipt(&receipt)
        }
    }
}

/// A token as `mnemo token list` shows it.
pub(crate) fn token_row(t: &TokenInfo) -> String {
    let state = match &t.revoked {
        None => "active".to_string(),
        Some(v) => format!("revoked at seq {} by {}", v.seq, printable(&v.by)),
    };
    format!(
        "{}  {:<16}  issued seq {} {} by {}  {}  {}",
        t.id,
        printable(&t.agent),
        t.issued_seq,
        t.issued_at,
        printable(&t.issued_by),
        state,
        printable(&t.label)
    )
}

/// What `mnemo token create` says on stderr before it prints the new token.
pub(crate) const KEEP_TOKEN: &str = "mnemo: keep this token now, it is not shown again; send it as `Authorization: Bearer TOKEN` to `mnemo serve` on this store";
