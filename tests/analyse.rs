//! Analysis and export on hand-built profiles whose answer is known by construction, and
//! snapshot tests on the checked-in fixture recordings (`tests/fixtures/recordings/`).
//!
//! The fixtures are written by the ignored test `regenerate_fixture_recordings` from the
//! same builders as below: `cargo test --test analyse -- --ignored regenerate`.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use profmap::analyse::{Analysis, Classification, Step, StepType, analyse};
use profmap::export::flamegraph::{FlameKind, svg};
use profmap::export::folded::{StackWeights, folded};
use profmap::profile::{
    ExitStatus, Frame, FrameKind, ProcessInfo, Recording, RunMeasurement, SampleKind,
    SampledProfile, SessionMeta, StackNode, ThreadInfo, ThreadSample, WaitState, read_recording,
};

const MS: u64 = 1_000_000;

/// Builds a `SampledProfile` from readable stacks. A frame is written `name`,
/// `name@file:line`, `k:name` (kernel), `py:name` (Python) or `i:name` (user code
/// inlined into its caller).
#[derive(Default)]
struct Builder {
    p: SampledProfile,
    frames: HashMap<Frame, u32>,
    nodes: HashMap<(Option<u32>, u32), u32>,
    t: u64,
}

fn on() -> SampleKind {
    SampleKind::OnCpu
}
fn off(state: WaitState) -> SampleKind {
    SampleKind::OffCpu { state }
}

impl Builder {
    fn new() -> Self {
        let mut b = Builder::default();
        b.p.sampler = "hand-built".into();
        b.p.frequency_hz = 1000.0;
        b
    }

    fn process(mut self, pid: i32, ppid: Option<i32>, name: &str) -> Self {
        self.p.processes.push(ProcessInfo {
            pid,
            ppid,
            name: name.into(),
            exe: Some(format!("/usr/bin/{name}")),
        });
        self.p.threads.push(ThreadInfo {
            pid,
            tid: pid,
            name: name.into(),
        });
        self
    }

    fn thread(mut self, pid: i32, tid: i32, name: &str) -> Self {
        self.p.threads.push(ThreadInfo {
            pid,
            tid,
            name: name.into(),
        });
        self
    }

    fn frame(&mut self, spec: &str) -> u32 {
        let (inlined, spec) = match spec.strip_prefix("i:") {
            Some(r) => (true, r),
            None => (false, spec),
        };
        let (kind, rest) = if let Some(r) = spec.strip_prefix("k:") {
            (FrameKind::Kernel, r)
        } else if let Some(r) = spec.strip_prefix("py:") {
            (FrameKind::Python, r)
        } else {
            (FrameKind::User, spec)
        };
        let (function, file, line) = match rest.split_once('@') {
            Some((f, loc)) => match loc.split_once(':') {
                Some((file, line)) => (f, Some(file.to_string()), line.parse().ok()),
                None => (f, Some(loc.to_string()), None),
            },
            None => (rest, None, None),
        };
        let module = match kind {
            FrameKind::Kernel => Some("[kernel]".to_string()),
            FrameKind::Python => Some("app.py".to_string()),
            _ if function.starts_with("__") || function.contains("nanosleep") => {
                Some("libc.so.6".to_string())
            }
            _ => Some("app".to_string()),
        };
        let frame = Frame {
            function: function.into(),
            module,
            file,
            line,
            kind,
            inlined,
        };
        let next = self.p.frames.len() as u32;
        let id = *self.frames.entry(frame.clone()).or_insert(next);
        if id == next {
            self.p.frames.push(frame);
        }
        id
    }

    fn stack(&mut self, spec: &str) -> Option<u32> {
        let mut parent = None;
        for f in spec.split(';').filter(|f| !f.is_empty()) {
            let frame = self.frame(f);
            let next = self.p.stacks.len() as u32;
            let id = *self.nodes.entry((parent, frame)).or_insert(next);
            if id == next {
                self.p.stacks.push(StackNode { parent, frame });
            }
            parent = Some(id);
        }
        parent
    }

