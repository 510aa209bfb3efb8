//! The performance map (`performance_map.json` / `.yaml`): the schema's document built
//! from a recording and, when a deep profile was taken, from its analysis. The
//! document's types are in [`super::map`]; this module fills them.
//!
//! Nothing here is invented: a figure the session did not measure is null (with a
//! warning) or an empty list, as the schema allows.

use std::collections::BTreeMap;

use super::baseline::{BaselineSummary, summarize};
use super::map::{
    E2eSource, E2eTest, EntryPointInfo, EntryPointType, Environment, MeasurementQuality,
    PerformanceMap, PerformanceMapSection, ProfileResult, PythonReadQuality, SamplerCounts, Tool,
};
use super::quality::{self, Quality};
use crate::analyse::{Analysis, Bottleneck, Classification, CriticalPathSummary, Hotspot, Step};
use crate::profile::{Recording, RunMeasurement};

/// What the analysis of a deep profile contributes to the map.
#[derive(Debug, Clone)]
pub struct DeepView {
    /// The depth-limited step tree.
    pub steps: Vec<Step>,
    /// Functions by self time.
    pub hotspots: Vec<Hotspot>,
    /// The analysis's class.
    pub classification: Classification,
    /// The sentence behind the class.
    pub bottleneck_detail: String,
    /// The top bottlenecks, largest first.
    pub top_bottlenecks: Vec<Bottleneck>,
    /// Critical-path time per wait category, ms.
    pub wait_breakdown_ms: BTreeMap<String, f64>,
    /// Summed thread time per wait category, ms.
    pub thread_wait_breakdown_ms: BTreeMap<String, f64>,
    /// How the shares' denominator was made.
    pub critical_path: CriticalPathSummary,
    pub resources: Vec<crate::analyse::resources::ResourceUse>,
    /// Round trips of the profiled run's clients (None: socket traffic not recorded).
    pub round_trips: crate::analyse::resources::RoundTrips,
    /// Sum of all sample weights, ms.
    pub thread_time_ms: f64,
    /// Suspicions, hints and wrong-tool verdicts.
    pub diagnosis: crate::analyse::diagnose::Diagnosis,
    /// Each escalation decision with its reason.
    pub escalation: Vec<crate::profile::EscalationDecision>,
    /// Level 2: the line tables the escalation kept.
    pub line_tables: Vec<crate::analyse::lines::LineTable>,
    /// The analysis's warnings.
    pub warnings: Vec<String>,
}

impl DeepView {
    /// The map's view of an analysis.
    pub fn from_analysis(a: &Analysis) -> DeepView {
        DeepView {
            steps: a.steps.clone(),
            hotspots: a.hotspots.clone(),
            classification: a.classification,
            round_trips: a.round_trips,
            bottleneck_detail: a.bottleneck_detail.clone(),
            top_bottlenecks: a.top_bottlenecks.clone(),
            wait_breakdown_ms: a.wait_breakdown_ms.clone(),
            thread_wait_breakdown_ms: a.thread_wait_breakdown_ms.clone(),
            critical_path: a.critical_path.clone(),
            resources: a.resources.clone(),
            thread_time_ms: a.thread_time_ms,
            diagnosis: a.diagnosis.clone(),
            escalation: a.escalation.clone(),
            line_tables: a.line_tables.clone(),
            warnings: a.warnings.clone(),
        }
    }
}

/// The map, and the assessment the terminal reuses.
#[derive(Debug, Clone)]
pub struct PerfMap {
    /// The document every view renders from.
    pub doc: PerformanceMap,
    /// How far the measurement can be trusted (`measurement_quality`, typed).
    pub quality: Quality,
}

impl PerfMap {
    /// The session's result.
    pub fn result(&self) -> &ProfileResult {
        &self.doc.profile_result
    }

