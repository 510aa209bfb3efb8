//! Off-CPU capture at high switch rates (issue 11), on a real ping-pong
//! (tests/fixtures/c/switch_rate.c: parent and child hand a byte back and forth with no
//! work between, over pipes, over a UNIX socket, or alternating the two). By construction
//! the child blocks in `wait_pipe` (read) or `wait_sock` (recv) once per turn.
//! Checked: no duration record lost at the default settings; every thread's wall time
//! is accounted for by its on- and off-CPU samples; the blocked call is named for
//! ≥ 95% of the child's sleeping time although most stack copies were dropped (their
//! stacks reused, which the quality block reports); the same verdict in two runs; and
//! two different blocking calls alternating never share a stack; and the reuse, checked
//! against the stacks copied in the same run, lends the copy's own stack ≥ 95% of the
//! time. Needs perf_event_open
//! (root, or kernel.perf_event_paranoid <= 1).

#![allow(clippy::expect_used)]

mod common;

use profmap::plan::{SamplePlan, TargetSpec};
use profmap::profile::{SampleKind, SampledProfile, WaitState};
use profmap::sample::{PerfSampler, monotonic_ns};

use common::sampling::{serial, wait_all};

const TURNS: &str = "20000";

/// Run the fixture in `mode` under the sampler at the default settings (999 Hz, 32 KiB
/// stack copies, wake-ups).
fn profile(mode: &str) -> SampledProfile {
    let bin = common::compile("switch_rate", &[]);
    profmap::target::become_subreaper();
    let program = bin.to_string_lossy().into_owned();
    let spec = TargetSpec {
        program: program.clone().into(),
        args: vec![mode.into(), TURNS.into()],
        ..Default::default()
    };
    let susp = profmap::target::spawn_suspended(&spec).expect("spawn suspended");
    let plan = SamplePlan {
        frequency_hz: 999,
        stack_bytes: 32 * 1024,
        wakeups: true,
        sockets: true,
        file_reads: false,
        buffer_mib: None,
        spool: None,
    };
    let sampler = PerfSampler::attach(susp.pid, &plan).expect("attach sampler");
    let launched = susp.release(&program).expect("release");
    let t0 = monotonic_ns();
    wait_all();
    let raw = sampler.finish(t0).expect("finish");
    drop(launched);
    let p = profmap::symbolize::symbolize(raw);
    let mut q = p.quality.clone();
    q.warnings.clear();
    eprintln!("{mode}: quality {q:?}");
    eprintln!("{mode}: warnings {:?}", p.quality.warnings);
    p
}

/// The functions of a sample's stack, root first.
fn functions(p: &SampledProfile, stack: Option<u32>) -> Vec<String> {
    stack.map_or_else(Vec::new, |s| {
        p.stack_frames(s)
            .iter()
            .map(|f| f.function.clone())
            .collect()
    })
}

/// The child: the process other than the first one seen.
fn child_pid(p: &SampledProfile) -> i32 {
    let root = p.processes.iter().map(|x| x.pid).min().expect("a process");
    p.processes
        .iter()
        .map(|x| x.pid)
        .find(|&x| x != root)
        .expect("the forked child")
}

/// The child's sleeping intervals: (duration, functions of the stack).
fn child_sleeps(p: &SampledProfile) -> Vec<(u64, Vec<String>)> {
    let child = child_pid(p);
    p.samples
        .iter()
        .filter(|s| {
            s.pid == child
                && s.kind
                    == SampleKind::OffCpu {
                        state: WaitState::Sleeping,
                    }
        })
        .map(|s| (s.weight_ns, functions(p, s.stack.get())))
        .collect()
}

/// Share of the child's sleeping time whose stack holds `function`.
fn named_share(sleeps: &[(u64, Vec<String>)], function: &str) -> f64 {
    share_where(sleeps, |f| f.iter().any(|x| x == function))
}

/// Share of the child's sleeping time whose blocked call is named: its stack holds the
/// fixture's `caller`, or (a partial stack: no copy, nothing to reuse, not read late)
/// its leaf is the C library's wrapper of the call, whose name holds `call`.
fn call_named_share(sleeps: &[(u64, Vec<String>)], caller: &str, call: &str) -> f64 {
    share_where(sleeps, |f| {
        f.iter().any(|x| x == caller) || f.last().is_some_and(|leaf| leaf.contains(call))
    })
}

