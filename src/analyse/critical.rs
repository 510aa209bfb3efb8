//! The critical path of the session's wall time: who waited for whom.
//!
//! Summed thread time answers "where did the threads spend their time"; the user asks
//! "why did I wait this long". With several threads or processes the two differ: a
//! shell that waits 3 s for `gzip` holds 3 s of thread time, and so does `gzip`, but the
//! user waited 3 s, all of it for gzip's work. The critical path charges each moment of
//! the run's wall time to the one thread whose progress the end of the run waited for
//! (the approach of wPerf, OSDI'18, and of Trace Compass's critical-path analysis).
//!
//! # The model
//!
//! Each thread's life is a line of off-CPU intervals (from the recording, each with the
//! thread of the profiled tree whose wake-up ended it, when one did) and, between them,
//! running time (covered by its on-CPU samples). The walk starts at the end of the run
//! on the thread that was active last, and goes backwards:
//!
//! - running time is charged to the thread's on-CPU samples that cover it; time no
//!   sample covers (bursts shorter than the sampling period, as in a ping-pong) is
//!   on-CPU time of the off-CPU interval that ends the burst — its switch-out stack is
//!   where the burst ended — or, when none follows, of the thread itself (*unsampled*);
//! - an off-CPU interval ended by a wake-up from another thread of the tree (a pipe's
//!   writer, an exiting child, a thread posting a condition variable, a lock's holder
//!   releasing it) is that thread's time: the walk continues on the waker, from the
//!   wake-up back to the start of the interval; the few µs between the wake-up and the
//!   switch-in are the waiting thread's run-queue latency;
//! - an interval that nothing in the tree ended (a timer, a disk or network interrupt,
//!   another process), or whose waker is unknown, is the wait's own cause: it is
//!   charged to the off-CPU sample itself (sleep, file, network, …);
//! - time reached through a lock wait keeps the class `lock` along the chain: the
//!   holder's work is on the path *because* others queue behind its lock; and a thread's
//!   running time while another thread waits for a lock it then releases (the waiter's
//!   interval, up to the wake-up the holder issued) is `lock` too — the holder's work is
//!   serialized, even where the walk reaches it without passing through a lock wait
//!   (and so is its time preempted then: runnable, holding the lock, without a CPU);
//! - before a thread existed, the walk continues on its creator (the process's main
//!   thread, or the parent process's);
//! - a wait that timed out and was made again at once from the same place (a timed
//!   condition wait in a loop, as `xz -T` waits for its workers with a 300 ms timeout
//!   for its progress line) is one wait: when a thread of the tree ends the last of
//!   them, the walk continues on that thread from the start of the first, instead of
//!   charging the timeouts to the waiting thread.
//!
//! A wake-up issued from an interrupt that happened to run while a tree thread was on
//! the CPU is not that thread's doing. Wake-ups carry no stack (it doubled their cost),
//! so the kind of wait decides: a sleep (a timer), file I/O (a disk) or a page fault is
//! ended by hardware and stays its own cause whoever was on the CPU; where a recording
//! has the waker's kernel stack, an interrupt entry in it says the same.
//!
//! Every moment between the first and the last activity is charged exactly once, so the
//! shares of the critical path add up to 100 %. Idle pool threads and event-loop threads
//! that nobody waited for carry no critical-path time.
//!
//! The walk moves forward in time: each piece resumes no earlier than the one before it
//! (a piece handed to a waker lies before the rest of the range that handed it out, and
//! is finished first; the creator's piece before a thread existed is walked before the
//! thread's own range). So it could read the samples in the order a recording holds
//! them, block by block, instead of holding every thread's line (see
//! docs/bounded-memory.md).
//!
//! # Worked example
//!
//! `sh -c 'producer | consumer'`, 10 ms in all. sh forks both and waits in `wait4`
//! from 0.1 to 10 ms; the consumer exits at 10 ms and wakes sh. The walk starts on sh at
//! 10 ms: its wait [0.1, 10] was ended by the consumer at 9.99 → walk the consumer over
//! [0.1, 9.99]. The consumer computed during [6, 9.99] (its samples get 3.99 ms), and
//! before that blocked reading the pipe over [1, 6], woken by the producer at 6 → walk
//! the producer over [1, 6]: it computed throughout (5 ms). The consumer ran [0.2, 1]
//! (0.8 ms); before it existed ([0.1, 0.2]) sh forked it. Result: producer 5 ms, consumer
//! 4.79 ms, sh 0.2 ms + latency: 100 % of 10 ms, where summed thread time would have
//! said sh 10 ms, consumer 9.8 ms, producer 5 ms (a "bottleneck" in sh's `wait4`).

use std::collections::HashMap;

use crate::profile::{FrameKind, SampleKind, SampledProfile, Samples, WaitState, Waker};

use super::FastMap;
use super::classify::WaitCategory;
use super::seek;
use crate::packed::Packed;

/// A burst of running that no sample covered is given to the switch-out that ends it
/// when that comes within this long.
const BURST_MAX_NS: u64 = 10_000_000;

/// Threads ending this close to a process's main thread ended with it (see
/// [`end_thread`]).
const EXIT_SLACK_NS: u64 = 2_000_000;

/// Waits from one place (the same stack) with at most this much running between them
/// (waits for other threads and for a CPU in between do not count) are one wait made
/// again (see [`Walk::retried`]): room for a GIL hand-over (Python's switch interval is
/// 5 ms).
const RETRY_GAP_NS: u64 = 10_000_000;

/// Time of the critical path charged to one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// Index into `SampledProfile::samples` (u32: a recording holds at most 50 M).
    pub sample: u32,
    pub ns: u64,
    /// The category this time counts as, when not the sample's own: `lock` for time
    /// reached through a lock wait, `runqueue` for the wake-up latency of a wait.
    pub category: Option<WaitCategory>,
}

/// On-CPU time of a thread on the critical path that no sample covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsampled {
    pub pid: i32,
    pub tid: i32,
    pub ns: u64,
    /// Reached through a lock wait (counts as `lock`, else `cpu`).
    pub via_lock: bool,
}

/// The critical path of one profile, beside the charges handed to the caller one by
/// one (see [`critical_path`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CriticalPath {
    pub unsampled: Vec<Unsampled>,
    /// From the first to the last activity of the tree, ns.
    pub span_ns: u64,
    /// Part of the span no thread could be charged with (no creator known, or the
    /// walk's safety limit), ns.
    pub unattributed_ns: u64,
    /// Off-CPU time (of all threads) that was followed to its waker, ns.
    pub followed_ns: u64,
}

/// One off-CPU interval of a thread's line: 4 bytes, a handle on its sample (there is
/// one per off-CPU sample, often most of a busy program's samples: its times and its
/// wake-up are read from the profile, not copied beside it — 32 bytes when they were).
#[derive(Debug, Clone, Copy)]
struct Off {
    /// The sample's index in the low [`Off::INDEX_BITS`] bits, `WOKEN`, `LOCK` and
    /// `PREEMPTED` above them.
    sample_flags: u32,
}

impl Off {
    /// Bits of a sample index: a recording holds at most `validate::MAX_SAMPLES` (50 M);
    /// a profile with more has no critical path (see [`critical_path`]).
    const INDEX_BITS: u32 = 29;
    /// Ended by a wake-up the walk follows.
    const WOKEN: u32 = 1 << Off::INDEX_BITS;
    /// A lock wait.
    const LOCK: u32 = 2 << Off::INDEX_BITS;
    /// Preempted: runnable, waiting for a CPU.
    const PREEMPTED: u32 = 4 << Off::INDEX_BITS;

    /// When the interval began: its sample's time.
    fn start(&self, s: &Samples) -> u64 {
        s.time_ns(self.sample())
    }

    /// When the interval ended.
    fn end(&self, s: &Samples) -> u64 {
        s.end_ns(self.sample())
    }

