//! The Firefox Profiler export on real runs: programs whose split is known by
//! construction are profiled by the binary, exported with `--format firefox`, and the
//! processed profile is read back by a small reader of our own (samples → stackTable →
//! frameTable → funcTable → stringArray; markers; counters).
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use common::{profmap, read_json};
use serde_json::Value;

/// Gunzip and parse a `.json.gz` file.
fn read_gz(p: &Path) -> Value {
    let raw = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut s = String::new();
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_string(&mut s)
        .expect("gunzip");
    serde_json::from_str(&s).expect("json")
}

/// `profmap record` of `bin args`, then `profmap export DIR --format firefox`; the
/// parsed export and the recording.
fn record_and_export(dir: &Path, bin: &Path, args: &[&str]) -> (Value, Value) {
    let _serial = common::sampling::serial();
    profmap()
        .args(["record", "-q", "--out"])
        .arg(dir)
        .arg("--")
        .arg(bin)
        .args(args)
        .assert()
        .success();
    profmap()
        .arg("export")
        .arg(dir)
        .args(["--format", "firefox"])
        .assert()
        .success();
    (
        read_gz(&dir.join("firefox.json.gz")),
        serde_json::to_value(
            profmap::profile::read_recording(&dir.join("profile.pmr")).expect("recording"),
        )
        .expect("recording as JSON"),
    )
}

/// Column `key` of table `t` as a vector of values.
fn col<'a>(t: &'a Value, key: &str) -> &'a Vec<Value> {
    t[key]
        .as_array()
        .unwrap_or_else(|| panic!("column {key} in {t}"))
}

/// The threads of process `name`.
fn threads_of<'a>(profile: &'a Value, name: &str) -> Vec<&'a Value> {
    profile["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter(|t| t["processName"] == name)
        .collect()
}

/// Per function name (label up to " ("), the summed weight of the on-CPU samples (CPU
/// delta > 0) whose stack holds it (each function counted once per sample).
fn weight_per_function(thread: &Value) -> BTreeMap<String, f64> {
    let strings = col(thread, "stringArray");
    let funcs = col(&thread["funcTable"], "name");
    let frames = col(&thread["frameTable"], "func");
    let stack_frame = col(&thread["stackTable"], "frame");
    let stack_prefix = col(&thread["stackTable"], "prefix");
    let samples = &thread["samples"];
    let weights = col(samples, "weight");
    let cpu = col(samples, "threadCPUDelta");
    let mut out = BTreeMap::new();
    for (i, s) in col(samples, "stack").iter().enumerate() {
        if cpu[i].as_f64().unwrap_or(0.0) <= 0.0 {
            continue; // an off-CPU interval
        }
        let w = weights[i].as_f64().unwrap();
        let mut names = BTreeSet::new();
        let mut cur = s.as_u64();
        while let Some(st) = cur {
            let f = stack_frame[st as usize].as_u64().unwrap() as usize;
            let func = frames[f].as_u64().unwrap() as usize;
            let name = strings[funcs[func].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            names.insert(name.split(" (").next().unwrap().to_string());
            cur = stack_prefix[st as usize].as_u64();
        }
        for n in names {
            *out.entry(n).or_default() += w;
        }
    }
    out
}

#[test]
fn three_funcs_keeps_its_5_3_2_split_with_tracks_and_counters() {
    let bin = common::compile("three_funcs", &[]);
    let d = tempfile::tempdir().unwrap();
    let (ff, _) = record_and_export(d.path(), &bin, &["30000000"]);
    assert_eq!(ff["meta"]["preprocessedProfileVersion"], 55);
    assert!(ff["meta"]["interval"].as_f64().unwrap() > 0.0);

    // The process is a track with its main thread.
    let threads = threads_of(&ff, "three_funcs");
    assert!(!threads.is_empty(), "no thread of three_funcs");
    let main = threads
        .iter()
        .find(|t| t["isMainThread"] == true)
        .expect("a main thread");
    assert_eq!(main["pid"], main["tid"]);
    assert_eq!(main["name"], "three_funcs");

    let mut total: BTreeMap<String, f64> = BTreeMap::new();
    for t in &threads {
        for (k, v) in weight_per_function(t) {
            *total.entry(k).or_default() += v;
        }
    }
    let w = |f: &str| total.get(f).copied().unwrap_or(0.0);
    let sum = w("func_a") + w("func_b") + w("func_c");
    assert!(sum > 20.0, "too few weighted samples: {total:?}");
    for (f, want) in [("func_a", 50.0), ("func_b", 30.0), ("func_c", 20.0)] {
        let share = 100.0 * w(f) / sum;
        assert!(
            (share - want).abs() <= 5.0,
            "{f}: {share:.1}% of func_a+b+c, want {want}±5 ({total:?})"
        );
    }

    // On-CPU samples carry their CPU time: the thread's deltas are not all zero.
    let cpu: f64 = col(&main["samples"], "threadCPUDelta")
        .iter()
        .filter_map(Value::as_f64)
        .sum();
    assert!(cpu > 0.0);

    // The profiled run's timeline: RSS (a memory track) and CPU %.
    let counters = ff["counters"].as_array().expect("counters");
    for (name, category) in [("RSS", "Memory"), ("CPU %", "CPU")] {
        let c = counters
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} counter in {counters:?}"));
        assert_eq!(c["category"], category);
        assert!(
            c["samples"]["length"].as_u64().unwrap() > 0,
            "{name} has no points"
        );
    }
    let rss = counters.iter().find(|c| c["name"] == "RSS").unwrap();
    let peak: f64 = col(&rss["samples"], "count")
        .iter()
        .scan(0.0, |acc, v| {
            *acc += v.as_f64().unwrap();
            Some(*acc)
        })
        .fold(0.0, f64::max);
    assert!(peak > 100.0 * 1024.0, "RSS peak {peak} bytes");
}

