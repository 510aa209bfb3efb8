//! `PerfSampler`: opens the on-CPU and switch-out events on a suspended child, drains
//! their rings in a background thread, and hands back a [`RawProfile`].
//!
//! # Events (one set per online CPU, `pid = child, cpu = N, inherit = 1`)
//!
//! `inherit` makes the kernel follow every thread and forked child; with `cpu = -1` the
//! ring cannot be mmap'd, hence one event per CPU. All are opened `disabled` with
//! `enable_on_exec`, so counting starts exactly at the target's exec.
//!
//! - *on-CPU*: `cycles` when the PMU exists, else `cpu-clock`, in frequency mode, with
//!   the kernel callchain (its user part is the frame-pointer fallback), user registers
//!   and a copy of `stack_bytes` of user stack. It also carries the side-band records:
//!   mmap/mmap2, comm (with exec), task (fork/exit) and context-switch records.
//! - *switch-out*: the `sched:sched_switch` tracepoint (raw data gives `prev_state`), or
//!   when tracefs or raw tracepoint access is missing the `context-switches` software
//!   event, as two events (see below): a stack-less one on every switch-out with the
//!   user registers IP, SP and the syscall argument registers DI, SI, DX, R10, R8 (what a
//!   blocked syscall waits on: see `sample::waiton`; DI is looked up as a descriptor in
//!   /proc as the drain thread meets it, see `fdres`), and a stack-copy one. Their
//!   records go into the on-CPU event's ring (`PERF_EVENT_IOC_SET_OUTPUT`) or, if the
//!   kernel refuses, their own ring.
//! - *wake-ups* (kernel + user scope only): the `sched:sched_waking` tracepoint,
//!   `sample_period = 1`, TID, TIME, RAW (the wakee's pid) and the kernel callchain only
//!   (no user registers or stack: they are expensive). With per-task inherited events a
//!   record is written only when the *waker* (the current task) is in the profiled tree:
//!   a wait ended from outside the tree (a timer, an idle CPU, another process) has no
//!   waker, by design. Same ring as the switch-out event.
//! - *socket and page-cache evidence* (kernel + user scope only):
//!   `sock:sock_{send,recv}_length`, `sock:inet_sock_set_state` and
//!   `filemap:mm_filemap_get_pages`, every hit, no stacks, into the main ring; their
//!   records go to rings of their own, drained every millisecond by a second thread
//!   that resolves a new socket or file at once (see `sidecar`, `evidence`).
//!
//! # Switch-outs at high rates
//!
//! Each switch-out fires a *stack-less* event (registers IP, SP and the syscall
//! arguments, `prev_state`: about 250 bytes, no callchain) into the main ring, every
//! time, and a *stack-copy* event (registers, `stack_bytes` of user stack and the kernel
//! callchain) in frequency mode into a smaller ring of its own: the kernel copies every
//! switch-out of a thread that blocks less often than about once per two ticks and
//! raises the period of a faster one until it yields about
//! [`crate::sample::SWITCH_COPY_RATE`] copies a second. The two are paired as they are
//! drained (`copies`). Durations come from the switch records in the main ring.
//! Why: the kernel's callchain costs about 1.8 µs per switch-out here whatever its depth
//! and a stack copy more; on a pipe ping-pong at ~200k switches/s, a callchain on every
//! switch-out made profmap cost 1.4× what `perf record -e sched:sched_switch -g` does,
//! without it the two cost the same (docs/benchmarks.md).
//! A switch-out without its copy (skipped by the period, or dropped by a full ring:
//! counted as `lost_stack_copies`) has its stack read through /proc when its thread
//! still blocks there as the round drains it (`copies`), else takes the stack of the
//! same thread's last copied switch-out with the same IP, SP, syscall arguments and
//! task state (`stackreuse`), else the leaf user frame alone. Durations are lost only
//! when the main ring overflows, which is counted and warned about; a wait spanning the
//! window of a loss is cut there (`offcpu`).
//!
//! # Draining
//!
//! A thread polls the rings every ≤10 ms and copies records out. Records of different
//! CPUs interleave in time, and an MMAP2 on CPU 0 must be applied before a sample on
//! CPU 1 that falls inside it, so records are buffered and time-sorted, and only those
//! older than the round's start minus a slack (20 ms) are processed; the rest wait for
//! the next round. Unwinding happens in this thread, so only addresses, not stack copies,
//! are kept in memory. Rings are sized for rate × record size × 50 ms.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::thread::JoinHandle;

