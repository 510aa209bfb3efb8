//! Socket traffic and page-cache reads of the tree: opening their tracepoints and
//! handling their records as soon as the drain thread copies them out (before the sort
//! slack: a short connection's descriptor and buffers are gone 20 ms later).
//!
//! # Events (per CPU, inherited, `enable_on_exec`, into the main ring)
//!
//! - `sock:sock_send_length`, `sock:sock_recv_length` (fields `sk`, `ret`, `flags`
//!   from the format file): every event, IDENTIFIER|TID|TIME|RAW and the user registers
//!   DI, SI, DX (the syscall's fd, buffer and length), no callchain (~0.4 µs/event).
//!   Calls with `ret > 0` and without MSG_PEEK go to `sockio`.
//! - `sock:inet_sock_set_state` (`skaddr`, `newstate`): SYN_SENT from a task of the
//!   tree means the tree opened that connection.
//! - `filemap:mm_filemap_get_pages` (`i_ino`, `s_dev`, `index`, `last_index`): to
//!   `fileio`.
//!
//! # At first sight
//!
//! A new socket's descriptor is resolved at once (`Resolver::resolve_now`). Its first
//! send and first receive have up to 16 bytes of the caller's buffer read with
//! `process_vm_readv` (SI; for sendmsg/recvmsg SI is a msghdr, tried second) and
//! recognised (`sample::protocol`). The buffer may already hold other data by then (the
//! drain thread runs up to 10 ms later): a documented race, counted with the reads that
//! failed. A new file's path is found by matching (dev, ino) with the stat of the
//! process's `/proc/PID/fd/*`, at most [`FILE_LOOKS_PER_ROUND`] scans per round.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::MetadataExt;

use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType};
use perf_event_open_sys::bindings as b;

use super::fdres::Resolver;
use super::fileio::{FileIo, PagesAsked};
use super::sockio::{SockCall, SockIo};
use super::sys::{self, OwnedRecord, REG_DI, REG_DX, REG_SI};
use super::tracefs;
use crate::profile::Protocol;
use crate::sample::RawProfile;
use crate::sample::protocol::{Direction, recognise};

/// Scans of a process's descriptors for a file's path, per drain round.
pub(crate) const FILE_LOOKS_PER_ROUND: u32 = 32;
const MSG_PEEK: i64 = 2;
const TCP_SYN_SENT: i64 = 2;
const PEEK_BYTES: usize = 16;

/// (offset, size) of a field in a tracepoint's raw record.
type Field = (usize, usize);

/// What a side event's records mean, with their fields' places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideRole {
    SockIo {
        dir: Direction,
        sk: Field,
        ret: Field,
        flags: Field,
    },
    SockState(StateFields),
    PagesAsked {
        ino: Field,
        dev: Field,
        index: Field,
        last: Field,
    },
}

/// The fields of `inet_sock_set_state` we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateFields {
    skaddr: Field,
    newstate: Field,
    family: Field,
    sport: Field,
    dport: Field,
    saddr: Field,
    daddr: Field,
    saddr_v6: Field,
    daddr_v6: Field,
}

/// A tracepoint to open: its id, role, and the user registers it samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SideSource {
    pub name: &'static str,
    id: u64,
    pub role: SideRole,
    regs: u64,
}

/// The side tracepoints found in tracefs; the error names a missing one and why.
pub(crate) fn sources() -> Vec<Result<SideSource, String>> {
    let sock_regs = (1 << REG_DI) | (1 << REG_SI) | (1 << REG_DX);
    let io = |name: &'static str, dir| {
        let tp = tracepoint("sock", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::SockIo {
            dir,
            sk: f("sk")?,
            ret: f("ret")?,
            flags: f("flags")?,
        };
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: sock_regs,
        })
    };
    let state = || {
        let name = "inet_sock_set_state";
        let tp = tracepoint("sock", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::SockState(StateFields {
            skaddr: f("skaddr")?,
            newstate: f("newstate")?,
            family: f("family")?,
            sport: f("sport")?,
            dport: f("dport")?,
            saddr: f("saddr")?,
            daddr: f("daddr")?,
            saddr_v6: f("saddr_v6")?,
            daddr_v6: f("daddr_v6")?,
        });
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: 0,
        })
    };
    let pages = || {
        let name = "mm_filemap_get_pages";
        let tp = tracepoint("filemap", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::PagesAsked {
            ino: f("i_ino")?,
            dev: f("s_dev")?,
            index: f("index")?,
            last: f("last_index")?,
        };
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: 0,
        })
    };
    vec![
        io("sock_send_length", Direction::Send),
        io("sock_recv_length", Direction::Recv),
        state(),
        pages(),
    ]
}

