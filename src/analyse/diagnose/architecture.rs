//! architecture: patterns over many waits.
//!
//! - N+1: at least [`MIN_ROUND_TRIPS`] round trips to one peer from one call site (the
//!   deepest step of the user's code that carries them) — one request per item where
//!   one request for all would do. Gain bound: batching leaves one round trip, so at
//!   most (n−1)/n of the step's wait on that peer. Dismissed when that wait is under
//!   [`MIN_WAIT_SHARE_PCT`] of the wall time: a pattern that costs nothing.
//! - Sequential waits on independent peers: two or more peers each holding at least
//!   [`MIN_PEER_SHARE_PCT`] of the wall time, whose waits never overlapped (overlap
//!   under 5% of the smaller). Gain bound: overlapping them saves at most the sum less
//!   the longest.

use super::super::resources::ResourceRole;
use super::facts::{Facts, Peer};
use super::site::{self, deepest, is_peer, overlap_ns, resource_of};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

/// Round trips from one call site that make an N+1 pattern.
pub const MIN_ROUND_TRIPS: u64 = 20;
/// Waits on a peer under this share of the wall time are no bottleneck, whatever their
/// pattern (a Node client's 617 loopback round trips waited 0.3% of its run), percent.
pub const MIN_WAIT_SHARE_PCT: f64 = 1.0;
/// A peer holding less of the wall time than this is not worth overlapping, percent.
pub const MIN_PEER_SHARE_PCT: f64 = 10.0;

const NOTE_N1: &str = "architecture (N+1): request→response round trips per peer and per \
                       step from the socket tracepoints; confirmed at ≥ 20 round trips from \
                       one call site";
const NOTE_SEQ: &str = "architecture (sequential waits): the blocked intervals on each peer \
                        holding ≥ 10% of wall, intersected; confirmed when they never overlap";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    n_plus_one(f, &mut out);
    sequential(f, &mut out);
    out
}

/// Round trips and wait on `p` summed over the steps of call site `at` (none nested in
/// another of them); None when no such step carries any.
fn site_totals(f: &Facts, p: &Peer, at: &str) -> Option<(u64, f64)> {
    let same: Vec<&super::facts::StepFact> = f
        .steps
        .iter()
        .filter(|s| s.call_site == at && resource_of(s, p).is_some())
        .collect();
    let outer = same
        .iter()
        .filter(|s| !same.iter().any(|o| s.id.starts_with(&format!("{}.", o.id))));
    let (mut n, mut wait) = (0u64, 0.0);
    for s in outer {
        if let Some(r) = resource_of(s, p) {
            n += r.round_trips.unwrap_or(0);
            wait += site::wait_of(r);
        }
    }
    (n > 0).then_some((n, wait))
}

fn n_plus_one(f: &Facts, out: &mut RuleOutput) {
    // A server's round trips with its clients are their requests, not its own.
    for p in f
        .peers
        .iter()
        .filter(|p| p.round_trips.is_some() && !p.served)
    {
        let total = p.round_trips.unwrap_or(0);
        if total < MIN_ROUND_TRIPS {
            continue;
        }
        // The deepest call site making nearly all of the peer's round trips: the loop.
        // A client whose request and reply go through different call paths below it
        // (psql: libpq's send, 185 turns, beside PQgetResult, 214) has each path carry
        // only part; the deepest carrier of any would name half the loop. A site's
        // figures are those of its outermost steps added up (one line can reach
        // `connect` and `recv` as sibling steps).
        let carries = |min: u64| {
            move |s: &super::facts::StepFact| {
                resource_of(s, p).is_some()
                    && site_totals(f, p, &s.call_site).is_some_and(|(n, _)| n >= min)
            }
        };
        let most = (total - total / 10).max(MIN_ROUND_TRIPS);
        let min = if f.steps.iter().any(carries(most)) {
            most
        } else {
            MIN_ROUND_TRIPS
        };
        let (at, steps) = site::peer_site(f, p, carries(min));
        let carrier = steps
            .first()
            .and_then(|id| f.step(id))
            .filter(|s| carries(min)(s))
            .and_then(|s| resource_of(s, p));
        let (n, wait) = carrier.map_or((total, p.wait_ms), |r| {
            site_totals(f, p, &at).unwrap_or((r.round_trips.unwrap_or(total), site::wait_of(r)))
        });
        let found = n_plus_one_at(f, p, n, wait, &at, steps);
        out.findings.push(found);
    }
    let most = f.peers.iter().filter_map(|p| p.round_trips).max();
    if out.findings.is_empty() {
        let share = site::socket_share(f);
        let evidence = match most {
            _ if share < 1.0 => Some(format!(
                "the run spent {share:.1}% of its wall time waiting on sockets"
            )),
            Some(m) if f.sockets_recorded => {
                Some(format!("at most {m} round trips to any one peer"))
            }
            None if f.sockets_recorded => Some("no request→response round trips".into()),
            _ => None,
        };
        match evidence {
            Some(e) => out.findings.push(Finding::new(
                C::Architecture,
                V::Dismissed,
                "the run".into(),
                "N+1: one request per item from a loop".into(),
                e,
                NOTE_N1,
            )),
            None => out.warnings.push(format!(
                "architecture (N+1) not checked: {share:.1}% of the wall time waited on \
                 sockets but round trips were not recorded"
            )),
        }
    }
}

