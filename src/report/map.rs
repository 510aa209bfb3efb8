//! The performance map as types: [`PerformanceMap`] is the document of
//! `schema/profile_result.schema.json`, field for field. `performance_map.json` and
//! `.yaml` are serialized from it, and `report.md`, `summary.json` and the terminal
//! summary render from it — never from keys looked up in a JSON value, so a renamed
//! field fails to compile instead of rendering as 0.
//!
//! Invariants: a figure that was not measured is `None` (null in the JSON), never 0; the
//! diagnosis's items (hints, suspicions, wrong-tool indicators) are typed in
//! `analyse::diagnose` with the schema's item fields and re-exported here.

use std::collections::BTreeMap;

use serde::Serialize;

use super::baseline::BaselineSummary;
pub use crate::analyse::diagnose::{
    OptimizationHint, Suspicion, SuspicionCategory, SuspicionSource, SuspicionVerdict,
    WrongToolEvidence, WrongToolIndicator,
};
use crate::analyse::{Bottleneck, Classification, CriticalPathSummary, Hotspot, Step};

/// The whole document (`performance_map.json`).
#[derive(Debug, Clone, Serialize)]
pub struct PerformanceMap {
    /// Version of the schema the document follows (1).
    pub schema_version: u32,
    /// The tool that wrote it.
    pub tool: Tool,
    /// The session's result.
    pub profile_result: ProfileResult,
}

/// `tool`: which profmap wrote the map.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// Always "profmap".
    pub name: String,
    /// profmap's version that made the recording.
    pub version: String,
}

/// `profile_result`: everything one session found.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileResult {
    /// What was profiled and how it was entered.
    pub entry_point_info: EntryPointInfo,
    /// Baseline, steps and the verdict.
    pub performance_map: PerformanceMapSection,
    /// The session's bottleneck class (the same as in `performance_map`).
    pub bottleneck_classification: Classification,
    /// One sentence with the figures behind the class.
    pub bottleneck_detail: String,
    /// At most three bottlenecks, largest first; empty when no verdict is given.
    pub top_bottlenecks: Vec<Bottleneck>,
    /// Functions by self time, highest first.
    pub hotspots: Vec<Hotspot>,
    /// Confirmed suspicions turned into advice, highest expected gain first.
    pub optimization_hints: Vec<OptimizationHint>,
    /// Suspicions, confirmed or dismissed by measurement, confirmed first.
    pub suspicion_stack: Vec<Suspicion>,
    /// The command that reproduces the run end to end.
    pub e2e_test: E2eTest,
    /// Files `profmap instrument` had changed or created in the folder the session ran
    /// in (from its manifest), each once.
    pub instrumented_files: Vec<String>,
    /// The changes behind `instrumented_files`, one row per inserted block or created
    /// file (report.md Part B).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instrumentation_changes: Vec<crate::profile::InstrumentedFile>,
    /// `--trace`: per-function medians of the traced runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub traced_functions: Vec<crate::profile::TracedFunction>,
    /// Escalation: each level entered or not (and the switch to instrumentation), with
    /// its reason and figures.
    pub escalation: Vec<crate::profile::EscalationDecision>,
    /// Level 2: per-line time of the top bottlenecks in Python code whose cause the
    /// function level left open.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub line_tables: Vec<crate::analyse::lines::LineTable>,
    /// Level 3: allocations per line from the tracemalloc run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_profile: Option<crate::profile::MemoryProfile>,
    /// Signs that a profiler is the wrong tool for this target (bare names, as the
    /// schema has them).
    pub wrong_tool_indicators: Vec<WrongToolIndicator>,
    /// The evidence behind each of `wrong_tool_indicators`, in the same order.
    pub wrong_tool_evidence: Vec<WrongToolEvidence>,
    /// How far the measurement can be trusted.
    pub measurement_quality: MeasurementQuality,
    /// The machine and session the map was made on.
    pub environment: Environment,
    /// Artifact name → path relative to the output folder.
    pub artifacts: BTreeMap<String, String>,
    /// Every warning of the session: recording, analysis and measurement quality.
    pub warnings: Vec<String>,
}

/// `entry_point_info`: what was profiled.
#[derive(Debug, Clone, Serialize)]
pub struct EntryPointInfo {
    /// How the target was entered.
    #[serde(rename = "type")]
    pub kind: EntryPointType,
    /// The program (argv\[0\]); None when unknown.
    pub location: Option<String>,
    /// The HTTP route, for an endpoint target; None otherwise.
    pub route: Option<String>,
    /// The function, for a function target; None otherwise.
    pub function: Option<String>,
    /// The command's argv.
    pub command: Vec<String>,
    /// Pids of the measured runs (counted runs, then the profiled run).
    pub pids: Vec<i32>,
}

/// Schema `entry_point_info.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryPointType {
    /// A command profmap launched.
    Command,
    /// A running process attached by pid.
    Process,
    /// A service found by name.
    Service,
    /// An HTTP endpoint put under load.
    ApiEndpoint,
    /// One function of a program.
    Function,
    /// A pipeline of commands.
    Pipeline,
    /// A test of the project.
    Test,
    /// The whole system.
    System,
}

