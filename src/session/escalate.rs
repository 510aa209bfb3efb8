//! The escalation runs of a Python target, after the profiled run and any `--trace`:
//! Level 3 (one run under tracemalloc through the shim) when the baseline's memory is
//! abnormal, and the switch to instrumentation (`--trace` of the hottest functions)
//! when sampling slowed the target by more than 20%. The rules are
//! `analyse::escalate`'s; each decision, taken or not, goes in `rec.escalation`.
//! `PROFMAP_ESCALATE_OVERHEAD_PCT` replaces the 20% threshold (the tests force the
//! switch with it; a user may raise it).

use crate::analyse::escalate::{
    HOT_FUNCTIONS, MAX_SAMPLING_OVERHEAD_PCT, hot_python_functions, memory_rule, overhead_rule,
};
use crate::error::Error;
use crate::instrument::{memory, shim};
use crate::measure::{self, LogSink, RunOptions};
use crate::plan::{MeasurePlan, SessionPlan};
use crate::profile::{EscalationDecision, MemoryProfile, Recording};

use super::trace::{NoHooks, TraceDir, trace_functions, traced_target};

/// Run what the escalation rules call for (Python targets only).
pub fn escalate_phase(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<(), Error> {
    let python = rec
        .sampled
        .as_ref()
        .is_some_and(|p| !p.python.interpreters.is_empty());
    if !python {
        return Ok(());
    }
    let (needed, why) = memory_rule(rec);
    let off = " (not run: --no-escalate)";
    let decision = if needed && plan.escalate {
        let why = match memory_run(plan, opts, log, rec)? {
            Some(n) => format!("{why}: tracemalloc run of {n} interpreter(s)"),
            None => format!("{why}: the tracemalloc run wrote no figures (see warnings)"),
        };
        decided(3, "tracemalloc run", rec.memory.is_some(), why)
    } else if needed {
        decided(3, "tracemalloc run", false, format!("{why}{off}"))
    } else {
        decided(3, "tracemalloc run", false, why)
    };
    rec.escalation.push(decision);
    let limit = std::env::var("PROFMAP_ESCALATE_OVERHEAD_PCT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .unwrap_or(MAX_SAMPLING_OVERHEAD_PCT);
    let switch = match overhead_rule(rec) {
        None => decided(
            0,
            "instrumentation",
            false,
            "sampling overhead unknown (no baseline runs to compare with)".into(),
        ),
        Some((pct, prof, base)) if pct > limit => {
            let said = format!(
                "sampling overhead {pct:.0}% > {limit:.0}% ({prof:.0} ms profiled against \
                 {base:.0} ms)"
            );
            let hot = rec
                .sampled
                .as_ref()
                .map(|p| hot_python_functions(p, HOT_FUNCTIONS))
                .unwrap_or_default();
            if !plan.trace.is_empty() {
                decided(
                    0,
                    "instrumentation",
                    true,
                    format!("{said}: --trace was given"),
                )
            } else if hot.is_empty() {
                decided(
                    0,
                    "instrumentation",
                    false,
                    format!("{said}, but no Python function of the user's code was sampled"),
                )
            } else if !plan.escalate {
                decided(0, "instrumentation", false, format!("{said}{off}"))
            } else {
                trace_functions(&hot, plan, opts, log, rec)?;
                decided_target(
                    decided(
                        0,
                        "instrumentation",
                        true,
                        format!("{said}: traced runs of the hottest functions instead"),
                    ),
                    Some(hot.join(", ")),
                )
            }
        }
        Some((pct, _, _)) => decided(
            0,
            "instrumentation",
            false,
            format!("sampling overhead {pct:.0}% ≤ {limit:.0}%: sampling is kept"),
        ),
    };
    rec.escalation.push(switch);
    Ok(())
}

fn decided(level: u8, action: &str, taken: bool, reason: String) -> EscalationDecision {
    EscalationDecision {
        level,
        action: action.into(),
        target: None,
        taken,
        reason,
    }
}

fn decided_target(d: EscalationDecision, target: Option<String>) -> EscalationDecision {
    EscalationDecision { target, ..d }
}

/// One run under tracemalloc; the interpreters' figures in `rec.memory`. The number of
/// interpreters that wrote figures, None when none did.
fn memory_run(
    plan: &SessionPlan,
    opts: &RunOptions,
    log: &LogSink,
    rec: &mut Recording,
) -> Result<Option<usize>, Error> {
    let dir = TraceDir::create()?;
    shim::write_shim(&dir.0)?;
    let figures = dir.0.join("memory");
    std::fs::create_dir(&figures).map_err(|e| Error::io(&figures, e))?;
    let spec = traced_target(&plan.target, shim::memory_env(&dir.0, &figures));
    let once = MeasurePlan {
        runs: 1,
        warmup: 0,
        ..plan.measure.clone()
    };
    let (baseline, _) = measure::run_baseline(
        &spec,
        &once,
        opts,
        log,
        &mut || Box::new(NoHooks),
        &mut |_, _| {},
    )?;
    let (processes, warnings) = memory::read_memory(&figures);
    rec.warnings.extend(warnings);
    if processes.is_empty() {
        rec.warnings.push(
            "memory run (Level 3): no interpreter wrote its tracemalloc figures (it exited \
             through os._exit or a signal, or was not CPython)"
                .into(),
        );
        return Ok(None);
    }
    let n = processes.len();
    rec.memory = Some(MemoryProfile {
        processes,
        wall_ms: baseline.runs.first().map_or(0.0, |r| r.wall_ms),
    });
    Ok(Some(n))
}
