//! The thin layer over `perf_event_open(2)`: building attributes, opening one event per
//! CPU, and reading records out of the mmap'd ring buffers.
//!
//! Invariants:
//! - Every event we open carries `sample_id_all` and `PERF_SAMPLE_IDENTIFIER`, so the
//!   event id sits at a fixed place in every record (first u64 of a sample, last u64 of
//!   any other record). Several events may share one ring (`PERF_EVENT_IOC_SET_OUTPUT`);
//!   the id tells which attribute, hence which parse layout, a record belongs to.
//! - A ring is `1 + 2^n` pages. We copy each record out (handling wrap-around), then
//!   advance `data_tail` with release ordering so the kernel may reuse the space.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
use perf_event_open_sys as sys;
use sys::bindings::perf_event_attr;

pub(crate) const SAMPLE_IP: u64 = sys::bindings::PERF_SAMPLE_IP as u64;
pub(crate) const SAMPLE_TID: u64 = sys::bindings::PERF_SAMPLE_TID as u64;
pub(crate) const SAMPLE_TIME: u64 = sys::bindings::PERF_SAMPLE_TIME as u64;
pub(crate) const SAMPLE_CPU: u64 = sys::bindings::PERF_SAMPLE_CPU as u64;
pub(crate) const SAMPLE_PERIOD: u64 = sys::bindings::PERF_SAMPLE_PERIOD as u64;
pub(crate) const SAMPLE_CALLCHAIN: u64 = sys::bindings::PERF_SAMPLE_CALLCHAIN as u64;
pub(crate) const SAMPLE_REGS_USER: u64 = sys::bindings::PERF_SAMPLE_REGS_USER as u64;
pub(crate) const SAMPLE_STACK_USER: u64 = sys::bindings::PERF_SAMPLE_STACK_USER as u64;
pub(crate) const SAMPLE_RAW: u64 = sys::bindings::PERF_SAMPLE_RAW as u64;
pub(crate) const SAMPLE_IDENTIFIER: u64 = sys::bindings::PERF_SAMPLE_IDENTIFIER as u64;

/// x86_64 `perf_regs.h`: BP, SP, IP — all a frame-pointer or CFI unwinder needs.
pub(crate) const REG_BP: u64 = 6;
pub(crate) const REG_SP: u64 = 7;
pub(crate) const REG_IP: u64 = 8;
pub(crate) const USER_REGS_MASK: u64 = (1 << REG_BP) | (1 << REG_SP) | (1 << REG_IP);
/// The syscall argument registers (x86_64 ABI: DI, SI, DX, R10, R8 are arguments 1–5).
pub(crate) const REG_DX: u64 = 3;
pub(crate) const REG_SI: u64 = 4;
pub(crate) const REG_DI: u64 = 5;
pub(crate) const REG_R8: u64 = 16;
pub(crate) const REG_R10: u64 = 18;
/// The switch-out event's user registers: the unwinder's plus the blocked syscall's
/// first five arguments (the user registers saved at syscall entry), 40 bytes more per
/// switch sample. The on-CPU event keeps [`USER_REGS_MASK`].
pub(crate) const SWITCH_REGS_MASK: u64 =
    USER_REGS_MASK | (1 << REG_DI) | (1 << REG_SI) | (1 << REG_DX) | (1 << REG_R10) | (1 << REG_R8);

/// The kernel's largest accepted `sample_stack_user` (u16 record size limit, 8-aligned).
pub(crate) const MAX_STACK_BYTES: u32 = 65528;

/// A zeroed attribute with its size set.
pub(crate) fn new_attr(type_: u32, config: u64) -> perf_event_attr {
    // SAFETY: perf_event_attr is plain data; all-zero is its documented default.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = type_;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = config;
    attr
}

