//! How far the measurement can be trusted: `measurement_quality` of the map, as a pure
//! function of the recording and its baseline summary. Each problem is a
//! [`QualityWarning`] that says what was seen, in figures, and what to do about it.
//!
//! The rules and what they compare:
//! - overhead: the profiled run's wall time against the baseline median; beyond
//!   [`MAX_OVERHEAD_PCT`] the profile may not show the program as it runs unprofiled;
//! - lost samples: any records the kernel dropped (ring buffer full), as a share of
//!   the records kept plus lost;
//! - truncated stacks and other unwind failures: each as a share of all stacks taken
//!   (on-CPU samples + off-CPU intervals), beyond [`MAX_BAD_STACK_PCT`]; a truncated
//!   stack is one whose user-stack copy ran out, the others stopped for want of unwind
//!   information;
//! - unnamed addresses: the share of sampled time (sample weights) whose stack holds a
//!   frame that could not be named (`module+0xoffset`), beyond [`MAX_BAD_STACK_PCT`];
//!   the count reported beside it is of distinct addresses;
//! - too few samples: fewer than [`MIN_SAMPLES`] on-CPU samples plus off-CPU intervals
//!   support no verdict: the map's classification is then withheld (Unknown), and the
//!   share-based stack warnings above are not raised (a share of a handful says nothing)
//!   — unless [`MEASURED_OFF_CPU_PCT`] of the time is in off-CPU intervals from switch
//!   records, which are measured, not sampled (one 1 s `accept` is a verdict: Idle);
//! - a noisy baseline: the slowest counted run more than [`MAX_SPREAD`] times the
//!   fastest, named with the machine's load during the runs when it was recorded.

use std::fmt;

use crate::analyse::FastMap;

use super::baseline::BaselineSummary;
use crate::profile::{Frame, MachineLoad, Recording, RunMeasurement, SampledProfile};
use crate::sample::SWITCH_COPY_RATE as COPY_RATE;

/// Profiled-run overhead against the baseline median beyond which we warn, %.
pub const MAX_OVERHEAD_PCT: f64 = 10.0;
/// Share of stacks (or of sampled time, for unnamed addresses) beyond which we warn, %.
pub const MAX_BAD_STACK_PCT: f64 = 1.0;
/// On-CPU samples plus off-CPU intervals needed for a verdict.
pub const MIN_SAMPLES: u64 = 50;
/// Slowest / fastest counted run beyond which the baseline is called noisy.
pub const MAX_SPREAD: f64 = 1.2;
/// CPU used by other processes, in cores over the baseline, from which they are named
/// as a likely cause of a noisy baseline.
const OTHER_LOAD_CORES: f64 = 0.1;

/// One measurement-quality problem, with the figures that show it.
#[derive(Debug, Clone, PartialEq)]
pub enum QualityWarning {
    /// `bench`: no profiled run, so no steps or hotspots.
    NoDeepProfile,
    /// A deep profile without baseline runs to compare its wall time with.
    OverheadUnknown,
    HighOverhead {
        pct: f64,
        profiled_ms: f64,
        baseline_ms: f64,
    },
    LostSamples {
        lost: u64,
        share_pct: f64,
    },
    /// Records were lost and the threads' samples (on-CPU periods, off-CPU durations)
    /// leave part of their wall time unaccounted for: what the verdict cannot see.
    UnaccountedTime {
        unaccounted_ms: f64,
        thread_ms: f64,
        share_pct: f64,
    },
    /// Switch-outs without a stack copy of their own at a high switch rate (durations
    /// kept): the off-CPU time whose stack was read late, reused from an identical
    /// earlier call, or is partial; `dropped` copies were lost by a full ring.
    ReusedStacks {
        dropped: u64,
        /// Copied switch-outs the reuse was checked against, and the share it got right.
        checks: u64,
        agreed_pct: f64,
        late_pct: f64,
        reused_pct: f64,
        partial_pct: f64,
    },
    TruncatedStacks {
        count: u64,
        share_pct: f64,
    },
    UnwindFailures {
        count: u64,
        share_pct: f64,
    },
    UnnamedAddresses {
        addresses: u64,
        time_share_pct: f64,
        /// Modules of the unnamed frames, most sampled time first (at most three).
        modules: Vec<String>,
    },
    TooFewSamples {
        samples: u64,
    },
    NoisyBaseline {
        min_ms: f64,
        max_ms: f64,
        load: Option<MachineLoad>,
    },
    /// The first run (a warm-up, or the first counted run without one) took at least
    /// [`COLD_FIRST_FACTOR`] times the median of the runs after it, and
    /// [`COLD_FIRST_MIN_MS`] more: its caches were cold.
    ColdFirstRun {
        warmup: bool,
        first_ms: f64,
        median_ms: f64,
        /// Bytes it read from storage, and the median of the runs after it.
        first_read: u64,
        rest_read: f64,
    },
    /// A warning the sampler recorded, kept as it was written (it carries its own fix).
    Sampler(String),
}

