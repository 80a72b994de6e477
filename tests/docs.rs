//! The docs against the code: every `mnemo` command in a shell block of README.md, docs/*.md and
//! ARCHITECTURE.md exists with every flag it shows (asked of the built binary's `--help`), a
//! flag's `a|b|c` values are the ones the binary takes, README's command list names every
//! subcommand, its Rust quick start is a whole program with its Cargo.toml lines, every
//! `cargo install` is `--locked`, every
//! relative link between those files and CHANGELOG.md reaches a file and its `#anchor` a heading
//! there, and every markdown file with a Rust block is a doctest of `src/lib.rs`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md, CHANGELOG.md and docs/*.md, as paths relative to the repository.
fn doc_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut guides: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is there")
        .map(|entry| PathBuf::from("docs").join(entry.expect("a docs/ entry").file_name()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    assert!(!guides.is_empty(), "docs/ holds no guide");
    files.extend(guides);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A line of a markdown file, with its number and the language of the fenced block it is in
/// (`None` outside a block; the fence lines themselves are left out).
struct Line<'a> {
    number: usize,
    text: &'a str,
    block: Option<&'a str>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut block: Option<&str> = None;
    for (i, text) in text.lines().enumerate() {
        if let Some(info) = text.trim_start().strip_prefix("```") {
            block = match block {
                None => Some(info.split_whitespace().next().unwrap_or("")),
                Some(_) => None,
            };
            continue;
        }
        out.push(Line {
            number: i + 1,
            text,
            block,
        });
    }
    out
}

/// The `mnemo` command lines of a file's `sh` blocks: (line number, the words after `mnemo`).
/// A comment (` #` on) is no part of a command; a line that starts with `[--` or `--` carries on
/// the command above it, as the synopsis wraps its long ones.
fn mnemo_commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut commands: Vec<(usize, Vec<String>)> = Vec::new();
    let mut open = false;
    for line in lines(text) {
        if line.block != Some("sh") {
            open = false;
            continue;
        }
        // A line that is all comment is no command, even with a ` #` further on.
        let code = match line.text.find(" #") {
            _ if line.text.trim_start().starts_with('#') => "",
            Some(at) => &line.text[..at],
            None => line.text,
        };
        let trimmed = code.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        if open && (trimmed.starts_with("[--") || trimmed.starts_with("--")) {
            let last = commands.last_mut().expect("an open command");
            last.1.extend(trimmed.split_whitespace().map(String::from));
            continue;
        }
        let words: Vec<&str> = code.split_whitespace().collect();
        open = false;
        if let Some(at) = words.iter().position(|w| *w == "mnemo") {
            let rest: Vec<String> = words[at + 1..]
                .iter()
                .take_while(|w| !matches!(**w, "|" | "&&" | "||" | ";" | ">" | "2>" | ">>"))
                .map(|w| w.to_string())
                .collect();
            // `mnemo serve: listening on ...` is output, not a command.
            let is_command = rest.first().is_none_or(|w| {
                w.starts_with('-')
                    || w.chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c == '|')
            });
            if is_command {
                commands.push((line.number, rest));
                open = true;
            }
        }
    }
    commands
}

/// `--name` of every flag a line's words show (`[--db`, `--expect=X`, `--as]`).
fn flags(words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter_map(|w| {
            let w = w.trim_start_matches(['[', '(']);
            let name = w.strip_prefix("--")?;
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (name.starts_with(|c: char| c.is_ascii_alphabetic())).then(|| format!("--{name}"))
        })
        .collect()
}

// The binary takes every subcommand and flag only in a build with the server and replicas.
#[cfg(all(feature = "serve", feature = "replicate"))]
mod against_the_binary {
    use std::collections::{BTreeSet, HashMap};
    use std::process::Command;

    use super::{doc_files, flags, listed_values, mnemo_commands, read};
    use crate::support::mnemo_bin;

