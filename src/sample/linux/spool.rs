//! The drain thread's side of the crash spool (format: `profile::spool`): about twice a
//! second, and once more at the end, what the [`Processor`] added since the previous
//! append — new modules, frames, stack nodes, kernel names, on-CPU samples and closed
//! off-CPU intervals, and the processes and threads that changed — is appended to the
//! spool the session opened.
//!
//! Invariants: the processor's tables and its on-CPU sample list only grow during the
//! run, so "new" is "past the length last sent"; processes (compared in place) and
//! threads are compared with the copies last sent, and only changed ones are copied. The spool never stops
//! the sampling: the first write error ends the spool and becomes one quality warning.
//! Off-CPU intervals are appended as they close (`OffCpu::done` only grows), as
//! off-CPU samples with their state, stack and waker, and what their blocked call
//! waited on (`RawWait`) with the resources resolved so far: the resolver's table only
//! grows, but a row may be described again in place (a Unix socket once connected), so
//! rows that differ from the copies last sent are sent again. Intervals still open when
//! profmap stops are lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::process::Processor;
use crate::profile::spool::{Delta, SamplerInfo, SpoolSink, SpoolWait};
use crate::profile::{Resource, ThreadSample, Woken};
use crate::sample::{RawFrame, RawModule, RawProcess, RawStackNode, RawThread};

/// How often the drain thread appends: what a crash loses at most (besides the
/// records still in the rings and the sort buffer, ~20 ms).
const EVERY: Duration = Duration::from_millis(500);

/// The processor's append-only state, as [`Processor::spool_view`] lends it.
#[derive(Debug)]
pub(crate) struct View<'a> {
    /// Interned modules.
    pub modules: &'a [RawModule],
    /// Interned frames.
    pub frames: &'a [RawFrame],
    /// Interned stack nodes.
    pub stacks: &'a [RawStackNode],
    /// Kernel functions known by name.
    pub kernel_names: &'a [String],
    /// On-CPU samples, absolute times.
    pub samples: &'a [ThreadSample],
    /// Off-CPU intervals closed so far, absolute times.
    pub off_cpu: &'a [super::offcpu::Interval],
    /// Descriptors resolved so far.
    pub resources: &'a [Resource],
    /// Records the kernel dropped so far.
    pub lost_records: u64,
}

/// Lengths of the tables already appended.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    modules: usize,
    frames: usize,
    stacks: usize,
    kernel_names: usize,
    samples: usize,
    off_cpu: usize,
}

/// Appends to the spool from the drain thread.
#[derive(Debug)]
pub(crate) struct SpoolWriter {
    /// Where appends go; None once a write failed.
    sink: Option<Arc<SpoolSink>>,
    /// What the spool holds already.
    sent: Sent,
    /// Processes, threads and resources as last appended.
    procs: HashMap<i32, RawProcess>,
    threads: HashMap<i32, RawThread>,
    resources: Vec<Resource>,
    /// What the sampler is, until the first append carries it.
    sampler: Option<SamplerInfo>,
    /// When the last append was made.
    last: Instant,
    /// Time spent appending, and appends made.
    spent: Duration,
    appends: u64,
    /// Why the spool stopped, when a write failed.
    failed: Option<String>,
}

impl SpoolWriter {
    pub(crate) fn new(sink: Arc<SpoolSink>, sampler: SamplerInfo) -> Self {
        SpoolWriter {
            sink: Some(sink),
            sent: Sent::default(),
            procs: HashMap::new(),
            threads: HashMap::new(),
            resources: Vec::new(),
            sampler: Some(sampler),
            last: Instant::now(),
            spent: Duration::ZERO,
            appends: 0,
            failed: None,
        }
    }

    /// Append when the last append is [`EVERY`] old.
    pub(crate) fn tick(&mut self, p: &Processor) {
        if self.last.elapsed() >= EVERY {
            self.append(p);
        }
    }

    /// Append what is new in `p` now.
    pub(crate) fn append(&mut self, p: &Processor) {
        let Some(sink) = self.sink.clone() else {
            return;
        };
        let began = Instant::now();
        let (delta, samples) = self.delta(p);
        match sink.append(&delta, &samples) {
            Ok(_) => self.appends += 1,
            Err(e) => {
                self.failed = Some(e.to_string());
                self.sink = None;
            }
        }
        self.last = Instant::now();
        self.spent += began.elapsed();
    }

