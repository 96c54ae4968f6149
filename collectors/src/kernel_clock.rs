//! What the kernel says of the host's sleep: the id of this boot and how long the host has
//! slept since it (`CLOCK_BOOTTIME` counts suspended time, `CLOCK_MONOTONIC` does not; their
//! difference grows by exactly the time asleep, in suspend to RAM, to idle or hibernation).
//!
//! A daemon that runs through a suspend sees that difference jump between two of its polls;
//! one started after a stop compares it, and the boot id, with what it stored before: the
//! same boot and a difference grown by the time away is a host that slept; another boot is
//! a host that was off (or restarting).

use std::io;

use nix::time::{ClockId, clock_gettime};

use crate::SysRoot;

/// The kernel's account of this boot at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootClock {
    /// `/proc/sys/kernel/random/boot_id`: a random UUID, new at every boot.
    pub boot_id: String,
    /// How long the host has slept since it booted, ms (`CLOCK_BOOTTIME` less
    /// `CLOCK_MONOTONIC`).
    pub slept_ms: i64,
    /// How long since it booted, ms (`CLOCK_BOOTTIME`).
    pub since_boot_ms: i64,
}

/// How long the host has slept since it booted, ms: `CLOCK_BOOTTIME` less
/// `CLOCK_MONOTONIC`, read back to back (a few µs apart, so within a millisecond).
pub fn slept_ms() -> io::Result<i64> {
    let boot = clock_ms(ClockId::CLOCK_BOOTTIME)?;
    let mono = clock_ms(ClockId::CLOCK_MONOTONIC)?;
    Ok((boot - mono).max(0))
}

fn clock_ms(id: ClockId) -> io::Result<i64> {
    let t = clock_gettime(id).map_err(io::Error::from)?;
    Ok(t.tv_sec() * 1000 + t.tv_nsec() / 1_000_000)
}

/// The boot id under `root`'s procfs, refused unless it reads as the kernel writes it (a
/// lower-case UUID): it is stored, and only what wattson can vouch for is.
pub fn boot_id(root: &SysRoot) -> io::Result<String> {
    let path = root.proc_path("sys/kernel/random/boot_id");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let id = text.trim();
    if is_uuid(id) {
        Ok(id.to_owned())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: not a boot id (a UUID such as 3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e77)",
                path.display()
            ),
        ))
    }
}

/// Whether `s` is a lower-case hyphenated UUID.
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

/// This boot's id and sleep now.
pub fn read(root: &SysRoot) -> io::Result<BootClock> {
    let boot_id = boot_id(root)?;
    let since_boot_ms = clock_ms(ClockId::CLOCK_BOOTTIME)?;
    Ok(BootClock {
        boot_id,
        slept_ms: slept_ms()?,
        since_boot_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_id_is_read_only_as_the_kernel_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let file = dir.path().join("proc/sys/kernel/random/boot_id");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e77\n").unwrap();
        assert_eq!(
            boot_id(&root).unwrap(),
            "3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e77"
        );
        for bad in [
            "3F1C0E9A-7D4B-4E2F-9A51-0C6F2B8D1E77",
            "3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e7",
            "3f1c0e9a-7d4b-4e2f-9a51\n0c6f2b8d1e77",
            "x",
        ] {
            std::fs::write(&file, bad).unwrap();
            assert!(boot_id(&root).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_time_asleep_never_goes_back() {
        let a = slept_ms().unwrap();
        let b = slept_ms().unwrap();
        assert!(a >= 0 && b + 1 >= a, "{a} then {b}");
    }
}
