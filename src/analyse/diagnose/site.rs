//! Shared helpers of the rule families: finding the call site (the deepest step of the
//! user's own code that carries a figure), matching a step's resources to a peer, and
//! formatting figures.

use super::super::resources::StepResource;
use super::facts::{Facts, Peer, StepFact};

/// The deepest step satisfying `pred`, preferring the user's own code: a library step
/// below the user's call is never the call site while a user step carries the figure.
pub fn deepest(f: &Facts, pred: impl Fn(&StepFact) -> bool) -> Option<&StepFact> {
    let pick = |own: bool| {
        f.steps
            .iter()
            .filter(|s| (!own || !s.system) && pred(s))
            .max_by_key(|s| s.depth)
    };
    pick(true).or_else(|| pick(false))
}

/// Where a peer's traffic comes from: the deepest step whose resources carry it
/// (`carries`) when that step is the user's own code (the steps split a loop's caller
/// from a one-off call: `fetch_user` ×50 beside `list_users` ×1, not their shared
/// `read_response`); when it is library code, the user's code nearest the peer's
/// blocked calls, with that step; without either, the deepest own step that carries
/// it, else the blocked calls' site alone, else the peer itself.
pub fn peer_site(
    f: &Facts,
    p: &Peer,
    carries: impl Fn(&StepFact) -> bool,
) -> (String, Vec<String>) {
    let carrying = f
        .steps
        .iter()
        .filter(|s| carries(s))
        .max_by_key(|s| s.depth);
    match (carrying, p.sites.first()) {
        (Some(s), _) if !s.system => {
            let s = enclosing_caller(f, p, s);
            // The line the calls are made from, where the peer's waits name one in that
            // function (`<module> (client.py:3)`, not the module's first line).
            let at = (p.sites.iter())
                .find(|(site, _)| function(site) == function(&s.call_site))
                .map_or_else(|| s.call_site.clone(), |(site, _)| site.clone());
            return (at, vec![s.id.clone()]);
        }
        (Some(s), Some((site, _))) => return (site.clone(), vec![s.id.clone()]),
        _ => {}
    }
    if let Some(s) = deepest(f, carries) {
        return (s.call_site.clone(), vec![s.id.clone()]);
    }
    if let Some((site, _)) = p.sites.first() {
        // A function folded into its caller's step is found through its bottleneck.
        let steps = deepest(f, |s| function(&s.call_site) == function(site))
            .map(|s| s.id.clone())
            .or_else(|| {
                f.top
                    .iter()
                    .find(|b| b.function == function(site))
                    .map(|b| b.step.clone())
            })
            .into_iter()
            .collect();
        return (site.clone(), steps);
    }
    (p.name.clone(), Vec::new())
}

/// A step that holds at least this fraction of its parent's wall time, with the same
/// round trips to the peer, is the parent's helper doing nearly all of its work.
pub const HELPER_FRACTION: f64 = 0.9;

/// The step whose calls make the round trips: from `s` up, while the parent is the
/// user's code carrying the same round trips to the peer and `s` holds nearly all of
/// its time (a request helper, inlined or not, that the steps did not fold into its
/// caller only because the caller formats the request: `fetch_user`, not the
/// `read_response` inside it). A parent with more round trips (other call sites) or
/// much time of its own (a loop around the call site) stops the walk.
fn enclosing_caller<'a>(f: &'a Facts, p: &Peer, mut s: &'a StepFact) -> &'a StepFact {
    let trips = |s: &StepFact| resource_of(s, p).and_then(|r| r.round_trips);
    while let Some(parent) = s.id.rsplit_once('.').and_then(|(up, _)| f.step(up)) {
        let helper = !parent.system
            && trips(parent).is_some()
            && trips(parent) == trips(s)
            && s.wall_ms >= HELPER_FRACTION * parent.wall_ms;
        if !helper {
            break;
        }
        s = parent;
    }
    s
}

/// The function of a `function (file:line)` call site.
pub fn function(call_site: &str) -> &str {
    call_site.split(" (").next().unwrap_or(call_site)
}

/// Whether a step's resource is this peer (by service name or address).
pub fn is_peer(r: &StepResource, p: &Peer) -> bool {
    r.name == p.name || r.name == p.address
}

/// A step's resource row for a peer.
pub fn resource_of<'a>(s: &'a StepFact, p: &Peer) -> Option<&'a StepResource> {
    s.resources.iter().find(|r| is_peer(r, p))
}

/// Time a step's resource row waited, critical path when known, ms.
pub fn wait_of(r: &StepResource) -> f64 {
    r.critical_ms.unwrap_or(r.blocked_ms)
}

/// The ids of steps.
pub fn ids(steps: &[&StepFact]) -> Vec<String> {
    steps.iter().map(|s| s.id.clone()).collect()
}

/// Share of the socket-facing categories (network, db, poll) on the critical path, percent.
pub fn socket_share(f: &Facts) -> f64 {
    f.share(f.wait("network") + f.wait("db") + f.wait("poll"))
}

/// A role for sentences ("database", "service").
pub fn role_word(r: super::super::resources::ResourceRole) -> &'static str {
    use super::super::resources::ResourceRole as R;
    match r {
        R::File => "file",
        R::Database => "database",
        R::Service => "service",
        R::External => "external peer",
        R::Listener => "listening socket",
        R::Pipe => "pipe",
        R::Device => "device",
        R::Other => "",
    }
}

/// A millisecond figure for sentences: "1.23 ms", "152 ms".
pub fn ms(x: f64) -> String {
    if x == 0.0 {
        "0 ms".into()
    } else if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 1.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.3} ms")
    }
}

