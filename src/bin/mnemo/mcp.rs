//! `mnemo mcp`: the MCP server on stdin and stdout.

use crate::CliResult;
use crate::args::Session;
use crate::connect::{Remote, Start};
use crate::session::{end_session, open_session};

pub(crate) fn run_mcp(
    session: Session,
    agent: Option<String>,
    remote: &Remote,
    start: &Start,
) -> CliResult {
    if let Some(link) = crate::connect::session_link(&session, remote, start, agent.clone(), "mcp")?
    {
        return crate::connect::run_mcp(link, &session);
    }
    let server = open_session(session, agent.unwrap_or_else(|| "mcp".into()))?;
    mnemo::MnemoMcpServer::new(server.clone()).serve_stdio()?;
    end_session(&server)
}
