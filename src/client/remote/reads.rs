//! The server's read routes: the agent's files, the files and the log at any seq, one event,
//! a diff, the grants, the settings, the tokens, the head and verify, read into the types of
//! [`crate::model::protocol`].

use serde_json::Value;

use super::{RemoteClient, RemoteError};
use crate::audit::verify::Report;
use crate::model::event::Seq;
use crate::model::paths::MemPath;
use crate::model::policy::{Access, Grant, Policy};
use crate::model::protocol::{
    FileDiff, HistoryEvent, Listing, LogQuery, LoggedEvent, ShownEvent, TokenInfo, TraceReport,
    VerifyReport,
};
use crate::store::log::Head;
use crate::store::projection::{MEMORY_TAG, MemoryRecord};

impl RemoteClient {
    /// Memory files carrying `tag` that the acting agent may read (see
    /// [`MnemoClient::records_by_tag`](crate::MnemoClient::records_by_tag)); not logged.
    pub fn records_by_tag(&self, tag: &str) -> Result<Vec<MemoryRecord>, RemoteError> {
        let answer = self.get("/v1/records", &[("tag", tag.to_string())])?;
        let listed = self.json(&answer)?;
        let files = listed["files"]
            .as_array()
            .ok_or_else(|| self.protocol("no \"files\" list".into()))?;
        files.iter().map(|file| self.record_of(file)).collect()
    }

    /// The file at canonical `path` if the acting agent may read it (see
    /// [`MnemoClient::record`](crate::MnemoClient::record)); not logged.
    pub fn record(&self, path: &str) -> Result<Option<MemoryRecord>, RemoteError> {
        Ok(self
            .records_by_tag(&format!("path:{path}"))?
            .into_iter()
            .next())
    }

