//! The speedscope file format (`speedscope.json`, schema
//! <https://www.speedscope.app/file-format-schema.json>): per thread, one evented
//! profile of wall time (on-CPU runs and off-CPU intervals, the latter under a leaf
//! `[off-cpu: KEY]`) and one sampled profile of CPU time (on-CPU samples weighted by
//! their period). Frames are shared by all profiles, with file and line when known.
//!
//! The file is written as it is made, event by event (see `write_file`): memory holds
//! one thread's laid-out samples at a time, never the file.
//!
//! Invariants:
//! - Units are nanoseconds; evented times are ns since the profiled run's start.
//! - Every frame index is valid; each evented profile's events are balanced (every
//!   close matches the innermost open frame), in time order, between its start and end
//!   values (see `slices::walk_each`).
//! - The time an evented profile holds is its thread's slices
//!   (`slices::ThreadSamples::slices`): what the recording holds, never more (nothing counted
//!   twice around a switch).
//! - Threads are in (pid, tid) order; a thread without on-CPU samples has no sampled
//!   profile.

pub mod frames;
pub mod slices;

use std::io::{self, Write};

use serde::Serialize;

use crate::error::Error;
use crate::export::{Exporter, Input, JsonItems, write_buffered};
use crate::plan::ExportFormat;
use crate::profile::SampleKind;
use frames::FrameTable;
use slices::{Event, ThreadSamples, ThreadSlices};

/// The schema speedscope files point at.
const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// One frame of the shared table.
#[derive(Debug, Serialize)]
struct Frame<'a> {
    /// Function name (folded-style).
    name: &'a str,
    /// Source file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    /// Source line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
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
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<(), Error> {
        write_buffered(self.format(), out, |w| write_file(input, w))
    }
}

/// Write the whole file of `input`, profile by profile and event by event: one
/// thread's slices at a time are held, never the file. The object's members are
/// `$schema`; `profiles` (per thread: wall time, evented, then CPU time, sampled);
/// `shared.frames`, which every profile's indices point into (written last, once every
/// profile has interned its frames); `name` (the profiled command, speedscope's
/// title); `activeProfileIndex` (the wall time of the thread that holds the most);
/// `exporter`.
fn write_file(input: &Input, out: &mut impl Write) -> io::Result<()> {
    let p = &input.profile;
    let mut table = FrameTable::default();
    let mut profiles = JsonItems::default();
    let (mut count, mut active) = (0usize, (0usize, 0u64));
    out.write_all(b"{\"$schema\":")?;
    serde_json::to_writer(&mut *out, SCHEMA)?;
    out.write_all(b",\"profiles\":[")?;
    for thread in slices::threads(p) {
        let t = thread.slices(p);
        let label = frames::thread_label(input, t.pid, t.tid);
        if let (Some(first), Some(last)) = (t.slices.first(), t.slices.last()) {
            profiles.next(out)?;
            let name = format!("{label} — wall");
            evented(
                input,
                &mut table,
                &t,
                &name,
                (first.start_ns, last.end_ns),
                out,
            )?;
            let held = t.held_ns();
            if held > active.1 {
                active = (count, held);
            }
            count += 1;
        }
        drop(t);
        if sampled(input, &mut table, &thread, &label, &mut profiles, out)? {
            count += 1;
        }
    }
    out.write_all(b"],\"shared\":{\"frames\":[")?;
    let mut frames = JsonItems::default();
    for f in &table.frames {
        let frame = Frame {
            name: &f.name,
            file: f.file.as_deref(),
            line: f.line,
        };
        frames.put(out, &frame)?;
    }
    out.write_all(b"]},\"name\":")?;
    let name = format!("profmap: {}", input.rec.meta.command.join(" "));
    serde_json::to_writer(&mut *out, &name)?;
    write!(out, ",\"activeProfileIndex\":{},\"exporter\":", active.0)?;
    serde_json::to_writer(&mut *out, &format!("profmap {}", env!("CARGO_PKG_VERSION")))?;
    out.write_all(b"}")
}

