//! The viewer at `/ui/` (no browser: `tests/viewer.sh` drives one): its pages' security headers,
//! the one-time login link, the token form, the session cookie and its CSRF token, and the
//! refusals an adversary meets — a used or foreign link, a wrong token, a request from another
//! site, a cookie from another server, an agent's session on the operator's routes (reads, and
//! the access and redaction changes the viewer's operator pages make), and verify's progress
//! stream.

use std::path::Path;

use serde_json::{Value, json};

use super::{Reply, Server, request};
use crate::support::{TempStore, copy_dir, run_mnemo, tamper_record};

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn origin(server: &Server) -> String {
    format!("http://{}", server.addr())
}

/// `POST /ui/api/link` with the operator token: a link's secret.
fn mint(server: &Server) -> String {
    let reply = server.call("POST", "/ui/api/link", b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    answer["secret"].as_str().expect("a secret").to_string()
}

/// `POST /ui/api/login` of `body` from the server's own page.
fn login(server: &Server, body: &Value) -> Reply {
    let origin = origin(server);
    request(
        server.addr(),
        "POST",
        "/ui/api/login",
        &[("Origin", &origin), ("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// The `name=value` of a login's `Set-Cookie`, checked for its attributes.
fn cookie_of(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.text());
    let set = reply.header("set-cookie").expect("a Set-Cookie header");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    set.split(';').next().expect("name=value").to_string()
}

/// The cookie and the CSRF token a login's answer gives (the CSRF token comes in its body only).
fn logged_in(reply: &Reply) -> (String, String) {
    let cookie = cookie_of(reply);
    let answer: Value = serde_json::from_slice(&reply.body).expect("json");
    (cookie, answer["csrf"].as_str().expect("csrf").to_string())
}

/// A viewer request: the cookie, and the extra headers.
fn as_session(
    server: &Server,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    request(server.addr(), method, target, headers, body)
}

/// A viewer's read: `GET target` with the session's cookie and CSRF token.
fn read_as(server: &Server, cookie: &str, csrf: &str, target: &str) -> Reply {
    as_session(
        server,
        "GET",
        target,
        &[("Cookie", cookie), ("X-Mnemo-CSRF", csrf)],
        b"",
    )
}

/// A new agent token for `agent`, issued through `route` (`/v1/tokens`, or a store's).
fn agent_token(server: &Server, route: &str, agent: &str) -> String {
    let body = json!({"agent": agent, "label": "viewer"}).to_string();
    let created = server.call("POST", route, body.as_bytes());
    assert_eq!(created.status, 200, "{}", created.text());
    serde_json::from_slice::<Value>(&created.body).expect("json")["token"]
        .as_str()
        .expect("token")
        .to_string()
}

/// Who the session of `cookie` is: `/ui/api/session`'s answer.
fn session_of(server: &Server, cookie: &str) -> Value {
    let session = as_session(server, "GET", "/ui/api/session", &[("Cookie", cookie)], b"");
    assert_eq!(session.status, 200, "{}", session.text());
    serde_json::from_slice(&session.body).expect("json")
}

fn head(server: &Server) -> u64 {
    server.json("/v1/head")["seq"].as_u64().expect("a seq")
}

fn write_some(server: &Server) {
    for input in [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"}),
        json!({"command": "create", "path": "/memories/b.md", "file_text": "beta\n"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "ALPHA"}),
    ] {
        assert_eq!(server.memory(&input).status, 200);
    }
}

#[test]
fn every_viewer_page_carries_a_strict_policy_and_no_inline_code() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    for (target, kind) in [
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/api/session", "application/json"),
    ] {
        let reply = request(server.addr(), "GET", target, &[], b"");
        assert_eq!(
            reply.header("content-security-policy"),
            Some(CSP),
            "{target}"
        );
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
        assert!(
            reply
                .header("content-type")
                .is_some_and(|t| t.starts_with(kind)),
            "{target}: {:?}",
            reply.header("content-type")
        );
    }
    let page = request(server.addr(), "GET", "/ui/", &[], b"").text();
    assert!(page.contains(r#"<script type="module" src="/ui/app.js"></script>"#));
    assert_eq!(page.matches("<script").count(), 1, "no inline script");
    assert!(!page.contains("style="), "no inline style");
    // Every module in the viewer's folder is served, as JavaScript under the same policy, and
    // none writes HTML or runs strings as code.
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve/viewer");
    let mut modules: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".js"))
        .collect();
    modules.sort();
    assert!(modules.len() > 1, "{modules:?}");
    assert!(modules.iter().any(|m| m == "app.js"), "{modules:?}");
    for module in &modules {
        let target = format!("/ui/{module}");
        let reply = request(server.addr(), "GET", &target, &[], b"");
        assert_eq!(reply.status, 200, "{target}");
        assert!(
            reply
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/javascript")),
            "{target}: {:?}",
            reply.header("content-type")
        );
        assert_eq!(reply.header("content-security-policy"), Some(CSP));
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        let script = reply.text();
        let on_disk = std::fs::read_to_string(folder.join(module)).unwrap_or_default();
        assert_eq!(script, on_disk, "{target} is the file");
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!script.contains(sink), "{module} uses {sink}");
        }
    }
    // Only those: another name under /ui/ is no file of the viewer's, even to no one logged in.
    for unknown in ["/ui/nope.js", "/ui/app.mjs", "/ui/pages/app.js"] {
        let reply = request(server.addr(), "GET", unknown, &[], b"");
        assert_eq!(reply.status, 404, "{unknown}: {}", reply.text());
        assert_eq!(reply.header("content-security-policy"), Some(CSP));
    }
    // Without a session the page says so, and the API wants a token.
    let anonymous = request(server.addr(), "GET", "/ui/api/session", &[], b"");
    assert_eq!(anonymous.status, 401);
    let foreign = request(
        server.addr(),
        "GET",
        "/ui/",
        &[("Host", "evil.example:80")],
        b"",
    );
    assert_eq!(foreign.status, 421, "{}", foreign.text());
    assert_eq!(foreign.header("content-security-policy"), Some(CSP));
}

#[test]
fn a_login_link_logs_in_once_and_only_from_this_servers_page() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    write_some(&server);
    // Only the operator mints links.
    let anonymous = request(server.addr(), "POST", "/ui/api/link", &[], b"");
    assert_eq!(anonymous.status, 401);
    let wrong = request(
        server.addr(),
        "POST",
        "/ui/api/link",
        &[("Authorization", "Bearer 00")],
        b"",
    );
    assert_eq!(wrong.status, 401);

    let secret = mint(&server);
    assert_eq!(secret.len(), 64, "256 bits in hex");
    // From another site, or from no page at all: refused, and the link is not spent.
    for headers in [
        vec![("Origin", "http://evil.example")],
        vec![("Origin", "null")],
        vec![],
    ] {
        let reply = request(
            server.addr(),
            "POST",
            "/ui/api/login",
            &headers,
            json!({ "link": secret }).to_string().as_bytes(),
        );
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.text());
    }
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": secret })));
    assert!(cookie.starts_with(&format!("mnemo_ui_{}=", server.addr().port())));
    // Used once: dead.
    let again = login(&server, &json!({ "link": secret }));
    assert_eq!(again.status, 401, "{}", again.text());
    assert!(again.header("set-cookie").is_none());
    // A secret this server never minted.
    let forged = login(&server, &json!({ "link": "ab".repeat(32) }));
    assert_eq!(forged.status, 401);

    // The session reads as the operator, with its CSRF token.
    let log = read_as(&server, &cookie, &token, "/v1/log?limit=2");
    assert_eq!(log.status, 200, "{}", log.text());
    assert_eq!(log.text().lines().count(), 2);
    let (_, stderr) = server.stop();
    assert!(!stderr.contains(&secret), "the secret is never logged");
    assert!(!stderr.contains(&token), "the CSRF token is never logged");
}

