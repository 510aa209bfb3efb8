//! The Python sampler: finds the CPython interpreters of the profiled tree as they
//! appear and reads every thread's Python stack from each of them, 100 times a second,
//! without stopping them (py-spy's reader, as a library, non-blocking).
//!
//! - Discovery: the perf drain thread names each process of the tree that maps a
//!   `python*`/`libpython*` executable (MMAP2 records) or is forked from one (FORK);
//!   every [`SCAN_EVERY`] ticks a full scan of the tree (the root and its descendants,
//!   by `PPid` in `/proc/*/stat`) catches what that missed. A process is a candidate
//!   when its executable's name contains `python` or its maps hold a `libpython`; it is
//!   looked at again whenever its executable changes (a shell or pyenv's bash shim that
//!   execs the interpreter keeps its pid). An interpreter still starting is retried at
//!   each scan for [`ATTACH_FOR_NS`] (3 s); one that cannot be read (by then, or by the
//!   end of the run) gives a warning naming it and py-spy's reason (for an unsupported
//!   version: "Unsupported version of Python: X.Y.Z").
//! - Reading: `PythonSpy::get_stack_traces` with `LockingStrategy::NonBlocking` copies
//!   the interpreter's thread states and frames with `process_vm_readv` while the
//!   target runs (~250 µs a read): a stack can be torn (read while it changed); the
//!   merge's share of samples merged is the measure of agreement. A read that fails
//!   (the process exited, or memory changed under it) is counted and skipped.
//! - Each sample: pid, OS tid (the thread state's `native_thread_id`, 3.11+; before
//!   3.11 only a single-threaded interpreter's stack is attributed, to its main
//!   thread), CLOCK_MONOTONIC time at the read's start, frames outermost first, and
//!   py-spy's idle and GIL flags.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use py_spy::config::LockingStrategy;
use py_spy::{Config, PythonSpy, StackTrace};

use super::pyfind::{alive, exe_of, looks_like_python, module_name, tree};
use super::sys::monotonic_ns;
use crate::profile::{PythonFrame, PythonInterpreter, PythonSample, PythonStacks};

/// Reads per second and process.
pub const RATE_HZ: u32 = 100;
/// Full tree scans happen every this many ticks (500 ms): a scan reads `/proc/*/stat`,
/// about 1.2 ms with a hundred processes. In between, the perf drain thread names the
/// processes that map a Python executable (`Processor::set_python_hint`, from their
/// MMAP2 records, 20-30 ms after the fact), and only those, and the ones still being
/// attached, are looked at.
const SCAN_EVERY: u32 = 50;
/// How long an interpreter that cannot be read yet is retried, from its first try.
const ATTACH_FOR_NS: u64 = 3_000_000_000;
/// An interpreter that exits unreadable within this long of its first try is not
/// warned about.
const EXIT_QUIET_NS: u64 = 200_000_000;
/// Scans a non-python executable is checked for a libpython mapping.
const MAP_CHECKS: u32 = 3;

/// A running Python sampler.
#[derive(Debug)]
pub struct Running {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<(PythonStacks, Vec<String>)>,
}

/// Start the sampler on the tree rooted at `root`; None when `PROFMAP_PYTHON_STACKS=0` turns
/// it off (to measure what it costs) or its thread cannot be started.
pub fn start(root: i32, hints: mpsc::Receiver<i32>) -> Option<Running> {
    if std::env::var_os("PROFMAP_PYTHON_STACKS").is_some_and(|v| v == "0") {
        return None;
    }
    let (stop, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("profmap-python".into())
        .spawn(move || run(root, rx, hints))
        .ok()?;
    Some(Running { stop, thread })
}

impl Running {
    /// Stop and return what was read, times made relative to `t0_ns` (reads before it
    /// are dropped; with no interpreter seen, an empty table). A panicked thread gives an empty table and a warning.
    pub fn finish(self, t0_ns: u64) -> (PythonStacks, Vec<String>) {
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok((mut p, warnings)) => {
                if p.interpreters.is_empty() && p.reads == 0 {
                    return (PythonStacks::default(), warnings);
                }
                p.samples.retain(|s| s.time_ns >= t0_ns);
                for s in &mut p.samples {
                    s.time_ns -= t0_ns;
                }
                (p, warnings)
            }
            Err(_) => (
                PythonStacks::default(),
                vec!["the Python sampler thread panicked: no Python stacks".into()],
            ),
        }
    }
}

