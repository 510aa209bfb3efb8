//! One measured run of the target's whole process tree.
//!
//! How every process is accounted for: profmap is the child subreaper, so every process
//! of the tree is reaped either by its own parent (and its rusage and I/O then roll up
//! into that parent's) or, orphaned, by us. For each child we reap we first wait with
//! `WNOWAIT`, read the zombie's /proc/PID/io (which still holds its own and its reaped
//! children's I/O), then reap it with `wait4` for its rusage. Summing over our reaped
//! children therefore covers the whole tree, double-forked orphans included. The run
//! ends when `waitid` says there is no child left.
//!
//! A supervisor thread (`supervise.rs`) enforces the timeout and Ctrl-C on the whole
//! tree and says when processes outlive the command or the tree sits stopped; time
//! profmap spent stopped by Ctrl-Z (the tree stopped with it) is left out of the wall
//! time. A poller thread samples /proc for memory and the timeline; two threads copy
//! the target's stdout and stderr to `run.log` and, unless quiet, to the terminal.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::around::{self, OnFailure, Role};
use super::poll::{PollResult, Poller};
use super::procfs::{self, ProcIo};
use super::signals;
use super::supervise::{Supervisor, Watch};
use crate::error::Error;
use crate::plan::{Stdin, TargetSpec};
use crate::profile::{ExitStatus, RunMeasurement};
use crate::target::{self, Launched};

/// Where the target's output goes besides run.log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// Target stdout → our stdout, target stderr → our stderr.
    Terminal,
    /// Both → our stderr (our stdout is reserved, e.g. for `--json`).
    StderrOnly,
    None,
}

/// A shared, thread-safe log file.
pub type LogSink = Arc<Mutex<Box<dyn Write + Send>>>;

