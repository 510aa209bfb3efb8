//! Checking a recording read from disk before anything else trusts it.
//!
//! Recordings are passed around and may be damaged or hostile. Everything right of
//! PROFILE indexes `frames` and `stacks` freely and walks stacks to their root, so one
//! check here, when the recording is read, is what keeps `report` from panicking,
//! looping or printing nonsense. It refuses, naming the first problem:
//! - an index out of range: a sample's or a waker's stack, a stack node's frame or
//!   parent;
//! - a stack node whose parent is not strictly before it (symbolization interns stacks
//!   root first, so this holds for every honest recording and makes cycles impossible:
//!   every walk to the root ends within `stacks.len()` steps);
//! - counts and sizes past the limits below (so sums of them cannot overflow);
//! - figures that are NaN, infinite, negative or absurd (past [`MAX_FIGURE`]), a
//!   sampling frequency that is not positive while on-CPU samples exist;
//! - a waker on an on-CPU sample (only off-CPU intervals are woken);
//! - a wait whose sample or resource index is out of range, or waits not in strictly
//!   ascending sample order;
//! - a socket whose resource index is out of range, with more turns than
//!   `MAX_TURNS_PER_SOCKET` or than its round trips, more round trips than calls in
//!   its reply direction, or last traffic before its first; counts past the limits in
//!   socket and page-cache tables;
//! - Python stacks (see `python::validate`): frame indices out of range, merge counts
//!   that do not add up;
//! - a module whose build ID is not hex (at most [`MAX_BUILD_ID`] characters).

use std::fmt::Display;

use super::{
    Baseline, MAX_TURNS_PER_SOCKET, Recording, RunMeasurement, SampleKind, SampledProfile,
    SocketTraffic,
};

/// Most samples in one recording.
pub const MAX_SAMPLES: usize = 50_000_000;
/// Most frames, and most stack nodes, in one recording.
pub const MAX_FRAMES: usize = 10_000_000;
/// Most processes, and most threads, in one recording.
pub const MAX_PROCESSES: usize = 1_000_000;
/// Most entries of any other list (warnings, command arguments, runs, timeline points).
pub const MAX_LIST: usize = 1_000_000;
/// Longest string (a name, a path, a warning), bytes.
pub const MAX_STRING: usize = 64 * 1024;
/// Largest figure (ms, KiB/s, bytes/s, %, Hz): finite, non-negative and at most this.
pub const MAX_FIGURE: f64 = 1e15;
/// Largest count or size of a run (bytes, KiB, switches, faults, processes): 10^15.
pub const MAX_AMOUNT: u64 = 1_000_000_000_000_000;
/// Largest time or weight in ns, and largest sum of all sample weights (~31 years).
pub const MAX_NS: u64 = 1_000_000_000_000_000_000;
/// Longest build ID, hex characters (GNU build IDs are 20 bytes; others up to 64).
pub const MAX_BUILD_ID: usize = 128;
/// Highest sampling frequency, Hz.
pub const MAX_FREQUENCY_HZ: f64 = 1e6;

/// The first problem of the recording, as a sentence; Ok when there is none.
pub fn validate(rec: &Recording) -> Result<(), String> {
    let m = &rec.meta;
    text("run_id", &m.run_id)?;
    texts("command argument", &m.command)?;
    figure("started_unix_s", m.started_unix_s)?;
    text("tool_version", &m.tool_version)?;
    opt_text("hostname", m.hostname.as_deref())?;
    opt_text("kernel", m.kernel.as_deref())?;
    texts("warning", &rec.warnings)?;
    if let Some(b) = &rec.baseline {
        baseline(b)?;
    }
    if let Some(r) = &rec.profiled_run {
        run("the profiled run", r)?;
    }
    if let Some(s) = &rec.sampled {
        sampled(s)?;
    }
    Ok(())
}

fn baseline(b: &Baseline) -> Result<(), String> {
    count("baseline runs", b.runs.len(), MAX_LIST)?;
    for (i, r) in b.runs.iter().enumerate() {
        run(format_args!("baseline run {i}"), r)?;
    }
    if let Some(l) = &b.machine_load {
        figure("machine load loadavg_1m", l.loadavg_1m)?;
        figure("machine load loadavg_5m", l.loadavg_5m)?;
        figure("machine load window_ms", l.window_ms)?;
        figure("machine load others_cpu_ms", l.others_cpu_ms)?;
        count("machine load busiest processes", l.busiest.len(), MAX_LIST)?;
        for (i, p) in l.busiest.iter().enumerate() {
            text(format_args!("busy process {i} name"), &p.name)?;
            figure(format_args!("busy process {i} cpu_ms"), p.cpu_ms)?;
        }
    }
    Ok(())
}

