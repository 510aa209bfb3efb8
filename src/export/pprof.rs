//! pprof (`profile.pb.gz`): the recording as a gzip-compressed `profile.proto`, read by
//! `go tool pprof`, Pyroscope, Parca and Grafana.
//!
//! - Sample types: `samples/count` (on-CPU ticks and off-CPU intervals), `cpu/nanoseconds`
//!   (on-CPU samples' periods; 0 for off-CPU intervals) and `wall/nanoseconds` (both:
//!   each interval weighs its duration), the default. `period_type` is
//!   `cpu/nanoseconds`, `period` one sampling period; `time_nanos` is the session's start
//!   and `duration_nanos` the profiled run's wall time (0 when the recording has none).
//! - Labels: `process` and `thread` (names, when known) and numeric `pid`, `tid`; off-CPU
//!   samples add `wait` (the analysis' category key, e.g. `sleep`), `class` (its
//!   bottleneck class), `state` (the thread state at switch-out) and `resource` when the
//!   analysis knows what was waited on; their stacks end in a synthetic
//!   `[off-cpu: KEY]` location, as in the folded stacks, so the wall view names the wait.
//!   `Input::categories` and `Input::resources` index `Input::profile.samples`.
//! - Samples with the same stack and labels are merged (values summed); a sample with
//!   no stack has the single synthetic location `[no stack]`.
//! - Locations, functions and mappings: see [`tables`]. Build IDs come from the
//!   recording's module table when it has one.

pub mod proto;
pub mod tables;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use self::proto::{Label, Profile, Sample, ValueType};
use self::tables::{ModuleFile, Tables};
use super::{Exporter, Input};
use crate::analyse::WaitCategory;
use crate::error::Error;
use crate::plan::ExportFormat;
use crate::profile::{SampleKind, WaitState};

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
        let bytes = profile(input).encode_to_vec();
        let mut gz = GzEncoder::new(out, Compression::default());
        gz.write_all(&bytes)
            .and_then(|()| gz.finish().map(drop))
            .map_err(|e| super::write_error(self.format(), e))
    }
}

/// What makes two samples one: their stack and their labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SampleKey {
    /// Leaf stack node.
    stack: Option<u32>,
    pid: i32,
    tid: i32,
    /// Off-CPU: the thread state, category key and resource name.
    off_cpu: Option<(WaitState, WaitCategory, Option<String>)>,
}

/// The name pprof shows for a thread state.
fn state_name(s: WaitState) -> &'static str {
    match s {
        WaitState::Sleeping => "sleeping",
        WaitState::Uninterruptible => "uninterruptible",
        WaitState::Preempted => "preempted",
        WaitState::Other => "other",
    }
}

/// Nanoseconds as pprof's int64, saturating.
fn ns(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The whole profile of `input`, not yet encoded.
pub fn profile(input: &Input) -> Profile {
    let p = &*input.profile;
    let mut t = Tables::new(module_files(p));
    // The profiled command's binary: the first process's executable.
    if let Some(exe) = p.processes.first().and_then(|x| x.exe.as_deref()) {
        let name = std::path::Path::new(exe).file_name();
        t.main_module(&name.map_or_else(|| exe.into(), |n| n.to_string_lossy()));
    }
    let sample_type = ["samples:count", "cpu:nanoseconds", "wall:nanoseconds"]
        .iter()
        .filter_map(|s| s.split_once(':'))
        .map(|(ty, unit)| ValueType {
            r#type: t.string(ty),
            unit: t.string(unit),
        })
        .collect();
    let samples = samples(input, &mut t);
    let period_type = Some(ValueType {
        r#type: t.string("cpu"),
        unit: t.string("nanoseconds"),
    });
    let period = if p.frequency_hz > 0.0 {
        (1e9 / p.frequency_hz).round() as i64
    } else {
        0
    };
    let comment = vec![
        t.string(&format!("profmap {}", input.rec.meta.tool_version)),
        t.string(&format!("run {}", input.rec.meta.run_id)),
        t.string(&p.sampler),
    ];
    let default_sample_type = t.string("wall");
    Profile {
        sample_type,
        sample: samples,
        mapping: std::mem::take(&mut t.mappings),
        location: std::mem::take(&mut t.locations),
        function: std::mem::take(&mut t.functions),
        string_table: std::mem::take(&mut t.strings),
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: (input.rec.meta.started_unix_s * 1e9) as i64,
        duration_nanos: (p.wall_ms * 1e6) as i64,
        period_type,
        period,
        comment,
        default_sample_type,
    }
}

/// Each module's file (its path when the recording has it) and build ID.
fn module_files(p: &crate::profile::SampledProfile) -> HashMap<String, ModuleFile> {
    p.modules
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                ModuleFile {
                    path: m.path.clone(),
                    build_id: m.build_id.clone(),
                },
            )
        })
        .collect()
}

