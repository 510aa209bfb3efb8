//! Pure analysis of a recording: call tree, steps, hotspots, wait attribution,
//! classification and the top bottlenecks. A function of the [`SampledProfile`] only: it
//! never touches /proc, perf_event or the terminal.
//!
//! The pieces, in the order [`analyse`] runs them:
//!
//! - `classify`: each sample's [`WaitCategory`] (cpu, runqueue, file, network, lock,
//!   sleep, child, pipe, page_fault, other) from its kind, state and kernel frames, through
//!   one static rule table;
//! - `calltree`: the full [`CallTree`] with inclusive and self time per category;
//! - `steps`: the depth-limited [`Step`] tree of the performance map;
//! - `hotspots`: functions by self time;
//! - `bottleneck`: the session's class, its detail sentence and the top 3 bottlenecks.
//!
//! Every share is a share of the session's total sampled wall time: the sum of all
//! sample weights of all threads of all processes (on-CPU periods plus off-CPU
//! intervals), less the time processes waited for children that were profiled too
//! (their own samples account for it). With several threads this exceeds the elapsed
//! time of the run.

mod bottleneck;
pub mod calltree;
pub mod classify;
pub mod critical;
pub mod diagnose;
pub mod escalate;
pub mod hotspots;
pub mod lines;
mod ownframe;
mod percat;
pub mod resources;
pub mod roles;
mod seek;
mod spread;
mod stepres;
pub mod steps;
pub mod waited;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::profile::SampledProfile;

/// A hash map for the analysis' look-ups made once per sample (keys from the recording:
/// thread ids, stack indices, small tuples): foldhash's fast hasher, seeded per process,
/// instead of std's SipHash, which took ~11% of `report`'s time on a 2 M-sample
/// recording. Build one with `FastMap::default()`.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub use bottleneck::Bottleneck;
pub use calltree::{CallNode, CallTree, NodeLabel};
pub use classify::{Categories, WaitCategory};
pub use hotspots::Hotspot;
pub use steps::{Step, StepType};
pub use waited::SampleResources;

/// Bottleneck classes, serialized as the schema's strings.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Classification {
    #[serde(rename = "CPU")]
    Cpu,
    #[serde(rename = "I/O-DB")]
    IoDb,
    #[serde(rename = "I/O-Network")]
    IoNetwork,
    #[serde(rename = "I/O-File")]
    IoFile,
    Architecture,
    External,
    Cache,
    Lock,
    Memory,
    #[serde(rename = "GPU")]
    Gpu,
    Idle,
    Unknown,
}

impl Classification {
    /// Every class, in the schema's order (also the tie-break order).
    pub const ALL: [Classification; 12] = [
        Classification::Cpu,
        Classification::IoDb,
        Classification::IoNetwork,
        Classification::IoFile,
        Classification::Architecture,
        Classification::External,
        Classification::Cache,
        Classification::Lock,
        Classification::Memory,
        Classification::Gpu,
        Classification::Idle,
        Classification::Unknown,
    ];

    /// The schema string ("CPU", "I/O-File", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Classification::Cpu => "CPU",
            Classification::IoDb => "I/O-DB",
            Classification::IoNetwork => "I/O-Network",
            Classification::IoFile => "I/O-File",
            Classification::Architecture => "Architecture",
            Classification::External => "External",
            Classification::Cache => "Cache",
            Classification::Lock => "Lock",
            Classification::Memory => "Memory",
            Classification::Gpu => "GPU",
            Classification::Idle => "Idle",
            Classification::Unknown => "Unknown",
        }
    }
}

