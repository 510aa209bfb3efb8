//! Samples laid out on each thread's timeline, the common ground of the timeline
//! exports (speedscope's evented profiles, Chrome trace events).
//!
//! A sample covers an interval: an on-CPU tick at `time_ns` covers the sampling period
//! that ends there, `[time_ns - weight_ns, time_ns]`; an off-CPU sample covers
//! `[time_ns, time_ns + weight_ns]`. The period is CPU time, not wall time: a period cut
//! by a switch began before the thread went off-CPU, so, laid out in wall time, the tick
//! after the switch overlaps the wait by up to a period (and leaves as much uncovered
//! before it). Cutting the overlap off loses that time (a loaded machine preempts often:
//! 6% of three_funcs' time on two busy cores); keeping it counts time twice. So slices
//! are laid out in start order, each starting where the previous one ended when they
//! would overlap and keeping its length: a slice is late by at most [`MAX_LATE_PERIODS`]
//! periods; one that would be later is cut at its own end instead.
//!
//! Invariants of [`ThreadSamples::slices`] (laid out one thread at a time, so that only
//! that thread's slices are held):
//! - a thread's slices are in time order, never overlap and never have zero length;
//! - they hold exactly the time its samples weigh, less only what was cut from slices
//!   that would have been too late (none when the samples are sound).
//!
//! [`walk_each`] turns a thread's slices, each with its path of nodes (root first), into
//! balanced open/close events: consecutive slices that touch share the nodes of their
//! common prefix (one span for a run of the same stack), and every node opened is
//! closed, innermost first, at a time no earlier than it opened.

use std::collections::BTreeMap;

use crate::profile::{SampleKind, SampledProfile};

/// One sample's interval as laid out on its thread's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// Start, ns since the profiled run's start.
    pub start_ns: u64,
    /// End (exclusive), ns; always greater than `start_ns`.
    pub end_ns: u64,
    /// Index of the sample in `SampledProfile::samples`.
    pub sample: usize,
}

/// One thread's slices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSlices {
    /// The process the thread belongs to.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Its slices, in time order, not overlapping.
    pub slices: Vec<Slice>,
}

impl ThreadSlices {
    /// The time the slices hold, ns.
    pub fn held_ns(&self) -> u64 {
        self.slices.iter().map(|s| s.end_ns - s.start_ns).sum()
    }
}

/// The interval sample `s` covers before it is laid out.
fn interval(kind: SampleKind, time_ns: u64, weight_ns: u64) -> (u64, u64) {
    match kind {
        SampleKind::OnCpu => (time_ns.saturating_sub(weight_ns), time_ns),
        SampleKind::OffCpu { .. } => (time_ns, time_ns.saturating_add(weight_ns)),
    }
}

/// A sample's `(start, end, index)` before it is laid out.
type Interval = (u64, u64, usize);

/// How many sampling periods a slice may start after its own start.
pub const MAX_LATE_PERIODS: u64 = 2;

/// One thread's samples, not yet laid out: their indices (4 bytes a sample, so that
/// only one thread at a time holds its slices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSamples {
    /// The process the thread belongs to.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Indices into `SampledProfile::samples`, ascending (a recording holds at most
    /// `validate::MAX_SAMPLES`, 50 M).
    pub samples: Vec<u32>,
    /// The thread's longest on-CPU period, ns.
    period_ns: u64,
}

impl ThreadSamples {
    /// The thread's slices (see the module doc).
    pub fn slices(&self, p: &SampledProfile) -> ThreadSlices {
        let v = self
            .samples
            .iter()
            .filter_map(|&i| {
                let s = p.samples.get(i as usize)?;
                let (start, end) = interval(s.kind, s.time_ns, s.weight_ns);
                Some((start, end, i as usize))
            })
            .collect();
        ThreadSlices {
            pid: self.pid,
            tid: self.tid,
            slices: lay_out(v, self.period_ns.saturating_mul(MAX_LATE_PERIODS)),
        }
    }
}

/// Every thread's samples, threads ordered by (pid, tid): lay each out with
/// [`ThreadSamples::slices`] in turn.
pub fn threads(p: &SampledProfile) -> Vec<ThreadSamples> {
    let mut by: BTreeMap<(i32, i32), (Vec<u32>, u64)> = BTreeMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let (list, period) = by.entry((s.pid, s.tid)).or_default();
        // Indices fit: a recording holds at most `validate::MAX_SAMPLES` (50 M).
        list.push(u32::try_from(i).unwrap_or(u32::MAX));
        if matches!(s.kind, SampleKind::OnCpu) {
            *period = (*period).max(s.weight_ns);
        }
    }
    by.into_iter()
        .map(|((pid, tid), (samples, period_ns))| ThreadSamples {
            pid,
            tid,
            samples,
            period_ns,
        })
        .collect()
}

/// Every thread's slices, threads ordered by (pid, tid).
#[cfg(test)]
pub fn thread_slices(p: &SampledProfile) -> Vec<ThreadSlices> {
    threads(p).iter().map(|t| t.slices(p)).collect()
}