    /// What `mnemo ARGS --help` says: its subcommands, its flags, and the values of each flag
    /// that lists them (`--profile <spec|python-sdk>`, or `[possible values: a, b]`).
    #[derive(Clone, Default)]
    struct Help {
        subcommands: BTreeSet<String>,
        flags: BTreeSet<String>,
        values: HashMap<String, BTreeSet<String>>,
    }

    fn help(cache: &mut HashMap<Vec<String>, Option<Help>>, args: &[String]) -> Option<Help> {
        if let Some(known) = cache.get(args) {
            return known.clone();
        }
        let out = Command::new(mnemo_bin())
            .args(args)
            .arg("--help")
            .env("NO_COLOR", "1")
            .output()
            .expect("run mnemo --help");
        let found = out.status.success().then(|| {
            let text = String::from_utf8_lossy(&out.stdout);
            let mut help = Help::default();
            let mut in_commands = false;
            // The long flag whose description the lines below belong to.
            let mut current: Option<String> = None;
            for line in text.lines() {
                if line.trim_end().ends_with(':') && !line.starts_with(' ') {
                    in_commands = line.trim_end() == "Commands:";
                    current = None;
                    continue;
                }
                let trimmed = line.trim_start();
                if in_commands && line.starts_with("  ") && !trimmed.is_empty() {
                    let name = trimmed.split_whitespace().next().unwrap_or("");
                    help.subcommands.insert(name.to_string());
                } else if trimmed.starts_with('-') {
                    // The flag part of an option's line ends at its first run of two spaces.
                    let head = trimmed.split("  ").next().unwrap_or("");
                    current = None;
                    for word in head.split([' ', ',']) {
                        let name = word.split(['=', '[', '<']).next().unwrap_or("");
                        if name.starts_with("--") {
                            help.flags.insert(name.to_string());
                            current = Some(name.to_string());
                        }
                    }
                    let listed = head
                        .split_once('<')
                        .and_then(|(_, v)| v.split_once('>'))
                        .map(|(v, _)| v)
                        .filter(|v| v.contains('|'));
                    if let (Some(flag), Some(listed)) = (&current, listed) {
                        let values = listed.split('|').map(String::from).collect();
                        help.values.insert(flag.clone(), values);
                    }
                }
                if let (Some(flag), Some((_, rest))) =
                    (&current, line.split_once("[possible values: "))
                {
                    let listed = rest.split(']').next().unwrap_or("");
                    let values = listed.split(", ").map(String::from).collect();
                    help.values.insert(flag.clone(), values);
                }
            }
            help
        });
        cache.insert(args.to_vec(), found.clone());
        found
    }

    /// What is wrong with one documented command, each as a sentence.
    fn check_command(
        cache: &mut HashMap<Vec<String>, Option<Help>>,
        words: &[String],
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let flags = flags(words);
        let top = help(cache, &[]).expect("mnemo --help runs");
        let Some(first) = words.first().filter(|w| !w.starts_with('-')) else {
            for flag in flags.iter().filter(|f| !top.flags.contains(*f)) {
                problems.push(format!("`mnemo` has no flag {flag}"));
            }
            return problems;
        };
        for sub in first.split('|') {
            if !top.subcommands.contains(sub) {
                problems.push(format!("`mnemo` has no subcommand `{sub}`"));
                continue;
            }
            let path = vec![sub.to_string()];
            let Some(sub_help) = help(cache, &path) else {
                problems.push(format!("`mnemo {sub} --help` fails"));
                continue;
            };
            // A subcommand with subcommands of its own names one next, unless the line only gives
            // its flags.
            let mut leaves: Vec<(Vec<String>, Help)> = Vec::new();
            match words
                .get(1)
                .filter(|w| !sub_help.subcommands.is_empty() && !w.starts_with(['-', '[']))
            {
                Some(second) => {
                    for leaf in second.split('|') {
                        if !sub_help.subcommands.contains(leaf) {
                            problems.push(format!("`mnemo {sub}` has no subcommand `{leaf}`"));
                            continue;
                        }
                        let path = vec![sub.to_string(), leaf.to_string()];
                        match help(cache, &path) {
                            Some(h) => leaves.push((path, h)),
                            None => problems.push(format!("`mnemo {sub} {leaf} --help` fails")),
                        }
                    }
                }
                None => leaves.push((path, sub_help)),
            }
            for (path, leaf) in &leaves {
                for flag in flags.iter().filter(|f| !leaf.flags.contains(*f)) {
                    problems.push(format!("`mnemo {}` has no flag {flag}", path.join(" ")));
                }
                for (flag, shown) in listed_values(words) {
                    let Some(takes) = leaf.values.get(&flag) else {
                        continue;
                    };
                    if &shown != takes {
                        problems.push(format!(
                            "`mnemo {} {flag}` takes {}, the doc lists {}",
                            path.join(" "),
                            takes.iter().cloned().collect::<Vec<_>>().join("|"),
                            shown.iter().cloned().collect::<Vec<_>>().join("|"),
                        ));
                    }
                }
            }
        }
        problems
    }

