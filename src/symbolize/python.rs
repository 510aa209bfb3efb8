//! Python frames merged into the native stacks, where the interpreter's evaluation
//! frames stand (the way `py-spy --native` shows them).
//!
//! Each native sample (on- or off-CPU) of a thread that has Python samples takes the
//! Python stack of the nearest Python sample of the same thread, within [`WINDOW_NS`]
//! (two reading periods at 100 Hz) of the on-CPU tick, or of the off-CPU interval
//! (a read inside the interval is at distance 0), that can be the thread's stack at
//! that moment: an on-CPU sample takes no read where the thread was idle, and one
//! running the interpreter's own code (bytecode runs only with the GIL) no read where
//! it did not hold the GIL, when the interpreter's GIL holder was read at all (a C
//! extension that released the GIL runs outside the interpreter's code and keeps any
//! active read); for a read that held the GIL it looks as far as [`GIL_WINDOW_NS`]. Without this, threads taking turns on the GIL lent their CPU time to
//! wherever they had last been seen waiting (a pool of four: 39% of the CPU on
//! `Condition.__enter__`, a lock wait). Its stack becomes:
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

/// How far an on-CPU sample running the interpreter's code may look for a read where
/// its thread held the GIL, when none is within [`WINDOW_NS`]: threads taking turns
/// on the GIL each hold it at about one read in N, and a thread's next turn mostly runs
/// what its last one ran (a pool of four left 37% of its CPU without Python frames at
/// 20 ms).
pub const GIL_WINDOW_NS: u64 = 50_000_000;

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
    let gil_read: std::collections::HashSet<i32> = py
        .samples
        .iter()
        .filter(|s| s.owns_gil)
        .map(|s| s.pid)
        .collect();
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
    // (sample index, its merged stack), ascending.
    let mut merged: Vec<(usize, crate::profile::Leaf)> = Vec::new();
    for (k, s) in p.samples.iter().enumerate() {
        let Some(list) = by_tid.get(&(s.pid, s.tid)) else {
            continue;
        };
        let native = s
            .stack
            .get()
            .map(|leaf| p.stack_frame_ids(leaf))
            .unwrap_or_default();
        let has_eval = native.iter().any(|&id| is_eval(&p.frames[id as usize]));
        let (lo, hi) = match s.kind {
            SampleKind::OnCpu => (s.time_ns, s.time_ns),
            SampleKind::OffCpu { .. } => (s.time_ns, s.time_ns.saturating_add(s.weight_ns)),
        };
        let near = nearest(&py, list, lo, hi, WINDOW_NS, |_| true);
        if has_eval || near.is_some() {
            stats.candidates += 1;
        }
        let Some(mut pi) = near else {
            stats.no_python_sample_near += u64::from(has_eval);
            continue;
        };
        if s.kind == SampleKind::OnCpu {
            let needs_gil = gil_read.contains(&s.pid) && runs_interpreter(p, &native);
            let fits = |i: usize| {
                let r = &py.samples[i];
                r.active && (r.owns_gil || !needs_gil)
            };
            let window = if needs_gil { GIL_WINDOW_NS } else { WINDOW_NS };
            match nearest(&py, list, lo, hi, window, fits) {
                Some(i) => pi = i,
                None => {
                    stats.no_consistent_read += 1;
                    continue;
                }
            }
        }
        let Some(ids) = splice(p, &native, &py.samples[pi].frames, &py_frames) else {
            stats.no_eval_frame += 1;
            continue;
        };
        merged.push((k, interner.stack(&mut p.stacks, &ids).into()));
        stats.merged += 1;
    }
    // Applied in one pass: the samples are packed in blocks, each packed again once.
    let mut next = merged.into_iter().peekable();
    let mut k = 0;
    p.samples.for_each_mut(|s| {
        if let Some((_, stack)) = next.next_if(|m| m.0 == k) {
            s.stack = stack;
        }
        k += 1;
    });
    p.quality.warnings.extend(merge_warning(&stats));
    py.merge = Some(stats);
    p.python = py;
}

/// A warning when more than [`UNMERGED_WARN_PCT`] of the Python threads' samples kept
/// native frames only.
fn merge_warning(m: &MergeStats) -> Option<String> {
    let unmerged = m.candidates.saturating_sub(m.merged);
    let pct = 100.0 * unmerged as f64 / m.candidates.max(1) as f64;
    (pct > UNMERGED_WARN_PCT).then(|| {
        format!(
            "{unmerged} of {} samples of Python threads ({pct:.1}%) have no Python frames: {} \
             had no Python stack read within {} ms (the interpreter's start before it was \
             found, or reads falling behind on a busy machine), {} no evaluation frame in \
             their native stack; they are shown as native code",
            m.candidates,
            m.no_python_sample_near,
            m.window_ns / 1_000_000,
            m.no_eval_frame
        )
    })
}