    /// Waker tid and the wake-up time.
    fn waker(&self, s: &Samples) -> Option<(i32, u64)> {
        if self.sample_flags & Off::WOKEN == 0 {
            return None;
        }
        s.waker(self.sample()).map(|w| (w.tid, w.time_ns))
    }

    fn lock(&self) -> bool {
        self.sample_flags & Off::LOCK != 0
    }

    fn preempted(&self) -> bool {
        self.sample_flags & Off::PREEMPTED != 0
    }

    fn sample(&self) -> usize {
        (self.sample_flags & (Off::WOKEN - 1)) as usize
    }
}

/// A line's entries (sample indices, or off-CPU intervals' `sample_flags`) bit-packed:
/// one thread's samples lie close together in the profile, so an entry takes a few
/// bits (and goes to the spill file beyond the memory budget, see [`crate::packed`]).
#[derive(Debug, Default)]
struct Entries(Packed<2>);

impl Entries {
    fn push(&mut self, v: u32) {
        let index = v & (Off::WOKEN - 1);
        self.0
            .push([u64::from(index), u64::from(v >> Off::INDEX_BITS)]);
    }

    /// The entry a row [`Entries::push`] made holds.
    fn joined([index, flags]: [u64; 2]) -> u32 {
        (index | flags << Off::INDEX_BITS) as u32
    }

    fn get(&self, k: usize) -> Option<u32> {
        self.0.get(k).map(Entries::joined)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// The entries from the `k`-th on.
    fn iter_from(&self, k: usize) -> impl Iterator<Item = u32> + '_ {
        self.0.iter_from(k).map(Entries::joined)
    }

    /// Sorted by `key` as `sort_unstable_by_key` sorts them (which leaves entries already
    /// in order, as one thread's nearly always are, as they are).
    fn sort_by_key<K: Ord>(&mut self, key: impl Fn(u32) -> K) {
        if self.iter_from(0).map(&key).is_sorted() {
            return;
        }
        let mut v: Vec<u32> = self.iter_from(0).collect();
        v.sort_unstable_by_key(|&x| key(x));
        *self = Entries::default();
        for x in v {
            self.push(x);
        }
    }
}

#[derive(Debug, Default)]
struct Line {
    pid: i32,
    first: u64,
    last: u64,
    /// Times while another thread waited for a lock this one released: sorted,
    /// disjoint (start, end).
    holding: Vec<(u64, u64)>,
    /// On-CPU samples (indices), sorted by end (their time): a sample covers
    /// `[time - weight, time)`. Indices only: the profile holds the rest.
    on: Entries,
    /// Off-CPU intervals (their `sample_flags`) sorted by start.
    off: Entries,
}

impl Line {
    /// Off-CPU interval `k`.
    fn off_at(&self, k: usize) -> Option<Off> {
        (self.off.get(k)).map(|sample_flags| Off { sample_flags })
    }

    /// The off-CPU intervals from the `k`-th on.
    fn offs_from(&self, k: usize) -> impl Iterator<Item = Off> + '_ {
        (self.off.iter_from(k)).map(|sample_flags| Off { sample_flags })
    }

    /// The last off-CPU interval.
    fn last_off(&self) -> Option<Off> {
        self.off_at(self.off.len().checked_sub(1)?)
    }

    /// The first off-CPU interval from `hint` on (searched from it) for which `pred`
    /// is false.
    fn off_search(&self, hint: usize, pred: impl Fn(Off) -> bool) -> usize {
        seek::partition_at(self.off.len(), hint, |k| self.off_at(k).is_some_and(&pred))
    }
}

/// One piece of work: charge `[lo, hi)` of thread `tid`'s line.
#[derive(Debug, Clone, Copy)]
struct Item {
    tid: i32,
    lo: u64,
    hi: u64,
    via_lock: bool,
    /// How many items up the walk (parent, grandparent, …) had this very range: see
    /// [`Walk::begin`].
    same: u32,
}

/// An item under way: its thread's line walked up to `t`, its next off-CPU interval
/// `next`. The walk keeps items' pieces of work on a stack and finishes a piece before
/// going on with the item that handed it out, so the stack holds the depth of the walk,
/// not every interval of the thread it started on.
#[derive(Debug, Clone, Copy)]
struct Frame {
    item: Item,
    /// The range left after cutting what lies outside the thread's life.
    lo: u64,
    hi: u64,
    t: u64,
    next: usize,
}

#[derive(Debug, Clone, Copy)]
enum Work {
    Start(Item),
    Resume(Frame),
}