/// The result of [`analyse`].
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The session's wall time that shares are taken of: the critical path's length
    /// (see `critical`), or without wake-up records the summed thread time less the
    /// waits for profiled work, ms.
    pub total_wall_ms: f64,
    /// Sum of all sample weights (all threads), ms.
    pub thread_time_ms: f64,
    /// How the critical path was made, and how much of it is solid.
    pub critical_path: CriticalPathSummary,
    /// Sum of on-CPU sample weights, ms.
    pub total_cpu_ms: f64,
    /// The full call tree (not depth-limited; not serialized into the map).
    pub call_tree: CallTree,
    /// The depth-limited step tree of the performance map.
    pub steps: Vec<Step>,
    /// Functions by self time, highest first.
    pub hotspots: Vec<Hotspot>,
    /// The session's bottleneck class.
    pub classification: Classification,
    /// One sentence with the figures behind the class.
    pub bottleneck_detail: String,
    /// At most three bottlenecks, largest first.
    pub top_bottlenecks: Vec<Bottleneck>,
    /// Whole session, every category key present: cpu, runqueue, file, network, lock,
    /// sleep, child, pipe, page_fault, other.
    pub wait_breakdown_ms: BTreeMap<String, f64>,
    /// The same split of the summed thread time (every thread, on the critical path or
    /// not): what the threads did, where `wait_breakdown_ms` is what the run waited for.
    pub thread_wait_breakdown_ms: BTreeMap<String, f64>,
    /// Time blocked per resource (file, socket, pipe...), most first (`resources`).
    pub resources: Vec<resources::ResourceUse>,
    /// Round trips of the run's clients to HTTP services and databases.
    pub round_trips: resources::RoundTrips,
    /// Suspicions, hints and wrong-tool verdicts; empty until [`diagnose::run`].
    pub diagnosis: diagnose::Diagnosis,
    /// Line tables of the top bottlenecks in Python code; [`escalate::run`] keeps those
    /// the escalation rules call for.
    pub line_tables: Vec<lines::LineTable>,
    /// Each escalation decision and its reason; empty until [`escalate::run`].
    pub escalation: Vec<crate::profile::EscalationDecision>,
    /// What makes the analysis less certain.
    pub warnings: Vec<String>,
}

/// The critical path's own figures (the map's `critical_path`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriticalPathSummary {
    /// "critical_path" (wake-ups followed) or "thread_time" (no wake-up records).
    pub model: String,
    /// Length of the path: the sum of what it charged, ms (the shares' denominator).
    pub length_ms: f64,
    /// From the first to the last activity of the tree, ms; null without wake-ups.
    pub span_ms: Option<f64>,
    /// Part of the span that could not be charged to any thread, ms.
    pub unattributed_ms: Option<f64>,
    /// On-CPU time on the path that no sample covered (charged to its thread), ms.
    pub unsampled_ms: Option<f64>,
    /// Off-CPU time of all threads that was followed to the thread that ended it, ms.
    pub followed_waits_ms: Option<f64>,
}

impl CriticalPathSummary {
    fn of(tree: &CallTree) -> CriticalPathSummary {
        let length_ms = steps::ms(tree.total_wall_ns());
        match tree.critical {
            calltree::CriticalModel::Path {
                span_ns,
                unattributed_ns,
                followed_ns,
                unsampled_ns,
            } => CriticalPathSummary {
                model: "critical_path".into(),
                length_ms,
                span_ms: Some(steps::ms(span_ns)),
                unattributed_ms: Some(steps::ms(unattributed_ns)),
                unsampled_ms: Some(steps::ms(unsampled_ns)),
                followed_waits_ms: Some(steps::ms(followed_ns)),
            },
            calltree::CriticalModel::ThreadTime => CriticalPathSummary {
                model: "thread_time".into(),
                length_ms,
                span_ms: None,
                unattributed_ms: None,
                unsampled_ms: None,
                followed_waits_ms: None,
            },
        }
    }
}

/// Classes of time, with `child` and `thread` waits resolved to the class of the work
/// they wait for.
#[derive(Debug)]
pub(crate) struct Classes {
    /// Pid → class of the time its threads spent waiting for children.
    child_class: HashMap<i32, Classification>,
    /// Pid → class of the time its threads spent waiting for other threads: the class
    /// of the process's own time, those waits and child waits aside.
    thread_class: HashMap<i32, Classification>,
}

