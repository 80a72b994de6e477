//! `mnemo mcp`: the MCP server on stdin and stdout.

use crate::CliResult;
use crate::args::Session;
use crate::connect::{Remote, Start};
#[cfg(feature = "mcp")]
use crate::session::{end_session, open_session};

#[cfg(feature = "mcp")]
pub(crate) fn run_mcp(
    session: Session,
    agent: Option<String>,
    remote: &Remote,
    start: &Start,
) -> CliResult {
    #[cfg(feature = "serve")]
    if let Some(link) = crate::connect::session_link(&session, remote, start, agent.clone(), "mcp")?
    {
        return crate::connect::run_mcp(link, &session);
    }
    #[cfg(not(feature = "serve"))]
    {
        let _ = start;
        crate::connect::refuse_connect(remote)?;
    }
    let server = open_session(session, agent.unwrap_or_else(|| "mcp".into()))?;
    mnemo::MnemoMcpServer::new(server.clone()).serve_stdio()?;
    end_session(&server)
}

#[cfg(not(feature = "mcp"))]
pub(crate) fn run_mcp(
    _session: Session,
    _agent: Option<String>,
    _remote: &Remote,
    _start: &Start,
) -> CliResult {
    Err("this mnemo was built without MCP support; rebuild it with `cargo build --release --features mcp` (or, from a clone of the repository, install it with `cargo install --path . --features mcp`)".into())
}
