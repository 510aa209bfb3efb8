//! The diagnosis's one input, [`Facts`]: built once from the analysis, the recording's
//! sampled profile and the measured runs, as plain data the rule families read (and
//! their unit tests construct directly).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::profile::{Frame, FrameKind, ResourceKind, RunMeasurement, SampledProfile};

use super::super::bottleneck::Bottleneck;
use super::super::resources::{ResourceRole, ResourceUse, StepResource};
use super::super::steps::{Step, ms};
use super::super::{Analysis, SampleResources};
use super::stacks::{self, frames_of};

/// Everything the rules read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The shares' denominator: the critical path's length (or the thread time), ms.
    pub wall_ms: f64,
    /// Critical-path time per wait category key (`cpu`, `runqueue`, `lock`...), ms.
    pub waits_ms: BTreeMap<String, f64>,
    /// The steps, flattened depth first (parents before children).
    pub steps: Vec<StepFact>,
    /// Socket peers: one per (process, peer).
    pub peers: Vec<Peer>,
    /// Whether socket traffic was recorded (an empty `peers` traffic is then zero).
    pub sockets_recorded: bool,
    /// Files read through the page cache, when recorded.
    pub file_reads: Vec<FileFact>,
    pub file_reads_recorded: bool,
    /// Per file: off-CPU intervals inside fsync/fdatasync and their time (thread), ms.
    pub syncs: Vec<SyncFact>,
    /// The waits on files and directories, all together.
    pub files: FileWaits,
    /// The profiled run's read and write calls, when counted.
    pub io_calls: Option<IoCalls>,
    /// Bytes the profiled run's tree had read from storage (/proc/PID/io `read_bytes`:
    /// not the page cache's), when measured.
    pub storage_read_bytes: Option<u64>,
    /// Resident memory over a run, when one was sampled.
    pub rss: Option<RssSeries>,
    /// Block devices active during the profiled run (machine-wide), busiest first;
    /// None when the run was not measured or its recording predates them.
    pub disks: Option<Vec<crate::profile::DiskBusy>>,
    /// The profiled run's context switches, when measured.
    pub involuntary_cs: Option<u64>,
    /// The median of the counted baseline runs' involuntary switches (runs without the
    /// profiler); None without counted runs.
    pub baseline_involuntary_cs: Option<f64>,
    pub voluntary_cs: Option<u64>,
    /// Summed thread time per wait category key, and in all, ms: what the threads did,
    /// on the critical path or not (lock waits ended by a profiled holder are followed
    /// to it on the critical path, so contention shows here).
    pub thread_waits_ms: BTreeMap<String, f64>,
    pub thread_ms: f64,
    /// Who ended lock waits (the waker's own code), with the lock-wait time it ended, ms.
    pub lock_holders: Vec<(String, f64)>,
    /// Where threads waited on locks (their own code nearest the wait), ms, most first.
    pub lock_waiters: Vec<(String, f64)>,
    /// Whether wake-ups were recorded (a lock's holder can be known).
    pub wakers_recorded: bool,
    /// On-CPU time in library code (shared objects, the kernel, Rust's std, not inlined
    /// into the user's code) and in all code, ms.
    pub cpu_library_ms: f64,
    pub cpu_total_ms: f64,
    /// Of the rest, on-CPU time in programs installed on the system (`installed`), ms,
    /// per program, most first.
    pub cpu_installed_ms: Vec<(String, f64)>,
    /// The programs installed on the system among the profile's modules: name → path.
    pub system_binaries: BTreeMap<String, String>,
    /// The top bottlenecks (their why-chains are rewritten from these facts).
    pub top: Vec<Bottleneck>,
    /// Per top bottleneck (by function): its on-CPU time by the user's own source line
    /// nearest to the leaf, ms, most first; and its on-CPU time in library code, ms.
    pub hot_lines: Vec<HotLines>,
}

/// Where one function's on-CPU time went, line by line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HotLines {
    pub function: String,
    pub cpu_ms: f64,
    /// Of `cpu_ms`, with a library, runtime or kernel frame at the leaf.
    pub library_ms: f64,
    /// (file:line, ms), most first, at most 3.
    pub lines: Vec<(String, f64)>,
}

/// One step, flattened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepFact {
    pub id: String,
    /// Level in the tree, 1 for top-level steps.
    pub depth: usize,
    /// `function (file:line)`, or the function alone.
    pub call_site: String,
    /// True when the step is library, runtime or kernel code, not the user's.
    pub system: bool,
    /// The module of its code, when known.
    pub module: Option<String>,
    pub wall_ms: f64,
    pub waits_ms: BTreeMap<String, f64>,
    pub resources: Vec<StepResource>,
}

