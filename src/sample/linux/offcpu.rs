//! Off-CPU interval synthesis: a state machine fed with simple switch, exit, wake-up and
//! /proc-look events (in time order) that emits finished off-CPU intervals. It knows
//! nothing of perf records: `process` decodes those and forwards them here.
//!
//! # How an interval is made
//!
//! Three events meet per thread id:
//! 1. a *switch sample* ([`SwitchSample`]: the `sched:sched_switch` tracepoint, or the
//!    `context-switches` software event) taken in the kernel as the thread leaves the
//!    CPU, with the switch-out stack and, from the tracepoint, `prev_state`;
//! 2. a *switch-out* record ([`SwitchOut`]) just after it, with the preempt flag;
//! 3. a *switch-in* record ([`SwitchIn`]) when the thread runs again (maybe on another
//!    CPU: the caller sorts events by time across CPUs).
//!
//! The switch sample is parked per tid; the switch-out picks it up when it is recent
//! (its time becomes the interval start) and the switch-in closes the interval. The state
//! is Preempted when the kernel says the task was still runnable, else S or D from
//! `prev_state` (Sleeping when only the software event is available, which cannot tell S
//! from D). An interval still open at the end belongs to a thread that exited (dropped:
//! a dead task's last switch is not a wait) or one still blocked (closed at the end).
//! Zero-length intervals are dropped. A switch sample's syscall argument ([`RawWait`])
//! goes with its interval, unless the thread was preempted (it waited for a CPU then).
//!
//! Without a switch-out stack (user-space-only sampling), the first [`Look`] at the
//! blocked thread made inside the interval gives it its stack and state.
//!
//! # Who woke whom
//!
//! A [`Waking`] (the `sched:sched_waking` tracepoint, written only when the waker is a
//! thread of the profiled tree) is remembered per wakee, the last one only. When the
//! wakee's interval closes, that waking is attached as the interval's waker if it lies
//! inside the interval (with [`WAKE_SLACK_NS`] before its start: a waker may run
//! `try_to_wake_up` while the wakee is still inside `schedule`), then forgotten.
//! Self-wakes are not wakers. An interval still open at the end has no waker.
//!
//! Wake-ups done by an exiting thread are not recorded: the kernel detaches a task's
//! perf events (`perf_event_exit_task`) before it releases its memory (the futex wake of
//! a `pthread_join`) and notifies its parent (the wake of a `wait4`). The [`Exit`] stands
//! for them: a thread's exit is offered as waker to the other threads of its process
//! that are blocked, a process's (its main thread's) exit to the blocked threads of its
//! parent process; an interval with no recorded waking takes it when it ends within
//! [`EXIT_WAKE_MAX_NS`] of the exit.

use std::collections::HashMap;

use super::stackreuse::StackSource;
use crate::profile::{SampleKind, ThreadSample, WaitState, Waker};
use crate::sample::RawWait;

/// How soon after an exit a blocked thread must run again for the exit to be its waker.
/// Generous: on a busy machine a parent woken by its child's exit may wait long for a
/// CPU (seen: 4.8 ms with two CPUs busy; past 20 ms with three compilers sharing the two
/// CPUs in CI), and that latency is still the exit's.
pub(crate) const EXIT_WAKE_MAX_NS: u64 = 50_000_000;
/// A switch sample older than this is not the one of a switch-out.
const PARK_MAX_AGE_NS: u64 = 50_000_000;
/// How long before an interval's start a waking may be and still have ended it.
pub(crate) const WAKE_SLACK_NS: u64 = 20_000;

/// A stack taken as the thread left the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwitchSample {
    pub tid: i32,
    pub time: u64,
    pub stack: Option<u32>,
    /// The tracepoint's `prev_state`, when known.
    pub prev_state: Option<i64>,
    /// The blocked syscall's argument, for a thread going to sleep.
    pub wait: Option<RawWait>,
    /// Whether `stack` was unwound from this switch-out's copy, or lent.
    pub source: StackSource,
}

/// The thread left the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwitchOut {
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    /// The kernel says the thread was still runnable.
    pub preempted: bool,
}

/// The thread runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwitchIn {
    pub tid: i32,
    pub time: u64,
}

/// A thread of the tree exited; `ppid` is its process's parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    pub pid: i32,
    pub ppid: i32,
    pub tid: i32,
    pub time: u64,
}

/// A thread of the tree (`waker`) woke `wakee_tid`; `stack` is the waker's kernel stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waking {
    pub waker_pid: i32,
    pub waker_tid: i32,
    pub wakee_tid: i32,
    pub time: u64,
    pub stack: Option<u32>,
}