fn run(what: impl Display, r: &RunMeasurement) -> Result<(), String> {
    for (name, v) in [
        ("wall_ms", r.wall_ms),
        ("user_ms", r.user_ms),
        ("sys_ms", r.sys_ms),
    ] {
        figure(format_args!("{what} {name}"), v)?;
    }
    for (name, v) in [
        ("max_rss_kb", r.max_rss_kb),
        ("tree_rss_peak_kb", r.tree_rss_peak_kb.unwrap_or(0)),
        (
            "memory_delta_kb",
            r.memory_delta_kb.unwrap_or(0).unsigned_abs(),
        ),
        ("read_bytes", r.read_bytes),
        ("write_bytes", r.write_bytes),
        ("rchar", r.rchar),
        ("wchar", r.wchar),
        ("voluntary_cs", r.voluntary_cs),
        ("involuntary_cs", r.involuntary_cs),
        ("minor_faults", r.minor_faults),
        ("major_faults", r.major_faults),
        ("processes", r.processes),
        ("threads_peak", r.threads_peak),
    ] {
        amount(format_args!("{what} {name}"), v)?;
    }
    text(format_args!("{what} processes_basis"), &r.processes_basis)?;
    count(format_args!("{what} disks"), r.disks.len(), MAX_LIST)?;
    for (i, d) in r.disks.iter().enumerate() {
        text(format_args!("{what} disk {i} device"), &d.device)?;
        figure(format_args!("{what} disk {i} busy_pct"), d.busy_pct)?;
        if let Some(x) = d.in_flight {
            figure(format_args!("{what} disk {i} in_flight"), x)?;
        }
    }
    count(
        format_args!("{what} timeline points"),
        r.timeline.len(),
        MAX_LIST,
    )?;
    for (i, p) in r.timeline.iter().enumerate() {
        for (name, v) in [
            ("t_ms", p.t_ms),
            ("cpu_pct", p.cpu_pct),
            ("read_bps", p.read_bps),
            ("write_bps", p.write_bps),
        ] {
            figure(format_args!("{what} timeline point {i} {name}"), v)?;
        }
        for (name, v) in [
            ("rss_kb", p.rss_kb),
            ("threads", p.threads),
            ("processes", p.processes),
        ] {
            amount(format_args!("{what} timeline point {i} {name}"), v)?;
        }
    }
    Ok(())
}

fn sampled(s: &SampledProfile) -> Result<(), String> {
    text("sampler", &s.sampler)?;
    figure("sampled wall_ms", s.wall_ms)?;
    figure("frequency_hz", s.frequency_hz)?;
    if s.frequency_hz > MAX_FREQUENCY_HZ {
        return Err(format!(
            "frequency_hz is {:?} (limit {MAX_FREQUENCY_HZ:e})",
            s.frequency_hz
        ));
    }
    let on_cpu = s.samples.iter().any(|x| x.kind == SampleKind::OnCpu);
    if on_cpu && s.frequency_hz <= 0.0 {
        return Err(format!(
            "frequency_hz is {:?} but there are on-CPU samples",
            s.frequency_hz
        ));
    }
    count("processes", s.processes.len(), MAX_PROCESSES)?;
    for (i, p) in s.processes.iter().enumerate() {
        text(format_args!("process {i} name"), &p.name)?;
        opt_text(format_args!("process {i} exe"), p.exe.as_deref())?;
    }
    count("threads", s.threads.len(), MAX_PROCESSES)?;
    for (i, t) in s.threads.iter().enumerate() {
        text(format_args!("thread {i} name"), &t.name)?;
    }
    count("frames", s.frames.len(), MAX_FRAMES)?;
    for (i, f) in s.frames.iter().enumerate() {
        text(format_args!("frame {i} function"), &f.function)?;
        opt_text(format_args!("frame {i} module"), f.module.as_deref())?;
        opt_text(format_args!("frame {i} file"), f.file.as_deref())?;
    }
    stacks(s)?;
    samples(s)?;
    waits(s)?;
    sockets(s)?;
    file_reads(s)?;
    super::python::validate(&s.python)?;
    modules(s)?;
    for (what, v) in [
        (
            "off_cpu_reused_stack_share",
            s.quality.off_cpu_reused_stack_share,
        ),
        (
            "off_cpu_late_stack_share",
            s.quality.off_cpu_late_stack_share,
        ),
        (
            "off_cpu_partial_stack_share",
            s.quality.off_cpu_partial_stack_share,
        ),
    ] {
        if let Some(v) = v
            && !(0.0..=1.0).contains(&v)
        {
            return Err(format!("{what} is {v:?} (a share lies in 0..=1)"));
        }
    }
    amount("lost_stack_copies", s.quality.lost_stack_copies)?;
    amount("reuse_checks", s.quality.reuse_checks)?;
    if s.quality.reuse_agreed > s.quality.reuse_checks {
        return Err(format!(
            "reuse_agreed {} exceeds reuse_checks {}",
            s.quality.reuse_agreed, s.quality.reuse_checks
        ));
    }
    texts("sampling warning", &s.quality.warnings)
}

