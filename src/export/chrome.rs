//! Chrome trace events (`trace.json`, the JSON that ui.perfetto.dev and chrome://tracing
//! open), times in microseconds since the profiled run's start:
//!
//! - `M` metadata events naming each process and thread;
//! - `X` complete events: each thread's stacks as nested slices, laid out from the same
//!   laid-out timeline as speedscope's evented profiles (`speedscope::slices`), so that
//!   consecutive samples of one stack are one slice per frame and a thread's slices
//!   overlap only by nesting; an off-CPU interval is a leaf slice `[off-cpu: KEY]`
//!   (category `off-cpu`) with args `wait_class`, `state` and `resource` (null when
//!   unknown);
//! - `C` counter events from the profiled run's timeline (`counters`).
//!
//! Invariants: per thread, slices come out in open order (a parent before its children,
//! children within their parent), `dur` > 0; nothing read from the recording is indexed
//! without `get`.

mod counters;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::speedscope::frames::{self, FrameTable};
use super::speedscope::slices::{self, Event, Slice};
use crate::error::Error;
use crate::export::{Exporter, Input, write_error};
use crate::plan::ExportFormat;
use crate::profile::{SampleKind, WaitState};

/// A whole trace file.
#[derive(Debug, Serialize)]
struct Trace {
    /// Every event: metadata, slices, counters.
    #[serde(rename = "traceEvents")]
    trace_events: Vec<TraceEvent>,
    /// How chrome://tracing shows times.
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    /// Who wrote it, for what.
    #[serde(rename = "otherData")]
    other_data: BTreeMap<&'static str, String>,
}

/// One trace event.
#[derive(Debug, Serialize)]
struct TraceEvent {
    /// Slice, counter or metadata name.
    name: String,
    /// Phase: `M`, `X` or `C`.
    ph: &'static str,
    /// Process id.
    pid: i32,
    /// Thread id (the pid for counters).
    tid: i32,
    /// Start, µs since the run's start (absent on metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    /// Duration, µs (`X` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// `cpu`, `off-cpu` or `timeline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    /// What the event carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Args>,
}

/// The args of an event.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Args {
    /// A metadata event's name.
    Name {
        /// The process's or thread's label.
        name: String,
    },
    /// An off-CPU interval.
    Wait {
        /// The wait category's key (`sleep`, `file`, `lock`...).
        wait_class: &'static str,
        /// The thread's state at the switch.
        state: &'static str,
        /// What it waited on; null when unknown.
        resource: Option<String>,
    },
    /// Where a frame's code is, when known.
    Frame {
        /// Source file.
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// Source line.
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
        /// Binary, shared object or module.
        #[serde(skip_serializing_if = "Option::is_none")]
        module: Option<String>,
    },
    /// A counter's series and values.
    Counter(BTreeMap<&'static str, f64>),
}

/// A slice's node: an exported frame, and for an off-CPU leaf its sample (so that no
/// two intervals merge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Node {
    /// Index into the frame table.
    frame: u32,
    /// The off-CPU sample this leaf stands for.
    wait: Option<usize>,
}

/// The Chrome trace exporter (`trace.json`).
#[derive(Debug)]
pub struct Chrome;

impl Exporter for Chrome {
    fn format(&self) -> ExportFormat {
        ExportFormat::Chrome
    }
    fn file_name(&self) -> &'static str {
        "trace.json"
    }
    fn write(&self, input: &Input, out: &mut dyn std::io::Write) -> Result<(), Error> {
        let trace = build(input);
        serde_json::to_writer(&mut *out, &trace)
            .map_err(|e| write_error(self.format(), e.into()))?;
        out.flush().map_err(|e| write_error(self.format(), e))
    }
}

