//! Reading a spool back into an unsymbolized profile, as hostile input: the HEAD chunk
//! must come first; each TABL must continue the tables exactly where the previous one
//! ended, and every index in it (a stack's parent and frame, a frame's module or kernel
//! name) must name a row already read; every sample's stack must exist; a resource row
//! continues or replaces the table, and a wait names a resource read and one of its
//! append's samples, in ascending order (a wait past the samples its append delivered
//! is dropped). Row counts are
//! capped with the limits `validate` applies to recordings. The first chunk that is
//! cut off, damaged or breaks these rules ends the spool; what came before is kept and
//! the reason is returned in [`Recovered::problem`].

use std::collections::BTreeMap;
use std::io::Read;

use super::{
    Delta, Head, MAGIC, SpoolWait, Start, TAG_HEAD, TAG_SAMPLES, TAG_START, TAG_TABLES, VERSION,
};
use crate::profile::pmr::{Next, columns, next_chunk, show_tag};
use crate::profile::validate::{MAX_FRAMES, MAX_LIST, MAX_PROCESSES, MAX_SAMPLES, MAX_STRING};
use crate::profile::{Resource, Samples, SessionMeta, Waker};
use crate::sample::{RawFrame, RawProcess, RawProfile, RawThread, RawWait};

/// What a spool held.
#[derive(Debug)]
pub struct Recovered {
    /// The session's metadata.
    pub meta: SessionMeta,
    /// The run's start, when the run got that far.
    pub t0_ns: Option<u64>,
    /// The tables and samples read (times relative to `t0_ns`, or to the first sample
    /// when it is unknown), processes and threads as last appended.
    pub raw: RawProfile,
    /// Wall-clock time of the last complete append, seconds since the Unix epoch.
    pub last_unix_s: Option<f64>,
    /// CLOCK_MONOTONIC ns of the last complete append.
    pub last_mono_ns: Option<u64>,
    /// Why reading stopped before the end of the file (a cut-off or damaged chunk).
    pub problem: Option<String>,
}

/// The tables being rebuilt.
#[derive(Debug, Default)]
struct State {
    raw: RawProfile,
    processes: BTreeMap<i32, RawProcess>,
    threads: BTreeMap<i32, RawThread>,
    /// The waits of the last append, by absolute sample index: kept once its samples
    /// have been read (at the next append, or at the end).
    pending: Vec<(u32, RawWait)>,
    last_unix_s: Option<f64>,
    last_mono_ns: Option<u64>,
}

