//! Steps: the readable, depth-limited view of the call tree that goes into the
//! performance map (schema `$defs/step`).
//!
//! From the call tree (see `calltree`), the steps keep what a reader needs:
//!
//! - Top level: one step per process when the session has several; with one process, one
//!   step per thread when it has several; else the program's entry function(s).
//! - A function whose child carries ≥ 99 % of its wall time is folded with that child
//!   (repeatedly): the step keeps the outer name and location, adds up the chain's self
//!   time and shows the innermost frame's children. Synthetic process and thread steps
//!   never absorb a function.
//! - Children under 1 % of the session's wall time are pooled into one "other" step,
//!   shown only when the pool itself reaches 1 %.
//! - Depth 5 is the last level: a step there that had children gets `truncated: true`.
//!
//! A step's `wall_time_ms`, `self_time_ms`, `time_share_pct`, `wait_breakdown_ms`,
//! type and class are its critical-path time (see `critical`): the part of the run's
//! wall time that waited for it. The shares of the top-level steps add up to 100 %;
//! threads nobody waited for (an idle pool, an event loop) hold none and are not shown.
//! `thread_time_ms` is the summed time of its threads (on-CPU plus off-CPU), as a
//! sampling profiler sums it, and `cpu_time_ms` their on-CPU time; both may exceed the
//! wall time when threads run in parallel. Without wake-up records the critical-path
//! figures are the thread time less the waits for profiled work.
//! Times are rounded to the microsecond, shares to 0.01 %.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profile::SampledProfile;

use super::calltree::{CallNode, CallTree, NodeLabel};
use super::classify::WaitCategory;
use super::{Classes, Classification};

/// Deepest level shown (top-level steps are level 1).
pub const MAX_DEPTH: usize = 5;
/// A child with at least this fraction of its parent's wall time is folded into it.
pub const FOLD_FRACTION: f64 = 0.99;
/// Children under this share of the session (percent) are pooled into "other".
pub const MIN_SHARE_PCT: f64 = 1.0;

/// Schema `$defs/step_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepType {
    FunctionCall,
    Loop,
    HttpCall,
    DbQuery,
    FileIo,
    CacheOp,
    QueueOp,
    LockWait,
    Sleep,
    ChildProcess,
    GpuOp,
    Process,
    Thread,
    Unknown,
}

/// One step of the performance map (schema `$defs/step`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// "1", "1.2", "1.2.3", ...
    pub id: String,
    /// The function (or process, thread, or pooled "other") the step is.
    pub function: String,
    /// file:line when known.
    pub location: Option<String>,
    /// Binary or shared object, when known.
    pub module: Option<String>,
    /// "name (pid)" of the process the step ran in; None for a pool spanning processes.
    pub process: Option<String>,
    /// Inclusive wall time on the critical path: the part of the run's wall time that
    /// waited for this step (on-CPU plus off-CPU).
    pub wall_time_ms: f64,
    /// Inclusive on-CPU time of all its threads.
    pub cpu_time_ms: f64,
    /// Inclusive time summed over its threads (on-CPU plus off-CPU), on the critical
    /// path or not.
    pub thread_time_ms: f64,
    /// Critical-path time in the step's own frame(s), not in callees.
    pub self_time_ms: f64,
    /// `wall_time_ms` as a share of the session's critical path, percent.
    pub time_share_pct: f64,
    /// What kind of step it is (schema `$defs/step_type`).
    #[serde(rename = "type")]
    pub step_type: StepType,
    /// The bottleneck class of its time.
    pub classification: Classification,
    /// Inclusive wall time per category (only the categories that occurred).
    pub wait_breakdown_ms: BTreeMap<String, f64>,
    /// What its threads waited on inside it (inclusive), most blocked first: files,
    /// databases, services with their round trips and connections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<super::resources::StepResource>,
    /// Request→response turns over HTTP made from inside it (its threads' client
    /// connections); None when socket traffic was not recorded or it made none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_round_trips: Option<u64>,
    /// Request→response turns with databases made from inside it; None when socket
    /// traffic was not recorded or it made none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_round_trips: Option<u64>,
    /// Deeper frames were cut at the depth limit and folded into this step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Its callees (or threads, processes), largest first, then the pooled "other".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Step>,
}

