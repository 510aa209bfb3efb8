//! Escalation, as the seeds define it: Level 1 (function hotspots) always; Level 2
//! (line tables) for a top bottleneck in Python code whose cause Level 1 leaves open;
//! Level 3 (allocations per line from a tracemalloc run) when the run's memory is
//! abnormal; and the switch to instrumentation when sampling costs the target too much.
//! Each decision is kept with its reason and figures (the map's `escalation` list).
//!
//! The rules:
//! - A bottleneck's cause is clear at Level 1 when one class holds at least
//!   [`CLEAR_PCT`] of its time (on-CPU, or one wait class other than `other`): the
//!   escalation stops there. Otherwise (CPU and waiting mixed, or the time mostly in
//!   waits the kernel stack did not explain) its line table is kept.
//! - Memory is abnormal when the baseline's median peak RSS reaches [`MEMORY_PEAK_MB`]
//!   (some twenty times a bare interpreter's ~10 MiB), or the main process's resident
//!   set grew by [`MEMORY_GROWTH_MB`] over a run.
//! - Sampling overhead (the profiled run's wall time over the baseline median) beyond
//!   [`MAX_SAMPLING_OVERHEAD_PCT`] switches to `--trace` of the [`HOT_FUNCTIONS`]
//!   hottest Python functions of the user's code (the session runs it).
//!
//! Levels 3 and the switch need runs of the target, so the session decides them with
//! [`memory_rule`] and [`overhead_rule`] and keeps its decisions in the recording;
//! [`run`] adds Levels 1 and 2 and orders the list.

use std::collections::HashMap;

use crate::profile::{EscalationDecision, FrameKind, Recording, RunMeasurement, SampledProfile};

use super::Analysis;
use super::lines::LineTable;
use super::ownframe::is_system;

/// Share of a function's time in one class that makes its cause clear, percent.
pub const CLEAR_PCT: f64 = 80.0;
/// Median peak RSS of the tree from which memory is profiled (Level 3), MiB.
pub const MEMORY_PEAK_MB: f64 = 200.0;
/// Growth of the main process's resident set over a run from which memory is
/// profiled, MiB.
pub const MEMORY_GROWTH_MB: f64 = 100.0;
/// Sampling overhead beyond which hot functions are instrumented instead, percent.
pub const MAX_SAMPLING_OVERHEAD_PCT: f64 = 20.0;
/// Functions instrumented when sampling costs too much.
pub const HOT_FUNCTIONS: usize = 3;

/// Complete the escalation list: Level 1, Level 2 per Python bottleneck (keeping the
/// line tables it calls for), then the session's decisions.
pub fn run(a: &mut Analysis, rec: &Recording) {
    let mut out = vec![level_one(a)];
    let tables = std::mem::take(&mut a.line_tables);
    for t in tables {
        let target = Some(format!("{} ({})", t.function, t.file));
        let (taken, reason) = match clear_cause(&t) {
            Some(cause) => (
                false,
                format!("clear at Level 1: {cause}; escalation stops (no line table)"),
            ),
            None => (true, format!("{}: lines split it", unclear_why(&t))),
        };
        out.push(EscalationDecision {
            level: 2,
            action: "line table".into(),
            target,
            taken,
            reason,
        });
        if taken {
            a.line_tables.push(t);
        }
    }
    if !out.iter().any(|d| d.level == 2) && !a.top_bottlenecks.is_empty() {
        out.push(EscalationDecision {
            level: 2,
            action: "line table".into(),
            target: None,
            taken: false,
            reason: "no top bottleneck is Python code: native code's file:line is in its step \
                     and location"
                .into(),
        });
    }
    out.extend(rec.escalation.iter().cloned());
    // Levels in order, the switch to instrumentation (level 0) last.
    out.sort_by_key(|d| if d.level == 0 { u8::MAX } else { d.level });
    a.escalation = out;
}

fn level_one(a: &Analysis) -> EscalationDecision {
    let reason = match a.top_bottlenecks.first() {
        Some(b) => format!(
            "always: {} hotspots ranked; the top bottleneck is {} ({:.1}% of the run)",
            a.hotspots.len(),
            b.function,
            b.share
        ),
        None => "always; the recording holds no samples to rank".into(),
    };
    EscalationDecision {
        level: 1,
        action: "function hotspots".into(),
        target: None,
        taken: true,
        reason,
    }
}

