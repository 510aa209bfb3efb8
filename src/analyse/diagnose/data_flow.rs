//! data_flow: many small reads and writes — unbuffered I/O that pays a system call
//! (and on a socket, often a packet) per few bytes.
//!
//! - A socket peer: at least [`MIN_CALLS`] data-moving calls averaging under
//!   [`SMALL_BYTES`] bytes each, and more than [`CALLS_PER_TURN`] calls per
//!   request→response round trip when round trips were counted: a query and its reply,
//!   a send and a receive each, are whole messages however small (pgbench's select-only
//!   transactions: 2 calls a round trip) — their cost is the round trips, which the N+1
//!   rule judges, not unbuffered I/O.
//! - A file read through the page cache: at least [`MIN_CALLS`] read calls and at least
//!   [`CALLS_PER_PAGE`] calls per page of the file's extent (on average ≤ 1 KiB a call).
//!   File writes are not counted per call by the recording.
//! - The tree's read and write calls of any kind, from the kernel's counts (`calls`).
//! - A file synced to storage often: at least [`MIN_SYNCS`] waits in fsync/fdatasync
//!   holding at least [`SYNC_SHARE_PCT`] of the wall. Each sync may take what a sync
//!   normally takes (`within_industry_norm` says so when nothing is confirmed), but how
//!   many are made is the code's choice: sqlite3 committing 300 inserts one by one
//!   waited 1,782 times in fdatasync of its journal, 41% of the run.

use super::facts::Facts;
use super::site::{self, resource_of};
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_CALLS: u64 = 1000;
pub const SMALL_BYTES: u64 = 128;
pub const CALLS_PER_PAGE: u64 = 4;
/// Calls per round trip up to which a connection's small calls are whole messages.
pub const CALLS_PER_TURN: u64 = 4;
/// Waits in fsync/fdatasync of one file from which syncing is a pattern, not an event:
/// about a hundred syncs (one to ext4 waits about three times: 320 syncs of 64 KiB
/// blocks, 917 waits).
pub const MIN_SYNCS: u64 = 300;
/// Share of the wall those waits must hold.
pub const SYNC_SHARE_PCT: f64 = 10.0;

const NOTE: &str = "data_flow: calls and bytes per socket peer (socket tracepoints) and read \
                    calls per page of each file (filemap:mm_filemap_get_pages); confirmed at \
                    ≥ 1000 calls of < 128 bytes, over 4 a round trip (sockets) or ≥ 4 calls \
                    per page (files); syncs per file from the stacks of waits in \
                    fsync/fdatasync, confirmed at ≥ 300 waits holding ≥ 10% of wall";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    for p in &f.peers {
        let (Some(calls), Some(bytes)) = (p.calls, p.bytes) else {
            continue;
        };
        let messages = p
            .round_trips
            .is_some_and(|n| n > 0 && calls <= CALLS_PER_TURN * n);
        if calls >= MIN_CALLS && bytes < calls * SMALL_BYTES && !messages {
            let (at, steps) = site::peer_site(f, p, |s| resource_of(s, p).is_some());
            let share = f.share(p.wait_ms);
            out.findings.push(
                Finding::new(
                    C::DataFlow,
                    V::Confirmed,
                    at.clone(),
                    format!("many small reads/writes on the connection to {}", p.name),
                    format!(
                        "{calls} calls moved {bytes} bytes ({:.0} bytes per call); waiting on \
                         it took {} ({share:.1}% of wall)",
                        bytes as f64 / calls as f64,
                        site::ms(p.wait_ms)
                    ),
                    NOTE,
                )
                .steps(steps)
                .advice(
                    format!("buffer the traffic to {} at {at} (write whole messages, read into a buffer)", p.name),
                    Some(share),
                    format!("at most the {share:.1}% of wall waiting on {}", p.name),
                )
                .on(&p.name),
            );
        }
    }
    for r in &f.file_reads {
        if r.calls >= MIN_CALLS && r.calls >= CALLS_PER_PAGE * r.extent_pages.max(1) {
            out.findings.push(
                Finding::new(
                    C::DataFlow,
                    V::Confirmed,
                    r.path.clone(),
                    format!("many small reads of {}", r.path),
                    format!(
                        "{} read calls over a {}-page extent ({:.1} calls per 4 KiB page)",
                        r.calls,
                        r.extent_pages,
                        r.calls as f64 / r.extent_pages.max(1) as f64
                    ),
                    NOTE,
                )
                .advice(
                    format!(
                        "read {} in large blocks (a buffered reader, 64 KiB or more)",
                        r.path
                    ),
                    None,
                    "the per-call CPU cost is not split out of the profile".into(),
                )
                .on(&r.path),
            );
        }
    }
    out.findings.extend(super::calls::small_calls(f));
    // Small I/O is dismissed (or not checked) whatever the syncs show.
    if out.findings.is_empty() {
        dismiss(f, &mut out);
    }
    for sy in &f.syncs {
        let share = f.share(sy.ms);
        if sy.intervals >= MIN_SYNCS && share >= SYNC_SHARE_PCT {
            out.findings.push(
                Finding::new(
                    C::DataFlow,
                    V::Confirmed,
                    sy.path.clone(),
                    format!("many syncs of {}", sy.path),
                    format!(
                        "{} waits in fsync/fdatasync of {}, {} each, took {} ({share:.1}% of \
                         wall): each is a normal sync, their number is the code's",
                        sy.intervals,
                        sy.path,
                        site::ms(sy.ms / sy.intervals as f64),
                        site::ms(sy.ms)
                    ),
                    NOTE,
                )
                .advice(
                    format!(
                        "sync {} less often: group the writes into fewer commits (one \
                         transaction around the loop, BEGIN … COMMIT), or sync once per batch",
                        sy.path
                    ),
                    Some(share),
                    format!("at most the {share:.1}% of wall in its syncs"),
                )
                .on(&sy.path),
            );
        }
    }
    out
}