/// Open one event. Returns the errno on failure.
pub(crate) fn open(
    attr: &mut perf_event_attr,
    pid: i32,
    cpu: i32,
    group_fd: i32,
) -> Result<OwnedFd, std::io::Error> {
    let flags = sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong;
    // SAFETY: attr is a valid, initialized perf_event_attr.
    let fd = unsafe { sys::perf_event_open(attr, pid, cpu, group_fd, flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel-assigned id of an event (what `PERF_SAMPLE_IDENTIFIER` reports).
pub(crate) fn event_id(fd: &OwnedFd) -> Option<u64> {
    let mut id = 0u64;
    // SAFETY: ID writes one u64 through the pointer.
    let rc = unsafe { sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    (rc == 0).then_some(id)
}

/// Route `fd`'s records into the ring of `target`.
pub(crate) fn set_output(fd: &OwnedFd, target: &OwnedFd) -> Result<(), std::io::Error> {
    // SAFETY: both are perf event descriptors we own.
    let rc = unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub(crate) fn disable(fd: &OwnedFd) {
    // SAFETY: plain ioctl on a descriptor we own.
    unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
}

/// The parse layout of records produced by `attr`, for `linux-perf-event-reader`.
pub(crate) fn parse_info(attr: &perf_event_attr) -> Option<RecordParseInfo> {
    let size = (attr.size as usize).min(std::mem::size_of::<perf_event_attr>());
    // SAFETY: we view the attribute's own bytes, within its size.
    let bytes =
        unsafe { std::slice::from_raw_parts((attr as *const perf_event_attr).cast::<u8>(), size) };
    let (parsed, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(bytes).ok()?;
    Some(RecordParseInfo::new(&parsed, Endianness::LittleEndian))
}

/// Online CPUs, from `/sys/devices/system/cpu/online` ("0-3,5").
pub(crate) fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut it = part.splitn(2, '-');
        let a = it.next().and_then(|x| x.parse::<i32>().ok());
        let b = it.next().and_then(|x| x.parse::<i32>().ok());
        match (a, b) {
            (Some(a), Some(b)) => out.extend(a..=b),
            (Some(a), None) => out.push(a),
            _ => {}
        }
    }
    if out.is_empty() {
        // SAFETY: sysconf is always safe to call.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        out.extend(0..n.max(1) as i32);
    }
    out
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf is always safe to call.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// One record copied out of a ring: header fields and body bytes.
#[derive(Debug)]
pub(crate) struct OwnedRecord {
    pub record_type: u32,
    pub misc: u16,
    pub body: Vec<u8>,
}

/// An mmap'd perf ring buffer.
#[derive(Debug)]
pub(crate) struct Ring {
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    // Keeps the descriptor alive as long as the mapping.
    _fd: OwnedFd,
}

// SAFETY: the mapping is owned by this struct and only touched through &mut self.
unsafe impl Send for Ring {}

impl Ring {
    /// Map `data_bytes` (a power of two number of pages) of ring for `fd`.
    /// On failure the descriptor is handed back so the caller can retry smaller.
    pub(crate) fn map(fd: OwnedFd, data_bytes: usize) -> Result<Ring, (std::io::Error, OwnedFd)> {
        let page = page_size();
        let map_len = page + data_bytes;
        // SAFETY: mapping a perf event fd as documented; checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err((std::io::Error::last_os_error(), fd));
        }
        Ok(Ring {
            base: base.cast(),
            map_len,
            data_offset: page,
            data_size: data_bytes,
            _fd: fd,
        })
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self._fd
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        let page = self.base.cast::<sys::bindings::perf_event_mmap_page>();
        // SAFETY: the first page is the control page; data_head and data_tail are
        // naturally aligned u64 fields the kernel and we share.
        unsafe {
            (
                AtomicU64::from_ptr(&raw mut (*page).data_head),
                AtomicU64::from_ptr(&raw mut (*page).data_tail),
            )
        }
    }

    /// Copy every available record into `out`; returns how many.
    pub(crate) fn drain(&mut self, out: &mut Vec<OwnedRecord>) -> usize {
        let (head_a, tail_a) = self.head_tail();
        let head = head_a.load(Ordering::Acquire);
        let mut tail = tail_a.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let size = self.data_size as u64;
        // SAFETY: data area lies within the mapping.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
        let mut n = 0;
        while tail + 8 <= head {
            let mut hdr = [0u8; 8];
            copy_wrapped(data, (tail % size) as usize, &mut hdr);
            let record_type = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let misc = u16::from_le_bytes([hdr[4], hdr[5]]);
            let rsize = u16::from_le_bytes([hdr[6], hdr[7]]) as u64;
            if rsize < 8 || tail + rsize > head {
                break;
            }
            let mut body = vec![0u8; rsize as usize - 8];
            copy_wrapped(data, ((tail + 8) % size) as usize, &mut body);
            out.push(OwnedRecord {
                record_type,
                misc,
                body,
            });
            tail += rsize;
            n += 1;
        }
        tail_a.store(tail, Ordering::Release);
        n
    }
}

fn copy_wrapped(data: &[u8], start: usize, out: &mut [u8]) {
    let first = (data.len() - start).min(out.len());
    out[..first].copy_from_slice(&data[start..start + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what we mapped.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

/// The event id carried by a record (see the module invariants).
pub(crate) fn record_id(rec: &OwnedRecord) -> Option<u64> {
    let b = &rec.body;
    if b.len() < 8 {
        return None;
    }
    let bytes = if rec.record_type == sys::bindings::PERF_RECORD_SAMPLE {
        &b[..8]
    } else {
        &b[b.len() - 8..]
    };
    let mut a = [0u8; 8];
    a.copy_from_slice(bytes);
    Some(u64::from_le_bytes(a))
}

/// Read an integer sysctl-like file.
pub(crate) fn read_int(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub use crate::measure::monotonic_ns;

/// The attributes of a tracepoint recorded on every hit of the tree (inherited, enabled
/// at exec) with its thread, time (CLOCK_MONOTONIC) and raw data: no stack.
pub(crate) fn tracepoint_attr(id: u64) -> perf_event_attr {
    let mut attr = new_attr(sys::bindings::PERF_TYPE_TRACEPOINT, id);
    attr.sample_type = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_RAW;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// Wait until a ring has data or `timeout_ms` passed. When a ring signals POLLHUP (all
/// its tasks exited) poll returns at once from then on: sleep the timeout instead of
/// spinning.
pub(crate) fn wait_readable(rings: &[Ring], timeout_ms: i32) {
    let mut fds: Vec<libc::pollfd> = rings
        .iter()
        .map(|r| libc::pollfd {
            fd: r.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: fds is a valid array of pollfd.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if fds.is_empty() || fds.iter().any(|f| f.revents & libc::POLLHUP != 0) {
        std::thread::sleep(std::time::Duration::from_millis(timeout_ms.max(0) as u64));
    }
}
