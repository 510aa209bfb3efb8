//! The session's bottleneck: the detail sentence and the top 3 bottlenecks, each with a
//! why-chain of measured figures only.
//!
//! Bottlenecks are *functions*, ranked by their own critical-path time (see
//! `critical`): the part of the run's wall time spent in the function's own code or
//! waits, all call paths of the function merged (the heaviest path is named in the
//! entry). Code inlined into a function counts as that function's, as in the hotspots.
//! Frames with no critical-path time of their own (wrappers whose time is all in
//! callees) are never candidates; what lies below a candidate is said truthfully (its
//! largest callee and that callee's share). A thread's own time with no function to
//! name (bursts shorter than the sampling period, samples without a stack) is a
//! candidate too, named by its thread.

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use crate::profile::{FrameKind, SampleKind, SampledProfile};

use super::calltree::{CallTree, CriticalModel, NodeLabel};
use super::classify::WaitCategory;
use super::steps::{Step, StepRef, ms, pct};
use super::{Classes, Classification};

/// How many bottlenecks are reported.
pub const MAX_BOTTLENECKS: usize = 3;

/// One of the top bottlenecks (schema `$defs/bottleneck`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// The id of the step that shows it (or of the nearest step above it).
    pub step: String,
    /// The function (or, for a thread's stack-less time, the thread): the user's own
    /// code nearest to the time (see `ownframe`).
    pub function: String,
    /// When the time sits in library, runtime or kernel code below `function`: that
    /// code's function (`clock_nanosleep`, `__GI___poll`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_function: Option<String>,
    /// file:line when known.
    pub location: Option<String>,
    /// Binary or shared object, when known.
    pub module: Option<String>,
    /// Its bottleneck class (the schema's `type`).
    #[serde(rename = "type")]
    pub class: Classification,
    /// Its own share of the session's wall time (critical path), percent.
    pub share: f64,
    /// One sentence with the figures behind it.
    pub description: String,
    /// Each entry answers "why?" for the previous one, with a measured figure.
    pub why_chain: Vec<String>,
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

/// What one candidate (a function, or a thread's stack-less time) holds.
#[derive(Default)]
struct Candidate {
    /// Representative node: the heaviest by own critical-path time.
    best: usize,
    nodes: Vec<usize>,
    self_crit_ns: u64,
    /// Own critical-path time per category.
    waits: [u64; WaitCategory::ALL.len()],
    /// Inclusive critical-path time, each path counted once.
    incl_crit_ns: u64,
    /// Own summed thread time and its on-CPU part.
    thread_ns: u64,
    cpu_ns: u64,
}

/// The candidate key of node `i`: the function whose machine code it is, or the
/// thread/process node itself.
fn candidate_key(p: &SampledProfile, tree: &CallTree, i: usize) -> Option<(bool, u32)> {
    match tree.nodes[i].label {
        NodeLabel::Function { frame } => {
            Some((true, tree.containing_function(p, i).unwrap_or(frame)))
        }
        NodeLabel::Process { .. } | NodeLabel::Thread { .. } => Some((false, i as u32)),
        NodeLabel::Session => None,
    }
}

fn candidates(p: &SampledProfile, tree: &CallTree) -> Vec<((bool, u32), Candidate)> {
    let mut by_key: HashMap<(bool, u32), Candidate> = HashMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        let Some(key) = candidate_key(p, tree, i) else {
            continue;
        };
        let c = by_key.entry(key).or_default();
        for (w, o) in c.waits.iter_mut().zip(tree.self_crit_waits(i)) {
            *w += o;
        }
        if c.nodes.is_empty() || n.self_crit_ns > tree.nodes[c.best].self_crit_ns {
            c.best = i;
        }
        c.nodes.push(i);
        c.self_crit_ns += n.self_crit_ns;
        c.thread_ns += n.self_wall_ns;
        c.cpu_ns += n.self_cpu_ns;
        if !has_ancestor_with(p, tree, i, key) {
            c.incl_crit_ns += n.crit_ns;
        }
    }
    let mut v: Vec<((bool, u32), Candidate)> = by_key
        .into_iter()
        .filter(|(_, c)| c.self_crit_ns > 0)
        .collect();
    v.sort_by(|(ka, a), (kb, b)| b.self_crit_ns.cmp(&a.self_crit_ns).then(ka.cmp(kb)));
    v
}

