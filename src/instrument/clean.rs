//! `profmap instrument clean [--force]`: restore every instrumented file byte for byte
//! from its kept original and empty the manifest. A file edited since it was
//! instrumented makes the whole clean refuse, touching nothing, unless `--force`: then
//! the edited file is first saved beside itself (`FILE.profmap-edited`, numbered when
//! taken) and the original restored.

use std::fs::Metadata;
use std::path::{Path, PathBuf};

use super::files;
use super::manifest::{self, FileEntry, Manifest};
use crate::error::Error;

/// What one file looks like now.
enum State {
    /// As profmap left it.
    Instrumented(Metadata),
    /// Already the original (restored by hand, or a crash before the write).
    Original,
    /// Edited since (or removed): restoring would lose something.
    Edited(Option<(Vec<u8>, Metadata)>),
}

/// Run `clean`; returns the exit code.
pub fn clean(force: bool) -> Result<i32, Error> {
    let m = manifest::read()?;
    if m.files.is_empty() && !m.reverted.is_empty() {
        let _lock = manifest::lock_unchanged(&m)?;
        manifest::write(&Manifest::default())?;
        println!(
            "No instrumentation is in place; the record of {} reverted change(s) was cleared.",
            m.reverted.len()
        );
        return Ok(0);
    }
    if m.files.is_empty() {
        println!(
            "Nothing to clean: no instrumentation is recorded in {}/{}.",
            manifest::DIR,
            manifest::NAME
        );
        return Ok(0);
    }
    let _lock = manifest::lock_unchanged(&m)?;
    let mut checked = Vec::new();
    for e in &m.files {
        let original = kept_original(e)?;
        checked.push((e, original, state(e)?));
    }
    let edited: Vec<&FileEntry> = checked
        .iter()
        .filter(|(_, _, s)| matches!(s, State::Edited(_)))
        .map(|(e, _, _)| *e)
        .collect();
    if !edited.is_empty() && !force {
        return Err(refusal(&edited));
    }
    for (e, original, s) in &checked {
        let path = Path::new(&e.file);
        match s {
            State::Original => println!("{}: already original", e.file),
            State::Instrumented(meta) => {
                files::write(path, original, Some(meta))?;
                println!("{}: restored", e.file);
            }
            State::Edited(now) => {
                if let Some((bytes, meta)) = now {
                    let saved = save_edited(path, bytes, meta)?;
                    println!(
                        "{}: your later edits were saved as {}",
                        e.file,
                        saved.display()
                    );
                }
                files::write(path, original, now.as_ref().map(|(_, m)| m))?;
                println!("{}: restored (--force)", e.file);
            }
        }
        verify(e)?;
    }
    for e in &m.files {
        files::remove(Path::new(&e.original_copy));
    }
    manifest::write(&Manifest::default())?;
    println!(
        "Every instrumented file is back to its original bytes (SHA-256 checked); the manifest is empty."
    );
    Ok(0)
}

/// The kept original, checked against its hash.
fn kept_original(e: &FileEntry) -> Result<Vec<u8>, Error> {
    files::read(Path::new(&e.original_copy))?
        .map(|(b, _)| b)
        .filter(|b| files::sha256(b) == e.original_sha256)
        .ok_or_else(|| {
            Error::Usage(format!(
                "the original copy of {} ({}) is missing or damaged: profmap cannot restore \
                 it byte for byte; nothing was changed",
                e.file, e.original_copy
            ))
        })
}

fn state(e: &FileEntry) -> Result<State, Error> {
    Ok(match files::read(Path::new(&e.file))? {
        Some((b, meta)) => {
            let sha = files::sha256(&b);
            if sha == e.instrumented_sha256 {
                State::Instrumented(meta)
            } else if sha == e.original_sha256 {
                State::Original
            } else {
                State::Edited(Some((b, meta)))
            }
        }
        None => State::Edited(None),
    })
}

/// The refusal: which files, that nothing changed, and how to force.
fn refusal(edited: &[&FileEntry]) -> Error {
    let list: Vec<String> = edited
        .iter()
        .map(|e| {
            format!(
                "  {} (now differs from the instrumented SHA-256 {})",
                e.file, e.instrumented_sha256
            )
        })
        .collect();
    let beside: Vec<String> = edited
        .iter()
        .map(|e| format!("{}.profmap-edited", e.file))
        .collect();
    Error::Usage(format!(
        "cannot clean safely: edited after instrumentation:\n{}\nNothing was changed. \
         `profmap instrument clean --force` restores the originals and discards those \
         edits, after saving each edited file beside it ({}).",
        list.join("\n"),
        beside.join(", ")
    ))
}

/// Save the edited file as `FILE.profmap-edited` (or `.profmap-edited.N` when taken).
fn save_edited(path: &Path, bytes: &[u8], meta: &Metadata) -> Result<PathBuf, Error> {
    let base = format!("{}.profmap-edited", path.display());
    let mut n = 0;
    loop {
        let cand = if n == 0 {
            PathBuf::from(&base)
        } else {
            PathBuf::from(format!("{base}.{n}"))
        };
        if std::fs::symlink_metadata(&cand).is_err() {
            files::write(&cand, bytes, Some(meta))?;
            return Ok(cand);
        }
        n += 1;
    }
}

/// Re-read the file and check it is the original.
fn verify(e: &FileEntry) -> Result<(), Error> {
    let now = files::read(Path::new(&e.file))?.map(|(b, _)| files::sha256(&b));
    if now.as_deref() != Some(e.original_sha256.as_str()) {
        return Err(Error::Tool(format!(
            "{} does not hash to its original after restoring (SHA-256 {:?}, expected {})",
            e.file, now, e.original_sha256
        )));
    }
    Ok(())
}
