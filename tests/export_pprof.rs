//! The pprof export on real runs: three_funcs (func_a:func_b:func_c = 5:3:2 of CPU by
//! construction) decoded with profmap's own messages and read by `go tool pprof`, whose
//! flat CPU must agree with the map's hotspots; sleep_compute's off-CPU samples carry
//! `wait=sleep`; `profmap run --export pprof` lists the file in summary.json.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

use common::sampling::serial;
use common::{compile, hotspot_sum, profmap, read_json, valid_map};
use profmap::export::pprof::proto::{Profile, Sample};
use prost::Message;

const FUNCS: [&str; 3] = ["func_a", "func_b", "func_c"];

fn decode(path: &Path) -> Profile {
    let gz = std::fs::read(path).expect("profile.pb.gz written");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .expect("gzip");
    Profile::decode(&raw[..]).expect("a profile.proto message")
}

fn string(p: &Profile, i: i64) -> &str {
    p.string_table.get(i as usize).map_or("", String::as_str)
}

/// The index of the sample type named `ty`.
fn value_index(p: &Profile, ty: &str) -> usize {
    p.sample_type
        .iter()
        .position(|v| string(p, v.r#type) == ty)
        .unwrap_or_else(|| panic!("no sample type {ty}"))
}

/// The innermost function of a sample's leaf location.
fn leaf_function<'p>(p: &'p Profile, s: &Sample) -> &'p str {
    let loc = &p.location[*s.location_id.first().expect("a location") as usize - 1];
    let f = &p.function[loc.line[0].function_id as usize - 1];
    string(p, f.name)
}

fn label<'p>(p: &'p Profile, s: &Sample, key: &str) -> Option<&'p str> {
    s.label
        .iter()
        .find(|l| string(p, l.key) == key)
        .map(|l| string(p, l.str))
}

/// `go tool pprof ARGS`, with a private HOME (go writes a cache) and no network.
fn go_pprof(args: &[&str], home: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .env("HOME", home)
        .env("GOFLAGS", "")
        .env("GOTOOLCHAIN", "local")
        .env("PPROF_TMPDIR", home)
        .output()
        .expect("go is installed (apt-get install golang-go)");
    assert!(out.status.success(), "go tool pprof {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `-top -unit=ms` rows: function → flat ms.
fn top_flat_ms(top: &str) -> HashMap<String, f64> {
    top.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let flat = cols.first()?.strip_suffix("ms")?.parse().ok()?;
            Some((cols.get(5..)?.join(" "), flat))
        })
        .collect()
}

fn shares(v: &[f64]) -> Vec<f64> {
    let total: f64 = v.iter().sum();
    v.iter().map(|x| x / total * 100.0).collect()
}

#[test]
fn three_funcs_cpu_splits_5_3_2_and_go_pprof_agrees_with_the_map() {
    let _one = serial();
    let bin = compile("three_funcs", &[]);
    let d = tempfile::tempdir().expect("tempdir");
    let out = d.path().join("out");
    profmap()
        .args(["record", "-q", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .arg("30000000")
        .assert()
        .success();
    profmap()
        .arg("export")
        .arg(&out)
        .args(["--format", "pprof"])
        .assert()
        .success();
    let file = out.join("profile.pb.gz");
    let p = decode(&file);
    assert_eq!(p.string_table[0], "");
    let cpu = value_index(&p, "cpu");
    let mut by_fn: HashMap<&str, i64> = HashMap::new();
    for s in &p.sample {
        *by_fn.entry(leaf_function(&p, s)).or_default() += s.value[cpu];
    }
    let decoded: Vec<f64> = FUNCS.iter().map(|f| by_fn[f] as f64).collect();
    for (got, want) in shares(&decoded).iter().zip([50.0, 30.0, 20.0]) {
        assert!((got - want).abs() <= 5.0, "cpu share {got:.1} vs {want}");
    }
    let main = &p.mapping[0];
    assert!(
        string(&p, main.filename).ends_with("three_funcs") && main.build_id != 0,
        "the binary's mapping comes first, with its build ID: {main:?}"
    );

    // go tool pprof reads the file, and its flat CPU per function is the map's.
    let map = valid_map(&out);
    let home = d.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let top = go_pprof(
        &[
            "-top",
            "-sample_index=cpu",
            "-unit=ms",
            file.to_str().unwrap(),
        ],
        &home,
    );
    let flat = top_flat_ms(&top);
    let go: Vec<f64> = FUNCS
        .iter()
        .map(|f| *flat.get(*f).unwrap_or_else(|| panic!("{f} in:\n{top}")))
        .collect();
    let mapped: Vec<f64> = FUNCS
        .iter()
        .map(|f| hotspot_sum(&map, f, "self_cpu_time_ms"))
        .collect();
    let total: f64 = mapped.iter().sum();
    for ((f, g), m) in FUNCS.iter().zip(&go).zip(&mapped) {
        assert!(
            (g - m).abs() / total * 100.0 <= 5.0,
            "{f}: go tool pprof {g} ms, map {m} ms\n{top}"
        );
    }
    for (g, m) in shares(&go).iter().zip(shares(&mapped)) {
        assert!((g - m).abs() <= 5.0, "shares {go:?} vs {mapped:?}");
    }
}

#[test]
fn run_export_pprof_labels_sleeps_and_lists_the_file() {
    let _one = serial();
    let bin = compile("sleep_compute", &[]);
    let d = tempfile::tempdir().expect("tempdir");
    let out = d.path().join("out");
    profmap()
        .args([
            "run", "-q", "--runs", "1", "--warmup", "0", "--export", "pprof",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .assert()
        .success();
    let summary = read_json(&out.join("summary.json"));
    assert!(
        summary["artifacts"]["pprof"]
            .as_str()
            .is_some_and(|a| a.ends_with("/profile.pb.gz") && Path::new(a).is_file()),
        "{summary}"
    );
    let file = out.join("profile.pb.gz");
    let p = decode(&file);
    let (cpu, wall) = (value_index(&p, "cpu"), value_index(&p, "wall"));
    // Off-CPU samples under do_sleep: wall time, no CPU, labelled as sleeps.
    let mut sleep_ns = 0;
    for s in &p.sample {
        let in_sleep = s.location_id.iter().any(|&l| {
            p.location[l as usize - 1]
                .line
                .iter()
                .any(|ln| string(&p, p.function[ln.function_id as usize - 1].name) == "do_sleep")
        });
        if in_sleep && label(&p, s, "wait").is_some() {
            assert_eq!(s.value[cpu], 0);
            if label(&p, s, "wait") == Some("sleep") {
                assert_eq!(label(&p, s, "state"), Some("sleeping"));
                sleep_ns += s.value[wall];
            }
        }
    }
    // 50 sleeps of 10 ms: at least 0.4 s of labelled sleep.
    assert!(sleep_ns > 400_000_000, "{sleep_ns} ns labelled wait=sleep");
    let home = d.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let tags = go_pprof(&["-tags", file.to_str().unwrap()], &home);
    assert!(
        tags.lines().any(|l| l.contains("sleep")) && tags.contains("wait"),
        "{tags}"
    );
    assert!(tags.contains("class") && tags.contains("Idle"), "{tags}");
    // The wall view names the wait at the leaf, as the flamegraph does.
    let top = go_pprof(
        &["-top", "-sample_index=wall", file.to_str().unwrap()],
        &home,
    );
    assert!(top.contains("[off-cpu: sleep]"), "{top}");
}
