//! What the run waited on, per resource: for each file, socket, pipe... the off-CPU
//! intervals on it (the samples `waited` attributed to it), how long in all (thread
//! time: two threads blocked on one socket for 1 s count 2 s) and how much of that lay
//! on the critical path, when it was first and last waited on, and — for sockets, from
//! the socket tracepoints — calls, bytes, request→response round trips and the
//! connections the tree opened. Rows of one process to one name (30 connections to
//! one peer, three opens of one file) are merged.
//!
//! A resource's role (database, service, external, file...) is `roles`'s; the name
//! shown is the service behind a local peer when known (`postgres:5432`).

use serde::{Deserialize, Serialize};

use crate::profile::{Resource, SampledProfile};

/// The waits on one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUse {
    /// Index into the profile's `resources`.
    pub resource: u32,
    /// What it is: `file`, `socket_tcp`, `pipe`... (the recording's kind).
    pub kind: crate::profile::ResourceKind,
    /// A path, a socket's peer address, or the descriptor's link text.
    pub name: String,
    /// A socket's own and peer addresses, when it is one.
    pub local: Option<String>,
    pub peer: Option<String>,
    /// The process that held it.
    pub pid: i32,
    /// How many descriptors (connections, opens) of that name the row merges: one per
    /// connection to the same peer, one per open of the same file.
    pub descriptors: u64,
    pub intervals: u64,
    /// Summed duration of the intervals (thread time), ms.
    pub blocked_ms: f64,
    /// Start of the first interval and end of the last, ms since the run's start.
    pub first_ms: f64,
    pub last_ms: f64,
    /// What it is to the run: a file, a database, a service on this host, an external
    /// peer, a pipe...
    pub role: ResourceRole,
    /// The process behind a peer on this host and its port or path (`postgres:5432`).
    pub service: Option<String>,
    /// Whether a socket's peer is on this host; None when unknown or not a socket.
    pub peer_local: Option<bool>,
    /// What the connection speaks, recognised from its first bytes.
    pub protocol: Option<crate::profile::Protocol>,
    /// Socket traffic from the socket tracepoints (None when not recorded, or not a
    /// socket): calls that moved data, bytes each way, request→response turns, and
    /// connections the tree opened to it.
    pub calls: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    pub round_trips: Option<u64>,
    pub connections: Option<u64>,
    /// Of `blocked_ms`, the time on the critical path, ms; None without one.
    pub critical_ms: Option<f64>,
}

/// One resource a step waited on (schema `$defs/step.resources`): the waits inside the
/// step's subtree, and the round trips made from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResource {
    pub kind: crate::profile::ResourceKind,
    pub role: ResourceRole,
    /// As in [`ResourceUse::name`]; a service's name where known (`postgres:5432`).
    pub name: String,
    /// Off-CPU intervals on it inside the step, and their summed (thread) time, ms.
    pub intervals: u64,
    pub blocked_ms: f64,
    /// Of that, the time on the critical path, ms; None without one.
    pub critical_ms: Option<f64>,
    /// Request→response turns whose reply was read inside the step; None when socket
    /// traffic was not recorded.
    pub round_trips: Option<u64>,
    /// Connections to it opened inside the step; None when not recorded.
    pub connections: Option<u64>,
}

/// What a resource is to the run, for the classification and the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceRole {
    /// A regular file or a block device.
    File,
    /// A database (by protocol, port or the process behind it).
    Database,
    /// A peer on this host that is not a database (`python3:8081`).
    Service,
    /// A peer on another host.
    External,
    /// A listening socket: waiting on it is waiting for clients.
    Listener,
    Pipe,
    /// A device node (`/dev/...`).
    Device,
    /// eventfd, timerfd, epoll, an unresolved socket...
    Other,
}

impl ResourceUse {
    /// The resource itself.
    pub fn of<'a>(&self, p: &'a SampledProfile) -> Option<&'a Resource> {
        p.resources.get(self.resource as usize)
    }
}

/// The name a resource is shown and merged by: the service behind a local peer when
/// known (`postgres:5432`), else its own name.
pub fn shown_name(r: &Resource) -> &str {
    r.service.as_deref().unwrap_or(&r.name)
}

#[cfg(test)]
impl ResourceUse {
    /// A row for tests: one descriptor, two intervals of 1 ms in all, nothing else known.
    pub(crate) fn example(
        kind: crate::profile::ResourceKind,
        name: &str,
        role: ResourceRole,
    ) -> ResourceUse {
        ResourceUse {
            resource: 0,
            kind,
            name: name.into(),
            local: None,
            peer: None,
            pid: 1,
            descriptors: 1,
            intervals: 2,
            blocked_ms: 1.0,
            first_ms: 0.0,
            last_ms: 1.0,
            role,
            service: None,
            peer_local: None,
            protocol: None,
            calls: None,
            bytes_sent: None,
            bytes_received: None,
            round_trips: None,
            connections: None,
            critical_ms: None,
        }
    }
}

