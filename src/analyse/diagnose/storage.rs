//! async_patterns: reads from storage one at a time. A run that waits on file I/O while
//! its tree reads megabytes from storage, and the device had about one request in
//! flight while busy (`DiskBusy::in_flight`), waited for each read's latency before
//! issuing the next: `find | xargs grep` over a cold page cache reads thousands of
//! files so. The device had room for more (an SSD or a virtual disk serves many
//! requests at once); the code can overlap the reads or read less, and a repeat run
//! finds the data in the page cache. Confirmed when file waits hold at least
//! [`FILE_SHARE_PCT`] of the wall, the tree read at least [`MIN_READ_BYTES`] from
//! storage and the busiest reading device had fewer than [`SERIAL_IN_FLIGHT`] requests
//! in flight on average; dismissed with the figure that rules it out (reads from the
//! page cache, reads already overlapping, a saturated device); not checked without
//! the run's storage figures. Nothing is said below the file share: the waits are then
//! not where the time goes.

use super::facts::Facts;
use super::site;
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};
use super::wrong_tool::{FILE_SHARE_PCT, SATURATED_PCT, mib};
use crate::profile::DiskBusy;

/// Storage reads below this are too few to explain the file waits, bytes.
pub const MIN_READ_BYTES: u64 = 4 << 20;
/// Requests in flight on average below this are one read at a time: the kernel's
/// readahead within a file and the writes of the same moments add some overlap (`tar
/// czf` of a cold tree, reading one file at a time: 1.52), a reader keeping several
/// reads going makes it their number.
pub const SERIAL_IN_FLIGHT: f64 = 2.0;
/// A step holding this share of the file waits is where they are made, percent.
const SITE_SHARE_PCT: f64 = 50.0;

const WHAT: &str = "reads from storage one at a time (cold page cache, latency-bound)";
const NOTE: &str = "async_patterns: file waits ≥ 20% of wall, ≥ 4 MiB read from storage by \
                    the tree (/proc/PID/io), and < 2 requests in flight on the busiest \
                    reading device while busy (/proc/diskstats weighted I/O time over busy \
                    time; machine-wide)";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    let file_ms = f.wait("file");
    let share = f.share(file_ms);
    if share < FILE_SHARE_PCT {
        return out;
    }
    let (Some(read), Some(disks)) = (f.storage_read_bytes, f.disks.as_ref()) else {
        out.warnings.push(format!(
            "reads from storage not checked: {share:.1}% of wall waited on file I/O, but the \
             recording has no storage figures (/proc/PID/io, /proc/diskstats) for the \
             profiled run"
        ));
        return out;
    };
    let waits = waits(f, file_ms, share);
    let dismissed = |why: String| {
        Finding::new(
            C::AsyncPatterns,
            V::Dismissed,
            "the run".into(),
            WHAT.into(),
            format!("{waits}; {why}"),
            NOTE,
        )
    };
    if read < MIN_READ_BYTES {
        out.findings.push(dismissed(format!(
            "the tree read {} from storage: the waits were not for reads from the device \
             (the page cache served them, or they were writes and syncs)",
            mib(read)
        )));
        return out;
    }
    let disk = disks
        .iter()
        .filter(|d| d.read_bytes > 0)
        .max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct));
    let Some(disk) = disk else {
        out.warnings.push(format!(
            "reads from storage not checked: the tree read {} from storage, but no block \
             device of /proc/diskstats read anything during the run (a network or FUSE \
             filesystem?)",
            mib(read)
        ));
        return out;
    };
    let device = device(disk);
    match disk.in_flight {
        Some(q) if q >= SERIAL_IN_FLIGHT => {
            out.findings.push(dismissed(format!(
                "the tree read {} from storage and {device}: the reads already overlap",
                mib(read)
            )));
            return out;
        }
        None if disk.busy_pct >= SATURATED_PCT => {
            out.findings.push(dismissed(format!(
                "{device}: the device was saturated (see infrastructure_bound)"
            )));
            return out;
        }
        _ => {}
    }
    let at = site::deepest(f, |s| {
        s.waits_ms.get("file").copied().unwrap_or(0.0) * 100.0 >= SITE_SHARE_PCT * file_ms
    });
    let (location, steps) = match at {
        Some(s) => (s.call_site.clone(), vec![s.id.clone()]),
        None => ("the run".to_string(), Vec::new()),
    };
    out.findings.push(
        Finding::new(
            C::AsyncPatterns,
            V::Confirmed,
            location.clone(),
            WHAT.into(),
            format!(
                "{waits}; the tree read {} from storage and {device}: each read was waited \
                 for before the next was issued, so the device's latency, not its capacity, \
                 set the pace; the data was not in the page cache (a first run after boot or \
                 after the files changed, or more data than memory caches)",
                mib(read)
            ),
            NOTE,
        )
        .steps(steps)
        .advice(
            format!(
                "overlap the reads at {location}: read several files at once (`xargs -P4`, a \
                 thread pool, io_uring), or read fewer of them; a repeat run finds them in the \
                 page cache (`profmap run` measures runs after its warm-up)"
            ),
            Some(share),
            format!(
                "at most the {share:.1}% of wall blocked on file I/O (all of it with the data \
                 cached; n reads at a time save up to (n−1)/n of it)"
            ),
        ),
    );
    out
}