impl QualityWarning {
    /// What was seen, with its figures.
    pub fn what(&self) -> String {
        use QualityWarning as W;
        match self {
            W::NoDeepProfile => "no deep profile was taken: steps and hotspots are empty".into(),
            W::OverheadUnknown => {
                "overhead_pct unknown: no baseline runs to compare the profiled run with".into()
            }
            W::HighOverhead {
                pct,
                profiled_ms,
                baseline_ms,
            } => format!(
                "the profiled run took {pct:.0}% longer than the baseline median \
                 ({profiled_ms:.1} ms against {baseline_ms:.1} ms): profiling may have changed \
                 what the program spends its time on"
            ),
            W::LostSamples { lost, share_pct } => format!(
                "{} lost ({share_pct:.1}% of all): the profile misses that much of the run",
                if *lost == 1 {
                    "1 record (samples, switches, wake-ups)".to_string()
                } else {
                    format!("{lost} records (samples, switches, wake-ups)")
                }
            ),
            W::UnaccountedTime {
                unaccounted_ms,
                thread_ms,
                share_pct,
            } => format!(
                "{share_pct:.1}% of the threads' wall time ({unaccounted_ms:.1} ms of \
                 {thread_ms:.1} ms) has no sample or off-CPU interval: lost records took it, \
                 and the diagnosis cannot see what the threads did then"
            ),
            W::ReusedStacks {
                dropped,
                checks,
                agreed_pct,
                late_pct,
                reused_pct,
                partial_pct,
            } => format!(
                "at this switch rate most switch-outs had no stack copy of their own (copies \
                 are taken at up to {COPY_RATE} per second and thread{}; durations are all \
                 kept): {late_pct:.1}% of off-CPU time has its stack read while the thread \
                 still blocked (exact), {reused_pct:.1}% the stack of the same thread's last \
                 copied switch-out at the identical call (IP, SP, arguments, task state), \
                 {partial_pct:.1}% only the leaf frame{}",
                match *dropped {
                    0 => String::new(),
                    1 => ", 1 more dropped by a full ring".to_string(),
                    n => format!(", {n} more dropped by a full ring"),
                },
                if *checks > 0 {
                    format!(
                        "; checked against {checks} copied switch-outs at an already seen call, \
                         the lent stack was the copy's own in {agreed_pct:.1}%"
                    )
                } else {
                    String::new()
                }
            ),
            W::TruncatedStacks { count, share_pct } => format!(
                "{count} stacks ({share_pct:.1}% of samples and intervals) were cut where the \
                 copy of the user stack ended: their callers are missing"
            ),
            W::UnwindFailures { count, share_pct } => format!(
                "{count} stacks ({share_pct:.1}% of samples and intervals) could not be unwound \
                 to their root: their callers are missing"
            ),
            W::UnnamedAddresses {
                addresses,
                time_share_pct,
                modules,
            } => format!(
                "{} could not be named; stacks holding one carry {time_share_pct:.1}% of \
                 the sampled time (in {})",
                plural(*addresses, "distinct address"),
                modules.join(", ")
            ),
            W::TooFewSamples { samples } => format!(
                "only {} (on-CPU samples + off-CPU intervals): too few for a verdict, so the \
                 classification is Unknown",
                plural(*samples, "sample")
            ),
            W::NoisyBaseline {
                min_ms,
                max_ms,
                load,
            } => format!(
                "baseline wall time ranges from {min_ms:.1} to {max_ms:.1} ms (the slowest run \
                 {:.2}× the fastest): {}",
                max_ms / min_ms,
                describe_load(load.as_ref())
            ),
            W::ColdFirstRun {
                warmup,
                first_ms,
                median_ms,
                first_read,
                rest_read,
            } => {
                let mib = |b: f64| b / f64::from(1u32 << 20);
                let read = *first_read as f64;
                let storage = if read >= f64::from(1u32 << 20) && read >= 2.0 * rest_read {
                    format!(
                        "; it read {:.1} MiB from storage, the others {:.1} MiB (median): the \
                         page cache held the data after it",
                        mib(read),
                        mib(*rest_read)
                    )
                } else {
                    String::new()
                };
                format!(
                    "{} took {first_ms:.1} ms, {:.1}× the median of the runs after it \
                     ({median_ms:.1} ms){storage}: caches were cold for it and warm for the \
                     others, so the figures describe warm runs and a single cold start costs \
                     about {:.1} ms more",
                    if *warmup {
                        "the warm-up run"
                    } else {
                        "the first counted run (no --warmup)"
                    },
                    first_ms / median_ms,
                    first_ms - median_ms
                )
            }
            W::Sampler(s) => s.clone(),
        }
    }

