//! Samplers: on-CPU and off-CPU stacks of every thread and child of the target, taken
//! with perf_event_open; also the kernel-side process counter used by the baseline.
//!
//! The product of a sampling session is a [`RawProfile`]: stacks already unwound to
//! addresses, each user address already resolved to (module file, file offset) with
//! the memory maps that were valid *at the time of the sample*, so that symbolization
//! (`crate::symbolize`) is a pure function of this struct and works for processes that
//! have long exited. All platform code lives under `linux/`.

pub mod linux;

/// Switch-out stack copies per second and thread at most (the copy event's frequency
/// mode): a thread switching out more often borrows most of its stacks.
pub const SWITCH_COPY_RATE: u64 = 1000;
pub mod connwait;
pub mod protocol;
pub mod waiton;

pub use linux::{Capabilities, Check, PerfSampler, TaskWatcher, monotonic_ns, probe_capabilities};

use serde::{Deserialize, Serialize};

/// A module (a mapped file) referenced by user frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawModule {
    /// Path as the kernel reported it in the MMAP2 record (e.g. `/usr/lib/x86_64-linux-gnu/libc.so.6`,
    /// or a pseudo path such as `[vdso]`).
    pub path: String,
}

/// One unsymbolized frame. Addresses of return frames are already "lookup" addresses
/// (return address − 1), so they name the call instruction's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RawFrame {
    /// A kernel address (symbolized with kallsyms).
    Kernel { addr: u64 },
    /// A user address inside a file-backed mapping: index into `RawProfile::modules` and
    /// the file offset.
    User { module: u32, file_offset: u64 },
    /// A user address in no file-backed mapping (JIT code, anonymous memory): resolved
    /// through `/tmp/perf-PID.map` when present.
    Anon { pid: i32, addr: u64 },
    /// A kernel function known by name only (a blocked thread's wait channel read from
    /// /proc): index into `RawProfile::kernel_names`.
    KernelNamed { name: u32 },
}

/// Interned stack node: the frame and its caller, root first (like `profile::StackNode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RawStackNode {
    pub parent: Option<u32>,
    /// Index into `RawProfile::frames`.
    pub frame: u32,
}

/// The argument registers of a switch-out, raw: which syscall they belong to (hence
/// whether `arg0` is a descriptor) is decided from the kernel stack at symbolize time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawWait {
    /// DI on x86_64: the syscall's first argument.
    pub arg0: u64,
    /// `arg0` read as a descriptor of the process and resolved during the run: an index
    /// into `RawProfile::resources`.
    pub resource: Option<u32>,
    /// When `arg0` points into the copied user stack (a `struct pollfd` array that the
    /// caller keeps on its stack, as libpq does): the first 4 bytes there, read as a
    /// descriptor, and the resource it named. Used when the syscall is `poll`/`ppoll`.
    pub pollfd0: Option<(i32, Option<u32>)>,
}

/// One memory mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawMapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub path: String,
    pub executable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawProcess {
    pub pid: i32,
    pub ppid: Option<i32>,
    /// comm of the main thread at the end of the run.
    pub name: String,
    /// The first file mapped after the last exec: the executable.
    pub exe: Option<String>,
    /// The mappings known at the end of the run (after the last exec; inherited ones
    /// included for forked children that never exec'd).
    pub maps: Vec<RawMapping>,
    /// CLOCK_MONOTONIC ns of the fork / exit records, when seen.
    pub fork_ns: Option<u64>,
    pub exit_ns: Option<u64>,
}

/// A thread of the target: the same record the profile keeps.
pub type RawThread = crate::profile::ThreadInfo;

/// Everything a sampling session produced, before symbolization.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawProfile {
    /// e.g. "perf_event cpu-clock + sched_switch, dwarf unwinding".
    pub sampler: String,
    pub frequency_hz: u32,
    /// CLOCK_MONOTONIC ns of the run's start, as given to `finish`.
    pub t0_ns: u64,
    pub modules: Vec<RawModule>,
    pub frames: Vec<RawFrame>,
    pub stacks: Vec<RawStackNode>,
    /// On-CPU ticks and off-CPU intervals, by time relative to `t0_ns` (those taken
    /// before it clamped to 0); stacks are leaf nodes in `stacks`, and so are the
    /// wakers' (kernel frames only). Symbolization takes them over as they are (with
    /// their stacks renumbered) rather than copying them.
    pub samples: crate::profile::Samples,
    /// Off-CPU samples only, sparse: (sample index, the blocked syscall's first argument
    /// and the resource it named when it was a descriptor of a live process; see
    /// [`waiton`]), ascending by index.
    pub waits: Vec<(u32, RawWait)>,
    /// Names of `RawFrame::KernelNamed` frames.
    pub kernel_names: Vec<String>,
    pub processes: Vec<RawProcess>,
    pub threads: Vec<RawThread>,
    /// Records the kernel dropped (PERF_RECORD_LOST), samples and others.
    pub lost_records: u64,
    /// Stack copies of switch-outs the kernel dropped (their durations were kept).
    pub lost_stack_copies: u64,
    /// Off-CPU time cut from intervals that spanned a window of lost records (see
    /// `offcpu::OffCpu::lost`), summed over threads, ns.
    pub off_cpu_lost_ns: u64,
    /// Off-CPU time recorded from switch records (ns), and how much of it has a stack
    /// lent by an earlier switch-out at the same call, or only a partial stack.
    pub off_cpu_ns: u64,
    pub off_cpu_reused_stack_ns: u64,
    /// Copied switch-outs at a call that had a stack to lend, and how many lent stacks
    /// equalled the copy's own (the reuse checked against copies).
    pub reuse_checks: u64,
    pub reuse_agreed: u64,
    /// Off-CPU time whose stack was read through /proc while the thread still blocked.
    pub off_cpu_late_stack_ns: u64,
    pub off_cpu_partial_stack_ns: u64,
    /// Stacks whose user part did not reach a root frame.
    pub unwind_failures: u64,
    /// Stacks whose user stack copy was full (the stack was deeper than the copy).
    pub truncated_stacks: u64,
    /// True when wake-ups were recorded (see `profile::SampledProfile::wakers_recorded`).
    pub wakers_recorded: bool,
    /// Descriptors resolved during the run (see [`RawWait`]).
    pub resources: Vec<crate::profile::Resource>,
    /// Socket traffic was recorded (see `profile::SampledProfile::sockets_recorded`).
    pub sockets_recorded: bool,
    /// Per socket of the tree, times relative to `t0_ns`; resources index `resources`.
    pub sockets: Vec<crate::profile::SocketTraffic>,
    /// Page-cache reads were recorded (see `profile::SampledProfile::file_reads_recorded`).
    pub file_reads_recorded: bool,
    pub file_reads: Vec<crate::profile::FileReads>,
    /// Python stacks read from the tree's CPython interpreters (see
    /// `linux::python`); empty when no process of the tree was one.
    pub python: crate::profile::PythonStacks,
    pub warnings: Vec<String>,
}