fn has_ancestor_with(p: &SampledProfile, tree: &CallTree, node: usize, key: (bool, u32)) -> bool {
    let mut cur = tree.nodes[node].parent();
    while let Some(i) = cur {
        if candidate_key(p, tree, i) == Some(key) {
            return true;
        }
        cur = tree.nodes[i].parent();
    }
    false
}

/// The id of the step that shows node `i`, or of the nearest step above it.
fn step_of(tree: &CallTree, node_steps: &HashMap<usize, &str>, i: usize) -> Option<String> {
    let mut cur = Some(i);
    while let Some(n) = cur {
        if let Some(id) = node_steps.get(&n) {
            return Some((*id).to_string());
        }
        cur = tree.nodes[n].parent();
    }
    None
}

pub(crate) fn top_bottlenecks(
    p: &SampledProfile,
    tree: &CallTree,
    classes: &Classes,
    steps: &[Step],
    refs: &[StepRef],
) -> Vec<Bottleneck> {
    let mut node_steps: HashMap<usize, &str> = HashMap::new();
    for r in refs {
        for &n in &r.nodes {
            node_steps.entry(n).or_insert(r.id.as_str());
        }
    }
    let mut all: Vec<Bottleneck> = candidates(p, tree)
        .into_iter()
        .filter_map(|(key, c)| {
            let step = step_of(tree, &node_steps, c.best)?;
            Some(describe(p, tree, classes, key, &c, step))
        })
        .take(MAX_BOTTLENECKS)
        .collect();
    // A flat process outranks the small functions it is spread over.
    all.extend(super::spread::spread_steps(p, tree, steps, refs));
    all.sort_by(|a, b| b.share.total_cmp(&a.share));
    all.truncate(MAX_BOTTLENECKS);
    all
}

fn describe(
    p: &SampledProfile,
    tree: &CallTree,
    classes: &Classes,
    (is_fn, id): (bool, u32),
    c: &Candidate,
    step: String,
) -> Bottleneck {
    let total = tree.total_wall_ns();
    let best = &tree.nodes[c.best];
    let class = classes.dominant(&c.waits, best.pid);
    let cats = categories(&c.waits);
    let (top_cat, top_ns) = cats.first().copied().unwrap_or((WaitCategory::Cpu, 0));
    let share = pct(c.self_crit_ns, total);
    // Time in library or kernel code is named at the user's own caller.
    let owner = is_fn
        .then(|| &p.frames[id as usize])
        .filter(|f| super::ownframe::is_system(f))
        .and_then(|_| super::ownframe::own_caller(p, tree, c.best));
    let name = if let Some(o) = owner {
        let (of, f) = (&p.frames[o as usize], &p.frames[id as usize]);
        match owner_location(p, tree, of) {
            Some(l) => format!("{} ({l}) in {}", of.function, f.function),
            None => format!("{} in {}", of.function, f.function),
        }
    } else if is_fn {
        let f = &p.frames[id as usize];
        let inlined = match best.label {
            NodeLabel::Function { frame } if frame != id => Some(&p.frames[frame as usize]),
            _ => None,
        };
        match (f.location(), inlined) {
            (Some(l), Some(i)) if i.inlined => {
                format!("{} ({l}; hot in inlined {})", f.function, i.function)
            }
            (Some(l), _) => format!("{} ({l})", f.function),
            (None, _) => f.function.clone(),
        }
    } else {
        format!("{}'s own time with no function named", best.name)
    };
    let of = match tree.critical {
        CriticalModel::Path { .. } => "the run's wall time",
        CriticalModel::ThreadTime => "the sampled time",
    };
    let description = format!(
        "{name} holds {share:.1}% of {of}, {:.1}% of it {}",
        pct(top_ns, c.self_crit_ns),
        top_cat.describe()
    );
    let mut why = vec![held(tree, c, share, total)];
    let split: Vec<String> = cats
        .iter()
        .take(3)
        .map(|(k, t)| {
            format!(
                "{} {} ms ({:.1}%)",
                k.describe(),
                ms(*t),
                pct(*t, c.self_crit_ns)
            )
        })
        .collect();
    why.push(format!("that time was: {}", split.join(", ")));
    let intervals: u64 = c
        .nodes
        .iter()
        .map(|&n| {
            let node = &tree.nodes[n];
            let below: u64 = tree
                .children(n)
                .map(|ch| tree.nodes[ch].off_cpu_intervals)
                .sum();
            node.off_cpu_intervals.saturating_sub(below)
        })
        .sum();
    let off_ns = c.thread_ns.saturating_sub(c.cpu_ns);
    if top_cat != WaitCategory::Cpu && intervals > 0 {
        why.push(format!(
            "it was switched out {intervals} times, {} ms per off-CPU interval on average",
            ms(off_ns / intervals)
        ));
    }
    why.push(below(p, tree, c, is_fn));
    if let Some(path) = heaviest_path(tree, c, &step) {
        why.push(path);
    }
    if is_fn && c.thread_ns.abs_diff(c.self_crit_ns) * 20 > c.self_crit_ns {
        why.push(format!(
            "summed over its threads it took {} ms ({} ms on-CPU), on the critical path or not",
            ms(c.thread_ns),
            ms(c.cpu_ns)
        ));
    }
    if let Some(k) = kernel_detail(p, tree, c) {
        why.push(k);
    }
    if top_cat == WaitCategory::Child {
        why.push(format!(
            "the time waiting for children is classed {} (the children's dominant class)",
            classes.class_of(WaitCategory::Child, best.pid).as_str()
        ));
    }
    let (function, location, module) = if is_fn {
        let f = &p.frames[owner.unwrap_or(id) as usize];
        let location = if owner.is_some() {
            owner_location(p, tree, f)
        } else {
            f.location()
        };
        (f.function.clone(), location, f.module.clone())
    } else {
        (best.name.to_string(), None, None)
    };
    Bottleneck {
        step,
        in_function: owner.map(|_| p.frames[id as usize].function.clone()),
        function,
        location,
        module,
        class,
        share,
        description,
        why_chain: why,
    }
}