fn tracepoint(group: &str, name: &str) -> Result<tracefs::Tracepoint, String> {
    tracefs::tracepoint(group, name).ok_or_else(|| format!("{group}:{name} not in tracefs"))
}

fn field(tp: &tracefs::Tracepoint, tp_name: &str, name: &str) -> Result<Field, String> {
    tp.field(name)
        .ok_or_else(|| format!("{tp_name}'s format has no {name} field"))
}

/// The perf attributes of a side event: every hit, no stacks.
pub(crate) fn attr(src: &SideSource) -> b::perf_event_attr {
    let mut attr = sys::new_attr(b::PERF_TYPE_TRACEPOINT, src.id);
    attr.sample_type =
        sys::SAMPLE_IDENTIFIER | sys::SAMPLE_TID | sys::SAMPLE_TIME | sys::SAMPLE_RAW;
    if src.regs != 0 {
        attr.sample_type |= sys::SAMPLE_REGS_USER;
        attr.sample_regs_user = src.regs;
    }
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// Which side events were opened on every CPU (set by the sampler).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Recorded {
    pub sockets: bool,
    pub files: bool,
}

/// The drain thread's socket and file state.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    sockio: SockIo,
    /// The (local, peer) addresses of TCP sockets by `sk`, from their state changes in
    /// the tree: names a connection whose descriptor was closed before its look-up.
    addrs: HashMap<u64, (Option<String>, String)>,
    fileio: FileIo,
    /// File rows whose look-up was skipped for want of budget.
    unlooked: HashSet<usize>,
    file_looks: u32,
    peeks: u64,
    peek_failed: u64,
    peek_unknown: u64,
    files_skipped: u64,
    pub(crate) events: u64,
    pub(crate) parse_errors: u64,
}

impl Evidence {
    pub(crate) fn new_round(&mut self) {
        self.file_looks = FILE_LOOKS_PER_ROUND;
    }

    /// Handle one side record (records in time order).
    pub(crate) fn handle(
        &mut self,
        rec: &OwnedRecord,
        role: SideRole,
        info: &RecordParseInfo,
        fds: &mut Resolver,
    ) {
        let raw = RawEventRecord::new(
            RecordType(rec.record_type),
            rec.misc,
            RawData::Single(&rec.body),
            *info,
        );
        let Ok(EventRecord::Sample(s)) = raw.parse() else {
            return;
        };
        let (Some(pid), Some(tid), Some(time), Some(data)) = (s.pid, s.tid, s.timestamp, &s.raw)
        else {
            self.parse_errors += 1;
            return;
        };
        self.events += 1;
        let data = data.as_slice();
        let get = |f: Field| uint(&data, f);
        match role {
            SideRole::SockIo {
                dir,
                sk,
                ret,
                flags,
            } => {
                let (Some(sk), Some(ret), Some(flags)) = (get(sk), int(&data, ret), get(flags))
                else {
                    self.parse_errors += 1;
                    return;
                };
                if ret <= 0 || flags as i64 & MSG_PEEK != 0 {
                    return;
                }
                let reg = |r| s.user_regs.as_ref().and_then(|x| x.get(r));
                let fd = reg(REG_DI)
                    .filter(|&d| d < super::fdres::MAX_FD)
                    .map_or(-1, |d| d as i32);
                let call = SockCall {
                    pid,
                    tid,
                    fd,
                    sk,
                    dir,
                    bytes: ret as u64,
                    time,
                };
                self.sock_call(call, reg(REG_SI), fds);
            }
            SideRole::SockState(f) => {
                let Some(sk) = get(f.skaddr) else { return };
                if int(&data, f.newstate) == Some(TCP_SYN_SENT) {
                    self.sockio.connecting(sk);
                }
                if let Some(a) = tcp_addrs(&data, &f) {
                    self.addrs.insert(sk, a);
                }
            }
            SideRole::PagesAsked {
                ino,
                dev,
                index,
                last,
            } => {
                let (Some(ino), Some(dev), Some(index), Some(last_index)) =
                    (get(ino), get(dev), get(index), get(last))
                else {
                    self.parse_errors += 1;
                    return;
                };
                let e = PagesAsked {
                    pid,
                    tid,
                    dev: dev as u32,
                    ino,
                    index,
                    last_index,
                };
                self.pages(e);
            }
        }
    }

