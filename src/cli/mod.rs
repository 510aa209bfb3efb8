//! Command-line definitions (clap) and their conversion into plain `plan` structs.
//! Nothing outside this module sees clap.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::plan::{
    AroundCommands, CommandsPlan, ComparePlan, ExportFormat, ExportPlan, InputPlan, InstrumentPlan,
    MeasurePlan, Mode, NamedCommand, OutputPlan, Plan, ReportPlan, SamplePlan, SessionPlan, Stdin,
    TargetSpec,
};

/// Two examples shown with every usage error.
pub const EXAMPLES: &str = "Examples:
  profmap run -- ./my-program --its-flag        # baseline + deep profile, outputs in ./profile_output/
  profmap bench --runs 10 --warmup 2 -- sleep 0.1  # baseline only";

#[derive(Debug, Parser)]
#[command(
    name = "profmap",
    version,
    about = "Measure a command, profile it, and say why it is slow.",
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Baseline only: warm-up plus repeated runs of the whole process tree.
    Bench {
        #[command(flatten)]
        repeat: RepeatArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Baseline, then one profiled run: the full performance map.
    Run {
        #[command(flatten)]
        repeat: RepeatArgs,
        #[command(flatten)]
        profile: ProfileArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// One profiled run only: writes the recording (profile.pmr) and the map.
    Record {
        #[command(flatten)]
        profile: ProfileArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Re-analyse a recording without running anything.
    Report(ReportArgs),
    /// Write a recording in another tool's format (pprof, speedscope, Firefox Profiler,
    /// Chrome trace / Perfetto, collapsed stacks).
    Export(ExportArgs),
    /// Compare two sessions (output folders or recordings): baseline verdict with
    /// significance, largest function changes, differential flamegraph.
    Compare(CompareArgs),
    /// Print what this machine allows (perf events, tracepoints, symbols, ...), with fixes.
    Doctor,
    /// Edit timing wrappers into Python sources, list them, remove them byte for byte.
    #[command(subcommand)]
    Instrument(InstrumentCmd),
}

#[derive(Debug, Subcommand)]
enum InstrumentCmd {
    /// Wrap functions with a timing wrapper (run in the project folder). Calls are
    /// logged as JSON lines to $PROFMAP_INSTRUMENT_LOG when it is set.
    Add {
        /// e.g. app.py:main or difflib.py:SequenceMatcher.find_longest_match
        #[arg(required = true, value_name = "FILE:QUALNAME")]
        targets: Vec<String>,
        /// A command after `--` (e.g. your tests) run before and after: when it passed
        /// before and fails instrumented, the edits are reverted (exit 1).
        #[arg(last = true, value_name = "CHECK", value_parser = clap::value_parser!(OsString))]
        check: Vec<OsString>,
    },
    /// Show what is instrumented (from .profmap/instrument/manifest.json).
    List,
    /// Remove every insertion and restore each file byte for byte.
    Clean {
        /// Restore even files edited since; each edited file is saved as
        /// FILE.profmap-edited first.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
struct CommonOut {
    /// Output folder (default ./profile_output; for `report`, the recording's folder).
    /// Reused if it exists: only profmap's own files are replaced.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the performance map as JSON on stdout, and nothing else there.
    #[arg(long)]
    json: bool,
    /// Quiet: no target output echo, no summary table.
    #[arg(short, long)]
    quiet: bool,
}

/// Exports written beside the map (sessions with a deep profile, and `report`).
#[derive(Debug, Args)]
struct ExportList {
    /// Also write these formats beside the map (comma-separated): pprof, speedscope,
    /// firefox, chrome, folded.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_format)]
    export: Vec<ExportFormat>,
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// A recording (profile.pmr, or an older profile.json.gz) or a folder holding one.
    #[arg(default_value = "profile_output")]
    input: PathBuf,
    /// pprof (profile.pb.gz), speedscope (speedscope.json), firefox (firefox.json.gz),
    /// chrome (trace.json), folded (stacks.folded).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    format: ExportFormat,
    /// The file to write (default: the format's file name beside the recording).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// An export format's name.
fn parse_format(s: &str) -> Result<ExportFormat, String> {
    ExportFormat::parse(s).ok_or_else(|| {
        let names: Vec<&str> = ExportFormat::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format '{s}' (one of: {})", names.join(", "))
    })
}

/// Sampling frequency of the deep profile unless `--frequency` says otherwise.
const DEFAULT_FREQUENCY: u32 = 999;
/// User stack bytes copied per sample unless `--stack-bytes` says otherwise.
const DEFAULT_STACK_BYTES: u32 = 32768;

/// How many times the target runs (`bench`, `run`).
#[derive(Debug, Args)]
struct RepeatArgs {
    /// Counted runs (at most 100000).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    runs: u32,
    /// Discarded warm-up runs before the counted ones (at most 100000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(..=100_000))]
    warmup: u32,
}

/// How the deep profile samples (`run`, `record`).
#[derive(Debug, Args)]
struct ProfileArgs {
    /// Sampling frequency of the deep profile, in Hz.
    #[arg(long, default_value_t = DEFAULT_FREQUENCY, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=20000))]
    frequency: u32,
    /// Bytes of user stack copied per sample for DWARF unwinding (max 65528).
    #[arg(long, default_value_t = DEFAULT_STACK_BYTES, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1024..=65528))]
    stack_bytes: u32,
    /// Do not record wake-ups: waits are then not followed to the thread that ended them
    /// and shares fall back to summed thread time (for measuring what wake-ups cost).
    #[arg(long)]
    no_wakeups: bool,
    /// Do not record socket sends and receives (`sock:sock_{send,recv}_length`): bytes,
    /// round trips and protocols per peer are then unknown, and waits on sockets are
    /// still named by their descriptor. Each call costs ~0.75 µs with them: a socket
    /// ping-pong ran 20-30% longer than under `perf record -e sched:sched_switch -g`.
    #[arg(long)]
    no_socket_evidence: bool,
    /// Record page-cache reads per file, to find files read more than once (redundant
    /// work). Costs about 1.6 µs per buffered read: a read-heavy target can run twice
    /// as long, so it is off unless asked for.
    #[arg(long)]
    file_reads: bool,
    /// Ring buffer per CPU for samples and switch records, in MiB (rounded up to a power
    /// of two; default: sized from --frequency, --stack-bytes and 100k switch-outs/s per
    /// CPU). Raise it when records are lost.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(1..=1024))]
    buffer: Option<u32>,
    /// Do not run a Python target again to escalate: no tracemalloc run when its memory
    /// is abnormal (Level 3), no instrumentation of its hot functions when sampling slows
    /// it by more than 20%. Line tables (Level 2) come from the samples and stay.
    #[arg(long)]
    no_escalate: bool,
    #[command(flatten)]
    exports: ExportList,
}

/// The target, what surrounds its runs, and where the outputs go (every session).
#[derive(Debug, Args)]
struct TargetArgs {
    /// Stop a run after this long (e.g. 30s, 500ms, 2m); the whole tree is terminated.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Keep measuring when the target (or a --prepare/--conclude command) exits non-zero
    /// or is killed.
    #[arg(long)]
    allow_failure: bool,
    /// Every run reads FILE on its standard input, from its start. Without it, runs get
    /// profmap's own stdin: a file from its start each time, a pipe's bytes read once and
    /// given to every run, /dev/null for a terminal.
    #[arg(long, value_name = "FILE", conflicts_with = "interactive")]
    input: Option<PathBuf>,
    /// Hand the terminal to the target (a program that asks questions).
    #[arg(long)]
    interactive: bool,
    /// Run CMD (through sh -c) once before the first run, unmeasured.
    #[arg(long, value_name = "CMD")]
    setup: Option<String>,
    /// Run CMD before every run (warm-ups and the profiled run too), unmeasured: reset a
    /// cache, drop a table, `make clean`.
    #[arg(long, value_name = "CMD")]
    prepare: Option<String>,
    /// Run CMD after every run, unmeasured.
    #[arg(long, value_name = "CMD")]
    conclude: Option<String>,
    /// Run CMD once after the last run, even when a run failed, unmeasured.
    #[arg(long, value_name = "CMD")]
    cleanup: Option<String>,
    /// Wrap a Python function at run time, without editing any file (repeatable):
    /// FILE:QUALNAME or MODULE:QUALNAME, e.g. app.py:main or json.decoder:JSONDecoder.decode.
    /// Extra runs (warm-ups + counted) record per call wall and CPU time, the tracemalloc
    /// delta, and HTTP requests and DB-API queries made inside the call; medians per
    /// function go in the map and report.
    #[arg(long, value_name = "TARGET:QUALNAME", value_parser = parse_trace)]
    trace: Vec<String>,
    /// Run id recorded in every output (managed mode).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Write summary.json exactly here instead of in the output folder.
    #[arg(long, value_name = "PATH")]
    summary_path: Option<PathBuf>,
    /// Keep secrets (passwords, tokens, URL credentials) of the command in the outputs.
    #[arg(long)]
    no_redact: bool,
    #[command(flatten)]
    out: CommonOut,
    /// Run each command once per integer NAME from MIN to MAX, `{NAME}` in the command
    /// replaced by the value (e.g. --parameter-scan threads 1 4 'make -j{threads}').
    #[arg(long, num_args = 3, value_names = ["NAME", "MIN", "MAX"], conflicts_with = "parameter_list")]
    parameter_scan: Vec<String>,
    /// Run each command once per comma-separated value, `{NAME}` in the command replaced
    /// (e.g. --parameter-list level 1,6,9 'gzip -{level} -c big > /dev/null').
    #[arg(long, num_args = 2, value_names = ["NAME", "VALUES"])]
    parameter_list: Vec<String>,
    /// The command: after `--`, its argv byte for byte; without `--`, one or more quoted
    /// shell commands (run through sh -c), measured side by side.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    command: Vec<OsString>,
}

/// The most commands one session runs (parameter values included).
const MAX_COMMANDS: usize = 1000;

/// The commands `a` names: one argv after `--` (`argv_form`), or each positional a shell
/// command (a single plain word stays an argv); then one per parameter value.
fn commands(a: &TargetArgs, argv_form: bool) -> Result<Vec<NamedCommand>, String> {
    let plain = |s: &OsString| {
        s.to_str().is_some_and(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
        })
    };
    let base: Vec<NamedCommand> = if argv_form || (a.command.len() == 1 && plain(&a.command[0])) {
        let mut it = a.command.iter().cloned();
        let target = TargetSpec {
            program: it.next().unwrap_or_default(),
            args: it.collect(),
            stdin: Stdin::Null,
            env: Vec::new(),
        };
        let label = target.argv_lossy().join(" ");
        vec![NamedCommand { label, target }]
    } else {
        a.command
            .iter()
            .map(|c| {
                let text = c.to_str().ok_or_else(|| {
                    "a quoted command must be UTF-8; give a byte-exact argv after `--`".to_string()
                })?;
                Ok(NamedCommand {
                    label: text.to_string(),
                    target: TargetSpec {
                        program: "sh".into(),
                        args: vec!["-c".into(), text.into()],
                        stdin: Stdin::Null,
                        env: Vec::new(),
                    },
                })
            })
            .collect::<Result<_, String>>()?
    };
    let Some((name, values)) = parameter_values(a)? else {
        return Ok(base);
    };
    let key = format!("{{{name}}}");
    if !base.iter().any(|c| c.label.contains(&key)) {
        return Err(format!(
            "no command contains {key} for the parameter '{name}'"
        ));
    }
    let mut out = Vec::new();
    for c in &base {
        for v in &values {
            let sub = |s: &OsString| -> OsString {
                match s.to_str() {
                    Some(t) => t.replace(&key, v).into(),
                    None => s.clone(),
                }
            };
            out.push(NamedCommand {
                label: c.label.replace(&key, v),
                target: TargetSpec {
                    program: sub(&c.target.program),
                    args: c.target.args.iter().map(sub).collect(),
                    stdin: Stdin::Null,
                    env: Vec::new(),
                },
            });
        }
    }
    if out.len() > MAX_COMMANDS {
        return Err(format!(
            "{} commands: at most {MAX_COMMANDS} per session",
            out.len()
        ));
    }
    Ok(out)
}

/// `--parameter-scan` / `--parameter-list` as (name, values).
fn parameter_values(a: &TargetArgs) -> Result<Option<(String, Vec<String>)>, String> {
    if let [name, min, max] = a.parameter_scan.as_slice() {
        let n = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| format!("--parameter-scan: '{s}' is not an integer"))
        };
        let (lo, hi) = (n(min)?, n(max)?);
        if hi < lo || hi - lo >= MAX_COMMANDS as i64 {
            return Err(format!(
                "--parameter-scan {name} {min} {max}: MIN must be ≤ MAX, at most {MAX_COMMANDS} values"
            ));
        }
        return Ok(Some((
            name.clone(),
            (lo..=hi).map(|v| v.to_string()).collect(),
        )));
    }
    if let [name, list] = a.parameter_list.as_slice() {
        let values: Vec<String> = list.split(',').map(str::to_string).collect();
        return Ok(Some((name.clone(), values)));
    }
    Ok(None)
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// Before the change: an output folder of `run`/`record`/`bench`, or a recording.
    before: PathBuf,
    /// After the change: the same.
    after: PathBuf,
    /// Output folder for compare.json, compare.md, compare.html, flamegraph-diff.svg
    /// (default ./compare_output).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print compare.json on stdout, and nothing else there.
    #[arg(long)]
    json: bool,
    /// Quiet: no table on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Exit 1 when the wall-time median got slower by more than PCT percent with
    /// significance (for CI gates).
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    fail_if_slower: Option<f64>,
}

/// A non-negative percentage.
fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("'{s}' is not a percentage (e.g. 10)")),
    }
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// A recording (profile.pmr, or an older profile.json.gz) or a folder holding one.
    #[arg(default_value = "profile_output")]
    input: PathBuf,
    #[command(flatten)]
    out: CommonOut,
    #[command(flatten)]
    exports: ExportList,
}

