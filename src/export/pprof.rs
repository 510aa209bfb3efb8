//! pprof (`profile.pb.gz`): the format of `go tool pprof`, Pyroscope, Parca and Grafana.
//!
//! - Sample types: `samples/count`, `cpu/nanoseconds`, `wall/nanoseconds` (the default).
//!   An on-CPU sample weighs its period in cpu and wall; an off-CPU interval weighs 0 cpu
//!   and its duration in wall, and its stack ends in a synthetic `[off-cpu: CLASS]` frame
//!   (as in the folded stacks), so `-sample_index=wall` shows where the waiting went.
//! - Labels on every sample: `process` and `thread` (names as the steps give them:
//!   repeated runs of one program and pools of same-named threads are one name), numeric
//!   `pid` and `tid`; on off-CPU samples `wait` (the wait category's key), `class` (its
//!   bottleneck class), `state` and, when known, `resource` (the file, socket peer or pipe).
//! - Locations, functions and mappings come from `tables` (inlined frames as lines of one
//!   location); the message definitions from `proto`.
//! - The whole message is gzip-compressed, as pprof files are.

pub mod proto;
pub mod tables;

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::{Exporter, Input, write_error};
use crate::analyse::calltree::ProcessGroups;
use crate::error::Error;
use crate::plan::ExportFormat;
use crate::profile::{SampleKind, WaitState};
use proto::{Label, Profile, Sample, ValueType};
use tables::Tables;

/// The pprof exporter.
#[derive(Debug)]
pub struct Pprof;

impl Exporter for Pprof {
    fn format(&self) -> ExportFormat {
        ExportFormat::Pprof
    }
    fn file_name(&self) -> &'static str {
        "profile.pb.gz"
    }
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<(), Error> {
        let bytes = build(input).encode_to_vec();
        let mut gz = GzEncoder::new(out, Compression::default());
        gz.write_all(&bytes)
            .and_then(|_| gz.finish().map(|_| ()))
            .map_err(|e| write_error(ExportFormat::Pprof, e))
    }
}

/// The profile message of `input`.
pub fn build(input: &Input) -> Profile {
    let p = input.profile.as_ref();
    let mut t = Tables::new(HashMap::new());
    let vt = |t: &mut Tables, ty: &str, unit: &str| ValueType {
        r#type: t.string(ty),
        unit: t.string(unit),
    };
    let sample_type = vec![
        vt(&mut t, "samples", "count"),
        vt(&mut t, "cpu", "nanoseconds"),
        vt(&mut t, "wall", "nanoseconds"),
    ];
    let period_type = vt(&mut t, "cpu", "nanoseconds");
    // The first process's executable is the main binary.
    if let Some(exe) = p.processes.first().and_then(|pr| pr.exe.as_deref()) {
        let name = std::path::Path::new(exe)
            .file_name()
            .map_or(exe.to_string(), |n| n.to_string_lossy().into_owned());
        if p.frames
            .iter()
            .any(|f| f.module.as_deref() == Some(name.as_str()))
        {
            t.main_module(&name);
        }
    }
    let groups = ProcessGroups::of(p);
    let mut names: HashMap<(i32, i32), (i64, i64)> = HashMap::new();
    let mut stacks: HashMap<(Option<u32>, Option<i64>), Vec<u64>> = HashMap::new();
    let mut samples = Vec::with_capacity(p.samples.len());
    let keys = [
        "process", "thread", "pid", "tid", "wait", "class", "state", "resource",
    ]
    .map(|k| t.string(k));
    for (i, s) in p.samples.iter().enumerate() {
        let (proc_name, thread_name) = *names.entry((s.pid, s.tid)).or_insert_with(|| {
            let proc_ = groups.label(p, s.pid);
            let thread = match groups.size(s.pid) {
                Some(_) => proc_.clone(),
                None => groups.thread_label(p, s.pid, s.tid),
            };
            (t.string(&proc_), t.string(&thread))
        });
        let str_label = |key: i64, s: i64| Label {
            key,
            str: s,
            ..Label::default()
        };
        let num_label = |key: i64, num: i64| Label {
            key,
            num,
            ..Label::default()
        };
        let mut label = vec![
            str_label(keys[0], proc_name),
            str_label(keys[1], thread_name),
            num_label(keys[2], i64::from(s.pid)),
            num_label(keys[3], i64::from(s.tid)),
        ];
        let weight = i64::try_from(s.weight_ns).unwrap_or(i64::MAX);
        let (cpu, leaf) = match s.kind {
            SampleKind::OnCpu => (weight, None),
            SampleKind::OffCpu { state } => {
                let c = input.category(i);
                label.push(str_label(keys[4], t.string(c.key())));
                label.push(str_label(keys[5], t.string(c.classification().as_str())));
                label.push(str_label(keys[6], t.string(state_name(state))));
                if let Some(r) = input.resource_name(i) {
                    label.push(str_label(keys[7], t.string(r)));
                }
                let frame = super::folded::off_cpu_frame(c);
                (0, Some(t.synthetic(&frame) as i64))
            }
        };
        let location_id = stacks
            .entry((s.stack, leaf))
            .or_insert_with(|| {
                let mut ids: Vec<u64> = leaf.map(|l| l as u64).into_iter().collect();
                match s.stack {
                    Some(l) => ids.extend(t.stack(p, l)),
                    None => ids.push(t.synthetic("[no stack]")),
                }
                ids
            })
            .clone();
        samples.push(Sample {
            location_id,
            value: vec![1, cpu, weight],
            label,
        });
    }
    let period = if p.frequency_hz > 0.0 {
        (1e9 / p.frequency_hz).round() as i64
    } else {
        0
    };
    let comment = vec![t.string(&format!(
        "profmap {}: {}",
        input.rec.meta.tool_version,
        input.rec.meta.command.join(" ")
    ))];
    let default_sample_type = t.string("wall");
    Profile {
        sample_type,
        sample: samples,
        mapping: std::mem::take(&mut t.mappings),
        location: std::mem::take(&mut t.locations),
        function: std::mem::take(&mut t.functions),
        time_nanos: (input.rec.meta.started_unix_s * 1e9) as i64,
        duration_nanos: (p.wall_ms * 1e6) as i64,
        period_type: Some(period_type),
        period,
        comment,
        default_sample_type,
        string_table: std::mem::take(&mut t.strings),
        ..Profile::default()
    }
}