/// One socket peer of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peer {
    /// `postgres:5432`, or the peer address.
    pub name: String,
    /// The peer address or path as the resource names it.
    pub address: String,
    pub role: Option<ResourceRole>,
    /// A TCP connection (not UDP, not a UNIX socket).
    pub tcp: bool,
    pub pid: i32,
    /// Time blocked on it: on the critical path when known, else thread time, ms.
    pub wait_ms: f64,
    /// Whether `wait_ms` is critical-path time.
    pub wait_critical: bool,
    pub intervals: u64,
    /// Traffic, None when not recorded.
    pub round_trips: Option<u64>,
    pub connections: Option<u64>,
    pub calls: Option<u64>,
    pub bytes: Option<u64>,
    /// The blocked intervals (start, end), ns since the run's start.
    pub waits: Vec<(u64, u64)>,
    /// True when the tree only answered on these sockets (it read first: a server's
    /// side of its clients' connections); their round trips are the clients' requests.
    pub served: bool,
    /// Where the waits were made: the user's own code nearest each blocked call
    /// (`fetch (app.c:12)`), with its blocked time, ms, most first.
    pub sites: Vec<(String, f64)>,
}

/// One file read through the page cache.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileFact {
    pub path: String,
    pub pid: i32,
    pub calls: u64,
    pub pages_read: u64,
    pub extent_pages: u64,
}

/// The read and write calls of the profiled run's tree (/proc/PID/io), and the on-CPU
/// time inside them (from the stacks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoCalls {
    pub reads: u64,
    pub writes: u64,
    /// Bytes they moved (rchar + wchar: page cache, pipes and sockets included).
    pub bytes: u64,
    /// On-CPU time inside them, summed over threads, ms.
    pub cpu_ms: f64,
    /// That time by the user's own code nearest to the calls, ms, most first.
    pub sites: Vec<(String, f64)>,
}

/// The waits on files and directories (descriptors naming a path), summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileWaits {
    /// Rows of "where the waiting goes": one per (process, path).
    pub files: u64,
    pub intervals: u64,
    /// Their summed duration (thread time), ms.
    pub blocked_ms: f64,
}

/// The syncs of one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncFact {
    pub path: String,
    pub intervals: u64,
    pub ms: f64,
}

/// Resident memory over one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RssSeries {
    /// "the profiled run", "baseline run 2".
    pub source: String,
    /// (ms since the run's start, RSS KiB).
    pub points: Vec<(f64, u64)>,
}

impl Facts {
    /// Share of the wall time, percent (0 when there is no wall time).
    pub fn share(&self, ms: f64) -> f64 {
        if self.wall_ms > 0.0 {
            (ms * 100.0 / self.wall_ms).min(100.0)
        } else {
            0.0
        }
    }

    /// Critical-path time of a wait category, ms.
    pub fn wait(&self, key: &str) -> f64 {
        self.waits_ms.get(key).copied().unwrap_or(0.0)
    }

    /// A step by id.
    pub fn step(&self, id: &str) -> Option<&StepFact> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The facts of a run: `runs` are the counted baseline runs.
    pub fn build(
        a: &Analysis,
        p: &SampledProfile,
        profiled: Option<&RunMeasurement>,
        runs: &[&RunMeasurement],
    ) -> Facts {
        let mut steps = Vec::new();
        flatten(&a.steps, 1, &mut steps);
        let functions: Vec<&str> = a
            .top_bottlenecks
            .iter()
            .map(|b| b.function.as_str())
            .collect();
        let system_binaries = super::installed::system_binaries(p);
        let cpu = stacks::cpu_figures(p, &functions, &system_binaries);
        let (cpu_library_ms, cpu_total_ms) = (ms(cpu.library_ns), ms(cpu.all_ns));
        Facts {
            wall_ms: a.total_wall_ms,
            waits_ms: a.wait_breakdown_ms.clone(),
            steps,
            peers: peers(p, &a.resources, &a.call_tree.sample_resources),
            sockets_recorded: p.sockets_recorded,
            file_reads: file_reads(p),
            file_reads_recorded: p.file_reads_recorded,
            syncs: stacks::syncs(p),
            files: file_waits(&a.resources),
            storage_read_bytes: profiled.map(|r| r.read_bytes),
            io_calls: profiled.and_then(|r| {
                Some(IoCalls {
                    reads: r.read_calls?,
                    writes: r.write_calls?,
                    bytes: r.rchar.saturating_add(r.wchar),
                    cpu_ms: ms(cpu.io_call_ns),
                    sites: cpu
                        .io_call_sites
                        .iter()
                        .map(|(s, ns)| (s.clone(), ms(*ns)))
                        .collect(),
                })
            }),
            rss: rss(profiled, runs),
            disks: profiled.map(|r| r.disks.clone()),
            involuntary_cs: profiled.map(|r| r.involuntary_cs),
            baseline_involuntary_cs: crate::stats::median(
                &runs
                    .iter()
                    .map(|r| r.involuntary_cs as f64)
                    .collect::<Vec<_>>(),
            ),
            voluntary_cs: profiled.map(|r| r.voluntary_cs),
            thread_waits_ms: a.thread_wait_breakdown_ms.clone(),
            thread_ms: a.thread_time_ms,
            lock_holders: stacks::lock_waits(p, true),
            lock_waiters: stacks::lock_waits(p, false),
            wakers_recorded: p.wakers_recorded,
            cpu_library_ms,
            cpu_total_ms,
            cpu_installed_ms: cpu
                .installed_ns
                .iter()
                .map(|(m, ns)| (m.clone(), ms(*ns)))
                .collect(),
            system_binaries,
            top: a.top_bottlenecks.clone(),
            hot_lines: cpu.hot_lines,
        }
    }
}

