//! The baseline section of the performance map: medians and statistics over the counted
//! runs, in the schema's field names. Pure function of the recorded runs.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::profile::{ExitStatus, RunMeasurement};
use crate::stats::{self, Stat};

const MIB_KB: f64 = 1024.0;

/// `profile_result.performance_map.baseline` of the schema.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineSummary {
    /// Counted runs the figures are medians of.
    pub runs: u32,
    /// Discarded warm-up runs before them.
    pub warmup_runs: u32,
    /// Median wall time, ms.
    pub wall_time_ms: f64,
    /// Median CPU time, user + sys over the whole process tree, ms.
    pub cpu_time_ms: f64,
    /// Median user CPU time of the tree, ms.
    pub user_time_ms: f64,
    /// Median system CPU time of the tree, ms.
    pub sys_time_ms: f64,
    /// cpu_time / wall_time: 1.0 is one core busy the whole run.
    pub cpu_utilization: f64,
    /// Median peak resident set of the process tree, MiB (see `memory_peak_basis`).
    pub memory_peak_mb: f64,
    /// "tree_sum" (live processes summed at the peak) or "largest_process".
    pub memory_peak_basis: &'static str,
    /// Resident set at the end minus at the start of the main process, MiB; None
    /// when unknown.
    pub memory_delta_mb: Option<f64>,
    /// Median bytes fetched from storage (read_bytes), process tree.
    pub io_read_bytes: u64,
    /// Median bytes sent to storage (write_bytes), process tree.
    pub io_write_bytes: u64,
    /// Median bytes passed to read-like syscalls, page cache included.
    pub io_rchar_bytes: u64,
    /// Median bytes passed to write-like syscalls.
    pub io_wchar_bytes: u64,
    /// Median read and write calls (/proc/PID/io syscr, syscw); None when a run's count
    /// is unknown (recordings made before 2026-12-07).
    pub io_read_calls: Option<u64>,
    pub io_write_calls: Option<u64>,
    /// Median voluntary context switches (the tree blocked).
    pub voluntary_context_switches: u64,
    /// Median involuntary context switches (the tree was preempted).
    pub involuntary_context_switches: u64,
    /// Median minor page faults.
    pub minor_page_faults: u64,
    /// Median major page faults (served from storage).
    pub major_page_faults: u64,
    /// HTTP round trips per run; None: not measured.
    pub http_round_trips: Option<u64>,
    /// Database round trips per run; None: not measured.
    pub db_round_trips: Option<u64>,
    /// Median number of processes the target started (itself included).
    pub processes: u64,
    /// Median peak thread count.
    pub threads_peak: u64,
    /// GPU utilisation, percent; None: not measured.
    pub gpu_utilization_pct: Option<f64>,
    /// Peak GPU memory, MiB; None: not measured.
    pub gpu_memory_peak_mb: Option<f64>,
    /// Exit code of each counted run.
    pub exit_codes: Vec<ExitCode>,
    /// Median, mean, stddev, min, max and values of each metric over the runs.
    pub statistics: BTreeMap<&'static str, Stat>,
    /// What makes these figures less certain.
    pub warnings: Vec<String>,
}

/// Peak memory of one run in MiB and its basis: the sampled tree sum when it is at least
/// the largest single process (rusage), else that process.
pub fn run_memory_peak(r: &RunMeasurement) -> (f64, &'static str) {
    match r.tree_rss_peak_kb {
        Some(t) if t >= r.max_rss_kb => (t as f64 / MIB_KB, "tree_sum"),
        _ => (r.max_rss_kb as f64 / MIB_KB, "largest_process"),
    }
}

/// "exit code" entry of the schema: the code, or a string ("signal 11", "timeout").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ExitCode {
    /// The run exited with this code.
    Code(i32),
    /// How the run ended otherwise: "signal N", "signal N (core dumped)", "timeout",
    /// "interrupted".
    Text(String),
}

impl std::fmt::Display for ExitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitCode::Code(c) => write!(f, "{c}"),
            ExitCode::Text(t) => f.write_str(t),
        }
    }
}

/// The schema's exit code of a run.
pub fn exit_code_value(e: &ExitStatus) -> ExitCode {
    match e {
        ExitStatus::Code { code } => ExitCode::Code(*code),
        ExitStatus::Signal {
            signal,
            core_dumped,
        } => {
            let core = if *core_dumped { " (core dumped)" } else { "" };
            ExitCode::Text(format!("signal {signal}{core}"))
        }
        ExitStatus::Timeout => ExitCode::Text("timeout".into()),
        ExitStatus::Interrupted => ExitCode::Text("interrupted".into()),
    }
}

fn med_u64(v: impl Iterator<Item = u64>) -> u64 {
    let v: Vec<f64> = v.map(|x| x as f64).collect();
    stats::median(&v).unwrap_or(0.0).round() as u64
}

/// The median of counts every run knows; None when one does not.
fn med_known(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    let all: Option<Vec<u64>> = v.collect();
    all.filter(|a| !a.is_empty())
        .map(|a| med_u64(a.into_iter()))
}

