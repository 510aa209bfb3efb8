//! `TaskWatcher`: counts the processes a command starts, cheaply, for baseline runs.
//!
//! One dummy software event per CPU on the suspended child (`inherit`, `task = 1`,
//! `enable_on_exec`) takes no samples; the kernel only writes FORK/EXIT records into
//! small rings. A FORK record whose `pid != ppid` is a new process (threads share their
//! parent's pid). The count includes the target itself. If the kernel dropped records
//! (PERF_RECORD_LOST) the count is unknown and `finish` says `None` rather than guess.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc;
use std::thread::JoinHandle;

use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType};
use perf_event_open_sys::bindings as b;

use super::sys::{self, OwnedRecord, Ring};
use crate::error::Error;

/// Counts processes started by a launched command.
#[derive(Debug)]
pub struct TaskWatcher {
    stop: Option<mpsc::Sender<()>>,
    /// Written (closed) to wake the thread from poll at once.
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<Option<u64>>>,
}

const RING_BYTES: usize = 64 * 1024;

impl TaskWatcher {
    /// Open the counting events on the suspended child `pid`.
    pub fn attach(pid: i32) -> Result<TaskWatcher, Error> {
        let mut rings = Vec::new();
        let mut info: Option<RecordParseInfo> = None;
        for cpu in sys::online_cpus() {
            let mut attr = sys::new_attr(b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_DUMMY as u64);
            attr.sample_type = sys::SAMPLE_TID | sys::SAMPLE_TIME;
            attr.set_disabled(1);
            attr.set_inherit(1);
            attr.set_enable_on_exec(1);
            attr.set_task(1);
            // Only side-band task records are wanted: user scope is enough, and is what
            // an unprivileged user may open (perf_event_paranoid = 2).
            attr.set_exclude_kernel(1);
            attr.set_exclude_hv(1);
            attr.set_sample_id_all(1);
            attr.__bindgen_anon_1.sample_period = 1;
            let fd = sys::open(&mut attr, pid, cpu, -1).map_err(|e| {
                if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
                    Error::Permission {
                        what: "perf_event_open (counting the target's processes)".into(),
                        why: e.to_string(),
                        fix: "sudo sysctl kernel.perf_event_paranoid=1".into(),
                    }
                } else {
                    Error::Tool(format!("perf_event_open(dummy) on cpu {cpu}: {e}"))
                }
            })?;
            info = info.or_else(|| sys::parse_info(&attr));
            let ring = Ring::map(fd, RING_BYTES)
                .map_err(|(e, _)| Error::Tool(format!("mmap task ring on cpu {cpu}: {e}")))?;
            rings.push(ring);
        }
        let info =
            info.ok_or_else(|| Error::Tool("cannot derive the perf record layout".into()))?;
        let (tx, rx) = mpsc::channel::<()>();
        let (wake_r, wake_w) = crate::target::launch::pipe()?;
        let thread = std::thread::Builder::new()
            .name("profmap-task-watch".into())
            .spawn(move || watch_loop(rings, info, rx, wake_r))
            .map_err(|e| Error::Tool(format!("cannot start the task watcher thread: {e}")))?;
        Ok(TaskWatcher {
            stop: Some(tx),
            wake: Some(wake_w),
            thread: Some(thread),
        })
    }

    /// Processes started, the target included; `None` when records were lost.
    pub fn finish(mut self) -> Option<u64> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        drop(self.wake.take()); // EOF on the pipe: poll returns now
        self.thread.take()?.join().ok().flatten()
    }
}

impl Drop for TaskWatcher {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn watch_loop(
    mut rings: Vec<Ring>,
    info: RecordParseInfo,
    stop: mpsc::Receiver<()>,
    wake: OwnedFd,
) -> Option<u64> {
    let mut processes = 1u64;
    let mut lost = false;
    let mut buf: Vec<OwnedRecord> = Vec::new();
    let mut hung = vec![false; rings.len()];
    loop {
        let stopping = !matches!(stop.try_recv(), Err(mpsc::TryRecvError::Empty));
        if stopping {
            for r in &rings {
                sys::disable(r.fd());
            }
        }
        for ring in &mut rings {
            buf.clear();
            ring.drain(&mut buf);
            for rec in &buf {
                let raw = RawEventRecord::new(
                    RecordType(rec.record_type),
                    rec.misc,
                    RawData::Single(&rec.body),
                    info,
                );
                match raw.parse() {
                    Ok(EventRecord::Fork(f)) if f.pid != f.ppid => processes += 1,
                    Ok(EventRecord::Lost(_)) => lost = true,
                    _ => {}
                }
            }
        }
        if stopping {
            break;
        }
        // Wake for new records, or at once when `finish` writes to the wake pipe. Rings
        // whose tasks have all exited report POLLHUP for good: stop polling those.
        let mut fds: Vec<libc::pollfd> = rings
            .iter()
            .enumerate()
            .filter(|(i, _)| !hung[*i])
            .map(|(_, r)| pollfd(r.fd().as_raw_fd()))
            .collect();
        fds.push(pollfd(wake.as_raw_fd()));
        // The rings are small: wake often enough that they never fill.
        // SAFETY: fds is a valid array of pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
        let mut k = 0;
        for h in hung.iter_mut() {
            if !*h {
                *h = fds[k].revents & libc::POLLHUP != 0;
                k += 1;
            }
        }
    }
    (!lost).then_some(processes)
}