fn modules(s: &SampledProfile) -> Result<(), String> {
    count("modules", s.modules.len(), MAX_LIST)?;
    for (i, m) in s.modules.iter().enumerate() {
        text(format_args!("module {i} name"), &m.name)?;
        text(format_args!("module {i} path"), &m.path)?;
        let Some(id) = &m.build_id else { continue };
        if id.is_empty() || id.len() > MAX_BUILD_ID || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "module {i} has build ID {:?}: not hex of at most {MAX_BUILD_ID} characters",
                id.chars().take(MAX_BUILD_ID + 1).collect::<String>()
            ));
        }
    }
    Ok(())
}

fn stacks(s: &SampledProfile) -> Result<(), String> {
    count("stack nodes", s.stacks.len(), MAX_FRAMES)?;
    let frames = s.frames.len();
    for (i, n) in s.stacks.iter().enumerate() {
        if n.frame as usize >= frames {
            return Err(format!(
                "stack {i} points at frame {} but there are {frames} frames",
                n.frame
            ));
        }
        if let Some(p) = n.parent
            && p as usize >= i
        {
            return Err(format!(
                "stack {i} has parent {p}: a parent must come before its children"
            ));
        }
    }
    Ok(())
}

fn samples(s: &SampledProfile) -> Result<(), String> {
    count("samples", s.samples.len(), MAX_SAMPLES)?;
    let stacks = s.stacks.len();
    let mut total: u64 = 0;
    for (i, (x, waker)) in s.samples.iter_woken().enumerate() {
        in_range(format_args!("sample {i}"), x.stack.get(), stacks)?;
        ns(format_args!("sample {i} time_ns"), x.time_ns)?;
        ns(format_args!("sample {i} weight_ns"), x.weight_ns)?;
        total = total.saturating_add(x.weight_ns);
        if let Some(w) = waker {
            if x.kind == SampleKind::OnCpu {
                return Err(format!(
                    "sample {i} is on-CPU but has a waker (only off-CPU intervals are woken)"
                ));
            }
            in_range(format_args!("the waker of sample {i}"), w.stack, stacks)?;
            ns(format_args!("the waker of sample {i} time_ns"), w.time_ns)?;
        }
    }
    ns("the sum of all sample weights", total)
}

fn waits(s: &SampledProfile) -> Result<(), String> {
    count("resources", s.resources.len(), MAX_LIST)?;
    for (i, r) in s.resources.iter().enumerate() {
        text(format_args!("resource {i} name"), &r.name)?;
        opt_text(format_args!("resource {i} local"), r.local.as_deref())?;
        opt_text(format_args!("resource {i} peer"), r.peer.as_deref())?;
        opt_text(format_args!("resource {i} service"), r.service.as_deref())?;
    }
    count("waits", s.waits.len(), MAX_SAMPLES)?;
    let (samples, resources) = (s.samples.len(), s.resources.len());
    let mut prev: Option<u32> = None;
    for (i, w) in s.waits.iter().enumerate() {
        if w.sample as usize >= samples {
            return Err(format!(
                "wait {i} points at sample {} but there are {samples} samples",
                w.sample
            ));
        }
        if prev.is_some_and(|p| p >= w.sample) {
            return Err(format!(
                "wait {i} is for sample {}: waits must be in ascending sample order",
                w.sample
            ));
        }
        prev = Some(w.sample);
        if let Some(r) = w.resource.get()
            && r as usize >= resources
        {
            return Err(format!(
                "wait {i} points at resource {r} but there are {resources} resources"
            ));
        }
    }
    Ok(())
}