    /// What to do about it (empty for a recorded sampler warning, which has its own).
    pub fn fix(&self) -> &'static str {
        use QualityWarning as W;
        match self {
            W::NoDeepProfile => "use `profmap run` for steps, hotspots and bottlenecks",
            W::OverheadUnknown => "use `profmap run` to measure a baseline beside the profile",
            W::HighOverhead { .. } => {
                "lower --frequency or --stack-bytes, or, if the target is noisy, raise --runs"
            }
            W::LostSamples { .. } => {
                "lower --frequency (or --stack-bytes) so the buffers keep up; off-CPU \
                 durations are lost only past ~100k switch-outs/s per CPU: lower the target's \
                 switch rate (batch its hand-offs) or run it on fewer threads"
            }
            W::UnaccountedTime { .. } => {
                "raise --buffer or lower --frequency (or --stack-bytes); at hundreds of \
                 thousands of switch-outs per second, lower the target's switch rate"
            }
            W::ReusedStacks { .. } => {
                "none needed when the check above agrees (95% or more); otherwise lower the \
                 target's switch rate: a thread that blocks less often than every few \
                 milliseconds has every switch-out copied"
            }
            W::TruncatedStacks { .. } => "raise --stack-bytes (up to 65528)",
            W::UnwindFailures { .. } => {
                "install debug symbols (unwind tables) for the modules involved, or build with \
                 -fno-omit-frame-pointer; raise --stack-bytes (up to 65528) for deep stacks"
            }
            W::UnnamedAddresses { .. } => {
                "install debug symbols for those modules (the -dbg or -debuginfo package), or \
                 profile an unstripped build"
            }
            W::TooFewSamples { .. } => "run longer or raise --frequency",
            W::NoisyBaseline { .. } => {
                "rerun when the machine is quiet, or raise --runs and compare medians"
            }
            W::ColdFirstRun { .. } => {
                "to measure cold starts, empty the caches before each run: --prepare 'sync; \
                 echo 3 > /proc/sys/vm/drop_caches' (as root); to leave a cold first run out \
                 of the figures, --warmup 1"
            }
            W::Sampler(_) => "",
        }
    }

    /// A notice, not a problem: kept in `measurement_quality` only, not repeated among
    /// the session's warnings or on the terminal (which already say which mode ran).
    pub fn is_notice(&self) -> bool {
        matches!(
            self,
            QualityWarning::NoDeepProfile | QualityWarning::OverheadUnknown
        )
    }
}

