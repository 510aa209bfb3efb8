//! The deep profile as recorded: processes, threads, interned frames and stacks, and
//! weighted samples (on-CPU ticks and off-CPU intervals).

use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use super::{Samples, Waits};

/// The result of one profiled run, already symbolized.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SampledProfile {
    /// e.g. "perf_event cpu-clock + context-switch, dwarf unwinding".
    pub sampler: String,
    pub frequency_hz: f64,
    /// Wall time of the profiled run, ms.
    pub wall_ms: f64,
    pub processes: Vec<ProcessInfo>,
    pub threads: Vec<ThreadInfo>,
    pub frames: Vec<Frame>,
    pub stacks: Vec<StackNode>,
    /// With the wake-ups that ended off-CPU samples beside them (see [`Samples`]).
    pub samples: Samples,
    pub quality: SampleQuality,
    /// True when the sampler recorded wake-ups (`sched:sched_waking`): an off-CPU
    /// sample without a `waker` was then ended by something outside the profiled tree
    /// (a timer, an interrupt, another process). False in recordings made without
    /// them (older recordings, unprivileged runs): nothing is known about who woke whom.
    #[serde(default)]
    pub wakers_recorded: bool,
    /// What blocked threads waited on: the descriptors named by their blocked syscalls,
    /// resolved during the run (see `sample::waiton`). Empty in older recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// The off-CPU samples blocked in a syscall whose first argument was captured, by
    /// sample index, ascending (a side table: most samples have none).
    #[serde(default, skip_serializing_if = "Waits::is_empty")]
    pub waits: Waits,
    /// True when the sampler recorded socket traffic (`sock:sock_send_length` /
    /// `sock_recv_length`): an empty `sockets` then means no socket I/O, not "unknown".
    #[serde(default)]
    pub sockets_recorded: bool,
    /// Traffic per socket descriptor of the tree, from the socket tracepoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<SocketTraffic>,
    /// True when page-cache reads were recorded (`filemap:mm_filemap_get_pages`).
    #[serde(default)]
    pub file_reads_recorded: bool,
    /// Page-cache reads per (process, file), from `filemap:mm_filemap_get_pages`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_reads: Vec<FileReads>,
    /// Python stacks read during the run (already merged into `samples`' stacks).
    #[serde(default, skip_serializing_if = "super::python::PythonStacks::is_empty")]
    pub python: super::python::PythonStacks,
    /// The binaries and shared objects whose code user frames name, with their paths
    /// and build IDs (for exports such as pprof). Empty in older recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<ModuleInfo>,
}

/// A binary or shared object the profiled code ran from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct ModuleInfo {
    /// The name frames give it (`Frame::module`: the path's file name).
    pub name: String,
    /// Its path, as the kernel reported it when it was mapped.
    pub path: String,
    /// Its GNU build ID in lower-case hex, when it has one and could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

/// What a connection speaks, recognised from its first bytes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.x (a request line or a status line).
    Http,
    /// The HTTP/2 connection preface.
    Http2,
    /// A TLS ClientHello: the peer is known, the content is not.
    Tls,
    Postgres,
    Mysql,
    Redis,
    Mongodb,
}

/// One request→response turn: the first read of a reply after the request's writes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Turn {
    /// The thread that read the reply.
    pub tid: i32,
    /// When the reply's first read returned, ns since the run's start.
    pub time_ns: u64,
}

/// The traffic of one socket descriptor of one process over the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SocketTraffic {
    pub pid: i32,
    pub fd: i32,
    /// Index into `resources`: the descriptor resolved at its first use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<u32>,
    /// Calls that moved data (return value > 0), and the bytes they moved.
    pub sends: u64,
    pub recvs: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Request→response turns: changes from the socket's first direction to the other
    /// (a client's writes then the reply's reads; a server's reads then its writes).
    pub round_trips: u64,
    /// Whether the tree opened this connection during the run (`connect` seen).
    pub connected: bool,
    /// Whether the tree sent first on it (a client), as opposed to reading first.
    pub sent_first: bool,
    /// First and last traffic, ns since the run's start.
    pub first_ns: u64,
    pub last_ns: u64,
    /// What it speaks, when its first bytes were read and recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Each round trip's time and thread, in time order (at most
    /// `MAX_TURNS_PER_SOCKET`; `round_trips` counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
}

/// Turns kept per socket in a recording (the count goes on past it).
pub const MAX_TURNS_PER_SOCKET: usize = 4096;