/// `function (file:line)`.
pub fn call_site(function: &str, location: Option<&str>) -> String {
    match location {
        Some(l) => format!("{function} ({l})"),
        None => function.to_string(),
    }
}

fn flatten(steps: &[Step], depth: usize, out: &mut Vec<StepFact>) {
    for s in steps {
        // A step of a Python function (its location a `.py` file or a frozen module)
        // is judged as a Python frame: the standard library's are library code.
        let python = s.location.as_deref().is_some_and(|l| {
            l.starts_with("<frozen ") || super::super::lines::file_of(l).ends_with(".py")
        });
        let frame = Frame {
            function: s.function.clone(),
            module: s.module.clone(),
            file: s.location.clone(),
            line: None,
            kind: if python {
                FrameKind::Python
            } else {
                FrameKind::User
            },
            inlined: false,
        };
        out.push(StepFact {
            id: s.id.clone(),
            depth,
            call_site: call_site(&s.function, s.location.as_deref()),
            system: super::super::ownframe::is_system(&frame) || is_library(&frame),
            module: s.module.clone(),
            wall_ms: s.wall_time_ms,
            waits_ms: s.wait_breakdown_ms.clone(),
            resources: s.resources.clone(),
        });
        flatten(&s.children, depth + 1, out);
    }
}

/// A shared object's code (other than the program's own), the kernel or Rust's std.
pub(super) fn is_library(f: &Frame) -> bool {
    f.module
        .as_deref()
        .is_some_and(|m| m.contains(".so") || m.starts_with('['))
        || super::super::ownframe::is_system(f)
}

fn is_socket(k: ResourceKind) -> bool {
    matches!(
        k,
        ResourceKind::SocketTcp | ResourceKind::SocketUdp | ResourceKind::SocketUnix
    )
}

/// A resource's role, with a peer known to be on another host External even where the
/// role was not resolved further.
fn role_of(role: ResourceRole, peer_local: Option<bool>) -> ResourceRole {
    match (role, peer_local) {
        (ResourceRole::Other, Some(false)) => ResourceRole::External,
        (r, _) => r,
    }
}

/// The key of a resource's row among the `ResourceUse`s: its process and shown name
/// (the service behind a local peer when known, else its own name).
fn row_key(r: &crate::profile::Resource) -> (i32, String) {
    (r.pid, super::super::resources::shown_name(r).to_string())
}