    /// The rows and samples added since the previous append; marks them sent.
    fn delta(&mut self, p: &Processor) -> (Delta, Vec<Woken>) {
        let v = p.spool_view();
        let s = self.sent;
        let tail = |len: usize, from: usize| from.min(len)..len;
        let (at_unix_s, at_mono_ns) = now();
        let mut delta = Delta {
            at_unix_s,
            at_mono_ns,
            sampler: self.sampler.take(),
            first_module: s.modules as u32,
            modules: v.modules[tail(v.modules.len(), s.modules)].to_vec(),
            first_frame: s.frames as u32,
            frames: v.frames[tail(v.frames.len(), s.frames)].to_vec(),
            first_stack: s.stacks as u32,
            stacks: v.stacks[tail(v.stacks.len(), s.stacks)].to_vec(),
            first_kernel_name: s.kernel_names as u32,
            kernel_names: v.kernel_names[tail(v.kernel_names.len(), s.kernel_names)].to_vec(),
            processes: self.changed_processes(p),
            threads: changed(&mut self.threads, p.raw_threads(), |t| t.tid),
            resources: changed_rows(&mut self.resources, v.resources),
            waits: Vec::new(),
            lost_records: v.lost_records,
        };
        let on_cpu = &v.samples[tail(v.samples.len(), s.samples)];
        let closed = &v.off_cpu[tail(v.off_cpu.len(), s.off_cpu)];
        delta.waits = (closed.iter().enumerate())
            .filter_map(|(k, iv)| Some(SpoolWait::new((on_cpu.len() + k) as u32, iv.wait?)))
            .collect();
        let samples = (on_cpu.iter().map(|&s| (s, None)))
            .chain(closed.iter().map(|iv| (iv.sample(), iv.waker)))
            .collect();
        self.sent = Sent {
            modules: v.modules.len(),
            frames: v.frames.len(),
            stacks: v.stacks.len(),
            kernel_names: v.kernel_names.len(),
            samples: v.samples.len(),
            off_cpu: v.off_cpu.len(),
        };
        (delta, samples)
    }

    /// The processes changed since the last append; remembered as sent.
    fn changed_processes(&mut self, p: &Processor) -> Vec<RawProcess> {
        let changed = p.changed_processes(&self.procs);
        for c in &changed {
            self.procs.insert(c.pid, c.clone());
        }
        changed
    }

    /// The quality warning of a spool that stopped early, if it did. With
    /// `PROFMAP_TIMINGS` set, what the appends cost the drain thread goes to stderr.
    pub(crate) fn finish(self) -> Option<String> {
        if std::env::var_os("PROFMAP_TIMINGS").is_some() {
            eprintln!(
                "profmap timing: crash spool {} appends, {:.1} ms in the drain thread",
                self.appends,
                self.spent.as_secs_f64() * 1e3
            );
        }
        self.failed.map(|why| {
            format!(
                "the crash spool stopped after {} appends ({why}): a crash would have lost \
                 the rest of the run (this recording is complete)",
                self.appends
            )
        })
    }
}

/// The items of `now` that differ from (or are missing in) `last`, which is updated.
fn changed<T: Clone + PartialEq>(
    last: &mut HashMap<i32, T>,
    now: Vec<T>,
    key: impl Fn(&T) -> i32,
) -> Vec<T> {
    let mut out = Vec::new();
    for item in now {
        let k = key(&item);
        if last.get(&k) != Some(&item) {
            out.push(item.clone());
            last.insert(k, item);
        }
    }
    out
}

/// The rows of `now` that are new or differ from `last` (the copies sent), with their
/// index; `last` becomes `now`.
fn changed_rows<T: Clone + PartialEq>(last: &mut Vec<T>, now: &[T]) -> Vec<(u32, T)> {
    let out: Vec<(u32, T)> = (now.iter().enumerate())
        .filter(|&(i, r)| last.get(i) != Some(r))
        .map(|(i, r)| (i as u32, r.clone()))
        .collect();
    for (i, r) in &out {
        match last.get_mut(*i as usize) {
            Some(slot) => *slot = r.clone(),
            None => last.push(r.clone()),
        }
    }
    out
}

/// Wall-clock seconds since the epoch, and CLOCK_MONOTONIC ns.
fn now() -> (f64, u64) {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(f64::NAN, |d| d.as_secs_f64());
    (unix, super::sys::monotonic_ns())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ThreadInfo;

    fn thread(tid: i32, name: &str) -> RawThread {
        ThreadInfo {
            pid: 1,
            tid,
            name: name.into(),
        }
    }

    #[test]
    fn only_new_or_changed_rows_are_sent_again() {
        let mut last = HashMap::new();
        let first = changed(&mut last, vec![thread(1, "a"), thread(2, "b")], |t| t.tid);
        assert_eq!(first.len(), 2);
        let none = changed(&mut last, vec![thread(1, "a"), thread(2, "b")], |t| t.tid);
        assert!(none.is_empty());
        let some = changed(
            &mut last,
            vec![thread(1, "a"), thread(2, "renamed"), thread(3, "c")],
            |t| t.tid,
        );
        assert_eq!(some, [thread(2, "renamed"), thread(3, "c")]);
    }

    #[test]
    fn resources_are_sent_when_new_or_described_again() {
        let mut sent = Vec::new();
        let first = changed_rows(&mut sent, &["a", "b"]);
        assert_eq!(first, [(0, "a"), (1, "b")]);
        assert!(changed_rows(&mut sent, &["a", "b"]).is_empty());
        let again = changed_rows(&mut sent, &["a", "b2", "c"]);
        assert_eq!(again, [(1, "b2"), (2, "c")]);
        assert_eq!(sent, ["a", "b2", "c"]);
    }
}
