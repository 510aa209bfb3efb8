//! The target's standard input: the same bytes for every run, as a benchmark needs.
//!
//! - `--input FILE`: every run opens FILE afresh (a regular file or a character device;
//!   a FIFO, socket or folder is refused: it could not give every run the same bytes,
//!   and opening a planted FIFO would block).
//! - profmap's own stdin (the default): a regular file is reopened for every run through
//!   `/proc/self/fd/0`, so each reads it from its start; `/dev/null` and a terminal give
//!   `/dev/null` (a terminal only with `--interactive`); another character device is
//!   reopened like a file; a pipe or socket is read once into an anonymous memory file
//!   (at most [`MAX_PIPE_BYTES`], else refused with the alternative) that every run
//!   reopens from its start; an empty pipe is `/dev/null`.
//! - A pipe that stays silent — no byte and no end — for [`SILENCE`] gives `/dev/null`
//!   with a warning when nothing came at all (a harness that leaves stdin open), and is
//!   refused when it went quiet after sending bytes (a `tail -f`): profmap never waits
//!   forever on its stdin.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::plan::{InputPlan, Stdin};

/// The most bytes of a pipe kept for the runs.
pub const MAX_PIPE_BYTES: u64 = 256 << 20;
/// How long a silent pipe is waited for.
pub const SILENCE: Duration = Duration::from_secs(10);

/// The runs' stdin, and what keeps it readable until the session ends.
#[derive(Debug)]
pub struct Resolved {
    pub stdin: Stdin,
    /// The memory file holding a pipe's bytes.
    _keep: Option<OwnedFd>,
    /// For the terminal: what every run reads ("a pipe's 1234 bytes, read once").
    pub describe: String,
    /// A warning for the map, when the input is not what the user may think.
    pub warning: Option<String>,
}

impl Resolved {
    fn plain(stdin: Stdin, describe: String) -> Resolved {
        Resolved {
            stdin,
            _keep: None,
            describe,
            warning: None,
        }
    }
}

/// Decide what every run reads on its stdin.
pub fn resolve(input: &InputPlan) -> Result<Resolved, Error> {
    match input {
        InputPlan::File(p) => from_file(p),
        InputPlan::Interactive => {
            // SAFETY: plain call on fd 0.
            if unsafe { libc::isatty(0) } != 1 {
                return Err(Error::Usage(
                    "--interactive needs a terminal on profmap's standard input".into(),
                ));
            }
            Ok(Resolved::plain(Stdin::Terminal, "the terminal".into()))
        }
        InputPlan::Inherit => inherited(),
    }
}

/// `--input FILE`.
fn from_file(p: &PathBuf) -> Result<Resolved, Error> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(p)
        .map_err(|e| Error::Usage(format!("--input '{}': {e}", p.display())))?;
    let ft = meta.file_type();
    if !(ft.is_file() || ft.is_char_device()) {
        return Err(Error::Usage(format!(
            "--input '{}' is not a regular file (a FIFO, socket or folder cannot give every \
             run the same bytes) — save its content to a file and give that",
            p.display()
        )));
    }
    // Readable now, not at the first run.
    std::fs::File::open(p).map_err(|e| Error::Usage(format!("--input '{}': {e}", p.display())))?;
    Ok(Resolved::plain(
        Stdin::File(p.clone()),
        format!("'{}' ({} bytes), from its start", p.display(), meta.len()),
    ))
}