/// Time per class of `waits`, leaving out the categories whose class is another's.
fn own_classes(waits: &Waits) -> [u64; Classification::ALL.len()] {
    let mut per_class = [0u64; Classification::ALL.len()];
    for c in WaitCategory::ALL {
        if !matches!(c, WaitCategory::Child | WaitCategory::Thread) {
            per_class[c.classification() as usize] += waits[c.index()];
        }
    }
    per_class
}

type Waits = [u64; WaitCategory::ALL.len()];

impl Classes {
    fn new(p: &SampledProfile, tree: &CallTree) -> Classes {
        let process_waits: HashMap<i32, Waits> = tree
            .children(0)
            .map(|c| (tree.nodes[c].pid, tree.nodes[c].crit_waits_ns.dense()))
            .collect();
        let mut child_class = HashMap::new();
        let mut thread_class = HashMap::new();
        for (&pid, waits) in &process_waits {
            // Children by process node: a group of children is counted once.
            let children: std::collections::BTreeSet<i32> = p
                .processes
                .iter()
                .filter(|c| c.ppid.map(|pp| tree.groups.group_of(pp)) == Some(pid))
                .map(|c| tree.groups.group_of(c.pid))
                .collect();
            let mut per_class = [0u64; Classification::ALL.len()];
            for child in children {
                if let Some(w) = process_waits.get(&child) {
                    for (acc, t) in per_class.iter_mut().zip(own_classes(w)) {
                        *acc += t;
                    }
                }
            }
            let class = argmax(&per_class).unwrap_or(Classification::Idle);
            child_class.insert(pid, class);
            let own = argmax(&own_classes(waits)).unwrap_or(Classification::Idle);
            thread_class.insert(pid, own);
        }
        Classes {
            child_class,
            thread_class,
        }
    }

    fn class_of(&self, c: WaitCategory, pid: i32) -> Classification {
        match c {
            WaitCategory::Child => self
                .child_class
                .get(&pid)
                .copied()
                .unwrap_or(Classification::Idle),
            WaitCategory::Thread => self
                .thread_class
                .get(&pid)
                .copied()
                .unwrap_or(Classification::Idle),
            _ => c.classification(),
        }
    }

    /// Time per class (indexed by `Classification as usize`) of waits in process `pid`.
    fn per_class(&self, waits: &Waits, pid: i32) -> [u64; Classification::ALL.len()] {
        let mut out = [0u64; Classification::ALL.len()];
        for c in WaitCategory::ALL {
            out[self.class_of(c, pid) as usize] += waits[c.index()];
        }
        out
    }

    /// The class holding the most time; `Unknown` when there is no time at all.
    pub fn dominant(&self, waits: &Waits, pid: i32) -> Classification {
        argmax(&self.per_class(waits, pid)).unwrap_or(Classification::Unknown)
    }
}

/// The class with the largest non-zero time; ties go to the earlier class.
fn argmax(per_class: &[u64; Classification::ALL.len()]) -> Option<Classification> {
    let mut best: Option<(usize, u64)> = None;
    for (i, &t) in per_class.iter().enumerate() {
        if t > 0 && best.is_none_or(|(_, b)| t > b) {
            best = Some((i, t));
        }
    }
    best.map(|(i, _)| Classification::ALL[i])
}

/// Kernel functions that are profmap's own work inside the target: perf events are
/// copied to every new task at fork (and torn down at exit), under a mutex that
/// forking threads contend on.
const PROFILER_FRAMES: &[&str] = &[
    "perf_event_init_task",
    "perf_event_init_context",
    "inherit_task_group",
    "perf_event_exit_task",
];

/// Which samples are profmap's own activity (see [`PROFILER_FRAMES`]): known by their
/// stacks.
#[derive(Debug)]
pub struct OwnActivity {
    own_stack: Vec<bool>,
    /// Their summed weight, ns.
    ns: u64,
}

