//! Secrets in a command line, replaced by `***` before the command is written anywhere
//! (map, summary, report, baseline, run.log headers, the recording).
//!
//! The forms recognised are a table ([`SECRET_KEYS`]) applied word by word:
//! - `KEY=VALUE` and `--KEY=VALUE` (also inside `a=1&token=x` query strings) when KEY
//!   names a secret: `--password=hunter2`, `token=abc`, `AWS_SECRET_ACCESS_KEY=…`;
//! - a secret flag followed by its value as the next word: `--api-key abc`;
//! - `Header: value` when the header names a secret (`X-Api-Key: abc`);
//! - the word after `Bearer` or `Basic` (`Authorization: Bearer xyz`);
//! - the password of a URL: `postgres://user:pass@host/db` → `postgres://user:***@host/db`.
//!
//! Words are split on single spaces and joined back the same way, so a text that held
//! no secret comes back byte for byte.

/// Substrings of a key (lower case, `_` read as `-`) that mark its value as a secret.
pub const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api-key",
    "apikey",
    "access-key",
    "private-key",
    "credential",
    "authorization",
    "auth-key",
    "session-key",
];

/// Words after which the next word is a credential.
const SCHEMES: &[&str] = &["bearer", "basic", "token"];

/// What replaces a secret.
pub const MASK: &str = "***";

/// Whether a key (`--api_key`, `AWS_SECRET_ACCESS_KEY`, `X-Api-Key:`) names a secret.
pub fn is_secret_key(key: &str) -> bool {
    let k = key
        .trim_start_matches('-')
        .trim_end_matches(':')
        .to_ascii_lowercase()
        .replace('_', "-");
    !k.is_empty() && SECRET_KEYS.iter().any(|s| k.contains(s))
}

/// Redact every argument of a command; a secret flag's value may be the next argument.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut prev: Option<&str> = None;
    for a in argv {
        let masked = match prev {
            Some(p) if takes_secret_value(p) => MASK.to_string(),
            _ => redact_text(a),
        };
        out.push(masked);
        prev = a.rsplit(' ').next();
    }
    out
}

/// Redact a free text (a logged command line, a header value).
pub fn redact_text(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut prev = "";
    for w in text.split(' ') {
        let scheme = SCHEMES.contains(&w.to_ascii_lowercase().as_str());
        out.push(if takes_secret_value(prev) && !w.is_empty() && !scheme {
            MASK.to_string()
        } else {
            redact_word(w)
        });
        if !w.is_empty() {
            prev = w;
        }
    }
    out.join(" ")
}

/// A word whose next word is a secret: `--password`, `X-Api-Key:`, `Bearer`.
fn takes_secret_value(w: &str) -> bool {
    let flag = (w.starts_with('-') || w.ends_with(':')) && !w.contains('=');
    (flag && is_secret_key(w)) || SCHEMES.contains(&w.to_ascii_lowercase().as_str())
}

/// One word: URL credentials, then `KEY=VALUE` pairs.
fn redact_word(w: &str) -> String {
    let w = redact_url(w);
    if !w.contains('=') {
        return w;
    }
    w.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if is_secret_key(k.rsplit(['?', ';']).next().unwrap_or(k)) => {
                format!("{k}={MASK}")
            }
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `scheme://user:pass@host` → `scheme://user:***@host`.
fn redact_url(w: &str) -> String {
    let Some(start) = w.find("://").map(|i| i + 3) else {
        return w.to_string();
    };
    let rest = &w[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else {
        return w.to_string();
    };
    let Some(colon) = rest[..at].find(':') else {
        return w.to_string();
    };
    format!("{}{}{MASK}{}", &w[..start], &rest[..=colon], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        redact_argv(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn key_value_forms() {
        assert_eq!(redact_text("--password=hunter2"), "--password=***");
        assert_eq!(redact_text("token=abc"), "token=abc".replace("abc", MASK));
        assert_eq!(
            redact_text("AWS_SECRET_ACCESS_KEY=wJalr x=1"),
            "AWS_SECRET_ACCESS_KEY=*** x=1"
        );
        assert_eq!(
            redact_text("http://h/p?a=1&api_key=zz&b=2"),
            "http://h/p?a=1&api_key=***&b=2"
        );
    }

    #[test]
    fn next_word_forms() {
        assert_eq!(
            argv(&["x", "--api-key", "abc", "y"]),
            ["x", "--api-key", "***", "y"]
        );
        assert_eq!(
            argv(&["curl", "-H", "Authorization: Bearer xyz"]),
            ["curl", "-H", "Authorization: Bearer ***"]
        );
        assert_eq!(redact_text("-H X-Api-Key: k1 z"), "-H X-Api-Key: *** z");
        assert_eq!(argv(&["a", "Bearer", "tok"]), ["a", "Bearer", "***"]);
    }

    #[test]
    fn url_passwords() {
        assert_eq!(
            redact_text("psql postgres://u:pw@h/db"),
            "psql postgres://u:***@h/db"
        );
        assert_eq!(redact_text("https://u@h/a:b@c"), "https://u@h/a:b@c");
        assert_eq!(redact_text("ssh://h:22/x"), "ssh://h:22/x");
    }

    #[test]
    fn harmless_text_is_unchanged() {
        for s in [
            "make -j2  all",
            "sh -c 'echo hi'",
            "--author=me",
            "cc -o a.out x.c",
            "",
        ] {
            assert_eq!(redact_text(s), s);
        }
        assert!(!is_secret_key("--verbose"));
    }
}
