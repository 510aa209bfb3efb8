//! `profmap compare BEFORE AFTER`: what changed between two sessions, as a pure function
//! of their recordings (the session module reads the inputs and writes the outputs).
//!
//! - Baseline metrics (wall, CPU, memory, I/O, context switches over the counted runs):
//!   both medians, the median's change with a 95 % bootstrap interval, and a verdict from
//!   Welch's t-test on the runs at α = 0.05 (see `stats`: it can judge the default 3 vs 3
//!   runs, which Mann-Whitney cannot). Not significant: the runs per side that would
//!   resolve the observed difference. Time metrics are faster/slower, others lower/higher.
//! - Functions (self and total, wall and CPU) from each side's profiled run, judged from
//!   their sample counts plus the runs' spread (see `functions`).
//! - Steps (critical-path wall and CPU time) and resources (blocked time, round trips)
//!   from each side's analysis (`parts`).
//! - A differential flamegraph (`flame`).
//!
//! Invariants: the verdict is the wall-time metric's; unknown is None, never 0; a side
//! without a deep profile makes a baseline-only comparison, said in `baseline_only` and a
//! warning; the same inputs give the same output byte for byte (fixed-seed bootstrap).

pub mod flame;
pub mod functions;
mod metrics;
pub mod parts;
pub mod render;
pub mod stats;
mod warnings;

use metrics::{METRICS, metric, values};
pub use warnings::{Warning, WarningOut};

use serde::Serialize;

use crate::profile::{Baseline, SampledProfile};
use functions::{FunctionChange, FunctionTable, Noise};

/// compare.json's format name and version.
pub const FORMAT: &str = "profmap-compare";
pub const VERSION: u32 = 1;

/// One side of the comparison, as the session found it.
#[derive(Debug, Clone)]
pub struct Side {
    /// The path given on the command line.
    pub input: String,
    /// The command measured, as recorded.
    pub command: Vec<String>,
    pub run_id: Option<String>,
    pub baseline: Option<Baseline>,
    /// The deep profile; None for a `bench` folder.
    pub profile: Option<SampledProfile>,
    /// Why the deep profile is missing, when it is (for the warning).
    pub missing_profile: Option<String>,
}

/// What a side was (compare.json `before` / `after`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SideInfo {
    pub input: String,
    pub command: Vec<String>,
    pub run_id: Option<String>,
    /// Counted baseline runs.
    pub runs: usize,
    /// Whether a deep profile was there to compare functions.
    pub has_profile: bool,
}

/// The judgement on one metric.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    Lower,
    Higher,
    NoSignificantChange,
    /// Fewer than 2 runs on a side, or the figure is unknown.
    Unknown,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Lower => "lower",
            Verdict::Higher => "higher",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::Unknown => "unknown (too few runs)",
        }
    }
}

/// One baseline metric before and after (compare.json `metrics[]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricChange {
    /// `wall_ms`, `cpu_ms`...
    pub metric: String,
    pub unit: String,
    pub before_median: Option<f64>,
    pub after_median: Option<f64>,
    /// Median after / median before − 1, percent; None when unknown or before is 0.
    pub change_pct: Option<f64>,
    /// 95 % bootstrap interval of `change_pct`.
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    /// Welch's two-sided p on the runs.
    pub p_value: Option<f64>,
    pub significant: bool,
    pub verdict: Verdict,
    /// Not significant: runs per side that would resolve the difference seen.
    pub runs_needed: Option<u32>,
}

/// The whole comparison (compare.json).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    pub format: String,
    pub version: u32,
    /// One sentence: the wall-time verdict with its figures.
    pub verdict_line: String,
    /// The wall-time verdict.
    pub verdict: Verdict,
    pub before: SideInfo,
    pub after: SideInfo,
    /// A side had no deep profile: metrics only.
    pub baseline_only: bool,
    pub metrics: Vec<MetricChange>,
    /// Largest changes first; empty when baseline-only.
    pub functions: Vec<FunctionChange>,
    /// Steps of the performance map whose wall time changed most; empty when
    /// baseline-only.
    pub steps: Vec<parts::StepChange>,
    /// Resources waited on, blocked time and round trips before/after; empty when
    /// neither side blocked on one (or baseline-only).
    pub resources: Vec<parts::ResourceChange>,
    /// How the figures were judged.
    pub method: String,
    pub warnings: Vec<WarningOut>,
}

