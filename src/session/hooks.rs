//! What a session attaches to a run while the target is suspended before exec:
//! a kernel process counter on baseline runs, the stack sampler on the profiled run.

use crate::error::Error;
use crate::measure::RunHooks;
use crate::plan::SamplePlan;
use crate::sample::{PerfSampler, RawProfile, TaskWatcher};

/// Baseline runs: count every process the tree starts (threads excluded). If the
/// counter cannot be attached, the run goes on and the count falls back to the
/// processes observed (a lower bound, flagged in the map).
#[derive(Debug, Default)]
pub struct CountProcesses {
    watcher: Option<TaskWatcher>,
}

impl RunHooks for CountProcesses {
    fn before_release(&mut self, pid: i32) -> Result<(), Error> {
        self.watcher = TaskWatcher::attach(pid).ok();
        Ok(())
    }
    fn after_exit(&mut self) -> Option<u64> {
        self.watcher.take().and_then(TaskWatcher::finish)
    }
}

/// The profiled run: the sampler plus the process counter.
#[derive(Debug)]
pub struct Profile {
    plan: SamplePlan,
    sampler: Option<PerfSampler>,
    count: CountProcesses,
    t0_ns: u64,
}

impl Profile {
    pub fn new(plan: SamplePlan) -> Self {
        Profile {
            plan,
            sampler: None,
            count: CountProcesses::default(),
            t0_ns: 0,
        }
    }

    /// Stop the sampler and hand back what it recorded.
    pub fn finish(mut self) -> Result<RawProfile, Error> {
        match self.sampler.take() {
            Some(s) => s.finish(self.t0_ns),
            None => Err(Error::Tool("the sampler was never attached".into())),
        }
    }
}

impl RunHooks for Profile {
    fn before_release(&mut self, pid: i32) -> Result<(), Error> {
        self.sampler = Some(PerfSampler::attach(pid, &self.plan)?);
        self.count.before_release(pid)
    }
    fn after_release(&mut self, start_mono_ns: u64) {
        self.t0_ns = start_mono_ns;
        // The crash spool learns when the run started (a failed write is the drain
        // thread's to report: it writes to the same file).
        if let Some(s) = &self.plan.spool {
            let _ = s.start(start_mono_ns);
        }
    }
    fn after_exit(&mut self) -> Option<u64> {
        self.count.after_exit()
    }
}
