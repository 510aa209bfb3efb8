//! Socket traffic and page-cache reads of the tree: handling the records of the side
//! tracepoints (see `sidetp`) as the evidence thread (`sidecar`) copies them out, about a
//! millisecond after the call on an idle machine (tens of ms on a loaded one).
//!
//! # Events (per CPU, inherited, `enable_on_exec`, rings of their own)
//!
//! - `sock:sock_send_length`, `sock:sock_recv_length` (fields `sk`, `ret`, `flags`
//!   from the format file): every event, IDENTIFIER|TID|TIME|RAW and the user registers
//!   DI, SI, DX (the syscall's fd, buffer and length), no callchain. Calls with
//!   `ret > 0` and without MSG_PEEK go to `sockio`.
//! - `sock:inet_sock_set_state` (`skaddr`, `newstate`, ports and addresses): SYN_SENT
//!   from a task of the tree means the tree opened that connection; CLOSE ends it; the
//!   addresses name a TCP socket whose descriptor was gone before its look-up.
//! - `filemap:mm_filemap_get_pages` (`i_ino`, `s_dev`, `index`, `last_index`): to
//!   `fileio`.
//!
//! # At first sight
//!
//! A new socket's descriptor is resolved at once (`Resolver::resolve_now`); a TCP
//! socket whose descriptor is gone, or names a newer socket, by then is named from
//! its state changes' addresses. Its first send and first receive have up to 16 bytes
//! of the caller's buffer read with `process_vm_readv` (SI; for sendmsg/recvmsg SI is
//! a msghdr, tried second) and recognised (`sample::protocol`). The buffer may hold
//! other data by then, or the process may have exited: a documented race, counted
//! with the reads that failed. A new file's path is found by matching (dev, ino) with
//! the stat of the process's `/proc/PID/fd/*`, at most [`FILE_LOOKS_PER_ROUND`] scans
//! per round; a file closed before that has no path. Unix sockets closed before their
//! look-up name no resource (no tracepoint carries their address).

use std::collections::HashMap;

use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType};

use super::fdres::Resolver;
use super::fileio::{FileIo, PagesAsked};
use super::peek::{FileLook, find_file, first_protocol};
use super::sidetp::{Field, SideRole, int, tcp_addrs, uint};
use super::sockio::{SockCall, SockIo};
use super::sys::{OwnedRecord, REG_DI, REG_SI};
use crate::sample::RawProfile;

/// Scans of a process's descriptors for a file's path, per drain round.
pub(crate) const FILE_LOOKS_PER_ROUND: u32 = 32;
/// Look-ups tried per file before it is left without a path.
const FILE_LOOK_TRIES: u8 = 3;
const MSG_PEEK: i64 = 2;
const TCP_SYN_SENT: i64 = 2;
const TCP_CLOSE: i64 = 7;
const PEEK_BYTES: usize = 16;

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
    /// File rows without a path yet, and the look-ups tried for each.
    unfound: HashMap<usize, u8>,
    file_looks: u32,
    peeks: u64,
    peek_failed: u64,
    peek_unknown: u64,
    pub(crate) events: u64,
    pub(crate) parse_errors: u64,
    /// Records the kernel dropped from the side rings.
    pub(crate) lost: u64,
}

impl Evidence {
    pub(crate) fn new_round(&mut self) {
        self.file_looks = FILE_LOOKS_PER_ROUND;
        self.retry_unfound();
    }

    /// Files whose look-ups were skipped or failed are tried again at each round, with
    /// what is left of its budget, while tries remain: a file read in one burst has no
    /// later read to retry at, and it may still be open. Files tried fewest times go
    /// first, the newest first among them: a busy start-up (a shell script reading
    /// hundreds of files it closes at once) must not spend the budget of the files read
    /// after it on files already failed.
    fn retry_unfound(&mut self) {
        let mut rows: Vec<(usize, u8)> = self
            .unfound
            .iter()
            .filter(|&(_, &t)| t < FILE_LOOK_TRIES)
            .map(|(&r, &t)| (r, t))
            .collect();
        rows.sort_unstable_by_key(|&(r, t)| (t, std::cmp::Reverse(r)));
        for (row, tries) in rows {
            if self.file_looks == 0 {
                return;
            }
            if let Some((pid, dev, ino)) = self.fileio.key(row) {
                self.look(row, tries, pid, dev, ino);
            }
        }
    }