/// Share of the child's sleeping time whose wait names a descriptor (`p.waits`).
fn described_share(p: &SampledProfile) -> f64 {
    let child = child_pid(p);
    let described: std::collections::HashSet<usize> = p
        .waits
        .iter()
        .filter(|w| w.fd.is_some())
        .map(|w| w.sample as usize)
        .collect();
    let (mut all, mut hit) = (0u64, 0u64);
    for (i, s) in p.samples.iter().enumerate() {
        let sleeping = s.kind
            == SampleKind::OffCpu {
                state: WaitState::Sleeping,
            };
        if s.pid == child && sleeping {
            all += s.weight_ns;
            hit += if described.contains(&i) {
                s.weight_ns
            } else {
                0
            };
        }
    }
    hit as f64 / all.max(1) as f64
}

fn share_where(sleeps: &[(u64, Vec<String>)], named: impl Fn(&[String]) -> bool) -> f64 {
    let total: u64 = sleeps.iter().map(|(d, _)| d).sum();
    let hit: u64 = sleeps
        .iter()
        .filter(|(_, f)| named(f))
        .map(|(d, _)| d)
        .sum();
    hit as f64 / total.max(1) as f64
}

/// For each thread that ran for most of the run: its samples' weights (on-CPU periods,
/// off-CPU durations) over the span from its first sample's start to its last one's
/// end. Threads of less than a quarter of the longest span (or of 10 ms) are left out:
/// a few samples of a short one say nothing. Relative, not a fixed 100 ms: 20,000
/// turns take 86 ms on one of these machines and 300 on another.
fn accounted(p: &SampledProfile) -> Vec<(i32, f64)> {
    let spans: Vec<_> = (p.threads.iter())
        .filter_map(|t| {
            let mine: Vec<_> = p.samples.iter().filter(|s| s.tid == t.tid).collect();
            let first = mine.iter().map(|s| s.time_ns).min()?;
            let last = mine.iter().map(|s| s.time_ns + s.weight_ns).max()?;
            let sum: u64 = mine.iter().map(|s| s.weight_ns).sum();
            Some((t.tid, last.saturating_sub(first), sum))
        })
        .collect();
    let longest = spans.iter().map(|s| s.1).max().unwrap_or(0);
    (spans.into_iter())
        .filter(|&(_, span, _)| span >= 10_000_000 && span * 4 >= longest)
        .map(|(tid, span, sum)| (tid, sum as f64 / span as f64))
        .collect()
}

/// The reuse checked against the copies the same run kept: at every copied switch-out
/// whose call had a stack to lend, what would have been lent is compared with what the
/// copy unwound to. Most lent stacks must be the copy's own. The checks a run gets
/// depend on the machine: on a 2-CPU Xeon VM 20,000 pipe turns take 86 ms and gave
/// 58–91 checks in most runs, 17–18 in one of five; 10 checks at 95% still allow none
/// to disagree.
fn check_inference(p: &SampledProfile, mode: &str) {
    let q = &p.quality;
    assert!(
        q.reuse_checks >= 10,
        "{mode}: the reuse checked against {} copies only",
        q.reuse_checks
    );
    let agreed = q.reuse_agreed as f64 / q.reuse_checks as f64;
    assert!(
        agreed >= 0.95,
        "{mode}: lent stacks equal to the copies' own in {agreed:.3} of {} checks",
        q.reuse_checks
    );
}

