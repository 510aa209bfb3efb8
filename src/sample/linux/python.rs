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
//!   execs the interpreter keeps its pid). An interpreter still starting is retried,
//!   the wait doubling from 10 ms to 40 ms (500 ms for a program that only links
//!   libpython, such as `perf`), for [`ATTACH_FOR_NS`] (3 s); one that cannot be read (by then, or by the
//!   end of the run) gives a warning naming it and py-spy's reason (for an unsupported
//!   version: "Unsupported version of Python: X.Y.Z"). A process being read that has
//!   exec'd since it was attached (its code's or its stack's start in
//!   `/proc/PID/stat` moved: a forked interpreter, such as `subprocess`'s with a
//!   `preexec_fn`, that execs an interpreter, even the same position-independent
//!   one) is attached afresh: checked at each full scan and when a read fails, since
//!   the reader's addresses are the old image's.
//! - Reading: `PythonSpy::get_stack_traces` with `LockingStrategy::NonBlocking` copies
//!   the interpreter's thread states and frames with `process_vm_readv` while the
//!   target runs (~250 µs a read): a stack can be torn (read while it changed); the
//!   merge's share of samples merged is the measure of agreement. A read that fails
//!   (the process exited, or memory changed under it) is counted and skipped.
//! - Each sample: pid, OS tid (below), CLOCK_MONOTONIC time at the read's start,
//!   frames outermost first, and py-spy's idle and GIL flags.
//!
//! ## OS thread ids before CPython 3.11
//!
//! From 3.11 the thread state holds the OS thread id (`native_thread_id`) and py-spy
//! gives it. Before, it holds only `thread_id`, the `pthread_t` of the thread: with
//! glibc (and musl) the address of the thread's `struct pthread`, whose `tid` field
//! holds the OS tid at an offset that is fixed for a libc build (0x2d0 on x86_64 glibc
//! 2.36) but not part of any ABI. [`ThreadIds`] finds it per process rather than
//! assuming it:
//!
//! 1. Calibration, at the first read that shows two or more Python threads: 1 KiB is
//!    copied from each `pthread_t` (`process_vm_readv`) and the live tids of the
//!    process are listed (`/proc/PID/task`); a thread state whose thread has not run
//!    yet (`pthread_t` 0, made by `threading` before it starts) is left out. An offset qualifies when at every thread
//!    the 32-bit word there is a live tid or 0 (glibc clears it when a thread exits),
//!    at least two are live, and no two are equal. Exactly one offset must qualify;
//!    none or several (a thread just starting or ending) fail the try, which is
//!    repeated at the next reads up to [`CALIBRATE_TRIES`] times (~120 µs a try here,
//!    debug build).
//! 2. Each read then copies the word at `pthread_t + offset` of every thread in one
//!    `process_vm_readv` (~8-11 µs for two threads here, debug build, 5-6 of them the
//!    system call; a stack read is 250-700 µs) — read afresh, not cached, because
//!    glibc reuses a finished thread's stack and so its `pthread_t` for the next
//!    thread. A value is accepted when it is the one last accepted for that
//!    `pthread_t` (the cache, per process), or else when `/proc/PID/task/TID` exists
//!    (then cached); 0 or a dead tid leaves that thread's stack unattributed.
//! 3. Until calibrated, or when it fails: only a single-threaded interpreter's stack
//!    is attributed, to its main thread (pid); a multi-threaded one's stacks are
//!    dropped, with a warning naming the process once the tries are spent (and the
//!    merge's own warning on unmerged samples).
//!
//! Its cost is counted in the reads' time (`PythonStacks::read_ns`).

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use py_spy::config::LockingStrategy;
use py_spy::{Config, PythonSpy, StackTrace};

