//! Peer → service: which process of this host is at the other end of a socket, named
//! `comm:port` (`postgres:5432`, `python3:8081`) or `comm:/path` for a Unix socket.
//!
//! - TCP/UDP: the peer is local when its address is a loopback, unspecified, or one of
//!   the host's own addresses (`getifaddrs`, read once). Then the socket listening on
//!   its port (TCP state LISTEN, UDP bound and unconnected) is found in the client's
//!   `/proc/PID/net/{tcp,tcp6,udp,udp6}`, and its inode's owner by scanning
//!   `/proc/*/fd` for `socket:[INODE]`. Cached per (protocol, port) for the run.
//! - Unix: sock_diag gives the connected socket's peer inode and that peer's path
//!   (see `unixdiag`); the owner of the peer inode is found by the same scan. Cached
//!   per path. A peer without a path (a socketpair) is local, with no service.
//!
//! - Pipes: the other end is another process holding `pipe:[INODE]` open the other way
//!   (read against write, from `/proc/PID/fdinfo`'s flags; the same scan) and not the
//!   parent of another such holder, named `comm (pid N)`; cached per inode and end. A pipe between two processes that both
//!   left before it was looked at, or whose other end is only the process itself,
//!   keeps its inode name.
//!
//! A scan of `/proc/*/fd` costs ~2 ms: at most [`SCANS_PER_ROUND`] per drain round;
//! past it the service is left unknown and counted in `skipped`.

use std::collections::HashMap;
use std::net::IpAddr;

use super::unixdiag;
use crate::profile::{Resource, ResourceKind};

/// The process at a pipe's other end: its pid and `comm (pid N)`.
pub(crate) type PipePeer = (i32, String);

/// Owner scans (each ~2 ms) per drain round.
pub(crate) const SCANS_PER_ROUND: u32 = 4;

/// The run's cache of services by port and path.
#[derive(Debug, Default)]
pub(crate) struct NetPeer {
    by_port: HashMap<(bool, u16), Option<String>>,
    by_path: HashMap<String, Option<String>>,
    /// By pipe inode and the access mode of the end looked from.
    by_pipe: HashMap<(u64, Option<u32>), Option<PipePeer>>,
    local_addrs: Option<Vec<IpAddr>>,
    scans_left: u32,
    /// Services left unknown for want of budget.
    pub(crate) skipped: u64,
}

impl NetPeer {
    pub(crate) fn new_round(&mut self) {
        self.scans_left = SCANS_PER_ROUND;
    }

    /// Fill `service` and `peer_local` of a socket resource of process `pid` whose
    /// descriptor links to `socket:[inode]`; a Unix socket is named by its peer's path.
    pub(crate) fn enrich(&mut self, pid: i32, inode: u64, r: &mut Resource) {
        match r.kind {
            ResourceKind::SocketTcp | ResourceKind::SocketUdp => self.inet(pid, r),
            ResourceKind::SocketUnix => self.unix(inode, r),
            _ => {}
        }
    }

    fn inet(&mut self, pid: i32, r: &mut Resource) {
        let Some((ip, port)) = r.peer.as_deref().and_then(split_addr) else {
            return;
        };
        let local = ip.is_loopback() || ip.is_unspecified() || self.own_addrs().contains(&ip);
        r.peer_local = Some(local);
        if !local {
            return;
        }
        let tcp = r.kind == ResourceKind::SocketTcp;
        if let Some(s) = self.by_port.get(&(tcp, port)) {
            r.service = s.as_ref().map(|comm| format!("{comm}:{port}"));
            return;
        }
        // No listener on the peer's port: the other end is a client (a server's
        // accepted connection), not a service; no owner scan is spent on it.
        let Some(inode) = listener(pid, tcp, port) else {
            self.by_port.insert((tcp, port), None);
            return;
        };
        if !self.spend() {
            return;
        }
        let comm = owner_comm(inode);
        r.service = comm.as_ref().map(|c| format!("{c}:{port}"));
        self.by_port.insert((tcp, port), comm);
    }

    fn unix(&mut self, inode: u64, r: &mut Resource) {
        let Some(peer) = u32::try_from(inode).ok().and_then(unixdiag::query) else {
            return;
        };
        let Some(peer_ino) = peer.peer else { return };
        // A peer sock_diag cannot see (a client's before its server accepts) is not
        // known yet: the socket stays "unconnected" and is looked at again.
        let Some(other) = unixdiag::query(peer_ino) else {
            return;
        };
        // Connected: an unnamed peer (a socketpair's) is final.
        r.peer_local = Some(true);
        let Some(path) = other.name else {
            return;
        };
        r.name = path.clone();
        r.peer = Some(path.clone());
        let cached = self.by_path.get(&path).cloned();
        let comm = match cached {
            Some(c) => c,
            None if self.spend() => {
                let c = owner_comm(u64::from(peer_ino));
                self.by_path.insert(path.clone(), c.clone());
                c
            }
            None => None,
        };
        r.service = comm.map(|c| format!("{c}:{path}"));
    }

    /// The process at the other end of `pipe:[inode]`, held by `pid` as descriptor
    /// `fd`: its pid and `comm (pid N)`.
    pub(crate) fn pipe_peer(&mut self, pid: i32, fd: i32, inode: u64) -> Option<PipePeer> {
        let mode = access_mode(pid, fd);
        if let Some(known) = self.by_pipe.get(&(inode, mode)) {
            return known.clone();
        }
        if !self.spend() {
            return None;
        }
        let found = other_end(&format!("pipe:[{inode}]"), pid, mode)
            .map(|(p, comm)| (p, format!("{comm} (pid {p})")));
        self.by_pipe.insert((inode, mode), found.clone());
        found
    }