/// A look at a blocked thread through /proc: its state and the stack built from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    pub tid: i32,
    pub time: u64,
    pub state: WaitState,
    pub stack: Option<u32>,
    /// The blocked call's argument, read from /proc.
    pub wait: Option<RawWait>,
}

/// A finished off-CPU interval (absolute times, like the events').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval {
    pub pid: i32,
    pub tid: i32,
    pub start: u64,
    pub duration: u64,
    pub stack: Option<u32>,
    pub state: WaitState,
    /// Its `time_ns` is absolute too.
    pub waker: Option<Waker>,
    pub wait: Option<RawWait>,
    pub source: StackSource,
}

impl Interval {
    /// The interval as an off-CPU sample (absolute time, stack in the sampler's table).
    pub fn sample(&self) -> ThreadSample {
        ThreadSample {
            pid: self.pid,
            tid: self.tid,
            time_ns: self.start,
            stack: self.stack.into(),
            weight_ns: self.duration,
            kind: SampleKind::OffCpu { state: self.state },
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    pid: i32,
    start: u64,
    stack: Option<u32>,
    state: WaitState,
    wait: Option<RawWait>,
    source: StackSource,
}

/// The off-CPU state machine.
#[derive(Debug, Default)]
pub(crate) struct OffCpu {
    parked: HashMap<i32, SwitchSample>,
    open: HashMap<i32, Open>,
    /// Looks per tid, oldest first.
    observed: HashMap<i32, Vec<Look>>,
    wakings: HashMap<i32, Waking>,
    /// Exits offered as waker to blocked threads (see the module doc), by wakee tid.
    exit_wakes: HashMap<i32, Waking>,
    done: Vec<Interval>,
    has_prev_state: bool,
    /// Off-CPU time cut at windows of lost records, ns (see [`OffCpu::lost`]).
    lost_ns: u64,
}

impl OffCpu {
    pub(crate) fn switch_sample(&mut self, s: SwitchSample) {
        if s.prev_state.is_some() {
            self.has_prev_state = true;
        }
        // One sample per switch-out: its stack copy was paired with it as it was drained
        // (`copies`).
        self.parked.insert(s.tid, s);
    }

    pub(crate) fn switch_out(&mut self, o: SwitchOut) {
        // The parked switch sample belongs to this switch when it is recent.
        let parked = self
            .parked
            .remove(&o.tid)
            .filter(|p| o.time.saturating_sub(p.time) < PARK_MAX_AGE_NS && p.time <= o.time + 1);
        let state = if o.preempted {
            WaitState::Preempted
        } else {
            state_of(parked.and_then(|p| p.prev_state))
        };
        self.open.insert(
            o.tid,
            Open {
                pid: o.pid,
                start: parked.map_or(o.time, |p| p.time.min(o.time)),
                stack: parked.and_then(|p| p.stack),
                source: parked.map_or(StackSource::Copied, |p| p.source),
                state,
                wait: parked
                    .and_then(|p| p.wait)
                    .filter(|_| state != WaitState::Preempted),
            },
        );
    }

    pub(crate) fn switch_in(&mut self, i: SwitchIn) {
        if let Some(iv) = self.open.remove(&i.tid) {
            self.close(i.tid, iv, i.time);
        }
    }

    /// The thread exited: a switch sample it left is no wait; threads that wait for
    /// it (a join, a `wait4`) may be woken by its exit.
    pub(crate) fn exit(&mut self, e: Exit) {
        self.parked.remove(&e.tid);
        self.wakings.remove(&e.tid);
        self.exit_wakes.remove(&e.tid);
        let waiting_pid = if e.tid == e.pid { e.ppid } else { e.pid };
        for (&tid, iv) in &self.open {
            if iv.pid == waiting_pid && tid != e.tid && iv.state != WaitState::Preempted {
                let w = Waking {
                    waker_pid: e.pid,
                    waker_tid: e.tid,
                    wakee_tid: tid,
                    time: e.time,
                    stack: None,
                };
                self.exit_wakes.insert(tid, w);
            }
        }
    }

    pub(crate) fn waking(&mut self, w: Waking) {
        if w.waker_tid != w.wakee_tid {
            self.wakings.insert(w.wakee_tid, w);
        }
    }

    pub(crate) fn look(&mut self, l: Look) {
        self.observed.entry(l.tid).or_default().push(l);
    }

    /// Records were lost between `from` and `to` (a ring overflowed): a thread off-CPU
    /// across that window may have run and blocked again there unseen, and its switch-in
    /// may be among the lost records, so its open interval is cut: the part before the
    /// window is kept (closed at `from`, no waker), the window itself is nobody's time
    /// (it shows as unaccounted), and the interval goes on from `to` with the same stack
    /// and state until the next switch-in seen.
    pub(crate) fn lost(&mut self, from: u64, to: u64) {
        let mut cut: Vec<(i32, Open)> = self
            .open
            .iter()
            .filter(|(_, iv)| iv.start < to)
            .map(|(&tid, &iv)| (tid, iv))
            .collect();
        cut.sort_by_key(|(tid, iv)| (iv.start, *tid));
        for (tid, iv) in cut {
            if iv.start < from {
                self.wakings.remove(&tid);
                self.exit_wakes.remove(&tid);
                self.close(tid, iv, from);
            }
            self.lost_ns += to - iv.start.max(from);
            self.open.insert(tid, Open { start: to, ..iv });
        }
    }

    /// Off-CPU time cut at windows of lost records so far, ns.
    pub(crate) fn lost_ns(&self) -> u64 {
        self.lost_ns
    }

    /// Whether any switch sample carried `prev_state` (S and D told apart).
    /// The intervals closed so far, oldest close first (only grows until `finish`;
    /// the crash spool appends them as they come, see `spool`).
    pub(crate) fn done(&self) -> &[Interval] {
        &self.done
    }

    pub(crate) fn has_prev_state(&self) -> bool {
        self.has_prev_state
    }

    /// Whether any thread was looked at through /proc.
    pub(crate) fn looked(&self) -> bool {
        !self.observed.is_empty()
    }

    /// Close what is still open at `end` for the threads `alive` says still live, and
    /// return every finished interval, in the order they closed.
    pub(crate) fn finish(mut self, end: u64, alive: impl Fn(i32) -> bool) -> Vec<Interval> {
        let mut open: Vec<(i32, Open)> = self.open.drain().collect();
        open.sort_by_key(|(tid, iv)| (iv.start, *tid));
        for (tid, iv) in open {
            if alive(tid) && end > iv.start {
                self.wakings.remove(&tid);
                self.exit_wakes.remove(&tid);
                self.close(tid, iv, end);
            }
        }
        self.done
    }

    fn close(&mut self, tid: i32, mut iv: Open, end: u64) {
        // Without a switch-out stack, the first look at the blocked thread made inside
        // the interval stands for it; older looks are done with.
        if let Some(seen) = self.observed.get_mut(&tid) {
            let inside = seen
                .iter()
                .find(|l| (iv.start..=end).contains(&l.time))
                .copied();
            seen.retain(|l| l.time > end);
            if let Some(l) = inside
                && iv.stack.is_none()
                && iv.state != WaitState::Preempted
            {
                iv.stack = l.stack;
                iv.state = l.state;
                iv.wait = iv.wait.or(l.wait);
            }
        }
        let woken = self
            .wakings
            .remove(&tid)
            .filter(|w| w.time + WAKE_SLACK_NS >= iv.start && w.time <= end);
        let by_exit = self
            .exit_wakes
            .remove(&tid)
            .filter(|w| w.time >= iv.start && w.time <= end && end - w.time <= EXIT_WAKE_MAX_NS);
        let waker = woken.or(by_exit).map(|w| Waker {
            pid: w.waker_pid,
            tid: w.waker_tid,
            time_ns: w.time,
            stack: w.stack,
        });
        let duration = end.saturating_sub(iv.start);
        if duration == 0 {
            return;
        }
        self.done.push(Interval {
            pid: iv.pid,
            tid,
            start: iv.start,
            duration,
            stack: iv.stack,
            state: iv.state,
            waker,
            wait: iv.wait,
            source: iv.source,
        });
    }
}

/// Off-CPU time in total and by where its stack came from (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StackSources {
    pub total_ns: u64,
    pub late_ns: u64,
    pub reused_ns: u64,
    pub partial_ns: u64,
}

/// Sum the intervals' durations by stack source.
pub(crate) fn stack_sources(intervals: &[Interval]) -> StackSources {
    let mut out = StackSources::default();
    for iv in intervals {
        out.total_ns += iv.duration;
        match iv.source {
            StackSource::Late => out.late_ns += iv.duration,
            StackSource::Reused => out.reused_ns += iv.duration,
            StackSource::Partial => out.partial_ns += iv.duration,
            StackSource::Copied => {}
        }
    }
    out
}

/// Intervals with no stack (no switch-out stack, no look inside them), their summed
/// duration, and the summed duration of all (ns): what the /proc looks missed.
pub(crate) fn unseen(intervals: &[Interval]) -> (u64, u64, u64) {
    let (mut n, mut ns, mut all) = (0, 0, 0);
    for iv in intervals
        .iter()
        .filter(|iv| iv.state != WaitState::Preempted)
    {
        all += iv.duration;
        if iv.stack.is_none() {
            n += 1;
            ns += iv.duration;
        }
    }
    (n, ns, all)
}

/// The wait state from the tracepoint's `prev_state` (None: software event only).
pub(crate) fn state_of(prev_state: Option<i64>) -> WaitState {
    match prev_state {
        Some(s) if s & 0x100 != 0 => WaitState::Preempted,
        Some(0) => WaitState::Preempted,
        Some(s) if s & 1 != 0 => WaitState::Sleeping,
        Some(s) if s & 2 != 0 => WaitState::Uninterruptible,
        Some(_) => WaitState::Other,
        None => WaitState::Sleeping,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sample(tid: i32, time: u64, stack: u32, prev_state: Option<i64>) -> SwitchSample {
        SwitchSample {
            tid,
            time,
            stack: Some(stack),
            prev_state,
            wait: None,
            source: StackSource::Copied,
        }
    }

    fn out(tid: i32, time: u64, preempted: bool) -> SwitchOut {
        SwitchOut {
            pid: 100,
            tid,
            time,
            preempted,
        }
    }

    fn inn(tid: i32, time: u64) -> SwitchIn {
        SwitchIn { tid, time }
    }

    fn waking(waker_tid: i32, wakee_tid: i32, time: u64) -> Waking {
        Waking {
            waker_pid: 200,
            waker_tid,
            wakee_tid,
            time,
            stack: Some(9),
        }
    }

    fn exit(pid: i32, tid: i32, time: u64) -> Exit {
        Exit {
            pid,
            ppid: 1,
            tid,
            time,
        }
    }

    fn all_alive(_: i32) -> bool {
        true
    }

    #[test]
    fn lost_records_cut_the_open_intervals_at_the_window() {
        let mut m = OffCpu::default();
        m.switch_out(out(1, 10 * MS, false));
        m.switch_out(out(2, 25 * MS, false));
        // Records lost between 20 and 30 ms: thread 1's wait is kept up to 20 ms and goes
        // on from 30 ms; thread 2 blocked inside the window: its interval starts at 30 ms.
        m.lost(20 * MS, 30 * MS);
        m.switch_in(inn(1, 35 * MS));
        m.switch_in(inn(2, 40 * MS));
        // 10 ms of thread 1's wait and 5 ms of thread 2's are nobody's.
        assert_eq!(m.lost_ns(), 15 * MS);
        let got: Vec<(i32, u64, u64)> = m
            .finish(50 * MS, all_alive)
            .iter()
            .map(|iv| (iv.tid, iv.start, iv.duration))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 10 * MS, 10 * MS),
                (1, 30 * MS, 5 * MS),
                (2, 30 * MS, 10 * MS)
            ]
        );
    }

    #[test]
    fn switch_out_then_in_without_sample() {
        let mut m = OffCpu::default();
        m.switch_out(out(1, 10 * MS, false));
        m.switch_in(inn(1, 15 * MS));
        let v = m.finish(100 * MS, all_alive);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].pid, v[0].tid), (100, 1));
        assert_eq!((v[0].start, v[0].duration), (10 * MS, 5 * MS));
        assert_eq!((v[0].stack, v[0].state), (None, WaitState::Sleeping));
        assert_eq!(v[0].waker, None);
    }

    #[test]
    fn parked_sample_gives_stack_start_and_state() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, 10 * MS - 3000, 7, Some(2)));
        m.switch_out(out(1, 10 * MS, false));
        m.switch_in(inn(1, 12 * MS));
        assert!(m.has_prev_state());
        let v = m.finish(100 * MS, all_alive);
        assert_eq!(v[0].start, 10 * MS - 3000);
        assert_eq!(v[0].duration, 2 * MS + 3000);
        assert_eq!(v[0].stack, Some(7));
        assert_eq!(v[0].state, WaitState::Uninterruptible);
    }

    #[test]
    fn the_syscall_argument_goes_with_a_sleep_not_a_preemption() {
        let mut m = OffCpu::default();
        let wait = Some(RawWait {
            arg0: 3,
            resource: Some(0),
            pollfd0: None,
        });
        for (tid, preempted) in [(1, false), (2, true)] {
            m.switch_sample(SwitchSample {
                wait,
                ..sample(tid, MS, 7, Some(1))
            });
            m.switch_out(out(tid, MS, preempted));
            m.switch_in(inn(tid, 2 * MS));
        }
        let v = m.finish(10 * MS, all_alive);
        assert_eq!((v[0].tid, v[0].wait), (1, wait));
        assert_eq!((v[1].tid, v[1].wait), (2, None));
    }

    #[test]
    fn stale_parked_sample_is_not_used() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, MS, 7, Some(1)));
        m.switch_out(out(1, MS + PARK_MAX_AGE_NS, false));
        m.switch_in(inn(1, 2 * PARK_MAX_AGE_NS));
        let v = m.finish(u64::MAX, all_alive);
        assert_eq!(v[0].stack, None);
        assert_eq!(v[0].start, MS + PARK_MAX_AGE_NS);
    }

    #[test]
    fn preempted_by_flag_or_prev_state() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, MS, 7, Some(1)));
        m.switch_out(out(1, MS, true));
        m.switch_in(inn(1, 2 * MS));
        m.switch_sample(sample(2, MS, 8, Some(0)));
        m.switch_out(out(2, MS, false));
        m.switch_in(inn(2, 2 * MS));
        m.switch_sample(sample(3, MS, 8, Some(0x101)));
        m.switch_out(out(3, MS, false));
        m.switch_in(inn(3, 2 * MS));
        let v = m.finish(10 * MS, all_alive);
        assert_eq!(v.len(), 3);
        assert!(v.iter().all(|i| i.state == WaitState::Preempted));
    }

    #[test]
    fn exit_while_off_cpu_drops_the_interval() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, MS, 7, Some(1)));
        m.switch_out(out(1, MS, false));
        m.exit(exit(100, 1, MS));
        // The parked sample went with the exit: a later switch-out has no stack.
        m.switch_sample(sample(2, MS, 7, Some(1)));
        m.exit(exit(100, 2, MS));
        m.switch_out(out(2, MS, false));
        let v = m.finish(10 * MS, |tid| tid != 1);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].tid, v[0].stack), (2, None));
    }

    #[test]
    fn open_interval_closes_at_end_when_alive() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, 4 * MS, 7, Some(1)));
        m.switch_out(out(1, 4 * MS, false));
        m.switch_out(out(2, 20 * MS, false));
        let v = m.finish(10 * MS, all_alive);
        // tid 2's interval starts after the end: nothing.
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].tid, v[0].duration), (1, 6 * MS));
    }

    #[test]
    fn fork_and_exec_of_other_threads_do_not_break_intervals() {
        // A new thread (fork) or an exec elsewhere produces switch events for other
        // tids in between; each tid's interval is its own.
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, MS, 7, Some(1)));
        m.switch_out(out(1, MS, false));
        m.switch_in(inn(5, MS + 10)); // the new thread starts running
        m.switch_out(out(5, 2 * MS, false));
        m.exit(exit(100, 5, 2 * MS));
        m.switch_in(inn(1, 3 * MS));
        let v = m.finish(10 * MS, |tid| tid == 1);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].tid, v[0].start, v[0].duration), (1, MS, 2 * MS));
        assert_eq!(v[0].stack, Some(7));
    }

    #[test]
    fn a_look_fills_a_stackless_interval() {
        let mut m = OffCpu::default();
        let look = |time, stack| Look {
            tid: 1,
            time,
            state: WaitState::Uninterruptible,
            stack: Some(stack),
            wait: None,
        };
        m.look(look(MS / 2, 40)); // before the interval: done with
        m.switch_out(out(1, MS, false));
        m.look(look(2 * MS, 41));
        m.look(look(3 * MS, 42));
        m.switch_in(inn(1, 4 * MS));
        // A preempted interval keeps no look; a stacked one keeps its own stack.
        m.switch_out(out(1, 5 * MS, true));
        m.look(look(6 * MS, 43));
        m.switch_in(inn(1, 7 * MS));
        assert!(m.looked());
        let v = m.finish(10 * MS, all_alive);
        assert_eq!(v[0].stack, Some(41));
        assert_eq!(v[0].state, WaitState::Uninterruptible);
        assert_eq!((v[1].stack, v[1].state), (None, WaitState::Preempted));
    }

    #[test]
    fn zero_length_intervals_are_dropped() {
        let mut m = OffCpu::default();
        m.switch_out(out(1, MS, false));
        m.switch_in(inn(1, MS));
        m.switch_out(out(2, 10 * MS, false));
        assert!(m.finish(10 * MS, all_alive).is_empty());
    }

    #[test]
    fn waking_inside_the_interval_is_its_waker() {
        let mut m = OffCpu::default();
        m.switch_sample(sample(1, MS, 7, Some(1)));
        m.switch_out(out(1, MS, false));
        m.waking(waking(3, 1, 2 * MS));
        m.waking(waking(4, 1, 3 * MS)); // the last one counts
        m.switch_in(inn(1, 4 * MS));
        // Forgotten once used: the next interval has no waker.
        m.switch_out(out(1, 5 * MS, false));
        m.switch_in(inn(1, 6 * MS));
        let v = m.finish(10 * MS, all_alive);
        let w = v[0].waker.expect("waker");
        assert_eq!(
            (w.pid, w.tid, w.time_ns, w.stack),
            (200, 4, 3 * MS, Some(9))
        );
        assert_eq!(v[1].waker, None);
    }

    #[test]
    fn waking_just_before_the_switch_counts_older_does_not() {
        let mut m = OffCpu::default();
        m.waking(waking(3, 1, MS - WAKE_SLACK_NS / 2));
        m.switch_out(out(1, MS, false));
        m.switch_in(inn(1, 2 * MS));
        m.waking(waking(3, 1, 3 * MS));
        m.switch_out(out(1, 4 * MS, false));
        m.switch_in(inn(1, 5 * MS));
        let v = m.finish(10 * MS, all_alive);
        assert_eq!(v[0].waker.map(|w| w.tid), Some(3));
        assert_eq!(
            v[1].waker, None,
            "a waking 1 ms before the interval is stale"
        );
    }

    #[test]
    fn self_wakes_and_dead_wakees_are_ignored() {
        let mut m = OffCpu::default();
        m.switch_out(out(1, MS, false));
        m.waking(waking(1, 1, 2 * MS));
        m.switch_in(inn(1, 3 * MS));
        m.waking(waking(3, 2, 4 * MS));
        m.exit(exit(100, 2, MS));
        m.switch_out(out(2, 4 * MS, false));
        m.switch_in(inn(2, 5 * MS));
        let v = m.finish(10 * MS, all_alive);
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|i| i.waker.is_none()));
    }

    #[test]
    fn an_exit_wakes_a_joiner_or_a_waiting_parent_soon_after() {
        let mut m = OffCpu::default();
        // tid 1 joins tid 2 (same process 100); tid 3 of process 100 waits on
        // something else and runs again long after; process 300 (parent 100) ends.
        m.switch_out(out(1, MS, false));
        m.switch_out(out(3, MS, false));
        m.exit(exit(100, 2, 5 * MS));
        m.switch_in(inn(1, 5 * MS + 30_000));
        m.switch_in(inn(3, 5 * MS + EXIT_WAKE_MAX_NS + 1));
        m.switch_out(out(1, 6 * MS, false));
        m.exit(Exit {
            pid: 300,
            ppid: 100,
            tid: 300,
            time: 7 * MS,
        });
        m.switch_in(inn(1, 7 * MS + 10_000));
        let v = m.finish(10 * MS, all_alive);
        let w = v[0].waker.expect("the join's waker");
        assert_eq!((v[0].tid, w.pid, w.tid, w.stack), (1, 100, 2, None));
        assert_eq!((v[1].tid, v[1].waker), (3, None));
        assert_eq!(v[2].waker.map(|w| (w.pid, w.tid)), Some((300, 300)));
    }

    #[test]
    fn a_recorded_waking_beats_an_exit_and_open_intervals_have_no_waker() {
        let mut m = OffCpu::default();
        m.switch_out(out(1, MS, false));
        m.exit(exit(100, 2, 2 * MS));
        m.waking(waking(4, 1, 2 * MS + 10));
        m.switch_in(inn(1, 2 * MS + 20));
        m.switch_out(out(1, 3 * MS, false));
        m.waking(waking(4, 1, 4 * MS));
        let v = m.finish(4 * MS + 10, all_alive);
        assert_eq!(v[0].waker.map(|w| w.tid), Some(4));
        assert_eq!(v[1].waker, None);
    }
}
