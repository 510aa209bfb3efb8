//! Turning the time-sorted record stream into a [`RawProfile`]: process and thread
//! bookkeeping, memory maps, unwinding, and forwarding switch records to the off-CPU
//! state machine (`offcpu`).
//!
//! # Process state
//!
//! Records arrive sorted by time across all per-CPU rings. A process's maps start empty
//! at exec (COMM record with the exec flag; the old image's are kept for the rest of the
//! execve call) and grow with MMAP2 records; a FORK record
//! with `pid != ppid` creates a process whose maps and unwinder are copies of its
//! parent's (the kernel sends no MMAP records for inherited mappings). A FORK with
//! `pid == ppid` is a new thread. Each user frame is resolved to (module, file offset)
//! against the maps valid at the sample's time, so later unmaps or exits cannot change
//! what a frame means.
//!
//! # Off-CPU intervals
//!
//! Switch samples, `PERF_RECORD_SWITCH` records, exits, `sched_waking` samples and
//! /proc looks are decoded here and forwarded to [`OffCpu`], which turns them into
//! off-CPU intervals (see `offcpu` for how); they become off-CPU samples in `finish`.
//! A switch sample of a thread going to sleep keeps its syscall's first argument (DI),
//! looked up at once as a descriptor of the process (`fdres`): the interval carries
//! both, and `sample::waiton` decides at symbolize time whether it was a descriptor.

use std::collections::HashMap;

use framehop::x86_64::CacheX86_64;
use linux_perf_event_reader::{
    CommonData, ContextSwitchRecord, EventRecord, RawData, RawEventRecord, RecordParseInfo,
    RecordType, TaskWasPreempted,
};
use perf_event_open_sys::bindings as b;

use super::fdres::Resolver;
use super::offcpu::{self, OffCpu};
use super::stackreuse::{self, Borrowed, KernelPart, StackReuse, StackSource};
use super::sys::{OwnedRecord, REG_BP, REG_DI, REG_IP, REG_SI, REG_SP};
use super::unwind::{self, ElfCache, ProcUnwinder};
use crate::profile::{SampleKind, Samples, ThreadSample, WaitState, Waker};
use crate::sample::{
    RawFrame, RawMapping, RawModule, RawProcess, RawProfile, RawStackNode, RawThread, RawWait,
};

/// What identifies a switch-out sample for the late stack read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwitchId {
    /// The stack-copy event (else the stack-less one).
    pub copy: bool,
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    pub pc: u64,
    pub sp: u64,
    /// The first two syscall arguments (the descriptor or futex word, and the next).
    pub args: (Option<u64>, Option<u64>),
}

/// What an event id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventRole {
    /// The on-CPU sampling event (also carries mmap/comm/task/switch records).
    OnCpu,
    /// The switch-out stack event; `prev_state` at this raw offset/size when known.
    SwitchOut { prev_state: Option<(usize, usize)> },
    /// The stack-less switch-out event (every switch-out; registers and kernel
    /// callchain only): its stack is lent by an earlier copied one (see `stackreuse`).
    SwitchLite { prev_state: Option<(usize, usize)> },
    /// `sched:sched_waking`: the wakee's `pid` field at this raw offset/size; the
    /// sample's own pid/tid is the waker, its (kernel) callchain the waker's stack.
    Waking { wakee_pid: (usize, usize) },
}

#[derive(Debug, Clone)]
struct Mapping {
    map: RawMapping,
    module: Option<u32>,
}

#[derive(Clone)]
struct Proc {
    ppid: Option<i32>,
    name: String,
    exe: Option<String>,
    awaiting_exe: bool,
    maps: Vec<Mapping>,
    /// The maps of the image an exec replaced. A thread preempted inside execve, after
    /// the new image's maps began, still has the old image's user registers: its leaf
    /// address is named from these (only when the new maps do not cover it).
    pre_exec_maps: Vec<Mapping>,
    unwinder: ProcUnwinder,
    fork_ns: Option<u64>,
    exit_ns: Option<u64>,
}

impl Proc {
    fn new(ppid: Option<i32>) -> Proc {
        Proc {
            ppid,
            name: String::new(),
            exe: None,
            awaiting_exe: false,
            maps: Vec::new(),
            pre_exec_maps: Vec::new(),
            unwinder: ProcUnwinder::new(),
            fork_ns: None,
            exit_ns: None,
        }
    }

    fn find(&self, addr: u64) -> Option<&Mapping> {
        find_in(&self.maps, addr).or_else(|| find_in(&self.pre_exec_maps, addr))
    }
}

/// The mapping of a sorted list that holds `addr`.
fn find_in(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.map.start <= addr);
    let m = maps.get(i.checked_sub(1)?)?;
    (addr < m.map.end).then_some(m)
}

impl Proc {}

#[derive(Debug)]
struct ThreadState {
    pid: i32,
    name: String,
    exited: bool,
}