/// Summarise `runs` (the counted runs; warm-ups already removed). None when empty.
pub fn summarize(runs: &[&RunMeasurement], warmup_runs: u32) -> Option<BaselineSummary> {
    if runs.is_empty() {
        return None;
    }
    let col =
        |f: &dyn Fn(&RunMeasurement) -> f64| -> Vec<f64> { runs.iter().map(|r| f(r)).collect() };
    let mut statistics = BTreeMap::new();
    let mut put = |name: &'static str, v: Vec<f64>| {
        if let Some(s) = stats::stat(&v) {
            statistics.insert(name, s);
        }
    };
    let wall = col(&|r| r.wall_ms);
    let cpu = col(&|r| r.cpu_ms());
    let util = col(&|r| {
        if r.wall_ms > 0.0 {
            r.cpu_ms() / r.wall_ms
        } else {
            0.0
        }
    });
    let mem = col(&|r| run_memory_peak(r).0);
    put("wall_time_ms", wall.clone());
    put("cpu_time_ms", cpu.clone());
    put("user_time_ms", col(&|r| r.user_ms));
    put("sys_time_ms", col(&|r| r.sys_ms));
    put("cpu_utilization", util.clone());
    put("memory_peak_mb", mem.clone());
    put("io_read_bytes", col(&|r| r.read_bytes as f64));
    put("io_write_bytes", col(&|r| r.write_bytes as f64));
    put(
        "voluntary_context_switches",
        col(&|r| r.voluntary_cs as f64),
    );
    put(
        "involuntary_context_switches",
        col(&|r| r.involuntary_cs as f64),
    );
    put("minor_page_faults", col(&|r| r.minor_faults as f64));
    put("major_page_faults", col(&|r| r.major_faults as f64));

    let tree_basis = runs
        .iter()
        .filter(|r| run_memory_peak(r).1 == "tree_sum")
        .count();
    let deltas: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.memory_delta_kb.map(|d| d as f64 / MIB_KB))
        .collect();
    let mut warnings = Vec::new();
    if let Some(s) = statistics.get("wall_time_ms") {
        if !s.outliers.is_empty() {
            let which: Vec<String> = s
                .outliers
                .iter()
                .map(|i| format!("run {}", i + 1))
                .collect();
            warnings.push(format!(
                "wall-time outlier(s) in {} (modified Z-score > {}): the machine was busy or the \
                 target is noisy — use more --runs, a --warmup, or a quieter machine",
                which.join(", "),
                stats::OUTLIER_Z
            ));
        }
        if s.median > 0.0 && s.stddev / s.median > 0.1 && runs.len() > 1 {
            warnings.push(format!(
                "wall time varies by {:.0}% (stddev/median) across runs: compare results with care \
                 or raise --runs",
                s.stddev / s.median * 100.0
            ));
        }
    }
    if deltas.is_empty() {
        warnings.push(
            "memory_delta_mb unknown: the main process was too short-lived to sample its memory twice"
                .into(),
        );
    }
    if runs.iter().any(|r| r.processes_basis != "counted") {
        warnings.push(
            "processes is a lower bound (processes seen by polling and reaping): kernel fork \
             counting was not available"
                .into(),
        );
    }
    warnings.push(
        "not measured by this version: gpu_utilization_pct, gpu_memory_peak_mb (null)".into(),
    );
    Some(BaselineSummary {
        runs: runs.len() as u32,
        warmup_runs,
        wall_time_ms: stats::median(&wall).unwrap_or(0.0),
        cpu_time_ms: stats::median(&cpu).unwrap_or(0.0),
        user_time_ms: stats::median(&col(&|r| r.user_ms)).unwrap_or(0.0),
        sys_time_ms: stats::median(&col(&|r| r.sys_ms)).unwrap_or(0.0),
        cpu_utilization: stats::median(&util).unwrap_or(0.0),
        memory_peak_mb: stats::median(&mem).unwrap_or(0.0),
        memory_peak_basis: if tree_basis * 2 >= runs.len() {
            "tree_sum"
        } else {
            "largest_process"
        },
        memory_delta_mb: stats::median(&deltas),
        io_read_bytes: med_u64(runs.iter().map(|r| r.read_bytes)),
        io_write_bytes: med_u64(runs.iter().map(|r| r.write_bytes)),
        io_rchar_bytes: med_u64(runs.iter().map(|r| r.rchar)),
        io_wchar_bytes: med_u64(runs.iter().map(|r| r.wchar)),
        io_read_calls: med_known(runs.iter().map(|r| r.read_calls)),
        io_write_calls: med_known(runs.iter().map(|r| r.write_calls)),
        voluntary_context_switches: med_u64(runs.iter().map(|r| r.voluntary_cs)),
        involuntary_context_switches: med_u64(runs.iter().map(|r| r.involuntary_cs)),
        minor_page_faults: med_u64(runs.iter().map(|r| r.minor_faults)),
        major_page_faults: med_u64(runs.iter().map(|r| r.major_faults)),
        http_round_trips: None,
        db_round_trips: None,
        processes: med_u64(runs.iter().map(|r| r.processes)).max(1),
        threads_peak: runs
            .iter()
            .map(|r| r.threads_peak)
            .max()
            .unwrap_or(1)
            .max(1),
        gpu_utilization_pct: None,
        gpu_memory_peak_mb: None,
        exit_codes: runs.iter().map(|r| exit_code_value(&r.exit)).collect(),
        statistics,
        warnings,
    })
}
