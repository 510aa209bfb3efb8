//! Opening a recording that may be hostile: only a regular file, never through a symbolic
//! link, never blocking, and read through a cap on its (decompressed) size.
//!
//! Invariants:
//! - The file is opened with `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY` and checked with
//!   `fstat` on the open descriptor: a FIFO, a device (`/dev/zero`), a socket or a
//!   planted link is refused before a byte is read, and the open never blocks.
//! - At most [`MAX_JSON_BYTES`] of JSON are read, counted after decompression while
//!   inflating: a gzip bomb is refused after that many bytes, whatever it would inflate
//!   to. Memory is bounded by that text plus the structs parsed from it (a small
//!   multiple). The text is read whole, then parsed: parsing from a stream goes byte by
//!   byte and is many times slower.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use flate2::read::GzDecoder;

/// Most bytes of JSON a recording may hold once decompressed (1 GiB).
pub const MAX_JSON_BYTES: u64 = 1 << 30;

/// Why a recording could not be opened or read.
#[derive(Debug)]
pub enum SourceError {
    /// The file cannot be trusted or read as a recording; the sentence says why.
    Refused(String),
    /// The file could not be opened for a reason of the system (missing, permission).
    Io(io::Error),
}

/// Open `path` as a regular file, refusing links, FIFOs, devices and sockets.
pub fn open_regular(path: &Path) -> Result<File, SourceError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                SourceError::Refused(
                    "it is a symbolic link, which is not followed: give the file it points to"
                        .into(),
                )
            } else {
                SourceError::Io(e)
            }
        })?;
    let kind = file.metadata().map_err(SourceError::Io)?.file_type();
    if !kind.is_file() {
        return Err(SourceError::Refused(format!(
            "not a regular file (a {})",
            describe(kind)
        )));
    }
    Ok(file)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "folder"
    } else if kind.is_fifo() {
        "FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "device"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The JSON text of an opened recording, gunzipped when it starts with the gzip magic;
/// fails with [`io::ErrorKind::FileTooLarge`] past [`MAX_JSON_BYTES`].
pub fn read_json(mut raw: BufReader<File>) -> io::Result<Vec<u8>> {
    let gz = raw.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    if gz {
        read_capped(GzDecoder::new(raw), MAX_JSON_BYTES)
    } else {
        read_capped(raw, MAX_JSON_BYTES)
    }
}

/// Everything `r` yields, failing as soon as it is more than `cap` bytes: the buffer
/// never grows past `cap`, whatever a stream would inflate to.
fn read_capped(mut r: impl Read, cap: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if (out.len() + n) as u64 > cap {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("more than {} MiB of JSON", cap >> 20),
            ));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_reader_fails_past_its_limit() {
        let e = read_capped(io::repeat(b' ').take(10), 4).expect_err("past the cap");
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        let ok = read_capped(io::repeat(b' ').take(4), 4).expect("within");
        assert_eq!(ok.len(), 4);
    }

    #[test]
    fn fifos_devices_and_links_are_refused_without_blocking() {
        let d = tempfile::tempdir().expect("tempdir");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).expect("symlink");
        for p in [fifo.as_path(), Path::new("/dev/zero"), link.as_path()] {
            match open_regular(p) {
                Err(SourceError::Refused(_)) => {}
                other => panic!("{}: {other:?}", p.display()),
            }
        }
    }
}
