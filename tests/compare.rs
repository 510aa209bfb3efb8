//! `profmap compare`: real before/after sessions of tests/fixtures/c/two_funcs.c, whose
//! func_one does twice the work in `two_funcs 6 3` as in `two_funcs 3 3` (func_two the
//! same), each side profiled with `profmap run --runs 3 --warmup 1`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

/// The sessions every test compares, profiled once: before `3 3` and after `6 3`
/// (5 runs each), again `3 3` (3 runs).
struct Sessions {
    _dir: tempfile::TempDir,
    before: PathBuf,
    after: PathBuf,
    again: PathBuf,
}

fn run_side(dir: &Path, name: &str, bin: &Path, a: &str, b: &str) -> PathBuf {
    run_side_n(dir, name, bin, a, b, "3")
}

/// `profmap run --runs RUNS --warmup 1 -- two_funcs A B` into DIR/NAME.
fn run_side_n(dir: &Path, name: &str, bin: &Path, a: &str, b: &str, runs: &str) -> PathBuf {
    let out = dir.join(name);
    common::profmap()
        .args(["run", "--runs", runs, "--warmup", "1", "-q", "--out"])
        .arg(&out)
        .arg("--")
        .arg(bin)
        .args([a, b])
        .assert()
        .success();
    out
}

fn sessions() -> &'static Sessions {
    static S: OnceLock<Sessions> = OnceLock::new();
    S.get_or_init(|| {
        let _serial = common::sampling::serial();
        let bin = common::compile("two_funcs", &[]);
        let dir = tempfile::tempdir().expect("tmp");
        Sessions {
            // 5 runs a side: with 3, a build starting on this shared 2-core machine
            // during one side can leave a real +40% short of p < 0.05 (the tool then
            // says how many runs would resolve it, which is right but not this test).
            before: run_side_n(dir.path(), "before", &bin, "3", "3", "5"),
            after: run_side_n(dir.path(), "after", &bin, "6", "3", "5"),
            again: run_side(dir.path(), "again", &bin, "3", "3"),
            _dir: dir,
        }
    })
}

/// Run `compare BEFORE AFTER --json` with extra args: (exit code, compare.json, stderr).
fn compare(before: &Path, after: &Path, out: &Path, extra: &[&str]) -> (i32, Value, String) {
    let o = common::profmap()
        .arg("compare")
        .arg(before)
        .arg(after)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .args(extra)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let json: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is compare.json ({e}); stderr: {stderr}"));
    let file = common::read_json(&out.join("compare.json"));
    assert_eq!(json, file, "--json prints compare.json");
    validate(&json);
    (o.status.code().unwrap_or(-1), json, stderr)
}

fn validate(doc: &Value) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/compare.schema.json");
    let v = jsonschema::validator_for(&common::read_json(&p)).expect("schema compiles");
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "compare.json invalid: {errors:?}");
}

fn metric<'a>(c: &'a Value, key: &str) -> &'a Value {
    c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == key)
        .unwrap()
}

/// On this 2-CPU VM one profiled run in four or five measured func_one's doubled work
/// as only +56-59% (70 -> 111 ms, z 2.7-2.8, short of 3.29) with the machine otherwise
/// idle. So up to three fresh pairs are tried back to back, as for the same program
/// twice below, and one must name func_one a significant change — a tool that never
/// did still fails, and every other figure is checked on the pair that did.
#[test]
fn a_doubled_function_is_the_largest_significant_change_and_fails_the_gate() {
    let s = sessions();
    let bin = common::compile("two_funcs", &[]);
    let dir = tempfile::tempdir().unwrap();
    let gate = ["--fail-if-slower", "20"];
    let mut out = dir.path().join("c0");
    let (mut code, mut c, mut stderr) = compare(&s.before, &s.after, &out, &gate);
    for attempt in 1..3 {
        if c["functions"][0]["significant"] == true {
            break;
        }
        eprintln!("attempt {attempt}: not significant: {}", c["functions"][0]);
        let _serial = common::sampling::serial();
        let b = run_side_n(dir.path(), &format!("b{attempt}"), &bin, "3", "3", "5");
        let a = run_side_n(dir.path(), &format!("a{attempt}"), &bin, "6", "3", "5");
        out = dir.path().join(format!("c{attempt}"));
        (code, c, stderr) = compare(&b, &a, &out, &gate);
    }
    let f = &c["functions"][0];
    assert!(
        f["function"].as_str().unwrap().starts_with("func_one"),
        "largest change: {f}"
    );
    assert_eq!(f["significant"], true, "{f}");
    // func_one's own CPU time doubles: +100% within honest tolerance.
    let pct = f["self_cpu"]["change_pct"].as_f64().unwrap();
    assert!(
        (60.0..=140.0).contains(&pct),
        "func_one self CPU change {pct}%"
    );
    let wall = metric(&c, "wall_ms");
    assert_eq!(wall["verdict"], "slower", "{wall}");
    assert_eq!(c["verdict"], "slower");
    assert_eq!(code, 1, "--fail-if-slower 20 trips: {stderr}");
    assert!(stderr.contains("slower"), "{stderr}");
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let first = md.lines().find(|l| l.starts_with("**")).unwrap();
    assert!(first.contains("wall time: slower"), "{md}");
    assert!(md.contains("func_one"), "{md}");
    let step = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["path"].as_str().unwrap().ends_with(";func_one"))
        .unwrap_or_else(|| panic!("func_one's step: {}", c["steps"]));
    let (b, a) = (
        step["before_cpu_ms"].as_f64().unwrap(),
        step["after_cpu_ms"].as_f64().unwrap(),
    );
    assert!(a > 1.5 * b, "func_one's step CPU {b} → {a} ms");
    assert!(md.contains("### Steps"), "{md}");
    let svg = std::fs::read_to_string(out.join("flamegraph-diff.svg")).unwrap();
    assert!(
        svg.contains("func_one") && svg.contains("<svg"),
        "differential flamegraph"
    );
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(
        html.contains("<iframe") && html.contains("srcdoc="),
        "flamegraph in an iframe"
    );
}

