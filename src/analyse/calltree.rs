//! The call tree: every sample's weight added along its stack, with inclusive and self
//! time, on-CPU and off-CPU, split by [`WaitCategory`].
//!
//! Shape: node 0 is the session; under it one synthetic node per process ("name (pid)");
//! under a process with more than one sampled thread, one synthetic node per thread
//! ("name (tid)"); then function nodes. Invariants:
//!
//! - Single-threaded processes with the same name whose parents are the same (or are
//!   themselves one group) are one process node, "name (N processes)", keyed by the
//!   lowest pid: a shell loop running `true` 500 times is one step holding its time,
//!   as `perf report --sort comm` would show it, not 500 steps under 1 % each.
//! - Likewise the threads of one process that share a name (a worker pool), the main
//!   thread aside, are one thread node, "name (N threads)", keyed by the lowest tid.
//! - A function node is keyed by (function, module, kind), not by frame: frames are
//!   interned per call-site line, and two lines of `main` are still one `main`.
//! - Kernel frames are not nodes: they are the evidence for the sample's category (and
//!   the time lands on the innermost user or Python frame as self time). Only a stack
//!   with no user frame at all (a kernel thread, a failed user unwind) keeps its kernel
//!   frames, so its time is still named.
//! - Start-up plumbing at the root of a stack (`_start`, `__libc_start_main`,
//!   `start_thread`, `clone3`, Rust's `std::rt::lang_start` wrappers and the C `main`
//!   they sit under) is dropped, so a thread's first node is the program's entry.
//! - `wall_ns` of a node is the sum of the weights of the samples through it; the
//!   children's `wall_ns` plus `self_wall_ns` equals it. Same for `cpu_ns`, and the
//!   `waits_ns` entries sum to `wall_ns`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::profile::{FrameKind, SampleKind, SampledProfile, ThreadSample};

use super::FastMap;
use super::classify::{Categories, WaitCategory, categorize};
use super::critical;
use super::percat::{Dense, PerCategory};
use super::waited;

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeLabel {
    Session,
    Process {
        pid: i32,
    },
    Thread {
        pid: i32,
        tid: i32,
    },
    /// A function; the index is a representative frame in `SampledProfile::frames` (the
    /// one with the lowest line seen, the closest to the function's start).
    Function {
        frame: u32,
    },
}

/// No node: the root's parent, the end of a list of children. Node indices are u32: a
/// node is a distinct path of a thread, far fewer than 2^32 (each takes ~180 bytes).
const NONE: u32 = u32::MAX;

/// One node of the call tree. Times in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct CallNode {
    pub label: NodeLabel,
    /// "name (pid)", "name (tid)" or the function name: shared by the nodes of one
    /// function (a program with many threads and paths has it in thousands of nodes).
    pub name: Arc<str>,
    /// Pid of the process this node belongs to (0 for the session).
    pub pid: i32,
    /// The parent's index ([`NONE`] for the root): see [`CallNode::parent`].
    up: u32,
    /// The first child and the next sibling ([`NONE`]: none), children in the order
    /// they were made: see [`CallTree::children`]. Links, not a list per node: a
    /// program with many threads and distinct stacks has hundreds of thousands of
    /// nodes (a `Vec` was 24 bytes a node plus an allocation per parent).
    first_child: u32,
    next_sibling: u32,
    pub wall_ns: u64,
    pub cpu_ns: u64,
    pub self_wall_ns: u64,
    pub self_cpu_ns: u64,
    /// Inclusive time per category (sparse: see [`PerCategory`]).
    pub waits_ns: PerCategory,
    /// Samples (on-CPU ticks and off-CPU intervals) through this node.
    pub samples: u64,
    pub off_cpu_intervals: u64,
    /// Inclusive critical-path time (see `critical`): the part of the session's wall
    /// time charged to this node. Without wake-up records, the thread time less the
    /// waits for profiled work (see [`CallTree::critical`]).
    pub crit_ns: u64,
    pub self_crit_ns: u64,
    /// Inclusive critical-path time per category.
    pub crit_waits_ns: PerCategory,
}

