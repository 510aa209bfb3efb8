//! Commands run around the target's runs, with hyperfine's semantics: `--setup` once
//! before the first run, `--prepare` before every run (warm-ups, the profiled run and
//! any extra traced run included), `--conclude` after every run, `--cleanup` once after
//! the last run — also when a run failed or was interrupted.
//!
//! Each goes through `sh -c` with `/dev/null` on its stdin; its output is written into
//! run.log under a header naming it (not echoed to the terminal); none of its time is
//! part of a run's figures. A command that fails stops the session with
//! [`Error::TargetFailed`] naming it (exit 1), unless failures are allowed: then it is
//! a warning of the map, once per command.

use std::io::Write;
use std::process::{Command, Stdio};

use super::run::{LogSink, Notes, push_note};
use crate::error::Error;

/// One of the four roles, for messages (`--prepare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Setup,
    Prepare,
    Conclude,
    Cleanup,
}

impl Role {
    fn flag(self) -> &'static str {
        match self {
            Role::Setup => "--setup",
            Role::Prepare => "--prepare",
            Role::Conclude => "--conclude",
            Role::Cleanup => "--cleanup",
        }
    }
}

/// What to do when a command fails.
#[derive(Debug, Clone)]
pub struct OnFailure {
    /// Go on (a warning in `notes`) instead of stopping.
    pub allow: bool,
    pub notes: Notes,
}

/// Run `cmd` for `role`; `when` says which run it surrounds ("before run 2").
pub fn run(
    role: Role,
    cmd: &str,
    when: &str,
    log: &LogSink,
    on_failure: &OnFailure,
) -> Result<(), Error> {
    if let Ok(mut l) = log.lock() {
        let _ = writeln!(l, "=== profmap: {} {when}: {cmd} ===", role.flag());
    }
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Tool(format!("cannot run {} '{cmd}': {e}", role.flag())))?;
    if let Ok(mut l) = log.lock() {
        let _ = l.write_all(&out.stdout);
        let _ = l.write_all(&out.stderr);
    }
    if out.status.success() {
        return Ok(());
    }
    let how = match (
        out.status.code(),
        std::os::unix::process::ExitStatusExt::signal(&out.status),
    ) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "an unknown status".to_string(),
    };
    let tail = last_line(&out.stderr);
    if on_failure.allow {
        push_note(
            &on_failure.notes,
            format!(
                "{} '{cmd}' failed ({how}{tail}); measured anyway (--allow-failure)",
                role.flag()
            ),
        );
        return Ok(());
    }
    Err(Error::TargetFailed(format!(
        "{} '{cmd}' failed ({how}{tail}) {when} — fix it (its output is in run.log), or pass \
         --allow-failure to go on",
        role.flag()
    )))
}

/// ": LAST LINE" of a command's stderr, when it wrote one.
fn last_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim().chars().take(200).collect::<String>()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn sink() -> (LogSink, Arc<Mutex<Vec<u8>>>) {
        #[derive(Clone)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| std::io::ErrorKind::Other)?
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Arc::new(Mutex::new(Vec::new()));
        (Arc::new(Mutex::new(Box::new(Shared(buf.clone())))), buf)
    }

    #[test]
    fn output_goes_to_the_log_under_a_header() {
        let (log, buf) = sink();
        let f = OnFailure {
            allow: false,
            notes: Notes::default(),
        };
        run(Role::Prepare, "echo hello", "before run 1", &log, &f).expect("runs");
        let text = String::from_utf8(buf.lock().expect("lock").clone()).expect("utf8");
        assert!(
            text.contains("=== profmap: --prepare before run 1: echo hello ===\nhello\n"),
            "{text}"
        );
    }

    #[test]
    fn a_failure_names_the_command_and_its_last_words_or_is_a_note_when_allowed() {
        let (log, _) = sink();
        let f = OnFailure {
            allow: false,
            notes: Notes::default(),
        };
        let e = run(
            Role::Prepare,
            "echo boom >&2; exit 3",
            "before run 2",
            &log,
            &f,
        )
        .expect_err("fails");
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 1);
        assert!(
            msg.contains("--prepare 'echo boom >&2; exit 3' failed (exit 3: boom) before run 2"),
            "{msg}"
        );
        let f = OnFailure {
            allow: true,
            notes: Notes::default(),
        };
        run(Role::Conclude, "false", "after run 1", &log, &f).expect("allowed");
        let notes = f.notes.lock().expect("lock").clone();
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("--conclude 'false' failed (exit 1)"),
            "{notes:?}"
        );
    }
}