// Where each piece of the walk resumed, in order (tests check the walk moves forward
// in time).
#[cfg(test)]
thread_local! {
    static RESUMED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// True when a waker's kernel stack shows the wake-up was issued from a hardware
/// interrupt (a timer, a disk or network completion), not by the thread it interrupted.
pub fn is_interrupt_wake(p: &SampledProfile, stack: Option<u32>) -> bool {
    let Some(leaf) = stack else { return false };
    p.stack_frames(leaf)
        .iter()
        .filter(|f| f.kind == FrameKind::Kernel)
        .any(|f| {
            let n = f.function.as_str();
            n.starts_with("asm_sysvec")
                || n.starts_with("sysvec_")
                || n.starts_with("__sysvec_")
                || n.starts_with("asm_common_interrupt")
                || n == "common_interrupt"
                || n.starts_with("irq_exit")
                || n.starts_with("__irq_exit")
                || n == "hrtimer_interrupt"
                || n == "hrtimer_wakeup"
                || n.starts_with("handle_irq")
                || n.starts_with("handle_edge_irq")
                || n.starts_with("handle_fasteoi")
        })
}

/// The thread of the tree (tid) whose wake-up ended off-CPU sample `i` and when, if the
/// wait is one a thread ends: not a self-wake, not a wait ended by hardware (a sleep's
/// timer, a disk, a page fault: whoever was on the CPU), not from an interrupt.
pub fn followed_waker(p: &SampledProfile, i: usize, category: WaitCategory) -> Option<(i32, u64)> {
    let w = followed(p, i, category)?;
    Some((w.tid, w.time_ns))
}

/// The wake-up of [`followed_waker`].
fn followed(p: &SampledProfile, i: usize, category: WaitCategory) -> Option<Waker> {
    let (s, w) = p.samples.woken(i)?;
    let w = w?;
    let hardware = ended_by_hardware(category);
    (w.tid != s.tid && !hardware && !is_interrupt_wake(p, w.stack)).then_some(w)
}

/// A wait of this kind is ended by hardware (a sleep's timer, a disk, a page fault),
/// whoever was on the CPU then: never by the thread whose wake-up is recorded.
fn ended_by_hardware(category: WaitCategory) -> bool {
    matches!(
        category,
        WaitCategory::Sleep | WaitCategory::File | WaitCategory::PageFault
    )
}

/// The critical path, or `None` when the recording has no wake-up records (nothing is
/// known about who woke whom), no samples, or more than a recording may hold.
/// `category` gives each sample's category; `charge` receives the time charged to
/// samples as the walk finds it (consecutive charges to one sample in one category
/// merged), so that no table per sample is kept here.
pub fn critical_path(
    p: &SampledProfile,
    category: &dyn Fn(usize) -> WaitCategory,
    charge: &mut dyn FnMut(Credit),
) -> Option<CriticalPath> {
    if !p.wakers_recorded || p.samples.is_empty() || p.samples.len() >= Off::WOKEN as usize {
        return None;
    }
    let lines = timelines(p, category);
    let start_tid = end_thread(&lines, &p.samples)?;
    let first = lines.values().map(|l| l.first).min()?;
    let last = lines[&start_tid].last;
    let mut walk = Walk {
        p,
        lines: &lines,
        category,
        charge,
        pending: None,
        cp: CriticalPath {
            span_ns: last.saturating_sub(first),
            ..Default::default()
        },
        unsampled: HashMap::new(),
        retries: FastMap::default(),
        sites: FastMap::default(),
        hints: FastMap::default(),
        silent: (p.threads.iter())
            .filter(|t| !lines.contains_key(&t.tid))
            .map(|t| (t.tid, t.pid))
            .collect(),
        work: vec![Work::Start(Item {
            tid: start_tid,
            lo: first,
            hi: last,
            via_lock: false,
            same: 0,
        })],
    };
    walk.run();
    // Waits followed to their waker: those a thread of the tree ended, and the retries
    // of a timed wait that one ended (see `Walk::retried`).
    let s = &p.samples;
    let mut followed_ns = 0;
    for (&tid, line) in &lines {
        for (k, o) in line.offs_from(0).enumerate() {
            if o.waker(s).is_some() || walk.retried(line, tid, k).is_some() {
                followed_ns += o.end(s) - o.start(s);
            }
        }
    }
    let mut cp = walk.cp;
    cp.followed_ns = followed_ns;
    let mut unsampled: Vec<Unsampled> = walk
        .unsampled
        .into_iter()
        .map(|((pid, tid, via_lock), ns)| Unsampled {
            pid,
            tid,
            ns,
            via_lock,
        })
        .collect();
    unsampled.sort_by_key(|u| (u.pid, u.tid, u.via_lock));
    cp.unsampled = unsampled;
    Some(cp)
}

/// The thread the walk starts on: the one active last — unless it slept until the end
/// and a process's main thread ended within [`EXIT_SLACK_NS`] before it. When a process
/// exits, its sleeping threads are woken only to die, a few µs after the thread that
/// ended it (a Go runtime's monitor thread in its `usleep` would otherwise be the end of
/// the run, and its sleep the whole path).
fn end_thread(lines: &FastMap<i32, Line>, s: &Samples) -> Option<i32> {
    let (&last_tid, last) = lines
        .iter()
        .max_by_key(|(tid, l)| (l.last, std::cmp::Reverse(**tid)))?;
    let asleep_at_end = last.last_off().is_some_and(|o| o.end(s) >= last.last);
    if last_tid == last.pid || !asleep_at_end {
        return Some(last_tid);
    }
    let main = lines
        .iter()
        .filter(|(tid, l)| **tid == l.pid && l.last.saturating_add(EXIT_SLACK_NS) >= last.last)
        .max_by_key(|(tid, l)| (l.last, std::cmp::Reverse(**tid)));
    Some(main.map_or(last_tid, |(&tid, _)| tid))
}

/// Each thread's line, from its samples.
fn timelines(p: &SampledProfile, category: &dyn Fn(usize) -> WaitCategory) -> FastMap<i32, Line> {
    let mut lines: FastMap<i32, Line> = FastMap::default();
    // Per waker thread: the first and last wake-up it issued.
    let mut wakes: HashMap<i32, (u64, u64)> = HashMap::new();
    let mut held: HashMap<i32, Vec<(u64, u64)>> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let (start, end) = match s.kind {
            SampleKind::OnCpu => (s.time_ns.saturating_sub(s.weight_ns), s.time_ns),
            SampleKind::OffCpu { .. } => (s.time_ns, s.time_ns.saturating_add(s.weight_ns)),
        };
        let line = lines.entry(s.tid).or_insert_with(|| Line {
            pid: s.pid,
            first: start,
            last: end,
            ..Default::default()
        });
        line.first = line.first.min(start);
        line.last = line.last.max(end);
        match s.kind {
            // Indices fit: a recording holds at most `validate::MAX_SAMPLES` (50 M).
            SampleKind::OnCpu => line.on.push(i as u32),
            SampleKind::OffCpu { .. } => {
                let cat = category(i);
                let waker = followed(p, i, cat).map(|w| (w.tid, w.time_ns));
                let lock = cat == WaitCategory::Lock;
                if let Some((w, t)) = waker {
                    let e = wakes.entry(w).or_insert((t, t));
                    *e = (e.0.min(t), e.1.max(t));
                    if lock && t > start {
                        held.entry(w).or_default().push((start, t));
                    }
                }
                let flag = |on: bool, f: u32| if on { f } else { 0 };
                // Below `Off::WOKEN`: `critical_path` refuses larger profiles.
                line.off.push(
                    i as u32
                        | flag(waker.is_some(), Off::WOKEN)
                        | flag(lock, Off::LOCK)
                        | flag(cat == WaitCategory::Runqueue, Off::PREEMPTED),
                );
            }
        }
    }
    // A waker was running when it issued the wake-up, sampled or not.
    for (tid, (first, last)) in wakes {
        if let Some(l) = lines.get_mut(&tid) {
            l.last = l.last.max(last);
            l.first = l.first.min(first);
        }
    }
    for (tid, mut spans) in held {
        if let Some(l) = lines.get_mut(&tid) {
            spans.sort_unstable();
            for (s, e) in spans {
                match l.holding.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => l.holding.push((s, e)),
                }
            }
        }
    }
    for l in lines.values_mut() {
        l.on.sort_by_key(|i| p.samples.time_ns(i as usize));
        l.off
            .sort_by_key(|sample_flags| Off { sample_flags }.start(&p.samples));
    }
    lines
}

/// How much of `[a, b)` lies in the sorted, disjoint spans.
fn overlap(spans: &[(u64, u64)], a: u64, b: u64) -> u64 {
    let from = spans.partition_point(|&(_, e)| e <= a);
    spans[from..]
        .iter()
        .take_while(|&&(s, _)| s < b)
        .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
        .sum()
}

struct Walk<'a, 'c> {
    p: &'a SampledProfile,
    lines: &'a FastMap<i32, Line>,
    category: &'c dyn Fn(usize) -> WaitCategory,
    charge: &'c mut dyn FnMut(Credit),
    /// The last charge, not yet handed out: the next one may add to it.
    pending: Option<Credit>,
    cp: CriticalPath,
    unsampled: HashMap<(i32, i32, bool), u64>,
    /// Per thread and wait site, the last run of retried waits looked at: its off-CPU
    /// intervals `from..=to` and what ends it (see [`Walk::retried`]).
    retries: FastMap<(i32, u32), (usize, usize, Option<Retry>)>,
    /// Each stack's wait site (see [`Walk::site`]).
    sites: FastMap<u32, Option<u32>>,
    /// Threads of the tree with no line (no sample at all: they ran briefly and never
    /// blocked), by tid: their pid.
    silent: FastMap<i32, i32>,
    /// Per thread, where the last searches of its line ended (see `seek`).
    hints: FastMap<i32, Hints>,
    work: Vec<Work>,
}

/// Where the last searches of a thread's line ended: the walk moves forward in time,
/// so the next answer is near.
#[derive(Debug, Clone, Copy, Default)]
struct Hints {
    /// In its on-CPU samples.
    on: usize,
    /// In its off-CPU intervals, by end.
    off_end: usize,
    /// In its off-CPU intervals, by start.
    off_start: usize,
}

/// The wait that ends a run of retried waits: a thread of the tree ended it.
#[derive(Debug, Clone, Copy)]
struct Retry {
    /// Its index in the thread's off-CPU intervals.
    index: usize,
    sample: usize,
    waker: i32,
    wake_ns: u64,
    end_ns: u64,
    lock: bool,
}

impl Walk<'_, '_> {
    fn run(&mut self) {
        // Every item charges a disjoint piece of the span, so the number of items is
        // bounded by the number of intervals; the limit only guards against records
        // whose times contradict each other.
        let limit = 4 * self.p.samples.len() + 1024;
        let mut done = 0usize;
        while let Some(w) = self.work.pop() {
            let frame = match w {
                Work::Start(item) => {
                    done += 1;
                    if done > limit {
                        self.cp.unattributed_ns += item.hi.saturating_sub(item.lo);
                        continue;
                    }
                    match self.begin(item) {
                        Some(f) => f,
                        None => continue,
                    }
                }
                Work::Resume(f) => f,
            };
            self.resume(frame);
        }
        if let Some(c) = self.pending.take() {
            (self.charge)(c);
        }
    }

