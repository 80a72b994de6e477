//! Legal but pathological input: no call may cost more than near-linear time in its input, the
//! file it touches and the text it returns, because every call runs under the one writer lock.
//!
//! Tests:
//! - `pathological_str_replace_on_a_megabyte`: files of one repeated byte, of `ab` and of `a\n`,
//!   a megabyte each, against `old_str`s of half a megabyte that occur (overlapping) at hundreds of
//!   thousands of places, in both profiles; each call must give the exact text and finish within
//!   2 s (plus twenty times what a `create` and a `view` of the same file took, on a busy
//!   machine). Restarting the search at every match made one such call take minutes.
//! - `pathological_sequences_stay_near_linear`: proptest over call sequences on large periodic
//!   files (many matches, long lines, a file of newlines; inserts at the first, a middle and the
//!   last line; views with and without ranges and a view cap). Each call's time is held to a bound
//!   proportional to its size (input, file and answer), scaled by the per-byte time of a `create`
//!   and a plain `view` of the case's own file (measured again before a call is failed, in case the
//!   machine got busier); at the end `verify` must report an intact log.
//!   `MNEMO_PATHOLOGICAL_CASES` sets the number of cases (16).
//!
//! The cost is the pure core's, so both run on it over an in-memory tree; the megabyte cases in
//! the python-sdk profile and the sled sample of the proptest's cases run through sled as well.

use std::time::{Duration, Instant};

use mnemo::Profile;
use mnemo::testing::intake::Intake;
use mnemo::tool::Limits;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

use crate::support::{Host, PureServer, SledServer, call, in_sled_sample, settings};

const PATH: &str = "/memories/f";

/// `server.handle(input)` with its wall time.
fn timed(server: &dyn Host, input: Value) -> (String, bool, Duration) {
    let start = Instant::now();
    let (out, is_error) = call(server, input);
    (out, is_error, start.elapsed())
}

/// The "Multiple occurrences" list of `entries`: joined by `, ` for as long as the list stays
/// within 64 KiB, then how many there are in all.
fn capped_list(entries: &[String]) -> String {
    let mut shown = String::new();
    for entry in entries {
        let sep = if shown.is_empty() { "" } else { ", " };
        if shown.len() + sep.len() + entry.len() > 64 * 1024 {
            return format!("{shown}, … ({} in all)", entries.len());
        }
        shown.push_str(sep);
        shown.push_str(entry);
    }
    shown
}

/// `count` copies of `item`, as the list shows them.
fn listed(item: &str, count: usize) -> String {
    capped_list(&vec![item.to_string(); count])
}

/// How an error repeats a piece of the input: whole up to 4 KiB, else its first 256 bytes and
/// its length (these pieces are ASCII, so 256 bytes is a character boundary).
fn echoed(text: &str) -> String {
    if text.len() <= 4096 {
        text.to_string()
    } else {
        format!("{}… ({} bytes in all)", &text[..256], text.len())
    }
}

fn several(old: &str, lines: &str) -> String {
    format!(
        "No replacement was performed. Multiple occurrences of old_str `{}` in lines: {lines}. Please ensure it is unique",
        echoed(old)
    )
}

// ---------------------------------------------------------------------------------------------
// A megabyte, fixed shapes
// ---------------------------------------------------------------------------------------------

/// The most one call may take on an idle machine. A debug build answers each of these in well
/// under a tenth of it; the scan that restarted at every match took minutes for the first one.
const CALL_BOUND: Duration = Duration::from_secs(2);

/// [`CALL_BOUND`], plus twenty times what a linear call on the same file took just now (its
/// `create` and a `view`), so a busy machine does not fail a call that is fast.
fn call_bound(server: &dyn Host, path: &str, create: Duration) -> Duration {
    let (out, is_error, view) = timed(server, json!({"command": "view", "path": path}));
    assert!(!is_error, "view: {out:.300}");
    CALL_BOUND + (create + view) * 20
}

