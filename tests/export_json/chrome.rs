//! The Chrome trace checks: every thread named, its slices nested (never overlapping
//! other than by nesting), the timeline's counters present; and what each thread's
//! slices hold.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// What one thread's Chrome slices hold.
#[derive(Debug, Default)]
pub struct ChromeThread {
    /// Time under top-level slices, µs.
    pub held_us: f64,
    /// Time of the slices of each name (inclusive), µs.
    pub by_name: HashMap<String, f64>,
    /// Time of off-CPU slices per wait class, µs.
    pub waits_us: HashMap<String, f64>,
}

/// Check a Chrome trace: metadata names, slices of a thread nest, counters there.
pub fn check(doc: &Value) -> BTreeMap<i64, ChromeThread> {
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut slices: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
    let mut named_threads = Vec::new();
    for e in events {
        match e["ph"].as_str() {
            Some("X") => slices
                .entry(e["tid"].as_i64().unwrap())
                .or_default()
                .push(e),
            Some("M") if e["name"] == "thread_name" => {
                named_threads.push(e["tid"].as_i64().unwrap())
            }
            _ => {}
        }
    }
    for name in ["CPU %", "RSS (KiB)", "threads", "storage I/O (bytes/s)"] {
        let n = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .count();
        assert!(n >= 2, "counter '{name}' has {n} points");
    }
    let mut out = BTreeMap::new();
    for (tid, mut v) in slices {
        assert!(
            named_threads.contains(&tid),
            "thread {tid} has no thread_name"
        );
        v.sort_by(|a, b| {
            let key = |e: &Value| (e["ts"].as_f64().unwrap(), -e["dur"].as_f64().unwrap());
            key(a).partial_cmp(&key(b)).unwrap()
        });
        let mut t = ChromeThread::default();
        let mut ends: Vec<f64> = Vec::new();
        for e in v {
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            assert!(dur > 0.0, "empty slice {e}");
            while ends.last().is_some_and(|&end| end <= ts + 1e-3) {
                ends.pop();
            }
            if let Some(&parent_end) = ends.last() {
                assert!(
                    ts + dur <= parent_end + 1e-3,
                    "slice {e} overlaps a slice it is not inside"
                );
            } else {
                t.held_us += dur;
            }
            ends.push(ts + dur);
            let name = e["name"].as_str().unwrap().to_string();
            *t.by_name.entry(name).or_default() += dur;
            if e["cat"] == "off-cpu" {
                let class = e["args"]["wait_class"]
                    .as_str()
                    .expect("wait_class")
                    .to_string();
                assert!(e["args"]["state"].is_string() && e["args"].get("resource").is_some());
                *t.waits_us.entry(class).or_default() += dur;
            }
        }
        out.insert(tid, t);
    }
    out
}

/// Microsecond map → nanosecond map.
pub fn to_ns(m: &HashMap<String, f64>) -> HashMap<String, u64> {
    m.iter()
        .map(|(k, v)| (k.clone(), (v * 1000.0) as u64))
        .collect()
}
