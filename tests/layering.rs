//! The library's layering, read from its source: which module imports which.
//!
//! `src/` is grouped by layer into folders ([`FOLDERS`], lowest first): the model (`model/`: the
//! pure core, the event format, the read answers as data), the store (`store/`), the audit
//! (`audit/`), the client (`client.rs` and `client/`), then the memory-stores API, replicas, MCP
//! and the server. A module is named by its path under `src/` down to the module a folder groups
//! (`model::event`, `store::log`, `client::remote`; `client`, `serve` and `error` stand alone).
//!
//! The modules sit in [`LAYERS`], lowest first, and a module imports only modules of lower
//! layers: so no import cycle can form. The folders are bands of that order (no module of a folder
//! sits below one of the folder before it), so a folder imports only its own and lower folders. The
//! pure core ([`CORE`]: the hash, the semantics versions, `paths`, `policy`, the agent-token rules,
//! `tool`: the commands, their answers and rendering) sits below the event format and all storage.
//! A file of the core is held to more: it imports core modules only, not even the lower `error`
//! (whose `Error` wraps sled's) or a root re-export such as `crate::Error` (which hides where it
//! comes from), and names no `sled`. Every `crate::` path outside comments counts, in every file of
//! `src/` but the binary's own (`src/bin/mnemo/`, a crate of its own that reaches the library
//! through its public paths only, one file per subcommand). No import breaks the rule, and none
//! may.

use std::collections::BTreeSet;
use std::path::Path;

/// Files of `src/` outside the layers: `lib.rs`, which re-exports them all, and the folders' own
/// files, which declare their modules and nothing else (the binary's, under [`BINARY_DIR`], are not
/// the library's).
const OUTSIDE: [&str; 4] = ["lib.rs", "model.rs", "store.rs", "audit.rs"];

/// The binary's directory under `src/`.
const BINARY_DIR: &str = "bin/";

/// The folders of `src/` that group modules, lowest first. `client` is also a module (its own
/// file is `MnemoClient`'s).
const FOLDERS: [&str; 4] = ["model", "store", "audit", "client"];

/// The layers, lowest first.
const LAYERS: &[&[&str]] = &[
    &["error"],
    // The model. The pure core: the hash inputs and tokens are named by, the versions of the
    // answers' text, then paths, policy and the tool.
    &["model::codec", "model::time"],
    &["model::hash", "model::seq", "model::semantics_version"],
    &["model::paths"],
    &["model::policy"],
    &["model::credential"],
    &["model::tool"],
    // The answers of the read commands, as data (serde types that know no store).
    &["model::protocol"],
    // The event format and its chain.
    &["model::event"],
    &["model::chain"],
    &["model::head"],
    // The store: its files (the value file among them, which the index reads through), the
    // index, the log and the writer.
    &["store::unwind", "store::failpoint"],
    &["store::disk"],
    &["store::kv"],
    &["store::snapshot"],
    &["store::projection"],
    &["store::log"],
    &["store::proof"],
    &["store::replay"],
    &["store::writer"],
    &["store::registry"],
    // A data directory of stores: names, listing, the lock.
    &["store::data_dir"],
    // The audit: verify reads a store (a client offers it); the past, a file's lineage, an event,
    // where content went.
    &["audit::verify"],
    &["audit::history"],
    &["audit::lineage"],
    &["audit::inspect"],
    &["audit::trace"],
    // The client: the backend of a client of a store that a server holds, finding that server,
    // then the client and what it offers. First what a tool server's result says when the store
    // failed on a call, which a tool server and a bridge to a server's both read.
    &["client::store_failures"],
    &["client::remote"],
    &["client::discovery"],
    &["client"],
    &["client::token"],
    // The tool server: the core's tool answered through a client (whose delete erases under
    // the setting `delete` = `erase`).
    &["client::tool_server"],
    // The reads a client offers beyond its files (log, history, show, diff, the past).
    &["client::reads"],
    &["client::transfer"],
    // Erasing events: a replay that skips them, and a rewrite of the store.
    &["client::redact"],
    // Putting files back as they were: a replay that follows files, then ordinary calls.
    &["client::revert"],
    // The seam between a client and its store, in this process or through its server: one
    // method per operation that differs, composing the reads, tokens and redaction below it.
    &["client::backend"],
    // The stores of a data directory, through the server that serves it or on the directory.
    &["client::stores"],
    // Stores as the memory-stores API sees them: memories read from the index, versions off its
    // journal, a store moved whole as the API's JSON, and what the API's routes ask of a store
    // as typed methods of a client.
    &["memory_store"],
    // Replicas in object storage: segments shipped, a store restored and verified from them.
    &["replica"],
    // A fleet of servers sharing a bucket: leases, and each store's write-ahead log there.
    &["fleet"],
    &["mcp"],
    &["serve"],
];

