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
//! The file is written as it is made (see `write_trace`): memory holds one thread's
//! laid-out samples at a time, not the trace (618 MB for a 1.17 M-sample recording,
//! which took 1.6 GB to build in memory before).
//!
//! Invariants: per thread, slices come out in open order (a parent before its children,
//! children within their parent), `dur` > 0; nothing read from the recording is indexed
//! without `get`.

mod counters;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use serde::Serialize;

use super::speedscope::frames::{self, FrameTable};
use super::speedscope::slices::{self, Event, Slice};
use crate::analyse::{FastMap, WaitCategory};
use crate::error::Error;
use crate::export::{Exporter, Input, JsonItems, write_buffered};
use crate::plan::ExportFormat;
use crate::profile::{SampleKind, WaitState};

/// One trace event (the whole file is `{"traceEvents": [...], "displayTimeUnit": "ms",
/// "otherData": {...}}`, written event by event).
#[derive(Debug, Serialize)]
struct TraceEvent<'a> {
    /// Slice, counter or metadata name.
    name: Cow<'a, str>,
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
    args: Option<Args<'a>>,
}

/// The args of an event.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Args<'a> {
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
        resource: Option<&'a str>,
    },
    /// Where a frame's code is, when known.
    Frame {
        /// Source file.
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<&'a str>,
        /// Source line.
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
        /// Binary, shared object or module.
        #[serde(skip_serializing_if = "Option::is_none")]
        module: Option<&'a str>,
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
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<(), Error> {
        write_buffered(self.format(), out, |w| write_trace(input, w))
    }
}

