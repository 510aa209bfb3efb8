//! Per-function times of one profiled run, and their before/after differences.
//!
//! A sample's self function is the innermost non-inlined frame of its stack (off-CPU:
//! the innermost user or Python frame, the kernel frames being the wait path), as the
//! hotspots count it; its total functions are every distinct function on the stack (an
//! off-CPU interval's kernel frames excepted: they are the wait path).
//! Off-CPU intervals that another profiled thread ended (a waker is recorded) are left
//! out of wall time: the waker's own samples hold that time. Times are ms in the one
//! profiled run of each side (ms per run).
//!
//! Significance: a time T measured by sampling at period P is about P × a Poisson count,
//! variance T·P; repeated runs add their own spread, taken from the side's baseline as
//! (cv·T)² with cv the runs' coefficient of variation of wall time (of CPU time for the
//! CPU figures). A change is
//! significant when |z| = |ΔT| / sqrt(var_before + var_after) > 3.29 (two-sided
//! p < 0.001: many functions are judged at once).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::profile::{FrameKind, SampleKind, SampledProfile};

/// |z| above which a function's change is significant (two-sided p < 0.001).
pub const Z_SIGNIFICANT: f64 = 3.29;
/// How many functions the comparison keeps.
pub const MAX_FUNCTIONS: usize = 15;

/// One function's times in one profiled run, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Times {
    pub self_wall: f64,
    pub self_cpu: f64,
    pub total_wall: f64,
    pub total_cpu: f64,
}

/// One side's per-function times.
#[derive(Debug, Clone, Default)]
pub struct FunctionTable {
    /// "function (module)" → times.
    pub times: BTreeMap<String, Times>,
    /// Summed wall weight of the samples counted, ms (the shares' denominator).
    pub total_wall_ms: f64,
    /// Sampling period, ms.
    pub period_ms: f64,
}

/// The name a function is matched by across the two sides.
fn key(function: &str, module: Option<&str>) -> String {
    match module {
        Some(m) => format!("{function} ({m})"),
        None => function.to_string(),
    }
}

impl FunctionTable {
    pub fn of(p: &SampledProfile) -> FunctionTable {
        let mut t = FunctionTable {
            period_ms: if p.frequency_hz > 0.0 {
                1e3 / p.frequency_hz
            } else {
                1.0
            },
            ..Default::default()
        };
        for (s, waker) in p.samples.iter_woken() {
            let on_cpu = matches!(s.kind, SampleKind::OnCpu);
            if !on_cpu && waker.is_some() {
                continue;
            }
            let ms = s.weight_ns as f64 / 1e6;
            t.total_wall_ms += ms;
            let frames = s
                .stack
                .get()
                .map(|l| stack_frames(p, l))
                .unwrap_or_default();
            let self_frame = frames
                .iter()
                .rev()
                .find(|f| !f.inlined && (on_cpu || f.kind != FrameKind::Kernel))
                .or_else(|| frames.last());
            if let Some(f) = self_frame {
                let e = t
                    .times
                    .entry(key(&f.function, f.module.as_deref()))
                    .or_default();
                e.self_wall += ms;
                if on_cpu {
                    e.self_cpu += ms;
                }
            }
            let distinct: BTreeSet<String> = frames
                .iter()
                .filter(|f| f.kind != FrameKind::Synthetic)
                // An off-CPU interval's kernel frames are its wait path, not work.
                .filter(|f| on_cpu || f.kind != FrameKind::Kernel)
                .map(|f| key(&f.function, f.module.as_deref()))
                .collect();
            for k in distinct {
                let e = t.times.entry(k).or_default();
                e.total_wall += ms;
                if on_cpu {
                    e.total_cpu += ms;
                }
            }
        }
        t
    }
}

/// Frames of a stack, root first, never indexing out of the tables.
fn stack_frames(p: &SampledProfile, leaf: u32) -> Vec<&crate::profile::Frame> {
    let mut out = Vec::new();
    let mut cur = Some(leaf);
    while let Some(i) = cur {
        let Some(node) = p.stacks.get(i as usize) else {
            break;
        };
        if let Some(f) = p.frames.get(node.frame as usize) {
            out.push(f);
        }
        cur = node.parent;
        if out.len() > p.stacks.len() {
            break; // a cycle in a damaged recording
        }
    }
    out.reverse();
    out
}

