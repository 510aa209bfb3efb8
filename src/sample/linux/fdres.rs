//! Descriptor → resource, at first sight: what a blocked syscall's first argument names
//! when it is a descriptor of a live process of the tree.
//!
//! The drain thread calls [`Resolver::resolve`] for each switch-out sample of a thread
//! going to sleep (not a preemption), with the argument register DI. Which syscall it
//! belongs to is only known once the kernel stack is symbolized (`sample::waiton`), so
//! the look-up is speculative: any value below [`MAX_FD`] is tried as a descriptor,
//! and a resource whose syscall does not take a descriptor first is dropped then.
//! It must happen during the run: short-lived connections and processes are gone by
//! its end. The look-up is made as the record is drained from the ring (the processor's
//! `prefetch`, one drain round — ~10 ms — after the switch), not when it is handled
//! after the 20–30 ms sort slack; a descriptor closed before that is missed, one
//! closed and reused is named after its new use, and one whose process has exited
//! since keeps what it was last seen as.
//!
//! # How
//!
//! `readlink /proc/PID/fd/N` gives a path (a file, or a device under `/dev/`),
//! `socket:[INODE]`, `pipe:[INODE]` or `anon_inode:[eventfd]`-like names. A socket's
//! addresses come from the process's `/proc/PID/net/{tcp,tcp6,udp,udp6,unix}` by inode
//! (NOTES-waits: parsing these costs about what sock_diag does for TCP); a Unix
//! socket's peer comes from sock_diag (`netpeer`, `unixdiag`). Results are cached per (pid, fd); the
//! link is read again at most once per drain round, and a changed link (the fd was
//! reused) makes a new resource. Each round may read at most [`BUDGET_PER_ROUND`]
//! links or tables; look-ups past it are skipped and counted.
//!
//! Sockets seen moving data for the first time (`sockio`) are resolved at once with
//! [`Resolver::resolve_now`], from a budget of their own ([`FIRST_SIGHT_PER_ROUND`]),
//! so that waits cannot starve them. A socket's peer is named as a service of this host
//! when it is one (`netpeer`), for waits and traffic alike.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::netpeer::NetPeer;
use crate::profile::{CAPTURED_OUTPUT, Resource, ResourceKind};

/// Larger first arguments are not descriptors (the kernel's default `nr_open`).
pub(crate) const MAX_FD: u64 = 1 << 20;
/// Links and tables read per drain round (~10 ms): a few hundred µs at most.
pub(crate) const BUDGET_PER_ROUND: u32 = 128;
/// Look-ups of sockets at their first traffic per drain round.
pub(crate) const FIRST_SIGHT_PER_ROUND: u32 = 256;

#[derive(Debug)]
struct Seen {
    link: Option<String>,
    resource: Option<u32>,
    round: u64,
    /// The round in which this entry was last described, and the rounds until an
    /// unconnected Unix socket is looked at again (doubling from 1 to
    /// [`REDESCRIBE_MAX_ROUNDS`]): a ping-pong waits on its socket ~100k times a second.
    described: u64,
    gap: u64,
}

/// The longest wait, in rounds (~10 ms each), before an unconnected Unix socket is
/// described again.
const REDESCRIBE_MAX_ROUNDS: u64 = 64;

/// The per-run cache of resolved descriptors and the resources found.
#[derive(Debug, Default)]
pub(crate) struct Resolver {
    cache: HashMap<(i32, i32), Seen>,
    ids: HashMap<Resource, u32>,
    resources: Vec<Resource>,
    round: u64,
    budget: u32,
    first_budget: u32,
    /// Spending from `first_budget` (inside `resolve_now`).
    first_sight: bool,
    peers: NetPeer,
    /// Look-ups skipped for want of budget.
    pub(crate) skipped: u64,
    /// The look-up in progress described a socket without its tables (no budget left).
    short_of_budget: bool,
    /// Unix sockets described while unconnected, looked at again at new rounds.
    pending: Vec<Pending>,
}

/// A resource interned as an unconnected Unix socket: a client's socket seen before the
/// server accepted (its peer, still in the listener's queue, is invisible to
/// sock_diag). Every wait and traffic row that named it is named by the peer once it
/// is connected: the resource is described again in place.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u32,
    inode: u64,
    /// The round of the next look, and the rounds after that (doubling).
    due: u64,
    gap: u64,
}

