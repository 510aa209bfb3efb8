//! The diagnosis: measured rules over the analysis that confirm or dismiss suspicions
//! (`suspicion_stack`), turn the confirmed ones into ranked advice
//! (`optimization_hints`), say when the problem is not the code
//! (`wrong_tool_indicators`), and rewrite the bottlenecks' why-chains toward causes.
//!
//! One input, [`Facts`], built once from the analysis, the sampled profile and the
//! measured runs. One small file per rule family, registered in [`RULES`], each with
//! its tests. A rule that lacks its evidence neither confirms nor dismisses: it leaves
//! the suspicion out and says what is missing in a warning.
//!
//! Hints are ranked by expected gain: an Amdahl bound from the measured share (removing
//! 39 of 40 round trips' wait of a step holding 80% of wall gains at most 78%).

mod architecture;
mod calls;
mod configuration;
mod connection;
mod data_flow;
mod delayed_ack;
pub mod facts;
mod installed;
mod lifecycle;
mod lock;
pub mod norms;
mod redundant;
mod site;
mod stacks;
mod storage;
pub mod types;
mod why;
mod wrong_tool;

pub use facts::Facts;
pub use types::{
    Finding, OptimizationHint, RuleOutput, Suspicion, SuspicionCategory, SuspicionSource,
    SuspicionVerdict, WrongToolEvidence, WrongToolIndicator,
};

use crate::profile::{RunMeasurement, SampledProfile};

use super::Analysis;

/// A rule family: its name and its check.
pub type Rule = (&'static str, fn(&Facts) -> RuleOutput);

/// Every rule family, in the order their suspicions are listed at equal rank.
pub const RULES: &[Rule] = &[
    ("architecture", architecture::check),
    ("connection_management", connection::check),
    ("data_flow", data_flow::check),
    ("redundant_work", redundant::check),
    ("resource_lifecycle", lifecycle::check),
    ("configuration", configuration::check),
    ("delayed_ack", delayed_ack::check),
    ("lock_contention", lock::check),
    ("storage_reads", storage::check),
];

/// What the diagnosis adds to the map.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnosis {
    /// Confirmed first (by expected gain), then dismissed.
    pub suspicions: Vec<Suspicion>,
    /// Confirmed suspicions' advice, by expected gain, highest first.
    pub hints: Vec<OptimizationHint>,
    /// Not-a-code-problem verdicts with their evidence.
    pub wrong_tool: Vec<WrongToolEvidence>,
    /// What could not be checked, and why.
    pub warnings: Vec<String>,
}

/// Diagnose an analysed profile: fills `a.diagnosis` and rewrites the top bottlenecks'
/// why-chains. `profiled` is the profiled run's measurement, `runs` the counted
/// baseline runs.
pub fn run(
    a: &mut Analysis,
    p: &SampledProfile,
    profiled: Option<&RunMeasurement>,
    runs: &[&RunMeasurement],
) {
    let f = Facts::build(a, p, profiled, runs);
    let (d, found) = diagnose(&f);
    why::rewrite(&f, &found, &mut a.top_bottlenecks);
    a.diagnosis = d;
}

/// Run every rule over the facts; the findings are returned merged, for the why-chains.
pub fn diagnose(f: &Facts) -> (Diagnosis, Vec<Finding>) {
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    for (_, check) in RULES {
        let out = check(f);
        found.extend(out.findings);
        warnings.extend(out.warnings);
    }
    let mut found = merge(found);
    found.sort_by(|a, b| rank(b).total_cmp(&rank(a)));
    for (i, x) in found.iter_mut().enumerate() {
        x.suspicion.id = Some(format!("S{}", i + 1));
    }
    let wrong_tool = wrong_tool::indicators(f, &found, &mut warnings);
    let hints = found.iter().filter_map(|x| hint(f, x)).collect();
    let d = Diagnosis {
        suspicions: found.iter().map(|x| x.suspicion.clone()).collect(),
        hints,
        wrong_tool,
        warnings,
    };
    (d, found)
}

/// Sort key: confirmed before dismissed, then by expected gain (unknown gains last).
fn rank(x: &Finding) -> f64 {
    match (x.confirmed(), x.advice.as_ref().and_then(|a| a.gain_pct)) {
        (true, Some(g)) => 1000.0 + g,
        (true, None) => 500.0,
        (false, _) => 0.0,
    }
}

/// Identical suspicions (category, verdict, description) raised at several steps or
/// call sites become one entry listing all of them.
fn merge(found: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for x in found {
        let same = out.iter_mut().find(|o| {
            o.suspicion.category == x.suspicion.category
                && o.suspicion.verdict == x.suspicion.verdict
                && o.suspicion.description == x.suspicion.description
        });
        let Some(o) = same else {
            out.push(x);
            continue;
        };
        let s = &mut o.suspicion;
        if !s.location.split("; ").any(|l| l == x.suspicion.location) {
            s.location = format!("{}; {}", s.location, x.suspicion.location);
        }
        if s.evidence != x.suspicion.evidence {
            s.evidence = format!("{}; {}", s.evidence, x.suspicion.evidence);
        }
        for step in x.suspicion.affected_steps {
            if !s.affected_steps.contains(&step) {
                s.affected_steps.push(step);
            }
        }
        let gain = |a: &Option<types::Advice>| a.as_ref().and_then(|a| a.gain_pct).unwrap_or(-1.0);
        if gain(&x.advice) > gain(&o.advice) {
            o.advice = x.advice;
        }
    }
    out
}