/// Read a spool from `r` (at its first byte). Errors are sentences: the spool is not
/// one, or its HEAD chunk cannot be read.
pub fn read(mut r: impl Read) -> Result<Recovered, String> {
    let mut head = [0u8; 12];
    r.read_exact(&mut head)
        .map_err(|_| "cut off inside its header".to_string())?;
    if head[..8] != MAGIC {
        return Err("not a profmap spool (no PMSPL header)".into());
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != VERSION {
        return Err(format!(
            "spool version {version} is not supported (this profmap reads version {VERSION})"
        ));
    }
    let meta = match next_chunk(&mut r) {
        Next::Chunk(TAG_HEAD, json) => {
            serde_json::from_slice::<Head>(&json)
                .map_err(|e| format!("its session header is malformed ({e})"))?
                .meta
        }
        Next::Chunk(tag, _) => return Err(format!("its first chunk is {}", show_tag(tag))),
        Next::Eof => return Err("cut off before its session header".into()),
        Next::Bad(why) => return Err(format!("its session header is unreadable: {why}")),
    };
    let mut st = State::default();
    let mut t0_ns = None;
    let problem = loop {
        let step = match next_chunk(&mut r) {
            Next::Chunk(TAG_START, json) => match serde_json::from_slice::<Start>(&json) {
                Ok(s) => {
                    t0_ns = t0_ns.or(Some(s.t0_ns));
                    Ok(())
                }
                Err(e) => Err(format!("its start chunk is malformed ({e})")),
            },
            Next::Chunk(TAG_TABLES, json) => match serde_json::from_slice::<Delta>(&json) {
                Ok(d) => st.apply(d),
                Err(e) => Err(format!("a table chunk is malformed ({e})")),
            },
            Next::Chunk(TAG_SAMPLES, block) => st.samples(&block),
            // A newer profmap's chunk: skipped.
            Next::Chunk(_, _) => Ok(()),
            Next::Eof => break None,
            Next::Bad(why) => Err(why),
        };
        if let Err(why) = step {
            break Some(why);
        }
    };
    Ok(st.finish(meta, t0_ns, problem))
}

impl State {
    /// Add one append's rows, checking that they continue the tables and that every
    /// index they hold names an existing row.
    fn apply(&mut self, d: Delta) -> Result<(), String> {
        let raw = &mut self.raw;
        let continues = [
            (d.first_module as usize, raw.modules.len(), "module"),
            (d.first_frame as usize, raw.frames.len(), "frame"),
            (d.first_stack as usize, raw.stacks.len(), "stack"),
            (
                d.first_kernel_name as usize,
                raw.kernel_names.len(),
                "kernel name",
            ),
        ];
        for (first, have, what) in continues {
            if first != have {
                return Err(format!(
                    "a table chunk starts at {what} {first} where {have} were read"
                ));
            }
        }
        let grown = [
            raw.modules.len() + d.modules.len(),
            raw.frames.len() + d.frames.len(),
            raw.stacks.len() + d.stacks.len(),
            raw.kernel_names.len() + d.kernel_names.len(),
        ];
        if grown.iter().any(|&n| n > MAX_FRAMES) {
            return Err(format!("more than {MAX_FRAMES} rows in a table"));
        }
        raw.modules.extend(d.modules);
        raw.kernel_names.extend(d.kernel_names);
        for f in &d.frames {
            let ok = match *f {
                RawFrame::User { module, .. } => (module as usize) < raw.modules.len(),
                RawFrame::KernelNamed { name } => (name as usize) < raw.kernel_names.len(),
                RawFrame::Kernel { .. } | RawFrame::Anon { .. } => true,
            };
            if !ok {
                return Err("a frame names a module or kernel name not recorded".into());
            }
        }
        raw.frames.extend(d.frames);
        for s in d.stacks {
            let own = raw.stacks.len();
            let parent_ok = s.parent.is_none_or(|p| (p as usize) < own);
            if !parent_ok || s.frame as usize >= raw.frames.len() {
                return Err(format!("stack node {own} names a missing parent or frame"));
            }
            raw.stacks.push(s);
        }
        for p in d.processes {
            self.processes.insert(p.pid, p);
        }
        for t in d.threads {
            self.threads.insert(t.tid, t);
        }
        if self.processes.len() > MAX_PROCESSES || self.threads.len() > MAX_PROCESSES {
            return Err(format!("more than {MAX_PROCESSES} processes or threads"));
        }
        self.resources(d.resources)?;
        self.waits(&d.waits)?;
        let raw = &mut self.raw;
        if let Some(info) = d.sampler {
            raw.sampler = info.description;
            raw.frequency_hz = info.frequency_hz;
            raw.wakers_recorded = info.wakers_recorded;
        }
        raw.lost_records = d.lost_records;
        self.last_unix_s = Some(d.at_unix_s).filter(|t| t.is_finite());
        self.last_mono_ns = Some(d.at_mono_ns);
        Ok(())
    }

    /// New or changed resource rows: each index continues the table or replaces a row.
    fn resources(&mut self, rows: Vec<(u32, Resource)>) -> Result<(), String> {
        let table = &mut self.raw.resources;
        for (i, r) in rows {
            let long = |t: Option<&str>| t.is_some_and(|t| t.len() > MAX_STRING);
            let texts = [Some(r.name.as_str()), r.local.as_deref(), r.peer.as_deref()];
            if texts.into_iter().any(long) || long(r.service.as_deref()) {
                return Err(format!("resource {i} has a name over {MAX_STRING} bytes"));
            }
            let len = table.len();
            match table.get_mut(i as usize) {
                Some(row) => *row = r,
                None if i as usize == len && len < MAX_LIST => table.push(r),
                None => {
                    return Err(format!(
                        "a table chunk sets resource {i} where {len} were read"
                    ));
                }
            }
        }
        Ok(())
    }

    /// An append's waits: the previous append's are kept where its samples arrived, these
    /// wait for their samples (the chunks after this one).
    fn waits(&mut self, waits: &[SpoolWait]) -> Result<(), String> {
        self.settle();
        let base = self.raw.samples.len();
        let resources = self.raw.resources.len();
        let known = |r: Option<u32>| r.is_none_or(|r| (r as usize) < resources);
        let mut prev = None;
        for w in waits {
            let sample = base + w.0 as usize;
            if prev.is_some_and(|p| p >= sample) || sample >= MAX_SAMPLES {
                return Err("a table chunk's waits are out of order or past the limit".into());
            }
            prev = Some(sample);
            let raw = w.raw();
            if !known(raw.resource) || !known(raw.pollfd0.and_then(|p| p.1)) {
                return Err("a wait names a resource not recorded".into());
            }
            self.pending.push((sample as u32, raw));
        }
        Ok(())
    }

    /// Keep the pending waits whose samples were read; drop the rest.
    fn settle(&mut self) {
        let n = self.raw.samples.len();
        let pending = std::mem::take(&mut self.pending);
        (self.raw.waits).extend(pending.into_iter().filter(|w| (w.0 as usize) < n));
    }

    /// One block of samples (on-CPU, off-CPU intervals), each naming stacks already read.
    fn samples(&mut self, block: &[u8]) -> Result<(), String> {
        if self.raw.samples.len() >= MAX_SAMPLES {
            return Err(format!("more than {MAX_SAMPLES} samples"));
        }
        let mut got = Samples::default();
        columns::decode(block, &mut got)
            .map_err(|why| format!("a sample block is damaged ({why})"))?;
        let stacks = self.raw.stacks.len();
        let known = |s: Option<u32>| s.is_none_or(|s| (s as usize) < stacks);
        if got.iter().any(|s| !known(s.stack.get())) || got.wakers().any(|w| !known(w.1.stack)) {
            return Err("a sample names a stack not recorded".into());
        }
        self.raw.samples.append(got);
        Ok(())
    }

    /// The profile read, times made relative to the run's start.
    fn finish(
        mut self,
        meta: SessionMeta,
        t0_ns: Option<u64>,
        problem: Option<String>,
    ) -> Recovered {
        self.settle();
        let mut raw = self.raw;
        let t0 = t0_ns
            .or_else(|| raw.samples.iter().map(|s| s.time_ns).min())
            .unwrap_or(0);
        raw.t0_ns = t0;
        let new_of = raw.samples.sort_by_time();
        for w in &mut raw.waits {
            w.0 = new_of[w.0 as usize];
        }
        drop(new_of);
        raw.waits.sort_unstable_by_key(|w| w.0);
        raw.samples
            .for_each_mut(|s| s.time_ns = s.time_ns.saturating_sub(t0));
        raw.samples.map_wakers(|w| Waker {
            time_ns: w.time_ns.saturating_sub(t0),
            ..w
        });
        raw.processes = self.processes.into_values().collect();
        raw.threads = self.threads.into_values().collect();
        raw.threads.sort_by_key(|t| (t.pid, t.tid));
        Recovered {
            meta,
            t0_ns,
            raw,
            last_unix_s: self.last_unix_s,
            last_mono_ns: self.last_mono_ns,
            problem,
        }
    }
}