use linux_perf_event_reader::{RawData, RawEventRecord, RecordParseInfo, RecordType};
use perf_event_open_sys::bindings as b;

use super::blocked;
use super::copies::{self, Pending};
use super::process::{EventRole, Processor};
use super::sidecar;
use super::sys::{self, OwnedRecord, Ring};
use super::tracefs;
use crate::error::Error;
use crate::plan::SamplePlan;
use crate::sample::RawProfile;

/// How long records wait in the sort buffer before being processed.
const SORT_SLACK_NS: u64 = 20_000_000;
const POLL_MS: i32 = 10;
/// At most this many threads are looked at through /proc per drain round (user-space
/// scope), in turn: about 1 ms of the drain thread's time per round.
pub(crate) const LOOKS_PER_ROUND: usize = 64;
/// Switch-outs (and as many wake-ups) per second and CPU the main ring is sized for:
/// their records (stack-less switch sample, switch-out and switch-in records, waking)
/// are kept whole at this rate even when the drain thread runs only every 100 ms.
const SWITCH_BUDGET: u64 = 100_000;
/// Bytes per switch-out in the main ring: the stack-less sample (ids, registers, raw
/// data: ~250 B), two switch records and a waking.
const SWITCH_RECORD_BYTES: u64 = 800;
/// Switch-out stack copies per second and CPU the stack-copy ring holds at one drain
/// every `POLL_MS`: past that rate, copies are dropped (counted) and stacks reused.
const STACK_COPY_BUDGET: u64 = 4000;
/// The stack-copy event's target rate per thread (and CPU) in frequency mode.
const COPY_FREQ: u64 = crate::sample::SWITCH_COPY_RATE;

/// A running perf_event sampler attached to a process tree.
#[derive(Debug)]
pub struct PerfSampler {
    stop: Option<mpsc::Sender<u64>>,
    thread: Option<JoinHandle<RawProfile>>,
    /// The socket and page-cache evidence thread, when its events were opened.
    side: Option<sidecar::Running>,
    /// The Python stack sampler (see `python`), when its thread could be started.
    python: Option<super::python::Running>,
    /// Human description, e.g. "perf_event cpu-clock + sched_switch, dwarf unwinding".
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnCpuEvent {
    Cycles,
    CpuClock,
}

#[derive(Debug, Clone)]
enum SwitchSource {
    Tracepoint {
        id: u64,
        prev_state: Option<(usize, usize)>,
    },
    SoftwareEvent,
}

/// Sampling scope: kernel + user, or user space only (what `perf_event_paranoid = 2`
/// allows an unprivileged user on their own processes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Full,
    UserOnly,
}

fn stack_fields(attr: &mut b::perf_event_attr, stack_bytes: u32, scope: Scope) {
    if scope == Scope::UserOnly {
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
        attr.set_exclude_callchain_kernel(1);
    }
    attr.sample_type = sys::SAMPLE_IDENTIFIER
        | sys::SAMPLE_IP
        | sys::SAMPLE_TID
        | sys::SAMPLE_TIME
        | sys::SAMPLE_CPU
        | sys::SAMPLE_PERIOD
        | sys::SAMPLE_CALLCHAIN
        | sys::SAMPLE_REGS_USER
        | sys::SAMPLE_STACK_USER;
    attr.sample_regs_user = sys::USER_REGS_MASK;
    attr.sample_stack_user = stack_bytes;
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
}

fn on_cpu_attr(
    ev: OnCpuEvent,
    freq: u32,
    stack_bytes: u32,
    wakeup: u32,
    scope: Scope,
) -> b::perf_event_attr {
    let mut attr = match ev {
        OnCpuEvent::Cycles => {
            sys::new_attr(b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64)
        }
        OnCpuEvent::CpuClock => {
            sys::new_attr(b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CPU_CLOCK as u64)
        }
    };
    stack_fields(&mut attr, stack_bytes, scope);
    attr.set_freq(1);
    attr.__bindgen_anon_1.sample_freq = u64::from(freq);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_context_switch(1);
    attr.set_watermark(1);
    attr.__bindgen_anon_2.wakeup_watermark = wakeup;
    attr
}

