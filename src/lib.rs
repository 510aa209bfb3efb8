//! profmap: a Linux profiler that turns "this is slow" into a measured diagnosis.
//!
//! The flow, left to right (DESIGN.md §1):
//!
//! ```text
//! target ─► measure ─► sample ─► symbolize ─► profile ─► analyse ─► report / export
//! ```
//!
//! `compare` (before/after of two recordings) stands beside the line, reading what
//! `analyse` and `export` make of each side.
//!
//! Layering rule: a module uses only modules to its left, plus `profile`, `plan` and
//! `error`. `analyse`, `report`, `export` and `compare` never touch /proc, perf_event or
//! the terminal. Only `run` (this file) uses `cli`.

pub mod analyse;
pub mod cli;
pub mod compare;
pub mod error;
pub mod export;
pub mod instrument;
pub mod interned;
pub mod measure;
pub mod packed;
pub mod plan;
pub mod profile;
pub mod report;
pub mod sample;
pub mod session;
pub mod stats;
pub mod symbolize;
pub mod target;
pub mod ui;

use plan::Plan;

/// Parse `args` (argv, program name first), do the job, and return the exit code:
/// 0 ok, 1 the target failed, 2 usage or tool error, 130 interrupted (143 by SIGTERM,
/// 129 by SIGHUP).
pub fn run(args: Vec<std::ffi::OsString>) -> i32 {
    let plan = match cli::parse(args) {
        cli::Parsed::Plan(p) => p,
        cli::Parsed::Print {
            text,
            to_stderr,
            code,
        } => {
            if to_stderr {
                ui::to_stderr(&text);
            } else {
                ui::to_stdout(&text);
            }
            return code;
        }
    };
    let result = match plan.as_ref() {
        Plan::Session(s) => session::run(s),
        Plan::Sessions(c) => session::run_commands(c),
        Plan::Report(r) => session::report(r),
        Plan::Export(e) => session::export(e),
        Plan::Compare(c) => session::compare(c),
        Plan::Doctor => {
            ui::to_stdout(&ui::doctor(&sample::probe_capabilities()));
            Ok(0)
        }
        Plan::Instrument(i) => instrument::run(i),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            ui::to_stderr(&format!("profmap: {e}\n"));
            e.exit_code()
        }
    };
    // Interrupted: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
    if code == 130 {
        measure::signals::exit_code()
    } else {
        code
    }
}
