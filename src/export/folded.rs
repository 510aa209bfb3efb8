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

use std::collections::HashMap;

use crate::analyse::FastMap;
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
pub fn folded(p: &SampledProfile, on_cpu_only: bool) -> String {
    StackWeights::of(p).text(p, on_cpu_only)
}

/// The samples of a profile summed per (process, thread, stack, kind), with each
/// thread's line prefix: all that folded lines need from the samples, in memory bounded
/// by the distinct keys. Made in one pass over the samples, it can be turned into text
/// later, beside other work, and after the samples are gone (`text` reads only the
/// profile's frames and stacks).
#[derive(Debug, Default)]
pub struct StackWeights {
    by_key: FastMap<(i32, i32, Option<u32>, SampleKind), u64>,
    /// `proc (pid);thread (tid)`, per (pid, tid) of `by_key`.
    prefixes: HashMap<(i32, i32), String>,
}

impl StackWeights {
    /// One hash per sample.
    pub fn of(p: &SampledProfile) -> StackWeights {
        let mut by_key: FastMap<(i32, i32, Option<u32>, SampleKind), u64> = FastMap::default();
        for s in p.samples.iter() {
            *by_key
                .entry((s.pid, s.tid, s.stack.get(), s.kind))
                .or_default() += s.weight_ns;
        }
        let groups = ProcessGroups::of(p);
        let mut prefixes = HashMap::new();
        for &(pid, tid, _, _) in by_key.keys() {
            prefixes.entry((pid, tid)).or_insert_with(|| {
                // Repeated runs of one program are merged, as in the steps: their
                // single thread is named without its tid.
                let proc_ = groups.label(p, pid).replace(';', ":");
                let thread = match groups.size(pid) {
                    Some(_) => groups.label(p, pid).replace(';', ":"),
                    None => groups.thread_label(p, pid, tid).replace(';', ":"),
                };
                format!("{proc_};{thread}")
            });
        }
        StackWeights { by_key, prefixes }
    }

    /// The folded lines, sorted; on-CPU samples only when `on_cpu_only`. `p` is the
    /// profile `self` was made of (or the same less some samples).
    ///
    /// Every line is written once into one buffer (no string per line: with many
    /// distinct stacks the lines are most of this memory, and this runs beside the
    /// analysis), then the lines are sorted by their text and equal ones summed
    /// (threads of one group; stacks that differ only in lines of the same functions).
    pub fn text(&self, p: &SampledProfile, on_cpu_only: bool) -> String {
        let mut names: Vec<Option<String>> = vec![None; p.frames.len()];
        let mut buf = String::new();
        // (start, end) of a line in `buf`, and its weight.
        let mut lines: Vec<(usize, usize, u64)> = Vec::with_capacity(self.by_key.len());
        for (&(pid, tid, stack, kind), &ns) in &self.by_key {
            if on_cpu_only && !matches!(kind, SampleKind::OnCpu) {
                continue;
            }
            let start = buf.len();
            buf.push_str(self.prefixes.get(&(pid, tid)).map_or("", String::as_str));
            buf.push(';');
            push_stack(&mut buf, p, stack, kind, &mut names);
            lines.push((start, buf.len(), ns));
        }
        let text = |l: &(usize, usize, u64)| &buf[l.0..l.1];
        lines.sort_unstable_by(|a, b| text(a).cmp(text(b)));
        let mut out = String::with_capacity(buf.len() + lines.len() * 8);
        let mut i = 0;
        while i < lines.len() {
            let line = text(&lines[i]);
            let mut ns = 0;
            while i < lines.len() && text(&lines[i]) == line {
                ns += lines[i].2;
                i += 1;
            }
            let us = (ns + 500) / 1000;
            if us > 0 {
                out.push_str(line);
                out.push(' ');
                out.push_str(&us.to_string());
                out.push('\n');
            }
        }
        out
    }
}

/// Append the frames of one stack as a folded line's tail, the off-CPU frame last;
/// `names` caches each frame's folded name, by frame index.
fn push_stack(
    buf: &mut String,
    p: &SampledProfile,
    stack: Option<u32>,
    kind: SampleKind,
    names: &mut [Option<String>],
) {
    let ids = stack.map(|l| p.stack_frame_ids(l)).unwrap_or_default();
    let mut first = true;
    for &f in &ids {
        let Some((slot, frame)) = names.get_mut(f as usize).zip(p.frames.get(f as usize)) else {
            continue;
        };
        if !first {
            buf.push(';');
        }
        first = false;
        buf.push_str(slot.get_or_insert_with(|| frame_name(&frame.function, frame.kind)));
    }
    if first {
        buf.push_str("[no stack]");
    }
    if !matches!(kind, SampleKind::OnCpu) {
        let stack = stack.map(|l| p.stack_frames(l)).unwrap_or_default();
        buf.push(';');
        buf.push_str(&off_cpu_frame(categorize(kind, &stack)));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Leaf, ThreadSample};

    /// Every frame has its place in a line, an unnamed one too (a recording may hold
    /// one): `;` between each two, as many as the stack has frames less one.
    #[test]
    fn an_unnamed_frame_keeps_its_place_in_the_line() {
        let samples = [Some(1), Some(0), None].map(|leaf| ThreadSample {
            pid: 7,
            tid: 7,
            time_ns: 0,
            stack: Leaf::new(leaf),
            weight_ns: 1_000_000,
            kind: SampleKind::OnCpu,
        });
        let p = crate::export::test_profile::one_thread(&["", "b"], samples.to_vec());
        assert_eq!(
            folded(&p, false),
            "app (7);app (7); 1000\napp (7);app (7);;b 1000\napp (7);app (7);[no stack] 1000\n"
        );
    }
}
