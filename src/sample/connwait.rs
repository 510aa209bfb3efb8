//! Waits on a socket descriptor named by the connection the descriptor held when the
//! wait ended, from the socket traffic table.
//!
//! Why: a wait's descriptor is looked up one drain round (~10 ms) after the switch-out.
//! A client that opens a connection per request (urllib, `requests` without a session)
//! closes and reuses the same descriptor hundreds of times in that time, so the look-up
//! finds a newer socket — often one created but not yet connected, which no socket table
//! lists: it reads `socket:[INODE]`, names nothing, and takes the waits of every request
//! around it (a urllib client of 1,500 GETs: 2,477 waits on one such "socket", 174 on the
//! server). The traffic table knows, per connection, its descriptor and the span of its
//! traffic, resolved at its first call from the tree's own SYN when the descriptor was
//! gone. A wait whose descriptor named no socket with an address is given the connection
//! of the same process and descriptor whose traffic spans the wait's end (within
//! [`SLACK_NS`]: a `connect` ends just before its first send, an EOF read just after the
//! last data), the nearest one when several do.

use std::collections::HashMap;

use crate::profile::{Resource, ResourceKind, SocketTraffic};

/// How far before a connection's first traffic or after its last a wait's end may be.
pub const SLACK_NS: u64 = 2_000_000;

/// One connection's traffic span and resource: (first_ns, last_ns, resource).
type Span = (u64, u64, u32);

/// The resolved connections of each (pid, fd), by start.
#[derive(Debug, Default)]
pub struct Connections(HashMap<(i32, i32), Vec<Span>>);

impl Connections {
    pub fn of(sockets: &[SocketTraffic], resources: &[Resource]) -> Connections {
        let mut by_fd: HashMap<(i32, i32), Vec<Span>> = HashMap::new();
        for s in sockets {
            let Some(r) = s
                .resource
                .filter(|&r| resources.get(r as usize).is_some_and(addressed))
            else {
                continue;
            };
            by_fd.entry((s.pid, s.fd)).or_default().push((
                s.first_ns,
                s.last_ns.max(s.first_ns),
                r,
            ));
        }
        for v in by_fd.values_mut() {
            v.sort_unstable();
        }
        Connections(by_fd)
    }

    /// The connection descriptor `fd` of `pid` held at `t` (ns since the run's start):
    /// the one whose traffic spans `t`, else the nearest within [`SLACK_NS`].
    pub fn at(&self, pid: i32, fd: i32, t: u64) -> Option<u32> {
        let conns = self.0.get(&(pid, fd))?;
        let distance = |&(first, last, _): &Span| {
            if t < first {
                first - t
            } else {
                t.saturating_sub(last)
            }
        };
        // Connections starting after t + SLACK_NS cannot be it; look at those before.
        let end = conns.partition_point(|c| c.0 <= t.saturating_add(SLACK_NS));
        conns[..end]
            .iter()
            .rev()
            .take(64)
            .filter(|c| distance(c) <= SLACK_NS)
            .min_by_key(|c| distance(c))
            .map(|c| c.2)
    }
}

/// A socket named by an address (a TCP or UDP peer, a Unix path or peer).
fn addressed(r: &Resource) -> bool {
    matches!(
        r.kind,
        ResourceKind::SocketTcp | ResourceKind::SocketUdp | ResourceKind::SocketUnix
    ) && (r.peer.is_some() || r.local.is_some())
}

/// Whether a wait's resource says nothing about what it waited on: none, or a socket
/// known by its inode only (not in any socket table when it was looked up).
pub fn unnamed(r: Option<&Resource>) -> bool {
    r.is_none_or(|r| {
        r.peer.is_none()
            && r.local.is_none()
            && (r.kind == ResourceKind::Other || r.kind == ResourceKind::SocketUnix)
            && r.name.starts_with("socket:[")
    })
}

/// A client's connection with one round trip, for tests.
#[cfg(test)]
pub(crate) fn socket_row(
    pid: i32,
    fd: i32,
    resource: Option<u32>,
    first_ns: u64,
    last_ns: u64,
) -> SocketTraffic {
    SocketTraffic {
        pid,
        fd,
        resource,
        sends: 1,
        recvs: 1,
        bytes_sent: 1,
        bytes_received: 1,
        round_trips: 1,
        connected: true,
        sent_first: true,
        first_ns,
        last_ns,
        protocol: None,
        turns: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(kind: ResourceKind, name: &str, peer: Option<&str>) -> Resource {
        Resource {
            kind,
            name: name.into(),
            local: None,
            peer: peer.map(Into::into),
            pid: 7,
            service: None,
            peer_local: None,
        }
    }

    fn conn(fd: i32, first_ns: u64, last_ns: u64, resource: u32) -> SocketTraffic {
        socket_row(7, fd, Some(resource), first_ns, last_ns)
    }

    #[test]
    fn a_wait_takes_the_connection_its_descriptor_held_then() {
        let resources = [
            res(ResourceKind::SocketTcp, "10.0.0.1:80", Some("10.0.0.1:80")),
            res(ResourceKind::SocketTcp, "10.0.0.2:80", Some("10.0.0.2:80")),
            res(ResourceKind::Other, "socket:[9]", None),
        ];
        const MS: u64 = 1_000_000;
        let sockets = [
            conn(3, 10 * MS, 11 * MS, 0),
            conn(3, 20 * MS, 21 * MS, 1),
            conn(4, 10 * MS, 30 * MS, 1),
            // Not an addressed socket: never given to a wait.
            conn(5, 10 * MS, 30 * MS, 2),
        ];
        let c = Connections::of(&sockets, &resources);
        assert_eq!(c.at(7, 3, 10 * MS + 500), Some(0));
        assert_eq!(c.at(7, 3, 20 * MS + 500), Some(1));
        // A connect just before the first send, an EOF read just after the last data.
        assert_eq!(c.at(7, 3, 19 * MS), Some(1));
        assert_eq!(c.at(7, 3, 12 * MS), Some(0));
        // Between the two, nearer the second.
        assert_eq!(c.at(7, 3, 18_500_000), Some(1));
        // Too far from both, another descriptor or process, an unaddressed socket.
        assert_eq!(c.at(7, 3, 15 * MS), None);
        assert_eq!(c.at(7, 3, 40 * MS), None);
        assert_eq!(c.at(7, 4, 25 * MS), Some(1));
        assert_eq!(c.at(8, 3, 10 * MS + 500), None);
        assert_eq!(c.at(7, 5, 20 * MS), None);
    }

    #[test]
    fn only_waits_that_name_no_address_are_renamed() {
        assert!(unnamed(None));
        assert!(unnamed(Some(&res(ResourceKind::Other, "socket:[9]", None))));
        assert!(unnamed(Some(&res(
            ResourceKind::SocketUnix,
            "socket:[9]",
            None
        ))));
        let tcp = res(ResourceKind::SocketTcp, "10.0.0.1:80", Some("10.0.0.1:80"));
        assert!(!unnamed(Some(&tcp)));
        assert!(!unnamed(Some(&res(ResourceKind::File, "/etc/hosts", None))));
        assert!(!unnamed(Some(&res(ResourceKind::Pipe, "pipe:[3]", None))));
    }
}