/// One figure before and after.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Delta {
    /// ms in the BEFORE profiled run.
    pub before_ms: f64,
    /// ms in the AFTER profiled run.
    pub after_ms: f64,
    /// after − before, ms.
    pub change_ms: f64,
    /// The change in percent of before; null when before is 0.
    pub change_pct: Option<f64>,
    /// The change's z (see the module doc).
    pub z: f64,
    /// |z| > 3.29.
    pub significant: bool,
}

/// One function's change (compare.json `functions[]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FunctionChange {
    /// "function (module)".
    pub function: String,
    pub self_wall: Delta,
    pub self_cpu: Delta,
    pub total_wall: Delta,
    pub total_cpu: Delta,
    /// Its self time changed significantly, on-CPU or wall.
    pub significant: bool,
    /// Self wall time as a share of each side's sampled wall time, percent.
    pub self_share_before_pct: f64,
    pub self_share_after_pct: f64,
}

/// Noise model of one side: sampling period and the runs' coefficients of variation.
#[derive(Debug, Clone, Copy)]
pub struct Noise {
    pub period_ms: f64,
    /// Of wall time: for the wall figures.
    pub cv: f64,
    /// Of CPU time (user + sys): for the CPU figures, which a loaded machine spreads far
    /// less than wall time.
    pub cv_cpu: f64,
}

impl Noise {
    fn for_cpu(self) -> Noise {
        Noise {
            cv: self.cv_cpu,
            ..self
        }
    }
}

fn delta(b: f64, a: f64, nb: Noise, na: Noise) -> Delta {
    let var = b * nb.period_ms + (nb.cv * b).powi(2) + a * na.period_ms + (na.cv * a).powi(2);
    let change = a - b;
    let z = if var > 0.0 { change / var.sqrt() } else { 0.0 };
    Delta {
        before_ms: round3(b),
        after_ms: round3(a),
        change_ms: round3(change),
        change_pct: (b > 0.0).then(|| round3(change / b * 100.0)),
        z: round3(z),
        significant: z.abs() > Z_SIGNIFICANT,
    }
}

pub fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// The functions whose self time changed significantly, then the others; each group by
/// the size of the change (wall or CPU, then total wall), largest first.
pub fn changes(
    before: &FunctionTable,
    after: &FunctionTable,
    nb: Noise,
    na: Noise,
) -> Vec<FunctionChange> {
    let names: BTreeSet<&String> = before.times.keys().chain(after.times.keys()).collect();
    let share = |t: f64, tot: f64| {
        if tot > 0.0 {
            round3(t / tot * 100.0)
        } else {
            0.0
        }
    };
    let mut out: Vec<FunctionChange> = names
        .into_iter()
        .map(|n| {
            let b = before.times.get(n).copied().unwrap_or_default();
            let a = after.times.get(n).copied().unwrap_or_default();
            let self_wall = delta(b.self_wall, a.self_wall, nb, na);
            let self_cpu = delta(b.self_cpu, a.self_cpu, nb.for_cpu(), na.for_cpu());
            FunctionChange {
                function: n.clone(),
                significant: self_wall.significant || self_cpu.significant,
                self_wall,
                self_cpu,
                total_wall: delta(b.total_wall, a.total_wall, nb, na),
                total_cpu: delta(b.total_cpu, a.total_cpu, nb.for_cpu(), na.for_cpu()),
                self_share_before_pct: share(b.self_wall, before.total_wall_ms),
                self_share_after_pct: share(a.self_wall, after.total_wall_ms),
            }
        })
        .collect();
    // Self time is judged on wall and on CPU: a loaded machine inflates a CPU-bound
    // function's wall time (run-queue waits) far more than its CPU time.
    let size = |f: &FunctionChange| f.self_wall.change_ms.abs().max(f.self_cpu.change_ms.abs());
    out.sort_by(|x, y| {
        y.significant
            .cmp(&x.significant)
            .then(size(y).total_cmp(&size(x)))
            .then(
                y.total_wall
                    .change_ms
                    .abs()
                    .total_cmp(&x.total_wall.change_ms.abs()),
            )
            .then(x.function.cmp(&y.function))
    });
    out.truncate(MAX_FUNCTIONS);
    out
}