/// Every resource waited on or talked to, most blocked time first (ties: by index).
pub fn resource_use(p: &SampledProfile, tree: &super::calltree::CallTree) -> Vec<ResourceUse> {
    let critical = !matches!(tree.critical, super::calltree::CriticalModel::ThreadTime);
    let mut acc: Vec<Option<Acc>> = vec![None; p.resources.len()];
    for (i, r) in tree.sample_resources.iter() {
        let Some(s) = p.samples.get(i) else {
            continue;
        };
        let Some(slot) = acc.get_mut(r as usize) else {
            continue;
        };
        let end = s.time_ns.saturating_add(s.weight_ns);
        let e = slot.get_or_insert_with(|| Acc::starting(s.time_ns, end));
        e.intervals += 1;
        e.blocked_ns = e.blocked_ns.saturating_add(s.weight_ns);
        e.first = e.first.min(s.time_ns);
        e.last = e.last.max(end);
    }
    for (r, _, crit) in tree.resource_crit.iter() {
        if let Some(Some(e)) = acc.get_mut(r as usize) {
            e.crit_ns = e.crit_ns.saturating_add(crit);
        }
    }
    for t in &p.sockets {
        let Some(slot) = t.resource.and_then(|r| acc.get_mut(r as usize)) else {
            continue;
        };
        let e = slot.get_or_insert_with(|| Acc::starting(t.first_ns, t.last_ns));
        let kind = t
            .resource
            .and_then(|r| p.resources.get(r as usize))
            .map(|r| r.kind);
        e.traffic.add(t, kind);
    }
    let out: Vec<ResourceUse> = acc
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let e = e?;
            let r = p.resources.get(i)?;
            let traffic = p.sockets_recorded && is_socket(r.kind);
            Some(ResourceUse {
                resource: i as u32,
                kind: r.kind,
                name: shown_name(r).to_string(),
                local: r.local.clone(),
                peer: r.peer.clone(),
                pid: r.pid,
                descriptors: 1,
                intervals: e.intervals,
                blocked_ms: super::steps::ms(e.blocked_ns),
                first_ms: super::steps::ms(e.first),
                last_ms: super::steps::ms(e.last),
                role: tree
                    .roles
                    .role(Some(i as u32))
                    .unwrap_or(ResourceRole::Other),
                service: r.service.clone(),
                peer_local: r.peer_local,
                protocol: tree.roles.protocol.get(i).copied().flatten(),
                calls: traffic.then_some(e.traffic.sends + e.traffic.recvs),
                bytes_sent: traffic.then_some(e.traffic.bytes_sent),
                bytes_received: traffic.then_some(e.traffic.bytes_received),
                round_trips: traffic.then_some(e.traffic.round_trips),
                connections: traffic.then_some(e.traffic.connections),
                critical_ms: critical.then(|| super::steps::ms(e.crit_ns)),
            })
        })
        .collect();
    let mut out = merge_same_name(out);
    out.sort_by(|a, b| {
        b.blocked_ms
            .total_cmp(&a.blocked_ms)
            .then(a.resource.cmp(&b.resource))
    });
    out
}

/// Request→response round trips of the run's clients (sockets the tree sent first on):
/// to databases (by role) and over HTTP (by protocol). None when socket traffic was not
/// recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RoundTrips {
    pub http: Option<u64>,
    pub db: Option<u64>,
}

/// A connection whose first bytes could not be read (or matched nothing) speaks what
/// the other connections of the same process to the same peer were recognised to speak.
pub fn round_trips(p: &SampledProfile, roles: &super::waited::Roles) -> RoundTrips {
    if !p.sockets_recorded {
        return RoundTrips::default();
    }
    use crate::profile::Protocol;
    let key = |t: &crate::profile::SocketTraffic| {
        let r = t.resource.and_then(|i| p.resources.get(i as usize))?;
        Some((t.pid, shown_name(r).to_string()))
    };
    let http_peers: std::collections::HashSet<(i32, String)> = p
        .sockets
        .iter()
        .filter(|t| matches!(t.protocol, Some(Protocol::Http | Protocol::Http2)))
        .filter_map(key)
        .collect();
    let (mut http, mut db) = (0u64, 0u64);
    for t in p.sockets.iter().filter(|t| t.sent_first) {
        let is_http = match t.protocol {
            Some(proto) => matches!(proto, Protocol::Http | Protocol::Http2),
            None => key(t).is_some_and(|k| http_peers.contains(&k)),
        };
        if is_http {
            http = http.saturating_add(t.round_trips);
        }
        if roles.role(t.resource) == Some(ResourceRole::Database) {
            db = db.saturating_add(t.round_trips);
        }
    }
    RoundTrips {
        http: Some(http),
        db: Some(db),
    }
}