    /// A piece of work handed out by `parent`: `same` counts the items up the walk
    /// with this very range.
    fn child(parent: &Item, tid: i32, lo: u64, hi: u64, via_lock: bool) -> Work {
        let same = if (lo, hi) == (parent.lo, parent.hi) {
            parent.same + 1
        } else {
            0
        };
        Work::Start(Item {
            tid,
            lo,
            hi,
            via_lock,
            same,
        })
    }

    /// Start an item: cut what lies outside its thread's life (handing the time before
    /// the thread existed to its creator); `None` when nothing is left.
    fn begin(&mut self, item: Item) -> Option<Frame> {
        let Item { tid, lo, hi, .. } = item;
        let Some(line) = self.lines.get(&tid) else {
            self.cp.unattributed_ns += hi.saturating_sub(lo);
            return None;
        };
        // Records that contradict each other (a wait ended by a thread that, going back,
        // leads to the waiting thread itself before either existed) would send the walk
        // round the same piece again: the second time, it is charged to no one. Pieces
        // handed out by one item are disjoint and lie within its range, so a piece can
        // come back only through a chain of items that each handed its whole range on
        // (charging nothing): once that chain is longer than there are threads, one of
        // them is back.
        if item.same as usize >= self.lines.len() {
            self.cp.unattributed_ns += hi.saturating_sub(lo);
            return None;
        }
        let (mut lo, mut hi) = (lo, hi);
        // The piece before the thread existed, walked before the thread's own range (so
        // that the walk moves forward in time).
        let mut before = None;
        if lo < line.first {
            let cut = hi.min(line.first);
            match self.creator(tid, line.pid) {
                Some(c) => {
                    // From where the creator waits for this very thread (a vfork, a fork
                    // then wait4), the thread existed already, starting up unsampled.
                    let from = self.waits_for(c, tid, lo, cut).unwrap_or(cut);
                    if from > lo {
                        before = Some(Walk::child(&item, c, lo, from, item.via_lock));
                    }
                    if cut > from {
                        *self
                            .unsampled
                            .entry((line.pid, tid, item.via_lock))
                            .or_default() += cut - from;
                    }
                }
                None => self.cp.unattributed_ns += cut - lo,
            }
            lo = cut;
        }
        if hi > line.last {
            let cut = lo.max(line.last);
            self.cp.unattributed_ns += hi - cut;
            hi = cut;
        }
        let s = &self.p.samples;
        let hint = self.hints.entry(tid).or_default();
        let frame = (lo < hi).then(|| {
            hint.off_end = line.off_search(hint.off_end, |o| o.end(s) <= lo);
            Frame {
                item,
                lo,
                hi,
                t: lo,
                next: hint.off_end,
            }
        });
        match before {
            Some(w) => {
                if let Some(f) = frame {
                    self.work.push(Work::Resume(f));
                }
                self.work.push(w);
                None
            }
            None => frame,
        }
    }

    /// Walk an item's line on from where it stopped, up to the next piece it hands to
    /// another thread (then put back on the stack under that piece) or to its end.
    fn resume(&mut self, mut f: Frame) {
        #[cfg(test)]
        RESUMED.with(|r| r.borrow_mut().push(f.t));
        let lines = self.lines;
        let Some(line) = lines.get(&f.item.tid) else {
            return;
        };
        let (tid, via_lock, hi) = (f.item.tid, f.item.via_lock, f.hi);
        let s = &self.p.samples;
        while let Some(o) = line.off_at(f.next) {
            let (o_start, o_end) = (o.start(s), o.end(s));
            if o_start >= hi {
                break;
            }
            f.next += 1;
            let start = o_start.max(f.lo);
            if start > f.t {
                let ends_here = (o_start == start).then_some(o.sample());
                self.running(line, tid, (f.t, start), ends_here, via_lock);
            }
            // Intervals of one thread may overlap a little (records of one switch seen
            // twice): never charge a moment twice.
            let (a, b) = (start.max(f.t), o_end.min(hi));
            f.t = f.t.max(b);
            if b > a
                && o.waker(s).is_none()
                && let Some(r) = self.retried(line, tid, f.next - 1)
                && r.wake_ns > a
                // Handing the whole range on makes no progress: threads idle in timed
                // waits that end each other's (a runtime's idle workers) would pass it
                // back and forth. Those waits are their own.
                && (a, r.wake_ns.min(hi)) != (f.item.lo, f.item.hi)
            {
                // The run waited for the thread that ended the last retry, from here.
                let (mid, end) = (r.wake_ns.min(hi), r.end_ns.min(hi));
                if end > mid {
                    self.credit(r.sample, end - mid, Some(WaitCategory::Runqueue));
                }
                f.t = f.t.max(mid).max(end);
                f.next = r.index + 1;
                let piece = Walk::child(&f.item, r.waker, a, mid, via_lock || r.lock);
                self.work.push(Work::Resume(f));
                self.work.push(piece);
                return;
            }
            if b > a
                && let Some((w, lo, hi)) = self.wait(line, tid, &o, (a, b), via_lock)
            {
                let piece = Walk::child(&f.item, w, lo, hi, via_lock || o.lock());
                self.work.push(Work::Resume(f));
                self.work.push(piece);
                return;
            }
        }
        if hi > f.t {
            // The burst goes on past `hi`: it ends at the thread's next switch-out.
            let hint = self.hints.entry(tid).or_default();
            hint.off_start = line.off_search(hint.off_start, |o| o.start(s) < hi);
            let next = hint.off_start;
            let ends = line
                .off_at(next)
                .filter(|o| o.start(s) - hi <= BURST_MAX_NS)
                .map(|o| o.sample());
            self.running(line, tid, (f.t, hi), ends, via_lock);
        }
    }

    /// When off-CPU interval `k` of thread `tid`'s line, ended by no thread of the tree,
    /// begins a run of waits from the same stack with at most [`RETRY_GAP_NS`] of running
    /// between them (a timed wait that timed out and was made again; other waits between
    /// them are part of it) whose last wait a thread of the tree ended: that wait. When
    /// the last retry timed out too, a wait after it that a thread ended ends the run.
    /// Runs are remembered per thread and site, so a long one is scanned once however
    /// many pieces of the walk fall in it.
    fn retried(&mut self, line: &Line, tid: i32, k: usize) -> Option<Retry> {
        let first = line.off_at(k)?;
        if !self.retriable(&first) {
            return None;
        }
        let site = self.site(first.sample())?;
        if let Some(&(from, to, r)) = self.retries.get(&(tid, site))
            && (from..=to).contains(&k)
        {
            return r;
        }
        let s = &self.p.samples;
        let ended_by = |j: usize, o: &Off| {
            let (waker, wake_ns) = o.waker(s)?;
            (waker != tid && self.lines.contains_key(&waker)).then(|| Retry {
                index: j,
                sample: o.sample(),
                waker,
                wake_ns,
                end_ns: o.end(s),
                lock: o.lock(),
            })
        };
        let mut end = first.end(s);
        let (mut j, mut retries) = (k + 1, 0);
        let mut found = None;
        // The last wait between retries that a thread ended, since the last retry.
        let mut between = None;
        while let Some(o) = line.off_at(j) {
            if o.start(s) > end.saturating_add(RETRY_GAP_NS) {
                break;
            }
            // Other waits between two from the site belong to the retry: Python's join
            // with a timeout waits for the GIL before it waits again. The gap is the
            // time the thread ran: a wait for another thread or for a CPU between two
            // retries is not (two GIL timeouts and a preemption on a loaded machine
            // took the next join wait 10.3 ms past the last one's end). A wait ended by
            // hardware (a disk read) is work of the thread's own: it does not bridge.
            let retriable = self.retriable(&o);
            if !retriable || self.site(o.sample()) != Some(site) {
                if retriable {
                    between = ended_by(j, &o).or(between);
                }
                if retriable || o.preempted() {
                    end = end.max(o.end(s));
                }
                j += 1;
                continue;
            }
            if o.waker(s).is_some() {
                found = ended_by(j, &o);
                break;
            }
            (retries, between) = (retries + 1, None);
            end = end.max(o.end(s));
            j += 1;
        }
        // The last retry timed out too, and a wait after it that a thread ended let the
        // loop stop: Python's last `join(timeout)` times out, the worker's exit hands
        // over the GIL, and `is_alive()` is false. That thread is what the loop waited
        // for; a single timed wait (no retry: perhaps a deliberate delay) is not.
        if found.is_none() && retries > 0 {
            found = between;
        }
        self.retries.insert((tid, site), (k, j, found));
        found
    }

