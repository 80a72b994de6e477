//! Who a request comes from: its bearer token, and the `Host` and `Origin` it names.
//!
//! Every request carries `Authorization: Bearer TOKEN`. [`Authority::principal`] maps a token to
//! a [`Principal`]: the operator token the server made at start (written to the server file,
//! readable only by the store directory's owner), or an agent token the operator issued
//! (`mnemo token create`, `POST /v1/tokens`), kept as a hash in the log and looked up in the
//! index's token table by its id (the `token` module) on every request, so a revoke counts from the
//! next request on. Tokens are compared as blake3 hashes, whose equality is constant-time, so a
//! wrong token's answer takes the same time however much of it was right.
//!
//! The operator may act for any agent: `X-Mnemo-Agent: NAME` names it, or the server's default
//! agent is used. An agent acts only as itself: an `X-Mnemo-Agent` naming another agent is
//! refused (403), and it reaches only the memory tool (`POST /v1/memory`, `/mcp`).
//!
//! `Host` and `Origin` are checked against the address the server listens on, so a web page on
//! another site cannot reach a loopback server through DNS rebinding: a browser sends the page's
//! host name in `Host`, and its site in `Origin`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::{HeaderMap, StatusCode};

use crate::client::remote::decode_agent;
use crate::client::token::{TokenRecord, Verdict};

/// The header an operator names the acting agent in.
pub const AGENT_HEADER: &str = "x-mnemo-agent";

/// The header that names an agent id no header carries as it is, percent-encoded.
pub const AGENT_ENCODED_HEADER: &str = "x-mnemo-agent-encoded";

/// Who presented the bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// The store directory's owner: may act for any agent, and run admin routes.
    Operator,
    /// An agent proven by its own token: acts only as that agent.
    Agent(String),
}

impl Principal {
    /// Whether this principal may use the operator's routes (reads of the whole store, admin).
    pub fn is_operator(&self) -> bool {
        matches!(self, Principal::Operator)
    }
}

/// An authenticated request: who it is from and which agent it acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Who presented the token.
    pub principal: Principal,
    /// The agent id calls are recorded under.
    pub agent: String,
}

/// A random bearer token: 256 bits from the operating system's random source, in hex.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A fresh token from the OS random source.
    pub fn generate() -> std::io::Result<Token> {
        crate::client::token::random_hex(32).map(Token)
    }

    /// A token every node of a fleet shares (read from the fleet's bucket).
    pub(crate) fn shared(text: String) -> Token {
        Token(text)
    }

    /// The token's text, as a client sends it after `Bearer `.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Reads the record of an agent token by its id (one point read of the index).
pub type TokenLookup = Arc<dyn Fn(&str) -> crate::Result<Option<TokenRecord>> + Send + Sync>;

/// Maps bearer tokens to principals.
#[derive(Clone)]
pub struct Authority {
    operator: blake3::Hash,
    tokens: Option<TokenLookup>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("agent_tokens", &self.tokens.is_some())
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// An authority that knows the operator token `operator` and no agent token.
    pub fn new(operator: &Token) -> Authority {
        Authority {
            operator: blake3::hash(operator.as_str().as_bytes()),
            tokens: None,
        }
    }

    /// An authority that knows the operator token and the agent tokens `tokens` reads.
    pub fn with_tokens(operator: &Token, tokens: TokenLookup) -> Authority {
        Authority {
            tokens: Some(tokens),
            ..Authority::new(operator)
        }
    }

    /// Whether `token` is the operator's. Answers from memory, without a lookup.
    pub fn is_operator(&self, token: &str) -> bool {
        // `blake3::Hash` compares in constant time.
        blake3::hash(token.as_bytes()) == self.operator
    }

    /// Whether the request's bearer token is the operator's (answered from memory; any other
    /// needs [`Authority::caller`], which may read the store).
    pub fn is_operator_request(&self, headers: &HeaderMap) -> bool {
        bearer(headers).is_ok_and(|token| self.is_operator(token))
    }

    /// The principal `token` proves. An agent token is looked up in the store (a point read,
    /// which may wait for the writer lock).
    pub fn principal(&self, token: &str) -> Result<Principal, Refusal> {
        if self.is_operator(token) {
            return Ok(Principal::Operator);
        }
        let Some(lookup) = &self.tokens else {
            return Err(Refusal::Unauthorized(UNKNOWN_TOKEN));
        };
        match crate::client::token::authenticate(token, |id| lookup(id)) {
            Ok(Verdict::Agent(agent)) => Ok(Principal::Agent(agent)),
            Ok(Verdict::Unknown) => Err(Refusal::Unauthorized(UNKNOWN_TOKEN)),
            Ok(Verdict::Revoked) => Err(Refusal::Unauthorized(REVOKED_TOKEN)),
            Err(e) => Err(Refusal::Unavailable(format!(
                "the token could not be checked ({e}); retry"
            ))),
        }
    }

