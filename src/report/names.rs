//! Long generic names shortened for people: in report.md's tables and the terminal a
//! Rust or C++ function such as
//! `<alloc::vec::Vec<T,A> as alloc::vec::spec_extend::SpecExtend<T,I>>::spec_extend`
//! reads `<alloc::vec::Vec<…> as alloc::vec::spec_extend::SpecExtend<…>>::spec_extend`.
//! The map keeps every full name; only views call [`short`].
//!
//! Rule: a balanced `<…>` group whose text is longer than [`KEEP`] characters becomes
//! `<…>`, except a qualified path's own brackets (`<X as Y>::f`, at the start of a
//! name), whose inside is shortened instead. `->` inside a group is not a closing
//! bracket. A `<` without its `>` (a comparison in a sentence) is left as it is.

/// Generic arguments up to this many characters are kept (`Vec<u8>`, `Mesh<unsigned long>`).
pub const KEEP: usize = 16;

/// `text` with its long generic argument lists shortened.
pub fn short(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '<' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(end) = closing(&chars, i) else {
            out.push(c);
            i += 1;
            continue;
        };
        let inner: String = chars[i + 1..end].iter().collect();
        let starts_path = i == 0 || matches!(chars[i - 1], ' ' | '(' | ',' | ';' | '[');
        let qualified = starts_path && chars.get(end + 1) == Some(&':');
        if qualified {
            out.push('<');
            out.push_str(&short(&inner));
            out.push('>');
        } else if inner.chars().count() > KEEP {
            out.push_str("<…>");
        } else {
            out.push('<');
            out.push_str(&inner);
            out.push('>');
        }
        i = end + 1;
    }
    out
}

/// Index of the `>` closing the `<` at `open`, ignoring `->`; None when unbalanced.
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '<' => depth += 1,
            '>' if k > 0 && chars[k - 1] == '-' => {}
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::short;

    #[test]
    fn long_generic_arguments_become_an_ellipsis() {
        assert_eq!(
            short("alloc::vec::Vec<profmap::analyse::calltree::CallNode>::push"),
            "alloc::vec::Vec<…>::push"
        );
        assert_eq!(
            short(
                "<alloc::vec::Vec<T,A> as alloc::vec::spec_extend::SpecExtend<T,I>>::spec_extend"
            ),
            "<alloc::vec::Vec<T,A> as alloc::vec::spec_extend::SpecExtend<T,I>>::spec_extend"
        );
        assert_eq!(
            short(
                "<std::collections::HashMap<alloc::string::String, u64> as core::clone::Clone>::clone"
            ),
            "<std::collections::HashMap<…> as core::clone::Clone>::clone"
        );
        assert_eq!(
            short("std::vector<int, std::allocator<int> >::push_back"),
            "std::vector<…>::push_back"
        );
    }

    #[test]
    fn short_arguments_arrows_and_comparisons_stay() {
        assert_eq!(short("black_box<u64>"), "black_box<u64>");
        assert_eq!(
            short("call<Box<dyn Fn(u8) -> u8 + Send + Sync>>"),
            "call<…>"
        );
        assert_eq!(short("held < 50 samples"), "held < 50 samples");
        assert_eq!(short("a -> b"), "a -> b");
    }
}