    /// The baseline summary, when runs were measured.
    pub fn baseline(&self) -> Option<&BaselineSummary> {
        self.result().performance_map.baseline.as_ref()
    }
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
fn baseline_classification(b: &BaselineSummary) -> (Classification, String) {
    let util = b.cpu_utilization;
    if util >= 0.9 {
        (
            Classification::Cpu,
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
            Classification::Unknown,
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

/// The verdict of a session and the lists that go with it.
struct Verdict {
    classification: Classification,
    detail: String,
    top: Vec<Bottleneck>,
    steps: Vec<Step>,
    hotspots: Vec<Hotspot>,
}

/// The session's classification, detail, top bottlenecks, steps and hotspots: the deep
/// profile's when there is one, the baseline's otherwise — and no verdict at all (the one
/// place a verdict is overruled) when the profile is too thin to support one.
fn verdict(
    deep: Option<&DeepView>,
    baseline: Option<&BaselineSummary>,
    quality: &Quality,
) -> Verdict {
    let mut v = match deep {
        Some(d) => Verdict {
            classification: d.classification,
            detail: d.bottleneck_detail.clone(),
            top: d.top_bottlenecks.clone(),
            steps: d.steps.clone(),
            hotspots: d.hotspots.clone(),
        },
        None => {
            let (classification, detail) = baseline
                .map(baseline_classification)
                .unwrap_or((Classification::Unknown, "nothing was measured".into()));
            Verdict {
                classification,
                detail,
                top: Vec::new(),
                steps: Vec::new(),
                hotspots: Vec::new(),
            }
        }
    };
    if let Some(why) = quality.verdict_withheld() {
        v.classification = Classification::Unknown;
        v.detail = why;
        v.top = Vec::new();
    } else if let Some(caveat) = quality.verdict_caveat() {
        v.detail = format!("{}; {caveat}", v.detail.trim_end_matches('.'));
    }
    v
}

/// The baseline's round trips come from the profiled run (its socket tracepoints):
/// the counted runs are not traced.
fn round_trips_from_profile(b: &mut BaselineSummary, deep: Option<&DeepView>) {
    let rt = deep.map(|d| d.round_trips).unwrap_or_default();
    b.http_round_trips = rt.http;
    b.db_round_trips = rt.db;
    b.warnings.push(match (rt.http, rt.db) {
        (Some(_), Some(_)) => "http_round_trips and db_round_trips are counted in the profiled \
             run (socket tracepoints), not in the counted runs"
            .to_string(),
        _ => "http_round_trips and db_round_trips unknown (null): socket traffic was not \
              recorded (no profiled run, or sock:sock_send_length/sock_recv_length not \
              available — run as root)"
            .to_string(),
    });
}

/// Each file of the instrumentation changelog once, in order.
fn instrumented_files(rec: &Recording) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for c in &rec.instrumented {
        if !files.contains(&c.file) {
            files.push(c.file.clone());
        }
    }
    files
}

/// Build the map. `artifacts` maps artifact names to paths relative to the output folder.
pub fn build(
    rec: &Recording,
    deep: Option<&DeepView>,
    artifacts: &BTreeMap<String, String>,
) -> PerfMap {
    let (runs, warmups, runs_warning) = baseline_runs(rec);
    let mut baseline = summarize(&runs, warmups);
    if let Some(b) = baseline.as_mut() {
        round_trips_from_profile(b, deep);
    }
    let mut warnings: Vec<String> = rec.warnings.clone();
    warnings.extend(runs_warning);

    let quality = quality::assess(rec, baseline.as_ref());
    let v = verdict(deep, baseline.as_ref(), &quality);
    if let Some(d) = deep {
        warnings.extend(d.warnings.iter().cloned());
    }
    // A withheld verdict withholds the diagnosis too: it rests on the same samples.
    let diagnosis = deep
        .filter(|_| quality.verdict_withheld().is_none())
        .map(|d| d.diagnosis.clone())
        .unwrap_or_default();
    warnings.extend(diagnosis.warnings.iter().cloned());
    warnings.extend(quality.headline_texts());

    let command = shell_join(&rec.meta.command);
    let mut pids: Vec<i32> = runs.iter().map(|r| r.pid).collect();
    if let Some(p) = rec.profiled_run.as_ref().filter(|p| !pids.contains(&p.pid)) {
        pids.push(p.pid);
    }
    let performance_map = PerformanceMapSection {
        test_command: command.clone(),
        baseline,
        steps: v.steps,
        bottleneck_classification: v.classification,
        bottleneck_detail: v.detail.clone(),
        top_bottlenecks: v.top.clone(),
        wait_breakdown_ms: deep.map(|d| d.wait_breakdown_ms.clone()),
        thread_wait_breakdown_ms: deep.map(|d| d.thread_wait_breakdown_ms.clone()),
        critical_path: deep.map(|d| d.critical_path.clone()),
        resources: deep.map(|d| d.resources.clone()).unwrap_or_default(),
        thread_time_ms: deep.map(|d| d.thread_time_ms),
    };
    let profile_result = ProfileResult {
        entry_point_info: EntryPointInfo {
            kind: EntryPointType::Command,
            location: rec.meta.command.first().cloned(),
            route: None,
            function: None,
            command: rec.meta.command.clone(),
            pids,
        },
        performance_map,
        bottleneck_classification: v.classification,
        bottleneck_detail: v.detail,
        top_bottlenecks: v.top,
        hotspots: v.hotspots,
        optimization_hints: diagnosis.hints,
        suspicion_stack: diagnosis.suspicions,
        e2e_test: E2eTest {
            command,
            source: E2eSource::User,
        },
        instrumented_files: instrumented_files(rec),
        instrumentation_changes: rec.instrumented.clone(),
        traced_functions: rec.traced.clone(),
        escalation: deep.map(|d| d.escalation.clone()).unwrap_or_default(),
        line_tables: deep.map(|d| d.line_tables.clone()).unwrap_or_default(),
        memory_profile: rec.memory.clone(),
        wrong_tool_indicators: diagnosis.wrong_tool.iter().map(|w| w.indicator).collect(),
        wrong_tool_evidence: diagnosis.wrong_tool,
        measurement_quality: measurement_quality(rec, &quality),
        environment: environment(rec),
        artifacts: artifacts.clone(),
        warnings,
    };
    let doc = PerformanceMap {
        schema_version: 1,
        tool: Tool {
            name: "profmap".into(),
            version: rec.meta.tool_version.clone(),
        },
        profile_result,
    };
    PerfMap { doc, quality }
}

/// `environment`: the recording's machine and session.
fn environment(rec: &Recording) -> Environment {
    let m = &rec.meta;
    Environment {
        hostname: m.hostname.clone(),
        kernel: m.kernel.clone(),
        cpus: m.cpus,
        tool_version: m.tool_version.clone(),
        run_id: m.run_id.clone(),
        started_unix_s: m.started_unix_s,
    }
}

/// `measurement_quality`: the sampler's own counts and every quality warning.
fn measurement_quality(rec: &Recording, q: &Quality) -> MeasurementQuality {
    let Some(s) = &rec.sampled else {
        return MeasurementQuality {
            sampler: "none (baseline only)".into(),
            counts: None,
            overhead_pct: None,
            python: None,
            warnings: q.texts(),
        };
    };
    MeasurementQuality {
        sampler: s.sampler.clone(),
        counts: Some(SamplerCounts {
            frequency_hz: s.frequency_hz,
            samples: s.quality.samples,
            off_cpu_intervals: s.quality.off_cpu_intervals,
            lost_samples: s.quality.lost_samples,
            unwind_failures: s.quality.unwind_failures,
            truncated_stacks: s.quality.truncated_stacks,
            unnamed_addresses: s.quality.unnamed_addresses,
            profiled_run_wall_ms: s.wall_ms,
        }),
        overhead_pct: q.overhead_pct,
        python: python_quality(&s.python),
        warnings: q.texts(),
    }
}

/// `measurement_quality.python`, from the recording's Python table.
fn python_quality(py: &crate::profile::PythonStacks) -> Option<PythonReadQuality> {
    if py.interpreters.is_empty() && py.reads == 0 {
        return None;
    }
    let pct = |part: u64, whole: u64| {
        (whole > 0).then(|| (part as f64 * 1000.0 / whole as f64).round() / 10.0)
    };
    let m = py.merge.as_ref();
    Some(PythonReadQuality {
        interpreters: py
            .interpreters
            .iter()
            .map(|i| format!("CPython {} (pid {})", i.version, i.pid))
            .collect(),
        rate_hz: py.rate_hz,
        reads: py.reads,
        failed_reads: py.failed_reads,
        failed_pct: pct(py.failed_reads, py.reads),
        mean_read_us: (py.reads > 0)
            .then(|| (py.read_ns as f64 / py.reads as f64 / 100.0).round() / 10.0),
        target_paused: false,
        candidates: m.map(|m| m.candidates),
        merged_pct: m.and_then(|m| pct(m.merged, m.candidates)),
        no_python_sample_near: m.map(|m| m.no_python_sample_near),
        no_eval_frame: m.map(|m| m.no_eval_frame),
        no_consistent_read: m.map(|m| m.no_consistent_read),
    })
}