    /// `count` samples of `weight_ns` each on `stack` (root first, `;`-separated).
    fn add(
        mut self,
        pid: i32,
        tid: i32,
        stack: &str,
        kind: SampleKind,
        count: u32,
        weight_ns: u64,
    ) -> Self {
        let leaf = self.stack(stack);
        for _ in 0..count {
            self.p.samples.push(ThreadSample {
                pid,
                tid,
                time_ns: self.t,
                stack: leaf.into(),
                weight_ns,
                kind,
            });
            self.t += weight_ns;
            match kind {
                SampleKind::OnCpu => self.p.quality.samples += 1,
                SampleKind::OffCpu { .. } => self.p.quality.off_cpu_intervals += 1,
            }
        }
        self
    }

    fn build(mut self) -> SampledProfile {
        self.p.wall_ms = self.t as f64 / MS as f64;
        self.p
    }
}

const C_START: &str = "_start;__libc_start_main;__libc_start_call_main";
const NANOSLEEP_K: &str = "k:entry_SYSCALL_64_after_hwframe;k:do_syscall_64;\
k:__x64_sys_clock_nanosleep;k:common_nsleep;k:hrtimer_nanosleep;k:do_nanosleep;k:schedule";

/// main → a 50 %, b 30 %, c 20 %, all on-CPU (1 ms samples).
fn three_way() -> SampledProfile {
    let s = |f: &str| format!("{C_START};main@prog.c:40;{f}");
    Builder::new()
        .process(1000, Some(1), "prog")
        .add(1000, 1000, &s("a@prog.c:10"), on(), 50, MS)
        .add(1000, 1000, &s("b@prog.c:20"), on(), 30, MS)
        .add(1000, 1000, &s("c@prog.c:30"), on(), 20, MS)
        .build()
}

/// Rust main → compute (on-CPU 50 %), do_sleep (nanosleep off-CPU 50 %).
fn compute_and_sleep() -> SampledProfile {
    let rt = "_start;__libc_start_main_impl;main;std::rt::lang_start_internal;\
std::rt::lang_start::{{closure}};std::sys::backtrace::__rust_begin_short_backtrace;\
core::ops::function::FnOnce::call_once;sleepy::main@src/main.rs:3";
    Builder::new()
        .process(2000, Some(1), "sleepy")
        .add(
            2000,
            2000,
            &format!("{rt};sleepy::compute@src/main.rs:12"),
            on(),
            50,
            MS,
        )
        .add(
            2000,
            2000,
            &format!("{rt};sleepy::do_sleep@src/main.rs:20;std::thread::sleep;clock_nanosleep;{NANOSLEEP_K}"),
            off(WaitState::Sleeping),
            5,
            10 * MS,
        )
        .build()
}

/// A shell (pid 100) waits in wait4 for its child (pid 101), which fsyncs 60 ms and
/// computes 20 ms.
fn shell_and_child() -> SampledProfile {
    Builder::new()
        .process(100, Some(1), "sh")
        .process(101, Some(100), "worker")
        .add(
            100,
            100,
            &format!("{C_START};main;wait_for_child;waitpid;k:do_syscall_64;k:__do_sys_wait4;k:kernel_wait4;k:do_wait;k:schedule"),
            off(WaitState::Sleeping),
            4,
            20 * MS,
        )
        .add(
            101,
            101,
            &format!("{C_START};main;write_all@worker.c:15;fsync;k:do_syscall_64;k:__x64_sys_fsync;k:ext4_sync_file;k:jbd2_log_wait_commit;k:schedule"),
            off(WaitState::Uninterruptible),
            6,
            10 * MS,
        )
        .add(
            101,
            101,
            &format!("{C_START};main;crunch@worker.c:30"),
            on(),
            20,
            MS,
        )
        .build()
}

/// Two threads: the main thread waits 70 ms on a futex held by the worker, which runs
/// 30 ms and is preempted 5 ms.
fn futex_wait() -> SampledProfile {
    Builder::new()
        .process(300, Some(1), "locky")
        .thread(300, 301, "worker")
        .add(
            300,
            300,
            &format!("{C_START};main;take_lock@locky.c:8;__lll_lock_wait;k:do_syscall_64;k:__x64_sys_futex;k:do_futex;k:futex_wait;k:futex_wait_queue;k:schedule"),
            off(WaitState::Sleeping),
            7,
            10 * MS,
        )
        .add(300, 301, "clone3;start_thread;worker_loop@locky.c:20;hold_lock@locky.c:25", on(), 30, MS)
        .add(
            300,
            301,
            "clone3;start_thread;worker_loop@locky.c:20;hold_lock@locky.c:25",
            off(WaitState::Preempted),
            1,
            5 * MS,
        )
        .build()
}

