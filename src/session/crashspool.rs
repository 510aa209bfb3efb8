//! The crash spool's life in a session (its format: `profile::spool`): opened in the
//! output folder before the first run, written by the sampler's drain thread during the
//! profiled run, removed once `profile.pmr` is written — and, when profmap was killed
//! before that, turned into `profile.pmr` by the next `report` or `export` of the folder
//! ([`recover_folder`]).
//!
//! Invariants:
//! - The spool is created like every output (`outfile`): in the folder reached without
//!   following links (`DirFd`), `O_CREAT|O_EXCL|O_NOFOLLOW`, 0600 when the outputs are
//!   private; a leftover one is removed first (regular files only), as the session is
//!   about to replace that folder's recording anyway.
//! - Recovery holds the folder's lock, so a spool still being written by a live session
//!   is never taken for a crashed one; it reads the spool as hostile input (a link or a
//!   FIFO is refused) and validates the rebuilt recording before writing it.
//! - A recovered recording holds only what the spool held: on-CPU samples, closed
//!   off-CPU intervals with what their blocked calls waited on, and the tables they
//!   name. The baseline, the profiled run's figures, Python stacks, sockets and file
//!   reads are absent, never made up.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use super::dirfd::DirFd;
use super::outfile::{self, TempOut};
use super::{RECORDING, lock, prepare_out_dir};
use crate::error::Error;
use crate::profile::spool::{Recovered, SPOOL_FILE, SpoolSink};
use crate::profile::{Recording, SessionMeta, validate};

/// Open a fresh spool in `out` (canonical) and write its header.
pub fn open(out: &Path, meta: &SessionMeta, private: bool) -> Result<Arc<SpoolSink>, String> {
    outfile::remove_regular(out, SPOOL_FILE);
    let dir = DirFd::open(out).map_err(|e| e.to_string())?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND;
    let file = dir
        .open_file(SPOOL_FILE, flags, if private { 0o600 } else { 0o666 })
        .map_err(|e| e.to_string())?;
    SpoolSink::new(file, meta)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Remove the spool of `out` (the session ended under profmap's control).
pub fn remove(out: &Path) {
    outfile::remove_regular(out, SPOOL_FILE);
}

/// If `dir` holds a spool and no recording newer than it, rebuild the recording from
/// the spool, write it as `profile.pmr` and remove the spool; true when it did. A
/// spool of a session stopped before its profiled run (no samples) is removed.
pub fn recover_folder(dir: &Path) -> Result<bool, Error> {
    let spool = dir.join(SPOOL_FILE);
    let Ok(spool_meta) = std::fs::symlink_metadata(&spool) else {
        return Ok(false);
    };
    let recording = super::folder_recording(dir);
    let newer = |m: &std::fs::Metadata| m.modified().ok();
    if let Ok(rec_meta) = std::fs::metadata(&recording)
        && newer(&rec_meta) >= newer(&spool_meta)
    {
        return Ok(false);
    }
    let out = prepare_out_dir(dir)?;
    let r = crate::profile::spool::read_file(&spool)?;
    // Held from here: a live session's spool (it holds the lock) is never touched.
    let _lock = lock::lock(&out, &r.meta.run_id, r.meta.started_unix_s)?;
    if r.t0_ns.is_none() && r.raw.samples.is_empty() {
        remove(&out);
        eprintln!(
            "profmap: removed {SPOOL_FILE}: profmap was stopped before its profiled run \
             began, so there was nothing to recover"
        );
        return Ok(false);
    }
    let rec = rebuild(r);
    validate::validate(&rec).map_err(|why| Error::BadRecording {
        path: spool.clone(),
        why,
    })?;
    write_recording(&rec, &out)?;
    remove(&out);
    eprintln!(
        "profmap: the run did not finish: recovered {RECORDING} from {SPOOL_FILE} (see the \
         warnings for what it holds)"
    );
    Ok(true)
}

/// The first words of the warning a recovered recording carries.
const RECOVERED: &str = "the recording did not finish";

/// Whether `rec` was recovered from a crash spool (its status is then `interrupted`).
pub fn recovered(rec: &Recording) -> bool {
    rec.sampled
        .as_ref()
        .is_some_and(|s| s.quality.warnings.iter().any(|w| w.starts_with(RECOVERED)))
}

/// The recording a spool stands for, symbolized as `record` does, with the warning
/// saying what happened.
fn rebuild(r: Recovered) -> Recording {
    let off_cpu = (r.raw.samples.iter())
        .filter(|s| matches!(s.kind, crate::profile::SampleKind::OffCpu { .. }))
        .count();
    let on_cpu = r.raw.samples.len() - off_cpu;
    let last_sample_ns = r.raw.samples.iter().next_back().map_or(0, |s| s.time_ns);
    let span_ns = match (r.t0_ns, r.last_mono_ns) {
        (Some(t0), Some(last)) => last.saturating_sub(t0).max(last_sample_ns),
        _ => last_sample_ns,
    };
    let stopped = r.last_unix_s.map_or("an unknown time".to_string(), |t| {
        format!("{} or soon after", utc(t))
    });
    let mut note = format!(
        "{RECOVERED} (profmap was stopped at {stopped}); recovered \
         {on_cpu} on-CPU samples and {off_cpu} off-CPU intervals covering {:.1} s from \
         {SPOOL_FILE} — not recovered: the baseline and the run's figures, waits still \
         open, Python stacks, sockets and file reads",
        span_ns as f64 / 1e9
    );
    if let Some(p) = &r.problem {
        note.push_str(&format!(" (its last append was cut off: {p})"));
    }
    let mut prof = crate::symbolize::symbolize(r.raw);
    prof.wall_ms = span_ns as f64 / 1e6;
    prof.quality.warnings.push(note);
    let mut rec = Recording::new(r.meta);
    rec.sampled = Some(prof);
    rec
}

/// Write `rec` as the folder's `profile.pmr` (through a temporary, 0600 when private).
fn write_recording(rec: &Recording, out: &Path) -> Result<(), Error> {
    let path = out.join(RECORDING);
    let mut tmp = TempOut::create(out, RECORDING, outfile::private_outputs())?;
    {
        let mut w = crate::profile::pmr::write(rec, BufWriter::new(tmp.file()))
            .map_err(|e| Error::io(&path, e))?;
        w.flush().map_err(|e| Error::io(&path, e))?;
    }
    tmp.commit().map(|_| ())
}

/// `unix_s` as a UTC date and time, e.g. `2026-12-03 16:45:07 UTC`.
fn utc(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = super::civil_date(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_315_107.0), "2026-12-03 16:25:07 UTC");
    }
}