impl fmt::Display for QualityWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fix() {
            "" => write!(f, "{}", self.what()),
            fix => write!(f, "{} — {fix}", self.what()),
        }
    }
}

/// "1 sample", "2 samples", "3 distinct addresses".
fn plural(n: u64, noun: &str) -> String {
    match (n, noun.ends_with('s')) {
        (1, _) => format!("1 {noun}"),
        (_, true) => format!("{n} {noun}es"),
        _ => format!("{n} {noun}s"),
    }
}

/// "other load on the machine: load average 2.31 …; busiest other processes: …".
fn describe_load(load: Option<&MachineLoad>) -> String {
    let Some(l) = load else {
        return "the machine's load during the runs was not recorded".into();
    };
    // Other processes busy for a tenth of a core or more: load worth naming.
    let busy = l.window_ms > 0.0 && l.others_cpu_ms / l.window_ms >= OTHER_LOAD_CORES;
    let lead = if busy {
        "other load on the machine may explain it"
    } else {
        "the machine was otherwise quiet, so the target itself varies"
    };
    let mut s = format!(
        "{lead} — load average {:.2} (1 min), {:.2} (5 min); other processes used {:.0} ms \
         of CPU during the {:.0} ms of the runs",
        l.loadavg_1m, l.loadavg_5m, l.others_cpu_ms, l.window_ms
    );
    if !l.busiest.is_empty() {
        let top: Vec<String> = l
            .busiest
            .iter()
            .map(|b| format!("{} (pid {}, {:.0} ms)", b.name, b.pid, b.cpu_ms))
            .collect();
        s.push_str(&format!("; busiest: {}", top.join(", ")));
    }
    s
}

/// The assessment of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quality {
    /// (profiled run wall / baseline median wall − 1) × 100; None without both.
    pub overhead_pct: Option<f64>,
    pub warnings: Vec<QualityWarning>,
}

impl Quality {
    /// Why no verdict may be given, when the profile is too thin for one.
    pub fn verdict_withheld(&self) -> Option<String> {
        self.warnings.iter().find_map(|w| match w {
            QualityWarning::TooFewSamples { samples } => Some(format!(
                "only {}: too few for a verdict; run longer or raise --frequency",
                plural(*samples, "sample")
            )),
            _ => None,
        })
    }

    /// What a verdict given anyway must say about itself: the share of the threads'
    /// wall time it rests on, when lost records left more than 10% unaccounted for.
    pub fn verdict_caveat(&self) -> Option<String> {
        self.warnings.iter().find_map(|w| match w {
            QualityWarning::UnaccountedTime { share_pct, .. } if *share_pct > 10.0 => {
                Some(format!(
                    "this verdict rests on {:.0}% of the threads' wall time: records were lost \
                     for the rest (see the quality warnings)",
                    100.0 - share_pct
                ))
            }
            _ => None,
        })
    }

    /// Every warning as text, fix included.
    pub fn texts(&self) -> Vec<String> {
        self.warnings.iter().map(ToString::to_string).collect()
    }

    /// The warnings worth repeating among the session's (all but notices).
    pub fn headline_texts(&self) -> Vec<String> {
        self.warnings
            .iter()
            .filter(|w| !w.is_notice())
            .map(ToString::to_string)
            .collect()
    }
}

