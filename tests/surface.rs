//! The library's public surface, read from `src/lib.rs`: every name its root exports (`pub use`
//! and `pub mod`, with the `cfg` it is built under), and the names its inline modules (`event`,
//! `tool`, `protocol`) re-export. The test fails when a name is added or removed
//! without updating [`SURFACE`], so the API cannot grow (or lose a name) silently.
//!
//! Inside the public modules declared in files of their own (none today: a user concept is a
//! type at the root, or in an inline module) every public path is listed too ([`MODULE_SURFACE`]), read from the modules' files.
//!
//! The `testing` module is left out: it is what the crate's own tests reach, and it must stay
//! behind `cfg(feature = "testing")`, which this test also checks.

use std::collections::BTreeSet;

/// The public names of the crate root (and of its inline modules), each with the `cfg` it is built
/// under, if any: 108 (105 before a trace's report, its events and live files; 112 before the
/// replicas beside a server became `serve`'s and the fleet a `Fleet`).
const SURFACE: &[&str] = &[
    "ANY_AGENT",
    "Access",
    "AdminCommand",
    "Body",
    "ClientBuilder",
    "Durability",
    "Error",
    "Event",
    "ExportSummary #[cfg(unix)]",
    "ImportSummary #[cfg(unix)]",
    "Skipped #[cfg(unix)]",
    "EventHash",
    "Grant",
    "Head",
    "Header",
    "LogQuery",
    "MEMORY_TAG",
    "MemPath",
    "MemoryRecord",
    "MemoryStoreExport",
    "MemoryStoreImport",
    "MnemoClient",
    "MnemoMcpServer #[cfg(feature = \"mcp\")]",
    "MnemoMemoryToolServer",
    "OPERATOR",
    "Outcome",
    "PathRejection",
    "Plan",
    "Policy",
    "Profile",
    "Receipt",
    "Redacted",
    "RevertPlan",
    "RevertScope",
    "Reverted",
    "Replica #[cfg(feature = \"replicate\")]",
    "ReplicaOptions #[cfg(feature = \"serve\")]",
    "RejectedCall",
    "RemoteClient #[cfg(feature = \"client\")]",
    "RemoteError #[cfg(feature = \"client\")]",
    "Report",
    "Result",
    "Selection",
    "Seq",
    "StorageError",
    "Connections #[cfg(feature = \"serve\")]",
    "DataOptions #[cfg(feature = \"serve\")]",
    "Fleet #[cfg(feature = \"serve\")]",
    "FleetKey #[cfg(feature = \"serve\")]",
    "FleetNode #[cfg(feature = \"serve\")]",
    "FleetOptions #[cfg(feature = \"serve\")]",
    "FleetStatus #[cfg(feature = \"serve\")]",
    "FleetStore #[cfg(feature = \"serve\")]",
    "OpenStore #[cfg(feature = \"serve\")]",
    "OpenedStore #[cfg(feature = \"serve\")]",
    "ServeError #[cfg(feature = \"serve\")]",
    "ServeOptions #[cfg(feature = \"serve\")]",
    "ServerBuilder",
    "StopReason #[cfg(feature = \"serve\")]",
    "Stopped #[cfg(feature = \"serve\")]",
    "serve_data #[cfg(feature = \"serve\")]",
    "TokenRecord",
    "ToolCall",
    "Violation",
    "ViolationKind",
    "DataDir",
    "DataStores #[cfg(feature = \"client\")]",
    "DataServer #[cfg(feature = \"client\")]",
    "LineTally #[cfg(feature = \"client\")]",
    "Link #[cfg(feature = \"client\")]",
    "ServerFile #[cfg(feature = \"client\")]",
    "Restored #[cfg(feature = \"replicate\")]",
    "Shipped #[cfg(feature = \"replicate\")]",
    "SigningKey #[cfg(feature = \"replicate\")]",
    "event",
    "event::ApiWrite",
    "event::Erased",
    "event::Frame",
    "event::InputDigest",
    "event::Kept",
    "event::KeptChange",
    "event::Refusal",
    "event::RejectedDigest",
    "event::Salt",
    "protocol",
    "protocol::Checkpoint",
    "protocol::DiffKind",
    "protocol::Erased",
    "protocol::EventChange",
    "protocol::FileDiff",
    "protocol::Finding",
    "protocol::HistoryEvent",
    "protocol::ListedFile",
    "protocol::Listing",
    "protocol::LiveFile",
    "protocol::LoggedEvent",
    "protocol::Redaction",
    "protocol::Revocation",
    "protocol::ShownEvent",
    "protocol::TokenInfo",
    "protocol::TraceReport",
    "protocol::TracedEvent",
    "protocol::UNREADABLE_COMMAND",
    "protocol::VerifyReport",
    "protocol::printable",
    "serve #[cfg(feature = \"serve\")]",
    "tool",
    "tool::ApiFailure",
    "tool::BoundedText",
    "tool::Command",
    "tool::Limits",
    "tool::Request",
    "tool::Semantics",
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
    let mut found = Vec::new();
    use_paths(tree, "", &mut found);
    out.extend(found.into_iter().map(|(_, name)| name));
}

