//! Measurement quality and terminal hygiene through the binary: fixtures made to trip
//! each warning on a real run (too few samples, a stack copy too small, a baseline
//! whose runs differ), and stdout left to the target alone.
//!
//! Every rule is also unit-tested at its threshold on constructed recordings
//! (`src/report/quality_tests.rs`); lost samples are checked here only when the kernel
//! did lose some, which depends on the machine's speed.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::{compile, profmap, read_json, valid_map};
use serde_json::Value;

/// Profiles run one at a time: side by side on two cores they preempt one another.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn quality_warnings(map: &Value) -> Vec<String> {
    map["profile_result"]["measurement_quality"]["warnings"]
        .as_array()
        .expect("measurement_quality.warnings")
        .iter()
        .map(|w| w.as_str().expect("a string").to_string())
        .collect()
}

/// The one warning containing `needle`, from measurement_quality; it must also be among
/// the session's warnings (report.md, summary.json).
fn warning_with(map: &Value, needle: &str) -> String {
    let found: Vec<String> = quality_warnings(map)
        .into_iter()
        .filter(|w| w.contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "'{needle}' in {:?}", quality_warnings(map));
    let top = &map["profile_result"]["warnings"];
    assert!(
        top.as_array()
            .is_some_and(|l| l.iter().any(|w| w.as_str() == Some(found[0].as_str()))),
        "not among the session's warnings: {top}"
    );
    found[0].clone()
}

#[test]
fn a_target_too_short_to_sample_gets_no_verdict() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let out = profmap()
        .args(["run", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "true"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let map = valid_map(d.path());
    let pr = &map["profile_result"];
    assert_eq!(pr["bottleneck_classification"], "Unknown");
    let detail = pr["bottleneck_detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("only ")
            && detail.contains("too few for a verdict; run longer or raise --frequency"),
        "{detail}"
    );
    assert_eq!(pr["top_bottlenecks"], serde_json::json!([]));
    assert_eq!(
        pr["performance_map"]["bottleneck_classification"],
        "Unknown"
    );
    let w = warning_with(&map, "too few for a verdict");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("warning: {w}")), "{stderr}");
    assert!(
        stderr.contains("classification: Unknown — only "),
        "{stderr}"
    );
    let summary = read_json(&d.path().join("summary.json"));
    assert_eq!(summary["classification"], "Unknown");
    let report = std::fs::read_to_string(d.path().join("report.md")).expect("report.md");
    assert!(report.contains(&w), "report.md lacks the warning");
}

#[test]
fn a_stack_copy_too_small_for_a_deep_recursion_is_flagged_with_the_fix() {
    let _one = serial();
    let bin = compile("recurse", &[]);
    let d = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["record", "-q", "--stack-bytes", "1024", "--out"])
        .arg(d.path())
        .arg("--")
        .arg(&bin)
        .args(["200", "200"])
        .assert()
        .success();
    let map = valid_map(d.path());
    let w = warning_with(&map, "were cut where the copy of the user stack ended");
    assert!(w.contains("raise --stack-bytes (up to 65528)"), "{w}");
    let mq = &map["profile_result"]["measurement_quality"];
    assert!(mq["truncated_stacks"].as_u64().unwrap_or(0) > 0, "{mq}");
    // With a full-size copy the same program unwinds (no truncation warning).
    let d2 = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["record", "-q", "--out"])
        .arg(d2.path())
        .arg("--")
        .arg(&bin)
        .args(["200", "200"])
        .assert()
        .success();
    let map = valid_map(d2.path());
    let cut: Vec<String> = quality_warnings(&map)
        .into_iter()
        .filter(|w| w.contains("were cut"))
        .collect();
    assert!(cut.is_empty(), "{cut:?}");
}

#[test]
fn sampling_at_20_khz_with_full_stack_copies_is_flagged_as_overhead() {
    let _one = serial();
    let bin = compile("recurse", &[]);
    let d = tempfile::tempdir().expect("tempdir");
    profmap()
        .args([
            "run",
            "-q",
            "--frequency",
            "20000",
            "--stack-bytes",
            "65528",
            "--out",
        ])
        .arg(d.path())
        .arg("--")
        .arg(&bin)
        .args(["200", "200"])
        .assert()
        .success();
    let map = valid_map(d.path());
    let mq = &map["profile_result"]["measurement_quality"];
    // On a quiet 2-core VM this costs 150-250%; 10% is the threshold. Under other load
    // the baseline runs slow down too (27% was seen with two compilers running), so
    // only the threshold is asserted. Where the buffers overflow instead, the dropped
    // records cut the cost (6% with 37% of records lost on a 2-CPU Xeon VM): then the
    // lost-records warning must carry the same advice.
    let lost = mq["lost_samples"].as_u64().expect("lost_samples");
    let overhead = mq["overhead_pct"].as_f64().unwrap_or(0.0);
    if overhead > 10.0 {
        let w = warning_with(&map, "longer than the baseline median");
        assert!(w.contains("lower --frequency or --stack-bytes"), "{w}");
    } else {
        let share = lost as f64 / (lost + mq["samples"].as_u64().unwrap_or(0)).max(1) as f64;
        assert!(
            share > 0.1,
            "neither overhead nor lost records flagged: {mq}"
        );
    }
    if lost > 0 {
        let w = warning_with(&map, " lost (");
        assert!(w.starts_with(&format!("{lost} record")), "{w}");
        assert!(w.contains("lower --frequency"), "{w}");
    }
}

#[test]
fn a_baseline_whose_runs_differ_names_the_machine_load() {
    let d = tempfile::tempdir().expect("tempdir");
    let flag = d.path().join("ran-once");
    // 0.1 s the first time, 0.5 s after.
    let script = format!(
        "if [ -e '{f}' ]; then sleep 0.5; else touch '{f}'; sleep 0.1; fi",
        f = flag.display()
    );
    let out = profmap()
        .args(["bench", "--runs", "3", "--warmup", "0", "--out"])
        .arg(d.path().join("out"))
        .args(["--", "sh", "-c", &script])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let map = valid_map(&d.path().join("out"));
    let w = warning_with(&map, "baseline wall time ranges from");
    for part in ["load average", "ms of CPU during the", "--runs"] {
        assert!(w.contains(part), "'{part}' missing: {w}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("warning: {w}")), "{stderr}");
    let rec = profmap::profile::read_recording(&d.path().join("out/profile.pmr"))
        .expect("recording reads");
    let load = rec
        .baseline
        .and_then(|b| b.machine_load)
        .expect("machine load recorded");
    assert!(load.window_ms >= 600.0, "{load:?}");
}

#[test]
fn stdout_carries_only_the_targets_output() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let out = profmap()
        .args(["run", "--runs", "3", "--warmup", "1", "--out"])
        .arg(d.path())
        .args(["--", "printf", "x"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    // 1 warm-up + 3 counted runs + 1 profiled run, and nothing of profmap's.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "xxxxx");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("classification: ") && stderr.contains("report: "),
        "{stderr}"
    );

    // --json: stdout is the map alone; the target's output goes to stderr.
    let out = profmap()
        .args(["run", "--json", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "printf", "x"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is exactly the map");
    common::assert_valid(&doc);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("xx"), "{stderr}");
}

#[test]
fn a_closed_stdout_does_not_panic() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    // stdout is a pipe whose reader is gone: every write to it fails with EPIPE.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    // Without --json the summary table used to go to stdout, and `print!` panicked.
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("profmap"))
        .args(["run", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "printf", "x"])
        .stdout(writer)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