#[test]
fn a_session_needs_its_csrf_token_and_refuses_changes_from_another_site() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    write_some(&server);
    let wrong = login(&server, &json!({"token": "not-a-token"}));
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let (cookie, token) = logged_in(&login(&server, &json!({"token": server.file.token})));
    let own = origin(&server);
    let before = head(&server);

    // A read without the CSRF token (another site's <img> or top-level GET): refused.
    for headers in [
        vec![("Cookie", cookie.as_str())],
        vec![("Cookie", cookie.as_str()), ("X-Mnemo-CSRF", "0000")],
    ] {
        let reply = as_session(&server, "GET", "/v1/log", &headers, b"");
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.text());
    }
    // A change from another site, or from no page, or without the CSRF token: refused, unwritten.
    let grant =
        json!({"action": "grant", "agent": "mallory", "prefix": "/memories", "access": "read-write"})
            .to_string();
    for headers in [
        vec![
            ("Cookie", cookie.as_str()),
            ("X-Mnemo-CSRF", token.as_str()),
            ("Origin", "http://evil.example"),
        ],
        vec![
            ("Cookie", cookie.as_str()),
            ("X-Mnemo-CSRF", token.as_str()),
        ],
        vec![("Cookie", cookie.as_str()), ("Origin", own.as_str())],
        vec![
            ("Cookie", cookie.as_str()),
            ("Origin", own.as_str()),
            ("Content-Type", "text/plain"),
        ],
    ] {
        let reply = as_session(&server, "POST", "/v1/acl", &headers, grant.as_bytes());
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.text());
    }
    assert_eq!(head(&server), before, "no refused change was written");
    // From its own page, with its token: the session acts as the operator.
    let reply = as_session(
        &server,
        "POST",
        "/v1/acl",
        &[
            ("Cookie", &cookie),
            ("X-Mnemo-CSRF", &token),
            ("Origin", &own),
        ],
        grant.as_bytes(),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(head(&server), before + 1);

    // Two cookies of this server's name: refused rather than guessed between.
    let doubled = format!("{cookie}; {cookie}");
    let reply = read_as(&server, &doubled, &token, "/v1/head");
    assert_eq!(reply.status, 400, "{}", reply.text());

    // Logging out needs the token too; after it the cookie is dead.
    let refused = as_session(
        &server,
        "POST",
        "/ui/api/logout",
        &[("Cookie", &cookie), ("Origin", &own)],
        b"",
    );
    assert_eq!(refused.status, 403);
    let out = as_session(
        &server,
        "POST",
        "/ui/api/logout",
        &[
            ("Cookie", &cookie),
            ("X-Mnemo-CSRF", &token),
            ("Origin", &own),
        ],
        b"",
    );
    assert_eq!(out.status, 200, "{}", out.text());
    let dead = read_as(&server, &cookie, &token, "/v1/head");
    assert_eq!(dead.status, 401, "{}", dead.text());
}