/// Looks at unconnected Unix sockets per round (two sock_diag queries each).
const PENDING_PER_ROUND: usize = 16;

impl Resolver {
    /// A new drain round: the budget is refilled and cached links may be re-read.
    pub(crate) fn new_round(&mut self) {
        self.round += 1;
        self.budget = BUDGET_PER_ROUND;
        self.first_budget = FIRST_SIGHT_PER_ROUND;
        self.peers.new_round();
        self.recheck_pending();
    }

    /// Look again at the unconnected Unix sockets due this round; one connected since is
    /// described anew under its id. One still unconnected after a look at the longest
    /// gap (~1.3 s in all) is left as it is.
    fn recheck_pending(&mut self) {
        let round = self.round;
        let mut looks = PENDING_PER_ROUND;
        let mut i = 0;
        while i < self.pending.len() && looks > 0 {
            let p = self.pending[i];
            let Some(old) = self.resources.get(p.id as usize) else {
                self.pending.swap_remove(i);
                continue;
            };
            if p.due > round {
                i += 1;
                continue;
            }
            looks -= 1;
            let mut r = old.clone();
            self.peers.enrich(r.pid, p.inode, &mut r);
            if !unconnected_unix(&r) {
                self.pending.swap_remove(i);
                self.redescribe(p.id, r);
            } else if p.gap >= REDESCRIBE_MAX_ROUNDS {
                self.pending.swap_remove(i);
            } else {
                let gap = p.gap * 2;
                self.pending[i] = Pending {
                    due: round + gap,
                    gap,
                    ..p
                };
                i += 1;
            }
        }
    }

    /// Resource `id` is `r` now. An equal resource interned already keeps its id (the
    /// two are one row once the waits are attached: `waiton::attach_waits`).
    fn redescribe(&mut self, id: u32, r: Resource) {
        let Some(slot) = self.resources.get_mut(id as usize) else {
            return;
        };
        let old = std::mem::replace(slot, r.clone());
        if self.ids.get(&old) == Some(&id) {
            self.ids.remove(&old);
        }
        self.ids.entry(r).or_insert(id);
    }

    /// The resource of descriptor `fd` of `pid` now, at a socket's first traffic: the
    /// link is read again even if it was this round (the fd may have been reused).
    pub(crate) fn resolve_now(&mut self, pid: i32, fd: i32) -> Option<u32> {
        let fd = u64::try_from(fd).ok()?;
        self.first_sight = true;
        if let Some(s) = self.cache.get_mut(&(pid, fd as i32)) {
            s.round = 0;
        }
        let r = self.resolve(pid, fd);
        self.first_sight = false;
        r
    }

    /// The resource `arg0` names as a descriptor of `pid`, the link read again even if
    /// it was this round (the descriptor may have been closed and reused since).
    pub(crate) fn resolve_fresh(&mut self, pid: i32, arg0: u64) -> Option<u32> {
        if arg0 >= MAX_FD {
            return None;
        }
        if let Some(s) = self.cache.get_mut(&(pid, arg0 as i32)) {
            s.round = 0;
        }
        self.resolve(pid, arg0)
    }

    /// Whether resource `i` was resolved as a socket with its addresses.
    pub(crate) fn is_socket(&self, i: u32) -> bool {
        self.resources.get(i as usize).is_some_and(|r| {
            matches!(
                r.kind,
                ResourceKind::SocketTcp | ResourceKind::SocketUdp | ResourceKind::SocketUnix
            )
        })
    }

    /// The peer address of resource `i`, when it has one.
    pub(crate) fn peer_of(&self, i: u32) -> Option<&str> {
        self.resources.get(i as usize)?.peer.as_deref()
    }

    /// A TCP socket known by its addresses only (its descriptor was gone before the
    /// look-up), named by its peer, with the peer's service when local.
    pub(crate) fn intern_tcp(&mut self, pid: i32, local: Option<String>, peer: String) -> u32 {
        let mut r = Resource {
            kind: ResourceKind::SocketTcp,
            name: peer.clone(),
            local,
            peer: Some(peer),
            pid,
            service: None,
            peer_local: None,
        };
        self.peers.enrich(pid, 0, &mut r);
        self.intern(r)
    }

    /// Services left unnamed for want of budget.
    pub(crate) fn services_skipped(&self) -> u64 {
        self.peers.skipped
    }