/// Every leaf of one `use` tree as (its full path, the name it is exported as): `a::{B, c::D as
/// E}` gives `(a::B, B)` and `(a::c::D, E)`.
fn use_paths(tree: &str, base: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    match tree.find('{') {
        Some(open) => {
            let base = format!("{base}{}", &tree[..open]);
            let inner = &tree[open + 1..tree.rfind('}').expect("a closed use group")];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        use_paths(&inner[start..i], &base, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            use_paths(&inner[start..], &base, out);
        }
        None if tree.is_empty() => {}
        None => {
            let (path, name) = match tree.split_once(" as ") {
                Some((path, rename)) => (path.trim(), rename.trim()),
                None => (tree, tree.rsplit("::").next().expect("a segment")),
            };
            out.push((format!("{base}{path}"), name.to_string()));
        }
    }
}

/// The file of the module a `use` path in `file` names, if it names a module of this crate:
/// `crate::a::b` is `src/a/b.rs`, and a path without `crate::` starts beside `file`'s own
/// submodules (in `lib.rs`, at `src/`).
fn used_module_file(file: &std::path::Path, path: &str) -> Option<std::path::PathBuf> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut at, rest) = match path.strip_prefix("crate::") {
        Some(rest) => (src, rest),
        None => match file.file_name().and_then(|f| f.to_str()) {
            Some("lib.rs") => (src, path),
            _ => (
                file.with_extension(""),
                path.strip_prefix("self::").unwrap_or(path),
            ),
        },
    };
    let segments: Vec<&str> = rest.split("::").collect();
    let (last, dirs) = segments.split_last()?;
    for dir in dirs {
        at = at.join(dir);
    }
    let module = at.join(format!("{last}.rs"));
    (last.chars().next().is_some_and(char::is_lowercase) && module.is_file()).then_some(module)
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

/// Every public path inside the library's public modules declared in files of their own
/// (such as `a::b::C`), read from their files: what a user can name beyond the
/// root. Items of `impl` blocks are not paths and are not listed; a module's `pub mod` is read
/// from its own file.
const MODULE_SURFACE: &[&str] = &[];