/// The first link: what the candidate holds of the run, in which model.
fn held(tree: &CallTree, c: &Candidate, share: f64, total: u64) -> String {
    match tree.critical {
        CriticalModel::Path { .. } => format!(
            "the run waited {} ms for it: {share:.1}% of the {} ms critical path (who woke \
             whom, from the end of the run back)",
            ms(c.self_crit_ns),
            ms(total)
        ),
        CriticalModel::ThreadTime => format!(
            "it holds {} ms, {share:.1}% of the {} ms sampled across all threads (waits for \
             profiled work left out)",
            ms(c.self_crit_ns),
            ms(total)
        ),
    }
}

/// What lies below the candidate: its largest callee, truthfully.
fn below(p: &SampledProfile, tree: &CallTree, c: &Candidate, is_fn: bool) -> String {
    let mut callees: HashMap<u32, u64> = HashMap::new();
    // Outermost calls only: a recursive function's inner calls are inside them.
    let key = candidate_key(p, tree, c.best);
    let outermost = c
        .nodes
        .iter()
        .filter(|&&n| key.is_none_or(|k| !has_ancestor_with(p, tree, n, k)));
    for &n in outermost {
        for ch in tree.children(n) {
            if let NodeLabel::Function { frame } = tree.nodes[ch].label
                && tree.nodes[ch].crit_ns > 0
                && !c.nodes.contains(&ch)
            {
                *callees.entry(frame).or_default() += tree.nodes[ch].crit_ns;
            }
        }
    }
    let what = if is_fn { "its own code" } else { "it" };
    match callees
        .iter()
        .max_by_key(|(f, t)| (**t, std::cmp::Reverse(**f)))
    {
        Some((&f, &t)) => format!(
            "{what} holds {} ms of the {} ms spent in it and its callees; the largest callee, \
             {}, holds {} ms ({:.1}%)",
            ms(c.self_crit_ns),
            ms(c.incl_crit_ns),
            p.frames[f as usize].function,
            ms(t),
            pct(t, c.incl_crit_ns)
        ),
        None => format!(
            "all of its {} ms is {what}: it calls nothing that holds time on the path",
            ms(c.incl_crit_ns)
        ),
    }
}

