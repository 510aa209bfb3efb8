//! Resolving what the user typed (`FILE:QUALNAME`) and, when it does not exist, naming
//! the nearest names that do (edit distance).

use std::path::{Component, Path, PathBuf};

use super::python::Located;
use crate::error::Error;

/// Split `FILE:QUALNAME` at its last colon; the file becomes project-relative.
pub fn parse_spec(spec: &str) -> Result<(PathBuf, String), Error> {
    let (file, qual) = spec.rsplit_once(':').ok_or_else(|| {
        Error::Usage(format!(
            "'{spec}': expected FILE:QUALNAME, e.g. difflib.py:SequenceMatcher.find_longest_match"
        ))
    })?;
    let ok = !qual.is_empty()
        && qual.split('.').all(|p| {
            p == "<locals>"
                || (!p.is_empty()
                    && !p.starts_with(|c: char| c.is_ascii_digit())
                    && p.chars().all(|c| c == '_' || c.is_alphanumeric()))
        });
    if file.is_empty() || !ok {
        return Err(Error::Usage(format!(
            "'{spec}': expected FILE:QUALNAME with a Python qualified name, e.g. \
             app.py:main or difflib.py:SequenceMatcher.find_longest_match"
        )));
    }
    Ok((project_relative(Path::new(file))?, qual.to_string()))
}

/// An absolute path inside the working folder becomes relative to it; `./` is dropped.
fn project_relative(p: &Path) -> Result<PathBuf, Error> {
    let rel = if p.is_absolute() {
        let cwd = std::env::current_dir().map_err(|e| Error::io(Path::new("."), e))?;
        p.strip_prefix(&cwd).map(Path::to_path_buf).map_err(|_| {
            Error::Usage(format!(
                "'{}' is outside the project folder '{}': run profmap instrument in \
                     the project folder",
                p.display(),
                cwd.display()
            ))
        })?
    } else {
        p.to_path_buf()
    };
    Ok(rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect())
}

/// Levenshtein distance over characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The three candidates nearest to `want`, as "a, b, c" (or a note that there is none).
pub fn nearest<'a>(want: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    let mut c: Vec<(usize, &str)> = candidates.map(|c| (distance(want, c), c)).collect();
    c.sort();
    c.dedup();
    if c.is_empty() {
        return "there is none".into();
    }
    c.iter()
        .take(3)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The qualname as found in the file: exact, or with `<locals>.` left out.
pub fn resolve(file: &Path, want: &str, located: &Located) -> Result<String, Error> {
    let plain = |q: &str| q.replace("<locals>.", "");
    let hits: Vec<&super::python::Function> = located
        .functions
        .iter()
        .filter(|f| f.qualname == want || plain(&f.qualname) == plain(want))
        .collect();
    match hits.as_slice() {
        [one] if one.generator => {
            return Err(Error::Usage(format!(
                "'{want}' in {} is a generator: a wrapper would time only the call that \
                 creates it, not its iteration; instrument the function that consumes it \
                 instead; nothing was changed",
                file.display()
            )));
        }
        [one] => return Ok(one.qualname.clone()),
        [] => {}
        many => {
            let lines: Vec<String> = many.iter().map(|f| f.line.to_string()).collect();
            return Err(Error::Usage(format!(
                "'{want}' is defined {} times in {} (lines {}): profmap cannot tell which \
                 one runs; nothing was changed",
                many.len(),
                file.display(),
                lines.join(", ")
            )));
        }
    }
    let funcs = || located.functions.iter().map(|f| f.qualname.as_str());
    if let Some((outer, _)) = want.rsplit_once('.') {
        let known = located.classes.iter().any(|c| plain(c) == plain(outer))
            || funcs().any(|f| plain(f) == plain(outer));
        if !known {
            let containers = located.classes.iter().map(String::as_str).chain(funcs());
            return Err(Error::Usage(format!(
                "no class or function '{outer}' in {} (for '{want}'); nearest: {}",
                file.display(),
                nearest(outer, containers)
            )));
        }
    }
    Err(Error::Usage(format!(
        "no function '{want}' in {}; nearest: {}",
        file.display(),
        nearest(want, funcs())
    )))
}

/// The error for a file that does not exist, with the nearest Python files beside it.
pub fn unknown_file(file: &Path) -> Error {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .filter(|n| n.ends_with(".py"))
                .collect()
        })
        .unwrap_or_default();
    let want = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Error::Usage(format!(
        "no file '{}' in this project folder; nearest Python files in '{}': {}",
        file.display(),
        dir.display(),
        nearest(&want, names.iter().map(String::as_str))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_distances() {
        assert_eq!(distance("kitten", "sitting"), 3);
        let (f, q) = parse_spec("./a/difflib.py:SequenceMatcher.ratio").expect("spec");
        assert_eq!(f, PathBuf::from("a/difflib.py"));
        assert_eq!(q, "SequenceMatcher.ratio");
        assert!(parse_spec("difflib.py").is_err());
        assert!(parse_spec("difflib.py:a..b").is_err());
        assert_eq!(
            nearest("ratoi", ["ratio", "quick_ratio", "x"].into_iter()),
            "ratio, x, quick_ratio"
        );
    }
}