impl CallNode {
    fn new(label: NodeLabel, name: Arc<str>, pid: i32, up: u32) -> Self {
        CallNode {
            label,
            name,
            pid,
            up,
            first_child: NONE,
            next_sibling: NONE,
            wall_ns: 0,
            cpu_ns: 0,
            self_wall_ns: 0,
            self_cpu_ns: 0,
            waits_ns: PerCategory::default(),
            samples: 0,
            off_cpu_intervals: 0,
            crit_ns: 0,
            self_crit_ns: 0,
            crit_waits_ns: PerCategory::default(),
        }
    }

    pub fn wait_ns(&self, c: WaitCategory) -> u64 {
        self.waits_ns.get(c)
    }

    /// The parent node's index; `None` for the root.
    pub fn parent(&self) -> Option<usize> {
        (self.up != NONE).then_some(self.up as usize)
    }

    pub fn is_synthetic(&self) -> bool {
        !matches!(self.label, NodeLabel::Function { .. })
    }
}

/// The whole call tree of a session. `nodes[0]` is the session root.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTree {
    pub nodes: Vec<CallNode>,
    /// Processes (group representatives) with at least one child process that has
    /// samples.
    pub parents_of_profiled: HashSet<i32>,
    /// Which processes share a node (see the module docs).
    pub groups: ProcessGroups,
    /// How the critical-path figures (`crit_ns`) were made.
    pub critical: CriticalModel,
    /// Each sample's category, by index into `SampledProfile::samples`.
    pub sample_categories: Categories,
    /// (pid, tid, leaf stack) → the deepest node of such samples (see
    /// [`CallTree::node_of`]): per distinct stack of a thread, not per sample.
    sample_node: FastMap<(i32, i32, Option<u32>), usize>,
    /// What the samples waited on (index into `resources`; see `waited`).
    pub sample_resources: waited::SampleResources,
    /// Critical-path time charged to the samples of `sample_resources`, ns (their whole
    /// weight when waits are not followed; see `CriticalModel`), summed per resource and
    /// node: the tables read only those sums.
    pub resource_crit: waited::ResourceCrit,
    /// Each resource's role and protocol.
    pub roles: waited::Roles,
}

/// Where the `crit_ns` figures of a [`CallTree`] come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CriticalModel {
    /// The critical path through the recorded wake-ups (`critical`).
    Path {
        span_ns: u64,
        unattributed_ns: u64,
        /// Off-CPU time that was followed to the thread that ended it.
        followed_ns: u64,
        /// On-CPU time on the path that no sample covered.
        unsampled_ns: u64,
    },
    /// No wake-up records: summed thread time, less the waits for work that was
    /// profiled itself ([`CallTree::explained`]).
    ThreadTime,
}

/// Processes that share one process node (repeated runs of one program), and threads
/// that share one thread node (a pool of workers of one name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessGroups {
    /// Pid → the pid its process node is keyed by; pids not in it are their own.
    rep: HashMap<i32, i32>,
    /// Representative pid → how many processes its node stands for (groups of 2+).
    sizes: HashMap<i32, usize>,
    /// Tid → the tid its thread node is keyed by; tids not in it are their own.
    thread_rep: HashMap<i32, i32>,
    /// Representative tid → how many threads its node stands for (groups of 2+).
    thread_sizes: HashMap<i32, usize>,
}

impl ProcessGroups {
    /// The groups of a profile's processes.
    pub fn of(p: &SampledProfile) -> ProcessGroups {
        let rep = process_groups(p, &multi_threaded(p));
        let mut sizes: HashMap<i32, usize> = HashMap::new();
        for r in rep.values() {
            *sizes.entry(*r).or_default() += 1;
        }
        sizes.retain(|_, n| *n > 1);
        let rep = rep
            .into_iter()
            .filter(|(_, r)| sizes.contains_key(r))
            .collect();
        let (thread_rep, thread_sizes) = thread_groups(p);
        ProcessGroups {
            rep,
            sizes,
            thread_rep,
            thread_sizes,
        }
    }

    /// The tid whose thread node holds `tid`'s samples.
    pub fn thread_group_of(&self, tid: i32) -> i32 {
        self.thread_rep.get(&tid).copied().unwrap_or(tid)
    }

    /// "name (tid)", or "name (N threads)" for a group.
    pub fn thread_label(&self, p: &SampledProfile, pid: i32, tid: i32) -> String {
        let tid = self.thread_group_of(tid);
        match self.thread_sizes.get(&tid) {
            Some(n) => format!("{} ({n} threads)", thread_basename(p, pid, tid)),
            None => thread_name(p, pid, tid),
        }
    }

