//! pprof export (issue 10): real profiled runs → profile.pb.gz, read back by decoding it
//! and by `go tool pprof` itself.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;

use common::exports::{assert_split, map_split, record_sleep_compute, record_three_funcs, shares};
use profmap::export::pprof::proto::Profile;
use prost::Message;

fn decode(path: &Path) -> Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("open"))
        .read_to_end(&mut raw)
        .expect("gunzip");
    Profile::decode(raw.as_slice()).expect("a profile.proto message")
}

fn string(p: &Profile, i: i64) -> &str {
    p.string_table
        .get(i as usize)
        .map(String::as_str)
        .expect("string index")
}

/// Self value of `sample_type` per function named at the leaf (its first line).
fn self_values(p: &Profile, sample_type: &str) -> std::collections::HashMap<String, i64> {
    let idx = p
        .sample_type
        .iter()
        .position(|t| string(p, t.r#type) == sample_type)
        .expect("sample type");
    let mut out = std::collections::HashMap::new();
    for s in &p.sample {
        let leaf = p
            .location
            .iter()
            .find(|l| Some(&l.id) == s.location_id.first())
            .expect("leaf");
        let f = p
            .function
            .iter()
            .find(|f| f.id == leaf.line[0].function_id)
            .expect("function");
        *out.entry(string(p, f.name).to_string()).or_default() += s.value[idx];
    }
    out
}

/// `go tool pprof ARGS FILE`'s output.
fn go_pprof(args: &[&str], file: &Path) -> String {
    let home = tempfile::tempdir().expect("home");
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", home.path())
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "")
        .output()
        .unwrap_or_else(|e| panic!("go tool pprof is needed ({e}): apt-get install golang-go"));
    assert!(
        out.status.success(),
        "go tool pprof: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// flat% of `function` in `go tool pprof -top` output.
fn flat_pct(top: &str, function: &str) -> f64 {
    top.lines()
        .find(|l| l.split_whitespace().last() == Some(function))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|p| p.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("{function} not in:\n{top}"))
}

#[test]
fn three_funcs_opens_in_go_tool_pprof_with_the_5_3_2_split() {
    let _g = common::sampling::serial();
    let d = tempfile::tempdir().expect("tmp");
    record_three_funcs(d.path(), "pprof");
    let map = map_split(d.path());
    let file = d.path().join("profile.pb.gz");
    let summary = common::read_json(&d.path().join("summary.json"));
    assert!(
        summary["artifacts"]["pprof"]
            .as_str()
            .is_some_and(|a| a.ends_with("profile.pb.gz"))
    );

    // Decoded with the message definitions.
    let p = decode(&file);
    assert_eq!(string(&p, 0), "");
    let types: Vec<&str> = p.sample_type.iter().map(|t| string(&p, t.r#type)).collect();
    assert_eq!(types, ["samples", "cpu", "wall"]);
    assert_eq!(string(&p, p.default_sample_type), "wall");
    assert!(p.location.iter().all(|l| l.id != 0) && p.function.iter().all(|f| f.id != 0));
    let cpu = self_values(&p, "cpu");
    let v = ["func_a", "func_b", "func_c"].map(|f| *cpu.get(f).unwrap_or(&0) as f64);
    assert_split("decoded", shares(v), map, 5.0);
    let f = p
        .function
        .iter()
        .find(|f| string(&p, f.name) == "func_a")
        .expect("func_a");
    assert!(string(&p, f.filename).ends_with("three_funcs.c"));
    assert!(
        p.sample
            .iter()
            .all(|s| s.label.iter().any(|l| string(&p, l.key) == "process"))
    );

    // Read by pprof itself.
    let top = go_pprof(&["-top", "-sample_index=cpu"], &file);
    let v = ["func_a", "func_b", "func_c"].map(|f| flat_pct(&top, f));
    assert_split("go tool pprof -top", shares(v), map, 5.0);
    let lines = go_pprof(&["-top", "-lines", "-sample_index=cpu"], &file);
    assert!(lines.contains("three_funcs.c:"), "{lines}");
}

#[test]
fn sleeps_are_wall_time_labelled_with_their_wait_class() {
    let _g = common::sampling::serial();
    let d = tempfile::tempdir().expect("tmp");
    record_sleep_compute(d.path(), "pprof");
    let file = d.path().join("profile.pb.gz");
    let p = decode(&file);
    let key = |k: &str| p.string_table.iter().position(|s| s == k).expect(k) as i64;
    let (wait, state) = (key("wait"), key("state"));
    let mut sleep_wall = 0i64;
    for s in &p.sample {
        let w = s.label.iter().find(|l| l.key == wait);
        if w.is_some_and(|l| string(&p, l.str) == "sleep") {
            assert_eq!(s.value[1], 0, "an off-CPU sample has no CPU time");
            assert!(s.label.iter().any(|l| l.key == state));
            sleep_wall += s.value[2];
        }
    }
    // 50 sleeps of 10 ms.
    assert!(
        (400e6..700e6).contains(&(sleep_wall as f64)),
        "sleep wall {sleep_wall} ns"
    );
    let tags = go_pprof(&["-tags"], &file);
    assert!(tags.contains("wait:") && tags.contains("sleep"), "{tags}");
    let top = go_pprof(&["-top", "-sample_index=wall"], &file);
    assert!(top.contains("[off-cpu: sleep]"), "{top}");
}
