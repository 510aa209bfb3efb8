//! Table rows shared by report.md and report.html: the same columns, the same figures
//! (one decimal), the same shortened names — each view only frames and escapes them.

use super::names::short;
use crate::analyse::{Hotspot, Step};

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
