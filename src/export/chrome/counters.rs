//! The profiled run's timeline (polled from /proc while it ran) as Chrome trace `C`
//! counter events on the target's process: `CPU %` (of one core), `RSS (KiB)`,
//! `threads` (threads and processes of the tree) and `storage I/O (bytes/s)` (read and
//! write). Times are the points' own, in µs since the run's start; a value that is
//! not finite is left out of its event, never written as 0.

use std::collections::BTreeMap;

use super::{Args, TraceEvent};
use crate::profile::RunMeasurement;

/// The counter events of `run`'s timeline.
pub(super) fn events(run: &RunMeasurement) -> Vec<TraceEvent<'static>> {
    let mut events = Vec::new();
    for p in &run.timeline {
        let ts = p.t_ms * 1000.0;
        if !ts.is_finite() {
            continue;
        }
        let series: [(&str, &[(&'static str, f64)]); 4] = [
            ("CPU %", &[("cpu_pct", p.cpu_pct)]),
            ("RSS (KiB)", &[("rss_kb", p.rss_kb as f64)]),
            (
                "threads",
                &[
                    ("threads", p.threads as f64),
                    ("processes", p.processes as f64),
                ],
            ),
            (
                "storage I/O (bytes/s)",
                &[("read", p.read_bps), ("write", p.write_bps)],
            ),
        ];
        for (name, values) in series {
            let args: BTreeMap<&'static str, f64> = values
                .iter()
                .copied()
                .filter(|(_, v)| v.is_finite())
                .collect();
            if args.is_empty() {
                continue;
            }
            events.push(TraceEvent {
                name: std::borrow::Cow::Borrowed(name),
                ph: "C",
                pid: run.pid,
                tid: run.pid,
                ts: Some(ts),
                dur: None,
                cat: Some("timeline"),
                args: Some(Args::Counter(args)),
            });
        }
    }
    events
}
