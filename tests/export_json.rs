//! The speedscope and Chrome trace exports of real runs: three_funcs (func_a:func_b:
//! func_c = 5:3:2 of CPU time by construction) and sleep_compute (half its time in
//! usleep). speedscope's file is validated against the schema its npm package ships
//! (installed here when missing; the test fails when npm is missing), its frame indices
//! and event balance checked, and its evented profiles replayed; the Chrome trace's
//! slices are checked to nest, and both are held to the recording's time per thread.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "export_json/chrome.rs"]
mod chrome;
mod common;
#[path = "export_json/speedscope_ui.rs"]
mod speedscope_ui;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// speedscope's `dist/release` (schema and offline viewer) from its npm package,
/// installed under the test's target folder when missing.
fn speedscope_release() -> PathBuf {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npm");
    let release = prefix.join("node_modules/speedscope/dist/release");
    if !release.join("file-format-schema.json").exists() {
        let st = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("speedscope@1")
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "npm is needed to fetch speedscope's file-format schema \
                     (npm install speedscope@1) and could not run: {e}; install node and npm"
                )
            });
        assert!(st.success(), "npm install speedscope@1 failed ({st})");
    }
    release
}

/// The speedscope schema from the npm package.
fn speedscope_schema() -> Value {
    common::read_json(&speedscope_release().join("file-format-schema.json"))
}

/// Record `bin args` into a fresh folder.
fn record(bin: &Path, args: &[&str]) -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tempdir");
    common::profmap()
        .args(["record", "--out"])
        .arg(out.path())
        .arg("--")
        .arg(bin)
        .args(args)
        .assert()
        .success();
    out
}

/// `profmap export DIR --format FORMAT`; the file written.
fn export(dir: &Path, format: &str, file: &str) -> PathBuf {
    common::profmap()
        .arg("export")
        .arg(dir)
        .args(["--format", format])
        .assert()
        .success();
    dir.join(file)
}

/// Per thread (tid), the time the recording's samples weigh, ns.
fn recorded_ns(dir: &Path) -> HashMap<i64, u64> {
    recorded_by_tid(dir, false)
}

/// Per thread (tid), the time the recording's samples weigh (on-CPU ones only when
/// `cpu_only`), ns.
fn recorded_by_tid(dir: &Path, cpu_only: bool) -> HashMap<i64, u64> {
    let rec = profmap::profile::read_recording(&dir.join("profile.pmr")).expect("recording");
    let mut out = HashMap::new();
    for s in rec.sampled.expect("deep profile").samples.iter() {
        if !cpu_only || matches!(s.kind, profmap::profile::SampleKind::OnCpu) {
            *out.entry(i64::from(s.tid)).or_default() += s.weight_ns;
        }
    }
    out
}

/// The tid at the end of a speedscope profile name `... thread (TID) — wall`.
fn tid_of(name: &str) -> i64 {
    let head = name
        .rsplit_once(") —")
        .expect("profile name ends with (tid) — kind")
        .0;
    head.rsplit_once('(')
        .expect("(tid)")
        .1
        .parse()
        .expect("tid")
}

/// What replaying one evented profile gives.
#[derive(Debug, Default)]
struct Replay {
    /// Self time per frame name, ns.
    self_ns: HashMap<String, u64>,
    /// Time with at least one frame open, ns.
    held_ns: u64,
}

/// Replay an evented profile, checking frame indices, balance and time order.
fn replay(p: &Value, frames: &[Value]) -> Replay {
    let (start, end) = (
        p["startValue"].as_f64().unwrap(),
        p["endValue"].as_f64().unwrap(),
    );
    let mut out = Replay::default();
    let mut open: Vec<u64> = Vec::new();
    let mut last = start;
    for e in p["events"].as_array().expect("events") {
        let frame = e["frame"].as_u64().expect("frame index");
        assert!(
            (frame as usize) < frames.len(),
            "frame index {frame} out of range"
        );
        let at = e["at"].as_f64().expect("at");
        assert!(
            at >= last && at <= end,
            "event at {at} out of order ({last}..{end})"
        );
        if let Some(&top) = open.last() {
            let name = frames[top as usize]["name"].as_str().unwrap().to_string();
            *out.self_ns.entry(name).or_default() += (at - last) as u64;
            out.held_ns += (at - last) as u64;
        }
        last = at;
        match e["type"].as_str() {
            Some("O") => open.push(frame),
            Some("C") => assert_eq!(open.pop(), Some(frame), "close of a frame not innermost"),
            t => panic!("event type {t:?}"),
        }
    }
    assert!(open.is_empty(), "{} frames left open", open.len());
    out
}