fn switch_attr(src: &SwitchSource, stack_bytes: u32) -> b::perf_event_attr {
    let mut attr = match src {
        SwitchSource::Tracepoint { id, .. } => sys::new_attr(b::PERF_TYPE_TRACEPOINT, *id),
        SwitchSource::SoftwareEvent => sys::new_attr(
            b::PERF_TYPE_SOFTWARE,
            b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64,
        ),
    };
    stack_fields(&mut attr, stack_bytes, Scope::Full);
    attr.sample_regs_user = sys::SWITCH_REGS_MASK;
    if stack_bytes == 0 {
        // The stack-less event, on every switch-out: registers (the call's identity and
        // arguments) and `prev_state`. No callchain: the kernel's unwinding costs about
        // 1.8 µs per switch-out here whatever its depth (measured with
        // `sample_max_stack` 6, 10, 16), 70% of what the whole event costs.
        attr.sample_type &= !(sys::SAMPLE_STACK_USER | sys::SAMPLE_CALLCHAIN);
        attr.__bindgen_anon_1.sample_period = 1;
    } else {
        // The copy event: registers, the user stack bytes and the kernel callchain, in
        // frequency mode: the kernel keeps every switch-out of a thread that switches
        // less often than about once per two ticks, and raises the period of a faster
        // one until it yields about `COPY_FREQ` copies/s, so a high switch rate costs
        // few stack copies and callchains (its stack-less partner is paired with the copy
        // in `copies`; the others borrow a stack, see `stackreuse`).
        attr.set_exclude_callchain_user(1);
        attr.set_freq(1);
        attr.__bindgen_anon_1.sample_freq = COPY_FREQ;
    }
    if stack_bytes == 0 && matches!(src, SwitchSource::Tracepoint { .. }) {
        attr.sample_type |= sys::SAMPLE_RAW;
    }
    attr
}

/// The `sched:sched_waking` tracepoint and where its wakee pid lies in the raw data.
#[derive(Debug, Clone, Copy)]
struct WakingSource {
    id: u64,
    wakee_pid: (usize, usize),
}

fn waking_source() -> Result<WakingSource, String> {
    let tp = tracefs::tracepoint("sched", "sched_waking")
        .ok_or("tracefs or its sched:sched_waking tracepoint is not available")?;
    let wakee_pid = tp.field("pid").ok_or("its format file has no pid field")?;
    Ok(WakingSource {
        id: tp.id,
        wakee_pid,
    })
}

/// Every wake-up issued by a thread of the tree: who and when, no stack. A kernel
/// callchain (to tell a wake-up from an interrupt that ran on the waker's CPU) doubled
/// the cost on a switch-heavy thread pool (+65% against +27% without, perf record of
/// sched_waking alone); the analysis tells interrupt wake-ups by the kind of wait
/// instead (timers, disks: see `analyse::critical`).
fn waking_attr(id: u64) -> b::perf_event_attr {
    sys::tracepoint_attr(id)
}

/// Where a side event is opened: the target, the CPU, and the ring it writes into.
struct Target<'a> {
    pid: i32,
    cpu: i32,
    main_ring: &'a Ring,
    ring_bytes: usize,
}

