//! The library's layering, read from its source: which top-level module imports which.
//!
//! The modules sit in [`LAYERS`], lowest first, and a module imports only modules of lower
//! layers: so no import cycle can form, and the pure core (`paths`, `policy`, `tool`: the
//! commands, their answers and rendering) sits below the event format and all storage. The core
//! also names no `sled`. Every `crate::` path outside comments counts, in every file of `src/`
//! but the binary's own (`main.rs`, `connect.rs`, which may use all of the library).
//!
//! The imports that break the rule today are listed in [`KNOWN`], each a debt to pay: the test
//! fails on an import that breaks it and is not listed, and on a listed one that is gone (so the
//! list only shrinks).

use std::collections::BTreeSet;
use std::path::Path;

/// Files of `src/` outside the layers: the binary's own, and `lib.rs`, which re-exports them all.
const BINARY: [&str; 3] = ["main.rs", "connect.rs", "lib.rs"];

/// The layers, lowest first.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["unwind", "failpoint", "codec", "time"],
    // The pure core: the hash inputs and tokens are named by, the versions of the answers' text,
    // then paths, policy and the tool.
    &["hash", "semantics_version"],
    &["paths"],
    &["policy"],
    &["tool"],
    // The event format, the index and the store.
    &["event"],
    &["head"],
    &["kv"],
    &["projection"],
    &["replay"],
    &["disk"],
    &["log"],
    &["writer"],
    &["registry"],
    // Verify reads a store; a client offers it.
    &["verify"],
    // A client of a server: the backend of a client of a store that a server holds.
    &["remote"],
    &["client"],
    &["token"],
    // What reads and serves a store.
    &["history"],
    &["lineage"],
    &["inspect"],
    // The reads a client offers beyond its files (log, history, show, diff, the past).
    &["reads"],
    &["transfer"],
    &["mcp"],
    &["serve"],
];

/// The core's files: the modules of the core layers, but the tool server (which answers through
/// a client).
fn is_core(file: &str) -> bool {
    ["paths.rs", "policy.rs"].contains(&file)
        || (file.starts_with("tool/") && file != "tool/server.rs")
}

/// The imports that break the layering today, as `from -> to`.
const KNOWN: &[&str] = &[
    "client -> serve",
    "client -> token",
    "history -> lineage",
    "kv -> projection",
    "projection -> token",
    "replay -> log",
    "tool -> client",
    "tool -> token",
];

/// Every import of one top-level module by another: `(from, to)`, with `(module, "sled")` for a
/// core file that names sled.
fn imports(src: &Path) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("list src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let file = path
                .strip_prefix(src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if BINARY.contains(&file.as_str()) {
                continue;
            }
            let module = file
                .split('/')
                .next()
                .expect("a name")
                .trim_end_matches(".rs");
            let text = std::fs::read_to_string(&path).expect("read");
            let code: String = text
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            if is_core(&file) && code.contains("sled::") {
                found.insert((module.to_string(), "sled".to_string()));
            }
            for other in named_modules(&code) {
                if other != module {
                    found.insert((module.to_string(), other));
                }
            }
        }
    }
    found
}

/// The top-level modules `text` names through `crate::` paths, grouped ones included.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        // Only a path that starts here, not one such as `mnemo_crate::x`.
        let before = rest[..at].chars().next_back();
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                if let Some(name) = first_segment(item.trim()) {
                    names.insert(name);
                }
            }
        } else if let Some(name) = first_segment(after) {
            names.insert(name);
        }
    }
    names
}

fn first_segment(path: &str) -> Option<String> {
    let name: String = path
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    // A lowercase name is a module; an item re-exported at the root (`crate::Error`) is not.
    (!name.is_empty() && name.chars().next().is_some_and(|c| c.is_lowercase())).then_some(name)
}

/// The imports that break the layering: to a module of the same or a higher layer, to a module
/// no layer holds, or to sled from the core.
fn broken() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer = |module: &str| LAYERS.iter().position(|l| l.contains(&module));
    imports(&src)
        .into_iter()
        .filter(|(from, to)| match (layer(from), layer(to)) {
            (Some(a), Some(b)) => b >= a,
            _ => true,
        })
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect()
}

#[test]
fn every_import_goes_down_the_layers_but_the_known_debts() {
    let broken = broken();
    let known: BTreeSet<String> = KNOWN.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = broken.difference(&known).collect();
    let paid: Vec<&String> = known.difference(&broken).collect();
    assert!(
        new.is_empty(),
        "imports that break the layering (see LAYERS in tests/layering.rs): {new:?}"
    );
    assert!(
        paid.is_empty(),
        "these listed edges are gone: take them out of KNOWN: {paid:?}"
    );
}

#[test]
fn the_reader_sees_grouped_imports_and_full_paths_but_not_other_crates() {
    let text =
        "use crate::a::X;\nuse crate::{b::Y, c, Error};\nlet z = crate::d::f();\nmy_crate::e";
    let names: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    // Every module of the library is in a layer (a new one must be placed).
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (from, _) in imports(&src) {
        assert!(
            LAYERS.iter().any(|l| l.contains(&from.as_str())),
            "{from} is in no layer of LAYERS"
        );
    }
}
