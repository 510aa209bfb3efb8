//! Other load on the machine during the baseline: the load average and the processes,
//! other than profmap and the target, that used the most CPU.
//!
//! Two looks at `/proc/*/stat`, one before the first run and one after the last: a
//! process's CPU time in the window is its ticks at the end less its ticks at the start
//! (all of them when it started within the window). The target's own processes are
//! never there at either look (each run's tree is reaped before the next starts), so
//! what is found is other load. A process that started and exited within the window is
//! not seen; the figure is a lower bound.

use std::collections::HashMap;
use std::time::Instant;

use super::procfs;
use crate::profile::{BusyProcess, MachineLoad};

/// How many of the busiest other processes are kept.
const KEEP: usize = 5;

/// The first look, taken before the baseline's first run.
#[derive(Debug)]
pub struct LoadProbe {
    at: Instant,
    ticks: HashMap<i32, u64>,
}

impl LoadProbe {
    /// Note every process's CPU ticks now.
    pub fn start() -> LoadProbe {
        LoadProbe {
            at: Instant::now(),
            ticks: snapshot().into_iter().map(|(p, _, t)| (p, t)).collect(),
        }
    }

    /// The second look: CPU used since `start` by each other process, and the load
    /// average now. None when /proc/loadavg cannot be read.
    pub fn finish(self) -> Option<MachineLoad> {
        let (l1, l5) = loadavg()?;
        let tick_ms = 1e3 / clock_ticks_per_s();
        let mut busy: Vec<BusyProcess> = snapshot()
            .into_iter()
            .filter_map(|(pid, name, t)| {
                let used = t.saturating_sub(self.ticks.get(&pid).copied().unwrap_or(0));
                (used > 0).then_some(BusyProcess {
                    pid,
                    name,
                    cpu_ms: used as f64 * tick_ms,
                })
            })
            .collect();
        busy.sort_by(|a, b| b.cpu_ms.total_cmp(&a.cpu_ms));
        let others_cpu_ms = busy.iter().map(|b| b.cpu_ms).sum();
        busy.truncate(KEEP);
        Some(MachineLoad {
            loadavg_1m: l1,
            loadavg_5m: l5,
            window_ms: self.at.elapsed().as_secs_f64() * 1e3,
            others_cpu_ms,
            busiest: busy,
        })
    }
}

/// (pid, comm, user + system ticks) of every process but profmap itself.
fn snapshot() -> Vec<(i32, String, u64)> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let stat = procfs::parse_stat(&text)?;
            Some((pid, comm(&text)?, stat.cpu_ticks))
        })
        .collect()
}

/// The command name of a /proc/PID/stat line: between the first '(' and the last ')'.
fn comm(stat: &str) -> Option<String> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    (open < close).then(|| stat[open + 1..close].to_string())
}

/// The 1- and 5-minute load averages.
fn loadavg() -> Option<(f64, f64)> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse_loadavg(s: &str) -> Option<(f64, f64)> {
    let mut f = s.split_whitespace().map(str::parse::<f64>);
    Some((f.next()?.ok()?, f.next()?.ok()?))
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comm_with_spaces_and_loadavg() {
        let stat = "42 (tmux: server) S 1 42 42 0 -1 4194560 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1";
        assert_eq!(comm(stat).as_deref(), Some("tmux: server"));
        assert_eq!(
            parse_loadavg("2.31 1.05 0.50 3/210 4242\n"),
            Some((2.31, 1.05))
        );
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn a_busy_loop_started_in_the_window_is_found() {
        let probe = LoadProbe::start();
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .expect("sh runs");
        std::thread::sleep(std::time::Duration::from_millis(700));
        let load = probe.finish().expect("loadavg readable");
        let _ = child.kill();
        let _ = child.wait();
        let pid = child.id() as i32;
        assert!(
            load.busiest.iter().any(|b| b.pid == pid && b.cpu_ms > 0.0),
            "{load:?}"
        );
    }
}
