//! The performance map (`performance_map.json` / `.yaml`): the schema's document built
//! from a recording and, when a deep profile was taken, from its analysis.
//!
//! Nothing here is invented: a figure the session did not measure is null (with a
//! warning) or an empty list, as the schema allows.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::baseline::{BaselineSummary, summarize};
use super::quality::{self, Quality};
use crate::analyse::Analysis;
use crate::profile::{Recording, RunMeasurement};

/// What the analysis of a deep profile contributes to the map.
#[derive(Debug, Clone, Default)]
pub struct DeepView {
    pub steps: Value,
    pub hotspots: Value,
    pub classification: String,
    pub bottleneck_detail: String,
    pub top_bottlenecks: Value,
    pub wait_breakdown_ms: Value,
    pub thread_wait_breakdown_ms: Value,
    pub critical_path: Value,
    pub thread_time_ms: f64,
    pub warnings: Vec<String>,
}

impl DeepView {
    /// The map's view of an analysis.
    pub fn from_analysis(a: &Analysis) -> DeepView {
        DeepView {
            steps: to_value(&a.steps),
            hotspots: to_value(&a.hotspots),
            classification: a.classification.as_str().to_string(),
            bottleneck_detail: a.bottleneck_detail.clone(),
            top_bottlenecks: to_value(&a.top_bottlenecks),
            wait_breakdown_ms: to_value(&a.wait_breakdown_ms),
            thread_wait_breakdown_ms: to_value(&a.thread_wait_breakdown_ms),
            critical_path: to_value(&a.critical_path),
            thread_time_ms: a.thread_time_ms,
            warnings: a.warnings.clone(),
        }
    }
}

/// Serialize anything serde can into a JSON value (null if it cannot).
fn to_value<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// The map and the pieces other outputs reuse.
#[derive(Debug, Clone)]
pub struct PerfMap {
    pub doc: Value,
    pub baseline: Option<BaselineSummary>,
    pub classification: String,
    pub bottleneck_detail: String,
    pub top_bottlenecks: Value,
    pub warnings: Vec<String>,
    /// How far the measurement can be trusted (`measurement_quality`).
    pub quality: Quality,
}

/// Shell-like quoting of argv for display.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The runs the baseline statistics are computed over, and a warning when they are not
/// the counted runs.
fn baseline_runs(rec: &Recording) -> (Vec<&RunMeasurement>, u32, Option<String>) {
    if let Some(b) = &rec.baseline {
        let counted: Vec<_> = b.counted().collect();
        if !counted.is_empty() {
            return (counted, b.warmup_runs, None);
        }
        if !b.runs.is_empty() {
            return (
                b.runs.iter().collect(),
                0,
                Some("no counted run completed: figures are from the warm-up run(s)".into()),
            );
        }
    }
    match &rec.profiled_run {
        Some(r) => (
            vec![r],
            0,
            Some("no baseline runs (record mode): figures are from the profiled run alone".into()),
        ),
        None => (Vec::new(), 0, None),
    }
}

/// Classification from the baseline alone: CPU when the tree kept ≥ 90% of a core busy,
/// otherwise unknown until a deep profile says where the waiting went.
fn baseline_classification(b: &BaselineSummary) -> (String, String) {
    let util = b.cpu_utilization;
    if util >= 0.9 {
        (
            "CPU".into(),
            format!(
                "CPU-bound: the process tree was on CPU {:.0}% of its {:.1} ms wall time (median of {} runs; {:.1} ms CPU)",
                util * 100.0,
                b.wall_time_ms,
                b.runs,
                b.cpu_time_ms
            ),
        )
    } else {
        let waiting = (b.wall_time_ms - b.cpu_time_ms).max(0.0);
        (
            "Unknown".into(),
            format!(
                "the process tree was on CPU only {:.0}% of its {:.1} ms wall time (median of {} runs): \
                 about {:.1} ms went to waiting; the deep profile (`profmap run`) attributes it",
                util * 100.0,
                b.wall_time_ms,
                b.runs,
                waiting
            ),
        )
    }
}