/// What the bottleneck ranking needs to know about a step beyond its JSON.
#[derive(Debug, Clone)]
pub(crate) struct StepRef {
    pub id: String,
    /// The call-tree nodes folded into this step, outermost first; empty for "other".
    pub nodes: Vec<usize>,
}

pub(crate) fn ms(ns: u64) -> f64 {
    round_to(ns as f64 / 1e6, 1e3)
}

pub(crate) fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        round_to(part as f64 * 100.0 / total as f64, 1e2).min(100.0)
    }
}

/// A sum of millisecond figures, rounded to the microsecond like [`ms`].
pub(crate) fn round_ms(x: f64) -> f64 {
    round_to(x, 1e3)
}

fn round_to(x: f64, scale: f64) -> f64 {
    (x * scale).round() / scale
}

pub(crate) fn breakdown(waits: &[u64; WaitCategory::ALL.len()]) -> BTreeMap<String, f64> {
    WaitCategory::ALL
        .iter()
        .filter(|c| waits[c.index()] > 0)
        .map(|c| (c.key().to_string(), ms(waits[c.index()])))
        .collect()
}

/// A step's type from its dominant category: a wait type when one wait category holds
/// more than half of its wall time and at least half of the wall time is the step's own
/// (so a caller of a waiting function stays a `function_call`).
fn function_type(waits: &[u64; WaitCategory::ALL.len()], wall: u64, self_ns: u64) -> StepType {
    let Some(top) = WaitCategory::ALL
        .iter()
        .max_by_key(|c| (waits[c.index()], std::cmp::Reverse(c.index())))
    else {
        return StepType::FunctionCall;
    };
    if waits[top.index()] * 2 <= wall || self_ns * 2 < wall {
        return StepType::FunctionCall;
    }
    match top {
        WaitCategory::Sleep => StepType::Sleep,
        WaitCategory::Lock => StepType::LockWait,
        WaitCategory::File => StepType::FileIo,
        WaitCategory::Child => StepType::ChildProcess,
        _ => StepType::FunctionCall,
    }
}

pub(crate) struct StepBuilder<'a> {
    p: &'a SampledProfile,
    tree: &'a CallTree,
    classes: &'a Classes,
    total: u64,
    pub refs: Vec<StepRef>,
}

impl<'a> StepBuilder<'a> {
    pub fn new(p: &'a SampledProfile, tree: &'a CallTree, classes: &'a Classes) -> Self {
        StepBuilder {
            p,
            tree,
            classes,
            total: tree.total_wall_ns(),
            refs: Vec::new(),
        }
    }

    /// The top-level steps (see the module doc for which level that is).
    pub fn build(&mut self) -> Vec<Step> {
        let mut top: Vec<usize> = self.tree.children(0).collect();
        // One process: its threads (when several) or its entry functions are the top
        // level. (A process node only has thread children when it has several threads.)
        let mut own = None;
        if let [only] = top[..] {
            top = self.tree.children(only).collect();
            own = Some(only);
        }
        let mut steps = self.children_of(&top, "", 1);
        // The process's own time (on-CPU bursts no sample caught, samples without a
        // stack) belongs to no function: shown so the top level still adds up.
        if let Some(only) = own
            && pct(self.node(only).self_crit_ns, self.total) >= MIN_SHARE_PCT
        {
            let id = child_id("", steps.len() + 1);
            steps.push(self.own_time(only, id));
        }
        steps
    }

