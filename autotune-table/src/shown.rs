//! Text from a table, a file name or the environment, made safe to show: in a
//! terminal, a cargo instruction, a generated Rust comment or string. Control
//! characters (escape sequences, newlines that would start a cargo directive),
//! characters that change the visible direction of text (which rustc refuses in
//! comments and literals: `text_direction_codepoint_in_comment`) and invisible
//! ones (zero-width spaces, which make `silu_mul\u{200b}` look like `silu_mul`)
//! are written as `\u{..}` escapes, so that what is shown is what is there.

/// Whether `c` must not reach a reader as itself.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidirectional embeddings, overrides and isolates; marks.
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                // Zero-width and invisible characters.
                | '\u{200b}'..='\u{200d}'
                | '\u{2060}'..='\u{2064}'
                | '\u{feff}'
                | '\u{00ad}'
                | '\u{180e}'
                // Line and paragraph separators: a line break to an editor, a
                // report reader and JavaScript, though not to Rust.
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `text` on one line: every hidden character (newlines too) as `\u{..}`.
pub fn line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with its line breaks kept and every other hidden character escaped:
/// for reports and Markdown printed to a terminal or written to a file.
pub fn lines(text: &str) -> String {
    text.split('\n').map(line).collect::<Vec<_>>().join("\n")
}

/// Whether `text` holds a hidden character.
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(line("NVIDIA H200"), "NVIDIA H200");
        assert_eq!(line("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(line("silu_mul\u{200b}"), "silu_mul\\u{200b}");
        assert_eq!(line("x\n\u{1b}[2Jy"), "x\\u{a}\\u{1b}[2Jy");
        assert_eq!(lines("a\nb\u{7}"), "a\nb\\u{7}");
        assert_eq!(line("µs → 1.2x"), "µs → 1.2x");
        assert!(has_hidden("\u{2066}") && !has_hidden("plain"));
        // Issue 50, item 12: these passed raw into generated comments and reports.
        assert_eq!(
            line("a\u{2028}b\u{2029}c\u{180e}"),
            "a\\u{2028}b\\u{2029}c\\u{180e}"
        );
    }
}
