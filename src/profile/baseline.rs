//! Baseline runs as recorded: every run's raw figures, warm-ups included and marked.

use serde::{Deserialize, Serialize};

/// All runs of the baseline phase, in the order they ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Baseline {
    pub warmup_runs: u32,
    pub requested_runs: u32,
    pub runs: Vec<RunMeasurement>,
    /// What else loaded the machine while the baseline ran (absent in older recordings,
    /// and when /proc could not be read).
    #[serde(default)]
    pub machine_load: Option<MachineLoad>,
}

/// The machine's load during the baseline: its load average and the other processes
/// that used the most CPU between the first run's start and the last run's end.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineLoad {
    /// 1-minute load average at the end of the baseline (`/proc/loadavg`).
    pub loadavg_1m: f64,
    /// 5-minute load average at the end of the baseline.
    pub loadavg_5m: f64,
    /// Wall time between the two looks at /proc, ms.
    pub window_ms: f64,
    /// CPU time used by all processes other than profmap and the target during the
    /// window, ms (processes that exited within the window are not seen).
    pub others_cpu_ms: f64,
    /// The busiest of those processes, busiest first (at most five).
    pub busiest: Vec<BusyProcess>,
}

/// Another process and the CPU it used during the baseline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BusyProcess {
    pub pid: i32,
    /// Short name (comm).
    pub name: String,
    /// User + system CPU time used during the window, ms.
    pub cpu_ms: f64,
}

impl Baseline {
    /// The counted (non-warm-up) runs.
    pub fn counted(&self) -> impl Iterator<Item = &RunMeasurement> {
        self.runs.iter().filter(|r| !r.warmup)
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitStatus {
    Code {
        code: i32,
    },
    Signal {
        signal: i32,
        core_dumped: bool,
    },
    Timeout,
    /// profmap was interrupted (Ctrl-C) while the run was in flight.
    Interrupted,
}

impl ExitStatus {
    pub fn success(&self) -> bool {
        matches!(self, ExitStatus::Code { code: 0 })
    }
}

/// Every figure of one run of the target's whole process tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunMeasurement {
    pub index: u32,
    pub warmup: bool,
    /// Target pid of this run.
    pub pid: i32,
    /// From the release of the exec to the exit of the last process in the tree.
    pub wall_ms: f64,
    pub user_ms: f64,
    pub sys_ms: f64,
    /// Largest single process's max RSS (rusage of reaped processes).
    pub max_rss_kb: u64,
    /// Peak of the summed RSS of the live tree, sampled; None when no sample landed.
    pub tree_rss_peak_kb: Option<u64>,
    /// RSS of the main process at its last sample minus at its first; None if < 2 samples.
    pub memory_delta_kb: Option<i64>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub rchar: u64,
    pub wchar: u64,
    /// Read and write calls of the tree (/proc/PID/io `syscr`, `syscw`: read, pread64,
    /// readv... and their write twins); none in recordings made before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_calls: Option<u64>,
    pub voluntary_cs: u64,
    pub involuntary_cs: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Processes started by the tree, the target itself included.
    pub processes: u64,
    /// "counted" when every fork was counted in the kernel, "observed" when only the
    /// processes seen by polling and reaping are known (a lower bound).
    pub processes_basis: String,
    pub threads_peak: u64,
    pub exit: ExitStatus,
    pub timeline: Vec<TimelinePoint>,
    /// Block devices active during the run (machine-wide), busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskBusy>,
}

impl RunMeasurement {
    pub fn cpu_ms(&self) -> f64 {
        self.user_ms + self.sys_ms
    }
}

/// One point of the run's timeline, taken by polling /proc.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimelinePoint {
    /// Milliseconds since the run started.
    pub t_ms: f64,
    /// CPU used by the live tree since the previous point, in % of one core.
    pub cpu_pct: f64,
    pub rss_kb: u64,
    /// Storage bytes read and written per second since the previous point.
    pub read_bps: f64,
    pub write_bps: f64,
    pub threads: u64,
    pub processes: u64,
}

/// One block device's activity during a run (machine-wide, from /proc/diskstats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskBusy {
    /// The kernel's name (`vda`, `nvme0n1`, `sda1`).
    pub device: String,
    /// Time with I/O in flight, percent of the run's wall time (capped at 100).
    pub busy_pct: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    /// Read requests completed, and their summed time from issue to completion, ms
    /// (none in recordings made before 2026-12-07).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ms: Option<u64>,
    /// Requests in flight on average while the device was busy (the kernel's weighted
    /// I/O time over its busy time): about 1 when one request at a time was served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<f64>,
}