/// The whole trace of `input`.
fn build(input: &Input) -> Trace {
    let mut table = FrameTable::default();
    let mut events = Vec::new();
    let mut pids = BTreeSet::new();
    for t in slices::thread_slices(&input.profile) {
        if t.slices.is_empty() {
            continue;
        }
        if pids.insert(t.pid) {
            events.push(meta(
                "process_name",
                t.pid,
                t.pid,
                frames::process_label(input, t.pid),
            ));
        }
        let thread = frames::thread_name(input, t.pid, t.tid);
        events.push(meta("thread_name", t.pid, t.tid, thread));
        thread_events(input, &mut table, t.pid, t.tid, &t.slices, &mut events);
    }
    if let Some(run) = &input.rec.profiled_run {
        if pids.insert(run.pid) {
            let name = format!("profiled run ({})", run.pid);
            events.push(meta("process_name", run.pid, run.pid, name));
        }
        counters::push(run, &mut events);
    }
    let mut other_data = BTreeMap::new();
    other_data.insert("exporter", format!("profmap {}", env!("CARGO_PKG_VERSION")));
    other_data.insert("command", input.rec.meta.command.join(" "));
    other_data.insert("run_id", input.rec.meta.run_id.clone());
    Trace {
        trace_events: events,
        display_time_unit: "ms",
        other_data,
    }
}

/// An `M` event naming a process or thread.
fn meta(what: &str, pid: i32, tid: i32, name: String) -> TraceEvent {
    TraceEvent {
        name: what.to_string(),
        ph: "M",
        pid,
        tid,
        ts: None,
        dur: None,
        cat: None,
        args: Some(Args::Name { name }),
    }
}

/// Microseconds of `ns`.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// One thread's nested `X` slices, in open order.
fn thread_events(
    input: &Input,
    table: &mut FrameTable,
    pid: i32,
    tid: i32,
    slices: &[Slice],
    events: &mut Vec<TraceEvent>,
) {
    let walked = slices::walk(slices, |s| {
        let path = table.path(input, s.sample);
        let off_cpu = input
            .profile
            .samples
            .get(s.sample)
            .is_some_and(|x| matches!(x.kind, SampleKind::OffCpu { .. }));
        let n = path.len();
        path.into_iter()
            .enumerate()
            .map(|(d, frame)| Node {
                frame,
                wait: (off_cpu && d + 1 == n).then_some(s.sample),
            })
            .collect()
    });
    // Open events become slices at once (so parents precede children); each close
    // fills in the duration of the innermost open one.
    let mut open: Vec<(usize, u64)> = Vec::new();
    for e in walked {
        match e {
            Event::Open { node, at_ns } => {
                open.push((events.len(), at_ns));
                events.push(slice(input, table, pid, tid, node, at_ns));
            }
            Event::Close { at_ns, .. } => {
                if let Some((i, start)) = open.pop()
                    && let Some(ev) = events.get_mut(i)
                {
                    ev.dur = Some(us(at_ns.saturating_sub(start)));
                }
            }
        }
    }
}

/// The `X` event of `node` opening at `at_ns` (its duration filled in at its close).
fn slice(
    input: &Input,
    table: &FrameTable,
    pid: i32,
    tid: i32,
    node: Node,
    at_ns: u64,
) -> TraceEvent {
    let frame = table.frames.get(node.frame as usize);
    let name = frame.map_or_else(|| "[unknown frame]".to_string(), |f| f.name.clone());
    let (cat, args) = match node.wait {
        Some(i) => ("off-cpu", Some(wait_args(input, i))),
        None => (
            "cpu",
            frame
                .filter(|f| f.file.is_some() || f.module.is_some())
                .map(|f| Args::Frame {
                    file: f.file.clone(),
                    line: f.line,
                    module: f.module.clone(),
                }),
        ),
    };
    TraceEvent {
        name,
        ph: "X",
        pid,
        tid,
        ts: Some(us(at_ns)),
        dur: Some(0.0),
        cat: Some(cat),
        args,
    }
}

/// The args of off-CPU sample `i`.
fn wait_args(input: &Input, i: usize) -> Args {
    let state = match input.profile.samples.get(i).map(|s| s.kind) {
        Some(SampleKind::OffCpu { state }) => match state {
            WaitState::Sleeping => "sleeping",
            WaitState::Uninterruptible => "uninterruptible",
            WaitState::Preempted => "preempted",
            WaitState::Other => "other",
        },
        _ => "other",
    };
    Args::Wait {
        wait_class: input.category(i).key(),
        state,
        resource: input.resource_name(i).map(str::to_string),
    }
}
