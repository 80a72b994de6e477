//! The MCP server's memory when it is a client of `mnemo serve`: a [`Link`] to the server that
//! holds the store, which starts that server again when it goes away. A call the server did not
//! answer becomes the error result [`unanswered`] writes, so the model is told to check and retry.

use serde_json::Value;

use super::Memory;
use crate::client::discovery::{Link, unanswered};
use crate::store::projection::MemoryRecord;

impl Memory for Link {
    fn handle(&self, block: &Value) -> Value {
        let answer = self.call(|client| client.handle_told(block));
        self.count(answer.as_ref());
        answer.map_or_else(
            |e| {
                let id = block.get("id").and_then(Value::as_str);
                unanswered(id, &e)
            },
            |(result, _)| result,
        )
    }

    // A resource read the server did not answer counts as a call does: the session ends with
    // exit 2 saying so.
    fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, String> {
        self.call(|client| client.records_by_tag(tag)).map_err(|e| {
            self.count_read(&e);
            e.to_string()
        })
    }

    fn record(&self, path: &str) -> Result<Option<MemoryRecord>, String> {
        self.call(|client| client.record(path)).map_err(|e| {
            self.count_read(&e);
            e.to_string()
        })
    }
}
