//! The `python-sdk` profile against the conformance vectors taken from the Anthropic Python SDK
//! (`anthropic` 2.14.0): every case on the pure core over an in-memory tree, the sled sample of
//! them through the library over a sled store and the binary sample through `mnemo tool`, plus
//! the million-line vector of the memory-tool contract, which is too big for the JSON file.
//!
//! The vector suites do not stop at the first mismatch: they run every case and fail once with a
//! report that names the case, the step, the input, what was expected and what came back.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use mnemo::{MnemoClient, Profile};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::{Host, PureServer, TempStore, hosts, in_binary_sample, run_mnemo, settings};

/// The python-sdk conformance vectors, kept byte for byte as they were produced.
const VECTORS: &str = include_str!("fixtures/python-sdk-vectors.json");

/// How many cases the fixture holds; guards against a cut copy.
const CASE_COUNT: usize = 93;

/// One vector: steps run in order on a fresh store, then the complete set of files.
#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    steps: Vec<Step>,
    final_files: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Step {
    input: Value,
    expect: Expect,
}

/// `text` is the exact content unless null; every `contains` substring must occur as well.
#[derive(Debug, Deserialize)]
struct Expect {
    is_error: bool,
    text: Option<String>,
    #[serde(default)]
    contains: Vec<String>,
}

fn cases() -> Vec<Case> {
    let cases: Vec<Case> = serde_json::from_str(VECTORS).expect("the vectors parse");
    assert_eq!(cases.len(), CASE_COUNT, "the fixture holds every case");
    assert!(
        cases.iter().all(|c| !c.steps.is_empty()),
        "every case has steps"
    );
    cases
}

/// Mismatches gathered across all cases, reported together.
#[derive(Default)]
struct Mismatches {
    report: String,
    count: usize,
    cases: Vec<String>,
}

impl Mismatches {
    fn add(&mut self, case: &str, what: &str, expected: &str, got: &str) {
        self.count += 1;
        if self.cases.last().map(String::as_str) != Some(case) {
            self.cases.push(case.to_string());
        }
        let _ = write!(
            self.report,
            "\n--- {case}: {what}\n    expected: {expected}\n    got:      {got}"
        );
    }

    /// Checks one step's result (`got` = content and error flag, or why there is none).
    fn step(&mut self, case: &str, n: usize, step: &Step, got: Result<(String, bool), String>) {
        let what = format!("step {n} {}", step.input);
        let (text, is_error) = match got {
            Ok(got) => got,
            Err(why) => {
                self.add(case, &what, &expected_text(&step.expect), &why);
                return;
            }
        };
        let want = &step.expect;
        let text_ok = want.text.as_ref().is_none_or(|t| *t == text);
        let missing: Vec<&String> = want
            .contains
            .iter()
            .filter(|s| !text.contains(s.as_str()))
            .collect();
        if is_error != want.is_error || !text_ok || !missing.is_empty() {
            let mut got = format!("is_error={is_error} text={text:?}");
            if !missing.is_empty() {
                let _ = write!(got, " (missing substrings: {missing:?})");
            }
            self.add(case, &what, &expected_text(want), &got);
        }
    }

    /// Compares the files after the steps with `final_files`, file by file.
    fn files(
        &mut self,
        case: &str,
        want: &BTreeMap<String, String>,
        got: &BTreeMap<String, String>,
    ) {
        for (path, content) in want {
            match got.get(path) {
                Some(c) if c == content => {}
                Some(c) => self.add(
                    case,
                    &format!("final file {path}"),
                    &format!("{content:?}"),
                    &format!("{c:?}"),
                ),
                None => self.add(
                    case,
                    &format!("final file {path}"),
                    &format!("{content:?}"),
                    "no such file",
                ),
            }
        }
        for (path, content) in got {
            if !want.contains_key(path) {
                self.add(
                    case,
                    &format!("final file {path}"),
                    "no such file",
                    &format!("{content:?}"),
                );
            }
        }
    }

    fn finish(self, suite: &str, cases: usize) {
        assert!(
            self.count == 0,
            "{suite}: {} mismatch(es) in {} of {cases} case(s): {}\n{}",
            self.count,
            self.cases.len(),
            self.cases.join(", "),
            self.report
        );
    }
}

