//! Where a sample's time went: one [`WaitCategory`] per sample, from its kind, its
//! switch-out state and its kernel frames.
//!
//! On-CPU samples are `cpu`, except those whose kernel frames show the CPU faulting in
//! or clearing memory for the program ([`MEMORY_WORK`]: the page-fault path,
//! `clear_page*`, `clear_user*`): `memory`, classified Memory with blocking page faults —
//! a program that touches 1 GiB of fresh pages is bound by memory, not by its code.
//! Off-CPU intervals are attributed from the evidence the
//! recording carries, in this order (DESIGN.md §4, points 2 and 3):
//!
//! 1. a `Preempted` thread was runnable and waiting for a CPU: `runqueue` (CPU contention);
//! 2. the kernel stack at switch-out, matched against [`KERNEL_RULES`]. The table is
//!    ordered by priority: the first rule any frame of the stack matches wins, so
//!    specific paths (a pipe read, a socket read) come before the generic ones they pass
//!    through (`vfs_read`);
//! 3. a futex wait (or a wait with no kernel stack) is refined by the user stack above it,
//!    [`USER_RULES`]: a mutex is `lock` (contention), but a join, a condition variable or
//!    a parked thread is `thread` — waiting for another thread to finish or to signal,
//!    which is that thread's work (or idleness), not contention;
//! 4. nothing matched: `other`.
//!
//! The category then maps to a bottleneck [`Classification`]; `child` and `thread` are
//! the exceptions, resolved by the caller to the class of the work they wait for.
//!
//! Each category's facts (key, description, class, flamegraph colour) live in one row of
//! [`CATEGORY_FACTS`]; every reader (the maps' keys, sentences, classes, the
//! flamegraph's palette) goes through it.

use crate::profile::{Frame, FrameKind, SampleKind, WaitState};

use super::Classification;

/// Where a slice of wall time went. The keys of every `wait_breakdown_ms` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitCategory {
    /// Running on a CPU.
    Cpu,
    /// Runnable but preempted, waiting for a CPU.
    Runqueue,
    File,
    Network,
    Lock,
    Sleep,
    /// Waiting for a child process (wait4/waitid).
    Child,
    /// Waiting for another thread of the process to finish or to signal (join,
    /// condition variable, park).
    Thread,
    Pipe,
    /// Waiting for events on a set of descriptors (epoll, poll, select): sockets, pipes
    /// or timers — which one is not known from the stack.
    Poll,
    PageFault,
    /// On-CPU in the kernel faulting in or clearing memory for the program.
    Memory,
    /// Blocked on a socket whose peer is a database (by protocol, port or process).
    Db,
    /// Blocked on a socket whose peer is on another host.
    External,
    /// Waiting for work that comes from outside the run or never came: accept on a
    /// listening socket, an event loop woken by nothing the run did.
    Idle,
    Other,
}

/// A colour as red, green, blue (the flamegraph's off-CPU leaves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// Everything known about one [`WaitCategory`], in one row of [`CATEGORY_FACTS`].
#[derive(Debug, Clone, Copy)]
pub struct CategoryFacts {
    /// The category this row describes (rows are in declaration order of the enum).
    pub category: WaitCategory,
    /// The key used in every `wait_breakdown_ms` map and in `[off-cpu: KEY]` frames.
    pub key: &'static str,
    /// A few words for sentences ("on-CPU", "sleeping", ...).
    pub description: &'static str,
    /// The bottleneck class of time in this category. `Child` and `Thread` have no class
    /// of their own (it is the awaited work's): theirs is `Idle`, the answer when that
    /// work is unknown.
    pub class: Classification,
    /// Fixed colour of the category's off-CPU leaf frame in the flamegraph (blues and
    /// purples for waits, grey for unattributed, red for the run queue).
    pub colour: Rgb,
}

