//! Baseline runs: wait4/rusage, /proc polling, statistics.