/// Unmerged share (%) of the Python threads' samples above which a warning says so.
const UNMERGED_WARN_PCT: f64 = 10.0;

/// The index of the Python sample of `list` nearest to `[lo, hi]` for which `fits`
/// holds, within `window` ns.
fn nearest(
    py: &PythonStacks,
    list: &[usize],
    lo: u64,
    hi: u64,
    window: u64,
    fits: impl Fn(usize) -> bool,
) -> Option<usize> {
    let at = list.partition_point(|&i| py.samples[i].time_ns < lo);
    let dist = |i: usize| {
        let t = py.samples[i].time_ns;
        if t < lo { lo - t } else { t.saturating_sub(hi) }
    };
    let before = list[..at]
        .iter()
        .rev()
        .take_while(|&&i| dist(i) <= window)
        .find(|&&i| fits(i));
    let after = list[at..]
        .iter()
        .take_while(|&&i| dist(i) <= window)
        .find(|&&i| fits(i));
    match (before, after) {
        (Some(&b), Some(&a)) => Some(if dist(a) < dist(b) { a } else { b }),
        (b, a) => b.or(a).copied(),
    }
}

/// True when the innermost user-space frame of `native` (root first) is the
/// interpreter's own code: bytecode, or its C functions, which run with the GIL held.
fn runs_interpreter(p: &SampledProfile, native: &[u32]) -> bool {
    native
        .iter()
        .rev()
        .map(|&id| &p.frames[id as usize])
        .find(|f| f.kind == FrameKind::User)
        .is_some_and(crate::profile::is_interpreter_frame)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{PythonFrame, PythonSample, ThreadSample};

    fn native(function: &str, module: &str, kind: FrameKind) -> Frame {
        Frame {
            function: function.into(),
            module: Some(module.into()),
            file: None,
            line: None,
            kind,
            inlined: false,
        }
    }

    /// main → _PyEval_EvalFrameDefault → PyObject_Call → _PyEval_EvalFrameDefault →
    /// long_add, as one on-CPU sample at `at` ns, and one off-CPU interval.
    fn profile(at: u64) -> SampledProfile {
        let mut p = SampledProfile::default();
        let chain = [
            native("main", "python3.11", FrameKind::User),
            native("_PyEval_EvalFrameDefault", "python3.11", FrameKind::User),
            native("PyObject_Call", "python3.11", FrameKind::User),
            native("_PyEval_EvalFrameDefault", "python3.11", FrameKind::User),
            native("__libc_recv", "libc.so.6", FrameKind::User),
            native("tcp_recvmsg", "[kernel]", FrameKind::Kernel),
        ];
        let mut parent = None;
        for (i, f) in chain.into_iter().enumerate() {
            p.frames.push(f);
            p.stacks.push(StackNode {
                parent,
                frame: i as u32,
            });
            parent = Some(i as u32);
        }
        for (time_ns, kind, weight_ns) in [
            (at, SampleKind::OnCpu, 1_000_000),
            (
                at + 100_000_000,
                SampleKind::OffCpu {
                    state: crate::profile::WaitState::Sleeping,
                },
                300_000_000,
            ),
        ] {
            p.samples.push(ThreadSample {
                pid: 7,
                tid: 7,
                time_ns,
                stack: parent.into(),
                weight_ns,
                kind,
            });
        }
        p
    }

    fn py(times: &[u64]) -> PythonStacks {
        let frame = |f: &str| PythonFrame {
            function: f.into(),
            file: "/app/m.py".into(),
            module: "m".into(),
            line: Some(1),
        };
        PythonStacks {
            frames: vec![frame("<module>"), frame("wait_reply")],
            samples: times
                .iter()
                .map(|&time_ns| PythonSample {
                    pid: 7,
                    tid: 7,
                    time_ns,
                    frames: vec![0, 1],
                    active: true,
                    owns_gil: false,
                })
                .collect(),
            ..PythonStacks::default()
        }
    }

    fn names(p: &SampledProfile, k: usize) -> Vec<String> {
        p.stack_frames(p.samples.at(k).stack.get().unwrap_or(0))
            .iter()
            .map(|f| f.function.clone())
            .collect()
    }

    #[test]
    fn python_frames_replace_the_evaluation_frames_and_keep_what_is_below() {
        let mut p = profile(50_000_000);
        // One read 5 ms after the tick, one inside the off-CPU interval.
        merge(&mut p, py(&[55_000_000, 300_000_000]));
        assert_eq!(
            names(&p, 0),
            [
                "main",
                "<module>",
                "wait_reply",
                "__libc_recv",
                "tcp_recvmsg"
            ]
        );
        assert_eq!(names(&p, 1), names(&p, 0));
        // The analysis folds the interpreter's own frames away.
        let seen: Vec<&str> =
            crate::profile::analysed_frame_ids(&p, p.samples.at(0).stack.get().unwrap_or(0))
                .iter()
                .map(|&id| p.frames[id as usize].function.as_str())
                .collect();
        assert_eq!(
            seen,
            ["<module>", "wait_reply", "__libc_recv", "tcp_recvmsg"]
        );
        let m = p.python.merge.expect("stats");
        assert_eq!((m.candidates, m.merged), (2, 2));
    }

    #[test]
    fn a_read_outside_the_window_lends_nothing() {
        let mut p = profile(50_000_000);
        // 25 ms before the tick; 30 ms after the interval's end.
        merge(&mut p, py(&[25_000_000, 480_000_000]));
        assert_eq!(names(&p, 0)[1], "_PyEval_EvalFrameDefault");
        let m = p.python.merge.expect("stats");
        assert_eq!((m.candidates, m.merged, m.no_python_sample_near), (2, 0, 2));
    }

    /// One on-CPU tick at 50 ms in the interpreter's own code (main → eval → long_add).
    fn running_bytecode() -> SampledProfile {
        let mut p = SampledProfile::default();
        for (i, f) in ["main", "_PyEval_EvalFrameDefault", "long_add"]
            .into_iter()
            .enumerate()
        {
            p.frames.push(native(f, "python3.11", FrameKind::User));
            p.stacks.push(StackNode {
                parent: i.checked_sub(1).map(|j| j as u32),
                frame: i as u32,
            });
        }
        p.samples.push(ThreadSample {
            pid: 7,
            tid: 7,
            time_ns: 50_000_000,
            stack: Some(2).into(),
            weight_ns: 1_000_000,
            kind: SampleKind::OnCpu,
        });
        p
    }

    /// Reads at `times` of `(leaf function, active, owns_gil)`.
    fn reads(times: &[(u64, &str, bool, bool)]) -> PythonStacks {
        let mut py = PythonStacks::default();
        for &(time_ns, leaf, active, owns_gil) in times {
            py.frames.push(PythonFrame {
                function: leaf.into(),
                file: "/app/m.py".into(),
                module: "m".into(),
                line: Some(1),
            });
            py.samples.push(PythonSample {
                pid: 7,
                tid: 7,
                time_ns,
                frames: vec![(py.frames.len() - 1) as u32],
                active,
                owns_gil,
            });
        }
        py
    }

    #[test]
    fn running_bytecode_takes_the_nearest_read_that_held_the_gil() {
        // 2 ms away the thread waited for a lock (no GIL); 12 ms away it computed.
        let mut p = running_bytecode();
        merge(
            &mut p,
            reads(&[
                (52_000_000, "Condition.__enter__", true, false),
                (38_000_000, "find_longest_match", true, true),
            ]),
        );
        assert_eq!(names(&p, 0), ["main", "find_longest_match", "long_add"]);
        // An idle read is never an on-CPU sample's stack.
        let mut p = running_bytecode();
        merge(
            &mut p,
            reads(&[
                (51_000_000, "sleep", false, false),
                (40_000_000, "spin", true, true),
            ]),
        );
        assert_eq!(names(&p, 0)[1], "spin");
        // Nothing consistent in the window: the native stack stays, and is counted.
        let mut p = running_bytecode();
        merge(
            &mut p,
            reads(&[
                (51_000_000, "Condition.__enter__", true, false),
                (120_000_000, "other_thread_gil", true, true),
            ]),
        );
        assert_eq!(names(&p, 0)[1], "_PyEval_EvalFrameDefault");
        assert_eq!(p.python.merge.expect("stats").no_consistent_read, 1);
    }

    #[test]
    fn without_a_gil_holder_read_the_nearest_active_read_is_taken() {
        // No read of this interpreter ever saw the GIL held (its holder unknown).
        let mut p = running_bytecode();
        merge(
            &mut p,
            reads(&[
                (52_000_000, "near", true, false),
                (38_000_000, "far", true, false),
            ]),
        );
        assert_eq!(names(&p, 0)[1], "near");
    }
}