/// Open the first switch-out source of `candidates` that the kernel accepts on this
/// CPU, as two events (see the module doc, "Switch-outs at high rates"): a stack-less one
/// on every switch-out into the main ring, and one with a user stack copy into a ring of
/// its own (or, if that ring cannot be mapped, into the main ring).
fn open_switch(
    candidates: Vec<SwitchSource>,
    stack_bytes: u32,
    at: &Target<'_>,
    opened: &mut Opened,
) -> Option<SwitchSource> {
    for src in candidates {
        let prev_state = match &src {
            SwitchSource::Tracepoint { prev_state, .. } => *prev_state,
            SwitchSource::SoftwareEvent => None,
        };
        let mut lite = switch_attr(&src, 0);
        let Ok(lite_fd) = sys::open(&mut lite, at.pid, at.cpu, -1) else {
            continue;
        };
        let (Some(lite_info), Some(lite_id)) = (sys::parse_info(&lite), sys::event_id(&lite_fd))
        else {
            continue;
        };
        if sys::set_output(&lite_fd, at.main_ring.fd()).is_err() {
            continue;
        }
        opened
            .roles
            .insert(lite_id, (EventRole::SwitchLite { prev_state }, lite_info));
        opened.extra_fds.push(lite_fd);
        let mut a = switch_attr(&src, stack_bytes);
        // Never wake the drain thread for stack copies: they ride the main ring's rounds.
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = stack_ring_bytes(stack_bytes) as u32;
        if let Ok(fd) = sys::open(&mut a, at.pid, at.cpu, -1)
            && let Some(info) = sys::parse_info(&a)
        {
            if let Some(id) = sys::event_id(&fd) {
                opened
                    .roles
                    .insert(id, (EventRole::SwitchOut { prev_state }, info));
            }
            let copy = fd.try_clone();
            match map_ring(fd, stack_ring_bytes(stack_bytes)) {
                Ok(r) => opened.rings.push(r),
                Err(_) => {
                    if let Ok(fd) = copy
                        && sys::set_output(&fd, at.main_ring.fd()).is_ok()
                    {
                        opened.extra_fds.push(fd);
                    }
                }
            }
        }
        return Some(src);
    }
    None
}

/// The stack-copy ring: [`STACK_COPY_BUDGET`] copies/s for one drain round, so that at a
/// high switch rate stack copies overflow (dropped before being copied, counted) long
/// before the durations' ring does, and the target pays for few copies.
fn stack_ring_bytes(stack_bytes: u32) -> usize {
    let record = u64::from(stack_bytes) + 1536;
    let want = record * STACK_COPY_BUDGET * POLL_MS as u64 / 1000;
    want.next_power_of_two()
        .clamp(sys::page_size() as u64, 4 * 1024 * 1024) as usize
}

/// Open the waking event on this CPU, writing into the main ring (or, if the kernel
/// refuses that, a ring of its own); the error says why it could not be had.
fn open_waking(src: &WakingSource, at: &Target<'_>, opened: &mut Opened) -> Result<(), String> {
    let (pid, cpu, main_ring, ring_bytes) = (at.pid, at.cpu, at.main_ring, at.ring_bytes);
    let mut a = waking_attr(src.id);
    let fd = sys::open(&mut a, pid, cpu, -1)
        .map_err(|e| format!("perf_event_open on cpu {cpu}: {e}"))?;
    let info = sys::parse_info(&a).ok_or("no record layout for its attributes")?;
    let id = sys::event_id(&fd).ok_or("its event id cannot be read")?;
    opened.roles.insert(
        id,
        (
            EventRole::Waking {
                wakee_pid: src.wakee_pid,
            },
            info,
        ),
    );
    if sys::set_output(&fd, main_ring.fd()).is_ok() {
        opened.extra_fds.push(fd);
    } else {
        let ring = map_ring(fd, (ring_bytes / 4).max(sys::page_size()))
            .map_err(|e| format!("mmap of its ring on cpu {cpu}: {e}"))?;
        opened.rings.push(ring);
    }
    Ok(())
}

fn permission_error(err: &std::io::Error) -> Error {
    let paranoid = sys::read_int("/proc/sys/kernel/perf_event_paranoid");
    let why = match paranoid {
        Some(p) => format!(
            "{err} (kernel.perf_event_paranoid = {p}, running as uid {})",
            {
                // SAFETY: getuid cannot fail.
                unsafe { libc::getuid() }
            }
        ),
        None => err.to_string(),
    };
    let fix = match paranoid {
        // Root bypasses perf_event_paranoid: something else refuses the syscall.
        _ if sys::is_root() => "profmap runs as root, so perf_event_paranoid is not the cause: a seccomp \
            profile or container policy blocks perf_event_open — allow it (e.g. docker run \
            --cap-add PERFMON --security-opt seccomp=unconfined)"
            .to_string(),
        Some(p) if p > 1 => "sudo sysctl kernel.perf_event_paranoid=1  (or run profmap as root / with CAP_PERFMON)".to_string(),
        _ => "run profmap as root or grant it CAP_PERFMON (sudo setcap cap_perfmon,cap_sys_ptrace+ep $(which profmap)); in a container, allow perf_event_open in the seccomp profile".to_string(),
    };
    Error::Permission {
        what: "perf_event_open (sampling the target)".to_string(),
        why,
        fix,
    }
}

