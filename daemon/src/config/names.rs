//! The one rule for every name that reaches an MQTT topic, a Prometheus label, a file name or
//! a page: host names, meter, plug and UPS ids, configuration, sweep and series names, and the
//! host names the fleet collector is sent. Printable (no control characters, no invisible
//! direction marks), not empty, at most [`MAX_NAME_CHARS`] characters, and none of `/`, `+`,
//! `#` (MQTT's level separator and wildcards).
//!
//! A broker drops a CONNECT whose client id or will topic holds a control character without
//! saying why, and a page or a log shows such a name as something else: refused at the edge,
//! with the key that holds it (exit 78 for the configuration).

/// The longest name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest topic (a prefix or a plug's topic), in characters.
pub const MAX_TOPIC_CHARS: usize = 256;

/// Characters that change how the rest of a line reads without showing: bidirectional
/// overrides and isolates, zero-width marks, the byte order mark, and the line and paragraph
/// separators (YAML 1.1 readers, PyYAML among them, break a line there).
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// The first character of `s` that no name or topic may hold, in words.
fn unprintable(s: &str) -> Option<String> {
    s.chars()
        .find(|c| c.is_control() || is_invisible(*c))
        .map(|c| format!("the control character U+{:04X}", u32::from(c)))
}

/// Whether `name` follows the rule; `Err` says what breaks it.
pub fn check_name(name: &str) -> Result<(), String> {
    check_label(name)?;
    if let Some(c) = name.chars().find(|c| matches!(c, '/' | '+' | '#')) {
        return Err(format!(
            "must not contain {c:?} ('/', '+' and '#' separate and match MQTT topic levels)"
        ));
    }
    Ok(())
}

/// The rule without the MQTT characters, for names that never reach a topic (configuration,
/// sweep and price series names: "ASPM on/off" is one).
pub fn check_label(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if let Some(what) = unprintable(name) {
        return Err(format!(
            "holds {what}: names must be printable (they reach MQTT topics, labels and pages)"
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "is {} characters long; at most {MAX_NAME_CHARS}",
            name.chars().count()
        ));
    }
    Ok(())
}

/// Whether `topic` (a prefix, a plug's topic) is printable and bounded; levels (`/`) are
/// allowed, wildcards only where `wildcards` says.
pub fn check_topic(topic: &str, wildcards: bool) -> Result<(), String> {
    if topic.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if let Some(what) = unprintable(topic) {
        return Err(format!("holds {what}: topics must be printable"));
    }
    if topic.chars().count() > MAX_TOPIC_CHARS {
        return Err(format!(
            "is {} characters long; at most {MAX_TOPIC_CHARS}",
            topic.chars().count()
        ));
    }
    if !wildcards && topic.contains(['+', '#']) {
        return Err("must not contain '+' or '#'".to_owned());
    }
    Ok(())
}

/// Whether free text of any length (a model's description kept with it) is printable: no
/// control or invisible characters, as in a name.
pub fn check_text(text: &str) -> Result<(), String> {
    match unprintable(text) {
        Some(what) => Err(format!("holds {what}: text must be printable")),
        None => Ok(()),
    }
}

/// `check_label` for a clap value parser (trimmed).
pub fn parse_label(s: &str) -> Result<String, String> {
    check_label(s.trim())?;
    Ok(s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_topic_syntax_are_refused() {
        for bad in [
            "a\nb",
            "a\tb",
            "bell\u{7}",
            "nul\0",
            "",
            "a/b",
            "a+b",
            "a#b",
            "rtl\u{202E}x",
            "line\u{2028}separator",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(65)).is_err());
        for good in ["basket", "NAS 2", "büro-pi", "x".repeat(64).as_str()] {
            check_name(good).unwrap();
        }
        assert!(check_name("a\nb").unwrap_err().contains("U+000A"));
        check_topic("tele/plug/SENSOR", false).unwrap();
        assert!(check_topic("tele/+/SENSOR", false).is_err());
        check_topic("tele/+/SENSOR", true).unwrap();
        assert!(check_topic("tele/\u{1}", true).is_err());
    }
}
