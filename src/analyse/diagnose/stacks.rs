//! Evidence read from the profile's stacks for the diagnosis's [`Facts`](super::facts::Facts): syncs per
//! file, who held and who waited on locks, and a function's hot source lines.

use std::collections::{BTreeMap, HashMap};

use crate::profile::{Frame, FrameKind, SampleKind, SampledProfile};

use super::super::classify::{WaitCategory, categorize};
use super::super::{FastMap, seek};
use super::facts::{HotLines, SyncFact, call_site, is_library};
use crate::packed::Packed;

/// The frames of a stack, leaf first.
pub(super) fn frames_of(p: &SampledProfile, leaf: Option<u32>) -> Vec<&Frame> {
    let mut out = Vec::new();
    let mut cur = leaf;
    while let Some(i) = cur {
        let Some(n) = p.stacks.get(i as usize) else {
            break;
        };
        if let Some(f) = p.frames.get(n.frame as usize) {
            out.push(f);
        }
        cur = n.parent;
    }
    out
}

/// Off-CPU time inside fsync/fdatasync/sync_file_range, per file.
pub(super) fn syncs(p: &SampledProfile) -> Vec<SyncFact> {
    let mut by: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    // Per stack, not per wait: a profile has millions of waits and few stacks.
    let mut sync_stack: FastMap<Option<u32>, bool> = FastMap::default();
    for w in p.waits.iter() {
        let Some(s) = p.samples.get(w.sample as usize) else {
            continue;
        };
        // A descriptor the sampler could not resolve is still named by its number.
        let name = match (
            w.resource.get().and_then(|i| p.resources.get(i as usize)),
            w.fd,
        ) {
            (Some(r), _) => r.name.clone(),
            (None, Some(fd)) => format!("descriptor {fd} of pid {} (unresolved)", s.pid),
            (None, None) => continue,
        };
        let is_sync = *sync_stack.entry(s.stack.get()).or_insert_with(|| {
            frames_of(p, s.stack.get()).iter().any(|f| {
                let n = f.function.as_str();
                n.contains("fsync") || n.contains("fdatasync") || n.contains("sync_file_range")
            })
        });
        if is_sync {
            let e = by.entry(name).or_default();
            e.0 += 1;
            e.1 += s.weight_ns;
        }
    }
    by.into_iter()
        .map(|(path, (n, ns))| SyncFact {
            path,
            intervals: n,
            ms: super::super::steps::ms(ns),
        })
        .collect()
}