    #[test]
    fn every_documented_command_and_flag_exists() {
        let mut cache = HashMap::new();
        let mut problems = Vec::new();
        let mut checked = 0;
        for file in doc_files() {
            for (line, words) in mnemo_commands(&read(&file)) {
                checked += 1;
                for problem in check_command(&mut cache, &words) {
                    problems.push(format!("{}:{line}: {problem}", file.display()));
                }
            }
        }
        assert!(
            checked >= 40,
            "only {checked} `mnemo` commands found in the docs' sh blocks: is the parser reading them?"
        );
        assert!(
            problems.is_empty(),
            "the docs show commands the binary does not take:\n{}",
            problems.join("\n")
        );
    }

    /// README's command list is complete: every subcommand `mnemo --help` lists is the first
    /// word of a command in README's shell blocks.
    #[test]
    fn the_readme_names_every_subcommand() {
        let mut cache = HashMap::new();
        let top = help(&mut cache, &[]).expect("mnemo --help runs");
        let shown: BTreeSet<String> = mnemo_commands(&read(std::path::Path::new("README.md")))
            .into_iter()
            .filter_map(|(_, words)| words.first().cloned())
            .flat_map(|first| first.split('|').map(String::from).collect::<Vec<_>>())
            .collect();
        let missing: Vec<&String> = top
            .subcommands
            .iter()
            .filter(|sub| *sub != "help" && !shown.contains(*sub))
            .collect();
        assert!(
            top.subcommands.len() > 20 && missing.is_empty(),
            "README.md's command list (its sh blocks) leaves out these subcommands of `mnemo \
             --help`; add a line `mnemo NAME [--flag ...]  # what it does` for each: {missing:?}"
        );
    }
}

#[test]
fn the_command_parser_reads_what_the_docs_write() {
    let text = "```sh\n\
                mnemo tool [--db P] [--agent ID]   # a comment with --not-a-flag\n\
                           [--durability fsync|flush]\n\
                $ echo '{}' | mnemo verify --json | jq .\n\
                mnemo serve: listening on http://127.0.0.1:1\n\
                # mnemo commented --out   # a comment after a comment\n\
                mnemo store create|list [NAME] --data DIR\n\
                ```\n\
                mnemo outside --a-block\n";
    let commands = mnemo_commands(text);
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let shown = vec![
        (
            2,
            words("tool [--db P] [--agent ID] [--durability fsync|flush]"),
        ),
        (4, words("verify --json")),
        (7, words("store create|list [NAME] --data DIR")),
    ];
    assert_eq!(commands, shown);
    assert_eq!(flags(&commands[0].1), ["--db", "--agent", "--durability"]);
}

/// The values a command line lists for its flags as `--flag a|b|c` (the word after the flag,
/// with a `|`): (flag, values).
fn listed_values(words: &[String]) -> Vec<(String, BTreeSet<String>)> {
    words
        .windows(2)
        .filter_map(|pair| {
            let flag = flags(&pair[..1]).pop()?;
            let next = pair[1].trim_end_matches([']', ')']);
            if pair[0].contains('=') || next.starts_with(['-', '[']) || !next.contains('|') {
                return None;
            }
            Some((flag, next.split('|').map(String::from).collect()))
        })
        .collect()
}