    /// The resource `arg0` names as a descriptor of process `pid`, if any.
    pub(crate) fn resolve(&mut self, pid: i32, arg0: u64) -> Option<u32> {
        if arg0 >= MAX_FD || pid <= 0 {
            return None;
        }
        let fd = arg0 as i32;
        let round = self.round;
        if let Some(s) = self.cache.get(&(pid, fd))
            && s.round == round
        {
            return s.resource;
        }
        if !self.spend() {
            // What it was when last read; only a descriptor never read is a wait that
            // names nothing (a ping-pong re-reads the same one ~100k times a second).
            let cached = self.cache.get(&(pid, fd)).map(|s| s.resource);
            if cached.is_none() {
                self.skipped += 1;
            }
            return cached.flatten();
        }
        let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let unconnected = |r: Option<u32>| {
            r.and_then(|i| self.resources.get(i as usize))
                .is_some_and(unconnected_unix)
        };
        // (same link, due for another look, gap) of the cached entry.
        let cached = self.cache.get(&(pid, fd)).map(|s| {
            let again = link.is_some() && round >= s.described + s.gap && unconnected(s.resource);
            (s.link == link, again, s.gap)
        });
        if let Some((same, again, _)) = cached
            && (same || link.is_none())
            && !again
            && let Some(s) = self.cache.get_mut(&(pid, fd))
        {
            // Unchanged, or unreadable now (the process exited): what it was. A Unix
            // socket seen before its `connect` or its server's `accept` (no path, no
            // peer) is looked at again, less and less often.
            s.round = round;
            return s.resource;
        }
        // A known Unix socket stays one: its look-up again skips the TCP and UDP
        // tables (reading /proc/PID/net/tcp walks the kernel's whole established
        // hash: ~1 ms here, and it took 69% of the drain thread on a ping-pong).
        let (unix, gap) = match cached {
            Some((same, true, gap)) => (same, (gap * 2).clamp(1, REDESCRIBE_MAX_ROUNDS)),
            _ => (false, 1),
        };
        self.short_of_budget = false;
        let resource = match &link {
            Some(l) => self.describe(pid, fd, l, unix).map(|r| self.intern(r)),
            None => None,
        };
        if self.short_of_budget {
            // A socket named by its inode only for want of budget: not remembered, so a
            // later look-up with budget names its peer (seen in CI: a Unix client's
            // socket stayed `socket:[…]` for the whole run after one such look-up).
            return resource;
        }
        self.cache.insert(
            (pid, fd),
            Seen {
                link,
                resource,
                round,
                described: round,
                gap,
            },
        );
        resource
    }

    /// The resources found so far, indexed as `resolve` returned them (the crash spool
    /// sends them as they grow; a row may change once, see `redescribe`).
    pub(crate) fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// Every resource found, indexed as `resolve` returned them.
    pub(crate) fn into_resources(self) -> Vec<Resource> {
        self.resources
    }

    fn spend(&mut self) -> bool {
        let budget = if self.first_sight {
            &mut self.first_budget
        } else {
            &mut self.budget
        };
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        true
    }

    fn intern(&mut self, r: Resource) -> u32 {
        if let Some(&id) = self.ids.get(&r) {
            return id;
        }
        let id = self.resources.len() as u32;
        if unconnected_unix(&r)
            && let Some(inode) = bracketed(&r.name, "socket:")
        {
            self.pending.push(Pending {
                id,
                inode,
                due: self.round + 1,
                gap: 1,
            });
        }
        self.resources.push(r.clone());
        self.ids.insert(r, id);
        id
    }

    /// What `link` (descriptor `fd` of `pid`) is; `unix`: a socket known to be a Unix
    /// one (only that table is read).
    fn describe(&mut self, pid: i32, fd: i32, link: &str, unix: bool) -> Option<Resource> {
        let mut r = describe_link(pid, fd, link);
        if let Some(inode) = bracketed(link, "pipe:") {
            // Named by the process at its other end: "pipe to gzip (pid 7)". The other
            // end is profmap itself for the target's stdout and stderr, which it reads
            // to log them: that is said, as it would be a terminal or a file unprofiled.
            if let Some((other_pid, other)) = self.peers.pipe_peer(pid, fd, inode) {
                r.name = if u32::try_from(other_pid).is_ok_and(|p| p == std::process::id()) {
                    format!("{CAPTURED_OUTPUT}{other}, the profiler")
                } else {
                    format!("pipe to {other}")
                };
                r.peer = Some(other);
            }
            return Some(r);
        }
        if let Some(inode) = bracketed(link, "socket:") {
            let found = if self.spend() {
                find_socket(pid, inode, unix)
            } else {
                self.skipped += 1;
                self.short_of_budget = true;
                None
            };
            if let Some(mut s) = found {
                self.peers.enrich(pid, inode, &mut s);
                r = s;
            }
        }
        Some(r)
    }
}

