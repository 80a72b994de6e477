//! The server's admin routes: grants, settings and agent tokens, each change answered with
//! the receipt of its admin event.

use serde_json::{Value, json};

use super::{AdminRequest, RemoteClient, RemoteError};
use crate::model::event::Seq;
use crate::store::writer::Receipt;

impl RemoteClient {
    /// A one-time login link's secret for the server's web viewer, asked with this client's
    /// token (the operator's: `POST /ui/api/link`): the viewer at `URL/ui/#login=SECRET` logs in
    /// with it once, within two minutes (`mnemo ui`). The error says whether the server could
    /// not be reached, refused, or is no mnemo server with the viewer.
    pub fn login_secret(&self) -> crate::Result<String> {
        let url = &self.url;
        let failed =
            |reason: String, unreachable: bool, status: Option<u16>| crate::Error::Server {
                reason,
                unreachable,
                status,
            };
        let unreadable = |e: &dyn std::fmt::Display| {
            failed(
                format!("the server at {url} answered unreadably ({e})"),
                false,
                None,
            )
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .post(format!("{url}/ui/api/link"))
            .header("Authorization", format!("Bearer {}", self.token))
            .send_empty()
            .map_err(|e| {
                let why = format!("cannot reach the server at {url} ({e}); is it running?");
                failed(why, true, None)
            })?;
        let status = response.status();
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| unreadable(&e))?;
        if !status.is_success() {
            let why = format!("the server at {url} refused a login link ({status}): {body}");
            return Err(failed(why, false, Some(status.as_u16())));
        }
        let answer: Value = serde_json::from_str(&body).map_err(|e| unreadable(&e))?;
        answer["secret"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                let why = format!(
                    "the server at {url} sent no login link (is it a mnemo server with the viewer?)"
                );
                failed(why, false, None)
            })
    }

    /// Records a grant (`{"action": "grant", ...}`) or a revoke as the server's operator
    /// (operator only): the receipt of the admin event, an error one when the store refused the
    /// change (which is logged too).
    pub fn acl(&self, change: &Value) -> Result<Receipt, RemoteError> {
        self.admin_receipt("/v1/acl", change)
    }

    /// Sets the store setting `name` to `value` as the server's operator (operator only): the
    /// receipt of the admin event, an error one when the store refused it (which is logged too).
    pub fn configure(&self, name: &str, value: &str) -> Result<Receipt, RemoteError> {
        self.admin_receipt(
            "/v1/config",
            &serde_json::json!({"name": name, "value": value}),
        )
    }

    /// Issues a token for `agent` with `label` through `POST /v1/tokens` (operator only): the
    /// receipt, and the token's text unless the store refused it.
    pub fn issue_token(
        &self,
        agent: &str,
        label: &str,
    ) -> Result<(Receipt, Option<String>), RemoteError> {
        let body = json!({"agent": agent, "label": label});
        let (status, answer) = self.admin(AdminRequest::Post {
            route: "/v1/tokens",
            body: &body,
        })?;
        let receipt = self.receipt_of(status, answer.clone())?;
        if receipt.is_error {
            return Ok((receipt, None));
        }
        let sent: Value = self.typed(&answer)?;
        let token = sent["token"]
            .as_str()
            .ok_or_else(|| self.protocol("a new token's answer without \"token\"".into()))?;
        Ok((receipt, Some(token.to_string())))
    }

    /// Revokes token `id` through `DELETE /v1/tokens/ID` (operator only).
    pub fn revoke_token(&self, id: &str) -> Result<Receipt, RemoteError> {
        let route = format!("/v1/tokens/{}", path_segment(id));
        let (status, answer) = self.admin(AdminRequest::Delete { route: &route })?;
        self.receipt_of(status, answer)
    }

    /// An admin change posted to `route`: its receipt (see [`acl`](Self::acl)).
    fn admin_receipt(&self, route: &str, change: &Value) -> Result<Receipt, RemoteError> {
        let (status, body) = self.admin(AdminRequest::Post {
            route,
            body: change,
        })?;
        self.receipt_of(status, body)
    }

    /// The receipt of an admin route's answer: 200 a change made, 400 with a seq one the store
    /// refused (and logged); any other answer is the server's refusal.
    fn receipt_of(&self, status: u16, body: Vec<u8>) -> Result<Receipt, RemoteError> {
        let answer: Option<Value> = serde_json::from_slice(&body).ok();
        let logged = answer.as_ref().and_then(|a| a["seq"].as_u64().map(Seq));
        let text = |key: &str| {
            answer
                .as_ref()
                .and_then(|a| a[key].as_str().map(str::to_string))
        };
        let is_error = match status {
            200 => false,
            400 if logged.is_some() => true,
            _ => return Err(self.refused_or(status, body)),
        };
        let seq = logged.ok_or_else(|| self.protocol("an admin answer without \"seq\"".into()))?;
        let text = text(if is_error { "error" } else { "result" })
            .ok_or_else(|| self.protocol("an admin answer without its text".into()))?;
        Ok(Receipt {
            seq,
            text,
            is_error,
            retried: false,
            retry_of: None,
            failure: None,
        })
    }

    /// The refusal an answer with `status` is, or a protocol error for a 2xx one this route
    /// does not make.
    fn refused_or(&self, status: u16, body: Vec<u8>) -> RemoteError {
        match self.accepted(status, body) {
            Err(refused) => refused,
            Ok(_) => self.protocol(format!("an unexpected status {status}")),
        }
    }
}

/// `text` as one segment of a URL path: bytes other than letters, digits, `-` and `_`
/// percent-encoded (`.` too, so `..` cannot reach another route).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
