//! The diagnosis on real processes (issue 8 §2–3): a CPU-bound program dismisses every
//! I/O suspicion and is `already_optimized` only when its time is in library code; an
//! fsync writer's syncs are within the norm for local storage; threads taking turns on
//! a mutex are lock contention with the holder named; a program keeping what it
//! allocates grows steadily. Every map validates against the schema, and every hint is
//! backed by a confirmed suspicion. They need perf_event_open (root, or
//! kernel.perf_event_paranoid <= 1).

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{compile, profmap, suspicion, valid_map};
use serde_json::Value;

/// CPU-bound fixtures on a 2-core machine: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn record(out: &Path, program: &Path, args: &[&str]) -> Value {
    profmap()
        .args(["record", "-q", "--out"])
        .arg(out)
        .arg("--")
        .arg(program)
        .args(args)
        .assert()
        .success();
    let map = valid_map(out);
    check_hints(&map);
    map
}

/// Every hint names a confirmed suspicion, in order of expected gain.
fn check_hints(map: &Value) {
    let pr = &map["profile_result"];
    let sus = pr["suspicion_stack"].as_array().expect("suspicions");
    let mut last = f64::MAX;
    for h in pr["optimization_hints"].as_array().expect("hints") {
        let id = h["suspicion"].as_str().expect("a hint names its suspicion");
        let s = sus
            .iter()
            .find(|s| s["id"] == id)
            .expect("the suspicion exists");
        assert_eq!(s["verdict"], "confirmed", "{h}");
        if let Some(g) = h["expected_gain_pct"].as_f64() {
            assert!(g <= last, "hints out of order: {h}");
            last = g;
        }
    }
    let (names, evidence) = (
        pr["wrong_tool_indicators"].as_array().expect("indicators"),
        pr["wrong_tool_evidence"].as_array().expect("evidence"),
    );
    assert_eq!(names.len(), evidence.len());
}

fn indicators(map: &Value) -> Vec<String> {
    map["profile_result"]["wrong_tool_evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|w| {
            format!(
                "{}: {}",
                w["indicator"].as_str().unwrap_or(""),
                w["evidence"]
            )
        })
        .collect()
}

#[test]
fn a_cpu_bound_program_dismisses_every_io_suspicion() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let map = record(d.path(), &compile("burn", &[]), &["600"]);
    for (category, what) in [
        ("architecture", "N+1"),
        ("architecture", "sequential"),
        ("connection_management", "connection"),
    ] {
        let s = suspicion(&map, category, what).unwrap_or_else(|| panic!("{category} {what}"));
        assert_eq!(s["verdict"], "dismissed", "{s}");
    }
    // Its time is its own loop, not a library's: not already optimized.
    let ind = indicators(&map);
    assert!(
        !ind.iter().any(|i| i.starts_with("already_optimized")),
        "{ind:?}"
    );
    // The why-chain ends in the lines the CPU went to.
    let why = map["profile_result"]["top_bottlenecks"][0]["why_chain"].to_string();
    assert!(
        why.contains("in the lines ") && why.contains("burn.c:"),
        "{why}"
    );
}

#[test]
fn dd_with_512_byte_blocks_makes_many_small_calls_and_with_1m_blocks_does_not() {
    // `dd bs=512` spends most of its run entering and leaving read and write: the
    // kernel counts its calls (/proc/PID/io), the stacks the time inside them. Not
    // "already optimized", though every sample is in libc or the kernel.
    let _one = serial();
    let dd = Path::new("/bin/dd");
    let d = tempfile::tempdir().expect("tempdir");
    let small = record(
        &d.path().join("512"),
        dd,
        &["if=/dev/zero", "of=/dev/null", "bs=512", "count=200000"],
    );
    let s = suspicion(&small, "data_flow", "many small read/write calls")
        .unwrap_or_else(|| panic!("{}", small["profile_result"]["suspicion_stack"]));
    assert_eq!(s["verdict"], "confirmed", "{s}");
    let evidence = s["evidence"].as_str().unwrap_or("");
    assert!(evidence.contains("(512 bytes per call)"), "{evidence}");
    let hint = small["profile_result"]["optimization_hints"][0].to_string();
    assert!(hint.contains("larger blocks"), "{hint}");
    assert!(
        !indicators(&small)
            .iter()
            .any(|i| i.starts_with("already_optimized")),
        "{:?}",
        indicators(&small)
    );
    assert!(
        small["profile_result"]["performance_map"]["baseline"]["io_write_calls"]
            .as_u64()
            .is_some_and(|n| n >= 200_000)
    );

    let large = record(
        &d.path().join("1m"),
        dd,
        &["if=/dev/zero", "of=/dev/null", "bs=1M", "count=100"],
    );
    assert!(
        suspicion(&large, "data_flow", "many small read/write calls").is_none(),
        "{}",
        large["profile_result"]["suspicion_stack"]
    );
}

