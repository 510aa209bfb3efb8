//! `profmap instrument add FILE:QUALNAME ...`: plan every file first (parse, resolve
//! names, instrument the original, compile-check, check writability), then write the
//! original copies, the manifest, and the files. Adding what is in place changes nothing.

use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use super::manifest::{self, FileEntry, Insertion, Manifest};
use super::{check, files, names, python};
use crate::error::Error;

/// One file's planned change.
struct Planned {
    entry: FileEntry,
    /// The file as it was before this `add` (original, or instrumented for others).
    current: Vec<u8>,
    original: Vec<u8>,
    instrumented: Vec<u8>,
    meta: Metadata,
    added: Vec<String>,
}

/// Run `add`; returns the exit code.
pub fn add(specs: &[String], check_cmd: &[OsString]) -> Result<i32, Error> {
    let mut by_file: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for s in specs {
        let (file, qual) = names::parse_spec(s)?;
        match by_file.iter_mut().find(|(f, _)| *f == file) {
            Some((_, q)) => q.push(qual),
            None => by_file.push((file, vec![qual])),
        }
    }
    let mut m = manifest::read()?;
    let mut planned = Vec::new();
    for (file, quals) in &by_file {
        match plan_file(&m, file, quals)? {
            Some(p) => planned.push(p),
            None => println!(
                "{}: {} already instrumented; nothing changed",
                file.display(),
                quals.join(", ")
            ),
        }
    }
    if planned.is_empty() {
        return Ok(0);
    }
    if !check_cmd.is_empty() {
        let (ok, how) = check::run(check_cmd)?;
        if !ok {
            return Err(Error::Usage(format!(
                "the check `{}` fails before instrumenting ({how}); nothing was changed — \
                 fix it first, or leave the check out",
                check::shown(check_cmd)
            )));
        }
    }
    let before = m.clone();
    let _lock = manifest::lock_unchanged(&before)?;
    for p in &planned {
        manifest::keep_original(&p.original, &p.entry.original_sha256)?;
        m.files.retain(|f| f.file != p.entry.file);
        m.files.push(p.entry.clone());
    }
    manifest::write(&m)?;
    for p in &planned {
        files::write(Path::new(&p.entry.file), &p.instrumented, Some(&p.meta))?;
        for q in &p.added {
            let line = p
                .entry
                .insertions
                .iter()
                .find(|i| i.function.as_deref() == Some(q))
                .map_or(0, |i| i.line);
            println!(
                "{}: instrumented {q} (wrapper at line {line})",
                p.entry.file
            );
        }
    }
    if !check_cmd.is_empty() {
        let (ok, how) = check::run(check_cmd)?;
        if !ok {
            return revert(&planned, &before, check_cmd, &how);
        }
        println!("The check `{}` still passes.", check::shown(check_cmd));
    }
    println!(
        "Manifest: {}/{}; undo everything with `profmap instrument clean`. Calls are logged \
         as JSON lines to $PROFMAP_INSTRUMENT_LOG when it is set.",
        manifest::DIR,
        manifest::NAME
    );
    Ok(0)
}

/// Plan one file; None when every function asked for is already in place.
fn plan_file(m: &Manifest, file: &Path, quals: &[String]) -> Result<Option<Planned>, Error> {
    let key = file.display().to_string();
    let (current, meta) = files::read(file)?.ok_or_else(|| names::unknown_file(file))?;
    let existing = m.files.iter().find(|f| f.file == key);
    let original = match existing {
        Some(e) => original_of(e, &current)?,
        None => current.clone(),
    };
    let located = python::locate(&key, &original)?;
    let mut functions: Vec<String> = existing.map(|e| e.functions.clone()).unwrap_or_default();
    let mut added = Vec::new();
    for q in quals {
        let found = names::resolve(file, q, &located)?;
        if !functions.contains(&found) {
            functions.push(found.clone());
            added.push(found);
        }
    }
    if added.is_empty() {
        return Ok(None);
    }
    if !key.ends_with(".py") && !key.ends_with(".pyw") {
        eprintln!("profmap: note: {key} does not end in .py; treating it as Python");
    }
    let (instrumented, inserted) = python::instrument(&original, &located, &functions)?;
    python::check_compiles(&key, &instrumented)?;
    files::check_writable(file)?;
    let original_sha256 = files::sha256(&original);
    let entry = FileEntry {
        file: key,
        language: "python".into(),
        original_copy: format!("{}/originals/{original_sha256}", manifest::DIR),
        original_sha256,
        instrumented_sha256: files::sha256(&instrumented),
        functions,
        insertions: inserted
            .into_iter()
            .map(|i| Insertion {
                kind: if i.qualname.is_some() {
                    "wrapper"
                } else {
                    "helper"
                }
                .into(),
                function: i.qualname,
                line: i.first_line,
                count: i.count,
            })
            .collect(),
    };
    Ok(Some(Planned {
        entry,
        current,
        original,
        instrumented,
        meta,
        added,
    }))
}

/// The original bytes of an instrumented file, refusing when it was edited since.
fn original_of(e: &FileEntry, current: &[u8]) -> Result<Vec<u8>, Error> {
    let now = files::sha256(current);
    if now == e.original_sha256 {
        return Ok(current.to_vec());
    }
    if now != e.instrumented_sha256 {
        return Err(Error::Usage(format!(
            "{} was edited after it was instrumented (SHA-256 {now}, profmap left {}); \
             nothing was changed. Run `profmap instrument clean` first (it will tell you \
             how to keep or discard those edits)",
            e.file, e.instrumented_sha256
        )));
    }
    let kept = files::read(Path::new(&e.original_copy))?
        .map(|(b, _)| b)
        .filter(|b| files::sha256(b) == e.original_sha256)
        .ok_or_else(|| {
            Error::Usage(format!(
                "the original copy of {} ({}) is missing or damaged; nothing was changed",
                e.file, e.original_copy
            ))
        })?;
    Ok(kept)
}

/// The check passed before and fails instrumented: put back every file this `add`
/// changed (as it was before it) and the manifest, and say so (exit 1).
fn revert(
    planned: &[Planned],
    before: &Manifest,
    check_cmd: &[OsString],
    how: &str,
) -> Result<i32, Error> {
    for p in planned {
        files::write(Path::new(&p.entry.file), &p.current, Some(&p.meta))?;
    }
    let mut after = before.clone();
    after.reverted.push(manifest::Reverted {
        files: planned.iter().map(|p| p.entry.file.clone()).collect(),
        functions: planned.iter().flat_map(|p| p.added.clone()).collect(),
        check: check::shown(check_cmd),
        why: how.to_string(),
    });
    manifest::write(&after)?;
    for p in planned {
        if !before.files.iter().any(|f| f.file == p.entry.file) {
            files::remove(Path::new(&p.entry.original_copy));
        }
    }
    let names: Vec<&str> = planned.iter().map(|p| p.entry.file.as_str()).collect();
    Err(Error::TargetFailed(format!(
        "the check `{}` passed before and fails instrumented ({how}): the edits were \
         reverted ({} restored byte for byte; the manifest records the revert, and the \
         next map's instrumentation changelog shows it until `profmap instrument clean`)",
        check::shown(check_cmd),
        names.join(", ")
    )))
}