/// Page-cache reads of one file by one process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileReads {
    pub pid: i32,
    /// The file's path, resolved while the process held it open; None when it was
    /// closed before it could be looked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub dev: u32,
    pub ino: u64,
    /// Read calls that reached the page cache.
    pub calls: u64,
    /// Pages those calls asked for, summed.
    pub pages_read: u64,
    /// Highest page index asked for, plus one: the extent read at least once.
    pub extent_pages: u64,
}

/// How the name of the pipe that profmap reads a target's stdout and stderr from
/// begins (`output captured by profmap (pid 7), the profiler`): the analysis says how
/// long the target blocked on it, time no unprofiled run spends.
pub const CAPTURED_OUTPUT: &str = "output captured by ";

/// What a resource is, from the descriptor's `/proc/PID/fd` link.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    File,
    SocketTcp,
    SocketUdp,
    SocketUnix,
    Pipe,
    Eventfd,
    Epoll,
    /// A character or block device (`/dev/...`).
    Device,
    Other,
}

/// A file, socket, pipe... that a process of the tree held open and blocked on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    pub kind: ResourceKind,
    /// A path, a socket's peer (`127.0.0.1:5432`), or the link's text (`pipe:[123]`;
    /// anonymous inodes with their descriptor: `anon_inode:[eventpoll] fd 5`).
    pub name: String,
    /// A socket's own address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// A socket's peer address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The process that held the descriptor.
    pub pid: i32,
    /// For a socket whose peer is on this host: the process behind it and the port or
    /// path it listens on (`postgres:5432`, `python3:8081`, `postgres:/tmp/.s.PGSQL.5432`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// For a socket: whether the peer is on this host (loopback, one of its
    /// addresses, a Unix socket); None when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_local: Option<bool>,
}

/// The blocked syscall of one off-CPU sample: its first argument and, when that is a
/// descriptor, the resource it named.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct WaitOn {
    /// Index into `samples` (an off-CPU sample).
    pub sample: u32,
    /// The first argument as a descriptor, when the syscall the kernel stack names
    /// (`read`, `recvfrom`, `fsync`...) takes one there; see `sample::waiton`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i32>,
    /// The raw first argument register (DI on x86_64).
    pub arg0: u64,
    /// Index into `resources`.
    #[serde(default, skip_serializing_if = "OptIndex::is_none")]
    pub resource: OptIndex,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: Option<i32>,
    /// Short name (comm) at the end of the run, e.g. "python3".
    pub name: String,
    /// Path of the executable, when known.
    pub exe: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadInfo {
    pub pid: i32,
    pub tid: i32,
    pub name: String,
}

/// Where a frame comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// Native user-space code.
    User,
    Kernel,
    Python,
    /// A synthetic frame (e.g. a process or thread root) added by profmap.
    Synthetic,
}

/// One symbolized frame. `function` is demangled; an address that could not be named is
/// written as `module+0xoffset` (never a neighbour's name).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub function: String,
    /// File name of the binary or shared object (or Python module).
    pub module: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub kind: FrameKind,
    /// True when the frame was inlined into its caller.
    pub inlined: bool,
}

impl Frame {
    /// `file:line` when both are known, `file` when only it is.
    pub fn location(&self) -> Option<String> {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => Some(format!("{f}:{l}")),
            (Some(f), None) => Some(f.clone()),
            _ => None,
        }
    }
}

/// A C library function's name without its leading underscores and glibc's
/// internal-alias prefix: `__GI___libc_read` → `libc_read`, `___pthread_cond_wait64` →
/// `pthread_cond_wait64`.
pub fn unaliased(function: &str) -> &str {
    let name = function.trim_start_matches('_');
    name.strip_prefix("GI_")
        .map_or(name, |n| n.trim_start_matches('_'))
}

/// A node of the interned stack tree: a frame with its caller's node.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct StackNode {
    /// Index into `stacks` of the caller, None at a root.
    pub parent: Option<u32>,
    /// Index into `frames`.
    pub frame: u32,
}

/// State of a thread when it was switched out.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum WaitState {
    /// Interruptible sleep (S): waiting for an event.
    Sleeping,
    /// Uninterruptible sleep (D): usually block I/O or page faults.
    Uninterruptible,
    /// Still runnable, but preempted (involuntary switch): waiting for a CPU.
    Preempted,
    /// Another or unknown state.
    Other,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SampleKind {
    OnCpu,
    OffCpu { state: WaitState },
}

