//! Hotspots: functions ranked by self time (wall: on-CPU plus off-CPU), kernel
//! functions included.
//!
//! A sample's self function is where the thread was: for an on-CPU sample the
//! innermost frame of its stack, kernel frames included (module `[kernel]`: time spent
//! clearing pages or copying data in the kernel is named as such, as `perf report`
//! does); for an off-CPU interval the innermost user or Python frame (its kernel frames
//! are the wait path — `schedule` and friends — not work), or the innermost kernel
//! frame when the stack has no user frame. Code inlined into its caller counts as the
//! caller's (the function the machine code belongs to), as `perf report` counts it by
//! default; the steps and flamegraphs keep the inlined frames. A function's frames are
//! one row whatever their line. Its total time counts each sample once even when the
//! function recurses.
//!
//! Waits that profiled work stands for are not self time: with wake-up records, an
//! interval ended by another thread of the tree (that thread's hotspots hold the time);
//! without them, the categories [`CallTree::explained`] names. Hotspots are thread
//! time, as `perf report` counts it: shares are of all the self time so counted (every
//! thread's, on the critical path or not — the steps and bottlenecks are where the
//! critical path ranks). `on_cpu` is true when at least half of the self time was
//! on-CPU.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::profile::{FrameKind, SampleKind, SampledProfile, ThreadSample};

use super::FastMap;
use super::calltree::{CallTree, CriticalModel, function_ids};
use super::critical::followed_waker;
use super::steps::{ms, pct};

/// How many hotspots are kept.
pub const MAX_HOTSPOTS: usize = 20;

/// One hotspot (schema `profile_result.hotspots[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hotspot {
    /// The function.
    pub function: String,
    /// Binary or shared object, when known.
    pub module: Option<String>,
    /// file:line when known.
    pub location: Option<String>,
    /// Time in the function's own frame (not in callees), on-CPU and off-CPU, ms.
    pub self_time_ms: f64,
    /// `self_time_ms` as a share of the session's wall time, percent.
    pub self_share_pct: f64,
    /// The part of the self time spent on a CPU (the rest is off-CPU: waiting or
    /// preempted).
    pub self_cpu_time_ms: f64,
    /// Time with the function on the stack (callees included), ms.
    pub total_time_ms: f64,
    /// `total_time_ms` as a share of the session's wall time, percent.
    pub total_share_pct: f64,
    /// At least half of its self time was on a CPU.
    pub on_cpu: bool,
}

#[derive(Default)]
struct Acc {
    self_ns: u64,
    self_cpu_ns: u64,
    total_ns: u64,
}

/// What a stack means for the hotspots: the self function of an on-CPU and of an
/// off-CPU sample on it, and the distinct functions it passes through.
struct StackFns {
    on_cpu: u32,
    off_cpu: u32,
    all: Vec<u32>,
}

/// The top [`MAX_HOTSPOTS`] functions by self time.
pub fn hotspots(p: &SampledProfile, tree: &CallTree) -> Vec<Hotspot> {
    let (frame_fn, rep) = function_ids(p);
    let mut cache: FastMap<u32, StackFns> = FastMap::default();
    let mut acc: Vec<Acc> = (0..rep.len()).map(|_| Acc::default()).collect();
    for (i, s) in p.samples.iter().enumerate() {
        let Some(leaf) = s.stack.get() else { continue };
        let fns = cache
            .entry(leaf)
            .or_insert_with(|| stack_fns(p, leaf, &frame_fn));
        let on_cpu = s.kind == SampleKind::OnCpu;
        if !explained(p, tree, i, &s) {
            let a = &mut acc[(if on_cpu { fns.on_cpu } else { fns.off_cpu }) as usize];
            a.self_ns += s.weight_ns;
            if on_cpu {
                a.self_cpu_ns += s.weight_ns;
            }
        }
        for &f in &fns.all {
            acc[f as usize].total_ns += s.weight_ns;
        }
    }
    let total: u64 = acc.iter().map(|a| a.self_ns).sum();
    let mut rows: Vec<(u32, Acc)> = acc
        .into_iter()
        .enumerate()
        .filter(|(_, a)| a.self_ns > 0)
        .map(|(f, a)| (rep[f], a))
        .collect();
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

/// True when sample `i` (`s`) is a wait that other profiled work stands for.
fn explained(p: &SampledProfile, tree: &CallTree, i: usize, s: &ThreadSample) -> bool {
    if s.kind == SampleKind::OnCpu {
        return false;
    }
    match tree.critical {
        CriticalModel::Path { .. } => tree
            .sample_categories
            .get(i)
            .is_some_and(|c| followed_waker(p, i, c).is_some()),
        CriticalModel::ThreadTime => tree
            .sample_categories
            .get(i)
            .is_some_and(|c| tree.explained(s.pid).contains(&c)),
    }
}

fn stack_fns(p: &SampledProfile, leaf: u32, frame_fn: &[u32]) -> StackFns {
    let frames = crate::profile::analysed_frame_ids(p, leaf);
    // The function whose machine code frame `k` ran in: inlined frames belong to the
    // nearest caller that was not inlined.
    let owner = |mut k: usize| {
        while k > 0 && p.frames[frames[k] as usize].inlined {
            k -= 1;
        }
        frame_fn[frames[k] as usize]
    };
    let last = frames.len().saturating_sub(1);
    let innermost_user = frames
        .iter()
        .rposition(|&f| p.frames[f as usize].kind != FrameKind::Kernel)
        .unwrap_or(last);
    let mut seen = HashSet::new();
    let all = frames
        .iter()
        .map(|&f| frame_fn[f as usize])
        .filter(|f| seen.insert(*f))
        .collect();
    StackFns {
        on_cpu: owner(last),
        off_cpu: owner(innermost_user),
        all,
    }
}