/// The same program twice. Five engineers build on this 2-core machine: a build that
/// starts between the two sides can slow one side's wall time for real (the verdict is
/// then right to say slower). So up to three fresh pairs are tried back to back, and
/// one must be judged "no significant change" — a tool that always said "slower" (or
/// the 2x test's tool that never did) still fails.
#[test]
fn the_same_program_twice_is_no_significant_change() {
    let s = sessions();
    let bin = common::compile("two_funcs", &[]);
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for attempt in 0..3 {
        let (before, again) = if attempt == 0 {
            (s.before.clone(), s.again.clone())
        } else {
            let _serial = common::sampling::serial();
            let b = run_side(dir.path(), &format!("b{attempt}"), &bin, "3", "3");
            (
                b,
                run_side(dir.path(), &format!("a{attempt}"), &bin, "3", "3"),
            )
        };
        let out = dir.path().join(format!("c{attempt}"));
        let (code, c, stderr) = compare(&before, &again, &out, &["--fail-if-slower", "20"]);
        assert!(
            c["warnings"].as_array().unwrap().is_empty(),
            "same command: no warning: {}",
            c["warnings"]
        );
        let wall = metric(&c, "wall_ms");
        if wall["verdict"] == "no_significant_change" {
            assert_eq!(code, 0, "{stderr}");
            assert!(stderr.contains("no significant change"), "{stderr}");
            return;
        }
        seen.push(wall.clone());
    }
    panic!("the same program was judged changed three times: {seen:?}");
}

#[test]
fn different_commands_are_compared_with_a_warning() {
    let s = sessions();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    common::profmap()
        .args(["bench", "--runs", "2", "--warmup", "0", "-q", "--out"])
        .arg(&other)
        .args(["--", "true"])
        .assert()
        .success();
    let (code, c, stderr) = compare(&other, &s.before, &dir.path().join("c"), &[]);
    assert_eq!(code, 0);
    let kinds: Vec<&str> = c["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"different_commands"), "{kinds:?}");
    assert!(stderr.contains("different commands"), "{stderr}");
}

#[test]
fn a_bench_folder_gives_a_baseline_only_comparison() {
    let s = sessions();
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    let bin = common::compile("two_funcs", &[]);
    {
        let _serial = common::sampling::serial();
        common::profmap()
            .args(["bench", "--runs", "3", "--warmup", "1", "-q", "--out"])
            .arg(&bench)
            .arg("--")
            .arg(&bin)
            .args(["3", "3"])
            .assert()
            .success();
    }
    for round in ["with its recording", "with baseline.json only"] {
        let out = dir.path().join(round.replace(' ', "_"));
        let (code, c, stderr) = compare(&bench, &s.before, &out, &[]);
        assert_eq!(code, 0, "{round}: {stderr}");
        assert_eq!(c["baseline_only"], true, "{round}");
        assert!(c["functions"].as_array().unwrap().is_empty(), "{round}");
        assert!(metric(&c, "wall_ms")["before_median"].as_f64().unwrap() > 0.0);
        assert!(
            stderr.contains("baseline-only comparison"),
            "{round}: {stderr}"
        );
        assert!(!out.join("flamegraph-diff.svg").exists(), "{round}");
        if round == "with its recording" {
            std::fs::remove_file(bench.join("profile.pmr")).expect("the bench recording");
        }
    }
}

#[test]
fn a_corrupt_recording_is_exit_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("profile.json.gz"), b"\x1f\x8bnot really gzip").unwrap();
    let o = common::profmap()
        .arg("compare")
        .arg(&bad)
        .arg(&bad)
        .arg("--out")
        .arg(dir.path().join("c"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&bad.join("profile.json.gz").display().to_string()),
        "{stderr}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = common::profmap()
        .arg("compare")
        .arg(&empty)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds no recording"));
}
