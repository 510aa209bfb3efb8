//! The speedscope file format (`speedscope.json`, schema
//! <https://www.speedscope.app/file-format-schema.json>): per thread, one evented
//! profile of wall time (on-CPU runs and off-CPU intervals, the latter under a leaf
//! `[off-cpu: KEY]`) and one sampled profile of CPU time (on-CPU samples weighted by
//! their period). Frames are shared by all profiles, with file and line when known.
//!
//! Invariants:
//! - Units are nanoseconds; evented times are ns since the profiled run's start.
//! - Every frame index is valid; each evented profile's events are balanced (every
//!   close matches the innermost open frame), in time order, between its start and end
//!   values (see `slices::walk`).
//! - The time an evented profile holds is its thread's slices
//!   (`slices::thread_slices`): what the recording holds, never more (nothing counted
//!   twice around a switch).
//! - Threads are in (pid, tid) order; a thread without on-CPU samples has no sampled
//!   profile.

pub mod frames;
pub mod slices;

use serde::Serialize;

use crate::error::Error;
use crate::export::{Exporter, Input, write_error};
use crate::plan::ExportFormat;
use crate::profile::SampleKind;
use frames::FrameTable;
use slices::{Event, ThreadSlices};

/// The schema speedscope files point at.
const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A whole speedscope file.
#[derive(Debug, Serialize)]
struct File {
    /// The schema's address.
    #[serde(rename = "$schema")]
    schema: &'static str,
    /// What every profile refers to.
    shared: Shared,
    /// Per thread: wall time (evented), then CPU time (sampled).
    profiles: Vec<Profile>,
    /// Shown in speedscope's title: the profiled command.
    name: String,
    /// The profile shown first: the wall time of the thread that holds the most.
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    /// `profmap <version>`.
    exporter: String,
}

/// The frames every profile's indices point into.
#[derive(Debug, Serialize)]
struct Shared {
    /// Each frame once.
    frames: Vec<Frame>,
}

/// One frame.
#[derive(Debug, Serialize)]
struct Frame {
    /// Function name (folded-style).
    name: String,
    /// Source file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    /// Source line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

/// One profile.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Profile {
    /// A thread's wall time as open/close events.
    Evented {
        /// The thread's label and `wall`.
        name: String,
        /// Always `nanoseconds`.
        unit: &'static str,
        /// The first event's time.
        #[serde(rename = "startValue")]
        start_value: u64,
        /// The last event's time.
        #[serde(rename = "endValue")]
        end_value: u64,
        /// Balanced, in time order.
        events: Vec<EventOut>,
    },
    /// A thread's CPU time as weighted stacks.
    Sampled {
        /// The thread's label and `CPU`.
        name: String,
        /// Always `nanoseconds`.
        unit: &'static str,
        /// 0.
        #[serde(rename = "startValue")]
        start_value: u64,
        /// The sum of the weights.
        #[serde(rename = "endValue")]
        end_value: u64,
        /// Each sample's frame indices, root first.
        samples: Vec<Vec<u32>>,
        /// Each sample's period, ns.
        weights: Vec<u64>,
    },
}

/// One open (`O`) or close (`C`) of a frame.
#[derive(Debug, Serialize)]
struct EventOut {
    /// `O` or `C`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Index into the shared frames.
    frame: u32,
    /// ns since the run's start.
    at: u64,
}

/// The speedscope exporter (`speedscope.json`).
#[derive(Debug)]
pub struct Speedscope;

impl Exporter for Speedscope {
    fn format(&self) -> ExportFormat {
        ExportFormat::Speedscope
    }
    fn file_name(&self) -> &'static str {
        "speedscope.json"
    }
    fn write(&self, input: &Input, out: &mut dyn std::io::Write) -> Result<(), Error> {
        let file = build(input);
        serde_json::to_writer(&mut *out, &file)
            .map_err(|e| write_error(self.format(), e.into()))?;
        out.flush().map_err(|e| write_error(self.format(), e))
    }
}

/// The whole file of `input`.
fn build(input: &Input) -> File {
    let mut table = FrameTable::default();
    let mut profiles = Vec::new();
    let mut active = (0usize, 0u64);
    for t in slices::thread_slices(&input.profile) {
        let label = frames::thread_label(input, t.pid, t.tid);
        if let Some(p) = evented(input, &mut table, &t, &label) {
            let held = t.held_ns();
            if held > active.1 {
                active = (profiles.len(), held);
            }
            profiles.push(p);
        }
        if let Some(p) = sampled(input, &mut table, &t, &label) {
            profiles.push(p);
        }
    }
    File {
        schema: SCHEMA,
        shared: Shared {
            frames: table
                .frames
                .into_iter()
                .map(|f| Frame {
                    name: f.name,
                    file: f.file,
                    line: f.line,
                })
                .collect(),
        },
        profiles,
        name: format!("profmap: {}", input.rec.meta.command.join(" ")),
        active_profile_index: active.0,
        exporter: format!("profmap {}", env!("CARGO_PKG_VERSION")),
    }
}

