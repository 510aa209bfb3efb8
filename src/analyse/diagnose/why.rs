//! Why-chains that move toward a cause. Each top bottleneck's chain keeps its measured
//! first links (its share of the wall time, the kind of wait), then answers "why?"
//! down the evidence: which resource held the time → how many round trips × their
//! typical latency → from which call site → the pattern a confirmed suspicion found
//! (or, for CPU time, in which of the user's lines). Links that only restated the step's
//! own figures ("all of its N ms is its own code") are dropped.

use super::super::Classification;
use super::super::bottleneck::Bottleneck;
use super::facts::{Facts, StepFact};
use super::site;
use super::types::Finding;

/// Rewrite the bottlenecks' why-chains from the facts and the findings.
pub fn rewrite(f: &Facts, found: &[Finding], top: &mut [Bottleneck]) {
    for b in top {
        b.why_chain = chain(f, found, b);
    }
}

/// Whether a suspicion's kind can explain time of this class (a run-queue suspicion
/// does not explain a lock wait that shares its step).
fn explains(x: &Finding, class: Classification) -> bool {
    use super::types::SuspicionCategory as S;
    use Classification as C;
    let io = matches!(
        class,
        C::IoDb | C::IoNetwork | C::IoFile | C::External | C::Architecture
    );
    match x.suspicion.category {
        // A setting of a connection (TCP's delayed ACK) explains its waits.
        S::Configuration => class == C::Cpu || (io && x.resource.is_some()),
        S::ResourceLifecycle | S::Memory => class == C::Memory,
        S::Other => class == C::Lock,
        S::Architecture | S::ConnectionManagement | S::AsyncPatterns => io,
        S::DataFlow | S::RedundantWork => io || class == C::Cpu,
        S::Gpu => class == C::Gpu,
    }
}

fn related(step: &str, other: &str) -> bool {
    step == other
        || step.starts_with(&format!("{other}."))
        || other.starts_with(&format!("{step}."))
}

fn chain(f: &Facts, found: &[Finding], b: &Bottleneck) -> Vec<String> {
    let old = &b.why_chain;
    let mut why: Vec<String> = old.iter().take(2).cloned().collect();
    let step = f.step(&b.step);
    // A resource explains waiting time, not a CPU-bound bottleneck's.
    let waits = !matches!(b.class, Classification::Cpu | Classification::Memory);
    let resource = step
        .filter(|_| waits)
        .and_then(|s| resource_links(s, &mut why))
        .or_else(|| peer_links(f, b, &mut why).filter(|_| waits));
    let per_trip = why.iter().any(|l| l.contains(" round trips to "));
    for link in old.iter().skip(2) {
        // The round trips' latency says what the switch-out average said, and more.
        let restated = link.starts_with("all of its ")
            || (per_trip && link.starts_with("it was switched out "));
        if !restated {
            why.push(link.clone());
        }
    }
    if let Some(l) = sync_link(f, b) {
        why.push(l);
    }
    // The chain ends with the cause: the confirmed suspicions that explain it, on its
    // resource or on its steps, each with where it happens.
    let mut causes = Vec::new();
    for x in found.iter().filter(|x| x.confirmed()) {
        let on_resource = resource.is_some() && x.resource == resource;
        let on_step = x
            .suspicion
            .affected_steps
            .iter()
            .any(|s| related(s, &b.step));
        if (on_resource || on_step) && explains(x, b.class) {
            let loc = &x.suspicion.location;
            let elsewhere = !loc.starts_with(&format!("{} ", b.function)) && loc != &b.function;
            if elsewhere && !loc.starts_with("the ") && x.resource.as_deref() != Some(loc) {
                let at = format!("it happens at {loc}");
                if !causes.contains(&at) {
                    causes.push(at);
                }
            }
            causes.push(format!(
                "the pattern: {} ({})",
                x.suspicion.description, x.suspicion.evidence
            ));
        }
    }
    if b.class == Classification::Cpu
        && let Some(l) = cpu_lines(f, &b.function, !causes.is_empty())
    {
        why.push(l);
    }
    why.extend(causes);
    why
}

/// The resource that held most of the step's time and its round trips, when it is a
/// notable part; returns the resource's name.
fn resource_links(s: &StepFact, why: &mut Vec<String>) -> Option<String> {
    let r = s
        .resources
        .iter()
        .max_by(|a, b| site::wait_of(a).total_cmp(&site::wait_of(b)))?;
    let wait = site::wait_of(r);
    if wait * 10.0 < s.wall_ms {
        return None;
    }
    // The step's share of the wall is the first link's: this one says how much of the
    // step the resource holds.
    why.push(format!(
        "{} of it ({:.1}% of the step) was blocked on {}{}{} in {} waits",
        site::ms(wait),
        100.0 * wait / s.wall_ms.max(f64::MIN_POSITIVE),
        site::role_word(r.role),
        if site::role_word(r.role).is_empty() {
            ""
        } else {
            " "
        },
        r.name,
        r.intervals
    ));
    why.extend(trips_link(&r.name, r.round_trips, r.connections, wait));
    Some(r.name.clone())
}

