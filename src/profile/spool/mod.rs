//! The crash spool (`profile.pmr.partial`): what a profiled run has recorded so far,
//! appended to the output folder during the run, so that a profmap killed mid-run
//! (SIGKILL, OOM, a panic) leaves a recording `report` can recover.
//!
//! ```text
//! file   = MAGIC (8 bytes) · version (u32 LE) · chunk*      (chunks as in `pmr`)
//! HEAD   the session's metadata, JSON ([`Head`]); written when the spool is opened
//! STRT   the run's start on CLOCK_MONOTONIC, JSON ([`Start`]); once the target runs
//! TABL   one append's new table rows, resources and waits, JSON ([`Delta`])
//! SMPL   that append's new on-CPU samples and closed off-CPU intervals, a
//!        `pmr::columns` block (absolute times)
//! ```
//!
//! Every append is one `write` of its TABL chunk followed by its SMPL chunks: the
//! samples of an append only name rows of that append or earlier ones, and its waits
//! name samples of that append (by their index among them) and resources sent so far. The spool holds
//! the unsymbolized tables (as the sampler keeps them): recovery symbolizes them the way
//! `record` does.
//!
//! Invariants:
//! - Writers: one [`SpoolSink`] per spool, shared by the session (HEAD, STRT) and the
//!   drain thread (appends) behind a mutex, so chunks never interleave. The file is
//!   opened by the session layer (`O_EXCL|O_NOFOLLOW`, in the folder reached without
//!   following links); nothing here builds a path.
//! - Readers ([`read`]): a cut-off or damaged chunk ends the spool; everything before
//!   it is kept. Every index is checked against the rows read so far, every count is
//!   capped, nothing panics (see `read`).

mod read;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, Write};
use std::sync::Mutex;

use flate2::Compression;
use serde::{Deserialize, Serialize};

use super::pmr::{columns, write_chunk};
use super::{Resource, SessionMeta, Woken};
use crate::sample::{RawFrame, RawModule, RawProcess, RawStackNode, RawThread, RawWait};

pub use read::{Recovered, read};

/// Read the spool at `path`, refusing a link, a FIFO or any file that is not regular
/// (as recordings are refused, see `profile::source`).
pub fn read_file(path: &std::path::Path) -> Result<Recovered, crate::error::Error> {
    use super::source::{SourceError, open_regular};
    let bad = |why: String| crate::error::Error::BadRecording {
        path: path.to_path_buf(),
        why,
    };
    let file = open_regular(path).map_err(|e| match e {
        SourceError::Io(e) => crate::error::Error::io(path, e),
        SourceError::Refused(why) => bad(why),
    })?;
    read(io::BufReader::with_capacity(1 << 16, file)).map_err(bad)
}

/// The spool's file name in the output folder.
pub const SPOOL_FILE: &str = "profile.pmr.partial";
/// The first bytes of a spool (not a recording's: `pmr` refuses it by its magic).
pub const MAGIC: [u8; 8] = *b"\x89PMSPL\r\n";
/// The spool version this profmap writes and reads.
pub const VERSION: u32 = 1;

const TAG_HEAD: [u8; 4] = *b"HEAD";
const TAG_START: [u8; 4] = *b"STRT";
const TAG_TABLES: [u8; 4] = *b"TABL";
const TAG_SAMPLES: [u8; 4] = *b"SMPL";

/// The HEAD chunk: what a recovered recording's metadata is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Head {
    /// The session's metadata, as the recording would have it.
    pub meta: SessionMeta,
}

/// The STRT chunk: when the profiled run started.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Start {
    /// CLOCK_MONOTONIC ns of the run's start (sample times become relative to it).
    pub t0_ns: u64,
}