fn expected_text(e: &Expect) -> String {
    let mut s = format!("is_error={}", e.is_error);
    if let Some(t) = &e.text {
        let _ = write!(s, " text={t:?}");
    }
    if !e.contains.is_empty() {
        let _ = write!(s, " contains={:?}", e.contains);
    }
    s
}

/// A `tool_result` block's content and error flag, or what is wrong with its shape.
fn outcome(result: &Value) -> Result<(String, bool), String> {
    let content = result["content"]
        .as_str()
        .ok_or_else(|| format!("a tool_result whose content is not a string: {result}"))?;
    let is_error = match result.get("is_error") {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(other) => return Err(format!("is_error must be absent or true, got {other}")),
    };
    Ok((content.to_string(), is_error))
}

/// Every file in the store: canonical path to content.
fn files(client: &MnemoClient) -> BTreeMap<String, String> {
    client
        .records_by_tag("memorytool")
        .expect("list the files")
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect()
}

/// Checks that the log replays intact and holds one event per call.
fn check_log(m: &mut Mismatches, case: &str, client: &MnemoClient, calls: usize) {
    match client.verify() {
        Ok(report) if report.is_intact() && report.events == calls as u64 => {}
        Ok(report) => m.add(
            case,
            "verify",
            &format!("intact with {calls} events"),
            &format!(
                "{} with {} events: {:?}",
                report.status(),
                report.events,
                report.violations
            ),
        ),
        Err(e) => m.add(
            case,
            "verify",
            &format!("intact with {calls} events"),
            &e.to_string(),
        ),
    }
}

#[test]
fn python_sdk_vectors_through_the_library() {
    let cases = cases();
    let mut m = Mismatches::default();
    let mut on_sled = 0;
    for case in &cases {
        for host in hosts(&case.name, &settings(Profile::PythonSdk)) {
            let label = format!("{} ({})", case.name, host.name());
            for (i, step) in case.steps.iter().enumerate() {
                m.step(&label, i + 1, step, outcome(&host.handle(&step.input)));
            }
            let got = host.files().into_iter().map(|r| (r.path, r.content));
            m.files(&label, &case.final_files, &got.collect());
            if let Some(problem) = host.log_problem(case.steps.len() as u64) {
                let want = format!("intact with {} events", case.steps.len());
                m.add(&label, "log", &want, &problem);
            }
            on_sled += usize::from(host.name() == "sled");
        }
    }
    assert!(on_sled > 0, "the sled sample holds no case");
    m.finish("python-sdk vectors through the library", cases.len());
}

/// Runs `mnemo tool --profile python-sdk` on `db` with one JSON line per input.
fn run_tool(db: &Path, inputs: &[String]) -> std::process::Output {
    let mut stdin = inputs.join("\n");
    stdin.push('\n');
    run_mnemo(
        &[
            "tool",
            "--profile",
            "python-sdk",
            "--db",
            db.to_str().expect("a UTF-8 temporary path"),
            "--durability",
            "buffered",
        ],
        &stdin,
    )
}