/// Write the whole trace of `input`, event by event: one thread's slices at a time are
/// held (time order needs them sorted), with a duration per slice (see
/// [`thread_events`]); never the events, never the file.
fn write_trace(input: &Input, out: &mut impl Write) -> io::Result<()> {
    let table = RefCell::new(FrameTable::default());
    let mut items = JsonItems::default();
    let mut cpu = SliceEvents::default();
    let mut pids = BTreeSet::new();
    out.write_all(b"{\"traceEvents\":[")?;
    for t in slices::threads(&input.profile) {
        let t = t.slices(&input.profile);
        if t.slices.is_empty() {
            continue;
        }
        if pids.insert(t.pid) {
            let label = frames::process_label(input, t.pid);
            items.put(out, &meta("process_name", t.pid, t.pid, label))?;
        }
        let thread = frames::thread_name(input, t.pid, t.tid);
        items.put(out, &meta("thread_name", t.pid, t.tid, thread))?;
        let writers = (&mut cpu, &mut items);
        thread_events(input, &table, (t.pid, t.tid), &t.slices, writers, out)?;
    }
    if let Some(run) = &input.rec.profiled_run {
        if pids.insert(run.pid) {
            let name = format!("profiled run ({})", run.pid);
            items.put(out, &meta("process_name", run.pid, run.pid, name))?;
        }
        for e in counters::events(run) {
            items.put(out, &e)?;
        }
    }
    let mut other_data = BTreeMap::new();
    other_data.insert("exporter", format!("profmap {}", env!("CARGO_PKG_VERSION")));
    other_data.insert("command", input.rec.meta.command.join(" "));
    other_data.insert("run_id", input.rec.meta.run_id.clone());
    out.write_all(b"],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
    serde_json::to_writer(&mut *out, &other_data)?;
    out.write_all(b"}")
}

/// An `M` event naming a process or thread.
fn meta(what: &'static str, pid: i32, tid: i32, name: String) -> TraceEvent<'static> {
    TraceEvent {
        name: Cow::Borrowed(what),
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

/// One thread's slices as `X` events, in open order (a parent before its children).
/// An event's duration is known only at its close, after its children: a first walk
/// finds every duration (8 bytes a slice, where holding the events took 24), the
/// second writes the events.
fn thread_events(
    input: &Input,
    table: &RefCell<FrameTable>,
    (pid, tid): (i32, i32),
    slices: &[Slice],
    (cpu, items): (&mut SliceEvents, &mut JsonItems),
    out: &mut impl Write,
) -> io::Result<()> {
    let nodes = |s: &Slice| {
        let path = table.borrow_mut().path(input, s.sample);
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
    };
    let mut durations: Vec<u64> = Vec::new();
    // The slices open now (their index in `durations`, their start), innermost last.
    let mut open: Vec<(usize, u64)> = Vec::new();
    slices::walk_each(slices, nodes, |e| match e {
        Event::Open { at_ns, .. } => {
            open.push((durations.len(), at_ns));
            durations.push(0);
        }
        Event::Close { at_ns, .. } => {
            if let Some((i, start)) = open.pop()
                && let Some(d) = durations.get_mut(i)
            {
                *d = at_ns.saturating_sub(start);
            }
        }
    });
    let mut result = Ok(());
    let mut durations = durations.into_iter();
    slices::walk_each(slices, nodes, |e| {
        if let Event::Open { node, at_ns } = e {
            let dur_ns = durations.next().unwrap_or(0);
            if result.is_ok() {
                let t = table.borrow();
                let times = (at_ns, dur_ns);
                result = cpu.write(input, &t, (pid, tid), node, times, items, out);
            }
        }
    });
    result
}

/// The slices' events, their constant parts serialized once: an event is its frame's
/// head (`{"name":…`), the thread and times, and a tail (`"cat"` and `"args"`) per
/// frame for on-CPU slices and per (wait category, state, resource) for off-CPU ones —
/// the very bytes the whole event serialized gives (a third of the trace's time was
/// escaping each slice's name and args again).
#[derive(Debug, Default)]
struct SliceEvents {
    /// By frame: its head, up to `"pid":`, and its on-CPU tail, from `,"cat"`.
    frames: Vec<Option<(Box<str>, Box<str>)>>,
    /// The off-CPU tails by (category, state, resource).
    waits: FastMap<(WaitCategory, u8, Option<u32>), Box<str>>,
}

/// What separates an event's head from its tail when serialized with zeros.
const ZEROS: &str = ",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0.0,\"dur\":0.0";

/// Event `e` serialized with zeros for thread and times, cut into (head, tail); `None`
/// when it does not have that shape.
fn cut(e: &TraceEvent) -> Option<(String, String)> {
    let whole = serde_json::to_string(e).ok()?;
    let at = whole.find(ZEROS)?;
    let head = format!("{},\"ph\":\"X\",\"pid\":", &whole[..at]);
    Some((head, whole[at + ZEROS.len()..].to_string()))
}

impl SliceEvents {
    /// Write the `X` event of the slice of `node`.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        input: &Input,
        table: &FrameTable,
        (pid, tid): (i32, i32),
        node: Node,
        (at_ns, dur_ns): (u64, u64),
        items: &mut JsonItems,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let k = node.frame as usize;
        if self.frames.len() <= k {
            self.frames.resize(k + 1, None);
        }
        let cpu = Node { wait: None, ..node };
        if self.frames[k].is_none() {
            let parts = cut(&slice(input, table, (0, 0), cpu, (0, 0)));
            self.frames[k] = parts.map(|(h, t)| (h.into(), t.into()));
        }
        let wait_tail = match node.wait {
            Some(i) => match self.waits.entry(wait_key(input, i)) {
                Entry::Occupied(e) => Some(&**e.into_mut()),
                Entry::Vacant(v) => cut(&slice(input, table, (0, 0), node, (0, 0)))
                    .map(|(_, t)| &**v.insert(t.into())),
            },
            None => None,
        };
        let (Some((head, cpu_tail)), true) =
            (&self.frames[k], node.wait.is_none() || wait_tail.is_some())
        else {
            // Not the expected shape: the event whole, as before.
            return items.put(out, &slice(input, table, (pid, tid), node, (at_ns, dur_ns)));
        };
        items.next(out)?;
        write!(out, "{head}{pid},\"tid\":{tid},\"ts\":")?;
        serde_json::to_writer(&mut *out, &us(at_ns))?;
        out.write_all(b",\"dur\":")?;
        serde_json::to_writer(&mut *out, &us(dur_ns))?;
        out.write_all(wait_tail.unwrap_or(cpu_tail).as_bytes())
    }
}

/// What an off-CPU slice's args depend on: its sample's category, state and resource.
fn wait_key(input: &Input, i: usize) -> (WaitCategory, u8, Option<u32>) {
    let state = input
        .profile
        .samples
        .get(i)
        .map_or(u8::MAX, |s| s.kind.code());
    (input.category(i), state, input.resources.get(i))
}

/// The `X` event of one slice.
fn slice<'a>(
    input: &'a Input,
    table: &'a FrameTable,
    (pid, tid): (i32, i32),
    node: Node,
    (at_ns, dur_ns): (u64, u64),
) -> TraceEvent<'a> {
    let frame = table.frames.get(node.frame as usize);
    let name = frame.map_or(Cow::Borrowed("[unknown frame]"), |f| Cow::Borrowed(&f.name));
    let (cat, args) = match node.wait {
        None => (
            "cpu",
            frame
                .filter(|f| f.file.is_some() || f.module.is_some())
                .map(|f| Args::Frame {
                    file: f.file.as_deref(),
                    line: f.line,
                    module: f.module.as_deref(),
                }),
        ),
        Some(i) => ("off-cpu", Some(wait_args(input, i))),
    };
    TraceEvent {
        name,
        ph: "X",
        pid,
        tid,
        ts: Some(us(at_ns)),
        dur: Some(us(dur_ns)),
        cat: Some(cat),
        args,
    }
}

/// The args of off-CPU sample `i`.
fn wait_args<'a>(input: &'a Input, i: usize) -> Args<'a> {
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
        resource: input.resource_name(i),
    }
}