    fn sock_call(&mut self, c: SockCall, buf: Option<u64>, fds: &mut Resolver) {
        let seen = self.sockio.call(c);
        if seen.new {
            let mut r = fds.resolve_now(c.pid, c.fd);
            if !r.is_some_and(|i| fds.is_socket(i))
                && let Some((local, peer)) = self.addrs.get(&c.sk)
            {
                r = Some(fds.intern_tcp(c.pid, local.clone(), peer.clone()));
            }
            self.sockio.set_resource(seen.row, r);
        }
        if !seen.first_in_direction || self.sockio.has_protocol(seen.row) {
            return;
        }
        let Some(buf) = buf else { return };
        self.peeks += 1;
        let len = (c.bytes as usize).min(PEEK_BYTES);
        match first_protocol(c.pid, buf, len, c.dir) {
            Ok(Some(p)) => self.sockio.set_protocol(seen.row, p),
            Ok(None) => self.peek_unknown += 1,
            Err(()) => self.peek_failed += 1,
        }
    }

    fn pages(&mut self, e: PagesAsked) {
        let (row, new) = self.fileio.asked(e);
        if !new && !self.unlooked.contains(&row) {
            return;
        }
        if self.file_looks == 0 {
            if new {
                self.files_skipped += 1;
            }
            self.unlooked.insert(row);
            return;
        }
        self.file_looks -= 1;
        self.unlooked.remove(&row);
        let found = find_file(e.pid, e.dev, e.ino);
        let (path, size) = found.map_or((None, None), |(p, s)| (Some(p), Some(s)));
        self.fileio.set_file(row, path, size);
    }

    /// Put the tables (times relative to `t0`) and their warnings into `raw`.
    pub(crate) fn finish(
        self,
        t0: u64,
        rec: Recorded,
        services_skipped: u64,
        raw: &mut RawProfile,
    ) {
        raw.sockets_recorded = rec.sockets;
        raw.file_reads_recorded = rec.files;
        if rec.sockets {
            raw.sockets = self.sockio.finish(t0);
        }
        if rec.files {
            raw.file_reads = self.fileio.finish();
        }
        let w = &mut raw.warnings;
        if self.peek_failed + self.peek_unknown > 0 {
            w.push(format!(
                "protocol: of {} first payloads of sockets, {} could not be read (the buffer \
                 was gone or not a buffer) and {} matched no known protocol (HTTP, HTTP/2, \
                 TLS, PostgreSQL, MySQL, Redis, MongoDB): those sockets' protocol is unknown",
                self.peeks, self.peek_failed, self.peek_unknown
            ));
        }
        if self.files_skipped > 0 {
            w.push(format!(
                "{} files read through the page cache were not looked up (at most {} per \
                 drain round): their path is unknown",
                self.files_skipped, FILE_LOOKS_PER_ROUND
            ));
        }
        if services_skipped > 0 {
            w.push(format!(
                "{services_skipped} local socket peers were not named (at most {} process \
                 scans per drain round): their service is unknown",
                super::netpeer::SCANS_PER_ROUND
            ));
        }
        if self.parse_errors > 0 {
            w.push(format!(
                "{} socket or page-cache records could not be parsed",
                self.parse_errors
            ));
        }
    }
}

/// (local, peer) of a state change's socket; None while the peer port is unset. The
/// local port is unset at SYN_SENT (chosen just after).
fn tcp_addrs(data: &[u8], f: &StateFields) -> Option<(Option<String>, String)> {
    let bytes = |(off, size): Field| data.get(off..off.checked_add(size)?);
    let (sport, dport) = (uint(data, f.sport)? as u16, uint(data, f.dport)? as u16);
    if dport == 0 {
        return None;
    }
    let ip = |v4: Field, v6: Field| -> Option<IpAddr> {
        if uint(data, f.family)? == libc::AF_INET6 as u64 {
            let a: [u8; 16] = bytes(v6)?.try_into().ok()?;
            Some(Ipv6Addr::from(a).to_canonical())
        } else {
            let a: [u8; 4] = bytes(v4)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(a)))
        }
    };
    let peer = SocketAddr::new(ip(f.daddr, f.daddr_v6)?, dport).to_string();
    let local = (sport != 0)
        .then(|| ip(f.saddr, f.saddr_v6))
        .flatten()
        .map(|a| SocketAddr::new(a, sport).to_string());
    Some((local, peer))
}

/// An unsigned little-endian field of 1, 2, 4 or 8 bytes.
fn uint(data: &[u8], (off, size): Field) -> Option<u64> {
    let b = data.get(off..off.checked_add(size)?)?;
    let mut v = [0u8; 8];
    if size > 8 {
        return None;
    }
    v[..size].copy_from_slice(b);
    Some(u64::from_le_bytes(v))
}

