//! `mnemo store create|list|delete` (part of the binary): the stores of a data directory
//! (`mnemo serve --data DIR`), through the server that serves it (the one `--connect` names, or
//! the one whose server file `DIR` holds), else on `DIR` directly, holding its lock meanwhile so
//! that no server starts on it halfway.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::CliResult;

/// What to do to a data directory's stores.
pub enum Action<'a> {
    /// Make the store `NAME`.
    Create(&'a str),
    /// List the stores, as JSON lines if asked.
    List { json: bool },
    /// Remove the store `NAME` and all of it; `confirm` must repeat the name.
    Delete {
        name: &'a str,
        confirm: Option<&'a str>,
    },
}

/// Where the stores are: a data directory, or a server given by URL and operator token.
pub struct Place<'a> {
    /// `--data DIR`.
    pub data: Option<&'a Path>,
    /// `--connect URL`.
    pub connect: Option<&'a str>,
    /// `--token T`.
    pub token: Option<&'a str>,
}

/// Runs `action` where `place` says.
pub fn run(action: &Action<'_>, place: &Place<'_>) -> CliResult {
    if let Action::Create(name) | Action::Delete { name, .. } = action {
        mnemo::check_store_name(name)?;
    }
    if let Action::Delete { name, confirm } = action {
        if *confirm != Some(*name) {
            return Err(format!(
                "deleting a store removes every memory and its whole log: confirm with `mnemo store delete {name} --confirm {name}`"
            )
            .into());
        }
    }
    match (place.data, place.connect) {
        (_, Some(url)) => {
            let token = place
                .token
                .ok_or("--connect needs --token: the operator token of the --data server")?;
            served::run(action, url, token)
        }
        (Some(dir), None) => {
            if let Some((url, token)) = served::server_of(dir)? {
                return served::run(action, &url, &token);
            }
            directly(action, dir)
        }
        (None, None) => {
            Err("say where the stores are: --data DIR (a data directory), or --connect URL --token T (its server)".into())
        }
    }
}

/// On the data directory itself, holding its lock.
fn directly(action: &Action<'_>, dir: &Path) -> CliResult {
    let data = mnemo::DataDir::lock(dir)?;
    let mut out = std::io::stdout().lock();
    match action {
        Action::Create(name) => {
            data.create(name)?;
            writeln!(out, "created the store {name} in {}", dir.display())?;
        }
        Action::List { json } => {
            for name in data.names()? {
                match json {
                    true => writeln!(out, "{}", serde_json::json!({"name": name, "open": false}))?,
                    false => writeln!(out, "{name}")?,
                }
            }
        }
        Action::Delete { name, .. } => {
            data.delete(name)?;
            writeln!(out, "deleted the store {name} from {}", dir.display())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

mod served {
    use std::io::Write;
    use std::path::Path;
    use std::process::ExitCode;

    use mnemo::{AdminRequest, RemoteClient};
    use serde_json::{Value, json};

    use super::Action;
    use crate::CliResult;

    /// The URL and operator token of the server that serves `dir`, if one runs.
    pub fn server_of(dir: &Path) -> Result<Option<(String, String)>, mnemo::RemoteError> {
        Ok(mnemo::link::find_server(dir)?.map(|file| (file.url, file.token)))
    }

    /// Through the server at `url`.
    pub fn run(action: &Action<'_>, url: &str, token: &str) -> CliResult {
        let client = RemoteClient::new(url, token);
        let mut out = std::io::stdout().lock();
        let (status, body) = match action {
            Action::Create(name) => client.admin(AdminRequest::Post {
                route: "/v1/stores",
                body: &json!({ "name": name }),
            })?,
            Action::Delete { name, .. } => client.admin(AdminRequest::Delete {
                route: &format!("/v1/stores/{name}?confirm={name}"),
            })?,
            Action::List { json } => {
                let mut after: Option<String> = None;
                loop {
                    let mut query = vec![("limit", "1000".to_string())];
                    query.extend(after.take().map(|a| ("after", a)));
                    let page: Value = serde_json::from_slice(&client.read("/v1/stores", &query)?)?;
                    for store in page["stores"].as_array().into_iter().flatten() {
                        match json {
                            true => writeln!(out, "{store}")?,
                            false => {
                                writeln!(out, "{}", store["name"].as_str().unwrap_or_default())?
                            }
                        }
                    }
                    match page["next"].as_str() {
                        Some(next) => after = Some(next.to_string()),
                        None => break,
                    }
                }
                out.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
        };
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            let why = answer["error"].as_str().unwrap_or("no reason given");
            return Err(format!("the server at {url} refused ({status}): {why}").into());
        }
        match action {
            Action::Create(name) => writeln!(out, "created the store {name} on {url}")?,
            Action::Delete { name, .. } => writeln!(out, "deleted the store {name} from {url}")?,
            Action::List { .. } => {}
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    }
}