    fn spend(&mut self) -> bool {
        if self.scans_left == 0 {
            self.skipped += 1;
            return false;
        }
        self.scans_left -= 1;
        true
    }

    fn own_addrs(&mut self) -> &[IpAddr] {
        self.local_addrs.get_or_insert_with(host_addrs)
    }
}

/// `127.0.0.1:5432` or `[::1]:80` → (address, port).
pub(crate) fn split_addr(s: &str) -> Option<(IpAddr, u16)> {
    let (ip, port) = s.rsplit_once(':')?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    Some((ip.parse().ok()?, port.parse().ok()?))
}

/// The inode of the socket listening on `port` in the tables `pid` sees (ours when
/// it has exited already).
fn listener(pid: i32, tcp: bool, port: u16) -> Option<u64> {
    let (tables, state) = if tcp {
        (["tcp", "tcp6"], "0A")
    } else {
        (["udp", "udp6"], "07")
    };
    let dir = if std::path::Path::new(&format!("/proc/{pid}/net")).exists() {
        format!("/proc/{pid}/net")
    } else {
        "/proc/net".to_string()
    };
    tables.iter().find_map(|t| {
        let text = std::fs::read_to_string(format!("{dir}/{t}")).ok()?;
        listening_inode(&text, port, state)
    })
}

/// The inode of the first line in `state` whose local port is `port`.
pub(crate) fn listening_inode(table: &str, port: u16, state: &str) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let local_port = f.get(1)?.rsplit_once(':')?.1;
        (u16::from_str_radix(local_port, 16).ok()? == port && *f.get(3)? == state)
            .then(|| f.get(9)?.parse().ok())
            .flatten()
            .filter(|&i| i != 0)
    })
}

/// The comm of a process holding `socket:[inode]`, scanning every process's fds.
fn owner_comm(inode: u64) -> Option<String> {
    holders(&format!("socket:[{inode}]"), None, true, None)
        .into_iter()
        .next()
        .map(|(_, _, comm)| comm)
}

/// The process at the other end of a pipe `want` held by `not` with access `mode`: of
/// the other holders of the other end (`/proc/PID/fdinfo` flags: a parent that handed
/// its end to `not` holds the same end), one that is not the parent of another (a
/// shell keeps the end it gave its child: the child is the one using it).
fn other_end(want: &str, not: i32, mode: Option<u32>) -> Option<(i32, String)> {
    let all = holders(want, Some(not), false, mode);
    let parents: Vec<i32> = all.iter().map(|&(_, ppid, _)| ppid).collect();
    all.iter()
        .find(|(pid, ..)| !parents.contains(pid))
        .or(all.first())
        .map(|(pid, _, comm)| (*pid, comm.clone()))
}

/// The access mode (`O_RDONLY`, `O_WRONLY`, `O_RDWR`) of `pid`'s descriptor `fd`.
fn access_mode(pid: i32, fd: i32) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
    u32::from_str_radix(flags, 8)
        .ok()
        .map(|f| f & libc::O_ACCMODE as u32)
}

/// The processes (other than `not`) with a descriptor linking to `want` — opened with
/// another access mode than `not_mode`, when given: pid, parent pid and comm, scanning
/// every process's fds; only the first when `first`.
fn holders(
    want: &str,
    not: Option<i32>,
    first: bool,
    not_mode: Option<u32>,
) -> Vec<(i32, i32, String)> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if Some(pid) == not {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want)
                && not_mode.is_none_or(|m| {
                    let n = fd.file_name().to_str().and_then(|n| n.parse().ok());
                    n.and_then(|n| access_mode(pid, n)) != Some(m)
                })
        });
        if !holds {
            continue;
        }
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        let ppid = super::pyfind::ppid(pid).unwrap_or(0);
        out.push((pid, ppid, comm.trim_end().to_string()));
        if first {
            break;
        }
    }
    out
}

/// The host's own interface addresses.
fn host_addrs() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family tells its real type.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()));
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::from(a.sin6_addr.s6_addr));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split() {
        let (ip, port) = split_addr("127.0.0.1:5432").expect("v4");
        assert!(ip.is_loopback() && port == 5432);
        let (ip, port) = split_addr("[::1]:80").expect("v6");
        assert!(ip.is_loopback() && port == 80);
        assert_eq!(split_addr("nonsense"), None);
    }

    #[test]
    fn listening_lines_are_found_by_port_and_state() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n   1: 0100007F:C350 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n";
        assert_eq!(listening_inode(t, 5432, "0A"), Some(111));
        assert_eq!(listening_inode(t, 50000, "0A"), None);
        assert_eq!(listening_inode(t, 5432, "07"), None);
    }

    #[test]
    fn a_local_listener_is_named_by_its_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let mut r = Resource {
            kind: ResourceKind::SocketTcp,
            name: format!("127.0.0.1:{port}"),
            local: Some(c.local_addr().expect("local").to_string()),
            peer: Some(format!("127.0.0.1:{port}")),
            pid: std::process::id() as i32,
            service: None,
            peer_local: None,
        };
        let mut n = NetPeer::default();
        n.new_round();
        n.enrich(r.pid, 0, &mut r);
        let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
        assert_eq!(r.service, Some(format!("{}:{port}", comm.trim_end())));
        assert_eq!(r.peer_local, Some(true));
        let mut far = Resource {
            peer: Some("192.0.2.1:443".into()),
            service: None,
            ..r.clone()
        };
        n.enrich(far.pid, 0, &mut far);
        assert_eq!((far.peer_local, far.service), (Some(false), None));
    }
}
