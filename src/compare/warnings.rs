//! The comparison's warnings: a typed enum, each with its sentence and what to do.

use serde::Serialize;

/// Something that makes the comparison less certain (typed, with its fix in the text).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    /// The two sides ran different programs.
    DifferentCommands { before: String, after: String },
    /// Same program, other arguments.
    DifferentArguments { before: String, after: String },
    /// A side has no deep profile: baseline only.
    BaselineOnly { side: String, why: String },
    /// A side has fewer than 2 counted runs: no test possible.
    TooFewRuns { side: String, runs: usize },
}

impl Warning {
    pub fn message(&self) -> String {
        match self {
            Warning::DifferentCommands { before, after } => format!(
                "different commands: BEFORE ran `{before}`, AFTER ran `{after}` — compared \
                 anyway; make sure that is what you meant"
            ),
            Warning::DifferentArguments { before, after } => {
                format!("same program, different arguments: `{before}` vs `{after}`")
            }
            Warning::BaselineOnly { side, why } => format!(
                "{side} has no deep profile ({why}): baseline-only comparison, no functions \
                 or flamegraph — use `profmap run` on both sides for them"
            ),
            Warning::TooFewRuns { side, runs } => format!(
                "{side} has {runs} counted run(s): no significance test — use --runs 3 or more"
            ),
        }
    }
}

/// A warning as written in compare.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WarningOut {
    #[serde(flatten)]
    pub warning: Warning,
    pub message: String,
}
