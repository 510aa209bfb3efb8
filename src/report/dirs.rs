//! Waits on files summed by directory, for runs that wait on many files a little each
//! (`find | xargs grep` over a source tree: hundreds of rows of a few ms, none of
//! which says where the time went).
//!
//! A directory is listed when it holds at least [`MIN_SHARE_PCT`] of the file waits
//! and is where they spread out: no one of its subdirectories holds
//! [`SINGLE_CHILD_PCT`] of its waits (else that subdirectory says the same, more
//! precisely). The weight is critical-path time where the run has a critical path,
//! else blocked (thread) time. Only absolute paths count: a descriptor's link text is
//! no file.

use std::collections::BTreeMap;

use crate::analyse::resources::ResourceUse;
use crate::profile::ResourceKind;

/// Share of the file waits a directory must hold to be listed, percent.
pub const MIN_SHARE_PCT: f64 = 10.0;
/// A directory whose one subdirectory holds this share of its waits is not listed.
pub const SINGLE_CHILD_PCT: f64 = 90.0;
/// Files the run must have waited on for the directories to be worth a table.
pub const MIN_FILES: usize = 10;
/// Directories listed at most.
const MAX_ROWS: usize = 8;

/// The waits on the files under one directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirWaits {
    /// `/usr/share/doc/`; `all files` for the total row.
    pub path: String,
    /// Rows of the resource table under it (files and directories waited on).
    pub files: u64,
    pub intervals: u64,
    pub blocked_ms: f64,
    /// None where the run has no critical path.
    pub critical_ms: Option<f64>,
}

impl DirWaits {
    fn add(&mut self, u: &ResourceUse) {
        self.files += 1;
        self.intervals += u.intervals;
        self.blocked_ms += u.blocked_ms;
        if let Some(c) = u.critical_ms {
            *self.critical_ms.get_or_insert(0.0) += c;
        }
    }

    fn weight(&self, critical: bool) -> f64 {
        if critical {
            self.critical_ms.unwrap_or(0.0)
        } else {
            self.blocked_ms
        }
    }
}

/// The total of the file waits first, then the directories they spread out from,
/// heaviest first; empty when fewer than [`MIN_FILES`] files were waited on.
pub fn by_directory(rs: &[ResourceUse]) -> Vec<DirWaits> {
    let files: Vec<&ResourceUse> = rs
        .iter()
        .filter(|u| u.kind == ResourceKind::File && u.name.starts_with('/'))
        .collect();
    if files.len() < MIN_FILES {
        return Vec::new();
    }
    let critical = files.iter().any(|u| u.critical_ms.is_some());
    let mut total = DirWaits {
        path: "all files".into(),
        ..DirWaits::default()
    };
    let mut dirs: BTreeMap<&str, DirWaits> = BTreeMap::new();
    for u in &files {
        total.add(u);
        for dir in ancestors(&u.name) {
            dirs.entry(dir).or_default().add(u);
        }
    }
    let all = total.weight(critical);
    if all <= 0.0 {
        return Vec::new();
    }
    // The heaviest subdirectory of each directory.
    let mut heaviest: BTreeMap<&str, f64> = BTreeMap::new();
    for (dir, w) in &dirs {
        if let Some(parent) = parent(dir) {
            let h = heaviest.entry(parent).or_default();
            *h = h.max(w.weight(critical));
        }
    }
    let mut out: Vec<DirWaits> = dirs
        .iter()
        .filter(|(dir, w)| {
            let own = w.weight(critical);
            let child = heaviest.get(*dir).copied().unwrap_or(0.0);
            own * 100.0 >= MIN_SHARE_PCT * all && child * 100.0 < SINGLE_CHILD_PCT * own
        })
        .map(|(dir, w)| DirWaits {
            path: format!("{dir}/"),
            ..w.clone()
        })
        .collect();
    out.sort_by(|a, b| {
        b.weight(critical)
            .total_cmp(&a.weight(critical))
            .then(a.path.cmp(&b.path))
    });
    out.truncate(MAX_ROWS);
    out.insert(0, total);
    out
}

/// The table's header.
pub const HEADER: [&str; 5] = [
    "directory",
    "files",
    "blocked calls",
    "blocked ms",
    "critical ms",
];

/// [`by_directory`] as table rows under [`HEADER`] (figures as text, "—" unknown).
pub fn rows(rs: &[ResourceUse]) -> Vec<Vec<String>> {
    by_directory(rs)
        .iter()
        .map(|d| {
            vec![
                d.path.clone(),
                d.files.to_string(),
                d.intervals.to_string(),
                format!("{:.1}", d.blocked_ms),
                d.critical_ms.map_or("—".to_string(), |v| format!("{v:.1}")),
            ]
        })
        .collect()
}

/// The directories above a path, deepest first, without the root: `/a/b/c` gives
/// `/a/b`, `/a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(parent(path), |d| parent(d))
}

/// The directory holding a path; None for the root and for a path right under it.
fn parent(path: &str) -> Option<&str> {
    let i = path.trim_end_matches('/').rfind('/')?;
    (i > 0).then(|| &path[..i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyse::resources::ResourceRole;

    fn file(name: &str, critical_ms: f64) -> ResourceUse {
        ResourceUse {
            blocked_ms: critical_ms * 2.0,
            critical_ms: Some(critical_ms),
            ..ResourceUse::example(ResourceKind::File, name, ResourceRole::File)
        }
    }

    #[test]
    fn waits_spread_over_two_trees_are_summed_where_they_branch() {
        let mut rs = Vec::new();
        for i in 0..12 {
            rs.push(file(&format!("/usr/share/doc/pkg{i}/copyright"), 5.0));
        }
        for i in 0..8 {
            rs.push(file(&format!("/usr/include/x/h{i}.h"), 5.0));
        }
        rs.push(file("pipe:[12]", 500.0));
        let got = by_directory(&rs);
        let paths: Vec<&str> = got.iter().map(|d| d.path.as_str()).collect();
        // /usr/share holds no more than /usr/share/doc, /usr/include no more than
        // /usr/include/x, and no one package directory holds 10%.
        assert_eq!(
            paths,
            vec!["all files", "/usr/", "/usr/share/doc/", "/usr/include/x/"]
        );
        assert_eq!(got[0].files, 20);
        assert_eq!(got[0].critical_ms, Some(100.0));
        assert_eq!((got[2].files, got[2].intervals), (12, 24));
        assert_eq!(got[2].blocked_ms, 120.0);
    }

    #[test]
    fn a_few_files_or_relative_names_make_no_table() {
        let rs: Vec<_> = (0..9).map(|i| file(&format!("/d/f{i}"), 1.0)).collect();
        assert!(by_directory(&rs).is_empty());
        let rs: Vec<_> = (0..20).map(|i| file(&format!("f{i}"), 1.0)).collect();
        assert!(by_directory(&rs).is_empty());
        assert_eq!(parent("/a"), None);
        assert_eq!(parent("/a/b/"), Some("/a"));
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), vec!["/a/b", "/a"]);
    }
}
