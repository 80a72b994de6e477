//! `mnemo tool`: the memory tool as JSON lines on stdin and stdout.

use std::io::Write;

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
    let limit = server.limits().max_request_bytes;
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    // Each line is read holding at most `limit` bytes of it; a longer one is only counted and
    // hashed up to its newline, answered with the size refusal, and the next line goes on.
    while let Some(request) = mnemo::tool::read_request(&mut input, limit)? {
        let result = server.handle_request(request);
        serde_json::to_writer(&mut out, &result)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    end_session(&server)
}