    fn record_of(&self, file: &Value) -> Result<MemoryRecord, RemoteError> {
        let text = |key: &str| {
            file[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| self.protocol(format!("a file without {key:?}")))
        };
        let seq = |key: &str| {
            file[key]
                .as_u64()
                .map(Seq)
                .ok_or_else(|| self.protocol(format!("a file without {key:?}")))
        };
        let tags = file["tags"]
            .as_array()
            .map(|tags| {
                tags.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(MemoryRecord {
            path: text("path")?,
            content: text("content")?,
            tags,
            created: seq("created")?,
            updated: seq("updated")?,
        })
    }

    /// The files under `dir` right after event `at` (`None`: now), without their content, as
    /// `/v1/ls` answers (operator only).
    pub fn listing(&self, dir: &MemPath, at: Option<Seq>) -> Result<Listing, RemoteError> {
        let mut query = vec![("dir", dir.to_string())];
        query.extend(at.map(|at| ("at", at.0.to_string())));
        self.typed(&self.get("/v1/ls", &query)?)
    }

    /// The content of the file at `file` right after event `at` (`None`: now), as `/v1/cat`
    /// answers (operator only); `None` when there is no file there.
    pub fn content_at(
        &self,
        file: &MemPath,
        at: Option<Seq>,
    ) -> Result<Option<String>, RemoteError> {
        let mut query = vec![("path", file.to_string())];
        query.extend(at.map(|at| ("at", at.0.to_string())));
        match self.get("/v1/cat", &query) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|e| self.protocol(format!("the content of {file} is not UTF-8 ({e})"))),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every file under `dir` right after event `at` (`None`: now), with its content, from
    /// `/v1/ls` and `/v1/cat` (operator only).
    pub fn tree_at(
        &self,
        dir: &MemPath,
        at: Option<Seq>,
    ) -> Result<Vec<MemoryRecord>, RemoteError> {
        let listing = self.listing(dir, at)?;
        let mut records = Vec::with_capacity(listing.files.len());
        for file in listing.files {
            let path = MemPath::absolute(&file.path)
                .map_err(|e| self.protocol(format!("a listed path that is not one ({e})")))?;
            // A file deleted between the listing and its read (only now, not at a seq) is gone.
            let Some(content) = self.content_at(&path, at)? else {
                continue;
            };
            records.push(MemoryRecord {
                tags: vec![MEMORY_TAG.to_string(), format!("path:{}", file.path)],
                path: file.path,
                content,
                created: Seq(file.created),
                updated: Seq(file.updated),
            });
        }
        Ok(records)
    }

    /// The logged events from seq `from` on, only `agent`'s and only those naming a path under
    /// `path` when given, at most `limit`, as `mnemo log --json` prints them (operator only).
    pub fn log(&self, query: &LogQuery) -> Result<Vec<LoggedEvent>, RemoteError> {
        let mut params = vec![("from", query.from.max(1).to_string())];
        params.extend(query.agent.as_ref().map(|agent| ("agent", agent.clone())));
        params.extend(query.path.as_ref().map(|path| ("path", path.to_string())));
        params.extend(query.command.as_ref().map(|c| ("command", c.clone())));
        params.extend(query.errors.map(|e| ("error", e.to_string())));
        params.extend(query.since_ms.map(|t| ("since_ms", t.to_string())));
        params.extend(query.until_ms.map(|t| ("until_ms", t.to_string())));
        params.extend(query.before.map(|b| ("before", b.to_string())));
        params.extend(query.limit.map(|limit| ("limit", limit.to_string())));
        params.extend(query.scan.map(|scan| ("scan", scan.to_string())));
        self.typed_lines(&self.get("/v1/log", &params)?)
    }

    /// Every event of every file that lived at `path`, as `mnemo history --json` prints them
    /// (operator only).
    pub fn history(&self, path: &MemPath) -> Result<Vec<HistoryEvent>, RemoteError> {
        self.typed_lines(&self.get("/v1/history", &[("path", path.to_string())])?)
    }

    /// Event `seq` whole, as `mnemo show --json` prints it (operator only).
    pub fn show(&self, seq: Seq) -> Result<ShownEvent, RemoteError> {
        self.typed(&self.get("/v1/show", &[("seq", seq.0.to_string())])?)
    }

    /// Where the content event `seq` wrote (or the file `file` held right after it) went, as
    /// `mnemo trace --json` prints it (operator only: an agent token gets 403).
    pub fn trace(&self, seq: Seq, file: Option<&MemPath>) -> Result<TraceReport, RemoteError> {
        let mut query = vec![("seq", seq.0.to_string())];
        query.extend(file.map(|f| ("path", f.to_string())));
        self.typed(&self.get("/v1/trace", &query)?)
    }

    /// The files under `dir` that changed from after event `from` to after event `to`, as
    /// `mnemo diff --json` prints them (operator only).
    pub fn diff(&self, from: Seq, to: Seq, dir: &MemPath) -> Result<Vec<FileDiff>, RemoteError> {
        let query = [
            ("from", from.0.to_string()),
            ("to", to.0.to_string()),
            ("path", dir.to_string()),
        ];
        self.typed_lines(&self.get("/v1/diff", &query)?)
    }

    /// The access policy in force (operator only).
    pub fn policy(&self) -> Result<Policy, RemoteError> {
        let grants = self.lines(&self.get("/v1/acl", &[])?)?;
        let grants = grants
            .iter()
            .map(|grant| {
                let field = |key: &str| {
                    grant[key]
                        .as_str()
                        .ok_or_else(|| self.protocol(format!("a grant without {key:?}")))
                };
                Ok(Grant {
                    agent: field("agent")?.to_string(),
                    prefix: MemPath::absolute(field("prefix")?).map_err(|e| self.protocol(e))?,
                    access: Access::from_name(field("access")?)
                        .ok_or_else(|| self.protocol("a grant of an unknown access".into()))?,
                })
            })
            .collect::<Result<Vec<Grant>, RemoteError>>()?;
        Ok(Policy::new(grants))
    }

    /// The store settings, each `(name, value)`, the defaults included (operator only).
    pub fn settings(&self) -> Result<Vec<(String, String)>, RemoteError> {
        self.lines(&self.get("/v1/config", &[])?)?
            .iter()
            .map(|row| match (row["name"].as_str(), row["value"].as_str()) {
                (Some(name), Some(value)) => Ok((name.to_string(), value.to_string())),
                _ => Err(self.protocol("a setting without \"name\" or \"value\"".into())),
            })
            .collect()
    }

    /// Every agent token of the store, as `GET /v1/tokens` lists them (operator only).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, RemoteError> {
        self.typed_lines(&self.get("/v1/tokens", &[])?)
    }

    /// [`verify`](Self::verify) as the report the library makes (operator only).
    pub fn verify_report(&self, expect: Option<&Head>) -> Result<Report, RemoteError> {
        let sent = self.verify(expect)?;
        Report::from_protocol(&sent).ok_or_else(|| {
            self.protocol("a verify report with a hash or a name that is not one".into())
        })
    }

    /// The last event (operator only).
    pub fn head(&self) -> Result<Head, RemoteError> {
        let answer = self.json(&self.get("/v1/head", &[])?)?;
        let checkpoint = answer["checkpoint"]
            .as_str()
            .ok_or_else(|| self.protocol("no \"checkpoint\"".into()))?;
        Head::parse(checkpoint).map_err(|e| self.protocol(e.to_string()))
    }

    /// Verifies the whole store on the server, as `mnemo verify --json` reports it; `expect`
    /// is a checkpoint (`SEQ:HASH`) the log must still hold (operator only).
    pub fn verify(&self, expect: Option<&Head>) -> Result<VerifyReport, RemoteError> {
        let query: Vec<(&str, String)> = expect
            .map(|head| ("expect", head.to_string()))
            .into_iter()
            .collect();
        let answer = self.get("/v1/verify", &query)?;
        self.typed(&answer)
    }
}
