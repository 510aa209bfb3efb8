//! `run.log` with a bounded size. The log is a sequence of sections: profmap's own
//! lines (those starting `=== profmap: ` or `profmap: `) and, between them, a run's
//! output. The profiled run's output is kept in full up to [`PROFILED_CAP`]; any other
//! run keeps its first and last [`EDGE`] bytes. What is cut is replaced by one line
//! `[profmap: 1,234,567 bytes cut here]`, so a reader knows.
//!
//! profmap's own lines are recognised by their start at the start of a line or of a
//! write call (profmap writes each with one `writeln!`; the target's output is written
//! in chunks that rarely begin so); one that follows output with no final newline is
//! put on a line of its own. They are buffered until their newline and, when
//! redacting, pass through [`super::redact::redact_text`] (they carry the command).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::{Arc, Mutex};

use super::outfile::TempOut;
use super::redact::redact_text;
use crate::error::Error;
use crate::measure::LogSink;

/// The most output of the profiled run kept before cutting (then its last [`EDGE`]).
pub const PROFILED_CAP: usize = 64 << 20;
/// Bytes kept at each end of any other run's output.
pub const EDGE: usize = 64 << 10;

const MARKS: [&[u8]; 2] = [b"=== profmap: ", b"profmap: "];

/// A writer that caps each run's output (see the module doc).
#[derive(Debug)]
pub struct CappedLog<W: Write> {
    inner: W,
    redact: bool,
    /// The input so far ends a line (a profmap line may start here).
    at_line_start: bool,
    /// What was written to `inner` so far ends a line.
    written_nl: bool,
    /// Some while a profmap line is being collected.
    own_line: Option<Vec<u8>>,
    head_cap: usize,
    head_written: usize,
    tail: VecDeque<u8>,
    cut: u64,
}

impl<W: Write> CappedLog<W> {
    pub fn new(inner: W, redact: bool) -> Self {
        CappedLog {
            inner,
            redact,
            at_line_start: true,
            written_nl: true,
            own_line: None,
            head_cap: EDGE,
            head_written: 0,
            tail: VecDeque::new(),
            cut: 0,
        }
    }

    /// Write to the inner writer, remembering whether a line was ended.
    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(&last) = bytes.last() {
            self.inner.write_all(bytes)?;
            self.written_nl = last == b'\n';
        }
        Ok(())
    }

    /// Write out what the current section held back (its tail and the cut note).
    fn end_section(&mut self) -> io::Result<()> {
        if self.cut > 0 {
            let nl = if self.written_nl { "" } else { "\n" };
            let note = format!("{nl}[profmap: {} bytes cut here]\n", thousands(self.cut));
            self.emit(note.as_bytes())?;
        }
        let tail: Vec<u8> = self.tail.drain(..).collect();
        self.emit(&tail)?;
        self.cut = 0;
        self.head_written = 0;
        Ok(())
    }

    /// A complete profmap line: it ends the section and says what the next one is.
    fn own_line_done(&mut self, line: Vec<u8>) -> io::Result<()> {
        let text = String::from_utf8_lossy(&line);
        let text = if self.redact {
            redact_text(&text)
        } else {
            text.into_owned()
        };
        if !self.written_nl {
            self.emit(b"\n")?;
        }
        self.emit(text.as_bytes())?;
        self.head_cap = if text.starts_with("=== profmap: profiled run of") {
            PROFILED_CAP
        } else {
            EDGE
        };
        self.at_line_start = true;
        Ok(())
    }

    /// A run's output: first the head, then a ring of the last EDGE bytes.
    fn output(&mut self, buf: &[u8]) -> io::Result<()> {
        let room = self.head_cap.saturating_sub(self.head_written);
        let (head, rest) = buf.split_at(room.min(buf.len()));
        self.emit(head)?;
        self.head_written += head.len();
        // Only the last EDGE bytes of a large write can stay: copy no more than those.
        let skip = rest.len().saturating_sub(EDGE);
        self.cut += skip as u64;
        self.tail.extend(&rest[skip..]);
        if self.tail.len() > EDGE {
            let over = self.tail.len() - EDGE;
            self.tail.drain(..over);
            self.cut += over as u64;
        }
        Ok(())
    }

    /// End the last section and flush.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(line) = self.own_line.take() {
            self.own_line_done(line)?;
        }
        self.end_section()?;
        self.inner.flush()
    }
}