/// func_a:func_b:func_c shares (percent of their sum) of a time map.
fn shares(t: &HashMap<String, u64>) -> [f64; 3] {
    let get = |f: &str| *t.get(f).unwrap_or(&0) as f64;
    let (a, b, c) = (get("func_a"), get("func_b"), get("func_c"));
    let sum = a + b + c;
    assert!(sum > 0.0, "no time in func_a/b/c: {t:?}");
    [100.0 * a / sum, 100.0 * b / sum, 100.0 * c / sum]
}

fn assert_532(what: &str, s: [f64; 3]) {
    for (got, want) in s.iter().zip([50.0, 30.0, 20.0]) {
        assert!(
            (got - want).abs() <= 5.0,
            "{what}: func_a:b:c = {s:?}, want 50:30:20 ±5"
        );
    }
    eprintln!("{what}: func_a:b:c = {:.1}:{:.1}:{:.1}", s[0], s[1], s[2]);
}

fn assert_within_2pct(what: &str, held: u64, recorded: u64) {
    let diff = (held as f64 - recorded as f64).abs() / recorded as f64;
    eprintln!("{what}: holds {held} ns, recorded {recorded} ns");
    assert!(
        held <= recorded,
        "{what} holds {held} ns, more than the {recorded} recorded"
    );
    assert!(
        diff <= 0.02,
        "{what} holds {held} ns, {recorded} recorded (>2% apart)"
    );
}

/// Check a speedscope file; return the replay of every evented profile, with its tid.
fn check_speedscope(doc: &Value) -> Vec<(i64, Replay)> {
    let schema = speedscope_schema();
    let v = jsonschema::draft7::new(&schema).expect("speedscope's schema compiles");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "speedscope schema violations:\n{}",
        errors.join("\n")
    );
    assert!(doc["exporter"].as_str().unwrap().starts_with("profmap "));
    let frames = doc["shared"]["frames"].as_array().expect("frames");
    let mut out = Vec::new();
    for p in doc["profiles"].as_array().expect("profiles") {
        assert_eq!(p["unit"], "nanoseconds");
        let name = p["name"].as_str().unwrap();
        match p["type"].as_str() {
            Some("evented") => out.push((tid_of(name), replay(p, frames))),
            Some("sampled") => {
                let samples = p["samples"].as_array().unwrap();
                assert_eq!(samples.len(), p["weights"].as_array().unwrap().len());
                for s in samples.iter().flat_map(|s| s.as_array().unwrap()) {
                    assert!(
                        (s.as_u64().unwrap() as usize) < frames.len(),
                        "bad index in {name}"
                    );
                }
            }
            t => panic!("profile type {t:?}"),
        }
    }
    out
}

