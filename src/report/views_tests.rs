//! The views render from the typed map: a figure set in [`PerformanceMap`] shows up in
//! report.md, summary.json and the JSON as it was set, and an unknown figure is null or
//! "—", never 0.

use std::collections::BTreeMap;
use std::path::Path;

use super::map::PerformanceMap;
use super::summary::{self, Status};
use super::{PerfMap, build, markdown};
use crate::analyse::{Bottleneck, Classification, CriticalPathSummary, Hotspot};
use crate::profile::{Recording, SessionMeta};

fn recording() -> Recording {
    Recording::new(SessionMeta {
        run_id: "r1".into(),
        command: vec!["./app".into(), "--n".into(), "3".into()],
        started_unix_s: 0.0,
        tool_version: "0.0.0".into(),
        hostname: None,
        kernel: None,
        cpus: None,
    })
}

/// A map of a session with nothing measured, then one hotspot, one bottleneck and a
/// critical path whose span is unknown.
fn map(rec: &Recording) -> PerfMap {
    let mut m = build(rec, None, &BTreeMap::new());
    let pr = &mut m.doc.profile_result;
    pr.hotspots.push(Hotspot {
        function: "hot_fn".into(),
        module: Some("app".into()),
        location: None,
        self_time_ms: 123.45,
        self_share_pct: 42.0,
        self_cpu_time_ms: 100.0,
        total_time_ms: 200.0,
        total_share_pct: 68.0,
        on_cpu: true,
    });
    pr.top_bottlenecks.push(Bottleneck {
        step: "1.2".into(),
        function: "hot_fn".into(),
        in_function: None,
        location: None,
        module: None,
        class: Classification::Lock,
        share: 42.0,
        description: "waits on a mutex".into(),
        why_chain: vec!["because 3 threads share it".into()],
    });
    pr.performance_map.critical_path = Some(CriticalPathSummary {
        model: "critical_path".into(),
        length_ms: 290.0,
        span_ms: None,
        unattributed_ms: Some(1.0),
        unsampled_ms: Some(2.0),
        followed_waits_ms: Some(3.0),
    });
    m
}

#[test]
fn report_md_shows_the_typed_maps_figures() {
    let rec = recording();
    let md = markdown::render(&map(&rec));
    assert!(
        md.contains("| hot_fn | 123.5 | 42.0 | 100.0 | 68.0 | on-CPU | app |  |"),
        "{md}"
    );
    assert!(md.contains("1. **hot_fn** (step 1.2, Lock, 42.0% of wall time) — waits on a mutex"));
    assert!(md.contains("   - why: because 3 threads share it"));
    assert!(md.contains("| path length (shares' denominator) | 290.0 ms |"));
    // Unknown is a dash, not 0.
    assert!(md.contains("| span, first to last activity | — |"), "{md}");
}

#[test]
fn unknown_figures_are_null_in_the_json() {
    let rec = recording();
    let v = serde_json::to_value(&map(&rec).doc).expect("serializes");
    let pm = &v["profile_result"]["performance_map"];
    assert!(pm["baseline"].is_null());
    assert!(pm["thread_time_ms"].is_null());
    assert!(pm["wait_breakdown_ms"].is_null());
    assert!(pm["critical_path"]["span_ms"].is_null());
    let q = &v["profile_result"]["measurement_quality"];
    assert_eq!(q["sampler"], "none (baseline only)");
    assert!(q["overhead_pct"].is_null());
    assert!(q.get("samples").is_none(), "no sampler, no counts: {q}");
    assert_eq!(v["profile_result"]["e2e_test"]["command"], "./app --n 3");
    assert_eq!(v["profile_result"]["entry_point_info"]["type"], "command");
}

#[test]
fn the_summary_carries_the_maps_verdict() {
    let rec = recording();
    let m = map(&rec);
    let s = summary::build(
        &rec,
        &m,
        Status::Completed,
        None,
        Path::new("/o"),
        &BTreeMap::new(),
    );
    let v = serde_json::to_value(&s).expect("serializes");
    assert_eq!(v["status"], "completed");
    assert!(v["message"].is_null());
    assert_eq!(v["classification"], "Unknown");
    assert_eq!(v["top_bottlenecks"][0]["type"], "Lock");
    assert!(v["wall_time_ms"].is_null());
    let stopped = summary::stopped(&rec, Status::Interrupted, "stopped", Path::new("/o"));
    let v = serde_json::to_value(&stopped).expect("serializes");
    assert_eq!(v["status"], "interrupted");
    assert!(v.get("classification").is_none() && v.get("warnings").is_none());
}

#[test]
fn yaml_is_written_from_the_typed_document() {
    let rec = recording();
    let doc: &PerformanceMap = &map(&rec).doc;
    let yaml = super::to_yaml(doc).expect("yaml");
    assert!(yaml.contains("self_time_ms: 123.45"), "{yaml}");
    assert!(yaml.contains("span_ms: null"), "{yaml}");
}