/// What is known of one process of the tree.
enum Seen {
    /// Not (yet) an interpreter: its executable and the checks done on it.
    Other {
        exe: String,
        checks: u32,
    },
    /// An interpreter not readable yet: when it was first tried.
    Pending {
        exe: String,
        since: u64,
        why: String,
    },
    Reading {
        exe: String,
        spy: Box<PythonSpy>,
    },
    /// Given up on (warned) or exited.
    Done {
        exe: String,
    },
}

impl Seen {
    fn exe(&self) -> &str {
        match self {
            Seen::Other { exe, .. }
            | Seen::Pending { exe, .. }
            | Seen::Reading { exe, .. }
            | Seen::Done { exe } => exe,
        }
    }
}

struct State {
    root: i32,
    seen: HashMap<i32, Seen>,
    frame_ids: HashMap<PythonFrame, u32>,
    out: PythonStacks,
    warnings: Vec<String>,
}

fn run(
    root: i32,
    stop: mpsc::Receiver<()>,
    hints: mpsc::Receiver<i32>,
) -> (PythonStacks, Vec<String>) {
    let mut st = State {
        root,
        seen: HashMap::new(),
        frame_ids: HashMap::new(),
        out: PythonStacks {
            rate_hz: RATE_HZ,
            ..PythonStacks::default()
        },
        warnings: Vec::new(),
    };
    let period = 1_000_000_000 / u64::from(RATE_HZ);
    let mut tick = 0u32;
    let mut next = monotonic_ns();
    loop {
        match stop.try_recv() {
            Ok(()) | Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        let hinted: Vec<i32> = hints.try_iter().collect();
        if tick.is_multiple_of(SCAN_EVERY) {
            scan(&mut st, None);
        } else if !hinted.is_empty() || st.pending() {
            scan(&mut st, Some(&hinted));
        }
        tick = tick.wrapping_add(1);
        read_all(&mut st);
        next += period;
        let now = monotonic_ns();
        if next > now {
            std::thread::sleep(Duration::from_nanos(next - now));
        } else {
            next = now; // fell behind: do not burst to catch up
        }
    }
    for (pid, seen) in &st.seen {
        if let Seen::Pending { exe, why, .. } = seen {
            st.warnings.push(unreadable(*pid, exe, why));
        }
    }
    let mut out = st.out;
    out.interpreters.sort_by_key(|i| i.pid);
    (out, st.warnings)
}

impl State {
    /// Some interpreter is waiting to be attached.
    fn pending(&self) -> bool {
        self.seen
            .values()
            .any(|s| matches!(s, Seen::Pending { .. } | Seen::Other { checks: 0, .. }))
    }
}

/// Look at the whole tree (`only` None) or at the hinted pids and the ones pending.
fn scan(st: &mut State, only: Option<&[i32]>) {
    let me = std::process::id() as i32;
    let pids: Vec<i32> = match only {
        None => tree(st.root),
        Some(hinted) => {
            let mut v: Vec<i32> = st
                .seen
                .iter()
                .filter(|(_, s)| matches!(s, Seen::Pending { .. } | Seen::Other { checks: 0, .. }))
                .map(|(p, _)| *p)
                .collect();
            v.extend_from_slice(hinted);
            v.sort_unstable();
            v.dedup();
            v
        }
    };
    for pid in pids {
        if pid == me {
            continue;
        }
        let Some(exe) = exe_of(pid) else { continue };
        let fresh = st.seen.get(&pid).is_none_or(|s| s.exe() != exe);
        if fresh {
            st.seen.insert(pid, Seen::Other { exe, checks: 0 });
        }
        step(st, pid);
    }
}

/// Advance one process's state by a scan.
fn step(st: &mut State, pid: i32) {
    let Some(seen) = st.seen.remove(&pid) else {
        return;
    };
    let next = match seen {
        Seen::Other { exe, checks } if checks < MAP_CHECKS => {
            if looks_like_python(pid, &exe) {
                attach(st, pid, exe, monotonic_ns())
            } else {
                Seen::Other {
                    exe,
                    checks: checks + 1,
                }
            }
        }
        Seen::Pending { exe, since, .. } => attach(st, pid, exe, since),
        other => other,
    };
    st.seen.insert(pid, next);
}

fn config() -> Config {
    Config {
        blocking: LockingStrategy::NonBlocking,
        native: false,
        include_idle: true,
        ..Config::default()
    }
}

fn attach(st: &mut State, pid: i32, exe: String, since: u64) -> Seen {
    // The reader may panic on a process that changes under it: that is an error of
    // this one process, not the end of the Python sampler.
    let made =
        std::panic::catch_unwind(|| PythonSpy::new(pid, &config()).map_err(|e| format!("{e:#}")))
            .unwrap_or_else(|_| Err(PANICKED.to_string()));
    let err = match made {
        Ok(spy) => {
            st.out.interpreters.push(PythonInterpreter {
                pid,
                version: spy.version.to_string(),
                exe: Some(exe.clone()),
            });
            return Seen::Reading {
                exe,
                spy: Box::new(spy),
            };
        }
        Err(e) => e,
    };
    let tried_for = monotonic_ns().saturating_sub(since);
    if !alive(pid) {
        // An interpreter that exited while still unreadable after some tries says so;
        // one that exited at its first try (a short `python3 -c`) had nothing to read.
        if tried_for > EXIT_QUIET_NS {
            st.warnings.push(unreadable(pid, &exe, &err));
        }
        return Seen::Done { exe };
    }
    if tried_for < ATTACH_FOR_NS {
        return Seen::Pending {
            exe,
            since,
            why: err,
        };
    }
    st.warnings.push(unreadable(pid, &exe, &err));
    Seen::Done { exe }
}

/// What a panic of the stack reader is reported as.
const PANICKED: &str = "the stack reader panicked";

fn unreadable(pid: i32, exe: &str, why: &str) -> String {
    format!(
        "process {pid} ({exe}) looks like a Python interpreter but its Python stacks cannot \
         be read ({why}): it is profiled as native code only"
    )
}

fn read_all(st: &mut State) {
    let pids: Vec<i32> = st
        .seen
        .iter()
        .filter(|(_, s)| matches!(s, Seen::Reading { .. }))
        .map(|(p, _)| *p)
        .collect();
    for pid in pids {
        let Some(Seen::Reading { spy, .. }) = st.seen.get_mut(&pid) else {
            continue;
        };
        let t = monotonic_ns();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spy.get_stack_traces().map_err(|_| ())
        }))
        .unwrap_or(Err(()));
        st.out.read_ns += monotonic_ns().saturating_sub(t);
        st.out.reads += 1;
        match got {
            Ok(traces) => record(st, pid, t, &traces),
            Err(_) => {
                st.out.failed_reads += 1;
                if !alive(pid)
                    && let Some(Seen::Reading { exe, .. }) = st.seen.remove(&pid)
                {
                    st.seen.insert(pid, Seen::Done { exe });
                }
            }
        }
    }
}

fn record(st: &mut State, pid: i32, time_ns: u64, traces: &[StackTrace]) {
    let single = traces.len() == 1;
    for tr in traces {
        let tid = match tr.os_thread_id {
            Some(t) => i32::try_from(t).ok(),
            None if single => Some(pid),
            None => None,
        };
        let Some(tid) = tid else { continue };
        let frames = tr
            .frames
            .iter()
            .rev()
            .map(|f| intern(st, f))
            .collect::<Vec<u32>>();
        st.out.samples.push(PythonSample {
            pid,
            tid,
            time_ns,
            frames,
            active: tr.active,
            owns_gil: tr.owns_gil,
        });
    }
}

fn intern(st: &mut State, f: &py_spy::Frame) -> u32 {
    let frame = PythonFrame {
        function: f.name.clone(),
        file: f.filename.clone(),
        module: module_name(f.short_filename.as_deref().unwrap_or(&f.filename)),
        line: u32::try_from(f.line).ok().filter(|l| *l > 0),
    };
    let frames = &mut st.out.frames;
    *st.frame_ids.entry(frame).or_insert_with_key(|k| {
        frames.push(k.clone());
        (frames.len() - 1) as u32
    })
}