/// The resource a descriptor link names, without looking at socket tables. Anonymous
/// inodes (`anon_inode:[eventpoll]`) all read alike: the descriptor tells them apart.
pub(crate) fn describe_link(pid: i32, fd: i32, link: &str) -> Resource {
    let kind = if link.starts_with("/dev/") {
        ResourceKind::Device
    } else if link.starts_with('/') {
        ResourceKind::File
    } else if link.starts_with("pipe:") {
        ResourceKind::Pipe
    } else if link == "anon_inode:[eventfd]" {
        ResourceKind::Eventfd
    } else if link == "anon_inode:[eventpoll]" {
        ResourceKind::Epoll
    } else {
        ResourceKind::Other
    };
    let name = if link.starts_with("anon_inode:") {
        format!("{link} fd {fd}")
    } else {
        link.to_string()
    };
    Resource {
        kind,
        name,
        local: None,
        peer: None,
        pid,
        service: None,
        peer_local: None,
    }
}

/// A Unix socket with neither path nor peer: not connected, or its peer not visible yet.
fn unconnected_unix(r: &Resource) -> bool {
    r.kind == ResourceKind::SocketUnix
        && r.peer.is_none()
        && r.local.is_none()
        && r.peer_local.is_none()
}

/// `INODE` of `PREFIX[INODE]`.
fn bracketed(link: &str, prefix: &str) -> Option<u64> {
    link.strip_prefix(prefix)?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The network namespace's socket tables other than the Unix one.
const INET_TABLES: [(&str, ResourceKind); 4] = [
    ("tcp", ResourceKind::SocketTcp),
    ("tcp6", ResourceKind::SocketTcp),
    ("udp", ResourceKind::SocketUdp),
    ("udp6", ResourceKind::SocketUdp),
];

/// The socket with this inode in the process's network namespace tables (`unix`: in the
/// Unix table only).
fn find_socket(pid: i32, inode: u64, unix: bool) -> Option<Resource> {
    let inet: &[_] = if unix { &[] } else { &INET_TABLES };
    for &(table, kind) in inet {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        if let Some((local, peer)) = inet_entry(&text, inode) {
            return Some(inet_resource(pid, kind, local, peer));
        }
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).ok()?;
    let path = unix_entry(&text, inode)?;
    Some(Resource {
        kind: ResourceKind::SocketUnix,
        name: path.clone().unwrap_or_else(|| format!("socket:[{inode}]")),
        local: path,
        peer: None,
        pid,
        service: None,
        peer_local: None,
    })
}

/// Named by its peer; a listening or unconnected socket by its own address.
fn inet_resource(pid: i32, kind: ResourceKind, local: String, peer: Option<String>) -> Resource {
    Resource {
        kind,
        name: peer.clone().unwrap_or_else(|| local.clone()),
        local: Some(local),
        peer,
        pid,
        service: None,
        peer_local: None,
    }
}

/// (local, peer) of the `/proc/net/{tcp,udp}[6]` line with this inode; the peer is
/// None when it is all zeros.
pub(crate) fn inet_entry(table: &str, inode: u64) -> Option<(String, Option<String>)> {
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(9).and_then(|i| i.parse::<u64>().ok()) != Some(inode) {
            continue;
        }
        let local = inet_addr(f.get(1)?)?;
        let peer = inet_addr(f.get(2)?)?;
        let unset =
            peer.ends_with(":0") && (peer.starts_with("0.0.0.0") || peer.starts_with("[::]"));
        return Some((local, (!unset).then_some(peer)));
    }
    None
}