#[test]
fn a_flags_listed_values_are_read_from_the_word_after_it() {
    let words: Vec<String> = "tool [--profile spec|python-sdk] [--root /memories] --x a|b"
        .split_whitespace()
        .map(String::from)
        .collect();
    let set = |s: &str| s.split('|').map(String::from).collect::<BTreeSet<_>>();
    assert_eq!(
        listed_values(&words),
        [
            ("--profile".to_string(), set("spec|python-sdk")),
            ("--x".to_string(), set("a|b"))
        ]
    );
}

/// README's Rust quick start as a newcomer pastes it: a whole program (no line that rustdoc
/// hides, which a web page shows), after the Cargo.toml lines that name this package and
/// serde_json; its `use` names the library as Cargo.toml's `[lib]` does.
#[test]
fn the_readme_rust_quick_start_is_a_whole_program_with_its_dependencies() {
    let readme = read(Path::new("README.md"));
    let manifest = read(Path::new("Cargo.toml"));
    let blocks = lines(&readme);
    let first_rust = blocks
        .iter()
        .position(|l| l.block == Some("rust"))
        .expect("README.md has a rust block");
    let rust: Vec<&Line> = blocks[first_rust..]
        .iter()
        .take_while(|l| l.block == Some("rust"))
        .collect();
    for line in &rust {
        let code = line.text.trim_start();
        assert!(
            !(code == "#" || code.starts_with("# ")),
            "README.md:{}: a line rustdoc hides but a web page shows; the quick start must run as pasted: {}",
            line.number,
            line.text
        );
    }
    assert!(
        rust.iter()
            .any(|l| l.text == "fn main() -> mnemo::Result<()> {"),
        "README.md's Rust quick start is not a whole program with `fn main() -> mnemo::Result<()>`"
    );
    let toml: Vec<&str> = blocks[..first_rust]
        .iter()
        .filter(|l| l.block == Some("toml"))
        .map(|l| l.text)
        .collect();
    let package = manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("the package name");
    assert!(
        toml.iter().any(|l| l.starts_with(&format!("{package} = ")))
            && toml.iter().any(|l| l.starts_with("serde_json = ")),
        "README.md gives no Cargo.toml lines for `{package}` and `serde_json` before its Rust quick start: {toml:?}"
    );
    assert!(
        manifest.contains("[lib]\nname = \"mnemo\"")
            && rust.iter().any(|l| l.text.starts_with("use mnemo::")),
        "the quick start's `use` and Cargo.toml's [lib] name differ"
    );
}