    /// Authenticates a request from its headers: who it is from and which agent it acts as.
    pub fn caller(&self, headers: &HeaderMap, default_agent: &str) -> Result<Caller, Refusal> {
        let token = bearer(headers)?;
        let principal = self.principal(token)?;
        let named = named_agent(headers)?;
        let agent = match (&principal, named.as_deref()) {
            (Principal::Operator, Some(name)) => name.to_string(),
            (Principal::Operator, None) => default_agent.to_string(),
            (Principal::Agent(own), Some(name)) if name != own => {
                return Err(Refusal::Forbidden(format!(
                    "this token acts only as agent {own:?}, not {name:?}; name no other agent (the X-Mnemo-Agent header, which `mnemo tool --agent` and `mnemo mcp --agent` send) or use {name:?}'s token"
                )));
            }
            (Principal::Agent(own), _) => own.clone(),
        };
        Ok(Caller { principal, agent })
    }
}

/// The agent a request names: `X-Mnemo-Agent` as it is, or `X-Mnemo-Agent-Encoded`
/// percent-decoded (for an id no header carries as it is); never both, never twice.
pub(crate) fn named_agent(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    let plain: Vec<_> = headers.get_all(AGENT_HEADER).iter().collect();
    let encoded: Vec<_> = headers.get_all(AGENT_ENCODED_HEADER).iter().collect();
    match (plain.as_slice(), encoded.as_slice()) {
        ([], []) => Ok(None),
        ([value], []) => value.to_str().map(|name| Some(name.to_string())).map_err(|_| {
            Refusal::BadRequest(
                "the X-Mnemo-Agent header is not visible ASCII; send an agent id outside it percent-encoded in X-Mnemo-Agent-Encoded".into(),
            )
        }),
        ([], [value]) => decode_agent(value.as_bytes())
            .map(Some)
            .map_err(|why| Refusal::BadRequest(format!("the X-Mnemo-Agent-Encoded header: {why}"))),
        _ => Err(Refusal::BadRequest(
            "name the agent once: one X-Mnemo-Agent or one X-Mnemo-Agent-Encoded header".into(),
        )),
    }
}

const UNKNOWN_TOKEN: &str = "the bearer token is not one this server or its store issued";

/// The reason a revoked agent token is refused with. Only the holder of the whole token learns
/// it (a revoked record answers only to the token whose hash it keeps), so a data server tells
/// it as it is rather than as "no store" ([`Revoked`]).
pub(crate) const REVOKED_TOKEN: &str =
    "the bearer token was revoked; ask the operator for a new one (`mnemo token create`)";

/// Marks a refusal's response as that of a revoked token (a response extension, never sent):
/// a data server passes it on as 401, where it answers any other 401 of a store as "no store".
#[derive(Clone, Copy, Debug)]
pub(crate) struct Revoked;

/// Whether an agent token may use the route at `path`: only the memory tool, `POST /v1/memory`
/// and MCP at `/mcp`. Every other route (the reads of the whole store, admin) is the operator's.
pub fn agent_may_use(path: &str) -> bool {
    // The memory tool, MCP, and what a client of the memory tool needs beside them: its files
    // (access-checked for its agent), a line too large to send (recorded as its agent's call),
    // the connection that keeps the server from idling out under it, and whom its token proves.
    matches!(
        path,
        "/v1/memory"
            | "/v1/memory/oversized"
            | "/v1/records"
            | "/v1/attach"
            | "/v1/whoami"
            | "/mcp"
    ) || path.starts_with("/mcp/")
}

/// The header the Anthropic SDKs send their key in, which a server takes as it takes a bearer
/// token (when no `Authorization` header is sent).
pub const API_KEY_HEADER: &str = "x-api-key";

/// The token of an `Authorization: Bearer TOKEN` header, or else of an `x-api-key: TOKEN` one.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<&str, Refusal> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        let mut keys = headers.get_all(API_KEY_HEADER).iter();
        return match (keys.next(), keys.next()) {
            (Some(key), None) => key
                .to_str()
                .map(str::trim)
                .map_err(|_| Refusal::Unauthorized("the x-api-key header is not visible ASCII")),
            (None, _) => Err(Refusal::Unauthorized(
                "no Authorization header (nor x-api-key)",
            )),
            (Some(_), Some(_)) => Err(Refusal::Unauthorized("send one x-api-key header")),
        };
    };
    let value = value
        .to_str()
        .map_err(|_| Refusal::Unauthorized("the Authorization header is not visible ASCII"))?;
    let (scheme, token) = value.split_once(' ').ok_or(Refusal::Unauthorized(
        "the Authorization header is not `Bearer TOKEN`",
    ))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::Unauthorized(
            "the Authorization scheme is not Bearer",
        ));
    }
    Ok(token.trim())
}