/// Without per-step resources: the peer whose blocked calls were made from the
/// bottleneck's function, its waits and its round trips; returns the peer's name.
fn peer_links(f: &Facts, b: &Bottleneck, why: &mut Vec<String>) -> Option<String> {
    if matches!(b.class, Classification::Cpu | Classification::Memory) {
        return None;
    }
    let p = f
        .peers
        .iter()
        .filter(|p| {
            p.sites
                .first()
                .is_some_and(|(s, _)| site::function(s) == b.function)
        })
        .max_by(|x, y| x.wait_ms.total_cmp(&y.wait_ms))?;
    let role = p.role.map_or("", site::role_word);
    why.push(format!(
        "{} ({:.1}% of wall) was blocked on {role}{}{} in {} waits",
        site::ms(p.wait_ms),
        f.share(p.wait_ms),
        if role.is_empty() { "" } else { " " },
        p.name,
        p.intervals
    ));
    why.extend(trips_link(&p.name, p.round_trips, p.connections, p.wait_ms));
    Some(p.name.clone())
}

/// "because it made N round trips to PEER over C connections, X ms each", when it made
/// any. C counts the connections the step opened: none means it used one opened by code
/// outside it (psql's round trips wait in poll, its connect is elsewhere).
fn trips_link(
    peer: &str,
    round_trips: Option<u64>,
    connections: Option<u64>,
    wait_ms: f64,
) -> Option<String> {
    let n = round_trips.filter(|&n| n > 0)?;
    let conns = match connections {
        Some(0) => " over a connection opened outside it".to_string(),
        Some(c) => format!(" over {c} connection{}", if c == 1 { "" } else { "s" }),
        None => String::new(),
    };
    Some(format!(
        "because it made {n} round trips to {peer}{conns}, {} each",
        site::ms(wait_ms / n as f64)
    ))
}

/// A bottleneck waiting in fsync: how many syncs of which file, how long each, against
/// the norm for local storage.
fn sync_link(f: &Facts, b: &Bottleneck) -> Option<String> {
    if !b.in_function.as_deref().is_some_and(|x| x.contains("sync")) {
        return None;
    }
    let s = f.syncs.iter().max_by(|a, b| a.ms.total_cmp(&b.ms))?;
    let per = s.ms / s.intervals.max(1) as f64;
    let norm = super::norms::FSYNC_LOCAL;
    let verdict = if norm.holds(per) {
        "each within the norm: the cost is how many syncs are made"
    } else {
        "each slower than the norm: the storage is slow or saturated"
    };
    Some(format!(
        "because it synced {} to storage: {} waits of {} each ({verdict}, {})",
        s.path,
        s.intervals,
        site::ms(per),
        norm.range()
    ))
}

/// Where a function's CPU time went, line by line, when no pattern explains it.
fn cpu_lines(f: &Facts, function: &str, explained: bool) -> Option<String> {
    let h = f.hot_lines.iter().find(|h| h.function == function)?;
    if h.cpu_ms <= 0.0 {
        return None;
    }
    let lines: Vec<String> = h
        .lines
        .iter()
        .map(|(at, ms)| format!("{at} {:.1}%", ms * 100.0 / h.cpu_ms))
        .collect();
    let lib = h.library_ms * 100.0 / h.cpu_ms;
    let lead = if explained {
        "its on-CPU time"
    } else {
        "no I/O pattern explains it: its on-CPU time is computation"
    };
    Some(if lines.is_empty() {
        format!("{lead}, {lib:.1}% of it in library code")
    } else {
        format!(
            "{lead}, in the lines {} ({lib:.1}% of it in library code)",
            lines.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::super::types::{SuspicionCategory as C, SuspicionVerdict as V};
    use super::*;

    #[test]
    fn the_chain_goes_from_share_to_resource_to_round_trips_to_the_pattern() {
        let mut f = facts(1000.0);
        let mut s = step("1.1", "fetch_user (app.c:12)", 820.0);
        s.resources = vec![res("postgres:5432", 800.0, Some(40), Some(1))];
        f.steps = vec![s];
        let found = vec![
            Finding::new(
                C::Architecture,
                V::Confirmed,
                "fetch_user (app.c:12)".into(),
                "N+1: 40 sequential round trips to postgres:5432".into(),
                "40 round trips × 20.0 ms".into(),
                "n",
            )
            .steps(vec!["1.1".into()])
            .on("postgres:5432"),
        ];
        let mut b = vec![Bottleneck {
            step: "1.1".into(),
            function: "fetch_user".into(),
            in_function: None,
            location: None,
            module: None,
            class: Classification::IoDb,
            share: 82.0,
            description: String::new(),
            why_chain: vec![
                "the run waited 820 ms for it".into(),
                "that time was: db 800 ms".into(),
                "all of its 820 ms is its own code: it calls nothing".into(),
            ],
        }];
        rewrite(&f, &found, &mut b);
        let w = &b[0].why_chain;
        assert_eq!(w.len(), 5, "{w:#?}");
        assert!(
            w[2].contains("blocked on service postgres:5432"),
            "{}",
            w[2]
        );
        assert!(w[3].contains("40 round trips to postgres:5432 over 1 connection, 20.0 ms each"));
        assert_eq!(
            trips_link("db:1", Some(3), Some(0), 6.0).as_deref(),
            Some(
                "because it made 3 round trips to db:1 over a connection opened outside it, 2.0 ms each"
            )
        );
        assert!(!w.iter().any(|l| l.contains("are made from")));
        assert!(w[4].starts_with("the pattern: N+1"));
        // No link repeats another.
        for (i, l) in w.iter().enumerate() {
            assert!(!w[..i].contains(l));
        }
    }
}
