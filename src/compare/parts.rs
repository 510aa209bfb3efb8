//! Per-step and per-resource differences, from each side's analysis (`analyse`).
//!
//! Steps are matched by their path of names from the root (`two_funcs;main;func_one`),
//! process and thread ids removed (`name (1234)` → `name`), since two runs never share
//! pids; their critical-path wall time and CPU time are compared. Resources are matched
//! by kind and name (a file's path, a socket's peer or service); their blocked time and,
//! where socket traffic was recorded, round trips are compared. Unknown is None.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::functions::round3;
use crate::analyse::{Analysis, Step};

/// How many steps and resources are kept.
pub const MAX_ROWS: usize = 15;
/// Steps deeper than this are not compared (the map's tree is depth-limited anyway).
const MAX_DEPTH: usize = 8;

/// One step before and after (compare.json `steps[]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepChange {
    /// Names from the root, `;`-separated, ids removed.
    pub path: String,
    pub before_wall_ms: Option<f64>,
    pub after_wall_ms: Option<f64>,
    pub before_cpu_ms: Option<f64>,
    pub after_cpu_ms: Option<f64>,
    /// after − before of the wall time (a missing side counts as absent, 0), ms.
    pub change_wall_ms: f64,
}

/// One resource before and after (compare.json `resources[]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ResourceChange {
    /// `file`, `socket_tcp`...
    pub kind: String,
    pub name: String,
    pub before_blocked_ms: Option<f64>,
    pub after_blocked_ms: Option<f64>,
    pub before_round_trips: Option<u64>,
    pub after_round_trips: Option<u64>,
}

/// `name (123)` → `name`; other names unchanged.
pub fn strip_id(name: &str) -> &str {
    match name.rsplit_once(" (") {
        Some((n, rest))
            if rest.len() > 1
                && rest.ends_with(')')
                && rest[..rest.len() - 1].chars().all(|c| c.is_ascii_digit()) =>
        {
            n
        }
        _ => name,
    }
}

fn flatten(steps: &[Step], prefix: &str, depth: usize, out: &mut BTreeMap<String, (f64, f64)>) {
    if depth > MAX_DEPTH {
        return;
    }
    for s in steps {
        let path = if prefix.is_empty() {
            strip_id(&s.function).to_string()
        } else {
            format!("{prefix};{}", strip_id(&s.function))
        };
        let e = out.entry(path.clone()).or_insert((0.0, 0.0));
        e.0 += s.wall_time_ms;
        e.1 += s.cpu_time_ms;
        flatten(&s.children, &path, depth + 1, out);
    }
}

/// The steps whose wall time changed most, largest first.
pub fn steps(before: &Analysis, after: &Analysis) -> Vec<StepChange> {
    let (mut b, mut a) = (BTreeMap::new(), BTreeMap::new());
    flatten(&before.steps, "", 0, &mut b);
    flatten(&after.steps, "", 0, &mut a);
    let paths: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let mut out: Vec<StepChange> = paths
        .into_iter()
        .map(|p| {
            let (x, y) = (b.get(p), a.get(p));
            StepChange {
                path: p.clone(),
                before_wall_ms: x.map(|v| round3(v.0)),
                after_wall_ms: y.map(|v| round3(v.0)),
                before_cpu_ms: x.map(|v| round3(v.1)),
                after_cpu_ms: y.map(|v| round3(v.1)),
                change_wall_ms: round3(y.map_or(0.0, |v| v.0) - x.map_or(0.0, |v| v.0)),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        y.change_wall_ms
            .abs()
            .total_cmp(&x.change_wall_ms.abs())
            .then(x.path.cmp(&y.path))
    });
    out.truncate(MAX_ROWS);
    out
}

type ResourceRow = (f64, Option<u64>);

fn resource_rows(a: &Analysis) -> BTreeMap<(String, String), ResourceRow> {
    let mut out: BTreeMap<(String, String), ResourceRow> = BTreeMap::new();
    for r in &a.resources {
        let kind = serde_json::to_value(r.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "other".into());
        let name = r.service.clone().unwrap_or_else(|| r.name.clone());
        let e = out.entry((kind, name)).or_insert((0.0, None));
        e.0 += r.blocked_ms;
        if let Some(n) = r.round_trips {
            e.1 = Some(e.1.unwrap_or(0) + n);
        }
    }
    out
}

/// The resources whose blocked time changed most, largest first; empty when neither
/// side blocked on any.
pub fn resources(before: &Analysis, after: &Analysis) -> Vec<ResourceChange> {
    let (b, a) = (resource_rows(before), resource_rows(after));
    let keys: BTreeSet<&(String, String)> = b.keys().chain(a.keys()).collect();
    let mut out: Vec<ResourceChange> = keys
        .into_iter()
        .map(|k| {
            let (x, y) = (b.get(k), a.get(k));
            ResourceChange {
                kind: k.0.clone(),
                name: k.1.clone(),
                before_blocked_ms: x.map(|v| round3(v.0)),
                after_blocked_ms: y.map(|v| round3(v.0)),
                before_round_trips: x.and_then(|v| v.1),
                after_round_trips: y.and_then(|v| v.1),
            }
        })
        .collect();
    let change = |r: &ResourceChange| {
        (r.after_blocked_ms.unwrap_or(0.0) - r.before_blocked_ms.unwrap_or(0.0)).abs()
    };
    out.sort_by(|x, y| change(y).total_cmp(&change(x)));
    out.truncate(MAX_ROWS);
    out
}

#[cfg(test)]
mod tests {
    use super::strip_id;

    #[test]
    fn ids_are_stripped_from_names_only() {
        assert_eq!(strip_id("two_funcs (1234)"), "two_funcs");
        assert_eq!(
            strip_id("two_funcs (3 processes)"),
            "two_funcs (3 processes)"
        );
        assert_eq!(strip_id("f ()"), "f ()");
        assert_eq!(strip_id("main"), "main");
    }
}
