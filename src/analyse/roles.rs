//! What a resource is to the run ([`ResourceRole`]): a file, a database, a service on
//! this host, a peer elsewhere, a listening socket... and how that refines the wait
//! category of the time blocked on it ([`refine`]).
//!
//! A socket's peer is a **database** when its first bytes spoke a database protocol,
//! else when the process behind a local peer is a database server ([`DB_PROCESSES`]),
//! else when the peer listens on a database's well-known port ([`DB_PORTS`]). Otherwise
//! a peer on this host (the sampler's `peer_local`, else a loopback address) is a
//! **service** and one elsewhere is **external**. A TCP or UDP socket with no peer is
//! a listening (or unconnected) socket: waiting on it is waiting for clients, **idle**.
//! A Unix socket is always a local peer: a service (or a socketpair's other end).

use crate::profile::{Protocol, Resource, ResourceKind};

use super::classify::WaitCategory;
use super::resources::ResourceRole;

/// Well-known ports of databases and data stores: PostgreSQL, MySQL/MariaDB, SQL
/// Server, Oracle, Redis, memcached, MongoDB, Cassandra, CouchDB, Elasticsearch,
/// ClickHouse.
pub const DB_PORTS: &[u16] = &[
    5432, 3306, 1433, 1521, 6379, 11211, 27017, 9042, 5984, 9200, 9000, 8123,
];

/// Process names (comm, 15 bytes at most) of database servers.
pub const DB_PROCESSES: &[&str] = &[
    "postgres",
    "postmaster",
    "mysqld",
    "mariadbd",
    "redis-server",
    "valkey-server",
    "mongod",
    "memcached",
    "clickhouse-serv",
    "sqlservr",
];

/// Whether a protocol is a database's.
pub fn is_db_protocol(p: Protocol) -> bool {
    matches!(
        p,
        Protocol::Postgres | Protocol::Mysql | Protocol::Redis | Protocol::Mongodb
    )
}

/// The port of `host:port` or `[v6]:port`.
pub fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

/// Whether an address (`127.0.0.1:5432`, `[::1]:80`, `[::ffff:127.0.0.1]:80`) is a
/// loopback one.
pub fn is_loopback(addr: &str) -> bool {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.starts_with("127.") || host == "::1" || host.starts_with("::ffff:127.")
}

/// The process name of a service `comm:port` or `comm:/path`.
fn service_process(service: &str) -> &str {
    service.split(':').next().unwrap_or(service)
}

/// What `r` is to the run, given the protocol its traffic spoke (when recognised).
pub fn role_of(r: &Resource, protocol: Option<Protocol>) -> ResourceRole {
    use ResourceKind as K;
    match r.kind {
        K::File => return ResourceRole::File,
        K::Device => return ResourceRole::Device,
        K::Pipe => return ResourceRole::Pipe,
        K::Eventfd | K::Epoll | K::Other => return ResourceRole::Other,
        K::SocketTcp | K::SocketUdp | K::SocketUnix => {}
    }
    let db_process = r
        .service
        .as_deref()
        .is_some_and(|s| DB_PROCESSES.contains(&service_process(s)));
    let db_port = r.kind != K::SocketUnix
        && r.peer
            .as_deref()
            .and_then(port_of)
            .is_some_and(|p| DB_PORTS.contains(&p));
    if protocol.is_some_and(is_db_protocol) || db_process || db_port {
        return ResourceRole::Database;
    }
    if r.kind == K::SocketUnix {
        // Always a peer on this host (a server, or the other end of a socketpair).
        return ResourceRole::Service;
    }
    let Some(peer) = r.peer.as_deref() else {
        return ResourceRole::Listener;
    };
    match r.peer_local {
        Some(true) => ResourceRole::Service,
        Some(false) => ResourceRole::External,
        None if r.service.is_some() || is_loopback(peer) => ResourceRole::Service,
        None => ResourceRole::External,
    }
}