impl OwnActivity {
    /// The samples of `p` that are profmap's own activity; `None` when there are none.
    pub fn find(p: &SampledProfile) -> Option<OwnActivity> {
        let mut own_stack = vec![false; p.stacks.len()];
        for (i, node) in p.stacks.iter().enumerate() {
            let f = p.frames.get(node.frame as usize);
            let here = f.is_some_and(|f| {
                f.kind == crate::profile::FrameKind::Kernel
                    && PROFILER_FRAMES.contains(&f.function.split('.').next().unwrap_or(""))
            });
            // Parents come before children in the stack table.
            let parent = node
                .parent
                .and_then(|q| own_stack.get(q as usize).copied())
                .unwrap_or(false);
            own_stack[i] = here || parent;
        }
        let mut own = OwnActivity { own_stack, ns: 0 };
        own.ns = (p.samples.iter())
            .filter(|s| own.is_own(s))
            .map(|s| s.weight_ns)
            .sum();
        (own.ns > 0).then_some(own)
    }

    fn is_own(&self, s: &crate::profile::ThreadSample) -> bool {
        (s.stack.get())
            .and_then(|l| self.own_stack.get(l as usize).copied())
            .unwrap_or(false)
    }

    /// Drop them from `p` in place (for whoever holds the only copy and needs no other:
    /// a filtered copy holds every sample twice); returns their summed weight, ns, for
    /// [`Analysed::dropped`].
    pub fn drop_from(self, p: &mut SampledProfile) -> u64 {
        p.retain_samples(|s| !self.is_own(s));
        self.ns
    }
}

/// The profile [`analyse`] works on: `p` without the samples that are profmap's own
/// activity. The [`Analysis`]' per-sample tables (`call_tree.sample_categories`,
/// `sample_resources`, ...) index *its* samples: whoever reads them beside the samples
/// (the diagnosis, the exporters) must use this profile, not the recording's.
pub fn analysed_profile(p: &SampledProfile) -> std::borrow::Cow<'_, SampledProfile> {
    Analysed::of(p).profile
}

/// The profile [`analyse`] works on (see [`analysed_profile`]) and how much of the
/// recording's thread time was profmap's own and left out of it.
#[derive(Debug)]
pub struct Analysed<'a> {
    pub profile: std::borrow::Cow<'a, SampledProfile>,
    /// ns; the analysis warns of it.
    pub profiler_ns: u64,
}

impl Analysed<'_> {
    /// The analysed profile of `p`: `p` itself when it holds none of profmap's own
    /// activity, else a copy without it.
    pub fn of(p: &SampledProfile) -> Analysed<'_> {
        match OwnActivity::find(p) {
            Some(own) => Analysed {
                profile: std::borrow::Cow::Owned(p.filtered(|s| !own.is_own(s))),
                profiler_ns: own.ns,
            },
            None => Analysed::dropped(p, 0),
        }
    }

    /// `p`, whose own activity [`OwnActivity::drop_from`] dropped already (`profiler_ns`
    /// of it).
    pub fn dropped(p: &SampledProfile, profiler_ns: u64) -> Analysed<'_> {
        Analysed {
            profile: std::borrow::Cow::Borrowed(p),
            profiler_ns,
        }
    }

    /// Analyse it (what [`analyse`] does, for whoever needs the analysed profile too).
    pub fn analyse(&self) -> Analysis {
        analyse_own(&self.profile, self.profiler_ns)
    }
}

/// Analyse one sampled profile (see [`analysed_profile`] for which samples).
pub fn analyse(p: &SampledProfile) -> Analysis {
    Analysed::of(p).analyse()
}