/// The file of module `name` declared in `parent` (`src/a.rs` or `src/a/mod.rs` declares
/// `src/a/NAME.rs` or `src/a/NAME/mod.rs`).
fn module_file(parent: &std::path::Path, name: &str) -> std::path::PathBuf {
    let dir = match parent.file_name().and_then(|f| f.to_str()) {
        Some("mod.rs" | "lib.rs") => parent.parent().expect("a directory").to_path_buf(),
        _ => parent.with_extension(""),
    };
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

/// The public items at the top level of the module in `file` (each `pub` item at column 0:
/// rustfmt puts nothing else there), each as `prefix` and its name, with the public modules it
/// declares read in turn.
fn module_items(file: &std::path::Path, prefix: &str, out: &mut BTreeSet<String>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("pub ") else {
            continue;
        };
        if let Some(tree) = rest.strip_prefix("use ") {
            let mut tree = tree.to_string();
            while !tree.trim_end().ends_with(';') {
                tree.push_str(lines.next().expect("a use ends with ;"));
            }
            let mut paths = Vec::new();
            use_paths(tree.trim_end().trim_end_matches(';'), "", &mut paths);
            for (path, name) in paths {
                out.insert(format!("{prefix}{name}"));
                // A module re-exported whole: its public paths are public here too.
                if let Some(module) = used_module_file(file, &path) {
                    module_items(&module, &format!("{prefix}{name}::"), out);
                }
            }
            continue;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        let (kind, name) = match words.as_slice() {
            ["const", "fn", name, ..] | ["async", "fn", name, ..] => ("fn", *name),
            [kind, name, ..] => (*kind, *name),
            _ => continue,
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        match kind {
            "mod" if rest.trim_end().ends_with(';') => {
                out.insert(format!("{prefix}{name}"));
                module_items(&module_file(file, &name), &format!("{prefix}{name}::"), out);
            }
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "mod" => {
                out.insert(format!("{prefix}{name}"));
            }
            _ => {}
        }
    }
}

/// Every public path inside the public modules `lib.rs` declares (`pub mod NAME;`).
fn module_surface() -> BTreeSet<String> {
    let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let mut out = BTreeSet::new();
    for (item, body) in items(&lib_code()) {
        let words: Vec<&str> = item.text.split_whitespace().collect();
        if body.is_none() && words.first() == Some(&"pub") && words.get(1) == Some(&"mod") {
            let name = words[2].trim_end_matches(';');
            module_items(&module_file(&lib, name), &format!("{name}::"), &mut out);
        }
        // A module of a layer re-exported at the root (`pub use model::{event, tool};`).
        if let Some(tree) = words.join(" ").strip_prefix("pub use ") {
            let mut paths = Vec::new();
            use_paths(tree.trim_end_matches(';'), "", &mut paths);
            for (path, name) in paths {
                if let Some(module) = used_module_file(&lib, &path) {
                    module_items(&module, &format!("{name}::"), &mut out);
                }
            }
        }
    }
    out
}

#[test]
fn the_public_modules_hold_the_listed_paths() {
    let found = module_surface();
    let listed: BTreeSet<String> = MODULE_SURFACE.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        listed.len(),
        MODULE_SURFACE.len(),
        "MODULE_SURFACE lists a path twice"
    );
    let added: Vec<_> = found.difference(&listed).collect();
    let removed: Vec<_> = listed.difference(&found).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public modules export paths tests/surface.rs does not list: {added:?}; and no \
         longer export listed ones: {removed:?}. A public path is a promise to users: make an \
         internal one pub(crate), or add it to MODULE_SURFACE and say in docs/agent-builders.md's \
         Public API why users need it."
    );
}

#[test]
fn the_module_reader_finds_items_uses_and_modules() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("m.rs");
    std::fs::write(
        &root,
        "//! doc\npub struct A;\npub(crate) fn hidden() {}\npub const fn b() {}\n\
         pub use x::{C, d::E as F};\npub use y::{\n    G,\n};\npub mod inner;\nmod private;\n\
         mod whole;\npub use self::whole;\nimpl A {\n    pub fn method(&self) {}\n}\n",
    )
    .expect("write");
    std::fs::create_dir(dir.path().join("m")).expect("mkdir");
    std::fs::write(dir.path().join("m/inner.rs"), "pub enum H {}\n").expect("write");
    // A module re-exported whole (`pub use self::whole;`) shows its public items too.
    std::fs::write(dir.path().join("m/whole.rs"), "pub fn w() {}\n").expect("write");
    let mut found = BTreeSet::new();
    module_items(&root, "m::", &mut found);
    let expected: BTreeSet<String> = [
        "m::A",
        "m::b",
        "m::C",
        "m::F",
        "m::G",
        "m::inner",
        "m::inner::H",
        "m::whole",
        "m::whole::w",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(found, expected);
}
