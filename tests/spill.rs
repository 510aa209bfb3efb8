//! Past the memory budget for per-sample data, `report` keeps full blocks of samples,
//! waits and per-sample tables in a spill file instead of memory
//! (`PROFMAP_SAMPLE_MEMORY_MB`, see `profmap::packed::spill`): the outputs must not
//! change. A real recording of a two-process ping-pong over pipes (tens of thousands
//! of off-CPU intervals with their wake-ups, so every list fills many blocks) is
//! reported with a budget of 0 (every full block to the file) and with the default,
//! with every export, and every file is compared byte for byte.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{compile, profmap};

/// Every file under `dir` (relative name → bytes), the output folder's lock aside (it
/// holds the pid of the process that wrote it).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("read out") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().expect("type").is_file() && name != ".profmap.lock" {
            out.insert(name, std::fs::read(e.path()).expect("read file"));
        }
    }
    out
}

#[test]
fn a_report_with_every_block_spilled_writes_the_same_files() {
    let prog = compile("pingpong", &[]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let rec = tmp.path().join("rec");
    profmap()
        .args(["record", "-q", "--frequency", "2000", "--out"])
        .arg(&rec)
        .arg("--")
        .arg(&prog)
        .arg("20000")
        .assert()
        .success();
    let pmr = rec.join("profile.pmr");
    // Both into the same folder (summary.json names it), moved aside after each.
    let report = |budget: Option<&str>, name: &str| {
        let out = tmp.path().join("out");
        let mut cmd = profmap();
        cmd.args([
            "report",
            "-q",
            "--export",
            "pprof,speedscope,firefox,chrome,folded",
        ])
        .arg(&pmr)
        .arg("--out")
        .arg(&out)
        .env_remove("PROFMAP_SAMPLE_MEMORY_MB");
        if let Some(b) = budget {
            cmd.env("PROFMAP_SAMPLE_MEMORY_MB", b);
        }
        cmd.assert().success();
        let kept = tmp.path().join(name);
        std::fs::rename(&out, &kept).expect("move aside");
        files(&kept)
    };
    let held = report(None, "held");
    let spilled = report(Some("0"), "spilled");
    let map = String::from_utf8_lossy(&held["performance_map.json"]).into_owned();
    let doc: serde_json::Value = serde_json::from_str(&map).expect("map");
    let intervals = doc["profile_result"]["measurement_quality"]["off_cpu_intervals"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        intervals >= 10_000,
        "the recording fills many blocks: {intervals} off-CPU intervals"
    );
    assert_eq!(
        held.keys().collect::<Vec<_>>(),
        spilled.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for (name, bytes) in &held {
        assert!(spilled[name] == *bytes, "{name} differs when spilled");
    }
}