    /// Look a file row's path up among its process's descriptors. A look costs one of
    /// the round's budget, unless the process has exited (a failed open of its /proc
    /// entry): then no later look can find it, and it is not tried again.
    fn look(&mut self, row: usize, tries: u8, pid: i32, dev: u32, ino: u64) {
        match find_file(pid, dev, ino) {
            FileLook::Found(path, size) => {
                self.file_looks -= 1;
                self.fileio.set_file(row, Some(path), Some(size));
                self.unfound.remove(&row);
            }
            FileLook::NotOpen => {
                self.file_looks -= 1;
                self.unfound.insert(row, tries + 1);
            }
            FileLook::Gone => {
                self.unfound.insert(row, FILE_LOOK_TRIES);
            }
        }
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
                match int(&data, f.newstate) {
                    Some(TCP_SYN_SENT) => self.sockio.connecting(sk),
                    Some(TCP_CLOSE) => self.sockio.closed(sk),
                    _ => {}
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
            // The descriptor may be gone, or name a newer socket, by the look-up: a TCP
            // connection the tree opened is named from its own SYN then.
            if let Some((local, peer)) = self.addrs.get(&c.sk)
                && !r.is_some_and(|i| fds.is_socket(i) && fds.peer_of(i) == Some(peer.as_str()))
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

    /// Count the event; look a new file's path up, and again at its next reads (the
    /// file may have been closed before the first look, and opened again since).
    fn pages(&mut self, e: PagesAsked) {
        let (row, new) = self.fileio.asked(e);
        let tries = match self.unfound.get(&row) {
            Some(&t) => t,
            None if new => 0,
            None => return,
        };
        if tries >= FILE_LOOK_TRIES || self.file_looks == 0 {
            self.unfound.insert(row, tries);
            return;
        }
        self.look(row, tries, e.pid, e.dev, e.ino);
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
        if rec.files && !self.unfound.is_empty() {
            w.push(format!(
                "{} files read through the page cache have no path (closed before they could \
                 be looked up, or look-ups past {} per 10 ms): their reads are counted by \
                 device and inode only",
                self.unfound.len(),
                FILE_LOOKS_PER_ROUND
            ));
        }
        if services_skipped > 0 {
            w.push(format!(
                "{services_skipped} local socket peers were not named (at most {} process \
                 scans per drain round): their service is unknown",
                super::netpeer::SCANS_PER_ROUND
            ));
        }
        raw.lost_records += self.lost;
        if self.lost > 0 {
            w.push(format!(
                "{} socket or page-cache records were lost (their rings overflowed): round \
                 trips, calls and pages are lower bounds",
                self.lost
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn asked(pid: i32, dev: u32, ino: u64) -> PagesAsked {
        PagesAsked {
            pid,
            tid: pid,
            dev,
            ino,
            index: 0,
            last_index: 0,
        }
    }

    #[test]
    fn a_file_read_after_a_burst_of_closed_ones_is_looked_up_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data");
        std::fs::write(&path, vec![1u8; 8192]).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let m = f.metadata().expect("stat");
        let dev = (libc::major(m.dev()) << 20) | libc::minor(m.dev());
        let me = std::process::id() as i32;
        let mut ev = Evidence::default();
        // 200 files of this process not open any more (inodes no file has), read while
        // the round's budget was spent: each waits for a retry.
        for ino in 0..200 {
            ev.pages(asked(me, dev, u64::MAX - ino));
        }
        // A process that has exited: its files cost no look and are not retried.
        for ino in 0..100 {
            ev.pages(asked(i32::MAX, dev, ino));
        }
        ev.pages(asked(me, dev, m.ino()));
        assert_eq!(ev.unfound.len(), 301);
        ev.new_round();
        let rows = ev.fileio.finish();
        let found: Vec<_> = rows.iter().filter(|r| r.path.is_some()).collect();
        assert_eq!(found.len(), 1, "{rows:?}");
        assert_eq!(found[0].path.as_deref(), path.to_str());
        // The rest of the round's budget went to the closed files, none to the gone ones.
        assert_eq!(ev.file_looks, 0);
        let gone_final = ev
            .unfound
            .iter()
            .filter(|&(&r, &t)| (200..300).contains(&r) && t == FILE_LOOK_TRIES)
            .count();
        assert_eq!(gone_final, 100);
    }
}
