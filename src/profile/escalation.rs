//! What the session escalated to while recording (the seeds' Level 3 memory run and
//! the switch to instrumentation), and the memory run's allocations per line: plain
//! data kept in the recording for the analysis's `escalation` list.

use serde::{Deserialize, Serialize};

/// One escalation decision: a level entered or not, and why, with figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EscalationDecision {
    /// 1 function hotspots, 2 line level, 3 memory; 0 for the switch to
    /// instrumentation (a stop rule, not a level).
    pub level: u8,
    /// What was (or would have been) done: "function hotspots", "line table",
    /// "tracemalloc run", "instrumentation".
    pub action: String,
    /// The function or process it applies to, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether it was done.
    pub taken: bool,
    /// Why, with the measured figures and the threshold.
    pub reason: String,
}

/// Level 3: allocations per line from one run of the target under tracemalloc.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryProfile {
    /// One per Python process that wrote its tracemalloc figures.
    pub processes: Vec<MemoryProcess>,
    /// The run's wall time under tracemalloc, ms.
    pub wall_ms: f64,
}

/// One interpreter's tracemalloc figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryProcess {
    pub pid: i32,
    /// tracemalloc's peak of traced memory over the run, bytes.
    pub peak_bytes: u64,
    /// Traced memory still allocated at exit, bytes.
    pub end_bytes: u64,
    /// Traced memory when `at_peak` was taken (the highest the poller saw), bytes.
    pub snapshot_bytes: u64,
    /// Largest lines by memory held at that snapshot.
    pub at_peak: Vec<MemoryLine>,
    /// Largest lines by memory still held at exit.
    pub at_end: Vec<MemoryLine>,
}

/// Memory held by allocations made at one line.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryLine {
    pub file: String,
    pub line: u32,
    pub bytes: u64,
    /// Live allocations (blocks) from the line.
    pub blocks: u64,
}