/// Lock-wait time by who ended it (`holders`) or by where it was waited (the waiting
/// thread's own code). The holder is the waker thread's own code: from the waker's
/// stack when recorded, else from that thread's last on-CPU sample before the wake-up
/// (within [`HOLDER_WINDOW_NS`]): what it was running while the waiters queued. Waits
/// nobody profiled ended are left out of the holders.
pub(super) fn lock_waits(p: &SampledProfile, holders: bool) -> Vec<(String, f64)> {
    // Built on the first wake-up recorded without the waker's stack: most profiles
    // have none, and the table holds every on-CPU sample.
    let mut on_cpu = None;
    let mut by: HashMap<String, (u64, std::collections::BTreeSet<i32>)> = HashMap::new();
    // Per stack and kind, not per sample: a profile has millions of waits and few stacks.
    let mut is_lock: FastMap<(Option<u32>, SampleKind), bool> = FastMap::default();
    for (i, s) in p.samples.iter().enumerate() {
        if s.kind == SampleKind::OnCpu {
            continue;
        }
        let lock = *is_lock.entry((s.stack.get(), s.kind)).or_insert_with(|| {
            let mut frames = frames_of(p, s.stack.get());
            frames.reverse();
            categorize(s.kind, &frames) == WaitCategory::Lock
        });
        if !lock {
            continue;
        }
        let (tid, stack) = match (p.samples.waker(i), holders) {
            (Some(wk), true) => (
                wk.tid,
                wk.stack.or_else(|| {
                    let by_thread = on_cpu.get_or_insert_with(|| on_cpu_by_thread(p));
                    last_on_cpu(p, by_thread, wk.tid, wk.time_ns)
                }),
            ),
            (None, true) => continue,
            (_, false) => (s.tid, s.stack.get()),
        };
        let frames = frames_of(p, stack);
        let plumbing = |f: &&Frame| super::super::calltree::is_plumbing(&f.function);
        // The user's own code; in a program that is all library (an interpreter), the
        // innermost user-space function that is not lock plumbing itself.
        let own = frames
            .iter()
            .find(|f| !is_library(f) && !plumbing(f))
            .or_else(|| {
                frames.iter().find(|f| {
                    f.kind == FrameKind::User && !plumbing(f) && !is_lock_plumbing(&f.function)
                })
            });
        let who = own.map_or_else(
            || "a thread whose stack was not recorded".to_string(),
            |f| call_site(&f.function, f.location().as_deref()),
        );
        let e = by.entry(who).or_default();
        e.0 += s.weight_ns;
        e.1.insert(tid);
    }
    let mut v: Vec<(String, f64)> = by
        .into_iter()
        .map(|(k, (ns, tids))| {
            let k = if holders {
                let n = tids.len();
                format!("{k} on {n} thread{}", if n == 1 { "" } else { "s" })
            } else {
                k
            };
            (k, super::super::steps::ms(ns))
        })
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// libc's and the kernel's futex and condition-variable internals: where a lock is
/// waited or released, not whose code did it.
fn is_lock_plumbing(function: &str) -> bool {
    [
        "futex",
        "pthread_",
        "lll_lock",
        "__GI___lll",
        "syscall",
        "PyCOND_",
        "PyMUTEX_",
    ]
    .iter()
    .any(|p| function.contains(p))
}

/// How far before a wake-up the waker's last on-CPU sample may lie to stand for what
/// it was running.
pub const HOLDER_WINDOW_NS: u64 = 20_000_000;

/// Each thread's on-CPU samples (indices into `p.samples`), in time order.
fn on_cpu_by_thread(p: &SampledProfile) -> FastMap<i32, Packed<1>> {
    let mut by: FastMap<i32, Packed<1>> = FastMap::default();
    for (i, s) in p.samples.iter().enumerate() {
        if s.kind == SampleKind::OnCpu {
            // A thread's indices rise slowly: a few bits each (and in the spill file
            // beyond the memory budget).
            by.entry(s.tid).or_default().push([i as u64]);
        }
    }
    let time = |i: u32| p.samples.time_ns(i as usize);
    for v in by.values_mut() {
        // In time order already when the samples are, as a recording's are.
        if v.iter().map(|[i]| time(i as u32)).is_sorted() {
            continue;
        }
        let mut indices: Vec<u32> = v.iter().map(|[i]| i as u32).collect();
        indices.sort_unstable_by_key(|&i| time(i));
        *v = indices.into_iter().map(|i| [u64::from(i)]).collect();
    }
    by
}

fn last_on_cpu(p: &SampledProfile, by: &FastMap<i32, Packed<1>>, tid: i32, t: u64) -> Option<u32> {
    let v = by.get(&tid)?;
    let at = |k: usize| v.column(k, 0).map(|i| i as usize);
    let i = seek::bisect(0, v.len(), |k| {
        at(k).is_some_and(|i| p.samples.time_ns(i) <= t)
    });
    let s = p.samples.get(at(i.checked_sub(1)?)?)?;
    (t - s.time_ns <= HOLDER_WINDOW_NS)
        .then_some(s.stack.get())
        .flatten()
}

/// The calls /proc/PID/io counts as reads and writes (`syscr`, `syscw`).
pub(super) const IO_CALLS: &[&str] = &[
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2",
    "pwritev2",
];

/// Whether a stack (its frames, leaf first) is inside a read or write call: the syscall
/// its outermost kernel frame naming one stands for, or, where none does (a tick in the
/// kernel's entry or exit path, above the syscall's own function, or no kernel frame),
/// the C library's wrapper nearest the leaf. One walk over frames already read.
fn in_io_call(frames: &[&Frame]) -> bool {
    use crate::sample::waiton::{syscall_of_function, syscall_of_wrapper};
    let kernel = frames
        .iter()
        .rev()
        .filter(|f| f.kind == FrameKind::Kernel)
        .find_map(|f| syscall_of_function(&f.function));
    kernel
        .or_else(|| {
            frames
                .iter()
                .find(|f| f.kind != FrameKind::Kernel)
                .and_then(|f| syscall_of_wrapper(&f.function))
        })
        .is_some_and(|s| IO_CALLS.contains(&s))
}

/// On-CPU figures of the stacks: time in libraries, and, for each of some functions,
/// its time by the user's source line nearest to the leaf. One pass over the samples
/// and one over the distinct stacks, whatever the number of functions.
pub(super) struct CpuFigures {
    /// On-CPU time whose machine code is library, runtime or kernel code, ns.
    pub library_ns: u64,
    /// All on-CPU time, ns.
    pub all_ns: u64,
    /// On-CPU time in the code of programs installed on the system (not library code,
    /// and no Python frame above it), ns, per program, most first.
    pub installed_ns: Vec<(String, u64)>,
    /// On-CPU time inside read/write calls ([`IO_CALLS`]), ns, and by the user's own
    /// code nearest to them (`function (file:line)`), most first.
    pub io_call_ns: u64,
    pub io_call_sites: Vec<(String, u64)>,
    /// One per function asked for, in that order.
    pub hot_lines: Vec<HotLines>,
}

/// Standard-library code inlined into the user's function is that function's code: the
/// leaf's first non-inlined frame decides whether a stack's time is library time.
pub(super) fn cpu_figures(
    p: &SampledProfile,
    functions: &[&str],
    installed: &BTreeMap<String, String>,
) -> CpuFigures {
    #[derive(Default)]
    struct Of {
        all: u64,
        lib: u64,
        by: HashMap<String, u64>,
    }
    let mut of: Vec<Of> = functions.iter().map(|_| Of::default()).collect();
    let (mut library_ns, mut all_ns, mut io_call_ns) = (0u64, 0u64, 0u64);
    let mut installed_by: HashMap<String, u64> = HashMap::new();
    let mut io_sites: HashMap<String, u64> = HashMap::new();
    for (stack, weight_ns) in cpu_by_stack(p) {
        let frames = frames_of(p, stack);
        if in_io_call(&frames) {
            io_call_ns += weight_ns;
            if let Some(site) = super::facts::own_site(p, stack) {
                *io_sites.entry(site).or_default() += weight_ns;
            }
        }
        let in_library = frames
            .iter()
            .find(|f| !f.inlined)
            .is_some_and(|f| is_library(f));
        all_ns += weight_ns;
        if in_library {
            library_ns += weight_ns;
        } else if let Some(m) = frames
            .iter()
            .find(|f| !f.inlined)
            .and_then(|f| f.module.as_deref())
            .filter(|m| installed.contains_key(*m))
            .filter(|_| !frames.iter().any(|f| f.kind == FrameKind::Python))
        {
            *installed_by.entry(m.to_string()).or_default() += weight_ns;
        }
        for (o, function) in of.iter_mut().zip(functions) {
            let Some(at) = frames.iter().position(|f| f.function == *function) else {
                continue;
            };
            o.all += weight_ns;
            if in_library {
                o.lib += weight_ns;
            }
            let own = frames[..=at]
                .iter()
                .find(|f| !is_library(f) && f.line.is_some())
                .and_then(|f| f.location());
            if let Some(l) = own {
                *o.by.entry(l).or_default() += weight_ns;
            }
        }
    }
    let ms = super::super::steps::ms;
    let hot_lines = of
        .into_iter()
        .zip(functions)
        .map(|(o, function)| {
            let mut lines: Vec<(String, u64)> = o.by.into_iter().collect();
            lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            HotLines {
                function: function.to_string(),
                cpu_ms: ms(o.all),
                library_ms: ms(o.lib),
                lines: lines
                    .into_iter()
                    .take(3)
                    .map(|(l, ns)| (l, ms(ns)))
                    .collect(),
            }
        })
        .collect();
    let mut io_call_sites: Vec<(String, u64)> = io_sites.into_iter().collect();
    io_call_sites.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut installed_ns: Vec<(String, u64)> = installed_by.into_iter().collect();
    installed_ns.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    CpuFigures {
        library_ns,
        all_ns,
        installed_ns,
        io_call_ns,
        io_call_sites,
        hot_lines,
    }
}

/// On-CPU weight per stack leaf, ns: one pass over the samples, then work per distinct
/// stack instead of per sample.
fn cpu_by_stack(p: &SampledProfile) -> FastMap<Option<u32>, u64> {
    let mut by: FastMap<Option<u32>, u64> = FastMap::default();
    for s in p.samples.iter().filter(|s| s.kind == SampleKind::OnCpu) {
        *by.entry(s.stack.get()).or_default() += s.weight_ns;
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Leaf, Samples, ThreadSample, WaitState};

    #[test]
    fn a_waker_without_a_stack_lends_its_last_on_cpu_sample_s() {
        let at = |tid, time_ns, stack, kind| ThreadSample {
            pid: 1,
            tid,
            time_ns,
            stack: Leaf::new(Some(stack)),
            weight_ns: 1_000,
            kind,
        };
        let off = SampleKind::OffCpu {
            state: WaitState::Sleeping,
        };
        let on = SampleKind::OnCpu;
        let p = SampledProfile {
            samples: Samples::from(vec![
                at(2, 1_000, 10, on),
                at(3, 1_500, 11, on),
                at(2, 2_000, 12, off),
                at(2, 3_000, 13, on),
            ]),
            ..SampledProfile::default()
        };
        let by = on_cpu_by_thread(&p);
        assert_eq!(
            last_on_cpu(&p, &by, 2, 2_500),
            Some(10),
            "not the off-CPU one"
        );
        assert_eq!(last_on_cpu(&p, &by, 2, 3_000), Some(13));
        assert_eq!(last_on_cpu(&p, &by, 2, 500), None, "none before");
        assert_eq!(last_on_cpu(&p, &by, 4, 3_000), None, "no such thread");
        let late = 1_500 + HOLDER_WINDOW_NS + 1;
        assert_eq!(last_on_cpu(&p, &by, 3, late), None, "too long before");
    }
}
