//! The library's public surface, read from `src/lib.rs`: every name its root exports (`pub use`
//! and `pub mod`, with the `cfg` it is built under), and the names of the hidden `cli_support`
//! module the binary and the Python bindings use. The test fails when a name is added or removed
//! without updating [`SURFACE`], so the API cannot grow (or lose a name) silently.
//!
//! The `testing` module is left out: it is what the crate's own tests reach, and it must stay
//! behind `cfg(feature = "testing")`, which this test also checks.

use std::collections::BTreeSet;

/// The public names of the crate root (and of `cli_support`), each with the `cfg` it is built
/// under, if any.
const SURFACE: &[&str] = &[
    "ANY_AGENT",
    "Access",
    "AdminCommand",
    "AdminRequest #[cfg(feature = \"client\")]",
    "Body",
    "ClientBuilder",
    "Durability",
    "Error",
    "Event",
    "EventHash",
    "Grant",
    "Head",
    "Header",
    "LogQuery",
    "MEMORY_TAG",
    "MemPath",
    "MemoryRecord",
    "MnemoClient",
    "MnemoMcpServer #[cfg(feature = \"mcp\")]",
    "MnemoMemoryToolServer",
    "Outcome",
    "PathRejection",
    "Plan",
    "Policy",
    "Profile",
    "Receipt",
    "Redacted",
    "FollowerStatus #[cfg(feature = \"replicate\")]",
    "Following #[cfg(feature = \"replicate\")]",
    "Replica #[cfg(feature = \"replicate\")]",
    "Replication #[cfg(feature = \"replicate\")]",
    "ReplicationStatus #[cfg(feature = \"replicate\")]",
    "ReplicationView #[cfg(feature = \"serve\")]",
    "ShipReport #[cfg(feature = \"replicate\")]",
    "Shipping #[cfg(feature = \"replicate\")]",
    "RejectedCall",
    "RemoteClient #[cfg(feature = \"client\")]",
    "RemoteError #[cfg(feature = \"client\")]",
    "Report",
    "Result",
    "Selection",
    "Seq",
    "Connections #[cfg(feature = \"serve\")]",
    "DataOptions #[cfg(feature = \"serve\")]",
    "OpenStore #[cfg(feature = \"serve\")]",
    "OpenedStore #[cfg(feature = \"serve\")]",
    "ServeError #[cfg(feature = \"serve\")]",
    "ServeOptions #[cfg(feature = \"serve\")]",
    "ServerBuilder",
    "StopReason #[cfg(feature = \"serve\")]",
    "Stopped #[cfg(feature = \"serve\")]",
    "check_store_name",
    "serve_data #[cfg(feature = \"serve\")]",
    "TokenRecord",
    "ToolCall",
    "Violation",
    "ViolationKind",
    "cli_support #[doc(hidden)]",
    "cli_support::MAX_BACKOFF #[cfg(feature = \"replicate\")]",
    "cli_support::REWRITES #[cfg(feature = \"replicate\")]",
    "cli_support::SERVER_FILE",
    "cli_support::decode_checkpoint #[cfg(feature = \"replicate\")]",
    "cli_support::Launch #[cfg(feature = \"client\")]",
    "cli_support::Link #[cfg(feature = \"client\")]",
    "cli_support::KEY_FILE #[cfg(feature = \"replicate\")]",
    "cli_support::OPERATOR",
    "cli_support::Replica #[cfg(feature = \"replicate\")]",
    "cli_support::Shipped #[cfg(feature = \"replicate\")]",
    "cli_support::Restored #[cfg(feature = \"replicate\")]",
    "cli_support::Stale #[cfg(feature = \"replicate\")]",
    "cli_support::TRUST_FILE #[cfg(feature = \"replicate\")]",
    "cli_support::trust_key #[cfg(feature = \"replicate\")]",
    "cli_support::trusted_key #[cfg(feature = \"replicate\")]",
    "cli_support::restore #[cfg(feature = \"replicate\")]",
    "cli_support::ship #[cfg(feature = \"replicate\")]",
    "cli_support::START_WAIT #[cfg(feature = \"client\")]",
    "cli_support::Store",
    "cli_support::absolute_path",
    "cli_support::check_id",
    "cli_support::check_signed #[cfg(feature = \"replicate\")]",
    "cli_support::create_key #[cfg(feature = \"replicate\")]",
    "cli_support::default_key_name #[cfg(feature = \"replicate\")]",
    "cli_support::key_verifier #[cfg(feature = \"replicate\")]",
    "cli_support::export",
    "cli_support::import",
    "cli_support::issue",
    "cli_support::listed",
    "cli_support::find_server #[cfg(feature = \"client\")]",
    "cli_support::live_server #[cfg(feature = \"client\")]",
    "cli_support::printable",
    "cli_support::Plan",
    "cli_support::Redacted",
    "cli_support::Selection",
    "cli_support::plan",
    "cli_support::redact",
    "cli_support::revoke",
    "cli_support::tool_use_id #[cfg(feature = \"client\")]",
    "cli_support::unanswered #[cfg(feature = \"client\")]",
    "data_dir",
    "event",
    "memory_store",
    "protocol",
    "serve #[cfg(feature = \"serve\")]",
    "tool",
];

/// One item of `lib.rs` at the level being read: its attributes and its text up to `;` or the
/// `{` of an inline module.
struct Item {
    attributes: Vec<String>,
    text: String,
}

