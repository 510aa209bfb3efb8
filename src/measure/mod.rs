//! Baseline runs: W discarded warm-ups, then N counted runs of the whole process tree,
//! each measured with wait4/rusage, zombie /proc/PID/io and a /proc poller (see
//! `run.rs` for how every process is accounted for). Stops at the first failing run
//! unless failures are allowed, and at Ctrl-C, keeping what was measured. Around the
//! runs, `load` notes what else kept the machine busy.

pub mod around;
pub mod diskstats;
pub mod load;
pub mod poll;
pub mod procfs;
pub mod run;
pub mod signals;
pub mod supervise;

pub use run::{
    Echo, LogSink, Notes, RunHooks, RunOptions, monotonic_ns, push_note, run_once, take_notes,
};

use std::io::Write;

use crate::error::Error;
use crate::plan::{MeasurePlan, TargetSpec};
use crate::profile::{Baseline, ExitStatus};

/// Why the baseline stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed,
    /// A run failed and failures are not allowed.
    TargetFailed {
        run: u32,
        warmup: bool,
        exit: ExitStatus,
    },
    Interrupted,
}

/// Run the baseline. `make_hooks` gives fresh hooks for each run (e.g. a process
/// counter); `progress(done, total)` is called after each run.
pub fn run_baseline(
    spec: &TargetSpec,
    plan: &MeasurePlan,
    opts: &RunOptions,
    log: &LogSink,
    make_hooks: &mut dyn FnMut() -> Box<dyn RunHooks>,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<(Baseline, Outcome), Error> {
    let probe = load::LoadProbe::start();
    let (mut baseline, outcome) = run_all(spec, plan, opts, log, make_hooks, progress)?;
    baseline.machine_load = probe.finish();
    Ok((baseline, outcome))
}

/// The warm-ups and counted runs of [`run_baseline`].
fn run_all(
    spec: &TargetSpec,
    plan: &MeasurePlan,
    opts: &RunOptions,
    log: &LogSink,
    make_hooks: &mut dyn FnMut() -> Box<dyn RunHooks>,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<(Baseline, Outcome), Error> {
    let mut baseline = Baseline {
        warmup_runs: plan.warmup,
        requested_runs: plan.runs,
        runs: Vec::new(),
        machine_load: None,
    };
    let total = plan.warmup + plan.runs;
    for i in 0..total {
        let warmup = i < plan.warmup;
        let label = if warmup {
            format!("warm-up {}", i + 1)
        } else {
            format!("run {}", i - plan.warmup + 1)
        };
        if let Ok(mut l) = log.lock() {
            let _ = writeln!(
                l,
                "=== profmap: {label} of {} ===",
                spec.argv_lossy().join(" ")
            );
        }
        if signals::interrupted() {
            return Ok((baseline, Outcome::Interrupted));
        }
        let mut hooks = make_hooks();
        let m = match run_once(spec, opts, log, hooks.as_mut(), (i + 1, warmup), &label) {
            Ok(m) => m,
            Err(Error::Interrupted) => return Ok((baseline, Outcome::Interrupted)),
            Err(e) => return Err(e),
        };
        let exit = m.exit;
        if let Ok(mut l) = log.lock() {
            let _ = writeln!(
                l,
                "=== profmap: {label} ended: {}, {:.1} ms ===",
                describe_exit(&exit),
                m.wall_ms
            );
        }
        baseline.runs.push(m);
        progress(i + 1, total);
        if exit == ExitStatus::Interrupted || signals::interrupted() {
            return Ok((baseline, Outcome::Interrupted));
        }
        if !exit.success() && !plan.allow_failure {
            let run = if warmup { i + 1 } else { i - plan.warmup + 1 };
            return Ok((baseline, Outcome::TargetFailed { run, warmup, exit }));
        }
    }
    Ok((baseline, Outcome::Completed))
}

/// "exit 3", "signal 11 (SIGSEGV, core dumped)", "timeout".
pub fn describe_exit(e: &ExitStatus) -> String {
    match e {
        ExitStatus::Code { code } => format!("exit {code}"),
        ExitStatus::Signal {
            signal,
            core_dumped,
        } => {
            let name = signal_name(*signal);
            let core = if *core_dumped { ", core dumped" } else { "" };
            format!("signal {signal} ({name}{core})")
        }
        ExitStatus::Timeout => "timeout".into(),
        ExitStatus::Interrupted => "interrupted".into(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