/// A thread's wall time as an evented profile (it holds time, spanning `(start, end)`):
/// its open (`O`) and close (`C`) events, balanced and in time order, written as the
/// walk makes them.
fn evented(
    input: &Input,
    table: &mut FrameTable,
    t: &ThreadSlices,
    name: &str,
    (start, end): (u64, u64),
    out: &mut impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"type\":\"evented\",\"name\":")?;
    serde_json::to_writer(&mut *out, name)?;
    write!(
        out,
        ",\"unit\":\"nanoseconds\",\"startValue\":{start},\"endValue\":{end},\"events\":["
    )?;
    let mut result = Ok(());
    let mut first = true;
    slices::walk_each(
        &t.slices,
        |s| table.path(input, s.sample),
        |e| {
            if result.is_err() {
                return;
            }
            let (kind, frame, at) = match e {
                Event::Open { node, at_ns } => ('O', node, at_ns),
                Event::Close { node, at_ns } => ('C', node, at_ns),
            };
            let comma: &[u8] = if std::mem::take(&mut first) {
                b""
            } else {
                b","
            };
            // Written piece by piece (integers through serde_json's formatter, not
            // `write!`: a third of the file's time was `fmt` machinery).
            result = (|| {
                out.write_all(comma)?;
                out.write_all(match kind {
                    'O' => b"{\"type\":\"O\",\"frame\":",
                    _ => b"{\"type\":\"C\",\"frame\":",
                })?;
                serde_json::to_writer(&mut *out, &frame)?;
                out.write_all(b",\"at\":")?;
                serde_json::to_writer(&mut *out, &at)?;
                out.write_all(b"}")
            })();
        },
    );
    result?;
    out.write_all(b"]}")
}

/// A thread's CPU time as a sampled profile (each on-CPU sample's frame indices, root
/// first, and its period as its weight), written when it has an on-CPU sample; whether
/// it had one.
fn sampled(
    input: &Input,
    table: &mut FrameTable,
    t: &ThreadSamples,
    label: &str,
    profiles: &mut JsonItems,
    out: &mut impl Write,
) -> io::Result<bool> {
    let p = &input.profile;
    // Every on-CPU sample of the thread, wherever laid out: CPU time is not a timeline.
    let on_cpu = || {
        t.samples.iter().filter_map(|&i| {
            let s = p.samples.get(i as usize)?;
            (matches!(s.kind, SampleKind::OnCpu) && s.weight_ns > 0)
                .then_some((i as usize, s.weight_ns))
        })
    };
    if on_cpu().next().is_none() {
        return Ok(false);
    }
    let total = on_cpu().fold(0u64, |a, (_, w)| a.saturating_add(w));
    profiles.next(out)?;
    out.write_all(b"{\"type\":\"sampled\",\"name\":")?;
    serde_json::to_writer(&mut *out, &format!("{label} — CPU"))?;
    write!(
        out,
        ",\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":{total},\"samples\":["
    )?;
    let mut samples = JsonItems::default();
    for (i, _) in on_cpu() {
        samples.put(out, &table.path(input, i))?;
    }
    out.write_all(b"],\"weights\":[")?;
    let mut weights = JsonItems::default();
    for (_, w) in on_cpu() {
        weights.put(out, &w)?;
    }
    out.write_all(b"]}")?;
    Ok(true)
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
            categories: std::borrow::Cow::Owned(Default::default()),
            resources: std::borrow::Cow::Owned(Default::default()),
        };
        let bytes = crate::export::to_bytes(ExportFormat::Speedscope, &input).expect("written");
        let file: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
        let n = file["shared"]["frames"].as_array().map_or(0, Vec::len) as u64;
        let profile = &file["profiles"][0];
        assert_eq!(profile["type"], "evented");
        let events = profile["events"].as_array().expect("events");
        let mut depth = 0i64;
        for e in events {
            assert!(e["frame"].as_u64().is_some_and(|f| f < n));
            depth += if e["type"] == "O" { 1 } else { -1 };
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
