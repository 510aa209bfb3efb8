//! Table rows shared by report.md and report.html: the same columns, the same figures
//! (one decimal), the same shortened names — each view only frames and escapes them.

use super::map::PerformanceMapSection;
use super::names::short;
use crate::analyse::classify::WaitCategory;
use crate::analyse::{Hotspot, Step};
use crate::profile::InstrumentedFile;

/// The hotspot table's columns.
pub const HOTSPOT_HEADER: [&str; 8] = [
    "function",
    "self ms",
    "self %",
    "self CPU ms",
    "total %",
    "where",
    "module",
    "location",
];

/// The step table's columns.
pub const STEP_HEADER: [&str; 8] = [
    "id",
    "step",
    "wall ms",
    "thread ms",
    "CPU ms",
    "share %",
    "class",
    "location",
];

fn f(v: f64) -> String {
    format!("{v:.1}")
}

/// One row per hotspot, in the map's order.
pub fn hotspot_rows(list: &[Hotspot]) -> Vec<Vec<String>> {
    list.iter()
        .map(|x| {
            vec![
                short(&x.function),
                f(x.self_time_ms),
                f(x.self_share_pct),
                f(x.self_cpu_time_ms),
                f(x.total_share_pct),
                if x.on_cpu { "on-CPU" } else { "off-CPU" }.into(),
                x.module.clone().unwrap_or_default(),
                x.location.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// One row per step in tree order, children's names indented by `indent` per level.
pub fn step_rows(steps: &[Step], indent: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for s in steps {
        push_step(s, 0, indent, &mut rows);
    }
    rows
}

fn push_step(s: &Step, depth: usize, indent: &str, rows: &mut Vec<Vec<String>>) {
    let trunc = if s.truncated { " …" } else { "" };
    rows.push(vec![
        s.id.clone(),
        format!("{}{}{trunc}", indent.repeat(depth), short(&s.function)),
        f(s.wall_time_ms),
        f(s.thread_time_ms),
        f(s.cpu_time_ms),
        f(s.time_share_pct),
        s.classification.as_str().to_string(),
        s.location.clone().unwrap_or_default(),
    ]);
    for ch in &s.children {
        push_step(ch, depth + 1, indent, rows);
    }
}

/// The wait-class table's columns.
pub const WAIT_CLASS_HEADER: [&str; 6] = [
    "category",
    "what",
    "class",
    "critical ms",
    "share %",
    "thread ms",
];

/// Critical-path and summed thread time per wait category with any time, largest
/// critical time first; empty without a deep profile.
pub fn wait_class_rows(pm: &PerformanceMapSection) -> Vec<Vec<String>> {
    let (Some(crit), Some(thread)) = (&pm.wait_breakdown_ms, &pm.thread_wait_breakdown_ms) else {
        return Vec::new();
    };
    let total: f64 = crit.values().sum();
    let opt = |v: Option<f64>| v.map_or("—".to_string(), f);
    let mut rows: Vec<(f64, Vec<String>)> = WaitCategory::ALL
        .iter()
        .filter_map(|c| {
            let (k, t) = (crit.get(c.key()).copied(), thread.get(c.key()).copied());
            if k.unwrap_or(0.0) < 0.05 && t.unwrap_or(0.0) < 0.05 {
                return None;
            }
            let share = k.filter(|_| total > 0.0).map(|k| 100.0 * k / total);
            let row = vec![
                c.key().to_string(),
                c.describe().to_string(),
                c.classification().as_str().to_string(),
                opt(k),
                opt(share),
                opt(t),
            ];
            Some((k.unwrap_or(0.0), row))
        })
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The instrumentation changelog's columns (Part B).
pub const CHANGELOG_HEADER: [&str; 4] = ["File", "Change type", "What", "Lines"];

/// One row per inserted block or created file.
pub fn changelog_rows(changes: &[InstrumentedFile]) -> Vec<Vec<String>> {
    changes
        .iter()
        .map(|c| {
            vec![
                c.file.clone(),
                c.change_type.clone(),
                c.what.clone(),
                c.lines.clone(),
            ]
        })
        .collect()
}
