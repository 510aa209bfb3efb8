//! What to do, as plain data: the CLI turns arguments into these structs and the core
//! never sees clap.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// One invocation of profmap.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Baseline only (`bench`), or baseline + profiled run (`run`), or profiled run only
    /// (`record`).
    Session(Box<SessionPlan>),
    /// Several commands side by side (`bench 'cmd a' 'cmd b'`, a parameter scan): one
    /// session each, then their comparison.
    Sessions(Box<CommandsPlan>),
    /// Re-analyse a recording (`report`).
    Report(ReportPlan),
    /// Print what this machine allows (`doctor`).
    Doctor,
    /// Insert, list or remove timing wrappers in the project's sources (`instrument`).
    Instrument(InstrumentPlan),
    /// Write a recording in another tool's format (`export`).
    Export(ExportPlan),
    /// Compare two sessions, before and after (`compare`).
    Compare(ComparePlan),
}

/// `profmap compare BEFORE AFTER [--out DIR] [--json] [--fail-if-slower PCT]`.
#[derive(Debug, Clone)]
pub struct ComparePlan {
    /// An output folder or a recording, before the change.
    pub before: PathBuf,
    /// The same, after the change.
    pub after: PathBuf,
    /// Output folder (default `compare_output`).
    pub out: Option<PathBuf>,
    /// Print compare.json on stdout.
    pub json_stdout: bool,
    pub quiet: bool,
    /// Exit 1 when the wall-time median got slower by more than this percent, with
    /// significance.
    pub fail_if_slower_pct: Option<f64>,
}

/// Another tool's file format a recording can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExportFormat {
    /// pprof's `profile.proto`, gzip (`go tool pprof`, Pyroscope, Parca, Grafana).
    Pprof,
    /// speedscope's file format (JSON).
    Speedscope,
    /// The Firefox Profiler's processed format (samply's viewer), gzip.
    Firefox,
    /// Chrome's trace-event JSON (Perfetto UI, chrome://tracing).
    Chrome,
    /// Collapsed stacks (`a;b;c N`), for inferno and flamegraph.pl.
    Folded,
}

impl ExportFormat {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [ExportFormat; 5] = [
        ExportFormat::Pprof,
        ExportFormat::Speedscope,
        ExportFormat::Firefox,
        ExportFormat::Chrome,
        ExportFormat::Folded,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "pprof",
            ExportFormat::Speedscope => "speedscope",
            ExportFormat::Firefox => "firefox",
            ExportFormat::Chrome => "chrome",
            ExportFormat::Folded => "folded",
        }
    }

    /// The format named `s`, if any.
    pub fn parse(s: &str) -> Option<ExportFormat> {
        ExportFormat::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// `profmap export INPUT --format F [--out FILE]`.
#[derive(Debug, Clone)]
pub struct ExportPlan {
    /// A recording, or the folder of one.
    pub input: PathBuf,
    pub format: ExportFormat,
    /// The file to write; None: the format's file name beside the recording.
    pub out: Option<PathBuf>,
}

/// One `instrument` subcommand, run in the working folder (the project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstrumentPlan {
    /// Wrap each `FILE:QUALNAME`; with a check command, run it before and after and
    /// revert when instrumentation makes it fail.
    Add {
        targets: Vec<String>,
        check: Vec<std::ffi::OsString>,
    },
    /// Show what is in place.
    List,
    /// Restore every file; `force` discards edits made since (after saving them).
    Clean { force: bool },
}

/// Which phases a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Bench,
    Run,
    Record,
}

#[derive(Debug, Clone)]
pub struct SessionPlan {
    pub mode: Mode,
    pub target: TargetSpec,
    pub measure: MeasurePlan,
    pub sample: SamplePlan,
    pub output: OutputPlan,
    /// `--trace FILE:QUALNAME|MODULE:QUALNAME`: Python functions wrapped at run time in
    /// extra traced runs (warm-ups + counted runs); empty when not asked for.
    pub trace: Vec<String>,
    /// Run a Python target again when the escalation rules call for it (Level 3 memory,
    /// instrumentation when sampling costs > 20%); off with `--no-escalate`.
    pub escalate: bool,
}

/// Several commands, each measured as `template` says.
#[derive(Debug, Clone)]
pub struct CommandsPlan {
    /// Everything but the target (every command gets the same options).
    pub template: SessionPlan,
    /// The commands, in the order given (parameter values expanded).
    pub commands: Vec<NamedCommand>,
}

/// One of several commands, with the name people know it by.
#[derive(Debug, Clone)]
pub struct NamedCommand {
    /// The command as given (`sleep 0.1`), parameter value substituted.
    pub label: String,
    pub target: TargetSpec,
}

