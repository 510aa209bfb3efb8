//! The evidence thread: the socket and page-cache events' own rings (one per CPU),
//! drained every millisecond, their records handled at once in time order (see
//! `evidence`).
//!
//! Why not the main drain thread: its rounds wait up to 10 ms for records and may
//! spend much longer unwinding (the first samples of a new binary load its DWARF), and
//! a short connection's descriptor, or a file read and closed at once, is gone by then.
//! Here a new socket is looked up about a millisecond after its first call. This
//! thread resolves descriptors with its own [`Resolver`]; at the end its resources are
//! merged into the main table ([`merge`]) and the sockets' indices follow.
//!
//! The 1 ms poll costs the drain thread a wake-up per millisecond; the events are not
//! set to wake it per record (a wake-up per socket call would cost the target more).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::thread::JoinHandle;

use linux_perf_event_reader::{RawData, RawEventRecord, RecordParseInfo, RecordType};

use super::evidence::{Evidence, Recorded};
use super::fdres::Resolver;
use super::sampler::map_ring;
use super::sidetp::{self, SideRole, SideSource};
use super::sys::{self, OwnedRecord, Ring};
use crate::error::Error;

const PERF_RECORD_LOST: u32 = perf_event_open_sys::bindings::PERF_RECORD_LOST;
use crate::sample::RawProfile;

/// Ring bytes per CPU: ~100 000 events/s (112 B each) for 100 ms, a starved drain
/// thread's worst seen on a loaded 2-CPU machine; all CPUs together at most
/// [`RINGS_MAX_BYTES`].
const RING_BYTES: usize = 1024 * 1024;
const RINGS_MAX_BYTES: usize = 64 * 1024 * 1024;
/// The drain's wait: 1 ms while events arrive (first sight before short connections
/// and files close), doubling to [`IDLE_POLL_MS`] while none do — a fixed 1 ms cost
/// ~900 needless wake-ups a second on a quiet target (bench/evidence.sh).
const POLL_MS: i32 = 1;
const IDLE_POLL_MS: i32 = 16;
/// Budgets (descriptor look-ups, scans) are refilled this often, as in the main thread.
const ROUND_NS: u64 = 10_000_000;

/// The opened side events, not yet drained.
pub(crate) struct Opened {
    rings: Vec<Ring>,
    extra_fds: Vec<OwnedFd>,
    roles: HashMap<u64, (SideRole, RecordParseInfo)>,
    /// What was opened on every CPU.
    pub(crate) recorded: Recorded,
}

/// Open the side events on every CPU for the tree of `pid`; what cannot be had is a
/// warning naming the tracepoint and its consequence.
/// Page-cache reads (`mm_filemap_get_pages`) only when `file_reads` is set: one event
/// per read call costs a 4 KiB `dd` from the page cache +100-175% on a loaded 2-CPU
/// machine (socket events cost only socket I/O, ~0.75 µs a call); the socket events
/// only when `sockets` is.
pub(crate) fn open(
    pid: i32,
    cpus: &[i32],
    (sockets, file_reads): (bool, bool),
    warnings: &mut Vec<String>,
) -> Opened {
    let sources = sidetp::sources();
    let wanted = [sockets, sockets, sockets, file_reads];
    // A source not wanted counts as failed, without a warning (see `outcome`).
    let mut failed: Vec<Option<String>> = sources
        .iter()
        .zip(wanted)
        .map(|(s, w)| match s {
            _ if !w => Some(NOT_WANTED.to_string()),
            Ok(_) => None,
            Err(e) => Some(e.clone()),
        })
        .collect();
    let mut o = Opened {
        rings: Vec::new(),
        extra_fds: Vec::new(),
        roles: HashMap::new(),
        recorded: Recorded::default(),
    };
    let mut bytes = RING_BYTES;
    while bytes > 64 * 1024 && bytes * cpus.len() > RINGS_MAX_BYTES {
        bytes /= 2;
    }
    for &cpu in cpus {
        let mut ring: Option<Ring> = None;
        for (src, why) in sources.iter().zip(failed.iter_mut()) {
            if let (Ok(src), None) = (src, &why) {
                *why = open_one(src, (pid, cpu, bytes), &mut ring, &mut o).err();
            }
        }
        o.rings.extend(ring);
    }
    o.recorded = outcome(&sources, &failed, warnings);
    o
}

