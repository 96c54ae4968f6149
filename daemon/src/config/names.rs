//! The one rule for every name that reaches an MQTT topic, a Prometheus label, a file name or
//! a page: host names, meter, plug and UPS ids, configuration, sweep and series names, and the
//! host names the fleet collector is sent. Printable (no control characters, no invisible
//! direction marks, no Unicode noncharacters), not empty, at most [`MAX_NAME_CHARS`] characters, and none of `/`, `+`,
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

/// Why a name, a topic or a text is refused, said after the value (`"a/b" must not
/// contain '/'`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error(
        "holds the unprintable character U+{:04X}: names must be printable (they reach MQTT \
         topics, labels and pages)",
        u32::from(*.0)
    )]
    UnprintableName(char),
    #[error("holds the unprintable character U+{:04X}: topics must be printable", u32::from(*.0))]
    UnprintableTopic(char),
    #[error("holds the unprintable character U+{:04X}: text must be printable", u32::from(*.0))]
    UnprintableText(char),
    /// `chars` characters where at most `max` are taken.
    #[error("is {chars} characters long; at most {max}")]
    TooLong { chars: usize, max: usize },
    /// A name holds MQTT's level separator or a wildcard.
    #[error("must not contain {0:?} ('/', '+' and '#' separate and match MQTT topic levels)")]
    TopicSign(char),
    #[error("must not contain '+' or '#'")]
    Wildcard,
}

/// Unicode's noncharacters (U+FDD0-U+FDEF and the last two code points of every plane,
/// U+FFFE and U+FFFF among them): MQTT 3.1.1 (1.5.3) says a topic should not hold them and
/// lets the receiver close the connection of a client that sends one.
fn is_noncharacter(c: char) -> bool {
    matches!(c, '\u{FDD0}'..='\u{FDEF}') || u32::from(c) & 0xFFFE == 0xFFFE
}

/// The first character of `s` that no name or topic may hold.
fn unprintable(s: &str) -> Option<char> {
    s.chars()
        .find(|&c| c.is_control() || is_invisible(c) || is_noncharacter(c))
}

/// Whether `name` follows the rule; `Err` says what breaks it.
pub fn check_name(name: &str) -> Result<(), NameError> {
    check_label(name)?;
    if let Some(c) = name.chars().find(|c| matches!(c, '/' | '+' | '#')) {
        return Err(NameError::TopicSign(c));
    }
    Ok(())
}

/// The rule without the MQTT characters, for names that never reach a topic (configuration,
/// sweep and price series names: "ASPM on/off" is one).
pub fn check_label(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(c) = unprintable(name) {
        return Err(NameError::UnprintableName(c));
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(NameError::TooLong {
            chars,
            max: MAX_NAME_CHARS,
        });
    }
    Ok(())
}

/// Whether `topic` (a prefix, a plug's topic) is printable and bounded; levels (`/`) are
/// allowed, wildcards only where `wildcards` says.
pub fn check_topic(topic: &str, wildcards: bool) -> Result<(), NameError> {
    if topic.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(c) = unprintable(topic) {
        return Err(NameError::UnprintableTopic(c));
    }
    let chars = topic.chars().count();
    if chars > MAX_TOPIC_CHARS {
        return Err(NameError::TooLong {
            chars,
            max: MAX_TOPIC_CHARS,
        });
    }
    if !wildcards && topic.contains(['+', '#']) {
        return Err(NameError::Wildcard);
    }
    Ok(())
}

/// Whether free text of any length (a model's description kept with it) is printable: no
/// control or invisible characters, as in a name.
pub fn check_text(text: &str) -> Result<(), NameError> {
    match unprintable(text) {
        Some(c) => Err(NameError::UnprintableText(c)),
        None => Ok(()),
    }
}

/// `check_label` for a clap value parser (trimmed).
pub fn parse_label(s: &str) -> Result<String, NameError> {
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
            "non\u{FFFF}",
            "non\u{FFFE}",
            "non\u{FDD0}",
            "plane\u{10FFFF}",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(65)).is_err());
        for good in [
            "basket",
            "NAS 2",
            "büro-pi",
            "\u{FFFD}",
            "\u{1F50C}",
            "x".repeat(64).as_str(),
        ] {
            check_name(good).unwrap();
        }
        assert!(
            check_name("a\nb")
                .unwrap_err()
                .to_string()
                .contains("U+000A")
        );
        check_topic("tele/plug/SENSOR", false).unwrap();
        assert!(check_topic("tele/+/SENSOR", false).is_err());
        check_topic("tele/+/SENSOR", true).unwrap();
        assert!(check_topic("tele/\u{1}", true).is_err());
        assert!(check_topic("tele/\u{FFFF}", true).is_err());
    }
}
