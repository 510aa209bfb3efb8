//! The data model: one versioned recording of a profiling session.
//!
//! Everything left of PROFILE in the flow (target, measure, sample, symbolize) produces
//! these structs; everything right of it (analyse, report, export, compare) is a pure
//! function of them. The recording is written as `profile.pmr` (see [`pmr`]) and read
//! back by `profmap report`, as are older `profile.json.gz` recordings.
//!
//! Invariants:
//! - Times are nanoseconds (`_ns`) or milliseconds (`_ms`) as named; sizes bytes or KiB
//!   as named. A value that was not measured is `None`, never 0.
//! - Stacks are interned as a prefix tree (`StackNode` with a parent index), root first:
//!   a sample points at its leaf node. Frames are interned once per distinct
//!   (function, module, file, line, kind).
//! - Off-CPU intervals are samples whose `weight_ns` is the interval's duration;
//!   on-CPU samples weigh the sampling period. Summing weights gives wall-clock time per
//!   thread, and per stack.

mod baseline;
mod escalation;
mod instrumented;
mod io;
pub mod pmr;
mod python;
mod sampled;
mod samplelist;
mod samples;
mod source;
pub mod spool;
pub mod validate;
mod waitlist;

pub use baseline::{
    Baseline, BusyProcess, DiskBusy, ExitStatus, MachineLoad, RunMeasurement, TimelinePoint,
};
pub use escalation::{EscalationDecision, MemoryLine, MemoryProcess, MemoryProfile};
pub use instrumented::{InstrumentedFile, TracedFunction};
pub use io::{RECORDING_V1, RECORDING_V2, open_recording, read_recording, write_recording};
pub use python::{
    MergeStats, PythonFrame, PythonInterpreter, PythonSample, PythonStacks, analysed_frame_ids,
    is_interpreter_frame,
};
pub use sampled::{
    CAPTURED_OUTPUT, FileReads, Frame, FrameKind, Leaf, MAX_TURNS_PER_SOCKET, ModuleInfo, OptIndex,
    ProcessInfo, Protocol, Resource, ResourceKind, SampleKind, SampleQuality, SampledProfile,
    SocketTraffic, StackNode, ThreadInfo, ThreadSample, Turn, WaitOn, WaitState, Waker, unaliased,
};
pub use samples::{Kept, Samples, Woken};
pub use source::MAX_JSON_BYTES;
pub use waitlist::Waits;

use serde::{Deserialize, Serialize};

/// Identifies the file format; `report` refuses anything else.
pub const FORMAT_NAME: &str = "profmap-recording";
/// Bumped on any incompatible change of the structs below or of the file. 1: gzip JSON
/// (`profile.json.gz`, still read: the same structs); 2: the chunked binary file
/// (`profile.pmr`, see [`pmr`]), written since.
pub const FORMAT_VERSION: u32 = 2;

/// One profiling session on disk.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Recording {
    pub format: String,
    pub version: u32,
    pub meta: SessionMeta,
    pub baseline: Option<Baseline>,
    /// The separate, profiled run's own figures (not part of the baseline statistics).
    #[serde(default)]
    pub profiled_run: Option<RunMeasurement>,
    pub sampled: Option<SampledProfile>,
    /// Warnings raised while recording (the target, the machine, the measurement).
    pub warnings: Vec<String>,
    /// What `profmap instrument` had in place in the folder the session ran in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instrumented: Vec<InstrumentedFile>,
    /// `--trace`: per-function medians of the traced runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traced: Vec<TracedFunction>,
    /// What the session escalated to while recording (Level 3, instrumentation), and
    /// why; the analysis adds Levels 1 and 2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalation: Vec<EscalationDecision>,
    /// Level 3: the tracemalloc run's allocations per line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryProfile>,
}

/// What was run, when, by which profmap, on what machine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionMeta {
    pub run_id: String,
    pub command: Vec<String>,
    /// Seconds since the Unix epoch when the session started.
    pub started_unix_s: f64,
    pub tool_version: String,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpus: Option<u32>,
}

impl Recording {
    pub fn new(meta: SessionMeta) -> Self {
        Recording {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            meta,
            baseline: None,
            profiled_run: None,
            sampled: None,
            warnings: Vec::new(),
            instrumented: Vec::new(),
            traced: Vec::new(),
            escalation: Vec::new(),
            memory: None,
        }
    }
}