/// Assess a recording. `b` is the summary of the runs the baseline statistics cover.
pub fn assess(rec: &Recording, b: Option<&BaselineSummary>) -> Quality {
    let mut q = Quality::default();
    match &rec.sampled {
        None => q.warnings.push(QualityWarning::NoDeepProfile),
        Some(s) => {
            q.overhead_pct = match (b, &rec.baseline) {
                (Some(b), Some(_)) if b.wall_time_ms > 0.0 => {
                    Some((s.wall_ms / b.wall_time_ms - 1.0) * 100.0)
                }
                _ => None,
            };
            q.warnings.extend(
                s.quality
                    .warnings
                    .iter()
                    .cloned()
                    .map(QualityWarning::Sampler),
            );
            match (q.overhead_pct, b) {
                (None, _) => q.warnings.push(QualityWarning::OverheadUnknown),
                (Some(pct), Some(b)) if pct > MAX_OVERHEAD_PCT => {
                    q.warnings.push(QualityWarning::HighOverhead {
                        pct,
                        profiled_ms: s.wall_ms,
                        baseline_ms: b.wall_time_ms,
                    })
                }
                _ => {}
            }
            q.warnings.extend(sample_warnings(s));
        }
    }
    if let Some(base) = &rec.baseline {
        q.warnings.extend(spread_warning(rec, b));
        q.warnings.extend(cold_first_run(&base.runs));
    }
    q
}

/// The first run is this many times slower than the median of the others: its caches
/// were cold.
pub const COLD_FIRST_FACTOR: f64 = 2.0;
/// ... and by at least this much, ms: a run of a millisecond or two varies by as much
/// from one start to the next.
pub const COLD_FIRST_MIN_MS: f64 = 10.0;

/// Whether the first of a baseline's runs (warm-ups first) found cold what the runs
/// after it found warm (the page cache, with the storage reads that say so; the
/// dynamic loader's; the program's own): it took at least [`COLD_FIRST_FACTOR`] times
/// their median, and [`COLD_FIRST_MIN_MS`] more. The counted figures then describe warm runs, and a user starting the
/// program once meets the first run's time.
fn cold_first_run(runs: &[RunMeasurement]) -> Option<QualityWarning> {
    let (first, rest) = runs.split_first()?;
    let walls: Vec<f64> = rest.iter().map(|r| r.wall_ms).collect();
    let median_ms = crate::stats::median(&walls).filter(|m| *m > 0.0)?;
    if first.wall_ms < COLD_FIRST_FACTOR * median_ms
        || first.wall_ms - median_ms < COLD_FIRST_MIN_MS
    {
        return None;
    }
    let reads: Vec<f64> = rest.iter().map(|r| r.read_bytes as f64).collect();
    Some(QualityWarning::ColdFirstRun {
        warmup: first.warmup,
        first_ms: first.wall_ms,
        median_ms,
        first_read: first.read_bytes,
        rest_read: crate::stats::median(&reads).unwrap_or(0.0),
    })
}

/// Share of the sampled time in off-CPU intervals, beyond which a handful of samples
/// still supports a verdict when those intervals are exact (switch records).
pub const MEASURED_OFF_CPU_PCT: f64 = 90.0;

/// Whether the profile's time is mostly off-CPU intervals taken from the kernel's switch
/// records: their start and end are measured, not sampled, so a one-second wait in
/// `accept` is one interval and still a verdict. That holds for every switch source —
/// the `sched_switch` tracepoint, the context-switches event, and the context-switch
/// records of a user-space-only run, where only the place waited on is read from /proc.
fn measured_off_cpu(s: &SampledProfile) -> bool {
    let from_switches = ["sched_switch", "context-switch"]
        .iter()
        .any(|src| s.sampler.contains(src));
    if !from_switches || s.quality.off_cpu_intervals == 0 {
        return false;
    }
    let (mut off, mut all) = (0u64, 0u64);
    for x in s.samples.iter() {
        all = all.saturating_add(x.weight_ns);
        // A preempted interval is CPU contention, which the samples decide.
        let blocked = matches!(x.kind, crate::profile::SampleKind::OffCpu { state }
            if state != crate::profile::WaitState::Preempted);
        if blocked {
            off = off.saturating_add(x.weight_ns);
        }
    }
    off >= MEASURED_OFF_CPU_MIN_NS && off as f64 * 100.0 / all as f64 >= MEASURED_OFF_CPU_PCT
}

