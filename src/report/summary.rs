//! `summary.json`: the short envelope for tools and agents — status, run id,
//! classification, top bottlenecks, headline figures and the path of every artifact.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::perfmap::PerfMap;
use crate::profile::Recording;

/// Session status as the envelope reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Blocked => "blocked",
            Status::Interrupted => "interrupted",
        }
    }
}

/// Build the envelope. Artifact paths are made absolute under `out_dir`.
pub fn build(
    rec: &Recording,
    map: &PerfMap,
    status: Status,
    message: Option<&str>,
    out_dir: &Path,
    artifacts: &BTreeMap<String, String>,
) -> Value {
    let paths: BTreeMap<&String, String> = artifacts
        .iter()
        .map(|(k, v)| (k, out_dir.join(v).display().to_string()))
        .collect();
    let b = map.baseline.as_ref();
    json!({
        "schema": "profmap-summary/1",
        "status": status.as_str(),
        "message": message,
        "run_id": rec.meta.run_id,
        "command": rec.meta.command,
        "classification": map.classification,
        "bottleneck_detail": map.bottleneck_detail,
        "top_bottlenecks": map.top_bottlenecks,
        "wall_time_ms": b.map(|b| b.wall_time_ms),
        "cpu_time_ms": b.map(|b| b.cpu_time_ms),
        "memory_peak_mb": b.map(|b| b.memory_peak_mb),
        "exit_codes": b.map(|b| b.exit_codes.clone()),
        "output_dir": out_dir.display().to_string(),
        "artifacts": paths,
        "warnings": map.warnings,
    })
}

/// The envelope of a session that stopped before writing its outputs (an error, a
/// full disk, an interrupt): the status, the reason, and no artifacts (the folder's
/// other files may be from any run).
pub fn stopped(rec: &Recording, status: Status, reason: &str, out_dir: &Path) -> Value {
    json!({
        "schema": "profmap-summary/1",
        "status": status.as_str(),
        "message": reason,
        "run_id": rec.meta.run_id,
        "command": rec.meta.command,
        "output_dir": out_dir.display().to_string(),
        "artifacts": {},
    })
}
