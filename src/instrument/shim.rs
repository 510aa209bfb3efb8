//! `--trace`: the run-time shim that wraps named Python functions without touching any
//! file. The shim is a `sitecustomize.py` (trace_shim.py) put first on `PYTHONPATH`;
//! it parses each traced module as it is imported, adds a decorator to the named defs
//! in the tree and compiles that (the script itself too, which it then runs in place
//! of the interpreter). A sitecustomize it shadows is run after it.
//!
//! Per call it appends one JSON line to `PROFMAP_TRACE_LOG`; [`read_log`] and
//! [`summarize`] turn the log into per-function medians.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;
use crate::profile::TracedFunction;

/// The shim's source.
pub const SHIM: &str = include_str!("trace_shim.py");

/// Write the shim as `dir/sitecustomize.py` (dir: a fresh folder of profmap's own).
pub fn write_shim(dir: &Path) -> Result<PathBuf, Error> {
    crate::session::outfile::write_file(dir, "sitecustomize.py", SHIM.as_bytes(), false)
}

/// The environment for a traced run: the shim first on `PYTHONPATH` (before the
/// inherited one), the specs, and the log.
pub fn env(shim_dir: &Path, specs: &[String], log: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("PYTHONPATH".into(), python_path(shim_dir)),
        ("PROFMAP_TRACE".into(), specs.join("\n").into()),
        ("PROFMAP_TRACE_LOG".into(), log.as_os_str().to_owned()),
    ]
}

/// The environment for a memory run (Level 3): the shim first on `PYTHONPATH`, and
/// the folder each interpreter writes its tracemalloc figures to.
pub fn memory_env(shim_dir: &Path, out_dir: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("PYTHONPATH".into(), python_path(shim_dir)),
        ("PROFMAP_MEMORY_DIR".into(), out_dir.as_os_str().to_owned()),
    ]
}

/// `PYTHONPATH` with the shim's folder first, before the inherited one.
fn python_path(shim_dir: &Path) -> OsString {
    let mut path = OsString::from(shim_dir);
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    path
}

/// One line of the log: a call, or a name the shim did not find.
#[derive(Debug, Clone, Deserialize)]
pub struct TraceCall {
    pub function: String,
    #[serde(default)]
    pub module: String,
    #[serde(default)]
    pub wall_s: f64,
    #[serde(default)]
    pub cpu_s: f64,
    #[serde(default)]
    pub mem_delta_bytes: i64,
    #[serde(default)]
    pub http_requests: u64,
    #[serde(default)]
    pub db_queries: u64,
    /// Set when the function was not found where asked.
    #[serde(default)]
    pub error: Option<String>,
}

/// The calls in a log, and the warnings (names not found, unreadable lines).
pub fn read_log(path: &Path) -> (Vec<TraceCall>, Vec<String>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (Vec::new(), Vec::new());
    };
    let (mut calls, mut warnings) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<TraceCall>(line) {
            Ok(TraceCall { error: Some(e), .. }) => warnings.push(format!("--trace: {e}")),
            Ok(c) => calls.push(c),
            Err(e) => warnings.push(format!("--trace: unreadable log line ({e})")),
        }
    }
    (calls, warnings)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Per function (module, qualname), over runs (one log each): calls per run, the median
/// call, HTTP and DB counts per run.
pub fn summarize(runs: &[Vec<TraceCall>]) -> Vec<TracedFunction> {
    let mut by: BTreeMap<(String, String), Vec<Vec<&TraceCall>>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for c in run {
            let per_run = by
                .entry((c.module.clone(), c.function.clone()))
                .or_insert_with(|| vec![Vec::new(); runs.len()]);
            per_run[i].push(c);
        }
    }
    by.into_iter()
        .map(|((module, function), per_run)| {
            let all: Vec<&TraceCall> = per_run.iter().flatten().copied().collect();
            let per = |f: &dyn Fn(&TraceCall) -> f64| {
                median(
                    per_run
                        .iter()
                        .map(|r| r.iter().map(|c| f(c)).sum())
                        .collect(),
                )
            };
            TracedFunction {
                function,
                module,
                runs: runs.len() as u32,
                calls_per_run: per(&|_| 1.0),
                wall_ms_median: median(all.iter().map(|c| c.wall_s * 1e3).collect()),
                cpu_ms_median: median(all.iter().map(|c| c.cpu_s * 1e3).collect()),
                mem_delta_bytes_median: median(
                    all.iter().map(|c| c.mem_delta_bytes as f64).collect(),
                ),
                http_requests_per_run: per(&|c| c.http_requests as f64),
                db_queries_per_run: per(&|c| c.db_queries as f64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_function() {
        let c = |f: &str, w: f64, db: u64| TraceCall {
            function: f.into(),
            module: "m".into(),
            wall_s: w,
            cpu_s: w / 2.0,
            mem_delta_bytes: 8,
            http_requests: 0,
            db_queries: db,
            error: None,
        };
        let runs = vec![
            vec![c("a", 0.001, 1), c("a", 0.003, 2), c("b", 1.0, 0)],
            vec![c("a", 0.002, 0)],
            vec![c("a", 0.004, 1), c("a", 0.005, 1)],
        ];
        let s = summarize(&runs);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].calls_per_run, 2.0);
        assert!((s[0].wall_ms_median - 3.0).abs() < 1e-9);
        assert_eq!(s[0].db_queries_per_run, 2.0);
        assert_eq!(s[1].calls_per_run, 0.0, "b ran in one run of three");
    }
}
