//! Lock contention: threads blocked on locks (futexes) on the critical path. Confirmed
//! at [`MIN_SHARE_PCT`] of the wall time or more, naming the holder when wake-ups were
//! recorded (the thread, and its own code, that woke the waiters: who released the
//! lock); dismissed below. Reported in the schema's `other` category, which has no
//! lock entry.

use super::facts::Facts;
use super::site::{self, deepest, ids};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_SHARE_PCT: f64 = 5.0;

const NOTE: &str = "lock contention: futex waits on the critical path, the holder from who \
                    woke the waiters (sched:sched_waking); confirmed at ≥ 5% of wall";

pub fn check(f: &Facts) -> RuleOutput {
    let lock = f.wait("lock");
    let share = f.share(lock);
    let mut out = RuleOutput::default();
    let evidence = format!(
        "threads waited {} on locks: {share:.1}% of wall",
        site::ms(lock)
    );
    if share < MIN_SHARE_PCT {
        out.findings.push(Finding::new(
            C::Other,
            V::Dismissed,
            "the run".into(),
            "lock contention".into(),
            evidence,
            NOTE,
        ));
        return out;
    }
    let holder = match (f.lock_holders.first(), f.wakers_recorded) {
        (Some((who, ms)), _) => format!(
            "; released mostly by {who} (ended {} of the waits)",
            site::ms(*ms)
        ),
        (None, true) => "; no profiled thread woke the waiters".into(),
        (None, false) => {
            out.warnings
                .push("the lock's holder is unknown: wake-ups were not recorded".into());
            String::new()
        }
    };
    let site = deepest(f, |s| {
        s.waits_ms.get("lock").copied().unwrap_or(0.0) * 2.0 >= lock
    });
    let at = site.map_or_else(|| "the run".to_string(), |s| s.call_site.clone());
    out.findings.push(
        Finding::new(
            C::Other,
            V::Confirmed,
            at.clone(),
            format!("lock contention at {at}"),
            format!("{evidence}{holder}"),
            NOTE,
        )
        .steps(ids(&site.into_iter().collect::<Vec<_>>()))
        .advice(
            format!(
                "shorten the critical section the waiters at {at} queue for, or split the lock"
            ),
            Some(share),
            format!("at most the {share:.1}% of wall blocked on locks"),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::*;

    #[test]
    fn contention_names_its_holder() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("lock".into(), 400.0);
        f.wakers_recorded = true;
        f.lock_holders = vec![("update (w.c:20) in thread worker (12)".into(), 380.0)];
        let mut s = step("1.1", "worker_loop (w.c:30)", 600.0);
        s.waits_ms.insert("lock".into(), 390.0);
        f.steps = vec![s];
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Confirmed);
        assert_eq!(s.location, "worker_loop (w.c:30)");
        assert!(s.evidence.contains("released mostly by update (w.c:20)"));
    }

    #[test]
    fn little_lock_time_is_dismissed() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("lock".into(), 10.0);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Dismissed);
    }
}