/// The TABL chunk: the rows added to the sampler's tables since the previous append.
/// `first_*` is the index of the first row given (the number of rows appended before):
/// a reader checks it, so a lost or repeated append is found, not misread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Wall-clock time of this append, seconds since the Unix epoch.
    pub at_unix_s: f64,
    /// CLOCK_MONOTONIC ns of this append.
    pub at_mono_ns: u64,
    /// What the sampler is; in the first append only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerInfo>,
    /// Index of `modules[0]` in the whole table.
    pub first_module: u32,
    /// New modules.
    pub modules: Vec<RawModule>,
    /// Index of `frames[0]`.
    pub first_frame: u32,
    /// New frames.
    pub frames: Vec<RawFrame>,
    /// Index of `stacks[0]`.
    pub first_stack: u32,
    /// New stack nodes (parents precede children).
    pub stacks: Vec<RawStackNode>,
    /// Index of `kernel_names[0]`.
    pub first_kernel_name: u32,
    /// New names of kernel functions known by name only.
    pub kernel_names: Vec<String>,
    /// Processes that are new or changed since the previous append (whole, maps too).
    pub processes: Vec<RawProcess>,
    /// Threads that are new or changed since the previous append.
    pub threads: Vec<RawThread>,
    /// Resources (descriptors resolved during the run) that are new or changed since the
    /// previous append, with their index in the whole table: an index past the rows read
    /// so far must be the next one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<(u32, Resource)>,
    /// What this append's blocked off-CPU intervals waited on, ascending by sample:
    /// the sample's index among this append's samples (the SMPL chunks after this one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<SpoolWait>,
    /// Records the kernel dropped so far (a running total).
    pub lost_records: u64,
}

/// A blocked call's raw arguments (`sample::RawWait`) for one sample of an append, as a
/// JSON array: `[sample, arg0, resource, [pollfd, resource]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolWait(
    pub u32,
    pub u64,
    pub Option<u32>,
    pub Option<(i32, Option<u32>)>,
);

impl SpoolWait {
    /// Sample `sample` of an append blocked with `w`.
    pub fn new(sample: u32, w: RawWait) -> SpoolWait {
        SpoolWait(sample, w.arg0, w.resource, w.pollfd0)
    }

    /// The wait as the sampler holds it.
    pub fn raw(&self) -> RawWait {
        RawWait {
            arg0: self.1,
            resource: self.2,
            pollfd0: self.3,
        }
    }
}

/// The sampler of the run, as the recording would describe it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplerInfo {
    /// e.g. "perf_event cpu-clock + sched_switch, dwarf unwinding".
    pub description: String,
    /// Sampling frequency, Hz.
    pub frequency_hz: u32,
    /// Wake-ups were recorded (an off-CPU sample without a waker was woken from
    /// outside the tree).
    pub wakers_recorded: bool,
}

/// The open spool; chunks are written whole, one writer at a time.
#[derive(Debug)]
pub struct SpoolSink {
    /// The spool file (opened for appending by the session layer).
    file: Mutex<File>,
}

impl SpoolSink {
    /// Start a spool in `file` (empty, opened for writing): magic, version, HEAD.
    pub fn new(file: File, meta: &SessionMeta) -> io::Result<SpoolSink> {
        let mut buf = Vec::with_capacity(1024);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        let head = Head { meta: meta.clone() };
        let json = serde_json::to_vec(&head).map_err(io::Error::other)?;
        write_chunk(&mut buf, TAG_HEAD, &json, Compression::fast())?;
        let sink = SpoolSink {
            file: Mutex::new(file),
        };
        sink.write(&buf)?;
        Ok(sink)
    }

    /// Record the run's start (CLOCK_MONOTONIC ns).
    pub fn start(&self, t0_ns: u64) -> io::Result<()> {
        let json = serde_json::to_vec(&Start { t0_ns }).map_err(io::Error::other)?;
        let mut buf = Vec::new();
        write_chunk(&mut buf, TAG_START, &json, Compression::fast())?;
        self.write(&buf)
    }

    /// Append `delta` and the new on-CPU `samples` (absolute times); the bytes written.
    pub fn append(&self, delta: &Delta, samples: &[Woken]) -> io::Result<usize> {
        let json = serde_json::to_vec(delta).map_err(io::Error::other)?;
        let mut buf = Vec::with_capacity(json.len() / 4 + samples.len() * 4 + 64);
        write_chunk(&mut buf, TAG_TABLES, &json, Compression::fast())?;
        for block in samples.chunks(columns::BLOCK_SAMPLES) {
            let raw = columns::encode(block);
            write_chunk(&mut buf, TAG_SAMPLES, &raw, Compression::fast())?;
        }
        self.write(&buf)?;
        Ok(buf.len())
    }

    /// One `write_all` of whole chunks under the lock.
    fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let mut f = self
            .file
            .lock()
            .map_err(|_| io::Error::other("the spool's lock is poisoned"))?;
        f.write_all(bytes)
    }
}