fn dismiss(f: &Facts, out: &mut RuleOutput) {
    let mut seen = Vec::new();
    if f.sockets_recorded {
        let calls: u64 = f.peers.iter().filter_map(|p| p.calls).sum();
        let bytes: u64 = f.peers.iter().filter_map(|p| p.bytes).sum();
        let turns: u64 = f.peers.iter().filter_map(|p| p.round_trips).sum();
        let per = if turns > 0 {
            format!(
                " in {turns} round trips ({:.1} calls each: whole messages)",
                calls as f64 / turns as f64
            )
        } else {
            String::new()
        };
        seen.push(format!("sockets: {calls} calls moving {bytes} bytes{per}"));
    }
    if f.file_reads_recorded {
        let calls: u64 = f.file_reads.iter().map(|r| r.calls).sum();
        seen.push(format!(
            "file reads: {calls} calls over {} files",
            f.file_reads.len()
        ));
    }
    if let Some(c) = &f.io_calls {
        seen.push(format!("read/write calls: {}", super::calls::summary(f, c)));
    }
    if seen.is_empty() {
        out.warnings.push(
            "data_flow not checked: neither socket traffic, page-cache reads nor the run's \
             read/write calls were recorded"
                .into(),
        );
        return;
    }
    out.findings.push(Finding::new(
        C::DataFlow,
        V::Dismissed,
        "the run".into(),
        "many small reads/writes".into(),
        seen.join("; "),
        NOTE,
    ));
}

#[cfg(test)]
mod tests {
    use super::super::super::resources::ResourceRole;
    use super::super::facts::{FileFact, SyncFact};
    use super::super::site::testing::*;
    use super::*;

    #[test]
    fn one_byte_writes_to_a_socket_are_small_io() {
        let mut f = facts(100.0);
        let mut p = peer("python3:9000", ResourceRole::Service, 50.0);
        p.calls = Some(5000);
        p.bytes = Some(5000);
        f.peers = vec![p];
        f.sockets_recorded = true;
        let out = check(&f);
        assert_eq!(out.findings[0].suspicion.verdict, V::Confirmed);
        assert!(
            out.findings[0]
                .suspicion
                .evidence
                .contains("1 bytes per call")
        );
    }

    #[test]
    fn sub_page_file_reads_are_small_io_and_large_ones_are_not() {
        let mut f = facts(100.0);
        f.file_reads_recorded = true;
        f.file_reads = vec![FileFact {
            path: "/data/in.csv".into(),
            pid: 1,
            calls: 40_000,
            pages_read: 40_000,
            extent_pages: 1000,
        }];
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Confirmed);
        f.file_reads[0].calls = 63;
        f.file_reads[0].pages_read = 1000;
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Dismissed);
    }

    #[test]
    fn a_file_synced_hundreds_of_times_is_confirmed_and_a_few_syncs_are_not() {
        let mut f = facts(700.0);
        f.syncs = vec![SyncFact {
            path: "/data/t.db-journal".into(),
            intervals: 1782,
            ms: 289.0,
        }];
        let out = check(&f);
        let s = &out.findings[0];
        assert_eq!(s.suspicion.verdict, V::Confirmed);
        assert!(
            s.suspicion.evidence.contains("1782 waits"),
            "{}",
            s.suspicion.evidence
        );
        assert_eq!(s.advice.as_ref().and_then(|a| a.gain_pct), Some(41.3));
        // A few dozen syncs (a program's saves), or many that hold little of the run.
        f.syncs[0].intervals = 190;
        assert!(
            check(&f)
                .findings
                .iter()
                .all(|x| x.suspicion.verdict != V::Confirmed)
        );
        f.syncs[0] = SyncFact {
            intervals: 500,
            ms: 35.0,
            ..f.syncs[0].clone()
        };
        assert!(
            check(&f)
                .findings
                .iter()
                .all(|x| x.suspicion.verdict != V::Confirmed)
        );
    }

    #[test]
    fn nothing_recorded_warns() {
        let out = check(&facts(100.0));
        assert!(out.findings.is_empty());
        assert_eq!(out.warnings.len(), 1);
    }

    #[test]
    fn a_small_query_and_its_reply_per_round_trip_are_whole_messages() {
        let mut f = facts(100.0);
        let mut p = peer("postgres:5432", ResourceRole::Database, 50.0);
        p.calls = Some(1200);
        p.bytes = Some(60_000);
        p.round_trips = Some(600);
        f.peers = vec![p];
        f.sockets_recorded = true;
        let out = check(&f);
        let s = &out.findings[0].suspicion;
        assert_eq!(s.verdict, V::Dismissed);
        assert!(
            s.evidence.contains("in 600 round trips (2.0 calls each"),
            "{}",
            s.evidence
        );
        // The same bytes in ten calls a round trip: unbuffered.
        f.peers[0].calls = Some(6000);
        assert_eq!(check(&f).findings[0].suspicion.verdict, V::Confirmed);
    }
}