    /// Whether an off-CPU interval can be a retried wait: a timed wait sleeps
    /// interruptibly on something a thread ends (a condition, a lock, a pipe, a socket);
    /// not a wait ended by hardware (a sleep's timer, a disk), an uninterruptible one (a
    /// kernel lock, I/O) nor a preemption.
    fn retriable(&self, o: &Off) -> bool {
        let sleeping = self.p.samples.at(o.sample()).kind
            == (SampleKind::OffCpu {
                state: WaitState::Sleeping,
            });
        sleeping && !ended_by_hardware((self.category)(o.sample()))
    }

    /// Where in the program sample `i`'s wait was made: the deepest frame of its stack
    /// that is not the kernel's (the kernel's frames at a switch-out vary from one wait
    /// to the next: `futex_do_wait` or `__schedule` on top). Kept per stack.
    fn site(&mut self, i: usize) -> Option<u32> {
        let leaf = self.p.samples.at(i).stack.get()?;
        if let Some(&site) = self.sites.get(&leaf) {
            return site;
        }
        let (stacks, frames) = (&self.p.stacks, &self.p.frames);
        let mut cur = Some(leaf);
        let mut site = None;
        // Bounded however the recording's parents point.
        for _ in 0..stacks.len() {
            let Some(node) = cur.and_then(|n| stacks.get(n as usize)) else {
                break;
            };
            let kernel = frames
                .get(node.frame as usize)
                .is_some_and(|f| f.kind == FrameKind::Kernel);
            if !kernel {
                site = cur;
                break;
            }
            cur = node.parent;
        }
        self.sites.insert(leaf, site);
        site
    }

    /// `[a, b)` of an off-CPU interval `o` of thread `tid`; returns the piece to walk
    /// on the thread that ended the wait (its tid and range), if there is one.
    fn wait(
        &mut self,
        line: &Line,
        tid: i32,
        o: &Off,
        (a, b): (u64, u64),
        via_lock: bool,
    ) -> Option<(i32, u64, u64)> {
        // Ended by a thread of the tree: the wait is its time up to the wake-up. A thread
        // with no sample (it started, ran briefly and ended without ever blocking: a
        // Python server's handler thread, waited for by `Thread.start`, answering its
        // request in under a sampling period) holds it as its unsampled time.
        if let Some((w, wt)) = o.waker(&self.p.samples)
            && w != tid
            && (self.lines.contains_key(&w) || self.silent.contains_key(&w))
        {
            let mid = wt.clamp(a, b);
            if b > mid {
                self.credit(o.sample(), b - mid, Some(WaitCategory::Runqueue));
            }
            if let Some(&pid) = self.silent.get(&w) {
                if mid > a {
                    let via = via_lock || o.lock();
                    *self.unsampled.entry((pid, w, via)).or_default() += mid - a;
                }
                return None;
            }
            return (mid > a).then_some((w, a, mid));
        }
        // Preempted while others queue for a lock it holds: serialized, so Lock.
        let held = if o.preempted() && !via_lock {
            overlap(&line.holding, a, b)
        } else {
            0
        };
        if held > 0 {
            self.credit(o.sample(), held, Some(WaitCategory::Lock));
        }
        if b - a > held {
            let cat = via_lock.then_some(WaitCategory::Lock);
            self.credit(o.sample(), b - a - held, cat);
        }
        None
    }

    /// `[a, b)` of thread `tid` running: its on-CPU samples that cover it. The part
    /// while another thread waited for a lock this one held is `lock`. What no sample
    /// covers (bursts shorter than the sampling period) goes to the off-CPU interval
    /// that ends the burst, `ends`, as on-CPU time — its switch-out stack is where the
    /// burst ended — or, without one, to the thread as unsampled time.
    fn running(
        &mut self,
        line: &Line,
        tid: i32,
        (a, b): (u64, u64),
        ends: Option<usize>,
        via_lock: bool,
    ) {
        let cat = via_lock.then_some(WaitCategory::Lock);
        let mut covered = 0;
        let mut covered_lock = 0;
        let samples = &self.p.samples;
        let hint = self.hints.entry(tid).or_default();
        hint.on = seek::partition_at(line.on.len(), hint.on, |k| {
            (line.on.get(k)).is_some_and(|i| samples.time_ns(i as usize) <= a)
        });
        // Entry by entry (a piece holds a few samples: unpacking their whole block
        // would cost more than reading them).
        for i in (hint.on..).map_while(|k| line.on.get(k)) {
            let i = i as usize;
            let x = samples.at(i);
            let (e, s) = (x.time_ns, x.time_ns.saturating_sub(x.weight_ns));
            if s >= b {
                break;
            }
            // Periods of neighbouring samples may overlap a little: never charge more
            // than the piece.
            let overlap = e
                .min(b)
                .saturating_sub(s.max(a))
                .min((b - a).saturating_sub(covered));
            if overlap > 0 {
                covered += overlap;
                let x = s.max(a);
                let held = if via_lock {
                    0
                } else {
                    self::overlap(&line.holding, x, x + overlap)
                };
                covered_lock += held;
                if held > 0 {
                    self.credit(i, held, Some(WaitCategory::Lock));
                }
                if overlap > held {
                    self.credit(i, overlap - held, cat);
                }
            }
        }
        let rest = (b - a).saturating_sub(covered);
        if rest > 0 {
            let held = if via_lock {
                0
            } else {
                self::overlap(&line.holding, a, b)
                    .saturating_sub(covered_lock)
                    .min(rest)
            };
            let own = if via_lock {
                WaitCategory::Lock
            } else {
                WaitCategory::Cpu
            };
            match ends {
                Some(i) => {
                    if held > 0 {
                        self.credit(i, held, Some(WaitCategory::Lock));
                    }
                    if rest > held {
                        self.credit(i, rest - held, Some(own));
                    }
                }
                None => {
                    if held > 0 {
                        *self.unsampled.entry((line.pid, tid, true)).or_default() += held;
                    }
                    if rest > held {
                        *self.unsampled.entry((line.pid, tid, via_lock)).or_default() +=
                            rest - held;
                    }
                }
            }
        }
    }

    fn credit(&mut self, sample: usize, ns: u64, category: Option<WaitCategory>) {
        let sample = sample as u32;
        match &mut self.pending {
            Some(c) if c.sample == sample && c.category == category => c.ns += ns,
            pending => {
                if let Some(c) = pending.replace(Credit {
                    sample,
                    ns,
                    category,
                }) {
                    (self.charge)(c);
                }
            }
        }
    }

    /// Where, within `[lo, hi)`, thread `c` began a wait that thread `tid` ended (the
    /// earliest such wait), if it did.
    fn waits_for(&self, c: i32, tid: i32, lo: u64, hi: u64) -> Option<u64> {
        let l = self.lines.get(&c)?;
        let s = &self.p.samples;
        let from = seek::bisect(0, l.off.len(), |k| {
            l.off_at(k).is_some_and(|o| o.end(s) <= lo)
        });
        (from..)
            .map_while(|k| l.off_at(k))
            .take_while(|o| o.start(s) < hi)
            .find(|o| o.waker(s).is_some_and(|(w, _)| w == tid))
            .map(|o| o.start(s).max(lo))
    }