/// The names an item exports, each prefixed with `prefix`: the last segment (or the `as`
/// rename) of every leaf of a `pub use` tree, or the name of a `pub mod`.
fn exported(item: &Item, prefix: &str) -> Vec<String> {
    let text = item.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cfg: Vec<&str> = item
        .attributes
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("#[cfg(") || a.starts_with("#[doc(hidden)"))
        .collect();
    let tag = |name: &str| {
        let mut entry = format!("{prefix}{name}");
        for attribute in &cfg {
            entry.push(' ');
            entry.push_str(attribute);
        }
        entry
    };
    if let Some(tree) = text.strip_prefix("pub use ") {
        let mut names = Vec::new();
        leaves(tree.trim_end_matches(';'), &mut names);
        names.iter().map(|n| tag(n)).collect()
    } else if let Some(rest) = text.strip_prefix("pub mod ") {
        let name = rest.trim_end_matches([';', '{']).trim();
        vec![tag(name)]
    } else {
        Vec::new()
    }
}

/// The exported names of one `use` tree such as `a::{B, c::{D as E}}`.
fn leaves(tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    match tree.find('{') {
        Some(open) => {
            let inner = &tree[open + 1..tree.rfind('}').expect("a closed use group")];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        leaves(&inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            leaves(&inner[start..], out);
        }
        None if tree.is_empty() => {}
        None => {
            let name = match tree.split_once(" as ") {
                Some((_, rename)) => rename,
                None => tree.rsplit("::").next().expect("a segment"),
            };
            out.push(name.trim().to_string());
        }
    }
}

/// Splits the code of one module level into items; an inline module's body is returned with
/// it, to be read (or skipped) by the caller.
fn items(code: &str) -> Vec<(Item, Option<String>)> {
    let mut found = Vec::new();
    let mut attributes = Vec::new();
    let mut rest = code.trim_start();
    while !rest.is_empty() {
        if rest.starts_with("#![") || rest.starts_with("#[") {
            let end = rest.find(']').expect("a closed attribute") + 1;
            let attribute = &rest[..end];
            if attribute.starts_with("#[") {
                attributes.push(attribute.to_string());
            }
            rest = rest[end..].trim_start();
            continue;
        }
        let semi = rest.find(';').unwrap_or(rest.len());
        let brace = rest.find('{').unwrap_or(rest.len());
        let is_module = brace < semi && rest[..brace].split_whitespace().any(|w| w == "mod");
        if is_module {
            let mut depth = 0;
            let mut close = rest.len();
            for (i, c) in rest[brace..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            close = brace + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let text = rest[..=brace].to_string();
            let body = rest[brace + 1..close].to_string();
            found.push((
                Item {
                    attributes: std::mem::take(&mut attributes),
                    text,
                },
                Some(body),
            ));
            rest = rest.get(close + 1..).unwrap_or("").trim_start();
        } else {
            let end = (semi + 1).min(rest.len());
            found.push((
                Item {
                    attributes: std::mem::take(&mut attributes),
                    text: rest[..end].to_string(),
                },
                None,
            ));
            rest = rest[end..].trim_start();
        }
    }
    found
}

/// `lib.rs` without comments (doc comments included: they name items but export none).
fn lib_code() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    std::fs::read_to_string(&path)
        .expect("read src/lib.rs")
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The public surface `lib.rs` declares, and the attributes of its `testing` module.
fn surface() -> (BTreeSet<String>, Option<Vec<String>>) {
    let mut names = BTreeSet::new();
    let mut testing = None;
    for (item, body) in items(&lib_code()) {
        let words: Vec<&str> = item.text.split_whitespace().collect();
        let public = words.first() == Some(&"pub");
        match body {
            Some(_) if words.get(2).map(|w| w.trim_end_matches('{')) == Some("testing") => {
                testing = Some(item.attributes.clone());
            }
            Some(body) if public => {
                names.extend(exported(&item, ""));
                let name = words[2].trim_end_matches('{');
                for (inner, _) in items(&body) {
                    names.extend(exported(&inner, &format!("{name}::")));
                }
            }
            // A private inline module exports nothing from the root.
            Some(_) => {}
            None => names.extend(exported(&item, "")),
        }
    }
    (names, testing)
}

#[test]
fn the_public_surface_is_the_listed_one() {
    let (found, _) = surface();
    let listed: BTreeSet<String> = SURFACE.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed.len(), SURFACE.len(), "SURFACE lists a name twice");
    let added: Vec<_> = found.difference(&listed).collect();
    let removed: Vec<_> = listed.difference(&found).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "src/lib.rs exports names tests/surface.rs does not list: {added:?}; and no longer \
         exports listed ones: {removed:?}. A public name is a promise to users: make an internal \
         one pub(crate) (or put it in `testing`), or add it to SURFACE and say in the Public API \
         section of docs/agent-builders.md why users need it."
    );
}

#[test]
fn the_testing_module_is_only_in_a_testing_build() {
    let (_, testing) = surface();
    let attributes = testing.expect("src/lib.rs declares `pub mod testing { ... }`");
    assert!(
        attributes
            .iter()
            .any(|a| a == "#[cfg(feature = \"testing\")]"),
        "the testing module must be built only with the `testing` feature, found {attributes:?}"
    );
    assert!(
        attributes.iter().any(|a| a == "#[doc(hidden)]"),
        "the testing module must be #[doc(hidden)], found {attributes:?}"
    );
}

#[test]
fn the_reader_finds_grouped_renamed_and_gated_names() {
    let code = "#[cfg(feature = \"x\")]\npub use a::{B, c::{D as E}};\nmod f { pub use g::H; }\n\
                pub mod i;\nuse j::K;";
    let mut names = BTreeSet::new();
    for (item, body) in items(code) {
        if body.is_none() {
            names.extend(exported(&item, ""));
        }
    }
    let expected: BTreeSet<String> = [
        "B #[cfg(feature = \"x\")]",
        "E #[cfg(feature = \"x\")]",
        "i",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, expected);
}
