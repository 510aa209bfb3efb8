//! The "this is not a code problem" verdicts (`wrong_tool_indicators`), each with its
//! evidence:
//!
//! - `external_service_no_alternative`: peers on other hosts hold at least half of the
//!   wall time and no confirmed suspicion concerns them (nothing to batch or pool);
//! - `infrastructure_bound`: file waits hold at least [`FILE_SHARE_PCT`] of the wall
//!   and a block device was busy (I/O in flight, /proc/diskstats `io_ticks`) for at
//!   least [`SATURATED_PCT`] of the profiled run: the disk, not the code, sets the pace
//!   (a disk that is not saturated says the waits are latency, not capacity), unless the
//!   device had about one request in flight while busy: that is one reader waiting for
//!   each read in turn, latency again (`storage`);
//! - `within_industry_norm`: the heaviest resource, holding at least a third of the
//!   wall, took per operation what such an operation normally takes (`norms`), and no
//!   confirmed suspicion concerns it;
//! - `already_optimized`: at least 80% of the wall on a CPU, at least half of that CPU
//!   time in library code or in programs installed on the system (`installed`: `gzip
//!   -9`'s own deflate loop), and no confirmed suspicion about the code (run-queue waits
//!   are the machine's).

use super::super::resources::ResourceRole;
use super::facts::Facts;
use super::norms;
use super::site;
use super::types::{Finding, WrongToolEvidence, WrongToolIndicator as W};

/// Share of the wall an external peer must hold to be "most of the time", percent.
pub const MAJOR_SHARE_PCT: f64 = 50.0;
/// Share of the wall the heaviest resource must hold for its per-operation time to
/// speak for the run, percent (a third: it is then the largest single cost).
pub const NORM_SHARE_PCT: f64 = 30.0;
/// Share of the wall in file waits for the disk's load to matter, percent.
pub const FILE_SHARE_PCT: f64 = 20.0;
/// A device busy this share of the run is saturated, percent.
pub const SATURATED_PCT: f64 = 90.0;

pub fn indicators(
    f: &Facts,
    found: &[Finding],
    warnings: &mut Vec<String>,
) -> Vec<WrongToolEvidence> {
    let confirmed_on = |name: &str| {
        found
            .iter()
            .any(|x| x.confirmed() && x.resource.as_deref() == Some(name))
    };
    let mut out = Vec::new();
    let external: Vec<_> = f
        .peers
        .iter()
        .filter(|p| p.role == Some(ResourceRole::External))
        .collect();
    let ext_ms: f64 = external.iter().map(|p| p.wait_ms).sum();
    if f.share(ext_ms) >= MAJOR_SHARE_PCT && !external.iter().any(|p| confirmed_on(&p.name)) {
        let names: Vec<&str> = external.iter().map(|p| p.name.as_str()).collect();
        out.push(WrongToolEvidence {
            indicator: W::ExternalServiceNoAlternative,
            evidence: format!(
                "{:.1}% of wall waiting on peers on other hosts ({}), with no confirmed \
                 pattern to batch, pool or overlap",
                f.share(ext_ms),
                names.join(", ")
            ),
        });
    }
    out.extend(infrastructure(f, warnings));
    out.extend(within_norm(f, &confirmed_on));
    let cpu = f.wait("cpu") + f.wait("runqueue") + f.wait("memory");
    let installed_ms: f64 = f.cpu_installed_ms.iter().map(|(_, ms)| ms).sum();
    if f.share(cpu) >= 80.0
        && f.cpu_total_ms > 0.0
        && (f.cpu_library_ms + installed_ms) * 2.0 >= f.cpu_total_ms
        && !found.iter().any(|x| x.confirmed() && !environment(x))
    {
        // Programs holding under 1% of the CPU time are not worth naming.
        let pct = |ms: f64| ms * 100.0 / f.cpu_total_ms;
        let names: Vec<&str> = f
            .cpu_installed_ms
            .iter()
            .filter(|(_, ms)| pct(*ms) >= 1.0)
            .map(|(m, _)| m.as_str())
            .collect();
        let installed = if names.is_empty() {
            String::new()
        } else {
            format!(
                ", {:.1}% in programs installed on the system ({}: not the user's code)",
                pct(installed_ms),
                names.join(", ")
            )
        };
        out.push(WrongToolEvidence {
            indicator: W::AlreadyOptimized,
            evidence: format!(
                "{:.1}% of wall on a CPU, {:.1}% of the CPU time in library code{installed}, \
                 and no confirmed suspicion about the code",
                f.share(cpu),
                f.cpu_library_ms * 100.0 / f.cpu_total_ms
            ),
        });
    }
    out
}