/// The modules of the pure core.
const CORE: [&str; 7] = [
    "model::hash",
    "model::seq",
    "model::semantics_version",
    "model::paths",
    "model::policy",
    "model::credential",
    "model::tool",
];

/// The core's files: the files of the core's modules.
fn is_core(file: &str) -> bool {
    CORE.contains(&module_of(file).as_str())
}

/// The module a file of `src/` (a path under it, `model/event/wire.rs`) belongs to:
/// `model::event`; a file outside the folders, `serve/routes.rs`, belongs to `serve`.
fn module_of(file: &str) -> String {
    let mut segments = file.trim_end_matches(".rs").split('/');
    let first = segments.next().expect("a name");
    match segments.next() {
        Some(second) if FOLDERS.contains(&first) => format!("{first}::{second}"),
        _ => first.to_string(),
    }
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
        let downward = matches!((layer(&module), layer(&other)), (Some(a), Some(b)) if b < a);
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
            if OUTSIDE.contains(&file.as_str()) || file.starts_with(BINARY_DIR) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            found.push((file, text));
        }
    }
    found
}

/// The top-level items of a `use` group's inside (`a, b::{c, d}, E`), split at its commas.
fn group_items(inside: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inside.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inside[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inside[start..]);
    items
}

/// The inside of the group `text` starts with (`{...}`, nested groups included), or `None`.
fn group(text: &str) -> Option<&str> {
    let inside = text.strip_prefix('{')?;
    let mut depth = 0;
    for (i, c) in inside.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(&inside[..i]),
            '}' => depth -= 1,
            _ => {}
        }
    }
    Some(inside)
}

/// The first identifier `text` starts with.
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// What a path below `crate::` (the text after it) names first: a module (`model::event` for
/// `model::event::Event`, `client` for `client::MnemoClient`, `serve` for `serve::x`) or a root
/// item (`Error`), with every item of a group (`{a, model::{b, c}}`) followed.
fn named_by(path: &str, folder: Option<&str>, out: &mut Vec<String>) {
    let path = path.trim_start();
    if let Some(inside) = group(path) {
        for item in group_items(inside) {
            named_by(item, folder, out);
        }
        return;
    }
    let name = identifier(path);
    if name.is_empty() {
        return;
    }
    let after = path[name.len()..].strip_prefix("::");
    match folder {
        // Inside a folder: one of its modules, or (for `client`) the folder's own module.
        Some(folder) if name.chars().next().is_some_and(char::is_lowercase) => {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
            if src.join(folder).join(format!("{name}.rs")).is_file() || folder != "client" {
                out.push(format!("{folder}::{name}"));
            } else {
                out.push(folder.to_string());
            }
        }
        Some(folder) => out.push(folder.to_string()),
        None => match after {
            Some(rest) if FOLDERS.contains(&name) => named_by(rest, Some(name), out),
            _ => out.push(name.to_string()),
        },
    }
}

/// What every path `text` names through `crate::` names first (see [`named_by`]); a path such
/// as `mnemo_crate::x` is not one.
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
        named_by(after, None, &mut segments);
    }
    segments
}