    /// The pid whose process node holds `pid`'s samples.
    pub fn group_of(&self, pid: i32) -> i32 {
        self.rep.get(&pid).copied().unwrap_or(pid)
    }

    /// How many processes share `pid`'s node, when more than one.
    pub fn size(&self, pid: i32) -> Option<usize> {
        self.sizes.get(&self.group_of(pid)).copied()
    }

    /// "name (pid)", or "name (N processes)" for a group.
    pub fn label(&self, p: &SampledProfile, pid: i32) -> String {
        let pid = self.group_of(pid);
        match self.size(pid) {
            Some(n) => format!("{} ({n} processes)", process_basename(p, pid)),
            None => process_name(p, pid),
        }
    }
}

/// Processes with more than one sampled thread.
pub fn multi_threaded(p: &SampledProfile) -> BTreeSet<i32> {
    let mut tids: HashMap<i32, BTreeSet<i32>> = HashMap::new();
    for (pid, tid) in p.samples.distinct_threads() {
        tids.entry(pid).or_default().insert(tid);
    }
    tids.into_iter()
        .filter(|(_, t)| t.len() > 1)
        .map(|(pid, _)| pid)
        .collect()
}

/// Sample `s`'s deepest node in a (pid, tid, leaf stack) → node map.
fn node_in(map: &FastMap<(i32, i32, Option<u32>), usize>, s: &ThreadSample) -> Option<usize> {
    map.get(&(s.pid, s.tid, s.stack.get())).copied()
}

/// Child lookup key while building.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Process(i32),
    Thread(i32),
    Function(u32),
}

/// True for frames that only start a program or a thread.
pub fn is_plumbing(function: &str) -> bool {
    const EXACT: &[&str] = &[
        "_start",
        "__libc_start_main",
        "__libc_start_main_impl",
        "__libc_start_call_main",
        "start_thread",
        "clone",
        "clone3",
        "__clone",
        "__clone3",
        "__rust_try",
        "thread_start",
    ];
    const PREFIXES: &[&str] = &[
        "std::rt::",
        "std::panicking::try",
        "std::panicking::catch_unwind",
        "std::panic::catch_unwind",
        "core::ops::function::FnOnce::call_once",
        "<core::ops::function::",
        "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce",
        "std::sys::backtrace::__rust_begin_short_backtrace",
        "std::sys::pal::unix::thread::Thread::new::thread_start",
        "std::sys::thread::unix::Thread::new::thread_start",
        "std::thread::Builder::spawn_unchecked_",
        "core::panic::unwind_safe::",
        "<core::panic::unwind_safe::",
    ];
    let f = function.split(".llvm.").next().unwrap_or(function);
    EXACT.contains(&f) || PREFIXES.iter().any(|p| f.starts_with(p))
}

/// How many leading frames (root first) are plumbing. Keeps at least one frame.
pub fn plumbing_prefix(names: &[&str]) -> usize {
    let mut i = 0;
    while i + 1 < names.len() {
        let here = names[i];
        // Rust's C `main` only calls into `std::rt::lang_start*`.
        let rust_main = here == "main" && names[i + 1].starts_with("std::rt::");
        if is_plumbing(here) || rust_main {
            i += 1;
        } else {
            break;
        }
    }
    // The program's own `main` (C `main`, Rust `crate::main` — whose inlined frame may be
    // named just `main`) is the entry: skip any runtime wrapper frames before it.
    let window = names.len().saturating_sub(1).min(i + 40);
    if let Some(j) = (i..window).rev().find(|&j| is_main(names[j])) {
        i = j;
    }
    i
}

fn is_main(f: &str) -> bool {
    f == "main" || f.ends_with("::main")
}

impl CallTree {
    /// The deepest node of sample `s` (of the profile the tree was built from): its
    /// thread's node for its stack.
    pub fn node_of(&self, s: &ThreadSample) -> Option<usize> {
        node_in(&self.sample_node, s)
    }

    /// Build the tree from every sample of `p`.
    pub fn build(p: &SampledProfile) -> CallTree {
        Builder::new(p).run()
    }

    pub fn root(&self) -> &CallNode {
        &self.nodes[0]
    }