/// Total overlap of two sets of intervals, ns.
pub fn overlap_ns(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (a, b) = (merged(a), merged(b));
    let (mut i, mut j, mut total) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        total += hi.saturating_sub(lo);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Sorted, non-overlapping union of intervals.
fn merged(v: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut v = v.to_vec();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
pub mod testing {
    //! Constructed facts for the rules' unit tests.
    use super::super::super::resources::{ResourceRole, StepResource};
    use super::super::facts::{Facts, Peer, StepFact};
    use crate::profile::ResourceKind;

    pub fn facts(wall_ms: f64) -> Facts {
        Facts {
            wall_ms,
            ..Facts::default()
        }
    }

    pub fn step(id: &str, call_site: &str, wall_ms: f64) -> StepFact {
        StepFact {
            id: id.into(),
            depth: id.split('.').count(),
            call_site: call_site.into(),
            wall_ms,
            ..StepFact::default()
        }
    }

    /// A finding dismissed because the waits it is about cost under 1% of the run:
    /// with that evidence and no advice.
    pub fn assert_negligible(f: &super::super::types::Finding) {
        let s = &f.suspicion;
        assert_eq!(
            s.verdict,
            super::super::types::SuspicionVerdict::Dismissed,
            "{}",
            s.evidence
        );
        assert!(s.evidence.contains("under 1% of the run"), "{}", s.evidence);
        assert!(f.advice.is_none());
    }

    pub fn peer(name: &str, role: ResourceRole, wait_ms: f64) -> Peer {
        Peer {
            name: name.into(),
            address: format!("127.0.0.1:{}", name.len()),
            role: Some(role),
            pid: 1,
            wait_ms,
            wait_critical: true,
            ..Peer::default()
        }
    }

    pub fn res(name: &str, wait_ms: f64, rt: Option<u64>, conns: Option<u64>) -> StepResource {
        StepResource {
            kind: ResourceKind::SocketTcp,
            role: ResourceRole::Service,
            name: name.into(),
            intervals: rt.unwrap_or(1),
            blocked_ms: wait_ms,
            critical_ms: Some(wait_ms),
            round_trips: rt,
            connections: conns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_of_interleaved_and_disjoint_sets() {
        assert_eq!(overlap_ns(&[(0, 10), (20, 30)], &[(10, 20), (30, 40)]), 0);
        assert_eq!(overlap_ns(&[(0, 10), (5, 15)], &[(10, 20)]), 5);
    }

    #[test]
    fn a_helper_holding_nearly_all_its_callers_time_is_not_the_call_site() {
        use super::super::super::resources::ResourceRole;
        let mut f = testing::facts(1000.0);
        let with = |id: &str, site: &str, ms: f64, rt: u64| StepFact {
            resources: vec![testing::res("python3:8081", ms, Some(rt), Some(1))],
            ..testing::step(id, site, ms)
        };
        f.steps = vec![
            with("1", "main (c.c:140)", 1000.0, 51),
            with("1.1", "fetch_user (c.c:91)", 820.0, 50),
            with("1.1.1", "read_response (c.c:46)", 805.0, 50),
            with("1.2", "list_users (c.c:85)", 100.0, 1),
        ];
        let p = testing::peer("python3:8081", ResourceRole::Service, 900.0);
        let carries = |s: &StepFact| resource_of(s, &p).is_some_and(|r| r.round_trips >= Some(20));
        let (at, steps) = peer_site(&f, &p, carries);
        assert_eq!(
            (at.as_str(), steps),
            ("fetch_user (c.c:91)", vec!["1.1".to_string()])
        );
        // A helper with a small share of its caller's time stays the site.
        f.steps[2].wall_ms = 400.0;
        let (at, _) = peer_site(&f, &p, carries);
        assert_eq!(at, "read_response (c.c:46)");
    }

    #[test]
    fn the_site_names_the_line_the_peers_waits_came_from() {
        use super::super::super::resources::ResourceRole;
        let mut f = testing::facts(1000.0);
        // A Python module's step is labelled by the module's first line; its waits on
        // the peer were made from line 3.
        f.steps = vec![StepFact {
            resources: vec![testing::res("python3:8822", 500.0, Some(1500), Some(1500))],
            ..testing::step("1.1", "<module> (client.py:1)", 900.0)
        }];
        let mut p = testing::peer("python3:8822", ResourceRole::Service, 500.0);
        p.sites = vec![
            ("urlopen (request.py:216)".into(), 500.0),
            ("<module> (client.py:3)".into(), 450.0),
        ];
        let (at, steps) = peer_site(&f, &p, |_| true);
        assert_eq!(
            (at.as_str(), steps),
            ("<module> (client.py:3)", vec!["1.1".to_string()])
        );
        // No site in that function: the step's own label.
        p.sites.truncate(1);
        let (at, _) = peer_site(&f, &p, |_| true);
        assert_eq!(at, "<module> (client.py:1)");
    }

    #[test]
    fn the_call_site_is_the_deepest_own_step() {
        let mut f = testing::facts(100.0);
        f.steps = vec![
            testing::step("1", "main (a.rs:1)", 100.0),
            testing::step("1.1", "fetch (a.rs:9)", 90.0),
            StepFact {
                system: true,
                ..testing::step("1.1.1", "PQexec", 90.0)
            },
        ];
        let s = deepest(&f, |s| s.wall_ms >= 90.0).map(|s| s.id.as_str());
        assert_eq!(s, Some("1.1"));
    }
}