/// A wait's category, refined by the role of what it waited on: a socket to a
/// database is `db`, to a peer elsewhere `external`; an event-loop wait (`poll`) or an
/// unattributed one on a local service's socket is `network`, on a pipe `pipe`, on a
/// file `file`; a wait on a listening socket is `idle`. Other categories (lock, sleep, file...) and waits
/// with no resource stay.
pub fn refine(cat: WaitCategory, role: Option<ResourceRole>) -> WaitCategory {
    use WaitCategory as W;
    let Some(role) = role else { return cat };
    let socket_wait = matches!(cat, W::Network | W::Poll | W::Other);
    // A preemption with a server named (`waited::at_syscall_exit`: the server the
    // request woke took the CPU, the reply was read right after) is that server's time.
    let served = socket_wait || cat == W::Runqueue;
    match role {
        ResourceRole::Database if served => W::Db,
        ResourceRole::External if served => W::External,
        ResourceRole::Listener if socket_wait => W::Idle,
        ResourceRole::Service if served => W::Network,
        ResourceRole::Pipe if matches!(cat, W::Poll | W::Other) => W::Pipe,
        // A read or sync named only by its call (no kernel stack): the file says it.
        ResourceRole::File if cat == W::Other => W::File,
        _ => cat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket(kind: ResourceKind, peer: Option<&str>) -> Resource {
        Resource {
            kind,
            name: peer.unwrap_or("127.0.0.1:8080").into(),
            local: Some("127.0.0.1:40000".into()),
            peer: peer.map(Into::into),
            pid: 1,
            service: None,
            peer_local: None,
        }
    }

    #[test]
    fn a_database_is_told_by_protocol_process_or_port() {
        let web = socket(ResourceKind::SocketTcp, Some("127.0.0.1:8080"));
        assert_eq!(role_of(&web, None), ResourceRole::Service);
        assert_eq!(
            role_of(&web, Some(Protocol::Postgres)),
            ResourceRole::Database
        );
        let pg = socket(ResourceKind::SocketTcp, Some("127.0.0.1:5432"));
        assert_eq!(role_of(&pg, None), ResourceRole::Database);
        let odd_port = Resource {
            service: Some("postgres:6543".into()),
            ..socket(ResourceKind::SocketTcp, Some("127.0.0.1:6543"))
        };
        assert_eq!(role_of(&odd_port, None), ResourceRole::Database);
        let unix = Resource {
            service: Some("postgres:/tmp/.s.PGSQL.5432".into()),
            ..socket(ResourceKind::SocketUnix, None)
        };
        assert_eq!(role_of(&unix, None), ResourceRole::Database);
        // A Unix socket's peer is on this host, known or not.
        assert_eq!(
            role_of(&socket(ResourceKind::SocketUnix, None), None),
            ResourceRole::Service
        );
    }

    #[test]
    fn locality_makes_a_service_or_an_external_peer_and_no_peer_a_listener() {
        let far = socket(ResourceKind::SocketTcp, Some("93.184.216.34:443"));
        assert_eq!(role_of(&far, None), ResourceRole::External);
        let own_address = Resource {
            peer_local: Some(true),
            ..socket(ResourceKind::SocketTcp, Some("10.0.0.5:8081"))
        };
        assert_eq!(role_of(&own_address, None), ResourceRole::Service);
        let v6 = socket(ResourceKind::SocketTcp, Some("[::1]:8081"));
        assert_eq!(role_of(&v6, None), ResourceRole::Service);
        assert_eq!(
            role_of(&socket(ResourceKind::SocketTcp, None), None),
            ResourceRole::Listener
        );
    }

    #[test]
    fn categories_are_refined_by_role() {
        use WaitCategory as W;
        assert_eq!(refine(W::Poll, Some(ResourceRole::Database)), W::Db);
        assert_eq!(refine(W::Network, Some(ResourceRole::Database)), W::Db);
        assert_eq!(
            refine(W::Network, Some(ResourceRole::External)),
            W::External
        );
        assert_eq!(refine(W::Poll, Some(ResourceRole::Service)), W::Network);
        assert_eq!(refine(W::Network, Some(ResourceRole::Listener)), W::Idle);
        assert_eq!(refine(W::Poll, Some(ResourceRole::Pipe)), W::Pipe);
        assert_eq!(refine(W::Lock, Some(ResourceRole::Database)), W::Lock);
        assert_eq!(refine(W::File, Some(ResourceRole::File)), W::File);
        assert_eq!(refine(W::Other, Some(ResourceRole::File)), W::File);
        assert_eq!(refine(W::Poll, None), W::Poll);
    }

    #[test]
    fn loopback_addresses() {
        assert!(is_loopback("127.0.0.1:5432"));
        assert!(is_loopback("[::1]:80"));
        assert!(is_loopback("[::ffff:127.0.0.1]:80"));
        assert!(!is_loopback("10.1.2.3:80"));
        assert_eq!(port_of("[::1]:8081"), Some(8081));
    }
}
