//! The recording's blocked calls (`SampledProfile::waits`) held bit-packed
//! (`crate::packed`): a few bytes each instead of the 24 of a `WaitOn` in a `Vec`,
//! read back by value. A busy program blocks in a syscall at most of its off-CPU
//! samples, so this table is about as long as the samples.
//!
//! The columns: the sample's index (ascending, so a block's indices differ by little),
//! the descriptor (zigzag + 1, 0 for none), the raw first argument, the resource
//! (`index + 1`, 0 for none). JSON sees a list of `WaitOn`, as before.
//!
//! Invariants: the rows are the pushed `WaitOn`s, in the order pushed.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{OptIndex, WaitOn};
use crate::packed::Packed;

/// Blocked calls, in the order pushed (by sample index, ascending, in a profile).
#[derive(Debug, Clone, Default)]
pub struct Waits {
    rows: Packed<4>,
}

impl PartialEq for Waits {
    fn eq(&self, other: &Waits) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Waits {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Append `w`.
    pub fn push(&mut self, w: WaitOn) {
        let fd = w.fd.map_or(0, |fd| zigzag(fd) + 1);
        let resource = w.resource.get().map_or(0, |r| u64::from(r) + 1);
        self.rows.push([u64::from(w.sample), fd, w.arg0, resource]);
    }

    /// Wait `k`; `None` past the end.
    pub fn get(&self, k: usize) -> Option<WaitOn> {
        self.rows.get(k).map(wait)
    }

    /// Every wait, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = WaitOn> + ExactSizeIterator + Clone + '_ {
        self.rows.iter().map(wait)
    }

    /// Every wait, as a list.
    pub fn to_vec(&self) -> Vec<WaitOn> {
        self.iter().collect()
    }

    /// Each wait `f` maps to one, in order; those it maps to `None` are left out.
    pub fn filter_map(&self, f: impl FnMut(WaitOn) -> Option<WaitOn>) -> Waits {
        self.iter().filter_map(f).collect()
    }

    /// In place, each wait replaced by the one `f` maps it to, or left out for `None`;
    /// the old rows are freed as they are read.
    pub fn retain_map(&mut self, mut f: impl FnMut(WaitOn) -> Option<WaitOn>) {
        let old = std::mem::take(&mut self.rows);
        for r in old.into_rows() {
            if let Some(w) = f(wait(r)) {
                self.push(w);
            }
        }
        self.shrink_to_fit();
    }

    /// Keep the waits `keep` says to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&WaitOn) -> bool) {
        self.retain_map(|w| keep(&w).then_some(w));
    }

    /// Give back the memory kept spare for growth.
    pub fn shrink_to_fit(&mut self) {
        self.rows.shrink_to_fit();
    }
}

/// The wait of a packed row.
fn wait([sample, fd, arg0, resource]: [u64; 4]) -> WaitOn {
    WaitOn {
        sample: sample as u32,
        fd: fd.checked_sub(1).map(unzigzag),
        arg0,
        resource: OptIndex::new(resource.checked_sub(1).map(|r| r as u32)),
    }
}

fn zigzag(fd: i32) -> u64 {
    u64::from(((fd << 1) ^ (fd >> 31)) as u32)
}

fn unzigzag(z: u64) -> i32 {
    let z = z as u32;
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

impl From<Vec<WaitOn>> for Waits {
    fn from(v: Vec<WaitOn>) -> Waits {
        v.into_iter().collect()
    }
}

impl FromIterator<WaitOn> for Waits {
    fn from_iter<I: IntoIterator<Item = WaitOn>>(it: I) -> Waits {
        let mut out = Waits::default();
        for w in it {
            out.push(w);
        }
        out.shrink_to_fit();
        out
    }
}

impl Serialize for Waits {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Waits {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Waits, D::Error> {
        Ok(Vec::<WaitOn>::deserialize(de)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_come_back_as_pushed_extremes_included() {
        let n = 2 * crate::packed::BLOCK as u32 + 9;
        let w = |i: u32| WaitOn {
            sample: 3 * i,
            fd: match i % 4 {
                0 => None,
                1 => Some(i32::MIN),
                2 => Some(i32::MAX),
                _ => Some(i as i32 - 100),
            },
            arg0: if i.is_multiple_of(5) {
                u64::MAX
            } else {
                u64::from(i)
            },
            resource: OptIndex::new((!i.is_multiple_of(3)).then_some(i)),
        };
        let mut ws: Waits = (0..n).map(w).collect();
        assert_eq!(ws.len(), n as usize);
        assert!(ws.iter().eq((0..n).map(w)));
        assert_eq!(ws.get(300), Some(w(300)));
        assert_eq!(ws.get(n as usize), None);
        let json = serde_json::to_string(&ws).unwrap_or_default();
        let back: Waits = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, ws);
        ws.retain(|x| x.sample.is_multiple_of(2));
        assert!(
            ws.iter()
                .eq((0..n).map(w).filter(|x| x.sample.is_multiple_of(2)))
        );
    }
}