/// The session's classification, detail, top bottlenecks, steps and hotspots: the deep
/// profile's when there is one, the baseline's otherwise — and no verdict at all (the one
/// place a verdict is overruled) when the profile is too thin to support one.
fn verdict(
    deep: Option<&DeepView>,
    baseline: Option<&BaselineSummary>,
    quality: &Quality,
) -> (String, String, Value, Value, Value) {
    let (mut classification, mut detail, mut top, steps, hotspots) = match deep {
        Some(d) => (
            d.classification.clone(),
            d.bottleneck_detail.clone(),
            d.top_bottlenecks.clone(),
            d.steps.clone(),
            d.hotspots.clone(),
        ),
        None => {
            let (c, d) = baseline
                .map(baseline_classification)
                .unwrap_or(("Unknown".into(), "nothing was measured".into()));
            (c, d, json!([]), json!([]), json!([]))
        }
    };
    if let Some(why) = quality.verdict_withheld() {
        classification = "Unknown".into();
        detail = why;
        top = json!([]);
    }
    (classification, detail, top, steps, hotspots)
}

/// Build the map. `artifacts` maps artifact names to paths relative to the output folder.
pub fn build(
    rec: &Recording,
    deep: Option<&DeepView>,
    artifacts: &BTreeMap<String, String>,
) -> PerfMap {
    let (runs, warmups, runs_warning) = baseline_runs(rec);
    let baseline = summarize(&runs, warmups);
    let mut warnings: Vec<String> = rec.warnings.clone();
    warnings.extend(runs_warning);

    let quality = quality::assess(rec, baseline.as_ref());
    let (classification, detail, top, steps, hotspots) = verdict(deep, baseline.as_ref(), &quality);
    if let Some(d) = deep {
        warnings.extend(d.warnings.iter().cloned());
    }
    warnings.extend(quality.headline_texts());

    let command = shell_join(&rec.meta.command);
    let mut pids: Vec<i32> = runs.iter().map(|r| r.pid).collect();
    if let Some(p) = rec.profiled_run.as_ref().filter(|p| !pids.contains(&p.pid)) {
        pids.push(p.pid);
    }
    let baseline_value = baseline
        .as_ref()
        .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let quality_value = measurement_quality(rec, &quality);

    let profile_result = json!({
        "entry_point_info": {
            "type": "command",
            "location": rec.meta.command.first(),
            "route": null,
            "function": null,
            "command": rec.meta.command,
            "pids": pids,
        },
        "performance_map": {
            "test_command": command,
            "baseline": baseline_value,
            "steps": steps,
            "bottleneck_classification": classification,
            "bottleneck_detail": detail,
            "top_bottlenecks": top,
            "wait_breakdown_ms": deep.map(|d| d.wait_breakdown_ms.clone()),
            "thread_wait_breakdown_ms": deep.map(|d| d.thread_wait_breakdown_ms.clone()),
            "critical_path": deep.map(|d| d.critical_path.clone()),
            "thread_time_ms": deep.map(|d| d.thread_time_ms),
        },
        "bottleneck_classification": classification,
        "bottleneck_detail": detail,
        "top_bottlenecks": top,
        "hotspots": hotspots,
        "optimization_hints": [],
        "suspicion_stack": [],
        "e2e_test": {"command": command, "source": "user"},
        "instrumented_files": [],
        "wrong_tool_indicators": [],
        "measurement_quality": quality_value,
        "environment": {
            "hostname": rec.meta.hostname,
            "kernel": rec.meta.kernel,
            "cpus": rec.meta.cpus,
            "tool_version": rec.meta.tool_version,
            "run_id": rec.meta.run_id,
            "started_unix_s": rec.meta.started_unix_s,
        },
        "artifacts": artifacts,
        "warnings": warnings,
    });
    let doc = json!({
        "schema_version": 1,
        "tool": {"name": "profmap", "version": rec.meta.tool_version},
        "profile_result": profile_result,
    });
    PerfMap {
        doc,
        baseline,
        classification,
        bottleneck_detail: detail,
        top_bottlenecks: top,
        warnings,
        quality,
    }
}

/// `measurement_quality`: the sampler's own counts and every quality warning.
fn measurement_quality(rec: &Recording, q: &Quality) -> Value {
    let Some(s) = &rec.sampled else {
        return json!({
            "sampler": "none (baseline only)",
            "overhead_pct": null,
            "warnings": q.texts(),
        });
    };
    json!({
        "sampler": s.sampler,
        "frequency_hz": s.frequency_hz,
        "samples": s.quality.samples,
        "off_cpu_intervals": s.quality.off_cpu_intervals,
        "lost_samples": s.quality.lost_samples,
        "unwind_failures": s.quality.unwind_failures,
        "truncated_stacks": s.quality.truncated_stacks,
        "unnamed_addresses": s.quality.unnamed_addresses,
        "profiled_run_wall_ms": s.wall_ms,
        "overhead_pct": q.overhead_pct,
        "warnings": q.texts(),
    })
}
