//! Programs installed on the system (`/usr/bin/sort`, `/bin/gzip`): code the user runs
//! but did not write. A finding located in one ("shorten the critical section at
//! sort+0xac90") is right about the code and useless as advice: its hint says so and
//! what can change instead (how the program is run, or which program). Their on-CPU
//! time counts with library code for `already_optimized`: `gzip -9` spending its run
//! in deflate's match loop is the tool's work, not a defect of the user's.
//!
//! Installed means an executable (no `.so` in its name) under one of [`SYSTEM_DIRS`],
//! not under `/usr/local` (what the user built and installed), and not an interpreter
//! (`python3`, `node`...: its time is the user's script's).

use std::collections::BTreeMap;

use crate::profile::SampledProfile;

use super::facts::Facts;
use super::types::Finding;

/// Folders of the distribution's programs.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin/",
    "/bin/",
    "/usr/sbin/",
    "/sbin/",
    "/usr/libexec/",
    "/usr/lib/",
];

/// Programs that run the user's code: their time is the script's.
const INTERPRETERS: &[&str] = &[
    "python", "node", "nodejs", "perl", "ruby", "php", "java", "lua", "Rscript", "R", "bash",
    "dash", "sh", "zsh", "ksh",
];

/// The installed programs among a profile's modules: module name → path.
pub fn system_binaries(p: &SampledProfile) -> BTreeMap<String, String> {
    p.modules
        .iter()
        .filter(|m| is_installed(&m.name, &m.path))
        .map(|m| (m.name.clone(), m.path.clone()))
        .collect()
}

fn is_installed(name: &str, path: &str) -> bool {
    let interpreter = INTERPRETERS.iter().any(|i| {
        name.strip_prefix(i)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    });
    !name.contains(".so")
        && !name.starts_with('[')
        && !interpreter
        && SYSTEM_DIRS.iter().any(|d| path.starts_with(d))
}

/// The installed program a finding's code is in: its location names the program's code
/// (`sort+0xac90`, or a function of a step in that module).
pub fn program_of<'a>(f: &'a Facts, x: &Finding) -> Option<&'a str> {
    let loc = &x.suspicion.location;
    let by_location = f.system_binaries.iter().find(|(name, _)| {
        loc.strip_prefix(name.as_str())
            .is_some_and(|rest| rest.starts_with("+0x"))
    });
    let by_step = || {
        x.suspicion.affected_steps.first().and_then(|id| {
            let s = f.step(id)?;
            let m = s.module.as_deref()?;
            f.system_binaries.get_key_value(m)
        })
    };
    by_location.or_else(by_step).map(|(_, path)| path.as_str())
}

/// What a hint about an installed program's code adds.
pub fn hint_note(path: &str) -> String {
    format!(
        " — this code is {path}, a program installed on the system, not yours: change how it \
         is run (its options, threads, input) or use another program"
    )
}

#[cfg(test)]
mod tests {
    use super::super::site::testing::{facts, step};
    use super::super::types::{SuspicionCategory as C, SuspicionVerdict as V};
    use super::*;

    #[test]
    fn installed_programs_are_executables_of_the_system_but_not_interpreters() {
        assert!(is_installed("sort", "/usr/bin/sort"));
        assert!(is_installed("gzip", "/bin/gzip"));
        assert!(is_installed(
            "cc1",
            "/usr/libexec/gcc/x86_64-linux-gnu/12/cc1"
        ));
        assert!(!is_installed(
            "libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6"
        ));
        assert!(!is_installed("mytool", "/usr/local/bin/mytool"));
        assert!(!is_installed("app", "/home/u/app/target/release/app"));
        assert!(!is_installed("python3.11", "/usr/bin/python3.11"));
        assert!(!is_installed("node", "/usr/bin/node"));
        assert!(is_installed(
            "pythonista-helper",
            "/usr/bin/pythonista-helper"
        ));
    }

    #[test]
    fn a_finding_in_an_installed_program_is_named_by_its_location_or_step() {
        let mut f = facts(100.0);
        f.system_binaries
            .insert("sort".into(), "/usr/bin/sort".into());
        let finding = |loc: &str| {
            Finding::new(
                C::Other,
                V::Confirmed,
                loc.into(),
                "x".into(),
                "x".into(),
                "x",
            )
        };
        assert_eq!(
            program_of(&f, &finding("sort+0xac90")),
            Some("/usr/bin/sort")
        );
        assert_eq!(program_of(&f, &finding("sorter+0x10")), None);
        assert_eq!(program_of(&f, &finding("main (app.c:3)")), None);
        let mut s = step("1.2", "merge (sort.c:40)", 10.0);
        s.module = Some("sort".into());
        f.steps = vec![s];
        let x = finding("merge (sort.c:40)").steps(vec!["1.2".into()]);
        assert_eq!(program_of(&f, &x), Some("/usr/bin/sort"));
    }
}
