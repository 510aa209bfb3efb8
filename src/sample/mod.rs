//! Samplers: on-CPU and off-CPU stacks of every thread and child of the target, taken
//! with perf_event_open; also the kernel-side process counter used by the baseline.
//! (Being built: see the sampler work item.)
