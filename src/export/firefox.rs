//! The Firefox Profiler export (`firefox.json.gz`): the deep profile in the profiler's
//! "processed profile" format, written with `fxprof-processed-profile` (the crate samply
//! uses) and gzipped. Open it at profiler.firefox.com ("Load a profile from file").
//!
//! What goes where:
//! - Each process of the tree is a process track, each of its threads a thread track
//!   (the thread whose tid is the pid is the process's main thread).
//! - On-CPU samples are samples at their tick, with their stack and a CPU delta of their
//!   period. Off-CPU intervals are samples too, at the interval's start with a CPU delta
//!   of 0 and a stack ending in `[off-cpu: KEY]` (category `Off-CPU`), so the call tree
//!   and flame graph show wall-clock time, while the activity graph (drawn from CPU
//!   deltas) shows the thread idle. The weight type is "samples": a sample's weight is
//!   its time in sampling intervals (`meta.interval`, 1 / frequency), carried per
//!   (thread, stack) so that rounding never loses time: a function's "Total (samples)"
//!   × interval is its time.
//! - Every off-CPU interval is also an interval marker on its thread (see `markers`),
//!   named by its wait category, carrying the class, thread state, resource and the
//!   blocked stack.
//! - The profiled run's timeline (`profiled_run.timeline`) gives two counters on the
//!   run's root process: "RSS" (category Memory, bytes; the UI draws it as a memory
//!   track) and "CPU %" (category CPU, % of one core; kept in the file, not drawn by
//!   the UI, which only draws Memory, power and Bandwidth counters).
//! - Times: 0 is the start of the profiled run (sample `time_ns`, timeline `t_ms`). The
//!   profile's reference timestamp is the session's start (`meta.started_unix_s`); in a
//!   `profmap run` the baseline runs came before the profiled run, so the wall-clock
//!   dates the UI shows are early by the baseline's length.

mod markers;
mod stacks;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use fxprof_processed_profile::{
    CpuDelta, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval,
    ThreadHandle, Timestamp,
};

use self::markers::{OffCpu, OffCpuOn};
use self::stacks::{Categories, Stacks};
use super::{Exporter, Input, write_error};
use crate::error::Error;
use crate::plan::ExportFormat;
use crate::profile::{SampleKind, SampledProfile, ThreadSample};

/// The Firefox Profiler exporter.
#[derive(Debug)]
pub struct Firefox;

impl Exporter for Firefox {
    fn format(&self) -> ExportFormat {
        ExportFormat::Firefox
    }
    fn file_name(&self) -> &'static str {
        "firefox.json.gz"
    }
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<(), Error> {
        let profile = build(input);
        let mut gz =
            std::io::BufWriter::with_capacity(1 << 16, GzEncoder::new(out, Compression::new(3)));
        serde_json::to_writer(&mut gz, &profile)
            .map_err(|e| Error::Tool(format!("writing the firefox export failed: {e}")))?;
        gz.into_inner()
            .map_err(|e| write_error(self.format(), e.into_error()))?
            .finish()
            .map_err(|e| write_error(self.format(), e))?;
        Ok(())
    }
}

/// The sampling interval, ns (1 / frequency; 1 ms when the frequency is unknown).
fn interval_ns(frequency_hz: f64) -> u64 {
    if frequency_hz.is_finite() && frequency_hz > 0.0 {
        ((1e9 / frequency_hz).round() as u64).max(1)
    } else {
        1_000_000
    }
}