/// The recorded off-CPU time of process `name`'s samples, ns.
fn recorded_off_cpu_ns(rec: &Value, name: &str) -> f64 {
    let sampled = &rec["sampled"];
    let pids: BTreeSet<i64> = sampled["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == name)
        .map(|p| p["pid"].as_i64().unwrap())
        .collect();
    sampled["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| pids.contains(&s["pid"].as_i64().unwrap()))
        .filter(|s| s["kind"]["kind"] == "off_cpu")
        .map(|s| s["weight_ns"].as_f64().unwrap())
        .sum()
}

#[test]
fn sleep_compute_sleeps_are_markers_named_sleep_that_add_up() {
    let bin = common::compile("sleep_compute", &[]);
    let d = tempfile::tempdir().unwrap();
    let (ff, rec) = record_and_export(d.path(), &bin, &[]);
    let mut per_name: BTreeMap<String, f64> = BTreeMap::new();
    let mut sleep_fields = None;
    let mut with_stack = 0;
    for t in threads_of(&ff, "sleep_compute") {
        let strings = col(t, "stringArray");
        let m = &t["markers"];
        let starts = col(m, "startTime");
        let ends = col(m, "endTime");
        for (i, data) in col(m, "data").iter().enumerate() {
            if !matches!(data["type"].as_str(), Some("OffCpu" | "OffCpuOn")) {
                continue;
            }
            let name = strings[col(m, "name")[i].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            let ms = ends[i].as_f64().unwrap() - starts[i].as_f64().unwrap();
            *per_name.entry(name.to_string()).or_default() += ms;
            if name == "sleep" {
                let s = |k: &str| strings[data[k].as_u64().unwrap() as usize].clone();
                sleep_fields = Some((s("class"), s("state")));
                // The blocked stack is the marker's cause.
                with_stack += usize::from(data["cause"]["stack"].is_u64());
            }
        }
    }
    let all: f64 = per_name.values().sum();
    let recorded_ms = recorded_off_cpu_ns(&rec, "sleep_compute") / 1e6;
    assert!(
        (all - recorded_ms).abs() <= 0.02 * recorded_ms,
        "markers {all:.1} ms vs recorded off-CPU {recorded_ms:.1} ms ({per_name:?})"
    );
    // 50 sleeps of 10 ms.
    let sleep = per_name.get("sleep").copied().unwrap_or(0.0);
    assert!(
        (450.0..=800.0).contains(&sleep),
        "sleep markers {sleep:.1} ms ({per_name:?})"
    );
    let (class, state) = sleep_fields.expect("sleep fields");
    assert_eq!(class, "Idle");
    assert_eq!(state, "sleeping");
    assert!(with_stack > 0, "no sleep marker carries its blocked stack");
}

#[test]
fn run_with_export_firefox_writes_it_and_lists_it() {
    let _serial = common::sampling::serial();
    let bin = common::compile("three_funcs", &[]);
    let d = tempfile::tempdir().unwrap();
    profmap()
        .args([
            "run", "-q", "--runs", "1", "--warmup", "0", "--export", "firefox",
        ])
        .arg("--out")
        .arg(d.path())
        .arg("--")
        .arg(&bin)
        .arg("3000000")
        .assert()
        .success();
    let summary = read_json(&d.path().join("summary.json"));
    let listed = d.path().join("firefox.json.gz");
    assert_eq!(
        summary["artifacts"]["firefox"],
        listed.display().to_string()
    );
    let ff = read_gz(&d.path().join("firefox.json.gz"));
    assert!(!threads_of(&ff, "three_funcs").is_empty());
}
