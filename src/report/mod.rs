//! Our own views of a session: the performance map (JSON + YAML), `report.md`,
//! `report.html`, `summary.json` and `baseline.json`. Pure functions from the recording
//! (and its analysis) to text; the session writes the files (`session::outfile`).

pub mod baseline;
pub mod commands;
mod diagnosis;
pub mod dirs;
mod escalation;
pub mod html;
pub mod map;
pub mod markdown;
pub mod names;
pub mod perfmap;
pub mod quality;
pub mod rows;
pub mod summary;

pub use map::PerformanceMap;
pub use perfmap::{DeepView, PerfMap, build, shell_join};

use crate::error::Error;

/// The performance map as YAML.
pub fn to_yaml(doc: &map::PerformanceMap) -> Result<String, Error> {
    serde_saphyr::to_string(doc).map_err(|e| Error::Tool(format!("YAML: {e}")))
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod views_tests;
