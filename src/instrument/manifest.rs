//! The manifest: every change `profmap instrument` made in the project, kept in
//! `.profmap/instrument/manifest.json` with the original bytes of each file beside it
//! (`.profmap/instrument/originals/<sha256>`), so `clean` can restore each file byte
//! for byte and check it by hash.
//!
//! Invariants: one entry per instrumented file; the file on disk is exactly
//! `instrumented_sha256` while the entry exists (anything else is a later edit); the
//! instrumented bytes are a pure function of the original and `functions`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files;
use crate::error::Error;
use crate::profile::InstrumentedFile;

/// The folder, relative to the project folder.
pub const DIR: &str = ".profmap/instrument";
/// The manifest's name in [`DIR`].
pub const NAME: &str = "manifest.json";
/// Identifies the format.
pub const FORMAT: &str = "profmap-instrument-manifest";

/// The whole manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub files: Vec<FileEntry>,
    /// Instrumentation put in place and taken out again because the user's check
    /// failed with it (kept until `clean`, so the next map and report say so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<Reverted>,
}

/// One `add` undone because its check failed instrumented.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reverted {
    /// The files restored (relative to the project folder).
    pub files: Vec<String>,
    /// The functions that were to be wrapped.
    pub functions: Vec<String>,
    /// The check, as shown to the user.
    pub check: String,
    /// How it failed (e.g. "exit code 1").
    pub why: String,
}

/// One instrumented file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileEntry {
    /// Relative to the project folder.
    pub file: String,
    pub language: String,
    /// SHA-256 of the file before profmap touched it.
    pub original_sha256: String,
    /// SHA-256 of the file as profmap left it.
    pub instrumented_sha256: String,
    /// The original bytes, relative to the project folder.
    pub original_copy: String,
    /// The instrumented functions (qualnames), in the order they were added.
    pub functions: Vec<String>,
    /// Every block of inserted lines, in file order.
    pub insertions: Vec<Insertion>,
}

/// One block of inserted lines.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Insertion {
    /// `helper` (the timing helper) or `wrapper` (a decorator line).
    pub kind: String,
    /// The wrapped function (wrappers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// 1-based first line in the instrumented file.
    pub line: usize,
    /// Lines inserted.
    pub count: usize,
}

impl Insertion {
    /// "305" or "30-59".
    pub fn lines(&self) -> String {
        if self.count <= 1 {
            self.line.to_string()
        } else {
            format!("{}-{}", self.line, self.line + self.count - 1)
        }
    }
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest {
            format: FORMAT.into(),
            version: 1,
            files: Vec::new(),
            reverted: Vec::new(),
        }
    }
}

/// The manifest's path under `project`.
pub fn path_in(project: &Path) -> PathBuf {
    project.join(DIR).join(NAME)
}

/// Read the manifest of the working folder (empty when there is none).
pub fn read() -> Result<Manifest, Error> {
    let rel = Path::new(DIR).join(NAME);
    let Some((bytes, _)) = files::read(&rel)? else {
        return Ok(Manifest::default());
    };
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        Error::Usage(format!(
            "{} is not a profmap manifest ({e}); move it away to start afresh",
            rel.display()
        ))
    })?;
    if m.format != FORMAT || m.version != 1 {
        return Err(Error::Usage(format!(
            "{} is format '{}' version {}, not {FORMAT} version 1",
            rel.display(),
            m.format,
            m.version
        )));
    }
    Ok(m)
}

/// Write the manifest of the working folder atomically.
pub fn write(m: &Manifest) -> Result<(), Error> {
    files::ensure_dir(Path::new(DIR))?;
    let bytes = serde_json::to_vec_pretty(m)
        .map_err(|e| Error::Tool(format!("cannot encode the manifest: {e}")))?;
    files::write(&Path::new(DIR).join(NAME), &bytes, None)
}

/// Hold the manifest's lock (`.profmap/instrument/.profmap.lock`, flock) and check that
/// the manifest is still `seen`: another `profmap instrument` may have changed it since
/// it was read.
pub fn lock_unchanged(seen: &Manifest) -> Result<crate::session::lock::OutLock, Error> {
    files::ensure_dir(Path::new(DIR))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let lock = crate::session::lock::lock(Path::new(DIR), "instrument", now)?;
    if &read()? != seen {
        return Err(Error::Usage(
            "another `profmap instrument` changed the manifest meanwhile; nothing was \
             changed — run the command again"
                .into(),
        ));
    }
    Ok(lock)
}

/// Keep the original bytes (content-addressed); returns their project-relative path.
pub fn keep_original(bytes: &[u8], sha: &str) -> Result<String, Error> {
    let dir = Path::new(DIR).join("originals");
    files::ensure_dir(&dir)?;
    let rel = dir.join(sha);
    files::write(&rel, bytes, None)?;
    Ok(rel.display().to_string())
}

/// The changelog rows for the map and report.md Part B.
pub fn rows(m: &Manifest) -> Vec<InstrumentedFile> {
    let mut out = Vec::new();
    for f in &m.files {
        for i in &f.insertions {
            let what = match &i.function {
                Some(q) => format!("timing wrapper on {q} (1 decorator line, # [PROFILE])"),
                None => "timing helper _profmap_profile (# [PROFILE])".to_string(),
            };
            out.push(InstrumentedFile {
                file: f.file.clone(),
                change_type: "modified".into(),
                what,
                lines: i.lines(),
            });
        }
        out.push(InstrumentedFile {
            file: f.original_copy.clone(),
            change_type: "created".into(),
            what: format!("original bytes of {} (restored by clean)", f.file),
            lines: String::new(),
        });
    }
    for r in &m.reverted {
        for f in &r.files {
            out.push(InstrumentedFile {
                file: f.clone(),
                change_type: "reverted".into(),
                what: format!(
                    "timing wrappers on {} inserted, then taken out: the check `{}` failed \
                     with them ({}); the file is back to its bytes before",
                    r.functions.join(", "),
                    r.check,
                    r.why
                ),
                lines: String::new(),
            });
        }
    }
    if !m.files.is_empty() || !m.reverted.is_empty() {
        out.push(InstrumentedFile {
            file: format!("{DIR}/{NAME}"),
            change_type: "created".into(),
            what: "instrumentation manifest".into(),
            lines: String::new(),
        });
    }
    out
}