/// Every install command in the docs and Cargo.toml builds what the tests ran: `--locked`.
#[test]
fn every_cargo_install_is_locked() {
    let mut files = doc_files();
    files.push(PathBuf::from("Cargo.toml"));
    let mut found = 0;
    let mut unlocked = Vec::new();
    for file in files {
        for (i, line) in read(&file).lines().enumerate() {
            for (at, _) in line.match_indices("cargo install ") {
                found += 1;
                let command = line[at..].split(['`', '#']).next().unwrap_or("");
                if !command.split_whitespace().any(|w| w == "--locked") {
                    unlocked.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found >= 3, "only {found} `cargo install` lines found");
    assert!(
        unlocked.is_empty(),
        "`cargo install` without --locked resolves newer crates than the tests ran; add --locked:\n{}",
        unlocked.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .trim_end_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a markdown file's headings make (a repeated one as `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in lines(text).into_iter().filter(|l| l.block.is_none()) {
        let hashes = line.text.chars().take_while(|c| *c == '#').count();
        let Some(title) = line.text[hashes..].strip_prefix(' ') else {
            continue;
        };
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let base = slug(title);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The relative link targets of a file outside its code blocks: (line number, target).
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for line in lines(text).into_iter().filter(|l| l.block.is_none()) {
        let mut rest = line.text;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push((line.number, target.to_string()));
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_between_the_docs_reaches_a_file_and_a_heading() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let text = read(&file);
        let dir = file.parent().unwrap_or(Path::new(""));
        for (line, target) in relative_links(&text) {
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            let here = format!("{}:{line}: ({target})", file.display());
            if !repo().join(&linked).exists() {
                problems.push(format!("{here}: no file {}", linked.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if linked.extension().is_some_and(|e| e == "md")
                    && !anchors(&read(&linked)).contains(anchor)
                {
                    problems.push(format!(
                        "{here}: no heading #{anchor} in {}",
                        linked.display()
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 40,
        "only {checked} relative links found: is the parser reading them?"
    );
    assert!(
        problems.is_empty(),
        "broken links in the docs:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_markdown_file_with_a_rust_block_is_a_doctest() {
    let lib = read(Path::new("src/lib.rs"));
    let mut missing = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        // rustdoc runs a fenced block as Rust unless its info string names another language.
        let has_rust = lines(&text).iter().any(|l| {
            l.block
                .is_some_and(|b| b.is_empty() || b.starts_with("rust"))
        });
        let include = format!("#[doc = include_str!(\"../{}\")]", file.display());
        if has_rust && !lib.contains(&include) {
            missing.push(file.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "these files hold Rust blocks that no doctest runs; add `#[cfg(doctest)] \
         #[doc = include_str!(\"../FILE\")] struct ...;` to src/lib.rs for each: {missing:?}"
    );
}

/// The folders ARCHITECTURE.md's code map gives a paragraph: every backquoted `src/…/` in the
/// bold title a bullet of its "Code map" section opens with (`- **`src/a/`** what it holds`).
fn code_map_folders(architecture: &str) -> BTreeSet<String> {
    let section = format!("\n{architecture}");
    let section = section
        .split("\n## ")
        .find(|s| s.starts_with("Code map"))
        .expect("ARCHITECTURE.md has a \"## Code map\" section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- **"))
        .filter_map(|l| l.split_once("**").map(|(title, _)| title))
        .flat_map(|title| title.split('`').skip(1).step_by(2))
        .filter(|name| name.starts_with("src/") && name.ends_with('/'))
        .map(str::to_string)
        .collect()
}

/// Every folder of `src/` (as `src/a/b/`), the source's own folders only.
fn source_folders() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut pending = vec![PathBuf::from("src")];
    while let Some(dir) = pending.pop() {
        found.insert(format!("{}/", dir.display()));
        for entry in std::fs::read_dir(repo().join(&dir)).expect("list a folder of src/") {
            let entry = entry.expect("an entry");
            if entry.file_type().expect("its type").is_dir() {
                pending.push(dir.join(entry.file_name()));
            }
        }
    }
    found
}

/// A floor plan that stays true: every folder of `src/` has its paragraph in ARCHITECTURE.md's
/// code map, and the map names no folder that is gone.
#[test]
fn every_folder_of_src_has_its_paragraph_in_the_code_map() {
    let mapped = code_map_folders(&read(Path::new("ARCHITECTURE.md")));
    let folders = source_folders();
    let missing: Vec<_> = folders.difference(&mapped).collect();
    let gone: Vec<_> = mapped.difference(&folders).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "ARCHITECTURE.md's code map has no `- **`src/…/`**` paragraph for {missing:?}, and one for \
         folders that are gone: {gone:?}"
    );
    let planted = "## Code map\n\n- **`src/`** text `src/c/`\n- **`src/a/` and `src/a/b/`** text\n\n## Next\n- **`src/d/`**\n";
    assert_eq!(
        code_map_folders(planted),
        ["src/", "src/a/", "src/a/b/"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn the_readme_stays_a_readme() {
    let readme = read(Path::new("README.md"));
    let count = readme.lines().count();
    assert!(
        count <= 400,
        "README.md is {count} lines; move detail into docs/ (at most 400)"
    );
    for newcomer in ["cargo run -- demo", "cargo test "] {
        assert!(
            readme.contains(newcomer),
            "README.md no longer gives `{newcomer}`"
        );
    }
}
