//! configuration: heavy run-queue waits — runnable threads waiting for a CPU (more busy
//! threads than cores, a CPU quota, a noisy neighbour). Confirmed when the `runqueue`
//! category holds at least [`MIN_SHARE_PCT`] of the wall time (critical path);
//! dismissed below. When the profiled run was preempted more than [`PROFILER_FACTOR`]
//! times as often as the baseline runs (no profiler), the share is scaled down by that
//! ratio first: on a machine with few cores, profmap's own threads are the competing
//! load (a `tar czf` on 2 CPUs: 37 preemptions profiled, 12 without). cgroup throttling
//! counters are not recorded, so throttling shows only as run-queue time.

use super::facts::Facts;
use super::site::{self, deepest, ids};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_SHARE_PCT: f64 = 10.0;

/// The profiled run preempted more than this many times as often as the runs without
/// the profiler: its run-queue waits are mostly the profiler's doing.
pub const PROFILER_FACTOR: f64 = 2.0;

const NOTE: &str = "configuration: runnable-but-waiting time on the critical path (the \
                    runqueue category, from switch-outs while runnable); confirmed at ≥ 10% \
                    of wall; cgroup throttling is not recorded separately";

pub fn check(f: &Facts) -> RuleOutput {
    let rq = f.wait("runqueue");
    let share = f.share(rq);
    let cs = f
        .involuntary_cs
        .map(|n| format!("; the profiled run was preempted {n} times (involuntary switches)"))
        .unwrap_or_default();
    let evidence = format!(
        "threads waited {} for a CPU: {share:.1}% of wall{cs}",
        site::ms(rq)
    );
    let mut out = RuleOutput::default();
    // The profiler's own threads compete for the CPUs too: when the runs without it were
    // preempted far less, the share left once the profiled run's preemptions are scaled
    // to theirs is what the program meets on its own.
    let (share, evidence) = match (f.involuntary_cs, f.baseline_involuntary_cs) {
        (Some(p), Some(b)) if p as f64 > PROFILER_FACTOR * b.max(1.0) => {
            let alone = share * b / p as f64;
            (
                alone,
                format!(
                    "{evidence}, against a median of {b:.0} in the runs without the profiler: \
                     most of that wait was for the profiler's own threads; scaled to those \
                     runs, about {alone:.1}% of wall"
                ),
            )
        }
        _ => (share, evidence),
    };
    if share < MIN_SHARE_PCT {
        out.findings.push(Finding::new(
            C::Configuration,
            V::Dismissed,
            "the run".into(),
            "heavy run-queue waits (CPU oversubscribed or throttled)".into(),
            evidence,
            NOTE,
        ));
        return out;
    }
    let site = deepest(f, |s| {
        s.waits_ms.get("runqueue").copied().unwrap_or(0.0) * 2.0 >= rq
    });
    let at = site.map_or_else(|| "the run".to_string(), |s| s.call_site.clone());
    out.findings.push(
        Finding::new(
            C::Configuration,
            V::Confirmed,
            at,
            "heavy run-queue waits (CPU oversubscribed or throttled)".into(),
            evidence,
            NOTE,
        )
        .steps(ids(&site.into_iter().collect::<Vec<_>>()))
        .advice(
            "give the run the CPUs it asks for: fewer busy threads than cores, no CPU \
             quota below its need, no competing load on the machine"
                .into(),
            Some(share),
            format!("the {share:.1}% of wall spent runnable but not running"),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::*;

    #[test]
    fn run_queue_share_decides() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("runqueue".into(), 300.0);
        f.involuntary_cs = Some(1200);
        let out = check(&f);
        assert_eq!(out.findings[0].suspicion.verdict, V::Confirmed);
        assert!(out.findings[0].suspicion.evidence.contains("30.0% of wall"));
        f.waits_ms.insert("runqueue".into(), 20.0);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Dismissed);
    }

    #[test]
    fn preemption_the_profiler_caused_is_scaled_away() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("runqueue".into(), 300.0);
        f.involuntary_cs = Some(1200);
        // Without the profiler the program was preempted 100 times: 2.5% of wall left.
        f.baseline_involuntary_cs = Some(100.0);
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Dismissed, "{}", s.evidence);
        assert!(
            s.evidence.contains("median of 100") && s.evidence.contains("about 2.5% of wall"),
            "{}",
            s.evidence
        );
        // Preempted about as often without it: the waits are the program's own.
        f.baseline_involuntary_cs = Some(1000.0);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Confirmed);
    }
}