/// The one class holding ≥ [`CLEAR_PCT`] of the function's time, said with figures.
/// Waiting for a CPU counts with running on one: the function wanted to compute, and
/// the machine's other load is no cause in the code.
fn clear_cause(t: &LineTable) -> Option<String> {
    let runq = t.waits_ms.get("runqueue").copied().unwrap_or(0.0);
    let cpu = 100.0 * (t.cpu_ms + runq) / t.total_ms.max(f64::MIN_POSITIVE);
    if cpu >= CLEAR_PCT {
        let queued = if runq > 0.0 {
            format!(" or waiting for one ({runq:.0} ms)")
        } else {
            String::new()
        };
        return Some(format!(
            "{cpu:.0}% of its {:.0} ms on a CPU{queued}",
            t.total_ms
        ));
    }
    let (class, ms) = t.top_wait()?;
    let share = 100.0 * ms / t.total_ms.max(f64::MIN_POSITIVE);
    (share >= CLEAR_PCT && class != "other")
        .then(|| format!("{share:.0}% of its {:.0} ms waiting ({class})", t.total_ms))
}

/// Why Level 1 does not settle it.
fn unclear_why(t: &LineTable) -> String {
    let cpu = t.cpu_pct();
    match t.top_wait() {
        Some(("other", ms)) if 100.0 * ms / t.total_ms.max(f64::MIN_POSITIVE) >= CLEAR_PCT => {
            format!(
                "unclear at Level 1: {:.0}% of its {:.0} ms is off-CPU for a reason the \
                 kernel stack did not show",
                100.0 * ms / t.total_ms,
                t.total_ms
            )
        }
        Some((class, _)) => format!(
            "mixed at Level 1: {cpu:.0}% of its {:.0} ms on a CPU, {:.0}% waiting ({class} \
             most), neither ≥ {CLEAR_PCT:.0}%",
            t.total_ms,
            100.0 * (t.total_ms - t.cpu_ms) / t.total_ms.max(f64::MIN_POSITIVE),
        ),
        None => format!(
            "unclear at Level 1: {cpu:.0}% of its {:.0} ms on a CPU",
            t.total_ms
        ),
    }
}

/// Level 3's rule: whether memory is abnormal, with the figures said.
pub fn memory_rule(rec: &Recording) -> (bool, String) {
    let counted: Vec<&RunMeasurement> = rec.baseline.iter().flat_map(|b| b.counted()).collect();
    let runs: Vec<&RunMeasurement> = if counted.is_empty() {
        rec.profiled_run.iter().collect()
    } else {
        counted
    };
    let peak_mb = |r: &&RunMeasurement| r.tree_rss_peak_kb.unwrap_or(r.max_rss_kb) as f64 / 1024.0;
    let peaks: Vec<f64> = runs.iter().map(peak_mb).collect();
    let growths: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.memory_delta_kb)
        .map(|k| k as f64 / 1024.0)
        .collect();
    let Some(peak) = crate::stats::median(&peaks) else {
        return (false, "no run measured its memory".into());
    };
    let growth = crate::stats::median(&growths);
    let growth_said = growth.map_or(String::new(), |g| format!(", growth {g:.0} MiB"));
    if peak >= MEMORY_PEAK_MB {
        (
            true,
            format!("peak RSS {peak:.0} MiB ≥ {MEMORY_PEAK_MB:.0} MiB{growth_said}"),
        )
    } else if growth.is_some_and(|g| g >= MEMORY_GROWTH_MB) {
        (
            true,
            format!(
                "resident set grew {:.0} MiB over a run (≥ {MEMORY_GROWTH_MB:.0} MiB; peak \
                 {peak:.0} MiB)",
                growth.unwrap_or(0.0)
            ),
        )
    } else {
        (
            false,
            format!(
                "memory normal: peak RSS {peak:.0} MiB < {MEMORY_PEAK_MB:.0} MiB{growth_said} \
                 (< {MEMORY_GROWTH_MB:.0} MiB)"
            ),
        )
    }
}

/// The profiled run's overhead against the baseline median, percent, with both walls
/// (ms); None without both.
pub fn overhead_rule(rec: &Recording) -> Option<(f64, f64, f64)> {
    let profiled = rec.profiled_run.as_ref()?.wall_ms;
    let walls: Vec<f64> = rec
        .baseline
        .iter()
        .flat_map(|b| b.counted())
        .map(|r| r.wall_ms)
        .collect();
    let base = crate::stats::median(&walls).filter(|b| *b > 0.0)?;
    Some((100.0 * (profiled / base - 1.0), profiled, base))
}

/// Share of the Python samples' time a function needs to be instrumented, percent.
pub const MIN_HOT_PCT: f64 = 5.0;

