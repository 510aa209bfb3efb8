//! The quality rules on constructed recordings: each warning fires past its threshold,
//! with its figures and its fix, and stays silent below it.

use super::*;
use crate::profile::{
    Baseline, BusyProcess, ExitStatus, FrameKind, RunMeasurement, SampleKind, SampleQuality,
    SessionMeta, StackNode, ThreadSample,
};
use crate::report::baseline::summarize;

fn run(index: u32, wall_ms: f64) -> RunMeasurement {
    RunMeasurement {
        index,
        warmup: false,
        pid: 100 + index as i32,
        wall_ms,
        user_ms: wall_ms / 2.0,
        sys_ms: 0.0,
        max_rss_kb: 1000,
        tree_rss_peak_kb: None,
        memory_delta_kb: None,
        read_bytes: 0,
        write_bytes: 0,
        rchar: 0,
        wchar: 0,
        read_calls: None,
        write_calls: None,
        voluntary_cs: 0,
        involuntary_cs: 0,
        minor_faults: 0,
        major_faults: 0,
        processes: 1,
        processes_basis: "counted".into(),
        threads_peak: 1,
        exit: ExitStatus::Code { code: 0 },
        timeline: Vec::new(),
        disks: Vec::new(),
    }
}

fn recording(walls: &[f64], sampled: Option<SampledProfile>) -> Recording {
    let mut rec = Recording::new(SessionMeta {
        run_id: "t".into(),
        command: vec!["x".into()],
        started_unix_s: 0.0,
        tool_version: "0".into(),
        hostname: None,
        kernel: None,
        cpus: Some(2),
    });
    rec.baseline = Some(Baseline {
        warmup_runs: 0,
        requested_runs: walls.len() as u32,
        runs: walls
            .iter()
            .enumerate()
            .map(|(i, w)| run(i as u32 + 1, *w))
            .collect(),
        machine_load: Some(MachineLoad {
            loadavg_1m: 2.5,
            loadavg_5m: 1.5,
            window_ms: 9000.0,
            others_cpu_ms: 4200.0,
            busiest: vec![BusyProcess {
                pid: 4242,
                name: "cc1".into(),
                cpu_ms: 4000.0,
            }],
        }),
    });
    rec.sampled = sampled;
    rec
}

/// A profile of `n` on-CPU samples on one stack, `unnamed` of them under an unnamed
/// frame, with the given quality counters.
fn profile(n: u64, unnamed: u64, wall_ms: f64, quality: SampleQuality) -> SampledProfile {
    let frame = |function: &str, file: Option<&str>| Frame {
        function: function.into(),
        module: Some("prog".into()),
        file: file.map(Into::into),
        line: None,
        kind: FrameKind::User,
        inlined: false,
    };
    let sample = |stack: u32| ThreadSample {
        pid: 1,
        tid: 1,
        time_ns: 0,
        stack: Some(stack).into(),
        weight_ns: 1_000_000,
        kind: SampleKind::OnCpu,
    };
    SampledProfile {
        wall_ms,
        frames: vec![frame("main", Some("main.c")), frame("prog+0x1234", None)],
        stacks: vec![
            StackNode {
                parent: None,
                frame: 0,
            },
            StackNode {
                parent: Some(0),
                frame: 1,
            },
        ],
        samples: (0..n).map(|i| sample(u32::from(i < unnamed))).collect(),
        quality: SampleQuality {
            samples: n,
            ..quality
        },
        ..SampledProfile::default()
    }
}

fn assess_rec(rec: &Recording) -> Quality {
    let runs: Vec<_> = rec.baseline.iter().flat_map(|b| b.counted()).collect();
    assess(rec, summarize(&runs, 0).as_ref())
}

fn find(q: &Quality, pred: fn(&QualityWarning) -> bool) -> Option<&QualityWarning> {
    q.warnings.iter().find(|w| pred(w))
}

