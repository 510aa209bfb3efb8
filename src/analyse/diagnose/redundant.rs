//! redundant_work: the same file read more than once. Confirmed for a file of at least
//! [`MIN_EXTENT_PAGES`] pages whose page-cache reads asked for at least
//! [`MIN_PASSES`] × its extent, when the reads were not sub-page ones (those are
//! data_flow's: fewer than 4 calls per page).

use super::facts::Facts;
use super::types::{Finding, RuleOutput, SuspicionCategory as C, SuspicionVerdict as V};

pub const MIN_EXTENT_PAGES: u64 = 8;
pub const MIN_PASSES: u64 = 2;

const NOTE: &str = "redundant_work: pages asked for per file against the file's extent \
                    (filemap:mm_filemap_get_pages); confirmed at ≥ 2 passes over ≥ 8 pages";

pub fn check(f: &Facts) -> RuleOutput {
    let mut out = RuleOutput::default();
    if !f.file_reads_recorded {
        out.warnings.push(
            "redundant_work not checked: page-cache reads per file were not recorded \
                 (profmap run/record --file-reads records them; they cost ~1.6 µs per read)"
                .into(),
        );
        return out;
    }
    let mut most: Option<(f64, &str)> = None;
    for r in &f.file_reads {
        if r.extent_pages < MIN_EXTENT_PAGES {
            continue;
        }
        let passes = r.pages_read as f64 / r.extent_pages as f64;
        if most.is_none_or(|(m, _)| passes > m) {
            most = Some((passes, &r.path));
        }
        let small = r.calls >= 4 * r.extent_pages;
        if r.pages_read >= MIN_PASSES * r.extent_pages && !small {
            out.findings.push(
                Finding::new(
                    C::RedundantWork,
                    V::Confirmed,
                    r.path.clone(),
                    format!("{} is read more than once", r.path),
                    format!(
                        "{} pages read of a {}-page file: {passes:.1} passes in {} calls",
                        r.pages_read, r.extent_pages, r.calls
                    ),
                    NOTE,
                )
                .advice(
                    format!("read {} once and keep what is needed in memory", r.path),
                    None,
                    "the re-reads' CPU cost (page-cache copies) is not split out of the profile"
                        .into(),
                )
                .on(&r.path),
            );
        }
    }
    if out.findings.is_empty() {
        let evidence = match most {
            Some((m, path)) => format!("at most {m:.1} passes over a file ({path})"),
            None => format!(
                "{} file{} read, none of 8 pages or more",
                f.file_reads.len(),
                if f.file_reads.len() == 1 { "" } else { "s" }
            ),
        };
        out.findings.push(Finding::new(
            C::RedundantWork,
            V::Dismissed,
            "the run".into(),
            "the same file read more than once".into(),
            evidence,
            NOTE,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::facts::FileFact;
    use super::super::site::testing::*;
    use super::*;

    fn reading(passes: u64) -> Facts {
        let mut f = facts(100.0);
        f.file_reads_recorded = true;
        f.file_reads = vec![FileFact {
            path: "/tmp/data.bin".into(),
            pid: 1,
            calls: 16 * passes,
            pages_read: 256 * passes,
            extent_pages: 256,
        }];
        f
    }

    #[test]
    fn three_reads_of_one_file_are_confirmed() {
        let out = check(&reading(3));
        assert_eq!(out.findings[0].suspicion.verdict, V::Confirmed);
        assert!(out.findings[0].suspicion.evidence.contains("3.0 passes"));
    }

    #[test]
    fn one_read_is_dismissed_and_no_recording_warns() {
        assert_eq!(
            check(&reading(1)).findings[0].suspicion.verdict,
            V::Dismissed
        );
        let out = check(&facts(100.0));
        assert!(out.findings.is_empty() && out.warnings.len() == 1);
    }
}