/// Open one event on one CPU: the CPU's first makes the ring, the others write into it.
fn open_one(
    src: &SideSource,
    (pid, cpu, bytes): (i32, i32, usize),
    ring: &mut Option<Ring>,
    o: &mut Opened,
) -> Result<(), String> {
    let mut a = sidetp::attr(src);
    let fd = sys::open(&mut a, pid, cpu, -1)
        .map_err(|e| format!("perf_event_open on cpu {cpu}: {e}"))?;
    let info = sys::parse_info(&a).ok_or("no record layout for its attributes")?;
    let id = sys::event_id(&fd).ok_or("its event id cannot be read")?;
    match ring {
        Some(r) => {
            sys::set_output(&fd, r.fd())
                .map_err(|e| format!("its records cannot share the ring on cpu {cpu}: {e}"))?;
            o.extra_fds.push(fd);
        }
        None => {
            let r =
                map_ring(fd, bytes).map_err(|e| format!("mmap of its ring on cpu {cpu}: {e}"))?;
            *ring = Some(r);
        }
    }
    o.roles.insert(id, (src.role, info));
    Ok(())
}

/// Which evidence was had on every CPU, and a warning for each part that was not.
fn outcome(
    sources: &[Result<SideSource, String>],
    failed: &[Option<String>],
    warnings: &mut Vec<String>,
) -> Recorded {
    let why = |k: usize| -> Option<String> {
        let w = failed
            .get(k)
            .cloned()
            .flatten()
            .filter(|w| w != NOT_WANTED)?;
        Some(match sources.get(k).and_then(|s| s.as_ref().ok()) {
            Some(s) => format!("{}: {w}", s.name),
            None => w,
        })
    };
    let send_recv: Vec<String> = [why(0), why(1)].into_iter().flatten().collect();
    if !send_recv.is_empty() {
        warnings.push(format!(
            "sock:sock_send_length / sock:sock_recv_length could not be opened ({}): socket \
             traffic, round trips and protocols unknown",
            send_recv.join("; ")
        ));
    } else if let Some(w) = why(2) {
        warnings.push(format!(
            "sock:inet_sock_set_state could not be opened ({w}): connections the tree opened \
             are not told apart (connected is false for all)"
        ));
    }
    if let Some(w) = why(3) {
        warnings.push(format!(
            "filemap:mm_filemap_get_pages could not be opened ({w}): page-cache reads per \
             file unknown"
        ));
    }
    Recorded {
        sockets: failed
            .get(..2)
            .is_some_and(|f| f.iter().all(Option::is_none)),
        files: failed.get(3).is_some_and(Option::is_none),
    }
}

/// The "failure" of a source left out on purpose.
const NOT_WANTED: &str = "not asked for";

impl Opened {
    /// Whether no event could be opened (no thread is worth starting then).
    pub(crate) fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }
}

/// The running evidence thread.
#[derive(Debug)]
pub(crate) struct Running {
    stop: mpsc::Sender<u64>,
    thread: JoinHandle<RawProfile>,
}

impl Running {
    /// Stop it (times become relative to `t0`) and take what it found: a profile with
    /// only the socket and file tables, their resources and warnings.
    pub(crate) fn finish(self, t0: u64) -> Result<RawProfile, Error> {
        let _ = self.stop.send(t0);
        self.thread
            .join()
            .map_err(|_| Error::Tool("the socket evidence thread panicked".into()))
    }
}

pub(crate) fn spawn(opened: Opened) -> Result<Running, Error> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("profmap-evidence".into())
        .spawn(move || run(opened, rx))
        .map_err(|e| Error::Tool(format!("cannot start the evidence thread: {e}")))?;
    Ok(Running { stop: tx, thread })
}

