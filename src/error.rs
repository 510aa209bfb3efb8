//! Typed errors a user can act on. Each says what happened and what to do, and maps to
//! one exit code: 1 when the target failed, 2 for usage or tool errors.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("cannot run '{name}': {reason}")]
    CannotRun { name: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("output folder '{0}' is a file — give a folder path with --out")]
    OutIsFile(PathBuf),
    #[error("cannot read recording '{path}': {why}")]
    BadRecording { path: PathBuf, why: String },
    #[error("{what} is not permitted on this machine: {why}\n  fix: {fix}")]
    Permission {
        what: String,
        why: String,
        fix: String,
    },
    /// The target failed during the baseline; outputs were written.
    #[error("{0}")]
    TargetFailed(String),
    #[error("interrupted before any run finished: nothing was measured")]
    Interrupted,
    #[error("{0}")]
    Tool(String),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::TargetFailed(_) => 1,
            Error::Interrupted => 130,
            _ => 2,
        }
    }
}