    /// The children of node `i`, in the order they were made.
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.nodes.get(i).map_or(NONE, |n| n.first_child);
        std::iter::successors((first != NONE).then_some(first as usize), |&c| {
            let next = self.nodes[c].next_sibling;
            (next != NONE).then_some(next as usize)
        })
    }

    /// Session wall time, the denominator of every share: the critical path's length
    /// (the sum of the `crit_ns` it charged). Without wake-up records, the sum of all
    /// sample weights less the waits for work whose own time is in the profile (a shell
    /// waiting 1 s for a program that runs 1 s is 1 s of session time, not 2).
    pub fn total_wall_ns(&self) -> u64 {
        self.nodes[0].crit_ns
    }

    /// Node `i`'s critical-path time per category less its children's: what it holds
    /// itself, dense.
    pub fn self_crit_waits(&self, i: usize) -> Dense {
        let n = &self.nodes[i];
        let mut own = n.crit_waits_ns.dense();
        for ch in self.children(i) {
            for (c, x) in self.nodes[ch].crit_waits_ns.iter() {
                own[c.index()] = own[c.index()].saturating_sub(x);
            }
        }
        own
    }

    /// The frame of the nearest function node, from `node` up, that was not inlined:
    /// the function whose machine code the samples of `node` ran in.
    pub fn containing_function(&self, p: &SampledProfile, node: usize) -> Option<u32> {
        let mut cur = Some(node);
        while let Some(i) = cur {
            match self.nodes[i].label {
                NodeLabel::Function { frame } if !p.frames[frame as usize].inlined => {
                    return Some(frame);
                }
                NodeLabel::Function { .. } => cur = self.nodes[i].parent(),
                _ => return None,
            }
        }
        None
    }

    /// True when process `pid` has a child process with samples of its own.
    pub fn has_profiled_child(&self, pid: i32) -> bool {
        self.parents_of_profiled
            .contains(&self.groups.group_of(pid))
    }

    /// The wait categories of process `pid` whose time other profiled work stands for:
    /// waits for another thread (a join, a condition variable: that thread is in the
    /// process, so always profiled), and waits for child processes when its children
    /// were profiled.
    pub fn explained(&self, pid: i32) -> &'static [WaitCategory] {
        explained_categories(self.has_profiled_child(pid))
    }
}

struct Builder<'a> {
    p: &'a SampledProfile,
    nodes: Vec<CallNode>,
    /// Each node's last child so far ([`NONE`]: none), to append the next one.
    last_child: Vec<u32>,
    index: FastMap<(usize, Key), usize>,
    /// Frame index → function id (frames of one function share it).
    frame_fn: Vec<u32>,
    /// Function id → representative frame.
    fn_frame: Vec<u32>,
    /// Function id → its name, once a node has it.
    fn_name: Vec<Option<Arc<str>>>,
    /// Leaf stack → (function path, root first, plumbing and kernel frames dropped).
    paths: FastMap<u32, Vec<u32>>,
    categories: FastMap<(Option<u32>, SampleKind), WaitCategory>,
    multi_thread: BTreeSet<i32>,
    groups: ProcessGroups,
    /// (pid, tid, leaf stack) → the deepest node of such samples: one lookup per sample
    /// once the first of them has made the nodes.
    sample_node: FastMap<(i32, i32, Option<u32>), usize>,
}

impl<'a> Builder<'a> {
    fn new(p: &'a SampledProfile) -> Self {
        let (frame_fn, fn_frame) = function_ids(p);
        Builder {
            p,
            nodes: vec![CallNode::new(NodeLabel::Session, Arc::from(""), 0, NONE)],
            last_child: vec![NONE],
            index: FastMap::default(),
            frame_fn,
            fn_name: vec![None; fn_frame.len()],
            fn_frame,
            paths: FastMap::default(),
            categories: FastMap::default(),
            multi_thread: multi_threaded(p),
            groups: ProcessGroups::of(p),
            sample_node: FastMap::default(),
        }
    }

    fn child(&mut self, parent: usize, key: Key, pid: i32) -> usize {
        if let Some(&i) = self.index.get(&(parent, key)) {
            return i;
        }
        let (label, name) = match key {
            Key::Process(pid) => (
                NodeLabel::Process { pid },
                self.groups.label(self.p, pid).into(),
            ),
            Key::Thread(tid) => (
                NodeLabel::Thread { pid, tid },
                self.groups.thread_label(self.p, pid, tid).into(),
            ),
            Key::Function(f) => {
                let frame = self.fn_frame[f as usize];
                let p = self.p;
                let name = self.fn_name[f as usize]
                    .get_or_insert_with(|| p.frames[frame as usize].function.as_str().into());
                (NodeLabel::Function { frame }, Arc::clone(name))
            }
        };
        let i = self.nodes.len();
        self.nodes
            .push(CallNode::new(label, name, pid, parent as u32));
        self.last_child.push(NONE);
        match self.last_child[parent] {
            NONE => self.nodes[parent].first_child = i as u32,
            last => self.nodes[last as usize].next_sibling = i as u32,
        }
        self.last_child[parent] = i as u32;
        self.index.insert((parent, key), i);
        i
    }