fn hint(f: &Facts, x: &Finding) -> Option<OptimizationHint> {
    let a = x.advice.as_ref().filter(|_| x.confirmed())?;
    let note = installed::program_of(f, x)
        .map(installed::hint_note)
        .unwrap_or_default();
    let gain = match a.gain_pct {
        Some(g) => format!("; expected gain ≤ {g:.1}% of wall ({})", a.gain_basis),
        None => format!("; expected gain not estimated ({})", a.gain_basis),
    };
    Some(OptimizationHint {
        hint: format!("{}{note}", a.hint),
        evidence: format!("{}{gain}", x.suspicion.evidence),
        suspicion: x.suspicion.id.clone(),
        step: x.suspicion.affected_steps.first().cloned(),
        expected_gain_pct: a.gain_pct,
    })
}

#[cfg(test)]
mod tests {
    use super::super::resources::ResourceRole;
    use super::site::testing::*;
    use super::*;

    /// A client making 40 queries to a local database from one call site, a new
    /// connection each.
    fn client() -> Facts {
        let mut f = facts(1000.0);
        let mut p = peer("postgres:5432", ResourceRole::Database, 800.0);
        p.round_trips = Some(40);
        p.connections = Some(40);
        p.calls = Some(160);
        p.bytes = Some(40_000);
        f.peers = vec![p];
        f.sockets_recorded = true;
        f.waits_ms.insert("db".into(), 800.0);
        f.waits_ms.insert("cpu".into(), 200.0);
        let mut s = step("1.1", "fetch_user (app.c:12)", 850.0);
        s.resources = vec![res("postgres:5432", 800.0, Some(40), Some(40))];
        f.steps = vec![step("1", "main (app.c:30)", 1000.0), s];
        f
    }

    #[test]
    fn hints_are_confirmed_suspicions_ranked_by_gain() {
        let (d, _) = diagnose(&client());
        let gains: Vec<Option<f64>> = d.hints.iter().map(|h| h.expected_gain_pct).collect();
        assert_eq!(gains, vec![Some(78.0), Some(78.0)], "{:#?}", d.hints);
        assert_eq!(d.hints[0].suspicion.as_deref(), Some("S1"));
        // Confirmed first, every hint backed by a confirmed suspicion.
        let first_dismissed = d
            .suspicions
            .iter()
            .position(|s| s.verdict == SuspicionVerdict::Dismissed)
            .unwrap_or(d.suspicions.len());
        assert_eq!(first_dismissed, 2);
        for h in &d.hints {
            let s = d.suspicions.iter().find(|s| s.id == h.suspicion);
            assert_eq!(s.map(|s| s.verdict), Some(SuspicionVerdict::Confirmed));
        }
        assert!(d.wrong_tool.is_empty(), "{:?}", d.wrong_tool);
    }

    #[test]
    fn identical_suspicions_at_two_steps_merge() {
        let mut f = client();
        let mut other = step("1.2", "fetch_order (app.c:20)", 100.0);
        other.resources = vec![res("postgres:5432", 80.0, Some(25), Some(25))];
        f.steps.push(other);
        let mut p2 = f.peers[0].clone();
        p2.pid = 2;
        f.peers.push(p2);
        let (d, _) = diagnose(&f);
        let conn: Vec<_> = d
            .suspicions
            .iter()
            .filter(|s| s.category == SuspicionCategory::ConnectionManagement)
            .collect();
        assert_eq!(conn.len(), 1, "{conn:#?}");
    }

    #[test]
    fn a_cpu_bound_run_dismisses_every_io_suspicion() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("cpu".into(), 1000.0);
        f.cpu_total_ms = 1000.0;
        f.sockets_recorded = true;
        f.file_reads_recorded = true;
        let (d, _) = diagnose(&f);
        assert!(d.hints.is_empty());
        assert!(
            d.suspicions
                .iter()
                .all(|s| s.verdict == SuspicionVerdict::Dismissed)
        );
        let cats: std::collections::BTreeSet<_> = d.suspicions.iter().map(|s| s.category).collect();
        for c in [
            SuspicionCategory::ConnectionManagement,
            SuspicionCategory::Architecture,
            SuspicionCategory::DataFlow,
            SuspicionCategory::RedundantWork,
        ] {
            assert!(cats.contains(&c), "{c:?}");
        }
    }

    #[test]
    fn every_rule_family_is_registered() {
        let names: Vec<&str> = RULES.iter().map(|r| r.0).collect();
        assert_eq!(names.len(), 9);
        assert!(names.contains(&"delayed_ack"));
        assert!(names.contains(&"connection_management"));
        assert!(names.contains(&"storage_reads"));
    }
}