impl<W: Write> Write for CappedLog<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while !rest.is_empty() {
            if self.own_line.is_none()
                && (self.at_line_start || rest.len() == buf.len())
                && MARKS.iter().any(|m| rest.starts_with(m))
            {
                self.end_section()?;
                self.own_line = Some(Vec::new());
            }
            match self.own_line.as_mut() {
                Some(line) => {
                    let n = rest
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(rest.len(), |i| i + 1);
                    line.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    if line.ends_with(b"\n")
                        && let Some(l) = self.own_line.take()
                    {
                        self.own_line_done(l)?;
                    }
                }
                None => {
                    let n = rest
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(rest.len(), |i| i + 1);
                    self.output(&rest[..n])?;
                    self.at_line_start = rest[n - 1] == b'\n';
                    rest = &rest[n..];
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// run.log while a session runs: a capped writer into a private temporary, renamed to
/// `run.log` by [`RunLog::commit`].
#[derive(Debug)]
pub struct RunLog {
    shared: Arc<Mutex<CappedLog<BufWriter<File>>>>,
    tmp: TempOut,
}

/// The sink handed to the runs: a clone of the shared capped writer.
#[derive(Debug)]
struct Shared(Arc<Mutex<CappedLog<BufWriter<File>>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0.lock() {
            Ok(mut l) => l.write(buf),
            Err(_) => Err(io::Error::other("run.log writer poisoned")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.0.lock() {
            Ok(mut l) => l.flush(),
            Err(_) => Err(io::Error::other("run.log writer poisoned")),
        }
    }
}

impl RunLog {
    /// A fresh temporary for `dir/name`.
    pub fn create(
        dir: &std::path::Path,
        name: &str,
        private: bool,
        redact: bool,
    ) -> Result<Self, Error> {
        let mut tmp = TempOut::create(dir, name, private)?;
        let file = tmp.file().try_clone().map_err(|e| Error::io(dir, e))?;
        let capped = CappedLog::new(BufWriter::new(file), redact);
        Ok(RunLog {
            shared: Arc::new(Mutex::new(capped)),
            tmp,
        })
    }

    /// The writer runs log into.
    pub fn sink(&self) -> LogSink {
        Arc::new(Mutex::new(Box::new(Shared(Arc::clone(&self.shared)))))
    }

    /// End the last section, flush, and rename the temporary to its final name.
    pub fn commit(self) -> Result<(), Error> {
        let path = self.tmp_dest();
        match self.shared.lock() {
            Ok(mut l) => l.finish().map_err(|e| Error::io(&path, e))?,
            Err(_) => return Err(Error::Tool("run.log writer poisoned".into())),
        }
        self.tmp.commit().map(|_| ())
    }

    fn tmp_dest(&self) -> std::path::PathBuf {
        self.tmp.dest().to_path_buf()
    }
}

/// 1234567 → "1,234,567".
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(redact: bool, f: impl FnOnce(&mut CappedLog<Vec<u8>>)) -> String {
        let mut l = CappedLog::new(Vec::new(), redact);
        f(&mut l);
        l.finish().expect("finish");
        String::from_utf8(l.inner).expect("utf8")
    }

    #[test]
    fn other_runs_keep_both_ends() {
        let big = "x".repeat(EDGE * 3);
        let out = log(false, |l| {
            writeln!(l, "=== profmap: run 1 of sh ===").expect("w");
            l.write_all(b"START").expect("w");
            l.write_all(big.as_bytes()).expect("w");
            l.write_all(b"END\n").expect("w");
            writeln!(l, "=== profmap: run 1 ended ===").expect("w");
        });
        assert!(
            out.starts_with("=== profmap: run 1 of sh ===\nSTART"),
            "{}",
            &out[..40]
        );
        assert!(out.ends_with("END\n=== profmap: run 1 ended ===\n"));
        let cut = (EDGE * 3 + 9 - 2 * EDGE) as u64;
        assert!(out.contains(&format!("[profmap: {} bytes cut here]", thousands(cut))));
        assert!(out.len() < 2 * EDGE + 200);
    }

    #[test]
    fn own_line_after_output_without_newline_ends_the_section() {
        let out = log(false, |l| {
            writeln!(l, "=== profmap: run 1 of sh ===").expect("w");
            l.write_all(&vec![b'z'; EDGE * 2 + 10]).expect("w");
            writeln!(l, "=== profmap: run 1 ended ===").expect("w");
        });
        assert!(
            out.contains("[profmap: 10 bytes cut here]\n"),
            "{}",
            out.len()
        );
        assert!(out.ends_with("z\n=== profmap: run 1 ended ===\n"));
    }

    #[test]
    fn profiled_run_is_kept_and_headers_redacted() {
        let big = "y".repeat(EDGE * 3);
        let out = log(true, |l| {
            writeln!(l, "=== profmap: profiled run of db --password=hunter2 ===").expect("w");
            l.write_all(big.as_bytes()).expect("w");
        });
        assert!(!out.contains("hunter2") && out.contains("--password=***"));
        assert!(!out.contains("cut here"));
        assert_eq!(out.matches('y').count(), EDGE * 3);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