    fn path(&mut self, leaf: u32) -> Vec<u32> {
        if let Some(p) = self.paths.get(&leaf) {
            return p.clone();
        }
        let ids = crate::profile::analysed_frame_ids(self.p, leaf);
        let frames = &self.p.frames;
        let any_user = ids
            .iter()
            .any(|&f| frames[f as usize].kind != FrameKind::Kernel);
        let kept: Vec<u32> = ids
            .into_iter()
            .filter(|&f| !any_user || frames[f as usize].kind != FrameKind::Kernel)
            .collect();
        let names: Vec<&str> = kept
            .iter()
            .map(|&f| frames[f as usize].function.as_str())
            .collect();
        let skip = plumbing_prefix(&names);
        let path: Vec<u32> = kept[skip..]
            .iter()
            .map(|&f| self.frame_fn[f as usize])
            .collect();
        self.paths.insert(leaf, path.clone());
        path
    }

    fn category(&mut self, stack: Option<u32>, kind: SampleKind) -> WaitCategory {
        if let Some(&c) = self.categories.get(&(stack, kind)) {
            return c;
        }
        let frames = stack.map(|s| self.p.stack_frames(s)).unwrap_or_default();
        let c = categorize(kind, &frames);
        self.categories.insert((stack, kind), c);
        c
    }

    fn run(mut self) -> CallTree {
        let sampled: HashSet<i32> = self.p.sampled_threads().iter().map(|t| t.0).collect();
        let parents_of_profiled: HashSet<i32> = self
            .p
            .processes
            .iter()
            .filter(|c| sampled.contains(&c.pid))
            .filter_map(|c| c.ppid)
            .map(|pp| self.groups.group_of(pp))
            .collect();
        let p = self.p;
        let first: Categories = (p.samples.iter())
            .map(|s| self.category(s.stack.get(), s.kind))
            .collect();
        let resources = waited::sample_resources(self.p, &first);
        let roles = waited::Roles::of(self.p);
        let mut cats = Categories::default();
        for ((i, s), cat) in self.p.samples.iter().enumerate().zip(first.iter()) {
            let cat = waited::category(self.p, i, cat, resources.get(i), &roles);
            cats.push(cat);
            self.add_sample(&s, cat);
        }
        drop(first);
        let cat_of = |i: usize| cats.get(i).unwrap_or(WaitCategory::Other);
        // The critical path's charges go straight into the tree (and, for the samples
        // that waited on a resource, beside them): no table per sample.
        let mut resource_crit = waited::ResourceCrit::default();
        let walked = critical::critical_path(p, &cat_of, &mut |c| {
            let i = c.sample as usize;
            let leaf = p.samples.get(i).and_then(|s| self.node_of(&s));
            if let (Some(leaf), Some(cat)) = (leaf, cats.get(i)) {
                self.add_crit(leaf, c.ns, c.category.unwrap_or(cat));
            }
            if let Some(r) = resources.get(i) {
                resource_crit.add(r, leaf, c.ns);
            }
        });
        let critical = match walked {
            Some(cp) => self.add_critical_path(&cp),
            None => {
                let unexplained = |groups: &ProcessGroups, s: &ThreadSample, cat| {
                    let children = parents_of_profiled.contains(&groups.group_of(s.pid));
                    !explained_categories(children).contains(&cat)
                };
                for (i, s) in p.samples.iter().enumerate() {
                    if unexplained(&self.groups, &s, cat_of(i))
                        && let Some(leaf) = self.node_of(&s)
                    {
                        self.add_crit(leaf, s.weight_ns, cat_of(i));
                    }
                }
                for (i, r) in resources.iter() {
                    if let Some(s) = p.samples.get(i)
                        && unexplained(&self.groups, &s, cat_of(i))
                    {
                        resource_crit.add(r, self.node_of(&s), s.weight_ns);
                    }
                }
                CriticalModel::ThreadTime
            }
        };
        CallTree {
            nodes: self.nodes,
            parents_of_profiled,
            groups: self.groups,
            critical,
            sample_categories: cats,
            sample_node: self.sample_node,
            sample_resources: resources,
            resource_crit,
            roles,
        }
    }