/// Why a request was turned away, before any route ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or one that proves no principal (401).
    Unauthorized(&'static str),
    /// The `Host` header names another server (421).
    ForeignHost(String),
    /// The principal may not do this, or the `Origin` is another site's (403).
    Forbidden(String),
    /// The request is malformed (400).
    BadRequest(String),
    /// The request names an MCP session its token did not open (404, as for no session).
    NoSession(String),
    /// The store could not check the token (503); the request may be retried.
    Unavailable(String),
    /// The body is larger than the server takes (413): its size (or a lower bound of it) and the
    /// limit.
    TooLarge {
        /// The body's size in bytes, or the first size known to be over the limit.
        bytes: u64,
        /// The server's request limit (`--max-request-bytes`).
        limit: u64,
    },
}

impl Refusal {
    /// Whether this is the refusal of a revoked agent token.
    pub(crate) fn is_revoked(&self) -> bool {
        matches!(self, Refusal::Unauthorized(why) if *why == REVOKED_TOKEN)
    }

    /// The HTTP status of the refusal and the reason told to the client.
    pub(crate) fn status_and_reason(&self) -> (StatusCode, String) {
        match self {
            Refusal::Unauthorized(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "{why}; send `Authorization: Bearer TOKEN` with the operator token from the server file {file} (in the store directory of a `mnemo serve --db`, in DIR of a `mnemo serve --data DIR`), or an agent token from `mnemo token create`",
                    file = super::SERVER_FILE
                ),
            ),
            Refusal::ForeignHost(why) => (StatusCode::MISDIRECTED_REQUEST, why.clone()),
            Refusal::Forbidden(why) => (StatusCode::FORBIDDEN, why.clone()),
            Refusal::BadRequest(why) => (StatusCode::BAD_REQUEST, why.clone()),
            Refusal::NoSession(why) => (StatusCode::NOT_FOUND, why.clone()),
            Refusal::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, why.clone()),
            Refusal::TooLarge { bytes, limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the body is {bytes} bytes; this server takes at most {limit} bytes in one request (start it with a larger --max-request-bytes to raise that)"
                ),
            ),
        }
    }
}

/// The `Host` and `Origin` values a request may carry.
#[derive(Clone, Debug)]
pub struct Hosts {
    /// Accepted `Host` values (`host:port`, lower case).
    hosts: Vec<String>,
}

impl Hosts {
    /// The hosts a server listening on `addr` answers to: the address itself, and for a loopback
    /// address `localhost`, `127.0.0.1` and `[::1]`, each with the port; plus `extra` names (each
    /// `host` or `host:port`; a bare host gets the port).
    pub fn new(addr: SocketAddr, extra: &[String]) -> Hosts {
        let port = addr.port();
        let mut hosts = vec![authority(addr)];
        if addr.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                hosts.push(format!("{name}:{port}"));
            }
        }
        for name in extra {
            let name = name.to_ascii_lowercase();
            if has_port(&name) {
                hosts.push(name);
            } else {
                hosts.push(format!("{name}:{port}"));
            }
        }
        hosts.sort();
        hosts.dedup();
        Hosts { hosts }
    }

    /// Checks `Host` (required, one of ours) and `Origin` (when present, `http://` one of ours),
    /// and that no request carries two `Host`, `Origin` or `Authorization` headers.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        // One of each: with two, a proxy and this server could each read another.
        for name in [HOST, ORIGIN, AUTHORIZATION] {
            if headers.get_all(&name).iter().nth(1).is_some() {
                return Err(Refusal::BadRequest(format!(
                    "more than one {name} header; send one"
                )));
            }
        }
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| Refusal::BadRequest("no Host header".into()))?;
        self.ours("Host", host)?;
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
            let ours = origin
                .strip_prefix("http://")
                .is_some_and(|rest| self.hosts.iter().any(|h| h == rest));
            if !ours {
                return Err(Refusal::Forbidden(format!(
                    "Origin {origin:?} is another site; this server takes requests from its own origin or from clients that send none"
                )));
            }
        }
        Ok(())
    }
}

impl Hosts {
    /// Checks a request target in absolute form (`POST http://host/v1/acl`), whose authority a
    /// server takes over `Host`: it must name this server too.
    pub fn check_target(&self, target: &axum::http::Uri) -> Result<(), Refusal> {
        match target.authority() {
            Some(authority) => self.ours("The request target's host", authority.as_str()),
            None => Ok(()),
        }
    }

