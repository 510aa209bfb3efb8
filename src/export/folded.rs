//! Collapsed ("folded") stacks, the input format of flamegraph tools:
//! `proc (pid);thread (tid);frame;...;frame VALUE`, one line per distinct stack, sorted.
//! Repeated runs of one program (see `analyse::calltree::ProcessGroups`) are one
//! `name (N processes);name (N processes)` prefix, and a pool of same-named threads one
//! `proc (pid);name (N threads)` prefix, so a flamegraph shows each as one tower.
//!
//! - VALUE is in **microseconds** of weight (on-CPU sampling periods plus, unless
//!   `on_cpu_only`, off-CPU interval durations), rounded; lines that round to 0 µs are
//!   dropped.
//! - Frames run root first, as recorded, start-up plumbing included. Kernel frames carry
//!   the `_[k]` suffix that flamegraph tools understand (and hide when drawing).
//! - An off-CPU interval ends with a synthetic frame naming where its time went, e.g.
//!   `[off-cpu: sleep]` (see [`off_cpu_frame`]); a sample without a stack has the single
//!   frame `[no stack]`.
//! - `;` in a frame name is written `:`, and line breaks as spaces, so a line always
//!   splits back into the same frames.

use std::collections::{BTreeMap, HashMap};

use crate::analyse::calltree::ProcessGroups;
use crate::analyse::classify::{WaitCategory, categorize};
use crate::profile::{FrameKind, SampleKind, SampledProfile};

/// The synthetic leaf frame of an off-CPU interval of category `c`.
pub fn off_cpu_frame(c: WaitCategory) -> String {
    format!("[off-cpu: {}]", c.key())
}

/// The name a frame gets in folded output.
pub fn frame_name(function: &str, kind: FrameKind) -> String {
    let clean: String = function
        .chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect();
    match kind {
        FrameKind::Kernel => format!("{clean}_[k]"),
        _ => clean,
    }
}

/// The folded stacks of `p` (see the module doc for the format; values in µs).
///
/// Samples are first summed per (process, thread, stack, kind) — one hash per sample,
/// memory bounded by the distinct keys — and each key's line is made once.
pub fn folded(p: &SampledProfile, on_cpu_only: bool) -> String {
    let mut by_key: HashMap<(i32, i32, Option<u32>, SampleKind), u64> = HashMap::new();
    for s in &p.samples {
        if on_cpu_only && !matches!(s.kind, SampleKind::OnCpu) {
            continue;
        }
        *by_key
            .entry((s.pid, s.tid, s.stack.get(), s.kind))
            .or_default() += s.weight_ns;
    }
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut stack_text: HashMap<(Option<u32>, SampleKind), String> = HashMap::new();
    let mut prefixes: HashMap<(i32, i32), String> = HashMap::new();
    let groups = ProcessGroups::of(p);
    for ((pid, tid, stack, kind), ns) in by_key {
        let prefix = prefixes.entry((pid, tid)).or_insert_with(|| {
            // Repeated runs of one program are merged, as in the steps: their
            // single thread is named without its tid.
            let proc_ = groups.label(p, pid).replace(';', ":");
            let thread = match groups.size(pid) {
                Some(_) => groups.label(p, pid).replace(';', ":"),
                None => groups.thread_label(p, pid, tid).replace(';', ":"),
            };
            format!("{proc_};{thread}")
        });
        let frames = stack_text
            .entry((stack, kind))
            .or_insert_with(|| stack_line(p, stack, kind));
        *weights.entry(format!("{prefix};{frames}")).or_default() += ns;
    }
    let mut out = String::new();
    for (line, ns) in weights {
        let us = (ns + 500) / 1000;
        if us > 0 {
            out.push_str(&line);
            out.push(' ');
            out.push_str(&us.to_string());
            out.push('\n');
        }
    }
    out
}

/// The frames of one stack as a folded line's tail, the off-CPU frame last.
fn stack_line(p: &SampledProfile, stack: Option<u32>, kind: SampleKind) -> String {
    let stack = stack.map(|l| p.stack_frames(l)).unwrap_or_default();
    let mut text = if stack.is_empty() {
        "[no stack]".to_string()
    } else {
        let names: Vec<String> = stack
            .iter()
            .map(|f| frame_name(&f.function, f.kind))
            .collect();
        names.join(";")
    };
    if !matches!(kind, SampleKind::OnCpu) {
        text.push(';');
        text.push_str(&off_cpu_frame(categorize(kind, &stack)));
    }
    text
}

/// The folded stacks as an exporter (`--export folded`: the same `stacks.folded` every
/// deep profile writes).
#[derive(Debug)]
pub struct Folded;

impl super::Exporter for Folded {
    fn format(&self) -> crate::plan::ExportFormat {
        crate::plan::ExportFormat::Folded
    }
    fn file_name(&self) -> &'static str {
        "stacks.folded"
    }
    fn write(
        &self,
        input: &super::Input,
        out: &mut dyn std::io::Write,
    ) -> Result<(), crate::error::Error> {
        out.write_all(folded(&input.profile, false).as_bytes())
            .map_err(|e| super::write_error(self.format(), e))
    }
}
