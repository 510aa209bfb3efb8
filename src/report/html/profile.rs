//! The deep profile's tables: hotspots and steps (sortable), wait classes, the waits
//! per resource and the critical path's figures — from the typed map, escaped cells.
//! A section whose data is absent (a `bench` session) says so or is left out.

use super::esc::{self, Sort, num, opt};
use crate::analyse::{Hotspot, Step};
use crate::report::map::PerformanceMapSection;
use crate::report::rows;

/// Hotspots by self time, as the map orders them.
pub fn hotspots(o: &mut String, list: &[Hotspot]) {
    esc::heading(o, "hotspots", "Hotspots (self time)");
    if list.is_empty() {
        esc::para(o, "No deep profile: no hotspots.");
        return;
    }
    let rows = rows::hotspot_rows(list);
    esc::table(o, &rows::HOTSPOT_HEADER, &rows, Sort::Yes, &[1, 2, 3, 4]);
}

/// The step tree as a table.
pub fn steps(o: &mut String, list: &[Step]) {
    esc::heading(o, "steps", "Steps");
    if list.is_empty() {
        esc::para(o, "No deep profile: no steps.");
        return;
    }
    let rows = rows::step_rows(list, "\u{a0}\u{a0}");
    esc::table(o, &rows::STEP_HEADER, &rows, Sort::Yes, &[2, 3, 4, 5]);
}

/// Critical-path and thread time per wait category, largest critical time first.
pub fn wait_classes(o: &mut String, pm: &PerformanceMapSection) {
    let rows = rows::wait_class_rows(pm);
    if rows.is_empty() {
        return;
    }
    esc::heading(o, "waits", "Wait classes");
    esc::para(
        o,
        "The run's time by what its threads were doing: critical ms is the part the run \
         waited for (its shares add to 100%), thread ms the summed time of every thread.",
    );
    esc::table(o, &rows::WAIT_CLASS_HEADER, &rows, Sort::Yes, &[3, 4, 5]);
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
    let dirs = crate::report::dirs::rows(rs);
    if !dirs.is_empty() {
        esc::para(
            o,
            "Files by directory: the waits on files summed under the directories they \
             spread out from (the first row: all of them).",
        );
        esc::table(
            o,
            &crate::report::dirs::HEADER,
            &dirs,
            Sort::Yes,
            &[1, 2, 3, 4],
        );
    }
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
