//! A profiling session end to end: check the command, prepare the output folder, run
//! the baseline (and, in `run`/`record`, the profiled run), then write every output.
//! This is the one place that wires the stages together; each stage stays unaware of
//! the others.
//!
//! Outputs are written whatever happens after the first measurement — a failing target,
//! a timeout or Ctrl-C still leave the figures measured so far — and a command that
//! cannot be run is refused before the output folder is touched.
//!
//! The output folder may be someone else's: one session holds it at a time (`lock`),
//! every file goes through a fresh temporary renamed into place relative to a folder
//! reached without following links (`outfile`, `dirfd`), the command's secrets are
//! masked before anything is written (`redact`, run.log headers included), and run.log
//! is capped per run (`runlog`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;
use crate::measure::around::Role;
use crate::measure::{self, Echo, LogSink, Outcome, RunOptions};
use crate::plan::{ExportPlan, ReportPlan};
use crate::plan::{Mode, OutputPlan, SessionPlan, Stdin};
use crate::profile::{ExitStatus, Recording, SessionMeta, read_recording};
use crate::report::summary::Status;
use crate::target;
use crate::ui;

mod compare_io;
mod crashspool;
pub mod dirfd;
mod escalate;
mod hooks;
pub mod lock;
mod multi;
mod nodejit;
pub mod outfile;
mod outputs;
pub mod redact;
pub mod runlog;
mod stdin;
mod trace;

pub use compare_io::compare;
pub use multi::run_commands;
pub use outputs::{OWN_FILES, Written, write_outputs};

/// The output folder when none is given.
pub const DEFAULT_OUT: &str = "profile_output";

/// Files profmap owns in the output folder (only these are ever replaced).
pub const RECORDING: &str = crate::profile::RECORDING_V2;
/// The recording's name before version 2 (still read, and replaced by a new one).
pub const RECORDING_V1: &str = crate::profile::RECORDING_V1;
/// The runs' output and profmap's log.
pub const RUN_LOG: &str = "run.log";

/// Run a `bench`, `run` or `record` session; returns the exit code.
pub fn run(plan: &SessionPlan) -> Result<i32, Error> {
    run_session(plan).map(|(code, _)| code)
}

/// [`run`], returning the recording too (for a comparison of several commands).
fn run_session(plan: &SessionPlan) -> Result<(i32, Recording), Error> {
    target::resolve_program(&plan.target.program)?;
    crate::instrument::check_trace_targets(&plan.trace)?;
    if let Some(p) = &plan.output.summary_path {
        check_summary_path(p)?;
    }
    let default_out = PathBuf::from(DEFAULT_OUT);
    let out = prepare_out_dir(plan.output.dir.as_ref().unwrap_or(&default_out))?;
    // The same stdin for every run, decided (and a pipe read) before anything runs.
    let input = stdin::resolve(&plan.measure.input)?;
    if input.stdin != Stdin::Null && !plan.output.quiet {
        eprintln!("profmap: every run reads {}", input.describe);
    }
    let mut with_input = plan.clone();
    with_input.target.stdin = input.stdin.clone();
    let plan = &with_input;
    let command = if plan.output.redact {
        redact::redact_argv(&plan.target.argv_lossy())
    } else {
        plan.target.argv_lossy()
    };
    let mut rec = Recording::new(session_meta(&command, plan.output.run_id.clone()));
    match crate::instrument::try_manifest_files(std::path::Path::new(".")) {
        Ok(rows) => rec.instrumented = rows,
        Err(why) => rec
            .warnings
            .push(format!("instrumentation changelog unknown: {why}")),
    }
    let _lock = lock::lock(&out, &rec.meta.run_id, rec.meta.started_unix_s)?;
    outfile::remove_leftover_temporaries(&out, OWN_FILES);
    target::become_subreaper();
    measure::signals::install();

    let private = outfile::private_outputs();
    // The crash spool, for the profiled run's drain thread (see `crashspool`).
    let mut spooled = plan.clone();
    if plan.mode != Mode::Bench {
        match crashspool::open(&out, &rec.meta, private) {
            Ok(sink) => spooled.sample.spool = Some(sink),
            Err(why) => rec.warnings.push(format!(
                "no crash spool ({why}): had profmap been killed, the recording would be lost"
            )),
        }
    }
    let plan = &spooled;
    let runlog = runlog::RunLog::create(&out, RUN_LOG, private, plan.output.redact)?;
    let log: LogSink = runlog.sink();
    let opts = run_options(plan);
    rec.warnings.extend(input.warning.clone());
    let outcome = measure_around(plan, &opts, &log, &mut rec);
    rec.warnings.extend(measure::take_notes(&opts.notes));
    let t = outputs::Target {
        out: &out,
        oplan: &plan.output,
        keep: &[RUN_LOG],
        private,
        recording: RECORDING,
    };
    let (status, code, message) = match outcome {
        Ok(None) => (Status::Completed, 0, None),
        Ok(Some(s)) => (s.status, s.code, Some(s.message)),
        Err(e) => {
            // Keep the log of what happened, and no earlier summary beside it.
            let _ = runlog.commit();
            let status = match e {
                Error::Interrupted => Status::Interrupted,
                _ => Status::Failed,
            };
            outputs::failed_summary(&rec, &t, status, &e.to_string());
            // profmap's own failure (the drain thread panicked): the spool may hold
            // what was recorded, for `report` to recover.
            if !matches!(e, Error::Tool(_)) {
                crashspool::remove(&out);
            }
            return Err(e);
        }
    };
    if let Ok(mut l) = log.lock() {
        for w in &rec.warnings {
            let _ = writeln!(l, "profmap: warning: {w}");
        }
        if let Some(m) = &message {
            let _ = writeln!(l, "profmap: {m}");
        }
        let _ = l.flush();
    }
    let written = match runlog.commit() {
        Ok(()) => write_outputs(&mut rec, &t, status, message.as_deref(), true)?,
        Err(e) => return Err(outputs::fail(&rec, &t, &e)),
    };
    // The recording is written: the spool is no longer needed (kept when writing failed).
    crashspool::remove(&out);
    finish_terminal(&plan.output, &written, message.as_deref());
    Ok((code, rec))
}