#[test]
fn a_cookie_from_another_server_is_refused() {
    let (one, two) = (TempStore::new(), TempStore::new());
    let first = Server::start(&one.path(), &[]);
    let second = Server::start(&two.path(), &[]);
    let (cookie, token) = logged_in(&login(&first, &json!({ "link": mint(&first) })));
    let id = cookie.split_once('=').expect("name=value").1;
    // The browser sends every cookie of the host (cookies ignore ports): the other server finds
    // its own name absent, or, planted under its name, a session it never opened.
    for sent in [
        cookie.clone(),
        format!("mnemo_ui_{}={id}", second.addr().port()),
    ] {
        let reply = read_as(&second, &sent, &token, "/v1/head");
        assert_eq!(reply.status, 401, "{sent}: {}", reply.text());
        let session = as_session(&second, "GET", "/ui/api/session", &[("Cookie", &sent)], b"");
        assert_eq!(session.status, 401);
    }
    // And a link of one server does not log in to the other.
    let secret = mint(&first);
    assert_eq!(login(&second, &json!({ "link": secret })).status, 401);
    cookie_of(&login(&first, &json!({ "link": secret })));
}

#[test]
fn an_agents_session_reaches_only_what_its_token_does() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let agent_token = agent_token(&server, "/v1/tokens", "planner");
    let (cookie, token) = logged_in(&login(&server, &json!({ "token": agent_token })));
    let who = session_of(&server, &cookie);
    assert_eq!(
        (who["principal"].as_str(), who["agent"].as_str()),
        (Some("agent"), Some("planner"))
    );
    for target in ["/v1/log", "/v1/verify", "/v1/acl", "/v1/tokens"] {
        let reply = read_as(&server, &cookie, &token, target);
        assert_eq!(reply.status, 403, "{target}: {}", reply.text());
    }
    // Minting links is the operator's, by bearer token only.
    let mint = as_session(
        &server,
        "POST",
        "/ui/api/link",
        &[
            ("Cookie", &cookie),
            ("X-Mnemo-CSRF", &token),
            ("Origin", &origin(&server)),
        ],
        b"",
    );
    assert_eq!(mint.status, 401);
}

