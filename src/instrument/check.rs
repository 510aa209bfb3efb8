//! `instrument add ... -- CHECK`: the user's own command (their tests) run before and
//! after instrumenting. Passing before and failing after means the wrappers broke
//! something: the caller reverts the edits (the seeds' "instrumentation breaks tests →
//! revert").

use std::ffi::OsString;
use std::process::Command;

use crate::error::Error;

/// Run the check command with the terminal's stdio; whether it exited 0, and how it
/// ended in words.
pub fn run(cmd: &[OsString]) -> Result<(bool, String), Error> {
    let Some((program, args)) = cmd.split_first() else {
        return Ok((true, "no check".into()));
    };
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|e| Error::CannotRun {
            name: program.to_string_lossy().into_owned(),
            reason: e.to_string(),
        })?;
    Ok((status.success(), status.to_string()))
}

/// The command for messages.
pub fn shown(cmd: &[OsString]) -> String {
    cmd.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
