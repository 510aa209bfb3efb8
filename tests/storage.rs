//! Reads from storage one at a time, on a real disk: tests/fixtures/c/cold_reader.c
//! reads 1,500 files of 32 KiB that it wrote, synced and dropped from the page cache
//! (posix_fadvise, no root needed), one after the other. Cold, the run waits on each
//! read: the diagnosis confirms "reads from storage one at a time" with the device's
//! figures and advises overlapping them, and report.md sums the files by directory.
//! Warm (the same files read again, from the page cache), it says nothing of the kind.
//! A baseline whose warm-up reads them cold warns that its figures are warm ones.
//! The files live under the build's target folder (a disk, where /tmp may be tmpfs);
//! this binary holds one test so that no other test's disk traffic overlaps its reads.
//! Needs perf_event_open (root, or kernel.perf_event_paranoid <= 1).

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{compile, profmap, suspicion, valid_map};
use serde_json::Value;

const FILES: &str = "1500";

fn record(out: &Path, reader: &Path, dir: &Path) -> Value {
    profmap()
        .args(["record", "-q", "--out"])
        .arg(out)
        .arg("--")
        .arg(reader)
        .arg("read")
        .arg(dir)
        .arg(FILES)
        .assert()
        .success();
    valid_map(out)
}

/// The "reads from storage one at a time" suspicion, if the map has one.
fn storage_suspicion(map: &Value) -> Option<&Value> {
    suspicion(map, "async_patterns", "reads from storage one at a time")
}

#[test]
fn files_read_one_at_a_time_from_storage_are_named_and_cached_ones_are_not() {
    let reader = compile("cold_reader", &[]);
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let files = d.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let prepare = || {
        let prepared = Command::new(&reader)
            .arg("prepare")
            .arg(&files)
            .args([FILES, "32"])
            .status()
            .expect("cold_reader runs");
        assert!(prepared.success(), "{prepared}");
    };
    prepare();

    // Cold: every file from storage, one read at a time.
    let cold = record(&d.path().join("cold"), &reader, &files);
    let s = storage_suspicion(&cold).unwrap_or_else(|| {
        panic!(
            "no storage suspicion: {}",
            cold["profile_result"]["suspicion_stack"]
        )
    });
    let evidence = s["evidence"].as_str().unwrap();
    assert_eq!(s["verdict"], "confirmed", "{evidence}");
    assert!(
        evidence.contains("from storage") && evidence.contains("in flight on average"),
        "{evidence}"
    );
    let hint = cold["profile_result"]["optimization_hints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["suspicion"] == s["id"])
        .unwrap_or_else(|| panic!("no hint for {s}"));
    assert!(hint.to_string().contains("overlap the reads"), "{hint}");
    assert!(
        !cold["profile_result"]["wrong_tool_indicators"]
            .to_string()
            .contains("infrastructure_bound"),
        "one read at a time is no saturated device"
    );
    let md = std::fs::read_to_string(d.path().join("cold/report.md")).unwrap();
    let dir_row = format!("| {}/ |", files.display());
    assert!(
        md.contains("Files by directory") && md.contains(&dir_row),
        "{md}"
    );

    // Warm: the same files, now in the page cache.
    let warm = record(&d.path().join("warm"), &reader, &files);
    if let Some(s) = storage_suspicion(&warm) {
        assert_eq!(s["verdict"], "dismissed", "{s}");
    }

    // A baseline whose warm-up reads them cold and whose counted runs find them cached:
    // the figures are warm ones, and the quality warnings say what a cold start costs.
    prepare();
    let out = d.path().join("bench");
    profmap()
        .args(["bench", "--runs", "2", "--warmup", "1", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&reader)
        .arg("read")
        .arg(&files)
        .arg(FILES)
        .assert()
        .success();
    let quality = valid_map(&out)["profile_result"]["measurement_quality"]["warnings"].to_string();
    assert!(
        quality.contains("the warm-up run took") && quality.contains("MiB from storage"),
        "{quality}"
    );
}
