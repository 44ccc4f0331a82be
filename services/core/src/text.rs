//! Text as the interface's rules see it.

/// Whitespace as the OpenAPI description's regular expressions (ECMA-262 `\s`) see it,
/// so a string the pattern `\S` accepts is one the code accepts.
pub fn is_ecma_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// `s` without leading and trailing `is_ecma_space` characters.
pub fn trim_ecma(s: &str) -> &str {
    s.trim_matches(is_ecma_space)
}
