//! The library's layering, read from its source: which top-level module imports which.
//!
//! The modules sit in [`LAYERS`], lowest first, and a module imports only modules of lower
//! layers: so no import cycle can form, and the pure core ([`CORE`]: the hash, the semantics
//! versions, `paths`, `policy`, the agent-token rules, `tool`: the commands, their answers and
//! rendering) sits below the event format and all storage. A file of the core is held to more: it imports core modules
//! only, not even the lower `error` (whose `Error` wraps sled's) or a root re-export such as
//! `crate::Error` (which hides where it comes from), and names no `sled`. Every `crate::` path
//! outside comments counts, in every file of `src/` but the binary's own (`src/bin/mnemo/`, a
//! crate of its own that reaches the library through its public paths only, one file per
//! subcommand). No import breaks the rule, and none may.

use std::collections::BTreeSet;
use std::path::Path;

/// Files of `src/` outside the layers: `lib.rs`, which re-exports them all (the binary's, under
/// [`BINARY_DIR`], are not the library's).
const BINARY: [&str; 1] = ["lib.rs"];

/// The binary's directory under `src/`.
const BINARY_DIR: &str = "bin/";

/// The layers, lowest first.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["unwind", "failpoint", "codec", "time"],
    // The pure core: the hash inputs and tokens are named by, the versions of the answers' text,
    // then paths, policy and the tool.
    &["hash", "seq", "semantics_version"],
    &["paths"],
    &["policy"],
    &["credential"],
    &["tool"],
    // The answers of the read commands, as data (serde types that know no store).
    &["protocol"],
    // The event format, the index and the store.
    &["event"],
    &["chain"],
    &["head"],
    &["kv"],
    &["snapshot"],
    &["projection"],
    &["disk"],
    &["log"],
    &["proof"],
    &["replay"],
    &["writer"],
    &["registry"],
    // A data directory of stores: names, listing, the lock.
    &["data_dir"],
    // Verify reads a store; a client offers it.
    &["verify"],
    // A client of a server: the backend of a client of a store that a server holds.
    &["remote"],
    &["discovery"],
    &["client"],
    &["token"],
    // What reads a store.
    &["history"],
    &["lineage"],
    &["inspect"],
    // Erasing events: a replay that skips them, and a rewrite of the store.
    &["redact"],
    // The tool server: the core's tool answered through a client (whose delete erases under
    // the setting `delete` = `erase`).
    &["tool_server"],
    // The reads a client offers beyond its files (log, history, show, diff, the past).
    &["reads"],
    &["transfer"],
    // Stores as the memory-stores API sees them: memories read from the index, versions off its
    // journal, a store moved whole as the API's JSON, and what the API's routes ask of a store
    // as typed methods of a client.
    &["memory_store"],
    // Replicas in object storage: segments shipped, a store restored and verified from them.
    &["replica"],
    &["mcp"],
    &["serve"],
];

/// The modules of the pure core.
const CORE: [&str; 7] = [
    "hash",
    "seq",
    "semantics_version",
    "paths",
    "policy",
    "credential",
    "tool",
];

/// The core's files: the files of the core's modules.
fn is_core(file: &str) -> bool {
    CORE.contains(&module_of(file))
}

/// The top-level module a file of `src/` belongs to.
fn module_of(file: &str) -> &str {
    file.split('/')
        .next()
        .expect("a name")
        .trim_end_matches(".rs")
}

/// The imports of `file` (a path under `src/`, holding `text`) that break the layering, as
/// `from -> to`: to a module of the same or a higher layer, or to one no layer holds; and for a
/// core file, to any module outside the core, to a root re-export (`from -> crate::Name`), or
/// to sled (`from -> sled`).
fn broken_in(file: &str, text: &str) -> BTreeSet<String> {
    let module = module_of(file);
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let core = is_core(file);
    let mut found = BTreeSet::new();
    if core && code.contains("sled::") {
        found.insert(format!("{module} -> sled"));
    }
    if core {
        for item in root_items(&code) {
            found.insert(format!("{module} -> crate::{item}"));
        }
    }
    for other in named_modules(&code) {
        if other == module {
            continue;
        }
        let downward = matches!((layer(module), layer(&other)), (Some(a), Some(b)) if b < a);
        if !downward || (core && !CORE.contains(&other.as_str())) {
            found.insert(format!("{module} -> {other}"));
        }
    }
    found
}

/// Every file of `src/` under the layers, as (its path under `src/`, its text).
fn sources(src: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
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
            if BINARY.contains(&file.as_str()) || file.starts_with(BINARY_DIR) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            found.push((file, text));
        }
    }
    found
}

/// The first segment of every path `text` names through `crate::`, grouped ones included
/// (`crate::{a, b::c}` names `a` and `b`); a path such as `mnemo_crate::x` is not one.
fn crate_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        // Only a path that starts here, not one such as `mnemo_crate::x`.
        let before = rest[..at].chars().next_back();
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let paths: Vec<&str> = match after.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .map(str::trim)
                .collect(),
            None => vec![after],
        };
        for path in paths {
            let name: String = path
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                segments.push(name);
            }
        }
    }
    segments
}

