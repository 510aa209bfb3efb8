//! Lock contention: threads blocked on locks (futexes). Judged on the summed thread
//! time, not the critical path: a lock wait that a profiled holder ended is followed to
//! the holder's work on the path, so contention shows as the waiters' time. Confirmed
//! when lock waits hold at least [`MIN_SHARE_PCT`] of the thread time, naming where the
//! threads waited and, when wake-ups were recorded, the holder (the thread, and its own
//! code, that woke the waiters: who released the lock); dismissed below. Reported in
//! the schema's `other` category, which has no lock entry. Waits in CPython's
//! `take_gil` are the GIL: the advice is processes, not a shorter critical section.

use super::facts::Facts;
use super::site;
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_SHARE_PCT: f64 = 5.0;

/// CPython's functions that wait for the GIL (3.8–3.13).
const GIL_FUNCTIONS: &[&str] = &["take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread"];

/// Whether threads waiting at `function` wait for CPython's GIL: one of
/// [`GIL_FUNCTIONS`], or in a stripped interpreter (Debian's python3.11) an unnamed
/// address of the interpreter's own code — where `classify` found a condition wait
/// called straight from the interpreter, which is the GIL's.
fn is_gil(function: &str) -> bool {
    let interpreter = function.starts_with("python") || function.starts_with("libpython");
    GIL_FUNCTIONS.contains(&function) || (interpreter && function.contains("+0x"))
}

const NOTE: &str = "lock contention: futex waits in the summed thread time, where they were \
                    waited and who woke the waiters (sched:sched_waking); confirmed at ≥ 5% \
                    of thread time";

pub fn check(f: &Facts) -> RuleOutput {
    let lock = f.thread_waits_ms.get("lock").copied().unwrap_or(0.0);
    let share = if f.thread_ms > 0.0 {
        lock * 100.0 / f.thread_ms
    } else {
        0.0
    };
    let mut out = RuleOutput::default();
    let evidence = format!(
        "threads waited {} on locks: {share:.1}% of the {} they ran for in all",
        site::ms(lock),
        site::ms(f.thread_ms)
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
            "; released mostly by {who} (the wakers' code; ended {} of the waits)",
            site::ms(*ms)
        ),
        (None, true) => "; no profiled thread woke the waiters".into(),
        (None, false) => {
            out.warnings
                .push("the lock's holder is unknown: wake-ups were not recorded".into());
            String::new()
        }
    };
    let at = f
        .lock_waiters
        .first()
        .map_or_else(|| "the run".to_string(), |(w, _)| w.clone());
    let steps = site::deepest(f, |s| site::function(&s.call_site) == site::function(&at))
        .map(|s| vec![s.id.clone()])
        .unwrap_or_default();
    let gil = is_gil(site::function(&at));
    let (what, advice) = if gil {
        (
            "contention for CPython's GIL (global interpreter lock)".to_string(),
            "the threads queue for CPython's GIL: Python code runs in one thread at a time, \
             so CPU work in threads does not overlap — spread it over processes \
             (multiprocessing, a pre-fork server's workers) or move the hot loop to native \
             code that releases the GIL"
                .to_string(),
        )
    } else {
        (
            format!("lock contention at {at}"),
            format!(
                "shorten the critical section the threads at {at} queue for, or split the lock"
            ),
        )
    };
    out.findings.push(
        Finding::new(
            C::Other,
            V::Confirmed,
            at.clone(),
            what,
            format!("{evidence}{holder}"),
            NOTE,
        )
        .steps(steps)
        .advice(
            advice,
            None,
            "the waits are followed to the holders' work on the critical path; how much \
             would overlap without the lock is not measured"
                .into(),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::*;

    #[test]
    fn contention_names_where_it_waits_and_its_holder() {
        let mut f = facts(1000.0);
        f.thread_ms = 4000.0;
        f.thread_waits_ms.insert("lock".into(), 2900.0);
        f.wakers_recorded = true;
        f.lock_holders = vec![("update (w.c:20) on 3 threads".into(), 2800.0)];
        f.lock_waiters = vec![("worker (w.c:17)".into(), 2900.0)];
        f.steps = vec![step("1.1", "worker (w.c:17)", 600.0)];
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Confirmed);
        assert_eq!(s.location, "worker (w.c:17)");
        assert_eq!(s.affected_steps, vec!["1.1".to_string()]);
        assert!(
            s.evidence.contains("72.5% of the 4000 ms"),
            "{}",
            s.evidence
        );
        assert!(
            s.evidence
                .contains("released mostly by update (w.c:20) on 3 threads")
        );
    }

    #[test]
    fn little_lock_time_is_dismissed() {
        let mut f = facts(1000.0);
        f.thread_ms = 1000.0;
        f.thread_waits_ms.insert("lock".into(), 10.0);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Dismissed);
    }

    #[test]
    fn threads_waiting_in_take_gil_are_told_about_the_gil() {
        let mut f = facts(1000.0);
        f.thread_ms = 4000.0;
        f.thread_waits_ms.insert("lock".into(), 2000.0);
        f.lock_waiters = vec![("take_gil (Python/ceval_gil.h:231)".into(), 2000.0)];
        let out = check(&f);
        let s = &out.findings[0];
        assert!(
            s.suspicion.description.contains("GIL"),
            "{}",
            s.suspicion.description
        );
        let hint = &s.advice.as_ref().expect("advice").hint;
        assert!(hint.contains("processes"), "{hint}");
        // A stripped interpreter names take_gil by its address only.
        f.lock_waiters = vec![("python3.11+0xf92c0".into(), 2000.0)];
        let s = &check(&f).findings[0];
        assert!(s.suspicion.description.contains("GIL"), "{s:?}");
        // An unnamed address elsewhere is a lock like any other.
        f.lock_waiters = vec![("libfoo.so+0x1200".into(), 2000.0)];
        let s = &check(&f).findings[0];
        assert!(!s.suspicion.description.contains("GIL"), "{s:?}");
    }
}