/// The state machine fed by the drain thread.
pub(crate) struct Processor {
    /// Where a process mapping a `python*`/`libpython*` executable, or forked from
    /// one, is announced (to the Python sampler, see `python`), once per pid.
    python_hint: Option<(std::sync::mpsc::Sender<i32>, std::collections::HashSet<i32>)>,
    stack_bytes: u32,
    /// On-CPU weight: Some(ns) for a fixed nominal period, None to use the sample period.
    nominal_period_ns: Option<u64>,
    root_ppid: i32,
    elf: ElfCache,
    cache: CacheX86_64,
    procs: HashMap<i32, Proc>,
    threads: HashMap<i32, ThreadState>,
    modules: Vec<RawModule>,
    module_ids: HashMap<String, u32>,
    frames: Vec<RawFrame>,
    frame_ids: HashMap<RawFrame, u32>,
    stacks: Vec<RawStackNode>,
    stack_ids: HashMap<(Option<u32>, u32), u32>,
    /// On-CPU samples (absolute times); off-CPU intervals join them in `finish`.
    samples: Vec<ThreadSample>,
    offcpu: OffCpu,
    /// Names the descriptors blocked syscalls wait on (see `fdres`).
    fds: Resolver,
    /// First `struct pollfd`s read from the targets' memory this round, by (pid,
    /// address): an array on the heap is read at most once a round.
    pollfd_reads: HashMap<(i32, u64), Option<i32>>,
    /// The stack made of each thread's last full look, for looks that repeat it.
    last_look: HashMap<i32, (Option<u32>, Option<RawWait>)>,
    kernel_names: Vec<String>,
    kernel_name_ids: HashMap<String, u32>,
    lost: u64,
    /// Lost records of the stack-copy ring (stacks only: durations are elsewhere).
    lost_stacks: u64,
    /// Copied switch-out stacks by thread and call, lent to the stack-less ones.
    reuse: StackReuse,
    /// The same for preempted switch-outs, apart (see `switch_stack`).
    reuse_preempted: StackReuse,
    /// Copied switch-outs whose call had a stack to lend, and how many of those lent
    /// stacks were identical to the copy's own.
    reuse_checks: u64,
    reuse_agreed: u64,
    unwind_failures: u64,
    truncated: u64,
    parse_errors: u64,
    /// The time of the last main-ring record handled per CPU: where a loss began.
    last_time_by_cpu: HashMap<u32, u64>,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("processes", &self.procs.len())
            .field("samples", &self.samples.len())
            .finish_non_exhaustive()
    }
}

impl Processor {
    pub(crate) fn new(stack_bytes: u32, nominal_period_ns: Option<u64>, root_ppid: i32) -> Self {
        Processor {
            python_hint: None,
            stack_bytes,
            nominal_period_ns,
            root_ppid,
            elf: ElfCache::default(),
            cache: CacheX86_64::new(),
            procs: HashMap::new(),
            threads: HashMap::new(),
            modules: Vec::new(),
            module_ids: HashMap::new(),
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            samples: Vec::new(),
            offcpu: OffCpu::default(),
            fds: Resolver::default(),
            pollfd_reads: HashMap::new(),
            last_look: HashMap::new(),
            kernel_names: Vec::new(),
            kernel_name_ids: HashMap::new(),
            lost: 0,
            lost_stacks: 0,
            reuse: StackReuse::default(),
            reuse_preempted: StackReuse::default(),
            reuse_checks: 0,
            reuse_agreed: 0,
            unwind_failures: 0,
            truncated: 0,
            parse_errors: 0,
            last_time_by_cpu: HashMap::new(),
        }
    }

    /// As a switch-out record is drained (before the records are sorted, 20–30 ms
    /// before it is handled): its blocked call's first argument resolved as a
    /// descriptor now, while the process still lives and before the descriptor can be
    /// closed and reused. The link is read again (not taken from this round's cache):
    /// a connection closed and another opened on the same descriptor within a round
    /// are two resources. `handle` is given the result. Takes the switch-out's identity
    /// as `copies::Pending` read it (the record is not parsed again).
    pub(crate) fn prefetch(&mut self, id: Option<&SwitchId>) -> Option<u32> {
        // Every switch-out has a stack-less sample: the copied one would repeat it.
        let id = id.filter(|id| !id.copy)?;
        self.fds.resolve_fresh(id.pid, id.args.0?)
    }

    /// A switch-out sample's identity for pairing and late reads (see `copies`): whether
    /// it is the stack-copy event, its pid, tid, time and user PC and SP, and for a copy
    /// its stack bytes. `None` for any other record.
    pub(crate) fn switch_id(
        rec: &OwnedRecord,
        role: EventRole,
        info: &RecordParseInfo,
    ) -> Option<(SwitchId, Option<Borrowed>)> {
        let copy = match role {
            EventRole::SwitchOut { .. } => true,
            EventRole::SwitchLite { .. } => false,
            _ => return None,
        };
        let raw = RawEventRecord::new(
            RecordType(rec.record_type),
            rec.misc,
            RawData::Single(&rec.body),
            *info,
        );
        let Ok(EventRecord::Sample(s)) = raw.parse() else {
            return None;
        };
        let regs = s.user_regs.as_ref()?;
        let borrowed = if copy {
            s.user_stack.as_ref().map(|(data, dyn_size)| {
                let all = data.as_slice();
                Borrowed {
                    bytes: all[..(*dyn_size as usize).min(all.len())].to_vec(),
                    source: StackSource::Copied,
                    kernel: KernelPart::Addrs(split_callchain(&s).0),
                }
            })
        } else {
            None
        };
        let id = SwitchId {
            copy,
            pid: s.pid?,
            tid: s.tid?,
            time: s.timestamp?,
            pc: regs.get(REG_IP)?,
            sp: regs.get(REG_SP)?,
            args: (regs.get(REG_DI), regs.get(REG_SI)),
        };
        Some((id, borrowed))
    }