/// The modules `text` names through `crate::` paths (an item re-exported at the root,
/// `crate::Error`, is not a module).
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
    let text = "use crate::a::X;\nuse crate::{b::Y, c, Error};\nlet z = crate::d::f();\nmy_crate::e\n\
                use crate::model::{event::Event, paths::{self, MemPath}};\n\
                use crate::{store::log::Store, client::{MnemoClient, remote::RemoteClient}};";
    let names: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(
        names,
        [
            "a",
            "b",
            "c",
            "client",
            "client::remote",
            "d",
            "model::event",
            "model::paths",
            "store::log"
        ]
    );
    // Every module of the library is in a layer (a new one must be placed), and in the folder
    // of its name.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (file, _) in sources(&src) {
        let module = module_of(&file);
        assert!(
            LAYERS.iter().any(|l| l.contains(&module.as_str())),
            "{module} (src/{file}) is in no layer of LAYERS"
        );
    }
}

/// The folders are bands of the layers: walking the layers upward, the folder never goes back
/// to a lower one, and a module outside the folders sits above them all (the memory-stores API,
/// replicas, MCP, the server) or below them all (`error`).
#[test]
fn the_folders_are_bands_of_the_layers() {
    let rank = |module: &str| {
        let folder = module.split("::").next().expect("a name");
        match FOLDERS.iter().position(|f| *f == folder) {
            Some(at) => at + 1,
            None if module == "error" => 0,
            None => FOLDERS.len() + 1,
        }
    };
    let order: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    for pair in order.windows(2) {
        assert!(
            rank(pair[0]) <= rank(pair[1]),
            "{} sits below {} in LAYERS, but its folder is above: move one of them",
            pair[1],
            pair[0]
        );
    }
    // The folders' own files declare their modules and nothing else.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in OUTSIDE.iter().filter(|f| **f != "lib.rs") {
        let text = std::fs::read_to_string(src.join(file)).expect("read a folder's file");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                line.starts_with("//") || line.contains("mod ") || line.starts_with("#[cfg("),
                "src/{file} holds more than its modules: {line}"
            );
        }
    }
}

#[test]
fn a_core_file_imports_the_core_only() {
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| s.to_string()).collect() };
    // The core's own modules, lower ones included, are fine.
    let pure = "use crate::model::hash::EventHash;\nuse crate::model::semantics_version::Semantics;\n\
                use crate::model::paths::MemPath;";
    assert_eq!(broken_in("model/tool/semantics.rs", pure), set(&[]));
    // The error module is below the core, but its Error wraps sled's: not for the core.
    let error = "use crate::error::Result;";
    assert_eq!(
        broken_in("model/tool/tree.rs", error),
        set(&["model::tool -> error"])
    );
    assert_eq!(
        broken_in("model/paths.rs", error),
        set(&["model::paths -> error"])
    );
    assert_eq!(
        broken_in("model/semantics_version/quote.rs", error),
        set(&["model::semantics_version -> error"])
    );
    // Nor a root re-export, nor sled, nor a lower module outside the core.
    assert_eq!(
        broken_in(
            "model/policy.rs",
            "use crate::{Error, model::paths::MemPath};"
        ),
        set(&["model::policy -> crate::Error"])
    );
    assert_eq!(
        broken_in("model/tool/render.rs", "fn f() -> sled::Result<()>"),
        set(&["model::tool -> sled"])
    );
    assert_eq!(
        broken_in("model/hash.rs", "let t = crate::model::time::utc(0);"),
        set(&["model::hash -> model::time"])
    );
    // Above the core a lower module is fine; a higher one never is.
    assert_eq!(broken_in("client/tool_server.rs", error), set(&[]));
    assert_eq!(
        broken_in("store/log.rs", "use crate::{error::Result, Error};"),
        set(&[])
    );
    assert_eq!(
        broken_in("store/log.rs", "use crate::store::writer::Writer;"),
        set(&["store::log -> store::writer"])
    );
    assert_eq!(
        broken_in("model/paths.rs", "use crate::model::event::Body;"),
        set(&["model::paths -> model::event"])
    );
    // A folder never imports a higher one: the store does not reach the client.
    assert_eq!(
        broken_in("store/writer.rs", "use crate::client::MnemoClient;"),
        set(&["store::writer -> client"])
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
