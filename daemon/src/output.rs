//! The one place that writes the product's output to stdout (logs go to stderr).

use std::io::Write;

/// Write `text` to stdout. A closed pipe (`wattson report | head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Write `text` and a newline to stdout.
pub fn println(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}