/// The hottest Python functions, by the time of the samples whose innermost Python
/// frame of the user's code they are (of the standard library's, for a sample with
/// none: `python3 -m tokenize` is all library code; time runnable without a CPU left
/// out): `FILE:QUALNAME` specs for
/// `--trace` (`MODULE:QUALNAME` for library code), hottest first, each holding ≥ [`MIN_HOT_PCT`] of that time. Code objects
/// that cannot be wrapped (`<module>`, comprehensions) are left out.
pub fn hot_python_functions(p: &SampledProfile, n: usize) -> Vec<String> {
    let mut by: HashMap<u32, u64> = HashMap::new();
    let mut all = 0u64;
    // Time spent runnable without a CPU is the machine's load, not the function's cost:
    // one long preemption of a short run decided the ranking (a 30 ms script: `beta`
    // alone, `alpha` with half the CPU under 5%).
    let preempted = |s: &crate::profile::ThreadSample| {
        matches!(
            s.kind,
            crate::profile::SampleKind::OffCpu {
                state: crate::profile::WaitState::Preempted
            }
        )
    };
    for s in p.samples.iter().filter(|s| !preempted(s)) {
        let (mut node, mut any) = (s.stack, None);
        for _ in 0..=p.stacks.len() {
            let Some(nd) = node.get().and_then(|i| p.stacks.get(i as usize)) else {
                break;
            };
            if let Some(f) = p.frames.get(nd.frame as usize)
                && f.kind == FrameKind::Python
                && f.file.is_some()
            {
                if !is_system(f) {
                    any = Some(nd.frame);
                    break;
                }
                any = any.or(Some(nd.frame));
            }
            node = nd.parent.into();
        }
        if let Some(frame) = any {
            *by.entry(frame).or_default() += s.weight_ns;
            all += s.weight_ns;
        }
    }
    // Frames differ by line: add them up per function.
    let mut per_fn: HashMap<(String, String), u64> = HashMap::new();
    for (frame, ns) in by {
        if let Some(f) = p.frames.get(frame as usize) {
            // Library code by module (found wherever it is imported from), the user's
            // by file (a script runs as `__main__`).
            let target = match &f.module {
                Some(m) if is_system(f) && !m.is_empty() && m != "__main__" => m.clone(),
                _ => f.file.clone().unwrap_or_default(),
            };
            let key = (target, f.function.clone());
            *per_fn.entry(key).or_default() += ns;
        }
    }
    let mut v: Vec<_> = per_fn
        .into_iter()
        .filter(|((_, f), ns)| !f.contains('<') && 100.0 * *ns as f64 >= MIN_HOT_PCT * all as f64)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(n)
        .map(|((file, f), _)| format!("{file}:{f}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn table(cpu: f64, waits: &[(&str, f64)]) -> LineTable {
        let w: BTreeMap<String, f64> = waits.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        LineTable {
            function: "f".into(),
            file: "/a.py".into(),
            total_ms: cpu + w.values().sum::<f64>(),
            cpu_ms: cpu,
            waits_ms: w,
            ..LineTable::default()
        }
    }

    #[test]
    fn hot_functions_are_the_users_then_the_librarys_by_module() {
        use crate::profile::{Frame, SampleKind, StackNode, ThreadSample};
        let py = |function: &str, file: &str, module: &str| Frame {
            function: function.into(),
            module: Some(module.into()),
            file: Some(file.into()),
            line: Some(1),
            kind: FrameKind::Python,
            inlined: false,
        };
        let lib = "/usr/lib/python3.11/tokenize.py";
        let sample = |stack: u32, ms: u64| ThreadSample {
            pid: 1,
            tid: 1,
            time_ns: 0,
            stack: Some(stack).into(),
            weight_ns: ms * 1_000_000,
            kind: SampleKind::OnCpu,
        };
        let p = SampledProfile {
            frames: vec![
                py("main", "/app/a.py", "a"),
                py("_tokenize", lib, "tokenize"),
                py("<module>", "/app/a.py", "a"),
            ],
            stacks: vec![
                StackNode {
                    parent: None,
                    frame: 0,
                },
                StackNode {
                    parent: Some(0),
                    frame: 1,
                },
                StackNode {
                    parent: None,
                    frame: 1,
                },
                StackNode {
                    parent: None,
                    frame: 2,
                },
                // A cycle (an untrusted recording) ends the walk.
                StackNode {
                    parent: Some(4),
                    frame: 1,
                },
            ],
            samples: vec![sample(1, 30), sample(2, 50), sample(3, 40), sample(4, 1)].into(),
            ..SampledProfile::default()
        };
        assert_eq!(
            hot_python_functions(&p, 3),
            vec![
                "tokenize:_tokenize".to_string(),
                "/app/a.py:main".to_string()
            ]
        );
    }

    #[test]
    fn one_class_over_eighty_percent_is_clear_and_a_mix_is_not() {
        assert!(clear_cause(&table(90.0, &[("network", 10.0)])).is_some());
        assert!(clear_cause(&table(5.0, &[("network", 95.0)])).is_some());
        assert!(clear_cause(&table(50.0, &[("network", 50.0)])).is_none());
        assert!(clear_cause(&table(5.0, &[("other", 95.0)])).is_none());
        assert!(unclear_why(&table(50.0, &[("network", 50.0)])).starts_with("mixed"));
        assert!(unclear_why(&table(5.0, &[("other", 95.0)])).starts_with("unclear"));
    }
}
