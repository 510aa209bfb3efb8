//! Where full blocks of packed rows go once the blocks held in memory, by every list
//! of the process together, pass a budget: one unnamed temporary file. A block is
//! appended once and never changed (a changed block is appended again, and the old
//! one's disk space given back); it is read back with `pread` through a small cache
//! per thread. This keeps memory flat on long recordings: beyond the budget, a block
//! costs its place in the file (16 bytes) instead of its rows.
//!
//! The budget is `PROFMAP_SAMPLE_MEMORY_MB` (default [`DEFAULT_BUDGET_MB`]; 0 sends every
//! full block to the file). The file is made in `PROFMAP_SPILL_DIR`, else /var/tmp (a
//! disk where /tmp may be memory), else the temporary directory: with `O_TMPFILE` it has
//! no name to plant a link on; without it, a fresh name made with `O_EXCL|O_NOFOLLOW` and
//! unlinked at once. When no file can be made, or a write fails, blocks stay in memory.

use std::any::Any;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The budget, in MiB, when `PROFMAP_SAMPLE_MEMORY_MB` does not say.
pub const DEFAULT_BUDGET_MB: usize = 64;

/// Bytes of blocks held in memory now, every list together.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// The spill file, made on first use; `None` when it could not be made.
static STORE: OnceLock<Option<Store>> = OnceLock::new();

#[derive(Debug)]
struct Store {
    file: File,
    /// Where the next block goes.
    end: AtomicU64,
}

/// The budget in bytes.
fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let mb = std::env::var("PROFMAP_SAMPLE_MEMORY_MB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(DEFAULT_BUDGET_MB);
        mb.saturating_mul(1 << 20)
    })
}

/// Bytes of blocks held in memory now, every list together.
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Whether `bytes` more would pass the budget.
pub(super) fn over_budget(bytes: usize) -> bool {
    held().saturating_add(bytes) > budget()
}

/// Count `bytes` more as held in memory.
pub(super) fn hold(bytes: usize) {
    HELD.fetch_add(bytes, Ordering::Relaxed);
}

/// Count `bytes` as no longer held.
pub(super) fn release(bytes: usize) {
    // Never below 0, whatever the order of holds and releases across threads.
    let _ = HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
        Some(h.saturating_sub(bytes))
    });
}

/// A block's place in the spill file; its disk space is given back when the last
/// holder drops it.
#[derive(Debug)]
pub(super) struct Extent {
    off: u64,
    len: u64,
}

impl Drop for Extent {
    fn drop(&mut self) {
        if let Some(Some(s)) = STORE.get() {
            // Give the disk space back; the offset is never used again.
            let (off, len) = (self.off as libc::off_t, self.len as libc::off_t);
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: fallocate on a descriptor this process owns; no memory is passed.
            unsafe { libc::fallocate(s.file.as_raw_fd(), mode, off, len) };
        }
    }
}

/// The directories to try for the file, in order.
fn dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = std::env::var_os("PROFMAP_SPILL_DIR") {
        v.push(PathBuf::from(d));
    }
    v.push(PathBuf::from("/var/tmp"));
    v.push(std::env::temp_dir());
    v
}

/// An unnamed file in `dir`, read-write, for this process only.
fn open_in(dir: &Path) -> std::io::Result<File> {
    let tmpfile = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir);
    if tmpfile.is_ok() {
        return tmpfile;
    }
    // No O_TMPFILE on this file system: a fresh name, never an existing file or link,
    // unlinked at once.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!(".profmap-spill-{}-{nanos}", std::process::id()));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

fn store() -> Option<&'static Store> {
    STORE
        .get_or_init(|| {
            let dirs = dirs();
            let made = dirs.iter().find_map(|d| open_in(d).ok());
            if made.is_none() {
                eprintln!(
                    "profmap: warning: no spill file could be made (tried {}): holding every \
                     sample in memory; set PROFMAP_SPILL_DIR to a writable directory",
                    dirs.iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            made.map(|file| Store {
                file,
                end: AtomicU64::new(0),
            })
        })
        .as_ref()
}

/// Append `bytes` to the file; `None` when there is no file or the write failed.
pub(super) fn write(bytes: &[u8]) -> Option<Arc<Extent>> {
    let s = store()?;
    let len = bytes.len() as u64;
    let off = s.end.fetch_add(len, Ordering::Relaxed);
    match s.file.write_all_at(bytes, off) {
        Ok(()) => Some(Arc::new(Extent { off, len })),
        Err(_) => None,
    }
}

/// The bytes at `e`; empty when they cannot be read.
pub(super) fn read(e: &Extent) -> Vec<u8> {
    let mut buf = Vec::new();
    read_into(e, &mut buf);
    buf
}

/// The bytes at `e` into `buf` (its allocation reused); empty when they cannot be read.
pub(super) fn read_into(e: &Extent, buf: &mut Vec<u8>) {
    buf.resize(e.len as usize, 0);
    let ok = store().is_some_and(|s| s.file.read_exact_at(buf, e.off).is_ok());
    if !ok {
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| {
            eprintln!(
                "profmap: warning: a block of samples could not be read back from the spill file"
            )
        });
        buf.clear();
    }
}

/// Cache entries per thread: sets of [`WAYS`] blocks, a block's set chosen by its
/// offset; a set drops its oldest block for a new one.
pub(super) const SLOTS: usize = 2048;
const WAYS: usize = 4;

/// A thread's cache: the offsets of the blocks in each way (`u64::MAX`: none), and
/// the values decoded from them.
struct Cache {
    offs: Vec<u64>,
    values: Vec<Option<Rc<dyn Any>>>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache {
        offs: vec![u64::MAX; SLOTS],
        values: vec![None; SLOTS],
    });
}

/// `f` of the value `decode` makes of the bytes at `e`, through this thread's cache
/// (a block is never changed once written, so a cached one is never stale).
pub(super) fn with<T: Any, R>(
    e: &Extent,
    decode: impl Fn(&[u8]) -> T,
    f: impl FnOnce(&T) -> R,
) -> R {
    let set = (e.off.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % (SLOTS / WAYS);
    let ways = set * WAYS..set * WAYS + WAYS;
    CACHE.with(|c| {
        {
            let c = c.borrow();
            let (offs, values) = (&c.offs[ways.clone()], &c.values[ways.clone()]);
            if let Some(w) = offs.iter().position(|&o| o == e.off)
                && let Some(t) = values[w].as_ref().and_then(|v| v.downcast_ref::<T>())
            {
                // `f` reads the block; it never comes back here.
                return f(t);
            }
        }
        let v = Rc::new(decode(&read(e)));
        let r = f(&v);
        let c = &mut *c.borrow_mut();
        c.offs[ways.clone()].rotate_right(1);
        c.values[ways.clone()].rotate_right(1);
        c.offs[ways.start] = e.off;
        c.values[ways.start] = Some(v);
        r
    })
}
