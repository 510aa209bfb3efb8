//! Page-cache reads per (process, file), from `filemap:mm_filemap_get_pages`. A pure
//! state machine: events in time order in, [`FileReads`] rows out.
//!
//! # What one event means
//!
//! `filemap_read` (read, pread, readv, splice and sendfile from a file) calls
//! `filemap_get_pages` once per batch of folios, each time with `index` = the page at
//! the current position and `last_index` = the last page the *whole call* asked for.
//! Summing `last_index - index + 1` over events would count a 1 MiB read's pages
//! many times over, so consecutive events of one thread with the same `last_index` and
//! a growing `index` are one call: the earlier batches delivered `index - previous
//! index` pages, the last one up to `last_index`. The request may run past the end of
//! the file (a read of `size + 1` bytes to see EOF): when the file's size is known
//! (looked up at first sight), pages and extent are capped at it.
//!
//! Files on tmpfs/shmem do not go through `filemap_read` and have no events; files
//! read through mmap fault in pages without it either.

use std::collections::HashMap;

use crate::profile::FileReads;

/// One `mm_filemap_get_pages` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PagesAsked {
    pub pid: i32,
    pub tid: i32,
    /// The superblock's device, kernel encoding (major << 20 | minor).
    pub dev: u32,
    pub ino: u64,
    pub index: u64,
    pub last_index: u64,
}

#[derive(Debug, Clone, Copy)]
struct Cursor {
    tid: i32,
    index: u64,
    last: u64,
}

#[derive(Debug)]
struct Row {
    r: FileReads,
    /// Pages in the file when first looked up.
    size_pages: Option<u64>,
    max_last: u64,
    cur: Option<Cursor>,
}

/// The per-run page-cache read state.
#[derive(Debug, Default)]
pub(crate) struct FileIo {
    rows: Vec<Row>,
    ids: HashMap<(i32, u32, u64), usize>,
}

impl FileIo {
    /// Count an event; returns the row and whether it is new (look its path up).
    pub(crate) fn asked(&mut self, e: PagesAsked) -> (usize, bool) {
        let key = (e.pid, e.dev, e.ino);
        let (i, new) = match self.ids.get(&key) {
            Some(&i) => (i, false),
            None => {
                let i = self.rows.len();
                self.rows.push(Row {
                    r: FileReads {
                        pid: e.pid,
                        path: None,
                        dev: e.dev,
                        ino: e.ino,
                        calls: 0,
                        pages_read: 0,
                        extent_pages: 0,
                    },
                    size_pages: None,
                    max_last: 0,
                    cur: None,
                });
                self.ids.insert(key, i);
                (i, true)
            }
        };
        let row = &mut self.rows[i];
        let last = e.last_index.max(e.index);
        match row.cur {
            Some(c) if c.tid == e.tid && c.last == last && e.index > c.index => {
                row.r.pages_read += e.index - c.index;
                row.cur = Some(Cursor {
                    index: e.index,
                    ..c
                });
            }
            _ => {
                row.close();
                row.r.calls += 1;
                row.cur = Some(Cursor {
                    tid: e.tid,
                    index: e.index,
                    last,
                });
            }
        }
        row.max_last = row.max_last.max(last);
        (i, new)
    }

    /// The (pid, dev, ino) of a row.
    pub(crate) fn key(&self, row: usize) -> Option<(i32, u32, u64)> {
        self.rows.get(row).map(|r| (r.r.pid, r.r.dev, r.r.ino))
    }

    /// What the look-up at first sight found: the path and the file's size in bytes.
    pub(crate) fn set_file(&mut self, row: usize, path: Option<String>, size: Option<u64>) {
        if let Some(r) = self.rows.get_mut(row) {
            r.r.path = path;
            r.size_pages = size.map(|s| s.div_ceil(4096));
        }
    }

    pub(crate) fn finish(self) -> Vec<FileReads> {
        self.rows
            .into_iter()
            .map(|mut row| {
                row.close();
                let extent = row.max_last + 1;
                row.r.extent_pages = row.size_pages.map_or(extent, |s| extent.min(s));
                row.r
            })
            .collect()
    }
}

impl Row {
    /// The open call's last batch: from its index to its last page, within the file.
    fn close(&mut self) {
        let Some(c) = self.cur.take() else { return };
        let last = match self.size_pages {
            Some(0) => return,
            Some(s) => c.last.min(s - 1),
            None => c.last,
        };
        if last >= c.index {
            self.r.pages_read += last - c.index + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(tid: i32, ino: u64, index: u64, last_index: u64) -> PagesAsked {
        PagesAsked {
            pid: 1,
            tid,
            dev: 8,
            ino,
            index,
            last_index,
        }
    }

    #[test]
    fn one_read_in_batches_counts_its_pages_once() {
        let mut f = FileIo::default();
        // A 256-page read delivered in batches at 0, 31, 62 … (all asking up to 255).
        let (row, new) = f.asked(ev(5, 7, 0, 255));
        assert!(new);
        for i in (31..256).step_by(31) {
            assert_eq!(f.asked(ev(5, 7, i, 255)), (row, false));
        }
        let r = &f.finish()[0];
        assert_eq!((r.calls, r.pages_read, r.extent_pages), (1, 256, 256));
    }

    #[test]
    fn three_whole_file_reads_past_eof_are_capped_at_the_size() {
        let mut f = FileIo::default();
        let (row, _) = f.asked(ev(5, 7, 0, 100));
        f.set_file(row, Some("/data".into()), Some(100 * 4096));
        f.asked(ev(5, 7, 40, 100));
        f.asked(ev(5, 7, 100, 101)); // the read that sees EOF
        for _ in 0..2 {
            f.asked(ev(5, 7, 0, 100));
            f.asked(ev(5, 7, 100, 101));
        }
        let r = &f.finish()[0];
        assert_eq!(r.path.as_deref(), Some("/data"));
        assert_eq!((r.calls, r.pages_read, r.extent_pages), (6, 300, 100));
    }

    #[test]
    fn small_reads_and_other_threads_are_separate_calls() {
        let mut f = FileIo::default();
        for i in 0..10 {
            f.asked(ev(5, 7, i, i));
        }
        f.asked(ev(6, 7, 0, 3));
        f.asked(ev(5, 8, 0, 0));
        let rows = f.finish();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].calls, rows[0].pages_read), (11, 14));
        assert_eq!(rows[0].extent_pages, 10);
        assert_eq!(rows[1].ino, 8);
    }
}