fn info(s: &Side) -> SideInfo {
    SideInfo {
        input: s.input.clone(),
        command: s.command.clone(),
        run_id: s.run_id.clone(),
        runs: s.baseline.as_ref().map_or(0, |b| b.counted().count()),
        has_profile: s.profile.is_some(),
    }
}

/// The runs' coefficient of variation of a figure (0 when unknown).
fn runs_cv(b: Option<&Baseline>, f: metrics::Extract) -> f64 {
    let v = values(b, f);
    if v.len() < 2 {
        return 0.0;
    }
    let (m, var) = stats::mean_var(&v);
    if m > 0.0 { var.sqrt() / m } else { 0.0 }
}

fn noise(period_ms: f64, b: Option<&Baseline>) -> Noise {
    Noise {
        period_ms,
        cv: runs_cv(b, |r| Some(r.wall_ms)),
        cv_cpu: runs_cv(b, |r| Some(r.cpu_ms())),
    }
}

fn command_warnings(before: &Side, after: &Side) -> Option<Warning> {
    let (b, a) = (before.command.join(" "), after.command.join(" "));
    let prog = |c: &[String]| {
        c.first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
    };
    if prog(&before.command) != prog(&after.command) {
        Some(Warning::DifferentCommands {
            before: b,
            after: a,
        })
    } else if before.command.get(1..) != after.command.get(1..) {
        Some(Warning::DifferentArguments {
            before: b,
            after: a,
        })
    } else {
        None
    }
}

/// Compare two sides.
pub fn compare(before: &Side, after: &Side) -> Comparison {
    let mut warnings: Vec<Warning> = command_warnings(before, after).into_iter().collect();
    for (name, s) in [("BEFORE", before), ("AFTER", after)] {
        if s.profile.is_none() {
            warnings.push(Warning::BaselineOnly {
                side: name.into(),
                why: s
                    .missing_profile
                    .clone()
                    .unwrap_or_else(|| "no recording".into()),
            });
        }
        let runs = info(s).runs;
        if runs < 2 {
            warnings.push(Warning::TooFewRuns {
                side: name.into(),
                runs,
            });
        }
    }
    let metrics: Vec<MetricChange> = METRICS
        .iter()
        .map(|&(k, u, t, f)| {
            metric(
                k,
                u,
                t,
                &values(before.baseline.as_ref(), f),
                &values(after.baseline.as_ref(), f),
            )
        })
        .collect();
    let (steps, resources) = match (&before.profile, &after.profile) {
        (Some(pb), Some(pa)) => {
            let (ab, aa) = (crate::analyse::analyse(pb), crate::analyse::analyse(pa));
            (parts::steps(&ab, &aa), parts::resources(&ab, &aa))
        }
        _ => (Vec::new(), Vec::new()),
    };
    let functions = match (&before.profile, &after.profile) {
        (Some(pb), Some(pa)) => {
            let (tb, ta) = (FunctionTable::of(pb), FunctionTable::of(pa));
            let nb = noise(tb.period_ms, before.baseline.as_ref());
            let na = noise(ta.period_ms, after.baseline.as_ref());
            functions::changes(&tb, &ta, nb, na)
        }
        _ => Vec::new(),
    };
    let wall = metrics.first();
    let verdict = wall.map_or(Verdict::Unknown, |m| m.verdict);
    Comparison {
        format: FORMAT.into(),
        version: VERSION,
        verdict_line: wall.map_or_else(|| "wall time: unknown".into(), render::verdict_line),
        verdict,
        before: info(before),
        after: info(after),
        baseline_only: before.profile.is_none() || after.profile.is_none(),
        metrics,
        functions,
        steps,
        resources,
        method: METHOD.into(),
        warnings: warnings
            .into_iter()
            .map(|w| WarningOut {
                message: w.message(),
                warning: w,
            })
            .collect(),
    }
}

const METHOD: &str = "metrics: medians of the counted runs; change with a 95% bootstrap \
interval (2000 resamples, fixed seed); verdict from Welch's t-test on the runs, p < 0.05; \
runs needed for 80% power at the observed spread. functions: ms in each side's profiled \
run, significant when |z| > 3.29 with Poisson sampling noise plus the runs' spread \
(wall-time spread for wall figures, CPU-time spread for CPU figures).";

impl Comparison {
    /// The wall metric's change when it got slower with significance, percent.
    pub fn significant_slowdown_pct(&self) -> Option<f64> {
        let m = self.metrics.first()?;
        (m.verdict == Verdict::Slower).then_some(m.change_pct?)
    }
}