fn is_permission(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// Main ring bytes per CPU: 100 ms of `freq` stack samples/s plus [`SWITCH_BUDGET`]
/// switch-outs with their small records (no stack copies: those have their own ring).
fn ring_bytes(freq: u32, stack_bytes: u32, ncpu: usize) -> usize {
    let record = u64::from(stack_bytes) + 1536;
    let want = (u64::from(freq) * record + SWITCH_BUDGET * SWITCH_RECORD_BYTES) / 10;
    let page = sys::page_size() as u64;
    let mut bytes = (want.max(512 * 1024)).next_power_of_two().max(page);
    // Keep the total under 256 MiB.
    while bytes > 1024 * 1024 && bytes * ncpu as u64 > 256 * 1024 * 1024 {
        bytes /= 2;
    }
    bytes.min(16 * 1024 * 1024) as usize
}

pub(crate) fn map_ring(mut fd: OwnedFd, mut bytes: usize) -> Result<Ring, std::io::Error> {
    loop {
        match Ring::map(fd, bytes) {
            Ok(r) => return Ok(r),
            Err((e, back)) if bytes > 64 * 1024 && is_permission_or_nomem(&e) => {
                fd = back;
                bytes /= 2;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

fn is_permission_or_nomem(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM) | Some(libc::ENOMEM) | Some(libc::EACCES)
    )
}

struct Opened {
    /// The waking event opened on every CPU.
    wakers: bool,
    /// Appends to the crash spool, when the session opened one.
    spool: Option<super::spool::SpoolWriter>,

    rings: Vec<Ring>,
    extra_fds: Vec<OwnedFd>,
    roles: HashMap<u64, (EventRole, RecordParseInfo)>,
    main_info: RecordParseInfo,
}

impl PerfSampler {
    /// Open the events on the suspended child `pid` and start the drain thread.
    pub fn attach(pid: i32, plan: &SamplePlan) -> Result<PerfSampler, Error> {
        let freq = plan.frequency_hz.clamp(1, 100_000);
        let stack_bytes = (plan.stack_bytes.min(sys::MAX_STACK_BYTES) / 8) * 8;
        let cpus = sys::online_cpus();
        let ring = match plan.buffer_mib {
            Some(mib) => (u64::from(mib) << 20).next_power_of_two() as usize,
            None => ring_bytes(freq, stack_bytes, cpus.len()),
        };
        let wakeup = (ring / 4) as u32;

        // Pick the on-CPU event and the scope with the first CPU: cycles, else cpu-clock;
        // kernel + user, else (not permitted) user space only.
        let first = *cpus.first().unwrap_or(&0);
        let mut choice = None;
        let mut refused = None;
        'pick: for scope in [Scope::Full, Scope::UserOnly] {
            for ev in [OnCpuEvent::Cycles, OnCpuEvent::CpuClock] {
                let mut a = on_cpu_attr(ev, freq, stack_bytes, wakeup, scope);
                match sys::open(&mut a, pid, first, -1) {
                    Ok(fd) => {
                        choice = Some((ev, scope, a, fd));
                        break 'pick;
                    }
                    Err(e) if is_permission(&e) => {
                        refused.get_or_insert(e);
                    }
                    Err(e) if ev == OnCpuEvent::CpuClock && refused.is_none() => {
                        return Err(Error::Tool(format!(
                            "perf_event_open(cpu-clock) on pid {pid}: {e}"
                        )));
                    }
                    Err(_) => {}
                }
            }
        }
        let Some((ev, scope, attr, first_fd)) = choice else {
            let e = refused.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EACCES));
            return Err(permission_error(&e));
        };
        let main_info = sys::parse_info(&attr)
            .ok_or_else(|| Error::Tool("cannot derive the perf record layout".into()))?;

        // Pick the switch-out source (none can be had in user-only scope: the switch
        // happens in the kernel).
        let mut warnings = Vec::new();
        let mut sources = Vec::new();
        if scope == Scope::UserOnly {
            let p = sys::read_int("/proc/sys/kernel/perf_event_paranoid")
                .map_or("unknown".to_string(), |p| p.to_string());
            warnings.push(format!(
                "user-space sampling only (kernel.perf_event_paranoid = {p}, not root): no kernel \
                 frames; where blocked threads wait is read from /proc every {POLL_MS} ms, so \
                 shorter waits have a duration but no stack — fix: sudo sysctl \
                 kernel.perf_event_paranoid=1, or run as root"
            ));
            warnings.push(
                "socket traffic not recorded (its tracepoints need kernel sampling): round \
                 trips, connections and protocols are unknown, and waits on sockets are named \
                 only by the descriptor a look at /proc caught — fix: run as root, or sudo \
                 sysctl kernel.perf_event_paranoid=-1"
                    .to_string(),
            );
        }
        if scope == Scope::Full {
            match tracefs::tracepoint("sched", "sched_switch") {
                Some(tp) => sources.push(SwitchSource::Tracepoint {
                    id: tp.id,
                    prev_state: tp.field("prev_state"),
                }),
                None => warnings
                    .push("tracefs not available: off-CPU state S/D not told apart".to_string()),
            }
            sources.push(SwitchSource::SoftwareEvent);
        }

        let waking = match scope {
            Scope::Full if plan.wakeups => Some(waking_source()),
            Scope::Full | Scope::UserOnly => None,
        };
        let mut waking_failed = None;
        let mut opened = Opened {
            wakers: false,
            spool: None,

            rings: Vec::new(),
            extra_fds: Vec::new(),
            roles: HashMap::new(),
            main_info,
        };
        let mut switch_src: Option<SwitchSource> = None;
        let mut first_fd = Some(first_fd);
        for &cpu in &cpus {
            let main_fd = match first_fd.take() {
                Some(fd) => fd,
                None => {
                    let mut a = on_cpu_attr(ev, freq, stack_bytes, wakeup, scope);
                    sys::open(&mut a, pid, cpu, -1).map_err(|e| {
                        if is_permission(&e) {
                            permission_error(&e)
                        } else {
                            Error::Tool(format!("perf_event_open on cpu {cpu}: {e}"))
                        }
                    })?
                }
            };
            if let Some(id) = sys::event_id(&main_fd) {
                opened.roles.insert(id, (EventRole::OnCpu, main_info));
            }
            let main_ring = map_ring(main_fd, ring).map_err(|e| {
                if is_permission_or_nomem(&e) {
                    Error::Permission {
                        what: "mapping perf ring buffers".into(),
                        why: e.to_string(),
                        fix: "sudo sysctl kernel.perf_event_mlock_kb=2048 (or run as root)".into(),
                    }
                } else {
                    Error::Tool(format!("mmap perf ring on cpu {cpu}: {e}"))
                }
            })?;

            // Switch-out event on this CPU: the first source that opens.
            let candidates: Vec<SwitchSource> = match &switch_src {
                Some(s) => vec![s.clone()],
                None => sources.clone(),
            };
            let at = Target {
                pid,
                cpu,
                main_ring: &main_ring,
                ring_bytes: ring,
            };
            if let Some(src) = open_switch(candidates, stack_bytes, &at, &mut opened) {
                switch_src = Some(src);
            }
            if let Some(w) = &waking
                && waking_failed.is_none()
            {
                let done = w
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|w| open_waking(w, &at, &mut opened));
                waking_failed = done.err();
            }
            opened.rings.push(main_ring);
        }
        let side = match scope {
            Scope::Full => Some(sidecar::open(
                pid,
                &cpus,
                (plan.sockets, plan.file_reads),
                &mut warnings,
            )),
            Scope::UserOnly => None,
        };
        let recorded = side.as_ref().map(|s| s.recorded).unwrap_or_default();
        opened.wakers = waking.is_some() && waking_failed.is_none();
        if let Some(why) = &waking_failed {
            warnings.push(format!(
                "off-CPU waits cannot be followed to their waker: sched:sched_waking could not \
                 be opened ({why})"
            ));
        }
        let waking_name = if opened.wakers { " + sched_waking" } else { "" };
        let side_name = match (recorded.sockets, recorded.files) {
            (true, true) => " + socket and page-cache tracepoints",
            (true, false) => " + socket tracepoints",
            (false, true) => " + page-cache tracepoint",
            (false, false) => "",
        };
        let switch_name = match &switch_src {
            Some(SwitchSource::Tracepoint { .. }) => "sched_switch",
            Some(SwitchSource::SoftwareEvent) => {
                warnings.push(
                    "sched:sched_switch unavailable: switch-out stacks from the context-switches event"
                        .to_string(),
                );
                "context-switches"
            }
            None => {
                if scope == Scope::Full {
                    warnings.push(
                        "no switch-out event could be opened: off-CPU intervals have no stacks"
                            .to_string(),
                    );
                }
                "context-switch records"
            }
        };
        let ev_name = match ev {
            OnCpuEvent::Cycles => "cycles",
            OnCpuEvent::CpuClock => "cpu-clock",
        };
        let scope_note = match scope {
            Scope::Full => "",
            Scope::UserOnly => ", user space only; blocked threads read from /proc",
        };
        let description = format!(
            "perf_event {ev_name} + {switch_name}{waking_name}{side_name}, dwarf unwinding ({stack_bytes} B stack copies){scope_note}"
        );
        let nominal = match ev {
            OnCpuEvent::Cycles => Some(1_000_000_000 / u64::from(freq)),
            OnCpuEvent::CpuClock => None,
        };
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        let mut processor = Processor::new(stack_bytes, nominal, me);
        let (hint_tx, hint_rx) = mpsc::channel::<i32>();
        processor.set_python_hint(hint_tx);
        let (tx, rx) = mpsc::channel::<u64>();
        let desc = description.clone();
        opened.spool = plan.spool.clone().map(|sink| {
            let info = crate::profile::spool::SamplerInfo {
                description: description.clone(),
                frequency_hz: freq,
                wakers_recorded: opened.wakers,
            };
            super::spool::SpoolWriter::new(sink, info)
        });
        // Without switch-out stacks, blocked threads are looked at through /proc.
        let poll_blocked = (scope == Scope::UserOnly).then_some(stack_bytes as usize);
        let side = side
            .filter(|s| !s.is_empty())
            .map(sidecar::spawn)
            .transpose()?;
        let thread = std::thread::Builder::new()
            .name("profmap-perf-drain".into())
            .spawn(move || drain_loop(opened, processor, rx, desc, freq, warnings, poll_blocked))
            .map_err(|e| Error::Tool(format!("cannot start the drain thread: {e}")))?;
        let python = super::python::start(pid, hint_rx);
        Ok(PerfSampler {
            stop: Some(tx),
            thread: Some(thread),
            side,
            python,
            description,
        })
    }

    /// Stop sampling, drain what is left and return the profile. `t0_ns` is the
    /// CLOCK_MONOTONIC time the run started (sample times become relative to it).
    pub fn finish(mut self, t0_ns: u64) -> Result<RawProfile, Error> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(t0_ns);
        }
        let side = self.side.take().map(|s| s.finish(t0_ns)).transpose()?;
        let python = self.python.take().map(|p| p.finish(t0_ns));
        let thread = self
            .thread
            .take()
            .ok_or_else(|| Error::Tool("sampler already finished".into()))?;
        let mut raw = thread
            .join()
            .map_err(|_| Error::Tool("the perf drain thread panicked".into()))?;
        if let Some(side) = side {
            sidecar::merge(&mut raw, side);
        }
        if let Some((stacks, warnings)) = python {
            raw.python = stacks;
            raw.warnings.extend(warnings);
        }
        Ok(raw)
    }
}

