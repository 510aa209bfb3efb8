//! connection_management: a new connection per request to one peer. Confirmed when
//! the tree opened at least [`MIN_CONNECTIONS`] connections to one peer and they carried
//! at most [`MAX_TURNS_PER_CONNECTION`] round trips each on average (each request pays
//! a handshake, and for a database its authentication) and the waits on the peer hold
//! at least `architecture::MIN_WAIT_SHARE_PCT` of the wall time; dismissed for a peer whose
//! round trips went over a kept-alive connection (at most 2 connections, at least
//! [`MIN_CONNECTIONS`] round trips).

use super::facts::{Facts, Peer};
use super::site::{self, resource_of};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

/// Fewer connections than this to one peer are no pattern.
pub const MIN_CONNECTIONS: u64 = 5;
/// Round trips per connection at or under which connections are per request.
pub const MAX_TURNS_PER_CONNECTION: u64 = 2;

const NOTE: &str = "connection_management: connections opened to one peer (connect seen) \
                    against its request→response round trips, from the socket tracepoints; \
                    confirmed at ≥ 5 connections with ≤ 2 round trips each";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    for p in &f.peers {
        let (Some(rt), Some(c)) = (p.round_trips, p.connections) else {
            continue;
        };
        if c >= MIN_CONNECTIONS && rt <= c * MAX_TURNS_PER_CONNECTION {
            out.findings.push(per_request(f, p, rt, c));
        } else if c <= 2 && rt >= MIN_CONNECTIONS {
            out.findings.push(
                Finding::new(
                    C::ConnectionManagement,
                    V::Dismissed,
                    p.name.clone(),
                    format!("a new connection per request to {}", p.name),
                    format!(
                        "{rt} round trips to {} went over {c} connection{} (kept alive)",
                        p.name,
                        if c == 1 { "" } else { "s" }
                    ),
                    NOTE,
                )
                .on(&p.name),
            );
        }
    }
    if out.findings.is_empty() {
        nothing_to_check(f, &mut out);
    }
    out
}

fn per_request(f: &Facts, p: &Peer, rt: u64, c: u64) -> Finding {
    let (location, steps) = site::peer_site(f, p, |s| {
        resource_of(s, p).is_some_and(|r| r.connections.unwrap_or(0) * 10 >= c * 9)
    });
    let share = f.share(p.wait_ms);
    // Keeping one connection leaves one handshake: at most the share of the waits on
    // the peer that the other connections carried.
    let gain = share * (c - 1) as f64 / c as f64;
    let what = format!("a new connection per request to {}", p.name);
    let evidence = format!(
        "{c} connections to {} for {rt} round trips ({:.1} per connection); waiting on it \
         took {} ({share:.1}% of wall)",
        p.name,
        rt as f64 / c as f64,
        site::ms(p.wait_ms)
    );
    let min = super::architecture::MIN_WAIT_SHARE_PCT;
    if share < min {
        let why = format!("{evidence}: under {min}% of the run, reusing them cannot matter");
        return Finding::new(
            C::ConnectionManagement,
            V::Dismissed,
            location,
            what,
            why,
            NOTE,
        )
        .steps(steps)
        .on(&p.name);
    }
    Finding::new(
        C::ConnectionManagement,
        V::Confirmed,
        location.clone(),
        what,
        evidence,
        NOTE,
    )
    .steps(steps)
    .advice(
        format!(
            "reuse one connection to {} (keep-alive or a connection pool) instead of \
             opening one per request at {location}",
            p.name
        ),
        Some(gain),
        format!(
            "at most the {share:.1}% of wall waiting on {} × {}/{c} connections",
            p.name,
            c - 1
        ),
    )
    .on(&p.name)
}

/// No peer carried a pattern either way: dismiss only when the run barely touched
/// sockets, otherwise say what is missing.
fn nothing_to_check(f: &Facts, out: &mut RuleOutput) {
    let share = site::socket_share(f);
    if share < 1.0 {
        out.findings.push(Finding::new(
            C::ConnectionManagement,
            V::Dismissed,
            "the run".into(),
            "connections opened per request".into(),
            format!("the run spent {share:.1}% of its wall time waiting on sockets"),
            NOTE,
        ));
    } else if f.sockets_recorded {
        let most = f
            .peers
            .iter()
            .filter_map(|p| p.connections)
            .max()
            .unwrap_or(0);
        out.findings.push(Finding::new(
            C::ConnectionManagement,
            V::Dismissed,
            "the run".into(),
            "connections opened per request".into(),
            format!(
                "at most {most} connection{} opened to any one peer",
                if most == 1 { "" } else { "s" }
            ),
            NOTE,
        ));
    } else {
        out.warnings.push(format!(
            "connection_management not checked: {share:.1}% of the wall time waited on \
             sockets but socket traffic (connections, round trips) was not recorded"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::resources::ResourceRole;
    use super::super::site::testing::*;
    use super::*;

    fn peer_with(rt: u64, c: u64) -> Facts {
        let mut f = facts(1000.0);
        let mut p = peer("python3:8081", ResourceRole::Service, 800.0);
        p.round_trips = Some(rt);
        p.connections = Some(c);
        f.peers = vec![p];
        f.waits_ms.insert("network".into(), 800.0);
        let mut s = step("1.2", "fetch_all (client.py:12)", 850.0);
        s.resources = vec![res("python3:8081", 800.0, Some(rt), Some(c))];
        f.steps = vec![step("1", "main", 1000.0), s];
        f
    }

    #[test]
    fn a_connection_per_request_is_confirmed_at_its_call_site() {
        let out = check(&peer_with(30, 30));
        let s = &out.findings[0];
        assert_eq!(s.suspicion.verdict, V::Confirmed);
        assert_eq!(s.suspicion.location, "fetch_all (client.py:12)");
        assert_eq!(s.suspicion.affected_steps, vec!["1.2".to_string()]);
        let gain = s.advice.as_ref().and_then(|a| a.gain_pct).unwrap_or(0.0);
        assert!((gain - 77.3).abs() < 0.1, "{gain}");
    }

    #[test]
    fn connections_whose_waits_cost_under_one_percent_are_dismissed() {
        let mut f = peer_with(30, 30);
        f.peers[0].wait_ms = 3.0;
        let out = check(&f);
        assert_negligible(&out.findings[0]);
    }

    #[test]
    fn keep_alive_is_dismissed() {
        let out = check(&peer_with(30, 1));
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
        assert!(
            out.findings[0]
                .suspicion
                .evidence
                .contains("30 round trips")
        );
    }

    #[test]
    fn no_traffic_recorded_warns_instead_of_dismissing() {
        let mut f = peer_with(30, 30);
        f.peers[0].round_trips = None;
        f.peers[0].connections = None;
        let out = check(&f);
        assert!(out.findings.is_empty());
        assert_eq!(out.warnings.len(), 1);
    }

    #[test]
    fn a_run_without_socket_waits_dismisses() {
        let out = check(&facts(1000.0));
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
    }
}