fn n_plus_one_at(f: &Facts, p: &Peer, n: u64, wait: f64, at: &str, steps: Vec<String>) -> Finding {
    let share = f.share(wait);
    let per = if n > 0 { wait / n as f64 } else { 0.0 };
    let what = format!("N+1: {n} sequential round trips to {} from {at}", p.name);
    let evidence = format!(
        "{n} round trips × {} each = {} waiting on {} ({share:.1}% of wall)",
        site::ms(per),
        site::ms(wait),
        p.name
    );
    if share < MIN_WAIT_SHARE_PCT {
        return Finding::new(
            C::Architecture,
            V::Dismissed,
            at.to_string(),
            what,
            format!("{evidence}: under {MIN_WAIT_SHARE_PCT}% of the run, batching cannot matter"),
            NOTE_N1,
        )
        .steps(steps)
        .on(&p.name);
    }
    Finding::new(
        C::Architecture,
        V::Confirmed,
        at.to_string(),
        what,
        evidence,
        NOTE_N1,
    )
    .steps(steps)
    .advice(
        format!(
            "batch the {n} requests to {} made at {at} into one (a single query with IN/JOIN, \
             a bulk endpoint, a pipeline)",
            p.name
        ),
        Some(share * (n - 1) as f64 / n as f64),
        format!(
            "{share:.1}% of wall waiting × {}/{n} round trips removed",
            n - 1
        ),
    )
    .on(&p.name)
}

/// Without per-step resources: the call site all the peers' blocked calls share, if
/// they share one.
fn common_site(f: &Facts, peers: &[&Peer]) -> (String, Vec<String>) {
    let first = peers
        .first()
        .and_then(|p| p.sites.first())
        .map(|s| s.0.as_str());
    let shared = first.is_some_and(|x| {
        peers.iter().all(|p| {
            p.sites
                .first()
                .is_some_and(|s| site::function(&s.0) == site::function(x))
        })
    });
    match peers.first() {
        Some(p) if shared => site::peer_site(f, p, |_| false),
        _ => ("the run".to_string(), Vec::new()),
    }
}

/// Peers worth overlapping, grouped by name across processes.
fn heavy_peers(f: &Facts) -> Vec<&Peer> {
    let mut v: Vec<&Peer> = f
        .peers
        .iter()
        .filter(|p| f.share(p.wait_ms) >= MIN_PEER_SHARE_PCT && !p.waits.is_empty())
        // Waiting on a listening socket is waiting for clients, not on a peer.
        .filter(|p| p.role != Some(ResourceRole::Listener))
        .collect();
    v.sort_by(|a, b| b.wait_ms.total_cmp(&a.wait_ms));
    v
}