    /// Who was running before thread `tid` of process `pid` existed: the process's main
    /// thread, or for a main thread its parent process's main thread.
    fn creator(&self, tid: i32, pid: i32) -> Option<i32> {
        let c = if tid != pid {
            pid
        } else {
            self.p.processes.iter().find(|x| x.pid == pid)?.ppid?
        };
        (c != tid && self.lines.contains_key(&c)).then_some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{
        Frame, ProcessInfo, StackNode, ThreadInfo, ThreadSample, WaitState, Waker,
    };

    const MS: u64 = 1_000_000;

    /// A profile built by hand: `on(tid, from, to)` adds 1 ms on-CPU samples covering
    /// [from, to) ms; `off(tid, from, to, waker)` one off-CPU interval.
    struct P(SampledProfile);

    impl P {
        fn new(procs: &[(i32, Option<i32>)]) -> P {
            let mut p = SampledProfile {
                wakers_recorded: true,
                ..Default::default()
            };
            for &(pid, ppid) in procs {
                p.processes.push(ProcessInfo {
                    pid,
                    ppid,
                    name: format!("p{pid}"),
                    exe: None,
                });
            }
            P(p)
        }

        fn pid_of(&self, tid: i32) -> i32 {
            if self.0.processes.iter().any(|p| p.pid == tid) {
                tid
            } else {
                self.0
                    .threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .map_or(tid, |t| t.pid)
            }
        }

        fn thread(mut self, pid: i32, tid: i32) -> P {
            self.0.threads.push(ThreadInfo {
                pid,
                tid,
                name: format!("t{tid}"),
            });
            self
        }

        fn on(mut self, tid: i32, from_ms: u64, to_ms: u64) -> P {
            let pid = self.pid_of(tid);
            for t in from_ms..to_ms {
                self.0.samples.push(ThreadSample {
                    pid,
                    tid,
                    time_ns: (t + 1) * MS,
                    stack: None.into(),
                    weight_ns: MS,
                    kind: SampleKind::OnCpu,
                });
            }
            self
        }

        fn off(mut self, tid: i32, from_ns: u64, to_ns: u64, waker: Option<(i32, u64)>) -> P {
            let pid = self.pid_of(tid);
            let waker = waker.map(|(wtid, t)| Waker {
                pid: self.pid_of(wtid),
                tid: wtid,
                time_ns: t,
                stack: None,
            });
            let s = ThreadSample {
                pid,
                tid,
                time_ns: from_ns,
                stack: None.into(),
                weight_ns: to_ns - from_ns,
                kind: SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                },
            };
            self.0.samples.push_woken(s, waker);
            self
        }

        fn path(&self, lock: &[usize]) -> Walked {
            let cat = |i: usize| {
                if lock.contains(&i) {
                    WaitCategory::Lock
                } else if self.0.samples.at(i).kind == SampleKind::OnCpu {
                    WaitCategory::Cpu
                } else {
                    // A wait another thread ends (a pipe, a join): see the sleep test
                    // for one hardware ends.
                    WaitCategory::Pipe
                }
            };
            walked(&self.0, &cat).unwrap_or_default()
        }
    }

    /// The critical path with the charges the walk handed out, in walk order.
    #[derive(Debug, Default)]
    struct Walked {
        cp: CriticalPath,
        charges: Vec<Credit>,
    }

