//! Function names of Go binaries stripped of their symbol table, from `.gopclntab`.
//!
//! Go's runtime needs the names of its functions for stack traces and panics, so every
//! Go binary keeps them in its own table, `.gopclntab`, which `strip` and
//! `go build -ldflags=-s` leave in place (Debian's `go` command has no `.symtab` and no
//! `.eh_frame`: without this its frames were `go+0x418e`, one per instruction). Only the
//! layout of Go 1.18 and later is read (magics `0xfffffff0`, `0xfffffff1`):
//!
//! - a header: magic (u32), two zero bytes, the instruction size quantum, the pointer
//!   size, then eight pointer-sized words: the number of functions, of files, the text
//!   start address, and the offsets (from the table's start) of the function names, the
//!   compilation units, the file table, the pc tables and the function table;
//! - the function table: `nfunc + 1` pairs of u32 (entry, offset of the function's
//!   record), entries relative to the text start and ascending, the last one the end of
//!   the last function;
//! - a function's record starts with its entry (u32) and its name's offset (i32) into
//!   the names, NUL-terminated.
//!
//! The table comes from the profiled binary, which may be hostile: every read is bounds
//! checked, counts are capped by the table's size, and a record that disagrees with its
//! entry ends the walk with what was read before it.

/// Longest function name read; longer ones are cut there.
const MAX_NAME: usize = 4096;

/// `(start, end, name)` of each function, as virtual addresses, ascending; empty when
/// `data` is not a Go 1.18+ table.
pub fn functions(data: &[u8], little_endian: bool) -> Vec<(u64, u64, String)> {
    let r = Reader {
        data,
        little_endian,
    };
    let Some(magic) = r.u32(0) else {
        return Vec::new();
    };
    if !matches!(magic, 0xffff_fff0 | 0xffff_fff1) || r.byte(4) != Some(0) || r.byte(5) != Some(0) {
        return Vec::new();
    }
    let Some(ptr) = r.byte(7).filter(|p| matches!(p, 4 | 8)).map(usize::from) else {
        return Vec::new();
    };
    let word = |i: usize| r.word(8 + i * ptr, ptr);
    let (Some(nfunc), Some(text), Some(names), Some(table)) = (word(0), word(2), word(3), word(7))
    else {
        return Vec::new();
    };
    let (Ok(names), Ok(table)) = (usize::try_from(names), usize::try_from(table)) else {
        return Vec::new();
    };
    // Each function takes 8 bytes of the table: a count beyond that is a lie.
    let nfunc = usize::try_from(nfunc)
        .unwrap_or(usize::MAX)
        .min(data.len() / 8);
    let mut out = Vec::with_capacity(nfunc);
    for i in 0..nfunc {
        let pair = |k: usize| {
            let at = table.checked_add(k.checked_mul(8)?)?;
            Some((r.u32(at)?, r.u32(at.checked_add(4)?)?))
        };
        let (Some((entry, record)), Some((next, _))) = (pair(i), pair(i + 1)) else {
            break;
        };
        let Some(at) = table.checked_add(record as usize) else {
            break;
        };
        // The record repeats the entry: a mismatch means we misread the table.
        if r.u32(at) != Some(entry) || next < entry {
            break;
        }
        let Some(name_off) = at.checked_add(4).and_then(|a| r.u32(a)) else {
            break;
        };
        let Some(name) = names
            .checked_add(name_off as i32 as isize as usize)
            .and_then(|a| r.cstr(a))
        else {
            break;
        };
        let start = text.saturating_add(u64::from(entry));
        let end = text.saturating_add(u64::from(next));
        if end > start {
            out.push((start, end, name));
        }
    }
    out
}

/// Bounds-checked reads of the table.
struct Reader<'a> {
    data: &'a [u8],
    little_endian: bool,
}

impl Reader<'_> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.data.get(at).copied()
    }

    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.data.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.bytes::<4>(at)?;
        Some(if self.little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn word(&self, at: usize, size: usize) -> Option<u64> {
        if size == 4 {
            return self.u32(at).map(u64::from);
        }
        let b = self.bytes::<8>(at)?;
        Some(if self.little_endian {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }

    fn cstr(&self, at: usize) -> Option<String> {
        let rest = self.data.get(at..)?;
        let rest = &rest[..rest.len().min(MAX_NAME)];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        (end > 0).then(|| String::from_utf8_lossy(&rest[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Go 1.18-layout table (8-byte pointers) of `funcs` (entry offset from the text
    /// start at 0x401000, name), the last ending at `end`.
    fn table(funcs: &[(u32, &str)], end: u32) -> Vec<u8> {
        let header = 8 + 8 * 8;
        let mut names = Vec::new();
        let mut name_offs = Vec::new();
        for (_, n) in funcs {
            name_offs.push(names.len() as u32);
            names.extend_from_slice(n.as_bytes());
            names.push(0);
        }
        let names_at = header;
        let table_at = names_at + names.len();
        let records_at = (funcs.len() + 1) * 8;
        let mut t = Vec::new();
        t.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
        t.extend_from_slice(&[0, 0, 1, 8]);
        let words = [
            funcs.len() as u64,
            0,
            0x401000,
            names_at as u64,
            0,
            0,
            0,
            table_at as u64,
        ];
        for w in words {
            t.extend_from_slice(&w.to_le_bytes());
        }
        t.extend_from_slice(&names);
        for (i, (entry, _)) in funcs.iter().enumerate() {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&((records_at + i * 8) as u32).to_le_bytes());
        }
        t.extend_from_slice(&end.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        for ((entry, _), off) in funcs.iter().zip(&name_offs) {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&off.to_le_bytes());
        }
        t
    }

    #[test]
    fn functions_are_read_with_their_ranges_and_names() {
        let t = table(&[(0, "runtime.notesleep"), (0x40, "main.spin")], 0x90);
        assert_eq!(
            functions(&t, true),
            vec![
                (0x401000, 0x401040, "runtime.notesleep".to_string()),
                (0x401040, 0x401090, "main.spin".to_string()),
            ]
        );
    }

    #[test]
    fn a_lying_or_cut_table_gives_what_it_holds_and_never_panics() {
        let t = table(&[(0, "a"), (0x40, "b")], 0x90);
        // Every prefix: no panic, at most the two functions.
        for n in 0..t.len() {
            assert!(functions(&t[..n], true).len() <= 2);
        }
        // A huge function count is capped by the table's size.
        let mut big = t.clone();
        big[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(functions(&big, true).len() <= 2);
        // Offsets past the end read nothing.
        let mut far = t.clone();
        far[8 + 7 * 8..8 + 8 * 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert!(functions(&far, true).is_empty());
        // Not a Go 1.18+ table.
        let mut old = t;
        old[..4].copy_from_slice(&0xffff_fffau32.to_le_bytes());
        assert!(functions(&old, true).is_empty());
    }
}