/// The file waits in a phrase: their share, count and spread over files.
fn waits(f: &Facts, file_ms: f64, share: f64) -> String {
    let w = &f.files;
    let spread = if w.intervals > 0 {
        format!(
            ": {} blocked calls on at least {} files and directories, {} each",
            w.intervals,
            w.files,
            site::ms(w.blocked_ms / w.intervals as f64)
        )
    } else {
        String::new()
    };
    format!(
        "{share:.1}% of wall ({}) blocked on file I/O{spread}",
        site::ms(file_ms)
    )
}

/// A device's reads in a phrase: `vda served 14000 reads of 19.2 KiB (0.129 ms each),
/// 1.02 in flight on average while busy 65.9% of the run (machine-wide)`.
fn device(d: &DiskBusy) -> String {
    let reads = match (d.reads, d.read_ms) {
        (Some(n), Some(ms)) if n > 0 => format!(
            " served {n} reads of {:.1} KiB ({} each),",
            d.read_bytes as f64 / n as f64 / 1024.0,
            site::ms(ms as f64 / n as f64)
        ),
        _ => " was".to_string(),
    };
    let flight = d
        .in_flight
        .map(|q| format!(" {q:.2} in flight on average while"))
        .unwrap_or_default();
    format!(
        "{}{reads}{flight} busy {:.1}% of the run (machine-wide)",
        d.device, d.busy_pct
    )
}

#[cfg(test)]
mod tests {
    use super::super::facts::FileWaits;
    use super::super::site::testing::*;
    use super::*;

    fn disk(in_flight: Option<f64>, busy_pct: f64) -> DiskBusy {
        DiskBusy {
            device: "vda".into(),
            busy_pct,
            read_bytes: 256 << 20,
            written_bytes: 0,
            reads: Some(14_000),
            read_ms: Some(1_800),
            in_flight,
        }
    }

    fn cold_grep() -> super::super::Facts {
        let mut f = facts(2000.0);
        f.waits_ms.insert("file".into(), 1300.0);
        f.files = FileWaits {
            files: 1200,
            intervals: 14_000,
            blocked_ms: 1700.0,
        };
        f.storage_read_bytes = Some(256 << 20);
        f.disks = Some(vec![disk(Some(1.02), 66.0)]);
        let mut s = step("1.1", "grep+0x87b0", 1500.0);
        s.waits_ms.insert("file".into(), 1100.0);
        f.steps = vec![step("1", "grep", 1600.0), s];
        f
    }

    #[test]
    fn file_waits_on_storage_one_read_at_a_time_are_confirmed_at_their_step() {
        let out = check(&cold_grep());
        let x = &out.findings[0];
        assert_eq!(x.suspicion.verdict, V::Confirmed);
        assert_eq!(x.suspicion.location, "grep+0x87b0");
        assert_eq!(x.suspicion.affected_steps, vec!["1.1".to_string()]);
        assert!(
            x.suspicion.evidence.contains("65.0% of wall")
                && x.suspicion
                    .evidence
                    .contains("14000 blocked calls on at least 1200 files")
                && x.suspicion.evidence.contains("1.02 in flight"),
            "{}",
            x.suspicion.evidence
        );
        assert_eq!(x.advice.as_ref().and_then(|a| a.gain_pct), Some(65.0));
    }

    #[test]
    fn cached_overlapping_or_saturated_reads_are_dismissed() {
        let mut f = cold_grep();
        f.storage_read_bytes = Some(1 << 20);
        let x = &check(&f).findings[0];
        assert_eq!(x.suspicion.verdict, V::Dismissed);
        assert!(x.suspicion.evidence.contains("1.0 MiB from storage"));

        let mut f = cold_grep();
        f.disks = Some(vec![disk(Some(3.5), 99.0)]);
        let x = &check(&f).findings[0];
        assert_eq!(x.suspicion.verdict, V::Dismissed);
        assert!(x.suspicion.evidence.contains("already overlap"));

        let mut f = cold_grep();
        f.disks = Some(vec![disk(None, 97.0)]);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Dismissed);
        // An older recording without the queue figure, on a device with room.
        f.disks = Some(vec![disk(None, 60.0)]);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Confirmed);
    }

    #[test]
    fn nothing_is_said_below_the_file_share_and_missing_figures_are_warned_of() {
        let mut f = cold_grep();
        f.waits_ms.insert("file".into(), 100.0);
        let out = check(&f);
        assert!(out.findings.is_empty() && out.warnings.is_empty());
        let mut f = cold_grep();
        f.disks = None;
        let out = check(&f);
        assert!(out.findings.is_empty());
        assert!(out.warnings[0].contains("not checked"));
        // Read from storage, yet no block device read: a network filesystem.
        f.disks = Some(Vec::new());
        let out = check(&f);
        assert!(out.findings.is_empty());
        assert!(
            out.warnings[0].contains("no block device"),
            "{:?}",
            out.warnings
        );
    }
}