    /// The stack of a thread still blocked at switch-out `id` (see
    /// `blocked::read_while_blocked`): as many user stack bytes as a copy would have held,
    /// and the kernel stack's function names.
    pub(crate) fn read_late(&self, id: &SwitchId) -> Option<Borrowed> {
        let (bytes, names) = super::blocked::read_while_blocked(
            id.pid,
            id.tid,
            id.pc,
            id.sp,
            self.stack_bytes as usize,
        )?;
        Some(Borrowed {
            bytes,
            source: StackSource::Late,
            kernel: KernelPart::Named(names),
        })
    }

    /// Handle one record (records must come in time order).
    pub(crate) fn handle(
        &mut self,
        rec: &OwnedRecord,
        role: EventRole,
        info: &RecordParseInfo,
        resolved: Option<u32>,
        stack: Option<&Borrowed>,
    ) {
        let raw = RawEventRecord::new(
            RecordType(rec.record_type),
            rec.misc,
            RawData::Single(&rec.body),
            *info,
        );
        let common = raw.common_data().unwrap_or_default();
        let Ok(parsed) = raw.parse() else {
            self.parse_errors += 1;
            return;
        };
        let in_main_ring = !matches!(role, EventRole::SwitchOut { .. });
        if in_main_ring
            && !matches!(parsed, EventRecord::Lost(_))
            && let (Some(cpu), Some(t)) = (common.cpu, common.timestamp)
        {
            self.last_time_by_cpu.insert(cpu, t);
        }
        match parsed {
            EventRecord::Sample(s) => self.on_sample(&s, role, resolved, stack),
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                if c.is_execve {
                    let root_ppid = self.root_ppid;
                    let p = self
                        .procs
                        .entry(c.pid)
                        .or_insert_with(|| Proc::new(Some(root_ppid)));
                    p.pre_exec_maps = std::mem::take(&mut p.maps);
                    p.unwinder = ProcUnwinder::new();
                    p.awaiting_exe = true;
                    p.exe = None;
                }
                let p = self.procs.entry(c.pid).or_insert_with(|| Proc::new(None));
                if c.tid == c.pid || c.is_execve {
                    p.name = name.clone();
                }
                let t = self.threads.entry(c.tid).or_insert_with(|| ThreadState {
                    pid: c.pid,
                    name: String::new(),
                    exited: false,
                });
                t.pid = c.pid;
                t.name = name;
            }
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, path, true);
            }
            EventRecord::Mmap2(m) => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let exec = m.protection & libc::PROT_EXEC as u32 != 0;
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, path, exec);
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid {
                    let mut child = self
                        .procs
                        .get(&f.ppid)
                        .cloned()
                        .unwrap_or_else(|| Proc::new(None));
                    child.ppid = Some(f.ppid);
                    child.fork_ns = Some(f.timestamp).filter(|&t| t != 0).or(common.timestamp);
                    child.exit_ns = None;
                    child.awaiting_exe = false;
                    self.procs.insert(f.pid, child);
                    // A forked interpreter (a multiprocessing worker) maps nothing new.
                    if let Some((tx, told)) = &mut self.python_hint
                        && told.contains(&f.ppid)
                        && told.insert(f.pid)
                    {
                        let _ = tx.send(f.pid);
                    }
                }
                let name = self
                    .threads
                    .get(&f.ptid)
                    .map(|t| t.name.clone())
                    .unwrap_or_default();
                self.threads.insert(
                    f.tid,
                    ThreadState {
                        pid: f.pid,
                        name,
                        exited: false,
                    },
                );
            }
            EventRecord::Exit(e) => {
                if let Some(t) = self.threads.get_mut(&e.tid) {
                    t.exited = true;
                }
                self.reuse.forget(e.tid);
                self.reuse_preempted.forget(e.tid);
                if e.tid == e.pid
                    && let Some(p) = self.procs.get_mut(&e.pid)
                {
                    p.exit_ns = Some(e.timestamp).filter(|&t| t != 0).or(common.timestamp);
                }
                self.offcpu.exit(offcpu::Exit {
                    pid: e.pid,
                    ppid: e.ppid,
                    tid: e.tid,
                    time: Some(e.timestamp)
                        .filter(|&t| t != 0)
                        .or(common.timestamp)
                        .unwrap_or(0),
                });
            }
            EventRecord::Lost(l) if matches!(role, EventRole::SwitchOut { .. }) => {
                self.lost_stacks += l.count
            }
            EventRecord::Lost(l) => {
                self.lost += l.count;
                // The window of the loss: since the last record of that CPU's ring.
                if let Some(to) = common.timestamp {
                    let from = common
                        .cpu
                        .and_then(|c| self.last_time_by_cpu.get(&c).copied())
                        .unwrap_or(0);
                    self.offcpu.lost(from.min(to), to);
                }
            }
            EventRecord::ContextSwitch(cs) => self.on_switch(cs, &common),
            _ => {}
        }
    }

    fn on_mmap(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: String, exec: bool) {
        let end = start.saturating_add(len);
        let anon = is_anonymous_code(&path);
        let is_file = path.starts_with('/') && !anon;
        let module = if exec && !anon {
            Some(self.module_id(&path))
        } else {
            None
        };
        let elf = if exec && is_file {
            self.elf.get(&path)
        } else {
            None
        };
        if exec
            && is_file
            && let Some((tx, told)) = &mut self.python_hint
            && super::pyfind::is_python_path(&path)
            && told.insert(pid)
        {
            let _ = tx.send(pid);
        }
        let p = self.procs.entry(pid).or_insert_with(|| Proc::new(None));
        if p.awaiting_exe && is_file {
            p.exe = Some(path.clone());
            p.awaiting_exe = false;
        }
        // A new mapping replaces whatever it overlaps.
        let mut removed = Vec::new();
        p.maps.retain(|m| {
            let overlap = m.map.start < end && start < m.map.end;
            if overlap && m.map.executable {
                removed.push(m.map.start);
            }
            !overlap
        });
        for s in removed {
            unwind::remove_module(&mut p.unwinder, s);
        }
        if let Some(elf) = elf {
            unwind::add_module(
                &mut p.unwinder,
                unwind::make_module(&path, &elf, start, end, pgoff),
            );
        }
        let i = p.maps.partition_point(|m| m.map.start < start);
        p.maps.insert(
            i,
            Mapping {
                map: RawMapping {
                    start,
                    end,
                    pgoff,
                    path,
                    executable: exec,
                },
                module,
            },
        );
    }

    fn module_id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.module_ids.get(path) {
            return id;
        }
        let id = self.modules.len() as u32;
        self.modules.push(RawModule {
            path: path.to_string(),
        });
        self.module_ids.insert(path.to_string(), id);
        id
    }

    fn frame_id(&mut self, f: RawFrame) -> u32 {
        if let Some(&id) = self.frame_ids.get(&f) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(f);
        self.frame_ids.insert(f, id);
        id
    }

    fn stack_id(&mut self, parent: Option<u32>, frame: u32) -> u32 {
        if let Some(&id) = self.stack_ids.get(&(parent, frame)) {
            return id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(RawStackNode { parent, frame });
        self.stack_ids.insert((parent, frame), id);
        id
    }

    /// Unwind a sample and intern its stack; returns the leaf node.
    fn stack_of(&mut self, s: &linux_perf_event_reader::SampleRecord) -> Option<u32> {
        self.stack_from(s, None)
    }

    /// `stack_of` with the user stack bytes and the kernel part taken from `borrowed`
    /// (a stack-less switch-out's paired copy, or read through /proc from its SP)
    /// instead of the sample's own.
    fn stack_from(
        &mut self,
        s: &linux_perf_event_reader::SampleRecord,
        borrowed: Option<&Borrowed>,
    ) -> Option<u32> {
        let pid = s.pid.unwrap_or(0);
        let (mut kernel, fp_user) = split_callchain(s);
        let regs = s
            .user_regs
            .as_ref()
            .and_then(|r| Some((r.get(REG_IP)?, r.get(REG_SP)?, r.get(REG_BP).unwrap_or(0))));
        let (stack_bytes, dyn_size) = match (borrowed, &s.user_stack) {
            (Some(b), _) => (b.bytes.clone(), b.bytes.len()),
            (None, Some((data, dyn_size))) => (data.as_slice().into_owned(), *dyn_size as usize),
            (None, None) => (Vec::new(), 0),
        };
        let stack = &stack_bytes[..dyn_size.min(stack_bytes.len())];
        let stack_full = dyn_size as u64 + 8 >= u64::from(self.stack_bytes);

        let mut user = unwind::UserStack::default();
        if regs.is_some() || !fp_user.is_empty() {
            let proc_ = self.procs.entry(pid).or_insert_with(|| Proc::new(None));
            user = unwind::unwind_user(
                &proc_.unwinder,
                &mut self.cache,
                regs,
                stack,
                stack_full,
                &fp_user,
            );
            if !user.reached_root {
                self.unwind_failures += 1;
                if user.truncated {
                    self.truncated += 1;
                }
            }
        }
        // Build the stack root first: outermost user frame … leaf user, then kernel
        // frames from the syscall entry down to the leaf.
        let mut raw_frames: Vec<RawFrame> = Vec::with_capacity(user.frames.len() + kernel.len());
        for &a in user.frames.iter().rev() {
            raw_frames.push(self.resolve_user(pid, a));
        }
        match borrowed.map(|b| &b.kernel) {
            Some(KernelPart::Addrs(addrs)) if kernel.is_empty() => kernel.clone_from(addrs),
            Some(KernelPart::Named(names)) if kernel.is_empty() => {
                for name in names.iter().rev() {
                    let name = RawFrame::KernelNamed {
                        name: self.kernel_name_id(name.clone()),
                    };
                    raw_frames.push(name);
                }
            }
            _ => {}
        }
        for (i, &a) in kernel.iter().enumerate().rev() {
            let addr = if i == 0 { a } else { a.saturating_sub(1) };
            raw_frames.push(RawFrame::Kernel { addr });
        }
        let mut node = None;
        for f in raw_frames {
            let fid = self.frame_id(f);
            node = Some(self.stack_id(node, fid));
        }
        node
    }

    fn resolve_user(&mut self, pid: i32, addr: u64) -> RawFrame {
        if let Some(p) = self.procs.get(&pid)
            && let Some(m) = p.find(addr)
            && let Some(module) = m.module
        {
            return RawFrame::User {
                module,
                file_offset: addr - m.map.start + m.map.pgoff,
            };
        }
        RawFrame::Anon { pid, addr }
    }

    /// A stack-less switch-out's stack: unwound from its paired copy's bytes and kernel
    /// callchain or from a late read, else lent by an earlier copy at the same call
    /// (`stackreuse`), else its leaf frame alone. A copy also checks what reuse would
    /// have lent it.
    fn switch_stack(
        &mut self,
        s: &linux_perf_event_reader::SampleRecord,
        tid: i32,
        prev_state: Option<i64>,
        borrowed: Option<&Borrowed>,
    ) -> (Option<u32>, StackSource) {
        let key = stackreuse::key_of(s, prev_state);
        // Preemptions land at any instruction and rarely repeat one: their keys get a
        // table of their own, so that they cannot fill a thread's table of blocking
        // calls (64 keys, cleared when full).
        let table = if offcpu::state_of(prev_state) == WaitState::Preempted {
            &mut self.reuse_preempted
        } else {
            &mut self.reuse
        };
        let Some(b) = borrowed else {
            return match key.and_then(|k| table.lend(tid, k)) {
                Some(st) => (st, StackSource::Reused),
                None => (self.stack_of(s), StackSource::Partial),
            };
        };
        let (st, source) = (self.stack_from(s, Some(b)), b.source);
        // Only copies are lent: a late read names its kernel frames from /proc, not by
        // address, and would count as a different stack in the check below.
        if let Some(k) = key.filter(|_| source == StackSource::Copied) {
            // The inference checked where it can be: what reuse would have lent this
            // copied switch-out, against what its own copy unwound to.
            let table = if offcpu::state_of(prev_state) == WaitState::Preempted {
                &mut self.reuse_preempted
            } else {
                &mut self.reuse
            };
            let lent = table.lend(tid, k);
            table.remember(tid, k, st);
            if let Some(lent) = lent {
                self.reuse_checks += 1;
                self.reuse_agreed += u64::from(lent == st);
            }
        }
        (st, source)
    }

    fn on_sample(
        &mut self,
        s: &linux_perf_event_reader::SampleRecord,
        role: EventRole,
        resolved: Option<u32>,
        bytes: Option<&Borrowed>,
    ) {
        let (Some(pid), Some(tid), Some(time)) = (s.pid, s.tid, s.timestamp) else {
            self.parse_errors += 1;
            return;
        };
        let (stack, source) = match role {
            EventRole::SwitchLite { prev_state } => {
                let state = prev_state.and_then(|f| raw_int(s, f));
                self.switch_stack(s, tid, state, bytes)
            }
            // Copies are paired with their stack-less sample as they are drained
            // (`copies`); one handled here had no partner and no kernel stack.
            EventRole::SwitchOut { .. } => return,
            _ => (self.stack_of(s), StackSource::Copied),
        };
        match role {
            EventRole::OnCpu => {
                let weight = self.nominal_period_ns.or(s.period).unwrap_or(1_000_000);
                self.samples.push(ThreadSample {
                    pid,
                    tid,
                    time_ns: time,
                    stack: stack.into(),
                    weight_ns: weight,
                    kind: SampleKind::OnCpu,
                });
            }
            EventRole::SwitchOut { prev_state } | EventRole::SwitchLite { prev_state } => {
                let prev_state = prev_state.and_then(|f| raw_int(s, f));
                let sleeping = offcpu::state_of(prev_state) != WaitState::Preempted;
                let wait = match s.user_regs.as_ref().and_then(|r| r.get(REG_DI)) {
                    Some(arg0) if sleeping => Some(RawWait {
                        arg0,
                        resource: resolved.or_else(|| self.fds.resolve(pid, arg0)),
                        pollfd0: self
                            .poll_set(s, pid, bytes.map(|b| b.bytes.as_slice()), arg0)
                            .map(|fd| {
                                let r = u64::try_from(fd)
                                    .ok()
                                    .and_then(|f| self.fds.resolve(pid, f));
                                (fd, r)
                            }),
                    }),
                    _ => None,
                };
                self.offcpu.switch_sample(offcpu::SwitchSample {
                    tid,
                    time,
                    stack,
                    prev_state,
                    wait,
                    source,
                });
            }
            EventRole::Waking { wakee_pid } => {
                let Some(wakee) = raw_int(s, wakee_pid).and_then(|v| i32::try_from(v).ok()) else {
                    self.parse_errors += 1;
                    return;
                };
                self.offcpu.waking(offcpu::Waking {
                    waker_pid: pid,
                    waker_tid: tid,
                    wakee_tid: wakee,
                    time,
                    stack,
                });
            }
        }
    }

    fn on_switch(&mut self, cs: ContextSwitchRecord, common: &CommonData) {
        let (Some(pid), Some(tid), Some(time)) = (common.pid, common.tid, common.timestamp) else {
            return;
        };
        match cs {
            ContextSwitchRecord::Out { preempted, .. } => {
                self.offcpu.switch_out(offcpu::SwitchOut {
                    pid,
                    tid,
                    time,
                    preempted: preempted == TaskWasPreempted::Yes,
                });
            }
            ContextSwitchRecord::In { .. } => {
                self.offcpu.switch_in(offcpu::SwitchIn { tid, time });
            }
        }
    }

    /// A new drain round: descriptor look-ups get their budget back.
    /// Announce processes that map a Python executable on `tx`.
    pub(crate) fn set_python_hint(&mut self, tx: std::sync::mpsc::Sender<i32>) {
        self.python_hint = Some((tx, std::collections::HashSet::new()));
    }

    pub(crate) fn new_round(&mut self) {
        self.fds.new_round();
        self.pollfd_reads.clear();
    }

    /// The descriptor of the first `struct pollfd` of a switch-out that may be a
    /// `poll(fds, nfds, …)` (the syscall is told later, from its kernel stack): from the
    /// switch-out's copy of the user stack (`copy`, copied from SP upwards: its paired
    /// copy or a late read) or the process's memory ([`Processor::pollfd_at`]). Only
    /// when the second argument looks like a set's size (1–64), so the pointer
    /// arguments of other blocking calls (a `nanosleep` timespec, a futex word) cost
    /// no descriptor look-up.
    fn poll_set(
        &mut self,
        s: &linux_perf_event_reader::SampleRecord,
        pid: i32,
        copy: Option<&[u8]>,
        addr: u64,
    ) -> Option<i32> {
        let regs = s.user_regs.as_ref()?;
        if !(1..=64).contains(&regs.get(REG_SI)?) {
            return None;
        }
        let stack = regs.get(REG_SP).zip(copy);
        self.pollfd_at(pid, addr, stack)
    }

    /// The descriptor of the first `struct pollfd` of a `poll(fds, nfds, …)` at `addr`:
    /// from `stack` (SP and the bytes copied from it) when the array lies there (libpq
    /// keeps it on its stack), else from process `pid`'s memory, while the call is
    /// still blocked (Python's `select.poll` and `socketserver` keep it on the heap),
    /// at most once per (pid, address) a round. None below the first page (not a
    /// pointer: `clock_nanosleep`'s flags, a `select`'s nfds).
    fn pollfd_at(&mut self, pid: i32, addr: u64, stack: Option<(u64, &[u8])>) -> Option<i32> {
        if let Some((sp, bytes)) = stack
            && let Some(off) = addr.checked_sub(sp).and_then(|o| usize::try_from(o).ok())
            && let Some(b) = bytes.get(off..off.saturating_add(4))
            && let Ok(b) = <[u8; 4]>::try_from(b)
        {
            return Some(i32::from_le_bytes(b));
        }
        if addr < 4096 {
            return None;
        }
        *self
            .pollfd_reads
            .entry((pid, addr))
            .or_insert_with(|| super::peek::read_i32(pid, addr))
    }

    /// Threads that have not exited, as (pid, tid) by tid: the ones worth a look at
    /// /proc.
    pub(crate) fn live_threads(&self) -> Vec<(i32, i32)> {
        let mut v: Vec<(i32, i32)> = self
            .threads
            .iter()
            .filter(|(_, t)| !t.exited)
            .map(|(&tid, t)| (t.pid, tid))
            .collect();
        v.sort_unstable_by_key(|&(_, tid)| tid);
        v
    }

    /// Keep what a look at a blocked thread saw: its user stack, unwound now with the
    /// process's current maps, under a frame naming its wait channel.
    pub(crate) fn observe(&mut self, o: super::blocked::Observation) {
        if o.repeat
            && let Some(&(node, wait)) = self.last_look.get(&o.tid)
        {
            self.offcpu.look(offcpu::Look {
                tid: o.tid,
                time: o.time,
                state: o.state,
                stack: node,
                wait,
            });
            return;
        }
        let mut user = unwind::UserStack::default();
        if let Some((pc, sp, stack)) = &o.user {
            let full = stack.len() as u64 + 8 >= u64::from(self.stack_bytes);
            let proc_ = self.procs.entry(o.pid).or_insert_with(|| Proc::new(None));
            user = unwind::unwind_user(
                &proc_.unwinder,
                &mut self.cache,
                Some((*pc, *sp, 0)),
                stack,
                full,
                &[],
            );
        }
        let mut raw_frames: Vec<RawFrame> = user
            .frames
            .iter()
            .rev()
            .map(|&a| self.resolve_user(o.pid, a))
            .collect::<Vec<_>>();
        // Without a kernel stack, the call read from /proc stands for it.
        let mut kernel: Vec<String> = o
            .syscall
            .map(|(nr, _)| super::syscalls::frames(nr))
            .unwrap_or_default();
        kernel.extend(o.wchan.clone());
        for name in kernel {
            raw_frames.push(RawFrame::KernelNamed {
                name: self.kernel_name_id(name),
            });
        }
        let mut node = None;
        for f in raw_frames {
            let fid = self.frame_id(f);
            node = Some(self.stack_id(node, fid));
        }
        let wait = o.syscall.map(|(nr, arg0)| self.looked_wait(&o, nr, arg0));
        self.last_look.insert(o.tid, (node, wait));
        self.offcpu.look(offcpu::Look {
            tid: o.tid,
            time: o.time,
            state: o.state,
            stack: node,
            wait,
        });
    }

    /// The interned id of a kernel function name.
    fn kernel_name_id(&mut self, name: String) -> u32 {
        let next = self.kernel_names.len() as u32;
        let id = *self.kernel_name_ids.entry(name.clone()).or_insert(next);
        if id == next {
            self.kernel_names.push(name);
        }
        id
    }

    /// The wait of a call seen from /proc: its first argument resolved as a descriptor,
    /// and for poll the first `struct pollfd` (from the copied stack or the heap).
    fn looked_wait(&mut self, o: &super::blocked::Observation, nr: u64, arg0: u64) -> RawWait {
        let stack = o.user.as_ref().map(|(_, sp, st)| (*sp, st.as_slice()));
        let pollfd0 = super::syscalls::takes_pollfds(nr)
            .then(|| self.pollfd_at(o.pid, arg0, stack))
            .flatten()
            .map(|fd| {
                let r = u64::try_from(fd)
                    .ok()
                    .and_then(|f| self.fds.resolve(o.pid, f));
                (fd, r)
            });
        RawWait {
            arg0,
            resource: self.fds.resolve(o.pid, arg0),
            pollfd0,
        }
    }

    /// What the crash spool appends (see `spool`): the append-only tables, the
    /// on-CPU samples and the closed off-CPU intervals so far (absolute times).
    pub(crate) fn spool_view(&self) -> super::spool::View<'_> {
        super::spool::View {
            modules: &self.modules,
            frames: &self.frames,
            stacks: &self.stacks,
            kernel_names: &self.kernel_names,
            samples: &self.samples,
            off_cpu: self.offcpu.done(),
            resources: self.fds.resources(),
            lost_records: self.lost,
        }
    }

    /// The processes as the profile has them, by pid.
    pub(crate) fn raw_processes(&self) -> Vec<RawProcess> {
        self.processes_where(|_, _| true)
    }

    /// The processes that differ from `last` (by pid) or are missing there, by pid:
    /// compared in place, only those are copied (the spool asks twice a second).
    pub(crate) fn changed_processes(&self, last: &HashMap<i32, RawProcess>) -> Vec<RawProcess> {
        self.processes_where(|pid, p| {
            last.get(&pid).is_none_or(|l| {
                l.ppid != p.ppid
                    || l.name != self.process_name(pid, p)
                    || l.exe != p.exe
                    || (l.fork_ns, l.exit_ns) != (p.fork_ns, p.exit_ns)
                    || !l.maps.iter().eq(p.maps.iter().map(|m| &m.map))
            })
        })
    }

    fn processes_where(&self, keep: impl Fn(i32, &Proc) -> bool) -> Vec<RawProcess> {
        let mut processes: Vec<RawProcess> = self
            .procs
            .iter()
            .filter(|&(&pid, p)| keep(pid, p))
            .map(|(&pid, p)| RawProcess {
                pid,
                ppid: p.ppid,
                name: self.process_name(pid, p).to_string(),
                exe: p.exe.clone(),
                maps: p.maps.iter().map(|m| m.map.clone()).collect(),
                fork_ns: p.fork_ns,
                exit_ns: p.exit_ns,
            })
            .collect();
        processes.sort_by_key(|p| p.pid);
        processes
    }

    /// A process's name: its main thread's, else the one its comm records gave.
    fn process_name<'a>(&'a self, pid: i32, p: &'a Proc) -> &'a str {
        self.threads
            .get(&pid)
            .map(|t| t.name.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(&p.name)
    }

    /// The threads as the profile has them, by (pid, tid).
    pub(crate) fn raw_threads(&self) -> Vec<RawThread> {
        let mut threads: Vec<RawThread> = self
            .threads
            .iter()
            .map(|(&tid, t)| RawThread {
                pid: t.pid,
                tid,
                name: t.name.clone(),
            })
            .collect();
        threads.sort_by_key(|t| (t.pid, t.tid));
        threads
    }

    /// Close what is still open and produce the profile. Times become relative to t0.
    pub(crate) fn finish(
        mut self,
        t0_ns: u64,
        end_ns: u64,
        sampler: String,
        freq: u32,
    ) -> RawProfile {
        let offcpu = std::mem::take(&mut self.offcpu);
        let off_cpu_lost_ns = offcpu.lost_ns();
        let has_prev_state = offcpu.has_prev_state();
        let looked = offcpu.looked();
        let threads = &self.threads;
        let intervals = offcpu.finish(end_ns, |tid| threads.get(&tid).is_some_and(|t| !t.exited));
        let stacks = offcpu::stack_sources(&intervals);
        let unseen = looked.then(|| offcpu::unseen(&intervals));
        // The on-CPU samples, then the intervals (with their wakers and waits in side
        // tables), then all sorted by time: one list, never a second copy of it.
        let mut samples = Samples::from(std::mem::take(&mut self.samples));
        samples.reserve(intervals.len());
        let mut waits = Vec::new();
        for iv in intervals {
            let wait = iv.wait;
            let (sample, waker) = off_cpu_sample(iv, t0_ns);
            if let Some(w) = wait {
                waits.push((samples.len() as u32, w));
            }
            samples.push_woken(sample, waker);
        }
        let new_of = samples.sort_by_time();
        for w in &mut waits {
            w.0 = new_of[w.0 as usize];
        }
        drop(new_of);
        waits.sort_unstable_by_key(|w| w.0);
        samples.for_each_mut(|s| s.time_ns = s.time_ns.saturating_sub(t0_ns));
        let mut warnings = Vec::new();
        if self.fds.skipped > 0 {
            warnings.push(format!(
                "{} descriptor look-ups were skipped (at most {} per drain round): some waits \
                 name no resource",
                self.fds.skipped,
                super::fdres::BUDGET_PER_ROUND
            ));
        }
        if let Some((n, ns, of_ns)) = unseen.filter(|u| u.0 > 0) {
            warnings.push(format!(
                "{n} off-CPU intervals ({:.1}% of the off-CPU time) ended before a look at \
                 /proc caught them: they have a duration and a state but no stack (at high \
                 switch rates most waits are shorter than a look); at most {} threads are looked at \
                 per 10 ms round — fix: run as root or sudo sysctl kernel.perf_event_paranoid=1",
                ns as f64 * 100.0 / of_ns.max(1) as f64,
                super::sampler::LOOKS_PER_ROUND
            ));
        }
        if self.parse_errors > 0 {
            warnings.push(format!(
                "{} perf records could not be parsed",
                self.parse_errors
            ));
        }
        if !has_prev_state
            && samples
                .iter()
                .any(|s| matches!(s.kind, SampleKind::OffCpu { .. }))
        {
            let seen = if !looked && self.kernel_names.is_empty() {
                ""
            } else {
                " (except in waits a look at /proc caught)"
            };
            warnings.push(format!(
                "off-CPU state from context-switch records only: sleeping (S) and \
                 uninterruptible (D) waits are not told apart{seen}"
            ));
        }
        let processes = self.raw_processes();
        let threads = self.raw_threads();
        RawProfile {
            sampler,
            frequency_hz: freq,
            t0_ns,
            modules: self.modules,
            frames: self.frames,
            stacks: self.stacks,
            samples,
            waits,
            kernel_names: self.kernel_names,
            processes,
            threads,
            lost_records: self.lost,
            lost_stack_copies: self.lost_stacks,
            off_cpu_lost_ns,
            off_cpu_ns: stacks.total_ns,
            off_cpu_reused_stack_ns: stacks.reused_ns,
            off_cpu_late_stack_ns: stacks.late_ns,
            reuse_checks: self.reuse_checks,
            reuse_agreed: self.reuse_agreed,
            off_cpu_partial_stack_ns: stacks.partial_ns,
            unwind_failures: self.unwind_failures,
            truncated_stacks: self.truncated,
            wakers_recorded: false,
            resources: self.fds.into_resources(),
            sockets_recorded: false,
            sockets: Vec::new(),
            file_reads_recorded: false,
            file_reads: Vec::new(),
            python: Default::default(),
            warnings,
        }
    }
}

