//! `mnemo tool`: the memory tool as JSON lines on stdin and stdout.

use crate::CliResult;
use crate::args::Session;
use crate::connect::{Remote, Start};
use crate::session::{end_session, open_session};

pub(crate) fn run_tool(
    session: Session,
    agent: Option<String>,
    remote: &Remote,
    start: &Start,
) -> CliResult {
    if let Some(link) = crate::connect::session_link(&session, remote, start, agent.clone(), "cli")?
    {
        return crate::connect::run_tool(&link, session.max_request_bytes);
    }
    let server = open_session(session, agent.unwrap_or_else(|| "cli".into()))?;
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    server.answer_lines(&mut input, &mut std::io::stdout().lock())?;
    end_session(&server)
}