#[test]
fn three_funcs_exports_hold_the_split_and_the_recorded_time() {
    let bin = common::compile("three_funcs", &[]);
    let _serial = common::sampling::serial();
    let dir = record(&bin, &["30000000"]);
    let recorded = recorded_ns(dir.path());

    let ss = common::read_json(&export(dir.path(), "speedscope", "speedscope.json"));
    let replays = check_speedscope(&ss);
    assert!(!replays.is_empty(), "no evented profile");
    let mut self_ns: HashMap<String, u64> = HashMap::new();
    for (tid, r) in &replays {
        assert_within_2pct(
            &format!("speedscope thread {tid}"),
            r.held_ns,
            recorded[tid],
        );
        for (k, v) in &r.self_ns {
            *self_ns.entry(k.clone()).or_default() += v;
        }
    }
    assert_532("speedscope self time", shares(&self_ns));

    // speedscope's own importer, in its viewer: the weight it shows per profile.
    let cpu = recorded_by_tid(dir.path(), true);
    let shown =
        speedscope_ui::imported_weights(&speedscope_release(), &dir.path().join("speedscope.json"));
    let n_profiles = ss["profiles"].as_array().map_or(0, Vec::len);
    assert_eq!(shown.len(), n_profiles, "speedscope imported {shown:?}");
    for (name, weight) in &shown {
        let tid = tid_of(name);
        let want = if name.ends_with("— CPU") {
            cpu[&tid]
        } else {
            recorded[&tid]
        };
        let off = (weight - want as f64).abs() / want as f64;
        eprintln!("speedscope's import of '{name}' holds {weight} ns, {want} recorded");
        assert!(
            off <= 0.02,
            "speedscope's import of '{name}' holds {weight} ns, {want} recorded"
        );
    }

    let trace = common::read_json(&export(dir.path(), "chrome", "trace.json"));
    let threads = chrome::check(&trace);
    let mut by_name: HashMap<String, f64> = HashMap::new();
    for (tid, t) in &threads {
        let held = (t.held_us * 1000.0).round() as u64;
        assert_within_2pct(&format!("chrome thread {tid}"), held, recorded[tid]);
        for (k, v) in &t.by_name {
            *by_name.entry(k.clone()).or_default() += v;
        }
    }
    assert_532("chrome slices", shares(&chrome::to_ns(&by_name)));
}

#[test]
fn run_exports_both_and_sleeps_are_off_cpu_sleep_slices() {
    let bin = common::compile("sleep_compute", &[]);
    let _serial = common::sampling::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    common::profmap()
        .args([
            "run",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--export",
            "speedscope,chrome",
            "--out",
        ])
        .arg(dir.path())
        .arg("--")
        .arg(&bin)
        .assert()
        .success();
    let summary = common::read_json(&dir.path().join("summary.json"));
    for (key, file) in [("speedscope", "speedscope.json"), ("chrome", "trace.json")] {
        let listed = summary["artifacts"][key].as_str().unwrap_or_else(|| {
            panic!(
                "summary.json's artifacts lack '{key}': {}",
                summary["artifacts"]
            )
        });
        assert!(listed.ends_with(file), "artifact {key} = {listed}");
        assert!(dir.path().join(file).is_file(), "{file} not written");
    }
    let recorded = recorded_ns(dir.path());

    // 50 usleep(10 ms): about 0.5 s asleep, whatever the machine's load.
    let threads = chrome::check(&common::read_json(&dir.path().join("trace.json")));
    let sleep_us: f64 = threads
        .values()
        .filter_map(|t| t.waits_us.get("sleep"))
        .sum();
    eprintln!("chrome: {sleep_us:.0} µs in off-CPU sleep slices");
    assert!(
        (400_000.0..=800_000.0).contains(&sleep_us),
        "sleep slices hold {sleep_us} µs, want ~500000"
    );
    for (tid, t) in &threads {
        let held = (t.held_us * 1000.0).round() as u64;
        assert_within_2pct(&format!("chrome thread {tid}"), held, recorded[tid]);
    }

    let replays = check_speedscope(&common::read_json(&dir.path().join("speedscope.json")));
    let sleep_ns: u64 = replays
        .iter()
        .filter_map(|(_, r)| r.self_ns.get("[off-cpu: sleep]"))
        .sum();
    eprintln!("speedscope: {sleep_ns} ns under [off-cpu: sleep]");
    assert!(
        (400_000_000..=800_000_000).contains(&sleep_ns),
        "[off-cpu: sleep] holds {sleep_ns} ns"
    );
    for (tid, r) in &replays {
        assert_within_2pct(
            &format!("speedscope thread {tid}"),
            r.held_ns,
            recorded[tid],
        );
    }
}
