//! delayed_ack: TCP round trips pinned at the kernel's delayed-ACK timer. A response
//! written in two sends (headers, then body) over a connection with Nagle's algorithm on
//! holds its second segment until the first is acknowledged, and the peer acknowledges
//! only when its delayed-ACK timer fires: 40 ms on Linux. Each round trip then costs
//! ~40 ms whatever the work (Python's `http.server` answering `http.client` on
//! localhost: 84 requests/s). Confirmed when at least [`MIN_DELAYED`] of a TCP peer's
//! blocked intervals last [`WINDOW_MS`] and they are at least [`MIN_CONCENTRATION`] of
//! its blocked intervals past 1 ms (a real service's latency is spread; this one is a
//! timer's); dismissed for a TCP peer with round trips whose waits are not pinned there.
//! A server's side of its clients' connections (`served`) is left out: its waits for the
//! next request are the clients' delays, not its own.

use super::facts::{Facts, Peer};
use super::site;
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

/// Blocked intervals of this length (ms) are the delayed-ACK timer's: 40 ms, plus the
/// wake-up and scheduling slack seen on a loaded 2-CPU machine (40–50 ms).
pub const WINDOW_MS: (f64, f64) = (39.0, 52.0);
/// Fewer delayed waits than this are no pattern.
pub const MIN_DELAYED: usize = 10;
/// Share of the peer's waits past 1 ms that must fall in the window.
pub const MIN_CONCENTRATION: f64 = 0.5;

const NOTE: &str = "delayed_ack: a TCP peer's blocked intervals against the Linux delayed-ACK \
                    timer (40 ms); confirmed at ≥ 10 waits of 39–52 ms making ≥ 50% of its \
                    waits past 1 ms";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    for p in f.peers.iter().filter(|p| p.tcp && !p.served) {
        let long: Vec<f64> = p
            .waits
            .iter()
            .map(|&(a, b)| b.saturating_sub(a) as f64 / 1e6)
            .filter(|&ms| ms >= 1.0)
            .collect();
        let delayed: Vec<f64> = long
            .iter()
            .copied()
            .filter(|&ms| (WINDOW_MS.0..=WINDOW_MS.1).contains(&ms))
            .collect();
        let concentration = delayed.len() as f64 / long.len().max(1) as f64;
        if delayed.len() >= MIN_DELAYED && concentration >= MIN_CONCENTRATION {
            out.findings.push(confirmed(f, p, &delayed, &long));
        } else if p.round_trips.unwrap_or(0) >= MIN_DELAYED as u64 {
            out.findings.push(
                Finding::new(
                    C::Configuration,
                    V::Dismissed,
                    p.name.clone(),
                    format!("round trips to {} held by TCP's delayed ACK", p.name),
                    format!(
                        "{} of its {} waits past 1 ms last 39–52 ms (the 40 ms delayed-ACK \
                         timer)",
                        delayed.len(),
                        long.len()
                    ),
                    NOTE,
                )
                .on(&p.name),
            );
        }
    }
    out
}

fn confirmed(f: &Facts, p: &Peer, delayed: &[f64], long: &[f64]) -> Finding {
    let delayed_ms: f64 = delayed.iter().sum();
    let all_ms: f64 = p
        .waits
        .iter()
        .map(|&(a, b)| b.saturating_sub(a) as f64 / 1e6)
        .sum();
    let mut sorted = delayed.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    // Without the timer those waits would take about what the others take: nearly all
    // of their time goes.
    let part = if all_ms > 0.0 {
        delayed_ms / all_ms
    } else {
        0.0
    };
    let gain = f.share(p.wait_ms) * part;
    let (location, steps) = site::peer_site(f, p, |s| s.resources.iter().any(|r| r.name == p.name));
    Finding::new(
        C::Configuration,
        V::Confirmed,
        location.clone(),
        format!("round trips to {} held by TCP's delayed ACK", p.name),
        format!(
            "{} of the {} waits on {} past 1 ms last 39–52 ms (median {median:.1} ms), {} \
             in all ({:.0}% of its blocked time): the 40 ms delayed-ACK timer, which a \
             request or response written in more than one send meets under Nagle's algorithm",
            delayed.len(),
            long.len(),
            p.name,
            site::ms(delayed_ms),
            part * 100.0
        ),
        NOTE,
    )
    .steps(steps)
    .advice(
        format!(
            "send each request and response to {} in one write (buffer the headers with the \
             body), or set TCP_NODELAY on the socket (both ends) at {location}",
            p.name
        ),
        Some(gain),
        format!(
            "the {:.1}% of wall waiting on {} × {:.0}% of it in 40 ms delayed-ACK stalls",
            f.share(p.wait_ms),
            p.name,
            part * 100.0
        ),
    )
    .on(&p.name)
}

#[cfg(test)]
mod tests {
    use super::super::super::resources::ResourceRole;
    use super::super::site::testing::*;
    use super::*;

    fn with_waits(ms: &[f64]) -> Facts {
        let mut f = facts(1000.0);
        let mut p = peer("python3:8081", ResourceRole::Service, ms.iter().sum());
        p.tcp = true;
        p.round_trips = Some(ms.len() as u64);
        let mut t = 0u64;
        p.waits = ms
            .iter()
            .map(|&m| {
                let a = t;
                t += (m * 1e6) as u64 + 1000;
                (a, a + (m * 1e6) as u64)
            })
            .collect();
        f.peers = vec![p];
        f
    }

    #[test]
    fn waits_pinned_at_40_ms_are_confirmed() {
        let mut ms = vec![43.0; 18];
        ms.extend([0.2; 20]);
        ms.extend([5.0, 80.0]);
        let out = check(&with_waits(&ms));
        let s = &out.findings[0];
        assert_eq!(
            s.suspicion.verdict,
            V::Confirmed,
            "{}",
            s.suspicion.evidence
        );
        assert!(
            s.suspicion.evidence.contains("18 of the 20 waits"),
            "{}",
            s.suspicion.evidence
        );
        assert!(
            s.advice
                .as_ref()
                .is_some_and(|a| a.hint.contains("TCP_NODELAY"))
        );
    }

    #[test]
    fn spread_latency_is_dismissed_and_unix_sockets_are_left_out() {
        let ms: Vec<f64> = (0..30).map(|i| 5.0 + 3.0 * f64::from(i)).collect();
        let out = check(&with_waits(&ms));
        assert_eq!(out.findings[0].suspicion.verdict, V::Dismissed);
        let mut f = with_waits(&[43.0; 20]);
        f.peers[0].tcp = false;
        assert!(check(&f).findings.is_empty());
    }
}