/// A `--trace` target: something before the last colon, a dotted name after it.
fn parse_trace(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((t, q))
            if !t.is_empty()
                && !q.is_empty()
                && q.split('.').all(|p| !p.is_empty())
                && !s.contains('\n') =>
        {
            Ok(s.to_string())
        }
        _ => Err(format!(
            "'{s}': expected FILE:QUALNAME or MODULE:QUALNAME, e.g. app.py:main"
        )),
    }
}

/// The longest duration accepted: far beyond any run, and far from `Instant` overflow.
const MAX_DURATION_S: f64 = 365.0 * 86_400.0;

/// Parse "250ms", "10s", "2m", "1h" or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (try 30s, 500ms, 2m)"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}' (use ms, s, m or h)"
            ));
        }
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("duration must be positive: '{s}'"));
    }
    if secs > MAX_DURATION_S {
        return Err(format!("'{s}' is too long (at most 365 days)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// What parsing produced: a plan, or text to print (help/version) and its exit code.
#[derive(Debug)]
pub enum Parsed {
    Plan(Box<Plan>),
    Print {
        text: String,
        to_stderr: bool,
        code: i32,
    },
}

/// Turn argv into a plan. Usage errors come back as text with examples and exit 2.
/// Arguments need not be UTF-8: the target's command and paths keep their bytes.
pub fn parse(args: Vec<OsString>) -> Parsed {
    // `--` keeps the command a byte-exact argv; without it, each is a shell command.
    let argv_form = args.iter().any(|a| a == "--");
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind::*;
            return match e.kind() {
                DisplayHelp | DisplayVersion => Parsed::Print {
                    text: e.render().to_string(),
                    to_stderr: false,
                    code: 0,
                },
                DisplayHelpOnMissingArgumentOrSubcommand => Parsed::Print {
                    text: format!("{}", e.render()),
                    to_stderr: true,
                    code: 2,
                },
                _ => Parsed::Print {
                    text: format!("{}\n{EXAMPLES}\n", e.render()),
                    to_stderr: true,
                    code: 2,
                },
            };
        }
    };
    let plan = match cli.cmd {
        Cmd::Bench { repeat, target } => {
            session(Mode::Bench, Some(repeat), None, target, argv_form)
        }
        Cmd::Run {
            repeat,
            profile,
            target,
        } => session(Mode::Run, Some(repeat), Some(profile), target, argv_form),
        Cmd::Record { profile, target } => {
            session(Mode::Record, None, Some(profile), target, argv_form)
        }
        Cmd::Report(a) => Ok(Plan::Report(ReportPlan {
            input: a.input,
            output: output(a.out, a.exports.export, None, None),
        })),
        Cmd::Export(a) => Ok(Plan::Export(ExportPlan {
            input: a.input,
            format: a.format,
            out: a.out,
        })),
        Cmd::Compare(a) => Ok(Plan::Compare(ComparePlan {
            before: a.before,
            after: a.after,
            out: a.out,
            json_stdout: a.json,
            quiet: a.quiet,
            fail_if_slower_pct: a.fail_if_slower,
        })),
        Cmd::Doctor => Ok(Plan::Doctor),
        Cmd::Instrument(i) => Ok(Plan::Instrument(match i {
            InstrumentCmd::Add { targets, check } => InstrumentPlan::Add { targets, check },
            InstrumentCmd::List => InstrumentPlan::List,
            InstrumentCmd::Clean { force } => InstrumentPlan::Clean { force },
        })),
    };
    match plan {
        Ok(p) => Parsed::Plan(Box::new(p)),
        Err(msg) => Parsed::Print {
            text: format!("error: {msg}\n\n{EXAMPLES}\n"),
            to_stderr: true,
            code: 2,
        },
    }
}

fn output(
    o: CommonOut,
    mut exports: Vec<ExportFormat>,
    run_id: Option<String>,
    summary_path: Option<PathBuf>,
) -> OutputPlan {
    exports.sort();
    exports.dedup();
    OutputPlan {
        dir: o.out,
        json_stdout: o.json,
        quiet: o.quiet,
        run_id,
        summary_path,
        exports,
        redact: true,
    }
}

/// A session's plan; options a subcommand does not take get their defaults (the
/// trace phase of `record` still repeats 1 + 3 times).
fn session(
    mode: Mode,
    repeat: Option<RepeatArgs>,
    profile: Option<ProfileArgs>,
    a: TargetArgs,
    argv_form: bool,
) -> Result<Plan, String> {
    let mut commands = commands(&a, argv_form)?;
    let (runs, warmup) = repeat.map_or((3, 1), |r| (r.runs, r.warmup));
    let sample = profile.as_ref().map_or(
        SamplePlan {
            frequency_hz: DEFAULT_FREQUENCY,
            stack_bytes: DEFAULT_STACK_BYTES,
            wakeups: true,
            sockets: true,
            file_reads: false,
            buffer_mib: None,
            spool: None,
        },
        |p| SamplePlan {
            frequency_hz: p.frequency,
            stack_bytes: p.stack_bytes,
            wakeups: !p.no_wakeups,
            sockets: !p.no_socket_evidence,
            file_reads: p.file_reads,
            buffer_mib: p.buffer,
            spool: None,
        },
    );
    let input = match (a.input, a.interactive) {
        (Some(f), _) => InputPlan::File(f),
        (None, true) => InputPlan::Interactive,
        (None, false) => InputPlan::Inherit,
    };
    let exports = profile
        .as_ref()
        .map_or_else(Vec::new, |p| p.exports.export.clone());
    let target = match commands.len() {
        1 => commands.remove(0).target,
        _ => TargetSpec::default(),
    };
    let plan = SessionPlan {
        mode,
        target,
        measure: MeasurePlan {
            runs,
            warmup,
            timeout: a.timeout,
            allow_failure: a.allow_failure,
            poll_interval: Duration::from_millis(20),
            input,
            around: AroundCommands {
                setup: a.setup,
                prepare: a.prepare,
                conclude: a.conclude,
                cleanup: a.cleanup,
            },
        },
        sample,
        output: OutputPlan {
            redact: !a.no_redact,
            ..output(a.out, exports, a.run_id, a.summary_path)
        },
        trace: a.trace,
        escalate: profile.is_none_or(|p| !p.no_escalate),
    };
    Ok(match commands.len() {
        0 => Plan::Session(Box::new(plan)),
        _ => Plan::Sessions(Box::new(CommandsPlan {
            template: plan,
            commands,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("99999999999999999h").is_err());
        assert!(parse_duration("1e300").is_err());
    }

    #[test]
    fn command_keeps_its_own_flags() {
        let Parsed::Plan(plan) = parse(
            ["profmap", "bench", "--runs", "2", "--", "ls", "-l", "--all"]
                .iter()
                .map(OsString::from)
                .collect(),
        ) else {
            panic!("expected a session plan");
        };
        let Plan::Session(s) = *plan else {
            panic!("expected a session plan");
        };
        assert_eq!(s.target.program, "ls");
        assert_eq!(s.target.args, vec!["-l", "--all"]);
        assert_eq!(s.measure.runs, 2);
    }
}