/// Analyse `p`, which holds none of profmap's own activity (`profiler_ns` of it was
/// left out).
fn analyse_own(p: &SampledProfile, profiler_ns: u64) -> Analysis {
    let tree = CallTree::build(p);
    let classes = Classes::new(p, &tree);
    let mut builder = steps::StepBuilder::new(p, &tree, &classes);
    let mut steps = builder.build();
    let refs = std::mem::take(&mut builder.refs);
    let resources = resources::resource_use(p, &tree);
    stepres::fill(p, &tree, &refs, &resources, &mut steps);
    let hotspots = hotspots::hotspots(p, &tree);

    // Session class: per process, with its own child resolution, from the
    // critical-path time (waits for profiled work are that work's time).
    let mut per_class = [0u64; Classification::ALL.len()];
    for c in tree.children(0) {
        let n = &tree.nodes[c];
        for (acc, t) in per_class
            .iter_mut()
            .zip(classes.per_class(&n.crit_waits_ns.dense(), n.pid))
        {
            *acc += t;
        }
    }
    let classification = argmax(&per_class).unwrap_or(Classification::Unknown);
    let top_bottlenecks = bottleneck::top_bottlenecks(p, &tree, &classes, &steps, &refs);
    let bottleneck_detail =
        bottleneck::detail(p, &tree, classification, &per_class, &top_bottlenecks);

    let root = tree.root();
    let thread_wait_breakdown_ms = WaitCategory::ALL
        .iter()
        .map(|c| (c.key().to_string(), steps::ms(root.waits_ns.get(*c))))
        .collect();
    let wait_breakdown_ms = WaitCategory::ALL
        .iter()
        .map(|c| (c.key().to_string(), steps::ms(root.crit_waits_ns.get(*c))))
        .collect();

    let mut warnings = Vec::new();
    if profiler_ns > 0 {
        warnings.push(format!(
            "{} ms of the target's thread time was profmap's own work inside it (the \
             kernel copying perf events to new threads and processes at fork, \
             perf_event_init_task) and is left out; a program that forks much pays this \
             only while profiled",
            steps::ms(profiler_ns)
        ));
    }
    if p.samples.is_empty() {
        warnings.push("the recording holds no samples: nothing to analyse".to_string());
    }
    let no_stack: u64 = p
        .samples
        .iter()
        .filter(|s| s.stack.get().is_none())
        .map(|s| s.weight_ns)
        .sum();
    if no_stack > 0 {
        warnings.push(format!(
            "{:.1}% of the sampled wall time has no stack and is attributed to its process only",
            steps::pct(no_stack, root.wall_ns)
        ));
    }
    let other = root.wait_ns(WaitCategory::Other);
    if other > 0 && steps::pct(other, root.wall_ns) >= 5.0 {
        warnings.push(format!(
            "{:.1}% of the sampled wall time is off-CPU for a reason the kernel stack did not show",
            steps::pct(other, root.wall_ns)
        ));
    }

    if let Some(w) = captured_output_warning(&resources, &tree) {
        warnings.push(w);
    }
    if classification == Classification::Unknown && root.crit_ns > 0 {
        warnings.push(unknown_why(p, &tree));
    }
    match tree.critical {
        calltree::CriticalModel::ThreadTime if !p.samples.is_empty() => warnings.push(
            "no wake-up records (--no-wakeups, or sched:sched_waking needs root or \
             kernel.perf_event_paranoid \
             <= 1): waits are not followed to the thread that ended them, so shares are of \
             summed thread time, less waits for children and threads that were profiled"
                .to_string(),
        ),
        calltree::CriticalModel::Path {
            span_ns,
            unattributed_ns,
            ..
        } if span_ns > 0 && steps::pct(unattributed_ns, span_ns) >= 5.0 => warnings.push(format!(
            "{:.1}% of the run's wall time could not be charged to any thread on the critical \
             path (no activity recorded for the thread it led to)",
            steps::pct(unattributed_ns, span_ns)
        )),
        _ => {}
    }

    let round_trips = resources::round_trips(p, &tree.roles);
    let line_tables = lines::for_bottlenecks(p, &tree, &top_bottlenecks);
    Analysis {
        total_wall_ms: steps::ms(tree.total_wall_ns()),
        thread_time_ms: steps::ms(root.wall_ns),
        critical_path: CriticalPathSummary::of(&tree),
        total_cpu_ms: steps::ms(root.cpu_ns),
        call_tree: tree,
        steps,
        hotspots,
        classification,
        bottleneck_detail,
        top_bottlenecks,
        wait_breakdown_ms,
        thread_wait_breakdown_ms,
        round_trips,
        resources,
        diagnosis: diagnose::Diagnosis::default(),
        line_tables,
        escalation: Vec::new(),
        warnings,
    }
}