/// Blocked time those intervals must hold for a verdict, ns: a program that ends in a
/// few milliseconds has nothing to say.
pub const MEASURED_OFF_CPU_MIN_NS: u64 = 100_000_000;

/// Lost records, truncated stacks, unwind failures, unnamed addresses, too few samples.
fn sample_warnings(s: &SampledProfile) -> Vec<QualityWarning> {
    let sq = &s.quality;
    let taken = sq.samples + sq.off_cpu_intervals;
    let pct = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            n as f64 * 100.0 / of as f64
        }
    };
    let mut w = Vec::new();
    if sq.lost_samples > 0 {
        w.push(QualityWarning::LostSamples {
            lost: sq.lost_samples,
            share_pct: pct(sq.lost_samples, taken + sq.lost_samples),
        });
    }
    // Unaccounted: the span its samples leave uncovered, or the waits cut at windows of
    // lost records, whichever is larger (cpu-clock periods over-count a thread that runs
    // in short bursts, which can hide a gap from the first).
    if sq.lost_samples > 0
        && let Some((seen, span)) = accounted(s)
    {
        let missing = (span - seen).max(sq.off_cpu_lost_ns.min(span));
        if missing * 100 > span {
            w.push(QualityWarning::UnaccountedTime {
                unaccounted_ms: missing as f64 / 1e6,
                thread_ms: span as f64 / 1e6,
                share_pct: pct(missing, span),
            });
        }
    }
    // Copies dropped in a burst of a slow program (tar: 303, 0.4% of the off-CPU time
    // lent) are no warning: the shares stay in the quality block.
    let inferred = sq.off_cpu_reused_stack_share.unwrap_or(0.0)
        + sq.off_cpu_partial_stack_share.unwrap_or(0.0);
    if inferred > INFERRED_WARN_SHARE {
        let share = |v: Option<f64>| v.map_or(0.0, |x| x * 100.0);
        w.push(QualityWarning::ReusedStacks {
            dropped: sq.lost_stack_copies,
            checks: sq.reuse_checks,
            agreed_pct: pct(sq.reuse_agreed, sq.reuse_checks),
            late_pct: share(sq.off_cpu_late_stack_share),
            reused_pct: share(sq.off_cpu_reused_stack_share),
            partial_pct: share(sq.off_cpu_partial_stack_share),
        });
    }
    if taken < MIN_SAMPLES && !measured_off_cpu(s) {
        // Shares of a handful of stacks say nothing; the verdict is withheld anyway.
        w.push(QualityWarning::TooFewSamples { samples: taken });
        return w;
    }
    // Truncated stacks are counted among the unwind failures too: report them apart.
    let truncated = sq.truncated_stacks.min(sq.unwind_failures);
    let other_failures = sq.unwind_failures - truncated;
    if pct(truncated, taken) > MAX_BAD_STACK_PCT {
        w.push(QualityWarning::TruncatedStacks {
            count: truncated,
            share_pct: pct(truncated, taken),
        });
    }
    if pct(other_failures, taken) > MAX_BAD_STACK_PCT {
        w.push(QualityWarning::UnwindFailures {
            count: other_failures,
            share_pct: pct(other_failures, taken),
        });
    }
    let (unnamed_pct, modules) = unnamed_time(s);
    if sq.unnamed_addresses > 0 && unnamed_pct > MAX_BAD_STACK_PCT {
        w.push(QualityWarning::UnnamedAddresses {
            addresses: sq.unnamed_addresses,
            time_share_pct: unnamed_pct,
            modules,
        });
    }
    w
}

/// Share of off-CPU time with a lent or partial stack above which a warning says so.
const INFERRED_WARN_SHARE: f64 = 0.01;