impl Drop for PerfSampler {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(0);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(s) = self.side.take() {
            let _ = s.finish(0);
        }
        if let Some(p) = self.python.take() {
            let _ = p.finish(0);
        }
    }
}

/// Give the calling drain thread a higher priority (nice -10) when allowed (root): at
/// 100k+ switch-outs/s the main ring holds about 100 ms of records, and on a loaded
/// 2-core machine a drain thread at the target's priority was kept off the CPU that long
/// now and then, losing a burst of records (seen in 1 of 10-16 test runs). Without the
/// privilege it stays as it is.
fn raise_priority() {
    // SAFETY: plain syscalls on the calling thread; errors are ignored on purpose.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -10);
    }
}

fn drain_loop(
    mut opened: Opened,
    mut processor: Processor,
    stop: mpsc::Receiver<u64>,
    description: String,
    freq: u32,
    warnings: Vec<String>,
    poll_blocked: Option<usize>,
) -> RawProfile {
    raise_priority();
    let mut pending: Vec<Pending> = Vec::new();
    let mut looker = blocked::Looker::default();
    // Looks wait here until the records before them are processed: they are unwound
    // with the maps of their time, like samples.
    let mut looks: VecDeque<blocked::Observation> = VecDeque::new();
    let mut turn = 0usize;
    let mut seq = 0u64;
    let mut buf = Vec::new();
    let t0 = loop {
        let stop_now = match stop.try_recv() {
            Ok(t0) => Some(t0),
            Err(mpsc::TryRecvError::Disconnected) => Some(0),
            Err(mpsc::TryRecvError::Empty) => None,
        };
        if let Some(t0) = stop_now {
            break t0;
        }
        sys::wait_readable(&opened.rings, POLL_MS);
        processor.new_round();
        let round = sys::monotonic_ns();
        collect(
            &mut opened,
            &mut buf,
            &mut pending,
            &mut seq,
            &mut processor,
        );
        process_upto(
            &mut pending,
            &mut looks,
            &mut processor,
            round.saturating_sub(SORT_SLACK_NS),
        );
        if let Some(stack_bytes) = poll_blocked {
            let now = sys::monotonic_ns();
            let threads = processor.live_threads();
            let n = threads.len().min(LOOKS_PER_ROUND);
            for k in 0..n {
                let (pid, tid) = threads[(turn + k) % threads.len()];
                looks.extend(looker.look(pid, tid, stack_bytes, now));
            }
            turn = turn.wrapping_add(n);
        }
        if let Some(s) = &mut opened.spool {
            s.tick(&processor);
        }
    };
    for r in &opened.rings {
        sys::disable(r.fd());
    }
    for fd in &opened.extra_fds {
        sys::disable(fd);
    }
    let end = sys::monotonic_ns();
    processor.new_round();
    collect(
        &mut opened,
        &mut buf,
        &mut pending,
        &mut seq,
        &mut processor,
    );
    process_upto(&mut pending, &mut looks, &mut processor, u64::MAX);
    let spool = opened.spool.take().and_then(|mut s| {
        s.append(&processor);
        s.finish()
    });
    let mut raw = processor.finish(t0, end, description, freq);
    raw.warnings.splice(0..0, warnings);
    raw.warnings.extend(spool);
    raw.wakers_recorded = opened.wakers;
    raw
}

