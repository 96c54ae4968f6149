//! Where a key was written, for the checks that can only be made when the setting is used
//! (a file it names that this user cannot read): their errors name the line as a bad value's
//! do.

use std::collections::BTreeMap;

/// The line of each key of a section whose value is checked only when used, by its full name
/// (`mqtt.password_file`). Not part of what the configuration says: two configurations that
/// say the same thing are equal wherever their keys were written, so it is left out of
/// comparisons (a reload that moved a line changes nothing) and of the effective config.
#[derive(Debug, Clone, Default)]
pub struct KeyLines(BTreeMap<&'static str, usize>);

impl KeyLines {
    pub(super) fn set(&mut self, key: &'static str, line: usize) {
        self.0.insert(key, line);
    }

    /// The line `key` was written on, where the configuration came from a file that has it.
    pub fn line(&self, key: &str) -> Option<usize> {
        self.0.get(key).copied()
    }
}

impl PartialEq for KeyLines {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_by_key_and_never_tell_two_configs_apart() {
        let mut a = KeyLines::default();
        a.set("mqtt.password_file", 7);
        assert_eq!(a.line("mqtt.password_file"), Some(7));
        assert_eq!(a.line("mqtt.ca_file"), None);
        assert_eq!(a, KeyLines::default());
    }
}