/// Things a caller attaches to a run (samplers, counters).
pub trait RunHooks {
    /// Called with the suspended child's pid, before it execs.
    fn before_release(&mut self, _pid: i32) -> Result<(), Error> {
        Ok(())
    }
    /// Called just after release, with CLOCK_MONOTONIC nanoseconds at the start.
    fn after_release(&mut self, _start_mono_ns: u64) {}
    /// Called once every process of the tree has been reaped. Returns the number of
    /// processes the tree started, if the hook counted them.
    fn after_exit(&mut self) -> Option<u64> {
        None
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub timeout: Option<Duration>,
    pub poll_interval: Duration,
    pub timeline_every: Duration,
    pub kill_grace: Duration,
    pub echo: Echo,
    /// Warnings about the runs (processes outliving the command, a stopped tree, time
    /// suspended by Ctrl-Z), for the map; each text once.
    pub notes: Notes,
    /// `--prepare`: run before every run, unmeasured.
    pub prepare: Option<String>,
    /// `--conclude`: run after every run, unmeasured.
    pub conclude: Option<String>,
    /// A failing prepare/conclude is a warning, not the end (`--allow-failure`).
    pub allow_failure: bool,
}

impl RunOptions {
    /// What a failing command around the runs does.
    pub fn on_failure(&self) -> OnFailure {
        OnFailure {
            allow: self.allow_failure,
            notes: self.notes.clone(),
        }
    }
}

/// Warnings collected across runs.
pub type Notes = Arc<Mutex<Vec<String>>>;

/// Add `text` to `notes` unless it is there already.
pub fn push_note(notes: &Notes, text: String) {
    if let Ok(mut n) = notes.lock()
        && !n.contains(&text)
    {
        n.push(text);
    }
}

/// Take every note collected so far.
pub fn take_notes(notes: &Notes) -> Vec<String> {
    notes
        .lock()
        .map(|mut n| std::mem::take(&mut *n))
        .unwrap_or_default()
}

/// CLOCK_MONOTONIC in nanoseconds (the clock perf events are told to use).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Launch the target, measure it until the last process of its tree exits; `label`
/// ("warm-up 1", "run 2", "the profiled run") names it in messages. `--prepare` runs
/// before it and `--conclude` after it, outside its figures.
pub fn run_once(
    spec: &TargetSpec,
    opts: &RunOptions,
    log: &LogSink,
    hooks: &mut dyn RunHooks,
    (index, warmup): (u32, bool),
    label: &str,
) -> Result<RunMeasurement, Error> {
    if let Some(cmd) = &opts.prepare {
        around::run(
            Role::Prepare,
            cmd,
            &format!("before {label}"),
            log,
            &opts.on_failure(),
        )?;
    }
    let m = measure_once(spec, opts, log, hooks, (index, warmup))?;
    if let Some(cmd) = &opts.conclude {
        around::run(
            Role::Conclude,
            cmd,
            &format!("after {label}"),
            log,
            &opts.on_failure(),
        )?;
    }
    Ok(m)
}

/// [`run_once`] without the commands around it.
fn measure_once(
    spec: &TargetSpec,
    opts: &RunOptions,
    log: &LogSink,
    hooks: &mut dyn RunHooks,
    (index, warmup): (u32, bool),
) -> Result<RunMeasurement, Error> {
    let disks_before = super::diskstats::snapshot();
    let (launched, start, suspended_at_start) = launch(spec, hooks)?;
    let pid = launched.pid;
    hooks.after_release(monotonic_ns());
    let poller = Poller::start(pid, start, opts.poll_interval, opts.timeline_every);
    let out_echo = match opts.echo {
        Echo::Terminal => Some(false),
        Echo::StderrOnly => Some(true),
        Echo::None => None,
    };
    let tees = [
        tee(launched.stdout, log.clone(), out_echo),
        tee(launched.stderr, log.clone(), out_echo.map(|_| true)),
    ];

    let main_exited = Arc::new(AtomicBool::new(false));
    let supervisor = Supervisor::start(Watch {
        pgid: pid,
        start,
        suspended_at_start,
        timeout: opts.timeout,
        grace: opts.kill_grace,
        main_exited: main_exited.clone(),
        quiet: opts.echo == Echo::None,
    });
    let reaped = reap_all(pid, &main_exited);
    if spec.stdin == Stdin::Terminal {
        target::launch::take_back_terminal();
    }
    let suspended =
        Duration::from_nanos(signals::suspended_ns().saturating_sub(suspended_at_start));
    let wall = start.elapsed().saturating_sub(suspended);
    signals::set_target(0);
    let seen = supervisor.stop();
    let timed_out = seen.timed_out;
    let poll = poller.stop();
    for t in tees {
        let _ = t.join();
    }
    for n in seen.notes {
        push_note(&opts.notes, n);
    }
    if suspended >= Duration::from_millis(10) {
        push_note(
            &opts.notes,
            format!(
                "a run was suspended (Ctrl-Z) for {:.1} s; that time is left out of its wall time",
                suspended.as_secs_f64()
            ),
        );
    }
    let counted = hooks.after_exit();
    let exit = if timed_out {
        ExitStatus::Timeout
    } else if signals::interrupted() {
        ExitStatus::Interrupted
    } else {
        reaped.main_status.unwrap_or(ExitStatus::Code { code: -1 })
    };
    let mut m = measurement((index, warmup, pid), wall, exit, &reaped, poll, counted);
    m.disks = super::diskstats::busy(&disks_before, &super::diskstats::snapshot(), m.wall_ms);
    Ok(m)
}

/// Fork the target suspended, let the hooks attach, release it. Returns it with the
/// start instant and `signals::suspended_ns()` at the start.
fn launch(spec: &TargetSpec, hooks: &mut dyn RunHooks) -> Result<(Launched, Instant, u64), Error> {
    let susp = target::spawn_suspended(spec)?;
    let pid = susp.pid;
    if let Err(e) = hooks.before_release(pid) {
        drop(susp); // the child exits without running the target
        target::launch::reap(pid);
        return Err(e);
    }
    signals::set_target(pid);
    if signals::interrupted() {
        // Ctrl-C came while the target was being set up: do not start it at all.
        signals::set_target(0);
        drop(susp);
        target::launch::reap(pid);
        return Err(Error::Interrupted);
    }
    let start = Instant::now();
    let suspended_at_start = signals::suspended_ns();
    match susp.release(&spec.program_lossy()) {
        Ok(l) => Ok((l, start, suspended_at_start)),
        Err(e) => {
            signals::set_target(0);
            Err(e)
        }
    }
}

/// The figures of one run, from what the reaper, the poller and the hooks found.
fn measurement(
    (index, warmup, pid): (u32, bool, i32),
    wall: Duration,
    exit: ExitStatus,
    reaped: &Reaped,
    poll: PollResult,
    counted: Option<u64>,
) -> RunMeasurement {
    let mut seen = poll.seen_pids.clone();
    seen.extend(reaped.pids.iter().copied());
    let (processes, basis) = match counted {
        Some(n) => (n.max(seen.len() as u64), "counted"),
        None => (seen.len().max(1) as u64, "observed"),
    };
    let ru = &reaped.rusage;
    RunMeasurement {
        index,
        warmup,
        pid,
        wall_ms: wall.as_secs_f64() * 1e3,
        user_ms: ru.user_ms,
        sys_ms: ru.sys_ms,
        max_rss_kb: ru.max_rss_kb,
        tree_rss_peak_kb: poll.tree_rss_peak_kb,
        memory_delta_kb: match (poll.main_rss_first_kb, poll.main_rss_last_kb) {
            (Some(a), Some(b)) if poll.main_rss_samples >= 2 => Some(b as i64 - a as i64),
            _ => None,
        },
        read_bytes: reaped.io.read_bytes,
        write_bytes: reaped.io.write_bytes,
        rchar: reaped.io.rchar,
        wchar: reaped.io.wchar,
        read_calls: Some(reaped.io.syscr),
        write_calls: Some(reaped.io.syscw),
        voluntary_cs: ru.nvcsw,
        involuntary_cs: ru.nivcsw,
        minor_faults: ru.minflt,
        major_faults: ru.majflt,
        processes,
        processes_basis: basis.to_string(),
        threads_peak: poll.threads_peak.max(1),
        exit,
        timeline: poll.timeline,
        disks: Vec::new(),
    }
}

#[derive(Debug, Default)]
struct Usage {
    user_ms: f64,
    sys_ms: f64,
    max_rss_kb: u64,
    minflt: u64,
    majflt: u64,
    nvcsw: u64,
    nivcsw: u64,
}

#[derive(Debug, Default)]
struct Reaped {
    rusage: Usage,
    io: ProcIo,
    pids: Vec<i32>,
    main_status: Option<ExitStatus>,
}

fn tv_ms(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3
}

/// Reap every child until none is left, summing rusage and zombie I/O.
fn reap_all(main_pid: i32, main_exited: &AtomicBool) -> Reaped {
    let mut r = Reaped::default();
    loop {
        // SAFETY: zeroed siginfo is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: plain syscall with valid pointers.
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => break, // ECHILD: the tree is gone
            }
        }
        // SAFETY: waitid filled si_pid for an exited child.
        let pid = unsafe { info.si_pid() };
        if pid <= 0 {
            continue;
        }
        if let Some(io) = procfs::read_io(pid) {
            r.io.add(&io);
        }
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out-parameter.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain syscall with valid pointers.
        let got = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if got != pid {
            continue;
        }
        r.pids.push(pid);
        let u = &mut r.rusage;
        u.user_ms += tv_ms(ru.ru_utime);
        u.sys_ms += tv_ms(ru.ru_stime);
        u.max_rss_kb = u.max_rss_kb.max(ru.ru_maxrss as u64);
        u.minflt += ru.ru_minflt as u64;
        u.majflt += ru.ru_majflt as u64;
        u.nvcsw += ru.ru_nvcsw as u64;
        u.nivcsw += ru.ru_nivcsw as u64;
        if pid == main_pid {
            r.main_status = Some(decode_status(status));
            main_exited.store(true, Ordering::SeqCst);
        }
    }
    r
}

fn decode_status(status: i32) -> ExitStatus {
    if libc::WIFEXITED(status) {
        ExitStatus::Code {
            code: libc::WEXITSTATUS(status),
        }
    } else if libc::WIFSIGNALED(status) {
        ExitStatus::Signal {
            signal: libc::WTERMSIG(status),
            core_dumped: libc::WCOREDUMP(status),
        }
    } else {
        ExitStatus::Code { code: -1 }
    }
}

/// Copy a pipe to the log and, if `echo` is Some(to_stderr), to the terminal.
fn tee(mut src: File, log: LogSink, echo: Option<bool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        // As large as the pipe: one read empties it.
        let mut buf = vec![0u8; crate::target::launch::OUTPUT_PIPE_BYTES];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if let Ok(mut l) = log.lock() {
                let _ = l.write_all(&buf[..n]);
            }
            match echo {
                Some(false) => {
                    let mut o = std::io::stdout().lock();
                    let _ = o.write_all(&buf[..n]);
                    let _ = o.flush();
                }
                Some(true) => {
                    let _ = std::io::stderr().lock().write_all(&buf[..n]);
                }
                None => {}
            }
        }
    })
}
