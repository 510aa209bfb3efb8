//! How busy each block device was during a run, from `/proc/diskstats` read before and
//! after it: the share of the run's wall time the device had I/O in flight
//! (`io_ticks`), the bytes moved, the read requests and their time, and how many
//! requests were in flight while it was busy (weighted I/O time over `io_ticks`: about
//! 1 when a reader waited for each request before issuing the next). Machine-wide, not the target's own: a disk near
//! 100 % busy while the target waits on it is the infrastructure's limit, not the
//! code's. Devices with no I/O during the run (and loop/ram devices) are left out.

use std::collections::HashMap;

pub use crate::profile::DiskBusy;

/// Counters of one device: io_ticks (ms), sectors read, sectors written, reads
/// completed, time reading (ms), weighted I/O time (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    io_ticks_ms: u64,
    sectors_read: u64,
    sectors_written: u64,
    reads: u64,
    read_ms: u64,
    queue_ms: u64,
}

/// The devices' counters now; empty when /proc/diskstats cannot be read.
pub fn snapshot() -> HashMap<String, Counters> {
    std::fs::read_to_string("/proc/diskstats")
        .map(|t| parse(&t))
        .unwrap_or_default()
}

fn parse(text: &str) -> HashMap<String, Counters> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = f.get(2) else {
            continue;
        };
        if name.starts_with("loop") || name.starts_with("ram") {
            continue;
        }
        // Fields after the name: reads, merged, sectors read, ms reading, writes,
        // merged, sectors written, ms writing, in progress, io_ticks, weighted ms.
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(reads), Some(rs), Some(read_ms), Some(ws), Some(ticks), Some(queue)) =
            (n(3), n(5), n(6), n(9), n(12), n(13))
        else {
            continue;
        };
        out.insert(
            (*name).to_string(),
            Counters {
                io_ticks_ms: ticks,
                sectors_read: rs,
                sectors_written: ws,
                reads,
                read_ms,
                queue_ms: queue,
            },
        );
    }
    out
}

/// The devices active between two snapshots of a run lasting `wall_ms`, busiest first.
pub fn busy(
    before: &HashMap<String, Counters>,
    after: &HashMap<String, Counters>,
    wall_ms: f64,
) -> Vec<DiskBusy> {
    let mut out: Vec<DiskBusy> = after
        .iter()
        .filter_map(|(name, a)| {
            let b = before.get(name)?;
            let ticks = a.io_ticks_ms.checked_sub(b.io_ticks_ms)?;
            let read = a.sectors_read.checked_sub(b.sectors_read)? * 512;
            let written = a.sectors_written.checked_sub(b.sectors_written)? * 512;
            if ticks == 0 && read == 0 && written == 0 {
                return None;
            }
            let busy_pct = if wall_ms > 0.0 {
                (ticks as f64 * 100.0 / wall_ms).min(100.0)
            } else {
                0.0
            };
            // The weighted time may lag io_ticks by a request in flight at either
            // snapshot; a device busy under a millisecond has no meaningful average.
            let queue = a.queue_ms.checked_sub(b.queue_ms)?;
            let in_flight =
                (ticks > 0).then(|| (queue as f64 / ticks as f64 * 100.0).round() / 100.0);
            Some(DiskBusy {
                device: name.clone(),
                busy_pct: (busy_pct * 10.0).round() / 10.0,
                read_bytes: read,
                written_bytes: written,
                reads: Some(a.reads.checked_sub(b.reads)?),
                read_ms: Some(a.read_ms.checked_sub(b.read_ms)?),
                in_flight,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.busy_pct
            .total_cmp(&a.busy_pct)
            .then(a.device.cmp(&b.device))
    });
    out.truncate(8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "   7       0 loop0 5 0 10 0 0 0 0 0 0 9 0 0 0 0 0 0 0
 253       0 vda 100 0 2000 50 10 0 800 40 0 1000 90 0 0 0 0 0 0
 253       1 vda1 1 0 2 0 0 0 0 0 0 5 0 0 0 0 0 0 0
";
    const AFTER: &str = "   7       0 loop0 9 0 90 0 0 0 0 0 0 99 0 0 0 0 0 0 0
 253       0 vda 200 0 4048 70 30 0 1824 60 0 1450 545 0 0 0 0 0 0
 253       1 vda1 1 0 2 0 0 0 0 0 0 5 0 0 0 0 0 0 0
";

    #[test]
    fn busy_share_and_bytes_per_device() {
        let b = busy(&parse(BEFORE), &parse(AFTER), 500.0);
        assert_eq!(
            b,
            vec![DiskBusy {
                device: "vda".into(),
                busy_pct: 90.0,
                read_bytes: 2048 * 512,
                written_bytes: 1024 * 512,
                reads: Some(100),
                read_ms: Some(20),
                in_flight: Some(1.01),
            }]
        );
    }

    #[test]
    fn counters_going_backwards_or_garbage_are_ignored() {
        let b = busy(&parse(AFTER), &parse(BEFORE), 500.0);
        assert!(b.is_empty());
        assert!(parse("garbage\n1 2\n").is_empty());
    }
}
