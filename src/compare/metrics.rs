//! The baseline metrics compared, one row each (key, unit, time or not, the figure of a
//! run), and the judgement of one metric (see `stats`).

use super::functions;
use super::{MetricChange, Verdict, stats};
use crate::profile::{Baseline, RunMeasurement};

/// One row per baseline metric: key, unit, whether it is a time, its figure of a run.
pub type Extract = fn(&RunMeasurement) -> Option<f64>;
pub const METRICS: &[(&str, &str, bool, Extract)] = &[
    ("wall_ms", "ms", true, |r| Some(r.wall_ms)),
    ("cpu_ms", "ms", true, |r| Some(r.cpu_ms())),
    ("user_ms", "ms", true, |r| Some(r.user_ms)),
    ("sys_ms", "ms", true, |r| Some(r.sys_ms)),
    ("max_rss_kb", "KiB", false, |r| Some(r.max_rss_kb as f64)),
    ("read_bytes", "B", false, |r| Some(r.read_bytes as f64)),
    ("write_bytes", "B", false, |r| Some(r.write_bytes as f64)),
    ("voluntary_cs", "", false, |r| Some(r.voluntary_cs as f64)),
    ("involuntary_cs", "", false, |r| {
        Some(r.involuntary_cs as f64)
    }),
];

pub fn values(b: Option<&Baseline>, f: Extract) -> Vec<f64> {
    b.map(|b| b.counted().filter_map(f).collect())
        .unwrap_or_default()
}

pub fn metric(key: &str, unit: &str, time: bool, before: &[f64], after: &[f64]) -> MetricChange {
    use functions::round3;
    let mb = crate::stats::median(before);
    let ma = crate::stats::median(after);
    let change = match (mb, ma) {
        (Some(b), Some(a)) if b > 0.0 => Some(round3((a / b - 1.0) * 100.0)),
        _ => None,
    };
    let ci = if mb.is_some_and(|b| b > 0.0) {
        stats::bootstrap_median_change(before, after)
    } else {
        None
    };
    let p = stats::welch(before, after).map(|(_, _, p)| p);
    let significant = p.is_some_and(|p| p < stats::ALPHA);
    let up = ma.zip(mb).is_some_and(|(a, b)| a > b);
    let verdict = match (p, significant, time, up) {
        (None, ..) => Verdict::Unknown,
        (_, false, ..) => Verdict::NoSignificantChange,
        (_, true, true, true) => Verdict::Slower,
        (_, true, true, false) => Verdict::Faster,
        (_, true, false, true) => Verdict::Higher,
        (_, true, false, false) => Verdict::Lower,
    };
    MetricChange {
        metric: key.to_string(),
        unit: unit.to_string(),
        before_median: mb.map(round3),
        after_median: ma.map(round3),
        change_pct: change,
        ci_low_pct: ci.map(|c| round3(c.0)),
        ci_high_pct: ci.map(|c| round3(c.1)),
        p_value: p.map(|p| (p * 1e6).round() / 1e6),
        significant,
        verdict,
        runs_needed: if significant {
            None
        } else {
            stats::runs_needed(before, after)
        },
    }
}
