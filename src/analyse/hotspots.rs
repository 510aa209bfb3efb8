//! Hotspots: functions ranked by self time (wall: on-CPU plus off-CPU), from the call
//! tree.
//!
//! A function's self time is the weight of the samples whose innermost user or Python
//! frame it is (kernel frames only stand in when a stack has no user frame at all, as
//! in the call tree). Time in a function inlined into its caller counts as the caller's
//! self time, as `perf report` counts it by default; time spent waiting for a child
//! process that was profiled too is not self time (the child's hotspots hold it): the hotspot is the function the
//! machine code belongs to; the steps and flamegraphs keep the inlined frames. Its total time counts each sample once even when the function
//! recurses. Shares are of the session's total sampled wall time. `on_cpu` is true when
//! at least half of the self time was on-CPU.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::profile::SampledProfile;

use super::calltree::{CallTree, NodeLabel};
use super::steps::{ms, pct};

/// How many hotspots are kept.
pub const MAX_HOTSPOTS: usize = 20;

/// One hotspot (schema `profile_result.hotspots[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hotspot {
    pub function: String,
    pub module: Option<String>,
    pub location: Option<String>,
    pub self_time_ms: f64,
    pub self_share_pct: f64,
    /// The part of the self time spent on a CPU (the rest is off-CPU: waiting or
    /// preempted).
    pub self_cpu_time_ms: f64,
    pub total_time_ms: f64,
    pub total_share_pct: f64,
    pub on_cpu: bool,
}

#[derive(Default)]
struct Acc {
    self_ns: u64,
    self_cpu_ns: u64,
    total_ns: u64,
}

/// The top [`MAX_HOTSPOTS`] functions by self time.
pub fn hotspots(p: &SampledProfile, tree: &CallTree) -> Vec<Hotspot> {
    let total = tree.total_wall_ns();
    let mut by_fn: HashMap<u32, Acc> = HashMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        let NodeLabel::Function { frame } = n.label else {
            continue;
        };
        let owner = tree.containing_function(p, i).unwrap_or(frame);
        let acc = by_fn.entry(owner).or_default();
        acc.self_ns += n.self_wall_ns - explained_wait(tree, i);
        acc.self_cpu_ns += n.self_cpu_ns;
        if !has_ancestor_with(tree, i, frame) {
            by_fn.entry(frame).or_default().total_ns += n.wall_ns;
        }
    }
    let mut rows: Vec<(u32, Acc)> = by_fn.into_iter().filter(|(_, a)| a.self_ns > 0).collect();
    rows.sort_by(|(fa, a), (fb, b)| {
        b.self_ns
            .cmp(&a.self_ns)
            .then_with(|| p.frames[*fa as usize].cmp(&p.frames[*fb as usize]))
    });
    rows.truncate(MAX_HOTSPOTS);
    rows.into_iter()
        .map(|(frame, a)| {
            let f = &p.frames[frame as usize];
            Hotspot {
                function: f.function.clone(),
                module: f.module.clone(),
                location: f.location(),
                self_time_ms: ms(a.self_ns),
                self_share_pct: pct(a.self_ns, total),
                self_cpu_time_ms: ms(a.self_cpu_ns),
                total_time_ms: ms(a.total_ns),
                total_share_pct: pct(a.total_ns, total),
                on_cpu: a.self_cpu_ns * 2 >= a.self_ns,
            }
        })
        .collect()
}

/// Self time of node `i` spent waiting for work that was profiled itself (child
/// processes, other threads: their own hotspots show where that time went).
fn explained_wait(tree: &CallTree, i: usize) -> u64 {
    let n = &tree.nodes[i];
    let below: u64 = n
        .children
        .iter()
        .map(|&c| tree.explained_ns(n.pid, &tree.nodes[c].waits_ns))
        .sum();
    tree.explained_ns(n.pid, &n.waits_ns)
        .saturating_sub(below)
        .min(n.self_wall_ns)
}

fn has_ancestor_with(tree: &CallTree, node: usize, frame: u32) -> bool {
    let mut cur = tree.nodes[node].parent;
    while let Some(i) = cur {
        if tree.nodes[i].label == (NodeLabel::Function { frame }) {
            return true;
        }
        cur = tree.nodes[i].parent;
    }
    false
}
