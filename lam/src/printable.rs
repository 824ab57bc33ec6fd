//! Text from elsewhere (a store, a proxy's `/lam/stats`, a preview) made
//! safe to print on a terminal: one rule for every command.

/// `text` printable on one line: control characters (newlines, tabs, the
/// escapes that move the cursor, set the clipboard or clear the screen, C1
/// controls) and the bidirectional overrides that reorder what is shown
/// escaped as Rust writes them (`\n`, `\u{1b}`); a backslash as `\\`.
pub fn escaped(text: &str) -> String {
    text.chars().flat_map(|c| if must_escape(c) { c.escape_debug().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// The first line of `head` (bytes, possibly cut mid-character), printable
/// as [`escaped`], invalid UTF-8 as `\xNN`.
pub fn first_line(head: &[u8]) -> String {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    line.utf8_chunks().map(|c| escaped(c.valid()) + &c.invalid().iter().map(|b| format!("\\x{b:02x}")).collect::<String>()).collect()
}

fn must_escape(c: char) -> bool {
    c.is_control() || c == '\\' || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_overrides_are_escaped() {
        assert_eq!(escaped("run\n1\t\x1b[31m"), "run\\n1\\t\\u{1b}[31m");
        assert_eq!(escaped("plain-é"), "plain-é");
        // OSC 52 (the clipboard), ESC[2J (clear), a C1 CSI, a right-to-left override.
        let hostile = "a\x1b]52;c;SGVsbG8=\x07b\x1b[2J\u{9b}2J\u{202e}cba";
        let shown = escaped(hostile);
        assert!(shown.chars().all(|c| !must_escape(c) || c == '\\'), "{shown}");
        assert_eq!(shown, "a\\u{1b}]52;c;SGVsbG8=\\u{7}b\\u{1b}[2J\\u{9b}2J\\u{202e}cba");
    }

    #[test]
    fn first_lines_are_one_printable_line() {
        assert_eq!(first_line(b"abc\ndef"), "abc");
        assert_eq!(first_line(b"a\tb\xffc\r"), "a\\tb\\xffc\\r");
        assert_eq!(first_line(b""), "");
    }
}