/// Socket peers, from the waits (`ResourceUse`, and each sample's resource as the
/// analysis attributed it) and the socket traffic.
fn peers(
    p: &SampledProfile,
    uses: &[ResourceUse],
    sample_resources: &SampleResources,
) -> Vec<Peer> {
    let mut out: Vec<Peer> = Vec::new();
    let mut at: HashMap<(i32, String), usize> = HashMap::new();
    for u in uses.iter().filter(|u| is_socket(u.kind)) {
        at.insert((u.pid, u.name.clone()), out.len());
        out.push(Peer {
            name: u.service.clone().unwrap_or_else(|| u.name.clone()),
            address: u.name.clone(),
            role: Some(role_of(u.role, u.peer_local)),
            tcp: u.kind == ResourceKind::SocketTcp,
            pid: u.pid,
            wait_ms: u.critical_ms.unwrap_or(u.blocked_ms),
            wait_critical: u.critical_ms.is_some(),
            intervals: u.intervals,
            round_trips: u.round_trips,
            connections: u.connections,
            calls: u.calls,
            bytes: u.bytes_sent.zip(u.bytes_received).map(|(s, r)| s + r),
            waits: Vec::new(),
            served: false,
            sites: Vec::new(),
        });
    }
    // Traffic the resource rows do not carry yet comes from the sockets themselves.
    let mut traffic: HashMap<usize, (u64, u64, u64, u64)> = HashMap::new();
    let (mut client, mut served) = (HashSet::new(), HashSet::new());
    for s in &p.sockets {
        let Some(r) = s.resource.and_then(|i| p.resources.get(i as usize)) else {
            continue;
        };
        let i = *at.entry(row_key(r)).or_insert_with(|| {
            out.push(Peer {
                name: super::super::resources::shown_name(r).to_string(),
                address: r.name.clone(),
                role: r.peer_local.map(|l| role_of(ResourceRole::Other, Some(l))),
                tcp: r.kind == ResourceKind::SocketTcp,
                pid: s.pid,
                ..Peer::default()
            });
            out.len() - 1
        });
        if s.sent_first {
            client.insert(i);
        } else {
            served.insert(i);
        }
        let t = traffic.entry(i).or_default();
        t.0 += s.round_trips;
        t.1 += u64::from(super::super::resources::opened(s, Some(r.kind)));
        t.2 += s.sends + s.recvs;
        t.3 += s.bytes_sent + s.bytes_received;
    }
    for (i, peer) in out.iter_mut().enumerate() {
        peer.served = served.contains(&i) && !client.contains(&i);
    }
    if p.sockets_recorded {
        for (i, peer) in out.iter_mut().enumerate() {
            let t = traffic.get(&i).copied().unwrap_or_default();
            peer.round_trips = peer.round_trips.or(Some(t.0));
            peer.connections = peer.connections.or(Some(t.1));
            peer.calls = peer.calls.or(Some(t.2));
            peer.bytes = peer.bytes.or(Some(t.3));
        }
    }
    let mut sites: HashMap<(usize, String), u64> = HashMap::new();
    for (k, r) in sample_resources.iter() {
        let (Some(s), Some(r)) = (p.samples.get(k), p.resources.get(r as usize)) else {
            continue;
        };
        if let Some(&i) = at.get(&row_key(r)) {
            out[i]
                .waits
                .push((s.time_ns, s.time_ns.saturating_add(s.weight_ns)));
            if let Some(site) = own_site(p, s.stack.get()) {
                *sites.entry((i, site)).or_default() += s.weight_ns;
            }
        }
    }
    for ((i, site), ns) in sites {
        out[i].sites.push((site, super::super::steps::ms(ns)));
    }
    for peer in &mut out {
        peer.sites
            .sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    out
}

/// The user's own code nearest the leaf of a stack, as `function (file:line)`.
pub(super) fn own_site(p: &SampledProfile, stack: Option<u32>) -> Option<String> {
    frames_of(p, stack)
        .into_iter()
        .find(|f| !is_library(f) && !super::super::calltree::is_plumbing(&f.function))
        .map(|f| call_site(&f.function, f.location().as_deref()))
}

fn file_waits(uses: &[ResourceUse]) -> FileWaits {
    let mut w = FileWaits::default();
    for u in uses.iter().filter(|u| u.kind == ResourceKind::File) {
        w.files += 1;
        w.intervals += u.intervals;
        w.blocked_ms += u.blocked_ms;
    }
    w
}

fn file_reads(p: &SampledProfile) -> Vec<FileFact> {
    p.file_reads
        .iter()
        .map(|f| FileFact {
            path: f
                .path
                .clone()
                .unwrap_or_else(|| format!("inode {} on device {}", f.ino, f.dev)),
            pid: f.pid,
            calls: f.calls,
            pages_read: f.pages_read,
            extent_pages: f.extent_pages,
        })
        .collect()
}

/// The RSS timeline of the profiled run, or else of the longest counted run.
fn rss(profiled: Option<&RunMeasurement>, runs: &[&RunMeasurement]) -> Option<RssSeries> {
    let series = |source: String, r: &RunMeasurement| RssSeries {
        source,
        // A point before the process had mapped anything is no measurement of it.
        points: r
            .timeline
            .iter()
            .filter(|t| t.rss_kb > 0)
            .map(|t| (t.t_ms, t.rss_kb))
            .collect(),
    };
    if let Some(r) = profiled.filter(|r| r.timeline.len() >= 5) {
        return Some(series("the profiled run".into(), r));
    }
    runs.iter()
        .filter(|r| r.timeline.len() >= 2)
        .max_by_key(|r| r.timeline.len())
        .map(|r| series(format!("baseline run {}", r.index), r))
}