/// Threads shorter than this are left out of [`accounted`]: a few samples over a
/// few milliseconds say nothing about coverage.
const ACCOUNTED_MIN_SPAN_NS: u64 = 10_000_000;

/// The threads' wall time their samples account for, and that wall time (ns): for each
/// thread, from its first sample's start to its last one's end, the on-CPU periods and
/// off-CPU durations summed (at most the span: cpu-clock periods over-count short
/// bursts). `None` without off-CPU intervals: on-CPU samples alone never cover a thread.
fn accounted(s: &SampledProfile) -> Option<(u64, u64)> {
    if s.quality.off_cpu_intervals == 0 {
        return None;
    }
    let mut by_tid: FastMap<(i32, i32), (u64, u64, u64)> = FastMap::default();
    for x in s.samples.iter() {
        let end = x.time_ns.saturating_add(x.weight_ns);
        let e = by_tid.entry((x.pid, x.tid)).or_insert((x.time_ns, end, 0));
        e.0 = e.0.min(x.time_ns);
        e.1 = e.1.max(end);
        e.2 = e.2.saturating_add(x.weight_ns);
    }
    let (mut seen, mut span) = (0u64, 0u64);
    for (first, last, sum) in by_tid.into_values() {
        let t = last.saturating_sub(first);
        if t >= ACCOUNTED_MIN_SPAN_NS {
            span += t;
            seen += sum.min(t);
        }
    }
    (span > 0).then_some((seen, span))
}

/// True for a frame symbolization could not name: `module+0xoffset`, no file.
fn is_unnamed(f: &Frame) -> bool {
    f.file.is_none()
        && f.module.as_deref().is_some_and(|m| {
            f.function
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with("+0x"))
        })
}

/// Share of the sampled time (all sample weights) whose stack holds an unnamed frame,
/// %, and the modules of those frames (the leaf-most unnamed frame of each sample),
/// most time first, at most three.
fn unnamed_time(s: &SampledProfile) -> (f64, Vec<String>) {
    let unnamed: Vec<bool> = s.frames.iter().map(is_unnamed).collect();
    // Leaf → the leaf-most unnamed frame of its stack, if any.
    let mut by_leaf: FastMap<u32, Option<u32>> = FastMap::default();
    let mut by_module: FastMap<&str, u128> = FastMap::default();
    let (mut total, mut bad) = (0u128, 0u128);
    for smp in s.samples.iter() {
        total += u128::from(smp.weight_ns);
        let Some(leaf) = smp.stack.get() else {
            continue;
        };
        let found = *by_leaf.entry(leaf).or_insert_with(|| {
            s.stack_frame_ids(leaf)
                .into_iter()
                .rev()
                .find(|&f| unnamed.get(f as usize).copied().unwrap_or(false))
        });
        if let Some(f) = found {
            bad += u128::from(smp.weight_ns);
            let module = s.frames[f as usize].module.as_deref().unwrap_or("?");
            *by_module.entry(module).or_default() += u128::from(smp.weight_ns);
        }
    }
    let mut modules: Vec<(&str, u128)> = by_module.into_iter().collect();
    modules.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let names = modules.iter().take(3).map(|m| m.0.to_string()).collect();
    if total == 0 {
        (0.0, names)
    } else {
        (bad as f64 * 100.0 / total as f64, names)
    }
}

/// The noisy-baseline warning, when the counted runs' wall times spread too far.
fn spread_warning(rec: &Recording, b: Option<&BaselineSummary>) -> Option<QualityWarning> {
    let wall = b?.statistics.get("wall_time_ms")?;
    if wall.values.len() < 2 || wall.min <= 0.0 || wall.max / wall.min <= MAX_SPREAD {
        return None;
    }
    Some(QualityWarning::NoisyBaseline {
        min_ms: wall.min,
        max_ms: wall.max,
        load: rec.baseline.as_ref()?.machine_load.clone(),
    })
}

#[cfg(test)]
#[path = "quality_tests.rs"]
mod tests;
