//! Time blocked per resource: for each file, socket, pipe... that off-CPU intervals
//! waited on (the recording's `waits` table, see `sample::waiton`), how many intervals,
//! how long in all (thread time: two threads blocked on one socket for 1 s count 2 s),
//! and when it was first and last waited on.
//!
//! A wait on a resource also refines its category ([`refine`]): a socket to a database
//! port is `db` (I/O-DB), an event-loop wait on a socket is `network`.
//!
//! Thread time only: which of these waits lay on the critical path is for a later
//! stage (`critical` knows the path; joining the two is issue 8's next step).

use serde::{Deserialize, Serialize};

use crate::profile::{Resource, SampledProfile};

use super::classify::WaitCategory;

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

/// Every resource waited on, most blocked time first (ties: by index).
pub fn resource_use(p: &SampledProfile) -> Vec<ResourceUse> {
    let mut acc: Vec<Option<(u64, u64, u64, u64)>> = vec![None; p.resources.len()];
    for w in &p.waits {
        let (Some(r), Some(s)) = (w.resource, p.samples.get(w.sample as usize)) else {
            continue;
        };
        let Some(slot) = acc.get_mut(r as usize) else {
            continue;
        };
        let end = s.time_ns.saturating_add(s.weight_ns);
        let e = slot.get_or_insert((0, 0, s.time_ns, end));
        e.0 += 1;
        e.1 = e.1.saturating_add(s.weight_ns);
        e.2 = e.2.min(s.time_ns);
        e.3 = e.3.max(end);
    }
    let out: Vec<ResourceUse> = acc
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let (n, ns, first, last) = e?;
            let r = p.resources.get(i)?;
            Some(ResourceUse {
                resource: i as u32,
                kind: r.kind,
                name: r.name.clone(),
                local: r.local.clone(),
                peer: r.peer.clone(),
                pid: r.pid,
                descriptors: 1,
                intervals: n,
                blocked_ms: super::steps::ms(ns),
                first_ms: super::steps::ms(first),
                last_ms: super::steps::ms(last),
                role: ResourceRole::Other,
                service: r.service.clone(),
                peer_local: r.peer_local,
                protocol: None,
                calls: None,
                bytes_sent: None,
                bytes_received: None,
                round_trips: None,
                connections: None,
                critical_ms: None,
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
            }
            None => {
                at.insert(key, merged.len());
                merged.push(r);
            }
        }
    }
    merged
}

/// Well-known ports of databases and data stores: a socket whose peer listens on one
/// is a database (PostgreSQL, MySQL/MariaDB, SQL Server, Oracle, Redis, memcached,
/// MongoDB, Cassandra, CouchDB, Elasticsearch, ClickHouse).
const DB_PORTS: &[u16] = &[
    5432, 3306, 1433, 1521, 6379, 11211, 27017, 9042, 5984, 9200, 9000, 8123,
];

/// Each sample's resource, for the samples the waits table names.
pub fn resource_of_samples(p: &SampledProfile) -> Vec<Option<&Resource>> {
    let mut out = vec![None; p.samples.len()];
    for w in &p.waits {
        if let (Some(r), Some(slot)) = (w.resource, out.get_mut(w.sample as usize)) {
            *slot = p.resources.get(r as usize);
        }
    }
    out
}

