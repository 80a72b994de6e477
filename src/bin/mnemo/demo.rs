//! `mnemo demo`: a scripted session on a scratch store, then its verification.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mnemo::{MnemoClient, MnemoMemoryToolServer};
use serde_json::json;

use crate::CliResult;
use crate::verify::print_report;

pub(crate) fn demo_dir(db: Option<PathBuf>) -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(path) = db {
        let empty = match std::fs::read_dir(&path) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
        };
        if !empty {
            return Err(format!(
                "{} is not empty; the demo needs a fresh store, so pass a new path or leave out --db",
                path.display()
            )
            .into());
        }
        return Ok(path);
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    Ok(std::env::temp_dir().join(format!("mnemo-demo-{}-{stamp}.db", std::process::id())))
}

pub(crate) fn run_demo(db: Option<PathBuf>) -> CliResult {
    let scratch = db.is_none();
    let path = demo_dir(db)?;
    let client = MnemoClient::open(&path, "demo-agent")?;
    let server = MnemoMemoryToolServer::new(client.clone());
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Mnemo demo: a memory session on a fresh store at {}",
        path.display()
    )?;
    writeln!(out, "tool definition: {}", server.tool_schema())?;
    let script = [
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/projects/mnemo.md",
               "file_text": "# Mnemo\n- status: planning\n- owner: agent-1\n"}),
        json!({"command": "view", "path": "/memories/projects/mnemo.md"}),
        json!({"command": "str_replace", "path": "/memories/projects/mnemo.md",
               "old_str": "status: planning", "new_str": "status: building"}),
        json!({"command": "insert", "path": "/memories/projects/mnemo.md",
               "insert_line": 1, "insert_text": "- goal: verifiable agent memory\n"}),
        json!({"command": "rename", "old_path": "/memories/projects",
               "new_path": "/memories/done"}),
        json!({"command": "create", "path": "/memories/scratch.txt", "file_text": "temporary\n"}),
        json!({"command": "delete", "path": "/memories/scratch.txt"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "view", "path": "/memories/../etc/passwd"}),
    ];
    for (i, input) in script.iter().enumerate() {
        let block = json!({"type": "tool_use", "id": format!("toolu_demo_{:02}", i + 1),
                           "name": "memory", "input": input});
        let result = server.handle(&block);
        writeln!(out, "\n>>> {input}")?;
        let tag = if result.get("is_error").is_some() {
            "error"
        } else {
            "ok"
        };
        writeln!(out, "<<< [{tag}]")?;
        writeln!(out, "{}", result["content"].as_str().unwrap_or_default())?;
    }
    let report = client.verify()?;
    writeln!(out)?;
    print_report(&mut out, &path, &report.to_protocol(&path))?;
    // Absolute, so the lines run from any directory (a relative TMPDIR or --db too).
    let db = shell_word(
        &std::path::absolute(&path)
            .unwrap_or(path.clone())
            .to_string_lossy(),
    );
    let (mnemo, on_path) = this_binary();
    if on_path {
        writeln!(out, "\nInspect it, one command a line:")?;
    } else {
        writeln!(
            out,
            "\nInspect it, one command a line (`mnemo` is not on your PATH, so this runs the binary \
             the demo ran from; `cargo install --path . --locked` in the clone installs it as `mnemo`):"
        )?;
    }
    for command in ["log", "history /memories/done/mnemo.md", "show 2", "verify"] {
        writeln!(out, "  {mnemo} {command} --db {db}")?;
    }
    if scratch {
        writeln!(
            out,
            "The store stays in the temporary directory until you remove it: rm -r {db}"
        )?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How a shell runs the binary that runs now, and whether that is as `mnemo` from PATH: else
/// its path (relative to the working directory when it is under it, as `target/debug/mnemo`
/// after `cargo run`), so the demo's hints run for someone who never installed it.
fn this_binary() -> (String, bool) {
    let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return ("mnemo".into(), true);
    };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|dir| std::fs::canonicalize(dir.join("mnemo")).is_ok_and(|found| found == exe))
    });
    if on_path {
        return ("mnemo".into(), true);
    }
    let shown = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|cwd| exe.strip_prefix(cwd).ok().map(PathBuf::from))
        .unwrap_or_else(|| exe.clone());
    // A bare name is looked up on PATH by a shell: one in the working directory is `./NAME`.
    let shown = match shown.components().count() {
        1 if shown.is_relative() => Path::new(".").join(shown),
        _ => shown,
    };
    (shell_word(&shown.to_string_lossy()), false)
}

/// `word` as one word for a POSIX shell: as it is when it is made of characters no shell treats
/// specially, else in single quotes.
pub(crate) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