impl SampleKind {
    /// The kind as one byte (a recording's kind column, the sample list's): 0 on-CPU,
    /// 1..=4 off-CPU sleeping, uninterruptible, preempted, other.
    pub fn code(self) -> u8 {
        match self {
            SampleKind::OnCpu => 0,
            SampleKind::OffCpu { state } => match state {
                WaitState::Sleeping => 1,
                WaitState::Uninterruptible => 2,
                WaitState::Preempted => 3,
                WaitState::Other => 4,
            },
        }
    }

    /// The kind of byte `code`; `None` for a byte no kind has.
    pub fn from_code(code: u8) -> Option<SampleKind> {
        let state = match code {
            0 => return Some(SampleKind::OnCpu),
            1 => WaitState::Sleeping,
            2 => WaitState::Uninterruptible,
            3 => WaitState::Preempted,
            4 => WaitState::Other,
            _ => return None,
        };
        Some(SampleKind::OffCpu { state })
    }
}

/// One weighted sample of one thread.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ThreadSample {
    pub pid: i32,
    pub tid: i32,
    /// Nanoseconds since the start of the profiled run.
    pub time_ns: u64,
    /// Leaf node in `stacks`; none when no frame could be recovered.
    pub stack: Leaf,
    /// On-CPU: the sampling period; off-CPU: the interval's duration.
    pub weight_ns: u64,
    pub kind: SampleKind,
}

/// An index, or none: an `Option<u32>` held in 4 bytes instead of 8 (the index plus
/// one, so that "none" is the zero a `NonZeroU32` leaves free). Written and read as the
/// `Option<u32>` it stands for; `u32::MAX` cannot be held. A sample's stack is one
/// ([`Leaf`]: with it a sample is 32 bytes, not 40 — at millions of samples the largest
/// block of memory), a blocked call's resource another (a [`WaitOn`] is 24 bytes, not 32).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct OptIndex(Option<NonZeroU32>);

/// A sample's leaf node in `stacks`, or none.
pub type Leaf = OptIndex;

impl OptIndex {
    /// None.
    pub const NONE: OptIndex = OptIndex(None);

    /// Index `i`, or none. `u32::MAX` cannot be held and reads as none (no profile
    /// holds that many nodes or resources; readers of recordings use
    /// [`OptIndex::exact`]).
    pub const fn new(i: Option<u32>) -> OptIndex {
        match OptIndex::exact(i) {
            Some(l) => l,
            None => OptIndex(None),
        }
    }

    /// Index `i`, or none; `None` for `u32::MAX`, which cannot be held.
    pub const fn exact(i: Option<u32>) -> Option<OptIndex> {
        match i {
            Some(n) => match n.checked_add(1) {
                Some(n1) => Some(OptIndex(NonZeroU32::new(n1))),
                None => None,
            },
            None => Some(OptIndex(None)),
        }
    }

    /// The index, when there is one.
    pub const fn get(self) -> Option<u32> {
        match self.0 {
            Some(n) => Some(n.get() - 1),
            None => None,
        }
    }

    /// Whether there is none.
    pub const fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl From<Option<u32>> for OptIndex {
    fn from(i: Option<u32>) -> OptIndex {
        OptIndex::new(i)
    }
}

impl std::fmt::Debug for OptIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for OptIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for OptIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<OptIndex, D::Error> {
        let i = Option::<u32>::deserialize(d)?;
        OptIndex::exact(i)
            .ok_or_else(|| serde::de::Error::custom("index 4294967295 is out of range"))
    }
}

/// The wake-up that ended an off-CPU interval: issued by a thread of the profiled tree
/// (or by an interrupt that ran while that thread was on the CPU: its kernel stack says
/// which).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Waker {
    pub pid: i32,
    pub tid: i32,
    /// Nanoseconds since the start of the profiled run when the wake-up was issued.
    pub time_ns: u64,
    /// The waker's kernel stack at the wake-up (leaf node in `stacks`), when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
}