/// One row per category, in the enum's order: adding a category is one row here.
pub const CATEGORY_FACTS: [CategoryFacts; 16] = {
    use Classification as C;
    use WaitCategory as W;
    const fn row(
        category: W,
        key: &'static str,
        description: &'static str,
        class: C,
        colour: Rgb,
    ) -> CategoryFacts {
        CategoryFacts {
            category,
            key,
            description,
            class,
            colour,
        }
    }
    [
        row(W::Cpu, "cpu", "on-CPU", C::Cpu, Rgb(230, 120, 60)),
        row(
            W::Runqueue,
            "runqueue",
            "runnable but waiting for a CPU (preempted)",
            C::Cpu,
            Rgb(215, 60, 60),
        ),
        row(
            W::File,
            "file",
            "blocked on file I/O",
            C::IoFile,
            Rgb(70, 170, 190),
        ),
        row(
            W::Network,
            "network",
            "blocked on network I/O",
            C::IoNetwork,
            Rgb(70, 115, 225),
        ),
        row(
            W::Lock,
            "lock",
            "blocked on a lock (futex)",
            C::Lock,
            Rgb(170, 120, 215),
        ),
        row(
            W::Sleep,
            "sleep",
            "sleeping (nanosleep)",
            C::Idle,
            Rgb(150, 190, 240),
        ),
        row(
            W::Child,
            "child",
            "waiting for a child process",
            C::Idle,
            Rgb(140, 150, 200),
        ),
        row(
            W::Thread,
            "thread",
            "waiting for another thread (join, condition variable)",
            C::Idle,
            Rgb(125, 135, 185),
        ),
        row(
            W::Pipe,
            "pipe",
            "blocked on a pipe",
            C::Idle,
            Rgb(110, 200, 230),
        ),
        // A socket, a pipe or a timer: network, idle or sleep cannot be told apart.
        row(
            W::Poll,
            "poll",
            "waiting for events (epoll, poll, select)",
            C::Unknown,
            Rgb(95, 160, 215),
        ),
        row(
            W::PageFault,
            "page_fault",
            "blocked in page faults",
            C::Memory,
            Rgb(205, 110, 200),
        ),
        row(
            W::Memory,
            "memory",
            "on-CPU in the kernel faulting in or clearing memory",
            C::Memory,
            Rgb(225, 95, 170),
        ),
        row(
            W::Db,
            "db",
            "waiting on a database (its socket)",
            C::IoDb,
            Rgb(45, 140, 120),
        ),
        row(
            W::External,
            "external",
            "waiting on a peer on another host",
            C::External,
            Rgb(60, 90, 170),
        ),
        row(
            W::Idle,
            "idle",
            "idle: waiting for clients or events from outside the run",
            C::Idle,
            Rgb(185, 205, 225),
        ),
        row(
            W::Other,
            "other",
            "off-CPU for an unattributed reason",
            C::Unknown,
            Rgb(165, 165, 165),
        ),
    ]
};

// The table is in the enum's order, so a category's row is found by its index.
const _: () = {
    let mut i = 0;
    while i < CATEGORY_FACTS.len() {
        assert!(CATEGORY_FACTS[i].category as usize == i);
        i += 1;
    }
};

impl WaitCategory {
    /// Every category, in a fixed order (used as array index): the table's.
    pub const ALL: [WaitCategory; CATEGORY_FACTS.len()] = {
        let mut all = [WaitCategory::Other; CATEGORY_FACTS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = CATEGORY_FACTS[i].category;
            i += 1;
        }
        all
    };

    /// The category's row of [`CATEGORY_FACTS`].
    pub fn facts(self) -> &'static CategoryFacts {
        &CATEGORY_FACTS[self.index()]
    }

    /// The key used in `wait_breakdown_ms`.
    pub fn key(self) -> &'static str {
        self.facts().key
    }

    /// A few words for sentences ("on-CPU", "sleeping", ...).
    pub fn describe(self) -> &'static str {
        self.facts().description
    }

    /// Index into [`WaitCategory::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The bottleneck class of time in this category (see [`CategoryFacts::class`]).
    pub fn classification(self) -> Classification {
        self.facts().class
    }
}