use super::pyfind::{Image, alive, exe_of, image_of, looks_like_python, module_name, tree};
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
/// The wait before the second try; it doubles at each failed try, up to
/// [`RETRY_CAP_PYTHON_NS`] for an executable named `python*` (an interpreter still
/// starting is readable within a few tens of ms) and [`RETRY_CAP_EMBED_NS`] for a
/// program that only links libpython. A failed try costs ~8 ms of this thread (py-spy
/// searches the process's memory for an interpreter): retried at every 10 ms tick, one
/// `perf bench` (perf embeds Python for scripting) kept this thread at 86% of a CPU
/// for the first 3 s of every run.
const RETRY_FIRST_NS: u64 = 10_000_000;
const RETRY_CAP_PYTHON_NS: u64 = 40_000_000;
const RETRY_CAP_EMBED_NS: u64 = 500_000_000;
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
    Other { exe: String, checks: u32 },
    /// An interpreter not readable yet: when it was first tried, how often, and when
    /// it is tried next.
    Pending {
        exe: String,
        since: u64,
        tries: u32,
        next_ns: u64,
        why: String,
    },
    Reading {
        exe: String,
        spy: Box<PythonSpy>,
        tids: ThreadIds,
        /// Its memory layout when attached: a change means it exec'd.
        image: Option<Image>,
    },
    /// Given up on (warned) or exited.
    Done { exe: String },
}

impl Seen {
    /// Due for a look by a partial scan: new, or pending and its retry time has come.
    fn due(&self, now: u64) -> bool {
        match self {
            Seen::Other { checks: 0, .. } => true,
            Seen::Pending { next_ns, .. } => *next_ns <= now,
            _ => false,
        }
    }

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
            st.warnings.extend(unreadable(*pid, exe, why));
        }
    }
    let mut out = st.out;
    out.interpreters.sort_by_key(|i| i.pid);
    (out, st.warnings)
}

impl State {
    /// Some process is due for a look (a new one, or an interpreter whose retry is due).
    fn pending(&self) -> bool {
        let now = monotonic_ns();
        self.seen.values().any(|s| s.due(now))
    }
}

