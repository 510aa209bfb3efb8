//! One thread of the Firefox export, written as it is made: its samples and markers as
//! columns, each column one pass over the thread's samples in time order, then the
//! tables they index (see `stacks`), then the rest of the thread's object as the crate
//! made it. What the thread holds while it is written is its sample indices (4 bytes a
//! sample) and its tables (per distinct stack), not the samples' columns.
//!
//! Invariants:
//! - Samples are in time order (ties in recorded order); `timeDeltas` are ms from the
//!   previous sample (the first from 0).
//! - A sample's weight is its time in sampling intervals, carried per (leaf, on/off-CPU)
//!   so that rounding never loses time: the weights of a stack add up to its time. An
//!   off-CPU interval shorter than what its stack still carries gets no sample (weight
//!   0) but keeps its marker.
//! - On-CPU samples carry their period as CPU delta (µs), off-CPU ones 0.

use std::io::{self, Write};

use serde_json::{Map, Value};

use super::markers::{OffCpuData, state_name};
use super::stacks::{Categories, Tables, column, last_column};
use crate::analyse::{FastMap, WaitCategory};
use crate::export::Input;
use crate::profile::{SampleKind, ThreadSample, WaitState};

/// The keys of a thread's object written here; every other key is the crate's.
const OWN_KEYS: [&str; 6] = [
    "frameTable",
    "funcTable",
    "markers",
    "samples",
    "stackTable",
    "stringArray",
];

/// Write thread `skeleton` (the crate's object for it, without samples) with the
/// samples `indices` (into `SampledProfile::samples`, any order; sorted here).
pub fn write(
    out: &mut impl Write,
    input: &Input,
    cats: &Categories,
    interval_ns: u64,
    skeleton: &Map<String, Value>,
    mut indices: Vec<u32>,
) -> io::Result<()> {
    let p = &input.profile;
    let time = |i: u32| p.samples.time_ns(i as usize);
    indices.sort_by_key(|&i| (time(i), i));
    let t = Thread {
        input,
        cats,
        interval_ns,
        indices,
    };
    let mut tables = Tables::default();
    out.write_all(b"{")?;
    t.samples(out, &mut tables)?;
    t.markers(out, &mut tables)?;
    tables.write(out)?;
    let mut first = true;
    for (k, v) in skeleton
        .iter()
        .filter(|(k, _)| !OWN_KEYS.contains(&k.as_str()))
    {
        if !std::mem::replace(&mut first, false) {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, k)?;
        out.write_all(b":")?;
        serde_json::to_writer(&mut *out, v)?;
    }
    out.write_all(b"}")
}

/// A thread being written.
struct Thread<'a> {
    input: &'a Input<'a>,
    cats: &'a Categories,
    interval_ns: u64,
    /// Its samples, in time order.
    indices: Vec<u32>,
}

/// A sample of the `samples` table: the recorded sample, its off-CPU category, weight.
type Row = (ThreadSample, Option<WaitCategory>, i32);

impl Thread<'_> {
    /// The thread's samples in time order, with their index.
    fn each(&self) -> impl Iterator<Item = (usize, ThreadSample)> + '_ {
        let samples = &self.input.profile.samples;
        (self.indices.iter()).filter_map(|&i| Some((i as usize, samples.get(i as usize)?)))
    }

    /// The rows of the `samples` table, weights carried as the module doc says.
    fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        let mut carry: FastMap<(Option<u32>, bool), u64> = FastMap::default();
        self.each().filter_map(move |(i, s)| {
            let off = match s.kind {
                SampleKind::OnCpu => None,
                SampleKind::OffCpu { .. } => Some(self.input.category(i)),
            };
            let left = carry.entry((s.stack.get(), off.is_some())).or_default();
            let total = *left + s.weight_ns;
            let weight = i32::try_from(total / self.interval_ns).unwrap_or(i32::MAX);
            *left = total % self.interval_ns;
            (off.is_none() || weight > 0).then_some((s, off, weight))
        })
    }

    /// The `samples` entry (followed by a comma).
    fn samples(&self, out: &mut impl Write, tables: &mut Tables) -> io::Result<()> {
        let p = &self.input.profile;
        out.write_all(b"\"samples\":{\"weightType\":\"samples\",")?;
        let stacks = self
            .rows()
            .map(|(s, off, _)| tables.stack(self.cats, p, s.stack.get(), off));
        column(out, "stack", stacks)?;
        let mut prev = 0u64;
        let deltas = self.rows().map(|(s, _, _)| {
            let d = s.time_ns.saturating_sub(prev);
            prev = s.time_ns;
            d as f64 / 1e6
        });
        column(out, "timeDeltas", deltas)?;
        column(out, "weight", self.rows().map(|r| r.2))?;
        let cpu = self.rows().map(|(s, off, _)| match off {
            None => s.weight_ns / 1000,
            Some(_) => 0,
        });
        column(out, "threadCPUDelta", cpu)?;
        write!(out, "\"length\":{}}},", self.rows().count())
    }

    /// The off-CPU intervals: (index, sample, state).
    fn off_cpu(&self) -> impl Iterator<Item = (usize, ThreadSample, WaitState)> + '_ {
        self.each().filter_map(|(i, s)| match s.kind {
            SampleKind::OffCpu { state } => Some((i, s, state)),
            SampleKind::OnCpu => None,
        })
    }

    /// The `markers` entry (followed by a comma).
    fn markers(&self, out: &mut impl Write, tables: &mut Tables) -> io::Result<()> {
        let (input, p) = (self.input, &self.input.profile);
        let n = self.off_cpu().count();
        write!(out, "\"markers\":{{\"length\":{n},")?;
        column(out, "category", (0..n).map(|_| self.cats.off_cpu))?;
        column(out, "phase", (0..n).map(|_| 1u8))?;
        out.write_all(b"\"data\":[")?;
        for (k, (i, s, state)) in self.off_cpu().enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            let c = input.category(i);
            let leaf = s.stack.get();
            OffCpuData {
                stack: leaf.map(|_| tables.stack(self.cats, p, leaf, None)),
                class: tables.string(c.classification().as_str()),
                state: tables.string(state_name(state)),
                resource: input.resource_name(i).map(|r| tables.string(r)),
            }
            .write(out)?;
        }
        out.write_all(b"],")?;
        let names = self
            .off_cpu()
            .map(|(i, _, _)| tables.string(input.category(i).key()));
        column(out, "name", names)?;
        let ms = |ns: u64| ns as f64 / 1e6;
        column(
            out,
            "startTime",
            self.off_cpu().map(|(_, s, _)| ms(s.time_ns)),
        )?;
        let ends = self
            .off_cpu()
            .map(|(_, s, _)| ms(s.time_ns.saturating_add(s.weight_ns)));
        last_column(out, "endTime", ends)?;
        out.write_all(b"},")
    }
}
