//! Launching a command suspended, so samplers can attach before its first instruction.
//!
//! `std::process::Command::spawn` returns only after exec, so a `pre_exec` that waits
//! would deadlock. Instead we fork by hand: the child puts itself in its own process
//! group, wires stdin to what the run reads (/dev/null, a file opened afresh, or the
//! terminal it is handed) and stdout/stderr to pipes, then blocks reading a
//! "release" pipe. The parent attaches whatever it needs to the child's pid (perf events
//! with `enable_on_exec`), then writes one byte; the child calls `execvp`. If exec fails
//! the child writes its errno to a close-on-exec "error" pipe, so `release` can tell
//! "exec failed: ENOENT" from "exec happened" (the pipe closes with no data).
//!
//! Between fork and exec the child only makes async-signal-safe calls: every C string
//! is prepared before the fork.
//!
//! The child asks for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`, kept across
//! exec), then checks that the parent is still there: if profmap is killed — even with
//! SIGKILL, before or after the release — the target's main process goes with it
//! instead of running on unprofiled and orphaned. (The signal is tied to the thread
//! that forked: launch from a thread that outlives the run, as the main thread does.)

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::plan::{Stdin, TargetSpec};

/// Open what a run reads on its stdin; None for the terminal (fd 0 is kept).
fn open_stdin(stdin: &Stdin) -> Result<Option<File>, Error> {
    let path = match stdin {
        Stdin::Terminal => return Ok(None),
        Stdin::Null => Path::new("/dev/null"),
        Stdin::File(p) => p.as_path(),
    };
    // O_NONBLOCK only for the open itself: a FIFO put in the file's place since it was
    // checked must not hang the launch (regular files ignore the flag for reads, and
    // it is cleared below for everything else).
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    // SAFETY: plain fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(Some(f))
}

/// Make `pgid` the terminal's foreground process group (`--interactive`), so the target
/// can read the terminal; [`take_back_terminal`] undoes it after the run.
fn hand_terminal_to(pgid: i32) {
    with_sigttou_ignored(|| {
        // SAFETY: plain ioctl on fd 0; fails harmlessly when it is not our terminal.
        unsafe { libc::tcsetpgrp(0, pgid) };
    });
}

/// Give the terminal back to profmap's own process group after an interactive run.
pub fn take_back_terminal() {
    with_sigttou_ignored(|| {
        // SAFETY: plain calls; tcsetpgrp fails harmlessly when fd 0 is no terminal.
        unsafe { libc::tcsetpgrp(0, libc::getpgrp()) };
    });
}

/// A background process group that changes the terminal's foreground group gets
/// SIGTTOU (and is stopped) unless it ignores it.
fn with_sigttou_ignored(f: impl FnOnce()) {
    // SAFETY: the old disposition is restored right after.
    unsafe {
        let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        f();
        libc::signal(libc::SIGTTOU, old);
    }
}

/// A forked child blocked before exec.
#[derive(Debug)]
pub struct Suspended {
    pub pid: i32,
    release_w: OwnedFd,
    error_r: OwnedFd,
    pub stdout: File,
    pub stderr: File,
}

/// A child that has exec'd the target.
#[derive(Debug)]
pub struct Launched {
    pub pid: i32,
    pub stdout: File,
    pub stderr: File,
}