/// How a rule matches a kernel function name (after dropping compiler suffixes such as
/// `.isra.0` or `.constprop.0`).
#[derive(Debug, Clone, Copy)]
pub enum Pattern {
    Exact(&'static str),
    Prefix(&'static str),
    Contains(&'static str),
}

impl Pattern {
    fn matches(self, name: &str) -> bool {
        match self {
            Pattern::Exact(p) => name == p,
            Pattern::Prefix(p) => name.starts_with(p),
            Pattern::Contains(p) => name.contains(p),
        }
    }
}

/// One line of the kernel-frame table.
#[derive(Debug)]
pub struct KernelRule {
    pub category: WaitCategory,
    /// Only for this switch-out state; `None` for any off-CPU state.
    pub state: Option<WaitState>,
    pub patterns: &'static [Pattern],
}

use Pattern::{Contains, Exact, Prefix};

/// The kernel-frame rules, highest priority first.
pub static KERNEL_RULES: &[KernelRule] = &[
    // A page fault in D state is memory pressure (major fault, swap, mmap'd file),
    // even though it waits in io_schedule below.
    KernelRule {
        category: WaitCategory::PageFault,
        state: Some(WaitState::Uninterruptible),
        patterns: &[
            Exact("handle_mm_fault"),
            Exact("__handle_mm_fault"),
            Exact("do_page_fault"),
            Exact("exc_page_fault"),
            Exact("do_user_addr_fault"),
        ],
    },
    KernelRule {
        category: WaitCategory::Sleep,
        state: None,
        patterns: &[Contains("nanosleep")],
    },
    KernelRule {
        category: WaitCategory::Lock,
        state: None,
        patterns: &[
            Contains("futex"),
            Prefix("rwsem_down_"),
            Prefix("__mutex_lock"),
        ],
    },
    KernelRule {
        category: WaitCategory::Child,
        state: None,
        patterns: &[
            Exact("do_wait"),
            Contains("wait4"),
            Contains("waitid"),
            // A vfork parent sleeps (in D state) until its child execs or exits.
            Exact("wait_for_vfork_done"),
            Exact("__do_sys_vfork"),
        ],
    },
    KernelRule {
        category: WaitCategory::Pipe,
        state: None,
        // `anon_pipe_read`/`anon_pipe_write` since Linux 6.16.
        patterns: &[
            Prefix("pipe_read"),
            Prefix("pipe_write"),
            Prefix("pipe_wait"),
            Prefix("anon_pipe_"),
        ],
    },
    KernelRule {
        category: WaitCategory::Network,
        state: None,
        patterns: &[
            Prefix("tcp_"),
            Prefix("inet_"),
            Prefix("inet6_"),
            Prefix("udp_"),
            Prefix("sock_"),
            Prefix("unix_stream"),
            Prefix("unix_dgram"),
            Prefix("skb_recv"),
            Prefix("__skb_recv"),
            Prefix("__skb_wait"),
            Prefix("__sys_recv"),
            Prefix("__sys_send"),
            Prefix("__sys_accept"),
            Prefix("__sys_connect"),
        ],
    },
    KernelRule {
        category: WaitCategory::Poll,
        state: None,
        patterns: &[
            Prefix("ep_poll"),
            Prefix("do_epoll_wait"),
            Prefix("do_epoll_pwait"),
            Prefix("do_compat_epoll_pwait"),
            Exact("do_sys_poll"),
            Exact("do_poll"),
            Exact("do_select"),
            Exact("core_sys_select"),
        ],
    },
    KernelRule {
        category: WaitCategory::File,
        state: None,
        patterns: &[
            Prefix("io_schedule"),
            Prefix("folio_wait"),
            Prefix("wait_on_page"),
            Prefix("bit_wait_io"),
            Prefix("blk_"),
            Prefix("submit_bio"),
            Prefix("ext4_"),
            Prefix("jbd2"),
            Prefix("xfs_"),
            Prefix("btrfs_"),
            Prefix("filemap_"),
            Contains("fsync"),
            Contains("fdatasync"),
            Prefix("vfs_read"),
            Prefix("vfs_write"),
        ],
    },
];

/// One line of the user-frame table.
#[derive(Debug)]
pub struct UserRule {
    pub category: WaitCategory,
    pub patterns: &'static [Pattern],
}

/// The user-frame rules that refine a futex wait or name a wait whose kernel stack is
/// missing, highest priority first: a mutex
/// taken inside a condition-variable wait (re-acquiring it after the signal) is lock
/// contention, and so is CPython's GIL although it waits on a condition variable.
/// glibc's names cover C, C++ (`std::thread::join`, `std::condition_variable`) and
/// Rust's `JoinHandle::join`; Rust's own futex-based primitives are named as such.
/// Names are matched with their leading underscores and glibc's internal-alias prefix
/// dropped (glibc has `___pthread_cond_timedwait64`, `__pthread_cond_wait_common`,
/// `__lll_lock_wait`, `__GI___wait4`).
pub static USER_RULES: &[UserRule] = &[
    UserRule {
        category: WaitCategory::Lock,
        patterns: &[
            Exact("take_gil"),
            Exact("lll_lock_wait"),
            Prefix("pthread_mutex_"),
            Prefix("pthread_rwlock_"),
            Contains("lock_contended"),
            Contains("RwLock"),
            // Go's runtime-internal locks.
            Exact("runtime.lock2"),
        ],
    },
    UserRule {
        category: WaitCategory::Thread,
        patterns: &[
            Exact("pthread_join"),
            Prefix("pthread_timedjoin"),
            Prefix("pthread_clockjoin"),
            Prefix("pthread_cond_"),
            // A semaphore is waited on for another thread's post: libuv's and CPython's
            // thread locks (join, queue.get, Event.wait) are semaphores.
            Prefix("sem_wait"),
            Prefix("sem_timedwait"),
            Prefix("sem_clockwait"),
            Prefix("new_sem_wait"),
            Contains("Condvar::wait"),
            Contains("thread::park"),
            Contains("Thread::park"),
            Contains("Parker::park"),
            Contains("parking_lot_core::parking_lot::park"),
            // Go: an OS thread with no goroutine to run (its scheduler idle, or the
            // goroutine it ran parked on a channel or a WaitGroup) sleeps on a note.
            Prefix("runtime.notesleep"),
            Prefix("runtime.notetsleep"),
        ],
    },
    UserRule {
        // A wait named only by its call (no kernel stack: a switch-out at a high rate
        // whose stack was not copied): glibc's wrappers of the wait calls.
        category: WaitCategory::Child,
        patterns: &[
            Exact("wait4"),
            Exact("wait3"),
            Exact("waitpid"),
            Exact("waitid"),
            Exact("libc_wait"),
        ],
    },
];

/// `foo.isra.0` → `foo`: the compiler's clone suffixes dropped. A dot that starts
/// anything else is part of the name (Go's `runtime.notesleep`).
fn base_name(function: &str) -> &str {
    let clone_suffix = |t: &str| {
        matches!(
            t,
            "isra" | "constprop" | "part" | "cold" | "lto_priv" | "llvm"
        ) || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
    };
    match function.split_once('.') {
        Some((base, rest)) if rest.split('.').all(clone_suffix) => base,
        _ => function,
    }
}

/// The first rule (in table order) that any of `kernel_frames` matches.
pub fn match_kernel_rule(state: WaitState, kernel_frames: &[&str]) -> Option<&'static KernelRule> {
    KERNEL_RULES.iter().find(|rule| {
        rule.state.is_none_or(|s| s == state)
            && kernel_frames.iter().any(|f| {
                let name = base_name(f);
                rule.patterns.iter().any(|p| p.matches(name))
            })
    })
}

/// Kernel frames of on-CPU work done for the program's memory: the page-fault path and
/// the kernel's page and buffer clearing.
pub static MEMORY_WORK: &[Pattern] = &[
    Exact("exc_page_fault"),
    Exact("do_user_addr_fault"),
    Exact("handle_mm_fault"),
    Exact("__handle_mm_fault"),
    Prefix("clear_page"),
    Prefix("clear_user"),
    Prefix("__clear_user"),
];

/// The category of one sample, given its frames, root first.
pub fn categorize(kind: SampleKind, frames: &[&Frame]) -> WaitCategory {
    let state = match kind {
        SampleKind::OnCpu => {
            let memory = frames.iter().any(|f| {
                f.kind == FrameKind::Kernel
                    && MEMORY_WORK
                        .iter()
                        .any(|p| p.matches(base_name(&f.function)))
            });
            return if memory {
                WaitCategory::Memory
            } else {
                WaitCategory::Cpu
            };
        }
        SampleKind::OffCpu { state } => state,
    };
    if state == WaitState::Preempted {
        return WaitCategory::Runqueue;
    }
    let names = |kind: FrameKind| -> Vec<&str> {
        frames
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.function.as_str())
            .collect()
    };
    let kernel = names(FrameKind::Kernel);
    let from_kernel = match_kernel_rule(state, &kernel).map(|r| r.category);
    if matches!(from_kernel, Some(WaitCategory::Lock)) || kernel.is_empty() {
        let user: Vec<&Frame> = frames
            .iter()
            .copied()
            .filter(|f| f.kind == FrameKind::User)
            .collect();
        if interpreter_cond_wait(&user) {
            return WaitCategory::Lock;
        }
        if let Some(rule) = match_user_rule(&names(FrameKind::User)) {
            return rule.category;
        }
    }
    from_kernel.unwrap_or(WaitCategory::Other)
}

/// CPython waits for its GIL on a condition variable, in `take_gil` — a static function
/// that a stripped interpreter (Debian's) does not name. A condition wait called
/// straight from the interpreter's own code (`python3.x`, `libpython3.x`) is therefore
/// lock contention; one called from an extension's code is not. `user` is root first.
fn interpreter_cond_wait(user: &[&Frame]) -> bool {
    let is_cond = |f: &&Frame| user_name(&f.function).starts_with("pthread_cond_");
    let Some(outermost) = user.iter().position(is_cond) else {
        return false;
    };
    user[..outermost]
        .last()
        .and_then(|caller| caller.module.as_deref())
        .is_some_and(|m| m.starts_with("python") || m.starts_with("libpython"))
}

/// The first user rule (in table order) that any of `user_frames` matches.
pub fn match_user_rule(user_frames: &[&str]) -> Option<&'static UserRule> {
    let names: Vec<String> = user_frames.iter().map(|f| user_name(f)).collect();
    USER_RULES.iter().find(|rule| {
        names
            .iter()
            .any(|name| rule.patterns.iter().any(|p| p.matches(name)))
    })
}

