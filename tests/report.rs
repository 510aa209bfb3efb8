//! `profmap report` on checked-in fixture recordings: every output is produced and valid,
//! and anything that is not a profmap recording is refused with exit 2.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{profmap, read_json, valid_map};
use predicates::prelude::*;

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "fixture recordings present");
    v
}

/// `profmap report RECORDING --out <a new tempdir>`.
fn report_into_tempdir(recording: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["report", "-q"])
        .arg(recording)
        .arg("--out")
        .arg(d.path())
        .assert()
        .success();
    d
}

#[test]
fn every_fixture_recording_reports_valid_outputs() {
    for f in fixtures() {
        let d = report_into_tempdir(&f);
        let map = valid_map(d.path());
        let pr = &map["profile_result"];
        assert!(
            !pr["performance_map"]["steps"]
                .as_array()
                .expect("steps")
                .is_empty(),
            "{}",
            f.display()
        );
        assert!(!pr["hotspots"].as_array().expect("hotspots").is_empty());
        for name in [
            "flamegraph.svg",
            "flamegraph-cpu.svg",
            "stacks.folded",
            "report.md",
            "summary.json",
        ] {
            assert!(d.path().join(name).exists(), "{name} for {}", f.display());
        }
        let md = std::fs::read_to_string(d.path().join("report.md")).expect("report.md");
        assert!(md.contains("## Part B — instrumentation changelog"));
        assert!(md.contains("| File | Change type | What | Lines |"));
        assert_eq!(
            read_json(&d.path().join("summary.json"))["status"],
            "completed"
        );
    }
}

#[test]
fn report_of_a_report_folder_rewrites_the_same_map() {
    let d = report_into_tempdir(&fixtures()[0]);
    let first = read_json(&d.path().join("performance_map.json"));
    // Now from the folder itself (its recording), written in place.
    profmap()
        .args(["report", "-q"])
        .arg(d.path())
        .assert()
        .success();
    let second = read_json(&d.path().join("performance_map.json"));
    assert_eq!(
        first["profile_result"]["performance_map"],
        second["profile_result"]["performance_map"]
    );
    assert_eq!(
        first["profile_result"]["hotspots"],
        second["profile_result"]["hotspots"]
    );
}

#[test]
fn corrupt_or_foreign_files_are_refused_with_exit_2() {
    let d = tempfile::tempdir().expect("tempdir");
    let foreign = d.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"traceEvents": []}"#).expect("write");
    profmap()
        .arg("report")
        .arg(&foreign)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a profmap recording"));
    let corrupt = d.path().join("profile.json.gz");
    std::fs::write(&corrupt, [0x1f, 0x8b, 8, 0, 1, 2, 3]).expect("write");
    profmap()
        .arg("report")
        .arg(&corrupt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read recording"));
    profmap()
        .arg("report")
        .arg(d.path().join("missing"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no recording"));
}

/// Snapshots of the performance map and report.md of each fixture recording: any change
/// to what a user reads shows up as a reviewed diff.
#[test]
fn fixture_map_and_report_snapshots() {
    for f in fixtures() {
        let name = f.file_stem().expect("stem").to_string_lossy().to_string();
        let d = report_into_tempdir(&f);
        let map = read_json(&d.path().join("performance_map.json"));
        insta::assert_json_snapshot!(format!("{name}__map"), map);
        let md = std::fs::read_to_string(d.path().join("report.md")).expect("report.md");
        insta::assert_snapshot!(format!("{name}__report_md"), md);
    }
}

#[test]
fn report_into_another_folder_copies_the_recording_byte_for_byte() {
    use std::io::{Read, Write};
    let d = report_into_tempdir(&fixtures()[0]);
    let other = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["report", "-q"])
        .arg(d.path())
        .arg("--out")
        .arg(other.path())
        .assert()
        .success();
    let a = std::fs::read(d.path().join("profile.pmr")).expect("source");
    let b = std::fs::read(other.path().join("profile.pmr")).expect("copy");
    assert_eq!(a, b, "the recording is copied, not re-encoded");
    read_json(&other.path().join("performance_map.json"));

    // A version-1 recording, compressed at a level profmap never used: re-encoding it
    // would give other bytes (and another format).
    let json = std::fs::read(&fixtures()[0]).expect("fixture");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&json).expect("gzip");
    let v1 = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        v1.path().join("profile.json.gz"),
        gz.finish().expect("gzip"),
    )
    .expect("write");
    let other = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["report", "-q"])
        .arg(v1.path())
        .arg("--out")
        .arg(other.path())
        .assert()
        .success();
    let a = std::fs::read(v1.path().join("profile.json.gz")).expect("source");
    let b = std::fs::read(other.path().join("profile.json.gz")).expect("copy");
    assert_eq!(a, b, "the version-1 recording is copied, not re-encoded");
    assert!(!other.path().join("profile.pmr").exists());
    let mut text = String::new();
    flate2::read::GzDecoder::new(&b[..])
        .read_to_string(&mut text)
        .expect("still gzip JSON");
}
