//! One change that `profmap instrument` made in the user's project, as the map and
//! report.md Part B show it (File | Change type | What | Lines). Read from the project's
//! manifest when a session starts, so a recording carries what was in place when it ran.

use serde::{Deserialize, Serialize};

/// One row of the instrumentation changelog.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InstrumentedFile {
    /// The file, relative to the project folder.
    pub file: String,
    /// `modified` (lines inserted into a user file) or `created` (a file profmap made).
    pub change_type: String,
    /// What the change is, e.g. "timing wrapper on SequenceMatcher.find_longest_match".
    pub what: String,
    /// The inserted lines in the instrumented file, e.g. "305" or "30-70"; empty for a
    /// created file.
    pub lines: String,
}

/// One function wrapped at run time by `--trace` (the shim), over the counted traced
/// runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TracedFunction {
    /// The qualified name as asked for.
    pub function: String,
    /// The module it was found in (`__main__` for the script).
    pub module: String,
    /// Counted runs the figures come from.
    pub runs: u32,
    /// Calls per run (median over the runs).
    pub calls_per_run: f64,
    /// Median wall time of a call, ms (all calls of the counted runs).
    pub wall_ms_median: f64,
    /// Median CPU time of a call (the calling thread), ms.
    pub cpu_ms_median: f64,
    /// Median change of traced memory over a call (tracemalloc), bytes.
    pub mem_delta_bytes_median: f64,
    /// HTTP requests (http.client) made during the calls, per run (median).
    pub http_requests_per_run: f64,
    /// DB-API queries made during the calls, per run (median).
    pub db_queries_per_run: f64,
}