/// A signed little-endian field of 4 or 8 bytes.
fn int(data: &[u8], f: Field) -> Option<i64> {
    let v = uint(data, f)?;
    match f.1 {
        4 => Some(i64::from(v as u32 as i32)),
        8 => Some(v as i64),
        _ => None,
    }
}

/// Up to `n` bytes of process `pid`'s memory at `addr`.
fn read_mem(pid: i32, addr: u64, n: usize) -> Option<Vec<u8>> {
    if addr == 0 || n == 0 {
        return None;
    }
    let mut buf = vec![0u8; n];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: n,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: n,
    };
    // SAFETY: `local` points at our own buffer of n bytes; the remote range is only
    // read by the kernel, which checks it.
    let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let got = usize::try_from(got).ok().filter(|&g| g > 0)?;
    buf.truncate(got);
    Some(buf)
}

/// The protocol of the first `len` bytes at `buf` (a plain buffer, else a msghdr's
/// first iovec); Err when nothing could be read.
fn first_protocol(pid: i32, buf: u64, len: usize, dir: Direction) -> Result<Option<Protocol>, ()> {
    let plain = read_mem(pid, buf, len);
    if let Some(p) = plain.as_deref().and_then(|b| recognise(b, dir)) {
        return Ok(Some(p));
    }
    let u64_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let via_msghdr = read_mem(pid, buf.wrapping_add(16), 16).and_then(|h| {
        let (iov, iovlen) = (u64_at(&h, 0)?, u64_at(&h, 8)?);
        if !(1..=1024).contains(&iovlen) {
            return None;
        }
        let v = read_mem(pid, iov, 16)?;
        let (base, blen) = (u64_at(&v, 0)?, u64_at(&v, 8)?);
        read_mem(pid, base, len.min(blen as usize))
    });
    match (plain, via_msghdr) {
        (_, Some(b)) if recognise(&b, dir).is_some() => Ok(recognise(&b, dir)),
        (None, None) => Err(()),
        _ => Ok(None),
    }
}

/// The path and size of the file (kernel device encoding `dev`, inode `ino`) among the
/// process's open descriptors.
fn find_file(pid: i32, dev: u32, ino: u64) -> Option<(String, u64)> {
    let want = libc::makedev(dev >> 20, dev & 0xf_ffff);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    for fd in fds.flatten() {
        let Ok(m) = std::fs::metadata(fd.path()) else {
            continue;
        };
        if m.dev() == want && m.ino() == ino && m.is_file() {
            let link = std::fs::read_link(fd.path()).ok()?;
            return Some((link.to_string_lossy().into_owned(), m.len()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_little_endian_and_signed() {
        let data = [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 0];
        assert_eq!(uint(&data, (0, 4)), Some(1));
        assert_eq!(int(&data, (4, 4)), Some(-1));
        assert_eq!(uint(&data, (8, 2)), Some(2));
        assert_eq!(uint(&data, (8, 4)), None);
        assert_eq!(int(&data, (8, 2)), None);
    }

    #[test]
    fn own_memory_and_msghdrs_are_read() {
        let pid = std::process::id() as i32;
        let msg = b"GET / HTTP/1.1\r\n".to_vec();
        let p = first_protocol(pid, msg.as_ptr() as u64, 16, Direction::Send);
        assert_eq!(p, Ok(Some(Protocol::Http)));
        let iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        // SAFETY: an all-zero msghdr is valid; only its iov fields are set.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = &iov as *const libc::iovec as *mut libc::iovec;
        hdr.msg_iovlen = 1;
        let p = first_protocol(pid, &hdr as *const _ as u64, 16, Direction::Send);
        assert_eq!(p, Ok(Some(Protocol::Http)));
        assert_eq!(first_protocol(pid, 8, 16, Direction::Send), Err(()));
        let ping = b"ping".to_vec();
        let p = first_protocol(pid, ping.as_ptr() as u64, 4, Direction::Send);
        assert_eq!(p, Ok(None));
    }

    #[test]
    fn an_open_file_is_found_by_device_and_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 5000]).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let m = f.metadata().expect("stat");
        let kdev = (libc::major(m.dev()) << 20) | libc::minor(m.dev());
        let pid = std::process::id() as i32;
        let got = find_file(pid, kdev, m.ino()).expect("found");
        assert_eq!(
            (got.0.as_str(), got.1),
            (path.to_str().expect("utf8"), 5000)
        );
        assert_eq!(find_file(pid, kdev, u64::MAX), None);
    }
}
