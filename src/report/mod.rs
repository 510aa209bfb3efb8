//! Our own views of a session: the performance map (JSON + YAML), `report.md`,
//! `summary.json` and `baseline.json`. Pure functions from the recording (and its
//! analysis) to text; `write_text` is the only file-system touch, and it writes only
//! into the output folder.

pub mod baseline;
pub mod markdown;
pub mod perfmap;
pub mod quality;
pub mod summary;

pub use perfmap::{DeepView, PerfMap, build, shell_join};

use std::path::Path;

use crate::error::Error;

/// Write `text` to `dir/name` atomically (temp file, then rename), so an interrupted
/// write never leaves a half file in place of a good one.
pub fn write_text(dir: &Path, name: &str, text: &[u8]) -> Result<(), Error> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
}

/// The performance map as YAML.
pub fn to_yaml(doc: &serde_json::Value) -> Result<String, Error> {
    serde_saphyr::to_string(doc).map_err(|e| Error::Tool(format!("YAML: {e}")))
}