#[test]
fn overhead_beyond_10_percent_is_named_with_its_fix() {
    let rec = recording(
        &[100.0, 100.0, 100.0],
        Some(profile(500, 0, 183.0, Default::default())),
    );
    let q = assess_rec(&rec);
    assert!((q.overhead_pct.unwrap_or(0.0) - 83.0).abs() < 1e-6);
    let w = find(&q, |w| matches!(w, QualityWarning::HighOverhead { .. })).expect("warned");
    let text = w.to_string();
    assert!(
        text.contains("83% longer") && text.contains("--frequency"),
        "{text}"
    );

    let rec = recording(
        &[100.0, 100.0, 100.0],
        Some(profile(500, 0, 109.0, Default::default())),
    );
    let q = assess_rec(&rec);
    assert!(find(&q, |w| matches!(w, QualityWarning::HighOverhead { .. })).is_none());
}

#[test]
fn any_lost_sample_is_a_warning_with_its_share() {
    let quality = SampleQuality {
        lost_samples: 167,
        off_cpu_intervals: 333,
        ..Default::default()
    };
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(500, 0, 100.0, quality)),
    ));
    let text = find(&q, |w| matches!(w, QualityWarning::LostSamples { .. }))
        .expect("warned")
        .to_string();
    assert!(
        text.starts_with("167 records (samples, switches, wake-ups) lost (16.7% of all)"),
        "{text}"
    );
    assert!(text.contains("lower --frequency"), "{text}");
}

#[test]
fn truncated_stacks_and_unwind_failures_past_1_percent() {
    // 1000 stacks: 205 truncated (among 346 unwind failures), so 141 other failures.
    let quality = SampleQuality {
        truncated_stacks: 205,
        unwind_failures: 346,
        ..Default::default()
    };
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(1000, 0, 100.0, quality)),
    ));
    let t = find(&q, |w| matches!(w, QualityWarning::TruncatedStacks { .. })).expect("truncated");
    assert_eq!(
        *t,
        QualityWarning::TruncatedStacks {
            count: 205,
            share_pct: 20.5
        }
    );
    assert!(t.to_string().contains("--stack-bytes (up to 65528)"));
    let u = find(&q, |w| matches!(w, QualityWarning::UnwindFailures { .. })).expect("unwind");
    assert!(u.to_string().starts_with("141 stacks (14.1%"), "{u}");
    assert!(u.to_string().contains("debug symbols"));

    // 10 of 1000 is 1%, not beyond it.
    let quality = SampleQuality {
        truncated_stacks: 10,
        unwind_failures: 20,
        ..Default::default()
    };
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(1000, 0, 100.0, quality)),
    ));
    assert!(find(&q, |w| matches!(w, QualityWarning::TruncatedStacks { .. })).is_none());
    assert!(find(&q, |w| matches!(w, QualityWarning::UnwindFailures { .. })).is_none());
}

#[test]
fn unnamed_addresses_are_weighed_by_sampled_time() {
    let quality = SampleQuality {
        unnamed_addresses: 7110,
        ..Default::default()
    };
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(1000, 250, 100.0, quality.clone())),
    ));
    let w = find(&q, |w| matches!(w, QualityWarning::UnnamedAddresses { .. })).expect("warned");
    assert!(
        w.to_string().contains("7110 distinct addresses could not"),
        "{w}"
    );
    assert!(
        w.to_string()
            .contains("25.0% of the sampled time (in prog)"),
        "{w}"
    );
    // Under 1% of the time: silent, however many addresses.
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(1000, 5, 100.0, quality)),
    ));
    assert!(find(&q, |w| matches!(w, QualityWarning::UnnamedAddresses { .. })).is_none());
}

#[test]
fn too_few_samples_withholds_the_verdict() {
    let quality = SampleQuality {
        unnamed_addresses: 3,
        truncated_stacks: 6,
        unwind_failures: 6,
        ..Default::default()
    };
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(12, 12, 100.0, quality)),
    ));
    let why = q.verdict_withheld().expect("withheld");
    assert!(
        why.starts_with("only 12 samples: too few for a verdict"),
        "{why}"
    );
    // Shares of 12 stacks are not worth a warning of their own.
    let shares: Vec<_> = q
        .warnings
        .iter()
        .filter(|w| {
            matches!(
                w,
                QualityWarning::UnnamedAddresses { .. } | QualityWarning::TruncatedStacks { .. }
            )
        })
        .collect();
    assert!(shares.is_empty(), "{shares:?}");
    let q = assess_rec(&recording(
        &[100.0; 3],
        Some(profile(50, 0, 100.0, Default::default())),
    ));
    assert_eq!(q.verdict_withheld(), None);
}