/// profmap's own stdin.
fn inherited() -> Result<Resolved, Error> {
    // SAFETY: fstat fills a zeroed struct; fd 0 may be closed (then it fails).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(0, &mut st) } != 0 {
        return Ok(Resolved::plain(
            Stdin::Null,
            "/dev/null (stdin closed)".into(),
        ));
    }
    let proc_fd0 = || Stdin::File(PathBuf::from("/proc/self/fd/0"));
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(Resolved::plain(
            proc_fd0(),
            format!(
                "standard input, a file ({} bytes), from its start",
                st.st_size
            ),
        )),
        libc::S_IFIFO | libc::S_IFSOCK => from_pipe(),
        libc::S_IFCHR => {
            // SAFETY: plain call on fd 0.
            let tty = unsafe { libc::isatty(0) } == 1;
            let null = std::fs::metadata("/dev/null")
                .is_ok_and(|m| std::os::unix::fs::MetadataExt::rdev(&m) == st.st_rdev);
            if tty || null {
                let why = if tty {
                    "the terminal is not passed on; --interactive does"
                } else {
                    ""
                };
                Ok(Resolved::plain(
                    Stdin::Null,
                    format!("/dev/null{}", paren(why)),
                ))
            } else {
                Ok(Resolved::plain(
                    proc_fd0(),
                    "standard input, a device".into(),
                ))
            }
        }
        _ => Ok(Resolved::plain(Stdin::Null, "/dev/null".into())),
    }
}

fn paren(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" ({s})")
    }
}

/// Read a pipe on fd 0 once into a memory file every run reopens.
fn from_pipe() -> Result<Resolved, Error> {
    let name = c"profmap-stdin";
    // SAFETY: valid C string; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::Tool(format!(
            "cannot keep standard input for the runs (memfd_create: {}) — pass --input FILE",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: memfd_create returned a fresh descriptor we own.
    let keep = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut mem = File::from(keep.try_clone().map_err(|e| Error::Tool(e.to_string()))?);
    let n = copy_pipe(&mut mem)?;
    let Some(n) = n else {
        return Ok(Resolved {
            stdin: Stdin::Null,
            _keep: None,
            describe: "/dev/null (standard input, a pipe, sent nothing)".into(),
            warning: Some(format!(
                "standard input is a pipe that sent nothing and did not end within {} s: \
                 the runs read /dev/null instead (give the input with --input FILE, or close \
                 the pipe when it is done)",
                SILENCE.as_secs()
            )),
        });
    };
    if n == 0 {
        // An empty pipe is an empty input, as /dev/null is (nothing to say about it).
        return Ok(Resolved::plain(
            Stdin::Null,
            "/dev/null (an empty pipe)".into(),
        ));
    }
    Ok(Resolved {
        stdin: Stdin::File(PathBuf::from(format!("/proc/self/fd/{}", keep.as_raw_fd()))),
        _keep: Some(keep),
        describe: format!("standard input, a pipe ({n} bytes read once, the same for every run)"),
        warning: None,
    })
}

/// Copy fd 0 into `mem` until its end. None when it stayed silent from the start.
fn copy_pipe(mem: &mut File) -> Result<Option<u64>, Error> {
    use std::io::Write;
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    let mut last = Instant::now();
    // fd 0 is not ours to close: read it through a borrowed File.
    // SAFETY: ManuallyDrop keeps fd 0 open when the File goes.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    loop {
        let mut pfd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, 500) };
        if r < 0 {
            continue; // EINTR
        }
        if r == 0 {
            if last.elapsed() < SILENCE {
                continue;
            }
            if total == 0 {
                return Ok(None);
            }
            return Err(Error::Usage(format!(
                "standard input (a pipe) sent {total} bytes, then nothing for {} s without \
                 ending: every run must get the same bytes — end the input, or save it to a \
                 file and pass --input FILE",
                SILENCE.as_secs()
            )));
        }
        let n = match stdin.read(&mut buf) {
            Ok(0) => return Ok(Some(total)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(Error::Tool(format!("reading standard input: {e}"))),
        };
        total += n as u64;
        if total > MAX_PIPE_BYTES {
            return Err(Error::Usage(format!(
                "standard input (a pipe) carries more than {} MiB: every run must get the same \
                 bytes, and profmap keeps at most that much — save it to a file and pass \
                 --input FILE",
                MAX_PIPE_BYTES >> 20
            )));
        }
        mem.write_all(&buf[..n])
            .map_err(|e| Error::Tool(format!("keeping standard input: {e}")))?;
        last = Instant::now();
    }
}