/// The command to launch, byte for byte as given (argv need not be UTF-8).
#[derive(Debug, Clone, Default)]
pub struct TargetSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// What every run reads on its standard input.
    pub stdin: Stdin,
    /// Variables set (or replaced) in the target's environment on top of profmap's own
    /// (through `execvpe`); empty but for the runs that ask for them: a Node program's
    /// profiled run (`session::nodejit`) and the traced runs' shim (`session::trace`).
    pub env: Vec<(OsString, OsString)>,
}

/// Where each run's standard input comes from, the same for every run (resolved by the
/// session from [`InputPlan`] before anything runs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`: an immediate end of file.
    #[default]
    Null,
    /// This file, opened afresh for every run so that each reads it from its start.
    File(PathBuf),
    /// profmap's own terminal, handed to the target's process group for the run.
    Terminal,
}

/// What the user asked the target's standard input to be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InputPlan {
    /// profmap's own stdin: a file or `/dev/null` is given to every run from its start,
    /// a pipe is read once and its bytes given to every run, a terminal becomes
    /// `/dev/null`.
    #[default]
    Inherit,
    /// `--input FILE`.
    File(PathBuf),
    /// `--interactive`: the terminal itself.
    Interactive,
}

/// Shell commands run around the target's runs, as hyperfine's options of the same
/// names; none of their time is measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AroundCommands {
    /// Once, before the first run (`--setup`).
    pub setup: Option<String>,
    /// Before every run, warm-ups and the profiled run included (`--prepare`).
    pub prepare: Option<String>,
    /// After every run (`--conclude`).
    pub conclude: Option<String>,
    /// Once, after the last run, even when a run failed (`--cleanup`).
    pub cleanup: Option<String>,
}

impl TargetSpec {
    pub fn argv(&self) -> Vec<OsString> {
        std::iter::once(self.program.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }

    /// The command for people and reports: non-UTF-8 bytes shown as U+FFFD.
    pub fn argv_lossy(&self) -> Vec<String> {
        self.argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The program's name for messages.
    pub fn program_lossy(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

#[derive(Debug, Clone)]
pub struct MeasurePlan {
    pub runs: u32,
    pub warmup: u32,
    pub timeout: Option<Duration>,
    pub allow_failure: bool,
    /// /proc poll interval for memory and the timeline.
    pub poll_interval: Duration,
    /// What the target reads on its standard input.
    pub input: InputPlan,
    /// Commands run around the runs.
    pub around: AroundCommands,
}

#[derive(Debug, Clone)]
pub struct SamplePlan {
    pub frequency_hz: u32,
    /// Bytes of user stack copied per sample for DWARF unwinding.
    pub stack_bytes: u32,
    /// Record wake-ups (`sched:sched_waking`) so waits can be followed to the thread
    /// that ended them (the critical path). Off only to measure what they cost.
    pub wakeups: bool,
    /// Record socket traffic (`sock:sock_{send,recv}_length`, `inet_sock_set_state`):
    /// bytes, round trips and protocols per peer. Off with `--no-socket-evidence`.
    pub sockets: bool,
    /// Record page-cache reads per file (`filemap:mm_filemap_get_pages`): the evidence
    /// for files read more than once. Off by default: it costs ~1.6 µs per buffered
    /// read (a page-cached `dd bs=4k` ran about twice as long; bench/evidence.sh).
    pub file_reads: bool,
    /// `--buffer`: the main ring per CPU, MiB; None sizes it from the frequency, the
    /// stack copy and 100k switch-outs/s per CPU.
    pub buffer_mib: Option<u32>,
    /// The crash spool the session opened in the output folder (see `profile::spool`):
    /// the drain thread appends what it recorded to it about once a second. None: no
    /// spool (set by the session, never by the command line).
    pub spool: Option<std::sync::Arc<crate::profile::spool::SpoolSink>>,
}

#[derive(Debug, Clone)]
pub struct OutputPlan {
    /// None: the default (`profile_output`, or for `report` the recording's folder).
    pub dir: Option<PathBuf>,
    pub json_stdout: bool,
    pub quiet: bool,
    pub run_id: Option<String>,
    pub summary_path: Option<PathBuf>,
    /// Other tools' formats written beside the map (`--export`), each once.
    pub exports: Vec<ExportFormat>,
    /// Replace secrets in the command (`--password=…`, URL passwords, tokens) with `***`
    /// in every output; `--no-redact` keeps them.
    pub redact: bool,
}

#[derive(Debug, Clone)]
pub struct ReportPlan {
    /// A recording file, or a folder holding `profile.pmr` (or an older `profile.json.gz`).
    pub input: PathBuf,
    pub output: OutputPlan,
}
