//! profmap: a Linux profiler that turns "this is slow" into a measured diagnosis.
//!
//! The flow, left to right (DESIGN.md §1):
//!
//! ```text
//! target ─► measure ─► sample ─► symbolize ─► profile ─► analyse ─► report / export
//! ```
//!
//! Layering rule: a module uses only modules to its left, plus `profile`, `plan` and
//! `error`. `analyse`, `report` and `export` never touch /proc, perf_event or the
//! terminal. Only `run` (this file) uses `cli`.

pub mod analyse;
pub mod error;
pub mod export;
pub mod measure;
pub mod plan;
pub mod profile;
pub mod report;
pub mod sample;
pub mod symbolize;
pub mod target;