#[test]
fn pathological_str_replace_on_a_megabyte() {
    const MB: usize = 1_000_000;
    let a = "a".repeat(MB);
    let half = "a".repeat(MB / 2);
    let ab = "ab".repeat(MB / 2);
    let ab_half = "ab".repeat(MB / 4);
    let lines = "a\n".repeat(MB / 2);
    let lines_half = "a\n".repeat(MB / 4);
    let numbered: Vec<String> = (1..=MB / 4 + 1).map(|n| n.to_string()).collect();
    let numbered = capped_list(&numbered);
    let longer = "a".repeat(MB / 2 + 1);
    let edited = format!("X{}", "a".repeat(MB / 2 - 1));
    let missing = format!("{half}b");

    // (file, old_str, spec's answer, python-sdk's answer, is_error)
    let cases: Vec<(&str, &str, String, String, bool)> = vec![
        // 500,001 overlapping matches, all on line 1.
        (
            &a,
            &half,
            several(&half, "1"),
            several(&half, &listed("1", MB / 2 + 1)),
            true,
        ),
        // Matches at every other byte: 250,001 of them.
        (
            &ab,
            &ab_half,
            several(&ab_half, "1"),
            several(&ab_half, &listed("1", MB / 4 + 1)),
            true,
        ),
        // One match per line for 250,001 lines.
        (
            &lines,
            &lines_half,
            several(&lines_half, &numbered),
            several(&lines_half, &numbered),
            true,
        ),
        // Half a million overlapping matches but only one without overlap: replaced.
        (
            &a,
            &longer,
            format!("The memory file has been edited.\n     1\t{edited}"),
            format!(
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t{edited}"
            ),
            false,
        ),
        // Nearly matches everywhere, never quite.
        (
            &a,
            &missing,
            format!(
                "No replacement was performed, old_str `{}` did not appear verbatim in {PATH}.",
                echoed(&missing)
            ),
            format!(
                "No replacement was performed, old_str `{}` did not appear verbatim in {PATH}.",
                echoed(&missing)
            ),
            true,
        ),
    ];

    for (profile, on_sled) in [
        (Profile::Spec, false),
        (Profile::PythonSdk, false),
        (Profile::PythonSdk, true),
    ] {
        let server: Box<dyn Host> = if on_sled {
            Box::new(SledServer::new(&settings(profile)))
        } else {
            Box::new(PureServer::with(&settings(profile)))
        };
        let server = &*server;
        for (i, (file, old, spec, sdk, want_error)) in cases.iter().enumerate() {
            let path = format!("{PATH}{i}");
            let (out, is_error, create) = timed(
                server,
                json!({"command": "create", "path": path, "file_text": file}),
            );
            assert!(!is_error, "create: {out}");
            let bound = call_bound(server, &path, create);
            let (out, is_error, took) = timed(
                server,
                json!({"command": "str_replace", "path": path, "old_str": old, "new_str": "X"}),
            );
            let want = if profile == Profile::Spec { spec } else { sdk }.replace(PATH, &path);
            assert!(
                is_error == *want_error && out == want,
                "{profile:?} on {} case {i}: unexpected answer (is_error={is_error}): {:.300}",
                server.name(),
                out
            );
            assert!(
                took < bound,
                "{profile:?} case {i}: str_replace on {} bytes took {took:?}, over {bound:?}",
                file.len()
            );
        }
        if profile == Profile::PythonSdk {
            // An empty old_str matches at every character boundary: 1,000,001 lines listed.
            let bound = call_bound(server, &format!("{PATH}0"), Duration::ZERO);
            let (out, is_error, took) = timed(
                server,
                json!({"command": "str_replace", "path": format!("{PATH}0"), "old_str": "", "new_str": "X"}),
            );
            assert!(is_error && out == several("", &listed("1", MB + 1)));
            assert!(took < bound, "empty old_str took {took:?}, over {bound:?}");
        }
        // The verifier re-answers every call (and the pure harness's log check, as it does): it
        // must not pay the old cost either.
        let bound = call_bound(server, &format!("{PATH}0"), Duration::ZERO) * 4;
        let start = Instant::now();
        // Each case is a create, a view and a str_replace; then the empty old_str's view and
        // str_replace, and the view for the bound.
        let calls = 3 * cases.len() + 2 * usize::from(profile == Profile::PythonSdk) + 1;
        let problem = server.log_problem(calls as u64);
        assert_eq!(problem, None, "{}", server.name());
        assert!(
            start.elapsed() < bound,
            "verify took {:?}, over {bound:?}",
            start.elapsed()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Adversarial sequences
// ---------------------------------------------------------------------------------------------

/// What the files are made of: one repeated byte, short periods, a multi-byte character, and
/// units with newlines (one with a line per byte).
const UNITS: [&str; 7] = ["a", "ab", "aab", "é", "a\n", "\n", "ab\na"];

/// Replacement texts.
const NEWS: [&str; 4] = ["", "X", "a", "X\nY"];

/// Where in the file an insert or a view range goes.
#[derive(Clone, Copy, Debug)]
enum Place {
    First,
    Middle,
    Last,
}

#[derive(Clone, Debug)]
enum Op {
    /// `str_replace` of `len` characters of the original file from character `turn` on, so it
    /// matches at most of the file's periods.
    Replace {
        turn: usize,
        len: usize,
        new: &'static str,
    },
    /// `insert` of a line of `len` bytes.
    Insert { at: Place, len: usize },
    /// `view`, of the whole file or from a line to the end.
    View { from: Option<Place> },
}

#[derive(Clone, Debug)]
struct Case {
    sdk: bool,
    unit: &'static str,
    /// Repetitions of the unit.
    repeats: usize,
    /// The view cap, when there is one.
    cap: Option<u64>,
    ops: Vec<Op>,
}

fn place() -> impl Strategy<Value = Place> {
    prop_oneof![Just(Place::First), Just(Place::Middle), Just(Place::Last)]
}

fn op(max_len: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4, 0..=max_len, proptest::sample::select(&NEWS[..]))
            .prop_map(|(turn, len, new)| Op::Replace { turn, len, new }),
        2 => (place(), 0usize..100_000).prop_map(|(at, len)| Op::Insert { at, len }),
        2 => proptest::option::of(place()).prop_map(|from| Op::View { from }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        proptest::sample::select(&UNITS[..]),
        100_000usize..300_000,
        proptest::option::of(prop_oneof![Just(50u64), Just(1_000), Just(1 << 20)]),
    )
        .prop_flat_map(|(sdk, unit, bytes, cap)| {
            let repeats = bytes / unit.len();
            let chars = repeats * unit.chars().count();
            proptest::collection::vec(op(chars * 3 / 4), 1..6).prop_map(move |ops| Case {
                sdk,
                unit,
                repeats,
                cap,
                ops,
            })
        })
}

/// Seconds per byte of a linear-time call on this machine, now: the larger of what a `create` of
/// `created` bytes took and what a plain `view` of the file, through `plain`, takes per byte read
/// and returned.
fn rate(plain: &dyn Host, created: Option<(Duration, usize)>, file: usize) -> f64 {
    let (out, is_error, took) = timed(plain, json!({"command": "view", "path": PATH}));
    assert!(!is_error, "baseline view: {out:.300}");
    let view = took.as_secs_f64() / (file + out.len()) as f64;
    created.map_or(view, |(took, bytes)| {
        view.max(took.as_secs_f64() / bytes as f64)
    })
}

/// How long a call on `size` bytes may take at `rate`: fifty times the baseline, plus a fixed
/// allowance. The restarting scan exceeded this by orders of magnitude on every large
/// `str_replace` with many matches.
fn allowed(rate: f64, size: usize) -> Duration {
    Duration::from_millis(150) + Duration::from_secs_f64(50.0 * rate * size as f64)
}

/// The 1-based line `at` names in a file of `lines` lines (for `insert`, 0 is before the first).
fn line_at(at: Place, lines: usize, for_insert: bool) -> usize {
    match at {
        Place::First => usize::from(!for_insert),
        Place::Middle => lines / 2,
        Place::Last => lines,
    }
}

/// Lines of `content` as `insert` counts them.
fn insert_lines(content: &str) -> usize {
    let newlines = content.matches('\n').count();
    newlines + usize::from(!content.is_empty() && !content.ends_with('\n'))
}

/// Runs `case` on the pure core and, when it is in the sled sample, through sled as well.
fn run_case(case: &Case) -> Result<(), TestCaseError> {
    let profile = if case.sdk {
        Profile::PythonSdk
    } else {
        Profile::Spec
    };
    let limits = Limits {
        view_max_chars: case.cap,
        ..Limits::default()
    };
    let intake = Intake::new("/memories", profile, limits).expect("a valid root");
    run_case_on(&PureServer::with(&intake), profile, case)?;
    if in_sled_sample(&format!("{case:?}")) {
        run_case_on(&SledServer::new(&intake), profile, case)?;
    }
    Ok(())
}

fn run_case_on(server: &dyn Host, profile: Profile, case: &Case) -> Result<(), TestCaseError> {
    // The baseline views run without the cap, so they return the whole file.
    let plain = server.sharing(&settings(profile));
    let plain = &*plain;
    let original = case.unit.repeat(case.repeats);
    let create = json!({"command": "create", "path": PATH, "file_text": original});
    let create_len = create.to_string().len();
    let (out, is_error, took) = timed(server, create);
    prop_assert!(!is_error, "create: {}", out);
    let mut rate = rate(plain, Some((took, create_len)), original.len());
    // The create and the baseline view, then one call per op and one per baseline measured again.
    let mut calls = 2;
    for op in &case.ops {
        let content = server.file(PATH).unwrap_or_default();
        let input = match *op {
            Op::Replace { turn, len, new } => {
                let old: String = original.chars().skip(turn).take(len).collect();
                json!({"command": "str_replace", "path": PATH, "old_str": old, "new_str": new})
            }
            Op::Insert { at, len } => json!({
                "command": "insert",
                "path": PATH,
                "insert_line": line_at(at, insert_lines(&content), true),
                "insert_text": "x".repeat(len),
            }),
            Op::View { from: None } => json!({"command": "view", "path": PATH}),
            Op::View { from: Some(at) } => {
                let lines = content.matches('\n').count() + 1;
                json!({"command": "view", "path": PATH, "view_range": [line_at(at, lines, false), -1]})
            }
        };
        let input_len = input.to_string().len();
        let (out, _, took) = timed(server, input);
        calls += 1;
        let size = input_len + content.len() + out.len();
        if took > allowed(rate, size) {
            // Perhaps the machine got busier: measure the baseline again, on the file as it is.
            let now = server.file(PATH).map_or(0, |content| content.len());
            rate = rate.max(self::rate(plain, None, now));
            calls += 1;
        }
        prop_assert!(
            took <= allowed(rate, size),
            "{:?} on a {}-byte file ({} bytes in and out) took {:?}, over {:?}",
            op,
            content.len(),
            size,
            took,
            allowed(rate, size)
        );
    }
    let problem = server.log_problem(calls);
    prop_assert!(problem.is_none(), "{}: {:?}", server.name(), problem);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("MNEMO_PATHOLOGICAL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    // A failure here is a slow call: shrinking re-runs slow cases, so it stops early.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 16,
        ..ProptestConfig::default()
    })]

    #[test]
    fn pathological_sequences_stay_near_linear(case in case()) {
        run_case(&case)?;
    }
}