#[test]
fn python_sdk_vectors_through_the_cli() {
    let cases = cases();
    let mut m = Mismatches::default();
    let sample: Vec<&Case> = cases.iter().filter(|c| in_binary_sample(&c.name)).collect();
    assert!(!sample.is_empty(), "the binary sample holds no case");
    for case in &sample {
        let store = TempStore::new();
        let inputs: Vec<String> = case.steps.iter().map(|s| s.input.to_string()).collect();
        let out = run_tool(&store.path(), &inputs);
        if !out.status.success() {
            m.add(
                &case.name,
                "mnemo tool exit status",
                "success",
                &format!(
                    "{} (stderr: {})",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ),
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        if lines.len() != case.steps.len() {
            m.add(
                &case.name,
                "mnemo tool output",
                &format!("{} lines", case.steps.len()),
                &format!("{} lines: {stdout:?}", lines.len()),
            );
        }
        for (i, step) in case.steps.iter().enumerate() {
            let got = match lines.get(i) {
                Some(line) => serde_json::from_str::<Value>(line)
                    .map_err(|e| format!("an output line that is not JSON ({e}): {line:?}"))
                    .and_then(|v| outcome(&v)),
                None => Err("no output line".to_string()),
            };
            m.step(&case.name, i + 1, step, got);
        }
        // The process has exited; open the store it left behind.
        let client = store.client();
        m.files(&case.name, &case.final_files, &files(&client));
        check_log(&mut m, &case.name, &client, case.steps.len());
    }
    m.finish("python-sdk vectors through mnemo tool", sample.len());
}

/// `"line"` joined by `"\n"`, `n` times.
fn lines_of_line(n: usize) -> String {
    vec!["line"; n].join("\n")
}

const HUGE_LIMIT: &str = "File /memories/huge.txt exceeds maximum line limit of 999,999 lines.";

/// §4.2: a 1,000,000-line file is created but cannot be viewed; 999,999 lines can, to the last
/// line; 999,999 newlines make 1,000,000 lines again.
#[test]
fn million_line_file_on_the_pure_core() {
    let server = PureServer::with(&settings(Profile::PythonSdk));
    let huge = lines_of_line(1_000_000);
    let big = lines_of_line(999_999);
    let newlines = "\n".repeat(999_999);
    let steps = [
        (
            json!({"command": "create", "path": "/memories/huge.txt", "file_text": huge}),
            "File created successfully at: /memories/huge.txt",
            false,
        ),
        (
            json!({"command": "view", "path": "/memories/huge.txt"}),
            HUGE_LIMIT,
            true,
        ),
        (
            json!({"command": "create", "path": "/memories/big.txt", "file_text": big}),
            "File created successfully at: /memories/big.txt",
            false,
        ),
        (
            json!({"command": "view", "path": "/memories/big.txt", "view_range": [999_998, -1]}),
            "Here's the content of /memories/big.txt with line numbers:\n999998\tline\n999999\tline",
            false,
        ),
        (
            json!({"command": "create", "path": "/memories/newlines.txt", "file_text": newlines}),
            "File created successfully at: /memories/newlines.txt",
            false,
        ),
        (
            json!({"command": "view", "path": "/memories/newlines.txt"}),
            "File /memories/newlines.txt exceeds maximum line limit of 999,999 lines.",
            true,
        ),
    ];
    for (input, want, want_error) in &steps {
        let (text, is_error) = outcome(&server.handle(input)).expect("a tool_result");
        let shown: String = input.to_string().chars().take(120).collect();
        assert_eq!(text, *want, "input: {shown}");
        assert_eq!(is_error, *want_error, "is_error for input: {shown}");
    }
    let got: BTreeMap<String, String> = server
        .files()
        .into_iter()
        .map(|r| (r.path, r.content))
        .collect();
    let want = BTreeMap::from([
        ("/memories/big.txt".to_string(), big),
        ("/memories/huge.txt".to_string(), huge),
        ("/memories/newlines.txt".to_string(), newlines),
    ]);
    assert!(got == want, "the three files are stored unchanged");
    assert_eq!(server.log_problem(steps.len() as u64), None);
}

/// §4.2 through `mnemo tool`: the 1,000,000-line create and the line-limit error.
#[test]
fn million_line_file_through_the_cli() {
    let store = TempStore::new();
    let huge = lines_of_line(1_000_000);
    let inputs = [
        json!({"command": "create", "path": "/memories/huge.txt", "file_text": huge}).to_string(),
        json!({"command": "view", "path": "/memories/huge.txt"}).to_string(),
    ];
    let out = run_tool(&store.path(), &inputs);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<(String, bool)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| outcome(&serde_json::from_str(l).expect("JSON line")).expect("a tool_result"))
        .collect();
    assert_eq!(
        results,
        [
            (
                "File created successfully at: /memories/huge.txt".to_string(),
                false
            ),
            (HUGE_LIMIT.to_string(), true),
        ]
    );
    let client = store.client();
    let record = client
        .record("/memories/huge.txt")
        .expect("read the record")
        .expect("the file exists");
    assert!(record.content == huge, "the file is stored unchanged");
    let report = client.verify().expect("verify runs");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 2);
}