/// The whole processed profile of `input`.
pub fn build(input: &Input) -> Profile {
    let p: &SampledProfile = &input.profile;
    let interval = interval_ns(p.frequency_hz);
    let meta = &input.rec.meta;
    let product = meta
        .command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
        .unwrap_or_else(|| "profmap".to_string());
    let reference = ReferenceTimestamp::from_millis_since_unix_epoch(meta.started_unix_s * 1e3);
    let mut profile = Profile::new(&product, reference, SamplingInterval::from_nanos(interval));
    profile.set_os_name("Linux");
    profile.set_symbolicated(true);
    let cats = Categories::new(&mut profile);
    let mut tracks = Tracks::new(&mut profile, p);
    let mut stacks = Stacks::default();
    // Per (thread, leaf, off-CPU category): time not yet given out as a weight, ns.
    let mut carry: HashMap<(ThreadHandle, Option<u32>, bool), u64> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let thread = tracks.thread(&mut profile, p, s.pid, s.tid);
        let at = Timestamp::from_nanos_since_reference(s.time_ns);
        let off = match s.kind {
            SampleKind::OnCpu => None,
            SampleKind::OffCpu { .. } => Some(input.category(i)),
        };
        let stack = stacks.intern(&mut profile, &cats, p, thread, s.stack.get(), off);
        let left = carry
            .entry((thread, s.stack.get(), off.is_some()))
            .or_default();
        let total = *left + s.weight_ns;
        let weight = i32::try_from(total / interval).unwrap_or(i32::MAX);
        *left = total % interval;
        match s.kind {
            SampleKind::OnCpu => {
                let cpu = CpuDelta::from_nanos(s.weight_ns);
                profile.add_sample(thread, at, stack, cpu, weight);
            }
            SampleKind::OffCpu { .. } => {
                if weight > 0 {
                    profile.add_sample(thread, at, stack, CpuDelta::ZERO, weight);
                }
                off_cpu_marker(&mut profile, &mut stacks, &cats, input, thread, i, s);
            }
        }
    }
    if let Some(run) = &input.rec.profiled_run {
        let root = tracks.root(run.pid);
        if let Some(root) = root {
            counters(&mut profile, root, &run.timeline);
        }
    }
    profile
}

/// The interval marker of off-CPU sample `i`, with its blocked stack.
fn off_cpu_marker(
    profile: &mut Profile,
    stacks: &mut Stacks,
    cats: &Categories,
    input: &Input,
    thread: ThreadHandle,
    i: usize,
    s: &ThreadSample,
) {
    let SampleKind::OffCpu { state } = s.kind else {
        return;
    };
    let c = input.category(i);
    let wait = OffCpu {
        name: profile.intern_string(c.key()),
        category: cats.off_cpu,
        class: profile.intern_string(c.classification().as_str()),
        state: profile.intern_string(markers::state_name(state)),
    };
    let timing = MarkerTiming::Interval(
        Timestamp::from_nanos_since_reference(s.time_ns),
        Timestamp::from_nanos_since_reference(s.time_ns.saturating_add(s.weight_ns)),
    );
    let marker = match input.resource_name(i) {
        Some(r) => {
            let resource = profile.intern_string(r);
            profile.add_marker(thread, timing, OffCpuOn { wait, resource })
        }
        None => profile.add_marker(thread, timing, wait),
    };
    let stack = stacks.intern(profile, cats, &input.profile, thread, s.stack.get(), None);
    if s.stack.get().is_some() {
        profile.set_marker_stack(thread, marker, stack);
    }
}

/// The timeline's counters on the root process: RSS (bytes) and CPU (% of one core).
/// Counter samples are deltas; the UI sums them back into the values.
fn counters(
    profile: &mut Profile,
    root: ProcessHandle,
    timeline: &[crate::profile::TimelinePoint],
) {
    if timeline.is_empty() {
        return;
    }
    let rss = profile.add_counter(
        root,
        "RSS",
        "Memory",
        "Resident memory of the profiled process tree (polled from /proc)",
    );
    let cpu = profile.add_counter(
        root,
        "CPU %",
        "CPU",
        "CPU used by the profiled process tree, % of one core (polled from /proc)",
    );
    let (mut last_rss, mut last_cpu) = (0.0f64, 0.0f64);
    for pt in timeline {
        let at = Timestamp::from_millis_since_reference(pt.t_ms.max(0.0));
        let bytes = pt.rss_kb as f64 * 1024.0;
        profile.add_counter_sample(rss, at, bytes - last_rss, 1);
        profile.add_counter_sample(cpu, at, pt.cpu_pct - last_cpu, 1);
        last_rss = bytes;
        last_cpu = pt.cpu_pct;
    }
}

