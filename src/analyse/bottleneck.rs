//! The session's bottleneck: the detail sentence and the top 3 bottleneck steps, each
//! with a why-chain of measured figures only.
//!
//! Ranking: a parent step whose time is all in its children is not the bottleneck, the
//! children are. So steps are ranked by the time they hold that no deeper step shown
//! holds ("unexplained" time: their wall time minus their child steps' wall time; all
//! of it for a leaf or a truncated step). This picks the deepest step that still carries
//! the time. Synthetic steps (process, thread, "other") are not candidates.

use serde::{Deserialize, Serialize};

use crate::profile::SampledProfile;

use super::calltree::{CallTree, NodeLabel};
use super::classify::WaitCategory;
use super::steps::{Step, StepRef, ms, pct};
use super::{Classes, Classification};

/// How many bottlenecks are reported.
pub const MAX_BOTTLENECKS: usize = 3;

/// One of the top bottlenecks (schema `$defs/bottleneck`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// The step's id.
    pub step: String,
    #[serde(rename = "type")]
    pub class: Classification,
    /// The step's share of the session's wall time, percent.
    pub share: f64,
    pub description: String,
    pub why_chain: Vec<String>,
}

fn find<'a>(steps: &'a [Step], id: &str) -> Option<&'a Step> {
    for s in steps {
        if s.id == id {
            return Some(s);
        }
        if id.starts_with(&format!("{}.", s.id)) {
            return find(&s.children, id);
        }
    }
    None
}

