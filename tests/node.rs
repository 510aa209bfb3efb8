//! A Node.js program's JavaScript, named: `profmap run` of `node` adds V8's JIT-map flags
//! to the profiled run's NODE_OPTIONS (not the baseline's), reads the map, removes it.
//! Skipped, saying why, when no Node 16 or newer is installed.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::time::SystemTime;

use common::{profmap, valid_map};

/// Node's major version, when `node` runs.
fn node_major() -> Option<u32> {
    let out = std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim().strip_prefix('v')?.split('.').next()?.parse().ok()
}

/// The JIT maps written in /tmp since `since`.
fn maps_since(since: SystemTime) -> Vec<String> {
    std::fs::read_dir("/tmp")
        .expect("/tmp")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("perf-") && n.ends_with(".map")
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= since)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_node_program_s_hot_javascript_function_is_named_with_its_file_and_line() {
    match node_major() {
        Some(m) if m >= 16 => {}
        other => {
            eprintln!("skipped: needs node 16 or newer (found {other:?})");
            return;
        }
    }
    let d = tempfile::tempdir().expect("tmp");
    let cwd = tempfile::tempdir().expect("tmp");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/js/hot.js");
    let since = SystemTime::now();
    profmap()
        .current_dir(cwd.path())
        .args(["run", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .arg("--")
        .arg("node")
        .arg(&script)
        .assert()
        .success();
    let map = valid_map(d.path());
    let r = &map["profile_result"];
    let top = &r["top_bottlenecks"][0];
    assert_eq!(top["function"], "slowSum", "{top}");
    let slow = r["hotspots"]
        .as_array()
        .expect("hotspots")
        .iter()
        .find(|h| h["function"] == "slowSum")
        .expect("slowSum is a hotspot");
    assert_eq!(slow["module"], "hot.js");
    let location = slow["location"].as_str().unwrap_or_default();
    assert!(location.ends_with("fixtures/js/hot.js:3"), "{location}");
    // ~10:1 by construction; JIT warm-up and the tiers blur it, not its order.
    let fast = common::hotspot_sum(&map, "fastPart", "self_time_ms");
    let slow_ms = slow["self_time_ms"].as_f64().expect("ms");
    assert!(
        slow_ms > 4.0 * fast,
        "slowSum {slow_ms} ms, fastPart {fast} ms"
    );
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("NODE_OPTIONS"), "{warnings}");
    assert!(maps_since(since).is_empty(), "{:?}", maps_since(since));
    // Nothing is left in the folder the program ran in (`--perf-basic-prof` alone makes
    // V8 write an isolate-*-v8.log there).
    let left: Vec<_> = std::fs::read_dir(cwd.path())
        .expect("cwd")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The flags are the profiled run's only: the baseline measures the program as it is.
    let log = std::fs::read_to_string(d.path().join("run.log")).expect("run.log");
    let (baseline, profiled) = log
        .split_once("=== profmap: profiled run of")
        .expect("the profiled run's output");
    assert!(!baseline.contains("--perf-basic-prof"), "{log}");
    assert!(profiled.contains("NODE_OPTIONS=--perf-basic-prof"), "{log}");
}