/// The process and thread tracks, made as samples name them.
struct Tracks {
    /// Process tracks by pid.
    processes: HashMap<i32, ProcessHandle>,
    /// Thread tracks by (pid, tid).
    threads: HashMap<(i32, i32), ThreadHandle>,
    /// First sample time per (pid, tid), ns.
    first: HashMap<(i32, i32), u64>,
}

impl Tracks {
    /// A track for every recorded process, each with its main thread, and for every
    /// recorded thread.
    fn new(profile: &mut Profile, p: &SampledProfile) -> Tracks {
        let mut first: HashMap<(i32, i32), u64> = HashMap::new();
        for s in &p.samples {
            let t = first.entry((s.pid, s.tid)).or_insert(s.time_ns);
            *t = (*t).min(s.time_ns);
        }
        let mut t = Tracks {
            processes: HashMap::new(),
            threads: HashMap::new(),
            first,
        };
        for pr in &p.processes {
            t.thread(profile, p, pr.pid, pr.pid);
        }
        for th in &p.threads {
            t.thread(profile, p, th.pid, th.tid);
        }
        t
    }

    /// The process track of the run's root `pid` (the first process when it has none).
    fn root(&self, pid: i32) -> Option<ProcessHandle> {
        self.processes
            .get(&pid)
            .copied()
            .or_else(|| self.processes.values().min().copied())
    }

    /// The track of thread `tid` of `pid`, made on first use.
    fn thread(
        &mut self,
        profile: &mut Profile,
        p: &SampledProfile,
        pid: i32,
        tid: i32,
    ) -> ThreadHandle {
        if let Some(t) = self.threads.get(&(pid, tid)) {
            return *t;
        }
        let start = self.first_ns(pid, tid);
        let process = self.process(profile, p, pid);
        let is_main = pid == tid;
        let handle = profile.add_thread(process, tid as u32, start, is_main);
        let name = p
            .threads
            .iter()
            .find(|t| t.pid == pid && t.tid == tid)
            .map(|t| t.name.clone())
            .or_else(|| {
                // A main thread takes its process's name.
                let pr = p.processes.iter().find(|pr| is_main && pr.pid == pid);
                pr.map(|pr| pr.name.clone())
            })
            .unwrap_or_else(|| format!("thread {tid}"));
        profile.set_thread_name(handle, &name);
        self.threads.insert((pid, tid), handle);
        handle
    }

    /// The process track of `pid`, made on first use.
    fn process(&mut self, profile: &mut Profile, p: &SampledProfile, pid: i32) -> ProcessHandle {
        if let Some(h) = self.processes.get(&pid) {
            return *h;
        }
        let start = self
            .first
            .iter()
            .filter(|((p, _), _)| *p == pid)
            .map(|(_, t)| *t)
            .min()
            .unwrap_or(0);
        let name = p
            .processes
            .iter()
            .find(|pr| pr.pid == pid)
            .map(|pr| pr.name.clone())
            .unwrap_or_else(|| format!("process {pid}"));
        let h = profile.add_process(
            &name,
            pid as u32,
            Timestamp::from_nanos_since_reference(start),
        );
        self.processes.insert(pid, h);
        h
    }

    /// The first sample time of a thread as a timestamp (0 when it has none).
    fn first_ns(&self, pid: i32, tid: i32) -> Timestamp {
        Timestamp::from_nanos_since_reference(self.first.get(&(pid, tid)).copied().unwrap_or(0))
    }
}
