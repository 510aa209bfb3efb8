//! Python stacks as read from CPython interpreters of the tree: the side table of a
//! recording (`SampledProfile::python`), kept beside the native samples they were
//! merged into, for line-level views and for checking the merge.

use serde::{Deserialize, Serialize};

use super::{Frame, FrameKind};

/// Every Python stack read during the run, with what it cost and how the merge went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PythonStacks {
    /// The interpreters profiled (one per process that was a CPython interpreter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interpreters: Vec<PythonInterpreter>,
    /// Interned Python frames.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<PythonFrame>,
    /// One per thread per read, in time order per thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<PythonSample>,
    /// Reads of one process's threads' stacks (one read covers all its threads).
    #[serde(default)]
    pub reads: u64,
    /// Reads that failed (the process exited, or its memory changed under the read).
    #[serde(default)]
    pub failed_reads: u64,
    /// Time spent reading, summed, ns (the sampler's cost; the target is not stopped).
    #[serde(default)]
    pub read_ns: u64,
    /// The reading rate aimed at, per process, Hz.
    #[serde(default)]
    pub rate_hz: u32,
    /// How the native samples of Python threads met Python stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeStats>,
}

/// One CPython interpreter (a process) whose stacks were read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PythonInterpreter {
    pub pid: i32,
    /// e.g. "3.11.2".
    pub version: String,
    pub exe: Option<String>,
}

/// A Python frame: the code object's qualified name (3.11+; the plain name before),
/// its file and the line executing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct PythonFrame {
    pub function: String,
    pub file: String,
    /// The module, from the file's path below its `sys.path` entry (`json.decoder`).
    pub module: String,
    pub line: Option<u32>,
}

/// The Python stack of one thread at one time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PythonSample {
    pub pid: i32,
    pub tid: i32,
    /// Nanoseconds since the run's start (CLOCK_MONOTONIC, the perf samples' clock).
    pub time_ns: u64,
    /// Indices into `frames`, outermost first.
    pub frames: Vec<u32>,
    /// False when the thread was idle (sleeping in a known wait) at the read.
    pub active: bool,
    pub owns_gil: bool,
}

/// Native samples of threads with Python stacks, and what became of them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MergeStats {
    /// The window within which a Python sample counts as near, ns.
    pub window_ns: u64,
    /// Native samples (on- and off-CPU) of threads that had Python samples, whose
    /// stack holds an evaluation frame or that have a Python sample near (the
    /// interpreter's time: a shell's before it exec'd the interpreter is not).
    pub candidates: u64,
    /// Those given Python frames.
    pub merged: u64,
    /// Those in the evaluation loop with no Python sample of their thread within the
    /// window (e.g. before the interpreter was found and attached).
    pub no_python_sample_near: u64,
    /// Those with a Python sample near but no evaluation frame in the native stack
    /// (native-only code at the time, or an unwinding that stopped short).
    pub no_eval_frame: u64,
    /// Those on-CPU with Python reads near, none of which could be the thread's stack
    /// at the time: it was idle at every one, or (running the interpreter's own code,
    /// which holds the GIL) did not hold the GIL at any.
    #[serde(default)]
    pub no_consistent_read: u64,
}

impl PythonStacks {
    /// True when the table holds nothing (no Python interpreter was seen).
    pub fn is_empty(&self) -> bool {
        *self == PythonStacks::default()
    }
}

/// Most frames in one Python sample (CPython's default recursion limit is 1000).
pub const MAX_PYTHON_DEPTH: usize = 100_000;

/// The first problem of a recording's Python table (untrusted input), as a sentence.
pub(super) fn validate(p: &PythonStacks) -> Result<(), String> {
    use super::validate::{
        MAX_FRAMES, MAX_PROCESSES, MAX_SAMPLES, amount, count, ns, opt_text, text,
    };
    count("Python interpreters", p.interpreters.len(), MAX_PROCESSES)?;
    for (i, x) in p.interpreters.iter().enumerate() {
        text(format_args!("Python interpreter {i} version"), &x.version)?;
        opt_text(format_args!("Python interpreter {i} exe"), x.exe.as_deref())?;
    }
    count("Python frames", p.frames.len(), MAX_FRAMES)?;
    for (i, f) in p.frames.iter().enumerate() {
        text(format_args!("Python frame {i} function"), &f.function)?;
        text(format_args!("Python frame {i} file"), &f.file)?;
        text(format_args!("Python frame {i} module"), &f.module)?;
    }
    count("Python samples", p.samples.len(), MAX_SAMPLES)?;
    let mut refs = 0usize;
    for (i, s) in p.samples.iter().enumerate() {
        ns(format_args!("Python sample {i} time_ns"), s.time_ns)?;
        count(
            format_args!("frames in Python sample {i}"),
            s.frames.len(),
            MAX_PYTHON_DEPTH,
        )?;
        refs = refs.saturating_add(s.frames.len());
        if let Some(&f) = s.frames.iter().find(|&&f| f as usize >= p.frames.len()) {
            return Err(format!(
                "Python sample {i} points at frame {f} but there are {} Python frames",
                p.frames.len()
            ));
        }
    }
    count("frames in all Python samples", refs, 10 * MAX_SAMPLES)?;
    amount("Python reads", p.reads)?;
    amount("failed Python reads", p.failed_reads)?;
    ns("Python read_ns", p.read_ns)?;
    if p.rate_hz > 1_000_000 {
        return Err(format!("Python rate_hz is {} (limit 1000000)", p.rate_hz));
    }
    if let Some(m) = &p.merge {
        ns("Python merge window_ns", m.window_ns)?;
        let parts = [
            m.merged,
            m.no_python_sample_near,
            m.no_eval_frame,
            m.no_consistent_read,
        ];
        let sum = parts.iter().fold(0u64, |a, &b| a.saturating_add(b));
        if sum > m.candidates || m.candidates > MAX_SAMPLES as u64 {
            return Err(format!(
                "the Python merge counts {sum} outcomes for {} candidate samples",
                m.candidates
            ));
        }
    }
    Ok(())
}

/// True for a native frame of a CPython interpreter itself (its binary `python*` or
/// `libpython*`): the evaluation loop, object code, built-in modules.
pub fn is_interpreter_frame(f: &Frame) -> bool {
    f.kind == FrameKind::User
        && f.module.as_deref().is_some_and(|m| {
            let m = m.rsplit('/').next().unwrap_or(m);
            m.starts_with("python") || m.starts_with("libpython")
        })
}

/// A stack's frames as the analysis sees them, root first: in a stack holding Python
/// frames, the interpreter's own native frames are folded away (their time is the
/// Python function's); other stacks are as recorded. The flamegraphs and exports keep
/// every frame.
pub fn analysed_frame_ids(p: &super::SampledProfile, leaf: u32) -> Vec<u32> {
    let ids = p.stack_frame_ids(leaf);
    let frame = |id: u32| &p.frames[id as usize];
    if !ids.iter().any(|&id| frame(id).kind == FrameKind::Python) {
        return ids;
    }
    ids.into_iter()
        .filter(|&id| !is_interpreter_frame(frame(id)))
        .collect()
}
