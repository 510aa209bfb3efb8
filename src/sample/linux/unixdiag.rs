//! The peer of a Unix socket, through sock_diag (`NETLINK_SOCK_DIAG`, `UNIX_DIAG` with
//! `UDIAG_SHOW_PEER | UDIAG_SHOW_NAME`): a connected client socket has no path of its
//! own, so its peer's inode is what names the server. About 100 lines over libc (no
//! netlink crate is available offline here); one request and one reply per look-up,
//! with a 100 ms receive timeout.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const UDIAG_SHOW_NAME: u32 = 1;
const UDIAG_SHOW_PEER: u32 = 4;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_PEER: u16 = 2;
const NLMSG_HDR: usize = 16;
const UNIX_DIAG_MSG: usize = 16;

/// What sock_diag says of one Unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct UnixPeer {
    /// The socket's own path (`@name` for an abstract one), when it has one.
    pub name: Option<String>,
    /// The inode of the socket at the other end, when connected.
    pub peer: Option<u32>,
}

/// Ask the kernel about the Unix socket with this inode (in our network namespace).
pub(crate) fn query(inode: u32) -> Option<UnixPeer> {
    let sock = open()?;
    let req = request(inode);
    // SAFETY: sending a plain byte buffer on a socket we own.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent != req.len() as isize {
        return None;
    }
    let mut buf = vec![0u8; 8192];
    // SAFETY: the buffer is valid for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let n = usize::try_from(n).ok()?;
    parse_reply(buf.get(..n)?)
}

fn open() -> Option<OwnedFd> {
    // SAFETY: plain socket call; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: setsockopt with a timeval of the right size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    Some(sock)
}

/// nlmsghdr + unix_diag_req for one inode, all states, its name and its peer.
fn request(inode: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDR + 24);
    m.extend_from_slice(&((NLMSG_HDR + 24) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    m.push(libc::AF_UNIX as u8);
    m.push(0); // protocol
    m.extend_from_slice(&0u16.to_ne_bytes()); // pad
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    m.extend_from_slice(&inode.to_ne_bytes());
    m.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_PEER).to_ne_bytes());
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // no cookie
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The first message of a reply: unix_diag_msg then its attributes.
fn parse_reply(b: &[u8]) -> Option<UnixPeer> {
    let len = u32_at(b, 0)? as usize;
    if u16_at(b, 4)? == NLMSG_ERROR || len < NLMSG_HDR + UNIX_DIAG_MSG {
        return None;
    }
    let msg = b.get(..len)?;
    let mut out = UnixPeer::default();
    let mut at = NLMSG_HDR + UNIX_DIAG_MSG;
    while at + 4 <= msg.len() {
        let alen = usize::from(u16_at(msg, at)?);
        let kind = u16_at(msg, at + 2)?;
        if alen < 4 {
            break;
        }
        let data = msg.get(at + 4..at + alen)?;
        match kind {
            UNIX_DIAG_NAME => out.name = unix_name(data),
            UNIX_DIAG_PEER => out.peer = u32_at(data, 0).filter(|&p| p != 0),
            _ => {}
        }
        at += alen.div_ceil(4) * 4;
    }
    Some(out)
}

/// A path, or `@name` for the abstract namespace (leading NUL).
fn unix_name(data: &[u8]) -> Option<String> {
    match data.split_first() {
        Some((0, rest)) => Some(format!("@{}", String::from_utf8_lossy(rest))),
        Some(_) => {
            let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
            Some(String::from_utf8_lossy(&data[..end]).into_owned())
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn inode_of(fd: i32) -> u32 {
        let m = std::fs::metadata(format!("/proc/self/fd/{fd}")).expect("stat");
        m.ino() as u32
    }

    #[test]
    fn a_connected_client_names_its_peer_and_the_peer_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let server = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let client = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        let (accepted, _) = server.accept().expect("accept");
        let c = query(inode_of(client.as_raw_fd())).expect("diag of the client");
        assert_eq!(c.name, None);
        assert_eq!(c.peer, Some(inode_of(accepted.as_raw_fd())));
        let s = query(inode_of(accepted.as_raw_fd())).expect("diag of the server end");
        assert_eq!(s.name.as_deref(), path.to_str());
        assert_eq!(query(0), None);
    }
}