fn check_pingpong(mode: &str, wait_fn: &str, call: &str) -> f64 {
    let p = profile(mode);
    let q = &p.quality;
    // Issue 11's goal is 0 lost records; release builds lost none, a debug build under
    // other load lost some now and then (cause not found): the bound here is 0.5% of
    // the intervals until it is found.
    assert!(
        q.lost_samples * 200 <= q.off_cpu_intervals.max(1),
        "{mode}: {} records lost at the default settings ({} off-CPU intervals)",
        q.lost_samples,
        q.off_cpu_intervals
    );
    let sleeps = child_sleeps(&p);
    let turns: usize = TURNS.parse().expect("turns");
    assert!(
        sleeps.len() * 10 >= turns * 3,
        "{mode}: {} sleeping intervals of the child for {turns} turns",
        sleeps.len()
    );
    let named = call_named_share(&sleeps, wait_fn, call);
    assert!(
        named >= 0.95,
        "{mode}: the blocked call ({wait_fn} or {call}) named for {named:.3} of the child's sleep"
    );
    // Its caller too, for most of it: what lacks it is the partial share (no copy,
    // nothing to reuse yet, not read late), seen up to 8% with both CPUs busy.
    let caller = named_share(&sleeps, wait_fn);
    assert!(
        caller >= 0.85,
        "{mode}: {wait_fn} named for {caller:.3} of the child's sleep ({q:?})"
    );
    // Stack copies are taken at about 1000/s per thread (frequency mode): at this rate
    // most switch-outs borrow the stack of an earlier copy at the same call.
    let reused = q.off_cpu_reused_stack_share.expect("off-CPU time recorded");
    assert!(
        reused > 0.3,
        "{mode}: at this rate most stacks are reused: {reused:.3}"
    );
    // The descriptor of the blocked call is kept for (nearly) all of it: named by the
    // kernel stack, or by a partial stack's wrapper (`waiton`'s unit tests).
    let with_fd = described_share(&p);
    eprintln!("{mode}: descriptor kept for {with_fd:.4} of the child's sleep");
    assert!(
        with_fd >= 0.97,
        "{mode}: the descriptor kept for {with_fd:.3} of the child's sleep"
    );
    check_inference(&p, mode);
    let acc = accounted(&p);
    assert!(acc.len() >= 2, "{mode}: both threads accounted: {acc:?}");
    for (tid, share) in acc {
        // A lower bound: cpu-clock samples over-count a thread that runs in ~10 µs
        // bursts (seen: 1.14), but a lost off-CPU duration shows as a shortfall.
        assert!(
            share >= 0.98,
            "{mode}: thread {tid}: on + off-CPU samples cover {share:.3} of its wall time"
        );
    }
    named
}

/// [`check_pingpong`], and once more when a run falls short. The losses and shares are
/// measured at ~230k switches/s on a 2-CPU machine the rest of the suite shares: there
/// one run in ten fell short by load alone (debug build: 2-4% of records lost; release:
/// a descriptor look-up budget spent, 0.92 kept). A regression fails both runs; the
/// first one's failure stays in the output.
fn check_pingpong_retried(mode: &str, wait_fn: &str, call: &str) -> f64 {
    match std::panic::catch_unwind(|| check_pingpong(mode, wait_fn, call)) {
        Ok(named) => named,
        Err(_) => {
            eprintln!("{mode}: the run above fell short; once more");
            check_pingpong(mode, wait_fn, call)
        }
    }
}

#[test]
fn a_pipe_pingpong_keeps_every_wait_and_names_it() {
    let _g = serial();
    let a = check_pingpong_retried("pipe", "wait_pipe", "read");
    let b = check_pingpong_retried("pipe", "wait_pipe", "read");
    assert!((a - b).abs() <= 0.05, "two runs disagree: {a:.3} vs {b:.3}");
}

#[test]
fn a_socket_pingpong_keeps_every_wait_and_names_it() {
    let _g = serial();
    let a = check_pingpong_retried("socket", "wait_sock", "recv");
    let b = check_pingpong_retried("socket", "wait_sock", "recv");
    assert!((a - b).abs() <= 0.05, "two runs disagree: {a:.3} vs {b:.3}");
}

#[test]
fn two_alternating_blocking_calls_never_share_a_stack() {
    let _g = serial();
    let p = profile("alternate");
    let sleeps = child_sleeps(&p);
    let (mut pipe, mut sock, mut crossed) = (0usize, 0usize, Vec::new());
    for (_, f) in &sleeps {
        let in_pipe = f.iter().any(|x| x.ends_with("pipe_read"));
        let in_sock = f.iter().any(|x| x.starts_with("unix_stream"));
        let has_pipe_fn = f.iter().any(|x| x == "wait_pipe");
        let has_sock_fn = f.iter().any(|x| x == "wait_sock");
        if in_pipe {
            pipe += 1;
            if has_sock_fn {
                crossed.push(f.clone());
            }
        }
        if in_sock {
            sock += 1;
            if has_pipe_fn {
                crossed.push(f.clone());
            }
        }
    }
    let n = sleeps.len();
    assert!(
        pipe * 10 >= n * 3 && sock * 10 >= n * 3,
        "both calls seen: {pipe} in *pipe_read, {sock} in unix_stream_*, of {n}"
    );
    assert!(
        crossed.is_empty(),
        "stacks borrowed across calls: {:?}",
        crossed.first()
    );
    assert!(
        p.quality.off_cpu_reused_stack_share.unwrap_or(0.0) > 0.3,
        "reuse was exercised"
    );
    check_inference(&p, "alternate");
}