    /// Refuses `host` (from `what`) unless it names this server; one without a port names the
    /// scheme's default port.
    fn ours(&self, what: &str, host: &str) -> Result<(), Refusal> {
        let host = host.to_ascii_lowercase();
        let host = if has_port(&host) {
            host
        } else {
            format!("{host}:80")
        };
        if self.hosts.contains(&host) {
            return Ok(());
        }
        Err(Refusal::ForeignHost(format!(
            "{what} {host:?} is not this server (it answers to {})",
            self.hosts.join(", ")
        )))
    }
}

/// Whether `host` (such as `localhost:80`, `[::1]:80`, `[::1]`) ends in a port.
fn has_port(host: &str) -> bool {
    !host.ends_with(']')
        && host
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
}

/// `ip:port`, with brackets around an IPv6 address, as a `Host` header and a URL name it.
pub(crate) fn authority(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(v4) => v4.to_string(),
        SocketAddr::V6(v6) => format!("[{}]:{}", v6.ip(), v6.port()),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("header value"));
        }
        map
    }

    #[test]
    fn tokens_are_256_random_bits_and_only_the_operators_proves_the_operator() {
        let token = Token::generate().expect("token");
        assert_eq!(token.as_str().len(), 64);
        assert_ne!(token.as_str(), Token::generate().expect("token").as_str());
        let authority = Authority::new(&token);
        assert_eq!(authority.principal(token.as_str()), Ok(Principal::Operator));
        assert!(authority.principal(&token.as_str()[1..]).is_err());
        assert!(authority.principal("").is_err());
        assert!(!format!("{token:?}").contains(token.as_str()));
    }

    #[test]
    fn the_caller_comes_from_the_token_and_the_agent_header() {
        let token = Token::generate().expect("token");
        let authority = Authority::new(&token);
        let bearer = format!("Bearer {}", token.as_str());
        let caller = authority
            .caller(&headers(&[("authorization", &bearer)]), "default")
            .expect("operator");
        assert_eq!(caller.agent, "default");
        let caller = authority
            .caller(
                &headers(&[("authorization", &bearer), (AGENT_HEADER, "planner")]),
                "default",
            )
            .expect("operator");
        assert_eq!(
            (caller.principal, caller.agent.as_str()),
            (Principal::Operator, "planner")
        );
        for refused in [
            headers(&[]),
            headers(&[("authorization", "Bearer nope")]),
            headers(&[("authorization", &format!("Basic {}", token.as_str()))]),
            headers(&[("authorization", token.as_str())]),
        ] {
            assert!(matches!(
                authority.caller(&refused, "default"),
                Err(Refusal::Unauthorized(_))
            ));
        }
        assert!(!Principal::Agent("a".into()).is_operator());
    }

    #[test]
    fn host_and_origin_must_name_this_server() {
        let hosts = Hosts::new("127.0.0.1:4100".parse().expect("addr"), &[]);
        for ok in [
            "127.0.0.1:4100",
            "localhost:4100",
            "LOCALHOST:4100",
            "[::1]:4100",
        ] {
            assert_eq!(hosts.check(&headers(&[("host", ok)])), Ok(()), "{ok}");
        }
        for foreign in [
            "evil.example:4100",
            "127.0.0.1:4101",
            "localhost",
            "127.0.0.1",
            "",
        ] {
            assert!(matches!(
                hosts.check(&headers(&[("host", foreign)])),
                Err(Refusal::ForeignHost(_))
            ));
        }
        let own = headers(&[
            ("host", "localhost:4100"),
            ("origin", "http://localhost:4100"),
        ]);
        assert_eq!(hosts.check(&own), Ok(()));
        for origin in ["http://evil.example", "https://localhost:4100", "null"] {
            let h = headers(&[("host", "localhost:4100"), ("origin", origin)]);
            assert!(
                matches!(hosts.check(&h), Err(Refusal::Forbidden(_))),
                "{origin}"
            );
        }
        let named = Hosts::new("0.0.0.0:80".parse().expect("addr"), &["Mem.Example".into()]);
        assert_eq!(named.check(&headers(&[("host", "mem.example:80")])), Ok(()));
        for twice in [
            [("host", "mem.example:80"), ("host", "evil.example:80")],
            [("host", "mem.example:80"), ("host", "mem.example:80")],
        ] {
            assert!(
                matches!(named.check(&headers(&twice)), Err(Refusal::BadRequest(_))),
                "{twice:?}"
            );
        }
        let two_origins = headers(&[
            ("host", "mem.example:80"),
            ("origin", "http://mem.example:80"),
            ("origin", "http://evil.example"),
        ]);
        assert!(matches!(
            named.check(&two_origins),
            Err(Refusal::BadRequest(_))
        ));
        assert!(named.check(&headers(&[("host", "localhost:80")])).is_err());
    }
}