#[test]
fn a_data_servers_viewer_lists_its_stores() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("stores");
    let server = Server::start_data(&data, &[]);
    let made = server.call("POST", "/v1/stores", br#"{"name": "alpha"}"#);
    assert_eq!(made.status, 201, "{}", made.text());
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let who = session_of(&server, &cookie);
    assert_eq!(who["data"], true);
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Mnemo-CSRF", token.as_str()),
    ];
    let stores = as_session(&server, "GET", "/v1/stores", &headers, b"");
    assert_eq!(stores.status, 200, "{}", stores.text());
    assert!(stores.text().contains("\"alpha\""));
    let log = as_session(&server, "GET", "/v1/stores/alpha/head", &headers, b"");
    assert_eq!(log.status, 200, "{}", log.text());
    let page = request(server.addr(), "GET", "/ui/", &[], b"");
    assert_eq!(page.header("content-security-policy"), Some(CSP));
}

/// On a data server an agent logs in with its token and the store that issued it: its session
/// reads that store's files as its grants allow, and nothing of another store or the operator.
#[test]
fn an_agent_logs_in_to_its_store_of_a_data_server_and_reads_only_its_files() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("stores");
    let server = Server::start_data(&data, &[]);
    for name in ["alpha", "beta"] {
        let made = server.call(
            "POST",
            "/v1/stores",
            json!({ "name": name }).to_string().as_bytes(),
        );
        assert_eq!(made.status, 201, "{}", made.text());
    }
    let write = |store: &str, input: Value| {
        let reply = server.call(
            "POST",
            &format!("/v1/stores/{store}/memory"),
            input.to_string().as_bytes(),
        );
        assert_eq!(reply.status, 200, "{}", reply.text());
    };
    write(
        "alpha",
        json!({"command": "create", "path": "/memories/shared/plan.md", "file_text": "plan\n"}),
    );
    write(
        "alpha",
        json!({"command": "create", "path": "/memories/private/key.md", "file_text": "secret\n"}),
    );
    write(
        "beta",
        json!({"command": "create", "path": "/memories/shared/other.md", "file_text": "beta's\n"}),
    );
    // The first grant makes the implicit one (every agent, everything) explicit: revoked here.
    for change in [
        json!({"action": "grant", "agent": "planner", "prefix": "/memories/shared", "access": "read"}),
        json!({"action": "revoke", "agent": "*", "prefix": "/"}),
    ] {
        let changed = server.call(
            "POST",
            "/v1/stores/alpha/acl",
            change.to_string().as_bytes(),
        );
        assert_eq!(changed.status, 200, "{}", changed.text());
    }
    let agent_token = agent_token(&server, "/v1/stores/alpha/tokens", "planner");

    // Without the store, or with another store, the token proves nothing here.
    for body in [
        json!({ "token": agent_token }),
        json!({ "token": agent_token, "store": "beta" }),
        json!({ "token": agent_token, "store": "nosuch" }),
        json!({ "token": agent_token, "store": "../alpha" }),
        json!({ "token": "mnemo_wrong", "store": "alpha" }),
    ] {
        assert_eq!(login(&server, &body).status, 401, "{body}");
    }
    let (cookie, csrf) = logged_in(&login(
        &server,
        &json!({ "token": agent_token, "store": "alpha" }),
    ));
    let who = session_of(&server, &cookie);
    assert_eq!(
        (
            who["principal"].as_str(),
            who["agent"].as_str(),
            who["store"].as_str()
        ),
        (Some("agent"), Some("planner"), Some("alpha"))
    );
    let files = read_as(
        &server,
        &cookie,
        &csrf,
        "/v1/stores/alpha/records?tag=memorytool",
    );
    assert_eq!(files.status, 200, "{}", files.text());
    let files: Value = serde_json::from_slice(&files.body).expect("json");
    let paths: Vec<&str> = files["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        paths,
        ["/memories/shared/plan.md"],
        "only what the grant lets it read"
    );
    for target in [
        "/v1/stores/beta/records?tag=memorytool",
        "/v1/stores/alpha/log",
        "/v1/stores/alpha/tokens",
        "/v1/stores",
    ] {
        let reply = read_as(&server, &cookie, &csrf, target);
        assert!(
            [401, 403, 404].contains(&reply.status),
            "{target}: {} {}",
            reply.status,
            reply.text()
        );
        assert!(
            !reply.text().contains("secret") && !reply.text().contains("beta's"),
            "{target}"
        );
    }
}

