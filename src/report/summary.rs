//! `summary.json`: the short envelope for tools and agents — status, run id,
//! classification, top bottlenecks, headline figures and the path of every artifact.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::baseline::ExitCode;
use super::perfmap::PerfMap;
use crate::analyse::{Bottleneck, Classification};
use crate::profile::Recording;

/// The version of the envelope's shape.
const SCHEMA: &str = "profmap-summary/1";

/// Session status as the envelope reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Everything asked for was measured.
    Completed,
    /// The target failed or timed out.
    Failed,
    /// profmap could not do what was asked (perf events not permitted).
    Blocked,
    /// The user stopped profmap (Ctrl-C, SIGTERM, SIGHUP); outputs hold what was measured.
    Interrupted,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The envelope's shape: "profmap-summary/1".
    pub schema: &'static str,
    /// How the session ended.
    pub status: Status,
    /// Why, when it did not simply complete; None otherwise.
    pub message: Option<String>,
    /// The session's id.
    pub run_id: String,
    /// The target's argv.
    pub command: Vec<String>,
    /// The verdict and headline figures; absent when the session stopped before its
    /// outputs were written.
    #[serde(flatten)]
    pub findings: Option<Findings>,
    /// The output folder.
    pub output_dir: String,
    /// Artifact name → absolute path (none when the session stopped early).
    pub artifacts: BTreeMap<String, String>,
}

/// What a completed (or failed, but written) session found, from the performance map.
#[derive(Debug, Clone, Serialize)]
pub struct Findings {
    /// The session's bottleneck class.
    pub classification: Classification,
    /// The sentence behind the class.
    pub bottleneck_detail: String,
    /// At most three bottlenecks, largest first.
    pub top_bottlenecks: Vec<Bottleneck>,
    /// The recommendation with the highest expected gain; None when nothing was
    /// confirmed.
    pub top_recommendation: Option<super::map::OptimizationHint>,
    /// Median wall time of the counted runs, ms; None without a baseline.
    pub wall_time_ms: Option<f64>,
    /// Median CPU time (user + sys) of the counted runs, ms; None without a baseline.
    pub cpu_time_ms: Option<f64>,
    /// Median peak memory of the process tree, MiB; None without a baseline.
    pub memory_peak_mb: Option<f64>,
    /// Exit code of each counted run; None without a baseline.
    pub exit_codes: Option<Vec<ExitCode>>,
    /// Every warning of the session.
    pub warnings: Vec<String>,
}

/// Build the envelope. Artifact paths are made absolute under `out_dir`.
pub fn build(
    rec: &Recording,
    map: &PerfMap,
    status: Status,
    message: Option<&str>,
    out_dir: &Path,
    artifacts: &BTreeMap<String, String>,
) -> Summary {
    let paths = artifacts
        .iter()
        .map(|(k, v)| (k.clone(), out_dir.join(v).display().to_string()))
        .collect();
    let b = map.baseline();
    let r = map.result();
    Summary {
        schema: SCHEMA,
        status,
        message: message.map(str::to_string),
        run_id: rec.meta.run_id.clone(),
        command: rec.meta.command.clone(),
        findings: Some(Findings {
            classification: r.bottleneck_classification,
            bottleneck_detail: r.bottleneck_detail.clone(),
            top_bottlenecks: r.top_bottlenecks.clone(),
            top_recommendation: r.optimization_hints.first().cloned(),
            wall_time_ms: b.map(|b| b.wall_time_ms),
            cpu_time_ms: b.map(|b| b.cpu_time_ms),
            memory_peak_mb: b.map(|b| b.memory_peak_mb),
            exit_codes: b.map(|b| b.exit_codes.clone()),
            warnings: r.warnings.clone(),
        }),
        output_dir: out_dir.display().to_string(),
        artifacts: paths,
    }
}

/// The envelope of a session that stopped before writing its outputs (an error, a
/// full disk, an interrupt): the status, the reason, and no artifacts (the folder's
/// other files may be from any run).
pub fn stopped(rec: &Recording, status: Status, reason: &str, out_dir: &Path) -> Summary {
    Summary {
        schema: SCHEMA,
        status,
        message: Some(reason.to_string()),
        run_id: rec.meta.run_id.clone(),
        command: rec.meta.command.clone(),
        findings: None,
        output_dir: out_dir.display().to_string(),
        artifacts: BTreeMap::new(),
    }
}
