//! `profmap instrument add | list | clean`: timing wrappers inserted into the user's
//! Python sources, every change in a manifest, and a byte-exact clean-up.
//!
//! Invariants (see `manifest`): a file is only ever rewritten from its kept original
//! (`add` re-instruments the original with the grown set of functions, `clean` writes
//! the original back), so the result never depends on what earlier insertions looked
//! like. Every step that can fail (parsing, names, compile check, writability, later
//! edits) runs for every file before anything is written: a refusal changes nothing.
//! The manifest is written before the files it describes, so a crash in between
//! leaves a file that `clean` recognises as already original.
//!
//! It works in the working folder (the project), never following links there.

mod add;
mod check;
mod clean;
mod files;
pub mod manifest;
pub mod memory;
mod names;
pub mod python;
pub mod shim;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::Error;
use crate::plan::InstrumentPlan;
use crate::profile::InstrumentedFile;

pub use add::add;
pub use clean::clean;

/// Run one `instrument` subcommand in the working folder; returns the exit code.
pub fn run(plan: &InstrumentPlan) -> Result<i32, Error> {
    match plan {
        InstrumentPlan::Add { targets, check } => add(targets, check),
        InstrumentPlan::List => list(),
        InstrumentPlan::Clean { force } => clean(*force),
    }
}

/// `--trace` targets named by a Python file are checked before anything runs: a file
/// that does not exist or holds no such function is a usage error naming the nearest
/// functions (exit 2), as for `instrument add`. Targets named by module are found by
/// the shim at import time (a module's file is only known once its package imports),
/// and a missing one is a warning after the run.
pub fn check_trace_targets(specs: &[String]) -> Result<(), Error> {
    for spec in specs {
        let Some((file, qual)) = spec.rsplit_once(':') else {
            continue;
        };
        if !(file.ends_with(".py") || file.ends_with(".pyw")) {
            continue;
        }
        let path = Path::new(file);
        let mut src = Vec::new();
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .and_then(|f| f.take(MAX_TRACE_SOURCE).read_to_end(&mut src))
            .map_err(|e| {
                Error::Usage(format!(
                    "--trace {spec}: cannot read {file} ({e}); give the script's path as \
                     the target runs it, or MODULE:QUALNAME"
                ))
            })?;
        let located = python::locate(file, &src)?;
        names::resolve(path, qual, &located)
            .map_err(|e| Error::Usage(format!("--trace {spec}: {e}")))?;
    }
    Ok(())
}

/// The most of a `--trace` file read to check its names.
const MAX_TRACE_SOURCE: u64 = 64 << 20;

/// `profmap instrument list`: what is in place, from the manifest.
pub fn list() -> Result<i32, Error> {
    let m = manifest::read()?;
    for r in &m.reverted {
        println!(
            "reverted: {} on {} (the check `{}` failed with them: {})",
            r.functions.join(", "),
            r.files.join(", "),
            r.check,
            r.why
        );
    }
    if m.files.is_empty() {
        println!(
            "Nothing is instrumented here ({}/{} lists no change in place).",
            manifest::DIR,
            manifest::NAME
        );
        return Ok(0);
    }
    println!("{:<32} {:<48} LINES", "FILE", "FUNCTION");
    for f in &m.files {
        let state = match files::read(Path::new(&f.file)) {
            Ok(Some((b, _))) if files::sha256(&b) == f.instrumented_sha256 => "",
            Ok(Some((b, _))) if files::sha256(&b) == f.original_sha256 => "  (already original)",
            Ok(_) | Err(_) => "  (edited since: clean will refuse without --force)",
        };
        for i in &f.insertions {
            let what = i.function.as_deref().unwrap_or("(timing helper)");
            println!("{:<32} {:<48} {}{state}", f.file, what, i.lines());
        }
    }
    Ok(0)
}

/// The changelog rows of the manifest in `dir` (report.md Part B, the map's
/// `instrumented_files`); empty when there is no manifest or it cannot be read.
pub fn manifest_files(dir: &Path) -> Vec<InstrumentedFile> {
    try_manifest_files(dir).unwrap_or_default()
}

/// As [`manifest_files`], saying why a manifest that exists could not be read.
pub fn try_manifest_files(dir: &Path) -> Result<Vec<InstrumentedFile>, String> {
    let path = manifest::path_in(dir);
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let m: manifest::Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a profmap manifest: {e}", path.display()))?;
    Ok(manifest::rows(&m))
}