/// What the sampler knows about its own accuracy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SampleQuality {
    pub samples: u64,
    pub off_cpu_intervals: u64,
    pub lost_samples: u64,
    /// Stacks whose unwinding stopped before reaching a root frame.
    pub unwind_failures: u64,
    /// Stacks cut at the kernel's or copy's size limit.
    pub truncated_stacks: u64,
    /// Distinct addresses that could not be named.
    pub unnamed_addresses: u64,
    /// Switch-out stack copies the kernel dropped at a high switch rate (the intervals'
    /// durations were kept; their stacks were lent or partial).
    #[serde(default)]
    pub lost_stack_copies: u64,
    /// Off-CPU time left out because records were lost while the threads waited: each
    /// wait that spanned such a window loses the window (what the thread did there is
    /// unknown), summed over threads, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub off_cpu_lost_ns: u64,
    /// Share of off-CPU time whose stack was lent by an earlier switch-out of the same
    /// thread at the same call (not copied at this one); None when no off-CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_reused_stack_share: Option<f64>,
    /// Copied switch-outs at a call that already had a stack to lend (the reuse's
    /// check against copies), and how many of those lent stacks were identical.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reuse_checks: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reuse_agreed: u64,
    /// Share of off-CPU time whose switch-out copy was dropped but whose stack was read
    /// through /proc while the thread still blocked in that call (an exact stack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_late_stack_share: Option<f64>,
    /// Share of off-CPU time with only the leaf user frame (no copy, nothing to reuse,
    /// not read late).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_partial_stack_share: Option<f64>,
    pub warnings: Vec<String>,
}

impl SampledProfile {
    /// Frames of a stack, root first.
    pub fn stack_frames(&self, leaf: u32) -> Vec<&Frame> {
        let mut out = Vec::new();
        let mut cur = Some(leaf);
        while let Some(i) = cur {
            let node = &self.stacks[i as usize];
            out.push(&self.frames[node.frame as usize]);
            cur = node.parent;
        }
        out.reverse();
        out
    }

    /// The (pid, tid) of every thread with a sample, in order.
    pub fn sampled_threads(&self) -> std::collections::BTreeSet<(i32, i32)> {
        self.samples.distinct_threads().into_iter().collect()
    }

    /// Keep only the samples `keep` says to, in place, with the wakers and the waits
    /// table following them.
    pub fn retain_samples(&mut self, keep: impl Fn(&ThreadSample) -> bool) {
        let kept = self.samples.retain(keep);
        // Collected in place (the same allocation).
        self.waits.retain_map(|w| renumbered_wait(&kept, w));
    }

    /// A copy holding only the samples `keep` says to, with the wakers and the waits
    /// table following them. The samples are copied only as far as they are kept.
    pub fn filtered(&self, keep: impl Fn(&ThreadSample) -> bool) -> SampledProfile {
        let (samples, kept) = self.samples.filtered(keep);
        let waits = self.waits.filter_map(|w| renumbered_wait(&kept, w));
        self.with_samples(samples, waits)
    }

    /// This profile's tables with other samples and waits (which index them). Every
    /// field is named, so a field added to the model fails to compile here until it
    /// says whether it follows the samples.
    pub fn with_samples(&self, samples: Samples, waits: Waits) -> SampledProfile {
        let SampledProfile {
            sampler,
            frequency_hz,
            wall_ms,
            processes,
            threads,
            frames,
            stacks,
            samples: _,
            quality,
            wakers_recorded,
            resources,
            waits: _,
            sockets_recorded,
            sockets,
            file_reads_recorded,
            file_reads,
            python,
            modules,
        } = self;
        SampledProfile {
            sampler: sampler.clone(),
            frequency_hz: *frequency_hz,
            wall_ms: *wall_ms,
            processes: processes.clone(),
            threads: threads.clone(),
            frames: frames.clone(),
            stacks: stacks.clone(),
            samples,
            quality: quality.clone(),
            wakers_recorded: *wakers_recorded,
            resources: resources.clone(),
            waits,
            sockets_recorded: *sockets_recorded,
            sockets: sockets.clone(),
            file_reads_recorded: *file_reads_recorded,
            file_reads: file_reads.clone(),
            python: python.clone(),
            modules: modules.clone(),
        }
    }

    /// Frame indices of a stack, root first.
    pub fn stack_frame_ids(&self, leaf: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = Some(leaf);
        while let Some(i) = cur {
            let node = self.stacks[i as usize];
            out.push(node.frame);
            cur = node.parent;
        }
        out.reverse();
        out
    }
}

/// A wait of a filtered profile: renumbered to its sample's new index, or gone with it.
fn renumbered_wait(kept: &super::Kept, w: WaitOn) -> Option<WaitOn> {
    let sample = kept.new_index(w.sample as usize)?;
    Some(WaitOn { sample, ..w })
}

/// For `skip_serializing_if`: a count that is zero is left out.
fn is_zero(n: &u64) -> bool {
    *n == 0
}