fn step<'a>(steps: &'a [Step], id: &str) -> &'a Step {
    fn find<'a>(steps: &'a [Step], id: &str) -> Option<&'a Step> {
        steps.iter().find_map(|s| {
            if s.id == id {
                Some(s)
            } else {
                find(&s.children, id)
            }
        })
    }
    find(steps, id).unwrap_or_else(|| panic!("no step {id}"))
}

fn all_steps(steps: &[Step]) -> Vec<&Step> {
    let mut out = Vec::new();
    for s in steps {
        out.push(s);
        out.extend(all_steps(&s.children));
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn three_way_split_gives_three_children_and_cpu() {
    let a = analyse(&three_way());
    assert!(close(a.total_wall_ms, 100.0));
    assert!(close(a.total_cpu_ms, 100.0));
    assert_eq!(a.classification, Classification::Cpu);
    assert_eq!(a.steps.len(), 1, "one entry step: {:?}", a.steps);
    let main = &a.steps[0];
    assert_eq!((main.id.as_str(), main.function.as_str()), ("1", "main"));
    assert_eq!(main.location.as_deref(), Some("prog.c:40"));
    assert_eq!(main.process.as_deref(), Some("prog (1000)"));
    assert!(close(main.time_share_pct, 100.0));
    let kids: Vec<(&str, &str, f64)> = main
        .children
        .iter()
        .map(|s| (s.id.as_str(), s.function.as_str(), s.time_share_pct))
        .collect();
    assert_eq!(
        kids,
        vec![("1.1", "a", 50.0), ("1.2", "b", 30.0), ("1.3", "c", 20.0)]
    );
    for s in &main.children {
        assert_eq!(s.classification, Classification::Cpu);
        assert_eq!(s.step_type, StepType::FunctionCall);
        assert!(close(s.self_time_ms, s.wall_time_ms));
        assert!(close(s.cpu_time_ms, s.wall_time_ms));
    }
    let hs: Vec<(&str, f64, bool)> = a
        .hotspots
        .iter()
        .map(|h| (h.function.as_str(), h.self_share_pct, h.on_cpu))
        .collect();
    assert_eq!(
        hs,
        vec![("a", 50.0, true), ("b", 30.0, true), ("c", 20.0, true)]
    );
    assert_eq!(a.hotspots[0].location.as_deref(), Some("prog.c:10"));
    let tops: Vec<&str> = a.top_bottlenecks.iter().map(|b| b.step.as_str()).collect();
    assert_eq!(tops, vec!["1.1", "1.2", "1.3"]);
    assert!(
        a.bottleneck_detail.starts_with("CPU: 100.0% of 100 ms"),
        "{}",
        a.bottleneck_detail
    );
    assert!(close(a.wait_breakdown_ms["cpu"], 100.0));
    assert!(close(a.wait_breakdown_ms["sleep"], 0.0));
    assert_eq!(a.wait_breakdown_ms.len(), 16);
}

#[test]
fn a_bottleneck_in_inlined_code_names_the_function_it_sits_in() {
    let p = Builder::new()
        .process(1, None, "app")
        .add(1, 1, "main;compute@prog.c:5;i:lt@cmp.rs:10", on(), 70, MS)
        .add(
            1,
            1,
            "main;compute@prog.c:5;i:next@iter.rs:20",
            on(),
            30,
            MS,
        )
        .build();
    let a = analyse(&p);
    // One bottleneck: the function the inlined code sits in, with its hottest inlined
    // part named.
    let top = &a.top_bottlenecks[0];
    assert_eq!(a.top_bottlenecks.len(), 1);
    assert_eq!(top.function, "compute");
    assert!(
        top.description
            .starts_with("compute (prog.c:5; hot in inlined lt) holds 100.0%"),
        "{}",
        top.description
    );
    // Hotspots credit inlined code to the function whose machine code it is.
    assert_eq!(a.hotspots[0].function, "compute");
    assert!(close(a.hotspots[0].self_share_pct, 100.0));
}

#[test]
fn compute_and_sleep_split_half_and_half() {
    let a = analyse(&compute_and_sleep());
    assert!(close(a.total_wall_ms, 100.0));
    assert!(close(a.total_cpu_ms, 50.0));
    // The Rust runtime wrappers are skipped: the entry is the program's main.
    assert_eq!(a.steps.len(), 1);
    let main = &a.steps[0];
    assert_eq!(main.function, "sleepy::main");
    assert_eq!(main.location.as_deref(), Some("src/main.rs:3"));
    assert!(close(main.wait_breakdown_ms["cpu"], 50.0));
    assert!(close(main.wait_breakdown_ms["sleep"], 50.0));
    let compute = step(&a.steps, "1.1");
    let sleep = step(&a.steps, "1.2");
    assert_eq!(compute.function, "sleepy::compute");
    assert_eq!(compute.classification, Classification::Cpu);
    assert!(close(compute.time_share_pct, 50.0));
    // do_sleep → std::thread::sleep → clock_nanosleep is one chain: folded into one step.
    assert_eq!(sleep.function, "sleepy::do_sleep");
    assert!(sleep.children.is_empty());
    assert!(close(sleep.self_time_ms, 50.0));
    assert!(close(sleep.cpu_time_ms, 0.0));
    assert_eq!(sleep.step_type, StepType::Sleep);
    assert_eq!(sleep.classification, Classification::Idle);
    // Kernel frames never become steps.
    for s in all_steps(&a.steps) {
        assert!(!s.function.contains("do_nanosleep") && s.function != "schedule");
    }
    // 50/50 tie between CPU and Idle: the earlier class in the schema wins.
    assert_eq!(a.classification, Classification::Cpu);
    let off: Vec<(&str, bool)> = a
        .hotspots
        .iter()
        .map(|h| (h.function.as_str(), h.on_cpu))
        .collect();
    assert!(off.contains(&("clock_nanosleep", false)), "{off:?}");
    assert!(off.contains(&("sleepy::compute", true)), "{off:?}");
    let tops: Vec<&str> = a.top_bottlenecks.iter().map(|b| b.step.as_str()).collect();
    assert_eq!(tops, vec!["1.1", "1.2"]);
    assert_eq!(a.top_bottlenecks[1].class, Classification::Idle);
    assert!(
        a.top_bottlenecks[1]
            .why_chain
            .iter()
            .any(|w| w.contains("switched out 5 times"))
    );
}

#[test]
fn two_processes_get_process_steps_and_child_wait_takes_the_child_class() {
    let a = analyse(&shell_and_child());
    assert!(close(a.total_wall_ms, 80.0));
    let top: Vec<(&str, StepType, f64, f64)> = a
        .steps
        .iter()
        .map(|s| {
            (
                s.function.as_str(),
                s.step_type,
                s.time_share_pct,
                s.thread_time_ms,
            )
        })
        .collect();
    // The shell's 80 ms wait is the worker's 80 ms: the session is 80 ms, all of it
    // the worker's; the shell holds none of it (its thread time stays in the map).
    assert_eq!(
        top,
        vec![("worker (101)", StepType::Process, 100.0, 80.0)],
        "{:#?}",
        a.steps
    );
    assert!(close(a.thread_time_ms, 160.0));
    assert_eq!(a.critical_path.model, "thread_time");
    let write = step(&a.steps, "1.1.1");
    assert_eq!(write.function, "write_all");
    assert_eq!(write.step_type, StepType::FileIo);
    assert_eq!(write.classification, Classification::IoFile);
    assert!(close(write.time_share_pct, 75.0));
    let crunch = step(&a.steps, "1.1.2");
    assert_eq!(crunch.classification, Classification::Cpu);
    assert_eq!(a.classification, Classification::IoFile);
    assert!(close(a.wait_breakdown_ms["file"], 60.0));
    assert!(close(a.wait_breakdown_ms["child"], 0.0));
}

#[test]
fn futex_wait_is_lock_and_preemption_is_runqueue() {
    let a = analyse(&futex_wait());
    assert!(close(a.total_wall_ms, 105.0));
    let top: Vec<(&str, StepType)> = a
        .steps
        .iter()
        .map(|s| (s.function.as_str(), s.step_type))
        .collect();
    assert_eq!(
        top,
        vec![
            ("locky (300)", StepType::Thread),
            ("worker (301)", StepType::Thread)
        ]
    );
    let main = step(&a.steps, "1.1");
    assert_eq!(main.function, "main");
    assert_eq!(main.step_type, StepType::LockWait);
    assert_eq!(main.classification, Classification::Lock);
    let worker = step(&a.steps, "2.1");
    assert_eq!(worker.function, "worker_loop");
    assert!(close(worker.wait_breakdown_ms["runqueue"], 5.0));
    assert_eq!(worker.classification, Classification::Cpu);
    assert_eq!(a.classification, Classification::Lock);
    assert_eq!(a.top_bottlenecks[0].class, Classification::Lock);
    assert!(close(a.top_bottlenecks[0].share, 66.67));
}

#[test]
fn deep_trees_are_truncated_small_branches_pooled_and_chains_folded() {
    let m = "main;run;loop";
    let p = Builder::new()
        .process(5, None, "deep")
        .add(5, 5, &format!("{m};x1"), on(), 400, MS)
        .add(5, 5, &format!("{m};d1;x2"), on(), 200, MS)
        .add(5, 5, &format!("{m};d1;d2;x3"), on(), 100, MS)
        .add(5, 5, &format!("{m};d1;d2;d3;x4"), on(), 100, MS)
        .add(5, 5, &format!("{m};d1;d2;d3;d4;x5"), on(), 80, MS)
        .add(5, 5, &format!("{m};d1;d2;d3;d4;d5"), on(), 100, MS)
        .add(5, 5, &format!("{m};t1"), on(), 6, MS)
        .add(5, 5, &format!("{m};t2"), on(), 6, MS)
        .add(5, 5, &format!("{m};t3"), on(), 6, MS)
        .add(5, 5, &format!("{m};t4"), on(), 2, MS)
        .build();
    let a = analyse(&p);
    assert_eq!(a.steps.len(), 1);
    // main → run → loop carry 100 %: one step.
    assert_eq!(a.steps[0].function, "main");
    let kids: Vec<(&str, &str)> = a.steps[0]
        .children
        .iter()
        .map(|s| (s.id.as_str(), s.function.as_str()))
        .collect();
    assert_eq!(kids, vec![("1.1", "d1"), ("1.2", "x1"), ("1.3", "other")]);
    assert!(close(step(&a.steps, "1.3").wall_time_ms, 20.0));
    let d4 = step(&a.steps, "1.1.1.1.1");
    assert_eq!(d4.function, "d4");
    assert!(d4.truncated);
    assert!(d4.children.is_empty());
    assert!(!step(&a.steps, "1.1.1.1").truncated);
    // The full call tree keeps everything.
    assert!(a.call_tree.nodes.iter().any(|n| &*n.name == "d5"));
}

#[test]
fn folded_output_is_exact() {
    let text = folded(&three_way(), false);
    let want = "prog (1000);prog (1000);_start;__libc_start_main;__libc_start_call_main;main;a 50000\n\
prog (1000);prog (1000);_start;__libc_start_main;__libc_start_call_main;main;b 30000\n\
prog (1000);prog (1000);_start;__libc_start_main;__libc_start_call_main;main;c 20000\n";
    assert_eq!(text, want);
    let sleep = folded(&compute_and_sleep(), false);
    assert!(sleep.contains("k:do_nanosleep".trim_start_matches("k:")));
    assert!(
        sleep
            .lines()
            .any(|l| l.ends_with("do_nanosleep_[k];schedule_[k];[off-cpu: sleep] 50000")),
        "{sleep}"
    );
    let cpu_only = folded(&compute_and_sleep(), true);
    assert!(!cpu_only.contains("off-cpu"));
    assert_eq!(cpu_only.lines().count(), 1);
    assert!(cpu_only.ends_with("sleepy::compute 50000\n"));
}

/// Lines that come out the same are one line, their weights summed: a pool of
/// same-named threads, and two call sites (frames) of one function. The weights summed
/// before samples are dropped still make the lines of the whole profile.
#[test]
fn folded_lines_that_read_the_same_are_summed() {
    let s = |f: &str| format!("{C_START};main@prog.c:40;{f}");
    let mut p = Builder::new()
        .process(1000, Some(1), "pool")
        .thread(1000, 1001, "worker")
        .thread(1000, 1002, "worker")
        .add(1000, 1001, &s("work@prog.c:10"), on(), 3, MS)
        .add(1000, 1002, &s("work@prog.c:11"), on(), 4, MS)
        .add(1000, 1002, &s("zzz@prog.c:30"), on(), 2, MS)
        .add(1000, 1000, &s("a@prog.c:20"), on(), 1, MS)
        .build();
    let text = folded(&p, false);
    let want = "pool (1000);pool (1000);_start;__libc_start_main;__libc_start_call_main;main;a 1000\n\
pool (1000);worker (2 threads);_start;__libc_start_main;__libc_start_call_main;main;work 7000\n\
pool (1000);worker (2 threads);_start;__libc_start_main;__libc_start_call_main;main;zzz 2000\n";
    assert_eq!(text, want);
    let weights = StackWeights::of(&p);
    p.samples.truncate(0);
    assert_eq!(weights.text(&p, false), want);
    assert_eq!(weights.text(&p, true), want);
}

#[test]
fn flamegraphs_are_drawn_with_function_names() {
    let p = compute_and_sleep();
    let wall = String::from_utf8(svg(&p, FlameKind::Wall, "wall").unwrap()).unwrap();
    let cpu = String::from_utf8(svg(&p, FlameKind::Cpu, "cpu").unwrap()).unwrap();
    for s in [&wall, &cpu] {
        assert!(s.starts_with("<?xml"));
        assert!(s.contains("sleepy::compute"));
        assert!(s.trim_end().ends_with("</svg>"));
    }
    assert!(wall.contains("sleepy::do_sleep"));
    assert!(wall.contains("[off-cpu: sleep]"));
    // The sleep leaf gets its fixed colour.
    assert!(wall.contains("rgb(150,190,240)"), "off-CPU colour missing");
    assert!(!cpu.contains("sleepy::do_sleep"));
    let empty =
        String::from_utf8(svg(&SampledProfile::default(), FlameKind::Wall, "t").unwrap()).unwrap();
    assert!(empty.contains("no samples"));
}

#[test]
fn empty_profile_analyses_to_nothing_with_a_warning() {
    let a = analyse(&SampledProfile::default());
    assert!(a.steps.is_empty() && a.hotspots.is_empty() && a.top_bottlenecks.is_empty());
    assert_eq!(a.classification, Classification::Unknown);
    assert!(!a.warnings.is_empty());
    assert_eq!(folded(&SampledProfile::default(), false), "");
}

#[test]
fn steps_serialize_to_schema_field_names() {
    let a = analyse(&compute_and_sleep());
    let v = serde_json::to_value(&a.steps).unwrap();
    let s = &v[0]["children"][1];
    assert_eq!(s["type"], "sleep");
    assert_eq!(s["classification"], "Idle");
    assert!(s.get("truncated").is_none());
    let b = serde_json::to_value(&a.top_bottlenecks[0]).unwrap();
    assert_eq!(b["type"], "CPU");
    assert!(b["why_chain"].is_array());
}

// --- fixture recordings and snapshots -------------------------------------------------

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings")
}

fn fixtures() -> Vec<(&'static str, SampledProfile)> {
    vec![
        ("c_three_way", three_way()),
        ("rust_compute_sleep", compute_and_sleep()),
        ("shell_child_fsync", shell_and_child()),
        ("futex_threads", futex_wait()),
    ]
}

fn recording(name: &str, sampled: SampledProfile) -> Recording {
    let mut r = Recording::new(SessionMeta {
        run_id: format!("fixture-{name}"),
        command: vec![name.to_string()],
        started_unix_s: 1_700_000_000.0,
        tool_version: "0.1.0".to_string(),
        hostname: Some("fixture-host".to_string()),
        kernel: Some("6.8.0".to_string()),
        cpus: Some(2),
    });
    // The profiled run's own figures, so the map has a (one-run) baseline.
    let cpu_ms = sampled
        .samples
        .iter()
        .filter(|s| s.kind == SampleKind::OnCpu)
        .map(|s| s.weight_ns as f64 / 1e6)
        .sum::<f64>();
    r.profiled_run = Some(RunMeasurement {
        index: 1,
        warmup: false,
        pid: sampled.processes.first().map_or(1, |p| p.pid),
        wall_ms: sampled.wall_ms,
        user_ms: cpu_ms,
        sys_ms: 0.0,
        max_rss_kb: 2048,
        tree_rss_peak_kb: Some(2048),
        memory_delta_kb: None,
        read_bytes: 0,
        write_bytes: 0,
        rchar: 0,
        wchar: 0,
        read_calls: None,
        write_calls: None,
        voluntary_cs: 0,
        involuntary_cs: 0,
        minor_faults: 100,
        major_faults: 0,
        processes: sampled.processes.len() as u64,
        processes_basis: "counted".to_string(),
        threads_peak: sampled.threads.len().max(1) as u64,
        exit: ExitStatus::Code { code: 0 },
        timeline: Vec::new(),
        disks: Vec::new(),
    });
    r.sampled = Some(sampled);
    r
}

#[test]
#[ignore = "writes the fixture recordings; run by hand after changing the builders"]
fn regenerate_fixture_recordings() {
    std::fs::create_dir_all(fixture_dir()).unwrap();
    for (name, p) in fixtures() {
        let json = serde_json::to_string_pretty(&recording(name, p)).unwrap();
        std::fs::write(fixture_dir().join(format!("{name}.json")), json + "\n").unwrap();
    }
}

fn load(name: &str) -> SampledProfile {
    let rec = read_recording(&fixture_dir().join(format!("{name}.json"))).unwrap();
    rec.sampled.unwrap()
}

fn snapshot_view(a: &Analysis) -> serde_json::Value {
    serde_json::json!({
        "total_wall_ms": a.total_wall_ms,
        "total_cpu_ms": a.total_cpu_ms,
        "classification": a.classification,
        "bottleneck_detail": a.bottleneck_detail,
        "top_bottlenecks": a.top_bottlenecks,
        "wait_breakdown_ms": a.wait_breakdown_ms,
        "steps": a.steps,
        "hotspots": a.hotspots,
        "warnings": a.warnings,
    })
}

#[test]
fn fixture_recordings_match_their_builders() {
    for (name, p) in fixtures() {
        assert_eq!(load(name), p, "{name}.json is stale: regenerate it");
        let size = std::fs::metadata(fixture_dir().join(format!("{name}.json")))
            .unwrap()
            .len();
        assert!(size < 50 * 1024, "{name}.json is {size} bytes");
    }
}

#[test]
fn fixture_snapshots() {
    for (name, _) in fixtures() {
        let p = load(name);
        insta::assert_json_snapshot!(format!("{name}__analysis"), snapshot_view(&analyse(&p)));
        insta::assert_snapshot!(format!("{name}__folded"), folded(&p, false));
    }
}

#[test]
fn profmaps_own_fork_hook_is_left_out_of_the_target() {
    // 60 ms computing, 40 ms blocked in fork on perf's inheritance mutex.
    let p = Builder::new()
        .process(1, None, "forky")
        .add(1, 1, &format!("{C_START};main;compute@f.c:3"), on(), 60, MS)
        .add(
            1,
            1,
            &format!(
                "{C_START};main;spawn@f.c:9;fork;k:entry_SYSCALL_64;k:kernel_clone;\
                 k:copy_process;k:perf_event_init_task;k:mutex_lock;k:__mutex_lock;k:schedule"
            ),
            off(WaitState::Uninterruptible),
            4,
            10 * MS,
        )
        .build();
    let a = analyse(&p);
    assert_eq!(a.classification, Classification::Cpu);
    assert!(close(a.total_wall_ms, 60.0), "{}", a.total_wall_ms);
    assert!(
        a.top_bottlenecks
            .iter()
            .all(|b| b.class != Classification::Lock)
    );
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("40 ms") && w.contains("perf_event_init_task")),
        "{:?}",
        a.warnings
    );

    // And through `report`: the map the user reads says so too (the outputs analyse the
    // profile without profmap's activity, and must not lose how much was left out).
    let d = tempfile::tempdir().unwrap();
    let pmr = d.path().join("profile.pmr");
    profmap::profile::write_recording(&recording("forky", p), &pmr).unwrap();
    let out = d.path().join("out");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_profmap"))
        .args(["report", "-q"])
        .arg(&pmr)
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("performance_map.json")).unwrap()).unwrap();
    let said = map.to_string();
    assert!(
        said.contains("perf_event_init_task") && said.contains("40 ms"),
        "{said}"
    );
}