/// An off-CPU interval as a sample with its waker; the waker's time becomes relative to
/// t0 here (the sample's own time is made relative with the others).
fn off_cpu_sample(iv: offcpu::Interval, t0_ns: u64) -> (ThreadSample, Option<Waker>) {
    let waker = iv.waker.map(|w| Waker {
        time_ns: w.time_ns.saturating_sub(t0_ns),
        ..w
    });
    (iv.sample(), waker)
}

/// A sample's callchain split into its kernel part and the kernel's frame-pointer
/// user part, each leaf first.
fn split_callchain(s: &linux_perf_event_reader::SampleRecord) -> (Vec<u64>, Vec<u64>) {
    let (mut kernel, mut fp_user) = (Vec::new(), Vec::new());
    let mut ctx = 0u64;
    if let Some(cc) = &s.callchain {
        for i in 0..cc.len() {
            let Some(a) = cc.get(i) else { break };
            if a >= b::PERF_CONTEXT_MAX {
                ctx = a;
            } else if ctx == b::PERF_CONTEXT_KERNEL {
                kernel.push(a);
            } else if ctx == b::PERF_CONTEXT_USER {
                fp_user.push(a);
            }
        }
    }
    (kernel, fp_user)
}

/// A little-endian signed integer field of a tracepoint sample's raw data.
fn raw_int(s: &linux_perf_event_reader::SampleRecord, (off, size): (usize, usize)) -> Option<i64> {
    let raw = s.raw.as_ref()?.as_slice();
    let b = raw.get(off..off.checked_add(size)?)?;
    Some(match size {
        8 => i64::from_le_bytes(b.try_into().ok()?),
        4 => i64::from(i32::from_le_bytes(b.try_into().ok()?)),
        _ => return None,
    })
}

/// Executable memory that no file stands for (the kernel names anonymous mappings
/// `//anon`; JIT runtimes also use memfd and /dev/zero mappings): its addresses are
/// resolved through the process's `/tmp/perf-PID.map`, not as offsets in a file.
fn is_anonymous_code(path: &str) -> bool {
    path.is_empty()
        || path.starts_with("//anon")
        || path.starts_with("/memfd:")
        || path.starts_with("/dev/zero")
        || path.starts_with("[anon")
}