    impl Walked {
        fn credits(&self) -> impl Iterator<Item = Credit> + '_ {
            self.charges.iter().copied()
        }
    }

    impl std::ops::Deref for Walked {
        type Target = CriticalPath;
        fn deref(&self) -> &CriticalPath {
            &self.cp
        }
    }

    fn walked(p: &SampledProfile, cat: &dyn Fn(usize) -> WaitCategory) -> Option<Walked> {
        let mut charges = Vec::new();
        let cp = critical_path(p, cat, &mut |c| charges.push(c))?;
        Some(Walked { cp, charges })
    }

    /// Critical-path ns per tid (credits and unsampled time), and per category override.
    fn per_tid(p: &SampledProfile, cp: &Walked) -> HashMap<i32, u64> {
        let mut m: HashMap<i32, u64> = HashMap::new();
        for c in cp.credits() {
            *m.entry(p.samples.at(c.sample as usize).tid).or_default() += c.ns;
        }
        for u in &cp.unsampled {
            *m.entry(u.tid).or_default() += u.ns;
        }
        m
    }

    /// Time charged with the category `cat` given explicitly (not the sample's own).
    fn charged_as(cp: &Walked, cat: WaitCategory) -> u64 {
        cp.credits()
            .filter(|c| c.category == Some(cat))
            .map(|c| c.ns)
            .sum()
    }

    fn total(cp: &Walked) -> u64 {
        cp.credits().map(|c| c.ns).sum::<u64>()
            + cp.unsampled.iter().map(|u| u.ns).sum::<u64>()
            + cp.unattributed_ns
    }

    #[test]
    fn an_off_cpu_interval_is_4_bytes() {
        // One per off-CPU sample while the walk runs: a field added shows here.
        assert_eq!(std::mem::size_of::<Off>(), 4);
    }

    #[test]
    fn worked_example_pipeline_charges_the_work_not_the_waits() {
        // sh (1) forks producer (2) and consumer (3) and waits [1, 10] ms, woken by the
        // consumer's exit; the consumer reads [2, 6] blocked on the producer's pipe.
        let p = P::new(&[(1, None), (2, Some(1)), (3, Some(1))])
            .on(1, 0, 1)
            .off(1, MS, 10 * MS, Some((3, 10 * MS)))
            .on(2, 1, 6)
            .off(2, 6 * MS, 10 * MS, None)
            .on(3, 1, 2)
            .off(3, 2 * MS, 6 * MS, Some((2, 6 * MS)))
            .on(3, 6, 10);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(cp.span_ns, 10 * MS);
        assert_eq!(total(&cp), 10 * MS, "{cp:?}");
        assert_eq!(by.get(&1).copied(), Some(MS));
        assert_eq!(by.get(&2).copied(), Some(4 * MS));
        assert_eq!(by.get(&3).copied(), Some(5 * MS));
        // The producer's idle tail (off-CPU after its work) is on nobody's path.
        assert!(
            cp.credits()
                .all(|c| p.0.samples.at(c.sample as usize).tid != 2
                    || p.0.samples.at(c.sample as usize).kind == SampleKind::OnCpu)
        );
    }

    /// Sets the stack of every sample of thread `tid` to leaf 0 (one wait site).
    fn one_site(mut p: P, tid: i32) -> P {
        p.0.stacks.push(StackNode {
            frame: 0,
            parent: None,
        });
        p.0.samples.for_each_mut(|s| {
            if s.tid == tid {
                s.stack = Some(0).into();
            }
        });
        p
    }

    /// Two wait sites (leaves 0 and 1): thread `tid`'s samples starting at a time in
    /// `first` get leaf 0, its others leaf 1 (a join wait and the GIL waits between).
    fn two_sites(mut p: P, tid: i32, first: &[u64]) -> P {
        for _ in 0..2 {
            p.0.stacks.push(StackNode {
                frame: 0,
                parent: None,
            });
        }
        p.0.samples.for_each_mut(|s| {
            if s.tid == tid {
                s.stack = Some(if first.contains(&s.time_ns) { 0 } else { 1 }).into();
            }
        });
        p
    }

    #[test]
    fn timed_waits_made_again_until_a_thread_ends_one_are_one_wait_for_it() {
        // Main (1) waits from one place in 4 ms timed waits that time out (no waker),
        // 0.1 ms apart, until the worker (2), computing [0, 13) ms, ends the fourth at
        // 13 ms: the run waited for the worker all along.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 4 * MS, None)
            .off(1, 4_100_000, 8_100_000, None)
            .off(1, 8_200_000, 12_200_000, None)
            .off(1, 12_300_000, 13_050_000, Some((2, 13 * MS)))
            .on(2, 0, 13);
        let p = one_site(p, 1);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(total(&cp), 13_050_000, "{cp:?}");
        assert_eq!(by.get(&2).copied(), Some(13 * MS), "{by:?}");
        // Only the wake-up latency of the last wait is main's.
        assert_eq!(by.get(&1).copied(), Some(50_000), "{by:?}");
        // All four waits count as followed to their waker.
        assert_eq!(cp.followed_ns, 12_750_000);
        assert_eq!(charged_as(&cp, WaitCategory::Runqueue), 50_000);
        // Real work between two waits (12 ms) ends the run of retries.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 4 * MS, None)
            .off(1, 4_100_000, 8 * MS, None)
            .on(1, 8, 20)
            .off(1, 20 * MS, 23_050_000, Some((2, 23 * MS)))
            .on(2, 0, 23);
        let p = one_site(p, 1);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&2).copied(), Some(3 * MS), "{by:?}");
        assert_eq!(by.get(&1).copied(), Some(20_050_000), "{by:?}");
    }

    #[test]
    fn other_waits_between_the_retries_of_a_timed_wait_are_part_of_it() {
        // Python's `join(timeout)` in a loop: each timeout is followed by a wait for the
        // GIL (another place, ended by the worker) before the next join wait.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 4 * MS, None)
            .off(1, 4_050_000, 6 * MS, Some((2, 6 * MS)))
            .off(1, 6_050_000, 10 * MS, None)
            .off(1, 10_050_000, 12 * MS, Some((2, 12 * MS)))
            .off(1, 12_050_000, 13_050_000, Some((2, 13 * MS)))
            .on(2, 0, 13);
        // Join waits at stack 0, GIL waits at stack 1.
        let join = [0, 6_050_000, 12_050_000];
        let p = two_sites(p, 1, &join);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&2).copied(), Some(13 * MS), "{by:?}");
        assert_eq!(by.get(&1).copied(), Some(50_000), "{by:?}");
    }

    #[test]
    fn waits_for_the_gil_longer_than_the_gap_still_join_the_retries() {
        // On a loaded machine a join wait's timeout is followed by two GIL waits (the
        // first timing out after 5 ms) and a preemption: the next join wait starts 11 ms
        // after the last one ended, though main ran only 0.15 ms between them.
        let mut p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 4 * MS, None)
            .off(1, 4_050_000, 9 * MS, None)
            .off(1, 9_050_000, 14 * MS, Some((2, 14 * MS)))
            .off(1, 14_050_000, 15 * MS, None)
            .off(1, 15_050_000, 19 * MS, None)
            .off(1, 19_050_000, 20_050_000, Some((2, 20 * MS)))
            .on(2, 0, 20);
        let i = p.0.samples.iter().position(|s| s.time_ns == 14_050_000);
        p.0.samples.update(i.unwrap_or(usize::MAX), |s| {
            s.kind = SampleKind::OffCpu {
                state: WaitState::Preempted,
            }
        });
        // Join waits (stack 0) first and last two; GIL waits (stack 1) between.
        let p = two_sites(p, 1, &[0, 15_050_000, 19_050_000]);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&2).copied(), Some(20 * MS), "{by:?}");
        assert_eq!(by.get(&1).copied(), Some(50_000), "{by:?}");
    }

    #[test]
    fn retries_whose_last_timed_out_end_at_the_wait_a_thread_ended_after_it() {
        // Python's loop ends when its last join wait times out and the worker's exit
        // hands it the GIL (a wait at another place, ended by the worker at 12 ms).
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 4 * MS, None)
            .off(1, 4_050_000, 5 * MS, Some((2, 5 * MS)))
            .off(1, 5_050_000, 9 * MS, None)
            .off(1, 9_050_000, 12_050_000, Some((2, 12 * MS)))
            .on(2, 0, 12);
        let join = [0, 5_050_000];
        let p = two_sites(p, 1, &join);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&2).copied(), Some(12 * MS), "{by:?}");
        assert_eq!(by.get(&1).copied(), Some(50_000), "{by:?}");
        // One timed wait that timed out (no retry: a deliberate delay, perhaps), then a
        // lock the worker held: the delay is main's own.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 9 * MS, None)
            .off(1, 9_050_000, 12_050_000, Some((2, 12 * MS)))
            .on(2, 0, 12);
        let p = two_sites(p, 1, &join);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&1).copied(), Some(9_100_000), "{by:?}");
    }

    #[test]
    fn a_wait_ended_by_a_thread_with_no_sample_is_that_thread_s_time() {
        // A server's main thread (1) starts handler threads and waits for each to start
        // (Python's `Thread.start`): handler 3 ran [2, 9) ms unsampled, never blocked,
        // ended main's wait at 9 ms and exited. Main ran [0, 2) and [9.5, 12).
        let p = P::new(&[(1, None)])
            .thread(1, 3)
            .on(1, 0, 2)
            .off(1, 2 * MS, 9_500_000, Some((3, 9 * MS)))
            .on(1, 10, 12);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&3).copied(), Some(7 * MS), "{cp:?}");
        assert_eq!(charged_as(&cp, WaitCategory::Runqueue), 500_000, "{cp:?}");
        assert_eq!(total(&cp), cp.span_ns, "{cp:?}");
    }

    #[test]
    fn two_threads_retrying_waits_each_other_ends_do_not_hand_a_range_back_and_forth() {
        // Idle runtime workers: 1 retries until 2 ends its wait at 14 ms; 2 retries
        // until 1, running [9, 10) ms, ends its wait at 10 ms. No range goes round
        // between them until the cycle guard charges it to no one.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 1)
            .off(1, MS, 5 * MS, None)
            .off(1, 5 * MS, 9 * MS, None)
            .on(1, 9, 10)
            .off(1, 10 * MS, 14 * MS, Some((2, 14 * MS)))
            .off(2, 0, 4 * MS, None)
            .off(2, 4 * MS, 10 * MS, Some((1, 10 * MS)))
            .on(2, 10, 14);
        let p = one_site(one_site(p, 1), 2);
        let cp = p.path(&[]);
        assert_eq!(cp.unattributed_ns, 0, "{cp:?}");
        assert_eq!(total(&cp), cp.span_ns, "{cp:?}");
    }

    #[test]
    fn a_thread_killed_as_its_process_exits_is_not_the_end_of_the_run() {
        // A Go runtime's monitor thread (2) sleeps until the process's exit kills it,
        // 0.5 ms after main (1) ended it: the run waited for main.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 10)
            .off(2, 0, 10_500_000, None);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&1).copied(), Some(10 * MS), "{by:?}");
        assert_eq!(by.get(&2), None, "{by:?}");
    }

    #[test]
    fn an_idle_pool_beside_a_computing_main_holds_nothing() {
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .thread(1, 3)
            .on(1, 0, 20)
            .off(2, 0, 20 * MS, None)
            .off(3, 0, 20 * MS, None);
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&1).copied(), Some(20 * MS));
        assert_eq!(by.get(&2), None);
        assert_eq!(by.get(&3), None);
    }

    #[test]
    fn a_wait_nobody_in_the_tree_ended_is_its_own_cause() {
        // A sleep woken by a timer (no waker), and one "woken" from an interrupt that ran
        // on the other thread's CPU.
        let mut p = P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 2)
            .off(1, 2 * MS, 6 * MS, None)
            .on(1, 6, 8)
            .off(1, 8 * MS, 10 * MS, Some((2, 10 * MS)))
            .on(2, 0, 10);
        let irq = Frame {
            function: "asm_sysvec_apic_timer_interrupt".into(),
            module: Some("[kernel]".into()),
            file: None,
            line: None,
            kind: FrameKind::Kernel,
            inlined: false,
        };
        p.0.frames.push(irq);
        p.0.stacks.push(StackNode {
            parent: None,
            frame: 0,
        });
        let last = p.0.samples.len() - 11;
        if let Some(mut w) = p.0.samples.waker(last) {
            w.stack = Some(0);
            p.0.samples.set_waker(last, Some(w));
        }
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&1).copied(), Some(10 * MS), "{cp:?}");
        assert_eq!(by.get(&2), None);
    }

    #[test]
    fn time_behind_a_lock_is_lock_time_of_the_holder() {
        // Thread 2 holds a lock over [0, 5] ms while thread 1 waits for it [1, 5]; main
        // (1) then computes [5, 8].
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 1)
            .off(1, MS, 5 * MS, Some((2, 5 * MS)))
            .on(1, 5, 8)
            .on(2, 0, 5)
            .off(2, 5 * MS, 8 * MS, None);
        let cp = p.path(&[1]);
        let lock = charged_as(&cp, WaitCategory::Lock);
        assert_eq!(lock, 4 * MS);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&2).copied(), Some(4 * MS));
        assert_eq!(total(&cp), 8 * MS);
    }

    #[test]
    fn a_holder_reached_without_a_lock_wait_is_lock_while_others_queue() {
        // Main (1) joins 2; 2 computes [0, 10] ms and holds a lock 3 waits for over
        // [2, 6], released at 6.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .thread(1, 3)
            .off(1, 0, 10 * MS, Some((2, 10 * MS)))
            .on(2, 0, 10)
            .off(3, 2 * MS, 6 * MS, Some((2, 6 * MS)))
            .on(3, 6, 8);
        let lock_at = p.0.samples.len() - 3;
        let cp = p.path(&[lock_at]);
        let lock = charged_as(&cp, WaitCategory::Lock);
        assert_eq!(lock, 4 * MS, "{cp:?}");
        assert_eq!(per_tid(&p.0, &cp).get(&2).copied(), Some(10 * MS));
    }

    #[test]
    fn short_bursts_between_waits_are_on_cpu_time_where_each_burst_ended() {
        // A ping-pong: 1 and 2 alternate 0.2 ms bursts; no on-CPU sample lands.
        let mut p = P::new(&[(1, None), (2, Some(1))]);
        let step = MS / 5;
        for k in 0..20u64 {
            let (runner, waiter) = if k % 2 == 0 { (1, 2) } else { (2, 1) };
            let t = k * step;
            p = p.off(waiter, t, t + step, Some((runner, t + step)));
        }
        let cp = p.path(&[]);
        assert_eq!(total(&cp), cp.span_ns);
        // Each burst is on-CPU time of the switch-out that ended it (its stack says
        // where); the last one, with no switch-out after it, is the thread's own.
        let on_cpu = charged_as(&cp, WaitCategory::Cpu);
        let unsampled: u64 = cp.unsampled.iter().map(|u| u.ns).sum();
        assert!(on_cpu * 10 >= cp.span_ns * 8, "{cp:?}");
        assert!((on_cpu + unsampled) * 10 >= cp.span_ns * 9, "{cp:?}");
    }

    #[test]
    fn a_vforked_child_that_no_sample_caught_starting_is_its_own_time() {
        // sh (1) vforks 2 at 1 ms and waits in vfork until 2 execs at 3 ms (the child's
        // first evidence), then in wait4 until 2 exits at 10 ms.
        let p = P::new(&[(1, None), (2, Some(1))])
            .on(1, 0, 1)
            .off(1, MS, 3 * MS, Some((2, 3 * MS)))
            .off(1, 3 * MS, 10 * MS, Some((2, 10 * MS)))
            .on(2, 4, 10);
        let cp = p.path(&[]);
        assert_eq!(cp.unattributed_ns, 0, "{cp:?}");
        assert_eq!(total(&cp), 10 * MS);
        assert_eq!(per_tid(&p.0, &cp).get(&2).copied(), Some(9 * MS));
    }

    #[test]
    fn a_sleep_is_its_own_cause_even_when_a_tree_thread_was_on_the_cpu() {
        // The timer interrupt that ended 1's sleep ran while 2 was on the CPU: the
        // record names 2 as the waker, but a sleep is ended by hardware.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 2)
            .off(1, 2 * MS, 10 * MS, Some((2, 10 * MS)))
            .on(2, 0, 10);
        let sleep_at = 2;
        let cat = |i: usize| {
            if i == sleep_at {
                WaitCategory::Sleep
            } else {
                WaitCategory::Cpu
            }
        };
        let cp = walked(&p.0, &cat).unwrap_or_default();
        assert_eq!(per_tid(&p.0, &cp).get(&1).copied(), Some(10 * MS), "{cp:?}");
        assert_eq!(per_tid(&p.0, &cp).get(&2), None);
    }

    /// Main (1) computes [0, 8] ms, starts 2 and waits for it [8, 10]; 2's first sample
    /// covers [9, 10], it ends last.
    fn started_late() -> P {
        P::new(&[(1, None)])
            .thread(1, 2)
            .on(1, 0, 8)
            .off(1, 8 * MS, 10 * MS, Some((2, 10 * MS)))
            .on(2, 9, 11)
    }

    #[test]
    fn a_thread_started_late_hands_the_time_before_it_back_to_its_creator() {
        let p = started_late();
        let cp = p.path(&[]);
        let by = per_tid(&p.0, &cp);
        assert_eq!(by.get(&1).copied(), Some(8 * MS), "{cp:?}");
        assert_eq!(by.get(&2).copied(), Some(3 * MS), "{cp:?}");
    }

    #[test]
    fn the_walk_moves_forward_in_time() {
        // The piece before 2 existed (its creator's) is walked before 2's own range, so
        // every piece resumes no earlier than the last: a walk reading the samples in
        // time order (block by block) could serve each step.
        let p = started_late();
        RESUMED.with(|r| r.borrow_mut().clear());
        let _ = p.path(&[]);
        let at = RESUMED.with(|r| r.take());
        assert!(at.len() >= 2, "{at:?}");
        assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    }

    #[test]
    fn contradictory_wakers_cannot_loop() {
        // Each thread claims the other woke it over the same interval.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .off(1, 0, 10 * MS, Some((2, 10 * MS)))
            .off(2, 0, 10 * MS, Some((1, 10 * MS)));
        let cp = p.path(&[]);
        assert!(total(&cp) <= 10 * MS, "{cp:?}");
    }

    #[test]
    fn a_cycle_through_three_threads_is_charged_to_no_one_once() {
        // 1 says 2 woke it, 2 says 3, 3 says 1, all over the same interval: the walk
        // hands the whole piece round the cycle, and charges it to no one once.
        let p = P::new(&[(1, None)])
            .thread(1, 2)
            .thread(1, 3)
            .off(1, 0, 10 * MS, Some((2, 10 * MS)))
            .off(2, 0, 10 * MS, Some((3, 10 * MS)))
            .off(3, 0, 10 * MS, Some((1, 10 * MS)));
        let cp = p.path(&[]);
        assert_eq!(cp.unattributed_ns, 10 * MS, "{cp:?}");
        assert_eq!(total(&cp), 10 * MS, "{cp:?}");
    }

    #[test]
    fn without_wake_up_records_there_is_no_path() {
        let mut p = P::new(&[(1, None)]).on(1, 0, 3);
        p.0.wakers_recorded = false;
        assert!(walked(&p.0, &|_| WaitCategory::Cpu).is_none());
    }

    #[test]
    fn contradicting_records_do_not_send_the_walk_round_a_cycle() {
        // tar (1) waits [0, 12] ms, its wait ended by gzip (3) at 2 ms; gzip, a child of
        // sh (2), itself a child of tar, has its first sample later (at 4 ms): before
        // it, the walk goes to sh, then to tar — the same piece of tar's wait again. A
        // tar run seen like this charged 829 ms to a 645 ms span.
        // A short interval recorded over the start of the long one, as the kernel
        // reported tar's first switch.
        let p = P::new(&[(1, None), (2, Some(1)), (3, Some(2))])
            .off(1, 0, MS / 10, None)
            .off(1, 0, 12 * MS, Some((3, 2 * MS)))
            .on(2, 6, 8)
            .on(3, 4, 12)
            .on(1, 12, 14);
        let cp = p.path(&[]);
        let charged: u64 = per_tid(&p.0, &cp).values().sum::<u64>() + cp.unattributed_ns;
        assert_eq!(charged, cp.span_ns, "{cp:?}");
        assert!(cp.span_ns <= 14 * MS);
    }
}