fn is_socket(k: crate::profile::ResourceKind) -> bool {
    use crate::profile::ResourceKind as K;
    matches!(k, K::SocketTcp | K::SocketUdp | K::SocketUnix)
}

/// Socket traffic summed over descriptors.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Traffic {
    pub sends: u64,
    pub recvs: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub round_trips: u64,
    pub connections: u64,
}

/// Whether the tree opened this connection during the run: a TCP connect seen
/// (`connected`), or a Unix stream socket the tree spoke first on — no tracepoint
/// reports a Unix connect, and a launched target's client sockets are all its own.
pub(crate) fn opened(
    t: &crate::profile::SocketTraffic,
    kind: Option<crate::profile::ResourceKind>,
) -> bool {
    t.connected || (kind == Some(crate::profile::ResourceKind::SocketUnix) && t.sent_first)
}

impl Traffic {
    pub(crate) fn add(
        &mut self,
        t: &crate::profile::SocketTraffic,
        kind: Option<crate::profile::ResourceKind>,
    ) {
        self.sends = self.sends.saturating_add(t.sends);
        self.recvs = self.recvs.saturating_add(t.recvs);
        self.bytes_sent = self.bytes_sent.saturating_add(t.bytes_sent);
        self.bytes_received = self.bytes_received.saturating_add(t.bytes_received);
        self.round_trips = self.round_trips.saturating_add(t.round_trips);
        self.connections += u64::from(opened(t, kind));
    }
}

#[derive(Debug, Clone, Copy)]
struct Acc {
    intervals: u64,
    blocked_ns: u64,
    crit_ns: u64,
    first: u64,
    last: u64,
    traffic: Traffic,
}

impl Acc {
    fn starting(first: u64, last: u64) -> Acc {
        Acc {
            intervals: 0,
            blocked_ns: 0,
            crit_ns: 0,
            first,
            last,
            traffic: Traffic::default(),
        }
    }
}

/// One row per (process, kind, name): a client's 30 connections to one peer are one
/// row with 30 descriptors, keyed by the first resource's index.
fn merge_same_name(rows: Vec<ResourceUse>) -> Vec<ResourceUse> {
    let mut merged: Vec<ResourceUse> = Vec::new();
    let mut at: std::collections::HashMap<(i32, crate::profile::ResourceKind, String), usize> =
        std::collections::HashMap::new();
    for r in rows {
        let key = (r.pid, r.kind, r.name.clone());
        match at.get(&key) {
            Some(&i) => {
                let m = &mut merged[i];
                m.intervals += r.intervals;
                m.blocked_ms = super::steps::round_ms(m.blocked_ms + r.blocked_ms);
                m.first_ms = m.first_ms.min(r.first_ms);
                m.last_ms = m.last_ms.max(r.last_ms);
                m.descriptors += r.descriptors;
                if m.local != r.local {
                    m.local = None;
                }
                m.protocol = m.protocol.or(r.protocol);
                m.calls = add_opt(m.calls, r.calls);
                m.bytes_sent = add_opt(m.bytes_sent, r.bytes_sent);
                m.bytes_received = add_opt(m.bytes_received, r.bytes_received);
                m.round_trips = add_opt(m.round_trips, r.round_trips);
                m.connections = add_opt(m.connections, r.connections);
                m.critical_ms = match (m.critical_ms, r.critical_ms) {
                    (Some(a), Some(b)) => Some(super::steps::round_ms(a + b)),
                    (a, b) => a.or(b),
                };
            }
            None => {
                at.insert(key, merged.len());
                merged.push(r);
            }
        }
    }
    merged
}

