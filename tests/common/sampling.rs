//! Running a program under the perf sampler directly (no profmap binary): the
//! harness of the tests that check what the sampler records.

use profmap::plan::{SamplePlan, TargetSpec};
use profmap::profile::SampledProfile;
use profmap::sample::{PerfSampler, monotonic_ns};

/// These tests reap with waitpid(-1): one at a time.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reap every child until none is left.
pub fn wait_all() {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Run `program args` under the sampler (99 Hz, 16 KiB stacks, wake-ups, page-cache
/// reads when `file_reads`) until its whole tree is gone; symbolize.
pub fn profile(program: &str, args: &[&str], file_reads: bool) -> SampledProfile {
    profmap::target::become_subreaper();
    let spec = TargetSpec {
        program: program.into(),
        args: args.iter().map(|s| s.into()).collect(),
        ..Default::default()
    };
    let susp = profmap::target::spawn_suspended(&spec).expect("spawn suspended");
    let plan = SamplePlan {
        frequency_hz: 99,
        stack_bytes: 16 * 1024,
        wakeups: true,
        sockets: true,
        file_reads,
        buffer_mib: None,
        spool: None,
    };
    let sampler = PerfSampler::attach(susp.pid, &plan).expect("attach sampler");
    let launched = susp.release(program).expect("release");
    let t0 = monotonic_ns();
    wait_all();
    let raw = sampler.finish(t0).expect("finish");
    drop(launched);
    let p = profmap::symbolize::symbolize(raw);
    eprintln!("warnings {:?}", p.quality.warnings);
    eprintln!("resources {:?}", p.resources);
    eprintln!("waits {:?}", p.waits);
    p
}