fn sockets(s: &SampledProfile) -> Result<(), String> {
    count("sockets", s.sockets.len(), MAX_LIST)?;
    let resources = s.resources.len();
    for (i, x) in s.sockets.iter().enumerate() {
        if let Some(r) = x.resource
            && r as usize >= resources
        {
            return Err(format!(
                "socket {i} points at resource {r} but there are {resources} resources"
            ));
        }
        socket_counts(i, x)?;
    }
    Ok(())
}

fn socket_counts(i: usize, x: &SocketTraffic) -> Result<(), String> {
    for (name, v) in [
        ("sends", x.sends),
        ("recvs", x.recvs),
        ("bytes_sent", x.bytes_sent),
        ("bytes_received", x.bytes_received),
    ] {
        amount(format_args!("socket {i} {name}"), v)?;
    }
    ns(format_args!("socket {i} last_ns"), x.last_ns)?;
    if x.first_ns > x.last_ns {
        return Err(format!(
            "socket {i} has first_ns {} after last_ns {}",
            x.first_ns, x.last_ns
        ));
    }
    let replies = if x.sent_first { x.recvs } else { x.sends };
    if x.round_trips > replies {
        return Err(format!(
            "socket {i} has {} round trips but {replies} calls in its reply direction",
            x.round_trips
        ));
    }
    let turns = x.turns.len();
    if turns > MAX_TURNS_PER_SOCKET || turns as u64 > x.round_trips {
        return Err(format!(
            "socket {i} has {turns} turns for {} round trips (limit {MAX_TURNS_PER_SOCKET})",
            x.round_trips
        ));
    }
    for (k, t) in x.turns.iter().enumerate() {
        ns(format_args!("socket {i} turn {k} time_ns"), t.time_ns)?;
    }
    Ok(())
}

fn file_reads(s: &SampledProfile) -> Result<(), String> {
    count("file reads", s.file_reads.len(), MAX_LIST)?;
    for (i, f) in s.file_reads.iter().enumerate() {
        opt_text(format_args!("file read {i} path"), f.path.as_deref())?;
        for (name, v) in [
            ("calls", f.calls),
            ("pages_read", f.pages_read),
            ("extent_pages", f.extent_pages),
        ] {
            amount(format_args!("file read {i} {name}"), v)?;
        }
    }
    Ok(())
}

fn in_range(what: impl Display, stack: Option<u32>, stacks: usize) -> Result<(), String> {
    match stack {
        Some(st) if st as usize >= stacks => Err(format!(
            "{what} points at stack {st} but there are {stacks} stacks"
        )),
        _ => Ok(()),
    }
}

pub(super) fn count(what: impl Display, n: usize, limit: usize) -> Result<(), String> {
    if n > limit {
        return Err(format!("{n} {what} (limit {limit})"));
    }
    Ok(())
}

fn figure(what: impl Display, v: f64) -> Result<(), String> {
    if !(0.0..=MAX_FIGURE).contains(&v) {
        return Err(format!(
            "{what} is {v:?} (a figure must be finite, non-negative and at most {MAX_FIGURE:e})"
        ));
    }
    Ok(())
}

/// A count or size (bytes, KiB, switches, faults): at most [`MAX_AMOUNT`].
pub(super) fn amount(what: impl Display, v: u64) -> Result<(), String> {
    if v > MAX_AMOUNT {
        return Err(format!("{what} is {v} (limit {MAX_AMOUNT})"));
    }
    Ok(())
}

pub(super) fn ns(what: impl Display, v: u64) -> Result<(), String> {
    if v > MAX_NS {
        return Err(format!("{what} is {v} ns (limit {MAX_NS})"));
    }
    Ok(())
}

pub(super) fn text(what: impl Display, s: &str) -> Result<(), String> {
    if s.len() > MAX_STRING {
        return Err(format!(
            "{what} is {} bytes long (limit {MAX_STRING})",
            s.len()
        ));
    }
    Ok(())
}

pub(super) fn opt_text(what: impl Display, s: Option<&str>) -> Result<(), String> {
    s.map_or(Ok(()), |s| text(what, s))
}

fn texts(what: impl Display, v: &[String]) -> Result<(), String> {
    count(format_args!("{what}s"), v.len(), MAX_LIST)?;
    for (i, s) in v.iter().enumerate() {
        text(format_args!("{what} {i}"), s)?;
    }
    Ok(())
}