/// A sum of two counts where either may be unknown: unknown only when both are.
fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.saturating_add(y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{ResourceKind, SampleKind, ThreadSample, WaitOn, WaitState};

    const MS: u64 = 1_000_000;

    fn off(time_ms: u64, dur_ms: u64) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid: 1,
            time_ns: time_ms * MS,
            stack: None.into(),
            weight_ns: dur_ms * MS,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
        }
    }

    fn res(name: &str) -> Resource {
        Resource {
            kind: ResourceKind::SocketTcp,
            name: name.into(),
            local: None,
            peer: Some(name.into()),
            pid: 1,
            service: None,
            peer_local: None,
        }
    }

    fn wait(sample: u32, resource: Option<u32>) -> WaitOn {
        WaitOn {
            sample,
            fd: Some(3),
            arg0: 3,
            resource: resource.into(),
        }
    }

    #[test]
    fn intervals_add_up_per_resource_most_blocked_first() {
        let p = SampledProfile {
            samples: vec![
                off(0, 10),
                off(20, 5),
                off(30, 40),
                off(100, 1),
                off(200, 9),
            ]
            .into(),
            resources: vec![res("db:5432"), res("cache:6379"), res("unused:1")],
            waits: vec![
                wait(0, Some(1)),
                wait(1, Some(1)),
                wait(2, Some(0)),
                wait(3, None),
                wait(4, Some(1)),
            ]
            .into(),
            ..SampledProfile::default()
        };
        let u = resource_use(&p, &crate::analyse::calltree::CallTree::build(&p));
        assert_eq!(u.len(), 2, "the unused resource has no row");
        assert_eq!(u[0].of(&p).map(|r| r.name.as_str()), Some("db:5432"));
        assert_eq!((u[0].intervals, u[0].blocked_ms), (1, 40.0));
        assert_eq!(
            (u[1].resource, u[1].intervals, u[1].blocked_ms),
            (1, 3, 24.0)
        );
        assert_eq!((u[1].first_ms, u[1].last_ms), (0.0, 209.0));
    }

    #[test]
    fn dropping_samples_keeps_the_waits_on_theirs() {
        let p = SampledProfile {
            samples: vec![off(0, 10), off(20, 5), off(30, 40)].into(),
            resources: vec![res("a:1")],
            waits: vec![wait(0, Some(0)), wait(2, Some(0))].into(),
            ..SampledProfile::default()
        };
        let p = p.filtered(|s| s.time_ns != 0);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.waits.to_vec(), vec![wait(1, Some(0))]);
        assert_eq!(
            resource_use(&p, &crate::analyse::calltree::CallTree::build(&p))[0].blocked_ms,
            40.0
        );
    }

    #[test]
    fn no_waits_no_rows() {
        assert!(
            resource_use(
                &SampledProfile::default(),
                &crate::analyse::calltree::CallTree::build(&SampledProfile::default())
            )
            .is_empty()
        );
    }

    #[test]
    fn connections_to_one_peer_are_one_row() {
        let row = |resource, blocked_ms| ResourceUse {
            resource,
            local: Some(format!("127.0.0.1:{}", 40000 + resource)),
            peer: Some("127.0.0.1:5432".into()),
            pid: 7,
            blocked_ms,
            first_ms: f64::from(resource),
            last_ms: f64::from(resource) + 1.0,
            ..ResourceUse::example(
                ResourceKind::SocketTcp,
                "127.0.0.1:5432",
                ResourceRole::Database,
            )
        };
        let merged = merge_same_name(vec![row(0, 1.5), row(1, 2.25), row(2, 0.25)]);
        assert_eq!(merged.len(), 1);
        let m = &merged[0];
        assert_eq!((m.descriptors, m.intervals), (3, 6));
        assert!((m.blocked_ms - 4.0).abs() < 1e-9);
        assert_eq!((m.first_ms, m.last_ms), (0.0, 3.0));
        assert_eq!(m.local, None, "the local ports differ");
    }

    #[test]
    fn a_connection_of_unknown_protocol_speaks_what_its_peer_s_others_do() {
        use crate::profile::{Protocol, SocketTraffic};
        let conn = |resource, protocol| SocketTraffic {
            pid: 1,
            fd: 3,
            resource: Some(resource),
            sends: 2,
            recvs: 2,
            bytes_sent: 10,
            bytes_received: 10,
            round_trips: 2,
            connected: true,
            sent_first: true,
            first_ns: 0,
            last_ns: 1,
            protocol,
            turns: Vec::new(),
        };
        let mut p = SampledProfile {
            resources: vec![
                res("127.0.0.1:8080"),
                res("127.0.0.1:8080"),
                res("127.0.0.1:9"),
            ],
            sockets: vec![conn(0, Some(Protocol::Http)), conn(1, None), conn(2, None)],
            sockets_recorded: true,
            ..SampledProfile::default()
        };
        let roles = super::super::waited::Roles::of(&p);
        let rt = round_trips(&p, &roles);
        assert_eq!((rt.http, rt.db), (Some(4), Some(0)));
        p.sockets_recorded = false;
        assert_eq!(round_trips(&p, &roles), RoundTrips::default());
    }
}