/// Lay one thread's `(start, end, sample)` intervals end to end (see the module doc).
fn lay_out(mut v: Vec<Interval>, max_late: u64) -> Vec<Slice> {
    v.sort_unstable();
    let mut cursor = 0u64;
    // Collected in place (an interval and a slice are the same size): a thread's
    // samples are held once, not twice.
    v.into_iter()
        .filter_map(|(start, end, sample)| {
            let at = start.max(cursor);
            let end = if at - start <= max_late {
                at.saturating_add(end - start)
            } else {
                end
            };
            (end > at).then(|| {
                cursor = end;
                Slice {
                    start_ns: at,
                    end_ns: end,
                    sample,
                }
            })
        })
        .collect()
}

/// An open or close of a node on a thread's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<N> {
    /// `node` opens at `at_ns`, inside every node open before it.
    Open { node: N, at_ns: u64 },
    /// The innermost open node, `node`, closes at `at_ns`.
    Close { node: N, at_ns: u64 },
}

/// The balanced events of `slices`, each slice's nodes given by `path` (root first).
#[cfg(test)]
pub fn walk<N: PartialEq + Clone>(
    slices: &[Slice],
    path: impl FnMut(&Slice) -> Vec<N>,
) -> Vec<Event<N>> {
    let mut events = Vec::new();
    walk_each(slices, path, |e| events.push(e));
    events
}

/// The balanced events of `slices`, each slice's nodes given by `path` (root first),
/// handed to `emit` one by one in order (nothing is collected: an export writes them
/// as they come).
pub fn walk_each<N: PartialEq + Clone>(
    slices: &[Slice],
    mut path: impl FnMut(&Slice) -> Vec<N>,
    mut emit: impl FnMut(Event<N>),
) {
    let mut open: Vec<N> = Vec::new();
    let mut last_end: Option<u64> = None;
    for s in slices {
        let nodes = path(s);
        if last_end.is_some_and(|e| e != s.start_ns) {
            close_down_to(&mut open, 0, last_end.unwrap_or(s.start_ns), &mut emit);
        }
        let common = open.iter().zip(&nodes).take_while(|(a, b)| a == b).count();
        close_down_to(&mut open, common, s.start_ns, &mut emit);
        for n in nodes.into_iter().skip(common) {
            emit(Event::Open {
                node: n.clone(),
                at_ns: s.start_ns,
            });
            open.push(n);
        }
        last_end = Some(s.end_ns);
    }
    if let Some(e) = last_end {
        close_down_to(&mut open, 0, e, &mut emit);
    }
}

/// Close the open nodes above depth `keep`, innermost first, at `at_ns`.
fn close_down_to<N>(open: &mut Vec<N>, keep: usize, at_ns: u64, emit: &mut impl FnMut(Event<N>)) {
    while open.len() > keep {
        if let Some(node) = open.pop() {
            emit(Event::Close { node, at_ns });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{ThreadSample, WaitState};

    fn sample(tid: i32, time_ns: u64, weight_ns: u64, on: bool) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid,
            time_ns,
            stack: None.into(),
            weight_ns,
            kind: if on {
                SampleKind::OnCpu
            } else {
                SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                }
            },
        }
    }

    #[test]
    fn overlaps_around_a_switch_are_laid_end_to_end_never_double_counted() {
        let p = SampledProfile {
            samples: vec![
                sample(7, 100, 10, true),  // [90, 100]
                sample(7, 95, 50, false),  // [95, 145] overlaps the tick by 5
                sample(7, 150, 10, true),  // [140, 150] overlaps the wait by 5
                sample(7, 5, 10, true),    // [0, 5] saturates at the start
                sample(7, 100, 40, false), // [100, 140] would be 50 late: cut to nothing
                sample(8, 20, 0, false),   // zero length: dropped
            ]
            .into(),
            ..Default::default()
        };
        let t = thread_slices(&p);
        let seven = t.iter().find(|t| t.tid == 7).map(|t| t.slices.clone());
        let spans: Vec<(u64, u64)> = seven
            .unwrap_or_default()
            .iter()
            .map(|s| (s.start_ns, s.end_ns))
            .collect();
        assert_eq!(spans, vec![(0, 5), (90, 100), (100, 150), (150, 160)]);
        assert!(
            t.iter()
                .find(|t| t.tid == 8)
                .is_some_and(|t| t.slices.is_empty())
        );
    }

    #[test]
    fn walk_shares_prefixes_of_touching_slices_and_balances() {
        let slices = [
            Slice {
                start_ns: 0,
                end_ns: 10,
                sample: 0,
            },
            Slice {
                start_ns: 10,
                end_ns: 20,
                sample: 1,
            },
            Slice {
                start_ns: 30,
                end_ns: 40,
                sample: 2,
            },
        ];
        let paths = [vec!['m', 'a'], vec!['m', 'b'], vec!['m', 'b']];
        let ev = walk(&slices, |s| {
            paths.get(s.sample).cloned().unwrap_or_default()
        });
        use Event::{Close as C, Open as O};
        assert_eq!(
            ev,
            vec![
                O {
                    node: 'm',
                    at_ns: 0
                },
                O {
                    node: 'a',
                    at_ns: 0
                },
                C {
                    node: 'a',
                    at_ns: 10
                },
                O {
                    node: 'b',
                    at_ns: 10
                },
                C {
                    node: 'b',
                    at_ns: 20
                },
                C {
                    node: 'm',
                    at_ns: 20
                },
                O {
                    node: 'm',
                    at_ns: 30
                },
                O {
                    node: 'b',
                    at_ns: 30
                },
                C {
                    node: 'b',
                    at_ns: 40
                },
                C {
                    node: 'm',
                    at_ns: 40
                },
            ]
        );
    }
}