fn sequential(f: &Facts, out: &mut RuleOutput) {
    let heavy = heavy_peers(f);
    if heavy.len() < 2 {
        let share = site::socket_share(f);
        if share < 2.0 * MIN_PEER_SHARE_PCT || !f.peers.is_empty() {
            out.findings.push(Finding::new(
                C::Architecture,
                V::Dismissed,
                "the run".into(),
                "sequential waits on independent peers that could overlap".into(),
                if share < 1.0 {
                    format!("the run spent {share:.1}% of its wall time waiting on sockets")
                } else {
                    format!(
                        "{} peer{} held ≥ {MIN_PEER_SHARE_PCT:.0}% of the wall time \
                         (sockets: {share:.1}% in all)",
                        heavy.len(),
                        if heavy.len() == 1 { "" } else { "s" }
                    )
                },
                NOTE_SEQ,
            ));
        } else {
            out.warnings.push(format!(
                "sequential waits not checked: {share:.1}% of the wall time waited on \
                 sockets whose peers were not resolved"
            ));
        }
        return;
    }
    let mut overlap = 0u64;
    for (i, a) in heavy.iter().enumerate() {
        for b in &heavy[i + 1..] {
            overlap += overlap_ns(&a.waits, &b.waits);
        }
    }
    let overlap_ms = overlap as f64 / 1e6;
    let smallest = heavy.iter().map(|p| p.wait_ms).fold(f64::MAX, f64::min);
    let names: Vec<String> = heavy
        .iter()
        .map(|p| {
            format!(
                "{} {} ({:.1}%)",
                p.name,
                site::ms(p.wait_ms),
                f.share(p.wait_ms)
            )
        })
        .collect();
    let sum: f64 = heavy.iter().map(|p| p.wait_ms).sum();
    let site = deepest(f, |s| {
        heavy
            .iter()
            .all(|p| s.resources.iter().any(|r| is_peer(r, p)))
    });
    let (location, steps) = match site {
        Some(s) => (s.call_site.clone(), vec![s.id.clone()]),
        None => common_site(f, &heavy),
    };
    let verdict = if overlap_ms < 0.05 * smallest {
        V::Confirmed
    } else {
        V::Dismissed
    };
    let how = if verdict == V::Confirmed {
        format!("one after the other ({} of overlap)", site::ms(overlap_ms))
    } else {
        format!(
            "concurrently ({} of their waits overlapped)",
            site::ms(overlap_ms)
        )
    };
    let mut found = Finding::new(
        C::Architecture,
        verdict,
        location.clone(),
        "sequential waits on independent peers that could overlap".into(),
        format!("waited on {}, {how}", names.join(", ")),
        NOTE_SEQ,
    )
    .steps(steps);
    if verdict == V::Confirmed {
        let longest = heavy.iter().map(|p| p.wait_ms).fold(0.0, f64::max);
        found = found.advice(
            format!("issue the requests to these peers concurrently at {location}"),
            Some(f.share(sum - longest)),
            format!(
                "the waits' sum {} less the longest {}, of the wall",
                site::ms(sum),
                site::ms(longest)
            ),
        );
    }
    out.findings.push(found);
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::*;
    use super::*;

    fn loop_of(n: u64) -> Facts {
        let mut f = facts(1000.0);
        let mut p = peer("postgres:5432", ResourceRole::Database, 800.0);
        p.round_trips = Some(n);
        p.connections = Some(1);
        f.sockets_recorded = true;
        f.peers = vec![p];
        f.waits_ms.insert("db".into(), 800.0);
        let mut main = step("1", "main (app.c:40)", 1000.0);
        main.resources = vec![res("postgres:5432", 800.0, Some(n), Some(1))];
        let mut fetch = step("1.1", "fetch_user (app.c:12)", 820.0);
        fetch.resources = main.resources.clone();
        let lib = super::super::facts::StepFact {
            system: true,
            resources: main.resources.clone(),
            ..step("1.1.1", "PQexec", 800.0)
        };
        f.steps = vec![main, fetch, lib];
        f
    }

    #[test]
    fn fifty_round_trips_from_one_call_site_are_n_plus_one() {
        let out = check(&loop_of(50));
        let s = &out.findings[0];
        assert_eq!(s.suspicion.verdict, V::Confirmed);
        assert_eq!(s.suspicion.location, "fetch_user (app.c:12)");
        assert!(s.suspicion.evidence.contains("50 round trips × 16.0 ms"));
        let gain = s.advice.as_ref().and_then(|a| a.gain_pct);
        assert_eq!(gain, Some(78.4));
    }

    #[test]
    fn round_trips_that_cost_under_one_percent_of_the_run_are_dismissed() {
        // A loopback client: 600 round trips that waited 5 ms of a 1 s run.
        let mut f = loop_of(600);
        f.peers[0].wait_ms = 5.0;
        for s in &mut f.steps {
            s.resources[0].blocked_ms = 5.0;
            s.resources[0].critical_ms = Some(5.0);
        }
        let out = check(&f);
        assert_negligible(&out.findings[0]);
    }

    #[test]
    fn one_call_site_in_sibling_steps_adds_up() {
        // The same line reaches connect (30 of the turns) and recv (20): one site.
        let mut f = loop_of(50);
        let lib = f.steps.pop().expect("lib step");
        let mut recv = step("1.1.1", "fetch_user (app.c:12)", 500.0);
        recv.resources = vec![res("postgres:5432", 480.0, Some(30), Some(1))];
        let mut connect = step("1.1.2", "fetch_user (app.c:12)", 320.0);
        connect.resources = vec![res("postgres:5432", 300.0, Some(20), Some(1))];
        f.steps.truncate(1);
        f.steps.extend([recv, connect, lib]);
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Confirmed);
        assert!(
            s.evidence.contains("50 round trips × 15.6 ms"),
            "{}",
            s.evidence
        );
    }

    #[test]
    fn a_loop_whose_requests_and_replies_take_different_paths_is_named_as_the_loop() {
        // psql: the statement loop (1.1) makes 50 round trips; below it libpq sends on
        // one call path (22 turns counted there) and reads replies on another (28).
        let mut f = loop_of(50);
        let lib = f.steps.pop().expect("lib step");
        let mut send = step("1.1.1", "send_query (app.c:20)", 400.0);
        send.resources = vec![res("postgres:5432", 380.0, Some(22), Some(1))];
        let mut get = step("1.1.2", "get_result (app.c:30)", 420.0);
        get.resources = vec![res("postgres:5432", 400.0, Some(28), Some(1))];
        f.steps.extend([send, get, lib]);
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Confirmed);
        assert_eq!(s.location, "fetch_user (app.c:12)");
        assert!(
            s.evidence.contains("50 round trips × 16.0 ms"),
            "{}",
            s.evidence
        );
    }

    #[test]
    fn a_servers_answers_are_no_n_plus_one() {
        let mut f = loop_of(50);
        f.peers[0].served = true;
        for s in &mut f.steps {
            s.resources.clear();
        }
        let out = check(&f);
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
    }

    #[test]
    fn few_round_trips_dismiss() {
        let out = check(&loop_of(3));
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
        assert!(out.findings[0].suspicion.evidence.contains("at most 3"));
    }

    fn two_peers(b_start: u64) -> Facts {
        let mut f = facts(1000.0);
        let mut a = peer("python3:8081", ResourceRole::Service, 400.0);
        a.waits = vec![(0, 400_000_000)];
        let mut b = peer("redis-server:6379", ResourceRole::Database, 400.0);
        b.waits = vec![(b_start, b_start + 400_000_000)];
        f.peers = vec![a, b];
        f.waits_ms.insert("network".into(), 800.0);
        f
    }

    #[test]
    fn sequential_waits_on_two_peers_are_confirmed() {
        let out = check(&two_peers(400_000_000));
        let s = out
            .findings
            .iter()
            .find(|s| s.suspicion.description.starts_with("sequential"));
        assert_eq!(s.map(|s| s.suspicion.verdict), Some(V::Confirmed));
        assert_eq!(
            s.and_then(|s| s.advice.as_ref()).and_then(|a| a.gain_pct),
            Some(40.0)
        );
    }

    #[test]
    fn concurrent_waits_are_dismissed() {
        let out = check(&two_peers(0));
        let s = out
            .findings
            .iter()
            .find(|s| s.suspicion.description.starts_with("sequential"));
        assert_eq!(s.map(|s| s.suspicion.verdict), Some(V::Dismissed));
    }
}
