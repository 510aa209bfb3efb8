//! The /proc poller: while a run is in flight, a thread lists every live process of the
//! tree and reads its stat and io files at a fixed interval (default 20 ms, ≥ 50 Hz).
//! From that it keeps the peak of the summed resident set, the peak thread count, the
//! main process's first and last RSS, every pid it saw, and a timeline point at most
//! every `timeline_every` (CPU %, RSS, I/O rates, threads, processes).
//!
//! A process shorter than one interval may never be seen: callers treat the sampled
//! peak as a lower bound and combine it with rusage's largest single process.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::procfs::{self, ProcIo};
use crate::profile::TimelinePoint;
use crate::target::tree::descendants_of_self;

/// What the poller found over the run.
#[derive(Debug, Default)]
pub struct PollResult {
    pub tree_rss_peak_kb: Option<u64>,
    pub threads_peak: u64,
    pub main_rss_first_kb: Option<u64>,
    pub main_rss_last_kb: Option<u64>,
    pub main_rss_samples: u32,
    pub seen_pids: HashSet<i32>,
    pub timeline: Vec<TimelinePoint>,
}

#[derive(Debug)]
pub struct Poller {
    stop: Sender<()>,
    handle: JoinHandle<PollResult>,
}

impl Poller {
    pub fn start(
        main_pid: i32,
        start: Instant,
        interval: Duration,
        timeline_every: Duration,
    ) -> Poller {
        let (stop, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("profmap-poll".into())
            .spawn(move || poll_loop(main_pid, start, interval, timeline_every, rx))
            .unwrap_or_else(|_| {
                // Could not start a thread: return an empty result instead of failing the run.
                std::thread::spawn(PollResult::default)
            });
        Poller { stop, handle }
    }

    pub fn stop(self) -> PollResult {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_default()
    }
}

#[derive(Default, Clone, Copy)]
struct Last {
    ticks: u64,
    io: ProcIo,
}

fn poll_loop(
    main_pid: i32,
    start: Instant,
    interval: Duration,
    timeline_every: Duration,
    stop: Receiver<()>,
) -> PollResult {
    let mut r = PollResult::default();
    let page_kb = procfs::page_kb();
    let hz = procfs::clock_ticks();
    let mut last: HashMap<i32, Last> = HashMap::new();
    let mut last_point: Option<(f64, u64, u64, u64)> = None; // t_ms, ticks, read, write (cumulative deltas)
    let mut cum_ticks = 0u64;
    let mut cum_read = 0u64;
    let mut cum_write = 0u64;
    loop {
        let now = Instant::now();
        let pids = descendants_of_self();
        let mut rss_kb = 0u64;
        let mut threads = 0u64;
        let mut live = 0u64;
        let mut next_last = HashMap::with_capacity(pids.len());
        for pid in pids {
            let Some(st) = procfs::read_stat(pid) else {
                continue;
            };
            // A zombie has no memory and no threads worth counting.
            if st.num_threads == 0 {
                continue;
            }
            let io = procfs::read_io(pid).unwrap_or_default();
            live += 1;
            r.seen_pids.insert(pid);
            let kb = st.rss_pages * page_kb;
            rss_kb += kb;
            threads += st.num_threads;
            if pid == main_pid && kb > 0 {
                r.main_rss_first_kb.get_or_insert(kb);
                r.main_rss_last_kb = Some(kb);
                r.main_rss_samples += 1;
            }
            let prev = last.get(&pid).copied().unwrap_or_default();
            cum_ticks += st.cpu_ticks.saturating_sub(prev.ticks);
            cum_read += io.read_bytes.saturating_sub(prev.io.read_bytes);
            cum_write += io.write_bytes.saturating_sub(prev.io.write_bytes);
            next_last.insert(
                pid,
                Last {
                    ticks: st.cpu_ticks,
                    io,
                },
            );
        }
        last = next_last;
        if live > 0 {
            r.tree_rss_peak_kb = Some(r.tree_rss_peak_kb.unwrap_or(0).max(rss_kb));
            r.threads_peak = r.threads_peak.max(threads);
            let t_ms = now.duration_since(start).as_secs_f64() * 1e3;
            let due = match last_point {
                None => true,
                Some((t0, ..)) => t_ms - t0 >= timeline_every.as_secs_f64() * 1e3,
            };
            if due {
                let (t0, k0, r0, w0) = last_point.unwrap_or((0.0, 0, 0, 0));
                let dt_s = ((t_ms - t0) / 1e3).max(1e-6);
                r.timeline.push(TimelinePoint {
                    t_ms,
                    cpu_pct: (cum_ticks - k0) as f64 / hz / dt_s * 100.0,
                    rss_kb,
                    read_bps: (cum_read - r0) as f64 / dt_s,
                    write_bps: (cum_write - w0) as f64 / dt_s,
                    threads,
                    processes: live,
                });
                last_point = Some((t_ms, cum_ticks, cum_read, cum_write));
            }
        }
        let spent = now.elapsed();
        match stop.recv_timeout(interval.saturating_sub(spent)) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    r
}