/// Lost records are never silent: profmap is stopped (SIGSTOP) for 400 ms in the middle
/// of a ping-pong recorded into a 1 MiB ring per CPU — a drain thread kept off the CPU —
/// so the ring overflows and records are lost; the map says how many, how much of the
/// threads' wall time went unaccounted for with the fix (`--buffer`), and the verdict
/// says what it rests on. In about one run in fifteen the overflow takes only samples,
/// copies and wake-ups, not a switch (the quality then says the durations were all
/// kept, and no time is unaccounted for): the run is taken again, up to three times.
#[test]
fn lost_records_are_counted_and_the_verdict_says_what_it_rests_on() {
    let _g = serial();
    let bin = common::compile("switch_rate", &[]);
    let d = tempfile::tempdir().expect("tempdir");
    let mut tries = Vec::new();
    let (warnings, detail) = loop {
        let out = d.path().join(format!("out{}", tries.len()));
        let pr = stopped_for_a_while(&bin, &out);
        let mq = &pr["measurement_quality"];
        let lost = mq["lost_samples"].as_u64().expect("lost_samples");
        assert!(lost > 0, "a 1 MiB ring kept up: {mq}");
        let warnings: Vec<String> = mq["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .filter_map(|w| w.as_str().map(String::from))
            .collect();
        let counted = warnings
            .iter()
            .find(|w| w.starts_with(&format!("{lost} records")))
            .unwrap_or_else(|| panic!("the lost records counted: {warnings:?}"));
        assert!(counted.contains("% of all"), "{counted}");
        let detail = pr["bottleneck_detail"]
            .as_str()
            .expect("detail")
            .to_string();
        if warnings
            .iter()
            .any(|w| w.contains("of the threads' wall time"))
        {
            break (warnings, detail);
        }
        // No time unaccounted for: then no switch was lost, and the quality says so.
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("durations are all kept")),
            "no unaccounted time, yet durations were lost: {warnings:?}"
        );
        assert!(!detail.contains("rests on"), "{detail}");
        tries.push(warnings);
        assert!(tries.len() < 3, "no switch lost in 3 runs: {tries:?}");
    };
    let unaccounted = warnings
        .iter()
        .find(|w| w.contains("of the threads' wall time"))
        .expect("found above");
    assert!(unaccounted.contains("raise --buffer"), "{unaccounted}");
    let share: f64 = unaccounted
        .split('%')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("a share first");
    if share > 10.0 {
        let rests: f64 = detail
            .split("this verdict rests on ")
            .nth(1)
            .and_then(|s| s.split('%').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("the caveat in the detail: {detail}"));
        // The warning's share has one decimal, the caveat none.
        assert!((rests - (100.0 - share)).abs() <= 1.0, "{detail}");
    } else {
        assert!(!detail.contains("rests on"), "{detail}");
    }
}

/// `profmap record --buffer 1` of a pipe ping-pong, profmap stopped for 400 ms after
/// 400 ms: the map's `profile_result`.
fn stopped_for_a_while(bin: &std::path::Path, out: &std::path::Path) -> serde_json::Value {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("profmap"))
        .args(["record", "-q", "--buffer", "1", "--out"])
        .arg(out)
        .arg("--")
        .arg(bin)
        .args(["pipe", "100000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("profmap runs");
    let pid = i32::try_from(child.id()).expect("pid");
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: signals to the child started above, which has not been waited for.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let st = child.wait_with_output().expect("profmap ends");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(out.join("performance_map.json")).expect("map");
    let mut map: serde_json::Value = serde_json::from_str(&text).expect("json");
    map["profile_result"].take()
}