/// The switched-out thread's state, as a label.
fn state_name(s: WaitState) -> &'static str {
    match s {
        WaitState::Sleeping => "sleeping",
        WaitState::Uninterruptible => "uninterruptible",
        WaitState::Preempted => "preempted",
        WaitState::Other => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::tables::{Tables, location_runs};
    use crate::profile::{Frame, FrameKind, SampledProfile, StackNode};
    use std::collections::HashMap;

    fn frame(name: &str, line: u32, inlined: bool) -> Frame {
        Frame {
            function: name.into(),
            module: Some("app".into()),
            file: Some("app.c".into()),
            line: Some(line),
            kind: FrameKind::User,
            inlined,
        }
    }

    #[test]
    fn inlined_frames_are_lines_of_their_callers_location() {
        // main -> work (inlined helper_b, inlined helper_a at the leaf)
        let p = SampledProfile {
            frames: vec![
                frame("main", 10, false),
                frame("work", 20, false),
                frame("helper_b", 30, true),
                frame("helper_a", 40, true),
            ],
            stacks: (0u32..4)
                .map(|i| StackNode {
                    parent: i.checked_sub(1),
                    frame: i,
                })
                .collect(),
            ..Default::default()
        };
        let leaf_first = super::tables::frames_leaf_first(&p, 3);
        let runs = location_runs(&leaf_first);
        assert_eq!(runs.len(), 2);
        let names: Vec<&str> = runs[0].iter().map(|f| f.function.as_str()).collect();
        assert_eq!(names, ["helper_a", "helper_b", "work"]);
        let mut t = Tables::new(HashMap::new());
        let ids = t.stack(&p, 3);
        assert_eq!(ids.len(), 2);
        let loc = &t.locations[0];
        assert_eq!(loc.line.len(), 3);
        assert_eq!(loc.line[0].line, 40, "innermost first");
        assert_eq!(t.mappings.len(), 1);
        assert!(t.mappings[0].has_inline_frames);
        // The same stack again reuses every id.
        assert_eq!(t.stack(&p, 3), ids);
        assert_eq!(t.locations.len(), 2);
    }

    #[test]
    fn a_damaged_stack_link_ends_the_stack_without_a_panic() {
        let p = SampledProfile {
            frames: vec![frame("main", 1, false)],
            stacks: vec![
                StackNode {
                    parent: Some(7),
                    frame: 0,
                },
                StackNode {
                    parent: Some(1),
                    frame: 0,
                },
            ],
            ..Default::default()
        };
        let mut t = Tables::new(HashMap::new());
        assert_eq!(t.stack(&p, 0).len(), 1);
        assert_eq!(
            t.stack(&p, 1).len(),
            2,
            "a cycle is cut at the table's size"
        );
        assert!(t.stack(&p, 99).is_empty());
    }
}