    /// The deepest node of sample `s`, once [`Builder::add_sample`] has added it.
    fn node_of(&self, s: &ThreadSample) -> Option<usize> {
        node_in(&self.sample_node, s)
    }

    /// Add one sample's thread time along its stack; returns its deepest node.
    fn add_sample(&mut self, s: &ThreadSample, cat: WaitCategory) -> usize {
        let on_cpu = matches!(s.kind, SampleKind::OnCpu);
        let at = match self.sample_node.get(&(s.pid, s.tid, s.stack.get())) {
            Some(&at) => at,
            None => {
                let mut at = self.thread_node(s.pid, s.tid);
                if let Some(leaf) = s.stack.get() {
                    let pid = self.groups.group_of(s.pid);
                    for f in self.path(leaf) {
                        at = self.child(at, Key::Function(f), pid);
                    }
                }
                self.sample_node.insert((s.pid, s.tid, s.stack.get()), at);
                at
            }
        };
        let mut cur = Some(at);
        while let Some(n) = cur {
            let node = &mut self.nodes[n];
            node.wall_ns += s.weight_ns;
            node.waits_ns.add(cat, s.weight_ns);
            node.samples += 1;
            if on_cpu {
                node.cpu_ns += s.weight_ns;
            } else {
                node.off_cpu_intervals += 1;
            }
            cur = node.parent();
        }
        let leaf = &mut self.nodes[at];
        leaf.self_wall_ns += s.weight_ns;
        if on_cpu {
            leaf.self_cpu_ns += s.weight_ns;
        }
        at
    }

    /// The node a thread's samples start from: its process node, or its thread node
    /// when the process has several sampled threads.
    fn thread_node(&mut self, pid: i32, tid: i32) -> usize {
        let group = self.groups.group_of(pid);
        let at = self.child(0, Key::Process(group), group);
        if self.multi_thread.contains(&pid) {
            let t = self.groups.thread_group_of(tid);
            self.child(at, Key::Thread(t), group)
        } else {
            at
        }
    }

    /// Add `ns` of critical-path time in category `cat` at `node` (self) and above.
    fn add_crit(&mut self, node: usize, ns: u64, cat: WaitCategory) {
        self.nodes[node].self_crit_ns += ns;
        let mut cur = Some(node);
        while let Some(n) = cur {
            let node = &mut self.nodes[n];
            node.crit_ns += ns;
            node.crit_waits_ns.add(cat, ns);
            cur = node.parent();
        }
    }

    /// The critical path's time no sample holds (its charges to samples were added as
    /// the walk found them).
    fn add_critical_path(&mut self, cp: &critical::CriticalPath) -> CriticalModel {
        let mut unsampled_ns = 0;
        for u in &cp.unsampled {
            let node = self.thread_node(u.pid, u.tid);
            let cat = if u.via_lock {
                WaitCategory::Lock
            } else {
                WaitCategory::Cpu
            };
            self.add_crit(node, u.ns, cat);
            unsampled_ns += u.ns;
        }
        CriticalModel::Path {
            span_ns: cp.span_ns,
            unattributed_ns: cp.unattributed_ns,
            followed_ns: cp.followed_ns,
            unsampled_ns,
        }
    }
}

/// The wait categories that profiled work stands for, in a process whose children
/// were (`true`) or were not profiled (see [`CallTree::explained`]).
fn explained_categories(children_profiled: bool) -> &'static [WaitCategory] {
    if children_profiled {
        &[WaitCategory::Child, WaitCategory::Thread]
    } else {
        &[WaitCategory::Thread]
    }
}