/// How long the run waited for profmap to read the target's output from its pipes,
/// when it is 1% of the run or more: a program that writes fast blocks on the pipe while
/// profmap logs what it read, which a terminal, a file or /dev/null would not make it do.
fn captured_output_warning(
    resources: &[resources::ResourceUse],
    tree: &CallTree,
) -> Option<String> {
    let captured = resources
        .iter()
        .filter(|r| r.name.starts_with(crate::profile::CAPTURED_OUTPUT));
    let (ms, calls) = captured.fold((0.0, 0), |(ms, n), r| {
        (ms + r.critical_ms.unwrap_or(r.blocked_ms), n + r.intervals)
    });
    let of = steps::ms(tree.total_wall_ns());
    (of > 0.0 && ms >= of / 100.0).then(|| {
        format!(
            "{ms:.1} ms ({:.1}% of the run) the target was blocked writing its output to \
             profmap, which reads it to log it in run.log ({calls} blocked writes): time an \
             unprofiled run writing to a terminal, a file or /dev/null spends differently. To \
             measure without it, send the output to a file in the command itself \
             (`profmap run -- sh -c 'prog > out.txt'`)",
            100.0 * ms / of
        )
    })
}

/// Why the session's time has no class: the unattributed categories' shares and the
/// evidence that was missing.
fn unknown_why(p: &SampledProfile, tree: &CallTree) -> String {
    let root = tree.root();
    let share = |c: WaitCategory| steps::pct(root.crit_waits_ns.get(c), root.crit_ns);
    let mut missing = Vec::new();
    if !p.sockets_recorded {
        missing.push("socket traffic (sock:sock_send_length/sock_recv_length)");
    }
    if !p.wakers_recorded {
        missing.push("wake-ups (sched:sched_waking)");
    }
    let missing = if missing.is_empty() {
        "every evidence source was recorded; the waits ended on descriptors no reply was \
         read from"
            .to_string()
    } else {
        format!(
            "not recorded: {} — run as root (or sudo sysctl kernel.perf_event_paranoid=-1) \
             to have them",
            missing.join(", ")
        )
    };
    format!(
        "classified Unknown: {:.1}% of the critical path is in event-loop waits (epoll, poll, \
         select) on descriptors that could not be named and {:.1}% off-CPU for reasons the \
         kernel stack did not show; {missing}",
        share(WaitCategory::Poll),
        share(WaitCategory::Other)
    )
}

/// Add the profiled run's own counters to the verdict where they are its evidence: a
/// Memory bottleneck's page faults and the memory they brought in (rusage of the tree).
pub fn add_run_evidence(a: &mut Analysis, run: &crate::profile::RunMeasurement) {
    let page = 4096u64;
    let faulted_mib = (run.minor_faults + run.major_faults) * page / (1 << 20);
    let peak_kb = run.tree_rss_peak_kb.unwrap_or(0).max(run.max_rss_kb);
    let evidence = format!(
        "the profiled run took {} minor and {} major page faults (about {faulted_mib} MiB of \
         4 KiB pages faulted in) and peaked at {} MiB resident",
        run.minor_faults,
        run.major_faults,
        peak_kb / 1024
    );
    for b in &mut a.top_bottlenecks {
        if b.class == Classification::Memory {
            b.why_chain.push(evidence.clone());
        }
    }
    if a.classification == Classification::Memory {
        a.bottleneck_detail = format!(
            "{} ({} page faults, about {faulted_mib} MiB faulted in)",
            a.bottleneck_detail.trim_end_matches('.'),
            run.minor_faults + run.major_faults
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_serializes_as_schema_strings() {
        for c in Classification::ALL {
            let json = serde_json::to_string(&c).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
    }

    #[test]
    fn argmax_prefers_larger_then_earlier() {
        let mut t = [0u64; Classification::ALL.len()];
        assert_eq!(argmax(&t), None);
        t[Classification::Idle as usize] = 5;
        t[Classification::Cpu as usize] = 5;
        assert_eq!(argmax(&t), Some(Classification::Cpu));
        t[Classification::Lock as usize] = 6;
        assert_eq!(argmax(&t), Some(Classification::Lock));
    }
}