/// Look at the whole tree (`only` None) or at the hinted pids and the ones pending.
fn scan(st: &mut State, only: Option<&[i32]>) {
    let me = std::process::id() as i32;
    let pids: Vec<i32> = match only {
        None => tree(st.root),
        Some(hinted) => {
            let now = monotonic_ns();
            let mut v: Vec<i32> = st
                .seen
                .iter()
                .filter(|(_, s)| s.due(now))
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
        let fresh = st
            .seen
            .get(&pid)
            .is_none_or(|s| s.exe() != exe || execed(s, pid));
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
    let seen_due = seen.due(monotonic_ns());
    let next = match seen {
        Seen::Other { exe, checks } if checks < MAP_CHECKS => {
            if looks_like_python(pid, &exe) {
                attach(st, pid, exe, (monotonic_ns(), 0))
            } else {
                Seen::Other {
                    exe,
                    checks: checks + 1,
                }
            }
        }
        Seen::Pending {
            exe, since, tries, ..
        } if seen_due => attach(st, pid, exe, (since, tries)),
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

/// Try to read `pid`, first tried at `since` and tried `tries` times before.
fn attach(st: &mut State, pid: i32, exe: String, (since, tries): (u64, u32)) -> Seen {
    // The reader may panic on a process that changes under it: that is an error of
    // this one process, not the end of the Python sampler.
    // Before the reader, so that an exec while it attaches shows as a change.
    let image = image_of(pid);
    let made =
        std::panic::catch_unwind(|| PythonSpy::new(pid, &config()).map_err(|e| format!("{e:#}")))
            .unwrap_or_else(|_| Err(PANICKED.to_string()));
    let err = match made {
        Ok(spy) => {
            let it = PythonInterpreter {
                pid,
                version: spy.version.to_string(),
                exe: Some(exe.clone()),
            };
            // One entry per process: an interpreter that exec'd another keeps the last.
            match st.out.interpreters.iter_mut().find(|i| i.pid == pid) {
                Some(old) => *old = it,
                None => st.out.interpreters.push(it),
            }
            return Seen::Reading {
                exe,
                spy: Box::new(spy),
                tids: ThreadIds::default(),
                image,
            };
        }
        Err(e) => e,
    };
    let now = monotonic_ns();
    let tried_for = now.saturating_sub(since);
    if !alive(pid) {
        // An interpreter that exited while still unreadable after some tries says so;
        // one that exited at its first try (a short `python3 -c`) had nothing to read.
        if tried_for > EXIT_QUIET_NS {
            st.warnings.extend(unreadable(pid, &exe, &err));
        }
        return Seen::Done { exe };
    }
    if tried_for < ATTACH_FOR_NS {
        let next_ns = now.saturating_add(retry_wait(&exe, tries));
        return Seen::Pending {
            exe,
            since,
            tries: tries.saturating_add(1),
            next_ns,
            why: err,
        };
    }
    st.warnings.extend(unreadable(pid, &exe, &err));
    Seen::Done { exe }
}

/// The wait after the `tries`+1-th failed try of `exe` (see [`RETRY_FIRST_NS`]).
fn retry_wait(exe: &str, tries: u32) -> u64 {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    let cap = if name.contains("python") {
        RETRY_CAP_PYTHON_NS
    } else {
        RETRY_CAP_EMBED_NS
    };
    RETRY_FIRST_NS
        .saturating_mul(1u64 << tries.min(20))
        .min(cap)
}

/// True when `seen` is an interpreter being read whose process has exec'd since (a
/// forked interpreter that execs one: the reader's addresses are the old image's).
fn execed(seen: &Seen, pid: i32) -> bool {
    matches!(seen, Seen::Reading { image: Some(then), .. }
        if image_of(pid).is_some_and(|now| now != *then))
}

/// What a panic of the stack reader is reported as.
const PANICKED: &str = "the stack reader panicked";

/// The warning for an interpreter whose stacks cannot be read; none for a program that
/// only links libpython and never started an interpreter (`perf`, `gdb`, `vim` embed one
/// for scripting: "looks like a Python interpreter" was noise on every `perf` profiled).
fn unreadable(pid: i32, exe: &str, why: &str) -> Option<String> {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    let embedded_idle =
        !name.contains("python") && why.contains("Failed to find a python interpreter");
    (!embedded_idle).then(|| {
        format!(
            "process {pid} ({exe}) looks like a Python interpreter but its Python stacks \
             cannot be read ({why}): it is profiled as native code only"
        )
    })
}

fn read_all(st: &mut State) {
    let pids: Vec<i32> = st
        .seen
        .iter()
        .filter(|(_, s)| matches!(s, Seen::Reading { .. }))
        .map(|(p, _)| *p)
        .collect();
    for pid in pids {
        let Some(Seen::Reading { spy, tids, .. }) = st.seen.get_mut(&pid) else {
            continue;
        };
        let t = monotonic_ns();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spy.get_stack_traces().map_err(|_| ())
        }))
        .unwrap_or(Err(()));
        let got = got.map(|traces| {
            let os = os_tids(tids, pid, &traces);
            if let Some(w) = tids.warning(pid, &spy.version.to_string()) {
                st.warnings.push(w);
            }
            (traces, os)
        });
        st.out.read_ns += monotonic_ns().saturating_sub(t);
        st.out.reads += 1;
        match got {
            Ok((traces, os)) => record(st, pid, t, &traces, &os),
            Err(_) => {
                st.out.failed_reads += 1;
                let gone = !alive(pid);
                if (gone || st.seen.get(&pid).is_some_and(|s| execed(s, pid)))
                    && let Some(Seen::Reading { exe, .. }) = st.seen.remove(&pid)
                {
                    // An exec'd process is looked at afresh by the next scan.
                    let next = if gone {
                        Seen::Done { exe }
                    } else {
                        Seen::Other { exe, checks: 0 }
                    };
                    st.seen.insert(pid, next);
                }
            }
        }
    }
}

/// Each trace's OS tid: py-spy's (3.11+), else through `tids` (see the module doc).
fn os_tids(tids: &mut ThreadIds, pid: i32, traces: &[StackTrace]) -> Vec<Option<i32>> {
    let mut out: Vec<Option<i32>> = traces
        .iter()
        .map(|t| t.os_thread_id.and_then(|x| i32::try_from(x).ok()))
        .collect();
    let missing: Vec<usize> = (0..traces.len())
        .filter(|&k| traces[k].os_thread_id.is_none())
        .collect();
    if missing.is_empty() {
        return out;
    }
    let pthreads: Vec<u64> = missing.iter().map(|&k| traces[k].thread_id).collect();
    match tids.resolve(pid, &pthreads) {
        Some(found) => {
            for (k, tid) in missing.into_iter().zip(found) {
                out[k] = tid;
            }
        }
        None if traces.len() == 1 => out[0] = Some(pid),
        None => {}
    }
    out
}

fn record(st: &mut State, pid: i32, time_ns: u64, traces: &[StackTrace], tids: &[Option<i32>]) {
    for (tr, tid) in traces.iter().zip(tids) {
        let Some(tid) = *tid else { continue };
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

/// Tries at calibrating a process's `struct pthread` tid offset before giving up.
const CALIBRATE_TRIES: u32 = 20;
/// Bytes of `struct pthread` searched for the tid, from its start.
const PTHREAD_WINDOW: usize = 1024;

/// One interpreter's `pthread_t` → OS tid mapping, before CPython 3.11 (module doc).
#[derive(Debug, Default)]
struct ThreadIds {
    /// The tid's offset in `struct pthread`, once calibrated.
    offset: Option<u64>,
    /// Calibrations tried that failed.
    failed: u32,
    /// Warned that calibration gave up.
    warned: bool,
    /// `pthread_t` → the tid last read there and found live.
    known: HashMap<u64, i32>,
}

impl ThreadIds {
    /// The OS tid of each `pthread_t` (None: not live, not readable), or None while
    /// the offset is not known (calibrated here with two threads or more).
    fn resolve(&mut self, pid: i32, pthreads: &[u64]) -> Option<Vec<Option<i32>>> {
        // A thread state made by `threading` before its thread runs has pthread_t 0.
        let started: Vec<u64> = pthreads.iter().copied().filter(|&p| p != 0).collect();
        if self.offset.is_none() && started.len() >= 2 && self.failed < CALIBRATE_TRIES {
            match calibrate(pid, &started) {
                Some(off) => self.offset = Some(off as u64),
                None => self.failed += 1,
            }
        }
        let off = self.offset?;
        let addrs: Vec<u64> = started.iter().map(|p| p.wrapping_add(off)).collect();
        let mut words = read_words(pid, &addrs).into_iter();
        let out = pthreads
            .iter()
            .map(|&p| {
                let w = if p == 0 { None } else { words.next().flatten() };
                let tid = i32::try_from(w?).ok().filter(|&t| t > 0)?;
                if self.known.get(&p) == Some(&tid) {
                    return Some(tid);
                }
                let live = std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists();
                live.then(|| {
                    self.known.insert(p, tid);
                    tid
                })
            })
            .collect();
        Some(out)
    }

    /// Once, when calibration has given up.
    fn warning(&mut self, pid: i32, version: &str) -> Option<String> {
        if self.warned || self.offset.is_some() || self.failed < CALIBRATE_TRIES {
            return None;
        }
        self.warned = true;
        Some(format!(
            "process {pid} (Python {version}): the OS thread of each Python thread could not \
             be found (no tid recognised in the C library's thread structure after \
             {CALIBRATE_TRIES} tries): the Python stacks of its threads are not attributed \
             while it runs more than one thread, and those threads are profiled as native \
             code only"
        ))
    }
}

/// The tid's offset in `struct pthread`, from the first [`PTHREAD_WINDOW`] bytes at
/// each `pthread_t` and the process's live tids.
fn calibrate(pid: i32, pthreads: &[u64]) -> Option<usize> {
    let live: std::collections::HashSet<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let windows: Vec<Vec<u8>> = pthreads
        .iter()
        .map(|&p| read_mem(pid, p, PTHREAD_WINDOW))
        .collect::<Option<_>>()?;
    pick_offset(&windows, &live)
}

/// The one 4-aligned offset where every window holds 0 or a live tid, at least two
/// hold live ones, and no two the same; None when there is no such offset or several.
fn pick_offset(windows: &[Vec<u8>], live: &std::collections::HashSet<i32>) -> Option<usize> {
    let len = windows.iter().map(Vec::len).min()?;
    let mut found = None;
    for off in (0..len.saturating_sub(3)).step_by(4) {
        let mut seen: Vec<i32> = Vec::with_capacity(windows.len());
        let fits = windows.iter().all(|w| {
            let v = u32::from_ne_bytes([w[off], w[off + 1], w[off + 2], w[off + 3]]);
            let Ok(v) = i32::try_from(v) else {
                return false;
            };
            if v == 0 {
                return true;
            }
            let fresh = live.contains(&v) && !seen.contains(&v);
            seen.push(v);
            fresh
        });
        if fits && seen.len() >= 2 {
            if found.is_some() {
                return None;
            }
            found = Some(off);
        }
    }
    found
}

/// `n` bytes of `pid`'s memory at `addr`, all of them or None.
fn read_mem(pid: i32, addr: u64, n: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: n,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: n,
    };
    // SAFETY: `local` points at our own buffer of n bytes; the remote range is only
    // read, and checked by the kernel.
    let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    (usize::try_from(got).ok() == Some(n)).then_some(buf)
}

/// The 32-bit word at each address of `pid`, in one `process_vm_readv` (those past a
/// failed one read alone).
fn read_words(pid: i32, addrs: &[u64]) -> Vec<Option<u32>> {
    let mut words = vec![[0u8; 4]; addrs.len()];
    let mut done = 0usize;
    for (chunk_w, chunk_a) in words.chunks_mut(512).zip(addrs.chunks(512)) {
        let local: Vec<libc::iovec> = chunk_w
            .iter_mut()
            .map(|w| libc::iovec {
                iov_base: w.as_mut_ptr().cast(),
                iov_len: 4,
            })
            .collect();
        let remote: Vec<libc::iovec> = chunk_a
            .iter()
            .map(|&a| libc::iovec {
                iov_base: a as *mut libc::c_void,
                iov_len: 4,
            })
            .collect();
        // SAFETY: each local iovec points at 4 bytes of `words`, alive and not
        // otherwise borrowed during the call; the remote ranges are only read, and
        // checked by the kernel. 512 iovecs stay under IOV_MAX (1024).
        let got = unsafe {
            libc::process_vm_readv(
                pid,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        let whole = usize::try_from(got).unwrap_or(0) / 4;
        if whole == chunk_a.len() {
            done += whole;
            continue;
        }
        break;
    }
    let mut out: Vec<Option<u32>> = words[..done]
        .iter()
        .map(|w| Some(u32::from_ne_bytes(*w)))
        .collect();
    for &a in &addrs[done..] {
        out.push(read_mem(pid, a, 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]])));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use super::{RETRY_CAP_EMBED_NS, ThreadIds, pick_offset, retry_wait, unreadable};
    use std::collections::HashSet;

    #[test]
    fn retries_back_off_sooner_for_a_program_that_only_links_libpython() {
        let waits = |exe| {
            (0..8)
                .map(|k| retry_wait(exe, k) / 1_000_000)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            waits("/usr/bin/python3.11"),
            [10, 20, 40, 40, 40, 40, 40, 40]
        );
        assert_eq!(waits("/usr/bin/perf"), [10, 20, 40, 80, 160, 320, 500, 500]);
        assert_eq!(retry_wait("perf", u32::MAX), RETRY_CAP_EMBED_NS);
    }

    #[test]
    fn a_program_that_only_links_libpython_gets_no_warning() {
        let none = "Failed to find a python interpreter in the .data section";
        assert_eq!(unreadable(7, "/usr/bin/perf", none), None);
        assert!(unreadable(7, "/tmp/python3-fake", none).is_some());
        assert!(unreadable(7, "/usr/bin/perf", "Permission denied").is_some());
    }
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    fn window(words: &[(usize, u32)]) -> Vec<u8> {
        let mut w = vec![0xeeu8; 64];
        for &(off, v) in words {
            w[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
        w
    }

    #[test]
    fn the_offset_is_the_one_holding_distinct_live_tids() {
        let live: HashSet<i32> = [100, 101, 102].into();
        let a = window(&[(8, 100), (16, 100), (40, 7)]);
        let b = window(&[(8, 101), (16, 100), (40, 7)]);
        // 16 holds the pid at both (not distinct), 40 a dead value: 8 it is.
        assert_eq!(pick_offset(&[a.clone(), b.clone()], &live), Some(8));
        // A thread that ended reads 0 there; the others still decide.
        let c = window(&[(8, 0), (16, 100)]);
        assert_eq!(pick_offset(&[a.clone(), b.clone(), c], &live), Some(8));
        // Two offsets that fit: ambiguous, no answer.
        let a2 = window(&[(8, 100), (24, 101)]);
        let b2 = window(&[(8, 101), (24, 102)]);
        assert_eq!(pick_offset(&[a2, b2], &live), None);
        // One live thread is no evidence.
        assert_eq!(pick_offset(&[a], &live), None);
    }

    #[test]
    fn giving_up_calibration_warns_once() {
        let mut t = ThreadIds {
            failed: super::CALIBRATE_TRIES - 1,
            ..ThreadIds::default()
        };
        assert!(t.warning(7, "3.9.18").is_none());
        // No process 0 to read: each try fails, and the last one warns.
        assert!(t.resolve(0, &[0x1000, 0x2000]).is_none());
        let w = t.warning(7, "3.9.18").expect("a warning");
        assert!(w.contains("process 7 (Python 3.9.18)"), "{w}");
        assert!(t.warning(7, "3.9.18").is_none());
        assert!(t.resolve(0, &[0x1000, 0x2000]).is_none());
        assert_eq!(t.failed, super::CALIBRATE_TRIES);
    }

    /// A live interpreter's threads: `threading.get_ident()` (the pthread_t) maps to
    /// `threading.get_native_id()`, also when a new thread reuses a finished one's
    /// pthread_t; prints what a resolve costs.
    #[test]
    fn pthread_ts_of_a_live_interpreter_map_to_their_os_tids() {
        const SCRIPT: &str = r#"
import sys, threading, time
def line(): print(threading.get_ident(), threading.get_native_id(), flush=True)
def worker(stop): line(); stop.wait()
line()
last = None
for cmd in sys.stdin:
    if last: last[1].set(); last[0].join(); time.sleep(0.05)
    ev = threading.Event(); t = threading.Thread(target=worker, args=(ev,))
    last = (t, ev); t.start()
"#;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut next = |stdin: &mut std::process::ChildStdin, ask: bool| {
            if ask {
                stdin.write_all(b"new\n").unwrap();
                stdin.flush().unwrap();
            }
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0], v[1] as i32)
        };
        let main = next(&mut stdin, false);
        assert_eq!(main.1, pid);
        let first = next(&mut stdin, true);
        let mut t = ThreadIds::default();
        let got = t.resolve(pid, &[main.0, first.0]).expect("calibrated");
        assert_eq!(got, vec![Some(pid), Some(first.1)]);
        eprintln!("tid offset in struct pthread: {:#x}", t.offset.unwrap());
        let n = 2000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            assert!(t.resolve(pid, &[main.0, first.0]).is_some());
        }
        let each = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
        let off = t.offset.unwrap();
        let start = std::time::Instant::now();
        for _ in 0..n {
            assert!(super::read_words(pid, &[main.0 + off, first.0 + off])[0].is_some());
        }
        let syscall = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
        let start = std::time::Instant::now();
        for _ in 0..100 {
            assert_eq!(
                super::calibrate(pid, &[main.0, first.0]),
                Some(off as usize)
            );
        }
        let calibrate = start.elapsed().as_secs_f64() * 1e6 / 100.0;
        eprintln!(
            "resolve of 2 threads: {each:.2} µs, of which the read {syscall:.2} µs; \
             a calibration {calibrate:.1} µs"
        );
        // The next thread, most often on the finished one's stack (same pthread_t).
        let second = next(&mut stdin, true);
        let got = t.resolve(pid, &[main.0, second.0]).expect("calibrated");
        assert_eq!(got, vec![Some(pid), Some(second.1)]);
        eprintln!("pthread_t reused: {}", second.0 == first.0);
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
    }
}