/// Categories of a node, largest first (non-zero only).
fn categories(waits: &[u64; WaitCategory::ALL.len()]) -> Vec<(WaitCategory, u64)> {
    let mut v: Vec<(WaitCategory, u64)> = WaitCategory::ALL
        .iter()
        .map(|c| (*c, waits[c.index()]))
        .filter(|(_, t)| *t > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

pub(crate) fn top_bottlenecks(
    p: &SampledProfile,
    tree: &CallTree,
    classes: &Classes,
    steps: &[Step],
    refs: &[StepRef],
) -> Vec<Bottleneck> {
    let total = tree.total_wall_ns();
    // A step that mostly waits for profiled work (children, other threads) is not a
    // bottleneck of its own: that work's steps are where the time went.
    let waits_for_profiled_work = |r: &StepRef| {
        r.nodes.first().is_some_and(|&n| {
            let node = &tree.nodes[n];
            tree.explained_ns(node.pid, &node.waits_ns) * 2 > node.wall_ns
        })
    };
    let mut cands: Vec<&StepRef> = refs
        .iter()
        .filter(|r| !r.synthetic && r.unexplained_ns > 0 && !r.nodes.is_empty())
        .filter(|r| !waits_for_profiled_work(r))
        .collect();
    cands.sort_by(|a, b| {
        b.unexplained_ns
            .cmp(&a.unexplained_ns)
            .then_with(|| a.id.cmp(&b.id))
    });
    cands
        .into_iter()
        .take(MAX_BOTTLENECKS)
        .filter_map(|r| {
            let step = find(steps, &r.id)?;
            let node_id = *r.nodes.first()?;
            let node = &tree.nodes[node_id];
            let class = classes.dominant(&node.waits_ns, node.pid);
            let cats = categories(&node.waits_ns);
            let (top_cat, top_ns) = cats.first().copied()?;
            // Code inlined into another function (DWARF's short names: `lt`, `next`)
            // says which function it sits in.
            let inlined_into = match node.label {
                NodeLabel::Function { frame } if p.frames[frame as usize].inlined => tree
                    .containing_function(p, node_id)
                    .map(|f| p.frames[f as usize].function.as_str()),
                _ => None,
            };
            let place = match (step.location.as_deref(), inlined_into) {
                (Some(l), Some(f)) => format!(" ({l}; inlined into {f})"),
                (None, Some(f)) => format!(" (inlined into {f})"),
                (Some(l), None) => format!(" ({l})"),
                (None, None) => String::new(),
            };
            let description = format!(
                "{}{} takes {:.1}% of the sampled wall time, {:.1}% of it {}",
                step.function,
                place,
                step.time_share_pct,
                pct(top_ns, node.wall_ns),
                top_cat.describe()
            );
            let mut why = vec![format!(
                "step {} {} took {} ms of wall time, {:.1}% of the {} ms sampled across all threads",
                r.id,
                step.function,
                step.wall_time_ms,
                step.time_share_pct,
                ms(total)
            )];
            let folded = if r.nodes.len() > 1 {
                " (its own frames and the single calls folded into it)"
            } else {
                ""
            };
            if r.unexplained_ns < r.wall_ns {
                why.push(format!(
                    "{} ms of it is not inside a deeper step; {} ms is self time{folded}",
                    ms(r.unexplained_ns),
                    step.self_time_ms
                ));
            } else if step.self_time_ms >= step.wall_time_ms {
                why.push(format!("all of it is self time{folded}"));
            } else {
                why.push(format!(
                    "{} ms of it is self time{folded}, the rest in callees under 1% each",
                    step.self_time_ms
                ));
            }
            let split: Vec<String> = cats
                .iter()
                .take(3)
                .map(|(c, t)| format!("{} {} ms ({:.1}%)", c.describe(), ms(*t), pct(*t, node.wall_ns)))
                .collect();
            why.push(format!("its wall time was: {}", split.join(", ")));
            if top_cat == WaitCategory::Cpu {
                why.push(format!(
                    "{} on-CPU samples landed in it, {} ms on-CPU in total",
                    node.samples - node.off_cpu_intervals,
                    ms(node.cpu_ns)
                ));
            } else if node.off_cpu_intervals > 0 {
                let off = node.wall_ns - node.cpu_ns;
                why.push(format!(
                    "it was switched out {} times, {} ms per off-CPU interval on average",
                    node.off_cpu_intervals,
                    ms(off / node.off_cpu_intervals)
                ));
            }
            if top_cat == WaitCategory::Child {
                why.push(format!(
                    "the time waiting for children is classed {} (the children's dominant class)",
                    classes.class_of(WaitCategory::Child, node.pid).as_str()
                ));
            }
            Some(Bottleneck {
                step: r.id.clone(),
                class,
                share: step.time_share_pct,
                description,
                why_chain: why,
            })
        })
        .collect()
}

/// One sentence with the session's measured figures.
pub(crate) fn detail(
    p: &SampledProfile,
    tree: &CallTree,
    class: Classification,
    per_class: &[u64; Classification::ALL.len()],
    top: &[Bottleneck],
) -> String {
    let root = tree.root();
    let total = tree.total_wall_ns();
    if total == 0 {
        return "no samples were recorded, so there is nothing to classify".to_string();
    }
    let mut threads: Vec<(i32, i32)> = p.samples.iter().map(|s| (s.pid, s.tid)).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut pids: Vec<i32> = threads.iter().map(|t| t.0).collect();
    pids.dedup();
    let processes = pids.len();
    let mut s = format!(
        "{}: {:.1}% of {} ms sampled wall time ({} process{}, {} thread{}) is {}",
        class.as_str(),
        pct(per_class[class as usize], total),
        ms(total),
        processes,
        if processes == 1 { "" } else { "es" },
        threads.len(),
        if threads.len() == 1 { "" } else { "s" },
        describe_class(class)
    );
    s.push_str(&format!(
        "; on-CPU {} ms ({:.1}%)",
        ms(root.cpu_ns),
        pct(root.cpu_ns, total)
    ));
    if let Some(b) = top.first() {
        s.push_str(&format!(
            "; largest bottleneck: step {} ({:.1}%, {})",
            b.step,
            b.share,
            b.class.as_str()
        ));
    }
    s.push('.');
    s
}

fn describe_class(c: Classification) -> &'static str {
    match c {
        Classification::Cpu => "on-CPU or waiting for a CPU",
        Classification::IoFile => "blocked on file I/O",
        Classification::IoNetwork => "blocked on network I/O",
        Classification::IoDb => "waiting on a database",
        Classification::Lock => "blocked on locks",
        Classification::Memory => "blocked in page faults",
        Classification::Idle => "idle (sleeping, or waiting on pipes or children)",
        Classification::Gpu => "waiting on the GPU",
        Classification::Unknown => "off-CPU for reasons the recording does not show",
        Classification::Architecture | Classification::External | Classification::Cache => {
            "attributed to this class"
        }
    }
}
