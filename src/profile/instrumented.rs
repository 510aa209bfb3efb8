//! One change that `profmap instrument` made in the user's project, as the map and
//! report.md Part B show it (File | Change type | What | Lines). Read from the project's
//! manifest when a session starts, so a recording carries what was in place when it ran.

use serde::{Deserialize, Serialize};

/// One row of the instrumentation changelog.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InstrumentedFile {
    /// The file, relative to the project folder.
    pub file: String,
    /// `modified` (lines inserted into a user file) or `created` (a file profmap made).
    pub change_type: String,
    /// What the change is, e.g. "timing wrapper on SequenceMatcher.find_longest_match".
    pub what: String,
    /// The inserted lines in the instrumented file, e.g. "305" or "30-70"; empty for a
    /// created file.
    pub lines: String,
}