/// Frames of one function — same name, module and kind, whatever the line — share a
/// function id. Returns each frame's function id, and each function's representative
/// frame (the one with the lowest line seen, the closest to the function's start).
pub fn function_ids(p: &SampledProfile) -> (Vec<u32>, Vec<u32>) {
    let mut ids: HashMap<(&str, Option<&str>, FrameKind), u32> = HashMap::new();
    let mut frame_fn = Vec::with_capacity(p.frames.len());
    let mut fn_frame: Vec<u32> = Vec::new();
    for (i, f) in p.frames.iter().enumerate() {
        let key = (f.function.as_str(), f.module.as_deref(), f.kind);
        let next = fn_frame.len() as u32;
        let id = *ids.entry(key).or_insert(next);
        if id == next {
            fn_frame.push(i as u32);
        } else {
            let rep = &p.frames[fn_frame[id as usize] as usize];
            let better = match (f.line, rep.line) {
                (Some(a), Some(b)) => a < b,
                (Some(_), None) => true,
                _ => false,
            };
            if better {
                fn_frame[id as usize] = i as u32;
            }
        }
        frame_fn.push(id);
    }
    (frame_fn, fn_frame)
}

/// "name (pid)"; the name is "pid" when the process was not described.
pub fn process_name(p: &SampledProfile, pid: i32) -> String {
    format!("{} ({pid})", process_basename(p, pid))
}

/// A process's name; "pid" when it was not described.
fn process_basename(p: &SampledProfile, pid: i32) -> &str {
    p.processes
        .iter()
        .find(|pr| pr.pid == pid)
        .map_or("pid", |pr| pr.name.as_str())
}

/// Pid → representative pid of its group: single-threaded processes of the same name
/// whose parents are in the same group (or are the same process) share one pid, the
/// first resolved in pid order. Multi-threaded processes are their own group.
fn process_groups(p: &SampledProfile, multi_thread: &BTreeSet<i32>) -> HashMap<i32, i32> {
    let by_pid: HashMap<i32, &crate::profile::ProcessInfo> =
        p.processes.iter().map(|pr| (pr.pid, pr)).collect();
    let mut pids: Vec<i32> = by_pid.keys().copied().collect();
    pids.sort_unstable();
    let mut rep: HashMap<i32, i32> = HashMap::new();
    let mut first: HashMap<(&str, i32), i32> = HashMap::new();
    for &pid in &pids {
        if rep.contains_key(&pid) {
            continue;
        }
        // Walk up to the nearest ancestor already resolved (or outside the profile),
        // then resolve back down, so parents are always resolved before children.
        let mut chain = vec![pid];
        let mut cur = pid;
        while let Some(pp) = by_pid.get(&cur).and_then(|i| i.ppid) {
            if rep.contains_key(&pp) || !by_pid.contains_key(&pp) || chain.contains(&pp) {
                break;
            }
            chain.push(pp);
            cur = pp;
        }
        for &q in chain.iter().rev() {
            let Some(info) = by_pid.get(&q) else {
                continue;
            };
            let parent = info
                .ppid
                .map_or(0, |pp| rep.get(&pp).copied().unwrap_or(pp));
            let r = if multi_thread.contains(&q) {
                q
            } else {
                *first.entry((info.name.as_str(), parent)).or_insert(q)
            };
            rep.insert(q, r);
        }
    }
    rep
}

/// Threads of one sampled process with the same name, the main thread (tid = pid)
/// aside: tid → lowest tid of its group, and group sizes (groups of 2+ only).
fn thread_groups(p: &SampledProfile) -> (HashMap<i32, i32>, HashMap<i32, usize>) {
    let sampled = p.sampled_threads();
    let sampled_pids: HashSet<i32> = sampled.iter().map(|&(pid, _)| pid).collect();
    let mut by_name: HashMap<(i32, &str), Vec<i32>> = HashMap::new();
    for t in &p.threads {
        // Threads with no sample count too, in a process that has some: the critical
        // path charges them what they ran unsampled (see `critical::Walk::wait`).
        if t.tid != t.pid && sampled_pids.contains(&t.pid) {
            by_name
                .entry((t.pid, t.name.as_str()))
                .or_default()
                .push(t.tid);
        }
    }
    let (mut rep, mut sizes) = (HashMap::new(), HashMap::new());
    for tids in by_name.into_values().filter(|t| t.len() > 1) {
        let first = tids.iter().copied().min().unwrap_or_default();
        sizes.insert(first, tids.len());
        for tid in tids {
            rep.insert(tid, first);
        }
    }
    (rep, sizes)
}

/// "name (tid)"; the name is "tid" when the thread was not described.
pub fn thread_name(p: &SampledProfile, pid: i32, tid: i32) -> String {
    format!("{} ({tid})", thread_basename(p, pid, tid))
}