/// The samples, merged by stack and labels, in first-seen order.
fn samples(input: &Input, t: &mut Tables) -> Vec<Sample> {
    let p = &*input.profile;
    let mut order: Vec<SampleKey> = Vec::new();
    let mut values: HashMap<SampleKey, [i64; 3]> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let (off_cpu, cpu) = match s.kind {
            SampleKind::OnCpu => (None, ns(s.weight_ns)),
            SampleKind::OffCpu { state } => {
                let wait = input.category(i);
                let resource = input.resource_name(i).map(str::to_string);
                (Some((state, wait, resource)), 0)
            }
        };
        let key = SampleKey {
            stack: s.stack.get(),
            pid: s.pid,
            tid: s.tid,
            off_cpu,
        };
        let v = values.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            [0; 3]
        });
        v[0] = v[0].saturating_add(1);
        v[1] = v[1].saturating_add(cpu);
        v[2] = v[2].saturating_add(ns(s.weight_ns));
    }
    let processes: HashMap<i32, &str> = p
        .processes
        .iter()
        .map(|x| (x.pid, x.name.as_str()))
        .collect();
    let threads: HashMap<(i32, i32), &str> = p
        .threads
        .iter()
        .map(|x| ((x.pid, x.tid), x.name.as_str()))
        .collect();
    let mut stacks: HashMap<(Option<u32>, Option<WaitCategory>), Vec<u64>> = HashMap::new();
    let mut out = Vec::with_capacity(order.len());
    for key in order {
        let wait = key.off_cpu.as_ref().map(|o| o.1);
        let location_id = stacks
            .entry((key.stack, wait))
            .or_insert_with(|| {
                // An off-CPU interval ends in where its time went, as in the folded
                // stacks, so the wall view names the wait at the leaf.
                let mut ids: Vec<u64> = wait
                    .map(|w| t.synthetic(&super::folded::off_cpu_frame(w)))
                    .into_iter()
                    .collect();
                match key.stack {
                    Some(leaf) => ids.extend(t.stack(p, leaf)),
                    None => ids.push(t.synthetic("[no stack]")),
                }
                ids
            })
            .clone();
        let value = values.get(&key).copied().unwrap_or_default().to_vec();
        let names = (
            processes.get(&key.pid).copied(),
            threads.get(&(key.pid, key.tid)).copied(),
        );
        out.push(Sample {
            location_id,
            value,
            label: labels(t, &key, names),
        });
    }
    out
}

/// A sample's labels (see the module doc).
fn labels(t: &mut Tables, key: &SampleKey, names: (Option<&str>, Option<&str>)) -> Vec<Label> {
    let mut out = Vec::new();
    let mut text = |t: &mut Tables, k: &str, v: &str| {
        out.push(Label {
            key: t.string(k),
            str: t.string(v),
            ..Label::default()
        });
    };
    if let Some(name) = names.0 {
        text(t, "process", name);
    }
    if let Some(name) = names.1 {
        text(t, "thread", name);
    }
    if let Some((state, wait, resource)) = &key.off_cpu {
        text(t, "wait", wait.key());
        text(t, "class", wait.classification().as_str());
        text(t, "state", state_name(*state));
        if let Some(r) = resource {
            text(t, "resource", r);
        }
    }
    for (k, v) in [("pid", key.pid), ("tid", key.tid)] {
        out.push(Label {
            key: t.string(k),
            num: i64::from(v),
            ..Label::default()
        });
    }
    out
}
