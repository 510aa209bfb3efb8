//! The Firefox Profiler export (`firefox.json.gz`): the deep profile in the profiler's
//! "processed profile" format, gzipped. Open it at profiler.firefox.com ("Load a
//! profile from file").
//!
//! How it is made: `fxprof-processed-profile` (the crate samply uses) builds the
//! profile's frame — meta, categories, marker schemas, process and thread tracks,
//! counters — without any sample; each thread's samples, markers and tables are then
//! written into that frame as they are made, one thread at a time (`thread`). The
//! crate's model held ~100 bytes an off-CPU interval (its sample and marker columns):
//! 120 MB at 1.17 M samples, where this holds the samples' indices, 4 bytes each.
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
mod thread;

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::GzEncoder;
use fxprof_processed_profile::{
    ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval, ThreadHandle, Timestamp,
};
use serde_json::Value;

use self::stacks::Categories;
use super::speedscope::slices;
use super::{Exporter, Input, write_error};
use crate::error::Error;
use crate::plan::ExportFormat;
use crate::profile::SampledProfile;

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
        let mut gz =
            std::io::BufWriter::with_capacity(1 << 16, GzEncoder::new(out, Compression::new(3)));
        write_json(input, &mut gz).map_err(|e| write_error(self.format(), e))?;
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

/// Write the processed profile of `input` as JSON into `out`: the frame's entries as the
/// crate serialized them, `threads` one by one.
pub fn write_json(input: &Input, out: &mut impl Write) -> io::Result<()> {
    let p: &SampledProfile = &input.profile;
    let interval = interval_ns(p.frequency_hz);
    let threads = slices::threads(p);
    let sampled: Vec<(i32, i32)> = threads.iter().map(|t| (t.pid, t.tid)).collect();
    let mut samples: HashMap<(i32, i32), Vec<u32>> = (threads.into_iter())
        .map(|t| ((t.pid, t.tid), t.samples))
        .collect();
    let frame = serde_json::to_value(frame(input, interval, sampled.into_iter()))?;
    let Value::Object(top) = frame else {
        return Err(io::Error::other("the profile's frame is not an object"));
    };
    let cats = Categories::of_meta(&top["meta"]);
    out.write_all(b"{")?;
    for (n, (k, v)) in top.iter().enumerate() {
        if n > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, k)?;
        out.write_all(b":")?;
        let threads = v.as_array().filter(|_| k == "threads");
        let Some(threads) = threads else {
            serde_json::to_writer(&mut *out, v)?;
            continue;
        };
        out.write_all(b"[")?;
        for (j, t) in threads.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            let empty = serde_json::Map::new();
            let t = t.as_object().unwrap_or(&empty);
            let id = |key: &str| t.get(key).and_then(Value::as_str)?.parse::<i32>().ok();
            let mine = (id("pid").zip(id("tid")))
                .and_then(|k| samples.remove(&k))
                .unwrap_or_default();
            thread::write(out, input, &cats, interval, t, mine)?;
        }
        out.write_all(b"]")?;
    }
    out.write_all(b"}")
}

/// The profile without samples: meta, categories, marker schemas, a track for every
/// process and thread (those recorded and those `sampled` names), and the counters.
fn frame(input: &Input, interval: u64, sampled: impl Iterator<Item = (i32, i32)>) -> Profile {
    let p: &SampledProfile = &input.profile;
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
    stacks::register_categories(&mut profile);
    markers::register(&mut profile);
    let mut tracks = Tracks::new(&mut profile, p);
    for (pid, tid) in sampled {
        tracks.thread(&mut profile, p, pid, tid);
    }
    if let Some(run) = &input.rec.profiled_run {
        let root = tracks.root(run.pid);
        if let Some(root) = root {
            counters(&mut profile, root, &run.timeline);
        }
    }
    profile
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
        for s in p.samples.iter() {
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