/// Serves a copy of a store whose event 2 was changed below the API; a viewer session's verify
/// names seq 2. With `MNEMO_VIEWER_TAMPERED` set, the tampered copy is left at that path (the
/// browser test serves it).
#[test]
fn a_viewer_session_sees_verify_name_the_first_tampered_event() {
    let store = TempStore::new();
    {
        let server = Server::start(&store.path(), &[]);
        write_some(&server);
        server.stop();
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let copy = match std::env::var_os("MNEMO_VIEWER_TAMPERED") {
        Some(path) => Path::new(&path).to_path_buf(),
        None => dir.path().join("tampered.mnemo.db"),
    };
    copy_dir(&store.path(), &copy);
    // A byte of event 2's payload hash: its record no longer matches its payload.
    tamper_record(&copy, 2, |record| record[80] ^= 0x01);
    let server = Server::start(&copy, &[]);
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let reply = read_as(&server, &cookie, &token, "/v1/verify");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let report: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(report["violations"][0]["seq"], 2, "{report}");
    server.stop();
}

#[test]
fn mnemo_ui_prints_a_link_of_the_running_server_and_says_when_there_is_none() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let db = store.path();
    let db = db.to_str().expect("a UTF-8 path");
    let out = run_mnemo(&["ui", "--db", db], "");
    assert!(out.status.success(), "{out:?}");
    let link = String::from_utf8(out.stdout).expect("UTF-8");
    let prefix = format!("http://{}/ui/#login=", server.addr());
    let secret = link
        .trim()
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{link:?} is not {prefix}SECRET"));
    cookie_of(&login(&server, &json!({ "link": secret })));

    let dir = tempfile::tempdir().expect("temporary directory");
    let none = dir.path().join("none.mnemo.db");
    let missing = run_mnemo(&["ui", "--db", none.to_str().expect("UTF-8")], "");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no store at"));
    assert!(!none.exists(), "mnemo ui makes no store");
    let unserved = run_mnemo(&["ui", "--data", dir.path().to_str().expect("UTF-8")], "");
    assert_eq!(unserved.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unserved.stderr).contains("mnemo serve --data"));
}

