//! What each off-CPU sample waited on, and the wait category that makes it.
//!
//! A blocked `read`/`recv`/`fsync`... names its descriptor (the recording's `waits`
//! table). An event-loop wait (`epoll_wait`, `poll`, `select`) names a set, not the
//! descriptor that ended it: that one is the socket the thread reads the reply from
//! right after it wakes — the first reply read of a request→response turn recorded by
//! the socket tracepoints on the same thread within [`READ_AFTER_WAKE_NS`] of the
//! wake-up. So a client waiting in epoll for its database waits on the database.
//!
//! An event-loop wait that nothing in the run ended (no waker in the tree) and after
//! which the thread read no reply was woken by a timer or a client from outside the
//! run, or the run ended first: `idle` — when socket traffic and wake-ups were both
//! recorded; without them it stays `poll` (unknown).

use std::collections::HashMap;

use crate::profile::{Protocol, ResourceKind, SampleKind, SampledProfile};

use super::classify::WaitCategory;
use super::resources::ResourceRole;
use super::roles;

/// How soon after waking a thread must read a reply for the wait to be on that reply.
pub const READ_AFTER_WAKE_NS: u64 = 2_000_000;

/// Each resource's role and recognised protocol, by resource index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roles {
    pub role: Vec<ResourceRole>,
    pub protocol: Vec<Option<Protocol>>,
}

impl Roles {
    pub fn of(p: &SampledProfile) -> Roles {
        let mut protocol: Vec<Option<Protocol>> = vec![None; p.resources.len()];
        for s in &p.sockets {
            if let (Some(r), Some(proto)) = (s.resource, s.protocol)
                && let Some(slot) = protocol.get_mut(r as usize)
            {
                slot.get_or_insert(proto);
            }
        }
        let role = p
            .resources
            .iter()
            .zip(&protocol)
            .map(|(r, proto)| roles::role_of(r, *proto))
            .collect();
        Roles { role, protocol }
    }

    pub fn role(&self, resource: Option<u32>) -> Option<ResourceRole> {
        self.role.get(resource? as usize).copied()
    }
}

/// Each sample's resource (index into `resources`), from the waits table, with
/// event-loop waits attributed to the socket read right after them.
pub fn sample_resources(p: &SampledProfile, cats: &[WaitCategory]) -> Vec<Option<u32>> {
    let mut out = vec![None; p.samples.len()];
    for w in &p.waits {
        if let (Some(r), Some(slot)) = (w.resource, out.get_mut(w.sample as usize))
            && (r as usize) < p.resources.len()
        {
            *slot = Some(r);
        }
    }
    let reads = reply_reads(p);
    if reads.is_empty() {
        return out;
    }
    for (i, s) in p.samples.iter().enumerate() {
        if !is_event_loop_wait(p, s.kind, cats.get(i).copied(), out[i]) {
            continue;
        }
        let end = s.time_ns.saturating_add(s.weight_ns);
        if let Some(r) = first_read_after(&reads, s.tid, end) {
            out[i] = Some(r);
        }
    }
    out
}

/// An off-CPU event-loop wait whose own resource (if any) is a set, not a socket.
fn is_event_loop_wait(
    p: &SampledProfile,
    kind: SampleKind,
    cat: Option<WaitCategory>,
    resource: Option<u32>,
) -> bool {
    let off = matches!(kind, SampleKind::OffCpu { .. });
    let set = resource
        .and_then(|r| p.resources.get(r as usize))
        .is_none_or(|r| matches!(r.kind, ResourceKind::Epoll | ResourceKind::Eventfd));
    off && set && matches!(cat, Some(WaitCategory::Poll | WaitCategory::Other))
}

/// Reply reads per thread, in time order: (time, resource).
fn reply_reads(p: &SampledProfile) -> HashMap<i32, Vec<(u64, u32)>> {
    let mut by_tid: HashMap<i32, Vec<(u64, u32)>> = HashMap::new();
    for s in &p.sockets {
        let Some(r) = s.resource.filter(|&r| (r as usize) < p.resources.len()) else {
            continue;
        };
        for t in &s.turns {
            by_tid.entry(t.tid).or_default().push((t.time_ns, r));
        }
    }
    for v in by_tid.values_mut() {
        v.sort_unstable();
    }
    by_tid
}

