//! The stores of a data directory (`mnemo serve --data DIR`) made, listed and removed where they
//! are: through the server that serves the directory (`/v1/stores`, as its operator), else on
//! the directory itself under its lock ([`DataDir`]), so that no server starts on it halfway.
//! `mnemo store create|list|delete` prints what these return.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::client::discovery::ServerFile;
use crate::client::remote::{AdminRequest, RemoteClient};
use crate::error::{Error, Result};
use crate::store::data_dir::DataDir;

/// Where the stores of a data directory are reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataStores {
    /// On the data directory itself, each change holding its lock ([`DataDir::lock`]).
    Dir(PathBuf),
    /// Through the `mnemo serve --data` at `url`, with its operator token.
    Served {
        /// The server's base URL.
        url: String,
        /// The operator token from its server file.
        token: String,
    },
}

/// The most stores one page of `GET /v1/stores` is asked for.
const PAGE: &str = "1000";

impl DataStores {
    /// The stores of the data directory `dir`: through the live server that serves it (found
    /// by the server file in `dir`, which must prove it serves `dir`), else on `dir` itself.
    pub fn of(dir: &Path) -> Result<DataStores> {
        Ok(match ServerFile::find(dir)? {
            Some(file) => DataStores::Served {
                url: file.url,
                token: file.token,
            },
            None => DataStores::Dir(dir.to_path_buf()),
        })
    }

    /// Makes the empty store `name`. Refused for a name that is no store name, or one taken.
    pub fn create(&self, name: &str) -> Result<()> {
        match self {
            DataStores::Dir(dir) => DataDir::lock(dir)?.create(name).map(drop),
            DataStores::Served { url, token } => {
                let client = RemoteClient::new(url.as_str(), token.as_str());
                let body = json!({ "name": name });
                let route = "/v1/stores";
                let answer = client.admin(AdminRequest::Post { route, body: &body })?;
                refused(url, answer)
            }
        }
    }

    /// Every store, sorted by name, each as `GET /v1/stores` lists it (`name`, whether it is
    /// `open`, and what the server adds); on the directory, `{"name", "open": false}`.
    pub fn list(&self) -> Result<Vec<Value>> {
        let (url, token) = match self {
            DataStores::Dir(dir) => {
                let names = DataDir::lock(dir)?.names()?;
                let listed = names.into_iter().map(|n| json!({"name": n, "open": false}));
                return Ok(listed.collect());
            }
            DataStores::Served { url, token } => (url, token),
        };
        let client = RemoteClient::new(url.as_str(), token.as_str());
        let mut stores = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut query = vec![("limit", PAGE.to_string())];
            query.extend(after.take().map(|a| ("after", a)));
            let page: Value =
                serde_json::from_slice(&client.read("/v1/stores", &query)?).map_err(|e| {
                    Error::Server {
                        reason: format!("the server at {url} listed its stores unreadably ({e})"),
                        unreachable: false,
                        status: None,
                    }
                })?;
            stores.extend(page["stores"].as_array().into_iter().flatten().cloned());
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_string()),
                None => return Ok(stores),
            }
        }
    }

    /// Removes the store `name` and all of it: refused while another process has it open.
    pub fn delete(&self, name: &str) -> Result<()> {
        match self {
            DataStores::Dir(dir) => DataDir::lock(dir)?.delete(name),
            DataStores::Served { url, token } => {
                let client = RemoteClient::new(url.as_str(), token.as_str());
                let route = &format!("/v1/stores/{name}?confirm={name}");
                let answer = client.admin(AdminRequest::Delete { route })?;
                refused(url, answer)
            }
        }
    }
}

/// A change's answer from the server at `url`: its refusal, with the server's reason, as an
/// [`Error::Server`].
fn refused(url: &str, (status, body): (u16, Vec<u8>)) -> Result<()> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let why = answer["error"].as_str().unwrap_or("no reason given");
    Err(Error::Server {
        reason: format!("the server at {url} refused ({status}): {why}"),
        unreachable: false,
        status: Some(status),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_are_made_listed_and_removed_on_a_directory_no_server_serves() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stores = DataStores::of(dir.path()).expect("of");
        assert_eq!(stores, DataStores::Dir(dir.path().to_path_buf()));
        stores.create("b").expect("create b");
        stores.create("a").expect("create a");
        let listed = stores.list().expect("list");
        assert_eq!(
            listed,
            vec![
                json!({"name": "a", "open": false}),
                json!({"name": "b", "open": false})
            ]
        );
        stores.delete("a").expect("delete");
        assert_eq!(stores.list().expect("list").len(), 1);
        let missing = stores.delete("a").expect_err("gone");
        assert!(missing.to_string().contains("no store \"a\""), "{missing}");
    }

    #[test]
    fn a_server_that_refuses_is_named_with_its_reason() {
        let e =
            refused("http://x", (409, br#"{"error": "it exists"}"#.to_vec())).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "the server at http://x refused (409): it exists"
        );
        assert!(refused("http://x", (201, Vec::new())).is_ok());
    }
}