/// Resolve the program like `execvp` would, so that a missing or non-executable
/// command is reported before anything is created.
pub fn resolve_program(program: &OsStr) -> Result<PathBuf, Error> {
    let cannot = |reason: &str| Error::CannotRun {
        name: program.to_string_lossy().into_owned(),
        reason: reason.to_string(),
    };
    if program.is_empty() {
        return Err(cannot("empty command"));
    }
    let check = |p: &Path| -> Result<PathBuf, Error> {
        let meta = std::fs::metadata(p).map_err(|e| cannot(&e.to_string()))?;
        if meta.is_dir() {
            return Err(cannot("is a directory"));
        }
        if !is_executable(p) {
            return Err(cannot(
                "permission denied (the file is not executable; chmod +x it)",
            ));
        }
        Ok(p.to_path_buf())
    };
    if program.as_bytes().contains(&b'/') {
        return check(Path::new(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut first_err = None;
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(program);
        if cand.exists() {
            match check(&cand) {
                Ok(p) => return Ok(p),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
    }
    Err(first_err.unwrap_or_else(|| cannot("command not found in PATH")))
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Bytes of the pipes the target's stdout and stderr go through (the kernel's default
/// is 64 KiB): a program writing fast blocked on a full pipe while profmap logged the
/// last read (`cat` of 36 MB: 1,553 blocked writes, 77% of its run).
pub const OUTPUT_PIPE_BYTES: usize = 1 << 20;

/// Give a pipe [`OUTPUT_PIPE_BYTES`] of room, or what the system allows
/// (`/proc/sys/fs/pipe-max-size` caps it for a user without CAP_SYS_RESOURCE); the
/// default room where neither is granted.
fn widen(fd: &OwnedFd) {
    let mut bytes = OUTPUT_PIPE_BYTES as i32;
    while bytes > 1 << 16 {
        // SAFETY: F_SETPIPE_SZ on a pipe descriptor we own; failure leaves it as it was.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) } >= 0 {
            return;
        }
        bytes /= 2;
    }
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::Tool(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Fork the target, stopped before exec. Call `Suspended::release` to let it run, or
/// drop it to cancel (the child then exits without running the target).
pub fn spawn_suspended(spec: &TargetSpec) -> Result<Suspended, Error> {
    let to_c = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| Error::CannotRun {
            name: spec.program_lossy(),
            reason: "argument contains a NUL byte".into(),
        })
    };
    let argv_c: Vec<CString> = spec
        .argv()
        .iter()
        .map(|s| to_c(s))
        .collect::<Result<_, _>>()?;
    let mut argv_p: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    // The environment, only when the spec changes it (built here: the child may not
    // allocate): profmap's own, with the spec's variables set over it.
    let env_c: Vec<CString> = if spec.env.is_empty() {
        Vec::new()
    } else {
        let own = std::env::vars_os().filter(|(k, _)| !spec.env.iter().any(|(s, _)| s == k));
        own.chain(spec.env.iter().cloned())
            .map(|(k, v)| {
                let mut kv = k;
                kv.push("=");
                kv.push(v);
                to_c(&kv)
            })
            .collect::<Result<_, _>>()?
    };
    let mut env_p: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
    env_p.push(std::ptr::null());
    let envp = (!spec.env.is_empty()).then_some(env_p.as_slice());
    // The run's stdin, opened afresh so it is read from its start (-1: keep the terminal).
    let stdin = open_stdin(&spec.stdin)?;
    let stdin_fd = stdin.as_ref().map_or(-1, |f| f.as_raw_fd());
    let (release_r, release_w) = pipe()?;
    let (error_r, error_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    widen(&out_r);
    widen(&err_r);
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };

    // SAFETY: the child branch only calls async-signal-safe functions on data prepared
    // above, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::Tool(format!(
            "fork: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is valid until exec.
        unsafe {
            child_after_fork(
                parent,
                stdin_fd,
                out_w.as_raw_fd(),
                err_w.as_raw_fd(),
                release_r.as_raw_fd(),
                error_w.as_raw_fd(),
                [
                    release_w.as_raw_fd(),
                    error_r.as_raw_fd(),
                    out_r.as_raw_fd(),
                    err_r.as_raw_fd(),
                ],
                &argv_p,
                envp,
            )
        }
    }
    // Parent. Also set the group from this side, so the group exists before release
    // (whichever of the two setpgid calls runs first wins; both agree).
    // SAFETY: plain syscall on our child's pid.
    unsafe { libc::setpgid(pid, pid) };
    if spec.stdin == Stdin::Terminal {
        hand_terminal_to(pid);
    }
    drop((release_r, error_w, out_w, err_w, stdin));
    Ok(Suspended {
        pid,
        release_w,
        error_r,
        stdout: File::from(out_r),
        stderr: File::from(err_r),
    })
}

/// The child side: never returns. `argv` and `envp` (when given: the whole environment)
/// are NULL-terminated.
#[allow(clippy::too_many_arguments)]
unsafe fn child_after_fork(
    parent: i32,
    stdin_fd: i32,
    out_fd: i32,
    err_fd: i32,
    release_fd: i32,
    error_fd: i32,
    parent_ends: [i32; 4],
    argv: &[*const libc::c_char],
    envp: Option<&[*const libc::c_char]>,
) -> ! {
    // SAFETY: async-signal-safe syscalls only; argv and envp are NULL-terminated.
    unsafe {
        // The parent's ends of our pipes: holding the release pipe's write end would keep
        // our own read from ever seeing EOF when the parent cancels the launch.
        for fd in parent_ends {
            libc::close(fd);
        }
        libc::setpgid(0, 0);
        // Die with profmap; if it is already gone, do not start at all.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(127);
        }
        // Rust ignores SIGPIPE; the target expects the default dispositions and mask.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        if stdin_fd >= 0 {
            libc::dup2(stdin_fd, 0);
        }
        libc::dup2(out_fd, 1);
        libc::dup2(err_fd, 2);
        let mut b = 0u8;
        let n = loop {
            let n = libc::read(release_fd, (&raw mut b).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n != 1 {
            libc::_exit(127);
        }
        match envp {
            Some(envp) => libc::execvpe(argv[0], argv.as_ptr(), envp.as_ptr()),
            None => libc::execvp(argv[0], argv.as_ptr()),
        };
        let errno = *libc::__errno_location();
        let bytes = errno.to_ne_bytes();
        libc::write(error_fd, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127);
    }
}

impl Suspended {
    /// Let the child exec the target. Returns once exec has happened (or failed).
    pub fn release(self, program: &str) -> Result<Launched, Error> {
        let Suspended {
            pid,
            release_w,
            error_r,
            stdout,
            stderr,
        } = self;
        let mut w = File::from(release_w);
        std::io::Write::write_all(&mut w, &[1])
            .map_err(|e| Error::Tool(format!("release: {e}")))?;
        drop(w);
        let mut buf = Vec::new();
        let _ = File::from(error_r).read_to_end(&mut buf);
        if buf.len() >= 4 {
            let errno = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            reap(pid);
            return Err(Error::CannotRun {
                name: program.to_string(),
                reason: std::io::Error::from_raw_os_error(errno).to_string(),
            });
        }
        Ok(Launched {
            pid,
            stdout,
            stderr,
        })
    }
}

/// Reap one child, ignoring its status.
pub fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: plain syscall.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// Make this process the reaper of every orphan its descendants leave, so double-forked
/// processes stay countable and killable.
pub fn become_subreaper() {
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}