/// `0100007F:1538` → `127.0.0.1:5432`; 32 hex digits → `[::1]:port`. The kernel prints
/// each 32-bit word of the address in host (little-endian) order.
pub(crate) fn inet_addr(s: &str) -> Option<String> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Option<Vec<[u8; 4]>> = (0..addr.len() / 8)
        .map(|i| {
            let w = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
            Some(w.to_le_bytes())
        })
        .collect();
    let bytes: Vec<u8> = words?.concat();
    match bytes.len() {
        4 => Some(format!(
            "{}:{port}",
            Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
        )),
        16 => {
            let a: [u8; 16] = bytes.try_into().ok()?;
            Some(match Ipv6Addr::from(a).to_canonical() {
                std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
                v6 => format!("[{v6}]:{port}"),
            })
        }
        _ => None,
    }
}

/// The path of the `/proc/net/unix` line with this inode (None: unnamed), or None
/// overall when the inode is not there.
pub(crate) fn unix_entry(table: &str, inode: u64) -> Option<Option<String>> {
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(6).and_then(|i| i.parse::<u64>().ok()) == Some(inode) {
            return Some(f.get(7).map(|p| p.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inet_addresses_are_decoded() {
        assert_eq!(
            inet_addr("0100007F:1538").as_deref(),
            Some("127.0.0.1:5432")
        );
        assert_eq!(
            inet_addr("00000000000000000000000001000000:0050").as_deref(),
            Some("[::1]:80")
        );
        assert_eq!(
            inet_addr("0000000000000000FFFF00000100007F:0050").as_deref(),
            Some("127.0.0.1:80")
        );
        assert_eq!(inet_addr("zz:1"), None);
    }

    #[test]
    fn tcp_and_unix_lines_are_found_by_inode() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n   1: 0100007F:C350 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n";
        assert_eq!(inet_entry(tcp, 111), Some(("127.0.0.1:5432".into(), None)));
        assert_eq!(
            inet_entry(tcp, 222),
            Some(("127.0.0.1:50000".into(), Some("127.0.0.1:5432".into())))
        );
        assert_eq!(inet_entry(tcp, 333), None);
        let unix = "Num       RefCount Protocol Flags    Type St Inode Path\n0000: 00000002 00000000 00010000 0001 01 444 /run/x.sock\n0000: 00000003 00000000 00000000 0001 03 555\n";
        assert_eq!(unix_entry(unix, 444), Some(Some("/run/x.sock".into())));
        assert_eq!(unix_entry(unix, 555), Some(None));
        assert_eq!(unix_entry(unix, 666), None);
    }

    #[test]
    fn links_give_kinds() {
        let k = |l| describe_link(1, 3, l).kind;
        assert_eq!(k("/tmp/a"), ResourceKind::File);
        assert_eq!(k("/dev/null"), ResourceKind::Device);
        assert_eq!(k("pipe:[12]"), ResourceKind::Pipe);
        assert_eq!(k("anon_inode:[eventfd]"), ResourceKind::Eventfd);
        assert_eq!(k("anon_inode:[eventpoll]"), ResourceKind::Epoll);
        assert_eq!(k("socket:[9]"), ResourceKind::Other);
        assert_eq!(bracketed("socket:[9]", "socket:"), Some(9));
        let epoll = describe_link(1, 5, "anon_inode:[eventpoll]").name;
        assert_eq!(epoll, "anon_inode:[eventpoll] fd 5");
        assert_eq!(describe_link(1, 5, "pipe:[7]").name, "pipe:[7]");
    }

    #[test]
    fn own_descriptors_resolve_and_a_reused_fd_is_a_new_resource() {
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        let dir = tempfile::tempdir().expect("tempdir");
        // One high descriptor number, given to one file then to another: tests open
        // files on other threads of this process, so a freed low number may be taken
        // before it is reused here.
        let place = |path: &std::path::Path, fd: i32| {
            let f = std::fs::File::create(path).expect("create");
            // SAFETY: dup2 of a descriptor this test owns onto a number no other test uses.
            let got = unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&f), fd) };
            assert_eq!(got, fd, "dup2");
        };
        let fd = 917;
        let a = dir.path().join("a");
        place(&a, fd);
        let mut r = Resolver::default();
        r.new_round();
        let first = r.resolve(pid, fd as u64).expect("resolved");
        assert_eq!(r.resolve(pid, fd as u64), Some(first));
        let b = dir.path().join("b");
        place(&b, fd); // dup2 closes the first file's descriptor: the number is reused
        r.new_round();
        let second = r.resolve(pid, fd as u64).expect("resolved");
        // SAFETY: closes the descriptor `place` made.
        unsafe { libc::close(fd) };
        assert_ne!(first, second);
        assert_eq!(r.resolve(pid, MAX_FD), None);
        let res = r.into_resources();
        assert_eq!(res[first as usize].name, a.to_string_lossy());
        assert_eq!(res[second as usize].name, b.to_string_lossy());
        assert_eq!(res[second as usize].kind, ResourceKind::File);
    }

    #[test]
    fn a_unix_socket_seen_before_its_connect_is_named_once_connected() {
        // Seen in CI: a client's socket looked up before it was connected (or before the
        // server accepted) stayed `socket:[…]` for the whole run.
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        // SAFETY: a plain socket(2) call; its descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        assert!(raw >= 0);
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let sock = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut r = Resolver::default();
        r.new_round();
        let before = r.resolve(pid, raw as u64).expect("a socket");
        let addr = {
            // SAFETY: sockaddr_un is plain data; zeroed is a valid value.
            let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            a.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, b) in a
                .sun_path
                .iter_mut()
                .zip(path.to_str().expect("utf-8").bytes())
            {
                *d = b as libc::c_char;
            }
            a
        };
        // SAFETY: connecting our own socket to a sockaddr_un that lives across the call.
        let rc = unsafe {
            libc::connect(
                sock.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "connect");
        // Until the server accepts, the client's peer is a socket sock_diag cannot see:
        // still unnamed, and looked at again later.
        r.new_round();
        assert_eq!(r.resolve(pid, raw as u64), Some(before));
        let _server_side = listener.accept().expect("accept");
        // Looked at again within REDESCRIBE_MAX_ROUNDS rounds: the resource the earlier
        // waits named is described again in place, so they name the server's path too.
        let named = |r: &Resolver| r.resources[before as usize].name == path.to_str().unwrap();
        let mut rounds = 0;
        while !named(&r) && rounds <= REDESCRIBE_MAX_ROUNDS {
            r.new_round();
            rounds += 1;
        }
        assert!(named(&r), "{:?}", r.resources);
        assert_eq!(r.resources[before as usize].peer_local, Some(true));
        assert!(r.pending.is_empty());
        // Later looks at the descriptor name the same, connected resource.
        r.new_round();
        let after = r.resolve(pid, raw as u64).expect("a socket");
        let res = r.into_resources();
        assert_eq!(res[after as usize].name, path.to_str().expect("utf-8"));
    }

    #[test]
    fn a_unix_socket_never_connected_is_left_after_the_longest_gap() {
        // SAFETY: a plain socket(2) call; its descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        assert!(raw >= 0);
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let _sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        let mut r = Resolver::default();
        r.new_round();
        // SAFETY: getpid cannot fail.
        let id = r
            .resolve(unsafe { libc::getpid() }, raw as u64)
            .expect("a socket");
        assert_eq!(r.pending.len(), 1);
        // Looks at gaps of 1, 2, 4 … 64 rounds: 127 rounds, then it is dropped.
        for _ in 0..2 * REDESCRIBE_MAX_ROUNDS {
            r.new_round();
        }
        assert!(r.pending.is_empty());
        assert!(r.resources[id as usize].name.starts_with("socket:["));
    }

    #[test]
    fn a_socketpair_is_connected_and_not_looked_at_again() {
        // A socketpair has a peer and no path: it used to count as unconnected and was
        // described again every round, reading the TCP tables each time.
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&a) as u64;
        let mut r = Resolver::default();
        r.new_round();
        let first = r.resolve(pid, fd).expect("a socket");
        assert_eq!(r.resources[first as usize].kind, ResourceKind::SocketUnix);
        assert_eq!(r.resources[first as usize].peer_local, Some(true));
        let described = r.cache[&(pid, fd as i32)].described;
        for _ in 0..5 {
            r.new_round();
            assert_eq!(r.resolve(pid, fd), Some(first));
        }
        assert_eq!(r.cache[&(pid, fd as i32)].described, described);
    }

    #[test]
    fn the_budget_is_counted() {
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        let mut r = Resolver::default();
        r.new_round();
        for fd in 0..u64::from(BUDGET_PER_ROUND) + 5 {
            r.resolve(pid, 10_000 + fd);
        }
        assert_eq!(r.skipped, 5);
    }
}