/// A user function's name as the user rules see it: compiler suffixes and leading
/// underscores dropped, and the angle brackets of Rust's and C++'s qualified names
/// (`<std::sys::sync::thread_parking::futex::Parker>::park`) taken out.
fn user_name(function: &str) -> String {
    crate::profile::unaliased(base_name(function)).replace(['<', '>'], "")
}

/// Each sample's category, by sample index, bit-packed (a few bits a sample, in the
/// spill file beyond the memory budget: see [`crate::packed`]).
#[derive(Debug, Clone, Default)]
pub struct Categories(crate::packed::Packed<1>);

impl Categories {
    /// Sample `i`'s category; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<WaitCategory> {
        self.0.column(i, 0).map(Categories::of)
    }

    /// The category stored as `v` (`other` for a value that is none).
    fn of(v: u64) -> WaitCategory {
        (WaitCategory::ALL.get(v as usize).copied()).unwrap_or(WaitCategory::Other)
    }

    /// Append the next sample's category.
    pub fn push(&mut self, c: WaitCategory) {
        self.0.push([c.index() as u64]);
    }

    /// Every sample's category, in order.
    pub fn iter(&self) -> impl Iterator<Item = WaitCategory> + '_ {
        self.0.iter().map(|[v]| Categories::of(v))
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PartialEq for Categories {
    fn eq(&self, other: &Categories) -> bool {
        self.0.iter().eq(other.0.iter())
    }
}

