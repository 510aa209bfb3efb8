//! Flat profiles: a process (or thread) that holds much of the run while no function
//! in it holds much — a compiler, an interpreter, a program whose time is spread over
//! hundreds of functions. Ranking functions alone would then put a 4 % wait on top of
//! an 80 % compiler; this adds the step itself as a bottleneck that says the time is
//! spread, with the largest functions' shares as evidence.

use std::collections::HashMap;

use crate::profile::SampledProfile;

use super::bottleneck::Bottleneck;
use super::calltree::{CallTree, NodeLabel};
use super::steps::{Step, StepRef, ms, pct};

/// A top-level step holding at least this share of the run is a candidate…
const MIN_STEP_SHARE_PCT: f64 = 25.0;
/// …when its largest function holds less than this fraction of the step.
const MAX_FUNCTION_FRACTION: f64 = 0.25;

/// Bottleneck entries for the flat top-level steps.
pub(crate) fn spread_steps(
    p: &SampledProfile,
    tree: &CallTree,
    steps: &[Step],
    refs: &[StepRef],
) -> Vec<Bottleneck> {
    let total = tree.total_wall_ns();
    let mut out = Vec::new();
    for step in steps {
        if step.time_share_pct < MIN_STEP_SHARE_PCT {
            continue;
        }
        let Some(&node) = refs
            .iter()
            .find(|r| r.id == step.id)
            .and_then(|r| r.nodes.first())
        else {
            continue;
        };
        let step_ns = tree.nodes[node].crit_ns;
        let mut by_fn = own_time_by_function(p, tree, node);
        by_fn.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let largest = by_fn.first().map_or(0, |f| f.1);
        if (largest as f64) >= MAX_FUNCTION_FRACTION * step_ns as f64 || by_fn.len() < 4 {
            continue;
        }
        let top: Vec<String> = by_fn
            .iter()
            .take(3)
            .map(|(f, t)| format!("{f} {:.1}%", pct(*t, step_ns)))
            .collect();
        let over_1pct = by_fn
            .iter()
            .filter(|(_, t)| pct(*t, step_ns) >= 1.0)
            .count();
        out.push(Bottleneck {
            step: step.id.clone(),
            function: step.function.clone(),
            in_function: None,
            location: None,
            module: None,
            class: step.classification,
            share: step.time_share_pct,
            description: format!(
                "{} holds {:.1}% of the run's wall time, spread over {} functions with no \
                 single one to fix: the largest holds {:.1}% of it",
                step.function,
                step.time_share_pct,
                by_fn.len(),
                pct(largest, step_ns)
            ),
            why_chain: vec![
                format!(
                    "the run waited {} ms for it: {:.1}% of the {} ms critical path",
                    ms(step_ns),
                    step.time_share_pct,
                    ms(total)
                ),
                format!(
                    "its time is spread: {} functions hold 1% of it or more; the largest: {}",
                    over_1pct,
                    top.join(", ")
                ),
                format!(
                    "a flat profile: less work for it to do (inputs, options, how often it \
                     runs: {} ms of thread time, {} ms on-CPU) helps more than tuning one \
                     function",
                    step.thread_time_ms, step.cpu_time_ms
                ),
            ],
        });
    }
    out
}

/// Critical-path self time per function name below (and at) `root`.
fn own_time_by_function(p: &SampledProfile, tree: &CallTree, root: usize) -> Vec<(String, u64)> {
    let mut by: HashMap<&str, u64> = HashMap::new();
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        let n = &tree.nodes[i];
        if let NodeLabel::Function { frame } = n.label {
            let owner = tree.containing_function(p, i).unwrap_or(frame);
            *by.entry(p.frames[owner as usize].function.as_str())
                .or_default() += n.self_crit_ns;
        }
        stack.extend(tree.children(i));
    }
    by.into_iter()
        .filter(|(_, t)| *t > 0)
        .map(|(f, t)| (f.to_string(), t))
        .collect()
}
