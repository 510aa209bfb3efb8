//! Level 2 of the escalation: line tables. For a Python function, the time of every
//! sample whose stack passes through it, split by the line of that function the
//! sample was at (its innermost frame of the function: the line that was executing or
//! that made the call below), with the on-CPU part and the waits by class — what
//! `py-spy record --lines` shows, with the wait classes py-spy does not have.
//!
//! Thread time, as the hotspots count it: every sample's weight (on-CPU ticks and
//! off-CPU intervals) of every thread; a recursive function's sample counts once, at
//! its innermost frame.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profile::{FrameKind, SampleKind, SampledProfile};

use super::bottleneck::Bottleneck;
use super::calltree::CallTree;
use super::classify::WaitCategory;
use super::steps::{ms, round_ms};

/// Lines shown per table (the rest are summed into `other_lines_ms`).
pub const MAX_LINES: usize = 12;

/// One function's time by line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineTable {
    pub function: String,
    pub file: String,
    /// The function's total thread time (samples through it), ms.
    pub total_ms: f64,
    /// Its on-CPU part, ms.
    pub cpu_ms: f64,
    /// Its off-CPU part by wait class (non-zero only), ms.
    pub waits_ms: BTreeMap<String, f64>,
    /// Lines by time, most first.
    pub lines: Vec<LineRow>,
    /// Time at lines beyond the first [`MAX_LINES`], ms.
    pub other_lines_ms: f64,
}

/// One line of a function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineRow {
    pub line: u32,
    pub wall_ms: f64,
    pub cpu_ms: f64,
    /// The wait class holding most of the line's off-CPU time, when it waited.
    pub wait_class: Option<String>,
    /// Off-CPU time by class (non-zero only), ms.
    pub waits_ms: BTreeMap<String, f64>,
    /// Share of the function's time, percent.
    pub share_pct: f64,
}

impl LineTable {
    /// The on-CPU share of the function's time, percent.
    pub fn cpu_pct(&self) -> f64 {
        pct(self.cpu_ms, self.total_ms)
    }

    /// The wait class holding most of its off-CPU time, with its ms.
    pub fn top_wait(&self) -> Option<(&str, f64)> {
        self.waits_ms
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, v)| (k.as_str(), *v))
    }
}

#[derive(Default)]
struct Acc {
    wall: u64,
    cpu: u64,
    waits: BTreeMap<WaitCategory, u64>,
}

impl Acc {
    fn add(&mut self, w: u64, on_cpu: bool, cat: WaitCategory) {
        self.wall += w;
        if on_cpu {
            self.cpu += w;
        } else {
            *self.waits.entry(cat).or_default() += w;
        }
    }
}

/// Line tables of the top bottlenecks that are Python functions (one per function).
pub fn for_bottlenecks(p: &SampledProfile, tree: &CallTree, top: &[Bottleneck]) -> Vec<LineTable> {
    let mut out: Vec<LineTable> = Vec::new();
    for b in top {
        let Some(file) = b.location.as_deref().map(file_of) else {
            continue;
        };
        if out
            .iter()
            .any(|t| t.function == b.function && t.file == file)
        {
            continue;
        }
        if let Some(t) = line_table(p, tree, &b.function, file) {
            out.push(t);
        }
    }
    out
}

/// `path.py` of `path.py:LINE`.
pub(crate) fn file_of(location: &str) -> &str {
    match location.rsplit_once(':') {
        Some((f, l)) if l.bytes().all(|c| c.is_ascii_digit()) => f,
        _ => location,
    }
}

/// The line table of the Python function `function` of `file`; None when no sample
/// passed through it.
pub fn line_table(
    p: &SampledProfile,
    tree: &CallTree,
    function: &str,
    file: &str,
) -> Option<LineTable> {
    let is_it: Vec<bool> = p
        .frames
        .iter()
        .map(|f| {
            f.kind == FrameKind::Python && f.function == function && f.file.as_deref() == Some(file)
        })
        .collect();
    if !is_it.iter().any(|&x| x) {
        return None;
    }
    let mut total = Acc::default();
    let mut by_line: BTreeMap<u32, Acc> = BTreeMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let Some(line) = s
            .stack
            .get()
            .and_then(|leaf| innermost_line(p, leaf, &is_it))
        else {
            continue;
        };
        let on_cpu = s.kind == SampleKind::OnCpu;
        let cat = tree.sample_categories.get(i).unwrap_or(WaitCategory::Other);
        total.add(s.weight_ns, on_cpu, cat);
        by_line
            .entry(line)
            .or_default()
            .add(s.weight_ns, on_cpu, cat);
    }
    if total.wall == 0 {
        return None;
    }
    let mut rows: Vec<LineRow> = by_line
        .into_iter()
        .map(|(line, a)| LineRow {
            line,
            wall_ms: round_ms(ms(a.wall)),
            cpu_ms: round_ms(ms(a.cpu)),
            wait_class: a
                .waits
                .iter()
                .max_by_key(|(_, v)| **v)
                .map(|(k, _)| k.key().to_string()),
            waits_ms: waits_ms(&a.waits),
            share_pct: (pct(a.wall as f64, total.wall as f64) * 10.0).round() / 10.0,
        })
        .collect();
    rows.sort_by(|a, b| b.wall_ms.total_cmp(&a.wall_ms).then(a.line.cmp(&b.line)));
    let other: f64 = rows.iter().skip(MAX_LINES).map(|r| r.wall_ms).sum();
    rows.truncate(MAX_LINES);
    Some(LineTable {
        function: function.to_string(),
        file: file.to_string(),
        total_ms: round_ms(ms(total.wall)),
        cpu_ms: round_ms(ms(total.cpu)),
        waits_ms: waits_ms(&total.waits),
        lines: rows,
        other_lines_ms: round_ms(other),
    })
}

/// The line of the innermost frame of the function on the stack from `leaf`.
fn innermost_line(p: &SampledProfile, leaf: u32, is_it: &[bool]) -> Option<u32> {
    let mut node = Some(leaf);
    // A stack is at most as deep as the node table is long: a cycle in an untrusted
    // recording ends the walk.
    for _ in 0..=p.stacks.len() {
        let n = p.stacks.get(node? as usize)?;
        if is_it.get(n.frame as usize).copied().unwrap_or(false) {
            return p.frames.get(n.frame as usize).and_then(|f| f.line);
        }
        node = n.parent;
    }
    None
}

fn waits_ms(w: &BTreeMap<WaitCategory, u64>) -> BTreeMap<String, f64> {
    w.iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| (k.key().to_string(), round_ms(ms(*v))))
        .collect()
}

fn pct(part: f64, total: f64) -> f64 {
    if total > 0.0 {
        100.0 * part / total
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_gives_its_file() {
        assert_eq!(file_of("/app/m.py:12"), "/app/m.py");
        assert_eq!(file_of("/app/m.py"), "/app/m.py");
        assert_eq!(file_of("C:odd"), "C:odd");
    }
}
