//! data_flow's third source: the read and write calls of the whole tree, whatever they
//! read or write (files, pipes, devices, sockets read with `read`), counted by the
//! kernel (/proc/PID/io `syscr`, `syscw`, `rchar`, `wchar`), with the on-CPU time
//! spent inside them read from the stacks. `dd bs=512` copying 200 MB makes 800,000
//! calls of 512 bytes and spends three quarters of its run entering and leaving them;
//! the same copy with `bs=1M` takes a tenth of the time. Confirmed when the tree made
//! at least [`MIN_IO_CALLS`] calls averaging under [`SMALL_CALL_BYTES`] bytes and the
//! time on a CPU inside them holds at least [`IO_CPU_SHARE_PCT`] of the wall.

use super::facts::{Facts, IoCalls};
use super::site;
use super::types::{Finding, SuspicionCategory as C, SuspicionVerdict as V};

/// Calls from which their number is a pattern.
pub const MIN_IO_CALLS: u64 = 10_000;
/// Average bytes per call under which a call costs more than the bytes it moves.
pub const SMALL_CALL_BYTES: u64 = 1024;
/// Share of the wall the on-CPU time inside the calls must hold, percent.
pub const IO_CPU_SHARE_PCT: f64 = 10.0;

pub const NOTE: &str = "data_flow (calls): the tree's read/write calls and bytes \
                        (/proc/PID/io syscr, syscw, rchar, wchar) and on-CPU time inside \
                        read/write calls (stacks); confirmed at ≥ 10,000 calls of < 1 KiB on \
                        average holding ≥ 10% of wall on a CPU";

/// The calls in a phrase: `400000 reads and 400000 writes moved 390.6 MiB (512 bytes
/// per call); 158 ms on a CPU inside them (80.1% of wall)`.
pub fn summary(f: &Facts, c: &IoCalls) -> String {
    let calls = c.reads.saturating_add(c.writes);
    let per = if calls > 0 {
        format!(" ({:.0} bytes per call)", c.bytes as f64 / calls as f64)
    } else {
        String::new()
    };
    format!(
        "{} reads and {} writes moved {}{per}; {} on a CPU inside them ({:.1}% of wall)",
        c.reads,
        c.writes,
        super::wrong_tool::mib(c.bytes),
        site::ms(c.cpu_ms),
        f.share(c.cpu_ms)
    )
}

/// The confirmed finding, when the tree's calls are many, small and costly.
pub fn small_calls(f: &Facts) -> Option<Finding> {
    let c = f.io_calls.as_ref()?;
    let calls = c.reads.saturating_add(c.writes);
    let share = f.share(c.cpu_ms);
    if calls < MIN_IO_CALLS
        || c.bytes >= calls.saturating_mul(SMALL_CALL_BYTES)
        || share < IO_CPU_SHARE_PCT
    {
        return None;
    }
    let at = c
        .sites
        .first()
        .map_or_else(|| "the run".to_string(), |(s, _)| s.clone());
    Some(
        Finding::new(
            C::DataFlow,
            V::Confirmed,
            at.clone(),
            "many small read/write calls".into(),
            format!(
                "{}: the cost is per call (entering the kernel, checks, copies of a few \
                 bytes), not per byte",
                summary(f, c)
            ),
            NOTE,
        )
        .advice(
            format!(
                "read and write in larger blocks at {at}: a buffered reader or writer of \
                 64 KiB or more (`dd bs=1M`, `BufWriter`, `io.BufferedWriter`, `setvbuf`), \
                 or whole records per call"
            ),
            Some(share),
            format!("at most the {share:.1}% of wall on a CPU inside the calls"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::facts;
    use super::*;

    fn dd(bytes_per_call: u64, cpu_ms: f64) -> Facts {
        let mut f = facts(200.0);
        f.io_calls = Some(IoCalls {
            reads: 400_000,
            writes: 400_000,
            bytes: 800_000 * bytes_per_call,
            cpu_ms,
            sites: vec![("copy (dd.c:12)".into(), cpu_ms)],
        });
        f
    }

    #[test]
    fn many_small_costly_calls_are_confirmed_at_their_site() {
        let x = small_calls(&dd(512, 150.0)).expect("confirmed");
        assert_eq!(x.suspicion.location, "copy (dd.c:12)");
        assert!(
            x.suspicion
                .evidence
                .starts_with("400000 reads and 400000 writes moved 390.6 MiB (512 bytes per call)"),
            "{}",
            x.suspicion.evidence
        );
        assert_eq!(x.advice.and_then(|a| a.gain_pct), Some(75.0));
    }

    #[test]
    fn large_cheap_or_few_calls_are_not() {
        assert!(small_calls(&dd(65536, 150.0)).is_none());
        assert!(small_calls(&dd(512, 10.0)).is_none());
        let mut f = dd(512, 150.0);
        if let Some(c) = f.io_calls.as_mut() {
            (c.reads, c.writes, c.bytes) = (4000, 4000, 8000 * 512);
        }
        assert!(small_calls(&f).is_none());
        // A recording's counts are not trusted to add up without overflow.
        if let Some(c) = f.io_calls.as_mut() {
            (c.reads, c.writes, c.bytes) = (u64::MAX, u64::MAX, u64::MAX);
        }
        assert!(small_calls(&f).is_none());
        assert!(summary(&f, f.io_calls.as_ref().unwrap()).contains("bytes per call"));
        f.io_calls = None;
        assert!(small_calls(&f).is_none());
    }
}