/// How runs are run: timeout, polling, echo of the target's output.
fn run_options(plan: &SessionPlan) -> RunOptions {
    RunOptions {
        timeout: plan.measure.timeout,
        poll_interval: plan.measure.poll_interval,
        timeline_every: Duration::from_millis(50),
        kill_grace: Duration::from_secs(2),
        echo: if plan.output.quiet {
            Echo::None
        } else if plan.output.json_stdout {
            Echo::StderrOnly
        } else {
            Echo::Terminal
        },
        notes: Default::default(),
        prepare: plan.measure.around.prepare.clone(),
        conclude: plan.measure.around.conclude.clone(),
        allow_failure: plan.measure.allow_failure,
    }
}

/// `--setup`, every run ([`measure_all`]), then `--cleanup` — also after a failed run.
fn measure_around(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<Option<Setback>, Error> {
    let around = &plan.measure.around;
    let on_failure = opts.on_failure();
    if let Some(cmd) = &around.setup {
        measure::around::run(Role::Setup, cmd, "before the first run", log, &on_failure)?;
    }
    let outcome = measure_all(plan, opts, log, rec);
    if let Some(cmd) = &around.cleanup {
        let cleaned =
            measure::around::run(Role::Cleanup, cmd, "after the last run", log, &on_failure);
        if outcome.is_ok() {
            cleaned?;
        }
    }
    outcome
}

/// The baseline (unless `record`), then the profiled run (unless `bench` or the
/// baseline did not succeed); None when all went well.
fn measure_all(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<Option<Setback>, Error> {
    if plan.mode != Mode::Record
        && let Some(s) = baseline_phase(plan, opts, log, rec)?
    {
        return Ok(Some(s));
    }
    if plan.mode != Mode::Bench
        && let Some(s) = profiled_run(plan, opts, log, rec)?
    {
        return Ok(Some(s));
    }
    trace::trace_phase(plan, opts, log, rec)?;
    if plan.mode != Mode::Bench {
        escalate::escalate_phase(plan, opts, log, rec)?;
    }
    Ok(None)
}

/// The warm-ups and counted runs; a setback when the target failed or the user
/// interrupted.
fn baseline_phase(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<Option<Setback>, Error> {
    let quiet = plan.output.quiet;
    let total = plan.measure.warmup + plan.measure.runs;
    let pb = ui::progress(total, quiet || plan.output.json_stdout);
    let (baseline, outcome) = measure::run_baseline(
        &plan.target,
        &plan.measure,
        opts,
        log,
        &mut || Box::new(hooks::CountProcesses::default()),
        &mut |done, _| {
            if let Some(pb) = &pb {
                pb.set_position(u64::from(done));
            }
        },
    )?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let failures: Vec<String> = baseline
        .runs
        .iter()
        .filter(|r| !r.exit.success())
        .map(|r| format!("{} in run {}", measure::describe_exit(&r.exit), r.index))
        .collect();
    if plan.measure.allow_failure && !failures.is_empty() {
        rec.warnings.push(format!(
            "the target failed during the baseline ({}); measured anyway (--allow-failure)",
            failures.join(", ")
        ));
    }
    rec.baseline = Some(baseline);
    match outcome {
        Outcome::Completed => Ok(None),
        Outcome::TargetFailed { run, warmup, exit } => {
            let which = if warmup {
                format!("warm-up run {run}")
            } else {
                format!("run {run}")
            };
            let msg = match exit {
                ExitStatus::Timeout => format!(
                    "the target timed out ({}) in {which}; its whole process tree was terminated — \
                     raise --timeout or fix the hang",
                    plan.measure
                        .timeout
                        .map_or("timeout".into(), |t| format!("after {t:?}"))
                ),
                _ => format!(
                    "the target fails before profiling ({} in {which}) — fix it first, or pass --allow-failure",
                    measure::describe_exit(&exit)
                ),
            };
            rec.warnings.push(msg.clone());
            Ok(Some(Setback {
                status: Status::Failed,
                code: 1,
                message: msg,
            }))
        }
        Outcome::Interrupted if rec.baseline.as_ref().is_none_or(|b| b.runs.is_empty()) => {
            Err(Error::Interrupted)
        }
        Outcome::Interrupted => Ok(Some(Setback {
            status: Status::Interrupted,
            code: 130,
            message: "interrupted by the user; outputs hold what was measured".into(),
        })),
    }
}

/// `profmap report`: re-analyse a recording and rewrite every output from it.
pub fn report(plan: &ReportPlan) -> Result<i32, Error> {
    let input = recorded_input(&plan.input)?;
    let mut rec = outputs::timed("reading the recording", || read_recording(&input))?;
    let out_dir = match &plan.output.dir {
        Some(d) => d.clone(),
        None => input
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let out = prepare_out_dir(&out_dir)?;
    let _lock = lock::lock(&out, &rec.meta.run_id, rec.meta.started_unix_s)?;
    outfile::remove_leftover_temporaries(&out, OWN_FILES);
    let status = status_of(&rec);
    let private = outfile::private_outputs();
    // A recording read unchanged is not re-encoded: its bytes, already validated, are
    // copied under the name of their version (plain JSON, e.g. a hand-made fixture, is
    // written as version 2).
    let name = recording_name(&input)?;
    let kept = name.unwrap_or(RECORDING);
    let same = std::fs::canonicalize(&input).ok() == std::fs::canonicalize(out.join(kept)).ok();
    if name.is_some() && !same {
        let mut file = crate::profile::open_recording(&input)?;
        outfile::copy_file(&out, kept, &mut file, private)?;
    }
    let encode = name.is_none() && !same;
    let t = outputs::Target {
        out: &out,
        oplan: &plan.output,
        keep: &[RUN_LOG, kept],
        private,
        recording: kept,
    };
    let w = write_outputs(&mut rec, &t, status, None, encode)?;
    finish_terminal(&plan.output, &w, None);
    Ok(0)
}

/// The name a recording's bytes are kept under, from its first bytes: version 2 or
/// gzip JSON; None for plain JSON (re-encoded).
fn recording_name(input: &Path) -> Result<Option<&'static str>, Error> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(input)
        .and_then(|f| f.take(8).read_to_end(&mut head))
        .map_err(|e| Error::io(input, e))?;
    Ok(if head.starts_with(&crate::profile::pmr::MAGIC) {
        Some(RECORDING)
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Some(RECORDING_V1)
    } else {
        None
    })
}

/// The recording of a folder: `profile.pmr`, else an older `profile.json.gz`, else
/// (neither exists) the path of a `profile.pmr`, for the error.
pub(crate) fn folder_recording(dir: &Path) -> PathBuf {
    [RECORDING, RECORDING_V1]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
        .unwrap_or_else(|| dir.join(RECORDING))
}

/// The recording `input` names, for `report` and `export`: a folder whose run did not
/// finish (a crash spool newer than its recording, or its spool named) is recovered
/// first (see `crashspool`).
fn recorded_input(input: &Path) -> Result<PathBuf, Error> {
    let spool_named = input
        .file_name()
        .is_some_and(|n| n == crate::profile::spool::SPOOL_FILE);
    let folder = if input.is_dir() {
        Some(input)
    } else if spool_named {
        input
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .or(Some(Path::new(".")))
    } else {
        None
    };
    match folder {
        Some(dir) => {
            crashspool::recover_folder(dir)?;
            recording_path(dir)
        }
        None => recording_path(input),
    }
}

/// The recording `input` names: the file, or the recording in a folder.
fn recording_path(input: &Path) -> Result<PathBuf, Error> {
    let path = if input.is_dir() {
        folder_recording(input)
    } else {
        input.to_path_buf()
    };
    if !path.exists() {
        return Err(Error::Usage(format!(
            "no recording at '{}' — give a recording (profile.pmr or profile.json.gz) or the folder of a `profmap run`/`record`",
            path.display()
        )));
    }
    Ok(path)
}

/// `profmap export`: one format of a recording, to `--out FILE` or beside it.
pub fn export(plan: &ExportPlan) -> Result<i32, Error> {
    let input = recorded_input(&plan.input)?;
    let mut rec = read_recording(&input)?;
    let Some(data) = crate::export::Input::new(&mut rec) else {
        return Err(Error::Usage(format!(
            "'{}' holds no deep profile (a `profmap bench` session): nothing to export — \
             record one with `profmap run` or `profmap record`",
            input.display()
        )));
    };
    let name = crate::export::exporter(plan.format).file_name();
    let path = match &plan.out {
        Some(p) => p.clone(),
        None => input
            .parent()
            .map_or_else(|| PathBuf::from(name), |d| d.join(name)),
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::Usage(format!("bad --out '{}'", path.display())))?;
    // Links in a path the user gave are theirs to have; the file itself is written
    // through a temporary and never follows a planted link.
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let mut tmp = outputs::export_file(&dir, file, plan.format, &data)?;
    let bytes = tmp.file().metadata().map_or(0, |m| m.len());
    tmp.commit()?;
    eprintln!(
        "profmap: wrote {} ({}, {bytes} bytes)",
        dir.join(file).display(),
        plan.format.name(),
    );
    Ok(0)
}

/// The status a recording stands for: interrupted when a run was (or profmap was
/// killed and the recording recovered), failed when a run failed, else completed.
fn status_of(rec: &Recording) -> Status {
    let mut runs = rec
        .baseline
        .iter()
        .flat_map(|b| b.runs.iter())
        .chain(rec.profiled_run.iter());
    if runs.clone().any(|r| r.exit == ExitStatus::Interrupted) || crashspool::recovered(rec) {
        Status::Interrupted
    } else if runs.any(|r| !r.exit.success()) {
        Status::Failed
    } else {
        Status::Completed
    }
}

/// How a profiled run that did not simply succeed ended.
#[derive(Debug)]
struct Setback {
    status: Status,
    code: i32,
    message: String,
}

/// The separate, profiled run: sampler attached before exec, stacks symbolized after
/// the last process exits. Without permission for perf events, `run` keeps its baseline
/// and says how to fix it; `record` (which asked for nothing else) exits 2.
fn profiled_run(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<Option<Setback>, Error> {
    if let Ok(mut l) = log.lock() {
        let _ = writeln!(
            l,
            "=== profmap: profiled run of {} ===",
            plan.target.argv_lossy().join(" ")
        );
    }
    let mut hooks = hooks::Profile::new(plan.sample.clone());
    // A Node program's JavaScript is named through V8's JIT maps (see `nodejit`).
    let jit = nodejit::profiled_target(&plan.target);
    let started = std::time::SystemTime::now();
    let m = match measure::run_once(
        jit.as_ref().map_or(&plan.target, |(t, _)| t),
        opts,
        log,
        &mut hooks,
        (1, false),
        "the profiled run",
    ) {
        Ok(m) => m,
        Err(Error::Interrupted) if rec.baseline.is_none() => return Err(Error::Interrupted),
        Err(Error::Interrupted) => {
            return Ok(Some(Setback {
                status: Status::Interrupted,
                code: 130,
                message: "interrupted by the user before the profiled run started".into(),
            }));
        }
        Err(e @ Error::Permission { .. }) if plan.mode == Mode::Run => {
            let msg = format!("no deep profile: {e}");
            rec.warnings.push(msg.clone());
            return Ok(Some(Setback {
                status: Status::Blocked,
                code: 0,
                message: msg,
            }));
        }
        Err(e) => return Err(e),
    };
    let exit = m.exit;
    let wall_ms = m.wall_ms;
    rec.profiled_run = Some(m);
    let raw = hooks.finish()?;
    let mut prof = crate::symbolize::symbolize(raw);
    prof.wall_ms = wall_ms;
    if let Some((_, note)) = jit {
        nodejit::remove_maps(prof.processes.iter().map(|p| p.pid), started);
        rec.warnings.push(note);
    }
    rec.sampled = Some(prof);
    if exit == ExitStatus::Interrupted || measure::signals::interrupted() {
        return Ok(Some(Setback {
            status: Status::Interrupted,
            code: 130,
            message:
                "interrupted by the user during the profiled run; outputs hold what was measured"
                    .into(),
        }));
    }
    if !exit.success() && !plan.measure.allow_failure {
        let msg = format!(
            "the target failed in the profiled run ({}) — the profile covers it up to that point",
            measure::describe_exit(&exit)
        );
        rec.warnings.push(msg.clone());
        return Ok(Some(Setback {
            status: Status::Failed,
            code: 1,
            message: msg,
        }));
    }
    Ok(None)
}

/// Print any failure message and the summary table, on stderr: stdout carries only the
/// target's output (or, with `--json`, the map).
pub fn finish_terminal(oplan: &OutputPlan, w: &Written, message: Option<&str>) {
    if let Some(m) = message {
        ui::to_stderr(&format!("profmap: {m}\n"));
    }
    if oplan.quiet {
        return;
    }
    ui::to_stderr(&ui::summary_table(
        &w.map,
        &w.report_path.display().to_string(),
    ));
}

/// Create the output folder, or reuse it; a file in its place, or a folder another
/// user controls, is an error.
pub fn prepare_out_dir(dir: &Path) -> Result<PathBuf, Error> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::OutIsFile(dir.to_path_buf()));
    }
    outfile::check_out_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    Ok(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()))
}