    /// A step for the time of a process or thread node that no function holds.
    fn own_time(&mut self, node: usize, id: String) -> Step {
        let tree = self.tree;
        let n = &tree.nodes[node];
        let waits = tree.self_crit_waits(node);
        let below_wall: u64 = tree.children(node).map(|c| tree.nodes[c].wall_ns).sum();
        let below_cpu: u64 = tree.children(node).map(|c| tree.nodes[c].cpu_ns).sum();
        self.refs.push(StepRef {
            id: id.clone(),
            nodes: vec![node],
        });
        Step {
            id,
            function: format!(
                "{} (no function: bursts shorter than a sample, or no stack)",
                n.name
            ),
            location: None,
            module: None,
            process: Some(tree.groups.label(self.p, n.pid)),
            wall_time_ms: ms(n.self_crit_ns),
            cpu_time_ms: ms(n.cpu_ns.saturating_sub(below_cpu)),
            thread_time_ms: ms(n.wall_ns.saturating_sub(below_wall)),
            self_time_ms: ms(n.self_crit_ns),
            time_share_pct: pct(n.self_crit_ns, self.total),
            step_type: StepType::Unknown,
            classification: self.classes.dominant(&waits, n.pid),
            wait_breakdown_ms: breakdown(&waits),
            resources: Vec::new(),
            http_round_trips: None,
            db_round_trips: None,
            truncated: false,
            children: Vec::new(),
        }
    }

    fn node(&self, i: usize) -> &CallNode {
        &self.tree.nodes[i]
    }

    /// Steps for `candidates` (call-tree nodes) at `depth`, ids prefixed by `prefix`.
    fn children_of(&mut self, candidates: &[usize], prefix: &str, depth: usize) -> Vec<Step> {
        let mut shown: Vec<usize> = Vec::new();
        let mut pooled: Vec<usize> = Vec::new();
        for &c in candidates {
            if pct(self.node(c).crit_ns, self.total) >= MIN_SHARE_PCT {
                shown.push(c);
            } else if self.node(c).crit_ns > 0 {
                pooled.push(c);
            }
        }
        shown.sort_by(|&a, &b| {
            let (a, b) = (self.node(a), self.node(b));
            b.crit_ns.cmp(&a.crit_ns).then_with(|| a.name.cmp(&b.name))
        });
        let mut steps = Vec::new();
        for (k, &c) in shown.iter().enumerate() {
            let id = child_id(prefix, k + 1);
            steps.push(self.step(c, id, depth));
        }
        let pool_wall: u64 = pooled.iter().map(|&c| self.node(c).crit_ns).sum();
        if !pooled.is_empty() && pct(pool_wall, self.total) >= MIN_SHARE_PCT {
            let id = child_id(prefix, steps.len() + 1);
            steps.push(self.other(&pooled, id));
        }
        steps
    }

    fn step(&mut self, top: usize, id: String, depth: usize) -> Step {
        // Fold the chain of dominant children into this step.
        let mut chain = vec![top];
        let mut at = top;
        if !self.node(top).is_synthetic() {
            loop {
                let heavy = self.tree.children(at).find(|&c| {
                    let cn = self.node(c);
                    !cn.is_synthetic()
                        && cn.crit_ns > 0
                        && cn.crit_ns as f64 >= FOLD_FRACTION * self.node(top).crit_ns as f64
                });
                match heavy {
                    Some(c) => {
                        chain.push(c);
                        at = c;
                    }
                    None => break,
                }
            }
        }
        let mut candidates: Vec<usize> = Vec::new();
        for (k, &n) in chain.iter().enumerate() {
            let next = chain.get(k + 1).copied();
            candidates.extend(self.tree.children(n).filter(|&c| Some(c) != next));
        }
        let self_ns: u64 = chain.iter().map(|&n| self.node(n).self_crit_ns).sum();
        let n = self.node(top);
        let (function, location, module, step_type) = match n.label {
            NodeLabel::Process { .. } => (n.name.to_string(), None, None, StepType::Process),
            NodeLabel::Thread { .. } => (n.name.to_string(), None, None, StepType::Thread),
            NodeLabel::Function { frame } => {
                let f = &self.p.frames[frame as usize];
                (
                    n.name.to_string(),
                    f.location(),
                    f.module.clone(),
                    function_type(&n.crit_waits_ns.dense(), n.crit_ns, self_ns),
                )
            }
            NodeLabel::Session => (n.name.to_string(), None, None, StepType::Unknown),
        };
        let mut step = Step {
            id: id.clone(),
            function,
            location,
            module,
            process: Some(self.tree.groups.label(self.p, n.pid)),
            wall_time_ms: ms(n.crit_ns),
            cpu_time_ms: ms(n.cpu_ns),
            thread_time_ms: ms(n.wall_ns),
            self_time_ms: ms(self_ns),
            time_share_pct: pct(n.crit_ns, self.total),
            step_type,
            classification: self.classes.dominant(&n.crit_waits_ns.dense(), n.pid),
            wait_breakdown_ms: breakdown(&n.crit_waits_ns.dense()),
            resources: Vec::new(),
            http_round_trips: None,
            db_round_trips: None,
            truncated: false,
            children: Vec::new(),
        };
        self.refs.push(StepRef {
            id: id.clone(),
            nodes: chain,
        });
        let has_children = candidates.iter().any(|&c| self.node(c).crit_ns > 0);
        if depth >= MAX_DEPTH {
            step.truncated = has_children;
        } else {
            step.children = self.children_of(&candidates, &id, depth + 1);
        }
        step
    }