/// File waits while a disk was saturated.
fn infrastructure(f: &Facts, warnings: &mut Vec<String>) -> Option<WrongToolEvidence> {
    let file = f.share(f.wait("file"));
    if file < FILE_SHARE_PCT {
        return None;
    }
    let Some(disks) = &f.disks else {
        warnings.push(format!(
            "infrastructure_bound not checked: {file:.1}% of wall waited on file I/O, but the \
             recording has no disk utilisation (/proc/diskstats) for the profiled run"
        ));
        return None;
    };
    let busiest = disks.first().filter(|d| {
        d.busy_pct >= SATURATED_PCT
            && d.in_flight
                .is_none_or(|q| q >= super::storage::SERIAL_IN_FLIGHT)
    })?;
    Some(WrongToolEvidence {
        indicator: W::InfrastructureBound,
        evidence: format!(
            "{file:.1}% of wall waiting on file I/O while {} was busy {:.1}% of the run \
             ({} read, {} written, machine-wide): the device is saturated",
            busiest.device,
            busiest.busy_pct,
            mib(busiest.read_bytes),
            mib(busiest.written_bytes)
        ),
    })
}

/// Bytes as MiB with one decimal: `263.1 MiB`.
pub(super) fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// A confirmed suspicion about the machine, not the code (run-queue waits).
fn environment(x: &Finding) -> bool {
    x.suspicion.category == super::types::SuspicionCategory::Configuration
}

/// The heaviest resource's per-operation time against the norms' table.
fn within_norm(f: &Facts, confirmed_on: &dyn Fn(&str) -> bool) -> Option<WrongToolEvidence> {
    let mut cands: Vec<(f64, String)> = Vec::new();
    for p in &f.peers {
        let (Some(rt), Some(norm)) = (p.round_trips.filter(|&n| n > 0), norms::for_peer(p.role))
        else {
            continue;
        };
        let per = p.wait_ms / rt as f64;
        if f.share(p.wait_ms) >= NORM_SHARE_PCT && norm.holds(per) && !confirmed_on(&p.name) {
            cands.push((
                p.wait_ms,
                format!(
                    "{:.1}% of wall waiting on {}: {rt} round trips of {} each, within {}",
                    f.share(p.wait_ms),
                    p.name,
                    site::ms(per),
                    norm.range()
                ),
            ));
        }
    }
    for s in &f.syncs {
        let per = s.ms / s.intervals.max(1) as f64;
        let norm = norms::FSYNC_LOCAL;
        if f.share(s.ms) >= NORM_SHARE_PCT && norm.holds(per) && !confirmed_on(&s.path) {
            cands.push((
                s.ms,
                format!(
                    "{:.1}% of wall in syncs of {}: {} waits of {} each, within {}",
                    f.share(s.ms),
                    s.path,
                    s.intervals,
                    site::ms(per),
                    norm.range()
                ),
            ));
        }
    }
    cands.sort_by(|a, b| b.0.total_cmp(&a.0));
    cands
        .into_iter()
        .next()
        .map(|(_, evidence)| WrongToolEvidence {
            indicator: W::WithinIndustryNorm,
            evidence,
        })
}