fn run(mut o: Opened, stop: mpsc::Receiver<u64>) -> RawProfile {
    raise_priority();
    let mut evidence = Evidence::default();
    let mut fds = Resolver::default();
    let mut buf = Vec::new();
    let mut round_start = 0u64;
    let mut wait_ms = POLL_MS;
    let t0 = loop {
        match stop.try_recv() {
            Ok(t0) => break t0,
            Err(mpsc::TryRecvError::Disconnected) => break 0,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        sys::wait_readable(&o.rings, wait_ms);
        let now = sys::monotonic_ns();
        if now.saturating_sub(round_start) >= ROUND_NS {
            round_start = now;
            fds.new_round();
            evidence.new_round();
        }
        let got = drain(&mut o, &mut buf, &mut evidence, &mut fds);
        wait_ms = if got > 0 {
            POLL_MS
        } else {
            (wait_ms * 2).min(IDLE_POLL_MS)
        };
    };
    for r in &o.rings {
        sys::disable(r.fd());
    }
    for fd in &o.extra_fds {
        sys::disable(fd);
    }
    fds.new_round();
    evidence.new_round();
    let _ = drain(&mut o, &mut buf, &mut evidence, &mut fds);
    let mut raw = RawProfile::default();
    let skipped = fds.services_skipped();
    if fds.skipped > 0 {
        raw.warnings.push(format!(
            "{} socket descriptors were not looked up at their first traffic (budget \
             spent): those sockets name no resource",
            fds.skipped
        ));
    }
    evidence.finish(t0, o.recorded, skipped, &mut raw);
    raw.resources = fds.into_resources();
    raw
}

/// Copy every ring's records out and handle them in time order.
/// Drain every ring and handle its records in time order; returns how many were read.
fn drain(
    o: &mut Opened,
    buf: &mut Vec<OwnedRecord>,
    ev: &mut Evidence,
    fds: &mut Resolver,
) -> usize {
    buf.clear();
    for r in &mut o.rings {
        r.drain(buf);
    }
    let read = buf.len();
    let mut recs: Vec<(u64, usize, SideRole, RecordParseInfo)> = Vec::with_capacity(buf.len());
    for (i, rec) in buf.iter().enumerate() {
        if rec.record_type == PERF_RECORD_LOST {
            // id, then the number of records lost.
            let lost = rec.body.get(8..16).and_then(|b| b.try_into().ok());
            ev.lost += lost.map_or(0, u64::from_le_bytes);
            continue;
        }
        let Some(&(role, info)) = sys::record_id(rec).and_then(|id| o.roles.get(&id)) else {
            continue;
        };
        let raw = RawEventRecord::new(
            RecordType(rec.record_type),
            rec.misc,
            RawData::Single(&rec.body),
            info,
        );
        recs.push((raw.timestamp().unwrap_or(0), i, role, info));
    }
    recs.sort_by_key(|&(t, i, _, _)| (t, i));
    for (_, i, role, info) in recs {
        if let Some(rec) = buf.get(i) {
            ev.handle(rec, role, &info, fds);
        }
    }
    read
}

/// A new socket must be looked up before it closes: on a busy machine this thread is
/// worth a higher priority than the unwinding drain thread (best effort: only
/// privileged processes may raise it).
fn raise_priority() {
    // SAFETY: gettid and setpriority on our own thread; failure is harmless.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -10);
    }
}

/// Move the side thread's tables into the main profile: its resources join the main
/// table (an equal resource is shared) and the sockets' indices follow.
pub(crate) fn merge(raw: &mut RawProfile, side: RawProfile) {
    let mut index: HashMap<crate::profile::Resource, u32> = raw
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| (r.clone(), i as u32))
        .collect();
    let mut map = Vec::with_capacity(side.resources.len());
    for r in side.resources {
        let next = raw.resources.len() as u32;
        let id = *index.entry(r.clone()).or_insert(next);
        if id == next {
            raw.resources.push(r);
        }
        map.push(id);
    }
    raw.sockets = side.sockets;
    for s in &mut raw.sockets {
        s.resource = s.resource.and_then(|r| map.get(r as usize).copied());
    }
    raw.sockets_recorded = side.sockets_recorded;
    raw.file_reads_recorded = side.file_reads_recorded;
    raw.file_reads = side.file_reads;
    raw.warnings.extend(side.warnings);
    raw.lost_records += side.lost_records;
}