/// Another local user reaches the server's loopback port like anyone, but not its login: `mnemo
/// ui` run as `nobody` cannot read the store's server file (the operator token), so it prints no
/// link and starts no second server.
#[test]
fn another_local_user_gets_no_login_link() {
    const TEST: &str = "mnemo ui as another local user";
    if !(crate::support::is_root() && crate::support::have("setpriv")) {
        return crate::support::skip(TEST, "needs root and setpriv to run a child as nobody");
    }
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                crate::support::mnemo_bin(),
            ])
            .args(args)
            .output()
            .expect("run setpriv")
    };
    if !as_nobody(&["--version"]).status.success() {
        return crate::support::skip(
            TEST,
            "the built binary is not reachable by nobody (a private checkout)",
        );
    }
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    // Every directory above the store open to other users: only the store's own modes stop them.
    let mut dir = store.path();
    while let Some(parent) = dir.parent().map(Path::to_path_buf) {
        if parent == Path::new("/") || parent == std::env::temp_dir() {
            break;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        dir = parent;
    }
    let db = store.path();
    let out = as_nobody(&["ui", "--db", db.to_str().expect("UTF-8")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        !stdout.contains("login="),
        "a link for another user: {stdout}"
    );
    // Refused for what it could not read, not for anything else.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ermission denied"), "{stderr}");
    // The server that holds the store is still the one, and still answers its own operator.
    assert_eq!(server.call("POST", "/ui/api/link", b"").status, 200);
}

/// The lines of an NDJSON body.
fn ndjson(reply: &Reply) -> Vec<Value> {
    reply
        .text()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

/// A verify report without its timings, which differ between two runs.
fn untimed(mut report: Value) -> Value {
    let fields = report.as_object_mut().expect("a report is an object");
    for timing in ["elapsed_ms", "events_per_sec", "mb_per_sec"] {
        assert!(fields.remove(timing).is_some(), "a report has {timing}");
    }
    report
}

#[test]
fn verify_with_progress_streams_counts_then_the_plain_report() {
    let store = TempStore::new();
    let every = mnemo::testing::PROGRESS_EVERY;
    let events = every + 3;
    {
        // Cheap events, written in this process before the server holds the store.
        let tool = store.server();
        tool.handle(&json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}));
        for _ in 1..events {
            tool.handle(&json!({"command": "view", "path": "/memories/a.md"}));
        }
    }
    let server = Server::start(&store.path(), &[]);
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let reply = read_as(&server, &cookie, &token, "/v1/verify?progress=1");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/x-ndjson"));
    let mut lines = ndjson(&reply);
    let report = lines.pop().expect("a last line");
    assert_eq!(
        lines,
        [
            json!({"progress": {"done": 0, "of": events}}),
            json!({"progress": {"done": every, "of": events}}),
        ]
    );
    assert_eq!(report["events"], events, "{report}");
    assert_eq!(report["violations"], json!([]), "{report}");
    // The report is the plain route's, which is unchanged (the CLI and clients read it).
    let plain = read_as(&server, &cookie, &token, "/v1/verify");
    assert_eq!(plain.status, 200, "{}", plain.text());
    assert_eq!(plain.header("content-type"), Some("application/json"));
    let plain: Value = serde_json::from_slice(&plain.body).expect("json");
    assert_eq!(untimed(report), untimed(plain));
    // With a checkpoint to prove, as the plain route takes it; a bad one is refused before any line.
    let checkpoint = server.json("/v1/head")["checkpoint"]
        .as_str()
        .expect("checkpoint")
        .to_string();
    let proved = read_as(
        &server,
        &cookie,
        &token,
        &format!("/v1/verify?progress=1&expect={checkpoint}"),
    );
    let last = ndjson(&proved).pop().expect("a report");
    assert_eq!(last["violations"], json!([]), "{last}");
    assert_eq!(last["checkpoint"], checkpoint.as_str(), "{last}");
    for target in [
        "/v1/verify?progress=1&expect=nonsense",
        "/v1/verify?progress=yes",
    ] {
        let refused = read_as(&server, &cookie, &token, target);
        assert_eq!(refused.status, 400, "{target}: {}", refused.text());
    }
}