/// The top-level modules `text` names through `crate::` paths: lowercase first segments (an
/// item re-exported at the root, `crate::Error`, is not a module).
fn named_modules(text: &str) -> BTreeSet<String> {
    crate_segments(text)
        .into_iter()
        .filter(|name| name.chars().next().is_some_and(char::is_lowercase))
        .collect()
}

/// The items `text` names at the crate's root (`crate::Error`): re-exports, which hide the
/// module they come from.
fn root_items(text: &str) -> BTreeSet<String> {
    crate_segments(text)
        .into_iter()
        .filter(|name| name.chars().next().is_some_and(char::is_uppercase))
        .collect()
}

/// The imports of the library that break the layering (see [`broken_in`]).
fn broken() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    sources(&src)
        .iter()
        .flat_map(|(file, text)| broken_in(file, text))
        .collect()
}

#[test]
fn every_import_goes_down_the_layers() {
    let broken = broken();
    assert!(
        broken.is_empty(),
        "imports that break the layering (see LAYERS and CORE in tests/layering.rs; a core file imports core modules only): {broken:?}"
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
    for (file, _) in sources(&src) {
        let module = module_of(&file);
        assert!(
            LAYERS.iter().any(|l| l.contains(&module)),
            "{module} is in no layer of LAYERS"
        );
    }
}

#[test]
fn a_core_file_imports_the_core_only() {
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| s.to_string()).collect() };
    // The core's own modules, lower ones included, are fine.
    let pure = "use crate::hash::EventHash;\nuse crate::semantics_version::Semantics;\nuse crate::paths::MemPath;";
    assert_eq!(broken_in("tool/semantics.rs", pure), set(&[]));
    // The error module is below the core, but its Error wraps sled's: not for the core.
    let error = "use crate::error::Result;";
    assert_eq!(broken_in("tool/tree.rs", error), set(&["tool -> error"]));
    assert_eq!(broken_in("paths.rs", error), set(&["paths -> error"]));
    assert_eq!(
        broken_in("semantics_version/quote.rs", error),
        set(&["semantics_version -> error"])
    );
    // Nor a root re-export, nor sled, nor a lower module outside the core.
    assert_eq!(
        broken_in("policy.rs", "use crate::{Error, paths::MemPath};"),
        set(&["policy -> crate::Error"])
    );
    assert_eq!(
        broken_in("tool/render.rs", "fn f() -> sled::Result<()>"),
        set(&["tool -> sled"])
    );
    assert_eq!(
        broken_in("hash.rs", "let t = crate::time::utc(0);"),
        set(&["hash -> time"])
    );
    // Above the core a lower module is fine; a higher one never is.
    assert_eq!(broken_in("tool_server.rs", error), set(&[]));
    assert_eq!(
        broken_in("log.rs", "use crate::{error::Result, Error};"),
        set(&[])
    );
    assert_eq!(
        broken_in("log.rs", "use crate::writer::Writer;"),
        set(&["log -> writer"])
    );
    assert_eq!(
        broken_in("paths.rs", "use crate::event::Body;"),
        set(&["paths -> event"])
    );
}

/// The binary (`src/bin/mnemo/`) is a client of the library like any other: it names no
/// internals (`mnemo::testing`), and the library hides nothing public for it (the only hidden
/// module of `lib.rs` is `testing`, which exists in the crate's own test builds alone). So every
/// path the binary uses is one `tests/surface.rs` lists.
#[test]
fn the_binary_uses_the_public_api_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut pending = vec![src.join(BINARY_DIR)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("list the binary's directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 10, "the binary's files: {files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        assert!(
            !text.contains("mnemo::testing"),
            "{} names mnemo::testing: the binary uses the public API only",
            file.display()
        );
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let hidden: Vec<&str> = lib
        .split("#[doc(hidden)]")
        .skip(1)
        .map(|after| {
            after
                .lines()
                .find(|l| l.contains("pub "))
                .unwrap_or("")
                .trim()
        })
        .collect();
    assert_eq!(
        hidden,
        ["pub mod testing {"],
        "lib.rs hides public items other than `testing`: make them pub(crate), or public and listed"
    );
}

/// The server reaches a store through a client only: no file under `src/serve/` names the store
/// type or the client's ways around its typed methods (`read_local`, `local_store`), outside
/// comments. What a route needs of a store is a method of `MnemoClient` (for the memory-stores
/// API, in `src/memory_store/access.rs`), so the fleet's routing lands on one way in.
#[test]
fn the_server_reaches_stores_through_the_client_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = 0;
    let mut found = Vec::new();
    for (file, text) in sources(&src) {
        if !file.starts_with("serve/") {
            continue;
        }
        files += 1;
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            for word in words {
                if matches!(word, "Store" | "read_local" | "local_store") {
                    found.push(format!("src/{file}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(files > 10, "the server's files: {files}");
    assert!(
        found.is_empty(),
        "the server reaches a store around the client:\n{}",
        found.join("\n")
    );
}