/// `profile_result.performance_map`: the baseline, the steps and the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PerformanceMapSection {
    /// The command, quoted for a shell.
    pub test_command: String,
    /// Medians and statistics of the counted runs; None when nothing was run.
    pub baseline: Option<BaselineSummary>,
    /// The depth-limited step tree of the deep profile; empty without one.
    pub steps: Vec<Step>,
    /// The session's bottleneck class.
    pub bottleneck_classification: Classification,
    /// One sentence with the figures behind the class.
    pub bottleneck_detail: String,
    /// At most three bottlenecks, largest first.
    pub top_bottlenecks: Vec<Bottleneck>,
    /// Critical-path time per wait category, ms; None without a deep profile.
    pub wait_breakdown_ms: Option<BTreeMap<String, f64>>,
    /// Summed thread time per wait category, ms; None without a deep profile.
    pub thread_wait_breakdown_ms: Option<BTreeMap<String, f64>>,
    /// How the shares' denominator was made; None without a deep profile.
    pub critical_path: Option<CriticalPathSummary>,
    /// Sum of all sample weights of all threads, ms; None without a deep profile.
    pub thread_time_ms: Option<f64>,
    /// What the threads blocked on (files, sockets with their peers, pipes), most
    /// blocked time first; empty without a deep profile or without kernel stacks.
    pub resources: Vec<crate::analyse::resources::ResourceUse>,
}

/// `e2e_test`: how to reproduce the run.
#[derive(Debug, Clone, Serialize)]
pub struct E2eTest {
    /// The command, quoted for a shell.
    pub command: String,
    /// Where the command came from.
    pub source: E2eSource,
}

/// Schema `e2e_test.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum E2eSource {
    /// The user gave it.
    User,
    /// Derived from a route.
    Route,
    /// Derived from a function.
    Function,
    /// Derived from a module.
    Module,
    /// There is none.
    None,
}

/// `measurement_quality`: the sampler's own counts and every quality warning.
#[derive(Debug, Clone, Serialize)]
pub struct MeasurementQuality {
    /// The sampler used, or "none (baseline only)".
    pub sampler: String,
    /// The sampler's counts; absent (not null) without a deep profile.
    #[serde(flatten)]
    pub counts: Option<SamplerCounts>,
    /// (profiled run wall / baseline median wall − 1) × 100; None without both.
    pub overhead_pct: Option<f64>,
    /// The Python stack reader's figures; absent when no interpreter was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonReadQuality>,
    /// Every quality warning, fix included.
    pub warnings: Vec<String>,
}

/// `measurement_quality.python`: how the interpreters' stacks were read, and how far
/// the reads can be trusted. The reads do not stop the target: a stack read while the
/// interpreter changed it can be torn or fail; the failed reads and the share of the
/// interpreter's native samples that met a Python stack are the measures of it here
/// (bench/python_vs_pyspy.sh compares the result with py-spy's pausing reads).
#[derive(Debug, Clone, Serialize)]
pub struct PythonReadQuality {
    /// "CPython 3.11.7 (pid 123)", one per interpreter read.
    pub interpreters: Vec<String>,
    /// Reads aimed at per second and interpreter.
    pub rate_hz: u32,
    /// Reads made (one covers every thread of an interpreter).
    pub reads: u64,
    /// Reads that failed (memory changed under the read, or the process exited).
    pub failed_reads: u64,
    /// `failed_reads` as a share of `reads`, percent; None without reads.
    pub failed_pct: Option<f64>,
    /// Mean time of one read, µs (profmap's own CPU, not the target's); None without
    /// reads.
    pub mean_read_us: Option<f64>,
    /// Whether the target was stopped for each read (never: non-blocking reads).
    pub target_paused: bool,
    /// Native samples of the interpreters' threads in the evaluation loop.
    pub candidates: Option<u64>,
    /// Share of `candidates` given Python frames, percent; None without candidates.
    pub merged_pct: Option<f64>,
    /// Candidates with no Python read of their thread near them (before the
    /// interpreter was attached, or a failed read).
    pub no_python_sample_near: Option<u64>,
    /// Candidates with a Python read near but no evaluation frame in the native stack.
    pub no_eval_frame: Option<u64>,
    /// On-CPU candidates whose reads near all showed the thread idle, or not holding
    /// the GIL while it ran the interpreter's code: not its stack at the time.
    pub no_consistent_read: Option<u64>,
}

/// The deep profile's counts in `measurement_quality`.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerCounts {
    /// Sampling frequency, Hz.
    pub frequency_hz: f64,
    /// On-CPU samples taken.
    pub samples: u64,
    /// Off-CPU intervals recorded.
    pub off_cpu_intervals: u64,
    /// Samples the kernel dropped.
    pub lost_samples: u64,
    /// Stacks that could not be unwound.
    pub unwind_failures: u64,
    /// Stacks cut at the depth limit.
    pub truncated_stacks: u64,
    /// Addresses no symbol was found for.
    pub unnamed_addresses: u64,
    /// Wall time of the profiled run, ms.
    pub profiled_run_wall_ms: f64,
}

/// `environment`: the machine and the session.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// The machine's host name, when known.
    pub hostname: Option<String>,
    /// The kernel release, when known.
    pub kernel: Option<String>,
    /// Online CPUs, when known.
    pub cpus: Option<u32>,
    /// profmap's version that made the recording.
    pub tool_version: String,
    /// The session's id.
    pub run_id: String,
    /// Seconds since the Unix epoch when the session started.
    pub started_unix_s: f64,
}
