//! Escalation on real Python programs (issue 9 §2): a hotspot that mixes waiting and
//! computing gets a line table with the wait and the CPU on the right lines; one whose
//! cause is clear stops at Level 1; a memory-heavy script gets the tracemalloc run
//! (Level 3) naming the line that allocated; `--no-escalate` keeps the decision and
//! skips the run; sampling overhead beyond the threshold switches to traced runs of the
//! hot functions. Each decision is in the map's `escalation` list and in report.md.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{profmap, valid_map};
use serde_json::Value;

/// CPU-bound runs on a 2-core machine: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn script(name: &str) -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/python")
        .join(name);
    p.to_str().expect("utf-8").to_string()
}

/// `profmap run` (1 counted run, no warm-up) with extra arguments and environment.
fn run(args: &[&str], env: &[(&str, &str)], cmd: &[&str]) -> (tempfile::TempDir, Value, String) {
    let out = tempfile::tempdir().expect("tempdir");
    profmap()
        .envs(env.iter().copied())
        .args(["run", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(out.path())
        .args(args)
        .arg("--")
        .args(cmd)
        .assert()
        .success();
    let map = valid_map(out.path());
    let md = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    (out, map, md)
}

fn pr(map: &Value) -> &Value {
    &map["profile_result"]
}

fn decisions(map: &Value, level: u64) -> Vec<&Value> {
    pr(map)["escalation"]
        .as_array()
        .expect("escalation list")
        .iter()
        .filter(|d| d["level"] == level)
        .collect()
}

fn python3() -> &'static str {
    "python3"
}

#[test]
fn a_hotspot_mixing_sleep_and_cpu_gets_a_line_table_with_each_on_its_line() {
    let _g = serial();
    let (_o, map, md) = run(&[], &[], &[python3(), &script("mixed_wait_cpu.py"), "30"]);
    assert!(
        decisions(&map, 1)[0]["taken"] == true,
        "{:#}",
        pr(&map)["escalation"]
    );
    let l2: Vec<_> = decisions(&map, 2)
        .into_iter()
        .filter(|d| {
            d["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("poll_and_crunch ("))
        })
        .collect();
    assert_eq!(l2.len(), 1, "{:#}", pr(&map)["escalation"]);
    assert_eq!(l2[0]["taken"], true, "{:#}", l2[0]);
    assert!(
        l2[0]["reason"].as_str().unwrap().contains("mixed"),
        "{:#}",
        l2[0]
    );
    let table = pr(&map)["line_tables"]
        .as_array()
        .expect("line_tables")
        .iter()
        .find(|t| t["function"] == "poll_and_crunch")
        .unwrap_or_else(|| panic!("no line table: {:#}", pr(&map)["line_tables"]));
    let line = |n: u64| {
        table["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["line"] == n)
            .unwrap_or_else(|| panic!("no line {n}: {table:#}"))
    };
    // Line 10 is time.sleep(0.01) ×30: ~300 ms asleep, little CPU.
    let sleep = line(10);
    assert_eq!(sleep["wait_class"], "sleep", "{sleep:#}");
    let slept = sleep["waits_ms"]["sleep"].as_f64().unwrap();
    assert!((200.0..600.0).contains(&slept), "{sleep:#}");
    assert!(sleep["cpu_ms"].as_f64().unwrap() < 0.5 * slept, "{sleep:#}");
    // Line 11 computes: its time is mostly on a CPU (or waiting for one).
    let crunch = line(11);
    let wall = crunch["wall_ms"].as_f64().unwrap();
    let cpu = crunch["cpu_ms"].as_f64().unwrap();
    let runq = crunch["waits_ms"]["runqueue"].as_f64().unwrap_or(0.0);
    assert!(cpu + runq >= 0.8 * wall, "{crunch:#}");
    // A sleep's interval takes the line of the Python read nearest to it, which the
    // target (never stopped) may have reached after waking: a few stray ms at most.
    let stray = crunch["waits_ms"]["sleep"].as_f64().unwrap_or(0.0);
    assert!(stray < 0.2 * slept, "{crunch:#}");
    assert!(md.contains("### Escalation") && md.contains("#### Lines of poll_and_crunch"));
    // Memory is normal: Level 3 decided, not run.
    let l3 = decisions(&map, 3);
    assert_eq!(l3.len(), 1);
    assert_eq!(l3[0]["taken"], false, "{:#}", l3[0]);
    assert!(pr(&map)["memory_profile"].is_null());
}

#[test]
fn a_cpu_bound_hotspot_stops_at_level_one() {
    let _g = serial();
    let (_o, map, md) = run(&[], &[], &[python3(), &script("three_funcs.py"), "60000"]);
    // The Python reader's figures: reads made without pausing, most samples of the
    // interpreter in the evaluation loop given its Python stack (89-95% of a 0.7 s run
    // under a load of 4: those before the interpreter is attached have none).
    let py = &pr(&map)["measurement_quality"]["python"];
    assert!(py["reads"].as_u64().unwrap() > 10, "{py:#}");
    assert_eq!(py["target_paused"], false, "{py:#}");
    assert!(py["merged_pct"].as_f64().unwrap() > 75.0, "{py:#}");
    assert!(
        py["interpreters"][0]
            .as_str()
            .unwrap()
            .starts_with("CPython 3."),
        "{py:#}"
    );
    assert!(
        md.contains("| Python reads (not pausing the target) |"),
        "{md}"
    );
    let alpha: Vec<_> = decisions(&map, 2)
        .into_iter()
        .filter(|d| {
            d["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("alpha ("))
        })
        .collect();
    assert_eq!(alpha.len(), 1, "{:#}", pr(&map)["escalation"]);
    assert_eq!(alpha[0]["taken"], false, "{:#}", alpha[0]);
    assert!(
        alpha[0]["reason"].as_str().unwrap().contains("on a CPU"),
        "{:#}",
        alpha[0]
    );
    assert!(
        !pr(&map)["line_tables"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"] == "alpha")),
        "{:#}",
        pr(&map)["line_tables"]
    );
}

#[test]
fn a_memory_heavy_script_gets_allocations_per_line() {
    let _g = serial();
    let (_o, map, md) = run(&[], &[], &[python3(), &script("memory_hog.py")]);
    let l3 = decisions(&map, 3);
    assert_eq!(l3[0]["taken"], true, "{:#}", pr(&map)["escalation"]);
    assert!(
        l3[0]["reason"].as_str().unwrap().contains("≥ 200 MiB"),
        "{:#}",
        l3[0]
    );
    let procs = pr(&map)["memory_profile"]["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no memory profile: {:#}", pr(&map)));
    let top = &procs[0]["at_peak"][0];
    assert!(
        top["file"].as_str().unwrap().ends_with("memory_hog.py") && top["line"] == 8,
        "{:#}",
        procs[0]
    );
    // ~300 000 strings of ~900 bytes: 250-300 MiB held by that line at the snapshot.
    let mib = top["bytes"].as_f64().unwrap() / 1048576.0;
    assert!((150.0..400.0).contains(&mib), "{mib} MiB: {:#}", procs[0]);
    assert!(procs[0]["peak_bytes"].as_f64().unwrap() >= top["bytes"].as_f64().unwrap());
    assert!(md.contains("#### Memory by line") && md.contains("memory_hog.py:8"));
}

#[test]
fn no_escalate_keeps_the_decision_and_skips_the_run() {
    let _g = serial();
    let (_o, map, _) = run(
        &["--no-escalate"],
        &[],
        &[python3(), &script("memory_hog.py"), "250000"],
    );
    let l3 = decisions(&map, 3);
    assert_eq!(l3[0]["taken"], false, "{:#}", l3[0]);
    assert!(
        l3[0]["reason"].as_str().unwrap().contains("--no-escalate"),
        "{:#}",
        l3[0]
    );
    assert!(pr(&map)["memory_profile"].is_null());
}

#[test]
fn sampling_overhead_beyond_the_threshold_switches_to_traced_runs() {
    let _g = serial();
    // A threshold no run can stay under forces the switch.
    let (_o, map, md) = run(
        &[],
        &[("PROFMAP_ESCALATE_OVERHEAD_PCT", "-1000")],
        // Long enough that the ranking rests on more than a few samples (30000 once
        // gave `beta` alone).
        &[python3(), &script("three_funcs.py"), "150000"],
    );
    let stop = decisions(&map, 0);
    assert_eq!(stop.len(), 1, "{:#}", pr(&map)["escalation"]);
    assert_eq!(stop[0]["taken"], true, "{:#}", stop[0]);
    let target = stop[0]["target"].as_str().unwrap();
    assert!(target.contains("three_funcs.py:alpha"), "{target}");
    // three_funcs calls alpha 10 times per run.
    let traced = pr(&map)["traced_functions"].as_array().expect("traced");
    let alpha = traced
        .iter()
        .find(|t| t["function"] == "alpha")
        .unwrap_or_else(|| panic!("{traced:#?}"));
    assert_eq!(alpha["calls_per_run"], 10.0, "{alpha:#}");
    assert!(md.contains("stop rule") && md.contains("Traced functions"));
}