fn first_read_after(reads: &HashMap<i32, Vec<(u64, u32)>>, tid: i32, end: u64) -> Option<u32> {
    let v = reads.get(&tid)?;
    let at = v.partition_point(|&(t, _)| t < end);
    let &(t, r) = v.get(at)?;
    (t - end <= READ_AFTER_WAKE_NS).then_some(r)
}

/// The category of sample `i`: its own, refined by what it waited on; an event-loop
/// wait on nothing the run did is `idle` when that can be known (see the module doc).
pub fn category(
    p: &SampledProfile,
    i: usize,
    cat: WaitCategory,
    resource: Option<u32>,
    roles: &Roles,
) -> WaitCategory {
    let refined = roles::refine(cat, roles.role(resource));
    let unexplained_poll = refined == WaitCategory::Poll
        && p.sockets_recorded
        && p.wakers_recorded
        && p.samples.get(i).is_some_and(|s| s.waker.is_none());
    if unexplained_poll {
        WaitCategory::Idle
    } else {
        refined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Resource, SocketTraffic, ThreadSample, Turn, WaitState};

    const MS: u64 = 1_000_000;

    fn poll_wait(tid: i32, at_ms: u64, dur_ms: u64) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid,
            time_ns: at_ms * MS,
            stack: None,
            weight_ns: dur_ms * MS,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
            waker: None,
        }
    }

    fn db() -> Resource {
        Resource {
            kind: ResourceKind::SocketTcp,
            name: "127.0.0.1:5432".into(),
            local: None,
            peer: Some("127.0.0.1:5432".into()),
            pid: 1,
            service: Some("postgres:5432".into()),
            peer_local: Some(true),
        }
    }

    fn traffic(turns: Vec<Turn>) -> SocketTraffic {
        SocketTraffic {
            pid: 1,
            fd: 5,
            resource: Some(0),
            sends: turns.len() as u64,
            recvs: turns.len() as u64,
            bytes_sent: 100,
            bytes_received: 100,
            round_trips: turns.len() as u64,
            connected: true,
            sent_first: true,
            first_ns: 0,
            last_ns: 100 * MS,
            protocol: Some(Protocol::Postgres),
            turns,
        }
    }

    #[test]
    fn an_epoll_wait_is_on_the_socket_read_right_after_it() {
        let p = SampledProfile {
            samples: vec![
                poll_wait(7, 0, 10),
                poll_wait(7, 20, 10),
                poll_wait(8, 0, 10),
            ],
            resources: vec![db()],
            sockets: vec![traffic(vec![
                Turn {
                    tid: 7,
                    time_ns: 10 * MS + 50_000,
                },
                // Read 5 ms after the second wake-up: too late to be what ended it.
                Turn {
                    tid: 7,
                    time_ns: 35 * MS,
                },
            ])],
            sockets_recorded: true,
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let cats = vec![WaitCategory::Poll; 3];
        let r = sample_resources(&p, &cats);
        assert_eq!(r, vec![Some(0), None, None]);
        let roles = Roles::of(&p);
        assert_eq!(roles.role, vec![ResourceRole::Database]);
        assert_eq!(category(&p, 0, cats[0], r[0], &roles), WaitCategory::Db);
        // Nothing read after it and no waker in the run: idle.
        assert_eq!(category(&p, 1, cats[1], r[1], &roles), WaitCategory::Idle);
    }

    #[test]
    fn without_socket_records_an_unexplained_poll_stays_unknown() {
        let p = SampledProfile {
            samples: vec![poll_wait(7, 0, 10)],
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let roles = Roles::of(&p);
        assert_eq!(
            category(&p, 0, WaitCategory::Poll, None, &roles),
            WaitCategory::Poll
        );
    }
}
