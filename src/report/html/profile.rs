//! The deep profile's tables: hotspots and steps (sortable), wait classes, the waits
//! per resource and the critical path's figures — from the typed map, escaped cells.
//! A section whose data is absent (a `bench` session) says so or is left out.

use super::esc::{self, Sort, num, opt};
use crate::analyse::classify::WaitCategory;
use crate::analyse::{Hotspot, Step};
use crate::report::map::PerformanceMapSection;
use crate::report::names::short;

/// Hotspots by self time, as the map orders them.
pub fn hotspots(o: &mut String, list: &[Hotspot]) {
    esc::heading(o, "hotspots", "Hotspots (self time)");
    if list.is_empty() {
        esc::para(o, "No deep profile: no hotspots.");
        return;
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|x| {
            vec![
                short(&x.function),
                num(x.self_time_ms, 1),
                num(x.self_share_pct, 1),
                num(x.self_cpu_time_ms, 1),
                num(x.total_share_pct, 1),
                if x.on_cpu { "on-CPU" } else { "off-CPU" }.into(),
                x.module.clone().unwrap_or_default(),
                x.location.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = [
        "function",
        "self ms",
        "self %",
        "self CPU ms",
        "total %",
        "where",
        "module",
        "location",
    ];
    esc::table(o, &header, &rows, Sort::Yes, &[1, 2, 3, 4]);
}

/// One row per step, children indented under their parent (tree order).
fn step_rows(s: &Step, depth: usize, rows: &mut Vec<Vec<String>>) {
    let trunc = if s.truncated { " …" } else { "" };
    rows.push(vec![
        s.id.clone(),
        format!(
            "{}{}{trunc}",
            "\u{a0}\u{a0}".repeat(depth),
            short(&s.function)
        ),
        num(s.wall_time_ms, 1),
        num(s.thread_time_ms, 1),
        num(s.cpu_time_ms, 1),
        num(s.time_share_pct, 1),
        s.classification.as_str().to_string(),
        s.location.clone().unwrap_or_default(),
    ]);
    for ch in &s.children {
        step_rows(ch, depth + 1, rows);
    }
}

/// The step tree as a table.
pub fn steps(o: &mut String, list: &[Step]) {
    esc::heading(o, "steps", "Steps");
    if list.is_empty() {
        esc::para(o, "No deep profile: no steps.");
        return;
    }
    let mut rows = Vec::new();
    for s in list {
        step_rows(s, 0, &mut rows);
    }
    let header = [
        "id",
        "step",
        "wall ms",
        "thread ms",
        "CPU ms",
        "share %",
        "class",
        "location",
    ];
    esc::table(o, &header, &rows, Sort::Yes, &[2, 3, 4, 5]);
}

/// Critical-path and thread time per wait category, largest critical time first.
pub fn wait_classes(o: &mut String, pm: &PerformanceMapSection) {
    let (Some(crit), Some(thread)) = (&pm.wait_breakdown_ms, &pm.thread_wait_breakdown_ms) else {
        return;
    };
    let total: f64 = crit.values().sum();
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
                opt(k, 1),
                opt(share, 1),
                opt(t, 1),
            ];
            Some((k.unwrap_or(0.0), row))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    esc::heading(o, "waits", "Wait classes");
    esc::para(
        o,
        "The run's time by what its threads were doing: critical ms is the part the run \
         waited for (its shares add to 100%), thread ms the summed time of every thread.",
    );
    let rows: Vec<Vec<String>> = rows.into_iter().map(|(_, r)| r).collect();
    let header = [
        "category",
        "what",
        "class",
        "critical ms",
        "share %",
        "thread ms",
    ];
    esc::table(o, &header, &rows, Sort::Yes, &[3, 4, 5]);
}

/// What the threads blocked on, most blocked time first (left out when none).
pub fn resources(o: &mut String, rs: &[crate::analyse::resources::ResourceUse]) {
    if rs.is_empty() {
        return;
    }
    esc::heading(o, "resources", "Waits per resource");
    let role = |r: crate::analyse::resources::ResourceRole| {
        serde_json::to_value(r)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let n = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    let rows: Vec<Vec<String>> = rs
        .iter()
        .take(30)
        .map(|r| {
            let traffic = match (r.bytes_sent, r.bytes_received) {
                (Some(s), Some(rc)) => format!("{} / {}", esc::bytes(s), esc::bytes(rc)),
                _ => "—".to_string(),
            };
            vec![
                role(r.role),
                r.name.clone(),
                r.pid.to_string(),
                r.intervals.to_string(),
                num(r.blocked_ms, 1),
                opt(r.critical_ms, 1),
                n(r.calls),
                traffic,
                n(r.round_trips),
                n(r.connections),
            ]
        })
        .collect();
    let header = [
        "what",
        "resource",
        "pid",
        "blocked calls",
        "blocked ms",
        "critical ms",
        "calls",
        "bytes sent / received",
        "round trips",
        "connections opened",
    ];
    esc::table(o, &header, &rows, Sort::Yes, &[2, 3, 4, 5, 6, 8, 9]);
}

/// The critical path's own figures.
pub fn critical_path(o: &mut String, pm: &PerformanceMapSection) {
    let Some(cp) = &pm.critical_path else {
        return;
    };
    esc::heading(o, "critical-path", "Critical path");
    let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{} ms", num(v, 1)));
    esc::pairs(
        o,
        &[
            ("model", cp.model.clone()),
            ("path length (shares' denominator)", ms(Some(cp.length_ms))),
            ("span, first to last activity", ms(cp.span_ms)),
            ("waits followed to their waker", ms(cp.followed_waits_ms)),
            ("on-CPU on the path with no sample", ms(cp.unsampled_ms)),
            ("not attributable to a thread", ms(cp.unattributed_ms)),
        ],
    );
}
