//! Small, allocation-light readers for the /proc files the baseline needs:
//! `/proc/PID/stat` (CPU ticks, threads, RSS) and `/proc/PID/io` (storage and logical
//! bytes). A process that vanished between listing and reading yields `None`.

/// Fields of /proc/PID/stat that the baseline uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStat {
    /// State letter: R, S, D, T (stopped), Z (zombie), ...
    pub state: u8,
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// user + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    pub num_threads: u64,
    pub rss_pages: u64,
}

/// Fields of /proc/PID/io.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Read and write calls (read, pread64, readv, ... and their write twins).
    pub syscr: u64,
    pub syscw: u64,
}

impl ProcIo {
    pub fn add(&mut self, o: &ProcIo) {
        self.rchar += o.rchar;
        self.wchar += o.wchar;
        self.syscr += o.syscr;
        self.syscw += o.syscw;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
    }
}

pub fn read_stat(pid: i32) -> Option<ProcStat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&s)
}

/// Parse the text of /proc/PID/stat. The command name may contain spaces and
/// parentheses, so fields are counted from the last ')'.
pub fn parse_stat(s: &str) -> Option<ProcStat> {
    let rest = &s[s.rfind(')')? + 1..];
    // rest starts at field 3 (state); field n is at index n - 3.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |n: usize| f.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    Some(ProcStat {
        state: f.first().and_then(|x| x.bytes().next())?,
        ppid: f.get(1).and_then(|x| x.parse().ok())?,
        pgrp: f.get(2).and_then(|x| x.parse().ok())?,
        cpu_ticks: num(14)? + num(15)?,
        num_threads: num(20)?,
        rss_pages: num(24)?,
    })
}

/// The process's command name (`/proc/PID/comm`), "?" once it is gone.
pub fn read_comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

pub fn read_io(pid: i32) -> Option<ProcIo> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    Some(parse_io(&s))
}

pub fn parse_io(s: &str) -> ProcIo {
    let mut io = ProcIo::default();
    for line in s.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = v.trim().parse().unwrap_or(0);
        match k {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            "syscr" => io.syscr = v,
            "syscw" => io.syscw = v,
            _ => {}
        }
    }
    io
}

/// Kernel clock ticks per second (for /proc CPU times).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Page size in KiB.
pub fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 / 1024 } else { 4 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_name() {
        let s = "1234 (a b) c)) S 1 1234 1234 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 2 0 100 \
                 1000000 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let st = parse_stat(s).expect("parses");
        assert_eq!(st.ppid, 1);
        assert_eq!(st.cpu_ticks, 10);
        assert_eq!(st.num_threads, 2);
        assert_eq!(st.rss_pages, 250);
    }

    #[test]
    fn io_fields() {
        let io = parse_io(
            "rchar: 5\nwchar: 6\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n",
        );
        assert_eq!(
            io,
            ProcIo {
                rchar: 5,
                wchar: 6,
                read_bytes: 4096,
                write_bytes: 8192,
                syscr: 1,
                syscw: 2,
            }
        );
    }
}
