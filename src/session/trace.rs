//! `--trace`: after the other phases, the baseline protocol once more (warm-ups and
//! counted runs) with the Python shim on the target's `PYTHONPATH`, so the wrappers'
//! cost (tracemalloc above all) never touches the baseline or the profile. The target
//! is launched through `env -- NAME=VALUE ... COMMAND` (env execs it: same pid, nothing
//! else changes). Each run's log is moved aside after the run; the counted runs' logs
//! give the per-function medians in `rec.traced`.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use crate::error::Error;
use crate::instrument::shim;
use crate::measure::{self, LogSink, Outcome, RunHooks, RunOptions};
use crate::plan::{SessionPlan, TargetSpec};
use crate::profile::Recording;

/// A private folder for the shim and its logs, removed when dropped.
pub(super) struct TraceDir(pub(super) PathBuf);

impl TraceDir {
    pub(super) fn create() -> Result<TraceDir, Error> {
        let base = std::env::temp_dir();
        for i in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let p = base.join(format!(
                "profmap-trace-{}-{nanos:x}-{i}",
                std::process::id()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TraceDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&p, e)),
            }
        }
        Err(Error::Tool("no free folder for the --trace shim".into()))
    }
}

impl Drop for TraceDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// No hooks: the traced runs are measured for their calls only.
pub(super) struct NoHooks;
impl RunHooks for NoHooks {}

/// The target with the shim's variables set in its environment (see `TargetSpec::env`).
pub(super) fn traced_target(target: &TargetSpec, vars: Vec<(OsString, OsString)>) -> TargetSpec {
    let mut t = target.clone();
    t.env.extend(vars);
    t
}

/// Run the traced runs and put the per-function medians (and any warning) in `rec`.
pub fn trace_phase(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<(), Error> {
    trace_functions(&plan.trace, plan, opts, log, rec)
}

/// The traced runs of `specs` (the user's `--trace`, or the escalation's hot
/// functions).
pub(super) fn trace_functions(
    specs: &[String],
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<(), Error> {
    if specs.is_empty() {
        return Ok(());
    }
    let dir = TraceDir::create()?;
    shim::write_shim(&dir.0)?;
    let calls = dir.0.join("calls.jsonl");
    let spec = traced_target(&plan.target, shim::env(&dir.0, specs, &calls));
    let run_log = |n: u32| dir.0.join(format!("run-{n}.jsonl"));
    let mut last_done = 0;
    let (_, outcome) = measure::run_baseline(
        &spec,
        &plan.measure,
        opts,
        log,
        &mut || Box::new(NoHooks),
        &mut |done, _| {
            last_done = done;
            let _ = std::fs::rename(&calls, run_log(done));
        },
    )?;
    if !matches!(outcome, Outcome::Completed) {
        rec.warnings.push(format!(
            "--trace: the traced runs did not all complete ({}); figures are from the runs \
             that did",
            describe(&outcome)
        ));
    }
    // Runs that finished; one with no log made no traced call.
    let counted: Vec<u32> = (plan.measure.warmup + 1..=last_done).collect();
    let mut runs = Vec::new();
    for n in counted {
        let (c, warnings) = shim::read_log(&run_log(n));
        for w in warnings {
            if !rec.warnings.contains(&w) {
                rec.warnings.push(w);
            }
        }
        runs.push(c);
    }
    rec.traced = shim::summarize(&runs);
    for want in specs {
        let qual = want.rsplit_once(':').map_or(want.as_str(), |(_, q)| q);
        if !rec.traced.iter().any(|t| t.function == qual) {
            rec.warnings.push(format!(
                "--trace {want}: no call recorded (not a Python target, the module was \
                 never imported or was imported before the shim could wrap it, or the \
                 function never ran)"
            ));
        }
    }
    Ok(())
}

fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Completed => "completed".into(),
        Outcome::TargetFailed { run, exit, .. } => {
            format!("{} in run {run}", measure::describe_exit(exit))
        }
        Outcome::Interrupted => "interrupted".into(),
    }
}