/// A thread's name; "tid" when it was not described.
fn thread_basename(p: &SampledProfile, pid: i32, tid: i32) -> &str {
    p.threads
        .iter()
        .find(|t| t.pid == pid && t.tid == tid)
        .map_or("tid", |t| t.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_named_threads_group_but_not_the_main_thread() {
        let thread = |pid, tid, name: &str| crate::profile::ThreadInfo {
            pid,
            tid,
            name: name.into(),
        };
        let sample = |pid, tid| crate::profile::ThreadSample {
            pid,
            tid,
            time_ns: 0,
            stack: None.into(),
            weight_ns: 1,
            kind: SampleKind::OnCpu,
        };
        let p = SampledProfile {
            threads: vec![
                thread(10, 10, "app"),
                thread(10, 12, "app"),
                thread(10, 11, "app"),
                thread(10, 13, "io"),
                thread(10, 14, "worker"),
                thread(20, 21, "worker"),
            ],
            samples: [(10, 10), (10, 11), (10, 12), (10, 13), (10, 14), (20, 21)]
                .into_iter()
                .map(|(p, t)| sample(p, t))
                .collect(),
            ..Default::default()
        };
        let g = ProcessGroups::of(&p);
        assert_eq!(g.thread_group_of(10), 10);
        assert_eq!((g.thread_group_of(11), g.thread_group_of(12)), (11, 11));
        assert_eq!(g.thread_label(&p, 10, 12), "app (2 threads)");
        assert_eq!(g.thread_label(&p, 10, 10), "app (10)");
        // One of a name per process: no group, across processes neither.
        assert_eq!(g.thread_label(&p, 10, 14), "worker (14)");
        assert_eq!(g.thread_group_of(21), 21);
    }

    #[test]
    fn processes_group_by_name_and_parent_group() {
        let proc = |pid, ppid, name: &str| crate::profile::ProcessInfo {
            pid,
            ppid,
            name: name.into(),
            exe: None,
        };
        let p = SampledProfile {
            processes: vec![
                proc(10, Some(1), "make"),
                // Two shells from make, each running cc: both pairs group.
                proc(12, Some(10), "sh"),
                proc(11, Some(10), "sh"),
                proc(13, Some(11), "cc"),
                proc(14, Some(12), "cc"),
                // Same name, another parent group: its own.
                proc(15, Some(10), "cc"),
                // Multi-threaded: never grouped.
                proc(16, Some(10), "sh"),
            ],
            ..Default::default()
        };
        let g = process_groups(&p, &BTreeSet::from([16]));
        assert_eq!(g[&10], 10);
        assert_eq!((g[&11], g[&12]), (11, 11));
        assert_eq!((g[&13], g[&14]), (13, 13));
        assert_eq!(g[&15], 15);
        assert_eq!(g[&16], 16);
    }

    #[test]
    fn c_and_rust_start_up_plumbing_is_skipped() {
        let c = [
            "_start",
            "__libc_start_main",
            "__libc_start_call_main",
            "main",
            "work",
        ];
        assert_eq!(plumbing_prefix(&c), 3);
        let rust = [
            "_start",
            "__libc_start_main_impl",
            "main",
            "std::rt::lang_start_internal",
            "std::panicking::try::do_call",
            "std::rt::lang_start::{{closure}}",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "core::ops::function::FnOnce::call_once",
            "myprog::main",
            "myprog::work",
        ];
        assert_eq!(rust[plumbing_prefix(&rust)], "myprog::main");
        // Inlined wrappers between the runtime and the program's main (short DWARF names).
        let inlined = [
            "_start",
            "__libc_start_call_main",
            "main",
            "std::rt::lang_start_internal",
            "<&dyn core::ops::function::Fn<()> as core::ops::function::FnOnce<()>>::call_once",
            "{closure#0}<()>",
            "__rust_begin_short_backtrace<fn()>",
            "main",
            "compute",
        ];
        assert_eq!(plumbing_prefix(&inlined), 7);
        let thread = ["clone3", "start_thread", "worker"];
        assert_eq!(plumbing_prefix(&thread), 2);
        // Never empties a stack.
        assert_eq!(plumbing_prefix(&["_start", "clone3"]), 1);
        // Plumbing is only skipped at the root.
        assert_eq!(plumbing_prefix(&["main", "clone"]), 0);
    }
}