#[test]
fn a_program_whose_cpu_is_in_libc_is_already_optimized() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let map = record(d.path(), &compile("memset_loop", &[]), &["800"]);
    let ind = indicators(&map);
    assert!(
        ind.iter().any(|i| i.starts_with("already_optimized")),
        "{ind:?}"
    );
}

/// The map of tests/fixtures/c/fsync_writer.c writing `mb` MB in 64 KiB blocks, an
/// fsync after each, to a file `data.bin` in a temporary folder.
fn fsync_writer_map(mb: u32) -> Value {
    let d = tempfile::tempdir().expect("tempdir");
    let data = d.path().join("data.bin");
    record(
        &d.path().join("out"),
        &compile("fsync_writer", &[]),
        &[data.to_str().expect("utf-8"), &mb.to_string()],
    )
}

#[test]
fn fsyncs_of_normal_length_are_within_the_norm() {
    // 64 syncs (4 MB in 64 KiB blocks, ~190 waits): too few to call their number a
    // pattern.
    let _one = serial();
    let map = fsync_writer_map(4);
    let ind = indicators(&map);
    let norm = ind
        .iter()
        .find(|i| i.starts_with("within_industry_norm"))
        .unwrap_or_else(|| panic!("{ind:?}"));
    assert!(
        norm.contains("data.bin") && norm.contains("fsync"),
        "{norm}"
    );
    let why = map["profile_result"]["top_bottlenecks"][0]["why_chain"].to_string();
    assert!(why.contains("synced") && why.contains("data.bin"), "{why}");
}

#[test]
fn hundreds_of_syncs_are_the_code_s_choice_not_the_norm() {
    // 320 syncs (20 MB in 64 KiB blocks), each of normal length: syncing less often is
    // the advice, and the run is not called "within the norm".
    let _one = serial();
    let map = fsync_writer_map(20);
    let found = map["profile_result"]["suspicion_stack"]
        .as_array()
        .expect("suspicions")
        .iter()
        .find(|s| {
            s["description"]
                .as_str()
                .is_some_and(|w| w.starts_with("many syncs of "))
        })
        .unwrap_or_else(|| panic!("{:#}", map["profile_result"]["suspicion_stack"]))
        .clone();
    assert_eq!(found["verdict"], "confirmed", "{found}");
    assert!(
        found["description"]
            .as_str()
            .is_some_and(|w| w.contains("data.bin")),
        "{found}"
    );
    let ind = indicators(&map);
    assert!(
        !ind.iter()
            .any(|i| i.starts_with("within_industry_norm") && i.contains("data.bin")),
        "{ind:?}"
    );
}

#[test]
fn threads_taking_turns_on_a_mutex_are_lock_contention_with_the_holder_named() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let map = record(d.path(), &compile("lock", &[]), &[]);
    let s = suspicion(&map, "other", "lock contention").expect("lock suspicion");
    assert_eq!(s["verdict"], "confirmed", "{s}");
    assert!(
        s["location"].as_str().unwrap_or("").starts_with("worker"),
        "{s}"
    );
    let ev = s["evidence"].as_str().unwrap_or("");
    assert!(ev.contains("released mostly by hold_and_compute"), "{ev}");
}

#[test]
fn memory_kept_past_its_use_grows_steadily() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let map = record(d.path(), &compile("leak", &[]), &["40"]);
    let s = suspicion(&map, "resource_lifecycle", "growing").expect("lifecycle suspicion");
    assert_eq!(s["verdict"], "confirmed", "{s}");
    let d2 = tempfile::tempdir().expect("tempdir");
    let flat = record(d2.path(), &compile("sleeper", &[]), &[]);
    if let Some(s) = suspicion(&flat, "resource_lifecycle", "growing") {
        assert_eq!(s["verdict"], "dismissed", "{s}");
    }
}
