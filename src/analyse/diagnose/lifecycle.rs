//! resource_lifecycle: resident memory growing steadily over a run — allocations kept
//! past their use. Judged on the RSS timeline polled from /proc (the profiled run's, or
//! the longest baseline run's) with at least [`MIN_POINTS`] points over at least
//! [`MIN_SPAN_MS`] (a shorter run's growth is its start-up: an interpreter importing its
//! modules, a program mapping its libraries — a 0.6 s Python HTTP client went from 3 to
//! 21 MiB rising in every third): confirmed when RSS
//! grew by at least [`MIN_GROWTH_KB`] and half its starting size, and each third of the
//! run ended higher than the one before by at least a fifth of the growth (a one-off
//! allocation at the start rises once and stays flat).

use super::facts::{Facts, RssSeries};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_POINTS: usize = 5;
pub const MIN_SPAN_MS: f64 = 1000.0;
pub const MIN_GROWTH_KB: u64 = 8 * 1024;

const NOTE: &str = "resource_lifecycle: resident memory polled from /proc over the run; \
                    confirmed when it grew ≥ 8 MiB and ≥ 50% and rose in each third \
                    of a run of ≥ 1 s";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    let span = |r: &RssSeries| match (r.points.first(), r.points.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => 0.0,
    };
    let Some(rss) = f
        .rss
        .as_ref()
        .filter(|r| r.points.len() >= MIN_POINTS && span(r) >= MIN_SPAN_MS)
    else {
        out.warnings.push(format!(
            "resource_lifecycle not checked: the run was too short for a memory timeline \
             ({} points of RSS over {:.0} ms; {MIN_POINTS} points over {MIN_SPAN_MS:.0} ms \
             needed)",
            f.rss.as_ref().map_or(0, |r| r.points.len()),
            f.rss.as_ref().map_or(0.0, span)
        ));
        return out;
    };
    let (first, last) = (rss.points[0].1, rss.points[rss.points.len() - 1].1);
    let growth = last.saturating_sub(first);
    let steady = thirds_rise(rss, growth);
    let confirmed = growth >= MIN_GROWTH_KB && growth * 2 >= first && steady;
    let span_s = (rss.points[rss.points.len() - 1].0 - rss.points[0].0) / 1000.0;
    let evidence = format!(
        "RSS went from {:.1} MiB to {:.1} MiB over {span_s:.1} s of {} ({} points){}",
        first as f64 / 1024.0,
        last as f64 / 1024.0,
        rss.source,
        rss.points.len(),
        if confirmed {
            format!(
                ", {:.1} MiB/s, rising in every third",
                growth as f64 / 1024.0 / span_s.max(1e-3)
            )
        } else {
            String::new()
        }
    );
    let mut found = Finding::new(
        C::ResourceLifecycle,
        if confirmed {
            V::Confirmed
        } else {
            V::Dismissed
        },
        "the process tree".into(),
        "resident memory growing steadily (memory kept past its use)".into(),
        evidence,
        NOTE,
    );
    if confirmed {
        found = found.advice(
            "release what the run keeps allocating (caches without bounds, lists that only \
             grow); a heap profile shows where it is allocated"
                .into(),
            None,
            "memory, not time: no wall-time gain is claimed".into(),
        );
    }
    out.findings.push(found);
    out
}

/// Mean RSS of each third of the run rose by at least a fifth of the growth.
fn thirds_rise(rss: &RssSeries, growth: u64) -> bool {
    let n = rss.points.len();
    let mean = |a: usize, b: usize| {
        rss.points[a..b].iter().map(|p| p.1 as f64).sum::<f64>() / (b - a).max(1) as f64
    };
    let (m1, m2, m3) = (mean(0, n / 3), mean(n / 3, 2 * n / 3), mean(2 * n / 3, n));
    let step = growth as f64 / 5.0;
    growth > 0 && m2 - m1 >= step && m3 - m2 >= step
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::*;

    fn series(kb: impl Fn(u64) -> u64) -> Facts {
        let mut f = facts(1000.0);
        f.rss = Some(RssSeries {
            source: "the profiled run".into(),
            points: (0..12).map(|i| (i as f64 * 100.0, kb(i))).collect(),
        });
        f
    }

    #[test]
    fn a_steady_leak_is_confirmed() {
        let out = check(&series(|i| 10_000 + i * 4096));
        assert_eq!(out.findings[0].suspicion.verdict, V::Confirmed);
    }

    #[test]
    fn one_allocation_at_the_start_is_dismissed() {
        let out = check(&series(|i| if i == 0 { 10_000 } else { 200_000 }));
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
    }

    #[test]
    fn growth_within_the_first_second_is_start_up_and_not_judged() {
        let mut f = series(|i| 3_000 + i * 2_000);
        if let Some(r) = f.rss.as_mut() {
            r.points.iter_mut().for_each(|p| p.0 /= 2.0);
        }
        let out = check(&f);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        assert!(
            out.warnings[0].contains("over 550 ms"),
            "{:?}",
            out.warnings
        );
    }

    #[test]
    fn a_short_run_warns() {
        let out = check(&facts(10.0));
        assert!(out.findings.is_empty() && out.warnings.len() == 1);
    }
}
