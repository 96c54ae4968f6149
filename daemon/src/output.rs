//! The one place that writes the product's output to stdout (logs go to stderr).

use std::io::Write;

/// Write `text` to stdout. A closed pipe (`wattson report | head`) is not an error.
/// Control characters but the line break and tab are written as `?`: a name read from a
/// database a hand wrote cannot move the cursor, recolour the terminal or forge a line.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(without_controls(text).as_bytes());
    let _ = out.flush();
}

/// Write `text` and a newline to stdout, as [`print`] does.
pub fn println(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(without_controls(text).as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// `text` with every control character (C0, DEL and C1: the escape that starts a terminal
/// sequence, a carriage return that overwrites a line) but `\n` and `\t` replaced by `?`.
pub fn without_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let kept = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(kept) {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(
            text.chars()
                .map(|c| if kept(c) { c } else { '?' })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::without_controls;

    #[test]
    fn only_line_breaks_and_tabs_are_kept_of_the_control_characters() {
        assert_eq!(without_controls("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            without_controls("\u{1b}[31mRED\r\u{7f}\u{9b}x"),
            "?[31mRED???x"
        );
        assert!(matches!(
            without_controls("plain"),
            std::borrow::Cow::Borrowed("plain")
        ));
    }
}