#[test]
fn an_agents_session_changes_no_access_and_redacts_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    write_some(&server);
    let body = json!({"agent": "planner", "label": "viewer"}).to_string();
    let created = server.call("POST", "/v1/tokens", body.as_bytes());
    assert_eq!(created.status, 200, "{}", created.text());
    let issued: Value = serde_json::from_slice(&created.body).expect("json");
    let (agent_token, id) = (
        issued["token"].as_str().expect("token").to_string(),
        issued["id"].as_str().expect("id").to_string(),
    );
    let (cookie, token) = logged_in(&login(&server, &json!({ "token": agent_token })));
    let own = origin(&server);
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Mnemo-CSRF", token.as_str()),
        ("Origin", own.as_str()),
        ("Content-Type", "application/json"),
    ];
    let before = head(&server);
    let revoke = format!("/v1/tokens/{id}");
    for (method, target, body) in [
        ("GET", "/v1/verify?progress=1", String::new()),
        (
            "POST",
            "/v1/tokens",
            json!({"agent": "planner", "label": "more"}).to_string(),
        ),
        ("DELETE", revoke.as_str(), String::new()),
        (
            "POST",
            "/v1/acl",
            json!({"action": "grant", "agent": "planner", "prefix": "/memories", "access": "read-write"}).to_string(),
        ),
        (
            "POST",
            "/v1/redact",
            json!({"reason": "mine", "seqs": [1], "dry_run": true}).to_string(),
        ),
        (
            "POST",
            "/v1/redact",
            json!({"reason": "mine", "seqs": [1]}).to_string(),
        ),
    ] {
        let reply = as_session(&server, method, target, &headers, body.as_bytes());
        assert_eq!(reply.status, 403, "{method} {target}: {}", reply.text());
    }
    assert_eq!(head(&server), before, "no refused change was written");
    assert!(server.json("/v1/show?seq=1")["redaction"].is_null());
    // Its token was not revoked: it still reaches the memory tool.
    let call = request(
        server.addr(),
        "POST",
        "/v1/memory",
        &[
            ("Authorization", &format!("Bearer {agent_token}")),
            ("Content-Type", "application/json"),
        ],
        json!({"command": "view", "path": "/memories"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(call.status, 200, "{}", call.text());
}

#[test]
fn a_redaction_from_another_site_or_without_the_csrf_token_erases_nothing() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    write_some(&server);
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let own = origin(&server);
    let before = head(&server);
    let body = json!({"reason": "forged", "texts": ["alpha"]}).to_string();
    for headers in [
        vec![
            ("Cookie", cookie.as_str()),
            ("Origin", own.as_str()),
            ("Content-Type", "application/json"),
        ],
        vec![
            ("Cookie", cookie.as_str()),
            ("X-Mnemo-CSRF", "00"),
            ("Origin", own.as_str()),
            ("Content-Type", "application/json"),
        ],
        vec![
            ("Cookie", cookie.as_str()),
            ("X-Mnemo-CSRF", token.as_str()),
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/json"),
        ],
        vec![
            ("Cookie", cookie.as_str()),
            ("X-Mnemo-CSRF", token.as_str()),
            ("Content-Type", "application/json"),
        ],
    ] {
        let reply = as_session(&server, "POST", "/v1/redact", &headers, body.as_bytes());
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.text());
    }
    assert_eq!(head(&server), before, "nothing recorded");
    let first = server.json("/v1/show?seq=1");
    assert!(first["redaction"].is_null(), "{first}");
    assert_eq!(first["input"]["file_text"], "alpha\n", "{first}");
    // The same request from the viewer's own page, with its token, redacts: the refusals above
    // were for how they came, not for what they asked.
    let reply = as_session(
        &server,
        "POST",
        "/v1/redact",
        &[
            ("Cookie", &cookie),
            ("X-Mnemo-CSRF", &token),
            ("Origin", &own),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(head(&server), before + 1);
    assert_eq!(
        server.json("/v1/show?seq=1")["redaction"]["reason"],
        "forged"
    );
}

/// Browsers send a host's cookies to every port of it, so another local server can be handed the
/// session cookie (a page of it loaded by the operator's browser): the cookie alone must open
/// nothing. The CSRF token comes only in the login's answer, and every `/v1/` read needs it.
#[test]
fn a_session_cookie_alone_reads_nothing_and_does_not_give_its_csrf_token() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    write_some(&server);
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let who = session_of(&server, &cookie);
    assert_eq!(who["principal"], "operator");
    assert!(
        who.get("csrf").is_none(),
        "the session route gives the CSRF token: {who}"
    );
    assert!(!who.to_string().contains(&token));
    for target in ["/v1/log", "/v1/cat?path=/memories/a.md", "/v1/tokens"] {
        let bare = as_session(&server, "GET", target, &[("Cookie", &cookie)], b"");
        assert_eq!(bare.status, 403, "{target}: {}", bare.text());
        assert!(!bare.text().contains("ALPHA"), "{target}");
    }
    let body = json!({"agent": "stolen", "label": "x"}).to_string();
    let origin = origin(&server);
    let forged = as_session(
        &server,
        "POST",
        "/v1/tokens",
        &[
            ("Cookie", &cookie),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    );
    assert_eq!(forged.status, 403, "{}", forged.text());
    assert_eq!(read_as(&server, &cookie, &token, "/v1/log").status, 200);
}

/// Sessions are bounded, and making room costs whoever logs in: an agent that logs in again and
/// again ends its own oldest sessions, never the operator's.
#[test]
fn logging_in_again_and_again_as_an_agent_does_not_log_the_operator_out() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let (cookie, token) = logged_in(&login(&server, &json!({ "link": mint(&server) })));
    let agent = agent_token(&server, "/v1/tokens", "flooder");
    let mut first = None;
    for _ in 0..300 {
        let session = logged_in(&login(&server, &json!({ "token": agent })));
        first.get_or_insert(session);
    }
    assert_eq!(
        read_as(&server, &cookie, &token, "/v1/head").status,
        200,
        "the operator's session outlived 300 agent logins"
    );
    let (old_cookie, _) = first.expect("a first agent session");
    let old = as_session(
        &server,
        "GET",
        "/ui/api/session",
        &[("Cookie", &old_cookie)],
        b"",
    );
    assert_eq!(old.status, 401, "the agent's oldest session made room");
}

/// `mnemo ui --open` hands the browser opener a page in a directory only this user reads, never
/// the link itself: a command line is readable by every local user (`/proc/PID/cmdline`), and
/// the link's secret logs in as the operator.
#[test]
fn mnemo_ui_open_puts_no_secret_on_a_command_line() {
    use std::os::unix::fs::PermissionsExt;
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let bin = tempfile::tempdir().expect("a directory for the fake opener");
    let seen = bin.path().join("seen");
    let opener = bin.path().join("xdg-open");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n", seen.display()),
    )
    .expect("write the fake opener");
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let db = store.path();
    let out = crate::support::run_mnemo_env(
        &["ui", "--db", db.to_str().expect("UTF-8"), "--open"],
        &[("PATH", &path)],
        b"",
    );
    assert!(out.status.success(), "{out:?}");
    let link = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_string();
    assert!(link.contains("#login="), "{link}");
    let started = std::time::Instant::now();
    // The opener's shell creates the file before it writes the line: wait for the whole line.
    let written = || std::fs::read_to_string(&seen).is_ok_and(|text| text.ends_with('\n'));
    while !written() && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let args = std::fs::read_to_string(&seen).expect("the opener ran");
    assert!(
        !args.contains("login="),
        "the secret on a command line: {args}"
    );
    let page = std::path::PathBuf::from(args.trim());
    let html = std::fs::read_to_string(&page).expect("the page the opener was given");
    assert!(html.contains(&link), "the page leads to the link: {html}");
    let dir = page.parent().expect("its directory");
    let mode = std::fs::metadata(dir).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "only its user may read the page's directory");
    // The link still logs in once.
    let secret = link.split("#login=").nth(1).expect("a secret");
    cookie_of(&login(&server, &json!({ "link": secret })));
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// A session opened with an agent token ends when the token is revoked: the page asks who it is
/// and is told to log in again, as every data route already refuses the token.
#[test]
fn a_revoked_tokens_session_is_over() {
    let store = TempStore::new();
    let server = Server::start(&store.path(), &[]);
    let token = agent_token(&server, "/v1/tokens", "planner");
    let (cookie, _) = logged_in(&login(&server, &json!({ "token": token })));
    assert_eq!(session_of(&server, &cookie)["agent"], "planner");
    let id = token
        .strip_prefix("mnemo_")
        .and_then(|rest| rest.get(..16))
        .expect("the token's id");
    let revoked = server.call("DELETE", &format!("/v1/tokens/{id}"), b"");
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let after = as_session(
        &server,
        "GET",
        "/ui/api/session",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(after.status, 401, "{}", after.text());
    assert!(after.text().contains("revoked"), "{}", after.text());
}
