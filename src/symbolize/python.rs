//! Python frames merged into the native stacks, where the interpreter's evaluation
//! frames stand (the way `py-spy --native` shows them).
//!
//! Each native sample (on- or off-CPU) of a thread that has Python samples takes the
//! Python stack of the nearest Python sample of the same thread, within [`WINDOW_NS`]
//! (two reading periods at 100 Hz) of the on-CPU tick, or of the off-CPU interval
//! (a read inside the interval is at distance 0). Its stack becomes:
//! 1. the native frames above the outermost evaluation frame (`_PyEval_EvalFrameDefault`
//!    and its older names): `_start`, `Py_RunMain`, `PyEval_EvalCode`... or libc's
//!    thread start and `thread_run`;
//! 2. the Python frames, outermost first (`FrameKind::Python`: function = qualified
//!    name, file, line, module = the Python module);
//! 3. the native frames below the innermost evaluation frame: the interpreter's
//!    (`PyObject_Vectorcall`, `long_add`...), a C extension's, libc's `recv`, the
//!    kernel's, so a C extension's hot function sits under the Python function that
//!    called it and an off-CPU wait keeps its kernel frames and class.
//!
//! Native frames between two Python frames (the evaluation frames themselves, the
//! interpreter's call machinery, a C extension calling back into Python) are dropped:
//! py-spy's reader does not tell which evaluation frame runs which Python frames
//! without native unwinding of its own. The analysis folds the interpreter's own frames
//! away in stacks with Python frames (`profile::analysed_frame_ids`): its work is the
//! Python function's own time; flamegraphs and exports keep them. A sample with no
//! Python sample near, or whose native stack has no evaluation frame, keeps its native
//! stack; both are counted in [`MergeStats`].

use std::collections::HashMap;

use crate::profile::{
    Frame, FrameKind, MergeStats, PythonStacks, SampleKind, SampledProfile, StackNode,
};

/// How far (ns) a Python sample may be from a native sample to lend it its stack.
pub const WINDOW_NS: u64 = 20_000_000;

/// CPython's frame evaluation functions, by version.
const EVAL_FUNCTIONS: &[&str] = &[
    "_PyEval_EvalFrameDefault",
    "PyEval_EvalFrameEx",
    "_PyEval_EvalFrame",
];

/// True for the interpreter's evaluation loop.
pub fn is_eval(f: &Frame) -> bool {
    EVAL_FUNCTIONS.contains(&f.function.as_str())
}

/// Merge `py` into `p`'s samples and keep it as `p.python`.
pub fn merge(p: &mut SampledProfile, py: PythonStacks) {
    let mut py = py;
    let mut by_tid: HashMap<(i32, i32), Vec<usize>> = HashMap::new();
    for (i, s) in py.samples.iter().enumerate() {
        if !s.frames.is_empty() {
            by_tid.entry((s.pid, s.tid)).or_default().push(i);
        }
    }
    for v in by_tid.values_mut() {
        v.sort_by_key(|&i| py.samples[i].time_ns);
    }
    let mut stats = MergeStats {
        window_ns: WINDOW_NS,
        ..MergeStats::default()
    };
    if by_tid.is_empty() {
        p.python = py;
        return;
    }
    let mut interner = Interner::new(p);
    let py_frames: Vec<u32> = py
        .frames
        .iter()
        .map(|f| {
            interner.frame(
                &mut p.frames,
                Frame {
                    function: f.function.clone(),
                    module: Some(f.module.clone()),
                    file: Some(f.file.clone()),
                    line: f.line,
                    kind: FrameKind::Python,
                    inlined: false,
                },
            )
        })
        .collect();
    for k in 0..p.samples.len() {
        let s = p.samples[k];
        let Some(list) = by_tid.get(&(s.pid, s.tid)) else {
            continue;
        };
        let native = s
            .stack
            .map(|leaf| p.stack_frame_ids(leaf))
            .unwrap_or_default();
        let has_eval = native.iter().any(|&id| is_eval(&p.frames[id as usize]));
        let (lo, hi) = match s.kind {
            SampleKind::OnCpu => (s.time_ns, s.time_ns),
            SampleKind::OffCpu { .. } => (s.time_ns, s.time_ns.saturating_add(s.weight_ns)),
        };
        let near = nearest(&py, list, lo, hi);
        if has_eval || near.is_some() {
            stats.candidates += 1;
        }
        let Some(pi) = near else {
            stats.no_python_sample_near += u64::from(has_eval);
            continue;
        };
        let Some(ids) = splice(p, &native, &py.samples[pi].frames, &py_frames) else {
            stats.no_eval_frame += 1;
            continue;
        };
        p.samples[k].stack = interner.stack(&mut p.stacks, &ids);
        stats.merged += 1;
    }
    py.merge = Some(stats);
    p.python = py;
}

/// The index of the Python sample of `list` nearest to `[lo, hi]`, within the window.
fn nearest(py: &PythonStacks, list: &[usize], lo: u64, hi: u64) -> Option<usize> {
    let at = list.partition_point(|&i| py.samples[i].time_ns < lo);
    let dist = |i: usize| {
        let t = py.samples[i].time_ns;
        if t < lo { lo - t } else { t.saturating_sub(hi) }
    };
    let mut best: Option<(u64, usize)> = None;
    let before = at.checked_sub(1).and_then(|j| list.get(j));
    for &i in before.into_iter().chain(list.get(at)) {
        let d = dist(i);
        if d <= WINDOW_NS && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, i));
        }
    }
    best.map(|(_, i)| i)
}

/// The merged frame ids, root first; None when `native` has no evaluation frame.
fn splice(p: &SampledProfile, native: &[u32], py: &[u32], py_frames: &[u32]) -> Option<Vec<u32>> {
    let frame = |id: u32| &p.frames[id as usize];
    let first = native.iter().position(|&id| is_eval(frame(id)))?;
    let last = native.iter().rposition(|&id| is_eval(frame(id)))?;
    let mut out: Vec<u32> = native[..first].to_vec();
    out.extend(
        py.iter()
            .filter_map(|&i| py_frames.get(i as usize).copied()),
    );
    out.extend_from_slice(&native[last + 1..]);
    Some(out)
}

/// Interning into the profile's frames and stacks (new entries appended, parents first).
struct Interner {
    frames: HashMap<Frame, u32>,
    stacks: HashMap<(Option<u32>, u32), u32>,
}

impl Interner {
    fn new(p: &SampledProfile) -> Interner {
        Interner {
            frames: p
                .frames
                .iter()
                .enumerate()
                .map(|(i, f)| (f.clone(), i as u32))
                .collect(),
            stacks: p
                .stacks
                .iter()
                .enumerate()
                .map(|(i, n)| ((n.parent, n.frame), i as u32))
                .collect(),
        }
    }

    fn frame(&mut self, frames: &mut Vec<Frame>, f: Frame) -> u32 {
        *self.frames.entry(f).or_insert_with_key(|f| {
            frames.push(f.clone());
            (frames.len() - 1) as u32
        })
    }

    fn stack(&mut self, stacks: &mut Vec<StackNode>, ids: &[u32]) -> Option<u32> {
        let mut cur = None;
        for &frame in ids {
            let id = *self.stacks.entry((cur, frame)).or_insert_with(|| {
                stacks.push(StackNode { parent: cur, frame });
                (stacks.len() - 1) as u32
            });
            cur = Some(id);
        }
        cur
    }
}