fn collect(
    opened: &mut Opened,
    buf: &mut Vec<OwnedRecord>,
    pending: &mut Vec<Pending>,
    seq: &mut u64,
    processor: &mut Processor,
) {
    let start = pending.len();
    for ring in &mut opened.rings {
        buf.clear();
        ring.drain(buf);
        for rec in buf.drain(..) {
            let (role, info) = sys::record_id(&rec)
                .and_then(|id| opened.roles.get(&id).copied())
                .unwrap_or((EventRole::OnCpu, opened.main_info));
            let time = RawEventRecord::new(
                RecordType(rec.record_type),
                rec.misc,
                RawData::Single(&rec.body),
                info,
            )
            .timestamp()
            .unwrap_or(0);
            let mut p = Pending::new(time, *seq, role, info, rec);
            p.resolved = processor.prefetch(p.id.as_ref());
            pending.push(p);
            *seq += 1;
        }
    }
    copies::attach(pending, start, processor);
}

/// Handle the records up to `watermark` in time order, with the /proc looks of that
/// time interleaved by their time.
fn process_upto(
    pending: &mut Vec<Pending>,
    looks: &mut VecDeque<blocked::Observation>,
    processor: &mut Processor,
    watermark: u64,
) {
    pending.sort_by_key(|p| (p.time, p.seq));
    let n = pending.partition_point(|p| p.time <= watermark);
    for p in pending.drain(..n) {
        deliver_looks(looks, processor, |t| t < p.time);
        if p.skip {
            continue;
        }
        processor.handle(&p.rec, p.role, &p.info, p.resolved, p.stack.as_ref());
    }
    deliver_looks(looks, processor, |t| t <= watermark);
}

/// Hand the processor the queued looks (oldest first) whose time passes `due`.
fn deliver_looks(
    looks: &mut VecDeque<blocked::Observation>,
    processor: &mut Processor,
    due: impl Fn(u64) -> bool,
) {
    while looks.front().is_some_and(|o| due(o.time)) {
        if let Some(o) = looks.pop_front() {
            processor.observe(o);
        }
    }
}