#[test]
fn a_few_exact_off_cpu_intervals_holding_the_time_support_a_verdict() {
    // One 1 s wait in accept and 3 on-CPU samples, from switch records: measured.
    let mut p = profile(3, 0, 1000.0, Default::default());
    p.sampler = "perf_event cpu-clock + sched_switch".into();
    p.samples.push(ThreadSample {
        pid: 1,
        tid: 1,
        time_ns: 3_000_000,
        stack: Some(0).into(),
        weight_ns: 1_000_000_000,
        kind: SampleKind::OffCpu {
            state: crate::profile::WaitState::Sleeping,
        },
    });
    p.quality.off_cpu_intervals = 1;
    let q = assess_rec(&recording(&[1000.0; 3], Some(p.clone())));
    assert_eq!(q.verdict_withheld(), None);
    // A user-space-only run's context-switch records time the wait as exactly.
    p.sampler = "perf_event cpu-clock + context-switch records, user space only; \
                 blocked threads read from /proc"
        .into();
    let q = assess_rec(&recording(&[1000.0; 3], Some(p.clone())));
    assert_eq!(q.verdict_withheld(), None);
    // A sampler with no switch records has no measured intervals: withheld.
    p.sampler = "perf_event cpu-clock, user space only".into();
    let q = assess_rec(&recording(&[1000.0; 3], Some(p)));
    assert!(q.verdict_withheld().is_some());
}

#[test]
fn a_wide_baseline_spread_names_the_other_load() {
    let q = assess_rec(&recording(&[3600.0, 13600.0, 5000.0], None));
    let w = find(&q, |w| matches!(w, QualityWarning::NoisyBaseline { .. })).expect("warned");
    let text = w.to_string();
    for part in [
        "3600.0 to 13600.0 ms",
        "other load on the machine may explain it — load average 2.50",
        "cc1 (pid 4242, 4000 ms)",
        "--runs",
    ] {
        assert!(text.contains(part), "{part} missing: {text}");
    }
    // A quiet machine: the target itself is said to vary.
    let mut rec = recording(&[100.0, 500.0, 500.0], None);
    if let Some(l) = rec.baseline.as_mut().and_then(|b| b.machine_load.as_mut()) {
        l.others_cpu_ms = 20.0;
    }
    let q = assess_rec(&rec);
    let text = find(&q, |w| matches!(w, QualityWarning::NoisyBaseline { .. }))
        .expect("warned")
        .to_string();
    assert!(
        text.contains("otherwise quiet, so the target itself varies"),
        "{text}"
    );
    let q = assess_rec(&recording(&[100.0, 119.0, 110.0], None));
    assert!(find(&q, |w| matches!(w, QualityWarning::NoisyBaseline { .. })).is_none());
    assert!(
        q.warnings.iter().all(QualityWarning::is_notice),
        "{:?}",
        q.warnings
    );
}

#[test]
fn a_first_run_much_slower_than_the_rest_is_a_cold_start() {
    let text = |runs: &[RunMeasurement]| super::cold_first_run(runs).map(|w| w.to_string());
    let mut warm_up = run(0, 1400.0);
    warm_up.warmup = true;
    warm_up.read_bytes = 260 << 20;
    let mut runs = vec![warm_up, run(1, 180.0), run(2, 200.0), run(3, 190.0)];
    let w = text(&runs).expect("warned");
    assert!(
        w.starts_with(
            "the warm-up run took 1400.0 ms, 7.4× the median of the runs after it (190.0 ms)"
        ) && w.contains("it read 260.0 MiB from storage, the others 0.0 MiB")
            && w.contains("--prepare"),
        "{w}"
    );
    // Without a warm-up, the first counted run says so; a first run within 2× says
    // nothing, and neither does a single run.
    runs[0].warmup = false;
    runs[0].read_bytes = 0;
    let w = text(&runs).expect("warned");
    assert!(
        w.starts_with("the first counted run (no --warmup)") && !w.contains("MiB"),
        "{w}"
    );
    runs[0].wall_ms = 350.0;
    assert!(text(&runs).is_none());
    // Nor does a 2 ms program whose first start took 5 ms.
    let quick = [run(0, 5.0), run(1, 2.0), run(2, 2.1)];
    assert!(text(&quick).is_none());
    assert!(text(&runs[..1]).is_none());
}