    fn other(&mut self, pooled: &[usize], id: String) -> Step {
        let mut waits = [0u64; WaitCategory::ALL.len()];
        let (mut wall, mut cpu, mut self_ns, mut thread) = (0, 0, 0, 0);
        let mut pids: Vec<i32> = Vec::new();
        for &c in pooled {
            let n = self.node(c);
            for (c, x) in n.crit_waits_ns.iter() {
                waits[c.index()] += x;
            }
            wall += n.crit_ns;
            thread += n.wall_ns;
            cpu += n.cpu_ns;
            self_ns += n.self_crit_ns;
            if !pids.contains(&n.pid) {
                pids.push(n.pid);
            }
        }
        let pid = if pids.len() == 1 { pids[0] } else { 0 };
        self.refs.push(StepRef {
            id: id.clone(),
            nodes: Vec::new(),
        });
        Step {
            id,
            function: "other".to_string(),
            location: None,
            module: None,
            process: (pids.len() == 1).then(|| self.tree.groups.label(self.p, pid)),
            wall_time_ms: ms(wall),
            cpu_time_ms: ms(cpu),
            thread_time_ms: ms(thread),
            self_time_ms: ms(self_ns),
            time_share_pct: pct(wall, self.total),
            step_type: StepType::FunctionCall,
            classification: self.classes.dominant(&waits, pid),
            wait_breakdown_ms: breakdown(&waits),
            resources: Vec::new(),
            http_round_trips: None,
            db_round_trips: None,
            truncated: false,
            children: Vec::new(),
        }
    }
}

fn child_id(prefix: &str, k: usize) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_dominated_functions_get_a_wait_type() {
        let mut w = [0u64; WaitCategory::ALL.len()];
        w[WaitCategory::Sleep.index()] = 60;
        w[WaitCategory::Cpu.index()] = 40;
        assert_eq!(function_type(&w, 100, 100), StepType::Sleep);
        // The wait is in a callee: the caller is a plain call.
        assert_eq!(function_type(&w, 100, 10), StepType::FunctionCall);
        w[WaitCategory::Sleep.index()] = 50;
        w[WaitCategory::Cpu.index()] = 50;
        assert_eq!(function_type(&w, 100, 100), StepType::FunctionCall);
    }

    #[test]
    fn shares_and_ms_round() {
        assert_eq!(ms(1_234_567), 1.235);
        assert_eq!(pct(1, 3), 33.33);
        assert_eq!(pct(5, 0), 0.0);
    }

    #[test]
    fn step_type_serializes_as_schema_strings() {
        let s = serde_json::to_string(&StepType::ChildProcess).unwrap_or_default();
        assert_eq!(s, "\"child_process\"");
    }
}