/// Refuse, before anything runs, a `--summary-path` that could not be written: a
/// folder, or one whose folder cannot be created or written.
fn check_summary_path(p: &Path) -> Result<(), Error> {
    let bad = |why: String| {
        Err(Error::Usage(format!(
            "--summary-path '{}': {why}",
            p.display()
        )))
    };
    if p.is_dir() {
        return bad("is a folder; give a file path".into());
    }
    if p.file_name().is_none() {
        return bad("has no file name".into());
    }
    let parent = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Err(e) = std::fs::create_dir_all(parent) {
        return bad(format!("its folder cannot be created ({e})"));
    }
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(parent.as_os_str().as_bytes())
        .map_err(|e| Error::Usage(e.to_string()))?;
    // SAFETY: access reads a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return bad(format!(
            "its folder '{}' is not writable ({e})",
            parent.display()
        ));
    }
    Ok(())
}

/// When, where and what.
pub fn session_meta(command: &[String], run_id: Option<String>) -> SessionMeta {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    SessionMeta {
        run_id: run_id.unwrap_or_else(|| default_run_id(now.as_secs())),
        command: command.to_vec(),
        started_unix_s: now.as_secs_f64(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
    }
}

/// (year, month, day) of a count of days since 1970-01-01 (proleptic Gregorian, by
/// 400-year eras: Howard Hinnant's algorithm).
pub(crate) fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// "20261129-171502-4242": UTC date and time, then our pid.
fn default_run_id(secs: u64) -> String {
    let rem = secs % 86_400;
    let (y, m, d) = civil_date((secs / 86_400) as i64);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_date() {
        // 2026-11-29 17:15:02 UTC
        let id = default_run_id(1_795_972_502);
        assert!(id.starts_with("20261129-171502-"), "{id}");
    }
}