impl FromIterator<WaitCategory> for Categories {
    fn from_iter<I: IntoIterator<Item = WaitCategory>>(it: I) -> Categories {
        let mut c = Categories::default();
        for x in it {
            c.push(x);
        }
        c
    }
}

impl From<Vec<WaitCategory>> for Categories {
    fn from(v: Vec<WaitCategory>) -> Categories {
        v.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(state: WaitState, frames: &[&str]) -> WaitCategory {
        match_kernel_rule(state, frames).map_or(WaitCategory::Other, |r| r.category)
    }

    const S: WaitState = WaitState::Sleeping;
    const D: WaitState = WaitState::Uninterruptible;

    /// Exhaustive on purpose: a new variant does not compile here until it is listed.
    fn position(c: WaitCategory) -> usize {
        use WaitCategory as W;
        match c {
            W::Cpu => 0,
            W::Runqueue => 1,
            W::File => 2,
            W::Network => 3,
            W::Lock => 4,
            W::Sleep => 5,
            W::Child => 6,
            W::Thread => 7,
            W::Pipe => 8,
            W::Poll => 9,
            W::PageFault => 10,
            W::Memory => 11,
            W::Db => 12,
            W::External => 13,
            W::Idle => 14,
            W::Other => 15,
        }
    }

    #[test]
    fn every_category_has_one_row_and_a_distinct_key() {
        // The last variant has a row, so every one before it does (rows are in order).
        assert_eq!(position(WaitCategory::Other) + 1, CATEGORY_FACTS.len());
        for (i, f) in CATEGORY_FACTS.iter().enumerate() {
            assert_eq!(position(f.category), i, "{:?} out of order", f.category);
            assert_eq!(f.category.facts().key, f.key);
            assert!(!f.description.is_empty(), "{:?}", f.category);
        }
        let keys: std::collections::BTreeSet<&str> = CATEGORY_FACTS.iter().map(|f| f.key).collect();
        assert_eq!(keys.len(), CATEGORY_FACTS.len(), "duplicate keys");
        let colours: std::collections::BTreeSet<(u8, u8, u8)> = CATEGORY_FACTS
            .iter()
            .map(|f| (f.colour.0, f.colour.1, f.colour.2))
            .collect();
        assert_eq!(colours.len(), CATEGORY_FACTS.len(), "duplicate colours");
    }

    #[test]
    fn every_rule_has_patterns() {
        for rule in KERNEL_RULES {
            assert!(!rule.patterns.is_empty(), "{:?}", rule.category);
        }
    }

    #[test]
    fn page_fault_in_d_state_is_memory() {
        let stack = [
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_fault",
            "__do_fault",
            "handle_mm_fault",
            "do_user_addr_fault",
            "exc_page_fault",
        ];
        assert_eq!(cat(D, &stack), WaitCategory::PageFault);
        // Not in D state: the page-fault rule does not apply, the file rule does.
        assert_eq!(cat(S, &stack), WaitCategory::File);
    }

    #[test]
    fn nanosleep_is_sleep() {
        for f in [
            "do_nanosleep",
            "hrtimer_nanosleep",
            "__x64_sys_clock_nanosleep",
            "__x64_sys_nanosleep",
            "common_nsleep", // alone: no rule
        ] {
            let want = if f == "common_nsleep" {
                WaitCategory::Other
            } else {
                WaitCategory::Sleep
            };
            assert_eq!(cat(S, &["schedule", f]), want, "{f}");
        }
    }

    #[test]
    fn futex_and_kernel_locks_are_lock() {
        assert_eq!(
            cat(
                S,
                &["schedule", "futex_wait_queue", "futex_wait", "do_futex"]
            ),
            WaitCategory::Lock
        );
        assert_eq!(cat(S, &["__x64_sys_futex"]), WaitCategory::Lock);
        assert_eq!(cat(D, &["rwsem_down_read_slowpath"]), WaitCategory::Lock);
        assert_eq!(cat(D, &["__mutex_lock.constprop.0"]), WaitCategory::Lock);
    }

    #[test]
    fn wait4_is_child() {
        assert_eq!(
            cat(
                S,
                &["schedule", "do_wait", "kernel_wait4", "__do_sys_wait4"]
            ),
            WaitCategory::Child
        );
        assert_eq!(cat(S, &["__x64_sys_waitid"]), WaitCategory::Child);
        let vfork = [
            "__schedule",
            "wait_for_completion_state",
            "kernel_clone",
            "__do_sys_vfork",
        ];
        assert_eq!(cat(D, &vfork), WaitCategory::Child);
        // "do_wait" must not catch wait_for_completion helpers.
        assert_eq!(cat(S, &["do_wait_for_common"]), WaitCategory::Other);
    }

    #[test]
    fn event_waits_are_poll() {
        let epoll = [
            "schedule_hrtimeout_range_clock",
            "do_epoll_wait",
            "do_compat_epoll_pwait.part.0",
            "__x64_sys_epoll_pwait",
        ];
        assert_eq!(cat(S, &epoll), WaitCategory::Poll);
        assert_eq!(
            cat(S, &["do_sys_poll", "__x64_sys_ppoll"]),
            WaitCategory::Poll
        );
        assert_eq!(
            cat(S, &["do_select", "core_sys_select"]),
            WaitCategory::Poll
        );
        // A socket read is network even when an event loop called it.
        assert_eq!(
            cat(S, &["tcp_recvmsg", "do_epoll_wait"]),
            WaitCategory::Network
        );
        assert_eq!(WaitCategory::Poll.classification(), Classification::Unknown);
    }

    #[test]
    fn pipe_read_is_pipe_even_under_vfs_read() {
        assert_eq!(
            cat(S, &["schedule", "pipe_read", "vfs_read", "ksys_read"]),
            WaitCategory::Pipe
        );
        assert_eq!(cat(S, &["pipe_write"]), WaitCategory::Pipe);
        // The names newer kernels use.
        assert_eq!(
            cat(S, &["schedule", "anon_pipe_read", "vfs_read", "ksys_read"]),
            WaitCategory::Pipe
        );
        assert_eq!(cat(S, &["anon_pipe_write"]), WaitCategory::Pipe);
    }

    #[test]
    fn sockets_are_network_even_under_vfs_read() {
        for f in [
            "tcp_recvmsg",
            "inet_recvmsg",
            "sock_read_iter",
            "unix_stream_read_generic",
            "skb_recv_datagram",
            "__skb_wait_for_more_packets",
            "__sys_recvfrom",
            "__sys_connect",
        ] {
            assert_eq!(
                cat(S, &["schedule", f, "vfs_read"]),
                WaitCategory::Network,
                "{f}"
            );
        }
    }

    #[test]
    fn block_and_filesystem_waits_are_file() {
        for f in [
            "io_schedule",
            "folio_wait_bit_common",
            "blk_mq_get_tag",
            "ext4_sync_file",
            "jbd2_log_wait_commit",
            "__x64_sys_fsync",
            "vfs_read",
            "filemap_read",
            "bit_wait_io",
        ] {
            assert_eq!(cat(D, &["schedule", f]), WaitCategory::File, "{f}");
        }
    }

    #[test]
    fn compiler_suffixes_are_ignored() {
        assert_eq!(cat(S, &["do_nanosleep.isra.0"]), WaitCategory::Sleep);
        assert_eq!(cat(S, &["do_wait.part.0"]), WaitCategory::Child);
    }

    #[test]
    fn unmatched_is_other_and_states_decide_first() {
        assert_eq!(
            cat(S, &["schedule", "anon_inode_something"]),
            WaitCategory::Other
        );
        let k = Frame {
            function: "do_nanosleep".into(),
            module: None,
            file: None,
            line: None,
            kind: FrameKind::Kernel,
            inlined: false,
        };
        let mut user = k.clone();
        user.kind = FrameKind::User;
        let off = |state| SampleKind::OffCpu { state };
        assert_eq!(categorize(SampleKind::OnCpu, &[&k]), WaitCategory::Cpu);
        assert_eq!(
            categorize(off(WaitState::Preempted), &[&k]),
            WaitCategory::Runqueue
        );
        assert_eq!(categorize(off(S), &[&k]), WaitCategory::Sleep);
        // Only kernel frames are evidence: a user function named like a kernel path is not.
        assert_eq!(categorize(off(S), &[&user]), WaitCategory::Other);
    }

    #[test]
    fn a_futex_wait_is_refined_by_the_user_stack() {
        let frame = |name: &str, kind| Frame {
            function: name.into(),
            module: None,
            file: None,
            line: None,
            kind,
            inlined: false,
        };
        let futex = frame("futex_wait_queue", FrameKind::Kernel);
        let join = frame("__pthread_clockjoin_ex", FrameKind::User);
        let lock = frame("__pthread_mutex_lock", FrameKind::User);
        let off = SampleKind::OffCpu { state: S };
        assert_eq!(categorize(off, &[&join, &futex]), WaitCategory::Thread);
        assert_eq!(categorize(off, &[&lock, &futex]), WaitCategory::Lock);
        let cond = frame("__pthread_cond_wait_common", FrameKind::User);
        assert_eq!(categorize(off, &[&cond, &futex]), WaitCategory::Thread);
        // Re-taking the mutex after the signal is contention; so is CPython's GIL.
        let relock = frame("__pthread_mutex_cond_lock", FrameKind::User);
        assert_eq!(
            categorize(off, &[&cond, &relock, &futex]),
            WaitCategory::Lock
        );
        let gil = frame("take_gil", FrameKind::User);
        assert_eq!(categorize(off, &[&gil, &cond, &futex]), WaitCategory::Lock);
        // The GIL in a stripped interpreter: a condition wait called from python3.11's
        // unnamed code; from an extension, a condition wait stays a thread wait.
        let in_module = |name: &str, module: &str| Frame {
            module: Some(module.into()),
            ..frame(name, FrameKind::User)
        };
        let unnamed = in_module("python3.11+0x227e9f", "python3.11");
        let wait = in_module("___pthread_cond_timedwait64", "libc.so.6");
        assert_eq!(
            categorize(off, &[&unnamed, &wait, &cond, &futex]),
            WaitCategory::Lock
        );
        let ext = in_module("pool_wait", "libgomp.so.1");
        assert_eq!(
            categorize(off, &[&unnamed, &ext, &wait, &cond, &futex]),
            WaitCategory::Thread
        );
        let rust_cv = frame(
            "std::sys::sync::condvar::futex::Condvar::wait_optional_timeout",
            FrameKind::User,
        );
        assert_eq!(categorize(off, &[&rust_cv, &futex]), WaitCategory::Thread);
        let sem = frame("__new_sem_wait_slow64", FrameKind::User);
        assert_eq!(categorize(off, &[&sem, &futex]), WaitCategory::Thread);
        // Rust's qualified names, as DWARF gives them for a channel receive.
        let park = frame(
            "<std::sys::sync::thread_parking::futex::Parker>::park",
            FrameKind::User,
        );
        assert_eq!(categorize(off, &[&park, &futex]), WaitCategory::Thread);
        let contended = frame(
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            FrameKind::User,
        );
        assert_eq!(categorize(off, &[&contended, &futex]), WaitCategory::Lock);
        // A wait with no kernel stack (its switch-out was not copied) is named by its
        // call: glibc's wait wrappers under their internal aliases too.
        for name in ["__GI___wait4", "__waitpid", "waitid", "__libc_wait"] {
            let w = frame(name, FrameKind::User);
            assert_eq!(categorize(off, &[&w]), WaitCategory::Child, "{name}");
        }
        // Go: a thread idle in the scheduler waits for another's work; a runtime lock is
        // a lock (the names keep their dots: `runtime.notesleep`, not `runtime`).
        let note = frame("runtime.notesleep", FrameKind::User);
        let stopm = frame("runtime.stopm", FrameKind::User);
        let gofutex = frame("runtime.futexsleep", FrameKind::User);
        assert_eq!(
            categorize(off, &[&stopm, &note, &gofutex, &futex]),
            WaitCategory::Thread
        );
        let lock2 = frame("runtime.lock2", FrameKind::User);
        assert_eq!(
            categorize(off, &[&lock2, &gofutex, &futex]),
            WaitCategory::Lock
        );
        assert_eq!(base_name("finish_task_switch.isra.0"), "finish_task_switch");
        assert_eq!(base_name("foo.constprop.0.cold"), "foo");
        assert_eq!(base_name("runtime.notesleep"), "runtime.notesleep");
        let glock = frame("__GI___pthread_mutex_lock", FrameKind::User);
        assert_eq!(categorize(off, &[&glock, &futex]), WaitCategory::Lock);
        let read = frame("__GI___libc_read", FrameKind::User);
        assert_eq!(categorize(off, &[&read]), WaitCategory::Other);
        // Only a futex wait is refined: a join frame above a file wait stays file.
        let fsync = frame("ext4_sync_file", FrameKind::Kernel);
        assert_eq!(categorize(off, &[&join, &fsync]), WaitCategory::File);
        // On a CPU, a join is CPU time like any other.
        assert_eq!(categorize(SampleKind::OnCpu, &[&join]), WaitCategory::Cpu);
        // A kernel function of that name is not the user-space join.
        let kjoin = frame("pthread_join", FrameKind::Kernel);
        assert_eq!(categorize(off, &[&kjoin, &futex]), WaitCategory::Lock);
    }

    #[test]
    fn categories_map_to_classes() {
        assert_eq!(WaitCategory::Runqueue.classification(), Classification::Cpu);
        assert_eq!(WaitCategory::Sleep.classification(), Classification::Idle);
        assert_eq!(WaitCategory::Pipe.classification(), Classification::Idle);
        assert_eq!(
            WaitCategory::PageFault.classification(),
            Classification::Memory
        );
        assert_eq!(
            WaitCategory::Other.classification(),
            Classification::Unknown
        );
        for (i, c) in WaitCategory::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }
}