/// A thread's wall time as an evented profile; None when it holds no time.
fn evented(
    input: &Input,
    table: &mut FrameTable,
    t: &ThreadSlices,
    label: &str,
) -> Option<Profile> {
    let first = t.slices.first()?;
    let last = t.slices.last()?;
    let events = slices::walk(&t.slices, |s| table.path(input, s.sample))
        .into_iter()
        .map(|e| match e {
            Event::Open { node, at_ns } => EventOut {
                kind: "O",
                frame: node,
                at: at_ns,
            },
            Event::Close { node, at_ns } => EventOut {
                kind: "C",
                frame: node,
                at: at_ns,
            },
        })
        .collect();
    Some(Profile::Evented {
        name: format!("{label} — wall"),
        unit: "nanoseconds",
        start_value: first.start_ns,
        end_value: last.end_ns,
        events,
    })
}

/// A thread's CPU time as a sampled profile; None when it has no on-CPU sample.
fn sampled(
    input: &Input,
    table: &mut FrameTable,
    t: &ThreadSlices,
    label: &str,
) -> Option<Profile> {
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    // Every on-CPU sample of the thread, wherever laid out: CPU time is not a timeline.
    for (i, s) in input.profile.samples.iter().enumerate() {
        if s.pid == t.pid
            && s.tid == t.tid
            && matches!(s.kind, SampleKind::OnCpu)
            && s.weight_ns > 0
        {
            samples.push(table.path(input, i));
            weights.push(s.weight_ns);
        }
    }
    if samples.is_empty() {
        return None;
    }
    Some(Profile::Sampled {
        name: format!("{label} — CPU"),
        unit: "nanoseconds",
        start_value: 0,
        end_value: weights.iter().sum(),
        samples,
        weights,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{
        Frame, FrameKind, Recording, SampledProfile, SessionMeta, StackNode, ThreadSample,
        WaitState,
    };

    /// A recording whose stacks point at frames and parents that are not there, and
    /// loop back on themselves.
    fn damaged() -> (Recording, SampledProfile) {
        let rec = Recording::new(SessionMeta {
            run_id: "t".into(),
            command: vec!["t".into()],
            started_unix_s: 0.0,
            tool_version: "0".into(),
            hostname: None,
            kernel: None,
            cpus: None,
        });
        let frame = Frame {
            function: "f".into(),
            module: None,
            file: Some("f.c".into()),
            line: Some(3),
            kind: FrameKind::User,
            inlined: false,
        };
        let tick = |time_ns, stack| ThreadSample {
            pid: 1,
            tid: 1,
            time_ns,
            stack,
            weight_ns: 10,
            kind: SampleKind::OnCpu,
        };
        let mut wait = tick(30, Some(1).into());
        wait.kind = SampleKind::OffCpu {
            state: WaitState::Sleeping,
        };
        let p = SampledProfile {
            frames: vec![frame],
            stacks: vec![
                StackNode {
                    parent: Some(0),
                    frame: 0,
                },
                StackNode {
                    parent: Some(7),
                    frame: 42,
                },
            ],
            samples: vec![tick(10, Some(0).into()), tick(20, Some(9).into()), wait].into(),
            ..Default::default()
        };
        (rec, p)
    }

    #[test]
    fn a_damaged_recording_exports_without_panicking_and_stays_balanced() {
        let (rec, p) = damaged();
        let input = Input {
            rec: &rec,
            profile: std::borrow::Cow::Borrowed(&p),
            categories: Vec::new().into(),
            resources: std::borrow::Cow::Owned(Default::default()),
        };
        let file = build(&input);
        let n = file.shared.frames.len() as u32;
        let Some(Profile::Evented { events, .. }) = file.profiles.first() else {
            panic!("no evented profile");
        };
        let mut depth = 0i64;
        for e in events {
            assert!(e.frame < n);
            depth += if e.kind == "O" { 1 } else { -1 };
            assert!(depth >= 0);
        }
        assert_eq!(depth, 0);
        for f in ExportFormat::ALL {
            if matches!(f, ExportFormat::Speedscope | ExportFormat::Chrome) {
                assert!(crate::export::to_bytes(f, &input).is_ok());
            }
        }
    }
}