/// A wait's category, refined by what it waited on: a socket whose peer is a database
/// port is `db`; an event-loop wait (`poll`) or an unattributed one on a socket is
/// `network`, on a pipe `pipe`. Other categories (and waits with no resource) stay.
pub fn refine(cat: WaitCategory, resource: Option<&Resource>) -> WaitCategory {
    use crate::profile::ResourceKind as K;
    let Some(r) = resource else { return cat };
    let socket = matches!(r.kind, K::SocketTcp | K::SocketUdp | K::SocketUnix);
    let db = matches!(r.kind, K::SocketTcp | K::SocketUdp)
        && r.peer
            .as_deref()
            .and_then(|p| p.rsplit(':').next()?.parse::<u16>().ok())
            .is_some_and(|port| DB_PORTS.contains(&port));
    match cat {
        WaitCategory::Network | WaitCategory::Poll | WaitCategory::Other if db => WaitCategory::Db,
        WaitCategory::Poll | WaitCategory::Other if socket => WaitCategory::Network,
        WaitCategory::Poll | WaitCategory::Other if r.kind == K::Pipe => WaitCategory::Pipe,
        c => c,
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
            stack: None,
            weight_ns: dur_ms * MS,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
            waker: None,
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
            resource,
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
            ],
            resources: vec![res("db:5432"), res("cache:6379"), res("unused:1")],
            waits: vec![
                wait(0, Some(1)),
                wait(1, Some(1)),
                wait(2, Some(0)),
                wait(3, None),
                wait(4, Some(1)),
            ],
            ..SampledProfile::default()
        };
        let u = resource_use(&p);
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
        let mut p = SampledProfile {
            samples: vec![off(0, 10), off(20, 5), off(30, 40)],
            resources: vec![res("a:1")],
            waits: vec![wait(0, Some(0)), wait(2, Some(0))],
            ..SampledProfile::default()
        };
        p.retain_samples(|s| s.time_ns != 0);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.waits, vec![wait(1, Some(0))]);
        assert_eq!(resource_use(&p)[0].blocked_ms, 40.0);
    }

    #[test]
    fn no_waits_no_rows() {
        assert!(resource_use(&SampledProfile::default()).is_empty());
    }

    #[test]
    fn connections_to_one_peer_are_one_row() {
        let row = |resource, blocked_ms| ResourceUse {
            resource,
            kind: ResourceKind::SocketTcp,
            name: "127.0.0.1:5432".into(),
            local: Some(format!("127.0.0.1:{}", 40000 + resource)),
            peer: Some("127.0.0.1:5432".into()),
            pid: 7,
            descriptors: 1,
            intervals: 2,
            blocked_ms,
            first_ms: f64::from(resource),
            last_ms: f64::from(resource) + 1.0,
            role: ResourceRole::Database,
            service: None,
            peer_local: None,
            protocol: None,
            calls: None,
            bytes_sent: None,
            bytes_received: None,
            round_trips: None,
            connections: None,
            critical_ms: None,
        };
        let merged = merge_same_name(vec![row(0, 1.5), row(1, 2.25), row(2, 0.25)]);
        assert_eq!(merged.len(), 1);
        let m = &merged[0];
        assert_eq!((m.descriptors, m.intervals), (3, 6));
        assert!((m.blocked_ms - 4.0).abs() < 1e-9);
        assert_eq!((m.first_ms, m.last_ms), (0.0, 3.0));
        assert_eq!(m.local, None, "the local ports differ");
    }

    fn socket(kind: ResourceKind, peer: &str) -> Resource {
        Resource {
            kind,
            name: peer.into(),
            local: Some("127.0.0.1:40000".into()),
            peer: Some(peer.into()),
            pid: 1,
            service: None,
            peer_local: None,
        }
    }

    #[test]
    fn a_socket_to_a_database_port_is_a_db_wait_and_a_polled_socket_is_network() {
        let pg = socket(ResourceKind::SocketTcp, "127.0.0.1:5432");
        let web = socket(ResourceKind::SocketTcp, "[::1]:8080");
        let pipe = Resource {
            kind: ResourceKind::Pipe,
            name: "pipe:[7]".into(),
            local: None,
            peer: None,
            pid: 1,
            service: None,
            peer_local: None,
        };
        assert_eq!(refine(WaitCategory::Poll, Some(&pg)), WaitCategory::Db);
        assert_eq!(refine(WaitCategory::Network, Some(&pg)), WaitCategory::Db);
        assert_eq!(
            refine(WaitCategory::Poll, Some(&web)),
            WaitCategory::Network
        );
        assert_eq!(
            refine(WaitCategory::Network, Some(&web)),
            WaitCategory::Network
        );
        assert_eq!(refine(WaitCategory::Poll, Some(&pipe)), WaitCategory::Pipe);
        // A lock or a sleep stays what it is; no resource, nothing changes.
        assert_eq!(refine(WaitCategory::Lock, Some(&pg)), WaitCategory::Lock);
        assert_eq!(refine(WaitCategory::Poll, None), WaitCategory::Poll);
    }
}
