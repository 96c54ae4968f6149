//! Operating modes of a configuration: `standby`, `idle`, `1 loop`, `2 loops`, ...
//!
//! Sweep levels are named like manual modes so that a swept configuration and one read off
//! a meter's display by hand line up in the same table.

/// The mode a sleeping machine is in (suspended to RAM or idle): what `[[config]]` modes
/// call its power asleep.
pub const STANDBY: &str = "standby";

/// The mode name for a sweep level of `loops` busy loops (0 is `idle`).
pub fn level_name(loops: u32) -> String {
    match loops {
        0 => "idle".to_owned(),
        1 => "1 loop".to_owned(),
        n => format!("{n} loops"),
    }
}

/// The number of loops a mode name stands for, if it is a level name.
pub fn level_loops(mode: &str) -> Option<u32> {
    match mode {
        "idle" => Some(0),
        "1 loop" => Some(1),
        _ => mode.strip_suffix(" loops")?.trim().parse().ok(),
    }
}

/// Sort key: standby, idle, 1 loop, 2 loops, ..., then anything else.
pub fn mode_rank(mode: &str) -> (u32, u32, String) {
    if mode == STANDBY {
        return (0, 0, String::new());
    }
    match level_loops(mode) {
        Some(n) => (1, n, String::new()),
        None => (2, 0, mode.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort() {
        for n in [0, 1, 2, 16] {
            assert_eq!(level_loops(&level_name(n)), Some(n));
        }
        let mut modes = vec!["2 loops", "full", "idle", "10 loops", "standby", "1 loop"];
        modes.sort_by_key(|m| mode_rank(m));
        assert_eq!(
            modes,
            ["standby", "idle", "1 loop", "2 loops", "10 loops", "full"]
        );
    }
}