#[cfg(test)]
mod tests {
    use super::super::facts::SyncFact;
    use super::super::site::testing::*;
    use super::super::types::{SuspicionCategory, SuspicionVerdict};
    use super::*;

    #[test]
    fn cpu_in_libraries_with_nothing_confirmed_is_already_optimized() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("cpu".into(), 950.0);
        f.cpu_total_ms = 950.0;
        f.cpu_library_ms = 700.0;
        let got = indicators(&f, &[], &mut Vec::new());
        assert_eq!(
            got.iter().map(|w| w.indicator).collect::<Vec<_>>(),
            vec![W::AlreadyOptimized]
        );
        f.cpu_library_ms = 100.0;
        assert!(indicators(&f, &[], &mut Vec::new()).is_empty());
        // The rest in an installed program's own code (`gzip -9`): not the user's either.
        f.cpu_installed_ms = vec![("gzip".into(), 795.0), ("cat".into(), 5.0)];
        let got = indicators(&f, &[], &mut Vec::new());
        assert_eq!(got[0].indicator, W::AlreadyOptimized);
        assert!(
            got[0]
                .evidence
                .contains("84.2% in programs installed on the system (gzip"),
            "{}",
            got[0].evidence
        );
    }

    #[test]
    fn an_external_peer_with_nothing_to_batch() {
        let mut f = facts(1000.0);
        let mut p = peer("93.184.216.34:443", ResourceRole::External, 700.0);
        p.round_trips = Some(10);
        f.peers = vec![p];
        let got: Vec<_> = indicators(&f, &[], &mut Vec::new())
            .iter()
            .map(|w| w.indicator)
            .collect();
        assert_eq!(
            got,
            vec![W::ExternalServiceNoAlternative, W::WithinIndustryNorm]
        );
        let batch = Finding::new(
            SuspicionCategory::Architecture,
            SuspicionVerdict::Confirmed,
            "x".into(),
            "x".into(),
            "x".into(),
            "x",
        )
        .on("93.184.216.34:443");
        assert!(indicators(&f, &[batch], &mut Vec::new()).is_empty());
    }

    #[test]
    fn fsyncs_of_normal_length_are_within_the_norm() {
        let mut f = facts(1000.0);
        f.waits_ms.insert("file".into(), 900.0);
        f.syncs = vec![SyncFact {
            path: "/tmp/out".into(),
            intervals: 300,
            ms: 900.0,
        }];
        let mut warnings = Vec::new();
        let got = indicators(&f, &[], &mut warnings);
        assert_eq!(got[0].indicator, W::WithinIndustryNorm);
        assert!(got[0].evidence.contains("300 waits of 3.0 ms"));
        assert!(warnings[0].contains("diskstats"));
    }

    #[test]
    fn file_waits_on_a_saturated_disk_are_infrastructure_bound() {
        use crate::profile::DiskBusy;
        let mut f = facts(1000.0);
        f.waits_ms.insert("file".into(), 600.0);
        let disk = |busy_pct| DiskBusy {
            device: "vda".into(),
            busy_pct,
            read_bytes: 0,
            written_bytes: 64 << 20,
            reads: None,
            read_ms: None,
            in_flight: None,
        };
        f.disks = Some(vec![disk(97.0)]);
        let mut warnings = Vec::new();
        let got = indicators(&f, &[], &mut warnings);
        assert_eq!(got[0].indicator, W::InfrastructureBound);
        assert!(
            got[0].evidence.contains("vda was busy 97.0%"),
            "{}",
            got[0].evidence
        );
        assert!(warnings.is_empty());
        f.disks = Some(vec![disk(40.0)]);
        assert!(indicators(&f, &[], &mut Vec::new()).is_empty());
        // Busy all along with one request at a time: a reader waiting on each read.
        f.disks = Some(vec![DiskBusy {
            in_flight: Some(1.0),
            ..disk(97.0)
        }]);
        assert!(indicators(&f, &[], &mut Vec::new()).is_empty());
    }
}
