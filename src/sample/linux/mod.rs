//! Linux sampling through `perf_event_open`: the sampler, the process counter, and the
//! capability probe behind `profmap doctor`.
//!
//! - `sys`: attributes, opening events, ring buffers.
//! - `tracefs`: tracepoint ids and formats (mounting tracefs when root and missing).
//! - `sampler`: `PerfSampler` (events per CPU, drain thread, time sort).
//! - `process`: the record state machine — maps, unwinding; forwards to `offcpu`.
//! - `offcpu`: off-CPU intervals from switch, exit and wake-up events, with their waker.
//! - `unwind`: DWARF CFI unwinding with framehop.
//! - `blocked`: where blocked threads wait, from /proc (user-space-only sampling).
//! - `sidecar`: the evidence thread, draining the socket and page-cache tracepoints
//!   (`sidetp`) every millisecond; `evidence` handles their records: `sockio` (round
//!   trips per socket), `fileio` (pages read per file), `peek` (first payload bytes,
//!   file paths), `netpeer` (peer → local service) and `unixdiag` (Unix socket peers
//!   through sock_diag).
//! - `python`: the Python sampler thread (CPython stacks of the tree, py-spy's reader);
//!   `pyfind`: which processes of the tree are interpreters.
//! - `spool`: appends what was recorded to the crash spool about once a second.
//! - `watcher`: `TaskWatcher`, counting processes without samples.
//! - `doctor`: `probe_capabilities`.

mod blocked;
mod copies;
mod doctor;
mod evidence;
mod fdres;
mod fileio;
mod netpeer;
mod offcpu;
mod peek;
mod process;
mod pyfind;
mod python;
mod sampler;
mod sidecar;
mod sidetp;
mod sockio;
mod spool;
mod stackreuse;
mod sys;
mod syscalls;
mod tracefs;
mod unixdiag;
mod unwind;
mod watcher;

pub use doctor::{Capabilities, Check, probe_capabilities};
pub use sampler::PerfSampler;
pub use sys::monotonic_ns;
pub use watcher::TaskWatcher;