/// The heaviest call path to the candidate, when there is more than its own frame.
fn heaviest_path(tree: &CallTree, c: &Candidate, step: &str) -> Option<String> {
    let mut names = Vec::new();
    let mut cur = Some(c.best);
    while let Some(i) = cur {
        let n = &tree.nodes[i];
        if matches!(n.label, NodeLabel::Session) {
            break;
        }
        if names.last() != Some(&&*n.name) {
            names.push(&n.name);
        }
        cur = n.parent();
    }
    if names.len() < 2 {
        return None;
    }
    names.reverse();
    let shown = if names.len() > 5 {
        let mut v = vec![names[0], "…"];
        v.extend_from_slice(&names[names.len() - 3..]);
        v
    } else {
        names
    };
    let paths = c
        .nodes
        .iter()
        .filter(|&&n| tree.nodes[n].self_crit_ns > 0)
        .count();
    Some(format!(
        "reached through {paths} call path{}; the heaviest: {} (step {step})",
        if paths == 1 { "" } else { "s" },
        shown.join(" → ")
    ))
}

/// The kernel functions its on-CPU samples ran in, when they are a notable part.
fn kernel_detail(p: &SampledProfile, tree: &CallTree, c: &Candidate) -> Option<String> {
    // By node index (one look-up a sample, no hashing).
    let mut mine = vec![false; tree.nodes.len()];
    for &n in &c.nodes {
        if let Some(m) = mine.get_mut(n) {
            *m = true;
        }
    }
    let mut by_fn: HashMap<&str, u64> = HashMap::new();
    let mut cpu = 0u64;
    for s in p.samples.iter() {
        let is_mine = |n: usize| mine.get(n).copied().unwrap_or(false);
        if s.kind != SampleKind::OnCpu || !tree.node_of(&s).is_some_and(is_mine) {
            continue;
        }
        cpu += s.weight_ns;
        let Some(leaf) = s.stack.get() else { continue };
        let f = &p.frames[p.stacks[leaf as usize].frame as usize];
        if f.kind == FrameKind::Kernel {
            *by_fn.entry(f.function.as_str()).or_default() += s.weight_ns;
        }
    }
    let in_kernel: u64 = by_fn.values().sum();
    if cpu == 0 || in_kernel * 10 < cpu {
        return None;
    }
    let mut v: Vec<(&str, u64)> = by_fn.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = v
        .iter()
        .take(3)
        .map(|(f, t)| format!("{f} {:.1}%", pct(*t, cpu)))
        .collect();
    Some(format!(
        "{:.1}% of its on-CPU time is in the kernel: {}",
        pct(in_kernel, cpu),
        top.join(", ")
    ))
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
    let threads = p.sampled_threads();
    let mut pids: Vec<i32> = threads.iter().map(|t| t.0).collect();
    pids.dedup();
    let processes = pids.len();
    let of = match tree.critical {
        CriticalModel::Path { .. } => "the run's critical path",
        CriticalModel::ThreadTime => "sampled thread time",
    };
    let mut s = format!(
        "{}: {:.1}% of {} ms of {of} ({} process{}, {} thread{}) is {}",
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
        "; the threads were on-CPU {} ms of {} ms thread time",
        ms(root.cpu_ns),
        ms(root.wall_ns)
    ));
    if let Some(b) = top.first() {
        s.push_str(&format!(
            "; largest bottleneck: {} ({:.1}%, {}, step {})",
            b.function,
            b.share,
            b.class.as_str(),
            b.step
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
        Classification::Memory => "in page faults (blocked, or faulting and clearing pages)",
        Classification::Idle => "idle (sleeping, or waiting on pipes or children)",
        Classification::Gpu => "waiting on the GPU",
        Classification::Unknown => "off-CPU for reasons the recording does not show",
        Classification::Architecture | Classification::External | Classification::Cache => {
            "attributed to this class"
        }
    }
}

/// Where the user's own frame that a bottleneck is named at stands: for a Python
/// function, the line of it holding most of the time (the call into the library
/// that the time sits in), not the lowest line sampled, which stands for the function
/// elsewhere (`<module>`'s first import).
fn owner_location(
    p: &SampledProfile,
    tree: &CallTree,
    of: &crate::profile::Frame,
) -> Option<String> {
    if of.kind == crate::profile::FrameKind::Python
        && let Some(file) = of.file.as_deref()
        && let Some(t) = super::lines::line_table(p, tree, &of.function, file)
        && let Some(top) = t.lines.first()
    {
        return Some(format!("{file}:{}", top.line));
    }
    of.location()
}
